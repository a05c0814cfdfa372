//! A halt that holds, through the real binary: `git forum halt` from a second process, SIGTERM
//! to the submit, `POST /halt` and the MCP tool `halt` each stop a run whose slow worker ignores
//! SIGTERM; no process of the run survives, the run witnesses `halted {by, reason}`, the record
//! verifies, `--json` still prints the run's report, and `resume` finishes the run.

use std::io::Read;
use std::process::Stdio;

use serde_json::{Value as J, json};

use crate::common::{FORMATS, Guarded, Repo, http_json, one_line_error};
use crate::procs::{self, alive, poll};

const PLAN: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":[]},{"id":"T2","agent":"docs","instruction":"write the API docs","depends_on":["T1"],"done_when":[]}]}"#;

const ANSWER: &str = "Shipped the login API with docs. Verified by the tests; next step: deploy.";

const REQUEST: &str = "ship a login API with docs";

/// The exit code of a halted run.
const HALTED: i32 = 5;

/// A scripted model. While `slow` exists (the file name it is given), the first task's worker
/// is the slow worker of [`procs::slow_worker_sh`] that ignores SIGTERM (its pids in `pids`),
/// so only SIGKILL to its process group stops it; otherwise every call answers at once.
pub(crate) fn model(repo: &Repo, slow: &std::path::Path, pids: &std::path::Path) -> String {
    let body = format!(
        r#"#!/bin/sh
p="$1"
case "$p" in
  *"Break this request"*) echo '{PLAN}' ;;
  *"Judge one task"*) echo '{{"decision":"pass","score":0.9,"reason":"ok"}}' ;;
  *"Write the answer"*) echo '{ANSWER}' ;;
  *)
    {hang}
    echo "done: $(printf '%s' "$p" | tr '\n' ' ')" ;;
esac
"#,
        hang = procs::slow_worker_sh(slow, pids, true),
    );
    procs::executable(&repo.path().join("model.sh"), &body)
}

/// A run in flight: the submit process (its stdout and stderr piped) and the pids of its slow
/// worker and that worker's child, read once the worker started.
pub(crate) struct InFlight {
    child: Guarded,
    workers: Vec<i32>,
}

/// Starts `git forum --json submit --cmd MODEL REQUEST` in the background and waits for its
/// slow worker.
pub(crate) fn start(repo: &Repo, model: &str, pids: &std::path::Path) -> InFlight {
    let _ = std::fs::remove_file(pids);
    let child = Guarded(
        repo.forum()
            .args(["--json", "submit", "--quiet", "--cmd", model, REQUEST])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let workers = procs::wait_for_pids(pids);
    InFlight { child, workers }
}

/// Waits for the submit to exit; returns its exit code, stdout and stderr.
pub(crate) fn finish(mut run: InFlight) -> (Option<i32>, String, String, Vec<i32>) {
    let mut status = None;
    poll(
        || {
            status = run.child.0.try_wait().unwrap();
            status.is_some()
        },
        "git forum submit did not exit",
    );
    let (mut out, mut err) = (String::new(), String::new());
    run.child
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    run.child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.unwrap().code(), out, err, run.workers)
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

fn run_state(repo: &Repo) -> J {
    repo.forum_json(&["runs"])["runs"][0].clone()
}

/// What every halted run shows: the halt code, the run's report on stdout, no worker left,
/// `halted {by, reason}` last in the record, a record that verifies deep; then a resume with
/// the slow worker gone finishes it.
fn check_halted(
    repo: &Repo,
    model: &str,
    slow: &std::path::Path,
    done: (Option<i32>, String, String, Vec<i32>),
    by: &str,
    reason: &str,
) {
    let (code, out, err, workers) = done;
    assert_eq!(code, Some(HALTED), "stdout {out} stderr {err}");
    let report: J = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(report["exit"], json!({"code": HALTED, "name": "halted"}));
    assert_eq!(report["git_forum_receipt"]["status"], "halted", "{report}");
    for pid in workers {
        poll(|| !alive(pid), "a process of the run outlived the halt");
    }
    let l = ledger(repo);
    let (kind, body) = l.last().unwrap();
    assert_eq!(kind, "halted", "{l:?}");
    assert_eq!(body["by"], by);
    if !reason.is_empty() {
        assert_eq!(body["reason"], reason);
    }
    assert_eq!(body["resume"], "git forum resume 0");
    // Nothing after the task was made up: no result for it, no answer.
    assert_eq!(l[l.len() - 2].0, "task", "{l:?}");
    let row = run_state(repo);
    assert_eq!(row["state"], "halted", "{row}");
    assert_eq!(row["detail"]["by"], by, "{row}");
    repo.forum_ok(&["verify", "--deep"]);
    // The halt request is gone; the run continues where it stopped.
    std::fs::remove_file(slow).unwrap();
    let out = repo.forum_ok(&["resume", "--quiet", "--cmd", model]);
    assert_eq!(out.trim(), ANSWER);
    assert_eq!(run_state(repo)["state"], "answered");
    repo.forum_ok(&["verify", "--deep"]);
}

#[test]
fn halt_from_a_second_process_stops_every_worker_and_resume_finishes_the_run() {
    for kind in FORMATS {
        let repo = Repo::new(kind);
        let (slow, pids) = (repo.path().join("slow"), repo.path().join("pids"));
        std::fs::write(&slow, "").unwrap();
        let model = model(&repo, &slow, &pids);
        let run = start(&repo, &model, &pids);
        let out = repo.forum_ok(&["--json", "halt", "--reason", "stop", "--by", "ada"]);
        let halt: J = serde_json::from_str(&out).unwrap();
        assert_eq!(halt["schema"], "git-forum.halt/1");
        assert_eq!(halt["run"], 0, "{halt}");
        assert_eq!(halt["stopped"], true, "{halt}");
        assert!(halt["halted_seq"].is_u64(), "{halt}");
        check_halted(&repo, &model, &slow, finish(run), "ada", "stop");
        // No halt request or running marker is left behind.
        let forum = repo.git_dir().join("forum");
        for sub in ["halt/main", "running/main"] {
            let left: Vec<_> = std::fs::read_dir(forum.join(sub))
                .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
                .unwrap_or_default();
            assert!(left.is_empty(), "{kind} {sub}: {left:?}");
        }
    }
}

#[test]
fn sigterm_to_the_submit_halts_the_run_by_signal() {
    let repo = Repo::new("sha1");
    let (slow, pids) = (repo.path().join("slow"), repo.path().join("pids"));
    std::fs::write(&slow, "").unwrap();
    let model = model(&repo, &slow, &pids);
    let run = start(&repo, &model, &pids);
    procs::terminate(&run.child.0);
    check_halted(&repo, &model, &slow, finish(run), "signal", "");
    let l = ledger(&repo);
    let halted = l.iter().find(|(k, _)| k == "halted").unwrap();
    assert_eq!(halted.1["signal"], "SIGTERM");
}

#[test]
fn halt_with_no_running_run_is_refused_in_one_line() {
    let repo = Repo::new("sha1");
    let o = repo.forum().args(["halt"]).output().unwrap();
    one_line_error(&o, "no run is running on ledger \"main\"");
    // A finished run is not running either.
    let (slow, pids) = (repo.path().join("slow"), repo.path().join("pids"));
    let model = model(&repo, &slow, &pids);
    repo.forum_ok(&["submit", "--quiet", "--cmd", &model, REQUEST]);
    let o = repo
        .forum()
        .args(["halt", "0", "--reason", "late"])
        .output()
        .unwrap();
    one_line_error(&o, "run 0 is not running");
    let o = repo
        .forum()
        .args(["halt", "--wait", "-1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    // Nothing was written: the run is answered and its record verifies.
    assert_eq!(run_state(&repo)["state"], "answered");
    repo.forum_ok(&["verify", "--deep"]);
}

#[test]
fn post_halt_and_the_mcp_tool_halt_a_running_submit() {
    let repo = Repo::new("sha1");
    let (slow, pids) = (repo.path().join("slow"), repo.path().join("pids"));
    std::fs::write(&slow, "").unwrap();
    let model = model(&repo, &slow, &pids);
    // Over HTTP: nothing to halt is a conflict, then the running submit is halted.
    let served = repo.serve(&[], Stdio::null());
    let (code, body) = http_json(&served.addr, "POST", "/halt", &json!({}));
    assert_eq!(code, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("no run is running"),
        "{body}"
    );
    let (code, body) = http_json(&served.addr, "POST", "/halt", &json!({"runn": 0}));
    assert_eq!(code, 400, "{body}");
    let run = start(&repo, &model, &pids);
    let (code, body) = http_json(
        &served.addr,
        "POST",
        "/halt",
        &json!({"reason": "from http", "by": "ops"}),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["stopped"], true, "{body}");
    drop(served);
    let (slow_again, pids_again) = (slow.clone(), pids.clone());
    check_halted(&repo, &model, &slow, finish(run), "ops", "from http");
    // Over MCP: a second run (seq after the first) halted by the tool.
    std::fs::write(&slow_again, "").unwrap();
    let _ = std::fs::remove_file(&pids_again);
    let child = Guarded(
        repo.forum()
            .args(["--json", "submit", "--quiet", "--cmd", &model, REQUEST])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let workers = procs::wait_for_pids(&pids_again);
    let lines = [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}).to_string(),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"halt","arguments":{"reason":"from mcp","by":"agent"}}}).to_string(),
    ];
    let (ok, out) = repo.mcp_batch(&[], &lines);
    assert!(ok, "{out}");
    let reply: J = out
        .lines()
        .map(|l| serde_json::from_str::<J>(l).unwrap())
        .find(|m| m["id"] == 2)
        .unwrap();
    assert_ne!(reply["result"]["isError"], true, "{reply}");
    let text = reply["result"]["content"][0]["text"].as_str().unwrap();
    let halt: J = serde_json::from_str(text).unwrap();
    assert_eq!(halt["stopped"], true, "{halt}");
    let (code, out, err, _) = finish(InFlight {
        child,
        workers: workers.clone(),
    });
    assert_eq!(code, Some(HALTED), "{err}");
    let report: J = serde_json::from_str(&out).unwrap();
    assert_eq!(report["exit"]["name"], "halted");
    for pid in workers {
        poll(|| !alive(pid), "a process of the MCP-halted run survived");
    }
    let run = halt["run"].as_u64().unwrap();
    let runs = repo.forum_json(&["runs"]);
    let row = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["request_seq"] == run)
        .unwrap()
        .clone();
    assert_eq!(row["state"], "halted", "{row}");
    assert_eq!(row["detail"], json!({"by": "agent", "reason": "from mcp"}));
    repo.forum_ok(&["verify", "--deep"]);
}
