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
//! What each pinned CLI needed here, beyond docs/reference agent-clis.md:
//!
//! (filled in below as each CLI is driven)

pub mod fixture;
pub mod model;

mod aider;
mod claude;
mod codex;
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
        panic!("{why}, and {REQUIRE_AGENTS}=1: run scripts/agent-clis install, then eval \"$(scripts/agent-clis env)\"");
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
