//! The same operation on the same ledger gives the same JSON from the CLI (`--json`), the
//! daemon (`git forum serve`, over HTTP) and the MCP server (the tool's structured content):
//! they serialize one report from the surface.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value as J, json};

use crate::common::{FORMATS, Repo, Served};

/// `GET path` from a running daemon, as JSON; the status must be 200.
fn http_get(d: &Served, path: &str) -> J {
    http(d, "GET", path, "")
}

/// `METHOD path` with `body` to a running daemon, as JSON; the status must be 200.
fn http(d: &Served, method: &str, path: &str, body: &str) -> J {
    let mut s = TcpStream::connect(&d.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        d.addr,
        crate::common::auth_header(&d.addr),
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no response to GET {path}: {text:?}"));
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "GET {path}: {head}\n{body}"
    );
    serde_json::from_str(body).unwrap_or_else(|e| panic!("GET {path}: not JSON ({e}): {body}"))
}

/// Each tool's structured content (its text, read as JSON, when it is a list), called in one
/// `git forum mcp` session, in order.
fn mcp_calls(repo: &Repo, tools: &[&str]) -> Vec<J> {
    let calls: Vec<(&str, J)> = tools.iter().map(|t| (*t, json!({}))).collect();
    mcp_calls_with(repo, &calls)
}

/// [`mcp_calls`] with each tool's arguments.
fn mcp_calls_with(repo: &Repo, calls: &[(&str, J)]) -> Vec<J> {
    let tools: Vec<&str> = calls.iter().map(|(t, _)| *t).collect();
    let lines: Vec<String> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                "params": {"name": name, "arguments": args}})
            .to_string()
        })
        .collect();
    let (ok, out) = repo.mcp_batch(&[], &lines);
    assert!(ok, "git forum mcp failed: {out}");
    let mut replies: Vec<J> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    replies.sort_by_key(|r| r["id"].as_u64());
    assert_eq!(replies.len(), calls.len(), "{out}");
    replies
        .into_iter()
        .zip(tools)
        .map(|(r, name)| {
            assert_eq!(r["result"]["isError"], false, "{name}: {r}");
            let text: J = serde_json::from_str(r["result"]["content"][0]["text"].as_str().unwrap())
                .unwrap_or_else(|e| panic!("{name}: the text is not JSON ({e}): {r}"));
            // A list (ledger_log) comes as text alone: structured content is an object.
            match r["result"].get("structuredContent") {
                Some(s) => {
                    assert_eq!(
                        s, &text,
                        "{name}: the text and the structured content differ"
                    );
                    s.clone()
                }
                None => {
                    assert!(
                        !text.is_object(),
                        "{name}: an object without structured content"
                    );
                    text
                }
            }
        })
        .collect()
}

/// A ledger with a few entries, a recorded checkpoint and a runtime config whose default
/// executor is a program on `PATH`.
fn ledger(kind: &str) -> Repo {
    let repo = Repo::new(kind);
    repo.append("alice", "note", r#"{"n": 1}"#);
    repo.append("bob", "note", r#"{"n": 2, "text": "two"}"#);
    repo.forum_ok(&["checkpoint"]);
    repo.append("alice", "note", r#"{"n": 3}"#);
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        "[runtime.default]\ncmd = \"true\"\n",
    )
    .unwrap();
    repo
}

#[test]
fn verify_and_runtime_inspect_are_the_same_json_from_cli_http_and_mcp() {
    for kind in FORMATS {
        let repo = ledger(kind);
        let cli_verify = repo.forum_json(&["verify", "--deep"]);
        let cli_runtime = repo.forum_json(&["runtime", "inspect"]);
        assert_eq!(cli_verify["schema"], "git-forum.verify/v1", "{kind}");
        assert_eq!(cli_verify["ok"], true, "{kind}: {cli_verify}");
        assert_eq!(cli_verify["entries"], 3, "{kind}");
        assert_eq!(cli_verify["witnesses"]["recorded_checkpoints"], 1, "{kind}");
        assert_eq!(
            cli_runtime["schema"], "git-forum.runtime-inspect/1",
            "{kind}"
        );
        assert_eq!(cli_runtime["ready"], true, "{kind}: {cli_runtime}");

        let served = repo.serve(&[], std::process::Stdio::null());
        let http_verify = http_get(&served, "/verify");
        let http_runtime = http_get(&served, "/runtime");
        drop(served);
        assert_eq!(http_verify, cli_verify, "verify over HTTP on {kind}");
        assert_eq!(http_runtime, cli_runtime, "runtime over HTTP on {kind}");

        let mcp = mcp_calls(&repo, &["verify", "forum.runtime.inspect"]);
        assert_eq!(mcp[0], cli_verify, "verify over MCP on {kind}");
        assert_eq!(mcp[1], cli_runtime, "runtime over MCP on {kind}");
    }
}

#[test]
fn a_ledger_that_does_not_verify_is_the_same_report_everywhere() {
    let repo = ledger("sha1");
    // Edit an entry's actor in its commit and chain the commits again, as an attacker would.
    let mut texts = crate::common::commit_texts(&repo, crate::common::LEDGER_REF);
    let edited = texts[1].replace("bob", "eve");
    assert_ne!(edited, texts[1], "the commit text names the actor");
    texts[1] = edited;
    crate::common::rechain(&repo, &texts);
    let o = repo
        .forum()
        .args(["verify", "--deep", "--json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let cli: J = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(cli["ok"], false, "{cli}");
    assert!(cli["code"].is_string(), "{cli}");
    let served = repo.serve(&[], std::process::Stdio::null());
    let http = http_get(&served, "/verify");
    drop(served);
    assert_eq!(http, cli);
    assert_eq!(mcp_calls(&repo, &["verify"])[0], cli);
}

#[test]
fn inclusion_and_consistency_proofs_are_the_same_json_from_cli_http_and_mcp() {
    let repo = ledger("sha256");
    let cli_inclusion: J = serde_json::from_str(&repo.forum_ok(&["prove", "1"])).unwrap();
    let cli_consistency: J =
        serde_json::from_str(&repo.forum_ok(&["prove", "--consistency-from", "2"])).unwrap();
    assert_eq!(cli_inclusion["entry"]["seq"], 1, "{cli_inclusion}");
    let served = repo.serve(&[], std::process::Stdio::null());
    let http_inclusion = http(&served, "POST", "/prove", r#"{"seq": 1}"#);
    let http_consistency = http(&served, "POST", "/prove", r#"{"consistency_from": 2}"#);
    drop(served);
    assert_eq!(http_inclusion, cli_inclusion);
    assert_eq!(http_consistency, cli_consistency);
    let mcp = mcp_calls_with(
        &repo,
        &[
            ("ledger_prove", json!({"seq": 1})),
            ("ledger_prove", json!({"consistency_from": 2})),
        ],
    );
    assert_eq!(mcp[0], cli_inclusion);
    assert_eq!(mcp[1], cli_consistency);
}

#[test]
fn status_checkpoint_entry_and_why_are_the_same_json_from_cli_http_and_mcp() {
    for kind in FORMATS {
        let repo = ledger(kind);
        let cli_status = repo.forum_json(&["status"]);
        let cli_checkpoint = repo.forum_json(&["checkpoint", "--no-record"]);
        let cli_entry = repo.forum_json(&["show", "1"]);
        let cli_why = repo.forum_json(&["why", "2"]);
        // Forum's field names where the daemon mirrors Forum's API.
        assert_eq!(cli_status["entries"], 3, "{kind}: {cli_status}");
        assert_eq!(
            cli_status["checkpoint"], cli_checkpoint["checkpoint"],
            "{kind}"
        );
        assert_eq!(cli_checkpoint["size"], 3, "{kind}: {cli_checkpoint}");
        assert_eq!(cli_checkpoint["recorded"], false, "{kind}");
        assert_eq!(cli_entry["seq"], 1, "{kind}: {cli_entry}");
        assert_eq!(cli_entry["actor"], "bob", "{kind}");
        assert_eq!(cli_why["seq"], 2, "{kind}: {cli_why}");
        assert!(cli_why["chain"].is_array(), "{kind}: {cli_why}");

        let served = repo.serve(&[], std::process::Stdio::null());
        let http_status = http_get(&served, "/status");
        let http_full = http_get(&served, "/status/full");
        let http_checkpoint = http_get(&served, "/checkpoint");
        let http_entry = http_get(&served, "/ledger/1");
        let http_why = http_get(&served, "/why/2");
        drop(served);
        // GET /status is Forum's (entries and checkpoint); `status --json` adds to it what
        // GET /status/full answers.
        let ledger_status = json!({
            "ledger": cli_status["ledger"],
            "entries": cli_status["entries"],
            "checkpoint": cli_status["checkpoint"],
        });
        assert_eq!(http_status, ledger_status, "status over HTTP on {kind}");
        assert_eq!(http_full, cli_status, "full status over HTTP on {kind}");
        assert_eq!(
            http_checkpoint, cli_checkpoint,
            "checkpoint over HTTP on {kind}"
        );
        assert_eq!(http_entry, cli_entry, "entry over HTTP on {kind}");
        assert_eq!(http_why, cli_why, "why over HTTP on {kind}");

        let mcp = mcp_calls_with(
            &repo,
            &[
                ("status", json!({})),
                ("checkpoint", json!({})),
                ("ledger_get", json!({"seq": 1})),
                ("ledger_why", json!({"seq": 2})),
                ("forum.status", json!({})),
            ],
        );
        assert_eq!(mcp[0], ledger_status, "status over MCP on {kind}");
        assert_eq!(mcp[4], cli_status, "forum.status over MCP on {kind}");
        assert_eq!(mcp[1], cli_checkpoint, "checkpoint over MCP on {kind}");
        assert_eq!(mcp[2], cli_entry, "entry over MCP on {kind}");
        assert_eq!(mcp[3], cli_why, "why over MCP on {kind}");
    }
}

#[test]
fn recording_a_checkpoint_is_the_same_json_from_cli_http_and_mcp() {
    let repo = ledger("sha1");
    let cli = repo.forum_json(&["checkpoint"]);
    assert_eq!(cli["recorded"], true, "{cli}");
    assert_eq!(cli["signed"], J::Null, "{cli}");
    let served = repo.serve(&[], std::process::Stdio::null());
    let http_recorded = http(&served, "POST", "/checkpoint", "{}");
    drop(served);
    assert_eq!(http_recorded, cli);
    let mcp = mcp_calls(&repo, &["checkpoint_record"]);
    assert_eq!(mcp[0], cli);
}

#[test]
fn log_payload_replay_and_prove_read_the_same_json_from_cli_http_and_mcp() {
    for kind in FORMATS {
        let repo = ledger(kind);
        let cli_log = repo.forum_json(&["log"]);
        let cli_log2 = repo.forum_json(&["log", "-n", "2"]);
        let cli_payload = repo.forum_json(&["show", "1", "--payload"]);
        let cli_replay = repo.forum_json(&["replay", "1"]);
        let cli_prove: J =
            serde_json::from_str(&repo.forum_ok(&["prove", "0", "--size", "2"])).unwrap();
        assert_eq!(
            cli_log.as_array().map(Vec::len),
            Some(3),
            "{kind}: {cli_log}"
        );
        assert_eq!(cli_log[0]["seq"], 2, "{kind}: newest first");
        assert_eq!(cli_log2.as_array().map(Vec::len), Some(2), "{kind}");
        assert_eq!(cli_payload["entry"]["seq"], 1, "{kind}: {cli_payload}");
        assert_eq!(
            cli_payload["payload"],
            json!({"n": 2, "text": "two"}),
            "{kind}"
        );
        assert_eq!(cli_payload["redacted"], false, "{kind}");
        assert!(cli_payload["commit"].is_string(), "{kind}: {cli_payload}");
        assert_eq!(
            cli_replay["entries"].as_array().map(Vec::len),
            Some(2),
            "{kind}"
        );
        assert_eq!(cli_replay["next"], J::Null, "{kind}: {cli_replay}");
        assert_eq!(cli_prove["checkpoint"]["size"], 2, "{kind}: {cli_prove}");

        let served = repo.serve(&[], std::process::Stdio::null());
        let http_log = http_get(&served, "/log");
        let http_log2 = http_get(&served, "/log?limit=2");
        let http_payload = http_get(&served, "/payload/1");
        let http_replay = http_get(&served, "/replay/1");
        let http_prove = http(&served, "POST", "/prove", r#"{"seq": 0, "size": 2}"#);
        drop(served);
        assert_eq!(http_log, cli_log, "log over HTTP on {kind}");
        assert_eq!(http_log2, cli_log2, "log -n 2 over HTTP on {kind}");
        assert_eq!(http_payload, cli_payload, "payload over HTTP on {kind}");
        assert_eq!(http_replay, cli_replay, "replay over HTTP on {kind}");
        assert_eq!(http_prove, cli_prove, "prove over HTTP on {kind}");

        let mcp = mcp_calls_with(
            &repo,
            &[
                ("ledger_log", json!({})),
                ("ledger_log", json!({"limit": 2})),
                ("ledger_payload", json!({"seq": 1})),
                ("ledger_replay", json!({"seq": 1})),
                ("ledger_prove", json!({"seq": 0, "size": 2})),
            ],
        );
        assert_eq!(mcp[0], cli_log, "log over MCP on {kind}");
        assert_eq!(mcp[1], cli_log2, "log -n 2 over MCP on {kind}");
        assert_eq!(mcp[2], cli_payload, "payload over MCP on {kind}");
        assert_eq!(mcp[3], cli_replay, "replay over MCP on {kind}");
        assert_eq!(mcp[4], cli_prove, "prove over MCP on {kind}");
    }
}

#[test]
fn an_append_answers_the_same_json_from_cli_http_and_mcp() {
    for kind in FORMATS {
        // Three copies of one ledger: the same entry appended once on each, by each surface.
        let (a, b, c) = (ledger(kind), ledger(kind), ledger(kind));
        let payload = r#"{"n": 4, "exact": 1.0, "wide": 123456789012345678901234567890}"#;
        let by_cli = a.forum_json(&[
            "append",
            "--actor",
            "carol",
            "--kind",
            "note",
            "--parent",
            "2",
            "--payload",
            payload,
        ]);
        let body = format!(
            r#"{{"actor": "carol", "kind": "note", "causal_parent": 2, "payload": {payload}}}"#
        );
        let served = b.serve(&[], std::process::Stdio::null());
        let by_http = http(&served, "POST", "/append", &body);
        drop(served);
        let args: J = serde_json::from_str(&body).unwrap();
        let by_mcp = mcp_calls_with(&c, &[("ledger_append", args)]).remove(0);
        assert_eq!(by_cli["seq"], 3, "{kind}: {by_cli}");
        assert!(by_cli.get("replayed").is_none(), "{kind}: {by_cli}");
        assert_eq!(by_http, by_cli, "append over HTTP on {kind}");
        assert_eq!(by_mcp, by_cli, "append over MCP on {kind}");
        let log = a.forum_json(&["log"]);
        assert_eq!(b.forum_json(&["log"]), log, "{kind}: the ledgers differ");
        assert_eq!(c.forum_json(&["log"]), log, "{kind}: the ledgers differ");
    }
}
