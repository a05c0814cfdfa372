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
//! commands rewrote, output past its bound) leaves the index alone, and git re-hashes as it
//! always did: this never hides a change git would have found. It assumes, as git's own rule
//! does, that the filesystem's clock does not go backwards.
//!
//! Hand-written rather than read through a library: git prints the recorded stat data itself
//! (`ls-files --debug`), and the few fields needed are parsed here ([`racy_entries`]).

use std::ffi::OsStr;
use std::fs::{File, FileTimes, Metadata};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::git;

/// Below this size (about a thousand entries) a task's index is left alone: git re-hashing
/// its racy files costs less than the `ls-files` that would spare it.
pub(super) const SMALL_INDEX: u64 = 100 << 10;

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

/// One index entry's recorded stat data, as `ls-files --debug` prints it (git keeps seconds,
/// sizes and inodes in 32 bits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Recorded {
    pub path: Vec<u8>,
    pub mode: u32,
    pub stage: u32,
    pub ctime: (u32, u32),
    pub mtime: (u32, u32),
    pub ino: u32,
    pub size: u32,
    pub flags: u32,
}

/// The index file of the worktree at `tree` (`gitdir: PATH/index` from its `.git` file).
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

/// The stamp of the index of the worktree at `tree`, right after its checkout.
pub(super) fn stamp(tree: &Path) -> Option<Stamp> {
    let index = index_of(tree)?;
    let m = std::fs::metadata(index).ok()?;
    Some(Stamp::of(&m))
}

fn num(s: &[u8]) -> Option<u32> {
    std::str::from_utf8(s).ok()?.parse().ok()
}

fn hex(s: &[u8]) -> Option<u32> {
    u32::from_str_radix(std::str::from_utf8(s).ok()?, 16).ok()
}

/// `S:N` after `prefix` in `line`.
fn time(line: &[u8], prefix: &[u8]) -> Option<(u32, u32)> {
    let rest = line.strip_prefix(prefix)?;
    let colon = rest.iter().position(|b| *b == b':')?;
    Some((num(&rest[..colon])?, num(&rest[colon + 1..])?))
}

/// The value after `key` in a `  key: value\tkey: value` line.
fn value<'a>(line: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let at = line.windows(key.len()).position(|w| w == key)?;
    let rest = &line[at + key.len()..];
    let end = rest.iter().position(|b| *b == b'\t').unwrap_or(rest.len());
    Some(&rest[..end])
}

/// Reads the five debug lines of one entry from the front of `chunk`; returns the entry's
/// stat data and what follows them (the next entry's header).
fn debug_lines(chunk: &[u8]) -> Option<([&[u8]; 5], &[u8])> {
    let mut lines: [&[u8]; 5] = [&[]; 5];
    let mut rest = chunk;
    for line in &mut lines {
        let nl = rest.iter().position(|b| *b == b'\n')?;
        *line = &rest[..nl];
        rest = &rest[nl + 1..];
    }
    Some((lines, rest))
}

/// `MODE OID STAGE\tPATH`.
fn header(h: &[u8]) -> Option<(u32, u32, Vec<u8>)> {
    let tab = h.iter().position(|b| *b == b'\t')?;
    let mut parts = h[..tab].split(|b| *b == b' ');
    let mode = u32::from_str_radix(std::str::from_utf8(parts.next()?).ok()?, 8).ok()?;
    parts.next()?;
    let stage = num(parts.next()?)?;
    Some((mode, stage, h[tab + 1..].to_vec()))
}

/// The entries of `git ls-files -z --stage --debug` whose mtime is not earlier than the
/// second `index_sec` (the racy ones), or `None` when the listing does not read as expected.
pub(super) fn racy_entries(listing: &[u8], index_sec: u32) -> Option<Vec<Recorded>> {
    let mut out = Vec::new();
    if listing.is_empty() {
        return Some(out);
    }
    let mut chunks = listing.split(|b| *b == 0);
    let mut head = header(chunks.next()?)?;
    for chunk in chunks {
        let (l, rest) = debug_lines(chunk)?;
        let mtime = time(l[1], b"  mtime: ")?;
        if mtime.0 >= index_sec {
            let (mode, stage, path) = head.clone();
            out.push(Recorded {
                path,
                mode,
                stage,
                ctime: time(l[0], b"  ctime: ")?,
                mtime,
                ino: num(value(l[2], b"ino: ")?)?,
                size: num(value(l[4], b"size: ")?)?,
                flags: hex(value(l[4], b"flags: ")?)?,
            });
        }
        if rest.is_empty() {
            return Some(out);
        }
        head = header(rest)?;
    }
    // The listing ended on a header without its stat data.
    None
}

/// Whether the file `now` (or its absence) leaves the entry `e` safe to trust: untouched at
/// nanosecond precision since it was recorded before `index` (the index's mtime), or changed in
/// a way git sees from whole seconds.
pub(super) fn trusted(e: &Recorded, now: Option<&Metadata>, index: (u32, u32)) -> bool {
    if e.flags != 0 || e.stage != 0 || !matches!(e.mode, 0o100644 | 0o100755 | 0o120000) {
        return false;
    }
    let Some(m) = now else {
        return true;
    };
    let kind = m.mode() & 0o170000;
    if kind != e.mode & 0o170000 || m.size() as u32 != e.size {
        return true;
    }
    let ns = |s: i64, n: i64| (s as u32, n as u32);
    e.ctime < index
        && ns(m.ctime(), m.ctime_nsec()) == e.ctime
        && ns(m.mtime(), m.mtime_nsec()) == e.mtime
        && m.ino() as u32 == e.ino
}

/// See the module doc: when the index of the worktree at `tree` is still the one stamped
/// `before`, at least `smallest` bytes, and every racy entry is trusted, moves the index's
/// mtime to the next second. Returns whether it did. Any failure is a `false`: git then checks
/// as it always does.
pub(super) fn settle(tree: &Path, before: Stamp, smallest: u64) -> bool {
    let Some(index) = index_of(tree) else {
        return false;
    };
    let Ok(meta) = std::fs::metadata(&index) else {
        return false;
    };
    if Stamp::of(&meta) != before || before.size < smallest || split_index(&index) {
        return false;
    }
    let Ok(out) = git::run(tree, &["ls-files", "-z", "--stage", "--debug"]) else {
        return false;
    };
    if !out.ok {
        return false;
    }
    let at = (meta.mtime() as u32, meta.mtime_nsec() as u32);
    let Some(racy) = racy_entries(&out.stdout, at.0) else {
        return false;
    };
    if racy.is_empty() {
        return true;
    }
    for e in &racy {
        let path = tree.join(OsStr::from_bytes(&e.path));
        let now = match std::fs::symlink_metadata(&path) {
            Ok(m) => Some(m),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(_) => return false,
        };
        if !trusted(e, now.as_ref(), at) {
            return false;
        }
    }
    // The index must not have moved while its entries were checked.
    if std::fs::metadata(&index).map(|m| Stamp::of(&m)).ok() != Some(before) {
        return false;
    }
    let next = SystemTime::UNIX_EPOCH + Duration::from_secs(meta.mtime() as u64 + 1);
    File::options()
        .write(true)
        .open(&index)
        .and_then(|f| f.set_times(FileTimes::new().set_modified(next)))
        .is_ok()
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

    const LISTING: &[u8] = b"100644 ec1d 0\td0/a.txt\0  ctime: 100:5\n  mtime: 100:5\n  dev: 1\tino: 7\n  uid: 0\tgid: 0\n  size: 16\tflags: 0\n100755 351b 0\tb c\n.sh\0  ctime: 99:1\n  mtime: 99:1\n  dev: 1\tino: 8\n  uid: 0\tgid: 0\n  size: 3\tflags: 0\n";

    #[test]
    fn only_entries_of_the_index_second_or_later_are_racy() {
        let all = racy_entries(LISTING, 99).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].path, b"b c\n.sh");
        assert_eq!((all[1].mode, all[1].ino, all[1].size), (0o100755, 8, 3));
        let racy = racy_entries(LISTING, 100).unwrap();
        assert_eq!(racy.len(), 1);
        assert_eq!(
            racy[0],
            Recorded {
                path: b"d0/a.txt".to_vec(),
                mode: 0o100644,
                stage: 0,
                ctime: (100, 5),
                mtime: (100, 5),
                ino: 7,
                size: 16,
                flags: 0,
            }
        );
        assert_eq!(racy_entries(b"", 5), Some(Vec::new()));
        // Cut short: no stat data after the last header.
        assert_eq!(racy_entries(&LISTING[..40], 0), None);
    }

    fn git(dir: &Path, args: &[&str]) {
        let o = std::process::Command::new("git")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_SYSTEM", "/dev/null")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }

    /// A fresh worktree whose index is made racy for sure: its mtime put in the same second as
    /// its files (1 ns after the latest ctime).
    /// Returns the worktree, its index and the file written last.
    fn racy_tree(tmp: &Path) -> (PathBuf, PathBuf, PathBuf) {
        let repo = tmp.join("r");
        std::fs::create_dir(&repo).unwrap();
        git(&repo, &["init", "-q", "."]);
        for i in 0..20 {
            std::fs::write(repo.join(format!("f{i}")), format!("{i:02}\n")).unwrap();
        }
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "s"]);
        let tree = tmp.join("t");
        git(
            &repo,
            &["worktree", "add", "-q", "--detach", tree.to_str().unwrap()],
        );
        let index = index_of(&tree).unwrap();
        let (latest, last) = (0..20)
            .map(|i| {
                let f = tree.join(format!("f{i}"));
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
            .open(&index)
            .unwrap()
            .set_times(FileTimes::new().set_modified(at))
            .unwrap();
        (tree, index, last)
    }

    #[test]
    fn settle_trusts_untouched_files_and_never_a_change_only_nanoseconds_show() {
        let tmp = tempfile::tempdir().unwrap();
        let (tree, index, _) = racy_tree(tmp.path());
        let before = stamp(&tree).unwrap();
        let sec = std::fs::metadata(&index).unwrap().mtime();
        // An edit git sees by its size: trusted, and the index moves to the next second.
        std::fs::write(tree.join("f1"), "longer\n").unwrap();
        assert!(settle(&tree, before, 0));
        assert_eq!(std::fs::metadata(&index).unwrap().mtime(), sec + 1);

        let tmp = tempfile::tempdir().unwrap();
        let (tree, index, last) = racy_tree(tmp.path());
        let before = stamp(&tree).unwrap();
        let m = std::fs::metadata(&index).unwrap();
        // Same size, same inode: only the nanoseconds show it, so git must look for itself.
        std::fs::write(&last, "XX\n").unwrap();
        assert!(!settle(&tree, before, 0));
        assert!(!settle(&tree, before, u64::MAX));
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
        assert!(!settle(&tree, other, 0));
    }

    #[test]
    fn a_gone_file_is_trusted_and_a_flagged_entry_never() {
        let mut e = racy_entries(LISTING, 100).unwrap().remove(0);
        assert!(trusted(&e, None, (100, 9)));
        e.flags = 0x8000;
        assert!(!trusted(&e, None, (100, 9)));
    }
}
