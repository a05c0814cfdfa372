//! `git forum attest`, once for every transport: a signed in-toto attestation of what a
//! `--work` run shipped, and its check against the ledger.
//!
//! Making one reads the run's record ([`RunRecord`]), the run branch's tip when the repository
//! has it, and the checkpoint to cite: the latest signed note (`checkpoint --note`) when it
//! covers the run, else the whole ledger's Forum root unsigned. The statement
//! ([`crate::report::attest`]) is wrapped in a DSSE envelope signed with the ledger's note key
//! (`--note-key FILE`, else `forum.noteKey`), the key the signed notes use.
//!
//! Checking one needs only the envelope, the verifier key and a copy of the ledger (a fetched
//! one does): the signature over the payload, the statement's shape (only the fields the
//! in-toto and SLSA protos know), then every claim against the ledger: its first entry, the
//! checkpoint's root over its entries, the note's signature and tree, each subject a commit of
//! the run, and at last the whole statement rebuilt from the ledger, field for field. The
//! first claim that does not hold is the error, in one line.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::store::LedgerSpec;
use super::{Error, Report, Result};
use crate::ledger::dsse::{self, Envelope, SignerKey};
use crate::ledger::merkle_root;
use crate::report::attest::{self as statement, Context, RunRecord, Statement};
use crate::store::git::GitStore;
use crate::surface::request::attest::Attest;

/// A subject of the statement.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Subject {
    /// `forum/run-SEQ` (the run branch's tip) or `change/TASK`.
    pub(crate) name: String,
    /// The commit's object id.
    pub(crate) commit: String,
}

/// What `attest` made or checked.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AttestReport {
    pub(crate) schema: &'static str,
    /// `attest` (made and signed) or `verify` (checked).
    pub(crate) mode: &'static str,
    /// The ledger (its own name) and the run (its request seq).
    pub(crate) ledger: String,
    pub(crate) run: u64,
    /// The key that signed (or verified): `NAME+HASH` of its note key.
    pub(crate) keyid: String,
    pub(crate) subjects: Vec<Subject>,
    /// The checkpoint cited: its size and Forum's root.
    pub(crate) checkpoint_size: u64,
    pub(crate) checkpoint_root: String,
    /// Whether the checkpoint's signed note is in the attestation.
    pub(crate) signed_note: bool,
    /// The envelope made (`attest`); `null` when checking.
    pub(crate) envelope: Option<Envelope>,
}

impl Report for AttestReport {
    const SCHEMA: &'static str = "git-forum.attest/1";
}

/// The ledger's own name (`NAME` of `REMOTE:NAME`).
fn own_name(ledger: &str) -> &str {
    match LedgerSpec::parse(ledger) {
        LedgerSpec::Fetched { name, .. } => name,
        LedgerSpec::Local(n) => n,
    }
}

/// The run's slice of a snapshot of `store`, its number (default: the latest `--work` run),
/// and the whole ledger's entry hashes.
fn load(store: &GitStore, ledger: &str, run: Option<u64>) -> Result<(RunRecord, Vec<String>)> {
    let whole = super::reports::snapshot(store, false)?;
    if !whole.verified {
        return Err(Error::fail(format!(
            "ledger {ledger} does not verify (`git forum verify` says where); it cannot be attested"
        )));
    }
    let (run, _) = super::diff::pick_run(ledger, &whole.items, run)?;
    let slice = super::reports::run_slice(&whole, run)
        .ok_or_else(|| Error::not_found(format!("ledger {ledger} has no run {run}")))?;
    let record = RunRecord::from_items(&slice.items, run).map_err(Error::conflict)?;
    let hashes = whole.items.iter().map(|(e, _)| e.entry_hash.clone());
    Ok((record, hashes.collect()))
}

/// The run branch's tip in the repository at `dir` (the remote's branch for a fetched
/// ledger), when it is there and starts from the run's base.
fn tip_of(dir: &Path, ledger: &str, r: &RunRecord) -> Result<Option<String>> {
    let refname = match LedgerSpec::parse(ledger) {
        LedgerSpec::Fetched { remote, .. } => format!("refs/remotes/{remote}/{}", r.run_branch),
        LedgerSpec::Local(_) => format!("refs/heads/{}", r.run_branch),
    };
    let work = |e: crate::run::WorkError| Error::internal(e.to_string());
    let Some(tip) = crate::work::run_diff::commit_of(dir, &refname).map_err(work)? else {
        return Ok(None);
    };
    let from_base = crate::work::run_diff::contains(dir, &r.base, &tip).unwrap_or(false);
    Ok(from_base.then_some(tip))
}

/// The checkpoint to cite: the latest signed note when it covers the run's last entry (its
/// size, Forum's root, the note), else the whole ledger's root, unsigned.
fn checkpoint(
    store: &GitStore,
    ledger: &str,
    r: &RunRecord,
    hashes: &[String],
) -> Result<(u64, String, Option<String>)> {
    // A ledger with notes has its latest checked against its entries (a note of a rewritten
    // or truncated ledger is refused, never cited); one without is cited unsigned.
    if store.has_ref(&store.signatures_ref())? && !store.stored_notes()?.is_empty() {
        let (note, cp, _) = super::tlog::note_for(store, None, ledger)?;
        if let Some(root) = cp.forum_root
            && cp.size > r.last
        {
            return Ok((cp.size, root, Some(note)));
        }
    }
    Ok((hashes.len() as u64, merkle_root(hashes), None))
}

fn subjects_of(s: &Statement) -> Vec<Subject> {
    s.subject
        .iter()
        .map(|r| Subject {
            name: r.name.clone().unwrap_or_default(),
            commit: r
                .digest
                .as_ref()
                .and_then(|d| d.get("gitCommit"))
                .cloned()
                .unwrap_or_default(),
        })
        .collect()
}

/// Reads the signer key file: `key`, else `forum.noteKey`.
fn signer(store: &GitStore, key: Option<PathBuf>) -> Result<SignerKey> {
    let key = key.or_else(|| store.note_key_file()).ok_or_else(|| {
        Error::usage(
            "no signing key: pass --note-key FILE or set forum.noteKey (make one with `git forum keygen NAME`)",
        )
    })?;
    let text = super::tlog::read_key(&key)?;
    SignerKey::from_note_key(&text).map_err(|e| Error::usage(format!("{}: {e}", key.display())))
}

/// `git forum attest [RUN]`: the signed attestation of run `run` (default: the latest
/// `--work` run) of ledger `ledger` in `store`, from the repository at `dir`.
pub(crate) fn attest(
    dir: &Path,
    ledger: &str,
    store: &GitStore,
    run: Option<u64>,
    key: Option<PathBuf>,
) -> Result<AttestReport> {
    let key = signer(store, key)?;
    let (record, hashes) = load(store, ledger, run)?;
    let tip = tip_of(dir, ledger, &record)?;
    if tip.is_none() && record.merged.is_empty() {
        return Err(Error::conflict(format!(
            "run {} merged no change and its branch {} is not here: there is nothing to attest",
            record.run, record.run_branch
        )));
    }
    let (size, root, note) = checkpoint(store, ledger, &record, &hashes)?;
    let ctx = Context {
        ledger: own_name(ledger).to_string(),
        ledger_id: hashes.first().cloned().unwrap_or_default(),
        tip,
        size,
        root,
        note,
        version: env!("CARGO_PKG_VERSION").to_string(),
    };
    let s = statement::statement(&record, &ctx);
    let payload = serde_json::to_vec(&s).map_err(|e| Error::internal(e.to_string()))?;
    let envelope = dsse::sign(&payload, &key);
    Ok(AttestReport {
        schema: AttestReport::SCHEMA,
        mode: "attest",
        ledger: ctx.ledger.clone(),
        run: record.run,
        keyid: key.keyid().to_string(),
        subjects: subjects_of(&s),
        checkpoint_size: ctx.size,
        checkpoint_root: ctx.root.clone(),
        signed_note: ctx.note.is_some(),
        envelope: Some(envelope),
    })
}

/// One request, made or checked: with `envelope`, [`verify`]; else [`attest`].
pub(crate) fn run_request(
    dir: &Path,
    ledger: &str,
    store: &GitStore,
    req: &Attest,
    key: Option<PathBuf>,
) -> Result<AttestReport> {
    use super::request::Request as _;
    req.validate()?;
    match &req.envelope {
        Some(text) => verify(dir, ledger, store, text, &req.keys),
        None => attest(dir, ledger, store, req.run, key),
    }
}

#[path = "attest_verify.rs"]
mod check;
pub(crate) use check::verify;
