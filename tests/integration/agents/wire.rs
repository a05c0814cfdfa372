//! The loopback model server's three protocols, checked over a plain TCP connection (no CLI):
//! each script step, the events of each stream, the usage each reply reports, the log, and the
//! 404 for anything else.

use std::io::{Read, Write};
use std::path::PathBuf;

use serde_json::{Value, json};

use super::model::{ModelServer, Outcome, Script, Usage};

fn script(busy_turns: u32, outcome: Outcome) -> Script {
    Script {
        root: PathBuf::from("/p"),
        file: "calc.py".into(),
        after: "def add(a, b):\n    return a + b\n".into(),
        old: "    return a - b".into(),
        new: "    return a + b".into(),
        answer: "done".into(),
        usage: Usage {
            input: 2000,
            output: 500,
        },
        busy_turns,
        outcome,
    }
}

/// POSTs `body` to `path` with HTTP/1.1; the status and the response body.
fn post(server: &ModelServer, method: &str, path: &str, body: &Value) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", server.port())).expect("connect");
    let b = body.to_string();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         x-api-key: k\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{b}",
        b.len()
    );
    s.write_all(req.as_bytes()).expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    let status = out[9..12].parse().expect("status");
    let body = out.split_once("\r\n\r\n").map_or("", |x| x.1).to_string();
    (status, body)
}

/// The `data:` payloads of an event stream (chunked transfer framing lines are not JSON and
/// drop out).
fn events(sse: &str) -> Vec<Value> {
    sse.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

fn messages_with(results: usize) -> Value {
    let mut msgs = vec![json!({"role": "user", "content": "fix it"})];
    for i in 0..results {
        msgs.push(json!({"role": "assistant", "content": [{"type": "tool_use",
            "id": format!("t{i}"), "name": "Read", "input": {}}]}));
        msgs.push(json!({"role": "user", "content": [{"type": "tool_result",
            "tool_use_id": format!("t{i}"), "content": "x"}]}));
    }
    json!({"model": "m", "stream": true, "tools": [{"name": "Read"}], "messages": msgs})
}

/// The tool a Messages stream calls and its input (reassembled from its JSON deltas), or the
/// text it answers.
fn anthropic_turn(sse: &str) -> (Option<String>, Value, String) {
    let ev = events(sse);
    let tool = ev
        .iter()
        .find(|e| e["content_block"]["type"] == "tool_use")
        .map(|e| {
            e["content_block"]["name"]
                .as_str()
                .unwrap_or("")
                .to_string()
        });
    let partial: String = ev
        .iter()
        .filter_map(|e| e["delta"]["partial_json"].as_str())
        .collect();
    let text: String = ev
        .iter()
        .filter_map(|e| e["delta"]["text"].as_str())
        .collect();
    let input = serde_json::from_str(&partial).unwrap_or(Value::Null);
    (tool, input, text)
}

#[test]
fn the_messages_stream_reads_then_edits_then_answers_after_its_busy_turns() {
    let server = ModelServer::start(script(2, Outcome::Fix));
    let mut tools = Vec::new();
    for results in 0..5 {
        let (status, body) = post(
            &server,
            "POST",
            "/v1/messages?beta=true",
            &messages_with(results),
        );
        assert_eq!(status, 200, "{body}");
        let ev = events(&body);
        let kinds: Vec<&str> = ev.iter().filter_map(|e| e["type"].as_str()).collect();
        assert_eq!(kinds.first(), Some(&"message_start"), "{kinds:?}");
        assert_eq!(kinds.last(), Some(&"message_stop"), "{kinds:?}");
        let delta = ev
            .iter()
            .find(|e| e["type"] == "message_delta")
            .expect("delta");
        assert_eq!(delta["usage"]["output_tokens"], 500);
        assert_eq!(ev[0]["message"]["usage"]["input_tokens"], 2000);
        let (tool, input, text) = anthropic_turn(&body);
        if tool.as_deref() == Some("Edit") {
            assert_eq!(input["file_path"], "/p/calc.py");
            assert_eq!(input["old_string"], "    return a - b");
            assert_eq!(input["new_string"], "    return a + b");
        }
        if tool.is_none() {
            assert_eq!(text, "done");
            assert_eq!(delta["delta"]["stop_reason"], "end_turn");
        }
        tools.push(tool.unwrap_or_else(|| "answer".into()));
    }
    // Two busy reads, the read the Edit tool needs, the edit, the answer.
    assert_eq!(tools, ["Read", "Read", "Read", "Edit", "answer"]);
    let log = server.requests();
    assert_eq!(log.len(), 5);
    assert_eq!(log[0].path, "/v1/messages?beta=true");
    assert_eq!(log[0].model.as_deref(), Some("m"));
    assert_eq!(log[0].stream, Some(true));
    assert_eq!(log[0].headers["x-api-key"], "<set>");
}

#[test]
fn a_bad_patch_edits_a_line_that_is_not_there_and_write_outside_writes_its_path() {
    let server = ModelServer::start(script(0, Outcome::BadPatch));
    let (_, body) = post(&server, "POST", "/v1/messages", &messages_with(1));
    let (tool, input, _) = anthropic_turn(&body);
    assert_eq!(tool.as_deref(), Some("Edit"));
    assert_ne!(input["old_string"], "    return a - b");
    let outside = ModelServer::start(script(0, Outcome::WriteOutside("/elsewhere/x".into())));
    let (_, body) = post(&outside, "POST", "/v1/messages", &messages_with(1));
    let (tool, input, _) = anthropic_turn(&body);
    assert_eq!(tool.as_deref(), Some("Write"));
    assert_eq!(input["file_path"], "/elsewhere/x");
}

#[test]
fn the_responses_stream_runs_the_patch_through_exec_command_then_answers() {
    let server = ModelServer::start(script(0, Outcome::Fix));
    let tools = json!([{"type": "function", "name": "exec_command"}]);
    let first = json!({"model": "c", "stream": true, "tools": tools,
                       "input": [{"type": "message", "role": "user", "content": []}]});
    let (status, body) = post(&server, "POST", "/v1/responses", &first);
    assert_eq!(status, 200, "{body}");
    let ev = events(&body);
    let kinds: Vec<&str> = ev.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.output_item.added",
            "response.output_item.done",
            "response.completed"
        ]
    );
    let item = &ev[2]["item"];
    assert_eq!(item["name"], "exec_command");
    let args: Value = serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap();
    let cmd = args["cmd"].as_str().unwrap();
    assert!(cmd.starts_with("apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: calc.py\n"));
    assert!(cmd.contains("\n-    return a - b\n+    return a + b\n*** End Patch\nEOF"));
    assert_eq!(ev[3]["response"]["usage"]["total_tokens"], 2500);
    let mut second = first.clone();
    second["input"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "function_call_output", "call_id": "call_0000", "output": "ok"}));
    let (_, body) = post(&server, "POST", "/v1/responses", &second);
    let ev = events(&body);
    let delta = ev
        .iter()
        .find(|e| e["type"] == "response.output_text.delta");
    assert_eq!(delta.expect("text")["delta"], "done");
    assert_eq!(
        ev.last().unwrap()["response"]["output"][0]["type"],
        "message"
    );
}

#[test]
fn the_chat_stream_carries_the_whole_file_then_usage_then_done() {
    let server = ModelServer::start(script(0, Outcome::Fix));
    let req = json!({"model": "a", "stream": true, "messages": [{"role": "user", "content": "x"}]});
    let (status, body) = post(&server, "POST", "/v1/chat/completions", &req);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("data: [DONE]"), "{body}");
    let ev = events(&body);
    let text: String = ev
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(
        text,
        "calc.py\n```\ndef add(a, b):\n    return a + b\n```\n\ndone\n"
    );
    assert_eq!(ev.last().unwrap()["usage"]["completion_tokens"], 500);
    let plain = json!({"model": "a", "messages": []});
    let (_, body) = post(&server, "POST", "/v1/chat/completions", &plain);
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["usage"]["prompt_tokens"], 2000);
}

#[test]
fn anything_else_gets_a_404_json_error_naming_what_is_served_and_is_logged() {
    let server = ModelServer::start(script(0, Outcome::Fix));
    let (status, body) = post(&server, "GET", "/v1/models", &json!({}));
    assert_eq!(status, 404);
    let v: Value = serde_json::from_str(&body).expect("json");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("POST /v1/messages") && msg.contains("not GET /v1/models"),
        "{msg}"
    );
    assert_eq!(server.requests()[0].status, 404);
    assert!(server.summary().contains("GET /v1/models"));
}
