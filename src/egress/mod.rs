//! A confined worker's only way out: network to its model and nothing else, and its spend
//! counted while it runs.
//!
//! A confined worker runs in a fresh network namespace that has only loopback. Three pieces
//! give it exactly what it needs:
//!
//! * [`Proxy`] (outside the sandbox): an HTTP proxy on a Unix socket that takes `CONNECT
//!   host:port` and absolute-URI requests (`GET http://host:port/path`), admits only the
//!   `host:port` entries of its [`Allow`] list, resolves the host itself and checks every
//!   address it would dial against the endpoint policy ([`crate::exec::endpoint`]) at connect
//!   time, so a name cannot rebind past the check. Everything else gets `403` with one line
//!   saying why, and each refusal is counted per `host:port` ([`Proxy::counts`]).
//! * the bridge ([`bridge`], run as `git forum __egress-bridge`, inside the sandbox): listens on
//!   loopback ports inside the namespace, forwards each connection to a Unix socket bound into
//!   the sandbox, runs the worker as its child and exits with the worker's status, so it can be
//!   the program bubblewrap starts.
//! * [`Meter`] (outside the sandbox): an HTTP server on a Unix socket that forwards every
//!   request to the real model endpoint, streams each answer back as it arrives, reads the usage
//!   in it ([`usage`]: Anthropic Messages, the OpenAI Responses API, chat completions), counts it
//!   against a token and a dollar ceiling, and refuses the next request once a ceiling is
//!   reached (`402` in the protocol's own error shape), telling its caller once
//!   ([`MeterConfig::on_ceiling`]) so the caller can stop the worker's process tree.
//!
//! How a caller puts them together for one worker (the bubblewrap side is
//! `crate::exec::sandbox`):
//!
//! 1. start a [`Proxy`] on `AREA/proxy.sock` with the seat's endpoint and each
//!    `--sandbox-allow-host` as [`Allow`] entries, and a [`Meter`] on `AREA/meter.sock` in front
//!    of the real endpoint, `AREA` being the task's private directory;
//! 2. bind `AREA/proxy.sock` and `AREA/meter.sock` into the sandbox (the same paths) and start
//!    `git-forum __egress-bridge --listen 127.0.0.1:3128=AREA/proxy.sock --listen
//!    127.0.0.1:8080=AREA/meter.sock -- PROGRAM ARGS...` as the sandbox's command (the binary
//!    bound read-only), keeping `--unshare-net` (no `--share-net`);
//! 3. give the worker `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` (and their lower-case forms) =
//!    `http://127.0.0.1:3128`, `NO_PROXY=127.0.0.1,localhost,::1` (so the metered base URL is
//!    reached directly), and its model base URL pointing at `http://127.0.0.1:8080` followed by
//!    the path the CLI expects (see [`MeterConfig::upstream`]);
//! 4. after the worker: [`Proxy::counts`] and [`Meter::report`] go into the record, then
//!    [`Proxy::stop`] and [`Meter::stop`] (dropping them also stops them).

pub mod allow;
pub mod bridge;
mod http1;
pub mod meter;
pub mod proxy;
pub mod usage;

pub use allow::{Allow, AllowError};
pub use meter::{CeilingHit, Ceilings, Meter, MeterConfig, MeterReport, Prices, RequestUsage};
pub use proxy::{Counts, Proxy, ProxyConfig};

/// The loopback port the bridge conventionally gives the proxy inside the sandbox.
pub const PROXY_PORT: u16 = 3128;

/// The loopback port the bridge conventionally gives the metering forwarder inside the sandbox.
pub const METER_PORT: u16 = 8080;

/// The first argument that starts this binary as the bridge (`git-forum __egress-bridge`).
pub const BRIDGE_ARG: &str = "__egress-bridge";

/// When this process was started as the bridge (`git-forum __egress-bridge --listen
/// ADDR=SOCKET ... -- PROGRAM ARGS...`), runs it and returns the exit code; `None` otherwise.
/// Checked first thing in `main`, before the command line is parsed, like the reaper.
pub fn bridge_if_asked() -> Option<std::process::ExitCode> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).and_then(|a| a.to_str()) != Some(BRIDGE_ARG) {
        return None;
    }
    let fail = |m: String| {
        eprintln!("git-forum {BRIDGE_ARG}: {m}");
        Some(std::process::ExitCode::from(125))
    };
    let mut listens = Vec::new();
    let mut rest = args[2..].iter();
    loop {
        let arg = rest.next().and_then(|a| a.to_str());
        let spec = match arg {
            Some("--listen") => rest.next().and_then(|a| a.to_str()),
            Some(a) if a.starts_with("--listen=") => a.strip_prefix("--listen="),
            Some("--") => break,
            _ => return fail("usage: --listen ADDR:PORT=SOCKET ... -- PROGRAM ARGS...".into()),
        };
        match spec.map(bridge::Listen::parse) {
            Some(Ok(l)) => listens.push(l),
            Some(Err(e)) => return fail(e.to_string()),
            None => return fail("--listen needs ADDR:PORT=SOCKET".into()),
        }
    }
    let remaining: Vec<std::ffi::OsString> = rest.cloned().collect();
    let Some((program, args)) = remaining.split_first() else {
        return fail("no program after --".into());
    };
    match bridge::run(&listens, program, args) {
        Ok(code) => Some(std::process::ExitCode::from(code)),
        Err(e) => fail(e.to_string()),
    }
}
