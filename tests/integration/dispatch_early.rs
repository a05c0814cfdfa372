//! A dispatched wave ships its changes while later tasks of it are still out: the longest run
//! of the plan order whose results are all in is gated and merged onto the run branch as soon
//! as it grows, and the record holds the same merges in the same order as shipping after the
//! wave would (the gate's group asked at once included).

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{Repo, on_each_kind};
use crate::dispatch_nats::{
    NatsServer, Submitted, clone, finish, in_process_tree_of, logs, model, release, run_tree,
    shared, submit, task_results, worker,
};
use crate::work_run::payloads;

/// A plan of five tasks in one wave, each writing one file: one more than the writer asks the
/// gate about at once.
const FIVE: &str = r#"{"tasks":[
{"id":"T1","agent":"backend","instruction":"write f1.txt","depends_on":[],"done_when":["the file is there"]},
{"id":"T2","agent":"backend","instruction":"write f2.txt","depends_on":[],"done_when":["the file is there"]},
{"id":"T3","agent":"backend","instruction":"write f3.txt","depends_on":[],"done_when":["the file is there"]},
{"id":"T4","agent":"backend","instruction":"write f4.txt","depends_on":[],"done_when":["the file is there"]},
{"id":"T5","agent":"backend","instruction":"write f5.txt","depends_on":[],"done_when":["the file is there"]}]}"#;

/// A worker's seat that, for the task writing `file`, says it started (touches `mark`) and
/// holds until the test creates `release(mark)` (at most a minute); every other prompt goes
/// to `model` at once. Its worker runs unconfined: a sandbox would not let it mark its start
/// outside the worktree.
fn hold_one(dir: &Path, model: &str, file: &str, mark: &Path) -> String {
    let path = dir.join("hold.sh");
    let body = format!(
        "#!/bin/sh\nfor p; do :; done\ncase \"$p\" in\n  *'write {file}'*)\n    touch '{}'\n    i=0\n    while [ ! -e '{}' ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done ;;\nesac\nexec '{model}' \"$@\"\n",
        mark.display(),
        release(mark).display()
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// The repository with its bare remote, as [`shared`] makes them, and a policy under which
/// the writer asks the gate about four changes at once (its seat's width: `max_parallel`,
/// and at least four when the tasks are dispatched), one fewer than [`FIVE`] has.
fn shared_four(repo: &Repo) -> (tempfile::TempDir, String) {
    let shared = shared(repo);
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(repo.path().join(".forum/policy.toml"), "max_parallel = 2\n").unwrap();
    shared
}

/// How many `result` entries the ledger holds so far (0 before it exists).
fn results_so_far(repo: &Repo) -> usize {
    let out = repo.forum().args(["log", "--json"]).output().unwrap();
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .ok()
        .and_then(|j| j.as_array().cloned())
        .map(|all| all.iter().filter(|e| e["kind"] == "result").count())
        .unwrap_or(0)
}

/// The integrations on the run branch of run 0 (its first-parent commits past `main`; 0
/// before it exists).
fn merged_so_far(repo: &Repo) -> usize {
    let out = repo.git(&["rev-list", "--first-parent", "--count", "main..forum/run-0"]);
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

/// Entries of one kind as (task, seq), oldest first.
type Seqs = Vec<(String, u64)>;

/// Each `integrated` entry's task and seq, and each task's `result` seq.
fn merges_and_results(repo: &Repo) -> (Seqs, Seqs) {
    let task = |p: &serde_json::Value, k: &str| p[k].as_str().unwrap_or_default().to_string();
    let merged = payloads(repo, "integrated")
        .into_iter()
        .map(|(seq, p)| (task(&p, "task"), seq))
        .collect();
    let results = task_results(repo)
        .into_iter()
        .map(|(seq, p)| (task(&p, "id"), seq))
        .collect();
    (merged, results)
}

/// Waits (at most two minutes) for `cond` while `run` goes on; a run that ends first, or a
/// state that never comes, fails with what the run and the worker in `c` said.
fn running_until(
    mut run: Submitted,
    c: &tempfile::TempDir,
    mut cond: impl FnMut() -> bool,
) -> Submitted {
    let start = Instant::now();
    while !cond() {
        if run.child.0.try_wait().unwrap().is_some() {
            let (_, j, err) = finish(run);
            panic!("the run ended first: {j}\n{err}\n{}", logs(&[c]));
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the state never came; the worker said:\n{}",
            logs(&[c])
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    run
}

fn seq_of(items: &Seqs, id: &str) -> u64 {
    items
        .iter()
        .find(|(t, _)| t == id)
        .map(|(_, s)| *s)
        .unwrap_or_else(|| panic!("no entry of {id} in {items:?}"))
}

#[test]
fn a_waves_first_changes_merge_while_a_later_task_of_it_is_still_out() {
    on_each_kind(|repo| {
        let server = NatsServer::start();
        let (_bare, url) = shared_four(repo);
        let m = model(repo, FIVE);
        let seat = tempfile::tempdir().unwrap();
        let mark = seat.path().join("t5");
        let held = hold_one(seat.path(), &m, "f5.txt", &mark);
        let c = clone(&url);
        let _w = worker(
            repo,
            c.path(),
            &server,
            &held,
            &["--concurrency", "5", "--no-sandbox"],
        );
        // T1..T4 are in: the gate is asked about the four at once and they merge, while the
        // worker still holds T5.
        let run = running_until(submit(repo, &server, &m), &c, || merged_so_far(repo) >= 4);
        assert!(mark.exists(), "T5 is with its worker");
        assert_eq!(merged_so_far(repo), 4, "T5 is not merged before it is in");
        std::fs::write(release(&mark), "").unwrap();
        let (ok, j, err) = finish(run);
        assert!(ok, "{err}\n{}", logs(&[&c]));
        let answer = j["answer"].as_str().unwrap_or_default();
        for t in 1..=5 {
            assert!(answer.contains(&format!("- T{t}: merged")), "{answer}");
        }
        let (merged, results) = merges_and_results(repo);
        let order: Vec<&str> = merged.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(order, ["T1", "T2", "T3", "T4", "T5"]);
        assert!(
            seq_of(&merged, "T4") < seq_of(&results, "T5"),
            "T4 merged before T5's result: {merged:?} {results:?}"
        );
        repo.forum_ok(&["verify", "--deep"]);
        assert_eq!(run_tree(repo), in_process_tree_of(repo.kind(), FIVE));
    });
}

#[test]
fn a_later_task_that_is_in_first_still_merges_after_the_ones_before_it() {
    on_each_kind(|repo| {
        let server = NatsServer::start();
        let (_bare, url) = shared_four(repo);
        let m = model(repo, FIVE);
        let seat = tempfile::tempdir().unwrap();
        let mark = seat.path().join("t1");
        let held = hold_one(seat.path(), &m, "f1.txt", &mark);
        let c = clone(&url);
        let _w = worker(
            repo,
            c.path(),
            &server,
            &held,
            &["--concurrency", "5", "--no-sandbox"],
        );
        // T2..T5 are witnessed while T1 is out: none of them merges before T1.
        let run = running_until(submit(repo, &server, &m), &c, || {
            mark.exists() && results_so_far(repo) >= 4
        });
        std::fs::write(release(&mark), "").unwrap();
        let (ok, _j, err) = finish(run);
        assert!(ok, "{err}\n{}", logs(&[&c]));
        let (merged, results) = merges_and_results(repo);
        let order: Vec<&str> = merged.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(order, ["T1", "T2", "T3", "T4", "T5"]);
        for t in ["T2", "T3", "T4", "T5"] {
            assert!(seq_of(&results, t) < seq_of(&results, "T1"), "{results:?}");
        }
        assert!(seq_of(&results, "T1") < seq_of(&merged, "T1"));
        // Each change is decided on once, in plan order.
        let ships: Vec<(String, String)> = payloads(repo, "ship")
            .into_iter()
            .map(|(_, p)| {
                let s = |k: &str| p[k].as_str().unwrap_or_default().to_string();
                (s("task"), s("decision"))
            })
            .collect();
        let want: Vec<(String, String)> = (1..=5)
            .map(|t| (format!("T{t}"), "merge".to_string()))
            .collect();
        assert_eq!(ships, want);
        repo.forum_ok(&["verify", "--deep"]);
        assert_eq!(run_tree(repo), in_process_tree_of(repo.kind(), FIVE));
    });
}

#[test]
fn a_wave_shipped_early_goes_out_in_plan_order_and_one_worker_answers_in_it() {
    on_each_kind(|repo| {
        let server = NatsServer::start();
        let (_bare, url) = shared_four(repo);
        let m = model(repo, FIVE);
        let c = clone(&url);
        // One worker, one task at a time: it takes the tasks in the order they went out.
        let _w = worker(repo, c.path(), &server, &m, &["--no-sandbox"]);
        let (ok, _j, err) = finish(submit(repo, &server, &m));
        assert!(ok, "{err}\n{}", logs(&[&c]));
        let plan = ["T1", "T2", "T3", "T4", "T5"];
        let sent: Vec<String> = payloads(repo, "task_dispatched")
            .into_iter()
            .map(|(_, p)| p["task"].as_str().unwrap_or_default().to_string())
            .collect();
        assert_eq!(sent, plan, "the tasks went out in plan order");
        let (merged, results) = merges_and_results(repo);
        let answered: Vec<&str> = results.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(
            answered, plan,
            "the worker answered in the order they went out"
        );
        let order: Vec<&str> = merged.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(order, plan);
        repo.forum_ok(&["verify", "--deep"]);
    });
}

#[test]
fn a_wave_of_more_than_nine_tasks_goes_out_in_plan_order_not_sorted_by_id() {
    on_each_kind(|repo| {
        let server = NatsServer::start();
        let (_bare, url) = shared(repo);
        std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
        std::fs::write(
            repo.path().join(".forum/policy.toml"),
            "max_parallel = 2\nmax_tasks = 12\n",
        )
        .unwrap();
        let plan: Vec<String> = (1..=12).map(|i| format!("T{i}")).collect();
        let tasks: Vec<String> = (1..=12)
            .map(|i| format!(r#"{{"id":"T{i}","agent":"backend","instruction":"write f{i}.txt","depends_on":[],"done_when":["the file is there"]}}"#))
            .collect();
        let m = model(repo, &format!(r#"{{"tasks":[{}]}}"#, tasks.join(",")));
        let c = clone(&url);
        let _w = worker(repo, c.path(), &server, &m, &["--no-sandbox"]);
        let (ok, _j, err) = finish(submit(repo, &server, &m));
        assert!(ok, "{err}\n{}", logs(&[&c]));
        let sent: Vec<String> = payloads(repo, "task_dispatched")
            .into_iter()
            .map(|(_, p)| p["task"].as_str().unwrap_or_default().to_string())
            .collect();
        // Sorted by id they would go T1, T10, T11, T12, T2, ...: T2 would wait behind three
        // later tasks, and every merge after T1 behind T2.
        assert_eq!(sent, plan, "the tasks went out in plan order");
        let (merged, _) = merges_and_results(repo);
        let order: Vec<&str> = merged.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(order, plan);
        repo.forum_ok(&["verify", "--deep"]);
    });
}
