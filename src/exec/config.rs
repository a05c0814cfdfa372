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
//! (chat), `timeout_seconds` and `max_response_bytes` (all).
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

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

use super::endpoint::{self, KeyEnv, Origin, Policy};
use crate::roster::{Roster, Tier};

/// Model name for a chat default slot without `model` (Forum's default).
pub const DEFAULT_CHAT_MODEL: &str = "default";
/// Model for `api = "anthropic"` without `model` (Forum's default).
pub const DEFAULT_ANTHROPIC_MODEL: &str = "claude-sonnet-4-6";
/// Key variable of the Anthropic API.
pub const ANTHROPIC_KEY_ENV: &str = "ANTHROPIC_API_KEY";
/// Endpoint of the Anthropic Messages API.
pub const ANTHROPIC_URL: &str = "https://api.anthropic.com/v1/messages";
/// The Claude Code CLI preset: the prompt is appended after these.
pub const CLAUDE_ARGV: [&str; 2] = ["claude", "-p"];
/// Default deadline of a command (Forum's subprocess timeout).
pub const DEFAULT_CMD_TIMEOUT: u64 = 60;
/// Default deadline of `claude -p`, which works in several turns.
pub const DEFAULT_CLAUDE_TIMEOUT: u64 = 300;
/// Default total deadline of an HTTP call.
pub const DEFAULT_HTTP_TIMEOUT: u64 = 120;
/// Longest deadline accepted.
pub const MAX_TIMEOUT: u64 = 24 * 3600;
/// Default cap on a response body or a command's captured output.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 8 * 1024 * 1024;
/// Bounds on `max_response_bytes`.
pub const RESPONSE_BYTES_RANGE: (u64, u64) = (1024, 1024 * 1024 * 1024);
/// The key for a `--runtime-config`-less repository config.
pub const REPO_CONFIG_PATH: &str = ".forum/runtime.toml";

/// A place an executor can be configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Slot {
    /// `[runtime.default]`, `--cmd`, `--chat-url`, `--api`, `--claude`.
    Default,
    /// `[runtime.tiers.T]`, `--T-cmd`, `--T-chat-url`.
    Tier(Tier),
}

impl Slot {
    /// Parses a slot name (`default`, `cheap`, `capable`, `frontier`).
    pub fn parse(s: &str) -> Option<Slot> {
        if s == "default" {
            Some(Slot::Default)
        } else {
            Tier::parse(s).map(Slot::Tier)
        }
    }

    /// The slot's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Slot::Default => "default",
            Slot::Tier(t) => t.as_str(),
        }
    }

    /// The table that configures it.
    pub fn table(self) -> String {
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
pub const DEFAULT_FALLBACK: [Tier; 3] = [Tier::Capable, Tier::Frontier, Tier::Cheap];

/// What an executor is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutorKind {
    /// Run a program with the prompt as its last argument, no shell.
    Command {
        /// Program and leading arguments.
        argv: Vec<String>,
        /// Set when this is the Claude Code preset (`claude = true`, `--claude`).
        claude: bool,
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
    pub fn name(&self) -> &'static str {
        match self {
            ExecutorKind::Command { claude: true, .. } => "claude",
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
    /// Where it was configured.
    pub origin: Origin,
}

impl ExecutorSpec {
    /// The endpoint policy for this executor.
    pub fn policy(&self) -> Policy {
        Policy {
            is_local: self.is_local,
            allow_private: self.allow_private,
            origin: self.origin,
        }
    }

    /// The endpoint URL, for HTTP executors.
    pub fn url(&self) -> Option<&str> {
        match &self.kind {
            ExecutorKind::Chat { url, .. } => Some(url),
            ExecutorKind::Anthropic { .. } => Some(ANTHROPIC_URL),
            ExecutorKind::Command { .. } => None,
        }
    }

    /// The variable whose value is sent as the key, if one is sent.
    pub fn key_env(&self) -> Option<&str> {
        match &self.kind {
            ExecutorKind::Chat {
                api_key_env: Some(k),
                ..
            } if !self.is_local => Some(k),
            ExecutorKind::Anthropic { api_key_env, .. } => Some(api_key_env),
            _ => None,
        }
    }

    /// The model this executor asks for (for commands: the program).
    pub fn model(&self) -> &str {
        match &self.kind {
            ExecutorKind::Chat { model, .. } | ExecutorKind::Anthropic { model, .. } => model,
            ExecutorKind::Command { argv, claude } => {
                if *claude
                    && let Some(i) = argv.iter().position(|a| a == "--model")
                    && let Some(m) = argv.get(i + 1)
                {
                    return m;
                }
                argv.first().map_or("", |s| s.as_str())
            }
        }
    }

    /// The program a command executor runs.
    pub fn program(&self) -> Option<&str> {
        match &self.kind {
            ExecutorKind::Command { argv, .. } => argv.first().map(|s| s.as_str()),
            _ => None,
        }
    }

    /// A one-line description for people (never a key value).
    pub fn describe(&self) -> String {
        match &self.kind {
            ExecutorKind::Command { argv, claude } => {
                let line = shlex::try_join(argv.iter().map(|s| s.as_str()))
                    .unwrap_or_else(|_| argv.join(" "));
                if *claude {
                    format!("claude code: {line}")
                } else {
                    format!("command: {line}")
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
pub enum SeatChoice {
    /// Not set: workers follow the lane's tier, the orchestrator uses the default.
    Unset,
    /// The executor of a slot.
    Slot(Slot),
    /// An executor of its own.
    Inline(ExecutorSpec),
}

/// The `[seats]` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seats {
    /// Runs the tasks.
    pub worker: SeatChoice,
    /// Plans, validates, synthesizes and judges.
    pub orchestrator: SeatChoice,
}

impl Default for Seats {
    fn default() -> Seats {
        Seats {
            worker: SeatChoice::Unset,
            orchestrator: SeatChoice::Unset,
        }
    }
}

/// A parsed runtime config file (before the flags).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuntimeConfig {
    /// `[runtime.default]`.
    pub default: Option<ExecutorSpec>,
    /// `[runtime.tiers.*]`.
    pub tiers: BTreeMap<Tier, ExecutorSpec>,
    /// `[seats]`.
    pub seats: Seats,
    /// Things worth saying that are not errors (unusual key variable names).
    pub warnings: Vec<String>,
}

/// Why a runtime config was refused: one line naming the file, the table, the key, the line
/// and the column (where the text has them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Display name of the file (its path, or `command line` for flags).
    pub source_name: String,
    /// Dotted table name (`runtime.tiers.cheap`); empty for the top level.
    pub table: Option<String>,
    /// The key in that table.
    pub key: Option<String>,
    /// 1-based line and column.
    pub at: Option<(usize, usize)>,
    /// What is wrong.
    pub message: String,
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

// ---- the file's shape (serde) ----

/// Unknown keys are refused (`deny_unknown_fields`) everywhere: stricter than Forum, which
/// ignores them, on purpose (see the module doc).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    runtime: Option<RawRuntime>,
    seats: Option<RawSeats>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRuntime {
    default: Option<RawExecutor>,
    tiers: Option<RawTiers>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTiers {
    cheap: Option<RawExecutor>,
    capable: Option<RawExecutor>,
    frontier: Option<RawExecutor>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSeats {
    worker: Option<Spanned<RawSeat>>,
    orchestrator: Option<Spanned<RawSeat>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExecutor {
    chat_url: Option<Spanned<String>>,
    cmd: Option<Spanned<String>>,
    api: Option<Spanned<String>>,
    claude: Option<Spanned<bool>>,
    model: Option<Spanned<String>>,
    api_key_env: Option<Spanned<String>>,
    is_local: Option<Spanned<bool>>,
    allow_private: Option<Spanned<bool>>,
    timeout_seconds: Option<Spanned<u64>>,
    max_response_bytes: Option<Spanned<u64>>,
}

#[derive(Debug)]
enum RawSeat {
    Slot(String),
    Table(Box<RawExecutor>),
}

impl<'de> Deserialize<'de> for RawSeat {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RawSeat, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawSeat;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a slot name (default, cheap, capable, frontier) or an executor table")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawSeat, E> {
                Ok(RawSeat::Slot(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<RawSeat, A::Error> {
                RawExecutor::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(|e| RawSeat::Table(Box::new(e)))
            }
        }
        d.deserialize_any(V)
    }
}

// ---- locating errors ----

/// 1-based line and column (in characters) of byte offset `at` in `text`.
pub fn line_col(text: &str, at: usize) -> (usize, usize) {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |p| p + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// The key path (`["runtime", "tiers", "cheap", "cmd"]`) whose key or value holds byte `pos`.
fn path_at(text: &str, pos: usize) -> Vec<String> {
    fn walk(t: &toml::de::DeTable<'_>, pos: usize) -> Option<Vec<String>> {
        for (k, v) in t.iter() {
            if k.span().contains(&pos) {
                return Some(vec![k.get_ref().to_string()]);
            }
            if let toml::de::DeValue::Table(inner) = v.get_ref()
                && let Some(mut p) = walk(inner, pos)
            {
                p.insert(0, k.get_ref().to_string());
                return Some(p);
            }
            if v.span().contains(&pos) {
                return Some(vec![k.get_ref().to_string()]);
            }
        }
        None
    }
    toml::de::DeTable::parse(text)
        .ok()
        .and_then(|t| walk(t.get_ref(), pos))
        .unwrap_or_default()
}

/// The span of the value at `path`, if the text has one.
fn span_of(text: &str, path: &[&str]) -> Option<Range<usize>> {
    let doc = toml::de::DeTable::parse(text).ok()?;
    let mut table = doc.get_ref();
    let mut span = None;
    for (i, part) in path.iter().enumerate() {
        let (k, v) = table.iter().find(|(k, _)| k.get_ref() == part)?;
        span = Some(k.span());
        if i + 1 < path.len() {
            match v.get_ref() {
                toml::de::DeValue::Table(t) => table = t,
                _ => return None,
            }
        }
    }
    span
}

/// Context for building errors about one file.
struct Src<'a> {
    name: &'a str,
    text: &'a str,
}

impl Src<'_> {
    fn err(
        &self,
        table: &str,
        key: Option<&str>,
        span: Option<Range<usize>>,
        msg: String,
    ) -> ConfigError {
        ConfigError {
            source_name: self.name.to_string(),
            table: Some(table.to_string()),
            key: key.map(str::to_string),
            at: span.map(|s| line_col(self.text, s.start)),
            message: msg,
        }
    }

    fn at<T>(&self, table: &str, key: &str, v: &Spanned<T>, msg: String) -> ConfigError {
        self.err(table, Some(key), Some(v.span()), msg)
    }
}

/// Parses a runtime config file. `source_name` names it in errors; `origin` says whether it is
/// the repository's own `.forum/runtime.toml` (which gets nothing beyond what it states).
pub fn parse_runtime_config(
    text: &str,
    source_name: &str,
    origin: Origin,
) -> Result<RuntimeConfig, ConfigError> {
    let src = Src {
        name: source_name,
        text,
    };
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        let msg = e.message().trim().replace('\n', "; ");
        match e.span() {
            Some(span) => {
                let mut path = path_at(text, span.start);
                let key = path.pop();
                let table = path.join(".");
                ConfigError {
                    source_name: source_name.to_string(),
                    table: key.as_ref().map(|_| table),
                    key,
                    at: Some(line_col(text, span.start)),
                    message: msg,
                }
            }
            None => ConfigError {
                source_name: source_name.to_string(),
                table: None,
                key: None,
                at: None,
                message: msg,
            },
        }
    })?;
    let mut cfg = RuntimeConfig::default();
    if let Some(rt) = raw.runtime {
        if let Some(d) = rt.default {
            cfg.default = Some(executor(
                &src,
                "runtime.default",
                Slot::Default,
                d,
                origin,
                &mut cfg.warnings,
            )?);
        }
        if let Some(tiers) = rt.tiers {
            for (tier, raw) in [
                (Tier::Cheap, tiers.cheap),
                (Tier::Capable, tiers.capable),
                (Tier::Frontier, tiers.frontier),
            ] {
                if let Some(r) = raw {
                    let slot = Slot::Tier(tier);
                    let spec = executor(&src, &slot.table(), slot, r, origin, &mut cfg.warnings)?;
                    cfg.tiers.insert(tier, spec);
                }
            }
        }
    }
    if let Some(seats) = raw.seats {
        for (name, raw) in [
            ("worker", seats.worker),
            ("orchestrator", seats.orchestrator),
        ] {
            let Some(raw) = raw else { continue };
            let span = raw.span();
            let choice = match raw.into_inner() {
                RawSeat::Slot(s) => match Slot::parse(&s) {
                    Some(slot) => SeatChoice::Slot(slot),
                    None => {
                        return Err(src.err(
                            "seats",
                            Some(name),
                            Some(span),
                            format!(
                                "unknown executor {s:?}: name a slot (default, cheap, capable, frontier) or give an executor table"
                            ),
                        ));
                    }
                },
                RawSeat::Table(t) => SeatChoice::Inline(executor(
                    &src,
                    &format!("seats.{name}"),
                    Slot::Default,
                    *t,
                    origin,
                    &mut cfg.warnings,
                )?),
            };
            match name {
                "worker" => cfg.seats.worker = choice,
                _ => cfg.seats.orchestrator = choice,
            }
        }
    }
    Ok(cfg)
}

fn table_span(src: &Src<'_>, table: &str) -> Option<Range<usize>> {
    let parts: Vec<&str> = table.split('.').collect();
    span_of(src.text, &parts)
}

/// Validates one executor table.
fn executor(
    src: &Src<'_>,
    table: &str,
    slot: Slot,
    r: RawExecutor,
    origin: Origin,
    warnings: &mut Vec<String>,
) -> Result<ExecutorSpec, ConfigError> {
    let mut kinds: Vec<(&str, Range<usize>)> = Vec::new();
    if let Some(v) = &r.chat_url {
        kinds.push(("chat_url", v.span()));
    }
    if let Some(v) = &r.cmd {
        kinds.push(("cmd", v.span()));
    }
    if let Some(v) = &r.api {
        kinds.push(("api", v.span()));
    }
    if let Some(v) = r.claude.as_ref().filter(|v| *v.get_ref()) {
        kinds.push(("claude", v.span()));
    }
    if kinds.len() > 1 {
        let (second, span) = kinds[1].clone();
        return Err(src.err(
            table,
            Some(second),
            Some(span),
            format!(
                "one executor per table: {} and {second} are both set (Forum would let chat_url win; git forum refuses the ambiguity)",
                kinds[0].0
            ),
        ));
    }
    let Some((kind_key, _)) = kinds.first().cloned() else {
        return Err(src.err(
            table,
            None,
            table_span(src, table),
            "names no executor: set one of chat_url, cmd, api = \"anthropic\" or claude = true"
                .into(),
        ));
    };
    // Keys that only some kinds take.
    let only = |key: &str, present: bool, allowed: &[&str]| -> Result<(), ConfigError> {
        if present && !allowed.contains(&kind_key) {
            Err(src.err(
                table,
                Some(key),
                None,
                format!(
                    "{key} does not apply to a {kind_key} executor (it applies to {})",
                    allowed.join(", ")
                ),
            ))
        } else {
            Ok(())
        }
    };
    let with_span = |key: &str, span: Option<Range<usize>>, e: Result<(), ConfigError>| {
        e.map_err(|mut e| {
            e.at = span.map(|s| line_col(src.text, s.start));
            e.key = Some(key.to_string());
            e
        })
    };
    with_span(
        "model",
        r.model.as_ref().map(|v| v.span()),
        only("model", r.model.is_some(), &["chat_url", "api", "claude"]),
    )?;
    with_span(
        "api_key_env",
        r.api_key_env.as_ref().map(|v| v.span()),
        only("api_key_env", r.api_key_env.is_some(), &["chat_url", "api"]),
    )?;
    with_span(
        "is_local",
        r.is_local.as_ref().map(|v| v.span()),
        only("is_local", r.is_local.is_some(), &["chat_url"]),
    )?;
    with_span(
        "allow_private",
        r.allow_private.as_ref().map(|v| v.span()),
        only("allow_private", r.allow_private.is_some(), &["chat_url"]),
    )?;

    let is_local = r.is_local.as_ref().is_some_and(|v| *v.get_ref());
    let allow_private = r.allow_private.as_ref().is_some_and(|v| *v.get_ref());
    if is_local && let Some(k) = &r.api_key_env {
        return Err(src.at(
            table,
            "api_key_env",
            k,
            "is_local = true sends no key; remove api_key_env or is_local".into(),
        ));
    }
    let model = |default: &str| -> Result<String, ConfigError> {
        match &r.model {
            Some(m) if m.get_ref().trim().is_empty() => {
                Err(src.at(table, "model", m, "must not be empty".into()))
            }
            Some(m) => Ok(m.get_ref().clone()),
            None => Ok(default.to_string()),
        }
    };
    let key_env = |warnings: &mut Vec<String>| -> Result<Option<String>, ConfigError> {
        match &r.api_key_env {
            None => Ok(None),
            Some(k) => match endpoint::check_key_env(k.get_ref()) {
                Ok(KeyEnv::Known) => Ok(Some(k.get_ref().clone())),
                Ok(KeyEnv::Unusual(w)) => {
                    warnings.push(format!("{}: [{table}] {w}", src.name));
                    Ok(Some(k.get_ref().clone()))
                }
                Err(m) => Err(src.at(table, "api_key_env", k, m)),
            },
        }
    };
    let (kind, default_timeout) = match kind_key {
        "chat_url" => {
            let u = r.chat_url.as_ref().expect("present");
            if u.get_ref().trim().is_empty() {
                return Err(src.at(table, "chat_url", u, "must not be empty".into()));
            }
            let default_model = match slot {
                Slot::Default => DEFAULT_CHAT_MODEL,
                Slot::Tier(t) => t.as_str(),
            };
            (
                ExecutorKind::Chat {
                    url: u.get_ref().clone(),
                    model: model(default_model)?,
                    api_key_env: key_env(warnings)?,
                },
                DEFAULT_HTTP_TIMEOUT,
            )
        }
        "cmd" => {
            let c = r.cmd.as_ref().expect("present");
            let argv = split_cmd(c.get_ref()).map_err(|m| src.at(table, "cmd", c, m))?;
            (
                ExecutorKind::Command {
                    argv,
                    claude: false,
                },
                DEFAULT_CMD_TIMEOUT,
            )
        }
        "api" => {
            let a = r.api.as_ref().expect("present");
            if a.get_ref() != "anthropic" {
                return Err(src.at(
                    table,
                    "api",
                    a,
                    format!("unknown api kind {:?}: the only one is \"anthropic\" (use chat_url for OpenAI-compatible endpoints)", a.get_ref()),
                ));
            }
            (
                ExecutorKind::Anthropic {
                    model: model(DEFAULT_ANTHROPIC_MODEL)?,
                    api_key_env: key_env(warnings)?.unwrap_or_else(|| ANTHROPIC_KEY_ENV.into()),
                },
                DEFAULT_HTTP_TIMEOUT,
            )
        }
        _ => (
            ExecutorKind::Command {
                argv: claude_argv(r.model.as_ref().map(|m| m.get_ref().as_str())),
                claude: true,
            },
            DEFAULT_CLAUDE_TIMEOUT,
        ),
    };
    let timeout_seconds = match &r.timeout_seconds {
        Some(t) if *t.get_ref() == 0 || *t.get_ref() > MAX_TIMEOUT => {
            return Err(src.at(
                table,
                "timeout_seconds",
                t,
                format!("must be between 1 and {MAX_TIMEOUT}, not {}", t.get_ref()),
            ));
        }
        Some(t) => *t.get_ref(),
        None => default_timeout,
    };
    let (lo, hi) = RESPONSE_BYTES_RANGE;
    let max_response_bytes = match &r.max_response_bytes {
        Some(b) if *b.get_ref() < lo || *b.get_ref() > hi => {
            return Err(src.at(
                table,
                "max_response_bytes",
                b,
                format!("must be between {lo} and {hi}, not {}", b.get_ref()),
            ));
        }
        Some(b) => *b.get_ref(),
        None => DEFAULT_MAX_RESPONSE_BYTES,
    };
    Ok(ExecutorSpec {
        kind,
        is_local,
        allow_private,
        timeout_seconds,
        max_response_bytes,
        origin,
    })
}

/// The Claude Code CLI preset's argument list (the prompt is appended at call time).
pub fn claude_argv(model: Option<&str>) -> Vec<String> {
    let mut v: Vec<String> = CLAUDE_ARGV.iter().map(|s| s.to_string()).collect();
    if let Some(m) = model {
        v.push("--model".into());
        v.push(m.to_string());
    }
    v
}

/// Splits a command line with POSIX shell rules (quotes and backslashes; no expansion, no
/// pipes: nothing runs through a shell).
pub fn split_cmd(line: &str) -> Result<Vec<String>, String> {
    match shlex::split(line) {
        None => Err(format!(
            "cannot split {line:?} with shell rules (an unclosed quote or a trailing backslash)"
        )),
        Some(v) if v.is_empty() => Err("the command is empty".into()),
        Some(v) if v[0].is_empty() => Err("the program name is empty".into()),
        Some(v) => Ok(v),
    }
}

// ---- the flags ----

/// Per-tier executor flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TierFlags {
    /// `--T-cmd`.
    pub cmd: Option<String>,
    /// `--T-chat-url`.
    pub chat_url: Option<String>,
    /// `--T-model`.
    pub model: Option<String>,
    /// `--T-api-key-env`.
    pub api_key_env: Option<String>,
}

/// The executor flags of one run, as typed (the CLI fills this from `ExecutorArgs`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flags {
    /// `--cmd`.
    pub cmd: Option<String>,
    /// `--chat-url`.
    pub chat_url: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--api-key-env`.
    pub api_key_env: Option<String>,
    /// `--api[=KIND]`.
    pub api: Option<String>,
    /// `--claude`.
    pub claude: bool,
    /// `--cheap-*`, `--capable-*`, `--frontier-*`.
    pub tiers: BTreeMap<Tier, TierFlags>,
    /// `--allow-private`.
    pub allow_private: bool,
}

/// The merged executors of one run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Runtime {
    /// The default slot, if configured (by a flag or the file).
    pub default: Option<ExecutorSpec>,
    /// Configured tiers.
    pub tiers: BTreeMap<Tier, ExecutorSpec>,
    /// The seats.
    pub seats: Seats,
    /// Things to say on stderr: unusual key names, flags that lost to a stronger one.
    pub warnings: Vec<String>,
}

fn flag_err(message: String) -> ConfigError {
    ConfigError {
        source_name: "command line".into(),
        table: None,
        key: None,
        at: None,
        message,
    }
}

fn cli_spec(kind: ExecutorKind, timeout: u64, allow_private: bool) -> ExecutorSpec {
    ExecutorSpec {
        kind,
        is_local: false,
        allow_private,
        timeout_seconds: timeout,
        max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        origin: Origin::CommandLine,
    }
}

fn flag_key_env(flag: &str, name: &str, warnings: &mut Vec<String>) -> Result<String, ConfigError> {
    match endpoint::check_key_env(name) {
        Ok(KeyEnv::Known) => Ok(name.to_string()),
        Ok(KeyEnv::Unusual(w)) => {
            warnings.push(format!("{flag}: {w}"));
            Ok(name.to_string())
        }
        Err(m) => Err(flag_err(format!("{flag}: {m}"))),
    }
}

fn flag_cmd(flag: &str, line: &str) -> Result<Vec<String>, ConfigError> {
    split_cmd(line).map_err(|m| flag_err(format!("{flag}: {m}")))
}

/// Merges the flags over the file with Forum's precedence: the default slot is `--chat-url`,
/// else `--api`, else `--cmd` / `--claude`, else the file's default; each tier is its chat URL
/// flag, else its cmd flag, else the file's tier. Endpoints typed as flags are marked
/// [`Origin::CommandLine`]; `--allow-private` applies to every chat endpoint of the run.
pub fn merge(config: Option<RuntimeConfig>, flags: &Flags) -> Result<Runtime, ConfigError> {
    let config = config.unwrap_or_default();
    let mut warnings = config.warnings;
    let ap = flags.allow_private;

    // The default slot.
    if flags.model.is_some() && flags.chat_url.is_none() && flags.api.is_none() && !flags.claude {
        return Err(flag_err(
            "--model needs --chat-url, --api or --claude".into(),
        ));
    }
    if flags.api_key_env.is_some() && flags.chat_url.is_none() && flags.api.is_none() {
        return Err(flag_err("--api-key-env needs --chat-url or --api".into()));
    }
    let cli_default = if let Some(u) = &flags.chat_url {
        for (set, name) in [
            (flags.api.is_some(), "--api"),
            (flags.cmd.is_some(), "--cmd"),
            (flags.claude, "--claude"),
        ] {
            if set {
                warnings.push(format!("{name} is ignored: --chat-url takes precedence"));
            }
        }
        if u.trim().is_empty() {
            return Err(flag_err("--chat-url is empty".into()));
        }
        let api_key_env = match &flags.api_key_env {
            Some(k) => Some(flag_key_env("--api-key-env", k, &mut warnings)?),
            None => None,
        };
        Some(cli_spec(
            ExecutorKind::Chat {
                url: u.clone(),
                model: flags
                    .model
                    .clone()
                    .unwrap_or_else(|| DEFAULT_CHAT_MODEL.into()),
                api_key_env,
            },
            DEFAULT_HTTP_TIMEOUT,
            ap,
        ))
    } else if let Some(kind) = &flags.api {
        for (set, name) in [(flags.cmd.is_some(), "--cmd"), (flags.claude, "--claude")] {
            if set {
                warnings.push(format!("{name} is ignored: --api takes precedence"));
            }
        }
        if kind != "anthropic" {
            return Err(flag_err(format!(
                "--api={kind}: unknown api kind; the only one is anthropic (use --chat-url for OpenAI-compatible endpoints)"
            )));
        }
        let api_key_env = match &flags.api_key_env {
            Some(k) => flag_key_env("--api-key-env", k, &mut warnings)?,
            None => ANTHROPIC_KEY_ENV.into(),
        };
        Some(cli_spec(
            ExecutorKind::Anthropic {
                model: flags
                    .model
                    .clone()
                    .unwrap_or_else(|| DEFAULT_ANTHROPIC_MODEL.into()),
                api_key_env,
            },
            DEFAULT_HTTP_TIMEOUT,
            ap,
        ))
    } else if let Some(c) = &flags.cmd {
        if flags.claude {
            return Err(flag_err(
                "--cmd and --claude both name the default executor; keep one".into(),
            ));
        }
        Some(cli_spec(
            ExecutorKind::Command {
                argv: flag_cmd("--cmd", c)?,
                claude: false,
            },
            DEFAULT_CMD_TIMEOUT,
            ap,
        ))
    } else if flags.claude {
        Some(cli_spec(
            ExecutorKind::Command {
                argv: claude_argv(flags.model.as_deref()),
                claude: true,
            },
            DEFAULT_CLAUDE_TIMEOUT,
            ap,
        ))
    } else {
        None
    };
    let mut default = cli_default.or(config.default);

    // The tiers.
    let mut tiers = config.tiers;
    for (tier, tf) in &flags.tiers {
        if (tf.model.is_some() || tf.api_key_env.is_some()) && tf.chat_url.is_none() {
            return Err(flag_err(format!(
                "--{tier}-model and --{tier}-api-key-env need --{tier}-chat-url"
            )));
        }
        if let Some(u) = &tf.chat_url {
            if tf.cmd.is_some() {
                warnings.push(format!(
                    "--{tier}-cmd is ignored: --{tier}-chat-url takes precedence"
                ));
            }
            if u.trim().is_empty() {
                return Err(flag_err(format!("--{tier}-chat-url is empty")));
            }
            let api_key_env = match &tf.api_key_env {
                Some(k) => Some(flag_key_env(
                    &format!("--{tier}-api-key-env"),
                    k,
                    &mut warnings,
                )?),
                None => None,
            };
            tiers.insert(
                *tier,
                cli_spec(
                    ExecutorKind::Chat {
                        url: u.clone(),
                        model: tf.model.clone().unwrap_or_else(|| tier.as_str().into()),
                        api_key_env,
                    },
                    DEFAULT_HTTP_TIMEOUT,
                    ap,
                ),
            );
        } else if let Some(c) = &tf.cmd {
            tiers.insert(
                *tier,
                cli_spec(
                    ExecutorKind::Command {
                        argv: flag_cmd(&format!("--{tier}-cmd"), c)?,
                        claude: false,
                    },
                    DEFAULT_CMD_TIMEOUT,
                    ap,
                ),
            );
        }
    }

    let mut seats = config.seats;
    if ap {
        let open = |s: &mut ExecutorSpec| {
            if matches!(s.kind, ExecutorKind::Chat { .. }) {
                s.allow_private = true;
            }
        };
        default.iter_mut().for_each(open);
        tiers.values_mut().for_each(open);
        for seat in [&mut seats.worker, &mut seats.orchestrator] {
            if let SeatChoice::Inline(s) = seat {
                open(s);
            }
        }
    }
    Ok(Runtime {
        default,
        tiers,
        seats,
        warnings,
    })
}

// ---- resolution ----

/// Which configured executor a role ends up on, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// The slot itself is configured.
    Slot(Slot),
    /// A tier with no executor of its own falls back to the default slot.
    TierFallsBackToDefault(Tier),
    /// No default: the first configured tier among capable, frontier, cheap stands in.
    DefaultFromTier(Tier),
    /// A tier without an executor, and no default, falls back to the tier standing in for the
    /// default.
    TierFallsBackToTier(Tier, Tier),
    /// A seat's own executor table.
    Seat(&'static str),
}

impl Via {
    /// The slot whose executor is used (`None` for an inline seat).
    pub fn slot(&self) -> Option<Slot> {
        match self {
            Via::Slot(s) => Some(*s),
            Via::TierFallsBackToDefault(_) => Some(Slot::Default),
            Via::DefaultFromTier(t) | Via::TierFallsBackToTier(_, t) => Some(Slot::Tier(*t)),
            Via::Seat(_) => None,
        }
    }

    /// A short explanation.
    pub fn explain(&self) -> String {
        match self {
            Via::Slot(s) => format!("{s}"),
            Via::TierFallsBackToDefault(t) => format!("{t} has no executor: falls back to default"),
            Via::DefaultFromTier(t) => {
                format!("no default: {t} stands in (first configured of capable, frontier, cheap)")
            }
            Via::TierFallsBackToTier(t, d) => format!(
                "{t} has no executor and there is no default: falls back to {d} (first configured of capable, frontier, cheap)"
            ),
            Via::Seat(name) => format!("the {name} seat's own executor"),
        }
    }
}

/// Why a role has no executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unresolved {
    /// Nothing is configured at all.
    NothingConfigured,
    /// A seat names a slot that has no executor.
    SeatNamesEmptySlot(&'static str, Slot),
}

impl fmt::Display for Unresolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unresolved::NothingConfigured => f.write_str(
                "no executor is configured: pass --cmd, --chat-url, --api or --claude, or write .forum/runtime.toml",
            ),
            Unresolved::SeatNamesEmptySlot(seat, slot) => write!(
                f,
                "the {seat} seat names {slot}, which has no executor: configure [{}] or name another slot",
                slot.table()
            ),
        }
    }
}

impl Runtime {
    /// Whether any executor is configured.
    pub fn is_empty(&self) -> bool {
        self.default.is_none()
            && self.tiers.is_empty()
            && !matches!(self.seats.worker, SeatChoice::Inline(_))
            && !matches!(self.seats.orchestrator, SeatChoice::Inline(_))
    }

    /// The executor standing in for the default slot: the default, else the first configured
    /// tier among capable, frontier, cheap (what Forum's submit does).
    pub fn effective_default(&self) -> Option<(Via, &ExecutorSpec)> {
        if let Some(d) = &self.default {
            return Some((Via::Slot(Slot::Default), d));
        }
        DEFAULT_FALLBACK
            .iter()
            .find_map(|t| self.tiers.get(t).map(|s| (Via::DefaultFromTier(*t), s)))
    }

    /// The executor for a roster tier: the tier's, else the effective default.
    pub fn for_tier(&self, tier: Tier) -> Option<(Via, &ExecutorSpec)> {
        if let Some(s) = self.tiers.get(&tier) {
            return Some((Via::Slot(Slot::Tier(tier)), s));
        }
        match self.effective_default()? {
            (Via::Slot(_), s) => Some((Via::TierFallsBackToDefault(tier), s)),
            (Via::DefaultFromTier(d), s) => Some((Via::TierFallsBackToTier(tier, d), s)),
            (v, s) => Some((v, s)),
        }
    }

    fn slot(&self, slot: Slot) -> Option<(Via, &ExecutorSpec)> {
        match slot {
            Slot::Default => self.effective_default(),
            Slot::Tier(t) => self.tiers.get(&t).map(|s| (Via::Slot(slot), s)),
        }
    }

    fn seat(
        &self,
        name: &'static str,
        choice: &'_ SeatChoice,
    ) -> Option<Result<(Via, ExecutorSpec), Unresolved>> {
        match choice {
            SeatChoice::Unset => None,
            SeatChoice::Inline(s) => Some(Ok((Via::Seat(name), s.clone()))),
            SeatChoice::Slot(slot) => Some(
                self.slot(*slot)
                    .map(|(v, s)| (v, s.clone()))
                    .ok_or(Unresolved::SeatNamesEmptySlot(name, *slot)),
            ),
        }
    }

    /// The executor of the control roles: the orchestrator seat, else the effective default.
    pub fn for_control(&self) -> Result<(Via, ExecutorSpec), Unresolved> {
        if let Some(r) = self.seat("orchestrator", &self.seats.orchestrator) {
            return r;
        }
        self.effective_default()
            .map(|(v, s)| (v, s.clone()))
            .ok_or(Unresolved::NothingConfigured)
    }

    /// The executor of a task routed to `agent`: the worker seat if it is set; else the tier
    /// executor of the agent's `model_tier`; else (an unknown agent) the effective default.
    pub fn for_task(
        &self,
        roster: &Roster,
        agent: &str,
    ) -> Result<(Via, ExecutorSpec), Unresolved> {
        if let Some(r) = self.seat("worker", &self.seats.worker) {
            return r;
        }
        let found = match roster.get(agent) {
            Some(a) => self.for_tier(a.model_tier),
            None => self.effective_default(),
        };
        found
            .map(|(v, s)| (v, s.clone()))
            .ok_or(Unresolved::NothingConfigured)
    }

    /// Every distinct executor a run may call, with the places it serves, in a stable order.
    pub fn in_use(&self) -> Vec<(String, ExecutorSpec)> {
        let mut out: Vec<(String, ExecutorSpec)> = Vec::new();
        if let Some(d) = &self.default {
            out.push(("default".into(), d.clone()));
        }
        for (t, s) in &self.tiers {
            out.push((t.as_str().into(), s.clone()));
        }
        for (name, c) in [
            ("worker seat", &self.seats.worker),
            ("orchestrator seat", &self.seats.orchestrator),
        ] {
            if let SeatChoice::Inline(s) = c {
                out.push((name.into(), s.clone()));
            }
        }
        out
    }
}

// ---- checks that need facts from outside ----

/// What the caller knows about the machine. The CLI answers from the real environment and
/// `PATH`; tests answer from tables. Keeps this module free of I/O.
pub trait Facts {
    /// Whether the environment variable `name` is set (and not empty).
    fn var_is_set(&self, name: &str) -> bool;
    /// Whether `program` can be run (on `PATH`, or a path to an executable file).
    fn program_found(&self, program: &str) -> bool;
    /// Why every address the name `host` resolves to is refused under `policy` (the check a
    /// run makes when it connects), or `None` when one is admitted or the name cannot be
    /// resolved now. The default resolves nothing.
    fn refuses_host(&self, _host: &str, _policy: &Policy) -> Option<String> {
        None
    }
}

/// The endpoint check a run makes, without connecting: the URL against its policy, then a
/// name's addresses as the connection-time resolver would vet them (through `facts`).
pub fn check_endpoint(url: &str, policy: &Policy, facts: &dyn Facts) -> Result<(), String> {
    let checked = endpoint::check_url(url, policy).map_err(|r| r.to_string())?;
    if let endpoint::CheckedHost::Name { name, .. } = &checked.host
        && let Some(why) = facts.refuses_host(name, policy)
    {
        return Err(format!("{}: {why}", checked.display));
    }
    Ok(())
}

/// One reason a run would not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// Where: `default`, `cheap`, `worker seat`, `control roles`...
    pub place: String,
    /// What is wrong and how to fix it (one line; never a key value).
    pub problem: String,
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.place, self.problem)
    }
}

/// Checks one executor: its endpoint against its policy, its key variable, its program.
pub fn check_executor(spec: &ExecutorSpec, facts: &dyn Facts) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(u) = spec.url()
        && let Err(r) = check_endpoint(u, &spec.policy(), facts)
    {
        out.push(format!("endpoint refused: {r}"));
    }
    if let Some(k) = spec.key_env()
        && !facts.var_is_set(k)
    {
        out.push(format!(
                "the key variable {k} is not set: export {k}=<your key> in the shell that runs git forum (only its name is stored)"
            ));
    }
    if let Some(p) = spec.program()
        && !facts.program_found(p)
    {
        out.push(if p.contains('/') {
            format!("program {p} does not exist or is not executable")
        } else {
            format!("program {p} is not on PATH")
        });
    }
    out
}

/// Every issue that would stop a run with this runtime and roster; empty means ready. Every
/// configured executor is checked (a run refuses a broken config before calling any model),
/// and each role is resolved the way the run resolves it, capable → frontier → cheap
/// fallback included.
pub fn issues(rt: &Runtime, roster: &Roster, facts: &dyn Facts) -> Vec<Issue> {
    let mut out = Vec::new();
    if rt.is_empty() {
        out.push(Issue {
            place: "control roles".into(),
            problem: "no default executor for the control roles (planner, validator, synthesizer); "
                .to_string() + &Unresolved::NothingConfigured.to_string(),
        });
        let mut demanded: Vec<Tier> = roster.agents().iter().map(|a| a.model_tier).collect();
        demanded.sort();
        demanded.dedup();
        for t in demanded {
            out.push(Issue {
                place: t.as_str().into(),
                problem: format!("no executor for roster tier {t}, and no default to fall back to"),
            });
        }
        return out;
    }
    if let Err(u) = rt.for_control() {
        out.push(Issue {
            place: "control roles".into(),
            problem: u.to_string(),
        });
    }
    if let Some(Err(u)) = rt.seat("worker", &rt.seats.worker) {
        out.push(Issue {
            place: "worker seat".into(),
            problem: u.to_string(),
        });
    }
    for (place, spec) in rt.in_use() {
        for problem in check_executor(&spec, facts) {
            out.push(Issue {
                place: place.clone(),
                problem,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roster::Roster;

    struct Env {
        vars: Vec<&'static str>,
        programs: Vec<&'static str>,
    }
    impl Facts for Env {
        fn var_is_set(&self, name: &str) -> bool {
            self.vars.contains(&name)
        }
        fn program_found(&self, program: &str) -> bool {
            self.programs.contains(&program)
        }
    }
    fn env() -> Env {
        Env {
            vars: vec!["OPENAI_API_KEY"],
            programs: vec!["ollama", "claude"],
        }
    }

    fn parse(text: &str) -> Result<RuntimeConfig, ConfigError> {
        parse_runtime_config(text, ".forum/runtime.toml", Origin::RepoConfig)
    }
    fn err(text: &str) -> String {
        parse(text).expect_err(text).to_string()
    }

    const FULL: &str = r#"
[runtime.default]
chat_url = "http://127.0.0.1:8080/v1/chat/completions"
model = "qwen"
is_local = true

[runtime.tiers.cheap]
cmd = "ollama run 'llama3 8b'"
timeout_seconds = 30

[runtime.tiers.capable]
chat_url = "https://api.openai.com/v1/chat/completions"
api_key_env = "OPENAI_API_KEY"

[runtime.tiers.frontier]
api = "anthropic"

[seats]
worker = "capable"
orchestrator = { claude = true, model = "opus" }
"#;

    #[test]
    fn parses_every_kind_and_the_seats() {
        let c = parse(FULL).unwrap();
        let d = c.default.as_ref().unwrap();
        assert!(d.is_local && d.key_env().is_none() && d.origin == Origin::RepoConfig);
        assert_eq!(d.model(), "qwen");
        let cheap = &c.tiers[&Tier::Cheap];
        assert_eq!(
            cheap.kind,
            ExecutorKind::Command {
                argv: vec!["ollama".into(), "run".into(), "llama3 8b".into()],
                claude: false
            }
        );
        assert_eq!(cheap.timeout_seconds, 30);
        assert_eq!(c.tiers[&Tier::Capable].model(), "capable");
        assert_eq!(c.tiers[&Tier::Capable].key_env(), Some("OPENAI_API_KEY"));
        let f = &c.tiers[&Tier::Frontier];
        assert_eq!(f.model(), DEFAULT_ANTHROPIC_MODEL);
        assert_eq!(f.key_env(), Some(ANTHROPIC_KEY_ENV));
        assert_eq!(c.seats.worker, SeatChoice::Slot(Slot::Tier(Tier::Capable)));
        let SeatChoice::Inline(o) = &c.seats.orchestrator else {
            panic!()
        };
        assert_eq!(o.program(), Some("claude"));
        assert_eq!(o.model(), "opus");
        assert_eq!(o.timeout_seconds, DEFAULT_CLAUDE_TIMEOUT);
        assert!(c.warnings.is_empty());
        // Forum's shape loads: default chat with the default model.
        let f = parse("[runtime.default]\nchat_url = \"https://x.example/v1\"\n").unwrap();
        assert_eq!(f.default.unwrap().model(), "default");
        assert_eq!(parse("").unwrap(), RuntimeConfig::default());
    }

    #[test]
    fn errors_name_file_table_key_line_and_column() {
        let e = err("[runtime.tiers.cheap]\nchat_ur = \"x\"\n");
        assert!(
            e.starts_with(".forum/runtime.toml:2:1: [runtime.tiers.cheap] chat_ur: unknown field"),
            "{e}"
        );
        assert!(e.contains("line 2, column 1"), "{e}");
        let e = err("[runtime.default]\ncmd = 5\n");
        assert!(
            e.starts_with(".forum/runtime.toml:2:7: [runtime.default] cmd: invalid type: integer"),
            "{e}"
        );
        let e = err("[runtime.tiers.medium]\ncmd = \"x\"\n");
        assert!(
            e.contains("[runtime.tiers] medium: unknown field `medium`"),
            "{e}"
        );
        let e = err("[runtime]\ndefualt = {}\n");
        assert!(e.contains("[runtime] defualt: unknown field"), "{e}");
        let e = err("[runtim.default]\n");
        assert!(e.contains("top-level key runtim: unknown field"), "{e}");
        let e = err("[seats]\nworker = { cmd = \"x\", modle = \"y\" }\n");
        assert!(
            e.contains("[seats.worker] modle: unknown field") && e.contains(":2:"),
            "{e}"
        );
        let e = err("[seats]\nworker = 3\n");
        assert!(e.contains("[seats] worker: invalid type"), "{e}");
        let e = err("[runtime.default]\nis_local = \"yes\"\n");
        assert!(
            e.contains("[runtime.default] is_local: invalid type: string"),
            "{e}"
        );
        let e = err("[runtime.default\n");
        assert!(e.contains(":1:"), "{e}");
    }

    #[test]
    fn semantic_errors_are_located_too() {
        for (text, want) in [
            (
                "[runtime.default]\nchat_url = \"http://a/\"\ncmd = \"x\"\n",
                ":3:7: [runtime.default] cmd: one executor per table",
            ),
            (
                "[runtime.default]\nmodel = \"m\"\n",
                ":1:10: [runtime.default]: names no executor",
            ),
            (
                "[runtime.default]\napi = \"openai\"\n",
                ":2:7: [runtime.default] api: unknown api kind \"openai\"",
            ),
            (
                "[seats]\nworker = \"medium\"\n",
                ":2:10: [seats] worker: unknown executor \"medium\"",
            ),
            (
                "[runtime.default]\ncmd = \"'unclosed\"\n",
                "[runtime.default] cmd: cannot split",
            ),
            (
                "[runtime.default]\ncmd = \"   \"\n",
                "[runtime.default] cmd: the command is empty",
            ),
            (
                "[runtime.default]\ncmd = \"x\"\nmodel = \"m\"\n",
                ":3:9: [runtime.default] model: model does not apply to a cmd executor",
            ),
            (
                "[runtime.default]\ncmd = \"x\"\nis_local = true\n",
                "is_local does not apply",
            ),
            (
                "[runtime.default]\napi = \"anthropic\"\nallow_private = true\n",
                "allow_private does not apply",
            ),
            (
                "[runtime.default]\nchat_url = \"http://127.0.0.1/\"\nis_local = true\napi_key_env = \"OPENAI_API_KEY\"\n",
                ":4:15: [runtime.default] api_key_env: is_local = true sends no key",
            ),
            (
                "[runtime.default]\nchat_url = \"https://a/\"\napi_key_env = \"GITHUB_TOKEN\"\n",
                "api_key_env GITHUB_TOKEN is refused",
            ),
            (
                "[runtime.default]\nchat_url = \"https://a/\"\napi_key_env = \"MY-KEY\"\n",
                "not an environment variable name",
            ),
            (
                "[runtime.default]\ncmd = \"x\"\ntimeout_seconds = 0\n",
                "timeout_seconds: must be between 1",
            ),
            (
                "[runtime.default]\ncmd = \"x\"\nmax_response_bytes = 10\n",
                "max_response_bytes: must be between",
            ),
            (
                "[runtime.default]\nchat_url = \"\"\n",
                "chat_url: must not be empty",
            ),
        ] {
            let e = err(text);
            assert!(e.contains(want), "{text:?}\n got {e}\nwant {want}");
        }
        let c = parse("[runtime.default]\nchat_url = \"https://a/\"\napi_key_env = \"LLM_KEY\"\n")
            .unwrap();
        assert_eq!(c.warnings.len(), 1);
        assert!(c.warnings[0].contains("LLM_KEY is not a known provider"));
    }

    fn tier_flags(tier: Tier, tf: TierFlags) -> Flags {
        Flags {
            tiers: BTreeMap::from([(tier, tf)]),
            ..Flags::default()
        }
    }

    #[test]
    fn flags_follow_forums_precedence() {
        let cfg = || Some(parse(FULL).unwrap());
        // --chat-url > --api > --cmd > config default.
        let f = Flags {
            chat_url: Some("http://127.0.0.1:9/v1".into()),
            api: Some("anthropic".into()),
            cmd: Some("ollama run x".into()),
            ..Flags::default()
        };
        let rt = merge(cfg(), &f).unwrap();
        let d = rt.default.as_ref().unwrap();
        assert_eq!(d.origin, Origin::CommandLine);
        assert_eq!(d.model(), "default");
        assert_eq!(rt.warnings.len(), 2);
        let f = Flags {
            api: Some("anthropic".into()),
            cmd: Some("ollama run x".into()),
            model: Some("claude-opus-4".into()),
            ..Flags::default()
        };
        let d = merge(cfg(), &f).unwrap().default.unwrap();
        assert_eq!(d.kind.name(), "anthropic");
        assert_eq!(d.model(), "claude-opus-4");
        let f = Flags {
            cmd: Some("ollama run x".into()),
            ..Flags::default()
        };
        assert_eq!(
            merge(cfg(), &f).unwrap().default.unwrap().program(),
            Some("ollama")
        );
        let f = Flags {
            claude: true,
            ..Flags::default()
        };
        assert_eq!(
            merge(cfg(), &f).unwrap().default.unwrap().kind.name(),
            "claude"
        );
        // No flag: the file's default, still marked as the repository's.
        let rt = merge(cfg(), &Flags::default()).unwrap();
        assert_eq!(rt.default.unwrap().origin, Origin::RepoConfig);
        // Tier flags replace config tiers one by one; a chat URL beats a cmd; model defaults
        // to the tier name.
        let f = tier_flags(
            Tier::Cheap,
            TierFlags {
                cmd: Some("other".into()),
                chat_url: Some("https://x.example/v1".into()),
                ..TierFlags::default()
            },
        );
        let rt = merge(cfg(), &f).unwrap();
        assert_eq!(rt.tiers[&Tier::Cheap].model(), "cheap");
        assert_eq!(rt.tiers[&Tier::Cheap].origin, Origin::CommandLine);
        assert_eq!(rt.tiers[&Tier::Capable].origin, Origin::RepoConfig);
        assert_eq!(
            rt.warnings,
            vec!["--cheap-cmd is ignored: --cheap-chat-url takes precedence"]
        );
    }

    #[test]
    fn bad_flags_are_refused() {
        for (f, want) in [
            (
                Flags {
                    api: Some("openai".into()),
                    ..Flags::default()
                },
                "unknown api kind",
            ),
            (
                Flags {
                    model: Some("m".into()),
                    cmd: Some("x".into()),
                    ..Flags::default()
                },
                "--model needs",
            ),
            (
                Flags {
                    api_key_env: Some("OPENAI_API_KEY".into()),
                    ..Flags::default()
                },
                "--api-key-env needs",
            ),
            (
                Flags {
                    cmd: Some("'x".into()),
                    ..Flags::default()
                },
                "--cmd: cannot split",
            ),
            (
                Flags {
                    cmd: Some("x".into()),
                    claude: true,
                    ..Flags::default()
                },
                "keep one",
            ),
            (
                Flags {
                    chat_url: Some("https://a/".into()),
                    api_key_env: Some("AWS_SECRET_ACCESS_KEY".into()),
                    ..Flags::default()
                },
                "refused",
            ),
            (
                tier_flags(
                    Tier::Frontier,
                    TierFlags {
                        model: Some("m".into()),
                        ..TierFlags::default()
                    },
                ),
                "need --frontier-chat-url",
            ),
        ] {
            let e = merge(None, &f).expect_err(want).to_string();
            assert!(e.starts_with("command line: ") && e.contains(want), "{e}");
        }
    }

    #[test]
    fn allow_private_flag_opens_every_chat_endpoint() {
        let cfg =
            parse("[runtime.tiers.capable]\nchat_url = \"http://10.0.0.5:8000/v1\"\n").unwrap();
        let rt = merge(Some(cfg.clone()), &Flags::default()).unwrap();
        let roster = Roster::default_roster();
        let all = Env {
            vars: vec![],
            programs: vec![],
        };
        let i = issues(&rt, &roster, &all);
        assert_eq!(i.len(), 1, "{i:?}");
        assert!(i[0].problem.contains("allow_private"), "{}", i[0]);
        let f = Flags {
            allow_private: true,
            ..Flags::default()
        };
        let rt = merge(Some(cfg), &f).unwrap();
        assert!(issues(&rt, &roster, &all).is_empty());
    }

    #[test]
    fn tier_resolution_models_forums_real_fallback() {
        let roster = Roster::default_roster();
        // Only frontier configured: Forum's inspect says "not ready", its submit runs.
        let cfg = parse("[runtime.tiers.frontier]\ncmd = \"ollama run big\"\n").unwrap();
        let rt = merge(Some(cfg), &Flags::default()).unwrap();
        let (via, spec) = rt.for_control().unwrap();
        assert_eq!(via, Via::DefaultFromTier(Tier::Frontier));
        assert_eq!(spec.model(), "ollama");
        assert_eq!(
            rt.for_tier(Tier::Cheap).unwrap().0,
            Via::TierFallsBackToTier(Tier::Cheap, Tier::Frontier)
        );
        assert!(issues(&rt, &roster, &env()).is_empty());
        // capable beats frontier beats cheap.
        let cfg = parse(
            "[runtime.tiers.cheap]\ncmd = \"a\"\n[runtime.tiers.frontier]\ncmd = \"b\"\n[runtime.tiers.capable]\ncmd = \"c\"\n",
        )
        .unwrap();
        let rt = merge(Some(cfg), &Flags::default()).unwrap();
        assert_eq!(rt.effective_default().unwrap().1.model(), "c");
        // With a default, a missing tier falls back to it; agents follow their tier; unknown
        // agents and control roles use the default.
        let cfg =
            parse("[runtime.default]\ncmd = \"d\"\n[runtime.tiers.cheap]\ncmd = \"a\"\n").unwrap();
        let rt = merge(Some(cfg), &Flags::default()).unwrap();
        let cheap = roster
            .agents()
            .iter()
            .find(|a| a.model_tier == Tier::Cheap)
            .unwrap();
        let capable = roster
            .agents()
            .iter()
            .find(|a| a.model_tier == Tier::Capable)
            .unwrap();
        assert_eq!(rt.for_task(&roster, &cheap.name).unwrap().1.model(), "a");
        let (via, s) = rt.for_task(&roster, &capable.name).unwrap();
        assert_eq!(
            (via, s.model()),
            (Via::TierFallsBackToDefault(Tier::Capable), "d")
        );
        assert_eq!(rt.for_task(&roster, "no-such-lane").unwrap().1.model(), "d");
        assert_eq!(rt.for_control().unwrap().1.model(), "d");
    }

    #[test]
    fn seats_pin_the_worker_and_the_orchestrator() {
        let roster = Roster::default_roster();
        let rt = merge(Some(parse(FULL).unwrap()), &Flags::default()).unwrap();
        for a in roster.agents() {
            assert_eq!(rt.for_task(&roster, &a.name).unwrap().1.model(), "capable");
        }
        assert_eq!(rt.for_control().unwrap().0, Via::Seat("orchestrator"));
        // A seat naming an empty slot is an issue, not a silent fallback.
        let cfg =
            parse("[runtime.default]\ncmd = \"ollama\"\n[seats]\nworker = \"cheap\"\n").unwrap();
        let rt = merge(Some(cfg), &Flags::default()).unwrap();
        let i = issues(&rt, &roster, &env());
        assert_eq!(i.len(), 1, "{i:?}");
        assert!(
            i[0].problem.contains("the worker seat names cheap"),
            "{}",
            i[0]
        );
        // "default" resolves to the stand-in default.
        let cfg = parse(
            "[runtime.tiers.frontier]\ncmd = \"ollama\"\n[seats]\norchestrator = \"default\"\n",
        )
        .unwrap();
        let rt = merge(Some(cfg), &Flags::default()).unwrap();
        assert_eq!(
            rt.for_control().unwrap().0,
            Via::DefaultFromTier(Tier::Frontier)
        );
    }

    #[test]
    fn issues_cover_keys_programs_endpoints_and_emptiness() {
        let roster = Roster::default_roster();
        let i = issues(&Runtime::default(), &roster, &env());
        assert!(
            i[0].problem
                .starts_with("no default executor for the control roles"),
            "{i:?}"
        );
        assert_eq!(i.len(), 4, "{i:?}");
        let cfg = parse(
            r#"
[runtime.default]
chat_url = "http://127.0.0.1:8080/v1"
[runtime.tiers.cheap]
cmd = "nope-not-here --x"
[runtime.tiers.capable]
chat_url = "https://api.groq.com/openai/v1/chat/completions"
api_key_env = "GROQ_API_KEY"
[runtime.tiers.frontier]
chat_url = "http://169.254.169.254/"
allow_private = true
"#,
        )
        .unwrap();
        let rt = merge(Some(cfg), &Flags::default()).unwrap();
        let got: Vec<String> = issues(&rt, &roster, &env())
            .iter()
            .map(|i| i.to_string())
            .collect();
        assert_eq!(got.len(), 4, "{got:#?}");
        assert!(
            got[0].starts_with("default: endpoint refused") && got[0].contains("is_local = true"),
            "{}",
            got[0]
        );
        assert!(
            got[1].contains("cheap: program nope-not-here is not on PATH"),
            "{}",
            got[1]
        );
        assert!(
            got[2].contains(
                "capable: the key variable GROQ_API_KEY is not set: export GROQ_API_KEY="
            ),
            "{}",
            got[2]
        );
        assert!(
            got[3].contains("frontier: endpoint refused") && got[3].contains("metadata"),
            "{}",
            got[3]
        );
        // The same loopback URL typed on the command line is the user's choice.
        let f = Flags {
            chat_url: Some("http://127.0.0.1:8080/v1".into()),
            ..Flags::default()
        };
        let rt = merge(None, &f).unwrap();
        assert!(issues(&rt, &roster, &env()).is_empty());
    }
}
