//! The HTTP executors (`exec::chat`, `exec::anthropic`, `exec::http`) against small fault
//! servers of this file's own on 127.0.0.1 (plain `std::net`, one thread each, stopped when
//! the handle drops), and against the real local model when it is installed.
//!
//! Loopback is reached with `is_local = true` (chat) or a command-line policy, as
//! `endpoint::decide` allows. Keys come from a variable the test process always has (see
//! [`present_var`]): tests never set environment variables.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use git_forum::exec::anthropic::{ANTHROPIC_VERSION, AnthropicExecutor, DEFAULT_MAX_TOKENS};
use git_forum::exec::chat::ChatExecutor;
use git_forum::exec::config::{ExecutorKind, ExecutorSpec, TokenCount};
use git_forum::exec::endpoint::{Origin, Policy};
use git_forum::exec::http::{VetError, VettingResolver};
use git_forum::exec::{self, Call, ExecError, Executor, OutputSchema, Usage};
use serde_json::{Value, json};

use super::llm::LocalLlm;

/// A variable no test environment sets, for the missing-key tests.
const UNSET_VAR: &str = "GIT_FORUM_HTTP_EXEC_TEST_UNSET_KEY";

/// Slack on top of a deadline before a test calls the call late (the machine is shared).
const SLACK: Duration = Duration::from_secs(5);

// ---- the fault server ----

/// One request as the fake server read it.
#[derive(Debug, Clone)]
struct Request {
    method: String,
    path: String,
    /// Lower-case names.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("the request body is JSON")
    }
}

/// What a fake server does with each request: answer (or not) on the stream. The flag is
/// set when the server is being stopped; long handlers must watch it.
type Handler = dyn Fn(&Request, &mut TcpStream, &AtomicBool) + Send + Sync;

/// A fake HTTP server on 127.0.0.1 serving one connection at a time; dropping it stops its
/// thread and waits for it.
struct Fake {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<Request>>>,
    connections: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

impl Fake {
    fn start(
        handler: impl Fn(&Request, &mut TcpStream, &AtomicBool) + Send + Sync + 'static,
    ) -> Fake {
        Fake::serve(true, handler)
    }

    /// Like [`Fake::start`], but `read` false hands the connection over unread (the request
    /// passed is empty): for peers that do not speak plain HTTP.
    fn serve(
        read: bool,
        handler: impl Fn(&Request, &mut TcpStream, &AtomicBool) + Send + Sync + 'static,
    ) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).expect("non-blocking accept");
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let handler: Box<Handler> = Box::new(handler);
        let thread = {
            let (stop, seen, connections) = (stop.clone(), seen.clone(), connections.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((mut s, _)) => {
                            connections.fetch_add(1, Ordering::SeqCst);
                            let _ = s.set_nonblocking(false);
                            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                            let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
                            let req = if read {
                                read_request(&mut s)
                            } else {
                                Some(Request {
                                    method: String::new(),
                                    path: String::new(),
                                    headers: Vec::new(),
                                    body: Vec::new(),
                                })
                            };
                            if let Some(req) = req {
                                seen.lock().unwrap().push(req.clone());
                                handler(&req, &mut s, &stop);
                            }
                        }
                        // Kept: the pause of a non-blocking accept loop, which ends when the
                        // fake is stopped (on drop), not a wait for anything to happen.
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            })
        };
        Fake {
            addr,
            stop,
            seen,
            connections,
            thread: Some(thread),
        }
    }

    /// A server that answers every request with `status` and `body` (JSON).
    fn answering(status: &'static str, body: String) -> Fake {
        Fake::start(move |_, s, _| respond(s, status, &body))
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn requests(&self) -> Vec<Request> {
        self.seen.lock().unwrap().clone()
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            // A panic in the server thread shows up as a failed expectation in the test.
            let _ = t.join();
        }
    }
}

/// Reads a request head and its `Content-Length` body.
fn read_request(s: &mut TcpStream) -> Option<Request> {
    let mut r = BufReader::new(s.try_clone().ok()?);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (n, v) = h.split_once(':')?;
        headers.push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let len = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some(Request {
        method,
        path,
        headers,
        body,
    })
}

fn respond(s: &mut TcpStream, status: &str, body: &str) {
    let _ = write!(
        s,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = s.flush();
}

/// Waits until the server is being stopped. Kept as a sleep loop: hanging is the point (the
/// client's deadline must pass), and the fake is stopped on drop, so the wait is bounded by
/// the test.
fn hang(stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Writes `bytes` one per second until the peer goes away or the server stops. Kept as sleeps:
/// the slow pace is the point (the client's deadline must pass while bytes still arrive).
fn drip(s: &mut TcpStream, bytes: &[u8], stop: &AtomicBool) {
    for b in bytes {
        if stop.load(Ordering::SeqCst) || s.write_all(&[*b]).is_err() || s.flush().is_err() {
            return;
        }
        for _ in 0..50 {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

// ---- specs and answers ----

fn openai_answer(content: &str) -> String {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "served-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    })
    .to_string()
}

/// A chat spec for a fake server: `is_local = true` from the repository's config.
fn local_spec(url: &str, timeout_seconds: u64, max_response_bytes: u64) -> ExecutorSpec {
    ExecutorSpec {
        kind: ExecutorKind::Chat {
            url: url.to_string(),
            model: "test-model".into(),
            api_key_env: Some(present_var().0.to_string()),
        },
        is_local: true,
        allow_private: false,
        timeout_seconds,
        max_response_bytes,
        json_schema: false,
        origin: Origin::RepoConfig,
        verify: Default::default(),
        metering: Default::default(),
        env: None,
    }
}

/// A chat spec with a key, typed on the command line (loopback allowed, key sent).
fn keyed_spec(url: &str, key_env: &str) -> ExecutorSpec {
    ExecutorSpec {
        kind: ExecutorKind::Chat {
            url: url.to_string(),
            model: "test-model".into(),
            api_key_env: Some(key_env.to_string()),
        },
        is_local: false,
        allow_private: false,
        timeout_seconds: 30,
        max_response_bytes: 1 << 20,
        json_schema: false,
        origin: Origin::CommandLine,
        verify: Default::default(),
        metering: Default::default(),
        env: None,
    }
}

/// A variable the test process always has, standing in for a key: Cargo and nextest set
/// `CARGO_PKG_NAME`; `PATH` is there otherwise.
fn present_var() -> (&'static str, String) {
    ["CARGO_PKG_NAME", "PATH", "HOME"]
        .into_iter()
        .find_map(|v| {
            let value = std::env::var(v).ok()?;
            let ok = !value.trim().is_empty()
                && value.trim().len() >= 4
                && value.bytes().all(|b| (0x20..0x7f).contains(&b));
            ok.then(|| (v, value.trim().to_string()))
        })
        .expect("CARGO_PKG_NAME or PATH is set")
}

fn plan_schema() -> OutputSchema {
    OutputSchema {
        name: "plan".into(),
        schema: json!({
            "type": "object",
            "properties": {"steps": {"type": "array", "items": {"type": "string"}}},
            "required": ["steps"],
            "additionalProperties": false,
        }),
    }
}

fn finished_in_time(started: Instant, timeout: Duration) {
    let took = started.elapsed();
    assert!(
        took < timeout + SLACK,
        "the call took {took:?}, past its {timeout:?} deadline plus {SLACK:?} of slack"
    );
}

// ---- chat ----

#[test]
fn chat_answer_model_and_usage_are_parsed_and_the_request_is_openai_shaped() {
    let fake = Fake::answering("200 OK", openai_answer(r#"{"steps":["a","b"]}"#));
    let e = ChatExecutor::from_spec(&local_spec(&fake.url("/v1/chat/completions"), 30, 1 << 20))
        .unwrap();
    let schema = plan_schema();
    let reply = e
        .call(&Call {
            system: Some("You plan."),
            prompt: "Plan it.",
            schema: Some(&schema),
            max_tokens: Some(77),
        })
        .unwrap();
    assert_eq!(reply.text, r#"{"steps":["a","b"]}"#);
    assert_eq!(reply.model, "served-model");
    assert_eq!(
        reply.usage,
        Some(Usage {
            input_tokens: 12,
            output_tokens: 5,
            estimated: false,
            truncated: false,
            over_reservation: None,
        })
    );
    assert_eq!(e.model(), "test-model");

    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(r.header("content-type"), Some("application/json"));
    // is_local: the key variable is configured, yet nothing is sent.
    assert_eq!(r.header("authorization"), None, "{:?}", r.headers);
    let body = r.json();
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["temperature"], 0);
    assert_eq!(body["max_tokens"], 77);
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "You plan."},
            {"role": "user", "content": "Plan it."},
        ])
    );
    assert_eq!(
        body["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "plan", "strict": true, "schema": schema.schema}})
    );
}

#[test]
fn chat_sends_a_bearer_key_when_not_local_and_falls_back_to_the_configured_model() {
    let (var, value) = present_var();
    let fake = Fake::answering(
        "200 OK",
        json!({"choices": [{"message": {"content": "hello"}}]}).to_string(),
    );
    let e = ChatExecutor::from_spec(&keyed_spec(&fake.url("/v1/chat/completions"), var)).unwrap();
    let reply = e.call(&Call::prompt("hi")).unwrap();
    assert_eq!(reply.text, "hello");
    assert_eq!(reply.model, "test-model");
    assert_eq!(reply.usage, None);
    let r = &fake.requests()[0];
    assert_eq!(
        r.header("authorization"),
        Some(format!("Bearer {value}").as_str())
    );
    let body = r.json();
    assert!(body.get("response_format").is_none(), "{body}");
    assert!(body.get("max_tokens").is_none(), "{body}");
    assert!(!e.describe().contains(&value), "{}", e.describe());
    assert!(!format!("{e:?}").contains(&value));
}

#[test]
fn chat_is_thread_safe_and_opens_a_fresh_connection_per_call() {
    let fake = Fake::answering("200 OK", openai_answer("ok"));
    let e = Arc::new(
        ChatExecutor::from_spec(&local_spec(&fake.url("/v1/chat/completions"), 60, 1 << 20))
            .unwrap(),
    );
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let e = e.clone();
            std::thread::spawn(move || {
                for j in 0..2 {
                    let prompt = format!("call {i}.{j}");
                    assert_eq!(e.call(&Call::prompt(&prompt)).unwrap().text, "ok");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(fake.requests().len(), 8);
    assert_eq!(fake.connections(), 8, "a connection was reused");
}

#[test]
fn a_hanging_endpoint_ends_at_the_deadline() {
    let fake = Fake::start(|_, _, stop| hang(stop));
    let e = ChatExecutor::from_spec(&local_spec(&fake.url("/v1/chat/completions"), 2, 1 << 20))
        .unwrap();
    let t = Instant::now();
    let err = e.call(&Call::prompt("hi")).unwrap_err();
    finished_in_time(t, Duration::from_secs(2));
    assert!(matches!(err, ExecError::Timeout { .. }), "{err}");
    assert_eq!(err.code(), "timeout");
}

#[test]
fn a_dripping_or_stalled_endpoint_ends_at_the_deadline() {
    // The body, one byte a second.
    let body_drip = Fake::start(|_, s, stop| {
        let _ = s.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 600\r\n\r\n",
        );
        drip(s, &[b' '; 600], stop);
    });
    // The status line and headers, one byte a second.
    let head_drip = Fake::start(|_, s, stop| {
        drip(s, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", stop);
    });
    // The headers, then nothing: only the client's own deadline can end a blocked read.
    let stall = Fake::start(|_, s, stop| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 600\r\n\r\n{");
        hang(stop);
    });
    for fake in [&body_drip, &head_drip, &stall] {
        let e = ChatExecutor::from_spec(&local_spec(&fake.url("/v1/chat/completions"), 2, 1 << 20))
            .unwrap();
        let t = Instant::now();
        let err = e.call(&Call::prompt("hi")).unwrap_err();
        finished_in_time(t, Duration::from_secs(2));
        assert!(matches!(err, ExecError::Timeout { .. }), "{err}");
    }
}

#[test]
fn a_server_error_is_a_status_with_a_one_line_excerpt() {
    let body = format!("model crashed\n\tout of memory {}", "x".repeat(1000));
    let fake = Fake::start(move |_, s, _| respond(s, "500 Internal Server Error", &body));
    let e = ChatExecutor::from_spec(&local_spec(&fake.url("/v1/chat/completions"), 30, 1 << 20))
        .unwrap();
    let err = e.call(&Call::prompt("hi")).unwrap_err();
    let ExecError::Status {
        status, excerpt, ..
    } = &err
    else {
        panic!("{err}")
    };
    assert_eq!(*status, 500);
    assert!(
        excerpt.starts_with("model crashed out of memory xxx"),
        "{excerpt}"
    );
    assert!(
        !excerpt.contains('\n') && excerpt.chars().count() <= 201,
        "{excerpt}"
    );
    assert!(err.to_string().contains("HTTP 500"), "{err}");
    assert_eq!(err.code(), "http_status");
}

#[test]
fn an_error_body_that_echoes_the_key_is_redacted() {
    let (var, value) = present_var();
    let fake = Fake::start(|r, s, _| {
        let echo = format!(
            "bad credentials: {}",
            r.header("authorization").unwrap_or("")
        );
        respond(s, "401 Unauthorized", &echo);
    });
    let e = ChatExecutor::from_spec(&keyed_spec(&fake.url("/v1/chat/completions"), var)).unwrap();
    let err = e.call(&Call::prompt("hi")).unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(
        shown.contains("HTTP 401") && shown.contains("Bearer [redacted]"),
        "{shown}"
    );
    assert!(!shown.contains(&value), "the key leaked: {shown}");
}

#[test]
fn a_huge_body_is_too_large_and_is_not_read_to_the_end() {
    const HUGE: u64 = 100 * 1024 * 1024;
    let written = Arc::new(AtomicU64::new(0));
    let fake = {
        let written = written.clone();
        // No Content-Length: the cap has to be enforced while reading.
        Fake::start(move |_, s, stop| {
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n",
            );
            let chunk = vec![b'a'; 64 * 1024];
            while written.load(Ordering::SeqCst) < HUGE && !stop.load(Ordering::SeqCst) {
                if s.write_all(&chunk).is_err() {
                    return;
                }
                written.fetch_add(chunk.len() as u64, Ordering::SeqCst);
            }
        })
    };
    let cap = 1 << 20;
    let e =
        ChatExecutor::from_spec(&local_spec(&fake.url("/v1/chat/completions"), 60, cap)).unwrap();
    let err = e.call(&Call::prompt("hi")).unwrap_err();
    assert!(
        matches!(err, ExecError::TooLarge { cap: c, .. } if c == cap),
        "{err}"
    );
    drop(fake);
    assert!(
        written.load(Ordering::SeqCst) < HUGE,
        "the whole body was sent"
    );

    // A declared Content-Length past the cap fails before any body is read (the server then
    // sends nothing, so waiting for the body would end in a timeout instead).
    let declared = Fake::start(|_, s, stop| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 104857600\r\n\r\n");
        hang(stop);
    });
    let e = ChatExecutor::from_spec(&local_spec(&declared.url("/v1/chat/completions"), 20, cap))
        .unwrap();
    let err = e.call(&Call::prompt("hi")).unwrap_err();
    assert!(matches!(err, ExecError::TooLarge { .. }), "{err}");
}

#[test]
fn invalid_json_and_a_missing_answer_are_told_apart() {
    let fake = Fake::answering("200 OK", "<html>not json".into());
    let e = ChatExecutor::from_spec(&local_spec(&fake.url("/v1/chat/completions"), 30, 1 << 20))
        .unwrap();
    let err = e.call(&Call::prompt("hi")).unwrap_err();
    assert!(matches!(err, ExecError::InvalidJson { .. }), "{err}");

    let fake = Fake::answering(
        "200 OK",
        json!({"id": "x", "object": "chat.completion"}).to_string(),
    );
    let e = ChatExecutor::from_spec(&local_spec(&fake.url("/v1/chat/completions"), 30, 1 << 20))
        .unwrap();
    let err = e.call(&Call::prompt("hi")).unwrap_err();
    assert!(
        matches!(err, ExecError::NoAnswer { what, .. } if what == "choices[0].message.content"),
        "{err}"
    );
}

#[test]
fn a_redirect_is_an_error_and_is_never_followed() {
    let target = Fake::answering("200 OK", openai_answer("followed"));
    let location = target.url("/v1/chat/completions");
    let fake = Fake::start(move |_, s, _| {
        let _ = write!(
            s,
            "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
    });
    let e = ChatExecutor::from_spec(&local_spec(&fake.url("/v1/chat/completions"), 30, 1 << 20))
        .unwrap();
    let err = e.call(&Call::prompt("hi")).unwrap_err();
    let ExecError::Redirect {
        status, location, ..
    } = &err
    else {
        panic!("{err}")
    };
    assert_eq!(*status, 302);
    assert_eq!(location, &target.url("/v1/chat/completions"));
    assert_eq!(err.code(), "redirect");
    assert_eq!(fake.requests().len(), 1);
    assert_eq!(target.connections(), 0, "the redirect was followed");
}

#[test]
fn unreachable_and_non_tls_endpoints_are_connect_errors() {
    // Nothing listens on a port just released.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
    let e = ChatExecutor::from_spec(&local_spec(&url, 30, 1 << 20)).unwrap();
    let err = e.call(&Call::prompt("hi")).unwrap_err();
    assert!(matches!(err, ExecError::Connect { .. }), "{err}");
    assert_eq!(err.code(), "connect");

    // https goes through rustls (with the ring provider the client installs); a peer that
    // answers in plain text fails the handshake.
    let fake = Fake::serve(false, |_, s, _| {
        let mut hello = [0u8; 512];
        let _ = s.read(&mut hello);
        respond(s, "400 Bad Request", "{}");
    });
    let url = format!("https://127.0.0.1:{}/v1/chat/completions", fake.addr.port());
    let e = ChatExecutor::from_spec(&local_spec(&url, 30, 1 << 20)).unwrap();
    let err = e.call(&Call::prompt("hi")).unwrap_err();
    assert!(matches!(err, ExecError::Connect { .. }), "{err}");
    assert!(rustls::crypto::CryptoProvider::get_default().is_some());
    assert_eq!(fake.connections(), 1);
}

// ---- keys and policy ----

#[test]
fn a_missing_key_variable_fails_before_any_request() {
    assert!(std::env::var_os(UNSET_VAR).is_none(), "{UNSET_VAR} is set");
    let fake = Fake::answering("200 OK", openai_answer("ok"));
    let chat =
        ChatExecutor::from_spec(&keyed_spec(&fake.url("/v1/chat/completions"), UNSET_VAR)).unwrap();
    let anthropic = AnthropicExecutor::with_url(
        &fake.url("/v1/messages"),
        "claude-test",
        UNSET_VAR,
        Policy::strict(Origin::CommandLine),
        Duration::from_secs(30),
        1 << 20,
    )
    .unwrap();
    for e in [&chat as &dyn Executor, &anthropic] {
        let err = e.call(&Call::prompt("hi")).unwrap_err();
        assert!(
            matches!(&err, ExecError::MissingKey { var } if var == UNSET_VAR),
            "{err}"
        );
        assert!(err.to_string().contains(UNSET_VAR), "{err}");
    }
    assert_eq!(fake.connections(), 0);
}

#[test]
fn loopback_is_refused_before_connecting_unless_the_policy_allows_it() {
    let fake = Fake::answering("200 OK", openai_answer("ok"));
    let url = fake.url("/v1/chat/completions");
    for origin in [Origin::RepoConfig, Origin::UserFile] {
        let spec = ExecutorSpec {
            is_local: false,
            origin,
            ..local_spec(&url, 30, 1 << 20)
        };
        let err = ChatExecutor::from_spec(&spec).unwrap_err();
        assert!(matches!(err, ExecError::Refused(_)), "{err}");
        assert!(err.to_string().contains("loopback"), "{err}");
        assert!(exec::build(&spec).is_err());
    }
    let err = AnthropicExecutor::with_url(
        &fake.url("/v1/messages"),
        "claude-test",
        "ANTHROPIC_API_KEY",
        Policy::strict(Origin::RepoConfig),
        Duration::from_secs(30),
        1 << 20,
    )
    .unwrap_err();
    assert_eq!(err.code(), "refused", "{err}");
    assert_eq!(fake.connections(), 0);
    // The same URL with is_local = true is served.
    let e = exec::build(&local_spec(&url, 30, 1 << 20)).unwrap();
    assert_eq!(e.call(&Call::prompt("hi")).unwrap().text, "ok");
}

#[test]
fn the_resolver_drops_refused_addresses_and_a_rebinding_name_is_refused() {
    use reqwest::dns::{Name, Resolve};

    let calls = Arc::new(AtomicUsize::new(0));
    let lookup = {
        let calls = calls.clone();
        move |_: &str| -> std::io::Result<Vec<IpAddr>> {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            let addrs: &[&str] = match n % 2 {
                0 => &["93.184.216.34"],
                _ => &["10.0.0.1"],
            };
            Ok(addrs.iter().map(|a| a.parse().unwrap()).collect())
        }
    };
    let r = VettingResolver::new(Policy::strict(Origin::RepoConfig), Arc::new(lookup));
    // The filter itself.
    assert_eq!(
        r.vet("rebind.example").unwrap(),
        vec!["93.184.216.34".parse::<IpAddr>().unwrap()]
    );
    let err = r.vet("rebind.example").unwrap_err();
    assert!(matches!(&err, VetError::Refused { .. }), "{err}");
    assert!(err.to_string().contains("10.0.0.1 (private"), "{err}");

    // The same through reqwest's resolver trait, as the connector calls it.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let first: Vec<SocketAddr> = rt
        .block_on(r.resolve(Name::from_str("rebind.example").unwrap()))
        .map_err(|e| e.to_string())
        .unwrap()
        .collect();
    assert_eq!(
        first,
        vec!["93.184.216.34:0".parse::<SocketAddr>().unwrap()]
    );
    let second = match rt.block_on(r.resolve(Name::from_str("rebind.example").unwrap())) {
        Ok(addrs) => panic!("not refused: {:?}", addrs.collect::<Vec<_>>()),
        Err(e) => e,
    };
    assert!(
        matches!(
            second.downcast_ref::<VetError>(),
            Some(VetError::Refused { .. })
        ),
        "{second}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

#[test]
fn a_name_that_rebinds_between_calls_is_refused_at_connection_time() {
    let fake = Fake::answering("200 OK", openai_answer("ok"));
    let calls = Arc::new(AtomicUsize::new(0));
    let lookup = {
        let calls = calls.clone();
        move |host: &str| -> std::io::Result<Vec<IpAddr>> {
            assert_eq!(host, "model.rebind.test");
            let addrs: &[&str] = match calls.fetch_add(1, Ordering::SeqCst) {
                0 => &["127.0.0.1"],
                1 => &["10.0.0.1"],
                // A refused address next to an admitted one: dropped, and the call goes on.
                _ => &["10.0.0.1", "169.254.169.254", "127.0.0.1"],
            };
            Ok(addrs.iter().map(|a| a.parse().unwrap()).collect())
        }
    };
    // Typed on the command line: loopback is the user's choice; private is not allowed.
    let spec = ExecutorSpec {
        kind: ExecutorKind::Chat {
            url: format!(
                "http://model.rebind.test:{}/v1/chat/completions",
                fake.addr.port()
            ),
            model: "test-model".into(),
            api_key_env: None,
        },
        is_local: false,
        allow_private: false,
        timeout_seconds: 30,
        max_response_bytes: 1 << 20,
        json_schema: false,
        origin: Origin::CommandLine,
        verify: Default::default(),
        metering: Default::default(),
        env: None,
    };
    let e = ChatExecutor::with_lookup(&spec, Arc::new(lookup)).unwrap();
    assert_eq!(e.call(&Call::prompt("one")).unwrap().text, "ok");
    let err = e.call(&Call::prompt("two")).unwrap_err();
    assert!(matches!(err, ExecError::Refused(_)), "{err}");
    assert!(err.to_string().contains("10.0.0.1"), "{err}");
    assert_eq!(fake.connections(), 1, "the refused call connected");
    assert_eq!(e.call(&Call::prompt("three")).unwrap().text, "ok");
    assert_eq!(fake.connections(), 2);
    assert_eq!(calls.load(Ordering::SeqCst), 3, "each call resolves afresh");
}

// ---- anthropic ----

#[test]
fn anthropic_sends_its_headers_and_parses_content_blocks() {
    let (var, value) = present_var();
    let fake = Fake::answering(
        "200 OK",
        json!({
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-served",
            "content": [{"type": "text", "text": "{\"steps\":"}, {"type": "text", "text": "[]}"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 21, "output_tokens": 4},
        })
        .to_string(),
    );
    let e = AnthropicExecutor::with_url(
        &fake.url("/v1/messages"),
        "claude-test",
        var,
        Policy::strict(Origin::CommandLine),
        Duration::from_secs(30),
        1 << 20,
    )
    .unwrap();
    let schema = plan_schema();
    let reply = e
        .call(&Call {
            system: Some("You plan."),
            prompt: "Plan it.",
            schema: Some(&schema),
            max_tokens: None,
        })
        .unwrap();
    assert_eq!(reply.text, r#"{"steps":[]}"#);
    assert_eq!(reply.model, "claude-served");
    assert_eq!(
        reply.usage,
        Some(Usage {
            input_tokens: 21,
            output_tokens: 4,
            estimated: false,
            truncated: false,
            over_reservation: None,
        })
    );
    let r = &fake.requests()[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(r.header("x-api-key"), Some(value.as_str()));
    assert_eq!(r.header("anthropic-version"), Some(ANTHROPIC_VERSION));
    assert_eq!(r.header("authorization"), None);
    let body = r.json();
    assert_eq!(body["model"], "claude-test");
    assert_eq!(body["max_tokens"], DEFAULT_MAX_TOKENS);
    assert_eq!(body["system"], "You plan.");
    let content = body["messages"][0]["content"].as_str().unwrap();
    assert_eq!(body["messages"][0]["role"], "user");
    assert!(
        content.starts_with("Plan it.") && content.contains(r#""required":["steps"]"#),
        "{content}"
    );
    assert!(!e.describe().contains(&value) && !format!("{e:?}").contains(&value));
}

#[test]
fn anthropic_errors_are_statuses_and_missing_text_is_no_answer() {
    let (var, _) = present_var();
    let fake = Fake::answering(
        "529 Overloaded",
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
            .to_string(),
    );
    let e = AnthropicExecutor::with_url(
        &fake.url("/v1/messages"),
        "claude-test",
        var,
        Policy::strict(Origin::CommandLine),
        Duration::from_secs(30),
        1 << 20,
    )
    .unwrap();
    let err = e.call(&Call::prompt("hi")).unwrap_err();
    assert!(
        matches!(&err, ExecError::Status { status: 529, excerpt, .. } if excerpt.contains("overloaded_error")),
        "{err}"
    );
    let fake = Fake::answering(
        "200 OK",
        json!({"type": "message", "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}]})
            .to_string(),
    );
    let e = AnthropicExecutor::with_url(
        &fake.url("/v1/messages"),
        "claude-test",
        var,
        Policy::strict(Origin::CommandLine),
        Duration::from_secs(30),
        1 << 20,
    )
    .unwrap();
    let err = e.call(&Call::prompt("hi")).unwrap_err();
    assert!(
        matches!(
            err,
            ExecError::NoAnswer {
                what: "content[].text",
                ..
            }
        ),
        "{err}"
    );
}

// ---- the real local model ----

fn llm_spec(llm: &LocalLlm) -> ExecutorSpec {
    ExecutorSpec {
        kind: ExecutorKind::Chat {
            url: llm.chat_url(),
            model: llm.model().to_string(),
            api_key_env: None,
        },
        is_local: true,
        allow_private: false,
        timeout_seconds: 300,
        max_response_bytes: 1 << 20,
        json_schema: false,
        origin: Origin::RepoConfig,
        verify: Default::default(),
        metering: Default::default(),
        env: None,
    }
}

#[test]
fn the_local_model_answers_a_plain_call() {
    let Some(llm) = LocalLlm::start() else { return };
    let e = ChatExecutor::from_spec(&llm_spec(&llm)).unwrap();
    let reply = e
        .call(&Call {
            max_tokens: Some(24),
            ..Call::prompt("Name three fruits.")
        })
        .unwrap();
    assert!(!reply.text.trim().is_empty(), "{reply:?}");
    assert_eq!(reply.model, llm.model());
    let usage = reply.usage.expect("usage reported");
    assert!(
        usage.input_tokens > 0 && usage.output_tokens > 0,
        "{usage:?}"
    );
}

#[test]
fn the_local_model_follows_a_json_schema() {
    let Some(llm) = LocalLlm::start() else { return };
    let e = ChatExecutor::from_spec(&llm_spec(&llm)).unwrap();
    let schema = OutputSchema {
        name: "cat".into(),
        schema: json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name", "age"],
            "additionalProperties": false,
        }),
    };
    let reply = e
        .call(&Call {
            system: None,
            prompt: "Describe a cat.",
            schema: Some(&schema),
            max_tokens: Some(128),
        })
        .unwrap();
    let v: Value = serde_json::from_str(&reply.text)
        .unwrap_or_else(|err| panic!("not JSON ({err}): {}", reply.text));
    assert!(v["name"].is_string(), "{v}");
    assert!(v["age"].is_i64() || v["age"].is_u64(), "{v}");
}

/// The command executor under a flood: 1 GiB on stdout is read to the end (so the child never
/// blocks on a full pipe) while only the cap is kept; a non-zero exit, a hang with a
/// grandchild and a missing program are distinct, coded errors.
#[test]
fn command_executor_survives_a_gigabyte_a_hang_and_a_failure() {
    use git_forum::exec::command::Limits;
    use git_forum::exec::{Call, CommandExecutor, Executor};
    use std::time::{Duration, Instant};
    let sh = |script: &str, limits: Limits| {
        CommandExecutor::new(
            vec!["sh".into(), "-c".into(), script.into(), "sh".into()],
            limits,
        )
    };
    let cap = Limits {
        max_stdout: 1 << 20,
        ..Limits::default()
    };
    let r = sh("head -c 1073741824 /dev/zero | tr '\\000' x", cap)
        .call(&Call::prompt("flood"))
        .unwrap();
    assert_eq!(r.text.len(), 1 << 20);
    assert!(r.text.bytes().all(|b| b == b'x'));

    let e = sh("echo broken >&2; exit 1", Limits::default())
        .call(&Call::prompt("x"))
        .unwrap_err();
    assert_eq!(e.code(), "exit");
    assert!(e.to_string().contains("broken"), "{e}");

    let quick = Limits {
        timeout: Duration::from_millis(500),
        ..Limits::default()
    };
    let t = Instant::now();
    let e = sh("sh -c 'sleep 60' & sleep 60", quick)
        .call(&Call::prompt("x"))
        .unwrap_err();
    assert_eq!(e.code(), "timeout");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());

    let e = CommandExecutor::new(vec!["/nonexistent/model".into()], Limits::default())
        .call(&Call::prompt("x"))
        .unwrap_err();
    assert_eq!(e.code(), "spawn");
}

/// `--claude` is the preset `claude -p [--model M] --output-format json PROMPT` (outside a
/// worktree): a stand-in `claude` on PATH sees those arguments, and the run records the model.
#[test]
fn the_claude_code_preset_runs_claude_p_with_the_prompt_last() {
    use std::os::unix::fs::PermissionsExt;
    let repo = crate::common::Repo::new("sha1");
    let bin = repo.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let args_log = repo.path().join("claude-args");
    let script = format!(
        r#"#!/bin/sh
for a; do p="$a"; done
printf '%s\n' "$1 $2 $3" >> '{log}'
{{ case "$p" in
  *"Break this request"*) echo '{{"tasks":[{{"id":"T1","agent":"docs","instruction":"write it","depends_on":[],"done_when":[]}}]}}' ;;
  *"Judge one task"*) echo '{{"decision":"pass","score":1,"reason":"fine"}}' ;;
  *) echo "written, verified by the test output" ;;
esac; }} | python3 -c 'import json,sys; print(json.dumps({{"type":"result","is_error":False,"result":sys.stdin.read().strip(),"modelUsage":{{"opus-test":{{}}}}}}))'
"#,
        log = args_log.display()
    );
    let claude = bin.join("claude");
    std::fs::write(&claude, script).unwrap();
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = repo
        .forum()
        .env("PATH", &path)
        .args([
            "submit",
            "--json",
            "--claude",
            "--model",
            "opus-test",
            "write the docs",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["answer"], "written, verified by the test output");
    // Every call was `claude -p --model opus-test PROMPT`, and the model recorded is opus-test.
    let log = std::fs::read_to_string(&args_log).unwrap();
    assert_eq!(log.lines().count(), 4, "{log}");
    assert!(log.lines().all(|l| l == "-p --model opus-test"), "{log}");
    assert_eq!(j["git_forum_receipt"]["calls_per_model"]["opus-test"], 4);
}

/// `count_tokens = "llama.cpp"`: a call reserves the prompt tokens the local model's server
/// counts for it, which is exactly what the server then reports, where the byte bound is
/// several times more.
#[test]
fn the_local_models_own_count_is_what_a_call_reserves_and_then_reports() {
    let Some(llm) = LocalLlm::start() else { return };
    let mut spec = llm_spec(&llm);
    spec.metering = spec.metering.counting_tokens(TokenCount::LlamaCpp);
    let counted = ChatExecutor::from_spec(&spec).unwrap();
    let bytes = ChatExecutor::from_spec(&llm_spec(&llm)).unwrap();
    let schema = OutputSchema {
        name: "why".into(),
        schema: json!({
            "type": "object",
            "properties": {"why": {"type": "string"}},
            "required": ["why"],
            "additionalProperties": false,
        }),
    };
    let prompt = "def add(a, b):\n    return a - b\n\n\
                  The test `assert add(2, 3) == 5` fails. Say in one sentence why.";
    for schema in [None, Some(&schema)] {
        let call = Call {
            system: Some("You review Python code and answer briefly."),
            prompt,
            schema,
            max_tokens: Some(8),
        };
        let reserved = counted.prompt_tokens_bound(&call);
        let reply = counted.call(&call).unwrap();
        let reported = reply.usage.expect("usage reported").input_tokens;
        assert_eq!(reserved, reported, "schema: {}", schema.is_some());
        let by_bytes = bytes.prompt_tokens_bound(&call);
        assert!(by_bytes > 2 * reserved, "{by_bytes} against {reserved}");
    }
}

/// A server that cannot count (anything but llama.cpp's two answers) leaves the byte bound,
/// and the count's requests carry no key.
#[test]
fn a_server_that_cannot_count_leaves_the_byte_bound() {
    let fake = Fake::start(|req, s, _| match req.path.as_str() {
        "/apply-template" => respond(s, "200 OK", r#"{"prompt": "<s>hi</s>"}"#),
        "/tokenize" => respond(s, "404 Not Found", r#"{"error": "no such route"}"#),
        _ => respond(s, "200 OK", &openai_answer("ok")),
    });
    let mut spec = local_spec(&fake.url("/v1/chat/completions"), 30, 1 << 20);
    spec.metering = spec.metering.counting_tokens(TokenCount::LlamaCpp);
    let e = ChatExecutor::from_spec(&spec).unwrap();
    let call = Call {
        system: Some("sys"),
        prompt: "a prompt of some bytes",
        schema: None,
        max_tokens: Some(4),
    };
    assert_eq!(e.prompt_tokens_bound(&call), exec::bytes_bound(&call));
    let paths: Vec<String> = fake.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/apply-template", "/tokenize"]);
    // A count the server gives is taken as it is.
    let counting = Fake::start(|req, s, _| match req.path.as_str() {
        "/apply-template" => respond(s, "200 OK", r#"{"prompt": "<s>hi</s>"}"#),
        "/tokenize" => respond(s, "200 OK", r#"{"tokens": [1, 2, 3]}"#),
        _ => respond(s, "200 OK", &openai_answer("ok")),
    });
    let mut spec = local_spec(&counting.url("/v1/chat/completions"), 30, 1 << 20);
    spec.metering = spec.metering.counting_tokens(TokenCount::LlamaCpp);
    let e = ChatExecutor::from_spec(&spec).unwrap();
    assert_eq!(e.prompt_tokens_bound(&call), 3);
    let reqs = counting.requests();
    assert_eq!(
        reqs[0].json(),
        json!({"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "a prompt of some bytes"}]})
    );
    assert_eq!(
        reqs[1].json(),
        json!({"content": "<s>hi</s>", "add_special": true})
    );
    assert!(reqs.iter().all(|r| r.header("authorization").is_none()));
}
