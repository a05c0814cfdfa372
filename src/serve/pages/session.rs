//! Who may read the review pages: one-time login tokens minted for `git forum view` (over the
//! daemon's bearer token) and the sessions they open, kept in this process's memory only. A
//! login token is good once and for ten minutes; a session is a random value in an HttpOnly,
//! SameSite=Strict cookie scoped to `/view`, good until the daemon stops.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The cookie that carries a session.
pub(super) const COOKIE: &str = "forum_view";

/// How long a minted login URL stays usable.
const LOGIN_LIFE: Duration = Duration::from_secs(600);

/// Login tokens and sessions kept at once; past it the oldest is dropped.
const KEPT: usize = 256;

/// The pages' own credentials (see the module doc).
#[derive(Default)]
pub(crate) struct View {
    logins: Mutex<HashMap<String, (String, Instant)>>,
    sessions: Mutex<VecDeque<String>>,
    /// The runs as of the ledger's last tip a page read.
    pub(super) runs: super::runs::Cached,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A fresh random value (256 bits, hex).
fn random() -> Option<String> {
    crate::serve::token::new_token().ok()
}

impl View {
    /// A new login token that leads to `target` (a path under `/view/`) once.
    pub(super) fn mint(&self, target: String) -> Option<String> {
        let t = random()?;
        let mut logins = lock(&self.logins);
        logins.retain(|_, (_, made)| made.elapsed() < LOGIN_LIFE);
        if logins.len() >= KEPT
            && let Some(oldest) = logins
                .iter()
                .min_by_key(|(_, (_, made))| *made)
                .map(|(k, _)| k.clone())
        {
            logins.remove(&oldest);
        }
        logins.insert(t.clone(), (target, Instant::now()));
        Some(t)
    }

    /// Uses up the login token `t`: its target and a new session, or `None` when the token
    /// was never minted, was used already or is too old.
    pub(super) fn login(&self, t: &str) -> Option<(String, String)> {
        let (target, made) = lock(&self.logins).remove(t)?;
        if made.elapsed() >= LOGIN_LIFE {
            return None;
        }
        let session = random()?;
        let mut sessions = lock(&self.sessions);
        if sessions.len() >= KEPT {
            sessions.pop_front();
        }
        sessions.push_back(session.clone());
        Some((target, session))
    }

    /// Whether a `Cookie` header value carries a session this daemon opened.
    pub(super) fn admits(&self, cookie_header: Option<&str>) -> bool {
        let Some(value) = cookie_header.and_then(session_of) else {
            return false;
        };
        let sessions = lock(&self.sessions);
        sessions.iter().any(|s| same(s, value))
    }
}

/// The session value in a `Cookie` header (`a=1; forum_view=...`).
fn session_of(header: &str) -> Option<&str> {
    header.split(';').find_map(|pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k == COOKIE).then_some(v.trim())
    })
}

/// Equality in time that depends only on the lengths.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The `Set-Cookie` value of a new session.
pub(super) fn set_cookie(session: &str) -> String {
    format!("{COOKIE}={session}; HttpOnly; SameSite=Strict; Path=/view")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_login_token_works_once_and_opens_a_session() {
        let v = View::default();
        let t = v.mint("/view/run/3".into()).unwrap();
        let (target, session) = v.login(&t).unwrap();
        assert_eq!(target, "/view/run/3");
        assert!(v.login(&t).is_none(), "a login token is good once");
        assert!(v.login("nothing").is_none());
        let header = format!("a=b; {COOKIE}={session}");
        assert!(v.admits(Some(&header)));
        assert!(!v.admits(Some("forum_view=0000")));
        assert!(!v.admits(None));
        assert!(set_cookie(&session).contains("HttpOnly; SameSite=Strict; Path=/view"));
    }
}
