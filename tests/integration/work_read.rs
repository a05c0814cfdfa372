//! Reading a `--work` run through the binary on every repository
//! format: `room` (JSON, text, brief), `summary`, `receipt` and `bench` of a scripted work run
//! against a plain one show its changes, checks and ship decisions, and a plain run's reports
//! carry none of it; the daemon and MCP serve the same reports. And a resumed run never runs a
//! quarantined task again.

use serde_json::Value as J;

use crate::common::{Guarded, Repo, http_json, on_each_kind};
use crate::work_run::{branch_commits, clean, entries, payloads, setup};

pub(crate) const COMPILES: &str = "python3 -m compileall -q .";

/// A scripted model: `plan` for the planner; the gate blocks a change whose task says
/// `block_on` and merges the rest; every verdict passes; `work` is the shell of a task (`$p` is
/// the prompt, the working directory the task's worktree).
pub(crate) fn model(repo: &Repo, name: &str, plan: &str, block_on: &str, work: &str) -> String {
    let path = repo.path().join(format!("{name}.sh"));
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{plan}' ;;\n  *\"Decide whether to ship\"*) case \"$p\" in *\"{block_on}\"*) echo '{{\"decision\":\"block\",\"reason\":\"not asked for\"}}' ;; *) echo '{{\"decision\":\"merge\",\"reason\":\"the fix is right\"}}' ;; esac ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'Done.' ;;\n  *)\n{work}\n  ;;\nesac\n"
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

pub(crate) fn task(id: &str, instruction: &str, deps: &str) -> String {
    format!(
        r#"{{"id":"{id}","agent":"backend","instruction":"{instruction}","depends_on":{deps},"done_when":["it compiles"]}}"#
    )
}

/// Three parallel tasks: T1 fixes `add` (merged), T2 writes mul.py (blocked), T3 writes a file
/// that does not compile (its check fails, so it never reaches the gate).
pub(crate) const WORK: &str = "    case \"$p\" in\n      *\"write mul.py\"*) printf 'def mul(a, b):\\n    return a * b\\n' > mul.py; echo mul ;;\n      *\"write bad.py\"*) printf 'def broken(:\\n' > bad.py; echo bad ;;\n      *) sed -i 's/return a - b/return a + b/' calc.py; echo add ;;\n    esac";

/// A plain run first (seq 0, no `--work`), then the work run; returns the work run's seq
/// and the room of the plain run.
pub(crate) fn two_runs(repo: &Repo) -> (u64, J) {
    setup(repo);
    let plain = model(
        repo,
        "plain",
        &format!(r#"{{"tasks":[{}]}}"#, task("P1", "say hello", "[]")),
        "never",
        "    echo hello",
    );
    repo.forum_json(&["submit", "--cmd", &plain, "say hello"]);
    // Before any work run, no report has a work section.
    let plain_room = repo.forum_json(&["room"]);
    assert!(plain_room.get("work").is_none());
    assert!(repo.forum_json(&["summary"]).get("work").is_none());
    assert!(repo.forum_json(&["receipt"]).get("work").is_none());
    let seq = entries(repo).len() as u64;
    let m = model(
        repo,
        "model",
        &format!(
            r#"{{"tasks":[{},{},{}]}}"#,
            task("T1", "fix add in calc.py", "[]"),
            task("T2", "write mul.py", "[]"),
            task("T3", "write bad.py", "[]")
        ),
        "write mul.py",
        WORK,
    );
    let j = repo.forum_json(&[
        "submit", "--work", "--check", COMPILES, "--cmd", &m, "fix calc",
    ]);
    assert_eq!(j["git_forum_receipt"]["request_seq"], seq, "{j}");
    (seq, plain_room)
}

/// The lines of a text report from the one starting with `from` up to the next blank line.
fn section(text: &str, from: &str) -> String {
    text.lines()
        .skip_while(|l| !l.starts_with(from))
        .take_while(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn room_summary_receipt_and_bench_show_a_work_runs_changes_checks_and_decisions() {
    on_each_kind(|repo| {
        let (run, plain_room) = two_runs(repo);
        let changes = payloads(repo, "change");
        let checks = payloads(repo, "check");
        let failed = checks.iter().filter(|(_, c)| c["ok"] == false).count() as u64;
        let passed = checks.len() as u64 - failed;
        assert!(failed >= 1, "{checks:?}");
        let t1 = changes.iter().find(|(_, c)| c["task"] == "T1").unwrap();
        let t2 = changes.iter().find(|(_, c)| c["task"] == "T2").unwrap();

        // The room of the latest run: the run branch, the counts, each task's work.
        let room = repo.forum_json(&["room"]);
        let w = &room["work"];
        assert_eq!(w["branch"], format!("forum/run-{run}"), "{w}");
        assert_eq!(w["changes"], changes.len() as u64, "{w}");
        assert_eq!(w["checks"]["passed"], passed, "{w}");
        assert_eq!(w["checks"]["failed"], failed, "{w}");
        assert_eq!(w["ship"]["merged"], 1, "{w}");
        assert_eq!(w["ship"]["blocked"], 1, "{w}");
        assert_eq!(w["ship"]["waiting"], 0, "{w}");
        assert_eq!(w["run_checks"]["passed"], 1, "{w}");
        // Every other key is the plain room's (Forum's).
        let mut keys: Vec<&String> = room.as_object().unwrap().keys().collect();
        keys.retain(|k| *k != "work");
        let plain_keys: Vec<&String> = plain_room.as_object().unwrap().keys().collect();
        assert_eq!(keys, plain_keys);
        let tasks = room["tasks"].as_array().unwrap();
        let state = |id: &str| {
            let t = tasks.iter().find(|t| t["id"] == id).unwrap();
            t["work"]["state"].as_str().unwrap().to_string()
        };
        assert_eq!(state("T1"), "merged");
        assert_eq!(state("T2"), "blocked");
        assert_eq!(state("T3"), "not shipped");
        let t1w = &tasks.iter().find(|t| t["id"] == "T1").unwrap()["work"];
        assert_eq!(t1w["change"]["commit"], t1.1["commit"]);
        assert_eq!(t1w["change"]["files"][0]["path"], "calc.py");
        assert_eq!(t1w["change"]["added"], 1);
        assert_eq!(t1w["change"]["removed"], 1);
        assert_eq!(t1w["ship"]["reason"], "the fix is right");
        // The room's text and brief say the same.
        let text = repo.forum_ok(&["room", "--text"]);
        // Each task's line with its work line under it, by task id (the tasks of one wave
        // run in parallel, so their entries come in any order), then the run's work line.
        let all: Vec<&str> = text.lines().collect();
        let mut pairs: Vec<String> = all
            .windows(2)
            .filter(|w| w[1].starts_with("         "))
            .map(|w| format!("{}\n{}", w[0], w[1]))
            .collect();
        pairs.sort();
        pairs.extend(
            all.iter()
                .filter(|l| l.starts_with("work "))
                .map(|l| l.to_string()),
        );
        insta::assert_snapshot!("work_read_room_text", pairs.join("\n"));
        let brief = repo.forum_ok(&["room", "--brief"]);
        assert!(
            brief.contains(&format!("on forum/run-{run}"))
                && brief.contains("1 merged, 1 blocked, 0 waiting for a person"),
            "{brief}"
        );

        // The summary of the work run counts it; the plain run's has no work.
        let sum = repo.forum_json(&["summary", &format!("run:{run}")]);
        let sw = &sum["work"];
        assert_eq!(sw["changes"], changes.len() as u64, "{sw}");
        assert_eq!(sw["checks_passed"], passed);
        assert_eq!(sw["checks_failed"], failed);
        assert_eq!(sw["changes_merged"], 1);
        assert_eq!(sw["changes_blocked"], 1);
        assert_eq!(sw["files_changed"], changes.len() as u64);
        assert!(repo.forum_json(&["summary", "run:0"]).get("work").is_none());
        let text = repo.forum_ok(&["summary", &format!("run:{run}")]);
        insta::assert_snapshot!(
            "work_read_summary_text",
            section(&text, "Work in the repository")
        );

        // The receipt of the work run names the branch, the base and each task's commit.
        let r = repo.forum_json(&["receipt", &run.to_string()]);
        let plain = repo.forum_json(&["receipt", "0"]);
        assert!(plain.get("work").is_none());
        let rw = &r["work"];
        assert_eq!(rw["branch"], format!("forum/run-{run}"));
        assert_eq!(rw["base"], repo.git_ok(&["rev-parse", "main"]));
        assert_eq!(rw["ship"]["merged"], 1);
        assert_eq!(rw["ship"]["blocked"], 1);
        let rt: Vec<(String, String)> = rw["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["task"].as_str().unwrap().to_string(),
                    t["state"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert!(rt.contains(&("T1".into(), "merged".into())), "{rt:?}");
        assert!(rt.contains(&("T2".into(), "blocked".into())), "{rt:?}");
        let rt1 = rw["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["task"] == "T2")
            .unwrap();
        assert_eq!(rt1["commit"], t2.1["commit"]);
        // Forum's fields are all still there.
        let mut rk: Vec<&String> = r.as_object().unwrap().keys().collect();
        rk.retain(|k| *k != "work");
        let pk: Vec<&String> = plain.as_object().unwrap().keys().collect();
        assert_eq!(rk, pk);
        assert_eq!(
            r["side_effect_class"],
            serde_json::json!(["ledger_write", "model_call"])
        );

        // bench: the plain run against the work run.
        let b = repo.forum_json(&["bench", "run:0", &format!("run:{run}")]);
        assert!(b["a"].get("work").is_none(), "{}", b["a"]);
        assert_eq!(b["b"]["work"]["changes_merged"], 1);
        assert_eq!(b["delta"]["work"]["changes"], changes.len() as u64);
        assert_eq!(b["delta"]["work"]["changes_blocked"], 1);
        assert_eq!(b["delta"]["work"]["checks_failed"], failed);
        let text = repo.forum_ok(&["bench", "run:0", &format!("run:{run}")]);
        insta::assert_snapshot!(
            "work_read_bench_text",
            section(&text, "Work in the repository")
        );
        clean(repo);
    });
}

#[test]
fn the_daemon_and_mcp_serve_the_same_work_sections() {
    let repo = Repo::new("sha1");
    let (run, _) = two_runs(&repo);
    let cli_room = repo.forum_json(&["room"]);
    let cli_sum = repo.forum_json(&["summary"]);
    let cli_receipt = repo.forum_json(&["receipt"]);
    let served = repo.serve(&[], std::process::Stdio::null());
    let get = |path: &str| {
        let (status, j) = http_json(&served.addr, "GET", path, &J::Null);
        assert_eq!(status, 200, "{path}: {j}");
        j
    };
    assert_eq!(get("/room")["work"], cli_room["work"]);
    assert_eq!(get("/summary")["work"], cli_sum["work"]);
    assert_eq!(get("/receipt")["work"], cli_receipt["work"]);
    let (status, b) = http_json(
        &served.addr,
        "POST",
        "/bench",
        &serde_json::json!({"a": "run:0", "b": format!("run:{run}")}),
    );
    assert_eq!(status, 200, "{b}");
    assert_eq!(b["delta"]["work"]["changes_merged"], 1, "{b}");
    drop(served);
    let call = |id: u64, name: &str| {
        serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": {}}})
        .to_string()
    };
    let input = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#.to_string(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string(),
        call(2, "forum.run.room"),
        call(3, "forum.ledger.summary"),
        call(4, "forum.run.receipt"),
    ];
    let (ok, out) = repo.mcp_batch(&[], &input);
    assert!(ok, "{out}");
    let reply = |id: u64| -> J {
        out.lines()
            .map(|l| serde_json::from_str::<J>(l).unwrap())
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("reply {id}: {out}"))["result"]["structuredContent"]
            .clone()
    };
    assert_eq!(reply(2)["work"], cli_room["work"]);
    assert_eq!(reply(3)["work"], cli_sum["work"]);
    assert_eq!(reply(4)["work"], cli_receipt["work"]);
    clean(&repo);
}

#[test]
fn resume_never_runs_a_quarantined_task_again() {
    on_each_kind(|repo| {
        setup(repo);
        let git = repo.path().join(".git");
        let (marker, counter, pidfile) =
            (git.join("hang"), git.join("t1-calls"), git.join("t2.pid"));
        std::fs::write(&marker, "").unwrap();
        // T1 (wave 0) fixes add and the gate blocks it; T2 (wave 1, after T1 by an order
        // edge) hangs while the marker exists. Every run of T1's worker appends a line.
        let work = format!(
            "    case \"$p\" in\n      *\"fix mul\"*) echo $$ > '{pid}'; while [ -e '{marker}' ]; do sleep 0.1; done; sed -i '$ s/return a + b/return a * b/' calc.py; echo mul ;;\n      *) echo T1 >> '{counter}'; sed -i 's/return a - b/return a + b/' calc.py; echo add ;;\n    esac",
            pid = pidfile.display(),
            marker = marker.display(),
            counter = counter.display()
        );
        let plan = format!(
            r#"{{"tasks":[{},{}]}}"#,
            task("T1", "fix add", "[]"),
            task("T2", "fix mul", r#"[{"id":"T1","type":"order"}]"#)
        );
        let m = model(repo, "model", &plan, "fix add", &work);
        let mut child = Guarded(
            repo.forum()
                .args([
                    // Unconfined: the worker keeps its state (pid, counter) in .git.
                    "submit",
                    "--work",
                    "--no-sandbox",
                    "--check",
                    COMPILES,
                    "--cmd",
                    &m,
                    "--quiet",
                    "fix calc",
                ])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        // Waits (a guard, not a measurement) until T2's worker is running.
        crate::common::wait_until(
            "T2 never started",
            std::time::Duration::from_secs(120),
            || std::fs::read_to_string(&pidfile).is_ok_and(|p| !p.trim().is_empty()),
        );
        // kill -9 the run mid-wave, then its orphaned worker (its own process group).
        child.0.kill().unwrap();
        child.0.wait().unwrap();
        let pid = std::fs::read_to_string(&pidfile).unwrap();
        std::process::Command::new("kill")
            .args(["-9", pid.trim()])
            .status()
            .unwrap();
        std::fs::remove_file(&marker).unwrap();
        std::fs::remove_file(&pidfile).unwrap();
        let ship = payloads(repo, "ship");
        assert_eq!(ship.len(), 1, "{ship:?}");
        assert_eq!(ship[0].1["task"], "T1");
        assert_eq!(ship[0].1["decision"], "block");

        let before = std::fs::read_to_string(&counter).unwrap();
        assert_eq!(before.lines().count(), 1, "{before}");
        let j = repo.forum_json(&["resume", "--no-sandbox", "--cmd", &m]);
        assert_eq!(j["git_forum_receipt"]["status"], "partial", "{j}");
        let resume = &payloads(repo, "resume")[0].1;
        assert_eq!(resume["reused"], serde_json::json!(["T1"]), "{resume}");
        // T1's worker ran once in all, its change and decision are witnessed once.
        let calls = std::fs::read_to_string(&counter).unwrap();
        assert_eq!(calls.lines().count(), 1, "{calls}");
        let changes = payloads(repo, "change");
        let t1: Vec<&(u64, J)> = changes.iter().filter(|(_, c)| c["task"] == "T1").collect();
        assert_eq!(t1.len(), 1, "{changes:?}");
        let ships = payloads(repo, "ship");
        assert_eq!(ships.iter().filter(|(_, s)| s["task"] == "T1").count(), 1);
        // Its commit stays in quarantine and never reaches the run branch; T2's does.
        let commit = t1[0].1["commit"].as_str().unwrap();
        assert_eq!(
            repo.git_ok(&["rev-parse", "refs/forum/quarantine/main/0/T1"]),
            commit
        );
        let on_branch = branch_commits(repo, 0);
        assert_eq!(on_branch.len(), 1, "{on_branch:?}");
        assert!(!on_branch.iter().any(|c| c == commit));
        assert!(
            !repo
                .git(&["merge-base", "--is-ancestor", commit, "forum/run-0"])
                .status
                .success()
        );
        let calc = repo.git_ok(&["show", "forum/run-0:calc.py"]);
        assert!(
            calc.contains("return a * b") && calc.contains("return a - b"),
            "{calc}"
        );
        clean(repo);
    });
}
