//! Delivery of the synthesized answer: the delivery floor and the reviser, the delivery
//! profile, the intent check and the intent judge, then the verifier.

use crate::exec::Call;
use crate::ledger::canonical::Value;
use crate::ledger::kind;
use crate::route::RouteFrame;

use super::engine::{Run, usage_of, with_usage_value};
use super::prompts::{judge_prompt, reviser_prompt};
use super::{
    Event, RunError, Verification, VerifierConclusion, judgment_schema, panic_message,
    parse_judgment,
};

/// How delivery ended: the delivered answer, or a spend ceiling that refused (or had
/// already closed on) the opted-in step named, so the run stops on it.
pub(super) enum Delivered {
    Answer(u64, String),
    Ceiling(&'static str),
}

/// Delivers the synthesized answer (forum-spec §13–15, forum-features §4 "Order inside one
/// submit"): the delivery floor on the answer; when it flags and a reviser is on, a revision
/// (accepted only if strictly shorter with coverage not lower, then witnessed as the revised
/// `result`); then, on the delivered answer, the delivery profile (the caller's, else the
/// route frame's), the lexical intent check and, when it flags and the judge is on, the
/// intent judgment; last the verifier's verdict. None of them blocks the run. Returns the
/// delivered answer's seq and text; when a spend ceiling keeps the reviser or the judge from
/// running, delivery stops there ([`Delivered::Ceiling`]). `models` false (a solo run) keeps
/// the reviser and the judge from being called whatever the options say.
pub(super) fn deliver(
    run: &Run<'_, '_>,
    request: &str,
    frame: &RouteFrame,
    (answer_seq, answer): (u64, String),
    models: bool,
) -> Result<Delivered, RunError> {
    use crate::quality;
    let floor = quality::assess(&answer);
    let check = run.put_value(
        "delivery",
        kind::DELIVERY_CHECK,
        Some(answer_seq),
        floor.payload(),
    )?;
    let (seq, answer) = if floor.flagged && run.opts.revise && models {
        match revise(run, request, check.seq, answer_seq, answer)? {
            Some(r) => r,
            None => return Ok(Delivered::Ceiling("reviser")),
        }
    } else {
        (answer_seq, answer)
    };
    let profile = match &run.opts.delivery_profile {
        Some(p) => quality::profile::get_profile(Some(p)).unwrap_or(frame.delivery_profile),
        None => frame.delivery_profile,
    };
    run.put_value(
        "delivery-profile",
        kind::DELIVERY_PROFILE_CHECK,
        Some(seq),
        quality::profile::assess_profile(&answer, profile).payload(),
    )?;
    let intent = quality::intent_check(request, &answer, quality::intent::DEFAULT_THRESHOLD);
    let intent_entry = run.put_value("intent", kind::INTENT_CHECK, Some(seq), intent.payload())?;
    if intent.flagged
        && run.opts.judge_intent
        && models
        && !judge(run, request, &answer, &intent.missing, intent_entry.seq)?
    {
        return Ok(Delivered::Ceiling("intent judge"));
    }
    if let Some(verifier) = &run.opts.verifier {
        run.env.progress.event(&Event::Verifying);
        let v = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            verifier.verify(request, &answer)
        }))
        .unwrap_or_else(|p| Verification {
            outcome: VerifierConclusion::Undecided,
            detail: format!(
                "could not decide: the verifier panicked: {}",
                panic_message(p.as_ref())
            ),
            source: verifier.source(),
        });
        run.put_value("verifier", kind::VERIFICATION, Some(seq), v.payload())?;
    }
    Ok(Delivered::Answer(seq, answer))
}

/// The reviser rung: asks the orchestrator seat to tighten a flagged answer and keeps the
/// revision only if [`crate::quality::revision_accepted`] says so. Witnesses `revision` under
/// the delivery check (with the call's usage) and, when accepted, `result {answer,
/// revised_from}` under the revision. Skipped (nothing witnessed) once the call budget is
/// spent; `None` (nothing witnessed) when a spend ceiling refuses the call or has closed.
fn revise(
    run: &Run<'_, '_>,
    request: &str,
    check_seq: u64,
    answer_seq: u64,
    answer: String,
) -> Result<Option<(u64, String)>, RunError> {
    use crate::quality;
    if run.over_budget() {
        if run.ceiling_hit().is_some() {
            return Ok(None);
        }
        run.env.progress.event(&Event::Skipped {
            step: "reviser".into(),
            reason: "the run budget is spent".into(),
        });
        return Ok(Some((answer_seq, answer)));
    }
    run.env.progress.event(&Event::Revising);
    // A --work run's Changes part is the record's: the reviser sees and rewrites only the
    // summary above it, and the part is put back unchanged.
    let (summary, record) = match run.work().and(answer.find(super::ship::CHANGES_PART)) {
        Some(i) => answer.split_at(i),
        None => (answer.as_str(), ""),
    };
    let prompt = reviser_prompt(request, summary);
    let call = Call {
        system: Some("You tighten answers without changing what they say."),
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
    let (revised, said) = match asked {
        Ok(r) if !r.text.trim().is_empty() => (
            format!("{}{record}", r.text.trim()),
            r.text.trim().to_string(),
        ),
        Ok(_) => {
            let why = "the orchestrator seat returned an empty answer";
            witness_failed_revision(run, check_seq, why, usage)?;
            return Ok(Some((answer_seq, answer)));
        }
        Err(e) if e.code() == "ceiling" => return Ok(None),
        Err(e) => {
            let why = format!("the orchestrator seat failed ({}): {e}", e.code());
            witness_failed_revision(run, check_seq, &why, None)?;
            return Ok(Some((answer_seq, answer)));
        }
    };
    let verdict = quality::revision_accepted(request, &answer, &revised);
    let mut body = verdict.payload();
    if !verdict.accepted {
        body = with_rejected_text(body, &said);
    }
    let rev = run.put_value(
        "reviser",
        kind::REVISION,
        Some(check_seq),
        with_usage_value(body, usage),
    )?;
    if !verdict.accepted {
        return Ok(Some((answer_seq, answer)));
    }
    let r = run.put_value(
        "synthesizer",
        kind::RESULT,
        Some(rev.seq),
        Value::object([
            ("answer".to_string(), Value::str(&revised)),
            ("revised_from".to_string(), Value::int(answer_seq as i64)),
        ]),
    )?;
    Ok(Some((r.seq, revised)))
}

/// The bytes of a rejected revision's text its `revision` entry keeps.
pub(crate) const REJECTED_TEXT_CAP: usize = 16 * 1024;

/// A rejected revision's body with the reviser's text (`text`, cut to
/// [`REJECTED_TEXT_CAP`] bytes, then `text_truncated`), so a strict replay can hand the
/// reviser's reply back and decide again that it is rejected. The text is screened for
/// secrets like every body a run writes.
fn with_rejected_text(body: Value, text: &str) -> Value {
    let Value::Object(mut fields) = body else {
        return body;
    };
    let (kept, cut) = super::edit_tools::cap_text(text, REJECTED_TEXT_CAP);
    fields.push(("text".to_string(), Value::str(kept)));
    if cut {
        fields.push(("text_truncated".to_string(), Value::Bool(true)));
    }
    Value::Object(fields)
}

/// Witnesses a `revision` that could not be made (why, and the call's usage when it counted).
fn witness_failed_revision(
    run: &Run<'_, '_>,
    check_seq: u64,
    why: &str,
    usage: Option<serde_json::Value>,
) -> Result<(), RunError> {
    let payload = with_usage_value(
        crate::quality::delivery::revision_failed_payload(why),
        usage,
    );
    run.put_value("reviser", kind::REVISION, Some(check_seq), payload)?;
    Ok(())
}

/// The intent judge rung: the orchestrator seat reads the request, the answer and the terms
/// the floor found missing, and rules drifted (`ok: false`) or paraphrased (`ok: true`),
/// witnessed as `intent_judgment` under the intent check. A seat error or an unreadable
/// ruling is `{ok: null, score: 0.0, reason: "judge failed: ..."}`. Skipped (nothing
/// witnessed) once the call budget is spent. `false` (nothing witnessed) when a spend ceiling
/// refuses the call or has closed.
fn judge(
    run: &Run<'_, '_>,
    request: &str,
    answer: &str,
    missing: &[String],
    check_seq: u64,
) -> Result<bool, RunError> {
    if run.over_budget() {
        if run.ceiling_hit().is_some() {
            return Ok(false);
        }
        run.env.progress.event(&Event::Skipped {
            step: "intent judge".into(),
            reason: "the run budget is spent".into(),
        });
        return Ok(true);
    }
    run.env.progress.event(&Event::Judging);
    let prompt = judge_prompt(request, answer, missing);
    let schema = judgment_schema();
    let call = Call {
        system: Some("You judge whether an answer addresses its request. Answer with JSON only."),
        prompt: &prompt,
        schema: Some(&schema),
        max_tokens: Some(256),
    };
    let orchestrator = run.env.seats.orchestrator();
    let mut usage = None;
    // An answer that is not a usable ruling is kept, so a strict replay reads it again.
    let mut unusable = None;
    let ruling = match run.ask(orchestrator.as_ref(), &call) {
        Err(e) if e.code() == "ceiling" => return Ok(false),
        Ok(reply) => {
            usage = usage_of(orchestrator.as_ref(), &reply);
            parse_judgment(&reply.text).map_err(|e| {
                unusable = Some(reply.text.clone());
                format!("the judge's answer is not a usable ruling: {e}")
            })
        }
        Err(e) => Err(format!("the orchestrator seat failed ({}): {e}", e.code())),
    };
    let (ok, score, reason) = match ruling {
        Ok((ok, score, reason)) => (Value::Bool(ok), score, reason),
        Err(why) => (Value::Null, 0.0, format!("judge failed: {why}")),
    };
    let mut fields = vec![
        ("ok".to_string(), ok),
        ("score".to_string(), Value::Float(score)),
        ("reason".to_string(), Value::str(reason)),
    ];
    if let Some(text) = unusable {
        let (kept, cut) = super::edit_tools::cap_text(&text, super::ship::GATE_REPLY_CAP);
        fields.push(("reply".to_string(), Value::str(kept)));
        if cut {
            fields.push(("reply_cut".to_string(), Value::Bool(true)));
        }
    }
    // The call's usage, when the seat counted it (never for Forum's own ledgers).
    if let Some(u) = usage {
        fields.push(("usage".to_string(), Value::from_serde(&u)));
    }
    run.put_value(
        "intent-judge",
        kind::INTENT_JUDGMENT,
        Some(check_seq),
        Value::object(fields),
    )?;
    Ok(true)
}
