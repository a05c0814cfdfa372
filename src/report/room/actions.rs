//! The run room's next actions: which ones appear, in Forum's order and priorities, with our
//! labels and reasons. Each label ends with the exact command that carries the action out
//! (`git forum resume 12`), so a person can paste it; the actions' keys stay Forum's.

use super::*;

/// A request text quoted for a POSIX shell, so the command in a label can be pasted as it is.
fn quoted(text: &str) -> String {
    shlex::try_quote(text)
        .map(|q| q.into_owned())
        .unwrap_or_else(|_| "REQUEST".to_string())
}

pub(super) fn action(
    id: String,
    kind: &str,
    priority: &str,
    label: String,
    reason: &str,
    target: Value,
) -> Value {
    obj([
        ("id", Value::Str(id)),
        ("kind", Value::str(kind)),
        ("priority", Value::str(priority)),
        ("label", Value::Str(label)),
        ("reason", Value::str(reason)),
        ("target", target),
    ])
}

pub(super) fn signal(signals: &Value, key: &str) -> i64 {
    py_int(signals.get(key))
}

/// A retry for each task whose latest result failed or was not accepted (once per task id).
fn retry_actions(tasks: &[Value], run: &str) -> Vec<Value> {
    let mut high = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for task in tasks {
        let id = task.get("id").map(py_str).unwrap_or_default();
        if id.is_empty() || seen.contains(&id) {
            continue;
        }
        let result = task.get("result");
        let verdict = task.get("verdict");
        if is_false(result.and_then(|r| r.get("ok"))) {
            high.push(action(
                format!("retry-task:{id}"),
                "retry_task",
                "high",
                format!("Re-run task {id}: `git forum resume {run}`"),
                "its most recent result is a failure",
                obj([
                    ("task_id", Value::str(&id)),
                    (
                        "result_seq",
                        result
                            .and_then(|r| r.get("seq"))
                            .cloned()
                            .unwrap_or(Value::Null),
                    ),
                ]),
            ));
            seen.insert(id);
        } else if is_false(verdict.and_then(|v| v.get("ok"))) {
            high.push(action(
                format!("retry-task:{id}"),
                "retry_task",
                "high",
                format!("Re-run task {id}: `git forum resume {run}`"),
                "the validator did not accept its most recent result",
                obj([
                    ("task_id", Value::str(&id)),
                    ("task_seq", task.get("seq").cloned().unwrap_or(Value::Null)),
                ]),
            ));
            seen.insert(id);
        }
    }
    high
}

/// A review for each gate that waits for a person.
fn gate_actions(pending: &[Value]) -> Vec<Value> {
    let mut high = Vec::new();
    for gate in pending {
        let run_seq = gate.get("run_seq").cloned().unwrap_or(Value::Null);
        let wave = gate.get("wave").cloned().unwrap_or(Value::Null);
        high.push(action(
            format!("review-gate:{}:{}", py_str(&run_seq), py_str(&wave)),
            "review_gate",
            "high",
            format!(
                "Approve, edit or reject the gate before wave {w}: `git forum gate approve --run {r} --wave {w}` (or `gate edit`, `gate reject`), then `git forum resume {r}`",
                w = py_str(&wave),
                r = py_str(&run_seq),
            ),
            "a gated wave waits for a person's decision",
            obj([("run_seq", run_seq), ("wave", wave)]),
        ));
    }
    high
}

/// The normal-priority actions: rework what the checks flagged, and export the receipt when
/// the run has its answer and nothing of high priority blocks it.
fn normal_actions(
    signals: &Value,
    answer: &Value,
    text: &str,
    run: &str,
    blocked: bool,
) -> Vec<Value> {
    let mut normal = Vec::new();
    if signal(signals, "flagged_delivery") > 0 || signal(signals, "flagged_delivery_profiles") > 0 {
        normal.push(action(
            "revise-delivery".into(),
            "revise_delivery",
            "normal",
            format!("Rework the answer's wording: `git forum submit --revise {text}`"),
            "a delivery check flagged how the answer reads",
            Value::Object(Vec::new()),
        ));
    }
    if signal(signals, "flagged_intent") > 0 {
        normal.push(action(
            "judge-intent".into(),
            "judge_intent",
            "normal",
            format!("Check that the answer addresses the request: `git forum submit --judge-intent {text}`"),
            "the lexical intent check found request terms the answer leaves out",
            Value::Object(Vec::new()),
        ));
    }
    if signal(signals, "refuted_verifications") > 0 {
        normal.push(action(
            "review-verification".into(),
            "review_verification",
            "normal",
            format!("Look into why the verifier rejected the answer: `git forum receipt {run}`"),
            "an outside verifier refuted the answer",
            Value::Object(Vec::new()),
        ));
    }
    if !matches!(answer, Value::Null) && !blocked {
        normal.push(action(
            "export-receipt".into(),
            "export_receipt",
            "normal",
            format!("Export the run's receipt: `git forum receipt {run} --json`"),
            "the run has its answer and nothing blocks it",
            obj([(
                "answer_seq",
                answer.get("seq").cloned().unwrap_or(Value::Null),
            )]),
        ));
    }
    normal
}

pub(super) fn next_actions(
    request: &Value,
    tasks: &[Value],
    checkpoints: &[Value],
    answer: &Value,
    signals: &Value,
    pending: &[Value],
) -> Vec<Value> {
    if matches!(request, Value::Null) {
        return vec![action(
            "submit-request".into(),
            "submit_request",
            "normal",
            "Start a run: `git forum submit \"REQUEST\"`".into(),
            "no request is recorded in this room",
            Value::Object(Vec::new()),
        )];
    }
    let run = request.get("seq").map(py_str).unwrap_or_default();
    let text = quoted(&request.get("text").map(py_str).unwrap_or_default());
    let mut high = retry_actions(tasks, &run);
    if signal(signals, "budget_stops") > 0 {
        high.push(action(
            "raise-budget".into(),
            "raise_budget",
            "high",
            format!("Give the run more budget and resume it: `git forum resume {run} --max-model-calls N`"),
            "the run stopped when its budget ran out",
            Value::Object(Vec::new()),
        ));
    }
    if let Some(last) = checkpoints.last()
        && matches!(answer, Value::Null)
    {
        high.push(action(
            "resume-from-checkpoint".into(),
            "resume_from_checkpoint",
            "high",
            format!("Resume the run from its last wave checkpoint: `git forum resume {run}`"),
            "a wave checkpoint is recorded and no answer came after it",
            obj([
                (
                    "checkpoint_seq",
                    last.get("seq").cloned().unwrap_or(Value::Null),
                ),
                ("wave", last.get("wave").cloned().unwrap_or(Value::Null)),
            ]),
        ));
    }
    high.extend(gate_actions(pending));
    let normal = normal_actions(signals, answer, &text, &run, !high.is_empty());
    high.extend(normal);
    high
}
