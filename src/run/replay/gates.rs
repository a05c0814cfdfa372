//! Gated runs replayed: a person's decision on a gate (`gate_approved`, `gate_edited`,
//! `gate_rejected`) is an input to the run, as a model's reply is, so it is taken from the
//! record; everything the engine decides around it is decided again and compared: raising
//! the gate (`gate_pending`), pausing there, which waves run after it, an edit's rewritten
//! instructions, the stop of a rejected run (`gate_stopped`). A run paused at a gate ends its
//! part of the record there ([`phases`](super::phases)); the decision that followed is copied
//! into the scratch ledger as the world's doing, and the `resume` after it is replayed through
//! `resume`, which reads that decision from the scratch ledger as a live resume reads it.

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

/// Refuses a gated run whose gates have a deadline: the deadline was set from a clock reading
/// the record does not keep (only the entry's timestamp, read later), so whether the gate
/// expired cannot be decided again without inventing that reading.
pub(super) fn check(request: &Recorded) -> Result<(), String> {
    let deadline = request
        .payload
        .get("gates")
        .and_then(|g| g.get("deadline_seconds"))
        .is_some_and(|d| !d.is_null());
    if deadline {
        return Err(format!(
            "run {} was submitted with a deadline on its gates (seq {}): the clock reading each deadline was set from is not in the record, so strict replay refuses rather than decide an expiry from another",
            request.seq, request.seq
        ));
    }
    Ok(())
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
    fn a_persons_decision_is_an_input_and_a_deadline_is_refused() {
        let approved = e("gate_approved", json!({"run_seq": 2, "wave": 1}));
        assert!(decided_by_a_person(&approved));
        assert!(decided_by_a_person(&e("gate_rejected", json!({}))));
        assert!(decided_by_a_person(&e("gate_edited", json!({}))));
        // The engine's own gate entries are decisions it makes again.
        assert!(!decided_by_a_person(&e("gate_pending", json!({}))));
        assert!(!decided_by_a_person(&e("gate_stopped", json!({}))));
        let gated = e("request", json!({"text": "x", "gates": {"waves": [1]}}));
        assert!(check(&gated).is_ok());
        assert_eq!(policy(&gated).waves.into_iter().collect::<Vec<_>>(), [1]);
        let timed = e(
            "request",
            json!({"text": "x", "gates": {"waves": [1], "deadline_seconds": 5.0, "on_expiry": "reject"}}),
        );
        let err = check(&timed).unwrap_err();
        assert!(err.contains("deadline") && err.contains("seq 4"), "{err}");
        assert!(policy(&e("request", json!({"text": "x"}))).waves.is_empty());
    }
}
