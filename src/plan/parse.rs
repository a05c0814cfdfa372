//! Reading plans: a task's `depends_on` and `done_when`, a task, a plan document (already
//! JSON, a plan file, or a planner model's output cut the way Forum's `ask_json` cuts it).

use std::collections::BTreeSet;

use serde_json::Value;

use super::python::{py_repr, py_str, py_strip, type_name};
use super::{ParseMode, Plan, PlanError, TASK_KEYS, Task};
use crate::roster::Roster;

pub type Deps = (Vec<String>, BTreeSet<String>);

/// Reads a task's `depends_on` (forum-spec §8.2): absent or null is empty; otherwise a list
/// whose items are an id string (data edge) or an object with `id` and an optional `type`.
/// In Forum mode only `type == "order"` makes an order edge and any other type is data; in
/// strict mode the type must be `data` or `order`.
pub fn parse_deps(
    value: Option<&Value>,
    task_id: &str,
    mode: ParseMode,
) -> Result<Deps, PlanError> {
    let bad = |message: String| PlanError::BadTask {
        at: py_repr(task_id),
        message,
    };
    let items = match value {
        None | Some(Value::Null) => return Ok((Vec::new(), BTreeSet::new())),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(bad(format!(
                "\"depends_on\" must be a list, found {}",
                type_name(other)
            )));
        }
    };
    let mut ids = Vec::with_capacity(items.len());
    let mut order = BTreeSet::new();
    for (i, item) in items.iter().enumerate() {
        match item {
            Value::String(s) => ids.push(s.clone()),
            Value::Object(m) => {
                let id = match m.get("id") {
                    Some(v) => py_str(v).ok_or_else(|| {
                        bad(format!(
                            "\"depends_on\" item {} has an \"id\" that is {}",
                            i + 1,
                            type_name(v)
                        ))
                    })?,
                    None => {
                        return Err(bad(format!(
                            "\"depends_on\" item {} is an object without \"id\"",
                            i + 1
                        )));
                    }
                };
                let is_order = match m.get("type") {
                    Some(Value::String(t)) if t == "order" => true,
                    None => false,
                    Some(Value::String(t)) if t == "data" => false,
                    Some(t) => {
                        if mode == ParseMode::Strict {
                            return Err(PlanError::UnknownEdgeType {
                                task: task_id.to_string(),
                                dep: id,
                                kind: py_str(t).unwrap_or_else(|| t.to_string()),
                            });
                        }
                        false
                    }
                };
                if is_order {
                    order.insert(id.clone());
                }
                ids.push(id);
            }
            other => {
                return Err(bad(format!(
                    "\"depends_on\" item {} must be a task id or an object with \"id\", found {}",
                    i + 1,
                    type_name(other)
                )));
            }
        }
    }
    Ok((ids, order))
}

/// Reads `done_when` (forum-spec §8.2): absent, null or `""` is none; a string is one stripped
/// criterion (dropped when blank); a list gives each item stringified and stripped, blanks
/// dropped. Anything else is an error.
pub fn parse_done_when(value: Option<&Value>, task_id: &str) -> Result<Vec<String>, PlanError> {
    let bad = |message: String| PlanError::BadTask {
        at: py_repr(task_id),
        message,
    };
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => {
            let s = py_strip(s);
            Ok(if s.is_empty() {
                Vec::new()
            } else {
                vec![s.to_string()]
            })
        }
        Some(Value::Array(items)) => {
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let text = py_str(item).ok_or_else(|| {
                    bad(format!(
                        "\"done_when\" item {} must be text, found {}",
                        i + 1,
                        type_name(item)
                    ))
                })?;
                let text = py_strip(&text);
                if !text.is_empty() {
                    out.push(text.to_string());
                }
            }
            Ok(out)
        }
        Some(other) => Err(bad(format!(
            "\"done_when\" must be text or a list of text, found {}",
            type_name(other)
        ))),
    }
}

/// Reads one task object. `index` is its 0-based position, for messages.
pub fn parse_task(index: usize, value: &Value, mode: ParseMode) -> Result<Task, PlanError> {
    let pos = format!("#{}", index + 1);
    let Value::Object(m) = value else {
        return Err(PlanError::BadTask {
            at: pos,
            message: format!("must be an object, found {}", type_name(value)),
        });
    };
    let id = match m.get("id") {
        None => {
            return Err(PlanError::BadTask {
                at: pos,
                message: "has no \"id\"".into(),
            });
        }
        Some(Value::Null) if mode == ParseMode::Strict => {
            return Err(PlanError::BadTask {
                at: pos,
                message: "has a null \"id\"".into(),
            });
        }
        Some(v) => py_str(v).ok_or_else(|| PlanError::BadTask {
            at: pos.clone(),
            message: format!("\"id\" must be text, found {}", type_name(v)),
        })?,
    };
    if mode == ParseMode::Strict && py_strip(&id).is_empty() {
        return Err(PlanError::BadTask {
            at: pos,
            message: "has an empty \"id\"".into(),
        });
    }
    let at = py_repr(&id);
    if mode == ParseMode::Strict
        && let Some(k) = m.keys().find(|k| !TASK_KEYS.contains(&k.as_str()))
    {
        return Err(PlanError::BadTask {
            at,
            message: format!("unknown field {k:?} (expected: {})", TASK_KEYS.join(", ")),
        });
    }
    let text_field = |field: &str| -> Result<String, PlanError> {
        match m.get(field) {
            None => Err(PlanError::BadTask {
                at: at.clone(),
                message: format!("has no {field:?}"),
            }),
            Some(Value::Null) if mode == ParseMode::Strict => Err(PlanError::BadTask {
                at: at.clone(),
                message: format!("{field:?} is null"),
            }),
            Some(v) => py_str(v).ok_or_else(|| PlanError::BadTask {
                at: at.clone(),
                message: format!("{field:?} must be text, found {}", type_name(v)),
            }),
        }
    };
    let agent = text_field("agent")?;
    let instruction = text_field("instruction")?;
    let (depends_on, order_deps) = parse_deps(m.get("depends_on"), &id, mode)?;
    let done_when = parse_done_when(m.get("done_when"), &id)?;
    Ok(Task {
        id,
        agent,
        instruction,
        depends_on,
        order_deps,
        done_when,
    })
}

impl Plan {
    /// Reads a plan document (`{"tasks": [...]}`) that is already JSON. With a roster, every
    /// task's agent must be one of its lanes.
    pub(crate) fn from_json(
        doc: &Value,
        roster: Option<&Roster>,
        mode: ParseMode,
    ) -> Result<Plan, PlanError> {
        let Value::Object(m) = doc else {
            return Err(PlanError::Shape(format!(
                "a plan must be a JSON object with a \"tasks\" list, found {}",
                type_name(doc)
            )));
        };
        let tasks = match m.get("tasks") {
            Some(Value::Array(items)) => items,
            Some(other) => {
                return Err(PlanError::Shape(format!(
                    "\"tasks\" must be a list, found {}",
                    type_name(other)
                )));
            }
            None => {
                return Err(PlanError::Shape(
                    "a plan must have a \"tasks\" list".to_string(),
                ));
            }
        };
        let tasks = tasks
            .iter()
            .enumerate()
            .map(|(i, t)| parse_task(i, t, mode))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(roster) = roster {
            for t in &tasks {
                if roster.get(&t.agent).is_none() {
                    let mut known: Vec<String> =
                        roster.names().into_iter().map(str::to_string).collect();
                    known.sort();
                    return Err(PlanError::UnknownAgent {
                        task: t.id.clone(),
                        agent: t.agent.clone(),
                        known,
                    });
                }
            }
        }
        Ok(Plan { tasks })
    }

    /// Reads a plan file: the whole text must be one JSON document. Strict mode.
    pub fn from_json_text(text: &str, roster: Option<&Roster>) -> Result<Plan, PlanError> {
        let doc: Value = serde_json::from_str(text).map_err(|e| PlanError::NotJson {
            line: e.line(),
            column: e.column(),
            message: json_error_message(&e),
        })?;
        Plan::from_json(&doc, roster, ParseMode::Strict)
    }

    /// Reads a planner model's output the way Forum's `ask_json` does: the text from the first
    /// `{` to the last `}` is parsed as JSON.
    pub(crate) fn from_model_output(
        output: &str,
        roster: Option<&Roster>,
        mode: ParseMode,
    ) -> Result<Plan, PlanError> {
        let span = extract_json_object(output)?;
        let doc: Value = serde_json::from_str(span).map_err(|e| PlanError::NotJson {
            line: e.line(),
            column: e.column(),
            message: json_error_message(&e),
        })?;
        Plan::from_json(&doc, roster, mode)
    }
}

/// serde_json's message without its trailing " at line X column Y".
fn json_error_message(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(p) => s[..p].to_string(),
        None => s,
    }
}

/// Forum's `ask_json` cut: the text from the first `{` to the last `}` inclusive.
pub fn extract_json_object(output: &str) -> Result<&str, PlanError> {
    match (output.find('{'), output.rfind('}')) {
        (Some(a), Some(b)) if a < b => Ok(&output[a..=b]),
        _ => Err(PlanError::NoJsonObject),
    }
}
