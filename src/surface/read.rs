//! Entry reads as surface operations: `log` (newest first), `replay` (oldest first, a page at
//! a time) and one entry's body (`show --payload`, `GET /payload/<seq>`, MCP
//! `ledger_payload`). Each is a typed report the CLI prints with `--json` and the daemon and
//! the MCP server answer as they are.

use serde::{Serialize, Serializer};

use super::{Error, Report, Result};
use crate::ledger::{Entry, Value, canonical};
use crate::store::git::GitStore;

/// The most entries one page of a read over the daemon or MCP holds (`/replay`, `/log`); a
/// larger `limit` is cut to this, so one request never builds more than this much JSON.
pub(crate) const MAX_PAGE: usize = 1000;

/// Entries newest first: `git forum log`'s JSON list (one entry dict each, no bodies).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LogReport {
    pub(crate) entries: Vec<Entry>,
}

impl Serialize for LogReport {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_seq(self.entries.iter().map(Entry::to_json))
    }
}

impl Report for LogReport {
    const SCHEMA: &'static str = "git-forum.log/1";
}

/// The newest `limit` entries of the ledger in `store` (all with `None`), newest first.
pub(crate) fn log(store: &GitStore, limit: Option<u64>) -> Result<LogReport> {
    let entries = store
        .walk_back(limit)?
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    Ok(LogReport { entries })
}

/// [`log`] over entries already read (oldest first, as the daemon's cache holds them).
pub(crate) fn log_of(entries: &[Entry], limit: Option<u64>) -> LogReport {
    let n = limit.map_or(entries.len(), |l| {
        entries.len().min(usize::try_from(l).unwrap_or(usize::MAX))
    });
    LogReport {
        entries: entries.iter().rev().take(n).cloned().collect(),
    }
}

/// Entries oldest first, with seq up to the one asked for: Forum's `GET /replay/<seq>` shape
/// `{"entries": [...]}`, plus `next`, the `after` that reads the following page (null on the
/// last).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ReplayReport {
    #[serde(serialize_with = "entries_as_json")]
    pub(crate) entries: Vec<Entry>,
    pub(crate) next: Option<u64>,
}

impl Report for ReplayReport {
    const SCHEMA: &'static str = "git-forum.replay/1";
}

/// The entries of `entries` (oldest first) with seq at most `upto`: at most `limit` of them
/// with a seq above `after`. A `upto` past the tip reads to the tip, as Forum's
/// `replay(until)` does.
pub(crate) fn replay(
    entries: &[Entry],
    upto: u64,
    limit: usize,
    after: Option<u64>,
) -> ReplayReport {
    let end_of_range = entries.len().min(upto.saturating_add(1) as usize);
    let range = &entries[..end_of_range];
    let start = match after {
        None => 0,
        Some(a) => range.partition_point(|e| e.seq <= a),
    };
    let end = range.len().min(start.saturating_add(limit));
    let page = &range[start..end];
    let next = match page.last() {
        Some(last) if end < range.len() => Some(last.seq),
        _ => None,
    };
    ReplayReport {
        entries: page.to_vec(),
        next,
    }
}

/// One entry, its commit and its body (`None` when the body was redacted).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PayloadReport {
    pub(crate) entry: Entry,
    pub(crate) commit: String,
    pub(crate) payload: Option<Value>,
}

impl Serialize for PayloadReport {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("entry", &self.entry.to_json())?;
        m.serialize_entry("commit", &self.commit)?;
        m.serialize_entry("redacted", &self.payload.is_none())?;
        m.serialize_entry(
            "payload",
            &self
                .payload
                .as_ref()
                .map_or(serde_json::Value::Null, Value::to_serde),
        )?;
        m.end()
    }
}

impl Report for PayloadReport {
    const SCHEMA: &'static str = "git-forum.payload/1";
}

impl PayloadReport {
    /// The report as the ledger's own value, when its body holds a NaN or an infinity, which
    /// serde_json has no number for: a transport writes this one's text instead, so the body
    /// read back still hashes to its `payload_hash`.
    pub(crate) fn exact(&self) -> Option<Value> {
        let body = self.payload.as_ref().filter(|p| p.has_non_finite())?;
        let strict = serde_json::to_value(self).ok()?;
        let mut exact = Value::from_serde(&strict);
        exact.set("payload", body.clone());
        Some(exact)
    }
}

/// The entry `entry`, its commit `commit` and the body kept there.
pub(crate) fn payload_of(
    store: &GitStore,
    entry: Entry,
    commit: &gix::ObjectId,
) -> Result<PayloadReport> {
    let payload = body_of(store, commit, entry.seq)?;
    Ok(PayloadReport {
        entry,
        commit: commit.to_string(),
        payload,
    })
}

/// The body kept in the entry commit `commit` (of seq `seq`), parsed; `None` when redacted.
/// A body that is not UTF-8 JSON is a damaged store, not the caller's mistake.
pub(crate) fn body_of(store: &GitStore, commit: &gix::ObjectId, seq: u64) -> Result<Option<Value>> {
    let Some(bytes) = store.body_of_commit(commit)? else {
        return Ok(None);
    };
    let text = String::from_utf8(bytes)
        .map_err(|_| Error::internal(format!("the body of seq {seq} is not UTF-8")))?;
    canonical::parse(&text)
        .map(Some)
        .map_err(|e| Error::internal(format!("the body of seq {seq} is not JSON: {e}")))
}

fn entries_as_json<S: Serializer>(entries: &[Entry], s: S) -> std::result::Result<S::Ok, S::Error> {
    s.collect_seq(entries.iter().map(Entry::to_json))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(n: u64) -> Vec<Entry> {
        (0..n)
            .map(|seq| Entry {
                seq,
                ts: 1.0,
                actor: "a".into(),
                kind: crate::ledger::kind::NOTE.into(),
                causal_parent: None,
                payload_hash: "0".repeat(64),
                prev_hash: "0".repeat(64),
                entry_hash: format!("{seq:064}"),
            })
            .collect()
    }

    fn seqs(es: &[Entry]) -> Vec<u64> {
        es.iter().map(|e| e.seq).collect()
    }

    #[test]
    fn replay_pages_walk_the_range_and_end_with_no_next() {
        let all = entries(7);
        let first = replay(&all, 6, 3, None);
        assert_eq!((seqs(&first.entries), first.next), (vec![0, 1, 2], Some(2)));
        let second = replay(&all, 6, 3, Some(2));
        assert_eq!(
            (seqs(&second.entries), second.next),
            (vec![3, 4, 5], Some(5))
        );
        let last = replay(&all, 6, 3, Some(5));
        assert_eq!((seqs(&last.entries), last.next), (vec![6], None));
        let past = replay(&all, 6, 3, Some(99));
        assert_eq!((seqs(&past.entries), past.next), (vec![], None));
        let upto = replay(&all, 2, MAX_PAGE, None);
        assert_eq!((seqs(&upto.entries), upto.next), (vec![0, 1, 2], None));
        let beyond = replay(&all, 99, MAX_PAGE, None);
        assert_eq!(beyond.entries.len(), 7);
        let v = serde_json::to_value(&upto).unwrap();
        assert_eq!(v["entries"][1], all[1].to_json());
        assert_eq!(v["next"], serde_json::Value::Null);
    }

    #[test]
    fn log_is_newest_first_and_a_list() {
        let all = entries(5);
        let l = log_of(&all, Some(2));
        assert_eq!(seqs(&l.entries), vec![4, 3]);
        assert_eq!(log_of(&all, None).entries.len(), 5);
        assert_eq!(log_of(&all, Some(99)).entries.len(), 5);
        let v = serde_json::to_value(&l).unwrap();
        assert_eq!(v[0], all[4].to_json());
    }

    #[test]
    fn a_payload_report_is_entry_commit_redacted_and_payload() {
        let e = entries(1).remove(0);
        let r = PayloadReport {
            entry: e.clone(),
            commit: "c0".into(),
            payload: None,
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"entry": e.to_json(), "commit": "c0", "redacted": true, "payload": null})
        );
        assert!(r.exact().is_none());
        let nan = PayloadReport {
            payload: Some(canonical::parse(r#"{"x": NaN}"#).unwrap()),
            ..r
        };
        let exact = nan.exact().expect("a NaN needs the exact text");
        assert!(exact.canonical().contains("NaN"), "{}", exact.canonical());
    }
}
