//! `submit --work --dispatch`: a run's tasks go through a real NATS JetStream server
//! (`nats-server -js` on a free loopback port, a temporary store, killed on drop) to `git forum
//! worker` processes, each in its own clone of a shared bare remote. The submitting process
//! stays the only ledger writer. Every process a test starts is stopped by it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as J;

use crate::common::{Repo, bare_origin, on_each_kind};
use crate::work_run::{entries, payloads, setup};

/// A `nats-server` with JetStream on a free loopback port and a temporary store, killed (and
/// its store removed) on drop.
pub(crate) struct NatsServer {
    child: Child,
    pub(crate) port: u16,
    /// `USER:PASSWORD@` when the server asks for them.
    auth: String,
    /// The flags after the port and store (for a restart).
    extra: Vec<String>,
    /// The server's name, unique to it, which its INFO line carries: the test knows it talks
    /// to this server, not to another test's that took the same port.
    name: String,
    store: tempfile::TempDir,
}

/// The `server_name` in the INFO line the server on `port` sends first, or `None` when
/// nothing answers there yet.
fn server_name(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while line.len() < 4096 && s.read(&mut byte).ok()? == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    let info: J = serde_json::from_slice(line.strip_prefix(b"INFO ")?.trim_ascii()).ok()?;
    Some(info["server_name"].as_str()?.to_string())
}

impl NatsServer {
    pub(crate) fn start() -> NatsServer {
        NatsServer::start_with(&[])
    }

    /// A server that lets in only `user` with `password` (`--user`, `--pass`); its
    /// [`NatsServer::url`] carries them.
    pub(crate) fn with_user(user: &str, password: &str) -> NatsServer {
        let mut s = NatsServer::start_with(&["--user", user, "--pass", password]);
        s.auth = format!("{user}:{password}@");
        s
    }

    /// A server that speaks only TLS, with the certificate `cert` and its key `key`.
    pub(crate) fn with_tls(cert: &Path, key: &Path) -> NatsServer {
        let (cert, key) = (cert.display().to_string(), key.display().to_string());
        NatsServer::start_with(&["--tls", "--tlscert", &cert, "--tlskey", &key])
    }

    fn start_with(extra: &[&str]) -> NatsServer {
        static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let store = tempfile::tempdir().unwrap();
        let extra: Vec<String> = extra.iter().map(|a| a.to_string()).collect();
        // A port found free may be taken by another test's server before this one binds it:
        // then this server exits, and the port answers with the other's name. Another port.
        for _ in 0..20 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let name = format!("forum-test-{}-{n}", std::process::id());
            if let Some(child) = NatsServer::spawn(port, store.path(), &extra, &name) {
                return NatsServer {
                    child,
                    port,
                    auth: String::new(),
                    extra,
                    name,
                    store,
                };
            }
        }
        panic!("nats-server found no free port of its own in 20 tries");
    }

    /// Starts `nats-server` named `name` on `port` with its JetStream store in `store`, and
    /// waits until it listens; `None` (the process stopped) when the port answers with another
    /// server's name or this one exits first.
    fn spawn(port: u16, store: &Path, extra: &[String], name: &str) -> Option<Child> {
        let program = ["/usr/sbin/nats-server", "/usr/bin/nats-server"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .unwrap_or("nats-server");
        let mut child = Command::new(program)
            .args([
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-n",
                name,
                "-sd",
            ])
            .arg(store)
            .args(extra)
            .args(
                std::env::var("GIT_FORUM_TEST_NATS_TRACE")
                    .ok()
                    .map(|d| {
                        vec![
                            "-DV".to_string(),
                            "-l".to_string(),
                            format!("{d}/{name}.log"),
                        ]
                    })
                    .unwrap_or_default(),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server is installed (.ci/run installs Debian's)");
        let mut answered = None;
        let up = crate::common::poll_until(Duration::from_secs(30), || {
            if matches!(child.try_wait(), Ok(Some(_))) {
                answered = Some(false);
                return true;
            }
            answered = server_name(port).map(|n| n == name);
            answered.is_some()
        });
        if up && answered == Some(true) {
            return Some(child);
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(up, "nats-server did not listen on {port}");
        None
    }

    /// Kills the server (SIGKILL: nothing of it runs after) and starts it again on the same
    /// port with the same store, as an operator restarting a crashed server would.
    pub(crate) fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = NatsServer::spawn(self.port, self.store.path(), &self.extra, &self.name)
            .unwrap_or_else(|| panic!("port {} was taken while its server was down", self.port));
    }

    pub(crate) fn url(&self) -> String {
        format!("nats://{}127.0.0.1:{}", self.auth, self.port)
    }

    /// Publishes `payload` on `subject` with the plain protocol (what anyone who can reach the
    /// server could send) and waits until the server has it.
    pub(crate) fn publish(&self, subject: &str, payload: &[u8]) {
        let mut s = self.raw();
        write!(s, "PUB {subject} {}\r\n", payload.len()).unwrap();
        s.write_all(payload).unwrap();
        s.write_all(b"\r\nPING\r\n").unwrap();
        read_until(&mut s, "PONG");
    }

    /// Sends a JetStream API request and returns the reply's JSON.
    /// Makes `ledger`'s work-queue stream and then its progress stream, as its writer does.
    pub(crate) fn make_ledger_stream(&self, ledger: &str) {
        let made = self.request(
            &format!("$JS.API.STREAM.CREATE.FORUM_{ledger}"),
            &serde_json::json!({
                "name": format!("FORUM_{ledger}"), "subjects": [format!("forum.{ledger}.>")],
                "retention": "workqueue", "storage": "file", "duplicate_window": 120_000_000_000u64,
            }),
        );
        assert!(made["config"].is_object(), "{made}");
        let made = self.request(
            &format!("$JS.API.STREAM.CREATE.FORUM_{ledger}_WORKERS"),
            &serde_json::json!({
                "name": format!("FORUM_{ledger}_WORKERS"),
                "subjects": [format!("forum-workers.{ledger}.*")],
                "retention": "limits", "storage": "file", "max_msgs_per_subject": 1,
            }),
        );
        assert!(made["config"].is_object(), "{made}");
    }

    pub(crate) fn request(&self, subject: &str, body: &J) -> J {
        let mut s = self.raw();
        let body = body.to_string();
        write!(
            s,
            "SUB _INBOX.test 1\r\nPUB {subject} _INBOX.test {}\r\n{body}\r\n",
            body.len()
        )
        .unwrap();
        let line = read_until(&mut s, "MSG _INBOX.test");
        let n: usize = line.split_whitespace().last().unwrap().parse().unwrap();
        let mut buf = vec![0; n];
        s.read_exact(&mut buf).unwrap();
        serde_json::from_slice(&buf).unwrap()
    }

    fn raw(&self) -> TcpStream {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        read_until(&mut s, "INFO");
        s.write_all(b"CONNECT {\"verbose\":false,\"pedantic\":false}\r\n")
            .unwrap();
        s
    }
}

/// Reads lines from `s` until one starts with `prefix`, and returns it.
fn read_until(s: &mut TcpStream, prefix: &str) -> String {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        s.read_exact(&mut byte).expect("the NATS server answered");
        line.push(byte[0]);
        if byte[0] == b'\n' {
            let text = String::from_utf8_lossy(&line).trim().to_string();
            if text.starts_with(prefix) {
                return text;
            }
            line.clear();
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A child process killed (SIGKILL) and reaped on drop.
pub(crate) struct Killed(pub(crate) Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A plan of two tasks in one wave, each writing one file.
pub(crate) const TWO: &str = r#"{"tasks":[
{"id":"T1","agent":"backend","instruction":"write f1.txt","depends_on":[],"done_when":["the file is there"]},
{"id":"T2","agent":"backend","instruction":"write f2.txt","depends_on":[],"done_when":["the file is there"]}]}"#;

/// A plan of six tasks over two waves: T1..T3, then T4..T6 each on one of them. Each task
/// writes one file.
pub(crate) const PLAN: &str = r#"{"tasks":[
{"id":"T1","agent":"backend","instruction":"write f1.txt","depends_on":[],"done_when":["the file is there"]},
{"id":"T2","agent":"backend","instruction":"write f2.txt","depends_on":[],"done_when":["the file is there"]},
{"id":"T3","agent":"backend","instruction":"write f3.txt","depends_on":[],"done_when":["the file is there"]},
{"id":"T4","agent":"backend","instruction":"write f4.txt","depends_on":["T1"],"done_when":["the file is there"]},
{"id":"T5","agent":"backend","instruction":"write f5.txt","depends_on":["T2"],"done_when":["the file is there"]},
{"id":"T6","agent":"backend","instruction":"write f6.txt","depends_on":["T3"],"done_when":["the file is there"]}]}"#;

/// The scripted model of these runs (the planner's `plan`, the gate's merge, every verdict a
/// pass); a task writes the file its instruction names.
pub(crate) fn model(repo: &Repo, plan: &str) -> String {
    let plan = plan.replace('\n', "");
    crate::work_run::model(
        repo,
        "model",
        &plan,
        "merge",
        "    f=$(printf '%s' \"$p\" | grep -o 'write f[0-9]*[.]txt' | head -1 | cut -d' ' -f2); echo \"$f\" > \"$f\"; echo \"wrote $f\"",
    )
}

/// A model that says it started (touches `mark`), then holds until the test creates
/// `release(mark)` (at most a minute) before doing what `model` does. The test kills its worker,
/// or its writer, meanwhile; a fixed pause instead raced a busy machine.
pub(crate) fn slow_model(dir: &Path, model: &str, mark: &Path) -> String {
    let path = dir.join("slow.sh");
    let body = format!(
        "#!/bin/sh\ntouch '{}'\ni=0\nwhile [ ! -e '{}' ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\nexec '{model}' \"$@\"\n",
        mark.display(),
        release(mark).display()
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// The file that lets a [`slow_model`] holding at `mark` go on.
pub(crate) fn release(mark: &Path) -> std::path::PathBuf {
    mark.with_extension("go")
}

/// The repository with its bare remote (holding `main`); returns the remote's folder.
pub(crate) fn shared(repo: &Repo) -> (tempfile::TempDir, String) {
    setup(repo);
    let (bare, url) = bare_origin(repo, repo.kind());
    repo.git_ok(&["push", "-q", "origin", "main"]);
    (bare, url)
}

/// A clone of `url` for a worker, in a new folder.
pub(crate) fn clone(url: &str) -> tempfile::TempDir {
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

/// A `git forum worker` in `clone` on `server`, with `cmd` as its seat and `extra` flags.
pub(crate) fn worker(
    repo: &Repo,
    clone: &Path,
    server: &NatsServer,
    cmd: &str,
    extra: &[&str],
) -> Killed {
    worker_at(repo, clone, &server.url(), cmd, extra)
}

/// [`worker`] on the server at `url`.
pub(crate) fn worker_at(repo: &Repo, clone: &Path, url: &str, cmd: &str, extra: &[&str]) -> Killed {
    Killed(
        worker_command(repo, clone, url, cmd, extra)
            .spawn()
            .unwrap(),
    )
}

/// The command [`worker_at`] starts, for a caller that sets more on it first.
pub(crate) fn worker_command(
    repo: &Repo,
    clone: &Path,
    url: &str,
    cmd: &str,
    extra: &[&str],
) -> Command {
    let mut c = repo.forum();
    c.current_dir(clone.join("c"))
        .args(["worker", "--nats", url, "--lease", "2", "--cmd", cmd])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(clone.join("worker.log")).unwrap());
    c
}

/// What the workers in `clones` said on standard error (for a failure's message).
pub(crate) fn logs(clones: &[&tempfile::TempDir]) -> String {
    clones
        .iter()
        .map(|c| std::fs::read_to_string(c.path().join("worker.log")).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// [`crate::common::wait_until`] for a state the workers in `clones` bring about: when it never
/// comes, the failure shows what they said.
#[track_caller]
pub(crate) fn waited(
    what: &str,
    limit: Duration,
    clones: &[&tempfile::TempDir],
    cond: impl FnMut() -> bool,
) {
    if !crate::common::poll_until(limit, cond) {
        panic!(
            "{what} (waited {limit:?}); the workers said:\n{}",
            logs(clones)
        );
    }
}

/// A running `submit`: the process and the threads reading its output.
pub(crate) struct Submitted {
    pub(crate) child: Killed,
    out: std::thread::JoinHandle<String>,
    err: std::thread::JoinHandle<String>,
}

/// Starts `submit --work --dispatch` on `server` for the request, with output captured.
pub(crate) fn submit(repo: &Repo, server: &NatsServer, cmd: &str) -> Submitted {
    let mut c = repo.forum();
    c.args([
        "submit",
        "--work",
        "--no-sandbox",
        "--check",
        "true",
        "--dispatch",
        &server.url(),
        "--cmd",
        cmd,
        "--json",
        "write the files",
    ]);
    spawned(c)
}

/// Starts `c` with its output captured.
pub(crate) fn spawned(mut c: Command) -> Submitted {
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = read(Box::new(child.stdout.take().unwrap()));
    let err = read(Box::new(child.stderr.take().unwrap()));
    Submitted {
        child: Killed(child),
        out,
        err,
    }
}

/// Waits (at most 3 minutes) for a submit to end; returns success, its JSON and its stderr.
pub(crate) fn finish(mut s: Submitted) -> (bool, J, String) {
    let start = Instant::now();
    loop {
        if let Some(status) = s.child.0.try_wait().unwrap() {
            let out = s.out.join().unwrap();
            let err = s.err.join().unwrap();
            let j = serde_json::from_str(&out).unwrap_or(J::Null);
            return (status.success(), j, err);
        }
        if start.elapsed() >= Duration::from_secs(180) {
            // Stopped, so its stderr can be read and shown with the caller's worker logs.
            let _ = s.child.0.kill();
            let _ = s.child.0.wait();
            let err = s.err.join().unwrap_or_default();
            let _ = s.out.join();
            return (
                false,
                J::Null,
                format!("the dispatched run did not end in 3 minutes; its stderr:\n{err}"),
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The `result` entries of tasks (the synthesizer's answer is a `result` too): each names the
/// worker that did it.
pub(crate) fn task_results(repo: &Repo) -> Vec<(u64, J)> {
    payloads(repo, "result")
        .into_iter()
        .filter(|(_, p)| p.get("worker").is_some())
        .collect()
}

/// The tree of the run branch of run 0.
pub(crate) fn run_tree(repo: &Repo) -> String {
    repo.git_ok(&["rev-parse", "forum/run-0^{tree}"])
}

/// [`PLAN`] run in process, in a fresh repository of the same kind: its run tree.
pub(crate) fn in_process_tree(kind: &str) -> String {
    in_process_tree_of(kind, PLAN)
}

/// `plan` run in process, in a fresh repository of kind `kind`: its run tree.
pub(crate) fn in_process_tree_of(kind: &str, plan: &str) -> String {
    let other = Repo::new(kind);
    setup(&other);
    let m = model(&other, plan);
    other.forum_ok(&[
        "submit",
        "--work",
        "--no-sandbox",
        "--check",
        "true",
        "--cmd",
        &m,
        "write the files",
    ]);
    run_tree(&other)
}

#[test]
fn six_tasks_on_three_workers_one_killed_are_each_merged_once_as_in_process() {
    on_each_kind(|repo| {
        let server = NatsServer::start();
        let (_bare, url) = shared(repo);
        let m = model(repo, PLAN);
        let clones: Vec<_> = (0..3).map(|_| clone(&url)).collect();
        let mark = clones[0].path().join("started");
        let slow = slow_model(clones[0].path(), &m, &mark);
        // The first worker takes a task and is killed while its model works on it (unconfined:
        // its model marks its start outside the worktree, which a sandbox would not let it).
        let mut victim = worker(
            repo,
            clones[0].path(),
            &server,
            &slow,
            &["--name", "victim", "--no-sandbox"],
        );
        let run = submit(repo, &server, &m);
        crate::common::wait_until(
            "the first worker to start a task",
            Duration::from_secs(60),
            || mark.exists(),
        );
        let _w1 = worker(repo, clones[1].path(), &server, &m, &["--name", "w1"]);
        let _w2 = worker(repo, clones[2].path(), &server, &m, &["--name", "w2"]);
        victim.0.kill().unwrap();
        victim.0.wait().unwrap();
        // Its model, orphaned, finishes and exits; nothing listens for what it says.
        std::fs::write(release(&mark), "").unwrap();
        let (ok, j, err) = finish(run);
        let said = logs(&clones.iter().collect::<Vec<_>>());
        assert!(ok, "{err}\n{said}");
        let answer = j["answer"].as_str().unwrap_or_default();
        for t in 1..=6 {
            assert!(
                answer.contains(&format!("- T{t}: merged")),
                "{answer}\n{err}"
            );
        }
        // Each task dispatched once, answered once, merged once.
        assert_eq!(payloads(repo, "task_dispatched").len(), 6);
        let results = task_results(repo);
        assert_eq!(results.len(), 6, "{results:?}");
        for (_, r) in &results {
            assert!(["w1", "w2"].contains(&r["worker"].as_str().unwrap()), "{r}");
            assert_eq!(r["claims"]["checks"][0]["ok"], true, "{r}");
        }
        let on_branch = repo.git_ok(&["rev-list", "--count", "main..forum/run-0"]);
        assert_eq!(on_branch, "6");
        // A lease that ran out on a busy machine gives a task to both workers: the second
        // answer is a duplicate of the same change, never merged.
        crate::dispatch_redeliver::duplicates_name_their_results_ref(repo, &url);
        repo.forum_ok(&["verify", "--deep"]);
        assert_eq!(run_tree(repo), in_process_tree(repo.kind()));
    });
}

#[test]
fn a_worker_that_answers_twice_is_witnessed_as_a_duplicate_and_merged_once() {
    let repo = Repo::new("sha1");
    let server = NatsServer::start();
    let (_bare, url) = shared(&repo);
    let m = model(&repo, TWO);
    let c = clone(&url);
    let _w = worker(&repo, c.path(), &server, &m, &["--answer-twice"]);
    let (ok, _, err) = finish(submit(&repo, &server, &m));
    assert!(ok, "{err}\n{}", logs(&[&c]));
    let dups = payloads(&repo, "duplicate_result");
    assert!(!dups.is_empty(), "{err}");
    for (_, d) in &dups {
        assert!(["T1", "T2"].contains(&d["task"].as_str().unwrap()), "{d}");
    }
    assert_eq!(task_results(&repo).len(), 2);
    assert_eq!(
        repo.git_ok(&["rev-list", "--count", "main..forum/run-0"]),
        "2"
    );
    repo.forum_ok(&["verify", "--deep"]);
}

/// Only the writer makes the ledger's streams: nats-server 2.9 can make a stream twice when two
/// creates arrive together, and a consumer made on the copy it drops hears no pull again.
#[test]
fn a_worker_started_before_its_writer_makes_no_stream_and_waits_for_it() {
    let repo = Repo::new("sha1");
    let server = NatsServer::start();
    let (_bare, url) = shared(&repo);
    let m = model(&repo, TWO);
    let c = clone(&url);
    let _w = worker(&repo, c.path(), &server, &m, &["--name", "early"]);
    waited(
        "the worker says it waits for the ledger's stream",
        Duration::from_secs(60),
        &[&c],
        || logs(&[&c]).contains("waiting for the stream of ledger main"),
    );
    for name in ["FORUM_main", "FORUM_main_WORKERS"] {
        let info = server.request(
            &format!("$JS.API.STREAM.INFO.{name}"),
            &serde_json::json!({}),
        );
        assert_eq!(info["error"]["err_code"], 10059, "{name}: {info}");
    }
    let (ok, _, err) = finish(submit(&repo, &server, &m));
    assert!(ok, "{err}\n{}", logs(&[&c]));
    let results = task_results(&repo);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results.iter().all(|(_, r)| r["worker"] == "early"),
        "{results:?}"
    );
    assert_eq!(
        repo.git_ok(&["rev-list", "--count", "main..forum/run-0"]),
        "2"
    );
    repo.forum_ok(&["verify", "--deep"]);
}

#[test]
fn results_of_the_wrong_shape_or_for_an_attempt_never_issued_are_refused_in_one_line() {
    let repo = Repo::new("sha1");
    let server = NatsServer::start();
    let (_bare, url) = shared(&repo);
    let plan = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"write f1.txt","depends_on":[],"done_when":["the file is there"]}]}"#;
    let m = model(&repo, plan);
    let c = clone(&url);
    // The ledger's stream is there (as an earlier run's writer left it); then anyone who can
    // publish sends two results for run 0 before it starts.
    server.make_ledger_stream("main");
    let _w = worker(&repo, c.path(), &server, &m, &[]);
    server.publish("forum.main.result.0", br#"{"schema":"nonsense"}"#);
    let forged = serde_json::json!({
        "schema": "git-forum.dispatch.result/1", "ledger": "main", "run": 0, "task": "T1",
        "attempt": "0123456789abcdef0123456789abcdef", "worker": "mallory", "ok": true,
        "output": "forged", "model": "m", "commit": null, "error": null, "tool_calls": [],
        "model_calls": [], "checks": [], "confinement": "none",
    });
    server.publish("forum.main.result.0", forged.to_string().as_bytes());
    let (ok, _, err) = finish(submit(&repo, &server, &m));
    assert!(ok, "{err}");
    let refused: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("refused a message on the results stream"))
        .collect();
    assert_eq!(refused.len(), 2, "{err}");
    assert!(
        refused[0].contains("result message: not of its shape"),
        "{err}"
    );
    assert!(
        refused[1].contains(
            "a result for attempt 0123456789abcdef0123456789abcdef, which this run never issued"
        ),
        "{err}"
    );
    // Nothing of either is in the record; the real result is.
    let all = entries(&repo);
    let bodies: Vec<J> = all
        .iter()
        .map(|e| repo.forum_json(&["show", &e["seq"].to_string(), "--payload"])["payload"].clone())
        .collect();
    assert!(!bodies.iter().any(|b| b.to_string().contains("mallory")));
    assert_eq!(task_results(&repo).len(), 1);
}

#[test]
fn an_unreachable_server_is_one_line_and_nothing_is_written() {
    let repo = Repo::new("sha1");
    let (_bare, _url) = shared(&repo);
    let m = model(&repo, PLAN);
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let o = repo
        .forum()
        .args([
            "submit",
            "--work",
            "--dispatch",
            &format!("nats://127.0.0.1:{port}"),
            "--cmd",
            &m,
            "write the files",
        ])
        .output()
        .unwrap();
    let line = crate::common::one_line_error(&o, "cannot reach the NATS server");
    assert!(line.contains(&format!("127.0.0.1:{port}")), "{line}");
    assert!(
        repo.git(&["rev-parse", "--verify", "-q", "refs/forum/ledgers/main"])
            .stdout
            .is_empty()
    );
}

#[test]
fn a_stream_of_another_ledger_is_one_line_and_nothing_is_written() {
    let repo = Repo::new("sha1");
    let server = NatsServer::start();
    let (_bare, _url) = shared(&repo);
    let m = model(&repo, PLAN);
    let made = server.request(
        "$JS.API.STREAM.CREATE.FORUM_main",
        &serde_json::json!({"name": "FORUM_main", "subjects": ["elsewhere.>"], "storage": "memory"}),
    );
    assert!(made["config"].is_object(), "{made}");
    let o = repo
        .forum()
        .args([
            "submit",
            "--work",
            "--dispatch",
            &server.url(),
            "--cmd",
            &m,
            "write the files",
        ])
        .output()
        .unwrap();
    let line = crate::common::one_line_error(&o, "is not ledger main's");
    assert!(line.contains("FORUM_main"), "{line}");
    assert!(
        repo.git(&["rev-parse", "--verify", "-q", "refs/forum/ledgers/main"])
            .stdout
            .is_empty()
    );
}

/// A writer's seat that holds each pre-ship gate call until a second one is under way (at most
/// a minute), then answers as `model` does; a gate call that found itself alone answers
/// `block`. Each call leaves `gate.PID` in `dir`.
fn gate_pair_model(dir: &Path, model: &str) -> String {
    let path = dir.join("gate-pair.sh");
    let d = dir.display();
    let body = format!(
        "#!/bin/sh\nfor p; do :; done\ncase \"$p\" in\n  *\"Decide whether to ship\"*)\n    touch '{d}/gate.'$$\n    i=0\n    while [ \"$(ls '{d}' | grep -c '^gate[.]')\" -lt 2 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n    if [ $i -ge 600 ]; then echo '{{\"decision\":\"block\",\"reason\":\"asked alone\"}}'; exit 0; fi ;;\nesac\nexec '{model}' \"$@\"\n"
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

#[test]
fn the_writer_asks_the_gate_about_a_waves_results_at_once_and_witnesses_them_in_plan_order() {
    on_each_kind(|repo| {
        let server = NatsServer::start();
        let (_bare, url) = shared(repo);
        let m = model(repo, TWO);
        let seat = tempfile::tempdir().unwrap();
        // The writer's gate calls hold until both are under way: asked one after the other,
        // the first would answer `block` after a minute and T1 would not merge.
        let gate = gate_pair_model(seat.path(), &m);
        let c = clone(&url);
        let _w = worker(repo, c.path(), &server, &m, &["--name", "w1"]);
        let (ok, j, err) = finish(submit(repo, &server, &gate));
        assert!(ok, "{err}\n{}", logs(&[&c]));
        let answer = j["answer"].as_str().unwrap_or_default();
        for t in 1..=2 {
            assert!(
                answer.contains(&format!("- T{t}: merged")),
                "{answer}\n{err}"
            );
        }
        let gates = std::fs::read_dir(seat.path())
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                name.to_string_lossy().starts_with("gate.")
            })
            .count();
        assert_eq!(gates, 2, "one gate call a change");
        // The answers came in any order; the record has them in plan order, each a merge,
        // and the merges in the same order.
        let ships: Vec<(String, String)> = payloads(repo, "ship")
            .into_iter()
            .map(|(_, p)| {
                let s = |k: &str| p[k].as_str().unwrap_or_default().to_string();
                (s("task"), s("decision"))
            })
            .collect();
        assert_eq!(
            ships,
            [("T1".into(), "merge".into()), ("T2".into(), "merge".into())]
        );
        let merged: Vec<String> = payloads(repo, "integrated")
            .into_iter()
            .map(|(_, p)| p["task"].as_str().unwrap_or_default().to_string())
            .collect();
        assert_eq!(merged, ["T1", "T2"]);
        repo.forum_ok(&["verify", "--deep"]);
        assert_eq!(run_tree(repo), in_process_tree_of(repo.kind(), TWO));
    });
}
