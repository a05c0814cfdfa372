//! The metering forwarder: an HTTP server on a Unix socket, outside the sandbox, in front of the
//! real model endpoint. The worker's base URL leads here (through the bridge), so every model
//! request of the worker passes through it, whatever the agent and its event stream.
//!
//! Each request is sent on to [`MeterConfig::upstream`] with its method, path, query, headers
//! (hop-by-hop ones dropped, `Accept-Encoding: identity` so the usage can be read) and body; the
//! answer comes back with its status and headers, and its body is passed on chunk by chunk as it
//! arrives (an SSE stream flows event by event). On the way, [`UsageReader`] reads the
//! tokens the answer reports, and each count is added to the totals as soon as it is read,
//! before the chunk that carries it is passed on: by the time the worker has seen the end of
//! an answer, its usage is in the totals, so the worker's next request already meets them.
//!
//! The ceilings: once the tokens used reach [`Ceilings::max_tokens`], or the cost reaches
//! [`Ceilings::max_cost_usd`], the next request is refused with `402` and an error body in its
//! own protocol's shape (402, not 429, because clients retry a 429), and the caller is told once
//! through [`MeterConfig::on_ceiling`], as soon as the answer that reached the ceiling has
//! ended. A request is let through while the totals are under the ceilings, so the totals can
//! pass a ceiling by at most the one model turn in flight (more only when the agent has several
//! requests in flight at once); that overshoot is reported.
//!
//! The upstream is reached with reqwest (rustls for `https`), no proxy, no redirects, and the
//! endpoint policy applied to the URL when the meter starts and to every address a name
//! resolves to at connect time.

use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode};
use serde::Serialize;

use super::usage::{Protocol, Usage, UsageReader};
use crate::exec::endpoint::{self, Policy};
use crate::exec::http::{SystemLookup, VettingResolver};

/// The largest request body the meter takes from a worker.
pub const MAX_REQUEST_BYTES: usize = 32 * 1024 * 1024;

/// How long opening a connection to the upstream may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Prices per million tokens, in US dollars.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Prices {
    /// Dollars per million input tokens.
    pub input_usd_per_mtok: f64,
    /// Dollars per million output tokens.
    pub output_usd_per_mtok: f64,
}

impl Prices {
    /// The cost of `input` and `output` tokens.
    pub fn cost(&self, input: u64, output: u64) -> f64 {
        (input as f64 * self.input_usd_per_mtok + output as f64 * self.output_usd_per_mtok) / 1e6
    }
}

/// The ceilings the worker's spend is held to; `None` is no ceiling.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Ceilings {
    /// Input and output tokens together (`--max-tokens`).
    pub max_tokens: Option<u64>,
    /// Dollars (`--max-cost-usd`); needs [`MeterConfig::prices`].
    pub max_cost_usd: Option<f64>,
}

/// Called once when a ceiling is reached: the caller stops the worker's process tree.
pub type OnCeiling = Arc<dyn Fn(&CeilingHit) + Send + Sync>;

/// What the meter forwards to and how it counts.
#[derive(Clone)]
pub struct MeterConfig {
    /// The real endpoint's base URL. A request for `/PATH?Q` goes to this URL's path followed by
    /// `/PATH?Q`; so with the real base `https://api.openai.com/v1`, give the origin
    /// `https://api.openai.com` here and the worker `http://127.0.0.1:PORT/v1`.
    pub upstream: url::Url,
    /// The endpoint policy the upstream's addresses are checked against (the seat's).
    pub policy: Policy,
    /// The ceilings.
    pub ceilings: Ceilings,
    /// Prices, for the cost (and the dollar ceiling); `None` counts tokens only.
    pub prices: Option<Prices>,
    /// Headers set on every upstream request, replacing the worker's (a key the worker is never
    /// given, for one). Their values are marked sensitive.
    pub headers: Vec<(String, String)>,
    /// Told once when a ceiling is reached.
    pub on_ceiling: Option<OnCeiling>,
}

impl MeterConfig {
    /// Forwards to `upstream` under `policy`, with no ceilings and no prices.
    pub fn new(upstream: url::Url, policy: Policy) -> MeterConfig {
        MeterConfig {
            upstream,
            policy,
            ceilings: Ceilings::default(),
            prices: None,
            headers: Vec::new(),
            on_ceiling: None,
        }
    }
}

impl std::fmt::Debug for MeterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeterConfig")
            .field("upstream", &endpoint::display_url(&self.upstream))
            .field("ceilings", &self.ceilings)
            .field("prices", &self.prices)
            .finish_non_exhaustive()
    }
}

/// Which ceiling was reached, and the totals then.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CeilingHit {
    /// `tokens` or `cost_usd`.
    pub ceiling: &'static str,
    /// Tokens used when it was reached.
    pub used_tokens: u64,
    /// The token ceiling.
    pub max_tokens: Option<u64>,
    /// Dollars spent when it was reached (with prices).
    pub cost_usd: Option<f64>,
    /// The dollar ceiling.
    pub max_cost_usd: Option<f64>,
}

/// One request the meter saw.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestUsage {
    /// The method.
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The protocol the path belongs to.
    pub protocol: Protocol,
    /// The status the worker got.
    pub status: u16,
    /// Whether the meter refused it (a ceiling) instead of forwarding it.
    pub refused: bool,
    /// Whether the answer reported usage.
    pub usage_seen: bool,
    /// Input tokens the answer reported.
    pub input_tokens: u64,
    /// Output tokens the answer reported.
    pub output_tokens: u64,
    /// Their cost, with prices.
    pub cost_usd: Option<f64>,
}

/// Everything the meter counted, for the record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeterReport {
    /// Each request, in the order its answer ended (or it was refused).
    pub requests: Vec<RequestUsage>,
    /// Input tokens in all.
    pub input_tokens: u64,
    /// Output tokens in all.
    pub output_tokens: u64,
    /// The cost in all, with prices.
    pub cost_usd: Option<f64>,
    /// Requests refused because a ceiling was reached.
    pub refused: u64,
    /// Tokens used past the token ceiling (0 when not passed).
    pub overshoot_tokens: u64,
    /// Dollars spent past the dollar ceiling (with prices and a dollar ceiling).
    pub overshoot_cost_usd: Option<f64>,
    /// The ceiling reached, if one was.
    pub ceiling: Option<CeilingHit>,
    /// The ceilings the meter held to.
    pub ceilings: Ceilings,
}

impl MeterReport {
    /// Input and output tokens together.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

struct Inner {
    upstream: url::Url,
    headers: Vec<(HeaderName, HeaderValue)>,
    client: reqwest::Client,
    prices: Option<Prices>,
    on_ceiling: Option<OnCeiling>,
    report: Mutex<MeterReport>,
}

/// A running metering forwarder; [`Meter::stop`] (or dropping it) ends it and removes its socket.
pub struct Meter {
    path: PathBuf,
    inner: Arc<Inner>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for Meter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meter").field("path", &self.path).finish()
    }
}

impl Meter {
    /// Checks the configuration, listens on the Unix socket `path` (which must not exist; its
    /// directory should be private to the task) and serves on a small runtime of its own.
    pub fn start(path: &Path, config: MeterConfig) -> io::Result<Meter> {
        let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
        if config.ceilings.max_cost_usd.is_some() && config.prices.is_none() {
            return Err(invalid(
                "a dollar ceiling needs prices per million input and output tokens".into(),
            ));
        }
        endpoint::check_url(config.upstream.as_str(), &config.policy)
            .map_err(|e| invalid(e.to_string()))?;
        let inner = Arc::new(Inner {
            headers: sensitive_headers(&config.headers).map_err(|e| invalid(e.to_string()))?,
            client: client(config.policy).map_err(|e| invalid(e.to_string()))?,
            upstream: config.upstream,
            prices: config.prices,
            on_ceiling: config.on_ceiling,
            report: Mutex::new(MeterReport {
                requests: Vec::new(),
                input_tokens: 0,
                output_tokens: 0,
                cost_usd: config.prices.map(|_| 0.0),
                refused: 0,
                overshoot_tokens: 0,
                overshoot_cost_usd: None,
                ceiling: None,
                ceilings: config.ceilings,
            }),
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("egress-meter")
            .enable_io()
            .enable_time()
            .build()?;
        let listener = {
            let _entered = runtime.enter();
            tokio::net::UnixListener::bind(path)?
        };
        let i = inner.clone();
        let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
            let i = i.clone();
            async move { forward(i, req).await }
        });
        runtime.spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Meter {
            path: path.to_path_buf(),
            inner,
            runtime: Some(runtime),
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What was counted so far.
    pub fn report(&self) -> MeterReport {
        self.inner.report.lock().expect("meter report").clone()
    }

    /// Stops serving (open answers are cut), removes the socket, and returns the final report.
    pub fn stop(mut self) -> MeterReport {
        self.shutdown();
        self.report()
    }

    fn shutdown(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn sensitive_headers(
    pairs: &[(String, String)],
) -> Result<Vec<(HeaderName, HeaderValue)>, MeterSetupError> {
    pairs
        .iter()
        .map(|(k, v)| {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| MeterSetupError::HeaderName(k.clone()))?;
            let mut value =
                HeaderValue::from_str(v).map_err(|_| MeterSetupError::HeaderValue(k.clone()))?;
            value.set_sensitive(true);
            Ok((name, value))
        })
        .collect()
}

/// Why the forwarder could not be set up from its configuration.
#[derive(Debug, thiserror::Error)]
enum MeterSetupError {
    /// A header to add has a name HTTP does not allow.
    #[error("{0:?} is not a header name")]
    HeaderName(String),
    /// A header to add has a value HTTP does not allow (the value is never shown).
    #[error("the value of header {0} is not a header value")]
    HeaderValue(String),
    /// The HTTP client could not be built.
    #[error("cannot build the meter's HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

fn client(policy: Policy) -> Result<reqwest::Client, MeterSetupError> {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race with another installer is fine: some provider is then in place.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .retry(reqwest::retry::never())
        .referer(false)
        .connect_timeout(CONNECT_TIMEOUT)
        .dns_resolver(Arc::new(VettingResolver::new(
            policy,
            Arc::new(SystemLookup),
        )))
        .build()
        .map_err(MeterSetupError::Client)
}

/// Headers that belong to one connection, never forwarded either way.
fn hop_by_hop(name: &HeaderName) -> bool {
    const HOP: [&str; 10] = [
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
    ];
    HOP.contains(&name.as_str())
}

async fn forward(inner: Arc<Inner>, req: axum::extract::Request) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let target = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let path = target.split('?').next().unwrap_or("/").to_string();
    let protocol = Protocol::of_path(&path);
    let seen = Seen {
        method: parts.method.to_string(),
        path,
        protocol,
    };
    if let Some(hit) = inner.reached() {
        return inner.refuse(seen, &hit);
    }
    let bytes = match axum::body::to_bytes(body, MAX_REQUEST_BYTES).await {
        Ok(b) => b,
        Err(e) => {
            let m = format!("git forum meter: cannot read the request body: {e}");
            return reply(StatusCode::PAYLOAD_TOO_LARGE, protocol, &m);
        }
    };
    let mut rb = inner
        .client
        .request(parts.method.clone(), inner.url_for(&target))
        .body(bytes);
    for (k, v) in parts.headers.iter() {
        let replaced = inner.headers.iter().any(|(h, _)| h == k);
        if !hop_by_hop(k) && k != "host" && k != "accept-encoding" && !replaced {
            rb = rb.header(k, v);
        }
    }
    rb = rb.header("accept-encoding", "identity");
    for (k, v) in &inner.headers {
        rb = rb.header(k, v);
    }
    match rb.send().await {
        Ok(resp) => pass_back(inner, seen, resp),
        Err(e) => {
            let m = format!(
                "git forum meter: cannot reach the model endpoint {}: {}",
                endpoint::display_url(&inner.upstream),
                error_chain(&e.without_url())
            );
            reply(StatusCode::BAD_GATEWAY, protocol, &m)
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}

/// What a request was, for its [`RequestUsage`].
struct Seen {
    method: String,
    path: String,
    protocol: Protocol,
}

/// The answer's status and headers now, and its body as it arrives, read for usage on the way.
fn pass_back(inner: Arc<Inner>, seen: Seen, mut resp: reqwest::Response) -> Response<Body> {
    let status = resp.status().as_u16();
    let mut headers = HeaderMap::new();
    for (k, v) in resp.headers() {
        if !hop_by_hop(k) {
            headers.append(k.clone(), v.clone());
        }
    }
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, io::Error>>(32);
    tokio::spawn(async move {
        let mut reader = UsageReader::new(content_type.as_deref());
        let mut counted = Usage::default();
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    reader.feed(&chunk);
                    // Counted before the chunk goes on (see the module doc).
                    let now = reader.so_far();
                    if now != counted {
                        inner.count(&counted, &now);
                        counted = now;
                    }
                    if tx.send(Ok(chunk)).await.is_err() {
                        break; // the worker went away; what was read still counts
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    let _ = tx.send(Err(io::Error::other(e.without_url()))).await;
                    break;
                }
            }
        }
        inner.settle(seen, status, reader.finish(), &counted);
    });
    let mut out = Response::new(Body::new(Streamed(rx)));
    *out.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    *out.headers_mut() = headers;
    out
}

/// A body whose chunks arrive on a channel, each sent on as soon as it comes.
struct Streamed(tokio::sync::mpsc::Receiver<Result<Bytes, io::Error>>);

impl http_body::Body for Streamed {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, io::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|o| o.map(|r| r.map(http_body::Frame::data)))
    }
}

/// A JSON error body in `protocol`'s shape with `status`.
fn reply(status: StatusCode, protocol: Protocol, message: &str) -> Response<Body> {
    let body = serde_json::to_vec(&protocol.error_body(message)).unwrap_or_default();
    let mut out = Response::new(Body::from(body));
    *out.status_mut() = status;
    out.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    out
}

impl Inner {
    fn url_for(&self, target: &str) -> String {
        let base = self.upstream.as_str().trim_end_matches('/');
        format!("{base}{target}")
    }

    /// The ceiling the totals have reached, if any.
    fn reached(&self) -> Option<CeilingHit> {
        let r = self.report.lock().expect("meter report");
        reached(&r)
    }

    /// Refuses a request because `hit` was reached, counts it, and tells the caller if not yet.
    fn refuse(&self, seen: Seen, hit: &CeilingHit) -> Response<Body> {
        let message = match hit.ceiling {
            "tokens" => format!(
                "git forum: the token ceiling is reached ({} of {} tokens used); this request was not sent and the worker is being stopped",
                hit.used_tokens,
                hit.max_tokens.unwrap_or(0)
            ),
            _ => format!(
                "git forum: the cost ceiling is reached (${:.4} of ${:.4} spent); this request was not sent and the worker is being stopped",
                hit.cost_usd.unwrap_or(0.0),
                hit.max_cost_usd.unwrap_or(0.0)
            ),
        };
        {
            let mut r = self.report.lock().expect("meter report");
            r.refused += 1;
            r.requests.push(RequestUsage {
                method: seen.method,
                path: seen.path,
                protocol: seen.protocol,
                status: 402,
                refused: true,
                usage_seen: false,
                input_tokens: 0,
                output_tokens: 0,
                cost_usd: None,
            });
        }
        self.notify(hit);
        reply(StatusCode::PAYMENT_REQUIRED, seen.protocol, &message)
    }

    /// Adds what an answer's usage grew by, from `before` to `now`, to the totals while the
    /// answer is still passing (the caller is told of a ceiling when the answer ends).
    fn count(&self, before: &Usage, now: &Usage) {
        let mut r = self.report.lock().expect("meter report");
        self.add(
            &mut r,
            now.input_tokens.saturating_sub(before.input_tokens),
            now.output_tokens.saturating_sub(before.output_tokens),
        );
    }

    /// Adds `input` and `output` tokens (and their cost) to the totals, with the overshoot.
    fn add(&self, r: &mut MeterReport, input: u64, output: u64) {
        r.input_tokens = r.input_tokens.saturating_add(input);
        r.output_tokens = r.output_tokens.saturating_add(output);
        if let (Some(c), Some(p)) = (r.cost_usd, self.prices) {
            r.cost_usd = Some(c + p.cost(input, output));
        }
        let c = r.ceilings;
        if let Some(max) = c.max_tokens {
            r.overshoot_tokens = r.total_tokens().saturating_sub(max);
        }
        if let (Some(max), Some(spent)) = (c.max_cost_usd, r.cost_usd) {
            r.overshoot_cost_usd = Some((spent - max).max(0.0));
        }
    }

    /// Ends one answer: what its usage holds beyond what was `counted` while it passed goes
    /// into the totals, the request is recorded, and the caller is told when a ceiling is now
    /// reached.
    fn settle(&self, seen: Seen, status: u16, usage: Usage, counted: &Usage) {
        let cost = self
            .prices
            .map(|p| p.cost(usage.input_tokens, usage.output_tokens));
        let hit = {
            let mut r = self.report.lock().expect("meter report");
            self.add(
                &mut r,
                usage.input_tokens.saturating_sub(counted.input_tokens),
                usage.output_tokens.saturating_sub(counted.output_tokens),
            );
            r.requests.push(RequestUsage {
                method: seen.method,
                path: seen.path,
                protocol: seen.protocol,
                status,
                refused: false,
                usage_seen: usage.seen,
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                cost_usd: cost,
            });
            reached(&r)
        };
        if let Some(hit) = hit {
            self.notify(&hit);
        }
    }

    /// Records `hit` and calls the caller's hook, the first time only.
    fn notify(&self, hit: &CeilingHit) {
        let first = {
            let mut r = self.report.lock().expect("meter report");
            let first = r.ceiling.is_none();
            if first {
                r.ceiling = Some(hit.clone());
            }
            first
        };
        if first && let Some(f) = &self.on_ceiling {
            f(hit);
        }
    }
}

/// The ceiling `r`'s totals have reached, if any (tokens first).
fn reached(r: &MeterReport) -> Option<CeilingHit> {
    let used = r.total_tokens();
    let c = r.ceilings;
    let hit = |ceiling| CeilingHit {
        ceiling,
        used_tokens: used,
        max_tokens: c.max_tokens,
        cost_usd: r.cost_usd,
        max_cost_usd: c.max_cost_usd,
    };
    if c.max_tokens.is_some_and(|m| used >= m) {
        return Some(hit("tokens"));
    }
    match (c.max_cost_usd, r.cost_usd) {
        (Some(m), Some(spent)) if spent >= m => Some(hit("cost_usd")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::endpoint::Origin;

    /// A meter's counting half (no socket, nothing forwarded) under `ceilings` and `prices`,
    /// telling `hits` of each ceiling it reports.
    fn counting(
        ceilings: Ceilings,
        prices: Option<Prices>,
        hits: Arc<Mutex<Vec<CeilingHit>>>,
    ) -> Inner {
        let policy = Policy::strict(Origin::CommandLine);
        Inner {
            upstream: url::Url::parse("http://127.0.0.1:9").unwrap(),
            headers: Vec::new(),
            client: client(policy).unwrap(),
            prices,
            on_ceiling: Some(Arc::new(move |h: &CeilingHit| {
                hits.lock().unwrap().push(h.clone())
            })),
            report: Mutex::new(MeterReport {
                requests: Vec::new(),
                input_tokens: 0,
                output_tokens: 0,
                cost_usd: prices.map(|_| 0.0),
                refused: 0,
                overshoot_tokens: 0,
                overshoot_cost_usd: None,
                ceiling: None,
                ceilings,
            }),
        }
    }

    fn seen() -> Seen {
        Seen {
            method: "POST".into(),
            path: "/v1/messages".into(),
            protocol: Protocol::Anthropic,
        }
    }

    fn answer(input: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            seen: true,
        }
    }

    #[test]
    fn a_dollar_ceiling_prices_each_answer_and_refuses_the_request_after_it() {
        let hits = Arc::new(Mutex::new(Vec::new()));
        let prices = Prices {
            input_usd_per_mtok: 3.0,
            output_usd_per_mtok: 15.0,
        };
        let m = counting(
            Ceilings {
                max_tokens: None,
                max_cost_usd: Some(0.01),
            },
            Some(prices),
            hits.clone(),
        );
        // $0.0063 an answer: the first leaves it under the ceiling, the second passes it.
        m.settle(seen(), 200, answer(600, 300), &Usage::default());
        assert_eq!(m.reached(), None);
        assert!(hits.lock().unwrap().is_empty());
        m.settle(seen(), 200, answer(600, 300), &Usage::default());
        let hit = m.reached().expect("the dollar ceiling is reached");
        assert_eq!((hit.ceiling, hit.used_tokens), ("cost_usd", 1800));
        assert!((hit.cost_usd.unwrap() - 0.0126).abs() < 1e-12, "{hit:?}");
        assert_eq!(hits.lock().unwrap().len(), 1, "told once, when reached");
        let refused = m.refuse(seen(), &hit);
        assert_eq!(refused.status(), StatusCode::PAYMENT_REQUIRED);
        assert_eq!(hits.lock().unwrap().len(), 1, "not told again");
        let r = m.report.lock().unwrap().clone();
        assert_eq!((r.refused, r.requests.len(), r.overshoot_tokens), (1, 3, 0));
        assert!(
            (r.overshoot_cost_usd.unwrap() - 0.0026).abs() < 1e-12,
            "{r:?}"
        );
        assert_eq!(r.requests[0].cost_usd, Some(0.0063));
        assert!(r.requests[2].refused && r.requests[2].cost_usd.is_none());
        assert_eq!(r.ceiling.unwrap().ceiling, "cost_usd");
    }

    #[test]
    fn an_answer_counts_while_it_passes_so_a_request_before_its_end_is_refused() {
        let hits = Arc::new(Mutex::new(Vec::new()));
        let m = counting(
            Ceilings {
                max_tokens: Some(2000),
                max_cost_usd: None,
            },
            None,
            hits.clone(),
        );
        // Anthropic's message_start: the input tokens, before any output.
        let start = answer(2000, 1);
        m.count(&Usage::default(), &start);
        assert_eq!(m.reached().unwrap().used_tokens, 2001);
        assert!(hits.lock().unwrap().is_empty(), "told when the answer ends");
        // message_delta: the output; then the end.
        let end = answer(2000, 500);
        m.count(&start, &end);
        m.settle(seen(), 200, end, &end);
        let r = m.report.lock().unwrap().clone();
        assert_eq!(
            (r.input_tokens, r.output_tokens, r.overshoot_tokens),
            (2000, 500, 500)
        );
        assert_eq!(
            (r.requests[0].input_tokens, r.requests[0].output_tokens),
            (2000, 500)
        );
        assert_eq!(hits.lock().unwrap().len(), 1);
    }

    #[test]
    fn tokens_are_checked_before_dollars_and_a_dollar_ceiling_needs_prices() {
        let hits = Arc::new(Mutex::new(Vec::new()));
        let m = counting(
            Ceilings {
                max_tokens: Some(1000),
                max_cost_usd: Some(0.001),
            },
            Some(Prices {
                input_usd_per_mtok: 3.0,
                output_usd_per_mtok: 15.0,
            }),
            hits.clone(),
        );
        m.settle(seen(), 200, answer(900, 200), &Usage::default());
        assert_eq!(m.reached().unwrap().ceiling, "tokens");
        assert_eq!(m.report.lock().unwrap().overshoot_tokens, 100);
        let policy = Policy::strict(Origin::CommandLine);
        let mut config = MeterConfig::new(url::Url::parse("http://127.0.0.1:9").unwrap(), policy);
        config.ceilings.max_cost_usd = Some(1.0);
        let dir = tempfile::tempdir().unwrap();
        let e = Meter::start(&dir.path().join("m.sock"), config).unwrap_err();
        assert!(e.to_string().contains("needs prices"), "{e}");
    }
}
