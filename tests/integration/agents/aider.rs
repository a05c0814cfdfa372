//! aider, driven directly against the loopback chat-completions server.

use std::path::Path;
use std::process::Output;

use super::fixture::{FILE, Fixture};
use super::model::{ModelServer, Usage};
use super::{agent_cli, timed};

/// The model id the tests ask for (unknown to aider: it gets the "whole" edit format).
pub const MODEL: &str = "loopback-aider";

/// Runs aider once in the fixture against `server`, with `calc.py` in the chat.
pub fn run_aider(aider: &Path, f: &Fixture, server: &ModelServer, prompt: &str) -> Output {
    timed(240, aider)
        .args(["--model", &format!("openai/{MODEL}")])
        .args([
            "--openai-api-base",
            &server.v1(),
            "--openai-api-key",
            "sk-loopback",
        ])
        .args([
            "--edit-format",
            "whole",
            "--message",
            prompt,
            "--yes-always",
        ])
        .args(["--no-auto-commits", "--no-dirty-commits", "--no-gitignore"])
        .args([
            "--no-analytics",
            "--no-check-update",
            "--no-show-model-warnings",
        ])
        .args(["--no-detect-urls", "--no-show-release-notes", "--no-pretty"])
        .args(["--no-fancy-input", "--map-tokens", "0", FILE])
        .current_dir(&f.project)
        .env("HOME", &f.home)
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .output()
        .expect("run aider under timeout")
}

/// aider's `Tokens: N sent, M received.` line as (sent, received); counts under 1,000 are
/// printed exactly (larger ones as `1.2k`, which this does not parse).
pub fn tokens(stdout: &str) -> Option<(u64, u64)> {
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("Tokens: "))?;
    let rest = line.trim_start().strip_prefix("Tokens: ")?;
    let (sent, rest) = rest.split_once(" sent, ")?;
    let received = rest.split_once(" received")?.0;
    Some((sent.trim().parse().ok()?, received.trim().parse().ok()?))
}

#[test]
fn heavy_aider_fixes_the_fixture_against_the_loopback_model() {
    let Some(aider) = agent_cli("GIT_FORUM_TEST_AIDER") else {
        return;
    };
    let f = Fixture::new();
    assert!(!f.passes(), "the fixture fails before");
    let usage = Usage {
        input: 800,
        output: 120,
    };
    let server = ModelServer::start(f.script(usage));
    let out = run_aider(
        &aider,
        &f,
        &server,
        "Fix add in calc.py so test_calc passes.",
    );
    let log = server.summary();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let context = format!("stderr: {stderr}\nstdout: {stdout}\nrequests:\n{log}");
    assert!(out.status.success(), "aider: {:?}\n{context}", out.status);
    assert!(f.passes(), "passes after: {}\n{context}", f.calc());
    let calls = server.requests_to("/v1/chat/completions");
    eprintln!("aider said: {stdout}\nrequests:\n{log}");
    assert_eq!(calls.len(), 1, "{context}");
    assert_eq!(calls[0].model.as_deref(), Some(MODEL), "{log}");
    assert_eq!(calls[0].stream, Some(true), "{log}");
    // aider prints its own count of the tokens (its tokenizer over what it sent and got), not
    // the usage the server reported in the stream's last chunk: metering aider has to count
    // at the model's side.
    let asked = &calls[0].body["stream_options"];
    eprintln!("aider's stream_options: {asked}");
    let (sent, received) = tokens(&stdout).unwrap_or_else(|| panic!("no Tokens line\n{context}"));
    assert!(sent > 0 && received > 0, "{context}");
}

/// The ceiling tests' script for aider: three replies whose file does not compile, each
/// answered by aider's lint check with another request, then the fix. Unstopped, aider asks
/// four times, 10,000 tokens in all, which is what a 2,000-token ceiling must cut short.
#[test]
fn heavy_aider_asked_again_by_its_lint_check_spends_four_turns_on_the_ceiling_script() {
    let Some(aider) = agent_cli("GIT_FORUM_TEST_AIDER") else {
        return;
    };
    let f = Fixture::new();
    let mut script = f.script(super::claude::CEILING_USAGE);
    script.busy_turns = 3;
    let server = ModelServer::start(script);
    let out = run_aider(
        &aider,
        &f,
        &server,
        "Fix add in calc.py so test_calc passes.",
    );
    let log = server.summary();
    let context = format!(
        "stdout: {}\nstderr: {}\nrequests:\n{log}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "aider: {:?}\n{context}", out.status);
    let calls = server.requests_to("/v1/chat/completions");
    assert_eq!(calls.len(), 4, "{context}");
    assert_eq!(4 * super::claude::CEILING_USAGE.total(), 10_000);
    assert!(f.passes(), "passes after: {}\n{context}", f.calc());
}
