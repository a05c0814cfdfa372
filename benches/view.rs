//! The review pages' render time: `cargo bench --bench view` (options after `--`: `--runs N`
//! runs in the ledger, default 10,000; `--tasks T` tasks in the big run, default 100;
//! `--rounds R` requests timed per page, default 20; `--busy`).
//!
//! Writes a Forum ledger directory of N small runs (request, plan of one task, task, result,
//! answer) and one run of T tasks in ten waves (request, plan with data and order edges, then a
//! task, result and verdict per task, and the answer), imports it, starts `git forum serve
//! --port 0`, logs in through `POST /view/mint`, and times each page beside the JSON route that
//! answers the same question, R times each after one request that warms the caches:
//!
//! * `/view/runs` (the newest 50) and `/view/runs?page=100` against `GET /runs`;
//! * `/view/run/BIG` and `/view/run/BIG/task/T50` against `GET /receipt/BIG`.
//!
//! Prints the median, p90 and max of each in milliseconds and the ratio of each page to its
//! JSON route. Nothing is asserted: the machine may be shared.

#[path = "support/serve.rs"]
mod serve;
use serve::hermetic;
#[path = "support/busy.rs"]
mod busy;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use git_forum::ledger::{Entry, NewEntry, Value, canonical, hash};

/// Builds the entries in seq order, with their bodies.
struct Ledger {
    entries: Vec<Entry>,
    bodies: std::collections::HashMap<String, Value>,
}

impl Ledger {
    fn put(
        &mut self,
        actor: &str,
        kind: &str,
        parent: Option<u64>,
        body: serde_json::Value,
    ) -> u64 {
        let payload = canonical::parse(&body.to_string()).unwrap();
        let new = NewEntry {
            actor: actor.into(),
            kind: kind.into(),
            causal_parent: parent.map(|p| p as i64),
            payload: payload.clone(),
            ts: 1_800_000_000.0 + self.entries.len() as f64,
        };
        let ph = hash::sha256_hex(payload.canonical().as_bytes());
        let e = Entry::next(self.entries.last(), &new, ph.clone());
        let seq = e.seq;
        self.bodies.insert(ph, payload);
        self.entries.push(e);
        seq
    }
}

/// `runs` small runs, then one of `tasks` tasks; the big run's request seq.
fn write_ledger(dir: &Path, runs: u64, tasks: u64) -> u64 {
    use serde_json::json;
    let mut l = Ledger {
        entries: Vec::new(),
        bodies: Default::default(),
    };
    for i in 0..runs {
        let r = l.put(
            "client",
            "request",
            None,
            json!({"text": format!("small request {i}")}),
        );
        let p = l.put("dispatch", "plan", Some(r), json!({"tasks": [{"id": "T1", "agent": "backend", "instruction": "do it", "depends_on": [], "order_deps": [], "done_when": []}], "waves": [["T1"]], "edges": []}));
        let t = l.put("dispatch", "task", Some(p), json!({"id": "T1", "agent": "backend", "instruction": "do it", "data_from": [], "done_when": []}));
        l.put("backend", "result", Some(t), json!({"id": "T1", "ok": true, "model": "m", "output": "done", "usage": {"model": "m", "prompt_tokens": 100, "completion_tokens": 20}}));
        l.put(
            "synthesizer",
            "result",
            Some(r),
            json!({"answer": format!("answer {i}")}),
        );
    }
    let ids: Vec<String> = (0..tasks).map(|i| format!("T{i}")).collect();
    let waves: Vec<Vec<&String>> = ids
        .chunks(tasks.div_ceil(10).max(1) as usize)
        .map(|c| c.iter().collect())
        .collect();
    let edges: Vec<serde_json::Value> = (1..tasks as usize)
        .map(|i| json!({"from": ids[i - 1], "to": ids[i], "type": if i % 2 == 0 { "data" } else { "order" }}))
        .filter(|_| true)
        .collect();
    let big = l.put("client", "request", None, json!({"text": "the big run"}));
    let plan_tasks: Vec<serde_json::Value> = ids.iter().map(|id| json!({"id": id, "agent": "backend", "instruction": format!("part {id}"), "depends_on": [], "order_deps": [], "done_when": []})).collect();
    let p = l.put(
        "dispatch",
        "plan",
        Some(big),
        json!({"tasks": plan_tasks, "waves": waves, "edges": edges}),
    );
    for id in &ids {
        let t = l.put("dispatch", "task", Some(p), json!({"id": id, "agent": "backend", "instruction": format!("part {id}"), "data_from": [], "done_when": []}));
        let r = l.put("backend", "result", Some(t), json!({"id": id, "ok": true, "model": "m", "output": format!("did {id}"), "usage": {"model": "m", "prompt_tokens": 1000, "completion_tokens": 200}}));
        l.put(
            "validator",
            "verdict",
            Some(r),
            json!({"id": id, "ok": true, "score": 0.9, "reason": "done"}),
        );
    }
    l.put(
        "synthesizer",
        "result",
        Some(big),
        json!({"answer": "the big answer"}),
    );
    git_forum::store::forum_dir::write(
        dir,
        &l.entries,
        |e| Ok(l.bodies.get(&e.payload_hash).cloned()),
        false,
    )
    .unwrap();
    big
}

/// One request on a fresh connection: status and body length.
fn get(addr: &str, method: &str, path: &str, extra: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(300))).unwrap();
    write!(s, "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{extra}Content-Length: 0\r\n\r\n").unwrap();
    let mut raw = String::new();
    let _ = s.read_to_string(&mut raw);
    let status = raw
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, raw)
}

fn stats(mut d: Vec<f64>) -> (f64, f64, f64) {
    d.sort_by(f64::total_cmp);
    let at = |p: f64| d[((d.len() as f64 * p).ceil() as usize).clamp(1, d.len()) - 1];
    (at(0.5), at(0.9), d[d.len() - 1])
}

/// Times `rounds` requests of `path` (after one that warms the caches): milliseconds.
fn time(addr: &str, path: &str, cookie: &str, rounds: usize) -> (f64, f64, f64) {
    let extra = format!("Cookie: {cookie}\r\n");
    let (status, _) = get(addr, "GET", path, &extra);
    assert_eq!(status, 200, "{path}");
    let times = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            let (status, _) = get(addr, "GET", path, &extra);
            assert_eq!(status, 200, "{path}");
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    stats(times)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let opt = |name: &str, default: u64| -> u64 {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (runs, tasks, rounds) = (
        opt("--runs", 10_000),
        opt("--tasks", 100).max(1),
        opt("--rounds", 20).max(1) as usize,
    );
    let busy = busy::Busy::from_args(&args);
    println!(
        "view bench: {runs} runs + one of {tasks} tasks, {rounds} requests a page; {}",
        busy::Busy::label(&busy)
    );
    let dir = tempfile::tempdir().unwrap();
    let mut git = Command::new("git");
    hermetic(&mut git, dir.path());
    assert!(git.args(["init", "-q", "."]).status().unwrap().success());
    let export = tempfile::tempdir().unwrap();
    let big = write_ledger(&export.path().join("ledger"), runs, tasks);
    let mut imp = Command::new(env!("CARGO_BIN_EXE_git-forum"));
    hermetic(&mut imp, dir.path());
    let o = imp
        .args(["import", export.path().join("ledger").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "import failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    let (_daemon, addr, token) =
        serve::start(dir.path(), &[], &["--timeout", "300"], Stdio::null());
    let (status, raw) = get(
        &addr,
        "POST",
        "/view/mint",
        &format!("Authorization: Bearer {}\r\n", token.trim()),
    );
    assert_eq!(status, 200, "{raw}");
    let body: serde_json::Value =
        serde_json::from_str(raw.split_once("\r\n\r\n").unwrap().1).unwrap();
    let (_, login) = get(&addr, "GET", body["path"].as_str().unwrap(), "");
    let cookie = login
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();

    let t = Instant::now();
    let _ = get(&addr, "GET", "/runs", "");
    println!(
        "first GET /runs (the whole ledger read once): {:.0} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    let rows = [
        ("/view/runs".to_string(), "/runs".to_string()),
        ("/view/runs?page=100".to_string(), "/runs".to_string()),
        (format!("/view/run/{big}"), format!("/receipt/{big}")),
        (
            format!("/view/run/{big}/task/T50"),
            format!("/receipt/{big}"),
        ),
    ];
    println!(
        "{:<28} {:>10} {:>8} {:>8}   {:<16} {:>10}   ratio",
        "page", "median ms", "p90", "max", "JSON route", "median ms"
    );
    for (page, json) in rows {
        let (m, p90, max) = time(&addr, &page, &cookie, rounds);
        let (jm, _, _) = time(&addr, &json, "", rounds);
        println!(
            "{page:<28} {m:>10.1} {p90:>8.1} {max:>8.1}   {json:<16} {jm:>10.1}   {:.2}",
            m / jm.max(1e-9)
        );
    }
}
