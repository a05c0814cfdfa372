//! `submit --work` through the binary, on every repository format: a temporary repository
//! with a failing Python test, and a scripted `--cmd` worker that plans, edits files in its
//! working directory (the task's worktree), and answers the validator and the pre-ship gate.
//! Each scenario checks the exact record, the run branch, the user's tree, `verify --deep` and
//! `git fsck --strict`.

use serde_json::Value as J;

use crate::common::{Repo, on_each_kind};

pub(crate) const CHECK: &str = "python3 -m unittest -q";

/// The repository: `calc.py` whose `add` subtracts, its failing test, a `.gitignore`, one
/// commit on `main`, and an untracked file (the user's dirty tree).
pub(crate) fn setup(repo: &Repo) {
    repo.git_ok(&["checkout", "-q", "-b", "main"]);
    let w = |p: &str, s: &str| std::fs::write(repo.path().join(p), s).unwrap();
    w(
        "calc.py",
        "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a + b\n",
    );
    w(
        "test_calc.py",
        "import unittest\n\nimport calc\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n",
    );
    w(".gitignore", "__pycache__/\n*.sh\nnotes.txt\n");
    repo.git_ok(&["add", "."]);
    repo.git_ok(&["commit", "-q", "-m", "calc with a bug"]);
    w("notes.txt", "my own notes, not part of any run\n");
    w("scratch.txt", "untracked and dirty\n");
}

/// A plan of one task, or of two (the second data-dependent on the first when `chain`).
pub(crate) fn plan(tasks: &[(&str, &str)], chain: bool) -> String {
    let items: Vec<String> = tasks
        .iter()
        .enumerate()
        .map(|(i, (id, instruction))| {
            let deps = if chain && i > 0 {
                format!("[\"{}\"]", tasks[i - 1].0)
            } else {
                "[]".into()
            };
            format!(
                r#"{{"id":"{id}","agent":"backend","instruction":"{instruction}","depends_on":{deps},"done_when":["the tests pass"]}}"#
            )
        })
        .collect();
    format!(r#"{{"tasks":[{}]}}"#, items.join(","))
}

/// [`model`] whose plan is one task, T1, that makes `add` in `calc.py` add.
pub(crate) fn one_task_model(repo: &Repo, name: &str, ship: &str, work: &str) -> String {
    model(
        repo,
        name,
        &plan(&[("T1", "make add in calc.py add")], false),
        ship,
        work,
    )
}

/// A scripted model: `plan` for the planner, `ship` for the pre-ship gate (a decision), pass
/// for every verdict, a fixed answer; `work` is the shell that does a task (`$p` is the prompt,
/// the working directory the task's worktree).
pub(crate) fn model(repo: &Repo, name: &str, plan: &str, ship: &str, work: &str) -> String {
    let path = repo.path().join(format!("{name}.sh"));
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{plan}' ;;\n  *\"Decide whether to ship\"*) echo '{{\"decision\":\"{ship}\",\"reason\":\"scripted\"}}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'Fixed calc.' ;;\n  *)\n{work}\n  ;;\nesac\n"
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

/// The fix of `add`, as a worker does it in its working directory.
pub(crate) const FIX_ADD: &str =
    "    sed -i 's/return a - b/return a + b/' calc.py; echo 'fixed add'";

/// The ledger's entries, oldest first (`log` lists the newest first).
pub(crate) fn entries(repo: &Repo) -> Vec<J> {
    let mut all = repo.forum_json(&["log"]).as_array().unwrap().clone();
    all.sort_by_key(|e| e["seq"].as_u64().unwrap());
    all
}

pub(crate) fn kinds(repo: &Repo) -> Vec<String> {
    entries(repo)
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect()
}

pub(crate) fn payloads(repo: &Repo, kind: &str) -> Vec<(u64, J)> {
    entries(repo)
        .iter()
        .filter(|e| e["kind"] == kind)
        .map(|e| {
            let seq = e["seq"].as_u64().unwrap();
            let j = repo.forum_json(&["show", &seq.to_string(), "--payload"]);
            (seq, j["payload"].clone())
        })
        .collect()
}

/// What the user's side looks like: main's commit, the status, the files.
fn user_view(repo: &Repo) -> String {
    let read = |p: &str| std::fs::read_to_string(repo.path().join(p)).unwrap_or_default();
    format!(
        "{}\n{}\n{}\n{}",
        repo.git_ok(&["rev-parse", "main", "HEAD"]),
        repo.git_ok(&["status", "--porcelain", "--untracked-files=all"]),
        read("calc.py"),
        repo.git_ok(&["symbolic-ref", "HEAD"]),
    )
}

/// No worktree of a run is left: git knows only the user's.
pub(crate) fn no_worktrees(repo: &Repo) {
    let list = repo.git_ok(&["worktree", "list", "--porcelain"]);
    assert_eq!(
        list.lines().filter(|l| l.starts_with("worktree ")).count(),
        1,
        "{list}"
    );
}

/// The commits of the run branch, oldest first.
pub(crate) fn branch_commits(repo: &Repo, run: u64) -> Vec<String> {
    let out = repo.git_ok(&["rev-list", "--reverse", &format!("main..forum/run-{run}")]);
    out.lines().map(str::to_string).collect()
}

pub(crate) fn trailer(repo: &Repo, commit: &str, key: &str) -> String {
    repo.git_ok(&[
        "log",
        "-1",
        &format!("--format=%(trailers:key={key},valueonly)"),
        commit,
    ])
    .trim()
    .to_string()
}

/// Every change commit on the run branch names its task entry (seq and hash) and the run.
pub(crate) fn trailers_name_tasks(repo: &Repo, run: u64, commits: &[String]) {
    let tasks = payloads(repo, "task");
    for c in commits {
        let seq: u64 = trailer(repo, c, "Forum-Task").parse().unwrap();
        assert!(tasks.iter().any(|(s, _)| *s == seq), "{c}: task {seq}");
        let shown = repo.forum_json(&["show", &seq.to_string()]);
        assert_eq!(
            trailer(repo, c, "Forum-Entry"),
            shown["entry_hash"].as_str().unwrap(),
            "{c}"
        );
        assert_eq!(trailer(repo, c, "Forum-Run"), run.to_string());
        assert_eq!(trailer(repo, c, "Forum-Ledger"), "main");
    }
}

pub(crate) fn clean(repo: &Repo) {
    repo.forum_ok(&["verify", "--deep"]);
    repo.fsck();
    no_worktrees(repo);
}

#[test]
fn a_task_that_fixes_the_bug_is_committed_checked_shipped_and_on_the_run_branch() {
    on_each_kind(|repo| {
        setup(repo);
        let before = user_view(repo);
        let m = one_task_model(repo, "model", "merge", FIX_ADD);
        let j = repo.forum_json(&[
            "submit",
            "--work",
            "--check",
            CHECK,
            "--cmd",
            &m,
            "make the failing test in calc pass",
        ]);
        let answer = j["answer"].as_str().unwrap();
        assert!(answer.starts_with("Fixed calc."), "{answer}");
        assert!(
            answer.contains("- T1: merged (1 file, +1 -1: calc.py); checks 1/1 passed"),
            "{answer}"
        );
        assert!(
            answer.contains("- run branch: checks 1/1 passed"),
            "{answer}"
        );
        let k = kinds(repo);
        let upto = k.iter().position(|k| k == "verdict").unwrap() + 2;
        assert_eq!(
            k[..upto],
            // The repository is context by default: its map before the plan, the task's
            // files before the task.
            [
                "request",
                "route_frame",
                "context",
                "plan",
                "context",
                "task",
                "result",
                "change",
                "check",
                "ship",
                "integrated",
                "check",
                "verdict",
                "result"
            ],
            "{k:?}"
        );
        // The request records the base and the dirty paths (not part of the base).
        let req = &payloads(repo, "request")[0].1;
        assert_eq!(req["work"]["base"], repo.git_ok(&["rev-parse", "main"]));
        assert_eq!(req["work"]["checks"][0], CHECK);
        let dirty = req["work"]["dirty"].to_string();
        assert!(dirty.contains("scratch.txt"), "{dirty}");
        let change = &payloads(repo, "change")[0].1;
        assert_eq!(change["task"], "T1");
        assert_eq!(change["files"][0]["path"], "calc.py");
        assert_eq!(change["files"][0]["status"], "M");
        assert!(
            change["diff"]
                .as_str()
                .unwrap()
                .contains("+    return a + b")
        );
        let checks = payloads(repo, "check");
        assert_eq!(checks[0].1["task"], "T1");
        assert_eq!(checks[0].1["ok"], true);
        assert_eq!(checks[0].1["exit"], 0);
        assert_eq!(checks[1].1["task"], "run");
        assert_eq!(checks[1].1["ok"], true);
        let ship = &payloads(repo, "ship")[0].1;
        assert_eq!(ship["decision"], "merge");
        assert_eq!(ship["task"], "T1");
        assert_eq!(ship["model"], m.as_str());
        // The run branch holds exactly that change, tied to its task entry.
        let commits = branch_commits(repo, 0);
        assert_eq!(commits.len(), 1, "{commits:?}");
        assert_eq!(
            repo.git_ok(&["show", &format!("{}:calc.py", commits[0])])
                .lines()
                .nth(1)
                .unwrap(),
            "    return a + b"
        );
        trailers_name_tasks(repo, 0, &commits);
        let kept = repo.git_ok(&["for-each-ref", "--format=%(refname)", "refs/forum/work"]);
        assert_eq!(kept, "refs/forum/work/main/0/T1");
        // The user's branch, index and files are untouched.
        assert_eq!(user_view(repo), before);
        // Reading it: runs (text and JSON) and the change's diff.
        let runs = repo.forum_ok(&["runs"]);
        assert!(
            runs.contains("forum/run-0: 1 merged (1 files, +1 -1), checks 2/2 passed"),
            "{runs}"
        );
        let w = &repo.forum_json(&["runs"])["runs"][0]["work"];
        assert_eq!(w["merged"], 1);
        assert_eq!(w["checks_failed"], 0);
        let change_seq = payloads(repo, "change")[0].0.to_string();
        let diff = repo.forum_ok(&["show", &change_seq, "--diff"]);
        assert!(diff.starts_with("diff --git a/calc.py b/calc.py"), "{diff}");
        assert!(diff.contains("+    return a + b"), "{diff}");
        let o = repo.forum().args(["show", "0", "--diff"]).output().unwrap();
        crate::common::one_line_error(&o, "seq 0 is a request entry; --diff reads change entries");
        let glance = repo.forum_ok(&["log", "--run", "0"]);
        for needle in [
            "change",
            "T1 passed python3 -m unittest -q",
            "run passed python3 -m unittest -q",
            "T1 merge: scripted",
            "(1 files, +1 -1)",
        ] {
            assert!(glance.contains(needle), "{needle}: {glance}");
        }
        // Applying the run fast-forwards main to the run branch (once the tree is clean).
        std::fs::remove_file(repo.path().join("scratch.txt")).unwrap();
        repo.forum_ok(&["apply", "0"]);
        assert_eq!(
            repo.git_ok(&["rev-parse", "main"]),
            repo.git_ok(&["rev-parse", "forum/run-0"])
        );
        assert_eq!(
            repo.git_ok(&["rev-list", "--count", "--merges", "main"]),
            "0"
        );
        clean(repo);
    });
}

#[test]
fn a_change_whose_check_fails_is_fixed_on_the_next_rung() {
    on_each_kind(|repo| {
        setup(repo);
        let p = plan(&[("T1", "make add in calc.py add")], false);
        // The cheap worker breaks mul instead; the stronger one fixes add.
        let weak = model(
            repo,
            "weak",
            &p,
            "merge",
            "    sed -i 's/return a + b/return a * b/' calc.py; echo 'changed mul'",
        );
        let strong = model(repo, "strong", &p, "merge", FIX_ADD);
        let j = repo.forum_json(&[
            "submit",
            "--work",
            "--check",
            CHECK,
            "--cmd",
            &weak,
            "--frontier-cmd",
            &strong,
            "make the failing test in calc pass",
        ]);
        let answer = j["answer"].as_str().unwrap();
        assert!(answer.contains("- T1: merged"), "{answer}");
        let k = kinds(repo);
        let upto = k.iter().position(|k| k == "ship").unwrap() + 1;
        // After request, route_frame, the repository's map, plan and the task's files.
        assert_eq!(
            k[5..upto],
            [
                "task",
                "result",
                "change",
                "check",
                "tier_escalation",
                "result",
                "change",
                "check",
                "ship"
            ],
            "{k:?}"
        );
        let checks = payloads(repo, "check");
        assert_eq!(checks[0].1["ok"], false);
        assert_ne!(checks[0].1["exit"], 0);
        assert!(
            checks[0].1["output"].as_str().unwrap().contains("FAILED"),
            "{}",
            checks[0].1
        );
        assert_eq!(checks[1].1["ok"], true);
        let esc = &payloads(repo, "tier_escalation")[0].1;
        assert_eq!(esc["to"], strong.as_str());
        assert_eq!(esc["reason"], "checks failed");
        // Only the passing change is on the run branch; both stay in the record.
        let commits = branch_commits(repo, 0);
        assert_eq!(commits.len(), 1);
        let changes = payloads(repo, "change");
        assert_eq!(changes.len(), 2);
        let author = repo.git_ok(&["log", "-1", "--format=%an", &commits[0]]);
        assert!(author.contains(strong.as_str()), "{author}");
        trailers_name_tasks(repo, 0, &commits);
        clean(repo);
    });
}

#[test]
fn a_change_the_gate_blocks_is_quarantined_and_never_integrated() {
    on_each_kind(|repo| {
        setup(repo);
        let before = user_view(repo);
        let m = one_task_model(repo, "model", "block", FIX_ADD);
        let j = repo.forum_json(&[
            "submit", "--work", "--check", CHECK, "--cmd", &m, "fix calc",
        ]);
        let answer = j["answer"].as_str().unwrap();
        assert!(answer.contains("- T1: blocked (quarantined)"), "{answer}");
        let ship = &payloads(repo, "ship")[0].1;
        assert_eq!(ship["decision"], "block");
        let change = &payloads(repo, "change")[0].1;
        let commit = change["commit"].as_str().unwrap();
        assert_eq!(
            repo.git_ok(&["rev-parse", "refs/forum/quarantine/main/0/T1"]),
            commit
        );
        // Nothing reached a run branch, and no run-level check ran.
        assert!(
            !repo
                .git(&["rev-parse", "--verify", "-q", "forum/run-0"])
                .status
                .success()
                || branch_commits(repo, 0).is_empty()
        );
        assert_eq!(payloads(repo, "check").len(), 1);
        assert_eq!(user_view(repo), before);
        clean(repo);
    });
}

#[test]
fn a_gate_that_answers_garbage_leaves_the_change_waiting_and_the_wave_degraded() {
    on_each_kind(|repo| {
        setup(repo);
        let m = one_task_model(repo, "model", "ship it!", FIX_ADD);
        let j = repo.forum_json(&[
            "submit", "--work", "--check", CHECK, "--cmd", &m, "fix calc",
        ]);
        let answer = j["answer"].as_str().unwrap();
        assert!(answer.contains("- T1: waiting for a person"), "{answer}");
        let ship = &payloads(repo, "ship")[0].1;
        assert_eq!(ship["decision"], "undetermined");
        assert!(
            ship["error"].as_str().unwrap().contains("not one of"),
            "{ship}"
        );
        let degraded = payloads(repo, "degraded");
        assert_eq!(degraded.len(), 1);
        assert!(
            degraded[0].1["reason"]
                .as_str()
                .unwrap()
                .contains("ship decision")
        );
        assert!(branch_commits_or_none(repo, 0).is_empty());
        // The change stays on its task ref for a person.
        repo.git_ok(&["rev-parse", "refs/forum/work/main/0/T1"]);
        clean(repo);
    });
}

pub(crate) fn branch_commits_or_none(repo: &Repo, run: u64) -> Vec<String> {
    if repo
        .git(&["rev-parse", "--verify", "-q", &format!("forum/run-{run}")])
        .status
        .success()
    {
        branch_commits(repo, run)
    } else {
        Vec::new()
    }
}

/// A scripted model whose plan is two parallel tasks on different files (T1 fixes `add` in
/// calc.py, T2 writes mul.py), each merged by the gate.
pub(crate) fn two_files_model(repo: &Repo) -> String {
    model(
        repo,
        "model",
        &plan(&[("T1", "fix add"), ("T2", "fix mul")], false),
        "merge",
        "    case \"$p\" in\n      *\"fix add\"*) sed -i 's/return a - b/return a + b/' calc.py; echo add ;;\n      *) printf 'def mul(a, b):\\n    return a * b\\n' > mul.py; echo mul ;;\n    esac",
    )
}

#[test]
fn two_parallel_tasks_on_different_files_are_both_integrated_in_plan_order() {
    on_each_kind(|repo| {
        setup(repo);
        let m = two_files_model(repo);
        // Each change must pass on its own: the check here is that the code compiles.
        let j = repo.forum_json(&[
            "submit",
            "--work",
            "--check",
            "python3 -m compileall -q .",
            "--cmd",
            &m,
            "fix calc",
        ]);
        let answer = j["answer"].as_str().unwrap();
        assert!(
            answer.contains("- T1: merged (1 file, +1 -1: calc.py)"),
            "{answer}"
        );
        assert!(
            answer.contains("- T2: merged (1 file, +2 -0: mul.py)"),
            "{answer}"
        );
        let commits = branch_commits(repo, 0);
        assert_eq!(commits.len(), 2, "{commits:?}");
        let subjects: Vec<String> = commits
            .iter()
            .map(|c| repo.git_ok(&["log", "-1", "--format=%s", c]))
            .collect();
        // Each subject is its worker's own report, in plan order.
        assert_eq!(subjects, ["add", "mul"]);
        let tip = commits.last().unwrap();
        repo.git_ok(&["cat-file", "-e", &format!("{tip}:mul.py")]);
        trailers_name_tasks(repo, 0, &commits);
        clean(repo);
    });
}

#[test]
fn two_conflicting_tasks_are_witnessed_and_the_later_one_runs_again_on_top() {
    on_each_kind(|repo| {
        setup(repo);
        // Both rewrite the same line; the second, run again on the integrated branch, edits
        // the other function instead (it sees the fix already there).
        let m = model(
            repo,
            "model",
            &plan(&[("T1", "fix add"), ("T2", "also fix add in calc")], false),
            "merge",
            "    if head -2 calc.py | grep -q 'a + b'; then sed -i 's/^def mul(a, b):$/def mul(a, b):  # checked/' calc.py; echo again; else\n    case \"$p\" in\n      *\"also fix add\"*) sed -i 's/return a - b/return b + a/' calc.py; echo two ;;\n      *) sed -i 's/return a - b/return a + b/' calc.py; echo one ;;\n    esac; fi",
        );
        repo.forum_json(&[
            "submit", "--work", "--check", CHECK, "--cmd", &m, "fix calc",
        ]);
        let conflicts = payloads(repo, "conflict");
        let record = || {
            entries(repo)
                .iter()
                .map(|e| {
                    let seq = e["seq"].as_u64().unwrap().to_string();
                    let p = repo.forum_json(&["show", &seq, "--payload"])["payload"].to_string();
                    format!(
                        "{seq} {}: {}",
                        e["kind"],
                        p.chars().take(240).collect::<String>()
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(conflicts.len(), 1, "{}", record());
        assert_eq!(conflicts[0].1["task"], "T2");
        assert_eq!(conflicts[0].1["paths"][0], "calc.py");
        let k = kinds(repo);
        let at = k.iter().position(|k| k == "conflict").unwrap();
        assert_eq!(
            k[at..at + 5],
            ["conflict", "result", "change", "check", "ship"],
            "{k:?}"
        );
        let commits = branch_commits(repo, 0);
        assert_eq!(commits.len(), 2, "{commits:?}");
        let calc = repo.git_ok(&["show", &format!("{}:calc.py", commits[1])]);
        assert!(calc.contains("# checked"), "{calc}");
        assert!(calc.contains("return a + b"), "{calc}");
        trailers_name_tasks(repo, 0, &commits);
        clean(repo);
    });
}

#[test]
fn a_run_killed_mid_wave_resumes_reusing_the_passed_change_and_leaves_no_worktree() {
    on_each_kind(|repo| {
        setup(repo);
        let marker = repo.path().join("hang");
        std::fs::write(&marker, "").unwrap();
        // T2 hangs while the marker exists; T1 (wave 0) is shipped before it starts.
        let work = format!(
            "    case \"$p\" in\n      *\"fix mul\"*) while [ -e '{}' ]; do sleep 0.1; done; sed -i '$ s/return a + b/return a * b/' calc.py; echo mul ;;\n      *) sed -i 's/return a - b/return a + b/' calc.py; echo add ;;\n    esac",
            marker.display()
        );
        let m = model(
            repo,
            "model",
            &plan(&[("T1", "fix add"), ("T2", "fix mul")], true),
            "merge",
            &work,
        );
        let mut child = crate::common::Guarded(
            repo.forum()
                .args([
                    "submit", "--work", "--check", CHECK, "--cmd", &m, "--quiet", "fix calc",
                ])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        // Waits (a guard, not a measurement) until T2's task entry is witnessed.
        crate::common::wait_until(
            "T2 never started",
            std::time::Duration::from_secs(120),
            || {
                let tasks = repo
                    .forum()
                    .args(["log", "--json"])
                    .output()
                    .ok()
                    .and_then(|o| serde_json::from_slice::<J>(&o.stdout).ok())
                    .map(|j| {
                        j.as_array()
                            .unwrap()
                            .iter()
                            .filter(|e| e["kind"] == "task")
                            .count()
                    })
                    .unwrap_or(0);
                tasks >= 2
            },
        );
        child.0.kill().unwrap();
        child.0.wait().unwrap();
        std::fs::remove_file(&marker).unwrap();
        let j = repo.forum_json(&["resume", "--cmd", &m]);
        let r = &j["git_forum_receipt"];
        assert_eq!(r["status"], "answered", "{j}");
        let resume = &payloads(repo, "resume")[0].1;
        assert_eq!(resume["reused"], serde_json::json!(["T1"]));
        // T1 ran once, T2 twice (killed, then resumed); one change of T1, on the branch once.
        let changes = payloads(repo, "change");
        assert_eq!(changes.iter().filter(|(_, p)| p["task"] == "T1").count(), 1);
        let commits = branch_commits(repo, 0);
        assert_eq!(commits.len(), 2, "{commits:?}");
        let calc = repo.git_ok(&["show", &format!("{}:calc.py", commits[1])]);
        assert!(calc.contains("return a * b"), "{calc}");
        trailers_name_tasks(repo, 0, &commits);
        clean(repo);
    });
}

#[test]
fn check_without_work_and_a_resumed_check_are_refused_in_one_line() {
    // Refused before the ledger is opened: one repository kind shows it.
    let repo = Repo::new("sha1");
    setup(&repo);
    let m = model(
        &repo,
        "model",
        &plan(&[("T1", "x")], false),
        "merge",
        FIX_ADD,
    );
    let o = repo
        .forum()
        .args(["submit", "--check", CHECK, "--cmd", &m, "fix calc"])
        .output()
        .unwrap();
    crate::common::one_line_error(&o, "--check runs on the changes of a --work run");
    let o = repo
        .forum()
        .args(["submit", "--work", "--check", " ", "--cmd", &m, "fix calc"])
        .output()
        .unwrap();
    crate::common::one_line_error(&o, "give a non-empty shell command");
    let o = repo
        .forum()
        .args(["resume", "--work", "--cmd", &m])
        .output()
        .unwrap();
    crate::common::one_line_error(&o, "a resumed run keeps the work and checks");
    // Nothing was written.
    assert_eq!(repo.git_ok(&["for-each-ref", "refs/forum"]), "");
}

#[test]
fn a_work_run_on_the_real_local_model_completes_and_verifies() {
    let Some(llm) = crate::llm::LocalLlm::start() else {
        return;
    };
    let repo = Repo::new("sha256");
    setup(&repo);
    // The policy file sits in the work tree, so the user's view is taken after writing it.
    let policy = repo.path().join("policy.toml");
    std::fs::write(&policy, "max_tasks = 1\n").unwrap();
    let before = user_view(&repo);
    let url = llm.chat_url();
    // A chat model edits no files: whatever it writes, the checks and the gate decide what
    // ships, and the record must verify.
    let j = repo.forum_json(&[
        "submit",
        "--work",
        "--check",
        CHECK,
        "--chat-url",
        url.as_str(),
        "--model",
        llm.model(),
        "--policy",
        policy.to_str().unwrap(),
        "--max-output-tokens",
        "200",
        "make the failing test in calc pass",
    ]);
    // How it ended is the table's name everywhere, and `answered` only when a change of the
    // run is on its branch (a tiny model usually edits nothing, and the run then says so).
    let status = j["git_forum_receipt"]["status"].as_str().unwrap();
    assert_eq!(status, j["exit"]["name"], "{j}");
    let delivered = !branch_commits_or_none(&repo, 0).is_empty();
    assert_eq!(status == "answered", delivered, "{j}");
    let answer = j["answer"].as_str().unwrap();
    assert!(answer.contains("Changes (branch forum/run-0):"), "{answer}");
    let k = kinds(&repo);
    // A chat worker runs as the editing worker's tool loop: it made a change, or
    // its result says why the loop failed (a tiny model often answers without tools).
    let failed_loop = payloads(&repo, "result")
        .iter()
        .any(|(_, p)| p["error"].is_string());
    assert!(k.contains(&"change".to_string()) || failed_loop, "{k:?}");
    assert_eq!(user_view(&repo), before);
    clean(&repo);
}

#[test]
fn the_daemon_submits_a_work_run_and_lists_what_it_shipped() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let m = one_task_model(&repo, "model", "merge", FIX_ADD);
    let served = repo.serve(&["--cmd", &m], std::process::Stdio::null());
    let (status, j) = crate::common::http_json(
        &served.addr,
        "POST",
        "/submit",
        &serde_json::json!({"request": "fix calc", "work": true, "checks": [CHECK]}),
    );
    assert_eq!(status, 200, "{j}");
    let answer = j["answer"].as_str().unwrap();
    assert!(answer.contains("- T1: merged"), "{answer}");
    let (status, bad) = crate::common::http_json(
        &served.addr,
        "POST",
        "/submit",
        &serde_json::json!({"request": "fix calc", "checks": "python3"}),
    );
    assert_eq!(status, 400, "{bad}");
    let (_, runs) = crate::common::http_json(&served.addr, "GET", "/runs", &serde_json::json!({}));
    assert_eq!(runs["runs"][0]["work"]["merged"], 1, "{runs}");
    drop(served);
    assert_eq!(branch_commits(&repo, 0).len(), 1);
    clean(&repo);
}

#[test]
fn a_done_when_criterion_written_run_cmd_is_a_check_of_its_task() {
    on_each_kind(|repo| {
        setup(repo);
        let p = format!(
            r#"{{"tasks":[{{"id":"T1","agent":"backend","instruction":"make add in calc.py add","depends_on":[],"done_when":["run: {CHECK}","the code reads well"]}}]}}"#
        );
        let m = model(repo, "model", &p, "merge", FIX_ADD);
        let j = repo.forum_json(&["submit", "--work", "--cmd", &m, "fix calc"]);
        let answer = j["answer"].as_str().unwrap();
        assert!(answer.contains("- T1: merged"), "{answer}");
        let checks = payloads(repo, "check");
        // The criterion ran on the task's change; with no --check, nothing runs on the branch.
        assert_eq!(checks.len(), 1, "{checks:?}");
        assert_eq!(checks[0].1["command"], CHECK);
        assert_eq!(checks[0].1["task"], "T1");
        assert_eq!(checks[0].1["ok"], true);
        clean(repo);
    });
}

#[test]
fn a_gate_before_a_wave_shows_the_changes_so_far_and_the_run_resumes_after_approval() {
    on_each_kind(|repo| {
        setup(repo);
        let m = model(
            repo,
            "model",
            &plan(&[("T1", "fix add"), ("T2", "fix mul")], true),
            "merge",
            "    case \"$p\" in\n      *\"fix mul\"*) sed -i '$ s/return a + b/return a * b/' calc.py; echo mul ;;\n      *) sed -i 's/return a - b/return a + b/' calc.py; echo add ;;\n    esac",
        );
        let j = repo.forum_json(&[
            "submit",
            "--work",
            "--check",
            CHECK,
            "--gate-wave",
            "1",
            "--cmd",
            &m,
            "fix calc",
        ]);
        assert_eq!(j["git_forum_receipt"]["status"], "gated", "{j}");
        let pending = &payloads(repo, "gate_pending")[0].1;
        let changes = pending["changes"].as_array().unwrap();
        assert_eq!(changes.len(), 1, "{pending}");
        assert_eq!(changes[0]["task"], "T1");
        assert_eq!(changes[0]["ship"], "merge");
        // The gate names the rules it holds the wave under, the ones the ship entry named: no
        // policy file here, so the policy is the empty text's digest.
        let ship = &payloads(repo, "ship")[0].1;
        assert_eq!(pending["rules"], ship["rules"], "{pending}");
        assert_eq!(
            pending["rules"]["policy"],
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert!(
            changes[0]["diff"]
                .as_str()
                .unwrap()
                .contains("+    return a + b")
        );
        no_worktrees(repo);
        repo.forum_ok(&["gate", "approve", "--run", "0", "--approver", "tester"]);
        let j = repo.forum_json(&["resume", "--cmd", &m]);
        assert_eq!(j["git_forum_receipt"]["status"], "answered", "{j}");
        let commits = branch_commits(repo, 0);
        assert_eq!(commits.len(), 2, "{commits:?}");
        trailers_name_tasks(repo, 0, &commits);
        clean(repo);
    });
}

#[test]
fn mcp_forum_submit_takes_work_and_checks() {
    let repo = Repo::new("sha256");
    setup(&repo);
    let m = one_task_model(&repo, "model", "merge", FIX_ADD);
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "forum.submit",
        "arguments": {"request": "fix calc", "work": true, "checks": [CHECK]}
    }});
    let input = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#.to_string(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string(),
        call.to_string(),
    ];
    let (ok, out) = repo.mcp_batch(&["--cmd", &m], &input);
    assert!(ok, "{out}");
    let reply: J = out
        .lines()
        .map(|l| serde_json::from_str::<J>(l).unwrap())
        .find(|r| r["id"] == 2)
        .expect("reply 2");
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    let answer = reply["result"]["structuredContent"]["answer"]
        .as_str()
        .unwrap();
    assert!(answer.contains("- T1: merged"), "{answer}");
    assert_eq!(branch_commits(&repo, 0).len(), 1);
    clean(&repo);
}

#[test]
fn a_work_run_in_a_repository_without_a_commit_is_refused_in_one_line() {
    let repo = Repo::new("sha1");
    let m = model(
        &repo,
        "model",
        &plan(&[("T1", "x")], false),
        "merge",
        FIX_ADD,
    );
    let o = repo
        .forum()
        .args(["submit", "--work", "--cmd", &m, "fix calc"])
        .output()
        .unwrap();
    crate::common::one_line_error(&o, "HEAD has no commit yet, so a --work run has no base");
    assert_eq!(repo.git_ok(&["for-each-ref", "refs/forum"]), "");
}

#[test]
fn a_run_killed_after_its_ship_entry_integrates_the_change_on_resume() {
    // Killed with SIGKILL just before the run branch moves: the ledger says `merge`, the branch
    // does not hold the change. Resume must not take the change for an integrated one.
    on_each_kind(|repo| {
        setup(repo);
        let m = one_task_model(repo, "model", "merge", FIX_ADD);
        let o = repo
            .forum()
            .env("GIT_FORUM_FAILPOINT", "integrate-start")
            .args([
                "submit", "--work", "--check", CHECK, "--cmd", &m, "fix calc",
            ])
            .output()
            .unwrap();
        assert!(!o.status.success(), "the failpoint did not fire");
        assert_eq!(payloads(repo, "ship").len(), 1);
        assert!(branch_commits_or_none(repo, 0).is_empty());
        let j = repo.forum_json(&["resume", "--cmd", &m]);
        assert_eq!(j["git_forum_receipt"]["status"], "answered", "{j}");
        let commits = branch_commits(repo, 0);
        assert_eq!(commits.len(), 1, "{commits:?}");
        let calc = repo.git_ok(&["show", &format!("{}:calc.py", commits[0])]);
        assert!(calc.contains("return a + b"), "{calc}");
        trailers_name_tasks(repo, 0, &commits);
        clean(repo);
    });
}

/// A worker that fails (here: it prints why on stderr and exits 3, as an agent CLI does when it
/// cannot start or is refused) fails its task with its own first lines in the record, and the
/// run exits 10, never 0, however the answer reads.
#[test]
fn a_worker_that_fails_fails_its_task_and_the_run_exits_10() {
    on_each_kind(|repo| {
        setup(repo);
        let m = one_task_model(
            repo,
            "model",
            "merge",
            "    echo 'Error: the agent could not start: no login' >&2; echo 'at main (cli.js:1)' >&2; exit 3",
        );
        let out = repo
            .forum()
            .args([
                "submit",
                "--work",
                "--check",
                CHECK,
                "--cmd",
                &m,
                "--json",
                "make the failing test in calc pass",
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(10), "{stderr}");
        let report: J = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["exit"]["code"], 10, "{report}");
        assert_eq!(report["exit"]["name"], "failed", "{report}");
        let results = payloads(repo, "result");
        let task = results
            .iter()
            .map(|(_, b)| b)
            .find(|b| b["id"] == "T1")
            .unwrap();
        assert_eq!(task["ok"], false, "{task}");
        let output = task["output"].as_str().unwrap();
        assert!(
            output.contains("Error: the agent could not start: no login")
                && output.contains("at main (cli.js:1)"),
            "{output}"
        );
        // Nothing reached the run branch.
        let run = payloads(repo, "request")[0].0;
        assert!(branch_commits_or_none(repo, run).is_empty());
        no_worktrees(repo);
    });
}

/// A worker seat whose program is not installed: the run records its request and a
/// `run_stopped` at stage `start` naming the program, calls no model, exits 10 with one line
/// that says so, and `resume` goes on once the program exists.
#[test]
fn a_worker_seat_whose_program_is_missing_is_a_recorded_failed_run_that_resume_continues() {
    on_each_kind(|repo| {
        setup(repo);
        let calls = repo.path().join("calls.txt");
        let m = one_task_model(
            repo,
            "model",
            "merge",
            "    sed -i 's/a - b/a + b/' calc.py; echo 'fixed add'",
        );
        // Every model call leaves a line, so "no model was called" is seen, not assumed.
        let counted = format!("{m}.counted.sh");
        std::fs::write(
            &counted,
            format!(
                "#!/bin/sh\necho call >> {}\nexec {m} \"$@\"\n",
                calls.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&counted, std::fs::Permissions::from_mode(0o755)).unwrap();
        let agent = repo.path().join("agent.sh");
        std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
        std::fs::write(
            repo.path().join(".forum/runtime.toml"),
            format!(
                "[runtime.default]\ncmd = \"{counted}\"\n\n[seats]\nworker = {{ cmd = \"{}\" }}\n",
                agent.display()
            ),
        )
        .unwrap();
        std::fs::write(
            repo.path().join(".git/info/exclude"),
            ".forum/\ncalls.txt\n",
        )
        .unwrap();
        let o = repo
            .forum()
            .args([
                "submit",
                "--work",
                "--check",
                CHECK,
                "make the failing test in calc pass",
            ])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(10), "{o:?}");
        let missing = format!(
            "worker seat: program {} does not exist or is not executable",
            agent.display()
        );
        crate::common::one_line_error(&o, &missing);
        assert!(!calls.exists(), "a model was called");
        assert_eq!(kinds(repo), ["request", "route_frame", "run_stopped"]);
        let stopped = &payloads(repo, "run_stopped")[0].1;
        assert_eq!(stopped["stage"], "start", "{stopped}");
        assert_eq!(stopped["reason"], missing.as_str(), "{stopped}");
        let runs = repo.forum_json(&["runs"]);
        assert_eq!(runs["runs"][0]["state"], "failed", "{runs}");
        no_worktrees(repo);
        // Installed: resume plans and does the work.
        std::fs::copy(&m, &agent).unwrap();
        let j = repo.forum_json(&["resume"]);
        assert_eq!(j["exit"]["code"], 0, "{j}");
        let run = payloads(repo, "request")[0].0;
        assert_eq!(branch_commits(repo, run).len(), 1);
        clean(repo);
    });
}
