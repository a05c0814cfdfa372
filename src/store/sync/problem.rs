//! What is wrong with a ledger's chain or bodies as the sync checks find it (fetch, push, the
//! hooks): one line each, told to the user or to the pusher. A failure to read is a
//! `StoreError` instead.

use gix::ObjectId;
use gix::objs::Kind;

use crate::store::codec::MessageEntryError;

/// One problem of a chain of ledger commits or of their bodies.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum ChainProblem {
    /// A commit of the chain is not in the object store.
    #[error("commit {0} is missing from the object store")]
    CommitMissing(ObjectId),
    /// An object of the chain is not a commit.
    #[error("object {id} is a {kind}, not a ledger commit")]
    NotACommit { id: ObjectId, kind: Kind },
    /// A commit that cannot be parsed.
    #[error("commit {0} cannot be parsed")]
    Unparsable(ObjectId),
    /// A commit whose message is not a ledger entry.
    #[error("commit {id}: {why}")]
    NotAnEntry {
        id: ObjectId,
        #[source]
        why: MessageEntryError,
    },
    /// A merge commit.
    #[error("commit {id} has {parents} parents; ledger commits have one")]
    Parents { id: ObjectId, parents: usize },
    /// A commit that is not byte for byte the one its entry defines.
    #[error("commit {id} (seq {seq}) is not the commit its entry defines")]
    NotItsCommit { id: ObjectId, seq: u64 },
    /// An entry whose hash is not its `entry_hash`.
    #[error("entry seq {0} does not hash to its entry_hash: it was edited")]
    Edited(u64),
    /// A seq out of place.
    #[error("seq {found} found where seq {at} belongs: entries were removed or reordered")]
    Reordered { found: u64, at: usize },
    /// A `prev_hash` that does not name the entry before.
    #[error("entry seq {0} does not link to the entry before it (prev_hash)")]
    Unlinked(usize),
    /// An entry's tree is another kind of object.
    #[error("seq {seq}: {id} is a {kind}, not a tree")]
    TreeIsNot { seq: u64, id: ObjectId, kind: Kind },
    /// An entry's tree is not in the object store.
    #[error("seq {seq}: tree {id} is missing from the object store")]
    TreeMissing { seq: u64, id: ObjectId },
    /// An entry's tree is not the one-blob tree of a ledger entry.
    #[error("seq {seq}: tree {id} is not a ledger entry tree")]
    NotAnEntryTree { seq: u64, id: ObjectId },
    /// An entry's body is another kind of object.
    #[error("seq {seq}: {id} is a {kind}, not a blob")]
    BodyIsNot { seq: u64, id: ObjectId, kind: Kind },
    /// An entry's body is not in the object store.
    #[error("the body of seq {seq} (blob {blob}) is missing from the object store")]
    BodyMissing { seq: u64, blob: ObjectId },
    /// A tree shared with an earlier entry whose body hashed to another payload hash.
    #[error("the body of seq {0} does not hash to its payload_hash: it was replaced")]
    Replaced(u64),
    /// A body that does not hash to its entry's `payload_hash`.
    #[error(
        "the body of seq {seq} (blob {blob}) does not hash to its payload_hash: it was replaced"
    )]
    BlobReplaced { seq: u64, blob: ObjectId },
    /// An absent body that no redaction entry names.
    #[error(
        "the body of seq {seq} is absent and no redaction entry names its payload hash {payload_hash}"
    )]
    AbsentUnnamed { seq: u64, payload_hash: String },
    /// A rewrite that changed a published entry's tree to something other than the empty tree.
    #[error(
        "seq {0} has a different tree than before, not an empty one: only a redaction may change a published entry's commit"
    )]
    TreeChanged(u64),
    /// A rewrite that removed a body no redaction entry names.
    #[error(
        "the body of seq {seq} was removed but no redaction entry names its payload hash {payload_hash}"
    )]
    RemovedUnnamed { seq: u64, payload_hash: String },
}
