//! Sparing a task's first `git add -A` from re-reading every file its worktree checked out.
//!
//! git (built, as usual, without `USE_NSEC`) compares file times in whole seconds, so an index
//! entry whose file time falls in the same second as the index file's own is "racily clean":
//! the stat data cannot show a change made later in that second, and git reads and hashes the
//! file again (and `add -A` also freshens its object). A checkout writes its files and its
//! index within a second, so on a repository of 10,000 files the first `add -A` of every task
//! re-hashed all 10,000 (most of what a task's commit cost beyond `git worktree add`).
//!
//! The index records nanoseconds, though. [`Stamp`] remembers the index file the checkout
//! wrote; when the task's change is committed and the index is still that one, [`settle`]
//! checks each racy entry at nanosecond precision against its file:
//!
//! * the entry's recorded ctime is strictly earlier than the index's mtime (so the file was
//!   written before the index, and any write after the checkout, when the worker ran, gives
//!   it a later ctime) and the file's ctime, mtime, size and inode are still exactly the ones
//!   recorded: the file has not been written since; or
//! * the file is gone, or its size or type differs: git sees that change on its own.
//!
//! Only when every racy entry passes is the index's mtime moved to the next whole second, so
//! git trusts the stat data it recorded. Any doubt (an entry only the nanoseconds show as
//! changed, an entry with flags, a conflict stage, a split index, an index the worker's own git
//! commands rewrote, an index that does not decode, a file that cannot be looked at) leaves
//! the index alone, and git re-hashes as it always did: this never hides a change git would
//! have found. It assumes, as git's own rule does, that the filesystem's clock does not go
//! backwards.
//!
//! The index is read with `gix-index` (entries, stat data, flags), in this process: no `git
//! ls-files` to spawn and no listing to parse.
//!
//! [`scratch_index`] serves the `write-tree` after `add -A`: that index is racy again (it was
//! just written, in the same second as the worker's edits), and `write-tree` rewriting it would
//! make git re-hash every racy file once more; on a copy dated a second later it does not.

use std::fs::{File, FileTimes, Metadata};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The identity of an index file: its mtime and ctime in nanoseconds, size and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    mtime: (i64, i64),
    ctime: (i64, i64),
    size: u64,
    ino: u64,
}

impl Stamp {
    fn of(m: &Metadata) -> Stamp {
        Stamp {
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
            size: m.size(),
            ino: m.ino(),
        }
    }
}

/// One index entry's recorded stat data (git keeps seconds, sizes and inodes in 32 bits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Recorded {
    pub path: Vec<u8>,
    pub mode: u32,
    pub stage: u32,
    pub ctime: (u32, u32),
    pub mtime: (u32, u32),
    pub ino: u32,
    pub size: u32,
    /// The entry's flags as git keeps them in memory (without the path length).
    pub flags: u32,
}

/// The index file of the worktree at `tree` (`gitdir: PATH/index` from its `.git` file), for
/// tests that look at a real worktree's index (git forum itself never reads a worktree's link
/// after its worker ran: it keeps a private copy of the index, see `crate::work`).
#[cfg(test)]
pub(super) fn index_of(tree: &Path) -> Option<PathBuf> {
    let link = std::fs::read(tree.join(".git")).ok()?;
    if link.len() > 4096 {
        return None;
    }
    let text = std::str::from_utf8(&link).ok()?;
    let dir = text
        .strip_prefix("gitdir: ")?
        .trim_end_matches(['\n', '\r']);
    let dir = Path::new(dir);
    let dir = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        tree.join(dir)
    };
    Some(dir.join("index"))
}

/// The stamp of the index file `index`, right after the checkout it records.
pub(super) fn stamp(index: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(index).ok()?;
    Some(Stamp::of(&m))
}

/// The entries of `index` whose mtime is not earlier than the second `index_sec` (the racy
/// ones).
pub(super) fn racy_entries(index: &gix::index::State, index_sec: u32) -> Vec<Recorded> {
    let name_len = gix::index::entry::Flags::PATH_LEN.bits();
    index
        .entries()
        .iter()
        .filter(|e| e.stat.mtime.secs >= index_sec)
        .map(|e| Recorded {
            path: e.path(index).to_vec(),
            mode: e.mode.bits(),
            stage: e.flags.stage_raw(),
            ctime: (e.stat.ctime.secs, e.stat.ctime.nsecs),
            mtime: (e.stat.mtime.secs, e.stat.mtime.nsecs),
            ino: e.stat.ino,
            size: e.stat.size,
            flags: e.flags.bits() & !name_len,
        })
        .collect()
}

/// The index file at `path`, or `None` when it does not decode. Its trailing checksum is not
/// checked (git does not check it when it reads an index either): a corrupt index fails the
/// `git add` that follows, whatever its mtime says.
fn read_index(path: &Path, kind: gix::hash::Kind) -> Option<gix::index::State> {
    let options = gix::index::decode::Options {
        thread_limit: Some(1),
        ..Default::default()
    };
    let file = gix::index::File::at(path, kind, true, options).ok()?;
    // A split index keeps most entries elsewhere: left to git.
    if file.link().is_some() {
        return None;
    }
    Some(file.into())
}

/// What `lstat` shows of a file now: its type and permission bits, size, times and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Seen {
    mode: u32,
    size: u64,
    ctime: (i64, i64),
    mtime: (i64, i64),
    ino: u64,
}

impl Seen {
    fn of(st: &rustix::fs::Stat) -> Seen {
        Seen {
            mode: st.st_mode,
            size: st.st_size as u64,
            ctime: (st.st_ctime, st.st_ctime_nsec as i64),
            mtime: (st.st_mtime, st.st_mtime_nsec as i64),
            ino: st.st_ino,
        }
    }
}

/// Whether the file `now` (or its absence) leaves the entry `e` safe to trust: untouched at
/// nanosecond precision since it was recorded before `index` (the index's mtime), or changed in
/// a way git sees from whole seconds.
pub(super) fn trusted(e: &Recorded, now: Option<&Seen>, index: (u32, u32)) -> bool {
    if e.flags != 0 || e.stage != 0 || !matches!(e.mode, 0o100644 | 0o100755 | 0o120000) {
        return false;
    }
    let Some(m) = now else {
        return true;
    };
    let kind = m.mode & 0o170000;
    if kind != e.mode & 0o170000 || m.size as u32 != e.size {
        return true;
    }
    let ns = |(s, n): (i64, i64)| (s as u32, n as u32);
    e.ctime < index && ns(m.ctime) == e.ctime && ns(m.mtime) == e.mtime && m.ino as u32 == e.ino
}

/// Whether every entry of `racy` (in index order) is [`trusted`] against its file under `tree`,
/// looked at with one `lstat` each ([`super::hostile::stat_each`]: `statat` from its directory,
/// opened once per directory rather than walking the whole path every time, which cost twice
/// as much). A link where a directory should be leaves the decision to git. One thread: on two
/// loaded cores, two threads measured slower than one.
fn all_trusted(tree: &Path, racy: &[Recorded], index: (u32, u32)) -> bool {
    use super::hostile::{Looked, stat_each};
    stat_each(
        tree,
        racy,
        |e| &e.path,
        |e, looked| match looked {
            Looked::Found(st) => trusted(e, Some(&Seen::of(&st)), index),
            Looked::Gone => trusted(e, None, index),
            Looked::Blocked => false,
        },
    )
}

/// See the module doc: when the index file `index` of the worktree at `tree` is still the one
/// stamped `before` and every racy entry is trusted, moves the index's mtime to the next second
/// (`kind` is the repository's object hash, for reading the index). Returns whether it did.
/// Any failure is a `false`: git then checks as it always does.
pub(super) fn settle(tree: &Path, index: &Path, before: Stamp, kind: gix::hash::Kind) -> bool {
    let Ok(meta) = std::fs::metadata(index) else {
        return false;
    };
    if Stamp::of(&meta) != before || split_index(index) {
        return false;
    }
    let Some(state) = read_index(index, kind) else {
        return false;
    };
    let at = (meta.mtime() as u32, meta.mtime_nsec() as u32);
    let racy = racy_entries(&state, at.0);
    if racy.is_empty() {
        return true;
    }
    if !all_trusted(tree, &racy, at) {
        return false;
    }
    // The index must not have moved while its entries were checked.
    if std::fs::metadata(index).map(|m| Stamp::of(&m)).ok() != Some(before) {
        return false;
    }
    let next = SystemTime::UNIX_EPOCH + Duration::from_secs(meta.mtime() as u64 + 1);
    File::options()
        .write(true)
        .open(index)
        .and_then(|f| f.set_times(FileTimes::new().set_modified(next)))
        .is_ok()
}

/// A copy of the index file `index`, beside it (`NAME.write-tree`), dated one second after the
/// original, so none of its entries is racily clean: `write-tree` on it writes the tree of the
/// entries as recorded and rewrites the copy (not the index itself) without re-reading any
/// file. `None` (use the index itself) when it is split or the copy cannot be made.
pub(super) fn scratch_index(index: &Path) -> Option<PathBuf> {
    if split_index(index) {
        return None;
    }
    let meta = std::fs::metadata(index).ok()?;
    let copy = index.with_extension("write-tree");
    let made = std::fs::copy(index, &copy).and_then(|_| {
        let next = SystemTime::UNIX_EPOCH + Duration::from_secs(meta.mtime().max(0) as u64 + 1);
        File::options()
            .write(true)
            .open(&copy)?
            .set_times(FileTimes::new().set_modified(next))
    });
    match made {
        Ok(()) => Some(copy),
        Err(_) => {
            let _ = std::fs::remove_file(&copy);
            None
        }
    }
}

/// Whether the index beside `index` is split (a `sharedindex.*` file there): its entries'
/// racy rule is the shared file's, so it is left alone.
fn split_index(index: &Path) -> bool {
    let Some(dir) = index.parent() else {
        return true;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return true;
    };
    entries
        .flatten()
        .any(|e| e.file_name().as_bytes().starts_with(b"sharedindex."))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA1: gix::hash::Kind = gix::hash::Kind::Sha1;

    fn git(dir: &Path, args: &[&str]) {
        super::super::tests::git(dir, args, &[]);
    }

    /// Dates the index of the worktree at `tree` 1 ns after the latest ctime of `files` (in
    /// it), so it is racy for sure; returns the file written last.
    fn date_index_after(tree: &Path, files: impl Iterator<Item = PathBuf>) -> PathBuf {
        let (latest, last) = files
            .map(|f| {
                let m = std::fs::metadata(&f).unwrap();
                ((m.ctime(), m.ctime_nsec()), f)
            })
            .max()
            .unwrap();
        let at = SystemTime::UNIX_EPOCH
            + Duration::new(latest.0 as u64, latest.1 as u32)
            + Duration::from_nanos(1);
        File::options()
            .write(true)
            .open(index_of(tree).unwrap())
            .unwrap()
            .set_times(FileTimes::new().set_modified(at))
            .unwrap();
        last
    }

    /// A repository under `tmp` whose one commit holds `files` (path, content), and a fresh
    /// detached worktree of it; returns the worktree.
    fn worktree_of(tmp: &Path, files: &[(String, String)]) -> PathBuf {
        let repo = tmp.join("r");
        std::fs::create_dir(&repo).unwrap();
        git(&repo, &["init", "-q", "."]);
        for (path, text) in files {
            let path = repo.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "s"]);
        let tree = tmp.join("t");
        git(
            &repo,
            &["worktree", "add", "-q", "--detach", tree.to_str().unwrap()],
        );
        tree
    }

    /// A fresh worktree whose index is made racy for sure: its mtime put in the same second as
    /// its files (1 ns after the latest ctime).
    /// Returns the worktree, its index and the file written last.
    fn racy_tree(tmp: &Path) -> (PathBuf, PathBuf, PathBuf) {
        let files: Vec<(String, String)> = (0..20)
            .map(|i| (format!("f{i}"), format!("{i:02}\n")))
            .collect();
        let tree = worktree_of(tmp, &files);
        let index = index_of(&tree).unwrap();
        let last = date_index_after(&tree, (0..20).map(|i| tree.join(format!("f{i}"))));
        (tree, index, last)
    }

    #[test]
    fn settle_trusts_untouched_files_and_never_a_change_only_nanoseconds_show() {
        let tmp = tempfile::tempdir().unwrap();
        let (tree, index, _) = racy_tree(tmp.path());
        let before = stamp(&index).unwrap();
        let sec = std::fs::metadata(&index).unwrap().mtime();
        // An edit git sees by its size: trusted, and the index moves to the next second.
        std::fs::write(tree.join("f1"), "longer\n").unwrap();
        assert!(settle(&tree, &index, before, SHA1));
        assert_eq!(std::fs::metadata(&index).unwrap().mtime(), sec + 1);

        let tmp = tempfile::tempdir().unwrap();
        let (tree, index, last) = racy_tree(tmp.path());
        let before = stamp(&index).unwrap();
        let m = std::fs::metadata(&index).unwrap();
        // Same size, same inode: only the nanoseconds show it, so git must look for itself.
        std::fs::write(&last, "XX\n").unwrap();
        assert!(!settle(&tree, &index, before, SHA1));
        // Read as the wrong hash, the index does not decode: left alone.
        assert!(!settle(&tree, &index, before, gix::hash::Kind::Sha256));
        assert_eq!(
            Stamp::of(&std::fs::metadata(&index).unwrap()),
            Stamp::of(&m)
        );
        // An index someone rewrote since its stamp is left alone.
        std::fs::write(tree.join("f1"), "01\n").unwrap();
        let other = Stamp {
            size: before.size + 1,
            ..before
        };
        assert!(!settle(&tree, &index, other, SHA1));
    }

    #[test]
    fn only_entries_of_the_index_second_or_later_are_racy_and_flags_come_without_the_length() {
        let tmp = tempfile::tempdir().unwrap();
        let (tree, index, _) = racy_tree(tmp.path());
        let state = read_index(&index, SHA1).unwrap();
        let sec = std::fs::metadata(&index).unwrap().mtime() as u32;
        let racy = racy_entries(&state, sec);
        assert_eq!(racy.len(), 20);
        let f3 = racy.iter().find(|e| e.path == b"f3").unwrap();
        let m = std::fs::symlink_metadata(tree.join("f3")).unwrap();
        assert_eq!(
            (f3.mode, f3.stage, f3.flags, f3.size, f3.ino),
            (0o100644, 0, 0, 3, m.ino() as u32)
        );
        assert_eq!(f3.mtime, (m.mtime() as u32, m.mtime_nsec() as u32));
        assert!(racy_entries(&state, sec + 1).is_empty());
    }

    #[test]
    fn write_tree_on_the_scratch_copy_is_the_tree_git_writes_and_leaves_no_copy() {
        let tmp = tempfile::tempdir().unwrap();
        let (tree, index, last) = racy_tree(tmp.path());
        // An edit only the nanoseconds show, staged by git itself.
        std::fs::write(&last, "XX\n").unwrap();
        git(&tree, &["add", "-A"]);
        let on = |i: &Path| {
            let mut c = super::super::git::git(&tree);
            c.env("GIT_INDEX_FILE", i);
            c
        };
        let ours = super::super::write_tree(on, &index).unwrap();
        assert!(!index.with_extension("write-tree").exists());
        let out = crate::gitproc::command()
            .args(["write-tree"])
            .current_dir(&tree)
            .output()
            .unwrap();
        assert_eq!(ours, String::from_utf8_lossy(&out.stdout).trim());
        let name = last.file_name().unwrap().to_str().unwrap();
        let blob = crate::gitproc::command()
            .args(["cat-file", "-p", &format!("{ours}:{name}")])
            .current_dir(&tree)
            .output()
            .unwrap();
        assert_eq!(blob.stdout, b"XX\n");
    }

    /// A racy worktree whose files sit in directories: `a/x`, `a/y`, `b/c/z` and `top`.
    fn racy_dirs(tmp: &Path) -> (PathBuf, Stamp) {
        let files = ["a/x", "a/y", "b/c/z", "top"];
        let tree = worktree_of(tmp, &files.map(|f| (f.to_string(), "12\n".to_string())));
        // Racy for sure: the index dated 1 ns after the latest file.
        date_index_after(&tree, files.iter().map(|f| tree.join(f)));
        let stamp = stamp(&index_of(&tree).unwrap()).unwrap();
        (tree, stamp)
    }

    #[test]
    fn files_in_directories_are_looked_at_and_a_gone_directory_is_a_change_git_sees() {
        // Untouched: trusted.
        let tmp = tempfile::tempdir().unwrap();
        let (tree, before) = racy_dirs(tmp.path());
        assert!(settle(&tree, &index_of(&tree).unwrap(), before, SHA1));

        // A same-size edit deep in a directory: only the nanoseconds show it.
        let tmp = tempfile::tempdir().unwrap();
        let (tree, before) = racy_dirs(tmp.path());
        std::fs::write(tree.join("b/c/z"), "34\n").unwrap();
        assert!(!settle(&tree, &index_of(&tree).unwrap(), before, SHA1));

        // A directory removed, another replaced by a file: git sees both from the paths.
        let tmp = tempfile::tempdir().unwrap();
        let (tree, before) = racy_dirs(tmp.path());
        std::fs::remove_dir_all(tree.join("a")).unwrap();
        std::fs::remove_dir_all(tree.join("b/c")).unwrap();
        std::fs::write(tree.join("b/c"), "now a file\n").unwrap();
        assert!(settle(&tree, &index_of(&tree).unwrap(), before, SHA1));
    }

    #[test]
    fn a_gone_file_is_trusted_and_a_flagged_entry_never() {
        let mut e = Recorded {
            path: b"d0/a.txt".to_vec(),
            mode: 0o100644,
            stage: 0,
            ctime: (100, 5),
            mtime: (100, 5),
            ino: 7,
            size: 16,
            flags: 0,
        };
        assert!(trusted(&e, None, (100, 9)));
        e.flags = 0x8000;
        assert!(!trusted(&e, None, (100, 9)));
        e.flags = 0;
        e.stage = 2;
        assert!(!trusted(&e, None, (100, 9)));
    }
}
