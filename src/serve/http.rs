//! The HTTP transport: axum over the [`Dispatcher`], with the guards a local daemon needs.
//!
//! Connections ([`accept_loop`]): at most `max_connections` are open at once. When a new one
//! arrives at the cap, the connection that has waited longest on its client (for its request
//! head, its body, or its next request on a kept-alive connection) is closed to make room; only
//! when every open connection has a request in the engine does the new one wait in the listen
//! queue. A connection that starts no request within the read timeout while none of its
//! requests is in the engine is closed: one that sends nothing, drips its head or sits idle
//! between requests (see the `conns` module, which watches each connection instead of arming
//! hyper's header timer for every request). So clients that open connections and send nothing,
//! drip their headers or sit idle cannot keep anyone else out: the cap, the idle-first eviction
//! and the idle watch are this file's own (neither hyper-util nor tower has a connection cap
//! that evicts).
//!
//! Every request passes, in order:
//!
//! 1. the **Host** check against DNS rebinding: only the bound `host:port` and the loopback
//!    forms (`127.0.0.1:P`, `localhost:P`, `[::1]:P`) pass; on an unspecified bind (`0.0.0.0`,
//!    `::`) any IP literal with the bound port passes, since a rebinding page always arrives
//!    under a DNS name; `--allow-host NAME` adds names. A present `Origin` must be
//!    `http://` + an allowed host. Refusals are 403.
//! 2. the **bearer token** ([`super::token`]), by the route's [`Access`]: every `POST` and the
//!    reads that describe the host ask it always, loopback included; reads of the record ask
//!    it with `--require-token` or on a non-loopback address; `GET /health` never does, nor
//!    `POST /witness`, whose offer carries the log's signature. 401 with
//!    `WWW-Authenticate: Bearer`, compared in constant time.
//! 3. the **route**: 404 for no such path, 405 for the wrong method.
//! 4. the **content type**: a `POST` must say `Content-Type: application/json` (415
//!    otherwise), so a page in a browser cannot post a form or `text/plain` to the daemon
//!    without a CORS preflight, which the daemon never answers.
//! 5. the **body**: 413 over the limit (from `Content-Length` at once, or while reading a
//!    chunked body), 408 when it does not arrive within the read timeout.
//! 6. the **concurrency limit**: a request waits up to its timeout for one of N slots, then 503.
//!    A slot is held until the engine is done with the request, even if the client has gone.
//! 7. the **timeout**: 504 when the engine has not answered in time (the work still finishes
//!    and is witnessed); submit, resume and plan get the longer submit limit.
//!
//! A refusal at any step changes nothing: the dispatcher is not called.
//!
//! A read the cache answers (the `fast` module) is answered on the connection's own task,
//! before the request reaches the router, when every check above would pass; anything else
//! goes to the router and the checks in order.
//!
//! Paths are matched literally: a query string is a 404, as in Forum, except on
//! `GET /replay/SEQ`, which reads a page at a time (`?limit=&after=`).
//! `POST /append` takes an `Idempotency-Key` header (see the dispatcher's append).

mod conns;
mod fast;
mod limits;
use conns::{Conn, accept_loop};
mod view;
pub(crate) use limits::Limits;

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::body::{Body, HttpBody};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use tokio::sync::Semaphore;

use super::dispatch::{Access, Dispatcher, Reply, access, allowed_methods, is_long_running};

/// Forum's body limit (1 MiB), the default here too.
pub(crate) const DEFAULT_MAX_BODY: usize = 1024 * 1024;

/// Connections open at once by default (well under the usual 1024 descriptors); past it, the
/// connection idle longest is closed for a new one.
pub(crate) const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// Which requests are let in: the Host and Origin values allowed, and the token.
#[derive(Debug, Clone)]
pub(crate) struct Guard {
    hosts: Vec<String>,
    /// On an unspecified bind: any IP literal with this port.
    any_ip_port: Option<u16>,
    token: String,
    /// Whether reads of the record ask the token too (`--require-token`, or a non-loopback
    /// address).
    reads_need_token: bool,
}

fn host_port(host: &str, port: u16) -> String {
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => format!("[{v6}]:{port}"),
        _ => format!("{}:{port}", host.to_ascii_lowercase()),
    }
}

impl Guard {
    /// The guard of a server bound at `bound` (asked for as `host`), with extra allowed host
    /// names and its bearer token; `require_token` closes the reads of the record too (as a
    /// non-loopback address always does).
    pub(crate) fn new(
        host: &str,
        bound: SocketAddr,
        extra: &[String],
        token: String,
        require_token: bool,
    ) -> Guard {
        let port = bound.port();
        let mut hosts = vec![
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
            host_port(host, port),
            host_port(&bound.ip().to_string(), port),
        ];
        hosts.extend(extra.iter().map(|h| host_port(h, port)));
        if port == 80 {
            let bare: Vec<String> = hosts
                .iter()
                .filter_map(|h| h.strip_suffix(":80").map(str::to_string))
                .collect();
            hosts.extend(bare);
        }
        hosts.sort();
        hosts.dedup();
        Guard {
            hosts,
            any_ip_port: bound.ip().is_unspecified().then_some(port),
            token,
            reads_need_token: require_token || !bound.ip().is_loopback(),
        }
    }

    /// Whether a `Host` header value is one this server answers to.
    pub(crate) fn host_allowed(&self, value: &str) -> bool {
        // The names kept are lower case: compared without a lower-cased copy of the value.
        let value = value.trim();
        if self.hosts.iter().any(|h| h.eq_ignore_ascii_case(value)) {
            return true;
        }
        let v = value.to_ascii_lowercase();
        let Some(port) = self.any_ip_port else {
            return false;
        };
        let Some((h, p)) = v.rsplit_once(':') else {
            return false;
        };
        let h = h.trim_start_matches('[').trim_end_matches(']');
        p.parse::<u16>().ok() == Some(port) && h.parse::<IpAddr>().is_ok()
    }

    /// Whether an `Origin` header value names this server.
    pub(crate) fn origin_allowed(&self, value: &str) -> bool {
        value
            .strip_prefix("http://")
            .is_some_and(|h| !h.contains('/') && self.host_allowed(h))
    }

    /// Whether a request to a route of `access` with this `Authorization` header value may
    /// pass.
    pub(crate) fn authorized(&self, access: Access, value: Option<&str>) -> bool {
        let needed = match access {
            Access::Open | Access::Signed => false,
            Access::Record => self.reads_need_token,
            Access::Host | Access::Write => true,
        };
        !needed || self.carries_token(value)
    }

    /// Whether an `Authorization` header value is `Bearer <the token>`.
    fn carries_token(&self, value: Option<&str>) -> bool {
        let Some(v) = value else { return false };
        let Some((scheme, given)) = v.trim().split_once(' ') else {
            return false;
        };
        scheme.eq_ignore_ascii_case("bearer") && constant_time_eq(given.trim(), &self.token)
    }
}

/// Compares two strings in time that depends only on their lengths.
fn constant_time_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether a `Content-Type` value is JSON: `application/json`, with or without parameters
/// (`; charset=utf-8`), in any case.
fn is_json(value: &str) -> bool {
    value
        .split(';')
        .next()
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
}

/// The HTTP server's state: the dispatcher, the guard, the limits and the slots.
pub(crate) struct Server {
    dispatcher: Arc<Dispatcher>,
    guard: Guard,
    limits: Limits,
    slots: Arc<Semaphore>,
    /// The review pages' logins and sessions.
    view: Arc<super::pages::View>,
}

impl Server {
    /// A server for `dispatcher`.
    pub(crate) fn new(dispatcher: Arc<Dispatcher>, guard: Guard, limits: Limits) -> Server {
        let slots = Arc::new(Semaphore::new(limits.concurrency.max(1)));
        Server {
            dispatcher,
            guard,
            limits,
            slots,
            view: Arc::default(),
        }
    }
}

fn reply_response(reply: &Reply) -> Response {
    let mut r = Response::new(Body::from(reply.body_text()));
    *r.status_mut() =
        StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_headers(r.headers_mut());
    r
}

/// The headers of every JSON answer, the kept ones included.
fn json_headers(h: &mut HeaderMap) {
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
}

fn error(status: u16, message: impl Into<String>) -> Response {
    reply_response(&Reply::error(status, message))
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Result<Option<&str>, ()> {
    match headers.get(name) {
        None => Ok(None),
        Some(v) => v.to_str().map(Some).map_err(|_| ()),
    }
}

/// Reads the body, up to `limit` bytes. `Err(413)` over the limit, `Err(400)` on a broken
/// stream.
async fn read_body(body: Body, limit: usize) -> Result<Vec<u8>, Response> {
    let mut body = body;
    let mut buf = Vec::new();
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|e| error(400, format!("reading the request body: {e}")))?;
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > limit {
                return Err(error(
                    413,
                    format!("the request body is over the {limit} byte limit"),
                ));
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf)
}

async fn handle(State(server): State<Arc<Server>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    if super::pages::is_view(parts.uri.path()) {
        return view::answer(&server, &parts).await;
    }
    match admit(&server, &parts) {
        Ok(admitted) => run(&server, &parts, body, admitted).await,
        Err(r) => *r,
    }
}

/// What a request that passed the guards carries on to the engine.
struct Admitted {
    method: String,
    path: String,
    query: Option<serde_json::Value>,
    key: Option<String>,
}

/// A refusal: boxed, as a response is large beside what the checks return when they pass.
fn refused(status: u16, message: impl Into<String>) -> Box<Response> {
    Box::new(error(status, message))
}

/// The checks made before the body is read, in order: Host and Origin, the bearer token, the
/// query string, the Idempotency-Key header, the method, the content type. The first to fail
/// gives the response.
fn admit(server: &Server, parts: &axum::http::request::Parts) -> Result<Admitted, Box<Response>> {
    let headers = &parts.headers;
    check_host_and_origin(&server.guard, headers)?;
    let path = parts.uri.path().to_string();
    let method = parts.method.as_str().to_string();
    check_token(&server.guard, headers, &method, &path)?;
    let query = page_query(parts, &path)?;
    let key = match header_str(headers, header::HeaderName::from_static("idempotency-key")) {
        Ok(k) => k.map(str::to_string),
        Err(()) => return Err(refused(400, "the Idempotency-Key header is not text")),
    };
    check_method(server, &method, &path)?;
    check_content_type(headers, &method, &path)?;
    Ok(Admitted {
        method,
        path,
        query,
        key,
    })
}

/// The DNS rebinding guard: the Host must be this server's, an Origin (if any) one allowed.
fn check_host_and_origin(guard: &Guard, headers: &HeaderMap) -> Result<(), Box<Response>> {
    match header_str(headers, header::HOST) {
        Ok(Some(h)) if guard.host_allowed(h) => {}
        Ok(Some(h)) => {
            return Err(refused(
                403,
                format!("Host {h:?} is not this server (DNS rebinding guard)"),
            ));
        }
        Ok(None) => return Err(refused(403, "a Host header is required")),
        Err(()) => return Err(refused(403, "the Host header is not text")),
    }
    match header_str(headers, header::ORIGIN) {
        Ok(None) => Ok(()),
        Ok(Some(o)) if guard.origin_allowed(o) => Ok(()),
        _ => Err(refused(403, "cross-origin requests are not accepted")),
    }
}

/// A 401 with `WWW-Authenticate: Bearer` when the route needs a token the request lacks.
fn check_token(
    guard: &Guard,
    headers: &HeaderMap,
    method: &str,
    path: &str,
) -> Result<(), Box<Response>> {
    let auth = header_str(headers, header::AUTHORIZATION).unwrap_or(None);
    if guard.authorized(access(method, path), auth) {
        return Ok(());
    }
    let mut r = error(
        401,
        "a bearer token is required: send `Authorization: Bearer TOKEN` with the token in the file `git forum serve --token-path` names",
    );
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    Err(Box::new(r))
}

/// Only /replay pages (?limit=&after=), /log (?limit=) and /blame (?file=&lines=&rev=&verify=)
/// take a query; elsewhere paths match literally.
fn page_query(
    parts: &axum::http::request::Parts,
    path: &str,
) -> Result<Option<serde_json::Value>, Box<Response>> {
    match parts.uri.query() {
        None => Ok(None),
        Some(q)
            if parts.method == axum::http::Method::GET
                && (path.starts_with("/replay/") || path == "/log" || path == "/blame") =>
        {
            match super::page::query_fields(q) {
                Ok(fields) => Ok(Some(fields)),
                Err(m) => Err(refused(400, m.to_string())),
            }
        }
        Some(_) => Err(refused(
            404,
            "query strings are not accepted here: paths are matched literally (only GET /replay/SEQ takes ?limit=&after=, GET /log ?limit=, and GET /blame ?file=&lines=&rev=&verify=)",
        )),
    }
}

/// A method the path does not take gets the dispatcher's own answer, with `Allow` on a 405.
fn check_method(server: &Server, method: &str, path: &str) -> Result<(), Box<Response>> {
    let allowed = allowed_methods(path);
    if allowed.contains(&method) {
        return Ok(());
    }
    let reply = server.dispatcher.handle(method, path, b"");
    let mut r = reply_response(&reply);
    if reply.status == 405
        && let Ok(v) = HeaderValue::from_str(&allowed.join(", "))
    {
        r.headers_mut().insert(header::ALLOW, v);
    }
    Err(Box::new(r))
}

/// Every method but GET takes only JSON bodies.
fn check_content_type(headers: &HeaderMap, method: &str, path: &str) -> Result<(), Box<Response>> {
    if method == "GET" {
        return Ok(());
    }
    match header_str(headers, header::CONTENT_TYPE) {
        Ok(Some(t)) if is_json(t) => Ok(()),
        _ => Err(refused(
            415,
            format!("{method} {path} takes only `Content-Type: application/json` bodies"),
        )),
    }
}

/// The body, refused early on a Content-Length over the limit, cut off at the limit and at the
/// read timeout.
async fn read_limited_body(
    limits: &Limits,
    headers: &HeaderMap,
    body: Body,
) -> Result<Vec<u8>, Box<Response>> {
    if let Ok(Some(len)) = header_str(headers, header::CONTENT_LENGTH)
        && len
            .trim()
            .parse::<u64>()
            .is_ok_and(|n| n > limits.max_body as u64)
    {
        return Err(refused(
            413,
            format!(
                "the request body is over the {} byte limit",
                limits.max_body
            ),
        ));
    }
    match tokio::time::timeout(limits.read_timeout, read_body(body, limits.max_body)).await {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(r)) => Err(Box::new(r)),
        Err(_) => Err(refused(
            408,
            format!(
                "the request body did not arrive within {} s",
                limits.read_timeout.as_secs_f64()
            ),
        )),
    }
}

/// Reads the body, waits for a slot and runs the request on the engine, within its time limit.
async fn run(
    server: &Server,
    parts: &axum::http::request::Parts,
    body: Body,
    admitted: Admitted,
) -> Response {
    let Admitted {
        method,
        path,
        query,
        key,
    } = admitted;
    let limits = &server.limits;
    let bytes = match read_limited_body(limits, &parts.headers, body).await {
        Ok(b) => b,
        Err(r) => return *r,
    };
    // From here the request waits on the engine, not on its client: its connection is not
    // one to evict.
    let _busy = parts.extensions.get::<Arc<Conn>>().map(|c| c.busy());
    let limit = if is_long_running(&method, &path) {
        limits.submit_timeout
    } else {
        limits.timeout
    };
    let slot = match tokio::time::timeout(limit, server.slots.clone().acquire_owned()).await {
        Ok(Ok(p)) => p,
        _ => return error(503, "the server is busy; try again"),
    };
    let d = server.dispatcher.clone();
    let (m, p) = (method.clone(), path.clone());
    // The engine is synchronous (git, the control loop, a deep verify): it runs on the
    // blocking pool, never on the runtime's workers, so a long request holds only its slot.
    let job = tokio::task::spawn_blocking(move || {
        let _slot = slot;
        match query {
            Some(fields) => d.call(&m, &p, fields),
            None => d.handle_keyed(&m, &p, &bytes, key.as_deref()),
        }
    });
    let reply = match tokio::time::timeout(limit, job).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(_)) => Reply::error(500, "internal error: the request handler failed"),
        Err(_) => Reply::error(
            504,
            format!(
                "{method} {path} did not finish within {} s; what it writes is still witnessed",
                limit.as_secs_f64()
            ),
        ),
    };
    if reply.status >= 500 {
        eprintln!(
            "git forum serve: {method} {path}: {} {}",
            reply.status,
            reply.message()
        );
    }
    if reply.status == 200 && super::dispatch::is_raw_file(&method, &path) {
        return raw_response(&reply);
    }
    reply_response(&reply)
}

/// A tlog-tiles file as its own bytes and content type (the answer carries them base64).
fn raw_response(reply: &Reply) -> Response {
    use base64::Engine as _;
    let field = |k: &str| reply.body.get(k).and_then(serde_json::Value::as_str);
    let bytes =
        field("base64").and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
    match (
        bytes,
        field("content_type").and_then(|t| HeaderValue::from_str(t).ok()),
    ) {
        (Some(bytes), Some(ty)) => {
            let mut r = reply_response(reply);
            *r.body_mut() = Body::from(bytes);
            r.headers_mut().insert(header::CONTENT_TYPE, ty);
            r
        }
        _ => error(500, "internal error: a layout file came without its bytes"),
    }
}

/// The router: every path goes to one handler that applies the guards and the dispatcher.
pub(crate) fn router(server: Arc<Server>) -> Router {
    Router::new().fallback(handle).with_state(server)
}

/// Serves on `listener` until `shutdown` completes, then drains: the server stops accepting,
/// running submits stop at their next budget check (witnessed, resumable), and in-flight
/// requests get up to the drain time to finish. Returns whether everything finished in time.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    server: Arc<Server>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<bool> {
    // The daemon's heartbeat, when its runtime config sets one, for as long as it serves.
    let _beat = super::heartbeat::start(server.dispatcher.clone());
    let draining = server.dispatcher.draining();
    let drain = server.limits.drain;
    let slots = server.slots.clone();
    let concurrency = server.limits.concurrency.max(1) as u32;
    let (max_connections, idle_timeout) =
        (server.limits.max_connections, server.limits.read_timeout);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let app = router(server.clone());
    let fast: conns::Fast = Arc::new(move |req| fast::answer(&server, req));
    let task = tokio::spawn(async move {
        accept_loop(listener, app, fast, max_connections, idle_timeout, stopped).await;
        Ok::<(), std::io::Error>(())
    });
    shutdown.await;
    draining.store(true, Ordering::SeqCst);
    let _ = stop.send(true);
    let start = tokio::time::Instant::now();
    let served = match tokio::time::timeout(drain, task).await {
        Ok(Ok(r)) => {
            r?;
            true
        }
        Ok(Err(_)) => false,
        Err(_) => false,
    };
    let left = drain.saturating_sub(start.elapsed());
    let idle = tokio::time::timeout(left, slots.acquire_many(concurrency))
        .await
        .is_ok_and(|r| r.is_ok());
    Ok(served && idle)
}

/// Completes on SIGTERM or SIGINT.
pub(crate) async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    match (term, int) {
        (Ok(mut t), Ok(mut i)) => {
            tokio::select! {
                _ = t.recv() => {}
                _ = i.recv() => {}
            }
        }
        (Ok(mut t), Err(_)) => {
            t.recv().await;
        }
        (Err(_), Ok(mut i)) => {
            i.recv().await;
        }
        (Err(_), Err(_)) => std::future::pending::<()>().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn only_the_bound_and_loopback_hosts_pass() {
        let g = Guard::new("127.0.0.1", addr("127.0.0.1:8080"), &[], "t".into(), false);
        for ok in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST:8080",
            "[::1]:8080",
        ] {
            assert!(g.host_allowed(ok), "{ok}");
        }
        for no in [
            "evil.example:8080",
            "127.0.0.1:8081",
            "127.0.0.1",
            "localhost",
            "",
            "127.0.0.2:8080",
            "attacker.localhost:8080",
        ] {
            assert!(!g.host_allowed(no), "{no}");
        }
        assert!(g.origin_allowed("http://localhost:8080"));
        assert!(!g.origin_allowed("http://evil.example:8080"));
        assert!(!g.origin_allowed("https://localhost:8080"));
        assert!(!g.origin_allowed("null"));
        // Port 80 also answers without the port.
        let g80 = Guard::new("localhost", addr("127.0.0.1:80"), &[], "t".into(), false);
        assert!(g80.host_allowed("localhost"));
        // An unspecified bind takes any IP literal on its port, never a name.
        let any = Guard::new(
            "0.0.0.0",
            addr("0.0.0.0:9000"),
            &["forum.lan".into()],
            "t".into(),
            false,
        );
        assert!(any.host_allowed("192.168.1.7:9000"));
        assert!(any.host_allowed("[fe80::1]:9000"));
        assert!(any.host_allowed("forum.lan:9000"));
        assert!(!any.host_allowed("rebind.example:9000"));
        assert!(!any.host_allowed("192.168.1.7:9001"));
    }

    #[test]
    fn the_token_is_asked_by_access() {
        let loopback = Guard::new("127.0.0.1", addr("127.0.0.1:1"), &[], "abc".into(), false);
        // On loopback: the record's reads and /health are open, the host's reads and every
        // write ask the token.
        for (access, open) in [
            (Access::Open, true),
            (Access::Record, true),
            (Access::Host, false),
            (Access::Write, false),
            (Access::Signed, true),
        ] {
            assert_eq!(loopback.authorized(access, None), open, "{access:?}");
            assert!(
                loopback.authorized(access, Some("Bearer abc")),
                "{access:?}"
            );
            assert!(
                loopback.authorized(access, Some("bearer  abc ")),
                "{access:?}"
            );
            for bad in ["Bearer abd", "Bearer ab", "abc", "Basic abc", "Bearer", ""] {
                assert_eq!(loopback.authorized(access, Some(bad)), open, "{bad:?}");
            }
        }
        // --require-token and other addresses close the reads too; never /health.
        let required = Guard::new("127.0.0.1", addr("127.0.0.1:1"), &[], "abc".into(), true);
        let lan = Guard::new("0.0.0.0", addr("0.0.0.0:1"), &[], "abc".into(), false);
        for g in [&required, &lan] {
            assert!(g.authorized(Access::Open, None));
            for access in [Access::Record, Access::Host, Access::Write] {
                assert!(!g.authorized(access, None), "{access:?}");
                assert!(g.authorized(access, Some("Bearer abc")), "{access:?}");
            }
        }
    }

    #[test]
    fn only_json_bodies_are_json() {
        for ok in [
            "application/json",
            "Application/JSON",
            "application/json; charset=utf-8",
            " application/json ;x=y",
        ] {
            assert!(is_json(ok), "{ok}");
        }
        for no in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/jsonp",
            "application/json-seq",
            "",
        ] {
            assert!(!is_json(no), "{no}");
        }
    }
}
