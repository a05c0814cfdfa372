//! The daemon and MCP: every route and tool through the dispatcher (no network), the real
//! `git forum serve` over HTTP with its guards and graceful drain, a scripted `git forum mcp`
//! transcript, and appends through the daemon and the CLI at the same time.

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use git_forum::exec::{Call, Executor, Fleet, Scripted};
use git_forum::serve::dispatch::{Config, Dispatcher, ROUTES, Reply};
use git_forum::serve::mcp::{Mcp, TOOLS, Target};
use serde_json::{Value as J, json};

use crate::common::{Guarded, Repo};

// ----- fixtures -----

const PLAN: &str = r#"{"tasks":[
 {"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":["endpoint documented"]},
 {"id":"T2","agent":"docs","instruction":"write the API docs","depends_on":["T1"],"done_when":[]}]}"#;

const ANSWER: &str =
    "Shipped the login API with docs. Verified by the test output; next step: deploy.";

/// An orchestrator that plans PLAN, passes every verdict and answers ANSWER; workers echo.
fn seats() -> Arc<dyn git_forum::exec::Seats> {
    let control: Arc<dyn Executor> = Arc::new(Scripted::new("orch", |call: &Call<'_>| {
        Ok(match call.schema.map(|s| s.name.as_str()) {
            Some("plan") => PLAN.to_string(),
            Some("verdict") => {
                r#"{"decision":"pass","score":0.9,"reason":"meets the criteria"}"#.to_string()
            }
            _ => ANSWER.to_string(),
        })
    }));
    let worker: Arc<dyn Executor> = Arc::new(Scripted::new("work", |call: &Call<'_>| {
        Ok(format!(
            "done: {}",
            call.prompt.lines().next().unwrap_or("")
        ))
    }));
    Arc::new(Fleet::fixed(control, worker, vec![]))
}

fn open(repo: &Repo) -> Dispatcher {
    let mut cfg = Config::new(repo.path(), "main");
    cfg.timestamp = Some(1000.0);
    Dispatcher::open(cfg).expect("open the dispatcher")
}

fn get(d: &Dispatcher, path: &str) -> Reply {
    d.handle("GET", path, b"")
}

fn post(d: &Dispatcher, path: &str, body: J) -> Reply {
    d.handle("POST", path, body.to_string().as_bytes())
}

#[track_caller]
fn ok(r: Reply) -> J {
    assert_eq!(r.status, 200, "{}", r.body_text());
    r.body
}

#[track_caller]
fn status(r: &Reply, want: u16, needle: &str) {
    assert_eq!(r.status, want, "{}", r.body_text());
    assert!(
        r.message().contains(needle),
        "{:?} lacks {needle:?}",
        r.message()
    );
}

/// A model as a shell script: plans PLAN, passes verdicts, answers ANSWER; tasks sleep
/// `task_sleep` seconds first.
fn model_script(repo: &Repo, task_sleep: &str) -> String {
    let path = repo.path().join("model.sh");
    let plan = PLAN.replace('\n', "");
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{plan}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo '{ANSWER}' ;;\n  *) sleep {task_sleep}; echo \"done: $(printf '%s' \"$p\" | sed -n 3p)\" ;;\nesac\n"
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

fn hexes(text: &str) -> String {
    regex::Regex::new("[0-9a-f]{40,64}")
        .unwrap()
        .replace_all(text, "<hex>")
        .into_owned()
}

// ----- the dispatcher, no network -----

#[test]
fn ledger_routes_read_write_and_prove() {
    let repo = Repo::new("sha1");
    let d = open(&repo);
    assert_eq!(ok(get(&d, "/health")), json!({"ok": true}));
    let empty = ok(get(&d, "/status"));
    assert_eq!(empty["entries"], 0);
    assert_eq!(ok(get(&d, "/verify"))["ok"], true);
    status(&get(&d, "/ledger/0"), 404, "no entry at seq 0");
    status(&get(&d, "/ledger/x"), 400, "not a non-negative integer");

    // Over HTTP the body keeps number identity: the entry is the one the CLI writes.
    let payload = r#"{"big": 123456789012345678901234567890, "f": 1.0, "i": 1}"#;
    let body = format!(r#"{{"actor": "a", "kind": "note", "payload": {payload}}}"#);
    let first = ok(d.handle("POST", "/append", body.as_bytes()));
    assert_eq!(first["seq"], 0);
    let twin = Repo::new("sha1");
    let cli = twin.forum_json(&[
        "append",
        "--actor",
        "a",
        "--kind",
        "note",
        "--payload",
        payload,
    ]);
    assert_eq!(first["entry_hash"], cli["entry_hash"]);

    for i in 1..5 {
        let r = ok(post(
            &d,
            "/append",
            json!({"actor": "b", "kind": "note", "payload": {"i": i}, "causal_parent": i - 1}),
        ));
        assert_eq!(r["seq"], i);
    }
    let st = ok(get(&d, "/status"));
    assert_eq!(st["entries"], 5);
    let cp = repo.forum_json(&["checkpoint", "--no-record"]);
    assert_eq!(st["checkpoint"], cp["checkpoint"]);
    assert_eq!(ok(get(&d, "/checkpoint"))["checkpoint"], cp["checkpoint"]);

    let e = ok(get(&d, "/ledger/3"));
    assert_eq!(
        (e["seq"].clone(), e["causal_parent"].clone()),
        (json!(3), json!(2))
    );
    let shown = repo.forum_json(&["show", "3"]);
    assert_eq!(e, shown);
    let p = ok(get(&d, "/payload/3"));
    assert_eq!(
        (p["payload"].clone(), p["redacted"].clone()),
        (json!({"i": 3}), json!(false))
    );
    assert_eq!(
        ok(get(&d, "/replay/2"))["entries"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        ok(get(&d, "/replay/99"))["entries"]
            .as_array()
            .unwrap()
            .len(),
        5
    );
    let why = ok(get(&d, "/why/4"));
    let chain: Vec<u64> = why["chain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(chain, vec![0, 1, 2, 3, 4]);
    status(&get(&d, "/why/9"), 404, "no entry");

    // Proofs check out with `git forum verify-proof`, like the CLI's own.
    let inc = ok(post(&d, "/prove", json!({"seq": 2})));
    let cons = ok(post(
        &d,
        "/prove",
        json!({"consistency_from": 2, "size": 4}),
    ));
    for (name, proof) in [("inc.json", &inc), ("cons.json", &cons)] {
        let f = repo.path().join(name);
        std::fs::write(&f, proof.to_string()).unwrap();
        let v = repo.forum_json(&["verify-proof", f.to_str().unwrap()]);
        assert_eq!(v["ok"], true, "{v}");
    }
    assert_eq!(inc["checkpoint"]["root"], cp["checkpoint"]);
    status(&post(&d, "/prove", json!({})), 400, "exactly one");
    status(
        &post(&d, "/prove", json!({"seq": 1, "size": 9})),
        400,
        "out of range",
    );
    status(
        &post(&d, "/prove", json!({"seq": 7})),
        404,
        "no entry at seq 7",
    );

    let rec = ok(post(&d, "/checkpoint", json!({})));
    assert_eq!(rec["recorded"], true);
    assert!(
        repo.git_dir()
            .join("forum/checkpoints/main.jsonl")
            .is_file()
    );
    let v = ok(get(&d, "/verify"));
    assert_eq!(
        (v["chain"].clone(), v["deep"].clone(), v["entries"].clone()),
        (json!(true), json!(true), json!(5))
    );

    // A CLI append moves the tip under the daemon's cache: it sees it.
    repo.append("cli", "note", "{}");
    assert_eq!(ok(get(&d, "/status"))["entries"], 6);
    repo.forum_ok(&["verify", "--deep"]);

    // A redaction rewrites the commits (same entries): bodies are read from the new ones.
    let hash = ok(get(&d, "/ledger/3"))["payload_hash"].clone();
    repo.forum_ok(&["redact", hash.as_str().unwrap(), "--reason", "test"]);
    let p = ok(get(&d, "/payload/3"));
    assert_eq!(
        (p["redacted"].clone(), p["payload"].clone()),
        (json!(true), J::Null)
    );
    assert_eq!(ok(get(&d, "/payload/4"))["payload"], json!({"i": 4}));
    let st = ok(get(&d, "/status"));
    assert_eq!(st["entries"], 7);
    // A ref moved back (a rewind) is seen as it is, not as the cache remembers it.
    let back = repo.git_ok(&["rev-parse", "refs/forum/ledgers/main~3"]);
    repo.git_ok(&["update-ref", "refs/forum/ledgers/main", &back]);
    assert_eq!(ok(get(&d, "/status"))["entries"], 4);
    assert_eq!(ok(get(&d, "/verify"))["ok"], false);
}

#[test]
fn bad_input_gets_the_right_status_and_a_json_error() {
    let repo = Repo::new("sha1");
    let d = open(&repo);
    // Not bad input: a request with no words routes to no lane, as Forum routes it.
    for text in ["???", "   "] {
        let r = ok(post(&d, "/route", json!({ "text": text })));
        assert_eq!(r["needs_escalation"], true, "{text:?}");
        assert_eq!(r["decided"], J::Null, "{text:?}");
    }
    let cases: Vec<(Reply, u16, &str)> = vec![
        (
            d.handle("POST", "/route", b"{not json"),
            400,
            "not valid JSON",
        ),
        (
            d.handle("POST", "/route", b"[1, 2]"),
            400,
            "must be a JSON object",
        ),
        (
            d.handle("POST", "/route", b"5"),
            400,
            "must be a JSON object",
        ),
        (
            d.handle("POST", "/route", &[0xff, 0xfe]),
            400,
            "not valid JSON",
        ),
        (
            post(&d, "/route", json!({"text": "x", "extra": 1})),
            400,
            "unknown field \"extra\"",
        ),
        (
            post(&d, "/route", json!({"text": 5})),
            400,
            "must be a string",
        ),
        (post(&d, "/route", json!({})), 400, "required"),
        (
            post(&d, "/route", json!({"text": ""})),
            400,
            "\"text\" is empty",
        ),
        (get(&d, "/nope"), 404, "no route"),
        (get(&d, "/ledger/1/2"), 404, "no route"),
        (d.handle("DELETE", "/status", b""), 405, "answers GET"),
        (get(&d, "/route"), 405, "answers POST"),
        (
            get(&d, "/ledger/99999999999999999999999"),
            400,
            "not a non-negative integer",
        ),
        (
            post(
                &d,
                "/append",
                json!({"actor": "a\u{1}", "kind": "k", "payload": 1}),
            ),
            400,
            "control character",
        ),
        (
            post(&d, "/append", json!({"actor": "a", "kind": "k"})),
            400,
            "payload",
        ),
        (
            post(
                &d,
                "/submit",
                json!({"request": "x", "context_token_budget": true}),
            ),
            400,
            "non-negative integer",
        ),
        (
            post(
                &d,
                "/submit",
                json!({"request": "x", "delivery_profile": "poet"}),
            ),
            400,
            "unknown delivery profile",
        ),
        (
            post(&d, "/humanize", json!({"text": "  "})),
            400,
            "nothing to humanize",
        ),
        (
            post(&d, "/humanize", json!({"text": "hi", "profile": "poet"})),
            400,
            "poet",
        ),
        (
            post(
                &d,
                "/prose/contract",
                json!({"text": "fix it", "profile": "poet"}),
            ),
            400,
            "unknown delivery profile",
        ),
        (
            post(
                &d,
                "/plan",
                json!({"plan": {"tasks": [{"id": "A", "agent": "nobody", "instruction": "x"}]}}),
            ),
            400,
            "nobody",
        ),
        (
            post(
                &d,
                "/plan",
                json!({"plan": {"tasks": [], "x": 1}, "request": "y"}),
            ),
            400,
            "not both",
        ),
        (
            post(
                &d,
                "/gate/approve",
                json!({"run_seq": 0, "wave": 0, "approver": "me"}),
            ),
            409,
            "no gate is pending",
        ),
        (post(&d, "/checkpoint", json!({})), 409, "no entries"),
    ];
    for (r, want, needle) in cases {
        status(&r, want, needle);
        assert!(
            r.body.get("error").is_some_and(J::is_string),
            "{}",
            r.body_text()
        );
    }
}

#[test]
fn model_free_routes_match_the_cli() {
    let repo = Repo::new("sha1");
    let d = open(&repo);
    let text = "fix the flaky login test in CI";
    let route = ok(post(&d, "/route", json!({"text": text})));
    let cli: J = serde_json::from_str(&repo.forum_ok(&["route", "--json", text])).unwrap();
    assert_eq!(route, cli);

    let h = ok(post(
        &d,
        "/humanize",
        json!({"text": "As an AI, i think we should utilize the cache", "profile": "engineer"}),
    ));
    let cli: J = serde_json::from_str(&repo.forum_ok(&[
        "humanize",
        "--json",
        "--profile",
        "engineer",
        "As an AI, i think we should utilize the cache",
    ]))
    .unwrap();
    assert_eq!(h, cli);
    assert_eq!(h["schema"], "forum.prose-humanization/v1");

    let c = ok(post(&d, "/prose/contract", json!({"text": text})));
    assert_eq!(c, cli_contract(&repo, text));
    let exec = ok(post(
        &d,
        "/prose/contract",
        json!({"text": text, "profile": "executive"}),
    ));
    assert_eq!(exec["schema"], "forum.communication-contract/v1");
    assert_eq!(exec["profile"], "executive");
    assert_eq!(exec["domain"], c["domain"]);

    let plan = ok(post(
        &d,
        "/plan",
        json!({"plan": serde_json::from_str::<J>(PLAN).unwrap()}),
    ));
    assert_eq!(plan["waves"], json!([["T1"], ["T2"]]));
    assert_eq!(
        plan["tasks"][0]["done_when"],
        json!(["endpoint documented"])
    );

    // No executor: model routes say so, clearly, and write nothing; a resume with no run to
    // continue says that first, as it has nothing to run.
    let before = repo.snapshot();
    for r in [
        post(&d, "/submit", json!({"request": "ship a login API"})),
        post(&d, "/plan", json!({"request": "ship a login API"})),
    ] {
        status(&r, 503, "no executor is configured");
    }
    status(
        &post(&d, "/resume", json!({})),
        409,
        "no unfinished run to resume",
    );
    assert_eq!(repo.snapshot(), before);
    let rt = ok(get(&d, "/runtime"));
    assert_eq!(rt["ready"], false);
    assert_eq!(rt["source"], "current");
}

fn cli_contract(repo: &Repo, text: &str) -> J {
    let route: J = serde_json::from_str(&repo.forum_ok(&["route", "--json", text])).unwrap();
    route["frame"]["communication_contract"].clone()
}

#[test]
fn runtime_reports_the_servers_executors() {
    let repo = Repo::new("sha1");
    let model = model_script(&repo, "0");
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        format!("[runtime.default]\ncmd = \"{model}\"\n"),
    )
    .unwrap();
    let o = repo
        .forum()
        .args(["mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Guarded(o);
    let line = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"forum.runtime.inspect"}}"#;
    let stdin = child.0.stdin.as_mut().unwrap();
    writeln!(stdin, "{line}").unwrap();
    drop(child.0.stdin.take());
    let mut out = String::new();
    child
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(child.0.wait().unwrap().success());
    let reply: J = serde_json::from_str(out.trim()).unwrap();
    let rt = &reply["result"]["structuredContent"];
    assert_eq!(rt["ready"], true, "{rt}");
    assert_eq!(rt["config"]["origin"], "repository");
    assert_eq!(rt["default"]["executor"]["kind"], "command");
}

#[test]
fn runs_gates_plan_and_submit_with_scripted_models() {
    for kind in crate::common::FORMATS {
        eprintln!("on a {kind} repository");
        runs_gates_plan_and_submit_on(Repo::new(kind));
    }
}

fn runs_gates_plan_and_submit_on(repo: Repo) {
    let d = open(&repo).with_seats(seats());

    // Planning writes nothing.
    let before = ok(get(&d, "/status"));
    let plan = ok(post(
        &d,
        "/plan",
        json!({"request": "ship a login API with docs"}),
    ));
    assert_eq!(plan["tasks"].as_array().unwrap().len(), 2);
    assert_eq!(plan["waves"], json!([["T1"], ["T2"]]));
    assert_eq!(ok(get(&d, "/status")), before);

    // A gated run pauses; the gate is listed, edited with a bad id (refused), approved, resumed.
    let r = ok(post(
        &d,
        "/submit",
        json!({"request": "ship a login API with docs", "gate_waves": [1]}),
    ));
    assert_eq!(r["git_forum_receipt"]["status"], "gated");
    assert!(r["answer"].is_null());
    let gates = ok(get(&d, "/gates"));
    let g = &gates["pending"][0];
    assert_eq!(
        (g["wave"].clone(), g["tasks"].clone()),
        (json!(1), json!(["T2"]))
    );
    let key = json!({"run_seq": g["run_seq"], "wave": 1, "approver": "ana"});
    let mut edit = key.clone();
    edit["edits"] = json!({"T9": "x"});
    status(&post(&d, "/gate/edit", edit), 400, "T9");
    let mut edit = key.clone();
    edit["edits"] = json!({});
    status(&post(&d, "/gate/edit", edit), 400, "non-empty");
    let done = ok(post(&d, "/gate/approve", key.clone()));
    assert_eq!(done["resolved"], "approved");
    assert_eq!(done["kind"], "gate_approved");
    assert_eq!(done["causal_parent"], g["seq"]);
    assert_eq!(ok(get(&d, "/gates"))["pending"], json!([]));
    let runs = ok(get(&d, "/runs"));
    assert_eq!(runs["runs"][0]["state"], "gated");
    let resumed = ok(post(&d, "/resume", json!({})));
    assert_eq!(resumed["answer"], ANSWER);
    assert_eq!(resumed["git_forum_receipt"]["status"], "answered");

    // A plain run answers with a receipt, like `git forum submit --json`.
    let r = ok(post(
        &d,
        "/submit",
        json!({"request": "ship a login API with docs", "delivery_profile": "engineer"}),
    ));
    assert_eq!(r["answer"], ANSWER);
    assert_eq!(r["git_forum_receipt"]["schema"], "git-forum.receipt/v1");
    assert_eq!(r["checkpoint"], ok(get(&d, "/status"))["checkpoint"]);

    // No decision without a pending gate (the CLI's rule, on every surface): a decision
    // before the gate is raised, or on a run that has none, is refused and writes nothing.
    let run_seq = r["git_forum_receipt"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| ok(get(&d, &format!("/ledger/{s}")))["kind"] == "plan")
        .cloned()
        .unwrap();
    let before = ok(get(&d, "/status"));
    status(
        &post(
            &d,
            "/gate/reject",
            json!({"run_seq": run_seq, "wave": 0, "approver": "bo", "reason": "no"}),
        ),
        409,
        "no gate is pending",
    );
    status(
        &post(
            &d,
            "/gate/edit",
            json!({"run_seq": run_seq, "wave": 1, "approver": "bo", "edits": {"T2": "shorter docs"}}),
        ),
        409,
        "no gate is pending",
    );
    status(
        &post(
            &d,
            "/gate/approve",
            json!({"run_seq": 0, "wave": 0, "approver": "bo"}),
        ),
        409,
        "no gate is pending",
    );
    assert_eq!(
        ok(get(&d, "/status")),
        before,
        "a refused decision wrote something"
    );

    let runs = ok(get(&d, "/runs"));
    let states: Vec<&str> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, vec!["answered", "answered"]);
    status(&post(&d, "/resume", json!({})), 409, "no unfinished run");
    assert_eq!(ok(get(&d, "/verify"))["ok"], true);
    repo.forum_ok(&["verify", "--deep"]);
}

#[test]
fn report_routes_match_the_cli() {
    let repo = Repo::new("sha1");
    let d = open(&repo).with_seats(seats());
    for (name, r) in [
        ("summary", get(&d, "/summary")),
        ("room", get(&d, "/room")),
        ("capsule", get(&d, "/capsule")),
    ] {
        assert_eq!(
            r.status,
            200,
            "{name} of an empty ledger: {}",
            r.body_text()
        );
    }
    let one = ok(post(
        &d,
        "/submit",
        json!({"request": "ship a login API with docs"}),
    ));
    let two = ok(post(
        &d,
        "/submit",
        json!({"request": "write the API docs", "use_capsule_context": true}),
    ));
    let (ra, rb) = (
        one["git_forum_receipt"]["request_seq"].clone(),
        two["git_forum_receipt"]["request_seq"].clone(),
    );
    let cli = |args: &[&str]| -> J {
        let out = repo.forum_ok(args);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
    };
    assert_eq!(ok(get(&d, "/summary")), cli(&["summary", "--json"]));
    assert_eq!(ok(get(&d, "/room")), cli(&["room", "--json"]));
    assert_eq!(ok(get(&d, "/capsule")), cli(&["capsule", "--json"]));
    let (a, b) = (format!("run:{ra}"), format!("run:{rb}"));
    let bench = ok(post(&d, "/bench", json!({"a": a, "b": b})));
    let want = cli(&["bench", "--json", &a, &b]);
    for k in ["a", "b", "delta", "answers"] {
        assert_eq!(bench[k], want[k], "{k}");
    }
    assert_eq!(bench["labels"]["a"], format!("run {ra} of ledger main"));
    status(
        &post(&d, "/bench", json!({"a": "/tmp", "b": "main"})),
        404,
        "not read over the network",
    );
    status(
        &post(&d, "/bench", json!({"a": "run:999", "b": "main"})),
        404,
        "no run starts",
    );
    let pre = ok(post(
        &d,
        "/context/preflight",
        json!({"request": "ship it", "use_capsule_context": true, "context_token_budget": 10}),
    ));
    let want = cli(&[
        "context",
        "preflight",
        "--json",
        "--use-capsule-context",
        "--context-token-budget",
        "10",
        "ship it",
    ]);
    assert_eq!(pre, want);
    assert_eq!(pre["schema"], "forum.context-preflight/v1");
    let plain = ok(post(
        &d,
        "/context/preflight",
        json!({"request": "ship it"}),
    ));
    assert_eq!(plain, cli(&["context", "preflight", "--json", "ship it"]));
    // The second run planned with the capsule as its request context.
    let kinds: Vec<J> = ok(get(
        &d,
        &format!("/replay/{}", two["git_forum_receipt"]["answer_seq"]),
    ))["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].clone())
        .collect();
    assert!(kinds.contains(&json!("context")), "{kinds:?}");
}

#[test]
fn sync_status_shows_what_fetch_recorded() {
    let remote = Repo::new("sha1");
    remote.append("r", "note", "{}");
    remote.append("r", "note", "{}");
    let repo = Repo::new("sha1");
    repo.git_ok(&["remote", "add", "origin", remote.path().to_str().unwrap()]);
    let d = open(&repo);
    assert_eq!(ok(get(&d, "/sync"))["remotes"], json!([]));
    repo.forum_ok(&["fetch", "origin"]);
    let s = ok(get(&d, "/sync"));
    let row = &s["remotes"][0];
    assert_eq!(
        (row["remote"].clone(), row["ledger"].clone()),
        (json!("origin"), json!("main"))
    );
    assert_eq!(row["adopted"]["size"], 2);
    assert_eq!(row["seen"]["size"], 2);
    assert_eq!(row["relation"], "behind");
    assert_eq!(row["behind"], 2);
    // Adopt the remote's entries locally (same history), then append one: ahead by one.
    let tip = repo.git_ok(&["rev-parse", "refs/forum/remotes/origin/main"]);
    repo.git_ok(&["update-ref", "refs/forum/ledgers/main", &tip]);
    assert_eq!(ok(get(&d, "/sync"))["remotes"][0]["relation"], "in_sync");
    ok(post(
        &d,
        "/append",
        json!({"actor": "l", "kind": "note", "payload": {}}),
    ));
    let row = ok(get(&d, "/sync"))["remotes"][0].clone();
    assert_eq!(
        (row["relation"].clone(), row["ahead"].clone()),
        (json!("ahead"), json!(1))
    );
}

#[test]
fn every_mcp_tool_reaches_its_route() {
    let repo = Repo::new("sha1");
    let d = open(&repo).with_seats(seats());
    let mcp = Mcp::new(&d);
    let call = |name: &str, args: J| -> J {
        let line = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": name, "arguments": args}});
        let r = mcp
            .handle_line(line.to_string().as_bytes())
            .expect("a reply");
        assert_eq!(r["id"], 7);
        r["result"].clone()
    };
    // The ledger first gets entries and a run, so reads and gates have something to act on.
    let appended = call(
        "ledger_append",
        json!({"actor": "mcp", "kind": "note", "payload": {"n": 1}}),
    );
    assert_eq!(appended["isError"], false, "{appended}");
    let ran = call("submit", json!({"request": "ship a login API with docs"}));
    assert_eq!(ran["isError"], false, "{ran}");
    let run_seq = ok(get(&d, "/runs"))["runs"][0]["run_seq"].clone();
    let args_for = |name: &str| -> J {
        match name {
            "submit" | "plan" => json!({"request": "ship a login API with docs"}),
            "route" | "forum.prose.humanize" | "forum.prose.contract" => {
                json!({"text": "fix the login bug"})
            }
            "ledger_get" | "ledger_payload" | "ledger_replay" | "ledger_why" | "ledger_prove" => {
                json!({"seq": 0})
            }
            "ledger_append" => json!({"actor": "mcp", "kind": "note", "payload": {"n": 1}}),
            "gate_approve" | "gate_reject" => {
                json!({"run_seq": run_seq, "wave": 0, "approver": "x"})
            }
            "gate_edit" => {
                json!({"run_seq": run_seq, "wave": 0, "approver": "x", "edits": {"T1": "y"}})
            }
            "bench" => json!({"a": "run:1", "b": "main"}),
            "forum.context.preflight" => {
                json!({"request": "ship it", "use_capsule_context": true})
            }
            "forum.import_trace" | "forum.mine" => json!({"trace": [{"actor": "a", "kind": "k"}]}),
            "campaign_declare" => {
                json!({"campaign": {"campaign_id": "c", "title": "t", "projects": [
                    {"project_id": "p", "owner": "forum", "features": [{"feature_id": "f", "agent": "backend", "instruction": "do it"}]},
                    {"project_id": "x", "owner": "external:y", "features": [{"feature_id": "g"}]}
                ]}})
            }
            "campaign_ingest_status" => {
                json!({"project": "x", "feature": "g", "status": "done", "source": "external:y"})
            }
            "tlog_prove" => json!({"seq": 0}),
            "tlog_read" => json!({"path": "checkpoint"}),
            "hooks_check" => json!({"hook": "pre-receive", "stdin": ""}),
            "lane_check" => json!({"task": "t", "lane": "observe", "scopes": ["read"]}),
            _ => json!({}),
        }
    };
    for tool in TOOLS {
        let result = call(tool.name, args_for(tool.name));
        // Every tool's text is its route's HTTP body, exactly.
        let (method, path) = match tool.target {
            Target::Get(p) => ("GET", p.to_string()),
            Target::GetSeq(p) => ("GET", format!("{p}0")),
            Target::Post(p) => ("POST", p.to_string()),
            Target::GetPath(p) => ("GET", format!("{p}checkpoint")),
        };
        // Only resume, the gate decisions, the witness, diff, attest, apply (and its dry run),
        // discard and halt fail here: every run in the ledger has finished, no gate is pending (a decision needs one,
        // as at the command line), this server is no witness (tests/integration/witness.rs
        // calls it as one), no run here worked in or changed the repository, and none is
        // running; nor has this
        // repository a note key, so there is no signed note to prove against, read or make.
        // Blame is called without a file (tests/integration/blame.rs calls it with one), and
        // strict replay and reproduce without a run (tests/integration/replay_surface.rs calls
        // them through the real binary, which the replay starts again without a network).
        // The worker tools are called with no server and no name
        // (tests/integration/dispatch_workers.rs starts and stops a worker on a real one).
        let expected_error = matches!(
            tool.name,
            "tlog_prove"
                | "tlog_checkpoint"
                | "tlog_read"
                | "halt"
                | "resume"
                | "gate_approve"
                | "gate_edit"
                | "gate_reject"
                | "witness"
                | "diff"
                | "attest"
                | "blame"
                | "apply"
                | "apply_dry_run"
                | "discard"
                | "replay_strict"
                | "reproduce"
                | "worker_start"
                | "worker_stop"
        );
        assert_eq!(result["isError"], expected_error, "{}: {result}", tool.name);
        let text = result["content"][0]["text"].as_str().unwrap();
        let body: J = serde_json::from_str(text).unwrap();
        match result.get("structuredContent") {
            Some(s) => assert_eq!(&body, s),
            // A list (ledger_log) is given as text alone: structured content is an object.
            None => assert!(body.is_array(), "{}: {result}", tool.name),
        }
        if method == "GET" {
            assert_eq!(body, d.handle(method, &path, b"").body, "{}", tool.name);
        }
        for alias in tool.aliases {
            if method == "GET" {
                assert_eq!(call(alias, args_for(tool.name)), result, "{alias}");
            }
        }
    }
    // Tool-level failures are results with isError, not protocol errors.
    let r = call("ledger_get", json!({"seq": 999}));
    assert_eq!(r["isError"], true);
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("no entry at seq 999")
    );
    assert_eq!(call("ledger_get", json!({"seq": "x"}))["isError"], true);
    assert_eq!(call("status", json!({"x": 1}))["isError"], true);
    assert_eq!(call("route", json!({"text": 1}))["isError"], true);
}

#[test]
fn routes_listed_are_the_routes_answered() {
    let repo = Repo::new("sha1");
    let d = open(&repo);
    for (method, path, _) in ROUTES {
        let path = path.replace("<seq>", "0");
        let r = d.handle(method, &path, b"");
        assert!(
            ![404, 405].contains(&r.status)
                || r.message().contains("no entry")
                || r.message().contains("no run")
                || r.message().contains("no campaign"),
            "{method} {path}: {}",
            r.body_text()
        );
    }
}

// ----- the real daemon over HTTP -----

struct Daemon {
    child: Guarded,
    addr: String,
    /// The bearer token, read from the file the daemon named.
    token: String,
    token_file: std::path::PathBuf,
    _stdout: BufReader<ChildStdout>,
}

impl Daemon {
    fn start(repo: &Repo, args: &[&str]) -> Daemon {
        Daemon::start_with_env(repo, args, &[])
    }

    fn start_with_env(repo: &Repo, args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let log = std::fs::File::create(repo.path().join("serve.log")).unwrap();
        let served = repo.serve_with_env(args, Stdio::from(log), env);
        let token = served.token();
        Daemon {
            child: served.child,
            addr: served.addr,
            token,
            token_file: served.token_file,
            _stdout: served.stdout,
        }
    }

    fn auth(&self) -> Vec<(String, String)> {
        vec![bearer(&self.token)]
    }

    fn call(&self, method: &str, path: &str, body: Option<&J>) -> (u16, J) {
        let headers: Vec<(String, String)> = self.auth();
        let body = body.map(|b| b.to_string());
        let (code, _, text) = http(
            &self.addr,
            method,
            path,
            &headers,
            body.as_deref().unwrap_or("").as_bytes(),
        );
        (
            code,
            serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{method} {path}: {e}: {text:?}")),
        )
    }

    fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = rustix::process::Pid::from_child(&self.child.0);
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        crate::common::wait_for("the daemon did not stop", Duration::from_secs(60), || {
            self.child.0.try_wait().unwrap()
        })
    }
}

/// The `Authorization` header of `token`.
fn bearer(token: &str) -> (String, String) {
    ("Authorization".to_string(), format!("Bearer {token}"))
}

/// One request on its own connection: (status, headers, body).
fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> (u16, String, String) {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    parse_response(&raw(addr, &bytes))
}

/// Sends `bytes` and reads until the server closes.
fn raw(addr: &str, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_response(text: &str) -> (u16, String, String) {
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no response: {text:?}"));
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    (code, head.to_string(), body.to_string())
}

#[test]
fn the_daemon_serves_guards_and_drains_on_sigterm() {
    let repo = Repo::new("sha1");
    let model = model_script(&repo, "0");
    let mut d = Daemon::start(
        &repo,
        &[
            "--require-token",
            "--cmd",
            &model,
            "--read-timeout",
            "1",
            "--max-body",
            "4096",
        ],
    );
    let token = d.token.clone();
    assert_eq!(token.len(), 64);
    // The token lives under the state root, never under the git dir, and only the user can
    // read it.
    assert!(
        d.token_file.starts_with(repo.state_dir()),
        "{:?}",
        d.token_file
    );
    assert!(!repo.git_dir().join("forum/serve-token").exists());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&d.token_file)
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );

    // The token: with --require-token every read but /health asks it too.
    let addr = d.addr.clone();
    let (code, head, body) = http(&addr, "GET", "/status", &[], b"");
    assert_eq!(code, 401, "{body}");
    assert!(
        head.to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{head}"
    );
    assert!(serde_json::from_str::<J>(&body).unwrap()["error"].is_string());
    let wrong = vec![("Authorization".to_string(), "Bearer 00".to_string())];
    assert_eq!(http(&addr, "GET", "/status", &wrong, b"").0, 401);
    assert_eq!(http(&addr, "GET", "/health", &[], b"").0, 200);
    assert_eq!(d.call("GET", "/status", None).0, 200);

    // Host and Origin (DNS rebinding).
    let auth = format!("Authorization: Bearer {token}\r\n");
    for (host, origin) in [
        ("evil.example", ""),
        ("127.0.0.1:1", ""),
        (addr.as_str(), "Origin: http://evil.example\r\n"),
    ] {
        let req = format!(
            "GET /health HTTP/1.1\r\nHost: {host}\r\n{origin}{auth}Connection: close\r\n\r\n"
        );
        let (code, _, body) = parse_response(&raw(&addr, req.as_bytes()));
        assert_eq!(code, 403, "{host} {origin}: {body}");
    }
    let port = addr.rsplit(':').next().unwrap();
    let req = format!(
        "GET /health HTTP/1.1\r\nHost: localhost:{port}\r\nOrigin: http://localhost:{port}\r\n{auth}Connection: close\r\n\r\n"
    );
    assert_eq!(parse_response(&raw(&addr, req.as_bytes())).0, 200);

    // Paths, methods, bodies.
    assert_eq!(d.call("GET", "/nope", None).0, 404);
    assert_eq!(d.call("GET", "/status?x=1", None).0, 404);
    let (code, head, _) = http(&addr, "DELETE", "/status", &d.auth(), b"");
    assert_eq!(code, 405);
    assert!(head.to_ascii_lowercase().contains("allow: get"), "{head}");
    let (code, _, body) = http(&addr, "POST", "/route", &d.auth(), b"{oops");
    assert_eq!(code, 400, "{body}");
    let big = format!(r#"{{"text": "{}"}}"#, "x".repeat(5000));
    let (code, _, body) = http(&addr, "POST", "/route", &d.auth(), big.as_bytes());
    assert_eq!(code, 413, "{body}");
    // A chunked body over the limit is cut while it is read.
    let chunk = "y".repeat(3000);
    let req = format!(
        "POST /route HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{chunk}\r\n{:x}\r\n{chunk}\r\n0\r\n\r\n",
        chunk.len(),
        chunk.len()
    );
    assert_eq!(parse_response(&raw(&addr, req.as_bytes())).0, 413);

    // A slow client that never finishes its body: 408 for it, no effect on anyone else.
    let slow_addr = addr.clone();
    let slow_auth = auth.clone();
    let (head_sent, head_is_sent) = std::sync::mpsc::channel();
    let slow = std::thread::spawn(move || {
        let mut s = TcpStream::connect(&slow_addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let head = format!(
            "POST /route HTTP/1.1\r\nHost: {slow_addr}\r\n{slow_auth}Content-Type: application/json\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{{\"text\":"
        );
        s.write_all(head.as_bytes()).unwrap();
        head_sent.send(()).unwrap();
        let t = Instant::now();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        (
            parse_response(&String::from_utf8_lossy(&out)).0,
            t.elapsed(),
        )
    });
    // The slow client is connected, its head sent, before anyone else asks.
    head_is_sent
        .recv_timeout(Duration::from_secs(30))
        .expect("the slow client never sent its head");
    let t = Instant::now();
    assert_eq!(d.call("GET", "/status", None).0, 200);
    assert!(
        t.elapsed() < Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
    let (code, took) = slow.join().unwrap();
    assert_eq!(code, 408);
    assert!(took >= Duration::from_millis(900), "{took:?}");

    // The engine: a real run with the repository's executor given on the server's command line.
    let (code, r) = d.call(
        "POST",
        "/submit",
        Some(&json!({"request": "ship a login API with docs"})),
    );
    assert_eq!(code, 200, "{r}");
    assert_eq!(r["answer"], ANSWER);
    let (code, a) = d.call(
        "POST",
        "/append",
        Some(&json!({"actor": "http", "kind": "note", "payload": {"n": 1}})),
    );
    assert_eq!(code, 200, "{a}");
    let (_, st) = d.call("GET", "/status", None);
    assert_eq!(st["entries"], a["seq"].as_u64().unwrap() + 1);
    assert_eq!(d.call("GET", "/verify", None).1["ok"], true);

    let exit = d.terminate();
    assert!(exit.success(), "{exit:?}");
    let log = std::fs::read_to_string(repo.path().join("serve.log")).unwrap();
    assert!(log.contains("stopped; every request finished"), "{log}");
    repo.forum_ok(&["verify", "--deep"]);
}

#[test]
fn sigterm_stops_an_inflight_run_and_witnesses_it() {
    let repo = Repo::new("sha1");
    let model = model_script(&repo, "1");
    let mut d = Daemon::start(&repo, &["--cmd", &model, "--drain", "30"]);
    let addr = d.addr.clone();
    let auth = d.auth();
    let run = std::thread::spawn(move || {
        let body = json!({"request": "ship a login API with docs"}).to_string();
        http(&addr, "POST", "/submit", &auth, body.as_bytes())
    });
    crate::common::wait_until("the run never started", Duration::from_secs(30), || {
        let (_, st) = d.call("GET", "/status", None);
        st["entries"].as_u64().unwrap() >= 3
    });
    let exit = d.terminate();
    assert!(exit.success(), "{exit:?}");
    let (code, _, body) = run.join().unwrap();
    assert_eq!(code, 200, "{body}");
    let r: J = serde_json::from_str(&body).unwrap();
    assert_eq!(r["git_forum_receipt"]["status"], "stopped_on_budget", "{r}");
    let seq = r["git_forum_receipt"]["interrupted_seq"]
        .as_u64()
        .expect("witnessed as interrupted");
    let shown = repo.forum_json(&["show", &seq.to_string()]);
    assert_eq!(shown["kind"], "interrupted");
    let runs = repo.forum_json(&["runs"]);
    assert_eq!(runs["runs"][0]["state"], "stopped_on_budget");
    repo.forum_ok(&["verify", "--deep"]);
}

#[test]
fn appends_through_the_daemon_and_the_cli_at_once_lose_nothing() {
    let repo = Repo::new("sha1");
    let d = Daemon::start(&repo, &[]);
    let (threads, per) = (4, 20);
    let (cli_threads, cli_per) = (2, 10);
    let mut handles = Vec::new();
    for t in 0..threads {
        let addr = d.addr.clone();
        let auth = d.auth();
        handles.push(std::thread::spawn(move || {
            let mut seqs = Vec::new();
            for i in 0..per {
                let body = json!({"actor": format!("http-{t}-{i}"), "kind": "http", "payload": {"t": t, "i": i}}).to_string();
                let (code, _, text) = http(&addr, "POST", "/append", &auth, body.as_bytes());
                assert_eq!(code, 200, "{text}");
                let v: J = serde_json::from_str(&text).unwrap();
                seqs.push(v["seq"].as_u64().unwrap());
            }
            seqs
        }));
    }
    // Readers at the same time: every read answers 200 while the tip moves under them.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (addr, stop) = (d.addr.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let (code, _, text) = http(&addr, "GET", "/status", &[], b"");
                assert_eq!(code, 200, "{text}");
                let n = serde_json::from_str::<J>(&text).unwrap()["entries"]
                    .as_u64()
                    .unwrap();
                for path in [
                    format!("/payload/{}", n.saturating_sub(1)),
                    format!("/ledger/{}", n / 2),
                    "/runs".into(),
                ] {
                    if n > 0 {
                        let (code, _, text) = http(&addr, "GET", &path, &[], b"");
                        assert_eq!(code, 200, "{path}: {text}");
                        reads += 1;
                    }
                }
            }
            reads
        })
    };
    let forum = env!("CARGO_BIN_EXE_git-forum");
    let dir = repo.path().to_path_buf();
    let mut cli = Vec::new();
    for t in 0..cli_threads {
        let dir = dir.clone();
        cli.push(std::thread::spawn(move || {
            for i in 0..cli_per {
                let o = Command::new(forum)
                    .current_dir(&dir)
                    .env("GIT_CONFIG_GLOBAL", "/dev/null")
                    .env("GIT_CONFIG_SYSTEM", "/dev/null")
                    .env("HOME", &dir)
                    .env_remove("GIT_DIR")
                    .env_remove("GIT_FORUM_LEDGER")
                    .args([
                        "append",
                        "--actor",
                        &format!("cli-{t}-{i}"),
                        "--kind",
                        "cli",
                        "--payload",
                        "{}",
                    ])
                    .output()
                    .unwrap();
                assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            }
        }));
    }
    let mut seqs: Vec<u64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    for c in cli {
        c.join().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(reader.join().unwrap() > 0);
    let total = threads * per + cli_threads * cli_per;
    seqs.sort();
    seqs.dedup();
    assert_eq!(
        seqs.len(),
        threads * per,
        "an acknowledged seq was given twice"
    );
    let (_, st) = d.call("GET", "/status", None);
    assert_eq!(st["entries"], total);
    let log = repo.forum_json(&["log"]);
    let mut actors: Vec<String> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["actor"].as_str().unwrap().to_string())
        .collect();
    actors.sort();
    let mut want: Vec<String> = (0..threads)
        .flat_map(|t| (0..per).map(move |i| format!("http-{t}-{i}")))
        .chain((0..cli_threads).flat_map(|t| (0..cli_per).map(move |i| format!("cli-{t}-{i}"))))
        .collect();
    want.sort();
    assert_eq!(actors, want);
    repo.forum_ok(&["verify", "--deep"]);
    repo.fsck();
    drop(d);
}

/// Reads answered from the daemon's cache follow the ledger's ref wherever it moves: an append
/// by another process (the CLI), the ref packed away from its loose file, and the ref moved
/// back. Each read right after the move sees it; none answers from a stale tip.
#[test]
fn cached_reads_follow_the_tip_when_another_process_moves_it() {
    crate::common::on_each_kind(|repo| {
        for i in 0..3 {
            repo.append("cli", "note", &format!("{{\"i\": {i}}}"));
        }
        let d = Daemon::start(repo, &[]);
        let entries = |d: &Daemon| {
            let (code, st) = d.call("GET", "/status", None);
            assert_eq!(code, 200, "{st}");
            let (code, cp) = d.call("GET", "/checkpoint", None);
            assert_eq!(code, 200, "{cp}");
            assert_eq!(st["checkpoint"], cp["checkpoint"]);
            assert_eq!(st["entries"], cp["size"]);
            st["entries"].as_u64().unwrap()
        };
        assert_eq!(entries(&d), 3);
        assert_eq!(d.call("GET", "/ledger/3", None).0, 404);
        // Another process appends: the next reads see it at once.
        let appended = repo.append("cli-later", "note", r#"{"i": 3}"#);
        assert_eq!(appended["seq"], 3);
        assert_eq!(entries(&d), 4);
        let (code, e) = d.call("GET", "/ledger/3", None);
        assert_eq!(code, 200, "{e}");
        assert_eq!(e["actor"], "cli-later", "{e}");
        let (code, log) = d.call("GET", "/log?limit=1", None);
        assert_eq!(code, 200, "{log}");
        assert_eq!(log[0]["actor"], "cli-later", "{log}");
        let cli = repo.forum_json(&["status"]);
        let (_, st) = d.call("GET", "/status", None);
        assert_eq!(st["checkpoint"], cli["checkpoint"], "{st} vs {cli}");
        // The ref packed (no loose file left), then appended to again.
        repo.git_ok(&["pack-refs", "--all"]);
        assert_eq!(entries(&d), 4);
        repo.append("cli-packed", "note", r#"{"i": 4}"#);
        assert_eq!(entries(&d), 5);
        assert_eq!(d.call("GET", "/ledger/4", None).1["actor"], "cli-packed");
        // The ref moved back to seq 2: the reads say 3 entries, and seq 3 is gone.
        let third = repo.git_ok(&["rev-parse", &format!("{}~2", crate::common::LEDGER_REF)]);
        repo.git_ok(&["update-ref", crate::common::LEDGER_REF, third.trim()]);
        assert_eq!(entries(&d), 3);
        assert_eq!(d.call("GET", "/ledger/3", None).0, 404);
        let (code, log) = d.call("GET", "/log?limit=1", None);
        assert_eq!(code, 200, "{log}");
        assert_eq!(log[0]["seq"], 2, "{log}");
    });
}

/// The kept reads follow the ref by any distance, on each repository kind: one entry appended
/// by another process (walked by the read that finds it, on its own worker), more than a few
/// at once (walked where it may block), and the ref moved back by one entry and by many. After
/// each move every answer is byte for byte the ordinary path's, and `/status` counts the
/// entries the ledger holds.
#[test]
fn kept_reads_follow_moves_of_one_entry_and_of_many() {
    crate::common::on_each_kind(|repo| {
        for i in 0..2 {
            repo.append("cli", "note", &format!("{{\"i\": {i}}}"));
        }
        let d = Daemon::start(repo, &[]);
        let auth = d.auth();
        let read = |path: &str| {
            let (code, _, text) = http(&d.addr, "GET", path, &auth, b"");
            assert_eq!(code, 200, "{path}: {text}");
            text
        };
        let check = |want: u64| {
            for path in ["/status", "/checkpoint", "/ledger/1"] {
                let ordinary = open(repo).handle("GET", path, b"").body_text();
                assert_eq!(read(path), ordinary, "{path} at {want} entries");
            }
            // The spelling the kept path leaves to the ordinary one.
            for (kept, ordinary) in [
                ("/log?limit=3", "/log?limit=03"),
                ("/log?limit=10", "/log?limit=010"),
            ] {
                assert_eq!(read(kept), read(ordinary), "{kept} at {want} entries");
            }
            let (_, _, st) = http(&d.addr, "GET", "/status", &auth, b"");
            let st: J = serde_json::from_str(&st).unwrap();
            assert_eq!(st["entries"], want, "{st}");
        };
        check(2);
        let mut n = 2u64;
        for more in [1, 1, 6, 2, 9] {
            for _ in 0..more {
                repo.append("cli", "note", &format!("{{\"i\": {n}}}"));
                n += 1;
            }
            check(n);
        }
        for back in [1u64, 7] {
            let rev = format!("{}~{back}", crate::common::LEDGER_REF);
            let to = repo.git_ok(&["rev-parse", &rev]);
            repo.git_ok(&["update-ref", crate::common::LEDGER_REF, to.trim()]);
            n -= back;
            check(n);
        }
        repo.append("cli", "note", r#"{"after": "the move back"}"#);
        check(n + 1);
    });
}

/// The entry and body answers kept for reads (those taken without the cache's lock too) hold
/// only for the commits they were made from: after another process's redaction rewrites the
/// commits, the next reads give the redacted body and the ordinary path's bytes, on each
/// repository kind.
#[test]
fn kept_entry_and_body_answers_follow_a_rewrite() {
    crate::common::on_each_kind(|repo| {
        for i in 0..4 {
            repo.append("cli", "note", &format!("{{\"i\": {i}}}"));
        }
        let d = Daemon::start(repo, &[]);
        let auth = d.auth();
        let text = |path: &str| {
            let (code, _, text) = http(&d.addr, "GET", path, &auth, b"");
            assert_eq!(code, 200, "{path}: {text}");
            text
        };
        let read = |path: &str| serde_json::from_str::<J>(&text(path)).unwrap();
        // Three times each: the first read makes the answer, the later ones take it kept.
        let hash = read("/ledger/1")["payload_hash"].clone();
        for _ in 0..3 {
            assert_eq!(read("/payload/1")["payload"], json!({"i": 1}));
            assert_eq!(read("/ledger/1")["payload_hash"], hash);
            assert_eq!(read("/payload/2")["payload"], json!({"i": 2}));
        }
        repo.forum_ok(&["redact", hash.as_str().unwrap(), "--reason", "test"]);
        for _ in 0..3 {
            // A read that finds the rewrite first, then the body: the answer kept for seq 1
            // before the rewrite is not the one given.
            assert_eq!(read("/status")["entries"], 5);
            let p = read("/payload/1");
            assert_eq!(p["redacted"], json!(true), "{p}");
            assert_eq!(p["payload"], J::Null, "{p}");
            assert_eq!(read("/payload/2")["payload"], json!({"i": 2}));
            for path in ["/ledger/1", "/payload/1", "/payload/3", "/status"] {
                let ordinary = open(repo).handle("GET", path, b"").body_text();
                assert_eq!(text(path), ordinary, "{path}");
            }
        }
        drop(d);
    });
}

/// Reads answered from the daemon's kept bytes see each append it has answered at once, and
/// are byte for byte the answers of the ordinary path (the dispatcher in process, or a
/// spelling the kept path leaves to it), with the same headers.
#[test]
fn kept_reads_see_the_daemons_own_appends_at_once_and_match_the_ordinary_path() {
    let repo = Repo::new("sha1");
    let d = Daemon::start(&repo, &[]);
    let ordinary = open(&repo);
    let auth = d.auth();
    let get = |path: &str| {
        let (code, head, text) = http(&d.addr, "GET", path, &[], b"");
        assert_eq!(code, 200, "{path}: {text}");
        let head = head.to_ascii_lowercase();
        for h in [
            "content-type: application/json",
            "cache-control: no-store",
            "x-content-type-options: nosniff",
        ] {
            assert!(head.contains(h), "{path}: {head}");
        }
        text
    };
    let parse = |text: &str| serde_json::from_str::<J>(text).unwrap();
    for i in 0..12u64 {
        let body = json!({"actor": "t", "kind": "note", "payload": {"i": i}}).to_string();
        let (code, _, text) = http(&d.addr, "POST", "/append", &auth, body.as_bytes());
        assert_eq!(code, 200, "{text}");
        assert_eq!(parse(&text)["seq"], i);
        // Twice each: the first read may make the answer, the second is the kept one.
        for _ in 0..2 {
            let st = get("/status");
            assert_eq!(parse(&st)["entries"], i + 1, "{st}");
            assert_eq!(st, get("/status"));
            assert_eq!(st, ordinary.handle("GET", "/status", b"").body_text());
            let cp = get("/checkpoint");
            assert_eq!(parse(&cp)["size"], i + 1, "{cp}");
            assert_eq!(cp, ordinary.handle("GET", "/checkpoint", b"").body_text());
            let log = get("/log?limit=2");
            assert_eq!(parse(&log)[0]["seq"], i, "{log}");
            assert_eq!(log, get("/log?limit=02"));
            let entry = get(&format!("/ledger/{i}"));
            assert_eq!(parse(&entry)["seq"], i, "{entry}");
            let path = format!("/ledger/{}", i / 2);
            assert_eq!(get(&path), ordinary.handle("GET", &path, b"").body_text());
            let body = get(&format!("/payload/{i}"));
            assert!(body.contains(&format!("\"i\":{i}")), "{body}");
            let path = format!("/payload/{i}");
            assert_eq!(body, ordinary.handle("GET", &path, b"").body_text());
        }
    }
    drop(d);
}

/// Each append the daemon has answered is in the very next `/status` and `/log` it serves,
/// on each repository kind, while another client reads the same routes all along (so the kept
/// answers are made and dropped between the appends, and the reads race the appends). An
/// append by another process in between is found as well, and the log then holds every entry
/// the CLI's does, byte for byte the ordinary path's answer.
#[test]
fn status_and_log_see_each_append_at_once_while_others_read() {
    use std::sync::atomic::{AtomicBool, Ordering};
    crate::common::on_each_kind(|repo| {
        let d = Daemon::start(repo, &[]);
        let auth = d.auth();
        let parse = |text: &str| serde_json::from_str::<J>(text).unwrap();
        let read = |path: &str| {
            let (code, _, text) = http(&d.addr, "GET", path, &auth, b"");
            assert_eq!(code, 200, "{path}: {text}");
            text
        };
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (addr, auth, stop) = (d.addr.clone(), auth.clone(), stop.clone());
            std::thread::spawn(move || {
                let (mut last, mut reads) = (0, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    for path in ["/status", "/log?limit=10", "/log?limit=3"] {
                        let (code, _, text) = http(&addr, "GET", path, &auth, b"");
                        assert_eq!(code, 200, "{path}: {text}");
                        let v: J = serde_json::from_str(&text).unwrap();
                        // The size a read saw never goes back.
                        let size = match v["entries"].as_u64() {
                            Some(n) => n,
                            None => v[0]["seq"].as_u64().map_or(0, |s| s + 1),
                        };
                        assert!(size >= last, "{path} went back from {last} to {size}");
                        last = size;
                        reads += 1;
                    }
                }
                reads
            })
        };
        // Warm every kept answer before the first append.
        assert_eq!(parse(&read("/status"))["entries"], 0);
        assert_eq!(parse(&read("/log?limit=10")), json!([]));
        for i in 0..16u64 {
            let appended = if i % 5 == 4 {
                repo.append("cli", "note", &format!("{{\"i\": {i}}}"))
            } else {
                let body = json!({"actor": "t", "kind": "note", "payload": {"i": i}});
                let (code, a) = d.call("POST", "/append", Some(&body));
                assert_eq!(code, 200, "{a}");
                a
            };
            assert_eq!(appended["seq"], i, "{appended}");
            let st = parse(&read("/status"));
            assert_eq!(st["entries"], i + 1, "{st}");
            let newest = parse(&read("/log?limit=1"));
            assert_eq!(newest[0]["seq"], i, "{newest}");
            assert_eq!(newest[0]["entry_hash"], appended["entry_hash"], "{newest}");
            let log = read("/log?limit=10");
            let seqs: Vec<u64> = parse(&log)
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["seq"].as_u64().unwrap())
                .collect();
            let want: Vec<u64> = (0..=i).rev().take(10).collect();
            assert_eq!(seqs, want, "{log}");
            // The spelling the kept path leaves to the ordinary one gives the same bytes.
            assert_eq!(log, read("/log?limit=010"));
            let ordinary = open(repo).handle("GET", "/status", b"").body_text();
            assert_eq!(read("/status"), ordinary);
        }
        stop.store(true, Ordering::Relaxed);
        assert!(reader.join().unwrap() > 0, "the reader read nothing");
        let all = parse(&read("/log?limit=100"));
        assert_eq!(all, repo.forum_json(&["log"]));
        assert_eq!(
            parse(&read("/status"))["checkpoint"],
            repo.forum_json(&["status"])["checkpoint"]
        );
    });
}

// ----- MCP as a child process -----

#[test]
fn mcp_transcript_over_stdio() {
    let repo = Repo::new("sha1");
    let input = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"[1,2]"#,
        r#"5"#,
        r#"garbage"#,
        "",
        r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"resources/list"}"#,
        r#"{"jsonrpc":"1.0","id":4,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"no_such_tool"}}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"ledger_append","arguments":{"actor":"mcp","kind":"note","payload":{"n":1}}}}"#,
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"status"}}"#,
        r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"ledger_get","arguments":{"seq":5}}}"#,
        r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"humanize","arguments":{"text":"as an ai, it works"}}}"#,
        r#"{"jsonrpc":"2.0","id":9,"method":"tools/list"}"#,
    ];
    // The client waits for each request's reply before the next line, as one must when a
    // call reads what an earlier one wrote (tool calls run concurrently).
    let (ok, out, err) = repo.mcp_exchange(&[], &input);
    assert!(ok, "{err}");
    assert!(err.contains("git forum mcp: ledger main"), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    let version = env!("CARGO_PKG_VERSION");
    let expected = [
        format!(r#"{{"id":1,"jsonrpc":"2.0","result":{{"capabilities":{{"tools":{{"listChanged":false}}}},"instructions":"git forum over ledger \"main\": every tool is a route of the git forum daemon; writes are witnessed in the ledger.","protocolVersion":"2025-06-18","serverInfo":{{"name":"git-forum","version":"{version}"}}}}}}"#),
        r#"{"error":{"code":-32600,"message":"Invalid Request: a message must be a JSON object"},"jsonrpc":"2.0"}"#.into(),
        r#"{"error":{"code":-32600,"message":"Invalid Request: a message must be a JSON object"},"jsonrpc":"2.0"}"#.into(),
        r#"{"error":{"code":-32700,"message":"Parse error: expected value at line 1 column 1"},"jsonrpc":"2.0"}"#.into(),
        r#"{"id":2,"jsonrpc":"2.0","result":{}}"#.into(),
        r#"{"error":{"code":-32601,"message":"Method not found: resources/list"},"id":3,"jsonrpc":"2.0"}"#.into(),
        r#"{"error":{"code":-32600,"message":"Invalid Request: jsonrpc must be \"2.0\""},"id":4,"jsonrpc":"2.0"}"#.into(),
        r#"{"error":{"code":-32600,"message":"Invalid Request: id must be a string or a number"},"jsonrpc":"2.0"}"#.into(),
        r#"{"error":{"code":-32602,"message":"Unknown tool: no_such_tool"},"id":5,"jsonrpc":"2.0"}"#.into(),
        r#"{"id":6,"jsonrpc":"2.0","result":{"content":[{"text":"{\"commit\":\"<hex>\",\"entry_hash\":\"<hex>\",\"seq\":0}","type":"text"}],"isError":false,"structuredContent":{"commit":"<hex>","entry_hash":"<hex>","seq":0}}}"#.into(),
        r#"{"id":7,"jsonrpc":"2.0","result":{"content":[{"text":"{\"checkpoint\":\"<hex>\",\"entries\":1,\"ledger\":\"main\"}","type":"text"}],"isError":false,"structuredContent":{"checkpoint":"<hex>","entries":1,"ledger":"main"}}}"#.into(),
        r#"{"id":8,"jsonrpc":"2.0","result":{"content":[{"text":"{\"error\":\"no entry at seq 5 (the ledger holds 1 entries)\"}","type":"text"}],"isError":true,"structuredContent":{"error":"no entry at seq 5 (the ledger holds 1 entries)"}}}"#.into(),
    ];
    assert_eq!(lines.len(), expected.len() + 2, "{out}");
    for (got, want) in lines.iter().zip(expected.iter()) {
        assert_eq!(hexes(got), *want);
    }
    let humanized: J = serde_json::from_str(lines[expected.len()]).unwrap();
    assert_eq!(humanized["id"], "x");
    assert_eq!(
        humanized["result"]["structuredContent"]["output"],
        "It works."
    );
    let list: J = serde_json::from_str(lines[expected.len() + 1]).unwrap();
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, TOOLS.iter().map(|t| t.name).collect::<Vec<_>>());
    for t in list["result"]["tools"].as_array().unwrap() {
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
    }
    repo.forum_ok(&["verify", "--deep"]);
}

// ----- the daemon's edges: slow clients, pages, a long verify, retried appends -----

/// One request with extra headers on its own connection; (status, JSON body).
fn call_with(d: &Daemon, method: &str, path: &str, headers: &[(&str, &str)], body: &J) -> (u16, J) {
    let mut headers: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    headers.extend(d.auth());
    let (code, _, text) = http(&d.addr, method, path, &headers, body.to_string().as_bytes());
    (
        code,
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {path}: {e}: {text:?}")),
    )
}

#[test]
fn a_client_that_drips_its_headers_is_closed() {
    let repo = Repo::new("sha1");
    let mut d = Daemon::start(&repo, &["--read-timeout", "1"]);
    let mut s = TcpStream::connect(&d.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    s.write_all(format!("GET /health HTTP/1.1\r\nHost: {}\r\nX-Slow: ", d.addr).as_bytes())
        .unwrap();
    // One byte at a time, never ending the head, until the server closes the connection.
    let started = Instant::now();
    let mut buf = [0u8; 256];
    let closed = loop {
        if started.elapsed() > Duration::from_secs(60) {
            break false;
        }
        if s.write_all(b"a").is_err() {
            break true;
        }
        match s.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => break true, // an error answer, then the close
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break true,
        }
    };
    assert!(
        closed,
        "a connection dripping its headers was still open after 60 s"
    );
    // The server itself is fine.
    assert_eq!(d.call("GET", "/health", None), (200, json!({"ok": true})));
    assert!(d.terminate().success());
}

#[test]
fn replay_is_read_a_page_at_a_time() {
    let repo = Repo::new("sha1");
    let mut d = Daemon::start(&repo, &[]);
    for i in 0..25 {
        let (code, r) = d.call(
            "POST",
            "/append",
            Some(&json!({"actor": "a", "kind": "note", "payload": {"i": i}})),
        );
        assert_eq!((code, r["seq"].clone()), (200, json!(i)));
    }
    let seqs = |v: &J| -> Vec<u64> {
        v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect()
    };
    // Without a query: the whole range fits one page.
    let (code, all) = d.call("GET", "/replay/24", None);
    assert_eq!(code, 200);
    assert_eq!(seqs(&all), (0..25).collect::<Vec<_>>());
    assert_eq!(all["next"], J::Null);
    // Pages of 10, each pointing at the next, up to seq 22.
    let mut got = Vec::new();
    let mut path = "/replay/22?limit=10".to_string();
    let mut pages = 0;
    loop {
        let (code, page) = d.call("GET", &path, None);
        assert_eq!(code, 200, "{page}");
        assert!(seqs(&page).len() <= 10);
        got.extend(seqs(&page));
        pages += 1;
        match page["next"].as_u64() {
            Some(n) => path = format!("/replay/22?limit=10&after={n}"),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(got, (0..23).collect::<Vec<_>>());
    // Bad pages are 400s with one line; other paths still take no query.
    for (path, code, needle) in [
        ("/replay/5?limit=0", 400, "at least 1"),
        ("/replay/5?limit=x", 400, "non-negative integer"),
        ("/replay/5?limit=1&limit=2", 400, "twice"),
        ("/replay/5?from=1", 400, "unknown field \"from\""),
        ("/status?limit=1", 404, "query strings are not accepted"),
    ] {
        let (c, r) = d.call("GET", path, None);
        assert_eq!(c, code, "{path}: {r}");
        let m = r["error"].as_str().unwrap();
        assert!(m.contains(needle) && !m.contains('\n'), "{path}: {m}");
    }
    assert!(d.terminate().success());
}

/// Entries in the ledger of the long-verify test.
const LONG_VERIFY_ENTRIES: u64 = 1_000;

#[test]
fn a_long_verify_does_not_hold_other_requests() {
    let repo = Repo::new("sha1");
    // Many entries make a deep verify take a while: built in memory, written as a Forum
    // directory, imported in one go.
    let mut mem = git_forum::ledger::MemoryStorage::default();
    for i in 0..LONG_VERIFY_ENTRIES {
        git_forum::ledger::Storage::append(
            &mut mem,
            git_forum::ledger::NewEntry {
                actor: "a".into(),
                kind: "note".into(),
                causal_parent: None,
                payload: git_forum::ledger::Value::object([(
                    "i".to_string(),
                    git_forum::ledger::Value::str(i.to_string()),
                )]),
                ts: 1000.0,
            },
        )
        .unwrap();
    }
    let dir = repo.path().join("forum-dir");
    git_forum::store::forum_dir::write(
        &dir,
        &mem.entries,
        |e| Ok(mem.payloads.get(&e.payload_hash).cloned()),
        false,
    )
    .unwrap();
    repo.forum_ok(&["import", dir.to_str().unwrap()]);
    // The verify is held in the server until the test releases it, so "answered while the
    // verify is in flight" does not depend on how long a verify takes on a loaded machine.
    let release = repo.path().join("release-verify");
    let held = repo.path().join("release-verify.held");
    let mut d = Daemon::start_with_env(
        &repo,
        &[],
        &[("GIT_FORUM_HOLD_VERIFY", release.to_str().unwrap())],
    );
    // Warm the server's entry cache (a first read walks every commit), so what follows
    // waits on nothing but the verify.
    assert_eq!(d.call("GET", "/status", None).0, 200);
    let addr = d.addr.clone();
    let (sent_tx, sent_rx) = std::sync::mpsc::channel();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done_w = done.clone();
    let verifier = std::thread::spawn(move || {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        s.write_all(
            format!("GET /verify HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .unwrap();
        sent_tx.send(()).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        done_w.store(true, std::sync::atomic::Ordering::SeqCst);
        parse_response(&String::from_utf8_lossy(&out))
    });
    sent_rx.recv().unwrap();
    crate::common::wait_until(
        "the verify never reached the engine",
        Duration::from_secs(120),
        || held.exists(),
    );
    // Other requests are answered while it runs (appends included).
    let (code, _) = d.call("GET", "/status", None);
    assert_eq!(code, 200);
    let (code, r) = d.call(
        "POST",
        "/append",
        Some(&json!({"actor": "a", "kind": "note", "payload": 1})),
    );
    assert_eq!((code, r["seq"].clone()), (200, json!(LONG_VERIFY_ENTRIES)));
    let answered_during = !done.load(std::sync::atomic::Ordering::SeqCst);
    std::fs::write(&release, b"").unwrap();
    let (code, _, body) = verifier.join().unwrap();
    assert_eq!(code, 200, "{body}");
    let v: J = serde_json::from_str(&body).unwrap();
    assert_eq!(v["ok"], true, "{v}");
    // The verify was held in the server until after the status and the append answered.
    assert!(
        answered_during,
        "the status and the append were answered only after the verify"
    );
    assert!(d.terminate().success());
}

#[test]
fn an_append_retried_with_its_idempotency_key_is_written_once() {
    let repo = Repo::new("sha1");
    let mut d = Daemon::start(&repo, &[]);
    let body = json!({"actor": "client", "kind": "note", "payload": {"n": 1}});
    let key = [("Idempotency-Key", "4b7e0c1e-retry-1")];
    let (code, first) = call_with(&d, "POST", "/append", &key, &body);
    assert_eq!(code, 200, "{first}");
    assert_eq!(first["seq"], 0);
    // The retry (after a timeout, say) answers the same entry and writes nothing.
    for _ in 0..2 {
        let (code, again) = call_with(&d, "POST", "/append", &key, &body);
        assert_eq!(code, 200, "{again}");
        assert_eq!(again["seq"], 0);
        assert_eq!(again["entry_hash"], first["entry_hash"]);
        assert_eq!(again["commit"], first["commit"]);
        assert_eq!(again["replayed"], true);
    }
    assert_eq!(d.call("GET", "/status", None).1["entries"], 1);
    // The same key for another entry is a conflict, in one line.
    let other = json!({"actor": "client", "kind": "note", "payload": {"n": 2}});
    let (code, r) = call_with(&d, "POST", "/append", &key, &other);
    assert_eq!(code, 409, "{r}");
    let m = r["error"].as_str().unwrap();
    assert!(
        m.contains("was used for another entry (seq 0)") && !m.contains('\n'),
        "{m}"
    );
    // A bad key is a 400; another key is another entry; so is no key at all.
    let (code, _) = call_with(&d, "POST", "/append", &[("Idempotency-Key", "a b")], &other);
    assert_eq!(code, 400);
    let (code, r) = call_with(&d, "POST", "/append", &[("Idempotency-Key", "k-2")], &other);
    assert_eq!((code, r["seq"].clone()), (200, json!(1)));
    let (code, r) = d.call("POST", "/append", Some(&body));
    assert_eq!((code, r["seq"].clone()), (200, json!(2)));
    assert_eq!(d.call("GET", "/status", None).1["entries"], 3);
    // The key is kept on disk: a restarted server still knows it.
    assert!(d.terminate().success());
    let mut d = Daemon::start(&repo, &[]);
    let (code, again) = call_with(&d, "POST", "/append", &key, &body);
    assert_eq!((code, again["seq"].clone()), (200, json!(0)));
    assert_eq!(d.call("GET", "/status", None).1["entries"], 3);
    assert!(d.terminate().success());
    repo.forum_ok(&["verify", "--deep"]);
}

#[test]
fn an_mcp_append_retried_with_its_idempotency_key_is_written_once() {
    let repo = Repo::new("sha1");
    let call = |id: u32, payload: u32, key: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"ledger_append","arguments":{{"actor":"a","kind":"note","payload":{{"n":{payload}}},"idempotency_key":"{key}"}}}}}}"#
        )
    };
    let input = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#.to_string(),
        call(2, 1, "mcp-k1"),
        call(3, 1, "mcp-k1"),
        call(4, 2, "mcp-k1"),
        call(5, 2, "mcp-k2"),
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"ledger_replay","arguments":{"seq":9,"limit":1,"after":0}}}"#.to_string(),
    ];
    let (ok, out) = repo.mcp_batch(&[], &input);
    assert!(ok, "{out}");
    let replies: Vec<J> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(replies.len(), input.len(), "{out}");
    let result = |i: usize| replies[i]["result"]["structuredContent"].clone();
    assert_eq!(result(1)["seq"], 0);
    assert_eq!(result(2)["seq"], 0);
    assert_eq!(result(2)["replayed"], true);
    assert_eq!(replies[3]["result"]["isError"], true);
    assert!(
        result(3)["error"]
            .as_str()
            .unwrap()
            .contains("another entry")
    );
    assert_eq!(result(4)["seq"], 1);
    // A replay page through MCP.
    assert_eq!(result(5)["entries"].as_array().unwrap().len(), 1);
    assert_eq!(result(5)["entries"][0]["seq"], 1);
    assert_eq!(result(5)["next"], J::Null);
    let status = repo.forum_json(&["verify"]);
    assert_eq!(status["entries"], 2, "{status}");
}
