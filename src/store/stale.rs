//! Lock files a killed git left behind, and how to tell them from locks a live process holds.
//!
//! git takes its locks by creating `NAME.lock` with `O_CREAT|O_EXCL` and removes or renames it
//! when done; there is no `flock` to ask the kernel about. A git killed between the two leaves
//! the file, and every later writer waits on it: in a reftable repository that is
//! `reftable/tables.list.lock`, which blocks every ref update, in a files repository the ref's
//! own `refs/.../NAME.lock` (or `packed-refs.lock`).
//!
//! A lock is judged *stale* here when it is older than this boot of the machine, or when all of
//! these hold: it is older than [`STALE_AFTER`] (git holds a lock for milliseconds), no process
//! has the file open (read from `/proc/*/fd`: git keeps a reftable lock open until it commits),
//! and no git process runs in this repository (its working directory, read from `/proc/*/cwd`,
//! inside the work tree or the git dir: a files-backend transaction that `git update-ref
//! --stdin` holds prepared has closed its lock file, but the process is still there). The
//! processes that started this one (`git forum` runs under a `git` parent) do not count. A
//! process whose files or working directory cannot be read (another user's) counts as holding
//! the lock, so a lock is never called stale on a guess. Without `/proc` only the boot rule
//! applies.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// How old a lock must be before its holder can be judged gone: far longer than git holds one.
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(10);

/// A lock file found, and what is known of its holder.
#[derive(Debug, Clone)]
pub(crate) struct LockFile {
    /// How long ago it was last written.
    pub(crate) age: Duration,
    /// Processes that hold it, or might: `pid (name)` each.
    pub(crate) holders: Vec<String>,
    /// Written before this boot: its holder is gone whatever else holds.
    pub(crate) before_boot: bool,
}

impl LockFile {
    /// Looks at the lock `path` of the repository whose work tree or git dir is among
    /// `repo_dirs`; `None` when there is no such file.
    pub(crate) fn inspect(path: &Path, repo_dirs: &[&Path]) -> Option<LockFile> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        let modified = meta.modified().ok()?;
        let age = SystemTime::now()
            .duration_since(modified)
            .unwrap_or(Duration::ZERO);
        let before_boot = boot_time().is_some_and(|b| modified < b);
        Some(LockFile {
            age,
            holders: holders(path, repo_dirs),
            before_boot,
        })
    }

    /// True when no live process can be holding it (see the module doc).
    pub(crate) fn stale(&self) -> bool {
        self.before_boot || (self.age >= STALE_AFTER && self.holders.is_empty())
    }
}

/// A duration for a person: `42s`, `3m`, `5h`, `2d`.
pub(crate) fn age_text(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..120 => format!("{s}s"),
        120..7200 => format!("{}m", s / 60),
        7200..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// When this machine booted (Linux: `btime` in `/proc/stat`).
fn boot_time() -> Option<SystemTime> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let secs: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(std::time::UNIX_EPOCH + Duration::from_secs(secs))
}

/// This process and the ones that started it (`git forum` runs under `git`).
fn ancestors() -> Vec<u32> {
    let mut out = vec![std::process::id()];
    let mut pid = std::process::id();
    for _ in 0..64 {
        let Some(parent) = parent_of(pid) else { break };
        if parent <= 1 || out.contains(&parent) {
            break;
        }
        out.push(parent);
        pid = parent;
    }
    out
}

/// The parent of `pid`, from `/proc/PID/stat` (after the name, which may hold spaces).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The processes that have `lock` open, or are git running in one of `repo_dirs`, or are git
/// and cannot be looked into; none of this process's own line.
fn holders(lock: &Path, repo_dirs: &[&Path]) -> Vec<String> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let lock = std::fs::canonicalize(lock).unwrap_or_else(|_| lock.to_path_buf());
    let dirs: Vec<PathBuf> = repo_dirs
        .iter()
        .map(|d| std::fs::canonicalize(d).unwrap_or_else(|_| d.to_path_buf()))
        .collect();
    let skip = ancestors();
    let mut out = Vec::new();
    for e in procs.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if skip.contains(&pid) {
            continue;
        }
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let is_git = name == "git" || (name.starts_with("git-") && name != "git-forum");
        let label = || format!("{pid} ({name})");
        match std::fs::read_dir(format!("/proc/{pid}/fd")) {
            Ok(fds) => {
                if fds
                    .flatten()
                    .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t == lock))
                {
                    out.push(label());
                    continue;
                }
            }
            // Another user's process: if it is git, it may hold the lock. (One that is gone
            // since the directory was listed holds nothing.)
            Err(e) if is_git && e.kind() == std::io::ErrorKind::PermissionDenied => {
                out.push(label());
                continue;
            }
            Err(_) => {}
        }
        if is_git {
            match std::fs::read_link(format!("/proc/{pid}/cwd")) {
                Ok(cwd) if dirs.iter().any(|d| cwd.starts_with(d)) => out.push(label()),
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => out.push(label()),
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_as_a_person_would_say_them() {
        assert_eq!(age_text(Duration::from_secs(42)), "42s");
        assert_eq!(age_text(Duration::from_secs(300)), "5m");
        assert_eq!(age_text(Duration::from_secs(3 * 3600)), "3h");
        assert_eq!(age_text(Duration::from_secs(3 * 86_400)), "3d");
    }

    #[test]
    fn a_lock_this_process_holds_open_is_not_stale_and_an_old_unheld_one_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tables.list.lock");
        assert!(LockFile::inspect(&path, &[dir.path()]).is_none());
        // Held open by a child process (this process and its parents never count).
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("exec 3>'{}'; exec sleep 30", path.display()))
            .spawn()
            .unwrap();
        for _ in 0..100 {
            if path.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(100));
        let old = SystemTime::now() - Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let held = LockFile::inspect(&path, &[dir.path()]).unwrap();
        assert!(!held.stale(), "{held:?}");
        assert!(
            held.holders
                .iter()
                .any(|h| h.starts_with(&child.id().to_string())),
            "{held:?}"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        let left = LockFile::inspect(&path, &[dir.path()]).unwrap();
        assert!(left.stale(), "{left:?}");
        assert!(left.age >= Duration::from_secs(59), "{left:?}");
        // A fresh one is not stale yet, held or not.
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(SystemTime::now())
            .unwrap();
        assert!(!LockFile::inspect(&path, &[dir.path()]).unwrap().stale());
    }
}
