//! A worker whose clone has a task's base commit but not all of that commit's objects: it
//! skips the fetch (the commit is there), the worktree cannot be checked out, and it fetches
//! the base after all and tries again (`src/fleet/worker/open.rs`). Two ways a clone comes to
//! that: the commit written without one of its blobs, no ref reaching it (an ordinary fetch
//! mends it); and a blob removed from a commit a ref of the clone reaches (git then thinks the
//! clone has everything and sends nothing: only a refetch mends it). Each test starts its own
//! `nats-server` and stops it, with the worker.

use std::path::Path;
use std::process::Command;

use crate::common::{Repo, on_each_kind};
use crate::dispatch_nats::{NatsServer, clone, finish, logs, model, shared, submit, worker};
use crate::work_run::payloads;

/// One task, writing one file.
const ONE: &str = r#"{"tasks":[
{"id":"T1","agent":"backend","instruction":"write f1.txt","depends_on":[],"done_when":["the file is there"]}]}"#;

/// `git ARGS` in `dir` with `input` on stdin: its output, trimmed; fails the test when git does.
fn git(dir: &Path, args: &[&str], input: Option<&[u8]>) -> String {
    use std::io::Write;
    let mut c = Command::new("git");
    c.current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.unwrap_or_default()).unwrap();
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Whether the repository at `dir` has object `oid`.
fn has(dir: &Path, oid: &str) -> bool {
    Command::new("git")
        .current_dir(dir)
        .args(["cat-file", "-e", oid])
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .unwrap()
        .success()
}

/// Copies object `oid` of `kind` (`commit`, `tree`) from the repository at `from` into the one
/// at `to`, as a loose object, and checks it kept its id.
fn copy_object(from: &Path, to: &Path, kind: &str, oid: &str) {
    let raw = Command::new("git")
        .current_dir(from)
        .args(["cat-file", kind, oid])
        .output()
        .unwrap();
    assert!(raw.status.success());
    let written = git(
        to,
        &["hash-object", "-t", kind, "-w", "--stdin"],
        Some(&raw.stdout),
    );
    assert_eq!(written, oid);
}

/// Runs the one-task plan dispatched to one worker in `c` (a clone made by the caller and
/// changed as it likes); the task's base must be `base`. Asserts the task merged as in
/// process, done by that worker.
fn run_on(repo: &Repo, server: &NatsServer, c: &tempfile::TempDir, base: &str) {
    let m = model(repo, ONE);
    let _w = worker(repo, c.path(), server, &m, &["--name", "w", "--no-sandbox"]);
    let (ok, j, err) = finish(submit(repo, server, &m));
    let results = crate::dispatch_nats::task_results(repo);
    let answer = j["answer"].as_str().unwrap_or_default();
    assert!(
        ok && answer.contains("- T1: merged"),
        "{answer}\n{err}\nthe worker's result: {results:?}\n{}",
        logs(&[c])
    );
    let sent = payloads(repo, "task_dispatched");
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].1["base"], base, "{sent:?}");
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0].1["worker"], "w");
    assert_eq!(results[0].1["ok"], true, "{results:?}");
    assert_eq!(
        repo.git_ok(&["show", "forum/run-0:f1.txt"]),
        "f1.txt",
        "the worker's change is on the run branch"
    );
    repo.forum_ok(&["verify", "--deep"]);
}

#[test]
fn a_worker_with_the_base_commit_but_not_its_blob_fetches_the_base_and_does_the_task() {
    on_each_kind(|repo| {
        let server = NatsServer::start();
        let (_bare, url) = shared(repo);
        let c = clone(&url);
        let here = c.path().join("c");
        // A commit on main after the clone: the run's base, which the writer pushes.
        std::fs::write(repo.path().join("base.txt"), "only in the new base\n").unwrap();
        repo.git_ok(&["add", "base.txt"]);
        repo.git_ok(&["commit", "-q", "-m", "a new base"]);
        let base = repo.git_ok(&["rev-parse", "HEAD"]);
        let tree = repo.git_ok(&["rev-parse", "HEAD^{tree}"]);
        let blob = repo.git_ok(&["rev-parse", "HEAD:base.txt"]);
        // The clone gets the commit and its tree, not the new file's blob; no ref reaches it.
        copy_object(repo.path(), &here, "commit", &base);
        copy_object(repo.path(), &here, "tree", &tree);
        assert!(has(&here, &format!("{base}^{{commit}}")));
        assert!(!has(&here, &blob));
        run_on(repo, &server, &c, &base);
        // The worker's fetch brought the blob.
        assert!(has(&here, &blob), "{}", logs(&[&c]));
    });
}

#[test]
fn a_worker_whose_clone_lost_a_blob_of_a_commit_its_refs_reach_fetches_the_base_again_whole() {
    on_each_kind(|repo| {
        let server = NatsServer::start();
        let (_bare, url) = shared(repo);
        let c = clone(&url);
        let here = c.path().join("c");
        let base = repo.git_ok(&["rev-parse", "HEAD"]);
        let blob = repo.git_ok(&["rev-parse", "HEAD:calc.py"]);
        assert_eq!(git(&here, &["rev-parse", "origin/main"], None), base);
        // The clone's objects unpacked, and the blob of calc.py at the base removed.
        let packs = c.path().join("packs");
        std::fs::rename(here.join(".git/objects/pack"), &packs).unwrap();
        std::fs::create_dir(here.join(".git/objects/pack")).unwrap();
        for e in std::fs::read_dir(&packs).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "pack") {
                git(
                    &here,
                    &["unpack-objects", "-q"],
                    Some(&std::fs::read(&p).unwrap()),
                );
            }
        }
        let loose = here.join(".git/objects").join(&blob[..2]).join(&blob[2..]);
        std::fs::remove_file(loose).unwrap();
        assert!(has(&here, &format!("{base}^{{commit}}")));
        assert!(!has(&here, &blob));
        run_on(repo, &server, &c, &base);
        assert!(has(&here, &blob), "{}", logs(&[&c]));
    });
}

/// The directory a worker checks a task out in is its user's alone (0700), so no one else on
/// the machine reads the repository's files there; and it is gone once the result is delivered.
#[test]
fn a_workers_task_directory_is_private_and_removed_after_delivery() {
    on_each_kind(|repo| {
        let server = NatsServer::start();
        let (_bare, url) = shared(repo);
        let c = clone(&url);
        // The task writes the mode and the path of the directory its checkout is in.
        let m = crate::work_run::model(
            repo,
            "model",
            &ONE.replace('\n', ""),
            "merge",
            "    echo \"$(stat -c %a ..) $(dirname \"$PWD\")\" > f1.txt; echo wrote f1.txt",
        );
        let _w = worker(
            repo,
            c.path(),
            &server,
            &m,
            &["--name", "w", "--no-sandbox"],
        );
        let (ok, j, err) = finish(submit(repo, &server, &m));
        assert!(ok, "{j}\n{err}\n{}", logs(&[&c]));
        let seen = repo.git_ok(&["show", "forum/run-0:f1.txt"]);
        let (mode, dir) = seen.split_once(' ').expect("mode and directory");
        assert_eq!(mode, "700", "{seen}");
        let dir = Path::new(dir);
        assert!(
            dir.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("forum-worker-")),
            "{seen}"
        );
        assert!(
            crate::common::poll_until(std::time::Duration::from_secs(30), || !dir.exists()),
            "{} is still there after the result was delivered\n{}",
            dir.display(),
            logs(&[&c])
        );
    });
}
