//! Claude Code session transcripts (`~/.claude/projects/<project>/<session>.jsonl`): one JSON
//! object per line, each with a `type` (`user`, `assistant`, `system`, `summary`, …), a `uuid`,
//! the `parentUuid` it follows, the `sessionId` and a `timestamp`; user and assistant lines
//! carry the API `message` (`model`, `usage`, `content` blocks such as `text`, `tool_use` and
//! `tool_result`).
//!
//! Every line becomes an entry (none is dropped), its parent the line its `parentUuid` names:
//!
//! | line | actor | kind |
//! |---|---|---|
//! | assistant with a `tool_use` block | `assistant` | `tool_use` |
//! | other assistant | `assistant` | `assistant` |
//! | user with a `tool_result` block | `tool` | `tool_result` |
//! | other user | `user` | `user` |
//! | any other type T | T | T |
//!
//! The body keeps the whole line under `event`, with `model`, `usage` and the `tools` called
//! lifted beside it. Claude Code writes one API message over several lines (a line per content
//! block, each repeating the message's `usage`), so the totals count a message's usage once
//! (by `message.id`) and each `tool_use` block once (by its `id`).

use std::collections::HashSet;

use super::{Event, Totals, TraceError, err, line_col};
use crate::ledger::canonical::{self, Value};

/// The events of a transcript, and the model use it records.
pub(crate) fn events(text: &str) -> Result<(Vec<Event>, Totals), TraceError> {
    let mut out = Vec::new();
    let mut totals = Totals::default();
    let mut messages: HashSet<String> = HashSet::new();
    let mut tool_ids: HashSet<String> = HashSet::new();
    for (n, line) in text.split('\n').enumerate() {
        let line_no = n + 1;
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        let v = line_object(line, line_no)?;
        let Some(ty) = v
            .get("type")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        else {
            return Err(err(format!(
                "line {line_no} of the Claude Code transcript has no 'type'; every line needs one (user, assistant, ...)"
            )));
        };
        let message = v.get("message");
        let blocks: &[Value] = match message.and_then(|m| m.get("content")) {
            Some(Value::Array(b)) => b,
            _ => &[],
        };
        let (actor, kind) = actor_and_kind(ty, blocks);
        let mut body: Vec<(String, Value)> = Vec::new();
        let model = message
            .and_then(|m| m.get("model"))
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty());
        if let Some(m) = model {
            body.push(("model".into(), Value::str(m)));
            totals.models.push(m.to_string());
        }
        if let Some(usage) = message_usage(message, &mut messages, &mut totals) {
            body.push(("usage".into(), usage));
        }
        let tools = tool_uses(blocks, &mut tool_ids, &mut totals);
        if !tools.is_empty() {
            body.push(("tools".into(), Value::Array(tools)));
        }
        for (from, to) in [("sessionId", "session_id"), ("timestamp", "timestamp")] {
            if let Some(x) = v.get(from) {
                body.push((to.into(), x.clone()));
            }
        }
        body.push((
            "line".into(),
            Value::Int(canonical::Int::parse(&line_no.to_string()).expect("digits")),
        ));
        let id = |k: &str| v.get(k).filter(|x| !matches!(x, Value::Null)).cloned();
        let (uuid, parent) = (id("uuid"), id("parentUuid"));
        body.push(("event".into(), v));
        out.push(Event {
            actor,
            kind,
            id: uuid,
            parent_id: parent,
            payload: Value::object(body),
        });
    }
    if out.is_empty() {
        return Err(err(
            "the Claude Code transcript has no lines; give a session's .jsonl file with at least one line",
        ));
    }
    Ok((out, totals))
}

/// Who wrote a line and what kind of event it is: a tool call or result by the blocks it
/// holds, else its `type`.
fn actor_and_kind(ty: &str, blocks: &[Value]) -> (String, String) {
    let has = |t: &str| {
        blocks
            .iter()
            .any(|b| b.get("type").and_then(Value::as_str) == Some(t))
    };
    match ty {
        "assistant" if has("tool_use") => ("assistant".to_string(), "tool_use".to_string()),
        "assistant" => ("assistant".to_string(), "assistant".to_string()),
        "user" if has("tool_result") => ("tool".to_string(), "tool_result".to_string()),
        "user" => ("user".to_string(), "user".to_string()),
        other => (other.to_string(), other.to_string()),
    }
}

/// A message's `usage` object, counted in `totals` once per message id (`messages` holds the
/// ones seen: Claude Code writes one line per content block of a message).
fn message_usage(
    message: Option<&Value>,
    messages: &mut HashSet<String>,
    totals: &mut Totals,
) -> Option<Value> {
    let usage @ Value::Object(_) = message?.get("usage")? else {
        return None;
    };
    let first = match message.and_then(|m| m.get("id")).and_then(Value::as_str) {
        Some(id) => messages.insert(id.to_string()),
        None => true,
    };
    if first {
        totals.input_tokens += tokens(usage.get("input_tokens"));
        totals.output_tokens += tokens(usage.get("output_tokens"));
    }
    Some(usage.clone())
}

/// One line of the transcript as its JSON object; `line_no` names it in errors.
fn line_object(line: &str, line_no: usize) -> Result<Value, TraceError> {
    let v = canonical::parse(line).map_err(|e| {
        let (_, col) = line_col(line, e.offset);
        err(format!(
            "line {line_no} of the Claude Code transcript is not JSON ({} at column {col}); give the session's .jsonl file as Claude Code wrote it",
            e.message
        ))
    })?;
    if !matches!(v, Value::Object(_)) {
        return Err(err(format!(
            "line {line_no} of the Claude Code transcript is not a JSON object; every line must be one"
        )));
    }
    Ok(v)
}

/// The names of a message's `tool_use` blocks; each block is counted once in `totals`, by its
/// id (`tool_ids` holds the ones seen).
fn tool_uses(blocks: &[Value], tool_ids: &mut HashSet<String>, totals: &mut Totals) -> Vec<Value> {
    let mut tools = Vec::new();
    for b in blocks {
        if b.get("type").and_then(Value::as_str) != Some("tool_use") {
            continue;
        }
        let name = b.get("name").and_then(Value::as_str).unwrap_or("");
        tools.push(Value::str(name));
        let first = match b.get("id").and_then(Value::as_str) {
            Some(id) => tool_ids.insert(id.to_string()),
            None => true,
        };
        if first {
            totals.tool_calls += 1;
            if !name.is_empty() {
                totals.tools.push(name.to_string());
            }
        }
    }
    tools
}

fn tokens(v: Option<&Value>) -> u64 {
    match v {
        Some(Value::Int(i)) => i.as_u64().unwrap_or(0),
        _ => 0,
    }
}
