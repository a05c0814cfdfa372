//! Gates: the list of pending gates, and the one rule for approving, editing or rejecting
//! one, whichever transport asks. A decision needs a pending gate and is parented on it.

use serde::Serialize;
use std::collections::BTreeMap;

use super::{Bodies, storage};
use crate::gate::{self, GateDecision};
use crate::ledger::{Entry, Storage};
use crate::run::status::{self, PendingGate};
use crate::surface::{Error, Report, Result};

/// A gate waiting for a decision.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct GateRow {
    /// The `gate_pending` entry.
    pub(crate) seq: u64,
    /// The run (its request seq), when the gate belongs to one.
    pub(crate) run: Option<u64>,
    /// The run's first plan entry (the gate's key).
    pub(crate) run_seq: u64,
    /// The gated wave (0-based).
    pub(crate) wave: u64,
    /// The wave's task ids.
    pub(crate) tasks: Vec<String>,
    /// What the approver is asked.
    pub(crate) question: String,
    /// When it expires (seconds since 1970), if it does.
    pub(crate) deadline: Option<f64>,
    /// What it becomes then.
    pub(crate) on_expiry: Option<String>,
}

/// The pending gates of a ledger.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct GateList {
    pub(crate) schema: &'static str,
    pub(crate) pending: Vec<GateRow>,
}

impl Report for GateList {
    const SCHEMA: &'static str = "git-forum.gates/1";
}

/// The gates of the ledger `entries` that resolve to pending (bodies through `bodies`).
pub(crate) fn pending(entries: &[Entry], bodies: &Bodies<'_>) -> Result<Vec<PendingGate>> {
    let p = status::pending_gates(entries, |e| bodies.get(e));
    bodies.done()?;
    Ok(p)
}

/// The gates of the ledger `entries` waiting for a decision.
pub(crate) fn gates(entries: &[Entry], bodies: &Bodies<'_>) -> Result<GateList> {
    let rows = pending(entries, bodies)?
        .into_iter()
        .map(|g| GateRow {
            seq: g.seq,
            run: g.request_seq,
            run_seq: g.run_seq,
            wave: g.wave,
            tasks: g.tasks,
            question: g.question,
            deadline: g.deadline,
            on_expiry: g.on_expiry,
        })
        .collect();
    Ok(GateList {
        schema: GateList::SCHEMA,
        pending: rows,
    })
}

/// What is decided.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decision {
    /// Let the wave run as planned.
    Approve,
    /// Let the wave run with these instructions (task id, instruction), at least one.
    Edit(Vec<(String, String)>),
    /// Stop the run before the wave, for this reason (default: "rejected by the approver").
    Reject(Option<String>),
}

impl Decision {
    /// The decision as the gate module names it.
    pub(crate) fn gate_decision(&self) -> GateDecision {
        match self {
            Decision::Approve => GateDecision::Approve,
            Decision::Edit(_) => GateDecision::Edit,
            Decision::Reject(_) => GateDecision::Reject,
        }
    }

    /// The entry kind that witnesses the decision.
    pub(crate) fn kind(&self) -> &'static str {
        self.gate_decision().kind()
    }

    /// The answer's `resolved`: `approved`, `edited` or `rejected`.
    pub(crate) fn resolved(&self) -> &'static str {
        self.gate_decision().word()
    }
}

/// A decision on a gate: which one (each filter optional; together they must name exactly one
/// pending gate), by whom, and what.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Decide {
    /// The run, by its request seq.
    pub(crate) run: Option<u64>,
    /// The run, by its first plan entry (the gate's key).
    pub(crate) run_seq: Option<u64>,
    /// The wave.
    pub(crate) wave: Option<u64>,
    /// Who decides.
    pub(crate) approver: String,
    /// A note kept with an approval or an edit.
    pub(crate) note: Option<String>,
    /// The decision.
    pub(crate) decision: Decision,
}

impl Decide {
    /// The decision `decision` on the gate `key` names, with `note`, from a request any
    /// transport decoded; an approver left out is the repository's `user.name` (in `dir`),
    /// else `$USER`, else `operator`.
    pub(crate) fn of(
        key: &crate::surface::request::work::GateKey,
        note: Option<String>,
        decision: Decision,
        dir: &std::path::Path,
    ) -> Decide {
        Decide {
            run: key.run,
            run_seq: key.run_seq,
            wave: key.wave,
            approver: key
                .approver
                .clone()
                .unwrap_or_else(|| default_approver(dir)),
            note,
            decision,
        }
    }
}

/// Who decides when no approver is named: the repository's `user.name`, else `$USER`.
fn default_approver(dir: &std::path::Path) -> String {
    if let Ok(repo) = crate::surface::store::open_repo(dir)
        && let Some(name) = repo.config_snapshot().string("user.name")
    {
        return name.to_string();
    }
    std::env::var("USER").unwrap_or_else(|_| "operator".into())
}

/// A decision witnessed.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct GateDecided {
    pub(crate) schema: &'static str,
    /// `approved`, `edited` or `rejected`.
    pub(crate) resolved: &'static str,
    /// The entry kind written.
    pub(crate) kind: &'static str,
    /// The decision's entry.
    pub(crate) seq: u64,
    /// The run (its request seq).
    pub(crate) run: Option<u64>,
    /// The gate's key: the run's first plan entry, and the wave.
    pub(crate) run_seq: u64,
    pub(crate) wave: u64,
    /// The `gate_pending` entry the decision answers.
    pub(crate) causal_parent: u64,
}

impl Report for GateDecided {
    const SCHEMA: &'static str = "git-forum.gate-decision/1";
}

#[cfg(test)]
/// The gate `d` names among `pending`, by the one rule of [`gate::decide`]: the filters must
/// name exactly one pending gate, and an edit may only rewrite tasks of that gate's wave.
pub(crate) fn pick<'a>(pending: &'a [PendingGate], d: &Decide) -> Result<&'a PendingGate> {
    let chosen = rule(pending, d)?;
    Ok(pending
        .iter()
        .find(|g| g.seq == chosen.parent)
        .expect("gate::decide picks one of the gates it is given"))
}

/// [`gate::decide`] on the surface's request shape, its refusal as a surface error.
fn rule(pending: &[PendingGate], d: &Decide) -> Result<gate::NewGateEntry> {
    let which = gate::Which {
        run: d.run,
        run_seq: d.run_seq,
        wave: d.wave,
    };
    let (reason, edits) = match &d.decision {
        Decision::Approve => (None, BTreeMap::new()),
        Decision::Edit(edits) => (None, edits.iter().cloned().collect()),
        Decision::Reject(reason) => (reason.clone(), BTreeMap::new()),
    };
    let decision = gate::Decision {
        decision: d.decision.gate_decision(),
        approver: d.approver.clone(),
        note: d.note.clone(),
        reason,
        edits,
    };
    gate::decide(pending, &which, &decision).map_err(|r| {
        if r.is_usage() {
            Error::usage(r.to_string())
        } else {
            Error::conflict(r.to_string())
        }
    })
}

/// Decides one of the `pending` gates (see [`pending`]) by the rule of [`gate::decide`] and
/// witnesses the decision through `store` at time `ts`, parented on the pending gate, then
/// syncs.
pub(crate) fn decide(
    pending: &[PendingGate],
    store: &mut dyn Storage,
    d: &Decide,
    ts: f64,
) -> Result<GateDecided> {
    let new = rule(pending, d)?;
    let done = store.append(new.entry(ts)).map_err(storage)?;
    store.sync().map_err(storage)?;
    let g = &new.gate;
    Ok(GateDecided {
        schema: GateDecided::SCHEMA,
        resolved: d.decision.resolved(),
        kind: d.decision.kind(),
        seq: done.seq,
        run: g.request_seq,
        run_seq: g.run_seq,
        wave: g.wave,
        causal_parent: g.seq,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(seq: u64, run: u64, wave: u64) -> PendingGate {
        PendingGate {
            seq,
            run_seq: run + 2,
            wave,
            request_seq: Some(run),
            tasks: vec!["T1".into()],
            question: String::new(),
            deadline: None,
            on_expiry: None,
        }
    }

    fn ask(run: Option<u64>, wave: Option<u64>, decision: Decision) -> Decide {
        Decide {
            run,
            run_seq: None,
            wave,
            approver: "ana".into(),
            note: None,
            decision,
        }
    }

    #[test]
    fn a_decision_needs_exactly_one_pending_gate() {
        let none: Vec<PendingGate> = vec![];
        let e = pick(&none, &ask(Some(0), Some(0), Decision::Approve)).unwrap_err();
        assert_eq!(e.class, crate::surface::Class::Conflict);
        assert!(e.message.starts_with("no gate is pending"), "{e}");
        let two = vec![gate(4, 0, 1), gate(9, 5, 0)];
        let e = pick(&two, &ask(None, None, Decision::Approve)).unwrap_err();
        assert_eq!(e.class, crate::surface::Class::Usage);
        assert_eq!(
            pick(&two, &ask(Some(5), None, Decision::Approve))
                .unwrap()
                .seq,
            9
        );
        let e = pick(&two, &ask(Some(7), None, Decision::Approve)).unwrap_err();
        assert!(e.message.starts_with("run 7 has no pending gate"), "{e}");
    }

    #[test]
    fn an_edit_names_tasks_of_the_gated_wave() {
        let one = vec![gate(4, 0, 1)];
        let bad = Decision::Edit(vec![("T9".into(), "x".into())]);
        assert!(
            pick(&one, &ask(None, None, bad))
                .unwrap_err()
                .message
                .contains("no task T9")
        );
        let empty = ask(None, None, Decision::Edit(vec![]));
        assert_eq!(
            pick(&one, &empty).unwrap_err().class,
            crate::surface::Class::Usage
        );
        let ok = Decision::Edit(vec![("T1".into(), "shorter".into())]);
        assert_eq!(pick(&one, &ask(None, None, ok)).unwrap().seq, 4);
    }
}
