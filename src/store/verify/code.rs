//! Verify's problem codes, and the ledger chain checker's problems in those codes.

use super::*;

/// A verify problem's stable code; written as its kebab-case name (`entry-edited`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Code {
    /// A signed checkpoint's signature does not verify, or it signs another root.
    BadSignature,
    /// A body no longer hashes to its entry's payload hash.
    BodyEdited,
    /// A body is absent without a redaction entry naming it.
    BodyMissing,
    /// The ledger's ref cannot be read.
    BrokenRef,
    /// A commit is not the one git forum writes for its entry.
    CommitAltered,
    /// A git object cannot be read or does not hash to its name.
    CorruptObject,
    /// Entries are missing before this one.
    EntriesDeleted,
    /// An entry's seq is not the position it sits at.
    EntriesOutOfOrder,
    /// This entry and the next carry each other's seq.
    EntriesSwapped,
    /// An entry's fields no longer hash to its entry hash.
    EntryEdited,
    /// A ledger commit has more than one parent.
    MergeCommit,
    /// A git object the ledger names is not in the repository.
    MissingObject,
    /// A commit holds no readable entry.
    NotALedgerCommit,
    /// An entry's tree is not the shape git forum writes.
    NotALedgerTree,
    /// An entry's prev_hash does not name the entry in its parent commit.
    ParentChanged,
    /// The ref's reflog shows it was moved to a commit that does not extend the ledger.
    RefMoved,
    /// Entries were removed from the tail (a witness saw more).
    Truncated,
    /// History was rewritten under a witnessed checkpoint.
    Rewritten,
    /// The reflog saw the ledger longer than it is: the ref was moved back.
    Rewound,
    /// A witness was shown two different trees of one log (recorded by `fetch`).
    SplitView,
    /// A `change` entry names a commit that is not in the repository.
    ChangeCommitMissing,
    /// A `change` entry's commit has another tree than the entry says.
    ChangeTreeMismatch,
    /// A `change` entry's commit does not name an earlier entry in its trailers.
    ChangeUntied,
}

impl Code {
    /// Every code, for the tests that hold each one's name and text.
    #[cfg(test)]
    pub(crate) const ALL: [Code; 23] = [
        Code::BadSignature,
        Code::BodyEdited,
        Code::BodyMissing,
        Code::BrokenRef,
        Code::CommitAltered,
        Code::CorruptObject,
        Code::EntriesDeleted,
        Code::EntriesOutOfOrder,
        Code::EntriesSwapped,
        Code::EntryEdited,
        Code::MergeCommit,
        Code::MissingObject,
        Code::NotALedgerCommit,
        Code::NotALedgerTree,
        Code::ParentChanged,
        Code::RefMoved,
        Code::Truncated,
        Code::Rewritten,
        Code::Rewound,
        Code::SplitView,
        Code::ChangeCommitMissing,
        Code::ChangeTreeMismatch,
        Code::ChangeUntied,
    ];

    /// The code as written in reports and messages.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Code::BadSignature => "bad-signature",
            Code::BodyEdited => "body-edited",
            Code::BodyMissing => "body-missing",
            Code::BrokenRef => "broken-ref",
            Code::CommitAltered => "commit-altered",
            Code::CorruptObject => "corrupt-object",
            Code::EntriesDeleted => "entries-deleted",
            Code::EntriesOutOfOrder => "entries-out-of-order",
            Code::EntriesSwapped => "entries-swapped",
            Code::EntryEdited => "entry-edited",
            Code::MergeCommit => "merge-commit",
            Code::MissingObject => "missing-object",
            Code::NotALedgerCommit => "not-a-ledger-commit",
            Code::NotALedgerTree => "not-a-ledger-tree",
            Code::ParentChanged => "parent-changed",
            Code::RefMoved => "ref-moved",
            Code::Truncated => "truncated",
            Code::Rewritten => "rewritten",
            Code::Rewound => "rewound",
            Code::SplitView => "split-view",
            Code::ChangeCommitMissing => "change-commit-missing",
            Code::ChangeTreeMismatch => "change-tree-mismatch",
            Code::ChangeUntied => "change-untied",
        }
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The code and message of a problem the ledger's chain checker found. A broken link in a git
/// ledger means a commit was given another parent, and the message says so.
pub(super) fn chain_code(p: &ChainProblem) -> (Code, String) {
    let code = match p {
        ChainProblem::Swapped { .. } => Code::EntriesSwapped,
        ChainProblem::Missing { .. } => Code::EntriesDeleted,
        ChainProblem::OutOfOrder { .. } => Code::EntriesOutOfOrder,
        ChainProblem::EditedEntry => Code::EntryEdited,
        ChainProblem::BrokenLink => {
            return (
                Code::ParentChanged,
                "its prev_hash does not name the entry in its parent commit: the commit's parent was changed".to_string(),
            );
        }
    };
    (code, p.to_string())
}

/// A problem: the seq it is at, its stable code, and the message.
pub(super) type Problem = (u64, Code, String);
