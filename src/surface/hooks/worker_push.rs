//! The dispatch workers' rule of the server-side hook ([`crate::policy::worker_push`]): who
//! pushes, from what the receiving git hands the hook (the push options in
//! `GIT_PUSH_OPTION_COUNT` and `GIT_PUSH_OPTION_N`, which git gives pre-receive but not the
//! update hook) and what the server says of the user (`REMOTE_USER`, `GL_USER`), held against
//! the repository's `forum.workerUser`; and the updates of a worker's push it refuses.

use super::{RefUpdate, RefusedUpdate};
use crate::policy::worker_push::{self, MAX_OPTIONS};
use crate::store::sync::Git;
use crate::surface::{Error, Result};

/// The variables a server sets to the user it authenticated, in the order read: a web server
/// in front of `git http-backend`, then gitolite.
const USER_VARS: [&str; 2] = ["REMOTE_USER", "GL_USER"];

/// What the receiving side knows of who pushes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Pusher {
    /// The push options sent (`git push -o OPTION`).
    pub(crate) options: Vec<String>,
    /// The user the server authenticated, when it says.
    pub(crate) user: Option<String>,
}

impl Pusher {
    /// What this hook process was told by the git that runs it (at most [`MAX_OPTIONS`]
    /// options, each at most 4 KiB).
    pub(crate) fn from_env() -> Pusher {
        let count = std::env::var("GIT_PUSH_OPTION_COUNT")
            .ok()
            .and_then(|n| n.trim().parse::<usize>().ok())
            .unwrap_or(0)
            .min(MAX_OPTIONS);
        let options = (0..count)
            .filter_map(|i| std::env::var(format!("GIT_PUSH_OPTION_{i}")).ok())
            .filter(|o| o.len() <= 4096)
            .collect();
        let user = USER_VARS
            .iter()
            .filter_map(|v| std::env::var(v).ok())
            .find(|u| !u.is_empty() && u.len() <= 256);
        Pusher { options, user }
    }
}

/// The updates refused because `pusher` is a worker and they are not one new results ref
/// each (none when the push is not a worker's).
pub(crate) fn refusals(
    git: &Git,
    pusher: &Pusher,
    updates: &[RefUpdate],
) -> Result<Vec<RefusedUpdate>> {
    // The listed users are read only when the push names no worker itself.
    let listed =
        if pusher.user.is_some() && worker_push::worker_of(&pusher.options, None, &[]).is_none() {
            let o = git
                .run(&["config", "--get-all", "forum.workerUser"])
                .map_err(Error::from)?;
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect()
        } else {
            Vec::new()
        };
    let Some(worker) = worker_push::worker_of(&pusher.options, pusher.user.as_deref(), &listed)
    else {
        return Ok(Vec::new());
    };
    let zero = |o: &str| !o.is_empty() && o.bytes().all(|b| b == b'0');
    Ok(updates
        .iter()
        .filter_map(|u| {
            worker_push::refusal(&worker, &u.refname, zero(&u.old), zero(&u.new)).map(|why| {
                RefusedUpdate {
                    refname: u.refname.clone(),
                    why,
                }
            })
        })
        .collect())
}

/// Lets clients send push options to the repository `git` works in
/// (`receive.advertisePushOptions`), so a worker's `forum-worker` option reaches the hook.
pub(crate) fn advertise_push_options(git: &Git) -> Result<()> {
    let o = git
        .run(&["config", "receive.advertisePushOptions", "true"])
        .map_err(Error::from)?;
    if o.status.success() {
        Ok(())
    } else {
        Err(Error::unavailable(format!(
            "cannot set receive.advertisePushOptions: {}",
            crate::store::sync::failure_line(&o)
        )))
    }
}
