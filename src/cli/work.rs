//! `apply` and `discard`: what a `--work` run left in the repository, brought into the current
//! branch or dropped. Thin over `surface::work`.

use std::fmt::Write as _;

use super::submit::cli_err;
use super::{CliError, Ctx};
use crate::surface::request::work::{Apply, Discard};
use crate::surface::{self, Report};

/// Bring a run's branch (forum/run-SEQ) into the current branch: fast-forward when possible,
/// else a merge commit; refused when the work tree is dirty or the run has nothing merged.
#[derive(Debug, clap::Args)]
pub(crate) struct ApplyArgs {
    /// Which run: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: Apply,
}

/// Remove a run's worktrees and branch; the record and its change commits stay.
#[derive(Debug, clap::Args)]
pub(crate) struct DiscardArgs {
    /// Which run: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: Discard,
}

fn json_of(r: &impl Report) -> Result<serde_json::Value, CliError> {
    serde_json::to_value(r).map_err(|e| CliError::fail(format!("encoding the report: {e}")))
}

/// `git forum apply [RUN]`.
pub(crate) fn apply(ctx: &Ctx, args: ApplyArgs) -> Result<(), CliError> {
    let mut store = ctx.store()?;
    let ts = ctx.now(None)?;
    let done = surface::work::apply(&ctx.dir, &ctx.ledger, &mut store, args.req.run, ts)
        .map_err(cli_err)?;
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
    let done = surface::work::discard(&ctx.dir, &ctx.ledger, &mut store, args.req.run, ts)
        .map_err(cli_err)?;
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
