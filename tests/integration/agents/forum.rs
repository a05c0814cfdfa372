//! The real agent CLIs as git forum's workers: `git forum submit --work --sandbox` in the
//! fixture project, the worker seat a preset (`claude`, `codex`, `aider` in
//! `.forum/runtime.toml`), a scripted orchestrator for the plan, the gate and the answer, and
//! the loopback model behind git forum's metering forwarder. The change lands on the run
//! branch with its check passed in the project's own venv, the task records the model and the
//! tokens, the egress record says what was metered, and the user's settings are unchanged.
//!
//! Each agent is installed into the fixture's temporary `HOME` first, as a user installs it
//! ([`super::install`]), and runs from there: under the sandbox, `$HOME` is not shown, so
//! git forum has to find it on the host and bind its install tree.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use super::fixture::Fixture;
use super::install::{Cli, user_install};
use super::model::{ModelServer, Usage};

pub(super) const MODEL: &str = "loopback-model";

/// The orchestrator: a plan of one task, a merge at the gate, a pass from the judge, an answer.
pub(super) fn orchestrator(dir: &Path) -> String {
    let path = dir.join("orchestrator.sh");
    let plan = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"Fix add in calc.py so that test_calc passes.","depends_on":[],"done_when":["the tests pass"]}]}"#;
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{plan}' ;;\n  *\"Decide whether to ship\"*) echo '{{\"decision\":\"merge\",\"reason\":\"scripted\"}}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *) echo 'Fixed add.' ;;\nesac\n"
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// `git forum submit --work --sandbox` in the fixture with `preset` as the worker seat, the
/// agent's program folder on `PATH` after the project's venv, and `env` for the agent.
pub(super) fn submit(f: &Fixture, preset: &str, program: &Path, env: &[(&str, String)]) -> Output {
    submit_command(f, preset, program.parent(), env, "", &[])
        .output()
        .unwrap()
}

/// [`submit`] with `--progress`, so the run's progress lines are on its stderr.
pub(super) fn submit_progress(
    f: &Fixture,
    preset: &str,
    program: &Path,
    env: &[(&str, String)],
) -> Output {
    submit_command(f, preset, program.parent(), env, "", &["--progress"])
        .output()
        .unwrap()
}

/// The agent's tool calls on the run's progress (`T1 read calc.py`, `T1 edit calc.py`),
/// read from its own output as it ran.
fn tool_lines(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .map(str::trim)
        .filter(|l| {
            ["T1 read ", "T1 edit ", "T1 run ", "T1 search "]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .map(str::to_string)
        .collect()
}

/// The command [`submit`] runs, with `program_dir` on `PATH` (`None`: the agent is not
/// installed), `seat` added to the worker seat's table (`, timeout_seconds = 20`), and `args`
/// before the request.
pub(super) fn submit_command(
    f: &Fixture,
    preset: &str,
    program_dir: Option<&Path>,
    env: &[(&str, String)],
    seat: &str,
    args: &[&str],
) -> std::process::Command {
    let forum = f.project.join(".forum");
    std::fs::create_dir_all(&forum).unwrap();
    // aider reaches an OpenAI-compatible endpoint through litellm's `openai/` prefix.
    let model = if preset == "aider" {
        format!("openai/{MODEL}")
    } else {
        MODEL.to_string()
    };
    std::fs::write(
        forum.join("runtime.toml"),
        format!(
            "[runtime.default]\ncmd = \"{}\"\n\n[seats]\nworker = {{ {preset} = true, model = \"{model}\"{seat} }}\n",
            orchestrator(f.dir())
        ),
    )
    .unwrap();
    std::fs::write(f.project.join(".git/info/exclude"), ".forum/\n").unwrap();
    let path = match program_dir {
        Some(dir) => format!(
            "{}:{}:/usr/local/bin:/usr/bin:/bin",
            f.venv.join("bin").display(),
            dir.display()
        ),
        None => format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            f.venv.join("bin").display()
        ),
    };
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_git-forum"));
    cmd.current_dir(&f.project).env_clear();
    fixture_env(&mut cmd, f, &path)
        .args([
            "submit",
            "--json",
            "--work",
            "--sandbox",
            "--check",
            "python -m unittest -q",
        ])
        .args(args)
        .arg("fix add in calc.py")
        .stdin(std::process::Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// The environment every `git forum` of an agent test runs in: the fixture's `HOME`, `PATH`
/// (the project's venv and the agent's folder first) and venv, no user git configuration, a
/// fixed identity, and git forum's cache and state inside the fixture.
pub(super) fn fixture_env<'c>(
    cmd: &'c mut std::process::Command,
    f: &Fixture,
    path: &str,
) -> &'c mut std::process::Command {
    cmd.env("HOME", &f.home)
        .env("PATH", path)
        .env("VIRTUAL_ENV", &f.venv)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .env("GIT_FORUM_CACHE_DIR", f.dir().join("cache"))
        .env("GIT_FORUM_STATE_DIR", f.dir().join("state"))
}

/// git forum's JSON answer to `args` in the fixture.
pub(super) fn forum_json(f: &Fixture, args: &[&str]) -> Value {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_git-forum"))
        .current_dir(&f.project)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_FORUM_CACHE_DIR", f.dir().join("cache"))
        .env("GIT_FORUM_STATE_DIR", f.dir().join("state"))
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&o.stderr)))
}

/// The ledger's payloads of `kind`, oldest first.
pub(super) fn payloads(f: &Fixture, kind: &str) -> Vec<Value> {
    let mut all = forum_json(f, &["log"])
        .as_array()
        .cloned()
        .unwrap_or_default();
    all.sort_by_key(|e| e["seq"].as_u64().unwrap_or(0));
    all.iter()
        .filter(|e| e["kind"] == kind)
        .map(|e| {
            let seq = e["seq"].as_u64().unwrap_or(0).to_string();
            forum_json(f, &["show", &seq, "--payload"])["payload"].clone()
        })
        .collect()
}

/// What every agent's run must show.
fn assert_fixed_under_the_record(f: &Fixture, o: &Output, server: &ModelServer) -> Value {
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stderr}\nthe model saw: {}\nresults: {:?}",
        server.summary(),
        payloads(f, "result")
    );
    let checks = payloads(f, "check");
    assert!(
        !checks.is_empty() && checks.iter().all(|c| c["ok"] == true),
        "{checks:?}"
    );
    let change = payloads(f, "change");
    assert!(change[0]["commit"].is_string(), "{change:?}");
    let files = change[0]["files"].to_string();
    assert!(files.contains("calc.py"), "{files}");
    let request = &payloads(f, "request")[0];
    let sandbox = &request["work"]["sandbox"];
    assert_eq!(sandbox["confined"], true, "{sandbox}");
    assert_eq!(sandbox["net"], false, "{sandbox}");
    assert!(
        sandbox["bound"]
            .to_string()
            .contains(&f.venv.display().to_string()),
        "{sandbox}"
    );
    let result = payloads(f, "result")
        .into_iter()
        .find(|r| r["id"] == "T1")
        .expect("T1's result");
    assert_eq!(result["ok"], true, "{result}");
    assert!(
        result["egress"]["metered"]["requests"]
            .as_u64()
            .unwrap_or(0)
            >= 1,
        "{result}"
    );
    // The user's checkout is untouched: the fix is on the run branch.
    assert!(!f.fixed(), "the user's calc.py must not change");
    result
}

#[test]
fn heavy_claude_code_fixes_the_fixture_under_git_forum() {
    let f = Fixture::new();
    let Some(claude) = user_install(Cli::Claude, &f.home) else {
        return;
    };
    let mut script = f.script(Usage {
        input: 1200,
        output: 300,
    });
    script.root = Default::default();
    let server = ModelServer::start(script);
    let settings = f.home.join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, "{\"includeCoAuthoredBy\": false}\n").unwrap();
    let o = submit_progress(
        &f,
        "claude",
        &claude,
        &[
            ("ANTHROPIC_BASE_URL", server.url()),
            ("ANTHROPIC_API_KEY", "sk-ant-loopback".into()),
            ("ANTHROPIC_MODEL", MODEL.into()),
        ],
    );
    let result = assert_fixed_under_the_record(&f, &o, &server);
    // Its tool calls were on the run's progress, read from its stream-json as it ran.
    assert_eq!(
        tool_lines(&o),
        ["T1 read calc.py", "T1 edit calc.py"],
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(result["model"], MODEL, "{result}");
    assert!(
        result["usage"].to_string().contains("1200")
            || result["usage"]["prompt_tokens"].as_u64().unwrap_or(0) > 0,
        "{result}"
    );
    assert_eq!(
        std::fs::read_to_string(&settings).unwrap(),
        "{\"includeCoAuthoredBy\": false}\n"
    );
}

#[test]
fn heavy_codex_fixes_the_fixture_under_git_forum() {
    let f = Fixture::new();
    let Some(codex) = user_install(Cli::Codex, &f.home) else {
        return;
    };
    let server = ModelServer::start(f.script(Usage {
        input: 1000,
        output: 200,
    }));
    let o = submit_progress(
        &f,
        "codex",
        &codex,
        &[
            ("OPENAI_BASE_URL", server.v1()),
            ("OPENAI_API_KEY", "sk-loopback-codex".into()),
        ],
    );
    let result = assert_fixed_under_the_record(&f, &o, &server);
    assert!(
        result["usage"]["prompt_tokens"].as_u64().unwrap_or(0) > 0,
        "{result}"
    );
    // Its patch (an `apply_patch` it ran) is the file change its JSON lines report.
    assert_eq!(
        tool_lines(&o),
        ["T1 edit calc.py"],
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn heavy_aider_fixes_the_fixture_under_git_forum() {
    let f = Fixture::new();
    let Some(aider) = user_install(Cli::Aider, &f.home) else {
        return;
    };
    let server = ModelServer::start(f.script(Usage {
        input: 800,
        output: 120,
    }));
    let o = submit_progress(
        &f,
        "aider",
        &aider,
        &[
            ("OPENAI_API_BASE", server.v1()),
            ("OPENAI_API_KEY", "sk-loopback-aider".into()),
        ],
    );
    assert_fixed_under_the_record(&f, &o, &server);
    // Its `Applied edit to calc.py` line, as it printed it.
    assert_eq!(
        tool_lines(&o),
        ["T1 edit calc.py"],
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
