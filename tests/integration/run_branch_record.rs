//! A `--work` run's branch and its record agree. `git forum reproduce` rebuilds the run branch
//! through the engine's own merge rule: a run whose change conflicted and was made again on
//! top rebuilds to the branch's tree, and a record that names a change which conflicts is
//! named with its task and commit. A writer killed between moving the run branch and
//! witnessing `integrated` leaves the branch ahead of its record: `resume` witnesses that
//! integration once it checks out (its parent, trailer and tree), or resets the branch and
//! integrates the change again when it does not; either way strict replay of the finished run
//! finds no divergence and `verify --deep` passes.

use serde_json::{Value as J, json};

use crate::common::{Repo, on_each_kind};
use crate::strict_replay::forged_export;
use crate::strict_replay_merge::{import_as, record};
use crate::strict_replay_work::strict;
use crate::work_run::{
    CHECK, FIX_ADD, branch_commits, branch_commits_or_none, clean, one_task_model, payloads, setup,
    trailers_name_tasks,
};

/// `git forum [ARGS] reproduce 0 --json`: its exit code and report.
fn reproduce(repo: &Repo, args: &[&str]) -> (Option<i32>, J) {
    let o = repo
        .forum()
        .args(args)
        .args(["reproduce", "0", "--json"])
        .output()
        .unwrap();
    let r = serde_json::from_slice(&o.stdout).unwrap_or_else(|_| {
        panic!(
            "{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o.status.code(), r)
}

/// The change commit of the `change` entry at `seq`.
fn change_commit(repo: &Repo, seq: u64) -> String {
    payloads(repo, "change")
        .into_iter()
        .find(|(s, _)| *s == seq)
        .and_then(|(_, b)| b["commit"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no change commit at seq {seq}"))
}

#[test]
fn reproduce_rebuilds_a_run_with_a_conflict_and_a_rerun_to_the_branchs_tree() {
    on_each_kind(|repo| {
        // T1 merges, T2 conflicts and is made again on top, T3 adds nothing, T4 is blocked.
        record(repo);
        let refs = repo.git_ok(&["for-each-ref", "--format=%(refname) %(objectname)"]);
        let (code, r) = reproduce(repo, &[]);
        assert_eq!(code, Some(0), "{r}");
        assert_eq!(r["mismatches"], json!([]), "{r}");
        let tip = branch_commits(repo, 0).pop().unwrap();
        let tree = repo.git_ok(&["rev-parse", &format!("{tip}^{{tree}}")]);
        assert_eq!(r["branch_tree"], json!(tree), "{r}");
        assert_eq!(r["rebuilt_tree"], json!(tree), "{r}");
        // The changes rebuilt are the ones witnessed integrated: not T2's first, which
        // conflicted, nor T3's, which added nothing.
        let integrated: Vec<J> = payloads(repo, "integrated")
            .into_iter()
            .map(|(_, b)| b["commit"].clone())
            .collect();
        assert_eq!(r["merged"], json!(integrated), "{r}");
        let conflicted = payloads(repo, "conflict")[0].1["change"].as_u64().unwrap();
        let first = change_commit(repo, conflicted);
        assert!(!integrated.contains(&json!(first)), "{r}");
        // No ref moved.
        assert_eq!(
            repo.git_ok(&["for-each-ref", "--format=%(refname) %(objectname)"]),
            refs
        );
    });
}

#[test]
fn a_recorded_merge_that_conflicts_on_rebuild_is_named_with_its_task_and_commit() {
    let repo = Repo::new("sha1");
    record(&repo);
    // The record made to say T2's first change (the one that conflicted) is what merged.
    let conflicted = payloads(&repo, "conflict")[0].1["change"].as_u64().unwrap();
    let first = change_commit(&repo, conflicted);
    let (at, _) = payloads(&repo, "integrated")
        .into_iter()
        .find(|(_, b)| b["task"] == "T2")
        .unwrap();
    let forged = forged_export(&repo, at, |b| b["commit"] = json!(first));
    import_as(&repo, "forged", &forged);
    let (code, r) = reproduce(&repo, &["--ledger", "forged"]);
    assert_eq!(code, Some(1), "{r}");
    assert_eq!(r["rebuilt_tree"], J::Null, "{r}");
    let lines: Vec<&str> = r["mismatches"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(J::as_str)
        .filter(|l| l.contains("could not be rebuilt"))
        .collect();
    assert_eq!(lines.len(), 1, "{r}");
    assert!(
        lines[0].contains(&format!("the change {first} of task T2 conflicts"))
            && lines[0].contains("calc.py"),
        "{r}"
    );
}

/// Records a one-task run killed right after its run branch moved, before `integrated` was
/// witnessed: the model, and the branch commit the record does not know of.
fn killed_after_the_branch_moved(repo: &Repo) -> (String, String) {
    setup(repo);
    let m = one_task_model(repo, "model", "merge", FIX_ADD);
    let o = repo
        .forum()
        .env("GIT_FORUM_FAILPOINT", "integrate-moved")
        .args([
            "submit", "--work", "--check", CHECK, "--cmd", &m, "fix calc",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success(), "the failpoint did not fire");
    assert_eq!(payloads(repo, "ship").len(), 1);
    assert!(payloads(repo, "integrated").is_empty());
    let ahead = branch_commits_or_none(repo, 0);
    assert_eq!(ahead.len(), 1, "the branch did not move: {ahead:?}");
    (m, ahead[0].clone())
}

/// What every finished run must show: one `integrated` entry per branch commit naming it and
/// its tree, strict replay with no divergence, `verify --deep` and `reproduce` passing.
fn record_matches_branch(repo: &Repo) -> Vec<String> {
    let commits = branch_commits(repo, 0);
    let integrated = payloads(repo, "integrated");
    assert_eq!(
        integrated.len(),
        commits.len(),
        "{integrated:?} {commits:?}"
    );
    for ((_, b), c) in integrated.iter().zip(&commits) {
        assert_eq!(b["tip"], json!(c), "{b}");
        let tree = repo.git_ok(&["rev-parse", &format!("{c}^{{tree}}")]);
        assert_eq!(b["tree"], json!(tree), "{b}");
    }
    let (code, r) = strict(repo, &[]);
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(r["divergence"], J::Null, "{r}");
    assert_eq!(r["recorded"], r["recomputed"], "{r}");
    repo.forum_ok(&["verify", "--deep"]);
    let (code, r) = reproduce(repo, &[]);
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(r["mismatches"], json!([]), "{r}");
    commits
}

#[test]
fn a_branch_moved_before_its_integration_was_witnessed_is_witnessed_on_resume() {
    on_each_kind(|repo| {
        let (m, ahead) = killed_after_the_branch_moved(repo);
        let j = repo.forum_json(&["resume", "--cmd", &m]);
        assert_eq!(j["git_forum_receipt"]["status"], "answered", "{j}");
        // The commit the killed writer made is kept: not integrated a second time.
        assert_eq!(branch_commits(repo, 0), [ahead]);
        let resumed = payloads(repo, "resume")[0].0;
        let (at, b) = payloads(repo, "integrated").remove(0);
        assert!(
            at > resumed,
            "witnessed at {at}, before the resume at {resumed}"
        );
        assert_eq!(b["task"], "T1", "{b}");
        assert_eq!(payloads(repo, "resume")[0].1["reused"], json!(["T1"]));
        let commits = record_matches_branch(repo);
        trailers_name_tasks(repo, 0, &commits);
        clean(repo);
    });
}

#[test]
fn a_branch_ahead_with_a_commit_that_does_not_check_out_is_reset_and_merged_again() {
    on_each_kind(|repo| {
        let (m, ahead) = killed_after_the_branch_moved(repo);
        // The commit the branch is ahead with, its tree changed: same parent and trailers.
        let blob = repo.git_in(&["hash-object", "-w", "--stdin"], b"rogue\n");
        let listing = repo.git_ok(&["ls-tree", &ahead]);
        let listing = format!("{listing}\n100644 blob {blob}\trogue.txt\n");
        let tree = repo.git_in(&["mktree"], listing.as_bytes());
        let message = repo.git_ok(&["log", "-1", "--format=%B", &ahead]);
        let rogue = repo.git_in(
            &["commit-tree", &tree, "-p", &format!("{ahead}^")],
            message.as_bytes(),
        );
        repo.git_ok(&["update-ref", "refs/heads/forum/run-0", &rogue, &ahead]);
        let j = repo.forum_json(&["resume", "--cmd", &m]);
        assert_eq!(j["git_forum_receipt"]["status"], "answered", "{j}");
        let commits = record_matches_branch(repo);
        assert_eq!(commits.len(), 1, "{commits:?}");
        assert_ne!(commits[0], rogue);
        let files = repo.git_ok(&["ls-tree", "--name-only", &commits[0]]);
        assert!(!files.lines().any(|f| f == "rogue.txt"), "{files}");
        let calc = repo.git_ok(&["show", &format!("{}:calc.py", commits[0])]);
        assert!(calc.contains("return a + b"), "{calc}");
        clean(repo);
    });
}
