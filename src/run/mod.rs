//! The control loop behind `git forum submit`: route, request context, plan, parallel waves
//! (with per-task context), validation, escalation, synthesis and the quality ladder (delivery
//! floor and reviser, delivery profile, intent floor and judge, verifier), every step witnessed
//! in the ledger.
//!
//! The loop talks to the world through four seams, so tests drive it exactly: a
//! [`Storage`](crate::ledger::Storage) (the git ledger, or memory), the [`Seats`] (which
//! executor plans, validates, synthesizes, revises and judges, and which runs each task), a
//! [`Clock`] (timestamps and the seconds budget) and a [`Progress`] sink for a person watching; and two optional ones in
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
//!
//! # Where things are
//!
//! * `seams`: the traits a run talks through (clock, progress, context provider, verifier);
//!   `adapters`: their command-backed implementations; `interrupt`: the signal flag.
//! * `engine`: one run's state and the plumbing every step shares; `context`, `tasks`: taking
//!   in context, planning, dispatching and validating tasks.
//! * `drive`: `submit` and the wave driver; `resume`; `gates`; `ladder`: tier escalation;
//!   `synthesis`; `deliver`: the quality ladder after synthesis.
//! * `prompts`, `schemas`, `payload`: what a run says to its seats, what they must answer, and
//!   the plan entry's payload.
//! * `status`: runs and gates read back from the ledger.
//! * `dispatch`: a plan made elsewhere (a campaign round) run without planner, validator or
//!   synthesis.

mod adapters;
mod attempts;
mod changes;
mod claimed;
mod classify;
mod commit_message;
mod context;
mod course;
mod deliver;
mod dispatch;
mod drive;
mod edit;
pub mod edit_tools;
mod engine;
mod failure;
mod gates;
mod heartbeat;
mod interrupt;
mod ladder;
mod payload;
mod prompts;
mod pulse;
mod remote;
pub mod replay;
mod resume;
mod schemas;
mod seams;
mod secrets;
mod send_order;
mod ship;
mod ship_ahead;
mod ship_early;
mod solo;
pub mod status;
mod synthesis;
mod tasks;
mod vocab_gap;
mod work_state;
pub(crate) mod workbench;

/// The editing worker's tools at the path the integration tests name them by.
pub use edit_tools as tools;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::context::ContextBudget;
use crate::exec::Seats;
use crate::ledger::StorageError;
use crate::ledger::canonical::Value;
use crate::policy::Policy;
use crate::roster::Roster;

pub use adapters::{
    CommandContext, CommandVerifier, DEFAULT_COMMAND_TIMEOUT, LedgerContext,
    MAX_CONTEXT_COMMAND_BYTES, MAX_VERIFICATION_DETAIL_CHARS, MAX_VERIFIER_COMMAND_BYTES,
};
pub(crate) use attempts::MAX_ATTEMPTS;
pub use context::{MAX_TASK_CONTEXT_CHARS, TASK_CONTEXT_CUT_MARKER, cap_task_context};
pub(crate) use dispatch::{WorkBranch, dispatch};
pub use drive::submit;
pub(crate) use gates::GatePolicy;
pub(crate) use interrupt::Interrupt;
pub(crate) use payload::{plan_entry_payload, plan_from_payload};
pub(crate) use remote::{Arrived, Dispatch, Duplicate, Prior, remote_prompt};
pub use resume::resume;
pub use schemas::{
    AnswerError, Verdict, judgment_schema, parse_judgment, parse_verdict, plan_schema,
    verdict_schema,
};
pub use seams::{
    Clock, ContextFailure, ContextProvider, Event, Progress, Reading, Silent, StepClock,
    SystemClock, Verification, Verifier, VerifierConclusion, work_line,
};
pub(crate) use seams::{ContextTurns, Take};
pub(crate) use work_state::{
    DEFAULT_CHECK_DEADLINE, DEFAULT_CHECK_OUTPUT_CAP, DEFAULT_DIFF_CAP, OpenWork, WorkOptions,
    witnessed,
};
pub use workbench::{
    Author, Base, Change, ChangeLimits, CheckRun, CommitRules, FileChange, Keep, LinkOut, Screen,
    SecretFound, TaskTree, Tie, WorkError, Workbench,
};

/// Upstream output longer than this many code points is cut before it reaches a prompt
/// (without a context budget), as in Forum.
pub(crate) const MAX_UPSTREAM_CHARS: usize = 8192;

/// The most tasks a planner is asked for unless the policy's `max_tasks` says otherwise.
pub(crate) const DEFAULT_PLAN_TASKS: usize = 4;

/// This git forum's version, as a run's request records it.
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The answer witnessed when the budget stops a run.
pub(crate) const BUDGET_STOP_ANSWER: &str =
    "The run stopped because its budget ran out before it finished.";
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// How one run behaves.
#[derive(Clone, Default)]
pub struct Options {
    /// Stop once this many model calls have started.
    pub max_model_calls: Option<u64>,
    /// Stop once this many seconds have passed.
    pub max_seconds: Option<f64>,
    /// The spend ceilings (`--max-tokens`, `--max-cost-usd`): a call whose worst case does not
    /// fit in what is left never starts, and the run stops as on its budget.
    pub(crate) ceilings: crate::spend::Ceilings,
    /// Token limits on what reaches prompts.
    pub context_budget: Option<ContextBudget>,
    /// What may run, and how many tasks at once.
    pub policy: Policy,
    /// Witness a checkpoint (and sync) after each wave.
    pub checkpoint_each_wave: bool,
    /// The delivery profile to check the answer against (default: the route frame's).
    pub(crate) delivery_profile: Option<String>,
    /// Human approval before waves.
    pub gates: GatePolicy,
    /// A cap on the tokens each free-text model call (tasks, synthesis, revision) may generate,
    /// where the executor has one; `None` keeps each role's default. Structured calls (plan,
    /// verdicts, the intent judge) keep their own limits: cutting them short breaks their JSON.
    pub(crate) max_output_tokens: Option<u32>,
    /// When the intent check flags the answer (and the budget allows), ask the orchestrator
    /// seat whether it drifted or paraphrased, witnessed as `intent_judgment`.
    pub judge_intent: bool,
    /// When the delivery floor flags the answer (and the budget allows), ask the orchestrator
    /// seat for a tighter version, accepted only if it is strictly shorter and covers the
    /// request as well (`revision`, and the revised `result` when accepted).
    pub revise: bool,
    /// Run the request as one task by the worker seat, in the repository: no planner,
    /// validator, judge or synthesizer call; the answer is written from the record (`solo.rs`).
    pub(crate) solo: bool,
    /// Checks the delivered answer after the floors, witnessed as `verification`.
    pub verifier: Option<Arc<dyn Verifier>>,
    /// Supplies request context before planning and context per task, witnessed as
    /// `context`.
    pub context: Option<Arc<dyn ContextProvider>>,
    /// The order the tasks of a wave take from the context budget's run-wide total: `None`
    /// (a live run) takes in the order they reach it; a strict replay's follows the record.
    pub(crate) context_turns: Option<Arc<dyn ContextTurns>>,
    /// Raised when the process is interrupted: the run stops and witnesses `interrupted`.
    pub(crate) interrupt: Option<Arc<Interrupt>>,
    /// Work in the repository (`--work`): a worktree per task, changes as commits, checks,
    /// the pre-ship gate and the run branch. A resumed run works when its record says so.
    pub(crate) work: Option<WorkOptions>,
    /// Scans every body before it is hashed: redact (default) or block what it finds.
    pub(crate) secrets: crate::secrets::Guard,
    /// The run's executors as its request records them (`runtime`: see
    /// [`crate::exec::config::record`]), so a resume can continue on them; `None` records none.
    pub runtime_record: Option<serde_json::Value>,
    /// The options a resume keeps, as the request records them (`options`: see
    /// `surface::run::recorded`); `None` records none.
    pub options_record: Option<serde_json::Value>,
    /// The rules the run runs under as its request records them (`rules`: the roster and
    /// policy texts with their digests, and the limits; see [`replay::rules`]), so a strict
    /// replay runs under them rather than under today's files; `None` records none.
    pub rules_record: Option<serde_json::Value>,
    /// Why the run's worker cannot start, found before the run began (its seat's program is
    /// not installed): the run records its request and stops there with this reason, before
    /// any model is called, so the record says why; `resume` tries again once it is fixed.
    pub(crate) cannot_start: Option<String>,
    /// Heartbeats and the watchdog (`[observe]`): how often the run witnesses a `heartbeat`,
    /// and how long its workers may stay quiet. Both off by default.
    pub(crate) observe: crate::exec::config::ObserveConfig,
    /// A strict replay of a resume whose entry names no limits (written before a resume kept
    /// them): the replayed resume names none either. Always false for a live resume, which
    /// names the limits it runs under.
    pub(crate) resume_limits_unkept: bool,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("max_model_calls", &self.max_model_calls)
            .field("max_seconds", &self.max_seconds)
            .field("ceilings", &self.ceilings)
            .field("context_budget", &self.context_budget)
            .field("policy", &self.policy)
            .field("checkpoint_each_wave", &self.checkpoint_each_wave)
            .field("delivery_profile", &self.delivery_profile)
            .field("gates", &self.gates)
            .field("max_output_tokens", &self.max_output_tokens)
            .field("judge_intent", &self.judge_intent)
            .field("revise", &self.revise)
            .field("solo", &self.solo)
            .field("verifier", &self.verifier.as_ref().map(|v| v.source()))
            .field("context", &self.context.as_ref().map(|c| c.describe()))
            .field("context_turns", &self.context_turns.is_some())
            .field("interrupt", &self.interrupt)
            .field("work", &self.work)
            .field("secrets", &self.secrets)
            .field("runtime_record", &self.runtime_record)
            .field("cannot_start", &self.cannot_start)
            .field("options_record", &self.options_record)
            .field("rules_record", &self.rules_record.is_some())
            .field("observe", &self.observe)
            .finish()
    }
}

/// How a run ended (this time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// An answer was synthesized and checked.
    Answered,
    /// The budget (`--max-model-calls`, `--max-seconds`) ran out; `git forum resume` continues
    /// with a fresh budget. Exit 3.
    StoppedOnBudget,
    /// A spend ceiling (`--max-tokens`, `--max-cost-usd`) refused a call, or a call reported
    /// more than it reserved ([`Outcome::ceiling`] names which); `git forum resume` continues
    /// with a fresh allowance. Exit 4.
    StoppedOnCeiling,
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
    /// An operator's halt (`git forum halt`) or a signal stopped the run, witnessed as
    /// `halted`; `git forum resume` continues it.
    Halted {
        /// Who halted it (`signal` for SIGINT or SIGTERM).
        by: String,
        /// Why.
        reason: String,
        /// The `halted` entry.
        seq: u64,
    },
}

impl Status {
    /// A stable name, the one the exit table gives (`runs`, the receipt, the `--json` report's
    /// `exit.name`, the daemon and MCP all say it): `answered`, `stopped_on_budget`,
    /// `stopped_on_ceiling`, `paused`, `rejected`, `halted`.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            Status::Answered => "answered",
            Status::StoppedOnBudget => "stopped_on_budget",
            Status::StoppedOnCeiling => "stopped_on_ceiling",
            Status::Paused { .. } => "paused",
            Status::Rejected { .. } => "rejected",
            Status::Halted { .. } => "halted",
        }
    }
}

/// The result of one `submit` or `resume`.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// How the run ended this time.
    pub status: Status,
    /// The seq of the run's `request` entry (the run's id).
    pub(crate) request_seq: u64,
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
    pub(crate) route_frame: Value,
    /// The ceiling that stopped the run (`max_tokens`, `max_cost_usd`), if one did.
    pub(crate) ceiling: Option<&'static str>,
    /// What this invocation's model calls spent, as the spend ledger counted it.
    pub(crate) spent: crate::spend::Amount,
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
    /// The run's worker cannot start (witnessed as `run_stopped` at stage `start`).
    #[error("the run could not start: {0}")]
    Start(String),
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
    /// The repository could not be worked in (a `--work` run): git or the file system failed.
    #[error("work: {0}")]
    Work(String),
    /// The secrets policy blocked a body (`block`): `secret_blocked` at `witnessed` says which
    /// rules; nothing of the body was written.
    #[error(
        "the run stopped: the secrets policy blocked a body carrying {} (secret_blocked at seq {witnessed})",
        rules.join(", ")
    )]
    SecretBlocked {
        /// The `secret_blocked` entry.
        witnessed: u64,
        /// The run (its request seq), when it had one.
        request_seq: Option<u64>,
        /// The rules that found something.
        rules: Vec<String>,
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

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into())
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
