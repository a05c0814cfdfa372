//! Streaming a Forum directory for an import: entries one row at a time, payload rows found
//! through an index kept in temporary files, so memory follows neither the size of the bodies
//! nor the number of rows.

use super::split::{key_of, payload_row};
use super::*;
use crate::store::forum_row::payload_from_row;

/// A Forum directory opened for a streaming import: the entries are read one row at a time and
/// the payload rows are found through an index kept in temporary files, so memory follows
/// neither the size of the bodies nor the number of rows.
pub(crate) struct ForumStream {
    pub(crate) entries: EntryRows,
    pub(crate) payloads: Payloads,
}

/// entries.jsonl, to be read one row at a time.
pub(crate) struct EntryRows {
    pub(super) path: PathBuf,
    pub(super) file: Option<fs::File>,
    pub(super) limits: Limits,
    /// Bytes read from the directory so far (the payload rows first).
    pub(super) used: u64,
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
    pub(super) path: PathBuf,
    /// Whether a torn last line was dropped.
    pub(crate) torn: Option<PathBuf>,
    pub(super) file: Option<fs::File>,
    /// The rows in file order, `(at, len)` each ([`TABLE_REC`] bytes), read from the cursor on.
    pub(super) table: Option<Records<fs::File, TABLE_REC>>,
    pub(super) rows: u64,
    /// Every row as `(key, row, at, len)` ([`INDEX_REC`] bytes), sorted by key, then row.
    pub(super) index: Option<fs::File>,
    /// The key of the first record of each block of `block` records of `index`.
    pub(super) fences: Vec<u64>,
    pub(super) block: u64,
    /// The bits of [`key_of`] the index keeps.
    pub(super) key_mask: u64,
    /// Rows whose hash an earlier row already has (such a row never gives the body), ascending.
    pub(super) later: Vec<u64>,
    pub(super) later_next: usize,
    /// The first row in file order the cursor has not passed.
    pub(super) cursor: u64,
    /// The cursor's row, read, once read.
    pub(super) at_cursor: Option<Row>,
    /// Rows before the cursor that it passed over without handing them out.
    pub(super) skipped: Passed,
    /// A stretch of the file as last read by the cursor.
    pub(super) window: Vec<u8>,
    pub(super) window_at: u64,
    /// A row read out of file order.
    pub(super) scratch: Vec<u8>,
    /// Requests the cursor did not answer (each a lookup in the index).
    pub(super) lookups: u64,
}

/// Rows the cursor passed over without handing them out. Ranges suit a directory near
/// Forum's order (none at all for one Forum wrote, one for rows in reverse); rows in random
/// order would make a range of nearly every row, so past a point they become one bit a row.
pub(super) enum Passed {
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
    pub(super) fn is_empty(&self) -> bool {
        match self {
            Passed::Ranges(map, _) => map.is_empty(),
            Passed::Bits(bits) => bits.iter().all(|w| *w == 0),
        }
    }
}

pub(super) fn set_bits(bits: &mut [u64], from: u64, to: u64) {
    for r in from..to {
        bits[(r / 64) as usize] |= 1 << (r % 64);
    }
}

pub(super) const WINDOW: usize = 1 << 20;
/// A row of the table: its byte offset (8) and length (4), big-endian.
pub(super) const TABLE_REC: usize = 12;
/// A record of the index: the hash's key (8), the row (8), its offset (8) and length (4),
/// big-endian, so that records sort by key and then by row.
pub(super) const INDEX_REC: usize = 28;
/// Index records sorted in memory at a time while the index is built (448 KiB: a run of
/// 3.5 MiB made an import's memory grow with its rows up to 131,072 of them).
pub(super) const INDEX_RUN: usize = 1 << 14;
/// How many parts the index is cut into for lookups (one key each in memory: 32 KiB).
pub(super) const FENCES: u64 = 4096;

/// A payload row as read: plain (see [`payload_from_row`]: its hash and its body's canonical
/// bytes, no JSON value built), or parsed by the general parser.
pub(super) enum Row {
    Plain { hash: String, canonical: String },
    Parsed(Value),
}

/// Reads a payload row whole: plain when it is, else through the general parser.
pub(super) fn read_payload_row(line: &str) -> Result<Row, canonical::ParseError> {
    let mut c = String::new();
    match payload_from_row(line, Some(&mut c)) {
        Some(h) => Ok(Row::Plain {
            hash: h.to_string(),
            canonical: c,
        }),
        None => canonical::parse(line).map(Row::Parsed),
    }
}

pub(super) fn entry_of(path: &Path, i: usize, row: &Value) -> Result<Entry, ForumDirError> {
    Entry::from_value(row)
        .map_err(|why| ForumDirError::Corrupt(format!("{}: row {i}: {why}", path.display())))
}

pub(super) fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().expect("8 bytes"))
}

pub(super) fn be32(b: &[u8]) -> u32 {
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
pub(super) struct Tuning {
    /// Index records sorted in memory at a time.
    pub(super) index_run: usize,
    /// Parts of the index with a key in memory.
    pub(super) fences: u64,
    /// The bits of [`key_of`] kept: fewer make rows of different hashes share keys.
    pub(super) key_mask: u64,
    /// The most ranges of passed rows kept before they turn into a bit per row (`None`: a
    /// bit per row once that is smaller).
    pub(super) ranges_max: Option<usize>,
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

impl Payloads {
    /// The payloads of a directory with no `payloads.jsonl` (yet): no rows, nothing indexed.
    fn empty(path: PathBuf, tuning: &Tuning) -> Payloads {
        Payloads {
            path,
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
        }
    }
}

/// The error to report when `payloads.jsonl` failed with `e`: entries.jsonl is read first by
/// Forum and by `read_with`, so its problem, if it has one, is the one to report.
fn entries_problem_first(
    entries_path: &Path,
    entries_file: fs::File,
    limits: &Limits,
    e: ForumDirError,
) -> ForumDirError {
    let mut used = 0;
    match scan_rows(
        entries_path,
        entries_file,
        limits,
        &mut used,
        |i, _, _, row| entry_of(entries_path, i, &row).map(|_| ()),
    ) {
        Ok(_) => e,
        Err(first) => first,
    }
}

pub(super) fn open_tuned(
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
    let mut payloads = Payloads::empty(payloads_path.clone(), &tuning);
    if let Some(f) = payloads_file {
        let reread = f.try_clone().map_err(|e| ForumDirError::Io {
            context: format!("reading {}", payloads_path.display()),
            source: e,
        })?;
        let table_file = tempfile::tempfile_in(scratch).map_err(scratch_io)?;
        let mut table = std::io::BufWriter::with_capacity(1 << 16, &table_file);
        let mut sorter = SortedRuns::<INDEX_REC>::new(scratch, tuning.index_run);
        let key = |h: &str| key_of(h) & tuning.key_mask;
        let scanned = super::split::scan_payloads(
            &payloads_path,
            &f,
            limits,
            &mut used,
            scratch,
            &key,
            |i, at, len, key| {
                let mut t = [0u8; TABLE_REC];
                t[..8].copy_from_slice(&at.to_be_bytes());
                t[8..].copy_from_slice(&(len as u32).to_be_bytes());
                let mut r = [0u8; INDEX_REC];
                r[..8].copy_from_slice(&key.to_be_bytes());
                r[8..16].copy_from_slice(&(i as u64).to_be_bytes());
                r[16..].copy_from_slice(&t);
                table
                    .write_all(&t)
                    .and_then(|()| sorter.push(r))
                    .map_err(scratch_io)
            },
        );
        match scanned {
            Ok(t) => torn = t,
            Err(e) => {
                return Err(entries_problem_first(
                    &entries_path,
                    entries_file,
                    limits,
                    e,
                ));
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
    /// `json.dumps` of the body as the row holds it, when its keys are not in sorted order
    /// (see [`super::order`]).
    pub(crate) forum_order: Option<String>,
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
        let parse = |line: &str| match super::super::forum_row::entry_from_row(line) {
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
            if self.hash_of(row)? == e.payload_hash {
                let row = self.at_cursor.take().expect("loaded");
                self.cursor += 1;
                return self.hand_out(e, row, false).map(Some);
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
        self.hand_out(e, row, repeated).map(Some)
    }

    fn hand_out(&self, e: &Entry, row: Row, repeated: bool) -> Result<StreamBody, ForumDirError> {
        let body = match row {
            // A plain row's keys are sorted: Forum's order is the canonical one.
            Row::Plain { canonical, .. } => {
                return Ok(StreamBody {
                    canonical: checked_canonical(e, canonical)?,
                    repeated,
                    forum_order: None,
                });
            }
            Row::Parsed(v) => v,
        };
        let (_, body) = self.parts(&body)?;
        let canonical = checked_body(e, body)?;
        let forum_order =
            (!repeated && !super::order::keys_sorted(body)).then(|| body.python_dumps());
        Ok(StreamBody {
            canonical,
            repeated,
            forum_order,
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
            let row = read_payload_row(text).map_err(|err| self.changed(&format!("{err}")))?;
            self.hash_of(&row)?;
            self.at_cursor = Some(row);
            return Ok(true);
        }
        Ok(false)
    }

    /// The first row whose hash is `hash`, and the row parsed.
    fn lookup(&mut self, hash: &str) -> Result<Option<(u64, Row)>, ForumDirError> {
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
            if self.hash_of(&row)? == hash {
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
                let h = self.hash_of(&row)?;
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

    /// The hash of a row read again.
    fn hash_of<'a>(&self, row: &'a Row) -> Result<&'a str, ForumDirError> {
        match row {
            Row::Plain { hash, .. } => Ok(hash),
            Row::Parsed(v) => Ok(self.parts(v)?.0),
        }
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
    fn row_alone(&mut self, at: u64, len: u32) -> Result<Row, ForumDirError> {
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
        read_payload_row(text).map_err(|err| self.changed(&format!("{err}")))
    }
}
