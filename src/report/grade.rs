//! The outcome grade of a run (forum-spec §21, Forum's `grade.py: grade_ledger`): PASS, FAIL
//! or UNVERIFIABLE from independent checks only.
//!
//! Checks are `verdict`, `verification` and `intent_judgment` entries (in that kind order, seq
//! order within a kind) whose actor produced no `result`, and whose `ok` is not null. The
//! reward is the share that passed, rounded to 6 places. A check whose body is redacted is
//! left out like a non-informative one (Forum would raise).
//!
//! [`gradable_record`] exports a run as one `forum.gradable-trajectory/1` row.

use super::{Snapshot, field, has, obj, truthy, uint};
use crate::ledger::canonical::Value;
use crate::ledger::hash;
use crate::ledger::kind;

/// The kinds that count as checks, in the order they are read.
pub const CHECK_KINDS: [&str; 3] = [kind::VERDICT, kind::VERIFICATION, kind::INTENT_JUDGMENT];

/// The rule, stated as a formula (Forum's exact text, kept because a gradable row's seal
/// covers it).
pub const DERIVATION: &str = "PASS iff reward==1.0 and checks>=min_checks and refuted==0; UNVERIFIABLE iff checks==0; else FAIL";

/// Python's `round(x, 6)`.
fn round6(x: f64) -> f64 {
    format!("{x:.6}").parse().unwrap_or(x)
}

/// Grades the entries of `s`; PASS needs at least `min_checks` checks (Forum's default: 2).
pub fn grade(s: &Snapshot, min_checks: u64) -> Value {
    let mut producers: Vec<String> = s
        .items
        .iter()
        .filter(|(e, _)| e.kind == kind::RESULT)
        .map(|(e, _)| e.actor.clone())
        .collect();
    producers.sort();
    producers.dedup();
    let (mut passed, mut refuted) = (0u64, 0u64);
    let mut inputs = Vec::new();
    let mut graders = Vec::new();
    for kind in CHECK_KINDS {
        for (e, b) in &s.items {
            if e.kind != kind || producers.binary_search(&e.actor).is_ok() {
                continue;
            }
            let ok = match field(b.as_ref(), "ok") {
                None | Some(Value::Null) => continue,
                ok => truthy(ok),
            };
            if ok {
                passed += 1;
            } else {
                refuted += 1;
            }
            inputs.push(obj([
                ("actor", Value::str(&e.actor)),
                ("ok", Value::Bool(ok)),
                ("kind", Value::str(kind)),
                ("seq", uint(e.seq)),
                ("payload_hash", Value::str(&e.payload_hash)),
            ]));
            graders.push(Value::str(&e.actor));
        }
    }
    let count = passed + refuted;
    let reward = if count > 0 {
        round6(passed as f64 / count as f64)
    } else {
        0.0
    };
    let label = if count == 0 {
        "UNVERIFIABLE"
    } else if reward == 1.0 && count >= min_checks && refuted == 0 {
        "PASS"
    } else {
        "FAIL"
    };
    obj([
        ("reward", Value::Float(reward)),
        ("label", Value::str(label)),
        ("checks", uint(count)),
        ("refuted", uint(refuted)),
        (
            "producers",
            Value::Array(producers.into_iter().map(Value::Str).collect()),
        ),
        ("graders", Value::Array(graders)),
        ("grade_inputs", Value::Array(inputs)),
        ("min_checks", uint(min_checks)),
        ("derivation", Value::str(DERIVATION)),
    ])
}

/// The gradable row's schema name.
pub const GRADABLE_SCHEMA: &str = "forum.gradable-trajectory/1";

/// How a consumer re-derives the row without trusting this program (this project's wording of
/// the recipe Forum's rows carry).
pub const RECHECK: &str = "For each entry, hash seq, ts formatted with 6 decimals, actor, kind, \
causal_parent, payload_hash and prev_hash joined by U+001F with SHA-256 and compare with \
entry_hash; fold the entry hashes into the RFC 6962 Merkle root (leaf prefix 0x00, node prefix \
0x01, an odd node promoted) and compare with merkle_root. For each check payload, confirm that \
the canonical hash of its body equals the payload_hash of the entry at its seq, read ok from \
that body, and recompute the reward from those checks. Changing any entry or any check body \
breaks a hash.";

/// Python's `" ".join(text.split()).lower()`: whitespace runs collapsed, ends trimmed.
fn normalized_request(text: &str) -> String {
    let is_space = |c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c);
    text.split(is_space)
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
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

/// One `forum.gradable-trajectory/1` row for the entries of `s` (Forum's
/// `gradable_export.py: gradable_record`): the prompt, the trajectory, the grade, what a
/// consumer needs to re-derive both, and the seal. `request` overrides the prompt (default:
/// the first request's text). `budget.model_calls` counts witnessed calls as the summary does;
/// the `recheck` recipe is in this project's words; a redacted body is skipped (bytes) or null
/// (a check payload).
pub fn gradable_record(s: &Snapshot, request: Option<&str>, min_checks: u64) -> Value {
    let g = grade(s, min_checks);
    let prompt = match request {
        Some(r) => r.to_string(),
        None => s
            .items
            .iter()
            .find_map(|(e, b)| match field(b.as_ref(), "text") {
                Some(Value::Str(t)) if e.kind == kind::REQUEST => Some(t.clone()),
                _ => None,
            })
            .unwrap_or_default(),
    };
    let mut task_id = hash::sha256_hex(normalized_request(&prompt).as_bytes());
    task_id.truncate(16);
    let plan_hash = s
        .items
        .iter()
        .rev()
        .find(|(e, _)| e.kind == kind::PLAN)
        .map(|(e, _)| Value::str(&e.payload_hash))
        .unwrap_or(Value::Null);
    let answer = s
        .items
        .iter()
        .rev()
        .find_map(|(e, b)| match field(b.as_ref(), "answer") {
            Some(Value::Str(a)) if e.kind == kind::RESULT && !has(b.as_ref(), "revised_from") => {
                Some(Value::str(a))
            }
            _ => None,
        })
        .unwrap_or(Value::Null);
    let entries: Vec<Value> = s
        .items
        .iter()
        .map(|(e, _)| {
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
    let inputs = g
        .get("grade_inputs")
        .cloned()
        .unwrap_or(Value::Array(vec![]));
    let check_payloads: Vec<Value> = match &inputs {
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
    };
    let payload_bytes: usize = s
        .items
        .iter()
        .filter_map(|(_, b)| b.as_ref())
        .map(|b| super::dumps_sorted(b, true).len())
        .sum();
    let pick = |k: &str| g.get(k).cloned().unwrap_or(Value::Null);
    let mut row = obj([
        ("schema", Value::str(GRADABLE_SCHEMA)),
        ("task_id", Value::Str(task_id)),
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
                ("merkle_root", Value::str(&s.checkpoint)),
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
                ("payload_bytes", uint(payload_bytes as u64)),
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
