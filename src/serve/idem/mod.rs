//! Idempotent appends: `POST /append` with an `Idempotency-Key` header, or the MCP
//! `ledger_append` tool with an `idempotency_key` argument, writes its entry once however many
//! times it is retried (a client that timed out cannot know whether its append landed).
//!
//! Each key is kept in `.git/forum/idempotency/NAME.jsonl`, one JSON line per step: first the
//! key with what the entry will be (actor, kind, causal parent, payload hash) and the ledger's
//! length before the append, then the same with the seq written. A retry with the same key
//! and the same entry answers the original seq (with `"replayed": true`) and writes nothing; the
//! same key for another entry is a 409. When the server died between the append and its second
//! line, the retry finds the entry by its fields at or after the recorded length, so even then
//! nothing is written twice. Keys are remembered for the life of the ledger.

use std::path::PathBuf;

pub(crate) mod keys;

use keys::{Keys, Record};

use super::dispatch::{Dispatcher, Reply, lock};
use crate::ledger::{NewEntry, payload_hash};
use crate::surface::append::AppendReport;

/// Longest accepted key, in bytes.
pub(super) const MAX_KEY_LEN: usize = 200;

type Res = Result<serde_json::Value, Reply>;

/// The key of a request, from the header or the body field (both: they must agree); checked
/// to be 1 to [`MAX_KEY_LEN`] visible ASCII characters.
pub(crate) fn key_of<'a>(
    header: Option<&'a str>,
    field: Option<&'a str>,
) -> Result<Option<&'a str>, Reply> {
    let key = match (header, field) {
        (Some(h), Some(f)) if h != f => {
            return Err(Reply::from(crate::surface::Error::usage(
                "the Idempotency-Key header and the idempotency_key field differ; give one of them",
            )));
        }
        (Some(h), _) => Some(h),
        (None, f) => f,
    };
    if let Some(k) = key
        && (k.is_empty() || k.len() > MAX_KEY_LEN || !k.bytes().all(|b| b.is_ascii_graphic()))
    {
        return Err(Reply::from(crate::surface::Error::usage(format!(
            "an idempotency key is 1 to {MAX_KEY_LEN} visible ASCII characters without spaces (a UUID, for one)"
        ))));
    }
    Ok(key)
}

/// The append report as the daemon answers it, the same value `git forum append --json` prints.
fn report(r: AppendReport) -> Res {
    serde_json::to_value(&r).map_err(|e| {
        Reply::from(crate::surface::Error::internal(format!(
            "encoding the report: {e}"
        )))
    })
}

fn io_err(e: std::io::Error) -> Reply {
    Reply::from(crate::surface::Error::internal(format!(
        "cannot use the idempotency key file: {e}"
    )))
}

impl Dispatcher {
    fn keys_path(&self) -> PathBuf {
        self.repo
            .to_thread_local()
            .common_dir()
            .join("forum")
            .join("idempotency")
            .join(format!("{}.jsonl", self.cfg.ledger))
    }

    /// Appends `new` once for `key` (see the module's documentation).
    pub(crate) fn append_once(&self, key: &str, new: &NewEntry) -> Res {
        new.validate()
            .map_err(|e| Reply::from(crate::surface::Error::usage(e)))?;
        let fsync = !self.cfg.no_fsync;
        let mut guard = lock(&self.keys);
        if guard.is_none() {
            *guard = Some(Keys::open(self.keys_path()));
        }
        let keys = guard.as_mut().expect("just set");
        keys.refresh().map_err(io_err)?;
        let mut want = Record {
            key: key.to_string(),
            actor: new.actor.clone(),
            kind: new.kind.clone(),
            causal_parent: new.causal_parent,
            payload_hash: payload_hash(&new.payload),
            from: 0,
            seq: None,
        };
        match keys.map.get(key).cloned() {
            Some(had) => {
                if let Some(done) = self.answer_again(keys, key, &had, &want, fsync)? {
                    return report(done);
                }
                // An attempt that was interrupted before its entry was written: write it now.
                want.from = had.from;
            }
            None => {
                want.from = self.snapshot()?.entries.len() as u64;
                keys.write(&want, fsync).map_err(io_err)?;
            }
        }
        let done = self.append_new(new)?;
        let seq = done.entry.seq;
        if let Err(e) = keys.write(
            &Record {
                seq: Some(seq),
                ..want
            },
            fsync,
        ) {
            // The entry is written; a retry still finds it from the first line.
            eprintln!(
                "git forum serve: seq {seq} is written, but recording its idempotency key failed: {e}"
            );
        }
        report(AppendReport::of(&done))
    }

    /// A key used before: for the same entry, the first answer again (its seq recorded if it
    /// was not yet), or none when that attempt stopped before writing the entry; for another
    /// entry, a conflict.
    fn answer_again(
        &self,
        keys: &mut Keys,
        key: &str,
        had: &Record,
        want: &Record,
        fsync: bool,
    ) -> Result<Option<AppendReport>, Reply> {
        if !had.same_entry(want) {
            let what = match had.seq {
                Some(s) => format!(" (seq {s})"),
                None => String::new(),
            };
            return Err(Reply::from(crate::surface::Error::conflict(format!(
                "idempotency key {key:?} was used for another entry{what}; use a new key for a new entry"
            ))));
        }
        let view = self.snapshot()?;
        let found = had.seq.or_else(|| {
            view.entries
                .iter()
                .skip(had.from as usize)
                .find(|e| had.matches(e))
                .map(|e| e.seq)
        });
        let Some(seq) = found else {
            return Ok(None);
        };
        let (Some(e), Some(commit)) = (
            view.entries.get(seq as usize),
            view.commits.get(seq as usize),
        ) else {
            return Err(Reply::from(crate::surface::Error::conflict(format!(
                "idempotency key {key:?} wrote seq {seq}, which the ledger no longer holds (see git forum doctor)"
            ))));
        };
        if had.seq.is_none() {
            keys.write(
                &Record {
                    seq: Some(seq),
                    ..had.clone()
                },
                fsync,
            )
            .map_err(io_err)?;
        }
        Ok(Some(AppendReport {
            seq,
            entry_hash: e.entry_hash.clone(),
            commit: commit.to_string(),
            replayed: true,
            secret_redacted: None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn keys_are_short_visible_ascii_and_one_source() {
        assert_eq!(key_of(None, None).unwrap(), None);
        assert_eq!(key_of(Some("k-1"), None).unwrap(), Some("k-1"));
        assert_eq!(key_of(None, Some("k-1")).unwrap(), Some("k-1"));
        assert_eq!(key_of(Some("k"), Some("k")).unwrap(), Some("k"));
        assert_eq!(key_of(Some("a"), Some("b")).unwrap_err().status, 400);
        let long = "k".repeat(MAX_KEY_LEN + 1);
        for bad in ["", "a b", "é", "a\n", long.as_str()] {
            assert_eq!(key_of(Some(bad), None).unwrap_err().status, 400, "{bad:?}");
        }
    }

    #[test]
    fn the_key_file_is_read_incrementally_and_whole_lines_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("i/main.jsonl");
        let mut k = Keys::open(path.clone());
        k.refresh().unwrap();
        assert!(k.map.is_empty());
        let r = Record {
            key: "a".into(),
            actor: "x".into(),
            kind: crate::ledger::kind::NOTE.into(),
            causal_parent: None,
            payload_hash: "h".into(),
            from: 3,
            seq: None,
        };
        k.write(&r, false).unwrap();
        k.write(
            &Record {
                seq: Some(3),
                ..r.clone()
            },
            false,
        )
        .unwrap();
        assert_eq!(k.map["a"].seq, Some(3));
        // Another writer's half line is left for later.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(br#"{"key":"b","#).unwrap();
        let mut other = Keys::open(path);
        other.refresh().unwrap();
        assert_eq!(other.map.len(), 1);
        assert_eq!(other.map["a"].seq, Some(3));
    }
}
