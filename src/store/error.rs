//! The git store's error type: one line per problem, naming what to do, with the underlying
//! error kept as the source where there is one.

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
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Git(String),
}

impl From<StoreError> for StorageError {
    fn from(e: StoreError) -> StorageError {
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

pub(crate) fn git_err(context: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Git(format!("{context}: {e}"))
}
