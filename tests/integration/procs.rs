//! The processes run tests start and watch, once for halt::, runs:: and resume_options::: a
//! slow worker that says who it is and hangs while a file exists, waiting for it to start,
//! whether a pid still lives, bounded polling, and SIGTERM to a child.

use std::path::Path;
use std::time::Duration;

/// Whether `pid` is a live process (a zombie waiting to be reaped is not).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
    }
}

/// Polls `done` for up to 60 s; panics with `what` if it never holds.
pub fn poll(done: impl FnMut() -> bool, what: &str) {
    crate::common::wait_until(what, Duration::from_secs(60), done);
}

/// Writes `body` to `path` as an executable script; returns its path.
pub fn executable(path: &Path, body: &str) -> String {
    std::fs::write(path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

/// Shell lines for a slow worker: while `slow` exists, it starts `sleep 60` as its child,
/// writes its own pid and that child's to `pids` (atomically, by rename) and waits for the
/// child; once `slow` is gone it goes straight on. With `ignore_term` it ignores SIGTERM, so
/// only SIGKILL to its process group stops it.
pub fn slow_worker_sh(slow: &Path, pids: &Path, ignore_term: bool) -> String {
    let trap = if ignore_term { "trap '' TERM; " } else { "" };
    format!(
        "if [ -e '{slow}' ]; then {trap}sleep 60 & echo \"$$ $!\" > '{pids}.tmp'; mv '{pids}.tmp' '{pids}'; wait; fi",
        slow = slow.display(),
        pids = pids.display()
    )
}

/// Waits for the slow worker of [`slow_worker_sh`] to write `pids`; returns them (the
/// worker's and its child's), each checked alive.
pub fn wait_for_pids(pids: &Path) -> Vec<i32> {
    poll(|| pids.exists(), "the slow worker never started");
    let got: Vec<i32> = std::fs::read_to_string(pids)
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got.iter().all(|p| alive(*p)), "{got:?}");
    got
}

/// Sends SIGTERM to `child`.
pub fn terminate(child: &std::process::Child) {
    let pid = rustix::process::Pid::from_child(child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
}

/// The live processes whose arguments hold `marker` (read from `/proc/PID/cmdline`).
pub fn marked(marker: &str) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        if cmdline
            .split(|b| *b == 0)
            .any(|a| a.windows(marker.len()).any(|w| w == marker.as_bytes()))
            && alive(pid)
        {
            out.push(pid);
        }
    }
    out
}
