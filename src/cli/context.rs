//! `git forum context preflight REQUEST`: how much of the request context a run would admit
//! under a context budget (forum-spec §10, Forum's `forum.context-preflight/v1`), without
//! running a model and without writing anything to the ledger.
//!
//! The context is what a run would read before planning: the output of `--context-cmd`
//! (run as `CMD request REQUEST`) or the ledger's capsule text (`--use-capsule-context`, the
//! ledger as it stands now), then, in a work tree, the repository's map (unless
//! `--no-repo-context` or `[context] repo = false`), built as a run builds it. It goes through
//! the request source of the budget exactly as in a run, on a fresh meter.

use std::time::Duration;

use serde_json::Value as J;

use super::submit::{ContextCmd, capsule_text_of, preload, repo_choice};
use super::{CliError, Ctx};
use crate::exec::config;
use crate::surface::request::reports::Preflight;
use crate::surface::run::{CommandContext, ContextProvider};

pub(crate) use crate::surface::context::{Got, with_repo};

/// Inspect context pressure.
#[derive(Debug, clap::Args)]
pub(crate) struct ContextArgs {
    /// The context command.
    #[command(subcommand)]
    pub(crate) command: ContextCommand,
}

/// What `git forum context` does.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum ContextCommand {
    /// Estimate how much of the request context a run would admit under the context budget
    /// (retained, trimmed or omitted), without a model and without writing to the ledger.
    /// Prints a summary, or with --json the forum.context-preflight/v1 object.
    Preflight(PreflightArgs),
}

/// `git forum context preflight`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct PreflightArgs {
    /// The request (several words are joined with spaces).
    #[arg(required = true)]
    pub(crate) request: Vec<String>,
    /// The context command, the command line's own source of context.
    #[command(flatten)]
    pub(crate) context: ContextCmd,
    /// What is measured: the request the daemon and MCP take (its text is the words above).
    #[command(flatten)]
    pub(crate) req: Preflight,
    /// Leave the repository's map out, as a run with --no-repo-context would (the last of
    /// this and --repo-context wins).
    #[arg(long, overrides_with = "repo_context")]
    pub(crate) no_repo_context: bool,
}

/// The preflight in a few lines, for people.
fn text(p: &J) -> String {
    let c = &p["context"];
    let n = |v: &J| v.as_u64().unwrap_or(0);
    let mut out = vec![
        format!(
            "context preflight: {}",
            if p["ready"] == J::Bool(true) {
                "ready"
            } else {
                "not ready"
            }
        ),
        format!(
            "request: {} bytes, about {} tokens",
            n(&p["request"]["bytes"]),
            n(&p["request"]["tokens"])
        ),
        format!(
            "context: {} {} ({}), {} -> {} tokens",
            c["source"].as_str().unwrap_or(""),
            c["action"].as_str().unwrap_or(""),
            c["reason"].as_str().unwrap_or(""),
            n(&c["original_tokens"]),
            n(&c["admitted_tokens"]),
        ),
    ];
    if let Some(n) = c["repo_tokens"].as_u64() {
        out.push(format!(
            "of which the repository's map: about {n} tokens (--no-repo-context leaves it out)"
        ));
    }
    if let Some(limits) = p["limits"].as_object().filter(|l| !l.is_empty()) {
        let parts: Vec<String> = limits.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.push(format!("limits: {}", parts.join(" ")));
    }
    if let Some(s) = c.get("structured") {
        out.push(format!(
            "structured context: {} verdict={} retained={} omitted={} tokens={}/{}",
            s["schema"].as_str().unwrap_or(""),
            s["verification_verdict"],
            s["retained"],
            s["omitted"],
            s["approx_tokens"],
            s["token_budget"]
        ));
    }
    for issue in p["issues"].as_array().into_iter().flatten() {
        out.push(format!("- {}", issue.as_str().unwrap_or("")));
    }
    out.join("\n")
}

/// `git forum context ...`.
pub(crate) fn run(ctx: &Ctx, args: ContextArgs) -> Result<(), CliError> {
    match args.command {
        ContextCommand::Preflight(a) => preflight(ctx, a),
    }
}

fn preflight(ctx: &Ctx, a: PreflightArgs) -> Result<(), CliError> {
    let request = a.request.join(" ");
    crate::route::check_request(&request).map_err(|e| CliError::usage(e.to_string()))?;
    let budget = a.req.budget.budget()?;
    let limit = |v: Option<u64>, default: usize| v.map_or(default, |n| n as usize);
    let max_items = limit(a.req.max_items, 8);
    let max_text_chars = limit(a.req.max_text_chars, 240);
    let (got, source) = if let Some(line) = &a.context.context_cmd {
        let argv =
            config::split_cmd(line).map_err(|e| CliError::usage(format!("--context-cmd: {e}")))?;
        let timeout = a.context.context_timeout;
        if !(timeout.is_finite() && timeout > 0.0) {
            return Err(CliError::usage(format!(
                "--context-timeout {timeout} must be a number of seconds above 0"
            )));
        }
        let provider = CommandContext::new(argv, Duration::from_secs_f64(timeout));
        let empty = crate::ledger::MemoryStorage::default();
        let got = match provider.request_context(&request, &empty) {
            Ok(t) => Got::Text(t),
            Err(f) => Got::Failed {
                code: f.code,
                message: f.message,
            },
        };
        (got, "command")
    } else if a.req.use_capsule_context {
        let store = ctx.store()?;
        let pre = preload(&store)?;
        let text = capsule_text_of(&pre, &store, max_items, max_text_chars)
            .map_err(|e| CliError::internal(format!("cannot read the ledger: {e}")))?;
        (Got::Text(text), "capsule")
    } else {
        (Got::Text(String::new()), "none")
    };
    // The repository's map, as the run would take it in: the flags, else `[context] repo`.
    let defaults = crate::config::load_runtime(&ctx.dir, None, &config::Flags::default())
        .map(|l| l.runtime.context)
        .map_err(|e| CliError::usage(e.to_string()))?;
    let repo = crate::surface::run::options::repo_context_on(
        repo_choice(a.req.repo_context, a.no_repo_context),
        &defaults,
    )
    .then_some(ctx.dir.as_path());
    let (got, source, part) = with_repo(got, source, repo);
    let payload =
        crate::surface::context::preflight(&request, &got, &source, budget.as_ref(), &part)
            .to_value();
    if ctx.json {
        return ctx.out(&payload.python_pretty());
    }
    ctx.out(&text(&payload.to_serde()))
}
