//! Strict replay and `reproduce` from every side: a run replays under the roster, policy and
//! ceiling its request recorded, whatever the files say later (and a run that recorded none is
//! refused, naming what is missing); the daemon's `POST /replay` and `POST /reproduce` and the
//! MCP tools give the command line's JSON, for an honest run and for a forged one, and refuse
//! bad input in the same words; a clone that fetched the pushed ledger replays and reproduces
//! with the original repository and its remote gone. On every repository kind where the
//! ledger is read.

use std::process::Stdio;

use git_forum::ledger::{Storage, verify_chain};
use serde_json::{Value as J, json};

use crate::common::{FORMATS, Guarded, Repo, http_json, on_each_kind, one_line_error, poll_until};

const PLAN: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":[]},{"id":"T2","agent":"docs","instruction":"write the API docs","depends_on":["T1"],"done_when":[]}]}"#;

const REQUEST: &str = "ship a login API with docs";

/// A command model of two tasks in two waves; a worker waits for the file `hold` to go away
/// first when it exists, so a test can keep a run running.
fn model(repo: &Repo) -> String {
    let hold = repo.path().join("hold");
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{PLAN}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"meets the criteria\"}}' ;;\n  *\"Write the answer\"*) echo 'Shipped the login API with docs. Verified by the review; next step: deploy.' ;;\n  *) n=0; while [ -e '{}' ] && [ $n -lt 6000 ]; do sleep 0.05; n=$((n+1)); done; echo 'done: the work' ;;\nesac\n",
        hold.display()
    );
    crate::procs::executable(&repo.path().join("model.sh"), &body)
}

fn write(repo: &Repo, path: &str, text: &str) {
    let p = repo.path().join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// `git forum ARGS --json` in `repo`: its exit code and the JSON it printed.
fn json_of(repo: &Repo, args: &[&str]) -> (Option<i32>, J) {
    let o = repo.forum().args(args).arg("--json").output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let v = serde_json::from_str(&text)
        .unwrap_or_else(|_| panic!("{args:?}: {text}\n{}", String::from_utf8_lossy(&o.stderr)));
    (o.status.code(), v)
}

fn strict(repo: &Repo, ledger: &str, run: u64) -> (Option<i32>, J) {
    json_of(
        repo,
        &["--ledger", ledger, "replay", &run.to_string(), "--strict"],
    )
}

/// A roster with one lane, which the recorded plan's lanes are not in.
const OTHER_ROSTER: &str = "[[agent]]\nname = \"writer\"\ncategory = \"content\"\ndomain = \"Prose\"\nkeywords = [\"prose\"]\nmodel_tier = \"cheap\"\nexecutor = \"cli\"\n";

#[test]
fn a_run_replays_under_the_rules_it_recorded_after_the_files_changed() {
    on_each_kind(|repo| {
        write(repo, ".forum/policy.toml", "max_tasks = 2\n");
        let m = model(repo);
        repo.forum_ok(&["submit", "--cmd", &m, "--quiet", REQUEST]);
        // Today's policy would refuse the two-task plan, and today's roster has neither lane.
        write(repo, ".forum/policy.toml", "max_tasks = 1\n");
        write(repo, ".forum/roster.toml", OTHER_ROSTER);
        let (code, r) = strict(repo, "main", 0);
        assert_eq!(code, Some(0), "{r}");
        assert_eq!(r["divergence"], J::Null, "{r}");
        assert_eq!(r["recorded"], r["recomputed"], "{r}");
        let rules = &r["rules"];
        assert_eq!(
            (&rules["roster"], &rules["policy"], &rules["limits"]),
            (&json!("recorded"), &json!("recorded"), &json!("recorded")),
            "{r}"
        );
        assert_eq!(rules["runtime"], "recorded", "{r}");
        // The request holds the policy text it ran under.
        let req = &crate::spend::exported(repo)[0].1;
        assert_eq!(req["rules"]["policy"]["toml"], "max_tasks = 2\n", "{req}");
    });
}

#[test]
fn a_run_stopped_by_its_ceiling_replays_against_the_recorded_ceiling() {
    on_each_kind(|repo| {
        write(repo, ".forum/runtime.toml", "[spend]\nmax_tokens = 40\n");
        let m = model(repo);
        let o = repo
            .forum()
            .args(["submit", "--cmd", &m, "--quiet", REQUEST])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(4), "{o:?}");
        let runs = repo.forum_json(&["runs"]);
        assert!(runs.to_string().contains("stopped_on_ceiling"), "{runs}");
        // The ceiling raised after the run: the replay still stops where the run stopped.
        write(
            repo,
            ".forum/runtime.toml",
            "[spend]\nmax_tokens = 1000000\n",
        );
        let (code, r) = strict(repo, "main", 0);
        assert_eq!(code, Some(0), "{r}");
        assert_eq!(r["divergence"], J::Null, "{r}");
        assert_eq!(r["recorded"], r["recomputed"], "{r}");
    });
}

/// The ledger of `repo` with `edit` applied to each entry's body (by seq), re-hashed so it
/// verifies, imported into `repo` as ledger `name`.
fn rewritten(repo: &Repo, name: &str, edit: impl Fn(u64, &mut J)) {
    let store = crate::strict_replay::rehashed_export(repo, edit);
    assert_eq!(verify_chain(&store.entries).first_bad, None);
    let dir = repo.path().join(format!("export-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    let (mut entries, mut bodies) = (String::new(), String::new());
    for e in &store.entries {
        let line = json!({
            "seq": e.seq, "ts": e.ts, "actor": e.actor, "kind": e.kind,
            "causal_parent": e.causal_parent, "payload_hash": e.payload_hash,
            "prev_hash": e.prev_hash, "entry_hash": e.entry_hash,
        });
        entries.push_str(&format!("{line}\n"));
        let body = store.payload_at(e.seq).unwrap().unwrap().to_serde();
        bodies.push_str(&format!(
            "{}\n",
            json!({"hash": e.payload_hash, "body": body})
        ));
    }
    std::fs::write(dir.join("entries.jsonl"), entries).unwrap();
    std::fs::write(dir.join("payloads.jsonl"), bodies).unwrap();
    repo.forum_ok(&["--ledger", name, "import", dir.to_str().unwrap()]);
}

#[test]
fn a_run_that_recorded_no_rules_is_refused_naming_what_is_missing() {
    on_each_kind(|repo| {
        let m = model(repo);
        repo.forum_ok(&["submit", "--cmd", &m, "--quiet", REQUEST]);
        rewritten(repo, "older", |seq, b| {
            if seq == 0 {
                b.as_object_mut().unwrap().remove("rules");
            }
        });
        let o = repo
            .forum()
            .args(["--ledger", "older", "replay", "0", "--strict"])
            .output()
            .unwrap();
        one_line_error(
            &o,
            "no entry of it names the digest of the policy it ran under",
        );
    });
}

/// The seq of the verdict on `task`.
fn verdict_seq(repo: &Repo, task: &str) -> u64 {
    crate::spend::exported(repo)
        .iter()
        .find(|(e, b)| e["kind"] == "verdict" && b["id"] == task)
        .and_then(|(e, _)| e["seq"].as_u64())
        .unwrap_or_else(|| panic!("no verdict on {task}"))
}

/// The seq of the latest run's request.
fn last_request(repo: &Repo) -> u64 {
    crate::spend::exported(repo)
        .iter()
        .rev()
        .find(|(e, _)| e["kind"] == "request")
        .and_then(|(e, _)| e["seq"].as_u64())
        .unwrap()
}

/// The structured answer of one MCP tool call in `repo` on `ledger`, and whether it is an
/// error.
fn mcp(repo: &Repo, ledger: &str, tool: &str, args: J) -> (bool, J) {
    let reply = repo.mcp_call(&["--ledger", ledger], tool, args);
    let r = &reply["result"];
    (
        r["isError"].as_bool().unwrap_or(false),
        r["structuredContent"].clone(),
    )
}

#[test]
fn the_daemon_and_mcp_replay_and_reproduce_as_the_command_line_does() {
    let repo = Repo::new("sha1");
    crate::work_run::setup(&repo);
    let m = model(&repo);
    repo.forum_ok(&["submit", "--cmd", &m, "--quiet", REQUEST]);
    // A recorded verdict made to say its task failed, re-hashed so the ledger verifies.
    let at = verdict_seq(&repo, "T1");
    rewritten(&repo, "forged", |seq, b| {
        if seq == at {
            b["ok"] = json!(false);
        }
    });
    crate::strict_replay::fixed_add_run(&repo);
    let work_run = last_request(&repo);
    for (ledger, code) in [("main", 0), ("forged", 1)] {
        let (c, cli) = strict(&repo, ledger, 0);
        assert_eq!(c, Some(code), "{cli}");
        match ledger {
            "main" => assert_eq!(cli["divergence"], J::Null, "{cli}"),
            _ => assert_eq!(cli["divergence"]["seq"], json!(at), "{cli}"),
        }
        let served = repo.serve(&["--ledger", ledger], Stdio::null());
        let (status, daemon) = http_json(
            &served.addr,
            "POST",
            "/replay",
            &json!({"run": 0, "strict": true}),
        );
        assert_eq!((status, &daemon), (200, &cli), "{ledger}");
        let (err, tool) = mcp(
            &repo,
            ledger,
            "replay_strict",
            json!({"run": 0, "strict": true}),
        );
        assert_eq!((err, &tool), (false, &cli), "{ledger}");
    }
    let run = work_run.to_string();
    let (c, cli) = json_of(&repo, &["reproduce", &run]);
    assert_eq!(c, Some(0), "{cli}");
    assert_eq!(cli["mismatches"], json!([]), "{cli}");
    let served = repo.serve(&[], Stdio::null());
    let (status, daemon) = http_json(
        &served.addr,
        "POST",
        "/reproduce",
        &json!({"run": work_run}),
    );
    assert_eq!((status, &daemon), (200, &cli));
    let (err, tool) = mcp(&repo, "main", "reproduce", json!({"run": work_run}));
    assert_eq!((err, &tool), (false, &cli));
    // Bad input: one line from the command line, the same words from the daemon and MCP.
    for (path, tool, args) in [
        ("/replay", "replay_strict", vec!["replay", "99", "--strict"]),
        ("/reproduce", "reproduce", vec!["reproduce", "99"]),
    ] {
        let o = repo.forum().args(&args).output().unwrap();
        let line = one_line_error(&o, "seq 99 is not a run's request");
        let body = json!({"run": 99, "strict": true});
        let body = if tool == "reproduce" {
            json!({"run": 99})
        } else {
            body
        };
        let (status, daemon) = http_json(&served.addr, "POST", path, &body);
        assert_eq!(status, 404, "{daemon}");
        assert_eq!(
            format!("error: {}", daemon["error"].as_str().unwrap()),
            line.trim()
        );
        let (err, tool) = mcp(&repo, "main", tool, body);
        assert!(err, "{tool}");
        assert_eq!(tool["error"], daemon["error"]);
    }
    let (status, daemon) = http_json(
        &served.addr,
        "POST",
        "/replay",
        &json!({"run": 0, "strict": false}),
    );
    assert_eq!(status, 400, "{daemon}");
    assert!(
        daemon["error"]
            .as_str()
            .unwrap()
            .contains("\"strict\" must be true"),
        "{daemon}"
    );
}

#[test]
fn a_run_still_running_is_refused_in_one_line_everywhere() {
    let repo = Repo::new("sha1");
    let m = model(&repo);
    std::fs::write(repo.path().join("hold"), "").unwrap();
    let child = repo
        .forum()
        .args(["submit", "--cmd", &m, "--quiet", REQUEST])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Guarded(child);
    let running = || {
        let o = repo
            .forum()
            .args(["replay", "0", "--strict"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stderr).contains("is still running")
    };
    assert!(
        poll_until(std::time::Duration::from_secs(120), running),
        "the run never showed as running"
    );
    let o = repo
        .forum()
        .args(["replay", "0", "--strict"])
        .output()
        .unwrap();
    one_line_error(&o, "run 0 is still running");
    let o = repo.forum().args(["reproduce", "0"]).output().unwrap();
    one_line_error(&o, "run 0 is still running");
    let served = repo.serve(&[], Stdio::null());
    let (status, daemon) = http_json(
        &served.addr,
        "POST",
        "/replay",
        &json!({"run": 0, "strict": true}),
    );
    assert_eq!(status, 409, "{daemon}");
    std::fs::remove_file(repo.path().join("hold")).unwrap();
    let status = child.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let (code, r) = strict(&repo, "main", 0);
    assert_eq!(code, Some(0), "{r}");
}

#[test]
fn a_clone_replays_and_reproduces_a_fetched_copy_with_the_original_gone() {
    for kind in FORMATS {
        let a = Repo::new(kind);
        crate::work_run::setup(&a);
        write(&a, ".forum/policy.toml", "max_tasks = 2\n");
        let m = model(&a);
        a.forum_ok(&["submit", "--cmd", &m, "--quiet", REQUEST]);
        crate::strict_replay::fixed_add_run(&a);
        let run = last_request(&a);
        let (bare, url) = crate::common::bare_origin(&a, kind);
        a.forum_ok(&["push"]);
        a.git_ok(&["push", "-q", "origin", "main", &format!("forum/run-{run}")]);
        let b = Repo::new(kind);
        b.git_ok(&["remote", "add", "origin", &url]);
        b.forum_ok(&["fetch"]);
        b.git_ok(&["fetch", "-q", "origin"]);
        // No way back to the original: the repository and its remote are gone, and the
        // clone's own policy would refuse the recorded plan.
        drop(a);
        drop(bare);
        write(&b, ".forum/policy.toml", "max_tasks = 1\n");
        let (code, r) = strict(&b, "origin:main", 0);
        assert_eq!(code, Some(0), "{kind}: {r}");
        assert_eq!(r["divergence"], J::Null, "{kind}: {r}");
        assert_eq!(r["rules"]["policy"], "recorded", "{kind}: {r}");
        let (code, r) = json_of(
            &b,
            &["--ledger", "origin:main", "reproduce", &run.to_string()],
        );
        assert_eq!(code, Some(0), "{kind}: {r}");
        assert_eq!(r["mismatches"], json!([]), "{kind}: {r}");
        assert_eq!(r["rebuilt_tree"], r["branch_tree"], "{kind}: {r}");
    }
}
