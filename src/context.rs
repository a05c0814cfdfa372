//! Context budgets (forum-spec §10): how much request, task and upstream text may reach a model,
//! in approximate tokens, and what was retained, trimmed or omitted. Pure: the caller owns the
//! [`Meter`] of a run and witnesses each [`Pressure`] it gets back.

use crate::ledger::Value;

pub(crate) mod repo;

/// The schema name of a pressure record.
pub(crate) const PRESSURE_SCHEMA: &str = "forum.context-pressure/v1";

/// Where a slice of context comes from; each has its own optional cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Request-level context (a provider's or the ledger capsule's).
    Request,
    /// Context fetched for one task.
    Task,
    /// An upstream task's output injected downstream (and each synthesis input).
    Upstream,
}

impl Source {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Source::Request => "request",
            Source::Task => "task",
            Source::Upstream => "upstream",
        }
    }

    fn limit_name(self) -> &'static str {
        match self {
            Source::Request => "max_request_tokens",
            Source::Task => "max_task_tokens",
            Source::Upstream => "max_upstream_tokens",
        }
    }
}

/// The limits of one run. `None` means no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextBudget {
    pub max_total_tokens: Option<u64>,
    pub max_request_tokens: Option<u64>,
    pub max_task_tokens: Option<u64>,
    pub max_upstream_tokens: Option<u64>,
    /// Bytes of UTF-8 per approximate token (Forum's default is 4).
    pub bytes_per_token: u64,
}

impl Default for ContextBudget {
    fn default() -> ContextBudget {
        ContextBudget {
            max_total_tokens: None,
            max_request_tokens: None,
            max_task_tokens: None,
            max_upstream_tokens: None,
            bytes_per_token: 4,
        }
    }
}

impl ContextBudget {
    /// `{"bytes_per_token", then each limit that is set}` in Forum's order.
    pub fn configured_limits(&self) -> Value {
        let mut out = vec![(
            "bytes_per_token".to_string(),
            Value::Int(self.bytes_per_token.into()),
        )];
        for (name, v) in [
            ("max_total_tokens", self.max_total_tokens),
            ("max_request_tokens", self.max_request_tokens),
            ("max_task_tokens", self.max_task_tokens),
            ("max_upstream_tokens", self.max_upstream_tokens),
        ] {
            if let Some(v) = v {
                out.push((name.to_string(), Value::Int(v.into())));
            }
        }
        Value::Object(out)
    }

    fn source_limit(&self, source: Source) -> Option<u64> {
        match source {
            Source::Request => self.max_request_tokens,
            Source::Task => self.max_task_tokens,
            Source::Upstream => self.max_upstream_tokens,
        }
    }
}

/// Approximate tokens: 0 for empty text, else ceil(UTF-8 bytes / bytes_per_token).
pub fn approx_tokens(text: &str, bytes_per_token: u64) -> u64 {
    (text.len() as u64).div_ceil(bytes_per_token.max(1))
}

/// The run-wide count of admitted tokens, shared by every slice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Meter {
    pub(crate) admitted_tokens_total: u64,
}

impl Meter {
    /// Tokens the total limit still allows, `None` without a total limit.
    pub(crate) fn remaining_total(&self, budget: &ContextBudget) -> Option<u64> {
        budget
            .max_total_tokens
            .map(|m| m.saturating_sub(self.admitted_tokens_total))
    }
}

/// What happened to a slice of context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Retained,
    Trimmed,
    Omitted,
}

impl Action {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Action::Retained => "retained",
            Action::Trimmed => "trimmed",
            Action::Omitted => "omitted",
        }
    }
}

/// The record of one slice meeting the budget (`forum.context-pressure/v1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pressure {
    pub(crate) source: Source,
    pub(crate) label: String,
    pub(crate) action: Action,
    /// `empty`, `under_budget`, or the name of the limit that applied.
    pub(crate) reason: &'static str,
    pub(crate) original_bytes: u64,
    pub(crate) admitted_bytes: u64,
    pub(crate) original_tokens: u64,
    pub(crate) admitted_tokens: u64,
    /// What the total limit still allows after this slice, `None` without a total limit.
    pub(crate) remaining_total_tokens: Option<u64>,
}

impl Pressure {
    /// The payload Forum witnesses as a `context_budget` entry. It never holds the text.
    pub fn payload(&self) -> Value {
        let int = |v: u64| Value::Int(v.into());
        Value::Object(vec![
            ("schema".into(), Value::str(PRESSURE_SCHEMA)),
            ("source".into(), Value::str(self.source.as_str())),
            ("label".into(), Value::str(&self.label)),
            ("action".into(), Value::str(self.action.as_str())),
            ("reason".into(), Value::str(self.reason)),
            ("original_bytes".into(), int(self.original_bytes)),
            ("admitted_bytes".into(), int(self.admitted_bytes)),
            ("original_tokens".into(), int(self.original_tokens)),
            ("admitted_tokens".into(), int(self.admitted_tokens)),
            (
                "remaining_total_tokens".into(),
                self.remaining_total_tokens.map(int).unwrap_or(Value::Null),
            ),
        ])
    }
}

/// The limit that applies to `source` now and its name: the tighter of the source's own limit
/// and what the total still allows (the total wins a tie).
fn effective_limit(
    budget: &ContextBudget,
    meter: &Meter,
    source: Source,
) -> (Option<u64>, &'static str) {
    match (budget.source_limit(source), meter.remaining_total(budget)) {
        (None, None) => (None, "under_budget"),
        (None, Some(t)) => (Some(t), "max_total_tokens"),
        (Some(s), None) => (Some(s), source.limit_name()),
        (Some(s), Some(t)) if t <= s => (Some(t), "max_total_tokens"),
        (Some(s), Some(_)) => (Some(s), source.limit_name()),
    }
}

/// Puts `text` through the budget: returns the admitted text and the pressure, which is also
/// recorded on `meter` (so a trim consumes the total too).
pub fn apply(
    budget: &ContextBudget,
    meter: &mut Meter,
    source: Source,
    label: &str,
    text: &str,
) -> (String, Pressure) {
    apply_seen(budget, meter, source, label, text, text.len() as u64)
}

/// [`apply`] to a text of `bytes` bytes of which `text` is the start, as far as the budget
/// reads it: its length decides whether the text is kept, and the bytes through the
/// character its cut falls in decide where it is cut (a strict replay holds no more than
/// that of a slice the budget cut). With the whole text it is [`apply`].
pub fn apply_seen(
    budget: &ContextBudget,
    meter: &mut Meter,
    source: Source,
    label: &str,
    text: &str,
    bytes: u64,
) -> (String, Pressure) {
    let bpt = budget.bytes_per_token.max(1);
    let original_bytes = bytes;
    let original_tokens = bytes.div_ceil(bpt);
    let (limit, limit_reason) = effective_limit(budget, meter, source);
    let (admitted, action, reason) = if original_tokens == 0 {
        (String::new(), Action::Retained, "empty")
    } else {
        match limit {
            None => (text.to_string(), Action::Retained, "under_budget"),
            Some(l) if original_tokens <= l => (text.to_string(), Action::Retained, "under_budget"),
            Some(0) => (String::new(), Action::Omitted, limit_reason),
            Some(l) => {
                let mut end = usize::try_from(l.saturating_mul(bpt))
                    .unwrap_or(usize::MAX)
                    .min(text.len());
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                (text[..end].to_string(), Action::Trimmed, limit_reason)
            }
        }
    };
    let admitted_tokens = approx_tokens(&admitted, bpt);
    meter.admitted_tokens_total += admitted_tokens;
    let pressure = Pressure {
        source,
        label: label.to_string(),
        action,
        reason,
        original_bytes,
        admitted_bytes: admitted.len() as u64,
        original_tokens,
        admitted_tokens,
        remaining_total_tokens: meter.remaining_total(budget),
    };
    (admitted, pressure)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_on_a_character_boundary_and_meters_the_total() {
        let budget = ContextBudget {
            max_total_tokens: Some(1),
            bytes_per_token: 3,
            ..ContextBudget::default()
        };
        let mut meter = Meter::default();
        // "é" is two bytes: a one-token (three-byte) cut lands inside the second "é" and backs
        // off to the first.
        let (text, p) = apply(&budget, &mut meter, Source::Task, "t", "éé");
        assert_eq!(
            (text.as_str(), p.action, p.reason),
            ("é", Action::Trimmed, "max_total_tokens")
        );
        assert_eq!((p.original_tokens, p.admitted_tokens), (2, 1));
        assert_eq!(p.remaining_total_tokens, Some(0));
        // The total is spent: the next slice is omitted whatever its source.
        let (text, p) = apply(&budget, &mut meter, Source::Request, "r", "x");
        assert_eq!(
            (text.as_str(), p.action, p.reason),
            ("", Action::Omitted, "max_total_tokens")
        );
    }

    #[test]
    fn what_the_budget_read_of_a_cut_text_decides_it_as_the_whole_text_does() {
        let budget = ContextBudget {
            max_task_tokens: Some(3),
            ..ContextBudget::default()
        };
        // One byte, then two-byte characters: the 12-byte cut falls inside the sixth one.
        let whole = format!("a{}", "é".repeat(20));
        let (admitted, p) = apply(&budget, &mut Meter::default(), Source::Task, "t", &whole);
        assert_eq!((admitted.len(), p.action), (11, Action::Trimmed));
        // The admitted text, the first character after it and the length are all it needs.
        let start = format!("{admitted}é");
        let again = apply_seen(
            &budget,
            &mut Meter::default(),
            Source::Task,
            "t",
            &start,
            whole.len() as u64,
        );
        assert_eq!(again, (admitted, p));
        // An omitted text needs only its length.
        let none = ContextBudget {
            max_task_tokens: Some(0),
            ..ContextBudget::default()
        };
        let (_, p) = apply(&none, &mut Meter::default(), Source::Task, "t", &whole);
        let again = apply_seen(&none, &mut Meter::default(), Source::Task, "t", "", 41);
        assert_eq!(again, (String::new(), p));
    }

    #[test]
    fn source_limit_wins_only_when_tighter() {
        let budget = ContextBudget {
            max_total_tokens: Some(5),
            max_upstream_tokens: Some(5),
            ..ContextBudget::default()
        };
        let (_, p) = apply(
            &budget,
            &mut Meter::default(),
            Source::Upstream,
            "u",
            &"x".repeat(40),
        );
        assert_eq!(p.reason, "max_total_tokens");
        let budget = ContextBudget {
            max_total_tokens: Some(6),
            max_upstream_tokens: Some(5),
            ..ContextBudget::default()
        };
        let (_, p) = apply(
            &budget,
            &mut Meter::default(),
            Source::Upstream,
            "u",
            &"x".repeat(40),
        );
        assert_eq!(p.reason, "max_upstream_tokens");
    }
}
