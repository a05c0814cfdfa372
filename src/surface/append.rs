//! Appending one entry as a surface operation: `git forum append`, `POST /append` and MCP
//! `ledger_append` validate the entry the same way and answer the same report.

use serde::Serialize;

use super::{Error, Report, Result};
use crate::ledger::NewEntry;
use crate::store::git::{Appended, GitStore};

/// The entry written: its seq, entry hash and commit. `replayed` (written only when true) says
/// an idempotent retry found the entry its key wrote before and wrote nothing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AppendReport {
    pub seq: u64,
    pub entry_hash: String,
    pub commit: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub replayed: bool,
}

impl Report for AppendReport {
    const SCHEMA: &'static str = "git-forum.append/1";
}

impl AppendReport {
    /// The report of an entry just written.
    pub fn of(done: &Appended) -> AppendReport {
        AppendReport {
            seq: done.entry.seq,
            entry_hash: done.entry.entry_hash.clone(),
            commit: done.commit.to_string(),
            replayed: false,
        }
    }
}

/// Checks `new` (a bad actor, kind, parent or payload is the caller's to fix), then appends it.
pub fn append(store: &mut GitStore, new: &NewEntry) -> Result<AppendReport> {
    new.validate().map_err(Error::usage)?;
    Ok(AppendReport::of(&store.append_entry(new)?))
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
