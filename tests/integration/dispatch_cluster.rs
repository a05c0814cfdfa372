//! `submit --work --dispatch` against a NATS JetStream cluster of three `nats-server -js`
//! processes on loopback, with `[dispatch] replicas = 3`: the ledger's stream has three copies,
//! the writer and the workers each know several servers of the cluster, and the node that leads
//! the stream is killed while every worker holds a task. The run goes on on the other two:
//! every task merged once, `verify --deep` passes, the run's tree is the in-process run's.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value as J;

use crate::common::{Repo, on_each_kind, wait_until};
use crate::dispatch_nats::{
    Killed, PLAN, clone, finish, in_process_tree, logs, model, release, run_tree, shared,
    slow_model, spawned, task_results,
};
use crate::work_run::payloads;

/// One `nats-server -js` of the cluster: its name, client port, process and store.
struct Node {
    name: String,
    port: u16,
    child: Option<Child>,
    _store: tempfile::TempDir,
}

/// Three nodes of one cluster (`forum-test`), each routed to the other two; every node still
/// running is killed on drop.
struct Cluster {
    nodes: Vec<Node>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Cluster {
    fn start() -> Cluster {
        let program = ["/usr/sbin/nats-server", "/usr/bin/nats-server"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .unwrap_or("nats-server");
        let routes: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let mut nodes = Vec::new();
        for (i, route) in routes.iter().enumerate() {
            let others: Vec<String> = routes
                .iter()
                .filter(|r| *r != route)
                .map(|r| format!("nats://127.0.0.1:{r}"))
                .collect();
            let store = tempfile::tempdir().unwrap();
            let port = free_port();
            let name = format!("n{i}");
            let child = Command::new(program)
                .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string()])
                .args(["--server_name", &name, "--cluster_name", "forum-test"])
                .args(["--cluster", &format!("nats://127.0.0.1:{route}")])
                .args(["--routes", &others.join(",")])
                .arg("-sd")
                .arg(store.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("nats-server is installed (.ci/run installs Debian's)");
            nodes.push(Node {
                name,
                port,
                child: Some(child),
                _store: store,
            });
        }
        let c = Cluster { nodes };
        // Ready when the cluster can place a stream of three copies: a meta leader is chosen
        // and every node has joined it.
        let probe = serde_json::json!({"name": "PROBE", "subjects": ["probe"],
            "num_replicas": 3, "storage": "memory"});
        wait_until(
            "the cluster to place a stream of three copies",
            Duration::from_secs(90),
            || {
                c.request(0, "$JS.API.STREAM.CREATE.PROBE", &probe)
                    .is_some_and(|r| r["config"].is_object())
            },
        );
        let gone = c.request(0, "$JS.API.STREAM.DELETE.PROBE", &serde_json::json!({}));
        assert!(gone.is_some_and(|r| r["success"] == true));
        c
    }

    /// `nats://127.0.0.1:PORT` of the nodes `which`, comma-separated.
    fn urls(&self, which: &[usize]) -> String {
        which
            .iter()
            .map(|&i| format!("nats://127.0.0.1:{}", self.nodes[i].port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Sends a JetStream API request to node `node` and returns the reply's JSON, or `None`
    /// when none came within 3 seconds (no leader yet) or the node is down.
    fn request(&self, node: usize, subject: &str, body: &J) -> Option<J> {
        let mut s = TcpStream::connect(("127.0.0.1", self.nodes[node].port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
        line_starting(&mut s, "INFO")?;
        let body = body.to_string();
        write!(
            s,
            "CONNECT {{\"verbose\":false,\"pedantic\":false}}\r\nSUB _INBOX.c 1\r\nPUB {subject} _INBOX.c {}\r\n{body}\r\n",
            body.len()
        )
        .ok()?;
        let line = line_starting(&mut s, "MSG _INBOX.c")?;
        let n: usize = line.split_whitespace().last()?.parse().ok()?;
        let mut buf = vec![0; n];
        s.read_exact(&mut buf).ok()?;
        serde_json::from_slice(&buf).ok()
    }

    /// The name of the node leading the ledger's stream, as node `via` sees it.
    fn stream_leader(&self, via: usize) -> Option<String> {
        let info = self.request(
            via,
            "$JS.API.STREAM.INFO.FORUM_main",
            &serde_json::json!({}),
        )?;
        info["cluster"]["leader"].as_str().map(str::to_string)
    }

    /// Kills node `i` (SIGKILL) and reaps it.
    fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.nodes[i].child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            if let Some(mut c) = self.nodes[i].child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// Reads lines from `s` until one starts with `prefix`; `None` on a timeout or a closed socket.
fn line_starting(s: &mut TcpStream, prefix: &str) -> Option<String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        s.read_exact(&mut byte).ok()?;
        line.push(byte[0]);
        if byte[0] == b'\n' {
            let text = String::from_utf8_lossy(&line).trim().to_string();
            if text.starts_with(prefix) {
                return Some(text);
            }
            line.clear();
        }
    }
}

/// Asks for three copies of the ledger's streams in the runtime config of the repository at
/// `dir` (the writer's, or a worker's clone).
fn three_replicas(dir: &Path) {
    std::fs::create_dir_all(dir.join(".forum")).unwrap();
    std::fs::write(
        dir.join(".forum/runtime.toml"),
        "[dispatch]\nreplicas = 3\n",
    )
    .unwrap();
}

/// A worker in `clone` on the servers `urls`, unconfined (its model marks its start outside
/// its worktree), with a lease of 15 seconds.
fn worker(repo: &Repo, clone: &Path, urls: &str, cmd: &str, name: &str) -> Killed {
    let mut c = repo.forum();
    c.current_dir(clone.join("c"))
        .args(["worker", "--nats", urls, "--lease", "15", "--cmd", cmd])
        .args(["--name", name, "--no-sandbox"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(clone.join("worker.log")).unwrap());
    Killed(c.spawn().unwrap())
}

#[test]
fn heavy_a_three_node_cluster_loses_the_streams_leader_mid_run_and_every_task_merges_once() {
    on_each_kind(|repo| {
        let mut cluster = Cluster::start();
        let (_bare, url) = shared(repo);
        three_replicas(repo.path());
        let m = model(repo, PLAN);
        let clones: Vec<_> = (0..3).map(|_| clone(&url)).collect();
        let marks: Vec<_> = clones.iter().map(|c| c.path().join("started")).collect();
        // Worker i knows nodes i and i+1: the three connect across the cluster.
        let _workers: Vec<Killed> = (0..3)
            .map(|i| {
                three_replicas(&clones[i].path().join("c"));
                let slow = slow_model(clones[i].path(), &m, &marks[i]);
                let urls = cluster.urls(&[i, (i + 1) % 3]);
                worker(repo, clones[i].path(), &urls, &slow, &format!("w{i}"))
            })
            .collect();
        let mut c = repo.forum();
        c.args(["submit", "--work", "--no-sandbox", "--check", "true"])
            .args(["--dispatch", &cluster.urls(&[0, 1, 2]), "--cmd", &m])
            .args(["--json", "write the files"]);
        let mut run = spawned(c);
        // Each worker holds one task of the first wave; nothing is being published.
        let mut ended = false;
        let started = crate::common::poll_until(Duration::from_secs(120), || {
            ended = run.child.0.try_wait().unwrap().is_some();
            ended || marks.iter().all(|m| m.exists())
        });
        if ended || !started {
            let _ = run.child.0.kill();
            let (_, _, err) = finish(run);
            let info = cluster.request(0, "$JS.API.STREAM.INFO.FORUM_main", &serde_json::json!({}));
            panic!(
                "no worker holds a task of each (run ended early: {ended}): {err}\n{}\n{info:?}",
                logs(&clones.iter().collect::<Vec<_>>())
            );
        }
        let info = cluster
            .request(0, "$JS.API.STREAM.INFO.FORUM_main", &serde_json::json!({}))
            .expect("the stream's info");
        assert_eq!(info["config"]["num_replicas"], 3, "{info}");
        let leader = cluster.stream_leader(0).expect("the stream has a leader");
        let victim = cluster.nodes.iter().position(|n| n.name == leader).unwrap();
        cluster.kill(victim);
        let alive = (victim + 1) % 3;
        wait_until(
            "a new leader of the stream on a node still running",
            Duration::from_secs(60),
            || cluster.stream_leader(alive).is_some_and(|l| l != leader),
        );
        for mark in &marks {
            std::fs::write(release(mark), "").unwrap();
        }
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
        // One result per task (a late second answer, if any, is a duplicate and not merged).
        let results = task_results(repo);
        let mut tasks: Vec<&str> = results
            .iter()
            .map(|(_, r)| r["id"].as_str().unwrap())
            .collect();
        tasks.sort();
        assert_eq!(tasks, ["T1", "T2", "T3", "T4", "T5", "T6"], "{results:?}");
        let on_branch = repo.git_ok(&["rev-list", "--count", "main..forum/run-0"]);
        assert_eq!(on_branch, "6", "{err}\n{said}");
        assert_eq!(payloads(repo, "task_dispatched").len(), 6);
        repo.forum_ok(&["verify", "--deep"]);
        assert_eq!(run_tree(repo), in_process_tree(repo.kind()));
    });
}

/// `submit --work --dispatch URL` in a fresh repository with its remote; its output.
fn submit_to(repo: &Repo, url: &str) -> std::process::Output {
    let m = model(repo, PLAN);
    repo.forum()
        .args(["submit", "--work", "--dispatch", url, "--cmd", &m])
        .arg("write the files")
        .output()
        .unwrap()
}

fn no_ledger(repo: &Repo) {
    let out = repo.git(&["rev-parse", "--verify", "-q", "refs/forum/ledgers/main"]);
    assert!(out.stdout.is_empty());
}

#[test]
fn replicas_out_of_range_are_one_line_and_nothing_is_written() {
    let repo = Repo::new("sha1");
    let (_bare, _url) = shared(&repo);
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        "[dispatch]\nreplicas = 9\n",
    )
    .unwrap();
    let o = submit_to(&repo, "nats://127.0.0.1:1");
    let line = crate::common::one_line_error(&o, "not a number of stream copies from 1 to 5");
    assert!(line.contains("replicas"), "{line}");
    no_ledger(&repo);
}

#[test]
fn servers_of_a_list_with_different_passwords_are_one_line_and_nothing_is_written() {
    let repo = Repo::new("sha1");
    let (_bare, _url) = shared(&repo);
    let o = submit_to(
        &repo,
        "nats://ann:first-secret@127.0.0.1:1,nats://bob:second-secret@127.0.0.1:2",
    );
    let line = crate::common::one_line_error(&o, "carry different users or passwords");
    assert!(
        !line.contains("first-secret") && !line.contains("second-secret"),
        "{line}"
    );
    let o = submit_to(&repo, "nats://127.0.0.1:1,,nats://127.0.0.1:2");
    crate::common::one_line_error(&o, "has an empty server between its commas");
    no_ledger(&repo);
}

#[test]
fn a_list_of_servers_reaches_the_one_that_runs() {
    let repo = Repo::new("sha1");
    let (_bare, _url) = shared(&repo);
    let server = crate::dispatch_nats::NatsServer::start();
    // One server of the list is not there (the client tries them in a random order): the
    // run still makes the ledger's stream on the one that is, and publishes its tasks there.
    let list = format!(
        "nats://127.0.0.1:{},nats://127.0.0.1:{}",
        free_port(),
        server.port
    );
    let m = model(&repo, PLAN);
    let mut c = repo.forum();
    c.args(["submit", "--work", "--no-sandbox", "--dispatch", &list])
        .args(["--cmd", &m, "write the files"]);
    let run = spawned(c);
    wait_until(
        "the first wave's three tasks on the live server",
        Duration::from_secs(60),
        || {
            server.request("$JS.API.STREAM.INFO.FORUM_main", &serde_json::json!({}))["state"]["messages"]
                == 3
        },
    );
    // No worker runs: the run would wait for one. It is stopped here.
    drop(run);
}
