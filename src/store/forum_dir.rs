//! Forum's on-disk ledger format: a directory with `entries.jsonl` and `payloads.jsonl`
//! (forum-spec §5). Reading follows Forum's rules, torn trailing line included; writing avoids
//! the defects listed in §5.3 (line separators inside strings are escaped, files are written
//! whole to temporary names and renamed, nothing is written over an existing ledger).

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::capped::{Line, read_line};
use super::spill::{Records, SortedRuns};
use crate::ledger::canonical::{self, Value};
use crate::ledger::{Entry, hash};

/// A Forum ledger read from disk.
#[derive(Debug, Default)]
pub struct ForumLedger {
    pub(crate) entries: Vec<Entry>,
    /// Bodies by payload hash (first row wins, as in Forum).
    pub payloads: HashMap<String, Value>,
    /// Files whose unparseable last line was dropped (a torn final append).
    pub(crate) torn: Vec<PathBuf>,
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
    // Most text breaks only at `\n`: a byte that could start any other break is rare, and
    // without one the split is the plain one. (Three vector searches cost less than one look
    // at each byte.)
    let b = text.as_bytes();
    let other_break = memchr::memchr3(b'\r', 0xc2, 0xe2, b).is_some()
        || memchr::memchr3(0x0b, 0x0c, 0x1c, b).is_some()
        || memchr::memchr2(0x1d, 0x1e, b).is_some();
    if !other_break {
        if text.is_empty() {
            return Vec::new();
        }
        // Split with a byte search: a `str` split on a `char` builds a searcher per call,
        // and an import splits every segment it reads.
        let body = text.strip_suffix('\n').unwrap_or(text);
        let mut out = Vec::new();
        let mut start = 0;
        for i in memchr::memchr_iter(b'\n', body.as_bytes()) {
            out.push(&body[start..i]);
            start = i + 1;
        }
        out.push(&body[start..]);
        return out;
    }
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

/// The longest line read from `entries.jsonl` or `payloads.jsonl`: a payload row holds one body
/// (at most [`crate::ledger::MAX_PAYLOAD_BYTES`] canonical) with room for Forum's spacing and
/// escapes.
pub(crate) const MAX_LINE_BYTES: u64 = 64 << 20;
/// The most bytes read from one Forum directory (both files together) unless the caller allows
/// more.
pub(crate) const DEFAULT_MAX_BYTES: u64 = 4 << 30;

/// How much of a Forum directory is read. Bytes are counted as they are read; file sizes are
/// not trusted (a device, a growing file or `/proc` reports another size than it gives).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// The longest line, in bytes (without its line break).
    pub(crate) line: u64,
    /// The most bytes of both files together.
    pub(crate) total: u64,
    /// How to allow more, for the message (empty when nothing does).
    pub(crate) raise: &'static str,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            line: MAX_LINE_BYTES,
            total: DEFAULT_MAX_BYTES,
            raise: "",
        }
    }
}

/// Opens one file of a Forum directory: `Ok(None)` when absent. Anything but a regular file (a
/// FIFO, a device, a directory, also through a symlink) is refused; the open does not wait for
/// a FIFO's writer.
fn open_plain(path: &Path) -> Result<Option<fs::File>, ForumDirError> {
    use std::os::unix::fs::OpenOptionsExt;
    let ioe = |e| ForumDirError::Io {
        context: format!("reading {}", path.display()),
        source: e,
    };
    let f = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ioe(e)),
    };
    if !f.metadata().map_err(ioe)?.is_file() {
        return Err(ForumDirError::Invalid(format!(
            "{} is not a regular file (a device, a FIFO or a directory); a Forum ledger keeps its rows in plain files",
            path.display()
        )));
    }
    Ok(Some(f))
}

/// Reads the rows of one JSONL file under Forum's torn-line rules, line by line within
/// `limits` (`used` counts the bytes read from the directory so far). Returns the rows and
/// whether a torn last line was dropped.
fn read_rows(
    path: &Path,
    file: fs::File,
    limits: &Limits,
    used: &mut u64,
) -> Result<(Vec<Value>, bool), ForumDirError> {
    let mut rows = Vec::new();
    let torn = scan_rows(path, file, limits, used, |_, _, _, v| {
        rows.push(v);
        Ok::<(), ForumDirError>(())
    })?;
    Ok((rows, torn))
}

/// One logical line: handed to `f` parsed, or (the last) dropped as torn. `Ok(true)` when
/// dropped.
fn take_line<T, E: From<ForumDirError>>(
    path: &Path,
    line: &str,
    at: u64,
    i: usize,
    last: bool,
    parse: &mut impl FnMut(&str) -> Result<T, canonical::ParseError>,
    f: &mut impl FnMut(usize, u64, usize, T) -> Result<(), E>,
) -> Result<bool, E> {
    if line.is_empty() {
        if last {
            return Ok(false);
        }
        return Err(
            ForumDirError::Corrupt(format!("{}: blank line at row {i}", path.display())).into(),
        );
    }
    match parse(line) {
        Ok(v) => f(i, at, line.len(), v).map(|()| false),
        Err(_) if last => Ok(true),
        Err(e) => Err(ForumDirError::Corrupt(format!(
            "{}: corrupt line at row {i} ({e}); only a torn last line can be dropped",
            path.display()
        ))
        .into()),
    }
}

/// Streams the rows of one JSONL file under Forum's torn-line rules, line by line within
/// `limits` (`used` counts the bytes read from the directory so far): `f(row, byte offset,
/// byte length, value)` for each row, in order, holding one line at a time. Returns whether a
/// torn last line was dropped.
pub(crate) fn scan_rows<E: From<ForumDirError>>(
    path: &Path,
    file: fs::File,
    limits: &Limits,
    used: &mut u64,
    f: impl FnMut(usize, u64, usize, Value) -> Result<(), E>,
) -> Result<bool, E> {
    scan_parsed(path, file, limits, used, canonical::parse, f)
}

/// [`scan_rows`] with the row parser given: `parse` must accept and refuse exactly the lines
/// [`canonical::parse`] does (it may read them into something else).
fn scan_parsed<T, E: From<ForumDirError>>(
    path: &Path,
    file: fs::File,
    limits: &Limits,
    used: &mut u64,
    parse: impl FnMut(&str) -> Result<T, canonical::ParseError>,
    f: impl FnMut(usize, u64, usize, T) -> Result<(), E>,
) -> Result<bool, E> {
    scan_span(path, file, Span::default(), limits, used, parse, f)
}

/// Where a scan of part of a file starts (its byte offset and row), and whether the file goes
/// on after what it reads (its last line is then an ordinary row, never dropped as torn).
#[derive(Clone, Copy, Default)]
struct Span {
    offset: u64,
    row: usize,
    more: bool,
}

/// [`scan_parsed`] of the part of a file `input` reads, which starts at a row's first byte.
fn scan_span<T, E: From<ForumDirError>>(
    path: &Path,
    input: impl std::io::Read,
    span: Span,
    limits: &Limits,
    used: &mut u64,
    mut parse: impl FnMut(&str) -> Result<T, canonical::ParseError>,
    mut f: impl FnMut(usize, u64, usize, T) -> Result<(), E>,
) -> Result<bool, E> {
    let mut input = std::io::BufReader::with_capacity(1 << 16, input);
    let mut buf = Vec::new();
    let mut offset: u64 = span.offset;
    // Only the last line may be blank or torn, so each line waits until the next one is seen
    // (with the byte offset where it starts).
    let mut pending: Option<(String, u64)> = None;
    let mut index = span.row;
    loop {
        let read = read_line(&mut input, &mut buf, limits.line).map_err(|e| ForumDirError::Io {
            context: format!("reading {}", path.display()),
            source: e,
        })?;
        if buf.is_empty() {
            break;
        }
        *used += buf.len() as u64;
        check_segment(path, limits, *used, index, &read)?;
        let len = buf.len() as u64;
        let text = segment_text(path, std::mem::take(&mut buf), &read, offset)?;
        // Every segment but the last ends with `\n`, so splitting each one alone is splitting
        // the whole file.
        for line in splitlines(&text) {
            let at = offset + (line.as_ptr() as usize - text.as_ptr() as usize) as u64;
            let next = match pending.as_mut() {
                Some((p, p_at)) => {
                    let was = (std::mem::take(p), *p_at);
                    p.push_str(line);
                    *p_at = at;
                    Some(was)
                }
                None => {
                    pending = Some((line.to_string(), at));
                    None
                }
            };
            if let Some((p, p_at)) = next {
                take_line(path, &p, p_at, index - 1, false, &mut parse, &mut f)?;
            }
            index += 1;
        }
        offset += len;
        buf = text.into_bytes();
    }
    match pending {
        Some((p, at)) => take_line(path, &p, at, index - 1, !span.more, &mut parse, &mut f),
        None => Ok(false),
    }
}

/// Refuses a segment read from `path` that is longer than the line limit, or that brings the
/// bytes read from the directory (`used`) over the total limit.
fn check_segment(
    path: &Path,
    limits: &Limits,
    used: u64,
    index: usize,
    read: &Line,
) -> Result<(), ForumDirError> {
    if *read == Line::TooLong {
        return Err(ForumDirError::Invalid(format!(
            "{}: the line at row {index} is longer than the {} byte line limit; no Forum row is that long, so this is not a Forum ledger file",
            path.display(),
            limits.line
        )));
    }
    if used > limits.total {
        let what = format!(
            "{}: the Forum directory holds more than the {} byte limit (both files together)",
            path.display(),
            limits.total
        );
        return Err(ForumDirError::Invalid(format!(
            "{what}; {}",
            if limits.raise.is_empty() {
                "git forum does not read a larger one"
            } else {
                limits.raise
            }
        )));
    }
    Ok(())
}

/// A segment's bytes (starting at byte `offset` of `path`) as text. A crash can cut a
/// multi-byte character; only the last line may be torn, so a segment that ends its line must
/// be valid UTF-8 and one that does not keeps its valid prefix.
fn segment_text(
    path: &Path,
    buf: Vec<u8>,
    read: &Line,
    offset: u64,
) -> Result<String, ForumDirError> {
    match String::from_utf8(buf) {
        Ok(t) => Ok(t),
        Err(e) if *read == Line::Ended => Err(ForumDirError::Corrupt(format!(
            "{}: invalid UTF-8 at byte {}",
            path.display(),
            offset + e.utf8_error().valid_up_to() as u64
        ))),
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            Ok(String::from_utf8(bytes).expect("prefix is valid"))
        }
    }
}

/// Reads a Forum ledger directory within the default [`Limits`]. A missing directory is an
/// error (Forum would create it).
pub fn read(dir: &Path) -> Result<ForumLedger, ForumDirError> {
    read_with(dir, &Limits::default())
}

/// The two files of a Forum directory, opened as plain files: `entries.jsonl` must be there,
/// `payloads.jsonl` may be absent (every body then counts as redacted).
#[allow(clippy::type_complexity)]
fn open_files(dir: &Path) -> Result<(PathBuf, fs::File, PathBuf, Option<fs::File>), ForumDirError> {
    if !dir.is_dir() {
        return Err(ForumDirError::Invalid(format!(
            "{} is not a directory holding a Forum ledger",
            dir.display()
        )));
    }
    let entries_path = dir.join("entries.jsonl");
    let Some(entries_file) = open_plain(&entries_path)? else {
        return Err(ForumDirError::Invalid(format!(
            "{} has no entries.jsonl: not a Forum ledger",
            dir.display()
        )));
    };
    let payloads_path = dir.join("payloads.jsonl");
    let payloads_file = open_plain(&payloads_path)?;
    Ok((entries_path, entries_file, payloads_path, payloads_file))
}

/// Reads a Forum ledger directory within `limits`.
pub(crate) fn read_with(dir: &Path, limits: &Limits) -> Result<ForumLedger, ForumDirError> {
    let (entries_path, entries_file, payloads_path, payloads_file) = open_files(dir)?;
    let mut used = 0u64;
    let mut out = ForumLedger::default();
    let (rows, torn) = read_rows(&entries_path, entries_file, limits, &mut used)?;
    if torn {
        out.torn.push(entries_path.clone());
    }
    for (i, row) in rows.iter().enumerate() {
        let e = Entry::from_value(row).map_err(|why| {
            ForumDirError::Corrupt(format!("{}: row {i}: {why}", entries_path.display()))
        })?;
        out.entries.push(e);
    }
    let (rows, torn) = match payloads_file {
        Some(f) => read_rows(&payloads_path, f, limits, &mut used)?,
        None => (Vec::new(), false),
    };
    if torn {
        out.torn.push(payloads_path.clone());
    }
    for (i, row) in rows.into_iter().enumerate() {
        let (h, body) = split::payload_row(&payloads_path, i, &row)?;
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
pub(crate) fn checked_body(e: &Entry, body: &Value) -> Result<String, ForumDirError> {
    checked_canonical(e, body.canonical())
}

/// Checks a body's canonical bytes `c` against its payload hash; returns them.
pub(crate) fn checked_canonical(e: &Entry, c: String) -> Result<String, ForumDirError> {
    if hash::sha256_hex(c.as_bytes()) != e.payload_hash {
        return Err(ForumDirError::Corrupt(format!(
            "the body stored for seq {} does not hash to its payload_hash",
            e.seq
        )));
    }
    Ok(c)
}

pub(crate) mod order;
mod split;
mod stream;
pub(crate) use stream::{ForumStream, StreamBody, open_stream};

#[cfg(test)]
mod tests;
