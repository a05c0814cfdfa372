//! `verify`: the ledger checked by the store (chain, commits, witnesses and, deep, bodies) as
//! one [`VerifyReport`], the same value for `git forum verify --json`, `GET /verify` and the
//! MCP `verify` tool.

use serde::Serialize;

use super::{Report, Result};
use crate::ledger::merkle::merkle_root;
use crate::store::git::GitStore;
use crate::store::verify::{Code, Verified};

/// What `verify` found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct VerifyReport {
    /// [`VerifyReport::SCHEMA`].
    pub(crate) schema: &'static str,
    /// The ledger's name.
    pub(crate) ledger: String,
    /// Whether every requested check passed.
    pub(crate) ok: bool,
    /// Whether the chain (seqs, links, entry hashes, commits) holds.
    pub(crate) chain: bool,
    /// Whether every body hashes to its entry (`None` when bodies were not checked).
    pub(crate) deep: Option<bool>,
    /// Entries read.
    pub entries: u64,
    /// The Merkle root over the entries read.
    pub(crate) checkpoint: String,
    /// The seq of the first entry that fails, when one does.
    pub(crate) first_bad_seq: Option<u64>,
    /// What is wrong, one line.
    pub(crate) problem: Option<String>,
    /// The problem's stable code.
    pub(crate) code: Option<Code>,
    /// Entries whose bodies are absent under a redaction entry.
    pub(crate) redacted: Vec<Redacted>,
    /// What the tail was checked against.
    pub(crate) witnesses: Witnesses,
    /// Signed checkpoints that verified.
    pub(crate) signatures: Vec<Signature>,
    /// Notes that are not failures.
    pub(crate) notes: Vec<String>,
}

impl Report for VerifyReport {
    const SCHEMA: &'static str = "git-forum.verify/v1";
}

/// A body removed by a redaction entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Redacted {
    pub(crate) seq: u64,
    pub(crate) payload_hash: String,
}

/// The tail witnesses a verify checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Witnesses {
    /// Lines of the ledger ref's reflog.
    pub(crate) reflog_lines: usize,
    /// Checkpoints recorded by `checkpoint`.
    pub(crate) recorded_checkpoints: usize,
}

/// A signed checkpoint that verified.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Signature {
    pub(crate) size: u64,
    pub(crate) root: String,
    pub(crate) signer: String,
}

impl VerifyReport {
    /// The report of a ledger that does not exist yet: nothing to fail.
    pub(crate) fn empty(ledger: &str, deep: bool) -> VerifyReport {
        VerifyReport {
            schema: Self::SCHEMA,
            ledger: ledger.to_string(),
            ok: true,
            chain: true,
            deep: deep.then_some(true),
            entries: 0,
            checkpoint: merkle_root::<&str>(&[]),
            first_bad_seq: None,
            problem: None,
            code: None,
            redacted: Vec::new(),
            witnesses: Witnesses {
                reflog_lines: 0,
                recorded_checkpoints: 0,
            },
            signatures: Vec::new(),
            notes: Vec::new(),
        }
    }
}

/// Verifies the ledger of `store` (named `ledger`), with every body when `deep`, checking the
/// witness records with these cosignature verifier keys (type 0x04, src/surface/witness.rs). A
/// ledger that does not exist is [`super::Class::NotFound`]; a ledger that does not verify is
/// a report with `ok: false`, not an error.
pub(crate) fn verify_with(
    store: &GitStore,
    ledger: &str,
    deep: bool,
    witness_keys: &[String],
) -> Result<VerifyReport> {
    let r = store.verify(deep)?;
    report_of(store, ledger, deep, witness_keys, r)
}

/// [`verify_with`] for a reader that keeps what the last verify read (the daemon's `GET /verify`):
/// resumed from `prior` when the ledger only grew since, so only the new entries are read
/// ([`GitStore::verify_from`]). Returns the report and what the next call may resume from.
pub(crate) fn verify_resumed(
    store: &GitStore,
    ledger: &str,
    deep: bool,
    prior: Option<Verified>,
) -> Result<(VerifyReport, Option<Verified>)> {
    let (r, kept) = store.verify_from(deep, prior)?;
    let keys = store.witness_verifier_keys();
    Ok((report_of(store, ledger, deep, &keys, r)?, kept))
}

/// The surface's report of the store's verify `r`, with the witness records checked.
fn report_of(
    store: &GitStore,
    ledger: &str,
    deep: bool,
    witness_keys: &[String],
    r: crate::store::verify::VerifyReport,
) -> Result<VerifyReport> {
    let report = VerifyReport {
        schema: VerifyReport::SCHEMA,
        ledger: ledger.to_string(),
        ok: r.passed(),
        chain: r.chain,
        deep: deep.then_some(r.deep_ok == Some(true)),
        entries: r.entries,
        checkpoint: r.checkpoint,
        first_bad_seq: r.first_bad_seq,
        problem: r.problem,
        code: r.code,
        redacted: r
            .redacted
            .into_iter()
            .map(|(seq, payload_hash)| Redacted { seq, payload_hash })
            .collect(),
        witnesses: Witnesses {
            reflog_lines: r.reflog_lines,
            recorded_checkpoints: r.checkpoints_checked,
        },
        signatures: r
            .signatures
            .into_iter()
            .map(|(size, root, signer)| Signature { size, root, signer })
            .collect(),
        notes: r.notes,
    };
    check_records(store, witness_keys, report)
}

/// Adds what the witness records of the ledger (`refs/forum/cosignatures/NAME`) show to a
/// verify report: a recorded split view, two cosigned trees of one size, or a cosignature that
/// does not verify under `witness_keys` fails it (code `split-view` or `bad-signature`).
pub(crate) fn check_records(
    store: &crate::store::git::GitStore,
    witness_keys: &[String],
    mut report: VerifyReport,
) -> Result<VerifyReport> {
    use crate::store::verify::Code;
    let f = store
        .witness_findings(witness_keys)
        .map_err(|e| super::Error::usage(e.to_string()))?;
    if f.cosigned > 0 {
        report.notes.push(if witness_keys.is_empty() {
            format!(
                "witnesses: {} cosigned note(s) recorded, unchecked (no forum.witnessVerifiers)",
                f.cosigned
            )
        } else {
            format!(
                "witnesses: {} cosigned note(s) recorded, {} verified",
                f.cosigned, f.verified
            )
        });
    }
    if let Some(first) = f.problems.first()
        && report.ok
    {
        report.ok = false;
        report.code = Some(if first.contains("split view") {
            Code::SplitView
        } else {
            Code::BadSignature
        });
        report.problem = Some(first.clone());
    }
    Ok(report)
}
