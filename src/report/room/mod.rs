//! The run room (forum-spec §19): one snapshot of the latest run with its quality signals, the
//! next actions an operator can take, and a short brief.
//!
//! The slice, the fields, the signals, which actions appear (their `id`, `kind`, `priority`
//! and `target`) and the brief's `state`, `posture` and `delivery_profile` follow Forum's
//! `run_room.py`, `run_actions.py` and `run_brief.py` exactly. The words are this project's:
//! action labels and reasons, the brief's title, summary, risk, next step and bullets, and
//! both text renderings ([`room_text`], [`room_brief_text`]).
//!
//! A room over a `--work` run has one more key, `work` (the run branch, changes, checks, ship
//! decisions and the run's outcome, [`crate::report::work_report`]), after `answer`, and
//! each of its tasks a `work` object; a room without such entries is exactly Forum's.

use std::collections::{HashMap, HashSet};

use super::{
    Snapshot, clip, clip_str, entry_range, field, has, is_false, is_true, kind_counts, members,
    obj, py_int, py_str, truthy, uint,
};
use crate::gate::{self, GateState, Mark};
use crate::ledger::canonical::Value;
use crate::ledger::{Entry, kind};
use crate::report::work_report::Work;

/// The room's schema name.
pub(crate) const RUN_ROOM_SCHEMA: &str = "forum.run-room/v1";
/// The brief's schema name.
pub(crate) const BRIEF_SCHEMA: &str = "forum.run-room.brief/v1";

/// Signals that, when above zero, make a run need attention (Forum's list).
mod actions;
mod brief;
mod text;

use actions::next_actions;
use brief::build_brief;
pub use text::{room_brief_text, room_text};

pub(super) const ATTENTION_SIGNALS: [&str; 7] = [
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
///
/// A room is one run's: entries that belong (by their causal parents) to another run than
/// the one at `since_seq` are left out, so a room started at one run's request does not take
/// in the runs after it. With no `since_seq`, a `resume` of an older run written after the
/// last request (this project's resume names its run) makes the room that run's.
pub fn build_run_room(s: &Snapshot, since_seq: Option<u64>, max_text_chars: usize) -> Value {
    let slice = room_slice(s, since_seq);
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
    let (work, outcome) = work_of(&slice);
    let mut tasks = tasks(&slice, max_text_chars);
    if let Some(w) = &work {
        add_task_work(&mut tasks, w);
    }
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
    ];
    if let Some(w) = &work {
        room.push(("work".into(), work_value(w, &room, &slice, outcome)));
    }
    room.extend([
        ("signals".into(), signals),
        ("next_actions".into(), Value::Array(next_actions)),
    ]);
    let brief = build_brief(&Value::Object(room.clone()));
    room.push(("brief".into(), brief));
    Value::Object(room)
}

/// The entries a room covers ([`build_run_room`]): from `since_seq` (else the run a later
/// resume continues, else the last request, else the whole ledger), less those of other runs.
fn room_slice(s: &Snapshot, since_seq: Option<u64>) -> Vec<&Item> {
    let last_request = s
        .items
        .iter()
        .rev()
        .find(|(e, _)| e.kind == kind::REQUEST)
        .or(s.items.first())
        .map(|(e, _)| e.seq);
    let resumed = since_seq
        .is_none()
        .then(|| resumed_after(s, last_request))
        .flatten();
    let start = since_seq.or(resumed).or(last_request);
    // Forum's room takes every entry from its start (a resumed Forum run is a new request
    // whose late entries, such as an expired gate, hang off the old one); ours keeps to one
    // run when it is asked for a run (--since) or shows the run a resume went back to.
    let roots = super::run_roots(s.items.iter().map(|(e, _)| e));
    let run = start
        .filter(|_| since_seq.is_some() || resumed.is_some())
        .and_then(|st| roots.get(&st).copied());
    s.items
        .iter()
        .filter(|(e, _)| start.is_none_or(|st| e.seq >= st))
        .filter(|(e, _)| match (run, roots.get(&e.seq)) {
            (Some(r), Some(other)) => r == *other,
            _ => true,
        })
        .collect()
}

/// The run a `resume` entry written after the last request (at `last_request`) continues,
/// when that entry names one (`run`, the request seq of an older run).
fn resumed_after(s: &Snapshot, last_request: Option<u64>) -> Option<u64> {
    let (e, b) = s.items.iter().rev().find(|(e, _)| e.kind == kind::RESUME)?;
    if last_request.is_some_and(|r| e.seq < r) {
        return None;
    }
    match field(b.as_ref(), "run") {
        Some(Value::Int(i)) => i
            .as_str()
            .parse::<u64>()
            .ok()
            .filter(|r| last_request.is_none_or(|l| *r < l)),
        _ => None,
    }
}

/// The work of the slice's run (its first request's) and its outcome by the outcome table: a
/// `--work` run has work even when no task made a change.
fn work_of(slice: &[&Item]) -> (Option<Work>, Option<super::outcome::RunExit>) {
    let fold = slice
        .iter()
        .find(|(e, _)| e.kind == kind::REQUEST && e.causal_parent.is_none())
        .map(|(e, _)| super::outcome::fold_run(slice.iter().copied(), e.seq))
        .unwrap_or_default();
    let work = super::work_report::work(slice.iter().copied())
        .or_else(|| fold.facts().work.then(Work::default));
    (work, fold.outcome())
}

/// The room's `work` (only for a `--work` run): the run branch (null when the run made none,
/// [`Work::run_branch`]; its name from the request of `slice`), the counts
/// ([`Work::counts_value`]), the checks on the run branch and the run's outcome (`{name,
/// code}` of the outcome table, null while it has none).
fn work_value(
    w: &Work,
    room: &[(String, Value)],
    slice: &[&Item],
    outcome: Option<super::outcome::RunExit>,
) -> Value {
    let request = slice
        .iter()
        .rev()
        .find(|(e, _)| e.kind == kind::REQUEST)
        .and_then(|(_, b)| b.as_ref());
    let seq = room
        .iter()
        .find(|(k, _)| k == "request")
        .and_then(|(_, r)| r.get("seq"))
        .and_then(|s| u64::try_from(py_int(Some(s))).ok());
    let mut out = vec![(
        "branch".to_string(),
        w.run_branch(field(request, "work"), seq)
            .map(Value::Str)
            .unwrap_or(Value::Null),
    )];
    if let Value::Object(counts) = w.counts_value() {
        out.extend(counts);
    }
    let run = w.tasks.iter().find(|t| t.id == "run");
    out.push((
        "run_checks".into(),
        obj([
            ("passed", uint(run.map_or(0, |t| t.checks_passed))),
            ("failed", uint(run.map_or(0, |t| t.checks_failed))),
        ]),
    ));
    out.push((
        "outcome".into(),
        match outcome {
            Some(o) => obj([
                ("name", Value::str(o.name())),
                ("code", uint(o.code().into())),
            ]),
            None => Value::Null,
        },
    ));
    Value::Object(out)
}

/// Adds each task's `work` ([`crate::report::work_report::TaskWork::to_value`]) to the tasks that have some.
fn add_task_work(tasks: &mut [Value], w: &Work) {
    for t in tasks {
        let id = t.get("id").map(py_str).unwrap_or_default();
        if let (Value::Object(m), Some(tw)) = (t, w.tasks.iter().find(|x| x.id == id)) {
            m.push(("work".into(), tw.to_value()));
        }
    }
}

pub(super) fn request(slice: &[&Item], max: usize) -> Value {
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

pub(super) fn plan(slice: &[&Item]) -> Value {
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
pub(super) fn str_field(b: Option<&Value>, key: &str) -> String {
    field(b, key).map(py_str).unwrap_or_default()
}

/// `list(value or [])`.
pub(super) fn py_list(v: Option<&Value>) -> Value {
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
pub(super) fn latest_by_id<'a>(slice: &[&'a Item], kind: &str) -> HashMap<String, &'a Item> {
    let mut out: HashMap<String, &Item> = HashMap::new();
    for item in slice {
        let (e, b) = item;
        if e.kind == kind && has(b.as_ref(), "id") {
            out.insert(str_field(b.as_ref(), "id"), item);
        }
    }
    out
}

pub(super) fn tasks(slice: &[&Item], max: usize) -> Vec<Value> {
    let results = latest_by_id(slice, kind::RESULT);
    let verdicts = latest_by_id(slice, kind::VERDICT);
    // A task run again (a resume re-dispatches what had not finished) is listed once, at
    // its latest dispatch.
    let dispatched = latest_by_id(slice, kind::TASK);
    let mut out = Vec::new();
    for (e, b) in slice.iter().map(|i| (&i.0, i.1.as_ref())) {
        if e.kind != kind::TASK {
            continue;
        }
        let id = str_field(b, "id");
        if has(b, "id") && dispatched.get(&id).is_some_and(|(d, _)| d.seq != e.seq) {
            continue;
        }
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

pub(super) fn checkpoints(slice: &[&Item]) -> Vec<Value> {
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

pub(super) fn signals(slice: &[&Item]) -> Vec<(String, Value)> {
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
pub(super) fn py_eq(a: &Value, b: &Value) -> bool {
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
pub(super) fn matches_key(b: Option<&Value>, run_seq: &Value, wave: &Value) -> bool {
    matches!(b, Some(Value::Object(_)))
        && py_eq(field(b, "run_seq").unwrap_or(&Value::Null), run_seq)
        && py_eq(field(b, "wave").unwrap_or(&Value::Null), wave)
}

/// Where the gate `(run_seq, wave)` stands over the whole ledger ([`gate::gate_state`]: the
/// highest-seq decision wins, an expiry counts as its `decision`; with none, pending if a
/// `gate_pending` was raised), its entries matched as Forum's `_matches` does.
pub(super) fn gate_state(items: &[Item], run_seq: &Value, wave: &Value) -> GateState {
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
pub(super) fn pending_gates(items: &[Item]) -> Vec<Value> {
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
