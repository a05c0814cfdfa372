//! A dispatched task the writer does not check itself (a run not checked in full): no
//! worktree is added for it here; the worker's commit is checked, screened and committed from
//! its tree, and its checks are witnessed as the worker's claims (`claimed_by`). A claimed
//! failure keeps the change off the run branch; a change over the run's limits is refused
//! as a local one is. A run checked in full (`verify = "full"`) runs the checks itself in a
//! worktree of its own, as `dispatch_refused` shows.

use serde_json::Value as J;

use crate::common::{Repo, on_each_kind};
use crate::dispatch_nats::{
    NatsServer, TWO, clone, finish, logs, model, shared, spawned, task_results, worker,
};
use crate::work_run::payloads;

/// Writes `.forum/runtime.toml` (not committed) with `m` as the default seat, checked in full.
pub(crate) fn checked_in_full(repo: &Repo, m: &str) {
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        format!("[runtime.default]\ncmd = \"{m}\"\nverify = \"full\"\n"),
    )
    .unwrap();
}

/// Submits `TWO` with `--check CHECK` (and `extra`) through `server` to one worker of its own
/// running `m`; the answer, standard error and the worker's log.
fn run_two(repo: &Repo, server: &NatsServer, m: &str, check: &str, extra: &[&str]) -> (J, String) {
    let (_bare, url) = shared(repo);
    let w = clone(&url);
    let _w = worker(repo, w.path(), server, m, &["--name", "w", "--no-sandbox"]);
    let mut c = repo.forum();
    // A worktree opened here would fail: none is.
    c.env("GIT_FORUM_FAILPOINT_FAIL", "task-worktree")
        .args(["submit", "--work", "--no-sandbox", "--check", check])
        .args(["--dispatch", &server.url(), "--cmd", m, "--json"])
        .args(extra)
        .arg("write the files");
    let (_, j, err) = finish(spawned(c));
    (j, format!("{err}\n{}", logs(&[&w])))
}

#[test]
fn a_dispatched_change_is_committed_with_no_worktree_and_its_checks_are_the_workers_claims() {
    on_each_kind(|repo| {
        let server = NatsServer::start();
        let m = model(repo, TWO);
        let (j, said) = run_two(repo, &server, &m, "test -s f1.txt || test -s f2.txt", &[]);
        let answer = j["answer"].as_str().unwrap_or_default();
        assert!(answer.contains("- T1: merged"), "{answer}\n{said}");
        assert!(answer.contains("- T2: merged"), "{answer}\n{said}");
        assert_eq!(task_results(repo).len(), 2, "{said}");
        // Each change is a commit of the writer's, tied to the ledger, on the task's base.
        let changes = payloads(repo, "change");
        assert_eq!(changes.len(), 2, "{changes:?}");
        for (_, c) in &changes {
            let commit = c["commit"].as_str().unwrap();
            let msg = repo.git_ok(&["log", "-1", "--format=%B", commit]);
            assert!(msg.contains("Forum-Run:"), "{msg}");
            assert!(msg.contains("Forum-Task:"), "{msg}");
            assert_eq!(
                repo.git_ok(&["rev-parse", &format!("{commit}^")]),
                c["base"].as_str().unwrap()
            );
            assert_eq!(c["files"].as_array().unwrap().len(), 1, "{c}");
        }
        // The tasks' checks are the worker's claims, one per task, each naming the worker;
        // the run branch's check, once at the end, is the writer's own.
        let (run, checks): (Vec<_>, Vec<_>) = payloads(repo, "check")
            .into_iter()
            .partition(|(_, c)| c["task"] == "run");
        assert_eq!(checks.len(), 2, "{checks:?}");
        assert_eq!(run.len(), 1, "{run:?}");
        assert!(run[0].1.get("claimed_by").is_none(), "{run:?}");
        for (_, c) in &checks {
            assert_eq!(c["claimed_by"], "w", "{c}");
            assert_eq!(c["ok"], true, "{c}");
            assert_eq!(c["exit"], 0, "{c}");
        }
        assert_eq!(
            repo.git_ok(&["rev-list", "--count", "main..forum/run-0"]),
            "2"
        );
        repo.forum_ok(&["verify", "--deep"]);
    });
}

#[test]
fn a_check_the_worker_claims_failed_keeps_its_change_off_the_run_branch() {
    let repo = Repo::new("sha1");
    let server = NatsServer::start();
    let m = model(&repo, TWO);
    let (j, said) = run_two(&repo, &server, &m, "test -s f2.txt", &[]);
    let answer = j["answer"].as_str().unwrap_or_default();
    assert!(answer.contains("- T2: merged"), "{answer}\n{said}");
    assert!(!answer.contains("- T1: merged"), "{answer}\n{said}");
    let checks = payloads(&repo, "check");
    let failed: Vec<&J> = checks
        .iter()
        .map(|(_, c)| c)
        .filter(|c| c["ok"] == false)
        .collect();
    assert_eq!(failed.len(), 1, "{checks:?}");
    assert_eq!(failed[0]["claimed_by"], "w");
    assert_ne!(failed[0]["exit"], 0);
    let on_branch = repo.git_ok(&["ls-tree", "--name-only", "forum/run-0"]);
    assert!(on_branch.contains("f2.txt"), "{on_branch}");
    assert!(!on_branch.contains("f1.txt"), "{on_branch}");
}

#[test]
fn a_dispatched_change_over_the_runs_limits_is_refused_with_no_worktree() {
    let repo = Repo::new("sha1");
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    // A change may add files of 1 byte at most: each task writes 7 (`f1.txt` and a newline).
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        "[work]\nmax_file_bytes = 1\n",
    )
    .unwrap();
    let server = NatsServer::start();
    let m = model(&repo, TWO);
    let (j, said) = run_two(&repo, &server, &m, "true", &[]);
    let answer = j["answer"].as_str().unwrap_or_default();
    assert!(!answer.contains(": merged"), "{answer}\n{said}");
    let changes = payloads(&repo, "change");
    assert_eq!(changes.len(), 2, "{changes:?}\n{said}");
    for (_, c) in &changes {
        assert_eq!(c["commit"], J::Null, "{c}");
        assert_eq!(c["refused"], true, "{c}");
        let e = c["error"].as_str().unwrap();
        assert!(e.contains("max_file_bytes"), "{e}");
    }
    // Nothing was checked: a refused change has no checks.
    assert!(payloads(&repo, "check").is_empty());
}
