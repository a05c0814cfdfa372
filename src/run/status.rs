//! Runs read back from the ledger: which entries belong to which run (by following causal
//! parents to the run's `request`), how each run stands, and its gates. Pure: the caller
//! hands in the entries and a way to read bodies.

use std::collections::BTreeMap;

use serde_json::Value as J;

use super::{GatePolicy, Verdict, plan_from_payload};
use crate::ledger::Entry;
use crate::plan::CompiledPlan;

/// Entry kinds that take part in a gate's resolution.
pub const GATE_KINDS: [&str; 6] = [
    "gate_pending",
    "gate_approved",
    "gate_edited",
    "gate_rejected",
    "gate_expired",
    "gate_stopped",
];

/// How a run stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunState {
    /// It has an answer.
    Answered,
    /// The budget stopped it; resumable with a fresh budget.
    StoppedOnBudget,
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
}

impl RunState {
    /// A stable name: `answered`, `stopped_on_budget`, `paused`, `rejected`, `failed`, `interrupted`.
    pub fn as_str(&self) -> &'static str {
        match self {
            RunState::Answered => "answered",
            RunState::StoppedOnBudget => "stopped_on_budget",
            RunState::Paused { .. } => "paused",
            RunState::Rejected { .. } => "rejected",
            RunState::Failed { .. } => "failed",
            RunState::Interrupted => "interrupted",
        }
    }

    /// Whether `git forum resume` can continue it.
    pub fn resumable(&self) -> bool {
        !matches!(self, RunState::Answered | RunState::Rejected { .. })
    }
}

/// A task's latest witnessed result.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultInfo {
    /// What the task printed.
    pub output: String,
    /// Whether the executor answered.
    pub ok: bool,
    /// The model that answered.
    pub model: Option<String>,
    /// The result entry.
    pub seq: u64,
}

/// One run as the ledger tells it.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// The seq of the run's `request` entry (the run's id).
    pub request_seq: u64,
    /// The request text.
    pub request: String,
    /// How the run stands.
    pub state: RunState,
    /// The latest plan with its tasks, and that entry's seq.
    pub plan: Option<CompiledPlan>,
    /// The seq of the latest `plan` entry.
    pub plan_seq: Option<u64>,
    /// The run's first plan entry: the key of its gates.
    pub run_seq: Option<u64>,
    /// The gates the run was submitted with (its request's `gates` record).
    pub gates: GatePolicy,
    /// Each task's latest result.
    pub results: BTreeMap<String, ResultInfo>,
    /// Each task's latest verdict.
    pub verdicts: BTreeMap<String, Verdict>,
    /// The latest answer (seq, text): a revised answer when one was accepted.
    pub answer: Option<(u64, String)>,
    /// Every entry of the run, in seq order.
    pub entries: Vec<u64>,
}

/// The run (request seq) each entry belongs to (a pure projection; it lives in the report).
pub use crate::report::run_roots as roots;

/// Every run in the ledger, oldest first.
pub fn runs(entries: &[Entry], mut payload: impl FnMut(&Entry) -> Option<J>) -> Vec<RunInfo> {
    let root = roots(entries);
    let mut out: BTreeMap<u64, RunInfo> = BTreeMap::new();
    let mut budget_pending: BTreeMap<u64, bool> = BTreeMap::new();
    for e in entries {
        let Some(&r) = root.get(&e.seq) else { continue };
        let body = payload(e);
        if e.seq == r {
            let text = body
                .as_ref()
                .and_then(|b| b.get("text"))
                .and_then(J::as_str)
                .unwrap_or("")
                .to_string();
            let gates = GatePolicy::from_record(body.as_ref().and_then(|b| b.get("gates")));
            out.insert(
                r,
                RunInfo {
                    request_seq: r,
                    request: text,
                    state: RunState::Interrupted,
                    plan: None,
                    plan_seq: None,
                    run_seq: None,
                    gates,
                    results: BTreeMap::new(),
                    verdicts: BTreeMap::new(),
                    answer: None,
                    entries: vec![e.seq],
                },
            );
            continue;
        }
        let Some(info) = out.get_mut(&r) else {
            continue;
        };
        info.entries.push(e.seq);
        let b = body.unwrap_or(J::Null);
        let str_of = |k: &str| b.get(k).and_then(J::as_str).map(str::to_string);
        match e.kind.as_str() {
            "plan" => {
                if let Some(p) = plan_from_payload(&b) {
                    info.plan = Some(p);
                    info.plan_seq = Some(e.seq);
                }
                info.run_seq.get_or_insert(e.seq);
            }
            "resume" => info.state = RunState::Interrupted,
            "result" => {
                if let Some(answer) = str_of("answer") {
                    info.answer = Some((e.seq, answer));
                    info.state = if budget_pending.remove(&r).unwrap_or(false) {
                        RunState::StoppedOnBudget
                    } else {
                        RunState::Answered
                    };
                } else if let Some(id) = str_of("id") {
                    info.results.insert(
                        id,
                        ResultInfo {
                            output: str_of("output").unwrap_or_default(),
                            ok: b.get("ok") == Some(&J::Bool(true)),
                            model: str_of("model"),
                            seq: e.seq,
                        },
                    );
                }
            }
            "verdict" => {
                if let Some(id) = str_of("id") {
                    let ok = b.get("ok") == Some(&J::Bool(true));
                    let decision = str_of("decision")
                        .unwrap_or_else(|| if ok { "pass".into() } else { "escalate".into() });
                    info.verdicts.insert(
                        id,
                        Verdict {
                            decision,
                            score: b.get("score").and_then(J::as_f64).unwrap_or(0.0),
                            reason: str_of("reason").unwrap_or_default(),
                            model: str_of("model"),
                        },
                    );
                }
            }
            "budget" => {
                budget_pending.insert(r, true);
            }
            "gate_pending" => {
                info.state = RunState::Paused {
                    wave: b.get("wave").and_then(J::as_u64).unwrap_or(0),
                };
            }
            "gate_stopped" => {
                info.state = RunState::Rejected {
                    wave: b.get("wave").and_then(J::as_u64).unwrap_or(0),
                };
            }
            "run_stopped" => {
                info.state = RunState::Failed {
                    stage: str_of("stage").unwrap_or_default(),
                    reason: str_of("reason").unwrap_or_default(),
                };
            }
            _ => {}
        }
    }
    out.into_values().collect()
}

/// A gate's `(run_seq, wave)` key, when its payload has one.
pub fn gate_key(p: &J) -> Option<(u64, u64)> {
    Some((p.get("run_seq")?.as_u64()?, p.get("wave")?.as_u64()?))
}

/// Where a gate stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateState {
    /// Never asked.
    None,
    /// Asked, not decided.
    Pending,
    /// Approved: the wave runs.
    Approved,
    /// Approved with rewritten instructions.
    Edited,
    /// Rejected: the run stops.
    Rejected,
}

impl GateState {
    /// A stable name: `none`, `pending`, `approved`, `edited`, `rejected`.
    pub fn as_str(self) -> &'static str {
        match self {
            GateState::None => "none",
            GateState::Pending => "pending",
            GateState::Approved => "approved",
            GateState::Edited => "edited",
            GateState::Rejected => "rejected",
        }
    }
}

/// The resolution of one gate from its entries (all of one key): the latest decision wins
/// (an expiry counts as its `decision`); with none, pending if it was asked.
pub fn gate_resolution(gates: &[(Entry, J)]) -> GateState {
    let mut best: Option<(u64, GateState)> = None;
    let mut asked = false;
    for (e, p) in gates {
        let state = match e.kind.as_str() {
            "gate_pending" => {
                asked = true;
                continue;
            }
            "gate_approved" => GateState::Approved,
            "gate_edited" => GateState::Edited,
            "gate_rejected" => GateState::Rejected,
            "gate_expired" => match p.get("decision").and_then(J::as_str) {
                Some("approved") => GateState::Approved,
                _ => GateState::Rejected,
            },
            _ => continue,
        };
        if best.is_none_or(|(s, _)| e.seq > s) {
            best = Some((e.seq, state));
        }
    }
    match best {
        Some((_, s)) => s,
        None if asked => GateState::Pending,
        None => GateState::None,
    }
}

/// Every gate entry of the ledger with its body, by key: run_seq, then wave.
pub fn gate_entries(
    entries: &[Entry],
    mut payload: impl FnMut(&Entry) -> Option<J>,
) -> BTreeMap<u64, BTreeMap<u64, Vec<(Entry, J)>>> {
    let mut out: BTreeMap<u64, BTreeMap<u64, Vec<(Entry, J)>>> = BTreeMap::new();
    for e in entries {
        if GATE_KINDS.contains(&e.kind.as_str())
            && let Some(p) = payload(e)
            && let Some((run_seq, wave)) = gate_key(&p)
        {
            out.entry(run_seq)
                .or_default()
                .entry(wave)
                .or_default()
                .push((e.clone(), p));
        }
    }
    out
}

/// What a gated wave may do now.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// No gate was raised yet: raise it, and wait.
    Raise,
    /// Raised and undecided: the wave waits for a decision.
    Wait {
        /// The `gate_pending` entry.
        pending_seq: u64,
    },
    /// Raised, undecided, and its deadline has passed: its expiry decision applies once it is
    /// witnessed (`gate_expired`); then ask again.
    Expire {
        /// The `gate_pending` entry.
        pending_seq: u64,
        /// `approved` or `rejected`.
        decision: &'static str,
        /// The deadline that passed.
        deadline: f64,
        /// The pending entry's `on_expiry`, as written.
        on_expiry: Option<String>,
    },
    /// Approved or edited: the wave runs, with these instruction rewrites (task id → text).
    Run {
        /// The latest edit's rewrites of this wave's tasks (none when approved).
        edits: BTreeMap<String, String>,
    },
    /// Rejected (by a person or by expiry): the wave never runs and the run ends.
    Stop {
        /// What the stop follows from: the first rejection, else the first expiry.
        parent: Option<u64>,
    },
}

/// What a gated wave may do now, from the entries of its gate (one key) and the clock: the
/// latest decision wins (an expiry counts as its decision, a human decision always wins over
/// a deadline that passed after it); an undecided gate past its pending entry's `deadline`
/// takes its `on_expiry` (reject unless it says approve). `tasks` are the wave's ids: edits
/// naming other tasks are ignored.
pub fn admission(gates: &[(Entry, J)], tasks: &[String], now: f64) -> Admission {
    let pending = gates.iter().rev().find(|(e, _)| e.kind == "gate_pending");
    match gate_resolution(gates) {
        GateState::None => Admission::Raise,
        GateState::Pending => {
            let Some((e, p)) = pending else {
                return Admission::Raise;
            };
            match p.get("deadline").and_then(J::as_f64) {
                Some(deadline) if now >= deadline => {
                    let on_expiry = p.get("on_expiry").and_then(J::as_str).map(str::to_string);
                    Admission::Expire {
                        pending_seq: e.seq,
                        decision: if on_expiry.as_deref() == Some("approve") {
                            "approved"
                        } else {
                            "rejected"
                        },
                        deadline,
                        on_expiry,
                    }
                }
                _ => Admission::Wait { pending_seq: e.seq },
            }
        }
        GateState::Rejected => Admission::Stop {
            parent: gates
                .iter()
                .find(|(e, _)| e.kind == "gate_rejected")
                .or_else(|| gates.iter().find(|(e, _)| e.kind == "gate_expired"))
                .map(|(e, _)| e.seq),
        },
        GateState::Edited => Admission::Run {
            edits: gates
                .iter()
                .rev()
                .find(|(e, _)| e.kind == "gate_edited")
                .and_then(|(_, p)| p.get("edits").and_then(J::as_object).cloned())
                .unwrap_or_default()
                .into_iter()
                .filter(|(k, _)| tasks.contains(k))
                .map(|(k, v)| (k, v.as_str().map_or_else(|| v.to_string(), str::to_string)))
                .collect(),
        },
        GateState::Approved => Admission::Run {
            edits: BTreeMap::new(),
        },
    }
}

/// The gates that hold a run: the ones it was submitted with, and any wave whose gate was
/// raised for it (a ledger written before gates were recorded). `gates` are the run's gate
/// entries by wave (see [`gate_entries`]).
pub fn held_gates(run: &RunInfo, gates: &BTreeMap<u64, Vec<(Entry, J)>>) -> GatePolicy {
    let mut policy = run.gates.clone();
    for (wave, list) in gates {
        if list.iter().any(|(e, _)| e.kind == "gate_pending") {
            policy.waves.insert(*wave as usize);
        }
    }
    policy
}

/// The first gated wave of `plan` that may not simply run now, with what its gate says
/// (never [`Admission::Run`]); `None` when every gated wave is decided to run.
pub fn first_held(
    plan: &CompiledPlan,
    policy: &GatePolicy,
    gates: &BTreeMap<u64, Vec<(Entry, J)>>,
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

/// A gate waiting for a decision.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingGate {
    /// The `gate_pending` entry.
    pub seq: u64,
    /// The run's first plan entry (the gate's key).
    pub run_seq: u64,
    /// The gated wave (0-based).
    pub wave: u64,
    /// The run's request seq, when the gate belongs to a run.
    pub request_seq: Option<u64>,
    /// The wave's task ids.
    pub tasks: Vec<String>,
    /// What the approver is asked.
    pub question: String,
    /// When the gate expires (seconds since 1970), if it does.
    pub deadline: Option<f64>,
    /// What it becomes then: `approve` or `reject`.
    pub on_expiry: Option<String>,
}

/// Every gate that currently resolves to pending (the latest `gate_pending` of each key).
pub fn pending_gates(
    entries: &[Entry],
    mut payload: impl FnMut(&Entry) -> Option<J>,
) -> Vec<PendingGate> {
    let root = roots(entries);
    let mut by_key: BTreeMap<(u64, u64), Vec<(Entry, J)>> = BTreeMap::new();
    for e in entries {
        if GATE_KINDS.contains(&e.kind.as_str())
            && let Some(p) = payload(e)
            && let Some(k) = gate_key(&p)
        {
            by_key.entry(k).or_default().push((e.clone(), p));
        }
    }
    let mut out = Vec::new();
    for ((run_seq, wave), gates) in by_key {
        if gate_resolution(&gates) != GateState::Pending {
            continue;
        }
        let Some((e, p)) = gates.iter().rev().find(|(e, _)| e.kind == "gate_pending") else {
            continue;
        };
        out.push(PendingGate {
            seq: e.seq,
            run_seq,
            wave,
            request_seq: root.get(&e.seq).copied(),
            tasks: p
                .get("tasks")
                .and_then(J::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            question: p
                .get("question")
                .and_then(J::as_str)
                .unwrap_or("")
                .to_string(),
            deadline: p.get("deadline").and_then(J::as_f64),
            on_expiry: p.get("on_expiry").and_then(J::as_str).map(str::to_string),
        });
    }
    out
}
