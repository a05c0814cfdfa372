//! What `git forum apply RUN` would do against the current branch, without doing it: `apply
//! --dry-run` (text and `--json`) and the apply page (`/view/apply/SEQ`) say fast-forward
//! when the branch is still at the run's base, merge after an unrelated commit, and conflict,
//! naming the file, after a commit that changed the same lines; each shows the diff the branch
//! would receive. The work tree, the index, the ledger and every ref stay as they were. On
//! every repository kind.

use serde_json::{Value as J, json};

use crate::common::{Repo, on_each_kind, one_line_error};
use crate::view::{login, page};
use crate::work_apply::{one_change, seeded_run};

/// Everything a dry run must leave alone: every ref and what HEAD names, the work tree's
/// status, the index file's bytes and the ledger's length.
fn untouched(repo: &Repo) -> (String, String, String, Vec<u8>, J) {
    let status = repo.git_ok(&["status", "--porcelain"]);
    (
        repo.git_ok(&["for-each-ref", "--format=%(refname) %(objectname)"]),
        repo.git_ok(&["symbolic-ref", "HEAD"]) + " " + &repo.git_ok(&["rev-parse", "HEAD"]),
        status,
        std::fs::read(repo.git_dir().join("index")).unwrap(),
        repo.forum_json(&["status"])["entries"].clone(),
    )
}

/// The dry run of `run` as JSON and as text, the apply page, and the proof nothing moved.
fn dry_run(
    repo: &Repo,
    served: &crate::common::Served,
    cookie: &str,
    run: u64,
) -> (J, String, String) {
    let before = untouched(repo);
    let r = repo.forum_json(&["apply", &run.to_string(), "--dry-run"]);
    let text = repo.forum_ok(&["apply", &run.to_string(), "--dry-run"]);
    let got = page(served, cookie, &format!("/view/apply/{run}"));
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(untouched(repo), before, "the dry run changed something");
    (r, text, got.body)
}

#[test]
fn apply_dry_run_says_fast_forward_merge_or_conflict_and_changes_nothing() {
    on_each_kind(|repo| {
        let run = seeded_run(repo);
        let base = repo.git_ok(&["rev-parse", "HEAD"]);
        let branch = repo.git_ok(&["symbolic-ref", "--short", "HEAD"]);
        let c = one_change(repo, run, "a.txt", "one\nTWO\n", true);
        let served = repo.serve(&[], std::process::Stdio::null());
        let cookie = login(&served);

        // The branch is still at the run's base: a fast-forward, receiving the run's change.
        let (r, text, html) = dry_run(repo, &served, &cookie, run);
        assert_eq!(r["schema"], "git-forum.apply-dry-run/1");
        assert_eq!(
            (&r["outcome"], &r["would_apply"], &r["ours"], &r["theirs"]),
            (
                &json!("fast-forward"),
                &json!(true),
                &json!(base),
                &json!(c)
            ),
            "{r}"
        );
        assert_eq!(r["branch"], json!(branch));
        assert_eq!(r["run_branch"], json!(format!("forum/run-{run}")));
        assert_eq!(
            r["files"],
            json!([{"path": "a.txt", "status": "M", "added": 1, "removed": 1}])
        );
        assert!(r["patch"].as_str().unwrap().contains("+TWO"), "{r}");
        assert!(text.contains("would be a fast-forward"), "{text}");
        assert!(text.contains("+TWO"), "{text}");
        assert!(
            html.contains(">fast-forward<") && html.contains("+TWO"),
            "{html}"
        );

        // An unrelated commit on the branch: a clean merge, and the branch receives only the
        // run's file.
        std::fs::write(repo.path().join("b.txt"), "bee\nmore\n").unwrap();
        repo.git_ok(&["commit", "-q", "-am", "the user went on"]);
        let (r, text, html) = dry_run(repo, &served, &cookie, run);
        assert_eq!(
            (&r["outcome"], &r["would_apply"], &r["conflicts"]),
            (&json!("merge"), &json!(true), &json!([])),
            "{r}"
        );
        let files: Vec<&str> = r["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["path"].as_str().unwrap())
            .collect();
        assert_eq!(files, ["a.txt"], "{r}");
        assert!(
            text.contains("would be a merge commit, without conflicts"),
            "{text}"
        );
        assert!(html.contains(">merge<") && html.contains("+TWO"), "{html}");

        // Uncommitted changes: apply would refuse until they are committed, and says which.
        std::fs::write(repo.path().join("b.txt"), "dirty\n").unwrap();
        let (r, _, html) = dry_run(repo, &served, &cookie, run);
        assert_eq!(
            (&r["outcome"], &r["would_apply"], &r["dirty"]),
            (&json!("merge"), &json!(false), &json!(["b.txt"])),
            "{r}"
        );
        assert!(html.contains("uncommitted changes"), "{html}");
        repo.git_ok(&["checkout", "-q", "--", "b.txt"]);

        // A commit that changed the same line: a conflict naming the file.
        std::fs::write(repo.path().join("a.txt"), "one\nmine\n").unwrap();
        repo.git_ok(&["commit", "-q", "-am", "a conflicting edit"]);
        let (r, text, html) = dry_run(repo, &served, &cookie, run);
        assert_eq!(
            (&r["outcome"], &r["would_apply"], &r["conflicts"]),
            (&json!("conflict"), &json!(false), &json!(["a.txt"])),
            "{r}"
        );
        assert!(r["patch"].as_str().unwrap().contains("+TWO"), "{r}");
        assert!(
            text.contains("a merge that conflicts in a.txt; apply refuses it"),
            "{text}"
        );
        assert!(
            html.contains(">conflict<") && html.contains("<code>a.txt</code>"),
            "{html}"
        );
        // Apply itself refuses the same conflict.
        let o = repo
            .forum()
            .args(["apply", &run.to_string()])
            .output()
            .unwrap();
        one_line_error(&o, "conflicts with");
    });
}

#[test]
fn apply_dry_run_is_refused_as_apply_is_when_there_is_nothing_to_decide() {
    let repo = Repo::new("sha1");
    let run = seeded_run(&repo);
    let before = repo.git_ok(&["for-each-ref"]);
    // No run branch yet.
    let o = repo
        .forum()
        .args(["apply", &run.to_string(), "--dry-run"])
        .output()
        .unwrap();
    one_line_error(&o, "has no branch forum/run-");
    let o = repo
        .forum()
        .args(["apply", "99", "--dry-run"])
        .output()
        .unwrap();
    one_line_error(&o, "ledger main has no run 99");
    // --dry-run and --yes contradict each other.
    let o = repo
        .forum()
        .args(["apply", "--dry-run", "--yes"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(repo.git_ok(&["for-each-ref"]), before);
    // Over HTTP and MCP the same route answers.
    one_change(&repo, run, "a.txt", "one\nTWO\n", true);
    let served = repo.serve(&[], std::process::Stdio::null());
    let (code, body) =
        crate::common::http_json(&served.addr, "POST", "/apply/dry-run", &json!({"run": run}));
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body,
        repo.forum_json(&["apply", &run.to_string(), "--dry-run"])
    );
    drop(served);
    let reply = repo.mcp_call(&[], "apply_dry_run", json!({"run": run}));
    let text = reply["result"]["content"][0]["text"].as_str().unwrap();
    let got: J = serde_json::from_str(text).unwrap();
    assert_eq!(got["outcome"], "fast-forward", "{got}");
}
