//! The context capsule (forum-spec §20, Forum's `context_capsule.py`): a short, bounded brief
//! of the whole ledger that can be fed back to a model as context.
//!
//! The JSON fields and counts are Forum's. The text form is a machine-facing format made of
//! field labels and data only (`checkpoint: …`, `verified: True`, `- T1/backend ok=True
//! model=…: …`, `signals: k=v …`), so it is reproduced byte for byte, Python spellings of
//! `True`/`False`/`None` included: `context_text_chars` (its length) then agrees with Forum's
//! too.

use super::{
    Snapshot, clip, clip_str, entry_range, field, has, is_false, kind_counts, obj, py_int, py_str,
    truthy, uint,
};
use crate::ledger::canonical::Value;
use crate::ledger::kind;

/// The capsule's schema name.
pub(crate) const CONTEXT_CAPSULE_SCHEMA: &str = "forum.context-capsule/v1";

/// Builds the capsule over every entry of `s`: the last `max_items` task results (0: none)
/// and texts clipped to `max_text_chars` code points.
pub fn build_context_capsule(s: &Snapshot, max_items: usize, max_text_chars: usize) -> Value {
    let counts = kind_counts(s.items.iter().map(|(e, _)| e));
    let latest_request = s
        .items
        .iter()
        .rev()
        .find_map(|(e, b)| match field(b.as_ref(), "text") {
            Some(Value::Str(t)) if e.kind == kind::REQUEST => Some(clip_str(t, max_text_chars)),
            _ => None,
        })
        .unwrap_or_default();
    let latest_answer = s
        .items
        .iter()
        .rev()
        .find_map(|(e, b)| match field(b.as_ref(), "answer") {
            Some(Value::Str(a)) if e.kind == kind::RESULT => Some(clip_str(a, max_text_chars)),
            _ => None,
        })
        .unwrap_or_default();
    let mut tasks: Vec<Value> = Vec::new();
    for (e, b) in &s.items {
        let b = b.as_ref();
        if e.kind != kind::RESULT || !has(b, "id") {
            continue;
        }
        let text = |k: &str| field(b, k).map(py_str).unwrap_or_default();
        tasks.push(obj([
            ("seq", uint(e.seq)),
            ("id", Value::Str(text("id"))),
            (
                "agent",
                Value::Str(field(b, "agent").map(py_str).unwrap_or(e.actor.clone())),
            ),
            ("ok", field(b, "ok").cloned().unwrap_or(Value::Null)),
            ("model", Value::Str(text("model"))),
            (
                "output",
                Value::Str(clip(
                    Some(field(b, "output").unwrap_or(&Value::Str(String::new()))),
                    max_text_chars,
                )),
            ),
        ]));
    }
    let tasks = if max_items == 0 {
        Vec::new()
    } else {
        tasks.split_off(tasks.len().saturating_sub(max_items))
    };
    let mut capsule = vec![
        ("schema".to_string(), Value::str(CONTEXT_CAPSULE_SCHEMA)),
        ("checkpoint".into(), Value::str(&s.checkpoint)),
        ("verified".into(), Value::Bool(s.verified)),
        ("entry_range".into(), entry_range(&s.items)),
        (
            "counts".into(),
            Value::Object(
                counts
                    .into_iter()
                    .map(|(k, n)| (k, Value::int(n)))
                    .collect(),
            ),
        ),
        ("latest_request".into(), Value::Str(latest_request)),
        ("latest_answer".into(), Value::Str(latest_answer)),
        ("tasks".into(), Value::Array(tasks)),
        ("signals".into(), signals(s)),
    ];
    let chars = capsule_text(&Value::Object(capsule.clone()))
        .chars()
        .count();
    capsule.push(("context_text_chars".into(), uint(chars as u64)));
    Value::Object(capsule)
}

fn signals(s: &Snapshot) -> Value {
    let count = |pred: &dyn Fn(&str, Option<&Value>) -> bool| -> Value {
        uint(
            s.items
                .iter()
                .filter(|(e, b)| pred(&e.kind, b.as_ref()))
                .count() as u64,
        )
    };
    let (mut original, mut admitted, mut checks) = (0i64, 0i64, 0u64);
    for (e, b) in &s.items {
        if e.kind == kind::CONTEXT_BUDGET {
            checks += 1;
            original += py_int(field(b.as_ref(), "original_tokens"));
            admitted += py_int(field(b.as_ref(), "admitted_tokens"));
        }
    }
    obj([
        ("budget_stops", count(&|k, _| k == kind::BUDGET)),
        ("context_budget_checks", uint(checks)),
        (
            "context_tokens_saved",
            Value::int(original.saturating_sub(admitted)),
        ),
        (
            "failed_results",
            count(&|k, b| k == kind::RESULT && has(b, "id") && is_false(field(b, "ok"))),
        ),
        (
            "failed_verdicts",
            count(&|k, b| k == kind::VERDICT && is_false(field(b, "ok"))),
        ),
        (
            "flagged_delivery",
            count(&|k, b| k == kind::DELIVERY_CHECK && truthy(field(b, "flagged"))),
        ),
        (
            "flagged_delivery_profiles",
            count(&|k, b| k == kind::DELIVERY_PROFILE_CHECK && truthy(field(b, "flagged"))),
        ),
        (
            "flagged_intent",
            count(&|k, b| k == kind::INTENT_CHECK && truthy(field(b, "flagged"))),
        ),
        (
            "refuted_verifications",
            count(&|k, b| k == kind::VERIFICATION && is_false(field(b, "ok"))),
        ),
    ])
}

/// The capsule as prompt text (Forum's `capsule_text`, byte for byte).
pub fn capsule_text(capsule: &Value) -> String {
    let text = |k: &str| capsule.get(k).map(py_str).unwrap_or_default();
    let mut lines = vec![
        "Forum context capsule".to_string(),
        format!("checkpoint: {}", text("checkpoint")),
        format!(
            "verified: {}",
            capsule
                .get("verified")
                .map(py_str)
                .unwrap_or_else(|| "False".into())
        ),
    ];
    let request = capsule.get("latest_request").filter(|v| truthy(Some(v)));
    let answer = capsule.get("latest_answer").filter(|v| truthy(Some(v)));
    if let Some(r) = request {
        lines.push(format!("latest request: {}", py_str(r)));
    }
    if let Some(a) = answer {
        lines.push(format!("latest answer: {}", py_str(a)));
    }
    if let Some(Value::Array(tasks)) = capsule.get("tasks")
        && !tasks.is_empty()
    {
        lines.push("tasks:".into());
        for t in tasks {
            let get = |k: &str| t.get(k).map(py_str).unwrap_or_default();
            lines.push(format!(
                "- {}/{} ok={} model={}: {}",
                get("id"),
                get("agent"),
                py_str(t.get("ok").unwrap_or(&Value::Null)),
                get("model"),
                get("output")
            ));
        }
    }
    if let Some(Value::Object(signals)) = capsule.get("signals")
        && !signals.is_empty()
    {
        let mut sorted: Vec<&(String, Value)> = signals.iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        let pairs: Vec<String> = sorted
            .iter()
            .map(|(k, v)| format!("{k}={}", py_str(v)))
            .collect();
        lines.push(format!("signals: {}", pairs.join(" ")));
    }
    lines.join("\n")
}
