//! The executor flags of one run (`--cmd`, `--chat-url`, `--api`, `--claude`, the per-tier
//! flags, `--allow-private`) merged over the runtime config file with Forum's precedence.

use std::collections::BTreeMap;

use super::parse::split_cmd;
use super::{
    ANTHROPIC_KEY_ENV, ConfigError, DEFAULT_ANTHROPIC_MODEL, DEFAULT_CHAT_MODEL,
    DEFAULT_CLAUDE_TIMEOUT, DEFAULT_CMD_TIMEOUT, DEFAULT_HTTP_TIMEOUT, DEFAULT_MAX_RESPONSE_BYTES,
    ExecutorKind, ExecutorSpec, Preset, Runtime, RuntimeConfig, SeatChoice,
};
use crate::exec::endpoint::{self, KeyEnv, Origin};
use crate::roster::Tier;

// ---- the flags ----

/// Per-tier executor flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TierFlags {
    /// `--T-cmd`.
    pub(crate) cmd: Option<String>,
    /// `--T-chat-url`.
    pub(crate) chat_url: Option<String>,
    /// `--T-model`.
    pub(crate) model: Option<String>,
    /// `--T-api-key-env`.
    pub(crate) api_key_env: Option<String>,
}

/// The executor flags of one run, as typed (the CLI fills this from `ExecutorArgs`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Flags {
    /// `--cmd`.
    pub(crate) cmd: Option<String>,
    /// `--chat-url`.
    pub(crate) chat_url: Option<String>,
    /// `--model`.
    pub(crate) model: Option<String>,
    /// `--api-key-env`.
    pub(crate) api_key_env: Option<String>,
    /// `--api[=KIND]`.
    pub(crate) api: Option<String>,
    /// `--claude`.
    pub(crate) claude: bool,
    /// `--codex`.
    pub(crate) codex: bool,
    /// `--aider`.
    pub(crate) aider: bool,
    /// `--cheap-*`, `--capable-*`, `--frontier-*`.
    pub(crate) tiers: BTreeMap<Tier, TierFlags>,
    /// `--allow-private`.
    pub(crate) allow_private: bool,
    /// `--json-schema`: every chat executor's model answers with `json_schema` structured
    /// output, known or not ([`super::structured`]).
    pub(crate) json_schema: bool,
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
        json_schema: false,
        origin: Origin::CommandLine,
        verify: Default::default(),
        metering: Default::default(),
        env: None,
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
pub(crate) fn merge(config: Option<RuntimeConfig>, flags: &Flags) -> Result<Runtime, ConfigError> {
    let config = config.unwrap_or_default();
    let mut warnings = config.warnings;
    let ap = flags.allow_private;

    let cli_default = default_from_flags(flags, &mut warnings)?;
    let mut default = cli_default.or(config.default);

    let mut tiers = config.tiers;
    tiers_from_flags(flags, &mut tiers, &mut warnings)?;

    let mut seats = config.seats;
    let js = flags.json_schema;
    if ap || js {
        let open = |s: &mut ExecutorSpec| {
            if matches!(s.kind, ExecutorKind::Chat { .. }) {
                s.allow_private |= ap;
                s.json_schema |= js;
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
        work: config.work,
        context: config.context,
        spend: config.spend,
        observe: config.observe,
        dispatch: config.dispatch,
        warnings,
    })
}

/// The default slot the flags name, if any: `--chat-url`, else `--api`, else `--cmd` or a
/// preset (`--claude`, `--codex`, `--aider`); the flags it overrides are warned about.
fn default_from_flags(
    flags: &Flags,
    warnings: &mut Vec<String>,
) -> Result<Option<ExecutorSpec>, ConfigError> {
    let presets: Vec<Preset> = [
        (flags.claude, Preset::Claude),
        (flags.codex, Preset::Codex),
        (flags.aider, Preset::Aider),
    ]
    .into_iter()
    .filter_map(|(set, p)| set.then_some(p))
    .collect();
    if flags.model.is_some()
        && flags.chat_url.is_none()
        && flags.api.is_none()
        && presets.is_empty()
    {
        return Err(flag_err(
            "--model needs --chat-url, --api, --claude, --codex or --aider".into(),
        ));
    }
    if presets.len() > 1 {
        return Err(flag_err(format!(
            "--{} and --{} both name the default executor; keep one",
            presets[0].name(),
            presets[1].name()
        )));
    }
    let preset = presets.first().copied();
    if flags.api_key_env.is_some() && flags.chat_url.is_none() && flags.api.is_none() {
        return Err(flag_err("--api-key-env needs --chat-url or --api".into()));
    }
    Ok(if let Some(u) = &flags.chat_url {
        Some(chat_default(flags, u, warnings)?)
    } else if let Some(kind) = &flags.api {
        Some(api_default(flags, kind, warnings)?)
    } else if let Some(c) = &flags.cmd {
        if let Some(p) = preset {
            return Err(flag_err(format!(
                "--cmd and --{} both name the default executor; keep one",
                p.name()
            )));
        }
        Some(cli_spec(
            ExecutorKind::Command {
                argv: flag_cmd("--cmd", c)?,
                preset: None,
            },
            DEFAULT_CMD_TIMEOUT,
            flags.allow_private,
        ))
    } else {
        preset.map(|p| {
            cli_spec(
                ExecutorKind::Command {
                    argv: p.base_argv(flags.model.as_deref()),
                    preset: Some(p),
                },
                DEFAULT_CLAUDE_TIMEOUT,
                flags.allow_private,
            )
        })
    })
}

/// The default slot from `--chat-url` (which wins over every other flag naming one).
fn chat_default(
    flags: &Flags,
    url: &str,
    warnings: &mut Vec<String>,
) -> Result<ExecutorSpec, ConfigError> {
    for (set, name) in [
        (flags.api.is_some(), "--api"),
        (flags.cmd.is_some(), "--cmd"),
        (flags.claude, "--claude"),
        (flags.codex, "--codex"),
        (flags.aider, "--aider"),
    ] {
        if set {
            warnings.push(format!("{name} is ignored: --chat-url takes precedence"));
        }
    }
    if url.trim().is_empty() {
        return Err(flag_err("--chat-url is empty".into()));
    }
    let api_key_env = match &flags.api_key_env {
        Some(k) => Some(flag_key_env("--api-key-env", k, warnings)?),
        None => None,
    };
    Ok(cli_spec(
        ExecutorKind::Chat {
            url: url.to_string(),
            model: flags
                .model
                .clone()
                .unwrap_or_else(|| DEFAULT_CHAT_MODEL.into()),
            api_key_env,
        },
        DEFAULT_HTTP_TIMEOUT,
        flags.allow_private,
    ))
}

/// The default slot from `--api` (which wins over `--cmd` and the presets).
fn api_default(
    flags: &Flags,
    kind: &str,
    warnings: &mut Vec<String>,
) -> Result<ExecutorSpec, ConfigError> {
    for (set, name) in [
        (flags.cmd.is_some(), "--cmd"),
        (flags.claude, "--claude"),
        (flags.codex, "--codex"),
        (flags.aider, "--aider"),
    ] {
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
        Some(k) => flag_key_env("--api-key-env", k, warnings)?,
        None => ANTHROPIC_KEY_ENV.into(),
    };
    Ok(cli_spec(
        ExecutorKind::Anthropic {
            model: flags
                .model
                .clone()
                .unwrap_or_else(|| DEFAULT_ANTHROPIC_MODEL.into()),
            api_key_env,
        },
        DEFAULT_HTTP_TIMEOUT,
        flags.allow_private,
    ))
}

/// Each tier the flags name (`--TIER-chat-url`, else `--TIER-cmd`), over the file's.
fn tiers_from_flags(
    flags: &Flags,
    tiers: &mut BTreeMap<Tier, ExecutorSpec>,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
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
                Some(k) => Some(flag_key_env(&format!("--{tier}-api-key-env"), k, warnings)?),
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
                    flags.allow_private,
                ),
            );
        } else if let Some(c) = &tf.cmd {
            tiers.insert(
                *tier,
                cli_spec(
                    ExecutorKind::Command {
                        argv: flag_cmd(&format!("--{tier}-cmd"), c)?,
                        preset: None,
                    },
                    DEFAULT_CMD_TIMEOUT,
                    flags.allow_private,
                ),
            );
        }
    }
    Ok(())
}
