//! Strict replay screens a dispatched worker's commit again, as the writer screened it before
//! committing it as the task's change: its sizes against the run's limits, the secrets it
//! adds, the links that leave the tree. The commit is read in the repository (the writer
//! fetched it from the worker's results ref), through the writer's own function
//! (`crate::work::made::screen_made`), so the `change` entry is not taken on its word: a
//! change forged to say a commit with a secret passed, a refusal forged over a commit that
//! passes, and a link that leaves removed from the record each diverge at that entry.
//!
//! Recorded with a real `nats-server` and a `git forum worker`: T1's worker adds an AWS key,
//! T2's a symbolic link to `/etc/passwd`, T3's a file over the run's `max_file_bytes`.

use serde_json::{Value as J, json};

use crate::common::{Repo, on_each_kind};
use crate::dispatch_nats::{NatsServer, clone, finish, logs, shared, spawned, submit, worker};
use crate::strict_replay_work::{import_forged_as, no_divergence, strict};
use crate::work_run::payloads;

/// Three tasks in one wave, each writing what its instruction names.
pub(crate) const THREE: &str = r#"{"tasks":[
{"id":"T1","agent":"backend","instruction":"write f1.txt","depends_on":[],"done_when":["the file is there"]},
{"id":"T2","agent":"backend","instruction":"write f2.txt","depends_on":[],"done_when":["the file is there"]},
{"id":"T3","agent":"backend","instruction":"write f3.txt","depends_on":[],"done_when":["the file is there"]}]}"#;

/// The bytes a change may add in one file, in this run (`[work] max_file_bytes`).
pub(crate) const MAX_FILE_BYTES: u64 = 2000;

/// An AWS access key id of the real shape, put together here so no source line holds one.
pub(crate) fn aws_key() -> String {
    format!("AKIA{}", "QX7RTY2ZW4NB9K3M")
}

/// The scripted model: T1 writes a key, T2 links out of the tree, T3 writes a file larger
/// than the run allows.
fn model(repo: &Repo) -> String {
    let plan = THREE.replace('\n', "");
    let work = format!(
        "    case \"$p\" in\n    *'write f1.txt'*) printf 'aws_access_key_id = %s\\n' '{}' > f1.txt ;;\n    *'write f2.txt'*) ln -s /etc/passwd f2.txt ;;\n    *) head -c {} /dev/zero | tr '\\000' x > f3.txt ;;\n    esac; echo 'wrote it'",
        aws_key(),
        MAX_FILE_BYTES + 1000
    );
    crate::work_run::model(repo, "screens", &plan, "merge", &work)
}

/// Records the dispatched run with one worker (checked in full when `full`: the writer puts
/// each worker's commit in a worktree of its own and runs the checks there); the server is
/// stopped once it ends.
fn record(repo: &Repo, full: bool) {
    let server = NatsServer::start();
    let (_bare, url) = shared(repo);
    let m = model(repo);
    let seat = if full {
        format!("[runtime.default]\ncmd = \"{m}\"\nverify = \"full\"\n")
    } else {
        String::new()
    };
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        format!("{seat}[work]\nmax_file_bytes = {MAX_FILE_BYTES}\n"),
    )
    .unwrap();
    let c = clone(&url);
    let w = worker(
        repo,
        c.path(),
        &server,
        &m,
        &["--name", "w", "--no-sandbox"],
    );
    let submitted = if full {
        // The seat is the runtime file's (no `--cmd`), so its `verify` holds.
        let mut c = repo.forum();
        c.args(["submit", "--work", "--no-sandbox", "--check", "true"])
            .args(["--dispatch", &server.url(), "--json", "write the files"]);
        spawned(c)
    } else {
        submit(repo, &server, &m)
    };
    let (_, j, err) = finish(submitted);
    assert!(j["answer"].is_string(), "{j}\n{err}\n{}", logs(&[&c]));
    drop(w);
    drop(server);
}

/// The first `change` of `task`: its seq and body.
pub(crate) fn change(repo: &Repo, task: &str) -> (u64, J) {
    payloads(repo, "change")
        .into_iter()
        .find(|(_, p)| p["task"] == task)
        .unwrap_or_else(|| panic!("no change of {task}: {:?}", payloads(repo, "change")))
}

/// The commit the worker of `task` sent (its first `result` that names one).
fn worker_commit(repo: &Repo, task: &str) -> String {
    payloads(repo, "result")
        .into_iter()
        .find_map(|(_, p)| (p["id"] == task).then(|| p["commit"].as_str().map(str::to_string))?)
        .unwrap_or_else(|| panic!("no commit of {task}"))
}

/// `git forum --ledger LEDGER replay 0 --strict`: diverges at `seq`.
pub(crate) fn diverges_at(repo: &Repo, ledger: &str, seq: u64) -> J {
    let (code, r) = strict(repo, &["--ledger", ledger]);
    assert_eq!(code, Some(1), "{r}");
    assert_eq!(r["divergence"]["seq"], json!(seq), "{r}");
    r
}

#[test]
fn a_dispatched_commit_the_screens_refuse_replays_and_an_edited_screen_outcome_diverges() {
    on_each_kind(|repo| screened_again(repo, false));
}

/// A run checked in full screens the worker's commit by the same rule (its worktree here only
/// runs the checks), so the replay screens it again as well.
#[test]
fn a_commit_checked_in_full_is_screened_again_and_an_edited_screen_outcome_diverges() {
    on_each_kind(|repo| screened_again(repo, true));
}

/// Records the run (checked in full when `full`), replays it with no divergence and nothing
/// answered from the record, then forges each screen's outcome in turn.
fn screened_again(repo: &Repo, full: bool) {
    record(repo, full);
    // What the writer's screens made of each worker's commit.
    let (t1, c1) = change(repo, "T1");
    assert_eq!(c1["commit"], J::Null, "{c1}");
    assert_eq!(c1["secrets"][0]["path"], "f1.txt", "{c1}");
    let (t2, c2) = change(repo, "T2");
    assert!(c2["commit"].is_string(), "{c2}");
    assert_eq!(c2["links_out"][0]["target"], "/etc/passwd", "{c2}");
    let (_, c3) = change(repo, "T3");
    assert_eq!(c3["refused"], true, "{c3}");
    assert!(
        c3["error"].as_str().unwrap().contains("max_file_bytes"),
        "{c3}"
    );
    let (code, r) = strict(repo, &[]);
    no_divergence(code, &r);
    assert_eq!(r["from_record"], json!([]), "{r}");

    // The secret's refusal made an acceptance of the worker's commit: screened again,
    // the commit still adds the key.
    let commit = worker_commit(repo, "T1");
    let tree = repo.git_ok(&["rev-parse", &format!("{commit}^{{tree}}")]);
    import_forged_as(repo, "passed", t1, |b| {
        *b = json!({"task": "T1", "base": b["base"], "commit": commit,
            "tree": tree.trim(), "files": [], "diff": "", "truncated": false});
    });
    let r = diverges_at(repo, "passed", t1);
    let recomputed = r["divergence"]["recomputed"].as_str().unwrap();
    assert!(recomputed.contains("secrets"), "{r}");

    // A secret's refusal forged over T2's commit, which adds no secret.
    import_forged_as(repo, "secret", t2, |b| {
        *b = json!({"task": "T2", "base": b["base"], "commit": null,
            "error": "the change adds 1 secret(s): f2.txt:1 (aws-access-token)",
            "secrets": [{"path": "f2.txt", "line": 1, "rule": "aws-access-token",
                "fingerprint": "0000000000000000"}]});
    });
    diverges_at(repo, "secret", t2);

    // T2's link that leaves the tree taken out of the record.
    import_forged_as(repo, "inside", t2, |b| {
        b.as_object_mut().unwrap().remove("links_out");
    });
    let r = diverges_at(repo, "inside", t2);
    let recomputed = r["divergence"]["recomputed"].as_str().unwrap();
    assert!(recomputed.contains("/etc/passwd"), "{r}");
    if full {
        // The writer ran T2's check itself, in its own worktree.
        let checks = payloads(repo, "check");
        assert!(
            checks
                .iter()
                .any(|(_, c)| c["task"] == "T2" && c.get("claimed_by").is_none()),
            "{checks:?}"
        );
    }
}
