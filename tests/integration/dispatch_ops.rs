//! What a dispatched run (`submit --work --dispatch`) does besides running: `resume` after its
//! writer was killed, late duplicates, and credentials the server refuses. Each test starts its
//! own `nats-server` (see `dispatch_nats.rs`) and stops it, with every worker it starts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value as J;

use crate::common::{Repo, on_each_kind};
use crate::dispatch_nats::{
    NatsServer, PLAN, TWO, clone, finish, in_process_tree, logs, model, run_tree, shared,
    slow_model, spawned, submit, task_results, waited, worker,
};
use crate::work_run::payloads;

/// The figures of the writer's durable consumer of run 0's results (`None` before it exists).
fn writer_consumer(server: &NatsServer) -> Option<J> {
    let info = server.request(
        "$JS.API.CONSUMER.INFO.FORUM_main.writer-main-0",
        &serde_json::json!({}),
    );
    info.get("num_pending").is_some().then_some(info)
}

/// The messages consumer `name` of the ledger's stream has not had acknowledged: waiting
/// for delivery or delivered and not yet acknowledged.
pub(crate) fn on_stream(server: &NatsServer, name: &str) -> u64 {
    let c = server.request(
        &format!("$JS.API.CONSUMER.INFO.FORUM_main.{name}"),
        &serde_json::json!({}),
    );
    c["num_pending"].as_u64().unwrap_or(0) + c["num_ack_pending"].as_u64().unwrap_or(0)
}

#[test]
fn a_writer_killed_mid_run_is_resumed_and_takes_up_what_its_workers_did_meanwhile() {
    on_each_kind(|repo| {
        let server = NatsServer::start();
        let (_bare, url) = shared(repo);
        let m = model(repo, PLAN);
        let clones: Vec<_> = (0..2).map(|_| clone(&url)).collect();
        let mark = clones[0].path().join("started");
        let slow = slow_model(clones[0].path(), &m, &mark);
        let _slow = worker(
            repo,
            clones[0].path(),
            &server,
            &slow,
            &["--name", "slow", "--no-sandbox"],
        );
        // The writer publishes the first wave, a worker takes a task, and the writer is killed
        // (SIGKILL: nothing of it runs after) while the task is in flight.
        let mut run = submit(repo, &server, &m);
        crate::common::wait_until(
            "the slow worker to start a task of the three published",
            Duration::from_secs(60),
            || mark.exists() && on_stream(&server, "workers-main") == 3,
        );
        run.child.0.kill().unwrap();
        run.child.0.wait().unwrap();
        std::fs::write(crate::dispatch_nats::release(&mark), "").unwrap();
        // With no writer, a second worker does the rest of the wave and the slow one finishes:
        // their results wait on the run's durable results consumer. At least three: when the
        // slow worker's lease lapsed on a loaded machine, the fast one did its task too, and
        // both answers wait there (the later is witnessed as a duplicate, checked below).
        let _fast = worker(repo, clones[1].path(), &server, &m, &["--name", "fast"]);
        crate::common::wait_until(
            "three results on the writer's consumer",
            Duration::from_secs(60),
            || on_stream(&server, "writer-main-0") >= 3,
        );
        let before = payloads(repo, "task_dispatched");
        assert_eq!(before.len(), 3, "{before:?}");
        assert!(task_results(repo).is_empty());
        let mut c = repo.forum();
        c.args(["resume", "0", "--no-sandbox", "--cmd", &m, "--json"]);
        let (ok, j, err) = finish(spawned(c));
        let said = logs(&clones.iter().collect::<Vec<_>>());
        assert!(ok, "{err}\n{said}");
        let answer = j["answer"].as_str().unwrap_or_default();
        for t in 1..=6 {
            assert!(
                answer.contains(&format!("- T{t}: merged")),
                "{answer}\n{err}\n{said}\n{:?}",
                task_results(repo)
            );
        }
        // The first wave's attempts were taken up, not sent again: each is witnessed once more
        // under the resumed task, naming the entry that first dispatched it.
        let dispatched = payloads(repo, "task_dispatched");
        let first: BTreeMap<String, String> = before
            .iter()
            .map(|(_, p)| {
                (
                    p["attempt"].as_str().unwrap().to_string(),
                    p["task"].to_string(),
                )
            })
            .collect();
        let taken_up: Vec<&J> = dispatched
            .iter()
            .map(|(_, p)| p)
            .filter(|p| p.get("resumed_from").is_some())
            .collect();
        assert_eq!(taken_up.len(), 3, "{dispatched:?}");
        for p in &taken_up {
            assert!(first.contains_key(p["attempt"].as_str().unwrap()), "{p}");
        }
        assert_eq!(dispatched.len(), 6 + 3, "{dispatched:?}");
        // Every task has one result, of one attempt each; the slow worker's, which came while
        // no writer listened, is among them.
        let results = task_results(repo);
        assert_eq!(results.len(), 6, "{results:?}");
        let attempts: BTreeSet<&str> = results
            .iter()
            .map(|(_, r)| r["attempt"].as_str().unwrap())
            .collect();
        assert_eq!(attempts.len(), 6);
        // The slow worker's answer, which came while no writer listened, is taken up: as T1's
        // result, or, when its lease ran out on a busy machine and the fast worker did T1 too,
        // as a duplicate naming the same change (whichever answer came first is the result).
        let dups = payloads(repo, "duplicate_result");
        assert!(
            results.iter().any(|(_, r)| r["worker"] == "slow")
                || dups.iter().any(|(_, d)| d["worker"] == "slow"),
            "{results:?}"
        );
        for a in first.keys() {
            assert!(
                attempts.contains(a.as_str()),
                "attempt {a} of the killed writer was lost"
            );
        }
        assert!(dups.iter().all(|(_, d)| d["task"] == "T1"), "{dups:?}");
        crate::dispatch_redeliver::duplicates_name_their_results_ref(repo, &url);
        assert_eq!(
            repo.git_ok(&["rev-list", "--count", "main..forum/run-0"]),
            "6"
        );
        repo.forum_ok(&["verify", "--deep"]);
        assert_eq!(run_tree(repo), in_process_tree(repo.kind()));
        // Nothing is left on the run's results consumer.
        let c = writer_consumer(&server).unwrap();
        assert_eq!(
            (c["num_pending"].as_u64(), c["num_ack_pending"].as_u64()),
            (Some(0), Some(0)),
            "{c}"
        );
    });
}

/// A model for the writer that waits `seconds` before each answer, so the run's validation
/// and synthesis take that long after its last wave.
fn patient(dir: &Path, model: &str, seconds: u32) -> String {
    let path = dir.join("patient.sh");
    std::fs::write(
        &path,
        format!("#!/bin/sh\nsleep {seconds}\nexec '{model}' \"$@\"\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

#[test]
fn a_duplicate_that_comes_after_the_last_wave_is_witnessed_and_never_merged() {
    let repo = Repo::new("sha1");
    let server = NatsServer::start();
    let (_bare, url) = shared(&repo);
    let m = model(&repo, TWO);
    let c = clone(&url);
    let _w = worker(&repo, c.path(), &server, &m, &["--name", "w"]);
    let slow = patient(repo.path(), &m, 2);
    let run = submit(&repo, &server, &slow);
    // The validator's first verdict comes after the last wave: the duplicate is sent then.
    crate::common::wait_until("a verdict", Duration::from_secs(90), || {
        let started = repo
            .git(&["rev-parse", "--verify", "-q", "refs/forum/ledgers/main"])
            .status
            .success();
        started && !payloads(&repo, "verdict").is_empty()
    });
    let dispatched = payloads(&repo, "task_dispatched");
    let t1 = dispatched.iter().find(|(_, p)| p["task"] == "T1").unwrap();
    let late = serde_json::json!({
        "schema": "git-forum.dispatch.result/1", "ledger": "main", "run": 0, "task": "T1",
        "attempt": t1.1["attempt"], "worker": "late", "ok": true, "output": "wrote f1.txt again",
        "model": "m", "commit": "0".repeat(40), "error": null, "tool_calls": [],
        "model_calls": [], "checks": [], "confinement": "unconfined",
    });
    server.publish("forum.main.result.0", late.to_string().as_bytes());
    let (ok, j, err) = finish(run);
    assert!(ok, "{err}\n{}", logs(&[&c]));
    // The receipt names the worker that did each task.
    let tasks = j["receipt"]["work"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{j}"));
    assert_eq!(tasks.len(), 2, "{j}");
    for t in tasks {
        assert_eq!(t["worker"], "w", "{t}");
    }
    let dups = payloads(&repo, "duplicate_result");
    assert_eq!(dups.len(), 1, "{dups:?}\n{err}");
    let (seq, d) = &dups[0];
    assert_eq!(
        (d["task"].as_str(), d["worker"].as_str()),
        (Some("T1"), Some("late")),
        "{d}"
    );
    assert_eq!(d["commit"], "0".repeat(40));
    // After the last wave (the validators judge once every wave is done) and before the run's
    // last entry.
    let first_verdict = payloads(&repo, "verdict")
        .iter()
        .map(|(s, _)| *s)
        .min()
        .unwrap();
    assert!(*seq > first_verdict, "{seq} {first_verdict}");
    let last = crate::work_run::entries(&repo).last().unwrap()["seq"]
        .as_u64()
        .unwrap();
    assert!(*seq < last, "{seq} {last}");
    assert_eq!(task_results(&repo).len(), 2);
    assert_eq!(
        repo.git_ok(&["rev-list", "--count", "main..forum/run-0"]),
        "2"
    );
    repo.forum_ok(&["verify", "--deep"]);
}

#[test]
fn credentials_the_server_refuses_are_one_line_and_nothing_is_written_and_the_right_ones_work() {
    let repo = Repo::new("sha1");
    let server = NatsServer::with_user("forum", "s3cret");
    let (_bare, url) = shared(&repo);
    let plan = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"write f1.txt","depends_on":[],"done_when":["the file is there"]}]}"#;
    let m = model(&repo, plan);
    let at = format!("127.0.0.1:{}", server.port);
    for (url, why) in [
        (format!("nats://forum:wrong@{at}"), "a wrong password"),
        (format!("nats://{at}"), "no credentials"),
    ] {
        let o = repo
            .forum()
            .args([
                "submit",
                "--work",
                "--dispatch",
                &url,
                "--cmd",
                &m,
                "write the files",
            ])
            .output()
            .unwrap();
        let line = crate::common::one_line_error(&o, "refused the credentials");
        assert!(line.contains(&format!("nats://{at}")), "{why}: {line}");
        assert!(line.contains("authorization violation"), "{why}: {line}");
        assert!(!line.contains("wrong"), "the password is not shown: {line}");
        assert!(
            repo.git(&["rev-parse", "--verify", "-q", "refs/forum/ledgers/main"])
                .stdout
                .is_empty(),
            "{why}: nothing is written"
        );
    }
    // A worker refused the same way says so in one line.
    let c = clone(&url);
    let o = repo
        .forum()
        .current_dir(c.path().join("c"))
        .args([
            "worker",
            "--nats",
            &format!("nats://forum:wrong@{at}"),
            "--cmd",
            &m,
        ])
        .output()
        .unwrap();
    crate::common::one_line_error(&o, "refused the credentials");
    // The right ones: the run goes through, and the record keeps the server, not the password.
    let _w = worker(&repo, c.path(), &server, &m, &[]);
    let (ok, _, err) = finish(submit(&repo, &server, &m));
    assert!(ok, "{err}\n{}", logs(&[&c]));
    assert_eq!(task_results(&repo).len(), 1);
    for (_, p) in payloads(&repo, "task_dispatched") {
        assert_eq!(p["server"], format!("nats://{at}"), "{p}");
    }
    let request = repo.forum_json(&["show", "0", "--payload"]);
    assert_eq!(
        request["payload"]["work"]["dispatch"]["server"],
        format!("nats://{at}")
    );
    assert!(!request.to_string().contains("s3cret"));
}

#[test]
fn a_halt_reaches_the_worker_through_the_server_which_stops_the_task_and_answers_nothing() {
    let repo = Repo::new("sha1");
    let server = NatsServer::start();
    let (_bare, url) = shared(&repo);
    let m = model(&repo, TWO);
    let c = clone(&url);
    // The worker's model says its process id, then takes a minute: only a halt ends it.
    let pids = c.path().join("pids");
    let _w = worker(
        &repo,
        c.path(),
        &server,
        &stuck(c.path(), &m, &pids),
        &["--name", "w", "--no-sandbox"],
    );
    let run = submit(&repo, &server, &m);
    waited(
        "the worker to start a task",
        Duration::from_secs(60),
        &[&c],
        || started(&pids) == 1,
    );
    let out = repo.forum_ok(&["--json", "halt", "--reason", "stop", "--by", "ada"]);
    let halt: J = serde_json::from_str(&out).unwrap();
    assert_eq!(halt["stopped"], true, "{halt}");
    let (ok, j, err) = finish(run);
    assert!(!ok);
    assert_eq!(j["exit"]["name"], "halted", "{j}\n{err}");
    // The worker's model was killed with its process group.
    let pid = std::fs::read_to_string(&pids).unwrap().trim().to_string();
    crate::common::wait_until("the stopped model to end", Duration::from_secs(10), || {
        !Path::new(&format!("/proc/{pid}")).exists()
    });
    crate::common::wait_until("the worker to say so", Duration::from_secs(10), || {
        let said = logs(&[&c]);
        said.contains("stopped task T") && said.contains(" of run 0: ada halted it (stop)")
    });
    // Past two leases nothing was given out again: one start, no task left on the stream,
    // nothing answered or pushed.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(std::fs::read_to_string(&pids).unwrap().lines().count(), 1);
    let workers = server.request(
        "$JS.API.CONSUMER.INFO.FORUM_main.workers-main",
        &serde_json::json!({}),
    );
    assert_eq!(
        (
            workers["num_pending"].as_u64(),
            workers["num_ack_pending"].as_u64()
        ),
        (Some(0), Some(0)),
        "{workers}"
    );
    assert_eq!(writer_consumer(&server).unwrap()["num_pending"], 0);
    let pushed = Command::new("git")
        .args(["ls-remote", &url, "refs/forum/results/*"])
        .output()
        .unwrap();
    assert!(
        pushed.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&pushed.stdout)
    );
    // The run ends halted as a local run does: `halted` last, no result of a worker.
    let halted = payloads(&repo, "halted");
    assert_eq!(halted.len(), 1);
    assert_eq!(
        (halted[0].1["by"].as_str(), halted[0].1["reason"].as_str()),
        (Some("ada"), Some("stop"))
    );
    assert!(task_results(&repo).is_empty());
    assert_eq!(
        crate::work_run::kinds(&repo).last().map(String::as_str),
        Some("halted")
    );
    repo.forum_ok(&["verify", "--deep"]);
}

/// A model that writes its process id to `pids`, then takes a minute: only a halt or a kill
/// ends it. Its `pids` file is outside the task's worktree, where the sandbox lets no task
/// write, so the workers that run it are started with `--no-sandbox` (`dispatch_confined`
/// tests the sandbox itself).
fn stuck(dir: &Path, model: &str, pids: &Path) -> String {
    let path = dir.join("stuck.sh");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\necho $$ >> '{}'\nsleep 60\nexec '{model}' \"$@\"\n",
            pids.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// How many process ids `pids` holds.
fn started(pids: &Path) -> usize {
    std::fs::read_to_string(pids)
        .map(|p| p.lines().count())
        .unwrap_or(0)
}

#[test]
fn status_shows_a_dispatched_runs_tasks_on_the_server_and_each_workers_last_progress() {
    let repo = Repo::new("sha1");
    let server = NatsServer::start();
    let (_bare, url) = shared(&repo);
    let m = model(&repo, TWO);
    let (c0, c1) = (clone(&url), clone(&url));
    let (p0, p1) = (c0.path().join("pids"), c1.path().join("pids"));
    // The first worker takes a task and is killed; after its lease the task goes to the
    // second, which holds both.
    let mut victim = worker(
        &repo,
        c0.path(),
        &server,
        &stuck(c0.path(), &m, &p0),
        &["--name", "victim", "--no-sandbox"],
    );
    let run = submit(&repo, &server, &m);
    waited(
        "the first worker to start",
        Duration::from_secs(60),
        &[&c0],
        || started(&p0) == 1,
    );
    victim.0.kill().unwrap();
    victim.0.wait().unwrap();
    let _w = worker(
        &repo,
        c1.path(),
        &server,
        &stuck(c1.path(), &m, &p1),
        &["--name", "w", "--concurrency", "2", "--no-sandbox"],
    );
    crate::common::wait_until(
        "the second worker to hold both",
        Duration::from_secs(30),
        || started(&p1) == 2,
    );
    let s = repo.forum_json(&["status"]);
    let d = &s["last_run"]["dispatch"];
    assert_eq!(d["server"], server.url(), "{s}");
    assert_eq!(d["stream"], "FORUM_main");
    assert_eq!(d["error"], J::Null, "{d}");
    let figures: Vec<u64> = [
        "run_tasks",
        "pending",
        "in_flight",
        "redelivered",
        "results_waiting",
    ]
    .iter()
    .map(|k| d[k].as_u64().unwrap())
    .collect();
    assert_eq!(figures, [2, 0, 2, 1, 0], "{d}");
    let workers = d["workers"].as_array().unwrap();
    let by = |name: &str| workers.iter().find(|w| w["worker"] == name).cloned();
    let w = by("w").unwrap_or_else(|| panic!("{d}"));
    assert_eq!(
        (w["state"].as_str(), w["run"].as_u64()),
        (Some("working"), Some(0)),
        "{w}"
    );
    assert!(["T1", "T2"].contains(&w["task"].as_str().unwrap()), "{w}");
    assert!(w["attempt"].as_str().unwrap().len() == 32, "{w}");
    assert!(w["age_seconds"].as_u64().unwrap() <= 10, "{w}");
    // The killed worker's last word stays, and ages.
    let v = by("victim").unwrap_or_else(|| panic!("{d}"));
    assert_eq!(v["state"], "working", "{v}");
    let text = repo.forum_ok(&["status"]);
    assert!(
        text.contains(&format!(
            "dispatch: {}, stream FORUM_main: 2 of the run's tasks",
            server.url()
        )),
        "{text}"
    );
    assert!(
        text.contains("workers' consumer: 0 pending, 2 in flight, 1 redelivered"),
        "{text}"
    );
    assert!(text.contains("worker w: working task T"), "{text}");
    repo.forum_ok(&["halt"]);
    let (_, j, err) = finish(run);
    assert_eq!(j["exit"]["name"], "halted", "{j}\n{err}");
    // A server that cannot be reached leaves the figures out and says why.
    drop(server);
    let s = repo.forum_json(&["status"]);
    let e = s["last_run"]["dispatch"]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(e.contains("cannot reach the NATS server"), "{s}");
}

#[test]
fn a_worker_never_overwrites_a_result_another_worker_pushed_for_the_same_attempt() {
    let repo = Repo::new("sha1");
    let server = NatsServer::start();
    let (_bare, url) = shared(&repo);
    let plan = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"write f1.txt","depends_on":[],"done_when":["the file is there"]}]}"#;
    let m = model(&repo, plan);
    let c = clone(&url);
    let mark = c.path().join("started");
    let slow = slow_model(c.path(), &m, &mark);
    let _w = worker(
        &repo,
        c.path(),
        &server,
        &slow,
        &["--name", "late", "--no-sandbox"],
    );
    let run = submit(&repo, &server, &m);
    crate::common::wait_until("the worker to start", Duration::from_secs(60), || {
        mark.exists()
    });
    // Another worker, given the same attempt when a lease ran out, pushed first: its commit
    // (not on the task's base, as a sibling change is not) holds the attempt's results ref.
    let attempt = payloads(&repo, "task_dispatched")[0].1["attempt"]
        .as_str()
        .unwrap()
        .to_string();
    let to = format!("refs/forum/results/main/0/T1/{attempt}");
    let tree = repo.git_ok(&["rev-parse", "main^{tree}"]);
    let first = repo.git_ok(&["commit-tree", &tree, "-m", "the first worker's change"]);
    repo.git_ok(&["push", "-q", "origin", &format!("{first}:{to}")]);
    std::fs::write(crate::dispatch_nats::release(&mark), "").unwrap();
    let (_, _, err) = finish(run);
    let said = logs(&[&c]);
    // The late worker's push was refused; the first result stays where it was.
    let held = Command::new("git")
        .args(["ls-remote", &url, &to])
        .output()
        .unwrap();
    let held = String::from_utf8_lossy(&held.stdout);
    assert!(held.starts_with(&first), "{held}\n{err}\n{said}");
    let late = task_results(&repo)
        .into_iter()
        .map(|(_, r)| r)
        .find(|r| r["attempt"] == attempt.as_str())
        .unwrap_or_else(|| panic!("{err}\n{said}"));
    assert_eq!(late["ok"], false, "{late}");
    assert!(
        late["output"]
            .as_str()
            .unwrap_or_default()
            .contains("cannot push the change"),
        "{late}"
    );
}
