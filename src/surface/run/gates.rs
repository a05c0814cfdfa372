//! Gates: the list of pending gates, and the one rule for approving, editing or rejecting
//! one, whichever transport asks. A decision needs a pending gate and is parented on it.

use serde::Serialize;
use serde_json::{Map, Value as J, json};

use super::{Bodies, storage};
use crate::ledger::{Entry, NewEntry, Storage, Value, kind};
use crate::run::status::{self, PendingGate};
use crate::surface::{Error, Report, Result};

/// A gate waiting for a decision.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GateRow {
    /// The `gate_pending` entry.
    pub seq: u64,
    /// The run (its request seq), when the gate belongs to one.
    pub run: Option<u64>,
    /// The run's first plan entry (the gate's key).
    pub run_seq: u64,
    /// The gated wave (0-based).
    pub wave: u64,
    /// The wave's task ids.
    pub tasks: Vec<String>,
    /// What the approver is asked.
    pub question: String,
    /// When it expires (seconds since 1970), if it does.
    pub deadline: Option<f64>,
    /// What it becomes then.
    pub on_expiry: Option<String>,
}

/// The pending gates of a ledger.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GateList {
    pub schema: &'static str,
    pub pending: Vec<GateRow>,
}

impl Report for GateList {
    const SCHEMA: &'static str = "git-forum.gates/1";
}

/// The gates of the ledger `entries` that resolve to pending (bodies through `bodies`).
pub fn pending(entries: &[Entry], bodies: &Bodies<'_>) -> Result<Vec<PendingGate>> {
    let p = status::pending_gates(entries, |e| bodies.get(e));
    bodies.done()?;
    Ok(p)
}

/// The gates of the ledger `entries` waiting for a decision.
pub fn gates(entries: &[Entry], bodies: &Bodies<'_>) -> Result<GateList> {
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
pub enum Decision {
    /// Let the wave run as planned.
    Approve,
    /// Let the wave run with these instructions (task id, instruction), at least one.
    Edit(Vec<(String, String)>),
    /// Stop the run before the wave, for this reason (default: "rejected by the approver").
    Reject(Option<String>),
}

impl Decision {
    /// The entry kind that witnesses the decision.
    pub fn kind(&self) -> &'static str {
        match self {
            Decision::Approve => kind::GATE_APPROVED,
            Decision::Edit(_) => kind::GATE_EDITED,
            Decision::Reject(_) => kind::GATE_REJECTED,
        }
    }

    /// The answer's `resolved`: `approved`, `edited` or `rejected`.
    pub fn resolved(&self) -> &'static str {
        &self.kind()["gate_".len()..]
    }
}

/// A decision on a gate: which one (each filter optional; together they must name exactly one
/// pending gate), by whom, and what.
#[derive(Debug, Clone, PartialEq)]
pub struct Decide {
    /// The run, by its request seq.
    pub run: Option<u64>,
    /// The run, by its first plan entry (the gate's key).
    pub run_seq: Option<u64>,
    /// The wave.
    pub wave: Option<u64>,
    /// Who decides.
    pub approver: String,
    /// A note kept with an approval or an edit.
    pub note: Option<String>,
    /// The decision.
    pub decision: Decision,
}

/// A decision witnessed.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GateDecided {
    pub schema: &'static str,
    /// `approved`, `edited` or `rejected`.
    pub resolved: &'static str,
    /// The entry kind written.
    pub kind: &'static str,
    /// The decision's entry.
    pub seq: u64,
    /// The run (its request seq).
    pub run: Option<u64>,
    /// The gate's key: the run's first plan entry, and the wave.
    pub run_seq: u64,
    pub wave: u64,
    /// The `gate_pending` entry the decision answers.
    pub causal_parent: u64,
}

impl Report for GateDecided {
    const SCHEMA: &'static str = "git-forum.gate-decision/1";
}

/// The rule: the filters of `d` must name exactly one pending gate, and an edit may only
/// rewrite tasks of that gate's wave.
pub fn pick<'a>(pending: &'a [PendingGate], d: &Decide) -> Result<&'a PendingGate> {
    if let Decision::Edit(edits) = &d.decision
        && edits.is_empty()
    {
        return Err(Error::usage(
            "gate edit needs at least one edit TASK_ID=INSTRUCTION",
        ));
    }
    let candidates: Vec<&PendingGate> = pending
        .iter()
        .filter(|g| d.run.is_none_or(|r| g.request_seq == Some(r)))
        .filter(|g| d.run_seq.is_none_or(|r| g.run_seq == r))
        .filter(|g| d.wave.is_none_or(|w| g.wave == w))
        .collect();
    let g = match candidates.as_slice() {
        [one] => *one,
        [] => {
            let what = match (d.run, d.run_seq, d.wave) {
                _ if pending.is_empty() => "no gate is pending".to_string(),
                (Some(r), _, Some(w)) => format!("run {r} has no pending gate before wave {w}"),
                (Some(r), _, None) => format!("run {r} has no pending gate"),
                (None, Some(s), Some(w)) => {
                    format!("no pending gate before wave {w} has run_seq {s}")
                }
                (None, Some(s), None) => format!("no pending gate has run_seq {s}"),
                (None, None, Some(w)) => format!("no run has a pending gate before wave {w}"),
                (None, None, None) => "no gate is pending".to_string(),
            };
            return Err(Error::conflict(format!(
                "{what} (the gate list shows the pending ones)"
            )));
        }
        _ => {
            return Err(Error::usage(
                "several gates are pending: name one by its run and wave (the gate list shows them)",
            ));
        }
    };
    if let Decision::Edit(edits) = &d.decision {
        for (id, _) in edits {
            if !g.tasks.contains(id) {
                return Err(Error::usage(format!(
                    "edit {id}: wave {} has no task {id} (its tasks: {})",
                    g.wave,
                    g.tasks.join(", ")
                )));
            }
        }
    }
    Ok(g)
}

/// Decides one of the `pending` gates (see [`pending`]) by the rule of [`pick`] and witnesses
/// the decision through `store` at time `ts`, parented on the pending gate, then syncs.
pub fn decide(
    pending: &[PendingGate],
    store: &mut dyn Storage,
    d: &Decide,
    ts: f64,
) -> Result<GateDecided> {
    let g = pick(pending, d)?;
    let mut payload = json!({"run_seq": g.run_seq, "wave": g.wave, "approver": d.approver});
    match &d.decision {
        Decision::Reject(reason) => {
            payload["reason"] = json!(
                reason
                    .clone()
                    .unwrap_or_else(|| "rejected by the approver".into())
            )
        }
        Decision::Edit(edits) => {
            let mut m = Map::new();
            for (id, text) in edits {
                m.insert(id.clone(), J::String(text.clone()));
            }
            payload["edits"] = J::Object(m);
            payload["note"] = json!(d.note);
        }
        Decision::Approve => payload["note"] = json!(d.note),
    }
    let new = NewEntry {
        actor: "operator".into(),
        kind: d.decision.kind().into(),
        causal_parent: Some(g.seq as i64),
        payload: Value::from_serde(&payload),
        ts,
    };
    let done = store.append(new).map_err(storage)?;
    store.sync().map_err(storage)?;
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
