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
use crate::surface::request::work as rq;
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
    Next(NextArgs),
    /// Run the campaign's runnable features, round after round, until nothing is runnable.
    Run(Box<RunArgs>),
    /// Record the status an outside system reports for one of its features (or its whole
    /// project); nothing is run.
    IngestStatus(IngestArgs),
}

/// The campaign named as a word, beside the request's `--campaign-id` (Forum's spelling).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct IdWord {
    /// The campaign id (default: the only one declared in the ledger).
    #[arg(value_name = "ID", conflicts_with = "campaign_id")]
    pub(crate) id: Option<String>,
}

impl IdWord {
    /// The campaign the word or the flag names.
    fn or<'a>(&'a self, flag: &'a Option<String>) -> Option<&'a str> {
        self.id.as_deref().or(flag.as_deref())
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
    pub(crate) id: IdWord,
    /// Which campaign: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: rq::CampaignStatus,
    /// Print the room as text instead of JSON.
    #[arg(long)]
    pub(crate) text: bool,
}

/// The campaign's next actions.
#[derive(Debug, clap::Args)]
pub(crate) struct NextArgs {
    #[command(flatten)]
    pub(crate) id: IdWord,
    /// Which campaign: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: rq::CampaignNext,
}

/// Run a campaign.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) id: IdWord,
    /// What to run and its limits: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: rq::CampaignRun,
    /// Roster file (default: .forum/roster.toml, else the built-in roster).
    #[arg(long, value_name = "FILE")]
    pub(crate) roster: Option<PathBuf>,
    /// Policy file (default: .forum/policy.toml).
    #[arg(long, value_name = "FILE")]
    pub(crate) policy: Option<PathBuf>,
    /// The git remote --dispatch pushes task bases to and fetches workers' commits from
    /// (default: `[dispatch] remote`, else origin).
    #[arg(long, value_name = "NAME", requires = "dispatch")]
    pub(crate) dispatch_remote: Option<String>,
    /// How to reach the NATS server of --dispatch.
    #[command(flatten)]
    pub(crate) nats: super::worker::NatsArgs,
    /// Which executors run the features.
    #[command(flatten)]
    pub(crate) exec: ExecutorArgs,
}

impl RunArgs {
    fn campaign(&self) -> Option<&str> {
        self.id.or(&self.req.campaign_id)
    }
}

/// Record an outside system's status.
#[derive(Debug, clap::Args)]
pub(crate) struct IngestArgs {
    #[command(flatten)]
    pub(crate) id: IdWord,
    /// What is reported: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: rq::CampaignIngest,
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
    let room = surface::campaign::status(&items, a.id.or(&a.req.campaign_id), verified(&store)?)?;
    if a.text {
        return ctx.out(&crate::campaign::room_text(&room));
    }
    ctx.out(&forum_text(&room, true)?)
}

fn next(ctx: &Ctx, a: NextArgs) -> Result<(), CliError> {
    let store = ctx.store()?;
    let r = surface::campaign::next(&items(&store)?, a.id.or(&a.req.campaign_id))?;
    ctx.out(&forum_text(&r, true)?)
}

fn ingest(ctx: &Ctx, a: IngestArgs) -> Result<(), CliError> {
    let ts = ctx.now(None)?;
    let mut store = ctx.store()?;
    let mut items = items(&store)?;
    let campaign_id = a.id.or(&a.req.campaign_id).map(str::to_string);
    let r = a.req;
    let ask = IngestAsk {
        campaign_id,
        project_id: r.project,
        feature_id: r.feature,
        status: r.status,
        reason: r.reason.unwrap_or_default(),
        source: r.source,
    };
    let r = surface::campaign::ingest(&mut store, &mut items, &ask, ts)?;
    ctx.out(&forum_text(&r, false)?)
}

fn run_campaign(ctx: &Ctx, a: RunArgs) -> Result<(), CliError> {
    if a.req.max_parallel == Some(0) {
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
        surface::campaign::resolve(&items, a.campaign())?;
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
    if let Some(n) = a.req.max_parallel {
        opts.policy.max_parallel = usize::try_from(n).unwrap_or(usize::MAX);
    }
    let done = run_rounds(
        ctx,
        &mut store,
        &mut items,
        &roster,
        runtime,
        opts,
        a.campaign(),
    )?;
    let room = surface::campaign::status(&items, a.campaign(), verified(&store)?)?;
    // Where the changes landed goes to stderr, so stdout stays Forum's room.
    if a.req.work {
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
        max_model_calls: a.req.max_model_calls,
        max_seconds: a.req.max_seconds,
        work: a.req.work,
        checks: a.req.checks.clone(),
        dispatch: a
            .req
            .dispatch
            .as_ref()
            .map(|url| surface::worker::DispatchSpec {
                nats: a.nats.flags(url),
                remote: a.dispatch_remote.clone(),
            }),
        ..RunOptions::default()
    };
    surface::campaign::check_work_flags(a.req.work, &a.req.checks)?;
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
