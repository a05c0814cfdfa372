//! A loopback model server that speaks the three wire protocols the pinned agent CLIs use
//! (Anthropic Messages for Claude Code, the OpenAI Responses API for Codex, chat completions for
//! aider), each streamed as server-sent events, and plays a [`Script`]: a scripted fix of one
//! file, turn by turn. The next step is decided from the request alone (how many tool results
//! the conversation already holds), so the server keeps no conversation state and any number of
//! agents may share it.
//!
//! It runs on its own thread with its own runtime, on `127.0.0.1:0`, and stops when dropped.
//! Every request is logged ([`ModelServer::requests`]); anything it does not serve gets a 404
//! with a JSON error naming what it does serve.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

/// The tokens one reply reports as its usage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
}

impl Usage {
    pub fn total(self) -> u64 {
        self.input + self.output
    }
}

/// How the scripted attempt ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The correct fix.
    Fix,
    /// An edit whose old text is not in the file: Claude Code's Edit fails, Codex's
    /// `apply_patch` fails (Codex still exits 0), and aider gets an answer it cannot parse (a
    /// fenced file with no file name before it).
    BadPatch,
    /// A write of this absolute path (outside the project) instead of the fix: Claude Code's
    /// Write tool, a shell `printf` for Codex, an answer with no file for aider. What stops it
    /// has to be the sandbox.
    WriteOutside(PathBuf),
    /// Long-lived processes instead of the fix: Claude Code (its Bash tool) and Codex
    /// (`exec_command`) run this shell command on every turn; aider's request is answered only
    /// after ten minutes (a model turn that stalls). What a halt or a deadline must stop.
    Linger(String),
    /// One shell command instead of the fix, then the answer: Claude Code's Bash tool, Codex's
    /// `exec_command`; aider gets an answer with no file.
    Shell(String),
}

/// How long a lingering chat request waits before its answer.
const STALL: std::time::Duration = std::time::Duration::from_secs(600);

/// The scripted fix: one file of the project, one line of it replaced.
#[derive(Clone, Debug)]
pub struct Script {
    /// The project's root, absolute (Claude Code's tools take absolute paths).
    pub root: PathBuf,
    /// The file the fix changes, relative to the root.
    pub file: String,
    /// The whole file after the fix (aider's "whole" edit format sends it all).
    pub after: String,
    /// The line the fix replaces, and its replacement (without newlines).
    pub old: String,
    pub new: String,
    /// The assistant's last words.
    pub answer: String,
    /// What every reply reports as its usage.
    pub usage: Usage,
    /// Turns spent before the fix (a ceiling test makes the attempt long): Claude Code reads
    /// the file once more before its edit, so 1 gives it four turns; Codex runs `cat`, so 2
    /// gives it four. aider is sent a file that does not compile, which its lint check answers
    /// with another request (up to three times), so 3 gives it four.
    pub busy_turns: u32,
    pub outcome: Outcome,
}

/// One request the server received.
#[derive(Clone, Debug)]
pub struct Logged {
    pub method: String,
    /// The path with its query (Claude Code sends `/v1/messages?beta=true`).
    pub path: String,
    pub model: Option<String>,
    pub stream: Option<bool>,
    /// A few headers, by lower-case name: user-agent, content-type, anthropic-version,
    /// anthropic-beta, and whether authorization or x-api-key was sent (`<set>`).
    pub headers: BTreeMap<String, String>,
    /// The parsed JSON body (`Null` when it was not JSON).
    pub body: Value,
    pub status: u16,
}

struct Shared {
    script: Script,
    log: Mutex<Vec<Logged>>,
    /// Called on each request before it is answered, while the agent that sent it waits.
    observe: Option<Observer>,
}

/// What [`ModelServer::start_observed`] calls on each request.
pub type Observer = Arc<dyn Fn(&str) + Send + Sync>;

/// A running server; stopped on drop.
pub struct ModelServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ModelServer {
    /// Starts a server playing `script` on `127.0.0.1:0`.
    pub fn start(script: Script) -> ModelServer {
        Self::serve(script, None)
    }

    /// [`ModelServer::start`], calling `observe` with each request's path before answering
    /// it: the agent that sent it is certainly running then (a test lists its processes).
    pub fn start_observed(script: Script, observe: Observer) -> ModelServer {
        Self::serve(script, Some(observe))
    }

    fn serve(script: Script, observe: Option<Observer>) -> ModelServer {
        let shared = Arc::new(Shared {
            script,
            log: Mutex::new(Vec::new()),
            observe,
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("local addr");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = shared.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                let app = Router::new().fallback(handle).with_state(state);
                tokio::spawn(async move {
                    let _ = axum::serve(listener, app).await;
                });
                let _ = stopped.await;
            });
            // Open connections and the accept loop are dropped with the runtime.
            rt.shutdown_background();
        });
        ModelServer {
            addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT` (no `/v1`: Claude Code adds it; Codex and aider take
    /// [`ModelServer::v1`]).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn v1(&self) -> String {
        format!("{}/v1", self.url())
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Logged> {
        self.shared
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The requests to one path (query left out).
    pub fn requests_to(&self, path: &str) -> Vec<Logged> {
        self.requests()
            .into_iter()
            .filter(|r| r.path.split('?').next() == Some(path))
            .collect()
    }

    /// One line per request (method, path, model, stream, status), for a failing test's message.
    pub fn summary(&self) -> String {
        self.requests()
            .iter()
            .map(|r| {
                format!(
                    "{} {} model={:?} stream={:?} -> {}",
                    r.method, r.path, r.model, r.stream, r.status
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn handle(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let method = req.method().to_string();
    let path = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.uri().path().to_string(), |p| p.as_str().to_string());
    let headers = logged_headers(req.headers());
    let bytes = axum::body::to_bytes(req.into_body(), 64 << 20)
        .await
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .map(str::to_string);
    let stream = body.get("stream").and_then(Value::as_bool);
    let bare = path.split('?').next().unwrap_or("").to_string();
    if let Some(observe) = &shared.observe {
        observe(&path);
    }
    let script = &shared.script;
    let (status, response) = match (method.as_str(), bare.as_str()) {
        ("POST", "/v1/messages") => (200, anthropic(script, &body)),
        ("POST", "/v1/responses") => (200, responses(script, &body)),
        ("POST", "/v1/chat/completions") => (200, chat(script, &body)),
        _ => (404, not_found(&method, &path)),
    };
    shared
        .log
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Logged {
            method,
            path,
            model,
            stream,
            headers,
            body,
            status,
        });
    if let (Outcome::Linger(_), "/v1/chat/completions") = (&script.outcome, bare.as_str()) {
        tokio::time::sleep(STALL).await;
    }
    response
}

fn logged_headers(h: &HeaderMap) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for name in [
        "user-agent",
        "content-type",
        "anthropic-version",
        "anthropic-beta",
        "openai-beta",
    ] {
        if let Some(v) = h.get(name).and_then(|v| v.to_str().ok()) {
            out.insert(name.to_string(), v.to_string());
        }
    }
    for secret in ["authorization", "x-api-key"] {
        if h.contains_key(secret) {
            out.insert(secret.to_string(), "<set>".to_string());
        }
    }
    out
}

fn not_found(method: &str, path: &str) -> Response {
    let msg = format!(
        "the loopback model serves POST /v1/messages, POST /v1/responses and POST \
         /v1/chat/completions, not {method} {path}"
    );
    let body = json!({"error": {"type": "not_found_error", "message": msg}});
    reply(StatusCode::NOT_FOUND, "application/json", body.to_string())
}

fn reply(status: StatusCode, content_type: &str, body: String) -> Response {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, content_type)
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from(body))
        .expect("response")
}

/// Server-sent events: `event: NAME` and `data: JSON` for each (no event line when the name is
/// empty, as chat completions sends them).
fn sse(events: &[(&str, Value)]) -> Response {
    reply(StatusCode::OK, "text/event-stream", sse_text(events))
}

fn sse_text(events: &[(&str, Value)]) -> String {
    let mut text = String::new();
    for (name, data) in events {
        if !name.is_empty() {
            text.push_str(&format!("event: {name}\n"));
        }
        text.push_str(&format!("data: {data}\n\n"));
    }
    text
}

/// One step of a scripted turn.
enum Step {
    /// A tool call: the tool's name in that CLI, and its input.
    Tool(&'static str, Value),
    /// The final answer.
    Text(String),
}

/// The unified patch `apply_patch` takes, replacing the script's line.
fn patch(script: &Script, old: &str) -> String {
    format!(
        "*** Begin Patch\n*** Update File: {}\n@@\n-{}\n+{}\n*** End Patch",
        script.file, old, script.new
    )
}

/// The text of a line the file does not hold (for [`Outcome::BadPatch`]).
fn missing_line(script: &Script) -> String {
    format!("{}  # a line that is not there", script.old)
}

/// Claude Code's turn number `done` (tool results so far): the busy reads, a read, the edit,
/// the answer.
fn claude_step(script: &Script, done: u32) -> Step {
    let file = script.root.join(&script.file).display().to_string();
    if done <= script.busy_turns {
        return Step::Tool("Read", json!({"file_path": file}));
    }
    if done == script.busy_turns + 1 {
        return match &script.outcome {
            Outcome::Fix => Step::Tool(
                "Edit",
                json!({"file_path": file, "old_string": script.old, "new_string": script.new}),
            ),
            Outcome::BadPatch => Step::Tool(
                "Edit",
                json!({"file_path": file, "old_string": missing_line(script),
                       "new_string": script.new}),
            ),
            Outcome::WriteOutside(p) => Step::Tool(
                "Write",
                json!({"file_path": p.display().to_string(), "content": "written from inside\n"}),
            ),
            Outcome::Linger(cmd) => linger_bash(cmd),
            Outcome::Shell(cmd) => Step::Tool(
                "Bash",
                json!({"command": cmd, "description": "Run a command"}),
            ),
        };
    }
    if let Outcome::Linger(cmd) = &script.outcome {
        return linger_bash(cmd);
    }
    Step::Text(script.answer.clone())
}

/// Claude Code's Bash tool running `cmd` for as long as the tool allows (ten minutes).
fn linger_bash(cmd: &str) -> Step {
    Step::Tool(
        "Bash",
        json!({"command": cmd, "description": "Run the project's helper", "timeout": 600000}),
    )
}

/// The working directory Claude Code names in its system prompt (`Working directory: PATH`).
fn working_dir(body: &Value) -> Option<PathBuf> {
    let text = body["system"].to_string();
    let at = text.find("Working directory: ")? + "Working directory: ".len();
    let rest = &text[at..];
    let end = rest
        .find(|c: char| c == '\\' || c == '"' || c == '<' || c.is_whitespace())
        .unwrap_or(rest.len());
    Some(PathBuf::from(&rest[..end]))
}

/// Anthropic Messages (`POST /v1/messages`), streamed or not.
fn anthropic(script: &Script, body: &Value) -> Response {
    let model = body["model"].as_str().unwrap_or("loopback").to_string();
    let has_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    let done = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .count() as u32;
    // A request without tools is one of the CLI's side questions (a title, a summary): a plain
    // answer.
    // A script without a root (a run under git forum, whose worktree is made on the fly) edits
    // in the working directory Claude Code tells its model about.
    let rooted;
    let script = if script.root.as_os_str().is_empty() {
        rooted = Script {
            root: working_dir(body).unwrap_or_default(),
            ..script.clone()
        };
        &rooted
    } else {
        script
    };
    let step = if has_tools {
        claude_step(script, done)
    } else {
        Step::Text(script.answer.clone())
    };
    let u = script.usage;
    let (content, stop) = match &step {
        Step::Text(t) => (vec![json!({"type": "text", "text": t})], "end_turn"),
        Step::Tool(name, input) => (
            vec![
                json!({"type": "text", "text": format!("Using {name}.")}),
                json!({"type": "tool_use", "id": format!("toolu_{done:04}"), "name": name,
                       "input": input}),
            ],
            "tool_use",
        ),
    };
    let id = format!("msg_{done:04}");
    if body["stream"] != true {
        let msg = json!({"id": id, "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": u.input, "output_tokens": u.output}});
        return reply(StatusCode::OK, "application/json", msg.to_string());
    }
    let mut ev = vec![(
        "message_start",
        json!({"type": "message_start", "message": {"id": id, "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": u.input, "output_tokens": 1,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}}),
    )];
    for (i, block) in content.iter().enumerate() {
        ev.extend(anthropic_block(i, block));
    }
    ev.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
               "usage": {"output_tokens": u.output}}),
    ));
    ev.push(("message_stop", json!({"type": "message_stop"})));
    sse(&ev)
}

/// One content block as start, deltas (the text, or the tool input's JSON in two pieces) and
/// stop.
fn anthropic_block(i: usize, block: &Value) -> Vec<(&'static str, Value)> {
    let mut ev = Vec::new();
    let (start, deltas) = if block["type"] == "text" {
        let t = block["text"].as_str().unwrap_or("");
        (
            json!({"type": "text", "text": ""}),
            vec![json!({"type": "text_delta", "text": t})],
        )
    } else {
        let input = block["input"].to_string();
        let (a, b) = input.split_at(input.len() / 2);
        (
            json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
            vec![
                json!({"type": "input_json_delta", "partial_json": a}),
                json!({"type": "input_json_delta", "partial_json": b}),
            ],
        )
    };
    ev.push((
        "content_block_start",
        json!({"type": "content_block_start", "index": i, "content_block": start}),
    ));
    for d in deltas {
        ev.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": i, "delta": d}),
        ));
    }
    ev.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": i}),
    ));
    ev
}

/// Codex's turn number `done` (function results so far): the busy reads, the patch, the
/// answer, as shell commands.
fn codex_step(script: &Script, done: u32) -> Option<String> {
    if let Outcome::Linger(cmd) = &script.outcome {
        return Some(cmd.clone());
    }
    if done < script.busy_turns {
        return Some(format!("cat {}", script.file));
    }
    if done > script.busy_turns {
        return None;
    }
    Some(match &script.outcome {
        Outcome::Fix => format!("apply_patch <<'EOF'\n{}\nEOF\n", patch(script, &script.old)),
        Outcome::BadPatch => format!(
            "apply_patch <<'EOF'\n{}\nEOF\n",
            patch(script, &missing_line(script))
        ),
        Outcome::WriteOutside(p) => {
            format!("printf 'written from inside\\n' > '{}'", p.display())
        }
        Outcome::Linger(cmd) | Outcome::Shell(cmd) => cmd.clone(),
    })
}

/// The arguments of a shell call in whichever shell tool the request offers: `exec_command`
/// (what Codex offers an unknown model) takes `cmd`, the older `shell` takes an argv.
fn shell_call(body: &Value, cmd: &str) -> (String, Value) {
    let offered: Vec<&str> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    if offered.contains(&"exec_command") || !offered.contains(&"shell") {
        ("exec_command".into(), json!({"cmd": cmd}))
    } else {
        ("shell".into(), json!({"command": ["bash", "-lc", cmd]}))
    }
}

/// The OpenAI Responses API (`POST /v1/responses`), streamed.
fn responses(script: &Script, body: &Value) -> Response {
    let model = body["model"].as_str().unwrap_or("loopback").to_string();
    let done = body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["type"] == "function_call_output")
        .count() as u32;
    let has_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    let step = codex_step(script, done).filter(|_| has_tools);
    let rid = format!("resp_{done:04}");
    let item = match step {
        Some(cmd) => {
            let (name, args) = shell_call(body, &cmd);
            json!({"type": "function_call", "id": format!("fc_{done:04}"),
                   "call_id": format!("call_{done:04}"), "name": name,
                   "arguments": args.to_string(), "status": "completed"})
        }
        None => json!({"type": "message", "id": format!("msg_{done:04}"), "role": "assistant",
                       "status": "completed", "content": [{"type": "output_text",
                       "text": script.answer, "annotations": []}]}),
    };
    let u = script.usage;
    let usage = json!({"input_tokens": u.input, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": u.output, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u.total()});
    let mut added = item.clone();
    if item["type"] == "message" {
        added["content"] = json!([]);
        added["status"] = json!("in_progress");
    }
    let mut ev = vec![
        (
            "response.created",
            json!({"type": "response.created", "response": {"id": rid, "object": "response",
                   "model": model, "status": "in_progress", "output": []}}),
        ),
        (
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": 0, "item": added}),
        ),
    ];
    if item["type"] == "message" {
        ev.push((
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "item_id": item["id"],
                   "output_index": 0, "content_index": 0, "delta": script.answer}),
        ));
    }
    ev.push((
        "response.output_item.done",
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
    ));
    ev.push((
        "response.completed",
        json!({"type": "response.completed", "response": {"id": rid, "object": "response",
               "model": model, "status": "completed", "output": [item], "usage": usage}}),
    ));
    sse(&ev)
}

/// What marks a busy reply to aider: the comment on the line that does not compile.
const AIDER_BUSY: &str = "loopback: not finished";

/// The busy replies to aider already in `body`'s conversation (aider sends the whole chat, its
/// lint report after each of them).
fn aider_turn(body: &Value) -> u32 {
    let busy = |m: &&Value| {
        m["role"] == "assistant"
            && m["content"]
                .as_str()
                .is_some_and(|c| c.contains(AIDER_BUSY))
    };
    body["messages"]
        .as_array()
        .map_or(0, |ms| ms.iter().filter(busy).count() as u32)
}

/// aider's answer in its "whole" edit format: the file's name, then a fenced block with the
/// whole new file; with no file when the script does not fix. A busy turn sends the file with
/// its fixed line left unfinished (`a + b +`), which aider's lint check reports back.
fn aider_text(script: &Script, turn: u32) -> String {
    if script.outcome == Outcome::Fix && turn < script.busy_turns {
        let unfinished = format!("{} +  # {AIDER_BUSY}", script.new);
        let file = script.after.replace(&script.new, &unfinished);
        return format!("{}\n```\n{file}```\n\nNot done yet.\n", script.file);
    }
    match script.outcome {
        Outcome::Fix => format!(
            "{}\n```\n{}```\n\n{}\n",
            script.file, script.after, script.answer
        ),
        // A fenced file with no file name before it: aider cannot tell which file it is.
        Outcome::BadPatch => format!("```\n{}```\n\n{}\n", script.after, script.answer),
        _ => format!("{}\n", script.answer),
    }
}

/// Chat completions (`POST /v1/chat/completions`), streamed (usage in the last chunk) or not.
fn chat(script: &Script, body: &Value) -> Response {
    let model = body["model"].as_str().unwrap_or("loopback").to_string();
    let text = aider_text(script, aider_turn(body));
    let u = script.usage;
    let usage = json!({"prompt_tokens": u.input, "completion_tokens": u.output,
                       "total_tokens": u.total()});
    let id = "chatcmpl-loopback";
    if body["stream"] != true {
        let r = json!({"id": id, "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop"}], "usage": usage});
        return reply(StatusCode::OK, "application/json", r.to_string());
    }
    let chunk = |choices: Value, usage: Value| {
        (
            "",
            json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
                   "choices": choices, "usage": usage}),
        )
    };
    let mut ev = vec![chunk(
        json!([{"index": 0, "delta": {"role": "assistant", "content": ""},
                "finish_reason": null}]),
        Value::Null,
    )];
    // The text in a few pieces, split at line ends, as a model streams it.
    for piece in text.split_inclusive('\n').collect::<Vec<_>>().chunks(3) {
        ev.push(chunk(
            json!([{"index": 0, "delta": {"content": piece.concat()}, "finish_reason": null}]),
            Value::Null,
        ));
    }
    ev.push(chunk(
        json!([{"index": 0, "delta": {}, "finish_reason": "stop"}]),
        Value::Null,
    ));
    ev.push(chunk(json!([]), usage));
    let mut text = sse_text(&ev);
    // The stream's end marker.
    text.push_str("data: [DONE]\n\n");
    reply(StatusCode::OK, "text/event-stream", text)
}
