//! The ledger core: entries, hashes, chain verification, Merkle checkpoints, causal chains and
//! the [`Storage`] trait. Pure: no I/O, no clock (timestamps are passed in), no randomness.

pub mod canonical;
pub mod dsse;
mod entry_error;
pub mod hash;
pub(crate) mod kind;
pub mod merkle;
pub(crate) mod proof;
pub mod tlog;

use std::collections::HashMap;

pub use canonical::Value;
pub use entry_error::{EntryFieldError, InvalidEntry};
pub use hash::{GENESIS, entry_hash, payload_hash};
pub(crate) use merkle::merkle_root;

/// Largest payload body accepted by an append, in canonical bytes (16 MiB). A body this large
/// is almost always a mistake (a model's runaway output, a binary pasted as text); callers keep
/// a head and a hash of anything bigger.
pub(crate) const MAX_PAYLOAD_BYTES: usize = 16 * 1024 * 1024;

/// Longest actor or kind accepted by an append, in bytes.
pub(crate) const MAX_LABEL_BYTES: usize = 256;

/// One ledger entry, Forum's eight fields (forum-spec §2). Its serde form (used by proof files)
/// has the fields in Forum's order and refuses unknown ones.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub seq: u64,
    pub ts: f64,
    pub actor: String,
    pub kind: String,
    pub causal_parent: Option<i64>,
    pub payload_hash: String,
    pub prev_hash: String,
    pub entry_hash: String,
}

/// What a caller hands to an append: everything but the chain fields, which the storage
/// derives from the tip it appends on.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEntry {
    pub actor: String,
    pub kind: String,
    pub causal_parent: Option<i64>,
    pub payload: Value,
    /// Seconds since the epoch; the caller reads the clock (or pins it for reproducible runs).
    pub ts: f64,
}

impl NewEntry {
    /// Checks what an append accepts: actor and kind non-empty, at most
    /// [`MAX_LABEL_BYTES`], without control characters; the body at most
    /// [`MAX_PAYLOAD_BYTES`] canonical bytes; a finite, non-negative timestamp.
    /// Returns the canonical body on success, so callers need not encode it twice.
    pub fn validate(&self) -> Result<String, InvalidEntry> {
        for (what, s) in [("actor", &self.actor), ("kind", &self.kind)] {
            if s.is_empty() {
                return Err(InvalidEntry::Empty(what));
            }
            if s.len() > MAX_LABEL_BYTES {
                return Err(InvalidEntry::TooLong(what));
            }
            if let Some(c) = s.chars().find(|c| c.is_control()) {
                return Err(InvalidEntry::ControlCharacter {
                    what,
                    value: s.clone(),
                    code: c as u32,
                });
            }
        }
        if !self.ts.is_finite() || self.ts < 0.0 {
            return Err(InvalidEntry::BadTimestamp(self.ts));
        }
        let body = self.payload.canonical();
        if body.len() > MAX_PAYLOAD_BYTES {
            return Err(InvalidEntry::PayloadTooLarge(body.len()));
        }
        Ok(body)
    }
}

impl NewEntry {
    /// Checks that the causal parent, if any, names an entry already in a ledger whose next
    /// seq is `next_seq`: a parent must come before its child.
    pub(crate) fn check_parent(&self, next_seq: u64) -> Result<(), InvalidEntry> {
        let Some(p) = self.causal_parent else {
            return Ok(());
        };
        if u64::try_from(p).is_ok_and(|p| p < next_seq) {
            return Ok(());
        }
        Err(match next_seq {
            0 => InvalidEntry::ParentInEmptyLedger(p),
            n => InvalidEntry::NoSuchParent {
                parent: p,
                last: n - 1,
            },
        })
    }
}

impl Entry {
    /// The entry that `new` becomes when appended after `head` (or first, when `head` is None).
    pub fn next(head: Option<&Entry>, new: &NewEntry, payload_hash: String) -> Entry {
        let (seq, prev_hash) = match head {
            Some(h) => (h.seq + 1, h.entry_hash.clone()),
            None => (0, GENESIS.to_string()),
        };
        let entry_hash = hash::entry_hash(
            seq,
            new.ts,
            &new.actor,
            &new.kind,
            new.causal_parent,
            &payload_hash,
            &prev_hash,
        );
        Entry {
            seq,
            ts: new.ts,
            actor: new.actor.clone(),
            kind: new.kind.clone(),
            causal_parent: new.causal_parent,
            payload_hash,
            prev_hash,
            entry_hash,
        }
    }

    /// Whether the stored entry hash is the one its fields hash to (`computed_hash() ==
    /// entry_hash`, without writing the digest out in hex). The preimage is written into
    /// `scratch` (cleared first) rather than a new string: verify and import check one entry
    /// after another with the same buffer.
    pub(crate) fn hash_matches_in(&self, scratch: &mut String) -> bool {
        hash::entry_hash_matches(
            self.seq,
            self.ts,
            &self.actor,
            &self.kind,
            self.causal_parent,
            &self.payload_hash,
            &self.prev_hash,
            &self.entry_hash,
            scratch,
        )
    }

    /// The entry hash recomputed from the stored fields.
    pub(crate) fn computed_hash(&self) -> String {
        hash::entry_hash(
            self.seq,
            self.ts,
            &self.actor,
            &self.kind,
            self.causal_parent,
            &self.payload_hash,
            &self.prev_hash,
        )
    }

    /// The eight fields as a JSON object in Forum's order.
    pub fn to_value(&self) -> Value {
        Value::Object(vec![
            ("seq".into(), Value::Int(self.seq.into())),
            ("ts".into(), Value::Float(self.ts)),
            ("actor".into(), Value::str(&self.actor)),
            ("kind".into(), Value::str(&self.kind)),
            (
                "causal_parent".into(),
                self.causal_parent.map(Value::int).unwrap_or(Value::Null),
            ),
            ("payload_hash".into(), Value::str(&self.payload_hash)),
            ("prev_hash".into(), Value::str(&self.prev_hash)),
            ("entry_hash".into(), Value::str(&self.entry_hash)),
        ])
    }

    /// The canonical JSON of the eight fields (what `to_value().canonical()` gives), written
    /// directly: verify rebuilds one per entry, so this sits on its hot path.
    pub(crate) fn canonical_json(&self) -> String {
        let mut out = String::with_capacity(320 + self.actor.len() + self.kind.len());
        self.push_canonical_json(&mut out);
        out
    }

    /// Appends [`Entry::canonical_json`] to `out` (import writes one per entry into a buffer it
    /// reuses).
    pub(crate) fn push_canonical_json(&self, out: &mut String) {
        // Integers through `itoa` rather than `write!`, whose formatting machinery was 4 % of a
        // 100,000-entry import's CPU.
        out.push_str("{\"actor\":");
        canonical::write_ascii_string(&self.actor, out);
        out.push_str(",\"causal_parent\":");
        match self.causal_parent {
            Some(p) => out.push_str(itoa::Buffer::new().format(p)),
            None => out.push_str("null"),
        }
        out.push_str(",\"entry_hash\":");
        canonical::write_ascii_string(&self.entry_hash, out);
        out.push_str(",\"kind\":");
        canonical::write_ascii_string(&self.kind, out);
        out.push_str(",\"payload_hash\":");
        canonical::write_ascii_string(&self.payload_hash, out);
        out.push_str(",\"prev_hash\":");
        canonical::write_ascii_string(&self.prev_hash, out);
        out.push_str(",\"seq\":");
        out.push_str(itoa::Buffer::new().format(self.seq));
        out.push_str(",\"ts\":");
        canonical::push_python_float_json(out, self.ts);
        out.push('}');
    }

    /// Reads an entry from exactly the text [`Entry::canonical_json`] writes, when its strings
    /// need no escapes (the common case); `None` for anything else, which the caller then reads
    /// with the general parser. A fast path for walking commits.
    pub(crate) fn from_canonical_json(line: &str) -> Option<Entry> {
        fn take(rest: &mut &str, lit: &str) -> Option<()> {
            *rest = rest.strip_prefix(lit)?;
            Some(())
        }
        // The closing quote found with a byte search (a `str` search for a `char` builds a
        // searcher per call), then every byte checked without an early exit (vector compares).
        fn string<'a>(rest: &mut &'a str) -> Option<&'a str> {
            let body = rest.strip_prefix('"')?;
            let end = memchr::memchr(b'"', body.as_bytes())?;
            let s = &body[..end];
            let plain = |b: u8| (b.wrapping_sub(0x20) < 0x5f) & (b != b'\\');
            if !s.bytes().fold(true, |ok, b| ok & plain(b)) {
                return None;
            }
            *rest = &body[end + 1..];
            Some(s)
        }
        fn number<'a>(rest: &mut &'a str) -> Option<&'a str> {
            let end = rest.find([',', '}']).unwrap_or(rest.len());
            let (n, after) = rest.split_at(end);
            *rest = after;
            Some(n)
        }
        fn int(n: &str) -> Option<&str> {
            let digits = n.strip_prefix('-').unwrap_or(n);
            let ok = !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit())
                && (digits == "0" || !digits.starts_with('0'))
                && n != "-0";
            ok.then_some(n)
        }
        let mut rest = line;
        take(&mut rest, "{\"actor\":")?;
        let actor = string(&mut rest)?;
        take(&mut rest, ",\"causal_parent\":")?;
        let parent = number(&mut rest)?;
        let causal_parent = if parent == "null" {
            None
        } else {
            Some(int(parent)?.parse().ok()?)
        };
        take(&mut rest, ",\"entry_hash\":")?;
        let entry_hash = string(&mut rest)?;
        take(&mut rest, ",\"kind\":")?;
        let kind = string(&mut rest)?;
        take(&mut rest, ",\"payload_hash\":")?;
        let payload_hash = string(&mut rest)?;
        take(&mut rest, ",\"prev_hash\":")?;
        let prev_hash = string(&mut rest)?;
        take(&mut rest, ",\"seq\":")?;
        let seq = int(number(&mut rest)?)?.parse().ok()?;
        take(&mut rest, ",\"ts\":")?;
        let ts_text = number(&mut rest)?;
        if rest != "}" || !ts_text.contains(['.', 'e']) {
            return None;
        }
        let ts: f64 = ts_text.parse().ok()?;
        if !ts.is_finite() || !canonical::is_python_float_json(ts, ts_text) {
            return None;
        }
        if ![entry_hash, payload_hash, prev_hash]
            .iter()
            .all(|h| hash::is_hash(h))
        {
            return None;
        }
        Some(Entry {
            seq,
            ts,
            actor: actor.to_string(),
            kind: kind.to_string(),
            causal_parent,
            payload_hash: payload_hash.to_string(),
            prev_hash: prev_hash.to_string(),
            entry_hash: entry_hash.to_string(),
        })
    }

    /// The entry as serde JSON, for `--json` output.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        self.to_value().to_serde()
    }

    /// Reads the eight fields from a JSON object, checking their types.
    pub(crate) fn from_value(v: &Value) -> Result<Entry, EntryFieldError> {
        let field = |name: &str| {
            v.get(name)
                .ok_or_else(|| EntryFieldError::Missing(name.to_string()))
        };
        let text = |name: &str| -> Result<String, EntryFieldError> {
            field(name)?
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| EntryFieldError::NotString(name.to_string()))
        };
        let hash = |name: &str| -> Result<String, EntryFieldError> {
            let h = text(name)?;
            if hash::is_hash(&h) {
                Ok(h)
            } else {
                Err(EntryFieldError::NotHash(name.to_string()))
            }
        };
        let seq = match field("seq")? {
            Value::Int(i) => i.as_u64().ok_or(EntryFieldError::SeqOutOfRange)?,
            _ => return Err(EntryFieldError::SeqNotInteger),
        };
        let ts = match field("ts")? {
            Value::Float(f) => *f,
            Value::Int(i) => i
                .as_str()
                .parse::<f64>()
                .map_err(|_| EntryFieldError::TsNotNumber)?,
            _ => return Err(EntryFieldError::TsNotNumber),
        };
        let causal_parent = match field("causal_parent")? {
            Value::Null => None,
            Value::Int(i) => Some(i.as_i64().ok_or(EntryFieldError::ParentOutOfRange)?),
            _ => return Err(EntryFieldError::ParentNotInteger),
        };
        Ok(Entry {
            seq,
            ts,
            actor: text("actor")?,
            kind: text("kind")?,
            causal_parent,
            payload_hash: hash("payload_hash")?,
            prev_hash: hash("prev_hash")?,
            entry_hash: hash("entry_hash")?,
        })
    }
}

/// What is wrong at the first entry where the record and the chain split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainProblem {
    /// The entry at this position carries a later seq: entries are missing before it.
    Missing { expected: u64, found: u64 },
    /// This entry and the next carry each other's seq.
    Swapped { expected: u64, found: u64 },
    /// The entry's seq is not the position it sits at.
    OutOfOrder { expected: u64, found: u64 },
    /// `prev_hash` does not name the previous entry's hash.
    BrokenLink,
    /// The stored entry hash differs from the hash of the stored fields: the entry was edited.
    EditedEntry,
}

impl ChainProblem {
    /// What seq `found` standing where seq `expected` belongs means, given the seq of the
    /// entry after it when known (`next_seq`): a swap, a deletion, or entries out of order.
    pub(crate) fn of_seq(expected: u64, found: u64, next_seq: Option<u64>) -> ChainProblem {
        if next_seq == Some(expected) {
            ChainProblem::Swapped { expected, found }
        } else if found > expected {
            ChainProblem::Missing { expected, found }
        } else {
            ChainProblem::OutOfOrder { expected, found }
        }
    }
}

impl std::fmt::Display for ChainProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChainProblem::Missing { expected, found } => write!(
                f,
                "entries deleted: expected seq {expected}, found seq {found} ({} missing)",
                found - expected
            ),
            ChainProblem::Swapped { expected, found } => {
                write!(
                    f,
                    "entries reordered: seq {found} stands where seq {expected} belongs and the two are swapped"
                )
            }
            ChainProblem::OutOfOrder { expected, found } => {
                write!(
                    f,
                    "entries out of order: expected seq {expected}, found seq {found}"
                )
            }
            ChainProblem::BrokenLink => {
                write!(f, "prev_hash does not match the previous entry's hash")
            }
            ChainProblem::EditedEntry => {
                write!(
                    f,
                    "entry edited: its fields no longer hash to its entry_hash"
                )
            }
        }
    }
}

/// One entry as the chain check needs it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Link<'a> {
    pub(crate) seq: u64,
    pub(crate) prev_hash: &'a str,
    pub(crate) entry_hash: &'a str,
    /// Whether the entry's stored fields no longer hash to `entry_hash`.
    pub(crate) edited: bool,
}

/// Checks a chain one entry at a time (forum-spec §4) while accumulating the Merkle root, so a
/// storage can stream its entries through it in constant memory.
#[derive(Debug, Default)]
pub(crate) struct ChainChecker {
    next_seq: u64,
    prev: Option<String>,
    merkle: merkle::Accumulator,
    /// Where each pushed entry's hash preimage is written, reused from entry to entry.
    scratch: String,
}

impl ChainChecker {
    pub(crate) fn new() -> ChainChecker {
        ChainChecker::default()
    }

    /// Checks `entry` as the next one. `lookahead` is the entry after it, when known, used only
    /// to tell a swap from a deletion.
    pub(crate) fn push(
        &mut self,
        entry: &Entry,
        lookahead: Option<&Entry>,
    ) -> Result<(), ChainProblem> {
        let link = Link {
            seq: entry.seq,
            prev_hash: &entry.prev_hash,
            entry_hash: &entry.entry_hash,
            edited: !entry.hash_matches_in(&mut self.scratch),
        };
        self.push_link(&link, lookahead.map(|n| n.seq))
    }

    /// Checks `link` as the next entry, in one order for every storage: the seq first (with
    /// `next_seq`, the seq of the entry after it when known, to tell a swap from a deletion),
    /// then the entry's own hash, then its link to the previous entry. A storage that hashes
    /// entries elsewhere (the git store's verify workers) hands in what it found.
    pub(crate) fn push_link(
        &mut self,
        link: &Link<'_>,
        next_seq: Option<u64>,
    ) -> Result<(), ChainProblem> {
        if link.seq != self.next_seq {
            return Err(ChainProblem::of_seq(self.next_seq, link.seq, next_seq));
        }
        if link.edited {
            return Err(ChainProblem::EditedEntry);
        }
        let prev = self.prev.as_deref().unwrap_or(GENESIS);
        if link.prev_hash != prev {
            return Err(ChainProblem::BrokenLink);
        }
        self.merkle.push(link.entry_hash);
        // The previous hash's buffer is reused: no allocation per entry.
        match &mut self.prev {
            Some(p) => {
                p.clear();
                p.push_str(link.entry_hash);
            }
            None => self.prev = Some(link.entry_hash.to_string()),
        }
        self.next_seq += 1;
        Ok(())
    }

    /// The Merkle root of the entries accepted so far.
    pub(crate) fn root(&self) -> String {
        self.merkle.root()
    }
}

/// The outcome of checking a whole chain held in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainReport {
    pub(crate) entries: u64,
    pub checkpoint: String,
    pub first_bad: Option<(u64, ChainProblem)>,
}

/// Checks `entries` (in storage order) as Forum's `verify()` does, naming the first failure.
pub fn verify_chain(entries: &[Entry]) -> ChainReport {
    let mut checker = ChainChecker::new();
    for (i, e) in entries.iter().enumerate() {
        if let Err(p) = checker.push(e, entries.get(i + 1)) {
            return ChainReport {
                entries: entries.len() as u64,
                checkpoint: checker.root(),
                first_bad: Some((i as u64, p)),
            };
        }
    }
    ChainReport {
        entries: entries.len() as u64,
        checkpoint: checker.root(),
        first_bad: None,
    }
}

/// Why a causal chain cannot be followed: the ledger's links are wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CausalError {
    /// A parent below zero.
    #[error("causal parent {0} is negative")]
    Negative(i64),
    /// A seq met twice.
    #[error("causal chain loops back to seq {0}")]
    Loop(i64),
    /// A parent the ledger does not have.
    #[error("causal chain names seq {0}, which is not in the ledger")]
    Missing(i64),
}

/// Follows `causal_parent` links from `seq` and returns the chain root-first (forum-spec §4).
/// `get` looks an entry up by seq.
pub(crate) fn causal_chain<F>(seq: u64, mut get: F) -> Result<Vec<Entry>, CausalError>
where
    F: FnMut(u64) -> Option<Entry>,
{
    let mut out: Vec<Entry> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut cur = Some(seq as i64);
    while let Some(s) = cur {
        if s < 0 {
            return Err(CausalError::Negative(s));
        }
        if !seen.insert(s) {
            return Err(CausalError::Loop(s));
        }
        let e = get(s as u64).ok_or(CausalError::Missing(s))?;
        cur = e.causal_parent;
        out.push(e);
    }
    out.reverse();
    Ok(out)
}

/// Errors a [`Storage`] reports.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Corrupt(String),
    #[error("{0}")]
    Io(String),
    /// The append lost to other writers: the ledger stayed at `tip_seq` (its tip `tip`, as
    /// text), and the append may be tried again.
    #[error("{message}")]
    Conflict {
        tip_seq: Option<u64>,
        tip: Option<String>,
        message: String,
    },
}

/// Where a ledger's entries and bodies live. The git store is the real one; [`MemoryStorage`]
/// serves tests and projections.
pub trait Storage {
    /// Number of entries.
    fn len(&self) -> Result<u64, StorageError>;
    fn is_empty(&self) -> Result<bool, StorageError> {
        Ok(self.len()? == 0)
    }
    /// The last entry.
    fn head(&self) -> Result<Option<Entry>, StorageError>;
    /// The entry at `seq`.
    fn get(&self, seq: u64) -> Result<Option<Entry>, StorageError>;
    /// The body whose hash is `payload_hash`, if present (a redacted body is absent).
    fn payload(&self, payload_hash: &str) -> Result<Option<Value>, StorageError>;
    /// The body of the entry at `seq` (`None` past the tip, or when the body is absent). A
    /// store that can reach a body from its entry directly overrides this lookup by hash.
    fn payload_at(&self, seq: u64) -> Result<Option<Value>, StorageError> {
        match self.get(seq)? {
            Some(e) => self.payload(&e.payload_hash),
            None => Ok(None),
        }
    }
    /// Appends one entry on the current tip and returns it.
    fn append(&mut self, new: NewEntry) -> Result<Entry, StorageError>;
    /// Appends `new` as seq `seq` only: `Ok(None)`, with nothing written, when the ledger's
    /// next seq is another (a writer that names something by the seq it is about to take
    /// reserves it this way). The default checks the length first, which is exact for a store
    /// with one writer; stores shared between writers check under their own lock.
    fn append_at(&mut self, seq: u64, new: NewEntry) -> Result<Option<Entry>, StorageError> {
        if self.len()? != seq {
            return Ok(None);
        }
        self.append(new).map(Some)
    }
    /// Appends many entries with one flush.
    fn append_batch(&mut self, batch: Vec<NewEntry>) -> Result<Vec<Entry>, StorageError> {
        batch.into_iter().map(|n| self.append(n)).collect()
    }
    /// Makes every acknowledged append durable.
    fn sync(&mut self) -> Result<(), StorageError> {
        Ok(())
    }
}

/// A ledger held in memory. Bodies are stored as copies, so a caller that mutates its payload
/// after appending cannot break deep verification (a defect of Forum's, forum-spec §5.3).
#[derive(Debug, Default, Clone)]
pub struct MemoryStorage {
    pub entries: Vec<Entry>,
    pub payloads: HashMap<String, Value>,
}

impl Storage for MemoryStorage {
    fn len(&self) -> Result<u64, StorageError> {
        Ok(self.entries.len() as u64)
    }

    fn head(&self) -> Result<Option<Entry>, StorageError> {
        Ok(self.entries.last().cloned())
    }

    fn get(&self, seq: u64) -> Result<Option<Entry>, StorageError> {
        Ok(self
            .entries
            .get(seq as usize)
            .filter(|e| e.seq == seq)
            .cloned())
    }

    fn payload(&self, payload_hash: &str) -> Result<Option<Value>, StorageError> {
        Ok(self.payloads.get(payload_hash).cloned())
    }

    fn append(&mut self, new: NewEntry) -> Result<Entry, StorageError> {
        let body = new
            .validate()
            .map_err(|e| StorageError::Invalid(e.to_string()))?;
        let ph = hash::sha256_hex(body.as_bytes());
        self.payloads
            .entry(ph.clone())
            .or_insert_with(|| new.payload.clone());
        let e = Entry::next(self.entries.last(), &new, ph);
        self.entries.push(e.clone());
        Ok(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(actor: &str, ts: f64) -> NewEntry {
        NewEntry {
            actor: actor.into(),
            kind: "note".into(),
            causal_parent: None,
            payload: Value::int(1),
            ts,
        }
    }

    #[test]
    fn tamper_classes_are_named() {
        let mut s = MemoryStorage::default();
        for i in 0..5 {
            s.append(new("a", i as f64)).unwrap();
        }
        assert_eq!(verify_chain(&s.entries).first_bad, None);

        let mut swapped = s.entries.clone();
        swapped.swap(2, 3);
        assert!(matches!(
            verify_chain(&swapped).first_bad,
            Some((2, ChainProblem::Swapped { .. }))
        ));

        let mut deleted = s.entries.clone();
        deleted.remove(2);
        assert!(matches!(
            verify_chain(&deleted).first_bad,
            Some((2, ChainProblem::Missing { .. }))
        ));

        let mut edited = s.entries.clone();
        edited[1].actor = "mallory".into();
        assert_eq!(
            verify_chain(&edited).first_bad,
            Some((1, ChainProblem::EditedEntry))
        );

        let truncated = &s.entries[..3];
        assert_eq!(verify_chain(truncated).first_bad, None);
    }

    #[test]
    fn canonical_json_agrees_with_the_generic_encoder() {
        let mut e = Entry::next(None, &new("a\u{e9}\"\u{1f600}", 1e-7), "ab".repeat(32));
        assert_eq!(e.canonical_json(), e.to_value().canonical());
        e.causal_parent = Some(-3);
        e.ts = 1_700_000_000.123_456_7;
        e.kind = "k\u{2028}".into();
        assert_eq!(e.canonical_json(), e.to_value().canonical());
    }

    #[test]
    fn fast_entry_reader_agrees_with_the_general_one() {
        let mut e = Entry::next(None, &new("agent", 1_700_000_000.25), "ab".repeat(32));
        for parent in [None, Some(0), Some(-3), Some(42)] {
            e.causal_parent = parent;
            let line = e.canonical_json();
            assert_eq!(Entry::from_canonical_json(&line).as_ref(), Some(&e));
            assert_eq!(
                Entry::from_value(&canonical::parse(&line).unwrap()).unwrap(),
                e
            );
        }
        // What needs escapes, or is not exactly canonical, goes to the general reader.
        let odd = Entry::next(None, &new("caf\u{e9}", 1.0), "ab".repeat(32));
        assert_eq!(Entry::from_canonical_json(&odd.canonical_json()), None);
        // The edges of what the fast reader takes: a space and `~`, not DEL nor anything
        // written escaped (a backslash, a quote, a control character).
        let edges = [" a~", "a\u{7f}", "a\\b", "a\"b", "a\u{1}"];
        for (k, actor) in edges.into_iter().enumerate() {
            let e = Entry::next(None, &new(actor, 2.5), "cd".repeat(32));
            let got = Entry::from_canonical_json(&e.canonical_json());
            assert_eq!(got, (k == 0).then(|| e.clone()), "{actor:?}");
        }
        let line = e.canonical_json();
        for bad in [
            line.replace("\"seq\":0", "\"seq\":00"),
            line.replace(".25", ".250"),
            line.replace('}', " }"),
        ] {
            assert_eq!(Entry::from_canonical_json(&bad), None, "{bad}");
        }
    }

    #[test]
    fn validate_refuses_control_characters_and_empty_labels() {
        let mut n = new("a\u{1f}b", 1.0);
        assert!(n.validate().unwrap_err().to_string().contains("U+001F"));
        n.actor = String::new();
        assert!(n.validate().is_err());
        n.actor = "ok".into();
        n.ts = f64::NAN;
        assert!(n.validate().is_err());
    }

    #[test]
    fn causal_chain_is_root_first_and_detects_loops() {
        let mut s = MemoryStorage::default();
        s.append(new("a", 0.0)).unwrap();
        let mut n = new("b", 1.0);
        n.causal_parent = Some(0);
        s.append(n).unwrap();
        let chain = causal_chain(1, |q| s.get(q).unwrap()).unwrap();
        assert_eq!(chain.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![0, 1]);
        let mut looped = s.clone();
        looped.entries[0].causal_parent = Some(1);
        assert!(
            causal_chain(1, |q| looped.get(q).unwrap())
                .unwrap_err()
                .to_string()
                .contains("loops")
        );
    }
}
