//! Being a witness: `git forum witness FILE` and `POST /witness` both come here.
//!
//! The witness keeps, per log origin, the last note it accepted (`DIR/<origin>.note`). Given an
//! offer (a consistency proof from that size, as `prove --consistency-from M --tlog` prints,
//! or on first contact a bare signed note) it applies the pure rule
//! [`crate::store::note::witness_decide`]: a tree that extends the accepted one is cosigned
//! with a C2SP tlog-cosignature/v1 line ([`crate::store::cosign`]) and becomes the accepted
//! one; anything else is refused, and a refusal that contradicts the accepted tree keeps both
//! notes under `DIR/evidence/`. A refusal is a report too (`ok: false`, with the accepted note),
//! so the asker can tell "prove from size N" from "you showed me another tree".
//!
//! One witness state may be shared by a CLI and a daemon: every decision holds an exclusive
//! `flock` on `DIR/lock` from reading the accepted note to writing the new one.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{Error, Report, Result};
use crate::store::cosign::Cosigner;
use crate::store::note::{self, WitnessDecision};

/// What a witness is given besides the offer.
pub(crate) struct WitnessOptions<'a> {
    /// The witness's own directory.
    pub(crate) state: &'a Path,
    /// The witness's signer key (Go's note format), as text.
    pub(crate) key: &'a str,
    /// The log's note verifier keys.
    pub(crate) log_keys: &'a [String],
    /// The time of the cosignature, POSIX seconds (the caller reads the clock).
    pub(crate) now: u64,
}

/// The witness's answer.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct WitnessReport {
    /// [`Report::SCHEMA`].
    pub(crate) schema: &'static str,
    /// Whether the offer was cosigned.
    pub(crate) ok: bool,
    pub(crate) origin: Option<String>,
    pub(crate) size: Option<u64>,
    /// The offered note with the witness's cosignature line added.
    pub(crate) cosigned: Option<String>,
    /// The cosignature line alone.
    pub(crate) cosignature: Option<String>,
    /// The cosigner's verifier key (type 0x04), so an asker can pin it.
    pub(crate) witness_key: String,
    /// Why the offer was refused.
    pub(crate) problem: Option<String>,
    /// Whether the refusal contradicts the accepted tree (a rewritten ledger or a split view).
    pub(crate) conflict: bool,
    /// The note the witness last accepted for this origin, if any.
    pub(crate) accepted: Option<String>,
    /// Where both notes were kept, for a conflict.
    pub(crate) evidence: Option<String>,
}

impl Report for WitnessReport {
    const SCHEMA: &'static str = "git-forum.witness/1";
}

/// A file name for an origin: readable, and unique through a hash of the whole origin.
pub(crate) fn origin_file(origin: &str) -> String {
    use sha2::Digest;
    let h = sha2::Sha256::digest(origin.as_bytes());
    let hex: String = h[..8].iter().map(|b| format!("{b:02x}")).collect();
    let safe: String = origin
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    format!("{safe}-{hex}")
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp-git-forum");
    std::fs::write(&tmp, bytes)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| Error::internal(format!("writing {}: {e}", path.display())))
}

/// The origin an offer names (the first line of its new note).
fn offer_origin(offer: &str) -> Option<String> {
    let body = if offer.starts_with(note::CONSISTENCY_HEADER) {
        note::parse_consistency(offer).map(|p| p.new_note).ok()?
    } else {
        offer
    };
    body.lines()
        .next()
        .filter(|l| !l.is_empty())
        .map(String::from)
}

/// Decides on `offer` under an exclusive lock of the state directory; cosigns or refuses.
pub(crate) fn witness(opts: &WitnessOptions<'_>, offer: &str) -> Result<WitnessReport> {
    let cosigner = Cosigner::from_note_key(opts.key).map_err(Error::usage)?;
    if opts.log_keys.is_empty() {
        return Err(Error::usage(
            "the witness has no log verifier key: pass --note-verifier KEY or set forum.noteVerifiers",
        ));
    }
    let keys = note::verifiers(opts.log_keys).map_err(Error::usage)?;
    let mut report = WitnessReport {
        schema: <WitnessReport as Report>::SCHEMA,
        ok: false,
        origin: None,
        size: None,
        cosigned: None,
        cosignature: None,
        witness_key: cosigner.vkey(),
        problem: None,
        conflict: false,
        accepted: None,
        evidence: None,
    };
    let Some(origin) = offer_origin(offer) else {
        report.problem = Some("the offer is neither a signed note nor a consistency proof".into());
        return Ok(report);
    };
    report.origin = Some(origin.clone());
    std::fs::create_dir_all(opts.state)
        .map_err(|e| Error::internal(format!("cannot create {}: {e}", opts.state.display())))?;
    let _lock = lock(opts.state)?;
    let state = opts.state.join(format!("{}.note", origin_file(&origin)));
    let accepted = match std::fs::read_to_string(&state) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::internal(format!("reading {}: {e}", state.display()))),
    };
    report.accepted = accepted.clone();
    match note::witness_decide(accepted.as_deref(), offer, &keys) {
        WitnessDecision::Cosign {
            note: n,
            checkpoint,
        } => {
            let cosigned = cosigner.cosign(&n, opts.now).map_err(Error::usage)?;
            write_atomic(&state, n.as_bytes())?;
            report.ok = true;
            report.size = Some(checkpoint.size);
            report.cosignature = cosigned.lines().last().map(|l| format!("{l}\n"));
            report.cosigned = Some(cosigned);
            report.accepted = Some(n);
        }
        WitnessDecision::Refuse { why, conflict } => {
            report.conflict = conflict;
            if conflict {
                let dir = opts.state.join("evidence");
                std::fs::create_dir_all(&dir).map_err(|e| {
                    Error::internal(format!("cannot create {}: {e}", dir.display()))
                })?;
                let n = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
                let file = dir.join(format!("{}-{n}.txt", origin_file(&origin)));
                let text = format!(
                    "witness refusal: {why}\n\naccepted note:\n{}\noffer:\n{offer}",
                    accepted.as_deref().unwrap_or("(none)\n")
                );
                write_atomic(&file, text.as_bytes())?;
                report.evidence = Some(file.display().to_string());
            }
            report.problem = Some(why);
        }
    }
    Ok(report)
}

/// The one line a refusal is told in.
pub(crate) fn refusal_line(r: &WitnessReport) -> String {
    let evidence = r
        .evidence
        .as_ref()
        .map(|f| format!(" (both notes kept in {f})"))
        .unwrap_or_default();
    format!(
        "witness refuses to cosign: {}{evidence}",
        r.problem.as_deref().unwrap_or("unknown reason")
    )
}

/// Holds an exclusive lock on `DIR/lock` while it lives (the lock goes with the file).
struct StateLock {
    _held: std::fs::File,
}

fn lock(dir: &Path) -> Result<StateLock> {
    let path: PathBuf = dir.join("lock");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::internal(format!("cannot open {}: {e}", path.display())))?;
    rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| Error::internal(format!("cannot lock {}: {e}", path.display())))?;
    Ok(StateLock { _held: f })
}

/// The current time in POSIX seconds, for a cosignature.
pub(crate) fn now_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
