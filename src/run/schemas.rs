//! What the structured model calls must answer (the output schemas of the planner, the
//! validator and the intent judge) and how their answers are read back.

use serde_json::{Value, json};

use crate::exec::OutputSchema;
use crate::plan;
use crate::roster::Roster;

/// The schema a planner's answer must follow. Task `i` has the fixed id `T{i+1}` and may only
/// depend on earlier ids, so a model held to this schema (constrained decoding) cannot write
/// an unknown dependency, a duplicate id or a cycle; agents must be roster lanes.
pub fn plan_schema(roster: &Roster, max_tasks: usize) -> OutputSchema {
    let agents: Vec<&str> = roster.agents().iter().map(|a| a.name.as_str()).collect();
    let task = |i: usize| {
        let earlier: Vec<String> = (1..=i).map(|j| format!("T{j}")).collect();
        let depends_on = if earlier.is_empty() {
            json!({"type": "array", "maxItems": 0})
        } else {
            json!({"type": "array", "items": {"type": "string", "enum": earlier}, "maxItems": i})
        };
        json!({
            "type": "object",
            "properties": {
                "id": {"const": format!("T{}", i + 1)},
                "agent": {"enum": agents},
                "instruction": {"type": "string", "minLength": 1, "maxLength": 400},
                "depends_on": depends_on,
                "done_when": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1, "maxLength": 200},
                    "maxItems": 3
                }
            },
            "required": ["id", "agent", "instruction", "depends_on", "done_when"],
            "additionalProperties": false
        })
    };
    OutputSchema {
        name: "plan".into(),
        schema: json!({
            "type": "object",
            "properties": {
                "tasks": {
                    "type": "array",
                    "prefixItems": (0..max_tasks).map(task).collect::<Vec<_>>(),
                    "minItems": 1,
                    "maxItems": max_tasks
                }
            },
            "required": ["tasks"],
            "additionalProperties": false
        }),
    }
}

/// The schema a validator's answer must follow.
pub fn verdict_schema() -> OutputSchema {
    OutputSchema {
        name: "verdict".into(),
        schema: json!({
            "type": "object",
            "properties": {
                "decision": {"type": "string", "enum": ["pass", "block", "escalate"]},
                "score": {"type": "number"},
                "reason": {"type": "string"}
            },
            "required": ["decision", "score", "reason"],
            "additionalProperties": false
        }),
    }
}

/// A validator's ruling on one result.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// `pass`, `block`, `escalate`, `fail` (the task itself failed) or `undetermined` (the
    /// validator erred or answered nonsense).
    pub(crate) decision: String,
    /// The validator's score (0 when none was given).
    pub(crate) score: f64,
    /// Why, in the validator's words (or ours when it could not rule).
    pub(crate) reason: String,
    /// The validator's model, when one was asked.
    pub(crate) model: Option<String>,
}

impl Verdict {
    /// Whether the result was accepted.
    pub(crate) fn passed(&self) -> bool {
        self.decision == "pass"
    }

    /// Whether the escalation ladder should try a stronger executor.
    pub(crate) fn climbs(&self) -> bool {
        matches!(self.decision.as_str(), "escalate" | "fail")
    }

    pub(super) fn payload(&self, id: &str) -> Value {
        let mut p = json!({
            "id": id,
            "ok": self.passed(),
            "score": self.score,
            "reason": self.reason,
            "decision": self.decision,
        });
        if let Some(m) = &self.model {
            p["model"] = json!(m);
        }
        p
    }
}

/// Reads a validator's answer: `decision` (pass, block, escalate) or Forum's `ok`; `score`
/// (a number, default 0.0); `reason`. Anything else is `None` (undetermined).
pub fn parse_verdict(text: &str) -> Option<(String, f64, String)> {
    let span = plan::extract_json_object(text).ok()?;
    let doc: Value = serde_json::from_str(span).ok()?;
    let obj = doc.as_object()?;
    let decision = match obj.get("decision").and_then(Value::as_str) {
        Some(d) => {
            let d = d.trim().to_lowercase();
            match d.as_str() {
                "pass" | "block" | "escalate" => d,
                _ => return None,
            }
        }
        None => match obj.get("ok")? {
            Value::Bool(true) => "pass".into(),
            Value::Bool(false) => "escalate".into(),
            Value::String(s) => {
                let s = s.trim().to_lowercase();
                if matches!(s.as_str(), "false" | "0" | "no" | "") {
                    "escalate".into()
                } else {
                    "pass".into()
                }
            }
            Value::Number(n) => {
                if n.as_f64() == Some(0.0) {
                    "escalate".into()
                } else {
                    "pass".into()
                }
            }
            _ => return None,
        },
    };
    let score = match obj.get("score") {
        None | Some(Value::Null) => 0.0,
        Some(Value::Number(n)) => n.as_f64().filter(|f| f.is_finite())?,
        Some(_) => return None,
    };
    let reason = match obj.get("reason") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        Some(other) => other.to_string(),
    };
    Some((decision, score, reason))
}

/// The schema an intent judge's answer must follow.
pub fn judgment_schema() -> OutputSchema {
    OutputSchema {
        name: "intent_judgment".into(),
        schema: json!({
            "type": "object",
            "properties": {
                "ok": {"type": "boolean"},
                "score": {"type": "number"},
                "reason": {"type": "string"}
            },
            "required": ["ok", "score", "reason"],
            "additionalProperties": false
        }),
    }
}

/// Why a judge's or the pre-ship gate's answer cannot be read: what was wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// No `{...}` in the text; names the stage whose output it was (the shared cut's own
    /// error names the planner, which answered nothing here).
    #[error("no JSON object found in the {0}'s output")]
    NoObject(&'static str),
    /// The object's text is not JSON.
    #[error("invalid JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// JSON of another kind.
    #[error("the answer is not a JSON object")]
    NotObject,
    /// No `ok` field.
    #[error("the answer has no \"ok\"")]
    NoOk,
    /// `ok` is null (no ruling).
    #[error("\"ok\" is null")]
    NullOk,
    /// A numeric `score` that is not finite.
    #[error("score {0} is not a finite number")]
    ScoreNotFinite(serde_json::Number),
    /// A text `score` that is not a finite number.
    #[error("score {0:?} is not a number")]
    ScoreText(String),
    /// A `score` of another type.
    #[error("score {0} is not a number")]
    ScoreNotNumber(Value),
    /// No string `decision`.
    #[error("the answer has no string \"decision\"")]
    NoDecision,
    /// A decision the gate may not answer.
    #[error("decision {decision:?} is not one of {}", SHIP_DECISIONS.join(", "))]
    UnknownDecision { decision: String },
}

/// Reads an intent judge's answer: `ok` (a bool, or a string or number where `false`, `0`,
/// `no` and the empty string mean false, as Forum reads it; a missing or null `ok` is no
/// ruling), `score` (a number or numeric text, default 0.0) and `reason`. The error says what
/// was wrong.
pub fn parse_judgment(text: &str) -> Result<(bool, f64, String), AnswerError> {
    let span =
        plan::extract_json_object(text).map_err(|_| AnswerError::NoObject("intent judge"))?;
    let doc: Value = serde_json::from_str(span).map_err(AnswerError::Json)?;
    let obj = doc.as_object().ok_or(AnswerError::NotObject)?;
    let ok = match obj.get("ok") {
        None => return Err(AnswerError::NoOk),
        Some(Value::Bool(b)) => *b,
        Some(Value::Null) => return Err(AnswerError::NullOk),
        Some(Value::String(s)) => {
            !matches!(s.trim().to_lowercase().as_str(), "false" | "0" | "no" | "")
        }
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(other) => !other.to_string().is_empty(),
    };
    let score = match obj.get("score") {
        None | Some(Value::Null) => 0.0,
        Some(Value::Number(n)) => n
            .as_f64()
            .filter(|f| f.is_finite())
            .ok_or_else(|| AnswerError::ScoreNotFinite(n.clone()))?,
        Some(Value::String(s)) => s
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .ok_or_else(|| AnswerError::ScoreText(s.clone()))?,
        Some(other) => return Err(AnswerError::ScoreNotNumber(other.clone())),
    };
    let reason = match obj.get("reason") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        Some(other) => other.to_string(),
    };
    Ok((ok, score, reason))
}

/// The decisions the pre-ship gate may answer.
pub(super) const SHIP_DECISIONS: [&str; 4] = ["merge", "block", "escalate", "undetermined"];

/// The schema the pre-ship gate's answer must follow: `{decision, reason}`.
pub(super) fn ship_schema() -> OutputSchema {
    OutputSchema {
        name: "ship".into(),
        schema: json!({
            "type": "object",
            "properties": {
                "decision": {"type": "string", "enum": SHIP_DECISIONS},
                "reason": {"type": "string", "minLength": 1, "maxLength": 400}
            },
            "required": ["decision", "reason"],
            "additionalProperties": false
        }),
    }
}

/// Reads the pre-ship gate's answer: a `decision` among [`SHIP_DECISIONS`] and a `reason`.
/// The error says what was wrong (the gate then records `undetermined` with it).
pub(super) fn parse_ship(text: &str) -> Result<(String, String), AnswerError> {
    let span =
        plan::extract_json_object(text).map_err(|_| AnswerError::NoObject("pre-ship gate"))?;
    let doc: Value = serde_json::from_str(span).map_err(AnswerError::Json)?;
    let decision = doc
        .get("decision")
        .and_then(Value::as_str)
        .map(|d| d.trim().to_lowercase())
        .ok_or(AnswerError::NoDecision)?;
    if !SHIP_DECISIONS.contains(&decision.as_str()) {
        return Err(AnswerError::UnknownDecision { decision });
    }
    let reason = doc
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    Ok((decision, reason))
}

#[cfg(test)]
mod ship_tests {
    use super::parse_ship;

    #[test]
    fn the_ship_answer_is_read_or_refused_with_a_reason() {
        assert_eq!(
            parse_ship(r#"{"decision":"Merge","reason":"fixes it"}"#).unwrap(),
            ("merge".to_string(), "fixes it".to_string())
        );
        assert!(parse_ship("sure, ship it").is_err());
        let e = parse_ship(r#"{"decision":"yes","reason":"x"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not one of merge, block"), "{e}");
        assert!(parse_ship(r#"{"reason":"x"}"#).is_err());
    }

    #[test]
    fn garbage_is_named_as_the_output_of_the_stage_that_gave_it() {
        let e = parse_ship("sure, ship it").unwrap_err().to_string();
        assert_eq!(e, "no JSON object found in the pre-ship gate's output");
        let e = super::parse_judgment("looks fine to me")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "no JSON object found in the intent judge's output");
    }
}
