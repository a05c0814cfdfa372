//! Live progress of a `--work` run: the built-in editing worker's tool calls (verb and main
//! argument), the files its change touched, each check's result and which gate decided, one
//! plain line each, in the order they happen; on a pipe with `--progress`, and on a terminal by
//! default; `--quiet` on a terminal shows none of them.

use std::io::Read;
use std::process::Stdio;

use serde_json::{Value as J, json};

use crate::apply_prompt::pty;
use crate::common::Repo;
use crate::edit_worker::{Stub, call, chat_answer, fleet};
use crate::work_run::setup;

const CHECK: &str = "python3 -m unittest -q";
const FIXED: &str = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a + b\n";

/// The scripted coder: reads the failing test, writes the fix, runs the check, reports.
fn coder(turn: usize, _: &J) -> (u16, J) {
    let calls = match turn {
        0 => call("c1", "read_file", json!({"path": "test_calc.py"})),
        1 => call(
            "c2",
            "write_file",
            json!({"path": "calc.py", "content": FIXED}),
        ),
        2 => call("c3", "run_command", json!({"command": CHECK})),
        _ => return (200, chat_answer(json!("Fixed add in calc.py."), None)),
    };
    (200, chat_answer(J::Null, Some(json!([calls]))))
}

/// `submit --work` of the fix with `flags`, the stub as every seat.
fn submit(repo: &Repo, stub: &Stub, flags: &[&str]) -> std::process::Command {
    let url = stub.url("/v1/chat/completions");
    let mut c = repo.forum();
    c.args(["submit", "--work", "--check", CHECK, "--chat-url", &url]);
    c.args(["--model", "stub-coder"]);
    c.args(flags);
    c.arg("make the failing test in calc pass");
    c
}

/// The lines a person watching is shown of the fix, in order.
const IN_ORDER: [&str; 8] = [
    "  T1 read test_calc.py\n",
    "  T1 write calc.py\n",
    "  T1 run python3 -m unittest -q\n",
    "  T1 changed calc.py (+1 -1)\n",
    "  T1 check passed: python3 -m unittest -q (",
    "  T1: pre-ship gate: merge\n",
    "  run branch check passed: python3 -m unittest -q (",
    "  T1: validator: pass\n",
];

fn in_order(err: &str) {
    let mut from = 0;
    for line in IN_ORDER {
        let at = err[from..]
            .find(line)
            .unwrap_or_else(|| panic!("{line:?} missing after byte {from}:\n{err}"));
        from += at + line.len();
    }
}

#[test]
fn progress_shows_tool_calls_files_and_checks_as_plain_lines_in_order() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let stub = Stub::start(fleet(coder));
    let o = submit(&repo, &stub, &["--progress"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    in_order(&err);
    assert!(!err.contains('\x1b'), "{err:?}");
}

/// Runs `cmd` with its stderr on a terminal; its exit code and what the terminal showed (with
/// the terminal's line ends made `\n`).
fn on_a_terminal(mut cmd: std::process::Command) -> (Option<i32>, String) {
    let (mut controller, device) = pty();
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(device));
    let mut child = cmd.spawn().unwrap();
    // The terminal's only device handle is the child's: reading ends when it exits.
    drop(cmd);
    let reader = std::thread::spawn(move || {
        let mut shown = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = controller.read(&mut buf) {
            if n == 0 {
                break;
            }
            shown.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&shown).replace("\r\n", "\n")
    });
    let status = child.wait().unwrap();
    (status.code(), reader.join().unwrap())
}

#[test]
fn a_terminal_shows_progress_and_quiet_shows_none() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let stub = Stub::start(fleet(coder));
    let (code, shown) = on_a_terminal(submit(&repo, &stub, &[]));
    assert_eq!(code, Some(0), "{shown}");
    in_order(&shown);

    let repo = Repo::new("sha1");
    setup(&repo);
    let (code, shown) = on_a_terminal(submit(&repo, &stub, &["--quiet"]));
    assert_eq!(code, Some(0), "{shown}");
    for line in IN_ORDER {
        assert!(!shown.contains(line.trim()), "{line:?} in {shown}");
    }
}
