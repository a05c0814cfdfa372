//! `git forum mcp` as a server, through the real binary: a `ping` is answered while a submit's
//! task is still running, `notifications/cancelled` stops that submit (the ledger witnesses it
//! as interrupted and `git forum resume` finishes it), a `progressToken` gets progress
//! notifications, and every message the server writes passes the official MCP schema
//! (tests/integration/data/mcp, revision 2025-11-25).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::{Value as J, json};

use crate::common::{Guarded, Repo, on_each_kind};

const PLAN: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":[]},{"id":"T2","agent":"docs","instruction":"write the API docs","depends_on":["T1"],"done_when":[]}]}"#;

const ANSWER: &str =
    "Shipped the login API with docs. Verified by the test output; next step: deploy.";

const REQUEST: &str = "ship a login API with docs";

/// The newest protocol revision the server declares, whose schema is vendored.
const PROTOCOL: &str = "2025-11-25";

/// The official schema's definitions, each compiled on its own.
struct Schema {
    doc: J,
}

impl Schema {
    fn load() -> Schema {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/integration/data/mcp/schema-2025-11-25.json"
        );
        let doc = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        Schema { doc }
    }

    /// Panics, naming the problems, unless `value` is a valid `def` of the schema.
    fn check(&self, def: &str, value: &J) {
        let mut root = self.doc.clone();
        root["$ref"] = json!(format!("#/$defs/{def}"));
        let v = jsonschema::validator_for(&root).unwrap();
        let problems: Vec<String> = v
            .iter_errors(value)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            problems.is_empty(),
            "not a valid {def}: {problems:?}\n{value}"
        );
    }

    /// Checks one message the server wrote: a JSON-RPC message, and then what its kind is (a
    /// reply to `method`, when the test knows the request).
    fn check_message(&self, msg: &J, method: Option<&str>) {
        self.check("JSONRPCMessage", msg);
        if msg.get("method").is_some() {
            self.check("ServerNotification", msg);
            return;
        }
        if msg.get("error").is_some() {
            self.check("JSONRPCErrorResponse", msg);
            return;
        }
        self.check("JSONRPCResultResponse", msg);
        let def = match method {
            Some("initialize") => "InitializeResult",
            Some("tools/list") => "ListToolsResult",
            Some("tools/call") => "CallToolResult",
            Some("ping") => "EmptyResult",
            _ => "ServerResult",
        };
        self.check(def, &msg["result"]);
    }
}

/// A model as a shell script: plans T1 then T2, passes every verdict, answers ANSWER. A task
/// writes `pid.PID` beside it, then waits until the file `release` exists (for five minutes at
/// most, so nothing outlives a failed test), which holds a submit in flight for as long as a
/// test needs, and writes `finished.PID` when it ends on its own (not killed).
fn model(repo: &Repo) -> (String, PathBuf) {
    let release = repo.path().join("release");
    let path = repo.path().join("model.sh");
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{PLAN}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo '{ANSWER}' ;;\n  *) echo $$ > '{dir}/pid.'$$; i=0; while [ ! -e '{release}' ] && [ $i -lt 6000 ]; do sleep 0.05; i=$((i+1)); done; echo $$ > '{dir}/finished.'$$; echo done ;;\nesac\n",
        dir = repo.path().display(),
        release = release.display()
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    (path.to_str().unwrap().to_string(), release)
}

/// Creates the release file when dropped, so a blocked task ends even when a test fails.
struct Release(PathBuf);

impl Release {
    fn now(&self) {
        std::fs::write(&self.0, "").unwrap();
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.0, "");
    }
}

/// A `git forum mcp` in flight: its stdin, its stdout lines as they come, and every message it
/// wrote, each checked against the schema as it is read.
struct Session {
    // Field order: stdin closes before the child is waited for.
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    child: Guarded,
    schema: Schema,
    /// Request id (as JSON text) → method, to check each reply as what it answers.
    asked: std::collections::HashMap<String, String>,
    seen: Vec<J>,
    /// Replies read while waiting for another (tool calls finish in any order).
    held: Vec<J>,
}

impl Session {
    fn start(repo: &Repo, args: &[&str]) -> Session {
        let mut child = Guarded(
            repo.forum()
                .arg("mcp")
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("start git forum mcp"),
        );
        let stdin = child.0.stdin.take();
        let stdout = child.0.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut s = Session {
            stdin,
            lines,
            child,
            schema: Schema::load(),
            asked: Default::default(),
            seen: Vec::new(),
            held: Vec::new(),
        };
        s.request(
            1,
            "initialize",
            json!({"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
        );
        let init = s.reply(1);
        assert_eq!(init["result"]["protocolVersion"], PROTOCOL, "{init}");
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    fn send(&mut self, msg: &J) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{msg}").unwrap();
        stdin.flush().unwrap();
    }

    fn request(&mut self, id: u64, method: &str, params: J) {
        self.asked.insert(id.to_string(), method.to_string());
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    }

    /// The next message; `None` once the server closed its stdout.
    fn next(&mut self) -> Option<J> {
        // A guard against a hung server, not a measurement: a run here takes well under it.
        let line = self.lines.recv_timeout(Duration::from_secs(300)).ok()?;
        let msg: J = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let method = msg
            .get("id")
            .and_then(|id| self.asked.get(&id.to_string()))
            .cloned();
        self.schema.check_message(&msg, method.as_deref());
        self.seen.push(msg.clone());
        Some(msg)
    }

    /// Reads until the reply to `id`; the notifications on the way are kept in `seen`, and
    /// the replies to other requests are held for their own `reply`.
    fn reply(&mut self, id: u64) -> J {
        if let Some(i) = self.held.iter().position(|m| m["id"] == id) {
            return self.held.remove(i);
        }
        loop {
            let msg = self.next().expect("the server ended before it replied");
            if msg.get("method").is_some() {
                continue;
            }
            if msg["id"] == id {
                return msg;
            }
            self.held.push(msg);
        }
    }

    /// Whether the reply to `id` has come (among what was read so far).
    fn replied(&self, id: u64) -> bool {
        self.seen
            .iter()
            .any(|m| m.get("method").is_none() && m["id"] == id)
    }

    /// Reads until a progress notification whose message contains `text`.
    fn progress_until(&mut self, text: &str) -> J {
        loop {
            let msg = self.next().expect("the server ended first");
            if msg.get("method").is_none() {
                self.held.push(msg);
                continue;
            }
            if msg["params"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(text))
            {
                return msg;
            }
        }
    }

    /// Closes stdin and reads what is left; the server must exit cleanly.
    fn finish(mut self) -> Vec<J> {
        self.stdin = None;
        while self.next().is_some() {}
        assert!(self.child.0.wait().unwrap().success());
        self.seen
    }
}

fn progress_of(seen: &[J], token: &J) -> Vec<J> {
    seen.iter()
        .filter(|m| {
            m["method"] == "notifications/progress" && m["params"]["progressToken"] == *token
        })
        .cloned()
        .collect()
}

fn kinds(repo: &Repo) -> Vec<String> {
    let run = repo.forum_json(&["log", "--run", "0"]);
    run["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("{run}"))
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect()
}

fn run_state(repo: &Repo) -> String {
    let runs = repo.forum_json(&["runs"]);
    runs["runs"][0]["state"]
        .as_str()
        .unwrap_or_else(|| panic!("{runs}"))
        .to_string()
}

#[test]
fn a_ping_is_answered_during_a_submit_and_a_cancel_stops_it_for_resume() {
    on_each_kind(|repo| {
        let (model, release) = model(repo);
        let release = Release(release);
        let mut s = Session::start(repo, &["--cmd", &model]);
        let token = json!("run-1");
        s.request(
            2,
            "tools/call",
            json!({"name": "submit", "arguments": {"request": REQUEST}, "_meta": {"progressToken": token}}),
        );
        // T1 is handed to the model, which holds it until the release file exists.
        s.progress_until("T1 started");
        s.request(3, "ping", json!({}));
        assert_eq!(s.reply(3)["result"], json!({}));
        s.send(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": 2, "reason": "the user changed their mind"}}),
        );
        // Messages are read in order: once this ping is answered, the cancel has been seen.
        s.request(4, "ping", json!({}));
        assert_eq!(s.reply(4)["result"], json!({}));
        release.now();
        s.request(5, "tools/call", json!({"name": "runs"}));
        let runs = s.reply(5);
        assert_eq!(runs["result"]["isError"], false, "{runs}");
        // End of input waits for the cancelled submit to stop.
        let seen = s.finish();
        assert!(
            !seen.iter().any(|m| m["id"] == 2),
            "a cancelled call got a reply"
        );
        let progress = progress_of(&seen, &token);
        assert!(!progress.is_empty());
        let counts: Vec<f64> = progress
            .iter()
            .map(|m| m["params"]["progress"].as_f64().unwrap())
            .collect();
        assert!(counts.windows(2).all(|w| w[0] < w[1]), "{counts:?}");

        assert_eq!(run_state(repo), "interrupted");
        let k = kinds(repo);
        assert!(k.contains(&"interrupted".to_string()), "{k:?}");
        assert!(!k.contains(&"final".to_string()), "{k:?}");
        let log = repo.forum_json(&["log", "--run", "0"]);
        let interrupted = log["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["kind"] == "interrupted")
            .unwrap()
            .clone();
        assert_eq!(
            interrupted["payload"]["signal"], "notifications/cancelled",
            "{interrupted}"
        );

        // The CLI picks the run up where the cancel left it.
        repo.forum_ok(&["resume", "--cmd", &model, "--quiet"]);
        assert_eq!(run_state(repo), "answered");
        repo.forum_ok(&["verify", "--deep"]);
    });
}

#[test]
fn a_progress_token_gets_progress_and_a_call_without_one_gets_none() {
    let repo = Repo::new("sha256");
    let (model, release) = model(&repo);
    let release = Release(release);
    release.now();
    let mut s = Session::start(&repo, &["--cmd", &model]);
    let token = json!(7);
    s.request(
        2,
        "tools/call",
        json!({"name": "submit", "arguments": {"request": REQUEST}, "_meta": {"progressToken": 7}}),
    );
    let done = s.reply(2);
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["answer"], ANSWER,
        "{done}"
    );
    let before = s.seen.len();
    s.request(
        3,
        "tools/call",
        json!({"name": "submit", "arguments": {"request": REQUEST}}),
    );
    let again = s.reply(3);
    assert_eq!(again["result"]["isError"], false, "{again}");
    let seen = s.finish();
    let progress = progress_of(&seen, &token);
    assert!(
        progress
            .iter()
            .any(|m| m["params"]["message"] == "planning"),
        "{progress:?}"
    );
    assert!(
        progress
            .iter()
            .any(|m| m["params"]["message"] == "writing the answer"),
        "{progress:?}"
    );
    assert!(
        !seen[before..]
            .iter()
            .any(|m| m["method"] == "notifications/progress"),
        "progress without a token"
    );
}

/// The pids of the model's tasks started so far (`pid.PID` files).
fn task_pids(repo: &Repo) -> Vec<u32> {
    let mut pids: Vec<u32> = std::fs::read_dir(repo.path())
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_prefix("pid.")?.parse().ok()
        })
        .collect();
    pids.sort();
    pids
}

/// Waits until `n` model tasks have started (each writes its pid file first thing).
fn wait_for_tasks(repo: &Repo, n: usize) -> Vec<u32> {
    crate::common::wait_for(
        &format!("{n} model tasks never started"),
        Duration::from_secs(120),
        || Some(task_pids(repo)).filter(|pids| pids.len() >= n),
    )
}

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn a_cancelled_call_that_has_not_started_is_dropped_without_a_reply() {
    let repo = Repo::new("sha1");
    let (model, release) = model(&repo);
    let release = Release(release);
    let mut s = Session::start(&repo, &["--cmd", &model]);
    // Every call thread is taken by a submit held at its first task.
    let slots = 8;
    for i in 0..slots {
        s.request(
            10 + i,
            "tools/call",
            json!({"name": "submit", "arguments": {"request": REQUEST}}),
        );
    }
    wait_for_tasks(&repo, slots as usize);
    // Queued behind them, then cancelled before it runs.
    s.request(
        3,
        "tools/call",
        json!({"name": "ledger_append", "arguments": {"actor": "a", "kind": "note", "payload": {"n": 1}}}),
    );
    s.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}),
    );
    s.request(4, "ping", json!({}));
    s.reply(4);
    release.now();
    for i in 0..slots {
        let done = s.reply(10 + i);
        assert_eq!(done["result"]["isError"], false, "{done}");
    }
    let seen = s.finish();
    assert!(
        !seen.iter().any(|m| m["id"] == 3),
        "a dropped call got a reply"
    );
    let log = repo.forum_json(&["log"]);
    let entries = log.as_array().expect("the log is an array");
    assert!(!entries.iter().any(|e| e["kind"] == "note"));
    assert_eq!(run_state(&repo), "answered");
}

#[test]
fn a_status_call_is_answered_while_a_submit_is_in_flight() {
    let repo = Repo::new("sha256");
    let (model, release) = model(&repo);
    let release = Release(release);
    let mut s = Session::start(&repo, &["--cmd", &model]);
    s.request(
        2,
        "tools/call",
        json!({"name": "submit", "arguments": {"request": REQUEST}}),
    );
    // The submit's first task is held by the model until the release file exists.
    wait_for_tasks(&repo, 1);
    s.request(3, "tools/call", json!({"name": "status"}));
    let status = s.reply(3);
    assert_eq!(status["result"]["isError"], false, "{status}");
    assert!(
        status["result"]["structuredContent"]["entries"]
            .as_u64()
            .unwrap()
            >= 1
    );
    s.request(4, "tools/call", json!({"name": "verify"}));
    let verify = s.reply(4);
    assert_eq!(verify["result"]["isError"], false, "{verify}");
    // Both were answered while the submit was still held.
    assert!(!release.0.exists());
    assert!(!s.replied(2), "the submit finished before it was released");
    release.now();
    let done = s.reply(2);
    assert_eq!(done["result"]["isError"], false, "{done}");
    s.finish();
    assert_eq!(run_state(&repo), "answered");
}

#[test]
fn a_cancel_kills_the_cancelled_runs_command_and_spares_the_other_run() {
    let repo = Repo::new("sha1");
    let (model, release) = model(&repo);
    let release = Release(release);
    let mut s = Session::start(&repo, &["--cmd", &model]);
    let submit = json!({"name": "submit", "arguments": {"request": REQUEST}});
    s.request(2, "tools/call", submit.clone());
    let first = wait_for_tasks(&repo, 1)[0];
    s.request(3, "tools/call", submit);
    let second = *wait_for_tasks(&repo, 2)
        .iter()
        .find(|p| **p != first)
        .unwrap();
    s.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}),
    );
    // The cancelled run's model command goes at once: killed, not finished on its own (the
    // release file does not exist yet, so it could not have).
    crate::common::wait_until(
        "the cancelled run's command is still running",
        Duration::from_secs(60),
        || !alive(first),
    );
    assert!(!repo.path().join(format!("finished.{first}")).exists());
    assert!(!release.0.exists());
    // The other run's command is untouched.
    assert!(alive(second), "the other run's command was killed too");
    release.now();
    let done = s.reply(3);
    assert_eq!(done["result"]["isError"], false, "{done}");
    let seen = s.finish();
    assert!(repo.path().join(format!("finished.{second}")).exists());
    assert!(
        !seen.iter().any(|m| m["id"] == 2),
        "a cancelled call got a reply"
    );
    let log = repo.forum_json(&["log"]);
    let entries = log.as_array().expect("the log is an array");
    let interrupted: Vec<&J> = entries
        .iter()
        .filter(|e| e["kind"] == "interrupted")
        .collect();
    assert_eq!(interrupted.len(), 1);
    let run = interrupted[0]["causal_parent"].to_string();
    let log = repo.forum_json(&["log", "--run", &run]);
    let payload = &log["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("{log}"))
        .iter()
        .find(|e| e["kind"] == "interrupted")
        .unwrap()["payload"];
    assert_eq!(payload["signal"], "notifications/cancelled", "{payload}");
    assert!(
        payload["reason"]
            .as_str()
            .unwrap()
            .contains("the MCP client cancelled the call"),
        "{payload}"
    );
    let runs = repo.forum_json(&["runs"]);
    let states: Vec<String> = runs
        .get("runs")
        .unwrap_or(&runs)
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["state"].as_str().unwrap().to_string())
        .collect();
    let mut sorted = states.clone();
    sorted.sort();
    assert_eq!(sorted, vec!["answered", "interrupted"], "{states:?}");
}

/// Every kind of line a client may send, good and bad; every reply must pass the schema.
#[test]
fn every_message_the_server_writes_passes_the_official_schema() {
    let repo = Repo::new("reftable");
    let schema = Schema::load();
    let requests = [
        (Some("initialize"), json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":PROTOCOL,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}).to_string()),
        (None, r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string()),
        (None, "[1,2]".to_string()),
        (None, "garbage".to_string()),
        (None, r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#.to_string()),
        (None, r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#.to_string()),
        (None, r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#.to_string()),
        (None, r#"{"jsonrpc":"1.0","id":2,"method":"ping"}"#.to_string()),
        (Some("ping"), r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#.to_string()),
        (None, r#"{"jsonrpc":"2.0","id":4,"method":"resources/list"}"#.to_string()),
        (Some("tools/list"), r#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#.to_string()),
        (None, r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"nope"}}"#.to_string()),
        (None, r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"status","arguments":[1]}}"#.to_string()),
        (Some("tools/call"), r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"ledger_append","arguments":{"actor":"a","kind":"note","payload":{"x":NaN,"n":1e400}}}}"#.to_string()),
        (Some("tools/call"), r#"{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"ledger_payload","arguments":{"seq":0}}}"#.to_string()),
        (Some("tools/call"), r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"ledger_get","arguments":{"seq":99}}}"#.to_string()),
        (Some("tools/call"), r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"submit","arguments":{"request":"x"}}}"#.to_string()),
        (Some("tools/call"), r#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"verify"}}"#.to_string()),
        (Some("tools/call"), r#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"forum.runtime.inspect"}}"#.to_string()),
    ];
    let lines: Vec<&str> = requests.iter().map(|(_, l)| l.as_str()).collect();
    let (ok, out) = repo.mcp_batch(&[], &lines);
    assert!(ok, "{out}");
    let methods: std::collections::HashMap<String, &str> = requests
        .iter()
        .filter_map(|(m, l)| {
            let v: J = serde_json::from_str(l).ok()?;
            Some((v["id"].to_string(), (*m)?))
        })
        .collect();
    let replies: Vec<J> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // One reply for every line but the notification.
    assert_eq!(replies.len(), requests.len() - 1, "{out}");
    for r in &replies {
        let method = r
            .get("id")
            .and_then(|id| methods.get(&id.to_string()).copied());
        schema.check_message(r, method);
    }
    // The bad ids are refused, without an id of their own.
    let refused = replies
        .iter()
        .filter(|r| r["error"]["message"] == "Invalid Request: id must be a string or a number")
        .count();
    assert_eq!(refused, 3, "{out}");
}
