//! Judging a walked chain: its checkpoints (recorded, signed and noted) against the roots the
//! walk computed, and the ref's reflog against the chain.

use super::*;

impl GitStore {
    /// Pass 2 and the witnesses: the chain root first, then the reflog and recorded
    /// checkpoints, then (deep) the bodies. With `prior` (the state after the records a
    /// verify that passed checked, the first of `recs`), only the records after those are
    /// checked, when `prior` holds every root the checkpoints now name; the witnesses are
    /// checked whole either way. `ahead` holds the roots of Forum's tree's chunks hashed
    /// during the walk (empty when there are none, see [`roots::Ahead`]). Returns the report
    /// and, when it passed, the state after every record.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn judge(
        &self,
        (recs, ahead): (&[Rec], &[Option<[u8; 32]>]),
        walk_failure: Option<WalkFailure>,
        tip: ObjectId,
        deep: bool,
        witness: &ReflogWitness<'_>,
        mut report: LedgerVerifyReport,
        prior: Option<Judged>,
    ) -> Result<(LedgerVerifyReport, Option<Judged>), StoreError> {
        let recorded = self.recorded_checkpoints();
        let signed = self.signed_checkpoints_and_notes()?;
        let wanted = checkpoint_sizes(&recorded, &signed);
        // Only a signed note names a standard root: without one, the tree is not built.
        let want_std = signed.iter().any(|s| s.signature.format == "note");
        let prior =
            prior.filter(|p| walk_failure.is_none() && p.covers(recs.len(), &wanted, want_std));
        // Where this pass starts: after the records `prior` checked.
        let start = prior.as_ref().map_or(0, |p| p.len);
        let ChainStart {
            mut checker,
            mut std_acc,
            mut std_roots,
            mut redacted,
            prior_tree,
        } = chain_start(prior);
        let mut chain_problem: Option<Problem> = walk_failure.map(|f| f.problem(recs));
        // How many entries, from the root, count towards the checkpoint reported.
        let mut upto = start;
        if chain_problem.is_none() {
            let std = want_std.then_some((&mut std_acc, &mut std_roots));
            let (problem, to) = check_links(recs, start, &mut checker, &wanted, std, &mut redacted);
            chain_problem = problem;
            upto = to;
        }
        // The sizes checkpoints name matter only when the chain holds.
        let no_sizes = HashSet::new();
        let sizes = if chain_problem.is_none() {
            &wanted
        } else {
            &no_sizes
        };
        let (checkpoint, prefix_roots, acc, prior_bodies) =
            forum_tree((recs, ahead), start..upto, sizes, prior_tree);
        report.entries = recs.len() as u64;
        report.checkpoint = checkpoint;
        report.chain = chain_problem.is_none();
        if let Some((seq, code, msg)) = chain_problem {
            report.fail(Some(seq), code, msg);
            return Ok((report, None));
        }
        let checkpoints = Checkpoints {
            recorded: &recorded,
            signed: &signed,
            prefix_roots: &prefix_roots,
            std_roots: &std_roots,
        };
        if self.check_witnesses(&checkpoints, witness, tip, recs.len() as u64, &mut report)? {
            return Ok((report, None));
        }
        if deep {
            // The bodies `prior` found redacted were checked then.
            report.redacted = prior_bodies;
            self.check_bodies(recs, start, &redacted, &mut report)?;
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

    /// The witnesses against a chain of `len` entries that holds: the recorded checkpoints,
    /// then each signed one, then the reflog; a note when there is neither reflog nor recorded
    /// checkpoint. Returns true when one found a problem (recorded in `report`).
    fn check_witnesses(
        &self,
        c: &Checkpoints<'_>,
        witness: &ReflogWitness<'_>,
        tip: ObjectId,
        len: u64,
        report: &mut LedgerVerifyReport,
    ) -> Result<bool, StoreError> {
        if check_recorded(c.recorded, c.prefix_roots, len, report) {
            return Ok(true);
        }
        for s in c.signed {
            if self.check_signed(s, c.prefix_roots, c.std_roots, len, report) {
                return Ok(true);
            }
        }
        if self.check_reflog(witness, tip, len, report)? {
            return Ok(true);
        }
        if report.reflog_lines == 0 && c.recorded.is_empty() {
            report.notes.push(
                "no reflog and no recorded checkpoint: a cleanly truncated tail cannot be detected (as in Forum); record one with `git forum checkpoint`".into(),
            );
        }
        Ok(false)
    }

    /// Checks one signed checkpoint (or note) `s`: its signature, the ledger it names, and
    /// the roots it signs against the chain of `len` entries (`prefix_roots`, and the standard
    /// tree's `std_roots`). Returns true when it found a problem; else records the signer.
    fn check_signed(
        &self,
        s: &crate::store::sign::StoredSignature,
        prefix_roots: &[(u64, String)],
        std_roots: &[(u64, crate::ledger::tlog::Hash)],
        len: u64,
        report: &mut LedgerVerifyReport,
    ) -> bool {
        let (size, root) = (s.checkpoint.size, &s.checkpoint.root);
        let signer = match self.check_signature(s) {
            SignatureCheck::Good(who) => who,
            SignatureCheck::Bad(why) => {
                report.fail(
                    Some(size.saturating_sub(1).min(len)),
                    Code::BadSignature,
                    format!("the signed checkpoint at size {size} (root {root}) is not trustworthy: {why}"),
                );
                return true;
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
            return true;
        }
        if size > len {
            report.fail(
                Some(len),
                Code::Truncated,
                format!(
                    "the ledger has {len} entries but {signer} signed a checkpoint at {size} entries (root {root}): entries were removed from the tail"
                ),
            );
            return true;
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
            return true;
        }
        if let Some(msg) = note_root_mismatch(s, std_roots, &signer) {
            report.fail(Some(size.saturating_sub(1)), Code::Rewritten, msg);
            return true;
        }
        report.signatures.push((size, root.clone(), signer));
        false
    }

    /// The deep checks of the records from `start` on: every body present and whole, or
    /// absent under a redaction entry (`redacted`), and every change entry's commits.
    fn check_bodies(
        &self,
        recs: &[Rec],
        start: usize,
        redacted: &HashSet<[u8; 32]>,
        report: &mut LedgerVerifyReport,
    ) -> Result<(), StoreError> {
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
        Ok(())
    }

    /// Checks the ref's reflog against the chain. Returns true when it found a problem.
    pub(super) fn check_reflog(
        &self,
        witness: &ReflogWitness<'_>,
        tip: ObjectId,
        len: u64,
        report: &mut LedgerVerifyReport,
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
            let (code, msg) = reflog_problem(seen, id, len);
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

/// What a reflog line naming commit `id` (of seq `seen`, when it reads) that the chain of `len`
/// entries does not contain says: the ref was rewound, or rewritten.
fn reflog_problem(seen: Option<u64>, id: ObjectId, len: u64) -> (Code, String) {
    match seen {
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
    }
}

/// Checks the checkpoints recorded locally against the chain of `len` entries (whose roots at
/// the sizes they name are `prefix_roots`). Returns true when it found a problem.
fn check_recorded(
    recorded: &[(u64, String)],
    prefix_roots: &[(u64, String)],
    len: u64,
    report: &mut LedgerVerifyReport,
) -> bool {
    for (size, root) in recorded {
        if *size > len {
            report.fail(
                Some(len),
                Code::Truncated,
                format!(
                    "the ledger has {len} entries but a checkpoint was recorded at {size} entries (root {root}): entries were removed from the tail"
                ),
            );
            return true;
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
            return true;
        }
    }
    report.checkpoints_checked = recorded.len();
    false
}

/// When `s` is a signed note whose standard root differs from the chain's at its size
/// (`std_roots`), what that means.
fn note_root_mismatch(
    s: &crate::store::sign::StoredSignature,
    std_roots: &[(u64, crate::ledger::tlog::Hash)],
    signer: &str,
) -> Option<String> {
    let size = s.checkpoint.size;
    if s.signature.format != "note" {
        return None;
    }
    let (text, _) = s.signature.signature.split_once("\n\n")?;
    let cp = super::super::note::parse_checkpoint(&format!("{text}\n")).ok()?;
    let (_, have) = std_roots.iter().find(|(n, _)| *n == size)?;
    (*have != cp.root).then(|| {
        format!(
            "the first {size} entries have standard root {}, not the root {} of the note {signer} signed: history was rewritten or the note lies",
            super::super::note::b64(have),
            super::super::note::b64(&cp.root)
        )
    })
}

/// Checks the links of the records from `start` on, in order, with `checker`, pushing each
/// good entry to the standard tree (`std`: its frontier, and its roots at the `wanted` sizes)
/// when a signed note asked for it, and noting the payloads redaction entries name. Returns
/// the first problem, and how many records from the root count towards the checkpoint.
fn check_links(
    recs: &[Rec],
    start: usize,
    checker: &mut RawChain,
    wanted: &HashSet<u64>,
    mut std: Option<StdTree<'_>>,
    redacted: &mut HashSet<[u8; 32]>,
) -> (Option<Problem>, usize) {
    for (i, r) in recs.iter().enumerate().skip(start) {
        let expected = i as u64;
        let Some(seq) = r.seq() else {
            let (code, msg) = r
                .local()
                .cloned()
                .expect("an unreadable entry carries its problem");
            return (Some((expected, code, msg)), i);
        };
        let next_seq = recs.get(i + 1).and_then(Rec::seq);
        if let Err(p) = checker.push(seq, r, next_seq) {
            let (code, message) = chain_code(&p);
            return (Some((expected, code, message)), i);
        }
        // A commit with a problem of its own is not counted in the checkpoint reported.
        if let Some(local) = r.local() {
            return (Some((seq, local.0, local.1.clone())), i);
        }
        if let Some((acc, roots)) = std.as_mut() {
            acc.push(&r.entry_hash);
            let n = expected + 1;
            if wanted.contains(&n) {
                roots.push((n, acc.root()));
            }
        }
        if let Some(h) = r.extra.as_ref().and_then(|x| x.redacts) {
            redacted.insert(h);
        }
    }
    (None, recs.len().max(start))
}

/// The standard tree being built: its frontier, and its roots at the sizes checkpoints name.
type StdTree<'a> = (
    &'a mut crate::ledger::tlog::Frontier,
    &'a mut Vec<(u64, crate::ledger::tlog::Hash)>,
);

impl Judged {
    /// Whether this state, from a verify that passed, can be resumed for a chain of `len`
    /// records: it is a prefix of them, and it holds every root the checkpoints now name
    /// (`wanted`, standard roots too when a signed note asks, `want_std`).
    fn covers(&self, len: usize, wanted: &HashSet<u64>, want_std: bool) -> bool {
        let forum = |n: u64| self.roots.iter().any(|r| r.0 == n);
        let standard = |n: u64| self.std_roots.iter().any(|r| r.0 == n);
        self.len <= len
            && (!want_std || self.std.is_some())
            && wanted
                .iter()
                .all(|&n| n > self.len as u64 || (forum(n) && (!want_std || standard(n))))
    }
}

impl WalkFailure {
    /// The problem a walk that stopped early reports: the bad commit sits just below the
    /// oldest one read (`recs`).
    fn problem(self, recs: &[Rec]) -> Problem {
        let seq = recs
            .first()
            .and_then(Rec::seq)
            .map(|s| s.saturating_sub(1))
            .or(self.child_seq_hint.map(|s| s.saturating_sub(1)))
            .unwrap_or(0);
        (seq, self.code, self.message)
    }
}

/// Forum's tree over the first `upto` records (`range` is `start..upto`): built whole (with
/// the chunk roots hashed `ahead` during the walk), or from `prior`'s tree (and its roots and
/// redacted bodies) by the records after it, one leaf at a time. Returns its root, its roots
/// at the checkpoint `sizes`, the tree, and `prior`'s redacted bodies.
fn forum_tree(
    (recs, ahead): (&[Rec], &[Option<[u8; 32]>]),
    range: std::ops::Range<usize>,
    sizes: &HashSet<u64>,
    prior: Option<PriorTree>,
) -> ForumTree {
    let (start, upto) = (range.start, range.end);
    match prior {
        None => {
            let (root, prefix, acc) = roots::forum_roots(recs, upto, sizes, threads(), ahead);
            (root, prefix, acc, Vec::new())
        }
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
    }
}

/// What a resumed verify keeps of Forum's tree: the tree, its roots at checkpoint sizes, and
/// the redacted bodies found.
type PriorTree = (Accumulator, Vec<(u64, String)>, Vec<(u64, String)>);

/// Forum's tree as a verify pass leaves it: its root, its roots at checkpoint sizes, the tree,
/// and the redacted bodies a resumed verify found before.
type ForumTree = (String, Vec<(u64, String)>, Accumulator, Vec<(u64, String)>);

type Accumulator = crate::ledger::merkle::Accumulator;

/// The sizes the recorded and the signed checkpoints name.
fn checkpoint_sizes(
    recorded: &[(u64, String)],
    signed: &[crate::store::sign::StoredSignature],
) -> HashSet<u64> {
    recorded
        .iter()
        .map(|(s, _)| *s)
        .chain(signed.iter().map(|s| s.checkpoint.size))
        .collect()
}

/// The checkpoints a chain is judged against, and the roots the chain has at their sizes.
struct Checkpoints<'a> {
    recorded: &'a [(u64, String)],
    signed: &'a [crate::store::sign::StoredSignature],
    prefix_roots: &'a [(u64, String)],
    std_roots: &'a [(u64, crate::ledger::tlog::Hash)],
}

/// Where the chain pass starts: the state `prior` left, or a fresh one.
struct ChainStart {
    checker: RawChain,
    std_acc: crate::ledger::tlog::Frontier,
    std_roots: Vec<(u64, crate::ledger::tlog::Hash)>,
    redacted: HashSet<[u8; 32]>,
    prior_tree: Option<PriorTree>,
}

/// The chain pass's starting state: after the records `prior` checked, or from the root.
fn chain_start(prior: Option<Judged>) -> ChainStart {
    match prior {
        Some(p) => ChainStart {
            checker: p.checker,
            std_acc: p.std.unwrap_or_default(),
            std_roots: p.std_roots,
            redacted: p.redacted,
            prior_tree: Some((p.acc, p.roots, p.redacted_bodies)),
        },
        None => ChainStart {
            // The links are checked here, in order; Forum's Merkle root over the entries that
            // pass is built afterwards, its whole chunks on several threads (roots.rs).
            checker: RawChain::default(),
            // The standard tree (RFC 6962 over raw entry hashes), for the roots notes sign.
            std_acc: crate::ledger::tlog::Frontier::default(),
            std_roots: Vec::new(),
            redacted: HashSet::new(),
            prior_tree: None,
        },
    }
}

/// The links of the chain checked in order on the records' raw hashes, as the ledger's
/// [`crate::ledger::ChainChecker`] checks them in hex (the seq first, then the entry's own hash,
/// then its link), without writing two hashes out in hex per entry: that was four fifths of
/// this pass, which runs on one thread after the walk. Comparing the bytes is comparing their
/// hex, and GENESIS is the hex of 32 zero bytes. Forum's Merkle tree is built apart
/// (roots.rs).
#[derive(Default)]
pub(super) struct RawChain {
    next_seq: u64,
    /// The entry hash of the last record accepted (GENESIS's bytes before the first).
    prev: [u8; 32],
}

impl RawChain {
    /// Checks record `r` (of entry `seq`) as the next one; `next_seq` is the seq of the record
    /// after it, when known, to tell a swap from a deletion.
    pub(super) fn push(
        &mut self,
        seq: u64,
        r: &Rec,
        next_seq: Option<u64>,
    ) -> Result<(), ChainProblem> {
        if seq != self.next_seq {
            return Err(ChainProblem::of_seq(self.next_seq, seq, next_seq));
        }
        if r.edited {
            return Err(ChainProblem::EditedEntry);
        }
        if r.prev_hash != self.prev {
            return Err(ChainProblem::BrokenLink);
        }
        self.prev = r.entry_hash;
        self.next_seq += 1;
        Ok(())
    }
}
