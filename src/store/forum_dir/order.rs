//! Forum's key order, kept beside an imported ledger so that `export` writes `payloads.jsonl`
//! back byte for byte.
//!
//! The ledger stores each body as canonical JSON (sorted keys, no spaces, ASCII): that is what
//! is hashed and what every reader checks. Forum writes its rows with `json.dumps` in the order
//! its code built each body, so an export from the canonical bodies alone sorts the keys. An
//! import therefore keeps, for each body whose keys Forum did not write sorted, Forum's row
//! (`{"hash": ..., "body": ...}` as `json.dumps(row, ensure_ascii=False)` writes it) in one blob,
//! `payloads.jsonl`, committed without parent on `refs/forum/rows/LEDGER`. A body already in
//! sorted order costs nothing. The ref is local: it does not travel with push or fetch, so an
//! export elsewhere writes sorted keys, which Forum reads the same.
//!
//! Nothing kept can change what an export says: a kept body is written only where the ledger
//! holds a body and the kept one is canonically that body (same bytes hashed), so only the key
//! order can differ. Redaction drops the redacted body's row. This module holds what knows no
//! repository; `store::forum_rows` reads and writes the ref.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::ledger::canonical::Value;
use crate::store::error::{StoreError, io};

/// Where an imported ledger's Forum rows are kept.
pub(crate) fn rows_ref(ledger: &str) -> String {
    format!("refs/forum/rows/{ledger}")
}

/// The file name of the kept rows in the ref's tree.
pub(crate) const ROWS_FILE: &str = "payloads.jsonl";

/// Whether every object in `v` has its keys in sorted order (the order canonical JSON, and so
/// an export without a kept row, writes them).
pub(crate) fn keys_sorted(v: &Value) -> bool {
    match v {
        Value::Object(members) => {
            members.windows(2).all(|w| w[0].0 < w[1].0)
                && members.iter().all(|(_, m)| keys_sorted(m))
        }
        Value::Array(items) => items.iter().all(keys_sorted),
        _ => true,
    }
}

/// A Forum row, as Forum writes it: `{"hash": HASH, "body": BODY}` with `body_dumps` being
/// `json.dumps(body, ensure_ascii=False)`.
pub(crate) fn row_line(hash: &str, body_dumps: &str) -> String {
    format!("{{\"hash\": \"{hash}\", \"body\": {body_dumps}}}")
}

/// The rows an import keeps, streamed to a temporary file beside the pack it writes (an import
/// may be larger than memory), committed by [`KeptRows::finish`] or removed when dropped.
pub(crate) struct KeptRows {
    dir: PathBuf,
    file: Option<(PathBuf, std::io::BufWriter<fs::File>)>,
}

impl KeptRows {
    /// Rows kept in a temporary file under `dir` (created on the first row).
    pub(crate) fn new(dir: &Path) -> KeptRows {
        KeptRows {
            dir: dir.to_path_buf(),
            file: None,
        }
    }

    /// Keeps the row of `hash` whose body Forum wrote as `body_dumps`.
    pub(crate) fn keep(&mut self, hash: &str, body_dumps: &str) -> Result<(), StoreError> {
        if self.file.is_none() {
            static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let path = self.dir.join(format!(
                "forum_tmp_rows_{}_{}",
                std::process::id(),
                NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ));
            let f = fs::File::create(&path).map_err(io("keeping Forum's rows"))?;
            self.file = Some((path, std::io::BufWriter::new(f)));
        }
        let (_, w) = self.file.as_mut().expect("just opened");
        writeln!(w, "{}", row_line(hash, body_dumps)).map_err(io("keeping Forum's rows"))
    }

    /// Hands the file of kept rows, if any, to `commit`, then removes it.
    pub(crate) fn finish(
        mut self,
        commit: impl FnOnce(&Path) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let Some((path, w)) = self.file.take() else {
            return Ok(());
        };
        let done = w
            .into_inner()
            .map_err(|e| io("keeping Forum's rows")(e.into_error()))
            .and_then(|_| commit(&path));
        let _ = fs::remove_file(&path);
        done
    }
}

impl Drop for KeptRows {
    fn drop(&mut self) {
        if let Some((path, _)) = self.file.take() {
            let _ = fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::canonical;

    #[test]
    fn sorted_keys_are_seen_at_every_depth() {
        let p = |s: &str| canonical::parse(s).unwrap();
        assert!(keys_sorted(&p(
            r#"{"a": 1, "b": {"c": [{"d": 1, "e": 2}]}}"#
        )));
        assert!(!keys_sorted(&p(r#"{"b": 1, "a": 2}"#)));
        assert!(!keys_sorted(&p(r#"{"a": [{"e": 1, "d": 2}]}"#)));
        assert!(keys_sorted(&p("[1, \"x\", null]")));
    }

    #[test]
    fn a_row_is_written_as_forum_writes_it() {
        let body = canonical::parse(r#"{"id": "T3", "to": "m", "reason": "r"}"#).unwrap();
        assert_eq!(
            row_line("ab", &body.python_dumps()),
            r#"{"hash": "ab", "body": {"id": "T3", "to": "m", "reason": "r"}}"#
        );
    }
}
