//! How a `submit` or `resume` ended, as one exit code a script can branch on: the one table
//! ([`TABLE`]) that `submit --help`, the README and the run report's `exit` field all read.
//!
//! Exit 0 means the run answered and nothing it was asked to check refuted the answer. Each
//! other way a run can end has its own code; when several hold, the first in the table wins
//! (a halted run is reported as halted, an answered run whose verifier refuted it and whose
//! change was blocked as refuted). Errors keep the surface's codes (1, and 2 for usage).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value as J;

use crate::ledger::{Entry, Value, kind};
use crate::run::{Outcome, RunError, Status, status};
use crate::store::git::GitStore;
use crate::surface::Result;

/// The ways a run ends, each with its exit code in [`TABLE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RunExit {
    /// Answered, and nothing it was asked to check refuted the answer.
    Answered,
    /// An operator's halt or a signal stopped it.
    Halted,
    /// A spend ceiling (tokens or cost) stopped it.
    StoppedOnCeiling,
    /// Its call or seconds budget stopped it.
    StoppedOnBudget,
    /// It waits at a gate for a decision (or a resume was refused for that).
    Gated,
    /// A gate was rejected.
    Rejected,
    /// It answered, but a task of its `--work` run failed: its worker could not start, exited
    /// non-zero, reported an error or was denied what it needed, or its change failed its
    /// checks and was not delivered; the record holds why.
    Failed,
    /// It answered, but `--verify-cmd` refuted the answer or a check failed on the run branch.
    Refuted,
    /// It answered, but the pre-ship gate blocked (quarantined) a change of a `--work` run.
    Blocked,
}

/// The exit code of a spend-ceiling stop (`--max-tokens`, `--max-cost-usd`).
pub(crate) const EXIT_CEILING: u8 = 4;

/// Every way a run ends: its name, exit code and meaning, in precedence order.
pub(crate) const TABLE: &[(RunExit, u8, &str)] = &[
    (
        RunExit::Halted,
        5,
        "halted by `git forum halt` or SIGINT/SIGTERM (resume continues it)",
    ),
    (
        RunExit::StoppedOnCeiling,
        EXIT_CEILING,
        "stopped on a spend ceiling, --max-tokens or --max-cost-usd (resume continues it)",
    ),
    (
        RunExit::StoppedOnBudget,
        3,
        "stopped on its budget, --max-model-calls or --max-seconds (resume continues it)",
    ),
    (
        RunExit::Gated,
        8,
        "paused at a gate that is not approved yet (gate approve, then resume)",
    ),
    (RunExit::Rejected, 9, "stopped: a gate was rejected"),
    (
        RunExit::Failed,
        10,
        "answered, but a task of its --work run failed: its worker failed, or its change failed its checks and was not delivered (`git forum runs` shows why)",
    ),
    (
        RunExit::Refuted,
        6,
        "answered, but --verify-cmd refuted the answer or a --check failed on the run branch",
    ),
    (
        RunExit::Blocked,
        7,
        "answered, but the pre-ship gate blocked (quarantined) a change of a --work run",
    ),
    (
        RunExit::Answered,
        0,
        "answered, and nothing it was asked to check refuted the answer",
    ),
];

impl RunExit {
    /// Its exit code.
    pub(crate) fn code(self) -> u8 {
        TABLE
            .iter()
            .find(|(e, _, _)| *e == self)
            .map_or(1, |(_, c, _)| *c)
    }
}

/// The table as `submit --help` and `resume --help` show it: 0, the error codes, then each
/// other end by code.
pub(crate) fn help() -> String {
    let mut rows: Vec<&(RunExit, u8, &str)> = TABLE.iter().collect();
    rows.sort_by_key(|(_, c, _)| *c);
    let mut out =
        String::from("Exit codes (with --json, the run's report is on stdout for 0 and 3 to 9):\n");
    for (_, code, what) in &rows {
        if *code == 0 {
            out.push_str(&format!("  {code}  {what}\n"));
        }
    }
    out.push_str("  1  the run could not go on (an error, said on stderr)\n  2  a usage error\n");
    for (_, code, what) in rows.iter().filter(|(_, c, _)| *c != 0) {
        out.push_str(&format!("  {code}  {what}\n"));
    }
    out
}

/// What a run was asked to check said against it: the verifier refuted its latest answer or a
/// check on its run branch failed, and whether the pre-ship gate blocked a change (each task's
/// latest decision counts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Checks {
    pub(crate) refuted: bool,
    pub(crate) blocked: bool,
    /// A task of a `--work` run whose latest result is a failure, or whose change's latest
    /// run of a check failed.
    pub(crate) failed: bool,
}

/// The checks of run `run` among `entries` (with their bodies).
pub(crate) fn checks_of(entries: &[(Entry, Option<Value>)], run: u64) -> Checks {
    let plain: Vec<Entry> = entries.iter().map(|(e, _)| e.clone()).collect();
    let roots = status::roots(&plain);
    let mut verified: Option<bool> = None;
    let mut run_checks: BTreeMap<String, bool> = BTreeMap::new();
    let mut ships: BTreeMap<String, String> = BTreeMap::new();
    let mut work = false;
    // Each task's latest result: a retry that succeeded clears an earlier failure.
    let mut tasks_ok: BTreeMap<String, bool> = BTreeMap::new();
    // Each task's checks, by command: the latest run of each counts.
    let mut task_checks: BTreeMap<(String, String), bool> = BTreeMap::new();
    for (e, body) in entries {
        if roots.get(&e.seq) != Some(&run) {
            continue;
        }
        let b = body.as_ref().map(Value::to_serde).unwrap_or(J::Null);
        let text = |k: &str| b.get(k).and_then(J::as_str).unwrap_or("").to_string();
        match e.kind.as_str() {
            kind::REQUEST if e.seq == run => work = b.get("work").is_some_and(J::is_object),
            // A new answer is checked again.
            kind::RESULT if b.get("answer").is_some() => verified = None,
            kind::RESULT if b.get("id").is_some() => {
                tasks_ok.insert(text("id"), b.get("ok") == Some(&J::Bool(true)));
            }
            kind::VERIFICATION => verified = b.get("ok").and_then(J::as_bool),
            kind::CHECK if text("task") == "run" => {
                run_checks.insert(text("command"), b.get("ok") == Some(&J::Bool(true)));
            }
            kind::CHECK => {
                let ok = b.get("ok") == Some(&J::Bool(true));
                task_checks.insert((text("task"), text("command")), ok);
            }
            kind::SHIP => {
                ships.insert(text("task"), text("decision"));
            }
            _ => {}
        }
    }
    Checks {
        refuted: verified == Some(false) || run_checks.values().any(|ok| !ok),
        blocked: ships.values().any(|d| d == "block"),
        failed: work && (tasks_ok.values().any(|ok| !ok) || task_checks.values().any(|ok| !ok)),
    }
}

/// How a run that ended with `status` exits, given what its checks said.
pub(crate) fn exit_of(status: &Status, checks: Checks) -> RunExit {
    match status {
        Status::Halted { .. } => RunExit::Halted,
        Status::StoppedOnBudget => RunExit::StoppedOnBudget,
        Status::StoppedOnCeiling => RunExit::StoppedOnCeiling,
        Status::Paused { .. } => RunExit::Gated,
        Status::Rejected { .. } => RunExit::Rejected,
        Status::Answered if checks.failed => RunExit::Failed,
        Status::Answered if checks.refuted => RunExit::Refuted,
        Status::Answered if checks.blocked => RunExit::Blocked,
        Status::Answered => RunExit::Answered,
    }
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

/// How the run `outcome` reports exits, reading its checks from `store`.
pub(crate) fn exit_for(store: &GitStore, outcome: &Outcome) -> Result<RunExit> {
    let checks = match outcome.status {
        Status::Answered => {
            let entries = super::options::preload(store)?;
            checks_of(&entries, outcome.request_seq)
        }
        _ => Checks::default(),
    };
    Ok(exit_of(&outcome.status, checks))
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
    fn every_end_has_one_distinct_code_and_errors_keep_theirs() {
        let mut codes: Vec<u8> = TABLE.iter().map(|(_, c, _)| *c).collect();
        codes.sort();
        let n = codes.len();
        codes.dedup();
        assert_eq!(codes.len(), n, "two ends share a code");
        assert!(!codes.contains(&1) && !codes.contains(&2));
        assert!(codes.iter().all(|c| *c < 126));
        assert_eq!(RunExit::StoppedOnCeiling.code(), EXIT_CEILING);
        let h = help();
        for (_, c, what) in TABLE {
            assert!(h.contains(&format!("  {c}  {what}")), "{h}");
        }
        assert!(h.lines().nth(1).unwrap().starts_with("  0 "), "{h}");
    }

    #[test]
    fn a_halt_outranks_the_checks_and_refuted_outranks_blocked() {
        let both = Checks {
            refuted: true,
            blocked: true,
            failed: false,
        };
        let halted = Status::Halted {
            by: "a".into(),
            reason: "b".into(),
            seq: 1,
        };
        assert_eq!(exit_of(&halted, both), RunExit::Halted);
        assert_eq!(exit_of(&Status::Answered, both), RunExit::Refuted);
        let blocked = Checks {
            blocked: true,
            ..Checks::default()
        };
        assert_eq!(exit_of(&Status::Answered, blocked), RunExit::Blocked);
        assert_eq!(
            exit_of(&Status::Answered, Checks::default()),
            RunExit::Answered
        );
        assert_eq!(exit_of(&Status::Paused { wave: 0 }, both), RunExit::Gated);
        // A failed worker outranks what the checks said: it is why nothing was delivered.
        let failed = Checks {
            failed: true,
            ..both
        };
        assert_eq!(exit_of(&Status::Answered, failed), RunExit::Failed);
        assert_eq!(RunExit::Failed.code(), 10);
    }
}
