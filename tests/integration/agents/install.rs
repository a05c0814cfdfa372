//! Each agent CLI installed into a test's own temporary `HOME` the way a user installs it there,
//! with no network: Claude Code and Codex by `npm install -g --prefix $HOME/.npm-global` from
//! the npm cache `scripts/agent-clis install` keeps, aider into a venv of its own
//! (`$HOME/.local/share/aider`) by `pip install --no-index` from the wheelhouse the script
//! downloaded. `scripts/agent-clis env` names the packages, the cache, the wheelhouse and the
//! Python the wheels fit.
//!
//! Measured here (two cores shared with five builds, load near 9): Claude Code 17 s, Codex
//! 15 s, aider about 150 s of wall time for 25 s of CPU (pip unpacks 108 wheels and compiles
//! their bytecode, as a user's install does; on an idle machine it is about 30 s). Each
//! install's time is printed by the test that makes it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use super::REQUIRE_AGENTS;

/// Which CLI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cli {
    Claude,
    Codex,
    Aider,
}

impl Cli {
    fn name(self) -> &'static str {
        match self {
            Cli::Claude => "claude",
            Cli::Codex => "codex",
            Cli::Aider => "aider",
        }
    }

    /// The variable naming its package (`NAME@VERSION`, or aider's `aider-chat==VERSION`).
    fn package_var(self) -> &'static str {
        match self {
            Cli::Claude => "GIT_FORUM_TEST_CLAUDE_PACKAGE",
            Cli::Codex => "GIT_FORUM_TEST_CODEX_PACKAGE",
            Cli::Aider => "GIT_FORUM_TEST_AIDER_PACKAGE",
        }
    }

    /// The variables an install of it needs.
    fn needs(self) -> &'static [&'static str] {
        match self {
            Cli::Claude | Cli::Codex => &["GIT_FORUM_TEST_NPM_CACHE"],
            Cli::Aider => &["GIT_FORUM_TEST_AIDER_WHEELS", "GIT_FORUM_TEST_AIDER_PYTHON"],
        }
    }
}

/// The value of `var`, or the reason it is missing.
fn var(var: &str) -> Result<String, String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Ok(v),
        _ => Err(format!("{var} is unset")),
    }
}

/// Installs `cli` under `home` as a user does and returns its program (in `$HOME/.npm-global/bin`
/// or `$HOME/.local/share/aider/bin`); `None` with a printed reason when the script's cache is
/// not there (a panic when `GIT_FORUM_REQUIRE_AGENTS=1`). A failed install panics with its
/// output.
pub fn user_install(cli: Cli, home: &Path) -> Option<PathBuf> {
    let mut missing = Vec::new();
    for v in std::iter::once(cli.package_var()).chain(cli.needs().iter().copied()) {
        if let Err(e) = var(v) {
            missing.push(e);
        }
    }
    if !missing.is_empty() {
        let why = missing.join(", ");
        if std::env::var(REQUIRE_AGENTS).is_ok_and(|v| v == "1") {
            panic!(
                "{why}, and {REQUIRE_AGENTS}=1: run scripts/agent-clis install, then eval \"$(scripts/agent-clis env)\""
            );
        }
        eprintln!("skipped: {why} (eval \"$(scripts/agent-clis env)\" names the install caches)");
        return None;
    }
    let package = var(cli.package_var()).ok()?;
    let start = Instant::now();
    let program = match cli {
        Cli::Claude | Cli::Codex => {
            let prefix = home.join(".npm-global");
            let mut c = Command::new("npm");
            c.args(["install", "-g", "--prefix"])
                .arg(&prefix)
                .args([
                    "--offline",
                    "--include=optional",
                    "--no-audit",
                    "--no-fund",
                    "--no-update-notifier",
                    "--cache",
                ])
                .arg(var("GIT_FORUM_TEST_NPM_CACHE").ok()?)
                .arg(&package);
            run(c, home, &format!("npm install -g {package}"));
            prefix.join("bin").join(cli.name())
        }
        Cli::Aider => {
            let venv = home.join(".local/share/aider");
            let mut c = Command::new(var("GIT_FORUM_TEST_AIDER_PYTHON").ok()?);
            c.args(["-m", "venv"]).arg(&venv);
            run(c, home, "python3 -m venv ~/.local/share/aider");
            let mut c = Command::new(venv.join("bin/pip"));
            c.args(["install", "-q", "--no-index", "--find-links"])
                .arg(var("GIT_FORUM_TEST_AIDER_WHEELS").ok()?)
                .arg(&package);
            run(c, home, &format!("pip install {package}"));
            venv.join("bin/aider")
        }
    };
    eprintln!(
        "installed {} under the test's HOME in {:.1} s",
        cli.name(),
        start.elapsed().as_secs_f64()
    );
    assert!(
        program.is_file(),
        "{} is not there after the install",
        program.display()
    );
    Some(program)
}

/// Runs an install step as the user of `home`, with no index or registry to reach.
fn run(mut c: Command, home: &Path, what: &str) {
    let o = c
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .env("PIP_NO_INDEX", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        o.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}
