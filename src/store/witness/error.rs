//! Why asking a witness failed: it could not be reached, its answer could not be read, or the
//! cosignature it returned does not hold. The messages follow "witness W failed: " or
//! "witness W: " in what `fetch` reports. And [`SplitView`]: why the remote's tree does not
//! extend what a witness holds.

use std::process::ExitStatus;

use super::MAX_ANSWER;
use crate::store::cosign::CosignError;

/// Why a witness's answer was not had, or not good.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AskError {
    /// `forum.witness` holds this value, which names no way to reach a witness.
    #[error("forum.witness {0:?} is neither cmd:COMMAND nor an http:// URL")]
    NotAWitness(String),
    #[error("cannot run it: {0}")]
    CannotRun(#[source] std::io::Error),
    /// The command did not exit within the deadline (seconds).
    #[error("it did not answer within {0:.0} s (forum.witnessTimeout)")]
    Timeout(f64),
    #[error("waiting for it: {0}")]
    Waiting(#[source] std::io::Error),
    /// The thread reading the command's output panicked.
    #[error("reading its answer failed")]
    AnswerLost,
    #[error("reading its answer: {0}")]
    ReadAnswer(#[source] std::io::Error),
    /// The thread reading the command's errors panicked.
    #[error("reading its errors failed")]
    ErrorsLost,
    #[error("its answer is larger than {MAX_ANSWER} bytes")]
    TooLarge,
    /// The command failed without a witness report: its status and its last line of errors.
    #[error("it exited with {status}{}", after_colon(.last))]
    Exited { status: ExitStatus, last: String },
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    /// The request failed (the error is shown without the URL, which `target` already names).
    #[error("POST {target}: {source}")]
    Post {
        target: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("reading {target}: {source}")]
    ReadHttp {
        target: String,
        #[source]
        source: std::io::Error,
    },
    #[error("POST {target} answered {status} without a witness report")]
    NoReport { target: String, status: u16 },
    /// An HTTP status other than 200 and 409, with the error the witness gave.
    #[error("POST {target} answered {status}: {error}")]
    Refused {
        target: String,
        status: u16,
        error: String,
    },
    #[error(transparent)]
    Cosignature(#[from] CosignError),
    #[error("its answer carries no cosignature by a key in forum.witnessVerifiers")]
    NoTrustedCosignature,
}

/// `: TEXT`, or nothing when `text` is empty.
fn after_colon(text: &str) -> String {
    if text.is_empty() {
        String::new()
    } else {
        format!(": {text}")
    }
}

/// What a witness holds: its checkpoint's origin, size and root (base64).
#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) origin: String,
    pub(crate) size: u64,
    pub(crate) root: String,
}

impl std::fmt::Display for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the witness holds {} at size {} with root {}",
            self.origin, self.size, self.root
        )
    }
}

/// Why the remote's tree does not extend what a witness holds: a split view.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SplitView {
    /// The remote's tree has another root at the witness's size.
    #[error("{held}, but the remote's tree at that size has root {remote_root}")]
    OtherRoot { held: Held, remote_root: String },
    /// The remote's tree is shorter than what the witness holds.
    #[error("{held}, but the remote's tree has only {len} entries")]
    Shorter { held: Held, len: u64 },
    /// No consistency proof between the two sizes.
    #[error(transparent)]
    Proof(#[from] crate::ledger::tlog::TlogError),
}
