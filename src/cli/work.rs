//! `apply` and `discard`: what a `--work` run left in the repository, brought into the current
//! branch or dropped. Thin over `surface::work`.

use std::fmt::Write as _;

use super::submit::cli_err;
use super::{CliError, Ctx};
use crate::surface::{self, Report};

/// Bring a run's branch (forum/run-SEQ) into the current branch.
#[derive(Debug, clap::Args)]
pub(crate) struct ApplyArgs {
    /// The run (its request seq); default: the latest run with a branch.
    pub(crate) run: Option<u64>,
}

/// Remove a run's worktrees and branch; the record and its change commits stay.
#[derive(Debug, clap::Args)]
pub(crate) struct DiscardArgs {
    /// The run (its request seq); default: the latest run with a branch.
    pub(crate) run: Option<u64>,
}

fn json_of(r: &impl Report) -> Result<serde_json::Value, CliError> {
    serde_json::to_value(r).map_err(|e| CliError::fail(format!("encoding the report: {e}")))
}

/// `git forum apply [RUN]`.
pub(crate) fn apply(ctx: &Ctx, args: ApplyArgs) -> Result<(), CliError> {
    let mut store = ctx.store()?;
    let ts = ctx.now(None)?;
    let done =
        surface::work::apply(&ctx.dir, &ctx.ledger, &mut store, args.run, ts).map_err(cli_err)?;
    if ctx.json {
        return ctx.out_json(&json_of(&done)?);
    }
    let short = |id: &str| id.chars().take(12).collect::<String>();
    ctx.out(&format!(
        "applied run {} to {} ({}: {} -> {}), witnessed as seq {}",
        done.run,
        done.branch,
        done.mode,
        short(&done.from),
        short(&done.to),
        done.seq
    ))
}

/// `git forum discard [RUN]`.
pub(crate) fn discard(ctx: &Ctx, args: DiscardArgs) -> Result<(), CliError> {
    let mut store = ctx.store()?;
    let ts = ctx.now(None)?;
    let done =
        surface::work::discard(&ctx.dir, &ctx.ledger, &mut store, args.run, ts).map_err(cli_err)?;
    if ctx.json {
        return ctx.out_json(&json_of(&done)?);
    }
    let mut out = format!("discarded run {}: ", done.run);
    match &done.branch_tip {
        Some(_) => {
            let _ = write!(out, "branch {} deleted", done.run_branch);
        }
        None => out.push_str("no branch"),
    }
    let _ = write!(
        out,
        ", {} worktree(s) removed; {} change ref(s) kept; witnessed as seq {}",
        done.worktrees,
        done.kept.len(),
        done.seq
    );
    ctx.out(&out)
}
