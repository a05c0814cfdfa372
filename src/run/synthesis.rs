//! Synthesis: the orchestrator seat writes the answer from the usable results (through the
//! context budget when there is one), witnessed as the run's answer `result`; a failed
//! synthesis is witnessed as `run_stopped`. A `--work` run's answer ends with its changes as
//! the record holds them (never as a model wrote them); what the model's summary claims that
//! the record does not hold is named there and witnessed as `claim_check`.

use std::collections::BTreeMap;

use serde_json::json;

use crate::context::{self, Source};
use crate::exec::Call;
use crate::ledger::kind;
use crate::plan::Task;

use super::course::Course;
use super::engine::{Done, Run, usage_of, with_usage};
use super::prompts::synthesis_prompt;
use super::ship::{Record, work_summary};
use super::{Event, RunError, Verdict, lock};
use crate::report::claims::unsupported;

/// Asks for the answer and witnesses it under the request; returns its seq and text, or
/// `None` when a spend ceiling refused the call (the caller stops the run on it).
pub(super) fn synthesize(
    run: &Run<'_, '_>,
    course: &Course<'_>,
    tasks: &[&Task],
    finals: &BTreeMap<String, Done>,
    verdicts: &BTreeMap<String, Verdict>,
) -> Result<Option<(u64, String)>, RunError> {
    let request_seq = course.request_seq;
    run.env.progress.event(&Event::Synthesizing);
    let mut parts = usable_parts(run, tasks, finals, verdicts)?;
    // A --work run's changes, read back from its record: what the answer says changed is
    // written from it, and what the model's summary claims is held to it.
    let record = match run.work() {
        Some(w) => Some(Record::read(run, request_seq)?).map(|r| {
            let s = work_summary(&r, course.plan, w.run_seq);
            parts.push(format!("- what changed in the repository:\n{s}"));
            (s, r)
        }),
        None => None,
    };
    let prompt = synthesis_prompt(
        course.request,
        &parts,
        &course.frame.communication_contract.prompt_text(),
    );
    let call = Call {
        system: Some(
            "You write the final answer for the person who asked, from the team's results.",
        ),
        prompt: &prompt,
        schema: None,
        max_tokens: Some(768),
    };
    let orchestrator = run.env.seats.orchestrator();
    let asked = run.ask(orchestrator.as_ref(), &call);
    let usage = asked
        .as_ref()
        .ok()
        .and_then(|r| usage_of(orchestrator.as_ref(), r));
    let answer = match asked {
        Ok(r) if !r.text.trim().is_empty() => r.text.trim().to_string(),
        Ok(_) => {
            return Err(synthesis_failed(
                run,
                request_seq,
                "the orchestrator seat returned an empty answer".into(),
                usage,
            )?);
        }
        Err(e) if e.code() == "ceiling" => return Ok(None),
        Err(e) => {
            return Err(synthesis_failed(
                run,
                request_seq,
                format!("the orchestrator seat failed ({}): {e}", e.code()),
                None,
            )?);
        }
    };
    // A --work run's answer always says what changed and how it was checked, from the record.
    let (answer, claims) = match &record {
        Some((s, r)) => with_record(answer, s, r),
        None => (answer, None),
    };
    let a = run.put(
        "synthesizer",
        kind::RESULT,
        Some(request_seq),
        with_usage(json!({"answer": answer}), usage),
    )?;
    if let Some((claims, delivered)) = claims {
        witness_claims(run, a.seq, &claims, delivered)?;
    }
    Ok(Some((a.seq, answer)))
}

/// Witnesses what the answer at `answer_seq` claims that the record does not hold (nothing
/// when it claims nothing of the kind), as `claim_check` under the answer.
fn witness_claims(
    run: &Run<'_, '_>,
    answer_seq: u64,
    claims: &[String],
    delivered: bool,
) -> Result<(), RunError> {
    if !claims.is_empty() {
        run.put(
            "synthesizer",
            kind::CLAIM_CHECK,
            Some(answer_seq),
            json!({"answer": answer_seq, "delivered": delivered, "claims": claims}),
        )?;
    }
    Ok(())
}

/// A --work run's answer: the model's summary, then what changed and how it was checked as
/// the record holds it (`changes`), then what the summary claims that the record does not
/// hold. Also returns those claims and whether anything was delivered.
fn with_record(
    summary: String,
    changes: &str,
    record: &Record,
) -> (String, Option<(Vec<String>, bool)>) {
    let files = record.delivered_files();
    let claims = unsupported(
        &summary,
        files.is_some(),
        files.as_deref().unwrap_or_default(),
    );
    let mut text = format!("{summary}\n\n{changes}");
    if !claims.is_empty() {
        text.push_str(&format!(
            "\n- the summary above claims what this record does not hold: {}",
            claims.join("; ")
        ));
    }
    (text, Some((claims, files.is_some())))
}

/// One line per usable result (not blocked, not failed, not emptied by the budget), in plan
/// order, noting how validation ruled; the budget's pressure on each is witnessed under it.
fn usable_parts(
    run: &Run<'_, '_>,
    tasks: &[&Task],
    finals: &BTreeMap<String, Done>,
    verdicts: &BTreeMap<String, Verdict>,
) -> Result<Vec<String>, RunError> {
    let mut parts = Vec::new();
    for t in tasks {
        let Some(d) = finals.get(&t.id) else { continue };
        let v = verdicts.get(&t.id);
        if v.is_some_and(|v| v.decision == "block") || !d.ok {
            continue;
        }
        let text = match &run.opts.context_budget {
            Some(budget) => {
                let (admitted, p) = {
                    let mut meter = lock(&run.meter);
                    context::apply(
                        budget,
                        &mut meter,
                        Source::Upstream,
                        &format!("{}->synthesizer", t.id),
                        &d.output,
                    )
                };
                run.put_value(
                    "context-budget",
                    kind::CONTEXT_BUDGET,
                    Some(d.seq),
                    p.payload(),
                )?;
                admitted
            }
            None => d.output.clone(),
        };
        if text.is_empty() {
            continue;
        }
        let note = match v.map(|v| v.decision.as_str()) {
            Some("pass") => "accepted",
            Some("undetermined") => "not validated",
            _ => "did not pass validation",
        };
        parts.push(format!("- {} ({}, {note}): {text}", t.id, t.agent));
    }
    Ok(parts)
}

/// Witnesses `run_stopped` for a synthesis that gave no answer, with the call's usage when it
/// answered empty.
fn synthesis_failed(
    run: &Run<'_, '_>,
    request_seq: u64,
    reason: String,
    usage: Option<serde_json::Value>,
) -> Result<RunError, RunError> {
    run.put(
        "orchestrator",
        kind::RUN_STOPPED,
        Some(request_seq),
        with_usage(json!({"stage": "synthesis", "reason": reason}), usage),
    )?;
    run.env.progress.event(&Event::Stopped {
        reason: format!("synthesis failed: {reason}"),
    });
    Ok(RunError::Synthesis(reason))
}
