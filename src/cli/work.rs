//! `apply` and `discard`: what a `--work` run left in the repository, brought into the current
//! branch or dropped. Thin over `surface::work`.
//!
//! `apply --dry-run` applies nothing: it says what apply would do against the current branch
//! and shows the diff that branch would receive.
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
    /// Apply nothing: say what apply would do against the current branch (fast-forward,
    /// merge, or conflict naming the files) and show the diff the branch would receive,
    /// without touching the work tree, the index or any ref.
    #[arg(long, conflicts_with = "yes")]
    pub(crate) dry_run: bool,
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
    if args.dry_run {
        return dry_run(ctx, args.req.run);
    }
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

/// `git forum apply [RUN] --dry-run`: what apply would do, and the diff the branch would
/// receive (coloured as `git forum diff` colours it on a terminal).
fn dry_run(ctx: &Ctx, run: Option<u64>) -> Result<(), CliError> {
    let store = ctx.existing_store()?;
    let r = surface::work::apply_dry_run(&ctx.dir, &ctx.ledger, &store, run).map_err(cli_err)?;
    if ctx.json {
        return ctx.out_json(&json_of(&r)?);
    }
    let short = |id: &str| id.chars().take(12).collect::<String>();
    let mut head = format!(
        "run {}: {} into {} ({} -> {}) would be ",
        r.run,
        r.run_branch,
        r.branch,
        short(&r.ours),
        short(&r.theirs)
    );
    match r.outcome {
        "conflict" => {
            let _ = write!(
                head,
                "a merge that conflicts in {}; apply refuses it",
                r.conflicts.join(", ")
            );
        }
        "merge" => head.push_str("a merge commit, without conflicts"),
        _ => head.push_str("a fast-forward"),
    }
    if !r.dirty.is_empty() {
        let _ = write!(
            head,
            "; apply refuses until the uncommitted changes to {} are committed or stashed",
            r.dirty.join(", ")
        );
    }
    let paint = super::diff::colour();
    let what = if r.outcome == "conflict" {
        "the run's changes since it parted from the branch"
    } else {
        "what the branch would receive"
    };
    let mut text = format!("{head}\n{what}:\n{}", super::diff::stat(&r.files, paint));
    if !r.patch.is_empty() {
        text.push('\n');
        text.push_str(super::diff::patch(&r.patch, paint).trim_end());
    }
    ctx.out(&text)?;
    if r.truncated {
        eprintln!("the patch was cut at 8 MiB");
    }
    Ok(())
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
