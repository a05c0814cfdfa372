//! The flight recorder against Forum's own outputs (`flight_recorder_vectors.json` in the shared
//! conformance folder, when present) and against rules stated in forum-spec §21.

use super::*;

/// Forum's vectors, or `None` when the shared folder is absent (a user's clone); a panic
/// instead when `GIT_FORUM_REQUIRE_SHARED=1`.
fn vectors() -> Option<Vec<serde_json::Value>> {
    let dir = match std::env::var_os("GIT_FORUM_CONFORMANCE_DIR") {
        Some(d) if !d.is_empty() => std::path::PathBuf::from(d),
        _ => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance"),
    };
    let path = dir.join("flight_recorder_vectors.json");
    match std::fs::read_to_string(&path) {
        Ok(t) => Some(serde_json::from_str(&t).expect("vectors are JSON")),
        Err(_) if std::env::var("GIT_FORUM_REQUIRE_SHARED").is_ok_and(|v| v == "1") => {
            panic!("{} is absent", path.display())
        }
        Err(_) => None,
    }
}

fn trace_text(v: &serde_json::Value) -> String {
    match v.get("trace_text") {
        Some(t) => t.as_str().unwrap().to_string(),
        None => serde_json::to_string(&v["trace"]).unwrap(),
    }
}

#[test]
fn every_good_trace_gives_forums_record_and_row_byte_for_byte() {
    let Some(vs) = vectors() else { return };
    let mut checked = 0;
    for v in vs.iter().filter(|v| v["import_trace"]["rc"] == 0) {
        let fmt = Format::from_name(v["format"].as_str().unwrap()).unwrap();
        let f = import(&trace_text(v), fmt).unwrap();
        assert_eq!(
            format!("{}\n", record(&f).python_pretty()),
            v["import_trace"]["stdout"].as_str().unwrap(),
            "{}",
            v["name"]
        );
        assert_eq!(
            format!("{}\n", mine(&f, 2).python_pretty()),
            v["mine"]["stdout"].as_str().unwrap(),
            "{}",
            v["name"]
        );
        checked += 1;
    }
    assert_eq!(checked, 4);
}

#[test]
fn every_bad_trace_is_refused_naming_what_forum_names() {
    let Some(vs) = vectors() else { return };
    let mut checked = 0;
    for v in vs.iter().filter(|v| v["import_trace"]["rc"] != 0) {
        assert_eq!(v["import_trace"]["rc"], 2);
        let fmt = Format::from_name(v["format"].as_str().unwrap()).unwrap();
        let e = import(&trace_text(v), fmt).unwrap_err().0;
        let forum = v["import_trace"]["stderr_first_line"].as_str().unwrap();
        // Forum's message names the keys it wanted between quotes; ours names the same ones.
        for key in forum.split('\'').skip(1).step_by(2) {
            assert!(e.contains(&format!("'{key}'")), "{e} vs {forum}");
        }
        if forum.contains("cannot read trace") {
            assert!(
                e.contains("not JSON") && e.contains("line 1, column 3"),
                "{e}"
            );
        }
        if forum.contains("non-empty list") {
            assert!(e.contains("non-empty list"), "{e}");
        }
        assert!(!e.contains('\n'));
        checked += 1;
    }
    assert_eq!(checked, 5);
}

fn generic(events: &str) -> Folded {
    import(events, Format::Generic).unwrap()
}

#[test]
fn parents_resolve_by_id_to_earlier_events_only() {
    let f = generic(
        r#"[{"actor":"a","kind":"k","id":"x"},{"actor":"b","kind":"k","parent":"x","id":1},
            {"actor":"c","kind":"k","parent":1.0},{"actor":"d","kind":"k","parent":true},
            {"actor":"e","kind":"k","parent":"1"},{"actor":"f","kind":"k","parent":"later"},
            {"actor":"g","kind":"k","id":"later"}]"#,
    );
    let parents: Vec<Option<i64>> = f.items.iter().map(|(e, _)| e.causal_parent).collect();
    // 1, 1.0 and true are one Python dict key; "1" is another; "later" is not seen yet.
    assert_eq!(
        parents,
        vec![None, Some(0), Some(1), Some(1), None, None, None]
    );
    assert_eq!(f.dangling, 2);
    assert!(f.verified());
    let ts: Vec<f64> = f.items.iter().map(|(e, _)| e.ts).collect();
    assert_eq!(ts, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
}

#[test]
fn forum_fallbacks_follow_python_truthiness() {
    let f = import(
        r#"[{"name":"","run_type":"tool","id":0,"run_id":"r"},{"run_type":null,"name":7,"parent_run_id":"r"}]"#,
        Format::Langsmith,
    )
    .unwrap();
    let (a, b) = (&f.items[0].0, &f.items[1].0);
    assert_eq!((a.actor.as_str(), a.kind.as_str()), ("tool", "tool"));
    assert_eq!((b.actor.as_str(), b.kind.as_str()), ("7", "run"));
    // id 0 is falsy, so run_id "r" is the id the second run names.
    assert_eq!(b.causal_parent, Some(0));
    let g = generic(r#"[{"actor":null,"kind":{"a":1},"payload":null}]"#);
    assert_eq!(g.items[0].0.actor, "None");
    assert_eq!(g.items[0].0.kind, "{'a': 1}");
    assert_eq!(g.items[0].1, Value::Null);
}

#[test]
fn ids_that_cannot_be_dict_keys_are_refused() {
    let e = import(r#"[{"actor":"a","kind":"k","id":[1]}]"#, Format::Generic).unwrap_err();
    assert!(e.0.contains("event #0") && e.0.contains("a list"), "{e}");
    let e = import(r#"[{"actor":"a","kind":"k"}, 3]"#, Format::Generic).unwrap_err();
    assert!(e.0.contains("event #1 is a number"), "{e}");
}

#[test]
fn the_record_of_a_fold_is_its_merkle_root_over_entry_hashes() {
    let f =
        generic(r#"[{"actor":"a","kind":"k"},{"actor":"b","kind":"k"},{"actor":"c","kind":"k"}]"#);
    let r = record(&f);
    assert_eq!(
        r.get("merkle_root").and_then(Value::as_str),
        Some(f.merkle_root().as_str())
    );
    assert_eq!(r.get("schema").and_then(Value::as_str), Some(SCHEMA));
    assert!(r.get("totals").is_none());
}

#[test]
fn every_format_has_one_name() {
    for f in Format::ALL {
        assert_eq!(Format::from_name(f.name()), Some(f));
    }
    assert_eq!(Format::from_name("jaeger"), None);
}

#[test]
fn mine_grades_independent_checks_and_counts_results_with_a_model() {
    let f = generic(
        r#"[{"actor":"client","kind":"request","payload":{"text":"Ship  IT"}},
            {"actor":"backend","kind":"result","parent":0,"payload":{"id":"T1","ok":true,"model":"m"}},
            {"actor":"validator","kind":"verdict","payload":{"ok":true}},
            {"actor":"verifier","kind":"verification","payload":{"ok":true}},
            {"actor":"backend","kind":"verdict","payload":{"ok":false}}]"#,
    );
    let row = mine(&f, 2);
    let grade = row.get("grade").unwrap();
    // The producer's own verdict does not count.
    assert_eq!(grade.get("label").and_then(Value::as_str), Some("PASS"));
    assert_eq!(grade.get("checks"), Some(&Value::int(2)));
    assert_eq!(
        row.get("budget").and_then(|b| b.get("model_calls")),
        Some(&Value::int(1))
    );
    assert_eq!(row.get("prompt").and_then(Value::as_str), Some("Ship  IT"));
    // The seal covers the row as finally written.
    let seal = row.get("row_hash").and_then(Value::as_str).unwrap();
    assert_eq!(seal, crate::report::gradable::row_hash(&row));
    assert_eq!(
        mine(&f, 3)
            .get("grade")
            .and_then(|g| g.get("label"))
            .and_then(Value::as_str),
        Some("FAIL")
    );
}

#[test]
fn old_otlp_names_read_the_same() {
    let new = r#"{"resourceSpans":[{"scopeSpans":[{"scope":{"name":"s"},"spans":[{"traceId":"t","spanId":"a","name":"x"}]}]}]}"#;
    let old = new
        .replace("scopeSpans", "instrumentationLibrarySpans")
        .replace("\"scope\"", "\"instrumentationLibrary\"");
    let a = import(new, Format::Otlp).unwrap();
    let b = import(&old, Format::Otlp).unwrap();
    assert_eq!(a.merkle_root(), b.merkle_root());
    assert_eq!(a.items[0].1.get("scope").and_then(Value::as_str), Some("s"));
}
