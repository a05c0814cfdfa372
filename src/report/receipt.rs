//! The action receipt of a run, Forum's `project-telos.action-receipt/v1` (forum-spec §21,
//! `receipts.py: submit_receipt`): which entries hold the request and the answer, the ledger's
//! range, checkpoint and deep verification, the context budget observed, the route frame,
//! the delivery profile, and a MATCH/DRIFT verdict (a `--work` run's can also be
//! NOTHING_DELIVERED or PARTIAL: see [`verdict_of`]).
//!
//! Forum builds it right after a run from facts the ledger does not hold (the executor's model
//! id, the run and context budget limits, the requested delivery profile). [`ReceiptInputs`]
//! carries them; [`inputs_for_run`] fills them from the ledger alone when rebuilding a receipt
//! later: the model becomes the one most task results name, the limits `{}`, the requested
//! profile `null`.
//!
//! A `--work` run's receipt (one whose request asks for work) ends with one more key,
//! `work`: the run branch and base, what changed, the checks and the ship decisions, and the
//! run's outcome by the outcome table; every other receipt is exactly Forum's.

use super::{Snapshot, entry_range, field, is_false, obj, py_int, truthy, uint};
use crate::ledger::canonical::Value;
use crate::ledger::kind;
use crate::ledger::{Entry, hash};

/// The attempts of each task that had several, as the compact table of
/// [`super::work_report::attempt_table`], indented under the work line.
fn push_attempt_tables(lines: &mut Vec<String>, tasks: Option<&Value>) {
    let Some(Value::Array(tasks)) = tasks else {
        return;
    };
    for t in tasks {
        if let Some(a) = t.get("attempts") {
            let id = t.get("task").map(super::py_str).unwrap_or_default();
            for l in super::work_report::attempt_table(&id, a) {
                lines.push(format!("         {l}"));
            }
        }
    }
}

/// The receipt's schema name.
pub const RECEIPT_SCHEMA: &str = "project-telos.action-receipt/v1";

/// What a receipt needs beyond the ledger.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceiptInputs {
    /// The receipt covers the entries with `seq >= before_seq`.
    pub before_seq: u64,
    /// The request text as submitted.
    pub request: String,
    /// The answer returned (the answer entry is the last result carrying exactly this).
    pub answer: String,
    /// The executor's model id (`null` when unknown).
    pub model_id: Option<String>,
    /// The run budget's limits (`{}` when none).
    pub budget: Value,
    /// The context budget's limits (`{}` when none).
    pub context_limits: Value,
    /// The delivery profile the caller asked for, if any.
    pub delivery_profile: Option<String>,
}

/// The inputs for the run whose request is at `request_seq`, read from the ledger alone: the
/// request's text, the run's last answer, and the model most of its task results name (the
/// run's entries are those whose causal parents lead back to its request). `None` when no
/// `request` entry has that seq.
pub fn inputs_for_run(s: &Snapshot, request_seq: u64) -> Option<ReceiptInputs> {
    let (_, body) = s
        .items
        .iter()
        .find(|(e, _)| e.seq == request_seq && e.kind == kind::REQUEST)?;
    let request = match field(body.as_ref(), "text") {
        Some(Value::Str(t)) => t.clone(),
        _ => String::new(),
    };
    let roots = super::run_roots(&s.entries());
    let run: Vec<&(Entry, Option<Value>)> = s
        .items
        .iter()
        .filter(|(e, _)| roots.get(&e.seq) == Some(&request_seq))
        .collect();
    let answer = run
        .iter()
        .rev()
        .find_map(|(e, b)| match field(b.as_ref(), "answer") {
            Some(Value::Str(a)) if e.kind == kind::RESULT => Some(a.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let mut models: Vec<(String, u64)> = Vec::new();
    for (e, b) in &run {
        if e.kind == kind::RESULT
            && super::has(b.as_ref(), "id")
            && let Some(Value::Str(m)) = field(b.as_ref(), "model")
        {
            match models.iter_mut().find(|(k, _)| k == m) {
                Some(slot) => slot.1 += 1,
                None => models.push((m.clone(), 1)),
            }
        }
    }
    let top = models.iter().map(|(_, n)| *n).max().unwrap_or(0);
    let model_id = models.into_iter().find(|(_, n)| *n == top).map(|(m, _)| m);
    Some(ReceiptInputs {
        before_seq: request_seq,
        request,
        answer,
        model_id,
        budget: Value::Object(Vec::new()),
        context_limits: Value::Object(Vec::new()),
        delivery_profile: None,
    })
}

fn entry_ref(e: &Entry) -> Value {
    obj([
        ("seq", uint(e.seq)),
        ("kind", Value::str(&e.kind)),
        ("actor", Value::str(&e.actor)),
        ("payload_hash", Value::str(&e.payload_hash)),
        ("entry_hash", Value::str(&e.entry_hash)),
    ])
}

fn or_empty(v: &Value) -> Value {
    if truthy(Some(v)) {
        v.clone()
    } else {
        Value::Object(Vec::new())
    }
}

/// The receipt's rows: each entry of the run with its body.
type Rows<'a> = [&'a (Entry, Option<Value>)];

/// The body of the latest entry of `kind` whose body is an object.
fn latest_object(entries: &Rows<'_>, kind: &str) -> Option<Value> {
    entries
        .iter()
        .rev()
        .find(|(e, b)| e.kind == kind && matches!(b, Some(Value::Object(_))))
        .and_then(|(_, b)| b.clone())
}

/// The bodies of every entry of `kind`.
fn bodies_of<'a>(entries: &Rows<'a>, kind: &str) -> Vec<&'a Value> {
    entries
        .iter()
        .filter(|(e, _)| e.kind == kind)
        .filter_map(|(_, b)| b.as_ref())
        .collect()
}

/// The receipt's `context_budget`: the limits asked for and what the budget checks did.
fn context_budget_value(entries: &Rows<'_>, limits: &Value) -> Value {
    let budgets = bodies_of(entries, kind::CONTEXT_BUDGET);
    let action = |a: &str| {
        budgets
            .iter()
            .filter(|p| matches!(field(Some(p), "action"), Some(Value::Str(x)) if x == a))
            .count() as u64
    };
    let original: i64 = budgets
        .iter()
        .map(|p| py_int(field(Some(p), "original_tokens")))
        .sum();
    let admitted: i64 = budgets
        .iter()
        .map(|p| py_int(field(Some(p), "admitted_tokens")))
        .sum();
    obj([
        ("limits", or_empty(limits)),
        (
            "observed",
            obj([
                ("checks", uint(budgets.len() as u64)),
                ("trimmed", uint(action("trimmed"))),
                ("omitted", uint(action("omitted"))),
                ("tokens_original", Value::int(original)),
                ("tokens_admitted", Value::int(admitted)),
                (
                    "tokens_saved",
                    Value::int(original.saturating_sub(admitted)),
                ),
            ]),
        ),
    ])
}

/// The receipt's `delivery_profile`: the one asked for, the one the latest check selected and
/// where it came from, and how many checks ran and flagged.
fn delivery_profile_value(
    entries: &Rows<'_>,
    inputs: &ReceiptInputs,
    route_frame: Option<&Value>,
) -> Value {
    let check = latest_object(entries, kind::DELIVERY_PROFILE_CHECK).filter(|c| truthy(Some(c)));
    let selected = check
        .as_ref()
        .and_then(|c| c.get("profile").cloned())
        .unwrap_or(Value::Null);
    let source = if matches!(selected, Value::Null) {
        "none"
    } else if inputs.delivery_profile.is_some() {
        "explicit"
    } else if route_frame.is_some_and(|f| f.get("delivery_profile") == Some(&selected)) {
        "route_frame"
    } else {
        "unknown"
    };
    let profiles = bodies_of(entries, kind::DELIVERY_PROFILE_CHECK);
    obj([
        (
            "requested",
            inputs
                .delivery_profile
                .as_ref()
                .map(Value::str)
                .unwrap_or(Value::Null),
        ),
        ("selected", selected),
        ("source", Value::str(source)),
        ("checks", uint(profiles.len() as u64)),
        (
            "flagged",
            uint(
                profiles
                    .iter()
                    .filter(|p| truthy(field(Some(p), "flagged")))
                    .count() as u64,
            ),
        ),
    ])
}

/// Whether the answer was verified: the `ok` of the last verification that gave one, or null.
fn answer_verified(entries: &Rows<'_>) -> Value {
    let mut answer_verified = Value::Null;
    for p in bodies_of(entries, kind::VERIFICATION) {
        match field(Some(p), "ok") {
            None | Some(Value::Null) => {}
            ok => answer_verified = Value::Bool(truthy(ok)),
        }
    }
    answer_verified
}

/// The run's request entry (else its first) and the result entry that gave `answer` (else its
/// last).
fn request_and_answer<'a>(
    entries: &Rows<'a>,
    answer: &str,
) -> (Option<&'a Entry>, Option<&'a Entry>) {
    let request_entry = entries
        .iter()
        .find(|(e, _)| e.kind == kind::REQUEST)
        .or(entries.first())
        .map(|(e, _)| e);
    let answer_entry = entries
        .iter()
        .rev()
        .find(|(e, b)| {
            e.kind == kind::RESULT
                && matches!(field(b.as_ref(), "answer"), Some(Value::Str(a)) if *a == answer)
        })
        .or(entries.last())
        .map(|(e, _)| e);
    (request_entry, answer_entry)
}

/// `sha256:` and the payload hash of what was asked: the tool, the action, the request and
/// the request entry's seq.
fn action_intent_id(request: &str, request_entry: Option<&Entry>) -> Value {
    let intent = obj([
        ("tool", Value::str("forum")),
        ("action", Value::str("submit")),
        ("request", Value::str(request)),
        (
            "request_seq",
            request_entry.map(|e| uint(e.seq)).unwrap_or(Value::Null),
        ),
    ]);
    Value::Str(format!("sha256:{}", hash::payload_hash(&intent)))
}

/// The receipt's `ledger`: the run's entry range and count, the checkpoint and whether the
/// whole chain verified.
fn ledger_value(entries: &Rows<'_>, s: &Snapshot) -> Value {
    let owned: Vec<(Entry, Option<Value>)> =
        entries.iter().map(|(e, _)| (e.clone(), None)).collect();
    obj([
        ("entry_range", entry_range(&owned)),
        ("entries", uint(entries.len() as u64)),
        ("checkpoint", Value::str(&s.checkpoint)),
        ("verified", Value::Bool(s.deep_verified)),
    ])
}

/// Builds the receipt over `s` (the whole ledger, for its checkpoint and verification).
pub fn receipt(s: &Snapshot, inputs: &ReceiptInputs) -> Value {
    let entries: Vec<&(Entry, Option<Value>)> = s
        .items
        .iter()
        .filter(|(e, _)| e.seq >= inputs.before_seq)
        .collect();
    let (request_entry, answer_entry) = request_and_answer(&entries, &inputs.answer);
    let route_frame = latest_object(&entries, kind::ROUTE_FRAME);
    let delivery_profile = delivery_profile_value(&entries, inputs, route_frame.as_ref());
    let answer_verified = answer_verified(&entries);
    let verified = s.deep_verified;
    let (verdict, work) = verdict_and_work(
        &entries,
        verified && !is_false(Some(&answer_verified)),
        request_entry,
    );
    let mut receipt = obj([
        ("schema", Value::str(RECEIPT_SCHEMA)),
        ("tool", Value::str("forum")),
        ("action", Value::str("submit")),
        (
            "action_intent_id",
            action_intent_id(&inputs.request, request_entry),
        ),
        (
            "side_effect_class",
            Value::Array(vec![Value::str("ledger_write"), Value::str("model_call")]),
        ),
        (
            "request",
            request_entry.map(entry_ref).unwrap_or(Value::Null),
        ),
        ("answer", answer_entry.map(entry_ref).unwrap_or(Value::Null)),
        ("ledger", ledger_value(&entries, s)),
        (
            "model",
            obj([(
                "id",
                inputs
                    .model_id
                    .as_ref()
                    .map(Value::str)
                    .unwrap_or(Value::Null),
            )]),
        ),
        ("budget", or_empty(&inputs.budget)),
        (
            "context_budget",
            context_budget_value(&entries, &inputs.context_limits),
        ),
        ("route_frame", route_frame.unwrap_or(Value::Null)),
        ("delivery_profile", delivery_profile),
        (
            "verification",
            obj([
                ("verdict", Value::str(verdict)),
                ("ledger_deep_verified", Value::Bool(verified)),
                ("answer_verified", answer_verified),
            ]),
        ),
    ]);
    if let (Some(w), Value::Object(m)) = (work, &mut receipt) {
        m.push(("work".into(), w));
    }
    // Tokens and cost per model, when the run witnessed usage (never on a Forum ledger).
    let spend = super::spend::to_value(&super::spend::per_model(entries.iter().copied()));
    if let (Some(sp), Value::Object(m)) = (spend, &mut receipt) {
        m.push(("spend".into(), sp));
    }
    receipt
}

/// The receipt's verdict ([`verdict_of`]) and, for a `--work` run, its `work` key (always
/// there, even when no task made a change), with the run's outcome.
fn verdict_and_work(
    entries: &Rows<'_>,
    consistent: bool,
    request_entry: Option<&Entry>,
) -> (&'static str, Option<Value>) {
    let mut fold = super::outcome::Fold::default();
    for (e, b) in entries {
        fold.push(e, b.as_ref());
    }
    let facts = fold.facts();
    let outcome = fold.outcome();
    let work = super::work_report::work(entries.iter().copied())
        .or_else(|| facts.work.then(super::work_report::Work::default))
        .map(|w| {
            let request_body = entries
                .iter()
                .find(|(e, _)| e.kind == kind::REQUEST)
                .and_then(|(_, b)| b.as_ref());
            let workers = workers_of(entries);
            let mut v = work_value(&w, request_entry.map(|e| e.seq), request_body, &workers);
            if let Value::Object(m) = &mut v {
                m.push(("outcome".into(), outcome_value(outcome)));
            }
            v
        });
    (verdict_of(consistent, &facts, outcome), work)
}

/// The receipt's verdict. Forum's rule for a text run: `MATCH` when the ledger deep-verified
/// and no verifier refuted the answer (`consistent`), else `DRIFT`. A `--work` run is held to
/// what it delivered too: `NOTHING_DELIVERED` when no change of it is on its run branch,
/// `PARTIAL` when some are but its outcome is not `answered` (a task failed, was blocked or
/// timed out, a check failed on the run branch, a degraded wave was merged, or the run has not
/// finished), and `MATCH` only when it delivered.
pub(crate) fn verdict_of(
    consistent: bool,
    facts: &super::outcome::Facts,
    outcome: Option<super::outcome::RunExit>,
) -> &'static str {
    use super::outcome::RunExit;
    if !consistent {
        "DRIFT"
    } else if !facts.work {
        "MATCH"
    } else if facts.delivered == 0 {
        "NOTHING_DELIVERED"
    } else if outcome != Some(RunExit::Answered) {
        "PARTIAL"
    } else {
        "MATCH"
    }
}

/// The `outcome` of a work receipt: `{name, code}` of the outcome table, or null for a run
/// with no outcome yet (interrupted, or stopped on an error).
fn outcome_value(outcome: Option<super::outcome::RunExit>) -> Value {
    match outcome {
        Some(o) => obj([
            ("name", Value::str(o.name())),
            ("code", uint(o.code().into())),
        ]),
        None => Value::Null,
    }
}

/// The receipt's `work` (a `--work` run only): the run branch and its base, the counts
/// ([`super::work_report::Work::counts_value`]), and each task's commit and where it stands.
/// The worker that did each task of a dispatched run: the name its latest `result` carries.
fn workers_of(entries: &Rows<'_>) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    for (e, b) in entries {
        if e.kind == kind::RESULT
            && let (Some(Value::Str(id)), Some(Value::Str(w))) =
                (field(b.as_ref(), "id"), field(b.as_ref(), "worker"))
        {
            out.insert(id.clone(), w.clone());
        }
    }
    out
}

fn work_value(
    w: &super::work_report::Work,
    request_seq: Option<u64>,
    request: Option<&Value>,
    workers: &std::collections::BTreeMap<String, String>,
) -> Value {
    let base = field(field(request, "work"), "base")
        .cloned()
        .unwrap_or(Value::Null);
    let mut out = vec![
        (
            "branch".to_string(),
            w.run_branch(field(request, "work"), request_seq)
                .map(Value::Str)
                .unwrap_or(Value::Null),
        ),
        ("base".into(), base),
    ];
    if let Value::Object(counts) = w.counts_value() {
        out.extend(counts);
    }
    let tasks = w
        .tasks
        .iter()
        .filter(|t| t.change.is_some())
        .map(|t| {
            let row = obj([
                ("task", Value::str(&t.id)),
                (
                    "commit",
                    t.change
                        .as_ref()
                        .and_then(|c| c.1.as_ref())
                        .map(Value::str)
                        .unwrap_or(Value::Null),
                ),
                ("state", Value::str(t.state())),
            ]);
            // A dispatched task names the worker that did it.
            let row = match (row, workers.get(&t.id)) {
                (Value::Object(mut m), Some(name)) => {
                    m.push(("worker".into(), Value::str(name)));
                    Value::Object(m)
                }
                (row, _) => row,
            };
            // A task run several times (`--attempts`) shows them side by side.
            match (row, &t.attempts) {
                (Value::Object(mut m), Some(a)) => {
                    m.push(("attempts".into(), a.clone()));
                    Value::Object(m)
                }
                (row, _) => row,
            }
        })
        .collect();
    out.push(("tasks".into(), Value::Array(tasks)));
    Value::Object(out)
}

/// The receipt of one run of a ledger that may hold several: the run's own entries (see
/// [`inputs_for_run`]) with the ledger's checkpoint and verification. `None` when no run
/// starts at `request_seq`.
pub fn receipt_for_run(s: &Snapshot, request_seq: u64) -> Option<Value> {
    let inputs = inputs_for_run(s, request_seq)?;
    let roots = super::run_roots(&s.entries());
    let run = s.slice(|e| roots.get(&e.seq) == Some(&request_seq));
    Some(receipt(&run, &inputs))
}

/// The receipt as text for a person (`git forum receipt` without `--json`): what was asked and
/// answered, by which entries, the ledger's checkpoint and checks, and the exact commands that
/// check it again.
pub fn receipt_text(r: &Value) -> String {
    let s = |v: Option<&Value>| v.map(super::py_str).unwrap_or_default();
    let at = |k: &str, f: &str| field(field(Some(r), k), f);
    let short = |h: String| h.chars().take(16).collect::<String>();
    let request_seq = s(at("request", "seq"));
    let answer = field(Some(r), "answer").filter(|a| truthy(Some(a)));
    let verified = truthy(at("ledger", "verified"));
    let range = match at("ledger", "entry_range") {
        Some(Value::Array(x)) if x.len() == 2 && !matches!(x[0], Value::Null) => {
            format!("{}..={}", super::py_str(&x[0]), super::py_str(&x[1]))
        }
        _ => "none".into(),
    };
    let mut lines = vec![
        format!(
            "Receipt of run {request_seq} ({})",
            s(field(Some(r), "schema"))
        ),
        format!(
            "request  seq {request_seq}, entry {}",
            short(s(at("request", "entry_hash")))
        ),
        match answer {
            Some(a) => format!(
                "answer   seq {} by {}, entry {}",
                s(a.get("seq")),
                s(a.get("actor")),
                short(s(a.get("entry_hash")))
            ),
            None => "answer   none yet".into(),
        },
        format!(
            "ledger   entries {range} ({} in all), checkpoint {}, chain {}",
            s(at("ledger", "entries")),
            short(s(at("ledger", "checkpoint"))),
            if verified { "verified" } else { "NOT VERIFIED" }
        ),
        format!(
            "verdict  {} (deep verify {}, answer checked {})",
            s(at("verification", "verdict")),
            if truthy(at("verification", "ledger_deep_verified")) {
                "passed"
            } else {
                "failed"
            },
            match at("verification", "answer_verified") {
                Some(Value::Bool(true)) => "and accepted",
                Some(Value::Bool(false)) => "and refuted",
                _ => "by nobody",
            }
        ),
    ];
    if let Some(m) = at("model", "id").filter(|m| truthy(Some(m))) {
        lines.push(format!("model    {}", super::py_str(m)));
    }
    if let Some(o @ Value::Object(m)) = at("context_budget", "observed")
        && !m.is_empty()
    {
        let n = |k: &str| py_int(o.get(k));
        lines.push(format!(
            "context  {} checks, {} trimmed, {} omitted, {} of {} tokens admitted",
            n("checks"),
            n("trimmed"),
            n("omitted"),
            n("tokens_admitted"),
            n("tokens_original"),
        ));
    }
    push_work(&mut lines, field(Some(r), "work"));
    push_agent_costs(&mut lines, field(Some(r), "spend"));
    push_attempt_tables(&mut lines, at("work", "tasks"));
    push_next_steps(&mut lines, answer, &request_seq);
    lines.join("\n")
}

/// The receipt text's `work` and `outcome` lines (a `--work` run's).
fn push_work(lines: &mut Vec<String>, work: Option<&Value>) {
    if let Some(b) = field(work, "branch").filter(|b| truthy(Some(b))) {
        lines.push(format!("work     branch {}", super::py_str(b)));
    }
    if let Some(o) = field(work, "outcome").filter(|o| truthy(Some(o))) {
        lines.push(format!(
            "outcome  {} (exit {})",
            o.get("name").map(super::py_str).unwrap_or_default(),
            o.get("code").map(super::py_str).unwrap_or_default()
        ));
    }
}

/// The receipt text's `cost` lines: for each model whose agent CLI said what it spent, its
/// cost by the seat's prices (ours, from the forwarder's count) and by its own, and the
/// difference when they differ.
fn push_agent_costs(lines: &mut Vec<String>, spend: Option<&Value>) {
    let Some(Value::Object(models)) = spend else {
        return;
    };
    let usd = |v: Option<&Value>| match v {
        Some(Value::Float(f)) => Some(*f),
        Some(Value::Int(i)) => i.as_i64().map(|n| n as f64),
        _ => None,
    };
    for (model, m) in models {
        let Some(a @ Value::Object(_)) = m.get("agent_reported") else {
            continue;
        };
        let ours = usd(m.get("cost_usd")).map_or("no price".to_string(), |c| format!("${c:.6}"));
        let theirs = usd(a.get("cost_usd")).map_or("no cost".to_string(), |c| format!("${c:.6}"));
        let diff = usd(a.get("cost_difference_usd")).map_or(String::new(), |d| {
            format!(
                ", differs by {}${:.6}",
                if d < 0.0 { "-" } else { "+" },
                d.abs()
            )
        });
        lines.push(format!(
            "cost     {model}: {ours} at the seat's prices, {theirs} as the agent reported{diff}"
        ));
    }
}

/// The receipt text's `next` lines: verify, then prove the answer (or finish the run), then
/// the JSON.
fn push_next_steps(lines: &mut Vec<String>, answer: Option<&Value>, request_seq: &str) {
    lines.push("next".into());
    lines.push("  check the chain and every body again: `git forum verify --deep`".into());
    if let Some(a) = answer {
        lines.push(format!(
            "  prove the answer is in the ledger: `git forum prove {}`",
            a.get("seq").map(super::py_str).unwrap_or_default()
        ));
    } else {
        lines.push(format!(
            "  finish the run: `git forum resume {request_seq}`"
        ));
    }
    lines.push(format!(
        "  the receipt as JSON: `git forum receipt {request_seq} --json`"
    ));
}
