//! The run room's brief: state, posture, risk, next step and bullets for a reader in a hurry.

use super::actions::signal;
use super::*;

pub(super) fn count_of(n: i64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The brief's summary for its state (and, when action is required, whether the ledger
/// verified).
fn brief_summary(state: &str, verified: bool) -> &'static str {
    match (state, verified) {
        ("idle", _) => "No request is recorded here yet.",
        ("action_required", true) => {
            "The ledger checks out, but something below needs a person before the answer goes out."
        }
        ("action_required", false) => {
            "The ledger did not verify; treat everything in this room as suspect until that is explained."
        }
        ("complete", _) => {
            "The ledger checks out, the run has its answer and no blocking signal was recorded; an intact ledger does not mean anyone checked the answer itself (see below)."
        }
        ("in_progress", _) => "The ledger checks out; the run has started and has no answer yet.",
        _ => "The request is recorded; no task has been dispatched yet.",
    }
}

/// The brief's next step: the first action's label, else what the state asks for.
fn next_step(actions: &[Value], state: &str) -> String {
    match actions.first() {
        Some(a) => {
            let label = a
                .get("label")
                .filter(|l| truthy(Some(l)))
                .or_else(|| a.get("kind").filter(|k| truthy(Some(k))))
                .map(py_str)
                .unwrap_or_else(|| "Look over the room".into());
            sentence(&label)
        }
        None => match state {
            "idle" => "Ask for something with `git forum submit`.".into(),
            "ready" => "Plan the request and dispatch its tasks.".into(),
            "in_progress" => {
                "Let the run go on (or `git forum resume` it) until an answer is recorded.".into()
            }
            _ => "Look over the room.".into(),
        },
    }
}

pub(super) fn build_brief(room: &Value) -> Value {
    let request = room.get("request").filter(|r| truthy(Some(r)));
    let frame = room.get("route_frame").filter(|f| truthy(Some(f)));
    let signals = room.get("signals").cloned().unwrap_or(Value::Null);
    let verified = truthy(room.get("verified"));
    let actions: &[Value] = match room.get("next_actions") {
        Some(Value::Array(a)) => a,
        _ => &[],
    };
    let answer_text = room
        .get("answer")
        .and_then(|a| a.get("text"))
        .filter(|t| truthy(Some(t)))
        .is_some();
    let has_tasks = truthy(room.get("tasks"));
    let state = if request.is_none() {
        "idle"
    } else if !verified
        || actions
            .iter()
            .any(|a| a.get("priority").and_then(Value::as_str) == Some("high"))
        || ATTENTION_SIGNALS.iter().any(|k| signal(&signals, k) > 0)
    {
        "action_required"
    } else if answer_text {
        "complete"
    } else if has_tasks {
        "in_progress"
    } else {
        "ready"
    };
    let subject = request
        .and_then(|r| r.get("text"))
        .filter(|t| truthy(Some(t)))
        .map(py_str)
        .unwrap_or_else(|| "the latest run".to_string());
    let title = match state {
        "idle" => "Nothing has been asked in this room".to_string(),
        "action_required" => format!("Needs a decision: {subject}"),
        "complete" => format!("Finished: {subject}"),
        "in_progress" => format!("Under way: {subject}"),
        _ => format!("Queued: {subject}"),
    };
    let summary = brief_summary(state, verified);
    let text_field = |v: Option<&Value>, key: &str| -> String {
        v.and_then(|f| f.get(key))
            .filter(|x| truthy(Some(x)))
            .map(py_str)
            .unwrap_or_else(|| "operator".into())
    };
    let next_step = next_step(actions, state);
    obj([
        ("schema", Value::str(BRIEF_SCHEMA)),
        ("state", Value::str(state)),
        ("title", Value::Str(title)),
        ("posture", Value::Str(text_field(frame, "posture"))),
        (
            "delivery_profile",
            Value::Str(text_field(frame, "delivery_profile")),
        ),
        ("summary", Value::str(summary)),
        ("risk", Value::Str(risk(verified, &signals))),
        ("next_step", Value::Str(next_step)),
        ("bullets", Value::Array(bullets(room, frame, &signals))),
    ])
}

pub(super) fn sentence(text: &str) -> String {
    let t = text.trim();
    if t.is_empty() || t.ends_with(['.', '!', '?']) {
        t.to_string()
    } else {
        format!("{t}.")
    }
}

pub(super) fn risk(verified: bool, signals: &Value) -> String {
    if !verified {
        return "The ledger failed verification: run `git forum verify` before acting on it."
            .into();
    }
    let s = |k: &str| signal(signals, k);
    let mut work = Vec::new();
    if s("failed_results") > 0 {
        work.push(count_of(
            s("failed_results"),
            "task result failed",
            "task results failed",
        ));
    }
    if s("failed_verdicts") > 0 {
        work.push(count_of(
            s("failed_verdicts"),
            "verdict did not pass",
            "verdicts did not pass",
        ));
    }
    if !work.is_empty() {
        return format!("The work fell short: {}.", work.join("; "));
    }
    if s("budget_stops") > 0 {
        return format!(
            "The budget ran out and stopped the run ({}).",
            count_of(s("budget_stops"), "time", "times")
        );
    }
    if s("refuted_verifications") > 0 {
        return "An outside verifier rejected the answer.".into();
    }
    let mut wording = Vec::new();
    if s("flagged_delivery") > 0 {
        wording.push(count_of(
            s("flagged_delivery"),
            "delivery check",
            "delivery checks",
        ));
    }
    if s("flagged_delivery_profiles") > 0 {
        wording.push(count_of(
            s("flagged_delivery_profiles"),
            "profile check",
            "profile checks",
        ));
    }
    if !wording.is_empty() {
        return format!(
            "The answer's wording was flagged by {}.",
            wording.join(" and ")
        );
    }
    if s("intent_drift_judged") > 0 {
        return "The intent judge found that the answer strays from the request.".into();
    }
    if s("flagged_intent") > 0 {
        return "The answer may miss part of the request (lexical intent check).".into();
    }
    "Nothing blocking was recorded.".into()
}

pub(super) fn bullets(room: &Value, frame: Option<&Value>, signals: &Value) -> Vec<Value> {
    let tasks: &[Value] = match room.get("tasks") {
        Some(Value::Array(a)) => a,
        _ => &[],
    };
    let with_results = tasks.iter().filter(|t| truthy(t.get("result"))).count();
    let accepted = tasks
        .iter()
        .filter(|t| is_true(t.get("verdict").and_then(|v| v.get("ok"))))
        .count();
    let route = match frame {
        Some(f) => {
            let part = |k: &str| f.get(k).map(py_str).unwrap_or_default();
            format!(
                "Routing: {}, {}, {}",
                part("domain"),
                part("intent"),
                part("posture")
            )
        }
        None => "Routing: none recorded".to_string(),
    };
    let answer = room
        .get("answer")
        .and_then(|a| a.get("text"))
        .filter(|t| truthy(Some(t)))
        .is_some();
    let ran = signal(signals, "verifications_ran");
    let refuted = signal(signals, "refuted_verifications");
    let outside = if ran <= 0 {
        "Outside verification: none ran (a verified ledger proves the record, not the answer)"
            .to_string()
    } else if refuted > 0 {
        format!("Outside verification: {ran} ran, {refuted} rejected the answer")
    } else {
        format!("Outside verification: {ran} ran, none rejected the answer")
    };
    let mut out = vec![
        Value::Str(route),
        Value::Str(format!(
            "Tasks: {} dispatched, {with_results} with a result, {accepted} accepted by the validator",
            tasks.len()
        )),
        Value::str(if answer {
            "Answer: recorded"
        } else {
            "Answer: none yet"
        }),
        Value::Str(outside),
    ];
    // A --work run: what it changed and where its changes stand (Forum has no such bullet).
    if let Some(w) = room.get("work") {
        let n = |v: Option<&Value>| u64::try_from(py_int(v)).unwrap_or(0);
        let ship = |k: &str| n(w.get("ship").and_then(|s| s.get(k)));
        let passed = n(w.get("checks").and_then(|c| c.get("passed")));
        let failed = n(w.get("checks").and_then(|c| c.get("failed")));
        out.push(Value::Str(format!(
            "Changes: {} {}, +{} -{} lines; checks {passed} passed, {failed} failed; {} merged, {} blocked, {} waiting for a person",
            count_of(n(w.get("changes")) as i64, "commit", "commits"),
            match w.get("branch") {
                Some(Value::Str(b)) => format!("on {b}"),
                _ => "with no run branch".into(),
            },
            n(w.get("added")),
            n(w.get("removed")),
            ship("merged"),
            ship("blocked"),
            ship("waiting")
        )));
    }
    out
}
