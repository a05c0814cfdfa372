//! The lane vocabulary and the vocabulary gap as operations: `git forum lane check|gaps`,
//! `POST /lane/check|gaps` and the MCP tools `lane_check` and `lane_gaps` run these functions
//! and answer the same reports.
//!
//! A checked route is always witnessed, accepted or not (Forum's `witness_route`): a refusal is
//! a `lane_rejection` entry first and an error second, so the record keeps every claim. The gap
//! ([`crate::route::gap`]) is also checked after every `route` entry git forum witnesses
//! ([`after_route`]), and witnessed once per run of undecided routes.

use std::collections::BTreeSet;

use serde::Serialize;

use super::request::lanes::{LaneCheck, LaneGaps};
use super::{Error, Report, Result};
use crate::ledger::{NewEntry, Storage};
use crate::route::gap;
use crate::route::lanes::{LaneRejection, LaneRoute, check_route};

/// The decision on a route claim and the entry that witnesses it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct LaneReport {
    /// Whether both vocabularies accept the claim.
    pub(crate) accepted: bool,
    /// The entry written: `lane_route` or `lane_rejection`.
    pub(crate) kind: String,
    pub(crate) seq: u64,
    pub(crate) entry_hash: String,
    pub(crate) task: String,
    pub(crate) lane: String,
    pub(crate) domain: Option<String>,
    /// The scopes claimed, sorted.
    pub(crate) scopes: Vec<String>,
    pub(crate) confidence: Option<f64>,
    /// For a refusal: `unknown_lane`, `over_routed` or `unknown_domain`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) violation: Option<String>,
    /// For a refusal: the claimed scopes the lane does not grant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) excess: Option<Vec<String>>,
    /// For a refusal: the scopes the lane grants.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) granted: Option<Vec<String>>,
    /// For a refusal: one line naming the violation, what to do, and the entry written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
}

impl Report for LaneReport {
    const SCHEMA: &'static str = "git-forum.lane-check/1";
}

impl LaneReport {
    /// The refusal of a rejected claim (its entry already written), `None` when accepted.
    pub(crate) fn refusal(&self) -> Option<Error> {
        self.error.as_ref().map(Error::failed)
    }
}

/// Refuses a causal parent that names no entry of `store`.
fn check_parent(store: &dyn Storage, parent: Option<u64>) -> Result<()> {
    let Some(p) = parent else { return Ok(()) };
    let len = store.len()?;
    if p >= len {
        return Err(Error::usage(format!(
            "causal_parent {p} names no entry (the ledger holds {len}); give an existing seq or leave it out"
        )));
    }
    Ok(())
}

/// Checks the claim in `req` against the lane vocabularies and witnesses it at `ts`. A
/// rejection is answered as a report with `accepted: false` (its entry written); its
/// [`LaneReport::refusal`] is the error each transport ends with.
pub(crate) fn check(store: &mut dyn Storage, req: &LaneCheck, ts: f64) -> Result<LaneReport> {
    check_parent(store, req.causal_parent)?;
    let route = LaneRoute {
        task: req.task.clone(),
        lane: req.lane.clone(),
        scopes: req.scopes.iter().cloned().collect::<BTreeSet<_>>(),
        domain: req.domain.clone(),
        confidence: req.confidence,
    };
    let rejection = check_route(&route);
    let new = route.entry(rejection.as_ref(), req.causal_parent.map(|p| p as i64), ts);
    new.validate().map_err(Error::usage)?;
    let e = store.append(new)?;
    let mut r = report(&route, rejection.as_ref(), e.seq, e.entry_hash, e.kind);
    r.error =
        rejection.map(|x| format!("{} (witnessed as lane_rejection seq {})", x.line(), e.seq));
    Ok(r)
}

fn report(
    route: &LaneRoute,
    rejection: Option<&LaneRejection>,
    seq: u64,
    entry_hash: String,
    kind: String,
) -> LaneReport {
    LaneReport {
        accepted: rejection.is_none(),
        kind,
        seq,
        entry_hash,
        task: route.task.clone(),
        lane: route.lane.clone(),
        domain: route.domain.clone(),
        scopes: route.scopes.iter().cloned().collect(),
        confidence: route.confidence,
        violation: rejection.map(|r| r.violation.as_str().to_string()),
        excess: rejection.map(|r| r.excess.clone()),
        granted: rejection.map(|r| r.granted.clone()),
        error: None,
    }
}

/// The ledger's trailing run of undecided routes, and its gap.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct GapReport {
    /// The threshold applied.
    pub(crate) min_escalations: u64,
    /// How many undecided routes the trailing run holds (0 when the last route decided).
    pub(crate) consecutive_escalations: u64,
    /// The run's first and last route, and the highest confidence in it (absent for no run).
    pub(crate) first_seq: Option<u64>,
    pub(crate) last_seq: Option<u64>,
    pub(crate) confidence_ceiling: Option<f64>,
    /// Whether the run reaches the threshold.
    pub(crate) gap: bool,
    /// The name given to the run's pattern.
    pub(crate) domain_signal: Option<String>,
    /// The `vocabulary_gap` entry of this run, when one is witnessed (now or before).
    pub(crate) witnessed: Option<u64>,
    /// Whether this call wrote it.
    pub(crate) recorded: bool,
}

impl Report for GapReport {
    const SCHEMA: &'static str = "git-forum.lane-gaps/1";
}

/// Reports the trailing run of `store` under `req` (the threshold defaulting to
/// `default_min`, the policy's), and with `record` witnesses its gap at `ts` unless this run
/// already has one.
pub(crate) fn gaps(
    store: &mut dyn Storage,
    req: &LaneGaps,
    default_min: u64,
    ts: f64,
) -> Result<GapReport> {
    let min = match req.min_escalations {
        Some(n) => gap::check_threshold(n)
            .map_err(|e| Error::usage(format!("field \"min_escalations\": {e}")))?,
        None => default_min,
    };
    let t = gap::trailing_run(store)?;
    let signal = req
        .domain_signal
        .clone()
        .unwrap_or_else(|| gap::domain_signal(&t.run));
    let found = gap::derive_gap(&t.run, &signal, min);
    let mut witnessed = t.witnessed;
    let mut recorded = false;
    if req.record
        && witnessed.is_none()
        && let Some(g) = &found
    {
        witnessed = Some(store.append(g.entry(ts))?.seq);
        recorded = true;
    }
    Ok(GapReport {
        min_escalations: min,
        consecutive_escalations: t.run.len() as u64,
        first_seq: t.run.first().map(|o| o.seq),
        last_seq: t.run.last().map(|o| o.seq),
        confidence_ceiling: t.run.iter().map(|o| o.confidence).reduce(f64::max),
        gap: found.is_some(),
        domain_signal: (!t.run.is_empty()).then_some(signal),
        witnessed,
        recorded,
    })
}

/// After a `route` entry is witnessed: witnesses the `vocabulary_gap` its trailing run of
/// undecided routes makes once the run reaches `min` (once per run). Returns the new entry's
/// seq, if one was written.
pub(crate) fn after_route(store: &mut dyn Storage, min: u64, ts: f64) -> Result<Option<u64>> {
    let Some(g) = gap::due_gap(store, min)? else {
        return Ok(None);
    };
    let new: NewEntry = g.entry(ts);
    Ok(Some(store.append(new)?.seq))
}

/// A number as Python prints a float (`0.35`, `1.0`), for the text renderings.
pub(crate) fn float_text(x: f64) -> String {
    crate::ledger::canonical::python_float_json(x)
}
