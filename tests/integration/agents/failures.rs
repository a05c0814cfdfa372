//! A worker that fails is a failed task and a failed run, with the real agent CLIs through
//! `git forum submit --work` under the default sandbox: the program missing, an edit denied,
//! and a patch that failed while the CLI exited 0 each end the run with exit 10 (`failed`),
//! and the record holds the first error line (the task's result holds the CLI's own; a
//! missing program is witnessed as the run's stop at its start).
//!
//! These run the CLIs from the cache `scripts/agent-clis install` fills (the forum.rs tests
//! install them under a temporary `HOME`).

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use super::agent_cli;
use super::fixture::Fixture;
use super::forum::{payloads, submit, submit_command};
use super::model::{ModelServer, Outcome, Usage};

/// The exit code of a run a task of which failed.
const FAILED: i32 = 10;

/// The variables each preset's CLI needs to reach `server`.
pub(super) fn endpoint(preset: &str, server: &ModelServer) -> Vec<(&'static str, String)> {
    match preset {
        "claude" => vec![
            ("ANTHROPIC_BASE_URL", server.url()),
            ("ANTHROPIC_API_KEY", "sk-ant-loopback".into()),
            ("ANTHROPIC_MODEL", super::forum::MODEL.into()),
        ],
        "codex" => vec![
            ("OPENAI_BASE_URL", server.v1()),
            ("OPENAI_API_KEY", "sk-loopback-codex".into()),
        ],
        _ => vec![
            ("OPENAI_API_BASE", server.v1()),
            ("OPENAI_API_KEY", "sk-loopback-aider".into()),
        ],
    }
}

/// The fixture's scripted attempt ending in `outcome`.
fn server_for(f: &Fixture, outcome: Outcome) -> ModelServer {
    let mut script = f.script(Usage {
        input: 300,
        output: 60,
    });
    // Under git forum the worktree is made on the fly: Claude Code's edits go where it says
    // it works.
    script.root = Default::default();
    script.outcome = outcome;
    ModelServer::start(script)
}

/// T1's recorded result, after asserting the run failed (exit 10) and the task is `ok: false`
/// and the user's checkout is untouched.
fn failed_task(f: &Fixture, o: &Output, server: Option<&ModelServer>) -> Value {
    let stderr = String::from_utf8_lossy(&o.stderr);
    let seen = server.map(ModelServer::summary).unwrap_or_default();
    assert_eq!(
        o.status.code(),
        Some(FAILED),
        "{stderr}\nthe model saw: {seen}\n{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let results = payloads(f, "result");
    let t1 = results
        .into_iter()
        .find(|r| r["id"] == "T1")
        .unwrap_or_else(|| panic!("T1's result: {stderr}"));
    assert_eq!(t1["ok"], false, "{t1}");
    assert!(payloads(f, "change").iter().all(|c| c["commit"].is_null()));
    assert!(!f.fixed(), "the user's calc.py must not change");
    t1
}

/// The recorded output of a failed task (`error: ...`).
fn output(t1: &Value) -> String {
    t1["output"].as_str().unwrap_or_default().to_string()
}

/// A preset whose CLI is not installed stops the run before any model or worker is called:
/// one line naming the program and what to do, exit 10, and the record holds the request and
/// a `run_stopped` at stage `start` whose reason names the program.
#[test]
fn heavy_each_agent_whose_program_is_missing_stops_the_run_on_record_naming_it() {
    for preset in ["claude", "codex", "aider"] {
        let f = Fixture::new();
        let server = server_for(&f, Outcome::Fix);
        let o = submit_command(&f, preset, None, &endpoint(preset, &server), "", &[])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        eprintln!("{preset} missing: {stderr}");
        assert_eq!(o.status.code(), Some(FAILED), "{stderr}");
        let missing = format!("worker seat: program {preset} is not on PATH");
        crate::common::one_line_error(&o, &missing);
        let stopped = payloads(&f, "run_stopped");
        assert_eq!(stopped.len(), 1, "{stopped:?}");
        assert_eq!(stopped[0]["stage"], "start");
        assert_eq!(stopped[0]["reason"], missing.as_str());
        assert!(payloads(&f, "plan").is_empty());
        assert!(server.requests().is_empty(), "{}", server.summary());
    }
}

#[test]
fn heavy_claude_code_refused_a_command_it_was_not_allowed_fails_the_run() {
    let Some(claude) = agent_cli("GIT_FORUM_TEST_CLAUDE") else {
        return;
    };
    let f = Fixture::new();
    // Not among the checks or the --allow-cmd commands, and not a file command its
    // acceptEdits mode allows by itself: Claude Code's permissions refuse it and report it in
    // `permission_denials`.
    let server = server_for(&f, Outcome::Shell("python3 escape.py".into()));
    let o = submit(&f, "claude", &claude, &endpoint("claude", &server));
    let t1 = failed_task(&f, &o, Some(&server));
    let out = output(&t1);
    eprintln!("claude denied: {out}");
    assert!(out.contains("refused 1 tool use"), "{t1}");
    assert!(out.contains("Bash python3 escape.py"), "{t1}");
}

#[test]
fn heavy_claude_code_write_outside_refused_by_the_sandbox_fails_the_run() {
    let Some(claude) = agent_cli("GIT_FORUM_TEST_CLAUDE") else {
        return;
    };
    let f = Fixture::new();
    // Claude Code lets its Write tool try a path outside the worktree; the sandbox's
    // read-only root refuses it, and Claude Code only tells its model.
    let outside = f.dir().join("outside.txt");
    let server = server_for(&f, Outcome::WriteOutside(outside.clone()));
    let o = submit(&f, "claude", &claude, &endpoint("claude", &server));
    let t1 = failed_task(&f, &o, Some(&server));
    let out = output(&t1);
    eprintln!("claude refused by the sandbox: {out}");
    assert!(out.contains("read-only file system"), "{t1}");
    assert!(out.contains(&outside.display().to_string()), "{t1}");
    assert!(!outside.exists());
}

#[test]
fn heavy_codex_write_outside_refused_by_the_sandbox_fails_the_run() {
    let Some(codex) = agent_cli("GIT_FORUM_TEST_CODEX") else {
        return;
    };
    let f = Fixture::new();
    // Into the project's venv, which the sandbox shows read-only (Codex's own sandbox is off
    // under git forum's).
    let outside = f.venv.join("outside.txt");
    let server = server_for(&f, Outcome::WriteOutside(outside.clone()));
    let o = submit(&f, "codex", &codex, &endpoint("codex", &server));
    let t1 = failed_task(&f, &o, Some(&server));
    let out = output(&t1);
    eprintln!("codex denied: {out}");
    assert!(!outside.exists());
    assert!(out.contains("Read-only file system"), "{t1}");
}

/// A patch that does not apply, the CLI exiting 0: the run fails with the CLI's error.
fn bad_patch(preset: &str, program: &Path, says: &[&str]) {
    let f = Fixture::new();
    let server = server_for(&f, Outcome::BadPatch);
    let o = submit(&f, preset, program, &endpoint(preset, &server));
    let t1 = failed_task(&f, &o, Some(&server));
    let out = output(&t1);
    eprintln!("{preset} bad patch: {out}");
    assert!(says.iter().any(|s| out.contains(s)), "{t1}");
}

#[test]
fn heavy_claude_code_edit_that_does_not_apply_fails_the_run() {
    let Some(claude) = agent_cli("GIT_FORUM_TEST_CLAUDE") else {
        return;
    };
    bad_patch("claude", &claude, &["String to replace not found"]);
}

#[test]
fn heavy_codex_patch_that_does_not_apply_fails_the_run() {
    let Some(codex) = agent_cli("GIT_FORUM_TEST_CODEX") else {
        return;
    };
    bad_patch("codex", &codex, &["patch failed", "Failed to find"]);
}

#[test]
fn heavy_aider_answer_it_cannot_parse_fails_the_run() {
    let Some(aider) = agent_cli("GIT_FORUM_TEST_AIDER") else {
        return;
    };
    bad_patch(
        "aider",
        &aider,
        &["did not conform", "No filename provided"],
    );
}
