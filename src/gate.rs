//! Gates as types: the three decisions a person can take on a gated wave, where a gate stands
//! once its entries are read, what a gated wave may do now, which gates wait, and the rule for
//! deciding one. Pure: the caller hands in the entries with their bodies, and the clock's
//! reading where a deadline matters.
//!
//! A gate is keyed by `(run_seq, wave)`: the run's first `plan` entry and the 0-based wave it
//! holds. Its entries are `gate_pending` (asked), `gate_approved`, `gate_edited`,
//! `gate_rejected` (decided by a person), `gate_expired` (decided by its deadline) and
//! `gate_stopped` (the run stopped there).

use std::collections::BTreeMap;

use serde_json::{Value as JsonValue, json};

use crate::ledger::canonical::Value;
use crate::ledger::{Entry, NewEntry, kind};

/// Entry kinds that take part in a gate's resolution.
pub(crate) const GATE_KINDS: [&str; 6] = [
    kind::GATE_PENDING,
    kind::GATE_APPROVED,
    kind::GATE_EDITED,
    kind::GATE_REJECTED,
    kind::GATE_EXPIRED,
    kind::GATE_STOPPED,
];

/// What a person decides on a pending gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GateDecision {
    /// Let the wave run as planned.
    Approve,
    /// Let the wave run with rewritten instructions.
    Edit,
    /// Stop the run before the wave.
    Reject,
}

impl GateDecision {
    /// The entry kind that witnesses this decision.
    pub(crate) fn kind(self) -> &'static str {
        match self {
            GateDecision::Approve => kind::GATE_APPROVED,
            GateDecision::Edit => kind::GATE_EDITED,
            GateDecision::Reject => kind::GATE_REJECTED,
        }
    }

    /// The word a decided gate answers with: `approved`, `edited`, `rejected`.
    pub(crate) fn word(self) -> &'static str {
        self.state().as_str()
    }

    /// The decision an entry kind witnesses, if it is one.
    pub(crate) fn from_kind(kind: &str) -> Option<GateDecision> {
        [
            GateDecision::Approve,
            GateDecision::Edit,
            GateDecision::Reject,
        ]
        .into_iter()
        .find(|d| d.kind() == kind)
    }

    /// Where a gate stands once this decision is the latest.
    pub(crate) fn state(self) -> GateState {
        match self {
            GateDecision::Approve => GateState::Approved,
            GateDecision::Edit => GateState::Edited,
            GateDecision::Reject => GateState::Rejected,
        }
    }
}

/// A gate's `(run_seq, wave)` key, when its payload has one.
pub(crate) fn gate_key(p: &JsonValue) -> Option<(u64, u64)> {
    Some((p.get("run_seq")?.as_u64()?, p.get("wave")?.as_u64()?))
}

/// Where a gate stands. An expiry counts as the decision it applied (approved or rejected).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GateState {
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
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            GateState::None => "none",
            GateState::Pending => "pending",
            GateState::Approved => "approved",
            GateState::Edited => "edited",
            GateState::Rejected => "rejected",
        }
    }
}

/// One entry of a gate as its resolution reads it: its seq, its kind, and for a
/// `gate_expired`, the `decision` it applied when that is a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark<'a> {
    /// The entry's seq.
    pub(crate) seq: u64,
    /// The entry's kind.
    pub(crate) kind: &'a str,
    /// An expiry's `decision` (`approved` approves; anything else rejects).
    pub(crate) expiry_decision: Option<&'a str>,
}

/// Where one gate stands from its entries (all of one key, in any order): the highest-seq
/// decision wins (an expiry counts as its `decision`: `approved` approves, anything else
/// rejects); with none, pending if it was asked, else none. Other kinds are ignored.
pub(crate) fn gate_state<'a>(marks: impl IntoIterator<Item = Mark<'a>>) -> GateState {
    let mut best: Option<(u64, GateState)> = None;
    let mut asked = false;
    for m in marks {
        let state = if m.kind == kind::GATE_PENDING {
            asked = true;
            continue;
        } else if let Some(d) = GateDecision::from_kind(m.kind) {
            d.state()
        } else if m.kind == kind::GATE_EXPIRED {
            match m.expiry_decision {
                Some(w) if w == GateDecision::Approve.word() => GateState::Approved,
                _ => GateState::Rejected,
            }
        } else {
            continue;
        };
        if best.is_none_or(|(s, _)| m.seq > s) {
            best = Some((m.seq, state));
        }
    }
    match best {
        Some((_, s)) => s,
        None if asked => GateState::Pending,
        None => GateState::None,
    }
}

/// [`gate_state`] over a gate's entries with their bodies (all of one key).
pub(crate) fn gate_resolution(gates: &[(Entry, JsonValue)]) -> GateState {
    gate_state(gates.iter().map(|(e, p)| Mark {
        seq: e.seq,
        kind: &e.kind,
        expiry_decision: p.get("decision").and_then(JsonValue::as_str),
    }))
}

/// Every gate entry of the ledger with its body, by key: run_seq, then wave.
pub(crate) fn gate_entries(
    entries: &[Entry],
    mut payload: impl FnMut(&Entry) -> Option<JsonValue>,
) -> BTreeMap<u64, BTreeMap<u64, Vec<(Entry, JsonValue)>>> {
    let mut out: BTreeMap<u64, BTreeMap<u64, Vec<(Entry, JsonValue)>>> = BTreeMap::new();
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
pub(crate) enum Admission {
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
pub(crate) fn admission(gates: &[(Entry, JsonValue)], tasks: &[String], now: f64) -> Admission {
    let pending = gates
        .iter()
        .rev()
        .find(|(e, _)| e.kind == kind::GATE_PENDING);
    match gate_resolution(gates) {
        GateState::None => Admission::Raise,
        GateState::Pending => {
            let Some((e, p)) = pending else {
                return Admission::Raise;
            };
            match p.get("deadline").and_then(JsonValue::as_f64) {
                Some(deadline) if now >= deadline => {
                    let on_expiry = p
                        .get("on_expiry")
                        .and_then(JsonValue::as_str)
                        .map(str::to_string);
                    Admission::Expire {
                        pending_seq: e.seq,
                        decision: if on_expiry.as_deref() == Some("approve") {
                            GateDecision::Approve.word()
                        } else {
                            GateDecision::Reject.word()
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
                .find(|(e, _)| e.kind == kind::GATE_REJECTED)
                .or_else(|| gates.iter().find(|(e, _)| e.kind == kind::GATE_EXPIRED))
                .map(|(e, _)| e.seq),
        },
        GateState::Edited => Admission::Run {
            edits: gates
                .iter()
                .rev()
                .find(|(e, _)| e.kind == kind::GATE_EDITED)
                .and_then(|(_, p)| p.get("edits").and_then(JsonValue::as_object).cloned())
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
    pub(crate) request_seq: Option<u64>,
    /// The wave's task ids.
    pub(crate) tasks: Vec<String>,
    /// What the approver is asked.
    pub(crate) question: String,
    /// When the gate expires (seconds since 1970), if it does.
    pub(crate) deadline: Option<f64>,
    /// What it becomes then: `approve` or `reject`.
    pub(crate) on_expiry: Option<String>,
}

/// Every gate that currently resolves to pending (the latest `gate_pending` of each key).
/// `root` maps an entry's seq to its run's request seq (`run::status::roots`).
pub(crate) fn pending_gates(
    entries: &[Entry],
    mut payload: impl FnMut(&Entry) -> Option<JsonValue>,
    root: &BTreeMap<u64, u64>,
) -> Vec<PendingGate> {
    let mut by_key: BTreeMap<(u64, u64), Vec<(Entry, JsonValue)>> = BTreeMap::new();
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
        let Some((e, p)) = gates
            .iter()
            .rev()
            .find(|(e, _)| e.kind == kind::GATE_PENDING)
        else {
            continue;
        };
        out.push(PendingGate {
            seq: e.seq,
            run_seq,
            wave,
            request_seq: root.get(&e.seq).copied(),
            tasks: p
                .get("tasks")
                .and_then(JsonValue::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            question: p
                .get("question")
                .and_then(JsonValue::as_str)
                .unwrap_or("")
                .to_string(),
            deadline: p.get("deadline").and_then(JsonValue::as_f64),
            on_expiry: p
                .get("on_expiry")
                .and_then(JsonValue::as_str)
                .map(str::to_string),
        });
    }
    out
}

// ---- deciding a gate ----

/// Which pending gate a decision is for; each field given narrows the choice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Which {
    /// The run, by its request seq (what `git forum runs` lists).
    pub(crate) run: Option<u64>,
    /// The run, by its gates' key: its first plan entry.
    pub(crate) run_seq: Option<u64>,
    /// The gated wave (0-based).
    pub(crate) wave: Option<u64>,
}

/// What a person decides, as the caller read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    /// Approve, edit or reject.
    pub(crate) decision: GateDecision,
    /// Who decides.
    pub(crate) approver: String,
    /// A note kept with an approval or an edit.
    pub(crate) note: Option<String>,
    /// Why, for a rejection (default: "rejected by the approver").
    pub(crate) reason: Option<String>,
    /// For an edit: the rewritten instructions, by task id (at least one).
    pub(crate) edits: BTreeMap<String, String>,
}

/// The entry that witnesses a decision, ready to append: `kind` by `actor` under `parent`
/// (the pending gate it decides) with `payload`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NewGateEntry {
    /// The gate decided.
    pub(crate) gate: PendingGate,
    /// What was decided.
    pub(crate) decision: GateDecision,
    /// The causal parent: the gate's `gate_pending` entry.
    pub(crate) parent: u64,
    /// `{run_seq, wave, approver}` and `note` (approve), `edits` and `note` (edit) or `reason`
    /// (reject).
    pub(crate) payload: JsonValue,
}

impl NewGateEntry {
    /// Who writes a decision.
    pub(crate) const ACTOR: &'static str = "operator";

    /// The entry kind.
    pub(crate) fn kind(&self) -> &'static str {
        self.decision.kind()
    }

    /// The entry to append, stamped `ts`.
    pub(crate) fn entry(&self, ts: f64) -> NewEntry {
        NewEntry {
            actor: Self::ACTOR.into(),
            kind: self.kind().into(),
            causal_parent: Some(self.parent as i64),
            payload: Value::from_serde(&self.payload),
            ts,
        }
    }
}

/// Why a decision is refused. Nothing is written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum GateRefusal {
    /// An edit that rewrites nothing.
    #[error("gate edit needs at least one edit TASK_ID=INSTRUCTION")]
    NoEdits,
    /// No pending gate matches.
    #[error("{} (the gate list shows the pending ones)", no_pending(.0))]
    NoPending(Which),
    /// Several pending gates match.
    #[error("several gates are pending: name one by its run and wave (the gate list shows them)")]
    Ambiguous,
    /// An edit names a task that is not in the gated wave.
    #[error("edit {task}: wave {wave} has no task {task} (its tasks: {})", .tasks.join(", "))]
    NotInWave {
        /// The task named.
        task: String,
        /// The gated wave.
        wave: u64,
        /// The wave's tasks.
        tasks: Vec<String>,
    },
}

impl GateRefusal {
    /// Whether the caller asked wrongly (a usage error), rather than asked for a gate that is
    /// not waiting.
    pub(crate) fn is_usage(&self) -> bool {
        !matches!(self, GateRefusal::NoPending(_))
    }
}

fn no_pending(w: &Which) -> String {
    let run = match (w.run, w.run_seq) {
        (Some(r), _) => Some(format!("run {r}")),
        (None, Some(k)) => Some(format!("the run whose gates are keyed run_seq {k}")),
        (None, None) => None,
    };
    match (run, w.wave) {
        (Some(r), Some(w)) => format!("{r} has no pending gate before wave {w}"),
        (Some(r), None) => format!("{r} has no pending gate"),
        (None, Some(w)) => format!("no run has a pending gate before wave {w}"),
        (None, None) => "no gate is pending".into(),
    }
}

/// The rule for deciding a gate, the same for every caller: a decision needs exactly one
/// pending gate among `pending` (see [`pending_gates`]) that `which` names, and is parented on
/// that gate's `gate_pending` entry; an edit must rewrite at least one task, and only tasks of
/// the gated wave. Anything else is refused and nothing is written.
pub(crate) fn decide(
    pending: &[PendingGate],
    which: &Which,
    decision: &Decision,
) -> Result<NewGateEntry, GateRefusal> {
    if decision.decision == GateDecision::Edit && decision.edits.is_empty() {
        return Err(GateRefusal::NoEdits);
    }
    let candidates: Vec<&PendingGate> = pending
        .iter()
        .filter(|g| which.run.is_none_or(|r| g.request_seq == Some(r)))
        .filter(|g| which.run_seq.is_none_or(|r| g.run_seq == r))
        .filter(|g| which.wave.is_none_or(|w| g.wave == w))
        .collect();
    let g = match candidates.as_slice() {
        [one] => *one,
        // With nothing pending at all, the refusal does not depend on how the run was named,
        // so every transport gives the same one.
        [] if pending.is_empty() => return Err(GateRefusal::NoPending(Which::default())),
        [] => return Err(GateRefusal::NoPending(*which)),
        _ => return Err(GateRefusal::Ambiguous),
    };
    if decision.decision == GateDecision::Edit
        && let Some(task) = decision.edits.keys().find(|id| !g.tasks.contains(id))
    {
        return Err(GateRefusal::NotInWave {
            task: task.clone(),
            wave: g.wave,
            tasks: g.tasks.clone(),
        });
    }
    let mut payload = json!({"run_seq": g.run_seq, "wave": g.wave, "approver": decision.approver});
    match decision.decision {
        GateDecision::Reject => {
            payload["reason"] = json!(
                decision
                    .reason
                    .clone()
                    .unwrap_or_else(|| "rejected by the approver".into())
            )
        }
        GateDecision::Edit => {
            payload["edits"] = json!(decision.edits);
            payload["note"] = json!(decision.note);
        }
        GateDecision::Approve => payload["note"] = json!(decision.note),
    }
    Ok(NewGateEntry {
        gate: g.clone(),
        decision: decision.decision,
        parent: g.seq,
        payload,
    })
}

#[cfg(test)]
mod tests;
