//! `git forum submit`, `git forum resume`, `git forum runs` and `git forum gate`: the control
//! loop at the command line. The operations are [`crate::surface::run`]; this module holds
//! their flags, loads the roster, policy and runtime (refusing a broken configuration before
//! any model is called), shows progress on stderr, and renders each report as text or JSON.

mod gate;
mod progress;
mod run_log;
pub(crate) mod signals;

pub(crate) use crate::surface::run::options::capsule_text_of;
pub(crate) use gate::{gate, runs};
pub(crate) use run_log::log_run;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value as J;

use super::exec_flags::ExecutorArgs;
use super::{CliError, Ctx};
use crate::context::ContextBudget;
use crate::exec::config;
use crate::ledger::merkle::Accumulator;
use crate::ledger::{Entry, Storage, Value};
use crate::surface;
use crate::surface::request::runs::Submit;
use crate::surface::run::prepare::{Prepared, RunSetup, Shape, prepare as run_prepare};
use crate::surface::run::repo_context::Locating;
use crate::surface::run::{self, Interrupt, Options, Outcome, Progress, RunError, Status};
use crate::surface::run::{
    Bodies, CommandSpec, ContextSource, Decide, Decision, Go, RunClock, RunOptions, options,
};
use crate::surface::run::{Fleet, Seats};
use crate::surface::store::GitStore;

/// The command line's own flags of `submit` and `resume`, beside the request's fields (the
/// submit request, which both flatten): the ones that name local files and programs, or say
/// how the run is shown.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RunFlags {
    /// Where request and per-task context come from, besides the capsule.
    #[command(flatten)]
    pub(crate) context: ContextCmd,
    /// Check the delivered answer with CMD (split like a shell, run without one) as `CMD
    /// REQUEST ANSWER`: exit 0 verified (stdout says why), exit 1 refuted (stderr says why),
    /// anything else, a timeout or non-UTF-8 output could not decide. Witnessed as
    /// verification; never stops the run.
    #[arg(long, value_name = "CMD")]
    pub(crate) verify_cmd: Option<String>,
    /// Seconds the verifier command may take before it is killed (could not decide).
    #[arg(
        long,
        value_name = "S",
        default_value_t = 60.0,
        requires = "verify_cmd"
    )]
    pub(crate) verify_timeout: f64,
    /// Cap the tokens each task, synthesis and revision call may generate (plans, verdicts and
    /// judgments keep their own limits, so their JSON can close).
    #[arg(long, value_name = "N")]
    pub(crate) max_output_tokens: Option<u32>,
    /// A pending gate expires after S seconds (applied when the run is resumed).
    #[arg(long, value_name = "S", requires = "gate_waves")]
    pub(crate) gate_deadline: Option<f64>,
    /// What an expired gate becomes.
    #[arg(long, value_name = "DECISION", value_parser = ["approve", "reject"], requires = "gate_deadline")]
    pub(crate) gate_on_expiry: Option<String>,
    /// Seconds each check may run before it is killed with its process group (default 300).
    #[arg(long, value_name = "S")]
    pub(crate) check_timeout: Option<f64>,
    /// Run --work workers and checks unconfined (witnessed in the run's record).
    #[arg(long, overrides_with = "sandbox")]
    pub(crate) no_sandbox: bool,
    /// One more path sandboxed workers and checks may read (repeatable; recorded in the run's
    /// work record), after [work] sandbox_read.
    #[arg(long = "sandbox-read", value_name = "PATH")]
    pub(crate) sandbox_read: Vec<PathBuf>,
    /// Roster file (default: .forum/roster.toml, else the built-in roster).
    #[arg(long, value_name = "FILE")]
    pub(crate) roster: Option<PathBuf>,
    /// The git remote --dispatch pushes task bases to and fetches workers' commits from
    /// (default: `[dispatch] remote`, else origin).
    #[arg(long, value_name = "NAME", requires = "dispatch")]
    pub(crate) dispatch_remote: Option<String>,
    /// How to reach the NATS server of --dispatch.
    #[command(flatten)]
    pub(crate) nats: super::worker::NatsArgs,
    /// Policy file (default: .forum/policy.toml, else no limits beyond 6 tasks at a time).
    #[arg(long, value_name = "FILE")]
    pub(crate) policy: Option<PathBuf>,
    /// What a secret found in a body does before it is hashed: redact it (a marker naming the
    /// rule, and a secret_redacted entry), block it (the run stops, witnessed as
    /// secret_blocked) or allow it. Default: [secrets] mode in the policy, else redact. The
    /// values of api_key_env variables are redacted whatever this says.
    #[arg(long, value_name = "MODE", value_parser = ["redact", "block", "allow"])]
    pub(crate) secrets: Option<String>,
    /// Nothing on stderr but errors (no progress, no closing summary).
    #[arg(long, short, conflicts_with = "progress")]
    pub(crate) quiet: bool,
    /// Progress on stderr even when it is not a terminal (a log file, CI).
    #[arg(long)]
    pub(crate) progress: bool,
    /// Which executors run the seats.
    #[command(flatten)]
    pub(crate) exec: ExecutorArgs,
}

/// The four context-budget flags, one group for the command line, the daemon and MCP.
pub(crate) use crate::surface::request::runs::Budgets as BudgetFlags;

impl BudgetFlags {
    /// The context budget these flags set, `None` when none is given. A negative value is a
    /// usage error (exit 2).
    pub(crate) fn budget(&self) -> Result<Option<ContextBudget>, CliError> {
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

/// The context command, the command line's own way to bring request and per-task context
/// (shared by `submit`, `resume` and `context preflight`).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ContextCmd {
    /// Read context from CMD (split like a shell, run without one): `CMD request REQUEST`
    /// before planning, and `CMD task TASK_ID INSTRUCTION` before each task. Its stdout is the
    /// context (empty: none); a failure, a timeout or non-UTF-8 output is witnessed and the
    /// run goes on without that context.
    #[arg(long, value_name = "CMD", conflicts_with = "use_capsule_context")]
    pub(crate) context_cmd: Option<String>,
    /// Seconds each context command may take before it is killed.
    #[arg(
        long,
        value_name = "S",
        default_value_t = 60.0,
        requires = "context_cmd"
    )]
    pub(crate) context_timeout: f64,
}

/// What the flags say about the repository as context: `Some(true)` for `--repo-context`,
/// `Some(false)` for `--no-repo-context`, `None` for neither (of the two, clap keeps the last).
pub(crate) fn repo_choice(repo_context: Option<bool>, no_repo_context: bool) -> Option<bool> {
    match (repo_context == Some(true), no_repo_context) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    }
}

impl ContextCmd {
    /// Where context comes from: this command, else the capsule when `capsule` is set.
    pub(crate) fn source(&self, capsule: bool) -> ContextSource {
        if let Some(line) = &self.context_cmd {
            return ContextSource::Command(CommandSpec {
                line: line.clone(),
                timeout: self.context_timeout,
            });
        }
        if capsule {
            return ContextSource::Capsule;
        }
        ContextSource::None
    }
}

impl RunFlags {
    /// The run's options as the surface takes them, from the request's fields `req` and these
    /// flags.
    pub(crate) fn options(&self, req: &Submit) -> Result<RunOptions, CliError> {
        Ok(RunOptions {
            max_model_calls: req.max_model_calls,
            max_seconds: req.max_seconds,
            context_budget: req.budget.budget()?,
            context: self.context.source(req.use_capsule_context),
            judge_intent: req.judge_intent,
            revise: req.revise,
            verify: self.verify_cmd.as_ref().map(|line| CommandSpec {
                line: line.clone(),
                timeout: self.verify_timeout,
            }),
            max_output_tokens: self.max_output_tokens,
            checkpoint_each_wave: req.checkpoint_each_wave,
            delivery_profile: req.delivery_profile.clone(),
            gate_waves: req.gate_waves.iter().map(|w| *w as usize).collect(),
            gate_deadline: self.gate_deadline,
            gate_on_expiry: self.gate_on_expiry.clone(),
            work: req.work,
            solo: req.solo,
            checks: req.checks.clone(),
            check_timeout: self.check_timeout,
            secrets: self
                .secrets
                .as_deref()
                .map(crate::secrets::Mode::parse)
                .transpose()
                .map_err(CliError::usage)?,
            allow_cmds: req.allow_cmds.clone(),
            // As the daemon reads it: a count past the limit gets the surface's refusal.
            max_tool_calls: req
                .max_tool_calls
                .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            attempts: req.attempts.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            sandbox: match (req.sandbox == Some(true), self.no_sandbox) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            },
            sandbox_net: req.sandbox_net,
            sandbox_read: self.sandbox_read.clone(),
            sandbox_allow_host: req.sandbox_allow_host.clone(),
            // Set once the runtime config is read (`prepare`): the flags, else `[context] repo`.
            repo_context: None,
            repo_context_leave_out: Vec::new(),
            max_tokens: req.ceilings.max_tokens,
            max_cost_usd: req.ceilings.max_cost_usd,
            // Set from the run's record by a resume (`prepare`).
            resumes_work: false,
            dispatch: req
                .dispatch
                .as_ref()
                .map(|url| surface::worker::DispatchSpec {
                    nats: self.nats.flags(url),
                    remote: self.dispatch_remote.clone(),
                }),
        })
    }
}

/// A surface error as the CLI reports it: its class's exit code and its one line.
pub(crate) fn cli_err(e: surface::Error) -> CliError {
    e
}

/// A report as JSON.
fn to_json(r: &impl serde::Serialize) -> Result<J, CliError> {
    serde_json::to_value(r).map_err(|e| CliError::internal(format!("encoding the report: {e}")))
}

/// Every entry of a git ledger with its body, in one walk (none when it does not exist yet).
pub(crate) fn preload(store: &GitStore) -> Result<Vec<(Entry, Option<Value>)>, CliError> {
    options::preload(store).map_err(cli_err)
}

/// Run a request through route, plan, waves, validation, escalation and synthesis.
#[derive(Debug, clap::Args)]
pub(crate) struct SubmitArgs {
    /// The request.
    #[arg(required_unless_present = "resume")]
    pub(crate) request: Vec<String>,
    /// Continue the latest unfinished run instead (same as `git forum resume`).
    #[arg(long, conflicts_with = "request")]
    pub(crate) resume: bool,
    /// Limits and quality options of the run: the request the daemon and MCP take (its text
    /// is the words above).
    #[command(flatten)]
    pub(crate) req: Submit,
    /// The command line's own options of the run.
    #[command(flatten)]
    pub(crate) flags: RunFlags,
}

/// Fix what the request says with one agent in the repository: the request is the one task of
/// the worker seat, in its own worktree; its change is committed, checked (--check, [work]
/// checks) and shown to the pre-ship gate, and lands on forum/run-SEQ; no planner, validator
/// or synthesizer is called, and the answer is written from the record. `git forum diff`
/// and `git forum apply` then bring it in. The same as `submit --work --solo`.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("work", |a| a.hide(true)),
    mut_arg("solo", |a| a.hide(true)),
    mut_arg("judge_intent", |a| a.hide(true)),
    mut_arg("revise", |a| a.hide(true)),
    mut_arg("use_capsule_context", |a| a.hide(true)),
)]
pub(crate) struct FixArgs {
    /// What to fix.
    #[arg(required = true)]
    pub(crate) request: Vec<String>,
    /// Limits and options of the run: the submit request's fields (work and solo are set).
    #[command(flatten)]
    pub(crate) req: Submit,
    /// The command line's own options of the run.
    #[command(flatten)]
    pub(crate) flags: RunFlags,
}

/// Continue an unfinished run (the latest, or RUN: the seq of its request).
#[derive(Debug, clap::Args)]
pub(crate) struct ResumeArgs {
    /// The run's request seq (see `git forum runs`).
    pub(crate) run: Option<u64>,
    /// Limits and quality options of the resumed run: the submit request's fields, of which
    /// the resume request takes the limits and ceilings (the others the command line takes
    /// too, and a resumed run keeps what it was submitted with unless they are given).
    #[command(flatten)]
    pub(crate) req: Submit,
    /// The command line's own options of the run.
    #[command(flatten)]
    pub(crate) flags: RunFlags,
}

/// List the runs in the ledger and how each stands.
#[derive(Debug, clap::Args)]
pub(crate) struct RunsArgs {}

/// Human approval of gated waves.
#[derive(Debug, clap::Args)]
pub(crate) struct GateArgs {
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: GateCommand,
}

/// A gate command.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum GateCommand {
    /// List the gates waiting for a decision.
    List,
    /// Let the wave run.
    Approve(crate::surface::request::work::GateApprove),
    /// Let the wave run with rewritten instructions (--edit ID=INSTRUCTION, repeatable).
    Edit(GateEditArgs),
    /// Stop the run before the wave.
    Reject(crate::surface::request::work::GateReject),
}

/// `gate edit`: its request, and the command line's way to give the edits.
#[derive(Debug, clap::Args)]
pub(crate) struct GateEditArgs {
    #[command(flatten)]
    pub(crate) req: crate::surface::request::work::GateEdit,
    /// TASK_ID=INSTRUCTION (repeatable).
    #[arg(long = "edit", value_name = "ID=TEXT")]
    pub(crate) edit: Vec<String>,
}

/// Loads everything a run needs and refuses a broken configuration before any model call.
/// `resumed`: the request seq and body of the run a resume continues; the executors it
/// recorded replace the configured ones unless executor flags are given, and the options it
/// recorded fill those no flag gives.
fn prepare(
    ctx: &Ctx,
    req: &Submit,
    f: &RunFlags,
    resumed: Option<(u64, J)>,
) -> Result<(RunOptions, crate::roster::Roster, Fleet, Options), CliError> {
    let roster = crate::config::load_roster(&ctx.dir, f.roster.as_deref())?;
    let setup = RunSetup {
        spec: f.options(req)?,
        resumed: resumed.as_ref().map(|(seq, body)| (*seq, body)),
        roster: &roster,
        dir: &ctx.dir,
        ledger: &ctx.ledger,
        shape: Shape::Single,
        repo_choice: repo_choice(req.repo_context, req.no_repo_context == Some(true)),
        max_seconds_cap: None,
        recorded_executors: !executor_flags_given(&f.exec),
        refuse_unready: true,
    };
    let policy = || Ok(crate::config::load_policy(&ctx.dir, f.policy.as_deref())?);
    let runtime = || {
        let loaded = crate::config::load_runtime(
            &ctx.dir,
            f.exec.runtime_config.as_deref(),
            &f.exec.to_flags(),
        )?;
        Ok(Some(loaded.runtime))
    };
    let say = |line: &str| {
        if !f.quiet {
            eprintln!("{line}");
        }
    };
    let Prepared {
        spec,
        opts,
        runtime,
    } = run_prepare(setup, policy, runtime, &say)?;
    let runtime = runtime.expect("the command line always has a runtime");
    if let Some(m) = surface::model::ensure_running(&runtime)?
        && !f.quiet
    {
        eprintln!("{m}");
    }
    let fleet = Fleet::new(runtime).map_err(|e| CliError::usage(format!("cannot run: {e}")))?;
    Ok((spec, roster, fleet, opts))
}

/// Ledgers at least this long have the checkpoint a run ends with read from the cache of
/// Forum's tree: past about a thousand entries, reading every entry back costs more than the
/// few small objects that extending the cache by the run's entries writes.
const CACHED_CHECKPOINT_FROM: u64 = 1024;

/// The ledger's size and Forum's root of it, for a run's closing lines: for a long ledger from
/// the cache of Forum's tree (`refs/forum/merkle/NAME`, extended by the entries since it was
/// written, rebuilt when it disagrees), so a run at the end of a long ledger does not read
/// every entry; from every entry for a short one, or when the cache cannot be had (it is only a
/// cache, and its checks fall back to the entries).
fn checkpoint_of(store: &GitStore) -> Result<(u64, String), CliError> {
    let internal = |e: &dyn std::fmt::Display| CliError::internal(e.to_string());
    let size = store.len().map_err(|e| internal(&e))?;
    if size >= CACHED_CHECKPOINT_FROM
        && let Ok(Some(cached)) = surface::proof::Cached::open(store)
    {
        let cp = cached.checkpoint();
        return Ok((cp.size, cp.root));
    }
    let mut acc = Accumulator::default();
    for seq in 0..size {
        if let Some(e) = store.get(seq).map_err(|e| internal(&e))? {
            acc.push(&e.entry_hash);
        }
    }
    Ok((size, acc.root()))
}

/// Renders a finished (or paused, stopped, halted) run, then ends with the exit code of
/// the outcome table ([`surface::run::exit::help`]) for how it ended (0: delivered).
fn report(
    ctx: &Ctx,
    store: &GitStore,
    outcome: Outcome,
    opts: &Options,
    quiet: bool,
) -> Result<(), CliError> {
    let (size, checkpoint) = checkpoint_of(store)?;
    let ends = |exit: surface::run::exit::RunExit| match exit.code() {
        0 => Ok(()),
        code => Err(CliError::silent(code)),
    };
    if ctx.json {
        let r = surface::run::run_report(store, &ctx.ledger, outcome, opts, checkpoint, size)
            .map_err(cli_err)?;
        let exit = r.exit.name;
        ctx.out_json(&to_json(&r)?)?;
        return ends(exit);
    }
    let exit = surface::run::exit::exit_for(store, &outcome).map_err(cli_err)?;
    match &outcome.status {
        Status::Answered | Status::StoppedOnBudget | Status::StoppedOnCeiling => {
            if let Some(a) = &outcome.answer {
                ctx.out(a)?;
            }
        }
        _ => {}
    }
    let next = next_step(&outcome, exit);
    // A halt is said even with --quiet: the run did not finish.
    if !quiet || matches!(outcome.status, Status::Halted { .. }) {
        eprintln!("{next}");
    }
    if !quiet {
        eprintln!("checkpoint {checkpoint} ({size} entries)");
        // The last line names the outcome as `runs`, the receipt and the daemon do.
        eprintln!("outcome {} (exit {})", exit.name(), exit.code());
    }
    ends(exit)
}

/// The line that says how a run ended and what to do next.
fn next_step(outcome: &Outcome, exit: surface::run::exit::RunExit) -> String {
    match &outcome.status {
        Status::Answered if exit != surface::run::exit::RunExit::Answered => format!(
            "run {} ended {} (exit {}): {}; it answered in {} model calls; `git forum runs` and `git forum log` show why, `git forum show {} --payload` the answer",
            outcome.request_seq,
            exit.name(),
            exit.code(),
            exit.meaning(),
            outcome.total_calls(),
            outcome.answer_seq.unwrap_or(0)
        ),
        Status::Answered => format!(
            "run {} answered in {} model calls; see `git forum log`, `git forum show {} --payload`, `git forum verify`",
            outcome.request_seq,
            outcome.total_calls(),
            outcome.answer_seq.unwrap_or(0)
        ),
        Status::StoppedOnCeiling => format!(
            "run {} stopped on its {} ceiling after {} model calls ({} tokens, ${:.6}); `git forum resume {}` continues it with a fresh allowance",
            outcome.request_seq,
            outcome.ceiling.unwrap_or_default(),
            outcome.total_calls(),
            outcome.spent.tokens,
            crate::spend::pico_to_usd(outcome.spent.pico),
            outcome.request_seq
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
        Status::Halted { by, reason, seq } => format!(
            "run {r} halted by {by} ({reason}): its workers were killed and seq {seq} witnesses it; `git forum resume {r}` continues it",
            r = outcome.request_seq
        ),
    }
}

/// A run that could not go on, as the CLI reports it: the class's exit code (128 + the signal
/// for an interrupted run) and what to do next.
fn run_failed(e: RunError) -> CliError {
    let class = surface::run::class_of(&e);
    let message = match &e {
        RunError::Interrupted {
            signal,
            witnessed,
            request_seq,
        } => {
            let what = match (witnessed, request_seq) {
                (Some(seq), Some(r)) => format!(
                    "its commands were killed and seq {seq} witnesses it; `git forum resume {r}` continues the run"
                ),
                _ => "its commands were killed before the run was witnessed".to_string(),
            };
            return CliError::new(class, format!("{e}: {what}"))
                .with_exit(128 + signals::signal_number(signal));
        }
        RunError::Request(m) | RunError::Resume(m) => m.clone(),
        RunError::Gated { request_seq, .. } => {
            let code =
                surface::run::exit::exit_of_error(&e).map_or(class.exit_code(), |x| x.code());
            return CliError::new(
                class,
                format!(
                    "{e}: `git forum gate approve --run {request_seq}` (or `gate edit`, `gate reject`), then `git forum resume {request_seq}`"
                ),
            )
            .with_exit(code);
        }
        RunError::Plan(_) | RunError::Synthesis(_) => format!(
            "{e} (the run is witnessed up to here: `git forum runs` shows it, `git forum resume` tries that stage again)"
        ),
        RunError::Work(_) => e.to_string(),
        RunError::Start(_) => {
            let code =
                surface::run::exit::exit_of_error(&e).map_or(class.exit_code(), |x| x.code());
            return CliError::new(
                class,
                format!(
                    "{e} (witnessed: `git forum runs` shows it; install the program or pick another seat, then `git forum resume`)"
                ),
            )
            .with_exit(code);
        }
        RunError::SecretBlocked { witnessed, .. } => format!(
            "{e}: `git forum show {witnessed} --payload` says where; remove the secret from what the workers see (or set [secrets] in .forum/policy.toml), then submit again"
        ),
        RunError::Ledger(_) => format!(
            "{e} (what was witnessed stays in the ledger: `git forum runs`, `git forum verify`)"
        ),
    };
    CliError::new(class, message)
}

fn go(ctx: &Ctx, req: &Submit, flags: &RunFlags, what: Go<'_>) -> Result<(), CliError> {
    match what {
        Go::Submit(r) => {
            crate::route::check_request(r).map_err(|e| CliError::usage(e.to_string()))?;
            req.check_solo().map_err(cli_err)?;
        }
        Go::Resume(_) if !req.gate_waves.is_empty() => {
            return Err(CliError::usage(
                "--gate-wave is set when a run is submitted; a resumed run keeps the gates it was submitted with",
            ));
        }
        Go::Resume(_) if req.solo => {
            return Err(CliError::usage(
                "--solo is set when a run is submitted; a resumed run is solo when it was submitted so",
            ));
        }
        Go::Resume(_) if req.work || !req.checks.is_empty() => {
            return Err(CliError::usage(
                "--work and --check are set when a run is submitted; a resumed run keeps the work and checks it was submitted with",
            ));
        }
        Go::Resume(_) => {}
    }
    // Where the repository is, for its context, asked of git now, so that the process runs
    // while the configuration is loaded (set aside if the run turns out not to take it).
    let locating = (repo_choice(req.repo_context, req.no_repo_context == Some(true))
        != Some(false))
    .then(|| Locating::start(&ctx.dir));
    let resumed = match what {
        Go::Resume(target) => recorded_of(ctx, target)?,
        Go::Submit(_) => None,
    };
    let (spec, roster, fleet, mut opts) = prepare(ctx, req, flags, resumed)?;
    let mut store = ctx.store()?;
    // The run's entries are read back at its end (the exit code, the closing checkpoint):
    // from memory, once its appends are over.
    store.record_own_writes();
    opts.context = spec
        .context_provider_located(|| options::preload(&store), locating)
        .map_err(cli_err)?;
    let pinned = match std::env::var("GIT_FORUM_TIMESTAMP") {
        Ok(_) => Some(ctx.now(None)?),
        Err(_) => None,
    };
    let clock = RunClock::new(pinned);
    let watching = flags.progress || (!flags.quiet && std::io::stderr().is_terminal());
    let stderr = progress::Stderr {
        max: opts.max_model_calls,
    };
    let silent = run::Silent;
    let progress: &dyn Progress = if watching { &stderr } else { &silent };
    let seats: &dyn Seats = &fleet;
    let env = run::Env {
        roster: &roster,
        seats,
        clock: &clock,
        progress,
    };
    let interrupt = Arc::new(Interrupt::new());
    signals::watch_signals(interrupt.clone())?;
    opts.interrupt = Some(interrupt.clone());
    // `git forum halt` from another terminal reaches the run through this watcher.
    let watch = surface::run::halt::watch(store.halts(), interrupt);
    let done = surface::run::submit::go(&mut store, &env, &opts, what);
    drop(watch);
    store.read_own_writes_back();
    match done {
        Ok(outcome) => report(ctx, &store, outcome, &opts, flags.quiet),
        Err(e) => Err(run_failed(e)),
    }
}

/// Whether any executor flag (or `--runtime-config`) was given.
fn executor_flags_given(e: &ExecutorArgs) -> bool {
    e.runtime_config.is_some() || e.to_flags() != config::Flags::default()
}

/// The request seq and body of the run a resume of `target` continues, if any.
fn recorded_of(ctx: &Ctx, target: Option<u64>) -> Result<Option<(u64, J)>, CliError> {
    let store = ctx.store()?;
    // A ledger not yet written has no run: the surface says so (and what to do).
    let entries = if store.exists()? {
        all_entries(&store)?
    } else {
        Vec::new()
    };
    let read = read_bodies(&store);
    surface::run::recorded::recorded_request(&entries, &Bodies::new(&read), target).map_err(cli_err)
}

/// `git forum submit`.
pub(crate) fn submit(ctx: &Ctx, args: SubmitArgs) -> Result<(), CliError> {
    if args.resume {
        return go(ctx, &args.req, &args.flags, Go::Resume(None));
    }
    let request = args.request.join(" ");
    go(ctx, &args.req, &args.flags, Go::Submit(&request))
}

/// `git forum fix`: `submit --work --solo`.
pub(crate) fn fix(ctx: &Ctx, args: FixArgs) -> Result<(), CliError> {
    let req = Submit {
        work: true,
        solo: true,
        ..args.req
    };
    let request = args.request.join(" ");
    go(ctx, &req, &args.flags, Go::Submit(&request))
}

/// `git forum resume`.
pub(crate) fn resume(ctx: &Ctx, args: ResumeArgs) -> Result<(), CliError> {
    go(ctx, &args.req, &args.flags, Go::Resume(args.run))
}

fn all_entries(store: &dyn Storage) -> Result<Vec<Entry>, CliError> {
    let n = store.len().map_err(|e| CliError::internal(e.to_string()))?;
    let mut out = Vec::with_capacity(n as usize);
    for seq in 0..n {
        if let Some(e) = store
            .get(seq)
            .map_err(|e| CliError::internal(e.to_string()))?
        {
            out.push(e);
        }
    }
    Ok(out)
}

/// Reads bodies from `store` for the surface's [`Bodies`].
fn read_bodies(store: &dyn Storage) -> impl Fn(&Entry) -> Result<Option<J>, surface::Error> + '_ {
    move |e| {
        store
            .payload_at(e.seq)
            .map(|b| b.map(|v| v.to_serde()))
            .map_err(|e| surface::Error::internal(e.to_string()).with_source(e))
    }
}
