//! Forum's on-disk ledger format: a directory with `entries.jsonl` and `payloads.jsonl`
//! (forum-spec §5). Reading follows Forum's rules, torn trailing line included; writing avoids
//! the defects listed in §5.3 (line separators inside strings are escaped, files are written
//! whole to temporary names and renamed, nothing is written over an existing ledger).

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::ledger::canonical::{self, Value};
use crate::ledger::{Entry, hash};

/// A Forum ledger read from disk.
#[derive(Debug, Default)]
pub struct ForumLedger {
    pub entries: Vec<Entry>,
    /// Bodies by payload hash (first row wins, as in Forum).
    pub payloads: HashMap<String, Value>,
    /// Files whose unparseable last line was dropped (a torn final append).
    pub torn: Vec<PathBuf>,
}

/// Errors reading or writing a Forum directory.
#[derive(Debug, thiserror::Error)]
pub enum ForumDirError {
    #[error("{0}")]
    Corrupt(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
}

/// Python's `str.splitlines()` (forum-spec §5.2).
pub fn splitlines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let is_break = matches!(
            c,
            '\n' | '\r'
                | '\u{b}'
                | '\u{c}'
                | '\u{1c}'
                | '\u{1d}'
                | '\u{1e}'
                | '\u{85}'
                | '\u{2028}'
                | '\u{2029}'
        );
        if is_break {
            out.push(&text[start..i]);
            let mut end = i + c.len_utf8();
            if c == '\r'
                && let Some((_, '\n')) = chars.peek()
            {
                chars.next();
                end += 1;
            }
            start = end;
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// Reads the rows of one JSONL file under Forum's torn-line rules. Returns the rows and whether
/// a torn last line was dropped.
fn read_rows(path: &Path) -> Result<(Vec<Value>, bool), ForumDirError> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), false)),
        Err(e) => {
            return Err(ForumDirError::Io {
                context: format!("reading {}", path.display()),
                source: e,
            });
        }
    };
    // A crash can cut a multi-byte character; only the last line may be torn.
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let bytes = e.into_bytes();
            let tail_has_newline = bytes[valid..].contains(&b'\n');
            if tail_has_newline {
                return Err(ForumDirError::Corrupt(format!(
                    "{}: invalid UTF-8 at byte {valid}",
                    path.display()
                )));
            }
            String::from_utf8(bytes[..valid].to_vec()).expect("prefix is valid")
        }
    };
    let lines = splitlines(&text);
    let last = lines.len().saturating_sub(1);
    let mut rows = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        if line.is_empty() {
            if i == last {
                continue;
            }
            return Err(ForumDirError::Corrupt(format!(
                "{}: blank line at row {i}",
                path.display()
            )));
        }
        match canonical::parse(line) {
            Ok(v) => rows.push(v),
            Err(_) if i == last => return Ok((rows, true)),
            Err(e) => {
                return Err(ForumDirError::Corrupt(format!(
                    "{}: corrupt line at row {i} ({e}); only a torn last line can be dropped",
                    path.display()
                )));
            }
        }
    }
    Ok((rows, false))
}

/// Reads a Forum ledger directory. A missing directory is an error (Forum would create it).
pub fn read(dir: &Path) -> Result<ForumLedger, ForumDirError> {
    if !dir.is_dir() {
        return Err(ForumDirError::Invalid(format!(
            "{} is not a directory holding a Forum ledger",
            dir.display()
        )));
    }
    let entries_path = dir.join("entries.jsonl");
    if !entries_path.is_file() {
        return Err(ForumDirError::Invalid(format!(
            "{} has no entries.jsonl: not a Forum ledger",
            dir.display()
        )));
    }
    let payloads_path = dir.join("payloads.jsonl");
    let mut out = ForumLedger::default();
    let (rows, torn) = read_rows(&entries_path)?;
    if torn {
        out.torn.push(entries_path.clone());
    }
    for (i, row) in rows.iter().enumerate() {
        let e = Entry::from_value(row).map_err(|why| {
            ForumDirError::Corrupt(format!("{}: row {i}: {why}", entries_path.display()))
        })?;
        out.entries.push(e);
    }
    let (rows, torn) = read_rows(&payloads_path)?;
    if torn {
        out.torn.push(payloads_path.clone());
    }
    for (i, row) in rows.into_iter().enumerate() {
        let (Some(h), Some(body)) = (row.get("hash"), row.get("body")) else {
            return Err(ForumDirError::Corrupt(format!(
                "{}: row {i} lacks \"hash\" or \"body\"",
                payloads_path.display()
            )));
        };
        let Some(h) = h.as_str() else {
            return Err(ForumDirError::Corrupt(format!(
                "{}: row {i}: \"hash\" is not a string",
                payloads_path.display()
            )));
        };
        out.payloads
            .entry(h.to_string())
            .or_insert_with(|| body.clone());
    }
    Ok(out)
}

/// Writes `entries` and their bodies in Forum's format into `dir`, which must be empty or absent.
/// `body` returns the body of a payload hash, `None` when absent (redacted).
pub fn write<F>(
    dir: &Path,
    entries: &[Entry],
    mut body: F,
    durable: bool,
) -> Result<(), ForumDirError>
where
    F: FnMut(&Entry) -> Result<Option<Value>, ForumDirError>,
{
    if dir.exists() {
        let non_empty = fs::read_dir(dir)
            .map_err(|e| ForumDirError::Io {
                context: format!("reading {}", dir.display()),
                source: e,
            })?
            .next()
            .is_some();
        if non_empty {
            return Err(ForumDirError::Invalid(format!(
                "{} is not empty; export into a new or empty directory so nothing is overwritten",
                dir.display()
            )));
        }
    }
    fs::create_dir_all(dir).map_err(|e| ForumDirError::Io {
        context: format!("creating {}", dir.display()),
        source: e,
    })?;
    let mut entries_text = String::new();
    let mut payloads_text = String::new();
    let mut seen = std::collections::HashSet::new();
    for e in entries {
        if seen.insert(e.payload_hash.clone())
            && let Some(b) = body(e)?
        {
            let row = Value::Object(vec![
                ("hash".into(), Value::str(&e.payload_hash)),
                ("body".into(), b),
            ]);
            payloads_text.push_str(&row.python_dumps());
            payloads_text.push('\n');
        }
        entries_text.push_str(&e.to_value().python_dumps());
        entries_text.push('\n');
    }
    // Bodies first, as Forum orders its writes.
    write_file(
        &dir.join("payloads.jsonl"),
        payloads_text.as_bytes(),
        durable,
    )?;
    write_file(&dir.join("entries.jsonl"), entries_text.as_bytes(), durable)?;
    if durable && let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn write_file(path: &Path, bytes: &[u8], durable: bool) -> Result<(), ForumDirError> {
    let tmp = path.with_extension("jsonl.tmp");
    let ioe = |e| ForumDirError::Io {
        context: format!("writing {}", tmp.display()),
        source: e,
    };
    let mut f = fs::File::create(&tmp).map_err(ioe)?;
    f.write_all(bytes).map_err(ioe)?;
    if durable {
        f.sync_all().map_err(ioe)?;
    }
    fs::rename(&tmp, path).map_err(|e| ForumDirError::Io {
        context: format!("renaming {}", tmp.display()),
        source: e,
    })
}

/// Checks a body against its payload hash; returns the canonical bytes.
pub fn checked_body(e: &Entry, body: &Value) -> Result<String, String> {
    let c = body.canonical();
    if hash::sha256_hex(c.as_bytes()) != e.payload_hash {
        return Err(format!(
            "the body stored for seq {} does not hash to its payload_hash",
            e.seq
        ));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitlines_matches_python() {
        assert_eq!(
            splitlines("a\nb\r\nc\rd\u{2028}e\u{85}f\n"),
            vec!["a", "b", "c", "d", "e", "f"]
        );
        assert_eq!(splitlines("a\n\nb"), vec!["a", "", "b"]);
        assert_eq!(splitlines(""), Vec::<&str>::new());
    }
}
