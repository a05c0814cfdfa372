//! The entries as last read and the answers made from them, and how a read knows they are
//! still the ledger's.
//!
//! [`Cached`] holds the entries at one tip ([`EntryCache`]) and the read answers already
//! written out as bytes: `/status`, `/checkpoint` and `/log?limit=N` for that tip (dropped when
//! the tip moves), and `/ledger/SEQ` and `/payload/SEQ` by the entry's commit, kept across tips
//! (a commit names its entry and body for good; a redaction writes new commits), up to
//! [`KEPT_ANSWERS`] answers or [`KEPT_BYTES`] bytes each, then dropped all at once.
//!
//! **When the cache is the ledger's.** A read trusts the cached tip without looking at the ref
//! for [`RECHECK`] after a look found the ref naming it; past that it reads the ref again (the
//! loose ref file alone where refs are files, else through the store). Every request of this
//! process that may write (every route but a `GET`, and each append of a run in progress)
//! clears that mark once it has written, before it answers; the mark is read, set and cleared
//! under the cache's lock, and a look at the ref happens under the same lock. So:
//!
//! * after this daemon has answered a write, every read that starts later sees it (or a later
//!   tip): it finds the mark cleared and reads the ref;
//! * a write by another process (`git forum append`, a fetch, `git update-ref`) is seen by
//!   every read that starts [`RECHECK`] after the write's ref update or later; a read in that
//!   window may answer from the tip before it. This is sound because nothing orders such a
//!   write before such a read but the clock: the two processes share no lock, so the read
//!   could as well have been served a moment before the write landed. No client of this
//!   daemon can have been told of the write by the daemon, and one told by the other process
//!   sees it once its own next step (a process exit, a message) has taken longer than
//!   [`RECHECK`].
//!
//! A rewrite (a redaction, a ref moved back) is found the same way and reread whole by
//! [`Dispatcher::current`].
//!
//! **Who walks to a new tip.** A write of this process walks the cache to the tip itself
//! before it answers ([`Dispatcher::caught_up`]), on the thread that wrote, so the reads
//! after it find the cache fresh. A read that finds the tip moved anyway (a write of another
//! process, or one of this process not yet caught up) walks under the lock; the reads that
//! found it moved at the same time wait for that walk and take its look at the ref as theirs.
//! `/log?limit=N` is written from the kept `/ledger/SEQ` answers, so a new tip writes out
//! only its new entries.

use std::collections::HashMap;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use serde_json::Value as J;

use super::{Dispatcher, EntryCache, Reply, lock};
use crate::ledger::Entry;
use crate::ledger::merkle::merkle_root;
use crate::surface;

/// How long a look at the ref that found the cached tip stands for the reads after it.
pub(crate) const RECHECK: Duration = Duration::from_millis(1);

/// The most `/ledger/SEQ` (or `/payload/SEQ`) answers kept.
pub(crate) const KEPT_ANSWERS: usize = 4096;

/// The most bytes of `/ledger/SEQ` (or `/payload/SEQ`) answers kept.
pub(crate) const KEPT_BYTES: usize = 32 << 20;

/// The most distinct `/log?limit=N` answers kept for one tip.
const KEPT_LOGS: usize = 8;

/// Answers kept by entry commit, bounded by count and by bytes: past either bound all are
/// dropped and the map starts again.
#[derive(Default)]
pub(crate) struct Kept {
    map: HashMap<gix::ObjectId, Bytes>,
    bytes: usize,
}

impl Kept {
    pub(crate) fn get(&self, commit: &gix::ObjectId) -> Option<Bytes> {
        self.map.get(commit).cloned()
    }

    /// Keeps `answer` for `commit` (an answer over the byte bound is not kept).
    pub(crate) fn insert(&mut self, commit: gix::ObjectId, answer: Bytes) {
        if answer.len() > KEPT_BYTES {
            return;
        }
        if self.map.len() >= KEPT_ANSWERS || self.bytes + answer.len() > KEPT_BYTES {
            self.map.clear();
            self.bytes = 0;
        }
        self.bytes += answer.len();
        if let Some(old) = self.map.insert(commit, answer) {
            self.bytes -= old.len();
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.len()
    }

    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The entries at one tip and the answers made from them (see the module doc).
#[derive(Default)]
pub(crate) struct Cached {
    pub(crate) view: Arc<EntryCache>,
    /// When a look at the ref last found `view`'s tip; `None` after a write of this process.
    checked: Option<Instant>,
    status: Option<Bytes>,
    checkpoint: Option<Bytes>,
    logs: Vec<(u64, Bytes)>,
    /// `/ledger/SEQ` answers by entry commit.
    pub(crate) entries: Kept,
    /// `/payload/SEQ` answers by entry commit: each body in them was read back and checked
    /// against its payload hash when the answer was first made.
    pub(crate) payloads: Kept,
}

impl Cached {
    /// Moves to `view`, dropping the answers of the tip before.
    fn set_view(&mut self, view: Arc<EntryCache>) {
        self.view = view;
        self.status = None;
        self.checkpoint = None;
        self.logs.clear();
    }
}

/// A read the cache answers alone (see [`Dispatcher::answer_fresh`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Read {
    Status,
    Checkpoint,
    Entry(u64),
    Payload(u64),
    Log(u64),
}

/// Reads a loose ref file (an object id and a newline) into `buf`, without the stat and the
/// allocation of `fs::read`: its length, or `None` when it cannot be read or is longer than a
/// ref (a symbolic ref, or not a ref at all).
fn read_ref_file(path: &std::path::Path, buf: &mut [u8]) -> Option<usize> {
    use std::io::Read as _;
    let mut f = std::fs::File::open(path).ok()?;
    let mut n = 0;
    loop {
        match f.read(&mut buf[n..]) {
            Ok(0) => return Some(n),
            Ok(k) if n + k < buf.len() => n += k,
            Ok(_) => return None,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

/// A report as the bytes of its JSON answer (through `serde_json::Value`, as every answer
/// is written, so the bytes are those of the ordinary path).
fn bytes_of(r: surface::Result<impl serde::Serialize>) -> Result<Bytes, Reply> {
    let r = r.map_err(Reply::from)?;
    let v: J = serde_json::to_value(&r).map_err(|e| {
        Reply::from(surface::Error::internal(format!(
            "encoding the report: {e}"
        )))
    })?;
    Ok(Bytes::from(v.to_string()))
}

/// The answer in `slot`, made by `make` when there is none yet.
fn kept(
    slot: &mut Option<Bytes>,
    make: impl FnOnce() -> Result<Bytes, Reply>,
) -> Result<Bytes, Reply> {
    if let Some(b) = slot {
        return Ok(b.clone());
    }
    let b = make()?;
    *slot = Some(b.clone());
    Ok(b)
}

/// The `/ledger/SEQ` answer for the entry at `seq` of `view` (which holds it), kept by its
/// commit: made once per entry, then copied.
fn entry_kept(view: &EntryCache, kept: &mut Kept, seq: u64) -> Result<Bytes, Reply> {
    let commit = view.commits[seq as usize];
    if let Some(b) = kept.get(&commit) {
        return Ok(b);
    }
    let b = bytes_of(surface::ledger::entry(&view.entries, seq))?;
    kept.insert(commit, b.clone());
    Ok(b)
}

/// The `/log?limit=N` answer of `view`: the newest `limit` entries' kept `/ledger/SEQ`
/// answers, newest first, in one JSON array. These are the bytes the ordinary path writes
/// (an array of the same entry objects, written without spaces), and after an append only
/// the new entries are written out; the rest are copied.
fn log_of_kept(view: &EntryCache, kept: &mut Kept, limit: u64) -> Result<Bytes, Reply> {
    let size = view.entries.len();
    let n = size.min(usize::try_from(limit).unwrap_or(usize::MAX));
    let parts = (size - n..size)
        .rev()
        .map(|seq| entry_kept(view, kept, seq as u64))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 1).sum::<usize>() + 2);
    out.push(b'[');
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(part);
    }
    out.push(b']');
    Ok(Bytes::from(out))
}

impl Dispatcher {
    /// A write of this process may have moved the tip: the next read looks at the ref.
    pub(crate) fn tip_moved(&self) {
        lock(&self.cache).checked = None;
    }

    /// After a write of this process, on the writer's thread: [`Dispatcher::tip_moved`], then
    /// the cache brought to the ledger's tip at once where the ref is a loose file (one small
    /// read when nothing moved), so the reads after the write find it fresh instead of one of
    /// them walking while the others wait. Where that fails, the next read looks itself.
    pub(crate) fn caught_up(&self) {
        self.tip_moved();
        if self.ref_file.is_some() {
            drop(self.current());
        }
    }

    /// The cache, locked, as of one look at the tip (see the module doc): as it is when the
    /// tip has not moved; extended by walking back from the new tip to the cached one when it
    /// moved forward (an append here or by another process); read again otherwise (a
    /// redaction rewrote the commits, or the ref was moved back).
    pub(crate) fn current(&self) -> Result<MutexGuard<'_, Cached>, Reply> {
        let began = Instant::now();
        if let Some(cache) = self.fresh() {
            return Ok(cache);
        }
        {
            // A look at the ref made since this call began, by another request that then
            // walked to what it found under this lock, stands for this call's own look: the
            // requests that find the tip moved at once open one store and walk once.
            let cache = lock(&self.cache);
            if cache.checked.is_some_and(|t| t >= began) {
                return Ok(cache);
            }
        }
        let store = self.reader()?;
        let mut cache = lock(&self.cache);
        let looked = Instant::now();
        let Some(tip) = store.tip_id()? else {
            cache.set_view(Arc::new(EntryCache {
                root: merkle_root::<&str>(&[]),
                ..EntryCache::default()
            }));
            cache.checked = Some(looked);
            return Ok(cache);
        };
        if cache.view.tip != Some(tip) {
            let next = Self::walk(&store, &mut cache.view, tip)?;
            cache.set_view(Arc::new(next));
        }
        cache.checked = Some(looked);
        Ok(cache)
    }

    /// The entries at `tip`: `view` extended from its tip when `tip` descends from it, else
    /// read whole. Runs under the cache's lock: the other requests that found the tip moved
    /// wait for this walk rather than each walking it again.
    fn walk(
        store: &crate::surface::store::GitStore,
        view: &mut Arc<EntryCache>,
        tip: gix::ObjectId,
    ) -> Result<EntryCache, Reply> {
        // When the walk passes below the cached tip without meeting it, the commits were
        // rewritten: keep walking, and read the whole chain.
        let mut stop = view.tip;
        let have = view.entries.len() as u64;
        let mut fresh: Vec<(gix::ObjectId, Entry)> = Vec::new();
        let mut cur = Some(tip);
        let mut buf = Vec::new();
        let mut extends = false;
        while let Some(id) = cur {
            if Some(id) == stop {
                extends = true;
                break;
            }
            let (entry, _, parent) = store.read_entry_commit(&id, &mut buf)?;
            if stop.is_some() && entry.seq < have {
                stop = None;
            }
            fresh.push((id, entry));
            cur = parent;
        }
        fresh.reverse();
        let mut next = if extends {
            Arc::unwrap_or_clone(std::mem::take(view))
        } else {
            EntryCache::default()
        };
        {
            let entries = Arc::make_mut(&mut next.entries);
            let commits = Arc::make_mut(&mut next.commits);
            for (id, e) in fresh {
                next.acc.push(&e.entry_hash);
                commits.push(id);
                entries.push(e);
            }
        }
        next.tip = Some(tip);
        next.root = next.acc.root();
        Ok(next)
    }

    /// The cache, locked, when it is the ledger's without walking (see the module doc):
    /// looked at within [`RECHECK`], or the loose ref names its tip now. `None` when that
    /// cannot be told this cheaply or the tip moved.
    fn fresh(&self) -> Option<MutexGuard<'_, Cached>> {
        let mut cache = lock(&self.cache);
        let now = Instant::now();
        if cache
            .checked
            .is_some_and(|t| now.saturating_duration_since(t) < RECHECK)
        {
            return Some(cache);
        }
        let path = self.ref_file.as_ref()?;
        let mut buf = [0u8; 128];
        let n = read_ref_file(path, &mut buf)?;
        let tip = gix::ObjectId::from_hex(buf[..n].trim_ascii()).ok()?;
        if cache.view.tip != Some(tip) {
            return None;
        }
        cache.checked = Some(now);
        Some(cache)
    }

    /// The answer to a read the cached entries answer alone, as bytes, when the cache is the
    /// ledger's without walking; `None` for anything else (a tip that moved, an entry past
    /// the end, a body not read yet), which then takes the ordinary path. Cheap enough for the
    /// HTTP server to call on its own workers: at most one small file read, and the answer
    /// copied (or, once a tip, built) under the cache's lock.
    pub(crate) fn answer_fresh(&self, read: Read) -> Option<Result<Bytes, Reply>> {
        self.answer_in(self.fresh()?, read)
    }

    /// [`Dispatcher::answer_fresh`] after a look at the tip as the ordinary path makes it,
    /// walking to a tip that moved (the store's reads: for a caller that may block).
    pub(crate) fn answer_current(&self, read: Read) -> Option<Result<Bytes, Reply>> {
        self.answer_in(self.current().ok()?, read)
    }

    fn answer_in(
        &self,
        mut guard: MutexGuard<'_, Cached>,
        read: Read,
    ) -> Option<Result<Bytes, Reply>> {
        let c = &mut *guard;
        let view = &c.view;
        let size = view.entries.len() as u64;
        let ledger = &self.cfg.ledger;
        Some(match read {
            Read::Status => kept(&mut c.status, || {
                bytes_of(Ok(surface::ledger::status(ledger, size, &view.root)))
            }),
            Read::Checkpoint => kept(&mut c.checkpoint, || {
                bytes_of(Ok(surface::ledger::checkpoint(ledger, size, &view.root)))
            }),
            Read::Entry(seq) => {
                view.commits.get(seq as usize)?;
                entry_kept(view, &mut c.entries, seq)
            }
            Read::Payload(seq) => Ok(c.payloads.get(view.commits.get(seq as usize)?)?),
            Read::Log(limit) => {
                if let Some((_, b)) = c.logs.iter().find(|(n, _)| *n == limit) {
                    return Some(Ok(b.clone()));
                }
                let b = log_of_kept(view, &mut c.entries, limit);
                if let Ok(b) = &b {
                    if c.logs.len() >= KEPT_LOGS {
                        c.logs.clear();
                    }
                    c.logs.push((limit, b.clone()));
                }
                b
            }
        })
    }

    /// Keeps a `/payload/SEQ` answer made on the ordinary path, for the entry at `commit`.
    pub(crate) fn keep_payload(&self, commit: gix::ObjectId, answer: String) {
        lock(&self.cache)
            .payloads
            .insert(commit, Bytes::from(answer));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u32) -> gix::ObjectId {
        let mut b = [0u8; 20];
        b[..4].copy_from_slice(&n.to_be_bytes());
        gix::ObjectId::from_bytes_or_panic(&b)
    }

    #[test]
    fn a_log_of_kept_entries_is_the_ordinary_paths_answer() {
        let mut view = EntryCache::default();
        let mut prev: Option<Entry> = None;
        for i in 0..12u32 {
            let new = crate::ledger::NewEntry {
                actor: format!("a{i}"),
                kind: crate::ledger::kind::NOTE.into(),
                causal_parent: i.checked_sub(1).map(i64::from),
                payload: crate::ledger::canonical::parse("{}").unwrap(),
                ts: 1.5 + f64::from(i),
            };
            let e = Entry::next(prev.as_ref(), &new, "ab".repeat(32));
            prev = Some(e.clone());
            Arc::make_mut(&mut view.entries).push(e);
            Arc::make_mut(&mut view.commits).push(id(i));
        }
        let mut kept = Kept::default();
        for limit in [1, 2, 5, 12, 13, 100] {
            let ordinary = bytes_of(Ok(surface::read::log_of(&view.entries, Some(limit)))).unwrap();
            // Made from nothing kept, then from what the first made.
            assert_eq!(
                log_of_kept(&view, &mut Kept::default(), limit).unwrap(),
                ordinary
            );
            assert_eq!(log_of_kept(&view, &mut kept, limit).unwrap(), ordinary);
        }
        let empty = EntryCache::default();
        let none = bytes_of(Ok(surface::read::log_of(&empty.entries, Some(10)))).unwrap();
        assert_eq!(log_of_kept(&empty, &mut kept, 10).unwrap(), none);
        assert_eq!(&none[..], b"[]");
    }

    #[test]
    fn kept_answers_stay_within_their_bounds() {
        let mut k = Kept::default();
        for n in 0..(KEPT_ANSWERS as u32 * 3) {
            k.insert(id(n), Bytes::from_static(b"{\"seq\":1}"));
            assert!(k.len() <= KEPT_ANSWERS);
            assert!(k.bytes() <= KEPT_BYTES);
        }
        // The newest is always there after its insert.
        assert!(k.get(&id(KEPT_ANSWERS as u32 * 3 - 1)).is_some());
        let big = Bytes::from(vec![b'x'; KEPT_BYTES / 3]);
        for n in 0..10 {
            k.insert(id(n), big.clone());
            assert!(k.bytes() <= KEPT_BYTES, "{}", k.bytes());
            assert!(k.get(&id(n)).is_some());
        }
        // One answer over the byte bound is not kept at all.
        k.insert(id(99), Bytes::from(vec![b'x'; KEPT_BYTES + 1]));
        assert!(k.get(&id(99)).is_none());
        assert!(k.bytes() <= KEPT_BYTES);
        // The same commit again replaces its answer, counted once.
        let mut one = Kept::default();
        one.insert(id(1), Bytes::from_static(b"12345"));
        one.insert(id(1), Bytes::from_static(b"123"));
        assert_eq!((one.len(), one.bytes()), (1, 3));
    }
}
