//! The SSRF-safe blocking HTTP client both HTTP executors ([`super::chat`],
//! [`super::anthropic`]) use.
//!
//! What it enforces, in order:
//!
//! 1. [`endpoint::check_url`] on the URL when the [`HttpClient`] is made: the scheme, no
//!    credentials, and the host's class against the [`Policy`]. IP literals never reach a
//!    resolver, so this is where every spelling of them is checked.
//! 2. At connection time, a [`VettingResolver`] looks the name up (through an injectable
//!    [`Lookup`]) and drops every address [`endpoint::check_addr`] refuses; when none is left
//!    the connection fails as [`ExecError::Refused`]. The connection uses exactly the vetted
//!    addresses, and since no connection is kept between calls each call resolves afresh: a
//!    name that rebinds to a private address is refused on the call that sees it.
//! 3. No proxy (the system-proxy feature is not even compiled in, and `.no_proxy()` is set),
//!    no redirects (a 3xx answer is [`ExecError::Redirect`], never followed), no retries, no
//!    idle connection reuse.
//! 4. One deadline for the whole call (connect, request, headers and every body read), so a
//!    server that drips a byte a second still ends the call on time
//!    ([`ExecError::Timeout`]). reqwest's per-request timeout covers the body in its async
//!    core; the body loop checks the deadline too.
//! 5. The body is read in chunks and the call fails as [`ExecError::TooLarge`] as soon as it
//!    passes `max_response_bytes` (or at once when `Content-Length` says it will).
//!
//! Keys ([`Key`]) are read from the environment at call time, sent in headers marked
//! sensitive, never shown by `Debug`, and replaced by `[redacted]` in any excerpt of an answer
//! that echoes them.
//!
//! TLS: rustls with the `ring` provider, installed as the process default the first time a
//! client is built (unless the process already installed one).

use std::fmt;
use std::io::{self, Read};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Once, OnceLock};
use std::time::{Duration, Instant};

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue, LOCATION};

use super::ExecError;
use super::config::ExecutorSpec;
use crate::observe::Stall;

/// How often a call waiting for a model's answer looks at whether its run is being interrupted.
const INTERRUPT_POLL: Duration = Duration::from_millis(50);
use super::endpoint::{self, CheckedUrl, Policy};

/// The longest a connection may take to open (capped by the call's deadline).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// How many characters of an error body [`ExecError::Status`] shows.
pub(crate) const EXCERPT_CHARS: usize = 200;

/// How much of a non-2xx body is read for its excerpt.
const ERROR_BODY_CAP: u64 = 16 * 1024;

/// Bytes asked for per body read.
const CHUNK: usize = 64 * 1024;

/// The `User-Agent` of every request.
const USER_AGENT: &str = concat!("git-forum/", env!("CARGO_PKG_VERSION"));

/// Looks a host name up. The default is [`SystemLookup`]; tests inject their own to play a
/// rebinding name. Closures `Fn(&str) -> io::Result<Vec<IpAddr>>` implement it.
pub trait Lookup: Send + Sync {
    /// Every address `host` resolves to (ports are set later).
    fn lookup(&self, host: &str) -> io::Result<Vec<IpAddr>>;
}

impl<F> Lookup for F
where
    F: Fn(&str) -> io::Result<Vec<IpAddr>> + Send + Sync,
{
    fn lookup(&self, host: &str) -> io::Result<Vec<IpAddr>> {
        self(host)
    }
}

/// The system resolver (`getaddrinfo`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(&self, host: &str) -> io::Result<Vec<IpAddr>> {
        Ok((host, 0u16).to_socket_addrs()?.map(|a| a.ip()).collect())
    }
}

/// Why a name yielded no address to connect to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VetError {
    /// The lookup itself failed or found nothing.
    #[error("cannot resolve {host}: {reason}")]
    Lookup { host: String, reason: String },
    /// Every address was refused by the policy; each with its reason.
    #[error(
        "{host} resolves only to addresses the endpoint policy refuses: {}",
        list(refused)
    )]
    Refused {
        host: String,
        refused: Vec<(IpAddr, String)>,
    },
}

fn list(refused: &[(IpAddr, String)]) -> String {
    refused
        .iter()
        .map(|(a, why)| format!("{a} ({why})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The connection-time check: a `reqwest` resolver that resolves through a [`Lookup`] and
/// keeps only the addresses [`endpoint::check_addr`] admits under its [`Policy`].
#[derive(Clone)]
pub struct VettingResolver {
    policy: Policy,
    lookup: Arc<dyn Lookup>,
}

impl fmt::Debug for VettingResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VettingResolver")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl VettingResolver {
    /// A resolver that vets what `lookup` returns against `policy`.
    pub fn new(policy: Policy, lookup: Arc<dyn Lookup>) -> VettingResolver {
        VettingResolver { policy, lookup }
    }

    /// Resolves `host` and returns the addresses the policy admits, in the lookup's order;
    /// [`VetError::Refused`] when it refuses them all.
    pub fn vet(&self, host: &str) -> Result<Vec<IpAddr>, VetError> {
        let found = self.lookup.lookup(host).map_err(|e| VetError::Lookup {
            host: host.to_string(),
            reason: e.to_string(),
        })?;
        if found.is_empty() {
            return Err(VetError::Lookup {
                host: host.to_string(),
                reason: "no addresses".into(),
            });
        }
        let mut kept = Vec::new();
        let mut refused = Vec::new();
        for a in found {
            // A mapped address is dialled as the IPv4 address it maps, which is what was checked.
            let a = endpoint::canonical(a);
            match endpoint::check_addr(a, &self.policy) {
                Ok(()) if !kept.contains(&a) => kept.push(a),
                Ok(()) => {}
                Err(r) => {
                    let why = match r {
                        endpoint::UrlRefusal::Denied { class, why, .. } => {
                            format!("{class}: {why}")
                        }
                        other => other.to_string(),
                    };
                    refused.push((a, why));
                }
            }
        }
        if kept.is_empty() {
            Err(VetError::Refused {
                host: host.to_string(),
                refused,
            })
        } else {
            Ok(kept)
        }
    }
}

impl reqwest::dns::Resolve for VettingResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let this = self.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let vetted = tokio::task::spawn_blocking(move || this.vet(&host))
                .await
                .map_err(|e| -> Box<dyn std::error::Error + Send + Sync> {
                    Box::new(io::Error::other(format!("the lookup task failed: {e}")))
                })??;
            let addrs: reqwest::dns::Addrs =
                Box::new(vetted.into_iter().map(|a| SocketAddr::new(a, 0)));
            Ok(addrs)
        })
    }
}

/// An API key read from the environment. `Debug` never shows it.
#[derive(Clone)]
pub(crate) struct Key {
    var: String,
    value: String,
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key(${}: [redacted])", self.var)
    }
}

impl Key {
    /// Reads the variable `var` now: unset or empty (after trimming) is
    /// [`ExecError::MissingKey`].
    pub(crate) fn from_env(var: &str) -> Result<Key, ExecError> {
        match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => Ok(Key {
                var: var.to_string(),
                value: v.trim().to_string(),
            }),
            Ok(_) | Err(std::env::VarError::NotPresent) => Err(ExecError::MissingKey {
                var: var.to_string(),
            }),
            Err(std::env::VarError::NotUnicode(_)) => Err(ExecError::Other(format!(
                "the key variable {var} is not valid UTF-8"
            ))),
        }
    }

    fn header(&self, scheme: Option<&str>) -> Result<HeaderValue, ExecError> {
        let text = match scheme {
            Some(s) => format!("{s} {}", self.value),
            None => self.value.clone(),
        };
        let mut v = HeaderValue::from_str(&text).map_err(|_| {
            ExecError::Other(format!(
                "the value of {} cannot be sent in an HTTP header (control characters?)",
                self.var
            ))
        })?;
        v.set_sensitive(true);
        Ok(v)
    }

    fn redact(&self, text: &str) -> String {
        if self.value.len() >= 4 {
            text.replace(&self.value, "[redacted]")
        } else {
            text.to_string()
        }
    }
}

/// How a key is sent: the header name and an optional scheme (`Bearer`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Auth<'a> {
    /// The header, e.g. `authorization` or `x-api-key`.
    pub(crate) header: &'static str,
    /// A scheme put before the key, e.g. `Bearer`.
    pub(crate) scheme: Option<&'static str>,
    /// The key.
    pub(crate) key: &'a Key,
}

/// The limits of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The total deadline of a call, from sending to the last body byte.
    pub timeout: Duration,
    /// The largest body accepted.
    pub(crate) max_response_bytes: u64,
}

impl Limits {
    /// The limits a spec configures (`timeout_seconds`, `max_response_bytes`).
    pub(crate) fn from_spec(spec: &ExecutorSpec) -> Limits {
        Limits {
            timeout: Duration::from_secs(spec.timeout_seconds.max(1)),
            max_response_bytes: spec.max_response_bytes,
        }
    }
}

/// A successful (2xx) answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    /// The HTTP status.
    pub(crate) status: u16,
    /// The whole body (at most `max_response_bytes`).
    pub(crate) body: Vec<u8>,
    /// Wall time of the call.
    pub(crate) elapsed: Duration,
}

/// One checked endpoint with its SSRF-safe client. Thread-safe; the client (and its runtime
/// thread) is built on the first call, so making one performs no I/O.
pub(crate) struct HttpClient {
    checked: CheckedUrl,
    limits: Limits,
    resolver: Arc<VettingResolver>,
    client: OnceLock<reqwest::blocking::Client>,
}

impl fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClient")
            .field("url", &self.checked.display)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl HttpClient {
    /// Checks `url` against `policy` ([`ExecError::Refused`] otherwise) and prepares a client
    /// that resolves names through `lookup`.
    pub(crate) fn new(
        url: &str,
        policy: Policy,
        limits: Limits,
        lookup: Arc<dyn Lookup>,
    ) -> Result<HttpClient, ExecError> {
        let checked =
            endpoint::check_url(url, &policy).map_err(|r| ExecError::Refused(r.to_string()))?;
        Ok(HttpClient {
            checked,
            limits,
            resolver: Arc::new(VettingResolver::new(policy, lookup)),
            client: OnceLock::new(),
        })
    }

    /// The URL for messages (no query, fragment or credentials).
    pub(crate) fn display(&self) -> &str {
        &self.checked.display
    }

    /// Whether the policy lets a key go to this endpoint (false for `is_local`).
    pub(crate) fn sends_key(&self) -> bool {
        self.checked.sends_key
    }

    fn client(&self) -> Result<reqwest::blocking::Client, ExecError> {
        if let Some(c) = self.client.get() {
            return Ok(c.clone());
        }
        install_tls_provider();
        let built = reqwest::blocking::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .retry(reqwest::retry::never())
            .referer(false)
            .pool_max_idle_per_host(0)
            .connect_timeout(CONNECT_TIMEOUT.min(self.limits.timeout))
            .timeout(self.limits.timeout)
            .dns_resolver(self.resolver.clone())
            .user_agent(USER_AGENT)
            .build()
            .map_err(|e| {
                ExecError::Other(format!(
                    "cannot build the HTTP client: {}",
                    chain(&e.without_url())
                ))
            })?;
        Ok(self.client.get_or_init(|| built).clone())
    }

    /// POSTs `body` as JSON with `headers` (and the key, when `auth` is given and the policy
    /// sends keys), then reads the answer under the deadline and the size cap. Non-2xx answers
    /// are errors: [`ExecError::Redirect`] for redirects, [`ExecError::Status`] otherwise.
    pub(crate) fn post_json(
        &self,
        headers: &[(&'static str, &str)],
        auth: Option<Auth<'_>>,
        body: &serde_json::Value,
    ) -> Result<Answer, ExecError> {
        let client = self.client()?;
        let start = Instant::now();
        let deadline = start + self.limits.timeout;
        let auth = auth.filter(|_| self.sends_key());
        let mut req = client
            .post(self.checked.url.clone())
            .timeout(self.limits.timeout)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json");
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        if let Some(a) = &auth {
            req = req.header(a.header, a.key.header(a.scheme)?);
        }
        let bytes = serde_json::to_vec(body)
            .map_err(|e| ExecError::Other(format!("cannot encode the request: {e}")))?;
        let request = req
            .body(bytes)
            .build()
            .map_err(|e| self.send_error(e, start))?;
        let mut resp = self.send_interruptibly(&client, request, start)?;
        let status = resp.status().as_u16();
        let redact = |s: String| match &auth {
            Some(a) => a.key.redact(&s),
            None => s,
        };
        if matches!(status, 301 | 302 | 303 | 307 | 308) {
            let location = resp
                .headers()
                .get(LOCATION)
                .map(|v| shown_location(&self.checked.url, &String::from_utf8_lossy(v.as_bytes())))
                .unwrap_or_default();
            return Err(ExecError::Redirect {
                url: self.display().to_string(),
                status,
                location: redact(location),
            });
        }
        if !(200..300).contains(&status) {
            // Best effort: whatever arrives before the deadline, up to a small cap.
            let mut got = Vec::new();
            let _ = self.read_capped(&mut resp, ERROR_BODY_CAP, deadline, &mut got);
            return Err(ExecError::Status {
                url: self.display().to_string(),
                status,
                excerpt: redact(excerpt(&got)),
            });
        }
        let cap = self.limits.max_response_bytes;
        if resp.content_length().is_some_and(|n| n > cap) {
            return Err(self.too_large());
        }
        let mut got = Vec::new();
        if self.read_capped(&mut resp, cap, deadline, &mut got)? {
            return Err(self.too_large());
        }
        Ok(Answer {
            status,
            body: got,
            elapsed: start.elapsed(),
        })
    }

    /// Sends `request` from a helper thread and waits for the answer's head, looking every
    /// [`INTERRUPT_POLL`] at whether this thread's run is being interrupted: a model that
    /// thinks for minutes before its first byte must not hold up a Ctrl-C or a halt. A call
    /// with no answer for this thread's stall time (`command::watchdog`) is given up the same
    /// way, as stalled. An abandoned request runs on to its own deadline on that thread, and
    /// its answer is dropped.
    fn send_interruptibly(
        &self,
        client: &reqwest::blocking::Client,
        request: reqwest::blocking::Request,
        start: Instant,
    ) -> Result<reqwest::blocking::Response, ExecError> {
        use std::sync::mpsc::{RecvTimeoutError, sync_channel};
        let (tx, rx) = sync_channel(1);
        let client = client.clone();
        std::thread::Builder::new()
            .name("git-forum-http".into())
            .spawn(move || {
                let _ = tx.send(client.execute(request));
            })
            .map_err(|e| ExecError::Other(format!("cannot start the request's thread: {e}")))?;
        let stall = crate::exec::command::watchdog::stall().map(|after| Stall { after });
        loop {
            match rx.recv_timeout(INTERRUPT_POLL) {
                Ok(answer) => return answer.map_err(|e| self.send_error(e, start)),
                Err(RecvTimeoutError::Timeout) if crate::exec::command::scope_stopped() => {
                    return Err(self.interrupted());
                }
                Err(RecvTimeoutError::Timeout)
                    if let Some(quiet) =
                        stall.and_then(|s| s.stalled(Duration::ZERO, start.elapsed())) =>
                {
                    return Err(ExecError::Command(
                        crate::exec::command::CommandError::Stalled {
                            program: self.display().to_string(),
                            quiet,
                        },
                    ));
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(ExecError::Other(format!(
                        "the request to {} ended without an answer",
                        self.display()
                    )));
                }
            }
        }
    }

    fn interrupted(&self) -> ExecError {
        ExecError::Command(crate::exec::command::CommandError::Interrupted {
            program: self.display().to_string(),
        })
    }

    fn too_large(&self) -> ExecError {
        ExecError::TooLarge {
            url: self.display().to_string(),
            cap: self.limits.max_response_bytes,
        }
    }

    fn timeout(&self) -> ExecError {
        ExecError::Timeout {
            url: self.display().to_string(),
            after: self.limits.timeout,
        }
    }

    /// Reads the body into `out` until its end, the cap or the deadline; `Ok(true)` when it
    /// went past `cap` (then `out` holds `cap` bytes and the rest is never read).
    fn read_capped(
        &self,
        body: &mut impl Read,
        cap: u64,
        deadline: Instant,
        out: &mut Vec<u8>,
    ) -> Result<bool, ExecError> {
        let cap = usize::try_from(cap).unwrap_or(usize::MAX);
        let mut buf = vec![0u8; CHUNK];
        loop {
            if Instant::now() >= deadline {
                return Err(self.timeout());
            }
            if crate::exec::command::scope_stopped() {
                return Err(self.interrupted());
            }
            match body.read(&mut buf) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    if out.len() + n > cap {
                        let room = cap - out.len();
                        out.extend_from_slice(&buf[..room]);
                        return Ok(true);
                    }
                    out.extend_from_slice(&buf[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(if io_is_timeout(&e) || Instant::now() >= deadline {
                        self.timeout()
                    } else {
                        ExecError::Connect {
                            url: self.display().to_string(),
                            reason: format!("the answer broke off: {}", chain(&e)),
                        }
                    });
                }
            }
        }
    }

    fn send_error(&self, e: reqwest::Error, start: Instant) -> ExecError {
        let e = e.without_url();
        if let Some(v) = find_vet_error(&e) {
            return match v {
                VetError::Refused { .. } => {
                    ExecError::Refused(format!("{}: {v}", self.checked.display))
                }
                VetError::Lookup { .. } => ExecError::Connect {
                    url: self.display().to_string(),
                    reason: v.to_string(),
                },
            };
        }
        if e.is_timeout() {
            if e.is_connect() && start.elapsed() < self.limits.timeout {
                return ExecError::Connect {
                    url: self.display().to_string(),
                    reason: format!(
                        "no connection within {}s",
                        CONNECT_TIMEOUT.min(self.limits.timeout).as_secs_f64()
                    ),
                };
            }
            return self.timeout();
        }
        ExecError::Connect {
            url: self.display().to_string(),
            reason: chain(&e),
        }
    }
}

/// Installs rustls' `ring` provider as the process default, once, unless one is installed.
fn install_tls_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Losing a race with another installer is fine: some provider is then in place.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    });
}

fn find_vet_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a VetError> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(v) = err.downcast_ref::<VetError>() {
            return Some(v);
        }
        cur = err.source();
    }
    None
}

fn io_is_timeout(e: &io::Error) -> bool {
    if e.kind() == io::ErrorKind::TimedOut {
        return true;
    }
    let mut cur = e
        .get_ref()
        .map(|inner| inner as &(dyn std::error::Error + 'static));
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<reqwest::Error>()
            && r.is_timeout()
        {
            return true;
        }
        if let Some(io) = err.downcast_ref::<io::Error>()
            && io.kind() == io::ErrorKind::TimedOut
        {
            return true;
        }
        cur = err.source();
    }
    false
}

/// An error and its causes on one line, repeated messages dropped.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur = Some(e);
    while let Some(err) = cur {
        let s = err.to_string();
        if !s.is_empty() && !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        cur = err.source();
    }
    one_line(&parts.join(": "))
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first [`EXCERPT_CHARS`] characters of a body, on one line.
pub(crate) fn excerpt(body: &[u8]) -> String {
    let text = one_line(&String::from_utf8_lossy(body));
    let mut chars = text.chars();
    let mut out: String = chars.by_ref().take(EXCERPT_CHARS).collect();
    if chars.next().is_some() {
        out.push('…');
    }
    out
}

/// A redirect target for messages: resolved against the request URL and shown without
/// credentials, query or fragment; an unparsable one is cut short.
fn shown_location(base: &url::Url, location: &str) -> String {
    match base.join(location) {
        Ok(u) => endpoint::display_url(&u),
        Err(_) => {
            let cut = location.find(['?', '#', '@']).unwrap_or(location.len());
            one_line(&location[..cut])
                .chars()
                .take(EXCERPT_CHARS)
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::endpoint::Origin;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn fixed(addrs: &'static [&'static str]) -> Arc<dyn Lookup> {
        Arc::new(move |_: &str| Ok(addrs.iter().map(|a| a.parse().unwrap()).collect()))
    }

    #[test]
    fn vetting_keeps_only_admitted_addresses() {
        let r = VettingResolver::new(
            Policy::strict(Origin::RepoConfig),
            fixed(&[
                "10.0.0.1",
                "93.184.216.34",
                "169.254.169.254",
                "93.184.216.34",
            ]),
        );
        assert_eq!(
            r.vet("mixed.example").unwrap(),
            vec!["93.184.216.34".parse::<IpAddr>().unwrap()]
        );
        let r = VettingResolver::new(
            Policy::strict(Origin::RepoConfig),
            fixed(&["127.0.0.1", "::1", "fd00:ec2::254"]),
        );
        let e = r.vet("evil.example").unwrap_err();
        let VetError::Refused { refused, .. } = &e else {
            panic!("{e}")
        };
        assert_eq!(refused.len(), 3);
        assert!(e.to_string().contains("127.0.0.1 (loopback"), "{e}");
        assert!(e.to_string().contains("metadata"), "{e}");
    }

    #[test]
    fn vetting_rebinding_name_is_refused_the_second_time() {
        let n = Arc::new(AtomicUsize::new(0));
        let seen = n.clone();
        let lookup = move |_: &str| {
            Ok(vec![if seen.fetch_add(1, Ordering::SeqCst) == 0 {
                "93.184.216.34".parse().unwrap()
            } else {
                "10.0.0.1".parse().unwrap()
            }])
        };
        let r = VettingResolver::new(Policy::strict(Origin::UserFile), Arc::new(lookup));
        assert!(r.vet("rebind.example").is_ok());
        assert!(matches!(
            r.vet("rebind.example"),
            Err(VetError::Refused { .. })
        ));
        assert_eq!(n.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn is_local_keeps_only_addresses_that_are_loopback_themselves() {
        let local = Policy {
            is_local: true,
            ..Policy::strict(Origin::RepoConfig)
        };
        let r = VettingResolver::new(
            local,
            fixed(&[
                "64:ff9b::7f00:1",
                "64:ff9b:1::7f00:1",
                "2002:7f00:1::",
                "2001:0:7f00:1::f7f7:f7f7",
                "::127.0.0.1",
            ]),
        );
        let e = r.vet("sneaky.localhost").unwrap_err();
        let VetError::Refused { refused, .. } = &e else {
            panic!("{e}")
        };
        assert_eq!(refused.len(), 5, "{e}");
        let r = VettingResolver::new(
            local,
            fixed(&["64:ff9b::7f00:1", "::ffff:127.0.0.1", "::1"]),
        );
        assert_eq!(
            r.vet("localhost").unwrap(),
            vec![
                "127.0.0.1".parse::<IpAddr>().unwrap(),
                "::1".parse::<IpAddr>().unwrap()
            ]
        );
    }

    #[test]
    fn lookup_failures_are_not_refusals() {
        let r = VettingResolver::new(
            Policy::strict(Origin::UserFile),
            Arc::new(|_: &str| Err(io::Error::other("NXDOMAIN"))),
        );
        assert!(matches!(r.vet("x.example"), Err(VetError::Lookup { .. })));
        let r = VettingResolver::new(Policy::strict(Origin::UserFile), fixed(&[]));
        assert!(matches!(r.vet("x.example"), Err(VetError::Lookup { .. })));
    }

    #[test]
    fn keys_are_never_shown() {
        let k = Key {
            var: "SOME_KEY".into(),
            value: "sk-secret-value".into(),
        };
        let d = format!("{k:?}");
        assert!(d.contains("SOME_KEY") && !d.contains("sk-secret"), "{d}");
        let h = k.header(Some("Bearer")).unwrap();
        assert!(h.is_sensitive());
        assert!(!format!("{h:?}").contains("sk-secret"));
        assert_eq!(
            k.redact("echo: Bearer sk-secret-value!"),
            "echo: Bearer [redacted]!"
        );
        let bad = Key {
            var: "SOME_KEY".into(),
            value: "line\nbreak-secret".into(),
        };
        let e = bad.header(None).unwrap_err().to_string();
        assert!(e.contains("SOME_KEY") && !e.contains("break-secret"), "{e}");
    }

    #[test]
    fn unset_key_variable_is_missing_key() {
        let e = Key::from_env("GIT_FORUM_SURELY_UNSET_KEY_VAR_5d1c").unwrap_err();
        assert!(
            matches!(&e, ExecError::MissingKey { var } if var == "GIT_FORUM_SURELY_UNSET_KEY_VAR_5d1c")
        );
    }

    #[test]
    fn excerpts_are_one_short_line() {
        assert_eq!(excerpt(b"  bad\n\tthing  "), "bad thing");
        let long = "x".repeat(500);
        let e = excerpt(long.as_bytes());
        assert_eq!(e.chars().count(), EXCERPT_CHARS + 1);
        assert!(e.ends_with('…'));
        assert_eq!(excerpt(&[0xff, b'a']), "\u{fffd}a");
    }

    #[test]
    fn locations_are_shown_without_secrets() {
        let base = url::Url::parse("http://127.0.0.1:8080/v1/chat/completions").unwrap();
        assert_eq!(
            shown_location(&base, "http://u:pw@10.0.0.1/x?key=sk-1#f"),
            "http://10.0.0.1/x"
        );
        assert_eq!(
            shown_location(&base, "/other?key=sk-1"),
            "http://127.0.0.1:8080/other"
        );
    }

    #[test]
    fn a_call_with_no_answer_for_the_stall_time_is_given_up_as_stalled() {
        // A server that takes the connection and never answers.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!(
            "http://{}/v1/chat/completions",
            listener.local_addr().unwrap()
        );
        let held = std::thread::spawn(move || listener.accept().map(|(conn, _)| conn));
        let client = HttpClient::new(
            &url,
            Policy {
                is_local: true,
                ..Policy::strict(Origin::CommandLine)
            },
            Limits {
                timeout: Duration::from_secs(60),
                max_response_bytes: 1024,
            },
            Arc::new(SystemLookup),
        )
        .unwrap();
        let quiet = Duration::from_millis(300);
        let e = crate::exec::command::in_stall(Some(quiet), || {
            client.post_json(&[], None, &serde_json::json!({}))
        })
        .unwrap_err();
        assert_eq!(e.code(), "stalled", "{e}");
        assert!(e.to_string().contains("stalled: no output for"), "{e}");
        // The connection the server took is closed with this test.
        drop(held.join().unwrap());
    }

    #[test]
    fn refused_urls_fail_when_the_client_is_made() {
        let e = HttpClient::new(
            "http://169.254.169.254/latest",
            Policy::strict(Origin::CommandLine),
            Limits {
                timeout: Duration::from_secs(5),
                max_response_bytes: 1024,
            },
            Arc::new(SystemLookup),
        )
        .unwrap_err();
        assert_eq!(e.code(), "refused", "{e}");
    }
}
