//! Runs do what their record says, through the real binary with command executors: gates hold
//! on every resume (CLI, daemon, MCP), recorded routes are not runs, `-C DIR` runs workers in
//! DIR, an interrupted submit takes its workers with it and says so in the ledger, and
//! `--json` receipts are Forum's.

use std::io::Read;
use std::process::Stdio;

use serde_json::{Value as J, json};

use crate::common::{FORMATS, Guarded, Repo, on_each_kind};
use crate::procs::{self, alive, executable, poll};

const PLAN_3: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":["endpoint documented"]},{"id":"T2","agent":"docs","instruction":"write the API docs","depends_on":["T1"],"done_when":[]},{"id":"T3","agent":"review","instruction":"review the API","depends_on":[{"id":"T1","type":"order"}],"done_when":[]}]}"#;

const ANSWER: &str =
    "Shipped the login API with docs. Verified by the test output; next step: deploy.";

const REQUEST: &str = "ship a login API with docs";

/// A model as a shell script: plans PLAN_3 (waves [T1], [T2, T3]), passes every verdict,
/// answers ANSWER, and does a task as "done: <its prompt, on one line>". `extra` runs first.
fn model(repo: &Repo, extra: &str) -> String {
    let path = repo.path().join("model.sh");
    let body = format!(
        "#!/bin/sh\np=\"$1\"\n{extra}\ncase \"$p\" in\n  *\"Break this request\"*) echo '{PLAN_3}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo '{ANSWER}' ;;\n  *) echo \"done: $(printf '%s' \"$p\" | tr '\\n' ' ')\" ;;\nesac\n"
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

/// Every entry of run 0 with its body, oldest first.
fn ledger(repo: &Repo) -> Vec<(String, J)> {
    let run = repo.forum_json(&["log", "--run", "0"]);
    run["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("{run}"))
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap().to_string(),
                e["payload"].clone(),
            )
        })
        .collect()
}

fn kinds(repo: &Repo) -> Vec<String> {
    ledger(repo).into_iter().map(|(k, _)| k).collect()
}

/// The ids of the tasks dispatched so far: T1 (wave 0), then T2 and T3 sorted, because they
/// run in parallel in wave 1 and either may be witnessed first.
fn dispatched(repo: &Repo) -> Vec<String> {
    let mut ids: Vec<String> = ledger(repo)
        .into_iter()
        .filter(|(k, _)| k == "task")
        .map(|(_, p)| p["id"].as_str().unwrap().to_string())
        .collect();
    if let Some(wave) = ids.get_mut(1..) {
        wave.sort();
    }
    ids
}

fn run_state(repo: &Repo) -> String {
    repo.forum_json(&["runs"])["runs"][0]["state"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Submits REQUEST gated before wave 1, with `extra` flags; it pauses there.
fn submit_gated(repo: &Repo, model: &str, extra: &[&str]) {
    let mut args = vec!["submit", "--cmd", model, "--gate-wave", "1", "--quiet"];
    args.extend_from_slice(extra);
    args.push(REQUEST);
    // A run paused at a gate exits 8 (the gate is not approved yet).
    let o = repo.forum().args(&args).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(8),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(run_state(repo), "gated");
    assert_eq!(dispatched(repo), vec!["T1"]);
}

fn fails(o: &std::process::Output) -> String {
    assert!(
        !o.status.success(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    err
}

// ----- gates hold on every resume -----

#[test]
fn a_plain_resume_refuses_a_pending_gate_and_writes_nothing() {
    on_each_kind(|repo| {
        let model = model(repo, "");
        submit_gated(repo, &model, &[]);
        // The request records the gates the run was submitted with.
        let request = &ledger(repo)[0].1;
        assert_eq!(request["gates"]["waves"], json!([1]), "{request}");
        let before = repo.snapshot();
        for args in [
            vec!["resume", "--cmd", &model],
            vec!["resume", "0", "--cmd", &model],
            vec!["submit", "--resume", "--cmd", &model],
        ] {
            let o = repo.forum().args(&args).output().unwrap();
            assert_eq!(o.status.code(), Some(8), "{args:?}");
            let err = fails(&o);
            assert!(
                err.contains("run 0 waits for a decision on the gate before wave 1"),
                "{err}"
            );
            assert!(err.contains("git forum gate approve --run 0"), "{err}");
            assert!(err.contains("git forum resume 0"), "{err}");
            assert_eq!(repo.snapshot(), before, "{args:?} wrote something");
        }
        // A resume cannot bring gates of its own.
        let o = repo
            .forum()
            .args(["resume", "--cmd", &model, "--gate-wave", "0"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2));
        assert!(fails(&o).contains("--gate-wave"));
        assert_eq!(repo.snapshot(), before);
        assert_eq!(run_state(repo), "gated");
        repo.forum_ok(&["verify", "--deep"]);
    });
}

#[test]
fn an_approved_gate_runs_its_wave_on_a_plain_resume() {
    on_each_kind(|repo| {
        let model = model(repo, "");
        submit_gated(repo, &model, &[]);
        repo.forum_ok(&["gate", "approve", "--approver", "ana"]);
        let out = repo.forum_ok(&["resume", "--cmd", &model, "--quiet"]);
        assert_eq!(out.trim(), ANSWER);
        assert_eq!(dispatched(repo), vec!["T1", "T2", "T3"]);
        assert_eq!(run_state(repo), "answered");
        repo.forum_ok(&["verify", "--deep"]);
    });
}

#[test]
fn an_edited_gate_runs_its_wave_with_the_edit_on_a_plain_resume() {
    on_each_kind(|repo| {
        let model = model(repo, "");
        submit_gated(repo, &model, &[]);
        repo.forum_ok(&[
            "gate",
            "edit",
            "--approver",
            "ana",
            "--edit",
            "T2=write the API docs in French",
        ]);
        let out = repo.forum_ok(&["resume", "--cmd", &model, "--quiet"]);
        assert_eq!(out.trim(), ANSWER);
        let l = ledger(repo);
        let task = l
            .iter()
            .find(|(k, p)| k == "task" && p["id"] == "T2")
            .map(|(_, p)| p)
            .unwrap();
        assert_eq!(task["instruction"], "write the API docs in French");
        let result = l
            .iter()
            .find(|(k, p)| k == "result" && p["id"] == "T2")
            .map(|(_, p)| p)
            .unwrap();
        let output = result["output"].as_str().unwrap();
        assert!(output.contains("write the API docs in French"), "{output}");
        // The untouched task of the wave keeps its instruction.
        assert!(
            l.iter()
                .any(|(k, p)| k == "task" && p["instruction"] == "review the API")
        );
        assert_eq!(run_state(repo), "answered");
        repo.forum_ok(&["verify", "--deep"]);
    });
}

#[test]
fn a_rejected_gate_ends_the_run_as_rejected_on_a_plain_resume() {
    on_each_kind(|repo| {
        let model = model(repo, "");
        submit_gated(repo, &model, &[]);
        repo.forum_ok(&["gate", "reject", "--approver", "ana", "--reason", "not now"]);
        let o = repo
            .forum()
            .args(["resume", "--cmd", &model])
            .output()
            .unwrap();
        // A rejected gate exits 9.
        assert_eq!(
            o.status.code(),
            Some(9),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("the gate before wave 1 was rejected"), "{err}");
        assert_eq!(dispatched(repo), vec!["T1"], "the rejected wave never ran");
        assert_eq!(kinds(repo).last().unwrap(), "gate_stopped");
        assert_eq!(run_state(repo), "rejected");
        // A rejected run is over.
        let o = repo
            .forum()
            .args(["resume", "0", "--cmd", &model])
            .output()
            .unwrap();
        assert!(fails(&o).contains("cannot be resumed"));
        repo.forum_ok(&["verify", "--deep"]);
    });
}

#[test]
fn an_expired_gate_takes_its_expiry_decision_on_a_plain_resume() {
    // Each kind of repository, the two expiry decisions taken in turn across them.
    let decisions = [("approve", "answered"), ("reject", "rejected")];
    for (i, kind) in FORMATS.into_iter().enumerate() {
        let (on_expiry, state) = decisions[i % decisions.len()];
        let repo = Repo::new(kind);
        let model = model(&repo, "");
        // The clock is pinned at 1000: the gate expires at 1005.
        submit_gated(
            &repo,
            &model,
            &["--gate-deadline", "5", "--gate-on-expiry", on_expiry],
        );
        // Before the deadline it is still pending.
        let o = repo
            .forum()
            .env("GIT_FORUM_TIMESTAMP", "1004")
            .args(["resume", "--cmd", &model])
            .output()
            .unwrap();
        assert!(
            fails(&o).contains("waits for a decision"),
            "{kind} {on_expiry}"
        );
        let o = repo
            .forum()
            .env("GIT_FORUM_TIMESTAMP", "1005")
            .args(["resume", "--cmd", &model, "--quiet"])
            .output()
            .unwrap();
        // An expired gate that becomes a rejection exits 9, as a rejected gate does.
        let code = if on_expiry == "approve" { 0 } else { 9 };
        assert_eq!(
            o.status.code(),
            Some(code),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let l = ledger(&repo);
        let expired = l.iter().find(|(k, _)| k == "gate_expired").unwrap();
        let decision = if on_expiry == "approve" {
            "approved"
        } else {
            "rejected"
        };
        assert_eq!(expired.1["decision"], decision);
        assert_eq!(run_state(&repo), state, "{kind} {on_expiry}");
        let want: Vec<&str> = if on_expiry == "approve" {
            vec!["T1", "T2", "T3"]
        } else {
            vec!["T1"]
        };
        assert_eq!(dispatched(&repo), want);
        repo.forum_ok(&["verify", "--deep"]);
    }
}

// ----- -C DIR -----

#[test]
fn dash_c_runs_workers_context_commands_and_verifiers_in_that_work_tree() {
    let repo = Repo::new("sha1");
    let tree = std::fs::canonicalize(repo.path()).unwrap();
    let tree = tree.to_str().unwrap();
    // Every program says where it ran.
    let model = model(
        &repo,
        "case \"$p\" in *\"Break this\"*|*\"Judge one\"*|*\"Write the answer\"*) ;; *) echo \"worker ran in $(pwd -P)\"; exit 0 ;; esac",
    );
    let tools = tempfile::tempdir().unwrap();
    let context = executable(
        &tools.path().join("context.sh"),
        "#!/bin/sh\necho \"context read in $(pwd -P)\"\n",
    );
    let verifier = executable(
        &tools.path().join("verify.sh"),
        "#!/bin/sh\necho \"verified in $(pwd -P)\"\n",
    );
    // Started from elsewhere, with -C naming the repository.
    let elsewhere = tempfile::tempdir().unwrap();
    let o = repo
        .forum()
        .current_dir(elsewhere.path())
        .args([
            "-C",
            tree,
            "submit",
            "--quiet",
            "--cmd",
            &model,
            "--context-cmd",
            &context,
            "--verify-cmd",
            &verifier,
            REQUEST,
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let l = ledger(&repo);
    let outputs: Vec<&str> = l
        .iter()
        .filter(|(k, p)| k == "result" && p.get("id").is_some())
        .map(|(_, p)| p["output"].as_str().unwrap())
        .collect();
    assert_eq!(outputs.len(), 3, "{outputs:?}");
    for out in &outputs {
        assert_eq!(*out, format!("worker ran in {tree}"));
    }
    let contexts: Vec<&str> = l
        .iter()
        .filter(|(k, _)| k == "context")
        .map(|(_, p)| p["context"].as_str().unwrap())
        .collect();
    assert!(!contexts.is_empty());
    for c in &contexts {
        assert_eq!(*c, format!("context read in {tree}"));
    }
    let (_, v) = l.iter().find(|(k, _)| k == "verification").unwrap();
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["detail"], format!("verified in {tree}"));
    // Nothing was written where the command was started.
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    // A -C that cannot be entered is one line and exit 2.
    let o = repo
        .forum()
        .current_dir(elsewhere.path())
        .args(["-C", "no/such/dir", "runs"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(fails(&o).contains("-C no/such/dir"));
    // A -C outside any repository names the directory it looked in.
    let o = repo
        .forum()
        .env(
            "GIT_CEILING_DIRECTORIES",
            elsewhere.path().parent().unwrap(),
        )
        .args(["-C", elsewhere.path().to_str().unwrap(), "runs"])
        .output()
        .unwrap();
    let err = fails(&o);
    let named = std::fs::canonicalize(elsewhere.path()).unwrap();
    assert!(err.contains(named.to_str().unwrap()), "{err}");
}

// ----- interrupting submit -----

#[test]
fn an_interrupted_submit_kills_its_workers_and_witnesses_the_signal() {
    // Each kind of repository, the two signals sent in turn across them; either halts the run
    // (exit 5, witnessed as halted by signal).
    let signals = [
        (rustix::process::Signal::INT, "SIGINT", 5),
        (rustix::process::Signal::TERM, "SIGTERM", 5),
    ];
    for (i, kind) in FORMATS.into_iter().enumerate() {
        let (signal, name, code) = signals[i % signals.len()];
        let repo = Repo::new(kind);
        let (slow, pids) = (repo.path().join("slow"), repo.path().join("worker.pid"));
        std::fs::write(&slow, "").unwrap();
        // The first task's worker says who it is, then sleeps a minute while `slow` exists.
        let hang = format!(
            "case \"$p\" in *\"Break this\"*|*\"Judge one\"*|*\"Write the answer\"*) ;; *) {} ;; esac",
            procs::slow_worker_sh(&slow, &pids, false)
        );
        let model = model(&repo, &hang);
        let mut child = Guarded(
            repo.forum()
                .args(["submit", "--quiet", "--cmd", &model, REQUEST])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let workers = procs::wait_for_pids(&pids);
        let pid = rustix::process::Pid::from_child(&child.0);
        rustix::process::kill_process(pid, signal).unwrap();
        let mut status = None;
        poll(
            || {
                status = child.0.try_wait().unwrap();
                status.is_some()
            },
            "git forum did not exit",
        );
        assert_eq!(status.unwrap().code(), Some(code), "{kind} {name}");
        let mut err = String::new();
        child
            .0
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("halted by signal"), "{err}");
        assert!(err.contains(name), "{err}");
        assert!(err.contains("git forum resume 0"), "{err}");
        for worker in workers {
            poll(|| !alive(worker), "the worker outlived git forum");
        }
        // The ledger says so, and nothing after the task was made up.
        let l = ledger(&repo);
        let k: Vec<&str> = l.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(k.last(), Some(&"halted"), "{kind}: {k:?}");
        assert_eq!(k[k.len() - 2], "task", "{k:?}");
        let (_, body) = l.last().unwrap();
        assert_eq!(body["signal"], name);
        assert_eq!(body["by"], "signal");
        assert_eq!(body["resume"], "git forum resume 0");
        assert_eq!(run_state(&repo), "halted");
        repo.forum_ok(&["verify", "--deep"]);
        // The run continues where it stopped.
        std::fs::remove_file(&slow).unwrap();
        let out = repo.forum_ok(&["resume", "--quiet", "--cmd", &model]);
        assert_eq!(out.trim(), ANSWER);
        assert_eq!(run_state(&repo), "answered");
    }
}

// ----- receipts -----

#[test]
fn submit_json_puts_forums_action_receipt_under_receipt() {
    on_each_kind(|repo| {
        let model = model(repo, "");
        let j = repo.forum_json(&["submit", "--cmd", &model, REQUEST]);
        let forum = &j["receipt"];
        assert_eq!(forum["schema"], "project-telos.action-receipt/v1", "{j}");
        // Without limits it is exactly the receipt `git forum receipt` builds from the ledger.
        let rebuilt: J = serde_json::from_str(&repo.forum_ok(&["receipt", "0", "--json"])).unwrap();
        assert_eq!(*forum, rebuilt);
        assert_eq!(forum["verification"]["verdict"], "MATCH");
        let ours = &j["git_forum_receipt"];
        assert_eq!(ours["schema"], "git-forum.receipt/v1");
        assert_eq!(forum["answer"]["seq"], ours["answer_seq"]);
        assert_eq!(forum["request"]["seq"], ours["request_seq"]);
        // What the run was given is in Forum's receipt too.
        let j = repo.forum_json(&[
            "submit",
            "--cmd",
            &model,
            "--max-model-calls",
            "50",
            "--upstream-token-budget",
            "100",
            "--delivery-profile",
            "engineer",
            REQUEST,
        ]);
        let forum = &j["receipt"];
        assert_eq!(forum["budget"], json!({"max_model_calls": 50}), "{forum}");
        assert_eq!(
            forum["context_budget"]["limits"],
            json!({"bytes_per_token": 4, "max_upstream_tokens": 100})
        );
        assert_eq!(forum["delivery_profile"]["requested"], "engineer");
        assert_eq!(forum["delivery_profile"]["source"], "explicit");
        assert_eq!(
            forum["request"]["seq"],
            j["git_forum_receipt"]["request_seq"]
        );
        assert_eq!(forum["request"]["seq"], 16);
    });
}

// ----- the daemon and MCP -----

/// One request on its own connection: (status, body).
fn http(addr: &str, method: &str, path: &str, body: &J) -> (u16, J) {
    crate::common::http_json(addr, method, path, body)
}

#[test]
fn post_resume_refuses_a_pending_gate_and_runs_it_once_approved() {
    on_each_kind(|repo| {
        let model = model(repo, "");
        let served = repo.serve(&["--cmd", &model], Stdio::null());
        let addr = served.addr.clone();
        let (code, r) = http(
            &addr,
            "POST",
            "/submit",
            &json!({"request": REQUEST, "gate_waves": [1]}),
        );
        assert_eq!(code, 200, "{r}");
        assert_eq!(run_state(repo), "gated");
        let before = repo.snapshot();
        let (code, r) = http(&addr, "POST", "/resume", &json!({}));
        assert_eq!(code, 409, "{r}");
        let m = r["error"].as_str().unwrap();
        assert!(
            m.contains("waits for a decision on the gate before wave 1"),
            "{m}"
        );
        assert!(m.contains("/gate/approve"), "{m}");
        assert_eq!(repo.snapshot(), before, "a refused resume wrote something");
        assert_eq!(dispatched(repo), vec!["T1"]);
        // Approved, the same resume runs the wave.
        let (_, gates) = http(&addr, "GET", "/gates", &json!({}));
        let run_seq = gates["pending"][0]["run_seq"].clone();
        let (code, _) = http(
            &addr,
            "POST",
            "/gate/approve",
            &json!({"run_seq": run_seq, "wave": 1, "approver": "ana"}),
        );
        assert_eq!(code, 200);
        let (code, r) = http(&addr, "POST", "/resume", &json!({}));
        assert_eq!(code, 200, "{r}");
        assert_eq!(r["answer"], ANSWER);
        // Forum's action receipt under `receipt`, ours beside it.
        assert_eq!(r["receipt"]["schema"], "project-telos.action-receipt/v1");
        assert_eq!(r["git_forum_receipt"]["schema"], "git-forum.receipt/v1");
        assert_eq!(
            r["receipt"]["answer"]["seq"],
            r["git_forum_receipt"]["answer_seq"]
        );
        assert!(r["receipt"]["budget"]["max_seconds"].is_number(), "{r}");
        assert_eq!(dispatched(repo), vec!["T1", "T2", "T3"]);
        let mut child = served.child;
        procs::terminate(&child.0);
        assert!(child.0.wait().unwrap().success());
        repo.forum_ok(&["verify", "--deep"]);
    });
}

#[test]
fn the_mcp_resume_tool_refuses_a_pending_gate() {
    on_each_kind(|repo| {
        let model = model(repo, "");
        let call = |id: u64, name: &str, args: J| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": name, "arguments": args}})
            .to_string()
        };
        let input = [
            json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}).to_string(),
            call(2, "submit", json!({"request": REQUEST, "gate_waves": [1]})),
            call(3, "resume", json!({})),
        ];
        let (ok, out) = repo.mcp_batch(&["--cmd", &model], &input);
        assert!(ok, "{out}");
        let replies: Vec<J> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(replies.len(), 3, "{out}");
        // The gated run went through but did not succeed (exit 8): an error result that
        // carries its report.
        assert_eq!(replies[1]["result"]["isError"], true, "{}", replies[1]);
        assert_eq!(
            replies[1]["result"]["structuredContent"]["exit"],
            json!({"name": "gated", "code": 8}),
            "{}",
            replies[1]
        );
        let resumed = &replies[2]["result"];
        assert_eq!(resumed["isError"], true, "{resumed}");
        let text = resumed["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("waits for a decision on the gate before wave 1"),
            "{text}"
        );
        assert_eq!(dispatched(repo), vec!["T1"]);
        assert_eq!(run_state(repo), "gated");
        repo.forum_ok(&["verify", "--deep"]);
    });
}

// ----- reading a reftable repository's ledger ref -----

/// A directory holding a `git` that appends its arguments to `log` and runs the real git; put
/// it first on PATH to count what git forum asks git.
fn counting_git(dir: &std::path::Path, log: &std::path::Path) -> String {
    let real = std::process::Command::new("sh")
        .args(["-c", "command -v git"])
        .output()
        .unwrap();
    let real = String::from_utf8_lossy(&real.stdout).trim().to_string();
    assert!(!real.is_empty(), "no git on PATH");
    executable(
        &dir.join("git"),
        &format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\nexec '{real}' \"$@\"\n",
            log.display()
        ),
    );
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// In a reftable repository the ledger ref is read through git, once per change of git's ref
/// storage: reading runs asks git the same number of times whatever the ledger's length (it
/// asked once per entry read: 73 times after one run).
#[test]
fn reading_runs_in_a_reftable_repository_asks_git_once_not_once_per_entry() {
    let repo = Repo::new("reftable");
    let model = model(&repo, "");
    let tools = tempfile::tempdir().unwrap();
    let log = tools.path().join("calls");
    let path = counting_git(tools.path(), &log);
    let asked = |args: &[&str]| -> usize {
        let _ = std::fs::remove_file(&log);
        let o = repo.forum().env("PATH", &path).args(args).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("rev-parse") && l.contains("refs/forum/ledgers/main"))
            .count()
    };
    repo.forum_ok(&["submit", "--quiet", "--cmd", &model, REQUEST]);
    let reads =
        ["runs", "gate list", "log --run 0"].map(|a| asked(&a.split(' ').collect::<Vec<_>>()));
    for n in reads {
        assert!(n >= 1, "the ref was not read through git: {reads:?}");
    }
    repo.forum_ok(&["submit", "--quiet", "--cmd", &model, REQUEST]);
    assert_eq!(
        repo.forum_json(&["runs"])["runs"].as_array().unwrap().len(),
        2
    );
    let again =
        ["runs", "gate list", "log --run 0"].map(|a| asked(&a.split(' ').collect::<Vec<_>>()));
    assert_eq!(reads, again, "reads grew with the ledger");
    repo.forum_ok(&["verify", "--deep"]);
}

/// A long-lived handle (the daemon's writer) in a reftable repository sees every move another
/// process makes: its remembered ref value never outlives a change of git's ref storage.
#[test]
fn the_daemon_sees_appends_made_beside_it_in_a_reftable_repository() {
    let repo = Repo::new("reftable");
    let served = repo.serve(&[], Stdio::null());
    let addr = served.addr.clone();
    let append = |i: u64| {
        let (code, r) = http(
            &addr,
            "POST",
            "/append",
            &json!({"actor": "daemon", "kind": "note", "payload": {"i": i}}),
        );
        assert_eq!(code, 200, "{r}");
        r["seq"].as_u64().unwrap()
    };
    assert_eq!(append(0), 0);
    for round in 0..3u64 {
        // Another process appends, then the daemon does.
        let beside = repo.append("cli", "note", &round.to_string());
        assert_eq!(beside["seq"], 1 + 2 * round);
        assert_eq!(append(round + 1), 2 + 2 * round);
        let (_, st) = http(&addr, "GET", "/status", &json!({}));
        assert_eq!(st["entries"], 3 + 2 * round, "{st}");
    }
    let mut child = served.child;
    procs::terminate(&child.0);
    assert!(child.0.wait().unwrap().success());
    repo.forum_ok(&["verify", "--deep"]);
    let actors: Vec<String> = repo
        .forum_json(&["log"])
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["actor"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(actors.len(), 7);
}

// ----- one label for each exit -----

/// An exit-3 run (its call budget, `--max-model-calls 1`) and an exit-4 run (a spend ceiling,
/// `--max-tokens 1`, which refuses the planner's call) carry the exit table's name on every
/// surface: the `--json` report's `exit.name` and the receipt's `status`, `runs` (text and
/// JSON), the daemon's `POST /submit` answer and `GET /runs`, and MCP's `submit` and `runs`.
#[test]
fn an_exit_3_and_an_exit_4_run_carry_the_tables_label_on_every_surface() {
    let cases: [(i32, &str, &str, J); 2] = [
        (3, "stopped_on_budget", "--max-model-calls", json!(1)),
        (4, "stopped_on_ceiling", "--max-tokens", json!(1)),
    ];
    for (code, label, flag, value) in cases {
        let repo = Repo::new("sha1");
        let m = model(&repo, "");
        // The command line.
        let o = repo
            .forum()
            .args([
                "--json",
                "submit",
                "--cmd",
                &m,
                flag,
                &value.to_string(),
                REQUEST,
            ])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(code), "{label}: {o:?}");
        let r: J = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["exit"]["code"], code, "{r}");
        assert_eq!(r["exit"]["name"], label, "{r}");
        assert_eq!(r["git_forum_receipt"]["status"], label, "{r}");
        let seq = r["git_forum_receipt"]["request_seq"].clone();
        let runs = repo.forum_json(&["runs"]);
        let state = |runs: &J, seq: &J| {
            runs["runs"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["request_seq"] == *seq)
                .map(|x| x["state"].clone())
                .unwrap_or_else(|| panic!("run {seq} not in {runs}"))
        };
        assert_eq!(state(&runs, &seq), label, "{runs}");
        let text = repo.forum_ok(&["runs"]);
        assert!(
            text.lines().any(|l| l.contains(label)),
            "{label} not in {text}"
        );
        // The daemon.
        let served = repo.serve(&["--cmd", &m], Stdio::null());
        let key = flag.trim_start_matches("--").replace('-', "_");
        let (status, r) = http(
            &served.addr,
            "POST",
            "/submit",
            &json!({"request": REQUEST, key.clone(): value}),
        );
        assert_eq!(status, 200, "{r}");
        assert_eq!(r["exit"]["name"], label, "{r}");
        assert_eq!(r["git_forum_receipt"]["status"], label, "{r}");
        let seq = r["git_forum_receipt"]["request_seq"].clone();
        let (_, runs) = http(&served.addr, "GET", "/runs", &json!({}));
        assert_eq!(state(&runs, &seq), label, "{runs}");
        let mut child = served.child;
        procs::terminate(&child.0);
        assert!(child.0.wait().unwrap().success());
        // MCP.
        let call = |id: u64, name: &str, args: J| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": name, "arguments": args}})
            .to_string()
        };
        let input = [
            json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}).to_string(),
            call(2, "submit", json!({"request": REQUEST, key: value})),
            call(3, "runs", json!({})),
        ];
        let (ok, out) = repo.mcp_batch(&["--cmd", &m], &input);
        assert!(ok, "{out}");
        let replies: Vec<J> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let r = &replies[1]["result"]["structuredContent"];
        assert_eq!(r["exit"]["name"], label, "{out}");
        assert_eq!(r["git_forum_receipt"]["status"], label, "{out}");
        let seq = r["git_forum_receipt"]["request_seq"].clone();
        assert_eq!(
            state(&replies[2]["result"]["structuredContent"], &seq),
            label,
            "{out}"
        );
        repo.forum_ok(&["verify", "--deep"]);
    }
}
