//! Plan compiler and `git forum plan`: Forum's recorded task graphs, upstream injection, then
//! the CLI.

use std::collections::BTreeMap;

use git_forum::ledger::{Value, canonical, payload_hash};
use git_forum::plan::{
    ParseMode, Plan, PlanError, Task, UpstreamResult, augment_with_upstream, parse_deps,
    parse_done_when, plan_payload,
};
use serde_json::Value as J;

fn conformance_file(name: &str) -> Option<String> {
    let path = crate::common::conformance()?.join(name);
    Some(
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display())),
    )
}

/// Builds the task the way Forum's generator did: instruction = id, deps and done_when parsed
/// by Forum's rules.
fn forum_task(input: &J) -> Task {
    let id = input["id"].as_str().unwrap().to_string();
    let (depends_on, order_deps) =
        parse_deps(input.get("depends_on"), &id, ParseMode::Forum).unwrap();
    let done_when = parse_done_when(input.get("done_when"), &id).unwrap();
    Task {
        agent: "agent".into(),
        instruction: id.clone(),
        id,
        depends_on,
        order_deps,
        done_when,
    }
}

fn strings(v: &J) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn conformance_plan_waves() {
    let Some(text) = conformance_file("plan_waves.json") else {
        return;
    };
    let doc: J = serde_json::from_str(&text).unwrap();
    let raw = canonical::parse(&text).unwrap();
    let raw_cases = match raw.get("cases") {
        Some(Value::Array(c)) => c.clone(),
        _ => panic!("cases"),
    };
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 11);
    for (case, raw_case) in cases.iter().zip(&raw_cases) {
        let label = case["label"].as_str().unwrap();
        let tasks: Vec<Task> = case["tasks_input"]
            .as_array()
            .unwrap()
            .iter()
            .map(forum_task)
            .collect();

        // Parsed tasks.
        let parsed = case["tasks_parsed"].as_array().unwrap();
        assert_eq!(parsed.len(), tasks.len(), "{label}");
        for (t, want) in tasks.iter().zip(parsed) {
            assert_eq!(t.id, want["id"].as_str().unwrap(), "{label}");
            assert_eq!(
                t.depends_on,
                strings(&want["depends_on"]),
                "{label}: depends_on"
            );
            let order: Vec<String> = t.order_deps.iter().cloned().collect();
            assert_eq!(order, strings(&want["order_deps"]), "{label}: order_deps");
            let data: Vec<&str> = t.data_deps();
            assert_eq!(data, strings(&want["data_deps"]), "{label}: data_deps");
            assert_eq!(
                t.done_when,
                strings(&want["done_when"]),
                "{label}: done_when"
            );
            assert_eq!(
                t.contract_instruction(),
                want["contract_instruction"].as_str().unwrap(),
                "{label}"
            );
        }

        // Edges.
        let plan = Plan { tasks };
        let edges = plan.edges();
        let want_edges = case["edges"].as_array().unwrap();
        assert_eq!(edges.len(), want_edges.len(), "{label}");
        for (e, w) in edges.iter().zip(want_edges) {
            assert_eq!(
                (e.from.as_str(), e.to.as_str(), e.kind.as_str()),
                (
                    w["from"].as_str().unwrap(),
                    w["to"].as_str().unwrap(),
                    w["type"].as_str().unwrap()
                ),
                "{label}"
            );
        }

        // Waves or Forum's exact error.
        match (plan.schedule(), &case["error"]) {
            (Ok(waves), J::Null) => {
                let want: Vec<Vec<String>> = case["waves"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(strings)
                    .collect();
                assert_eq!(waves, want, "{label}");
                let payload = plan_payload(&waves, &edges);
                let want_payload = raw_case.get("plan_payload").unwrap();
                assert_eq!(
                    payload.python_dumps(),
                    want_payload.python_dumps(),
                    "{label}"
                );
                assert_eq!(
                    payload_hash(&payload),
                    case["plan_payload_hash"].as_str().unwrap(),
                    "{label}"
                );
            }
            (Err(e), J::Object(err)) => {
                assert_eq!(e.kind(), err["type"].as_str().unwrap(), "{label}");
                assert_eq!(e.to_string(), err["message"].as_str().unwrap(), "{label}");
            }
            (got, want) => panic!("{label}: got {got:?}, Forum gave {want}"),
        }
    }
}

/// The strict compiler (used for plan files) refuses what Forum lets through: duplicate ids and
/// unknown edge types, naming the ids.
#[test]
fn conformance_strict_mode_refusals() {
    let Some(text) = conformance_file("plan_waves.json") else {
        return;
    };
    let doc: J = serde_json::from_str(&text).unwrap();
    let by_label = |l: &str| {
        doc["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["label"] == l)
            .unwrap()
            .clone()
    };
    let dup = by_label("duplicate ids (later row wins in schedule)");
    let plan = Plan {
        tasks: dup["tasks_input"]
            .as_array()
            .unwrap()
            .iter()
            .map(forum_task)
            .collect(),
    };
    assert_eq!(
        plan.compile().unwrap_err(),
        PlanError::DuplicateIds(vec!["T2".into()])
    );

    let weird = by_label("independent tasks and a late joiner");
    let tasks: Vec<J> = weird["tasks_input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let mut t = t.clone();
            t["agent"] = J::from("backend");
            t["instruction"] = t["id"].clone();
            t
        })
        .collect();
    let file = serde_json::json!({ "tasks": tasks }).to_string();
    let e = Plan::from_json_text(&file, None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "task 'T5': dependency 'T3' has unknown edge type 'weird'; use \"data\" or \"order\""
    );
    // The other Forum cases compile strictly to the same waves.
    for case in doc["cases"].as_array().unwrap() {
        let label = case["label"].as_str().unwrap();
        if label.starts_with("duplicate") || label.starts_with("independent") {
            continue;
        }
        let plan = Plan {
            tasks: case["tasks_input"]
                .as_array()
                .unwrap()
                .iter()
                .map(forum_task)
                .collect(),
        };
        match plan.compile() {
            Ok(c) => assert_eq!(
                serde_json::to_value(&c.waves).unwrap(),
                case["waves"],
                "{label}"
            ),
            Err(e) => assert_eq!(
                e.to_string(),
                case["error"]["message"].as_str().unwrap(),
                "{label}"
            ),
        }
    }
}

#[test]
fn conformance_upstream_injection_unbudgeted() {
    let Some(text) = conformance_file("upstream_vectors.json") else {
        return;
    };
    let cases: J = serde_json::from_str(&text).unwrap();
    // T3 builds on T1 (data, listed twice), on T2 (data, but failed) and on T0 (order only).
    let mut task = Task::new("T3", "agent", "combine");
    task.depends_on = vec!["T1".into(), "T1".into(), "T2".into(), "T0".into()];
    task.order_deps.insert("T0".into());
    task.done_when = vec!["one".into(), "two".into()];
    let mut results = BTreeMap::new();
    results.insert(
        "T0".to_string(),
        UpstreamResult {
            output: "ordered".into(),
            ok: true,
        },
    );
    results.insert(
        "T1".to_string(),
        UpstreamResult {
            output: "x".repeat(20),
            ok: true,
        },
    );
    results.insert(
        "T2".to_string(),
        UpstreamResult {
            output: "boom".into(),
            ok: false,
        },
    );
    let mut checked = 0;
    for case in cases.as_array().unwrap() {
        if case["fn"] != "augment_with_upstream" {
            // The token-budgeted variant needs the context budget (forum-spec §10), which lives
            // in the context module.
            continue;
        }
        let cap = case["max_chars"].as_u64().unwrap() as usize;
        let got = augment_with_upstream(&task, &results, cap);
        assert_eq!(
            got.instruction,
            case["instruction"].as_str().unwrap(),
            "cap {cap}"
        );
        assert_eq!(got.data_from, strings(&case["data_from"]), "cap {cap}");
        checked += 1;
    }
    assert_eq!(checked, 3);
}

// ---------------------------------------------------------------------------------------
// The command line.

use crate::common::Repo;

fn run(repo: &Repo, args: &[&str]) -> (i32, String, String) {
    let o = repo.forum().args(args).output().expect("run git-forum");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn write(repo: &Repo, name: &str, text: &str) -> String {
    let p = repo.path().join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// Forum's task graphs as plan files (agent `backend`, instruction = id): `plan --json`
/// prints Forum's plan payload byte for byte, or Forum's error as one line with exit 1.
#[test]
fn cli_plan_matches_forum_waves_and_errors() {
    let Some(text) = conformance_file("plan_waves.json") else {
        return;
    };
    let raw = canonical::parse(&text).unwrap();
    let Some(Value::Array(cases)) = raw.get("cases") else {
        panic!()
    };
    let repo = Repo::new("sha1");
    for case in cases {
        let label = case.get("label").unwrap().as_str().unwrap();
        if label.starts_with("duplicate") || label.starts_with("independent") {
            continue; // strict mode refuses these; see conformance_strict_mode_refusals
        }
        let mut doc = case.get("tasks_input").unwrap().to_serde();
        for t in doc.as_array_mut().unwrap() {
            t["agent"] = J::from("backend");
            t["instruction"] = t["id"].clone();
        }
        let path = write(
            &repo,
            "plan.json",
            &serde_json::json!({ "tasks": doc }).to_string(),
        );
        let (code, out, err) = run(&repo, &["plan", "--json", "--file", &path]);
        match case.get("error") {
            Some(Value::Null) => {
                assert_eq!(code, 0, "{label}: {err}");
                let ours = canonical::parse(out.trim_end()).unwrap();
                let want = case.get("plan_payload").unwrap();
                assert_eq!(ours.python_dumps(), want.python_dumps(), "{label}");
                assert_eq!(
                    payload_hash(&ours),
                    case.get("plan_payload_hash").unwrap().as_str().unwrap(),
                    "{label}"
                );
            }
            Some(err_obj) => {
                let message = err_obj.get("message").unwrap().as_str().unwrap();
                assert_eq!(code, 1, "{label}");
                assert!(out.is_empty(), "{label}");
                assert_eq!(err, format!("error: {path}: {message}\n"), "{label}");
            }
            None => panic!("{label}: no error field"),
        }
    }
}

const GOOD: &str = r#"{"tasks": [
  {"id": "api", "agent": "backend", "instruction": "add the endpoint"},
  {"id": "schema", "agent": "database", "instruction": "add the table"},
  {"id": "tests", "agent": "tests", "instruction": "cover it",
   "depends_on": ["api", {"id": "schema", "type": "order"}],
   "done_when": ["the new tests pass", ""]},
  {"id": "docs", "agent": "docs", "instruction": "document it", "depends_on": [{"id": "api", "type": "data"}]}
]}"#;

#[test]
fn cli_plan_text_and_json() {
    let repo = Repo::new("sha1");
    let path = write(&repo, "plan.json", GOOD);
    let out = repo.forum_ok(&["plan", "--file", &path]);
    assert_eq!(
        out,
        "wave 1: api, schema\nwave 2: docs, tests\nedges:\n  api -> tests (data)\n  schema -> tests (order)\n  api -> docs (data)\n"
    );
    let json = repo.forum_json(&["plan", "--file", &path]);
    assert_eq!(
        json["waves"],
        serde_json::json!([["api", "schema"], ["docs", "tests"]])
    );
    assert_eq!(
        json["edges"][1],
        serde_json::json!({"from": "schema", "to": "tests", "type": "order"})
    );
    // Standard input works too.
    let o = {
        use std::io::Write;
        let mut child = repo
            .forum()
            .args(["plan", "--json", "--file", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(GOOD.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    assert!(o.status.success());
    let v: J = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v, json);
    let empty = write(&repo, "empty.json", r#"{"tasks": []}"#);
    assert_eq!(repo.forum_ok(&["plan", "--file", &empty]), "no tasks\n");
}

#[test]
fn cli_plan_bad_input_is_one_line_exit_1() {
    let repo = Repo::new("sha1");
    let cases: [(&str, &str); 12] = [
        (
            "{\"tasks\": [\n  {\"id\": \"a\",}\n]}",
            "not valid JSON at line 2, column",
        ),
        ("", "not valid JSON at line 1, column 0"),
        (
            "[1, 2]",
            "a plan must be a JSON object with a \"tasks\" list, found a list",
        ),
        ("{\"steps\": []}", "a plan must have a \"tasks\" list"),
        (
            r#"{"tasks": [{"agent": "backend", "instruction": "x"}]}"#,
            "task #1: has no \"id\"",
        ),
        (
            r#"{"tasks": [{"id": "a", "agent": "backend"}]}"#,
            "task 'a': has no \"instruction\"",
        ),
        (
            r#"{"tasks": [{"id": "a", "agent": "poet", "instruction": "x"}]}"#,
            "task 'a': agent 'poet' is not in the roster",
        ),
        (
            r#"{"tasks": [{"id": "a", "agent": "backend", "instruction": "x", "depends_on": ["b"]}, {"id": "b", "agent": "backend", "instruction": "x", "depends_on": ["a"]}]}"#,
            "dependency cycle among: ['a', 'b']",
        ),
        (
            r#"{"tasks": [{"id": "a", "agent": "backend", "instruction": "x", "depends_on": ["ghost", "b"]}]}"#,
            "task 'a' depends on unknown task(s): ['b', 'ghost']",
        ),
        (
            r#"{"tasks": [{"id": "a", "agent": "backend", "instruction": "x"}, {"id": "a", "agent": "docs", "instruction": "y"}]}"#,
            "duplicate task id(s): ['a']",
        ),
        (
            r#"{"tasks": [{"id": "a", "agent": "backend", "instruction": "x"}, {"id": "b", "agent": "docs", "instruction": "y", "depends_on": [{"id": "a", "type": "after"}]}]}"#,
            "task 'b': dependency 'a' has unknown edge type 'after'",
        ),
        (
            r#"{"tasks": [{"id": "a", "agent": "backend", "instruction": "x", "done_when": 3}]}"#,
            "task 'a': \"done_when\" must be text or a list of text, found a number",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let path = write(&repo, &format!("bad{i}.json"), text);
        let (code, out, err) = run(&repo, &["plan", "--file", &path]);
        assert_eq!(code, 1, "case {i}: {err}");
        assert!(out.is_empty(), "case {i}");
        assert_eq!(err.lines().count(), 1, "case {i}: {err}");
        assert!(
            err.starts_with(&format!("error: {path}: ")),
            "case {i}: {err}"
        );
        assert!(err.contains(want), "case {i}: {err}");
    }
    let (code, _, err) = run(&repo, &["plan", "--file", "/nonexistent/plan.json"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("cannot read plan file /nonexistent/plan.json"),
        "{err}"
    );
    let bin = repo.path().join("bin.json");
    std::fs::write(&bin, [0xff, 0xfe, b'{']).unwrap();
    let (code, _, err) = run(&repo, &["plan", "--file", bin.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("is not UTF-8"), "{err}");
}

#[test]
fn cli_plan_policy_refuses_with_the_reason() {
    let repo = Repo::new("sha1");
    let plan = write(&repo, "plan.json", GOOD);
    let policy = write(
        &repo,
        "policy.toml",
        "allowed_categories = [\"engineering\", \"quality\"]\n",
    );
    let (code, out, err) = run(&repo, &["plan", "--file", &plan, "--policy", &policy]);
    assert_eq!(code, 1);
    assert!(out.is_empty());
    assert_eq!(
        err,
        format!(
            "error: {plan}: policy refuses task \"docs\": agent \"docs\" is in category \"support\", which is not allowed (allowed: engineering, quality)\n"
        )
    );
    // The repository's .forum/policy.toml applies without the flag.
    std::fs::create_dir(repo.path().join(".forum")).unwrap();
    std::fs::write(repo.path().join(".forum/policy.toml"), "max_tasks = 3\n").unwrap();
    let (code, _, err) = run(&repo, &["plan", "--file", &plan]);
    assert_eq!(code, 1);
    assert!(
        err.contains("it has 4 tasks and at most 3 are allowed"),
        "{err}"
    );
    // A wide wave is split into batches in the text output.
    std::fs::write(repo.path().join(".forum/policy.toml"), "max_parallel = 1\n").unwrap();
    let out = repo.forum_ok(&["plan", "--file", &plan]);
    assert!(
        out.starts_with("wave 1: api, schema  (2 batches of at most 1)\n"),
        "{out}"
    );
    // A malformed policy is named.
    std::fs::write(repo.path().join(".forum/policy.toml"), "max_parallel = 0\n").unwrap();
    let (code, _, err) = run(&repo, &["plan", "--file", &plan]);
    assert_eq!(code, 1);
    assert!(
        err.contains(".forum/policy.toml: \"max_parallel\" must be at least 1"),
        "{err}"
    );
}

#[test]
fn cli_plan_uses_the_roster_flag() {
    let repo = Repo::new("sha1");
    let roster = write(
        &repo,
        "roster.toml",
        "[[agent]]\nname = \"poet\"\ncategory = \"c\"\ndomain = \"d\"\nkeywords = [\"verse\"]\nmodel_tier = \"cheap\"\nexecutor = \"cli\"\n",
    );
    let plan = write(
        &repo,
        "plan.json",
        r#"{"tasks": [{"id": "a", "agent": "poet", "instruction": "x"}]}"#,
    );
    let (code, _, err) = run(&repo, &["plan", "--file", &plan]);
    assert_eq!(code, 1, "poet is not in the default roster");
    assert!(err.contains("agent 'poet' is not in the roster"), "{err}");
    assert_eq!(
        repo.forum_ok(&["plan", "--file", &plan, "--roster", &roster]),
        "wave 1: a\n"
    );
}

#[test]
fn cli_plan_record_witnesses_the_plan_entry() {
    use git_forum::store::git::{GitStore, Options};
    let repo = Repo::new("sha1");
    let path = write(&repo, "plan.json", GOOD);
    let request = repo.append("client", "request", r#"{"text": "ship it"}"#);
    assert_eq!(request["seq"], 0);
    let (code, out, err) = run(
        &repo,
        &[
            "plan", "--record", "--parent", "0", "--json", "--file", &path,
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("recorded plan as seq 1"), "{err}");
    let printed = canonical::parse(out.trim_end()).unwrap();
    let store = GitStore::open(
        repo.path(),
        "main",
        Options {
            fsync: false,
            ..Options::default()
        },
    )
    .unwrap();
    let entries = store.entries().unwrap();
    assert_eq!(entries.len(), 2);
    let e = &entries[1];
    assert_eq!(
        (e.kind.as_str(), e.actor.as_str(), e.causal_parent),
        ("plan", "dispatch", Some(0))
    );
    assert_eq!(e.payload_hash, payload_hash(&printed));
    // The stored body is the canonical form (sorted keys) of what was printed.
    assert_eq!(
        store.payload_at(1).unwrap().unwrap().canonical(),
        printed.canonical()
    );
    // A refused plan records nothing.
    let bad = write(
        &repo,
        "bad.json",
        r#"{"tasks": [{"id": "a", "agent": "backend", "instruction": "x", "depends_on": ["a"]}]}"#,
    );
    let (code, _, _) = run(&repo, &["plan", "--record", "--file", &bad]);
    assert_eq!(code, 1);
    assert_eq!(store.entries().unwrap().len(), 2);
    repo.fsck();
}

#[test]
fn conformance_upstream_injection_budgeted() {
    use git_forum::context::{ContextBudget, Meter};
    use git_forum::plan::augment_with_upstream_budgeted;
    let Some(text) = conformance_file("upstream_vectors.json") else {
        return;
    };
    let cases: J = serde_json::from_str(&text).unwrap();
    let mut task = Task::new("T3", "agent", "combine");
    task.depends_on = vec!["T1".into(), "T1".into(), "T2".into(), "T0".into()];
    task.order_deps.insert("T0".into());
    task.done_when = vec!["one".into(), "two".into()];
    let mut results = BTreeMap::new();
    for (id, output, ok) in [
        ("T0", "ordered".to_string(), true),
        ("T1", "x".repeat(20), true),
        ("T2", "boom".to_string(), false),
    ] {
        results.insert(id.to_string(), UpstreamResult { output, ok });
    }
    let mut checked = 0;
    for case in cases
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["fn"] == "augment_with_upstream_budgeted")
    {
        let b = &case["budget"];
        let budget = ContextBudget {
            bytes_per_token: b["bytes_per_token"].as_u64().unwrap(),
            max_total_tokens: b["max_total_tokens"].as_u64(),
            max_request_tokens: b["max_request_tokens"].as_u64(),
            max_task_tokens: b["max_task_tokens"].as_u64(),
            max_upstream_tokens: b["max_upstream_tokens"].as_u64(),
        };
        let got = augment_with_upstream_budgeted(&task, &results, &budget, &mut Meter::default());
        assert_eq!(
            got.injected.instruction,
            case["instruction"].as_str().unwrap()
        );
        assert_eq!(got.injected.data_from, strings(&case["data_from"]));
        let pressures: Vec<J> = got
            .pressures
            .iter()
            .map(|p| p.payload().to_serde())
            .collect();
        assert_eq!(J::Array(pressures), case["pressures"]);
        checked += 1;
    }
    assert_eq!(checked, 1);
}

#[test]
fn conformance_context_budget() {
    use git_forum::context::{ContextBudget, Meter, Source, apply, approx_tokens};
    let Some(text) = conformance_file("context_budget_vectors.json") else {
        return;
    };
    let v: J = serde_json::from_str(&text).unwrap();
    let budget_of = |l: &J| ContextBudget {
        bytes_per_token: l["bytes_per_token"].as_u64().unwrap(),
        max_total_tokens: l["max_total_tokens"].as_u64(),
        max_request_tokens: l["max_request_tokens"].as_u64(),
        max_task_tokens: l["max_task_tokens"].as_u64(),
        max_upstream_tokens: l["max_upstream_tokens"].as_u64(),
    };
    let source_of = |s: &J| match s.as_str().unwrap() {
        "request" => Source::Request,
        "task" => Source::Task,
        "upstream" => Source::Upstream,
        other => panic!("unknown source {other}"),
    };
    let singles = v["single"].as_array().unwrap();
    for case in singles {
        let budget = budget_of(&case["limits"]);
        assert_eq!(budget.configured_limits().to_serde(), case["limits"]);
        let text = case["text"].as_str().unwrap();
        let (admitted, p) = apply(
            &budget,
            &mut Meter::default(),
            source_of(&case["source"]),
            "label",
            text,
        );
        assert_eq!(admitted, case["admitted_text"].as_str().unwrap(), "{case}");
        assert_eq!(p.payload().to_serde(), case["pressure"], "{case}");
        assert_eq!(
            approx_tokens(text, budget.bytes_per_token),
            case["approx_tokens"].as_u64().unwrap()
        );
    }
    assert_eq!(singles.len(), 11);
    let shared = &v["shared_meter"];
    let budget = budget_of(&shared["limits"]);
    let mut meter = Meter::default();
    for step in shared["steps"].as_array().unwrap() {
        let label = step["pressure"]["label"].as_str().unwrap();
        let fill = step["admitted_text"]
            .as_str()
            .unwrap()
            .chars()
            .next()
            .unwrap_or(match label {
                "task-slice" => 'b',
                _ => 'd',
            });
        let len = step["text_len"].as_u64().unwrap() as usize;
        let text: String = std::iter::repeat_n(fill, len).collect();
        let (admitted, p) = apply(
            &budget,
            &mut meter,
            source_of(&step["source"]),
            label,
            &text,
        );
        assert_eq!(admitted, step["admitted_text"].as_str().unwrap());
        assert_eq!(p.payload().to_serde(), step["pressure"]);
    }
}
