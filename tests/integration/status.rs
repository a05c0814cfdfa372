//! `git forum status` (what the repository's git forum holds) on a repository with hooks and a
//! finished run, on every format; and the MCP tools `forum.status` and `forum.doctor`, whose
//! every message passes the vendored MCP schema and whose answers are what `status --json`
//! and `doctor --json` print.

use serde_json::{Value as J, json};

use crate::common::{FORMATS, Repo};

const PLAN: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":[]}]}"#;

const ANSWER: &str = "Shipped the login API. Verified by the test output; next step: deploy.";

/// A model as a shell script: one task, every verdict passed, ANSWER as the answer.
fn model(repo: &Repo) -> String {
    let path = repo.path().join("model.sh");
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{PLAN}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo '{ANSWER}' ;;\n  *) echo done ;;\nesac\n"
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

/// A repository with the pre-push hook, a finished run on `main`, a second ledger, and a
/// runtime whose default executor is the script.
fn prepared(kind: &str) -> Repo {
    let repo = Repo::new(kind);
    repo.forum_ok(&["hooks", "install"]);
    let m = model(&repo);
    repo.forum_ok(&["submit", "--cmd", &m, "ship a login API"]);
    repo.forum_ok(&[
        "--ledger",
        "notes",
        "append",
        "--actor",
        "me",
        "--kind",
        "note",
        "--payload",
        "{}",
    ]);
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        format!("[runtime.default]\ncmd = \"{m}\"\n"),
    )
    .unwrap();
    repo
}

#[test]
fn status_names_ledgers_the_last_run_hooks_and_the_runtime() {
    for kind in FORMATS {
        let repo = prepared(kind);
        let s = repo.forum_json(&["status"]);
        // The fields status always had.
        let log = repo.forum_json(&["verify"]);
        assert_eq!(s["ledger"], "main", "{kind}: {s}");
        let n = s["entries"].as_u64().unwrap();
        assert!(n > 5, "{s}");
        assert_eq!(s["checkpoint"], log["checkpoint"], "{kind}: {s} {log}");
        let names: Vec<&str> = s["ledgers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["main", "notes"], "{kind}");
        assert_eq!(s["ledgers"][0]["entries"], n);
        assert_eq!(s["ledgers"][1]["entries"], 1);
        let tip = repo.git_ok(&["rev-parse", "refs/forum/ledgers/main"]);
        assert_eq!(s["ledgers"][0]["tip"], tip, "{kind}");
        let run = &s["last_run"];
        assert_eq!(
            (&run["request_seq"], &run["request"], &run["state"]),
            (&json!(0), &json!("ship a login API"), &json!("answered")),
            "{kind}: {s}"
        );
        assert_eq!(run["entries"], n);
        assert!(run["answer_seq"].as_u64().is_some());
        assert_eq!(s["hooks"], json!(["pre-push"]), "{kind}");
        let rt = &s["runtime"];
        assert_eq!(rt["ready"], true, "{kind}: {rt}");
        assert_eq!(rt["executors"][0]["slot"], "default");
        assert_eq!(rt["executors"][0]["kind"], "command");
        assert_eq!(rt["local_models"], json!([]));
        let text = repo.forum_ok(&["status"]);
        assert!(
            text.starts_with(&format!("ledger main: {n} entries, checkpoint ")),
            "{text}"
        );
        assert!(text.contains("last run: seq 0 (answered)"), "{text}");
        assert!(
            text.contains("hooks: pre-push") && text.contains("runtime: ready"),
            "{text}"
        );
    }
}

#[test]
fn status_on_an_empty_repository_and_a_local_model_that_answers_or_not() {
    let repo = Repo::new("sha1");
    let s = repo.forum_json(&["status"]);
    assert_eq!(
        (&s["entries"], &s["last_run"]),
        (&json!(0), &J::Null),
        "{s}"
    );
    assert_eq!((&s["ledgers"], &s["hooks"]), (&json!([]), &json!([])));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://{}/v1/chat/completions",
        listener.local_addr().unwrap()
    );
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        format!("[runtime.default]\nchat_url = \"{url}\"\nmodel = \"m\"\nis_local = true\n"),
    )
    .unwrap();
    let s = repo.forum_json(&["status"]);
    assert_eq!(
        s["runtime"]["local_models"],
        json!([{"url": url, "answers": true}]),
        "{s}"
    );
    drop(listener);
    let s = repo.forum_json(&["status"]);
    assert_eq!(s["runtime"]["local_models"][0]["answers"], false, "{s}");
}

/// The vendored MCP schema (the one tests/integration/mcp.rs checks every message against).
fn schema_check(def: &str, value: &J) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/integration/data/mcp/schema-2025-11-25.json"
    );
    let mut root: J = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    root["$ref"] = json!(format!("#/$defs/{def}"));
    let v = jsonschema::validator_for(&root).unwrap();
    let problems: Vec<String> = v.iter_errors(value).map(|e| e.to_string()).collect();
    assert!(
        problems.is_empty(),
        "not a valid {def}: {problems:?}\n{value}"
    );
}

#[test]
fn mcp_forum_status_and_forum_doctor_answer_what_the_cli_prints() {
    let repo = prepared("sha1");
    let (ok, out) = repo.mcp_batch(
        &[],
        &[
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"forum.status"}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"forum.doctor","arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"flagship_doctor","arguments":{"repair":true}}}"#,
        ],
    );
    assert!(ok, "{out}");
    let replies: Vec<J> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(replies.len(), 5, "{out}");
    for (r, method) in replies.iter().zip([
        "initialize",
        "tools/list",
        "tools/call",
        "tools/call",
        "tools/call",
    ]) {
        schema_check("JSONRPCResultResponse", r);
        let def = match method {
            "initialize" => "InitializeResult",
            "tools/list" => "ListToolsResult",
            _ => "CallToolResult",
        };
        schema_check(def, &r["result"]);
    }
    let listed: Vec<&str> = replies[1]["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        listed.contains(&"forum.status") && listed.contains(&"forum.doctor"),
        "{listed:?}"
    );
    let answer = |r: &J| -> J {
        assert_eq!(r["result"]["isError"], false, "{r}");
        serde_json::from_str(r["result"]["content"][0]["text"].as_str().unwrap()).unwrap()
    };
    let status = answer(&replies[2]);
    let mut cli = repo.forum_json(&["status"]);
    // The server was started with no executor flags: it reads the same runtime.toml.
    assert_eq!(
        status["runtime"]["executors"], cli["runtime"]["executors"],
        "{status}"
    );
    cli["runtime"] = status["runtime"].clone();
    assert_eq!(status, cli);
    let doctor = answer(&replies[3]);
    let cli_doctor = repo.forum_json(&["doctor"]);
    assert_eq!(doctor["schema"], "git-forum.doctor/v1");
    assert_eq!(
        (&doctor["ok"], &doctor["ledger"]),
        (&cli_doctor["ok"], &cli_doctor["ledger"])
    );
    assert_eq!(doctor["install"]["hooks"], json!(["pre-push"]));
    assert_eq!(doctor["ledger"]["verify"]["ok"], true, "{doctor}");
    // No repairs over MCP: the tool takes no arguments.
    assert_eq!(replies[4]["result"]["isError"], true, "{}", replies[4]);
}
