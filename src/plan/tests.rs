//! Unit tests of the plan compiler: parsing in both modes, the layering, edges, Python
//! renderings and upstream injection.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value as JsonValue;
use serde_json::json;

use super::*;

fn task(id: &str, deps: &[&str]) -> Task {
    let mut t = Task::new(id, "a", id);
    t.depends_on = deps.iter().map(|s| s.to_string()).collect();
    t
}

fn plan(tasks: Vec<Task>) -> Plan {
    Plan { tasks }
}

fn waves(p: &Plan) -> Vec<Vec<String>> {
    p.schedule().unwrap()
}

#[test]
fn kahn_layers_sort_each_wave_in_code_point_order() {
    let p = plan(vec![
        task("root", &[]),
        task("é", &["root"]),
        task("b", &["root"]),
        task("B", &["root"]),
        task("10", &["root"]),
        task("9", &["root"]),
        task("end", &["b", "é"]),
    ]);
    assert_eq!(
        waves(&p),
        vec![vec!["root"], vec!["10", "9", "B", "b", "é"], vec!["end"]]
    );
}

#[test]
fn empty_plan_has_no_waves() {
    assert_eq!(waves(&Plan::default()), Vec::<Vec<String>>::new());
    let c = Plan::default().compile().unwrap();
    assert_eq!(c.payload().canonical(), r#"{"edges":[],"waves":[]}"#);
}

#[test]
fn unknown_dependencies_are_reported_before_cycles() {
    let p = plan(vec![task("x", &["y"]), task("y", &["x", "zz", "a'b"])]);
    let e = p.schedule().unwrap_err();
    assert_eq!(e.kind(), "ValueError");
    assert_eq!(
        e.to_string(),
        "task 'y' depends on unknown task(s): [\"a'b\", 'zz']"
    );
}

#[test]
fn cycles_name_every_blocked_task() {
    let p = plan(vec![
        task("a", &[]),
        task("b", &["a", "d"]),
        task("c", &["b"]),
        task("d", &["c"]),
        task("tail", &["d"]),
    ]);
    let e = p.schedule().unwrap_err();
    assert_eq!(e.kind(), "CycleError");
    assert_eq!(
        e.to_string(),
        "dependency cycle among: ['b', 'c', 'd', 'tail']"
    );
    let e = plan(vec![task("s", &["s"])]).schedule().unwrap_err();
    assert_eq!(e, PlanError::Cycle(vec!["s".into()]));
}

#[test]
fn duplicate_ids_forum_overwrites_strict_refuses() {
    let p = plan(vec![task("a", &[]), task("b", &["a"]), task("b", &[])]);
    assert_eq!(waves(&p), vec![vec!["a", "b"]]);
    let e = p.compile().unwrap_err();
    assert_eq!(e.to_string(), "duplicate task id(s): ['b']");
}

#[test]
fn edges_keep_duplicates_and_order_wins_for_a_dep_listed_both_ways() {
    let doc = json!({"id": "t", "agent": "a", "instruction": "i",
        "depends_on": ["u", "u", {"id": "v", "type": "order"}, {"id": "u", "type": "order"}]});
    let t = parse_task(0, &doc, ParseMode::Forum).unwrap();
    assert_eq!(t.depends_on, ["u", "u", "v", "u"]);
    assert_eq!(t.data_deps(), Vec::<&str>::new());
    let p = plan(vec![t, task("u", &[]), task("v", &[])]);
    let kinds: Vec<_> = p.edges().iter().map(|e| (e.from.clone(), e.kind)).collect();
    assert_eq!(kinds.len(), 4);
    assert!(kinds.iter().all(|(_, k)| *k == EdgeType::Order));
}

#[test]
fn edge_types_forum_vs_strict() {
    let deps = json!([{"id": "a", "type": "weird"}, {"id": 7}, {"id": "b", "type": "data"}]);
    let (ids, order) = parse_deps(Some(&deps), "t", ParseMode::Forum).unwrap();
    assert_eq!(ids, ["a", "7", "b"]);
    assert!(order.is_empty());
    let e = parse_deps(Some(&deps), "t", ParseMode::Strict).unwrap_err();
    assert_eq!(
        e.to_string(),
        "task 't': dependency 'a' has unknown edge type 'weird'; use \"data\" or \"order\""
    );
    let e = parse_deps(Some(&json!([{"type": "order"}])), "t", ParseMode::Forum).unwrap_err();
    assert!(e.to_string().contains("without \"id\""), "{e}");
    let e = parse_deps(Some(&json!("a")), "t", ParseMode::Forum).unwrap_err();
    assert!(e.to_string().contains("must be a list"), "{e}");
    let e = parse_deps(Some(&json!([1])), "t", ParseMode::Forum).unwrap_err();
    assert!(e.to_string().contains("item 1"), "{e}");
}

#[test]
fn done_when_rules() {
    let d = |v: JsonValue| parse_done_when(Some(&v), "t");
    assert_eq!(d(json!("")).unwrap(), Vec::<String>::new());
    assert_eq!(d(json!("  ok \u{1f}")).unwrap(), ["ok"]);
    assert_eq!(
        d(json!(["a", " ", 3, 1.5, true, null])).unwrap(),
        ["a", "3", "1.5", "True", "None"]
    );
    assert_eq!(parse_done_when(None, "t").unwrap(), Vec::<String>::new());
    assert!(d(json!(5)).is_err());
    assert!(d(json!({"a": 1})).is_err());
    assert!(d(json!([["nested"]])).is_err());
}

#[test]
fn contract_instruction_appends_done_criteria() {
    let mut t = Task::new("t", "a", "do it");
    assert_eq!(t.contract_instruction(), "do it");
    t.done_when = vec!["one".into(), "two".into()];
    assert_eq!(
        t.contract_instruction(),
        "do it\n\nDone criteria:\n- one\n- two"
    );
}

#[test]
fn strict_task_parsing() {
    let e = parse_task(2, &json!({"agent": "a"}), ParseMode::Strict).unwrap_err();
    assert_eq!(e.to_string(), "task #3: has no \"id\"");
    let e = parse_task(
        0,
        &json!({"id": "", "agent": "a", "instruction": "i"}),
        ParseMode::Strict,
    )
    .unwrap_err();
    assert!(e.to_string().contains("empty \"id\""));
    let e = parse_task(
        0,
        &json!({"id": "t", "agent": "a", "instruction": "i", "deps": []}),
        ParseMode::Strict,
    )
    .unwrap_err();
    assert!(e.to_string().contains("unknown field \"deps\""), "{e}");
    let e = parse_task(
        0,
        &json!({"id": "t", "instruction": "i"}),
        ParseMode::Strict,
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "task 't': has no \"agent\"");
    let e = parse_task(0, &json!(["t"]), ParseMode::Strict).unwrap_err();
    assert_eq!(e.to_string(), "task #1: must be an object, found a list");
    // Forum stringifies ids and instructions.
    let t = parse_task(
        0,
        &json!({"id": 3, "agent": "a", "instruction": 2.0, "x": 1}),
        ParseMode::Forum,
    )
    .unwrap();
    assert_eq!((t.id.as_str(), t.instruction.as_str()), ("3", "2.0"));
}

#[test]
fn plan_documents() {
    let roster = crate::roster::Roster::default_roster();
    let ok = r#"{"tasks": [
        {"id": "T1", "agent": "backend", "instruction": "add it"},
        {"id": "T2", "agent": "tests", "instruction": "test it", "depends_on": ["T1"]}]}"#;
    let p = Plan::from_json_text(ok, Some(&roster)).unwrap();
    assert_eq!(p.compile().unwrap().waves, vec![vec!["T1"], vec!["T2"]]);
    let e = Plan::from_json_text("{\"tasks\": [}", None).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("not valid JSON at line 1, column"),
        "{e}"
    );
    assert!(!e.to_string().contains(" at line 1 column"), "{e}");
    let e = Plan::from_json_text("[]", None).unwrap_err();
    assert!(e.to_string().contains("JSON object with a \"tasks\" list"));
    let e = Plan::from_json_text("{}", None).unwrap_err();
    assert_eq!(e.to_string(), "a plan must have a \"tasks\" list");
    let bad_agent = ok.replace("\"tests\"", "\"poet\"");
    let e = Plan::from_json_text(&bad_agent, Some(&roster)).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("task 'T2': agent 'poet' is not in the roster (known: "),
        "{e}"
    );
    // Model output: prose around the object is cut away.
    let out = format!("Here is the plan:\n{ok}\nThanks.");
    assert!(Plan::from_model_output(&out, Some(&roster), ParseMode::Forum).is_ok());
    assert_eq!(
        Plan::from_model_output("} nothing {", None, ParseMode::Forum).unwrap_err(),
        PlanError::NoJsonObject
    );
}

#[test]
fn python_repr_quoting() {
    assert_eq!(py_repr("T1"), "'T1'");
    assert_eq!(py_repr("it's"), "\"it's\"");
    assert_eq!(py_repr("'\""), "'\\'\"'");
    assert_eq!(py_repr("a\\b\n\u{7}"), "'a\\\\b\\n\\x07'");
    assert_eq!(py_repr("日本"), "'日本'");
    assert_eq!(py_list(&["b", "a"]), "['b', 'a']");
    assert_eq!(py_list::<&str>(&[]), "[]");
}

#[test]
fn upstream_injection_skips_failed_missing_order_and_repeats() {
    let mut t = Task::new("T9", "a", "go");
    t.depends_on = vec!["A".into(), "A".into(), "B".into(), "C".into(), "D".into()];
    t.order_deps.insert("D".into());
    let mut r = BTreeMap::new();
    r.insert(
        "A".into(),
        UpstreamResult {
            output: "ábcdé".into(),
            ok: true,
        },
    );
    r.insert(
        "B".into(),
        UpstreamResult {
            output: "bad".into(),
            ok: false,
        },
    );
    r.insert(
        "D".into(),
        UpstreamResult {
            output: "order only".into(),
            ok: true,
        },
    );
    let i = augment_with_upstream(&t, &r, 3);
    assert_eq!(i.data_from, ["A"]);
    assert_eq!(
        i.instruction,
        "go\n\nUpstream results you build on:\n- A: ábc\n... [truncated for prompt efficiency, 2 chars omitted; full output is witnessed]"
    );
    let none = augment_with_upstream(&Task::new("x", "a", "go"), &r, 3);
    assert_eq!(none.instruction, "go");
    assert!(none.data_from.is_empty());
}

mod props {
    use super::*;
    use proptest::prelude::*;

    /// A random DAG: task i may depend only on tasks with a smaller index, then the list is
    /// shuffled by `perm`.
    fn dag() -> impl Strategy<Value = Vec<Task>> {
        (1usize..24)
            .prop_flat_map(|n| {
                (
                    Just(n),
                    proptest::collection::vec(
                        proptest::collection::vec(any::<prop::sample::Index>(), 0..4),
                        n,
                    ),
                    proptest::collection::vec(any::<bool>(), n),
                )
            })
            .prop_map(|(n, picks, order)| {
                (0..n)
                    .map(|i| {
                        let id = format!("t{i}");
                        let mut t = Task::new(id, "a", "x");
                        if i > 0 {
                            for p in &picks[i] {
                                let d = format!("t{}", p.index(i));
                                if order[i] {
                                    t.order_deps.insert(d.clone());
                                }
                                t.depends_on.push(d);
                            }
                        }
                        t
                    })
                    .collect()
            })
    }

    fn permute<T: Clone>(items: &[T], seed: u64) -> Vec<T> {
        let mut v = items.to_vec();
        let mut s = seed;
        for i in (1..v.len()).rev() {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            v.swap(i, (s >> 33) as usize % (i + 1));
        }
        v
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn waves_respect_edges_and_hold_each_task_once(tasks in dag(), seed in any::<u64>()) {
            let p = Plan { tasks: permute(&tasks, seed) };
            let c = p.compile().unwrap();
            let mut wave_of = HashMap::new();
            for (i, w) in c.waves.iter().enumerate() {
                prop_assert!(!w.is_empty());
                prop_assert!(w.windows(2).all(|x| x[0] < x[1]), "wave sorted");
                for id in w {
                    prop_assert!(wave_of.insert(id.clone(), i).is_none(), "{} twice", id);
                }
            }
            prop_assert_eq!(wave_of.len(), tasks.len());
            for e in &c.edges {
                prop_assert!(wave_of[&e.from] < wave_of[&e.to], "{:?}", e);
            }
            // Each task sits in the earliest wave its dependencies allow.
            for t in &p.tasks {
                let want = t.depends_on.iter().map(|d| wave_of[d] + 1).max().unwrap_or(0);
                prop_assert_eq!(wave_of[&t.id], want);
            }
        }

        #[test]
        fn waves_do_not_depend_on_listing_order(tasks in dag(), s1 in any::<u64>(), s2 in any::<u64>()) {
            let a = Plan { tasks: permute(&tasks, s1) }.compile().unwrap();
            let b = Plan { tasks: permute(&tasks, s2) }.compile().unwrap();
            prop_assert_eq!(a.waves, b.waves);
        }

        #[test]
        fn closing_a_loop_is_always_a_cycle(tasks in dag(), seed in any::<u64>(), pick in any::<prop::sample::Index>()) {
            // Make some task depend on the last task, which (directly or not) may or may not
            // depend on it; either the plan still layers or the cycle names that task.
            let mut tasks = tasks;
            let n = tasks.len();
            let last = tasks[n - 1].id.clone();
            let i = pick.index(n);
            tasks[i].depends_on.push(last.clone());
            let victim = tasks[i].id.clone();
            let p = Plan { tasks: permute(&tasks, seed) };
            match p.compile() {
                Ok(c) => prop_assert!(c.waves.iter().flatten().any(|id| *id == victim)),
                Err(PlanError::Cycle(ids)) => {
                    prop_assert!(ids.contains(&victim));
                    prop_assert!(ids.contains(&last));
                }
                Err(other) => prop_assert!(false, "unexpected {other}"),
            }
        }

        #[test]
        fn roster_order_does_not_change_a_plan(tasks in dag(), seed in any::<u64>()) {
            let roster = crate::roster::Roster::default_roster();
            let names = roster.names();
            let doc = JsonValue::Object(serde_json::Map::from_iter([(
                "tasks".to_string(),
                JsonValue::Array(
                    tasks
                        .iter()
                        .enumerate()
                        .map(|(i, t)| {
                            serde_json::json!({
                                "id": t.id,
                                "agent": names[i % names.len()],
                                "instruction": t.instruction,
                                "depends_on": t.depends_on,
                            })
                        })
                        .collect(),
                ),
            )]));
            let shuffled =
                crate::roster::Roster::new(permute(roster.agents(), seed)).unwrap();
            let a = Plan::from_json(&doc, Some(&roster), ParseMode::Strict).unwrap();
            let b = Plan::from_json(&doc, Some(&shuffled), ParseMode::Strict).unwrap();
            prop_assert_eq!(a.compile().unwrap(), b.compile().unwrap());
        }

        #[test]
        fn plan_parser_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let text = String::from_utf8_lossy(&bytes);
            let _ = Plan::from_json_text(&text, None).map(|p| p.compile());
            let _ = Plan::from_model_output(&text, None, ParseMode::Forum).map(|p| p.compile());
        }

        #[test]
        fn plan_parser_never_panics_on_json_shapes(doc in json_strategy()) {
            let text = serde_json::to_string(&serde_json::json!({"tasks": doc})).unwrap();
            let roster = crate::roster::Roster::default_roster();
            for mode in [ParseMode::Forum, ParseMode::Strict] {
                if let Ok(p) = Plan::from_model_output(&text, Some(&roster), mode) {
                    let _ = p.schedule();
                    let _ = p.compile().map(|c| c.payload().canonical());
                }
            }
            if let Err(e) = Plan::from_json_text(&text, None) {
                prop_assert!(!e.to_string().contains('\n'));
            }
        }
    }

    fn json_strategy() -> impl Strategy<Value = JsonValue> {
        let leaf = prop_oneof![
            Just(JsonValue::Null),
            any::<bool>().prop_map(JsonValue::Bool),
            any::<i64>().prop_map(JsonValue::from),
            prop_oneof![
                Just("T1"),
                Just("T2"),
                Just("backend"),
                Just("order"),
                Just("data"),
                Just(""),
                Just("é")
            ]
            .prop_map(|s| JsonValue::String(s.to_string())),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(JsonValue::Array),
                proptest::collection::vec(
                    (
                        prop_oneof![
                            Just("id"),
                            Just("agent"),
                            Just("instruction"),
                            Just("depends_on"),
                            Just("done_when"),
                            Just("type"),
                            Just("x")
                        ],
                        inner
                    ),
                    0..6
                )
                .prop_map(|kv| JsonValue::Object(
                    kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
                )),
            ]
        })
    }
}
