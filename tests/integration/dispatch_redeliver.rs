//! A dispatched run's attempts between its writer and the stream: a task is published with
//! its attempt id as the JetStream message id, so `resume` publishes again every attempt with
//! no result on record and the server drops the copies it still has (a writer killed between
//! witnessing a dispatch and publishing it leaves no attempt unanswered); and a task given to
//! a second worker after its lease ran out is merged once, the late worker's answer naming
//! the change the first push left in the results ref. Each test starts its own `nats-server`
//! and stops it, with every worker it starts.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value as J;

use crate::common::{Repo, on_each_kind};
use crate::dispatch_confined::{hooked_remote, path_with_binary};
use crate::dispatch_nats::{
    Killed, NatsServer, clone, finish, logs, model, release, shared, slow_model, spawned,
    task_results,
};
use crate::work_run::{payloads, setup};

/// Three tasks over two waves: T1 and T2, then T3 on T1.
const PLAN: &str = r#"{"tasks":[
{"id":"T1","agent":"backend","instruction":"write f1.txt","depends_on":[],"done_when":["the file is there"]},
{"id":"T2","agent":"backend","instruction":"write f2.txt","depends_on":[],"done_when":["the file is there"]},
{"id":"T3","agent":"backend","instruction":"write f3.txt","depends_on":["T1"],"done_when":["the file is there"]}]}"#;

/// A `git forum worker` (lease 2 s, unconfined) in `clone` on `server` with `cmd` as its seat,
/// `extra` flags and `env`; the built binary first on its `PATH`, so the remote's server hook
/// finds `git forum`.
fn worker(
    repo: &Repo,
    clone: &Path,
    server: &NatsServer,
    cmd: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Killed {
    let mut c = repo.forum();
    c.current_dir(clone.join("c"))
        .env("PATH", path_with_binary())
        .envs(env.iter().copied())
        .args(["worker", "--nats", &server.url(), "--lease", "2"])
        .args(["--no-sandbox", "--cmd", cmd])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(clone.join("worker.log")).unwrap());
    Killed(c.spawn().unwrap())
}

/// `git ARGS` in `dir`: its output, trimmed.
fn git_in(dir: &Path, args: &[&str]) -> String {
    let o = std::process::Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// How many messages the ledger's stream holds.
fn on_stream(server: &NatsServer) -> u64 {
    let info = server.request("$JS.API.STREAM.INFO.FORUM_main", &serde_json::json!({}));
    info["state"]["messages"].as_u64().unwrap_or(0)
}

#[test]
fn a_writer_killed_between_witnessing_a_dispatch_and_publishing_it_is_resumed_and_the_attempt_published_again()
 {
    on_each_kind(|repo| {
        let server = NatsServer::start();
        let (_bare, url) = shared(repo);
        let m = model(repo, PLAN);
        // The writer kills itself (SIGKILL) right after it witnessed its first dispatch,
        // before it published that task; no worker runs yet.
        let mut c = repo.forum();
        c.env("GIT_FORUM_FAILPOINT", "task-dispatched").args([
            "submit",
            "--work",
            "--no-sandbox",
            "--check",
            "true",
            "--dispatch",
            &server.url(),
            "--cmd",
            &m,
            "--json",
            "write the files",
        ]);
        let (ok, _, err) = finish(spawned(c));
        assert!(!ok, "{err}");
        let before = payloads(repo, "task_dispatched");
        assert!(!before.is_empty() && before.len() <= 2, "{before:?}");
        assert!(
            on_stream(&server) < before.len() as u64,
            "an attempt on record is not on the stream: {} of {}",
            on_stream(&server),
            before.len()
        );
        let w = clone(&url);
        let _w = worker(repo, w.path(), &server, &m, &["--name", "w"], &[]);
        let mut c = repo.forum();
        c.args(["resume", "0", "--no-sandbox", "--cmd", &m, "--json"]);
        let (ok, j, err) = finish(spawned(c));
        assert!(ok, "{err}\n{}", logs(&[&w]));
        let answer = j["answer"].as_str().unwrap_or_default();
        for t in 1..=3 {
            assert!(
                answer.contains(&format!("- T{t}: merged")),
                "{answer}\n{err}"
            );
        }
        // Each attempt the killed writer issued was published again under its id and
        // answered once; the server dropped the copy of any it already had.
        let results = task_results(repo);
        assert_eq!(results.len(), 3, "{results:?}");
        let answered: BTreeSet<&str> = results
            .iter()
            .map(|(_, r)| r["attempt"].as_str().unwrap())
            .collect();
        for (_, p) in &before {
            let a = p["attempt"].as_str().unwrap();
            assert!(
                answered.contains(a),
                "attempt {a} of the killed writer was lost"
            );
        }
        let taken_up = payloads(repo, "task_dispatched")
            .into_iter()
            .filter(|(_, p)| p.get("resumed_from").is_some())
            .count();
        assert_eq!(taken_up, before.len());
        assert!(payloads(repo, "duplicate_result").is_empty());
        assert_eq!(
            repo.git_ok(&["rev-list", "--count", "main..forum/run-0"]),
            "3"
        );
        repo.forum_ok(&["verify", "--deep"]);
        assert_eq!(on_stream(&server), 0, "nothing is left on the stream");
    });
}

/// A seat that holds on the task writing `f2.txt` (it touches `mark`, then waits until the
/// test creates `release(mark)`, at most a minute) and does every other call at once.
fn holds_on_t2(dir: &Path, model: &str, mark: &Path) -> String {
    let path = dir.join("holds.sh");
    let body = format!(
        "#!/bin/sh\ncase \"$1\" in *'write f2.txt'*)\n  touch '{}'\n  i=0\n  while [ ! -e '{}' ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done ;;\nesac\nexec '{model}' \"$@\"\n",
        mark.display(),
        release(mark).display()
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

#[test]
fn a_task_given_to_a_second_worker_after_its_lease_ran_out_is_merged_once_and_the_late_answer_is_a_duplicate_of_the_same_change()
 {
    let repo = Repo::new("sha1");
    let server = NatsServer::start();
    setup(&repo);
    let (bare, url) = hooked_remote(&repo);
    let plan = r#"{"tasks":[
{"id":"T1","agent":"backend","instruction":"write f1.txt","depends_on":[],"done_when":["the file is there"]},
{"id":"T2","agent":"backend","instruction":"write f2.txt","depends_on":["T1"],"done_when":["the file is there"]}]}"#;
    let m = model(&repo, plan);
    let (ca, cb) = (clone(&url), clone(&url));
    // Worker `late` takes T1 and holds it without extending its lease (a test hook), so the
    // server gives T1 to worker `b` after 2 s; `late` does one task and stops.
    let mark_a = ca.path().join("started");
    let _late = worker(
        &repo,
        ca.path(),
        &server,
        &slow_model(ca.path(), &m, &mark_a),
        &["--name", "late", "--max-tasks", "1"],
        &[("GIT_FORUM_TEST_NO_LEASE_RENEWAL", "1")],
    );
    // The writer's pushes go through the server hook too: `git forum` on its PATH.
    let mut c = repo.forum();
    c.env("PATH", path_with_binary())
        .args(["submit", "--work", "--no-sandbox", "--check", "true"])
        .args(["--dispatch", &server.url(), "--cmd", &m, "--json"])
        .arg("write the files");
    let mut run = spawned(c);
    crate::common::wait_until("`late` to start T1", Duration::from_secs(120), || {
        mark_a.exists() || run.child.0.try_wait().unwrap().is_some()
    });
    if !mark_a.exists() {
        let (_, _, err) = finish(run);
        panic!("the run ended first: {err}\n{}", logs(&[&ca]));
    }
    let mark_b = cb.path().join("t2");
    let _b = worker(
        &repo,
        cb.path(),
        &server,
        &holds_on_t2(cb.path(), &m, &mark_b),
        &["--name", "b"],
        &[],
    );
    // `b` did T1 (its change merged, so T2 went out) and now holds T2: the run is open.
    crate::common::wait_until("`b` to hold T2", Duration::from_secs(90), || {
        mark_b.exists()
    });
    std::fs::write(release(&mark_a), "").unwrap();
    // `late` finishes T1, finds the results ref there (the server hook refuses to move it)
    // and answers with the commit it holds; the writer holds that answer as a duplicate.
    crate::common::wait_until("the late answer", Duration::from_secs(120), || {
        crate::dispatch_ops::on_stream(&server, "writer-main-0") == 1
    });
    std::fs::write(release(&mark_b), "").unwrap();
    let (ok, j, err) = finish(run);
    let said = logs(&[&ca, &cb]);
    assert!(ok, "{err}\n{said}");
    let answer = j["answer"].as_str().unwrap_or_default();
    for t in ["T1", "T2"] {
        assert!(
            answer.contains(&format!("- {t}: merged")),
            "{answer}\n{said}"
        );
    }
    let results = task_results(&repo);
    assert_eq!(results.len(), 2, "{results:?}");
    let t1 = results.iter().find(|(_, r)| r["id"] == "T1").unwrap();
    assert_eq!(t1.1["worker"], "b", "{results:?}");
    let attempt = t1.1["attempt"].as_str().unwrap();
    let dups = payloads(&repo, "duplicate_result");
    assert_eq!(dups.len(), 1, "{dups:?}\n{said}");
    let d: &J = &dups[0].1;
    assert_eq!(
        (d["task"].as_str(), d["worker"].as_str(), d["ok"].as_bool()),
        (Some("T1"), Some("late"), Some(true)),
        "{d}"
    );
    assert_eq!(
        (d["attempt"].as_str(), &d["found_in_ref"]),
        (Some(attempt), &J::Bool(true))
    );
    // The late answer names the change the results ref holds: `b`'s, the one merged.
    let ref_name = format!("refs/forum/results/main/0/T1/{attempt}");
    let held = git_in(bare.path(), &["rev-parse", &ref_name]);
    assert_eq!(d["commit"].as_str(), Some(held.as_str()), "{d}");
    let worker_of = git_in(
        bare.path(),
        &[
            "log",
            "-1",
            "--format=%(trailers:key=Forum-Worker,valueonly)",
            &held,
        ],
    );
    assert_eq!(worker_of.trim(), "b");
    assert!(said.contains("already held"), "{said}");
    assert_eq!(
        repo.git_ok(&["rev-list", "--count", "main..forum/run-0"]),
        "2"
    );
    repo.forum_ok(&["verify", "--deep"]);
}

/// Every `duplicate_result` of run 0 is a second answer of an attempt that has its result
/// (a task given out again after a lease ran out on a busy machine), and names the commit
/// that attempt's results ref on the remote at `url` holds: never another change.
pub(crate) fn duplicates_name_their_results_ref(repo: &Repo, url: &str) {
    let answered: BTreeSet<String> = task_results(repo)
        .iter()
        .map(|(_, r)| r["attempt"].as_str().unwrap().to_string())
        .collect();
    for (_, d) in payloads(repo, "duplicate_result") {
        let attempt = d["attempt"].as_str().unwrap();
        assert!(answered.contains(attempt), "{d}");
        let name = format!(
            "refs/forum/results/main/0/{}/{attempt}",
            d["task"].as_str().unwrap()
        );
        let held = repo.git_ok(&["ls-remote", url, &name]);
        let held = held.split_whitespace().next().unwrap_or_default();
        assert_eq!(d["commit"].as_str(), Some(held), "{d}");
    }
}
