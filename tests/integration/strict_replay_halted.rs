//! Strict replay of a dispatched run stopped from outside while a worker held its task (a real
//! `nats-server` and a `git forum worker` whose model holds until the test lets it go): by
//! `git forum halt`, and by Ctrl-C of the writer. Once the run is interrupted it writes no
//! entry of its own, so no result of the held task is witnessed: the record ends with the
//! entries the writer wrote before the stop, then `halted`, which keeps what stopped it in
//! fields of its own (`by`, `reason`, and `signal` for a signal). The replay lets the engine
//! write as many entries as the record holds before the stop and copies `halted` as the
//! world's doing; the writer's decisions before it (each `task_dispatched` of the held
//! tasks) are made again and compared, so an edited one diverges at its seq.

use std::time::Duration;

use serde_json::json;

use crate::common::{Repo, on_each_kind};
use crate::dispatch_nats::{
    NatsServer, Submitted, TWO, clone, finish, logs, model, release, shared, slow_model, spawned,
    submit, task_results, worker,
};
use crate::strict_replay_work::{import_forged_as, no_divergence, strict};
use crate::work_run::payloads;

/// [`TWO`] dispatched to one worker (named `w`, in clone `c`) whose model holds its first
/// task until the test writes `release(&mark)`, the run going on; returned once the worker
/// holds that task.
struct Held {
    server: NatsServer,
    _bare: tempfile::TempDir,
    /// The plain model.
    m: String,
    c: tempfile::TempDir,
    mark: std::path::PathBuf,
    w: crate::dispatch_nats::Killed,
    run: Submitted,
}

fn held(repo: &Repo) -> Held {
    let server = NatsServer::start();
    let (_bare, url) = shared(repo);
    let m = model(repo, TWO);
    let c = clone(&url);
    let mark = c.path().join("started");
    let slow = slow_model(c.path(), &m, &mark);
    let w = worker(
        repo,
        c.path(),
        &server,
        &slow,
        &["--name", "w", "--no-sandbox"],
    );
    let run = submit(repo, &server, &m);
    crate::common::wait_until("the worker to hold a task", Duration::from_secs(60), || {
        mark.exists()
    });
    Held {
        server,
        _bare,
        m,
        c,
        mark,
        w,
        run,
    }
}

/// Records [`TWO`] dispatched to one worker whose model holds its first task, stopped by
/// `stop` (given the running writer) once the worker holds it; the `halted` entry.
fn record_stopped(repo: &Repo, stop: impl FnOnce(&Repo, &Submitted)) -> serde_json::Value {
    let Held {
        server,
        _bare,
        c,
        w,
        run,
        ..
    } = held(repo);
    stop(repo, &run);
    let (ok, j, err) = finish(run);
    assert!(!ok, "{j}");
    assert_eq!(j["exit"]["name"], "halted", "{j}\n{err}\n{}", logs(&[&c]));
    drop((w, server));
    // The worker held a task when the stop came: no result of it, `halted` last.
    assert!(task_results(repo).is_empty(), "{}", logs(&[&c]));
    let kinds = crate::work_run::kinds(repo);
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("halted"),
        "{kinds:?}"
    );
    payloads(repo, "halted").remove(0).1
}

/// The held run replays with no divergence, and its first `task_dispatched` edited to name
/// another base ref diverges at its seq.
fn replays_and_an_edited_dispatch_diverges(repo: &Repo) {
    let (code, r) = strict(repo, &[]);
    no_divergence(code, &r);
    let (at, _) = payloads(repo, "task_dispatched").remove(0);
    import_forged_as(repo, "forged", at, |b| {
        b["base_ref"] = json!("refs/forum/bases/main/0/T9");
    });
    let (code, r) = strict(repo, &["--ledger", "forged"]);
    assert_eq!(code, Some(1), "{r}");
    assert_eq!(r["divergence"]["seq"], json!(at), "{r}");
}

#[test]
fn a_dispatched_run_halted_while_a_worker_held_a_task_replays_and_an_edit_before_it_diverges() {
    on_each_kind(|repo| {
        let halted = record_stopped(repo, |repo, _| {
            repo.forum_ok(&["halt", "--reason", "stop", "--by", "ada"]);
        });
        assert_eq!(
            (&halted["by"], &halted["reason"]),
            (&json!("ada"), &json!("stop"))
        );
        replays_and_an_edited_dispatch_diverges(repo);
    });
}

#[test]
fn a_dispatched_run_whose_writer_got_ctrl_c_while_a_worker_held_a_task_replays() {
    let repo = Repo::new("sha1");
    let halted = record_stopped(&repo, |_, run| {
        let pid = run.child.0.id().to_string();
        let o = std::process::Command::new("kill")
            .args(["-INT", &pid])
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
    });
    assert_eq!(halted["signal"], "SIGINT", "{halted}");
    replays_and_an_edited_dispatch_diverges(&repo);
}

#[test]
fn a_dispatched_run_resumed_after_a_halt_sends_fresh_attempts_replays_and_an_edit_after_diverges() {
    on_each_kind(|repo| {
        let Held {
            server,
            _bare,
            m,
            c,
            mark,
            w,
            run,
        } = held(repo);
        repo.forum_ok(&["halt", "--reason", "stop", "--by", "ada"]);
        let (_, j, err) = finish(run);
        assert_eq!(j["exit"]["name"], "halted", "{j}\n{err}");
        // The worker that heard the halt does the rest: the resume tells it the halt is over.
        std::fs::write(release(&mark), "").unwrap();
        let mut resume = repo.forum();
        resume.args(["resume", "0", "--no-sandbox", "--cmd", &m, "--json"]);
        let (ok, j, err) = finish(spawned(resume));
        assert!(ok, "{j}\n{err}\n{}", logs(&[&c]));
        drop((w, server));
        // The halt answered what was in flight: each task went out again as a fresh attempt,
        // none taken up.
        let halted_at = payloads(repo, "halted")[0].0;
        let after: Vec<_> = payloads(repo, "task_dispatched")
            .into_iter()
            .filter(|(s, _)| *s > halted_at)
            .collect();
        assert_eq!(after.len(), 2, "{after:?}");
        assert!(
            after.iter().all(|(_, p)| p.get("resumed_from").is_none()),
            "{after:?}"
        );
        assert_eq!(task_results(repo).len(), 2, "{}", logs(&[&c]));
        let (code, r) = strict(repo, &[]);
        no_divergence(code, &r);
        // The gate's decision on T1 after the halt, edited from merge to block.
        let (at, _) = payloads(repo, "ship")
            .into_iter()
            .find(|(s, p)| *s > halted_at && p["task"] == "T1")
            .expect("T1's ship decision after the halt");
        import_forged_as(repo, "forged", at, |b| b["decision"] = json!("block"));
        let (code, r) = strict(repo, &["--ledger", "forged"]);
        assert_eq!(code, Some(1), "{r}");
        assert_eq!(r["divergence"]["seq"], json!(at), "{r}");
    });
}
