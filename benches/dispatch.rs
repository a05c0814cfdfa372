//! Dispatch through NATS JetStream against the in-process run: `cargo bench --bench dispatch`
//! (add `-- --runs R --tasks N --trivial N`; defaults 3, 100 and 10).
//!
//! Each case is a fresh repository on `main` with a bare remote, a `.forum/policy.toml` that
//! lets a plan hold every task and runs an in-process wave one task at a time
//! (`max_parallel = 1`), and a fresh `nats-server -js` on a free loopback port. One `sh` script
//! is the model everywhere: the planner gets a plan of N independent tasks (one wave), each
//! task writes the file its instruction names, every judgment passes and the gate merges.
//!
//! 1. **Overhead.** N trivial tasks (the model answers at once) run in process, one at a time,
//!    and dispatched to one worker, R times each, interleaved. The overhead of a task is the
//!    difference of the medians over N: what dispatch adds to a task when nothing else
//!    overlaps (publishing, a worker's fetch, worktree, commit and push, the writer's fetch
//!    and check of the result). Target: at most 100 ms.
//! 2. **Scale.** N tasks whose model sleeps one second first (as a model call waits) run once
//!    in process one at a time, and once each dispatched to 1, 4 and 16 workers (separate
//!    processes, each in its own clone). Printed: each wall time and the in-process time over
//!    it. Target: at least 12 with 16 workers.
//!
//! Every run's answer must say each task merged, else the bench stops. `uptime` is printed
//! before and after. Nothing here asserts a time: read the figures.

#[path = "support/git.rs"]
mod git;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const FORUM: &str = env!("CARGO_BIN_EXE_git-forum");

/// A `nats-server -js` on a free loopback port with a store of its own, killed on drop.
struct Nats {
    child: Child,
    port: u16,
    _store: tempfile::TempDir,
}

impl Nats {
    fn start() -> Nats {
        let program = ["/usr/sbin/nats-server", "/usr/bin/nats-server"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .unwrap_or("nats-server");
        let store = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(program)
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(store.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server (Debian: apt-get install nats-server)");
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "nats-server did not listen"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Nats {
            child,
            port,
            _store: store,
        }
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The model script in `dir`: a plan of `n` tasks, each task sleeping `sleep` seconds first.
fn model(dir: &Path, n: usize, sleep: u32) -> String {
    let tasks: Vec<String> = (1..=n)
        .map(|i| {
            format!(
                r#"{{"id":"T{i}","agent":"backend","instruction":"write f{i}.txt","depends_on":[],"done_when":["the file is there"]}}"#
            )
        })
        .collect();
    let plan = dir.join("plan.json");
    std::fs::write(&plan, format!(r#"{{"tasks":[{}]}}"#, tasks.join(","))).unwrap();
    let pause = if sleep > 0 {
        format!("sleep {sleep}; ")
    } else {
        String::new()
    };
    let body = format!(
        "#!/bin/sh\nfor p; do :; done\ncase \"$p\" in\n  *\"Break this request\"*) cat '{}' ;;\n  *\"Decide whether to ship\"*) echo '{{\"decision\":\"merge\",\"reason\":\"scripted\"}}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'done' ;;\n  *) {pause}f=$(printf '%s' \"$p\" | grep -o 'write f[0-9]*[.]txt' | head -1 | cut -d' ' -f2); echo \"$f\" > \"$f\"; echo \"wrote $f\" ;;\nesac\n",
        plan.display()
    );
    let path = dir.join("model.sh");
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// A case's folders: the repository (`repo`), its bare remote (`origin.git`), the model, and
/// the environment of every `git forum` it runs.
struct Case {
    dir: tempfile::TempDir,
    model: String,
}

impl Case {
    fn new(n: usize, sleep: u32) -> Case {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        let bare = dir.path().join("origin.git");
        std::fs::create_dir_all(repo.join(".forum")).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        git::git(dir.path(), &["init", "-q", "--bare", "origin.git"]);
        git::git(&repo, &["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("README"), "bench\n").unwrap();
        std::fs::write(repo.join(".gitignore"), ".forum/\n").unwrap();
        git::git(&repo, &["add", "."]);
        git::git(&repo, &["commit", "-q", "-m", "start"]);
        git::git(&repo, &["remote", "add", "origin", bare.to_str().unwrap()]);
        git::git(&repo, &["push", "-q", "origin", "main"]);
        std::fs::write(
            repo.join(".forum/policy.toml"),
            format!("max_parallel = 1\nmax_tasks = {}\n", n.max(1)),
        )
        .unwrap();
        let model = model(dir.path(), n, sleep);
        Case { dir, model }
    }

    fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    fn forum(&self, cwd: &Path) -> Command {
        let mut c = Command::new(FORUM);
        git::hermetic(&mut c, &self.dir.path().join("home"));
        c.current_dir(cwd)
            .env("GIT_FORUM_CACHE_DIR", self.dir.path().join("cache"))
            .env("GIT_FORUM_STATE_DIR", self.dir.path().join("state"));
        c
    }

    /// Starts `k` workers on `nats`, each in a clone of its own.
    fn workers(&self, nats: &Nats, k: usize) -> Vec<Child> {
        (0..k)
            .map(|i| {
                let clone = self.dir.path().join(format!("w{i}"));
                git::git(
                    self.dir.path(),
                    &["clone", "-q", "origin.git", clone.to_str().unwrap()],
                );
                let mut c = self.forum(&clone);
                c.args(["worker", "--nats", &nats.url(), "--remote", "origin"])
                    .args(["--no-sandbox", "--lease", "30", "--name", &format!("w{i}")])
                    .args(["--cmd", &self.model])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null());
                c.spawn().expect("a worker")
            })
            .collect()
    }

    /// Runs `submit --work` (dispatched to `nats` when given) and returns its wall time; every
    /// one of the `n` tasks must be merged.
    fn submit(&self, n: usize, nats: Option<&Nats>) -> Duration {
        let mut c = self.forum(&self.repo());
        c.args(["submit", "--work", "--no-sandbox", "--check", "true"])
            .args(["--cmd", &self.model, "--json"]);
        if let Some(s) = nats {
            c.args(["--dispatch", &s.url()]);
        }
        c.arg("write the files");
        let start = Instant::now();
        let o = c.output().expect("git forum submit");
        let took = start.elapsed();
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
        let answer = j["answer"].as_str().unwrap_or_default();
        let merged = (1..=n)
            .filter(|i| answer.contains(&format!("- T{i}: merged")))
            .count();
        assert!(
            o.status.success() && merged == n,
            "a run did not merge its {n} tasks ({merged} merged): {}",
            String::from_utf8_lossy(&o.stderr)
        );
        took
    }
}

/// One in-process run of `n` tasks (sleeping `sleep` seconds each) in a fresh case.
fn in_process(n: usize, sleep: u32) -> Duration {
    Case::new(n, sleep).submit(n, None)
}

/// One run of `n` tasks dispatched to `k` workers in a fresh case and a fresh server.
fn dispatched(n: usize, sleep: u32, k: usize) -> Duration {
    let case = Case::new(n, sleep);
    let nats = Nats::start();
    let mut workers = case.workers(&nats, k);
    let took = case.submit(n, Some(&nats));
    for w in &mut workers {
        let _ = w.kill();
        let _ = w.wait();
    }
    took
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(default)
}

fn uptime() {
    if let Ok(o) = Command::new("uptime").output() {
        print!("uptime: {}", String::from_utf8_lossy(&o.stdout));
    }
}

fn main() {
    let runs = arg("--runs", 3).max(1);
    let tasks = arg("--tasks", 100).max(1);
    let trivial = arg("--trivial", 10).max(1);
    uptime();
    println!(
        "1. overhead: {trivial} trivial tasks, in process one at a time vs dispatched to one worker, {runs} runs each"
    );
    let (mut local, mut remote) = (Vec::new(), Vec::new());
    for r in 0..runs {
        if r % 2 == 0 {
            local.push(in_process(trivial, 0));
            remote.push(dispatched(trivial, 0, 1));
        } else {
            remote.push(dispatched(trivial, 0, 1));
            local.push(in_process(trivial, 0));
        }
    }
    let (l, d) = (median(local), median(remote));
    let per_task = d.saturating_sub(l).as_secs_f64() * 1000.0 / trivial as f64;
    println!(
        "   in process: median {:.2} s ({:.0} ms a task)",
        l.as_secs_f64(),
        l.as_secs_f64() * 1000.0 / trivial as f64
    );
    println!(
        "   dispatched: median {:.2} s ({:.0} ms a task)",
        d.as_secs_f64(),
        d.as_secs_f64() * 1000.0 / trivial as f64
    );
    println!("   dispatch overhead: {per_task:.0} ms a task (target: at most 100)");
    println!("2. scale: {tasks} tasks whose model sleeps 1 s, one run each");
    let serial = in_process(tasks, 1);
    println!(
        "   in process, one at a time: {:.1} s",
        serial.as_secs_f64()
    );
    for k in [1, 4, 16] {
        let t = dispatched(tasks, 1, k);
        println!(
            "   dispatched to {k:>2} workers: {:.1} s, {:.2}x the in-process run{}",
            t.as_secs_f64(),
            serial.as_secs_f64() / t.as_secs_f64(),
            if k == 16 {
                " (target: at least 12x)"
            } else {
                ""
            }
        );
    }
    uptime();
}
