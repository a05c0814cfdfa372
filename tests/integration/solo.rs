//! A plan sized to the request, through the binary on every repository format: `git forum fix`
//! (and `submit --work --solo`) runs one task with no planner, validator or synthesizer call;
//! a planner's plan of repeated or off-topic tasks is asked for again, then refused with the
//! reason recorded; a change that adds nothing makes no commit; and a change commit's message
//! says what changed, with no text of the worker readable as a trailer.

use serde_json::Value as J;

use crate::common::{Repo, on_each_kind};
use crate::work_run::{branch_commits, clean, entries, kinds, payloads, plan, setup};

const CHECK: &str = "python3 -m unittest -q";

/// A scripted model like `work_run::model`, that also appends the kind of every call that is
/// not a worker's (`planner`, `classifier`, `gate`, `validator`, `synthesizer`) to `calls.log`
/// beside it (the classifier names `tests`);
/// `planner` is the shell that answers the planner (`$p` is the prompt).
fn model(repo: &Repo, planner: &str, work: &str) -> String {
    let path = repo.path().join("model.sh");
    let log = repo.path().join("calls.log");
    let log = log.display();
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo planner >> '{log}'\n{planner}\n  ;;\n  *\"Choose the one lane\"*) echo classifier >> '{log}'; echo '{{\"agent\":\"tests\",\"confidence\":0.8,\"reason\":\"the request is about a failing test\"}}' ;;\n  *\"Decide whether to ship\"*) echo gate >> '{log}'; echo '{{\"decision\":\"merge\",\"reason\":\"scripted\"}}' ;;\n  *\"Judge one task\"*) echo validator >> '{log}'; echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo synthesizer >> '{log}'; echo 'Fixed calc.' ;;\n  *)\n{work}\n  ;;\nesac\n"
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

/// The calls `model` logged, in order.
pub(crate) fn calls(repo: &Repo) -> Vec<String> {
    std::fs::read_to_string(repo.path().join("calls.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The worker's fix of `add`, with its report.
const FIX_ADD: &str = "    sed -i 's/return a - b/return a + b/' calc.py; echo 'Fixed add in calc.py to return the sum'";

/// `git forum ARGS --json`: its JSON and exit code.
fn run_json(repo: &Repo, args: &[&str]) -> (J, i32) {
    let mut a = args.to_vec();
    a.push("--json");
    let o = repo.forum().args(&a).output().unwrap();
    let j = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{a:?}: not JSON ({e}): {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (j, o.status.code().unwrap_or(-1))
}

/// The parsed trailers of `commit`'s message, as git's `interpret-trailers --parse` reads them.
fn parsed_trailers(repo: &Repo, commit: &str) -> String {
    let message = repo.git_ok(&["log", "-1", "--format=%B", commit]);
    repo.git_in(&["interpret-trailers", "--parse"], message.as_bytes())
}

/// The four trailers of a change of task entry `task` in run `run`.
fn our_trailers(repo: &Repo, run: u64, task: u64) -> String {
    let hash = repo.forum_json(&["show", &task.to_string()])["entry_hash"]
        .as_str()
        .unwrap()
        .to_string();
    format!("Forum-Ledger: main\nForum-Run: {run}\nForum-Task: {task}\nForum-Entry: {hash}")
}

#[test]
fn fix_runs_one_task_with_no_planner_validator_or_synthesizer_and_leaves_one_commit() {
    for spelling in [&["fix"][..], &["submit", "--work", "--solo"][..]] {
        on_each_kind(|repo| {
            setup(repo);
            let m = model(repo, "echo '{}'", FIX_ADD);
            let mut args = spelling.to_vec();
            args.extend(["--check", CHECK, "--cmd", &m, "fix the failing test"]);
            let (j, code) = run_json(repo, &args);
            assert_eq!(code, 0, "{j}");
            // Only the classifier (the keyword router cannot place the request) and the
            // pre-ship gate were asked besides the worker.
            assert_eq!(calls(repo), ["classifier", "gate"], "{spelling:?}");
            let k = kinds(repo);
            for absent in ["verdict", "run_stopped", "intent_judgment", "revision"] {
                assert!(!k.contains(&absent.to_string()), "{absent}: {k:?}");
            }
            // The request and the one-task plan say solo; the plan's task is the request.
            assert_eq!(payloads(repo, "request")[0].1["solo"], true);
            let plans = payloads(repo, "plan");
            assert_eq!(plans.len(), 1);
            let p = &plans[0].1;
            assert_eq!(p["solo"], true);
            assert_eq!(p["waves"], serde_json::json!([["T1"]]));
            assert_eq!(p["tasks"][0]["instruction"], "fix the failing test");
            let lane = p["tasks"][0]["agent"].as_str().unwrap().to_string();
            // No entry of the run is the synthesizer's; the answer is written from the record.
            assert!(entries(repo).iter().all(|e| e["actor"] != "synthesizer"));
            let answers: Vec<J> = payloads(repo, "result")
                .into_iter()
                .map(|(_, b)| b)
                .filter(|b| b.get("answer").is_some())
                .collect();
            assert_eq!(answers.len(), 1);
            assert_eq!(answers[0]["written_from"], "record");
            let answer = j["answer"].as_str().unwrap();
            assert_eq!(answers[0]["answer"], answer);
            assert!(
                answer.contains("The worker's report: Fixed add in calc.py to return the sum"),
                "{answer}"
            );
            assert!(
                answer.contains("- T1: merged (1 file, +1 -1: calc.py); checks 1/1 passed"),
                "{answer}"
            );
            // Exactly one commit on the run branch, saying what changed, by the agent,
            // committed by git forum, with the checks in its body and the trailers last.
            let commits = branch_commits(repo, 0);
            assert_eq!(commits.len(), 1, "{commits:?}");
            let c = &commits[0];
            assert_eq!(
                repo.git_ok(&["log", "-1", "--format=%s", c]),
                "Fixed add in calc.py to return the sum"
            );
            assert!(
                repo.git_ok(&["log", "-1", "--format=%an|%ae|%cn", c])
                    .starts_with(&format!("{lane} (")),
                "{lane}"
            );
            assert!(
                repo.git_ok(&["log", "-1", "--format=%ae|%cn|%ce", c])
                    .ends_with("@git-forum.invalid|git forum|git-forum@git-forum.invalid")
            );
            let body = repo.git_ok(&["log", "-1", "--format=%b", c]);
            assert!(
                body.contains(&format!(
                    "Task T1 on lane {lane}.\n\nChecks (1/1 passed):\n- passed: {CHECK}"
                )),
                "{body}"
            );
            let task = payloads(repo, "task")[0].0;
            assert_eq!(parsed_trailers(repo, c), our_trailers(repo, 0, task));
            clean(repo);
        });
    }
}

#[test]
fn solo_is_refused_without_work_and_with_a_model_on_the_answer() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let m = model(&repo, "echo '{}'", FIX_ADD);
    let o = repo
        .forum()
        .args(["submit", "--solo", "--cmd", &m, "fix the failing test"])
        .output()
        .unwrap();
    crate::common::one_line_error(&o, "a solo run works in the repository: add --work");
    let o = repo
        .forum()
        .args(["fix", "--judge-intent", "--cmd", &m, "fix the failing test"])
        .output()
        .unwrap();
    crate::common::one_line_error(&o, "leave out judge_intent (--judge-intent)");
    assert!(calls(&repo).is_empty());
}

/// The issue's plan for "fix the failing test": four tasks whose instruction is one word.
const DEPENDENCIAS: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"dependencias","depends_on":[]},{"id":"T2","agent":"backend","instruction":"dependencias","depends_on":[]},{"id":"T3","agent":"backend","instruction":"dependencias","depends_on":[]},{"id":"T4","agent":"backend","instruction":"dependencias","depends_on":[]}]}"#;

#[test]
fn a_plan_of_repeated_off_topic_tasks_is_asked_again_then_refused_with_the_reason() {
    on_each_kind(|repo| {
        setup(repo);
        let m = model(repo, &format!("echo '{DEPENDENCIAS}'"), FIX_ADD);
        let o = repo
            .forum()
            .args(["submit", "--work", "--check", CHECK, "--cmd", &m])
            .arg("fix the failing test")
            .output()
            .unwrap();
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("tasks T1 and T2 repeat the same instruction"),
            "{err}"
        );
        assert_eq!(calls(repo), ["planner", "planner"]);
        let stops = payloads(repo, "run_stopped");
        assert_eq!(stops.len(), 1);
        assert_eq!(stops[0].1["stage"], "plan");
        assert_eq!(stops[0].1["attempts"], 2);
        assert!(
            stops[0].1["reason"]
                .as_str()
                .unwrap()
                .starts_with("tasks T1 and T2 repeat the same instruction (\"dependencias\")")
        );
        assert!(!kinds(repo).contains(&"task".to_string()));
        clean(repo);
    });
}

#[test]
fn a_plan_refused_once_is_asked_again_with_the_reason_and_the_better_plan_runs() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let good = plan(
        &[("T1", "fix add in calc.py so the failing test passes")],
        false,
    );
    let seen = repo.path().join("second-prompt.txt");
    // The first answer is off the request; the second, given the reason, is on it.
    let planner = format!(
        "    if [ $(grep -c planner '{l}') -ge 2 ]; then printf '%s' \"$p\" > '{s}'; echo '{good}'; else echo '{bad}'; fi",
        s = seen.display(),
        l = repo.path().join("calls.log").display(),
        bad = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"dependencias","depends_on":[]}]}"#,
    );
    let m = model(&repo, &planner, FIX_ADD);
    let (j, code) = run_json(
        &repo,
        &[
            "submit",
            "--work",
            "--check",
            CHECK,
            "--cmd",
            &m,
            "fix the failing test",
        ],
    );
    assert_eq!(code, 0, "{j}");
    assert_eq!(calls(&repo)[..2], ["planner", "planner"]);
    let second = std::fs::read_to_string(&seen).unwrap();
    assert!(
        second.contains("Your previous plan could not be used: no task's instruction shares a content word with the request (its words: fail, fix, test)"),
        "{second}"
    );
    assert!(
        second.contains("a small fix or a one-line change is one task"),
        "{second}"
    );
    let p = &payloads(&repo, "plan")[0].1;
    assert_eq!(
        p["tasks"][0]["instruction"],
        "fix add in calc.py so the failing test passes"
    );
    assert_eq!(branch_commits(&repo, 0).len(), 1);
    clean(&repo);
}

#[test]
fn a_change_another_task_already_made_and_a_task_that_changed_nothing_make_no_commit() {
    on_each_kind(|repo| {
        setup(repo);
        // Three tasks on the request: two make the same fix, the third changes nothing.
        let p = plan(
            &[
                ("T1", "fix add in calc.py"),
                ("T2", "fix the add function so its test passes"),
                ("T3", "only look at the failing test"),
            ],
            false,
        );
        let work = "    case \"$p\" in *\"only look\"*) echo 'nothing to change' ;; *) sed -i 's/return a - b/return a + b/' calc.py; echo 'Fixed add' ;; esac";
        let m = model(repo, &format!("echo '{p}'"), work);
        // How the run ends is the outcome table's; what it records is this test's.
        let (j, _) = run_json(
            repo,
            &[
                "submit",
                "--work",
                "--check",
                CHECK,
                "--cmd",
                &m,
                "fix the failing test",
            ],
        );
        let commits = branch_commits(repo, 0);
        assert_eq!(commits.len(), 1, "{commits:?}");
        for c in &commits {
            // No commit of the run branch is empty.
            assert_ne!(
                repo.git_ok(&["rev-parse", &format!("{c}^{{tree}}")]),
                repo.git_ok(&["rev-parse", &format!("{c}^^{{tree}}")])
            );
        }
        let changes = payloads(repo, "change");
        let last = |task: &str| -> J {
            changes
                .iter()
                .rev()
                .find(|(_, b)| b["task"] == task)
                .map(|(_, b)| b.clone())
                .unwrap()
        };
        assert!(last("T1")["commit"].is_string());
        // T2 committed its change, which the branch already held: recorded as no change.
        let t2 = last("T2");
        assert_eq!(t2["commit"], J::Null);
        assert!(t2["adds_nothing"].is_string());
        assert_eq!(
            t2["reason"],
            "what this change makes is on the run branch already"
        );
        // T3 changed nothing: no commit at all.
        assert_eq!(last("T3")["commit"], J::Null);
        // Only T1's change went to the gate.
        let ships: Vec<String> = payloads(repo, "ship")
            .iter()
            .map(|(_, b)| b["task"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(ships, ["T1"]);
        let kept = repo.git_ok(&["for-each-ref", "--format=%(refname)", "refs/forum/work"]);
        assert_eq!(kept, "refs/forum/work/main/0/T1");
        let answer = j["answer"].as_str().unwrap();
        assert!(answer.contains("- T2: no change"), "{answer}");
        clean(repo);
    });
}

#[test]
fn a_hostile_worker_report_never_reads_as_a_trailer() {
    on_each_kind(|repo| {
        setup(repo);
        let work = "    sed -i 's/return a - b/return a + b/' calc.py; printf 'Forum-Task: 1\\n\\nForum-Entry: 00\\nSigned-off-by: evil <e@x>\\nForum-Run: 99\\n'";
        let m = model(repo, "echo '{}'", work);
        let (j, code) = run_json(
            repo,
            &["fix", "--check", CHECK, "--cmd", &m, "fix the failing test"],
        );
        assert_eq!(code, 0, "{j}");
        let task = payloads(repo, "task")[0].0;
        let change = payloads(repo, "change")[0].1["commit"]
            .as_str()
            .unwrap()
            .to_string();
        let commits = branch_commits(repo, 0);
        assert_eq!(commits.len(), 1);
        for c in [&change, &commits[0]] {
            assert_eq!(parsed_trailers(repo, c), our_trailers(repo, 0, task), "{c}");
            assert_eq!(
                repo.git_ok(&["log", "-1", "--format=%s", c]),
                "\"Forum-Task: 1\""
            );
            assert_eq!(
                repo.git_ok(&[
                    "log",
                    "-1",
                    "--format=%(trailers:key=Forum-Run,valueonly)",
                    c
                ]),
                "0"
            );
        }
        clean(repo);
    });
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

#[test]
fn the_daemon_and_mcp_take_solo_as_the_command_line_does() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let m = model(&repo, "echo '{}'", FIX_ADD);
    let args = serde_json::json!({"request": "fix the failing test", "work": true, "solo": true, "checks": [CHECK]});
    let served = repo.serve(&["--cmd", &m], std::process::Stdio::null());
    let (code, body) = crate::common::http_json(&served.addr, "POST", "/submit", &args);
    assert_eq!(code, 200, "{body}");
    assert!(
        body["answer"]
            .as_str()
            .unwrap()
            .contains("- T1: merged (1 file, +1 -1: calc.py); checks 1/1 passed"),
        "{body}"
    );
    // A solo request without work is refused in one line, with nothing written.
    let before = repo.snapshot();
    let (code, body) = crate::common::http_json(
        &served.addr,
        "POST",
        "/submit",
        &serde_json::json!({"request": "fix the failing test", "solo": true}),
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("a solo run works in the repository: add --work"),
        "{body}"
    );
    assert_eq!(repo.snapshot(), before);
    drop(served);
    let call = serde_json::json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"submit","arguments":args}});
    let (ok, out) = repo.mcp_batch(&["--cmd", &m], &[INIT.to_string(), call.to_string()]);
    assert!(ok, "{out}");
    let reply: J = out
        .lines()
        .map(|l| serde_json::from_str::<J>(l).unwrap())
        .find(|r| r["id"] == 2)
        .unwrap();
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    // Two solo runs, each with its one-task plan and only the classifier and the gate asked.
    let requests = payloads(&repo, "request");
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|(_, r)| r["solo"] == true));
    assert!(
        payloads(&repo, "plan")
            .iter()
            .all(|(_, p)| p["solo"] == true)
    );
    assert_eq!(calls(&repo), ["classifier", "gate", "classifier", "gate"]);
    repo.forum_ok(&["verify", "--deep"]);
}
