//! The reliability suite: appenders through the CLI, the daemon and MCP, killed with SIGKILL
//! at random moments, on each kind of repository. Every acknowledged entry must be in the
//! ledger exactly once, every append whose outcome its client never learned at most once,
//! nothing else may appear, verify must pass (no false alarm), and the next append must go
//! through (no lock left stuck).
//!
//! The test below runs it small; `cargo bench --bench reliability` runs it longer and prints
//! its figures and `N passed, N failed` (see docs/reliability.md and docs/benchmarks.md).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::{Repo, Served};

/// A small xorshift generator: the suite is random, and prints its seed so a failure can be
/// replayed (`GIT_FORUM_RELIABILITY_SEED`).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// What one run of the suite saw.
#[derive(Debug, Default, Clone)]
pub struct Figures {
    pub acknowledged: usize,
    pub unknown: usize,
    pub unknown_landed: usize,
    pub kills: usize,
    pub entries: u64,
}

pub fn kill(child: &mut Child) {
    let pid = rustix::process::Pid::from_child(child);
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    let _ = child.wait();
}

fn body(source: &str, i: usize) -> String {
    format!("{{\"src\":\"{source}\",\"i\":{i}}}")
}

/// Outcomes of one client: keys acknowledged (with their entry hash) and keys whose append was
/// cut off by a kill.
#[derive(Default)]
struct Outcomes {
    acked: Vec<(String, String)>,
    unknown: Vec<String>,
    kills: usize,
    errors: Vec<String>,
}

/// CLI appenders: each append is a process, and some are killed after a random delay.
fn cli_client(repo: &Repo, name: &str, n: usize, kill_one_in: u64, seed: u64) -> Outcomes {
    let mut rng = Rng::new(seed);
    let mut out = Outcomes::default();
    for i in 0..n {
        let key = body(name, i);
        let mut child = repo
            .forum()
            .args([
                "append",
                "--actor",
                name,
                "--kind",
                "note",
                "--payload",
                &key,
                "--json",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if rng.below(kill_one_in) == 0 {
            // Kept: a random delay is the point, so the kill lands at a random moment.
            std::thread::sleep(Duration::from_micros(rng.below(25_000)));
            if child.try_wait().unwrap().is_none() {
                kill(&mut child);
                out.kills += 1;
                out.unknown.push(key);
                continue;
            }
        }
        let o = child.wait_with_output().unwrap();
        if o.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            out.acked
                .push((key, v["entry_hash"].as_str().unwrap().to_string()));
        } else if o.status.code().is_none() {
            // Killed by the suite between try_wait and here: unknown.
            out.unknown.push(key);
        } else {
            out.errors.push(format!(
                "cli append failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
    }
    out
}

pub fn start_daemon(repo: &Repo) -> Served {
    repo.serve(&[], Stdio::null())
}

/// POST /append on its own connection; `None` when the connection broke (the daemon died).
pub fn post_append(addr: &str, body: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let req = format!(
        "POST /append HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        crate::common::auth_header(addr),
        body.len()
    );
    s.write_all(req.as_bytes()).ok()?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).ok()?;
    let code: u16 = resp.split(' ').nth(1)?.parse().ok()?;
    let text = resp.split_once("\r\n\r\n")?.1.to_string();
    Some((code, text))
}

/// Appends through a daemon that is killed (SIGKILL) at random moments and started again.
fn daemon_client(repo: &Repo, n: usize, kill_one_in: u64, seed: u64) -> Outcomes {
    let mut rng = Rng::new(seed);
    let mut out = Outcomes::default();
    let mut served = start_daemon(repo);
    for i in 0..n {
        let key = body("http", i);
        let request = format!("{{\"actor\":\"http\",\"kind\":\"note\",\"payload\":{key}}}");
        let doomed = rng.below(kill_one_in) == 0;
        let reply = if doomed {
            let addr = served.addr.clone();
            let pid = rustix::process::Pid::from_child(&served.child.0);
            let delay = Duration::from_micros(rng.below(20_000));
            // Kept: a random delay is the point, so the kill lands at a random moment.
            let killer = std::thread::spawn(move || {
                std::thread::sleep(delay);
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            });
            let r = post_append(&addr, &request);
            killer.join().unwrap();
            let _ = served.child.0.wait();
            out.kills += 1;
            served = start_daemon(repo);
            r
        } else {
            post_append(&served.addr, &request)
        };
        match reply {
            Some((200, text)) => {
                let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                out.acked
                    .push((key, v["entry_hash"].as_str().unwrap().to_string()));
            }
            None if doomed => out.unknown.push(key),
            Some((code, text)) if doomed && code >= 500 => {
                let _ = text;
                out.unknown.push(key)
            }
            other => out.errors.push(format!("POST /append: {other:?}")),
        }
    }
    kill(&mut served.child.0);
    out
}

/// A running `git forum mcp`, initialised, with its replies arriving one line at a time.
pub struct Mcp {
    pub child: Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Mcp {
    /// Sends a `ledger_append` call (JSON-RPC id `id`, payload `key`); with `wait`, waits that
    /// long for the reply. `None`: no reply (the server died or `wait` ran out); otherwise the
    /// entry hash, or the reply itself as the error.
    pub fn append(
        &mut self,
        id: usize,
        actor: &str,
        key: &str,
        wait: Duration,
    ) -> Option<Result<String, String>> {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"ledger_append","arguments":{{"actor":"{actor}","kind":"note","payload":{key}}}}}}}"#
        );
        writeln!(self.stdin, "{line}")
            .and_then(|_| self.stdin.flush())
            .ok()?;
        let text = self.lines.recv_timeout(wait).ok()?;
        Some(mcp_entry_hash(&text).ok_or(text))
    }
}

/// The entry hash an MCP `ledger_append` reply carries, unless it is an error.
fn mcp_entry_hash(text: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let r = &v["result"];
    if r["isError"] == true {
        return None;
    }
    r["structuredContent"]["entry_hash"]
        .as_str()
        .map(str::to_string)
        .or_else(|| {
            let t = r["content"][0]["text"].as_str()?;
            let j: serde_json::Value = serde_json::from_str(t).ok()?;
            j["entry_hash"].as_str().map(str::to_string)
        })
}

pub fn start_mcp(repo: &Repo) -> Mcp {
    let mut child = repo
        .forum()
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"reliability","version":"1"}}}}}}"#
    )
    .unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    let _ = rx.recv_timeout(Duration::from_secs(30));
    Mcp {
        child,
        stdin,
        lines: rx,
    }
}

/// Appends through `git forum mcp`, which is killed at random moments and started again.
fn mcp_client(repo: &Repo, n: usize, kill_one_in: u64, seed: u64) -> Outcomes {
    let mut rng = Rng::new(seed);
    let mut out = Outcomes::default();
    let mut mcp = start_mcp(repo);
    for i in 0..n {
        let key = body("mcp", i);
        let doomed = rng.below(kill_one_in) == 0;
        let reply = if doomed {
            // Sent, then the server is killed at a random moment: a reply may or may not come.
            let delay = Duration::from_micros(rng.below(20_000));
            let pid = rustix::process::Pid::from_child(&mcp.child);
            // Kept: a random delay is the point, so the kill lands at a random moment.
            let killer = std::thread::spawn(move || {
                std::thread::sleep(delay);
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            });
            let r = mcp.append(i + 1, "mcp", &key, Duration::from_secs(1));
            killer.join().unwrap();
            let _ = mcp.child.wait();
            r
        } else {
            mcp.append(i + 1, "mcp", &key, Duration::from_secs(30))
        };
        match reply {
            Some(Ok(h)) => out.acked.push((key, h)),
            Some(Err(text)) => out.errors.push(format!("mcp append: {text}")),
            None if doomed => out.unknown.push(key),
            None => out.errors.push("mcp: no answer".into()),
        }
        if doomed {
            out.kills += 1;
            mcp = start_mcp(repo);
        }
    }
    kill(&mut mcp.child);
    out
}

/// Runs the CLI, daemon and MCP clients at once on `repo`, then checks the record. `n` appends
/// per client; about one in `kill_one_in` is killed.
pub fn concurrent_kills(
    repo: &Repo,
    n: usize,
    kill_one_in: u64,
    seed: u64,
) -> Result<Figures, String> {
    let results: Vec<Outcomes> = std::thread::scope(|s| {
        let handles = vec![
            s.spawn(|| cli_client(repo, "cli0", n, kill_one_in, seed)),
            s.spawn(|| cli_client(repo, "cli1", n, kill_one_in, seed.wrapping_mul(3))),
            s.spawn(|| daemon_client(repo, n, kill_one_in, seed.wrapping_mul(5))),
            s.spawn(|| mcp_client(repo, n, kill_one_in, seed.wrapping_mul(7))),
        ];
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut figures = Figures::default();
    let mut acked: HashMap<String, String> = HashMap::new();
    let mut unknown: Vec<String> = Vec::new();
    for r in results {
        if let Some(e) = r.errors.first() {
            return Err(format!("{} client error(s), first: {e}", r.errors.len()));
        }
        figures.kills += r.kills;
        for (k, h) in r.acked {
            acked.insert(k, h);
        }
        unknown.extend(r.unknown);
    }
    figures.acknowledged = acked.len();
    figures.unknown = unknown.len();
    // No false alarm, after any number of kills.
    let v = repo.forum_json(&["verify", "--deep"]);
    if v["ok"] != true {
        return Err(format!("verify after the kills: {v}"));
    }
    // Nothing stuck: the next append goes through.
    let after = repo
        .forum()
        .args([
            "append",
            "--actor",
            "check",
            "--kind",
            "note",
            "--payload",
            "1",
        ])
        .output()
        .unwrap();
    if !after.status.success() {
        return Err(format!(
            "append after the kills: {}",
            String::from_utf8_lossy(&after.stderr)
        ));
    }
    // Every acknowledged entry once, every unknown one at most once, nothing else.
    let by_payload: HashMap<String, String> = acked
        .keys()
        .chain(unknown.iter())
        .map(|k| {
            let v = git_forum::ledger::canonical::parse(k).unwrap();
            (git_forum::ledger::hash::payload_hash(&v), k.clone())
        })
        .collect();
    let log = repo.forum_json(&["log"]);
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut hashes: HashMap<String, String> = HashMap::new();
    for e in log.as_array().unwrap() {
        let ph = e["payload_hash"].as_str().unwrap();
        if let Some(k) = by_payload.get(ph) {
            *seen.entry(k.clone()).or_default() += 1;
            hashes.insert(k.clone(), e["entry_hash"].as_str().unwrap().to_string());
        }
    }
    figures.entries = log.as_array().unwrap().len() as u64;
    for (k, h) in &acked {
        match seen.get(k) {
            Some(1) if hashes.get(k) == Some(h) => {}
            other => {
                return Err(format!(
                    "acknowledged {k} is there {other:?} times (want once, as {h})"
                ));
            }
        }
    }
    for k in &unknown {
        match seen.get(k).copied().unwrap_or(0) {
            0 => {}
            1 => figures.unknown_landed += 1,
            c => return Err(format!("unknown-outcome append {k} is there {c} times")),
        }
    }
    let expected = figures.acknowledged + figures.unknown_landed + 1;
    if figures.entries as usize != expected {
        return Err(format!(
            "the ledger holds {} entries, but {} were acknowledged, {} unknown landed, plus the check",
            figures.entries, figures.acknowledged, figures.unknown_landed
        ));
    }
    let fsck = repo.git(&["fsck", "--strict", "--no-progress"]);
    if !fsck.status.success() {
        return Err(format!("fsck: {}", String::from_utf8_lossy(&fsck.stderr)));
    }
    Ok(figures)
}

pub fn seed() -> u64 {
    std::env::var("GIT_FORUM_RELIABILITY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}

#[test]
fn appenders_through_cli_daemon_and_mcp_survive_random_sigkills() {
    let seed = seed();
    let start = Instant::now();
    let mut kills = 0;
    for kind in crate::common::FORMATS {
        let repo = Repo::new(kind);
        // About one append in four is killed: 4 clients × 90 appends give some 70-90 kills a
        // kind, well over 200 in all.
        let f = concurrent_kills(&repo, 90, 3, seed)
            .unwrap_or_else(|e| panic!("{kind} (GIT_FORUM_RELIABILITY_SEED={seed}): {e}"));
        eprintln!(
            "{kind}: {} acknowledged, {} unknown ({} landed), {} SIGKILLs, {} entries, 0 lost",
            f.acknowledged, f.unknown, f.unknown_landed, f.kills, f.entries
        );
        kills += f.kills;
    }
    eprintln!(
        "{kills} SIGKILLs in {:.1}s (seed {seed})",
        start.elapsed().as_secs_f64()
    );
    assert!(kills >= 200, "too few kills to mean anything: {kills}");
}
