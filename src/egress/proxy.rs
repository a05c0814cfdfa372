//! The egress proxy: HTTP on a Unix socket, outside the sandbox, admitting only its allowlist.
//!
//! Each connection carries one request: `CONNECT host:port` (answered `200` and then a byte
//! tunnel) or an absolute-URI request (`GET http://host:port/path`, sent on in origin form with
//! `Connection: close`). Before anything is dialled, the `host:port` must be an [`Allow`] entry;
//! then the proxy resolves the host itself and keeps only the addresses the endpoint policy
//! admits ([`VettingResolver`]), and dials exactly those, so the address checked is the address
//! connected to. A refusal is `403` with one line naming the host and what to do, and is
//! counted per `host:port`; a name that does not resolve or an address that does not answer is
//! `502`.

use std::collections::BTreeMap;
use std::io::{self, BufReader, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Serialize;

use super::allow::{Allow, split_host_port};
use super::http1::{self, Head};
use crate::exec::endpoint::Policy;
use crate::exec::http::{Lookup, SystemLookup, VetError, VettingResolver};

/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// How long dialling one address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// What the proxy admits.
#[derive(Clone)]
pub struct ProxyConfig {
    /// The `host:port` entries admitted: the seat's endpoint and each `--sandbox-allow-host`.
    pub allow: Vec<Allow>,
    /// The endpoint policy every resolved address is checked against (the seat's).
    pub policy: Policy,
    lookup: Arc<dyn Lookup>,
}

impl ProxyConfig {
    /// Admits `allow` under `policy`, resolving names with the system resolver.
    pub fn new(allow: Vec<Allow>, policy: Policy) -> ProxyConfig {
        ProxyConfig {
            allow,
            policy,
            lookup: Arc::new(SystemLookup),
        }
    }

    /// The same, resolving names with `lookup` (a test plays a rebinding name with it).
    pub fn with_lookup(mut self, lookup: Arc<dyn Lookup>) -> ProxyConfig {
        self.lookup = lookup;
        self
    }
}

impl std::fmt::Debug for ProxyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyConfig")
            .field("allow", &self.allow)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// What the proxy did, per `host:port` as the client asked for it (for the record).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Connections admitted and dialled.
    pub admitted: BTreeMap<String, u64>,
    /// Connections refused: not on the allowlist, or every address refused by the policy.
    pub refused: BTreeMap<String, u64>,
}

impl Counts {
    /// All refusals together.
    pub fn refused_total(&self) -> u64 {
        self.refused.values().sum()
    }
}

struct Shared {
    config: ProxyConfig,
    resolver: VettingResolver,
    counts: Mutex<Counts>,
    stopping: AtomicBool,
}

/// A running proxy; [`Proxy::stop`] (or dropping it) stops accepting and removes the socket.
pub struct Proxy {
    path: PathBuf,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy").field("path", &self.path).finish()
    }
}

impl Proxy {
    /// Listens on the Unix socket `path` (which must not exist; its directory should be private
    /// to the task) and serves each connection on a thread of its own.
    pub fn start(path: &Path, config: ProxyConfig) -> io::Result<Proxy> {
        let listener = UnixListener::bind(path)?;
        let shared = Arc::new(Shared {
            resolver: VettingResolver::new(config.policy, config.lookup.clone()),
            config,
            counts: Mutex::new(Counts::default()),
            stopping: AtomicBool::new(false),
        });
        let s = shared.clone();
        let accept = std::thread::Builder::new()
            .name("egress-proxy".into())
            .spawn(move || accept_loop(listener, s))?;
        Ok(Proxy {
            path: path.to_path_buf(),
            shared,
            accept: Some(accept),
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What was admitted and refused so far.
    pub fn counts(&self) -> Counts {
        self.shared.counts.lock().expect("proxy counts").clone()
    }

    /// Stops accepting connections (open tunnels end with their peers) and removes the socket.
    pub fn stop(mut self) -> Counts {
        self.shutdown();
        self.counts()
    }

    fn shutdown(&mut self) {
        if let Some(accept) = self.accept.take() {
            self.shared.stopping.store(true, Ordering::SeqCst);
            // Wakes the accept loop, which then sees the flag.
            let _ = UnixStream::connect(&self.path);
            let _ = accept.join();
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn accept_loop(listener: UnixListener, shared: Arc<Shared>) {
    for conn in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(conn) = conn else { continue };
        let s = shared.clone();
        let _ = std::thread::Builder::new()
            .name("egress-conn".into())
            .spawn(move || {
                let _ = serve(conn, &s);
            });
    }
}

/// Why a request is not carried: the status and the one line the client is told.
struct Refusal {
    status: u16,
    reason: String,
    counted: bool,
}

fn serve(conn: UnixStream, shared: &Shared) -> io::Result<()> {
    conn.set_read_timeout(Some(HEAD_TIMEOUT))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let head = match http1::read_head(&mut reader) {
        Ok(Some(h)) => h,
        Ok(None) => return Ok(()),
        Err(e) => return http1::answer(&mut &conn, 400, &format!("git forum egress: {e}")),
    };
    let early = reader.buffer().to_vec();
    conn.set_read_timeout(None)?;
    let target = match where_to(&head) {
        Ok(t) => t,
        Err(r) => return http1::answer(&mut &conn, r.status, &r.reason),
    };
    let key = Allow::new(&target.host, target.port).to_string();
    let upstream = match shared.dial(&target.host, target.port) {
        Ok(s) => s,
        Err(r) => {
            if r.counted {
                *shared
                    .counts
                    .lock()
                    .expect("proxy counts")
                    .refused
                    .entry(key)
                    .or_default() += 1;
            }
            return http1::answer(&mut &conn, r.status, &r.reason);
        }
    };
    *shared
        .counts
        .lock()
        .expect("proxy counts")
        .admitted
        .entry(key)
        .or_default() += 1;
    let mut up = &upstream;
    match &target.path {
        None => (&conn).write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")?,
        Some(path) => up.write_all(origin_form(&head, path).as_bytes())?,
    }
    up.write_all(&early)?;
    http1::pipe(conn, upstream)
}

/// Where a request goes: host, port, and for an absolute-URI request its origin-form path.
struct Target {
    host: String,
    port: u16,
    path: Option<String>,
}

fn where_to(head: &Head) -> Result<Target, Refusal> {
    let refuse = |status, reason: String| Refusal {
        status,
        reason,
        counted: false,
    };
    if head.method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = split_host_port(&head.target)
            .and_then(|(h, p)| Some((h, p?.parse::<u16>().ok()?)))
            .ok_or_else(|| {
                refuse(
                    400,
                    format!("git forum egress: CONNECT {} is not host:port", head.target),
                )
            })?;
        return Ok(Target {
            host: host.to_string(),
            port,
            path: None,
        });
    }
    let url = url::Url::parse(&head.target).map_err(|_| {
        refuse(400, format!(
            "git forum egress: {} {} is not a proxy request (send CONNECT host:port or an absolute http:// URL)",
            head.method, head.target
        ))
    })?;
    if url.scheme() != "http" {
        return Err(refuse(
            400,
            format!(
                "git forum egress: {}:// is not proxied as a plain request; use CONNECT (an https proxy URL in the client)",
                url.scheme()
            ),
        ));
    }
    let host = url.host_str().unwrap_or_default().to_string();
    let port = url.port_or_known_default().unwrap_or(80);
    let path = url[url::Position::BeforePath..url::Position::AfterQuery].to_string();
    Ok(Target {
        host,
        port,
        path: Some(path),
    })
}

/// The request head as the origin server takes it: origin-form target, no proxy headers, one
/// request per connection.
fn origin_form(head: &Head, path: &str) -> String {
    let mut out = format!("{} {} {}\r\n", head.method, path, head.version);
    const HOP: [&str; 4] = [
        "proxy-connection",
        "proxy-authorization",
        "connection",
        "keep-alive",
    ];
    for (k, v) in &head.headers {
        if !HOP.iter().any(|h| k.eq_ignore_ascii_case(h)) {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    out.push_str("Connection: close\r\n\r\n");
    out
}

impl Shared {
    /// Checks `host:port` against the allowlist, resolves it under the policy and dials the
    /// first admitted address that answers.
    fn dial(&self, host: &str, port: u16) -> Result<TcpStream, Refusal> {
        let shown = Allow::new(host, port);
        if !self.config.allow.iter().any(|a| a.admits(host, port)) {
            let allowed: Vec<String> = self.config.allow.iter().map(Allow::to_string).collect();
            return Err(Refusal {
                status: 403,
                reason: format!(
                    "git forum egress: {shown} is not reachable from the sandbox (allowed: {}); add --sandbox-allow-host {shown} to reach it",
                    if allowed.is_empty() {
                        "nothing".to_string()
                    } else {
                        allowed.join(", ")
                    }
                ),
                counted: true,
            });
        }
        let addrs = self.resolver.vet(shown.host()).map_err(|e| match e {
            VetError::Refused { .. } => Refusal {
                status: 403,
                reason: format!("git forum egress: {e}"),
                counted: true,
            },
            VetError::Lookup { .. } => Refusal {
                status: 502,
                reason: format!("git forum egress: {e}"),
                counted: false,
            },
        })?;
        let mut last = String::new();
        for ip in addrs {
            match TcpStream::connect_timeout(&SocketAddr::new(ip, port), CONNECT_TIMEOUT) {
                Ok(s) => return Ok(s),
                Err(e) => last = format!("{}: {e}", shown_addr(ip, port)),
            }
        }
        Err(Refusal {
            status: 502,
            reason: format!("git forum egress: cannot connect to {shown} ({last})"),
            counted: false,
        })
    }
}

fn shown_addr(ip: IpAddr, port: u16) -> String {
    SocketAddr::new(ip, port).to_string()
}
