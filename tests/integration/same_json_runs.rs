//! The run operations answer the same JSON on every surface: `git forum ... --json`, the
//! daemon over HTTP and the MCP server give equal values for the runs, the pending gates, a
//! gate approved or rejected on a gated run, the refusal of a decision with no pending gate,
//! and the receipt, on the same ledger. The runs are played by a shell-script model, so three
//! repositories given the same commands hold the same ledger, and one decision can be made
//! once per surface on its own copy.

use std::process::Stdio;

use serde_json::{Value as J, json};

use crate::common::Repo;

const PLAN: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":[]},{"id":"T2","agent":"docs","instruction":"write the API docs","depends_on":["T1"],"done_when":[]}]}"#;

const ANSWER: &str = "Shipped the login API with docs.";

/// A model as a shell script in `dir`: plans PLAN (waves [T1], [T2]), passes every verdict,
/// answers ANSWER, and does a task as "done". Its path is its model id, witnessed in results,
/// so copies of one ledger share one script.
fn model(dir: &std::path::Path) -> String {
    let path = dir.join("model.sh");
    let body = format!(
        "#!/bin/sh\ncase \"$1\" in\n  *\"Break this request\"*) echo '{PLAN}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo '{ANSWER}' ;;\n  *) echo done ;;\nesac\n"
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

/// One request on its own connection: (status, body).
fn http(addr: &str, method: &str, path: &str, body: &J) -> (u16, J) {
    crate::common::http_json(addr, method, path, body)
}

/// One MCP tool call in its own `git forum mcp`: whether it is an error, and its body (the
/// structured content when there is one, else the text read as JSON).
fn mcp(repo: &Repo, tool: &str, args: J) -> (bool, J) {
    let lines = [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": tool, "arguments": args}})
        .to_string(),
    ];
    let (ok, out) = repo.mcp_batch(&[], &lines);
    assert!(ok, "{out}");
    let reply: J = out
        .lines()
        .map(|l| serde_json::from_str::<J>(l).unwrap())
        .find(|r| r["id"] == 2)
        .unwrap_or_else(|| panic!("no reply to the call: {out}"));
    let result = &reply["result"];
    let text = result["content"][0]["text"].as_str().unwrap();
    let body: J = serde_json::from_str(text).unwrap();
    if let Some(s) = result.get("structuredContent") {
        assert_eq!(
            s, &body,
            "{tool}: the text and the structured content differ"
        );
    }
    (result["isError"] == J::Bool(true), body)
}

/// `git forum ARGS` that must fail: its exit code and its one error line without `error: `.
fn cli_refusal(repo: &Repo, args: &[&str]) -> (i32, String) {
    let o = repo.forum().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).trim().to_string();
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    let line = err.strip_prefix("error: ").unwrap_or(&err).to_string();
    (o.status.code().unwrap_or(-1), line)
}

/// A repository of `kind` whose ledger holds one answered run and one run paused at its
/// gate before wave 1, played by the model at `m`.
fn gated(kind: &str, m: &str) -> Repo {
    let repo = Repo::new(kind);
    repo.forum_ok(&["submit", "--quiet", "--cmd", m, "ship a login API"]);
    // Paused at the gate: exit 8.
    let o = repo
        .forum()
        .args([
            "submit",
            "--quiet",
            "--cmd",
            m,
            "--gate-wave",
            "1",
            "ship a login API with docs",
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(8),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    repo
}

/// The reads: runs, pending gates and the latest run's receipt, on every surface.
fn reads_agree(repo: &Repo) {
    let served = repo.serve(&[], Stdio::null());
    for (cli, path, tool) in [
        (&["runs", "--json"][..], "/runs", "runs"),
        (&["gate", "list", "--json"], "/gates", "gate_list"),
    ] {
        let c: J = serde_json::from_str(&repo.forum_ok(cli)).unwrap();
        let (code, h) = http(&served.addr, "GET", path, &json!({}));
        assert_eq!(code, 200, "{path}: {h}");
        let (err, m) = mcp(repo, tool, json!({}));
        assert!(!err, "{tool}: {m}");
        assert_eq!(c, h, "{cli:?} and GET {path}");
        assert_eq!(h, m, "GET {path} and MCP {tool}");
    }
    let c: J = serde_json::from_str(&repo.forum_ok(&["receipt", "--json"])).unwrap();
    let (code, h) = http(&served.addr, "GET", "/receipt", &json!({}));
    assert_eq!(code, 200, "{h}");
    let (err, m) = mcp(repo, "receipt", json!({}));
    assert!(!err, "{m}");
    assert_eq!(c, h, "receipt and GET /receipt");
    assert_eq!(h, m, "GET /receipt and MCP receipt");
    assert_eq!(c["schema"], "project-telos.action-receipt/v1");
}

/// One decision (`approve`, `edit` or `reject`) made on three copies of the same gated ledger, once
/// per surface: the answers are equal, and so are the ledgers after it.
fn decisions_agree(kind: &str, verb: &str) {
    let shared = tempfile::tempdir().unwrap();
    let m = model(shared.path());
    let (a, b, c) = (gated(kind, &m), gated(kind, &m), gated(kind, &m));
    let list = a.forum_json(&["gate", "list"]);
    let g = &list["pending"][0];
    assert_eq!(list["pending"].as_array().unwrap().len(), 1, "{list}");
    let (run, run_seq) = (g["run"].to_string(), g["run_seq"].clone());
    let mut cli = vec![
        "gate",
        verb,
        "--run",
        &run,
        "--wave",
        "1",
        "--approver",
        "ana",
    ];
    let mut body = json!({"run_seq": run_seq, "wave": 1, "approver": "ana"});
    match verb {
        "reject" => {
            cli.extend(["--reason", "not now"]);
            body["reason"] = json!("not now");
        }
        "edit" => {
            cli.extend(["--edit", "T2=write shorter docs"]);
            body["edits"] = json!({"T2": "write shorter docs"});
        }
        _ => {}
    }
    cli.push("--json");
    let by_cli: J = serde_json::from_str(&a.forum_ok(&cli)).unwrap();
    let served = b.serve(&[], Stdio::null());
    let (code, by_http) = http(&served.addr, "POST", &format!("/gate/{verb}"), &body);
    assert_eq!(code, 200, "{by_http}");
    drop(served);
    let (err, by_mcp) = mcp(&c, &format!("gate_{verb}"), body.clone());
    assert!(!err, "{by_mcp}");
    assert_eq!(by_cli, by_http, "gate {verb}: CLI and HTTP");
    assert_eq!(by_http, by_mcp, "gate {verb}: HTTP and MCP");
    let resolved = match verb {
        "approve" => "approved",
        "edit" => "edited",
        _ => "rejected",
    };
    assert_eq!(by_cli["resolved"], resolved, "{by_cli}");
    assert_eq!(
        by_cli["causal_parent"], g["seq"],
        "parented on the pending gate"
    );
    let log = a.forum_json(&["log"]);
    assert_eq!(
        log,
        b.forum_json(&["log"]),
        "the ledgers differ after {verb}"
    );
    assert_eq!(
        log,
        c.forum_json(&["log"]),
        "the ledgers differ after {verb}"
    );

    // Decided, the gate is no longer pending: the same decision again is the same refusal on
    // every surface, and writes nothing.
    let before = a.snapshot();
    cli.pop();
    let (code, cli_says) = cli_refusal(&a, &cli);
    assert_eq!(code, 1, "{cli_says}");
    assert_eq!(a.snapshot(), before, "a refused decision wrote something");
    let served = b.serve(&[], Stdio::null());
    let (status, by_http) = http(&served.addr, "POST", &format!("/gate/{verb}"), &body);
    drop(served);
    assert_eq!(status, 409, "{by_http}");
    let (err, by_mcp) = mcp(&c, &format!("gate_{verb}"), body);
    assert!(err, "{by_mcp}");
    assert_eq!(by_http, by_mcp, "the refusal over HTTP and MCP");
    assert_eq!(
        by_http["error"], cli_says,
        "the refusal over HTTP and the CLI"
    );
    assert!(cli_says.starts_with("no gate is pending"), "{cli_says}");
    reads_agree(&a);
}

#[test]
fn runs_gates_and_the_receipt_read_the_same_on_every_surface() {
    let shared = tempfile::tempdir().unwrap();
    let m = model(shared.path());
    for kind in ["sha1", "reftable"] {
        let repo = gated(kind, &m);
        reads_agree(&repo);
        let runs = repo.forum_json(&["runs"]);
        let states: Vec<&J> = runs["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| &r["state"])
            .collect();
        assert_eq!(
            states,
            [&json!("answered"), &json!("gated")],
            "{kind}: {runs}"
        );
        let gates = repo.forum_json(&["gate", "list"]);
        assert_eq!(
            gates["pending"].as_array().unwrap().len(),
            1,
            "{kind}: {gates}"
        );
        assert_eq!(gates["schema"], "git-forum.gates/1");
    }
}

#[test]
fn an_approval_answers_the_same_on_every_surface() {
    decisions_agree("sha1", "approve");
}

#[test]
fn a_rejection_answers_the_same_on_every_surface() {
    decisions_agree("reftable", "reject");
}

#[test]
fn an_edit_answers_the_same_on_every_surface() {
    decisions_agree("sha1", "edit");
}
