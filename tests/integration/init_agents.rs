//! `init` finds what the user has: coding-agent CLIs on `PATH` (fake ones that answer
//! `--version` are enough to be found), provider keys, a local server that lists models (a
//! tiny listener here), or nothing; and the project's test command, which becomes the default
//! check of `--work` runs and is recorded like a `--check`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value as J;

use crate::common::{Repo, one_line_error};

/// A folder of fake agent CLIs named `names`, each answering `--version`.
fn fake_bin(names: &[&str]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for n in names {
        let p = d.path().join(n);
        std::fs::write(&p, format!("#!/bin/sh\necho '{n} 0.0.1 (fake)'\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    d
}

/// `git-forum` with only `bin` and the system folders on `PATH`, no provider key, no port
/// probed (unless the test says), and the local model's port pinned.
fn forum(repo: &Repo, bin: &Path) -> Command {
    let mut c = repo.forum();
    c.env(
        "PATH",
        format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()),
    )
    .env_remove("ANTHROPIC_API_KEY")
    .env_remove("OPENAI_API_KEY")
    .env("GIT_FORUM_INIT_PORTS", "")
    .env("GIT_FORUM_MODEL_PORT", "18191");
    c
}

fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(o: Output) -> J {
    serde_json::from_str(&ok(o)).unwrap()
}

fn runtime_toml(repo: &Repo) -> String {
    std::fs::read_to_string(repo.path().join(".forum/runtime.toml")).unwrap()
}

/// `runtime inspect --json` of the repository (with `bin` on `PATH`).
fn inspect(repo: &Repo, bin: &Path) -> J {
    json(
        forum(repo, bin)
            .args(["runtime", "inspect", "--json"])
            .output()
            .unwrap(),
    )
}

#[test]
fn init_writes_the_first_agent_cli_on_path_with_a_ceiling_and_says_how_to_change_it() {
    let repo = Repo::new("sha1");
    let bin = fake_bin(&["claude", "codex", "aider"]);
    let out = ok(forum(&repo, bin.path()).arg("init").output().unwrap());
    let claude = bin.path().join("claude");
    assert!(
        out.contains(&format!(
            "the worker is Claude Code ({}), stopped at $5 a run ([spend] max_cost_usd) (.forum/runtime.toml); another: `git forum init --force --agent NAME` (codex, aider, anthropic, openai, ollama, llama.cpp, lmstudio, local)",
            claude.display()
        )),
        "{out}"
    );
    let text = runtime_toml(&repo);
    assert!(
        text.contains("[runtime.default]\nclaude = true\nmodel = \"sonnet\"\n")
            && text.contains("[seats]\nworker = \"default\"\n")
            && text.contains("[spend]\nmax_cost_usd = 5.0\n"),
        "{text}"
    );
    let rt = inspect(&repo, bin.path());
    assert_eq!(rt["ready"], true, "{rt}");
    // The others, on request; --force is needed once the file exists.
    let o = forum(&repo, bin.path())
        .args(["init", "--agent", "aider"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    one_line_error(&o, "add --force");
    let j = json(
        forum(&repo, bin.path())
            .args(["init", "--force", "--agent", "codex", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(j["runtime"]["agent"], "codex", "{j}");
    assert_eq!(j["runtime"]["paid"], true);
    assert_eq!(j["runtime"]["max_cost_usd"], 5.0);
    let names: Vec<&str> = j["found"]["programs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["claude", "codex", "aider"]);
    assert!(runtime_toml(&repo).contains("codex = true"));
    // Without claude, codex comes first.
    let other = Repo::new("sha1");
    let bin2 = fake_bin(&["codex", "aider"]);
    let j = json(
        forum(&other, bin2.path())
            .args(["init", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(j["runtime"]["agent"], "codex", "{j}");
    // An agent that is not there is refused in one line, and nothing is written.
    let third = Repo::new("sha1");
    let o = forum(&third, bin2.path())
        .args(["init", "--agent", "claude"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let line = one_line_error(&o, "--agent claude: `claude` is not on PATH");
    assert!(line.contains("found: codex, aider"), "{line}");
    assert!(!third.path().join(".forum").exists());
}

#[test]
fn init_takes_a_provider_key_when_no_cli_is_there() {
    let repo = Repo::new("sha1");
    let bin = fake_bin(&[]);
    let j = json(
        forum(&repo, bin.path())
            .env("ANTHROPIC_API_KEY", "sk-ant-test-not-a-key")
            .env("OPENAI_API_KEY", "sk-test-not-a-key")
            .args(["init", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(j["runtime"]["agent"], "anthropic", "{j}");
    assert_eq!(
        j["found"]["keys"],
        serde_json::json!(["ANTHROPIC_API_KEY", "OPENAI_API_KEY"])
    );
    let text = runtime_toml(&repo);
    assert!(text.contains("api = \"anthropic\""), "{text}");
    assert!(
        !text.contains("sk-"),
        "a key's value is never written: {text}"
    );
    let other = Repo::new("sha1");
    let j = json(
        forum(&other, bin.path())
            .env("OPENAI_API_KEY", "sk-test-not-a-key")
            .args(["init", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(j["runtime"]["agent"], "openai", "{j}");
    let text = runtime_toml(&other);
    assert!(
        text.contains("chat_url = \"https://api.openai.com/v1/chat/completions\"")
            && text.contains("api_key_env = \"OPENAI_API_KEY\""),
        "{text}"
    );
    let rt = json(
        forum(&other, bin.path())
            .env("OPENAI_API_KEY", "sk-test-not-a-key")
            .args(["runtime", "inspect", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(rt["ready"], true, "{rt}");
    assert_eq!(rt["default"]["executor"]["kind"], "chat", "{rt}");
}

/// A server on a free loopback port that answers every request with `body` (200).
fn models_server(body: &'static str) -> (u16, std::thread::JoinHandle<()>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        // init probes once; runtime inspect does not call it.
        if let Ok((mut s, _)) = l.accept() {
            let mut buf = [0u8; 2048];
            let _ = s.read(&mut buf);
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = s.write_all(reply.as_bytes());
        }
    });
    (port, t)
}

#[test]
fn init_takes_a_local_server_that_lists_a_model() {
    let repo = Repo::new("sha1");
    let bin = fake_bin(&[]);
    let (port, t) = models_server(r#"{"object":"list","data":[{"id":"qwen2.5-coder:7b"}]}"#);
    let j = json(
        forum(&repo, bin.path())
            .env("GIT_FORUM_INIT_PORTS", port.to_string())
            .args(["init", "--json"])
            .output()
            .unwrap(),
    );
    t.join().unwrap();
    // The first port probed stands for Ollama's.
    assert_eq!(j["runtime"]["agent"], "ollama", "{j}");
    assert_eq!(j["runtime"]["paid"], false);
    assert_eq!(j["runtime"]["max_cost_usd"], J::Null);
    assert_eq!(j["found"]["servers"][0]["port"], port);
    let text = runtime_toml(&repo);
    assert!(
        text.contains(&format!(
            "chat_url = \"http://127.0.0.1:{port}/v1/chat/completions\"\nmodel = \"qwen2.5-coder:7b\"\nis_local = true\n"
        )) && !text.contains("[spend]"),
        "{text}"
    );
}

#[test]
fn with_nothing_found_init_sets_the_local_model_and_says_it_is_not_for_editing_code() {
    let repo = Repo::new("sha1");
    let bin = fake_bin(&[]);
    let out = ok(forum(&repo, bin.path()).arg("init").output().unwrap());
    let line = out
        .lines()
        .find(|l| l.starts_with("runs use the local model"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.starts_with("runs use the local model at http://127.0.0.1:18191/v1 (.forum/runtime.toml), which is for trying the record, not for editing code: for real work install Claude Code")
            && line.contains("git forum init --force")
            && line.contains("git forum model install && git forum model start"),
        "{line}"
    );
    let text = runtime_toml(&repo);
    assert!(
        text.contains("is_local = true") && text.contains("max_tokens = 1024"),
        "{text}"
    );
    let j = json(
        forum(&repo, bin.path())
            .args(["init", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(j["runtime"], J::Null, "kept: {j}");
    assert_eq!(
        j["found"],
        serde_json::json!({"programs": [], "keys": [], "servers": []})
    );
}

/// A project's files: each path and its text.
type Files = &'static [(&'static str, &'static str)];

/// One project per ecosystem: the files, the command init records, and what it read it from.
const ECOSYSTEMS: [(Files, &str, &str); 8] = [
    (
        &[
            ("pyproject.toml", "[tool.pytest.ini_options]\n"),
            ("tests/test_a.py", ""),
        ],
        "python3 -m pytest -q",
        "pyproject.toml",
    ),
    (
        &[("src/a.py", ""), ("tests/test_a.py", "")],
        "python3 -m pytest -q",
        "tests/",
    ),
    (
        &[("Cargo.toml", "[package]\nname = \"x\"\n")],
        "cargo test",
        "Cargo.toml",
    ),
    (
        &[("package.json", r#"{"scripts":{"test":"node --test"}}"#)],
        "npm test",
        "package.json",
    ),
    (&[("go.mod", "module x\n")], "go test ./...", "go.mod"),
    (
        &[("Makefile", "all:\n\tcc x.c\n\ntest: all\n\t./x\n")],
        "make test",
        "Makefile",
    ),
    (&[("tox.ini", "[tox]\nenvlist = py3\n")], "tox", "tox.ini"),
    (&[("noxfile.py", "import nox\n")], "nox", "noxfile.py"),
];

#[test]
fn init_records_each_ecosystems_test_command_as_the_default_check() {
    let bin = fake_bin(&[]);
    for (files, command, because) in ECOSYSTEMS {
        let repo = Repo::new("sha1");
        for (path, text) in files {
            let p: PathBuf = repo.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text).unwrap();
        }
        let out = ok(forum(&repo, bin.path()).arg("init").output().unwrap());
        assert!(
            out.contains(&format!(
                "checks: `{command}` (from {because}) is the default --check of --work runs"
            )),
            "{command}: {out}"
        );
        assert!(
            runtime_toml(&repo).contains(&format!("[work]\ndefault_checks = [\"{command}\"]\n")),
            "{command}"
        );
    }
    // Nothing to go by: said, and no [work] table.
    let repo = Repo::new("sha1");
    let out = ok(forum(&repo, bin.path()).arg("init").output().unwrap());
    assert!(out.contains("no test command found"), "{out}");
    assert!(!runtime_toml(&repo).contains("[work]"));
    // --check replaces what was detected.
    let j = json(
        forum(&repo, bin.path())
            .args(["init", "--force", "--check", "make check", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(
        j["runtime"]["default_checks"],
        serde_json::json!(["make check"])
    );
}

#[test]
fn a_work_run_with_no_check_runs_and_records_the_test_command_init_found() {
    let repo = Repo::new("sha1");
    crate::work_run::setup(&repo);
    let bin = fake_bin(&[]);
    let out = ok(forum(&repo, bin.path()).arg("init").output().unwrap());
    assert!(
        out.contains("checks: `python3 -m unittest -q` (from test_calc.py)"),
        "{out}"
    );
    let m = crate::work_run::one_task_model(
        &repo,
        "model",
        "merge",
        "    sed -i 's/return a - b/return a + b/' calc.py; echo 'fixed add'",
    );
    // The user's own PATH: the checks need python3 wherever it lives.
    let j = repo.forum_json(&[
        "submit",
        "--work",
        "--no-sandbox",
        "--cmd",
        &m,
        "make the failing test in calc pass",
    ]);
    let answer = j["answer"].as_str().unwrap();
    assert!(
        answer.contains("- T1: merged (1 file, +1 -1: calc.py); checks 1/1 passed"),
        "{answer}"
    );
    let request = &crate::work_run::payloads(&repo, "request")[0].1;
    assert_eq!(
        request["work"]["checks"],
        serde_json::json!(["python3 -m unittest -q"]),
        "{request}"
    );
    let check = &crate::work_run::payloads(&repo, "check")[0].1;
    assert_eq!(check["command"], "python3 -m unittest -q", "{check}");
    assert_eq!(check["ok"], true, "{check}");
}

/// The real Claude Code on `PATH` is found by `init` and its seat is ready.
#[test]
fn heavy_init_finds_the_real_claude_code_on_path() {
    let Some(claude) = crate::agents::agent_cli("GIT_FORUM_TEST_CLAUDE") else {
        return;
    };
    let repo = Repo::new("sha1");
    let bin = claude.parent().unwrap();
    let j = json(forum(&repo, bin).args(["init", "--json"]).output().unwrap());
    assert_eq!(j["runtime"]["agent"], "claude", "{j}");
    let rt = inspect(&repo, bin);
    assert_eq!(rt["ready"], true, "{rt}");
}
