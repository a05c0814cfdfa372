//! Dispatch workers under the sandbox, and the server-side hook that holds a worker's push to
//! its results prefix. A worker runs its task's seat and checks under bubblewrap as a local
//! `--work` task does (a real `nats-server`, a worker in its own clone of a bare remote with
//! git forum's server hook installed); a worker's push (`-o forum-worker=NAME`, or a user the
//! remote lists in `forum.workerUser`) may only create a ref under
//! `refs/forum/results/LEDGER/RUN/TASK/ATTEMPT`. Every process a test starts is stopped by it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as J;

use crate::common::{Guarded, Repo, bare_origin, on_each_kind, one_line_error};
use crate::dispatch_nats::NatsServer;
use crate::work_run::{model, payloads, setup};

/// Two tasks: T1 tries to get out of its sandbox and writes down how each try went; T2 writes
/// one file.
const PLAN: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"probe the walls","depends_on":[],"done_when":["probe.txt says"]},{"id":"T2","agent":"backend","instruction":"write f2.txt among the files","depends_on":[],"done_when":["the file is there"]}]}"#;

/// An attempt id as the writer issues them.
const ATTEMPT: &str = "0123456789abcdef0123456789abcdef";

/// `git ARGS` in `dir`.
fn git_in(dir: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .args(args)
        .output()
        .unwrap()
}

/// The folder of the built binary, first on a `PATH` (so a hook's `git forum` finds it).
pub(crate) fn path_with_binary() -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_git-forum")).parent().unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The bare remote `repo` shares with its workers (holding `main`), with git forum's server
/// hook installed.
pub(crate) fn hooked_remote(repo: &Repo) -> (tempfile::TempDir, String) {
    let (bare, url) = bare_origin(repo, repo.kind());
    repo.git_ok(&["push", "-q", "origin", "main"]);
    let o = repo
        .forum()
        .current_dir(bare.path())
        .args(["hooks", "install", "--server"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(said.contains("receive.advertisePushOptions"), "{said}");
    (bare, url)
}

/// A clone of `url` at `DIR/c`.
fn clone(url: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ok = Command::new("git")
        .args(["clone", "-q", url])
        .arg(dir.path().join("c"))
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .unwrap();
    assert!(ok.success());
    dir
}

/// What a confined probe tries, as the worker's seat: append to the clone's `.git/HEAD`,
/// write into the worker's home, reach the NATS server's port; each outcome a line of
/// `probe.txt` in its worktree. Any other task writes the file its instruction names.
fn probe_work(head: &Path, home: &Path, port: u16) -> String {
    format!(
        r#"    if printf '%s' "$p" | grep -q 'probe the walls'; then
      if (echo x >> '{head}') 2>/dev/null; then echo 'head: written'; else echo 'head: refused'; fi >> probe.txt
      if (echo x > '{home}/escaped') 2>/dev/null; then echo 'home: written'; else echo 'home: refused'; fi >> probe.txt
      if python3 -c 'import socket; socket.create_connection(("127.0.0.1", {port}), 3)' 2>/dev/null; then echo 'net: reached'; else echo 'net: refused'; fi >> probe.txt
      echo 'probed'
    else
      f=$(printf '%s' "$p" | grep -o 'write f[0-9]*[.]txt' | head -1 | cut -d' ' -f2); echo "$f" > "$f"; echo "wrote $f"
    fi"#,
        head = head.display(),
        home = home.display(),
    )
}

/// Runs `cmd` to its end (at most 3 minutes) with its output in files under `dir`.
fn run_bounded(mut cmd: Command, dir: &Path) -> (bool, String, String) {
    let (out, err) = (dir.join("out"), dir.join("err"));
    cmd.stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap());
    let mut child = Guarded(cmd.spawn().unwrap());
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "did not end in 3 minutes: {}",
            std::fs::read_to_string(&err).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let read = |p: &PathBuf| std::fs::read_to_string(p).unwrap_or_default();
    (status.success(), read(&out), read(&err))
}

#[test]
fn a_dispatched_task_cannot_write_outside_its_worktree_or_reach_the_network_and_still_merges() {
    on_each_kind(|repo| {
        let server = NatsServer::start();
        setup(repo);
        let (bare, url) = hooked_remote(repo);
        let c = clone(&url);
        let head = c.path().join("c/.git/HEAD");
        let head_before = std::fs::read(&head).unwrap();
        let home = tempfile::tempdir().unwrap();
        let m = model(
            repo,
            "model",
            PLAN,
            "merge",
            &probe_work(&head, home.path(), server.port),
        );
        let mut w = repo.forum();
        w.current_dir(c.path().join("c"))
            .env("HOME", home.path())
            .env("PATH", path_with_binary())
            .args(["worker", "--nats", &server.url(), "--lease", "10"])
            .args(["--cmd", &m, "--name", "boxed"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(c.path().join("worker.log")).unwrap());
        let _worker = Guarded(w.spawn().unwrap());
        // The writer's pushes (bases, ledger) go through the hook too.
        let mut s = repo.forum();
        s.env("PATH", path_with_binary());
        s.args(["submit", "--work", "--no-sandbox", "--check", "true"])
            .args(["--dispatch", &server.url(), "--cmd", &m, "--json"])
            .arg("test the walls and the files");
        let runs = tempfile::tempdir().unwrap();
        let (ok, out, err) = run_bounded(s, runs.path());
        let log = std::fs::read_to_string(c.path().join("worker.log")).unwrap_or_default();
        assert!(ok, "{err}\n{log}");
        let j: J = serde_json::from_str(&out).unwrap_or(J::Null);
        let answer = j["answer"].as_str().unwrap_or_default();
        for t in ["T1", "T2"] {
            assert!(
                answer.contains(&format!("- {t}: merged")),
                "{answer}\n{err}"
            );
        }
        // Every try of the probe failed inside, as it would in a local sandbox...
        assert_eq!(
            repo.git_ok(&["show", "forum/run-0:probe.txt"]),
            "head: refused\nhome: refused\nnet: refused"
        );
        assert_eq!(repo.git_ok(&["show", "forum/run-0:f2.txt"]), "f2.txt");
        // ...and left nothing on the worker's machine.
        assert_eq!(std::fs::read(&head).unwrap(), head_before);
        assert!(!home.path().join("escaped").exists());
        // Each result says the sandbox, as the worker's claim.
        let results: Vec<J> = payloads(repo, "result")
            .into_iter()
            .map(|(_, p)| p)
            .filter(|p| p.get("worker").is_some())
            .collect();
        assert_eq!(results.len(), 2, "{results:?}");
        for r in &results {
            assert_eq!(r["claims"]["worker"], "boxed", "{r}");
            assert_eq!(r["claims"]["confinement"], "bwrap", "{r}");
        }
        // The worker's pushes went through the hook: one results ref for each task.
        let refs = git_in(
            bare.path(),
            &["for-each-ref", "--format=%(refname)", "refs/forum/results/"],
        );
        let refs = String::from_utf8_lossy(&refs.stdout).to_string();
        assert_eq!(refs.lines().count(), 2, "{refs}");
        repo.forum_ok(&["verify", "--deep"]);
    });
}

#[test]
fn a_worker_without_bubblewrap_is_refused_in_one_line_unless_it_opts_out() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let (_bare, url) = bare_origin(&repo, "sha1");
    repo.git_ok(&["push", "-q", "origin", "main"]);
    let c = clone(&url);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let nats = format!("nats://127.0.0.1:{port}");
    let worker = |extra: &[&str]| {
        repo.forum()
            .current_dir(c.path().join("c"))
            .env("GIT_FORUM_BWRAP", "/nonexistent/bwrap")
            .args(["worker", "--nats", &nats, "--cmd", "true"])
            .args(extra)
            .output()
            .unwrap()
    };
    let line = one_line_error(&worker(&[]), "not usable here");
    assert!(
        line.contains("apt install bubblewrap") && line.contains("--no-sandbox"),
        "{line}"
    );
    // Opted out, it goes on to the server (which is not there).
    one_line_error(&worker(&["--no-sandbox"]), "cannot reach the NATS server");
    let line = one_line_error(&worker(&["--no-sandbox", "--sandbox-net"]), "--sandbox-net");
    assert!(line.contains("give one or the other"), "{line}");
    // `[work] sandbox = false` in the clone's runtime config opts out the same way.
    let forum = c.path().join("c/.forum");
    std::fs::create_dir_all(&forum).unwrap();
    std::fs::write(forum.join("runtime.toml"), "[work]\nsandbox = false\n").unwrap();
    one_line_error(&worker(&[]), "cannot reach the NATS server");
}

/// `git push` from `repo` as a user (or a worker) runs it, with git forum on `PATH` for the
/// remote's hook and `env` set.
fn push(repo: &Repo, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new("git")
        .current_dir(repo.path())
        .env("PATH", path_with_binary())
        .env("HOME", repo.path())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_SYSTEM", "/dev/null")
        .env("GIT_FORUM_CACHE_DIR", repo.cache_dir())
        .envs(env.iter().copied())
        .arg("push")
        .args(args)
        .output()
        .unwrap()
}

/// Asserts `o` is a push the hook refused, saying so in one line that holds `why`.
fn refused(o: &Output, refname: &str, why: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "should be refused: {err}");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("git forum: refusing"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains(refname) && lines[0].contains(why),
        "{refname} / {why}: {err}"
    );
}

#[test]
fn the_server_hook_holds_a_worker_push_to_one_new_results_ref() {
    on_each_kind(|repo| {
        setup(repo);
        let (bare, _url) = hooked_remote(repo);
        repo.git_ok(&["commit", "-q", "--allow-empty", "-m", "a change"]);
        let change = repo.git_ok(&["rev-parse", "HEAD"]);
        repo.git_ok(&["commit", "-q", "--allow-empty", "-m", "another"]);
        let other = repo.git_ok(&["rev-parse", "HEAD"]);
        let remote_ref = |r: &str| {
            let o = git_in(bare.path(), &["rev-parse", "--verify", "-q", r]);
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        };
        let main_before = remote_ref("refs/heads/main");
        let mine = format!("refs/forum/results/main/0/T1/{ATTEMPT}");
        let as_w1 = ["-o", "forum-worker=w1"];
        let spec = |c: &str, r: &str| format!("{c}:{r}");

        // Its own results ref, new: accepted.
        let o = push(
            repo,
            &[&as_w1[..], &["origin", &spec(&change, &mine)]].concat(),
            &[],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(remote_ref(&mine), change);

        // A branch, a ledger, or another's results ref that exists: each refused in one line.
        let o = push(
            repo,
            &[&as_w1[..], &["origin", &spec(&change, "refs/heads/main")]].concat(),
            &[],
        );
        refused(
            &o,
            "refs/heads/main",
            "may push only to refs/forum/results/",
        );
        let o = push(
            repo,
            &[
                &as_w1[..],
                &["origin", &spec(&change, "refs/forum/ledgers/main")],
            ]
            .concat(),
            &[],
        );
        refused(&o, "refs/forum/ledgers/main", "may push only to");
        let o = push(
            repo,
            &[
                "-o",
                "forum-worker=w2",
                "origin",
                &format!("+{}", spec(&other, &mine)),
            ],
            &[],
        );
        refused(&o, &mine, "exists already");
        let o = push(
            repo,
            &[&as_w1[..], &["origin", &format!(":{mine}")]].concat(),
            &[],
        );
        refused(&o, &mine, "may not delete");
        assert_eq!(remote_ref(&mine), change);
        assert_eq!(remote_ref("refs/heads/main"), main_before);

        // The option is what the push says of itself: without it the same push is a user's.
        let o = push(repo, &["origin", &spec(&change, "refs/heads/side")], &[]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

        // A user the remote lists as a worker is held to the rule whatever its push says.
        git_in(bare.path(), &["config", "--add", "forum.workerUser", "bot"]);
        let o = push(
            repo,
            &["origin", &spec(&change, "refs/heads/bots")],
            &[("REMOTE_USER", "bot")],
        );
        refused(&o, "refs/heads/bots", "worker bot may push only to");
        let o = push(
            repo,
            &["origin", &spec(&change, "refs/heads/alice")],
            &[("REMOTE_USER", "alice")],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    });
}
