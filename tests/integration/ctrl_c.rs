//! Ctrl-C is a halt: SIGINT to the whole process group, as a terminal sends it, during a `--work`
//! run whose slow worker ignores SIGTERM. Run as `git-forum` and as `git forum` (where git, which
//! gets the SIGINT too, forwards one more to its child): the run witnesses `halted` by signal,
//! no worker, running marker or worktree is left, `git-forum` exits 5 (git itself then re-raises
//! the SIGINT, so a shell sees 130 for `git forum`), and `resume` finishes the run.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};

use crate::common::{Guarded, Repo};
use crate::procs::{self, alive, poll};
use crate::work_run::setup;

const PLAN: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"make add in calc.py add","depends_on":[],"done_when":[]}]}"#;

/// A scripted model: the plan, a pass, an answer; a task's worker (and the ship decision) is
/// the slow worker of [`procs::slow_worker_sh`] while `slow` exists, else it fixes calc.py.
fn model(repo: &Repo) -> String {
    let (slow, pids) = (repo.path().join("slow"), repo.path().join("pids"));
    let body = format!(
        r#"#!/bin/sh
p="$1"
case "$p" in
  *"Break this request"*) echo '{PLAN}' ;;
  *"Decide whether to ship"*) echo '{{"decision":"merge","reason":"scripted"}}' ;;
  *"Judge one task"*) echo '{{"decision":"pass","score":0.9,"reason":"ok"}}' ;;
  *"Write the answer"*) echo 'Fixed calc.' ;;
  *)
    {hang}
    sed -i 's/return a - b/return a + b/' calc.py; echo fixed ;;
esac
"#,
        hang = procs::slow_worker_sh(&slow, &pids, true),
    );
    procs::executable(&repo.dir.path().join("model.sh"), &body)
}

/// Sends SIGINT to the process group `pgid`, as a terminal's Ctrl-C does.
fn ctrl_c(pgid: u32) {
    let pg = rustix::process::Pid::from_raw(pgid as i32).unwrap();
    rustix::process::kill_process_group(pg, rustix::process::Signal::INT).unwrap();
}

/// Waits for the interrupted submit to exit; its status and what it printed on stderr.
fn exited(mut child: Guarded) -> (std::process::ExitStatus, String) {
    let mut status = None;
    poll(
        || {
            status = child.0.try_wait().unwrap();
            status.is_some()
        },
        "the interrupted submit did not exit",
    );
    let mut err = String::new();
    std::io::Read::read_to_string(child.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    (status.unwrap(), err)
}

fn leftovers(repo: &Repo) -> Vec<String> {
    let mut left = Vec::new();
    let forum = repo.git_dir().join("forum");
    for sub in ["running/main", "halt/main"] {
        if let Ok(d) = std::fs::read_dir(forum.join(sub)) {
            left.extend(d.flatten().map(|e| format!("{sub}/{:?}", e.file_name())));
        }
    }
    let worktrees = repo.git_ok(&["worktree", "list", "--porcelain"]);
    let n = worktrees
        .lines()
        .filter(|l| l.starts_with("worktree "))
        .count();
    if n != 1 {
        left.push(format!("worktrees: {worktrees}"));
    }
    left
}

/// How the test's Ctrl-C reaches the run.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Spelling {
    /// `git-forum submit`: one SIGINT to the group, then one more to the process 100 ms later
    /// (a second delivery the first did not absorb, as git's forwarded one can be).
    Direct,
    /// `git forum submit`: git gets the group's SIGINT, forwards one to its child, waits for
    /// it and dies of its own.
    Git,
    /// `git forum submit` started with SIGINT ignored (a background job of a script): git
    /// forwards the signal but cannot die of it, so it reports a failed wait and exits 128.
    GitIgnoring,
}

fn interrupt_and_resume(spelling: Spelling) {
    let repo = Repo::new("sha1");
    setup(&repo);
    let mut cmd: Command = match spelling {
        Spelling::Direct => repo.forum(),
        Spelling::Git => repo.git_forum(),
        Spelling::GitIgnoring => {
            // The shell ignores SIGINT and execs git, which keeps it ignored.
            let git = repo.git_forum();
            let mut sh = Command::new("sh");
            sh.args(["-c", "trap '' INT; exec git forum \"$@\"", "sh"]);
            for (k, v) in git.get_envs() {
                match v {
                    Some(v) => sh.env(k, v),
                    None => sh.env_remove(k),
                };
            }
            sh
        }
    };
    let model = model(&repo);
    std::fs::write(repo.path().join("slow"), "").unwrap();
    std::fs::write(repo.git_dir().join("info").join("exclude"), "slow\npids\n").unwrap();
    let child = Guarded(
        cmd.current_dir(repo.path())
            .args([
                "submit",
                "--quiet",
                "--work",
                "--no-sandbox",
                "--cmd",
                &model,
            ])
            .arg("make add add")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap(),
    );
    let workers = procs::wait_for_pids(&repo.path().join("pids"));
    ctrl_c(child.0.id());
    if spelling == Spelling::Direct {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let pid = rustix::process::Pid::from_child(&child.0);
        rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    }
    let (status, err) = exited(child);
    match spelling {
        Spelling::Direct => assert_eq!(status.code(), Some(5), "{status:?} {err}"),
        // git waits for its child, then dies of the SIGINT it got itself: 130 in a shell.
        Spelling::Git => {
            assert_eq!(status.signal(), Some(2), "{status:?} {err}");
            assert!(!err.contains("waitpid"), "{err}");
        }
        // git's own answer when it cannot die of the signal; the run is halted all the same.
        Spelling::GitIgnoring => assert_eq!(status.code(), Some(128), "{status:?} {err}"),
    }
    for pid in workers {
        poll(|| !alive(pid), "a worker outlived Ctrl-C");
    }
    let log = repo.forum_json(&["log", "--run", "0"]);
    let last = log["entries"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["kind"], "halted", "{spelling:?}: {log}");
    assert_eq!(last["payload"]["by"], "signal", "{spelling:?}: {last}");
    assert_eq!(last["payload"]["signal"], "SIGINT", "{spelling:?}: {last}");
    assert_eq!(leftovers(&repo), Vec::<String>::new(), "{spelling:?}");
    assert_eq!(repo.forum_json(&["runs"])["runs"][0]["state"], "halted");
    repo.forum_ok(&["verify", "--deep"]);
    std::fs::remove_file(repo.path().join("slow")).unwrap();
    repo.forum_ok(&["resume", "--quiet", "--no-sandbox", "--cmd", &model]);
    let row = repo.forum_json(&["runs"])["runs"][0].clone();
    assert_ne!(row["state"], "halted", "{spelling:?}: {row}");
    let branch = repo.git_ok(&["show", "forum/run-0:calc.py"]);
    assert!(branch.contains("return a + b"), "{spelling:?}: {branch}");
}

#[test]
fn ctrl_c_to_git_forum_halts_the_run_and_exits_5_even_when_delivered_twice() {
    interrupt_and_resume(Spelling::Direct);
}

#[test]
fn ctrl_c_to_git_forum_through_git_halts_the_run_and_git_dies_of_sigint() {
    interrupt_and_resume(Spelling::Git);
}

#[test]
fn ctrl_c_to_a_background_git_forum_that_ignores_sigint_still_halts_the_run() {
    interrupt_and_resume(Spelling::GitIgnoring);
}

#[test]
fn ctrl_c_while_a_model_over_http_is_thinking_halts_the_run_at_once() {
    // A model endpoint that accepts the request and never answers (a local model with a long
    // prompt is the same from outside): the halt must not wait for it.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://127.0.0.1:{}/v1/chat/completions",
        silent.local_addr().unwrap().port()
    );
    let repo = Repo::new("sha1");
    let child = Guarded(
        repo.forum()
            .args(["submit", "--quiet", "--chat-url", &url, "--model", "m"])
            .arg("say hello")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap(),
    );
    // The request is in flight once the server has the connection.
    let (_held, _) = silent.accept().unwrap();
    let sent = std::time::Instant::now();
    ctrl_c(child.0.id());
    let (status, err) = exited(child);
    let waited = sent.elapsed();
    assert_eq!(status.code(), Some(5), "{err}");
    // Not a timed assertion of speed: the grace before a forced exit is 10 s, and a halt that
    // waited for the model would have taken that path (exit 130, no `halted` entry).
    eprintln!("halted {waited:?} after Ctrl-C");
    let log = repo.forum_json(&["log", "--run", "0"]);
    let last = log["entries"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["kind"], "halted", "{log}");
    assert_eq!(last["payload"]["signal"], "SIGINT", "{last}");
    repo.forum_ok(&["verify", "--deep"]);
}
