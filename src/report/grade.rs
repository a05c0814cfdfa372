//! The outcome grade of a run (forum-spec §21, Forum's `grade.py: grade_ledger`): PASS, FAIL
//! or UNVERIFIABLE from independent checks only.
//!
//! Checks are `verdict`, `verification` and `intent_judgment` entries (in that kind order, seq
//! order within a kind) whose actor produced no `result`, and whose `ok` is not null. The
//! reward is the share that passed, rounded to 6 places. A check whose body is redacted is
//! left out like a non-informative one (Forum would raise).
//!
//! The gradable row that carries a grade is [`super::gradable`].

use super::{Snapshot, field, obj, truthy, uint};
use crate::ledger::canonical::Value;
use crate::ledger::kind;

/// The kinds that count as checks, in the order they are read.
pub(crate) const CHECK_KINDS: [&str; 3] =
    [kind::VERDICT, kind::VERIFICATION, kind::INTENT_JUDGMENT];

/// The rule, stated as a formula (Forum's exact text, kept because a gradable row's seal
/// covers it).
pub(crate) const DERIVATION: &str = "PASS iff reward==1.0 and checks>=min_checks and refuted==0; UNVERIFIABLE iff checks==0; else FAIL";

/// Python's `round(x, 6)`.
pub(crate) fn round6(x: f64) -> f64 {
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
