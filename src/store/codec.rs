//! The ledger commit codec: the exact bytes of an entry's blob, tree and commit, and the parser
//! that reads an entry back out of a commit. Pure: no I/O, no clock, so every machine builds
//! the same commit ids from the same entries.

use gix::ObjectId;
use gix::hash::Kind as HashKind;
use gix::objs::Kind;

use super::error::{StoreError, gix_err};
use super::pack::Obj;
use crate::ledger::Entry;
use crate::ledger::canonical;

/// The file name of the one blob in an entry's tree.
pub const PAYLOAD_FILE: &str = "payload.json";

/// The fixed committer of every ledger commit.
pub const COMMITTER: &str = "git-forum <ledger@git-forum.invalid>";

pub(crate) const AUTHOR_EMAIL: &str = "ledger@git-forum.invalid";

/// A commit parsed just enough for the ledger.
pub(crate) struct RawCommit<'a> {
    pub(crate) tree: ObjectId,
    pub(crate) parents: Parents,
    pub(crate) message: &'a [u8],
}

/// A commit's parents as the ledger reads them: the first, and how many there are. Kept
/// without a vector, which cost an allocation per commit parsed (verify parses every one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Parents {
    first: Option<ObjectId>,
    count: usize,
}

impl Parents {
    fn push(&mut self, id: ObjectId) {
        self.first.get_or_insert(id);
        self.count += 1;
    }

    /// The first parent, `None` for a root commit.
    pub(crate) fn first(&self) -> Option<&ObjectId> {
        self.first.as_ref()
    }

    /// How many parents the commit names.
    pub(crate) fn len(&self) -> usize {
        self.count
    }
}

pub(crate) fn parse_commit(data: &[u8], hash: HashKind) -> Option<RawCommit<'_>> {
    // The headers end at the first blank line. Found with a search for `\n` rather than a
    // substring search, whose searcher is built anew on each call (the headers are a few
    // lines, and a deep verify parses every commit).
    let split = memchr::memchr_iter(b'\n', data).find(|&i| data.get(i + 1) == Some(&b'\n'))?;
    let (headers, message) = (&data[..split], &data[split + 2..]);
    let mut tree = None;
    let mut parents = Parents::default();
    for line in headers.split(|b| *b == b'\n') {
        if let Some(hex) = line.strip_prefix(b"tree ") {
            tree = Some(ObjectId::from_hex(hex).ok()?);
        } else if let Some(hex) = line.strip_prefix(b"parent ") {
            parents.push(ObjectId::from_hex(hex).ok()?);
        }
    }
    let tree = tree?;
    if tree.kind() != hash {
        return None;
    }
    Some(RawCommit {
        tree,
        parents,
        message,
    })
}

/// Why a commit message does not carry a ledger entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum MessageEntryError {
    #[error("commit message is not UTF-8")]
    NotUtf8,
    #[error("commit message does not end in an entry: {0}")]
    NotJson(#[source] canonical::ParseError),
    #[error(transparent)]
    Field(#[from] crate::ledger::EntryFieldError),
}

/// The entry stored in a ledger commit message (its last line).
pub(crate) fn entry_from_message(message: &[u8]) -> Result<Entry, MessageEntryError> {
    entry_from_message_checked(message).map(|(e, _)| e)
}

/// Like [`entry_from_message`], also saying whether the entry line is exactly
/// `entry.canonical_json()`: the fast reader accepts nothing else, so when it read the line the
/// caller need not write the entry out again to compare.
pub(crate) fn entry_from_message_checked(
    message: &[u8],
) -> Result<(Entry, bool), MessageEntryError> {
    let text = std::str::from_utf8(message).map_err(|_| MessageEntryError::NotUtf8)?;
    // The last line, found with a byte search from the end (a `str` split on a `char` builds
    // a searcher per call, and verify reads one message an entry).
    let text = text.trim_end_matches('\n');
    let line = match memchr::memrchr(b'\n', text.as_bytes()) {
        Some(i) => &text[i + 1..],
        None => text,
    };
    if let Some(e) = Entry::from_canonical_json(line) {
        return Ok((e, true));
    }
    let v = canonical::parse(line).map_err(MessageEntryError::NotJson)?;
    Ok((Entry::from_value(&v)?, false))
}

/// Appends a one-line rendition of `s` safe for a commit subject or author name: control
/// characters and the `forbidden` ones become `_`, surrounding whitespace is trimmed, and an
/// empty result becomes `-`.
fn push_one_line(out: &mut String, s: &str, forbidden: &str) {
    let start = out.len();
    if s.chars().any(|c| c.is_control() || forbidden.contains(c)) {
        out.extend(s.chars().map(|c| {
            if c.is_control() || forbidden.contains(c) {
                '_'
            } else {
                c
            }
        }));
    } else {
        out.push_str(s);
    }
    let trimmed = out[start..].trim();
    if trimmed.len() != out.len() - start {
        let t = trimmed.to_string();
        out.truncate(start);
        out.push_str(&t);
    }
    if out.len() == start {
        out.push('-');
    }
}

/// A one-line rendition of `s` safe for a commit subject or author name.
pub(super) fn one_line(s: &str, forbidden: &str) -> String {
    let mut out = String::with_capacity(s.len());
    push_one_line(&mut out, s, forbidden);
    out
}

/// Seconds for the commit dates: the entry's `ts` floored, kept within git's date range.
fn commit_seconds(ts: f64) -> i64 {
    if ts.is_finite() {
        ts.floor().clamp(0.0, 253_402_300_799.0) as i64
    } else {
        0
    }
}

fn push_subject(out: &mut String, entry: &Entry) {
    let start = out.len();
    out.push_str(&entry.kind);
    out.push_str(" #");
    out.push_str(itoa::Buffer::new().format(entry.seq));
    out.push_str(" by ");
    out.push_str(&entry.actor);
    // Rewritten only when it needs to be (verify rebuilds a subject per entry).
    let s = &out[start..];
    if s.is_empty() || s.trim().len() != s.len() || s.chars().any(char::is_control) {
        let subject = out.split_off(start);
        push_one_line(out, &subject, "");
    }
}

/// The commit message: subject, blank line, the entry as canonical JSON.
pub fn commit_message(entry: &Entry) -> String {
    let mut out = String::with_capacity(400);
    push_subject(&mut out, entry);
    out.push_str("\n\n");
    out.push_str(&entry.canonical_json());
    out.push('\n');
    out
}

/// The exact bytes of the commit for `entry` with `tree` and `parent`.
pub fn commit_bytes(entry: &Entry, tree: &ObjectId, parent: Option<&ObjectId>) -> Vec<u8> {
    let mut out = String::with_capacity(700);
    push_commit_bytes(&mut out, entry, tree, parent);
    out.into_bytes()
}

/// [`commit_bytes`] written into `out` (cleared first), so an import of many entries reuses
/// one buffer.
pub(crate) fn push_commit_bytes(
    out: &mut String,
    entry: &Entry,
    tree: &ObjectId,
    parent: Option<&ObjectId>,
) {
    out.clear();
    push_commit_head(out, entry, tree, parent);
    entry.push_canonical_json(out);
    out.push('\n');
}

/// Appends the commit for `entry` up to its last line (the canonical entry JSON and a
/// newline) to `out`.
fn push_commit_head(out: &mut String, entry: &Entry, tree: &ObjectId, parent: Option<&ObjectId>) {
    let secs = commit_seconds(entry.ts);
    out.push_str("tree ");
    crate::ledger::hash::push_hex(out, tree.as_slice());
    if let Some(p) = parent {
        out.push_str("\nparent ");
        crate::ledger::hash::push_hex(out, p.as_slice());
    }
    out.push_str("\nauthor ");
    push_one_line(out, &entry.actor, "<>");
    // `commit_seconds` is never negative.
    let secs = secs as u64;
    out.push_str(" <");
    out.push_str(AUTHOR_EMAIL);
    out.push_str("> ");
    out.push_str(itoa::Buffer::new().format(secs));
    out.push_str(" +0000\ncommitter ");
    out.push_str(COMMITTER);
    out.push(' ');
    out.push_str(itoa::Buffer::new().format(secs));
    out.push_str(" +0000\n\n");
    push_subject(out, entry);
    out.push_str("\n\n");
}

/// Whether `data` is exactly the commit of `entry` with `tree` and `parent`. `line_canonical`
/// says the message's last line is already known to be `entry.canonical_json()`. The commit's
/// head is written into `scratch` (cleared first), so a verify of every commit reuses one
/// buffer rather than allocating one per entry.
pub(crate) fn is_commit_of(
    data: &[u8],
    entry: &Entry,
    tree: &ObjectId,
    parent: Option<&ObjectId>,
    line_canonical: bool,
    scratch: &mut String,
) -> bool {
    scratch.clear();
    push_commit_head(scratch, entry, tree, parent);
    let Some(rest) = data.strip_prefix(scratch.as_bytes()) else {
        return false;
    };
    let Some(line) = rest.strip_suffix(b"\n") else {
        return false;
    };
    if line_canonical {
        !line.contains(&b'\n')
    } else {
        line == entry.canonical_json().as_bytes()
    }
}

/// The tree holding one body blob.
pub fn tree_bytes(blob: &ObjectId) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    push_tree_bytes(&mut out, blob);
    out
}

/// [`tree_bytes`] written into `out` (cleared first).
pub(crate) fn push_tree_bytes(out: &mut Vec<u8>, blob: &ObjectId) {
    out.clear();
    out.extend_from_slice(b"100644 ");
    out.extend_from_slice(PAYLOAD_FILE.as_bytes());
    out.push(0);
    out.extend_from_slice(blob.as_slice());
}

/// Each byte's value as a hex digit (either case), 0 for a byte that is not one.
const NIBBLES: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = match b as u8 {
            c @ b'0'..=b'9' => c - b'0',
            c @ b'a'..=b'f' => c - b'a' + 10,
            c @ b'A'..=b'F' => c - b'A' + 10,
            _ => 0,
        };
        b += 1;
    }
    t
};

/// The 32 bytes of a 64-digit hex hash (entry hashes were checked to be lowercase hex). Each
/// digit is looked up in a table rather than matched by range: verify turns three hashes per
/// entry into bytes.
pub(crate) fn hex_to_bytes(h: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (o, pair) in out.iter_mut().zip(h.as_bytes().chunks_exact(2)) {
        *o = (NIBBLES[pair[0] as usize] << 4) | NIBBLES[pair[1] as usize];
    }
    out
}

pub(crate) fn object(hash: HashKind, kind: Kind, data: Vec<u8>) -> Result<Obj, StoreError> {
    let id = object_id(hash, kind, &data)?;
    Ok(Obj { id, kind, data })
}

/// The id of an object of `kind` holding `data`: what `gix::objs::compute_hash` gives, with
/// the object's header (`KIND SIZE\0`) written straight into a stack buffer. gix writes it
/// through `io::Write` into a small vector, which took 4 % of a 100,000-entry deep verify's
/// CPU (three objects hashed per entry).
pub(crate) fn object_id(hash: HashKind, kind: Kind, data: &[u8]) -> Result<ObjectId, StoreError> {
    // The longest kind ("commit"), a space, 20 digits and a NUL: 28 bytes.
    let mut head = [0u8; 32];
    let name = kind.as_bytes();
    head[..name.len()].copy_from_slice(name);
    head[name.len()] = b' ';
    let mut at = name.len() + 1;
    let mut digits = itoa::Buffer::new();
    let size = digits.format(data.len()).as_bytes();
    head[at..at + size.len()].copy_from_slice(size);
    at += size.len() + 1;
    let mut hasher = gix::hash::hasher(hash);
    hasher.update(&head[..at]);
    hasher.update(data);
    hasher
        .try_finalize()
        .map_err(|e| gix_err("hashing an object", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::NewEntry;
    use crate::ledger::hash::sha256_hex;
    use crate::ledger::kind;

    fn entry(actor: &str, ts: f64) -> Entry {
        let new = NewEntry {
            actor: actor.into(),
            kind: kind::REQUEST.into(),
            causal_parent: None,
            payload: canonical::parse(r#"{"text":"hi"}"#).unwrap(),
            ts,
        };
        let body = new.validate().unwrap();
        Entry::next(None, &new, sha256_hex(body.as_bytes()))
    }

    #[test]
    fn a_commit_parses_back_to_its_tree_parent_and_entry() {
        let e = entry("alice", 1_700_000_000.75);
        let blob = object(HashKind::Sha1, Kind::Blob, b"{}".to_vec()).unwrap();
        let tree = object(HashKind::Sha1, Kind::Tree, tree_bytes(&blob.id)).unwrap();
        let parent = object(HashKind::Sha1, Kind::Blob, b"p".to_vec())
            .unwrap()
            .id;
        let bytes = commit_bytes(&e, &tree.id, Some(&parent));
        let raw = parse_commit(&bytes, HashKind::Sha1).expect("parses");
        assert_eq!(raw.tree, tree.id);
        assert_eq!((raw.parents.first(), raw.parents.len()), (Some(&parent), 1));
        // A merge's parents: the first, and the count of all of them.
        let text = String::from_utf8(bytes.clone()).unwrap();
        let (head, rest) = text.split_once("\nauthor ").unwrap();
        let merge = format!("{head}\nparent {}\nauthor {rest}", tree.id);
        let raw = parse_commit(merge.as_bytes(), HashKind::Sha1).expect("parses");
        assert_eq!((raw.parents.first(), raw.parents.len()), (Some(&parent), 2));
        let raw = parse_commit(&bytes, HashKind::Sha1).expect("parses");
        let (back, canonical_line) = entry_from_message_checked(raw.message).unwrap();
        assert!(canonical_line);
        assert_eq!(back.canonical_json(), e.canonical_json());
        assert!(is_commit_of(
            &bytes,
            &e,
            &tree.id,
            Some(&parent),
            true,
            &mut String::from("stale")
        ));
        assert!(!is_commit_of(
            &bytes,
            &e,
            &tree.id,
            None,
            true,
            &mut String::new()
        ));
        // The dates are the entry's ts in whole seconds, and the message is the subject line,
        // a blank line and the entry.
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.contains(&format!("<{AUTHOR_EMAIL}> 1700000000 +0000\n")));
        assert!(text.ends_with(&commit_message(&e)));
        // A commit of another hash kind is not a ledger commit of this repository.
        assert!(parse_commit(text.as_bytes(), HashKind::Sha256).is_none());
    }

    /// The forms that write into a reused buffer give the same bytes as the ones that return
    /// a new one, whatever the buffer held before.
    #[test]
    fn bytes_written_into_a_reused_buffer_are_the_same() {
        let blob = object(HashKind::Sha256, Kind::Blob, b"{}".to_vec()).unwrap();
        let mut tree_buf = b"an earlier tree, longer than this one's bytes".to_vec();
        push_tree_bytes(&mut tree_buf, &blob.id);
        assert_eq!(tree_buf, tree_bytes(&blob.id));
        let tree = object_id(HashKind::Sha256, Kind::Tree, &tree_buf).unwrap();
        let mut commit_buf = String::from("an earlier commit");
        for (actor, parent) in [("alice", None), ("b<o>b", Some(&blob.id))] {
            let e = entry(actor, 1_700_000_000.5);
            push_commit_bytes(&mut commit_buf, &e, &tree, parent);
            let fresh = commit_bytes(&e, &tree, parent);
            assert_eq!(commit_buf.as_bytes(), fresh.as_slice());
            let mut head = String::from("stale");
            assert!(is_commit_of(&fresh, &e, &tree, parent, false, &mut head));
        }
    }

    /// The id written with the header on the stack is gix's, for every kind, both hashes and
    /// sizes whose decimal length differs.
    #[test]
    fn object_ids_are_the_ones_gix_computes() {
        for hash in [HashKind::Sha1, HashKind::Sha256] {
            for kind in [Kind::Blob, Kind::Tree, Kind::Commit, Kind::Tag] {
                for len in [0usize, 1, 9, 10, 99, 100, 562, 65_537] {
                    let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
                    let want = gix::objs::compute_hash(hash, kind, &data).unwrap();
                    assert_eq!(object_id(hash, kind, &data).unwrap(), want, "{kind} {len}");
                }
            }
        }
    }

    #[test]
    fn names_and_subjects_stay_on_one_line() {
        assert_eq!(one_line("  a\nb<c>  ", "<>"), "a_b_c_");
        assert_eq!(one_line("   ", ""), "-");
        let e = entry("bob <b@x>", 5.0);
        let text = String::from_utf8(commit_bytes(
            &e,
            &object(HashKind::Sha1, Kind::Tree, Vec::new()).unwrap().id,
            None,
        ))
        .unwrap();
        // An actor cannot close the author's name and forge the email.
        assert!(text.contains("\nauthor bob _b@x_ <ledger@git-forum.invalid> 5 +0000\n"));
        assert_eq!(commit_seconds(f64::NAN), 0);
        assert_eq!(commit_seconds(-3.0), 0);
    }

    #[test]
    fn hex_to_bytes_reads_a_sha256() {
        let h = sha256_hex(b"x");
        let bytes = hex_to_bytes(&h);
        let mut back = String::new();
        crate::ledger::hash::push_hex(&mut back, &bytes);
        assert_eq!(back, h);
    }

    /// The table gives every byte the value a match on the digit ranges gives: hex digits of
    /// either case their value, any other byte 0 (as before the table).
    #[test]
    fn every_byte_reads_as_the_digit_ranges_say() {
        for b in 0..=255u8 {
            let want = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                b'A'..=b'F' => b - b'A' + 10,
                _ => 0,
            };
            assert_eq!(NIBBLES[b as usize], want, "byte {b}");
        }
        let mixed = "0123456789abcdefABCDEFxyz-".repeat(3);
        let got = hex_to_bytes(&mixed);
        assert_eq!(got[..3], [0x01, 0x23, 0x45]);
        assert_eq!([got[5], got[7], got[10]], [0xab, 0xef, 0xef]);
        assert_eq!([got[11], got[12]], [0, 0], "`xy` and `z-` read as zeros");
    }
}
