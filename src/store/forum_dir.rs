//! Forum's on-disk ledger format: a directory with `entries.jsonl` and `payloads.jsonl`
//! (forum-spec §5). Reading follows Forum's rules, torn trailing line included; writing avoids
//! the defects listed in §5.3 (line separators inside strings are escaped, files are written
//! whole to temporary names and renamed, nothing is written over an existing ledger).

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

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
        return text
            .strip_suffix('\n')
            .unwrap_or(text)
            .split('\n')
            .collect();
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
    mut parse: impl FnMut(&str) -> Result<T, canonical::ParseError>,
    mut f: impl FnMut(usize, u64, usize, T) -> Result<(), E>,
) -> Result<bool, E> {
    use super::capped::{Line, read_line};
    let too_big = |what: String| {
        ForumDirError::Invalid(format!(
            "{what}; {}",
            if limits.raise.is_empty() {
                "git forum does not read a larger one"
            } else {
                limits.raise
            }
        ))
    };
    let mut input = std::io::BufReader::with_capacity(1 << 16, file);
    let mut buf = Vec::new();
    let mut offset: u64 = 0;
    // Only the last line may be blank or torn, so each line waits until the next one is seen
    // (with the byte offset where it starts).
    let mut pending: Option<(String, u64)> = None;
    let mut index = 0usize;
    loop {
        let read = read_line(&mut input, &mut buf, limits.line).map_err(|e| ForumDirError::Io {
            context: format!("reading {}", path.display()),
            source: e,
        })?;
        if buf.is_empty() {
            break;
        }
        *used += buf.len() as u64;
        if read == Line::TooLong {
            return Err(ForumDirError::Invalid(format!(
                "{}: the line at row {index} is longer than the {} byte line limit; no Forum row is that long, so this is not a Forum ledger file",
                path.display(),
                limits.line
            ))
            .into());
        }
        if *used > limits.total {
            return Err(too_big(format!(
                "{}: the Forum directory holds more than the {} byte limit (both files together)",
                path.display(),
                limits.total
            ))
            .into());
        }
        let len = buf.len() as u64;
        // A crash can cut a multi-byte character; only the last line may be torn.
        let text = match String::from_utf8(std::mem::take(&mut buf)) {
            Ok(t) => t,
            Err(e) if read == Line::Ended => {
                return Err(ForumDirError::Corrupt(format!(
                    "{}: invalid UTF-8 at byte {}",
                    path.display(),
                    offset + e.utf8_error().valid_up_to() as u64
                ))
                .into());
            }
            Err(e) => {
                let valid = e.utf8_error().valid_up_to();
                let mut bytes = e.into_bytes();
                bytes.truncate(valid);
                String::from_utf8(bytes).expect("prefix is valid")
            }
        };
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
        Some((p, at)) => take_line(path, &p, at, index - 1, true, &mut parse, &mut f),
        None => Ok(false),
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

/// A Forum directory opened for a streaming import: the entries are read one row at a time and
/// the payload rows are found through an index kept in temporary files, so memory follows
/// neither the size of the bodies nor the number of rows.
pub(crate) struct ForumStream {
    pub(crate) entries: EntryRows,
    pub(crate) payloads: Payloads,
}

/// entries.jsonl, to be read one row at a time.
pub(crate) struct EntryRows {
    path: PathBuf,
    file: Option<fs::File>,
    limits: Limits,
    /// Bytes read from the directory so far (the payload rows first).
    used: u64,
    /// Whether a torn last line was dropped.
    pub(crate) torn: Option<PathBuf>,
}

/// The payload rows of a directory, handed out as entries ask for them.
///
/// Forum writes one row per distinct body, just before the first entry that names it, so the
/// entries mostly ask for the rows in file order: a cursor walks the rows, and the body an
/// entry asks for is usually the row under it. Any other request (a body named again, a row
/// out of order, a body the directory does not hold) looks the hash up in an index sorted by
/// a key of the hash, on disk. What memory holds does not grow with the rows: the cursor, one
/// key in every [`FENCES`]th part of the index, and two lists that stay empty for a directory
/// Forum wrote (rows passed over, and rows that repeat an earlier row's hash).
///
/// A body is handed out `repeated` when an earlier entry already got it: a row before the
/// cursor was handed out unless it is in `skipped`, and a row at or after it never was.
pub(crate) struct Payloads {
    path: PathBuf,
    /// Whether a torn last line was dropped.
    pub(crate) torn: Option<PathBuf>,
    file: Option<fs::File>,
    /// The rows in file order, `(at, len)` each ([`TABLE_REC`] bytes), read from the cursor on.
    table: Option<Records<fs::File, TABLE_REC>>,
    rows: u64,
    /// Every row as `(key, row, at, len)` ([`INDEX_REC`] bytes), sorted by key, then row.
    index: Option<fs::File>,
    /// The key of the first record of each block of `block` records of `index`.
    fences: Vec<u64>,
    block: u64,
    /// The bits of [`key_of`] the index keeps.
    key_mask: u64,
    /// Rows whose hash an earlier row already has (such a row never gives the body), ascending.
    later: Vec<u64>,
    later_next: usize,
    /// The first row in file order the cursor has not passed.
    cursor: u64,
    /// The cursor's row, parsed, once read.
    at_cursor: Option<Value>,
    /// Rows before the cursor that it passed over without handing them out.
    skipped: Passed,
    /// A stretch of the file as last read by the cursor.
    window: Vec<u8>,
    window_at: u64,
    /// A row read out of file order.
    scratch: Vec<u8>,
    /// Requests the cursor did not answer (each a lookup in the index).
    lookups: u64,
}

/// Rows the cursor passed over without handing them out. Ranges suit a directory near
/// Forum's order (none at all for one Forum wrote, one for rows in reverse); rows in random
/// order would make a range of nearly every row, so past a point they become one bit a row.
enum Passed {
    /// `start -> end` (end excluded), and the most kept before turning into bits.
    Ranges(std::collections::BTreeMap<u64, u64>, Option<usize>),
    /// Bit `r` set: row `r` was passed over and not handed out.
    Bits(Vec<u64>),
}

impl Passed {
    /// Adds rows `from..to`, all after every row held, of a directory of `rows` rows.
    fn insert(&mut self, from: u64, to: u64, rows: u64) {
        match self {
            Passed::Ranges(map, max) => {
                if let Some(mut last) = map.last_entry()
                    && *last.get() == from
                {
                    *last.get_mut() = to;
                    return;
                }
                map.insert(from, to);
                // A range costs about 48 bytes in the map, the bits one bit a row.
                let max = max.unwrap_or((rows / 384) as usize + 16);
                if map.len() > max {
                    let mut bits = vec![0u64; rows.div_ceil(64) as usize];
                    for (&a, &b) in map.iter() {
                        set_bits(&mut bits, a, b);
                    }
                    *self = Passed::Bits(bits);
                }
            }
            Passed::Bits(bits) => set_bits(bits, from, to),
        }
    }

    /// Takes row `r` out: `true` when it was held.
    fn remove(&mut self, r: u64) -> bool {
        match self {
            Passed::Ranges(map, _) => {
                let Some((&start, &end)) = map.range(..=r).next_back() else {
                    return false;
                };
                if r >= end {
                    return false;
                }
                map.remove(&start);
                if start < r {
                    map.insert(start, r);
                }
                if r + 1 < end {
                    map.insert(r + 1, end);
                }
                true
            }
            Passed::Bits(bits) => {
                let (w, b) = ((r / 64) as usize, 1u64 << (r % 64));
                let held = bits[w] & b != 0;
                bits[w] &= !b;
                held
            }
        }
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        match self {
            Passed::Ranges(map, _) => map.is_empty(),
            Passed::Bits(bits) => bits.iter().all(|w| *w == 0),
        }
    }
}

fn set_bits(bits: &mut [u64], from: u64, to: u64) {
    for r in from..to {
        bits[(r / 64) as usize] |= 1 << (r % 64);
    }
}

const WINDOW: usize = 1 << 20;
/// A row of the table: its byte offset (8) and length (4), big-endian.
const TABLE_REC: usize = 12;
/// A record of the index: the hash's key (8), the row (8), its offset (8) and length (4),
/// big-endian, so that records sort by key and then by row.
const INDEX_REC: usize = 28;
/// Index records sorted in memory at a time while the index is built (3.5 MiB).
const INDEX_RUN: usize = 1 << 17;
/// How many parts the index is cut into for lookups (one key each in memory: 32 KiB).
const FENCES: u64 = 4096;

/// FNV-1a of a payload hash's text: only a key to sort and search by (every match is confirmed
/// against the row itself).
fn key_of(hash: &str) -> u64 {
    hash.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Checks that a payload row has a string `hash` and a `body`; returns both.
fn payload_row<'a>(
    path: &Path,
    i: usize,
    row: &'a Value,
) -> Result<(&'a str, &'a Value), ForumDirError> {
    let (Some(h), Some(body)) = (row.get("hash"), row.get("body")) else {
        return Err(ForumDirError::Corrupt(format!(
            "{}: row {i} lacks \"hash\" or \"body\"",
            path.display()
        )));
    };
    let Some(h) = h.as_str() else {
        return Err(ForumDirError::Corrupt(format!(
            "{}: row {i}: \"hash\" is not a string",
            path.display()
        )));
    };
    Ok((h, body))
}

fn entry_of(path: &Path, i: usize, row: &Value) -> Result<Entry, ForumDirError> {
    Entry::from_value(row)
        .map_err(|why| ForumDirError::Corrupt(format!("{}: row {i}: {why}", path.display())))
}

fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().expect("8 bytes"))
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().expect("4 bytes"))
}

/// Opens a Forum directory for a streaming import within `limits`: checks both files and reads
/// payloads.jsonl once to index it, in temporary files made in `scratch`. A problem is
/// reported as [`read_with`] reports it (a problem in entries.jsonl before one in
/// payloads.jsonl).
pub(crate) fn open_stream(
    dir: &Path,
    limits: &Limits,
    scratch: &Path,
) -> Result<ForumStream, ForumDirError> {
    open_tuned(dir, limits, scratch, Tuning::default())
}

/// The sizes [`open_stream`] works with; tests make them small to reach every path with few
/// rows.
#[derive(Clone, Copy)]
struct Tuning {
    /// Index records sorted in memory at a time.
    index_run: usize,
    /// Parts of the index with a key in memory.
    fences: u64,
    /// The bits of [`key_of`] kept: fewer make rows of different hashes share keys.
    key_mask: u64,
    /// The most ranges of passed rows kept before they turn into a bit per row (`None`: a
    /// bit per row once that is smaller).
    ranges_max: Option<usize>,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            index_run: INDEX_RUN,
            fences: FENCES,
            key_mask: u64::MAX,
            ranges_max: None,
        }
    }
}

fn open_tuned(
    dir: &Path,
    limits: &Limits,
    scratch: &Path,
    tuning: Tuning,
) -> Result<ForumStream, ForumDirError> {
    let (entries_path, entries_file, payloads_path, payloads_file) = open_files(dir)?;
    let scratch_io = |e| ForumDirError::Io {
        context: format!(
            "writing the index of {} under {}",
            payloads_path.display(),
            scratch.display()
        ),
        source: e,
    };
    let mut used = 0u64;
    let mut torn = false;
    let mut payloads = Payloads {
        path: payloads_path.clone(),
        torn: None,
        file: None,
        table: None,
        rows: 0,
        index: None,
        fences: Vec::new(),
        block: 1,
        key_mask: tuning.key_mask,
        later: Vec::new(),
        later_next: 0,
        cursor: 0,
        at_cursor: None,
        skipped: Passed::Ranges(Default::default(), tuning.ranges_max),
        window: Vec::new(),
        window_at: 0,
        scratch: Vec::new(),
        lookups: 0,
    };
    if let Some(f) = payloads_file {
        let reread = f.try_clone().map_err(|e| ForumDirError::Io {
            context: format!("reading {}", payloads_path.display()),
            source: e,
        })?;
        let table_file = tempfile::tempfile_in(scratch).map_err(scratch_io)?;
        let mut table = std::io::BufWriter::with_capacity(1 << 16, &table_file);
        let mut sorter = SortedRuns::<INDEX_REC>::new(scratch, tuning.index_run);
        let scanned = scan_rows(&payloads_path, f, limits, &mut used, |i, at, len, row| {
            let (h, _) = payload_row(&payloads_path, i, &row)?;
            let mut t = [0u8; TABLE_REC];
            t[..8].copy_from_slice(&at.to_be_bytes());
            t[8..].copy_from_slice(&(len as u32).to_be_bytes());
            let mut r = [0u8; INDEX_REC];
            r[..8].copy_from_slice(&(key_of(h) & tuning.key_mask).to_be_bytes());
            r[8..16].copy_from_slice(&(i as u64).to_be_bytes());
            r[16..].copy_from_slice(&t);
            table
                .write_all(&t)
                .and_then(|()| sorter.push(r))
                .map_err(scratch_io)
        });
        match scanned {
            Ok(t) => torn = t,
            Err(e) => {
                // entries.jsonl is read first by Forum and by `read_with`: its problem, if it has
                // one, is the one to report.
                let mut used = 0;
                scan_rows(
                    &entries_path,
                    entries_file,
                    limits,
                    &mut used,
                    |i, _, _, row| entry_of(&entries_path, i, &row).map(|_| ()),
                )?;
                return Err(e);
            }
        }
        table.flush().map_err(scratch_io)?;
        drop(table);
        payloads.rows = sorter.len();
        payloads.block = payloads.rows.div_ceil(tuning.fences).max(1);
        payloads.table = Some(Records::new(table_file, 0, payloads.rows, 1 << 16));
        payloads.file = Some(reread);
        let shared = payloads.build_index(sorter, scratch).map_err(scratch_io)?;
        payloads.find_later(shared)?;
    }
    payloads.torn = torn.then(|| payloads_path.clone());
    Ok(ForumStream {
        entries: EntryRows {
            path: entries_path,
            file: Some(entries_file),
            limits: *limits,
            used,
            torn: None,
        },
        payloads,
    })
}

/// A body handed out by [`Payloads::body`].
pub(crate) struct StreamBody {
    /// The canonical bytes, checked to hash to the entry's payload hash.
    pub(crate) canonical: String,
    /// Whether an earlier entry already got this body.
    pub(crate) repeated: bool,
}

impl EntryRows {
    /// Streams the entries in file order, `f(row, entry)`; stops at the first error.
    pub(crate) fn read<E: From<ForumDirError>>(
        &mut self,
        mut f: impl FnMut(usize, Entry) -> Result<(), E>,
    ) -> Result<(), E> {
        let file = self
            .file
            .take()
            .ok_or_else(|| ForumDirError::Invalid("the entries were already read".into()))?;
        let path = self.path.clone();
        // A row as Forum writes it is read straight into an entry; any other goes through the
        // general parser.
        let parse = |line: &str| match super::forum_row::entry_from_row(line) {
            Some(e) => Ok(Ok(e)),
            None => canonical::parse(line).map(Err),
        };
        let torn = scan_parsed(
            &path,
            file,
            &self.limits,
            &mut self.used,
            parse,
            |i, _, _, row: Result<Entry, Value>| match row {
                Ok(e) => f(i, e),
                Err(v) => f(i, entry_of(&path, i, &v)?),
            },
        )?;
        if torn {
            self.torn = Some(path);
        }
        Ok(())
    }
}

impl Payloads {
    /// The body the directory holds for `e` (the first row of its payload hash), checked
    /// against the hash: `Ok(None)` when there is none. A body that does not hash to the entry
    /// is `Err(Corrupt)`.
    pub(crate) fn body(&mut self, e: &Entry) -> Result<Option<StreamBody>, ForumDirError> {
        if self.load_cursor()? {
            let row = self.at_cursor.as_ref().expect("loaded");
            if self.parts(row)?.0 == e.payload_hash {
                let row = self.at_cursor.take().expect("loaded");
                self.cursor += 1;
                return self.hand_out(e, &row, false).map(Some);
            }
        }
        let Some((r, row)) = self.lookup(&e.payload_hash)? else {
            return Ok(None);
        };
        let repeated = if r < self.cursor {
            // A row passed over was never handed out; any other row before the cursor was.
            !self.skipped.remove(r)
        } else {
            if r > self.cursor {
                self.skipped.insert(self.cursor, r, self.rows);
            }
            self.cursor = r + 1;
            self.at_cursor = None;
            let table = self.table.as_mut().expect("rows have a table");
            table.reset((r + 1) * TABLE_REC as u64, self.rows - (r + 1));
            false
        };
        self.hand_out(e, &row, repeated).map(Some)
    }

    fn hand_out(
        &self,
        e: &Entry,
        row: &Value,
        repeated: bool,
    ) -> Result<StreamBody, ForumDirError> {
        let (_, body) = self.parts(row)?;
        let canonical = checked_body(e, body).map_err(ForumDirError::Corrupt)?;
        Ok(StreamBody {
            canonical,
            repeated,
        })
    }

    /// Reads the row under the cursor, passing rows that repeat an earlier row's hash; `false`
    /// when the cursor is past the last row.
    fn load_cursor(&mut self) -> Result<bool, ForumDirError> {
        if self.at_cursor.is_some() {
            return Ok(true);
        }
        while self.cursor < self.rows {
            let Some(table) = self.table.as_mut() else {
                return Ok(false);
            };
            let rec = table
                .next()
                .map_err(|e| self.scratch_io(e))?
                .ok_or_else(|| self.changed("its index is short"))?;
            while self
                .later
                .get(self.later_next)
                .is_some_and(|&l| l < self.cursor)
            {
                self.later_next += 1;
            }
            if self.later.get(self.later_next) == Some(&self.cursor) {
                self.cursor += 1;
                continue;
            }
            let text = self.row(be64(&rec), be32(&rec[8..]))?;
            let row = canonical::parse(text).map_err(|err| self.changed(&format!("{err}")))?;
            self.parts(&row)?;
            self.at_cursor = Some(row);
            return Ok(true);
        }
        Ok(false)
    }

    /// The first row whose hash is `hash`, and the row parsed.
    fn lookup(&mut self, hash: &str) -> Result<Option<(u64, Value)>, ForumDirError> {
        let Some(index) = self.index.as_ref() else {
            return Ok(None);
        };
        self.lookups += 1;
        let key = key_of(hash) & self.key_mask;
        let from = self.fences.partition_point(|f| *f < key).saturating_sub(1) as u64 * self.block;
        let mut records = Records::<_, INDEX_REC>::new(
            index,
            from * INDEX_REC as u64,
            self.rows - from,
            16 << 10,
        );
        let mut found = Vec::new();
        while let Some(rec) = records.next().map_err(|e| self.scratch_io(e))? {
            match be64(&rec).cmp(&key) {
                std::cmp::Ordering::Less => continue,
                std::cmp::Ordering::Greater => break,
                std::cmp::Ordering::Equal => found.push(rec),
            }
        }
        for rec in found {
            let row = self.row_alone(be64(&rec[16..]), be32(&rec[24..]))?;
            if self.parts(&row)?.0 == hash {
                return Ok(Some((be64(&rec[8..]), row)));
            }
        }
        Ok(None)
    }

    /// Writes the sorted index to a temporary file in `scratch`, keeping a key per block in
    /// memory. Returns the records of each key that more than one row has.
    fn build_index(
        &mut self,
        sorter: SortedRuns<INDEX_REC>,
        scratch: &Path,
    ) -> std::io::Result<Vec<Vec<[u8; INDEX_REC]>>> {
        let file = tempfile::tempfile_in(scratch)?;
        let mut w = std::io::BufWriter::with_capacity(1 << 16, &file);
        let mut n = 0u64;
        let mut group: Vec<[u8; INDEX_REC]> = Vec::new();
        let mut shared = Vec::new();
        let block = self.block;
        let fences = &mut self.fences;
        sorter.merge(|rec| {
            if n.is_multiple_of(block) {
                fences.push(be64(rec));
            }
            n += 1;
            if group.first().is_some_and(|g| g[..8] != rec[..8]) {
                if group.len() > 1 {
                    shared.push(std::mem::take(&mut group));
                }
                group.clear();
            }
            group.push(*rec);
            w.write_all(rec)
        })?;
        if group.len() > 1 {
            shared.push(group);
        }
        w.flush()?;
        drop(w);
        self.index = Some(file);
        Ok(shared)
    }

    /// Finds the rows whose hash an earlier row has, among the rows that share a key.
    fn find_later(&mut self, shared: Vec<Vec<[u8; INDEX_REC]>>) -> Result<(), ForumDirError> {
        for group in shared {
            let mut hashes: Vec<String> = Vec::with_capacity(group.len());
            for rec in group {
                let row = self.row_alone(be64(&rec[16..]), be32(&rec[24..]))?;
                let (h, _) = self.parts(&row)?;
                if hashes.iter().any(|seen| seen == h) {
                    self.later.push(be64(&rec[8..]));
                } else {
                    hashes.push(h.to_string());
                }
            }
        }
        self.later.sort_unstable();
        Ok(())
    }

    /// The hash and body of a row read again (the first pass found every row well formed).
    fn parts<'a>(&self, row: &'a Value) -> Result<(&'a str, &'a Value), ForumDirError> {
        payload_row(&self.path, 0, row).map_err(|_| self.changed("a row lost its hash"))
    }

    fn changed(&self, why: &str) -> ForumDirError {
        ForumDirError::Corrupt(format!(
            "{} changed while it was being imported ({why}); import it again",
            self.path.display()
        ))
    }

    fn scratch_io(&self, e: std::io::Error) -> ForumDirError {
        ForumDirError::Io {
            context: format!("reading the index of {}", self.path.display()),
            source: e,
        }
    }

    /// The text of the row at `at`, `len` bytes long, read through the cursor's window.
    fn row(&mut self, at: u64, len: u32) -> Result<&str, ForumDirError> {
        let len = len as usize;
        let inside =
            at >= self.window_at && at + len as u64 <= self.window_at + self.window.len() as u64;
        if !inside {
            let Some(file) = self.file.as_ref() else {
                return Err(self.changed("it is gone"));
            };
            self.window.resize(WINDOW.max(len), 0);
            let mut got = 0;
            while got < self.window.len() {
                use std::os::unix::fs::FileExt as _;
                match file.read_at(&mut self.window[got..], at + got as u64) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        return Err(ForumDirError::Io {
                            context: format!("reading {}", self.path.display()),
                            source: e,
                        });
                    }
                }
            }
            self.window.truncate(got);
            self.window_at = at;
            if got < len {
                return Err(self.changed("it is shorter"));
            }
        }
        let from = (at - self.window_at) as usize;
        std::str::from_utf8(&self.window[from..from + len]).map_err(|_| self.changed("not UTF-8"))
    }

    /// The row at `at`, `len` bytes long, read alone (out of file order) and parsed.
    fn row_alone(&mut self, at: u64, len: u32) -> Result<Value, ForumDirError> {
        let Some(file) = self.file.as_ref() else {
            return Err(self.changed("it is gone"));
        };
        use std::os::unix::fs::FileExt as _;
        self.scratch.resize(len as usize, 0);
        match file.read_exact_at(&mut self.scratch, at) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(self.changed("it is shorter"));
            }
            Err(e) => {
                return Err(ForumDirError::Io {
                    context: format!("reading {}", self.path.display()),
                    source: e,
                });
            }
        }
        let text = std::str::from_utf8(&self.scratch).map_err(|_| self.changed("not UTF-8"))?;
        canonical::parse(text).map_err(|err| self.changed(&format!("{err}")))
    }
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
pub(crate) fn checked_body(e: &Entry, body: &Value) -> Result<String, String> {
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
    use proptest::prelude::*;

    /// Body `k` of the stream tests: its value, canonical text and hash.
    fn body(k: usize) -> (Value, String, String) {
        let v = canonical::parse(&format!(
            "{{\"k\": {k}, \"pad\": \"{}\"}}",
            "x".repeat(k % 13)
        ))
        .unwrap();
        let c = v.canonical();
        let h = hash::sha256_hex(c.as_bytes());
        (v, c, h)
    }

    fn entry_naming(h: &str) -> Entry {
        let new = crate::ledger::NewEntry {
            actor: "t".into(),
            kind: "note".into(),
            causal_parent: None,
            payload: Value::Null,
            ts: 1.0,
        };
        Entry::next(None, &new, h.to_string())
    }

    /// A directory whose payload rows hold `rows` (body numbers, in this order; a pair gives a
    /// row whose body is not the one its hash names), and no entries.
    fn dir_of(rows: &[(usize, usize)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let mut text = String::new();
        for &(named, held) in rows {
            let row = Value::Object(vec![
                ("hash".into(), Value::str(&body(named).2)),
                ("body".into(), body(held).0),
            ]);
            text.push_str(&row.python_dumps());
            text.push('\n');
        }
        fs::write(d.path().join("payloads.jsonl"), text).unwrap();
        fs::write(d.path().join("entries.jsonl"), "").unwrap();
        d
    }

    fn open(d: &Path, tuning: Tuning) -> Payloads {
        open_tuned(d, &Limits::default(), d, tuning)
            .unwrap()
            .payloads
    }

    /// What Forum's reader gives for `asks` against `rows`: the body (first row wins) and
    /// whether an earlier ask got it.
    fn oracle(rows: &[usize], asks: &[usize]) -> Vec<Option<(String, bool)>> {
        let mut given = std::collections::HashSet::new();
        asks.iter()
            .map(|k| rows.contains(k).then(|| (body(*k).1, !given.insert(*k))))
            .collect()
    }

    fn served(p: &mut Payloads, asks: &[usize]) -> Vec<Option<(String, bool)>> {
        asks.iter()
            .map(|k| {
                p.body(&entry_naming(&body(*k).2))
                    .unwrap()
                    .map(|b| (b.canonical, b.repeated))
            })
            .collect()
    }

    const TUNINGS: [Tuning; 5] = [
        Tuning {
            index_run: INDEX_RUN,
            fences: FENCES,
            key_mask: u64::MAX,
            ranges_max: None,
        },
        Tuning {
            index_run: 1,
            fences: 1,
            key_mask: 0,
            ranges_max: Some(0),
        },
        Tuning {
            index_run: 2,
            fences: 3,
            key_mask: 1,
            ranges_max: Some(1),
        },
        Tuning {
            index_run: 5,
            fences: 2,
            key_mask: 7,
            ranges_max: Some(3),
        },
        Tuning {
            index_run: 3,
            fences: 4096,
            key_mask: u64::MAX,
            ranges_max: None,
        },
    ];

    /// Rows in the order Forum writes them (each body once, just before its first entry) are
    /// all served by the cursor: no lookup, nothing passed over, however the index is tuned.
    #[test]
    fn rows_in_forum_order_are_served_by_the_cursor_alone() {
        let asks: Vec<usize> = (0..300).collect();
        let rows: Vec<(usize, usize)> = asks.iter().map(|&k| (k, k)).collect();
        let d = dir_of(&rows);
        for tuning in TUNINGS {
            let mut p = open(d.path(), tuning);
            let plain: Vec<usize> = rows.iter().map(|r| r.0).collect();
            assert_eq!(served(&mut p, &asks), oracle(&plain, &asks));
            assert_eq!(p.lookups, 0);
            assert!(p.skipped.is_empty() && p.later.is_empty());
            assert!(matches!(p.skipped, Passed::Ranges(..)));
        }
    }

    /// A repeated body and a body the directory lacks are looked up; rows passed over stay
    /// few when rows come in reverse.
    #[test]
    fn repeats_absences_and_reversed_rows_are_looked_up() {
        let rows: Vec<(usize, usize)> = (0..200).rev().map(|k| (k, k)).collect();
        let d = dir_of(&rows);
        let asks: Vec<usize> = (0..200).chain([5, 199, 1000, 0]).collect();
        let plain: Vec<usize> = rows.iter().map(|r| r.0).collect();
        for tuning in TUNINGS {
            let mut p = open(d.path(), tuning);
            assert_eq!(served(&mut p, &asks), oracle(&plain, &asks));
            match &p.skipped {
                Passed::Ranges(map, _) => assert!(map.len() <= 1, "{map:?}"),
                Passed::Bits(_) => assert!(tuning.ranges_max.is_some()),
            }
        }
    }

    /// The first row of a hash gives the body: a later row of the same hash with another body
    /// is never read, and a first row whose body is wrong is an error even when a later one is
    /// right.
    #[test]
    fn the_first_row_of_a_hash_wins() {
        for tuning in TUNINGS {
            let d = dir_of(&[(1, 1), (0, 0), (1, 2), (3, 3)]);
            let mut p = open(d.path(), tuning);
            assert_eq!(
                served(&mut p, &[1, 0, 3, 1]),
                oracle(&[1, 0, 3], &[1, 0, 3, 1])
            );
            assert_eq!(p.later, vec![2]);
            let d = dir_of(&[(0, 0), (1, 2), (1, 1)]);
            let mut p = open(d.path(), tuning);
            assert!(p.body(&entry_naming(&body(0).2)).unwrap().is_some());
            let e = p.body(&entry_naming(&body(1).2));
            assert!(matches!(e, Err(ForumDirError::Corrupt(_))), "{:?}", e.err());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// Any rows (out of order, repeated, never named) and any requests (repeated, for
        /// bodies the directory lacks) get what Forum's reader gives, however the index is
        /// tuned.
        #[test]
        fn any_rows_and_requests_get_what_forum_reads(
            rows in proptest::collection::vec(0usize..24, 0..40),
            asks in proptest::collection::vec(0usize..28, 0..60),
            t in 0usize..TUNINGS.len(),
        ) {
            let pairs: Vec<(usize, usize)> = rows.iter().map(|&k| (k, k)).collect();
            let d = dir_of(&pairs);
            let mut p = open(d.path(), TUNINGS[t]);
            prop_assert_eq!(served(&mut p, &asks), oracle(&rows, &asks));
        }
    }

    #[test]
    fn splitlines_matches_python() {
        assert_eq!(
            splitlines("a\nb\r\nc\rd\u{2028}e\u{85}f\n"),
            vec!["a", "b", "c", "d", "e", "f"]
        );
        assert_eq!(splitlines("a\n\nb"), vec!["a", "", "b"]);
        assert_eq!(splitlines(""), Vec::<&str>::new());
        // Text that breaks only at `\n` takes the short way, with the same answers.
        assert_eq!(splitlines("\n"), vec![""]);
        assert_eq!(splitlines("a\n\n"), vec!["a", ""]);
        assert_eq!(splitlines("a\nb\n"), vec!["a", "b"]);
        assert_eq!(splitlines("caf\u{e9}\x1f"), vec!["caf\u{e9}\x1f"]);
        assert_eq!(splitlines("x\u{2028}y\n"), vec!["x", "y"]);
        // Each of the other breaks alone is found, wherever it sits.
        for brk in [
            "\r", "\u{b}", "\u{c}", "\u{1c}", "\u{1d}", "\u{1e}", "\u{85}", "\u{2029}",
        ] {
            let long = "y".repeat(70);
            let text = format!("{long}{brk}z");
            assert_eq!(splitlines(&text), vec![long.as_str(), "z"], "{brk:?}");
        }
    }
}
