//! Merging the small packs that batches, imports and emptied write-ahead logs leave.
//!
//! Once a repository holds more than [`MAX_PACKS`] packs, `git repack -d -q --geometric=2`
//! merges the small ones (old big packs are kept). A merge can take many seconds on a large
//! repository, so it never runs under a ledger's writer lock: the code that made a pack while
//! holding the lock only marks the handle ([`GitStore::want_pack_merge`]), and the merge runs
//! once the lock is released ([`GitStore::merge_packs_if_wanted`]), or at the latest when the
//! handle is dropped. Appenders in other processes go on meanwhile: git's repack only deletes
//! packs it listed when it began, after writing their objects into its new pack, and a reader
//! that meets a pack gone under it asks the object store again (see `odb.rs`).
//!
//! One merge at a time per repository: a merge holds `.git/forum/locks/.pack-merge.lock` (no ledger name starts with a dot)
//! (`flock`), and one that finds it held is skipped, since the running merge does the work
//! (any packs it missed are merged the next time the count is over the limit). The `git`
//! child is always waited for, so no merge outlives the call that started it.

use std::fs::{File, OpenOptions};
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

    /// Merges packs if this handle asked for it and the repository holds more than
    /// [`MAX_PACKS`]. The caller holds no writer lock.
    pub(crate) fn merge_packs_if_wanted(&self) {
        if self.merge_wanted.swap(false, Ordering::SeqCst) {
            self.consolidate_packs();
        }
    }

    /// Merges small packs once there are more than [`MAX_PACKS`], unless another merge of this
    /// repository is running. Returns true when a merge ran.
    pub(crate) fn consolidate_packs(&self) -> bool {
        if pack::pack_count(&self.objects_dir()) <= MAX_PACKS {
            return false;
        }
        let path = self.forum_dir().join("locks").join(".pack-merge.lock");
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
        if pack::pack_count(&self.objects_dir()) <= MAX_PACKS {
            return false;
        }
        let ran = crate::gitproc::at_git_dir(&self.common_dir)
            .args(["repack", "-d", "-q", "--geometric=2"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        drop(lock);
        ran
    }
}

impl Drop for GitStore {
    fn drop(&mut self) {
        self.merge_packs_if_wanted();
    }
}
