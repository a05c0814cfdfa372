//! Codex, driven directly against the loopback Responses API server.

use std::path::{Path, PathBuf};
use std::process::Output;

use super::fixture::Fixture;
use super::model::{ModelServer, Outcome, Usage};
use super::{agent_cli, json_lines, timed};

/// The model id the tests ask for (unknown to Codex: it offers `exec_command`).
pub const MODEL: &str = "loopback-codex";

/// The variable the provider entry names for its key.
pub const KEY_VAR: &str = "LOOPBACK_API_KEY";

/// Writes `$HOME/.codex/config.toml` for `server` (a provider entry on the Responses API, and
/// everything that would reach another host off) and returns that `CODEX_HOME`.
pub fn codex_home(f: &Fixture, server: &ModelServer) -> PathBuf {
    let home = f.home.join(".codex");
    std::fs::create_dir_all(&home).expect("CODEX_HOME");
    let config = format!(
        "model = \"{MODEL}\"\nmodel_provider = \"loopback\"\n\
         check_for_update_on_startup = false\n\n\
         [model_providers.loopback]\nname = \"loopback\"\nbase_url = \"{}\"\n\
         env_key = \"{KEY_VAR}\"\nwire_api = \"responses\"\n\n\
         [features]\nplugins = false\n\n[analytics]\nenabled = false\n\n\
         [feedback]\nenabled = false\n\n[otel]\nexporter = \"none\"\n",
        server.v1()
    );
    std::fs::write(home.join("config.toml"), config).expect("config.toml");
    home
}

/// Runs `codex exec --json` once in the fixture against `server`.
pub fn run_codex(codex: &Path, f: &Fixture, server: &ModelServer, prompt: &str) -> Output {
    let codex_home = codex_home(f, server);
    timed(240, codex)
        .args(["exec", "--json", "--skip-git-repo-check", "--ephemeral"])
        .args(["--sandbox", "workspace-write", prompt])
        .current_dir(&f.project)
        .env("HOME", &f.home)
        .env("CODEX_HOME", &codex_home)
        .env(KEY_VAR, "sk-loopback")
        .output()
        .expect("run codex under timeout")
}

#[test]
fn heavy_codex_fixes_the_fixture_against_the_loopback_model() {
    let Some(codex) = agent_cli("GIT_FORUM_TEST_CODEX") else {
        return;
    };
    let f = Fixture::new();
    assert!(!f.passes(), "the fixture fails before");
    let usage = Usage {
        input: 1500,
        output: 250,
    };
    let server = ModelServer::start(f.script(usage));
    let out = run_codex(
        &codex,
        &f,
        &server,
        "Fix add in calc.py so test_calc passes.",
    );
    let log = server.summary();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let context = format!("stderr: {stderr}\nstdout: {stdout}\nrequests:\n{log}");
    assert!(out.status.success(), "codex: {:?}\n{context}", out.status);
    assert!(f.passes(), "passes after: {}\n{context}", f.calc());
    let events = json_lines(&stdout);
    let turn = events
        .iter()
        .rev()
        .find(|e| e["type"] == "turn.completed")
        .unwrap_or_else(|| panic!("no turn.completed\n{context}"));
    let calls = server.requests_to("/v1/responses");
    eprintln!("codex reported: {turn}\nrequests:\n{log}");
    assert_eq!(calls.len(), 2, "the patch, the answer\n{context}");
    for c in &calls {
        assert_eq!(c.model.as_deref(), Some(MODEL), "{log}");
        assert_eq!(c.stream, Some(true), "{log}");
        assert!(c.headers.contains_key("authorization"), "{:?}", c.headers);
    }
    let u = &turn["usage"];
    let n = calls.len() as u64;
    assert_eq!(u["input_tokens"].as_u64(), Some(n * usage.input), "{u}");
    assert_eq!(u["output_tokens"].as_u64(), Some(n * usage.output), "{u}");
}

#[test]
fn heavy_codex_spends_10000_tokens_in_four_turns_with_two_busy_reads() {
    let Some(codex) = agent_cli("GIT_FORUM_TEST_CODEX") else {
        return;
    };
    let f = Fixture::new();
    let mut script = f.script(Usage {
        input: 2000,
        output: 500,
    });
    // Two reads, the patch, the answer.
    script.busy_turns = 2;
    let server = ModelServer::start(script);
    let out = run_codex(&codex, &f, &server, "Fix add in calc.py.");
    let log = server.summary();
    assert!(out.status.success(), "{out:?}\n{log}");
    assert!(f.passes(), "{}\n{log}", f.calc());
    assert_eq!(server.requests_to("/v1/responses").len(), 4, "{log}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let events = json_lines(&stdout);
    let turn = events
        .iter()
        .rev()
        .find(|e| e["type"] == "turn.completed")
        .unwrap_or_else(|| panic!("no turn.completed: {stdout}"));
    let u = &turn["usage"];
    let total = u["input_tokens"].as_u64().unwrap_or(0) + u["output_tokens"].as_u64().unwrap_or(0);
    assert_eq!(total, 10_000, "{u}");
}

#[test]
fn heavy_codex_exits_0_after_a_patch_that_does_not_apply() {
    let Some(codex) = agent_cli("GIT_FORUM_TEST_CODEX") else {
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
    let out = run_codex(&codex, &f, &server, "Fix add in calc.py.");
    let log = server.summary();
    // The failed patch goes back to the model as the command's output; Codex ends as a
    // success: only the project's check tells.
    assert!(out.status.success(), "{out:?}\n{log}");
    assert_eq!(f.calc(), before, "{log}");
    assert!(!f.passes());
    let calls = server.requests_to("/v1/responses");
    let output = calls.last().expect("a request").body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| i["output"].to_string())
        .collect::<String>();
    eprintln!("the failed patch's output, as Codex sent it back: {output}");
    assert!(!output.is_empty(), "{log}");
}
