//! Submit and resume: one call into the run engine for either, the class of each way a run
//! can fail, and the report a finished (or paused) run answers with:
//! `{answer, checkpoint, receipt, git_forum_receipt}` (Forum's action receipt, then ours).

use serde::Serialize;
use serde_json::Value as J;

use super::receipt::{RunReceipt, forum_receipt, run_receipt};
use crate::ledger::Storage;
use crate::run::{self, Env, Outcome, RunError};
use crate::store::git::GitStore;
use crate::surface::{Class, Error, Report, Result};

/// What to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Go<'a> {
    /// A new run of this request.
    Submit(&'a str),
    /// Continue the run whose request is at this seq (`None`: the latest unfinished one).
    Resume(Option<u64>),
}

/// Runs `go` on `store` with `env` and `opts`.
pub(crate) fn go(
    store: &mut (dyn Storage + Send),
    env: &Env<'_>,
    opts: &run::Options,
    go: Go<'_>,
) -> std::result::Result<Outcome, RunError> {
    match go {
        Go::Submit(request) => run::submit(store, env, opts, request),
        Go::Resume(target) => run::resume(store, env, opts, target),
    }
}

/// The class of each way a run can fail; the transport adds what to do next.
pub(crate) fn class_of(e: &RunError) -> Class {
    match e {
        RunError::Request(_) => Class::Usage,
        RunError::Ledger(crate::ledger::StorageError::Invalid(_)) => Class::Usage,
        RunError::Ledger(_) => Class::Internal,
        RunError::Plan(_) | RunError::Synthesis(_) => Class::Upstream,
        RunError::Resume(_) | RunError::Gated { .. } => Class::Conflict,
        RunError::Interrupted { .. } => Class::Unavailable,
        RunError::Work(_) => Class::Internal,
        // Configuring the seat (installing its program) lets `resume` go on.
        RunError::Start(_) => Class::Unavailable,
        // The run did what the policy asks: it refused a secret and stopped.
        RunError::SecretBlocked { .. } => Class::Failed,
    }
}

/// What a submit or a resume answers.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunReport {
    /// The delivered answer, when there is one.
    pub(crate) answer: Option<String>,
    /// The ledger's checkpoint after the run.
    pub(crate) checkpoint: String,
    /// Forum's action receipt of the run.
    pub(crate) receipt: J,
    /// Ours.
    pub(crate) git_forum_receipt: RunReceipt,
    /// How the run ended, as the command line's exit code ([`super::exit::TABLE`]).
    pub(crate) exit: super::exit::ExitReport,
}

impl Report for RunReport {
    const SCHEMA: &'static str = "git-forum.run/1";
}

/// The report of the run `outcome` on ledger `ledger` (read through `store`), whose
/// checkpoint after the run is `checkpoint` over `size` entries.
pub(crate) fn run_report(
    store: &GitStore,
    ledger: &str,
    outcome: Outcome,
    opts: &run::Options,
    checkpoint: String,
    size: u64,
) -> Result<RunReport> {
    let forum = forum_receipt(store, &outcome, opts).map_err(|e| {
        Error::internal(format!(
            "the run is witnessed, but its receipt could not be built: {e} (the receipt of run {} can be built again)",
            outcome.request_seq
        ))
    })?;
    let exit = super::exit::exit_for(store, &outcome)?;
    let mut ours = run_receipt(&outcome, ledger, &checkpoint, size);
    // Our receipt names the run's outcome as every other surface does.
    ours.status = exit.name();
    let exit = exit.into();
    Ok(RunReport {
        answer: outcome.answer,
        checkpoint,
        receipt: forum,
        git_forum_receipt: ours,
        exit,
    })
}
