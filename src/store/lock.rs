//! Locks and the compare-and-swap on the ledger ref: the ledger's writer lock, git's ref
//! lock-file protocol with a recycled spare inode, the intent a writer notes before taking a ref
//! lock, and the recovery of a ref lock whose writer died.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use gix::ObjectId;
use gix::hash::Kind as HashKind;

use super::codec::{COMMITTER, one_line};
use super::error::{StoreError, io};
use super::failpoint::failpoint;
use super::handle::GitStore;
use super::objects::create_in_dir;
pub(crate) use super::refs::CasOutcome;
use super::refs::file_links_and_len;

/// Takes the ref lock `lock` holding `value`, from the spare inode (made first when there is
/// none), else as a new file. `false`: someone else holds it.
///
/// The lock appears with its value in it: a writer killed the moment after leaves a lock that
/// names its value, which the next writer matches with the intent noted beside it and removes.
/// A lock created empty and written after (the last way, where the filesystem can neither
/// rename without replacing nor link) can be left empty, and no writer would touch it.
pub(crate) fn take_ref_lock(spare: &Path, lock: &Path, value: &[u8]) -> Result<bool, StoreError> {
    let held_elsewhere = |e: &std::io::Error| e.kind() == std::io::ErrorKind::AlreadyExists;
    // A spare that could not be used (a second name of the live ref) was removed: the second
    // try makes a fresh one, so this way too the lock appears with its value in it.
    let taken = match take_lock_from_spare(spare, lock, value) {
        Ok(Spare::Dropped) => take_lock_from_spare(spare, lock, value),
        other => other,
    };
    match taken {
        Ok(Spare::Taken) => Ok(true),
        Ok(Spare::Dropped | Spare::Unusable) => {
            match create_in_dir(lock, || {
                OpenOptions::new().write(true).create_new(true).open(lock)
            }) {
                Ok(mut f) => {
                    failpoint("ref-lock-created");
                    f.write_all(value)
                        .map_err(io(format!("writing {}", lock.display())))
                        .inspect_err(|_| {
                            let _ = fs::remove_file(lock);
                        })?;
                    Ok(true)
                }
                Err(e) if held_elsewhere(&e) => Ok(false),
                Err(e) => Err(io(format!("creating {}", lock.display()))(e)),
            }
        }
        Err(e) if held_elsewhere(&e) => Ok(false),
        Err(e) => Err(io(format!("creating {}", lock.display()))(e)),
    }
}

/// What became of a try to take the ref lock through the spare inode.
enum Spare {
    /// The spare, holding the value, is the lock now.
    Taken,
    /// The spare could not be written (see [`take_lock_from_spare`]) and was removed.
    Dropped,
    /// No spare can be made here, or the filesystem can neither rename without replacing nor
    /// link: the caller creates the lock.
    Unusable,
}

/// Takes the ref lock `lock` by writing `value` into the spare inode (made when there is none:
/// the first update, or one after a writer died holding the lock) and moving it in. An
/// `AlreadyExists` error means the lock is held. A spare with another link is the live ref (a
/// writer died between keeping it and the rename), so it is dropped, never written.
fn take_lock_from_spare(spare: &Path, lock: &Path, value: &[u8]) -> std::io::Result<Spare> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt as _;
        let open = || {
            OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(spare)
        };
        let f = match create_in_dir(spare, open) {
            Ok(f) => f,
            Err(_) => return Ok(Spare::Unusable),
        };
        // Same length as the value it held (one object id and a newline): overwriting in place
        // frees and allocates nothing. Writing also refreshes the mtime that tells a stale lock.
        let written = file_links_and_len(&f).and_then(|(is_file, nlink, len)| {
            if !is_file || nlink != 1 {
                return Err(std::io::ErrorKind::InvalidData.into());
            }
            f.write_all_at(value, 0)?;
            if len != value.len() as u64 {
                f.set_len(value.len() as u64)?;
            }
            Ok(())
        });
        drop(f);
        if written.is_err() {
            let _ = fs::remove_file(spare);
            return Ok(Spare::Dropped);
        }
        // Moved in as the lock, unless a lock is there: one directory change per directory.
        #[cfg(target_os = "linux")]
        {
            use rustix::fs::{CWD, RenameFlags, renameat_with};
            match renameat_with(CWD, spare, CWD, lock, RenameFlags::NOREPLACE) {
                Ok(()) => return Ok(Spare::Taken),
                Err(rustix::io::Errno::EXIST) => {
                    return Err(std::io::ErrorKind::AlreadyExists.into());
                }
                // Not supported by this filesystem: link, then unlink.
                Err(_) => {}
            }
        }
        match fs::hard_link(spare, lock) {
            Ok(()) => {
                let _ = fs::remove_file(spare);
                Ok(Spare::Taken)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(e),
            // No hard links here (or another filesystem): create the lock instead.
            Err(_) => Ok(Spare::Unusable),
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (spare, lock, value);
        Ok(Spare::Unusable)
    }
}

/// Where a writer notes the ref lock it is taking, in its writer-lock file: after the write-ahead
/// log's hint (the first 128 bytes).
const INTENT_AT: u64 = 128;

/// Notes (or, with `None`, clears) the value of the ref lock this writer is about to take.
pub(crate) fn note_intent(held: &File, value: Option<&ObjectId>) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        let mut line = [b' '; 65];
        if let Some(v) = value {
            let hex = v.to_hex().to_string();
            line[..hex.len()].copy_from_slice(hex.as_bytes());
        }
        line[64] = b'\n';
        let _ = held.write_all_at(&line, INTENT_AT);
    }
    #[cfg(not(unix))]
    let _ = (held, value);
}

/// The value a git-forum writer noted before taking a ref lock, if any.
pub(crate) fn read_intent(held: &File, hash: HashKind) -> Option<ObjectId> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        let mut line = [0u8; 65];
        let n = held.read_at(&mut line, INTENT_AT).ok()?;
        let text = String::from_utf8_lossy(&line[..n]);
        ObjectId::from_hex(text.trim().as_bytes())
            .ok()
            .filter(|id| id.kind() == hash)
    }
    #[cfg(not(unix))]
    {
        let _ = (held, hash);
        None
    }
}

/// When this machine booted (Linux: `btime` in `/proc/stat`); a lock file older than that was
/// left by a process that is gone.
fn boot_time() -> Option<std::time::SystemTime> {
    let text = fs::read_to_string("/proc/stat").ok()?;
    let secs: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(std::time::UNIX_EPOCH + Duration::from_secs(secs))
}

impl GitStore {
    /// The ledger's writer-lock file.
    pub(crate) fn writer_lock_path(&self) -> PathBuf {
        self.forum_dir()
            .join("locks")
            .join(format!("{}.lock", self.name.replace('/', "%2F")))
    }

    /// Takes the ledger's writer lock (advisory, released by the kernel if we die).
    pub(crate) fn writer_lock(&self) -> Result<Held, StoreError> {
        locked_file(&self.writer_lock_path())
    }

    /// Where the ledger keeps a spare inode for its next ref lock (outside `refs/`, so git never
    /// reads it as a ref).
    pub(crate) fn spare_path(&self) -> PathBuf {
        self.forum_dir()
            .join("spare")
            .join(self.name.replace('/', "%2F"))
    }

    /// Compare-and-swap the ref from `expected` to `new`, with a reflog line, under git's
    /// lock-file protocol: `NAME.lock` is taken exclusively, the current value is checked, the
    /// reflog line appended and the lock renamed over the ref.
    ///
    /// The ref's files are recycled: the inode the rename replaces is kept (hard-linked) as the
    /// spare, and the next update writes its value into the spare and moves it in as the lock
    /// (a rename with `RENAME_NOREPLACE`, or where that is unsupported a link, which fails
    /// when the name exists, as an exclusive create does). An append therefore
    /// neither allocates nor frees an inode for its ref. That matters on ext4: freeing an inode
    /// with data in a rename makes the kernel write the replacement out at once, and without a
    /// journal every later file creation scans past the inodes freed in the last minute.
    pub(crate) fn cas(
        &self,
        held: &File,
        expected: Option<ObjectId>,
        new: ObjectId,
        message: &str,
    ) -> Result<CasOutcome, StoreError> {
        if self.refs_via_git {
            return self.cas_via_git(held, expected, new, message);
        }
        let path = self.ref_path();
        let lock = PathBuf::from(format!("{}.lock", path.display()));
        let value = format!("{new}\n");
        let spare = self.spare_path();
        // Say which ref lock we are about to take, in the writer-lock file we hold: if we die
        // holding it, the next writer (who then holds the writer lock) knows the lock is ours
        // and its holder gone. A ref lock without such a note belongs to someone else.
        // What an earlier writer noted: a lock found below with that value is its, left behind.
        let noted = read_intent(held, self.hash);
        // A note stays until its lock is gone: were it overwritten while that lock is still
        // there (this writer killed before it takes its own), the next writer could no longer
        // tell the lock for a dead writer's, and every writer after would wait on it.
        if noted.is_some() && lock.exists() {
            return Ok(CasOutcome::Locked(lock, noted));
        }
        note_intent(held, Some(&new));
        failpoint("cas-start");
        if !take_ref_lock(&spare, &lock, value.as_bytes())? {
            // Someone other than a git-forum writer took it since the look above (a writer
            // of ours notes first, and we hold the writer lock): there is nothing to keep.
            note_intent(held, None);
            return Ok(CasOutcome::Locked(lock, None));
        }
        // We hold the lock: nobody else moves the ref until it is renamed or removed.
        let release = |outcome: Result<CasOutcome, StoreError>| {
            // The lock's inode becomes the spare again; failing that, it is removed.
            if fs::rename(&lock, &spare).is_err() {
                let _ = fs::remove_file(&lock);
            }
            outcome
        };
        let current = match self.tip_id() {
            Ok(c) => c,
            Err(e) => return release(Err(e)),
        };
        if current != expected {
            return release(Ok(CasOutcome::Conflict));
        }
        failpoint("cas-locked");
        if let Err(e) = self.append_reflog_line(expected, new, message) {
            return release(Err(e));
        }
        failpoint("cas-reflog");
        if expected.is_some() {
            // Keep the inode the rename replaces (a packed-only ref has none). A spare left in
            // place (taking the lock did not use it) is replaced.
            let keep = || match fs::hard_link(&path, &spare) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    fs::remove_file(&spare)?;
                    fs::hard_link(&path, &spare)
                }
                other => other,
            };
            let _ = create_in_dir(&spare, keep);
        }
        if let Err(e) = fs::rename(&lock, &path) {
            return release(Err(io(format!("renaming {} into place", lock.display()))(
                e,
            )));
        }
        note_intent(held, None);
        failpoint("cas-moved");
        Ok(CasOutcome::Moved)
    }

    /// Appends one line to the ref's reflog in git's format, creating the log if needed.
    fn append_reflog_line(
        &self,
        old: Option<ObjectId>,
        new: ObjectId,
        message: &str,
    ) -> Result<(), StoreError> {
        let path = self.reflog_path();
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let old = old.unwrap_or_else(|| ObjectId::null(self.hash));
        let message = one_line(message, "");
        let line = format!("{old} {new} {COMMITTER} {secs} +0000\t{message}\n");
        create_in_dir(&path, || {
            OpenOptions::new().create(true).append(true).open(&path)
        })
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .map_err(io(format!("appending to {}", path.display())))
    }

    /// Removes a ref lock whose holder is provably gone, and returns true; returns false (and
    /// leaves the lock alone) otherwise. The caller holds the ledger's writer lock, so no live
    /// git-forum writer holds a ref lock of this ledger. Gone means either: the lock holds the
    /// value a git-forum writer noted in the writer-lock file before taking it (that writer
    /// died holding it: the kernel gave its writer lock to us), or the lock is older than this
    /// boot of the machine. A lock any other process took (`git update-ref`, a transaction
    /// held open by `git update-ref --stdin`) is never broken, however old.
    pub(crate) fn recover_stale_lock(
        &self,
        lock: &Path,
        held: &File,
        noted: Option<ObjectId>,
    ) -> bool {
        let Ok(mut f) = File::open(lock) else {
            // Gone already.
            return true;
        };
        let mut content = Vec::new();
        let _ = (&mut f).take(256).read_to_end(&mut content);
        let content = String::from_utf8_lossy(&content).trim().to_string();
        let value = ObjectId::from_hex(content.as_bytes()).ok();
        let ours = value.is_some() && value == noted;
        let before_boot = f
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .zip(boot_time())
            .is_some_and(|(m, boot)| m < boot);
        if !(ours || before_boot) {
            return false;
        }
        self.record_and_remove(lock, &content, held)
    }

    /// Removes the ledger's ref lock `lock`, which doctor judged stale (no live process can
    /// hold it; see `stale.rs`), keeping the same record a writer keeps. The caller holds the
    /// writer lock. Returns true when it is gone.
    pub(crate) fn remove_ref_lock(&self, lock: &Path, held: &File) -> bool {
        let Ok(mut f) = File::open(lock) else {
            return true;
        };
        let mut content = Vec::new();
        let _ = (&mut f).take(256).read_to_end(&mut content);
        let content = String::from_utf8_lossy(&content).trim().to_string();
        self.record_and_remove(lock, &content, held)
    }

    /// Records the value a removed ref lock held (the dead writer may have written its reflog
    /// line before it died, and verify uses this record to tell that line from a tampered
    /// ref), then removes the lock.
    fn record_and_remove(&self, lock: &Path, content: &str, held: &File) -> bool {
        let path = self.recovered_path();
        if let Some(dir) = path.parent() {
            let _ = fs::create_dir_all(dir);
        }
        if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(&path) {
            let _ = writeln!(f, "{} {}", content, lock.display());
        }
        let _ = fs::remove_file(lock);
        note_intent(held, None);
        !lock.exists()
    }

    /// Settles an append that a killed writer left half done: when the ledger's ref lock is
    /// there and its holder is provably gone (see [`recover_stale_lock`](Self::recover_stale_lock)),
    /// the update is rolled back (the lock removed and recorded, so its reflog line is known
    /// for what it is). Readers call it before they judge the reflog, so a crash never reads as
    /// tampering. Waits for a live git-forum writer to finish; a lock someone else holds is
    /// left alone.
    pub(crate) fn settle_interrupted_append(&self) -> Result<(), StoreError> {
        if self.refs_via_git {
            return Ok(());
        }
        let lock = PathBuf::from(format!("{}.lock", self.ref_path().display()));
        if !lock.exists() {
            return Ok(());
        }
        // A reader that cannot take the writer lock (a read-only repository, a server hook's
        // quarantine) leaves the lock alone; verify still knows its reflog line for what it is.
        let Ok(held) = self.writer_lock() else {
            return Ok(());
        };
        let noted = read_intent(&held, self.hash);
        self.recover_stale_lock(&lock, &held, noted);
        Ok(())
    }

    /// The value a ref lock holds when it exists (an update under way, or left by a process
    /// that died), for readers that must not mistake its reflog line for tampering.
    pub(crate) fn pending_ref_lock(&self) -> Option<ObjectId> {
        if self.refs_via_git {
            return None;
        }
        let lock = PathBuf::from(format!("{}.lock", self.ref_path().display()));
        let f = File::open(lock).ok()?;
        let mut content = Vec::new();
        f.take(256).read_to_end(&mut content).ok()?;
        ObjectId::from_hex(String::from_utf8_lossy(&content).trim().as_bytes()).ok()
    }

    fn recovered_path(&self) -> PathBuf {
        self.forum_dir()
            .join("recovered")
            .join(format!("{}.log", self.name))
    }

    /// The ref values of stale ref locks this ledger's writers removed (each the new value of an
    /// update whose writer died before moving the ref).
    pub(crate) fn recovered_locks(&self) -> HashSet<ObjectId> {
        let Ok(text) = fs::read_to_string(self.recovered_path()) else {
            return HashSet::new();
        };
        text.lines()
            .filter_map(|l| l.split(' ').next())
            .filter_map(|h| ObjectId::from_hex(h.as_bytes()).ok())
            .collect()
    }
}

/// A lock file held: this process's turn at its path, then the kernel's `flock` on it.
///
/// `flock` is not fair: when it is released, whichever caller asks next gets it, not the one
/// that waited longest. The daemon's threads append to one ledger in a closed loop, and one of
/// them could lose that race for tens of seconds (an append answered 504 after 30 s under the
/// daemon bench). So the threads of one process first queue for the path on a fair mutex
/// (handed to the longest waiter), and only the thread at the head asks the kernel. Processes
/// still race each other for the `flock`, but each sends one thread at a time.
pub(crate) struct Held {
    file: File,
    turn: std::sync::Mutex<Option<Turn>>,
}

type Turn = parking_lot::lock_api::ArcMutexGuard<parking_lot::RawFairMutex, ()>;

impl std::ops::Deref for Held {
    type Target = File;
    fn deref(&self) -> &File {
        &self.file
    }
}

impl Held {
    /// Releases the `flock` and hands this process's turn to the next thread waiting, keeping
    /// the file open (its bytes can still be read).
    pub(crate) fn unlock(&self) {
        let _ = self.file.unlock();
        self.turn.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // The `flock` goes before the turn, so the next thread of this process does not wait
        // on this one's file.
        let _ = self.file.unlock();
        self.turn.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

/// This process's fair mutex for the lock file at `path` (one per path, kept for the life of
/// the process: a process holds few ledgers).
fn turn_at(path: &Path) -> std::sync::Arc<parking_lot::FairMutex<()>> {
    type Turns = std::sync::Mutex<
        std::collections::HashMap<PathBuf, std::sync::Arc<parking_lot::FairMutex<()>>>,
    >;
    static TURNS: std::sync::OnceLock<Turns> = std::sync::OnceLock::new();
    let mut turns = TURNS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    turns.entry(path.to_path_buf()).or_default().clone()
}

/// Opens (creating it and its folder if need be) and locks the lock file at `path`: an
/// advisory `flock` the kernel releases if we die, taken when this process's turn at the path
/// comes (see [`Held`]). Blocks until it is ours.
pub(crate) fn locked_file(path: &std::path::Path) -> Result<Held, StoreError> {
    let turn = turn_at(path).lock_arc();
    let f = create_in_dir(path, || {
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)
    })
    .map_err(io(format!("opening {}", path.display())))?;
    f.lock()
        .map_err(io(format!("locking {}", path.display())))?;
    Ok(Held {
        file: f,
        turn: std::sync::Mutex::new(Some(turn)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A second thread of this process waits while the lock is held, and takes it as soon as
    /// the holder unlocks, though the holder keeps its file open (as an append does while it
    /// waits for its flush): the unlock hands on the process's turn, not only the `flock`.
    #[test]
    fn an_unlock_hands_the_lock_to_a_waiting_thread_while_the_file_stays_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("locks").join("main.lock");
        let held = locked_file(&path).unwrap();
        let (took, taken) = mpsc::channel();
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || {
                let second = locked_file(&path).unwrap();
                took.send(()).unwrap();
                drop(second);
            })
        };
        assert_eq!(
            taken.recv_timeout(Duration::from_millis(200)),
            Err(mpsc::RecvTimeoutError::Timeout),
            "the lock is held: the other thread must still wait"
        );
        held.unlock();
        taken.recv().unwrap();
        waiter.join().unwrap();
        // The holder's file is still open and readable after its unlock.
        assert_eq!(held.metadata().unwrap().len(), 0);
        drop(held);
        // Taken again once both are gone: nothing is left held.
        drop(locked_file(&path).unwrap());
    }

    /// Threads of one process take turns: with four threads each taking the lock many times,
    /// no two hold it at once (the turn and the `flock` together exclude each other).
    #[test]
    fn threads_of_one_process_never_hold_the_lock_together() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("main.lock");
        let inside = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (path, inside) = (path.clone(), inside.clone());
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let held = locked_file(&path).unwrap();
                        let before = inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        assert_eq!(before, 0, "two threads held the lock at once");
                        inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                        drop(held);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
