//! Heartbeats and the watchdog through the binary (`[observe]` in `.forum/runtime.toml`): a
//! worker that hangs with no output is ended with its whole tree once quiet for the stall
//! time, its task fails with the reason and the run goes on as for any failure; a worker that
//! prints slowly but steadily is left alone; a run with a heartbeat witnesses at most one
//! `heartbeat` entry per interval, on the three repository kinds; and the daemon witnesses
//! its own. The only bounds on time are generous ones (a hang of 1000 s ended long before the
//! 60 s deadline; no more heartbeats than the run's wall time allows).

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value as J;

use crate::common::{Repo, on_each_kind};
use crate::procs::{executable, marked};
use crate::work_run::{entries, payloads};

/// A marker no other process holds.
fn marker() -> String {
    use rand_core::RngCore;
    let mut b = [0u8; 8];
    rand_core::OsRng.fill_bytes(&mut b);
    format!(
        "gfwatch{}",
        b.iter().map(|x| format!("{x:02x}")).collect::<String>()
    )
}

/// A scripted model: one task T1 whose worker runs `task` (shell lines), a passing verdict
/// and a fixed answer.
fn model(repo: &Repo, task: &str) -> String {
    let plan = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"do the thing","depends_on":[],"done_when":[]}]}"#;
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{plan}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'Done.' ;;\n  *)\n{task}\n  ;;\nesac\n"
    );
    executable(&repo.path().join("model.sh"), &body)
}

/// Writes `.forum/runtime.toml` with `model` as the default executor and `observe` as the
/// `[observe]` table's lines.
fn runtime(repo: &Repo, model: &str, observe: &str) {
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        format!("[runtime.default]\ncmd = \"{model}\"\n\n[observe]\n{observe}\n"),
    )
    .unwrap();
}

/// Submits a request; the report and how long the command took.
fn submit(repo: &Repo) -> (std::process::Output, J, Duration) {
    let start = Instant::now();
    let o = repo
        .forum()
        .args(["submit", "--json", "--progress", "build a login API"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let took = start.elapsed();
    let report = serde_json::from_slice(&o.stdout).unwrap_or(J::Null);
    (o, report, took)
}

/// Kills and counts the processes with `mark` still alive.
fn left(mark: &str) -> usize {
    let left = marked(mark);
    for pid in &left {
        if let Some(p) = rustix::process::Pid::from_raw(*pid) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        }
    }
    left.len()
}

#[test]
fn a_worker_quiet_past_the_stall_time_is_ended_with_its_tree_and_its_task_fails() {
    let repo = Repo::new("sha1");
    let mark = marker();
    // Prints nothing and hangs (a child that hangs too, in the background).
    let hang = format!(
        "    python3 -c 'import time; time.sleep(1000)' {mark}-child </dev/null >/dev/null 2>&1 &\n    exec python3 -c 'import time; time.sleep(1000)' {mark}-worker"
    );
    let m = model(&repo, &hang);
    runtime(&repo, &m, "stall = \"1s\"");
    let (o, report, took) = submit(&repo);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(left(&mark), 0, "processes outlived the stalled worker");
    // The deadline is 60 s: well before it, the watchdog ended the worker.
    assert!(took < Duration::from_secs(45), "{took:?}\n{stderr}");
    let results = payloads(&repo, "result");
    let t1 = results
        .iter()
        .find(|(_, p)| p["id"] == "T1")
        .unwrap_or_else(|| panic!("no result of T1: {results:?}\n{stderr}"));
    assert_eq!(t1.1["ok"], false, "{t1:?}");
    assert_eq!(t1.1["error"], "stalled", "{t1:?}");
    let output = t1.1["output"].as_str().unwrap();
    assert!(output.contains("stalled: no output for"), "{output}");
    // The record says how long the worker had been quiet when it was ended: the stall time
    // (1 s) plus at most one more second, however long the whole command took.
    let quiet: u64 = output
        .split("stalled: no output for ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no quiet time in {output}"));
    assert!((1..=2).contains(&quiet), "{output}");
    // One line of progress says so.
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("ended by the watchdog"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("T1 ended by the watchdog: stalled: no output for"));
    // A stalled task is a failed one: the run goes on to its answer as with any failure.
    assert!(
        report["git_forum_receipt"]["status"].is_string(),
        "{report}"
    );
    repo.forum_ok(&["verify", "--deep"]);
}

#[test]
fn a_worker_that_prints_slowly_but_steadily_is_not_ended() {
    let repo = Repo::new("sha1");
    let steady = "    for i in 1 2 3 4 5 6 7 8; do echo \"line $i\"; sleep 0.25; done";
    let m = model(&repo, steady);
    runtime(&repo, &m, "stall = \"1s\"");
    let (o, _, _) = submit(&repo);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let results = payloads(&repo, "result");
    let t1 = results
        .iter()
        .find(|(_, p)| p["id"] == "T1")
        .unwrap_or_else(|| panic!("no result of T1\n{stderr}"));
    assert_eq!(t1.1["ok"], true, "{t1:?}\n{stderr}");
    assert!(!stderr.contains("ended by the watchdog"), "{stderr}");
}

#[test]
fn a_long_task_writes_coalesced_heartbeats_on_each_kind() {
    on_each_kind(|repo| {
        let m = model(repo, "    sleep 2; echo done");
        runtime(repo, &m, "heartbeat = \"200ms\"");
        let (o, _, took) = submit(repo);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let beats = payloads(repo, "heartbeat");
        // The task alone takes 2 s: several intervals.
        assert!(beats.len() >= 2, "{beats:?}");
        let bound = (took.as_millis() / 200 + 1) as usize;
        assert!(beats.len() <= bound, "{} > {bound}", beats.len());
        let all = entries(repo);
        let request = all.iter().find(|e| e["kind"] == "request").unwrap()["seq"].clone();
        for (seq, b) in &beats {
            assert_eq!(b["schema"], "git-forum.heartbeat/1");
            assert_eq!(b["of"], "run");
            assert_eq!(b["run"], request, "{b}");
            let e = all.iter().find(|e| e["seq"] == *seq).unwrap();
            assert_eq!(e["causal_parent"], request, "{e}");
        }
        // The planner printed its plan before T1 started: a heartbeat after it says how long
        // since a worker last printed.
        assert!(
            beats
                .iter()
                .any(|(_, b)| b["seconds_since_output"].as_f64().is_some()),
            "{beats:?}"
        );
        // While T1 ran, a heartbeat named it and what it did last.
        assert!(
            beats.iter().any(|(_, b)| b["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["id"] == "T1" && t["last"].as_str().unwrap().starts_with("started"))),
            "{beats:?}"
        );
        repo.forum_ok(&["verify", "--deep"]);
    });
}

/// Heartbeat entries of `of` ("run" or "daemon") in the ledger, once it exists.
fn beats_of(repo: &Repo, of: &str) -> Vec<J> {
    let o = repo.forum().args(["log", "--json"]).output().unwrap();
    // The ledger is made by the first entry: until then `log` says there is none.
    let Ok(J::Array(all)) = serde_json::from_slice::<J>(&o.stdout) else {
        return Vec::new();
    };
    if !all.iter().any(|e| e["kind"] == "heartbeat") {
        return Vec::new();
    }
    payloads(repo, "heartbeat")
        .into_iter()
        .map(|(_, b)| b)
        .filter(|b| b["of"] == of)
        .collect()
}

#[test]
fn the_daemon_witnesses_its_own_heartbeat_naming_the_runs_it_drives() {
    let repo = Repo::new("sha1");
    let m = model(&repo, "    sleep 3; echo done");
    runtime(&repo, &m, "heartbeat = \"200ms\"");
    let served = repo.serve(&[], Stdio::null());
    let addr = served.addr.clone();
    crate::common::wait_until("no daemon heartbeat", Duration::from_secs(60), || {
        !beats_of(&repo, "daemon").is_empty()
    });
    let idle = &beats_of(&repo, "daemon")[0];
    assert_eq!(idle["schema"], "git-forum.heartbeat/1");
    assert!(idle["pid"].as_u64().is_some(), "{idle}");
    assert_eq!(idle["running"], serde_json::json!([]), "{idle}");
    let run = std::thread::spawn(move || {
        let body = serde_json::json!({"request": "build a login API"});
        crate::common::http_json(&addr, "POST", "/submit", &body)
    });
    crate::common::wait_until(
        "no heartbeat names the run",
        Duration::from_secs(60),
        || {
            beats_of(&repo, "daemon")
                .iter()
                .any(|b| b["running"].as_array().is_some_and(|r| !r.is_empty()))
        },
    );
    let (code, report) = run.join().unwrap();
    assert_eq!(code, 200, "{report}");
    drop(served);
    let request = entries(&repo)
        .into_iter()
        .find(|e| e["kind"] == "request")
        .unwrap()["seq"]
        .clone();
    let busy = beats_of(&repo, "daemon")
        .into_iter()
        .find(|b| b["running"].as_array().is_some_and(|r| !r.is_empty()))
        .unwrap();
    assert_eq!(busy["running"], serde_json::json!([request]), "{busy}");
    // The daemon's run witnessed its own heartbeats too.
    assert!(!beats_of(&repo, "run").is_empty());
}

/// `[work] attempts = ["default", "cheap"]` with a stall time: the first attempt's worker
/// hangs without a word and is ended as stalled; that attempt failed like any other, and the
/// second, on the cheap tier, delivers the change.
#[test]
fn a_stalled_attempt_fails_and_the_next_attempt_delivers() {
    use crate::work_run::{clean, one_task_model, setup};
    let repo = Repo::new("sha1");
    setup(&repo);
    let mark = marker();
    let hang = one_task_model(
        &repo,
        "hang",
        "undetermined",
        &format!("    exec python3 -c 'import time; time.sleep(1000)' {mark}"),
    );
    let fix = one_task_model(
        &repo,
        "fix",
        "undetermined",
        "    sed -i 's/return a - b/return a + b/' calc.py; echo 'fixed add'",
    );
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        format!(
            "[runtime.default]\ncmd = \"{hang}\"\n\n[runtime.tiers.cheap]\ncmd = \"{fix}\"\n\n[work]\nattempts = [\"default\", \"cheap\"]\n\n[observe]\nstall = \"1s\"\n"
        ),
    )
    .unwrap();
    let j = repo.forum_json(&[
        "submit",
        "--work",
        "--check",
        "python3 -m unittest -q",
        "make the failing test in calc pass",
    ]);
    assert_eq!(left(&mark), 0, "processes outlived the stalled worker");
    assert!(
        j["answer"].as_str().unwrap().contains("- T1: merged"),
        "{j}"
    );
    let stalled: Vec<(u64, J)> = payloads(&repo, "result")
        .into_iter()
        .filter(|(_, p)| p["error"] == "stalled")
        .collect();
    assert_eq!(stalled.len(), 1, "{stalled:?}");
    let choices = payloads(&repo, "attempt_choice");
    assert_eq!(choices[0].1["chosen"], 2, "{choices:?}");
    clean(&repo);
}
