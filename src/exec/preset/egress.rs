//! A confined agent's way out (`crate::egress`), set up for one call: the metering forwarder
//! in front of the agent's model endpoint and the proxy that admits that endpoint alone, both
//! on Unix sockets in the task's private state folder (which the sandbox binds), and the bridge
//! that makes them loopback ports inside the sandbox's own network namespace.
//!
//! The agent is pointed at the metered endpoint through its base-URL variable
//! (`ANTHROPIC_BASE_URL` for Claude Code, `OPENAI_BASE_URL` for Codex, `OPENAI_API_BASE` for
//! aider), and at the proxy through `HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY` for anything else,
//! where only the endpoint's own host and port (plus `--sandbox-allow-host`) are admitted.

use std::sync::{Arc, Mutex};

use crate::egress::{
    Allow, CeilingHit, Ceilings, Counts, METER_PORT, Meter, MeterConfig, MeterReport, PROXY_PORT,
    Prices, Proxy, ProxyConfig,
};
use crate::exec::endpoint::{Origin, Policy};

use super::Preset;

/// The default endpoints, when the user's environment names none.
const ANTHROPIC: &str = "https://api.anthropic.com";
const OPENAI: &str = "https://api.openai.com/v1";

/// The proxy and meter of one call, and what the agent is told.
pub(crate) struct Egress {
    /// The short private folder of the two sockets (a Unix socket's path is limited to 108
    /// bytes), removed when the call ends.
    _dir: tempfile::TempDir,
    proxy: Proxy,
    meter: Meter,
    /// The bridge's `--listen` arguments.
    pub(crate) listens: Vec<String>,
    /// The variables that point the agent at them.
    pub(crate) vars: Vec<(String, String)>,
    /// The ceiling the meter reached, if it did.
    hit: Arc<Mutex<Option<CeilingHit>>>,
}

/// What one call's egress saw.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) meter: MeterReport,
    pub(crate) proxy: Counts,
    pub(crate) hit: Option<CeilingHit>,
}

/// The variable naming `preset`'s endpoint and the endpoint it names (or the vendor's).
fn endpoint(preset: Preset, var: &dyn Fn(&str) -> Option<String>) -> (&'static str, String) {
    let named = |k: &str| var(k).filter(|v| !v.trim().is_empty());
    match preset {
        Preset::Claude => (
            "ANTHROPIC_BASE_URL",
            named("ANTHROPIC_BASE_URL").unwrap_or_else(|| ANTHROPIC.into()),
        ),
        Preset::Codex => (
            "OPENAI_BASE_URL",
            named("OPENAI_BASE_URL").unwrap_or_else(|| OPENAI.into()),
        ),
        Preset::Aider => (
            "OPENAI_API_BASE",
            named("OPENAI_API_BASE")
                .or_else(|| named("OPENAI_BASE_URL"))
                .unwrap_or_else(|| OPENAI.into()),
        ),
    }
}

/// Starts the meter and the proxy for one call of `preset`, under `ceilings`, pricing each
/// answer's usage at `prices` (the seat's; needed for a dollar ceiling); `allow` adds hosts
/// (`--sandbox-allow-host`). `on_hit` is told once when a ceiling is reached (the caller stops
/// the agent's process tree).
pub(crate) fn start(
    preset: Preset,
    allow: &[Allow],
    ceilings: Ceilings,
    prices: Option<Prices>,
    on_hit: Arc<dyn Fn() + Send + Sync>,
) -> std::io::Result<Egress> {
    let invalid = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, m);
    let (var, base) = endpoint(preset, &|k| std::env::var(k).ok());
    let url = url::Url::parse(&base).map_err(|e| invalid(format!("{var}={base}: {e}")))?;
    // The meter forwards `/PATH` to the origin's `/PATH`; the agent keeps the endpoint's path.
    let mut origin = url.clone();
    origin.set_path("");
    origin.set_query(None);
    let path = url.path().trim_end_matches('/').to_string();
    // The user's own environment names the endpoint: as trusted as a URL typed on the command
    // line (a loopback model is the user's explicit choice).
    let policy = Policy::strict(Origin::CommandLine);
    let hit: Arc<Mutex<Option<CeilingHit>>> = Arc::new(Mutex::new(None));
    let mut config = MeterConfig::new(origin.clone(), policy);
    config.ceilings = ceilings;
    config.prices = prices;
    {
        let hit = Arc::clone(&hit);
        config.on_ceiling = Some(Arc::new(move |h: &CeilingHit| {
            *hit.lock().unwrap_or_else(|p| p.into_inner()) = Some(h.clone());
            on_hit();
        }));
    }
    let dir = crate::scratch::dir("git-forum-egress-")?;
    let meter_sock = dir.path().join("meter.sock");
    let proxy_sock = dir.path().join("proxy.sock");
    let meter = Meter::start(&meter_sock, config)?;
    let mut allowed = vec![Allow::from_url(&url).map_err(|e| invalid(e.to_string()))?];
    allowed.extend(allow.iter().cloned());
    let proxy = Proxy::start(&proxy_sock, ProxyConfig::new(allowed, policy))?;
    let proxy_url = format!("http://127.0.0.1:{PROXY_PORT}");
    let mut vars: Vec<(String, String)> = Vec::new();
    for k in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ] {
        vars.push((k.into(), proxy_url.clone()));
    }
    for k in ["NO_PROXY", "no_proxy"] {
        vars.push((k.into(), "127.0.0.1,localhost,::1".into()));
    }
    vars.push((var.into(), format!("http://127.0.0.1:{METER_PORT}{path}")));
    if preset == Preset::Codex {
        // Codex reads its endpoint from its provider entry, written from this variable.
        vars.push((
            "OPENAI_BASE_URL".into(),
            format!("http://127.0.0.1:{METER_PORT}{path}"),
        ));
    }
    Ok(Egress {
        listens: vec![
            format!("127.0.0.1:{PROXY_PORT}={}", proxy_sock.display()),
            format!("127.0.0.1:{METER_PORT}={}", meter_sock.display()),
        ],
        vars,
        _dir: dir,
        proxy,
        meter,
        hit,
    })
}

impl Seen {
    /// What the meter counted, for the run's spend.
    pub(crate) fn metered(&self) -> crate::exec::command::Metered {
        let m = &self.meter;
        crate::exec::command::Metered {
            input_tokens: m.input_tokens,
            output_tokens: m.output_tokens,
            seen: m.requests.iter().any(|r| r.usage_seen),
            ceiling: self.hit.as_ref().map(|h| h.ceiling),
        }
    }

    /// The record of it: the tokens and requests the meter counted (and any it refused, with
    /// the overshoot past a ceiling), their cost at the seat's prices, and the connections
    /// the proxy refused, per host.
    pub(crate) fn payload(&self) -> serde_json::Value {
        let m = &self.meter;
        let mut v = serde_json::json!({
            "metered": {
                "requests": m.requests.len(),
                "input_tokens": m.input_tokens,
                "output_tokens": m.output_tokens,
                "refused": m.refused,
                "overshoot_tokens": m.overshoot_tokens,
                // Whether any answer reported usage: the run is charged the count only then.
                "usage_seen": m.requests.iter().any(|r| r.usage_seen),
            },
            "refused_connections": self.proxy.refused,
        });
        if let Some(c) = m.cost_usd {
            v["metered"]["cost_usd"] = serde_json::json!(c);
        }
        if let Some(c) = m.overshoot_cost_usd {
            v["metered"]["overshoot_cost_usd"] = serde_json::json!(c);
        }
        if let Some(h) = &self.hit {
            v["metered"]["ceiling"] = serde_json::json!(h.ceiling);
            // What the agent was allowed when it started: the run's ceilings less what was
            // spent and reserved before it.
            if let Some(t) = m.ceilings.max_tokens {
                v["metered"]["max_tokens"] = serde_json::json!(t);
            }
            if let Some(c) = m.ceilings.max_cost_usd {
                v["metered"]["max_cost_usd"] = serde_json::json!(c);
            }
        }
        v
    }
}

impl Egress {
    /// Stops both and says what they saw.
    pub(crate) fn finish(self) -> Seen {
        let meter = self.meter.stop();
        let proxy = self.proxy.stop();
        let hit = self.hit.lock().unwrap_or_else(|p| p.into_inner()).clone();
        Seen { meter, proxy, hit }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_agent_is_metered_at_its_own_variable() {
        let none = |_: &str| None;
        assert_eq!(
            endpoint(Preset::Claude, &none),
            ("ANTHROPIC_BASE_URL", ANTHROPIC.into())
        );
        assert_eq!(endpoint(Preset::Codex, &none).1, OPENAI);
        let set = |k: &str| (k == "OPENAI_BASE_URL").then(|| "http://127.0.0.1:9/v1".to_string());
        assert_eq!(
            endpoint(Preset::Aider, &set),
            ("OPENAI_API_BASE", "http://127.0.0.1:9/v1".into())
        );
    }
}
