//! Strict replay checks again each worker's commit of a dispatched run (recorded with a real
//! `nats-server` and a `git forum worker`): the `result` names the commit, and the replay
//! reads it in the repository and decides again, as the writer did, whether it is one commit on
//! the task's base with the attempt's trailer. A refusal forged over an accepted commit, and an
//! acceptance of a commit that fails the checks, each diverge at the `change` entry; a commit
//! the repository lacks, and a result recorded before results named their commit, are answered
//! from the record, each with a line saying so.

use serde_json::json;

use crate::common::{Repo, on_each_kind};
use crate::dispatch_nats::{NatsServer, TWO, clone, finish, logs, model, shared, submit, worker};
use crate::strict_replay_work::{import_forged_as, no_divergence, strict};
use crate::work_run::payloads;

/// Records a dispatched run of [`TWO`] with one worker; the server is stopped once it ends.
fn record(repo: &Repo) {
    let server = NatsServer::start();
    let (_bare, url) = shared(repo);
    let m = model(repo, TWO);
    let c = clone(&url);
    let w = worker(
        repo,
        c.path(),
        &server,
        &m,
        &["--name", "w", "--no-sandbox"],
    );
    let (ok, j, err) = finish(submit(repo, &server, &m));
    assert!(ok, "{err}\n{}", logs(&[&c]));
    assert_eq!(j["git_forum_receipt"]["status"], "answered", "{j}");
    drop(w);
    drop(server);
}

/// T1's dispatched result and the change the writer made from its commit: their seqs, and
/// the worker's commit.
fn t1(repo: &Repo) -> (u64, u64, String) {
    let (result, r) = payloads(repo, "result")
        .into_iter()
        .find(|(_, p)| p["id"] == "T1" && p["attempt"].is_string())
        .expect("T1's result");
    let commit = r["commit"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string();
    let (change, _) = payloads(repo, "change")
        .into_iter()
        .find(|(_, p)| p["task"] == "T1" && p["commit"].is_string())
        .expect("T1's change");
    (result, change, commit)
}

#[test]
fn a_dispatched_workers_commit_is_checked_again_and_a_forged_refusal_or_acceptance_diverges() {
    on_each_kind(|repo| {
        record(repo);
        let (result, change, commit) = t1(repo);
        let (code, r) = strict(repo, &[]);
        no_divergence(code, &r);
        assert_eq!(r["from_record"], json!([]), "{r}");

        // The writer made to have refused the commit its checks pass.
        let attempt = payloads(repo, "result")
            .into_iter()
            .find(|(s, _)| *s == result)
            .map(|(_, p)| p["attempt"].as_str().unwrap().to_string())
            .unwrap();
        import_forged_as(repo, "refused", change, |b| {
            *b = json!({"task": "T1", "base": b["base"], "commit": null, "refused": true,
                "attempt": attempt,
                "error": format!("the worker's commit {commit} does not carry the trailer Forum-Attempt: {attempt}")});
        });
        let (code, r) = strict(repo, &["--ledger", "refused"]);
        assert_eq!(code, Some(1), "{r}");
        assert_eq!(r["divergence"]["seq"], json!(change), "{r}");

        // A refusal forged as the world's, saying the results ref held the base: the ref
        // holds the commit now, and a ref pushed without force could not have moved from the
        // base's commit... which it could (the commit descends from it), so the claim stands.
        let result_ref = repo
            .git_ok(&["for-each-ref", "--format=%(refname)", "refs/forum/results/"])
            .lines()
            .find(|r| r.ends_with(&attempt))
            .unwrap_or_else(|| panic!("no results ref of attempt {attempt}"))
            .to_string();
        let base = repo.git_ok(&["rev-parse", "HEAD"]).trim().to_string();
        let held = |x: &str| {
            let x = x.to_string();
            let (result_ref, commit, attempt) =
                (result_ref.clone(), commit.clone(), attempt.clone());
            move |b: &mut serde_json::Value| {
                *b = json!({"task": "T1", "base": b["base"], "commit": null, "refused": true,
                    "attempt": attempt,
                    "error": format!("{result_ref} holds {x}, not the commit {commit} the result names")});
            }
        };
        import_forged_as(repo, "held-base", change, held(&base));
        let (_, r) = strict(repo, &["--ledger", "held-base"]);
        assert_ne!(r["divergence"]["seq"], json!(change), "{r}");
        // Said to have held a commit the one it holds now does not descend from (an unrelated
        // one): the ref could never have moved from it to the commit, so the claim is the
        // record's and diverges at the change.
        let other = repo.git_ok(&[
            "commit-tree",
            "-m",
            "unrelated",
            &format!("{base}^{{tree}}"),
        ]);
        import_forged_as(repo, "held-other", change, held(other.trim()));
        let (code, r) = strict(repo, &["--ledger", "held-other"]);
        assert_eq!(code, Some(1), "{r}");
        assert_eq!(r["divergence"]["seq"], json!(change), "{r}");
        // A failed fetch stays the world's, though the ref holds the commit now.
        import_forged_as(repo, "unfetched", change, |b| {
            *b = json!({"task": "T1", "base": b["base"], "commit": null, "refused": true,
                "attempt": attempt,
                "error": format!("cannot fetch the worker's commit from {result_ref}: the remote hung up")});
        });
        let (_, r) = strict(repo, &["--ledger", "unfetched"]);
        assert_ne!(r["divergence"]["seq"], json!(change), "{r}");

        // The result made to name the run's base, which is no commit on the task's base: the
        // record says the writer took it.
        let base = repo.git_ok(&["rev-parse", "HEAD"]);
        let base = base.trim().to_string();
        import_forged_as(repo, "accepted", result, |b| b["commit"] = json!(base));
        let (code, r) = strict(repo, &["--ledger", "accepted"]);
        assert_eq!(code, Some(1), "{r}");
        assert_eq!(r["divergence"]["seq"], json!(change), "{r}");
        assert!(
            r["divergence"]["recomputed"]
                .as_str()
                .unwrap()
                .contains("is not one commit on the task's base"),
            "{r}"
        );
    });
}

#[test]
fn a_commit_not_here_or_not_recorded_is_answered_from_the_record_saying_so() {
    let repo = Repo::new("sha1");
    record(&repo);
    let (result, _, _) = t1(&repo);
    // A commit this repository does not hold: the record answers, in one line.
    let absent = "0123456789abcdef0123456789abcdef01234567";
    import_forged_as(&repo, "absent", result, |b| b["commit"] = json!(absent));
    let (code, r) = strict(&repo, &["--ledger", "absent"]);
    no_divergence(code, &r);
    let lines = r["from_record"].as_array().unwrap();
    assert_eq!(lines.len(), 1, "{r}");
    assert!(
        lines[0]
            .as_str()
            .unwrap()
            .contains(&format!("{absent} of attempt")),
        "{r}"
    );
    // The text output says so too.
    let o = repo
        .forum()
        .args(["--ledger", "absent", "replay", "0", "--strict"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("note: the worker's commit"), "{out}");
    // A result recorded before results named their commit.
    import_forged_as(&repo, "older", result, |b| {
        b.as_object_mut().unwrap().remove("commit");
    });
    let (code, r) = strict(&repo, &["--ledger", "older"]);
    no_divergence(code, &r);
    let lines = r["from_record"].as_array().unwrap();
    assert!(
        lines[0].as_str().unwrap().contains(&format!(
            "the result at seq {result} was recorded before results named"
        )),
        "{r}"
    );
}
