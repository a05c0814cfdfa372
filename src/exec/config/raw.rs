//! The runtime config file's shape as serde reads it: every table and key, each value with its
//! span so that errors can name the line and the column. Nothing here checks meaning; that is
//! `parse.rs`'s job.

use std::fmt;

use serde::Deserialize;
use toml::Spanned;

/// Unknown keys are refused (`deny_unknown_fields`) everywhere: stricter than Forum, which
/// ignores them, on purpose (see the module doc).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFile {
    pub(super) runtime: Option<RawRuntime>,
    pub(super) seats: Option<RawSeats>,
    pub(super) work: Option<RawWork>,
    pub(super) context: Option<RawContext>,
    pub(super) spend: Option<RawSpend>,
    pub(super) observe: Option<RawObserve>,
    pub(super) dispatch: Option<RawDispatch>,
}

/// `[dispatch]`: where `--work` runs send their tasks.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDispatch {
    pub(super) url: Option<Spanned<String>>,
    pub(super) remote: Option<String>,
    pub(super) credentials: Option<String>,
    pub(super) tls: Option<bool>,
    pub(super) tls_ca: Option<String>,
    pub(super) replicas: Option<Spanned<i64>>,
}

/// `[observe]`: heartbeats and the watchdog, each a duration or `"off"`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawObserve {
    pub(super) heartbeat: Option<Spanned<String>>,
    pub(super) stall: Option<Spanned<String>>,
}

/// `[spend]`: the run's spend ceilings when the command gives none.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSpend {
    pub(super) max_cost_usd: Option<Spanned<f64>>,
    pub(super) max_tokens: Option<Spanned<u64>>,
}

/// `[context]`: what a run takes in as context by default.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawContext {
    pub(super) repo: Option<bool>,
}

/// `[work]`: runs that change the repository.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWork {
    pub(super) enabled: Option<bool>,
    pub(super) checks: Option<Spanned<Vec<String>>>,
    pub(super) default_checks: Option<Spanned<Vec<String>>>,
    pub(super) sandbox: Option<bool>,
    pub(super) sandbox_net: Option<bool>,
    pub(super) sandbox_read: Option<Vec<String>>,
    pub(super) sandbox_allow_host: Option<Vec<String>>,
    pub(super) max_file_bytes: Option<u64>,
    pub(super) max_change_bytes: Option<u64>,
    pub(super) max_files: Option<u64>,
    pub(super) max_disk_bytes: Option<u64>,
    pub(super) attempts: Option<Spanned<RawAttempts>>,
}

/// `[work] attempts`: a count, or one slot name per attempt.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RawAttempts {
    Count(i64),
    Slots(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRuntime {
    pub(super) default: Option<RawExecutor>,
    pub(super) tiers: Option<RawTiers>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTiers {
    pub(super) cheap: Option<RawExecutor>,
    pub(super) capable: Option<RawExecutor>,
    pub(super) frontier: Option<RawExecutor>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSeats {
    pub(super) worker: Option<Spanned<RawSeat>>,
    pub(super) orchestrator: Option<Spanned<RawSeat>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExecutor {
    pub(super) chat_url: Option<Spanned<String>>,
    pub(super) cmd: Option<Spanned<String>>,
    pub(super) api: Option<Spanned<String>>,
    pub(super) claude: Option<Spanned<bool>>,
    pub(super) codex: Option<Spanned<bool>>,
    pub(super) aider: Option<Spanned<bool>>,
    pub(super) model: Option<Spanned<String>>,
    pub(super) api_key_env: Option<Spanned<String>>,
    pub(super) is_local: Option<Spanned<bool>>,
    pub(super) json_schema: Option<Spanned<bool>>,
    pub(super) allow_private: Option<Spanned<bool>>,
    pub(super) timeout_seconds: Option<Spanned<u64>>,
    pub(super) max_response_bytes: Option<Spanned<u64>>,
    pub(super) tier: Option<Spanned<u8>>,
    pub(super) verify: Option<Spanned<String>>,
    pub(super) price_in_per_mtok: Option<Spanned<f64>>,
    pub(super) price_out_per_mtok: Option<Spanned<f64>>,
    pub(super) max_tokens: Option<Spanned<u32>>,
    pub(super) count_tokens: Option<Spanned<String>>,
    pub(super) env: Option<Spanned<Vec<String>>>,
}

#[derive(Debug)]
pub(super) enum RawSeat {
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
