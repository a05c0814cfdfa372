//! `git forum submit`, `git forum resume`, `git forum runs` and `git forum gate`: the control
//! loop at the command line. The loop itself is [`crate::run`]; this module loads the
//! roster, policy and runtime, refuses a broken configuration before any model is called,
//! shows progress on stderr, and prints the answer (or `{answer, checkpoint, receipt,
//! git_forum_receipt}`: Forum's action receipt, then ours).

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value as J, json};

use super::exec_flags::ExecutorArgs;
use super::plan::load_policy;
use super::route::load_roster;
use super::runtime::{RealFacts, load_runtime};
use super::{CliError, Ctx};
use crate::context::ContextBudget;
use crate::exec::{Fleet, Seats, config};
use crate::ledger::merkle::Accumulator;
use crate::ledger::{Entry, Storage, Value};
use crate::report;
use crate::run::{
    self, Clock, CommandContext, CommandVerifier, ContextProvider, Env, Event, GatePolicy,
    Interrupt, LedgerContext, Options, Outcome, Progress, Status, SystemClock, Verifier, status,
};
use crate::store::git::GitStore;

/// Flags shared by `submit` and `resume`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunFlags {
    /// Stop once this many model calls have started (a wave may overshoot by its width,
    /// because the check runs as each task starts).
    #[arg(long, value_name = "N")]
    pub max_model_calls: Option<u64>,
    /// Stop once this many seconds have passed (checked before each call).
    #[arg(long, value_name = "S")]
    pub max_seconds: Option<f64>,
    /// The context budget.
    #[command(flatten)]
    pub budget: BudgetFlags,
    /// Where request and per-task context come from.
    #[command(flatten)]
    pub context: ContextFlags,
    /// When the intent check flags the answer, ask the orchestrator seat whether it drifted
    /// or only paraphrased the request (one model call, skipped once the budget is spent),
    /// witnessed as intent_judgment.
    #[arg(long)]
    pub judge_intent: bool,
    /// When the delivery floor flags the answer, ask the orchestrator seat for a tighter one
    /// (one model call, skipped once the budget is spent); it is delivered only if strictly
    /// shorter and covering the request as well (revision, then the revised result).
    #[arg(long)]
    pub revise: bool,
    /// Check the delivered answer with CMD (split like a shell, run without one) as `CMD
    /// REQUEST ANSWER`: exit 0 verified (stdout says why), exit 1 refuted (stderr says why),
    /// anything else, a timeout or non-UTF-8 output could not decide. Witnessed as
    /// verification; never stops the run.
    #[arg(long, value_name = "CMD")]
    pub verify_cmd: Option<String>,
    /// Seconds the verifier command may take before it is killed (could not decide).
    #[arg(
        long,
        value_name = "S",
        default_value_t = 60.0,
        requires = "verify_cmd"
    )]
    pub verify_timeout: f64,
    /// Cap the tokens each task, synthesis and revision call may generate (plans, verdicts and
    /// judgments keep their own limits, so their JSON can close).
    #[arg(long, value_name = "N")]
    pub max_output_tokens: Option<u32>,
    /// Witness a checkpoint and sync the ledger after each wave.
    #[arg(long)]
    pub checkpoint_each_wave: bool,
    /// Check the answer against this delivery profile (operator, engineer, researcher,
    /// executive); default: the route frame's.
    #[arg(long, value_name = "P")]
    pub delivery_profile: Option<String>,
    /// Wait for a human decision before wave N (0-based; repeatable): the run pauses with a
    /// gate_pending entry; `git forum gate approve` then `git forum resume` continue it.
    #[arg(long = "gate-wave", value_name = "N")]
    pub gate_waves: Vec<usize>,
    /// A pending gate expires after S seconds (applied when the run is resumed).
    #[arg(long, value_name = "S", requires = "gate_waves")]
    pub gate_deadline: Option<f64>,
    /// What an expired gate becomes.
    #[arg(long, value_name = "DECISION", value_parser = ["approve", "reject"], requires = "gate_deadline")]
    pub gate_on_expiry: Option<String>,
    /// Roster file (default: .forum/roster.toml, else the built-in roster).
    #[arg(long, value_name = "FILE")]
    pub roster: Option<PathBuf>,
    /// Policy file (default: .forum/policy.toml, else no limits beyond 6 tasks at a time).
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Nothing on stderr but errors (no progress, no closing summary).
    #[arg(long, short, conflicts_with = "progress")]
    pub quiet: bool,
    /// Progress on stderr even when it is not a terminal (a log file, CI).
    #[arg(long)]
    pub progress: bool,
    /// Which executors run the seats.
    #[command(flatten)]
    pub exec: ExecutorArgs,
}

/// The four context-budget flags (forum-features §1.3), shared by `submit`, `resume` and
/// `context preflight`. Tokens are approximate: UTF-8 bytes / 4.
#[derive(Debug, Clone, clap::Args)]
pub struct BudgetFlags {
    /// Run-wide cap on admitted context tokens (all slices share one meter).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub context_token_budget: Option<i64>,
    /// Cap on request-level context (--context-cmd, --use-capsule-context).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub request_context_token_budget: Option<i64>,
    /// Cap on each per-task context slice.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub task_context_token_budget: Option<i64>,
    /// Cap on each upstream output injected into a prompt, and each synthesis input.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub upstream_token_budget: Option<i64>,
}

impl BudgetFlags {
    /// The context budget these flags set, `None` when none is given. A negative value is a
    /// usage error (exit 2).
    pub fn budget(&self) -> Result<Option<ContextBudget>, CliError> {
        let check = |flag: &str, v: Option<i64>| -> Result<Option<u64>, CliError> {
            match v {
                Some(n) if n < 0 => Err(CliError::usage(format!(
                    "--{flag} {n}: a token budget must be 0 or more"
                ))),
                other => Ok(other.map(|n| n as u64)),
            }
        };
        let total = check("context-token-budget", self.context_token_budget)?;
        let request = check(
            "request-context-token-budget",
            self.request_context_token_budget,
        )?;
        let task = check("task-context-token-budget", self.task_context_token_budget)?;
        let upstream = check("upstream-token-budget", self.upstream_token_budget)?;
        if total.is_none() && request.is_none() && task.is_none() && upstream.is_none() {
            return Ok(None);
        }
        Ok(Some(ContextBudget {
            max_total_tokens: total,
            max_request_tokens: request,
            max_task_tokens: task,
            max_upstream_tokens: upstream,
            bytes_per_token: 4,
        }))
    }
}

/// Where request and per-task context come from (shared by `submit`, `resume` and
/// `context preflight`).
#[derive(Debug, Clone, clap::Args)]
pub struct ContextFlags {
    /// Read context from CMD (split like a shell, run without one): `CMD request REQUEST`
    /// before planning, and `CMD task TASK_ID INSTRUCTION` before each task. Its stdout is the
    /// context (empty: none); a failure, a timeout or non-UTF-8 output is witnessed and the
    /// run goes on without that context.
    #[arg(long, value_name = "CMD", conflicts_with = "use_capsule_context")]
    pub context_cmd: Option<String>,
    /// Seconds each context command may take before it is killed.
    #[arg(
        long,
        value_name = "S",
        default_value_t = 60.0,
        requires = "context_cmd"
    )]
    pub context_timeout: f64,
    /// Use the ledger's context capsule (`git forum capsule --text`) as the request context.
    #[arg(long)]
    pub use_capsule_context: bool,
}

/// Capsules fed to a run are Forum's defaults: the last 8 task results, texts clipped to 240
/// code points.
pub const CAPSULE_MAX_ITEMS: usize = 8;
/// See [`CAPSULE_MAX_ITEMS`].
pub const CAPSULE_MAX_TEXT_CHARS: usize = 240;

/// A positive, finite number of seconds from a flag.
fn seconds(flag: &str, s: f64) -> Result<Duration, CliError> {
    if !(s.is_finite() && s > 0.0) {
        return Err(CliError::usage(format!(
            "--{flag} {s} must be a number of seconds above 0"
        )));
    }
    Ok(Duration::from_secs_f64(s))
}

/// Splits a `--*-cmd` value; an unsplittable or empty line is a usage error.
fn argv_of(flag: &str, line: &str) -> Result<Vec<String>, CliError> {
    config::split_cmd(line).map_err(|e| CliError::usage(format!("--{flag}: {e}")))
}

/// The capsule text of a ledger whose entries up to some seq were read already (`pre`, read
/// in one walk) and whose newer entries are read through `ledger`.
pub fn capsule_text_of(
    pre: &[(Entry, Option<Value>)],
    ledger: &dyn Storage,
    max_items: usize,
    max_text_chars: usize,
) -> Result<String, String> {
    let mut items = pre.to_vec();
    let n = ledger.len().map_err(|e| e.to_string())?;
    for seq in items.len() as u64..n {
        let e = ledger
            .get(seq)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("the ledger has no entry at seq {seq}"))?;
        let body = ledger.payload_at(seq).map_err(|e| e.to_string())?;
        items.push((e, body));
    }
    let snap = report::Snapshot::from_items(items);
    Ok(report::capsule_text(&report::build_context_capsule(
        &snap,
        max_items,
        max_text_chars,
    )))
}

/// Every entry of a git ledger with its body, in one walk (none when it does not exist yet).
pub fn preload(store: &GitStore) -> Result<Vec<(Entry, Option<Value>)>, CliError> {
    if !store.exists()? {
        return Ok(Vec::new());
    }
    Ok(crate::surface::reports::load_git(store)?)
}

impl ContextFlags {
    /// The context provider these flags set, if any. `pre` is the ledger as read before the
    /// run (for the capsule).
    pub fn provider(
        &self,
        pre: impl FnOnce() -> Result<Vec<(Entry, Option<Value>)>, CliError>,
    ) -> Result<Option<Arc<dyn ContextProvider>>, CliError> {
        if let Some(line) = &self.context_cmd {
            let argv = argv_of("context-cmd", line)?;
            let timeout = seconds("context-timeout", self.context_timeout)?;
            return Ok(Some(Arc::new(CommandContext::new(argv, timeout))));
        }
        if self.use_capsule_context {
            let pre = pre()?;
            return Ok(Some(Arc::new(LedgerContext::new(
                "the ledger capsule",
                move |ledger| {
                    capsule_text_of(&pre, ledger, CAPSULE_MAX_ITEMS, CAPSULE_MAX_TEXT_CHARS)
                },
            ))));
        }
        Ok(None)
    }
}

/// Run a request through route, plan, waves, validation, escalation and synthesis.
#[derive(Debug, clap::Args)]
pub struct SubmitArgs {
    /// The request.
    #[arg(required_unless_present = "resume")]
    pub request: Vec<String>,
    /// Continue the latest unfinished run instead (same as `git forum resume`).
    #[arg(long, conflicts_with = "request")]
    pub resume: bool,
    /// Limits and quality options of the run.
    #[command(flatten)]
    pub flags: RunFlags,
}

/// Continue an unfinished run (the latest, or RUN: the seq of its request).
#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    /// The run's request seq (see `git forum runs`).
    pub run: Option<u64>,
    /// Limits and quality options of the resumed run.
    #[command(flatten)]
    pub flags: RunFlags,
}

/// List the runs in the ledger and how each stands.
#[derive(Debug, clap::Args)]
pub struct RunsArgs {}

/// Human approval of gated waves.
#[derive(Debug, clap::Args)]
pub struct GateArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: GateCommand,
}

/// A gate command.
#[derive(Debug, clap::Subcommand)]
pub enum GateCommand {
    /// List the gates waiting for a decision.
    List,
    /// Let the wave run.
    Approve(DecideArgs),
    /// Let the wave run with rewritten instructions (--edit ID=INSTRUCTION, repeatable).
    Edit(DecideArgs),
    /// Stop the run before the wave.
    Reject(DecideArgs),
}

/// Which gate to decide, by whom, and how.
#[derive(Debug, clap::Args)]
pub struct DecideArgs {
    /// The run (its request seq); default: the run of the only pending gate.
    #[arg(long, value_name = "SEQ")]
    pub run: Option<u64>,
    /// The wave; default: the run's pending wave.
    #[arg(long, value_name = "N")]
    pub wave: Option<u64>,
    /// Who decides (default: git config user.name, else $USER).
    #[arg(long)]
    pub approver: Option<String>,
    /// A note kept with the decision.
    #[arg(long)]
    pub note: Option<String>,
    /// Why (reject).
    #[arg(long)]
    pub reason: Option<String>,
    /// TASK_ID=INSTRUCTION (edit; repeatable).
    #[arg(long = "edit", value_name = "ID=TEXT")]
    pub edits: Vec<String>,
}

/// Every entry gets the timestamp GIT_FORUM_TIMESTAMP gives (reproducible runs); elapsed
/// time is real.
struct PinnedClock {
    ts: f64,
    inner: SystemClock,
}

impl Clock for PinnedClock {
    fn now(&self) -> f64 {
        self.ts
    }

    fn elapsed(&self) -> f64 {
        self.inner.elapsed()
    }
}

/// Progress on stderr, one line per event.
struct Stderr {
    max: Option<u64>,
}

impl Progress for Stderr {
    fn event(&self, e: &Event) {
        let line = match e {
            Event::Planning => "planning…".to_string(),
            Event::Planned { tasks, waves } => format!("plan: {tasks} tasks in {waves} waves"),
            Event::Wave { index, of, tasks } => {
                format!("wave {}/{of}: {}", index + 1, tasks.join(", "))
            }
            Event::TaskStarted { id, agent, model } => {
                format!("  {id} ({agent}) running on {model}")
            }
            Event::TaskFinished { id, ok, model } => {
                format!("  {id} {} ({model})", if *ok { "done" } else { "failed" })
            }
            Event::Validating { id } => format!("  validating {id}"),
            Event::Verdict { id, decision } => format!("  {id}: {decision}"),
            Event::Escalating { id, to } => format!("  {id}: escalating to {to}"),
            Event::Synthesizing => "synthesizing the answer…".to_string(),
            Event::Calls { spent, .. } => {
                if let Some(m) = self.max {
                    format!("  model calls: {spent}/{m}")
                } else {
                    return;
                }
            }
            Event::Paused { wave } => {
                format!("paused before wave {wave}: waiting for a gate decision")
            }
            Event::Stopped { reason } => format!("stopped: {reason}"),
            Event::Context { task: None } => "reading the request context…".to_string(),
            Event::Context { task: Some(id) } => format!("  {id}: context read"),
            Event::ContextFailed { task, reason } => format!(
                "{}context unavailable, going on without it: {reason}",
                task.as_ref().map_or(String::new(), |t| format!("  {t}: "))
            ),
            Event::Revising => "revising the answer (the delivery floor flagged it)…".to_string(),
            Event::Judging => "judging intent (the intent check flagged the answer)…".to_string(),
            Event::Verifying => "verifying the answer…".to_string(),
            Event::Skipped { step, reason } => format!("skipped the {step}: {reason}"),
        };
        eprintln!("{line}");
    }
}

fn options(ctx: &Ctx, f: &RunFlags) -> Result<Options, CliError> {
    if let Some(s) = f.max_seconds
        && !(s.is_finite() && s >= 0.0)
    {
        return Err(CliError::usage(format!(
            "--max-seconds {s} must be a number of seconds, 0 or more"
        )));
    }
    if let Some(s) = f.gate_deadline
        && !(s.is_finite() && s >= 0.0)
    {
        return Err(CliError::usage(format!(
            "--gate-deadline {s} must be a number of seconds, 0 or more"
        )));
    }
    let context_budget = f.budget.budget()?;
    let verifier: Option<Arc<dyn Verifier>> = match &f.verify_cmd {
        Some(line) => Some(Arc::new(CommandVerifier::new(
            argv_of("verify-cmd", line)?,
            seconds("verify-timeout", f.verify_timeout)?,
        ))),
        None => None,
    };
    // Checked here so a bad flag is refused before the ledger is read.
    if f.context.context_cmd.is_some() {
        f.context.provider(|| Ok(Vec::new()))?;
    }
    if let Some(p) = &f.delivery_profile {
        let valid = ["operator", "engineer", "researcher", "executive"];
        if !valid.contains(&p.trim().to_lowercase().as_str()) {
            return Err(CliError::usage(format!(
                "unknown delivery profile {p:?}; valid profiles: {}",
                valid.join(", ")
            )));
        }
    }
    Ok(Options {
        max_model_calls: f.max_model_calls,
        max_seconds: f.max_seconds,
        context_budget,
        policy: load_policy(ctx, f.policy.as_deref())?,
        checkpoint_each_wave: f.checkpoint_each_wave,
        delivery_profile: f.delivery_profile.clone(),
        gates: GatePolicy {
            waves: f.gate_waves.iter().copied().collect(),
            question: None,
            deadline_seconds: f.gate_deadline,
            on_expiry: f.gate_on_expiry.clone(),
        },
        max_output_tokens: f.max_output_tokens,
        judge_intent: f.judge_intent,
        revise: f.revise,
        verifier,
        context: None,
        interrupt: None,
    })
}

/// Loads everything a run needs and refuses a broken configuration before any model call.
fn prepare(ctx: &Ctx, f: &RunFlags) -> Result<(crate::roster::Roster, Fleet, Options), CliError> {
    let roster = load_roster(ctx, f.roster.as_deref())?;
    let opts = options(ctx, f)?;
    let loaded = load_runtime(ctx, &f.exec)?;
    let issues = config::issues(&loaded.runtime, &roster, &RealFacts);
    if let Some(first) = issues.first() {
        let more = if issues.len() > 1 {
            format!(
                " (and {} more: git forum runtime inspect)",
                issues.len() - 1
            )
        } else {
            String::new()
        };
        return Err(CliError::usage(format!("cannot run: {first}{more}")));
    }
    let fleet =
        Fleet::new(loaded.runtime).map_err(|e| CliError::usage(format!("cannot run: {e}")))?;
    Ok((roster, fleet, opts))
}

fn root_of(store: &dyn Storage) -> Result<String, CliError> {
    let mut acc = Accumulator::default();
    for seq in 0..store.len().map_err(|e| CliError::fail(e.to_string()))? {
        if let Some(e) = store.get(seq).map_err(|e| CliError::fail(e.to_string()))? {
            acc.push(&e.entry_hash);
        }
    }
    Ok(acc.root())
}

/// The receipt of one run: its entries, calls per model, verdicts, route frame.
pub fn receipt(outcome: &Outcome, ledger: &str, checkpoint: &str, size: u64) -> J {
    json!({
        "schema": "git-forum.receipt/v1",
        "ledger": ledger,
        "status": outcome.status.as_str(),
        "request_seq": outcome.request_seq,
        "answer_seq": outcome.answer_seq,
        "entries": outcome.written,
        "ledger_size": size,
        "checkpoint": checkpoint,
        "model_calls": outcome.total_calls(),
        "calls_per_model": outcome.calls,
        "verdicts": outcome.verdicts,
        "route_frame": outcome.route_frame.to_serde(),
    })
}

/// Forum's action receipt (`project-telos.action-receipt/v1`, what a client written for Forum
/// reads under `receipt`) of the run `outcome` reports: built over the run's own entries with
/// the ledger's checkpoint and deep verification, from what the run was given (its call and
/// seconds budget, its context budget, the delivery profile asked for) and the answer it
/// delivered.
pub fn forum_receipt(store: &GitStore, outcome: &Outcome, opts: &Options) -> Result<J, String> {
    use crate::report::receipt;
    let items = crate::surface::reports::load_git(store).map_err(|e| e.to_string())?;
    let mut s = report::Snapshot::from_items(items);
    s.deep_verified &= store.verify(true).map_err(|e| e.to_string())?.passed();
    let Some(mut inputs) = receipt::inputs_for_run(&s, outcome.request_seq) else {
        return Err(format!(
            "the ledger has no request at seq {}",
            outcome.request_seq
        ));
    };
    if let Some(a) = &outcome.answer {
        inputs.answer = a.clone();
    }
    let mut budget = serde_json::Map::new();
    if let Some(n) = opts.max_model_calls {
        budget.insert("max_model_calls".into(), json!(n));
    }
    if let Some(secs) = opts.max_seconds {
        budget.insert("max_seconds".into(), json!(secs));
    }
    inputs.budget = Value::from_serde(&J::Object(budget));
    if let Some(b) = &opts.context_budget {
        let mut limits = serde_json::Map::new();
        limits.insert("bytes_per_token".into(), json!(b.bytes_per_token));
        for (k, v) in [
            ("max_request_tokens", b.max_request_tokens),
            ("max_task_tokens", b.max_task_tokens),
            ("max_total_tokens", b.max_total_tokens),
            ("max_upstream_tokens", b.max_upstream_tokens),
        ] {
            if let Some(n) = v {
                limits.insert(k.into(), json!(n));
            }
        }
        inputs.context_limits = Value::from_serde(&J::Object(limits));
    }
    inputs.delivery_profile = opts.delivery_profile.clone();
    let roots = status::roots(&s.entries());
    let run = s.slice(|e| roots.get(&e.seq) == Some(&outcome.request_seq));
    Ok(receipt::receipt(&run, &inputs).to_serde())
}

fn report(
    ctx: &Ctx,
    store: &mut crate::store::git::GitStore,
    outcome: Outcome,
    opts: &Options,
    quiet: bool,
) -> Result<(), CliError> {
    let checkpoint = root_of(store)?;
    let size = store.len().map_err(|e| CliError::fail(e.to_string()))?;
    if ctx.json {
        let forum = forum_receipt(store, &outcome, opts).map_err(|e| {
            CliError::fail(format!(
                "the run is witnessed, but its receipt could not be built: {e} (git forum receipt {} builds it again)",
                outcome.request_seq
            ))
        })?;
        return ctx.out_json(&json!({
            "answer": outcome.answer,
            "checkpoint": checkpoint,
            "receipt": forum,
            "git_forum_receipt": receipt(&outcome, &ctx.ledger, &checkpoint, size),
        }));
    }
    match &outcome.status {
        Status::Answered | Status::StoppedOnBudget => {
            if let Some(a) = &outcome.answer {
                ctx.out(a)?;
            }
        }
        _ => {}
    }
    let next = match &outcome.status {
        Status::Answered => format!(
            "run {} answered in {} model calls; see `git forum log`, `git forum show {} --payload`, `git forum verify`",
            outcome.request_seq,
            outcome.total_calls(),
            outcome.answer_seq.unwrap_or(0)
        ),
        Status::StoppedOnBudget => format!(
            "run {} stopped on its budget after {} model calls; `git forum resume {}` continues it",
            outcome.request_seq,
            outcome.total_calls(),
            outcome.request_seq
        ),
        Status::Paused { wave } => format!(
            "run {r} is paused before wave {wave}: `git forum gate approve --run {r}` (or `gate edit`, `gate reject`; `git forum gate list` shows it), then `git forum resume {r}`",
            r = outcome.request_seq
        ),
        Status::Rejected { wave } => format!(
            "run {} stopped: the gate before wave {wave} was rejected",
            outcome.request_seq
        ),
    };
    if !quiet {
        eprintln!("{next}");
        eprintln!("checkpoint {checkpoint} ({size} entries)");
    }
    Ok(())
}

fn go(
    ctx: &Ctx,
    flags: &RunFlags,
    resume_run: Option<Option<u64>>,
    request: Option<String>,
) -> Result<(), CliError> {
    if let Some(r) = &request {
        crate::route::check_request(r).map_err(|e| CliError::usage(e.to_string()))?;
    }
    if resume_run.is_some() && !flags.gate_waves.is_empty() {
        return Err(CliError::usage(
            "--gate-wave is set when a run is submitted; a resumed run keeps the gates it was submitted with",
        ));
    }
    let (roster, fleet, mut opts) = prepare(ctx, flags)?;
    let mut store = ctx.store()?;
    opts.context = flags.context.provider(|| preload(&store))?;
    let system = SystemClock::new();
    let pinned = match std::env::var("GIT_FORUM_TIMESTAMP") {
        Ok(_) => Some(PinnedClock {
            ts: ctx.now(None)?,
            inner: SystemClock::new(),
        }),
        Err(_) => None,
    };
    let clock: &dyn Clock = match &pinned {
        Some(p) => p,
        None => &system,
    };
    let watching = flags.progress || (!flags.quiet && std::io::stderr().is_terminal());
    let stderr = Stderr {
        max: opts.max_model_calls,
    };
    let silent = run::Silent;
    let progress: &dyn Progress = if watching { &stderr } else { &silent };
    let seats: &dyn Seats = &fleet;
    let env = Env {
        roster: &roster,
        seats,
        clock,
        progress,
    };
    let interrupt = Arc::new(Interrupt::new());
    watch_signals(interrupt.clone())?;
    opts.interrupt = Some(interrupt);
    let result = match (resume_run, request) {
        (Some(run_seq), _) => run::resume(&mut store, &env, &opts, run_seq),
        (None, Some(r)) => run::submit(&mut store, &env, &opts, &r),
        (None, None) => return Err(CliError::usage("give a request, or --resume")),
    };
    match result {
        Ok(outcome) => report(ctx, &mut store, outcome, &opts, flags.quiet),
        Err(run::RunError::Request(m)) => Err(CliError::usage(m)),
        Err(run::RunError::Resume(m)) => Err(CliError::fail(m)),
        Err(
            ref e @ run::RunError::Interrupted {
                ref signal,
                witnessed,
                request_seq,
            },
        ) => {
            let what = match (witnessed, request_seq) {
                (Some(seq), Some(r)) => format!(
                    "its commands were killed and seq {seq} witnesses it; `git forum resume {r}` continues the run"
                ),
                _ => "its commands were killed before the run was witnessed".to_string(),
            };
            Err(CliError {
                code: 128 + signal_number(signal),
                message: Some(format!("{e}: {what}")),
            })
        }
        Err(e @ run::RunError::Gated { request_seq, .. }) => Err(CliError::fail(format!(
            "{e}: `git forum gate approve --run {request_seq}` (or `gate edit`, `gate reject`), then `git forum resume {request_seq}`"
        ))),
        Err(e @ (run::RunError::Plan(_) | run::RunError::Synthesis(_))) => {
            Err(CliError::fail(format!(
                "{e} (the run is witnessed up to here: `git forum runs` shows it, `git forum resume` tries that stage again)"
            )))
        }
        Err(e) => Err(CliError::fail(format!(
            "{e} (what was witnessed stays in the ledger: `git forum runs`, `git forum verify`)"
        ))),
    }
}

/// Seconds an interrupted run has to wind down (a model call over HTTP cannot be cut short)
/// before the process exits anyway.
const INTERRUPT_GRACE: Duration = Duration::from_secs(10);

fn signal_number(name: &str) -> u8 {
    match name {
        "SIGINT" => 2,
        _ => 15,
    }
}

/// Watches for SIGINT and SIGTERM while a run is in flight. The first one raises `interrupt`
/// (the run writes nothing more and ends by witnessing it) and kills the process group of
/// every command running (workers, context commands, verifiers); a second one, or a run that
/// has not wound down after [`INTERRUPT_GRACE`], ends the process at once.
fn watch_signals(interrupt: Arc<Interrupt>) -> Result<(), CliError> {
    use std::future::poll_fn;
    use std::task::Poll;
    use tokio::signal::unix::{SignalKind, signal};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::fail(format!("cannot watch for signals: {e}")))?;
    let (int, term) = {
        let _guard = rt.enter();
        let int = signal(SignalKind::interrupt());
        let term = signal(SignalKind::terminate());
        match (int, term) {
            (Ok(i), Ok(t)) => (i, t),
            (Err(e), _) | (_, Err(e)) => {
                return Err(CliError::fail(format!("cannot watch for signals: {e}")));
            }
        }
    };
    let (mut int, mut term) = (int, term);
    fn either(
        int: &mut tokio::signal::unix::Signal,
        term: &mut tokio::signal::unix::Signal,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<&'static str> {
        if int.poll_recv(cx).is_ready() {
            return Poll::Ready("SIGINT");
        }
        if term.poll_recv(cx).is_ready() {
            return Poll::Ready("SIGTERM");
        }
        Poll::Pending
    }
    std::thread::spawn(move || {
        rt.block_on(async move {
            use std::future::Future;
            let first = poll_fn(|cx| either(&mut int, &mut term, cx)).await;
            interrupt.raise(first);
            crate::exec::command::stop_all();
            let mut grace = std::pin::pin!(tokio::time::sleep(INTERRUPT_GRACE));
            poll_fn(|cx| {
                if grace.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(());
                }
                either(&mut int, &mut term, cx).map(|_| ())
            })
            .await;
            crate::exec::command::stop_all();
            eprintln!(
                "error: interrupted by {first}: the run did not wind down in time (a model call was still out); `git forum runs` shows it as interrupted"
            );
            std::process::exit(128 + i32::from(signal_number(first)));
        })
    });
    Ok(())
}

/// `git forum submit`.
pub fn submit(ctx: &Ctx, args: SubmitArgs) -> Result<(), CliError> {
    if args.resume {
        return go(ctx, &args.flags, Some(None), None);
    }
    let request = args.request.join(" ");
    go(ctx, &args.flags, None, Some(request))
}

/// `git forum resume`.
pub fn resume(ctx: &Ctx, args: ResumeArgs) -> Result<(), CliError> {
    go(ctx, &args.flags, Some(args.run), None)
}

fn all_entries(store: &dyn Storage) -> Result<Vec<Entry>, CliError> {
    let n = store.len().map_err(|e| CliError::fail(e.to_string()))?;
    let mut out = Vec::with_capacity(n as usize);
    for seq in 0..n {
        if let Some(e) = store.get(seq).map_err(|e| CliError::fail(e.to_string()))? {
            out.push(e);
        }
    }
    Ok(out)
}

/// Bodies for the run projections, which take a body or nothing: the first body that cannot be
/// read (one that does not hash to its entry included) is kept, so that the command fails with it
/// instead of reading the body as absent.
struct Bodies<'a> {
    store: &'a dyn Storage,
    failed: std::cell::RefCell<Option<String>>,
}

impl<'a> Bodies<'a> {
    fn new(store: &'a dyn Storage) -> Bodies<'a> {
        Bodies {
            store,
            failed: std::cell::RefCell::new(None),
        }
    }

    fn get(&self, e: &Entry) -> Option<J> {
        match self.store.payload_at(e.seq) {
            Ok(b) => b.map(|v| v.to_serde()),
            Err(err) => {
                self.failed.borrow_mut().get_or_insert(err.to_string());
                None
            }
        }
    }

    /// The first failure, if any body could not be read.
    fn done(&self) -> Result<(), CliError> {
        match self.failed.borrow_mut().take() {
            Some(m) => Err(CliError::fail(m)),
            None => Ok(()),
        }
    }
}

/// `git forum runs`.
pub fn runs(ctx: &Ctx, _: RunsArgs) -> Result<(), CliError> {
    let store = ctx.store()?;
    let entries = all_entries(&store)?;
    let bodies = Bodies::new(&store);
    let runs = status::runs(&entries, |e| bodies.get(e));
    bodies.done()?;
    if ctx.json {
        let rows: Vec<J> = runs
            .iter()
            .map(|r| {
                let mut calls: BTreeMap<String, u64> = BTreeMap::new();
                for e in r.entries.iter().filter_map(|s| entries.get(*s as usize)) {
                    if e.kind == "result"
                        && let Some(m) = bodies
                            .get(e)
                            .and_then(|b| b.get("model").and_then(J::as_str).map(str::to_string))
                    {
                        *calls.entry(m).or_default() += 1;
                    }
                }
                json!({
                    "request_seq": r.request_seq,
                    "request": r.request,
                    "state": r.state.as_str(),
                    "run_seq": r.run_seq,
                    "tasks": r.plan.as_ref().map(|p| p.tasks.len()),
                    "answer_seq": r.answer.as_ref().map(|a| a.0),
                    "entries": r.entries.len(),
                    "results_per_model": calls,
                })
            })
            .collect();
        bodies.done()?;
        return ctx.out_json(&J::Array(rows));
    }
    if runs.is_empty() {
        return ctx.out("no runs in this ledger (git forum submit \"...\" starts one)");
    }
    for r in &runs {
        let tasks = r.plan.as_ref().map_or(0, |p| p.tasks.len());
        let mut req: String = r.request.chars().take(60).collect();
        if r.request.chars().count() > 60 {
            req.push('…');
        }
        let detail = match &r.state {
            run::status::RunState::Failed { stage, reason } => format!(" ({stage}: {reason})"),
            run::status::RunState::Paused { wave } | run::status::RunState::Rejected { wave } => {
                format!(" (wave {wave})")
            }
            _ => String::new(),
        };
        ctx.out(&format!(
            "run {:>5}  {:<17} {tasks} tasks, {} entries  {req}{detail}",
            r.request_seq,
            r.state.as_str(),
            r.entries.len()
        ))?;
    }
    Ok(())
}

fn approver(args: &DecideArgs, ctx: &Ctx) -> String {
    if let Some(a) = &args.approver {
        return a.clone();
    }
    if let Ok(repo) = crate::store::git::open_repo(&ctx.dir)
        && let Some(name) = repo.config_snapshot().string("user.name")
    {
        return name.to_string();
    }
    std::env::var("USER").unwrap_or_else(|_| "operator".into())
}

/// `git forum gate`.
pub fn gate(ctx: &Ctx, args: GateArgs) -> Result<(), CliError> {
    let mut store = ctx.store()?;
    let entries = all_entries(&store)?;
    let pending = {
        let bodies = Bodies::new(&store);
        let pending = status::pending_gates(&entries, |e| bodies.get(e));
        bodies.done()?;
        pending
    };
    let (kind, d) = match args.command {
        GateCommand::List => {
            if ctx.json {
                let rows: Vec<J> = pending
                    .iter()
                    .map(|g| {
                        json!({"seq": g.seq, "run": g.request_seq, "run_seq": g.run_seq, "wave": g.wave,
                               "tasks": g.tasks, "question": g.question, "deadline": g.deadline, "on_expiry": g.on_expiry})
                    })
                    .collect();
                return ctx.out_json(&J::Array(rows));
            }
            if pending.is_empty() {
                return ctx.out("no pending gates");
            }
            for g in &pending {
                let bound = match (g.deadline, &g.on_expiry) {
                    (Some(d), Some(o)) => format!(" [deadline {d:.0}, then {o}]"),
                    _ => String::new(),
                };
                ctx.out(&format!(
                    "run {} wave {} ({}): {}{bound}",
                    g.request_seq.map_or("-".into(), |s| s.to_string()),
                    g.wave,
                    g.tasks.join(", "),
                    g.question
                ))?;
            }
            return Ok(());
        }
        GateCommand::Approve(d) => ("gate_approved", d),
        GateCommand::Edit(d) => ("gate_edited", d),
        GateCommand::Reject(d) => ("gate_rejected", d),
    };
    let mut edits = serde_json::Map::new();
    if kind == "gate_edited" {
        if d.edits.is_empty() {
            return Err(CliError::usage(
                "gate edit needs at least one --edit TASK_ID=INSTRUCTION",
            ));
        }
        for e in &d.edits {
            match e.split_once('=') {
                Some((id, text)) if !id.trim().is_empty() && !text.trim().is_empty() => {
                    edits.insert(id.trim().to_string(), J::String(text.to_string()));
                }
                _ => {
                    return Err(CliError::usage(format!(
                        "--edit {e:?} must be TASK_ID=INSTRUCTION"
                    )));
                }
            }
        }
    }
    let candidates: Vec<&status::PendingGate> = pending
        .iter()
        .filter(|g| d.run.is_none_or(|r| g.request_seq == Some(r)))
        .filter(|g| d.wave.is_none_or(|w| g.wave == w))
        .collect();
    let g = match candidates.as_slice() {
        [one] => *one,
        [] => {
            let what = match (d.run, d.wave) {
                (Some(r), Some(w)) => format!("run {r} has no pending gate before wave {w}"),
                (Some(r), None) => format!("run {r} has no pending gate"),
                (None, Some(w)) => format!("no run has a pending gate before wave {w}"),
                (None, None) => "no gate is pending".into(),
            };
            return Err(CliError::fail(format!(
                "{what} (git forum gate list shows the pending ones)"
            )));
        }
        _ => {
            return Err(CliError::usage(
                "several gates are pending: name one with --run SEQ and --wave N (git forum gate list)",
            ));
        }
    };
    if kind == "gate_edited" {
        for id in edits.keys() {
            if !g.tasks.contains(id) {
                return Err(CliError::usage(format!(
                    "--edit {id}: wave {} has no task {id} (its tasks: {})",
                    g.wave,
                    g.tasks.join(", ")
                )));
            }
        }
    }
    let mut payload = json!({"run_seq": g.run_seq, "wave": g.wave, "approver": approver(&d, ctx)});
    match kind {
        "gate_rejected" => {
            payload["reason"] = json!(
                d.reason
                    .clone()
                    .unwrap_or_else(|| "rejected by the approver".into())
            )
        }
        "gate_edited" => {
            payload["edits"] = J::Object(edits);
            payload["note"] = json!(d.note);
        }
        _ => payload["note"] = json!(d.note),
    }
    let new = crate::ledger::NewEntry {
        actor: "operator".into(),
        kind: kind.into(),
        causal_parent: Some(g.seq as i64),
        payload: crate::ledger::canonical::Value::from_serde(&payload),
        ts: ctx.now(None)?,
    };
    let done = store.append_entry(&new)?;
    store.sync()?;
    let resolved = &kind["gate_".len()..];
    if ctx.json {
        return ctx.out_json(&json!({"resolved": resolved, "seq": done.entry.seq, "run": g.request_seq, "run_seq": g.run_seq, "wave": g.wave}));
    }
    ctx.out(&format!(
        "gate before wave {} of run {} {resolved} (seq {}); `git forum resume {}` continues the run",
        g.wave,
        g.request_seq.map_or("-".into(), |s| s.to_string()),
        done.entry.seq,
        g.request_seq.map_or(String::new(), |s| s.to_string())
    ))
}

fn short(text: &str, n: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() > n {
        let cut: String = one_line.chars().take(n).collect();
        format!("{cut}…")
    } else {
        one_line
    }
}

/// What an entry of a run says, in a few words.
fn glance(kind: &str, p: &J) -> String {
    let s = |k: &str| p.get(k).and_then(J::as_str).unwrap_or("");
    match kind {
        "request" => short(s("text"), 70),
        "route_frame" => format!(
            "{} / {} → {}",
            s("domain"),
            s("intent"),
            s("delivery_profile")
        ),
        "plan" => {
            let waves = p.get("waves").and_then(J::as_array).map_or(0, Vec::len);
            let tasks = p
                .get("waves")
                .and_then(J::as_array)
                .map_or(0, |w| w.iter().filter_map(J::as_array).map(Vec::len).sum());
            format!("{tasks} tasks in {waves} waves")
        }
        "task" => format!(
            "{} on {}: {}",
            s("id"),
            s("agent"),
            short(s("instruction"), 60)
        ),
        "result" if p.get("revised_from").is_some() => format!(
            "revised answer (of {}): {}",
            p.get("revised_from")
                .map_or(String::new(), |v| v.to_string()),
            short(s("answer"), 50)
        ),
        "result" if p.get("answer").is_some() => format!("answer: {}", short(s("answer"), 60)),
        "result" => format!(
            "{} {} by {}{}: {}",
            s("id"),
            if p.get("ok") == Some(&J::Bool(true)) {
                "ok"
            } else {
                "failed"
            },
            s("model"),
            p.get("error")
                .and_then(J::as_str)
                .map_or(String::new(), |e| format!(" ({e})")),
            short(s("output"), 50)
        ),
        "verdict" => format!(
            "{} {} {}: {}",
            s("id"),
            p.get("decision").and_then(J::as_str).unwrap_or(
                if p.get("ok") == Some(&J::Bool(true)) {
                    "pass"
                } else {
                    "fail"
                }
            ),
            p.get("score").map_or(String::new(), |v| v.to_string()),
            short(s("reason"), 50)
        ),
        "tier_escalation" => format!("{} → {}", s("id"), s("to")),
        "budget" => format!(
            "stopped after {} model calls",
            p.get("model_calls")
                .map_or(String::new(), |v| v.to_string())
        ),
        "run_stopped" => format!("{}: {}", s("stage"), short(s("reason"), 60)),
        "degraded" => format!(
            "wave {}: nothing passed",
            p.get("wave").map_or(String::new(), |v| v.to_string())
        ),
        "context_budget" => format!("{} {} ({})", s("label"), s("action"), s("reason")),
        "context" => {
            let scope = p
                .get("task")
                .and_then(J::as_str)
                .map_or("request".to_string(), |t| format!("task {t}"));
            match p.get("error").and_then(J::as_str) {
                Some(code) => format!("{scope}: none ({code})"),
                None => format!("{scope}: {}", short(s("context"), 60)),
            }
        }
        "intent_judgment" => format!(
            "{} {}: {}",
            match p.get("ok") {
                Some(J::Bool(true)) => "paraphrased",
                Some(J::Bool(false)) => "drifted",
                _ => "undecided",
            },
            p.get("score").map_or(String::new(), |v| v.to_string()),
            short(s("reason"), 50)
        ),
        "revision" => match p.get("accepted") {
            Some(J::Bool(true)) => format!(
                "accepted: {} -> {} words",
                p.get("words_before")
                    .map_or(String::new(), |v| v.to_string()),
                p.get("words_after")
                    .map_or(String::new(), |v| v.to_string())
            ),
            _ if p.get("reason").is_some() => format!("rejected: {}", short(s("reason"), 50)),
            _ => format!(
                "rejected: {} -> {} words, coverage {} -> {}",
                p.get("words_before")
                    .map_or(String::new(), |v| v.to_string()),
                p.get("words_after")
                    .map_or(String::new(), |v| v.to_string()),
                p.get("coverage_before")
                    .map_or(String::new(), |v| v.to_string()),
                p.get("coverage_after")
                    .map_or(String::new(), |v| v.to_string())
            ),
        },
        "verification" => format!(
            "{}: {}",
            match p.get("ok") {
                Some(J::Bool(true)) => "verified",
                Some(J::Bool(false)) => "refuted",
                _ => "could not decide",
            },
            short(s("detail"), 50)
        ),
        "delivery_check" | "delivery_profile_check" | "intent_check" => {
            let flagged = p.get("flagged") == Some(&J::Bool(true));
            let extra = match kind {
                "intent_check" => format!(
                    " coverage {}",
                    p.get("coverage").map_or(String::new(), |v| v.to_string())
                ),
                "delivery_profile_check" => format!(" {}", s("profile")),
                _ => String::new(),
            };
            format!("{}{extra}", if flagged { "flagged" } else { "clean" })
        }
        k if k.starts_with("gate_") => format!(
            "wave {}",
            p.get("wave").map_or(String::new(), |v| v.to_string())
        ),
        "resume" => format!(
            "reused {}",
            p.get("reused").map_or(String::new(), |v| v.to_string())
        ),
        _ => String::new(),
    }
}

/// `git forum log --run SEQ`: one run's entries, oldest first, each at a glance.
pub fn log_run(ctx: &Ctx, request_seq: u64) -> Result<(), CliError> {
    let store = ctx.existing_store()?;
    let entries = all_entries(&store)?;
    let bodies = Bodies::new(&store);
    let runs = status::runs(&entries, |e| bodies.get(e));
    bodies.done()?;
    let Some(run) = runs.iter().find(|r| r.request_seq == request_seq) else {
        return Err(CliError::fail(format!(
            "no run starts at seq {request_seq} (git forum runs lists them)"
        )));
    };
    let mine: Vec<&Entry> = run
        .entries
        .iter()
        .filter_map(|s| entries.get(*s as usize))
        .collect();
    if ctx.json {
        let rows: Vec<J> = mine
            .iter()
            .map(|e| {
                let mut j = e.to_json();
                j["payload"] = bodies.get(e).unwrap_or(J::Null);
                j
            })
            .collect();
        bodies.done()?;
        return ctx.out_json(
            &json!({"request_seq": run.request_seq, "state": run.state.as_str(), "entries": rows}),
        );
    }
    let read: Vec<Option<J>> = mine.iter().map(|e| bodies.get(e)).collect();
    bodies.done()?;
    ctx.out(&format!(
        "run {} ({}): {}",
        run.request_seq,
        run.state.as_str(),
        short(&run.request, 80)
    ))?;
    for (e, what) in mine.into_iter().zip(read) {
        let what = what.map_or_else(|| "(body redacted)".to_string(), |p| glance(&e.kind, &p));
        ctx.out(&format!(
            "{:>5}  {:<16} {:<22} {what}",
            e.seq, e.actor, e.kind
        ))?;
    }
    Ok(())
}
