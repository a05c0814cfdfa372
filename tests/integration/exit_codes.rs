//! `submit` and `resume` exit codes people can script, through the real binary with a scripted
//! command worker: 0 only when the run answered and nothing it was asked to check refuted the
//! answer; a budget stop, a refuted verification, a blocked change, a paused gate and a rejected
//! gate each exit with their own code, and `--json` prints the run's report on stdout in each
//! case. (The halt code is shown in `halt.rs`; the spend-ceiling code is reserved for the
//! ceilings, `surface::run::exit::EXIT_CEILING`.)

use std::process::Output;

use serde_json::Value as J;

use crate::common::{Repo, one_line_error};

const PLAN: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"write b.txt","depends_on":[],"done_when":[]}]}"#;

const ANSWER: &str = "Wrote b.txt as asked. Verified by reading it back; next step: review.";

/// A scripted model; `ship` is the pre-ship gate's decision for a `--work` run.
fn model(repo: &Repo, ship: &str) -> String {
    let path = repo.path().join("model.sh");
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{PLAN}' ;;\n  *\"Decide whether to ship\"*) echo '{{\"decision\":\"{ship}\",\"reason\":\"scripted\"}}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo '{ANSWER}' ;;\n  *) echo hello > b.txt; echo 'wrote b.txt' ;;\nesac\n"
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

/// Runs `git forum --json ARGS`; returns the exit code and the report it printed.
fn json_run(repo: &Repo, args: &[&str]) -> (Option<i32>, J, Output) {
    let o = repo.forum().arg("--json").args(args).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let report: J = serde_json::from_str(&out).unwrap_or_else(|e| {
        panic!(
            "{args:?}: stdout is not JSON ({e}): {out:?}; stderr {}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o.status.code(), report, o)
}

/// The run report says how it ended, with the code the process exited with; our receipt's
/// status is the same name.
fn ended(code: Option<i32>, report: &J, want: i32, name: &str) {
    assert_eq!(code, Some(want), "{report}");
    assert_eq!(report["exit"]["code"], want, "{report}");
    assert_eq!(report["exit"]["name"], name, "{report}");
    assert_eq!(report["git_forum_receipt"]["status"], name, "{report}");
}

#[test]
fn answered_exits_0_and_a_budget_stop_exits_3() {
    let repo = Repo::new("sha1");
    let m = model(&repo, "merge");
    let (code, r, _) = json_run(&repo, &["submit", "--cmd", &m, "write b.txt"]);
    ended(code, &r, 0, "answered");
    assert_eq!(r["answer"], ANSWER);
    let (code, r, _) = json_run(
        &repo,
        &[
            "submit",
            "--max-model-calls",
            "1",
            "--cmd",
            &m,
            "write b.txt",
        ],
    );
    ended(code, &r, 3, "stopped_on_budget");
    // The same codes in text mode, where the answer is on stdout.
    let o = repo
        .forum()
        .args(["submit", "--quiet", "--cmd", &m, "write b.txt"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn a_refuted_verification_exits_6_and_an_undecided_one_does_not() {
    let repo = Repo::new("sha1");
    let m = model(&repo, "merge");
    let (code, r, _) = json_run(
        &repo,
        &[
            "submit",
            "--verify-cmd",
            "false",
            "--cmd",
            &m,
            "write b.txt",
        ],
    );
    ended(code, &r, 6, "refuted");
    assert_eq!(r["answer"], ANSWER);
    // Exit 2 from the verifier is "could not decide": nothing refuted the answer.
    let (code, r, _) = json_run(
        &repo,
        &[
            "submit",
            "--verify-cmd",
            "sh -c 'exit 2'",
            "--cmd",
            &m,
            "write b.txt",
        ],
    );
    ended(code, &r, 0, "answered");
    let (code, r, _) = json_run(
        &repo,
        &["submit", "--verify-cmd", "true", "--cmd", &m, "write b.txt"],
    );
    ended(code, &r, 0, "answered");
}

#[test]
fn a_change_the_pre_ship_gate_blocks_exits_7() {
    let repo = Repo::new("sha1");
    repo.git_ok(&["checkout", "-q", "-b", "main"]);
    std::fs::write(repo.path().join("a.txt"), "a\n").unwrap();
    std::fs::write(repo.path().join(".gitignore"), "*.sh\n").unwrap();
    repo.git_ok(&["add", "."]);
    repo.git_ok(&["commit", "-q", "-m", "a"]);
    let m = model(&repo, "block");
    let (code, r, _) = json_run(&repo, &["submit", "--work", "--cmd", &m, "write b.txt"]);
    ended(code, &r, 7, "blocked");
    let m = model(&repo, "merge");
    let (code, r, _) = json_run(&repo, &["submit", "--work", "--cmd", &m, "write b.txt"]);
    ended(code, &r, 0, "answered");
}

#[test]
fn a_paused_gate_exits_8_and_a_rejected_one_9() {
    let repo = Repo::new("sha1");
    let m = model(&repo, "merge");
    let (code, r, _) = json_run(
        &repo,
        &["submit", "--gate-wave", "0", "--cmd", &m, "write b.txt"],
    );
    ended(code, &r, 8, "gated");
    // A resume refused at the undecided gate exits 8 too, in one line.
    let o = repo.forum().args(["resume", "--cmd", &m]).output().unwrap();
    assert_eq!(o.status.code(), Some(8));
    one_line_error(&o, "waits for a decision on the gate");
    repo.forum_ok(&["gate", "reject", "--run", "0", "--reason", "no"]);
    let (code, r, _) = json_run(&repo, &["resume", "--cmd", &m]);
    ended(code, &r, 9, "rejected");
    repo.forum_ok(&["verify", "--deep"]);
}

#[test]
fn the_codes_are_documented_in_submit_help() {
    let repo = Repo::new("sha1");
    let help = repo.forum_ok(&["submit", "--help"]);
    for line in [
        "   0  answered            delivered: changes on the run branch, or a text answer not refuted",
        "   3  stopped_on_budget   stopped on --max-model-calls or --max-seconds",
        "   4  stopped_on_ceiling  stopped on --max-tokens or --max-cost-usd",
        "   5  halted              halted by `git forum halt` or SIGINT/SIGTERM",
        "   6  refuted             --verify-cmd refuted the answer, or a --check failed",
        "   7  blocked             the pre-ship gate blocked a change, and nothing was delivered",
        "   8  gated               paused at a gate",
        "   9  rejected            stopped: a gate was rejected",
        "  10  failed              a task failed (its worker, or its change's checks)",
        "  11  nothing_delivered   no change of the --work run is on its run branch",
        "  12  partial             some changes delivered, but another task failed",
        "  13  timed_out           a task's worker hit its deadline",
        "  14  degraded            a change of a wave marked degraded is on the run branch",
    ] {
        assert!(help.contains(line), "{line:?} not in {help}");
    }
}
