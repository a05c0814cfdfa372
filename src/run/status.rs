//! Runs read back from the ledger: which entries belong to which run (by following causal
//! parents to the run's `request`), how each run stands, and which gates hold it (the gate
//! projection itself is [`crate::gate`]). Pure: the caller hands in the entries and a way to
//! read bodies.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{GatePolicy, Verdict, plan_from_payload};
use crate::ledger::{Entry, kind};
use crate::plan::CompiledPlan;
use crate::report::outcome::{Fold, RunExit};

pub(crate) use crate::gate::{Admission, PendingGate, admission};

/// How a run stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunState {
    /// It has an answer.
    Answered,
    /// The budget (`--max-model-calls`, `--max-seconds`) stopped it; resumable with a fresh
    /// budget.
    StoppedOnBudget,
    /// A spend ceiling stopped it (its `budget` entry names the ceiling); resumable with a
    /// fresh allowance.
    StoppedOnCeiling,
    /// A gate waits (or was decided and the run not yet resumed).
    Paused {
        /// The wave it waits before (0-based).
        wave: u64,
    },
    /// A gate was rejected: over.
    Rejected {
        /// The wave whose gate was rejected.
        wave: u64,
    },
    /// Planning or synthesis failed; resumable (it tries that stage again).
    Failed {
        /// `plan` or `synthesis`.
        stage: String,
        /// Why, as witnessed.
        reason: String,
    },
    /// No ending was witnessed: killed or still running.
    Interrupted,
    /// An operator's halt or a signal stopped it (`halted`); resumable.
    Halted {
        /// Who halted it.
        by: String,
        /// Why.
        reason: String,
    },
}

impl RunState {
    /// A stable name: `answered`, `stopped_on_budget`, `stopped_on_ceiling`, `paused`,
    /// `rejected`, `failed`, `interrupted`, `halted` (the first three as the exit table names
    /// exits 0, 3 and 4). `runs` shows [`RunInfo::label`], the outcome table's name.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            RunState::Answered => "answered",
            RunState::StoppedOnBudget => "stopped_on_budget",
            RunState::StoppedOnCeiling => "stopped_on_ceiling",
            RunState::Paused { .. } => "paused",
            RunState::Rejected { .. } => "rejected",
            RunState::Failed { .. } => "failed",
            RunState::Interrupted => "interrupted",
            RunState::Halted { .. } => "halted",
        }
    }

    /// Whether `git forum resume` can continue it.
    pub(crate) fn resumable(&self) -> bool {
        !matches!(self, RunState::Answered | RunState::Rejected { .. })
    }
}

/// A task's latest witnessed result.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ResultInfo {
    /// What the task printed.
    pub(crate) output: String,
    /// Whether the executor answered.
    pub(crate) ok: bool,
    /// The model that answered.
    pub(crate) model: Option<String>,
    /// The result entry.
    pub(crate) seq: u64,
}

/// One run as the ledger tells it.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// The seq of the run's `request` entry (the run's id).
    pub(crate) request_seq: u64,
    /// The request text.
    pub(crate) request: String,
    /// How the run stands.
    pub state: RunState,
    /// The latest plan with its tasks, and that entry's seq.
    pub(crate) plan: Option<CompiledPlan>,
    /// The seq of the latest `plan` entry.
    pub(crate) plan_seq: Option<u64>,
    /// The run's first plan entry: the key of its gates.
    pub(crate) run_seq: Option<u64>,
    /// The gates the run was submitted with (its request's `gates` record).
    pub(crate) gates: GatePolicy,
    /// Each task's latest result.
    pub(crate) results: BTreeMap<String, ResultInfo>,
    /// Each task's latest verdict.
    pub(crate) verdicts: BTreeMap<String, Verdict>,
    /// The latest answer (seq, text): a revised answer when one was accepted.
    pub answer: Option<(u64, String)>,
    /// Every entry of the run, in seq order.
    pub(crate) entries: Vec<u64>,
    /// How it ended, by the outcome table (`None`: interrupted, or stopped on an error).
    pub(crate) outcome: Option<RunExit>,
}

impl RunInfo {
    /// The label every surface gives the run: its outcome's name in the table
    /// ([`crate::report::outcome::TABLE`]), else `error` for a run whose planning or synthesis
    /// failed (`run_stopped`; the command exited 1) or `interrupted` for one with no ending
    /// witnessed (killed, or still running).
    pub(crate) fn label(&self) -> &'static str {
        match (self.outcome, &self.state) {
            (Some(o), _) => o.name(),
            (None, RunState::Failed { .. }) => "error",
            (None, state) => state.as_str(),
        }
    }
}

/// The run (request seq) each entry belongs to (a pure projection; it lives in the report).
pub(crate) use crate::report::run_roots as roots;

/// A run as its request entry (seq `r`, body `body`) starts it: interrupted until more is read.
fn run_started(r: u64, body: Option<&Value>) -> RunInfo {
    let text = body
        .and_then(|b| b.get("text"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    RunInfo {
        request_seq: r,
        request: text,
        state: RunState::Interrupted,
        plan: None,
        plan_seq: None,
        run_seq: None,
        gates: GatePolicy::from_record(body.and_then(|b| b.get("gates"))),
        results: BTreeMap::new(),
        verdicts: BTreeMap::new(),
        answer: None,
        entries: vec![r],
        outcome: None,
    }
}

fn str_field(b: &Value, k: &str) -> Option<String> {
    b.get(k).and_then(Value::as_str).map(str::to_string)
}

/// A task's result from its `result` entry's body.
fn result_of(b: &Value, seq: u64) -> ResultInfo {
    ResultInfo {
        output: str_field(b, "output").unwrap_or_default(),
        ok: b.get("ok") == Some(&Value::Bool(true)),
        model: str_field(b, "model"),
        seq,
    }
}

/// A task's verdict from its `verdict` entry's body (no decision: `pass` when ok, else
/// `escalate`).
fn verdict_of(b: &Value) -> Verdict {
    let ok = b.get("ok") == Some(&Value::Bool(true));
    let decision = str_field(b, "decision")
        .unwrap_or_else(|| if ok { "pass".into() } else { "escalate".into() });
    Verdict {
        decision,
        score: b.get("score").and_then(Value::as_f64).unwrap_or(0.0),
        reason: str_field(b, "reason").unwrap_or_default(),
        model: str_field(b, "model"),
    }
}

/// The state a run's `budget` entry (body `b`) ends it in once its stop answer is witnessed:
/// a spend ceiling's stop names it (`ceiling`); a call or seconds budget's does not.
fn budget_stop(b: &Value) -> RunState {
    if b.get("ceiling").is_some_and(|c| !c.is_null()) {
        RunState::StoppedOnCeiling
    } else {
        RunState::StoppedOnBudget
    }
}

/// Every run in the ledger, oldest first.
pub fn runs(entries: &[Entry], mut payload: impl FnMut(&Entry) -> Option<Value>) -> Vec<RunInfo> {
    let root = roots(entries);
    let mut out: BTreeMap<u64, RunInfo> = BTreeMap::new();
    // A run's `budget` entry not yet followed by its stop answer: the state that answer ends in.
    let mut budget_pending: BTreeMap<u64, RunState> = BTreeMap::new();
    // Each run's outcome, read by the one fold of the outcome table.
    let mut folds: BTreeMap<u64, Fold> = BTreeMap::new();
    for e in entries {
        let Some(&r) = root.get(&e.seq) else { continue };
        let body = payload(e);
        let canonical = body.as_ref().map(crate::ledger::Value::from_serde);
        folds.entry(r).or_default().push(e, canonical.as_ref());
        if e.seq == r {
            out.insert(r, run_started(r, body.as_ref()));
            continue;
        }
        let Some(info) = out.get_mut(&r) else {
            continue;
        };
        info.entries.push(e.seq);
        let b = body.unwrap_or(Value::Null);
        let str_of = |k: &str| b.get(k).and_then(Value::as_str).map(str::to_string);
        match e.kind.as_str() {
            kind::PLAN => {
                if let Some(p) = plan_from_payload(&b) {
                    info.plan = Some(p);
                    info.plan_seq = Some(e.seq);
                }
                info.run_seq.get_or_insert(e.seq);
            }
            kind::RESUME => info.state = RunState::Interrupted,
            kind::RESULT => {
                if let Some(answer) = str_of("answer") {
                    info.answer = Some((e.seq, answer));
                    info.state = budget_pending.remove(&r).unwrap_or(RunState::Answered);
                } else if let Some(id) = str_of("id") {
                    info.results.insert(id, result_of(&b, e.seq));
                }
            }
            kind::VERDICT => {
                if let Some(id) = str_of("id") {
                    info.verdicts.insert(id, verdict_of(&b));
                }
            }
            kind::BUDGET => {
                budget_pending.insert(r, budget_stop(&b));
            }
            kind::GATE_PENDING => {
                info.state = RunState::Paused {
                    wave: b.get("wave").and_then(Value::as_u64).unwrap_or(0),
                };
            }
            kind::GATE_STOPPED => {
                info.state = RunState::Rejected {
                    wave: b.get("wave").and_then(Value::as_u64).unwrap_or(0),
                };
            }
            kind::HALTED => {
                info.state = RunState::Halted {
                    by: str_of("by").unwrap_or_default(),
                    reason: str_of("reason").unwrap_or_default(),
                };
            }
            kind::RUN_STOPPED => {
                info.state = RunState::Failed {
                    stage: str_of("stage").unwrap_or_default(),
                    reason: str_of("reason").unwrap_or_default(),
                };
            }
            _ => {}
        }
    }
    for (r, info) in out.iter_mut() {
        info.outcome = folds.get(r).and_then(Fold::outcome);
    }
    out.into_values().collect()
}

/// The gates that hold a run: the ones it was submitted with, and any wave whose gate was
/// raised for it (a ledger written before gates were recorded). `gates` are the run's gate
/// entries by wave (see [`gate_entries`](crate::gate::gate_entries)).
pub(crate) fn held_gates(run: &RunInfo, gates: &BTreeMap<u64, Vec<(Entry, Value)>>) -> GatePolicy {
    let mut policy = run.gates.clone();
    for (wave, list) in gates {
        if list.iter().any(|(e, _)| e.kind == kind::GATE_PENDING) {
            policy.waves.insert(*wave as usize);
        }
    }
    policy
}

/// The first gated wave of `plan` that may not simply run now, with what its gate says
/// (never [`Admission::Run`]); `None` when every gated wave is decided to run.
pub(crate) fn first_held(
    plan: &CompiledPlan,
    policy: &GatePolicy,
    gates: &BTreeMap<u64, Vec<(Entry, Value)>>,
    now: f64,
) -> Option<(usize, Admission)> {
    for (i, wave) in plan.waves.iter().enumerate() {
        if !policy.waves.contains(&i) {
            continue;
        }
        let list = gates.get(&(i as u64)).map_or(&[][..], Vec::as_slice);
        match admission(list, wave, now) {
            Admission::Run { .. } => continue,
            other => return Some((i, other)),
        }
    }
    None
}

/// Every gate that currently resolves to pending (the latest `gate_pending` of each key),
/// with the run each belongs to.
pub fn pending_gates(
    entries: &[Entry],
    payload: impl FnMut(&Entry) -> Option<Value>,
) -> Vec<PendingGate> {
    crate::gate::pending_gates(entries, payload, &roots(entries))
}
