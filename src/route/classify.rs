//! The routing ladder of a one-task run: the keyword router first, then, only when it cannot
//! decide, a model asked which roster lane should take the task (forum-features, the entry
//! table: `route`, then `classification` under it).
//!
//! This part is pure: whether the model is asked at all ([`first_rung`]), what it is asked
//! ([`classifier_prompt`], [`classifier_schema`]), how its answer is read ([`read_answer`]:
//! the lane must be named exactly as the roster spells it, never matched to a near name), and
//! the bodies of the `route` and `classification` entries. The call itself, its budget and
//! the entries' writing are the run's (`run::classify`).

use serde_json::{Value as J, json};

use super::{Classification, RouteDecision, RouteFrame};
use crate::ledger::Value;
use crate::roster::Roster;

/// The words every classifier prompt starts with (a scripted model looks for them).
pub const CLASSIFIER_OPENING: &str = "Choose the one lane that should take this task.";

/// The system line of the classifier's call.
pub const CLASSIFIER_SYSTEM: &str =
    "You assign a task to one lane of a team. Answer with JSON only.";

/// How much of an answer that names no lane the `classification` entry keeps.
pub const MAX_KEPT_ANSWER: usize = 2000;

/// The first rung of the ladder for a routed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rung {
    /// The keyword router decided: this lane takes the task, and no model is asked.
    Decided(String),
    /// The router could not decide (no lane, a tie, or below its floors): ask the classifier.
    Classify,
}

/// Whether the keyword router's `decision` settles the task or the classifier must be asked.
pub fn first_rung(decision: &RouteDecision) -> Rung {
    match &decision.decided {
        Some(lane) if !decision.needs_escalation => Rung::Decided(lane.clone()),
        _ => Rung::Classify,
    }
}

/// The classifier's prompt: the lanes (name and what each is for), the answer's shape and the
/// task.
pub fn classifier_prompt(task: &str, roster: &Roster) -> String {
    let lanes: Vec<String> = roster
        .agents()
        .iter()
        .map(|a| {
            if a.domain.trim().is_empty() {
                format!("- {}", a.name)
            } else {
                format!("- {}: {}", a.name, a.domain.trim())
            }
        })
        .collect();
    format!(
        "{CLASSIFIER_OPENING}\nThe lanes:\n{}\n\nAnswer with JSON only, of the form {{\"agent\": \"<a lane's name, exactly as listed>\", \"confidence\": <a number from 0 to 1>, \"reason\": \"<one sentence>\"}}.\n\nTask: {task}",
        lanes.join("\n")
    )
}

/// The JSON schema the classifier's answer must follow: `agent` one of the roster's lane
/// names, `confidence` in `[0, 1]`, and a `reason`.
pub fn classifier_schema(roster: &Roster) -> J {
    let names: Vec<&str> = roster.agents().iter().map(|a| a.name.as_str()).collect();
    json!({
        "type": "object",
        "properties": {
            "agent": {"type": "string", "enum": names},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "reason": {"type": "string", "maxLength": 400}
        },
        "required": ["agent", "confidence", "reason"],
        "additionalProperties": false
    })
}

/// Why a classifier's answer names no roster lane.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Unplaced {
    /// No `{...}` in the answer.
    #[error("the answer holds no JSON object")]
    NoObject,
    /// The object's text is not JSON.
    #[error("the answer's JSON does not parse: {0}")]
    NotJson(String),
    /// JSON, but not an object.
    #[error("the answer is not a JSON object")]
    NotObject,
    /// No `agent` field, or one that is not a string.
    #[error("the answer has no \"agent\" string")]
    NoAgent,
    /// A name that is not a lane of the roster (kept as answered).
    #[error("the answer names {0:?}, which is not a lane of the roster")]
    UnknownAgent(String),
    /// A `confidence` that is not a number in `[0, 1]` (kept as answered).
    #[error("the answer's confidence {0} is not a number between 0 and 1")]
    BadConfidence(String),
}

/// Reads the classifier's answer against `roster`. The lane must be one of the roster's names
/// exactly (no trimming, no case folding, no nearest match); a missing `confidence` is 0.0
/// and a missing `reason` empty, as Forum reads them; a confidence may be a number or numeric
/// text, and must lie in `[0, 1]`.
pub fn read_answer(text: &str, roster: &Roster) -> Result<Classification, Unplaced> {
    let span = crate::plan::extract_json_object(text).map_err(|_| Unplaced::NoObject)?;
    let doc: J = serde_json::from_str(span).map_err(|e| Unplaced::NotJson(e.to_string()))?;
    let obj = doc.as_object().ok_or(Unplaced::NotObject)?;
    let agent = obj
        .get("agent")
        .and_then(J::as_str)
        .ok_or(Unplaced::NoAgent)?;
    if roster.get(agent).is_none() {
        return Err(Unplaced::UnknownAgent(agent.to_string()));
    }
    let confidence = match obj.get("confidence") {
        None | Some(J::Null) => Some(0.0),
        Some(J::Number(n)) => n.as_f64(),
        Some(J::String(s)) => s.trim().parse::<f64>().ok(),
        Some(_) => None,
    }
    .filter(|c| (0.0..=1.0).contains(c))
    .ok_or_else(|| Unplaced::BadConfidence(obj["confidence"].to_string()))?;
    let reason = match obj.get("reason") {
        None | Some(J::Null) => String::new(),
        Some(J::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    Ok(Classification {
        agent: agent.to_string(),
        confidence,
        reason,
    })
}

/// Forum's `route` body, as `assign` witnesses it: `{task, decided, confidence, frame}`.
pub fn route_payload(task: &str, decision: &RouteDecision, frame: &RouteFrame) -> Value {
    Value::object([
        ("task".to_string(), Value::str(task)),
        (
            "decided".to_string(),
            decision.decided.as_deref().map_or(Value::Null, Value::str),
        ),
        ("confidence".to_string(), Value::Float(decision.confidence)),
        ("frame".to_string(), frame.payload()),
    ])
}

/// The `classification` body for an answer. A lane: Forum's `{task, agent, confidence,
/// reason}`. No lane: `agent` null, confidence 0.0, the reason saying why no lane was read,
/// and `answer`, what came back (its first [`MAX_KEPT_ANSWER`] characters).
pub fn classification_payload(
    task: &str,
    answer: &Result<Classification, Unplaced>,
    text: &str,
) -> Value {
    match answer {
        Ok(c) => c.payload(task),
        Err(why) => unplaced_payload(task, &format!("no lane was chosen: {why}"), text),
    }
}

/// The `classification` body when no lane came back: `agent` null, confidence 0.0, `reason`
/// and `answer` (what came back, cut to [`MAX_KEPT_ANSWER`] characters).
pub fn unplaced_payload(task: &str, reason: &str, text: &str) -> Value {
    let kept: String = text.chars().take(MAX_KEPT_ANSWER).collect();
    Value::object([
        ("task".to_string(), Value::str(task)),
        ("agent".to_string(), Value::Null),
        ("confidence".to_string(), Value::Float(0.0)),
        ("reason".to_string(), Value::str(reason)),
        ("answer".to_string(), Value::str(&kept)),
    ])
}
