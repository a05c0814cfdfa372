//! Appending one entry as a surface operation: `git forum append`, `POST /append` and MCP
//! `ledger_append` validate the entry the same way and answer the same report. The body is
//! scanned for secrets first ([`crate::secrets::Guard`]): redacted (with a `secret_redacted`
//! entry after it), refused, or written as it is, as the policy or `--secrets` says.

use serde::Serialize;

use super::{Error, Report, Result};
use crate::ledger::{NewEntry, kind};
use crate::secrets::{Guard, Screened};
use crate::store::git::{Appended, GitStore};

/// The entry written: its seq, entry hash and commit. `replayed` (written only when true) says
/// an idempotent retry found the entry its key wrote before and wrote nothing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct AppendReport {
    pub(crate) seq: u64,
    pub(crate) entry_hash: String,
    pub(crate) commit: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) replayed: bool,
    /// The `secret_redacted` entry written after it, when secrets were redacted from its body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) secret_redacted: Option<u64>,
}

impl Report for AppendReport {
    const SCHEMA: &'static str = "git-forum.append/1";
}

impl AppendReport {
    /// The report of an entry just written.
    pub(crate) fn of(done: &Appended) -> AppendReport {
        AppendReport {
            seq: done.entry.seq,
            entry_hash: done.entry.entry_hash.clone(),
            commit: done.commit.to_string(),
            replayed: false,
            secret_redacted: None,
        }
    }
}

/// Checks `new` (a bad actor, kind, parent or payload is the caller's to fix), then appends it,
/// its body scanned under the default secrets policy (redact).
pub(crate) fn append(store: &mut GitStore, new: &NewEntry) -> Result<AppendReport> {
    append_guarded(store, new, &Guard::default())
}

/// [`append`] for a caller outside the crate that times it (the ledger bench's concurrent
/// durable appends): the same checks, secret scan and append; the seq written, or the error's
/// one line.
#[doc(hidden)]
pub fn append_checked(store: &mut GitStore, new: &NewEntry) -> std::result::Result<u64, String> {
    append(store, new).map(|r| r.seq).map_err(|e| e.to_string())
}

/// [`append`] under `guard`: a body with secrets is written with markers and followed by a
/// `secret_redacted` entry, or refused (nothing written) when the guard blocks.
pub(crate) fn append_guarded(
    store: &mut GitStore,
    new: &NewEntry,
    guard: &Guard,
) -> Result<AppendReport> {
    new.validate().map_err(Error::usage)?;
    if new.kind == kind::SECRET_REDACTED || new.kind == kind::SECRET_BLOCKED {
        return Ok(AppendReport::of(&store.append_entry(new)?));
    }
    match guard.check(&new.payload) {
        Screened::Clean => Ok(AppendReport::of(&store.append_entry(new)?)),
        Screened::Blocked(hits) => {
            let h = &hits[0];
            Err(Error::usage(format!(
                "the payload carries a secret ({} at {} bytes {}..{}, fingerprint {}{}); remove it, append with --secrets redact to write it as a marker, or accept that one secret with allow_fingerprints = [\"{}\"] under [secrets] in .forum/policy.toml",
                h.rule,
                if h.path.is_empty() { "/" } else { &h.path },
                h.start,
                h.end,
                h.fingerprint,
                if hits.len() > 1 {
                    format!(", and {} more", hits.len() - 1)
                } else {
                    String::new()
                },
                h.fingerprint
            )))
        }
        Screened::Redacted(body, hits) => {
            let clean = NewEntry {
                payload: body,
                ..new.clone()
            };
            clean.validate().map_err(Error::usage)?;
            let done = store.append_entry(&clean)?;
            let note = crate::secrets::redaction_entry(&done.entry, &hits);
            let witness = store.append_entry(&note)?;
            Ok(AppendReport {
                secret_redacted: Some(witness.entry.seq),
                ..AppendReport::of(&done)
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replayed_is_written_only_when_true() {
        let r = AppendReport {
            seq: 3,
            entry_hash: "ab".into(),
            commit: "cd".into(),
            replayed: false,
            secret_redacted: None,
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"seq": 3, "entry_hash": "ab", "commit": "cd"})
        );
        let again = AppendReport {
            replayed: true,
            ..r
        };
        assert_eq!(serde_json::to_value(&again).unwrap()["replayed"], true);
    }
}
