//! MCP on stdio: line-delimited JSON-RPC 2.0, written by hand over the [`Dispatcher`].
//!
//! Methods: `initialize`, `server/discover`, `ping`, `tools/list`, `tools/call`; notifications
//! (no `id`) get no reply, and `notifications/cancelled` stops the request it names.
//!
//! Two eras of the protocol ([`PROTOCOL_VERSIONS`], [`MODERN_VERSIONS`]): a client of the
//! handshake era opens with `initialize`; a client of revision 2026-07-28 sends no handshake but
//! one `server/discover` (answered with the revisions, capabilities and instructions), then
//! names its revision in every request's `_meta`. The server keeps no session either way, so
//! each request is answered in its own era: a request naming 2026-07-28 gets that revision's
//! result shape (`resultType`, a list's cache hints, the server's identity in the result's
//! `_meta`); one naming a revision this server does not speak gets −32022 with the supported
//! list; one naming none is answered as the handshake era answers it. Errors: −32700 (not JSON,
//! not UTF-8), −32600 (not a JSON object, no method, wrong `jsonrpc`, an id that is not a
//! string or an integer, a line over [`MAX_LINE`]), −32601 (unknown method), −32602 (unknown
//! tool, bad params); an error whose request id could not be read carries no id. A bad line never
//! ends the server (Forum's does, forum-spec §23.2); end of input does, once every call in
//! flight is answered. Tool failures are results with `isError: true` and the dispatcher's
//! `{"error": "..."}` as text; so is a `submit` or `resume` whose run ended with any outcome
//! but success (its report's `exit.code` is not 0), its report still the structured content. Only protocol goes to stdout; the caller sends logs to stderr.
//!
//! How messages are served ([`session`]): one thread reads, tool calls run concurrently (at
//! most [`session::MAX_CALLS`] at once; more wait in a queue), and every line goes out whole
//! through one locked writer as soon as it is ready, so replies come in the order the calls
//! finish. JSON-RPC orders nothing between requests in flight: a client that needs a call's
//! effect (an append it then reads, a submit it then resumes) waits for its reply first. Writes
//! to the ledger are serialized by the dispatcher's writer. `ping` and the other methods are
//! answered at once, even while tools run, and a `notifications/cancelled` reaches a running
//! `submit` or `resume`: its commands are killed, the run writes nothing more, witnesses
//! `interrupted` (`git forum resume` continues it), and the call gets no reply, as the MCP spec
//! asks; a queued call is dropped. A call that carries `_meta.progressToken` gets
//! `notifications/progress` as its run goes ([`progress`]).
//!
//! Why not the official SDK (rmcp 3.11, measured on this tree): it would keep neither the
//! replies nor the inputs the tests pin. Its stdio transport parses each line with serde_json
//! into its own types, so it silently drops a line that is not JSON (we answer −32700), drops
//! an over-long line without a reply (we answer −32600), and cannot read the NaN and Infinity
//! that every other surface accepts in an appended payload (Python's json.loads does, and so
//! do we: `canonical::parse` keeps each number's exact text); it also refuses requests before
//! the `initialize` handshake. With `server` and `transport-io` it adds 24 packages to the
//! build (schemars and its derive, darling, rmcp-macros, chrono, futures, tokio-util, uuid,
//! among them), three of them proc-macro crates (a scratch crate of rmcp alone, 82 packages,
//! took 16 minutes to build from nothing at one job on this shared two-core machine), for a
//! table of tools that already is one row each. Every tool here is a row of [`TOOLS`] naming a dispatcher route, and its result
//! is that route's HTTP body, so MCP cannot drift from HTTP.

use serde_json::{Map, Value as J, json};

use super::dispatch::{Dispatcher, RunHooks};
use crate::ledger::canonical;

mod out;
mod progress;
pub(crate) mod session;
pub(crate) mod tools;

pub use tools::{Input, TOOLS, Target, Tool, find_tool};

/// The protocol revisions this server speaks, newest first; a client asking for another gets
/// the newest.
pub(crate) const PROTOCOL_VERSIONS: [&str; 4] =
    ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The stateless revisions this server speaks (no handshake; `server/discover` and the
/// revision in each request's `_meta`), newest first.
pub(crate) const MODERN_VERSIONS: [&str; 1] = ["2026-07-28"];

/// The `_meta` key a stateless request names its revision under.
const PROTOCOL_VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";
/// The `_meta` key of a stateless result that says which server answered.
const SERVER_INFO_META: &str = "io.modelcontextprotocol/serverInfo";
/// The error of a request naming a revision this server does not speak.
const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// Longest accepted message line, in bytes (a 1 MiB body plus its JSON-RPC envelope, with room).
pub const MAX_LINE: usize = 4 * 1024 * 1024;

/// An error reply. `id` is `Null` when the request's id could not be read: the reply then has
/// none, as the MCP schema asks (an id is a string or an integer, never null).
fn error(id: J, code: i64, message: &str) -> J {
    let mut e = json!({"jsonrpc": "2.0", "error": {"code": code, "message": message}});
    if !id.is_null() {
        e["id"] = id;
    }
    e
}

fn result(id: J, result: J) -> J {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// What one line holds, once read.
pub(crate) enum Incoming {
    /// A line answered without the dispatcher (it is not a request one can serve).
    Reply(J),
    /// Nothing to do: a response from the client, or a notification one cannot read.
    Quiet,
    /// A notification: its method and params.
    Notice { method: String, params: J },
    /// A request.
    Request(Call),
}

/// A request to answer.
pub(crate) struct Call {
    id: J,
    method: String,
    params: J,
    /// `params.arguments` as it was written (canonical text), when there is one.
    raw: Option<String>,
}

impl Call {
    /// The revision the request names in its `_meta` (a stateless client's), if any.
    fn protocol_version(&self) -> Option<&str> {
        self.params
            .get("_meta")
            .and_then(|m| m.get(PROTOCOL_VERSION_META))
            .and_then(J::as_str)
    }

    /// The `_meta.progressToken` the caller asked progress under, if any (a string or a
    /// number, as the spec allows).
    fn progress_token(&self) -> Option<J> {
        self.params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .filter(|t| t.is_string() || t.is_number())
            .cloned()
    }
}

/// The MCP server over one dispatcher.
pub struct Mcp<'d> {
    dispatcher: &'d Dispatcher,
}

impl<'d> Mcp<'d> {
    /// A server over `dispatcher`.
    pub fn new(dispatcher: &'d Dispatcher) -> Mcp<'d> {
        Mcp { dispatcher }
    }

    /// Answers one line, there and then; `None` for a notification (or a response from the
    /// client), which gets no reply.
    pub fn handle_line(&self, line: &[u8]) -> Option<J> {
        match read(line) {
            Incoming::Reply(r) => Some(r),
            Incoming::Quiet | Incoming::Notice { .. } => None,
            Incoming::Request(call) => Some(self.answer(&call, RunHooks::default())),
        }
    }

    /// Serves until `input` ends and every call in flight is answered (see [`session`]). A
    /// write error (the client went away) ends it quietly.
    pub(crate) fn serve(
        &self,
        input: impl std::io::BufRead,
        output: impl std::io::Write + Send,
    ) -> std::io::Result<()> {
        session::serve(self, input, output)
    }

    /// The reply to `call`; a submit or resume runs with `hooks`. A request that names a
    /// stateless revision gets that revision's result shape ([`modern`]).
    fn answer(&self, call: &Call, hooks: RunHooks<'_>) -> J {
        let asked = call.protocol_version();
        let known = |v: &str| MODERN_VERSIONS.contains(&v) || PROTOCOL_VERSIONS.contains(&v);
        if let Some(v) = asked.filter(|v| !known(v) || call.method == "server/discover")
            && !MODERN_VERSIONS.contains(&v)
        {
            return unsupported(call.id.clone(), v);
        }
        let reply = self.answer_in_era(call, hooks);
        if asked.is_some_and(|v| MODERN_VERSIONS.contains(&v)) || call.method == "server/discover" {
            modern(reply, &call.method)
        } else {
            reply
        }
    }

    /// What the server says about itself to a client, in either era.
    fn instructions(&self) -> String {
        format!(
            "git forum over ledger {:?}: every tool is a route of the git forum daemon; writes are witnessed in the ledger.",
            self.dispatcher.ledger()
        )
    }

    /// The reply to `call`, as the handshake era shapes it.
    fn answer_in_era(&self, call: &Call, hooks: RunHooks<'_>) -> J {
        let (id, params) = (call.id.clone(), &call.params);
        match call.method.as_str() {
            "server/discover" => result(
                id,
                json!({
                    "supportedVersions": MODERN_VERSIONS
                        .iter()
                        .chain(PROTOCOL_VERSIONS.iter())
                        .collect::<Vec<_>>(),
                    "capabilities": {"tools": {"listChanged": false}},
                    "instructions": self.instructions(),
                }),
            ),
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
                        "serverInfo": server_info(),
                        "instructions": self.instructions(),
                    }),
                )
            }
            "ping" => result(id, json!({})),
            "tools/list" => result(
                id,
                json!({"tools": TOOLS.iter().map(Tool::listing).collect::<Vec<_>>()}),
            ),
            "tools/call" => {
                let Some(name) = params.get("name").and_then(J::as_str) else {
                    return error(id, -32602, "Invalid params: name is required");
                };
                let Some(tool) = find_tool(name) else {
                    return error(id, -32602, &format!("Unknown tool: {name}"));
                };
                let args = match params.get("arguments") {
                    None | Some(J::Null) => J::Object(Map::new()),
                    Some(a @ J::Object(_)) => a.clone(),
                    Some(_) => {
                        return error(id, -32602, "Invalid params: arguments must be an object");
                    }
                };
                let reply = tool.call_hooked(self.dispatcher, args, call.raw.as_deref(), hooks);
                let mut out = json!({
                    "content": [{"type": "text", "text": reply.body_text()}],
                    "isError": reply.status >= 400 || run_did_not_succeed(name, &reply.body),
                });
                // structuredContent must be strict JSON and an object: a body only its text
                // carries exactly (a NaN or an infinity), or a list (`ledger_log`), is given as
                // text alone.
                if reply.text.is_none() && reply.body.is_object() {
                    out["structuredContent"] = reply.body;
                }
                result(id, out)
            }
            other => error(id, -32601, &format!("Method not found: {other}")),
        }
    }
}

/// Whether a run tool's report names an outcome other than success (its `exit.code` is not 0:
/// nothing delivered, partial, blocked, a ceiling...). The run itself went through, so the
/// report is the result as on every surface, but a client told `isError: false` would take
/// a run that delivered nothing for one that did.
fn run_did_not_succeed(tool: &str, body: &J) -> bool {
    matches!(tool, "submit" | "resume")
        && body
            .get("exit")
            .and_then(|e| e.get("code"))
            .and_then(J::as_u64)
            .is_some_and(|c| c != 0)
}

/// Who this server is: `{name, version}`.
fn server_info() -> J {
    json!({"name": "git-forum", "version": env!("CARGO_PKG_VERSION")})
}

/// −32022 for a request naming revision `asked`, with the revisions a stateless request may
/// name instead (a handshake-era client negotiates through `initialize`).
fn unsupported(id: J, asked: &str) -> J {
    let mut e = error(
        id,
        UNSUPPORTED_PROTOCOL_VERSION,
        &format!(
            "Unsupported protocol version: {asked} (this server speaks {} without a handshake, and {} through initialize)",
            MODERN_VERSIONS.join(", "),
            PROTOCOL_VERSIONS.join(", ")
        ),
    );
    e["error"]["data"] = json!({"supported": MODERN_VERSIONS, "requested": asked});
    e
}

/// A reply in the stateless revision's shape: every result says it is complete
/// (`resultType`) and which server gave it (`_meta`), and a cacheable one (the discovery, the
/// tool list) carries its cache hints. The list is this binary's and the same for every caller,
/// so it is public; it promises no freshness beyond the reply (`ttlMs` 0), since the server
/// behind a command may be replaced by a newer one at any time. Errors are unchanged.
fn modern(mut reply: J, method: &str) -> J {
    let Some(J::Object(r)) = reply.get_mut("result") else {
        return reply;
    };
    r.insert("resultType".into(), json!("complete"));
    let meta = r.entry("_meta").or_insert_with(|| json!({}));
    if let J::Object(m) = meta {
        m.insert(SERVER_INFO_META.into(), server_info());
    }
    if matches!(method, "server/discover" | "tools/list") {
        r.insert("ttlMs".into(), json!(0));
        r.insert("cacheScope".into(), json!("public"));
    }
    reply
}

/// Reads one line's message: what it asks, or the error it gets.
pub(crate) fn read(line: &[u8]) -> Incoming {
    let parsed = match parse_line(line) {
        Ok(v) => v,
        Err(reply) => return Incoming::Reply(reply),
    };
    let msg = parsed.to_serde();
    let J::Object(m) = &msg else {
        return Incoming::Reply(error(
            J::Null,
            -32600,
            "Invalid Request: a message must be a JSON object",
        ));
    };
    let id = match message_id(m) {
        Ok(id) => id,
        Err(reply) => return Incoming::Reply(reply),
    };
    let reply_id = id.clone().unwrap_or(J::Null);
    if m.get("jsonrpc").and_then(J::as_str) != Some("2.0") {
        return Incoming::Reply(error(
            reply_id,
            -32600,
            "Invalid Request: jsonrpc must be \"2.0\"",
        ));
    }
    let Some(method) = m.get("method").and_then(J::as_str) else {
        if m.contains_key("result") || m.contains_key("error") {
            return Incoming::Quiet;
        }
        return Incoming::Reply(error(
            reply_id,
            -32600,
            "Invalid Request: method is missing or not a string",
        ));
    };
    let params = match m.get("params") {
        None | Some(J::Null) => J::Object(Map::new()),
        Some(p @ J::Object(_)) => p.clone(),
        Some(_) => {
            return match id {
                Some(id) => Incoming::Reply(error(
                    id,
                    -32602,
                    "Invalid params: params must be an object",
                )),
                None => Incoming::Quiet,
            };
        }
    };
    let method = method.to_string();
    let Some(id) = id else {
        return Incoming::Notice { method, params };
    };
    // The arguments as they were written, so an appended payload keeps NaN, Infinity and
    // every digit of its numbers, as over HTTP.
    let raw = parsed
        .get("params")
        .and_then(|p| p.get("arguments"))
        .map(canonical::Value::canonical);
    Incoming::Request(Call {
        id,
        method,
        params,
        raw,
    })
}

/// A line read as JSON, or the parse error to answer with.
fn parse_line(line: &[u8]) -> Result<canonical::Value, J> {
    let Ok(text) = std::str::from_utf8(line) else {
        return Err(error(J::Null, -32700, "Parse error: the line is not UTF-8"));
    };
    // Read as Python's json.loads reads it, as the HTTP body is: NaN and Infinity are
    // accepted and every number keeps its exact value (see `Dispatcher::handle`).
    canonical::parse(text).map_err(|ours| {
        let why = serde_json::from_str::<J>(text)
            .err()
            .map_or_else(|| ours.to_string(), |e| e.to_string());
        error(J::Null, -32700, &format!("Parse error: {why}"))
    })
}

/// A message's id (none for a notification), or the error to answer a bad one with.
fn message_id(m: &Map<String, J>) -> Result<Option<J>, J> {
    match m.get("id") {
        None => Ok(None),
        // MCP's ids are strings or integers (never null, never a fraction).
        Some(v @ J::String(_)) => Ok(Some(v.clone())),
        Some(v @ J::Number(n)) if n.is_i64() || n.is_u64() => Ok(Some(v.clone())),
        Some(_) => Err(error(
            J::Null,
            -32600,
            "Invalid Request: id must be a string or a number",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_progress_token_is_read_from_meta() {
        let Incoming::Request(call) = read(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"status","_meta":{"progressToken":"t1"}}}"#,
        ) else {
            panic!("a request");
        };
        assert_eq!(call.progress_token(), Some(json!("t1")));
        let Incoming::Notice { method, params } = read(
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}"#,
        ) else {
            panic!("a notification");
        };
        assert_eq!(method, "notifications/cancelled");
        assert_eq!(params["requestId"], 3);
    }
}
