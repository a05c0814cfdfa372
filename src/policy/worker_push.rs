//! What the server-side hook lets a dispatch worker push: one new ref under its results prefix,
//! `refs/forum/results/LEDGER/RUN/TASK/ATTEMPT`, and nothing else (no branch, no ledger, no
//! update of a results ref that exists, no deletion). Pure: the hook hands in the push options
//! and the user the server authenticated, and each update's name and whether its old or new
//! value is the zero id.
//!
//! A push is a worker's when it carries the push option `forum-worker=NAME` (what `git forum
//! worker` sends: self-declared, so it holds an honest worker to its prefix but stops nobody
//! who leaves it out), or when the user the server authenticated (`REMOTE_USER` from a web
//! server, `GL_USER` from gitolite) is one the repository lists in `forum.workerUser` (then
//! the rule holds whatever the push says).

/// The push option a worker's push carries: `forum-worker=NAME`.
pub(crate) const OPTION: &str = "forum-worker";

/// Where every worker result lives on the remote.
pub(crate) const RESULTS_PREFIX: &str = "refs/forum/results/";

/// The most push options the hook reads (git sends one per `-o`).
pub(crate) const MAX_OPTIONS: usize = 100;

/// The worker a push comes from, if it comes from one: the name its `forum-worker` option
/// gives (`unnamed` for a bare `forum-worker`), else the authenticated `user` when
/// `worker_users` lists it.
pub(crate) fn worker_of(
    options: &[String],
    user: Option<&str>,
    worker_users: &[String],
) -> Option<String> {
    let declared = options.iter().find_map(|o| match o.split_once('=') {
        Some((k, v)) if k == OPTION => Some(if v.trim().is_empty() {
            "unnamed".to_string()
        } else {
            v.trim().chars().take(128).collect()
        }),
        None if o == OPTION => Some("unnamed".to_string()),
        _ => None,
    });
    declared.or_else(|| {
        user.filter(|u| !u.is_empty() && worker_users.iter().any(|w| w == u))
            .map(str::to_string)
    })
}

/// Whether `refname` is a results ref of the shape a worker pushes:
/// `refs/forum/results/LEDGER/RUN/TASK/ATTEMPT`, RUN a number, TASK a name of `A-Z a-z 0-9 .
/// _ -` (not starting with `.` or `-`), ATTEMPT 32 lower-case hex digits.
pub(crate) fn is_results_ref(refname: &str) -> bool {
    let Some(rest) = refname.strip_prefix(RESULTS_PREFIX) else {
        return false;
    };
    let mut parts = rest.rsplitn(4, '/');
    let (Some(attempt), Some(task), Some(run), Some(ledger)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let attempt_ok = attempt.len() == 32
        && attempt
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let run_ok = !run.is_empty() && run.len() <= 20 && run.bytes().all(|b| b.is_ascii_digit());
    let task_ok = (1..=128).contains(&task.len())
        && task
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && !task.starts_with(['.', '-'])
        && !task.contains("..")
        && !task.ends_with(".lock");
    attempt_ok && run_ok && task_ok && !ledger.is_empty()
}

/// Why the worker `worker`'s update of `refname` is refused (`creates`: its old value is the
/// zero id; `deletes`: its new value is), or `None` when it is one new results ref.
pub(crate) fn refusal(worker: &str, refname: &str, creates: bool, deletes: bool) -> Option<String> {
    if deletes {
        return Some(format!(
            "worker {worker} may not delete refs; a worker only adds its result under {RESULTS_PREFIX}"
        ));
    }
    if !is_results_ref(refname) {
        return Some(format!(
            "worker {worker} may push only to {RESULTS_PREFIX}LEDGER/RUN/TASK/ATTEMPT, not to {refname}"
        ));
    }
    if !creates {
        return Some(format!(
            "worker {worker} may only create a results ref, and this one exists already; an attempt is answered once"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const REF: &str = "refs/forum/results/main/4/T1/0123456789abcdef0123456789abcdef";

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_push_is_a_workers_by_its_option_or_by_a_listed_user() {
        assert_eq!(
            worker_of(&v(&["ci.skip", "forum-worker=w1"]), None, &[]),
            Some("w1".into())
        );
        assert_eq!(
            worker_of(&v(&["forum-worker"]), None, &[]),
            Some("unnamed".into())
        );
        assert_eq!(worker_of(&v(&["forum-workers=x"]), None, &[]), None);
        let listed = v(&["bot"]);
        assert_eq!(worker_of(&[], Some("bot"), &listed), Some("bot".into()));
        assert_eq!(worker_of(&[], Some("alice"), &listed), None);
        assert_eq!(worker_of(&[], None, &listed), None);
    }

    #[test]
    fn a_worker_may_only_create_a_results_ref_of_the_right_shape() {
        assert_eq!(refusal("w", REF, true, false), None);
        // Ledger names may hold slashes.
        let nested = "refs/forum/results/team/a/0/T-2.x/0123456789abcdef0123456789abcdef";
        assert_eq!(refusal("w", nested, true, false), None);
        for bad in [
            "refs/heads/main",
            "refs/forum/ledgers/main",
            "refs/forum/bases/main/4/T1",
            "refs/forum/results/main/4/T1",
            "refs/forum/results/main/x/T1/0123456789abcdef0123456789abcdef",
            "refs/forum/results/main/4/T1/0123456789ABCDEF0123456789abcdef",
            "refs/forum/results/main/4/.T1/0123456789abcdef0123456789abcdef",
            "refs/forum/results/4/T1/0123456789abcdef0123456789abcdef",
        ] {
            let why = refusal("w", bad, true, false).unwrap_or_default();
            assert!(why.contains("may push only to"), "{bad}: {why}");
            assert!(!why.contains('\n'));
        }
        assert!(
            refusal("w", REF, false, false)
                .unwrap()
                .contains("exists already")
        );
        assert!(
            refusal("w", REF, false, true)
                .unwrap()
                .contains("may not delete")
        );
    }
}
