//! Scratch directories: temporary directories that only this user can read.
//!
//! A worker's task checkout, the worktrees `reproduce` replays in, the objects a replay merges
//! into, a pack copied for `doctor --from-pack` and the egress proxy's sockets all hold the
//! repository's files or a way into the user's network. `tempfile` makes a directory with the
//! process's default mode (0755 under the usual umask), so anyone on the machine could read
//! what lay in `/tmp` while it was there, or after a process killed outright left it behind.
//! Every such directory is made here instead, with mode 0700 from its creation on (no window
//! between a wider mkdir and a chmod). A structure test (`scratch_dirs`) keeps other code from
//! making one another way.
//!
//! A directory made with [`tracked`] is also listed for the process, so that a process about
//! to end at once (a `git forum worker` told twice to stop) removes the ones still held
//! ([`remove_tracked`]), which no destructor would; and it names its process (id and start
//! time) in a file, so that when the process was killed outright a later one removes it
//! ([`sweep`]).

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tempfile::TempDir;

/// The [`Tracked`] directories this process holds now.
static TRACKED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// A private directory listed for [`remove_tracked`] while it lives.
#[derive(Debug)]
pub(crate) struct Tracked {
    dir: Option<TempDir>,
    path: PathBuf,
}

impl Tracked {
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Tracked {
    /// Removes the directory, then takes it off the list: a forced exit meanwhile still finds
    /// it there.
    fn drop(&mut self) {
        drop(self.dir.take());
        let mut all = TRACKED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = all.iter().position(|p| *p == self.path) {
            all.swap_remove(at);
        }
    }
}

/// The file in a [`Tracked`] directory that names the process holding it.
const OWNER: &str = ".forum-owner";

/// The pid namespace of this process (`/proc/self/ns/pid`, `pid:[N]`): process ids name
/// processes only within it, and a temporary folder may be shared with another (a container).
fn pid_namespace() -> Option<String> {
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    Some(link.to_string_lossy().into_owned())
}

/// When process `pid` started (clock ticks since boot, `/proc/PID/stat`'s 22nd field): with the
/// id, a name for the process that a later one reusing the id does not share.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command's name, which may hold spaces and parentheses.
    let (_, rest) = stat.rsplit_once(") ")?;
    rest.split(' ').nth(19)?.parse().ok()
}

/// [`dir`], listed for [`remove_tracked`] until dropped, and naming this process for
/// [`sweep`].
pub(crate) fn tracked(prefix: &str) -> std::io::Result<Tracked> {
    let d = dir(prefix)?;
    let me = std::process::id();
    if let (Some(start), Some(ns)) = (start_time(me), pid_namespace()) {
        std::fs::write(d.path().join(OWNER), format!("{me} {start} {ns}\n"))?;
    }
    let path = d.path().to_path_buf();
    TRACKED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(path.clone());
    Ok(Tracked { dir: Some(d), path })
}

/// Removes every [`Tracked`] directory still held, for a process about to exit without
/// running its destructors; returns how many there were.
pub(crate) fn remove_tracked() -> usize {
    let all = std::mem::take(&mut *TRACKED.lock().unwrap_or_else(|p| p.into_inner()));
    for p in &all {
        let _ = std::fs::remove_dir_all(p);
    }
    all.len()
}

/// A new private (0700) directory in the system's temporary folder, named `PREFIX…`, removed
/// when the returned value is dropped.
pub(crate) fn dir(prefix: &str) -> std::io::Result<TempDir> {
    dir_in(prefix, &std::env::temp_dir())
}

/// A new private (0700) directory in `parent`, named `PREFIX…`, removed when dropped.
pub(crate) fn dir_in(prefix: &str, parent: &Path) -> std::io::Result<TempDir> {
    tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(parent)
}

/// Removes the directories named `PREFIX…` in the system's temporary folder that [`tracked`]
/// made for a process of this user that is gone (killed outright, so that nothing removed
/// them); returns how many. A directory whose process lives, that names no process or one of
/// another pid namespace, or that is another user's or not a directory is left alone.
pub(crate) fn sweep(prefix: &str) -> usize {
    use std::io::Read as _;
    use std::os::unix::fs::MetadataExt as _;
    let uid = rustix::process::getuid().as_raw();
    let Some(our_ns) = pid_namespace() else {
        return 0;
    };
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        if !e.file_name().to_string_lossy().starts_with(prefix) {
            continue;
        }
        let path = e.path();
        let ours = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && m.uid() == uid);
        if !ours {
            continue;
        }
        // A plain file only: a pipe there would block the open, a link lead elsewhere.
        let owner_file = path.join(OWNER);
        if !std::fs::symlink_metadata(&owner_file).is_ok_and(|m| m.is_file()) {
            continue;
        }
        let mut owner = String::new();
        let read =
            std::fs::File::open(&owner_file).and_then(|f| f.take(64).read_to_string(&mut owner));
        let named = read.ok().and_then(|_| {
            let mut f = owner.split_whitespace();
            let (pid, start, ns) = (f.next()?, f.next()?, f.next()?);
            (ns == our_ns).then_some(())?;
            Some((pid.parse::<u32>().ok()?, start.parse::<u64>().ok()?))
        });
        let Some((pid, start)) = named else {
            continue;
        };
        if start_time(pid) != Some(start) && std::fs::remove_dir_all(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn a_scratch_directory_is_the_owners_alone_and_goes_when_dropped() {
        let parent = tempfile::tempdir().unwrap();
        let d = super::dir_in("forum-test-", parent.path()).unwrap();
        let name = d.path().file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("forum-test-"), "{name}");
        let mode = std::fs::metadata(d.path()).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700, "{mode:o}");
        let path = d.path().to_path_buf();
        drop(d);
        assert!(!path.exists());
        let t = super::dir("forum-test-").unwrap();
        assert!(t.path().starts_with(std::env::temp_dir()));
        let mode = std::fs::metadata(t.path()).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700, "{mode:o}");
    }

    #[test]
    fn tracked_directories_are_removed_at_a_forced_exit_until_dropped() {
        // Other tests of this process may hold tracked directories too: only these are
        // looked at.
        let (a, b) = (
            super::tracked("forum-test-a-").unwrap(),
            super::tracked("forum-test-b-").unwrap(),
        );
        std::fs::write(a.path().join("f"), "x").unwrap();
        let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
        let mode = std::fs::metadata(&pa).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700, "{mode:o}");
        drop(b);
        assert!(!pb.exists());
        assert!(
            !super::TRACKED.lock().unwrap().contains(&pb),
            "a dropped directory is no longer listed"
        );
        assert!(super::remove_tracked() >= 1);
        assert!(!pa.exists(), "the held one is removed");
        drop(a);
    }

    #[test]
    fn a_sweep_removes_only_directories_whose_process_is_gone() {
        let prefix = format!("forum-sweep-test-{}-", std::process::id());
        let live = super::tracked(&prefix).unwrap();
        let owner = std::fs::read_to_string(live.path().join(super::OWNER)).unwrap();
        assert!(
            owner.starts_with(&format!("{} ", std::process::id())),
            "{owner}"
        );
        // One left by a process that is gone (its start time is not ours), one naming nobody,
        // and one whose owner file is garbage.
        let ns = super::pid_namespace().unwrap();
        assert!(owner.trim_end().ends_with(&ns), "{owner}");
        let gone = super::dir(&prefix).unwrap().keep();
        std::fs::write(
            gone.join(super::OWNER),
            format!("{} 1 {ns}\n", std::process::id()),
        )
        .unwrap();
        // The same, made in another pid namespace (where the id names another process).
        let foreign = super::dir(&prefix).unwrap().keep();
        std::fs::write(
            foreign.join(super::OWNER),
            format!("{} 1 pid:[1]\n", std::process::id()),
        )
        .unwrap();
        std::fs::create_dir(gone.join("tree")).unwrap();
        let nameless = super::dir(&prefix).unwrap().keep();
        let garbage = super::dir(&prefix).unwrap().keep();
        std::fs::write(garbage.join(super::OWNER), "x".repeat(10_000)).unwrap();
        // An owner that is a pipe (opening it would block) or a link to a gone process's file.
        let piped = super::dir(&prefix).unwrap().keep();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            piped.join(super::OWNER),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let linked = super::dir(&prefix).unwrap().keep();
        let elsewhere = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(elsewhere.path(), format!("{} 1 {ns}\n", std::process::id())).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), linked.join(super::OWNER)).unwrap();
        assert_eq!(super::sweep(&prefix), 1);
        assert!(!gone.exists());
        assert!(live.path().exists() && nameless.exists() && garbage.exists());
        assert!(piped.exists() && linked.exists() && foreign.exists());
        for d in [nameless, garbage, piped, linked, foreign] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }
}
