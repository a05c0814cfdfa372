//! Where a repository's `--work` runs keep their worktrees, who owns each run's area, and
//! cleaning up after runs (and clones) that are gone.
//!
//! # Where
//!
//! Worktrees live outside the git dir (agents such as Claude Code refuse to edit any path under
//! `.git/`, and nothing a worker touches should sit beside the repository's own metadata) and
//! outside the user's work tree: under git forum's cache root
//! ([`crate::config::dirs::cache_root`]), in `work/CLONE/LEDGER/RUN/TASK`, where `CLONE` is
//! the clone's [`crate::config::dirs::clone_key`] and its directory holds a `clone` file naming
//! the clone's git common dir. When the cache root lies inside the repository (a `$HOME` that is
//! itself a work tree), the system's temporary directory is used instead
//! (`TMP/git-forum-UID/work`).
//!
//! Each run's area also holds `.private/`, what git forum keeps of each task out of the
//! worker's sight: the index the checkout wrote (the change is staged on a copy of it, never on
//! the worktree's own) and the git configuration a sandbox shows in place of the repository's.
//!
//! # Who owns what
//!
//! Each run's directory holds an `.owner` file that the live [`crate::work::GitWork`] keeps an
//! exclusive `flock` on. The kernel drops the lock when the process ends however it ends
//! (`kill -9` included), so a directory whose `.owner` can be locked belongs to no live run:
//! [`cleanup_stale`] removes its worktrees (the directories and git's records of them). Locks
//! are per open file, so two runs of one daemon exclude each other as two processes do.
//!
//! git's own worktree bookkeeping is not safe against itself across processes: a `git worktree
//! prune` or `list` that meets another process's half-made worktree fails ("failed to read
//! worktrees/T1/commondir") or removes it. Every `worktree add`, `remove`, `prune` and `list`
//! git forum runs in one clone therefore takes the clone's turn, an exclusive `flock` on
//! `CLONE/.turn`, so concurrent runs in one repository take turns for these quick steps.
//!
//! # Clones that are gone
//!
//! A clone deleted while it had a run's worktrees leaves them in the cache. Opening any run
//! looks at every clone directory under the root and removes those whose `clone` file names a
//! common dir that no longer exists (and that no live run holds).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, flock};

use super::git;
use crate::config::dirs;
use crate::run::WorkError;

/// The lock file in each run's directory.
pub(super) const OWNER: &str = ".owner";
/// The lock file of a clone's turn (see the module doc).
const TURN: &str = ".turn";
/// The directory of each run's area that the worker never sees.
pub(super) const PRIVATE: &str = ".private";
/// Where earlier versions kept the worktrees, under the git common dir; still cleaned.
pub const LEGACY_WORK_DIR: &str = "forum/work";
/// How deep run directories are looked for (a ledger name may have `/`).
const MAX_DEPTH: usize = 16;

fn io(what: &str, path: &Path, e: std::io::Error) -> WorkError {
    WorkError::Io(format!("cannot {what} {}: {e}", path.display()))
}

/// The directory under which every clone's worktrees live (`CACHE/work`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkRoot {
    dir: PathBuf,
}

impl WorkRoot {
    /// The root under git forum's cache root (see the module doc).
    pub fn from_env() -> Result<WorkRoot, WorkError> {
        let cache = dirs::cache_root().map_err(|e| WorkError::Io(e.to_string()))?;
        Ok(WorkRoot {
            dir: cache.join("work"),
        })
    }

    /// A root at `dir` (tests, and callers that choose their own).
    pub fn at(dir: impl Into<PathBuf>) -> WorkRoot {
        WorkRoot { dir: dir.into() }
    }

    /// The root's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// One clone's place under a [`WorkRoot`].
#[derive(Debug, Clone)]
pub(crate) struct Place {
    /// The clone's git common dir (absolute).
    pub(crate) common: PathBuf,
    /// The root it was placed under (after the fallback of the module doc).
    root: PathBuf,
    /// `ROOT/CLONE`.
    pub(crate) dir: PathBuf,
}

/// Whether `inner` is `outer` or below it (both as given, and both canonical where they exist).
fn within(inner: &Path, outer: &Path) -> bool {
    if inner.starts_with(outer) {
        return true;
    }
    let canon = |p: &Path| -> PathBuf {
        // The deepest existing ancestor, canonical, with the rest appended.
        let mut missing = Vec::new();
        let mut cur = p.to_path_buf();
        loop {
            if let Ok(c) = cur.canonicalize() {
                let mut c = c;
                for m in missing.iter().rev() {
                    c.push(m);
                }
                return c;
            }
            match (cur.file_name().map(|n| n.to_os_string()), cur.parent()) {
                (Some(name), Some(parent)) => {
                    missing.push(name);
                    cur = parent.to_path_buf();
                }
                _ => return p.to_path_buf(),
            }
        }
    };
    canon(inner).starts_with(canon(outer))
}

impl Place {
    /// The place of the clone whose git common dir is `common` (and whose work tree, if any, is
    /// `work_tree`) under `root`: created (0700), with its `clone` file.
    pub(crate) fn of(
        root: &WorkRoot,
        common: &Path,
        work_tree: Option<&Path>,
    ) -> Result<Place, WorkError> {
        let inside = within(&root.dir, common) || work_tree.is_some_and(|w| within(&root.dir, w));
        let root_dir = if inside {
            let uid = rustix::process::getuid().as_raw();
            std::env::temp_dir()
                .join(format!("git-forum-{uid}"))
                .join("work")
        } else {
            root.dir.clone()
        };
        let dir = dirs::clone_dir(&root_dir, common)
            .map_err(|e| io("create the work directory under", &root_dir, e))?;
        // Canonical, so the paths git records for the worktrees are the ones looked for here.
        let dir = dir.canonicalize().unwrap_or(dir);
        Ok(Place {
            common: common.to_path_buf(),
            root: root_dir,
            dir,
        })
    }

    /// The area of run `run` of ledger `ledger`: `CLONE/LEDGER/RUN`.
    pub(crate) fn area(&self, ledger: &str, run: u64) -> PathBuf {
        self.dir.join(ledger).join(run.to_string())
    }

    /// Takes this clone's turn for git's worktree bookkeeping (see the module doc): blocks
    /// until no other git forum in the clone holds it; released when the file is dropped.
    pub(crate) fn turn(&self) -> Result<File, WorkError> {
        let path = self.dir.join(TURN);
        lock_file(&path, true)?.ok_or_else(|| io("lock", &path, std::io::Error::other("busy")))
    }
}

/// Opens (creating) the lock file at `path` and takes an exclusive `flock` on it: waiting for
/// it when `wait`, else `Ok(None)` when another open file holds it.
fn lock_file(path: &Path, wait: bool) -> Result<Option<File>, WorkError> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| io("open", path, e))?;
    let op = if wait {
        FlockOperation::LockExclusive
    } else {
        FlockOperation::NonBlockingLockExclusive
    };
    loop {
        match flock(&file, op) {
            Ok(()) => return Ok(Some(file)),
            Err(rustix::io::Errno::WOULDBLOCK) if !wait => return Ok(None),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(io("lock", path, e.into())),
        }
    }
}

/// Opens (creating) the `.owner` of `dir` and tries to lock it; `Ok(None)` when a live run
/// holds it.
pub(crate) fn try_lock(dir: &Path) -> Result<Option<File>, WorkError> {
    lock_file(&dir.join(OWNER), false)
}

/// Takes the work area `dir` for this process: creates it (0700), locks its `.owner` and
/// writes the pid there (for a person looking). Fails with one line when a live run holds it.
pub(super) fn claim(dir: &Path, run_seq: u64) -> Result<File, WorkError> {
    // An area its last holder is removing can vanish between its creation and its lock: made
    // again, a few times.
    let mut tries = 0;
    let locked = loop {
        dirs::create_private(&dir.join(PRIVATE)).map_err(|e| io("create", dir, e))?;
        match OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(OWNER))
        {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 5 => tries += 1,
            _ => break try_lock(dir)?,
        }
    };
    let Some(mut file) = locked else {
        return Err(WorkError::Busy(format!(
            "run {run_seq}'s work area {} is in use by another git forum; wait for it to end",
            dir.display()
        )));
    };
    let _ = file.set_len(0);
    let _ = writeln!(file, "{}", std::process::id());
    Ok(file)
}

/// The git common dir of the repository at `repo` (absolute), so worktrees belong to the main
/// repository even when `repo` is itself a linked worktree.
pub(super) fn common_dir(repo: &Path) -> Result<PathBuf, WorkError> {
    let out = git::ok(
        repo,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )?;
    Ok(PathBuf::from(out))
}

/// The work tree of the repository at `repo` (absolute), when it has one.
pub(super) fn work_tree(repo: &Path) -> Option<PathBuf> {
    let out = git::run(repo, &["rev-parse", "--show-toplevel"]).ok()?;
    (out.ok && !out.stdout.is_empty()).then(|| PathBuf::from(out.text()))
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
/// The caller holds the clone's turn.
pub(super) fn remove_tree(common: &Path, path: &Path) -> Result<(), WorkError> {
    let shown = path.to_string_lossy().into_owned();
    let out = git::run(
        common,
        &["worktree", "remove", "--force", "--force", shown.as_str()],
    )?;
    if path.symlink_metadata().is_ok() {
        std::fs::remove_dir_all(path).map_err(|e| io("remove", path, e))?;
    }
    if !out.ok {
        // git did not know it (or its record was broken): drop whatever record is left.
        git::ok(common, &["worktree", "prune"])?;
    }
    Ok(())
}

/// Removes the worktrees at `paths` together: their directories, then git's records of them
/// in one `git worktree prune` (rather than a `git worktree remove` each). The caller holds
/// the clone's turn.
pub(super) fn remove_trees(common: &Path, paths: &[&Path]) -> Result<(), WorkError> {
    let mut first = Ok(());
    for path in paths {
        if path.symlink_metadata().is_ok()
            && let Err(e) = std::fs::remove_dir_all(path)
        {
            first = first.and(Err(io("remove", path, e)));
        }
    }
    if !paths.is_empty() {
        git::ok(common, &["worktree", "prune"])?;
    }
    first
}

/// Removes every worktree under `dir`, then `dir` itself, then git's stale records. The
/// caller holds the clone's turn.
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
    if dir.join(".git").symlink_metadata().is_ok() {
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
/// repository at `repo`, under the cache's work root; returns the directories removed. Live
/// runs' areas are untouched.
pub fn cleanup_stale(repo: &Path) -> Result<Vec<PathBuf>, WorkError> {
    cleanup_stale_under(&WorkRoot::from_env()?, repo)
}

/// [`cleanup_stale`] under `root`.
pub fn cleanup_stale_under(root: &WorkRoot, repo: &Path) -> Result<Vec<PathBuf>, WorkError> {
    let common = common_dir(repo)?;
    let place = Place::of(root, &common, work_tree(repo).as_deref())?;
    cleanup_stale_in(&place)
}

/// [`cleanup_stale`] in one clone's place; also removes the places of clones that are gone.
pub(crate) fn cleanup_stale_in(place: &Place) -> Result<Vec<PathBuf>, WorkError> {
    let common = place.common.clone();
    // Listed under the turn, so no area another process is claiming or removing right now is
    // among them.
    let _turn = place.turn()?;
    let mut found = Vec::new();
    run_dirs(&place.dir, 0, &mut found);
    let legacy = common.join(LEGACY_WORK_DIR);
    run_dirs(&legacy, 0, &mut found);
    let mut removed = Vec::new();
    for dir in found {
        if !dir.is_dir() {
            continue;
        }
        // Held while removing, so a run starting now on the same area waits its turn.
        let Some(_lock) = try_lock(&dir)? else {
            continue;
        };
        remove_area(&common, &dir)?;
        removed.push(dir);
    }
    // Records of worktrees whose directories are already gone.
    git::ok(&common, &["worktree", "prune"])?;
    remove_gone_clones(&place.root);
    Ok(removed)
}

/// Removes the directory of every clone under `root` whose common dir no longer exists, unless
/// a live run still holds an area there. Best effort: what cannot be removed stays for later.
fn remove_gone_clones(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let dir = e.path();
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Some(common) = dirs::clone_of(&dir) else {
            continue;
        };
        if common.join("objects").is_dir() {
            continue;
        }
        let mut runs = Vec::new();
        run_dirs(&dir, 0, &mut runs);
        let locks: Option<Vec<File>> = runs.iter().map(|d| try_lock(d).ok().flatten()).collect();
        if locks.is_some() {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
