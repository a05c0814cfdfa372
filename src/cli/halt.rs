//! `git forum halt`: asks the process driving a run (in another terminal, a daemon, an MCP
//! server) to halt it, and waits for it to stop. The operation is
//! [`crate::surface::run::halt`]; this module holds its flags and renders its report.

use std::time::Duration;

use super::{CliError, Ctx};
use crate::surface::request::runs::Halt;
use crate::surface::run::halt::{self, HaltAsk, HaltReport};

/// Halt a running run: no new task, validation or rung starts, every worker's process group is
/// killed (SIGTERM, then SIGKILL), and the run witnesses `halted {by, reason}`; `git forum
/// resume RUN` continues it later.
#[derive(Debug, clap::Args)]
pub(crate) struct HaltArgs {
    /// What to halt: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: Halt,
}

/// Who halts: the flag, else git's user.name, else $USER.
fn who(args: &HaltArgs, ctx: &Ctx) -> String {
    if let Some(b) = &args.req.by {
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
    let wait = args.req.wait_seconds.unwrap_or(30.0);
    if !wait.is_finite() || wait < 0.0 {
        return Err(CliError::usage(format!(
            "--wait-seconds must be a number of seconds, 0 or more, not {wait}"
        )));
    }
    let store = ctx.store()?;
    let ask = HaltAsk {
        run: args.req.run,
        by: who(&args, ctx),
        reason: args.req.reason.clone(),
        wait: Duration::from_secs_f64(wait.min(halt::MAX_WAIT.as_secs_f64())),
    };
    let report = halt::halt(&store, &ctx.ledger, &ask)?;
    if ctx.json {
        let v = serde_json::to_value(&report)
            .map_err(|e| CliError::internal(format!("encoding the report: {e}")))?;
        return ctx.out_json(&v);
    }
    ctx.out(&line(&report))
}
