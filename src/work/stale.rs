//! Who owns a run's work area, and cleaning up after runs that died.
//!
//! Each run's directory (`GIT_COMMON_DIR/forum/work/LEDGER/RUN`) holds an `.owner` file that
//! the live [`crate::work::GitWork`] keeps an exclusive `flock` on. The kernel drops the lock
//! when the process ends however it ends (`kill -9` included), so a directory whose `.owner`
//! can be locked belongs to no live run: [`cleanup_stale`] removes its worktrees (the
//! directories and git's records of them). Locks are per open file, so two runs of one daemon
//! exclude each other as two processes do.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, flock};

use super::git;
use crate::run::WorkError;

/// The lock file in each run's directory.
pub(super) const OWNER: &str = ".owner";
/// Where every run's work area lives, under the git common dir.
pub const WORK_DIR: &str = "forum/work";
/// How deep run directories are looked for under [`WORK_DIR`] (a ledger name may have `/`).
const MAX_DEPTH: usize = 16;

fn io(what: &str, path: &Path, e: std::io::Error) -> WorkError {
    WorkError::Io(format!("cannot {what} {}: {e}", path.display()))
}

/// Opens (creating) the `.owner` of `dir` and tries to lock it; `Ok(None)` when a live run
/// holds it.
pub(crate) fn try_lock(dir: &Path) -> Result<Option<File>, WorkError> {
    let path = dir.join(OWNER);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| io("open", &path, e))?;
    match flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(file)),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
        Err(e) => Err(io("lock", &path, e.into())),
    }
}

/// Takes the work area `dir` for this process: creates it, locks its `.owner` and writes the
/// pid there (for a person looking). Fails with one line when a live run holds it.
pub(super) fn claim(dir: &Path, run_seq: u64) -> Result<File, WorkError> {
    std::fs::create_dir_all(dir).map_err(|e| io("create", dir, e))?;
    let Some(mut file) = try_lock(dir)? else {
        return Err(WorkError::Io(format!(
            "run {run_seq}'s work area {} is in use by another git forum; wait for it to end",
            dir.display()
        )));
    };
    let _ = file.set_len(0);
    let _ = writeln!(file, "{}", std::process::id());
    Ok(file)
}

/// The git common dir of the repository at `repo` (absolute), so worktrees land in the main
/// repository's `.git` even when `repo` is itself a linked worktree.
pub(super) fn common_dir(repo: &Path) -> Result<PathBuf, WorkError> {
    let out = git::ok(
        repo,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )?;
    Ok(PathBuf::from(out))
}

/// The worktrees git has recorded (their paths), from `git worktree list --porcelain -z`.
pub(super) fn worktrees(common: &Path) -> Result<Vec<PathBuf>, WorkError> {
    let out = git::run(common, &["worktree", "list", "--porcelain", "-z"])?;
    git::ensure(&out, &["worktree"])?;
    Ok(out
        .stdout
        .split(|b| *b == 0)
        .filter_map(|field| field.strip_prefix(b"worktree "))
        .map(|p| PathBuf::from(String::from_utf8_lossy(p).into_owned()))
        .collect())
}

/// Removes one worktree: git's record and its directory (even if git no longer knows it).
pub(super) fn remove_tree(common: &Path, path: &Path) -> Result<(), WorkError> {
    let shown = path.to_string_lossy().into_owned();
    let out = git::run(
        common,
        &["worktree", "remove", "--force", "--force", shown.as_str()],
    )?;
    if path.exists() {
        std::fs::remove_dir_all(path).map_err(|e| io("remove", path, e))?;
    }
    if !out.ok {
        // git did not know it (or its record was broken): drop whatever record is left.
        git::ok(common, &["worktree", "prune"])?;
    }
    Ok(())
}

/// Removes every worktree under `dir`, then `dir` itself, then git's stale records.
pub(super) fn remove_area(common: &Path, dir: &Path) -> Result<(), WorkError> {
    let mut found = false;
    for tree in worktrees(common)? {
        if tree.starts_with(dir) {
            remove_tree(common, &tree)?;
            found = true;
        }
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| io("remove", dir, e))?;
    }
    // Each removal above already dropped its record (pruning when git did not know it).
    if found {
        git::ok(common, &["worktree", "prune"])?;
    }
    Ok(())
}

fn run_dirs(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > MAX_DEPTH {
        return;
    }
    if dir.join(OWNER).is_file() {
        out.push(dir.to_path_buf());
        return;
    }
    if dir.join(".git").exists() {
        // A worktree whose run's `.owner` is gone: git prune handles its record.
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            run_dirs(&e.path(), depth + 1, out);
        }
    }
}

/// Removes the work areas of runs that are no longer alive (see the module doc) in the
/// repository at `repo`; returns the directories removed. Live runs' areas are untouched.
pub fn cleanup_stale(repo: &Path) -> Result<Vec<PathBuf>, WorkError> {
    cleanup_stale_in(&common_dir(repo)?)
}

/// [`cleanup_stale`] in the repository whose git common dir is `common`.
pub(crate) fn cleanup_stale_in(common: &Path) -> Result<Vec<PathBuf>, WorkError> {
    let common = common.to_path_buf();
    let root = common.join(WORK_DIR);
    let mut found = Vec::new();
    run_dirs(&root, 0, &mut found);
    let mut removed = Vec::new();
    for dir in found {
        // Held while removing, so a run starting now on the same area waits its turn.
        let Some(_lock) = try_lock(&dir)? else {
            continue;
        };
        remove_area(&common, &dir)?;
        removed.push(dir);
    }
    // Records of worktrees whose directories are already gone.
    if root.exists() {
        git::ok(&common, &["worktree", "prune"])?;
    }
    Ok(removed)
}
