//! Daemon load run: `cargo bench --bench daemon` (options after `--`: `--seconds S` per phase,
//! default 10; `--clients N`, default 8; `--entries N` seeded first, default 1000;
//! `--no-fsync` to start the daemon with `--no-fsync`).
//!
//! Starts `git forum serve --port 0` on loopback in a fresh repository, seeds the ledger through
//! `POST /append`, then runs three phases with N keep-alive clients each: reads only (health,
//! status, checkpoint, one entry, one body, in turn), appends only, and a mix of nine reads to
//! one append. Prints requests/s, p50, p99 and max latency and the count of non-2xx answers
//! per phase; then stops the daemon with SIGTERM (it must exit 0) and checks
//! `git forum verify --deep`. Exits 1 on any non-2xx answer or failed check. Nothing here
//! asserts a time: the machine is shared and noisy. Every client sends the daemon's bearer
//! token, read from the file the daemon names on its second line, as a user's client would.
//!
//! `--wrk [--seconds S --rounds R --entries N --appenders A --threads T --connections C]
//! [--only ROUTE,...] [--busy]` runs the daemon's read routes under wrk against a hello-world
//! axum server in the same run, while A clients append (see `support/daemon_wrk.rs`); `--only`
//! keeps the routes that start with one of the given prefixes (`--only /status,/log`), and
//! `--routes PATH,...` runs the given read paths instead (`--routes /log?limit=1,/log?limit=100`);
//! `--hello-sized` compares each route with a hello-world answer of the route's own length.
//!
//! `--replay-memory` measures the daemon's memory instead: it imports a ledger of `--entries`
//! entries (default 45,001, seq 0 to 45,000) as one Forum directory, starts the daemon, and has
//! `--clients` clients (default 8) page through `GET /replay/LAST` at once (`?after=` the `next`
//! of each page, 1000 entries a page) `--rounds` times each (default 3). It prints the daemon's
//! peak resident size (`VmHWM` in `/proc/PID/status`) after start and after the clients, with
//! the pages, entries and bytes read. It reports a figure and asserts none.
//!
//! `--flood` measures a probe under a connection flood: with `--connections N` (default 2,000)
//! connections open from this process and waiting on it (a third with part of a request head,
//! a third with a POST head and none of its body, a third kept alive after a request), it
//! times `--probes K` (default 50) `GET /status` requests, each on a new connection, and the
//! same probes before the flood as the baseline; once with the default `--max-connections`
//! (the idle connections are evicted to make room) and once with a cap above the flood (all of
//! them held open). It prints medians, p99, max and the ratio to the baseline.
//!
//! `--projections` measures the daemon's cached `/summary` and `/verify` on a ledger of
//! `--entries` entries (default 100,000, imported as one Forum directory): the first request
//! (everything read), the same request repeated, and the request after one append (the
//! projections extended by one entry), `--rounds` times each (default 5), beside the CLI's
//! `git forum summary --json` and `git forum verify --deep --json` on the same ledger (whole
//! processes, each reading everything), with the daemon's resident size. Medians and ratios;
//! nothing asserted.

#[path = "support/serve.rs"]
mod serve;
use serve::{Daemon, hermetic};
#[path = "support/busy.rs"]
mod busy;
#[path = "support/daemon_wrk.rs"]
mod daemon_wrk;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The daemon's bearer token, once it started.
static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// A keep-alive HTTP/1.1 connection that reads `Content-Length` bodies.
struct Conn {
    addr: String,
    r: BufReader<TcpStream>,
}

impl Conn {
    fn open(addr: &str) -> Conn {
        let s = TcpStream::connect(addr).expect("connect to the daemon");
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        Conn {
            addr: addr.to_string(),
            r: BufReader::new(s),
        }
    }

    fn send(&mut self, method: &str, path: &str, body: &str) -> u16 {
        self.send_for_body(method, path, body).0
    }

    /// The status and the body of the answer (0 and nothing when the connection failed twice).
    fn send_for_body(&mut self, method: &str, path: &str, body: &str) -> (u16, Vec<u8>) {
        match self.try_send(method, path, body) {
            Some(answer) => answer,
            None => {
                *self = Conn::open(&self.addr);
                self.try_send(method, path, body).unwrap_or((0, Vec::new()))
            }
        }
    }

    fn try_send(&mut self, method: &str, path: &str, body: &str) -> Option<(u16, Vec<u8>)> {
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            TOKEN.get().map_or("", String::as_str),
            body.len()
        );
        self.r.get_mut().write_all(req.as_bytes()).ok()?;
        let mut line = String::new();
        self.r.read_line(&mut line).ok()?;
        let code: u16 = line.split(' ').nth(1)?.parse().ok()?;
        let mut len = 0usize;
        loop {
            line.clear();
            self.r.read_line(&mut line).ok()?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                len = v.trim().parse().ok()?;
            }
        }
        let mut buf = vec![0u8; len];
        self.r.read_exact(&mut buf).ok()?;
        Some((code, buf))
    }
}

struct Phase {
    name: &'static str,
    latencies: Vec<Duration>,
    non_2xx: usize,
    elapsed: Duration,
}

impl Phase {
    fn print(&mut self) {
        self.latencies.sort();
        let n = self.latencies.len();
        let pct = |p: f64| {
            if n == 0 {
                0.0
            } else {
                let i = ((n as f64 * p).ceil() as usize).clamp(1, n) - 1;
                self.latencies[i].as_secs_f64() * 1e3
            }
        };
        println!(
            "{:<8} {:>9} {:>10.0} {:>9.2} {:>9.2} {:>9.2} {:>8}",
            self.name,
            n,
            n as f64 / self.elapsed.as_secs_f64(),
            pct(0.50),
            pct(0.99),
            self.latencies.last().map_or(0.0, |d| d.as_secs_f64() * 1e3),
            self.non_2xx
        );
    }
}

fn append_body(client: usize, i: usize) -> String {
    format!(
        r#"{{"actor":"load-{client}","kind":"note","payload":{{"client":{client},"i":{i},"text":"a small body for the load run"}}}}"#
    )
}

/// Runs `clients` threads for `seconds`; each calls `step(conn, client, i)` in a loop.
fn run_phase(
    name: &'static str,
    addr: &str,
    clients: usize,
    seconds: f64,
    step: fn(&mut Conn, usize, usize, u64) -> u16,
    entries: u64,
) -> Phase {
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(seconds);
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let addr = addr.to_string();
            std::thread::spawn(move || {
                let mut conn = Conn::open(&addr);
                let mut lat = Vec::new();
                let mut bad = 0;
                let mut i = 0;
                while Instant::now() < deadline {
                    let t = Instant::now();
                    let code = step(&mut conn, c, i, entries);
                    lat.push(t.elapsed());
                    if !(200..300).contains(&code) {
                        bad += 1;
                    }
                    i += 1;
                }
                (lat, bad)
            })
        })
        .collect();
    let mut phase = Phase {
        name,
        latencies: Vec::new(),
        non_2xx: 0,
        elapsed: Duration::ZERO,
    };
    for h in handles {
        let (lat, bad) = h.join().unwrap();
        phase.latencies.extend(lat);
        phase.non_2xx += bad;
    }
    phase.elapsed = start.elapsed();
    phase
}

fn read_step(conn: &mut Conn, c: usize, i: usize, entries: u64) -> u16 {
    let seq = (c as u64 * 7919 + i as u64 * 104_729) % entries.max(1);
    match i % 5 {
        0 => conn.send("GET", "/health", ""),
        1 => conn.send("GET", "/status", ""),
        2 => conn.send("GET", "/checkpoint", ""),
        3 => conn.send("GET", &format!("/ledger/{seq}"), ""),
        _ => conn.send("GET", &format!("/payload/{seq}"), ""),
    }
}

fn append_step(conn: &mut Conn, c: usize, i: usize, _: u64) -> u16 {
    conn.send("POST", "/append", &append_body(c, i))
}

fn mixed_step(conn: &mut Conn, c: usize, i: usize, entries: u64) -> u16 {
    if i % 10 == 9 {
        append_step(conn, c, i, entries)
    } else {
        read_step(conn, c, i, entries)
    }
}

/// Starts `git forum serve --port 0 ARGS` in `dir`: the daemon, its address, and its token
/// (read from the file it names on its second line, `token-file PATH`).
fn start_daemon(dir: &Path, before: &[&str], args: &[&str]) -> (Daemon, String) {
    let (daemon, addr, token) = serve::start(dir, before, args, Stdio::inherit());
    let _ = TOKEN.set(token);
    (daemon, addr)
}

/// `VmHWM` (peak resident size) and `VmRSS` of a process, in KiB.
fn memory_kib(pid: u32) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// Writes a Forum directory of `n` entries into `dir` (bodies like the load run's appends).
fn forum_export(dir: &Path, n: u64) {
    use git_forum::ledger::{Entry, NewEntry, Value, canonical, hash};
    let mut entries: Vec<Entry> = Vec::with_capacity(n as usize);
    let mut bodies = std::collections::HashMap::new();
    for i in 0..n {
        let payload = canonical::parse(&format!(
            r#"{{"client":0,"i":{i},"text":"a small body for the replay memory run"}}"#
        ))
        .unwrap();
        let new = NewEntry {
            actor: "load-0".into(),
            kind: "note".into(),
            causal_parent: None,
            payload: payload.clone(),
            ts: 1000.0 + i as f64,
        };
        let ph = hash::sha256_hex(payload.canonical().as_bytes());
        let e = Entry::next(entries.last(), &new, ph.clone());
        bodies.insert(ph, payload);
        entries.push(e);
    }
    git_forum::store::forum_dir::write(
        dir,
        &entries,
        |e| Ok::<Option<Value>, _>(bodies.get(&e.payload_hash).cloned()),
        false,
    )
    .unwrap();
}

/// `--replay-memory`: the daemon's peak memory while clients page through a long `/replay`.
fn replay_memory(args: &[String]) {
    let opt = |name: &str, default: u64| -> u64 {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let entries = opt("--entries", 45_001).max(1);
    let clients = opt("--clients", 8).max(1) as usize;
    let rounds = opt("--rounds", 3).max(1);
    let forum = env!("CARGO_BIN_EXE_git-forum");
    let dir = tempfile::tempdir().unwrap();
    let mut git = Command::new("git");
    hermetic(&mut git, dir.path());
    assert!(git.args(["init", "-q", "."]).status().unwrap().success());
    let export = tempfile::tempdir().unwrap();
    let t = Instant::now();
    forum_export(&export.path().join("ledger"), entries);
    let mut imp = Command::new(forum);
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
    println!(
        "imported {entries} entries as one Forum directory in {:.2} s",
        t.elapsed().as_secs_f64()
    );

    let (mut daemon, addr) = start_daemon(dir.path(), &[], &["--concurrency", "64"]);
    let pid = daemon.0.id();
    let (hwm_start, rss_start) = memory_kib(pid);
    // One request first, so the ledger is loaded before the clients start.
    let (code, _) = Conn::open(&addr).send_for_body("GET", "/status", "");
    let (hwm_loaded, rss_loaded) = memory_kib(pid);
    println!(
        "git forum serve on {addr} (pid {pid}): VmHWM {hwm_start} KiB at start (VmRSS {rss_start}), \
         {hwm_loaded} KiB after GET /status ({code}; VmRSS {rss_loaded})"
    );
    let last = entries - 1;
    let t = Instant::now();
    let handles: Vec<_> = (0..clients)
        .map(|_| {
            let addr = addr.to_string();
            std::thread::spawn(move || {
                let mut conn = Conn::open(&addr);
                let (mut pages, mut seen, mut bytes, mut bad) = (0u64, 0u64, 0u64, 0u64);
                for _ in 0..rounds {
                    let mut path = format!("/replay/{last}");
                    loop {
                        let (code, body) = conn.send_for_body("GET", &path, "");
                        pages += 1;
                        bytes += body.len() as u64;
                        if code != 200 {
                            bad += 1;
                            break;
                        }
                        let page: serde_json::Value = serde_json::from_slice(&body).unwrap();
                        seen += page["entries"].as_array().map_or(0, |a| a.len() as u64);
                        match page["next"].as_u64() {
                            Some(next) => path = format!("/replay/{last}?after={next}"),
                            None => break,
                        }
                    }
                }
                (pages, seen, bytes, bad)
            })
        })
        .collect();
    // Sample while the clients read, for the figure of the resident size under load.
    let mut rss_max = 0;
    while !handles.iter().all(|h| h.is_finished()) {
        rss_max = rss_max.max(memory_kib(pid).1);
        std::thread::sleep(Duration::from_millis(20));
    }
    let (mut pages, mut seen, mut bytes, mut bad) = (0, 0, 0, 0);
    for h in handles {
        let (p, s, b, x) = h.join().unwrap();
        pages += p;
        seen += s;
        bytes += b;
        bad += x;
    }
    let elapsed = t.elapsed().as_secs_f64();
    let (hwm_end, rss_end) = memory_kib(pid);
    println!(
        "{clients} clients x {rounds} rounds of /replay/{last}: {pages} pages, {seen} entries, \
         {:.1} MiB of JSON in {elapsed:.2} s; {bad} failed pages",
        bytes as f64 / (1 << 20) as f64
    );
    println!(
        "daemon peak resident size (VmHWM): {hwm_end} KiB = {:.1} MiB (VmRSS sampled max {rss_max} KiB, {rss_end} KiB at the end)",
        hwm_end as f64 / 1024.0
    );
    let expected = clients as u64 * rounds * entries;
    let rustix_pid = rustix::process::Pid::from_child(&daemon.0);
    rustix::process::kill_process(rustix_pid, rustix::process::Signal::TERM).unwrap();
    let status = daemon.0.wait().unwrap();
    println!("SIGTERM: the daemon exited with {status}");
    if bad > 0 || seen != expected || !status.success() {
        eprintln!("FAILED: {bad} failed pages, {seen} of {expected} entries read, exit {status}");
        std::process::exit(1);
    }
}

/// The value after `name` in `args`, or `default`.
fn opt_u64(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Median, p99 and max of `d`, in milliseconds.
fn stats_ms(d: &mut [Duration]) -> (f64, f64, f64) {
    d.sort();
    let n = d.len();
    if n == 0 {
        return (0.0, 0.0, 0.0);
    }
    let at = |p: f64| d[((n as f64 * p).ceil() as usize).clamp(1, n) - 1].as_secs_f64() * 1e3;
    (at(0.5), at(0.99), d[n - 1].as_secs_f64() * 1e3)
}

/// A fresh repository with a ledger of `n` entries imported as one Forum directory.
fn imported(n: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut git = Command::new("git");
    hermetic(&mut git, dir.path());
    assert!(git.args(["init", "-q", "."]).status().unwrap().success());
    if n == 0 {
        return dir;
    }
    let export = tempfile::tempdir().unwrap();
    forum_export(&export.path().join("ledger"), n);
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
    dir
}

/// One `GET path` on a new connection, closed after: the time to the whole answer, or `None`
/// when it was not a 200.
fn probe(addr: &str, path: &str) -> Option<Duration> {
    let t = Instant::now();
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(300))).ok()?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .ok()?;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out)
        .starts_with("HTTP/1.1 200")
        .then(|| t.elapsed())
}

/// A connection that waits on its client (see `--flood` in the module doc); `n` picks the kind.
fn idle_connection(addr: &str, n: usize) -> Option<TcpStream> {
    let mut s = TcpStream::connect(addr).ok()?;
    let head = match n % 3 {
        0 => format!("GET /status HTTP/1.1\r\nHost: {addr}\r\nX-Slow: "),
        1 => format!(
            "POST /route HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
            TOKEN.get().map_or("", String::as_str)
        ),
        _ => format!("GET /health HTTP/1.1\r\nHost: {addr}\r\n\r\n"),
    };
    s.write_all(head.as_bytes()).ok()?;
    if n % 3 == 2 {
        s.set_read_timeout(Some(Duration::from_secs(60))).ok()?;
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        while !String::from_utf8_lossy(&got).contains("{\"ok\":true}") {
            let k = s.read(&mut buf).ok()?;
            if k == 0 {
                return None;
            }
            got.extend_from_slice(&buf[..k]);
        }
    }
    Some(s)
}

/// `--flood`: a probe's latency with many connections open and waiting (see the module doc).
fn flood(args: &[String]) {
    let connections = opt_u64(args, "--connections", 2000) as usize;
    let probes = opt_u64(args, "--probes", 50).max(1) as usize;
    // Every connection is a descriptor here, and in the daemon (which inherits the limit).
    {
        use rustix::process::{Resource, getrlimit, setrlimit};
        let mut lim = getrlimit(Resource::Nofile);
        let want = (connections as u64) * 2 + 1024;
        if lim.current.is_some_and(|c| c < want) {
            lim.current = Some(lim.maximum.map_or(want, |m| m.min(want)));
            let _ = setrlimit(Resource::Nofile, lim);
        }
    }
    let dir = imported(1000);
    println!(
        "{connections} connections waiting on their client (part of a head, a POST head without its body, kept alive), {probes} probes of GET /status each on a new connection"
    );
    println!(
        "{:<26} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8}",
        "daemon", "open s", "p50 ms", "p99 ms", "max ms", "p50 x", "failed"
    );
    let default_cap = "256 (default)";
    for (label, extra) in [
        (default_cap, vec![]),
        ("4096", vec!["--max-connections", "4096"]),
    ] {
        let mut a = vec!["--read-timeout", "300"];
        a.extend(extra.iter().copied());
        let (mut daemon, addr) = start_daemon(dir.path(), &[], &a);
        let mut base: Vec<Duration> = (0..probes)
            .filter_map(|_| probe(&addr, "/status"))
            .collect();
        let (b50, b99, bmax) = stats_ms(&mut base);
        println!(
            "{:<26} {:>10} {:>10.2} {:>10.2} {:>10.2} {:>8} {:>8}",
            format!("cap {label}, no flood"),
            "",
            b50,
            b99,
            bmax,
            "1.00",
            probes - base.len()
        );
        let t = Instant::now();
        let open: Vec<TcpStream> = (0..connections)
            .filter_map(|n| idle_connection(&addr, n))
            .collect();
        let opened = t.elapsed().as_secs_f64();
        let mut under: Vec<Duration> = (0..probes)
            .filter_map(|_| probe(&addr, "/status"))
            .collect();
        let failed = probes - under.len();
        let (u50, u99, umax) = stats_ms(&mut under);
        println!(
            "{:<26} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>8.2} {:>8}",
            format!("cap {label}, {} opened", open.len()),
            opened,
            u50,
            u99,
            umax,
            u50 / b50.max(1e-9),
            failed
        );
        drop(open);
        let pid = rustix::process::Pid::from_child(&daemon.0);
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        let _ = daemon.0.wait();
    }
}

/// Runs `git forum ARGS` in `dir` `runs` times: the median wall time, the largest peak
/// resident size in KiB (through GNU time's `%M`, when `/usr/bin/time` is there; else 0), and
/// whether each run exited 0.
fn cli_median(dir: &Path, args: &[&str], runs: usize) -> (Duration, u64, bool) {
    let gnu_time = Path::new("/usr/bin/time").exists();
    let mut times = Vec::new();
    let mut peak = 0u64;
    let mut ok = true;
    for _ in 0..runs {
        let mut c = if gnu_time {
            let mut c = Command::new("/usr/bin/time");
            c.args(["-f", "%M", env!("CARGO_BIN_EXE_git-forum")]);
            c
        } else {
            Command::new(env!("CARGO_BIN_EXE_git-forum"))
        };
        hermetic(&mut c, dir);
        let t = Instant::now();
        let o = c.args(args).output().unwrap();
        times.push(t.elapsed());
        ok &= o.status.success();
        if gnu_time {
            let kib = String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .and_then(|l| l.trim().parse::<u64>().ok())
                .unwrap_or(0);
            peak = peak.max(kib);
        }
    }
    times.sort();
    (times[times.len() / 2], peak, ok)
}

/// `--projections`: the cached `/summary` and `/verify` at `--entries` entries.
fn projections(args: &[String]) {
    let entries = opt_u64(args, "--entries", 100_000).max(1);
    let rounds = opt_u64(args, "--rounds", 5).max(1) as usize;
    let t = Instant::now();
    let dir = imported(entries);
    println!(
        "imported {entries} entries as one Forum directory in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let (cli_summary, cli_summary_kib, ok1) = cli_median(dir.path(), &["summary", "--json"], 3);
    let (cli_verify, cli_verify_kib, ok2) =
        cli_median(dir.path(), &["verify", "--deep", "--json"], 3);
    let (mut daemon, addr) = start_daemon(dir.path(), &[], &[]);
    let pid = daemon.0.id();
    let (hwm0, rss0) = memory_kib(pid);
    let mut conn = Conn::open(&addr);
    // The entry cache every read route shares, loaded first, so what follows is what the
    // projections add.
    let (status_code, _) = conn.send_for_body("GET", "/status", "");
    let (hwm_cache, rss_cache) = memory_kib(pid);
    let mut failed = !(ok1 && ok2) || status_code != 200;
    let mut timed = |conn: &mut Conn, path: &str| -> Duration {
        let t = Instant::now();
        let (code, _) = conn.send_for_body("GET", path, "");
        let d = t.elapsed();
        if code != 200 {
            eprintln!("GET {path} answered {code}");
            failed = true;
        }
        d
    };
    let mut rows: Vec<(String, Duration, Duration)> = Vec::new();
    let mut appended = 0usize;
    for (path, cli) in [("/summary", cli_summary), ("/verify", cli_verify)] {
        let first = timed(&mut conn, path);
        let mut again: Vec<Duration> = (0..rounds).map(|_| timed(&mut conn, path)).collect();
        let mut after: Vec<Duration> = (0..rounds)
            .map(|_| {
                let code = conn.send("POST", "/append", &append_body(1, appended));
                appended += 1;
                if code != 200 {
                    eprintln!("POST /append answered {code}");
                }
                timed(&mut conn, path)
            })
            .collect();
        again.sort();
        after.sort();
        let (a, b) = (again[again.len() / 2], after[after.len() / 2]);
        rows.push((format!("{path} first (reads all)"), first, cli));
        rows.push((format!("{path} repeated (median)"), a, cli));
        rows.push((format!("{path} after 1 append (median)"), b, cli));
    }
    let (hwm, rss) = memory_kib(pid);
    println!(
        "cli, whole processes (median of 3): summary --json {:.1} ms (peak {:.1} MiB), verify --deep --json {:.1} ms (peak {:.1} MiB)",
        cli_summary.as_secs_f64() * 1e3,
        cli_summary_kib as f64 / 1024.0,
        cli_verify.as_secs_f64() * 1e3,
        cli_verify_kib as f64 / 1024.0
    );
    println!("{:<34} {:>12} {:>12}", "daemon request", "ms", "cli / this");
    for (name, d, cli) in &rows {
        println!(
            "{:<34} {:>12.2} {:>12.1}",
            name,
            d.as_secs_f64() * 1e3,
            cli.as_secs_f64() / d.as_secs_f64().max(1e-9)
        );
    }
    println!(
        "daemon resident size: VmRSS {:.1} MiB at start, {:.1} MiB with the entry cache loaded (GET /status), {:.1} MiB at the end; peak (VmHWM) {:.1} MiB at start, {:.1} MiB with the entry cache, {:.1} MiB at the end",
        rss0 as f64 / 1024.0,
        rss_cache as f64 / 1024.0,
        rss as f64 / 1024.0,
        hwm0 as f64 / 1024.0,
        hwm_cache as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
    let p = rustix::process::Pid::from_child(&daemon.0);
    rustix::process::kill_process(p, rustix::process::Signal::TERM).unwrap();
    let status = daemon.0.wait().unwrap();
    if failed || !status.success() {
        eprintln!("FAILED: a request or a CLI run failed, or the daemon exited with {status}");
        std::process::exit(1);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--hello-server") {
        daemon_wrk::hello_server();
        return;
    }
    if args.iter().any(|a| a == "--wrk") {
        daemon_wrk::run(&args);
        return;
    }
    if args.iter().any(|a| a == "--replay-memory") {
        replay_memory(&args);
        return;
    }
    if args.iter().any(|a| a == "--flood") {
        flood(&args);
        return;
    }
    if args.iter().any(|a| a == "--projections") {
        projections(&args);
        return;
    }
    let opt = |name: &str, default: f64| -> f64 {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let seconds = opt("--seconds", 10.0);
    let clients = opt("--clients", 8.0) as usize;
    let entries = opt("--entries", 1000.0) as u64;
    let no_fsync = args.iter().any(|a| a == "--no-fsync");

    let dir = tempfile::tempdir().unwrap();
    let mut git = Command::new("git");
    hermetic(&mut git, dir.path());
    assert!(git.args(["init", "-q", "."]).status().unwrap().success());
    let forum = env!("CARGO_BIN_EXE_git-forum");
    let before: &[&str] = if no_fsync { &["--no-fsync"] } else { &[] };
    let (mut daemon, addr) = start_daemon(dir.path(), before, &["--concurrency", "64"]);

    println!(
        "git forum serve on {addr}: {clients} keep-alive clients, {seconds} s per phase, fsync {}",
        if no_fsync { "off" } else { "on" }
    );
    let seed_start = Instant::now();
    let mut conn = Conn::open(&addr);
    let mut seed_bad = 0;
    for i in 0..entries as usize {
        if !(200..300).contains(&conn.send("POST", "/append", &append_body(0, i))) {
            seed_bad += 1;
        }
    }
    println!(
        "seeded {entries} entries through POST /append (one client) in {:.2} s ({:.0} appends/s)\n",
        seed_start.elapsed().as_secs_f64(),
        entries as f64 / seed_start.elapsed().as_secs_f64()
    );
    println!(
        "{:<8} {:>9} {:>10} {:>9} {:>9} {:>9} {:>8}",
        "phase", "requests", "req/s", "p50 ms", "p99 ms", "max ms", "non-2xx"
    );
    let mut phases = vec![
        run_phase("reads", &addr, clients, seconds, read_step, entries),
        run_phase("appends", &addr, clients, seconds, append_step, entries),
        run_phase("mixed", &addr, clients, seconds, mixed_step, entries),
    ];
    let mut failed = seed_bad > 0;
    for p in &mut phases {
        p.print();
        failed |= p.non_2xx > 0;
    }

    let pid = rustix::process::Pid::from_child(&daemon.0);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let status = daemon.0.wait().unwrap();
    println!("\nSIGTERM: the daemon exited with {status}");
    failed |= !status.success();
    let mut v = Command::new(forum);
    hermetic(&mut v, dir.path());
    let o = v.args(["verify", "--deep"]).output().unwrap();
    println!(
        "{}",
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .next()
            .unwrap_or("")
    );
    failed |= !o.status.success();
    if failed {
        eprintln!("FAILED: non-2xx answers, an unclean exit or a ledger that does not verify");
        std::process::exit(1);
    }
}
