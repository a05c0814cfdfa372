//! Executors: what calls a model, and the policy around it.
//!
//! Pure: the endpoint policy ([`endpoint`]) and the runtime config with its tier and seat
//! resolution ([`config`]). At the edge: [`command`] (the process handling of the command
//! executor), [`http`] (the SSRF-safe HTTP client with its vetting resolver), [`chat`]
//! (OpenAI-compatible chat completions) and [`anthropic`] (the Messages API). [`Fleet`] turns a
//! merged [`config::Runtime`] into the executors of one run: the orchestrator seat, the
//! worker seat (or each lane's tier) and the escalation ladder.
//!
//! Every executor answers one [`Call`] with a [`Reply`] that names the model that produced it,
//! or with an [`ExecError`] whose [`ExecError::code`] is stable enough to be witnessed.

pub mod anthropic;
pub mod chat;
pub mod command;
pub mod config;
pub mod endpoint;
pub mod http;
pub(crate) mod preset;
pub(crate) mod sandbox;
mod scripted;
pub mod tool_chat;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub use scripted::Scripted;

use crate::roster::{Roster, Tier};
pub(crate) use config::Metering;
use config::{ExecutorKind, ExecutorSpec, Runtime, Unresolved, Via};

/// A JSON schema the reply must follow (plans, verdicts).
#[derive(Debug, Clone, PartialEq)]
pub struct OutputSchema {
    /// A short name (`plan`, `verdict`), sent where the API wants one.
    pub name: String,
    /// The schema itself.
    pub schema: serde_json::Value,
}

/// One request to a model.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// Instructions that frame the conversation, if any.
    pub system: Option<&'a str>,
    /// The prompt.
    pub prompt: &'a str,
    /// Set when the caller wants structured output. Endpoints that support constrained
    /// decoding get the schema; commands get it in the prompt.
    pub schema: Option<&'a OutputSchema>,
    /// A cap on generated tokens, where the executor has one.
    pub max_tokens: Option<u32>,
}

impl<'a> Call<'a> {
    /// A plain prompt with no system text, schema or token cap.
    pub fn prompt(prompt: &'a str) -> Call<'a> {
        Call {
            system: None,
            prompt,
            schema: None,
            max_tokens: None,
        }
    }

    /// The whole request as one text, for executors that take a single prompt: the system
    /// text, the prompt, and the schema the answer must follow.
    pub(crate) fn flattened(&self) -> String {
        let mut out = String::new();
        if let Some(s) = self.system {
            out.push_str(s);
            out.push_str("\n\n");
        }
        out.push_str(self.prompt);
        if let Some(schema) = self.schema {
            out.push_str("\n\nAnswer with one JSON object and nothing else. It must match this JSON schema:\n");
            out.push_str(&schema.schema.to_string());
        }
        out
    }
}

/// Tokens counted by the endpoint (or, `estimated`, guessed from the bytes of a command's
/// prompt and output: four bytes a token).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Set when no provider counted these tokens (command workers).
    pub estimated: bool,
    /// Set when the output was cut at the call's output cap (a command worker under a spend
    /// ceiling), so these counts are of what was kept.
    pub truncated: bool,
    /// Set by the run's spend accounting when the call reported more than it reserved under a
    /// spend ceiling: the counts above are then what was charged (clamped to what the ceiling
    /// allowed), and this keeps what was reserved and what was reported.
    pub over_reservation: Option<OverReservation>,
}

/// A call that reported more usage than the reservation made for it under a spend ceiling
/// (a provider that ignored the output cap, an agent CLI that worked many turns): what was
/// reserved and what was reported. The run charges what the ceiling allows, records both,
/// and takes no more calls (a ceiling stop). See [`crate::spend`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OverReservation {
    /// Tokens the call reserved (its prompt's bound plus its output cap).
    pub reserved_tokens: u64,
    /// The reservation's cost, in pico-dollars (0 when unpriced).
    pub reserved_pico: u64,
    /// Prompt tokens the call reported.
    pub reported_input_tokens: u64,
    /// Completion tokens the call reported.
    pub reported_output_tokens: u64,
}

impl OverReservation {
    /// Tokens reported in all.
    pub fn reported_tokens(&self) -> u64 {
        self.reported_input_tokens
            .saturating_add(self.reported_output_tokens)
    }
}

/// A model's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The text (for structured calls: the JSON text).
    pub text: String,
    /// The model that produced it, as the endpoint reported it (else as configured).
    pub model: String,
    /// Token counts, where the endpoint reports them.
    pub usage: Option<Usage>,
    /// Wall time of the call.
    pub(crate) elapsed: Duration,
}

/// Why a call produced no answer. Messages never include a key's value.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The command executor failed (spawn, timeout, non-zero exit, non-UTF-8 output).
    #[error(transparent)]
    Command(#[from] command::CommandError),
    /// The endpoint policy refused the URL or every address it resolves to.
    #[error("refused: {0}")]
    Refused(String),
    /// The key variable is not set.
    #[error(
        "the key variable {var} is not set: export {var}=... (or name another variable with --api-key-env / api_key_env)"
    )]
    MissingKey { var: String },
    /// No connection could be made.
    #[error("cannot reach {url}: {reason}")]
    Connect { url: String, reason: String },
    /// The whole call took longer than its deadline.
    #[error("no complete answer from {url} within {}s", after.as_secs_f64())]
    Timeout { url: String, after: Duration },
    /// The endpoint answered with a status other than 2xx.
    #[error("{url} answered HTTP {status}{}", excerpt_suffix(excerpt))]
    Status {
        url: String,
        status: u16,
        excerpt: String,
    },
    /// The endpoint answered with a redirect, which is never followed.
    #[error(
        "{url} answered with a redirect (HTTP {status}) to {location:?}; redirects are not followed: configure the final URL"
    )]
    Redirect {
        url: String,
        status: u16,
        location: String,
    },
    /// The response body was larger than the cap.
    #[error("the answer from {url} is larger than {cap} bytes (max_response_bytes)")]
    TooLarge { url: String, cap: u64 },
    /// The body was not the JSON the API promises: why it did not parse, and the body itself
    /// (its first [`RawReply::CAP`] bytes), so a record can keep it and a replay parse it again.
    #[error("{url} answered with invalid JSON: {reason}")]
    InvalidJson {
        url: String,
        reason: String,
        reply: RawReply,
    },
    /// The JSON had no answer in it.
    #[error("{url} answered without {what}")]
    NoAnswer { url: String, what: &'static str },
    /// An agent CLI's output says its work was not done (recorded with code `other`, as
    /// before the failure had a type of its own).
    #[error(transparent)]
    Agent(#[from] preset::AgentFailure),
    /// Anything else (a scripted failure, a bug in a transport).
    #[error("{0}")]
    Other(String),
    /// The call's worst case did not fit in what is left of a spend ceiling; it never started.
    #[error("{0}")]
    Ceiling(String),
    /// A failure a strict replay gives back from the record: the class the run recorded
    /// (one of [`ExecError::REPLAYABLE`]), the message and the raw body it kept, word for
    /// word.
    #[error("{message}")]
    Recorded {
        /// The recorded class, as [`ExecError::code`] gave it.
        code: &'static str,
        /// The recorded message.
        message: String,
        /// The raw body the record kept, and whether it was kept cut short.
        body: Option<(String, bool)>,
        /// The HTTP status the record kept with it (an `http_status` or `redirect` failure).
        status: Option<u16>,
        /// Set when the body is the reply itself (a reply that was not JSON), to whether its
        /// bytes that were not UTF-8 were replaced.
        reply: Option<bool>,
    },
}

/// The start of a body an endpoint sent that was not the JSON its API promises, as text: at
/// most [`RawReply::CAP`] bytes, cut on a character boundary (`cut` when the body was
/// longer), bytes that are not UTF-8 replaced (`lossy`), so it is never the bytes themselves.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RawReply {
    pub text: String,
    pub cut: bool,
    pub lossy: bool,
}

impl RawReply {
    /// The most bytes of a body kept.
    pub const CAP: usize = 4096;

    /// What is kept of `body`.
    pub fn of(body: &[u8]) -> RawReply {
        let lossy = std::str::from_utf8(body).is_err();
        // A few bytes past the cap, so a character cut there still ends on a boundary.
        let head = &body[..body.len().min(Self::CAP + 4)];
        let mut text = String::from_utf8_lossy(head).into_owned();
        let mut end = text.len().min(Self::CAP);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        RawReply {
            text,
            cut: end < body.len(),
            lossy,
        }
    }
}

/// The JSON of a body an endpoint at `url` answered, or [`ExecError::InvalidJson`] with why it
/// did not parse and what it was. Every HTTP executor reads its answers through it, and a
/// strict replay parses a recorded body again with it.
pub fn json_reply(url: &str, body: &[u8]) -> Result<serde_json::Value, ExecError> {
    serde_json::from_slice(body).map_err(|e| ExecError::InvalidJson {
        url: url.to_string(),
        reason: e.to_string(),
        reply: RawReply::of(body),
    })
}

fn excerpt_suffix(s: &str) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!(": {s}")
    }
}

impl ExecError {
    /// A stable code for the ledger and for `--json` output.
    pub fn code(&self) -> &'static str {
        use command::CommandError as R;
        match self {
            ExecError::Command(R::Spawn { .. }) | ExecError::Command(R::Empty(_)) => "spawn",
            ExecError::Command(R::Timeout { .. }) => "timeout",
            ExecError::Command(R::Stalled { .. }) => "stalled",
            ExecError::Command(R::Failed { .. }) => "exit",
            ExecError::Command(R::NotUtf8 { .. }) => "not_utf8",
            ExecError::Command(R::Interrupted { .. }) => "interrupted",
            ExecError::Refused(_) => "refused",
            ExecError::MissingKey { .. } => "missing_key",
            ExecError::Connect { .. } => "connect",
            ExecError::Timeout { .. } => "timeout",
            ExecError::Status { .. } => "http_status",
            ExecError::Redirect { .. } => "redirect",
            ExecError::TooLarge { .. } => "too_large",
            ExecError::InvalidJson { .. } => "invalid_json",
            ExecError::NoAnswer { .. } => "no_answer",
            ExecError::Other(_) | ExecError::Agent(_) => "other",
            ExecError::Ceiling(_) => "ceiling",
            ExecError::Recorded { code, .. } => code,
        }
    }

    /// The classes of failure a strict replay can give back as they happened: every code but
    /// a spend ceiling's and an interruption's, which stop the run rather than fail a call.
    pub const REPLAYABLE: [&'static str; 14] = [
        "spawn",
        "timeout",
        "stalled",
        "exit",
        "not_utf8",
        "refused",
        "missing_key",
        "connect",
        "http_status",
        "redirect",
        "too_large",
        "invalid_json",
        "no_answer",
        "other",
    ];

    /// The failure of class `class` with `message` and the raw `body` kept of it (and
    /// whether that was cut short), as a replay gives it back; `None` for a class outside
    /// [`ExecError::REPLAYABLE`].
    pub fn recorded(class: &str, message: &str, body: Option<(&str, bool)>) -> Option<ExecError> {
        let code = Self::REPLAYABLE.iter().find(|c| **c == class)?;
        Some(ExecError::Recorded {
            code,
            message: message.to_string(),
            body: body.map(|(b, cut)| (b.to_string(), cut)),
            status: None,
            reply: None,
        })
    }

    /// A recorded failure whose body is the reply itself (see [`ExecError::raw_reply`]).
    pub fn with_reply(mut self, kept: Option<bool>) -> ExecError {
        if let ExecError::Recorded { reply, .. } = &mut self {
            *reply = kept;
        }
        self
    }

    /// Whether [`ExecError::raw_body`] is the reply itself (a reply that was not JSON, not
    /// why it did not parse), and if so whether its bytes that were not UTF-8 were replaced.
    pub fn raw_reply(&self) -> Option<bool> {
        match self {
            ExecError::InvalidJson { reply, .. } => Some(reply.lossy),
            ExecError::Recorded { reply, .. } => *reply,
            _ => None,
        }
    }

    /// A recorded failure (see [`ExecError::recorded`]) with the HTTP status the record kept.
    pub fn with_status(mut self, kept: Option<u16>) -> ExecError {
        if let ExecError::Recorded { status, .. } = &mut self {
            *status = kept;
        }
        self
    }

    /// The HTTP status the endpoint answered with, when the failure has one.
    pub fn status(&self) -> Option<u16> {
        match self {
            ExecError::Status { status, .. } | ExecError::Redirect { status, .. } => Some(*status),
            ExecError::Recorded { status, .. } => *status,
            _ => None,
        }
    }

    /// Whether [`ExecError::raw_body`] is already cut short (a body given back from a record
    /// that kept it cut).
    pub fn raw_body_cut(&self) -> bool {
        match self {
            ExecError::Recorded { body, .. } => matches!(body, Some((_, true))),
            ExecError::InvalidJson { reply, .. } => reply.cut,
            _ => false,
        }
    }

    /// What the other side sent with the failure, when it sent something: an endpoint's body
    /// (its excerpt) with a status, the body that was not JSON, a command's standard error.
    pub fn raw_body(&self) -> Option<&str> {
        match self {
            ExecError::Status { excerpt, .. } => Some(excerpt),
            ExecError::InvalidJson { reply, .. } => Some(&reply.text),
            ExecError::Command(command::CommandError::Failed { stderr, .. }) => Some(stderr),
            ExecError::Recorded { body, .. } => body.as_ref().map(|(b, _)| b.as_str()),
            _ => None,
        }
    }
}

/// Something that answers prompts. Implementations are blocking and thread-safe: the control
/// loop calls them from several threads at once.
pub trait Executor: Send + Sync {
    /// Asks the model once.
    fn call(&self, call: &Call<'_>) -> Result<Reply, ExecError>;
    /// The model this executor is configured for (what the ledger names before a call
    /// reports the real one, and on failures).
    fn model(&self) -> String;
    /// One line for people (never a key value).
    fn describe(&self) -> String;
    /// The tool conversation this executor can hold (chat endpoints), if any.
    fn tool_chat(&self) -> Option<&dyn tool_chat::ToolChat> {
        None
    }
    /// Its price and output cap, for the spend ceilings (none by default).
    fn metering(&self) -> config::Metering {
        config::Metering::default()
    }
    /// Whether its spend is metered while it runs (an agent CLI behind git forum's metering
    /// forwarder, which refuses past what is left of the ceilings), rather than bounded by
    /// one call's reservation.
    fn metered_live(&self) -> bool {
        false
    }
    /// The most prompt tokens `call` can be charged, which a call reserves before it starts:
    /// by default the bytes it sends (a byte-level tokenizer never makes more tokens than
    /// bytes; the model's own tokenizer is not at hand) with the chat framing. An executor
    /// that charges an estimate of its own overrides it with that estimate.
    fn prompt_tokens_bound(&self, call: &Call<'_>) -> u64 {
        bytes_bound(call)
    }
}

/// The bound any executor can give without its model's tokenizer: the bytes a call sends
/// (system, prompt and schema) as tokens, with the chat framing.
pub fn bytes_bound(call: &Call<'_>) -> u64 {
    crate::spend::prompt_tokens_upper_bound(
        call.system.map_or(0, str::len)
            + call.prompt.len()
            + call.schema.map_or(0, |s| s.schema.to_string().len()),
    )
}

/// The command executor: a program with the prompt as its last argument.
#[derive(Debug, Clone)]
pub struct CommandExecutor {
    argv: Vec<String>,
    model: String,
    describe: String,
    limits: command::Limits,
    metering: config::Metering,
    /// The variables its program is handed beyond the allowlist (`env = [...]`).
    env: Vec<String>,
}

impl CommandExecutor {
    /// A command executor for `argv` (program first).
    pub fn new(argv: Vec<String>, limits: command::Limits) -> CommandExecutor {
        let model = argv.first().cloned().unwrap_or_default();
        let describe = format!(
            "command: {}",
            shlex::try_join(argv.iter().map(|s| s.as_str())).unwrap_or_else(|_| argv.join(" "))
        );
        CommandExecutor {
            argv,
            model,
            describe,
            limits,
            metering: config::Metering::default(),
            env: Vec::new(),
        }
    }

    fn from_spec(spec: &ExecutorSpec, argv: &[String]) -> CommandExecutor {
        let cap = usize::try_from(spec.max_response_bytes).unwrap_or(usize::MAX);
        let mut e = CommandExecutor::new(
            argv.to_vec(),
            command::Limits {
                timeout: Duration::from_secs(spec.timeout_seconds),
                max_stdout: cap,
                max_stderr: 64 * 1024,
            },
        );
        e.model = spec.model().to_string();
        e.describe = spec.describe();
        e.metering = spec.metering;
        e.env = spec.passed_env();
        e
    }
}

impl Executor for CommandExecutor {
    /// A program reports no usage, so its call is charged the estimate of the text it is
    /// given ([`crate::spend::estimate_tokens`] of the flattened prompt, as [`Self::call`]
    /// counts it): that is all the call can spend on its prompt, and all it reserves.
    fn prompt_tokens_bound(&self, call: &Call<'_>) -> u64 {
        crate::spend::estimate_tokens(call.flattened().len())
    }

    fn call(&self, call: &Call<'_>) -> Result<Reply, ExecError> {
        let prompt = call.flattened();
        let ran = command::run_with(&self.argv, &prompt, self.limits, &self.env)?;
        let text = ran.stdout.trim().to_string();
        // A program reports no usage: estimate it from the bytes, marked as an estimate.
        let usage = Some(Usage {
            input_tokens: crate::spend::estimate_tokens(prompt.len()),
            output_tokens: crate::spend::estimate_tokens(text.len()),
            estimated: true,
            truncated: false,
            over_reservation: None,
        });
        Ok(Reply {
            text,
            model: self.model.clone(),
            usage,
            elapsed: ran.elapsed,
        })
    }

    fn metering(&self) -> config::Metering {
        self.metering
    }

    fn model(&self) -> String {
        self.model.clone()
    }

    fn describe(&self) -> String {
        self.describe.clone()
    }
}

/// Builds the executor a spec describes. Nothing is called and no key is read here.
pub fn build(spec: &ExecutorSpec) -> Result<Arc<dyn Executor>, ExecError> {
    Ok(match &spec.kind {
        ExecutorKind::Command {
            argv,
            preset: Some(p),
        } => {
            let model = argv
                .iter()
                .position(|a| a == "--model")
                .and_then(|i| argv.get(i + 1))
                .cloned();
            Arc::new(
                preset::PresetExecutor::new(
                    *p,
                    model,
                    Duration::from_secs(spec.timeout_seconds),
                    usize::try_from(spec.max_response_bytes).unwrap_or(usize::MAX),
                    spec.passed_env(),
                )
                .with_metering(spec.metering),
            )
        }
        ExecutorKind::Command { argv, .. } => Arc::new(CommandExecutor::from_spec(spec, argv)),
        ExecutorKind::Chat { .. } => Arc::new(chat::ChatExecutor::from_spec(spec)?),
        ExecutorKind::Anthropic { .. } => Arc::new(anthropic::AnthropicExecutor::from_spec(spec)?),
    })
}

/// Where a task's executor came from, for the record and for `runtime inspect`.
#[derive(Clone)]
pub(crate) struct Assigned {
    pub(crate) executor: Arc<dyn Executor>,
    pub(crate) via: Via,
}

impl std::fmt::Debug for Assigned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Assigned")
            .field("executor", &self.executor.describe())
            .field("via", &self.via)
            .finish()
    }
}

/// The executors of one run, built once from the merged runtime: the orchestrator seat for
/// the control roles, the worker seat (or each lane's tier) for tasks, and the ladder a failed
/// task climbs.
pub struct Fleet {
    runtime: Runtime,
    built: BTreeMap<String, Arc<dyn Executor>>,
    control: Assigned,
}

impl Fleet {
    /// Builds every executor the runtime may call. Fails when nothing is configured or a seat
    /// names an empty slot, before any model is called.
    pub(crate) fn new(runtime: Runtime) -> Result<Fleet, FleetError> {
        let mut built = BTreeMap::new();
        for (_, spec) in runtime.in_use() {
            Self::lookup(&mut built, &spec)?;
        }
        let (via, spec) = runtime.for_control().map_err(FleetError::Unresolved)?;
        let control = Assigned {
            executor: Self::lookup(&mut built, &spec)?,
            via,
        };
        Ok(Fleet {
            runtime,
            built,
            control,
        })
    }

    /// A fleet with given executors, for tests and embedders: `control` runs the orchestrator
    /// seat, `worker` every task, and `ladder` the escalation rungs.
    pub fn fixed(
        control: Arc<dyn Executor>,
        worker: Arc<dyn Executor>,
        ladder: Vec<Arc<dyn Executor>>,
    ) -> FixedFleet {
        FixedFleet {
            control,
            worker,
            ladder,
        }
    }

    fn lookup(
        built: &mut BTreeMap<String, Arc<dyn Executor>>,
        spec: &ExecutorSpec,
    ) -> Result<Arc<dyn Executor>, FleetError> {
        let key = format!("{spec:?}");
        if let Some(e) = built.get(&key) {
            return Ok(e.clone());
        }
        let e = build(spec).map_err(FleetError::Build)?;
        built.insert(key, e.clone());
        Ok(e)
    }
}

/// A fleet of fixed executors (see [`Fleet::fixed`]).
pub struct FixedFleet {
    control: Arc<dyn Executor>,
    worker: Arc<dyn Executor>,
    ladder: Vec<Arc<dyn Executor>>,
}

/// What the control loop asks of a fleet.
pub trait Seats: Send + Sync {
    /// The orchestrator seat: plans, validates, synthesizes, judges.
    fn orchestrator(&self) -> Arc<dyn Executor>;
    /// The worker seat for a task routed to `agent`.
    fn worker(&self, roster: &Roster, agent: &str) -> Arc<dyn Executor>;
    /// The executors a failed task of `agent` climbs, strongest last, excluding the one that
    /// already ran it.
    fn ladder(&self, roster: &Roster, agent: &str) -> Vec<Arc<dyn Executor>>;
    /// The same rungs as [`Seats::ladder`], each with the tier it serves when the fleet is
    /// built from tiers (`None` for fixed executors, whose rungs have no tier).
    fn tiered_ladder(
        &self,
        roster: &Roster,
        agent: &str,
    ) -> Vec<(Option<Tier>, Arc<dyn Executor>)> {
        self.ladder(roster, agent)
            .into_iter()
            .map(|e| (None, e))
            .collect()
    }
    /// The executor of the slot named `slot` (`default`, `cheap`, `capable`, `frontier`), for
    /// the attempts `[work] attempts` spreads over slots; `None` when the slot has none.
    fn slot(&self, slot: &str) -> Option<Arc<dyn Executor>> {
        let _ = slot;
        None
    }
}

/// The rungs of a tiered ladder without their tiers: [`Seats::ladder`] of a fleet that builds
/// its ladder with tiers.
pub(crate) fn untiered(rungs: Vec<(Option<Tier>, Arc<dyn Executor>)>) -> Vec<Arc<dyn Executor>> {
    rungs.into_iter().map(|(_, e)| e).collect()
}

impl Seats for FixedFleet {
    fn orchestrator(&self) -> Arc<dyn Executor> {
        self.control.clone()
    }

    fn worker(&self, _: &Roster, _: &str) -> Arc<dyn Executor> {
        self.worker.clone()
    }

    fn ladder(&self, _: &Roster, _: &str) -> Vec<Arc<dyn Executor>> {
        self.ladder.clone()
    }
}

impl Seats for Fleet {
    fn orchestrator(&self) -> Arc<dyn Executor> {
        self.control.executor.clone()
    }

    fn worker(&self, roster: &Roster, agent: &str) -> Arc<dyn Executor> {
        match self.runtime.for_task(roster, agent) {
            Ok((_, spec)) => self
                .built
                .get(&format!("{spec:?}"))
                .cloned()
                .unwrap_or_else(|| self.control.executor.clone()),
            // Fleet::new proved the control seat resolves, and for_task falls back the same
            // way; an unresolved worker seat was refused there too.
            Err(_) => self.control.executor.clone(),
        }
    }

    fn slot(&self, slot: &str) -> Option<Arc<dyn Executor>> {
        let (_, spec) = self.runtime.slot(config::Slot::parse(slot)?)?;
        self.built.get(&format!("{spec:?}")).cloned()
    }

    fn ladder(&self, roster: &Roster, agent: &str) -> Vec<Arc<dyn Executor>> {
        crate::exec::untiered(self.tiered_ladder(roster, agent))
    }

    fn tiered_ladder(
        &self,
        roster: &Roster,
        agent: &str,
    ) -> Vec<(Option<Tier>, Arc<dyn Executor>)> {
        let start = roster.get(agent).map_or(Tier::Cheap, |a| a.model_tier);
        let first = self.worker(roster, agent).describe();
        let mut seen = vec![first];
        let mut out = Vec::new();
        for tier in [Tier::Cheap, Tier::Capable, Tier::Frontier] {
            if tier <= start {
                continue;
            }
            if let Some(spec) = self.runtime.tiers.get(&tier)
                && let Some(e) = self.built.get(&format!("{spec:?}"))
                && !seen.contains(&e.describe())
            {
                seen.push(e.describe());
                out.push((Some(tier), e.clone()));
            }
        }
        out
    }
}

/// Why a fleet could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FleetError {
    #[error("{0}")]
    Unresolved(Unresolved),
    #[error("{0}")]
    Build(ExecError),
}
