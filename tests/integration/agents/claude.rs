//! Claude Code, driven directly against the loopback Anthropic Messages server.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use super::fixture::Fixture;
use super::model::{ModelServer, Outcome, Usage};
use super::{agent_cli, json_lines, timed};

/// The model id the tests ask for (unknown to the CLI: it only prints a harmless notice).
pub const MODEL: &str = "loopback-sonnet";

/// Runs Claude Code once in the fixture against `server`, as agent-clis.md gives it.
pub fn run_claude(claude: &Path, f: &Fixture, server: &ModelServer, prompt: &str) -> Output {
    timed(240, claude)
        .args(["-p", prompt, "--output-format", "stream-json", "--verbose"])
        .args(["--permission-mode", "acceptEdits", "--model", MODEL])
        .current_dir(&f.project)
        .env("HOME", &f.home)
        .env("ANTHROPIC_BASE_URL", server.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-loopback")
        .env("ANTHROPIC_MODEL", MODEL)
        .env("ANTHROPIC_DEFAULT_HAIKU_MODEL", MODEL)
        .env("ANTHROPIC_DEFAULT_SONNET_MODEL", MODEL)
        .env("ANTHROPIC_DEFAULT_OPUS_MODEL", MODEL)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .output()
        .expect("run claude under timeout")
}

/// What Claude Code's stream-json said: the model of its `system/init` event and its final
/// `result` event.
pub struct Reported {
    pub model: String,
    pub result: Value,
}

pub fn reported(out: &Output) -> Reported {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let events = json_lines(&stdout);
    let init = events
        .iter()
        .find(|e| e["type"] == "system" && e["subtype"] == "init")
        .unwrap_or_else(|| panic!("no system/init event in {stdout}"));
    let result = events
        .iter()
        .rev()
        .find(|e| e["type"] == "result")
        .unwrap_or_else(|| panic!("no result event in {stdout}"))
        .clone();
    Reported {
        model: init["model"].as_str().unwrap_or_default().to_string(),
        result,
    }
}

#[test]
fn heavy_claude_code_fixes_the_fixture_against_the_loopback_model() {
    let Some(claude) = agent_cli("GIT_FORUM_TEST_CLAUDE") else {
        return;
    };
    let f = Fixture::new();
    assert!(!f.passes(), "the fixture fails before");
    let usage = Usage {
        input: 1200,
        output: 300,
    };
    let server = ModelServer::start(f.script(usage));
    let out = run_claude(
        &claude,
        &f,
        &server,
        "Fix add in calc.py so test_calc passes.",
    );
    let log = server.summary();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "claude: {:?}\nstderr: {stderr}\nstdout: {stdout}\nrequests:\n{log}",
        out.status
    );
    assert!(
        f.passes(),
        "passes after: {}\nstdout: {stdout}\nrequests:\n{log}",
        f.calc()
    );
    let r = reported(&out);
    eprintln!(
        "claude reported: model {} result {}\nrequests:\n{log}",
        r.model, r.result
    );
    assert_eq!(r.model, MODEL);
    assert_eq!(r.result["is_error"], false, "{}", r.result);
    // Every request the script answered was a streamed Messages call with this model.
    let calls = server.requests_to("/v1/messages");
    assert!(calls.len() >= 3, "read, edit, answer:\n{log}");
    assert_eq!(server.requests().len(), calls.len(), "nothing else:\n{log}");
    for c in &calls {
        assert_eq!(c.model.as_deref(), Some(MODEL), "{log}");
        assert_eq!(c.stream, Some(true), "{log}");
        assert!(c.headers.contains_key("x-api-key"), "{:?}", c.headers);
        assert_eq!(c.headers["anthropic-version"], "2023-06-01");
    }
    // The tokens it reports are the sum of what the model's replies reported.
    let n = calls.len() as u64;
    let u = &r.result["usage"];
    assert_eq!(u["input_tokens"].as_u64(), Some(n * usage.input), "{u}");
    assert_eq!(u["output_tokens"].as_u64(), Some(n * usage.output), "{u}");
}

/// Four turns of 2,500 tokens: the script a 2,000-token ceiling test stops.
pub const CEILING_USAGE: Usage = Usage {
    input: 2000,
    output: 500,
};

#[test]
fn heavy_claude_code_spends_10000_tokens_in_four_turns_with_one_busy_read() {
    let Some(claude) = agent_cli("GIT_FORUM_TEST_CLAUDE") else {
        return;
    };
    let f = Fixture::new();
    let mut script = f.script(CEILING_USAGE);
    // A busy read, the read Edit needs, the edit, the answer.
    script.busy_turns = 1;
    let server = ModelServer::start(script);
    let out = run_claude(&claude, &f, &server, "Fix add in calc.py.");
    let log = server.summary();
    assert!(out.status.success(), "{out:?}\n{log}");
    assert!(f.passes(), "{}\n{log}", f.calc());
    let r = reported(&out);
    assert_eq!(server.requests_to("/v1/messages").len(), 4, "{log}");
    let u = &r.result["usage"];
    let total = u["input_tokens"].as_u64().unwrap_or(0) + u["output_tokens"].as_u64().unwrap_or(0);
    assert_eq!(total, 10_000, "{u}");
}

#[test]
fn heavy_claude_code_exits_0_after_an_edit_that_does_not_apply() {
    let Some(claude) = agent_cli("GIT_FORUM_TEST_CLAUDE") else {
        return;
    };
    let f = Fixture::new();
    let before = f.calc();
    let mut script = f.script(Usage {
        input: 100,
        output: 10,
    });
    script.outcome = Outcome::BadPatch;
    let server = ModelServer::start(script);
    let out = run_claude(&claude, &f, &server, "Fix add in calc.py.");
    let log = server.summary();
    // The failed Edit goes back to the model as a tool error; the CLI ends as a success: only
    // the project's check tells.
    assert!(out.status.success(), "{out:?}\n{log}");
    assert_eq!(f.calc(), before, "{log}");
    assert!(!f.passes());
    let r = reported(&out);
    assert_eq!(r.result["is_error"], false, "{}", r.result);
    let calls = server.requests_to("/v1/messages");
    let last = &calls.last().expect("a request").body["messages"];
    let failed = last
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .any(|b| b["type"] == "tool_result" && b["is_error"] == true);
    assert!(failed, "the edit's tool result is an error:\n{log}");
}
