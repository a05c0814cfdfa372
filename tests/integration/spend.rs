//! Spend ceilings through the binary: a loopback stub of an
//! OpenAI-compatible endpoint that reports usage plans a wave of 64 independent tasks, run 16
//! at a time; under `--max-cost-usd` (and `--max-tokens`) the run stops on the ceiling with
//! every witnessed call's spend adding up to no more than it, exits 6, and `resume` finishes it
//! with a fresh allowance. `summary` and `receipt` show tokens and cost per model.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value as J, json};

use crate::common::{FORMATS, Repo};

/// Tokens the stub reports for every call.
const PROMPT_TOKENS: u64 = 100;
const COMPLETION_TOKENS: u64 = 400;
/// Prices written to runtime.toml, dollars per million tokens.
const PRICE_IN: f64 = 1.0;
const PRICE_OUT: f64 = 2.0;
const TASKS: usize = 64;

/// A loopback chat endpoint: plans 64 independent tasks, passes every verdict, answers
/// everything else, always with `usage`. Stopped when dropped.
struct Stub {
    port: u16,
    stop: Arc<AtomicBool>,
    calls: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

impl Stub {
    fn start() -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let calls = Arc::new(AtomicUsize::new(0));
        let thread = {
            let (stop, calls) = (stop.clone(), calls.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((s, _)) => {
                            calls.fetch_add(1, Ordering::SeqCst);
                            answer(s);
                        }
                        // Kept: the pause of a non-blocking accept loop, which ends when
                        // the stub is stopped (on drop), not a wait for anything to happen.
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        Stub {
            port,
            stop,
            calls,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1/chat/completions", self.port)
    }
}

impl Drop for Stub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn plan() -> String {
    let tasks: Vec<J> = (0..TASKS)
        .map(|i| {
            json!({"id": format!("T{i:02}"), "agent": "backend",
                   "instruction": format!("write part {i}"), "depends_on": [], "done_when": []})
        })
        .collect();
    json!({ "tasks": tasks }).to_string()
}

/// Reads one HTTP request's body (bounded by its content-length); `None` when the connection
/// closes or fails first.
pub(crate) fn read_body(s: &mut TcpStream) -> Option<Vec<u8>> {
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let body_start = loop {
        let n = s.read(&mut chunk).ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..body_start]).to_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < body_start + len {
        let n = s.read(&mut chunk).ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
    buf.drain(..body_start);
    buf.truncate(len);
    Some(buf)
}

fn answer(mut s: TcpStream) {
    let Some(body) = read_body(&mut s) else {
        return;
    };
    let req: J = serde_json::from_slice(&body).unwrap_or(J::Null);
    let content = match req["response_format"]["json_schema"]["name"].as_str() {
        Some("plan") => plan(),
        Some(_) => r#"{"decision":"pass","score":0.9,"reason":"ok"}"#.to_string(),
        None => "done".to_string(),
    };
    let body = json!({
        "model": "stub-model",
        "choices": [{"message": {"content": content}}],
        "usage": {"prompt_tokens": PROMPT_TOKENS,
                  "completion_tokens": req["max_tokens"].as_u64().map_or(COMPLETION_TOKENS, |m| m.min(COMPLETION_TOKENS))},
    })
    .to_string();
    let _ = write!(
        s,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// A repository whose runtime is the stub, priced, with the 64 tasks 16 at a time.
fn repo(format: &str, stub: &Stub) -> Repo {
    let repo = Repo::new(format);
    let forum = repo.path().join(".forum");
    std::fs::create_dir_all(&forum).unwrap();
    std::fs::write(
        forum.join("runtime.toml"),
        format!(
            "[runtime.default]\nchat_url = \"{}\"\nmodel = \"stub-model\"\nis_local = true\nprice_in_per_mtok = {PRICE_IN:?}\nprice_out_per_mtok = {PRICE_OUT:?}\n",
            stub.url()
        ),
    )
    .unwrap();
    std::fs::write(
        forum.join("policy.toml"),
        format!("max_tasks = {TASKS}\nmax_parallel = 16\n"),
    )
    .unwrap();
    repo
}

/// Every entry's row of `entries.jsonl` with its body, in seq order (through `git forum
/// export`).
pub(crate) fn exported(repo: &Repo) -> Vec<(J, J)> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x");
    repo.forum_ok(&["export", out.to_str().unwrap()]);
    read_export(&out)
}

/// Every entry's row of `entries.jsonl` with its body, in seq order, from the directory
/// `git forum export` wrote.
pub(crate) fn read_export(out: &std::path::Path) -> Vec<(J, J)> {
    let read = |f: &str| -> Vec<J> {
        std::fs::read_to_string(out.join(f))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let bodies: std::collections::HashMap<String, J> = read("payloads.jsonl")
        .into_iter()
        .map(|r| (r["hash"].as_str().unwrap().to_string(), r["body"].clone()))
        .collect();
    read("entries.jsonl")
        .into_iter()
        .map(|e| {
            let body = bodies[e["payload_hash"].as_str().unwrap()].clone();
            (e, body)
        })
        .collect()
}

/// Every entry's kind and payload, in seq order (through `git forum export`).
pub(crate) fn entries(repo: &Repo) -> Vec<(String, J)> {
    exported(repo)
        .into_iter()
        .map(|(e, body)| (e["kind"].as_str().unwrap().to_string(), body))
        .collect()
}

/// Every `usage` object the ledger witnessed.
fn usages(repo: &Repo) -> Vec<J> {
    entries(repo)
        .into_iter()
        .filter_map(|(_, b)| b.get("usage").cloned())
        .collect()
}

fn submit(repo: &Repo, extra: &[&str]) -> (Option<i32>, J, String) {
    let mut args = vec!["submit", "--json"];
    args.extend_from_slice(extra);
    args.push("write the sixty-four parts");
    let o = repo.forum().args(&args).output().unwrap();
    let j = serde_json::from_slice(&o.stdout).unwrap_or(J::Null);
    (
        o.status.code(),
        j,
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

fn budget_entry(repo: &Repo) -> J {
    entries(repo)
        .into_iter()
        .rev()
        .find(|(k, _)| k == "budget")
        .map(|(_, b)| b)
        .expect("a budget entry")
}

#[test]
fn a_64_task_wave_under_max_cost_usd_stops_at_or_under_the_ceiling_and_resume_finishes() {
    for format in FORMATS {
        let stub = Stub::start();
        let repo = repo(format, &stub);
        let ceiling = 0.03;
        let (code, j, err) = submit(&repo, &["--max-cost-usd", "0.03"]);
        assert_eq!(code, Some(4), "{format}: {err}");
        assert_eq!(
            j["git_forum_receipt"]["status"], "stopped_on_ceiling",
            "{j}"
        );
        let u = usages(&repo);
        // Exact spend from the witnessed tokens at the configured prices (integer micro-dollars).
        let micro: u64 = u
            .iter()
            .map(|x| {
                x["prompt_tokens"].as_u64().unwrap() * PRICE_IN as u64
                    + x["completion_tokens"].as_u64().unwrap() * PRICE_OUT as u64
            })
            .sum();
        let witnessed: f64 = u.iter().map(|x| x["cost_usd"].as_f64().unwrap()).sum();
        assert!(
            micro as f64 / 1e6 <= ceiling,
            "{format}: spent {micro} micro-dollars over {ceiling}"
        );
        assert!(witnessed <= ceiling + 1e-12, "{format}: {witnessed}");
        // Every call the stub answered is witnessed, and the wave did not all run.
        assert_eq!(u.len(), stub.calls.load(Ordering::SeqCst), "{format}");
        assert!(u.len() < 1 + 2 * TASKS, "{format}: {} calls", u.len());
        assert!(u.len() > 2, "{format}: only {} calls", u.len());
        let b = budget_entry(&repo);
        assert_eq!(b["ceiling"], "max_cost_usd", "{b}");
        assert_eq!(b["max_cost_usd"], ceiling, "{b}");
        assert!(b["cost_usd"].as_f64().unwrap() <= ceiling, "{b}");
        assert!(
            b["reason"].as_str().unwrap().contains("max_cost_usd"),
            "{b}"
        );
        repo.forum_ok(&["verify", "--deep"]);

        // Resume with a fresh (larger) allowance finishes the run.
        let o = repo
            .forum()
            .args(["resume", "--json", "--max-cost-usd", "1"])
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{format}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let r: J = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["git_forum_receipt"]["status"], "answered", "{r}");
        assert_eq!(r["answer"], "done");
        repo.forum_ok(&["verify", "--deep"]);
        repo.fsck();
    }
}

#[test]
fn max_tokens_stops_the_wave_at_or_under_the_ceiling() {
    let stub = Stub::start();
    let repo = repo("sha1", &stub);
    let (code, _, err) = submit(&repo, &["--max-tokens", "30000"]);
    assert_eq!(code, Some(4), "{err}");
    let tokens: u64 = usages(&repo)
        .iter()
        .map(|x| x["prompt_tokens"].as_u64().unwrap() + x["completion_tokens"].as_u64().unwrap())
        .sum();
    assert!(tokens <= 30000, "{tokens}");
    assert!(tokens > 10000, "{tokens}: the wave stopped too early");
    assert!(tokens > 0);
    let b = budget_entry(&repo);
    assert_eq!(b["ceiling"], "max_tokens");
    assert_eq!(b["tokens"], tokens, "{b}");
}

#[test]
fn summary_and_receipt_show_tokens_and_cost_per_model() {
    let stub = Stub::start();
    let repo = repo("sha1", &stub);
    let (code, j, err) = submit(&repo, &[]);
    assert_eq!(code, Some(0), "{err}");
    let calls = stub.calls.load(Ordering::SeqCst) as u64;
    let out: u64 = usages(&repo)
        .iter()
        .map(|x| x["completion_tokens"].as_u64().unwrap())
        .sum();
    let spend = &j["receipt"]["spend"]["stub-model"];
    assert_eq!(spend["calls"], calls, "{j}");
    assert_eq!(spend["tokens"], calls * PROMPT_TOKENS + out);
    let s = repo.forum_json(&["summary"]);
    let m = &s["spend"]["stub-model"];
    assert_eq!(m["prompt_tokens"], calls * PROMPT_TOKENS, "{s}");
    assert_eq!(m["completion_tokens"], out);
    let cost = m["cost_usd"].as_f64().unwrap();
    let exact = (calls * PROMPT_TOKENS + 2 * out) as f64 / 1e6;
    assert!((cost - exact).abs() < 1e-9, "{cost} vs {exact}");
    let text = repo.forum_ok(&["summary"]);
    assert!(text.contains("Spend per model"), "{text}");
    assert!(text.contains("stub-model"), "{text}");
}

#[test]
fn bad_ceilings_and_prices_are_one_line_and_write_nothing() {
    let stub = Stub::start();
    let repo = repo("sha1", &stub);
    for (args, needle) in [
        (
            vec!["--max-cost-usd", "0"],
            "--max-cost-usd 0 must be a number of dollars above 0",
        ),
        (
            vec!["--max-cost-usd", "inf"],
            "must be a number of dollars above 0",
        ),
        (
            vec!["--max-tokens", "0"],
            "--max-tokens 0 leaves nothing to spend",
        ),
    ] {
        let (code, _, err) = submit(&repo, &args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{err}");
    }
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        format!(
            "[runtime.default]\nchat_url = \"{}\"\nis_local = true\nprice_in_per_mtok = 1.0\n",
            stub.url()
        ),
    )
    .unwrap();
    let (code, _, err) = submit(&repo, &[]);
    assert_ne!(code, Some(0));
    assert!(err.contains("price_in_per_mtok"), "{err}");
    assert!(err.contains("price_out_per_mtok"), "{err}");
    assert_eq!(stub.calls.load(Ordering::SeqCst), 0);
    let o = repo.forum().args(["log"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&o.stdout).contains("request"));
}
