//! `git forum apply` and `git forum discard` through the real binary: a run branch built with `GitWork` from the library, then brought into the user's branch
//! (fast-forward or merge, witnessed as `applied`) or dropped (branch and worktrees removed,
//! change refs kept, witnessed as a `note`); every refusal is one line and changes nothing.
//! The same operations over HTTP (`POST /apply`, `POST /discard`) and MCP (`forum.apply`,
//! `forum.discard`).

use serde_json::{Value as J, json};

use git_forum::run::{Author, CommitRules, Keep, Tie, Workbench};

use crate::common::{Repo, on_each_kind, one_line_error};

/// Two committed files and one `request` entry; returns the run (its seq).
pub fn seeded_run(repo: &Repo) -> u64 {
    std::fs::write(repo.path().join("a.txt"), "one\ntwo\n").unwrap();
    std::fs::write(repo.path().join("b.txt"), "bee\n").unwrap();
    repo.git_ok(&["add", "-A"]);
    repo.git_ok(&["commit", "-q", "-m", "seed"]);
    repo.append("user", "request", r#"{"text":"change a.txt"}"#)["seq"]
        .as_u64()
        .unwrap()
}

/// Runs one task of run `run` that writes `text` to `file`, keeps and integrates its change;
/// `finish`: remove its worktrees (else they stay, as after a killed run). Returns the change.
pub fn one_change(repo: &Repo, run: u64, file: &str, text: &str, finish: bool) -> String {
    let work = repo.open_work(repo.path(), "main", run).unwrap();
    let t = work.open_task("t1", &[]).unwrap();
    std::fs::write(t.path.join(file), text).unwrap();
    let tie = Tie {
        ledger: "main".into(),
        run_seq: run,
        task_seq: run + 1,
        task_hash: "ab".repeat(32),
    };
    let author = Author {
        lane: "coder".into(),
        model: "m".into(),
    };
    let c = work
        .commit(&t, &author, &tie, "edit", &CommitRules::unscreened(4096))
        .unwrap()
        .commit
        .unwrap();
    work.keep("t1", &c, Keep::Work).unwrap();
    work.integrate("t1", &c).unwrap();
    if finish {
        work.finish().unwrap();
    }
    c
}

fn entry(repo: &Repo, seq: u64) -> J {
    repo.forum_json(&["show", &seq.to_string(), "--payload"])
}

fn ledger_len(repo: &Repo) -> u64 {
    repo.forum_json(&["status"])["entries"].as_u64().unwrap()
}

#[test]
fn apply_fast_forwards_the_current_branch_and_witnesses_applied() {
    on_each_kind(|repo| {
        let run = seeded_run(repo);
        let head = repo.git_ok(&["rev-parse", "HEAD"]);
        let c = one_change(repo, run, "a.txt", "one\nTWO\n", true);
        let branch = repo.git_ok(&["symbolic-ref", "--short", "HEAD"]);
        let report = repo.forum_json(&["apply", &run.to_string()]);
        assert_eq!(report["schema"], "git-forum.apply/1");
        assert_eq!(report["mode"], "fast-forward");
        assert_eq!(report["from"], json!(head));
        assert_eq!(report["to"], json!(c));
        assert_eq!(repo.git_ok(&["rev-parse", "HEAD"]), c);
        assert_eq!(repo.git_ok(&["status", "--porcelain"]), "");
        assert_eq!(
            std::fs::read_to_string(repo.path().join("a.txt")).unwrap(),
            "one\nTWO\n"
        );
        let e = entry(repo, report["seq"].as_u64().unwrap());
        assert_eq!(e["entry"]["kind"], "applied");
        assert_eq!(e["entry"]["causal_parent"], json!(run));
        assert_eq!(
            e["payload"],
            json!({"run": run, "branch": branch, "run_branch": format!("forum/run-{run}"),
                   "from": head, "to": c, "mode": "fast-forward"})
        );
        // Again: nothing new, refused in one line, nothing written.
        let before = ledger_len(repo);
        let o = repo.forum().args(["apply"]).output().unwrap();
        one_line_error(&o, "is already in");
        assert_eq!(ledger_len(repo), before);
        repo.forum_ok(&["verify", "--deep"]);
        repo.fsck();
    });
}

#[test]
fn apply_makes_a_merge_commit_when_the_branch_moved_on() {
    let repo = Repo::new("sha1");
    let run = seeded_run(&repo);
    let c = one_change(&repo, run, "a.txt", "one\nTWO\n", true);
    std::fs::write(repo.path().join("b.txt"), "bee\nmore\n").unwrap();
    repo.git_ok(&["commit", "-q", "-am", "the user went on"]);
    let mine = repo.git_ok(&["rev-parse", "HEAD"]);
    let report = repo.forum_json(&["apply"]);
    assert_eq!(report["mode"], "merge", "{report}");
    let parents = repo.git_ok(&["log", "-1", "--format=%P", "HEAD"]);
    assert_eq!(parents, format!("{mine} {c}"));
    assert_eq!(
        std::fs::read_to_string(repo.path().join("a.txt")).unwrap(),
        "one\nTWO\n"
    );
}

#[test]
fn apply_refuses_a_dirty_tree_an_unknown_run_a_run_without_a_branch_and_a_conflict() {
    let repo = Repo::new("sha1");
    let run = seeded_run(&repo);
    let bare = repo.append("user", "request", r#"{"text":"another"}"#)["seq"]
        .as_u64()
        .unwrap();
    let refused = |args: &[&str], needle: &str| {
        let head = repo.git_ok(&["rev-parse", "HEAD"]);
        let status = repo.git_ok(&["status", "--porcelain"]);
        let before = ledger_len(&repo);
        let o = repo.forum().args(args).output().unwrap();
        let err = one_line_error(&o, needle);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(repo.git_ok(&["rev-parse", "HEAD"]), head);
        assert_eq!(repo.git_ok(&["status", "--porcelain"]), status);
        assert_eq!(ledger_len(&repo), before);
    };
    refused(&["apply"], "no run of ledger main has a branch");
    one_change(&repo, run, "a.txt", "one\nTWO\n", true);
    refused(&["apply", "99"], "ledger main has no run 99");
    refused(&["apply", &bare.to_string()], "has no branch forum/run-");
    std::fs::write(repo.path().join("a.txt"), "dirty\n").unwrap();
    refused(&["apply", &run.to_string()], "uncommitted changes (a.txt)");
    repo.git_ok(&["checkout", "-q", "--", "a.txt"]);
    std::fs::write(repo.path().join("a.txt"), "one\nmine\n").unwrap();
    repo.git_ok(&["commit", "-q", "-am", "a conflicting edit"]);
    refused(&["apply", &run.to_string()], "conflicts with");
    refused(&["discard", "99"], "ledger main has no run 99");
    refused(&["discard", &bare.to_string()], "nothing to discard");
}

#[test]
fn discard_removes_the_branch_and_worktrees_and_keeps_the_work_refs() {
    on_each_kind(|repo| {
        let run = seeded_run(repo);
        let head = repo.git_ok(&["rev-parse", "HEAD"]);
        // The run's worktree is left behind, as by a run that was killed.
        let c = one_change(repo, run, "a.txt", "one\nTWO\n", false);
        let area = repo.work_area("main", run);
        assert!(area.join("t1").exists());
        let report = repo.forum_json(&["discard"]);
        assert_eq!(report["schema"], "git-forum.discard/1");
        assert_eq!(report["run"], json!(run));
        assert_eq!(report["worktrees"], json!(1));
        assert_eq!(report["branch_tip"], json!(c));
        let kept = format!("refs/forum/work/main/{run}/t1");
        assert_eq!(report["kept"], json!([kept]));
        assert!(!area.exists());
        assert_eq!(
            repo.git_ok(&["worktree", "list", "--porcelain"])
                .lines()
                .filter(|l| l.starts_with("worktree "))
                .count(),
            1
        );
        let branches = repo.git_ok(&["for-each-ref", "--format=%(refname)", "refs/heads/forum/"]);
        assert_eq!(branches, "");
        assert_eq!(repo.git_ok(&["rev-parse", &kept]), c);
        assert_eq!(repo.git_ok(&["rev-parse", "HEAD"]), head);
        let e = entry(repo, report["seq"].as_u64().unwrap());
        assert_eq!(e["entry"]["kind"], "note");
        assert_eq!(e["payload"]["run"], json!(run));
        repo.forum_ok(&["verify", "--deep"]);
        repo.fsck();
    });
}

#[test]
fn apply_and_discard_answer_the_same_over_http_and_mcp() {
    let repo = Repo::new("sha1");
    let run = seeded_run(&repo);
    let c = one_change(&repo, run, "a.txt", "one\nTWO\n", true);
    let served = repo.serve(&[], std::process::Stdio::null());
    let (code, body) =
        crate::common::http_json(&served.addr, "POST", "/apply", &json!({"run": run}));
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["schema"], "git-forum.apply/1");
    assert_eq!(body["to"], json!(c));
    let (code, body) = crate::common::http_json(&served.addr, "POST", "/apply", &json!({}));
    assert_eq!(code, 409, "{body}");
    drop(served);
    // MCP: discard the branch (its commit is in main now; the work ref stays).
    let reply = repo.mcp_call(&[], "forum.discard", json!({"run": run}));
    let text = reply["result"]["content"][0]["text"].as_str().unwrap();
    let body: J = serde_json::from_str(text).unwrap();
    assert_eq!(body["schema"], "git-forum.discard/1", "{body}");
    assert_eq!(body["branch_tip"], json!(c));
    assert_eq!(
        repo.git_ok(&["rev-parse", &format!("refs/forum/work/main/{run}/t1")]),
        c
    );
}

#[test]
fn doctor_removes_the_worktrees_of_a_run_that_died() {
    let repo = Repo::new("sha1");
    let run = seeded_run(&repo);
    // The GitWork is dropped without `finish`: its lock goes, its worktree stays.
    one_change(&repo, run, "a.txt", "one\nTWO\n", false);
    let area = repo.work_area("main", run);
    assert!(area.join("t1").exists());
    let o = repo.forum().args(["doctor"]).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("work: removed 1 work area(s) left by --work runs that died"),
        "{out}"
    );
    assert!(!area.exists());
    let json = repo.forum_json(&["doctor"]);
    assert_eq!(json["work"]["removed_stale"], json!([]));
    assert_eq!(
        repo.git_ok(&["worktree", "list", "--porcelain"])
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count(),
        1
    );
}
