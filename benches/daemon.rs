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
//! asserts a time: the machine is shared and noisy.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
        match self.try_send(method, path, body) {
            Some(code) => code,
            None => {
                *self = Conn::open(&self.addr);
                self.try_send(method, path, body).unwrap_or(0)
            }
        }
    }

    fn try_send(&mut self, method: &str, path: &str, body: &str) -> Option<u16> {
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
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
        Some(code)
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

fn hermetic(c: &mut Command, home: &Path) {
    c.env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_FORUM_LEDGER")
        .env_remove("GIT_FORUM_TIMESTAMP")
        .env("HOME", home)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_SYSTEM", "/dev/null")
        .current_dir(home);
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
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
    let mut c = Command::new(forum);
    hermetic(&mut c, dir.path());
    if no_fsync {
        c.arg("--no-fsync");
    }
    c.args(["serve", "--port", "0", "--concurrency", "64"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut daemon = Daemon(c.spawn().expect("start git forum serve"));
    let mut out = BufReader::new(daemon.0.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let addr = first
        .trim()
        .strip_prefix("listening http://")
        .expect("the listening line")
        .to_string();

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
