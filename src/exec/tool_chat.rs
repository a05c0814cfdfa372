//! Tool calling over the chat APIs: a conversation in a shape neither API owns
//! ([`Msg`]), the [`ToolChat`] trait the OpenAI-compatible and Anthropic executors implement,
//! and the pure wire conversions for each: OpenAI `tools` / `tool_calls` / `role: "tool"`
//! messages, Anthropic `tools` / `tool_use` / `tool_result` blocks.
//!
//! What the tools do and how the loop is bounded is the run's business (`crate::run::edit_tools`);
//! this module only carries tool specs out and tool calls back.

use serde_json::{Value, json};

use super::{ExecError, Usage};

/// One tool the model may call: a name, what it does, and a JSON schema of its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) parameters: Value,
}

/// One call the model asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolUse {
    /// The id the API gave it (answers name it).
    pub(crate) id: String,
    /// The tool's name as the model wrote it.
    pub name: String,
    /// The arguments as sent (OpenAI: a JSON text; Anthropic: the `input` object as JSON).
    pub(crate) raw: String,
}

/// Why a call's arguments are not a JSON object.
#[derive(Debug, thiserror::Error)]
pub enum ArgumentsError {
    /// Valid JSON of another kind.
    #[error("the arguments are not a JSON object")]
    NotObject,
    /// Not JSON at all.
    #[error("the arguments are not valid JSON: {0}")]
    NotJson(#[source] serde_json::Error),
}

impl ToolUse {
    /// The arguments as a JSON object, or why they are not one.
    pub fn arguments(&self) -> Result<serde_json::Map<String, Value>, ArgumentsError> {
        let text = if self.raw.trim().is_empty() {
            "{}"
        } else {
            &self.raw
        };
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(_) => Err(ArgumentsError::NotObject),
            Err(e) => Err(ArgumentsError::NotJson(e)),
        }
    }
}

/// What a tool gave back, for the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The [`ToolUse::id`] it answers.
    pub id: String,
    pub content: String,
    /// Whether the call failed or was refused.
    pub is_error: bool,
}

/// One message of a tool conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Msg {
    /// The user (or git forum) speaks.
    User(String),
    /// The model's turn: its text and the calls it asked for.
    Assistant { text: String, calls: Vec<ToolUse> },
    /// The answers to the previous turn's calls.
    Results(Vec<ToolOutput>),
}

/// The model's answer to one turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub text: String,
    pub calls: Vec<ToolUse>,
    pub(crate) model: String,
    pub(crate) usage: Option<Usage>,
}

/// The turn in the body an endpoint at `url` answered, read with `parse`; `what` names the
/// part of the answer that was missing when `parse` finds no turn.
pub(crate) fn read_turn(
    body: &[u8],
    url: impl std::fmt::Display,
    what: &'static str,
    parse: impl FnOnce(&Value) -> Option<Turn>,
) -> Result<Turn, ExecError> {
    let url = url.to_string();
    let v = super::json_reply(&url, body)?;
    parse(&v).ok_or(ExecError::NoAnswer { url, what })
}

/// An executor that can hold a tool conversation.
pub trait ToolChat: Send + Sync {
    /// One turn: the system text, the conversation so far and the tools offered.
    fn turn(
        &self,
        system: &str,
        messages: &[Msg],
        tools: &[ToolSpec],
        max_tokens: u32,
    ) -> Result<Turn, ExecError>;
}

/// Whether an error says the endpoint does not take tools (a 4xx/5xx naming them), so the
/// caller falls back to a structured reply.
/// A failure given back from a record is read the same way, from the status and body it kept.
pub(crate) fn rejects_tools(e: &ExecError) -> bool {
    let (Some(status), Some(excerpt)) = (e.status(), e.raw_body()) else {
        return false;
    };
    let x = excerpt.to_ascii_lowercase();
    e.code() == "http_status"
        && matches!(status, 400 | 404 | 422 | 500 | 501)
        && (x.contains("tool") || x.contains("function"))
}

// ---- OpenAI ----

/// The `messages` and `tools` of an OpenAI-compatible chat request.
pub(crate) fn openai_body(
    model: &str,
    system: &str,
    messages: &[Msg],
    tools: &[ToolSpec],
    max_tokens: u32,
) -> Value {
    let mut out = vec![json!({"role": "system", "content": system})];
    for m in messages {
        match m {
            Msg::User(t) => out.push(json!({"role": "user", "content": t})),
            Msg::Assistant { text, calls } => {
                let mut a = json!({"role": "assistant", "content": text});
                if !calls.is_empty() {
                    a["tool_calls"] = calls
                        .iter()
                        .map(|c| {
                            json!({"id": c.id, "type": "function",
                                   "function": {"name": c.name, "arguments": c.raw}})
                        })
                        .collect();
                }
                out.push(a);
            }
            Msg::Results(rs) => {
                for r in rs {
                    out.push(json!({"role": "tool", "tool_call_id": r.id, "content": r.content}));
                }
            }
        }
    }
    let tools: Vec<Value> = tools
        .iter()
        .map(|t| {
            json!({"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters}})
        })
        .collect();
    json!({
        "model": model,
        "messages": out,
        "tools": tools,
        "temperature": 0,
        "max_tokens": max_tokens,
    })
}

/// Reads an OpenAI-compatible answer: `choices[0].message.{content, tool_calls}`.
pub(crate) fn openai_parse(v: &Value, configured: &str) -> Option<Turn> {
    let msg = v.get("choices")?.get(0)?.get("message")?;
    let text = match &msg["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    };
    let calls: Vec<ToolUse> = msg["tool_calls"]
        .as_array()
        .map(|a| {
            a.iter()
                .enumerate()
                .map(|(i, c)| ToolUse {
                    id: c["id"]
                        .as_str()
                        .map_or_else(|| format!("call_{i}"), str::to_string),
                    name: c["function"]["name"].as_str().unwrap_or("").to_string(),
                    raw: match &c["function"]["arguments"] {
                        Value::String(s) => s.clone(),
                        Value::Null => String::new(),
                        other => other.to_string(),
                    },
                })
                .collect()
        })
        .unwrap_or_default();
    if text.is_empty() && calls.is_empty() && !msg["content"].is_string() {
        return None;
    }
    Some(Turn {
        text: text.trim().to_string(),
        calls,
        model: model_of(v, configured),
        usage: v["usage"].as_object().map(|u| Usage {
            estimated: false,
            truncated: false,
            over_reservation: None,
            input_tokens: u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
            output_tokens: u
                .get("completion_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0),
        }),
    })
}

// ---- Anthropic ----

/// The body of an Anthropic Messages request with tools.
pub(crate) fn anthropic_body(
    model: &str,
    system: &str,
    messages: &[Msg],
    tools: &[ToolSpec],
    max_tokens: u32,
) -> Value {
    let mut out = Vec::new();
    for m in messages {
        match m {
            Msg::User(t) => out.push(json!({"role": "user", "content": t})),
            Msg::Assistant { text, calls } => {
                let mut blocks = Vec::new();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for c in calls {
                    let input = serde_json::from_str::<Value>(&c.raw)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({}));
                    blocks.push(
                        json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}),
                    );
                }
                if blocks.is_empty() {
                    blocks.push(json!({"type": "text", "text": "(no text)"}));
                }
                out.push(json!({"role": "assistant", "content": blocks}));
            }
            Msg::Results(rs) => {
                let blocks: Vec<Value> = rs
                    .iter()
                    .map(|r| {
                        json!({"type": "tool_result", "tool_use_id": r.id,
                               "content": r.content, "is_error": r.is_error})
                    })
                    .collect();
                out.push(json!({"role": "user", "content": blocks}));
            }
        }
    }
    let tools: Vec<Value> = tools
        .iter()
        .map(
            |t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}),
        )
        .collect();
    json!({
        "model": model,
        "max_tokens": max_tokens,
        "system": system,
        "messages": out,
        "tools": tools,
    })
}

/// Reads an Anthropic answer: its `text` and `tool_use` blocks.
pub(crate) fn anthropic_parse(v: &Value, configured: &str) -> Option<Turn> {
    let blocks = v.get("content")?.as_array()?;
    let mut text = String::new();
    let mut calls = Vec::new();
    for b in blocks {
        match b["type"].as_str() {
            Some("text") => text.push_str(b["text"].as_str().unwrap_or("")),
            Some("tool_use") => calls.push(ToolUse {
                id: b["id"].as_str().unwrap_or("").to_string(),
                name: b["name"].as_str().unwrap_or("").to_string(),
                raw: b.get("input").map_or_else(String::new, Value::to_string),
            }),
            _ => {}
        }
    }
    Some(Turn {
        text: text.trim().to_string(),
        calls,
        model: model_of(v, configured),
        usage: v["usage"].as_object().map(|u| Usage {
            estimated: false,
            truncated: false,
            over_reservation: None,
            input_tokens: u.get("input_tokens").and_then(Value::as_u64).unwrap_or(0),
            output_tokens: u.get("output_tokens").and_then(Value::as_u64).unwrap_or(0),
        }),
    })
}

fn model_of(v: &Value, configured: &str) -> String {
    v["model"]
        .as_str()
        .filter(|m| !m.trim().is_empty())
        .unwrap_or(configured)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv() -> Vec<Msg> {
        vec![
            Msg::User("fix it".into()),
            Msg::Assistant {
                text: String::new(),
                calls: vec![ToolUse {
                    id: "c1".into(),
                    name: "read_file".into(),
                    raw: r#"{"path":"a.py"}"#.into(),
                }],
            },
            Msg::Results(vec![ToolOutput {
                id: "c1".into(),
                content: "x = 1".into(),
                is_error: false,
            }]),
        ]
    }

    fn spec() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "read_file".into(),
            description: "read".into(),
            parameters: json!({"type": "object"}),
        }]
    }

    #[test]
    fn openai_round_trip() {
        let b = openai_body("m", "sys", &conv(), &spec(), 100);
        assert_eq!(b["messages"][0]["role"], "system");
        assert_eq!(
            b["messages"][2]["tool_calls"][0]["function"]["arguments"],
            r#"{"path":"a.py"}"#
        );
        assert_eq!(b["messages"][3]["role"], "tool");
        assert_eq!(b["messages"][3]["tool_call_id"], "c1");
        assert_eq!(b["tools"][0]["function"]["name"], "read_file");
        let t = openai_parse(
            &json!({"model": "real", "choices": [{"message": {"content": null, "tool_calls": [
                {"id": "x", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}]}}]}),
            "m",
        )
        .unwrap();
        assert_eq!(
            (t.model.as_str(), t.calls[0].name.as_str()),
            ("real", "list_files")
        );
        assert!(t.calls[0].arguments().unwrap().is_empty());
        assert!(openai_parse(&json!({"choices": []}), "m").is_none());
    }

    #[test]
    fn anthropic_round_trip() {
        let b = anthropic_body("m", "sys", &conv(), &spec(), 100);
        assert_eq!(b["system"], "sys");
        assert_eq!(b["messages"][1]["content"][0]["type"], "tool_use");
        assert_eq!(b["messages"][1]["content"][0]["input"]["path"], "a.py");
        assert_eq!(b["messages"][2]["content"][0]["tool_use_id"], "c1");
        assert_eq!(b["tools"][0]["input_schema"]["type"], "object");
        let t = anthropic_parse(
            &json!({"content": [{"type": "text", "text": "ok"},
                {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a"}}]}),
            "m",
        )
        .unwrap();
        assert_eq!(t.text, "ok");
        assert_eq!(t.calls[0].arguments().unwrap()["path"], "a");
    }

    #[test]
    fn bad_arguments_and_tool_rejections_are_named() {
        let u = |raw: &str| ToolUse {
            id: "i".into(),
            name: "n".into(),
            raw: raw.into(),
        };
        assert!(
            u("{oops")
                .arguments()
                .unwrap_err()
                .to_string()
                .contains("not valid JSON")
        );
        assert!(
            u("[1]")
                .arguments()
                .unwrap_err()
                .to_string()
                .contains("not a JSON object")
        );
        let e = ExecError::Status {
            url: "u".into(),
            status: 400,
            excerpt: "tools param requires --jinja flag".into(),
        };
        assert!(rejects_tools(&e));
        let e = ExecError::Status {
            url: "u".into(),
            status: 401,
            excerpt: "tools".into(),
        };
        assert!(!rejects_tools(&e));
    }
}
