//! The requests of workers: start one (the command line's `git forum worker`, or a worker the
//! daemon or MCP server owns), and stop one the server owns.

use serde::Deserialize;

use super::{Request, non_blank};
use crate::surface::Error;

fn origin() -> String {
    "origin".into()
}

fn one() -> u64 {
    1
}

fn thirty() -> f64 {
    30.0
}

/// Start a worker that does the tasks `submit --work --dispatch` (or a dispatched campaign) publishes: it pulls a task of this ledger, fetches its base from the git remote, runs the worker seat on it in a worktree of its own, runs its checks, pushes the change commit to refs/forum/results/ on the remote, publishes the result and acknowledges the task. A worker never writes the ledger. Over the daemon and MCP the server owns it (its executors, its repository) until it is stopped (GET /workers watches it).
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerStart {
    /// The NATS JetStream server (nats://HOST:PORT), or several servers of one cluster
    /// separated by commas.
    #[arg(long, value_name = "URL")]
    pub nats: String,
    /// The git remote the submitting repository pushes task bases to.
    #[arg(long, value_name = "NAME", default_value = "origin")]
    #[serde(default = "origin")]
    pub remote: String,
    /// Run every task on this slot of the runtime config (default, cheap, capable, frontier) instead of the worker seat of the task's lane.
    #[arg(long, value_name = "NAME")]
    #[serde(default)]
    pub seat: Option<String>,
    /// Tasks at a time (1 to 64).
    #[arg(long, value_name = "K", default_value_t = 1)]
    #[serde(default = "one")]
    pub concurrency: u64,
    /// Seconds a task may go without a sign of life before the server gives it to another worker (the consumer's ack wait, set when the ledger's worker consumer is created).
    #[arg(long, value_name = "S", default_value_t = 30.0)]
    #[serde(default = "thirty")]
    pub lease: f64,
    /// The worker's name in results and the record (default: the host name and process id, and over the daemon a number after them).
    #[arg(long, value_name = "NAME")]
    #[serde(default)]
    pub name: Option<String>,
    /// Stop after this many tasks.
    #[arg(long, value_name = "N")]
    #[serde(default)]
    pub max_tasks: Option<u64>,
    /// Run tasks unconfined. Without it a worker runs each task's seat and checks under bubblewrap as a local work run does (its task's worktree writable, the repository read-only, no home, no network), and refuses to start where bubblewrap is not usable; [work] sandbox = false in .forum/runtime.toml says the same.
    #[arg(long)]
    #[serde(default)]
    pub no_sandbox: bool,
    /// Let confined seats and checks use the network (refused beside --no-sandbox, the field no_sandbox).
    #[arg(long)]
    #[serde(default)]
    pub sandbox_net: bool,
    /// One more host a confined coding agent may reach through git forum's egress proxy (HOST or HOST:PORT, repeatable), after [work] sandbox_allow_host.
    #[arg(long, value_name = "HOST")]
    #[serde(default)]
    pub sandbox_allow_host: Vec<String>,
}

impl Request for WorkerStart {
    fn validate(&self) -> Result<(), Error> {
        non_blank("nats", &self.nats)?;
        non_blank("remote", &self.remote)?;
        if let Some(n) = &self.name {
            non_blank("name", n)?;
        }
        if !(1..=64).contains(&self.concurrency) {
            return Err(Error::usage(format!(
                "concurrency {} must be from 1 to 64",
                self.concurrency
            )));
        }
        if !(self.lease.is_finite() && self.lease >= 1.0) {
            return Err(Error::usage(format!(
                "lease {} must be a number of seconds, 1 or more",
                self.lease
            )));
        }
        Ok(())
    }
}

/// Stop a worker this server owns: it finishes the tasks it holds, pulls no more, and shows as stopped in GET /workers.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerStop {
    /// The worker's name (GET /workers lists them).
    #[arg(long, value_name = "NAME")]
    pub name: String,
}

impl Request for WorkerStop {
    fn validate(&self) -> Result<(), Error> {
        non_blank("name", &self.name)
    }
}
