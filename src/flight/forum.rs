//! Forum's four trace formats, mapped to events exactly as Forum's `flight_recorder.py` maps
//! them (Python's `or`, `str()` and `dict.get` included), so the hashes agree with Forum's:
//!
//! | format | actor | kind | id | parent | payload |
//! |---|---|---|---|---|---|
//! | langsmith | `name` or `run_type` or `run` | `run_type` or `run` | `id` or `run_id` | `parent_run_id` | the event |
//! | otel | `name` or `span_id` or `span` | `span` | `span_id` | `parent_span_id` | the event |
//! | agentops | `agent` or `event_type` | `event_type` | `id` or `event_id` | `parent_id` | the event |
//! | generic | `actor` | `kind` | `id` | `parent` | `payload`, else the event |
//!
//! A missing required key is an error naming the event, never a dropped step.

use super::{Event, Format, TraceError, err};
use crate::ledger::canonical::Value;
use crate::report::{py_str, truthy};

/// Python's `a or b`: `a` when truthy, else `b`.
fn or<'a>(a: Option<&'a Value>, b: Option<&'a Value>) -> Option<&'a Value> {
    if truthy(a) { a } else { b }
}

/// `dict.get(key)` as an id: a JSON null is no id.
fn id(v: Option<&Value>) -> Option<Value> {
    v.filter(|v| !matches!(v, Value::Null)).cloned()
}

/// Python's type name of a JSON value, for messages.
fn shape(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Int(_) | Value::Float(_) => "a number",
        Value::Str(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The events of a trace already parsed as JSON, in Forum's format `fmt`.
pub(crate) fn events(trace: &Value, fmt: Format) -> Result<Vec<Event>, TraceError> {
    let list = match trace {
        Value::Array(a) if !a.is_empty() => a,
        _ => {
            return Err(err(
                "the trace is not a non-empty list of events; give a JSON list holding at least one event object",
            ));
        }
    };
    list.iter()
        .enumerate()
        .map(|(i, ev)| match ev {
            Value::Object(_) => event(ev, i, fmt),
            other => Err(err(format!(
                "event #{i} is {} where an object is expected; make every event of the list a JSON object",
                shape(other)
            ))),
        })
        .collect()
}

fn event(ev: &Value, i: usize, fmt: Format) -> Result<Event, TraceError> {
    let g = |k: &str| ev.get(k);
    let text = |v: Option<&Value>, fallback: &str| match v {
        Some(v) if truthy(Some(v)) => py_str(v),
        _ => fallback.to_string(),
    };
    Ok(match fmt {
        Format::Langsmith => {
            if g("name").is_none() && g("run_type").is_none() {
                return Err(err(format!(
                    "event #{i} of the langsmith trace has neither 'name' nor 'run_type'; give every run one of them"
                )));
            }
            Event {
                actor: text(or(g("name"), g("run_type")), "run"),
                kind: text(g("run_type"), "run"),
                id: id(or(g("id"), g("run_id"))),
                parent_id: id(g("parent_run_id")),
                payload: ev.clone(),
            }
        }
        Format::Otel => {
            if g("name").is_none() && g("span_id").is_none() {
                return Err(err(format!(
                    "event #{i} of the otel trace has neither 'name' nor 'span_id'; give every span one of them"
                )));
            }
            Event {
                actor: text(or(g("name"), g("span_id")), "span"),
                kind: "span".to_string(),
                id: id(g("span_id")),
                parent_id: id(g("parent_span_id")),
                payload: ev.clone(),
            }
        }
        Format::Agentops => {
            let Some(event_type) = g("event_type") else {
                return Err(err(format!(
                    "event #{i} of the agentops trace has no 'event_type'; give every event one"
                )));
            };
            Event {
                actor: py_str(or(g("agent"), Some(event_type)).unwrap_or(event_type)),
                kind: py_str(event_type),
                id: id(or(g("id"), g("event_id"))),
                parent_id: id(g("parent_id")),
                payload: ev.clone(),
            }
        }
        Format::Generic | Format::Otlp | Format::ClaudeCode => {
            let (Some(actor), Some(kind)) = (g("actor"), g("kind")) else {
                return Err(err(format!(
                    "event #{i} of the generic trace needs both 'actor' and 'kind'; give every event both"
                )));
            };
            Event {
                actor: py_str(actor),
                kind: py_str(kind),
                id: id(g("id")),
                parent_id: id(g("parent")),
                payload: g("payload").unwrap_or(ev).clone(),
            }
        }
    })
}
