//! Gated runs replayed: a person's decision on a gate (`gate_approved`, `gate_edited`,
//! `gate_rejected`) is an input to the run, as a model's reply is, so it is taken from the
//! record; everything the engine decides around it is decided again and compared: raising
//! the gate (`gate_pending`), pausing there, which waves run after it, an edit's rewritten
//! instructions, the stop of a rejected run (`gate_stopped`). A run paused at a gate ends its
//! part of the record there ([`phases`](super::phases)); the decision that followed is copied
//! into the scratch ledger as the world's doing, and the `resume` after it is replayed through
//! `resume`, which reads that decision from the scratch ledger as a live resume reads it. A
//! gate's deadline and its expiry are decided again from the clock readings their entries
//! keep (`read_at`, answered by the replay's clock); a gate's expiry (`gate_expired`) is the
//! engine's decision, compared like the rest.

use crate::ledger::kind;
use crate::run::GatePolicy;

use super::Recorded;

/// Whether the entry is a person's decision on a gate: the world's input, not the run's.
pub(super) fn decided_by_a_person(e: &Recorded) -> bool {
    matches!(
        e.kind.as_str(),
        kind::GATE_APPROVED | kind::GATE_EDITED | kind::GATE_REJECTED
    )
}

/// The gates the run's request records (none when it records none): the replay is submitted
/// with them, as the run was.
pub(super) fn policy(request: &Recorded) -> GatePolicy {
    GatePolicy::from_record(request.payload.get("gates"))
}

/// Refuses a run whose gates have a deadline but whose record does not keep a clock reading
/// the engine decided from (`read_at`, kept since gates with a deadline replay): the reading
/// each `gate_pending`'s deadline was counted from, the one each `gate_expired` was decided
/// at, and the one each `resume` asked whether a gate still waited at. Without it, whether
/// the gate expired could be decided again only from an invented reading.
pub(super) fn check(run: &[Recorded]) -> Result<(), String> {
    let request = &run[0];
    let deadline = request
        .payload
        .get("gates")
        .and_then(|g| g.get("deadline_seconds"))
        .is_some_and(|d| !d.is_null());
    if !deadline {
        return Ok(());
    }
    let unread = run.iter().find(|e| {
        matches!(
            e.kind.as_str(),
            kind::GATE_PENDING | kind::GATE_EXPIRED | kind::RESUME
        ) && !e.payload["read_at"].is_number()
    });
    match unread {
        Some(e) => Err(format!(
            "run {} was submitted with a deadline on its gates, and its {} entry at seq {} does not keep the clock reading it was decided at (`read_at`; the run was recorded before gates kept it), so strict replay refuses rather than decide an expiry from another reading",
            request.seq, e.kind, e.seq
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value as J, json};

    fn e(kind: &str, payload: J) -> Recorded {
        Recorded {
            seq: 4,
            ts: 1.0,
            actor: "ana".into(),
            kind: kind.into(),
            parent: Some(3),
            payload,
        }
    }

    #[test]
    fn a_persons_decision_is_an_input_and_a_deadline_needs_its_readings_kept() {
        let approved = e("gate_approved", json!({"run_seq": 2, "wave": 1}));
        assert!(decided_by_a_person(&approved));
        assert!(decided_by_a_person(&e("gate_rejected", json!({}))));
        assert!(decided_by_a_person(&e("gate_edited", json!({}))));
        // The engine's own gate entries are decisions it makes again.
        assert!(!decided_by_a_person(&e("gate_pending", json!({}))));
        assert!(!decided_by_a_person(&e("gate_stopped", json!({}))));
        let gated = e("request", json!({"text": "x", "gates": {"waves": [1]}}));
        assert_eq!(policy(&gated).waves.into_iter().collect::<Vec<_>>(), [1]);
        // Without a deadline no reading decides anything: nothing is asked of the record.
        let pending = e("gate_pending", json!({"wave": 1}));
        assert!(check(&[gated, pending.clone()]).is_ok());
        let timed = e(
            "request",
            json!({"text": "x", "gates": {"waves": [1], "deadline_seconds": 5.0, "on_expiry": "reject"}}),
        );
        let read = e("gate_pending", json!({"wave": 1, "read_at": 1000.0}));
        assert!(check(&[timed.clone(), read.clone()]).is_ok());
        let mut unread = pending;
        unread.seq = 7;
        let err = check(&[timed.clone(), read, unread]).unwrap_err();
        assert!(
            err.contains("gate_pending entry at seq 7") && err.contains("read_at"),
            "{err}"
        );
        let err = check(&[timed, e("resume", json!({"reused": []}))]).unwrap_err();
        assert!(err.contains("resume entry at seq 4"), "{err}");
        assert!(policy(&e("request", json!({"text": "x"}))).waves.is_empty());
    }
}
