//! The executors of a run as its ledger records them (the `runtime` field of its `request`
//! entry), and back: so `resume` continues a run on the executors it started with, without
//! the flags again. Pure.
//!
//! What is recorded is what the executor is (a command's argv, a chat endpoint's URL and
//! model, the Anthropic model), its limits, where it was configured, and the *name* of the
//! variable holding a key (and of the variables a program is handed, `env`), never a value. A chat URL with credentials, a query or a fragment is
//! recorded without them and marked `url_trimmed`; such an executor cannot be restored (the
//! resume asks for the flags again) rather than being called at a different URL.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::verify::{SeatVerify, Verify};
use super::{
    ExecutorKind, ExecutorSpec, Metering, Runtime, SeatChoice, SeatChoices, Slot, TokenCount,
};
use crate::exec::config::Preset;
use crate::exec::endpoint::Origin;
use crate::roster::Tier;

/// The record's format version (its `v` field).
pub(crate) const RECORD_VERSION: u64 = 1;

fn origin_of(s: &str) -> Option<Origin> {
    match s {
        "command-line" => Some(Origin::CommandLine),
        "runtime-config" => Some(Origin::UserFile),
        "repository" => Some(Origin::RepoConfig),
        _ => None,
    }
}

/// One executor as recorded.
pub(crate) fn executor_record(spec: &ExecutorSpec) -> Value {
    let mut m = Map::new();
    m.insert("kind".into(), json!(spec.kind.name()));
    match &spec.kind {
        ExecutorKind::Command { argv, .. } => {
            m.insert("argv".into(), json!(argv));
        }
        ExecutorKind::Chat {
            url,
            model,
            api_key_env,
        } => {
            let (shown, trimmed) = match url::Url::parse(url) {
                Ok(u) => {
                    let trimmed = !u.username().is_empty()
                        || u.password().is_some()
                        || u.query().is_some()
                        || u.fragment().is_some();
                    if trimmed {
                        (crate::exec::endpoint::display_url(&u), true)
                    } else {
                        (url.clone(), false)
                    }
                }
                Err(_) => (String::new(), true),
            };
            m.insert("url".into(), json!(shown));
            if trimmed {
                m.insert("url_trimmed".into(), json!(true));
            }
            m.insert("model".into(), json!(model));
            m.insert("api_key_env".into(), json!(api_key_env));
        }
        ExecutorKind::Anthropic { model, api_key_env } => {
            m.insert("model".into(), json!(model));
            m.insert("api_key_env".into(), json!(api_key_env));
        }
    }
    m.insert("is_local".into(), json!(spec.is_local));
    // Written only when set, so the records of runs that never use it keep their shape.
    if spec.json_schema {
        m.insert("json_schema".into(), json!(true));
    }
    m.insert("allow_private".into(), json!(spec.allow_private));
    m.insert("timeout_seconds".into(), json!(spec.timeout_seconds));
    m.insert("max_response_bytes".into(), json!(spec.max_response_bytes));
    m.insert("origin".into(), json!(spec.origin.as_str()));
    if let Some(t) = spec.verify.tier {
        m.insert("tier".into(), json!(t));
    }
    if let Some(v) = spec.verify.verify {
        m.insert("verify".into(), json!(v.as_str()));
    }
    // Prices as micro-dollars per million tokens: whole numbers, so they come back exactly.
    if let Some(p) = spec.metering.price {
        m.insert("price_in_micro_per_mtok".into(), json!(p.in_micro_per_mtok));
        m.insert(
            "price_out_micro_per_mtok".into(),
            json!(p.out_micro_per_mtok),
        );
    }
    if let Some(n) = spec.metering.max_tokens {
        m.insert("max_tokens".into(), json!(n));
    }
    // Only when set, so the records of executors without it are as they were.
    if let Some(c) = spec.metering.count_tokens {
        m.insert("count_tokens".into(), json!(c.as_str()));
    }
    // Names only, and only when written (a record without it is one from before `env`).
    if let Some(env) = &spec.env {
        m.insert("env".into(), json!(env));
    }
    Value::Object(m)
}

fn seat_record(choice: &SeatChoice) -> Value {
    match choice {
        SeatChoice::Unset => Value::Null,
        SeatChoice::Slot(s) => json!(s.as_str()),
        SeatChoice::Inline(spec) => executor_record(spec),
    }
}

/// The record of `rt`'s executors; `None` when it has none (nothing to continue with).
pub(crate) fn record(rt: &Runtime) -> Option<Value> {
    if rt.default.is_none()
        && rt.tiers.is_empty()
        && matches!(rt.seats.worker, SeatChoice::Unset)
        && matches!(rt.seats.orchestrator, SeatChoice::Unset)
    {
        return None;
    }
    let tiers: Map<String, Value> = rt
        .tiers
        .iter()
        .map(|(t, s)| (t.as_str().to_string(), executor_record(s)))
        .collect();
    Some(json!({
        "v": RECORD_VERSION,
        "default": rt.default.as_ref().map(executor_record),
        "tiers": tiers,
        "seats": {
            "worker": seat_record(&rt.seats.worker),
            "orchestrator": seat_record(&rt.seats.orchestrator),
        },
    }))
}

/// A recorded runtime that does not hold together: one line saying which part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct RecordError(String);

impl RecordError {
    fn new(message: String) -> RecordError {
        RecordError(message)
    }
}

fn str_field<'a>(m: &'a Map<String, Value>, k: &str, at: &str) -> Result<&'a str, RecordError> {
    m.get(k)
        .and_then(Value::as_str)
        .ok_or_else(|| RecordError::new(format!("{at}: field {k} is missing or not a string")))
}

fn u64_field(m: &Map<String, Value>, k: &str, at: &str) -> Result<u64, RecordError> {
    m.get(k).and_then(Value::as_u64).ok_or_else(|| {
        RecordError::new(format!("{at}: field {k} is missing or not a whole number"))
    })
}

fn opt_str(m: &Map<String, Value>, k: &str, at: &str) -> Result<Option<String>, RecordError> {
    match m.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(RecordError::new(format!("{at}: field {k} is not a string"))),
    }
}

/// What a recorded executor runs, by its `kind`.
fn kind_from_record(m: &Map<String, Value>, at: &str) -> Result<ExecutorKind, RecordError> {
    let argv = || -> Result<Vec<String>, RecordError> {
        let a: Vec<String> = m
            .get("argv")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        if a.is_empty() {
            return Err(RecordError::new(format!("{at}: argv is missing or empty")));
        }
        Ok(a)
    };
    Ok(match str_field(m, "kind", at)? {
        "command" => ExecutorKind::Command {
            argv: argv()?,
            preset: None,
        },
        name if Preset::ALL.iter().any(|p| p.name() == name) => ExecutorKind::Command {
            argv: argv()?,
            preset: Preset::ALL.into_iter().find(|p| p.name() == name),
        },
        "chat" => {
            if m.get("url_trimmed")
                .and_then(Value::as_bool)
                .unwrap_or(false)
            {
                return Err(RecordError::new(format!(
                    "{at}: its URL held credentials, a query or a fragment, which are not recorded"
                )));
            }
            ExecutorKind::Chat {
                url: str_field(m, "url", at)?.to_string(),
                model: str_field(m, "model", at)?.to_string(),
                api_key_env: opt_str(m, "api_key_env", at)?,
            }
        }
        "anthropic" => ExecutorKind::Anthropic {
            model: str_field(m, "model", at)?.to_string(),
            api_key_env: str_field(m, "api_key_env", at)?.to_string(),
        },
        other => {
            return Err(RecordError::new(format!(
                "{at}: unknown executor kind {other:?}"
            )));
        }
    })
}

/// A recorded executor's `env` names, each one a program may be handed.
fn env_from_record(m: &Map<String, Value>, at: &str) -> Result<Option<Vec<String>>, RecordError> {
    Ok(match m.get("env") {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) => Some(
            a.iter()
                .map(|n| {
                    n.as_str()
                        .filter(|n| crate::exec::command::env::refuse_name(n).is_none())
                        .map(str::to_string)
                        .ok_or_else(|| RecordError::new(format!("{at}: env holds something that is not a variable name a program may be handed")))
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => return Err(RecordError::new(format!("{at}: env is not a list of names"))),
    })
}

/// A recorded executor's `tier` and `verify`.
fn verify_from_record(m: &Map<String, Value>, at: &str) -> Result<SeatVerify, RecordError> {
    Ok(SeatVerify {
        tier: match m.get("tier") {
            None | Some(Value::Null) => None,
            Some(t) => Some(
                t.as_u64()
                    .and_then(|t| u8::try_from(t).ok())
                    .ok_or_else(|| RecordError::new(format!("{at}: tier is not a small number")))?,
            ),
        },
        verify: match m.get("verify") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_str().and_then(Verify::parse).ok_or_else(|| {
                RecordError::new(format!("{at}: verify is not full, standard or light"))
            })?),
        },
    })
}

/// A recorded executor's prices (both or neither) and `max_tokens`.
fn metering_from_record(m: &Map<String, Value>, at: &str) -> Result<Metering, RecordError> {
    Ok(Metering {
        price: match (
            m.get("price_in_micro_per_mtok").and_then(Value::as_u64),
            m.get("price_out_micro_per_mtok").and_then(Value::as_u64),
        ) {
            (Some(i), Some(o)) => Some(crate::spend::Price {
                in_micro_per_mtok: i,
                out_micro_per_mtok: o,
            }),
            (None, None) => None,
            _ => {
                return Err(RecordError::new(format!(
                    "{at}: only one of its two prices is recorded"
                )));
            }
        },
        max_tokens: match m.get("max_tokens") {
            None | Some(Value::Null) => None,
            Some(n) => Some(
                n.as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| {
                        RecordError::new(format!("{at}: max_tokens is not a token count"))
                    })?,
            ),
        },
        count_tokens: match m.get("count_tokens") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_str().and_then(TokenCount::parse).ok_or_else(|| {
                RecordError::new(format!("{at}: count_tokens names no token counter"))
            })?),
        },
    })
}

/// One executor back from its record (`at` names it in errors).
pub(crate) fn executor_from_record(v: &Value, at: &str) -> Result<ExecutorSpec, RecordError> {
    let m = v
        .as_object()
        .ok_or_else(|| RecordError::new(format!("{at} is not an object")))?;
    let flag = |k: &str| m.get(k).and_then(Value::as_bool).unwrap_or(false);
    let kind = kind_from_record(m, at)?;
    let env = env_from_record(m, at)?;
    let origin_name = str_field(m, "origin", at)?;
    let origin = origin_of(origin_name)
        .ok_or_else(|| RecordError::new(format!("{at}: unknown origin {origin_name:?}")))?;
    Ok(ExecutorSpec {
        kind,
        is_local: flag("is_local"),
        allow_private: flag("allow_private"),
        timeout_seconds: u64_field(m, "timeout_seconds", at)?,
        max_response_bytes: u64_field(m, "max_response_bytes", at)?,
        json_schema: flag("json_schema"),
        origin,
        verify: verify_from_record(m, at)?,
        metering: metering_from_record(m, at)?,
        env,
    })
}

fn seat_from_record(v: Option<&Value>, at: &str) -> Result<SeatChoice, RecordError> {
    match v {
        None | Some(Value::Null) => Ok(SeatChoice::Unset),
        Some(Value::String(s)) => Slot::parse(s)
            .map(SeatChoice::Slot)
            .ok_or_else(|| RecordError::new(format!("{at}: unknown slot {s:?}"))),
        Some(other) => Ok(SeatChoice::Inline(executor_from_record(other, at)?)),
    }
}

/// The executors of a record, as a runtime with no `[work]` table and no warnings. A record
/// that does not hold together is one line saying which part.
pub(crate) fn from_record(v: &Value) -> Result<Runtime, RecordError> {
    let m = v
        .as_object()
        .ok_or_else(|| RecordError::new("the runtime record is not an object".into()))?;
    match m.get("v").and_then(Value::as_u64) {
        Some(RECORD_VERSION) => {}
        other => {
            return Err(RecordError::new(format!(
                "the runtime record has version {other:?}; this git forum reads version {RECORD_VERSION}"
            )));
        }
    }
    let default = match m.get("default") {
        None | Some(Value::Null) => None,
        Some(d) => Some(executor_from_record(d, "runtime.default")?),
    };
    let mut tiers = BTreeMap::new();
    if let Some(t) = m.get("tiers").and_then(Value::as_object) {
        for (name, spec) in t {
            let tier = Tier::parse(name)
                .ok_or_else(|| RecordError::new(format!("unknown tier {name:?}")))?;
            tiers.insert(
                tier,
                executor_from_record(spec, &format!("runtime.tiers.{name}"))?,
            );
        }
    }
    let seats = m.get("seats").and_then(Value::as_object);
    let seats = SeatChoices {
        worker: seat_from_record(seats.and_then(|s| s.get("worker")), "seats.worker")?,
        orchestrator: seat_from_record(
            seats.and_then(|s| s.get("orchestrator")),
            "seats.orchestrator",
        )?,
    };
    Ok(Runtime {
        default,
        tiers,
        seats,
        ..Runtime::default()
    })
}

/// The executors a record names, each described on one line (for telling the user what a
/// resume runs on).
pub(crate) fn describe(rt: &Runtime) -> String {
    let mut parts = Vec::new();
    if let Some(d) = &rt.default {
        parts.push(format!("default {}", d.describe()));
    }
    for (t, s) in &rt.tiers {
        parts.push(format!("{t} {}", s.describe()));
    }
    for (name, seat) in [
        ("worker", &rt.seats.worker),
        ("orchestrator", &rt.seats.orchestrator),
    ] {
        match seat {
            SeatChoice::Unset => {}
            SeatChoice::Slot(s) => parts.push(format!("{name} seat {s}")),
            SeatChoice::Inline(spec) => parts.push(format!("{name} seat {}", spec.describe())),
        }
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: ExecutorKind, origin: Origin) -> ExecutorSpec {
        ExecutorSpec {
            kind,
            is_local: false,
            allow_private: true,
            timeout_seconds: 30,
            max_response_bytes: 4096,
            json_schema: false,
            origin,
            // A seat's tier and verification level come back with it.
            verify: SeatVerify {
                tier: Some(3),
                verify: Some(Verify::Full),
            },
            metering: Metering {
                price: crate::spend::Price::from_usd_per_mtok(3.0, 15.0),
                max_tokens: Some(2048),
                count_tokens: Some(TokenCount::LlamaCpp),
            },
            env: None,
        }
    }

    #[test]
    fn a_runtime_survives_its_record_and_no_key_is_in_it() {
        let mut rt = Runtime {
            default: Some(spec(
                ExecutorKind::Chat {
                    url: "http://127.0.0.1:9/v1/chat/completions".into(),
                    model: "m".into(),
                    api_key_env: Some("OPENAI_API_KEY".into()),
                },
                Origin::CommandLine,
            )),
            ..Runtime::default()
        };
        rt.tiers.insert(
            Tier::Cheap,
            ExecutorSpec {
                env: Some(vec!["OPENAI_API_KEY".into()]),
                ..spec(
                    ExecutorKind::Command {
                        argv: vec!["w".into(), "--x".into()],
                        preset: None,
                    },
                    Origin::RepoConfig,
                )
            },
        );
        rt.tiers.insert(
            Tier::Frontier,
            spec(
                ExecutorKind::Anthropic {
                    model: "claude-sonnet-4-6".into(),
                    api_key_env: "ANTHROPIC_API_KEY".into(),
                },
                Origin::UserFile,
            ),
        );
        rt.seats.worker = SeatChoice::Slot(Slot::Tier(Tier::Cheap));
        rt.seats.orchestrator = SeatChoice::Inline(spec(
            ExecutorKind::Command {
                argv: vec!["claude".into(), "-p".into()],
                preset: Some(Preset::Claude),
            },
            Origin::CommandLine,
        ));
        let r = record(&rt).unwrap();
        assert_eq!(r["default"]["api_key_env"], "OPENAI_API_KEY");
        assert_eq!(r["tiers"]["cheap"]["env"], json!(["OPENAI_API_KEY"]));
        assert_eq!(from_record(&r).unwrap(), rt);
        assert!(record(&Runtime::default()).is_none());
    }

    #[test]
    fn a_trimmed_url_and_a_broken_record_are_refused_by_name() {
        let rt = Runtime {
            default: Some(spec(
                ExecutorKind::Chat {
                    url: "https://example.com/v1/chat/completions?key=secret".into(),
                    model: "m".into(),
                    api_key_env: None,
                },
                Origin::CommandLine,
            )),
            ..Runtime::default()
        };
        let r = record(&rt).unwrap();
        assert!(!r.to_string().contains("secret"), "{r}");
        let e = from_record(&r).unwrap_err().to_string();
        assert!(e.contains("runtime.default") && e.contains("query"), "{e}");
        let e = from_record(&json!({"v": 9})).unwrap_err().to_string();
        assert!(e.contains("version"), "{e}");
        let e = from_record(&json!({"v": 1, "default": {"kind": "telepathy"}}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("telepathy"), "{e}");
    }

    #[test]
    fn the_json_schema_override_is_recorded_only_when_set() {
        let chat = |json_schema| ExecutorSpec {
            json_schema,
            ..spec(
                ExecutorKind::Chat {
                    url: "https://api.openai.com/v1/chat/completions".into(),
                    model: "gpt-3.5-turbo".into(),
                    api_key_env: Some("OPENAI_API_KEY".into()),
                },
                Origin::CommandLine,
            )
        };
        let plain = executor_record(&chat(false));
        assert!(plain.get("json_schema").is_none(), "{plain}");
        assert!(!executor_from_record(&plain, "r").unwrap().json_schema);
        let set = executor_record(&chat(true));
        assert_eq!(set["json_schema"], true);
        assert_eq!(executor_from_record(&set, "r").unwrap(), chat(true));
    }
}
