//! `git forum attest --verify`: an envelope checked against the ledger, each claim in turn; the
//! first that does not hold is the one-line error.

use std::path::Path;

use serde_json::Value as J;

use super::{AttestReport, Subject, load, own_name, subjects_of};
use crate::ledger::dsse::{self, Envelope, VerifierKey};
use crate::ledger::merkle_root;
use crate::report::attest::{self as statement, Context, RunRecord, Statement};
use crate::store::git::GitStore;
use crate::surface::{Error, Report, Result};

/// A claim of the attestation that the ledger does not bear out.
fn claim(what: impl Into<String>) -> Error {
    Error::fail(format!("attestation refused: {}", what.into()))
}

/// The verifier keys: `keys` (key texts) when given, else `forum.noteVerifiers`.
fn verifier_keys(store: &GitStore, keys: &[String]) -> Result<(Vec<VerifierKey>, Vec<String>)> {
    let texts = if keys.is_empty() {
        store.note_verifier_keys()
    } else {
        keys.to_vec()
    };
    if texts.is_empty() {
        return Err(Error::usage(
            "no verifier key: pass --key FILE (the .pub file `git forum keygen` wrote) or set forum.noteVerifiers",
        ));
    }
    let parsed = texts
        .iter()
        .map(|t| VerifierKey::from_note_vkey(t).map_err(|e| Error::usage(e.to_string())))
        .collect::<Result<Vec<_>>>()?;
    Ok((parsed, texts))
}

/// What the statement says of its ledger, run and checkpoint.
struct Claims {
    ledger: String,
    run: u64,
    ledger_id: String,
    size: u64,
    root: String,
    note: Option<String>,
    version: String,
}

fn byproduct<'a>(s: &'a Statement, name: &str) -> Option<&'a statement::Resource> {
    s.predicate
        .run_details
        .byproducts
        .iter()
        .find(|r| r.name.as_deref() == Some(name))
}

fn claims(s: &Statement) -> Result<Claims> {
    let bad = |what: &str| claim(format!("the statement has no {what}"));
    let internal = s.predicate.build_definition.internal_parameters.as_ref();
    let ledger = internal
        .and_then(|i| i.get("ledger"))
        .and_then(J::as_str)
        .ok_or_else(|| bad("ledger in its internalParameters"))?;
    let run = internal
        .and_then(|i| i.get("run"))
        .and_then(J::as_u64)
        .ok_or_else(|| bad("run in its internalParameters"))?;
    let sha = |r: &statement::Resource| r.digest.as_ref().and_then(|d| d.get("sha256")).cloned();
    let ledger_id = byproduct(s, "ledger")
        .and_then(sha)
        .ok_or_else(|| bad("ledger byproduct"))?;
    let cp = byproduct(s, "checkpoint").ok_or_else(|| bad("checkpoint byproduct"))?;
    let root = sha(cp).ok_or_else(|| bad("checkpoint root"))?;
    let size = cp
        .annotations
        .as_ref()
        .and_then(|a| a.get("size"))
        .and_then(J::as_u64)
        .ok_or_else(|| bad("checkpoint size"))?;
    let note = match byproduct(s, "checkpoint-note").and_then(|r| r.content.as_ref()) {
        None => None,
        Some(b64) => {
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|_| claim("the checkpoint note is not base64"))?;
            Some(String::from_utf8(bytes).map_err(|_| claim("the checkpoint note is not text"))?)
        }
    };
    let version = s
        .predicate
        .run_details
        .builder
        .version
        .get("git-forum")
        .cloned()
        .ok_or_else(|| bad("git-forum version in its builder"))?;
    Ok(Claims {
        ledger: ledger.to_string(),
        run,
        ledger_id,
        size,
        root,
        note,
        version,
    })
}

/// The checkpoint against the ledger: its size within it, its root Forum's over that many
/// entries, and its note (when there is one) signed by a trusted key over the same tree.
fn check_checkpoint(c: &Claims, hashes: &[String], key_texts: &[String]) -> Result<()> {
    if hashes.first() != Some(&c.ledger_id) {
        return Err(claim(format!(
            "ledger {:?} here is not the ledger attested (its first entry differs)",
            c.ledger
        )));
    }
    let size = usize::try_from(c.size).unwrap_or(usize::MAX);
    if size > hashes.len() {
        return Err(claim(format!(
            "the checkpoint of size {} is larger than the ledger here ({} entries); fetch the ledger again",
            c.size,
            hashes.len()
        )));
    }
    if merkle_root(&hashes[..size]) != c.root {
        return Err(claim(format!(
            "the checkpoint of size {} names a root the ledger does not have",
            c.size
        )));
    }
    if let Some(n) = &c.note {
        let opened = crate::store::note::verifiers(key_texts)
            .and_then(|v| crate::store::note::open(n, &v))
            .map_err(|e| claim(format!("the checkpoint note: {e}")))?;
        let cp = opened.checkpoint;
        if cp.size != c.size || cp.forum_root.as_deref() != Some(c.root.as_str()) {
            return Err(claim(
                "the checkpoint note signs another tree than the checkpoint attested",
            ));
        }
    }
    Ok(())
}

/// Whether every commit from the run's base to `tip` is a change commit of run `run` of
/// `ledger` (by its trailers), and `tip` starts from that base.
fn tip_is_the_runs(dir: &Path, r: &RunRecord, ledger: &str, tip: &str) -> Result<bool> {
    use crate::work::run_diff::{commit_of, contains};
    let work = |e: crate::run::WorkError| Error::internal(e.to_string());
    if commit_of(dir, tip).map_err(work)?.as_deref() != Some(tip) {
        return Ok(false);
    }
    if !contains(dir, &r.base, tip).map_err(work)? {
        return Ok(false);
    }
    let range = format!("{}..{tip}", r.base);
    let format = "--format=%H%x1f%(trailers:key=Forum-Run,valueonly,separator=%x2C)%x1f%(trailers:key=Forum-Ledger,valueonly,separator=%x2C)";
    let out = crate::work::git::run(dir, &["log", format, &range, "--"]).map_err(work)?;
    if !out.ok {
        return Ok(false);
    }
    let run = r.run.to_string();
    let text = out.text();
    let mut any = false;
    for line in text.lines().filter(|l| !l.is_empty()) {
        let f: Vec<&str> = line.split('\u{1f}').collect();
        any = true;
        if f.len() != 3 || f[1] != run || f[2] != ledger {
            return Ok(false);
        }
    }
    Ok(any)
}

/// Each subject a commit of the run: a merged change commit of its task, or the run
/// branch's tip.
fn check_subjects(dir: &Path, r: &RunRecord, ledger: &str, subjects: &[Subject]) -> Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for s in subjects {
        let not_ours = || {
            claim(format!(
                "subject {} ({}) is not a commit run {} shipped",
                s.name, s.commit, r.run
            ))
        };
        if !seen.insert(&s.commit) {
            return Err(claim(format!("subject {} is named twice", s.commit)));
        }
        if let Some(task) = s.name.strip_prefix("change/") {
            let merged = r.merged.iter().any(|(t, c, _)| t == task && *c == s.commit);
            if !merged {
                return Err(not_ours());
            }
        } else if s.name != r.run_branch || !tip_is_the_runs(dir, r, ledger, &s.commit)? {
            return Err(not_ours());
        }
    }
    Ok(())
}

/// Parses the envelope's text.
fn envelope_of(text: &str) -> Result<Envelope> {
    serde_json::from_str(text).map_err(|e| {
        Error::usage(format!(
            "not a DSSE envelope (payload, payloadType, signatures): {e}"
        ))
    })
}

/// `git forum attest --verify`: the envelope `text` checked with the verifier keys `keys`
/// (else `forum.noteVerifiers`) against ledger `ledger` in `store` and the repository at
/// `dir`.
pub(crate) fn verify(
    dir: &Path,
    ledger: &str,
    store: &GitStore,
    text: &str,
    keys: &[String],
) -> Result<AttestReport> {
    let env = envelope_of(text)?;
    let (keys, key_texts) = verifier_keys(store, keys)?;
    let (payload, keyid) = dsse::open(&env, &keys).map_err(|e| claim(e.to_string()))?;
    let given: J = serde_json::from_slice(&payload)
        .map_err(|e| claim(format!("the payload is not JSON: {e}")))?;
    let s: Statement = serde_json::from_value(given.clone()).map_err(|e| {
        claim(format!(
            "the payload is not an in-toto Statement v1 of SLSA Provenance v1: {e}"
        ))
    })?;
    for (what, got, want) in [
        ("_type", &s.statement_type, statement::STATEMENT_TYPE),
        (
            "predicateType",
            &s.predicate_type,
            statement::PREDICATE_TYPE,
        ),
        (
            "buildType",
            &s.predicate.build_definition.build_type,
            statement::BUILD_TYPE,
        ),
    ] {
        if got != want {
            return Err(claim(format!("its {what} is {got:?}, not {want:?}")));
        }
    }
    let c = claims(&s)?;
    if c.ledger != own_name(ledger) {
        return Err(claim(format!(
            "it attests ledger {:?}, not {ledger:?}; pass --ledger",
            c.ledger
        )));
    }
    let (record, hashes) = load(store, ledger, Some(c.run))?;
    check_checkpoint(&c, &hashes, &key_texts)?;
    let subjects = subjects_of(&s);
    check_subjects(dir, &record, &c.ledger, &subjects)?;
    let tip = subjects
        .iter()
        .find(|x| x.name == record.run_branch)
        .map(|x| x.commit.clone());
    let ctx = Context {
        ledger: c.ledger.clone(),
        ledger_id: c.ledger_id.clone(),
        tip,
        size: c.size,
        root: c.root.clone(),
        note: c.note.clone(),
        version: c.version,
    };
    let rebuilt = serde_json::to_value(statement::statement(&record, &ctx))
        .map_err(|e| Error::internal(e.to_string()))?;
    if let Some(path) = statement::first_difference(&given, &rebuilt, "") {
        return Err(claim(format!(
            "its {path} does not match what ledger {} records of run {}",
            c.ledger, c.run
        )));
    }
    Ok(AttestReport {
        schema: AttestReport::SCHEMA,
        mode: "verify",
        ledger: c.ledger,
        run: c.run,
        keyid,
        subjects,
        checkpoint_size: c.size,
        checkpoint_root: c.root,
        signed_note: c.note.is_some(),
        envelope: None,
    })
}
