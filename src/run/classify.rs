//! The routing ladder of a solo run, witnessed: the keyword router, then, only when it cannot
//! decide, the orchestrator seat asked which roster lane takes the task (`route::classify`
//! is the pure part).
//!
//! When the router decides, nothing is asked and nothing more is written than before: the
//! run's `route_frame` already says what the router chose. When it cannot, the run witnesses
//! Forum's `route` entry (actor `router`, under the request), then asks the classifier as one
//! counted model call, reserved against the run's ceilings like every other, and witnesses its
//! answer as `classification` (actor `classifier`, under the `route` entry). A ceiling too
//! small for the call stops the run on that ceiling at stage `classifier`; an answer that
//! names no lane is witnessed as such (agent null, what came back kept) and the run stops,
//! witnessed as `run_stopped` at stage `route`, as Forum's `assign` raises on it: no lane is
//! guessed for the task.

use serde_json::json;

use crate::exec::{Call, OutputSchema};
use crate::ledger::{Entry, kind};
use crate::route::{self, Rung};

use super::engine::{Run, usage_of, with_usage_value};
use super::{Event, RunError};

/// The stage a spend ceiling names when it refuses the classifier's call.
pub(super) const CLASSIFIER_STAGE: &str = "classifier";

/// The cap on the classifier's answer, in tokens.
const CLASSIFIER_MAX_TOKENS: u32 = 256;

/// The lane that takes the one task of `request` (whose entry is `request_seq`): the router's
/// when it decides, else the classifier's, witnessed. `None` when the run's budget or a
/// ceiling left no room for the classifier's call (the caller stops the run on it). A run
/// resumed after the classifier answered takes the lane already witnessed, and one whose
/// `route` is witnessed but whose classifier was not asked asks it under that `route`.
pub(super) fn assign(
    run: &Run<'_, '_>,
    request: &str,
    request_seq: u64,
) -> Result<Option<String>, RunError> {
    let roster = run.env.roster;
    let (decision, frame) = route::route_request(request, roster);
    if let Rung::Decided(lane) = route::first_rung(&decision) {
        return Ok(Some(lane));
    }
    if roster.agents().is_empty() {
        return Err(RunError::Request(
            "the roster has no lane to run a solo task: add one".into(),
        ));
    }
    let entries = run.entries()?;
    let route_seq = match witnessed_route(&entries, request_seq) {
        Some(seq) => {
            if let Some(lane) = witnessed_lane(run, &entries, seq)? {
                return Ok(Some(lane));
            }
            seq
        }
        None => {
            let body = route::route_payload(request, &decision, &frame);
            run.put_value("router", kind::ROUTE, Some(request_seq), body)?
                .seq
        }
    };
    run.check_vocabulary_gap()?;
    if run.over_budget() {
        return Ok(None);
    }
    ask(run, request, request_seq, route_seq)
}

/// Asks the orchestrator seat for the lane and witnesses its answer under `route_seq`.
fn ask(
    run: &Run<'_, '_>,
    request: &str,
    request_seq: u64,
    route_seq: u64,
) -> Result<Option<String>, RunError> {
    let roster = run.env.roster;
    let schema = OutputSchema {
        name: "classification".into(),
        schema: route::classifier_schema(roster),
    };
    let prompt = route::classifier_prompt(request, roster);
    let call = Call {
        system: Some(route::CLASSIFIER_SYSTEM),
        prompt: &prompt,
        schema: Some(&schema),
        max_tokens: Some(CLASSIFIER_MAX_TOKENS),
    };
    let orchestrator = run.env.seats.orchestrator();
    let (body, lane) = match run.ask(orchestrator.as_ref(), &call) {
        Err(e) if e.code() == "ceiling" => return Ok(None),
        Err(e) => {
            let why = format!("the orchestrator seat failed ({}): {e}", e.code());
            (route::unplaced_payload(request, &why, ""), Err(why))
        }
        Ok(reply) => {
            let answer = route::read_answer(&reply.text, roster);
            let body = route::classification_payload(request, &answer, &reply.text);
            let body = with_usage_value(body, usage_of(orchestrator.as_ref(), &reply));
            (body, answer.map(|c| c.agent).map_err(|e| e.to_string()))
        }
    };
    let witnessed = run.put_value("classifier", kind::CLASSIFICATION, Some(route_seq), body)?;
    match lane {
        Ok(lane) => Ok(Some(lane)),
        Err(why) => Err(stop_unplaced(run, request_seq, witnessed.seq, &why)?),
    }
}

/// Stops a run whose classifier named no lane: `run_stopped` at stage `route` under the
/// `classification` entry, and the error the caller returns.
fn stop_unplaced(
    run: &Run<'_, '_>,
    request_seq: u64,
    classification_seq: u64,
    why: &str,
) -> Result<RunError, RunError> {
    let reason = format!(
        "the keyword router could not choose a lane for run {request_seq} and the classifier named none ({why}): put a lane's keywords in the request (`git forum route` shows how it scores) and run it again"
    );
    run.put(
        "dispatch",
        kind::RUN_STOPPED,
        Some(classification_seq),
        json!({"stage": "route", "reason": reason}),
    )?;
    run.env.progress.event(&Event::Stopped {
        reason: format!("routing failed: {why}"),
    });
    Ok(RunError::Plan(reason))
}

/// The `route` entry witnessed under the request `request_seq`, if any.
fn witnessed_route(entries: &[Entry], request_seq: u64) -> Option<u64> {
    entries
        .iter()
        .find(|e| e.kind == kind::ROUTE && e.causal_parent == Some(request_seq as i64))
        .map(|e| e.seq)
}

/// The roster lane a `classification` under `route_seq` named, if one did.
fn witnessed_lane(
    run: &Run<'_, '_>,
    entries: &[Entry],
    route_seq: u64,
) -> Result<Option<String>, RunError> {
    for e in entries
        .iter()
        .filter(|e| e.kind == kind::CLASSIFICATION && e.causal_parent == Some(route_seq as i64))
    {
        let lane = run
            .payload_of(e)?
            .and_then(|b| b["agent"].as_str().map(str::to_string));
        if let Some(lane) = lane.filter(|l| run.env.roster.get(l).is_some()) {
            return Ok(Some(lane));
        }
    }
    Ok(None)
}
