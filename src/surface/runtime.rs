//! `runtime inspect`: which executor would run each role, tier and seat, and what would stop a
//! run, as one [`RuntimeReport`] for `git forum runtime inspect --json`, `GET /runtime` and the
//! MCP `forum.runtime.inspect` tool. Runs nothing; the only network use is resolving endpoint
//! names through [`Facts`], to vet their addresses as a run does when it connects.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value as J, json};

use super::Report;
use crate::config::Loaded;
use crate::exec::config::{
    self, ExecutorKind, ExecutorSpec, Facts, SeatChoice, Slot, Unresolved, Via,
};
use crate::exec::endpoint;
use crate::roster::{Roster, Tier};

/// The runtime a run would use, explained.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RuntimeReport {
    /// [`RuntimeReport::SCHEMA`].
    pub(crate) schema: &'static str,
    /// `current`: the runtime in effect for this repository (and flags, or server).
    pub(crate) source: &'static str,
    /// Whether nothing would stop a run.
    pub(crate) ready: bool,
    /// The runtime config file read, if any.
    pub(crate) config: Option<ConfigFile>,
    /// The default executor.
    pub(crate) default: DefaultSlot,
    /// Each tier by name (`cheap`, `capable`, `frontier`).
    pub(crate) tiers: BTreeMap<&'static str, TierRow>,
    /// The worker and orchestrator seats.
    pub(crate) seats: SeatsReport,
    /// The roster the tiers are demanded by.
    pub(crate) roster: RosterSize,
    /// The verification tier a `--work` run would be checked at: the heaviest of the
    /// executors its tasks may land on (`crate::exec::config::verify`), with what it implies.
    pub(crate) verification: J,
    /// Every issue that would stop a run.
    pub(crate) issues: Vec<Issue>,
    /// Loading warnings.
    pub(crate) warnings: Vec<String>,
}

impl Report for RuntimeReport {
    const SCHEMA: &'static str = "git-forum.runtime-inspect/1";
}

/// Where the runtime config came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ConfigFile {
    pub(crate) path: String,
    /// `repository` or `user`: how the file is trusted.
    pub(crate) origin: &'static str,
}

/// How a slot was reached: its name and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ViaRow {
    pub(crate) slot: Option<&'static str>,
    pub(crate) why: String,
}

/// The default executor.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct DefaultSlot {
    /// Whether a default is configured (rather than reached through a fallback).
    pub(crate) configured: bool,
    pub(crate) via: Option<ViaRow>,
    /// The executor's description (kind-specific fields).
    pub(crate) executor: Option<J>,
}

/// One tier.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct TierRow {
    /// `configured`, `fallback` or `missing`.
    pub(crate) status: &'static str,
    /// How a falling-back tier is served.
    pub(crate) fallback: Option<ViaRow>,
    /// The tier's own executor, when configured.
    pub(crate) executor: Option<J>,
    /// Roster lanes of this tier.
    pub(crate) demanded_by: Vec<String>,
    /// False when the worker seat is pinned, so tasks do not use tiers.
    pub(crate) used_for_tasks: bool,
}

/// The two seats.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct SeatsReport {
    pub(crate) worker: SeatRow,
    pub(crate) orchestrator: SeatRow,
}

/// One seat: what it is set to and what it resolves to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct SeatRow {
    pub(crate) seat: &'static str,
    /// `null` (unset), a slot name, or `inline`.
    pub(crate) set: Option<&'static str>,
    pub(crate) via: Option<ViaRow>,
    pub(crate) executor: Option<J>,
    /// Why the seat does not resolve.
    pub(crate) problem: Option<String>,
}

/// The roster's size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RosterSize {
    pub(crate) lanes: usize,
}

/// An issue that would stop a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Issue {
    pub(crate) place: String,
    pub(crate) problem: String,
}

impl std::fmt::Display for Issue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.place, self.problem)
    }
}

fn via_row(via: &Via) -> ViaRow {
    ViaRow {
        slot: via.slot().map(Slot::as_str),
        why: via.explain(),
    }
}

/// An executor's description: kind, model, origin, limits, and the kind's own facts (the
/// program found, the URL and whether it is local, the endpoint verdict, whether the key is set).
pub(crate) fn executor_json(spec: &ExecutorSpec, facts: &dyn Facts) -> J {
    let mut v = json!({
        "kind": spec.kind.name(),
        "model": spec.model(),
        "origin": spec.origin.as_str(),
        "timeout_seconds": spec.timeout_seconds,
        "max_response_bytes": spec.max_response_bytes,
        "describe": spec.describe(),
    });
    let m = v.as_object_mut().expect("object");
    match &spec.kind {
        ExecutorKind::Command { argv, .. } => {
            m.insert("argv".into(), json!(argv));
            m.insert("program_found".into(), json!(facts.program_found(&argv[0])));
        }
        ExecutorKind::Chat { url, .. } => {
            let shown = url::Url::parse(url).map(|u| endpoint::display_url(&u)).ok();
            m.insert("url".into(), json!(shown));
            m.insert("is_local".into(), json!(spec.is_local));
            m.insert("allow_private".into(), json!(spec.allow_private));
        }
        ExecutorKind::Anthropic { .. } => {
            m.insert("url".into(), json!(facts.anthropic_url()));
        }
    }
    if let Some(u) = config::endpoint_of(spec, facts) {
        let verdict = match config::check_endpoint(&u, &spec.policy(), facts) {
            Ok(_) => J::String("allowed".into()),
            Err(r) => J::String(format!("refused: {r}")),
        };
        m.insert("endpoint".into(), verdict);
    }
    m.insert(
        "verification".into(),
        verification_json(&config::verify::of_spec(spec)),
    );
    m.insert("api_key_env".into(), json!(spec.key_env()));
    if let Some(k) = spec.key_env() {
        m.insert("key_set".into(), json!(facts.var_is_set(k)));
    }
    // The variables a program is handed beyond the allowlist (names only).
    let env = spec.passed_env();
    if !env.is_empty() {
        m.insert("env".into(), json!(env));
    }
    v
}

/// A verification tier as JSON: `{tier, verify, gate_every_change, checks_required,
/// judge_intent, implies}` (`implies`: the one line `runtime inspect` prints).
pub(crate) fn verification_json(v: &config::Verification) -> J {
    let mut j = json!(v);
    j["implies"] = json!(v.describe());
    j
}

/// Explains `loaded` against `roster`, asking `facts` about the environment.
pub(crate) fn inspect(loaded: &Loaded, roster: &Roster, facts: &dyn Facts) -> RuntimeReport {
    let rt = &loaded.runtime;
    let issues: Vec<Issue> = config::issues(rt, roster, facts)
        .into_iter()
        .map(|i| Issue {
            place: i.place,
            problem: i.problem,
        })
        .collect();
    let worker_pinned = !matches!(rt.seats.worker, SeatChoice::Unset);
    let default = default_slot(rt, facts);
    let tiers = tier_rows(rt, roster, facts, worker_pinned);
    let orchestrator = seat_row(
        "orchestrator",
        &rt.seats.orchestrator,
        Some(rt.for_control()),
        facts,
    );
    let worker = seat_row(
        "worker",
        &rt.seats.worker,
        worker_pinned.then(|| rt.for_task(roster, "")),
        facts,
    );
    RuntimeReport {
        schema: RuntimeReport::SCHEMA,
        source: "current",
        ready: issues.is_empty(),
        config: loaded.source.as_ref().map(|(p, o)| ConfigFile {
            path: p.display().to_string(),
            origin: o.as_str(),
        }),
        default,
        tiers,
        seats: SeatsReport {
            worker,
            orchestrator,
        },
        roster: RosterSize {
            lanes: roster.len(),
        },
        verification: verification_json(&config::verify::for_run(rt, roster)),
        issues,
        warnings: rt.warnings.clone(),
    }
}

/// The default executor: whether it is configured, and what it resolves to.
fn default_slot(rt: &config::Runtime, facts: &dyn Facts) -> DefaultSlot {
    match rt.effective_default() {
        Some((via, spec)) => DefaultSlot {
            configured: rt.default.is_some(),
            via: Some(via_row(&via)),
            executor: Some(executor_json(spec, facts)),
        },
        None => DefaultSlot {
            configured: false,
            via: None,
            executor: None,
        },
    }
}

/// One row per tier: configured, a fallback or missing, and the roster lanes that demand it.
fn tier_rows(
    rt: &config::Runtime,
    roster: &Roster,
    facts: &dyn Facts,
    worker_pinned: bool,
) -> BTreeMap<&'static str, TierRow> {
    let lanes = |t: Tier| -> Vec<String> {
        roster
            .agents()
            .iter()
            .filter(|a| a.model_tier == t)
            .map(|a| a.name.clone())
            .collect()
    };
    let mut tiers = BTreeMap::new();
    for t in Tier::ALL {
        let (status, fallback) = match rt.for_tier(t) {
            Some((Via::Slot(_), _)) => ("configured", None),
            Some((via, _)) => ("fallback", Some(via_row(&via))),
            None => ("missing", None),
        };
        tiers.insert(
            t.as_str(),
            TierRow {
                status,
                fallback,
                executor: rt.tiers.get(&t).map(|s| executor_json(s, facts)),
                demanded_by: lanes(t),
                used_for_tasks: !worker_pinned,
            },
        );
    }
    tiers
}

/// A seat's row: what it is set to and what that resolves to (or why it does not).
fn seat_row(
    name: &'static str,
    choice: &SeatChoice,
    resolved: Option<Result<(Via, ExecutorSpec), Unresolved>>,
    facts: &dyn Facts,
) -> SeatRow {
    let set = match choice {
        SeatChoice::Unset => None,
        SeatChoice::Slot(s) => Some(s.as_str()),
        SeatChoice::Inline(_) => Some("inline"),
    };
    let (via, executor, problem) = match resolved {
        Some(Ok((via, s))) => (Some(via_row(&via)), Some(executor_json(&s, facts)), None),
        Some(Err(p)) => (None, None, Some(p.to_string())),
        None => (None, None, None),
    };
    SeatRow {
        seat: name,
        set,
        via,
        executor,
        problem,
    }
}
