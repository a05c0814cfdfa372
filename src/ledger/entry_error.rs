//! Why an entry is refused: what an append checks of a new entry, and what a stored entry's
//! fields must be. Each message names the field and the rule it breaks.

/// A new entry that an append refuses (see [`super::NewEntry::validate`] and its causal
/// parent check).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InvalidEntry {
    /// `actor` or `kind` is the empty string.
    #[error("{0} is empty")]
    Empty(&'static str),
    #[error("{0} is longer than {max} bytes", max = super::MAX_LABEL_BYTES)]
    TooLong(&'static str),
    #[error("{what} {value:?} contains the control character U+{code:04X}")]
    ControlCharacter {
        what: &'static str,
        value: String,
        code: u32,
    },
    #[error("timestamp {0} is not a finite number of seconds since 1970")]
    BadTimestamp(f64),
    #[error(
        "payload is {0} bytes in canonical form, over the {max} byte limit",
        max = super::MAX_PAYLOAD_BYTES
    )]
    PayloadTooLarge(usize),
    #[error(
        "causal parent {0} names no entry: the ledger is empty, so the first entry has no parent"
    )]
    ParentInEmptyLedger(i64),
    /// The parent is not a seq below the ledger's next one (`last` is its last seq).
    #[error(
        "causal parent {parent} names no entry: give a seq from 0 to {last} (an entry already in the ledger)"
    )]
    NoSuchParent { parent: i64, last: u64 },
}

/// A stored entry whose fields do not read (see [`super::Entry::from_value`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryFieldError {
    #[error("missing field {0:?}")]
    Missing(String),
    #[error("field {0:?} is not a string")]
    NotString(String),
    #[error("field {0:?} is not 64 lowercase hex digits")]
    NotHash(String),
    #[error("field \"seq\" is not a non-negative 64-bit integer")]
    SeqOutOfRange,
    #[error("field \"seq\" is not an integer")]
    SeqNotInteger,
    #[error("field \"ts\" is not a number")]
    TsNotNumber,
    #[error("field \"causal_parent\" does not fit in 64 bits")]
    ParentOutOfRange,
    #[error("field \"causal_parent\" is neither an integer nor null")]
    ParentNotInteger,
}

/// The message as text, for the callers whose errors are still text.
impl From<InvalidEntry> for String {
    fn from(e: InvalidEntry) -> String {
        e.to_string()
    }
}

impl From<EntryFieldError> for String {
    fn from(e: EntryFieldError) -> String {
        e.to_string()
    }
}
