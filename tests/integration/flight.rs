//! The flight recorder through the real binary: `import-trace` and `mine` give Forum's record
//! and row for every trace of Forum's vectors and Forum's exit code for every bad one;
//! `--ledger NAME` writes a real ledger (verified, proven, fsck-clean on every repository
//! format); the OTLP/JSON and Claude Code formats on fixtures of our own; the daemon route and
//! the MCP tool answer what the CLI prints.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use serde_json::{Value as J, json};

use crate::common::{self, Repo, one_line_error};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/integration/data/flight")
        .join(name)
}

/// `git forum ARGS` in `repo` with `stdin` on its standard input.
fn run(repo: &Repo, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut c = repo.forum();
    c.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("run git-forum");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn vectors() -> Option<Vec<J>> {
    let dir = common::conformance()?;
    let text = std::fs::read_to_string(dir.join("flight_recorder_vectors.json")).unwrap();
    Some(serde_json::from_str(&text).unwrap())
}

fn trace_text(v: &J) -> String {
    match v.get("trace_text") {
        Some(t) => t.as_str().unwrap().to_string(),
        None => serde_json::to_string(&v["trace"]).unwrap(),
    }
}

#[test]
fn import_trace_and_mine_print_forums_output_for_every_vector() {
    let Some(vs) = vectors() else { return };
    let repo = Repo::new("sha1");
    let mut good = 0;
    let mut bad = 0;
    for v in &vs {
        let name = v["name"].as_str().unwrap();
        let file = repo.path().join(format!("{name}.json"));
        std::fs::write(&file, trace_text(v)).unwrap();
        let fmt = v["format"].as_str().unwrap();
        let f = file.to_str().unwrap();
        let forum = &v["import_trace"];
        if forum["rc"] == 0 {
            let o = run(&repo, &["import-trace", "--format", fmt, f], None);
            assert_eq!(stdout(&o), forum["stdout"].as_str().unwrap(), "{name}");
            // Standard input gives the same record.
            let o = run(
                &repo,
                &["import-trace", "--format", fmt, "-"],
                Some(trace_text(v).as_bytes()),
            );
            assert_eq!(
                stdout(&o),
                forum["stdout"].as_str().unwrap(),
                "{name} on stdin"
            );
            let o = run(&repo, &["mine", "--format", fmt, f], None);
            assert_eq!(stdout(&o), v["mine"]["stdout"].as_str().unwrap(), "{name}");
            good += 1;
        } else {
            for cmd in ["import-trace", "mine"] {
                let o = run(&repo, &[cmd, "--format", fmt, f], None);
                assert_eq!(o.status.code(), Some(2), "{name}");
                let err = one_line_error(&o, &format!("{cmd}: "));
                let line = forum["stderr_first_line"].as_str().unwrap();
                for key in line.split('\'').skip(1).step_by(2) {
                    assert!(err.contains(&format!("'{key}'")), "{err} vs {line}");
                }
            }
            bad += 1;
        }
    }
    assert_eq!((good, bad), (4, 5));
    // Nothing was written: no ledger without --ledger.
    assert_eq!(repo.git_ok(&["for-each-ref", "refs/forum"]), "");
}

#[test]
fn a_trace_over_the_limit_or_unreadable_is_one_line_and_exit_2() {
    let repo = Repo::new("sha1");
    let big = format!("[{}]", vec![r#"{"actor":"a","kind":"k"}"#; 100].join(","));
    let o = run(
        &repo,
        &["import-trace", "--max-bytes", "1000", "-"],
        Some(big.as_bytes()),
    );
    assert_eq!(o.status.code(), Some(2));
    one_line_error(
        &o,
        "longer than the 1000 byte limit; raise the limit with --max-bytes",
    );
    let o = run(&repo, &["mine", "no-such-trace.json"], None);
    assert_eq!(o.status.code(), Some(2));
    one_line_error(&o, "mine: cannot read trace no-such-trace.json");
    let o = run(
        &repo,
        &["import-trace", "--format", "jaeger", "t.json"],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
    one_line_error(
        &o,
        "use one of langsmith, otel, agentops, generic, otlp, claude-code",
    );
}

const NESTED: &str = r#"[
  {"id": "r1", "name": "AgentExecutor", "run_type": "chain", "inputs": {"q": "weather in Paris"}},
  {"id": "r2", "name": "ChatOpenAI", "run_type": "llm", "parent_run_id": "r1", "outputs": {"text": "t"}},
  {"id": "r3", "name": "search", "run_type": "tool", "parent_run_id": "r2", "inputs": {"query": "x"}},
  {"id": "r4", "name": "orphan", "run_type": "tool", "parent_run_id": "missing-id"}
]"#;

#[test]
fn import_trace_with_ledger_writes_a_real_ledger_on_every_format() {
    common::on_each_kind(|repo| {
        std::fs::write(repo.path().join("t.json"), NESTED).unwrap();
        let printed = repo.forum_ok(&[
            "import-trace",
            "--format",
            "langsmith",
            "--ledger",
            "traces",
            "t.json",
        ]);
        let rec: J = serde_json::from_str(&printed).unwrap();
        let root = rec["merkle_root"].as_str().unwrap();
        assert_eq!(rec["written"]["ledger"], "traces");
        assert_eq!(rec["written"]["entries"], 4);
        assert_eq!(rec["written"]["checkpoint"], root);
        // The ledger is the record: same entries, same checkpoint.
        let v = repo.forum_json(&["--ledger", "traces", "verify", "--deep"]);
        assert_eq!(v["ok"], true, "{v}");
        assert_eq!(v["entries"], 4);
        assert_eq!(v["checkpoint"], root);
        let shown = repo.forum_json(&["--ledger", "traces", "show", "1"]);
        assert_eq!(shown["entry_hash"], rec["ledger"][1]["entry_hash"]);
        assert_eq!(shown["causal_parent"], 0);
        // An inclusion proof of the dangling entry holds outside the repository.
        let proof = repo.forum_ok(&["--ledger", "traces", "prove", "3"]);
        let p: J = serde_json::from_str(&proof).unwrap();
        assert_eq!(p["checkpoint"]["root"], root);
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("p.json"), &proof).unwrap();
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_git-forum"))
            .current_dir(outside.path())
            .args(["verify-proof", "p.json"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        repo.git_ok(&["fsck", "--strict"]);
        // A second import into the same ledger is refused and changes nothing.
        let before = repo.snapshot();
        let o = run(
            repo,
            &[
                "import-trace",
                "--format",
                "langsmith",
                "--ledger",
                "traces",
                "t.json",
            ],
            None,
        );
        assert_eq!(o.status.code(), Some(2));
        one_line_error(&o, "ledger \"traces\" already exists");
        assert_eq!(repo.snapshot(), before);
    });
}

#[test]
fn a_trace_no_ledger_entry_may_hold_is_refused_whole() {
    let repo = Repo::new("sha1");
    let trace = r#"[{"actor":"a","kind":"k"},{"actor":"","kind":"k"}]"#;
    // Forum folds an empty actor; its record prints ...
    stdout(&run(&repo, &["import-trace", "-"], Some(trace.as_bytes())));
    // ... but no ledger entry may have one: nothing is written.
    let o = run(
        &repo,
        &["import-trace", "--ledger", "t", "-"],
        Some(trace.as_bytes()),
    );
    assert_eq!(o.status.code(), Some(2));
    one_line_error(&o, "event #1 cannot be a ledger entry (actor is empty)");
    assert_eq!(repo.git_ok(&["for-each-ref", "refs/forum"]), "");
}

fn record(repo: &Repo, fmt: &str, file: &str) -> J {
    let f = data(file);
    let out = repo.forum_ok(&["import-trace", "--format", fmt, f.to_str().unwrap()]);
    serde_json::from_str(&out).unwrap()
}

fn column(rec: &J, key: &str) -> Vec<J> {
    rec["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e[key].clone())
        .collect()
}

#[test]
fn otlp_spans_fold_in_start_order_with_genai_model_tokens_and_tools() {
    let repo = Repo::new("sha1");
    let rec = record(&repo, "otlp", "otlp-collector.jsonl");
    assert_eq!(rec["schema"], "forum.flight-recorder/1");
    assert_eq!(rec["format"], "otlp");
    assert_eq!(rec["entries"], 5);
    assert_eq!(rec["verified"], true);
    // The root span was written last (it ended last) but starts first.
    assert_eq!(
        column(&rec, "actor"),
        [
            "invoke_agent travel-planner",
            "chat gpt-4o",
            "execute_tool get_weather",
            "chat gpt-4o-mini",
            "cache lookup"
        ]
        .map(J::from)
    );
    assert_eq!(
        column(&rec, "kind"),
        ["invoke_agent", "chat", "execute_tool", "chat", "span"].map(J::from)
    );
    assert_eq!(
        column(&rec, "causal_parent"),
        [J::Null, json!(0), json!(0), json!(0), J::Null]
    );
    assert_eq!(rec["dangling_parents"], 1);
    assert_eq!(
        rec["totals"],
        json!({"models": ["gpt-4o-2024-08-06", "gpt-4o-mini"], "input_tokens": 217,
               "output_tokens": 82, "tool_calls": 1, "tools": ["get_weather"]})
    );
    // The bodies carry the mapped fields: written to a ledger, the chat span's body says so.
    let f = data("otlp-collector.jsonl");
    repo.forum_ok(&[
        "import-trace",
        "--format",
        "otlp",
        "--ledger",
        "otlp",
        f.to_str().unwrap(),
    ]);
    let body = repo.forum_json(&["--ledger", "otlp", "show", "1", "--payload"]);
    let body = body.get("payload").unwrap_or(&body);
    assert_eq!(body["model"], "gpt-4o-2024-08-06", "{body}");
    assert_eq!(
        body["usage"],
        json!({"input_tokens": 97, "output_tokens": 52})
    );
    assert_eq!(body["attributes"]["gen_ai.request.temperature"], 0.2);
    assert_eq!(
        body["attributes"]["gen_ai.response.finish_reasons"],
        json!(["tool_calls"])
    );
    assert_eq!(body["resource"]["service.name"], "travel-agent");
    // The same batch as one pretty-printed object reads the same.
    let one = std::fs::read_to_string(&f).unwrap();
    let first: J = serde_json::from_str(one.lines().next().unwrap()).unwrap();
    let pretty = serde_json::to_string_pretty(&first).unwrap();
    let o = run(
        &repo,
        &["import-trace", "--format", "otlp", "-"],
        Some(pretty.as_bytes()),
    );
    let r: J = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(r["entries"], 2);
    assert_eq!(r["dangling_parents"], 2, "the parent is in the other batch");
}

#[test]
fn a_malformed_otlp_line_is_one_line_naming_it() {
    let repo = Repo::new("sha1");
    let f = data("otlp-malformed.jsonl");
    let o = run(
        &repo,
        &["import-trace", "--format", "otlp", f.to_str().unwrap()],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
    one_line_error(&o, "line 2 of the OTLP file is not JSON");
    let o = run(
        &repo,
        &["import-trace", "--format", "otlp", "-"],
        Some(br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x"}]}]}]}"#),
    );
    one_line_error(&o, "resourceSpans[0].scopeSpans[0].spans[0] has no spanId");
    let o = run(
        &repo,
        &["import-trace", "--format", "otlp", "-"],
        Some(b"[]"),
    );
    one_line_error(&o, "not an object");
    // One object over many lines, broken on line 3: the error says where.
    let o = run(
        &repo,
        &["import-trace", "--format", "otlp", "-"],
        Some(b"{\n  \"resourceSpans\": [\n    {\"scopeSpans\": ]\n  ]\n}\n"),
    );
    let e = one_line_error(&o, "the OTLP file is not JSON (");
    assert!(e.contains("at line 3, column 20"), "{e}");
}

#[test]
fn claude_code_transcripts_fold_with_parents_tokens_once_and_tool_names() {
    let repo = Repo::new("sha1");
    let rec = record(&repo, "claude-code", "claude-code-session.jsonl");
    assert_eq!(rec["format"], "claude-code");
    assert_eq!(rec["entries"], 8);
    assert_eq!(rec["dangling_parents"], 0);
    assert_eq!(
        column(&rec, "actor"),
        [
            "summary",
            "user",
            "assistant",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant"
        ]
        .map(J::from)
    );
    assert_eq!(
        column(&rec, "kind"),
        [
            "summary",
            "user",
            "assistant",
            "tool_use",
            "tool_result",
            "tool_use",
            "tool_result",
            "assistant"
        ]
        .map(J::from)
    );
    assert_eq!(
        column(&rec, "causal_parent"),
        [
            J::Null,
            J::Null,
            json!(1),
            json!(2),
            json!(3),
            json!(4),
            json!(5),
            json!(6)
        ]
    );
    // msg_01AbCd spans two lines with its usage repeated: counted once.
    assert_eq!(
        rec["totals"],
        json!({"models": ["claude-sonnet-4-5-20250929"], "input_tokens": 35,
               "output_tokens": 77, "tool_calls": 2, "tools": ["Edit", "Read"]})
    );
    let row: J = serde_json::from_str(&repo.forum_ok(&[
        "mine",
        "--format",
        "claude-code",
        data("claude-code-session.jsonl").to_str().unwrap(),
    ]))
    .unwrap();
    assert_eq!(row["schema"], "forum.gradable-trajectory/1");
    assert_eq!(row["oracle"]["merkle_root"], rec["merkle_root"]);
    assert_eq!(row["grade"]["label"], "UNVERIFIABLE");
}

#[test]
fn a_malformed_transcript_line_is_one_line_naming_its_number() {
    let repo = Repo::new("sha1");
    let f = data("claude-code-malformed.jsonl");
    for cmd in ["import-trace", "mine"] {
        let o = run(
            &repo,
            &[cmd, "--format", "claude-code", f.to_str().unwrap()],
            None,
        );
        assert_eq!(o.status.code(), Some(2));
        one_line_error(&o, "line 3 of the Claude Code transcript is not JSON");
    }
    let o = run(
        &repo,
        &["import-trace", "--format", "claude-code", "-"],
        Some(b"{\"type\":\"user\",\"uuid\":\"a\"}\n\n{\"uuid\":\"b\"}\n"),
    );
    one_line_error(&o, "line 3 of the Claude Code transcript has no 'type'");
}

#[test]
fn mine_out_appends_one_sealed_jsonl_row() {
    let repo = Repo::new("sha1");
    std::fs::write(repo.path().join("t.json"), NESTED).unwrap();
    let printed: J = serde_json::from_str(&repo.forum_ok(&[
        "mine",
        "--format",
        "langsmith",
        "--min-checks",
        "3",
        "t.json",
    ]))
    .unwrap();
    for _ in 0..2 {
        let said = repo.forum_ok(&[
            "mine",
            "--format",
            "langsmith",
            "--min-checks",
            "3",
            "--out",
            "rows.jsonl",
            "t.json",
        ]);
        assert!(
            said.contains(printed["row_hash"].as_str().unwrap()),
            "{said}"
        );
    }
    let rows = std::fs::read_to_string(repo.path().join("rows.jsonl")).unwrap();
    assert_eq!(rows.lines().count(), 2);
    for line in rows.lines() {
        assert_eq!(serde_json::from_str::<J>(line).unwrap(), printed);
    }
}

#[test]
fn the_daemon_route_and_the_mcp_tool_answer_what_the_cli_prints() {
    use git_forum::serve::dispatch::{Config, Dispatcher};
    let repo = Repo::new("sha1");
    std::fs::write(repo.path().join("t.json"), NESTED).unwrap();
    let cli: J =
        serde_json::from_str(&repo.forum_ok(&["import-trace", "--format", "langsmith", "t.json"]))
            .unwrap();
    let mined: J =
        serde_json::from_str(&repo.forum_ok(&["mine", "--format", "langsmith", "t.json"])).unwrap();
    let mut cfg = Config::new(repo.path(), "main");
    cfg.timestamp = Some(1000.0);
    let d = Dispatcher::open(cfg).unwrap();
    let body = format!(r#"{{"format": "langsmith", "trace": {NESTED}}}"#);
    let r = d.handle("POST", "/import-trace", body.as_bytes());
    assert_eq!(r.status, 200, "{}", r.body_text());
    assert_eq!(r.body, cli);
    let r = d.handle("POST", "/mine", body.as_bytes());
    assert_eq!(r.body, mined);
    // The trace as text (any format) is the same trace.
    let text = json!({"format": "langsmith", "text": NESTED}).to_string();
    assert_eq!(d.handle("POST", "/import-trace", text.as_bytes()).body, cli);
    let r = d.handle(
        "POST",
        "/import-trace",
        br#"{"format": "langsmith", "trace": [{"id": 1}]}"#,
    );
    assert_eq!(r.status, 400);
    assert!(r.message().contains("'name'"), "{}", r.message());
    let r = d.handle("POST", "/mine", br#"{}"#);
    assert_eq!(r.status, 400);
    // Over MCP, by name and by Forum-style alias.
    let call = |name: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": name, "arguments": {"format": "claude-code",
               "text": std::fs::read_to_string(data("claude-code-session.jsonl")).unwrap()}}})
        .to_string()
    };
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let lines = [
        init.to_string(),
        call("forum.import_trace"),
        call("import_trace"),
    ];
    let (ok, replies) = repo.mcp_batch(&[], &lines);
    assert!(ok);
    let texts: Vec<J> = replies
        .lines()
        .filter_map(|l| serde_json::from_str::<J>(l).ok())
        .filter(|m| m["id"] == 1)
        .map(|m| m["result"]["structuredContent"].clone())
        .collect();
    assert_eq!(texts.len(), 2, "{replies:?}");
    assert_eq!(texts[0], texts[1]);
    assert_eq!(texts[0]["entries"], 8);
    assert_eq!(texts[0]["totals"]["tools"], json!(["Edit", "Read"]));
}

#[test]
fn only_ledger_on_the_command_line_writes() {
    let repo = Repo::new("sha1");
    let trace = br#"[{"actor":"a","kind":"k"}]"#;
    let mut c = repo.forum();
    c.env("GIT_FORUM_LEDGER", "fromenv")
        .args(["import-trace", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut child = c.spawn().unwrap();
    child.stdin.take().unwrap().write_all(trace).unwrap();
    let o = child.wait_with_output().unwrap();
    let rec: J = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(rec.get("written").is_none(), "{rec}");
    assert_eq!(repo.git_ok(&["for-each-ref", "refs/forum"]), "");
    // Given before the command, as a global flag, it writes.
    let o = run(&repo, &["--ledger", "t", "import-trace", "-"], Some(trace));
    let rec: J = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(rec["written"]["ledger"], "t");
    assert_eq!(
        repo.git_ok(&["for-each-ref", "--format=%(refname)", "refs/forum"]),
        "refs/forum/ledgers/t"
    );
}

#[test]
fn the_real_daemon_folds_a_trace_sent_over_http() {
    let repo = Repo::new("sha1");
    let f = data("otlp-collector.jsonl");
    let cli: J = serde_json::from_str(&repo.forum_ok(&[
        "import-trace",
        "--format",
        "otlp",
        f.to_str().unwrap(),
    ]))
    .unwrap();
    let served = repo.serve(&[], Stdio::null());
    let text = std::fs::read_to_string(&f).unwrap();
    let (code, body) = common::http_json(
        &served.addr,
        "POST",
        "/import-trace",
        &json!({"format": "otlp", "text": text}),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(body, cli);
    let (code, body) = common::http_json(
        &served.addr,
        "POST",
        "/mine",
        &json!({"format": "otlp", "text": text, "min_checks": 1}),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["oracle"]["merkle_root"], cli["merkle_root"]);
    let (code, body) = common::http_json(
        &served.addr,
        "POST",
        "/import-trace",
        &json!({"format": "otlp", "text": "{\"resourceSpans\": 1}"}),
    );
    assert_eq!(code, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("no resourceSpans list"),
        "{body}"
    );
    // The daemon wrote nothing.
    assert_eq!(repo.git_ok(&["for-each-ref", "refs/forum"]), "");
    drop(served);
}
