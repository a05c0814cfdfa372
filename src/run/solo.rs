//! A solo run (`git forum fix`, `submit --work --solo`): the request is one task for the
//! worker seat, in the repository, with no planner, validator, intent judge or synthesizer
//! call. The task's checks and the pre-ship gate still decide what lands on the run branch.
//!
//! What it records, beside what every `--work` run writes:
//!
//! * the `request` carries `solo: true`, so a resume continues it the same way;
//! * the `route_frame` is the keyword router's, as for any run (no model);
//! * when the router cannot decide, the routing ladder's `route` and `classification`
//!   entries ([`classify`]): the orchestrator seat names the lane, or the run stops;
//! * the `plan` entry (actor `dispatch`, under the request) is built here, not by a model: one
//!   task `T1` whose instruction is the request itself and whose lane is the one the router
//!   chose, else the one the classifier named, with `solo: true`; no request-level context is
//!   taken, since there is no planner to read it;
//! * then the task, its result, change, checks, ship decision and integration, as always, and
//!   no `verdict` (the checks and the gate judge the change);
//! * the answer is a `result` under the request (actor `dispatch`, `written_from: "record"`):
//!   the task and lane, the first line of the worker's own report, and the run's changes as
//!   the record holds them ([`work_summary`]); the delivery floors and the verifier (when one
//!   is given) check it as any answer, but no model does.

use std::collections::BTreeMap;

use serde_json::json;

use crate::ledger::{Entry, kind};
use crate::plan::{CompiledPlan, Plan, Task};

use super::classify;
use super::commit_message;
use super::course::Course;
use super::engine::{Done, Run};
use super::ship::{Record, work_summary};
use super::{Event, RunError};

/// The one-task plan of a solo run for `request`, on `lane`.
pub(super) fn solo_plan(request: &str, lane: String) -> Result<CompiledPlan, RunError> {
    Plan {
        tasks: vec![Task::new("T1", lane, request)],
    }
    .compile()
    .map_err(|e| RunError::Request(format!("the solo plan could not be made: {e}")))
}

/// Whether the run whose request is `request` (an entry of `entries`) was submitted solo.
pub(super) fn recorded_solo(run: &Run<'_, '_>, entries: &[Entry], request_seq: u64) -> bool {
    entries
        .iter()
        .find(|e| e.seq == request_seq && e.kind == kind::REQUEST)
        .and_then(|e| run.payload_of(e).ok().flatten())
        .is_some_and(|b| b["solo"] == json!(true))
}

/// Routes `request` through the ladder ([`classify::assign`]), then witnesses its solo plan
/// under `parent` (the request) and returns it with its entry's seq. `None` when the run's
/// budget or a ceiling left no room for the classifier's call: the caller stops the run on
/// it, at stage [`classify::CLASSIFIER_STAGE`].
pub(super) fn put_solo_plan(
    run: &Run<'_, '_>,
    request: &str,
    parent: u64,
) -> Result<Option<(CompiledPlan, u64)>, RunError> {
    let Some(lane) = classify::assign(run, request, parent)? else {
        return Ok(None);
    };
    let plan = solo_plan(request, lane)?;
    let mut body = run.plan_payload(&plan);
    body["solo"] = json!(true);
    let e = run.put("dispatch", kind::PLAN, Some(parent), body)?;
    run.env
        .progress
        .event(&Event::Planned { tasks: 1, waves: 1 });
    Ok(Some((plan, e.seq)))
}

/// Refuses a solo run that does not work in the repository (before anything is written).
pub(super) fn check_work(run: &Run<'_, '_>) -> Result<(), RunError> {
    if run.opts.work.as_ref().is_some_and(|o| o.enabled) {
        return Ok(());
    }
    Err(RunError::Request(
        "a solo run works in the repository: add --work (or set [work] enabled = true in .forum/runtime.toml), or use `git forum fix`".into(),
    ))
}

/// The first line of a worker's report as one line of at most 200 characters
/// ([`commit_message::one_line`]); `None` when it has none.
pub(super) fn first_report_line(output: &str) -> Option<String> {
    let line = output.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(commit_message::one_line(line, 200))
}

/// Writes the answer of a solo run from its record and witnesses it under the request;
/// returns its seq and text.
pub(super) fn answer_from_record(
    run: &Run<'_, '_>,
    course: &Course<'_>,
    finals: &BTreeMap<String, Done>,
) -> Result<(u64, String), RunError> {
    let mut parts = Vec::new();
    for t in &course.plan.tasks {
        parts.push(format!(
            "One task ({}, lane {}) worked on the request, with no planner or synthesizer.",
            t.id, t.agent
        ));
        match finals.get(&t.id) {
            Some(d) if d.ok => {
                if let Some(line) = first_report_line(&d.output) {
                    parts.push(format!("The worker's report: {line}"));
                }
            }
            Some(d) => parts.push(format!(
                "The task did not succeed: {}",
                first_report_line(&d.output).unwrap_or_else(|| "no output".into())
            )),
            None => parts.push("The task did not run.".into()),
        }
    }
    if let Some(w) = run.work() {
        let record = Record::read(run, course.request_seq)?;
        parts.push(work_summary(&record, course.plan, w.run_seq));
    }
    let answer = parts.join("\n\n");
    let a = run.put(
        "dispatch",
        kind::RESULT,
        Some(course.request_seq),
        json!({"answer": answer, "written_from": "record"}),
    )?;
    Ok((a.seq, answer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_solo_plan_is_one_task_whose_instruction_is_the_request() {
        let plan = solo_plan("fix the failing test in calc.py", "python-apps".into()).unwrap();
        assert_eq!(plan.tasks.len(), 1);
        assert_eq!(plan.tasks[0].id, "T1");
        assert_eq!(plan.tasks[0].instruction, "fix the failing test in calc.py");
        assert_eq!(plan.tasks[0].agent, "python-apps");
        assert_eq!(plan.waves, vec![vec!["T1".to_string()]]);
    }

    #[test]
    fn the_report_line_is_the_first_non_blank_line_cut_short() {
        assert_eq!(
            first_report_line("\n  Fixed add in calc.py  \nmore"),
            Some("Fixed add in calc.py".into())
        );
        assert_eq!(first_report_line(" \n\t\n"), None);
        let long = "x".repeat(300);
        assert_eq!(
            first_report_line(&long).unwrap().chars().count(),
            201,
            "200 characters and the ellipsis"
        );
    }
}
