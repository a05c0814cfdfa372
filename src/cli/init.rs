//! `init`: the command over [`crate::surface::init`] (refspecs that carry ledgers, and
//! `.forum/` with the worker seat this machine has and the project's test command).

use super::{CliError, Ctx};
use crate::surface::init::{self as op, INSTALL_HINT, InitOptions, InitReport, RuntimeWritten};
use crate::surface::sync;

/// The old spellings `sync` still removes from a remote's fetch refspecs.
pub(crate) use crate::surface::init::{config_values, old_fetch_refspecs};

/// Set up this repository for git forum.
///
/// Adds `+refs/forum/ledgers/*:refs/forum/unverified/REMOTE/*` to each remote's fetch refspecs
/// (plain `git fetch` then brings ledgers, to a namespace nothing trusts; only `git forum fetch`
/// adopts a copy into `refs/forum/remotes/REMOTE/` after verifying it), replacing the refspec
/// older versions added, and writes `.forum/roster.toml`, `.forum/README` and
/// `.forum/runtime.toml` when they are absent. The runtime file's worker is the first agent
/// found, in this order: `claude`, `codex`, `aider` on PATH; ANTHROPIC_API_KEY, then
/// OPENAI_API_KEY set; a local server listing a model at /v1/models on port 11434 (Ollama),
/// 8080 (llama.cpp) or 1234 (LM Studio); else git forum's local model, which is for trying
/// the record, not for editing code. A paid seat gets a spend ceiling of 5 dollars a run. The
/// project's test command (pytest, cargo test, npm test, go test ./..., make test, tox, nox)
/// becomes the default check of --work runs.
#[derive(Debug, clap::Args)]
pub(crate) struct InitArgs {
    /// Only this remote (repeatable); default: every configured remote.
    #[arg(long = "remote", value_name = "NAME")]
    pub(crate) remotes: Vec<String>,
    /// Also make plain `git push` push ledgers. A remote with a push refspec pushes only what
    /// its refspecs name, so `HEAD` is added too when the remote had none (plain `git push` then
    /// pushes the current branch to the branch of the same name, and every ledger).
    #[arg(long)]
    pub(crate) push: bool,
    /// The worker seat to write instead of the first found: claude, codex, aider, anthropic,
    /// openai, ollama, llama.cpp, lmstudio, or local (also: none) for git forum's local model.
    #[arg(long, value_name = "NAME")]
    pub(crate) agent: Option<String>,
    /// The default check of --work runs (repeatable), instead of the test command init detects.
    #[arg(long = "check", value_name = "CMD")]
    pub(crate) checks: Vec<String>,
    /// Write .forum/runtime.toml again when it exists (the other files are kept).
    #[arg(long)]
    pub(crate) force: bool,
}

pub(crate) fn run(ctx: &Ctx, args: InitArgs) -> Result<(), CliError> {
    let report = op::init(
        &ctx.dir,
        &InitOptions {
            remotes: args.remotes,
            push: args.push,
            agent: args.agent,
            checks: args.checks,
            force: args.force,
        },
    )?;
    if ctx.json {
        let v = serde_json::to_value(&report).map_err(|e| CliError::internal(e.to_string()))?;
        return ctx.out_json(&v);
    }
    print_remotes(ctx, &report)?;
    print_files(ctx, &report)?;
    if report.forum_dir.is_none() {
        ctx.out("bare repository: no .forum/ directory written")?;
    }
    Ok(())
}

/// Says, remote by remote, which refspecs were added, already present or removed.
fn print_remotes(ctx: &Ctx, report: &InitReport) -> Result<(), CliError> {
    if report.remotes.is_empty() {
        ctx.out("no remotes configured; run `git forum init` again after `git remote add`")?;
    }
    for c in &report.remotes {
        let r = &c.remote;
        ctx.out(&format!(
            "remote {r}: fetch refspec {} {}",
            c.spec,
            if c.fetch_added {
                "added"
            } else {
                "already present"
            }
        ))?;
        for old in &c.replaced {
            ctx.out(&format!(
                "remote {r}: fetch refspec {old} removed (it let plain git fetch move {}{r}/ unverified; `git forum fetch {r}` adopts copies now)",
                sync::REMOTES_PREFIX
            ))?;
        }
        for p in &c.push_added {
            ctx.out(&format!("remote {r}: push refspec {p} added"))?;
        }
    }
    Ok(())
}

/// Says which files `.forum/` got and which it kept, then the seat and the check chosen.
fn print_files(ctx: &Ctx, report: &InitReport) -> Result<(), CliError> {
    for f in &report.written {
        ctx.out(&format!("wrote {f}"))?;
    }
    if let Some(w) = &report.runtime {
        ctx.out(&seat_line(w))?;
        ctx.out(&check_line(report, w))?;
    }
    for f in &report.kept {
        if f == ".forum/runtime.toml" {
            ctx.out(&format!(
                "kept {f} (it exists; `git forum init --force` writes it again for what this machine has: {})",
                op::choose::found_line(&report.found)
            ))?;
        } else {
            ctx.out(&format!("kept {f} (it exists)"))?;
        }
    }
    Ok(())
}

/// The one line that says which worker was chosen and how to change it.
fn seat_line(w: &RuntimeWritten) -> String {
    let others = op::AGENT_NAMES[..9]
        .iter()
        .filter(|n| **n != w.agent)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    match &w.local_model {
        Some(u) => format!(
            "runs use the local model at {u} (.forum/runtime.toml), which is for trying the record, not for editing code: {INSTALL_HINT}; `{}` gets it running",
            w.next.unwrap_or_default()
        ),
        None => {
            let ceiling = w
                .max_cost_usd
                .map(|x| format!(", stopped at ${x} a run ([spend] max_cost_usd)"))
                .unwrap_or_default();
            format!(
                "the worker is {}{ceiling} (.forum/runtime.toml); another: `git forum init --force --agent NAME` ({others})",
                w.describe
            )
        }
    }
}

/// The one line that says which check `--work` runs get by default.
fn check_line(report: &InitReport, w: &RuntimeWritten) -> String {
    match (&report.test_command, w.default_checks.as_slice()) {
        (_, []) => "no test command found: give --work runs --check CMD, or record one with `git forum init --force --check CMD`".to_string(),
        (Some(t), _) => format!(
            "checks: `{}` (from {}) is the default --check of --work runs ([work] default_checks); `git forum init --force --check CMD` records another",
            t.command, t.because
        ),
        (None, checks) => format!(
            "checks: {} the default --check of --work runs ([work] default_checks)",
            checks
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(", ")
                + if checks.len() == 1 { " is" } else { " are" }
        ),
    }
}
