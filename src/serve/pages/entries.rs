//! What the run and task pages read: a run's entries, each with what may be said of its body,
//! and the projections over them.

use serde_json::Value as J;

use crate::ledger::Entry;
use crate::report::spend::ModelSpend;

/// What a page may say of an entry's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Body {
    /// Present, and it hashes to the entry's `payload_hash`.
    Shown,
    /// Absent from the record (redacted, or never stored).
    Missing,
    /// Present but not the body the entry hashed: never shown.
    Mismatch,
}

impl Body {
    /// What a page says in place of a body it does not show.
    pub(super) fn note(self) -> &'static str {
        match self {
            Body::Shown => "",
            Body::Missing => "the body is missing from the record (redacted, or never stored)",
            Body::Mismatch => {
                "the stored body does not hash to this entry's payload_hash, so it is not shown"
            }
        }
    }
}

/// One entry of the run, its body as JSON when it may be shown.
pub(super) struct Item {
    pub(super) entry: Entry,
    pub(super) body: Option<J>,
    pub(super) state: Body,
}

/// A run as its pages read it.
pub(super) struct Run {
    pub(super) seq: u64,
    pub(super) items: Vec<Item>,
    /// The run room of the run's entries.
    pub(super) room: J,
    /// The run's row of `/runs`.
    pub(super) row: J,
    pub(super) spend: Vec<ModelSpend>,
    /// Chain verification of the whole ledger.
    pub(super) verified: bool,
}

impl Run {
    /// The entries of `kind`.
    pub(super) fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Item> + 'a {
        self.items.iter().filter(move |i| i.entry.kind == kind)
    }
}
