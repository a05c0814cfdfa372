//! Reading a runtime config file into a [`RuntimeConfig`]: each executor table validated (one
//! kind per table, keys that apply to it, bounds on limits), and every error located at the
//! file, the table, the key, the line and the column.

use std::ops::Range;

use toml::Spanned;

use super::Preset;
use super::raw::{RawExecutor, RawFile, RawSeat, RawSeats};
use super::verify::{self, SeatVerify, Verify};
use super::{
    ANTHROPIC_KEY_ENV, ConfigError, DEFAULT_ANTHROPIC_MODEL, DEFAULT_CHAT_MODEL,
    DEFAULT_CLAUDE_TIMEOUT, DEFAULT_CMD_TIMEOUT, DEFAULT_HTTP_TIMEOUT, DEFAULT_MAX_RESPONSE_BYTES,
    ExecutorKind, ExecutorSpec, MAX_TIMEOUT, Metering, RESPONSE_BYTES_RANGE, RuntimeConfig,
    SeatChoice, SeatChoices, Slot, TokenCount,
};
use crate::exec::endpoint::{self, KeyEnv, Origin};
use crate::roster::Tier;

mod observe;
mod work;
use work::{parse_spend, parse_work};

// ---- locating errors ----

/// 1-based line and column (in characters) of byte offset `at` in `text`.
pub(crate) fn line_col(text: &str, at: usize) -> (usize, usize) {
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

/// The longest check command `[work] checks` (or `--check`) may hold.
pub(crate) const MAX_CHECK_BYTES: usize = 4096;

/// Parses a runtime config file. `source_name` names it in errors; `origin` says whether it is
/// the repository's own `.forum/runtime.toml` (which gets nothing beyond what it states).
pub(crate) fn parse_runtime_config(
    text: &str,
    source_name: &str,
    origin: Origin,
) -> Result<RuntimeConfig, ConfigError> {
    let src = Src {
        name: source_name,
        text,
    };
    let raw: RawFile = toml::from_str(text).map_err(|e| toml_error(text, source_name, e))?;
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
        parse_seats(&src, seats, origin, &mut cfg.seats, &mut cfg.warnings)?;
    }
    if let Some(work) = raw.work {
        parse_work(&src, work, &mut cfg.work)?;
    }
    if let Some(c) = raw.context {
        cfg.context.repo = c.repo;
    }
    if let Some(s) = raw.spend {
        cfg.spend = parse_spend(&src, s)?;
    }
    if let Some(o) = raw.observe {
        cfg.observe = observe::parse_observe(&src, o)?;
    }
    if let Some(d) = raw.dispatch {
        cfg.dispatch = parse_dispatch(&src, d)?;
    }
    Ok(cfg)
}

/// `[dispatch]`: the server's URL must be `nats://` or `tls://`, `replicas` from 1 to 5.
fn parse_dispatch(
    src: &Src<'_>,
    d: super::raw::RawDispatch,
) -> Result<super::DispatchConfig, ConfigError> {
    if let Some(u) = &d.url
        && !(u.get_ref().starts_with("nats://") || u.get_ref().starts_with("tls://"))
    {
        let why = format!(
            "{:?} is not nats://HOST:PORT or tls://HOST:PORT",
            u.get_ref()
        );
        return Err(src.at("dispatch", "url", u, why));
    }
    if let Some(r) = &d.replicas
        && !(1..=5).contains(r.get_ref())
    {
        let why = format!(
            "{} is not a number of stream copies from 1 to 5",
            r.get_ref()
        );
        return Err(src.at("dispatch", "replicas", r, why));
    }
    Ok(super::DispatchConfig {
        url: d.url.map(|u| u.into_inner()),
        remote: d.remote,
        credentials: d.credentials.map(Into::into),
        tls: d.tls.unwrap_or(false),
        tls_ca: d.tls_ca.map(Into::into),
        replicas: d.replicas.map(|r| r.into_inner() as usize),
    })
}

/// A TOML syntax or shape error as a [`ConfigError`], with the table, key and place it names.
fn toml_error(text: &str, source_name: &str, e: toml::de::Error) -> ConfigError {
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
}

/// The `[seats]` table: each seat names a slot or holds its own executor table.
fn parse_seats(
    src: &Src<'_>,
    seats: RawSeats,
    origin: Origin,
    seats_cfg: &mut SeatChoices,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
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
                src,
                &format!("seats.{name}"),
                Slot::Default,
                *t,
                origin,
                warnings,
            )?),
        };
        match name {
            "worker" => seats_cfg.worker = choice,
            _ => seats_cfg.orchestrator = choice,
        }
    }
    Ok(())
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
    let kind_key = executor_kind_key(src, table, &r)?;
    check_kind_keys(src, table, &r, kind_key)?;
    let env = executor_env(src, table, &r, origin, warnings)?;

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
    let (kind, default_timeout) = executor_kind(src, table, slot, &r, kind_key, warnings)?;
    let (timeout_seconds, max_response_bytes) = executor_limits(src, table, &r, default_timeout)?;
    let seat_verify = executor_verify(src, table, &r, is_local)?;
    let metering = metering(src, table, &r)?;
    Ok(ExecutorSpec {
        kind,
        is_local,
        allow_private,
        timeout_seconds,
        max_response_bytes,
        json_schema: r.json_schema.as_ref().is_some_and(|v| *v.get_ref()),
        origin,
        verify: seat_verify,
        metering,
        env,
    })
}

/// The one key that names an executor table's kind (`chat_url`, `cmd`, `api`, `claude`,
/// `codex` or `aider`): refused when none or more than one is set.
fn executor_kind_key(
    src: &Src<'_>,
    table: &str,
    r: &RawExecutor,
) -> Result<&'static str, ConfigError> {
    let mut kinds: Vec<(&'static str, Range<usize>)> = Vec::new();
    if let Some(v) = &r.chat_url {
        kinds.push(("chat_url", v.span()));
    }
    if let Some(v) = &r.cmd {
        kinds.push(("cmd", v.span()));
    }
    if let Some(v) = &r.api {
        kinds.push(("api", v.span()));
    }
    for (key, v) in [
        ("claude", &r.claude),
        ("codex", &r.codex),
        ("aider", &r.aider),
    ] {
        if let Some(v) = v.as_ref().filter(|v| *v.get_ref()) {
            kinds.push((key, v.span()));
        }
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
            "names no executor: set one of chat_url, cmd, api = \"anthropic\", claude = true, codex = true or aider = true"
                .into(),
        ));
    };
    Ok(kind_key)
}

/// Refuses a key the table's kind does not take (`model` on a `cmd` table, `env` on an HTTP
/// one...), naming the key and where it is.
fn check_kind_keys(
    src: &Src<'_>,
    table: &str,
    r: &RawExecutor,
    kind_key: &str,
) -> Result<(), ConfigError> {
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
        only(
            "model",
            r.model.is_some(),
            &["chat_url", "api", "claude", "codex", "aider"],
        ),
    )?;
    with_span(
        "api_key_env",
        r.api_key_env.as_ref().map(|v| v.span()),
        only("api_key_env", r.api_key_env.is_some(), &["chat_url", "api"]),
    )?;
    with_span(
        "is_local",
        r.is_local.as_ref().map(|v| v.span()),
        only("is_local", r.is_local.is_some(), &["chat_url", "api"]),
    )?;
    with_span(
        "allow_private",
        r.allow_private.as_ref().map(|v| v.span()),
        only("allow_private", r.allow_private.is_some(), &["chat_url"]),
    )?;
    with_span(
        "json_schema",
        r.json_schema.as_ref().map(|v| v.span()),
        only("json_schema", r.json_schema.is_some(), &["chat_url"]),
    )?;
    with_span(
        "count_tokens",
        r.count_tokens.as_ref().map(|v| v.span()),
        only("count_tokens", r.count_tokens.is_some(), &["chat_url"]),
    )?;
    with_span(
        "env",
        r.env.as_ref().map(|v| v.span()),
        only("env", r.env.is_some(), &["cmd", "claude", "codex", "aider"]),
    )?;
    Ok(())
}

/// The `env` list: each name checked, duplicates dropped, and a warning when a repository's
/// file hands variables to its worker.
fn executor_env(
    src: &Src<'_>,
    table: &str,
    r: &RawExecutor,
    origin: Origin,
    warnings: &mut Vec<String>,
) -> Result<Option<Vec<String>>, ConfigError> {
    Ok(match &r.env {
        None => None,
        Some(list) => {
            let mut names: Vec<String> = Vec::new();
            for n in list.get_ref() {
                if let Some(m) = crate::exec::command::env::refuse_name(n) {
                    return Err(src.at(table, "env", list, m));
                }
                if !names.contains(n) {
                    names.push(n.clone());
                }
            }
            // A repository's file arrives with a clone: say what it hands its worker.
            if origin == Origin::RepoConfig && !names.is_empty() {
                warnings.push(format!(
                    "{}: [{table}] env hands {} from your environment to its worker (the values are never recorded)",
                    src.name,
                    names.join(", ")
                ));
            }
            Some(names)
        }
    })
}

/// The table's `model` (not empty), else `default`.
fn executor_model(
    src: &Src<'_>,
    table: &str,
    r: &RawExecutor,
    default: &str,
) -> Result<String, ConfigError> {
    match &r.model {
        Some(m) if m.get_ref().trim().is_empty() => {
            Err(src.at(table, "model", m, "must not be empty".into()))
        }
        Some(m) => Ok(m.get_ref().clone()),
        None => Ok(default.to_string()),
    }
}

/// The table's `api_key_env`, checked; an unusual name is warned about.
fn executor_key_env(
    src: &Src<'_>,
    table: &str,
    r: &RawExecutor,
    warnings: &mut Vec<String>,
) -> Result<Option<String>, ConfigError> {
    match &r.api_key_env {
        None => Ok(None),
        Some(k) => match endpoint::check_key_env(k.get_ref()) {
            Ok(KeyEnv::Known) => Ok(Some(k.get_ref().clone())),
            Ok(KeyEnv::Unusual(w)) => {
                warnings.push(format!("{}: [{table}] {w}", src.name));
                Ok(Some(k.get_ref().clone()))
            }
            Err(m) => Err(src.at(table, "api_key_env", k, m.to_string())),
        },
    }
}

/// What the table runs, by its kind key, with the timeout that kind has by default.
fn executor_kind(
    src: &Src<'_>,
    table: &str,
    slot: Slot,
    r: &RawExecutor,
    kind_key: &str,
    warnings: &mut Vec<String>,
) -> Result<(ExecutorKind, u64), ConfigError> {
    let model = |default: &str| executor_model(src, table, r, default);
    let key_env = |warnings: &mut Vec<String>| executor_key_env(src, table, r, warnings);
    Ok(match kind_key {
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
            let argv =
                split_cmd(c.get_ref()).map_err(|m| src.at(table, "cmd", c, m.to_string()))?;
            (
                ExecutorKind::Command { argv, preset: None },
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
        other => {
            let p = match other {
                "codex" => Preset::Codex,
                "aider" => Preset::Aider,
                _ => Preset::Claude,
            };
            (
                ExecutorKind::Command {
                    argv: p.base_argv(r.model.as_ref().map(|m| m.get_ref().as_str())),
                    preset: Some(p),
                },
                DEFAULT_CLAUDE_TIMEOUT,
            )
        }
    })
}

/// `timeout_seconds` (the kind's default when absent) and `max_response_bytes`, each within
/// its range.
fn executor_limits(
    src: &Src<'_>,
    table: &str,
    r: &RawExecutor,
    default_timeout: u64,
) -> Result<(u64, u64), ConfigError> {
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
    Ok((timeout_seconds, max_response_bytes))
}

/// The seat's `tier` and `verify`, checked together with `is_local`.
fn executor_verify(
    src: &Src<'_>,
    table: &str,
    r: &RawExecutor,
    is_local: bool,
) -> Result<SeatVerify, ConfigError> {
    let verify = match &r.verify {
        Some(v) => Some(Verify::parse(v.get_ref()).ok_or_else(|| {
            src.at(
                table,
                "verify",
                v,
                format!(
                    "unknown level {:?}: give full, standard or light",
                    v.get_ref()
                ),
            )
        })?),
        None => None,
    };
    let seat_verify = SeatVerify {
        tier: r.tier.as_ref().map(|t| *t.get_ref()),
        verify,
    };
    if let Err(m) = verify::check(is_local, seat_verify) {
        let (key, span) = match (&r.tier, &r.verify) {
            (Some(t), _) if !(1..=3).contains(t.get_ref()) => ("tier", t.span()),
            (_, Some(v)) => ("verify", v.span()),
            (Some(t), None) => ("tier", t.span()),
            (None, None) => ("verify", 0..0),
        };
        return Err(src.err(table, Some(key), Some(span), m.to_string()));
    }
    Ok(seat_verify)
}

/// `price_in_per_mtok`, `price_out_per_mtok` (both or neither) and `max_tokens`.
fn metering(src: &Src<'_>, table: &str, r: &RawExecutor) -> Result<Metering, ConfigError> {
    let max = crate::spend::MAX_PRICE_PER_MTOK;
    for (key, v) in [
        ("price_in_per_mtok", &r.price_in_per_mtok),
        ("price_out_per_mtok", &r.price_out_per_mtok),
    ] {
        if let Some(p) = v
            && !(p.get_ref().is_finite() && (0.0..=max).contains(p.get_ref()))
        {
            return Err(src.at(
                table,
                key,
                p,
                format!(
                    "must be a price in dollars per million tokens between 0 and {max}, not {}",
                    p.get_ref()
                ),
            ));
        }
    }
    let price = match (&r.price_in_per_mtok, &r.price_out_per_mtok) {
        (None, None) => None,
        (Some(i), Some(o)) => crate::spend::Price::from_usd_per_mtok(*i.get_ref(), *o.get_ref()),
        (Some(p), None) | (None, Some(p)) => {
            let (set, missing) = if r.price_in_per_mtok.is_some() {
                ("price_in_per_mtok", "price_out_per_mtok")
            } else {
                ("price_out_per_mtok", "price_in_per_mtok")
            };
            return Err(src.at(
                table,
                set,
                p,
                format!("is set without {missing}: give both prices (0 for free)"),
            ));
        }
    };
    let max_tokens = match &r.max_tokens {
        Some(n) if *n.get_ref() == 0 => {
            return Err(src.at(
                table,
                "max_tokens",
                n,
                "must be at least 1 (leave it out for no cap)".to_string(),
            ));
        }
        Some(n) => Some(*n.get_ref()),
        None => None,
    };
    let count_tokens = match &r.count_tokens {
        None => None,
        Some(v) => Some(TokenCount::parse(v.get_ref()).ok_or_else(|| {
            src.at(
                table,
                "count_tokens",
                v,
                format!(
                    "names no token counter ({:?}); it takes {}",
                    v.get_ref(),
                    TokenCount::NAMES.join(", ")
                ),
            )
        })?),
    };
    Ok(Metering {
        price,
        max_tokens,
        count_tokens,
    })
}

/// Why a command line cannot be split into a program and its arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SplitError {
    /// An unclosed quote or a trailing backslash.
    #[error("cannot split {line:?} with shell rules (an unclosed quote or a trailing backslash)")]
    Unsplittable { line: String },
    /// Nothing but blanks.
    #[error("the command is empty")]
    Empty,
    /// The first word is empty (`'' arg`).
    #[error("the program name is empty")]
    EmptyProgram,
}

/// Splits a command line with POSIX shell rules (quotes and backslashes; no expansion, no
/// pipes: nothing runs through a shell).
pub(crate) fn split_cmd(line: &str) -> Result<Vec<String>, SplitError> {
    match shlex::split(line) {
        None => Err(SplitError::Unsplittable {
            line: line.to_string(),
        }),
        Some(v) if v.is_empty() => Err(SplitError::Empty),
        Some(v) if v[0].is_empty() => Err(SplitError::EmptyProgram),
        Some(v) => Ok(v),
    }
}
