//! Halt requests and running-run markers: small files under `GIT_COMMON_DIR/forum/` that one
//! process writes and another reads without the ledger's writer lock, so `git forum halt` can
//! reach a run that holds the ledger in another terminal.
//!
//! * `forum/running/LEDGER/RUN.json`: `{pid, start}` of the process driving run RUN, written
//!   when the run knows its request seq and removed when it ends. `start` is the process's start
//!   time (from `/proc/PID/stat`), so a marker left by a process that died is not mistaken for a
//!   live run when its pid is reused.
//! * `forum/halt/LEDGER/RUN.json`: `{by, reason}`, the halt request a running process polls for.
//!
//! Both are written to a temporary name and renamed into place, so a reader sees a whole file or
//! none; every read is bounded.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{Value as J, json};

use super::error::{StoreError, io};
use super::git::GitStore;

/// The most bytes read of a marker or a halt request.
const MAX_FILE: u64 = 64 * 1024;
/// The most markers looked at in one listing.
const MAX_MARKERS: usize = 4096;

/// A halt request: who asked and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HaltRequest {
    pub(crate) by: String,
    pub(crate) reason: String,
}

/// A run some live process is driving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Running {
    /// The run's request seq.
    pub(crate) run: u64,
    /// The process driving it.
    pub(crate) pid: u32,
}

/// The halt and running files of one ledger.
#[derive(Debug, Clone)]
pub(crate) struct Halts {
    halt: PathBuf,
    running: PathBuf,
}

impl GitStore {
    /// The halt requests and running markers of this ledger.
    pub(crate) fn halts(&self) -> Halts {
        let name = self.name.replace('/', "%2F");
        let forum = self.forum_dir();
        Halts {
            halt: forum.join("halt").join(&name),
            running: forum.join("running").join(&name),
        }
    }
}

/// Reads at most [`MAX_FILE`] bytes of `path`; `None` when it does not exist.
fn read_bounded(path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    let f = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(format!("reading {}", path.display()))(e)),
    };
    let mut out = Vec::new();
    f.take(MAX_FILE)
        .read_to_end(&mut out)
        .map_err(io(format!("reading {}", path.display())))?;
    Ok(Some(out))
}

/// Writes `value` to `path` whole: a temporary file beside it, renamed into place.
fn write_whole(path: &Path, value: &J) -> Result<(), StoreError> {
    let dir = path.parent().expect("a file under a directory");
    fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id()
    ));
    fs::write(&tmp, value.to_string()).map_err(io(format!("writing {}", tmp.display())))?;
    fs::rename(&tmp, path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io(format!("writing {}", path.display()))(e)
    })
}

fn remove(path: &Path) {
    let _ = fs::remove_file(path);
}

/// The start time of process `pid` (field 22 of `/proc/PID/stat`, in clock ticks since boot);
/// `None` where there is no `/proc` or the process is gone.
fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count after the last ')'.
    let rest = stat.rsplit_once(')')?.1;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether process `pid` is alive (a signal 0 reaches it, or it exists under another user) and,
/// when `start` is known, is the very process that wrote the marker.
fn alive(pid: u32, start: Option<u64>) -> bool {
    let Some(p) = rustix::process::Pid::from_raw(pid as i32) else {
        return false;
    };
    let reachable = match rustix::process::test_kill_process(p) {
        Ok(()) => true,
        Err(e) => e == rustix::io::Errno::PERM,
    };
    if !reachable {
        return false;
    }
    match (start, start_time(pid)) {
        (Some(want), Some(now)) => want == now,
        _ => true,
    }
}

impl Halts {
    fn halt_path(&self, run: u64) -> PathBuf {
        self.halt.join(format!("{run}.json"))
    }

    fn running_path(&self, run: u64) -> PathBuf {
        self.running.join(format!("{run}.json"))
    }

    /// Asks the process driving `run` to halt it.
    pub(crate) fn request(&self, run: u64, by: &str, reason: &str) -> Result<(), StoreError> {
        write_whole(&self.halt_path(run), &json!({"by": by, "reason": reason}))
    }

    /// The halt request for `run`, if there is one. A request that cannot be read as JSON still
    /// halts the run (by `unknown`): a halt never fails open.
    pub(crate) fn requested(&self, run: u64) -> Result<Option<HaltRequest>, StoreError> {
        let Some(bytes) = read_bounded(&self.halt_path(run))? else {
            return Ok(None);
        };
        let body: J = serde_json::from_slice(&bytes).unwrap_or(J::Null);
        let text = |k: &str, default: &str| {
            body.get(k)
                .and_then(J::as_str)
                .filter(|s| !s.trim().is_empty())
                .unwrap_or(default)
                .to_string()
        };
        Ok(Some(HaltRequest {
            by: text("by", "unknown"),
            reason: text("reason", "an operator halted the run"),
        }))
    }

    /// Forgets the halt request for `run` (a resumed run starts without one).
    pub(crate) fn clear(&self, run: u64) {
        remove(&self.halt_path(run));
    }

    /// Notes that this process drives `run`.
    pub(crate) fn register(&self, run: u64) -> Result<(), StoreError> {
        let pid = std::process::id();
        write_whole(
            &self.running_path(run),
            &json!({"pid": pid, "start": start_time(pid)}),
        )
    }

    /// Notes that this process no longer drives `run`.
    pub(crate) fn unregister(&self, run: u64) {
        remove(&self.running_path(run));
    }

    /// Whether a live process drives `run`.
    pub(crate) fn is_running(&self, run: u64) -> Result<bool, StoreError> {
        Ok(self.marker(&self.running_path(run))?.is_some())
    }

    /// The live process of a marker file, `None` when it is gone (or the file is unreadable).
    fn marker(&self, path: &Path) -> Result<Option<u32>, StoreError> {
        let Some(bytes) = read_bounded(path)? else {
            return Ok(None);
        };
        let Ok(body) = serde_json::from_slice::<J>(&bytes) else {
            return Ok(None);
        };
        let Some(pid) = body.get("pid").and_then(J::as_u64) else {
            return Ok(None);
        };
        let start = body.get("start").and_then(J::as_u64);
        Ok(alive(pid as u32, start).then_some(pid as u32))
    }

    /// The runs live processes drive, by request seq (markers of dead processes are skipped).
    pub(crate) fn running(&self) -> Result<Vec<Running>, StoreError> {
        let list = match fs::read_dir(&self.running) {
            Ok(l) => l,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(format!("reading {}", self.running.display()))(e)),
        };
        let mut out = Vec::new();
        for entry in list.take(MAX_MARKERS) {
            let entry = entry.map_err(io(format!("reading {}", self.running.display())))?;
            let name = entry.file_name();
            let Some(run) = name
                .to_str()
                .and_then(|n| n.strip_suffix(".json"))
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            if let Some(pid) = self.marker(&entry.path())? {
                out.push(Running { run, pid });
            }
        }
        out.sort_by_key(|r| r.run);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn halts(dir: &Path) -> Halts {
        Halts {
            halt: dir.join("halt/main"),
            running: dir.join("running/main"),
        }
    }

    #[test]
    fn a_request_is_read_back_and_cleared_and_a_marker_names_a_live_process() {
        let dir = tempfile::tempdir().unwrap();
        let h = halts(dir.path());
        assert_eq!(h.requested(3).unwrap(), None);
        h.request(3, "ada", "stop").unwrap();
        let r = h.requested(3).unwrap().unwrap();
        assert_eq!((r.by.as_str(), r.reason.as_str()), ("ada", "stop"));
        h.clear(3);
        assert_eq!(h.requested(3).unwrap(), None);
        // An unreadable request still halts.
        fs::write(h.halt_path(4), "not json").unwrap();
        assert_eq!(h.requested(4).unwrap().unwrap().by, "unknown");
        assert!(h.running().unwrap().is_empty());
        h.register(5).unwrap();
        assert!(h.is_running(5).unwrap());
        let me = std::process::id();
        assert_eq!(h.running().unwrap(), vec![Running { run: 5, pid: me }]);
        // A marker whose process is another one (a reused pid) is not a running run.
        write_whole(&h.running_path(6), &json!({"pid": me, "start": 1})).unwrap();
        assert!(!h.is_running(6).unwrap());
        h.unregister(5);
        assert!(!h.is_running(5).unwrap());
    }
}
