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
    /// Ceiling on the tokens (prompt plus completion) of every model call of this run: a call whose worst case does not fit in what is left never starts, and the run stops on the ceiling (exit 4 on the command line); resume continues it with a fresh allowance. A sandboxed coding agent is stopped mid-run: its metering forwarder refuses its next model request once the allowance is used and stops its process tree, at most one model turn past.
    #[arg(long, value_name = "N")]
    #[serde(default, deserialize_with = "via_value")]
    pub max_tokens: Option<u64>,
    /// Ceiling in dollars on what this run's model calls cost, at the prices in .forum/runtime.toml (price_in_per_mtok, price_out_per_mtok); reserved like max_tokens, and a sandboxed coding agent is stopped mid-run the same way, its forwarder pricing each answer at its seat's prices.
    #[arg(long, value_name = "USD")]
    #[serde(default, deserialize_with = "via_value")]
    pub max_cost_usd: Option<f64>,
}

/// Run a request end to end (route, plan, waves, validation, synthesis) with the server's executors; every step is witnessed in the ledger. Returns {answer, checkpoint, receipt (Forum's action receipt), git_forum_receipt (ours)}.
#[derive(Debug, Clone, Default, clap::Args, Deserialize, schemars::JsonSchema)]
pub struct Submit {
    /// The request to run.
    // The command line takes it as its words.
    #[arg(skip)]
    #[schemars(extend("x-words" = true))]
    pub request: String,
    /// Check the answer against this delivery profile (operator, engineer, researcher, executive); default: the route frame's.
    #[arg(long, value_name = "P")]
    #[serde(default)]
    pub delivery_profile: Option<String>,
    /// Witness a checkpoint and sync the ledger after each wave.
    #[arg(long)]
    #[serde(default)]
    pub checkpoint_each_wave: bool,
    /// The context budget.
    #[command(flatten)]
    #[serde(flatten)]
    pub budget: Budgets,
    /// Stop once this many model calls have started (a wave may overshoot by its width, because the check runs as each task starts).
    #[arg(long, value_name = "N")]
    #[serde(default, deserialize_with = "via_value")]
    pub max_model_calls: Option<u64>,
    /// Stop once this many seconds have passed (checked before each call; a server caps it).
    #[arg(long, value_name = "S")]
    #[serde(default, deserialize_with = "via_value")]
    #[schemars(range(min = 0))]
    pub max_seconds: Option<f64>,
    /// Wait for a human decision before wave N (0-based; repeatable): the run pauses with a gate_pending entry; gate approve, then resume, continue it.
    #[arg(long, visible_alias = "gate-wave", value_name = "N")]
    #[serde(default, deserialize_with = "via_value")]
    pub gate_waves: Vec<u64>,
    /// When the intent check flags the answer, ask the orchestrator seat whether it drifted or only paraphrased the request (one model call, skipped once the budget is spent), witnessed as intent_judgment.
    #[arg(long)]
    #[serde(default)]
    pub judge_intent: bool,
    /// When the delivery floor flags the answer, ask the orchestrator seat for a tighter one (one model call, skipped once the budget is spent); it is delivered only if strictly shorter and covering the request as well (revision, then the revised result).
    #[arg(long)]
    #[serde(default)]
    pub revise: bool,
    /// Use the ledger's context capsule (`git forum capsule --text`) as the request context.
    #[arg(long)]
    #[serde(default)]
    pub use_capsule_context: bool,
    /// Leave the repository out of the context (by default, in a git work tree, the planner gets a map of its tracked files and README, and each task the files most relevant to its instruction; `[context] repo = false` in .forum/runtime.toml turns it off).
    // On the command line the last of the two flags wins.
    #[arg(long, action = ArgAction::SetTrue, overrides_with = "repo_context")]
    #[serde(default)]
    pub no_repo_context: Option<bool>,
    /// Take the repository in as context even when `[context] repo = false` in .forum/runtime.toml says not to; false leaves it out (on the command line, the last of this and no_repo_context wins).
    #[arg(long, action = ArgAction::SetTrue, overrides_with = "no_repo_context")]
    #[serde(default)]
    pub repo_context: Option<bool>,
    /// Work in the repository: each task runs in its own git worktree (in the cache directory, ~/.cache/git-forum/work/ by default, never inside .git/), its changes become a commit tied to the ledger, the checks run on it, the orchestrator seat decides whether it ships, and shipped changes are integrated onto the branch forum/run-SEQ. The checked-out work tree, index and branch are never touched ([work] enabled in .forum/runtime.toml sets it by default).
    #[arg(long)]
    #[serde(default)]
    pub work: bool,
    /// Run the request as one task (the request itself is its instruction) by the worker seat, in the repository: no planner, validator, intent judge or synthesizer is called. The task's checks and the pre-ship gate still decide what lands on forum/run-SEQ, and the answer is written from the record. Needs work; not with judge_intent, revise or use_capsule_context (`git forum fix` is this with work on).
    #[arg(long)]
    #[serde(default)]
    pub solo: bool,
    /// A shell command every change must pass, run in the task's worktree (repeatable; after [work] checks; also run once on the run branch at the end). Needs work.
    #[arg(long, visible_alias = "check", value_name = "CMD")]
    #[serde(default)]
    pub checks: Vec<String>,
    /// Send each task of the work run to `git forum worker` processes through the NATS JetStream server at this URL (nats://HOST:PORT, or several servers of one cluster separated by commas) instead of running it here; this process stays the only ledger writer. `[dispatch]` in .forum/runtime.toml sets it by default and gives the remote, credentials and TLS settings. Needs work.
    #[arg(long, value_name = "URL")]
    #[serde(default)]
    pub dispatch: Option<String>,
    /// A command the built-in editing worker (a chat endpoint in a work run) may run in its worktree, besides the checks (repeatable; matched exactly). Needs work.
    #[arg(long, visible_alias = "allow-cmd", value_name = "CMD")]
    #[serde(default)]
    pub allow_cmds: Vec<String>,
    /// Tool calls each task of the built-in editing worker may make before it is stopped (default 24, at most 500; each turn also counts against max_model_calls). Needs work.
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
    /// Confine each worker and check of a work run with bubblewrap: it sees its task's worktree (writable), the repository's objects and refs (read-only), the system's program and library directories and the /etc files programs need, a private /tmp, and nothing else: no home, no other tree, no host socket, no network. Absent: [work] sandbox in .forum/runtime.toml, else confined when bubblewrap works here; true: refused without it; false (--no-sandbox on the command line): unconfined, witnessed in the run's record.
    // The command line's --no-sandbox is its false; the last of the two wins.
    #[arg(long, action = ArgAction::SetTrue, overrides_with = "no_sandbox")]
    #[serde(default)]
    pub sandbox: Option<bool>,
    /// Let sandboxed workers and checks use the network (a worker that calls its model); not with the sandbox off.
    #[arg(long)]
    #[serde(default)]
    pub sandbox_net: bool,
    /// One more host a sandboxed coding agent may reach through git forum's egress proxy,
    /// beside its model (repeatable; HOST or HOST:PORT, port 443 when left out; recorded in the
    /// run's work record), after [work] sandbox_allow_host.
    #[arg(long, value_name = "HOST[:PORT]")]
    #[serde(default)]
    pub sandbox_allow_host: Vec<String>,
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

impl Submit {
    /// What a solo run cannot take: the options that call a model on the answer, and the
    /// capsule, which is context for a planner a solo run does not have.
    pub(crate) fn check_solo(&self) -> Result<(), Error> {
        if !self.solo {
            return Ok(());
        }
        for (on, name) in [
            (self.judge_intent, "judge_intent"),
            (self.revise, "revise"),
            (self.use_capsule_context, "use_capsule_context"),
        ] {
            if on {
                return Err(Error::usage(format!(
                    "a solo run calls no model but its worker and the pre-ship gate, and has no planner to read context: leave out {name} (--{})",
                    name.replace('_', "-")
                )));
            }
        }
        Ok(())
    }
}

impl Request for Submit {
    fn validate(&self) -> Result<(), Error> {
        non_blank("request", &self.request)?;
        self.check_solo()
    }
}

/// Continue an unfinished run (the latest, or run: its request seq), holding the gates it was submitted with: an undecided gate is refused. Returns what submit returns.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
pub struct Resume {
    /// The run's request seq (`git forum runs` lists them); default: the latest unfinished run.
    #[serde(default, deserialize_with = "via_value")]
    pub run: Option<u64>,
    /// Stop once this many model calls have started (a wave may overshoot by its width, because the check runs as each task starts).
    #[arg(long, value_name = "N")]
    #[serde(default, deserialize_with = "via_value")]
    pub max_model_calls: Option<u64>,
    /// Stop once this many seconds have passed (checked before each call; a server caps it).
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
