//! The gradable-trajectory export (forum-spec §21, Forum's `gradable_export.py:
//! gradable_record`): one `forum.gradable-trajectory/1` row per run, holding the prompt, the
//! trajectory, its grade, what a consumer needs to re-derive both without trusting this
//! program, and a seal (`row_hash`) over all of it.
//!
//! Pure: the row is a function of a [`Snapshot`]. Every field, number and label is Forum's,
//! including the `recheck` recipe's wording, because the seal covers it: a row with other
//! words would have another `row_hash` and no longer match Forum's for the same run.
//!
//! One extension: a row may cover one run of a ledger that holds several. Its `merkle_root`
//! is then the root folded over that run's own entry hashes, so the recipe it carries (fold
//! the row's entries, compare with `merkle_root`) holds for it as it does for a whole ledger,
//! where that fold is the ledger's checkpoint.

use super::grade::{grade, round6};
use super::{Snapshot, field, has, obj, uint};
use crate::ledger::canonical::Value;
use crate::ledger::hash;
use crate::ledger::kind;
use crate::ledger::merkle::Accumulator;

/// The row's schema name.
pub const GRADABLE_SCHEMA: &str = "forum.gradable-trajectory/1";

/// How a consumer re-derives the row. Forum's exact text: the seal covers it.
pub const RECHECK: &str = "recompute each entry_hash from its fields (sha256 of seq|ts(.6f)|actor|kind|causal_parent|payload_hash|prev_hash joined by \\x1f), fold the RFC6962 merkle (0x00 leaf / 0x01 node, promote-odd) and compare to merkle_root; for each check_payload confirm canonical_hash(body)==payload_hash of a witnessed entry, read ok from that bound body, and recompute reward from the bound checks. Tamper any entry OR any check body -> a hash mismatch; the grade cannot be forged apart from the merkle-witnessed record.";

/// Python's `" ".join(text.split()).lower()`: whitespace runs collapsed, ends trimmed.
fn normalized_request(text: &str) -> String {
    let is_space = |c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c);
    text.split(is_space)
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// The task id of a request: the first 16 hex digits of SHA-256 over its normalized text, so
/// the same request asked twice (case and spacing aside) is the same task.
pub(crate) fn task_id(request: &str) -> String {
    let mut id = hash::sha256_hex(normalized_request(request).as_bytes());
    id.truncate(16);
    id
}

/// The row's seal: the first 16 hex digits of SHA-256 over `json.dumps(row, sort_keys=True)`
/// of every member but `row_hash`.
pub fn row_hash(row: &Value) -> String {
    let body = match row {
        Value::Object(m) => {
            Value::Object(m.iter().filter(|(k, _)| k != "row_hash").cloned().collect())
        }
        other => other.clone(),
    };
    let mut h = hash::sha256_hex(super::dumps_sorted(&body, true).as_bytes());
    h.truncate(16);
    h
}

/// The row as one JSONL line, as Forum appends it (`json.dumps(row, sort_keys=True)`), without
/// the newline.
pub(crate) fn jsonl_line(row: &Value) -> String {
    super::dumps_sorted(row, true)
}

/// The text of the ledger's first request (empty when there is none).
fn first_request_text(s: &Snapshot) -> String {
    s.items
        .iter()
        .find_map(|(e, b)| match field(b.as_ref(), "text") {
            Some(Value::Str(t)) if e.kind == kind::REQUEST => Some(t.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The answer of the last result that is not a revision, or null.
fn last_unrevised_answer(s: &Snapshot) -> Value {
    s.items
        .iter()
        .rev()
        .find_map(|(e, b)| match field(b.as_ref(), "answer") {
            Some(Value::Str(a)) if e.kind == kind::RESULT && !has(b.as_ref(), "revised_from") => {
                Some(Value::str(a))
            }
            _ => None,
        })
        .unwrap_or(Value::Null)
}

/// Each entry's header as the row lists it, and the Merkle root over their hashes.
fn trajectory_entries(s: &Snapshot) -> (Vec<Value>, String) {
    let mut acc = Accumulator::default();
    let entries: Vec<Value> = s
        .items
        .iter()
        .map(|(e, _)| {
            acc.push(&e.entry_hash);
            obj([
                ("seq", uint(e.seq)),
                ("ts", Value::Float(round6(e.ts))),
                ("actor", Value::str(&e.actor)),
                ("kind", Value::str(&e.kind)),
                (
                    "causal_parent",
                    e.causal_parent.map(Value::int).unwrap_or(Value::Null),
                ),
                ("payload_hash", Value::str(&e.payload_hash)),
                ("prev_hash", Value::str(&e.prev_hash)),
                ("entry_hash", Value::str(&e.entry_hash)),
            ])
        })
        .collect();
    (entries, acc.root())
}

/// The bytes of every body the ledger holds, each as sorted compact JSON.
fn payload_bytes(s: &Snapshot) -> usize {
    s.items
        .iter()
        .filter_map(|(_, b)| b.as_ref())
        .map(|b| super::dumps_sorted(b, true).len())
        .sum()
}

/// The body behind each grade input (null when redacted), by its payload hash.
fn check_payloads(s: &Snapshot, inputs: &Value) -> Vec<Value> {
    match inputs {
        Value::Array(a) => a
            .iter()
            .map(|gi| {
                let ph = gi.get("payload_hash").and_then(Value::as_str).unwrap_or("");
                let body = s
                    .items
                    .iter()
                    .find(|(e, b)| e.payload_hash == ph && b.is_some())
                    .and_then(|(_, b)| b.clone())
                    .unwrap_or(Value::Null);
                obj([
                    ("seq", gi.get("seq").cloned().unwrap_or(Value::Null)),
                    ("payload_hash", Value::str(ph)),
                    ("body", body),
                ])
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// One `forum.gradable-trajectory/1` row for the entries of `s`. `request` overrides the
/// prompt (default: the first request's text). `budget.model_calls` counts witnessed calls as
/// the summary does; a redacted body adds no bytes and binds a null check payload.
pub fn gradable_record(s: &Snapshot, request: Option<&str>, min_checks: u64) -> Value {
    let g = grade(s, min_checks);
    let prompt = match request {
        Some(r) => r.to_string(),
        None => first_request_text(s),
    };
    let plan_hash = s
        .items
        .iter()
        .rev()
        .find(|(e, _)| e.kind == kind::PLAN)
        .map(|(e, _)| Value::str(&e.payload_hash))
        .unwrap_or(Value::Null);
    let answer = last_unrevised_answer(s);
    let (entries, merkle_root) = trajectory_entries(s);
    let inputs = g
        .get("grade_inputs")
        .cloned()
        .unwrap_or(Value::Array(vec![]));
    let check_payloads = check_payloads(s, &inputs);
    let pick = |k: &str| g.get(k).cloned().unwrap_or(Value::Null);
    let mut row = obj([
        ("schema", Value::str(GRADABLE_SCHEMA)),
        ("task_id", Value::Str(task_id(&prompt))),
        ("prompt", Value::Str(prompt)),
        (
            "trajectory",
            obj([
                ("plan_hash", plan_hash),
                ("answer", answer),
                ("entries", Value::Array(entries)),
            ]),
        ),
        (
            "grade",
            obj([
                ("reward", pick("reward")),
                ("label", pick("label")),
                ("checks", pick("checks")),
                ("refuted", pick("refuted")),
                ("producers", pick("producers")),
                ("graders", pick("graders")),
                ("derivation", pick("derivation")),
            ]),
        ),
        (
            "oracle",
            obj([
                ("kind", Value::str("ledger-rewitness")),
                ("merkle_root", Value::Str(merkle_root)),
                ("verified", Value::Bool(s.deep_verified)),
                ("grade_inputs", inputs),
                ("check_payloads", Value::Array(check_payloads)),
                ("recheck", Value::str(RECHECK)),
            ]),
        ),
        (
            "budget",
            obj([
                (
                    "model_calls",
                    Value::int(super::summarize(s).get("model_calls_total")),
                ),
                ("payload_bytes", uint(payload_bytes(s) as u64)),
                ("entries", uint(s.items.len() as u64)),
                ("clock", Value::str("injected")),
            ]),
        ),
    ]);
    let seal = row_hash(&row);
    if let Value::Object(m) = &mut row {
        m.push(("row_hash".into(), Value::Str(seal)));
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_ignore_case_and_spacing() {
        assert_eq!(task_id("Ship  a login\tAPI "), task_id("ship a login api"));
        assert_eq!(task_id("ship a login API with docs"), "aeabff9bbc6f17a9");
        assert_ne!(task_id("ship a login api"), task_id("ship a logout api"));
    }

    #[test]
    fn the_seal_covers_every_member_but_itself() {
        let row = obj([("a", uint(1)), ("row_hash", Value::str("x"))]);
        let without = obj([("a", uint(1))]);
        assert_eq!(row_hash(&row), row_hash(&without));
        assert_ne!(row_hash(&without), row_hash(&obj([("a", uint(2))])));
        assert_eq!(
            jsonl_line(&obj([("b", uint(1)), ("a", Value::Null)])),
            "{\"a\": null, \"b\": 1}"
        );
    }

    #[test]
    fn an_empty_snapshot_is_unverifiable_and_still_sealed() {
        let row = gradable_record(&Snapshot::from_items(Vec::new()), None, 2);
        assert_eq!(
            row.get("schema").and_then(Value::as_str),
            Some(GRADABLE_SCHEMA)
        );
        let label = row.get("grade").and_then(|g| g.get("label")).cloned();
        assert_eq!(label, Some(Value::str("UNVERIFIABLE")));
        let seal = row
            .get("row_hash")
            .and_then(Value::as_str)
            .unwrap()
            .to_string();
        assert_eq!(seal, row_hash(&row));
    }
}
