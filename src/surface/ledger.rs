//! Ledger reads and the checkpoint as surface operations: status, checkpoint (and recording
//! one), one entry, and an entry's causal chain, each a typed report the CLI renders and the
//! daemon and the MCP server serialize as they are.
//!
//! Where the daemon's route mirrors Forum's own HTTP API (`GET /status`, `GET /checkpoint`,
//! `GET /ledger/<seq>`), the report keeps Forum's field names, and the CLI's `--json` prints
//! that same shape.

use serde::{Serialize, Serializer};

use super::{Error, Report, Result};
use crate::ledger::merkle::merkle_root;
use crate::ledger::{Entry, causal_chain};
use crate::store::git::GitStore;

/// How many entries the ledger holds and its checkpoint (Forum's `GET /status`, plus the
/// ledger's name).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct StatusReport {
    pub(crate) ledger: String,
    pub(crate) entries: u64,
    /// The Merkle root over every entry hash.
    pub(crate) checkpoint: String,
}

impl Report for StatusReport {
    const SCHEMA: &'static str = "git-forum.status/1";
}

/// The status of the ledger `ledger` of `size` entries whose Merkle root is `root` (as of one
/// read; [`root_of`] computes it, the daemon keeps it up to date as entries arrive).
pub(crate) fn status(ledger: &str, size: u64, root: &str) -> StatusReport {
    StatusReport {
        ledger: ledger.to_string(),
        entries: size,
        checkpoint: root.to_string(),
    }
}

/// The checkpoint of the ledger: its size and Merkle root (Forum's `GET /checkpoint` names the
/// root `checkpoint`), whether it was recorded as a witness, and the signature's format when it
/// was signed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct CheckpointReport {
    pub(crate) ledger: String,
    pub(crate) size: u64,
    /// The Merkle root over the first `size` entry hashes.
    pub(crate) checkpoint: String,
    pub(crate) recorded: bool,
    /// The signature's format (`openpgp`, `ssh`, `x509`) when the checkpoint was signed.
    pub(crate) signed: Option<String>,
}

impl Report for CheckpointReport {
    const SCHEMA: &'static str = "git-forum.checkpoint/1";
}

/// The current checkpoint of the ledger (`size` entries, Merkle root `root`), read only.
pub(crate) fn checkpoint(ledger: &str, size: u64, root: &str) -> CheckpointReport {
    CheckpointReport {
        ledger: ledger.to_string(),
        size,
        checkpoint: root.to_string(),
        recorded: false,
        signed: None,
    }
}

/// What [`record_checkpoint`] does besides checking the ledger.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Record {
    /// Write the checkpoint as a witness later verifies compare against.
    pub(crate) record: bool,
    /// Sign it with the git signing key and store the signature with the ledger.
    pub(crate) sign: bool,
}

/// Verifies the ledger, then signs and/or records its checkpoint. A ledger that does not
/// verify is refused (a conflict: nothing is written); the signature is made before the
/// record, so a signing failure leaves nothing behind.
pub(crate) fn record_checkpoint(
    store: &GitStore,
    ledger: &str,
    what: Record,
) -> Result<CheckpointReport> {
    if !what.record && !what.sign {
        // Only printed: Forum's root from the cache of its tree (O(log n) reads), which checks
        // the entries it reads to continue the chain. Recording or signing verifies first.
        return match super::proof::Cached::open(store)? {
            Some(c) => {
                let cp = c.checkpoint();
                Ok(checkpoint(ledger, cp.size, &cp.root))
            }
            None => Err(Error::not_found(format!(
                "ledger {ledger:?} has no entries yet: append one before asking for a checkpoint"
            ))),
        };
    }
    let r = store.verify(false)?;
    if !r.passed() {
        return Err(Error::conflict(format!(
            "ledger {ledger} does not verify ({}); refusing to record a checkpoint of it",
            r.problem.unwrap_or_default()
        )));
    }
    let signed = if what.sign {
        let cp = crate::ledger::proof::Checkpoint {
            size: r.entries,
            root: r.checkpoint.clone(),
        };
        Some(store.sign_checkpoint(&cp)?.format)
    } else {
        None
    };
    if what.record {
        store.record_checkpoint(r.entries, &r.checkpoint)?;
    }
    Ok(CheckpointReport {
        ledger: ledger.to_string(),
        size: r.entries,
        checkpoint: r.checkpoint,
        recorded: what.record,
        signed,
    })
}

/// One entry, as Forum's `GET /ledger/<seq>` answers it: the entry's own fields, no body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EntryReport {
    pub(crate) entry: Entry,
}

impl Serialize for EntryReport {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.entry.to_json().serialize(s)
    }
}

impl Report for EntryReport {
    const SCHEMA: &'static str = "git-forum.entry/1";
}

/// The entry at `seq` of `entries`, or not found.
pub(crate) fn entry(entries: &[Entry], seq: u64) -> Result<EntryReport> {
    Ok(EntryReport {
        entry: entry_at(entries, seq)?.clone(),
    })
}

/// The causal chain of an entry, root first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct WhyReport {
    pub(crate) seq: u64,
    #[serde(serialize_with = "entries_as_json")]
    pub(crate) chain: Vec<Entry>,
}

impl Report for WhyReport {
    const SCHEMA: &'static str = "git-forum.why/1";
}

/// Follows the causal parents of the entry at `seq` back to a root. A parent that points
/// outside the ledger is a conflict: the ledger's state, not the caller's input, is wrong.
pub(crate) fn why(entries: &[Entry], seq: u64) -> Result<WhyReport> {
    entry_at(entries, seq)?;
    let chain = causal_chain(seq, |s| entries.get(s as usize).cloned())
        .map_err(|e| Error::conflict(e.to_string()))?;
    Ok(WhyReport { seq, chain })
}

/// Every entry of the ledger in a store, oldest first (none when it has no entries yet).
pub(crate) fn read_all(store: &GitStore) -> Result<Vec<Entry>> {
    let mut entries: Vec<Entry> = store.walk_back(None)?.into_iter().map(|(_, e)| e).collect();
    entries.reverse();
    Ok(entries)
}

/// The Merkle root over the entry hashes of `entries`.
pub(crate) fn root_of(entries: &[Entry]) -> String {
    let hashes: Vec<&str> = entries.iter().map(|e| e.entry_hash.as_str()).collect();
    merkle_root(&hashes)
}

fn entry_at(entries: &[Entry], seq: u64) -> Result<&Entry> {
    entries.get(seq as usize).ok_or_else(|| {
        Error::not_found(format!(
            "no entry at seq {seq} (the ledger holds {} entries)",
            entries.len()
        ))
    })
}

fn entries_as_json<S: Serializer>(entries: &[Entry], s: S) -> std::result::Result<S::Ok, S::Error> {
    s.collect_seq(entries.iter().map(Entry::to_json))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain() -> Vec<Entry> {
        let mut out: Vec<Entry> = Vec::new();
        for parent in [None, Some(0i64), Some(1)] {
            let new = crate::ledger::NewEntry {
                actor: "a".into(),
                kind: crate::ledger::kind::NOTE.into(),
                causal_parent: parent,
                payload: crate::ledger::canonical::parse("{}").unwrap(),
                ts: 1.0,
            };
            let next = Entry::next(out.last(), &new, "ab".repeat(32));
            out.push(next);
        }
        out
    }

    #[test]
    fn status_and_checkpoint_name_the_root_as_forum_does() {
        let entries = chain();
        let root = root_of(&entries);
        let st = serde_json::to_value(status("main", 3, &root)).unwrap();
        let cp = serde_json::to_value(checkpoint("main", 3, &root)).unwrap();
        assert_eq!(st["entries"], 3);
        assert_eq!(st["checkpoint"], cp["checkpoint"]);
        assert_eq!(cp["size"], 3);
        assert_eq!(cp["recorded"], false);
        assert!(cp.get("root").is_none());
    }

    #[test]
    fn an_entry_is_forums_entry_dict_and_a_missing_one_is_not_found() {
        let entries = chain();
        let e = serde_json::to_value(entry(&entries, 1).unwrap()).unwrap();
        assert_eq!(e, entries[1].to_json());
        let err = entry(&entries, 9).unwrap_err();
        assert_eq!(err.class, super::super::Class::NotFound);
        assert!(err.message.contains("no entry at seq 9"), "{}", err.message);
    }

    #[test]
    fn why_follows_parents_to_the_root() {
        let entries = chain();
        let w = why(&entries, 2).unwrap();
        let seqs: Vec<u64> = w.chain.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![0, 1, 2]);
        let v = serde_json::to_value(&w).unwrap();
        assert_eq!(v["chain"][0], entries[0].to_json());
    }
}
