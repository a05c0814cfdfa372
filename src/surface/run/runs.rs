//! `runs`: every run in the ledger and how each stands, as one report for every transport.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use serde::Serialize;
use serde_json::{Value as J, json};

use super::Bodies;
use crate::ledger::canonical::Value;
use crate::ledger::{Entry, kind};
use crate::report::{spend, work_report};
use crate::run::status::{self, RunState};
use crate::surface::{Report, Result};

/// One run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunRow {
    /// The seq of its request (the run's id).
    pub(crate) request_seq: u64,
    /// The request text.
    pub(crate) request: String,
    /// How it stands: its outcome's name in the outcome table (`answered`,
    /// `nothing_delivered`, `gated`, …), else `error` (its planning or synthesis failed) or
    /// `interrupted` (no ending witnessed).
    pub(crate) state: &'static str,
    /// The exit code of its outcome (null for `error` and `interrupted`).
    pub(crate) exit: Option<u8>,
    /// What the state says more: `{stage, reason}` of a failed run, `{wave}` of a paused or
    /// rejected one, else null.
    pub(crate) detail: J,
    /// The run's first plan entry (the key of its gates).
    pub(crate) run_seq: Option<u64>,
    /// How many tasks its latest plan has.
    pub(crate) tasks: Option<usize>,
    /// The seq of its answer.
    pub(crate) answer_seq: Option<u64>,
    /// How many entries belong to it.
    pub(crate) entries: usize,
    /// Task results per model id.
    pub(crate) results_per_model: BTreeMap<String, u64>,
    /// Tokens (prompt plus completion) its model calls reported: the `usage` of its entries,
    /// summed by the rule of [`crate::report::spend`] that the run room's spend follows.
    pub(crate) tokens: u64,
    /// What those calls cost in dollars, when any was priced (else null).
    pub(crate) cost_usd: Option<f64>,
    /// What a `--work` run changed, checked and shipped (absent for other runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) work: Option<WorkRow>,
    /// The run's projection, for text rendering.
    #[serde(skip)]
    pub(crate) info: status::RunInfo,
}

/// What a `--work` run did in the repository, counted from its `change`, `check` and `ship`
/// entries (each task's latest decision counts).
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub(crate) struct WorkRow {
    /// The run branch (`forum/run-SEQ`), when the run has one: its record says it integrated
    /// a change (or checked the branch), and, where the repository is at hand, the branch
    /// still exists ([`keep_existing_branches`]). Null otherwise.
    pub(crate) branch: Option<String>,
    /// `change` entries with a commit.
    pub(crate) changes: u64,
    /// Files those changes touched, lines added and removed.
    pub(crate) files: u64,
    pub(crate) added: u64,
    pub(crate) removed: u64,
    /// Tasks whose latest change the gate merged (and that did not conflict), blocked, or left
    /// waiting for a person (escalate, undetermined).
    pub(crate) merged: u64,
    /// Files the merged changes touched, lines added and removed (what the branch holds).
    pub(crate) merged_files: u64,
    pub(crate) merged_added: u64,
    pub(crate) merged_removed: u64,
    pub(crate) blocked: u64,
    pub(crate) waiting: u64,
    /// Conflicts witnessed.
    pub(crate) conflicts: u64,
    /// Checks that passed and failed (the run branch's included).
    pub(crate) checks_passed: u64,
    pub(crate) checks_failed: u64,
}

impl WorkRow {
    /// One line: `forum/run-3: 2 merged (3 files, +10 -2), 1 blocked, checks 3/3 passed`, the
    /// files and lines being the merged changes'; `no run branch: ...` for a run without one.
    pub(crate) fn line(&self) -> String {
        let mut parts = vec![format!(
            "{} merged ({} files, +{} -{})",
            self.merged, self.merged_files, self.merged_added, self.merged_removed
        )];
        if self.blocked > 0 {
            parts.push(format!("{} blocked", self.blocked));
        }
        if self.waiting > 0 {
            parts.push(format!("{} waiting for a person", self.waiting));
        }
        if self.conflicts > 0 {
            parts.push(format!("{} conflicts", self.conflicts));
        }
        parts.push(format!(
            "checks {}/{} passed",
            self.checks_passed,
            self.checks_passed + self.checks_failed
        ));
        let branch = self.branch.as_deref().unwrap_or("no run branch");
        format!("{branch}: {}", parts.join(", "))
    }
}

/// The work row of a run whose request body is `request` and whose entries are `seqs`: the
/// counts of [`crate::report::work_report::work`] (one counting rule for `runs`, the room, the
/// summary and the receipt), all zero for a `--work` run that has no `change` yet.
fn work_row(
    request: Option<&J>,
    request_seq: u64,
    seqs: &[u64],
    entries: &[Entry],
    bodies: &Bodies<'_>,
) -> Option<WorkRow> {
    request?.get("work")?;
    let items: Vec<(Entry, Option<Value>)> = seqs
        .iter()
        .filter_map(|s| entries.get(*s as usize))
        .filter(|e| {
            matches!(
                e.kind.as_str(),
                kind::CHANGE | kind::CHECK | kind::SHIP | kind::CONFLICT
            )
        })
        .map(|e| (e.clone(), bodies.get(e).as_ref().map(Value::from_serde)))
        .collect();
    let w = work_report::work(&items).unwrap_or_default();
    let record = request.and_then(|r| r.get("work")).map(Value::from_serde);
    Some(WorkRow {
        branch: w.run_branch(record.as_ref(), Some(request_seq)),
        changes: w.changes,
        files: w.files,
        added: w.added,
        removed: w.removed,
        merged: w.merged,
        merged_files: w.merged_files,
        merged_added: w.merged_added,
        merged_removed: w.merged_removed,
        blocked: w.blocked,
        waiting: w.waiting,
        conflicts: w.conflicts,
        checks_passed: w.checks_passed,
        checks_failed: w.checks_failed,
    })
}

/// The runs of a ledger, oldest first.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Runs {
    pub(crate) schema: &'static str,
    pub(crate) runs: Vec<RunRow>,
}

impl Report for Runs {
    const SCHEMA: &'static str = "git-forum.runs/1";
}

/// Leaves each run's branch only where the repository at `dir` has it: a branch removed
/// (`git forum discard`, `git branch -D`) or never made is not named. A repository git cannot
/// list leaves the branches as the record says.
pub(crate) fn keep_existing_branches(runs: &mut Runs, dir: &Path) {
    let Ok(out) =
        crate::work::git::ok(dir, &["for-each-ref", "--format=%(refname)", "refs/heads/"])
    else {
        return;
    };
    let existing: BTreeSet<&str> = out
        .lines()
        .filter_map(|r| r.strip_prefix("refs/heads/"))
        .collect();
    for w in runs.runs.iter_mut().filter_map(|r| r.work.as_mut()) {
        if w.branch.as_deref().is_some_and(|b| !existing.contains(b)) {
            w.branch = None;
        }
    }
}

/// Tokens and dollars of the entries `seqs`, from the `usage` objects kept by seq: the sums of
/// [`spend::per_model`], totalled over the models in the order the run page totals them.
fn spent(usage: &HashMap<u64, Value>, seqs: impl Iterator<Item = u64>) -> (u64, Option<f64>) {
    let mut models = Vec::new();
    for s in seqs {
        spend::push_usage(&mut models, usage.get(&s));
    }
    let tokens = models.iter().map(spend::ModelSpend::tokens).sum();
    let usd = models
        .iter()
        .filter_map(|m| m.cost_usd)
        .reduce(|a, b| a + b);
    (tokens, usd)
}

/// The runs of the ledger `entries` (bodies read through `bodies`).
pub(crate) fn runs(entries: &[Entry], bodies: &Bodies<'_>) -> Result<Runs> {
    // The `usage` of each entry, kept as the run status reads every body once, so the spend
    // costs no second read of the ledger.
    let mut usage: HashMap<u64, Value> = HashMap::new();
    let infos = status::runs(entries, |e| {
        let b = bodies.get(e);
        if let Some(u) = b
            .as_ref()
            .and_then(|b| b.get("usage"))
            .filter(|u| u.is_object())
        {
            usage.insert(e.seq, Value::from_serde(&json!({ "usage": u })));
        }
        b
    });
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
            RunState::Halted { by, reason } => json!({"by": by, "reason": reason}),
            _ => J::Null,
        };
        let request = entries
            .get(r.request_seq as usize)
            .and_then(|e| bodies.get(e));
        let work = work_row(request.as_ref(), r.request_seq, &r.entries, entries, bodies);
        let seqs = std::iter::once(r.request_seq).chain(r.entries.iter().copied());
        let (tokens, cost_usd) = spent(&usage, seqs);
        rows.push(RunRow {
            request_seq: r.request_seq,
            request: r.request.clone(),
            state: r.label(),
            exit: r.outcome.map(|o| o.code()),
            detail,
            run_seq: r.run_seq,
            tasks: r.plan.as_ref().map(|p| p.tasks.len()),
            answer_seq: r.answer.as_ref().map(|a| a.0),
            entries: r.entries.len(),
            results_per_model: calls,
            tokens,
            cost_usd,
            work,
            info: r,
        });
    }
    bodies.done()?;
    Ok(Runs {
        schema: Runs::SCHEMA,
        runs: rows,
    })
}
