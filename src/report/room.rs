//! The run room (forum-spec §19): one snapshot of the latest run with its quality signals, the
//! next actions an operator can take, and a short brief.
//!
//! The slice, the fields, the signals, which actions appear (their `id`, `kind`, `priority`
//! and `target`) and the brief's `state`, `posture` and `delivery_profile` follow Forum's
//! `run_room.py`, `run_actions.py` and `run_brief.py` exactly. The words are this project's:
//! action labels and reasons, the brief's title, summary, risk, next step and bullets, and
//! both text renderings ([`room_text`], [`room_brief_text`]).

use std::collections::{HashMap, HashSet};

use super::{
    Snapshot, clip, clip_str, entry_range, field, has, is_false, is_true, kind_counts, members,
    obj, py_int, py_str, truthy, uint,
};
use crate::gate::{self, GateState, Mark};
use crate::ledger::canonical::Value;
use crate::ledger::{Entry, kind};

/// The room's schema name.
pub const RUN_ROOM_SCHEMA: &str = "forum.run-room/v1";
/// The brief's schema name.
pub const BRIEF_SCHEMA: &str = "forum.run-room.brief/v1";

/// Signals that, when above zero, make a run need attention (Forum's list).
const ATTENTION_SIGNALS: [&str; 7] = [
    "budget_stops",
    "failed_results",
    "failed_verdicts",
    "flagged_delivery",
    "flagged_delivery_profiles",
    "flagged_intent",
    "refuted_verifications",
];

type Item = (Entry, Option<Value>);

/// Builds the run room over `s` (the whole ledger). The room covers the entries from
/// `since_seq`, else from the last `request`, else the whole ledger; pending gates are read
/// from the whole ledger. Texts are clipped to `max_text_chars` code points.
pub fn build_run_room(s: &Snapshot, since_seq: Option<u64>, max_text_chars: usize) -> Value {
    let start = match since_seq {
        Some(seq) => Some(seq),
        None => s
            .items
            .iter()
            .rev()
            .find(|(e, _)| e.kind == kind::REQUEST)
            .or(s.items.first())
            .map(|(e, _)| e.seq),
    };
    let slice: Vec<&Item> = s
        .items
        .iter()
        .filter(|(e, _)| start.is_none_or(|st| e.seq >= st))
        .collect();
    let owned: Vec<Item> = slice.iter().map(|i| (*i).clone()).collect();
    let counts = kind_counts(slice.iter().map(|(e, _)| e));
    let request = request(&slice, max_text_chars);
    let route_frame = slice
        .iter()
        .rev()
        .find(|(e, _)| e.kind == kind::ROUTE_FRAME)
        .map(|(_, b)| Value::Object(members(b.as_ref()).to_vec()))
        .unwrap_or(Value::Null);
    let plan = plan(&slice);
    let tasks = tasks(&slice, max_text_chars);
    let checkpoints = checkpoints(&slice);
    let answer = slice
        .iter()
        .rev()
        .find_map(|(e, b)| match field(b.as_ref(), "answer") {
            Some(Value::Str(a)) if e.kind == kind::RESULT => Some(super::obj([
                ("seq", uint(e.seq)),
                ("text", Value::Str(clip_str(a, max_text_chars))),
            ])),
            _ => None,
        })
        .unwrap_or(Value::Null);
    let pending = pending_gates(&s.items);
    let mut signals = signals(&slice);
    signals.push(("pending_gates".into(), uint(pending.len() as u64)));
    let signals = Value::Object(signals);
    let next_actions = next_actions(&request, &tasks, &checkpoints, &answer, &signals, &pending);
    let mut room = vec![
        ("schema".to_string(), Value::str(RUN_ROOM_SCHEMA)),
        ("checkpoint".into(), Value::str(&s.checkpoint)),
        ("verified".into(), Value::Bool(s.deep_verified)),
        ("entry_range".into(), entry_range(&owned)),
        (
            "counts".into(),
            Value::Object(
                counts
                    .into_iter()
                    .map(|(k, n)| (k, Value::int(n)))
                    .collect(),
            ),
        ),
        ("request".into(), request),
        ("route_frame".into(), route_frame),
        ("plan".into(), plan),
        ("tasks".into(), Value::Array(tasks)),
        ("checkpoints".into(), Value::Array(checkpoints)),
        ("answer".into(), answer),
        ("signals".into(), signals),
        ("next_actions".into(), Value::Array(next_actions)),
    ];
    let brief = build_brief(&Value::Object(room.clone()));
    room.push(("brief".into(), brief));
    Value::Object(room)
}

fn request(slice: &[&Item], max: usize) -> Value {
    let Some((e, b)) = slice.iter().rev().find(|(e, _)| e.kind == kind::REQUEST) else {
        return Value::Null;
    };
    let b = b.as_ref();
    let mut out = vec![("seq".to_string(), uint(e.seq))];
    if has(b, "text") {
        out.push(("text".into(), Value::Str(clip(field(b, "text"), max))));
    }
    if has(b, "tasks") {
        out.push(("tasks".into(), py_list(field(b, "tasks"))));
    }
    Value::Object(out)
}

fn plan(slice: &[&Item]) -> Value {
    let Some((e, b)) = slice.iter().rev().find(|(e, _)| e.kind == kind::PLAN) else {
        return Value::Null;
    };
    let b = b.as_ref();
    obj([
        ("seq", uint(e.seq)),
        (
            "waves",
            field(b, "waves")
                .cloned()
                .unwrap_or(Value::Array(Vec::new())),
        ),
        (
            "edges",
            field(b, "edges")
                .cloned()
                .unwrap_or(Value::Array(Vec::new())),
        ),
    ])
}

/// `str(payload.get(key, ""))`.
fn str_field(b: Option<&Value>, key: &str) -> String {
    field(b, key).map(py_str).unwrap_or_default()
}

/// `list(value or [])`.
fn py_list(v: Option<&Value>) -> Value {
    if !truthy(v) {
        return Value::Array(Vec::new());
    }
    match v {
        Some(Value::Array(a)) => Value::Array(a.clone()),
        Some(Value::Str(s)) => Value::Array(s.chars().map(|c| Value::Str(c.to_string())).collect()),
        Some(Value::Object(m)) => Value::Array(m.iter().map(|(k, _)| Value::str(k)).collect()),
        _ => Value::Array(Vec::new()),
    }
}

/// The latest entry of `kind` per task id (payloads carrying an `id`).
fn latest_by_id<'a>(slice: &[&'a Item], kind: &str) -> HashMap<String, &'a Item> {
    let mut out: HashMap<String, &Item> = HashMap::new();
    for item in slice {
        let (e, b) = item;
        if e.kind == kind && has(b.as_ref(), "id") {
            out.insert(str_field(b.as_ref(), "id"), item);
        }
    }
    out
}

fn tasks(slice: &[&Item], max: usize) -> Vec<Value> {
    let results = latest_by_id(slice, kind::RESULT);
    let verdicts = latest_by_id(slice, kind::VERDICT);
    let mut out = Vec::new();
    for (e, b) in slice.iter().map(|i| (&i.0, i.1.as_ref())) {
        if e.kind != kind::TASK {
            continue;
        }
        let id = str_field(b, "id");
        let mut task = vec![
            ("seq".to_string(), uint(e.seq)),
            ("id".into(), Value::str(&id)),
            ("agent".into(), Value::Str(str_field(b, "agent"))),
            (
                "instruction".into(),
                Value::Str(clip(
                    Some(field(b, "instruction").unwrap_or(&Value::Str(String::new()))),
                    max,
                )),
            ),
            ("done_when".into(), py_list(field(b, "done_when"))),
            ("data_from".into(), py_list(field(b, "data_from"))),
        ];
        if let Some((re, rb)) = results.get(&id) {
            let rb = rb.as_ref();
            task.push((
                "result".into(),
                obj([
                    ("seq", uint(re.seq)),
                    ("ok", field(rb, "ok").cloned().unwrap_or(Value::Null)),
                    ("model", Value::Str(str_field(rb, "model"))),
                    (
                        "output",
                        Value::Str(clip(
                            Some(field(rb, "output").unwrap_or(&Value::Str(String::new()))),
                            max,
                        )),
                    ),
                ]),
            ));
        }
        if let Some((_, vb)) = verdicts.get(&id) {
            let vb = vb.as_ref();
            task.push((
                "verdict".into(),
                obj([
                    ("ok", field(vb, "ok").cloned().unwrap_or(Value::Null)),
                    ("score", field(vb, "score").cloned().unwrap_or(Value::Null)),
                    (
                        "reason",
                        Value::Str(clip(
                            Some(field(vb, "reason").unwrap_or(&Value::Str(String::new()))),
                            max,
                        )),
                    ),
                ]),
            ));
        }
        out.push(Value::Object(task));
    }
    out
}

fn checkpoints(slice: &[&Item]) -> Vec<Value> {
    slice
        .iter()
        .filter(|(e, _)| e.kind == kind::CHECKPOINT)
        .map(|(e, b)| {
            let b = b.as_ref();
            obj([
                ("seq", uint(e.seq)),
                ("wave", field(b, "wave").cloned().unwrap_or(Value::Null)),
                ("root", Value::Str(str_field(b, "root"))),
            ])
        })
        .collect()
}

fn signals(slice: &[&Item]) -> Vec<(String, Value)> {
    let count = |pred: &dyn Fn(&Entry, Option<&Value>) -> bool| -> Value {
        uint(slice.iter().filter(|(e, b)| pred(e, b.as_ref())).count() as u64)
    };
    let (mut original, mut admitted, mut checks) = (0i64, 0i64, 0u64);
    for (e, b) in slice {
        if e.kind == kind::CONTEXT_BUDGET {
            checks += 1;
            original += py_int(field(b.as_ref(), "original_tokens"));
            admitted += py_int(field(b.as_ref(), "admitted_tokens"));
        }
    }
    let kind_flag = |kind: &'static str, key: &'static str| {
        count(&move |e: &Entry, b: Option<&Value>| e.kind == kind && truthy(field(b, key)))
    };
    let kind_false = |kind: &'static str| {
        count(&move |e: &Entry, b: Option<&Value>| e.kind == kind && is_false(field(b, "ok")))
    };
    vec![
        (
            "budget_stops".into(),
            count(&|e: &Entry, _: Option<&Value>| e.kind == kind::BUDGET),
        ),
        ("context_budget_checks".into(), uint(checks)),
        (
            "context_tokens_saved".into(),
            Value::int(original.saturating_sub(admitted)),
        ),
        (
            "failed_results".into(),
            count(&|e: &Entry, b: Option<&Value>| {
                e.kind == kind::RESULT && has(b, "id") && is_false(field(b, "ok"))
            }),
        ),
        ("failed_verdicts".into(), kind_false(kind::VERDICT)),
        (
            "flagged_delivery".into(),
            kind_flag(kind::DELIVERY_CHECK, "flagged"),
        ),
        (
            "delivery_profile_checks".into(),
            count(&|e: &Entry, _: Option<&Value>| e.kind == kind::DELIVERY_PROFILE_CHECK),
        ),
        (
            "flagged_delivery_profiles".into(),
            kind_flag(kind::DELIVERY_PROFILE_CHECK, "flagged"),
        ),
        (
            "flagged_intent".into(),
            kind_flag(kind::INTENT_CHECK, "flagged"),
        ),
        (
            "refuted_verifications".into(),
            kind_false(kind::VERIFICATION),
        ),
        (
            "verifications_ran".into(),
            count(&|e: &Entry, b: Option<&Value>| {
                e.kind == kind::VERIFICATION && !matches!(field(b, "ok"), None | Some(Value::Null))
            }),
        ),
        (
            "intent_drift_judged".into(),
            kind_false(kind::INTENT_JUDGMENT),
        ),
    ]
}

// ----- gates -----

/// Python `==` between two JSON values (numbers compare by value, `True == 1`).
fn py_eq(a: &Value, b: &Value) -> bool {
    fn num(v: &Value) -> Option<f64> {
        match v {
            Value::Int(i) => i.as_str().parse().ok(),
            Value::Float(f) => Some(*f),
            Value::Bool(b) => Some(f64::from(u8::from(*b))),
            _ => None,
        }
    }
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.iter().any(|(k2, v2)| k == k2 && py_eq(v, v2)))
        }
        _ => match (num(a), num(b)) {
            (Some(x), Some(y)) => x == y,
            _ => a == b,
        },
    }
}

/// Forum's `_matches`: an object body whose `run_seq` and `wave` equal the key's.
fn matches_key(b: Option<&Value>, run_seq: &Value, wave: &Value) -> bool {
    matches!(b, Some(Value::Object(_)))
        && py_eq(field(b, "run_seq").unwrap_or(&Value::Null), run_seq)
        && py_eq(field(b, "wave").unwrap_or(&Value::Null), wave)
}

/// Where the gate `(run_seq, wave)` stands over the whole ledger ([`gate::gate_state`]: the
/// highest-seq decision wins, an expiry counts as its `decision`; with none, pending if a
/// `gate_pending` was raised), its entries matched as Forum's `_matches` does.
fn gate_state(items: &[Item], run_seq: &Value, wave: &Value) -> GateState {
    gate::gate_state(
        items
            .iter()
            .filter(|(_, b)| matches_key(b.as_ref(), run_seq, wave))
            .map(|(e, b)| Mark {
                seq: e.seq,
                kind: &e.kind,
                expiry_decision: match field(b.as_ref(), "decision") {
                    Some(Value::Str(d)) => Some(d.as_str()),
                    _ => None,
                },
            }),
    )
}

/// Every `gate_pending` entry whose gate still resolves to pending, in seq order.
fn pending_gates(items: &[Item]) -> Vec<Value> {
    let mut out = Vec::new();
    for (e, b) in items {
        if e.kind != kind::GATE_PENDING {
            continue;
        }
        let b = b.as_ref();
        let run_seq = field(b, "run_seq").cloned().unwrap_or(Value::Null);
        let wave = field(b, "wave").cloned().unwrap_or(Value::Null);
        if gate_state(items, &run_seq, &wave) == GateState::Pending {
            out.push(obj([
                ("seq", uint(e.seq)),
                ("run_seq", run_seq),
                ("wave", wave),
                ("tasks", py_list(field(b, "tasks"))),
                ("question", Value::Str(str_field(b, "question"))),
            ]));
        }
    }
    out
}

// ----- next actions -----

fn action(
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

fn signal(signals: &Value, key: &str) -> i64 {
    py_int(signals.get(key))
}

fn next_actions(
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
            "Start a run with `git forum submit`".into(),
            "no request is recorded in this room",
            Value::Object(Vec::new()),
        )];
    }
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
                format!("Re-run task {id}"),
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
                format!("Re-run task {id}"),
                "the validator did not accept its most recent result",
                obj([
                    ("task_id", Value::str(&id)),
                    ("task_seq", task.get("seq").cloned().unwrap_or(Value::Null)),
                ]),
            ));
            seen.insert(id);
        }
    }
    if signal(signals, "budget_stops") > 0 {
        high.push(action(
            "raise-budget".into(),
            "raise_budget",
            "high",
            "Give the run more budget, then resume it".into(),
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
            "Resume the run from its last wave checkpoint".into(),
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
    for gate in pending {
        let run_seq = gate.get("run_seq").cloned().unwrap_or(Value::Null);
        let wave = gate.get("wave").cloned().unwrap_or(Value::Null);
        high.push(action(
            format!("review-gate:{}:{}", py_str(&run_seq), py_str(&wave)),
            "review_gate",
            "high",
            format!(
                "Approve, edit or reject the gate before wave {} (`git forum gate`)",
                py_str(&wave)
            ),
            "a gated wave waits for a person's decision",
            obj([("run_seq", run_seq), ("wave", wave)]),
        ));
    }
    let mut normal = Vec::new();
    if signal(signals, "flagged_delivery") > 0 || signal(signals, "flagged_delivery_profiles") > 0 {
        normal.push(action(
            "revise-delivery".into(),
            "revise_delivery",
            "normal",
            "Rework the answer's wording".into(),
            "a delivery check flagged how the answer reads",
            Value::Object(Vec::new()),
        ));
    }
    if signal(signals, "flagged_intent") > 0 {
        normal.push(action(
            "judge-intent".into(),
            "judge_intent",
            "normal",
            "Check that the answer addresses the request".into(),
            "the lexical intent check found request terms the answer leaves out",
            Value::Object(Vec::new()),
        ));
    }
    if signal(signals, "refuted_verifications") > 0 {
        normal.push(action(
            "review-verification".into(),
            "review_verification",
            "normal",
            "Look into why the verifier rejected the answer".into(),
            "an outside verifier refuted the answer",
            Value::Object(Vec::new()),
        ));
    }
    if !matches!(answer, Value::Null) && high.is_empty() {
        normal.push(action(
            "export-receipt".into(),
            "export_receipt",
            "normal",
            "Export the run's receipt".into(),
            "the run has its answer and nothing blocks it",
            obj([(
                "answer_seq",
                answer.get("seq").cloned().unwrap_or(Value::Null),
            )]),
        ));
    }
    high.extend(normal);
    high
}

// ----- the brief -----

fn count_of(n: i64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn build_brief(room: &Value) -> Value {
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
    let summary = match (state, verified) {
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
    };
    let text_field = |v: Option<&Value>, key: &str| -> String {
        v.and_then(|f| f.get(key))
            .filter(|x| truthy(Some(x)))
            .map(py_str)
            .unwrap_or_else(|| "operator".into())
    };
    let next_step = match actions.first() {
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
    };
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

fn sentence(text: &str) -> String {
    let t = text.trim();
    if t.is_empty() || t.ends_with(['.', '!', '?']) {
        t.to_string()
    } else {
        format!("{t}.")
    }
}

fn risk(verified: bool, signals: &Value) -> String {
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

fn bullets(room: &Value, frame: Option<&Value>, signals: &Value) -> Vec<Value> {
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
    vec![
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
    ]
}

// ----- text renderings -----

fn state_words(state: &str) -> String {
    state.replace('_', " ")
}

/// The brief as text for a person (`git forum room --brief`).
pub fn room_brief_text(room: &Value) -> String {
    let brief = room
        .get("brief")
        .cloned()
        .unwrap_or_else(|| build_brief(room));
    let get = |k: &str| brief.get(k).map(py_str).unwrap_or_default();
    let mut lines = vec![
        get("title"),
        format!(
            "[{}] posture {}, profile {}",
            state_words(&get("state")),
            get("posture"),
            get("delivery_profile")
        ),
        String::new(),
        get("summary"),
        format!("Risk:      {}", get("risk")),
        format!("Next step: {}", get("next_step")),
    ];
    if let Some(Value::Array(bullets)) = brief.get("bullets")
        && !bullets.is_empty()
    {
        lines.push(String::new());
        lines.extend(bullets.iter().map(|b| format!("  * {}", py_str(b))));
    }
    lines.join("\n")
}

/// The room as text for a person (`git forum room --text`).
pub fn room_text(room: &Value) -> String {
    let mut lines = Vec::new();
    let verified = truthy(room.get("verified"));
    let range = match room.get("entry_range") {
        Some(Value::Array(r)) if r.len() == 2 && !matches!(r[0], Value::Null) => {
            format!("entries {}..={}", py_str(&r[0]), py_str(&r[1]))
        }
        _ => "no entries".to_string(),
    };
    let checkpoint = room.get("checkpoint").map(py_str).unwrap_or_default();
    lines.push(format!(
        "Run room ({range}; ledger {}; checkpoint {})",
        if verified { "verified" } else { "NOT VERIFIED" },
        &checkpoint[..checkpoint.len().min(16)]
    ));
    if let Some(t) = room
        .get("request")
        .and_then(|r| r.get("text"))
        .filter(|t| truthy(Some(t)))
    {
        lines.push(format!("request  {}", py_str(t)));
    }
    if let Some(f) = room.get("route_frame").filter(|f| truthy(Some(f))) {
        let part = |k: &str| f.get(k).map(py_str).unwrap_or_default();
        lines.push(format!(
            "route    {} / {} / {} (profile {})",
            part("domain"),
            part("intent"),
            part("posture"),
            part("delivery_profile")
        ));
    }
    if let Some(Value::Array(waves)) = room.get("plan").and_then(|p| p.get("waves")) {
        let waves: Vec<String> = waves
            .iter()
            .map(|w| match w {
                Value::Array(ids) => {
                    format!(
                        "[{}]",
                        ids.iter().map(py_str).collect::<Vec<_>>().join(", ")
                    )
                }
                other => py_str(other),
            })
            .collect();
        lines.push(format!("plan     {}", waves.join(" then ")));
    }
    if let Some(Value::Array(tasks)) = room.get("tasks")
        && !tasks.is_empty()
    {
        lines.push("tasks".into());
        for t in tasks {
            let id = t.get("id").map(py_str).unwrap_or_default();
            let agent = t.get("agent").map(py_str).unwrap_or_default();
            let result = match t.get("result").and_then(|r| r.get("ok")) {
                Some(Value::Bool(true)) => "ok",
                Some(Value::Bool(false)) => "failed",
                None => "no result",
                Some(_) => "unclear",
            };
            let verdict = match t.get("verdict").and_then(|v| v.get("ok")) {
                Some(Value::Bool(true)) => "accepted",
                Some(Value::Bool(false)) => "not accepted",
                None => "not judged",
                Some(_) => "unclear",
            };
            let output = t
                .get("result")
                .and_then(|r| r.get("output"))
                .map(py_str)
                .unwrap_or_default();
            lines.push(format!(
                "  {id:<6} {agent:<20} {result:<9} {verdict:<12} {}",
                output.replace('\n', " ")
            ));
        }
    }
    if let Some(t) = room
        .get("answer")
        .and_then(|a| a.get("text"))
        .filter(|t| truthy(Some(t)))
    {
        lines.push(format!("answer   {}", py_str(t)));
    }
    if let Some(Value::Array(actions)) = room.get("next_actions")
        && !actions.is_empty()
    {
        lines.push("next".into());
        for a in actions {
            let get = |k: &str| a.get(k).map(py_str).unwrap_or_default();
            lines.push(format!(
                "  [{}] {} ({})",
                get("priority"),
                get("label"),
                get("reason")
            ));
        }
    }
    lines.join("\n")
}
