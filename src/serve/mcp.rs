//! MCP on stdio: line-delimited JSON-RPC 2.0, written by hand over the [`Dispatcher`].
//!
//! Why not the official SDK (rmcp): a tools-only server needs five methods, the SDK pulls in
//! about a hundred packages (schemars, macros) that take minutes to build on two cores, and it
//! changes its public types often. Here every tool is a row of [`TOOLS`] naming a dispatcher
//! route, and its result is that route's HTTP body, so MCP cannot drift from HTTP.
//!
//! Methods: `initialize`, `ping`, `tools/list`, `tools/call`; notifications (no `id`) get no
//! reply. Errors: −32700 (not JSON, not UTF-8), −32600 (not a JSON object, no method, wrong
//! `jsonrpc`, a line over [`MAX_LINE`]), −32601 (unknown method), −32602 (unknown tool, bad
//! params). A bad line never ends the server (Forum's does, forum-spec §23.2); end of input
//! does. Tool failures are results with `isError: true` and the dispatcher's
//! `{"error": "..."}` as text. Messages are handled one at a time, in order. Only protocol goes
//! to stdout; the caller sends logs to stderr.

use std::io::{BufRead, Write};

use serde_json::{Map, Value as J, json};

use super::dispatch::{Dispatcher, Reply};
use crate::ledger::canonical;

/// The protocol revisions this server speaks, newest first; a client asking for another gets
/// the newest.
pub const PROTOCOL_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Longest accepted message line, in bytes (a 1 MiB body plus its JSON-RPC envelope, with room).
pub const MAX_LINE: usize = 4 * 1024 * 1024;

/// How a tool reaches the dispatcher.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// `GET path`; the tool takes no arguments.
    Get(&'static str),
    /// `GET prefix<seq>`; the tool takes `{seq}`.
    GetSeq(&'static str),
    /// `POST path` with the arguments as the body.
    Post(&'static str),
}

/// One tool: its name, the other names it answers to, its route, description and argument
/// properties (`(name, JSON type, description)`, then the required names).
pub struct Tool {
    /// The name `tools/list` shows.
    pub name: &'static str,
    /// Other names `tools/call` accepts (Forum's spellings).
    pub aliases: &'static [&'static str],
    /// The dispatcher route it calls.
    pub target: Target,
    /// What it does, for the model choosing tools.
    pub description: &'static str,
    /// Its arguments: `(name, JSON type, description)`.
    pub properties: &'static [(&'static str, &'static str, &'static str)],
    /// The arguments it cannot do without.
    pub required: &'static [&'static str],
}

const BUDGETS: [(&str, &str, &str); 4] = [
    (
        "context_token_budget",
        "integer",
        "Run-wide cap on admitted context tokens.",
    ),
    (
        "request_context_token_budget",
        "integer",
        "Cap on request-level context tokens.",
    ),
    (
        "task_context_token_budget",
        "integer",
        "Cap on each task's context tokens.",
    ),
    (
        "upstream_token_budget",
        "integer",
        "Cap on each upstream output injected into a prompt.",
    ),
];

const SUBMIT_PROPS: &[(&str, &str, &str)] = &[
    ("request", "string", "The request to run."),
    (
        "delivery_profile",
        "string",
        "operator, engineer, researcher or executive (default: the route frame's).",
    ),
    (
        "checkpoint_each_wave",
        "boolean",
        "Witness a checkpoint after each wave.",
    ),
    BUDGETS[0],
    BUDGETS[1],
    BUDGETS[2],
    BUDGETS[3],
    (
        "max_model_calls",
        "integer",
        "Stop once this many model calls have started.",
    ),
    (
        "max_seconds",
        "number",
        "Stop after this many seconds (capped by the server).",
    ),
    (
        "gate_waves",
        "array",
        "Waves (0-based) that wait for a human decision.",
    ),
    (
        "use_capsule_context",
        "boolean",
        "Give the planner the ledger's capsule as request context.",
    ),
    (
        "judge_intent",
        "boolean",
        "Ask the orchestrator whether a flagged answer drifted from the request.",
    ),
    (
        "revise",
        "boolean",
        "Ask for a tighter answer when the delivery floor flags it.",
    ),
];

const GATE_KEY: [(&str, &str, &str); 3] = [
    (
        "run_seq",
        "integer",
        "The run's first plan entry (GET gates lists it).",
    ),
    ("wave", "integer", "The gated wave (0-based)."),
    ("approver", "string", "Who decides."),
];

const SEQ: &[(&str, &str, &str)] = &[("seq", "integer", "The entry's seq.")];

/// Every tool. Listed under `name`; `aliases` (Forum's other spellings) are accepted too.
pub const TOOLS: &[Tool] = &[
    Tool {
        name: "submit",
        aliases: &["forum.submit"],
        target: Target::Post("/submit"),
        description: "Run a request end to end (route, plan, waves, validation, synthesis) with the server's executors; every step is witnessed in the ledger. Returns {answer, checkpoint, receipt (Forum's action receipt), git_forum_receipt (ours)}.",
        properties: SUBMIT_PROPS,
        required: &["request"],
    },
    Tool {
        name: "resume",
        aliases: &["forum.resume"],
        target: Target::Post("/resume"),
        description: "Continue an unfinished run (the latest, or run: its request seq), holding the gates it was submitted with: an undecided gate is refused. Returns what submit returns.",
        properties: &[
            ("run", "integer", "The run's request seq."),
            (
                "max_model_calls",
                "integer",
                "Stop once this many model calls have started.",
            ),
            ("max_seconds", "number", "Stop after this many seconds."),
        ],
        required: &[],
    },
    Tool {
        name: "route",
        aliases: &["forum.route"],
        target: Target::Post("/route"),
        description: "Route a request to a roster lane: the decision, every lane's score and the route frame. No model.",
        properties: &[("text", "string", "The request.")],
        required: &["text"],
    },
    Tool {
        name: "plan",
        aliases: &["forum.plan"],
        target: Target::Post("/plan"),
        description: "Plan a request with the model (nothing is written), or compile a plan document {tasks: [...]} into waves without a model.",
        properties: &[
            ("request", "string", "The request to plan."),
            ("plan", "object", "A plan document to compile instead."),
        ],
        required: &[],
    },
    Tool {
        name: "status",
        aliases: &["forum.ledger.status"],
        target: Target::Get("/status"),
        description: "The ledger's entry count and checkpoint (Merkle root).",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "verify",
        aliases: &["forum.verify"],
        target: Target::Get("/verify"),
        description: "Verify the ledger: the chain, every commit, and every body (deep).",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "checkpoint",
        aliases: &["forum.checkpoint"],
        target: Target::Get("/checkpoint"),
        description: "The current checkpoint: size and Merkle root.",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "checkpoint_record",
        aliases: &["forum.checkpoint.record"],
        target: Target::Post("/checkpoint"),
        description: "Verify the ledger, then record its checkpoint as a witness later verifies compare against.",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "ledger_get",
        aliases: &["forum.ledger.get"],
        target: Target::GetSeq("/ledger/"),
        description: "One entry's fields (no body).",
        properties: SEQ,
        required: &["seq"],
    },
    Tool {
        name: "ledger_payload",
        aliases: &["forum.ledger.payload"],
        target: Target::GetSeq("/payload/"),
        description: "One entry's body (null when it was redacted).",
        properties: SEQ,
        required: &["seq"],
    },
    Tool {
        name: "ledger_replay",
        aliases: &["forum.ledger.replay", "replay"],
        target: Target::GetSeq("/replay/"),
        description: "Entries with seq up to and including seq, a page at a time: pass the answer's next as after for the following page.",
        properties: &[
            SEQ[0],
            (
                "limit",
                "integer",
                "Entries per page (at most 1000, the default).",
            ),
            (
                "after",
                "integer",
                "Start after this seq (the previous page's next).",
            ),
        ],
        required: &["seq"],
    },
    Tool {
        name: "ledger_why",
        aliases: &["forum.ledger.why", "why"],
        target: Target::GetSeq("/why/"),
        description: "The causal chain of an entry, root first.",
        properties: SEQ,
        required: &["seq"],
    },
    Tool {
        name: "ledger_prove",
        aliases: &["forum.ledger.prove", "prove"],
        target: Target::Post("/prove"),
        description: "A self-contained proof: that entry seq is in the checkpoint, or (consistency_from M) that the checkpoint extends its first M entries. `git forum verify-proof` checks it.",
        properties: &[
            ("seq", "integer", "The entry to prove included."),
            (
                "consistency_from",
                "integer",
                "Prove the ledger extends its first M entries.",
            ),
            (
                "size",
                "integer",
                "Prove against the first N entries (default: all).",
            ),
        ],
        required: &[],
    },
    Tool {
        name: "ledger_append",
        aliases: &["forum.ledger.append", "append"],
        target: Target::Post("/append"),
        description: "Witness one entry in the ledger.",
        properties: &[
            ("actor", "string", "Who wrote it."),
            ("kind", "string", "What it is (note, request, ...)."),
            ("payload", "object", "The body: any JSON value."),
            ("causal_parent", "integer", "The seq it follows from."),
            (
                "idempotency_key",
                "string",
                "A key of your choosing (a UUID): a retry with the same key and entry answers the first seq and writes nothing.",
            ),
        ],
        required: &["actor", "kind", "payload"],
    },
    Tool {
        name: "runs",
        aliases: &["forum.runs"],
        target: Target::Get("/runs"),
        description: "The runs in the ledger and how each stands.",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "gate_list",
        aliases: &["forum.gate.list"],
        target: Target::Get("/gates"),
        description: "Gates waiting for a human decision.",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "gate_approve",
        aliases: &["forum.gate.approve"],
        target: Target::Post("/gate/approve"),
        description: "Approve a gated wave (then resume the run).",
        properties: &[
            GATE_KEY[0],
            GATE_KEY[1],
            GATE_KEY[2],
            ("note", "string", "A note."),
        ],
        required: &["run_seq", "wave", "approver"],
    },
    Tool {
        name: "gate_edit",
        aliases: &["forum.gate.edit"],
        target: Target::Post("/gate/edit"),
        description: "Approve a gated wave with rewritten instructions {task_id: instruction}.",
        properties: &[
            GATE_KEY[0],
            GATE_KEY[1],
            GATE_KEY[2],
            ("edits", "object", "New instructions by task id."),
            ("note", "string", "A note."),
        ],
        required: &["run_seq", "wave", "approver", "edits"],
    },
    Tool {
        name: "gate_reject",
        aliases: &["forum.gate.reject"],
        target: Target::Post("/gate/reject"),
        description: "Reject a gated wave: the run stops before it.",
        properties: &[
            GATE_KEY[0],
            GATE_KEY[1],
            GATE_KEY[2],
            ("reason", "string", "Why."),
        ],
        required: &["run_seq", "wave", "approver"],
    },
    Tool {
        name: "forum.runtime.inspect",
        aliases: &["runtime_inspect"],
        target: Target::Get("/runtime"),
        description: "Which executor runs each role, tier and seat on this server, and what would stop a run.",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "forum.prose.humanize",
        aliases: &["humanize"],
        target: Target::Post("/humanize"),
        description: "Clean up model prose without adding facts, and check it against a delivery profile.",
        properties: &[
            ("text", "string", "The text."),
            ("audience", "string", "Who it is for (default operator)."),
            (
                "profile",
                "string",
                "operator, engineer, researcher or executive.",
            ),
        ],
        required: &["text"],
    },
    Tool {
        name: "forum.prose.contract",
        aliases: &["prose_contract"],
        target: Target::Post("/prose/contract"),
        description: "The communication contract of a text's route frame (profile may override).",
        properties: &[
            ("text", "string", "The request text."),
            (
                "profile",
                "string",
                "operator, engineer, researcher or executive.",
            ),
        ],
        required: &["text"],
    },
    Tool {
        name: "forum.ledger.summary",
        aliases: &["ledger_summary", "summary"],
        target: Target::Get("/summary"),
        description: "The ledger's summary: entry and task counts, verdicts, quality checks, witnessed model calls per model, payload weight.",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "forum.ledger.capsule",
        aliases: &["ledger_capsule", "capsule"],
        target: Target::Get("/capsule"),
        description: "A short, bounded brief of the whole ledger (8 task results, texts cut at 240 characters), to hand a model as context.",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "forum.run.receipt",
        aliases: &["receipt"],
        target: Target::Get("/receipt"),
        description: "Forum's action receipt (project-telos.action-receipt/v1) of the latest run: request and answer references, the checkpoint, deep verification, model, budget and context figures.",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "forum.ledger.grade",
        aliases: &["grade"],
        target: Target::Get("/grade"),
        description: "The ledger's grade: the share of independent checks (verdicts, verifications, intent judgments by actors that produced no result) that passed, and PASS, FAIL or UNVERIFIABLE.",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "forum.run.room",
        aliases: &["run_room", "room"],
        target: Target::Get("/room"),
        description: "The latest run at a glance: request, route, plan, tasks with results and verdicts, answer, quality signals, next actions and a brief.",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "forum.context.preflight",
        aliases: &["context_preflight"],
        target: Target::Post("/context/preflight"),
        description: "How much request context a run would admit under a context budget, without a model and without writing anything.",
        properties: &[
            ("request", "string", "The request."),
            (
                "use_capsule_context",
                "boolean",
                "Use the ledger's capsule as the context.",
            ),
            (
                "max_items",
                "integer",
                "Capsule: the most task results (default 8).",
            ),
            (
                "max_text_chars",
                "integer",
                "Capsule: the longest text (default 240).",
            ),
            BUDGETS[0],
            BUDGETS[1],
            BUDGETS[2],
            BUDGETS[3],
        ],
        required: &["request"],
    },
    Tool {
        name: "bench",
        aliases: &["forum.bench"],
        target: Target::Post("/bench"),
        description: "Compare two sides (a ledger NAME, a fetched REMOTE/NAME, or run:SEQ of this ledger): both summaries, each metric's delta (B - A) and a diff of the final answers.",
        properties: &[("a", "string", "Side A."), ("b", "string", "Side B.")],
        required: &["a", "b"],
    },
    Tool {
        name: "sync_status",
        aliases: &["forum.sync.status"],
        target: Target::Get("/sync"),
        description: "Push/fetch status: each remote copy fetch adopted, its last verified checkpoint, and how the local ledger stands against it.",
        properties: &[],
        required: &[],
    },
];

/// The tool named `name` (or one of its aliases).
pub fn find_tool(name: &str) -> Option<&'static Tool> {
    TOOLS
        .iter()
        .find(|t| t.name == name || t.aliases.contains(&name))
}

impl Tool {
    /// The tool as `tools/list` shows it, with its input schema.
    pub fn spec(&self) -> J {
        let mut props = Map::new();
        for (name, ty, desc) in self.properties {
            props.insert(name.to_string(), json!({"type": ty, "description": desc}));
        }
        json!({
            "name": self.name,
            "description": self.description,
            "inputSchema": {
                "type": "object",
                "properties": props,
                "required": self.required,
                "additionalProperties": false,
            },
        })
    }

    /// Calls the tool's route with `args`.
    pub fn call(&self, d: &Dispatcher, args: J) -> Reply {
        self.call_raw(d, args, None)
    }

    /// Calls the tool's route with `args`; `raw`, the arguments' JSON text when there is one,
    /// is the body a POST route reads, exactly as an HTTP body.
    pub fn call_raw(&self, d: &Dispatcher, args: J, raw: Option<&str>) -> Reply {
        match self.target {
            Target::Post(path) => match raw {
                Some(text) => d.handle("POST", path, text.as_bytes()),
                None => d.call("POST", path, args),
            },
            Target::Get(path) => match &args {
                J::Object(m) if !m.is_empty() => {
                    Reply::error(400, format!("{} takes no arguments", self.name))
                }
                _ => d.call("GET", path, J::Object(Map::new())),
            },
            Target::GetSeq(prefix) => {
                let seq = args
                    .get("seq")
                    .and_then(J::as_u64)
                    .filter(|_| args.get("seq").is_some_and(|v| !v.is_f64()));
                let known: Vec<&str> = self.properties.iter().map(|(n, _, _)| *n).collect();
                let extra = args
                    .as_object()
                    .and_then(|m| m.keys().find(|k| !known.contains(&k.as_str())).cloned());
                match (seq, extra) {
                    (_, Some(k)) => Reply::error(
                        400,
                        format!("unknown field {k:?} (known fields: {})", known.join(", ")),
                    ),
                    (Some(seq), None) => {
                        // The fields besides seq go to the route (a replay page).
                        let mut rest = args.as_object().cloned().unwrap_or_default();
                        rest.remove("seq");
                        d.call("GET", &format!("{prefix}{seq}"), J::Object(rest))
                    }
                    (None, None) => Reply::error(
                        400,
                        "field \"seq\" is required and must be a non-negative integer",
                    ),
                }
            }
        }
    }
}

fn error(id: J, code: i64, message: &str) -> J {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn result(id: J, result: J) -> J {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The MCP server: one dispatcher, one message at a time.
pub struct Mcp<'d> {
    dispatcher: &'d Dispatcher,
}

impl<'d> Mcp<'d> {
    /// A server over `dispatcher`.
    pub fn new(dispatcher: &'d Dispatcher) -> Mcp<'d> {
        Mcp { dispatcher }
    }

    /// Answers one line; `None` for a notification (or a response from the client), which
    /// gets no reply.
    pub fn handle_line(&self, line: &[u8]) -> Option<J> {
        let Ok(text) = std::str::from_utf8(line) else {
            return Some(error(J::Null, -32700, "Parse error: the line is not UTF-8"));
        };
        // Read as Python's json.loads reads it, as the HTTP body is: NaN and Infinity are
        // accepted and every number keeps its exact value (see `Dispatcher::handle`).
        let parsed = match canonical::parse(text) {
            Ok(v) => v,
            Err(ours) => {
                let why = serde_json::from_str::<J>(text)
                    .err()
                    .map_or_else(|| ours.to_string(), |e| e.to_string());
                return Some(error(J::Null, -32700, &format!("Parse error: {why}")));
            }
        };
        let msg = parsed.to_serde();
        let J::Object(m) = &msg else {
            return Some(error(
                J::Null,
                -32600,
                "Invalid Request: a message must be a JSON object",
            ));
        };
        let id = match m.get("id") {
            None => None,
            Some(v @ (J::String(_) | J::Number(_) | J::Null)) => Some(v.clone()),
            Some(_) => {
                return Some(error(
                    J::Null,
                    -32600,
                    "Invalid Request: id must be a string or a number",
                ));
            }
        };
        let reply_id = id.clone().unwrap_or(J::Null);
        if m.get("jsonrpc").and_then(J::as_str) != Some("2.0") {
            return Some(error(
                reply_id,
                -32600,
                "Invalid Request: jsonrpc must be \"2.0\"",
            ));
        }
        let Some(method) = m.get("method").and_then(J::as_str) else {
            if m.contains_key("result") || m.contains_key("error") {
                return None;
            }
            return Some(error(
                reply_id,
                -32600,
                "Invalid Request: method is missing or not a string",
            ));
        };
        let params = match m.get("params") {
            None | Some(J::Null) => J::Object(Map::new()),
            Some(p @ J::Object(_)) => p.clone(),
            Some(_) => {
                return id.map(|id| error(id, -32602, "Invalid params: params must be an object"));
            }
        };
        let id = id?;
        Some(match method {
            "initialize" => {
                let asked = params.get("protocolVersion").and_then(J::as_str);
                let version = asked
                    .filter(|v| PROTOCOL_VERSIONS.contains(v))
                    .unwrap_or(PROTOCOL_VERSIONS[0]);
                result(
                    id,
                    json!({
                        "protocolVersion": version,
                        "capabilities": {"tools": {"listChanged": false}},
                        "serverInfo": {"name": "git-forum", "version": env!("CARGO_PKG_VERSION")},
                        "instructions": format!(
                            "git forum over ledger {:?}: every tool is a route of the git forum daemon; writes are witnessed in the ledger.",
                            self.dispatcher.ledger()
                        ),
                    }),
                )
            }
            "ping" => result(id, json!({})),
            "tools/list" => result(
                id,
                json!({"tools": TOOLS.iter().map(Tool::spec).collect::<Vec<_>>()}),
            ),
            "tools/call" => {
                let Some(name) = params.get("name").and_then(J::as_str) else {
                    return Some(error(id, -32602, "Invalid params: name is required"));
                };
                let Some(tool) = find_tool(name) else {
                    return Some(error(id, -32602, &format!("Unknown tool: {name}")));
                };
                let args = match params.get("arguments") {
                    None | Some(J::Null) => J::Object(Map::new()),
                    Some(a @ J::Object(_)) => a.clone(),
                    Some(_) => {
                        return Some(error(
                            id,
                            -32602,
                            "Invalid params: arguments must be an object",
                        ));
                    }
                };
                // The arguments as they were written, so an appended payload keeps NaN,
                // Infinity and every digit of its numbers, as over HTTP.
                let raw = parsed
                    .get("params")
                    .and_then(|p| p.get("arguments"))
                    .map(canonical::Value::canonical);
                let reply = tool.call_raw(self.dispatcher, args, raw.as_deref());
                let mut out = json!({
                    "content": [{"type": "text", "text": reply.body_text()}],
                    "isError": reply.status >= 400,
                });
                // structuredContent must be strict JSON: a body only its text carries exactly
                // (a NaN or an infinity) is given as text alone.
                if reply.text.is_none() {
                    out["structuredContent"] = reply.body;
                }
                result(id, out)
            }
            other => error(id, -32601, &format!("Method not found: {other}")),
        })
    }

    /// Serves until `input` ends: one reply line per request line. A write error (the client
    /// went away) ends it quietly.
    pub fn serve(&self, mut input: impl BufRead, mut output: impl Write) -> std::io::Result<()> {
        let mut line = Vec::new();
        loop {
            line.clear();
            let (more, too_long) = read_line(&mut input, &mut line, MAX_LINE)?;
            if !more && line.is_empty() {
                return Ok(());
            }
            let reply = if too_long {
                Some(error(
                    J::Null,
                    -32600,
                    &format!("Invalid Request: the message is longer than {MAX_LINE} bytes"),
                ))
            } else if line.trim_ascii().is_empty() {
                None
            } else {
                self.handle_line(line.trim_ascii())
            };
            if let Some(r) = reply {
                let mut text = r.to_string();
                text.push('\n');
                if output
                    .write_all(text.as_bytes())
                    .and_then(|_| output.flush())
                    .is_err()
                {
                    return Ok(());
                }
            }
            if !more {
                return Ok(());
            }
        }
    }
}

/// Reads one line (without its `\n`) into `buf`, keeping at most `cap` bytes and discarding
/// the rest of a longer one. Returns (whether input may go on, whether the line was cut).
fn read_line(
    input: &mut impl BufRead,
    buf: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<(bool, bool)> {
    let mut cut = false;
    loop {
        let chunk = match input.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok((false, cut));
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if !cut {
            if buf.len() + take > cap {
                cut = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        input.consume(if done { take + 1 } else { take });
        if done {
            return Ok((true, cut));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_are_unique_and_targets_are_routes() {
        let mut names: Vec<&str> = Vec::new();
        for t in TOOLS {
            names.push(t.name);
            names.extend(t.aliases);
            let (method, path) = match t.target {
                Target::Get(p) => ("GET", p.to_string()),
                Target::GetSeq(p) => ("GET", format!("{p}0")),
                Target::Post(p) => ("POST", p.to_string()),
            };
            assert!(
                super::super::dispatch::allowed_methods(&path).contains(&method),
                "{} -> {method} {path}",
                t.name
            );
            for r in t.required {
                assert!(
                    t.properties.iter().any(|(n, _, _)| n == r),
                    "{}: {r}",
                    t.name
                );
            }
        }
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "duplicate tool names");
    }

    #[test]
    fn long_lines_are_cut_and_the_next_line_still_reads() {
        let data = b"aaaaaaaaaa\nbb\ncc";
        let mut input = &data[..];
        let mut buf = Vec::new();
        assert_eq!(read_line(&mut input, &mut buf, 4).unwrap(), (true, true));
        buf.clear();
        assert_eq!(read_line(&mut input, &mut buf, 4).unwrap(), (true, false));
        assert_eq!(buf, b"bb");
        buf.clear();
        assert_eq!(read_line(&mut input, &mut buf, 4).unwrap(), (false, false));
        assert_eq!(buf, b"cc");
    }
}
