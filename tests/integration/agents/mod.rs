// The server, the fixture and the runners are shared with other tests (the presets', the
// egress proxy's); not every piece is used by these.
#![allow(dead_code)]

//! The real coding-agent CLIs (Claude Code, Codex, aider) against a loopback model that speaks
//! each one's wire protocol ([`model`]), fixing a small Python project ([`fixture`]).
//!
//! The CLIs come from `scripts/agent-clis install`; `eval "$(scripts/agent-clis env)"` names
//! them in `GIT_FORUM_TEST_CLAUDE`, `GIT_FORUM_TEST_CODEX` and `GIT_FORUM_TEST_AIDER`. A test
//! whose CLI is not named skips with a message, or fails when `GIT_FORUM_REQUIRE_AGENTS=1`. The
//! tests that run a CLI are `heavy_*` (`cargo nextest run --profile heavy`).
//!
//! What each pinned CLI did and needed here, beyond `/work/shared/reference/agent-clis.md`
//! (the runners are `claude::run_claude`, `codex::run_codex`, `aider::run_aider`):
//!
//! - Claude Code 2.1.332, as root, under a fresh empty `HOME` (no `~/.claude.json`: no
//!   onboarding, no prompt): `-p PROMPT --output-format stream-json --verbose
//!   --permission-mode acceptEdits --model M`, with `ANTHROPIC_BASE_URL` (no `/v1`),
//!   `ANTHROPIC_API_KEY`, `ANTHROPIC_MODEL` and the three `ANTHROPIC_DEFAULT_*_MODEL` set to M,
//!   and the four quiet variables. It sent exactly one request a turn (3 for read, edit,
//!   answer), all `POST /v1/messages?beta=true`, streamed, `x-api-key`, `anthropic-version:
//!   2023-06-01`; no side request (title, quota) and nothing else. Its `result` event's
//!   `usage.input_tokens`/`output_tokens` are the sums of what the replies reported, and
//!   `modelUsage` is keyed by the model id; `total_cost_usd` is not zero for an unknown model
//!   (it prices it at a default rate), so a loopback model's cost must not be taken from it.
//! - Codex 0.171.0: `codex exec --json --skip-git-repo-check --ephemeral --sandbox
//!   workspace-write PROMPT` with `HOME`, `CODEX_HOME=$HOME/.codex` (outside `/tmp`: the
//!   fixture lives under the target's temporary folder) holding the `config.toml` that
//!   `codex::codex_home` writes (`model`, `model_provider`, the provider entry with `env_key`,
//!   `wire_api = "responses"`, plugins, analytics, feedback, otel and the update check off),
//!   and the key in the variable `env_key` names. Its own `workspace-write` sandbox worked as
//!   root here. It sent `POST /v1/responses`, streamed, with a Bearer token, one request a
//!   turn (2: the patch, the answer), offering `exec_command` (argument `cmd`). Its JSON lines
//!   do not name the model (take it from the config); `turn.completed` carries `usage` with
//!   `input_tokens`, `cached_input_tokens`, `cache_write_input_tokens`, `output_tokens`,
//!   `reasoning_output_tokens`, the sums of the replies' usage.
//! - aider 0.86.2: the flags of agent-clis.md plus `--edit-format whole` (said, not guessed),
//!   `--no-pretty --no-fancy-input --map-tokens 0`, and the file to change named on the command
//!   line (so it is in the chat). One streamed `POST /v1/chat/completions`, with no
//!   `stream_options` (it does not ask for usage). Even with
//!   `LITELLM_LOCAL_MODEL_COST_MAP=True` it prints one failed HTTPS fetch of litellm's price
//!   map (a name-resolution error here, not fatal) and a note that git's user name is unset.
//!   Its `Tokens: N sent, M received.` line is its own tokenizer's count (665 and 29 where the
//!   server reported 800 and 120): it ignores the usage in the stream, so aider's tokens have to
//!   be metered at the model's side. The script has no busy turns for aider (one message is one
//!   request).

pub mod fixture;
pub mod model;

mod aider;
mod ceiling;
mod claude;
mod codex;
mod dispatched;
mod failures;
mod forum;
mod halt;
pub mod install;
mod live_progress;
mod wire;

use std::path::PathBuf;
use std::process::Command;

/// The variable that turns a missing agent CLI from a skip into a failure (CI sets it).
pub const REQUIRE_AGENTS: &str = "GIT_FORUM_REQUIRE_AGENTS";

/// The program named by `var` (`GIT_FORUM_TEST_CLAUDE`, `_CODEX`, `_AIDER`), or `None` with a
/// printed reason when it is unset or missing; a panic instead when `GIT_FORUM_REQUIRE_AGENTS=1`.
pub fn agent_cli(var: &str) -> Option<PathBuf> {
    let require = std::env::var(REQUIRE_AGENTS).is_ok_and(|v| v == "1");
    let why = match std::env::var_os(var) {
        Some(p) if !p.is_empty() && PathBuf::from(&p).is_file() => return Some(p.into()),
        Some(p) if !p.is_empty() => format!("{var}={} is not a file", p.to_string_lossy()),
        _ => format!("{var} is unset"),
    };
    if require {
        panic!(
            "{why}, and {REQUIRE_AGENTS}=1: run scripts/agent-clis install, then eval \"$(scripts/agent-clis env)\""
        );
    }
    eprintln!(
        "skipped: {why} (eval \"$(scripts/agent-clis env)\" names the installed CLIs; \
         {REQUIRE_AGENTS}=1 fails instead)"
    );
    None
}

/// `program` under coreutils' `timeout` (killed `secs` seconds in, and hard-killed 10 s after
/// that), with an empty environment but `PATH`, stdin closed: a hung CLI fails its test by
/// name instead of stalling the run.
pub fn timed(secs: u32, program: &std::path::Path) -> Command {
    let mut c = Command::new("timeout");
    c.args(["-k", "10", &secs.to_string()])
        .arg(program)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .stdin(std::process::Stdio::null());
    c
}

/// The JSON objects among `text`'s lines (a CLI's `--json` / `stream-json` output).
pub fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l.trim()).ok())
        .collect()
}
