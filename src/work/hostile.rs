//! What a worker leaves in its worktree is hostile input: this module checks it before git
//! forum reads any of it.
//!
//! * [`Made`]: what git forum created for a task (the worktree's `.git` link, its admin
//!   directory's `gitdir` and `commondir`, whether it had a `config.worktree`), recorded right
//!   after `git worktree add` and compared after the worker ([`Made::unchanged`]). A worker
//!   that rewrote its `.git` link (to a repository it made, whose configuration defines
//!   filters; or to the user's own git dir, so a `git add` would land on the user's index) fails
//!   its task with the reason recorded. Nothing git forum runs afterwards reads the link anyway:
//!   git is always given the admin directory and the work tree explicitly (`crate::work`).
//! * [`survey`]: one walk of the whole worktree by `lstat` alone (no symlink followed, no file
//!   opened), before git reads anything: a FIFO, socket or device anywhere is refused (git
//!   opens a `.gitignore` FIFO and blocks forever), so is a nested `.git` (a repository or a
//!   link inside the change would be committed as a gitlink or make git read another
//!   repository's configuration), and the worktree's disk use and entry count are bounded.
//! * [`measure`]: which files the change touches, from the index the checkout wrote (stat data,
//!   no content read) and git's list of untracked files, with their sizes checked against the
//!   per-file, per-change and file-count limits before any file is hashed or diffed.
//! * [`read_plain`]: the one way this module reads a file of the worktree: `O_NOFOLLOW`,
//!   non-blocking, a regular file only, bounded.

use std::collections::HashSet;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::run::{ChangeLimits, WorkError};

/// The most a `.git` link or an admin file is read.
const LINK_CAP: usize = 4096;
/// The most entries (files, directories, links) one worktree survey walks.
pub(super) const MAX_ENTRIES: u64 = 2_000_000;
/// How deep the survey goes.
const MAX_DEPTH: usize = 256;

fn refused(why: impl Into<String>) -> WorkError {
    WorkError::Refused(why.into())
}

/// Why [`read_plain`] read nothing: each names the path.
#[derive(Debug, thiserror::Error)]
pub(super) enum PlainReadError {
    /// The path is a symbolic link (never followed).
    #[error("{} is a symbolic link", .0.display())]
    Link(PathBuf),
    /// It could not be opened.
    #[error("cannot open {}: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: rustix::io::Errno,
    },
    /// It could not be inspected.
    #[error("cannot stat {}: {source}", path.display())]
    Stat {
        path: PathBuf,
        #[source]
        source: rustix::io::Errno,
    },
    /// A directory, FIFO, device or socket.
    #[error("{} is not a regular file", .0.display())]
    NotRegular(PathBuf),
    /// Reading it failed.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Longer than the cap.
    #[error("{} is longer than {cap} bytes", path.display())]
    TooLong { path: PathBuf, cap: usize },
}

/// Reads the regular file at `path` without following a symlink, without blocking on a FIFO,
/// at most `cap` bytes: `Ok(None)` when it does not exist, an error naming the problem when it
/// is not a plain file or is longer.
pub(super) fn read_plain(path: &Path, cap: usize) -> Result<Option<Vec<u8>>, PlainReadError> {
    use rustix::fs::{Mode, OFlags};
    let fd = match rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(rustix::io::Errno::LOOP) => return Err(PlainReadError::Link(path.to_path_buf())),
        Err(source) => {
            return Err(PlainReadError::Open {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let st = rustix::fs::fstat(&fd).map_err(|source| PlainReadError::Stat {
        path: path.to_path_buf(),
        source,
    })?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
        return Err(PlainReadError::NotRegular(path.to_path_buf()));
    }
    let mut buf = Vec::new();
    std::fs::File::from(fd)
        .take(cap as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|source| PlainReadError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    if buf.len() > cap {
        return Err(PlainReadError::TooLong {
            path: path.to_path_buf(),
            cap,
        });
    }
    Ok(Some(buf))
}

/// What git forum created for one task's worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Made {
    /// The `.git` link's bytes.
    link: Vec<u8>,
    /// The admin directory (`COMMON/worktrees/NAME`), absolute.
    pub(super) admin: PathBuf,
    /// The admin directory's `gitdir` file.
    gitdir: Vec<u8>,
    /// Its `commondir` file.
    commondir: Vec<u8>,
    /// Its `config.worktree`, when it had one.
    config: Option<Vec<u8>>,
}

impl Made {
    /// Records the worktree `tree` just made by `git worktree add` in the repository whose
    /// common dir is `common`: its link must name an admin directory under
    /// `COMMON/worktrees/`.
    pub(super) fn record(tree: &Path, common: &Path) -> Result<Made, WorkError> {
        let io = |e: String| WorkError::Io(format!("the new worktree's git link: {e}"));
        let link = read_plain(&tree.join(".git"), LINK_CAP)
            .map_err(|e| io(e.to_string()))?
            .ok_or_else(|| io(format!("{} has no .git", tree.display())))?;
        let text = std::str::from_utf8(&link).map_err(|e| io(e.to_string()))?;
        let admin = text
            .strip_prefix("gitdir: ")
            .map(|d| PathBuf::from(d.trim_end_matches(['\n', '\r'])))
            .ok_or_else(|| io(format!("{:?} is not a gitdir line", text.trim_end())))?;
        let admin = if admin.is_absolute() {
            admin
        } else {
            tree.join(admin)
        };
        let admin = admin.canonicalize().map_err(|e| io(e.to_string()))?;
        let worktrees = common
            .canonicalize()
            .map_err(|e| io(e.to_string()))?
            .join("worktrees");
        if admin.parent() != Some(worktrees.as_path()) {
            return Err(io(format!(
                "{} is not under {}",
                admin.display(),
                worktrees.display()
            )));
        }
        let file =
            |name: &str| read_plain(&admin.join(name), LINK_CAP).map_err(|e| io(e.to_string()));
        Ok(Made {
            gitdir: file("gitdir")?.unwrap_or_default(),
            commondir: file("commondir")?.unwrap_or_default(),
            config: file("config.worktree")?,
            link,
            admin,
        })
    }

    /// Whether the worktree at `tree` still has the link and admin directory git forum made;
    /// the refusal names what changed.
    pub(super) fn unchanged(&self, tree: &Path) -> Result<(), WorkError> {
        let link = read_plain(&tree.join(".git"), LINK_CAP).map_err(|e| {
            refused(format!(
                "the worker replaced its worktree's .git link ({e}); the change is not read"
            ))
        })?;
        if link.as_deref() != Some(self.link.as_slice()) {
            return Err(refused(
                "the worker rewrote its worktree's .git link; the change is not read",
            ));
        }
        let admin = |name: &str| read_plain(&self.admin.join(name), LINK_CAP).ok().flatten();
        let same = admin("gitdir").as_deref() == Some(self.gitdir.as_slice())
            && admin("commondir").as_deref() == Some(self.commondir.as_slice())
            && admin("config.worktree") == self.config;
        if !same {
            return Err(refused(
                "the worker changed its worktree's git admin directory; the change is not read",
            ));
        }
        Ok(())
    }
}

/// What [`survey`] found: the worktree's disk use and how many entries it holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Surveyed {
    pub(super) disk_bytes: u64,
    pub(super) entries: u64,
}

/// Walks the worktree at `tree` by `lstat` alone (see the module doc): refuses a FIFO, socket
/// or device, a nested `.git` (any case), more than [`MAX_ENTRIES`] entries or more disk than
/// `limits.max_disk_bytes`. The top's own `.git` link is skipped (checked by [`Made`]).
pub(super) fn survey(tree: &Path, limits: &ChangeLimits) -> Result<Surveyed, WorkError> {
    let mut seen = Surveyed::default();
    let mut stack: Vec<(PathBuf, usize)> = vec![(tree.to_path_buf(), 0)];
    let shown = |p: &Path| {
        p.strip_prefix(tree)
            .unwrap_or(p)
            .to_string_lossy()
            .into_owned()
    };
    while let Some((dir, depth)) = stack.pop() {
        if depth > MAX_DEPTH {
            return Err(refused(format!(
                "the worktree nests directories deeper than {MAX_DEPTH} at {}",
                shown(&dir)
            )));
        }
        let entries = std::fs::read_dir(&dir)
            .map_err(|e| WorkError::Io(format!("cannot list {}: {e}", dir.display())))?;
        for e in entries {
            let e = e.map_err(|e| WorkError::Io(format!("cannot list {}: {e}", dir.display())))?;
            let name = e.file_name();
            if depth == 0 && name.as_bytes() == b".git" {
                continue;
            }
            if name.as_bytes().eq_ignore_ascii_case(b".git") {
                return Err(refused(format!(
                    "the worker left a nested .git at {}: a change may not hold another repository",
                    shown(&e.path())
                )));
            }
            // `fstatat` from the directory's handle, not following a link.
            let meta = e.metadata().map_err(|err| {
                WorkError::Io(format!("cannot stat {}: {err}", e.path().display()))
            })?;
            let ft = meta.file_type();
            if ft.is_fifo() || ft.is_socket() || ft.is_block_device() || ft.is_char_device() {
                return Err(refused(format!(
                    "the worker left a FIFO, socket or device at {}; a change holds files, directories and links only",
                    shown(&e.path())
                )));
            }
            seen.entries += 1;
            seen.disk_bytes = seen.disk_bytes.saturating_add(meta.blocks() * 512);
            if seen.entries > MAX_ENTRIES {
                return Err(refused(format!(
                    "the worktree holds more than {MAX_ENTRIES} files and directories"
                )));
            }
            if seen.disk_bytes > limits.max_disk_bytes {
                return Err(refused(format!(
                    "the worktree uses more than {} bytes of disk (max_disk_bytes in [work])",
                    limits.max_disk_bytes
                )));
            }
            if ft.is_dir() {
                stack.push((e.path(), depth + 1));
            }
        }
    }
    Ok(seen)
}

/// What one `lstat` of a worktree path found.
pub(super) enum Looked {
    /// The path's own status (a link's, not its target's).
    Found(rustix::fs::Stat),
    /// Nothing is there (or a directory on its way is gone).
    Gone,
    /// A symbolic link stands where a directory on its way should be, or the path could not be
    /// looked at: nothing beyond it was entered.
    Blocked,
}

/// Looks at the path of each of `items` (worktree-relative, `/`-separated; items of one
/// directory next to each other, as an index keeps them) under `tree` with one `statat` each,
/// from its directory opened once (`openat2` beneath the worktree, following no link, so a
/// directory a worker replaced with a link is never entered), and hands what it found to `f`.
/// Stops when `f` returns false; returns whether it went through every item.
pub(super) fn stat_each<T>(
    tree: &Path,
    items: &[T],
    path_of: impl Fn(&T) -> &[u8],
    mut f: impl FnMut(&T, Looked) -> bool,
) -> bool {
    use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};
    use rustix::io::Errno;
    let Ok(root) = rustix::fs::open(
        tree,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return false;
    };
    let gone = |e: Errno| e == Errno::NOENT || e == Errno::NOTDIR;
    // The directory the last items were in, and what opening it gave.
    let mut dir: Option<(Vec<u8>, Result<rustix::fd::OwnedFd, Looked>)> = None;
    for item in items {
        let path = path_of(item);
        let (parent, name) = match path.iter().rposition(|b| *b == b'/') {
            Some(at) => (&path[..at], &path[at + 1..]),
            None => (&path[..0], path),
        };
        if dir.as_ref().is_none_or(|(d, _)| d.as_slice() != parent) {
            let opened = if parent.is_empty() {
                rustix::io::dup(&root).map_err(|_| Looked::Blocked)
            } else {
                rustix::fs::openat2(
                    &root,
                    std::ffi::OsStr::from_bytes(parent),
                    OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                    Mode::empty(),
                    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
                )
                .map_err(|e| {
                    if gone(e) {
                        Looked::Gone
                    } else {
                        Looked::Blocked
                    }
                })
            };
            dir = Some((parent.to_vec(), opened));
        }
        let looked = match dir.as_ref().map(|(_, fd)| fd) {
            Some(Ok(fd)) => match rustix::fs::statat(
                fd,
                std::ffi::OsStr::from_bytes(name),
                AtFlags::SYMLINK_NOFOLLOW,
            ) {
                Ok(st) => Looked::Found(st),
                Err(e) if gone(e) => Looked::Gone,
                Err(_) => Looked::Blocked,
            },
            Some(Err(Looked::Gone)) => Looked::Gone,
            _ => Looked::Blocked,
        };
        if !f(item, looked) {
            return false;
        }
    }
    true
}

/// One recorded index entry: its path and the stat data the checkout wrote.
#[derive(Debug, Clone)]
pub(super) struct Tracked {
    pub(super) path: Vec<u8>,
    pub(super) size: u32,
    pub(super) mtime: (u32, u32),
    pub(super) ctime: (u32, u32),
    pub(super) ino: u32,
    pub(super) mode: u32,
}

/// The entries of the index file at `index` (`None`: it does not decode).
pub(super) fn tracked(index: &Path, kind: gix::hash::Kind) -> Option<Vec<Tracked>> {
    let options = gix::index::decode::Options {
        thread_limit: Some(1),
        ..Default::default()
    };
    let file = gix::index::File::at(index, kind, true, options).ok()?;
    Some(
        file.entries()
            .iter()
            .filter(|e| e.flags.stage_raw() == 0)
            .map(|e| Tracked {
                path: e.path(&file).to_vec(),
                size: e.stat.size,
                mtime: (e.stat.mtime.secs, e.stat.mtime.nsecs),
                ctime: (e.stat.ctime.secs, e.stat.ctime.nsecs),
                ino: e.stat.ino,
                mode: e.mode.bits(),
            })
            .collect(),
    )
}

/// What a change touches, by size, before it is staged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Measured {
    /// Files added, modified or deleted.
    pub(super) files: u64,
    /// Bytes of the added and modified files.
    pub(super) bytes: u64,
}

impl Measured {
    /// Counts one file of `size` bytes at `path`; refuses it over `max_file_bytes`, and the
    /// change once it passes `max_files` or `max_change_bytes`.
    pub(super) fn add(
        &mut self,
        path: &[u8],
        size: u64,
        limits: &ChangeLimits,
    ) -> Result<(), WorkError> {
        let shown = String::from_utf8_lossy(path);
        if size > limits.max_file_bytes {
            return Err(refused(format!(
                "{shown} holds {size} bytes, more than the {} a change may add (max_file_bytes in [work])",
                limits.max_file_bytes
            )));
        }
        self.files += 1;
        self.bytes = self.bytes.saturating_add(size);
        if self.files > limits.max_files {
            return Err(refused(format!(
                "the change touches more than {} files (max_files in [work])",
                limits.max_files
            )));
        }
        if self.bytes > limits.max_change_bytes {
            return Err(refused(format!(
                "the change holds more than {} bytes (max_change_bytes in [work])",
                limits.max_change_bytes
            )));
        }
        Ok(())
    }
}

/// Whether a tracked file's stat data is what the checkout recorded for it (size, times,
/// inode, file type): then it is not part of the change.
fn unchanged(st: &rustix::fs::Stat, e: &Tracked) -> bool {
    st.st_size as u64 == u64::from(e.size)
        && (st.st_mtime as u32, st.st_mtime_nsec as u32) == e.mtime
        && (st.st_ctime as u32, st.st_ctime_nsec as u32) == e.ctime
        && st.st_ino as u32 == e.ino
        && st.st_mode & 0o170000 == e.mode & 0o170000
}

/// Measures the change in `tree` against `limits`: the tracked files whose stat data differs
/// from what the checkout recorded in `index` (or that are gone) and the `untracked` paths git
/// lists, each file's size from `lstat`. Refuses a file over `max_file_bytes`, a change over
/// `max_change_bytes` or `max_files`.
pub(super) fn measure(
    tree: &Path,
    index: &[Tracked],
    untracked: &[Vec<u8>],
    limits: &ChangeLimits,
) -> Result<Measured, WorkError> {
    let mut m = Measured::default();
    let mut count = |path: &[u8], size: u64| m.add(path, size, limits);
    let mut failed: Option<WorkError> = None;
    let mut keep = |r: Result<(), WorkError>| match r {
        Ok(()) => true,
        Err(e) => {
            failed = Some(e);
            false
        }
    };
    let walked = stat_each(
        tree,
        index,
        |e| &e.path,
        |e, looked| {
            let size = match looked {
                Looked::Found(st) => {
                    if unchanged(&st, e) {
                        return true;
                    }
                    st.st_size as u64
                }
                // Deleted, or no longer reachable as a file: a change of no size.
                Looked::Gone | Looked::Blocked => 0,
            };
            keep(count(&e.path, size))
        },
    );
    let listed: HashSet<&[u8]> = index.iter().map(|e| e.path.as_slice()).collect();
    let new: Vec<&Vec<u8>> = untracked
        .iter()
        .filter(|p| !listed.contains(p.as_slice()))
        .collect();
    let walked = walked
        && stat_each(
            tree,
            &new,
            |p| p.as_slice(),
            |p, looked| {
                let size = match looked {
                    Looked::Found(st) => st.st_size as u64,
                    Looked::Gone | Looked::Blocked => 0,
                };
                keep(count(p, size))
            },
        );
    match failed {
        Some(e) => Err(e),
        None if !walked => Err(WorkError::Io(format!(
            "cannot look at the files of {}",
            tree.display()
        ))),
        None => Ok(m),
    }
}

/// Whether the symbolic link at `path` (a path in the change, `/`-separated) pointing at
/// `target` stays inside the worktree: a relative target that never climbs above the top.
pub(super) fn link_stays_inside(path: &str, target: &[u8]) -> bool {
    if target.first() == Some(&b'/') || target.is_empty() {
        return false;
    }
    // The link's own directory's depth, then each component of the target.
    let mut depth: i64 = path.matches('/').count() as i64;
    for part in target.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => depth += 1,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_that_climb_out_or_start_at_the_root_do_not_stay_inside() {
        assert!(link_stays_inside("a", b"b"));
        assert!(link_stays_inside("d/a", b"../b"));
        assert!(link_stays_inside("d/e/a", b"../../b/c"));
        assert!(link_stays_inside("a", b"./b/../c"));
        assert!(!link_stays_inside("a", b"../b"));
        assert!(!link_stays_inside("d/a", b"../../.git/hooks/pre-commit"));
        assert!(!link_stays_inside("a", b"/etc/passwd"));
        assert!(!link_stays_inside("a", b""));
        assert!(!link_stays_inside("d/a", b"x/../../../y"));
    }

    #[test]
    fn a_fifo_a_nested_git_and_too_much_disk_are_refused_without_opening_anything() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        std::fs::write(t.join(".git"), "gitdir: /nowhere\n").unwrap();
        std::fs::create_dir(t.join("src")).unwrap();
        std::fs::write(t.join("src/a.txt"), "a\n").unwrap();
        let limits = ChangeLimits::default();
        let seen = survey(t, &limits).unwrap();
        assert_eq!(seen.entries, 2);
        rustix::fs::mknodat(
            rustix::fs::CWD,
            t.join("src/.gitignore"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        let e = survey(t, &limits).unwrap_err().to_string();
        assert!(e.contains("FIFO") && e.contains("src/.gitignore"), "{e}");
        std::fs::remove_file(t.join("src/.gitignore")).unwrap();
        std::fs::create_dir_all(t.join("src/Sub/.GIT")).unwrap();
        let e = survey(t, &limits).unwrap_err().to_string();
        assert!(e.contains("nested .git at src/Sub/.GIT"), "{e}");
        std::fs::remove_dir_all(t.join("src/Sub")).unwrap();
        let tiny = ChangeLimits {
            max_disk_bytes: 1,
            ..limits
        };
        let e = survey(t, &tiny).unwrap_err().to_string();
        assert!(e.contains("max_disk_bytes"), "{e}");
    }

    #[test]
    fn a_plain_read_refuses_links_and_fifos_and_stops_at_its_cap() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        std::fs::write(t.join("f"), "12345").unwrap();
        assert_eq!(read_plain(&t.join("f"), 5).unwrap().unwrap(), b"12345");
        assert!(
            read_plain(&t.join("f"), 4)
                .unwrap_err()
                .to_string()
                .contains("longer")
        );
        assert_eq!(read_plain(&t.join("missing"), 4).unwrap(), None);
        std::os::unix::fs::symlink(t.join("f"), t.join("l")).unwrap();
        assert!(
            read_plain(&t.join("l"), 9)
                .unwrap_err()
                .to_string()
                .contains("symbolic")
        );
        rustix::fs::mknodat(
            rustix::fs::CWD,
            t.join("p"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        assert!(
            read_plain(&t.join("p"), 9)
                .unwrap_err()
                .to_string()
                .contains("not a regular")
        );
    }

    #[test]
    fn a_directory_turned_into_a_link_is_never_entered() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "x").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        std::fs::create_dir(t.join("d")).unwrap();
        std::fs::write(t.join("d/a"), "a").unwrap();
        std::fs::write(t.join("top"), "t").unwrap();
        std::os::unix::fs::symlink(outside.path(), t.join("l")).unwrap();
        let paths: Vec<&[u8]> = vec![b"d/a", b"d/missing", b"l/secret", b"top"];
        let mut seen = Vec::new();
        assert!(stat_each(
            t,
            &paths,
            |p| p,
            |p, looked| {
                let what = match looked {
                    Looked::Found(st) => format!("found {}", st.st_size),
                    Looked::Gone => "gone".into(),
                    Looked::Blocked => "blocked".into(),
                };
                seen.push((String::from_utf8_lossy(p).into_owned(), what));
                true
            }
        ));
        let want = [
            ("d/a", "found 1"),
            ("d/missing", "gone"),
            ("l/secret", "blocked"),
            ("top", "found 1"),
        ];
        assert_eq!(
            seen,
            want.map(|(a, b)| (a.to_string(), b.to_string())).to_vec()
        );
    }

    #[test]
    fn limits_count_changed_and_untracked_files_by_size() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        std::fs::write(t.join("new.bin"), vec![0u8; 100]).unwrap();
        let limits = ChangeLimits {
            max_file_bytes: 99,
            ..ChangeLimits::default()
        };
        let e = measure(t, &[], &[b"new.bin".to_vec()], &limits)
            .unwrap_err()
            .to_string();
        assert!(e.contains("new.bin holds 100 bytes"), "{e}");
        let few = ChangeLimits {
            max_files: 1,
            ..ChangeLimits::default()
        };
        std::fs::write(t.join("b"), "b").unwrap();
        let gone = Tracked {
            path: b"gone".to_vec(),
            size: 1,
            mtime: (0, 0),
            ctime: (0, 0),
            ino: 0,
            mode: 0o100644,
        };
        let e = measure(t, &[gone], &[b"b".to_vec()], &few)
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than 1 files"), "{e}");
        let m = measure(
            t,
            &[],
            &[b"b".to_vec(), b"new.bin".to_vec()],
            &ChangeLimits::default(),
        )
        .unwrap();
        assert_eq!(
            m,
            Measured {
                files: 2,
                bytes: 101
            }
        );
    }
}
