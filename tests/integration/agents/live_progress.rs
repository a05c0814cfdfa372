//! An agent CLI's tool calls on the run's progress while it runs: a stand-in named `claude`
//! (or `codex`) on PATH prints its own format's events one line at a time, and halts after
//! its edit until the test has seen `T1 edit calc.py` on git forum's stderr (or in an MCP
//! client's progress notifications). So the line must come while the agent still runs, not
//! from its output read after it exits. `--quiet` shows none of it.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use serde_json::{Value as J, json};

use crate::common::Repo;
use crate::work_run::setup;

/// One stand-in for both CLIs (told which by its name): the control prompts get their fixed
/// answers; the task prints a read, a failed test run and an edit, waits for `go` beside its
/// folder (a minute at most, then fails), fixes calc.py and reports.
const STAND_IN: &str = r#"#!/usr/bin/env python3
import json, os, sys, time
name = os.path.basename(sys.argv[0])
prompt = sys.argv[-1]
here = os.path.dirname(os.path.abspath(sys.argv[0]))
cwd = os.getcwd()
def say(event):
    print(json.dumps(event), flush=True)
if "Break this request" in prompt:
    answer = json.dumps({"tasks": [{"id": "T1", "agent": "backend",
        "instruction": "make add in calc.py add", "depends_on": [], "done_when": ["the tests pass"]}]})
elif "Decide whether to ship" in prompt:
    answer = '{"decision":"merge","reason":"scripted"}'
elif "Judge one task" in prompt:
    answer = '{"decision":"pass","score":0.9,"reason":"ok"}'
elif "You work in the git worktree" in prompt:
    calc = os.path.join(cwd, "calc.py")
    if name == "claude":
        say({"type": "system", "subtype": "init", "cwd": cwd, "model": "m"})
        say({"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "t1",
            "name": "Read", "input": {"file_path": calc}}]}})
        say({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1",
            "content": "def add(a, b):"}]}})
        say({"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "t2",
            "name": "Bash", "input": {"command": "python3 -m unittest -q"}}]}})
        say({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t2",
            "is_error": True, "content": "FAILED (failures=1)"}]}})
        say({"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "t3",
            "name": "Edit", "input": {"file_path": calc, "old_string": "a - b", "new_string": "a + b"}}]}})
    else:
        say({"type": "thread.started", "thread_id": "t"})
        say({"type": "item.started", "item": {"id": "i0", "type": "command_execution",
            "command": "/bin/bash -lc 'cat calc.py'", "status": "in_progress"}})
        say({"type": "item.completed", "item": {"id": "i0", "type": "command_execution",
            "command": "/bin/bash -lc 'cat calc.py'", "exit_code": 0, "status": "completed"}})
        say({"type": "item.started", "item": {"id": "i1", "type": "command_execution",
            "command": "/bin/bash -lc 'python3 -m unittest -q'", "status": "in_progress"}})
        say({"type": "item.completed", "item": {"id": "i1", "type": "command_execution",
            "command": "/bin/bash -lc 'python3 -m unittest -q'", "exit_code": 1, "status": "failed"}})
        say({"type": "item.completed", "item": {"id": "i2", "type": "file_change",
            "changes": [{"path": calc, "kind": "update"}], "status": "completed"}})
    go = os.path.join(here, "..", "go")
    for _ in range(1200):
        if os.path.exists(go):
            break
        time.sleep(0.05)
    else:
        sys.stderr.write(f"{name}: nobody saw the edit while it ran\n")
        sys.exit(1)
    src = open(calc).read()
    open(calc, "w").write(src.replace("return a - b", "return a + b"))
    if name == "claude":
        say({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t3",
            "content": "The file was updated."}]}})
    answer = "fixed add in calc.py"
else:
    answer = "Fixed calc."
if name == "claude":
    say({"type": "result", "subtype": "success", "is_error": False, "permission_denials": [],
        "result": answer, "usage": {"input_tokens": 12, "output_tokens": 3},
        "modelUsage": {"m": {"inputTokens": 12, "outputTokens": 3}}})
else:
    say({"type": "item.completed", "item": {"id": "i9", "type": "agent_message", "text": answer}})
    say({"type": "turn.completed", "usage": {"input_tokens": 12, "output_tokens": 3}})
"#;

/// A repository with the calc project and the stand-in named `preset` in `bin/`, and the
/// PATH that finds it first.
fn with_stand_in(preset: &str) -> (Repo, String) {
    use std::os::unix::fs::PermissionsExt;
    let repo = Repo::new("sha1");
    setup(&repo);
    let bin = repo.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let program = bin.join(preset);
    std::fs::write(&program, STAND_IN).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(repo.git_dir().join("info").join("exclude"), "bin/\ngo\n").unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (repo, path)
}

/// Runs `git forum submit --work --progress --PRESET` with the stand-in, creating `go` once
/// `release` is on stderr; returns whether it succeeded and its progress lines.
fn run_watched(preset: &str, release: &str) -> (bool, Vec<String>) {
    let (repo, path) = with_stand_in(preset);
    let mut child = repo
        .forum()
        .env("PATH", path)
        .args([
            "submit",
            "--work",
            "--no-sandbox",
            "--progress",
            "--check",
            "python3 -m unittest -q",
            &format!("--{preset}"),
            "make the failing test in calc pass",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Vec::new();
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        if line.trim() == release {
            std::fs::write(repo.path().join("go"), "").unwrap();
        }
        lines.push(line);
    }
    let status = child.wait_with_output().unwrap().status;
    (status.success(), lines)
}

/// The lines of `lines` that are T1's tool calls and change, trimmed.
fn work_lines(lines: &[String]) -> Vec<&str> {
    lines
        .iter()
        .map(|l| l.trim())
        .filter(|l| {
            let mut words = l.split(' ');
            words.next() == Some("T1")
                && words
                    .next()
                    .is_some_and(|v| ["read", "run", "edit", "search", "changed"].contains(&v))
        })
        .collect()
}

#[test]
fn claude_codes_tool_calls_show_on_stderr_while_it_runs() {
    let (ok, lines) = run_watched("claude", "T1 edit calc.py");
    assert!(ok, "{}", lines.join("\n"));
    assert_eq!(
        work_lines(&lines),
        [
            "T1 read calc.py",
            "T1 run python3 -m unittest -q",
            "T1 run python3 -m unittest -q (failed)",
            "T1 edit calc.py",
            "T1 changed calc.py (+1 -1)",
        ],
        "{}",
        lines.join("\n")
    );
}

#[test]
fn codexs_commands_and_file_changes_show_on_stderr_while_it_runs() {
    let (ok, lines) = run_watched("codex", "T1 edit calc.py");
    assert!(ok, "{}", lines.join("\n"));
    assert_eq!(
        work_lines(&lines),
        [
            "T1 run cat calc.py",
            "T1 run python3 -m unittest -q",
            "T1 run python3 -m unittest -q (failed)",
            "T1 edit calc.py",
            "T1 changed calc.py (+1 -1)",
        ],
        "{}",
        lines.join("\n")
    );
}

#[test]
fn an_mcp_client_gets_the_agents_tool_calls_as_progress_notifications_while_it_runs() {
    use std::io::Write;
    let (repo, path) = with_stand_in("claude");
    let mut child = repo
        .forum()
        .env("PATH", path)
        .args(["mcp", "--claude"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
            "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "submit",
            "arguments": {"request": "make the failing test in calc pass", "work": true,
                "sandbox": false, "checks": ["python3 -m unittest -q"]},
            "_meta": {"progressToken": "p"}}}),
    ];
    for m in &messages {
        writeln!(stdin, "{m}").unwrap();
    }
    stdin.flush().unwrap();
    let mut progress = Vec::new();
    let mut reply = None;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let msg: J = serde_json::from_str(&line.unwrap()).unwrap();
        if msg["method"] == "notifications/progress" {
            let text = msg["params"]["message"].as_str().unwrap_or("").to_string();
            if text == "T1 edit calc.py" {
                std::fs::write(repo.path().join("go"), "").unwrap();
            }
            progress.push(text);
        } else if msg["id"] == 2 {
            reply = Some(msg);
            break;
        }
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let reply = reply.expect("a reply to the submit");
    assert_eq!(reply["result"]["isError"], false, "{reply}\n{progress:?}");
    let calls: Vec<&str> = progress
        .iter()
        .map(String::as_str)
        .filter(|l| {
            l.starts_with("T1 read ") || l.starts_with("T1 edit ") || l.starts_with("T1 run ")
        })
        .collect();
    assert_eq!(
        calls,
        [
            "T1 read calc.py",
            "T1 run python3 -m unittest -q",
            "T1 run python3 -m unittest -q (failed)",
            "T1 edit calc.py",
        ],
        "{progress:?}"
    );
}

#[test]
fn quiet_shows_none_of_the_agents_tool_calls() {
    let (repo, path) = with_stand_in("claude");
    // Nobody watches: the stand-in goes on at once.
    std::fs::write(repo.path().join("go"), "").unwrap();
    let o = repo
        .forum()
        .env("PATH", path)
        .args([
            "submit",
            "--work",
            "--no-sandbox",
            "--quiet",
            "--check",
            "python3 -m unittest -q",
            "--claude",
            "make the failing test in calc pass",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert_eq!(stderr, "");
}
