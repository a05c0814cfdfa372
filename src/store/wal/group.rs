//! Group commit: one flush of the log covers every append waiting on it, across processes.
//!
//! Two marks, each a count of records of one epoch (see [`Mark`]):
//!
//! - *written*, in the ledger's writer-lock file at [`WRITTEN_AT`]: raised by one, under the
//!   writer lock, by every append right after its record is in the log (in the page cache). The
//!   value it leaves is the append's ticket.
//! - *durable*, at the start of the ledger's flush-lock file (`.git/forum/locks/NAME.flush`):
//!   every record up to it is on disk.
//!
//! An append releases the writer lock once its ticket is noted, then takes the flush lock
//! (`flock`, so a killed holder frees it). If *durable* already reaches its ticket, another
//! appender's flush covered it. Otherwise it reads *written* (every record up to it was
//! written before it was noted), flushes the log, raises *durable* to what it read and
//! releases: the appenders queued behind it then find themselves covered. An append is
//! acknowledged only after a flush that began after its record was written.
//!
//! Why the flush of the file at the log's path covers every record up to *written*: a record
//! went into the log that was at the path when it was written. Whatever replaces or empties a
//! log (a checkpoint, a full log, a resize, recovery) does so under the writer lock after
//! flushing the whole repository, so a record in a log that is no longer at the path, or that
//! was zeroed, reached the disk through the files it describes.
//!
//! A mark names the boot that wrote it and an epoch, drawn afresh whenever *written* is
//! missing, damaged or from another boot: a mark left on disk by an earlier boot, or a flush
//! lock that outlived a recreated writer-lock file, never covers a ticket of another epoch.

use super::*;
use crate::store::error::io;
use crate::store::failpoint::failpoint;
use crate::store::objects::unique;

/// Where *written* lives in the writer-lock file: after the log's hint (128 bytes) and the
/// ref-lock intent (65 bytes from 128).
pub(crate) const WRITTEN_AT: u64 = 256;
const MARK_LEN: usize = 56;

/// A count of log records of one epoch: an append's ticket, or how far records are written
/// or durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark {
    epoch: u64,
    n: u64,
}

impl Mark {
    /// True when every record up to `ticket` is counted here.
    fn covers(&self, ticket: Mark) -> bool {
        self.epoch == ticket.epoch && self.n >= ticket.n
    }

    /// This boot's id, the epoch, the count and a CRC-32 of those.
    fn encode(&self) -> [u8; MARK_LEN] {
        let mut b = [0u8; MARK_LEN];
        b[..36].copy_from_slice(&boot_id());
        b[36..44].copy_from_slice(&self.epoch.to_le_bytes());
        b[44..52].copy_from_slice(&self.n.to_le_bytes());
        let crc = crc32fast::hash(&b[..52]);
        b[52..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// A mark this boot wrote, or `None`.
    fn decode(b: &[u8; MARK_LEN]) -> Option<Mark> {
        let crc = u32::from_le_bytes(b[52..].try_into().ok()?);
        if crc32fast::hash(&b[..52]) != crc || b[..36] != boot_id() || boot_id() == [0; 36] {
            return None;
        }
        Some(Mark {
            epoch: u64::from_le_bytes(b[36..44].try_into().ok()?),
            n: u64::from_le_bytes(b[44..52].try_into().ok()?),
        })
    }

    /// The mark at `at` in `f`. A reader that does not hold the lock guarding it may see a
    /// write half done (the CRC then fails): it reads again, a few times.
    fn read(f: &File, at: u64) -> Option<Mark> {
        for _ in 0..3 {
            let mut b = [0u8; MARK_LEN];
            f.read_exact_at(&mut b, at).ok()?;
            if let Some(m) = Mark::decode(&b) {
                return Some(m);
            }
        }
        None
    }
}

/// Notes, in the writer-lock file `lock` (held), that one more record is in the log, and
/// returns that record's ticket.
pub(crate) fn note_written(lock: &File) -> std::io::Result<Mark> {
    let ticket = match Mark::read(lock, WRITTEN_AT) {
        Some(m) => Mark { n: m.n + 1, ..m },
        None => Mark {
            epoch: unique() as u64 ^ (unique() >> 64) as u64,
            n: 1,
        },
    };
    lock.write_all_at(&ticket.encode(), WRITTEN_AT)?;
    Ok(ticket)
}

impl GitStore {
    /// The ledger's flush-lock file, whose first bytes hold the *durable* mark.
    pub(crate) fn flush_lock_path(&self) -> PathBuf {
        self.forum_dir()
            .join("locks")
            .join(format!("{}.flush", self.name().replace('/', "%2F")))
    }

    /// Returns once the log record of `ticket` is on disk, flushing the log unless another
    /// appender's flush already covered it. `writer` is the writer-lock file (no longer held),
    /// where *written* is read.
    pub(crate) fn flush_covering(&self, writer: &File, ticket: Mark) -> Result<(), StoreError> {
        let path = self.flush_lock_path();
        let f = super::super::lock::locked_file(&path)?;
        if Mark::read(&f, 0).is_some_and(|d| d.covers(ticket)) {
            return Ok(());
        }
        // Every record up to what *written* says now is in the log: this flush covers them.
        let upto = Mark::read(writer, WRITTEN_AT)
            .filter(|w| w.covers(ticket))
            .unwrap_or(ticket);
        failpoint("wal-flush");
        let log = self.wal_path();
        match File::open(&log) {
            Ok(l) => l
                .sync_data()
                .map_err(io(format!("fsync {}", log.display())))?,
            // No log at the path: whatever removed it flushed the repository first; flushing
            // again costs one call and needs no argument.
            Err(_) => self.flush_repository()?,
        }
        f.write_all_at(&upto.encode(), 0)
            .map_err(io(format!("writing {}", path.display())))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_covers_tickets_of_its_epoch_up_to_its_count_and_a_torn_one_reads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let lock = File::options()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(dir.path().join("main.lock"))
            .unwrap();
        // A new file: a fresh epoch, counted from 1.
        let first = note_written(&lock).unwrap();
        assert_eq!(first.n, 1);
        let second = note_written(&lock).unwrap();
        assert_eq!((second.epoch, second.n), (first.epoch, 2));
        let written = Mark::read(&lock, WRITTEN_AT).unwrap();
        assert!(written.covers(first) && written.covers(second));
        assert!(!first.covers(second));
        // Another epoch (a recreated lock file) is never covered, however high the count.
        let other = Mark {
            epoch: first.epoch ^ 1,
            n: 100,
        };
        assert!(!other.covers(first));
        // A mark half written, or of another boot, is no mark: a new epoch starts.
        let mut torn = second.encode();
        torn[45] ^= 0xff;
        lock.write_all_at(&torn, WRITTEN_AT).unwrap();
        assert_eq!(Mark::read(&lock, WRITTEN_AT), None);
        let mut elsewhere = second.encode();
        elsewhere[..36].copy_from_slice(b"00000000-0000-0000-0000-000000000000");
        let crc = crc32fast::hash(&elsewhere[..52]);
        elsewhere[52..].copy_from_slice(&crc.to_le_bytes());
        lock.write_all_at(&elsewhere, WRITTEN_AT).unwrap();
        let again = note_written(&lock).unwrap();
        assert_eq!(again.n, 1);
        assert_ne!(again.epoch, first.epoch);
    }
}
