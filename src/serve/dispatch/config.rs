//! How a dispatcher is opened: its directory, ledger, clock and limits.

use std::path::PathBuf;

use super::DEFAULT_SUBMIT_SECONDS;

/// How the dispatcher is opened.
#[derive(Debug, Clone)]
pub struct Config {
    /// A directory inside the repository.
    pub(crate) dir: PathBuf,
    /// The ledger every request reads and writes.
    pub(crate) ledger: String,
    /// Skip the fsync of each append (as `--no-fsync`).
    pub(crate) no_fsync: bool,
    /// Entry timestamps pinned to this value (`GIT_FORUM_TIMESTAMP`), for reproducible records;
    /// `None` reads the clock.
    pub timestamp: Option<f64>,
    /// The longest one submit or resume may run, in seconds: the run stops on its budget at
    /// the next check after that (and is resumable).
    pub(crate) submit_seconds: f64,
    /// `POST /witness`: the witness's state directory (else `forum.witnessState`).
    pub(crate) witness_state: Option<PathBuf>,
    /// `POST /witness`: the witness's signer key file (else `forum.witnessKey`).
    pub(crate) witness_key: Option<PathBuf>,
}

impl Config {
    /// The configuration for `ledger` in the repository containing `dir`, with the clock and
    /// the default submit limit.
    pub fn new(dir: impl Into<PathBuf>, ledger: &str) -> Config {
        Config {
            dir: dir.into(),
            ledger: ledger.to_string(),
            no_fsync: false,
            timestamp: None,
            submit_seconds: DEFAULT_SUBMIT_SECONDS,
            witness_state: None,
            witness_key: None,
        }
    }
}
