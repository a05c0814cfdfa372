//! The read answers of the cache, published for reads that take no lock.
//!
//! The cache ([`super::fresh::Cached`]) is kept under one mutex: a walk to a new tip holds it
//! while it reads the store, and every read that took it waited behind that walk and behind
//! each other. The board is what such a read needs, put where a read reaches it without the
//! mutex:
//!
//! * [`Published`]: the tip's size and rewrite epoch and the per-tip answers already made
//!   (`/status`, `/checkpoint`, `/log?limit=N`), replaced whole (an [`ArcSwap`]) under the
//!   cache's lock each time the cache moves to a new tip or makes a new per-tip answer;
//! * the mark of the cache's last look at the ref (`fresh_at`), set and cleared under the
//!   cache's lock exactly where the cache's own mark is, except that a write of this process
//!   walking the cache to its new tip leaves it standing until the walk ends (the write has
//!   not answered yet, so a read then may still be given the tip before it);
//! * the `/ledger/SEQ` and `/payload/SEQ` answers by seq and rewrite epoch (an entry at a seq
//!   below the size is the same for as long as no rewrite changed the epoch), behind a
//!   read-write lock a walk never takes.
//!
//! A read that finds the mark within [`RECHECK`] answers from the board; one
//! that finds no mark, a mark too old, or no answer made takes the cache's lock as before.
//! What a read may be told is unchanged (see the `fresh` module): the mark is published after
//! the answers it stands for, and cleared under the same lock as the cache's, so a read that
//! starts after this daemon answered a write finds the mark cleared or set by a look made
//! after the write.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use axum::body::Bytes;

/// How long a look at the ref that found the cached tip stands for the reads after it.
pub(crate) const RECHECK: Duration = Duration::from_millis(1);

/// The most `/ledger/SEQ` (or `/payload/SEQ`) answers kept.
pub(crate) const KEPT_ANSWERS: usize = 4096;

/// The most bytes of `/ledger/SEQ` (or `/payload/SEQ`) answers kept.
pub(crate) const KEPT_BYTES: usize = 32 << 20;

/// A read the cache answers alone (see the dispatcher's `answer_fresh`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Read {
    Status,
    Checkpoint,
    Entry(u64),
    Payload(u64),
    Log(u64),
}

/// The per-tip answers of one tip, as the cache had made them when it published.
#[derive(Default)]
pub(crate) struct Published {
    pub(crate) size: u64,
    pub(crate) epoch: u64,
    pub(crate) status: Option<Bytes>,
    pub(crate) checkpoint: Option<Bytes>,
    pub(crate) logs: Vec<(u64, Bytes)>,
    /// Which of the answers above a read without the lock took: bit 0 `/status`, bit 1
    /// `/checkpoint`, bit `2 + i` the `i`-th log. The walk to the next tip makes those again.
    taken: AtomicU32,
}

impl Published {
    pub(crate) fn new(
        size: u64,
        epoch: u64,
        status: Option<Bytes>,
        checkpoint: Option<Bytes>,
        logs: Vec<(u64, Bytes)>,
    ) -> Published {
        Published {
            size,
            epoch,
            status,
            checkpoint,
            logs,
            taken: AtomicU32::new(0),
        }
    }

    fn take(&self, bit: usize, answer: &Bytes) -> Bytes {
        let mask = 1u32.checked_shl(bit as u32).unwrap_or(0);
        if self.taken.load(Ordering::Relaxed) & mask != mask {
            self.taken.fetch_or(mask, Ordering::Relaxed);
        }
        answer.clone()
    }

    /// The per-tip reads a read without the lock took from this tip's answers.
    pub(crate) fn taken(&self) -> Vec<Read> {
        let bits = self.taken.load(Ordering::Relaxed);
        let mut out = Vec::new();
        if bits & 1 != 0 {
            out.push(Read::Status);
        }
        if bits & 2 != 0 {
            out.push(Read::Checkpoint);
        }
        for (i, (limit, _)) in self.logs.iter().enumerate().take(30) {
            if bits & (1 << (i + 2)) != 0 {
                out.push(Read::Log(*limit));
            }
        }
        out
    }
}

/// Answers kept by key (an entry's commit in the cache; a seq and rewrite epoch on the
/// board), bounded by count and by bytes: past either bound all are dropped and the map starts
/// again.
pub(crate) struct Kept<K> {
    map: HashMap<K, Bytes>,
    bytes: usize,
}

impl<K> Default for Kept<K> {
    fn default() -> Kept<K> {
        Kept {
            map: HashMap::new(),
            bytes: 0,
        }
    }
}

impl<K: std::hash::Hash + Eq> Kept<K> {
    pub(crate) fn get(&self, key: &K) -> Option<Bytes> {
        self.map.get(key).cloned()
    }

    /// Keeps `answer` for `key` (an answer over the byte bound is not kept).
    pub(crate) fn insert(&mut self, key: K, answer: Bytes) {
        if answer.len() > KEPT_BYTES {
            return;
        }
        if self.map.len() >= KEPT_ANSWERS || self.bytes + answer.len() > KEPT_BYTES {
            self.map.clear();
            self.bytes = 0;
        }
        self.bytes += answer.len();
        if let Some(old) = self.map.insert(key, answer) {
            self.bytes -= old.len();
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

/// See the module doc.
pub(crate) struct Board {
    published: ArcSwap<Published>,
    /// Nanoseconds after `base` of the cache's last look at the ref that found its tip; 0
    /// when the next read must look.
    fresh_at: AtomicU64,
    base: Instant,
    /// `/ledger/SEQ` and `/payload/SEQ` answers by seq and rewrite epoch.
    entries: RwLock<Kept<(u64, u64)>>,
    payloads: RwLock<Kept<(u64, u64)>>,
}

impl Default for Board {
    fn default() -> Board {
        Board {
            published: ArcSwap::from_pointee(Published::default()),
            fresh_at: AtomicU64::new(0),
            base: Instant::now(),
            entries: RwLock::default(),
            payloads: RwLock::default(),
        }
    }
}

fn read_of<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

fn write_of<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

impl Board {
    /// Replaces the published answers (under the cache's lock).
    pub(crate) fn publish(&self, p: Published) {
        self.published.store(Arc::new(p));
    }

    /// The answers published last (under the cache's lock: the ones the cache made).
    pub(crate) fn current(&self) -> Arc<Published> {
        self.published.load_full()
    }

    /// Sets the mark to a look made at `at`, or clears it (under the cache's lock).
    pub(crate) fn mark(&self, at: Option<Instant>) {
        let nanos = at.map_or(0, |t| {
            u64::try_from(t.saturating_duration_since(self.base).as_nanos())
                .unwrap_or(u64::MAX)
                .max(1)
        });
        self.fresh_at.store(nanos, Ordering::Release);
    }

    /// Keeps the `/ledger/SEQ` answer of `seq` in `epoch`.
    pub(crate) fn keep_entry(&self, seq: u64, epoch: u64, answer: &Bytes) {
        write_of(&self.entries).insert((seq, epoch), answer.clone());
    }

    /// Keeps the `/payload/SEQ` answer of `seq` in `epoch`.
    pub(crate) fn keep_payload(&self, seq: u64, epoch: u64, answer: &Bytes) {
        write_of(&self.payloads).insert((seq, epoch), answer.clone());
    }

    /// The answer to `read` from the board, when the mark stands and the answer is there;
    /// `None` sends the read to the cache's lock.
    pub(crate) fn answer(&self, read: Read) -> Option<Bytes> {
        let at = self.fresh_at.load(Ordering::Acquire);
        if at == 0 {
            return None;
        }
        let now = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX);
        if now.saturating_sub(at) >= RECHECK.as_nanos() as u64 {
            return None;
        }
        let p = self.published.load();
        match read {
            Read::Status => Some(p.take(0, p.status.as_ref()?)),
            Read::Checkpoint => Some(p.take(1, p.checkpoint.as_ref()?)),
            Read::Log(limit) => {
                let i = p.logs.iter().position(|(n, _)| *n == limit)?;
                Some(p.take(i + 2, &p.logs[i].1))
            }
            Read::Entry(seq) if seq < p.size => read_of(&self.entries).get(&(seq, p.epoch)),
            Read::Payload(seq) if seq < p.size => read_of(&self.payloads).get(&(seq, p.epoch)),
            Read::Entry(_) | Read::Payload(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &'static str) -> Bytes {
        Bytes::from_static(s.as_bytes())
    }

    #[test]
    fn a_read_is_answered_from_the_board_only_while_the_mark_stands() {
        let board = Board::default();
        let logs = vec![(10, b("[10]")), (3, b("[3]"))];
        board.publish(Published::new(5, 0, Some(b("s")), None, logs));
        // No mark yet: every read goes to the lock.
        assert_eq!(board.answer(Read::Status), None);
        board.mark(Some(Instant::now()));
        assert_eq!(board.answer(Read::Status), Some(b("s")));
        assert_eq!(board.answer(Read::Log(3)), Some(b("[3]")));
        // Not made yet at this tip.
        assert_eq!(board.answer(Read::Checkpoint), None);
        assert_eq!(board.answer(Read::Log(4)), None);
        assert_eq!(board.current().taken(), vec![Read::Status, Read::Log(3)]);
        // Cleared (a write of this process): to the lock again.
        board.mark(None);
        assert_eq!(board.answer(Read::Status), None);
        // A mark older than RECHECK does not stand.
        board.mark(Some(Instant::now()));
        assert_eq!(board.answer(Read::Status), Some(b("s")));
        std::thread::sleep(RECHECK * 3);
        assert_eq!(board.answer(Read::Status), None);
    }

    #[test]
    fn answers_by_seq_hold_within_their_epoch_and_below_the_size() {
        let board = Board::default();
        board.publish(Published::new(3, 7, None, None, Vec::new()));
        board.mark(Some(Instant::now()));
        board.keep_entry(1, 7, &b("e1"));
        board.keep_payload(2, 7, &b("p2"));
        board.keep_entry(3, 7, &b("e3"));
        assert_eq!(board.answer(Read::Entry(1)), Some(b("e1")));
        assert_eq!(board.answer(Read::Payload(2)), Some(b("p2")));
        assert_eq!(board.answer(Read::Payload(1)), None);
        // Past the published size: not this tip's entry.
        assert_eq!(board.answer(Read::Entry(3)), None);
        // A rewrite moved the epoch: the old answers no longer stand.
        board.publish(Published::new(4, 8, None, None, Vec::new()));
        assert_eq!(board.answer(Read::Entry(1)), None);
        assert_eq!(board.answer(Read::Payload(2)), None);
        board.keep_entry(1, 8, &b("e1'"));
        assert_eq!(board.answer(Read::Entry(1)), Some(b("e1'")));
    }

    #[test]
    fn answers_by_seq_stay_within_their_bounds() {
        let mut k = Kept::<(u64, u64)>::default();
        for n in 0..(KEPT_ANSWERS as u64 * 2 + 5) {
            k.insert((n, 0), b("{\"seq\":1}"));
            assert!(k.len() <= KEPT_ANSWERS && k.bytes() <= KEPT_BYTES);
        }
        k.insert((1, 0), Bytes::from(vec![b'x'; KEPT_BYTES + 1]));
        assert!(k.get(&(1, 0)).is_none_or(|a| a.len() < KEPT_BYTES));
        k.insert((9, 0), b("12345"));
        k.insert((9, 0), b("123"));
        assert_eq!(k.get(&(9, 0)), Some(b("123")));
        assert_eq!(k.get(&(9, 1)), None);
    }
}
