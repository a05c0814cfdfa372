//! Tokens and cost per model: the `usage` objects a run witnessed with its model calls
//! (`{model, prompt_tokens, completion_tokens, estimated?, truncated?, cost_usd?}` on the entry
//! each call's result is witnessed in: task results, verdicts, the plan, the answer, the
//! `revision`, the pre-ship gate's `ship`, the `intent_judgment`, and the `run_stopped` or
//! `budget` entry of planning or synthesis that ended there), summed per model in first-seen
//! order, whatever the entry's kind. Pure.
//!
//! A call that reported more than it reserved under a spend ceiling carries its counts as
//! charged (cut to what the ceiling allowed) and an `over_reservation` object (what it reserved
//! and reported); the sums here are of what was charged, so they add up to what the run counted
//! against its ceilings, and each model says how many of its calls overran.
//!
//! An agent CLI metered by git forum's forwarder also says what it spent by its own count
//! (`usage.agent_reported`: its tokens and, for Claude Code and aider, its cost at its own
//! prices). Those are summed per model beside ours (the forwarder's tokens at the seat's
//! prices), with the difference in dollars when both have a cost and they differ: an agent
//! that does not know the model prices it at a default rate, and a seat's prices may be
//! stale.
//!
//! A ledger whose entries carry no `usage` (every Forum ledger, every scripted run) has no spend
//! and its summary and receipt keep Forum's keys exactly: the `spend` key is only added when
//! there is something to show.

use super::field;
use crate::ledger::Entry;
use crate::ledger::canonical::Value;

/// What one model's witnessed calls spent.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct ModelSpend {
    pub(crate) model: String,
    /// Calls that witnessed their usage.
    pub(crate) calls: u64,
    pub(crate) prompt_tokens: u64,
    pub(crate) completion_tokens: u64,
    /// Some of the counts are estimates (a command worker's bytes / 4).
    pub(crate) estimated: bool,
    /// The summed cost, when the calls were priced.
    pub(crate) cost_usd: Option<f64>,
    /// Calls that reported more than they reserved (their counts here are what was charged).
    pub(crate) over_reservation: u64,
    /// Tokens those calls reported beyond their reservations.
    pub(crate) over_by_tokens: u64,
    /// Calls whose agent CLI said what it spent by its own count.
    pub(crate) agent_calls: u64,
    /// The tokens those CLIs reported.
    pub(crate) agent_tokens: u64,
    /// The cost those CLIs reported, when any did.
    pub(crate) agent_cost_usd: Option<f64>,
}

impl ModelSpend {
    /// Prompt plus completion tokens.
    pub(crate) fn tokens(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// Every model's spend in `items`, in the order the models first appear.
pub(crate) fn per_model<'a>(
    items: impl IntoIterator<Item = &'a (Entry, Option<Value>)>,
) -> Vec<ModelSpend> {
    let mut out: Vec<ModelSpend> = Vec::new();
    for (_, body) in items {
        push_usage(&mut out, body.as_ref());
    }
    out
}

/// Adds the usage one entry's `body` witnessed (if any) to `out`, as [`per_model`] does for
/// each entry in order.
pub(crate) fn push_usage(out: &mut Vec<ModelSpend>, body: Option<&Value>) {
    let Some(u @ Value::Object(_)) = field(body, "usage") else {
        return;
    };
    let Some(model) = u.get("model").and_then(Value::as_str) else {
        return;
    };
    let n = |k: &str| match u.get(k) {
        Some(Value::Int(i)) => i.as_u64().unwrap_or(0),
        _ => 0,
    };
    let slot = match out.iter().position(|m| m.model == model) {
        Some(i) => &mut out[i],
        None => {
            out.push(ModelSpend {
                model: model.to_string(),
                ..ModelSpend::default()
            });
            out.last_mut().expect("just pushed")
        }
    };
    slot.calls += 1;
    slot.prompt_tokens += n("prompt_tokens");
    slot.completion_tokens += n("completion_tokens");
    slot.estimated |= matches!(u.get("estimated"), Some(Value::Bool(true)));
    if let Some(over @ Value::Object(_)) = u.get("over_reservation") {
        slot.over_reservation += 1;
        if let Some(Value::Int(i)) = over.get("over_by_tokens") {
            slot.over_by_tokens += i.as_u64().unwrap_or(0);
        }
    }
    if let Some(c) = dollars(u.get("cost_usd")) {
        slot.cost_usd = Some(slot.cost_usd.unwrap_or(0.0) + c);
    }
    if let Some(a @ Value::Object(_)) = u.get("agent_reported") {
        let n = |k: &str| match a.get(k) {
            Some(Value::Int(i)) => i.as_u64().unwrap_or(0),
            _ => 0,
        };
        slot.agent_calls += 1;
        slot.agent_tokens += n("prompt_tokens") + n("completion_tokens");
        if let Some(c) = dollars(a.get("cost_usd")) {
            slot.agent_cost_usd = Some(slot.agent_cost_usd.unwrap_or(0.0) + c);
        }
    }
}

/// A cost as the record holds it (a float, or an integer when it was whole).
fn dollars(v: Option<&Value>) -> Option<f64> {
    match v {
        Some(Value::Float(f)) => Some(*f),
        Some(Value::Int(i)) => i.as_i64().map(|v| v as f64),
        _ => None,
    }
}

/// Two costs that differ by less than this are the same (a millionth of a cent).
const SAME_COST_USD: f64 = 1e-8;

impl ModelSpend {
    /// What the agents reported beyond ours, in dollars (theirs minus ours), when both were
    /// priced and they differ.
    pub(crate) fn agent_cost_difference(&self) -> Option<f64> {
        let d = self.agent_cost_usd? - self.cost_usd?;
        (d.abs() >= SAME_COST_USD).then_some(d)
    }
}

/// The spend as one object: `{MODEL: {calls, prompt_tokens, completion_tokens, tokens,
/// cost_usd?, estimated?, over_reservation?: {calls, over_by_tokens}}, ...}`, then
/// `total: {tokens, cost_usd?}`. `None` when empty.
pub(crate) fn to_value(models: &[ModelSpend]) -> Option<Value> {
    if models.is_empty() {
        return None;
    }
    let mut out: Vec<(String, Value)> = Vec::new();
    let (mut tokens, mut cost, mut priced) = (0u64, 0.0f64, false);
    for m in models {
        let mut o = vec![
            ("calls".to_string(), uint(m.calls)),
            ("prompt_tokens".to_string(), uint(m.prompt_tokens)),
            ("completion_tokens".to_string(), uint(m.completion_tokens)),
            ("tokens".to_string(), uint(m.tokens())),
        ];
        if let Some(c) = m.cost_usd {
            o.push(("cost_usd".to_string(), Value::Float(c)));
            cost += c;
            priced = true;
        }
        if m.estimated {
            o.push(("estimated".to_string(), Value::Bool(true)));
        }
        if m.agent_calls > 0 {
            let mut a = vec![
                ("calls".to_string(), uint(m.agent_calls)),
                ("tokens".to_string(), uint(m.agent_tokens)),
            ];
            if let Some(c) = m.agent_cost_usd {
                a.push(("cost_usd".to_string(), Value::Float(c)));
            }
            if let Some(d) = m.agent_cost_difference() {
                a.push(("cost_difference_usd".to_string(), Value::Float(d)));
            }
            o.push(("agent_reported".to_string(), Value::Object(a)));
        }
        if m.over_reservation > 0 {
            o.push((
                "over_reservation".to_string(),
                Value::object([
                    ("calls".to_string(), uint(m.over_reservation)),
                    ("over_by_tokens".to_string(), uint(m.over_by_tokens)),
                ]),
            ));
        }
        tokens += m.tokens();
        out.push((m.model.clone(), Value::Object(o)));
    }
    let mut total = vec![("tokens".to_string(), uint(tokens))];
    if priced {
        total.push(("cost_usd".to_string(), Value::Float(cost)));
    }
    out.push(("total".to_string(), Value::Object(total)));
    Some(Value::Object(out))
}

/// The spend as text lines, one per model (empty when there is none).
pub(crate) fn text_lines(models: &[ModelSpend]) -> Vec<String> {
    if models.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![format!(
        "Spend per model{}",
        if models.iter().any(|m| m.estimated) {
            " (~ marks estimates: a command's bytes / 4)"
        } else {
            ""
        }
    )];
    for m in models {
        lines.push(format!(
            "  {:<28}{:>6} calls {}{:>10} tokens ({} in, {} out){}",
            m.model,
            m.calls,
            if m.estimated { "~" } else { " " },
            m.tokens(),
            m.prompt_tokens,
            m.completion_tokens,
            m.cost_usd.map_or(String::new(), |c| format!("  ${c:.6}")),
        ));
        if m.agent_calls > 0 {
            lines.push(agent_line(m));
        }
        if m.over_reservation > 0 {
            lines.push(format!(
                "    ! {} call{} reported {} tokens more than reserved; counted as the ceiling allowed",
                m.over_reservation,
                if m.over_reservation == 1 { "" } else { "s" },
                m.over_by_tokens
            ));
        }
    }
    lines
}

/// What the agent CLIs of `m` said they spent, against ours.
fn agent_line(m: &ModelSpend) -> String {
    let cost = match (m.agent_cost_usd, m.cost_usd, m.agent_cost_difference()) {
        (Some(a), Some(ours), Some(d)) => format!(
            ", ${a:.6} by its own prices against ${ours:.6} at the seat's (differs by {}${:.6})",
            if d < 0.0 { "-" } else { "+" },
            d.abs()
        ),
        (Some(a), Some(_), None) => format!(", ${a:.6}, as ours"),
        (Some(a), None, _) => format!(", ${a:.6} by its own prices (the seat has none)"),
        (None, _, _) => String::new(),
    };
    format!(
        "    the agent itself reported {} tokens{cost}",
        m.agent_tokens
    )
}

fn uint(n: u64) -> Value {
    Value::int(i64::try_from(n).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{MemoryStorage, NewEntry, Storage};
    use crate::report::Snapshot;

    fn snapshot(bodies: &[&str]) -> Snapshot {
        let mut s = MemoryStorage::default();
        for (i, b) in bodies.iter().enumerate() {
            s.append(NewEntry {
                actor: "a".into(),
                kind: "result".into(),
                causal_parent: None,
                payload: crate::ledger::canonical::parse(b).unwrap(),
                ts: i as f64,
            })
            .unwrap();
        }
        let items = (0..s.len().unwrap())
            .map(|q| {
                let e = s.get(q).unwrap().unwrap();
                let b = s.payload_at(q).unwrap();
                (e, b)
            })
            .collect();
        Snapshot::from_items(items)
    }

    #[test]
    fn usage_is_summed_per_model_in_first_seen_order() {
        let s = snapshot(&[
            r#"{"id":"T1","usage":{"model":"b","prompt_tokens":10,"completion_tokens":5,"cost_usd":0.5}}"#,
            r#"{"id":"T2","usage":{"model":"a","prompt_tokens":3,"completion_tokens":1,"estimated":true}}"#,
            r#"{"id":"T3","usage":{"model":"b","prompt_tokens":1,"completion_tokens":2,"cost_usd":0.25}}"#,
            r#"{"id":"T4","output":"no usage"}"#,
        ]);
        let m = per_model(&s.items);
        assert_eq!(m.len(), 2);
        assert_eq!(
            (
                m[0].model.as_str(),
                m[0].calls,
                m[0].tokens(),
                m[0].cost_usd
            ),
            ("b", 2, 18, Some(0.75))
        );
        assert!(m[1].estimated && m[1].cost_usd.is_none());
        let v = to_value(&m).unwrap().to_serde();
        assert_eq!(v["b"]["prompt_tokens"], 11);
        assert_eq!(v["total"]["tokens"], 22);
        assert_eq!(v["total"]["cost_usd"], 0.75);
        let text = text_lines(&m).join("\n");
        assert!(text.contains("$0.750000"), "{text}");
        assert!(text.contains("~"), "{text}");
    }

    #[test]
    fn what_an_agent_reported_is_summed_beside_ours_with_the_difference() {
        let s = snapshot(&[
            r#"{"id":"T1","usage":{"model":"m","prompt_tokens":3600,"completion_tokens":300,"cost_usd":0.0153,"agent_reported":{"prompt_tokens":3600,"completion_tokens":300,"cost_usd":0.0405}}}"#,
            r#"{"id":"T2","usage":{"model":"m","prompt_tokens":100,"completion_tokens":10,"cost_usd":0.0005}}"#,
            r#"{"id":"T3","usage":{"model":"same","prompt_tokens":10,"completion_tokens":1,"cost_usd":0.25,"agent_reported":{"prompt_tokens":9,"completion_tokens":1,"cost_usd":0.25}}}"#,
            r#"{"id":"T4","usage":{"model":"tokens-only","prompt_tokens":10,"completion_tokens":1,"agent_reported":{"prompt_tokens":8,"completion_tokens":1}}}"#,
        ]);
        let m = per_model(&s.items);
        assert_eq!((m[0].agent_calls, m[0].agent_tokens), (1, 3900));
        let d = m[0].agent_cost_difference().unwrap();
        assert!((d - 0.0247).abs() < 1e-9, "{d}");
        assert_eq!(m[1].agent_cost_difference(), None);
        assert_eq!(m[2].agent_cost_usd, None);
        let v = to_value(&m).unwrap().to_serde();
        assert_eq!(v["m"]["agent_reported"]["tokens"], 3900);
        assert_eq!(v["m"]["agent_reported"]["cost_usd"], 0.0405);
        assert!(
            v["m"]["agent_reported"]["cost_difference_usd"]
                .as_f64()
                .unwrap()
                > 0.0247 - 1e-9
        );
        assert!(
            v["same"]["agent_reported"]
                .get("cost_difference_usd")
                .is_none()
        );
        // Ours stays what the run counted: the agents' numbers are beside it, not in it.
        assert_eq!(v["total"]["tokens"], 4032);
        let text = text_lines(&m).join("\n");
        assert!(
            text.contains("the agent itself reported 3900 tokens, $0.040500 by its own prices against $0.015800 at the seat's (differs by +$0.024700)"),
            "{text}"
        );
        assert!(text.contains("$0.250000, as ours"), "{text}");
        assert!(
            text.ends_with("the agent itself reported 9 tokens"),
            "{text}"
        );
    }

    #[test]
    fn calls_over_their_reservation_are_counted_as_charged_and_flagged() {
        let s = snapshot(&[
            r#"{"id":"T1","usage":{"model":"m","prompt_tokens":40000,"completion_tokens":2000,"over_reservation":{"reserved_tokens":4200,"reported_tokens":15000000,"over_by_tokens":14995800}}}"#,
            r#"{"id":"T2","usage":{"model":"m","prompt_tokens":10,"completion_tokens":5}}"#,
        ]);
        let m = per_model(&s.items);
        assert_eq!((m[0].tokens(), m[0].over_reservation), (42_015, 1));
        let v = to_value(&m).unwrap().to_serde();
        assert_eq!(v["m"]["over_reservation"]["calls"], 1);
        assert_eq!(v["m"]["over_reservation"]["over_by_tokens"], 14_995_800);
        assert_eq!(v["total"]["tokens"], 42_015);
        let text = text_lines(&m).join("\n");
        assert!(
            text.contains("14995800 tokens more than reserved"),
            "{text}"
        );
    }

    #[test]
    fn a_ledger_without_usage_has_no_spend() {
        let s = snapshot(&[r#"{"id":"T1","output":"x","ok":true,"model":"m"}"#]);
        assert!(per_model(&s.items).is_empty());
        assert_eq!(to_value(&[]), None);
        assert!(text_lines(&[]).is_empty());
    }
}
