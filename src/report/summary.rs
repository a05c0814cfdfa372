//! The run summary and the A/B delta of two summaries (forum-spec §18, Forum's `report.py`).
//!
//! Keys, their order and every count follow Forum's `summarize`, with one deliberate
//! difference: **`model_calls` counts model calls the ledger witnesses with a model**, where
//! Forum counts task `result` entries that name a model (forum-spec §23.5). An entry is one
//! witnessed call to model M when its body names `model: M` and it is one of:
//!
//! * a task `result` (an attempt or an escalation retry), unless it records that no call was
//!   made: the budget had run out (our `error: "budget"`, or Forum's `ok: false` with output
//!   `error: budget exceeded`, which still names the model it would have called);
//! * a `verdict` (this project's validator records the model that judged; Forum's verdicts
//!   name none, so a Forum ledger's validator calls stay uncounted);
//! * a `plan`, an answer `result`, an `intent_judgment`, a `classification` or a `revision`
//!   that names its model. Neither Forum nor this project's loop writes a model on those
//!   today, so planner, synthesizer and judge calls are not counted: the summary reports what
//!   the record proves, not what probably happened.
//!
//! So on Forum's run1 both count 4 (the four task results) while the run made 10 calls
//! (planner 1, tasks 3, retry 1, validator 4, synthesizer 1); on a run stopped by its budget
//! Forum counts the two skipped tasks as calls and this summary does not.
//!
//! Redacted bodies: Forum raises `KeyError`; here an entry without its body still counts
//! where its kind alone decides (`entries`, `requests`, `intent_checks`, ...) and is left out
//! where the body does (`task_results`, `verdicts_pass`/`verdicts_fail`, flags, tokens,
//! `payload_bytes`); [`Summary::absent_bodies`] says how many there were.
//!
//! A ledger with `change` entries (a `--work` run) also gets [`Summary::work`], shown as a
//! `work` object after `verified`, and [`compare_value`] a `work` delta; the 38 Forum fields
//! are unchanged by it.

use super::spend::ModelSpend;
use super::work_report::{self, Work};
use super::{Snapshot, dumps_sorted, field, has, is_false, py_int, py_str, truthy};
use crate::ledger::Entry;
use crate::ledger::canonical::Value;
use crate::ledger::kind;

/// A run's work counts as one flat object (see [`Work::metrics`]).
fn work_metrics(w: &Work) -> Value {
    Value::Object(
        w.metrics()
            .into_iter()
            .map(|(k, v)| (k.to_string(), Value::int(v)))
            .collect(),
    )
}

/// The 38 numeric fields that [`compare`] subtracts, in Forum's order.
pub(crate) const NUMERIC: [&str; 38] = [
    "entries",
    "requests",
    "plans",
    "tasks",
    "task_results",
    "failed_results",
    "verdicts_pass",
    "verdicts_fail",
    "intent_checks",
    "intent_flagged",
    "intent_judgments",
    "intent_drift_judged",
    "verifications",
    "verifications_refuted",
    "delivery_checks",
    "delivery_flagged",
    "revisions",
    "revisions_accepted",
    "delivery_profile_checks",
    "delivery_profile_flagged",
    "delivery_profile_operator",
    "delivery_profile_engineer",
    "delivery_profile_researcher",
    "delivery_profile_executive",
    "checkpoints",
    "resumes",
    "escalations",
    "budget_stops",
    "contexts",
    "context_budget_checks",
    "context_budget_trimmed",
    "context_budget_omitted",
    "context_tokens_original",
    "context_tokens_admitted",
    "context_tokens_saved",
    "answers",
    "model_calls_total",
    "payload_bytes",
];

/// Forum's output spelling for an executor that ran out of budget before the call.
const BUDGET_SKIPPED_OUTPUT: &str = "error: budget exceeded";

/// A run summary.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The [`NUMERIC`] fields, in that order.
    pub(crate) metrics: Vec<(&'static str, i64)>,
    /// Witnessed model calls per model, models in first-seen order.
    pub model_calls: Vec<(String, i64)>,
    /// The Merkle root of the ledger.
    pub(crate) checkpoint: String,
    /// Chain verification of the ledger.
    pub verified: bool,
    /// Entries whose body is absent (redacted): left out of every body-based count.
    pub absent_bodies: u64,
    /// What `--work` runs changed, checked and shipped ([`super::work`]); `None` when the
    /// ledger has no `change` entry, so a Forum ledger summarizes exactly as Forum's.
    pub(crate) work: Option<Work>,
    /// Tokens and cost per model ([`super::spend`]), shown as a `spend` object last; empty
    /// (and not shown) when no entry witnessed usage.
    pub(crate) spend: Vec<ModelSpend>,
}

impl Summary {
    /// One numeric field (0 for a name that is not one).
    pub fn get(&self, key: &str) -> i64 {
        self.metrics
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
            .unwrap_or(0)
    }

    /// Forum's dict: the numeric fields with `model_calls` before `model_calls_total`, then
    /// `checkpoint` and `verified`.
    pub fn to_value(&self) -> Value {
        let mut out: Vec<(String, Value)> = Vec::with_capacity(NUMERIC.len() + 3);
        for (k, v) in &self.metrics {
            if *k == "model_calls_total" {
                out.push((
                    "model_calls".into(),
                    Value::Object(
                        self.model_calls
                            .iter()
                            .map(|(m, n)| (m.clone(), Value::int(*n)))
                            .collect(),
                    ),
                ));
            }
            out.push((k.to_string(), Value::int(*v)));
        }
        out.push(("checkpoint".into(), Value::str(&self.checkpoint)));
        out.push(("verified".into(), Value::Bool(self.verified)));
        if let Some(w) = &self.work {
            out.push(("work".into(), work_metrics(w)));
            // Tasks run several times (`--attempts`), each with its attempts side by side.
            let attempts: Vec<Value> = w
                .tasks
                .iter()
                .filter_map(|t| {
                    let a = t.attempts.clone()?;
                    Some(Value::object([
                        ("task".to_string(), Value::str(&t.id)),
                        ("attempts".to_string(), a),
                    ]))
                })
                .collect();
            if !attempts.is_empty() {
                out.push(("attempts".into(), Value::Array(attempts)));
            }
        }
        if let Some(sp) = super::spend::to_value(&self.spend) {
            out.push(("spend".into(), sp));
        }
        Value::Object(out)
    }
}

/// The model a witnessed call went to, when `e` is one (see the module docs).
pub(crate) fn witnessed_call(e: &Entry, body: Option<&Value>) -> Option<String> {
    let model = match field(body, "model") {
        Some(Value::Str(m)) if !m.is_empty() => m.clone(),
        _ => return None,
    };
    match e.kind.as_str() {
        kind::RESULT if has(body, "id") => {
            let skipped = matches!(field(body, "error"), Some(Value::Str(c)) if c == "budget")
                || (is_false(field(body, "ok"))
                    && matches!(field(body, "output"), Some(Value::Str(o)) if o == BUDGET_SKIPPED_OUTPUT));
            (!skipped).then_some(model)
        }
        kind::RESULT
        | kind::VERDICT
        | kind::PLAN
        | kind::INTENT_JUDGMENT
        | kind::CLASSIFICATION
        | kind::REVISION => Some(model),
        _ => None,
    }
}

/// Summarizes the entries of `s` (forum-spec §18; `model_calls` as in the module docs): the
/// [`SummaryFold`] of every entry, in order.
pub fn summarize(s: &Snapshot) -> Summary {
    let mut fold = SummaryFold::default();
    for (e, body) in &s.items {
        fold.push(e, body.as_ref());
    }
    fold.summary(&s.checkpoint, s.verified)
}

/// A payload hash as a set key: its 32 bytes when it is 64 hex digits (as every entry's is),
/// else the SHA-256 of its text, so a malformed one still counts once.
fn hash_key(h: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    let bytes = h.as_bytes();
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    if bytes.len() == 64 {
        let parsed = out.iter_mut().zip(bytes.chunks_exact(2)).all(|(o, pair)| {
            match (nibble(pair[0]), nibble(pair[1])) {
                (Some(hi), Some(lo)) => {
                    *o = (hi << 4) | lo;
                    true
                }
                _ => false,
            }
        });
        if parsed {
            return out;
        }
    }
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}

/// The summary's state over the entries pushed so far, in seq order. [`summarize`] is this
/// fold over a whole snapshot; a reader that keeps one (the daemon, per ledger tip) folds in
/// only the entries appended since, and holds no body: counts, the models seen, one key per
/// distinct payload, and the work and spend per task and per model.
#[derive(Debug, Clone, Default)]
pub(crate) struct SummaryFold {
    n: Counts,
    model_calls: Vec<(String, i64)>,
    seen_hashes: std::collections::HashSet<[u8; 32]>,
    payload_bytes: i64,
    work: work_report::WorkFold,
    spend: Vec<super::spend::ModelSpend>,
}

impl Counts {
    /// Counts one entry of kind `kind_name` with its body `b` (`None`: absent, redacted).
    fn count(&mut self, kind_name: &str, b: Option<&Value>) {
        let ok = field(b, "ok");
        match kind_name {
            kind::REQUEST => self.requests += 1,
            kind::PLAN => self.plans += 1,
            kind::TASK => self.tasks += 1,
            kind::RESULT => {
                if has(b, "id") {
                    self.task_results += 1;
                    if is_false(ok) {
                        self.failed_results += 1;
                    }
                } else if has(b, "answer") && !has(b, "revised_from") {
                    self.answers += 1;
                }
            }
            kind::VERDICT if b.is_some() => {
                if truthy(ok) {
                    self.verdicts_pass += 1;
                } else {
                    self.verdicts_fail += 1;
                }
            }
            kind::INTENT_CHECK => {
                self.intent_checks += 1;
                self.intent_flagged += i64::from(truthy(field(b, "flagged")));
            }
            kind::INTENT_JUDGMENT => {
                self.intent_judgments += 1;
                self.intent_drift_judged += i64::from(is_false(ok));
            }
            kind::VERIFICATION => {
                self.verifications += 1;
                self.verifications_refuted += i64::from(is_false(ok));
            }
            kind::DELIVERY_CHECK => {
                self.delivery_checks += 1;
                self.delivery_flagged += i64::from(truthy(field(b, "flagged")));
            }
            kind::REVISION => {
                self.revisions += 1;
                self.revisions_accepted += i64::from(truthy(field(b, "accepted")));
            }
            kind::DELIVERY_PROFILE_CHECK => {
                self.delivery_profile_checks += 1;
                if b.is_some() {
                    self.delivery_profile_flagged += i64::from(truthy(field(b, "flagged")));
                    let profile = field(b, "profile").map(py_str).unwrap_or_default();
                    match profile.as_str() {
                        "operator" => self.profile[0] += 1,
                        "engineer" => self.profile[1] += 1,
                        "researcher" => self.profile[2] += 1,
                        "executive" => self.profile[3] += 1,
                        _ => {}
                    }
                }
            }
            kind::CHECKPOINT => self.checkpoints += 1,
            kind::RESUME => self.resumes += 1,
            kind::TIER_ESCALATION => self.escalations += 1,
            kind::BUDGET => self.budget_stops += 1,
            kind::CONTEXT => self.contexts += 1,
            kind::CONTEXT_BUDGET => {
                self.context_budget_checks += 1;
                match field(b, "action") {
                    Some(Value::Str(a)) if a == "trimmed" => self.trimmed += 1,
                    Some(Value::Str(a)) if a == "omitted" => self.omitted += 1,
                    _ => {}
                }
                self.tokens_original += py_int(field(b, "original_tokens"));
                self.tokens_admitted += py_int(field(b, "admitted_tokens"));
            }
            _ => {}
        }
    }
}

impl SummaryFold {
    /// Counts the next entry `e` with its body (`None`: absent, redacted).
    pub(crate) fn push(&mut self, e: &Entry, body: Option<&Value>) {
        let b = body;
        match b {
            None => self.n.absent += 1,
            Some(body) => {
                if self.seen_hashes.insert(hash_key(&e.payload_hash)) {
                    self.payload_bytes += dumps_sorted(body, false).len() as i64;
                }
            }
        }
        if let Some(m) = witnessed_call(e, b) {
            match self.model_calls.iter_mut().find(|(k, _)| *k == m) {
                Some(slot) => slot.1 += 1,
                None => self.model_calls.push((m, 1)),
            }
        }
        self.work.push(e, b);
        super::spend::push_usage(&mut self.spend, b);
        self.n.entries += 1;
        self.n.count(e.kind.as_str(), b);
    }

    /// The summary of the entries pushed so far, for a ledger whose Merkle root is `checkpoint`
    /// and whose chain verification said `verified`.
    pub(crate) fn summary(&self, checkpoint: &str, verified: bool) -> Summary {
        let n = &self.n;
        let total: i64 = self.model_calls.iter().map(|(_, c)| *c).sum();
        let values: [i64; 38] = [
            n.entries,
            n.requests,
            n.plans,
            n.tasks,
            n.task_results,
            n.failed_results,
            n.verdicts_pass,
            n.verdicts_fail,
            n.intent_checks,
            n.intent_flagged,
            n.intent_judgments,
            n.intent_drift_judged,
            n.verifications,
            n.verifications_refuted,
            n.delivery_checks,
            n.delivery_flagged,
            n.revisions,
            n.revisions_accepted,
            n.delivery_profile_checks,
            n.delivery_profile_flagged,
            n.profile[0],
            n.profile[1],
            n.profile[2],
            n.profile[3],
            n.checkpoints,
            n.resumes,
            n.escalations,
            n.budget_stops,
            n.contexts,
            n.context_budget_checks,
            n.trimmed,
            n.omitted,
            n.tokens_original,
            n.tokens_admitted,
            n.tokens_original.saturating_sub(n.tokens_admitted),
            n.answers,
            total,
            self.payload_bytes,
        ];
        Summary {
            metrics: NUMERIC.iter().copied().zip(values).collect(),
            model_calls: self.model_calls.clone(),
            checkpoint: checkpoint.to_string(),
            verified,
            absent_bodies: n.absent,
            work: self.work.finish(),
            spend: self.spend.clone(),
        }
    }
}

#[derive(Debug, Clone, Default)]
struct Counts {
    entries: i64,
    absent: u64,
    requests: i64,
    plans: i64,
    tasks: i64,
    task_results: i64,
    failed_results: i64,
    verdicts_pass: i64,
    verdicts_fail: i64,
    intent_checks: i64,
    intent_flagged: i64,
    intent_judgments: i64,
    intent_drift_judged: i64,
    verifications: i64,
    verifications_refuted: i64,
    delivery_checks: i64,
    delivery_flagged: i64,
    revisions: i64,
    revisions_accepted: i64,
    delivery_profile_checks: i64,
    delivery_profile_flagged: i64,
    profile: [i64; 4],
    checkpoints: i64,
    resumes: i64,
    escalations: i64,
    budget_stops: i64,
    contexts: i64,
    context_budget_checks: i64,
    trimmed: i64,
    omitted: i64,
    tokens_original: i64,
    tokens_admitted: i64,
    answers: i64,
}

/// `b − a` for each of the [`NUMERIC`] fields, in order (Forum's `compare`).
pub fn compare(a: &Summary, b: &Summary) -> Vec<(&'static str, i64)> {
    NUMERIC
        .iter()
        .map(|k| (*k, b.get(k).saturating_sub(a.get(k))))
        .collect()
}

/// `b − a` for each work count, when either side has work (a side without counts as zero).
pub(crate) fn compare_work(a: &Summary, b: &Summary) -> Option<Vec<(&'static str, i64)>> {
    if a.work.is_none() && b.work.is_none() {
        return None;
    }
    let zero = Work::default();
    let (wa, wb) = (
        a.work.as_ref().unwrap_or(&zero).metrics(),
        b.work.as_ref().unwrap_or(&zero).metrics(),
    );
    Some(
        wa.iter()
            .zip(wb)
            .map(|((k, x), (_, y))| (*k, y.saturating_sub(*x)))
            .collect(),
    )
}

/// [`compare`] as Forum's dict, with a `work` object of [`compare_work`] at the end when
/// either side has work.
pub fn compare_value(a: &Summary, b: &Summary) -> Value {
    let mut out: Vec<(String, Value)> = compare(a, b)
        .into_iter()
        .map(|(k, v)| (k.to_string(), Value::int(v)))
        .collect();
    if let Some(d) = compare_work(a, b) {
        out.push((
            "work".into(),
            Value::Object(
                d.into_iter()
                    .map(|(k, v)| (k.to_string(), Value::int(v)))
                    .collect(),
            ),
        ));
    }
    Value::Object(out)
}

/// The summary of an empty ledger (what `compare` reads for a missing side).
pub fn empty() -> Summary {
    summarize(&Snapshot::from_items(Vec::new()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{MemoryStorage, NewEntry, Storage};

    fn ledger(rows: &[(&str, &str, &str)]) -> Snapshot {
        let mut s = MemoryStorage::default();
        for (i, (actor, kind, body)) in rows.iter().enumerate() {
            s.append(NewEntry {
                actor: actor.to_string(),
                kind: kind.to_string(),
                causal_parent: None,
                payload: crate::ledger::canonical::parse(body).unwrap(),
                ts: i as f64,
            })
            .unwrap();
        }
        let items = (0..s.len().unwrap())
            .map(|seq| {
                let e = s.get(seq).unwrap().unwrap();
                let body = s.payload(&e.payload_hash).unwrap();
                (e, body)
            })
            .collect();
        Snapshot::from_items(items)
    }

    #[test]
    fn witnessed_calls_skip_budget_skips_and_count_verdict_models() {
        let s = ledger(&[
            (
                "w",
                "result",
                r#"{"id":"T1","output":"x","ok":true,"model":"m1"}"#,
            ),
            (
                "w",
                "result",
                r#"{"id":"T2","output":"error: budget exceeded","ok":false,"model":"m1"}"#,
            ),
            (
                "w",
                "result",
                r#"{"id":"T3","output":"error: budget exceeded","ok":false,"model":"m1","error":"budget"}"#,
            ),
            (
                "w",
                "result",
                r#"{"id":"T4","output":"error: timed out","ok":false,"model":"m2","error":"timeout"}"#,
            ),
            (
                "validator",
                "verdict",
                r#"{"id":"T1","ok":true,"score":0.9,"reason":"r","decision":"pass","model":"judge"}"#,
            ),
            (
                "validator",
                "verdict",
                r#"{"id":"T4","ok":false,"score":0.0,"reason":"task failed"}"#,
            ),
            ("synthesizer", "result", r#"{"answer":"a"}"#),
        ]);
        let sum = summarize(&s);
        assert_eq!(
            sum.model_calls,
            vec![("m1".into(), 1), ("m2".into(), 1), ("judge".into(), 1)]
        );
        assert_eq!(sum.get("model_calls_total"), 3);
        assert_eq!(sum.get("task_results"), 4);
        assert_eq!(sum.get("failed_results"), 3);
        assert_eq!(sum.get("verdicts_pass"), 1);
        assert_eq!(sum.get("verdicts_fail"), 1);
        assert_eq!(sum.get("answers"), 1);
    }

    #[test]
    fn compare_is_b_minus_a_over_38_fields() {
        let a = empty();
        let b = ledger(&[("client", "request", r#"{"text":"x"}"#)]);
        let d = compare(&a, &summarize(&b));
        assert_eq!(d.len(), 38);
        assert_eq!(d[0], ("entries", 1));
        assert_eq!(d[1], ("requests", 1));
        assert_eq!(d[37], ("payload_bytes", r#"{"text": "x"}"#.len() as i64));
    }
}
