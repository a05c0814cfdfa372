//! `apply` and `discard`: what a `--work` run left in the repository, brought into the current
//! branch or dropped. Thin over `surface::work`.
//!
//! On a terminal (standard input is one) `apply` first prints the files it would bring in and
//! asks `Apply? [y/N]`; `--yes` skips the question. When standard input is not a terminal (a
//! script, CI, a pipe) it applies as it always did, without asking: a script that called
//! `apply` keeps working, and there is nobody to answer.

use std::fmt::Write as _;
use std::io::{BufRead, IsTerminal, Write as _};

use super::submit::cli_err;
use super::{CliError, Ctx};
use crate::surface::request::work::{Apply, Discard};
use crate::surface::{self, Report};

/// Bring a run's branch (forum/run-SEQ) into the current branch: fast-forward when possible,
/// else a merge commit; refused when the work tree is dirty or the run has nothing merged. On
/// a terminal it shows the files it would bring in and asks first.
#[derive(Debug, clap::Args)]
pub(crate) struct ApplyArgs {
    /// Which run: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: Apply,
    /// Apply without asking (on a terminal apply shows what it would bring in and asks; when
    /// standard input is not a terminal it never asks).
    #[arg(long, short = 'y')]
    pub(crate) yes: bool,
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
    let done = if args.yes || !std::io::stdin().is_terminal() {
        surface::work::apply(&ctx.dir, &ctx.ledger, &mut store, args.req.run, ts)
    } else {
        let shown = surface::work::apply_preview(&ctx.dir, &ctx.ledger, &store, args.req.run)
            .map_err(cli_err)?;
        if !confirmed(&shown)? {
            eprintln!("not applied; nothing changed");
            return Err(CliError::silent(1));
        }
        surface::work::apply_shown(&ctx.dir, &mut store, &shown, ts)
    }
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

/// Shows on stderr what `shown` would bring in and asks; whether the answer was yes (an
/// empty answer or the end of input is no).
fn confirmed(shown: &surface::work::ApplyPreview) -> Result<bool, CliError> {
    let paint = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let mut err = std::io::stderr().lock();
    let asked = writeln!(
        err,
        "run {}: {} into {} ({})\n{}",
        shown.run,
        shown.run_branch,
        shown.branch,
        shown.mode,
        super::diff::stat(&shown.files, paint)
    )
    .and_then(|_| write!(err, "Apply? [y/N] "))
    .and_then(|_| err.flush());
    drop(err);
    asked.map_err(|e| CliError::internal(format!("writing to stderr: {e}")))?;
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| CliError::internal(format!("reading the answer: {e}")))?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
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
