//! Unit tests of the gate projection and the rule for deciding a gate.

use super::*;

fn entry(seq: u64, kind: &str, parent: Option<u64>) -> Entry {
    Entry {
        seq,
        ts: 0.0,
        actor: "test".into(),
        kind: kind.into(),
        causal_parent: parent.map(|p| p as i64),
        payload_hash: String::new(),
        prev_hash: String::new(),
        entry_hash: String::new(),
    }
}

/// A ledger with one run (request 0, plan 2) and a pending gate (seq 3) before wave 1,
/// whose tasks are T2 and T3.
fn one_pending() -> (Vec<Entry>, Vec<JsonValue>, BTreeMap<u64, u64>) {
    let entries = vec![
        entry(0, kind::REQUEST, None),
        entry(1, kind::ROUTE_FRAME, Some(0)),
        entry(2, kind::PLAN, Some(1)),
        entry(3, kind::GATE_PENDING, Some(2)),
    ];
    let bodies = vec![
        json!({"text": "do it"}),
        json!({}),
        json!({}),
        json!({"run_seq": 2, "wave": 1, "tasks": ["T2", "T3"], "question": "Run wave 1?"}),
    ];
    let roots = entries.iter().map(|e| (e.seq, 0)).collect();
    (entries, bodies, roots)
}

fn pending_of(
    entries: &[Entry],
    bodies: &[JsonValue],
    roots: &BTreeMap<u64, u64>,
) -> Vec<PendingGate> {
    pending_gates(entries, |e| bodies.get(e.seq as usize).cloned(), roots)
}

fn decision(d: GateDecision) -> Decision {
    Decision {
        decision: d,
        approver: "ada".into(),
        note: None,
        reason: None,
        edits: BTreeMap::new(),
    }
}

fn mark(seq: u64, kind: &str) -> Mark<'_> {
    Mark {
        seq,
        kind,
        expiry_decision: None,
    }
}

#[test]
fn decisions_name_their_entry_kind_and_answer_word() {
    let all = [
        (GateDecision::Approve, kind::GATE_APPROVED, "approved"),
        (GateDecision::Edit, kind::GATE_EDITED, "edited"),
        (GateDecision::Reject, kind::GATE_REJECTED, "rejected"),
    ];
    for (d, k, word) in all {
        assert_eq!(d.kind(), k);
        assert_eq!(d.word(), word);
        assert_eq!(GateDecision::from_kind(k), Some(d));
    }
    assert_eq!(GateDecision::from_kind(kind::GATE_PENDING), None);
    assert_eq!(GateDecision::from_kind(kind::GATE_EXPIRED), None);
}

#[test]
fn gate_state_takes_the_latest_decision_and_counts_an_expiry_as_its_decision() {
    assert_eq!(gate_state([]), GateState::None);
    assert_eq!(
        gate_state([mark(3, kind::GATE_PENDING)]),
        GateState::Pending
    );
    // The highest seq wins, in whatever order the entries come.
    let marks = [
        mark(9, kind::GATE_REJECTED),
        mark(3, kind::GATE_PENDING),
        mark(5, kind::GATE_APPROVED),
    ];
    assert_eq!(gate_state(marks), GateState::Rejected);
    let approved_late = [
        mark(3, kind::GATE_PENDING),
        mark(4, kind::GATE_REJECTED),
        mark(6, kind::GATE_EDITED),
    ];
    assert_eq!(gate_state(approved_late), GateState::Edited);
    let expired = |decision| Mark {
        seq: 7,
        kind: kind::GATE_EXPIRED,
        expiry_decision: decision,
    };
    assert_eq!(gate_state([expired(Some("approved"))]), GateState::Approved);
    assert_eq!(gate_state([expired(Some("rejected"))]), GateState::Rejected);
    assert_eq!(gate_state([expired(None)]), GateState::Rejected);
    // Kinds that are not decisions do not decide.
    assert_eq!(
        gate_state([
            mark(3, kind::GATE_PENDING),
            mark(4, kind::GATE_STOPPED),
            mark(5, kind::NOTE)
        ]),
        GateState::Pending
    );
}

#[test]
fn deciding_without_a_pending_gate_is_refused() {
    let (entries, bodies, roots) = one_pending();
    // Nothing pending at all: only the request, route frame and plan.
    let none = pending_of(&entries[..3], &bodies[..3], &roots);
    assert!(none.is_empty());
    let r = decide(&none, &Which::default(), &decision(GateDecision::Approve)).unwrap_err();
    assert_eq!(r, GateRefusal::NoPending(Which::default()));
    assert!(!r.is_usage());
    assert_eq!(
        r.to_string(),
        "no gate is pending (the gate list shows the pending ones)"
    );
    // A pending gate, but not the one named.
    let pending = pending_of(&entries, &bodies, &roots);
    let other_run = Which {
        run: Some(7),
        ..Which::default()
    };
    let r = decide(&pending, &other_run, &decision(GateDecision::Reject)).unwrap_err();
    assert_eq!(
        r.to_string(),
        "run 7 has no pending gate (the gate list shows the pending ones)"
    );
    let other_wave = Which {
        wave: Some(3),
        ..Which::default()
    };
    let r = decide(&pending, &other_wave, &decision(GateDecision::Approve)).unwrap_err();
    assert_eq!(
        r.to_string(),
        "no run has a pending gate before wave 3 (the gate list shows the pending ones)"
    );
    // The same rule for a plan entry that is not a gate's key (what the daemon was given).
    let by_key = Which {
        run_seq: Some(1),
        wave: Some(1),
        ..Which::default()
    };
    assert!(matches!(
        decide(&pending, &by_key, &decision(GateDecision::Approve)),
        Err(GateRefusal::NoPending(_))
    ));
}

#[test]
fn a_decided_gate_is_no_longer_pending_so_a_second_decision_is_refused() {
    let (mut entries, mut bodies, mut roots) = one_pending();
    let pending = pending_of(&entries, &bodies, &roots);
    let new = decide(
        &pending,
        &Which::default(),
        &decision(GateDecision::Approve),
    )
    .unwrap();
    let e = new.entry(1.0);
    entries.push(entry(4, &e.kind, e.causal_parent.map(|p| p as u64)));
    bodies.push(new.payload.clone());
    roots.insert(4, 0);
    let pending = pending_of(&entries, &bodies, &roots);
    assert!(pending.is_empty());
    assert!(matches!(
        decide(&pending, &Which::default(), &decision(GateDecision::Reject)),
        Err(GateRefusal::NoPending(_))
    ));
}

#[test]
fn the_decision_is_parented_on_the_pending_gate_with_the_kind_of_the_decision() {
    let (entries, bodies, roots) = one_pending();
    let pending = pending_of(&entries, &bodies, &roots);
    let which = Which {
        run: Some(0),
        wave: Some(1),
        ..Which::default()
    };

    let approve = decide(&pending, &which, &decision(GateDecision::Approve)).unwrap();
    assert_eq!(approve.parent, 3);
    assert_eq!(approve.kind(), kind::GATE_APPROVED);
    assert_eq!(
        approve.payload,
        json!({"run_seq": 2, "wave": 1, "approver": "ada", "note": null})
    );
    let e = approve.entry(42.0);
    assert_eq!(
        (e.actor.as_str(), e.kind.as_str(), e.causal_parent, e.ts),
        ("operator", "gate_approved", Some(3), 42.0)
    );

    let reject = decide(&pending, &which, &decision(GateDecision::Reject)).unwrap();
    assert_eq!((reject.parent, reject.kind()), (3, kind::GATE_REJECTED));
    assert_eq!(reject.payload["reason"], "rejected by the approver");

    let mut edit = decision(GateDecision::Edit);
    edit.edits.insert("T3".into(), "do it better".into());
    edit.note = Some("tighter".into());
    let edited = decide(&pending, &Which::default(), &edit).unwrap();
    assert_eq!((edited.parent, edited.kind()), (3, kind::GATE_EDITED));
    assert_eq!(edited.payload["edits"], json!({"T3": "do it better"}));
    assert_eq!(edited.payload["note"], "tighter");
    assert_eq!(edited.gate.request_seq, Some(0));

    // The daemon names a gate by its key.
    let by_key = Which {
        run_seq: Some(2),
        wave: Some(1),
        ..Which::default()
    };
    assert_eq!(
        decide(&pending, &by_key, &decision(GateDecision::Approve))
            .unwrap()
            .parent,
        3
    );
}

#[test]
fn an_edit_must_rewrite_a_task_of_the_gated_wave() {
    let (entries, bodies, roots) = one_pending();
    let pending = pending_of(&entries, &bodies, &roots);
    let empty = decide(&pending, &Which::default(), &decision(GateDecision::Edit)).unwrap_err();
    assert_eq!(empty, GateRefusal::NoEdits);
    assert!(empty.is_usage());
    let mut edit = decision(GateDecision::Edit);
    edit.edits.insert("T1".into(), "elsewhere".into());
    let r = decide(&pending, &Which::default(), &edit).unwrap_err();
    assert!(r.is_usage());
    assert_eq!(
        r.to_string(),
        "edit T1: wave 1 has no task T1 (its tasks: T2, T3)"
    );
}

#[test]
fn several_pending_gates_need_naming() {
    let (mut entries, mut bodies, mut roots) = one_pending();
    // A second run (request 4, plan 5) with its own pending gate before wave 0.
    entries.push(entry(4, kind::REQUEST, None));
    entries.push(entry(5, kind::PLAN, Some(4)));
    entries.push(entry(6, kind::GATE_PENDING, Some(5)));
    bodies.push(json!({"text": "other"}));
    bodies.push(json!({}));
    bodies.push(json!({"run_seq": 5, "wave": 0, "tasks": ["T1"], "question": "?"}));
    for seq in 4..=6 {
        roots.insert(seq, 4);
    }
    let pending = pending_of(&entries, &bodies, &roots);
    assert_eq!(pending.len(), 2);
    let r = decide(
        &pending,
        &Which::default(),
        &decision(GateDecision::Approve),
    )
    .unwrap_err();
    assert_eq!(r, GateRefusal::Ambiguous);
    assert!(r.is_usage());
    let second = Which {
        run: Some(4),
        ..Which::default()
    };
    let new = decide(&pending, &second, &decision(GateDecision::Approve)).unwrap();
    assert_eq!((new.parent, new.gate.run_seq, new.gate.wave), (6, 5, 0));
}
