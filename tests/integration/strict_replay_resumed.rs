//! Strict replay of a dispatched run whose writer was killed mid-run and taken up by
//! `git forum resume` (a real `nats-server` and two `git forum worker`s, as in
//! `dispatch_ops.rs`): the replay runs the resume too, hands its dispatcher what the record says
//! was issued and answered, and decides again which attempts in flight the resume takes up, so
//! the `task_dispatched` entries that say `resumed_from` are compared; the results that came
//! while no writer listened are answered from the record.

use std::time::Duration;

use serde_json::json;

use crate::common::{Repo, on_each_kind};
use crate::dispatch_nats::{
    NatsServer, PLAN, clone, finish, logs, model, shared, slow_model, spawned, submit, worker,
};
use crate::dispatch_ops::on_stream;
use crate::strict_replay_work::{import_forged_as, no_divergence, strict};
use crate::work_run::payloads;

/// Records [`PLAN`] dispatched, its writer killed while the first wave is out (a slow worker
/// holds a task until the test lets it go) and resumed once a second worker did the rest of
/// the wave; every server and worker is stopped once the resumed run ends.
fn record_resumed(repo: &Repo) {
    let server = NatsServer::start();
    let (_bare, url) = shared(repo);
    let m = model(repo, PLAN);
    let clones: Vec<_> = (0..2).map(|_| clone(&url)).collect();
    let mark = clones[0].path().join("started");
    let slow = slow_model(clones[0].path(), &m, &mark);
    let slow_worker = worker(
        repo,
        clones[0].path(),
        &server,
        &slow,
        &["--name", "slow", "--no-sandbox"],
    );
    let mut run = submit(repo, &server, &m);
    crate::common::wait_until(
        "the slow worker to start a task of the three published",
        Duration::from_secs(60),
        || mark.exists() && on_stream(&server, "workers-main") == 3,
    );
    run.child.0.kill().unwrap();
    run.child.0.wait().unwrap();
    std::fs::write(crate::dispatch_nats::release(&mark), "").unwrap();
    let fast = worker(repo, clones[1].path(), &server, &m, &["--name", "fast"]);
    crate::common::wait_until(
        "three results on the writer's consumer",
        Duration::from_secs(60),
        || on_stream(&server, "writer-main-0") >= 3,
    );
    let mut c = repo.forum();
    c.args(["resume", "0", "--no-sandbox", "--cmd", &m, "--json"]);
    let (ok, _, err) = finish(spawned(c));
    assert!(ok, "{err}\n{}", logs(&clones.iter().collect::<Vec<_>>()));
    drop((slow_worker, fast, server));
}

#[test]
fn a_dispatched_run_resumed_after_its_writer_was_killed_replays_and_a_forged_take_up_diverges() {
    on_each_kind(|repo| {
        record_resumed(repo);
        let resumes = payloads(repo, "resume");
        assert_eq!(resumes.len(), 1);
        // A resume names the limits it runs under, here the request's.
        let (resume_at, resume) = &resumes[0];
        assert!(resume["limits"].is_object(), "{resume}");
        let taken: Vec<_> = payloads(repo, "task_dispatched")
            .into_iter()
            .filter(|(_, p)| p.get("resumed_from").is_some())
            .collect();
        assert_eq!(taken.len(), 3, "{taken:?}");
        let (code, r) = strict(repo, &[]);
        no_divergence(code, &r);
        assert_eq!(r["answer_sha256"], r["recomputed_answer_sha256"], "{r}");
        // A take-up edited to name another first dispatch: the writer takes up the one the
        // record issued.
        let (at, p) = &taken[0];
        let other = taken[1].1["resumed_from"].clone();
        assert_ne!(p["resumed_from"], other);
        import_forged_as(repo, "taken", *at, |b| b["resumed_from"] = other.clone());
        let (code, r) = strict(repo, &["--ledger", "taken"]);
        assert_eq!(code, Some(1), "{r}");
        assert_eq!(r["divergence"]["seq"], json!(at), "{r}");
        // A resume written by an older version names no limits: it replays under the
        // request's, which were its own, and the report says so.
        import_forged_as(repo, "older", *resume_at, |b| {
            b.as_object_mut().unwrap().remove("limits");
        });
        let (code, r) = strict(repo, &["--ledger", "older"]);
        no_divergence(code, &r);
        assert_eq!(r["from_record"], json!([no_limits(*resume_at)]), "{r}");
    });
}

/// The line a report gives for a resume at `seq` that names no limits.
fn no_limits(seq: u64) -> String {
    format!(
        "the resume at seq {seq} names no limits (a version before this one wrote them only where they differed from the request's, or not at all): its part is replayed under the request's limits"
    )
}

/// A run planned with no ceiling and paused at its first gate, then approved and resumed under
/// `--max-tokens 1`, which its worker's reservation does not fit: the ceiling is the resume's
/// alone, and its `resume` entry keeps it.
fn record_resumed_under_a_ceiling(repo: &Repo) {
    repo.git_ok(&["commit", "-q", "--allow-empty", "-m", "start"]);
    let plan = crate::work_run::plan(&[("T1", "write the notes")], false);
    let m = crate::work_run::model(repo, "m", &plan, "merge", "    echo 'wrote the notes'");
    let o = repo
        .forum()
        .args(["submit", "--cmd", &m, "--gate-waves", "0", "--quiet"])
        .arg("write the notes")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(8), "paused at its gate: {o:?}");
    repo.forum_ok(&["gate", "approve"]);
    let o = repo
        .forum()
        .args(["resume", "--cmd", &m, "--max-tokens", "1", "--json"])
        .output()
        .unwrap();
    let j: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o:?}"));
    assert_eq!(j["exit"]["name"], "stopped_on_ceiling", "{j}");
}

#[test]
fn a_ceiling_given_to_resume_alone_is_recorded_in_its_resume_entry_and_replayed() {
    on_each_kind(|repo| {
        record_resumed_under_a_ceiling(repo);
        let resumes = payloads(repo, "resume");
        assert_eq!(resumes.len(), 1);
        let (resume_at, resume) = &resumes[0];
        assert_eq!(resume["limits"]["max_tokens"], 1, "{resume}");
        let (budget_at, stop) = payloads(repo, "budget").pop().expect("the ceiling's stop");
        assert_eq!(stop["max_tokens"], 1, "{stop}");
        let (code, r) = strict(repo, &[]);
        no_divergence(code, &r);
        // As a resume recorded before it kept its limits: replayed under the request's, which
        // had no ceiling, the stop is not the replay's, from the first entry it shows in (the
        // task's result, refused by the ceiling) to the budget stop.
        import_forged_as(repo, "older", *resume_at, |b| {
            b.as_object_mut().unwrap().remove("limits");
        });
        let (code, r) = strict(repo, &["--ledger", "older"]);
        assert_eq!(code, Some(1), "{r}");
        let at = r["divergence"]["seq"].as_u64().unwrap();
        assert!(*resume_at < at && at <= budget_at, "{r}");
        let recorded = r["divergence"]["recorded"].as_str().unwrap();
        assert!(recorded.contains("budget"), "{r}");
        // The report says why: the resume names no limits.
        assert_eq!(r["from_record"], json!([no_limits(*resume_at)]), "{r}");
    });
}
