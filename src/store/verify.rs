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
use gix::objs::{Find as _, Kind};

use super::git::{
    GitStore, ReflogLine, StoreError, entry_from_message, entry_from_message_checked, git_err,
    hex_to_bytes, is_commit_of, parse_commit,
};
use super::packread::{Packs, Reader};
use super::sign::SignatureCheck;
use crate::ledger::canonical;
use crate::ledger::hash;
use crate::ledger::{ChainChecker, ChainProblem, Link};

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
/// hashed to, so a body that many entries share is read once (as git stores it once). Bounded,
/// so a ledger of distinct bodies costs at most this many records of memory.
const SEEN_TREES_MAX: usize = 32 * 1024;

/// Entry trees already checked, shared by the workers: tree id -> payload hash of its body.
/// A tree id names its content, and the content was checked to hash to that id, so a later
/// entry with the same tree holds the same body: it is present exactly when its payload hash
/// matches.
type SeenTrees = Mutex<std::collections::HashMap<ObjectId, [u8; 32]>>;

mod body;
mod change;
mod code;
mod roots;
#[cfg(test)]
mod tests;
mod walk;

pub(crate) use body::VerifyReport;
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

/// What a verify that passed read, kept so the next verify of the same ledger reads and checks
/// only the commits appended since: the tip it read up to, whether it was deep, each entry's
/// compact record (88 bytes) and the reflog commits its walks met in the chain. Held by a
/// long-lived reader (the daemon); never trusted across a rewrite: a tip that does not descend
/// from [`Verified`]'s is verified from the root. What the records stand for was true when they
/// were read: a verify that resumes from them does not read those objects again.
pub(crate) struct Verified {
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
    checker: ChainChecker,
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
    pub fn verify(&self, deep: bool) -> Result<VerifyReport, StoreError> {
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
        prior: Option<Verified>,
    ) -> Result<(VerifyReport, Option<Verified>), StoreError> {
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
    pub(crate) fn verify_at(&self, tip: ObjectId, deep: bool) -> Result<VerifyReport, StoreError> {
        let report = VerifyReport {
            deep,
            ..VerifyReport::default()
        };
        let (recs, walk_failure, found, _) =
            self.walk_and_check(tip, deep, HashSet::new(), None, 0)?;
        let witness = ReflogWitness {
            lines: &[],
            start: 0,
            found: &found,
        };
        Ok(self
            .judge(&recs, walk_failure, tip, deep, &witness, report, None)?
            .0)
    }

    /// One verify, from the root, or from `prior` when the tip descends from its tip.
    fn verify_walk(
        &self,
        deep: bool,
        prior: Option<Verified>,
    ) -> Result<(VerifyReport, Option<Verified>), StoreError> {
        let mut report = VerifyReport {
            deep,
            ..VerifyReport::default()
        };
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
        let (new, walk_failure, found_now, met) =
            self.walk_and_check(tip, deep, watch, stop, have)?;
        // The walk met the prior tip: its records stand for everything below.
        let (mut recs, mut found, judged) = match prior {
            Some(p) if met => (p.recs, p.found, Some(p.judged)),
            _ => (Vec::new(), HashSet::new(), None),
        };
        recs.extend(new);
        found.extend(found_now);
        let witness = ReflogWitness {
            lines: &reflog,
            start,
            found: &found,
        };
        let (report, judged) =
            self.judge(&recs, walk_failure, tip, deep, &witness, report, judged)?;
        let kept = judged.map(|judged| Verified {
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
        let mut failure = None;
        let mut found = HashSet::new();
        let mut met = false;
        // Sized once for the records expected, so it is not rehashed as it fills.
        let seen: SeenTrees = Mutex::new(std::collections::HashMap::with_capacity(
            expected.min(SEEN_TREES_MAX),
        ));
        // The pack reader indexes every object of every pack by offset (a whole-ledger cost,
        // paid back over a whole walk); a resumed walk of a few commits reads them through gix.
        let packs = if have > 0 && expected < RESUMED_WITHOUT_PACKS {
            Packs::default()
        } else {
            Packs::open(&self.objects_dir(), hash)
        };
        std::thread::scope(|s| -> Result<(), StoreError> {
            let (tx, rx) = mpsc::sync_channel::<Batch>(workers * 4);
            let rx = Arc::new(Mutex::new(rx));
            let (rtx, rrx) = mpsc::channel::<Result<Vec<(usize, Rec)>, StoreError>>();
            for _ in 0..workers {
                let rx = Arc::clone(&rx);
                let rtx = rtx.clone();
                let shared = shared.clone();
                let seen = &seen;
                let mut reader = Reader::new(packs.clone());
                s.spawn(move || {
                    let repo = shared.to_thread_local();
                    let mut buf = Vec::new();
                    loop {
                        let batch = match rx.lock().map(|r| r.recv()) {
                            Ok(Ok(b)) => b,
                            _ => break,
                        };
                        let mut out = Vec::with_capacity(batch.items.len());
                        for (i, id, at) in batch.items {
                            match check_commit(
                                &repo,
                                &mut reader,
                                hash,
                                id,
                                &batch.data[at],
                                deep,
                                seen,
                                &mut buf,
                            ) {
                                Ok(r) => out.push((i, r)),
                                Err(e) => {
                                    let _ = rtx.send(Err(e));
                                    return;
                                }
                            }
                        }
                        if rtx.send(Ok(out)).is_err() {
                            return;
                        }
                    }
                });
            }
            // Only workers hold the receiver now: if they all stop, the walker's sends fail and it
            // stops too.
            drop(rx);
            drop(rtx);
            // The walker gets its own thread so this one can collect results as they come.
            let walker = {
                let shared = shared.clone();
                s.spawn(move || {
                    let repo = shared.to_thread_local();
                    walk(&repo, hash, tip, tx, watch, packs, stop)
                })
            };
            let mut first_err: Option<StoreError> = None;
            for r in rrx {
                match r {
                    Ok(items) => {
                        for (i, rec) in items {
                            if slots.len() <= i {
                                slots.resize_with(i + 1, || None);
                            }
                            slots[i] = Some(rec);
                        }
                    }
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
            match walker.join() {
                Ok(Ok((f, seen, stopped))) => {
                    failure = f;
                    found = seen;
                    met = stopped;
                }
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(StoreError::Git("the verify walker panicked".into()));
                }
            }
            match first_err {
                Some(e) => Err(e),
                None => Ok(()),
            }
        })?;
        slots.reverse();
        let recs: Vec<Rec> = slots
            .into_iter()
            .map(|r| r.expect("every walked commit was checked"))
            .collect();
        Ok((recs, failure, found, met))
    }

    /// The seq of the tip commit's entry, read cheaply from its message.
    fn read_raw_commit_seq(&self, id: &ObjectId) -> Option<u64> {
        let mut buf = Vec::new();
        self.read_raw(id, &mut buf).ok()??;
        let raw = parse_commit(&buf, self.object_hash())?;
        seq_of_message(raw.message)
    }

    /// Pass 2 and the witnesses: the chain root first, then the reflog and recorded
    /// checkpoints, then (deep) the bodies. With `prior` (the state after the records a
    /// verify that passed checked, the first of `recs`), only the records after those are
    /// checked, when `prior` holds every root the checkpoints now name; the witnesses are
    /// checked whole either way. Returns the report and, when it passed, the state after every
    /// record.
    #[allow(clippy::too_many_arguments)]
    fn judge(
        &self,
        recs: &[Rec],
        walk_failure: Option<WalkFailure>,
        tip: ObjectId,
        deep: bool,
        witness: &ReflogWitness<'_>,
        mut report: VerifyReport,
        prior: Option<Judged>,
    ) -> Result<(VerifyReport, Option<Judged>), StoreError> {
        let recorded = self.recorded_checkpoints();
        let signed = self.signed_checkpoints_and_notes()?;
        let wanted: HashSet<u64> = recorded
            .iter()
            .map(|(s, _)| *s)
            .chain(signed.iter().map(|s| s.checkpoint.size))
            .collect();
        // Only a signed note names a standard root: without one, the tree is not built.
        let want_std = signed.iter().any(|s| s.signature.format == "note");
        let prior = prior.filter(|p| {
            let forum = |n: u64| p.roots.iter().any(|r| r.0 == n);
            let standard = |n: u64| p.std_roots.iter().any(|r| r.0 == n);
            walk_failure.is_none()
                && p.len <= recs.len()
                && (!want_std || p.std.is_some())
                && wanted
                    .iter()
                    .all(|&n| n > p.len as u64 || (forum(n) && (!want_std || standard(n))))
        });
        // Where this pass starts: after the records `prior` checked.
        let start = prior.as_ref().map_or(0, |p| p.len);
        let (mut checker, mut std_acc, mut std_roots, mut redacted, prior_tree) = match prior {
            Some(p) => (
                p.checker,
                p.std.unwrap_or_default(),
                p.std_roots,
                p.redacted,
                Some((p.acc, p.roots, p.redacted_bodies)),
            ),
            None => (
                // The links are checked here, in order; Forum's Merkle root over the entries
                // that pass is built afterwards, its whole chunks on several threads
                // (roots.rs).
                ChainChecker::links_only(),
                // The standard tree (RFC 6962 over raw entry hashes), for the roots notes
                // sign.
                crate::ledger::tlog::Frontier::default(),
                Vec::new(),
                HashSet::new(),
                None,
            ),
        };
        let mut chain_problem: Option<Problem> = walk_failure.map(|f| {
            // The walk stopped early: the bad commit sits just below the oldest one read.
            let seq = recs
                .first()
                .and_then(Rec::seq)
                .map(|s| s.saturating_sub(1))
                .or(f.child_seq_hint.map(|s| s.saturating_sub(1)))
                .unwrap_or(0);
            (seq, f.code, f.message)
        });
        // How many entries, from the root, count towards the checkpoint reported.
        let mut upto = start;
        if chain_problem.is_none() {
            // Both hashes of an entry in hex, in one buffer reused for every entry.
            let mut hex_buf = String::with_capacity(128);
            for (i, r) in recs.iter().enumerate().skip(start) {
                let expected = i as u64;
                let Some(seq) = r.seq() else {
                    let (code, msg) = r
                        .local()
                        .cloned()
                        .expect("an unreadable entry carries its problem");
                    chain_problem = Some((expected, code, msg));
                    upto = i;
                    break;
                };
                hex_buf.clear();
                hash::push_hex(&mut hex_buf, &r.prev_hash);
                hash::push_hex(&mut hex_buf, &r.entry_hash);
                let (prev_hash, entry_hash) = hex_buf.split_at(64);
                let link = Link {
                    seq,
                    prev_hash,
                    entry_hash,
                    edited: r.edited,
                };
                let next_seq = recs.get(i + 1).and_then(Rec::seq);
                if let Err(p) = checker.push_link(&link, next_seq) {
                    let (code, message) = chain_code(&p);
                    chain_problem = Some((expected, code, message));
                    upto = i;
                    break;
                }
                // A commit with a problem of its own is not counted in the checkpoint reported.
                if let Some(local) = r.local() {
                    chain_problem = Some((seq, local.0, local.1.clone()));
                    upto = i;
                    break;
                }
                if want_std {
                    std_acc.push(&r.entry_hash);
                }
                let n = expected + 1;
                if want_std && wanted.contains(&n) {
                    std_roots.push((n, std_acc.root()));
                }
                if let Some(h) = r.extra.as_ref().and_then(|x| x.redacts) {
                    redacted.insert(h);
                }
                upto = i + 1;
            }
        }
        // The sizes checkpoints name matter only when the chain holds.
        let no_sizes = HashSet::new();
        let sizes = if chain_problem.is_none() {
            &wanted
        } else {
            &no_sizes
        };
        let (checkpoint, prefix_roots, acc, prior_bodies) = match prior_tree {
            None => {
                let (root, prefix, acc) = roots::forum_roots(recs, upto, sizes, threads());
                (root, prefix, acc, Vec::new())
            }
            // The few records after `prior`'s: their leaves one by one.
            Some((mut acc, mut prefix, bodies)) => {
                let mut hex = String::with_capacity(64);
                for (i, r) in recs[start..upto].iter().enumerate() {
                    roots::push_leaf(&mut acc, r, &mut hex);
                    let n = (start + i + 1) as u64;
                    if sizes.contains(&n) {
                        prefix.push((n, acc.root()));
                    }
                }
                (acc.root(), prefix, acc, bodies)
            }
        };
        report.entries = recs.len() as u64;
        report.checkpoint = checkpoint;
        report.chain = chain_problem.is_none();
        if let Some((seq, code, msg)) = chain_problem {
            report.fail(Some(seq), code, msg);
            return Ok((report, None));
        }
        let len = recs.len() as u64;
        for (size, root) in &recorded {
            if *size > len {
                report.fail(
                    Some(len),
                    Code::Truncated,
                    format!(
                        "the ledger has {len} entries but a checkpoint was recorded at {size} entries (root {root}): entries were removed from the tail"
                    ),
                );
                return Ok((report, None));
            }
            if let Some((_, have)) = prefix_roots.iter().find(|(s, _)| s == size)
                && have != root
            {
                report.fail(
                    Some(size.saturating_sub(1)),
                    Code::Rewritten,
                    format!(
                        "the first {size} entries hash to {have}, not to the recorded checkpoint {root}: history was rewritten"
                    ),
                );
                return Ok((report, None));
            }
        }
        report.checkpoints_checked = recorded.len();
        for s in &signed {
            let (size, root) = (s.checkpoint.size, &s.checkpoint.root);
            let signer = match self.check_signature(s) {
                SignatureCheck::Good(who) => who,
                SignatureCheck::Bad(why) => {
                    report.fail(
                        Some(size.saturating_sub(1).min(len)),
                        Code::BadSignature,
                        format!("the signed checkpoint at size {size} (root {root}) is not trustworthy: {why}"),
                    );
                    return Ok((report, None));
                }
                SignatureCheck::Unchecked(why) => {
                    report.notes.push(format!(
                        "signed checkpoint at size {size} not checked: {why}"
                    ));
                    "an unchecked signer".to_string()
                }
            };
            if s.ledger != self.signature_ledger() {
                report.fail(
                    Some(len),
                    Code::BadSignature,
                    format!(
                        "a signed checkpoint stored for ledger {} names ledger {}",
                        self.signature_ledger(),
                        s.ledger
                    ),
                );
                return Ok((report, None));
            }
            if size > len {
                report.fail(
                    Some(len),
                    Code::Truncated,
                    format!(
                        "the ledger has {len} entries but {signer} signed a checkpoint at {size} entries (root {root}): entries were removed from the tail"
                    ),
                );
                return Ok((report, None));
            }
            if let Some((_, have)) = prefix_roots.iter().find(|(n, _)| *n == size)
                && have != root
            {
                report.fail(
                    Some(size.saturating_sub(1)),
                    Code::Rewritten,
                    format!(
                        "the first {size} entries hash to {have}, not to the checkpoint {root} that {signer} signed: history was rewritten"
                    ),
                );
                return Ok((report, None));
            }
            if s.signature.format == "note"
                && let Some(Some(cp)) = s
                    .signature
                    .signature
                    .split_once("\n\n")
                    .map(|(t, _)| super::note::parse_checkpoint(&format!("{t}\n")).ok())
                && let Some((_, have)) = std_roots.iter().find(|(n, _)| *n == size)
                && *have != cp.root
            {
                report.fail(
                    Some(size.saturating_sub(1)),
                    Code::Rewritten,
                    format!(
                        "the first {size} entries have standard root {}, not the root {} of the note {signer} signed: history was rewritten or the note lies",
                        super::note::b64(have),
                        super::note::b64(&cp.root)
                    ),
                );
                return Ok((report, None));
            }
            report.signatures.push((size, root.clone(), signer));
        }
        if self.check_reflog(witness, tip, len, &mut report)? {
            return Ok((report, None));
        }
        if report.reflog_lines == 0 && recorded.is_empty() {
            report.notes.push(
                "no reflog and no recorded checkpoint: a cleanly truncated tail cannot be detected (as in Forum); record one with `git forum checkpoint`".into(),
            );
        }
        if deep {
            // The bodies `prior` found redacted were checked then.
            report.redacted = prior_bodies;
            let mut first: Option<Problem> = None;
            for (i, r) in recs.iter().enumerate().skip(start) {
                let seq = i as u64;
                let absent_payload = r.extra.as_ref().and_then(|x| x.absent_payload);
                match r.body {
                    BodyState::Bad => {
                        let (code, msg) = r
                            .extra
                            .as_ref()
                            .and_then(|x| x.bad_body.clone())
                            .expect("a bad body carries its problem");
                        first = Some((seq, code, msg));
                        break;
                    }
                    BodyState::Absent if absent_payload.is_some_and(|h| redacted.contains(&h)) => {
                        let h = absent_payload.expect("checked above");
                        report.redacted.push((seq, hash::hex(&h)));
                    }
                    BodyState::Absent => {
                        first = Some((
                            seq,
                            Code::BodyMissing,
                            "its body is absent and no redaction entry names it".into(),
                        ));
                        break;
                    }
                    BodyState::Present | BodyState::Unchecked => {}
                }
            }
            if first.is_none() {
                first = change::check_changes(self, recs, start)?;
            }
            match first {
                Some((seq, code, msg)) => report.fail(Some(seq), code, msg),
                None => report.deep_ok = Some(true),
            }
        }
        let judged = report.passed().then(|| Judged {
            len: upto,
            checker,
            acc,
            std: want_std.then_some(std_acc),
            roots: prefix_roots,
            std_roots,
            redacted,
            redacted_bodies: report.redacted.clone(),
        });
        Ok((report, judged))
    }

    /// Checks the ref's reflog against the chain. Returns true when it found a problem.
    fn check_reflog(
        &self,
        witness: &ReflogWitness<'_>,
        tip: ObjectId,
        len: u64,
        report: &mut VerifyReport,
    ) -> Result<bool, StoreError> {
        let reflog = witness.lines;
        report.reflog_lines = reflog.len();
        let mut buf = Vec::new();
        let lines = &reflog[witness.start..];
        let recovered = self.recovered_locks();
        // An update under way right now (its lock holds the value its reflog line names, and
        // the ref has not moved yet) is not tampering.
        let pending = self.pending_ref_lock();
        let lines = match lines.split_last() {
            Some((last, rest))
                if last.new.is_some() && last.new == pending && last.old == Some(tip) =>
            {
                rest
            }
            _ => lines,
        };
        for (i, line) in lines.iter().enumerate() {
            let Some(id) = line.new else {
                continue;
            };
            // A writer killed after its reflog line was written but before the ref moved leaves
            // a line whose update never landed: the next update (or the ref itself) still starts
            // from that line's old value, and the lock it left was recovered and recorded.
            if recovered.contains(&id) && Some(id) != lines.get(i + 1).map_or(Some(tip), |n| n.old)
            {
                continue;
            }
            if id.is_null() || witness.found.contains(&id) {
                continue;
            }
            let seen = self.read_raw(&id, &mut buf).ok().flatten().and_then(|_| {
                let raw = parse_commit(&buf, self.object_hash())?;
                seq_of_message(raw.message)
            });
            let (code, msg) = match seen {
                Some(s) if s >= len => (
                    Code::Rewound,
                    format!(
                        "the reflog shows the ledger at seq {s} (commit {id}), but it now ends at seq {}: the ref was rewound",
                        len.saturating_sub(1)
                    ),
                ),
                Some(s) => (
                    Code::Rewritten,
                    format!(
                        "the reflog records commit {id} at seq {s}, which the current chain does not contain: the ref was rewritten"
                    ),
                ),
                None => (
                    Code::Rewritten,
                    format!(
                        "the reflog records commit {id}, which is not in the current chain: the ref was rewritten"
                    ),
                ),
            };
            report.fail(Some(len.min(seen.unwrap_or(len))), code, msg);
            return Ok(true);
        }
        if let Some(last) = lines.last()
            && last.new != Some(tip)
            && !last.new.is_some_and(|n| recovered.contains(&n))
        {
            let last = last
                .new
                .map(|id| id.to_string())
                .unwrap_or_else(|| "an unreadable line".into());
            report.fail(
                Some(len),
                Code::RefMoved,
                format!(
                    "{} was moved without a reflog line (reflog ends at {last}, ref at {tip})",
                    self.refname()
                ),
            );
            return Ok(true);
        }
        Ok(false)
    }
}

/// Commits handed from the walker to a worker: (number from the tip, id, where its bytes are
/// in `data`). One buffer per batch rather than one per commit: a commit's buffer was
/// allocated by the walker and freed by a worker, on another thread's arena, once per entry.
struct Batch {
    items: Vec<(usize, ObjectId, std::ops::Range<usize>)>,
    data: Vec<u8>,
}

impl Batch {
    fn with_capacity(n: usize) -> Batch {
        Batch {
            items: Vec::with_capacity(n),
            data: Vec::with_capacity(n * 640),
        }
    }

    fn push(&mut self, i: usize, id: ObjectId, bytes: &[u8]) {
        let start = self.data.len();
        self.data.extend_from_slice(bytes);
        self.items.push((i, id, start..self.data.len()));
    }
}

/// Pass 1's result: the records root first, where the walk stopped early (if it did), the
/// reflog commits it met, and whether it stopped at the tip of the records already held.
type Walked = (Vec<Rec>, Option<WalkFailure>, HashSet<ObjectId>, bool);
