//! The one dispatcher: `(method, path, JSON body)` → `(status, JSON)`.
//!
//! Both transports call [`Dispatcher::handle`] (HTTP, with the raw body) or
//! [`Dispatcher::call`] (MCP, with the tool's arguments), so a route behaves the same whichever
//! way it is reached. Paths are matched literally (no query strings, as in Forum); a known path
//! with the wrong method is 405, an unknown one 404. Errors are `{"error": "..."}` with 400
//! (bad JSON, a body that is not an object, a field of the wrong type), 404 (no such route or
//! entry), 405, 409 (the ledger state forbids it), 500 (the store failed), 502 (the executor
//! gave no usable plan or answer) and 503 (no executor configured, the server is draining, or
//! the ledger is contended).
//!
//! Adding a route is one arm in `resolve` (and one line in [`ROUTES`] for the listing).
//!
//! One ledger handle is kept for the whole life of the server: every write of every request goes
//! through it (a mutex in this process; the store's flock and compare-and-swap against other
//! processes, such as a CLI appending at the same time). Reads use short-lived handles on the
//! same repository and share a cache of the entries, refreshed whenever the ledger's tip moves.

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value as J, json};

use crate::config::Loaded;
use crate::ledger::{Entry, canonical};
use crate::policy::Policy;
use crate::roster::Roster;
use crate::surface::run::{Fleet, Seats};

pub(crate) use super::executors::{Executors, NoSeats};

mod board;
mod config;
mod fresh;
mod read_only;
mod resolve;
use crate::surface::store::{GitStore, Options, StoreError};
pub use config::Config;
pub(crate) use fresh::Read;
pub use read_only::reads_only;
use resolve::{Handler, resolve};

/// The default limit on one submit (or resume) over the daemon or MCP, in seconds.
pub(crate) const DEFAULT_SUBMIT_SECONDS: f64 = 600.0;

/// Every route, for listings and docs: method, path (`<seq>` is a path segment), what it does.
pub const ROUTES: &[(&str, &str, &str)] = &[
    ("GET", "/health", "liveness: {\"ok\": true}"),
    ("GET", "/status", "entry count and checkpoint (Merkle root)"),
    ("GET", "/verify", "chain and deep (body) verification"),
    ("GET", "/checkpoint", "the current checkpoint"),
    (
        "POST",
        "/checkpoint",
        "verify, then record the checkpoint as a witness",
    ),
    ("GET", "/ledger/<seq>", "one entry (no body)"),
    (
        "GET",
        "/payload/<seq>",
        "one entry's body (null when redacted)",
    ),
    (
        "GET",
        "/replay/<seq>",
        "entries with seq <= N, a page at a time (?limit=&after=, then next)",
    ),
    (
        "GET",
        "/why/<seq>",
        "the causal chain of an entry, root first",
    ),
    (
        "POST",
        "/prove",
        "inclusion ({seq}) or consistency ({consistency_from}) proof, optional size",
    ),
    (
        "POST",
        "/append",
        "append one entry {actor, kind, payload, causal_parent?}",
    ),
    ("GET", "/runs", "the runs in the ledger and how each stands"),
    ("GET", "/gates", "pending gates"),
    (
        "POST",
        "/gate/approve",
        "approve a gate {run_seq, wave, approver, note?}",
    ),
    (
        "POST",
        "/gate/edit",
        "approve with new instructions {run_seq, wave, approver, edits, note?}",
    ),
    (
        "POST",
        "/gate/reject",
        "reject a gate {run_seq, wave, approver, reason?}",
    ),
    (
        "GET",
        "/runtime",
        "the executors this server runs (runtime inspect)",
    ),
    (
        "GET",
        "/model",
        "the local model: installed, running, its URL (model status)",
    ),
    (
        "GET",
        "/sync",
        "push/fetch status: remote copies and last-seen checkpoints",
    ),
    ("POST", "/route", "route a request {text}"),
    (
        "POST",
        "/lane/check",
        "check and witness a route claim {task, lane, scopes?, domain?, confidence?}",
    ),
    (
        "POST",
        "/lane/gaps",
        "the vocabulary gap {min_escalations?, domain_signal?, record?}",
    ),
    (
        "POST",
        "/plan",
        "plan a request with the model {request}, or compile {plan}",
    ),
    ("POST", "/submit", "run a request end to end {request, ...}"),
    ("POST", "/resume", "continue an unfinished run {run?}"),
    (
        "POST",
        "/halt",
        "halt a running run {run?, reason?, by?, wait_seconds?}",
    ),
    (
        "POST",
        "/humanize",
        "clean up prose {text, audience?, profile?}",
    ),
    (
        "POST",
        "/prose/contract",
        "the communication contract of a text's route frame {text, profile?}",
    ),
    (
        "GET",
        "/summary",
        "the ledger's summary: counts, checks, model calls",
    ),
    (
        "GET",
        "/room",
        "the latest run's room: tasks, answer, next actions, brief",
    ),
    (
        "GET",
        "/capsule",
        "the context capsule (8 items, 240 characters)",
    ),
    (
        "GET",
        "/receipt/<seq>",
        "Forum's action receipt of a run (the latest without a seq)",
    ),
    (
        "GET",
        "/grade",
        "the latest run's grade: independent checks passed",
    ),
    (
        "POST",
        "/bench",
        "compare two sides {a, b}: NAME, REMOTE/NAME or run:SEQ",
    ),
    (
        "POST",
        "/context/preflight",
        "how much request context a run would admit {request, use_capsule_context?, ...}",
    ),
    (
        "POST",
        "/import-trace",
        "fold an agent trace into Forum's flight-recorder record {trace, format?}",
    ),
    (
        "POST",
        "/mine",
        "fold an agent trace into one gradable-trajectory row {trace, format?, min_checks?}",
    ),
    (
        "POST",
        "/campaign/declare",
        "validate and declare a campaign {campaign}",
    ),
    (
        "POST",
        "/campaign/status",
        "a campaign's room {campaign_id?}",
    ),
    (
        "POST",
        "/campaign/next",
        "a campaign's next actions {campaign_id?}",
    ),
    (
        "POST",
        "/campaign/ingest-status",
        "record an outside system's status {project, feature?, status, source, reason?}",
    ),
    (
        "POST",
        "/campaign/run",
        "run a campaign's runnable features to a fixed point {campaign_id?, max_parallel?}",
    ),
    (
        "POST",
        "/worker",
        "start a worker this server owns on a NATS server's dispatched tasks {nats, remote?, name?, concurrency?, lease?, max_tasks?, ...}",
    ),
    (
        "GET",
        "/workers",
        "the workers this server owns: state and tasks done",
    ),
    (
        "POST",
        "/worker/stop",
        "stop a worker this server owns once its tasks in hand are done {name}",
    ),
    (
        "POST",
        "/grade",
        "the grade of one run {run?, all?, min_checks?} (default: the latest run)",
    ),
    (
        "POST",
        "/gradable",
        "Forum's gradable-trajectory row of one run {run?, all?, min_checks?}",
    ),
    (
        "GET",
        "/status/full",
        "what the repository's git forum holds: ledgers, last run, hooks, runtime",
    ),
    (
        "GET",
        "/doctor",
        "doctor's diagnosis of the ledger and the install (no repairs)",
    ),
    (
        "POST",
        "/witness",
        "cosign a checkpoint that extends the last accepted one {proof} or {note}",
    ),
    (
        "POST",
        "/attest",
        "a signed in-toto attestation of what a --work run shipped {run?}, or its check {envelope, keys?}",
    ),
    (
        "POST",
        "/replay",
        "a run replayed strictly from its record in a fresh network namespace {run, strict: true}",
    ),
    (
        "POST",
        "/reproduce",
        "a --work run's checks run again and its branch rebuilt from the record {run}",
    ),
    (
        "POST",
        "/diff",
        "a --work run's change against its base {run?, stat?, name_only?, paths?}",
    ),
    (
        "POST",
        "/apply",
        "bring a --work run's branch into the current branch {run?}",
    ),
    (
        "POST",
        "/apply/dry-run",
        "what apply would do against the current branch, and the diff it would receive {run?}",
    ),
    (
        "GET",
        "/blame",
        "who wrote each line of a file by the record (?file=&lines=A,B&rev=&verify=true)",
    ),
    (
        "POST",
        "/discard",
        "remove a --work run's worktrees and branch {run?}",
    ),
    (
        "GET",
        "/log",
        "the newest entries first, as `git forum log --json` (?limit=, at most 1000)",
    ),
    (
        "POST",
        "/tlog/prove",
        "a C2SP proof against the stored signed note: inclusion ({seq}) or consistency ({consistency_from}), optional size",
    ),
    (
        "POST",
        "/tlog/checkpoint",
        "verify, then sign and store the C2SP checkpoint note with forum.noteKey {no_record?}",
    ),
    (
        "GET",
        "/tlog/<path>",
        "a file of the tlog-tiles layout of the latest signed note (checkpoint, tile/L/N[.p/W], tile/entries/N[.p/W]): raw bytes over HTTP",
    ),
    (
        "POST",
        "/hooks/check",
        "the answer the pre-push or pre-receive hook would give to ref updates {hook, stdin, scan_code?, remote?}",
    ),
];

/// Where the daemon serves the tlog-tiles layout: `GET /tlog/checkpoint`, `GET /tlog/tile/...`.
pub(crate) const TLOG_PREFIX: &str = "/tlog/";

/// Whether a `GET` of `path` answers a file of the tlog-tiles layout, which the HTTP transport
/// serves as the file's own bytes (tlog clients fetch tiles by URL) rather than as JSON.
pub(crate) fn is_raw_file(method: &str, path: &str) -> bool {
    method == "GET" && path.starts_with(TLOG_PREFIX) && path != "/tlog/prove"
}

/// Scans an append's body for secrets as `POST /append` does before it writes (the default
/// policy, which redacts): whether the body is clean. The daemon bench times it to report the
/// scan's share of an append.
#[doc(hidden)]
pub fn scan_append_body(payload: &crate::ledger::Value) -> bool {
    matches!(
        crate::secrets::Guard::default().check(payload),
        crate::secrets::Screened::Clean
    )
}

/// A dispatcher's answer: an HTTP status and a JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The HTTP status (MCP reports `isError` for 400 and above).
    pub status: u16,
    /// The JSON body.
    pub body: J,
    /// The body's exact text, when `body` cannot carry it: a `NaN` or an infinity, which
    /// serde_json has no number for (see [`crate::ledger::canonical::Value::to_serde`]).
    pub text: Option<String>,
}

impl Reply {
    /// A 200 answer.
    pub(crate) fn ok(body: J) -> Reply {
        Reply {
            status: 200,
            body,
            text: None,
        }
    }

    /// A 200 answer whose exact text is `text`; `body` is its nearest strict-JSON form.
    pub(crate) fn exact(body: J, text: String) -> Reply {
        Reply {
            status: 200,
            body,
            text: Some(text),
        }
    }

    /// An error answer: `{"error": message}`.
    pub(crate) fn error(status: u16, message: impl Into<String>) -> Reply {
        Reply {
            status,
            body: json!({ "error": message.into() }),
            text: None,
        }
    }

    /// The error message, or an empty string for a success.
    pub fn message(&self) -> &str {
        self.body.get("error").and_then(J::as_str).unwrap_or("")
    }

    /// The body as compact JSON text (the HTTP body, and the text of an MCP tool result).
    pub fn body_text(&self) -> String {
        match &self.text {
            Some(t) => t.clone(),
            None => self.body.to_string(),
        }
    }
}

impl From<crate::surface::Error> for Reply {
    /// The class decides the status ([`crate::surface::Class::http_status`]).
    fn from(e: crate::surface::Error) -> Reply {
        Reply::error(e.class.http_status(), e.message)
    }
}

impl From<StoreError> for Reply {
    fn from(e: StoreError) -> Reply {
        crate::surface::Error::from(e).into()
    }
}

/// What a handler gets: the parsed body and, over HTTP, its raw bytes (so `/append` can keep
/// number identity exactly as `git forum append` does).
pub struct Request<'a> {
    /// The body; `{}` when there was none.
    pub(crate) body: &'a J,
    /// The body as received over HTTP, or an MCP tool's arguments as written.
    pub(crate) raw: Option<&'a [u8]>,
    /// The `Idempotency-Key` header, when one came over HTTP.
    pub(crate) key: Option<&'a str>,
    /// What a submit or resume gets from its caller besides the body.
    pub(crate) hooks: RunHooks<'a>,
}

/// What a caller hands a submit or resume besides its body: the flag that stops it (MCP's
/// `notifications/cancelled`) and where its progress goes (MCP's `progressToken`). The
/// default is neither: the run stops only on its budget or the drain, and says nothing.
#[derive(Clone, Default)]
pub(crate) struct RunHooks<'a> {
    /// Raised to stop the run: it writes nothing more and witnesses `interrupted`.
    pub(crate) interrupt: Option<Arc<crate::surface::run::Interrupt>>,
    /// Receives the run's progress events.
    pub(crate) progress: Option<&'a dyn crate::surface::run::Progress>,
}

/// Who may call a route, as the HTTP transport enforces it (MCP runs in the user's own
/// process and needs no credential).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// `GET /health`: open to every client that passes the Host check, even with
    /// `--require-token`, so a liveness probe needs no secret.
    Open,
    /// A read of the ledger or of what the ledger's refs say: open on a loopback address
    /// (the same record travels with `git push`, and a worker's sandbox shows it the objects
    /// anyway), closed by `--require-token` and on any other address.
    Record,
    /// A read that describes this host rather than the record (the executors, the local
    /// model, the install and doctor's diagnosis: commands, paths, endpoints): the token,
    /// always.
    Host,
    /// Everything that may change something or spend something: every `POST` but
    /// `/witness`. The token, always, and an `application/json` body.
    Write,
    /// `POST /witness`: a write whose authority is the signature it carries. The witness
    /// cosigns only a note signed by a log key it trusts (`forum.noteVerifiers`) that extends
    /// what it accepted before, so an offer from anyone can only make it cosign what the log
    /// itself signed. Its askers are other people's `git forum fetch`, who must never hold
    /// this daemon's token (which also appends and applies). No token; an `application/json`
    /// body.
    Signed,
}

/// Who may call `method path` (see [`Access`]). Every `POST` but `/witness` is
/// [`Access::Write`], whether or not it writes today (`/prove` and `/route` do not; `/plan`
/// calls a model): one rule a reader can check, and no route becomes open by a later change to
/// what it does.
pub fn access(method: &str, path: &str) -> Access {
    if method != "GET" {
        return match (method, path) {
            ("POST", "/witness") => Access::Signed,
            _ => Access::Write,
        };
    }
    match path {
        "/health" => Access::Open,
        "/runtime" | "/model" | "/status/full" | "/doctor" => Access::Host,
        _ => Access::Record,
    }
}

/// The methods `path` answers to (empty for an unknown path).
pub(crate) fn allowed_methods(path: &str) -> Vec<&'static str> {
    ["GET", "POST"]
        .into_iter()
        .filter(|m| resolve(m, path).is_some())
        .collect()
}

/// Whether the route runs the control loop, a replay of it or a run's checks (it gets the
/// submit time limit, not the ordinary per-request timeout).
pub(crate) fn is_long_running(method: &str, path: &str) -> bool {
    method == "POST"
        && matches!(
            path,
            "/submit" | "/resume" | "/plan" | "/campaign/run" | "/halt" | "/replay" | "/reproduce"
        )
}

/// The entries as last read, keyed by the tip commit they were read at, with the commit of
/// each (bodies are read straight from those commits, never through the seq index).
#[derive(Default, Clone)]
pub(crate) struct EntryCache {
    pub(crate) tip: Option<gix::ObjectId>,
    pub(crate) entries: Arc<Vec<Entry>>,
    pub(crate) commits: Arc<Vec<gix::ObjectId>>,
    pub(crate) root: String,
    /// The Merkle accumulator over `entries`, extended as the ledger grows.
    pub(crate) acc: crate::ledger::merkle::Accumulator,
    /// Counts the times the entries were read whole rather than extended (a rewrite, or the
    /// ref moved back): an entry at a seq below the size is the same within one epoch.
    pub(crate) epoch: u64,
}

/// Maps requests to the engine. `Sync`: one dispatcher serves every connection.
pub struct Dispatcher {
    pub(crate) cfg: Config,
    pub(crate) repo: gix::ThreadSafeRepository,
    pub(crate) writer: Mutex<GitStore>,
    /// The entries as last read and the read answers made from them (see [`fresh`]); a read
    /// takes a share of the entries (an `Arc`), not a copy.
    pub(crate) cache: Mutex<fresh::Cached>,
    /// The cache's answers as published for reads that take no lock (see [`board`]).
    pub(crate) board: Arc<board::Board>,
    /// The ledger's loose ref file, where refs are files: a read compares what it names with
    /// the cached tip and, when they match, answers from the cache without opening a store.
    pub(crate) ref_file: Option<PathBuf>,
    pub(crate) roster: Roster,
    pub(crate) policy: Policy,
    pub(crate) executors: Executors,
    pub(crate) draining: Arc<AtomicBool>,
    /// The idempotency keys of appends, loaded on first use.
    pub(crate) keys: Mutex<Option<super::idem::keys::Keys>>,
    /// What `/verify` and `/summary` keep between requests.
    pub(crate) projections: super::projections::cache::Projections,
    /// The runs this server is driving now (its heartbeat names them).
    pub(crate) running: super::running::Running,
    /// The workers this server started (`POST /worker`).
    pub(crate) workers: crate::surface::workers::Workers,
}

/// Locks a mutex, recovering from a poisoned one (a panicking handler leaves no half-done state
/// behind these locks: appends are atomic in the store).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Dispatcher {
    /// Opens the ledger (which need not exist yet) with the built-in roster, no policy limits
    /// and no executor: every route but `/plan`, `/submit` and `/resume` works. A fetched
    /// copy (`REMOTE:NAME`) is served read-only (see [`read_only`]).
    pub fn open(cfg: Config) -> Result<Dispatcher, StoreError> {
        let repo = crate::surface::store::open_repo(&cfg.dir)?;
        let opts = Options::from_config(&repo, cfg.no_fsync)?;
        let shared = repo.clone().into_sync();
        let writer = crate::surface::store::open_spec(repo.clone(), &cfg.ledger, opts)?;
        let ref_file = crate::surface::store::loose_ref_file(&repo, &writer);
        let cache = fresh::Cached::default();
        let board = cache.board.clone();
        Ok(Dispatcher {
            cfg,
            repo: shared,
            writer: Mutex::new(writer),
            cache: Mutex::new(cache),
            board,
            ref_file,
            roster: Roster::default_roster(),
            policy: Policy::default(),
            executors: Executors {
                loaded: None,
                seats: Err(NoSeats::NotConfigured),
            },
            draining: Arc::new(AtomicBool::new(false)),
            keys: Mutex::new(None),
            projections: Default::default(),
            running: Default::default(),
            workers: Default::default(),
        })
    }

    /// Uses `roster` for routing and planning.
    pub(crate) fn with_roster(mut self, roster: Roster) -> Dispatcher {
        self.roster = roster;
        self
    }

    /// Uses `policy` for plans and runs.
    pub(crate) fn with_policy(mut self, policy: Policy) -> Dispatcher {
        self.policy = policy;
        self
    }

    /// Runs models with the executors of `loaded` (a merged runtime config). A runtime that
    /// cannot run (an issue `runtime inspect` reports, or a fleet that cannot be built) leaves
    /// the server without an executor: `/submit` then answers 503 with the reason.
    pub(crate) fn with_runtime(mut self, loaded: Loaded) -> Dispatcher {
        let issues =
            crate::exec::config::issues(&loaded.runtime, &self.roster, &crate::config::RealFacts);
        self.executors.seats = match issues.into_iter().next() {
            Some(first) => Err(NoSeats::Issue(first)),
            None => match Fleet::new(loaded.runtime.clone()) {
                Ok(f) => Ok(Arc::new(f) as Arc<dyn Seats>),
                Err(e) => Err(NoSeats::Fleet(Arc::new(e))),
            },
        };
        self.executors.loaded = Some(loaded);
        self
    }

    /// Runs models with `seats` (tests and embedders).
    pub fn with_seats(mut self, seats: Arc<dyn Seats>) -> Dispatcher {
        self.executors.seats = Ok(seats);
        self
    }

    /// The ledger name.
    pub(crate) fn ledger(&self) -> &str {
        &self.cfg.ledger
    }

    /// The flag that, once set, makes running submits stop at their next budget check (they
    /// are witnessed as stopped, and resumable) and new ones answer 503.
    pub(crate) fn draining(&self) -> Arc<AtomicBool> {
        self.draining.clone()
    }

    /// Whether the server is draining.
    pub(crate) fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Answers an HTTP request: `body` is the raw request body (empty for none).
    pub fn handle(&self, method: &str, path: &str, body: &[u8]) -> Reply {
        self.handle_keyed(method, path, body, None)
    }

    /// [`Dispatcher::handle`] with the request's `Idempotency-Key` header, if any.
    pub(crate) fn handle_keyed(
        &self,
        method: &str,
        path: &str,
        body: &[u8],
        key: Option<&str>,
    ) -> Reply {
        self.handle_hooked(method, path, body, key, RunHooks::default())
    }

    /// [`Dispatcher::handle_keyed`] with the run's [`RunHooks`] (an MCP tool call).
    pub(crate) fn handle_hooked(
        &self,
        method: &str,
        path: &str,
        body: &[u8],
        key: Option<&str>,
        hooks: RunHooks<'_>,
    ) -> Reply {
        let handler = match self.route_for(method, path) {
            Ok(h) => h,
            Err(refused) => return refused,
        };
        let trimmed = body.trim_ascii();
        let parsed = if method == "GET" || trimmed.is_empty() {
            J::Object(Default::default())
        } else {
            // Read as Python's json.loads reads it (Forum's daemon does), so NaN and Infinity
            // are accepted on every surface and every number keeps its exact value.
            let parsed = std::str::from_utf8(trimmed)
                .map_err(|_| "it is not UTF-8".to_string())
                .and_then(|t| canonical::parse(t).map_err(|e| e.to_string()));
            match parsed {
                Ok(v) => v.to_serde(),
                Err(e) => {
                    return Reply::from(crate::surface::Error::usage(format!(
                        "the request body is not valid JSON: {e}"
                    )));
                }
            }
        };
        let raw = (method != "GET" && !trimmed.is_empty()).then_some(trimmed);
        let reply = self.run(
            handler,
            &Request {
                body: &parsed,
                raw,
                key,
                hooks,
            },
        );
        self.after(method);
        reply
    }

    /// After a request of `method`: anything but a `GET` may have written, so the cache is
    /// brought to the ledger's tip before it answers (see [`Dispatcher::caught_up`]).
    fn after(&self, method: &str) {
        if method != "GET" {
            self.caught_up();
        }
    }

    /// Answers a request whose body is already JSON (an MCP tool call).
    pub(crate) fn call(&self, method: &str, path: &str, body: J) -> Reply {
        let handler = match self.route_for(method, path) {
            Ok(h) => h,
            Err(refused) => return refused,
        };
        let reply = self.run(
            handler,
            &Request {
                body: &body,
                raw: None,
                key: None,
                hooks: RunHooks::default(),
            },
        );
        self.after(method);
        reply
    }

    fn no_route(&self, method: &str, path: &str) -> Reply {
        let allowed = allowed_methods(path);
        if allowed.is_empty() {
            Reply::from(crate::surface::Error::not_found(format!(
                "no route {path:?} (GET /health, GET /status, ...; see `git forum serve --help`)"
            )))
        } else {
            Reply::error(
                405,
                format!(
                    "{path} does not answer {method}; it answers {}",
                    allowed.join(", ")
                ),
            )
        }
    }

    fn run(&self, handler: Handler<'_>, req: &Request<'_>) -> Reply {
        match std::panic::catch_unwind(AssertUnwindSafe(|| handler(self, req))) {
            Ok(Ok(body)) => Reply::ok(body),
            Ok(Err(reply)) => reply,
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown".into());
                eprintln!("git forum: internal error in a request handler: {what}");
                Reply::from(crate::surface::Error::internal(format!(
                    "internal error: {what}"
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests;
