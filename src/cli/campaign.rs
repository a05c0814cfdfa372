//! `git forum campaign declare|status|next|run|ingest-status`: campaigns at the command line.
//! The operations are [`crate::surface::campaign`]; this module holds their flags, reads the
//! ledger for them, and prints each report as Forum does (`status` and `run --json` as
//! indented JSON, `declare` and `ingest-status` as one compact line) or as text.

use std::path::PathBuf;
use std::sync::Arc;

use super::exec_flags::ExecutorArgs;
use super::submit::signals;
use super::{CliError, Ctx};
use crate::config::RealFacts;
use crate::exec::config;
use crate::ledger::canonical;
use crate::surface;
use crate::surface::campaign::{IngestAsk, Items};
use crate::surface::run;
use crate::surface::run::prepare::{Prepared, RunSetup, Shape, prepare};
use crate::surface::run::{Fleet, Seats};
use crate::surface::run::{RunClock, RunOptions, options};
use crate::surface::store::GitStore;

/// Declare, inspect and run campaigns: projects of features across owners.
#[derive(Debug, clap::Args)]
pub(crate) struct CampaignArgs {
    #[command(subcommand)]
    pub(crate) command: CampaignCommand,
}

/// A campaign command.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum CampaignCommand {
    /// Validate a campaign file (duplicate ids, unknown dependencies, cycles) and declare it.
    Declare(DeclareArgs),
    /// The campaign room: each feature's status reduced from the ledger, progress, next
    /// actions (JSON; --text for text).
    Status(StatusArgs),
    /// The campaign's next actions.
    Next(IdArgs),
    /// Run the campaign's runnable features, round after round, until nothing is runnable.
    Run(Box<RunArgs>),
    /// Record the status an outside system reports for one of its features (or its whole
    /// project); nothing is run.
    IngestStatus(IngestArgs),
}

/// Which campaign (default: the only one declared in the ledger).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct IdArgs {
    /// The campaign id.
    #[arg(value_name = "ID", conflicts_with = "campaign_id")]
    pub(crate) id: Option<String>,
    /// The campaign id (Forum's spelling).
    #[arg(long, value_name = "ID")]
    pub(crate) campaign_id: Option<String>,
}

impl IdArgs {
    fn get(&self) -> Option<&str> {
        self.id.as_deref().or(self.campaign_id.as_deref())
    }
}

/// Declare a campaign.
#[derive(Debug, clap::Args)]
pub(crate) struct DeclareArgs {
    /// The campaign JSON file.
    #[arg(long, value_name = "FILE")]
    pub(crate) file: PathBuf,
}

/// Show a campaign room.
#[derive(Debug, clap::Args)]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    pub(crate) id: IdArgs,
    /// Print the room as text instead of JSON.
    #[arg(long)]
    pub(crate) text: bool,
}

/// Run a campaign.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) id: IdArgs,
    /// How many features of a round run at the same time (default: the policy's, else 6).
    #[arg(long, value_name = "N")]
    pub(crate) max_parallel: Option<usize>,
    /// Stop dispatching once this many model calls have started (the features left fail
    /// with "budget exceeded").
    #[arg(long, value_name = "N")]
    pub(crate) max_model_calls: Option<u64>,
    /// Stop dispatching once this many seconds have passed.
    #[arg(long, value_name = "S")]
    pub(crate) max_seconds: Option<f64>,
    /// Roster file (default: .forum/roster.toml, else the built-in roster).
    #[arg(long, value_name = "FILE")]
    pub(crate) roster: Option<PathBuf>,
    /// Policy file (default: .forum/policy.toml).
    #[arg(long, value_name = "FILE")]
    pub(crate) policy: Option<PathBuf>,
    /// Each feature works in the repository: its own worktree, its change committed, checked,
    /// gated and integrated onto the round's run branch `forum/run-SEQ` (as `submit --work`).
    #[arg(long)]
    pub(crate) work: bool,
    /// A check every feature's change must pass (after `[work] checks`; repeatable; needs
    /// `--work`).
    #[arg(long = "check", value_name = "CMD")]
    pub(crate) checks: Vec<String>,
    /// Which executors run the features.
    #[command(flatten)]
    pub(crate) exec: ExecutorArgs,
}

/// Record an outside system's status.
#[derive(Debug, clap::Args)]
pub(crate) struct IngestArgs {
    #[command(flatten)]
    pub(crate) id: IdArgs,
    /// The project.
    #[arg(long, value_name = "ID")]
    pub(crate) project: String,
    /// The feature (omit to report on the whole project).
    #[arg(long, value_name = "ID")]
    pub(crate) feature: Option<String>,
    /// pending, in_progress, blocked, failed or done.
    #[arg(long)]
    pub(crate) status: String,
    /// Who reports it (for an outside system's feature, by convention its owner,
    /// `external:NAME`).
    #[arg(long)]
    pub(crate) source: String,
    /// Why.
    #[arg(long, default_value = "")]
    pub(crate) reason: String,
}

/// A report in Forum's key order: indented (`json.dumps(.., indent=2)`) or on one line.
fn forum_text(r: &impl serde::Serialize, pretty: bool) -> Result<String, CliError> {
    let text = serde_json::to_string(r).map_err(|e| CliError::fail(e.to_string()))?;
    let v = canonical::parse(&text).map_err(|e| CliError::fail(e.to_string()))?;
    Ok(if pretty {
        v.python_pretty()
    } else {
        v.python_dumps()
    })
}

fn items(store: &GitStore) -> Result<Items, CliError> {
    Ok(surface::campaign::items_of(options::preload(store)?))
}

fn verified(store: &GitStore) -> Result<bool, CliError> {
    Ok(store.exists()? && store.verify(true)?.passed())
}

/// `git forum campaign`.
pub(crate) fn run(ctx: &Ctx, args: CampaignArgs) -> Result<(), CliError> {
    match args.command {
        CampaignCommand::Declare(a) => declare(ctx, a),
        CampaignCommand::Status(a) => status(ctx, a),
        CampaignCommand::Next(a) => next(ctx, a),
        CampaignCommand::Run(a) => run_campaign(ctx, *a),
        CampaignCommand::IngestStatus(a) => ingest(ctx, a),
    }
}

fn declare(ctx: &Ctx, a: DeclareArgs) -> Result<(), CliError> {
    // Forum exits 2 on a file it cannot read, as on one that is not a campaign.
    let text = crate::config::read_text(&a.file, "campaign file")
        .map_err(|e| CliError::usage(e.to_string()))?;
    let ts = ctx.now(None)?;
    let mut store = ctx.store()?;
    let r = surface::campaign::declare(&mut store, &text, ts)?;
    ctx.out(&forum_text(&r, false)?)
}

fn status(ctx: &Ctx, a: StatusArgs) -> Result<(), CliError> {
    let store = ctx.store()?;
    let items = items(&store)?;
    let room = surface::campaign::status(&items, a.id.get(), verified(&store)?)?;
    if a.text {
        return ctx.out(&crate::campaign::room_text(&room));
    }
    ctx.out(&forum_text(&room, true)?)
}

fn next(ctx: &Ctx, a: IdArgs) -> Result<(), CliError> {
    let store = ctx.store()?;
    let r = surface::campaign::next(&items(&store)?, a.get())?;
    ctx.out(&forum_text(&r, true)?)
}

fn ingest(ctx: &Ctx, a: IngestArgs) -> Result<(), CliError> {
    let ts = ctx.now(None)?;
    let mut store = ctx.store()?;
    let mut items = items(&store)?;
    let ask = IngestAsk {
        campaign_id: a.id.get().map(str::to_string),
        project_id: a.project,
        feature_id: a.feature,
        status: a.status,
        reason: a.reason,
        source: a.source,
    };
    let r = surface::campaign::ingest(&mut store, &mut items, &ask, ts)?;
    ctx.out(&forum_text(&r, false)?)
}

fn run_campaign(ctx: &Ctx, a: RunArgs) -> Result<(), CliError> {
    if a.max_parallel == Some(0) {
        return Err(CliError::usage(
            "--max-parallel 0: at least one feature must be able to run",
        ));
    }
    let roster = crate::config::load_roster(&ctx.dir, a.roster.as_deref())?;
    let setup = round_setup(ctx, &a, &roster)?;
    let mut opened = None;
    let runtime = || {
        let store = ctx.store()?;
        let items = items(&store)?;
        // An unknown campaign is refused before any executor is looked at.
        surface::campaign::resolve(&items, a.id.get())?;
        let loaded = crate::config::load_runtime(
            &ctx.dir,
            a.exec.runtime_config.as_deref(),
            &a.exec.to_flags(),
        )?;
        let issues = config::issues(&loaded.runtime, &roster, &RealFacts);
        if let Some(first) = issues.first() {
            return Err(CliError::usage(format!(
                "cannot run the campaign: {first} (git forum runtime inspect lists every issue)"
            )));
        }
        opened = Some((store, items));
        Ok(Some(loaded.runtime))
    };
    let policy = || Ok(crate::config::load_policy(&ctx.dir, a.policy.as_deref())?);
    let Prepared {
        mut opts, runtime, ..
    } = prepare(setup, policy, runtime, &|_| {})?;
    let (mut store, mut items) = opened.expect("the runtime was read, so the ledger was opened");
    let runtime = runtime.expect("the command line always has a runtime");
    if let Some(n) = a.max_parallel {
        opts.policy.max_parallel = n;
    }
    let done = run_rounds(
        ctx,
        &mut store,
        &mut items,
        &roster,
        runtime,
        opts,
        a.id.get(),
    )?;
    let room = surface::campaign::status(&items, a.id.get(), verified(&store)?)?;
    // Where the changes landed goes to stderr, so stdout stays Forum's room.
    if a.work {
        eprintln!("{}", surface::campaign::branches_line(&done));
    }
    if ctx.json {
        return ctx.out(&forum_text(&room, true)?);
    }
    ctx.out(&crate::campaign::room_text(&room))?;
    eprintln!(
        "{} round{} ran {} feature{}; checkpoint {} ({} entries)",
        done.rounds,
        if done.rounds == 1 { "" } else { "s" },
        done.acted.len(),
        if done.acted.len() == 1 { "" } else { "s" },
        room.checkpoint,
        items.len()
    );
    Ok(())
}

/// The campaign round's run setup: the typed options of the flags (work flags checked), for
/// the roster given.
fn round_setup<'a>(
    ctx: &'a Ctx,
    a: &RunArgs,
    roster: &'a crate::roster::Roster,
) -> Result<RunSetup<'a>, CliError> {
    let spec = RunOptions {
        max_model_calls: a.max_model_calls,
        max_seconds: a.max_seconds,
        work: a.work,
        checks: a.checks.clone(),
        ..RunOptions::default()
    };
    surface::campaign::check_work_flags(a.work, &a.checks)?;
    Ok(RunSetup {
        spec,
        resumed: None,
        roster,
        dir: &ctx.dir,
        ledger: &ctx.ledger,
        shape: Shape::CampaignRound,
        repo_choice: None,
        max_seconds_cap: None,
        recorded_executors: false,
        // Refused below, in the campaign's own words, before the work options are read.
        refuse_unready: false,
    })
}

/// Runs the campaign's rounds on the runtime's executors, stopping on the first SIGINT or
/// SIGTERM (the exit code then says which).
fn run_rounds(
    ctx: &Ctx,
    store: &mut GitStore,
    items: &mut Items,
    roster: &crate::roster::Roster,
    runtime: crate::exec::config::Runtime,
    mut opts: run::Options,
    id: Option<&str>,
) -> Result<surface::campaign::RunDone, CliError> {
    let fleet = Fleet::new(runtime)
        .map_err(|e| CliError::usage(format!("cannot run the campaign: {e}")))?;
    let pinned = match std::env::var(surface::clock::TIMESTAMP_ENV) {
        Ok(_) => Some(ctx.now(None)?),
        Err(_) => None,
    };
    let clock = RunClock::new(pinned);
    let seats: &dyn Seats = &fleet;
    let env = run::Env {
        roster,
        seats,
        clock: &clock,
        progress: &run::Silent,
    };
    // The first SIGINT or SIGTERM stops the round and kills every worker it started.
    let interrupt = Arc::new(run::Interrupt::new());
    signals::watch_signals(interrupt.clone())?;
    opts.interrupt = Some(interrupt.clone());
    surface::campaign::run(store, items, &env, &opts, id).map_err(|e| match interrupt.signal() {
        Some(sig) => e.with_exit(128 + signals::signal_number(&sig)),
        None => e,
    })
}
