//! Crash and race testing: named steps of an append where a test may kill the process or run
//! a command.

/// A crash-testing hook: with `GIT_FORUM_FAILPOINT=NAME` in the environment, the process kills
/// itself (SIGKILL, so nothing is cleaned up) when it reaches the step `NAME` of an append:
/// `objects-written`, `cas-start`, `cas-locked`, `cas-reflog`, `cas-moved`, `ref-lock-created`
/// (a ref lock created as a new file, its value not yet written: the way left where no spare
/// inode can serve), `wal-logged` (its
/// write-ahead log record written, the writer lock released, no flush yet), `wal-flush`
/// (holding the flush lock, about to flush the log for itself and the appenders queued
/// behind), `appended` (the append is about to be acknowledged), `integrate-start` (a
/// `--work` run about to move its run branch), `integrate-moved` (its run branch moved, the
/// `integrated` entry not yet witnessed) and `task-dispatched` (a dispatched run's
/// `task_dispatched` entry witnessed, its task not yet published). The reliability tests use it
/// to kill a writer at every step.
///
/// With `GIT_FORUM_FAILPOINT_RUN=COMMAND` as well, the process does not die at the step: it
/// runs `sh -c COMMAND` there (in its working directory, with its environment), waits for it
/// and goes on, the first time it reaches the step only. The maintenance tests use it to run
/// `git prune --expire=now` or `git gc --prune=now` at a chosen moment of an append.
pub(crate) fn failpoint(name: &str) {
    static POINT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    static RUN: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    static RAN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let point = POINT.get_or_init(|| std::env::var("GIT_FORUM_FAILPOINT").ok());
    if point.as_deref() != Some(name) {
        return;
    }
    if let Some(command) = RUN.get_or_init(|| std::env::var("GIT_FORUM_FAILPOINT_RUN").ok()) {
        if !RAN.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let _ = std::process::Command::new("sh")
                .arg("-c")
                .arg(command)
                .stdin(std::process::Stdio::null())
                .status();
        }
        return;
    }
    #[cfg(unix)]
    let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    std::process::abort();
}

/// A failure-testing hook: with `GIT_FORUM_FAILPOINT_FAIL=NAME` in the environment, the step
/// `NAME` fails the first time the process reaches it, with the error returned here (it names
/// the failpoint), and goes on as usual after that. The steps: `task-worktree` (a dispatched
/// task's worktree about to be opened on the writer's side, after its task was published).
pub(crate) fn fails(name: &str) -> Option<String> {
    static POINT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    static HIT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let point = POINT.get_or_init(|| std::env::var("GIT_FORUM_FAILPOINT_FAIL").ok());
    if point.as_deref() != Some(name) || HIT.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return None;
    }
    Some(format!(
        "failed at the step {name} (GIT_FORUM_FAILPOINT_FAIL)"
    ))
}
