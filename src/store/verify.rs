//! `verify` for git ledgers: every commit rebuilt byte for byte, the entry chain, the ref's
//! witnesses (reflog and recorded checkpoints) and, deep, every tree and body. Never consults
//! the seq index.
//!
//! The walk from the tip is sequential (each commit names the next one), so one thread walks:
//! it reads and inflates each commit, checks that it hashes to its name, and hands it on. Worker
//! threads do everything else per entry (parse, rehash, rebuild the commit, and for `--deep` read
//! and hash the tree and body), and a last pass over compact records checks the chain in order.

use std::collections::HashSet;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use gix::ObjectId;
use gix::hash::Kind as HashKind;
use gix::objs::Kind;

use super::codec::object_id;
use super::git::{
    GitStore, ReflogLine, StoreError, entry_from_message, entry_from_message_checked, git_err,
    hex_to_bytes, is_commit_of, parse_commit,
};
use super::packread::{Packs, Reader};
use super::sign::SignatureCheck;
use crate::ledger::ChainProblem;
use crate::ledger::canonical;
use crate::ledger::hash;

/// Threads for the per-entry checks and the Merkle chunks: the cores there are, up to four.
fn threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 4)
}

/// Commits handed from the walker to a worker at a time.
const BATCH: usize = 512;

/// New commits below which a resumed verify reads objects through gix rather than index the
/// packs first.
const RESUMED_WITHOUT_PACKS: usize = 4096;

/// Entry trees whose body `--deep` has already read and hashed, with the payload hash it
/// hashed to, so a body that many entries share is read once per worker (as git stores it
/// once). Bounded, so a ledger of distinct bodies costs at most this many records of memory
/// over all workers.
const SEEN_TREES_MAX: usize = 32 * 1024;

/// Entry trees one worker has checked: tree id -> payload hash of its body. A tree id names
/// its content, and the content was checked to hash to that id, so a later entry with the same
/// tree holds the same body: it is present exactly when its payload hash matches. Each worker
/// keeps its own, keyed by the id's leading bytes (gix's hasher for ids, which are already
/// uniform), with `cap` entries at most: one map behind a lock, hashed with SipHash, cost a
/// contended lock and two lookups per entry (about 7 % of the workers' time on a ledger of
/// distinct bodies, where it finds nothing).
pub(super) struct SeenTrees {
    map: gix::hashtable::HashMap<ObjectId, [u8; 32]>,
    cap: usize,
}

impl SeenTrees {
    /// A map for at most `cap` trees, sized once for the `expected` a worker will meet (up to
    /// `cap`): grown by doubling, each worker's map left its smaller tables behind in the heap,
    /// about 4 MiB more peak memory at 100,000 entries.
    fn new(cap: usize, expected: usize) -> SeenTrees {
        SeenTrees {
            map: gix::hashtable::HashMap::with_capacity_and_hasher(
                expected.min(cap),
                Default::default(),
            ),
            cap,
        }
    }

    pub(super) fn get(&self, tree: &ObjectId) -> Option<[u8; 32]> {
        self.map.get(tree).copied()
    }

    pub(super) fn insert(&mut self, tree: ObjectId, payload_hash: [u8; 32]) {
        if self.map.len() < self.cap {
            self.map.insert(tree, payload_hash);
        }
    }
}

mod body;
mod change;
mod code;
mod judge;
mod roots;
#[cfg(test)]
mod tests;
mod walk;

pub(crate) use body::LedgerVerifyReport;
// The old names, for modules outside the store that still import them.
pub(crate) use self::VerifiedState as Verified;
pub(crate) use body::LedgerVerifyReport as VerifyReport;
use body::*;
pub(crate) use code::Code;
use code::{Problem, chain_code};
pub(crate) use walk::seq_of_message;
use walk::*;

/// The ref's reflog, from where it describes the current chain, and which of its commits the
/// walk found in the chain.
struct ReflogWitness<'a> {
    lines: &'a [ReflogLine],
    start: usize,
    found: &'a HashSet<ObjectId>,
}

/// Where the walk from the tip stopped early.
struct WalkFailure {
    /// The seq of the last commit read (the failure is below it).
    child_seq_hint: Option<u64>,
    code: Code,
    message: String,
}

impl WalkFailure {
    fn new(child_seq_hint: Option<u64>, code: Code, message: String) -> WalkFailure {
        WalkFailure {
            child_seq_hint,
            code,
            message,
        }
    }
}

/// What a verify that passed read, kept so the next verify of the same ledger reads and checks
/// only the commits appended since: the tip it read up to, whether it was deep, each entry's
/// compact record (88 bytes) and the reflog commits its walks met in the chain. Held by a
/// long-lived reader (the daemon); never trusted across a rewrite: a tip that does not descend
/// from [`VerifiedState`]'s is verified from the root. What the records stand for was true when they
/// were read: a verify that resumes from them does not read those objects again.
pub(crate) struct VerifiedState {
    tip: ObjectId,
    deep: bool,
    recs: Vec<Rec>,
    found: HashSet<ObjectId>,
    judged: Judged,
}

/// The chain pass's state after the records it checked: what the next record is checked
/// against, and what the witnesses need of the records before it, so a resumed verify's chain
/// pass and Merkle roots cost only the new records.
struct Judged {
    /// Records checked, from the root.
    len: usize,
    checker: judge::RawChain,
    /// Forum's tree over them.
    acc: crate::ledger::merkle::Accumulator,
    /// The standard tree over them, when a signed note asked for it.
    std: Option<crate::ledger::tlog::Frontier>,
    /// Forum's and the standard tree's roots at the sizes checkpoints named.
    roots: Vec<(u64, String)>,
    std_roots: Vec<(u64, crate::ledger::tlog::Hash)>,
    /// Payload hashes redaction entries name.
    redacted: HashSet<[u8; 32]>,
    /// Absent bodies a redaction names (deep), as the report lists them.
    redacted_bodies: Vec<(u64, String)>,
}

impl GitStore {
    /// Checks the ledger (forum-spec §4 plus the git layer). `deep` also checks every tree and
    /// body. Never consults the index.
    pub fn verify(&self, deep: bool) -> Result<LedgerVerifyReport, StoreError> {
        Ok(self.verify_from(deep, None)?.0)
    }

    /// [`GitStore::verify`], resuming from `prior` (a verify of this ledger that passed) when
    /// the tip descends from the tip it read: only the commits after it are walked, read and
    /// checked; the chain pass and the witnesses (reflog, recorded and signed checkpoints)
    /// are checked again over every record. A resumed verify that fails is done again from the
    /// root, so every failure reported is what a whole verify finds. Returns the report and,
    /// when it passed, what the next verify may resume from.
    pub(crate) fn verify_from(
        &self,
        deep: bool,
        prior: Option<VerifiedState>,
    ) -> Result<(LedgerVerifyReport, Option<VerifiedState>), StoreError> {
        if let Some(prior) = prior.filter(|p| p.deep == deep) {
            let (report, kept) = self.verify_walk(deep, Some(prior))?;
            if report.passed() {
                return Ok((report, kept));
            }
        }
        let (report, kept) = self.verify_walk(deep, None)?;
        if matches!(report.code, Some(Code::MissingObject | Code::BodyMissing)) {
            // A `git prune` that began before an append moved the ref deletes that append's
            // objects afterwards; the write-ahead log still holds them. Put them back and look
            // again (a missing object the log does not hold stays reported).
            // (Only where the writer lock can be had: a read-only reader just reports.)
            let restored = match self.writer_lock() {
                Ok(_held) => self.restore_from_wal().unwrap_or(0),
                Err(_) => 0,
            };
            if restored > 0 {
                let (mut again, kept) = self.verify_walk(deep, None)?;
                again.notes.push(format!(
                    "restored {restored} object(s) that were deleted from the object store (by a git prune racing an append, or a crash) from the write-ahead log; they are named by their hashes, so they are exactly the originals"
                ));
                return Ok((again, kept));
            }
        }
        Ok((report, kept))
    }

    /// Verifies the chain that ends at commit `tip` as if the ref named it: every commit, the
    /// entry chain, recorded and signed checkpoints and (deep) the bodies, but not the ref's
    /// reflog (doctor asks this of the tips the reflog names).
    pub(crate) fn verify_at(
        &self,
        tip: ObjectId,
        deep: bool,
    ) -> Result<LedgerVerifyReport, StoreError> {
        let report = LedgerVerifyReport::default();
        let (recs, walk_failure, found, _, ahead) =
            self.walk_and_check(tip, deep, HashSet::new(), None, 0)?;
        let witness = ReflogWitness {
            lines: &[],
            start: 0,
            found: &found,
        };
        Ok(self
            .judge(
                (&recs, &ahead),
                walk_failure,
                tip,
                deep,
                &witness,
                report,
                None,
            )?
            .0)
    }

    /// One verify, from the root, or from `prior` when the tip descends from its tip.
    fn verify_walk(
        &self,
        deep: bool,
        prior: Option<VerifiedState>,
    ) -> Result<(LedgerVerifyReport, Option<VerifiedState>), StoreError> {
        let mut report = LedgerVerifyReport::default();
        // An append a killed writer left half done is rolled back first, so its reflog line
        // does not read as a rewound ref.
        self.settle_interrupted_append()?;
        let tip = match self.tip_id() {
            Ok(Some(t)) => t,
            Ok(None) => return Err(StoreError::NoLedger(self.name().to_string())),
            Err(StoreError::Corrupt(m)) => {
                report.fail(None, Code::BrokenRef, m);
                return Ok((report, None));
            }
            Err(e) => return Err(e),
        };
        // The reflog's ids (after the newest sanctioned rewrite, a redaction) are looked for
        // during the walk, so no set of every commit id is needed afterwards.
        let reflog = self.reflog();
        let start = reflog
            .iter()
            .rposition(|l| l.rewrite)
            .map(|i| i + 1)
            .unwrap_or(0);
        let watch: HashSet<ObjectId> = reflog[start..]
            .iter()
            .filter_map(|l| l.new)
            .filter(|id| !id.is_null())
            .collect();
        let (stop, have) = match &prior {
            Some(p) => (Some(p.tip), p.recs.len()),
            None => (None, 0),
        };
        let (new, walk_failure, found_now, met, ahead) =
            self.walk_and_check(tip, deep, watch, stop, have)?;
        // The walk met the prior tip: its records stand for everything below.
        let (mut recs, mut found, judged) = match prior {
            Some(p) if met => (p.recs, p.found, Some(p.judged)),
            _ => (Vec::new(), HashSet::new(), None),
        };
        // Moved rather than copied when nothing was held (a copy of 88 bytes an entry, and the
        // page faults of a second array as large).
        if recs.is_empty() {
            recs = new;
        } else {
            recs.extend(new);
        }
        found.extend(found_now);
        let witness = ReflogWitness {
            lines: &reflog,
            start,
            found: &found,
        };
        // The chunk roots hashed during the walk stand for the records from the root: not
        // when the walk resumed from `prior`'s.
        let ahead = if judged.is_none() { ahead } else { Vec::new() };
        let (report, judged) = self.judge(
            (&recs, &ahead),
            walk_failure,
            tip,
            deep,
            &witness,
            report,
            judged,
        )?;
        let kept = judged.map(|judged| VerifiedState {
            tip,
            deep,
            recs,
            found,
            judged,
        });
        Ok((report, kept))
    }

    /// Pass 1: the walk, with per-entry checks on worker threads. Returns the records root
    /// first.
    /// The walk stops before `stop` when it meets it (the tip of records already held, `have`
    /// of them), and says whether it did.
    fn walk_and_check(
        &self,
        tip: ObjectId,
        deep: bool,
        watch: HashSet<ObjectId>,
        stop: Option<ObjectId>,
        have: usize,
    ) -> Result<Walked, StoreError> {
        let hash = self.object_hash();
        let workers = threads();
        let shared = self.repo().clone().into_sync();
        // The tip's seq tells how many records to expect; capped so a forged seq cannot make us
        // reserve absurd memory.
        let expected = self
            .read_raw_commit_seq(&tip)
            .map(|s| (s + 1).min(1 << 22) as usize)
            .unwrap_or(0)
            .saturating_sub(have);
        let mut slots: Vec<Option<Rec>> = Vec::with_capacity(expected);
        let mut ahead = (have == 0).then(|| roots::Ahead::new(expected));
        let bad = BadIds::new();
        // The pack reader indexes every object of every pack by offset (a whole-ledger cost,
        // paid back over a whole walk); a resumed walk of a few commits reads them through gix.
        let packs = if have > 0 && expected < RESUMED_WITHOUT_PACKS {
            Packs::default()
        } else {
            Packs::open(&self.objects_dir(), hash)
        };
        let walked = std::thread::scope(|s| -> Result<Walk, StoreError> {
            // One batch waiting per worker is enough to keep them busy; a deeper queue only
            // let the walker run further ahead, allocating new batches (a third of a MiB each,
            // page-faulted in) while checked ones were still on their way back to be reused,
            // where a walker that waits leaves its core to the workers.
            let (tx, rx) = mpsc::sync_channel::<Batch>(workers);
            let rx = Arc::new(Mutex::new(rx));
            let (rtx, rrx) = mpsc::channel::<CheckedBatch>();
            // Checked batches go back to the walker to be refilled (see [`Batch`]).
            let (btx, brx) = mpsc::channel::<Batch>();
            for _ in 0..workers {
                let rx = Arc::clone(&rx);
                let rtx = rtx.clone();
                let btx = btx.clone();
                let shared = shared.clone();
                let seen = SeenTrees::new(SEEN_TREES_MAX / workers, expected.div_ceil(workers));
                let reader = Reader::new(packs.clone());
                let bad = &bad;
                s.spawn(move || {
                    let ends = (&*rx, &rtx, &btx);
                    check_batches(&shared, reader, hash, deep, seen, bad, ends);
                });
            }
            // Only workers hold the receiver now: if they all stop, the walker's sends fail and it
            // stops too.
            drop((rx, rtx, btx));
            // The walker gets its own thread so this one can collect results as they come.
            let walker = {
                let shared = shared.clone();
                let bad = &bad;
                s.spawn(move || {
                    let repo = shared.to_thread_local();
                    walk(&repo, hash, tip, (tx, brx), watch, packs, stop, bad)
                })
            };
            let first_err = fill_slots(rrx, &mut slots, ahead.as_mut());
            let walked = walker
                .join()
                .unwrap_or_else(|_| Err(StoreError::Git("the verify walker panicked".into())));
            Walk::kept(first_err, walked, bad.before())
        })?;
        let repo = shared.to_thread_local();
        let (failure, found, met) = walked.cut(bad, &mut slots, &repo, hash);
        let ahead = ahead.map_or_else(Vec::new, |a| a.roots(slots.len()));
        slots.reverse();
        let recs: Vec<Rec> = slots
            .into_iter()
            .map(|r| r.expect("every walked commit was checked"))
            .collect();
        Ok((recs, failure, found, met, ahead))
    }

    /// The seq of the tip commit's entry, read cheaply from its message.
    fn read_raw_commit_seq(&self, id: &ObjectId) -> Option<u64> {
        let mut buf = Vec::new();
        self.read_raw(id, &mut buf).ok()??;
        let raw = parse_commit(&buf, self.object_hash())?;
        seq_of_message(raw.message)
    }
}

/// What checker threads send back: checked records by walk position, or the error that stopped
/// one (with the walk position of the commit it met it at).
type CheckedBatch = Result<Vec<(usize, Rec)>, (usize, StoreError)>;

/// A checker's ends of the channels: batches in, checked records out, emptied batches back.
type Ends<'a> = (
    &'a Mutex<mpsc::Receiver<Batch>>,
    &'a mpsc::Sender<CheckedBatch>,
    &'a mpsc::Sender<Batch>,
);

/// One checker thread: checks the commits of each batch the walker sends until the walker
/// stops or a check fails, sending what it found back, and the emptied batch to be refilled.
/// Each commit is first hashed to its name; one that does not is reported to `bad`, and no
/// commit past the first reported is checked.
fn check_batches(
    shared: &gix::ThreadSafeRepository,
    mut reader: Reader,
    hash: HashKind,
    deep: bool,
    mut seen: SeenTrees,
    bad: &BadIds,
    (rx, rtx, back): Ends<'_>,
) {
    let repo = shared.to_thread_local();
    let mut bufs = Scratch::default();
    loop {
        let mut batch = match rx.lock().map(|r| r.recv()) {
            Ok(Ok(b)) => b,
            _ => break,
        };
        let mut out = Vec::with_capacity(batch.items.len());
        let mut prev = batch.prev;
        for (i, id, at) in &batch.items {
            let data = &batch.data[at.clone()];
            let child = prev.replace(*id);
            if *i > bad.before() {
                break;
            }
            let named = match object_id(hash, Kind::Commit, data) {
                Ok(named) => named,
                Err(e) => {
                    let _ = rtx.send(Ok(out));
                    let _ = rtx.send(Err((*i, e)));
                    return;
                }
            };
            if named != *id {
                bad.report(*i, *id, child);
                break;
            }
            match check_commit(
                &repo,
                &mut reader,
                hash,
                *id,
                data,
                deep,
                &mut seen,
                &mut bufs,
            ) {
                Ok(r) => out.push((*i, r)),
                Err(e) => {
                    let _ = rtx.send(Ok(out));
                    let _ = rtx.send(Err((*i, e)));
                    return;
                }
            }
        }
        if rtx.send(Ok(out)).is_err() {
            return;
        }
        batch.items.clear();
        batch.data.clear();
        // The walker may have finished: then the batch is simply freed.
        let _ = back.send(batch);
    }
}

/// Puts each checked record in its slot by walk position, as the checkers send them, and
/// hashes the chunks of Forum's tree they complete into `ahead`; the error any checker sent
/// at the lowest walk position.
fn fill_slots(
    rrx: mpsc::Receiver<CheckedBatch>,
    slots: &mut Vec<Option<Rec>>,
    mut ahead: Option<&mut roots::Ahead>,
) -> Option<(usize, StoreError)> {
    let mut first_err = None;
    for r in rrx {
        match r {
            Ok(items) => {
                for (i, rec) in items {
                    if slots.len() <= i {
                        slots.resize_with(i + 1, || None);
                    }
                    slots[i] = Some(rec);
                    if let Some(a) = ahead.as_deref_mut() {
                        a.filled(i, slots);
                    }
                }
            }
            Err((i, e)) => {
                if first_err.as_ref().is_none_or(|(j, _)| i < *j) {
                    first_err = Some((i, e));
                }
            }
        }
    }
    first_err
}

/// Commits handed from the walker to a worker: (number from the tip, id, where its bytes are
/// in `data`). One buffer per batch rather than one per commit: a commit's buffer was
/// allocated by the walker and freed by a worker, on another thread's arena, once per entry.
/// Workers hand checked batches back for the walker to refill, so their buffers are allocated
/// a few times per verify rather than once per batch (each a fresh mapping of a third of a
/// MiB, page-faulted in and unmapped again).
struct Batch {
    items: Vec<(usize, ObjectId, std::ops::Range<usize>)>,
    data: Vec<u8>,
    /// The commit walked just before the first of `items` (its child), if any.
    prev: Option<ObjectId>,
}

impl Batch {
    fn with_capacity(n: usize) -> Batch {
        Batch {
            items: Vec::with_capacity(n),
            data: Vec::with_capacity(n * 640),
            prev: None,
        }
    }

    /// Adds commit `id` at walk position `i`, walked after `prev`.
    fn push(&mut self, i: usize, id: ObjectId, prev: Option<ObjectId>, bytes: &[u8]) {
        if self.items.is_empty() {
            self.prev = prev;
        }
        let start = self.data.len();
        self.data.extend_from_slice(bytes);
        self.items.push((i, id, start..self.data.len()));
    }
}

/// Pass 1's result: the records root first, where the walk stopped early (if it did), the
/// reflog commits it met, whether it stopped at the tip of the records already held, and the
/// roots of Forum's tree's chunks hashed during the walk (see [`roots::Ahead`]).
type Walked = (
    Vec<Rec>,
    Option<WalkFailure>,
    HashSet<ObjectId>,
    bool,
    Vec<Option<[u8; 32]>>,
);
