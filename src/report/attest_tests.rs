use super::*;

fn entry(seq: u64, kind: &str, ts: f64) -> Entry {
    Entry {
        seq,
        ts,
        actor: "a".into(),
        kind: kind.into(),
        causal_parent: (seq > 0).then_some(0),
        payload_hash: format!("{seq:064x}"),
        prev_hash: String::new(),
        entry_hash: format!("{:064x}", seq + 0xe0),
    }
}

fn body(text: &str) -> Option<Value> {
    Some(crate::ledger::canonical::parse(text).unwrap())
}

/// A run of two tasks, each changed, checked and merged, with rules on its ship entries.
fn items() -> Vec<(Entry, Option<Value>)> {
    let rules = r#""rules":{"policy":"pp","roster":"rr","runtime":"tt"}"#;
    vec![
        (
            entry(0, kind::REQUEST, 1000.0),
            body(
                r#"{"runtime":{"v":1},"text":"fix calc","work":{"base":"b0","branch":"main","run_branch":"forum/run-0"}}"#,
            ),
        ),
        (
            entry(3, kind::PLAN, 1001.0),
            body(r#"{"tasks":[],"usage":{"model":"planner-m"}}"#),
        ),
        (
            entry(7, kind::RESULT, 1002.0),
            body(r#"{"id":"T1","model":"worker/m 1","ok":true}"#),
        ),
        (
            entry(9, kind::CHANGE, 1003.0),
            body(r#"{"task":"T1","commit":"c1","files":[]}"#),
        ),
        (
            entry(10, kind::CHANGE, 1003.0),
            body(r#"{"task":"T2","commit":"c2","files":[]}"#),
        ),
        (
            entry(13, kind::SHIP, 1004.0),
            body(&format!(
                r#"{{"task":"T1","change":9,"decision":"merge","model":"gate-m",{rules}}}"#
            )),
        ),
        (
            entry(14, kind::SHIP, 1004.5),
            body(&format!(
                r#"{{"task":"T2","change":10,"decision":"merge","model":"gate-m",{rules}}}"#
            )),
        ),
    ]
}

fn context() -> Context {
    Context {
        ledger: "main".into(),
        ledger_id: "e0".into(),
        tip: Some("t9".into()),
        size: 22,
        root: "r22".into(),
        note: Some("origin\n22\nAAAA\n\n\u{2014} k sig\n".into()),
        version: "0.1.0".into(),
    }
}

#[test]
fn a_runs_record_gives_its_merges_seats_decisions_and_times() {
    let r = RunRecord::from_items(&items(), 0).unwrap();
    assert_eq!(r.base, "b0");
    assert_eq!(
        r.merged,
        [
            ("T1".into(), "c1".into(), 9),
            ("T2".into(), "c2".into(), 10)
        ]
    );
    assert_eq!(
        r.seats,
        [
            ("orchestrator".into(), "gate-m".into()),
            ("planner".into(), "planner-m".into()),
            ("worker".into(), "worker/m 1".into()),
        ]
    );
    assert_eq!(r.decided.len(), 2);
    assert_eq!((r.started, r.finished), (1000.0, 1004.5));
    // The runtime is a dependency by digest, not a parameter.
    assert_eq!(r.request.get("runtime"), None);
    assert_eq!(
        r.runtime_digest.as_deref(),
        Some(hash::payload_hash(&Value::from_serde(&json!({"v": 1}))).as_str())
    );
    let no_work = vec![(entry(0, kind::REQUEST, 1.0), body(r#"{"text":"x"}"#))];
    let e = RunRecord::from_items(&no_work, 0).unwrap_err();
    assert!(e.contains("not a --work run"), "{e}");
}

#[test]
fn the_statement_of_a_fixed_run_is_exactly_this() {
    let r = RunRecord::from_items(&items(), 0).unwrap();
    let s = serde_json::to_string(&statement(&r, &context())).unwrap();
    let runtime = hash::payload_hash(&Value::from_serde(&json!({"v": 1})));
    let want = r#"{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"forum/run-0","digest":{"gitCommit":"t9"}},{"name":"change/T1","digest":{"gitCommit":"c1"}},{"name":"change/T2","digest":{"gitCommit":"c2"}}],"predicateType":"https://slsa.dev/provenance/v1","predicate":{"buildDefinition":{"buildType":"urn:git-forum:buildtype:work-run:v1","externalParameters":{"text":"fix calc","work":{"base":"b0","branch":"main","run_branch":"forum/run-0"}},"internalParameters":{"ledger":"main","requestEntry":"00000000000000000000000000000000000000000000000000000000000000e0","run":0},"resolvedDependencies":[{"name":"base","digest":{"gitCommit":"b0"},"annotations":{"branch":"main"}},{"name":"runtime","digest":{"sha256":"RUNTIME"}},{"name":"roster","digest":{"sha256":"rr"}},{"name":"policy","digest":{"sha256":"pp"}},{"name":"seat/orchestrator","uri":"urn:git-forum:model:gate-m","annotations":{"model":"gate-m","seat":"orchestrator"}},{"name":"seat/planner","uri":"urn:git-forum:model:planner-m","annotations":{"model":"planner-m","seat":"planner"}},{"name":"seat/worker","uri":"urn:git-forum:model:worker%2Fm%201","annotations":{"model":"worker/m 1","seat":"worker"}}]},"runDetails":{"builder":{"id":"urn:git-forum:builder","version":{"git-forum":"0.1.0"}},"metadata":{"invocationId":"main/0","startedOn":"1970-01-01T00:16:40Z","finishedOn":"1970-01-01T00:16:44.500000Z"},"byproducts":[{"name":"ledger","digest":{"sha256":"e0"},"annotations":{"name":"main"}},{"name":"checkpoint","digest":{"sha256":"r22"},"annotations":{"size":22}},{"name":"checkpoint-note","content":"b3JpZ2luCjIyCkFBQUEKCuKAlCBrIHNpZwo=","mediaType":"text/plain; charset=utf-8"},{"name":"ship/T1","digest":{"sha256":"00000000000000000000000000000000000000000000000000000000000000ed"},"annotations":{"change":9,"decision":"merge","rules":{"policy":"pp","roster":"rr","runtime":"tt"},"seq":13}},{"name":"ship/T2","digest":{"sha256":"00000000000000000000000000000000000000000000000000000000000000ee"},"annotations":{"change":10,"decision":"merge","rules":{"policy":"pp","roster":"rr","runtime":"tt"},"seq":14}}]}}}"#
        .replace("RUNTIME", &runtime);
    assert_eq!(s, want);
    // It reads back as the same statement: every field is one the types know.
    let back: Statement = serde_json::from_str(&s).unwrap();
    assert_eq!(back, statement(&r, &context()));
    let unknown = s.replacen(r#""predicateType""#, r#""extra":1,"predicateType""#, 1);
    assert!(serde_json::from_str::<Statement>(&unknown).is_err());
}

#[test]
fn times_are_rfc3339_in_utc() {
    assert_eq!(rfc3339(0.0), "1970-01-01T00:00:00Z");
    assert_eq!(rfc3339(1_733_400_000.25), "2024-12-05T12:00:00.250000Z");
    assert_eq!(rfc3339(951_782_400.0), "2000-02-29T00:00:00Z");
}

#[test]
fn the_first_difference_is_named_by_its_path() {
    let a = json!({"a": [1, {"b": 2}], "c": 3});
    assert_eq!(first_difference(&a, &a, ""), None);
    let b = json!({"a": [1, {"b": 5}], "c": 3});
    assert_eq!(first_difference(&a, &b, "").as_deref(), Some("a[1].b"));
    let c = json!({"a": [1], "c": 3});
    assert_eq!(
        first_difference(&a, &c, "").as_deref(),
        Some("a (length 2 vs 1)")
    );
    let d = json!({"a": [1, {"b": 2}]});
    assert_eq!(first_difference(&a, &d, "").as_deref(), Some("c"));
}
