//! `git forum diff RUN`: a `--work` run's change against the commit it started from, through
//! the real binary after a scripted run: the patch, `--stat`, `--name-only`, `--json`, paths
//! after `--`, the change commit standing in once the branch is discarded, a fetched ledger in
//! a second clone (with and without the run's branch), the daemon and MCP, and the one-line
//! refusals.

use serde_json::{Value as J, json};

use crate::common::{Repo, one_line_error};
use crate::work_run::{one_task_model, setup};

const CHECK: &str = "python3 -m unittest -q";
const FIX_ADD: &str = "    sed -i 's/return a - b/return a + b/' calc.py; echo 'fixed add'";

/// `setup`'s repository after one `--work` run (run 0) that fixed `add` and merged it.
fn fixed(repo: &Repo) {
    setup(repo);
    let m = one_task_model(repo, "model", "merge", FIX_ADD);
    repo.forum_ok(&[
        "submit",
        "--quiet",
        "--work",
        "--check",
        CHECK,
        "--cmd",
        &m,
        "make the failing test in calc pass",
    ]);
}

#[test]
fn diff_shows_a_runs_change_as_a_patch_a_stat_names_and_json() {
    let repo = Repo::new("sha1");
    fixed(&repo);
    let base = repo.git_ok(&["rev-parse", "main"]);
    let tip = repo.git_ok(&["rev-parse", "forum/run-0"]);
    let theirs = repo.git_ok(&["diff", &base, &tip]);
    // The patch is git's own (and not coloured on a pipe), for the run named or the latest.
    let patch = repo.forum_ok(&["diff", "0"]);
    assert!(
        patch.starts_with("diff --git a/calc.py b/calc.py"),
        "{patch}"
    );
    assert!(
        patch.contains("-    return a - b\n+    return a + b"),
        "{patch}"
    );
    assert!(!patch.contains('\x1b'), "{patch:?}");
    assert_eq!(patch.trim_end(), theirs.trim_end());
    assert_eq!(repo.forum_ok(&["diff"]), patch);
    let stat = repo.forum_ok(&["diff", "--stat"]);
    assert_eq!(
        stat.trim_end(),
        " calc.py |   2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)"
    );
    assert_eq!(
        repo.forum_ok(&["diff", "--name-only"]).trim_end(),
        "calc.py"
    );
    let j = repo.forum_json(&["diff", "0"]);
    assert_eq!(j["schema"], "git-forum.diff/1");
    assert_eq!(j["run"], 0);
    assert_eq!(j["base"], json!(base));
    assert_eq!(j["tip"], json!(tip));
    assert_eq!(j["source"], "forum/run-0");
    assert_eq!(
        j["files"],
        json!([{"path": "calc.py", "status": "M", "added": 1, "removed": 1}])
    );
    assert_eq!(
        (j["added"].clone(), j["removed"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(j["patch"].as_str().unwrap().trim_end(), theirs.trim_end());
    assert_eq!(j["truncated"], false);
    assert_eq!(repo.forum_json(&["diff", "--stat"])["patch"], J::Null);
    // Paths after `--` limit it: the test file did not change.
    let json_of = |args: &[&str]| -> J { serde_json::from_str(&repo.forum_ok(args)).unwrap() };
    let none = json_of(&["--json", "diff", "0", "--", "test_calc.py"]);
    assert_eq!(none["files"], json!([]));
    assert_eq!(repo.forum_ok(&["diff", "0", "--", "test_calc.py"]), "");
    assert_eq!(
        json_of(&["--json", "diff", "--", "calc.py"])["files"][0]["path"],
        "calc.py"
    );
    // Once the branch is discarded, the merged change commit (kept) stands in.
    repo.forum_ok(&["discard", "0"]);
    let after = repo.forum_json(&["diff", "0"]);
    assert_eq!(after["source"], "change of T1");
    assert_eq!(after["files"], j["files"]);
}

#[test]
fn diff_refuses_in_one_line_what_has_no_diff() {
    let repo = Repo::new("sha1");
    let o = repo.forum().args(["diff"]).output().unwrap();
    one_line_error(&o, "no ledger");
    repo.append("user", "request", r#"{"text":"not a work run"}"#);
    let o = repo.forum().args(["diff"]).output().unwrap();
    one_line_error(&o, "ledger main has no --work run");
    let o = repo.forum().args(["diff", "0"]).output().unwrap();
    one_line_error(&o, "run 0 did not work in the repository");
    let o = repo.forum().args(["diff", "9"]).output().unwrap();
    one_line_error(&o, "ledger main has no run 9");
    let o = repo
        .forum()
        .args(["diff", "--stat", "--name-only"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// A bare remote of the same kind as `a`, added to `a` as origin; returns it and its URL.
fn remote(a: &Repo) -> (tempfile::TempDir, String) {
    crate::common::bare_origin(a, "sha1")
}

#[test]
fn diff_reads_a_fetched_ledger_and_says_what_to_fetch() {
    let a = Repo::new("sha1");
    fixed(&a);
    let (_bare, url) = remote(&a);
    a.git_ok(&["push", "-q", "origin", "main"]);
    a.forum_ok(&["push"]);
    let b = Repo::new("sha1");
    b.git_ok(&["remote", "add", "origin", &url]);
    b.git_ok(&["fetch", "-q", "origin"]);
    b.forum_ok(&["fetch"]);
    // The run branch was not pushed; its change commit came with the ledger and stands in.
    let on_b = |args: &[&str]| -> J {
        let mut all = vec!["--json", "--ledger", "origin:main"];
        all.extend_from_slice(args);
        serde_json::from_str(&b.forum_ok(&all)).unwrap()
    };
    let mine = a.forum_json(&["diff", "0"]);
    let theirs = on_b(&["diff", "0"]);
    assert_eq!(theirs["source"], "change of T1");
    assert_eq!(theirs["files"], mine["files"]);
    assert_eq!(theirs["patch"], mine["patch"]);
    // Without those commits, the refusal says what to fetch.
    let work_refs = b.git_ok(&[
        "for-each-ref",
        "--format=%(refname)",
        "refs/forum/remote-work/",
    ]);
    assert!(!work_refs.is_empty());
    for r in work_refs.lines() {
        b.git_ok(&["update-ref", "-d", r]);
    }
    b.git_ok(&["reflog", "expire", "--expire=now", "--all"]);
    b.git_ok(&["gc", "-q", "--prune=now"]);
    let o = b
        .forum()
        .args(["--ledger", "origin:main", "diff", "0"])
        .output()
        .unwrap();
    one_line_error(&o, "git fetch origin forum/run-0");
    a.git_ok(&["push", "-q", "origin", "forum/run-0"]);
    b.git_ok(&["fetch", "-q", "origin", "forum/run-0"]);
    let j = on_b(&["diff", "0"]);
    assert_eq!(j["source"], "origin/forum/run-0");
    assert_eq!(j["files"], mine["files"]);
    assert_eq!(
        b.forum_ok(&["--ledger", "origin:main", "diff"]),
        a.forum_ok(&["diff"])
    );
}

#[test]
fn diff_answers_the_same_over_http_and_mcp() {
    let repo = Repo::new("sha1");
    fixed(&repo);
    let cli = repo.forum_json(&["diff", "--stat"]);
    let served = repo.serve(&[], std::process::Stdio::null());
    let (code, body) = crate::common::http_json(
        &served.addr,
        "POST",
        "/diff",
        &json!({"run": 0, "stat": true}),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(body, cli);
    let (code, body) = crate::common::http_json(
        &served.addr,
        "POST",
        "/diff",
        &json!({"stat": true, "name_only": true}),
    );
    assert_eq!(code, 400, "{body}");
    drop(served);
    let lines = [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}).to_string(),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}).to_string(),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"forum.diff","arguments":{"run":0,"stat":true}}}).to_string(),
    ];
    let (ok, out) = repo.mcp_batch(&[], &lines);
    assert!(ok, "{out}");
    let answer: J = out
        .lines()
        .map(|l| serde_json::from_str::<J>(l).unwrap())
        .find(|m| m["id"] == 2)
        .unwrap();
    assert_eq!(answer["result"]["structuredContent"], cli, "{answer}");
}
