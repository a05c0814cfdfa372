//! `runs`: every run in the ledger and how each stands, as one report for every transport.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value as J, json};

use super::Bodies;
use crate::ledger::{Entry, kind};
use crate::run::status::{self, RunState};
use crate::surface::{Report, Result};

/// One run.
#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    /// The seq of its request (the run's id).
    pub request_seq: u64,
    /// The request text.
    pub request: String,
    /// How it stands (`answered`, `paused`, …).
    pub state: &'static str,
    /// What the state says more: `{stage, reason}` of a failed run, `{wave}` of a paused or
    /// rejected one, else null.
    pub detail: J,
    /// The run's first plan entry (the key of its gates).
    pub run_seq: Option<u64>,
    /// How many tasks its latest plan has.
    pub tasks: Option<usize>,
    /// The seq of its answer.
    pub answer_seq: Option<u64>,
    /// How many entries belong to it.
    pub entries: usize,
    /// Task results per model id.
    pub results_per_model: BTreeMap<String, u64>,
    /// The run's projection, for text rendering.
    #[serde(skip)]
    pub info: status::RunInfo,
}

/// The runs of a ledger, oldest first.
#[derive(Debug, Clone, Serialize)]
pub struct Runs {
    pub schema: &'static str,
    pub runs: Vec<RunRow>,
}

impl Report for Runs {
    const SCHEMA: &'static str = "git-forum.runs/1";
}

/// The runs of the ledger `entries` (bodies read through `bodies`).
pub fn runs(entries: &[Entry], bodies: &Bodies<'_>) -> Result<Runs> {
    let infos = status::runs(entries, |e| bodies.get(e));
    bodies.done()?;
    let mut rows = Vec::with_capacity(infos.len());
    for r in infos {
        let mut calls: BTreeMap<String, u64> = BTreeMap::new();
        for e in r.entries.iter().filter_map(|s| entries.get(*s as usize)) {
            if e.kind == kind::RESULT
                && let Some(m) = bodies
                    .get(e)
                    .and_then(|b| b.get("model").and_then(J::as_str).map(str::to_string))
            {
                *calls.entry(m).or_default() += 1;
            }
        }
        let detail = match &r.state {
            RunState::Failed { stage, reason } => json!({"stage": stage, "reason": reason}),
            RunState::Paused { wave } | RunState::Rejected { wave } => json!({"wave": wave}),
            _ => J::Null,
        };
        rows.push(RunRow {
            request_seq: r.request_seq,
            request: r.request.clone(),
            state: r.state.as_str(),
            detail,
            run_seq: r.run_seq,
            tasks: r.plan.as_ref().map(|p| p.tasks.len()),
            answer_seq: r.answer.as_ref().map(|a| a.0),
            entries: r.entries.len(),
            results_per_model: calls,
            info: r,
        });
    }
    bodies.done()?;
    Ok(Runs {
        schema: Runs::SCHEMA,
        runs: rows,
    })
}
