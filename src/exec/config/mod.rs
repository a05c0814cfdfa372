//! The runtime config: which executor runs the control roles, each model tier and each seat,
//! read from `.forum/runtime.toml` (or `--runtime-config FILE`) and merged with the executor
//! flags. Pure: it parses text it is given and answers questions about the result; reading
//! files, the environment and `PATH` is the caller's job (see [`Facts`]).
//!
//! # The file
//!
//! ```toml
//! # Control roles (planner, validator, synthesizer, judge) and lanes without a tier executor.
//! [runtime.default]
//! chat_url = "http://127.0.0.1:8080/v1/chat/completions"  # the full endpoint URL, as in Forum
//! model = "qwen2.5-0.5b-instruct"    # default: "default"
//! is_local = true                    # loopback only, and no key is sent
//!
//! # One table per tier a roster lane can demand (model_tier); any other tier is an error.
//! [runtime.tiers.cheap]
//! cmd = "ollama run llama3"          # split with POSIX shell rules; the prompt is appended
//!
//! [runtime.tiers.capable]
//! chat_url = "https://api.openai.com/v1/chat/completions"
//! model = "gpt-4o-mini"              # default: the tier's name
//! api_key_env = "OPENAI_API_KEY"     # the *name* of the variable holding the key
//!
//! [runtime.tiers.frontier]
//! api = "anthropic"                  # Anthropic Messages API
//! model = "claude-sonnet-4-6"        # default: claude-sonnet-4-6; key from ANTHROPIC_API_KEY
//!
//! # Optional: the two Aesop seats. Each is the name of a slot ("default", "cheap", "capable",
//! # "frontier") or an executor table of its own.
//! [seats]
//! worker = "capable"                 # every task runs here, whatever its lane's tier
//! orchestrator = { claude = true }   # plans, validates, synthesizes, judges: `claude -p`
//! ```
//!
//! An executor table holds exactly one of `chat_url` (OpenAI-compatible chat), `cmd` (a
//! program), `api = "anthropic"` or `claude = true` (the Claude Code CLI, `claude -p`), plus:
//! `model` (chat, api, claude), `api_key_env` (chat, api), `is_local` and `allow_private`
//! (chat), `timeout_seconds` and `max_response_bytes` (all), and for the spend ceilings
//! `price_in_per_mtok` / `price_out_per_mtok` (dollars per million tokens, both or neither) and
//! `max_tokens` (the output cap of a call that sets none), and `count_tokens = "llama.cpp"`
//! (chat: a call reserves the prompt tokens the llama.cpp server counts, not one per byte), and
//! `json_schema = true` (chat: the model answers with `json_schema` structured output, which
//! OpenAI's endpoint otherwise takes only from the models [`structured`] knows). A program (`cmd`, `claude`, `codex`,
//! `aider`) may take `env = ["NAME", ...]`: the variables of git forum's environment its
//! processes get beyond the allowlist (`crate::exec::command::env`); a coding-agent preset
//! without it gets its provider's key variables ([`Preset::default_env`]).
//!
//! Without `[seats]`, tasks run on their lane's tier executor and the control roles on the
//! default, which is Forum's behaviour. `worker` pins every task to one executor;
//! `orchestrator` replaces the default for the control roles.
//!
//! Forum's files load unchanged unless they carry keys Forum ignores: **this loader is stricter
//! than Forum on purpose.** Unknown keys and tables are errors (a misspelt `chat_ur` would
//! otherwise silently leave a slot empty), every value has a type, a table naming two executors
//! is refused (Forum lets `chat_url` win), and so is a table naming none. Every error is one
//! line naming the file, the table, the key, the line and the column.
//!
//! # Files
//!
//! This module holds the public types; the work is in one file per job: `raw.rs` (the file's
//! shape as serde reads it), `parse.rs` (the file into a [`RuntimeConfig`], with located
//! errors), `flags.rs` (the executor flags merged over the file into a [`Runtime`]),
//! `resolve.rs` (which executor each role and tier ends up on), `check.rs` (what would stop a
//! run, given [`Facts`] about the machine) and `record.rs` (the executors as a run's ledger
//! records them, and back).

mod check;
mod flags;
mod parse;
mod raw;
pub(crate) mod record;
mod resolve;
pub(crate) mod structured;
#[cfg(test)]
mod tests;
pub(crate) mod verify;

use std::collections::BTreeMap;
use std::fmt;

use super::endpoint::{self, Origin, Policy};
pub(crate) use super::preset::Preset;
use crate::roster::Tier;

pub(crate) use check::{Facts, Issue, check_endpoint, endpoint_of, issues};
pub(crate) use flags::{Flags, TierFlags, merge};
pub(crate) use parse::{MAX_CHECK_BYTES, parse_runtime_config, split_cmd};
pub(crate) use resolve::{Unresolved, Via};
pub use verify::{SeatVerify, Verification, Verify};

/// Model name for a chat default slot without `model` (Forum's default).
pub(crate) const DEFAULT_CHAT_MODEL: &str = "default";
/// Model for `api = "anthropic"` without `model` (Forum's default).
pub(crate) const DEFAULT_ANTHROPIC_MODEL: &str = "claude-sonnet-4-6";
/// Key variable of the Anthropic API.
pub(crate) const ANTHROPIC_KEY_ENV: &str = "ANTHROPIC_API_KEY";
/// Endpoint of the Anthropic Messages API.
pub(crate) const ANTHROPIC_URL: &str = "https://api.anthropic.com/v1/messages";
/// Default deadline of a command (Forum's subprocess timeout).
pub(crate) const DEFAULT_CMD_TIMEOUT: u64 = 60;
/// Default deadline of `claude -p`, which works in several turns.
pub(crate) const DEFAULT_CLAUDE_TIMEOUT: u64 = 300;
/// Default total deadline of an HTTP call.
pub(crate) const DEFAULT_HTTP_TIMEOUT: u64 = 120;
/// Longest deadline accepted.
pub(crate) const MAX_TIMEOUT: u64 = 24 * 3600;
/// Default cap on a response body or a command's captured output.
pub(crate) const DEFAULT_MAX_RESPONSE_BYTES: u64 = 8 * 1024 * 1024;
/// Bounds on `max_response_bytes`.
pub(crate) const RESPONSE_BYTES_RANGE: (u64, u64) = (1024, 1024 * 1024 * 1024);
/// The key for a `--runtime-config`-less repository config.
pub(crate) const REPO_CONFIG_PATH: &str = ".forum/runtime.toml";

/// A place an executor can be configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Slot {
    /// `[runtime.default]`, `--cmd`, `--chat-url`, `--api`, `--claude`.
    Default,
    /// `[runtime.tiers.T]`, `--T-cmd`, `--T-chat-url`.
    Tier(Tier),
}

impl Slot {
    /// Parses a slot name (`default`, `cheap`, `capable`, `frontier`).
    pub(crate) fn parse(s: &str) -> Option<Slot> {
        if s == "default" {
            Some(Slot::Default)
        } else {
            Tier::parse(s).map(Slot::Tier)
        }
    }

    /// The slot's name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Slot::Default => "default",
            Slot::Tier(t) => t.as_str(),
        }
    }

    /// The table that configures it.
    pub(crate) fn table(self) -> String {
        match self {
            Slot::Default => "runtime.default".into(),
            Slot::Tier(t) => format!("runtime.tiers.{t}"),
        }
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The order in which a tier stands in for a missing default (Forum's).
pub(crate) const DEFAULT_FALLBACK: [Tier; 3] = [Tier::Capable, Tier::Frontier, Tier::Cheap];

/// What an executor is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutorKind {
    /// Run a program with the prompt as its last argument, no shell.
    Command {
        /// Program and leading arguments.
        argv: Vec<String>,
        /// Set for a coding-agent preset (`claude`/`codex`/`aider = true`, `--claude`,
        /// `--codex`, `--aider`): `argv` is then what runs outside a worktree, and the
        /// executor adds the editing flags inside one ([`crate::exec::preset`]).
        preset: Option<Preset>,
    },
    /// An OpenAI-compatible `/v1/chat/completions` endpoint.
    Chat {
        /// The endpoint URL as written.
        url: String,
        /// The model name sent in each request.
        model: String,
        /// The variable holding a bearer key, if any.
        api_key_env: Option<String>,
    },
    /// The Anthropic Messages API.
    Anthropic {
        /// The model name.
        model: String,
        /// The variable holding the key.
        api_key_env: String,
    },
}

impl ExecutorKind {
    /// A short name for the kind.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            ExecutorKind::Command {
                preset: Some(p), ..
            } => p.name(),
            ExecutorKind::Command { .. } => "command",
            ExecutorKind::Chat { .. } => "chat",
            ExecutorKind::Anthropic { .. } => "anthropic",
        }
    }
}

/// One configured executor with its limits and the policy of its endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutorSpec {
    /// What runs.
    pub kind: ExecutorKind,
    /// `is_local = true` (chat only): loopback only, no key.
    pub is_local: bool,
    /// Private and link-local addresses allowed (chat only).
    pub allow_private: bool,
    /// Total deadline of one call.
    pub timeout_seconds: u64,
    /// Cap on a response body or captured output.
    pub max_response_bytes: u64,
    /// `json_schema = true` / `--json-schema` (chat only): the model answers with `json_schema`
    /// structured output though it is not in the known set ([`structured`]).
    pub json_schema: bool,
    /// Where it was configured.
    pub origin: Origin,
    /// `tier = N` and `verify = "..."`: how its changes are checked ([`verify`]).
    pub verify: SeatVerify,
    /// Its price and output cap, for the spend ceilings (`price_in_per_mtok`,
    /// `price_out_per_mtok`, `max_tokens`).
    pub metering: Metering,
    /// `env = [...]` (programs only): the variables its processes get beyond the allowlist;
    /// `None` when not written (a preset then gets [`Preset::default_env`]).
    pub env: Option<Vec<String>>,
}

/// What a spend ceiling needs to know of an executor: its price (none: it costs nothing, so
/// only `--max-tokens` limits it) and its cap on generated tokens (used when a call sets none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Metering {
    /// Dollars per million tokens in and out, as micro-dollars.
    pub(crate) price: Option<crate::spend::Price>,
    /// `max_tokens`: the output cap of a call that sets none.
    pub(crate) max_tokens: Option<u32>,
    /// `count_tokens`: ask the server how many tokens a prompt is before reserving it.
    pub(crate) count_tokens: Option<TokenCount>,
}

impl Metering {
    /// The same metering with the server's own prompt count (`count_tokens`).
    pub fn counting_tokens(self, count: TokenCount) -> Metering {
        Metering {
            count_tokens: Some(count),
            ..self
        }
    }
}

/// How a chat server counts a prompt's tokens for a reservation (`count_tokens`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenCount {
    /// llama.cpp's server: `POST /apply-template` renders the messages with the model's chat
    /// template, `POST /tokenize` counts the result: the prompt tokens the server will report.
    LlamaCpp,
}

impl TokenCount {
    /// Every value `count_tokens` takes.
    pub(crate) const NAMES: &'static [&'static str] = &["llama.cpp"];

    /// The value as the configuration and the record spell it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            TokenCount::LlamaCpp => "llama.cpp",
        }
    }

    /// The counter a configured or recorded name names.
    pub(crate) fn parse(s: &str) -> Option<TokenCount> {
        match s {
            "llama.cpp" => Some(TokenCount::LlamaCpp),
            _ => None,
        }
    }
}

impl ExecutorSpec {
    /// The endpoint policy for this executor.
    pub(crate) fn policy(&self) -> Policy {
        Policy {
            is_local: self.is_local,
            allow_private: self.allow_private,
            origin: self.origin,
        }
    }

    /// The endpoint URL, for HTTP executors.
    pub(crate) fn url(&self) -> Option<&str> {
        match &self.kind {
            ExecutorKind::Chat { url, .. } => Some(url),
            ExecutorKind::Anthropic { .. } => Some(ANTHROPIC_URL),
            ExecutorKind::Command { .. } => None,
        }
    }

    /// The variable whose value is sent as the key, if one is sent.
    pub(crate) fn key_env(&self) -> Option<&str> {
        match &self.kind {
            ExecutorKind::Chat {
                api_key_env: Some(k),
                ..
            } if !self.is_local => Some(k),
            ExecutorKind::Anthropic { api_key_env, .. } if !self.is_local => Some(api_key_env),
            _ => None,
        }
    }

    /// The model this executor asks for (for commands: the program).
    pub(crate) fn model(&self) -> &str {
        match &self.kind {
            ExecutorKind::Chat { model, .. } | ExecutorKind::Anthropic { model, .. } => model,
            ExecutorKind::Command { argv, preset } => {
                if preset.is_some()
                    && let Some(i) = argv.iter().position(|a| a == "--model")
                    && let Some(m) = argv.get(i + 1)
                {
                    return m;
                }
                argv.first().map_or("", |s| s.as_str())
            }
        }
    }

    /// The variables of git forum's environment this executor's processes get beyond the
    /// allowlist: its `env` list, else a preset's provider keys; none for HTTP executors,
    /// which start no process.
    pub(crate) fn passed_env(&self) -> Vec<String> {
        match &self.kind {
            ExecutorKind::Command { preset, .. } => self.env.clone().unwrap_or_else(|| {
                preset.map_or_else(Vec::new, |p| {
                    p.default_env().iter().map(|s| s.to_string()).collect()
                })
            }),
            _ => Vec::new(),
        }
    }

    /// The variables whose values this executor may carry: the key an HTTP executor sends
    /// and the variables a program is handed. Their values are secrets to the run's scanner.
    pub(crate) fn secret_env(&self) -> Vec<String> {
        match &self.kind {
            ExecutorKind::Chat {
                api_key_env: Some(k),
                ..
            }
            | ExecutorKind::Anthropic { api_key_env: k, .. } => vec![k.clone()],
            // A preset's own list names places and models beside its keys: only the keys are
            // secret (a model's name in the record is what the task ran on).
            ExecutorKind::Command {
                preset: Some(p), ..
            } if self.env.is_none() => self
                .passed_env()
                .into_iter()
                .filter(|n| !p.settings_env().contains(&n.as_str()))
                .collect(),
            _ => self.passed_env(),
        }
    }

    /// The program a command executor runs.
    pub(crate) fn program(&self) -> Option<&str> {
        match &self.kind {
            ExecutorKind::Command { argv, .. } => argv.first().map(|s| s.as_str()),
            _ => None,
        }
    }

    /// A one-line description for people (never a key value).
    pub(crate) fn describe(&self) -> String {
        match &self.kind {
            ExecutorKind::Command { argv, preset } => {
                let line = shlex::try_join(argv.iter().map(|s| s.as_str()))
                    .unwrap_or_else(|_| argv.join(" "));
                match preset {
                    Some(Preset::Claude) => format!("claude code: {line}"),
                    Some(p) => format!("{}: {line}", p.name()),
                    None => format!("command: {line}"),
                }
            }
            ExecutorKind::Chat {
                url,
                model,
                api_key_env,
            } => {
                let shown = url::Url::parse(url)
                    .map(|u| endpoint::display_url(&u))
                    .unwrap_or_else(|_| "(invalid URL)".into());
                let key = match (api_key_env, self.is_local) {
                    (_, true) => ", local: no key".to_string(),
                    (Some(k), false) => format!(", key from ${k}"),
                    (None, false) => ", no key".to_string(),
                };
                format!("chat: {shown} model {model}{key}")
            }
            ExecutorKind::Anthropic { model, api_key_env } => {
                format!("anthropic: model {model}, key from ${api_key_env}")
            }
        }
    }
}

/// Who runs a seat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SeatChoice {
    /// Not set: workers follow the lane's tier, the orchestrator uses the default.
    Unset,
    /// The executor of a slot.
    Slot(Slot),
    /// An executor of its own.
    Inline(ExecutorSpec),
}

/// The `[seats]` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SeatChoices {
    /// Runs the tasks.
    pub(crate) worker: SeatChoice,
    /// Plans, validates, synthesizes and judges.
    pub(crate) orchestrator: SeatChoice,
}

impl Default for SeatChoices {
    fn default() -> SeatChoices {
        SeatChoices {
            worker: SeatChoice::Unset,
            orchestrator: SeatChoice::Unset,
        }
    }
}

/// A parsed runtime config file (before the flags).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct RuntimeConfig {
    /// `[runtime.default]`.
    pub(crate) default: Option<ExecutorSpec>,
    /// `[runtime.tiers.*]`.
    pub(crate) tiers: BTreeMap<Tier, ExecutorSpec>,
    /// `[seats]`.
    pub(crate) seats: SeatChoices,
    /// `[work]`.
    pub work: WorkConfig,
    /// `[context]`.
    pub context: ContextConfig,
    /// `[spend]`.
    pub spend: SpendConfig,
    /// `[observe]`.
    pub observe: ObserveConfig,
    /// `[dispatch]`.
    pub dispatch: DispatchConfig,
    /// Things worth saying that are not errors (unusual key variable names).
    pub(crate) warnings: Vec<String>,
}

/// The most attempts a task of a `--work` run may get (`--attempts`, `[work] attempts`).
pub(crate) const MAX_ATTEMPTS: u32 = 8;

/// The `[work]` table: whether runs change the repository by default (`enabled`), and the
/// check commands every such run's changes must pass (`checks`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct WorkConfig {
    /// `enabled = true`: `submit` behaves as if given `--work`.
    pub(crate) enabled: bool,
    /// `checks = ["CMD", ...]`: run before the `--check` commands of the command line.
    pub(crate) checks: Vec<String>,
    /// `default_checks = ["CMD", ...]`: the checks of a run given no `--check` (`init`
    /// writes the project's test command here); a `--check` replaces them.
    pub(crate) default_checks: Vec<String>,
    /// `sandbox = true | false`: `--sandbox` or `--no-sandbox` by default (unset: confined
    /// when bubblewrap is usable).
    pub(crate) sandbox: Option<bool>,
    /// `sandbox_net = true`: confined workers and checks keep the network (`--sandbox-net`).
    pub(crate) sandbox_net: bool,
    /// `sandbox_read = ["PATH", ...]`: more paths confined workers and checks may read, before
    /// each `--sandbox-read`.
    pub(crate) sandbox_read: Vec<std::path::PathBuf>,
    /// `sandbox_allow_host = ["HOST[:PORT]", ...]`: more hosts a confined coding agent's egress
    /// admits beside its model, before each `--sandbox-allow-host`.
    pub(crate) sandbox_allow_host: Vec<String>,
    /// `max_file_bytes`, `max_change_bytes`, `max_files`, `max_disk_bytes`: what a change may
    /// hold (the defaults of [`ChangeLimits`] for each key left out).
    pub(crate) limits: ChangeLimits,
    /// `attempts = N` (N attempts at each task on its own worker) or `attempts = ["SLOT",
    /// ...]` (one attempt on each slot's executor): `--attempts` by default.
    pub(crate) attempts: Option<u32>,
    /// The slots of `attempts = ["SLOT", ...]`, one per attempt (empty for a count).
    pub(crate) attempt_slots: Vec<Slot>,
}

/// How much a change may hold, checked from file sizes before anything reads a file's content
/// or computes a diff (`[work]` in `.forum/runtime.toml`; recorded on the run's work record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeLimits {
    /// The largest file a change may add or modify, in bytes.
    pub max_file_bytes: u64,
    /// The most bytes a change's added and modified files may hold together.
    pub max_change_bytes: u64,
    /// The most files a change may add, modify or delete.
    pub max_files: u64,
    /// The most disk a task's worktree may use when its worker is done (ignored files
    /// included), in bytes.
    pub max_disk_bytes: u64,
}

impl Default for ChangeLimits {
    fn default() -> ChangeLimits {
        ChangeLimits {
            max_file_bytes: 64 << 20,
            max_change_bytes: 256 << 20,
            max_files: 10_000,
            max_disk_bytes: 8 << 30,
        }
    }
}

impl ChangeLimits {
    /// The limits as the work record holds them.
    pub(crate) fn payload(&self) -> serde_json::Value {
        serde_json::json!({
            "max_file_bytes": self.max_file_bytes,
            "max_change_bytes": self.max_change_bytes,
            "max_files": self.max_files,
            "max_disk_bytes": self.max_disk_bytes,
        })
    }
}

/// The `[context]` table: whether a run in a work tree takes the repository (its map, each
/// task's relevant files) as context when the command does not say (`repo`; unset: yes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ContextConfig {
    /// `repo = true | false`: `--repo-context` or `--no-repo-context` by default.
    pub repo: Option<bool>,
}

/// The `[spend]` table: the spend ceilings of a run whose command gives none
/// (`--max-cost-usd`, `--max-tokens` replace them). `init` sets `max_cost_usd` for a paid seat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpendConfig {
    /// `max_cost_usd = X`, in picodollars (as the ceilings count), above 0.
    pub max_cost_pico: Option<u64>,
    /// `max_tokens = N`: prompt plus completion tokens, above 0.
    pub max_tokens: Option<u64>,
}

/// The `[observe]` table: how often a run and the daemon witness a heartbeat, and how long a
/// worker may stay quiet before the watchdog ends it. Both are off unless set: a heartbeat
/// entry is written on the wall clock, so a run that writes them is no longer reproducible
/// byte for byte, and a plain command worker prints its answer only at its end, so silence is
/// normal for it (its deadline, `timeout_seconds`, already bounds it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ObserveConfig {
    /// `heartbeat = "30s"`: at most one `heartbeat` entry per interval per run (and per
    /// daemon); `None`: none.
    pub heartbeat: Option<std::time::Duration>,
    /// `stall = "10m"`: a worker with no output for this long is ended; `None`: never.
    pub stall: Option<std::time::Duration>,
}

/// The `[dispatch]` table: the NATS JetStream server `--work` runs send their tasks to when
/// `--dispatch` is not given (`url`), the git remote workers share (`remote`, default
/// `origin`), how to reach the server (`credentials`, a `.creds` file; `tls`; `tls_ca`), and
/// how many copies a clustered server keeps of the ledger's streams when it creates them
/// (`replicas`, 1 to 5; `None`: 1).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DispatchConfig {
    pub url: Option<String>,
    pub remote: Option<String>,
    pub credentials: Option<std::path::PathBuf>,
    pub tls: bool,
    pub tls_ca: Option<std::path::PathBuf>,
    pub replicas: Option<usize>,
}

/// Why a runtime config was refused: one line naming the file, the table, the key, the line
/// and the column (where the text has them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigError {
    /// Display name of the file (its path, or `command line` for flags).
    pub(crate) source_name: String,
    /// Dotted table name (`runtime.tiers.cheap`); empty for the top level.
    pub(crate) table: Option<String>,
    /// The key in that table.
    pub(crate) key: Option<String>,
    /// 1-based line and column.
    pub(crate) at: Option<(usize, usize)>,
    /// What is wrong.
    pub(crate) message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source_name)?;
        if let Some((l, c)) = self.at {
            write!(f, ":{l}:{c}")?;
        }
        f.write_str(": ")?;
        match (&self.table, &self.key) {
            (Some(t), Some(k)) if t.is_empty() => write!(f, "top-level key {k}: ")?,
            (Some(t), Some(k)) => write!(f, "[{t}] {k}: ")?,
            (Some(t), None) if !t.is_empty() => write!(f, "[{t}]: ")?,
            _ => {}
        }
        f.write_str(&self.message)?;
        if let Some((l, c)) = self.at {
            write!(f, " (line {l}, column {c})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// The merged executors of one run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Runtime {
    /// The default slot, if configured (by a flag or the file).
    pub(crate) default: Option<ExecutorSpec>,
    /// Configured tiers.
    pub(crate) tiers: BTreeMap<Tier, ExecutorSpec>,
    /// The seats.
    pub(crate) seats: SeatChoices,
    /// The `[work]` table of the file.
    pub work: WorkConfig,
    /// The `[context]` table of the file.
    pub context: ContextConfig,
    /// The `[spend]` table of the file.
    pub spend: SpendConfig,
    /// The `[observe]` table of the file.
    pub observe: ObserveConfig,
    /// The `[dispatch]` table of the file.
    pub dispatch: DispatchConfig,
    /// Things to say on stderr: unusual key names, flags that lost to a stronger one.
    pub(crate) warnings: Vec<String>,
}

impl Runtime {
    /// Every variable whose value one of these executors may carry (each executor's
    /// [`ExecutorSpec::secret_env`]), sorted, once each: what the run's secret scanner looks
    /// for as literals.
    pub(crate) fn secret_env(&self) -> Vec<String> {
        let mut specs: Vec<&ExecutorSpec> = self.default.iter().collect();
        specs.extend(self.tiers.values());
        for seat in [&self.seats.worker, &self.seats.orchestrator] {
            if let SeatChoice::Inline(s) = seat {
                specs.push(s);
            }
        }
        let mut names: Vec<String> = specs.iter().flat_map(|s| s.secret_env()).collect();
        names.sort();
        names.dedup();
        names
    }
}
