//! Unit tests of the campaign core: declarations and their refusals, the reduction and its
//! honesty gate, next features and actions; and, where Forum's conformance vectors are on
//! disk (`GIT_FORUM_CONFORMANCE_DIR`, else `../shared/conformance`), every room, next list
//! and text Forum printed, rebuilt from the prefix of `campaign_ledger/` it was printed at.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::*;
use crate::ledger::merkle::merkle_root;
use crate::ledger::{Entry, kind};

fn entry(seq: u64, k: &str) -> Entry {
    Entry {
        seq,
        ts: seq as f64,
        actor: "t".into(),
        kind: k.into(),
        causal_parent: None,
        payload_hash: format!("h{seq}"),
        prev_hash: String::new(),
        entry_hash: format!("{seq:064x}"),
    }
}

fn chain(bodies: &[(&str, Value)]) -> Vec<(Entry, Option<Value>)> {
    bodies
        .iter()
        .enumerate()
        .map(|(i, (k, b))| (entry(i as u64, k), Some(b.clone())))
        .collect()
}

fn one_project(features: Value) -> Value {
    json!({"campaign_id": "c", "title": "t", "projects": [
        {"project_id": "p", "owner": "forum", "priority": 1, "features": features}
    ]})
}

#[test]
fn a_cycle_is_refused_naming_every_feature_left_as_forum_does() {
    let text = one_project(json!([
        {"feature_id": "a", "agent": "backend", "instruction": "a", "depends_on": ["b"]},
        {"feature_id": "b", "agent": "backend", "instruction": "b", "depends_on": ["a"]},
        {"feature_id": "c", "agent": "backend", "instruction": "c"},
    ]))
    .to_string();
    let e = Campaign::parse(&text).unwrap_err();
    assert_eq!(
        e.to_string(),
        "campaign rejected: dependency cycle among features: ['a', 'b']"
    );
    assert!(matches!(e, DeclareError::Rejected(_)));
}

#[test]
fn duplicates_and_unknown_dependencies_are_rejected_and_bad_json_is_invalid() {
    let dup = one_project(json!([{"feature_id": "a"}, {"feature_id": "a"}])).to_string();
    assert_eq!(
        Campaign::parse(&dup).unwrap_err().to_string(),
        "campaign rejected: duplicate feature id: 'a'"
    );
    let unknown = one_project(json!([{"feature_id": "a", "depends_on": ["zz"]}])).to_string();
    assert_eq!(
        Campaign::parse(&unknown).unwrap_err().to_string(),
        "campaign rejected: feature 'a' depends on unknown feature 'zz'"
    );
    for (bad, needle) in [
        ("{", "not JSON"),
        ("[]", "must be a JSON object"),
        (r#"{"title": "x"}"#, "has no campaign_id"),
        (
            r#"{"campaign_id": "c", "projects": [{"project_id": "p", "priority": "high"}]}"#,
            "priority must be an integer",
        ),
        (
            r#"{"campaign_id": "c", "projects": [{"project_id": "p", "features": [{"feature_id": "a", "depends_on": "b"}]}]}"#,
            "depends_on must be a list",
        ),
    ] {
        let e = Campaign::parse(bad).unwrap_err();
        assert!(matches!(e, DeclareError::Invalid(_)), "{bad}: {e}");
        assert!(e.to_string().contains(needle), "{bad}: {e}");
    }
}

#[test]
fn the_declared_body_fills_in_forums_defaults() {
    let c = Campaign::parse(&one_project(json!([{"feature_id": "a"}])).to_string()).unwrap();
    assert_eq!(
        c.payload()["projects"][0]["features"][0],
        json!({"feature_id": "a", "title": "", "agent": "", "instruction": "", "priority": 0, "depends_on": [], "done_when": []})
    );
    assert_eq!(Campaign::from_payload(&c.payload()), Some(c));
}

#[test]
fn python_repr_quotes_as_python_does() {
    assert_eq!(py_repr("a"), "'a'");
    assert_eq!(py_repr("it's"), "\"it's\"");
    assert_eq!(py_repr("a\\b\n"), "'a\\\\b\\n'");
}

#[test]
fn done_is_honoured_only_when_a_real_ok_result_of_that_feature_witnesses_it() {
    let declared = one_project(json!([
        {"feature_id": "a", "priority": 2},
        {"feature_id": "b", "priority": 1, "depends_on": ["a"]},
        {"feature_id": "c", "priority": 1},
    ]));
    let items = chain(&[
        (kind::CAMPAIGN_DECLARED, declared),
        (kind::RESULT, json!({"id": "c", "output": "x", "ok": true})),
        // a claims done, pointing at c's result: not witnessed.
        (
            kind::FEATURE_STATUS,
            json!({"campaign_id": "c", "project_id": "p", "feature_id": "a", "status": "done", "reason": "", "witnessed_seq": 1}),
        ),
        // c's claim is real; a float seq never counts.
        (
            kind::FEATURE_STATUS,
            json!({"campaign_id": "c", "project_id": "p", "feature_id": "c", "status": "done", "reason": "", "witnessed_seq": 1}),
        ),
        // another campaign's status is ignored.
        (
            kind::FEATURE_STATUS,
            json!({"campaign_id": "other", "project_id": "p", "feature_id": "b", "status": "done"}),
        ),
    ]);
    let s = reduce(&items, "c").expect("declared");
    let by = |id: &str| s.features.iter().find(|f| f.feature_id == id).unwrap();
    assert_eq!(by("a").status, FeatureState::Unwitnessed);
    assert_eq!(
        by("a").violation.as_deref(),
        Some("claimed done without witnessing result")
    );
    assert_eq!(by("c").status, FeatureState::Done);
    assert_eq!(by("b").status, FeatureState::Pending);
    assert_eq!(by("b").blocking_deps, vec!["a".to_string()]);
    assert!(!s.complete);
    let next = next_features(&s);
    assert!(next.runnable.is_empty());
    assert_eq!(next.blocked.len(), 1);
    assert_eq!(next.blocked[0].reason, "blocked: a is unwitnessed");
    let acts = next_actions(&s);
    let kinds: Vec<&str> = acts.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(kinds, vec!["investigate:a", "unblock:b"]);
    assert_eq!(acts[0].reason, "claimed done without witnessing result");
    // Forum's key order, as serialized.
    let text = serde_json::to_string(by("a")).unwrap();
    let at: Vec<usize> = [
        "feature_id",
        "project_id",
        "owner",
        "priority",
        "depends_on",
        "status",
        "reason",
        "witnessed_seq",
        "external",
        "external_source",
        "violation",
        "deps_met",
        "blocking_deps",
    ]
    .iter()
    .map(|k| text.find(&format!("\"{k}\":")).unwrap())
    .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{text}");
    let float = chain(&[
        (
            kind::CAMPAIGN_DECLARED,
            one_project(json!([{"feature_id": "c"}])),
        ),
        (kind::RESULT, json!({"id": "c", "ok": true})),
        (
            kind::FEATURE_STATUS,
            json!({"campaign_id": "c", "project_id": "p", "feature_id": "c", "status": "done", "witnessed_seq": 1.0}),
        ),
    ]);
    assert_eq!(
        reduce(&float, "c").unwrap().features[0].status,
        FeatureState::Unwitnessed
    );
    assert!(reduce(&items, "nope").is_none());
}

#[test]
fn runnable_features_go_by_priority_then_id_and_waiting_ones_are_in_neither_list() {
    let items = chain(&[(
        kind::CAMPAIGN_DECLARED,
        one_project(json!([
            {"feature_id": "b", "priority": 3},
            {"feature_id": "a", "priority": 3},
            {"feature_id": "z", "priority": 9},
            {"feature_id": "w", "depends_on": ["z"]},
        ])),
    )]);
    let s = reduce(&items, "c").unwrap();
    let next = next_features(&s);
    let ids: Vec<&str> = next
        .runnable
        .iter()
        .map(|f| f.feature_id.as_str())
        .collect();
    assert_eq!(ids, vec!["z", "a", "b"]);
    assert!(next.blocked.is_empty());
}

#[test]
fn an_ingest_is_checked_against_the_campaign() {
    let c = Campaign::parse(&one_project(json!([{"feature_id": "a"}])).to_string()).unwrap();
    let ok = Ingest {
        campaign_id: "c".into(),
        project_id: "p".into(),
        feature_id: Some("a".into()),
        status: "done".into(),
        reason: String::new(),
        source: "external:x".into(),
    };
    assert!(ok.check(&c).is_ok());
    assert_eq!(ok.entry().0, kind::FEATURE_STATUS);
    let project = Ingest {
        feature_id: None,
        ..ok.clone()
    };
    assert_eq!(project.entry().0, kind::PROJECT_STATUS);
    for (bad, needle) in [
        (
            Ingest {
                project_id: "q".into(),
                ..ok.clone()
            },
            "no project \"q\"",
        ),
        (
            Ingest {
                feature_id: Some("zz".into()),
                ..ok.clone()
            },
            "no feature \"zz\"",
        ),
        (
            Ingest {
                status: "finished".into(),
                ..ok.clone()
            },
            "is not one of",
        ),
    ] {
        let e = bad.check(&c).unwrap_err().to_string();
        assert!(e.contains(needle), "{e}");
    }
}

// ---- Forum's own outputs ----

fn conformance() -> Option<PathBuf> {
    let dir = match std::env::var_os("GIT_FORUM_CONFORMANCE_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance"),
    };
    if dir.join("campaign_vectors.json").is_file() {
        return Some(dir);
    }
    assert!(
        std::env::var("GIT_FORUM_REQUIRE_SHARED").as_deref() != Ok("1"),
        "GIT_FORUM_REQUIRE_SHARED=1 but {} has no campaign_vectors.json",
        dir.display()
    );
    eprintln!("skipped: no conformance vectors at {}", dir.display());
    None
}

/// Forum's ledger after the last step, every entry with its body.
fn forum_ledger(dir: &std::path::Path) -> Vec<(Entry, Option<Value>)> {
    let lines = |f: &str| -> Vec<Value> {
        std::fs::read_to_string(dir.join("campaign_ledger").join(f))
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let bodies: std::collections::BTreeMap<String, Value> = lines("payloads.jsonl")
        .into_iter()
        .map(|p| (p["hash"].as_str().unwrap().to_string(), p["body"].clone()))
        .collect();
    lines("entries.jsonl")
        .into_iter()
        .map(|e| {
            let e: Entry = serde_json::from_value(e).unwrap();
            let b = bodies.get(&e.payload_hash).cloned();
            (e, b)
        })
        .collect()
}

fn step<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == name)
        .unwrap_or_else(|| panic!("no step {name}"))
}

fn room_at(items: &[(Entry, Option<Value>)]) -> Room {
    let hashes: Vec<&str> = items.iter().map(|(e, _)| e.entry_hash.as_str()).collect();
    let s = reduce(items, "c-shared").expect("declared");
    room(&s, &merkle_root(&hashes), true)
}

#[test]
fn every_room_and_next_list_forum_printed_is_rebuilt_from_its_ledger_prefix() {
    let Some(dir) = conformance() else { return };
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("campaign_vectors.json")).unwrap())
            .unwrap();
    let items = forum_ledger(&dir);
    assert_eq!(items.len(), 15);
    // (step, entries in the ledger when Forum printed it)
    for (name, size) in [
        ("status_0", 1),
        ("run", 14),
        ("status_1", 14),
        ("status_2", 15),
    ] {
        let want: Value = serde_json::from_str(step(&v, name)["stdout"].as_str().unwrap()).unwrap();
        let got = serde_json::to_value(room_at(&items[..size])).unwrap();
        assert_eq!(got, want, "{name}");
    }
    for (name, size) in [("next_0", 1), ("next_1", 14)] {
        let want: Value = serde_json::from_str(step(&v, name)["stdout"].as_str().unwrap()).unwrap();
        let s = reduce(&items[..size], "c-shared").unwrap();
        let got = json!({ "next_actions": next_actions(&s) });
        assert_eq!(got, want, "{name}");
    }
    let text = step(&v, "status_0_text")["stdout"].as_str().unwrap();
    assert_eq!(
        room_text(&room_at(&items[..1])),
        text.trim_end_matches('\n')
    );
    // The declared body is Forum's, byte for byte once canonical.
    let declared = Campaign::from_json(&v["campaign"]).unwrap();
    assert_eq!(Some(&declared.payload()), items[0].1.as_ref());
    // The cycle is refused with Forum's words.
    let cyc = Campaign::from_json(&v["cycle_campaign"]).unwrap();
    let want = step(&v, "declare_cycle")["stderr_first_line"]
        .as_str()
        .unwrap();
    assert_eq!(cyc.validate().unwrap_err().to_string(), want);
}

#[test]
fn the_bodies_a_round_writes_are_forums() {
    let Some(dir) = conformance() else { return };
    let items = forum_ledger(&dir);
    let body = |seq: usize| items[seq].1.clone().unwrap();
    assert_eq!(
        dispatch_body("c-shared", &["api-login".to_string()]),
        body(2)
    );
    assert_eq!(
        round_status("c-shared", "api", "api-login", true, "ignored", 5),
        body(6)
    );
    let after_first = reduce(&items[..7], "c-shared").unwrap();
    assert_eq!(result_snapshot(&after_first), body(7));
    let web = Ingest {
        campaign_id: "c-shared".into(),
        project_id: "web".into(),
        feature_id: Some("web-form".into()),
        status: "in_progress".into(),
        reason: "started".into(),
        source: "external:telos".into(),
    };
    assert_eq!(web.entry(), (kind::FEATURE_STATUS, body(1)));
}
