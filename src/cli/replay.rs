//! `git forum replay RUN --strict`: the run replayed from its record without a network (see
//! `surface::replay`), its first divergence printed.

use super::{CliError, Ctx};
use crate::surface::replay::{self, StrictReport};
use crate::surface::reproduce;
use crate::surface::request::{Request, replay as rq};

/// Which run to reproduce.
#[derive(Debug, clap::Args)]
pub(crate) struct ReproduceArgs {
    /// The run: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: rq::Reproduce,
}

/// Which run the confined replay replays.
#[derive(Debug, clap::Args)]
pub(crate) struct ConfinedArgs {
    /// The run's request seq.
    pub(crate) run: u64,
}

/// `git forum __replay-confined RUN`: the strict replay the daemon or the MCP server started
/// in a fresh network namespace, its report or refusal printed as JSON for that process.
pub(crate) fn confined(ctx: &Ctx, args: ConfinedArgs) -> Result<(), CliError> {
    let store = ctx.existing_store()?;
    ctx.out_report(&replay::confined_answer(&store, &ctx.dir, args.run))
}

/// `git forum reproduce RUN`.
pub(crate) fn reproduce(ctx: &Ctx, args: ReproduceArgs) -> Result<(), CliError> {
    args.req.validate()?;
    let store = ctx.existing_store()?;
    let r = reproduce::reproduce(&store, &ctx.dir, args.req.run)?;
    if ctx.json {
        ctx.out_report(&r)?;
    } else if r.mismatches.is_empty() {
        ctx.out(&format!(
            "run {} reproduces: {} check(s) exit as recorded; {} rebuilt from {} merged change(s) has the branch's tree (sandbox: {})",
            r.run,
            r.checks.len(),
            r.branch,
            r.merged.len(),
            r.sandbox
        ))?;
    } else {
        for m in &r.mismatches {
            ctx.out(m)?;
        }
    }
    match r.mismatches.is_empty() {
        true => Ok(()),
        false => Err(CliError::silent(1)),
    }
}

/// Replays run `run` strictly: inside a network namespace, or by running this command again
/// in a fresh one.
pub(crate) fn strict(ctx: &Ctx, run: u64) -> Result<(), CliError> {
    if !replay::network_unshared() {
        let code = replay::rerun_unshared(std::env::args_os().skip(1).collect())?;
        return match code {
            0 => Ok(()),
            c => Err(CliError::silent(u8::try_from(c).unwrap_or(1))),
        };
    }
    let store = ctx.existing_store()?;
    let r = replay::strict(&store, &ctx.dir, run)?;
    if ctx.json {
        ctx.out_report(&r)?;
    } else {
        render(ctx, &r)?;
    }
    match r.divergence {
        Some(_) => Err(CliError::silent(1)),
        None => Ok(()),
    }
}

fn render(ctx: &Ctx, r: &StrictReport) -> Result<(), CliError> {
    match &r.divergence {
        Some(d) => {
            ctx.out(&format!("run {} diverges at seq {}", r.run, d.seq))?;
            ctx.out(&format!("recorded:   {}", d.recorded))?;
            ctx.out(&format!("recomputed: {}", d.recomputed))?;
            for u in &r.unanswered {
                ctx.out(&format!("note: {u}"))?;
            }
            // A run another version made may diverge because that version decided otherwise.
            match &r.recorded_by {
                Some(v) if *v != r.replayed_by => ctx.out(&format!(
                    "note: git forum {v} recorded this run; {} replayed it",
                    r.replayed_by
                ))?,
                Some(_) => {}
                None => ctx.out(&format!(
                    "note: this run was recorded before git forum recorded its version; {} replayed it",
                    r.replayed_by
                ))?,
            }
        }
        None => ctx.out(&format!(
            "run {} replays with no divergence: {} entries, every decision as recorded (network: {})",
            r.run, r.recomputed, r.network
        ))?,
    }
    for line in &r.from_record {
        ctx.out(&format!("note: {line}"))?;
    }
    Ok(())
}
