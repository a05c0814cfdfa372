//! The requests that start, continue and stop runs: submit, resume, halt.

use clap::ArgAction;
use serde::Deserialize;

use super::{Request, non_blank, via_value};
use crate::surface::Error;

/// The four context-budget flags (forum-features §1.3), shared by `submit`, `resume` and
/// `context preflight`. Tokens are approximate: UTF-8 bytes / 4.
#[derive(Debug, Clone, Default, clap::Args, Deserialize, schemars::JsonSchema)]
pub struct Budgets {
    /// Run-wide cap on admitted context tokens (all slices share one meter).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    #[serde(default, deserialize_with = "via_value")]
    #[schemars(range(min = 0))]
    pub context_token_budget: Option<i64>,
    /// Cap on request-level context (--context-cmd, --use-capsule-context).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    #[serde(default, deserialize_with = "via_value")]
    #[schemars(range(min = 0))]
    pub request_context_token_budget: Option<i64>,
    /// Cap on each per-task context slice.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    #[serde(default, deserialize_with = "via_value")]
    #[schemars(range(min = 0))]
    pub task_context_token_budget: Option<i64>,
    /// Cap on each upstream output injected into a prompt, and each synthesis input.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    #[serde(default, deserialize_with = "via_value")]
    #[schemars(range(min = 0))]
    pub upstream_token_budget: Option<i64>,
}

impl Budgets {
    /// The four values, each checked to be 0 or more (`flag` names one in the refusal).
    pub(crate) fn values(
        &self,
        refuse: impl Fn(&str, i64) -> Error,
    ) -> Result<[Option<u64>; 4], Error> {
        let check = |flag: &str, v: Option<i64>| match v {
            Some(n) if n < 0 => Err(refuse(flag, n)),
            other => Ok(other.map(|n| n as u64)),
        };
        Ok([
            check("context_token_budget", self.context_token_budget)?,
            check(
                "request_context_token_budget",
                self.request_context_token_budget,
            )?,
            check("task_context_token_budget", self.task_context_token_budget)?,
            check("upstream_token_budget", self.upstream_token_budget)?,
        ])
    }
}

/// The spend ceilings of submit and resume.
#[derive(Debug, Clone, Default, clap::Args, Deserialize, schemars::JsonSchema)]
pub struct Ceilings {
    /// Ceiling on the run's prompt plus completion tokens: a call whose worst case does not fit never starts.
    #[arg(long, value_name = "N")]
    #[serde(default, deserialize_with = "via_value")]
    pub max_tokens: Option<u64>,
    /// Ceiling in dollars on what the run's model calls cost, at the runtime's prices.
    #[arg(long, value_name = "USD")]
    #[serde(default, deserialize_with = "via_value")]
    pub max_cost_usd: Option<f64>,
}

/// Run a request end to end (route, plan, waves, validation, synthesis) with the server's executors; every step is witnessed in the ledger. Returns {answer, checkpoint, receipt (Forum's action receipt), git_forum_receipt (ours)}.
#[derive(Debug, Clone, Default, clap::Args, Deserialize, schemars::JsonSchema)]
pub struct Submit {
    /// The request to run.
    pub request: String,
    /// operator, engineer, researcher or executive (default: the route frame's).
    #[arg(long, value_name = "P")]
    #[serde(default)]
    pub delivery_profile: Option<String>,
    /// Witness a checkpoint after each wave.
    #[arg(long)]
    #[serde(default)]
    pub checkpoint_each_wave: bool,
    /// The context budget.
    #[command(flatten)]
    #[serde(flatten)]
    pub budget: Budgets,
    /// Stop once this many model calls have started.
    #[arg(long, value_name = "N")]
    #[serde(default, deserialize_with = "via_value")]
    pub max_model_calls: Option<u64>,
    /// Stop after this many seconds (capped by the server).
    #[arg(long, value_name = "S")]
    #[serde(default, deserialize_with = "via_value")]
    #[schemars(range(min = 0))]
    pub max_seconds: Option<f64>,
    /// Waves (0-based) that wait for a human decision.
    #[arg(long, visible_alias = "gate-wave", value_name = "N")]
    #[serde(default, deserialize_with = "via_value")]
    pub gate_waves: Vec<u64>,
    /// Ask the orchestrator whether a flagged answer drifted from the request.
    #[arg(long)]
    #[serde(default)]
    pub judge_intent: bool,
    /// Ask for a tighter answer when the delivery floor flags it.
    #[arg(long)]
    #[serde(default)]
    pub revise: bool,
    /// Give the planner the ledger's capsule as request context.
    #[arg(long)]
    #[serde(default)]
    pub use_capsule_context: bool,
    /// Leave the repository (its map and each task's relevant files) out of the context.
    #[arg(long, action = ArgAction::SetTrue)]
    #[serde(default)]
    pub no_repo_context: Option<bool>,
    /// Take the repository (its map and each task's relevant files) in as context (true) or leave it out (false); unset: the runtime config's [context] repo, else true.
    #[arg(long, action = ArgAction::SetTrue)]
    #[serde(default)]
    pub repo_context: Option<bool>,
    /// Work in the repository: a worktree per task, changes as commits, checks, a pre-ship gate, the run branch forum/run-SEQ.
    #[arg(long)]
    #[serde(default)]
    pub work: bool,
    /// Shell commands every change must pass (a --work run).
    #[arg(long, visible_alias = "check", value_name = "CMD")]
    #[serde(default)]
    pub checks: Vec<String>,
    /// Commands the built-in editing worker may run besides the checks (a --work run).
    #[arg(long, visible_alias = "allow-cmd", value_name = "CMD")]
    #[serde(default)]
    pub allow_cmds: Vec<String>,
    /// Tool calls each task of the built-in editing worker may make (default 24).
    #[arg(long, value_name = "N")]
    #[serde(default, deserialize_with = "via_value")]
    pub max_tool_calls: Option<u64>,
    /// Independent attempts at each task of a work run, each in its own worktree with its own checks (1 to 8, default 1).
    #[arg(long, value_name = "N")]
    #[serde(default, deserialize_with = "via_value")]
    pub attempts: Option<u64>,
    /// The spend ceilings.
    #[command(flatten)]
    #[serde(flatten)]
    pub ceilings: Ceilings,
    /// Confine the workers and checks of a work run with bubblewrap (true: refused without it; false: unconfined, witnessed; absent: the server's [work] sandbox, else confined when bubblewrap works).
    #[arg(long, action = ArgAction::SetTrue)]
    #[serde(default)]
    pub sandbox: Option<bool>,
    /// Let confined workers and checks use the network (not with sandbox false).
    #[arg(long)]
    #[serde(default)]
    pub sandbox_net: bool,
}

impl Submit {
    /// Whether the run takes the repository as context, as the request says: `repo_context`,
    /// or the older `no_repo_context: true`; `None` when it says neither. The two disagreeing
    /// is refused.
    pub(crate) fn repo_choice(&self) -> Result<Option<bool>, Error> {
        match (self.repo_context, self.no_repo_context) {
            (Some(a), Some(b)) if a == b => Err(Error::usage(
                "fields \"repo_context\" and \"no_repo_context\" disagree: give only repo_context (true or false)",
            )),
            (Some(a), _) => Ok(Some(a)),
            (None, Some(b)) => Ok(Some(!b)),
            (None, None) => Ok(None),
        }
    }
}

impl Request for Submit {
    fn validate(&self) -> Result<(), Error> {
        non_blank("request", &self.request)
    }
}

/// Continue an unfinished run (the latest, or run: its request seq), holding the gates it was submitted with: an undecided gate is refused. Returns what submit returns.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
pub struct Resume {
    /// The run's request seq.
    #[serde(default, deserialize_with = "via_value")]
    pub run: Option<u64>,
    /// Stop once this many model calls have started.
    #[arg(long, value_name = "N")]
    #[serde(default, deserialize_with = "via_value")]
    pub max_model_calls: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long, value_name = "S")]
    #[serde(default, deserialize_with = "via_value")]
    #[schemars(range(min = 0))]
    pub max_seconds: Option<f64>,
    /// The spend ceilings.
    #[command(flatten)]
    #[serde(flatten)]
    pub ceilings: Ceilings,
}

impl Request for Resume {}

/// Halt a running run (run: its request seq; default the latest running one), whichever process drives it: no new task, validation or rung starts, its workers are killed, and it witnesses halted {by, reason}; resume continues it. Waits up to wait_seconds (default 30) for it to stop.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Halt {
    /// The run's request seq (`git forum runs` lists them); default: the latest running run.
    #[arg(value_name = "RUN")]
    #[serde(default)]
    pub run: Option<u64>,
    /// Why, recorded in the halted entry.
    #[arg(long, value_name = "TEXT")]
    #[serde(default)]
    pub reason: Option<String>,
    /// Who halts (default: git config user.name, else $USER, on the command line; "http client" over HTTP and MCP).
    #[arg(long, value_name = "NAME")]
    #[serde(default)]
    pub by: Option<String>,
    /// Seconds to wait for the run to stop (default 30, at most 600; 0: ask and return at once).
    #[arg(
        long,
        visible_alias = "wait",
        value_name = "S",
        allow_negative_numbers = true
    )]
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub wait_seconds: Option<f64>,
}

impl Request for Halt {}
