//! One entry point per parser of untrusted bytes, for the property tests
//! (`tests/integration/props.rs`) and the cargo-fuzz targets (`fuzz/`).
//!
//! Each function takes any bytes, hands them to the parser the way the program does, and
//! returns what the parser made of them. It panics only where a parser breaks a promise of its
//! own (a value that does not read back as itself, a line longer than its cap, an error of
//! more than one line): that is what a fuzzer is there to find. The parsers live where their
//! callers need them and may move; the tests and fuzz targets reach them only through here, so
//! a move changes one line of this file.

use std::io::BufRead as _;

use gix::hash::Kind as HashKind;
use gix::objs::Kind;

use crate::ledger::canonical::{self, Value};

/// Why [`canonical_json`] read no value: the bytes are not text, or the parser's error.
#[derive(Debug, thiserror::Error)]
pub enum JsonBytesError {
    /// The bytes are not UTF-8.
    #[error("not UTF-8: {0}")]
    NotUtf8(#[from] std::str::Utf8Error),
    /// The ledger's parser refused the text (one line).
    #[error(transparent)]
    Parse(#[from] canonical::ParseError),
}

/// Reads `data` as a JSON text the way the ledger reads a payload
/// ([`canonical::parse`]): the value, or the parser's one-line error.
///
/// Promises checked: a value's canonical text reads back to the same canonical text; where
/// `serde_json` also reads the text, both give the same value; where `serde_json` reads it, so
/// does the ledger's parser (which nests deeper and accepts `NaN` and `Infinity` besides).
pub fn canonical_json(data: &[u8]) -> Result<Value, JsonBytesError> {
    let text = std::str::from_utf8(data)?;
    let ours = canonical::parse(text);
    let theirs = serde_json::from_str::<serde_json::Value>(text);
    match (&ours, &theirs) {
        (Ok(v), Ok(s)) => assert_eq!(
            Value::from_serde(s).canonical(),
            v.canonical(),
            "serde_json and the ledger's parser read {text:?} differently"
        ),
        (Err(e), Ok(_)) => panic!("serde_json reads {text:?}, the ledger's parser does not: {e}"),
        _ => {}
    }
    let v = ours?;
    let c = v.canonical();
    let again = canonical::parse(&c)
        .unwrap_or_else(|e| panic!("the canonical text {c:?} of {text:?} does not read: {e}"));
    assert_eq!(
        again.canonical(),
        c,
        "canonical text of {text:?} is not stable"
    );
    Ok(v)
}

/// Reads `data` as one entry of a pack file (its type-and-size header, then a zlib stream)
/// the way `verify --deep` reads an entry whole: its kind and inflated bytes, or `None` where
/// the reader hands the object to gix instead (a delta, a bad header, a stream that does not
/// inflate to the recorded size, an object over the reader's size cap).
pub fn pack_entry(data: &[u8]) -> Option<(Kind, Vec<u8>)> {
    use crate::store::packread::{MAX_OBJECT_BYTES, entry_header};
    let (kind, size, header) = entry_header(data)?;
    assert!(header <= data.len(), "a header longer than its entry");
    if size > MAX_OBJECT_BYTES {
        return None;
    }
    let mut buf = vec![0; size];
    match libdeflater::Decompressor::new().zlib_decompress(&data[header..], &mut buf) {
        Ok(n) if n == size => Some((kind, buf)),
        _ => None,
    }
}

/// Splits `data` into blobs at each `0xff` byte, writes them as one pack (with its index) in a
/// temporary directory with the ledger's pack writer, and reads every one back through the
/// pack reader `verify --deep` uses. Returns how many distinct blobs were written.
///
/// Promise checked: every object written reads back whole, with its kind and bytes.
pub fn pack_round_trip(data: &[u8]) -> usize {
    use crate::store::pack::{Obj, write_pack};
    use crate::store::packread::{Packs, Reader};
    let hash = if data.first().is_some_and(|b| b & 1 == 1) {
        HashKind::Sha256
    } else {
        HashKind::Sha1
    };
    let mut objs: Vec<Obj> = Vec::new();
    for blob in data.split(|&b| b == 0xff) {
        let id = gix::objs::compute_hash(hash, Kind::Blob, blob).expect("hash a blob");
        if objs.iter().all(|o| o.id != id) {
            objs.push(Obj {
                id,
                kind: Kind::Blob,
                data: blob.to_vec(),
            });
        }
    }
    let dir = crate::scratch::dir("git-forum-fuzz-").expect("a temporary directory");
    let objects = dir.path().join("objects");
    std::fs::create_dir_all(&objects).expect("an objects directory");
    let level = gix::zlib::Compression::new(1).expect("level 1");
    write_pack(&objects, hash, &objs, level, false)
        .expect("write a pack")
        .release();
    let mut reader = Reader::new(Packs::open(&objects, hash));
    let mut buf = Vec::new();
    for o in objs.iter().rev() {
        assert_eq!(reader.read(&o.id, &mut buf), Some(Kind::Blob), "{}", o.id);
        assert!(buf == o.data, "{} does not read back as written", o.id);
    }
    objs.len()
}

/// Reads `data` as the write-ahead log does at recovery: the first byte picks the hash (bit 0:
/// SHA-256) and the log format (bit 1: format 1, else 2); the rest is read as a record's
/// payload and as the log's header. Returns the record's generation and object count, when it
/// decodes.
///
/// Promises checked: a decoded record, encoded again, decodes to itself with a matching
/// length and CRC; a decoded header, encoded again, decodes to itself.
pub fn wal_record(data: &[u8]) -> Option<(u64, usize)> {
    use crate::store::wal::{Header, WalRecord};
    let (&mode, payload) = data.split_first()?;
    let hash = if mode & 1 == 1 {
        HashKind::Sha256
    } else {
        HashKind::Sha1
    };
    let version = if mode & 2 == 2 { 1 } else { 2 };
    if let Some(h) = Header::decode(payload) {
        assert_eq!(Header::decode(&h.encode()), Some(h), "a header re-encodes");
    }
    let (generation, rec) = WalRecord::decode(payload, hash, version)?;
    let framed = rec.encode(generation);
    let p = checked_frame(&framed);
    assert_eq!(
        WalRecord::decode(p, hash, 2),
        Some((generation, rec.clone())),
        "a record re-encodes"
    );
    Some((generation, rec.objects.len()))
}

/// Builds a log record from `data` (the generation, the tips and the objects all taken from
/// it), encodes it as an append does and decodes it as recovery does. Returns its encoded
/// length.
///
/// Promise checked: the record decodes to itself, with a matching length and CRC.
pub fn wal_round_trip(data: &[u8]) -> usize {
    use crate::store::wal::WalRecord;
    let mut take = {
        let mut at = 0;
        move |n: usize| {
            let b: Vec<u8> = (0..n).map(|i| *data.get(at + i).unwrap_or(&0)).collect();
            at += n;
            b
        }
    };
    let head = take(2);
    let hash = if head[0] & 1 == 1 {
        HashKind::Sha256
    } else {
        HashKind::Sha1
    };
    let generation = u64::from_le_bytes(take(8).try_into().unwrap());
    let id = |b: Vec<u8>| gix::ObjectId::try_from(b.as_slice()).expect("an id's length");
    let old = (head[0] & 2 == 2).then(|| id(take(hash.len_in_bytes())));
    let new = id(take(hash.len_in_bytes()));
    let rest = data.get(12 + 2 * hash.len_in_bytes()..).unwrap_or(&[]);
    let kinds = [Kind::Blob, Kind::Tree, Kind::Commit, Kind::Tag];
    let objects = if rest.is_empty() {
        Vec::new()
    } else {
        rest.split(|&b| b == 0xff)
            .enumerate()
            .map(|(i, d)| (kinds[(i + head[1] as usize) % 4], d.to_vec()))
            .collect()
    };
    let rec = WalRecord { old, new, objects };
    let framed = rec.encode(generation);
    let p = checked_frame(&framed);
    assert_eq!(WalRecord::decode(p, hash, 2), Some((generation, rec)));
    framed.len()
}

/// Reads `data` as the standard input git gives the pre-push and pre-receive hooks: the
/// whitespace-split fields of each line that names a ledger ref (its third field), or the
/// hook's one-line refusal.
///
/// Promises checked: every line kept names a ledger ref; a refusal is one line. The refusal is
/// given as that line of text, because the hooks' error type is the crate's own and this entry
/// point is public.
pub fn hook_lines(data: &[u8]) -> Result<Vec<Vec<String>>, String> {
    let mut kept = Vec::new();
    let read =
        crate::surface::hooks::ledger_lines(&mut &data[..], "pre-push", 2, false, &mut |f| {
            kept.push(f.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        });
    if let Err(e) = read {
        let e = e.to_string();
        assert!(!e.contains('\n'), "a refusal of more than one line: {e:?}");
        return Err(e);
    }
    for f in &kept {
        assert!(
            f.get(2)
                .is_some_and(|r| r.starts_with(crate::store::git::LEDGER_PREFIX)),
            "kept a line that names no ledger ref: {f:?}"
        );
    }
    Ok(kept)
}

/// Imports `data` as a trace in every format `git forum flight` reads (Forum's four, OTLP/JSON,
/// Claude Code transcripts): for each, the format's name and the number of entries the trace
/// folds into, or the one-line error.
///
/// Promise checked: an error is one line. The error is given as that line of text, because
/// the importer's error type is the crate's own and this entry point is public.
pub fn trace(data: &[u8]) -> Vec<(&'static str, Result<usize, String>)> {
    use crate::flight::{Format, import};
    let Ok(text) = std::str::from_utf8(data) else {
        return Vec::new();
    };
    Format::ALL
        .into_iter()
        .map(|fmt| {
            let got = import(text, fmt).map(|f| f.items.len()).map_err(|e| {
                let e = e.to_string();
                assert!(
                    !e.contains('\n'),
                    "{}: an error of more than one line: {e:?}",
                    fmt.name()
                );
                e
            });
            (fmt.name(), got)
        })
        .collect()
}

/// Reads `data` as the MCP server's standard input, line by line with the server's line cap
/// (`cap`, or [`crate::serve::mcp::MAX_LINE`] when `None`), and says what the server makes of
/// each non-blank line: `too long`, `reply CODE` (an error answered without the dispatcher),
/// `quiet` (a response or an unreadable notification), `notice METHOD` or `request`.
///
/// Promises checked: no line kept is longer than the cap; the reader stops at the end of input.
pub fn mcp_frames(data: &[u8], cap: Option<usize>) -> Vec<String> {
    use crate::serve::mcp::session::read_line;
    use crate::serve::mcp::{Incoming, MAX_LINE, read};
    let cap = cap.unwrap_or(MAX_LINE);
    let mut input = std::io::BufReader::with_capacity(64, data);
    let mut line = Vec::new();
    let mut out = Vec::new();
    // Each read takes at least one byte or ends the loop; this bound only turns a reader that
    // stopped consuming into a failure instead of a hang.
    for _ in 0..=data.len() {
        line.clear();
        let (more, too_long) = read_line(&mut input, &mut line, cap).expect("read a slice");
        assert!(
            line.len() <= cap,
            "a line of {} bytes past a cap of {cap}",
            line.len()
        );
        if !more && line.is_empty() {
            assert!(input.fill_buf().expect("read a slice").is_empty());
            return out;
        }
        if too_long {
            out.push("too long".to_string());
        } else if !line.trim_ascii().is_empty() {
            out.push(match read(line.trim_ascii()) {
                Incoming::Reply(r) => format!("reply {}", r["error"]["code"]),
                Incoming::Quiet => "quiet".to_string(),
                Incoming::Notice { method, .. } => format!("notice {method}"),
                Incoming::Request(_) => "request".to_string(),
            });
        }
        if !more {
            return out;
        }
    }
    panic!(
        "the MCP line reader did not reach the end of {} bytes",
        data.len()
    );
}

/// The cargo-fuzz targets (`fuzz/fuzz_targets/NAME.rs`), each with a seed corpus in
/// `fuzz/corpus/NAME/`.
pub const TARGETS: [&str; 6] = [
    "canonical_json",
    "pack",
    "wal",
    "hook_stdin",
    "trace",
    "mcp_frames",
];

/// Runs fuzz target `name` on `data`: what `cargo fuzz run NAME` runs on each input, and what
/// the stable test replays every corpus file through. Panics on a name not in [`TARGETS`].
pub fn target(name: &str, data: &[u8]) {
    match name {
        "canonical_json" => {
            let _ = canonical_json(data);
        }
        // Writing a pack costs a temporary directory and files per input, so only inputs
        // that start with `W` go through the writer; the rest are read as one entry.
        "pack" => match data.strip_prefix(b"W") {
            Some(blobs) => {
                pack_round_trip(blobs);
            }
            None => {
                pack_entry(data);
            }
        },
        "wal" => {
            wal_record(data);
            wal_round_trip(data);
        }
        "hook_stdin" => {
            let _ = hook_lines(data);
        }
        "trace" => {
            trace(data);
        }
        "mcp_frames" => {
            mcp_frames(data, None);
            mcp_frames(data, Some(64));
        }
        other => panic!("no fuzz target {other:?}; the targets are {TARGETS:?}"),
    }
}

/// The payload of one framed write-ahead-log record, after checking its frame: the length
/// prefix says the payload's length and the CRC is the payload's.
fn checked_frame(framed: &[u8]) -> &[u8] {
    let (len, rest) = framed.split_at(4);
    let (crc, p) = rest.split_at(4);
    assert_eq!(
        u32::from_le_bytes(len.try_into().unwrap()) as usize,
        p.len()
    );
    assert_eq!(
        u32::from_le_bytes(crc.try_into().unwrap()),
        crc32fast::hash(p)
    );
    p
}
