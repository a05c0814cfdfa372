//! The entries as last read and the answers made from them, and how a read knows they are
//! still the ledger's.
//!
//! [`Cached`] holds the entries at one tip ([`EntryCache`]) and the read answers already
//! written out as bytes: `/status`, `/checkpoint` and `/log?limit=N` for that tip (dropped when
//! the tip moves), and `/ledger/SEQ` and `/payload/SEQ` by the entry's commit, kept across tips
//! (a commit names its entry and body for good; a redaction writes new commits), up to
//! [`KEPT_ANSWERS`](super::board::KEPT_ANSWERS) answers or
//! [`KEPT_BYTES`](super::board::KEPT_BYTES) bytes each, then dropped all at once.
//!
//! **When the cache is the ledger's.** A read trusts the cached tip without looking at the ref
//! for [`RECHECK`] after a look found the ref naming it; past that it reads the ref again (the
//! loose ref file alone where refs are files, else through the store). Every request of this
//! process that may write (every route but a `GET`, and each append of a run in progress)
//! looks at the ref again once it has written, before it answers, and sets the mark anew (or
//! clears it when it cannot look); the mark is set and cleared under the cache's lock, after
//! the answers it stands for are published, and a look at the ref happens under the same
//! lock. Reads find the mark and the answers on the [`Board`] without taking the lock (see
//! the `board` module); a read that finds no mark, one too old, or no answer made takes the
//! lock and looks. So:
//!
//! * after this daemon has answered a write, every read that starts later sees it (or a later
//!   tip): the mark it finds was set by a look made after the write, or it finds none and
//!   looks itself;
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
//! process, or one of this process whose ref moved before its flush ended) walks under the
//! lock; the reads that found it moved at the same time wait for that walk and take its look
//! at the ref as theirs. A walk of a few commits from the cached tip (at most [`STEP`]) is
//! made on the reading worker itself ([`Dispatcher::answer_fresh`]); a longer one, a
//! rewrite, or a first read goes where it may block.
//! `/log?limit=N` is written from the kept `/ledger/SEQ` answers, so a new tip writes out
//! only its new entries. The walk itself remakes, for the new tip, each `/status`,
//! `/checkpoint` and `/log?limit=N` answer a read took at the tip before, so after an append
//! of this process the reads find them made (and an answer nobody asks for again is not made
//! again). Walks read through one store kept with the cache, opened once (and again after a
//! walk that failed), rather than a store opened for each walk.

use std::sync::{Arc, MutexGuard};
use std::time::Instant;

use axum::body::Bytes;
use serde_json::Value as J;

use super::board::{Board, Kept, Published};
pub(crate) use super::board::{RECHECK, Read};
use super::{Dispatcher, EntryCache, Reply, lock};
use crate::ledger::Entry;
use crate::ledger::merkle::merkle_root;
use crate::surface;

/// The most distinct `/log?limit=N` answers kept for one tip.
const KEPT_LOGS: usize = 8;

/// The most per-tip reads remembered as asked at one tip (`/status`, `/checkpoint` and the
/// kept logs).
const ASKED: usize = KEPT_LOGS + 2;

/// The entries at one tip and the answers made from them (see the module doc).
#[derive(Default)]
pub(crate) struct Cached {
    pub(crate) view: Arc<EntryCache>,
    /// When a look at the ref last found `view`'s tip; `None` after a write of this process.
    checked: Option<Instant>,
    status: Option<Bytes>,
    checkpoint: Option<Bytes>,
    logs: Vec<(u64, Bytes)>,
    /// The per-tip reads (`/status`, `/checkpoint`, `/log?limit=N`) a read took at this tip:
    /// the walk to the next tip makes their answers for it.
    asked: Vec<Read>,
    /// The store the walks read through, kept between them.
    walker: Option<crate::surface::store::GitStore>,
    /// `/ledger/SEQ` answers by entry commit.
    pub(crate) entries: Kept<gix::ObjectId>,
    /// `/payload/SEQ` answers by entry commit: each body in them was read back and checked
    /// against its payload hash when the answer was first made.
    pub(crate) payloads: Kept<gix::ObjectId>,
    /// Whether a per-tip answer was made since the board was last published.
    unpublished: bool,
    /// Where the answers and the mark are published for reads without the lock.
    pub(crate) board: Arc<Board>,
}

impl Cached {
    /// Moves to `view`, dropping the answers of the tip before, then makes for `view` the
    /// per-tip answers a read took at the tip before (on the thread that walked, under the
    /// lock, instead of by the first read of the new tip). Those made here count as asked
    /// only once a read takes them, so an answer nobody reads any more is made once more at
    /// most.
    fn set_view(&mut self, view: Arc<EntryCache>, ledger: &str) {
        for read in self.board.current().taken() {
            self.ask(read);
        }
        self.view = view;
        self.status = None;
        self.checkpoint = None;
        self.logs.clear();
        for read in std::mem::take(&mut self.asked) {
            // A failure is left to the read that asks, which answers it as before.
            let _ = self.per_tip(read, ledger);
        }
        self.publish();
    }

    /// Publishes this tip's answers on the board (see the `board` module).
    fn publish(&mut self) {
        self.unpublished = false;
        self.board.publish(Published::new(
            self.view.entries.len() as u64,
            self.view.epoch,
            self.status.clone(),
            self.checkpoint.clone(),
            self.logs.clone(),
        ));
    }

    /// Notes the cache's look at the ref at `at` (`None`: the next read must look), here and
    /// on the board.
    fn set_checked(&mut self, at: Option<Instant>) {
        self.checked = at;
        self.board.mark(at);
    }

    /// The kept answer to a per-tip read (`/status`, `/checkpoint`, `/log?limit=N`), made now
    /// when there is none for this tip; `None` for any other read.
    fn per_tip(&mut self, read: Read, ledger: &str) -> Option<Result<Bytes, Reply>> {
        let view = &self.view;
        let size = view.entries.len() as u64;
        Some(match read {
            Read::Status => kept(&mut self.status, &mut self.unpublished, || {
                bytes_of(Ok(surface::ledger::status(ledger, size, &view.root)))
            }),
            Read::Checkpoint => kept(&mut self.checkpoint, &mut self.unpublished, || {
                bytes_of(Ok(surface::ledger::checkpoint(ledger, size, &view.root)))
            }),
            Read::Log(limit) => {
                if let Some((_, b)) = self.logs.iter().find(|(n, _)| *n == limit) {
                    return Some(Ok(b.clone()));
                }
                let b = log_of_kept(view, &mut self.entries, limit);
                if let Ok(b) = &b {
                    if self.logs.len() >= KEPT_LOGS {
                        self.logs.clear();
                    }
                    self.logs.push((limit, b.clone()));
                    self.unpublished = true;
                }
                b
            }
            Read::Entry(_) | Read::Payload(_) => return None,
        })
    }

    /// Notes that a read took the per-tip answer to `read` at this tip.
    fn ask(&mut self, read: Read) {
        if !self.asked.contains(&read) && self.asked.len() < ASKED {
            self.asked.push(read);
        }
    }
}

/// What one cheap look at the tip found (see [`Dispatcher::look_cheaply`]).
enum Look<'a> {
    /// The cache is the ledger's.
    Fresh(MutexGuard<'a, Cached>),
    /// The loose ref named another tip when looked at (at the instant given).
    Moved(MutexGuard<'a, Cached>, gix::ObjectId, Instant),
    /// No loose ref to read, or not a plain one.
    Unknown,
}

/// The most commits a read walks on the server's own worker when it finds the tip moved
/// (an append or two); a longer walk is made where it may block.
const STEP: usize = 4;

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
    made: &mut bool,
    make: impl FnOnce() -> Result<Bytes, Reply>,
) -> Result<Bytes, Reply> {
    if let Some(b) = slot {
        return Ok(b.clone());
    }
    let b = make()?;
    *slot = Some(b.clone());
    *made = true;
    Ok(b)
}

/// The `/ledger/SEQ` answer for the entry at `seq` of `view` (which holds it), kept by its
/// commit: made once per entry, then copied.
fn entry_kept(view: &EntryCache, kept: &mut Kept<gix::ObjectId>, seq: u64) -> Result<Bytes, Reply> {
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
fn log_of_kept(
    view: &EntryCache,
    kept: &mut Kept<gix::ObjectId>,
    limit: u64,
) -> Result<Bytes, Reply> {
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
        lock(&self.cache).set_checked(None);
    }

    /// After a write of this process, on the writer's thread: the cache brought to the
    /// ledger's tip at once where the ref is a loose file (one small read when nothing moved),
    /// so the reads after the write find it fresh instead of one of them walking while the
    /// others wait. The board's mark stands meanwhile (the write has not answered: a read may
    /// still be given the tip before it) and is set again by the look, or, where that fails,
    /// cleared ([`Dispatcher::tip_moved`]) so that the next read looks itself.
    pub(crate) fn caught_up(&self) {
        if self.ref_file.is_some() {
            lock(&self.cache).checked = None;
            if self.current().is_ok() {
                return;
            }
        }
        self.tip_moved();
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
        let mut cache = lock(&self.cache);
        // A look at the ref made since this call began, by another request that then walked
        // to what it found under this lock, stands for this call's own look: the requests
        // that find the tip moved at once walk once.
        if cache.checked.is_some_and(|t| t >= began) {
            return Ok(cache);
        }
        // The kept store, or a new one (the first walk, or the one after a walk that failed),
        // opened outside the lock: opening may wait on the writer lock to recover the log.
        let store = match cache.walker.take() {
            Some(store) => store,
            None => {
                drop(cache);
                let store = self.reader()?;
                cache = lock(&self.cache);
                if cache.checked.is_some_and(|t| t >= began) {
                    cache.walker.get_or_insert(store);
                    return Ok(cache);
                }
                cache.walker.take().unwrap_or(store)
            }
        };
        let looked = Instant::now();
        self.look(&store, &mut cache)?;
        cache.walker = Some(store);
        cache.set_checked(Some(looked));
        Ok(cache)
    }

    /// Brings `cache` to the tip `store` reads now (see [`Dispatcher::current`]).
    fn look(
        &self,
        store: &crate::surface::store::GitStore,
        cache: &mut Cached,
    ) -> Result<(), Reply> {
        let Some(tip) = store.tip_id()? else {
            let empty = EntryCache {
                root: merkle_root::<&str>(&[]),
                epoch: cache.view.epoch + 1,
                ..EntryCache::default()
            };
            cache.set_view(Arc::new(empty), &self.cfg.ledger);
            return Ok(());
        };
        if cache.view.tip != Some(tip)
            && let Some(next) = Self::walk(store, &mut cache.view, tip, usize::MAX)?
        {
            cache.set_view(Arc::new(next), &self.cfg.ledger);
        }
        Ok(())
    }

    /// The entries at `tip`: `view` extended from its tip when `tip` descends from it, else
    /// read whole; `None` (and `view` as it was) when that takes reading more than `most`
    /// commits. Runs under the cache's lock: the other requests that found the tip moved
    /// wait for this walk rather than each walking it again.
    fn walk(
        store: &crate::surface::store::GitStore,
        view: &mut Arc<EntryCache>,
        tip: gix::ObjectId,
        most: usize,
    ) -> Result<Option<EntryCache>, Reply> {
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
            if fresh.len() >= most {
                return Ok(None);
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
            EntryCache {
                epoch: view.epoch + 1,
                ..EntryCache::default()
            }
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
        Ok(Some(next))
    }

    /// The cache, locked, when it is the ledger's without walking (see the module doc):
    /// looked at within [`RECHECK`], or the loose ref names its tip now. `None` when that
    /// cannot be told this cheaply or the tip moved.
    fn fresh(&self) -> Option<MutexGuard<'_, Cached>> {
        match self.look_cheaply() {
            Look::Fresh(cache) => Some(cache),
            Look::Moved(..) | Look::Unknown => None,
        }
    }

    /// [`Dispatcher::fresh`], telling a tip that moved (with the cache, still locked) from
    /// one that cannot be told this cheaply.
    fn look_cheaply(&self) -> Look<'_> {
        let mut cache = lock(&self.cache);
        let now = Instant::now();
        if cache
            .checked
            .is_some_and(|t| now.saturating_duration_since(t) < RECHECK)
        {
            return Look::Fresh(cache);
        }
        let Some(path) = self.ref_file.as_ref() else {
            return Look::Unknown;
        };
        let mut buf = [0u8; 128];
        let Some(n) = read_ref_file(path, &mut buf) else {
            return Look::Unknown;
        };
        let Ok(tip) = gix::ObjectId::from_hex(buf[..n].trim_ascii()) else {
            return Look::Unknown;
        };
        if cache.view.tip != Some(tip) {
            return Look::Moved(cache, tip, now);
        }
        cache.set_checked(Some(now));
        Look::Fresh(cache)
    }

    /// Walks `cache` to `tip`, which the loose ref named at `looked`, when that reads at most
    /// [`STEP`] commits, through the kept store: the few small reads of an append or two,
    /// made on the caller's thread. `None`, with the cache as it was, for anything else (no
    /// store kept yet, nothing cached yet, a longer walk, a failed read), which the ordinary
    /// walk then makes.
    fn step(&self, cache: &mut Cached, tip: gix::ObjectId, looked: Instant) -> Option<()> {
        cache.view.tip?;
        let store = cache.walker.take()?;
        // A failed read drops the store: the ordinary walk opens another and reports it.
        let next = Self::walk(&store, &mut cache.view, tip, STEP).ok()?;
        cache.walker = Some(store);
        cache.set_view(Arc::new(next?), &self.cfg.ledger);
        cache.set_checked(Some(looked));
        Some(())
    }

    /// The answer to a read the cached entries answer alone, as bytes, when the cache is the
    /// ledger's without walking; `None` for anything else (a tip that moved, an entry past
    /// the end, a body not read yet), which then takes the ordinary path. Cheap enough for the
    /// HTTP server to call on its own workers: at most one small file read, and the answer
    /// copied (or, once a tip, built) under the cache's lock.
    pub(crate) fn answer_fresh(&self, read: Read) -> Option<Result<Bytes, Reply>> {
        if let Some(answer) = self.board.answer(read) {
            return Some(Ok(answer));
        }
        match self.look_cheaply() {
            Look::Fresh(cache) => self.answer_in(cache, read),
            Look::Moved(mut cache, tip, looked) => {
                self.step(&mut cache, tip, looked)?;
                self.answer_in(cache, read)
            }
            Look::Unknown => None,
        }
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
        if let Some(answer) = c.per_tip(read, &self.cfg.ledger) {
            c.ask(read);
            if c.unpublished {
                c.publish();
            }
            return Some(answer);
        }
        let view = &c.view;
        let answer = match read {
            Read::Entry(seq) => {
                view.commits.get(seq as usize)?;
                let answer = entry_kept(view, &mut c.entries, seq);
                if let Ok(b) = &answer {
                    c.board.keep_entry(seq, view.epoch, b);
                }
                answer
            }
            Read::Payload(seq) => {
                let b = c.payloads.get(view.commits.get(seq as usize)?)?;
                c.board.keep_payload(seq, view.epoch, &b);
                Ok(b)
            }
            Read::Status | Read::Checkpoint | Read::Log(_) => return None,
        };
        Some(answer)
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
    use super::super::board::{KEPT_ANSWERS, KEPT_BYTES};
    use super::*;

    fn id(n: u32) -> gix::ObjectId {
        let mut b = [0u8; 20];
        b[..4].copy_from_slice(&n.to_be_bytes());
        gix::ObjectId::from_bytes_or_panic(&b)
    }

    /// `n` entries at commits `id(0)` to `id(n - 1)`, with their root.
    fn view_of(n: u32) -> EntryCache {
        let mut view = EntryCache::default();
        let mut prev: Option<Entry> = None;
        for i in 0..n {
            let new = crate::ledger::NewEntry {
                actor: format!("a{i}"),
                kind: crate::ledger::kind::NOTE.into(),
                causal_parent: i.checked_sub(1).map(i64::from),
                payload: crate::ledger::canonical::parse("{}").unwrap(),
                ts: 1.5 + f64::from(i),
            };
            let e = Entry::next(prev.as_ref(), &new, "ab".repeat(32));
            prev = Some(e.clone());
            view.acc.push(&e.entry_hash);
            Arc::make_mut(&mut view.entries).push(e);
            Arc::make_mut(&mut view.commits).push(id(i));
        }
        view.tip = n.checked_sub(1).map(id);
        view.root = view.acc.root();
        view
    }

    /// What the ordinary path answers to a per-tip read of `view`.
    fn ordinary(view: &EntryCache, read: Read) -> Bytes {
        let size = view.entries.len() as u64;
        match read {
            Read::Status => bytes_of(Ok(surface::ledger::status("main", size, &view.root))),
            Read::Checkpoint => bytes_of(Ok(surface::ledger::checkpoint("main", size, &view.root))),
            Read::Log(n) => bytes_of(Ok(surface::read::log_of(&view.entries, Some(n)))),
            Read::Entry(_) | Read::Payload(_) => unreachable!("not a per-tip read"),
        }
        .unwrap()
    }

    #[test]
    fn a_new_tip_comes_with_the_answers_read_at_the_tip_before() {
        let mut c = Cached::default();
        c.set_view(Arc::new(view_of(12)), "main");
        let asked = [Read::Status, Read::Log(10), Read::Log(3)];
        for read in asked {
            assert_eq!(
                c.per_tip(read, "main").unwrap().unwrap(),
                ordinary(&c.view, read)
            );
            c.ask(read);
        }
        // The next tip (one entry more): the answers asked are made, and are the ordinary
        // path's for the new tip, its new entry first in each log; the one not asked is not.
        let next = Arc::new(view_of(13));
        c.set_view(next.clone(), "main");
        assert_eq!(c.status.clone().unwrap(), ordinary(&next, Read::Status));
        assert!(c.checkpoint.is_none());
        for n in [10, 3] {
            let (_, log) = c.logs.iter().find(|(l, _)| *l == n).unwrap();
            assert_eq!(log, &ordinary(&next, Read::Log(n)));
            let v: serde_json::Value = serde_json::from_slice(log).unwrap();
            assert_eq!(v[0]["seq"], 12, "{v}");
        }
        // Nobody read them at this tip: the tip after it makes none.
        c.set_view(Arc::new(view_of(14)), "main");
        assert!(c.status.is_none() && c.logs.is_empty() && c.asked.is_empty());
        // Asked again: made on the read, and again by the walk after it.
        for read in [Read::Checkpoint, Read::Log(2)] {
            assert_eq!(
                c.per_tip(read, "main").unwrap().unwrap(),
                ordinary(&c.view, read)
            );
            c.ask(read);
        }
        let last = Arc::new(view_of(15));
        c.set_view(last.clone(), "main");
        assert_eq!(
            c.checkpoint.clone().unwrap(),
            ordinary(&last, Read::Checkpoint)
        );
        assert_eq!(c.logs, vec![(2, ordinary(&last, Read::Log(2)))]);
        // The reads by seq are not per-tip answers.
        assert!(c.per_tip(Read::Entry(0), "main").is_none());
        assert!(c.per_tip(Read::Payload(0), "main").is_none());
    }

    #[test]
    fn the_asked_reads_stay_within_their_bound() {
        let mut c = Cached::default();
        c.set_view(Arc::new(view_of(3)), "main");
        for n in 1..=50 {
            c.per_tip(Read::Log(n), "main").unwrap().unwrap();
            c.ask(Read::Log(n));
            c.ask(Read::Log(n));
            assert!(c.asked.len() <= ASKED && c.logs.len() <= KEPT_LOGS);
        }
        assert_eq!(c.asked.len(), ASKED);
    }

    #[test]
    fn a_log_of_kept_entries_is_the_ordinary_paths_answer() {
        let view = view_of(12);
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
