//! `--no-sandbox` runs stop their whole process tree, through the binary: a
//! `--work` worker that starts a `setsid` child, a double-forked daemon and a plain background
//! child is stopped with all of them at the end of its task, at `git forum halt` and at its
//! deadline; under the sandbox too, where bubblewrap's pid namespace does it. Each process
//! carries a marker in its arguments, unique to the test, and `/proc` is read afterwards: no
//! process with the marker is left. (Unconfined, the tree is held by git forum's reaper, see
//! `git_forum::exec::command::reaper`.)

use std::process::Stdio;

use crate::common::{Guarded, Repo, on_each_kind};
use crate::procs::{marked, poll};
use crate::work_run::{payloads, setup};

/// A marker no other process holds.
fn marker() -> String {
    use rand_core::RngCore;
    let mut b = [0u8; 8];
    rand_core::OsRng.fill_bytes(&mut b);
    format!(
        "gftree{}",
        b.iter().map(|x| format!("{x:02x}")).collect::<String>()
    )
}

/// A scripted model whose worker starts three sleepers marked `marker` (a `setsid` one, a
/// double-forked daemon, a plain background one), then either ends (`hang` false) or sleeps
/// itself, marked too, until it is stopped.
fn model(repo: &Repo, marker: &str, hang: bool) -> String {
    let path = repo.path().join("model.sh");
    let plan = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"start helpers","depends_on":[],"done_when":[]}]}"#;
    let sleep = "import time; time.sleep(1000)";
    let daemon = "import os, time\nif os.fork(): os._exit(0)\nos.setsid()\nif os.fork(): os._exit(0)\ntime.sleep(1000)";
    let end = if hang {
        format!("exec python3 -c '{sleep}' {marker}-worker")
    } else {
        "echo 'started the helpers'".to_string()
    };
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{plan}' ;;\n  *\"Decide whether to ship\"*) echo '{{\"decision\":\"merge\",\"reason\":\"scripted\"}}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'Done.' ;;\n  *)\n    echo x > helpers.txt\n    setsid python3 -c '{sleep}' {marker}-setsid </dev/null >/dev/null 2>&1 &\n    python3 -c '{daemon}' {marker}-daemon </dev/null >/dev/null 2>&1\n    python3 -c '{sleep}' {marker}-plain </dev/null >/dev/null 2>&1 &\n    {end}\n  ;;\nesac\n"
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

fn mode(sandbox: bool) -> &'static str {
    if sandbox { "--sandbox" } else { "--no-sandbox" }
}

/// Fails with the processes that outlived their run, and kills them.
fn none_left(marker: &str, when: &str) {
    let left = marked(marker);
    for pid in &left {
        if let Some(p) = rustix::process::Pid::from_raw(*pid) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        }
    }
    assert!(
        left.is_empty(),
        "{when}: {} process(es) outlived it: {left:?}",
        left.len()
    );
}

/// A worker that ends at once leaves none of its helpers behind when its task ends.
fn at_the_end_of_its_task(repo: &Repo, sandbox: bool) {
    setup(repo);
    let mark = marker();
    let m = model(repo, &mark, false);
    let o = repo
        .forum()
        .args([
            "submit",
            "--json",
            "--work",
            mode(sandbox),
            "--cmd",
            &m,
            "start helpers",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The worker did start them: its change holds the file it wrote first.
    let change = &payloads(repo, "change")[0].1;
    assert!(change["commit"].is_string(), "{change}");
    none_left(&mark, "the end of its task");
}

/// A worker that hangs is stopped with its helpers by `git forum halt`.
fn at_halt(repo: &Repo, sandbox: bool) {
    setup(repo);
    let mark = marker();
    let m = model(repo, &mark, true);
    let mut child = Guarded(
        repo.forum()
            .args([
                "submit",
                "--json",
                "--work",
                mode(sandbox),
                "--cmd",
                &m,
                "start helpers",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    poll(
        || marked(&mark).len() >= 4,
        "the worker never started its helpers",
    );
    repo.forum_ok(&["halt", "--reason", "tree"]);
    let mut code = None;
    poll(
        || {
            code = child.0.try_wait().unwrap().map(|s| s.code());
            code.is_some()
        },
        "the submit did not end after the halt",
    );
    assert_eq!(code, Some(Some(5)));
    none_left(&mark, "the halt");
}

/// A worker that hangs past its deadline (`timeout_seconds = 2`) is killed with its helpers.
fn at_its_deadline(repo: &Repo, sandbox: bool) {
    setup(repo);
    let mark = marker();
    let m = model(repo, &mark, true);
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        format!("[runtime.default]\ncmd = \"{m}\"\ntimeout_seconds = 2\n"),
    )
    .unwrap();
    std::fs::write(repo.git_dir().join("info/exclude"), ".forum/\n").unwrap();
    let o = repo
        .forum()
        .args(["submit", "--json", "--work", mode(sandbox), "start helpers"])
        .output()
        .unwrap();
    assert!(o.status.code().is_some(), "{o:?}");
    let results = payloads(repo, "result");
    let t1 = results
        .iter()
        .map(|(_, b)| b)
        .find(|b| b["id"] == "T1")
        .unwrap_or_else(|| panic!("{results:?}"));
    assert_eq!(t1["error"], "timeout", "{t1}");
    none_left(&mark, "the deadline");
}

#[test]
fn an_unconfined_worker_leaves_no_process_at_the_end_of_its_task() {
    on_each_kind(|repo| at_the_end_of_its_task(repo, false));
}

#[test]
fn an_unconfined_worker_leaves_no_process_after_halt() {
    on_each_kind(|repo| at_halt(repo, false));
}

#[test]
fn an_unconfined_worker_leaves_no_process_after_its_deadline() {
    on_each_kind(|repo| at_its_deadline(repo, false));
}

fn bwrap_works() -> bool {
    std::process::Command::new("bwrap")
        .args(["--unshare-all", "--ro-bind", "/", "/", "true"])
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn a_sandboxed_worker_leaves_no_process_at_its_end_halt_or_deadline() {
    assert!(
        bwrap_works(),
        "this test needs a working bwrap (apt install bubblewrap)"
    );
    at_the_end_of_its_task(&Repo::new("sha1"), true);
    at_halt(&Repo::new("sha1"), true);
    at_its_deadline(&Repo::new("sha1"), true);
}

#[test]
fn a_check_leaves_no_process_behind() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let mark = marker();
    let m = model(&repo, &mark, false);
    let check = format!(
        "setsid python3 -c 'import time; time.sleep(1000)' {mark}-check </dev/null >/dev/null 2>&1 & true"
    );
    let o = repo
        .forum()
        .args([
            "submit",
            "--json",
            "--work",
            "--no-sandbox",
            "--check",
            &check,
            "--cmd",
            &m,
            "start helpers",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!payloads(&repo, "check").is_empty());
    none_left(&mark, "the check");
}

/// A program that cannot be started is still a spawn failure, not an exit, when the reaper
/// stands between: its one line names the program once and the error.
#[test]
fn a_program_that_cannot_start_is_a_spawn_failure_through_the_reaper() {
    let repo = Repo::new("sha1");
    let j = repo.forum_json(&[
        "context",
        "preflight",
        "--context-cmd",
        "/nonexistent/ctx",
        "hello there",
    ]);
    assert_eq!(j["context"]["error"], "spawn", "{j}");
    assert_eq!(
        j["issues"][0],
        "command context failed (spawn): cannot run \"/nonexistent/ctx\": No such file or directory (os error 2); a run would go on without it",
        "{j}"
    );
}

/// A git forum killed outright (SIGKILL, no chance to stop anything) still takes the tree
/// with it: the reaper reads the end of its control pipe and kills everything.
#[test]
fn a_git_forum_killed_outright_leaves_no_process_of_its_worker() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let mark = marker();
    let m = model(&repo, &mark, true);
    let mut child = Guarded(
        repo.forum()
            .args([
                "submit",
                "--work",
                "--no-sandbox",
                "--cmd",
                &m,
                "start helpers",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    poll(
        || marked(&mark).len() >= 4,
        "the worker never started its helpers",
    );
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    poll(
        || marked(&mark).is_empty(),
        "the worker's processes outlived a killed git forum",
    );
    none_left(&mark, "git forum's death");
}
