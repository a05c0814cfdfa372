//! `campaign run --work` through the binary, on every repository format: a campaign whose
//! features are done by a scripted `--cmd` worker that edits files in its working directory
//! (the feature's worktree) and answers the pre-ship gate. Each round is a `--work` dispatch:
//! its changes are commits with trailers, checked and gated, integrated onto the round's run
//! branch (which starts where the last one ended), and a feature whose check fails or whose
//! change is blocked is `failed` and blocks its dependents. The user's tree and branch never
//! move, `verify --deep` and `git fsck --strict` pass, and no worktree is left.

use serde_json::{Value as J, json};

use crate::common::{self, Repo, on_each_kind};
use crate::work_run::{clean, entries, kinds, payloads, trailer};

/// Every feature's change must pass this: no feature may leave `broken.txt` behind.
const CHECK: &str = "test ! -e broken.txt";

/// The user's repository: one commit on `main`, an ignored script and an untracked file.
fn setup(repo: &Repo) {
    repo.git_ok(&["checkout", "-q", "-b", "main"]);
    let w = |p: &str, s: &str| std::fs::write(repo.path().join(p), s).unwrap();
    w("README", "a project\n");
    w(".gitignore", "*.sh\n*.json\n");
    repo.git_ok(&["add", "."]);
    repo.git_ok(&["commit", "-q", "-m", "start"]);
    w("scratch.txt", "the user's own, untracked\n");
}

/// The scripted model: the gate blocks a change whose task says BLOCKME and merges the rest;
/// a worker writes `one.txt` (ONE), appends to it only if ONE's change is there (TWO), leaves
/// `broken.txt` (BREAK) or writes `other.txt` (OTHER).
fn model(repo: &Repo) -> String {
    let path = repo.path().join("model.sh");
    let body = "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n\
  *\"Decide whether to ship\"*BLOCKME*) echo '{\"decision\":\"block\",\"reason\":\"scripted\"}' ;;\n\
  *\"Decide whether to ship\"*) echo '{\"decision\":\"merge\",\"reason\":\"scripted\"}' ;;\n\
  *ONE*) echo one > one.txt; echo 'wrote one' ;;\n\
  *TWO*) test -f one.txt || { echo 'no one.txt here' >&2; exit 4; }; echo two >> one.txt; echo 'appended two' ;;\n\
  *BREAK*) echo oops > broken.txt; echo 'left a mess' ;;\n\
  *BLOCKME*) echo risky > risky.txt; echo 'wrote risky' ;;\n\
  *OTHER*) echo other > other.txt; echo 'wrote other' ;;\n\
  *) echo 'nothing to do' ;;\nesac\n";
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

fn declare(repo: &Repo, campaign: &J) {
    let file = repo.path().join("camp.json");
    std::fs::write(&file, campaign.to_string()).unwrap();
    repo.forum_ok(&["campaign", "declare", "--file", file.to_str().unwrap()]);
}

/// Two features, the second depending on the first's change.
fn two_features() -> J {
    json!({"campaign_id": "w", "title": "t", "projects": [
        {"project_id": "p", "owner": "forum", "priority": 1, "features": [
            {"feature_id": "first", "agent": "backend", "instruction": "do ONE", "priority": 9},
            {"feature_id": "second", "agent": "backend", "instruction": "do TWO", "depends_on": ["first"]}
        ]}
    ]})
}

fn user_view(repo: &Repo) -> String {
    format!(
        "{}\n{}\n{}",
        repo.git_ok(&["rev-parse", "main", "HEAD"]),
        repo.git_ok(&["status", "--porcelain", "--untracked-files=all"]),
        repo.git_ok(&["symbolic-ref", "HEAD"]),
    )
}

fn room_feature(room: &J, id: &str) -> J {
    room["features"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["feature_id"] == id)
        .unwrap_or_else(|| panic!("no feature {id}: {room}"))
        .clone()
}

/// `campaign run --work --check CHECK`: the room, and the stderr line naming the branches.
fn run_work_with_line(repo: &Repo, m: &str) -> (J, String) {
    let o = repo
        .forum()
        .args([
            "--json", "campaign", "run", "--work", "--check", CHECK, "--cmd", m,
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let room = serde_json::from_slice(&o.stdout).unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    let line = err
        .lines()
        .find(|l| l.starts_with("run branches:"))
        .unwrap_or_else(|| panic!("no branches line: {err}"))
        .to_string();
    (room, line)
}

fn run_work(repo: &Repo, m: &str) -> J {
    run_work_with_line(repo, m).0
}

#[test]
fn each_feature_of_a_work_campaign_is_a_checked_gated_commit_on_the_run_branch() {
    on_each_kind(|repo| {
        setup(repo);
        let m = model(repo);
        declare(repo, &two_features());
        let before = user_view(repo);
        let (room, line) = run_work_with_line(repo, &m);
        assert_eq!(room_feature(&room, "first")["status"], "done", "{room}");
        assert_eq!(room_feature(&room, "second")["status"], "done", "{room}");
        assert_eq!(room["complete"], true, "{room}");
        // One round per feature (the second waits for the first), each a --work dispatch.
        let round = [
            "campaign_dispatch",
            "plan",
            "task",
            "result",
            "change",
            "check",
            "ship",
            "integrated",
            "check",
            "feature_status",
            "campaign_result",
        ];
        let mut want = vec!["campaign_declared"];
        want.extend(round);
        want.extend(round);
        assert_eq!(kinds(repo), want);
        // Each change is a commit tied by its trailers to its task entry and its round.
        let plans: Vec<u64> = payloads(repo, "plan").iter().map(|(s, _)| *s).collect();
        let changes = payloads(repo, "change");
        let tasks = payloads(repo, "task");
        assert_eq!(changes.len(), 2);
        for (i, (_, c)) in changes.iter().enumerate() {
            let commit = c["commit"].as_str().unwrap();
            let task_seq: u64 = trailer(repo, commit, "Forum-Task").parse().unwrap();
            assert_eq!(task_seq, tasks[i].0);
            let shown = repo.forum_json(&["show", &task_seq.to_string()]);
            assert_eq!(
                trailer(repo, commit, "Forum-Entry"),
                shown["entry_hash"].as_str().unwrap()
            );
            assert_eq!(trailer(repo, commit, "Forum-Run"), plans[i].to_string());
            assert_eq!(trailer(repo, commit, "Forum-Ledger"), "main");
        }
        // Checks witnessed: each change's, then each round's branch, all passed.
        let checks = payloads(repo, "check");
        assert_eq!(checks.len(), 4);
        for (_, c) in &checks {
            assert_eq!(c["command"], CHECK);
            assert_eq!(c["ok"], true, "{c}");
        }
        let tasks_checked: Vec<&str> = checks
            .iter()
            .map(|(_, c)| c["task"].as_str().unwrap())
            .collect();
        assert_eq!(tasks_checked, ["first", "run", "second", "run"]);
        for (_, s) in payloads(repo, "ship") {
            assert_eq!(s["decision"], "merge", "{s}");
        }
        // The feature's status is witnessed by its task's result.
        let results: Vec<u64> = payloads(repo, "result").iter().map(|(s, _)| *s).collect();
        let statuses = payloads(repo, "feature_status");
        for (i, (_, st)) in statuses.iter().enumerate() {
            assert_eq!(st["witnessed_seq"], results[i], "{st}");
        }
        // The second round's branch starts where the first ended: it holds both changes.
        let last = format!("forum/run-{}", plans[1]);
        let commits = repo.git_ok(&["rev-list", "--reverse", &format!("main..{last}")]);
        let commits: Vec<&str> = commits.lines().collect();
        // Each is git forum's copy of its change (the checks' results in its body), tied to
        // the same task entry.
        let entry = |c: &str| trailer(repo, c, "Forum-Entry");
        assert_eq!(
            commits.iter().map(|c| entry(c)).collect::<Vec<_>>(),
            [
                entry(changes[0].1["commit"].as_str().unwrap()),
                entry(changes[1].1["commit"].as_str().unwrap())
            ]
        );
        assert_eq!(
            repo.git_ok(&["show", &format!("{last}:one.txt")]),
            "one\ntwo"
        );
        assert!(
            line.ends_with(&format!(
                "; {last} holds every merged change (git merge {last} takes it)"
            )),
            "{line}"
        );
        let first = format!("forum/run-{}", plans[0]);
        assert_eq!(
            entry(repo.git_ok(&["rev-parse", &first]).trim()),
            entry(changes[0].1["commit"].as_str().unwrap())
        );
        // The user's branch, HEAD and work tree did not move.
        assert_eq!(user_view(repo), before);
        assert!(!repo.path().join("one.txt").exists());
        clean(repo);
        // Nothing is runnable any more: a second run writes nothing and names no branch.
        let n = entries(repo).len();
        let o = repo
            .forum()
            .args(["campaign", "run", "--work", "--check", CHECK, "--cmd", &m])
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("no round worked in the repository"), "{err}");
        assert_eq!(entries(repo).len(), n);
    });
}

#[test]
fn a_feature_whose_check_fails_or_whose_change_is_blocked_fails_and_blocks_its_dependents() {
    on_each_kind(|repo| {
        setup(repo);
        let m = model(repo);
        declare(
            repo,
            &json!({"campaign_id": "w", "title": "t", "projects": [
                {"project_id": "p", "owner": "forum", "priority": 1, "features": [
                    {"feature_id": "bad", "agent": "backend", "instruction": "do BREAK", "priority": 9},
                    {"feature_id": "risky", "agent": "backend", "instruction": "do BLOCKME", "priority": 8},
                    {"feature_id": "good", "agent": "backend", "instruction": "do OTHER", "priority": 7},
                    {"feature_id": "after_bad", "agent": "backend", "instruction": "do ONE", "depends_on": ["bad"]},
                    {"feature_id": "after_risky", "agent": "backend", "instruction": "do ONE", "depends_on": ["risky"]}
                ]}
            ]}),
        );
        let before = user_view(repo);
        let room = run_work(repo, &m);
        let bad = room_feature(&room, "bad");
        assert_eq!(bad["status"], "failed", "{room}");
        assert_eq!(bad["reason"], format!("its checks failed: {CHECK}"));
        let risky = room_feature(&room, "risky");
        assert_eq!(risky["status"], "failed", "{room}");
        assert_eq!(
            risky["reason"],
            "the pre-ship gate blocked its change (quarantined)"
        );
        assert_eq!(room_feature(&room, "good")["status"], "done");
        assert_eq!(
            room_feature(&room, "after_bad")["reason"],
            "blocked: bad is failed"
        );
        assert_eq!(room_feature(&room, "after_bad")["status"], "blocked");
        assert_eq!(room_feature(&room, "after_risky")["status"], "blocked");
        // One round: the failed check is witnessed, the blocked change quarantined, and only
        // the good change is on the run branch.
        let plans = payloads(repo, "plan");
        assert_eq!(plans.len(), 1);
        let failed: Vec<J> = payloads(repo, "check")
            .into_iter()
            .map(|(_, c)| c)
            .filter(|c| c["ok"] == false)
            .collect();
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert_eq!(failed[0]["task"], "bad");
        let branch = format!("forum/run-{}", plans[0].0);
        let files = repo.git_ok(&["diff", "--name-only", "main", &branch]);
        assert_eq!(files.trim(), "other.txt");
        let quarantined = repo.git_ok(&[
            "for-each-ref",
            "--format=%(refname)",
            "refs/forum/quarantine/",
        ]);
        assert!(quarantined.contains("risky"), "{quarantined}");
        assert_eq!(user_view(repo), before);
        clean(repo);
    });
}

#[test]
fn check_without_work_is_one_line_and_writes_nothing_and_without_work_nothing_changes() {
    let repo = Repo::new(common::FORMATS[0]);
    setup(&repo);
    let m = model(&repo);
    declare(&repo, &two_features());
    let o = repo
        .forum()
        .args(["campaign", "run", "--check", CHECK, "--cmd", &m])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("add --work"), "{err}");
    assert_eq!(kinds(&repo), ["campaign_declared"]);
    // Without --work the rounds are Forum's: no change, check or ship, no run branch.
    repo.forum_ok(&["campaign", "run", "--cmd", &m]);
    let k = kinds(&repo);
    assert!(
        !k.iter()
            .any(|k| k == "change" || k == "check" || k == "ship"),
        "{k:?}"
    );
    assert_eq!(repo.git_ok(&["branch", "--list", "forum/*"]).trim(), "");
    repo.fsck();
}

#[test]
fn the_daemon_and_the_mcp_tool_run_a_work_campaign() {
    let repo = Repo::new(common::FORMATS[0]);
    setup(&repo);
    let m = model(&repo);
    declare(&repo, &two_features());
    {
        let served = repo.serve(&["--cmd", &m], std::process::Stdio::null());
        let (code, body) = common::http_json(
            &served.addr,
            "POST",
            "/campaign/run",
            &json!({"work": "yes"}),
        );
        assert_eq!(code, 400, "{body}");
        let (code, room) = common::http_json(
            &served.addr,
            "POST",
            "/campaign/run",
            &json!({"work": true, "checks": [CHECK]}),
        );
        assert_eq!(code, 200, "{room}");
        assert_eq!(room_feature(&room, "second")["status"], "done", "{room}");
    }
    let plans = payloads(&repo, "plan");
    let last = format!("forum/run-{}", plans[1].0);
    assert_eq!(
        repo.git_ok(&["show", &format!("{last}:one.txt")]),
        "one\ntwo"
    );
    clean(&repo);
    // MCP, in a repository of its own.
    let repo = Repo::new(common::FORMATS[0]);
    setup(&repo);
    let m = model(&repo);
    declare(&repo, &two_features());
    let lines = [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "campaign_run", "arguments": {"work": true, "checks": [CHECK]}}}).to_string(),
    ];
    let (ok, out) = repo.mcp_batch(&["--cmd", &m], &lines);
    assert!(ok, "{out}");
    let reply: J = out
        .lines()
        .map(|l| serde_json::from_str::<J>(l).unwrap())
        .find(|r| r["id"] == 3)
        .unwrap_or_else(|| panic!("{out}"));
    let room = &reply["result"]["structuredContent"];
    assert_eq!(room_feature(room, "first")["status"], "done", "{out}");
    assert_eq!(room_feature(room, "second")["status"], "done", "{out}");
    clean(&repo);
}
