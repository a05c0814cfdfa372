//! Read-side projections of a ledger (forum-spec §18–§21): the run summary and A/B compare,
//! the run room with its signals, next actions and brief, the context capsule, the action
//! receipt, the outcome grade and the gradable-trajectory export.
//!
//! Everything here is pure: a projection reads a [`Snapshot`] (the entries with their bodies,
//! plus what verification said) and returns JSON [`Value`]s whose keys keep Forum's order, so
//! `--json` output lines up with Forum's field for field. Nothing here reads a store: loading
//! a snapshot is the surface's job (`crate::surface::reports`), and the core's purity is a
//! test (tests/integration/purity.rs).
//!
//! Numbers, ids, kinds, targets and states follow Forum's rules exactly. Sentences written for
//! people (action labels and reasons, the brief) are this project's own. Two deliberate
//! differences, both documented where they live:
//!
//! * `model_calls` counts model calls the ledger witnesses with a model, not task results
//!   ([`summary`], forum-spec §23.5);
//! * a redacted (absent) body never crashes a projection (Forum raises `KeyError`): it is
//!   counted in [`Summary::absent_bodies`] and left out of every count that needs the body.

pub mod attest;
pub(crate) mod blame;
pub(crate) mod capsule;
pub(crate) mod claims;
pub mod gradable;
pub(crate) mod grade;
pub(crate) mod otel;
pub(crate) mod outcome;
pub mod receipt;
pub(crate) mod room;
pub(crate) mod spend;
pub mod summary;
pub(crate) mod work_report;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::ledger::canonical::{self, Value};
use crate::ledger::merkle::Accumulator;
use crate::ledger::{Entry, hash, kind, verify_chain};

pub use capsule::{build_context_capsule, capsule_text};
pub use gradable::gradable_record;
pub use grade::grade;
pub use receipt::{ReceiptInputs, receipt, receipt_text};
pub use room::{build_run_room, room_brief_text, room_text};
pub use summary::{Summary, compare, summarize};

/// A ledger (or a slice of one) as the projections read it: every entry with its body
/// (`None` when the body is absent, i.e. redacted), and what verification said about the
/// ledger the entries come from.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Entries in seq order, each with its body.
    pub items: Vec<(Entry, Option<Value>)>,
    /// The Merkle root of the whole ledger (forum-spec §3).
    pub checkpoint: String,
    /// Chain verification of the whole ledger (Forum's `verify()`).
    pub verified: bool,
    /// Deep verification: the chain and every present body (Forum's `verify(deep=True)`).
    pub deep_verified: bool,
}

impl Snapshot {
    /// A snapshot of a whole ledger held in memory: the checkpoint, the chain and the bodies
    /// are checked here. An absent body does not fail deep verification (Forum's rule: only a
    /// body that no longer hashes to its `payload_hash` does).
    pub fn from_items(items: Vec<(Entry, Option<Value>)>) -> Snapshot {
        let entries: Vec<Entry> = items.iter().map(|(e, _)| e.clone()).collect();
        let report = verify_chain(&entries);
        let verified = report.first_bad.is_none();
        let bodies_ok = items.iter().all(|(e, b)| {
            b.as_ref()
                .is_none_or(|b| hash::payload_hash(b) == e.payload_hash)
        });
        let mut acc = Accumulator::default();
        for e in &entries {
            acc.push(&e.entry_hash);
        }
        Snapshot {
            items,
            checkpoint: acc.root(),
            verified,
            deep_verified: verified && bodies_ok,
        }
    }

    /// The same ledger facts over a subset of the entries (one run, or a room's slice).
    pub(crate) fn slice(&self, keep: impl Fn(&Entry) -> bool) -> Snapshot {
        Snapshot {
            items: self
                .items
                .iter()
                .filter(|(e, _)| keep(e))
                .cloned()
                .collect(),
            checkpoint: self.checkpoint.clone(),
            verified: self.verified,
            deep_verified: self.deep_verified,
        }
    }

    /// The entries alone.
    pub(crate) fn entries(&self) -> Vec<Entry> {
        self.items.iter().map(|(e, _)| e.clone()).collect()
    }
}

/// The run (request seq) each entry belongs to, by following causal parents: a `request`
/// with no parent starts a run, and an entry belongs to the run of its parent.
pub(crate) fn run_roots<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> BTreeMap<u64, u64> {
    let mut root: BTreeMap<u64, u64> = BTreeMap::new();
    for e in entries {
        match e.causal_parent {
            None if e.kind == kind::REQUEST => {
                root.insert(e.seq, e.seq);
            }
            Some(p) if p >= 0 => {
                if let Some(r) = root.get(&(p as u64)).copied() {
                    root.insert(e.seq, r);
                }
            }
            _ => {}
        }
    }
    root
}

// ----- Python's reading of payloads, reproduced -----

/// The members of an object body; anything else reads as an empty dict (Forum's room and
/// capsule do the same; its summary would crash instead).
pub(crate) fn members(body: Option<&Value>) -> &[(String, Value)] {
    match body {
        Some(Value::Object(m)) => m,
        _ => &[],
    }
}

/// `body.get(key)` on a body that may be absent or not an object.
pub(crate) fn field<'a>(body: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    members(body).iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// `key in body`.
pub(crate) fn has(body: Option<&Value>, key: &str) -> bool {
    field(body, key).is_some()
}

/// Python truthiness.
pub(crate) fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Int(i)) => i.as_str() != "0",
        Some(Value::Float(f)) => *f != 0.0,
        Some(Value::Str(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(m)) => !m.is_empty(),
    }
}

/// `value is False`.
pub(crate) fn is_false(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Bool(false)))
}

/// `value is True`.
pub(crate) fn is_true(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Bool(true)))
}

/// `int(value)` for the token counts of context-pressure payloads; what Python would refuse
/// (a list, a non-numeric string) counts as 0 instead of raising.
pub(crate) fn py_int(v: Option<&Value>) -> i64 {
    match v {
        Some(Value::Int(i)) => i.as_i64().unwrap_or(if i.as_str().starts_with('-') {
            i64::MIN
        } else {
            i64::MAX
        }),
        Some(Value::Float(f)) if f.is_finite() => f.trunc() as i64,
        Some(Value::Bool(b)) => i64::from(*b),
        Some(Value::Str(s)) => s.trim().parse().unwrap_or(0),
        _ => 0,
    }
}

/// Python's `str(value)` for a JSON value.
pub(crate) fn py_str(v: &Value) -> String {
    match v {
        Value::Str(s) => s.clone(),
        other => py_repr(other),
    }
}

/// Python's `repr(value)` for a JSON value (`True`, `None`, `'text'`, `[1, 'a']`, `{'k': 1}`).
pub(crate) fn py_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Int(i) => i.as_str().to_string(),
        Value::Float(f) => canonical::python_float_repr(*f),
        Value::Str(s) => crate::plan::py_repr(s),
        Value::Array(a) => format!("[{}]", a.iter().map(py_repr).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", crate::plan::py_repr(k), py_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Forum's `_clip`: `str(value)` (None → ""), cut to `max` code points with `...` at the end.
pub(crate) fn clip(v: Option<&Value>, max: usize) -> String {
    let text = match v {
        None | Some(Value::Null) => String::new(),
        Some(v) => py_str(v),
    };
    clip_str(&text, max)
}

/// [`clip`] for a string.
pub(crate) fn clip_str(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        return text.to_string();
    }
    if max == 0 {
        return String::new();
    }
    if max <= 3 {
        return ".".repeat(max);
    }
    let mut out: String = text.chars().take(max - 3).collect();
    out.push_str("...");
    out
}

/// Python's `json.dumps(value, sort_keys=True, ensure_ascii=...)` with the default `", "` and
/// `": "` separators. Unlike [`Value::python_dumps`] (which escapes U+2028 and friends to keep
/// JSONL rows whole), this escapes exactly what Python does, for byte counts that agree.
pub(crate) fn dumps_sorted(v: &Value, ensure_ascii: bool) -> String {
    let mut out = String::new();
    write_sorted(v, ensure_ascii, &mut out);
    out
}

fn write_sorted(v: &Value, ascii: bool, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => out.push_str(i.as_str()),
        Value::Float(f) => out.push_str(&canonical::python_float_json(*f)),
        Value::Str(s) => write_str(s, ascii, out),
        Value::Array(items) => {
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push_str(", ");
                }
                write_sorted(item, ascii, out);
            }
            out.push(']');
        }
        Value::Object(members) => {
            let mut sorted: Vec<&(String, Value)> = members.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            out.push('{');
            for (n, (k, item)) in sorted.into_iter().enumerate() {
                if n > 0 {
                    out.push_str(", ");
                }
                write_str(k, ascii, out);
                out.push_str(": ");
                write_sorted(item, ascii, out);
            }
            out.push('}');
        }
    }
}

fn write_str(s: &str, ascii: bool, out: &mut String) {
    if ascii {
        canonical::write_ascii_string(s, out);
        return;
    }
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Counts by kind in first-seen order, as a Python `Counter` keeps them.
pub(crate) fn kind_counts<'a>(entries: impl Iterator<Item = &'a Entry>) -> Vec<(String, i64)> {
    let mut out: Vec<(String, i64)> = Vec::new();
    for e in entries {
        match out.iter_mut().find(|(k, _)| *k == e.kind) {
            Some(slot) => slot.1 += 1,
            None => out.push((e.kind.clone(), 1)),
        }
    }
    out
}

/// An object from `(key, value)` pairs in order.
pub(crate) fn obj<const N: usize>(pairs: [(&str, Value); N]) -> Value {
    Value::Object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// An unsigned count as a JSON integer.
pub(crate) fn uint(n: u64) -> Value {
    Value::Int(n.into())
}

/// `[first, last]` seq of the entries, or `[null, null]`.
pub(crate) fn entry_range(items: &[(Entry, Option<Value>)]) -> Value {
    match (items.first(), items.last()) {
        (Some((a, _)), Some((b, _))) => Value::Array(vec![uint(a.seq), uint(b.seq)]),
        _ => Value::Array(vec![Value::Null, Value::Null]),
    }
}

/// The final answer of a ledger or run: the last `result` whose body has a string `answer`
/// (a revision included).
pub(crate) fn final_answer(s: &Snapshot) -> Option<String> {
    s.items
        .iter()
        .rev()
        .find_map(|(e, b)| match b.as_ref().and_then(|b| b.get("answer")) {
            Some(Value::Str(a)) if e.kind == kind::RESULT => Some(a.clone()),
            _ => None,
        })
}

/// A unified diff of two answers (`None` when they are equal). Answers are compared line by
/// line; a final newline is added to both so a one-line answer does not read as "no newline
/// at end of file".
///
/// No clock bounds the work: `similar`'s default Myers search caps its own effort by the
/// size of the input (a bounded middle-snake search, like git's), so the same two answers
/// always give the same diff, however fast or loaded the machine is.
pub(crate) fn answer_diff(a: &str, b: &str, label_a: &str, label_b: &str) -> Option<String> {
    if a == b {
        return None;
    }
    let (a, b) = (format!("{a}\n"), format!("{b}\n"));
    let diff = similar::TextDiff::configure()
        .algorithm(similar::Algorithm::Myers)
        .diff_lines(&a, &b);
    Some(
        diff.unified_diff()
            .context_radius(3)
            .header(label_a, label_b)
            .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_follows_forum() {
        assert_eq!(clip_str("abcdef", 6), "abcdef");
        assert_eq!(clip_str("abcdef", 5), "ab...");
        assert_eq!(clip_str("abcdef", 3), "...");
        assert_eq!(clip_str("abcdef", 2), "..");
        assert_eq!(clip_str("abcdef", 0), "");
        assert_eq!(clip_str("日本語テキスト", 5), "日本...");
        assert_eq!(clip(None, 5), "");
        assert_eq!(clip(Some(&Value::Null), 5), "");
        assert_eq!(clip(Some(&Value::Bool(true)), 5), "True");
    }

    #[test]
    fn python_str_and_truthiness() {
        let v = canonical::parse(r#"{"a": [1, 2.5, null, true, "it's"], "b": "x\ny"}"#).unwrap();
        assert_eq!(
            py_str(&v),
            r#"{'a': [1, 2.5, None, True, "it's"], 'b': 'x\ny'}"#
        );
        assert!(!truthy(Some(&Value::Int(0i64.into()))));
        assert!(truthy(Some(&Value::str("no"))));
        assert!(!truthy(Some(&Value::Float(0.0))));
        assert!(!truthy(Some(&Value::Array(vec![]))));
        assert_eq!(py_int(Some(&Value::Float(7.9))), 7);
        assert_eq!(py_int(Some(&Value::str(" 12 "))), 12);
        assert_eq!(py_int(Some(&Value::Array(vec![]))), 0);
    }

    #[test]
    fn dumps_sorted_matches_python() {
        let v = canonical::parse(
            "{\"b\": 1.0, \"a\": [\"\u{e9}\u{2028}\", {\"z\": null, \"y\": 1e-07}]}",
        )
        .unwrap();
        assert_eq!(
            dumps_sorted(&v, false),
            "{\"a\": [\"\u{e9}\u{2028}\", {\"y\": 1e-07, \"z\": null}], \"b\": 1.0}"
        );
        assert_eq!(
            dumps_sorted(&v, true),
            "{\"a\": [\"\\u00e9\\u2028\", {\"y\": 1e-07, \"z\": null}], \"b\": 1.0}"
        );
    }

    #[test]
    fn answer_diff_is_unified() {
        assert_eq!(answer_diff("same", "same", "A", "B"), None);
        let d = answer_diff("one\ntwo", "one\nthree", "A", "B").unwrap();
        assert!(d.starts_with("--- A\n+++ B\n@@"), "{d}");
        assert!(d.contains("-two\n") && d.contains("+three\n"), "{d}");
    }

    #[test]
    fn answer_diff_of_large_unlike_answers_is_the_same_every_time() {
        // Two answers with no line in common but a repeated one: the costly case for Myers.
        let a: String = (0..3000).map(|i| format!("a{} x\n", i % 7)).collect();
        let b: String = (0..3000).map(|i| format!("b{} x\n", i % 11)).collect();
        let first = answer_diff(&a, &b, "A", "B").expect("they differ");
        assert_eq!(
            answer_diff(&a, &b, "A", "B").as_deref(),
            Some(first.as_str())
        );
        let removed = first
            .lines()
            .filter(|l| l.starts_with('-') && !l.starts_with("---"));
        assert_eq!(removed.count(), 3000, "every line of A is removed");
    }

    #[test]
    fn run_roots_follow_causal_parents() {
        let e = |seq: u64, kind: &str, parent: Option<i64>| Entry {
            seq,
            ts: 0.0,
            actor: "a".into(),
            kind: kind.to_string(),
            causal_parent: parent,
            payload_hash: String::new(),
            prev_hash: String::new(),
            entry_hash: String::new(),
        };
        let entries = [
            e(0, kind::REQUEST, None),
            e(1, kind::PLAN, Some(0)),
            e(2, kind::NOTE, None),
            e(3, kind::REQUEST, None),
            e(4, kind::RESULT, Some(1)),
            e(5, kind::RESULT, Some(3)),
        ];
        let roots = run_roots(&entries);
        let pairs: Vec<(u64, u64)> = roots.into_iter().collect();
        assert_eq!(pairs, [(0, 0), (1, 0), (3, 3), (4, 0), (5, 3)]);
    }

    #[test]
    fn empty_snapshot_has_forums_empty_checkpoint() {
        let s = Snapshot::from_items(Vec::new());
        assert_eq!(s.checkpoint, "0".repeat(64));
        assert!(s.verified && s.deep_verified);
    }
}
