//! A confined worker's way out (`git_forum::egress`), with real processes: a fake model (an axum
//! server on a loopback port of the host) behind the metering forwarder, the egress proxy, and
//! inside a real `bwrap --unshare-all` the bridge (`git forum __egress-bridge`) running `curl`.
//! From inside, a request to the model's host and port through the proxy passes, one to another
//! loopback port of the host is refused and counted, a direct connection fails (the namespace
//! has no network), and the three protocols' streamed replies pass through the forwarder
//! unchanged with their usage read, until the request after the 2,000-token ceiling is refused
//! with the overshoot recorded. Outside the sandbox, a streamed reply flows through the
//! forwarder event by event, and the proxy applies the endpoint policy to the addresses a name
//! resolves to.

use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::pin::Pin;
use std::process::Command;
use std::sync::{Arc, Mutex, mpsc};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::routing::{get, post};
use git_forum::egress::{
    Allow, CeilingHit, Ceilings, Meter, MeterConfig, Prices, Proxy, ProxyConfig,
};
use git_forum::exec::endpoint::{Origin, Policy};

/// Each fake answer reports 600 input and 300 output tokens: three answers pass a 2,000-token
/// ceiling by 700.
const ANTHROPIC: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"usage\":{\"input_tokens\":600,\"output_tokens\":1}}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"fixed\"}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":300}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
const RESPONSES: &str = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\",\"usage\":null}}\n\nevent: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"fixed\"}\n\nevent: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r1\",\"usage\":{\"input_tokens\":600,\"output_tokens\":300,\"total_tokens\":900}}}\n\n";
const CHAT: &str = "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"fixed\"}}]}\n\ndata: {\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":600,\"completion_tokens\":300,\"total_tokens\":900}}\n\ndata: [DONE]\n\n";

/// A body whose chunks a test hands over one at a time.
struct Chunks(tokio::sync::mpsc::Receiver<Bytes>);

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|o| o.map(|b| Ok(http_body::Frame::data(b))))
    }
}

fn sse(text: &'static str) -> axum::response::Response {
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from(text))
        .unwrap()
}

/// The fake model: a loopback axum server on a runtime of its own, stopped when dropped.
struct Model {
    port: u16,
    _runtime: tokio::runtime::Runtime,
}

/// What the held stream of `/v1/held` waits for: the test's word that the first event arrived.
type Release = Arc<Mutex<Option<mpsc::Receiver<()>>>>;

/// How `/v1/held` ended: `true` when the test released it, `false` when it gave up waiting.
type Released = Arc<Mutex<Option<bool>>>;

fn start_model(release: Release, released: Released) -> Model {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = move || {
        let (release, released) = (release.clone(), released.clone());
        async move {
            let (tx, rx) = tokio::sync::mpsc::channel(4);
            tx.send(Bytes::from_static(b"data: {\"first\":true}\n\n"))
                .await
                .unwrap();
            tokio::task::spawn_blocking(move || {
                let rx = release.lock().unwrap().take().expect("one held request");
                // Not a timing assertion: a forwarder that holds the first event back makes the
                // test wait here in vain, and the test then fails on `released`.
                let by_test = rx.recv_timeout(Duration::from_secs(60)).is_ok();
                *released.lock().unwrap() = Some(by_test);
                let _ = tx.blocking_send(Bytes::from_static(
                    b"data: {\"second\":true,\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\n",
                ));
            });
            axum::response::Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::new(Chunks(rx)))
                .unwrap()
        }
    };
    let app = axum::Router::new()
        .route("/hello", get(|| async { "hello from the model" }))
        .route("/v1/messages", post(|| async { sse(ANTHROPIC) }))
        .route("/v1/responses", post(|| async { sse(RESPONSES) }))
        .route("/v1/chat/completions", post(|| async { sse(CHAT) }))
        .route("/v1/held", post(held));
    runtime.spawn(async move { axum::serve(listener, app).await });
    Model {
        port,
        _runtime: runtime,
    }
}

fn bwrap_works() -> bool {
    Command::new("bwrap")
        .args(["--unshare-all", "--ro-bind", "/", "/", "true"])
        .status()
        .is_ok_and(|s| s.success())
}

/// The script the bridge runs inside the sandbox: one `NAME CODE/CONNECT-CODE rc=N` line per
/// attempt, the metered replies saved in `dir`, and exit status 7 (which the bridge must pass on).
fn script(dir: &Path, model: u16, other: u16) -> String {
    let d = dir.display();
    format!(
        r#"c() {{ curl -sS -m 20 -w '%{{http_code}}/%{{http_connect}}' "$@"; echo " rc=$?"; }}
echo "proxied $(c -o /dev/null -x http://127.0.0.1:3128 http://127.0.0.1:{model}/hello)"
echo "tunnelled $(c -o /dev/null -p -x http://127.0.0.1:3128 http://127.0.0.1:{model}/hello)"
echo "other $(c -o /dev/null -x http://127.0.0.1:3128 http://127.0.0.1:{other}/)"
echo "other_tunnel $(c -o /dev/null -p -x http://127.0.0.1:3128 http://127.0.0.1:{other}/)"
echo "direct $(c -o /dev/null http://127.0.0.1:{model}/hello 2>/dev/null)"
n=0
for p in messages responses chat/completions messages; do
  n=$((n+1))
  echo "meter$n $(c -N -o {d}/reply$n -H 'content-type: application/json' -d '{{"stream":true}}' http://127.0.0.1:8080/v1/$p)"
done
exit 7
"#
    )
}

fn run_confined(dir: &Path, script: &str) -> (i32, String) {
    let bin = env!("CARGO_BIN_EXE_git-forum");
    let d = dir.display().to_string();
    let out = Command::new("bwrap")
        .args(["--unshare-all", "--die-with-parent", "--new-session"])
        .args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
        .args(["--tmpfs", "/tmp", "--bind", &d, &d, "--"])
        .args([bin, "__egress-bridge"])
        .arg(format!("--listen=127.0.0.1:3128={d}/proxy.sock"))
        .arg(format!("--listen=127.0.0.1:8080={d}/meter.sock"))
        .args(["--", "sh", "-c", script])
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code().is_some(), "bwrap was killed: {err}");
    (
        out.status.code().unwrap(),
        format!("{text}\nstderr:\n{err}"),
    )
}

fn line<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} line in:\n{out}"))
}

#[test]
fn a_confined_worker_reaches_only_its_model_and_is_metered_up_to_its_ceiling() {
    assert!(bwrap_works(), "bubblewrap cannot make namespaces here");
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let model = start_model(Arc::default(), Arc::default());
    // Another loopback service of the host, which the worker must not reach.
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let other_port = other.local_addr().unwrap().port();
    let proxy = Proxy::start(
        &dir.path().join("proxy.sock"),
        ProxyConfig::new(
            vec![Allow::new("127.0.0.1", model.port)],
            Policy::strict(Origin::CommandLine),
        ),
    )
    .unwrap();
    let (hits, hit_rx) = mpsc::channel::<CeilingHit>();
    let hits = Mutex::new(hits);
    let mut config = MeterConfig::new(
        url::Url::parse(&format!("http://127.0.0.1:{}", model.port)).unwrap(),
        Policy::strict(Origin::CommandLine),
    );
    config.ceilings = Ceilings {
        max_tokens: Some(2_000),
        max_cost_usd: None,
    };
    config.prices = Some(Prices {
        input_usd_per_mtok: 3.0,
        output_usd_per_mtok: 15.0,
    });
    config.on_ceiling = Some(Arc::new(move |h: &CeilingHit| {
        hits.lock().unwrap().send(h.clone()).unwrap();
    }));
    let meter = Meter::start(&dir.path().join("meter.sock"), config).unwrap();

    let (code, out) = run_confined(dir.path(), &script(dir.path(), model.port, other_port));
    assert_eq!(
        code, 7,
        "the bridge exits with its program's status:\n{out}"
    );
    assert_eq!(line(&out, "proxied"), "200/000 rc=0", "{out}");
    assert_eq!(line(&out, "tunnelled"), "200/200 rc=0", "{out}");
    assert_eq!(line(&out, "other"), "403/000 rc=0", "{out}");
    assert!(
        line(&out, "other_tunnel").starts_with("000/403 rc="),
        "{out}"
    );
    assert!(line(&out, "direct").starts_with("000/000 rc=7"), "{out}");
    for (n, want) in [(1, "200"), (2, "200"), (3, "200"), (4, "402")] {
        assert_eq!(
            line(&out, &format!("meter{n}")),
            format!("{want}/000 rc=0"),
            "{out}"
        );
    }
    for (n, body) in [(1, ANTHROPIC), (2, RESPONSES), (3, CHAT)] {
        let got = std::fs::read_to_string(dir.path().join(format!("reply{n}"))).unwrap();
        assert_eq!(got, body, "reply {n} passed through changed");
    }
    let refusal: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("reply4")).unwrap()).unwrap();
    assert_eq!(refusal["type"], "error", "{refusal}");
    assert!(
        refusal["error"]["message"]
            .as_str()
            .unwrap()
            .contains("token ceiling is reached (2700 of 2000"),
        "{refusal}"
    );

    other.set_nonblocking(true).unwrap();
    assert!(
        other.accept().is_err(),
        "a connection reached the other port"
    );
    let counts = proxy.stop();
    let other_key = format!("127.0.0.1:{other_port}");
    assert_eq!(counts.refused.get(&other_key), Some(&2), "{counts:?}");
    assert_eq!(counts.refused_total(), 2, "{counts:?}");
    assert_eq!(
        counts.admitted.get(&format!("127.0.0.1:{}", model.port)),
        Some(&2),
        "{counts:?}"
    );

    let report = meter.stop();
    let seen: Vec<_> = report
        .requests
        .iter()
        .map(|r| {
            (
                r.path.as_str(),
                r.status,
                r.refused,
                r.usage_seen,
                r.input_tokens,
                r.output_tokens,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("/v1/messages", 200, false, true, 600, 300),
            ("/v1/responses", 200, false, true, 600, 300),
            ("/v1/chat/completions", 200, false, true, 600, 300),
            ("/v1/messages", 402, true, false, 0, 0),
        ]
    );
    assert_eq!((report.input_tokens, report.output_tokens), (1_800, 900));
    assert_eq!((report.refused, report.overshoot_tokens), (1, 700));
    let cost = report.cost_usd.unwrap();
    assert!(
        (cost - (1_800.0 * 3.0 + 900.0 * 15.0) / 1e6).abs() < 1e-12,
        "{cost}"
    );
    let hit = hit_rx
        .try_recv()
        .expect("the caller was told of the ceiling");
    assert_eq!(
        (hit.ceiling, hit.used_tokens, hit.max_tokens),
        ("tokens", 2_700, Some(2_000))
    );
    assert!(
        hit_rx.try_recv().is_err(),
        "the caller was told more than once"
    );
    assert_eq!(report.ceiling, Some(hit));
}

/// Reads from `s` into `got` until `want` is in it; false when the stream ended first.
fn read_until(s: &mut UnixStream, got: &mut Vec<u8>, want: &str) -> bool {
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(got).contains(want) {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    true
}

#[test]
fn a_streamed_reply_flows_through_the_meter_as_it_arrives() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (release_tx, release_rx) = mpsc::channel();
    let released: Released = Arc::default();
    let model = start_model(Arc::new(Mutex::new(Some(release_rx))), released.clone());
    let sock = dir.path().join("meter.sock");
    let meter = Meter::start(
        &sock,
        MeterConfig::new(
            url::Url::parse(&format!("http://127.0.0.1:{}", model.port)).unwrap(),
            Policy::strict(Origin::CommandLine),
        ),
    )
    .unwrap();
    let mut s = UnixStream::connect(&sock).unwrap();
    s.write_all(b"POST /v1/held HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        .unwrap();
    let mut got = Vec::new();
    assert!(
        read_until(&mut s, &mut got, "\"first\""),
        "{}",
        String::from_utf8_lossy(&got)
    );
    release_tx.send(()).unwrap();
    // Up to the chunked body's end, which the meter sends only after it has counted the usage.
    assert!(
        read_until(&mut s, &mut got, "\r\n0\r\n\r\n"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    assert!(String::from_utf8_lossy(&got).contains("\"second\""));
    assert_eq!(
        *released.lock().unwrap(),
        Some(true),
        "the first event waited for the rest"
    );
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"));
    drop(s);
    let report = meter.stop();
    assert_eq!(report.requests.len(), 1, "{report:?}");
    assert_eq!((report.input_tokens, report.output_tokens), (5, 2));
}

/// Sends `request` to the proxy at `sock` and returns its status line.
fn ask(sock: &Path, request: &str) -> String {
    let mut s = UnixStream::connect(sock).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn the_proxy_checks_the_address_a_name_resolves_to_when_it_connects() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let sock = dir.path().join("proxy.sock");
    // `model.test` is allowed by name but resolves to the cloud metadata address, and
    // `localhost` to loopback, which a repository's endpoint reaches only with is_local.
    let lookup = |host: &str| -> std::io::Result<Vec<IpAddr>> {
        Ok(match host {
            "model.test" => vec!["169.254.169.254".parse().unwrap()],
            _ => vec!["127.0.0.1".parse().unwrap()],
        })
    };
    let proxy = Proxy::start(
        &sock,
        ProxyConfig::new(
            vec![
                Allow::parse("model.test").unwrap(),
                Allow::parse("localhost:9").unwrap(),
            ],
            Policy::strict(Origin::RepoConfig),
        )
        .with_lookup(Arc::new(lookup)),
    )
    .unwrap();
    let meta = ask(
        &sock,
        "CONNECT model.test:443 HTTP/1.1\r\nHost: model.test:443\r\n\r\n",
    );
    assert!(meta.starts_with("HTTP/1.1 403"), "{meta}");
    assert!(meta.contains("metadata"), "{meta}");
    let local = ask(
        &sock,
        "GET http://localhost:9/x HTTP/1.1\r\nHost: localhost:9\r\n\r\n",
    );
    assert!(local.starts_with("HTTP/1.1 403"), "{local}");
    assert!(local.contains("loopback"), "{local}");
    let stray = ask(&sock, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n");
    assert!(stray.starts_with("HTTP/1.1 400"), "{stray}");
    let counts = proxy.stop();
    assert_eq!(counts.refused.get("model.test:443"), Some(&1), "{counts:?}");
    assert_eq!(counts.refused.get("localhost:9"), Some(&1), "{counts:?}");
    assert!(counts.admitted.is_empty(), "{counts:?}");
    assert!(!sock.exists(), "the socket was left behind");
}
