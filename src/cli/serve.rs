//! `git forum serve` (the HTTP daemon) and `git forum mcp` (MCP on stdio): both load the
//! roster, policy and runtime once, open one long-lived ledger handle, and hand requests to
//! the same `Dispatcher` ([`crate::serve::dispatch::Dispatcher`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::exec_flags::ExecutorArgs;
use super::{CliError, Ctx};
use crate::serve::dispatch::{Config, DEFAULT_SUBMIT_SECONDS, Dispatcher, ROUTES};
use crate::serve::http::{self, DEFAULT_MAX_BODY, Guard, Limits, Server};
use crate::serve::mcp::{Mcp, TOOLS};
use crate::serve::token;
use crate::surface::store::LedgerSpec;

/// What the engine behind both servers is made of.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct EngineArgs {
    /// Roster file (default: .forum/roster.toml, else the built-in roster).
    #[arg(long, value_name = "FILE")]
    pub(crate) roster: Option<PathBuf>,
    /// Policy file (default: .forum/policy.toml, else no limits beyond 6 tasks at a time).
    #[arg(long, value_name = "FILE")]
    pub(crate) policy: Option<PathBuf>,
    /// The longest one submit or resume may run, in seconds; the run then stops on its budget
    /// (witnessed, resumable).
    #[arg(long, value_name = "S", default_value_t = DEFAULT_SUBMIT_SECONDS)]
    pub(crate) submit_timeout: f64,
    /// Executors for submit and plan. Clients cannot choose executors: only this command line
    /// and the runtime config can.
    #[command(flatten)]
    pub(crate) exec: ExecutorArgs,
}

/// Serve the ledger over HTTP: status, verify, entries, bodies, proofs, runs, gates, route,
/// plan, submit and more (see README "Daemon and MCP"). Prints `listening http://HOST:PORT` as
/// its first line (with `--port 0`, the port the system chose) and `token-file PATH` as its
/// second. Every POST (and the reads that describe this host) needs `Authorization: Bearer
/// TOKEN`, loopback included, with the token in that file (0600, under git forum's state
/// directory, never under the git dir); reads of the record are open on loopback unless
/// `--require-token`. Loopback only by default. Stops on SIGTERM or Ctrl-C after draining
/// in-flight requests (exit 0).
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub(crate) host: String,
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = 8080)]
    pub(crate) port: u16,
    /// Require the bearer token for reads of the record too (always so on a non-loopback
    /// address; writes and reads of the host require it everywhere).
    #[arg(long)]
    pub(crate) require_token: bool,
    /// Also print the token itself, as a third line `token TOKEN` (by default only its file is
    /// named).
    #[arg(long)]
    pub(crate) print_token: bool,
    /// Print the path of this clone's token file (making the token when there is none) and
    /// exit, for scripts: `curl -H "Authorization: Bearer $(cat "$(git forum serve
    /// --token-path)")" ...`.
    #[arg(long)]
    pub(crate) token_path: bool,
    /// Also accept this name in the Host header (repeatable); the bound address and the
    /// loopback names are always accepted.
    #[arg(long = "allow-host", value_name = "NAME")]
    pub(crate) allow_hosts: Vec<String>,
    /// Largest request body, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_BODY)]
    pub(crate) max_body: usize,
    /// Seconds a client may take to send its request headers (the connection is then
    /// closed), and again its body (408).
    #[arg(long, value_name = "S", default_value_t = 10.0)]
    pub(crate) read_timeout: f64,
    /// Seconds an ordinary request may take.
    #[arg(long, value_name = "S", default_value_t = 30.0)]
    pub(crate) timeout: f64,
    /// Requests worked on at once (others wait, then get 503).
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub(crate) concurrency: usize,
    /// Connections open at once; at the cap, the one idle longest (waiting for its request
    /// head, body or next request) is closed to make room for a new one.
    #[arg(long, value_name = "N", default_value_t = http::DEFAULT_MAX_CONNECTIONS)]
    pub(crate) max_connections: usize,
    /// Seconds a SIGTERM waits for in-flight requests.
    #[arg(long, value_name = "S", default_value_t = 30.0)]
    pub(crate) drain: f64,
    /// Answer `POST /witness` as a witness keeping its state here (default:
    /// `forum.witnessState`).
    #[arg(long, value_name = "DIR")]
    pub(crate) witness_state: Option<PathBuf>,
    /// The witness's signer key file for `POST /witness` (default: `forum.witnessKey`).
    #[arg(long, value_name = "FILE")]
    pub(crate) witness_key: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) engine: EngineArgs,
}

/// Serve the same operations as MCP tools on standard input and output (JSON-RPC 2.0, one
/// message per line). Only protocol goes to stdout; messages about the server go to stderr.
#[derive(Debug, clap::Args)]
pub(crate) struct McpArgs {
    #[command(flatten)]
    pub(crate) engine: EngineArgs,
}

fn seconds(value: f64, flag: &str) -> Result<Duration, CliError> {
    if value.is_finite() && value > 0.0 && value < 1e9 {
        Ok(Duration::from_secs_f64(value))
    } else {
        Err(CliError::usage(format!(
            "--{flag} {value} must be a number of seconds above 0"
        )))
    }
}

/// Builds the dispatcher both servers share.
fn dispatcher(ctx: &Ctx, e: &EngineArgs) -> Result<Dispatcher, CliError> {
    seconds(e.submit_timeout, "submit-timeout")?;
    let roster = crate::config::load_roster(&ctx.dir, e.roster.as_deref())?;
    let policy = crate::config::load_policy(&ctx.dir, e.policy.as_deref())?;
    let loaded = crate::config::load_runtime(
        &ctx.dir,
        e.exec.runtime_config.as_deref(),
        &e.exec.to_flags(),
    )?;
    let timestamp = match std::env::var("GIT_FORUM_TIMESTAMP") {
        Ok(_) => Some(ctx.now(None)?),
        Err(_) => None,
    };
    if let LedgerSpec::Fetched { .. } = LedgerSpec::parse(&ctx.ledger) {
        // A fetched copy is served only when fetch adopted it, and read-only.
        ctx.existing_store()?;
    }
    let cfg = Config {
        dir: ctx.dir.clone(),
        ledger: ctx.ledger.clone(),
        no_fsync: ctx.no_fsync,
        timestamp,
        submit_seconds: e.submit_timeout,
        witness_state: None,
        witness_key: None,
    };
    Ok(Dispatcher::open(cfg)?
        .with_roster(roster)
        .with_policy(policy)
        .with_runtime(loaded))
}

/// The token file of the repository at `ctx` and its token (made when there is none), with
/// the token file older versions kept under the git dir removed.
pub(crate) fn token(ctx: &Ctx) -> Result<(PathBuf, String), CliError> {
    let repo = crate::surface::store::open_repo(&ctx.dir)?;
    let common = token::common_dir(&repo).map_err(|e| CliError::usage(e.to_string()))?;
    if let Some(old) = token::remove_legacy(&common) {
        eprintln!(
            "git forum serve: removed {}, where a sandboxed worker could read it; the token now lives outside the git dir",
            old.display()
        );
    }
    let path = token::path_for(&common).map_err(|e| CliError::usage(e.to_string()))?;
    let t = token::load_or_create(&path).map_err(|e| {
        CliError::internal(format!("cannot make the token in {}: {e}", path.display()))
    })?;
    Ok((path, t))
}

/// Raises this process's open-file limit towards what `max_connections` needs (up to the hard
/// limit) and returns the connection cap the limit allows: every connection is a descriptor,
/// and the engine needs some of its own (git packs, the ledger, executors).
fn connection_cap(max_connections: usize, concurrency: usize) -> usize {
    use rustix::process::{Resource, getrlimit, setrlimit};
    const RESERVE: u64 = 128;
    let want = max_connections as u64 + concurrency as u64 * 4 + RESERVE;
    let mut lim = getrlimit(Resource::Nofile);
    if let Some(cur) = lim.current
        && cur < want
    {
        let raised = lim.maximum.map_or(want, |m| m.min(want));
        if raised > cur {
            lim.current = Some(raised);
            if setrlimit(Resource::Nofile, lim).is_err() {
                lim.current = Some(cur);
            }
        }
    }
    let room = lim.current.map_or(u64::MAX, |c| {
        c.saturating_sub(RESERVE + concurrency as u64 * 4).max(1)
    });
    let cap = (max_connections as u64).min(room).max(1) as usize;
    if cap < max_connections {
        eprintln!(
            "git forum serve: --max-connections {max_connections} lowered to {cap}: the open-file limit is {} (raise it with `ulimit -n`)",
            lim.current.unwrap_or(0)
        );
    }
    cap
}

/// The line on stderr that names the ledger served.
fn say_ledger(ctx: &Ctx, read_only: bool) {
    let copy = if read_only {
        " (a fetched copy, read-only: every route that writes answers 409)"
    } else {
        ""
    };
    eprintln!(
        "git forum serve: ledger {}{copy}, {} routes; SIGTERM or Ctrl-C stops it",
        ctx.ledger,
        ROUTES.len()
    );
}

/// `git forum serve`.
pub(crate) fn serve(ctx: &Ctx, args: ServeArgs) -> Result<(), CliError> {
    if args.token_path {
        let (path, _) = token(ctx)?;
        return ctx.out(&path.display().to_string());
    }
    let concurrency = args.concurrency.max(1);
    let limits = Limits {
        max_body: args.max_body,
        read_timeout: seconds(args.read_timeout, "read-timeout")?,
        timeout: seconds(args.timeout, "timeout")?,
        submit_timeout: seconds(args.engine.submit_timeout, "submit-timeout")?
            + Duration::from_secs(30),
        concurrency,
        max_connections: connection_cap(args.max_connections.max(1), concurrency),
        drain: seconds(args.drain, "drain")?,
    };
    let mut d = dispatcher(ctx, &args.engine)?;
    d.cfg.witness_state = args.witness_state.clone();
    d.cfg.witness_key = args.witness_key.clone();
    let d = Arc::new(d);
    let (token_path, token) = token(ctx)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(limits.concurrency + 8)
        .enable_all()
        .build()
        .map_err(|e| CliError::unavailable(format!("cannot start the server runtime: {e}")))?;
    let result = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind((args.host.as_str(), args.port))
            .await
            .map_err(|e| {
                CliError::unavailable(format!("cannot listen on {}:{}: {e}", args.host, args.port))
            })?;
        let bound = listener
            .local_addr()
            .map_err(|e| CliError::internal(format!("reading the bound address: {e}")))?;
        ctx.out(&format!("listening http://{bound}"))?;
        ctx.out(&format!("token-file {}", token_path.display()))?;
        if args.print_token {
            ctx.out(&format!("token {token}"))?;
        }
        let reads_open = !args.require_token && bound.ip().is_loopback();
        eprintln!(
            "git forum serve: every POST{} needs `Authorization: Bearer TOKEN`, with the token in {} (0600)",
            if reads_open {
                " and the reads of this host (/runtime, /model, /status/full, /doctor)"
            } else {
                " and every read but /health"
            },
            token_path.display()
        );
        say_ledger(ctx, d.is_read_only());
        let guard = Guard::new(
            &args.host,
            bound,
            &args.allow_hosts,
            token,
            args.require_token,
        );
        let server = Arc::new(Server::new(d, guard, limits));
        let clean = http::serve(listener, server, http::shutdown_signal())
            .await
            .map_err(|e| CliError::internal(format!("the server failed: {e}")))?;
        if clean {
            eprintln!("git forum serve: stopped; every request finished");
        } else {
            eprintln!(
                "git forum serve: stopped at the drain deadline; a run still in flight shows as interrupted in `git forum runs` and `git forum resume` continues it"
            );
        }
        Ok::<(), CliError>(())
    });
    rt.shutdown_background();
    result
}

/// `git forum mcp`.
pub(crate) fn mcp(ctx: &Ctx, args: McpArgs) -> Result<(), CliError> {
    let d = dispatcher(ctx, &args.engine)?;
    eprintln!(
        "git forum mcp: ledger {}, {} tools, on standard input and output",
        ctx.ledger,
        TOOLS.len()
    );
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout();
    Mcp::new(&d)
        .serve(stdin, stdout)
        .map_err(|e| CliError::internal(format!("reading standard input: {e}")))
}

/// `git forum __api-doc`: takes nothing.
#[derive(Debug, clap::Args)]
pub(crate) struct ApiDocArgs {}

/// `git forum __api-doc`: prints `docs/api.md`, the API reference generated from the daemon's
/// routes and the typed requests.
pub(crate) fn api_doc(ctx: &Ctx, _args: ApiDocArgs) -> Result<(), CliError> {
    ctx.out(crate::serve::api_doc::markdown().trim_end())
}
