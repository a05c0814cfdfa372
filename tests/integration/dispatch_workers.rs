//! Workers a server owns: the daemon's `POST /worker`, `GET /workers` and `POST /worker/stop`
//! (MCP `worker_start`, `workers`, `worker_stop`) start a worker in the served repository with
//! the server's executors, show its state and the tasks it did, and stop it. Each test starts
//! its own `nats-server` (see `dispatch_nats.rs`) and stops it with everything else it starts.

use std::net::TcpListener;
use std::time::Duration;

use serde_json::{Value as J, json};

use crate::common::{self, Repo};
use crate::dispatch_nats::{NatsServer, PLAN, TWO, finish, model, shared, submit, task_results};

/// A repository for a server's workers: the shared remote as `origin`, its `main` checked out.
fn worker_repo(url: &str) -> Repo {
    let r = Repo::new(common::FORMATS[0]);
    r.git_ok(&["remote", "add", "origin", url]);
    r.git_ok(&["fetch", "-q", "origin"]);
    r.git_ok(&["checkout", "-q", "-b", "main", "origin/main"]);
    r
}

/// The workers the daemon at `addr` lists.
fn listed(addr: &str) -> Vec<J> {
    let (code, body) = common::http_json(addr, "GET", "/workers", &json!({}));
    assert_eq!(code, 200, "{body}");
    body["workers"].as_array().cloned().unwrap_or_default()
}

fn nowhere() -> String {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("nats://127.0.0.1:{port}")
}

#[test]
fn the_daemon_starts_a_worker_that_does_a_dispatched_runs_tasks_shows_it_and_stops_it() {
    let repo = Repo::new(common::FORMATS[0]);
    let server = NatsServer::start();
    let (_bare, url) = shared(&repo);
    let m = model(&repo, PLAN);
    let wr = worker_repo(&url);
    let served = wr.serve(&["--cmd", &m], std::process::Stdio::null());
    let addr = served.addr.as_str();
    // Bad requests start nothing: a missing server, a concurrency out of range, a server that
    // cannot be reached.
    let (code, body) = common::http_json(addr, "POST", "/worker", &json!({"remote": "origin"}));
    assert_eq!(code, 400, "{body}");
    let (code, body) = common::http_json(
        addr,
        "POST",
        "/worker",
        &json!({"nats": server.url(), "concurrency": 0}),
    );
    assert_eq!(code, 400, "{body}");
    assert!(body.to_string().contains("from 1 to 64"), "{body}");
    let (code, body) = common::http_json(addr, "POST", "/worker", &json!({"nats": nowhere()}));
    assert_eq!(code, 503, "{body}");
    assert!(
        body.to_string().contains("cannot reach the NATS server"),
        "{body}"
    );
    assert!(listed(addr).is_empty());
    // A worker the daemon owns, named; a second of the same name is refused while it runs.
    let start = json!({"nats": server.url(), "name": "dw", "lease": 2});
    let (code, view) = common::http_json(addr, "POST", "/worker", &start);
    assert_eq!(code, 200, "{view}");
    assert_eq!(view["name"], "dw", "{view}");
    assert_eq!(view["state"], "running", "{view}");
    assert_eq!(view["tasks_done"], 0, "{view}");
    let (code, body) = common::http_json(addr, "POST", "/worker", &start);
    assert_eq!(code, 409, "{body}");
    // A dispatched run elsewhere: every task is done by the daemon's worker.
    let (ok, j, err) = finish(submit(&repo, &server, &m));
    assert!(ok, "{err}\n{j}");
    let results = task_results(&repo);
    assert_eq!(results.len(), 6, "{results:?}");
    assert!(
        results.iter().all(|(_, r)| r["worker"] == "dw"),
        "{results:?}"
    );
    repo.forum_ok(&["verify", "--deep"]);
    common::wait_until(
        "the daemon to count the worker's six tasks",
        Duration::from_secs(60),
        || listed(addr).first().is_some_and(|w| w["tasks_done"] == 6),
    );
    // Stopped: it finishes what it holds, pulls no more, and shows as stopped.
    let (code, view) = common::http_json(addr, "POST", "/worker/stop", &json!({"name": "dw"}));
    assert_eq!(code, 200, "{view}");
    assert!(
        ["stopping", "stopped"].contains(&view["state"].as_str().unwrap()),
        "{view}"
    );
    common::wait_until("the worker to stop", Duration::from_secs(60), || {
        listed(addr)
            .first()
            .is_some_and(|w| w["state"] == "stopped")
    });
    let (code, body) = common::http_json(addr, "POST", "/worker/stop", &json!({"name": "nobody"}));
    assert_eq!(code, 404, "{body}");
}

#[test]
fn the_mcp_tools_start_list_and_stop_a_worker() {
    let repo = Repo::new(common::FORMATS[0]);
    let server = NatsServer::start();
    let (_bare, url) = shared(&repo);
    let m = model(&repo, PLAN);
    let wr = worker_repo(&url);
    let call = |id: u64, name: &str, args: J| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": args}})
        .to_string()
    };
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}})
        .to_string(),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        call(
            2,
            "worker_start",
            json!({"nats": server.url(), "name": "mw"}),
        ),
        call(3, "workers", json!({})),
        call(4, "worker_stop", json!({"name": "mw"})),
        call(5, "worker_start", json!({"nats": nowhere()})),
    ];
    let (ok, out) = wr.mcp_batch(&["--cmd", &m], &lines);
    assert!(ok, "{out}");
    let reply = |id: u64| -> J {
        out.lines()
            .map(|l| serde_json::from_str::<J>(l).unwrap())
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("no reply {id}: {out}"))
    };
    let started = &reply(2)["result"]["structuredContent"];
    assert_eq!(started["name"], "mw", "{out}");
    assert_eq!(started["state"], "running", "{out}");
    let listed = &reply(3)["result"]["structuredContent"]["workers"];
    assert_eq!(listed[0]["name"], "mw", "{out}");
    assert_eq!(listed[0]["server"], server.url(), "{out}");
    let stopped = &reply(4)["result"]["structuredContent"];
    assert!(
        ["stopping", "stopped"].contains(&stopped["state"].as_str().unwrap()),
        "{out}"
    );
    let refused = reply(5);
    assert_eq!(refused["result"]["isError"], true, "{out}");
    assert!(
        refused.to_string().contains("cannot reach the NATS server"),
        "{out}"
    );
}

#[test]
fn workers_started_together_make_no_stream_and_all_open_the_consumer_once_a_writer_made_it() {
    // Only a writer makes the ledger's stream (nats-server 2.9 can make a stream twice when two
    // creates arrive together, and a consumer made on the dropped copy never hears a pull
    // again). The workers' consumer they still make, all at once: the server refuses all but
    // the first create, and each later one looks it up (`fleet::nats::tests` checks the rule;
    // how often the starts overlap depends on the machine's load).
    let repo = Repo::new(common::FORMATS[0]);
    let (_bare, url) = shared(&repo);
    let c = worker_repo(&url);
    let eight = |server: &NatsServer| {
        c.forum()
            .args(["worker", "--nats", &server.url(), "--no-sandbox"])
            .args([
                "--cmd",
                "true",
                "--spawn",
                "8",
                "--max-tasks",
                "0",
                "--name",
                "w",
            ])
            .output()
            .unwrap()
    };
    for round in 0..5 {
        let server = NatsServer::start();
        let out = eight(&server);
        assert!(
            out.status.success(),
            "round {round}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let none = server.request("$JS.API.STREAM.INFO.FORUM_main", &json!({}));
        assert_eq!(none["error"]["err_code"], 10059, "{none}");
        server.make_ledger_stream("main");
        let out = eight(&server);
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "round {round}: {said}");
        let workers = server.request("$JS.API.CONSUMER.INFO.FORUM_main.workers-main", &json!({}));
        assert_eq!(
            workers["config"]["durable_name"], "workers-main",
            "{workers}"
        );
    }
}

/// A `git forum mcp` session kept open: lines written to it, replies read as they come.
struct McpSession {
    child: crate::dispatch_nats::Killed,
    stdin: Option<std::process::ChildStdin>,
    replies: std::sync::mpsc::Receiver<J>,
    next: u64,
}

impl McpSession {
    /// Starts `git forum mcp ARGS` in `repo` and initializes the session.
    fn start(repo: &Repo, args: &[&str]) -> McpSession {
        use std::io::BufRead;
        use std::process::Stdio;
        let mut child = repo
            .forum()
            .arg("mcp")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, replies) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(v) = serde_json::from_str::<J>(&line.unwrap_or_default()) else {
                    continue;
                };
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let mut s = McpSession {
            child: crate::dispatch_nats::Killed(child),
            stdin,
            replies,
            next: 1,
        };
        s.ask(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}),
        );
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    fn send(&mut self, v: &J) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request and waits (at most 5 minutes: a guard against a hung server) for its reply.
    fn ask(&mut self, method: &str, params: J) -> J {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let r = self
                .replies
                .recv_timeout(Duration::from_secs(300))
                .unwrap_or_else(|_| panic!("no reply to {method} ({id})"));
            if r["id"] == id {
                return r;
            }
        }
    }

    /// A tool's structured answer.
    fn tool(&mut self, name: &str, args: J) -> J {
        let r = self.ask("tools/call", json!({"name": name, "arguments": args}));
        r["result"]["structuredContent"].clone()
    }
}

#[test]
fn a_worker_started_over_mcp_does_a_dispatched_runs_tasks_and_the_run_merges_them() {
    let repo = Repo::new(common::FORMATS[0]);
    let server = NatsServer::start();
    let (_bare, url) = shared(&repo);
    let m = model(&repo, TWO);
    let wr = worker_repo(&url);
    let mut mcp = McpSession::start(&wr, &["--cmd", &m]);
    let started = mcp.tool(
        "worker_start",
        json!({"nats": server.url(), "name": "mw", "lease": 2}),
    );
    assert_eq!(started["state"], "running", "{started}");
    // A dispatched run elsewhere: both its tasks done by the worker the MCP server started,
    // and merged by the run.
    let (ok, j, err) = finish(submit(&repo, &server, &m));
    assert!(ok, "{err}\n{j}");
    let answer = j["answer"].as_str().unwrap_or_default();
    for t in 1..=2 {
        assert!(answer.contains(&format!("- T{t}: merged")), "{answer}");
    }
    let results = task_results(&repo);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results.iter().all(|(_, r)| r["worker"] == "mw"),
        "{results:?}"
    );
    assert_eq!(
        repo.git_ok(&["rev-list", "--count", "main..forum/run-0"]),
        "2"
    );
    repo.forum_ok(&["verify", "--deep"]);
    common::wait_until(
        "the MCP server to count the worker's two tasks",
        Duration::from_secs(60),
        || mcp.tool("workers", json!({}))["workers"][0]["tasks_done"] == 2,
    );
    let stopped = mcp.tool("worker_stop", json!({"name": "mw"}));
    assert!(
        ["stopping", "stopped"].contains(&stopped["state"].as_str().unwrap()),
        "{stopped}"
    );
    // Its input closed, the session ends.
    mcp.stdin.take();
    common::wait_until("the MCP server to exit", Duration::from_secs(60), || {
        mcp.child.0.try_wait().unwrap().is_some()
    });
}
