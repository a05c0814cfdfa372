//! Merging the small packs that batches, imports and emptied write-ahead logs leave.
//!
//! Once a repository holds more than [`MAX_PACKS`] packs, `git repack -d -q --geometric=2`
//! merges the small ones (old big packs are kept). A merge can take many seconds on a large
//! repository, so it never runs under a ledger's writer lock, nor on the thread that appends:
//! the code that made a pack while holding the lock only marks the handle
//! ([`GitStore::want_pack_merge`]); once the lock is released,
//! [`GitStore::merge_packs_if_wanted`] starts the merge on a thread of its own and returns (a
//! daemon, whose one writer holds its handle for every append, goes on appending). Appenders
//! go on meanwhile, here and in other processes: git's repack only deletes packs it listed
//! when it began, after writing their objects into its new pack, and a reader that meets a
//! pack gone under it asks the object store again (see `odb.rs`).
//!
//! One merge at a time per repository: a merge holds `.git/forum/locks/.pack-merge.lock` (an
//! `flock`; no ledger's lock file starts with a dot), and one that finds it held is skipped,
//! since the running merge does the work (packs it missed are merged the next time the count is
//! over the limit). No merge outlives its process: dropping the handle waits for its merge,
//! and the `git` child is asked to be sent SIGTERM should the thread that started it end
//! first (Linux's parent-death signal), as it does when the process exits without dropping the
//! handle; a repack stopped that way leaves only temporary files, which git's own maintenance
//! removes.

use std::fs::{File, OpenOptions};
use std::path::Path;
use std::sync::atomic::Ordering;

use super::handle::GitStore;
use super::objects::create_in_dir;
use super::pack;

/// Consolidate packs (`git repack -d --geometric=2`) once a repository holds more than this
/// many; gix handles also size their index slots from the count at open.
pub const MAX_PACKS: usize = 24;

impl GitStore {
    /// Notes that this handle wrote a pack, so that packs are merged (if there are too many)
    /// once no lock is held.
    pub(crate) fn want_pack_merge(&self) {
        self.merge_wanted.store(true, Ordering::SeqCst);
    }

    /// Starts a merge of the packs on a thread of its own if this handle asked for one, the
    /// repository holds more than [`MAX_PACKS`] and this handle's last merge is done. The
    /// caller holds no writer lock.
    pub(crate) fn merge_packs_if_wanted(&self) {
        if !self.merge_wanted.load(Ordering::SeqCst) {
            return;
        }
        let mut running = self.merge_thread.lock().unwrap_or_else(|e| e.into_inner());
        if running.as_ref().is_some_and(|t| !t.is_finished()) {
            // Asked again once it is done.
            return;
        }
        if let Some(done) = running.take() {
            let _ = done.join();
        }
        self.merge_wanted.store(false, Ordering::SeqCst);
        if pack::pack_count(&self.objects_dir()) <= MAX_PACKS {
            return;
        }
        let (common, objects, forum) = (
            self.common_dir.clone(),
            self.objects_dir(),
            self.forum_dir(),
        );
        *running = std::thread::Builder::new()
            .name("pack-merge".into())
            .spawn(move || {
                merge_packs(&common, &objects, &forum);
            })
            .ok();
    }

    /// Waits for this handle's merge, if one is running.
    pub(crate) fn wait_for_pack_merge(&self) {
        let running = self
            .merge_thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(t) = running {
            let _ = t.join();
        }
    }
}

/// The merge of the repository at `common` (its objects in `objects`, git forum's files in
/// `forum`): see the module doc.
fn merge_packs(common: &Path, objects: &Path, forum: &Path) -> bool {
    if pack::pack_count(objects) <= MAX_PACKS {
        return false;
    }
    let path = forum.join("locks").join(".pack-merge.lock");
    let Ok(lock) = create_in_dir(&path, || {
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
    }) else {
        return false;
    };
    if File::try_lock(&lock).is_err() {
        return false;
    }
    // Counted again under the lock: a merge that just finished may have done the work.
    if pack::pack_count(objects) <= MAX_PACKS {
        return false;
    }
    let mut git = crate::gitproc::at_git_dir(common);
    git.args(["repack", "-d", "-q", "--geometric=2"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    die_with_parent(&mut git);
    let ran = git.status().is_ok_and(|s| s.success());
    drop(lock);
    ran
}

/// Asks the kernel to send `command`'s process SIGTERM when the thread that starts it ends
/// (Linux; elsewhere nothing).
#[allow(unsafe_code)]
fn die_with_parent(command: &mut std::process::Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: between fork and exec the closure makes one async-signal-safe system call
        // with integer arguments and touches no memory of the parent.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = command;
}

impl Drop for GitStore {
    fn drop(&mut self) {
        // The merge running is waited for; one this handle still wants is then started and
        // waited for too.
        self.wait_for_pack_merge();
        self.merge_packs_if_wanted();
        self.wait_for_pack_merge();
    }
}
