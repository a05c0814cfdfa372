//! A real local model for end-to-end tests: SmolLM2-135M-Instruct behind llama.cpp's
//! OpenAI-compatible server (`scripts/llm_serve.py`, installed by `scripts/local-llm install`).
//!
//! [`LocalLlm::start`] finds a server in this order:
//!
//! 1. `LOCAL_LLM_URL` (a base URL such as `http://127.0.0.1:18080/v1`): a server someone else
//!    runs (CI starts one with `scripts/local-llm start`). It must answer `/health`; it is
//!    shared and never stopped here.
//! 2. The venv (`$LLM_VENV`, else `.llm-venv/` in the repository): a private server on a free
//!    port, in its own process group, stopped and waited for when the handle drops (a test
//!    that panics included). It also stops by itself when this process dies, because it
//!    watches its standard input.
//! 3. Neither: the test is skipped with a notice, unless `GIT_FORUM_REQUIRE_LLM=1` (CI), which
//!    makes it fail.
//!
//! The model is tiny and its answers are often wrong: check structure (a non-empty reply,
//! token counts, JSON that fits a schema), never the content. HTTP here is plain
//! `std::net::TcpStream`, so the harness needs no dependency of its own.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The model id the server reports (`llm_serve.py --alias`).
const MODEL: &str = "smollm2";
/// What a test prints (or panics with, under `GIT_FORUM_REQUIRE_LLM=1`) without a model.
const NOT_INSTALLED: &str = "skipped: the local model is not installed (scripts/local-llm install)";
/// Longest wait for a private server to print its address and answer `/health`.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest wait for one HTTP exchange: generation on a loaded 2-core machine can be slow.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);
/// Longest wait for a `/health` answer.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(5);

/// A running local model server, shared (`LOCAL_LLM_URL`) or owned by this handle.
pub struct LocalLlm {
    /// `HOST:PORT`, for connecting and for the `Host` header.
    authority: String,
    /// The path of the OpenAI API on that host, e.g. `/v1` (no trailing slash).
    prefix: String,
    owned: Option<Owned>,
}

/// A server this handle started and must stop.
struct Owned {
    child: Child,
    /// Held open: the server (`--watch-stdin`) exits when it closes, so it cannot outlive us.
    _stdin: ChildStdin,
    /// The server's stderr (llama.cpp's log), shown when it fails.
    log: File,
}

impl LocalLlm {
    /// A server to test against, or `None` (after printing why) when no model is installed.
    ///
    /// Panics when `LOCAL_LLM_URL` does not answer, when a private server fails to start, or
    /// when no model is installed and `GIT_FORUM_REQUIRE_LLM=1`.
    pub fn start() -> Option<LocalLlm> {
        if let Some(url) = std::env::var("LOCAL_LLM_URL")
            .ok()
            .filter(|u| !u.is_empty())
        {
            let (authority, prefix) =
                split_base_url(&url).unwrap_or_else(|e| panic!("LOCAL_LLM_URL={url}: {e}"));
            let llm = LocalLlm {
                authority,
                prefix,
                owned: None,
            };
            if let Err(e) = llm.health() {
                panic!("LOCAL_LLM_URL={url}: no healthy server there: {e}");
            }
            return Some(llm);
        }
        let python = venv_dir().join("bin/python");
        if !python.exists() {
            return missing(std::env::var("GIT_FORUM_REQUIRE_LLM").as_deref() == Ok("1"));
        }
        Some(LocalLlm::spawn(&python))
    }

    /// Starts `scripts/llm_serve.py` on a free port and waits until it is healthy.
    fn spawn(python: &Path) -> LocalLlm {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/llm_serve.py");
        let log = tempfile::tempfile().expect("a temporary file for the server's log");
        let mut child = Command::new(python)
            .arg(&script)
            .args(["--port", "0", "--threads", "1", "--parallel", "2"])
            .args(["--ctx", "4096", "--watch-stdin"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log.try_clone().expect("clone the log file"))
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("start {} {}: {e}", python.display(), script.display()));
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        // From here on a panic drops the handle, which stops the child.
        let mut llm = LocalLlm {
            authority: String::new(),
            prefix: "/v1".into(),
            owned: Some(Owned {
                child,
                _stdin: stdin,
                log,
            }),
        };
        let started = Instant::now();
        let deadline = started + START_TIMEOUT;

        // A thread reads stdout to the end, so the wait below can time out and the server
        // never blocks on a full pipe.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let address = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(a) = line.trim().strip_prefix("listening http://") {
                        break a.trim_end_matches('/').to_string();
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    panic!(
                        "the local model server exited at start:\n{}",
                        llm.log_tail()
                    )
                }
                Err(mpsc::RecvTimeoutError::Timeout) => panic!(
                    "the local model server printed no address within {} s:\n{}",
                    START_TIMEOUT.as_secs(),
                    llm.log_tail()
                ),
            }
        };
        llm.authority = address;
        let mut last_error = String::new();
        let healthy =
            crate::common::poll_until(deadline.saturating_duration_since(Instant::now()), || {
                match llm.health() {
                    Ok(()) => true,
                    Err(e) => {
                        last_error = e.to_string();
                        false
                    }
                }
            });
        if !healthy {
            panic!(
                "the local model server at {} is not healthy after {} s: {last_error}\n{}",
                llm.authority,
                START_TIMEOUT.as_secs(),
                llm.log_tail()
            );
        }
        eprintln!(
            "local model server ready at {} in {:.2} s (pid {})",
            llm.base_url(),
            started.elapsed().as_secs_f64(),
            llm.pid().unwrap_or(0)
        );
        llm
    }

    /// The OpenAI API base, e.g. `http://127.0.0.1:18080/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}{}", self.authority, self.prefix)
    }

    /// The chat completions endpoint, as a runtime config's `chat_url` takes it.
    pub fn chat_url(&self) -> String {
        format!("{}/chat/completions", self.base_url())
    }

    /// The model id to send (the server has one model and reports this id).
    pub fn model(&self) -> &str {
        MODEL
    }

    /// The PID of the server when this handle owns it (`None` for `LOCAL_LLM_URL`).
    pub fn pid(&self) -> Option<u32> {
        self.owned.as_ref().map(|o| o.child.id())
    }

    /// `GET` a path under the base URL (`"models"` is `/v1/models`): status and body.
    pub fn get(&self, path: &str) -> (u16, String) {
        let target = format!("{}/{path}", self.prefix);
        http(&self.authority, "GET", &target, None, REQUEST_TIMEOUT)
            .unwrap_or_else(|e| panic!("GET {}/{path}: {e}", self.base_url()))
    }

    /// `POST` JSON to a path under the base URL (`"chat/completions"`): status and the body
    /// parsed as JSON (panics when it is not JSON).
    pub fn post_json(&self, path: &str, body: &Value) -> (u16, Value) {
        let target = format!("{}/{path}", self.prefix);
        let (status, text) = http(
            &self.authority,
            "POST",
            &target,
            Some(&body.to_string()),
            REQUEST_TIMEOUT,
        )
        .unwrap_or_else(|e| panic!("POST {}/{path}: {e}", self.base_url()));
        let value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("POST {}/{path}: {e}: {text}", self.base_url()));
        (status, value)
    }

    /// `/health` answers 200 (it lives at the server's root, not under the base path).
    fn health(&self) -> io::Result<()> {
        let (status, body) = http(&self.authority, "GET", "/health", None, HEALTH_TIMEOUT)?;
        if status == 200 {
            Ok(())
        } else {
            Err(io::Error::other(format!("/health: HTTP {status}: {body}")))
        }
    }

    /// The last lines of an owned server's log, for failure messages.
    fn log_tail(&self) -> String {
        let Some(owned) = self.owned.as_ref() else {
            return String::new();
        };
        let mut log = &owned.log;
        let mut text = String::new();
        let _ = log.seek(SeekFrom::Start(0));
        let _ = log.read_to_string(&mut text);
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for LocalLlm {
    /// Stops an owned server: SIGTERM to its process group, then SIGKILL after 15 s, and
    /// waits for it, so no process is left behind even when a test panicked.
    fn drop(&mut self) {
        let Some(owned) = self.owned.as_mut() else {
            return;
        };
        let Some(pid) = rustix::process::Pid::from_raw(owned.child.id() as i32) else {
            return;
        };
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::TERM);
        if crate::common::poll_until(Duration::from_secs(15), || {
            !matches!(owned.child.try_wait(), Ok(None))
        }) {
            return;
        }
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        let _ = owned.child.wait();
    }
}

/// The venv `scripts/local-llm install` fills.
fn venv_dir() -> PathBuf {
    match std::env::var_os("LLM_VENV").filter(|v| !v.is_empty()) {
        Some(v) => PathBuf::from(v),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join(".llm-venv"),
    }
}

/// No model: skip (print and `None`), or fail when the model is required.
fn missing(required: bool) -> Option<LocalLlm> {
    if required {
        panic!("{NOT_INSTALLED}; GIT_FORUM_REQUIRE_LLM=1 makes that a failure");
    }
    eprintln!("{NOT_INSTALLED}");
    None
}

/// Splits `http://HOST:PORT[/PATH]` into the authority and the API path (`/v1` when none).
fn split_base_url(url: &str) -> Result<(String, String), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or("only a plain http:// URL is supported")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
        None => (rest, ""),
    };
    if authority.is_empty() || authority.contains('@') {
        return Err("expected http://HOST:PORT/PATH".into());
    }
    let has_port = authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    let authority = if has_port {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    let path = if path.is_empty() { "/v1" } else { path };
    Ok((authority, path.to_string()))
}

/// One HTTP/1.1 exchange with `Connection: close`: the status and the (de-chunked) body.
fn http(
    authority: &str,
    method: &str,
    target: &str,
    body: Option<&str>,
    timeout: Duration,
) -> io::Result<(u16, String)> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the host resolves to no address");
    let mut stream = None;
    for addr in authority.to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, HEALTH_TIMEOUT) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = e,
        }
    }
    let mut stream = stream.ok_or(last)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let body = body.unwrap_or("");
    let mut request = format!(
        "{method} {target} HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json\r\n\
         Connection: close\r\n"
    );
    if method == "POST" {
        request.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes())?;

    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| io::Error::other("no end of headers in the response"))?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut payload = raw[split + 4..].to_vec();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| io::Error::other(format!("bad status line: {head:?}")))?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    if chunked {
        payload = dechunk(&payload)?;
    }
    let text = String::from_utf8(payload).map_err(|e| io::Error::other(e.to_string()))?;
    Ok((status, text))
}

/// Decodes a `Transfer-Encoding: chunked` body.
fn dechunk(mut data: &[u8]) -> io::Result<Vec<u8>> {
    let bad = || io::Error::other("malformed chunked body");
    let mut out = Vec::new();
    loop {
        let eol = data.windows(2).position(|w| w == b"\r\n").ok_or_else(bad)?;
        let size_text = std::str::from_utf8(&data[..eol]).map_err(|_| bad())?;
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| bad())?;
        data = &data[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size + 2 {
            return Err(bad());
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

// ---- tests of the harness itself ----

#[test]
fn base_urls_split_into_host_and_api_path() {
    let ok = |u: &str| split_base_url(u).unwrap();
    assert_eq!(
        ok("http://127.0.0.1:18080/v1"),
        ("127.0.0.1:18080".into(), "/v1".into())
    );
    assert_eq!(
        ok("http://localhost:8080/v1/"),
        ("localhost:8080".into(), "/v1".into())
    );
    assert_eq!(ok("http://[::1]:9000"), ("[::1]:9000".into(), "/v1".into()));
    assert_eq!(ok("http://example"), ("example:80".into(), "/v1".into()));
    assert!(split_base_url("https://127.0.0.1:18080/v1").is_err());
    assert!(split_base_url("http://user@127.0.0.1:1/v1").is_err());
    assert!(split_base_url("http:///v1").is_err());
}

#[test]
fn chunked_bodies_are_decoded() {
    assert_eq!(
        dechunk(b"4\r\nWiki\r\n5;x=y\r\npedia\r\n0\r\n\r\n").unwrap(),
        b"Wikipedia"
    );
    assert!(dechunk(b"9\r\nshort\r\n").is_err());
}

#[test]
#[should_panic(expected = "skipped: the local model is not installed (scripts/local-llm install)")]
fn a_required_model_that_is_missing_fails_the_test() {
    missing(true);
}

#[test]
fn the_server_lists_the_model_and_answers_a_short_chat() {
    let Some(llm) = LocalLlm::start() else { return };
    assert_eq!(
        llm.chat_url(),
        format!("{}/chat/completions", llm.base_url())
    );
    assert!(llm.base_url().starts_with("http://"), "{}", llm.base_url());

    let (status, models) = llm.get("models");
    assert_eq!(status, 200, "{models}");
    let models: Value = serde_json::from_str(&models).unwrap();
    let ids: Vec<&str> = models["data"]
        .as_array()
        .expect("data[] in /v1/models")
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert!(ids.contains(&llm.model()), "{models}");

    let t = Instant::now();
    let (status, reply) = llm.post_json(
        "chat/completions",
        &json!({
            "model": llm.model(),
            "messages": [{"role": "user", "content": "Name three fruits."}],
            "temperature": 0,
            "max_tokens": 16,
        }),
    );
    eprintln!("16-token completion: {:.2} s", t.elapsed().as_secs_f64());
    assert_eq!(status, 200, "{reply}");
    let content = reply["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_else(|| panic!("no choices[0].message.content: {reply}"));
    assert!(!content.trim().is_empty(), "{reply}");
    let tokens = reply["usage"]["completion_tokens"].as_u64().unwrap_or(0);
    assert!((1..=16).contains(&tokens), "{reply}");
    let finish = reply["choices"][0]["finish_reason"].as_str().unwrap_or("");
    assert!(["stop", "length"].contains(&finish), "{reply}");
}

#[test]
fn a_json_schema_response_format_gives_json_with_the_required_keys() {
    let Some(llm) = LocalLlm::start() else { return };
    let (status, reply) = llm.post_json(
        "chat/completions",
        &json!({
            "model": llm.model(),
            "messages": [{"role": "user", "content": "Describe a cat."}],
            "temperature": 0,
            "max_tokens": 128,
            "response_format": {"type": "json_schema", "json_schema": {
                "name": "cat",
                "strict": true,
                "schema": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                    "required": ["name", "age"],
                    "additionalProperties": false,
                },
            }},
        }),
    );
    assert_eq!(status, 200, "{reply}");
    let content = reply["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_else(|| panic!("no choices[0].message.content: {reply}"));
    let cat: Value = serde_json::from_str(content)
        .unwrap_or_else(|e| panic!("the content is not JSON ({e}): {reply}"));
    let mut keys: Vec<&str> = cat
        .as_object()
        .expect("a JSON object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["age", "name"], "{cat}");
    assert!(cat["name"].is_string(), "{cat}");
    assert!(cat["age"].is_i64() || cat["age"].is_u64(), "{cat}");
}

#[test]
fn dropping_the_handle_stops_an_owned_server_and_spares_a_shared_one() {
    let Some(llm) = LocalLlm::start() else { return };
    match llm.pid() {
        Some(pid) => {
            let pid = rustix::process::Pid::from_raw(pid as i32).expect("a positive PID");
            assert!(rustix::process::test_kill_process(pid).is_ok());
            drop(llm);
            // Reaped and gone: signalling it now finds no such process.
            assert_eq!(
                rustix::process::test_kill_process(pid),
                Err(rustix::io::Errno::SRCH)
            );
        }
        None => {
            let base = llm.base_url();
            drop(llm);
            let again = LocalLlm::start().expect("LOCAL_LLM_URL is still set");
            assert_eq!(again.base_url(), base);
            assert_eq!(again.health().map_err(|e| e.to_string()), Ok(()));
        }
    }
}
