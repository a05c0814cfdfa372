//! The surface: every operation of git forum once, for every transport.
//!
//! Each operation is one function that takes typed options and returns a typed report
//! (`Serialize`, with its schema name as [`Report::SCHEMA`]). The CLI renders the report as
//! text or JSON; the daemon and the MCP server serialize the same value. `cli` and `serve` both
//! depend on this module and neither imports the other.
//!
//! Errors are one type, [`Error`], whose [`Class`] decides the exit code and the HTTP status in
//! one table ([`Class::exit_code`], [`Class::http_status`]), so a refusal looks the same from
//! every side.

pub mod reports;

use std::fmt;

use crate::ledger::StorageError;
use crate::store::git::StoreError;

pub(crate) mod append;
pub(crate) mod attest;
#[doc(hidden)]
pub use append::append_checked;
pub(crate) mod bench_verify;
pub(crate) mod blame;
pub(crate) mod campaign;
pub(crate) mod clock;
pub(crate) mod context;
pub(crate) mod demo;
pub(crate) mod diff;
pub(crate) mod doctor;
pub(crate) mod flight;
pub(crate) mod hooks;
pub(crate) mod init;
pub(crate) mod lanes;
pub(crate) mod ledger;
pub(crate) mod model;
pub(crate) mod proof;
pub(crate) mod read;
pub(crate) mod replay;
pub(crate) mod reproduce;
pub mod request;
pub(crate) mod run;
pub(crate) mod runtime;
pub(crate) mod status;
pub(crate) mod store;
pub(crate) mod sync;
pub(crate) mod tlog;
pub(crate) mod tlog_layout;
pub(crate) mod verify;
pub(crate) mod witness;
pub(crate) mod work;
pub(crate) mod worker;
pub(crate) mod workers;

/// A report an operation returns: serializable, with a stable schema name.
pub(crate) trait Report: serde::Serialize {
    /// The schema name written as the report's `schema` field (for example
    /// `"git-forum.verify/1"`).
    const SCHEMA: &'static str;
}

/// What kind of failure an [`Error`] is; decides the exit code and the HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// The caller's input is wrong (a flag, a field, a name): fix the input and retry.
    Usage,
    /// What the caller named does not exist (a ledger, an entry, a run).
    NotFound,
    /// The ledger's state forbids the operation now (no pending gate, a run already answered).
    Conflict,
    /// The operation cannot run here now (no executor configured, the daemon is draining, the
    /// ledger is held by another writer); retrying later or configuring may help.
    Unavailable,
    /// An executor answered, but not with anything usable (no plan, no answer).
    Upstream,
    /// The operation ran and its check failed (verify found a problem, a proof did not hold).
    /// The report already says what; the error carries no more than a summary.
    Failed,
    /// The store or the machine failed (I/O, git, a corrupt object).
    Internal,
}

/// The one table from a class to what each transport reports.
const TABLE: &[(Class, u8, u16)] = &[
    (Class::Usage, 2, 400),
    (Class::NotFound, 1, 404),
    (Class::Conflict, 1, 409),
    (Class::Unavailable, 1, 503),
    (Class::Upstream, 1, 502),
    (Class::Failed, 1, 422),
    (Class::Internal, 1, 500),
];

impl Class {
    fn row(self) -> (u8, u16) {
        TABLE
            .iter()
            .find(|(c, _, _)| *c == self)
            .map(|&(_, code, status)| (code, status))
            .unwrap_or((1, 500))
    }

    /// The process exit code the CLI uses for this class.
    pub(crate) fn exit_code(self) -> u8 {
        self.row().0
    }

    /// The HTTP status the daemon answers with (MCP marks 400 and above as `isError`).
    pub(crate) fn http_status(self) -> u16 {
        self.row().1
    }
}

/// An error from a surface operation: a class, a one-line message naming the problem and what
/// to do, and the error that caused it (kept for `source()`).
///
/// The command line uses this type as its own error (`cli::CliError`): a command that already
/// printed its answer ends with [`Error::silent`], and a run killed by a signal exits with the
/// shell's `128 + N` ([`Error::with_exit`]).
#[derive(Debug)]
pub(crate) struct Error {
    pub(crate) class: Class,
    pub(crate) message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    /// The exit code when it is not the class's.
    exit: Option<u8>,
    /// The command already said what it had to: nothing more is printed.
    silent: bool,
}

impl Error {
    pub(crate) fn new(class: Class, message: impl Into<String>) -> Error {
        Error {
            class,
            message: message.into(),
            source: None,
            exit: None,
            silent: false,
        }
    }

    /// Ends a command with exit `code` and no message: it already printed what it had to say
    /// (a report that says the check failed, or nothing on a closed pipe).
    pub(crate) fn silent(code: u8) -> Error {
        let class = if code == Class::Usage.exit_code() {
            Class::Usage
        } else {
            Class::Failed
        };
        Error {
            exit: Some(code),
            silent: true,
            ..Error::new(class, "")
        }
    }

    /// The same error, exiting with `code` instead of its class's code.
    pub(crate) fn with_exit(mut self, code: u8) -> Error {
        self.exit = Some(code);
        self
    }

    /// The process exit code: the class's, unless [`Error::silent`] or [`Error::with_exit`]
    /// named another.
    pub(crate) fn exit_code(&self) -> u8 {
        self.exit.unwrap_or_else(|| self.class.exit_code())
    }

    /// The one line to print on stderr, or `None` after [`Error::silent`].
    pub(crate) fn shown(&self) -> Option<&str> {
        (!self.silent).then_some(self.message.as_str())
    }

    /// A failure of the command (exit 1), by the name the CLI has always called it.
    pub(crate) fn fail(message: impl Into<String>) -> Error {
        Error::failed(message)
    }

    /// Keeps `source` as the cause; the message stays the one the caller sees.
    pub(crate) fn with_source(
        mut self,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        self.source = Some(Box::new(source));
        self
    }

    pub(crate) fn usage(message: impl Into<String>) -> Error {
        Error::new(Class::Usage, message)
    }

    pub(crate) fn not_found(message: impl Into<String>) -> Error {
        Error::new(Class::NotFound, message)
    }

    pub(crate) fn conflict(message: impl Into<String>) -> Error {
        Error::new(Class::Conflict, message)
    }

    pub(crate) fn unavailable(message: impl Into<String>) -> Error {
        Error::new(Class::Unavailable, message)
    }

    pub(crate) fn upstream(message: impl Into<String>) -> Error {
        Error::new(Class::Upstream, message)
    }

    pub(crate) fn failed(message: impl Into<String>) -> Error {
        Error::new(Class::Failed, message)
    }

    pub(crate) fn internal(message: impl Into<String>) -> Error {
        Error::new(Class::Internal, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// The class of a store failure: the one place that decides it for every transport.
fn store_class(e: &StoreError) -> Class {
    match e {
        StoreError::NoLedger(_) => Class::NotFound,
        StoreError::Invalid(_) | StoreError::InvalidName { .. } => Class::Usage,
        // Another writer holds or moved the ledger: retrying later helps.
        StoreError::Contended(_) | StoreError::Conflict(_) | StoreError::NotARepo(_) => {
            Class::Unavailable
        }
        StoreError::Corrupt(_)
        | StoreError::Io { .. }
        | StoreError::Gix { .. }
        | StoreError::Git(_) => Class::Internal,
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Error {
        Error::new(store_class(&e), e.to_string()).with_source(e)
    }
}

impl From<StorageError> for Error {
    fn from(e: StorageError) -> Error {
        let class = match &e {
            StorageError::Invalid(_) => Class::Usage,
            StorageError::Corrupt(_) | StorageError::Io(_) => Class::Internal,
            StorageError::Conflict { .. } => Class::Unavailable,
        };
        Error::new(class, e.to_string()).with_source(e)
    }
}

impl From<crate::config::Error> for Error {
    fn from(e: crate::config::Error) -> Error {
        let message = e.to_string();
        let class = match e {
            crate::config::Error::Runtime(_) => Class::Usage,
            // Fix the file (or name another one) and run again.
            crate::config::Error::Unreadable(_) | crate::config::Error::Invalid(_) => {
                Class::Unavailable
            }
        };
        Error::new(class, message).with_source(e)
    }
}

/// A surface operation's result.
pub(crate) type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_has_one_row_in_the_table() {
        let all = [
            Class::Usage,
            Class::NotFound,
            Class::Conflict,
            Class::Unavailable,
            Class::Upstream,
            Class::Failed,
            Class::Internal,
        ];
        for c in all {
            assert_eq!(TABLE.iter().filter(|(k, _, _)| *k == c).count(), 1, "{c:?}");
        }
        assert_eq!(Class::Usage.exit_code(), 2);
        assert_eq!(Class::Usage.http_status(), 400);
        assert_eq!(Class::Conflict.http_status(), 409);
        assert_eq!(Class::Unavailable.http_status(), 503);
    }

    #[test]
    fn store_failures_have_one_class_for_every_transport() {
        let e: Error = StoreError::NoLedger("main".into()).into();
        assert_eq!((e.class.exit_code(), e.class.http_status()), (1, 404));
        let e: Error = StoreError::Invalid("bad".into()).into();
        assert_eq!((e.class.exit_code(), e.class.http_status()), (2, 400));
        let e: Error = StoreError::Contended("busy".into()).into();
        assert_eq!(e.class.http_status(), 503);
        let e: Error = StorageError::Io("disk".into()).into();
        assert_eq!((e.class.exit_code(), e.class.http_status()), (1, 500));
        assert!(std::error::Error::source(&e).is_some());
    }

    #[test]
    fn a_silent_exit_prints_nothing_and_keeps_its_code() {
        let quiet = Error::silent(0);
        assert_eq!((quiet.exit_code(), quiet.shown()), (0, None));
        let printed = Error::silent(1);
        assert_eq!((printed.exit_code(), printed.class), (1, Class::Failed));
        let killed = Error::failed("killed").with_exit(130);
        assert_eq!((killed.exit_code(), killed.shown()), (130, Some("killed")));
        let e = Error::not_found("no such entry");
        assert_eq!((e.exit_code(), e.shown()), (1, Some("no such entry")));
        assert_eq!(Error::usage("bad flag").exit_code(), 2);
    }

    #[test]
    fn the_source_is_kept_and_the_message_is_what_is_shown() {
        let io = std::io::Error::other("disk on fire");
        let e = Error::internal("writing the ledger failed").with_source(io);
        assert_eq!(e.to_string(), "writing the ledger failed");
        let src = std::error::Error::source(&e).expect("source kept");
        assert_eq!(src.to_string(), "disk on fire");
    }
}
