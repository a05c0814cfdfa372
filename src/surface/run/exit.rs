//! How a `submit` or `resume` ended, as one exit code a script can branch on. The table, its
//! precedence and the fold over a run's entries are the core's
//! ([`crate::report::outcome`]); here a run that just ended is read back through it, and the
//! run report's `exit` field is built. Errors keep the surface's codes (1, and 2 for usage).

use serde::Serialize;

use crate::ledger::{Entry, Value};
use crate::report::outcome::{End, fold_run};
use crate::run::{Outcome, RunError, Status};
use crate::store::git::GitStore;
use crate::surface::Result;

pub(crate) use crate::report::outcome::{Facts, RunExit, help};

/// What run `run` among `entries` (with their bodies) did and what its checks said.
pub(crate) fn checks_of(entries: &[(Entry, Option<Value>)], run: u64) -> Facts {
    fold_run(entries, run).facts()
}

/// Where a run that ended with `status` stands, for the table.
fn end_of(status: &Status) -> End {
    match status {
        Status::Answered => End::Answered,
        Status::Halted { .. } => End::Halted,
        Status::StoppedOnBudget => End::StoppedOnBudget,
        Status::StoppedOnCeiling => End::StoppedOnCeiling,
        Status::Paused { .. } => End::Paused,
        Status::Rejected { .. } => End::Rejected,
    }
}

/// How a run that ended with `status` exits, given what its entries said.
pub(crate) fn exit_of(status: &Status, facts: &Facts) -> RunExit {
    crate::report::outcome::outcome(end_of(status), facts).unwrap_or(RunExit::Answered)
}

/// How a run that could not go on exits, when one of the table's codes fits (a resume refused
/// at an undecided gate, a worker that cannot start); `None` keeps the error's class code.
pub(crate) fn exit_of_error(e: &RunError) -> Option<RunExit> {
    match e {
        RunError::Gated { .. } => Some(RunExit::Gated),
        // The worker could not start: the run is witnessed as failed at its start.
        RunError::Start(_) => Some(RunExit::Failed),
        _ => None,
    }
}

/// How the run `outcome` reports exits, reading its entries from `store`.
pub(crate) fn exit_for(store: &GitStore, outcome: &Outcome) -> Result<RunExit> {
    let facts = match outcome.status {
        Status::Answered => {
            // The run's entries chain back to its request, so none is older than it: the
            // ledger is read from there (what older runs wrote cannot change this one's facts).
            let read = |e: crate::store::git::StoreError| {
                crate::surface::Error::internal(e.to_string()).with_source(e)
            };
            let entries = if store.exists().map_err(read)? {
                crate::surface::reports::load_git_from(store, outcome.request_seq).map_err(read)?
            } else {
                Vec::new()
            };
            checks_of(&entries, outcome.request_seq)
        }
        _ => Facts::default(),
    };
    Ok(exit_of(&outcome.status, &facts))
}

/// The `exit` field of a run report: the code the command line exits with and its name.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub(crate) struct ExitReport {
    pub(crate) code: u8,
    pub(crate) name: RunExit,
}

impl From<RunExit> for ExitReport {
    fn from(e: RunExit) -> ExitReport {
        ExitReport {
            code: e.code(),
            name: e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_maps_to_its_row_and_an_answer_to_what_its_entries_say() {
        let halted = Status::Halted {
            by: "a".into(),
            reason: "b".into(),
            seq: 1,
        };
        let refuted = Facts {
            refuted: true,
            ..Facts::default()
        };
        assert_eq!(exit_of(&halted, &refuted), RunExit::Halted);
        assert_eq!(
            exit_of(&Status::Paused { wave: 0 }, &refuted),
            RunExit::Gated
        );
        assert_eq!(
            exit_of(&Status::Rejected { wave: 0 }, &refuted),
            RunExit::Rejected
        );
        assert_eq!(
            exit_of(&Status::StoppedOnBudget, &refuted),
            RunExit::StoppedOnBudget
        );
        assert_eq!(
            exit_of(&Status::StoppedOnCeiling, &refuted),
            RunExit::StoppedOnCeiling
        );
        assert_eq!(exit_of(&Status::Answered, &refuted), RunExit::Refuted);
        assert_eq!(
            exit_of(&Status::Answered, &Facts::default()),
            RunExit::Answered
        );
        let nothing = Facts {
            work: true,
            ..Facts::default()
        };
        assert_eq!(
            exit_of(&Status::Answered, &nothing),
            RunExit::NothingDelivered
        );
        assert_eq!(RunExit::Failed.code(), 10);
    }
}
