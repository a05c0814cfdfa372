//! The coding-agent presets through the binary: stand-ins named `claude`,
//! `codex` and `aider` on PATH behave like the real CLIs (they log their arguments and working
//! directory, refuse to edit unless their flags allow it, edit `calc.py`, print output in the
//! CLI's own format, and exit non-zero on failure). Each preset runs a `--work` task in the
//! task's worktree; the tests check the exact arguments, the working directory, the model the
//! run recorded (the one the CLI reported) and the change git forum committed.

use serde_json::{Value as J, json};

use crate::common::{Repo, on_each_kind};
use crate::work_run::{entries, payloads, setup};

const CHECK: &str = "python3 -m unittest -q";

/// One stand-in for the three CLIs (it is told which by its name).
const STAND_IN: &str = r#"#!/usr/bin/env python3
import json, os, subprocess, sys
name = os.path.basename(sys.argv[0])
args = sys.argv[1:]
prompt, flags = args[-1], args[:-1]
cwd = os.getcwd()
# Beside the stand-in, since a worker gets no variable of the test's environment.
here = os.path.dirname(os.path.abspath(sys.argv[0]))
with open(os.path.join(here, "..", "presets.log"), "a") as f:
    f.write(json.dumps({"cli": name, "argv": flags, "cwd": cwd}) + "\n")
def value(flag):
    return flags[flags.index(flag) + 1] if flag in flags else None
def die(msg, code=2):
    sys.stderr.write(f"{name}: {msg}\n")
    sys.exit(code)
# What each CLI accepts at all.
if name == "claude" and (flags[:1] != ["-p"] or value("--output-format") != "stream-json"
                         or "--verbose" not in flags):
    die("expected -p ... --output-format stream-json --verbose")
if name == "codex" and flags[:2] != ["exec", "--json"]:
    die("expected exec --json")
if name == "aider" and flags[-1:] != ["--message"]:
    die("expected --message PROMPT last")
# Models: an alias resolves to a full name, as the real CLIs report it.
aliases = {"sonnet": "claude-sonnet-4-5-20250929"}
defaults = {"claude": "claude-opus-4-1-20250805", "codex": "gpt-5-codex",
            "aider": "anthropic/claude-sonnet-4-20250514"}
model = aliases.get(value("--model"), value("--model")) or defaults[name]
task = "You work in the git worktree" in prompt
if "Break this request" in prompt:
    answer = json.dumps({"tasks": [{"id": "T1", "agent": "backend",
        "instruction": "make add in calc.py add", "depends_on": [], "done_when": ["the tests pass"]}]})
elif "Decide whether to ship" in prompt:
    answer = '{"decision":"merge","reason":"scripted"}'
elif "Judge one task" in prompt:
    answer = '{"decision":"pass","score":0.9,"reason":"ok"}'
elif "Write the answer" in prompt:
    answer = "Fixed calc."
elif task:
    may_edit = {
        "claude": value("--permission-mode") == "acceptEdits" and value("--add-dir") == cwd,
        "codex": value("--sandbox") == "workspace-write" and value("--cd") == cwd,
        "aider": value("--chat-mode") != "ask",
    }[name]
    if os.path.exists(os.path.join(here, "fail")):
        if name == "claude":
            print(json.dumps({"type": "result", "subtype": "error_during_execution",
                              "is_error": True, "result": "the API is overloaded"}))
        die("the API is overloaded", 1)
    if not may_edit:
        die("not allowed to edit files here", 1)
    src = open("calc.py").read()
    open("calc.py", "w").write(src.replace("return a - b", "return a + b"))
    if name == "aider":
        os.makedirs(".aider.tags.cache.v4", exist_ok=True)
        open(".aider.tags.cache.v4/cache.db", "w").write("tags")
        if "--no-auto-commits" not in flags:
            subprocess.run(["git", "commit", "-qam", "aider: fix add"], check=True)
    answer = "fixed add in calc.py"
else:
    die("unexpected prompt")
if name == "claude":
    print(json.dumps({"type": "system", "subtype": "init", "model": model}))
    print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "permission_denials": [],
        "result": answer, "session_id": "s1", "total_cost_usd": 0.01,
        "usage": {"input_tokens": 120, "output_tokens": 30},
        "modelUsage": {model: {"inputTokens": 120, "outputTokens": 30}}}))
elif name == "codex":
    sys.stderr.write(f"OpenAI Codex v0.50.0 (research preview)\n--------\nworkdir: {cwd}\n"
                     f"model: {model}\nprovider: openai\napproval: never\n"
                     f"sandbox: {value('--sandbox')}\n--------\nuser\n{prompt[:40]}\n")
    print(json.dumps({"type": "thread.started", "thread_id": "t"}))
    print(json.dumps({"type": "item.completed", "item": {"id": "i0", "type": "agent_message", "text": answer}}))
    print(json.dumps({"type": "turn.completed", "usage": {"input_tokens": 50, "cached_input_tokens": 0, "output_tokens": 7}}))
else:
    print(f"Aider v0.86.1\nMain model: {model} with diff edit format\n"
          f"Git repo: .git with 3 files\nRepo-map: using 1024 tokens, auto refresh\n")
    print(answer)
"#;

/// The three stand-ins in `REPO/bin` (excluded through .git/info/exclude, like the log), and
/// the PATH that finds them first.
fn stand_ins(repo: &Repo) -> String {
    use std::os::unix::fs::PermissionsExt;
    let bin = repo.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in ["claude", "codex", "aider"] {
        let p = bin.join(name);
        std::fs::write(&p, STAND_IN).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::write(
        repo.git_dir().join("info").join("exclude"),
        "bin/\npresets.log\n",
    )
    .unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn log(repo: &Repo) -> Vec<J> {
    std::fs::read_to_string(repo.path().join("presets.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `git forum submit --work --check CHECK FLAGS... REQUEST --json` with the stand-ins.
fn submit(repo: &Repo, path: &str, flags: &[&str], env: &[(&str, &str)]) -> (bool, J) {
    // The stand-ins log into the user's tree, which a sandbox keeps read-only; confinement
    // itself is tests/integration/sandbox.rs's, and `a_sandboxed_preset_keeps_the_network`'s.
    let mut args = vec!["submit", "--json", "--work", "--check", CHECK];
    if !flags.contains(&"--sandbox") {
        args.push("--no-sandbox");
    }
    args.extend_from_slice(flags);
    args.push("make the failing test in calc pass");
    let o = repo
        .forum()
        .env("PATH", path)
        .envs(env.iter().copied())
        .args(&args)
        .output()
        .unwrap();
    let j = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o.status.success(), j)
}

/// The calls a CLI got: (argv without the prompt, cwd), with the worktree's path as `WT`.
fn calls(repo: &Repo) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let root = repo.path().canonicalize().unwrap();
    let (mut task, mut control) = (Vec::new(), Vec::new());
    for c in log(repo) {
        let cwd = std::path::PathBuf::from(c["cwd"].as_str().unwrap());
        let argv: Vec<String> = c["argv"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                let a = a.as_str().unwrap();
                if a == cwd.to_str().unwrap() && cwd != root {
                    "WT".to_string()
                } else {
                    a.to_string()
                }
            })
            .collect();
        // Python's getcwd is the physical path, as canonicalize gives for the repository.
        if cwd == root {
            control.push(argv);
        } else {
            // The task ran in its worktree: under git forum's cache, outside the git dir.
            let work = repo.cache_dir().canonicalize().unwrap().join("work");
            assert!(cwd.starts_with(work), "{cwd:?}");
            task.push(argv);
        }
    }
    (task, control)
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The one change: committed by git forum from the worktree, calc.py fixed, nothing else.
fn check_change(repo: &Repo, j: &J) -> String {
    let answer = j["answer"].as_str().unwrap();
    assert!(
        answer.contains("- T1: merged (1 file, +1 -1: calc.py); checks 1/1 passed"),
        "{answer}"
    );
    let change = &payloads(repo, "change")[0].1;
    assert_eq!(
        change["files"],
        json!([{"path": "calc.py", "status": "M", "added": 1, "removed": 1}])
    );
    let commit = change["commit"].as_str().unwrap().to_string();
    // The commit's parent is the base (the agent committed nothing itself), its message is
    // git forum's with the trailers, and its tree holds no agent state.
    assert_eq!(
        repo.git_ok(&["rev-parse", &format!("{commit}^")]),
        repo.git_ok(&["rev-parse", "main"])
    );
    let msg = repo.git_ok(&["log", "-1", "--format=%B", &commit]);
    assert!(
        msg.contains("\n\nTask T1 on lane ") && msg.contains("Forum-Run: 0"),
        "{msg}"
    );
    let mut files: Vec<String> = repo
        .git_ok(&["ls-tree", "-r", "--name-only", &commit])
        .lines()
        .map(str::to_string)
        .collect();
    files.sort();
    assert_eq!(files, [".gitignore", "calc.py", "test_calc.py"]);
    let fixed = repo.git_ok(&["show", &format!("{commit}:calc.py")]);
    assert!(fixed.contains("return a + b"), "{fixed}");
    let checks = payloads(repo, "check");
    assert!(checks.iter().all(|(_, c)| c["ok"] == true), "{checks:?}");
    assert_eq!(repo.forum_json(&["verify", "--deep"])["ok"], true);
    commit
}

/// The task's `result` entry.
pub(crate) fn task_result(repo: &Repo) -> J {
    payloads(repo, "result")
        .into_iter()
        .map(|(_, p)| p)
        .find(|p| p["id"] == "T1")
        .expect("a result for T1")
}

#[test]
fn claude_edits_the_worktree_with_file_tools_and_records_the_reported_model() {
    on_each_kind(|repo| {
        setup(repo);
        let path = stand_ins(repo);
        let (ok, j) = submit(repo, &path, &["--claude", "--model", "sonnet"], &[]);
        assert!(ok, "{j}");
        let (task, control) = calls(repo);
        assert_eq!(
            task,
            [strs(&[
                "-p",
                "--model",
                "sonnet",
                "--add-dir",
                "WT",
                "--allowedTools",
                "Read",
                "Edit",
                "Write",
                "Glob",
                "Grep",
                // The run's check, and no other shell command.
                "Bash(python3 -m unittest -q)",
                "--permission-mode",
                "acceptEdits",
                "--output-format",
                "stream-json",
                "--verbose",
            ])]
        );
        assert!(!control.is_empty());
        for c in &control {
            assert_eq!(
                c,
                &strs(&[
                    "-p",
                    "--model",
                    "sonnet",
                    "--output-format",
                    "stream-json",
                    "--verbose"
                ])
            );
        }
        // The model the CLI reported (the alias resolved), not the flag's alias.
        let r = task_result(repo);
        assert_eq!(r["model"], "claude-sonnet-4-5-20250929", "{r}");
        assert_eq!(r["ok"], true);
        let commit = check_change(repo, &j);
        let author = repo.git_ok(&["log", "-1", "--format=%an", &commit]);
        assert!(author.starts_with("backend"), "{author}");
    });
}

#[test]
fn codex_runs_exec_in_a_workspace_write_sandbox_and_records_its_header_model() {
    on_each_kind(|repo| {
        setup(repo);
        let path = stand_ins(repo);
        let (ok, j) = submit(repo, &path, &["--codex"], &[]);
        assert!(ok, "{j}");
        let (task, control) = calls(repo);
        let quiet = [
            "exec",
            "--json",
            "--color",
            "never",
            "--skip-git-repo-check",
            "-c",
            "analytics.enabled=false",
            "-c",
            "feedback.enabled=false",
            "-c",
            "otel.exporter=\"none\"",
            "-c",
            "check_for_update_on_startup=false",
            "--disable",
            "plugins",
        ];
        let mut edit = strs(&quiet);
        edit.extend(strs(&["--sandbox", "workspace-write", "--cd", "WT"]));
        assert_eq!(task, [edit]);
        let mut ask = strs(&quiet);
        ask.extend(strs(&["--sandbox", "read-only"]));
        for c in &control {
            assert_eq!(c, &ask);
        }
        let r = task_result(repo);
        assert_eq!(r["model"], "gpt-5-codex", "{r}");
        assert_eq!(r["output"], "fixed add in calc.py");
        // The tokens Codex reported with its turn.
        assert_eq!(r["usage"]["completion_tokens"], 7, "{r}");
        check_change(repo, &j);
    });
}

#[test]
fn aider_edits_without_committing_and_leaves_no_state_in_the_change() {
    on_each_kind(|repo| {
        setup(repo);
        let path = stand_ins(repo);
        let (ok, j) = submit(repo, &path, &["--aider"], &[]);
        assert!(ok, "{j}");
        let (task, control) = calls(repo);
        let common = [
            "--yes-always",
            "--no-auto-commits",
            "--no-dirty-commits",
            "--no-gitignore",
            "--no-git",
            "--no-fancy-input",
            "--no-check-update",
            "--no-analytics",
            "--no-show-model-warnings",
            "--no-detect-urls",
            "--no-show-release-notes",
            "--no-pretty",
            "--chat-history-file",
            "/dev/null",
            "--input-history-file",
            "/dev/null",
        ];
        let mut edit = strs(&common);
        edit.push("--message".into());
        assert_eq!(task, [edit]);
        let mut ask = strs(&common);
        ask.extend(strs(&["--chat-mode", "ask", "--message"]));
        for c in &control {
            assert_eq!(c, &ask);
        }
        let r = task_result(repo);
        assert_eq!(r["model"], "anthropic/claude-sonnet-4-20250514", "{r}");
        // The banner is not part of the answer.
        assert_eq!(r["output"], "fixed add in calc.py");
        check_change(repo, &j);
    });
}

#[test]
fn a_cli_that_fails_fails_its_task_with_the_reason_witnessed() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let path = stand_ins(&repo);
    // (How the run's exit code says a task failed is the submit's own business.)
    // The stand-ins fail while `bin/fail` exists.
    std::fs::write(repo.dir.path().join("bin").join("fail"), "").unwrap();
    let (_, j) = submit(&repo, &path, &["--claude"], &[]);
    assert!(j["answer"].is_string() || j["error"].is_string(), "{j}");
    let r = task_result(&repo);
    assert_eq!(r["ok"], false, "{r}");
    assert_eq!(r["error"], "exit", "{r}");
    assert!(r["output"].as_str().unwrap().contains("overloaded"), "{r}");
    // Nothing was committed for it, and the record verifies.
    assert!(
        payloads(&repo, "change").is_empty() || payloads(&repo, "change")[0].1["commit"].is_null()
    );
    assert!(!entries(&repo).is_empty());
    assert_eq!(repo.forum_json(&["verify", "--deep"])["ok"], true);
}

#[test]
fn a_sandboxed_preset_gets_no_network_of_its_own() {
    // An agent CLI reaches its model through git forum's metering forwarder and proxy, bridged
    // into the sandbox; the sandbox itself keeps no network (the stand-in cannot write its log
    // under the sandbox, which is not what this test is about).
    let repo = Repo::new("sha1");
    setup(&repo);
    let path = stand_ins(&repo);
    let _ = submit(&repo, &path, &["--claude", "--sandbox"], &[]);
    let sandbox = payloads(&repo, "request")[0].1["work"]["sandbox"].clone();
    assert_eq!(sandbox["confined"], true, "{sandbox}");
    assert_eq!(sandbox["net"], false, "{sandbox}");
}

#[test]
fn two_presets_at_once_are_refused_in_one_line() {
    let repo = Repo::new("sha1");
    let o = repo
        .forum()
        .args(["submit", "--claude", "--codex", "do it"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("--claude and --codex") && err.contains("keep one"),
        "{err}"
    );
    let o = repo
        .forum()
        .args([
            "runtime", "inspect", "--json", "--aider", "--model", "gpt-4o",
        ])
        .output()
        .unwrap();
    let j: J = serde_json::from_slice(&o.stdout).unwrap();
    let text = j.to_string();
    assert!(text.contains("aider: aider --model gpt-4o"), "{text}");
}

#[test]
fn the_runtime_config_names_presets_for_a_seat() {
    let repo = Repo::new("sha1");
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        "[runtime.default]\ncmd = \"sh\"\n\n[seats]\nworker = { codex = true, model = \"gpt-5-codex\" }\norchestrator = { aider = true }\n",
    )
    .unwrap();
    let j = repo.forum_json(&["runtime", "inspect"]);
    let text = j.to_string();
    assert!(
        text.contains("codex: codex exec --json --model gpt-5-codex"),
        "{text}"
    );
    assert!(text.contains("aider: aider --yes-always"), "{text}");
    // Two presets in one table is the same refusal as any two executors.
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        "[runtime.default]\nclaude = true\naider = true\n",
    )
    .unwrap();
    let o = repo.forum().args(["runtime", "inspect"]).output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("claude and aider are both set"), "{err}");
}
