//! The git store's error type: one line per problem, naming what to do, with the underlying
//! error kept as the source where there is one.

use std::path::PathBuf;
use std::time::Duration;

use gix::ObjectId;

use crate::ledger::StorageError;

/// Errors of the git store. Each message is one line that names the problem and what to do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not inside a git repository ({0}); run git forum inside a repository or pass -C DIR")]
    NotARepo(String),
    #[error("invalid ledger name {name:?}: {why}")]
    InvalidName { name: String, why: String },
    #[error(
        "no ledger named {0:?} (refs/forum/ledgers/{0} does not exist); list ledgers with `git for-each-ref refs/forum/ledgers`"
    )]
    NoLedger(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Corrupt(String),
    #[error("{0}")]
    Contended(String),
    /// An append kept losing the compare-and-swap on the ledger ref until it gave up; the
    /// conflict says where the ref stood (boxed: it is the largest variant by far).
    #[error("{0}")]
    Conflict(Box<RefConflict>),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Git(String),
    /// A call into gix failed; the gix error is kept as the source.
    #[error("{context}: {source}")]
    Gix {
        context: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

/// An append that kept losing the compare-and-swap on the ledger ref (another writer kept
/// moving it, or someone holds the lock that guards it) until it gave up after `waited`.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "could not move {refname} for {}s{}: another process keeps changing it, or holds {}; try again, and if no git command is running remove that file{}",
    .waited.as_secs(),
    where_it_stays(*.tip_seq, .tip.as_ref()),
    .lock.display(),
    how_to_clear(.stale.as_ref())
)]
pub struct RefConflict {
    pub(crate) refname: String,
    /// The lock file that guards the ref: `refs/.../NAME.lock` beside a loose ref, git's
    /// `reftable/tables.list.lock` in a reftable repository. It is what a killed writer leaves.
    pub(crate) lock: PathBuf,
    /// When the lock was there at the end and no live process holds it: how old it is.
    pub(crate) stale: Option<Duration>,
    pub(crate) waited: Duration,
    /// The tip the last attempt was built on (`None`: the ledger did not exist).
    pub(crate) expected: Option<ObjectId>,
    /// Where the ref stood when the append gave up.
    pub(crate) tip: Option<ObjectId>,
    /// The seq of the entry at `tip`, when it could be read.
    pub(crate) tip_seq: Option<u64>,
}

/// The part of a conflict's message that says how to clear a lock nobody holds.
fn how_to_clear(stale: Option<&Duration>) -> String {
    match stale {
        Some(age) => format!(
            " (it is {} old and no process holds it: `git forum doctor --repair` removes it)",
            super::stale::age_text(*age)
        ),
        None => " (`git forum doctor --repair` removes it once no process holds it)".into(),
    }
}

/// The part of a conflict's message that says where the ledger stays.
fn where_it_stays(seq: Option<u64>, tip: Option<&ObjectId>) -> String {
    match (seq, tip) {
        (Some(seq), Some(tip)) => format!(" (it stays at seq {seq}, commit {tip})"),
        (None, Some(tip)) => format!(" (it stays at commit {tip})"),
        _ => String::new(),
    }
}

impl From<StoreError> for StorageError {
    fn from(e: StoreError) -> StorageError {
        if let StoreError::Conflict(c) = &e {
            return StorageError::Conflict {
                tip_seq: c.tip_seq,
                tip: c.tip.map(|t| t.to_string()),
                message: c.to_string(),
            };
        }
        match e {
            StoreError::Invalid(m) | StoreError::InvalidName { why: m, .. } => {
                StorageError::Invalid(m)
            }
            StoreError::Corrupt(m) => StorageError::Corrupt(m),
            other => StorageError::Io(other.to_string()),
        }
    }
}

pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> StoreError {
    let context = context.into();
    move |source| StoreError::Io { context, source }
}

/// A gix error with what was being done, keeping the error as the source.
pub(crate) fn gix_err(
    context: impl Into<String>,
    e: impl std::error::Error + Send + Sync + 'static,
) -> StoreError {
    StoreError::Gix {
        context: context.into(),
        source: Box::new(e),
    }
}

impl From<crate::gitproc::GitProcessError> for StoreError {
    fn from(e: crate::gitproc::GitProcessError) -> StoreError {
        StoreError::Git(e.to_string())
    }
}

/// An error from git or gix known only by its message.
pub(crate) fn git_err(context: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Git(format!("{context}: {e}"))
}
