//! `git forum halt`: asks the process driving a run (in another terminal, a daemon, an MCP
//! server) to halt it, and waits for it to stop. The operation is
//! [`crate::surface::run::halt`]; this module holds its flags and renders its report.

use std::time::Duration;

use super::{CliError, Ctx};
use crate::surface::run::halt::{self, HaltAsk, HaltReport};

/// Halt a running run: no new task, validation or rung starts, every worker's process group is
/// killed (SIGTERM, then SIGKILL), and the run witnesses `halted {by, reason}`; `git forum
/// resume RUN` continues it later.
#[derive(Debug, clap::Args)]
pub(crate) struct HaltArgs {
    /// The run (its request seq, see `git forum runs`); default: the latest running run.
    pub(crate) run: Option<u64>,
    /// Why, recorded in the halted entry.
    #[arg(long, value_name = "TEXT")]
    pub(crate) reason: Option<String>,
    /// Who halts (default: git config user.name, else $USER).
    #[arg(long, value_name = "NAME")]
    pub(crate) by: Option<String>,
    /// Seconds to wait for the run to stop (0: ask and return at once).
    #[arg(long, value_name = "S", default_value_t = 30.0)]
    pub(crate) wait: f64,
}

/// Who halts: the flag, else git's user.name, else $USER.
fn who(args: &HaltArgs, ctx: &Ctx) -> String {
    if let Some(b) = &args.by {
        return b.clone();
    }
    if let Ok(repo) = crate::surface::store::open_repo(&ctx.dir)
        && let Some(name) = repo.config_snapshot().string("user.name")
    {
        return name.to_string();
    }
    std::env::var("USER").unwrap_or_else(|_| "operator".into())
}

/// The report as one line for people.
fn line(r: &HaltReport) -> String {
    match (r.stopped, r.halted_seq) {
        (true, Some(seq)) => format!(
            "run {} halted (seq {seq}, by {}: {}); `{}` continues it",
            r.run, r.by, r.reason, r.resume
        ),
        (true, None) => format!(
            "run {} stopped before the halt was witnessed (it had just ended); `git forum runs` shows how it stands",
            r.run
        ),
        (false, _) => format!(
            "halt requested for run {} (process {}); it has not stopped yet (a model call may still be out): `git forum runs` shows when it has",
            r.run, r.pid
        ),
    }
}

/// `git forum halt`.
pub(crate) fn run(ctx: &Ctx, args: HaltArgs) -> Result<(), CliError> {
    if !args.wait.is_finite() || args.wait < 0.0 {
        return Err(CliError::usage(format!(
            "--wait {}: give the seconds to wait as 0 or more",
            args.wait
        )));
    }
    let store = ctx.store()?;
    let ask = HaltAsk {
        run: args.run,
        by: who(&args, ctx),
        reason: args.reason.clone(),
        wait: Duration::from_secs_f64(args.wait.min(halt::MAX_WAIT.as_secs_f64())),
    };
    let report = halt::halt(&store, &ctx.ledger, &ask)?;
    if ctx.json {
        let v = serde_json::to_value(&report)
            .map_err(|e| CliError::internal(format!("encoding the report: {e}")))?;
        return ctx.out_json(&v);
    }
    ctx.out(&line(&report))
}
