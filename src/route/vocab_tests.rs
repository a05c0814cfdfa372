//! The lane vocabulary and the vocabulary gap: each rule, and a ledger written with them whose
//! hashes are the ones Forum's `witness_route` and `witness_vocabulary_gap` give for the same
//! scenario (tests/integration/data/lanes/forum_lanes.py prints them; tests/integration/lanes.rs
//! checks them against Forum itself when FORUM_PYTHON is set).

use std::collections::BTreeSet;

use super::gap::{
    DEFAULT_MIN_ESCALATIONS, RouteOutcome, Trailing, check_threshold, derive_gap, domain_signal,
    due_gap, min_escalations_from_toml, route_outcome, trailing_run,
};
use super::lanes::{DOMAIN_LANES, LaneRoute, PROOF_LANES, Violation, check_route};
use crate::ledger::{MemoryStorage, NewEntry, Storage, Value, canonical};

const TS: f64 = 1_700_000_000.0;

fn claim(
    task: &str,
    lane: &str,
    scopes: &[&str],
    domain: Option<&str>,
    c: Option<f64>,
) -> LaneRoute {
    LaneRoute {
        task: task.into(),
        lane: lane.into(),
        scopes: scopes
            .iter()
            .map(|s| s.to_string())
            .collect::<BTreeSet<_>>(),
        domain: domain.map(str::to_string),
        confidence: c,
    }
}

fn witness(store: &mut MemoryStorage, route: &LaneRoute) -> String {
    let r = check_route(route);
    store
        .append(route.entry(r.as_ref(), None, TS))
        .unwrap()
        .entry_hash
}

fn route_entry(decided: Option<&str>, confidence: f64) -> NewEntry {
    NewEntry {
        actor: "router".into(),
        kind: "route".into(),
        causal_parent: None,
        payload: Value::object([
            ("task".to_string(), Value::str("t")),
            (
                "decided".to_string(),
                decided.map_or(Value::Null, Value::str),
            ),
            ("confidence".to_string(), Value::Float(confidence)),
        ]),
        ts: TS,
    }
}

#[test]
fn the_vocabularies_are_forums() {
    let lanes: Vec<(&str, Vec<&str>)> = PROOF_LANES
        .iter()
        .map(|l| (l.name, l.scopes.to_vec()))
        .collect();
    assert_eq!(
        lanes,
        [
            ("observe", vec!["read"]),
            ("execute", vec!["read", "run"]),
            ("validate", vec!["judge", "read"]),
            ("synthesize", vec!["combine", "read"]),
            ("verify", vec!["attest", "read"]),
        ]
    );
    assert_eq!(DOMAIN_LANES.len(), 10);
    assert_eq!(DOMAIN_LANES[4].name, "formal-proof");
}

#[test]
fn each_violation_names_its_scopes() {
    assert_eq!(
        check_route(&claim(
            "t",
            "execute",
            &["run", "read"],
            Some("bio-evidence"),
            None
        )),
        None
    );
    assert_eq!(check_route(&claim("t", "observe", &[], None, None)), None);

    let r = check_route(&claim("t", "deploy", &["write", "run"], None, None)).unwrap();
    assert_eq!(r.violation, Violation::UnknownLane);
    assert_eq!(
        (r.excess, r.granted),
        (vec!["run".to_string(), "write".into()], vec![])
    );

    let r = check_route(&claim(
        "t",
        "observe",
        &["run", "read", "judge"],
        None,
        None,
    ))
    .unwrap();
    assert_eq!(r.violation, Violation::OverRouted);
    assert_eq!(
        (r.excess, r.granted),
        (
            vec!["judge".to_string(), "run".into()],
            vec!["read".to_string()]
        )
    );

    // The lane and scopes are checked before the domain.
    let r = check_route(&claim("t", "observe", &["run"], Some("astrology"), None)).unwrap();
    assert_eq!(r.violation, Violation::OverRouted);
    let r = check_route(&claim("t", "execute", &["run"], Some("astrology"), None)).unwrap();
    assert_eq!(r.violation, Violation::UnknownDomain);
    assert_eq!(
        (&r.excess, &r.granted),
        (&vec![], &vec!["read".to_string(), "run".into()])
    );
    assert_eq!(r.domain.as_deref(), Some("astrology"));
    assert!(
        r.line()
            .starts_with("unknown_domain: domain \"astrology\" is not a domain lane")
    );
}

#[test]
fn entries_hash_as_forums() {
    let mut s = MemoryStorage::default();
    let hashes = [
        witness(
            &mut s,
            &claim(
                "summarize the proofs",
                "observe",
                &["read"],
                Some("formal-proof"),
                Some(0.9),
            ),
        ),
        witness(
            &mut s,
            &claim("ship it", "deploy", &["write", "run"], None, None),
        ),
        witness(
            &mut s,
            &claim("look and run", "observe", &["run", "read"], None, Some(0.5)),
        ),
        witness(
            &mut s,
            &claim(
                "read the stars",
                "execute",
                &["run"],
                Some("astrology"),
                Some(0.25),
            ),
        ),
    ];
    assert_eq!(
        canonical::Value::canonical(&s.payload_at(2).unwrap().unwrap()),
        r#"{"confidence":0.5,"domain":null,"excess":["run"],"granted":["read"],"lane":"observe","scopes":["read","run"],"task":"look and run","violation":"over_routed"}"#
    );
    for (decided, c) in [(Some("coder"), 0.8), (None, 0.1), (None, 0.35), (None, 0.2)] {
        s.append(route_entry(decided, c)).unwrap();
    }
    let gap = due_gap(&s, DEFAULT_MIN_ESCALATIONS).unwrap().unwrap();
    let e = s.append(gap.entry(TS)).unwrap();
    assert_eq!(
        canonical::Value::canonical(&s.payload_at(8).unwrap().unwrap()),
        r#"{"confidence_ceiling":0.35,"consecutive_escalations":3,"domain_signal":"general","first_seq":5,"last_seq":7}"#
    );
    assert_eq!(
        (e.kind.as_str(), e.causal_parent),
        ("vocabulary_gap", Some(7))
    );
    let kinds: Vec<&str> = s.entries.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "lane_route",
            "lane_rejection",
            "lane_rejection",
            "lane_rejection",
            "route",
            "route",
            "route",
            "route",
            "vocabulary_gap"
        ]
    );
    assert_eq!(
        hashes,
        [
            "9127662275f5cc64be06af1df2cc7f7e379ba9ce9723a5a8806722bf92df799a",
            "c564c1ef77bf30f9d36e56f335d451706f9cd243025bd92e36b415e8660fb503",
            "6d7489fa1f1e5c36c0c09ef97021d64a6570d49d928cf5af500b6795be701a6f",
            "c1d102ef997adb1e5faf1d12d47da7f275e5a79cf645006a979e14195ca72127",
        ]
    );
    assert_eq!(
        e.entry_hash,
        "0043283e07342551fef30deddba4cdabcd34bb2aad4aee725afed603cb7b4697"
    );
    // Once witnessed, the same run gives no second gap, even when it grows.
    assert_eq!(due_gap(&s, 3).unwrap(), None);
    s.append(route_entry(None, 0.5)).unwrap();
    assert_eq!(due_gap(&s, 3).unwrap(), None);
    assert_eq!(trailing_run(&s).unwrap().witnessed, Some(8));
    // A decided route ends the run; a new run of three gives a new gap.
    s.append(route_entry(Some("coder"), 0.9)).unwrap();
    assert_eq!(trailing_run(&s).unwrap(), Trailing::default());
    for c in [0.3, 0.0] {
        s.append(route_entry(None, c)).unwrap();
    }
    assert_eq!(due_gap(&s, 3).unwrap(), None);
    s.append(route_entry(None, 0.0)).unwrap();
    let g = due_gap(&s, 3).unwrap().unwrap();
    assert_eq!(
        (
            g.consecutive_escalations,
            g.first_seq,
            g.last_seq,
            g.confidence_ceiling
        ),
        (3, 11, 13, 0.3)
    );
}

fn outcome(seq: u64, decided: Option<&str>, confidence: f64, domain: Option<&str>) -> RouteOutcome {
    RouteOutcome {
        seq,
        decided: decided.map(str::to_string),
        confidence,
        domain: domain.map(str::to_string),
    }
}

#[test]
fn the_gap_counts_only_the_trailing_run() {
    let o = [
        outcome(1, None, 0.9, None),
        outcome(2, None, 0.9, None),
        outcome(3, None, 0.9, None),
        outcome(4, Some("a"), 0.9, None),
        outcome(6, None, 0.1, Some("code")),
        outcome(9, None, 0.4, Some("ops")),
    ];
    assert_eq!(derive_gap(&o, "x", 3), None);
    let g = derive_gap(&o, "x", 2).unwrap();
    assert_eq!(
        (
            g.consecutive_escalations,
            g.first_seq,
            g.last_seq,
            g.confidence_ceiling
        ),
        (2, 6, 9, 0.4)
    );
    assert_eq!(
        derive_gap(&o[..3], "x", 3).unwrap().consecutive_escalations,
        3
    );
    assert_eq!(derive_gap(&[], "x", 1), None);
    assert_eq!(domain_signal(&o[4..]), "code");
    assert_eq!(
        domain_signal(&[
            outcome(1, None, 0.0, Some("ops")),
            outcome(2, None, 0.0, Some("code")),
            outcome(3, None, 0.0, Some("code"))
        ]),
        "code"
    );
    assert_eq!(domain_signal(&o[..2]), "general");
}

#[test]
fn route_bodies_are_read_as_forum_reads_them() {
    let body =
        canonical::parse(r#"{"decided":null,"confidence":1,"frame":{"domain":"code"}}"#).unwrap();
    assert_eq!(route_outcome(4, &body), outcome(4, None, 1.0, Some("code")));
    let body = canonical::parse(r#"{"task":"t"}"#).unwrap();
    assert_eq!(route_outcome(0, &body), outcome(0, None, 0.0, None));
    let body = canonical::parse(r#"{"decided":"","confidence":null}"#).unwrap();
    assert_eq!(route_outcome(0, &body).decided.as_deref(), Some(""));
}

#[test]
fn the_threshold_is_at_least_one() {
    assert_eq!(
        check_threshold(0).unwrap_err().to_string(),
        "min_escalations must be at least 1, found 0"
    );
    assert_eq!(check_threshold(5), Ok(5));
    let t: toml::Table = toml::from_str("min_escalations = 4").unwrap();
    assert_eq!(min_escalations_from_toml(&t), Ok(4));
    let t: toml::Table = toml::from_str("min_escalations = 0").unwrap();
    assert!(
        min_escalations_from_toml(&t)
            .unwrap_err()
            .contains("at least 1")
    );
    let t: toml::Table = toml::from_str("threshold = 2").unwrap();
    assert!(
        min_escalations_from_toml(&t)
            .unwrap_err()
            .contains("unknown key \"threshold\"")
    );
    let p =
        crate::policy::Policy::from_toml_str("[lanes]\nmin_escalations = 2\n", "p.toml").unwrap();
    assert_eq!(p.min_escalations, 2);
}
