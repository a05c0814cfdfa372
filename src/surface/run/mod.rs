//! The run operations of the surface: list runs, submit and resume, list and decide gates,
//! the receipts of a run, and planning without a run. Each returns a typed report; the CLI
//! renders it, the daemon and MCP serialize it.
//!
//! Reads take the ledger's entries and a [`Bodies`] reader, so each caller keeps its own fast
//! path (the CLI reads its git store, the daemon its entry cache); writes go through a
//! [`crate::ledger::Storage`].

pub(crate) mod exit;
pub(crate) mod gates;
pub(crate) mod halt;
pub(crate) mod options;
pub(crate) mod plan;
pub(crate) mod prepare;
pub(crate) mod receipt;
pub(crate) mod recorded;
pub(crate) mod repo_context;
pub(crate) mod repo_scan;
pub(crate) mod runs;
pub(crate) mod submit;
pub(crate) mod work;

/// The control loop's names a transport needs to start a run, watch it and stop it.
pub(crate) use crate::exec::command::stop_all;
pub(crate) use crate::exec::{Fleet, FleetError, Seats};
/// When a heartbeat is due, and its kind and schema (the daemon's heartbeat).
pub(crate) use crate::observe;
pub(crate) use crate::run::status as loop_status;
pub(crate) use crate::run::{
    CommandContext, ContextProvider, Env, Event, Interrupt, Options, Outcome, Progress, RunError,
    Silent, Status, work_line,
};
pub(crate) use crate::surface::clock::RunClock;
pub(crate) use gates::{Decide, Decision, decide, gates, pending};
pub(crate) use options::{CommandSpec, ContextSource, RunOptions};
pub(crate) use receipt::receipt_of;
pub(crate) use runs::{keep_existing_branches, runs};
pub(crate) use submit::{Go, class_of, run_report};

use std::cell::RefCell;

use serde_json::Value as J;

use super::Error;
use crate::ledger::{Entry, StorageError};

/// Bodies for the run projections, which take a body or nothing: the first body that cannot be
/// read (one that does not hash to its entry included) is kept, so the operation fails with it
/// instead of reading the body as absent.
pub(crate) struct Bodies<'a> {
    read: &'a dyn Fn(&Entry) -> Result<Option<J>, Error>,
    failed: RefCell<Option<Error>>,
}

impl<'a> Bodies<'a> {
    /// Reads each body with `read` (`Ok(None)`: redacted); the operation fails with the first
    /// error it gives.
    pub(crate) fn new(read: &'a dyn Fn(&Entry) -> Result<Option<J>, Error>) -> Bodies<'a> {
        Bodies {
            read,
            failed: RefCell::new(None),
        }
    }

    /// The body of `e`, `None` when redacted or unreadable (kept for [`Bodies::done`]).
    pub(crate) fn get(&self, e: &Entry) -> Option<J> {
        match (self.read)(e) {
            Ok(b) => b,
            Err(m) => {
                self.failed.borrow_mut().get_or_insert(m);
                None
            }
        }
    }

    /// The first failure, if any body could not be read.
    pub(crate) fn done(&self) -> super::Result<()> {
        match self.failed.borrow_mut().take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// A ledger error as the surface reports it: a refused entry is the caller's input, anything
/// else the store's failure.
pub(crate) fn storage(e: StorageError) -> Error {
    match e {
        StorageError::Invalid(m) => Error::usage(m),
        other => Error::internal(other.to_string()).with_source(other),
    }
}
