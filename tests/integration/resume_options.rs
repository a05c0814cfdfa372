//! A resumed run keeps the options that bound its editing worker, through the binary: a
//! `--work` run whose worker is a loopback chat stub (edit_worker's), submitted with
//! `--allow-cmd`, `--max-tool-calls` and `--no-sandbox`, is halted while its allowed command
//! hangs, then resumed with no flags. In the resumed part the allowed command runs (and,
//! unconfined as recorded, sees the script outside the worktree), a command outside the list is
//! refused, and the worker stops at the recorded cap, not the default 24. A flag given to the
//! resume wins over the record; a record it cannot read, and worker bounds on the resume of a run
//! that does not work in the repository, are refused in one line.

use std::process::Stdio;

use serde_json::{Value as J, json};

use crate::common::{FORMATS, Guarded, Repo};
use crate::edit_worker::{Stub, call, chat_answer, fleet};
use crate::procs::{self, alive, poll};
use crate::work_run::{entries, payloads, setup};

const REQUEST: &str = "make the failing test in calc pass";

/// The worker's turns: the allowed (slow) command, then one outside the list, then listing
/// files for ever.
fn worker(allowed: String) -> impl Fn(usize, &J) -> (u16, J) + Send + Sync + 'static {
    move |turn, _| {
        let c = match turn {
            0 => call("run", "run_command", json!({"command": allowed})),
            1 => call("out", "run_command", json!({"command": "echo outside"})),
            n => call(&format!("l{n}"), "list_files", json!({})),
        };
        (200, chat_answer(J::Null, Some(json!([c]))))
    }
}

/// The payloads of `kind` after seq `after`.
fn since(repo: &Repo, kind: &str, after: u64) -> Vec<J> {
    payloads(repo, kind)
        .into_iter()
        .filter(|(seq, _)| *seq > after)
        .map(|(_, p)| p)
        .collect()
}

#[test]
fn a_halted_work_run_resumed_without_flags_keeps_its_allow_list_cap_and_sandbox_choice() {
    for (i, kind) in FORMATS.into_iter().enumerate() {
        let repo = Repo::new(kind);
        setup(&repo);
        let (slow, pids) = (repo.path().join("slow"), repo.path().join("pids"));
        std::fs::write(&slow, "").unwrap();
        // Outside the worktree (and ignored by git): only an unconfined worker can run it.
        let script = procs::executable(
            &repo.path().join("slow.sh"),
            &format!(
                "#!/bin/sh\n{}\necho ran\n",
                procs::slow_worker_sh(&slow, &pids, false)
            ),
        );
        let stub = Stub::start(fleet(worker(script.clone())));
        let url = stub.url("/v1/chat/completions");
        let mut child = Guarded(
            repo.forum()
                .args([
                    "submit",
                    "--quiet",
                    "--work",
                    "--check",
                    "true",
                    "--no-sandbox",
                    "--allow-cmd",
                    &script,
                    "--max-tool-calls",
                    "4",
                    "--chat-url",
                    &url,
                    "--model",
                    "stub-coder",
                    REQUEST,
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let workers = procs::wait_for_pids(&pids);
        repo.forum_ok(&["halt", "--reason", "mid-way", "--by", "test"]);
        let mut status = None;
        poll(
            || {
                status = child.0.try_wait().unwrap();
                status.is_some()
            },
            "the submit did not exit after the halt",
        );
        assert_eq!(status.unwrap().code(), Some(5), "{kind}: halted");
        for pid in workers {
            poll(|| !alive(pid), "the allowed command outlived the halt");
        }
        // The request records what bounds the worker (and no key).
        let request = &payloads(&repo, "request")[0].1;
        assert_eq!(
            request["options"],
            json!({"allow_cmds": [script], "max_tool_calls": 4, "sandbox": false}),
            "{kind}: {request}"
        );
        let halted = payloads(&repo, "halted")[0].0;
        assert!(
            since(&repo, "tool_result", 0).is_empty(),
            "{kind}: the slow command had no result before the halt"
        );
        // Resumed with no flags (the third format: a flag given to the resume wins).
        std::fs::remove_file(&slow).unwrap();
        let (args, cap): (&[&str], u64) = if i == 2 {
            (&["resume", "--quiet", "--max-tool-calls", "3"], 3)
        } else {
            (&["resume", "--quiet"], 4)
        };
        let o = repo.forum().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert_ne!(o.status.code(), Some(5), "{kind}: {err}");
        let calls = since(&repo, "tool_call", halted);
        let results = since(&repo, "tool_result", halted);
        assert_eq!(calls.len() as u64, cap, "{kind}: {calls:?} {err}");
        assert_eq!(results.len() as u64, cap, "{kind}: {results:?}");
        // The allowed command ran, unconfined as recorded.
        assert_eq!(results[0]["ok"], true, "{kind}: {:?}", results[0]);
        assert!(
            results[0]["output"].as_str().unwrap().contains("ran"),
            "{kind}: {:?}",
            results[0]
        );
        // One outside the list is refused.
        assert_eq!(results[1]["refused"], true, "{kind}: {:?}", results[1]);
        assert!(
            results[1]["output"]
                .as_str()
                .unwrap()
                .starts_with("refused:"),
            "{kind}: {:?}",
            results[1]
        );
        // The worker stopped at the cap.
        let result = since(&repo, "result", halted);
        assert_eq!(result[0]["error"], "max_tool_calls", "{kind}: {result:?}");
        assert!(
            result[0]["output"]
                .as_str()
                .unwrap()
                .contains(&format!("--max-tool-calls {cap}")),
            "{kind}: {result:?}"
        );
        assert!(entries(&repo).iter().any(|e| e["kind"] == "resume"));
        repo.forum_ok(&["verify", "--deep"]);
        drop(stub);
    }
}

#[test]
fn a_recorded_option_of_the_wrong_type_is_refused_in_one_line() {
    // A run whose request records `options` a resume cannot read (written by hand with
    // `append`, as another tool might) is refused before anything runs.
    let repo = Repo::new("sha1");
    repo.append(
        "client",
        "request",
        r#"{"text": "ship it", "options": {"max_tool_calls": "many"}}"#,
    );
    let before = repo.snapshot();
    let o = repo
        .forum()
        .args(["resume", "--quiet", "--cmd", "true"])
        .output()
        .unwrap();
    crate::common::one_line_error(&o, "max_tool_calls is not a count");
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(repo.snapshot(), before, "a refused resume wrote something");
}

#[test]
fn worker_bounds_on_the_resume_of_a_run_that_does_not_work_are_refused_in_one_line() {
    let repo = Repo::new("sha1");
    repo.append("client", "request", r#"{"text": "ship it"}"#);
    let before = repo.snapshot();
    for flags in [["--allow-cmd", "make"], ["--max-tool-calls", "3"]] {
        let mut argv = vec!["resume", "--quiet", "--cmd", "true"];
        argv.extend_from_slice(&flags);
        let o = repo.forum().args(&argv).output().unwrap();
        crate::common::one_line_error(&o, "run 0 does not work in the repository");
        assert_eq!(o.status.code(), Some(2));
    }
    assert_eq!(repo.snapshot(), before, "a refused resume wrote something");
}
