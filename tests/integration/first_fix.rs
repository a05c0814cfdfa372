//! A user's first fix, as the README promises it: a small Python project with one failing
//! test, whose venv lives under the user's `HOME` with pytest in it and the project installed
//! editable (`pip install -e .`, offline from the wheelhouse `scripts/agent-clis install`
//! fills), fixed by git forum's built-in editing worker under the default sandbox against a
//! loopback model that plays a correct fix.
//!
//! The editable install is what makes this a test of the sandbox: the venv's finder maps
//! `calc` to the user's checkout, so a check that imported the checkout's code instead of the
//! task's worktree would fail the fix.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value as J, json};

use crate::edit_worker::{Stub, chat_answer, fleet, tool_turn};

/// The variable naming the wheelhouse of the project's packages (pytest, setuptools).
const WHEELS: &str = "GIT_FORUM_TEST_PROJECT_WHEELS";

const BROKEN: &str = "def add(a, b):\n    return a - b\n";
const FIXED: &str = "def add(a, b):\n    return a + b\n";

/// The wheelhouse, or `None` (the test is skipped) unless the agents are required.
fn wheels() -> Option<PathBuf> {
    match std::env::var_os(WHEELS) {
        Some(p) if Path::new(&p).join(".complete").is_file() => Some(p.into()),
        _ if std::env::var("GIT_FORUM_REQUIRE_AGENTS").is_ok_and(|v| v == "1") => panic!(
            "{WHEELS} is unset, and GIT_FORUM_REQUIRE_AGENTS=1: run scripts/agent-clis install, then eval \"$(scripts/agent-clis env)\""
        ),
        _ => {
            eprintln!("skipped: {WHEELS} is unset (scripts/agent-clis install fills it)");
            None
        }
    }
}

/// The user's machine: a temporary `HOME` with the project's venv, and the project.
pub(crate) struct Project {
    dir: tempfile::TempDir,
    pub(crate) home: PathBuf,
    pub(crate) root: PathBuf,
    pub(crate) venv: PathBuf,
}

impl Project {
    /// `calc/core.py` whose `add` subtracts, `tests/test_core.py`, a `pyproject.toml`; one
    /// commit; the venv under `HOME` with pytest and the project installed editable.
    pub(crate) fn new(wheels: &Path) -> Project {
        let dir = tempfile::Builder::new()
            .prefix("first-fix-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let home = dir.path().join("home");
        let root = dir.path().join("calc");
        let venv = home.join(".venvs/calc");
        for d in [&home, &root.join("calc"), &root.join("tests")] {
            std::fs::create_dir_all(d).unwrap();
        }
        let w = |p: &str, s: &str| std::fs::write(root.join(p), s).unwrap();
        w(
            "pyproject.toml",
            "[project]\nname = \"calc\"\nversion = \"0.1\"\n\n[tool.setuptools]\npackages = [\"calc\"]\n\n[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n",
        );
        w("calc/__init__.py", "from .core import add\n");
        w("calc/core.py", BROKEN);
        w(
            "tests/test_core.py",
            "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
        );
        w(".gitignore", "__pycache__/\n*.egg-info/\n.pytest_cache/\n");
        let p = Project {
            dir,
            home,
            root,
            venv,
        };
        p.ok(Command::new("git").args(["init", "-q", "-b", "main"]));
        p.ok(Command::new("git").args(["add", "."]));
        p.ok(Command::new("git").args(["commit", "-q", "-m", "calc: add, and its test"]));
        p.ok(Command::new("python3").args(["-m", "venv"]).arg(&p.venv));
        p.ok(Command::new(p.venv.join("bin/pip"))
            .args(["install", "-q", "--no-index", "--find-links"])
            .arg(wheels)
            .args(["pytest", "-e", "."]));
        p
    }

    /// `cmd` as the user's shell runs it in the project: the venv activated, nothing else of
    /// this process's environment.
    pub(crate) fn shell(&self, cmd: &mut Command) -> Output {
        cmd.current_dir(&self.root)
            .env_clear()
            .env("HOME", &self.home)
            .env(
                "PATH",
                format!(
                    "{}:/usr/local/bin:/usr/bin:/bin",
                    self.venv.join("bin").display()
                ),
            )
            .env("VIRTUAL_ENV", &self.venv)
            .env("LANG", "C.UTF-8")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "User")
            .env("GIT_AUTHOR_EMAIL", "user@example.invalid")
            .env("GIT_COMMITTER_NAME", "User")
            .env("GIT_COMMITTER_EMAIL", "user@example.invalid")
            .env("GIT_FORUM_CACHE_DIR", self.dir.path().join("cache"))
            .env("GIT_FORUM_STATE_DIR", self.dir.path().join("state"))
            // No local server of this machine's is probed by init.
            .env("GIT_FORUM_INIT_PORTS", "")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    }

    fn ok(&self, cmd: &mut Command) -> Output {
        let o = self.shell(cmd);
        assert!(o.status.success(), "{cmd:?}: {o:?}");
        o
    }

    /// `git forum ARGS` in the project.
    pub(crate) fn forum(&self, args: &[&str]) -> Output {
        self.shell(Command::new(env!("CARGO_BIN_EXE_git-forum")).args(args))
    }

    /// Whether the project's own test passes in the user's checkout.
    pub(crate) fn passes(&self) -> bool {
        self.shell(Command::new("pytest").arg("-q"))
            .status
            .success()
    }

    /// The runtime: every seat on the loopback model `stub`.
    pub(crate) fn runtime(&self, stub: &Stub) {
        std::fs::create_dir_all(self.root.join(".forum")).unwrap();
        std::fs::write(
            self.root.join(".forum/runtime.toml"),
            format!(
                "[runtime.default]\nchat_url = \"{}\"\nmodel = \"stub-coder\"\nis_local = true\n",
                stub.url("/v1/chat/completions")
            ),
        )
        .unwrap();
        std::fs::write(self.root.join(".git/info/exclude"), ".forum/\n").unwrap();
    }

    /// The entries of kind `kind`, with their bodies.
    pub(crate) fn payloads(&self, kind: &str) -> Vec<J> {
        let json = |args: &[&str]| -> J {
            serde_json::from_slice(&self.forum(args).stdout).unwrap_or(J::Null)
        };
        let all = json(&["log", "--json"]);
        all.as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["kind"] == kind)
            .map(|e| {
                let seq = e["seq"].as_u64().unwrap_or(0).to_string();
                json(&["show", &seq, "--payload", "--json"])["payload"].clone()
            })
            .collect()
    }
}

/// The worker's turns: read the code, write the fix, say what it did.
pub(crate) fn fixer(turn: usize, _: &J) -> (u16, J) {
    let a = match turn {
        0 => tool_turn("c1", "read_file", json!({"path": "calc/core.py"})),
        1 => tool_turn(
            "c2",
            "write_file",
            json!({"path": "calc/core.py", "content": FIXED}),
        ),
        _ => chat_answer(json!("Fixed add in calc/core.py: it subtracted."), None),
    };
    (200, a)
}

/// Under the default sandbox, the check `pytest -q` imports the task's worktree although the
/// venv's editable install names the user's checkout, so the fix passes and lands on the run
/// branch; the record lists the folder put on `PYTHONPATH`.
#[test]
fn heavy_an_editable_install_is_checked_against_the_worktree_under_the_default_sandbox() {
    let Some(wheels) = wheels() else { return };
    let p = Project::new(&wheels);
    assert!(!p.passes(), "the test fails before the fix");
    let stub = Stub::start(fleet(fixer));
    p.runtime(&stub);
    let o = p.forum(&[
        "submit",
        "--work",
        "--json",
        "--check",
        "pytest -q",
        "make the failing test in calc pass",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let checks = p.payloads("check");
    let t1: Vec<&J> = checks.iter().filter(|c| c["task"] == "T1").collect();
    assert!(
        !t1.is_empty() && t1.iter().all(|c| c["ok"] == true),
        "{checks:?}\n{stderr}"
    );
    let request = &p.payloads("request")[0];
    let listed = request["work"]["sandbox"].to_string();
    assert!(
        listed.contains(". of the worktree on PYTHONPATH (the project is installed editable)"),
        "{listed}"
    );
    // Nothing reached the user's checkout before apply.
    assert!(!p.passes());
}

/// The runtime `init` wrote, with its default executor (the seat every role and the worker
/// use) moved to the loopback model `stub`, as a user points it at their own endpoint.
fn on_the_stub(p: &Project, stub: &Stub) {
    let file = p.root.join(".forum/runtime.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    let mut doc: toml::Table = text.parse().unwrap();
    let mut default = toml::Table::new();
    default.insert("chat_url".into(), stub.url("/v1/chat/completions").into());
    default.insert("model".into(), "stub-coder".into());
    default.insert("is_local".into(), true.into());
    let runtime = doc
        .entry("runtime")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    runtime
        .as_table_mut()
        .unwrap()
        .insert("default".into(), toml::Value::Table(default));
    std::fs::write(&file, doc.to_string()).unwrap();
}

/// `init`, then the loopback model as every seat: what `init` recorded as the project's test
/// command, returned.
fn init_on_the_stub(p: &Project, stub: &Stub) -> String {
    let o = p.forum(&["init", "--json"]);
    assert!(o.status.success(), "{o:?}");
    let init: J = serde_json::from_slice(&o.stdout).unwrap();
    let check = init["test_command"]["command"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(check.contains("pytest"), "init picked {init}");
    on_the_stub(p, stub);
    check
}

/// The commits `forum/run-RUN` holds past the user's `main`.
fn run_commits(p: &Project, run: u64) -> Vec<String> {
    let o = p.shell(Command::new("git").args([
        "log",
        "--format=%H %s",
        &format!("main..forum/run-{run}"),
    ]));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The README's path, end to end: `init` finds the project's test command, `git forum fix`
/// under the default sandbox leaves exactly one commit on the run branch with a subject that
/// says what changed and its checks passed, exit 0; `diff` shows it and `apply --yes` brings
/// it in, after which the user's own test passes.
#[test]
fn heavy_the_readme_path_fixes_a_failing_test_on_the_first_try() {
    let Some(wheels) = wheels() else { return };
    let p = Project::new(&wheels);
    assert!(!p.passes());
    let stub = Stub::start(fleet(fixer));
    let check = init_on_the_stub(&p, &stub);
    let o = p.forum(&["fix", "--json", "make add in calc/core.py add"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let report: J = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["exit"]["name"], "answered", "{report}");
    let run = p.forum(&["runs", "--json"]);
    let runs: J = serde_json::from_slice(&run.stdout).unwrap();
    let seq = runs["runs"][0]["request_seq"].as_u64().unwrap();
    // One commit, saying what changed.
    let commits = run_commits(&p, seq);
    assert_eq!(commits.len(), 1, "{commits:?}");
    assert!(
        commits[0].ends_with(" Fixed add in calc/core.py: it subtracted."),
        "{commits:?}"
    );
    // Its checks are the test command init found, and they passed in the worktree.
    let checks = p.payloads("check");
    assert!(
        checks
            .iter()
            .any(|c| c["task"] == "T1" && c["command"] == check.as_str() && c["ok"] == true),
        "{checks:?}"
    );
    assert!(checks.iter().all(|c| c["ok"] == true), "{checks:?}");
    // No planner, validator or synthesizer was asked: only the worker's turns and the gate.
    assert!(p.payloads("plan").iter().all(|pl| pl["solo"] == true));
    assert!(p.payloads("verdict").is_empty());
    let diff = p.forum(&["diff", &seq.to_string(), "--stat"]);
    assert!(
        String::from_utf8_lossy(&diff.stdout).contains("calc/core.py"),
        "{diff:?}"
    );
    assert!(!p.passes(), "nothing reaches the checkout before apply");
    let applied = p.forum(&["apply", "--yes"]);
    assert!(applied.status.success(), "{applied:?}");
    assert!(p.passes(), "the user's own test passes after apply");
    let receipt = p.forum(&["receipt", &seq.to_string(), "--json"]);
    let receipt: J = serde_json::from_slice(&receipt.stdout).unwrap();
    assert_eq!(receipt["verification"]["verdict"], "MATCH", "{receipt}");
    p.ok(Command::new("git").args(["fsck", "--strict"]));
    let verified = p.forum(&["verify", "--deep"]);
    assert!(verified.status.success(), "{verified:?}");
}

/// The same path with a model that never calls a tool: the task ends after two replies, the
/// run exits non-zero with its outcome named, nothing is committed, and the receipt does not
/// say MATCH.
#[test]
fn heavy_a_model_that_never_calls_a_tool_ends_the_fix_non_zero_with_nothing_committed() {
    let Some(wheels) = wheels() else { return };
    let p = Project::new(&wheels);
    let stub = Stub::start(fleet(|_, _| {
        (
            200,
            chat_answer(
                json!("The team has successfully completed the validation."),
                None,
            ),
        )
    }));
    init_on_the_stub(&p, &stub);
    let o = p.forum(&["fix", "--json", "make add in calc/core.py add"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let code = o.status.code().unwrap_or(-1);
    assert!(code != 0, "{stderr}");
    let report: J = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        i64::from(code),
        report["exit"]["code"].as_i64().unwrap(),
        "{report}"
    );
    let name = report["exit"]["name"].as_str().unwrap();
    assert!(["failed", "nothing_delivered"].contains(&name), "{report}");
    // In text, the runs list names it too.
    let listed = p.forum(&["runs"]);
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains(name),
        "{listed:?}"
    );
    let results = p.payloads("result");
    let t1 = results.iter().find(|r| r["id"] == "T1").unwrap();
    assert_eq!(t1["error"], "no_tool_call", "{t1}");
    // Two replies without a tool call, then the task ended.
    let tool_turns = stub.tool_requests().len();
    assert_eq!(tool_turns, 2, "the worker was asked {tool_turns} times");
    let runs = p.forum(&["runs", "--json"]);
    let runs: J = serde_json::from_slice(&runs.stdout).unwrap();
    let seq = runs["runs"][0]["request_seq"].as_u64().unwrap();
    assert_eq!(runs["runs"][0]["state"], name, "{runs}");
    let has_branch = p
        .shell(Command::new("git").args([
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("forum/run-{seq}"),
        ]))
        .status
        .success();
    assert!(!has_branch || run_commits(&p, seq).is_empty());
    let receipt = p.forum(&["receipt", &seq.to_string(), "--json"]);
    let receipt: J = serde_json::from_slice(&receipt.stdout).unwrap();
    assert_ne!(receipt["verification"]["verdict"], "MATCH", "{receipt}");
    assert!(!p.passes());
}
