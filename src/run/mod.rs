//! The control loop behind `git forum submit`: route, request context, plan, parallel waves
//! (with per-task context), validation, escalation, synthesis and the quality ladder (delivery
//! floor and reviser, delivery profile, intent floor and judge, verifier), every step witnessed
//! in the ledger.
//!
//! The loop talks to the world through four seams, so tests drive it exactly: a
//! [`Storage`] (the git ledger, or memory), the [`Seats`] (which executor plans, validates,
//! synthesizes, revises and judges, and which runs each task), a [`Clock`] (timestamps and the
//! seconds budget) and a [`Progress`] sink for a person watching; and two optional ones in
//! [`Options`]: a [`ContextProvider`] ([`CommandContext`], [`LedgerContext`]) and a
//! [`Verifier`] ([`CommandVerifier`]). Every model call, the judge's and the reviser's included,
//! counts against the run budget.
//!
//! # What a run writes
//!
//! Entry kinds, actors, payload fields and causal parents follow Forum's (forum-features §4),
//! so Forum's readers and ours agree on a run. Where this loop knows more, it adds fields
//! Forum's readers ignore:
//!
//! * `plan` carries `tasks` (id, agent, instruction, depends_on, order_deps, done_when) so a
//!   resumed run continues the same plan instead of asking the planner again;
//! * `result` carries `error` (a stable code: `timeout`, `exit`, `not_utf8`, `http_status`, ...)
//!   when the executor failed;
//! * `verdict` carries `decision` (`pass`, `block`, `escalate`, `fail`, `undetermined`) and
//!   the `model` of the validator;
//! * a `context` entry whose provider failed has an empty `context`, an `error` code and a
//!   `reason` (the run went on without that context);
//! * kinds of our own: `run_stopped` (planning or synthesis failed; the reason is readable),
//!   `degraded` (no task of a wave passed validation).
//!
//! Gates are keyed by the run's own first plan entry, so a decision never leaks into another
//! run (Forum keys them by the first plan of the whole ledger, forum-spec §23.1).

pub mod status;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value as J, json};

use crate::context::{self, ContextBudget, Meter, Source};
use crate::exec::{Call, ExecError, Executor, OutputSchema, Reply, Seats, command};
use crate::ledger::canonical::Value;
use crate::ledger::merkle::Accumulator;
use crate::ledger::{Entry, NewEntry, Storage, StorageError};
use crate::plan::{
    self, CompiledPlan, ParseMode, Plan, Task, UpstreamResult, augment_with_upstream,
    augment_with_upstream_budgeted,
};
use crate::policy::Policy;
use crate::roster::Roster;
use crate::route::{self, RouteFrame};

/// Upstream output longer than this many code points is cut before it reaches a prompt
/// (without a context budget), as in Forum.
pub const MAX_UPSTREAM_CHARS: usize = 8192;

/// The most tasks a planner is asked for unless the policy's `max_tasks` says otherwise.
pub const DEFAULT_PLAN_TASKS: usize = 4;

/// The answer witnessed when the budget stops a run.
pub const BUDGET_STOP_ANSWER: &str =
    "The run stopped because its budget ran out before it finished.";

/// Timestamps and elapsed seconds.
pub trait Clock: Send + Sync {
    /// Seconds since 1970, for entry timestamps.
    fn now(&self) -> f64;
    /// Seconds since the run started, for `--max-seconds` (monotonic).
    fn elapsed(&self) -> f64;
}

/// The system clock.
pub struct SystemClock {
    start: Instant,
}

impl SystemClock {
    /// A clock started now.
    pub fn new() -> SystemClock {
        SystemClock {
            start: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> SystemClock {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> f64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    }

    fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }
}

/// A clock for reproducible runs: every timestamp read advances by `step` from `start`;
/// elapsed time is whatever the test sets.
pub struct StepClock {
    next: Mutex<f64>,
    step: f64,
    elapsed: Mutex<f64>,
}

impl StepClock {
    /// A clock whose first timestamp is `start` and each next one `step` later.
    pub fn new(start: f64, step: f64) -> StepClock {
        StepClock {
            next: Mutex::new(start),
            step,
            elapsed: Mutex::new(0.0),
        }
    }

    /// Sets what [`Clock::elapsed`] answers.
    pub fn set_elapsed(&self, seconds: f64) {
        *lock(&self.elapsed) = seconds;
    }
}

impl Clock for StepClock {
    fn now(&self) -> f64 {
        let mut n = lock(&self.next);
        let t = *n;
        *n += self.step;
        t
    }

    fn elapsed(&self) -> f64 {
        *lock(&self.elapsed)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Human approval before waves.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GatePolicy {
    /// Waves (0-based) that wait for a decision before they run.
    pub waves: BTreeSet<usize>,
    /// The question shown to the approver.
    pub question: Option<String>,
    /// Seconds a pending gate waits before `on_expiry` applies (checked on resume).
    pub deadline_seconds: Option<f64>,
    /// What an expired gate becomes: `approve` or `reject` (default).
    pub on_expiry: Option<String>,
}

/// Tells a run that its process is being interrupted (a signal): from then on it starts no
/// model call and writes no entry of its own, and it ends by witnessing `interrupted`.
#[derive(Debug, Default)]
pub struct Interrupt {
    signal: Mutex<Option<String>>,
}

impl Interrupt {
    /// A flag not raised yet.
    pub fn new() -> Interrupt {
        Interrupt::default()
    }

    /// Raises the flag with the signal's name (`SIGINT`, `SIGTERM`); the first one is kept.
    pub fn raise(&self, signal: &str) {
        lock(&self.signal).get_or_insert_with(|| signal.to_string());
    }

    /// The signal, once raised.
    pub fn signal(&self) -> Option<String> {
        lock(&self.signal).clone()
    }
}

impl GatePolicy {
    /// What the run's `request` entry records of this policy (its `gates` field), so every
    /// later resume holds the same gates: `{waves, question?, deadline_seconds?, on_expiry?}`.
    /// `None` when no wave is gated (the request is then exactly Forum's `{text}`).
    pub fn record(&self) -> Option<J> {
        if self.waves.is_empty() {
            return None;
        }
        let mut g = json!({ "waves": self.waves.iter().collect::<Vec<_>>() });
        if let Some(q) = &self.question {
            g["question"] = json!(q);
        }
        if let Some(secs) = self.deadline_seconds {
            g["deadline_seconds"] = json!(secs);
            g["on_expiry"] = json!(self.on_expiry.clone().unwrap_or_else(|| "reject".into()));
        }
        Some(g)
    }

    /// Reads back what [`GatePolicy::record`] wrote (an absent or unreadable record gates no
    /// wave).
    pub fn from_record(g: Option<&J>) -> GatePolicy {
        let Some(g) = g else {
            return GatePolicy::default();
        };
        GatePolicy {
            waves: g
                .get("waves")
                .and_then(J::as_array)
                .map(|a| a.iter().filter_map(J::as_u64).map(|w| w as usize).collect())
                .unwrap_or_default(),
            question: g.get("question").and_then(J::as_str).map(str::to_string),
            deadline_seconds: g.get("deadline_seconds").and_then(J::as_f64),
            on_expiry: g.get("on_expiry").and_then(J::as_str).map(str::to_string),
        }
    }
}

/// How one run behaves.
#[derive(Clone, Default)]
pub struct Options {
    /// Stop once this many model calls have started.
    pub max_model_calls: Option<u64>,
    /// Stop once this many seconds have passed.
    pub max_seconds: Option<f64>,
    /// Token limits on what reaches prompts.
    pub context_budget: Option<ContextBudget>,
    /// What may run, and how many tasks at once.
    pub policy: Policy,
    /// Witness a checkpoint (and sync) after each wave.
    pub checkpoint_each_wave: bool,
    /// The delivery profile to check the answer against (default: the route frame's).
    pub delivery_profile: Option<String>,
    /// Human approval before waves.
    pub gates: GatePolicy,
    /// A cap on the tokens each free-text model call (tasks, synthesis, revision) may generate,
    /// where the executor has one; `None` keeps each role's default. Structured calls (plan,
    /// verdicts, the intent judge) keep their own limits: cutting them short breaks their JSON.
    pub max_output_tokens: Option<u32>,
    /// When the intent check flags the answer (and the budget allows), ask the orchestrator
    /// seat whether it drifted or paraphrased, witnessed as `intent_judgment`.
    pub judge_intent: bool,
    /// When the delivery floor flags the answer (and the budget allows), ask the orchestrator
    /// seat for a tighter version, accepted only if it is strictly shorter and covers the
    /// request as well (`revision`, and the revised `result` when accepted).
    pub revise: bool,
    /// Checks the delivered answer after the floors, witnessed as `verification`.
    pub verifier: Option<Arc<dyn Verifier>>,
    /// Supplies request context before planning and context per task, witnessed as
    /// `context`.
    pub context: Option<Arc<dyn ContextProvider>>,
    /// Raised when the process is interrupted: the run stops and witnesses `interrupted`.
    pub interrupt: Option<Arc<Interrupt>>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("max_model_calls", &self.max_model_calls)
            .field("max_seconds", &self.max_seconds)
            .field("context_budget", &self.context_budget)
            .field("policy", &self.policy)
            .field("checkpoint_each_wave", &self.checkpoint_each_wave)
            .field("delivery_profile", &self.delivery_profile)
            .field("gates", &self.gates)
            .field("max_output_tokens", &self.max_output_tokens)
            .field("judge_intent", &self.judge_intent)
            .field("revise", &self.revise)
            .field("verifier", &self.verifier.as_ref().map(|v| v.source()))
            .field("context", &self.context.as_ref().map(|c| c.describe()))
            .field("interrupt", &self.interrupt)
            .finish()
    }
}

/// What a person watching is told. Sent from several threads.
#[derive(Debug, Clone)]
pub enum Event {
    /// The planner is being asked.
    Planning,
    /// A plan was compiled.
    Planned {
        /// How many tasks.
        tasks: usize,
        /// How many waves.
        waves: usize,
    },
    /// A wave starts.
    Wave {
        /// 0-based.
        index: usize,
        /// How many waves there are.
        of: usize,
        /// Its task ids.
        tasks: Vec<String>,
    },
    /// A task was handed to an executor.
    TaskStarted {
        /// The task id.
        id: String,
        /// Its roster lane.
        agent: String,
        /// The executor's model.
        model: String,
    },
    /// A task's result is in.
    TaskFinished {
        /// The task id.
        id: String,
        /// Whether the executor answered.
        ok: bool,
        /// The model that answered (or was asked).
        model: String,
    },
    /// A result is being validated.
    Validating {
        /// The task id.
        id: String,
    },
    /// A validator ruled.
    Verdict {
        /// The task id.
        id: String,
        /// `pass`, `block`, `escalate`, `fail` or `undetermined`.
        decision: String,
    },
    /// A failed task climbs to a stronger executor.
    Escalating {
        /// The task id.
        id: String,
        /// The stronger executor's model.
        to: String,
    },
    /// The answer is being synthesized.
    Synthesizing,
    /// A model call started.
    Calls {
        /// Calls started so far.
        spent: u64,
        /// The budget, if any.
        max: Option<u64>,
    },
    /// The run waits for a gate decision.
    Paused {
        /// The gated wave (0-based).
        wave: usize,
    },
    /// The run stopped (budget, or a failed stage).
    Stopped {
        /// Why.
        reason: String,
    },
    /// Context is being read: the request's (`task: None`) or one task's.
    Context {
        /// The task, or `None` for the request.
        task: Option<String>,
    },
    /// A context provider failed; the run goes on without that context.
    ContextFailed {
        /// The task, or `None` for the request.
        task: Option<String>,
        /// What failed.
        reason: String,
    },
    /// The reviser is tightening a flagged answer.
    Revising,
    /// The intent judge is ruling on a flagged answer.
    Judging,
    /// The verifier is checking the delivered answer.
    Verifying,
    /// An opted-in step did not run (`step`: `reviser`, `intent judge`).
    Skipped {
        /// Which step.
        step: String,
        /// Why.
        reason: String,
    },
}

/// Where [`Event`]s go.
pub trait Progress: Send + Sync {
    /// Receives one event (from any thread).
    fn event(&self, event: &Event);
}

/// Says nothing.
pub struct Silent;

impl Progress for Silent {
    fn event(&self, _: &Event) {}
}

/// How a run ended (this time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// An answer was synthesized and checked.
    Answered,
    /// The budget ran out; `git forum resume` continues with a fresh budget.
    StoppedOnBudget,
    /// A gate waits for a decision (`git forum gate`), then `git forum resume`.
    Paused {
        /// The gated wave (0-based).
        wave: usize,
    },
    /// A gate was rejected; the run is over.
    Rejected {
        /// The gated wave (0-based).
        wave: usize,
    },
}

impl Status {
    /// A stable name: `answered`, `stopped_on_budget`, `paused`, `rejected`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Answered => "answered",
            Status::StoppedOnBudget => "stopped_on_budget",
            Status::Paused { .. } => "paused",
            Status::Rejected { .. } => "rejected",
        }
    }
}

/// The result of one `submit` or `resume`.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// How the run ended this time.
    pub status: Status,
    /// The seq of the run's `request` entry (the run's id).
    pub request_seq: u64,
    /// The answer, when there is one.
    pub answer: Option<String>,
    /// The seq of the delivered answer (a revised answer's own seq when a revision was accepted).
    pub answer_seq: Option<u64>,
    /// Every entry this invocation wrote, in seq order.
    pub written: Vec<u64>,
    /// Model calls started, per model id.
    pub calls: BTreeMap<String, u64>,
    /// Final verdict decisions, counted.
    pub verdicts: BTreeMap<String, u64>,
    /// The route frame payload.
    pub route_frame: Value,
}

impl Outcome {
    /// Every model call started.
    pub fn total_calls(&self) -> u64 {
        self.calls.values().sum()
    }
}

/// Why a run could not go on. Whatever was witnessed before stays in the ledger and verifies.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The request is empty or unusable; nothing was written.
    #[error("{0}")]
    Request(String),
    /// The ledger refused a write or a read.
    #[error("ledger: {0}")]
    Ledger(#[from] StorageError),
    /// The planner gave no usable plan (witnessed as `run_stopped`).
    #[error("planning failed: {0}")]
    Plan(String),
    /// Synthesis failed (witnessed as `run_stopped`).
    #[error("synthesis failed: {0}")]
    Synthesis(String),
    /// Nothing to resume, or the run cannot be resumed.
    #[error("{0}")]
    Resume(String),
    /// The process was interrupted (`signal`): the run's commands were killed, nothing more
    /// was written but the `interrupted` entry (`witnessed`, when the run had started).
    #[error("interrupted by {signal}")]
    Interrupted {
        /// `SIGINT` or `SIGTERM`.
        signal: String,
        /// The `interrupted` entry.
        witnessed: Option<u64>,
        /// The run (its request seq), when it had started.
        request_seq: Option<u64>,
    },
    /// The run waits for a decision on a gate it was submitted with: nothing was run or
    /// written.
    #[error("run {request_seq} waits for a decision on the gate before wave {wave}")]
    Gated {
        /// The run (its request seq).
        request_seq: u64,
        /// The gate's key: the run's first plan entry.
        run_seq: u64,
        /// The gated wave (0-based).
        wave: usize,
    },
}

// ---- seams: context providers and verifiers ----

/// Why a context provider gave no context. The run witnesses it and goes on without.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextFailure {
    /// A stable code: `spawn`, `timeout`, `exit`, `not_utf8`, `panic`, or a provider's own.
    pub code: String,
    /// What happened, for people.
    pub message: String,
}

/// Where context comes from: once for the request, before planning, and (optionally) fresh
/// for each task before it runs. A panic in a provider is caught and witnessed as a failure.
pub trait ContextProvider: Send + Sync {
    /// Context for the whole request. `ledger` is the run's ledger as it stands: the request
    /// and its route frame are already witnessed. An empty text means no context.
    fn request_context(
        &self,
        request: &str,
        ledger: &dyn Storage,
    ) -> Result<String, ContextFailure>;
    /// Context for one task (by id and its plan instruction), or `None` when this provider
    /// has nothing per task.
    fn task_context(
        &self,
        task_id: &str,
        instruction: &str,
    ) -> Option<Result<String, ContextFailure>>;
    /// One line for people.
    fn describe(&self) -> String;
}

/// Bytes of a context command's stdout kept (the rest is drained and dropped).
pub const MAX_CONTEXT_COMMAND_BYTES: usize = 4 * 1024 * 1024;

/// Bytes of a verifier command's stdout kept.
pub const MAX_VERIFIER_COMMAND_BYTES: usize = 64 * 1024;

/// Code points of a verifier's detail kept in the ledger.
pub const MAX_VERIFICATION_DETAIL_CHARS: usize = 1000;

/// Per-task context longer than this many code points is cut (without a context budget), as
/// in Forum.
pub const MAX_TASK_CONTEXT_CHARS: usize = 8192;

/// The marker after per-task context cut to [`MAX_TASK_CONTEXT_CHARS`] (the full context is
/// not witnessed, so it does not say so).
pub const TASK_CONTEXT_CUT_MARKER: &str = "\n... [truncated for prompt efficiency]";

/// The default deadline of a context or verifier command.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// The context provider behind `--context-cmd`: a program run without a shell, in its own
/// process group, killed with the group at its deadline.
///
/// * request context: `CMD... request REQUEST`
/// * per-task context: `CMD... task TASK_ID INSTRUCTION`
///
/// What it prints on stdout (UTF-8, surrounding whitespace trimmed) is the context; nothing
/// means no context. A non-zero exit, a timeout, a program that cannot start or output that
/// is not UTF-8 is a [`ContextFailure`].
#[derive(Debug, Clone)]
pub struct CommandContext {
    argv: Vec<String>,
    timeout: Duration,
}

impl CommandContext {
    /// A provider running `argv` (program first), each run bounded by `timeout`.
    pub fn new(argv: Vec<String>, timeout: Duration) -> CommandContext {
        CommandContext { argv, timeout }
    }

    fn run(&self, extra: &[&str], last: &str) -> Result<String, ContextFailure> {
        let mut argv = self.argv.clone();
        argv.extend(extra.iter().map(|s| s.to_string()));
        let limits = command::Limits {
            timeout: self.timeout,
            max_stdout: MAX_CONTEXT_COMMAND_BYTES,
            ..command::Limits::default()
        };
        match command::run(&argv, last, limits) {
            Ok(ran) => Ok(ran.stdout.trim().to_string()),
            Err(e) => {
                let message = e.to_string();
                Err(ContextFailure {
                    code: ExecError::Command(e).code().to_string(),
                    message,
                })
            }
        }
    }
}

impl ContextProvider for CommandContext {
    fn request_context(&self, request: &str, _: &dyn Storage) -> Result<String, ContextFailure> {
        self.run(&["request"], request)
    }

    fn task_context(
        &self,
        task_id: &str,
        instruction: &str,
    ) -> Option<Result<String, ContextFailure>> {
        Some(self.run(&["task", task_id], instruction))
    }

    fn describe(&self) -> String {
        format!("command: {}", command_line(&self.argv))
    }
}

type Render = dyn Fn(&dyn Storage) -> Result<String, String> + Send + Sync;

/// Request context rendered from the run's own ledger (for `--use-capsule-context`: the
/// ledger's capsule text). It has no per-task context.
pub struct LedgerContext {
    name: String,
    render: Box<Render>,
}

impl LedgerContext {
    /// A provider named `name` whose request context is `render(ledger)`; an `Err` is
    /// witnessed as a failure with code `render`.
    pub fn new(
        name: &str,
        render: impl Fn(&dyn Storage) -> Result<String, String> + Send + Sync + 'static,
    ) -> LedgerContext {
        LedgerContext {
            name: name.to_string(),
            render: Box::new(render),
        }
    }
}

impl ContextProvider for LedgerContext {
    fn request_context(&self, _: &str, ledger: &dyn Storage) -> Result<String, ContextFailure> {
        (self.render)(ledger).map_err(|message| ContextFailure {
            code: "render".into(),
            message,
        })
    }

    fn task_context(&self, _: &str, _: &str) -> Option<Result<String, ContextFailure>> {
        None
    }

    fn describe(&self) -> String {
        self.name.clone()
    }
}

/// What a verifier concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// The answer holds (`ok: true`).
    Verified,
    /// The answer is wrong (`ok: false`).
    Refuted,
    /// The verifier could not decide (`ok: null`): it erred, hung, crashed or answered
    /// something unreadable.
    Undecided,
}

/// A verifier's verdict on the delivered answer, witnessed as `verification {ok, detail,
/// source}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// Verified, refuted or undecided.
    pub outcome: Checked,
    /// Why, for people.
    pub detail: String,
    /// Which verifier.
    pub source: String,
}

impl Verification {
    /// The `verification` payload: `{"ok": true|false|null, "detail", "source"}`.
    pub fn payload(&self) -> Value {
        let ok = match self.outcome {
            Checked::Verified => Value::Bool(true),
            Checked::Refuted => Value::Bool(false),
            Checked::Undecided => Value::Null,
        };
        Value::object([
            ("ok".to_string(), ok),
            ("detail".to_string(), Value::str(&self.detail)),
            ("source".to_string(), Value::str(&self.source)),
        ])
    }
}

/// Checks a delivered answer after the deterministic floors. A verifier never sinks a run:
/// whatever it returns is witnessed, and a panic is caught and witnessed as
/// [`Checked::Undecided`].
pub trait Verifier: Send + Sync {
    /// Checks `answer` to `request`.
    fn verify(&self, request: &str, answer: &str) -> Verification;
    /// Names the verifier (the `source` of a verdict it could not give).
    fn source(&self) -> String;
}

/// The verifier behind `--verify-cmd`: a program run without a shell, in its own process
/// group, as `CMD... REQUEST ANSWER` (the answer is the last argument, the request the one
/// before it). Exit 0 is verified, exit 1 refuted; any other exit, a signal, a timeout, a
/// program that cannot start or stdout that is not UTF-8 is could-not-decide. The detail is
/// what it printed: stdout on exit 0, stderr on exit 1 (cut to
/// [`MAX_VERIFICATION_DETAIL_CHARS`]).
#[derive(Debug, Clone)]
pub struct CommandVerifier {
    argv: Vec<String>,
    timeout: Duration,
}

impl CommandVerifier {
    /// A verifier running `argv` (program first), bounded by `timeout`.
    pub fn new(argv: Vec<String>, timeout: Duration) -> CommandVerifier {
        CommandVerifier { argv, timeout }
    }
}

impl Verifier for CommandVerifier {
    fn verify(&self, request: &str, answer: &str) -> Verification {
        let mut argv = self.argv.clone();
        argv.push(request.to_string());
        let limits = command::Limits {
            timeout: self.timeout,
            max_stdout: MAX_VERIFIER_COMMAND_BYTES,
            ..command::Limits::default()
        };
        let (outcome, detail) = match command::run(&argv, answer, limits) {
            Ok(ran) => {
                let said = ran.stdout.trim();
                (
                    Checked::Verified,
                    if said.is_empty() {
                        "the verifier exited 0".to_string()
                    } else {
                        said.to_string()
                    },
                )
            }
            Err(command::RunError::Failed { status, stderr, .. }) if status.code() == Some(1) => {
                let said = stderr.trim();
                (
                    Checked::Refuted,
                    if said.is_empty() {
                        "the verifier exited 1".to_string()
                    } else {
                        said.to_string()
                    },
                )
            }
            Err(e) => (Checked::Undecided, format!("could not decide: {e}")),
        };
        Verification {
            outcome,
            detail: cut_chars(&detail, MAX_VERIFICATION_DETAIL_CHARS),
            source: self.source(),
        }
    }

    fn source(&self) -> String {
        format!("command: {}", command_line(&self.argv))
    }
}

fn command_line(argv: &[String]) -> String {
    shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_else(|_| argv.join(" "))
}

/// The first `n` code points of `text`, with `…` when it was longer.
fn cut_chars(text: &str, n: usize) -> String {
    match text.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// Per-task context without a budget: at most [`MAX_TASK_CONTEXT_CHARS`] code points, then
/// [`TASK_CONTEXT_CUT_MARKER`] (forum-spec §9).
pub fn cap_task_context(text: &str) -> String {
    match text.char_indices().nth(MAX_TASK_CONTEXT_CHARS) {
        Some((i, _)) => format!("{}{TASK_CONTEXT_CUT_MARKER}", &text[..i]),
        None => text.to_string(),
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into())
}

// ---- schemas ----

/// The schema a planner's answer must follow. Task `i` has the fixed id `T{i+1}` and may only
/// depend on earlier ids, so a model held to this schema (constrained decoding) cannot write
/// an unknown dependency, a duplicate id or a cycle; agents must be roster lanes.
pub fn plan_schema(roster: &Roster, max_tasks: usize) -> OutputSchema {
    let agents: Vec<&str> = roster.agents().iter().map(|a| a.name.as_str()).collect();
    let task = |i: usize| {
        let earlier: Vec<String> = (1..=i).map(|j| format!("T{j}")).collect();
        let depends_on = if earlier.is_empty() {
            json!({"type": "array", "maxItems": 0})
        } else {
            json!({"type": "array", "items": {"type": "string", "enum": earlier}, "maxItems": i})
        };
        json!({
            "type": "object",
            "properties": {
                "id": {"const": format!("T{}", i + 1)},
                "agent": {"enum": agents},
                "instruction": {"type": "string", "minLength": 1, "maxLength": 400},
                "depends_on": depends_on,
                "done_when": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1, "maxLength": 200},
                    "maxItems": 3
                }
            },
            "required": ["id", "agent", "instruction", "depends_on", "done_when"],
            "additionalProperties": false
        })
    };
    OutputSchema {
        name: "plan".into(),
        schema: json!({
            "type": "object",
            "properties": {
                "tasks": {
                    "type": "array",
                    "prefixItems": (0..max_tasks).map(task).collect::<Vec<_>>(),
                    "minItems": 1,
                    "maxItems": max_tasks
                }
            },
            "required": ["tasks"],
            "additionalProperties": false
        }),
    }
}

/// The schema a validator's answer must follow.
pub fn verdict_schema() -> OutputSchema {
    OutputSchema {
        name: "verdict".into(),
        schema: json!({
            "type": "object",
            "properties": {
                "decision": {"type": "string", "enum": ["pass", "block", "escalate"]},
                "score": {"type": "number"},
                "reason": {"type": "string"}
            },
            "required": ["decision", "score", "reason"],
            "additionalProperties": false
        }),
    }
}

/// A validator's ruling on one result.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// `pass`, `block`, `escalate`, `fail` (the task itself failed) or `undetermined` (the
    /// validator erred or answered nonsense).
    pub decision: String,
    /// The validator's score (0 when none was given).
    pub score: f64,
    /// Why, in the validator's words (or ours when it could not rule).
    pub reason: String,
    /// The validator's model, when one was asked.
    pub model: Option<String>,
}

impl Verdict {
    /// Whether the result was accepted.
    pub fn passed(&self) -> bool {
        self.decision == "pass"
    }

    /// Whether the escalation ladder should try a stronger executor.
    pub fn climbs(&self) -> bool {
        matches!(self.decision.as_str(), "escalate" | "fail")
    }

    fn payload(&self, id: &str) -> J {
        let mut p = json!({
            "id": id,
            "ok": self.passed(),
            "score": self.score,
            "reason": self.reason,
            "decision": self.decision,
        });
        if let Some(m) = &self.model {
            p["model"] = json!(m);
        }
        p
    }
}

/// Reads a validator's answer: `decision` (pass, block, escalate) or Forum's `ok`; `score`
/// (a number, default 0.0); `reason`. Anything else is `None` (undetermined).
pub fn parse_verdict(text: &str) -> Option<(String, f64, String)> {
    let span = plan::extract_json_object(text).ok()?;
    let doc: J = serde_json::from_str(span).ok()?;
    let obj = doc.as_object()?;
    let decision = match obj.get("decision").and_then(J::as_str) {
        Some(d) => {
            let d = d.trim().to_lowercase();
            match d.as_str() {
                "pass" | "block" | "escalate" => d,
                _ => return None,
            }
        }
        None => match obj.get("ok")? {
            J::Bool(true) => "pass".into(),
            J::Bool(false) => "escalate".into(),
            J::String(s) => {
                let s = s.trim().to_lowercase();
                if matches!(s.as_str(), "false" | "0" | "no" | "") {
                    "escalate".into()
                } else {
                    "pass".into()
                }
            }
            J::Number(n) => {
                if n.as_f64() == Some(0.0) {
                    "escalate".into()
                } else {
                    "pass".into()
                }
            }
            _ => return None,
        },
    };
    let score = match obj.get("score") {
        None | Some(J::Null) => 0.0,
        Some(J::Number(n)) => n.as_f64().filter(|f| f.is_finite())?,
        Some(_) => return None,
    };
    let reason = match obj.get("reason") {
        Some(J::String(s)) => s.clone(),
        None | Some(J::Null) => String::new(),
        Some(other) => other.to_string(),
    };
    Some((decision, score, reason))
}

/// The schema an intent judge's answer must follow.
pub fn judgment_schema() -> OutputSchema {
    OutputSchema {
        name: "intent_judgment".into(),
        schema: json!({
            "type": "object",
            "properties": {
                "ok": {"type": "boolean"},
                "score": {"type": "number"},
                "reason": {"type": "string"}
            },
            "required": ["ok", "score", "reason"],
            "additionalProperties": false
        }),
    }
}

/// Reads an intent judge's answer: `ok` (a bool, or a string or number where `false`, `0`,
/// `no` and the empty string mean false, as Forum reads it; a missing or null `ok` is no
/// ruling), `score` (a number or numeric text, default 0.0) and `reason`. The error says what
/// was wrong.
pub fn parse_judgment(text: &str) -> Result<(bool, f64, String), String> {
    let span = plan::extract_json_object(text).map_err(|e| e.to_string())?;
    let doc: J = serde_json::from_str(span).map_err(|e| format!("invalid JSON: {e}"))?;
    let obj = doc
        .as_object()
        .ok_or_else(|| "the answer is not a JSON object".to_string())?;
    let ok = match obj.get("ok") {
        None => return Err("the answer has no \"ok\"".into()),
        Some(J::Bool(b)) => *b,
        Some(J::Null) => return Err("\"ok\" is null".into()),
        Some(J::String(s)) => {
            !matches!(s.trim().to_lowercase().as_str(), "false" | "0" | "no" | "")
        }
        Some(J::Number(n)) => n.as_f64() != Some(0.0),
        Some(other) => !other.to_string().is_empty(),
    };
    let score = match obj.get("score") {
        None | Some(J::Null) => 0.0,
        Some(J::Number(n)) => n
            .as_f64()
            .filter(|f| f.is_finite())
            .ok_or_else(|| format!("score {n} is not a finite number"))?,
        Some(J::String(s)) => s
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .ok_or_else(|| format!("score {s:?} is not a number"))?,
        Some(other) => return Err(format!("score {other} is not a number")),
    };
    let reason = match obj.get("reason") {
        Some(J::String(s)) => s.clone(),
        None | Some(J::Null) => String::new(),
        Some(other) => other.to_string(),
    };
    Ok((ok, score, reason))
}

// ---- prompts (our own words) ----

fn judge_prompt(request: &str, answer: &str, missing: &[String]) -> String {
    let missing = if missing.is_empty() {
        "(none)".to_string()
    } else {
        missing.join(", ")
    };
    format!(
        "A lexical check found that the answer below leaves out these words of the request: \
         {missing}.\n\nDecide whether the answer drifted away from what was asked (ok false) \
         or answers it in other words (ok true). score is how well the answer serves the \
         request, between 0 and 1. reason says why in one sentence.\n\n\
         Request: {request}\n\nAnswer:\n{answer}"
    )
}

fn reviser_prompt(request: &str, answer: &str) -> String {
    format!(
        "Tighten this answer: shorter sentences, no filler words, nothing added. Keep every \
         fact, and keep using the request's own words. Reply with the revised answer only.\n\n\
         Request: {request}\n\nAnswer:\n{answer}"
    )
}

fn planner_prompt(
    request: &str,
    context: Option<&str>,
    roster: &Roster,
    max_tasks: usize,
) -> String {
    let mut lanes = String::new();
    for a in roster.agents() {
        lanes.push_str(&format!("- {}: {}\n", a.name, a.category));
    }
    let context = match context {
        Some(c) => format!("Context for this request:\n{c}\n\n"),
        None => String::new(),
    };
    format!(
        "Break this request into at most {max_tasks} tasks for the lanes below.\n\n\
         Request: {request}\n\n\
         {context}\
         Lanes:\n{lanes}\n\
         Number the tasks T1, T2, ... in order. Give each one lane from the list, a concrete \
         instruction, the ids of earlier tasks whose output it needs (depends_on; [] when \
         none) and done_when: the checks that show it is finished."
    )
}

fn planner_retry_prompt(first: &str, error: &str) -> String {
    format!("{first}\n\nYour previous plan could not be used: {error}\nWrite a corrected plan.")
}

fn worker_system(agent: &str, category: Option<&str>) -> String {
    match category {
        Some(c) => {
            format!("You work the {agent} lane ({c}). Do the task and report the result plainly.")
        }
        None => format!("You work the {agent} lane. Do the task and report the result plainly."),
    }
}

fn validator_prompt(task: &Task, output: &str) -> String {
    let criteria = if task.done_when.is_empty() {
        "(none given: judge whether the output does what the instruction asks)".to_string()
    } else {
        task.done_when
            .iter()
            .map(|c| format!("- {c}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    format!(
        "Judge one task's output.\n\nTask {}: {}\nDone criteria:\n{criteria}\n\nOutput:\n{output}\n\n\
         decision is pass when the output meets the criteria, escalate when a stronger model \
         should redo it, block when it is harmful or must not be used at all. score is between \
         0 and 1. reason says why in one sentence.",
        task.id, task.instruction
    )
}

// ---- the run ----

/// The pieces a run needs.
pub struct Env<'a> {
    /// The lanes.
    pub roster: &'a Roster,
    /// Who plans, works, validates and synthesizes.
    pub seats: &'a dyn Seats,
    /// Timestamps and elapsed time.
    pub clock: &'a dyn Clock,
    /// Where progress goes.
    pub progress: &'a dyn Progress,
}

struct Run<'a, 's> {
    store: Mutex<&'s mut (dyn Storage + Send)>,
    env: &'a Env<'a>,
    opts: &'a Options,
    calls: AtomicU64,
    per_model: Mutex<BTreeMap<String, u64>>,
    written: Mutex<Vec<u64>>,
    started: f64,
    meter: Mutex<Meter>,
    /// The run's request seq, once known (what an interruption is witnessed under).
    request_seq: Mutex<Option<u64>>,
}

/// What upstream injection needs of the results so far.
fn upstream_view(results: &BTreeMap<String, Done>) -> BTreeMap<String, UpstreamResult> {
    results
        .iter()
        .map(|(k, d)| {
            (
                k.clone(),
                UpstreamResult {
                    output: d.output.clone(),
                    ok: d.ok,
                },
            )
        })
        .collect()
}

/// A task's latest result.
#[derive(Debug, Clone)]
struct Done {
    output: String,
    ok: bool,
    seq: u64,
}

impl<'a, 's> Run<'a, 's> {
    fn new(store: &'s mut (dyn Storage + Send), env: &'a Env<'a>, opts: &'a Options) -> Self {
        Run {
            store: Mutex::new(store),
            env,
            opts,
            calls: AtomicU64::new(0),
            per_model: Mutex::new(BTreeMap::new()),
            written: Mutex::new(Vec::new()),
            started: env.clock.elapsed(),
            meter: Mutex::new(Meter::default()),
            request_seq: Mutex::new(None),
        }
    }

    fn interrupted(&self) -> Option<String> {
        self.opts.interrupt.as_ref().and_then(|i| i.signal())
    }

    /// Ends a run that `result` ended: an interruption is witnessed as `interrupted` under the
    /// run's request (when it had one) and synced.
    fn finish(&self, result: Result<Outcome, RunError>) -> Result<Outcome, RunError> {
        let Err(RunError::Interrupted { signal, .. }) = result else {
            return result;
        };
        let request_seq = *lock(&self.request_seq);
        let mut witnessed = None;
        if let Some(r) = request_seq {
            let mut store = lock(&self.store);
            let e = store.append(NewEntry {
                actor: "dispatch".into(),
                kind: "interrupted".into(),
                causal_parent: Some(r as i64),
                payload: Value::from_serde(&json!({
                    "signal": signal,
                    "reason": format!("git forum was interrupted by {signal} while the run was in flight; the run's commands were killed with their process groups"),
                    "resume": format!("git forum resume {r}"),
                })),
                ts: self.env.clock.now(),
            })?;
            store.sync()?;
            lock(&self.written).push(e.seq);
            witnessed = Some(e.seq);
        }
        self.env.progress.event(&Event::Stopped {
            reason: format!("interrupted by {signal}"),
        });
        Err(RunError::Interrupted {
            signal,
            witnessed,
            request_seq,
        })
    }

    fn put(
        &self,
        actor: &str,
        kind: &str,
        parent: Option<u64>,
        payload: J,
    ) -> Result<Entry, RunError> {
        self.put_value(actor, kind, parent, Value::from_serde(&payload))
    }

    fn put_value(
        &self,
        actor: &str,
        kind: &str,
        parent: Option<u64>,
        payload: Value,
    ) -> Result<Entry, RunError> {
        let mut store = lock(&self.store);
        if let Some(signal) = self.interrupted() {
            return Err(RunError::Interrupted {
                signal,
                witnessed: None,
                request_seq: None,
            });
        }
        let new = NewEntry {
            actor: actor.to_string(),
            kind: kind.to_string(),
            causal_parent: parent.map(|p| p as i64),
            payload,
            ts: self.env.clock.now(),
        };
        let e = store.append(new)?;
        lock(&self.written).push(e.seq);
        Ok(e)
    }

    fn over_budget(&self) -> bool {
        if let Some(max) = self.opts.max_model_calls
            && self.calls.load(Ordering::SeqCst) >= max
        {
            return true;
        }
        if let Some(max) = self.opts.max_seconds
            && self.env.clock.elapsed() - self.started >= max
        {
            return true;
        }
        false
    }

    /// One counted model call.
    fn ask(&self, exec: &dyn Executor, call: &Call<'_>) -> Result<Reply, ExecError> {
        let mut call = *call;
        if let Some(cap) = self.opts.max_output_tokens
            && call.schema.is_none()
        {
            call.max_tokens = Some(call.max_tokens.map_or(cap, |m| m.min(cap)));
        }
        let call = &call;
        if self.interrupted().is_some() {
            return Err(ExecError::Command(command::RunError::Interrupted {
                program: exec.model(),
            }));
        }
        let spent = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        self.env.progress.event(&Event::Calls {
            spent,
            max: self.opts.max_model_calls,
        });
        let r = exec.call(call);
        let model = match &r {
            Ok(reply) => reply.model.clone(),
            Err(_) => exec.model(),
        };
        *lock(&self.per_model).entry(model).or_default() += 1;
        r
    }

    fn stop_on_budget(&self, request_seq: u64) -> Result<(u64, String), RunError> {
        let calls = self.calls.load(Ordering::SeqCst);
        self.put(
            "budget",
            "budget",
            Some(request_seq),
            json!({"model_calls": calls, "reason": "run stopped on budget"}),
        )?;
        let a = self.put(
            "synthesizer",
            "result",
            Some(request_seq),
            json!({"answer": BUDGET_STOP_ANSWER}),
        )?;
        self.env.progress.event(&Event::Stopped {
            reason: "budget".into(),
        });
        Ok((a.seq, BUDGET_STOP_ANSWER.to_string()))
    }

    fn outcome(
        &self,
        status: Status,
        request_seq: u64,
        answer: Option<(u64, String)>,
        verdicts: BTreeMap<String, u64>,
        frame: Value,
    ) -> Outcome {
        Outcome {
            status,
            request_seq,
            answer_seq: answer.as_ref().map(|a| a.0),
            answer: answer.map(|a| a.1),
            written: lock(&self.written).clone(),
            calls: lock(&self.per_model).clone(),
            verdicts,
            route_frame: frame,
        }
    }

    fn entries(&self) -> Result<Vec<Entry>, RunError> {
        let store = lock(&self.store);
        let n = store.len()?;
        let mut out = Vec::with_capacity(n as usize);
        for seq in 0..n {
            if let Some(e) = store.get(seq)? {
                out.push(e);
            }
        }
        Ok(out)
    }

    fn payload_of(&self, e: &Entry) -> Result<Option<J>, RunError> {
        Ok(lock(&self.store).payload_at(e.seq)?.map(|v| v.to_serde()))
    }

    fn checkpoint_root(&self) -> Result<String, RunError> {
        let store = lock(&self.store);
        let mut acc = Accumulator::default();
        for seq in 0..store.len()? {
            if let Some(e) = store.get(seq)? {
                acc.push(&e.entry_hash);
            }
        }
        Ok(acc.root())
    }

    // ---- context ----

    /// Puts context text through the context budget (witnessing the pressure under `parent`
    /// when the text was not empty), or returns it as it is without a budget.
    fn budgeted(
        &self,
        source: Source,
        label: &str,
        text: String,
        parent: u64,
    ) -> Result<String, RunError> {
        let Some(budget) = &self.opts.context_budget else {
            return Ok(text);
        };
        let (admitted, p) = {
            let mut meter = lock(&self.meter);
            context::apply(budget, &mut meter, source, label, &text)
        };
        if p.original_tokens > 0 {
            self.put_value(
                "context-budget",
                "context_budget",
                Some(parent),
                p.payload(),
            )?;
        }
        Ok(admitted)
    }

    /// Witnesses a provider's failure under `parent`: a `context` entry with no context, the
    /// failure's code and why. The run goes on without that context.
    fn context_failed(
        &self,
        task: Option<&str>,
        parent: u64,
        f: &ContextFailure,
    ) -> Result<(), RunError> {
        let reason = format!(
            "the context provider failed: {}; the run goes on without this context",
            f.message
        );
        let mut payload = json!({"context": "", "error": f.code, "reason": reason});
        if let Some(t) = task {
            payload["task"] = json!(t);
        }
        self.put("context", "context", Some(parent), payload)?;
        self.env.progress.event(&Event::ContextFailed {
            task: task.map(str::to_string),
            reason: f.message.clone(),
        });
        Ok(())
    }

    /// The request context (witnessed as `context` under the request, after its budget
    /// pressure), and what the plan chains to: that entry, else the request.
    fn request_context(
        &self,
        request: &str,
        request_seq: u64,
    ) -> Result<(Option<String>, u64), RunError> {
        let Some(provider) = self.opts.context.clone() else {
            return Ok((None, request_seq));
        };
        self.env.progress.event(&Event::Context { task: None });
        let got = {
            let store = lock(&self.store);
            let ledger: &dyn Storage = &**store;
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                provider.request_context(request, ledger)
            }))
            .unwrap_or_else(|p| {
                Err(ContextFailure {
                    code: "panic".into(),
                    message: format!("it panicked: {}", panic_message(p.as_ref())),
                })
            })
        };
        let text = match got {
            Ok(t) => t,
            Err(f) => {
                self.context_failed(None, request_seq, &f)?;
                return Ok((None, request_seq));
            }
        };
        let text = self.budgeted(Source::Request, "request", text, request_seq)?;
        if text.is_empty() {
            return Ok((None, request_seq));
        }
        let e = self.put(
            "context",
            "context",
            Some(request_seq),
            json!({"context": text}),
        )?;
        Ok((Some(text), e.seq))
    }

    /// Fresh context for one task (witnessed as `context {task, context}` under the plan,
    /// after its budget pressure), and what the task entry chains to: that entry, else the
    /// plan.
    fn task_context(&self, task: &Task, plan_seq: u64) -> Result<(Option<String>, u64), RunError> {
        let Some(provider) = self.opts.context.clone() else {
            return Ok((None, plan_seq));
        };
        let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            provider.task_context(&task.id, &task.instruction)
        }))
        .unwrap_or_else(|p| {
            Some(Err(ContextFailure {
                code: "panic".into(),
                message: format!("it panicked: {}", panic_message(p.as_ref())),
            }))
        });
        let text = match got {
            None => return Ok((None, plan_seq)),
            Some(Ok(t)) => t,
            Some(Err(f)) => {
                self.context_failed(Some(&task.id), plan_seq, &f)?;
                return Ok((None, plan_seq));
            }
        };
        self.env.progress.event(&Event::Context {
            task: Some(task.id.clone()),
        });
        let text = if self.opts.context_budget.is_some() {
            self.budgeted(Source::Task, &task.id, text, plan_seq)?
        } else {
            cap_task_context(&text)
        };
        if text.is_empty() {
            return Ok((None, plan_seq));
        }
        let e = self.put(
            "context",
            "context",
            Some(plan_seq),
            json!({"task": task.id, "context": text}),
        )?;
        Ok((Some(text), e.seq))
    }

    // ---- planning ----

    fn plan(
        &self,
        request: &str,
        context: Option<&str>,
        parent: u64,
    ) -> Result<CompiledPlan, RunError> {
        self.env.progress.event(&Event::Planning);
        let roster = self.env.roster;
        let max_tasks = self
            .opts
            .policy
            .max_tasks
            .unwrap_or(DEFAULT_PLAN_TASKS)
            .clamp(1, 32);
        let schema = plan_schema(roster, max_tasks);
        let first = planner_prompt(request, context, roster, max_tasks);
        let orchestrator = self.env.seats.orchestrator();
        let mut prompt = first.clone();
        let mut last_error = String::new();
        for attempt in 1..=2 {
            let call = Call {
                system: Some("You plan work for a team of lanes. Answer with JSON only."),
                prompt: &prompt,
                schema: Some(&schema),
                max_tokens: Some(1536),
            };
            let error = match self.ask(orchestrator.as_ref(), &call) {
                Err(e) => format!("the orchestrator seat failed ({}): {e}", e.code()),
                Ok(reply) => {
                    match Plan::from_model_output(&reply.text, Some(roster), ParseMode::Strict)
                        .and_then(|p| {
                            let c = p.compile()?;
                            Ok((p, c))
                        }) {
                        Ok((p, compiled)) => match self.opts.policy.check_plan(&p, roster) {
                            Ok(()) => return Ok(compiled),
                            Err(e) => e.to_string(),
                        },
                        Err(e) => e.to_string(),
                    }
                }
            };
            last_error = error;
            if attempt == 1 {
                prompt = planner_retry_prompt(&first, &last_error);
            }
        }
        self.put(
            "orchestrator",
            "run_stopped",
            Some(parent),
            json!({"stage": "plan", "attempts": 2, "reason": last_error}),
        )?;
        self.env.progress.event(&Event::Stopped {
            reason: format!("planning failed: {last_error}"),
        });
        Err(RunError::Plan(last_error))
    }

    // ---- one task ----

    fn run_task(
        &self,
        task: &Task,
        plan_seq: u64,
        results: &Mutex<BTreeMap<String, Done>>,
    ) -> Result<Done, RunError> {
        let upstream = upstream_view(&lock(results));
        let injected = match &self.opts.context_budget {
            Some(budget) => {
                let b = {
                    let mut meter = lock(&self.meter);
                    augment_with_upstream_budgeted(task, &upstream, budget, &mut meter)
                };
                for p in &b.pressures {
                    self.put_value(
                        "context-budget",
                        "context_budget",
                        Some(plan_seq),
                        p.payload(),
                    )?;
                }
                b.injected
            }
            None => augment_with_upstream(task, &upstream, MAX_UPSTREAM_CHARS),
        };
        let (context, task_parent) = self.task_context(task, plan_seq)?;
        let instruction = match context {
            Some(c) => format!("{}\n\nContext for this task:\n{c}", injected.instruction),
            None => injected.instruction.clone(),
        };
        let mut payload = json!({
            "id": task.id,
            "agent": task.agent,
            "instruction": task.instruction,
            "data_from": injected.data_from,
        });
        if !task.done_when.is_empty() {
            payload["done_when"] = json!(task.done_when);
        }
        let task_entry = self.put("dispatch", "task", Some(task_parent), payload)?;
        let worker = self.env.seats.worker(self.env.roster, &task.agent);
        self.attempt(task, &worker, &instruction, task_entry.seq)
    }

    /// Calls `exec` on an instruction and witnesses the result under `parent`.
    fn attempt(
        &self,
        task: &Task,
        exec: &Arc<dyn Executor>,
        instruction: &str,
        parent: u64,
    ) -> Result<Done, RunError> {
        self.env.progress.event(&Event::TaskStarted {
            id: task.id.clone(),
            agent: task.agent.clone(),
            model: exec.model(),
        });
        let (output, ok, model, error) = if self.over_budget() {
            (
                "error: budget exceeded".to_string(),
                false,
                exec.model(),
                Some("budget"),
            )
        } else {
            let category = self
                .env
                .roster
                .get(&task.agent)
                .map(|a| a.category.as_str());
            let system = worker_system(&task.agent, category);
            let call = Call {
                system: Some(&system),
                prompt: instruction,
                schema: None,
                max_tokens: Some(512),
            };
            match self.ask(exec.as_ref(), &call) {
                Ok(r) if r.text.trim().is_empty() => (
                    "error: the model returned an empty answer".to_string(),
                    false,
                    r.model,
                    Some("empty"),
                ),
                Ok(r) => (r.text, true, r.model, None),
                Err(e) => (format!("error: {e}"), false, exec.model(), Some(e.code())),
            }
        };
        let mut payload = json!({"id": task.id, "output": output, "ok": ok, "model": model});
        if let Some(code) = error {
            payload["error"] = json!(code);
        }
        let e = self.put(&task.agent, "result", Some(parent), payload)?;
        self.env.progress.event(&Event::TaskFinished {
            id: task.id.clone(),
            ok,
            model,
        });
        Ok(Done {
            output,
            ok,
            seq: e.seq,
        })
    }

    fn run_wave(
        &self,
        tasks: &[&Task],
        plan_seq: u64,
        results: &Mutex<BTreeMap<String, Done>>,
    ) -> Result<(), RunError> {
        let width = self.opts.policy.max_parallel.max(1);
        if width == 1 || tasks.len() <= 1 {
            for t in tasks {
                let d = self.run_task(t, plan_seq, results)?;
                lock(results).insert(t.id.clone(), d);
            }
            return Ok(());
        }
        // Results of this wave are not upstream of each other: take the snapshot first.
        let next = AtomicU64::new(0);
        let first_error: Mutex<Option<RunError>> = Mutex::new(None);
        let finished: Mutex<Vec<(String, Done)>> = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for _ in 0..width.min(tasks.len()) {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst) as usize;
                        let Some(t) = tasks.get(i) else { break };
                        if lock(&first_error).is_some() {
                            break;
                        }
                        match self.run_task(t, plan_seq, results) {
                            Ok(d) => lock(&finished).push((t.id.clone(), d)),
                            Err(e) => {
                                lock(&first_error).get_or_insert(e);
                                break;
                            }
                        }
                    }
                });
            }
        });
        if let Some(e) = lock(&first_error).take() {
            return Err(e);
        }
        let mut r = lock(results);
        for (id, d) in lock(&finished).drain(..) {
            r.insert(id, d);
        }
        Ok(())
    }

    // ---- validation ----

    fn validate(&self, task: &Task, done: &Done) -> Result<Verdict, RunError> {
        let verdict = if !done.ok {
            Verdict {
                decision: "fail".into(),
                score: 0.0,
                reason: "task failed".into(),
                model: None,
            }
        } else if self.over_budget() {
            Verdict {
                decision: "undetermined".into(),
                score: 0.0,
                reason: "budget exceeded".into(),
                model: None,
            }
        } else {
            self.env.progress.event(&Event::Validating {
                id: task.id.clone(),
            });
            let orchestrator = self.env.seats.orchestrator();
            let prompt = validator_prompt(task, &done.output);
            let schema = verdict_schema();
            let call = Call {
                system: Some("You check work against its criteria. Answer with JSON only."),
                prompt: &prompt,
                schema: Some(&schema),
                max_tokens: Some(256),
            };
            match self.ask(orchestrator.as_ref(), &call) {
                Ok(reply) => match parse_verdict(&reply.text) {
                    Some((decision, score, reason)) => Verdict {
                        decision,
                        score,
                        reason,
                        model: Some(reply.model),
                    },
                    None => Verdict {
                        decision: "undetermined".into(),
                        score: 0.0,
                        reason: "validator answered without a usable verdict".into(),
                        model: Some(reply.model),
                    },
                },
                Err(e) => Verdict {
                    decision: "undetermined".into(),
                    score: 0.0,
                    reason: format!("validator failed ({}): {e}", e.code()),
                    model: Some(orchestrator.model()),
                },
            }
        };
        self.put(
            "validator",
            "verdict",
            Some(done.seq),
            verdict.payload(&task.id),
        )?;
        self.env.progress.event(&Event::Verdict {
            id: task.id.clone(),
            decision: verdict.decision.clone(),
        });
        Ok(verdict)
    }
}

/// The request entry and route frame of a run about to start.
fn open_run(run: &Run<'_, '_>, request: &str) -> Result<(u64, RouteFrame), RunError> {
    let (_, frame) = route::route_request(request, run.env.roster);
    let mut payload = json!({ "text": request });
    if let Some(g) = run.opts.gates.record() {
        payload["gates"] = g;
    }
    let req = run.put("client", "request", None, payload)?;
    *lock(&run.request_seq) = Some(req.seq);
    run.put_value("router", "route_frame", Some(req.seq), frame.payload())?;
    Ok((req.seq, frame))
}

/// The plan entry payload: Forum's `waves` and `edges`, plus the tasks themselves (so order
/// edges and done criteria survive, and a resumed run continues the same plan).
pub fn plan_entry_payload(plan: &CompiledPlan) -> J {
    let mut p = plan.payload().to_serde();
    p["tasks"] = J::Array(
        plan.tasks
            .iter()
            .map(|t| {
                json!({
                    "id": t.id,
                    "agent": t.agent,
                    "instruction": t.instruction,
                    "depends_on": t.depends_on,
                    "order_deps": t.order_deps.iter().collect::<Vec<_>>(),
                    "done_when": t.done_when,
                })
            })
            .collect(),
    );
    p
}

/// Reads back the plan a `plan` entry carries.
pub fn plan_from_payload(p: &J) -> Option<CompiledPlan> {
    let tasks = p.get("tasks")?.as_array()?;
    let strs = |v: &J| -> Option<Vec<String>> {
        v.as_array()?
            .iter()
            .map(|x| x.as_str().map(str::to_string))
            .collect()
    };
    let mut out = Vec::new();
    for t in tasks {
        let mut task = Task::new(
            t.get("id")?.as_str()?,
            t.get("agent")?.as_str()?,
            t.get("instruction")?.as_str()?,
        );
        task.depends_on = strs(t.get("depends_on")?)?;
        task.order_deps = strs(t.get("order_deps")?)?.into_iter().collect();
        task.done_when = strs(t.get("done_when")?)?;
        out.push(task);
    }
    Plan { tasks: out }.compile().ok()
}

/// Runs a new request end to end.
pub fn submit(
    store: &mut (dyn Storage + Send),
    env: &Env<'_>,
    opts: &Options,
    request: &str,
) -> Result<Outcome, RunError> {
    route::check_request(request).map_err(|e| RunError::Request(e.to_string()))?;
    let run = Run::new(store, env, opts);
    let result = submit_run(&run, request);
    run.finish(result)
}

fn submit_run(run: &Run<'_, '_>, request: &str) -> Result<Outcome, RunError> {
    let (env, opts) = (run.env, run.opts);
    let (request_seq, frame) = open_run(run, request)?;
    let (context, plan_parent) = run.request_context(request, request_seq)?;
    let plan = run.plan(request, context.as_deref(), request_seq)?;
    let plan_entry = run.put(
        "dispatch",
        "plan",
        Some(plan_parent),
        plan_entry_payload(&plan),
    )?;
    env.progress.event(&Event::Planned {
        tasks: plan.tasks.len(),
        waves: plan.waves.len(),
    });
    drive(
        run,
        request,
        request_seq,
        &frame,
        &plan,
        (plan_entry.seq, plan_entry.seq),
        &opts.gates,
        BTreeMap::new(),
        BTreeMap::new(),
    )
}

/// Continues an unfinished run (the latest one, or `request_seq`): reuses every task already
/// witnessed with a passing or blocking verdict, and every ok result not yet judged; runs the
/// rest.
pub fn resume(
    store: &mut (dyn Storage + Send),
    env: &Env<'_>,
    opts: &Options,
    request_seq: Option<u64>,
) -> Result<Outcome, RunError> {
    let run = Run::new(store, env, opts);
    let result = resume_run(&run, request_seq);
    run.finish(result)
}

fn resume_run(run: &Run<'_, '_>, request_seq: Option<u64>) -> Result<Outcome, RunError> {
    let env = run.env;
    let entries = run.entries()?;
    // A body that cannot be read (or does not hash to its entry) stops the resume; it is never
    // read as absent.
    let mut unreadable = None;
    let runs = status::runs(&entries, |e| {
        run.payload_of(e).unwrap_or_else(|err| {
            unreadable.get_or_insert(err);
            None
        })
    });
    if let Some(err) = unreadable {
        return Err(err);
    }
    let target = match request_seq {
        Some(seq) => runs.iter().find(|r| r.request_seq == seq).ok_or_else(|| {
            RunError::Resume(format!(
                "no run starts at seq {seq}: `git forum runs` lists them"
            ))
        })?,
        None => runs
            .iter()
            .rev()
            .find(|r| r.state.resumable())
            .ok_or_else(|| {
                RunError::Resume(
                    "no unfinished run to resume: every run in this ledger has finished".into(),
                )
            })?,
    };
    if !target.state.resumable() {
        return Err(RunError::Resume(format!(
            "run {} cannot be resumed: it is {}",
            target.request_seq,
            target.state.as_str()
        )));
    }
    let request = target.request.clone();
    let request_seq = target.request_seq;
    *lock(&run.request_seq) = Some(request_seq);
    // The gates the run was submitted with (its record), not the caller's: a resume can
    // neither skip nor add one. A wave whose gate is raised and undecided refuses here,
    // before anything is run or written.
    let gate_entries = match target.run_seq {
        Some(run_seq) => status::gate_entries(&entries, |e| run.payload_of(e).ok().flatten())
            .remove(&run_seq)
            .unwrap_or_default(),
        None => BTreeMap::new(),
    };
    let gates = status::held_gates(target, &gate_entries);
    if let (Some(plan), Some(run_seq)) = (&target.plan, target.run_seq)
        && let Some((wave, status::Admission::Wait { .. })) =
            status::first_held(plan, &gates, &gate_entries, env.clock.now())
    {
        return Err(RunError::Gated {
            request_seq,
            run_seq,
            wave,
        });
    }
    let (_, frame) = route::route_request(&request, env.roster);
    let (plan, plan_seq, run_seq) = match (&target.plan, target.plan_seq, target.run_seq) {
        (Some(p), Some(seq), Some(run_seq)) => (p.clone(), seq, run_seq),
        _ => {
            // Planning never finished: plan again, with the request context the run already
            // witnessed (if any), so the plan chains to it as the first attempt would have.
            let mut context: Option<(u64, String)> = None;
            for seq in &target.entries {
                if let Some(e) = entries.get(*seq as usize)
                    && e.kind == "context"
                    && let Some(p) = run.payload_of(e)?
                    && p.get("task").is_none()
                    && let Some(text) = p.get("context").and_then(J::as_str)
                    && !text.is_empty()
                {
                    context = Some((e.seq, text.to_string()));
                }
            }
            let plan = run.plan(
                &request,
                context.as_ref().map(|c| c.1.as_str()),
                request_seq,
            )?;
            let e = run.put(
                "dispatch",
                "plan",
                Some(context.as_ref().map_or(request_seq, |c| c.0)),
                plan_entry_payload(&plan),
            )?;
            (plan, e.seq, e.seq)
        }
    };
    let mut reused: BTreeMap<String, Done> = BTreeMap::new();
    let mut verdicts: BTreeMap<String, Verdict> = BTreeMap::new();
    for (id, r) in &target.results {
        if !r.ok {
            continue;
        }
        match target.verdicts.get(id) {
            Some(v) if v.decision == "pass" || v.decision == "block" => {
                verdicts.insert(id.clone(), v.clone());
            }
            Some(_) => continue,
            None => {}
        }
        reused.insert(
            id.clone(),
            Done {
                output: r.output.clone(),
                ok: true,
                seq: r.seq,
            },
        );
    }
    let mut ids: Vec<&String> = reused.keys().collect();
    ids.sort();
    run.put(
        "dispatch",
        "resume",
        Some(plan_seq),
        json!({"reused": ids, "run": request_seq}),
    )?;
    drive(
        run,
        &request,
        request_seq,
        &frame,
        &plan,
        (plan_seq, run_seq),
        &gates,
        reused,
        verdicts,
    )
}

#[allow(clippy::too_many_arguments)]
fn drive(
    run: &Run<'_, '_>,
    request: &str,
    request_seq: u64,
    frame: &RouteFrame,
    plan: &CompiledPlan,
    (plan_seq, run_seq): (u64, u64),
    gates: &GatePolicy,
    reused: BTreeMap<String, Done>,
    mut verdicts: BTreeMap<String, Verdict>,
) -> Result<Outcome, RunError> {
    let env = run.env;
    let frame_payload = frame.payload();
    // The plan's tasks as they run: a gate edit rewrites an instruction here, and the
    // rewritten task is what is dispatched, validated and escalated.
    let mut current: BTreeMap<String, Task> = plan
        .tasks
        .iter()
        .map(|t| (t.id.clone(), t.clone()))
        .collect();
    let results: Mutex<BTreeMap<String, Done>> = Mutex::new(reused);
    let count = |v: &BTreeMap<String, Verdict>| {
        let mut c = BTreeMap::new();
        for x in v.values() {
            *c.entry(x.decision.clone()).or_insert(0u64) += 1;
        }
        c
    };

    // Waves.
    for (i, wave) in plan.waves.iter().enumerate() {
        if gates.waves.contains(&i) {
            match gate(run, gates, run_seq, i, wave)? {
                GateOutcome::Run(edits) => {
                    for (id, text) in edits {
                        if let Some(t) = current.get_mut(&id) {
                            t.instruction = text;
                        }
                    }
                }
                GateOutcome::Pause => {
                    env.progress.event(&Event::Paused { wave: i });
                    return Ok(run.outcome(
                        Status::Paused { wave: i },
                        request_seq,
                        None,
                        count(&verdicts),
                        frame_payload,
                    ));
                }
                GateOutcome::Stop => {
                    return Ok(run.outcome(
                        Status::Rejected { wave: i },
                        request_seq,
                        None,
                        count(&verdicts),
                        frame_payload,
                    ));
                }
            }
        }
        let todo: Vec<&Task> = wave
            .iter()
            .filter(|id| !lock(&results).contains_key(id.as_str()))
            .filter_map(|id| current.get(id.as_str()))
            .collect();
        env.progress.event(&Event::Wave {
            index: i,
            of: plan.waves.len(),
            tasks: wave.clone(),
        });
        run.run_wave(&todo, plan_seq, &results)?;
        after_wave(run, i, plan_seq)?;
    }
    let tasks: Vec<&Task> = plan
        .tasks
        .iter()
        .filter_map(|t| current.get(&t.id))
        .collect();

    // Validation, in plan order, after the last wave.
    let mut finals: BTreeMap<String, Done> = lock(&results).clone();
    for t in &tasks {
        if verdicts.contains_key(&t.id) {
            continue;
        }
        let Some(done) = finals.get(&t.id) else {
            continue;
        };
        let v = run.validate(t, done)?;
        verdicts.insert(t.id.clone(), v);
    }

    // Escalation.
    for t in &tasks {
        let Some(v) = verdicts.get(&t.id) else {
            continue;
        };
        if !v.climbs() {
            continue;
        }
        let ladder = env.seats.ladder(env.roster, &t.agent);
        let upstream = upstream_view(&finals);
        let instruction = augment_with_upstream(t, &upstream, MAX_UPSTREAM_CHARS).instruction;
        for rung in ladder {
            if run.over_budget() {
                break;
            }
            let Some(current) = finals.get(&t.id).cloned() else {
                break;
            };
            env.progress.event(&Event::Escalating {
                id: t.id.clone(),
                to: rung.model(),
            });
            let esc = run.put(
                "orchestrator",
                "tier_escalation",
                Some(current.seq),
                json!({"id": t.id, "to": rung.model(), "reason": "validation failed"}),
            )?;
            let done = run.attempt(t, &rung, &instruction, esc.seq)?;
            finals.insert(t.id.clone(), done.clone());
            let v = run.validate(t, &done)?;
            let passed = v.passed();
            verdicts.insert(t.id.clone(), v);
            if passed {
                break;
            }
        }
    }

    // A wave in which nothing passed is degraded, not approved.
    for (i, wave) in plan.waves.iter().enumerate() {
        let judged: Vec<&Verdict> = wave.iter().filter_map(|id| verdicts.get(id)).collect();
        if !judged.is_empty() && judged.iter().all(|v| !v.passed()) {
            run.put(
                "validator",
                "degraded",
                Some(plan_seq),
                json!({"wave": i, "tasks": wave, "reason": "no task of this wave passed validation"}),
            )?;
        }
    }

    if run.over_budget() {
        let a = run.stop_on_budget(request_seq)?;
        return Ok(run.outcome(
            Status::StoppedOnBudget,
            request_seq,
            Some(a),
            count(&verdicts),
            frame_payload,
        ));
    }

    // Synthesis.
    env.progress.event(&Event::Synthesizing);
    let mut parts = Vec::new();
    for t in &tasks {
        let Some(d) = finals.get(&t.id) else { continue };
        let v = verdicts.get(&t.id);
        if v.is_some_and(|v| v.decision == "block") || !d.ok {
            continue;
        }
        let text = match &run.opts.context_budget {
            Some(budget) => {
                let (admitted, p) = {
                    let mut meter = lock(&run.meter);
                    context::apply(
                        budget,
                        &mut meter,
                        Source::Upstream,
                        &format!("{}->synthesizer", t.id),
                        &d.output,
                    )
                };
                run.put_value("context-budget", "context_budget", Some(d.seq), p.payload())?;
                admitted
            }
            None => d.output.clone(),
        };
        if text.is_empty() {
            continue;
        }
        let note = match v.map(|v| v.decision.as_str()) {
            Some("pass") => "accepted",
            Some("undetermined") => "not validated",
            _ => "did not pass validation",
        };
        parts.push(format!("- {} ({}, {note}): {text}", t.id, t.agent));
    }
    let prompt = format!(
        "Request: {request}\n\nResults of the tasks:\n{}\n\n{}\n\nWrite the answer to the request from these results.",
        if parts.is_empty() {
            "(none usable)".to_string()
        } else {
            parts.join("\n")
        },
        frame.communication_contract.prompt_text()
    );
    let call = Call {
        system: Some(
            "You write the final answer for the person who asked, from the team's results.",
        ),
        prompt: &prompt,
        schema: None,
        max_tokens: Some(768),
    };
    let orchestrator = env.seats.orchestrator();
    let answer = match run.ask(orchestrator.as_ref(), &call) {
        Ok(r) if !r.text.trim().is_empty() => r.text.trim().to_string(),
        Ok(_) => {
            return Err(synthesis_failed(
                run,
                request_seq,
                "the orchestrator seat returned an empty answer".into(),
            )?);
        }
        Err(e) => {
            return Err(synthesis_failed(
                run,
                request_seq,
                format!("the orchestrator seat failed ({}): {e}", e.code()),
            )?);
        }
    };
    let a = run.put(
        "synthesizer",
        "result",
        Some(request_seq),
        json!({"answer": answer}),
    )?;
    let delivered = deliver(run, request, frame, a.seq, answer)?;
    Ok(run.outcome(
        Status::Answered,
        request_seq,
        Some(delivered),
        count(&verdicts),
        frame_payload,
    ))
}

/// Delivers the synthesized answer (forum-spec §13–15, forum-features §4 "Order inside one
/// submit"): the delivery floor on the answer; when it flags and a reviser is on, a revision
/// (accepted only if strictly shorter with coverage not lower, then witnessed as the revised
/// `result`); then, on the delivered answer, the delivery profile (the caller's, else the
/// route frame's), the lexical intent check and, when it flags and the judge is on, the
/// intent judgment; last the verifier's verdict. None of them blocks the run. Returns the
/// delivered answer's seq and text.
fn deliver(
    run: &Run<'_, '_>,
    request: &str,
    frame: &RouteFrame,
    answer_seq: u64,
    answer: String,
) -> Result<(u64, String), RunError> {
    use crate::quality;
    let floor = quality::assess(&answer);
    let check = run.put_value(
        "delivery",
        "delivery_check",
        Some(answer_seq),
        floor.payload(),
    )?;
    let (seq, answer) = if floor.flagged && run.opts.revise {
        revise(run, request, check.seq, answer_seq, answer)?
    } else {
        (answer_seq, answer)
    };
    let profile = match &run.opts.delivery_profile {
        Some(p) => quality::profile::get_profile(Some(p)).unwrap_or(frame.delivery_profile),
        None => frame.delivery_profile,
    };
    run.put_value(
        "delivery-profile",
        "delivery_profile_check",
        Some(seq),
        quality::profile::assess_profile(&answer, profile).payload(),
    )?;
    let intent = quality::intent_check(request, &answer, quality::intent::DEFAULT_THRESHOLD);
    let intent_entry = run.put_value("intent", "intent_check", Some(seq), intent.payload())?;
    if intent.flagged && run.opts.judge_intent {
        judge(run, request, &answer, &intent.missing, intent_entry.seq)?;
    }
    if let Some(verifier) = &run.opts.verifier {
        run.env.progress.event(&Event::Verifying);
        let v = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            verifier.verify(request, &answer)
        }))
        .unwrap_or_else(|p| Verification {
            outcome: Checked::Undecided,
            detail: format!(
                "could not decide: the verifier panicked: {}",
                panic_message(p.as_ref())
            ),
            source: verifier.source(),
        });
        run.put_value("verifier", "verification", Some(seq), v.payload())?;
    }
    Ok((seq, answer))
}

/// The reviser rung: asks the orchestrator seat to tighten a flagged answer and keeps the
/// revision only if [`crate::quality::revision_accepted`] says so. Witnesses `revision` under
/// the delivery check and, when accepted, `result {answer, revised_from}` under the revision.
/// Skipped (nothing witnessed) once the budget is spent.
fn revise(
    run: &Run<'_, '_>,
    request: &str,
    check_seq: u64,
    answer_seq: u64,
    answer: String,
) -> Result<(u64, String), RunError> {
    use crate::quality;
    if run.over_budget() {
        run.env.progress.event(&Event::Skipped {
            step: "reviser".into(),
            reason: "the run budget is spent".into(),
        });
        return Ok((answer_seq, answer));
    }
    run.env.progress.event(&Event::Revising);
    let prompt = reviser_prompt(request, &answer);
    let call = Call {
        system: Some("You tighten answers without changing what they say."),
        prompt: &prompt,
        schema: None,
        max_tokens: Some(768),
    };
    let orchestrator = run.env.seats.orchestrator();
    let revised = match run.ask(orchestrator.as_ref(), &call) {
        Ok(r) if !r.text.trim().is_empty() => r.text.trim().to_string(),
        Ok(_) => {
            run.put_value(
                "reviser",
                "revision",
                Some(check_seq),
                quality::delivery::revision_failed_payload(
                    "the orchestrator seat returned an empty answer",
                ),
            )?;
            return Ok((answer_seq, answer));
        }
        Err(e) => {
            run.put_value(
                "reviser",
                "revision",
                Some(check_seq),
                quality::delivery::revision_failed_payload(&format!(
                    "the orchestrator seat failed ({}): {e}",
                    e.code()
                )),
            )?;
            return Ok((answer_seq, answer));
        }
    };
    let verdict = quality::revision_accepted(request, &answer, &revised);
    let rev = run.put_value("reviser", "revision", Some(check_seq), verdict.payload())?;
    if !verdict.accepted {
        return Ok((answer_seq, answer));
    }
    let r = run.put_value(
        "synthesizer",
        "result",
        Some(rev.seq),
        Value::object([
            ("answer".to_string(), Value::str(&revised)),
            ("revised_from".to_string(), Value::int(answer_seq as i64)),
        ]),
    )?;
    Ok((r.seq, revised))
}

/// The intent judge rung: the orchestrator seat reads the request, the answer and the terms
/// the floor found missing, and rules drifted (`ok: false`) or paraphrased (`ok: true`),
/// witnessed as `intent_judgment` under the intent check. A seat error or an unreadable
/// ruling is `{ok: null, score: 0.0, reason: "judge failed: ..."}`. Skipped (nothing
/// witnessed) once the budget is spent.
fn judge(
    run: &Run<'_, '_>,
    request: &str,
    answer: &str,
    missing: &[String],
    check_seq: u64,
) -> Result<(), RunError> {
    if run.over_budget() {
        run.env.progress.event(&Event::Skipped {
            step: "intent judge".into(),
            reason: "the run budget is spent".into(),
        });
        return Ok(());
    }
    run.env.progress.event(&Event::Judging);
    let prompt = judge_prompt(request, answer, missing);
    let schema = judgment_schema();
    let call = Call {
        system: Some("You judge whether an answer addresses its request. Answer with JSON only."),
        prompt: &prompt,
        schema: Some(&schema),
        max_tokens: Some(256),
    };
    let orchestrator = run.env.seats.orchestrator();
    let ruling = match run.ask(orchestrator.as_ref(), &call) {
        Ok(reply) => parse_judgment(&reply.text)
            .map_err(|e| format!("the judge's answer is not a usable ruling: {e}")),
        Err(e) => Err(format!("the orchestrator seat failed ({}): {e}", e.code())),
    };
    let (ok, score, reason) = match ruling {
        Ok((ok, score, reason)) => (Value::Bool(ok), score, reason),
        Err(why) => (Value::Null, 0.0, format!("judge failed: {why}")),
    };
    run.put_value(
        "intent-judge",
        "intent_judgment",
        Some(check_seq),
        Value::object([
            ("ok".to_string(), ok),
            ("score".to_string(), Value::Float(score)),
            ("reason".to_string(), Value::str(reason)),
        ]),
    )?;
    Ok(())
}

fn synthesis_failed(
    run: &Run<'_, '_>,
    request_seq: u64,
    reason: String,
) -> Result<RunError, RunError> {
    run.put(
        "orchestrator",
        "run_stopped",
        Some(request_seq),
        json!({"stage": "synthesis", "reason": reason}),
    )?;
    run.env.progress.event(&Event::Stopped {
        reason: format!("synthesis failed: {reason}"),
    });
    Ok(RunError::Synthesis(reason))
}

fn after_wave(run: &Run<'_, '_>, wave: usize, plan_seq: u64) -> Result<(), RunError> {
    if run.opts.checkpoint_each_wave {
        let root = run.checkpoint_root()?;
        run.put(
            "dispatch",
            "checkpoint",
            Some(plan_seq),
            json!({"wave": wave, "root": root}),
        )?;
        lock(&run.store).sync()?;
    }
    Ok(())
}

enum GateOutcome {
    /// Run the wave, with edited instructions by task id.
    Run(BTreeMap<String, String>),
    Pause,
    Stop,
}

/// Holds a gated wave to what its gate says ([`status::admission`], the rule every resume
/// shares): raises the gate and pauses when none was raised, pauses while it is undecided,
/// applies the expiry decision once its deadline has passed (witnessed as `gate_expired`),
/// stops the run when it was rejected (`gate_stopped`), and runs the wave, with the latest
/// edits, when it was approved or edited.
fn gate(
    run: &Run<'_, '_>,
    gates: &GatePolicy,
    run_seq: u64,
    wave: usize,
    tasks: &[String],
) -> Result<GateOutcome, RunError> {
    let entries = run.entries()?;
    let mut mine = status::gate_entries(&entries, |e| run.payload_of(e).ok().flatten())
        .remove(&run_seq)
        .and_then(|mut by_wave| by_wave.remove(&(wave as u64)))
        .unwrap_or_default();
    let mut admission = status::admission(&mine, tasks, run.env.clock.now());
    if let status::Admission::Expire {
        pending_seq,
        decision,
        deadline,
        on_expiry,
    } = &admission
    {
        let e = run.put(
            "dispatch",
            "gate_expired",
            Some(*pending_seq),
            json!({"run_seq": run_seq, "wave": wave, "decision": decision, "on_expiry": on_expiry, "deadline": deadline}),
        )?;
        let p = run.payload_of(&e)?.unwrap_or(J::Null);
        mine.push((e, p));
        admission = status::admission(&mine, tasks, run.env.clock.now());
    }
    match admission {
        status::Admission::Raise => {
            let mut payload = json!({
                "run_seq": run_seq,
                "wave": wave,
                "tasks": tasks,
                "question": gates.question.clone().unwrap_or_else(|| format!("Run wave {wave} ({})?", tasks.join(", "))),
                "requested_by": "dispatch",
            });
            if let Some(secs) = gates.deadline_seconds {
                payload["on_expiry"] =
                    json!(gates.on_expiry.clone().unwrap_or_else(|| "reject".into()));
                payload["deadline"] = json!(run.env.clock.now() + secs);
            }
            run.put("dispatch", "gate_pending", Some(run_seq), payload)?;
            lock(&run.store).sync()?;
            Ok(GateOutcome::Pause)
        }
        // An expiry that still resolves to pending cannot happen; pausing is the safe side.
        status::Admission::Wait { .. } | status::Admission::Expire { .. } => Ok(GateOutcome::Pause),
        status::Admission::Stop { parent } => {
            run.put(
                "dispatch",
                "gate_stopped",
                Some(parent.unwrap_or(run_seq)),
                json!({"run_seq": run_seq, "wave": wave, "reason": "gate rejected"}),
            )?;
            lock(&run.store).sync()?;
            Ok(GateOutcome::Stop)
        }
        status::Admission::Run { edits } => Ok(GateOutcome::Run(edits)),
    }
}
