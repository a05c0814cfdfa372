//! The first pass over `payloads.jsonl` in two halves at once: the rows of the first half are
//! read on this thread and handed on as they come, those of the second on another thread into
//! a temporary file, then handed on after the first half's, their rows renumbered. The second
//! half is read ahead of knowing where it starts (its first row, the bytes read before it), so
//! when it meets any problem its reading is thrown away and it is read again after the first
//! half, as one pass would read it: what is handed on, and any error, are those of one pass.

use std::io::{BufReader, BufWriter, Read, Write};
use std::os::unix::fs::FileExt as _;

use super::*;
use crate::store::forum_row::payload_from_row;

/// Files shorter than this are read on one thread: a second one saves less than it costs.
const SPLIT_FROM: u64 = 256 << 10;
/// How far past the middle a line's end is looked for before the file is read on one thread.
const SEARCH: u64 = 1 << 20;
/// A row of the second half waiting in its file: row (8), offset (8), length (4), key (8).
const WAITING: usize = 28;

/// FNV-1a of a payload hash's text: only a key to sort and search by (every match is confirmed
/// against the row itself).
pub(super) fn key_of(hash: &str) -> u64 {
    hash.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A payload row's hash as the first pass reads it: plain rows (nearly every row Forum writes)
/// without a JSON value built.
pub(super) enum Scanned {
    Plain([u8; 64]),
    Parsed(Value),
}

impl Scanned {
    /// The row's hash (row `i` of `path`, for the error when a parsed row has none).
    pub(super) fn hash(&self, path: &Path, i: usize) -> Result<&str, ForumDirError> {
        match self {
            Scanned::Plain(h) => Ok(std::str::from_utf8(h).expect("plain rows are ASCII")),
            Scanned::Parsed(v) => Ok(payload_row(path, i, v)?.0),
        }
    }
}

/// Reads a payload row for the first pass: [`Scanned::Plain`] when it is plain with a 64-byte
/// hash, else through the general parser (which accepts every plain row too).
pub(super) fn scan_payload_row(line: &str) -> Result<Scanned, canonical::ParseError> {
    match payload_from_row(line, None).and_then(|h| h.as_bytes().try_into().ok()) {
        Some(h) => Ok(Scanned::Plain(h)),
        None => canonical::parse(line).map(Scanned::Parsed),
    }
}

/// Checks that a payload row has a string `hash` and a `body`; returns both.
pub(super) fn payload_row<'a>(
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

/// `len` bytes of a file from `at` on, read with `read_at` (the file's offset is left alone).
struct At<'a> {
    file: &'a fs::File,
    at: u64,
    end: u64,
}

impl Read for At<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (self.end.saturating_sub(self.at)).min(buf.len() as u64) as usize;
        if n == 0 {
            return Ok(0);
        }
        let k = self.file.read_at(&mut buf[..n], self.at)?;
        self.at += k as u64;
        Ok(k)
    }
}

/// The offset just past the first `\n` at or after the middle of `file` (`size` bytes), when
/// there is one within [`SEARCH`] bytes and before the end.
fn middle(file: &fs::File, size: u64) -> std::io::Result<Option<u64>> {
    let mut buf = vec![0u8; 64 << 10];
    let mut at = size / 2;
    while at < size && at < size / 2 + SEARCH {
        let n = file.read_at(&mut buf, at)?;
        if n == 0 {
            return Ok(None);
        }
        if let Some(k) = memchr::memchr(b'\n', &buf[..n]) {
            let split = at + k as u64 + 1;
            return Ok((split < size).then_some(split));
        }
        at += n as u64;
    }
    Ok(None)
}

/// The first pass over the payload rows of `file` (read from `path`, `size` bytes, `used`
/// bytes of the directory read before it): `keep(row, offset, length, key)` for each row in
/// order, `key` the key of its hash. Returns whether a torn last line was dropped.
pub(super) fn scan_payloads(
    path: &Path,
    file: &fs::File,
    limits: &Limits,
    used: &mut u64,
    scratch: &Path,
    key: &(dyn Fn(&str) -> u64 + Sync),
    mut keep: impl FnMut(usize, u64, usize, u64) -> Result<(), ForumDirError>,
) -> Result<bool, ForumDirError> {
    let io = |context: &str| {
        let context = format!("{context} {}", path.display());
        move |source| ForumDirError::Io { context, source }
    };
    let size = file.metadata().map_err(io("reading"))?.len();
    let split = if size >= SPLIT_FROM {
        middle(file, size).map_err(io("reading"))?
    } else {
        None
    };
    let Some(split) = split else {
        return scan_rest(path, file, Span::default(), limits, used, key, &mut keep);
    };
    let waiting = tempfile::tempfile_in(scratch).map_err(io("writing the index of"))?;
    let start = *used;
    let mut used_first = start;
    let (first, second) = std::thread::scope(|s| {
        let second =
            s.spawn(|| read_second(path, file, split, limits, start + split, key, &waiting));
        let mut rows = 0usize;
        let first = scan_span(
            path,
            At {
                file,
                at: 0,
                end: split,
            },
            Span {
                offset: 0,
                row: 0,
                more: true,
            },
            limits,
            &mut used_first,
            scan_payload_row,
            |i, at, len, row: Scanned| {
                rows += 1;
                keep(i, at, len, key(row.hash(path, i)?))
            },
        );
        let second = second.join().ok().and_then(Result::ok);
        (first.map(|_| rows), second)
    });
    *used = used_first;
    let rows = first?;
    let second_ok = second.filter(|_| used_first == start + split);
    let Some((torn, used_second)) = second_ok else {
        // Read again after the first half, as one pass reads it.
        let span = Span {
            offset: split,
            row: rows,
            more: false,
        };
        return scan_rest(path, file, span, limits, used, key, &mut keep);
    };
    replay(&waiting, rows, &mut keep).map_err(io("reading the index of"))??;
    *used = used_second;
    Ok(torn)
}

/// Hands on the rows of the second half waiting in `waiting`, after the first half's `rows`.
fn replay(
    waiting: &fs::File,
    rows: usize,
    keep: &mut impl FnMut(usize, u64, usize, u64) -> Result<(), ForumDirError>,
) -> std::io::Result<Result<(), ForumDirError>> {
    use std::io::Seek as _;
    let mut r = BufReader::with_capacity(1 << 16, waiting);
    r.seek(std::io::SeekFrom::Start(0))?;
    let mut rec = [0u8; WAITING];
    loop {
        match r.read_exact(&mut rec) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(Ok(())),
            Err(e) => return Err(e),
        }
        let n = |a: usize, b: usize| u64::from_be_bytes(rec[a..b].try_into().expect("8 bytes"));
        let len = u32::from_be_bytes(rec[16..20].try_into().expect("4 bytes"));
        if let Err(e) = keep(rows + n(0, 8) as usize, n(8, 16), len as usize, n(20, 28)) {
            return Ok(Err(e));
        }
    }
}

/// The payload rows of `file` from `span` to the end, handed to `keep` as they come.
fn scan_rest(
    path: &Path,
    file: &fs::File,
    span: Span,
    limits: &Limits,
    used: &mut u64,
    key: &(dyn Fn(&str) -> u64 + Sync),
    keep: &mut impl FnMut(usize, u64, usize, u64) -> Result<(), ForumDirError>,
) -> Result<bool, ForumDirError> {
    let input = At {
        file,
        at: span.offset,
        end: u64::MAX,
    };
    scan_span(
        path,
        input,
        span,
        limits,
        used,
        scan_payload_row,
        |i, at, len, row: Scanned| keep(i, at, len, key(row.hash(path, i)?)),
    )
}

/// The second half of the first pass, read ahead into `waiting`: whether its last line was
/// torn and the bytes of the directory read once it is done, or `None` when it met any
/// problem (it is then read again after the first half).
fn read_second(
    path: &Path,
    file: &fs::File,
    split: u64,
    limits: &Limits,
    mut used: u64,
    key: &(dyn Fn(&str) -> u64 + Sync),
    waiting: &fs::File,
) -> Result<(bool, u64), ()> {
    let mut out = BufWriter::with_capacity(1 << 16, waiting);
    let torn = scan_span(
        path,
        At {
            file,
            at: split,
            end: u64::MAX,
        },
        Span {
            offset: split,
            row: 0,
            more: false,
        },
        limits,
        &mut used,
        scan_payload_row,
        |i, at, len, row: Scanned| -> Result<(), ForumDirError> {
            let mut rec = [0u8; WAITING];
            rec[..8].copy_from_slice(&(i as u64).to_be_bytes());
            rec[8..16].copy_from_slice(&at.to_be_bytes());
            rec[16..20].copy_from_slice(&(len as u32).to_be_bytes());
            rec[20..].copy_from_slice(&key(row.hash(path, i)?).to_be_bytes());
            out.write_all(&rec).map_err(|e| ForumDirError::Io {
                context: "writing".into(),
                source: e,
            })
        },
    )
    .map_err(|_| ())?;
    out.flush().map_err(|_| ())?;
    Ok((torn, used))
}

#[cfg(test)]
mod tests {
    use super::*;

    type Kept = Vec<(usize, u64, usize, u64)>;

    /// What a pass over `text` hands on: the rows, the result, the bytes counted. `split`
    /// reads in two halves where the file is long enough; otherwise in one pass.
    fn pass(text: &[u8], limits: &Limits, split: bool) -> (Kept, Result<bool, String>, u64) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("payloads.jsonl");
        std::fs::write(&path, text).unwrap();
        let file = fs::File::open(&path).unwrap();
        let key = |h: &str| key_of(h);
        let mut kept = Vec::new();
        let mut used = 7;
        let keep = |i, at, len, k| {
            kept.push((i, at, len, k));
            Ok(())
        };
        let r = if split {
            let size = text.len() as u64;
            assert!(middle(&file, size).unwrap().is_some(), "read in two halves");
            scan_payloads(&path, &file, limits, &mut used, dir.path(), &key, keep)
        } else {
            let mut keep = keep;
            scan_rest(
                &path,
                &file,
                Span::default(),
                limits,
                &mut used,
                &key,
                &mut keep,
            )
        };
        let r = r.map_err(|e| e.to_string().replace(&*path.to_string_lossy(), "P"));
        (kept, r, used)
    }

    /// `n` payload rows as Forum writes them, row `i` with a body of about `pad` bytes.
    fn rows(n: usize, pad: usize) -> Vec<String> {
        (0..n)
            .map(|i| {
                let body = format!("{{\"i\": {i}, \"t\": \"{}\"}}", "x".repeat(pad));
                // The first pass keys a row by the hash it names (the body is checked later).
                let h = hash::sha256_hex(body.as_bytes());
                format!("{{\"hash\": \"{h}\", \"body\": {body}}}")
            })
            .collect()
    }

    fn text(lines: &[String], tail: &str) -> Vec<u8> {
        let mut t = lines.join("\n");
        t.push('\n');
        t.push_str(tail);
        t.into_bytes()
    }

    /// The two halves hand on what one pass does, and fail where one pass fails with the same
    /// error: good rows, a torn last line, a corrupt or blank row in either half and just after
    /// the middle, and a limit on the bytes read that is reached in the second half.
    #[test]
    fn two_halves_hand_on_what_one_pass_does_and_fail_the_same_way() {
        let good = rows(3000, 120);
        let size = text(&good, "").len() as u64;
        assert!(size >= 2 * SPLIT_FROM, "{size}");
        let limits = Limits::default();
        let mut cases: Vec<(&str, Vec<u8>, Limits)> = vec![
            ("good", text(&good, ""), limits),
            ("torn last line", text(&good, "{\"hash\": \"ab"), limits),
        ];
        // The row that starts just after the middle (where the halves meet).
        let middle_row = good
            .iter()
            .scan(0u64, |at, l| {
                *at += l.len() as u64 + 1;
                Some(*at)
            })
            .position(|end| end > size / 2)
            .unwrap()
            + 1;
        for (what, row) in [("early", 10), ("late", 2900), ("middle", middle_row)] {
            let mut corrupt = good.clone();
            corrupt[row].truncate(30);
            cases.push((what, text(&corrupt, ""), limits));
            let mut blank = good.clone();
            blank[row].clear();
            cases.push((what, text(&blank, ""), limits));
        }
        let small = Limits {
            total: size - 1000,
            ..limits
        };
        cases.push(("limit", text(&good, ""), small));
        for (what, t, limits) in cases {
            let one = pass(&t, &limits, false);
            let two = pass(&t, &limits, true);
            assert_eq!(one.1, two.1, "{what}");
            assert_eq!(one.2, two.2, "{what}: bytes counted");
            if one.1.is_ok() {
                assert_eq!(one.0.len(), 3000, "{what}");
                assert!(one.0 == two.0, "{what}: the rows handed on differ");
            }
        }
    }
}
