//! Strict replay of runs dispatched through a real NATS JetStream server (`submit --work
//! --dispatch`): the run is recorded with `nats-server` and a `git forum worker`, the server is
//! stopped, and `git forum replay RUN --strict` recomputes the writer's decisions over the
//! workers' results (which tasks went out in which wave, each result taken or refused, the
//! retry of a refused change, a duplicate witnessed and never merged, the gate, the merges,
//! the answer) with what came from outside answered from the record, without a network.

use serde_json::json;

use crate::common::{Repo, on_each_kind};
use crate::dispatch_nats::{
    NatsServer, PLAN, TWO, clone, finish, logs, model, shared, spawned, submit, task_results,
    worker,
};
use crate::dispatch_refused::{install_hook, spoil_results};
use crate::strict_replay_work::{import_forged, import_forged_as, no_divergence, seq_of, strict};
use crate::work_run::payloads;

/// Records a dispatched run of `plan` in `repo` with one worker (`extra`: its flags), after
/// `spoil` had its say on the bare remote; the server is stopped once the run ends.
fn record(repo: &Repo, plan: &str, extra: &[&str], spoil: impl Fn(&std::path::Path)) {
    let server = NatsServer::start();
    let (bare, url) = shared(repo);
    spoil(bare.path());
    let m = model(repo, plan);
    let c = clone(&url);
    let mut flags = vec!["--name", "w", "--no-sandbox"];
    flags.extend_from_slice(extra);
    let w = worker(repo, c.path(), &server, &m, &flags);
    let (ok, j, err) = finish(submit(repo, &server, &m));
    assert!(ok, "{err}\n{}", logs(&[&c]));
    assert_eq!(j["git_forum_receipt"]["status"], "answered", "{j}");
    drop(w);
    drop(server);
}

#[test]
fn a_dispatched_run_of_two_waves_replays_strictly_with_no_divergence() {
    on_each_kind(|repo| {
        record(repo, PLAN, &[], |_| {});
        assert_eq!(payloads(repo, "task_dispatched").len(), 6);
        assert_eq!(task_results(repo).len(), 6);
        let refs = repo.git_ok(&["for-each-ref", "--format=%(refname) %(objectname)"]);
        // No server runs now: every answer comes from the record.
        let (code, r) = strict(repo, &[]);
        no_divergence(code, &r);
        assert_eq!(r["answer_sha256"], r["recomputed_answer_sha256"], "{r}");
        // The replay moved no ref.
        assert_eq!(
            repo.git_ok(&["for-each-ref", "--format=%(refname) %(objectname)"]),
            refs
        );
    });
}

#[test]
fn a_dispatched_run_with_refused_and_retried_changes_replays_with_no_divergence() {
    on_each_kind(|repo| {
        // The first results ref pushed is deleted, the second moved to the task's base.
        record(repo, TWO, &[], |bare| spoil_results(bare, 1, 1));
        let sent = payloads(repo, "task_dispatched");
        assert_eq!(sent.len(), 4, "{sent:?}");
        assert_eq!(
            sent.iter()
                .filter(|(_, p)| p.get("retry").is_some())
                .count(),
            2
        );
        let (code, r) = strict(repo, &[]);
        no_divergence(code, &r);
    });
}

#[test]
fn a_dispatched_change_refused_at_every_attempt_replays_to_the_same_failure() {
    let repo = Repo::new("sha1");
    let server = NatsServer::start();
    let (bare, url) = shared(&repo);
    spoil_results(bare.path(), 1000, 0);
    let one = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"write f1.txt","depends_on":[],"done_when":["the file is there"]}]}"#;
    let m = model(&repo, one);
    let c = clone(&url);
    let _w = worker(
        &repo,
        c.path(),
        &server,
        &m,
        &["--name", "w", "--no-sandbox"],
    );
    let (_, j, err) = finish(submit(&repo, &server, &m));
    assert_eq!(j["exit"]["name"], "nothing_delivered", "{j}\n{err}");
    assert_eq!(payloads(&repo, "task_dispatched").len(), 3);
    drop(server);
    let (code, r) = strict(&repo, &[]);
    no_divergence(code, &r);
}

#[test]
fn a_dispatched_run_with_a_duplicate_result_replays_with_no_divergence() {
    let repo = Repo::new("sha1");
    record(&repo, TWO, &["--answer-twice"], |_| {});
    let dups = payloads(&repo, "duplicate_result");
    assert!(!dups.is_empty());
    let (code, r) = strict(&repo, &[]);
    no_divergence(code, &r);
    // The duplicate made to say it was merged: the writer never says so.
    let at = dups[0].0;
    import_forged(&repo, at, |b| b["reason"] = json!("merged"));
    let (code, r) = strict(&repo, &["--ledger", "forged"]);
    assert_eq!(code, Some(1), "{r}");
    assert_eq!(r["divergence"]["seq"], json!(at), "{r}");
}

#[test]
fn an_edited_ship_verdict_or_retry_of_a_dispatched_run_is_a_divergence_at_its_seq() {
    on_each_kind(|repo| {
        record(repo, TWO, &[], |bare| spoil_results(bare, 1, 0));
        // The gate said merge; the ship entry made to say block.
        let ship = seq_of(repo, "ship", "task", "T2");
        import_forged(repo, ship, |b| b["decision"] = json!("block"));
        let (code, r) = strict(repo, &["--ledger", "forged"]);
        assert_eq!(code, Some(1), "{r}");
        assert_eq!(r["divergence"]["seq"], json!(ship), "{r}");
        assert!(
            r["divergence"]["recomputed"]
                .as_str()
                .unwrap()
                .contains("decision:merge"),
            "{r}"
        );
        // The retry of the refused change made to allow more tries than the writer gives.
        let retry = payloads(repo, "task_dispatched")
            .into_iter()
            .find(|(_, p)| p.get("retry").is_some())
            .map(|(s, _)| s)
            .expect("a retry");
        import_forged_as(repo, "forged-retry", retry, |b| {
            b["retry"]["at_most"] = json!(9)
        });
        let (code, r) = strict(repo, &["--ledger", "forged-retry"]);
        assert_eq!(code, Some(1), "{r}");
        assert_eq!(r["divergence"]["seq"], json!(retry), "{r}");
    });
}

#[test]
fn a_dispatched_run_whose_base_could_not_be_pushed_replays_and_an_edited_end_diverges() {
    on_each_kind(|repo| {
        let server = NatsServer::start();
        let (bare, _url) = shared(repo);
        install_hook(
            bare.path(),
            "pre-receive",
            "while read old new ref; do\n  case \"$ref\" in refs/forum/bases/*) echo 'bases are closed here' >&2; exit 1 ;; esac\ndone\n",
        );
        let m = model(repo, TWO);
        let (_, _, err) = finish(submit(repo, &server, &m));
        drop(server);
        let unsent = payloads(repo, "result")
            .into_iter()
            .find(|(_, p)| p["error"] == "unpublished")
            .map(|(s, _)| s)
            .unwrap_or_else(|| panic!("no unpublished task: {err}"));
        // What the remote said is given back; what the writer made of it is made again.
        let (code, r) = strict(repo, &[]);
        no_divergence(code, &r);
        import_forged(repo, unsent, |b| b["ok"] = json!(true));
        let (code, r) = strict(repo, &["--ledger", "forged"]);
        assert_eq!(code, Some(1), "{r}");
        assert_eq!(r["divergence"]["seq"], json!(unsent), "{r}");
    });
}

#[test]
fn a_dispatched_task_whose_worktree_failed_to_open_replays_and_an_edited_refusal_diverges() {
    on_each_kind(|repo| {
        let server = NatsServer::start();
        let (_bare, url) = shared(repo);
        let m = model(repo, TWO);
        let w = clone(&url);
        let _w = worker(
            repo,
            w.path(),
            &server,
            &m,
            &["--name", "w", "--no-sandbox"],
        );
        // Checked in full, so the writer opens a worktree of its own for each task (the seat
        // is the runtime file's, not `--cmd`, so its `verify` holds).
        crate::dispatch_claimed::checked_in_full(repo, &m);
        let mut c = repo.forum();
        c.env("GIT_FORUM_FAILPOINT_FAIL", "task-worktree")
            .args(["submit", "--work", "--no-sandbox", "--check", "true"])
            .args(["--dispatch", &server.url(), "--json"])
            .arg("write the files");
        let (_, j, err) = finish(spawned(c));
        assert_eq!(j["exit"]["name"], "answered", "{j}\n{err}");
        drop(server);
        let (refused, _) = payloads(repo, "change")
            .into_iter()
            .find(|(_, p)| p["refused"] == true)
            .unwrap_or_else(|| panic!("no refused change: {err}"));
        // The failed opening is given back; the refusal and the run after it are made again.
        let (code, r) = strict(repo, &[]);
        no_divergence(code, &r);
        // The refusal edited to say the commit was not refused: the opening failed, so the
        // writer refuses it again.
        import_forged(repo, refused, |b| b["refused"] = json!(false));
        let (code, r) = strict(repo, &["--ledger", "forged"]);
        assert_eq!(code, Some(1), "{r}");
        assert_eq!(r["divergence"]["seq"], json!(refused), "{r}");
    });
}
