//! Durability: how an append reaches the disk (`forum.fsyncMethod`), and the flushes that make
//! the files it wrote survive a crash or a power loss.

use std::fs::File;
use std::path::PathBuf;

use super::error::{StoreError, io};
use super::handle::GitStore;

pub use super::handle::FlushMethod;

/// Starts writeback of `f`'s data without waiting for it (Linux `sync_file_range` with
/// `SYNC_FILE_RANGE_WRITE`), so a later fsync of another file on the same filesystem also
/// waits for it: the first half of git's batch fsync. Elsewhere it does nothing.
#[allow(unsafe_code)]
pub(super) fn start_writeback(f: &File) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: sync_file_range only reads its integer arguments; the descriptor is valid for
        // the duration of the call because `f` is borrowed.
        let rc = unsafe { libc::sync_file_range(f.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = f;
    Ok(())
}

impl GitStore {
    /// Makes `written` durable. Per file: each file's data (object files were synced before
    /// their rename, so only the ref and reflog are synced here) and each parent directory, so
    /// the new names survive a crash. With `syncfs`: one flush of the whole filesystem.
    pub(crate) fn flush(&self, written: &[PathBuf], files_synced: bool) -> Result<(), StoreError> {
        if !self.opts.fsync {
            return Ok(());
        }
        if self.opts.method.syncfs() {
            let f = File::open(&self.common_dir)
                .map_err(io("opening the git directory to flush it"))?;
            return rustix::fs::syncfs(&f)
                .map_err(|e| io("flushing the repository to disk (syncfs)")(e.into()));
        }
        if self.opts.method.batch() {
            // Start writeback of every file but the last, then one fsync of the last commits
            // them, and every rename before it, in one journal transaction.
            let Some((last, rest)) = written.split_last() else {
                return Ok(());
            };
            for p in rest {
                if let Ok(f) = File::open(p) {
                    start_writeback(&f).map_err(io(format!("writing back {}", p.display())))?;
                }
            }
            let f = File::open(last).map_err(io(format!("opening {}", last.display())))?;
            return f
                .sync_all()
                .map_err(io(format!("fsync {}", last.display())));
        }
        let mut dirs = std::collections::BTreeSet::new();
        for p in written {
            if !files_synced && let Ok(f) = File::open(p) {
                f.sync_data()
                    .map_err(io(format!("fsync {}", p.display())))?;
            }
            if let Some(d) = p.parent() {
                dirs.insert(d.to_path_buf());
            }
        }
        for d in dirs {
            if let Ok(f) = File::open(&d) {
                f.sync_all().map_err(io(format!("fsync {}", d.display())))?;
            }
        }
        Ok(())
    }

    /// Flushes everything to disk (for writers that ran with `--no-fsync`). The ledger's
    /// write-ahead log keeps its records: they are the copy of recent appends' objects that a
    /// racing `git prune` cannot delete, until the log is emptied into a pack (see
    /// `wal/recover.rs`). A log an earlier boot left is recovered first.
    pub(crate) fn sync(&self) -> Result<(), StoreError> {
        self.recover_wal_if_needed()?;
        self.flush_repository()
    }

    /// Flushes the whole repository's filesystem (Linux `syncfs`; elsewhere the git directory).
    pub(crate) fn flush_repository(&self) -> Result<(), StoreError> {
        let f =
            File::open(&self.common_dir).map_err(io("opening the git directory to flush it"))?;
        f.sync_all().map_err(io("flushing the git directory"))?;
        #[cfg(target_os = "linux")]
        rustix::fs::syncfs(&f)
            .map_err(|e| io("flushing the repository to disk (syncfs)")(e.into()))?;
        Ok(())
    }
}
