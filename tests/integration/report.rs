//! Read-side projections: Forum's run1 and run2 projections reproduced (summary, compare,
//! capsule, run room, receipt, grade), our own wording checked to differ where it is prose,
//! our model-call count explained against Forum's, redacted bodies, and `git forum summary`,
//! `bench`, `room` and `capsule` through the real binary.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use git_forum::exec::{Executor, Fleet, Scripted};
use git_forum::ledger::canonical::{self, Value};
use git_forum::ledger::{Entry, MemoryStorage, NewEntry, Storage};
use git_forum::report::{self, ReceiptInputs, Snapshot, receipt};
use git_forum::roster::Roster;
use git_forum::run::{self, Env, Options, Silent, StepClock};
use git_forum::surface::reports;
use serde_json::json;

use crate::common::{Repo, conformance};

fn vectors(name: &str) -> Option<Value> {
    let dir = conformance()?;
    let text = std::fs::read_to_string(dir.join(name)).expect("read vectors");
    Some(canonical::parse(&text).expect("vectors parse"))
}

fn run1_dir(dir: &Path) -> PathBuf {
    dir.join("run1")
}

fn run1() -> Option<(Snapshot, Value)> {
    let dir = conformance()?;
    let s = reports::snapshot_from_forum_dir(&run1_dir(&dir)).expect("run1 loads");
    Some((s, vectors("run1_projections.json")?))
}

fn get<'a>(v: &'a Value, key: &str) -> &'a Value {
    v.get(key)
        .unwrap_or_else(|| panic!("no key {key:?} in {}", v.python_pretty()))
}

fn keys(v: &Value) -> Vec<&str> {
    match v {
        Value::Object(m) => m.iter().map(|(k, _)| k.as_str()).collect(),
        _ => panic!("not an object"),
    }
}

fn set(v: &mut Value, key: &str, new: Value) {
    match v {
        Value::Object(m) => m.iter_mut().find(|(k, _)| k == key).expect("key").1 = new,
        _ => panic!("not an object"),
    }
}

fn items(v: &Value) -> &[Value] {
    match v {
        Value::Array(a) => a,
        _ => panic!("not an array: {}", v.python_pretty()),
    }
}

/// A ledger rebuilt from rows of a vector file (`actor`, `kind`, `causal_parent`, `payload`, and
/// `ts` when given; rows without an actor get `fallback_actor`). When the rows carry
/// `entry_hash`, the rebuilt hashes must match: the same ledger, not a look-alike.
fn rebuild(rows: &[Value], fallback_actor: &str) -> Snapshot {
    let mut store = MemoryStorage::default();
    for (i, row) in rows.iter().enumerate() {
        let ts = match row.get("ts") {
            Some(Value::Float(f)) => *f,
            Some(Value::Int(n)) => n.as_str().parse().unwrap(),
            _ => 1000.0 + i as f64,
        };
        let e = store
            .append(NewEntry {
                actor: row
                    .get("actor")
                    .and_then(Value::as_str)
                    .unwrap_or(fallback_actor)
                    .to_string(),
                kind: get(row, "kind").as_str().unwrap().to_string(),
                causal_parent: match get(row, "causal_parent") {
                    Value::Int(p) => p.as_i64(),
                    _ => None,
                },
                payload: get(row, "payload").clone(),
                ts,
            })
            .unwrap();
        if row.get("actor").is_some()
            && let Some(h) = row.get("entry_hash")
        {
            assert_eq!(Some(e.entry_hash.as_str()), h.as_str(), "row {i} rebuilt");
        }
    }
    Snapshot::from_items(reports::load(&store).unwrap())
}

// ----- summary and compare -----

#[test]
fn run1_summary_is_forums_field_for_field() {
    let Some((s, v)) = run1() else { return };
    let ours = report::summarize(&s);
    assert_eq!(ours.to_value(), *get(&v, "summary"));
    assert_eq!(ours.absent_bodies, 0);
}

#[test]
fn run1_model_calls_agree_with_forum_for_a_reason_and_the_run_made_ten() {
    let Some((s, v)) = run1() else { return };
    let ours = report::summarize(&s);
    // Forum counts the task result entries that name a model: T1, T2, T3 and T3's retry.
    assert_eq!(get(get(&v, "summary"), "model_calls_total"), &Value::int(4));
    // We count calls the ledger attributes to a model. In a Forum ledger only task results
    // name one, so the two agree on run1 ...
    assert_eq!(ours.model_calls, vec![("scripted-model".to_string(), 4)]);
    // ... while the run made 10 calls: 1 plan + 4 task attempts + 4 validations + 1 synthesis.
    // Forum's verdicts, plan and answer name no model, so neither summary can count them.
    let kind = |k: &str| s.items.iter().filter(|(e, _)| e.kind == k).count();
    let answers = s
        .items
        .iter()
        .filter(|(e, b)| e.kind == "result" && b.as_ref().unwrap().get("answer").is_some())
        .count();
    let real = kind("plan") + (kind("result") - answers) + kind("verdict") + answers;
    assert_eq!(real, 10);
    let unattributed: usize = s
        .items
        .iter()
        .filter(|(e, b)| {
            matches!(e.kind.as_str(), "plan" | "verdict" | "result")
                && b.as_ref().unwrap().get("model").is_none()
        })
        .count();
    assert_eq!(real - unattributed, ours.get("model_calls_total") as usize);
}

#[test]
fn compare_of_empty_and_run1_is_forums_38_deltas() {
    let Some((s, v)) = run1() else { return };
    let delta = report::summary::compare_value(&report::summary::empty(), &report::summarize(&s));
    assert_eq!(delta, *get(&v, "compare_empty_to_run"));
    assert_eq!(keys(&delta).len(), 38);
    let zero = report::compare(&report::summarize(&s), &report::summarize(&s));
    assert!(zero.iter().all(|(_, d)| *d == 0));
}

#[test]
fn budget_stop_summary_matches_forum_except_the_calls_it_never_made() {
    let Some(v) = vectors("run2_gates_budget_projections.json") else {
        return;
    };
    let s = rebuild(items(get(&v, "budget_entries")), "?");
    let ours = report::summarize(&s).to_value();
    let forum = get(&v, "budget_summary");
    assert_eq!(keys(&ours), keys(forum));
    for k in keys(forum) {
        if !matches!(k, "model_calls" | "model_calls_total" | "checkpoint") {
            assert_eq!(get(&ours, k), get(forum, k), "{k}");
        }
    }
    // Forum: 3 (T1, and T2 and T3 whose results say "error: budget exceeded": no call was
    // made, the budget had run out). The budget entry itself says 2 calls were made: the
    // planner's (no model recorded) and T1's. We count the one the ledger attributes.
    assert_eq!(get(forum, "model_calls_total"), &Value::int(3));
    assert_eq!(get(&ours, "model_calls_total"), &Value::int(1));
    let budget = s.items.iter().find(|(e, _)| e.kind == "budget").unwrap();
    assert_eq!(
        budget.1.as_ref().unwrap().get("model_calls"),
        Some(&Value::int(2))
    );
}

/// Our own loop records the validator's model on each verdict: those calls are counted, the
/// planner's and the synthesizer's (no model on the plan or the answer) are not.
#[test]
fn our_loop_counts_validator_calls_and_says_what_it_leaves_out() {
    let plan = r#"{"tasks":[
 {"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":["endpoint documented"]},
 {"id":"T2","agent":"docs","instruction":"write the API docs","depends_on":["T1"],"done_when":[]}]}"#;
    let orchestrator: Arc<dyn Executor> = Arc::new(Scripted::new("orch-model", move |call| {
        Ok(match call.schema.map(|s| s.name.as_str()) {
            Some("plan") => plan.to_string(),
            Some("verdict") => {
                json!({"decision": "pass", "score": 0.9, "reason": "fine"}).to_string()
            }
            _ => "Shipped the login API with its docs.".to_string(),
        })
    }));
    let worker: Arc<dyn Executor> = Arc::new(Scripted::new("worker-model", |call| {
        Ok(format!(
            "done: {}",
            call.prompt.lines().next().unwrap_or("")
        ))
    }));
    let roster = Roster::default_roster();
    let seats = Fleet::fixed(orchestrator, worker, vec![]);
    let clock = StepClock::new(100.0, 0.5);
    let env = Env {
        roster: &roster,
        seats: &seats,
        clock: &clock,
        progress: &Silent,
    };
    let mut store = MemoryStorage::default();
    let mut opts = Options::default();
    opts.policy.max_parallel = 1;
    let out = run::submit(&mut store, &env, &opts, "ship a login API with docs").unwrap();
    let s = Snapshot::from_items(reports::load(&store).unwrap());
    let sum = report::summarize(&s);
    assert_eq!(
        sum.model_calls,
        vec![
            ("worker-model".to_string(), 2),
            ("orch-model".to_string(), 2)
        ]
    );
    // The loop itself counted 6: plan, two tasks, two validations, synthesis.
    assert_eq!(out.total_calls(), 6);
    assert_eq!(out.calls.get("orch-model"), Some(&4));
    assert_eq!(sum.get("model_calls_total") as u64, out.total_calls() - 2);
    assert!(sum.verified);
}

#[test]
fn redacted_bodies_are_counted_around_never_crashed_on() {
    let Some((mut s, _)) = run1() else { return };
    // Drop the bodies of a verdict (seq 12), a task result (seq 4) and the answer (seq 19).
    for seq in [4usize, 12, 19] {
        s.items[seq].1 = None;
    }
    let sum = report::summarize(&s);
    assert_eq!(sum.absent_bodies, 3);
    assert_eq!(sum.get("entries"), 23);
    assert_eq!(sum.get("task_results"), 3);
    assert_eq!(sum.get("verdicts_pass") + sum.get("verdicts_fail"), 3);
    assert_eq!(sum.get("answers"), 0);
    assert_eq!(sum.get("model_calls_total"), 3);
    // seq 14 shares seq 9's body, so only its own two distinct bodies and the answer go.
    assert!(sum.get("payload_bytes") < 3660);
    let room = report::build_run_room(&s, None, 240);
    assert_eq!(get(&room, "answer"), &Value::Null);
    let capsule = report::build_context_capsule(&s, 8, 240);
    assert_eq!(items(get(&capsule, "tasks")).len(), 3);
    let grade = report::grade(&s, 2);
    assert_eq!(get(&grade, "checks"), &Value::int(3));
    let inputs = report::receipt::inputs_for_run(&s, 0).unwrap();
    let r = receipt(&s, &inputs);
    assert_eq!(get(get(&r, "answer"), "seq"), &Value::int(22));
}

// ----- capsule -----

#[test]
fn run1_capsule_and_its_text_are_forums() {
    let Some((s, v)) = run1() else { return };
    let capsule = report::build_context_capsule(&s, 8, 240);
    assert_eq!(capsule, *get(&v, "capsule"));
    // The text is field labels and data only: reproduced byte for byte.
    assert_eq!(
        Value::Str(report::capsule_text(&capsule)),
        *get(&v, "capsule_text")
    );
}

#[test]
fn capsule_limits_keep_the_last_items_and_clip() {
    let Some((s, _)) = run1() else { return };
    let c = report::build_context_capsule(&s, 2, 10);
    let tasks = items(get(&c, "tasks"));
    assert_eq!(tasks.len(), 2);
    assert_eq!(get(&tasks[0], "seq"), &Value::int(9));
    assert_eq!(get(&tasks[1], "output"), &Value::str("done: r..."));
    assert_eq!(get(&c, "latest_request"), &Value::str("ship a ..."));
    let none = report::build_context_capsule(&s, 0, 0);
    assert!(items(get(&none, "tasks")).is_empty());
    assert_eq!(get(&none, "latest_answer"), &Value::str(""));
    let text = report::capsule_text(&none);
    assert!(!text.contains("tasks:") && !text.contains("latest answer"));
    assert_eq!(
        get(&none, "context_text_chars"),
        &Value::int(text.chars().count() as i64)
    );
}

// ----- run room -----

const ACTION_PROSE: [&str; 2] = ["label", "reason"];
const BRIEF_PROSE: [&str; 5] = ["title", "summary", "risk", "next_step", "bullets"];

/// Our room equals Forum's in every field except the prose ones, which must be our own words.
fn assert_room_matches(ours: &Value, forum: &Value, skip: &[&str]) {
    assert_eq!(keys(ours), keys(forum));
    for k in keys(forum) {
        if skip.contains(&k) || k == "next_actions" || k == "brief" {
            continue;
        }
        assert_eq!(get(ours, k), get(forum, k), "room field {k}");
    }
    assert_actions_match(get(ours, "next_actions"), get(forum, "next_actions"));
    let (ob, fb) = (get(ours, "brief"), get(forum, "brief"));
    assert_eq!(keys(ob), keys(fb));
    for k in keys(fb) {
        if BRIEF_PROSE.contains(&k) {
            assert_ne!(get(ob, k), get(fb, k), "brief {k} must be in our words");
        } else {
            assert_eq!(get(ob, k), get(fb, k), "brief {k}");
        }
    }
    assert_eq!(
        items(get(ob, "bullets")).len(),
        items(get(fb, "bullets")).len()
    );
    for (o, f) in items(get(ob, "bullets"))
        .iter()
        .zip(items(get(fb, "bullets")))
    {
        assert_ne!(o, f, "bullet in our words");
    }
}

fn assert_actions_match(ours: &Value, forum: &Value) {
    let (o, f) = (items(ours), items(forum));
    assert_eq!(o.len(), f.len(), "{}", ours.python_pretty());
    for (a, b) in o.iter().zip(f) {
        assert_eq!(keys(a), keys(b));
        for k in keys(b) {
            if ACTION_PROSE.contains(&k) {
                assert_ne!(get(a, k), get(b, k), "action {k} must be in our words");
            } else {
                assert_eq!(get(a, k), get(b, k), "action {k}");
            }
        }
    }
}

#[test]
fn run1_room_matches_forum_in_structure_and_speaks_our_words() {
    let Some((s, v)) = run1() else { return };
    let room = report::build_run_room(&s, None, 240);
    assert_room_matches(&room, get(&v, "room"), &[]);
    let brief = get(&room, "brief");
    assert_eq!(get(brief, "state"), &Value::str("action_required"));
    assert_eq!(
        get(brief, "next_step"),
        &Value::str("Re-run task T3: `git forum resume 0`."),
        "the first action's label as a sentence"
    );
    // Both renderings are ours, and carry the room's data.
    let text = report::room_text(&room);
    let brief_text = report::room_brief_text(&room);
    assert_ne!(Value::Str(text.clone()), *get(&v, "room_text"));
    assert_ne!(Value::Str(brief_text.clone()), *get(&v, "room_brief_text"));
    for needle in [
        "ship a login API with docs",
        "T3",
        "code-review",
        "Shipped the login API",
        "Re-run task T3",
    ] {
        assert!(text.contains(needle), "{needle} in\n{text}");
    }
    assert!(
        brief_text.contains("Re-run task T3: `git forum resume 0`."),
        "{brief_text}"
    );
    assert!(brief_text.contains("action required"), "{brief_text}");
}

#[test]
fn room_since_and_clipping() {
    let Some((s, _)) = run1() else { return };
    let room = report::build_run_room(&s, Some(19), 240);
    assert_eq!(
        get(&room, "entry_range"),
        &Value::Array(vec![Value::int(19), Value::int(22)])
    );
    assert_eq!(get(&room, "request"), &Value::Null);
    assert_eq!(get(get(&room, "brief"), "state"), &Value::str("idle"));
    let ids: Vec<&Value> = items(get(&room, "next_actions"))
        .iter()
        .map(|a| get(a, "id"))
        .collect();
    assert_eq!(ids, vec![&Value::str("submit-request")]);
    let clipped = report::build_run_room(&s, None, 8);
    assert_eq!(
        get(get(&clipped, "request"), "text"),
        &Value::str("ship ...")
    );
}

#[test]
fn run2_rooms_paused_expired_final_budget_and_empty() {
    let Some(v) = vectors("run2_gates_budget_projections.json") else {
        return;
    };
    let gated = items(get(&v, "gated_entries"));
    // Paused at the gate: the first five entries (their hashes are Forum's).
    let paused = rebuild(&gated[..5], "?");
    let room = report::build_run_room(&paused, None, 240);
    assert_room_matches(&room, get(&v, "paused_room"), &[]);
    let brief_text = report::room_brief_text(&room);
    assert_ne!(
        Value::Str(brief_text.clone()),
        *get(&v, "paused_brief_text")
    );
    assert!(brief_text.contains("wave 1"), "{brief_text}");
    // After the deadline passed and the wave ran.
    let all = rebuild(gated, "?");
    assert_eq!(
        all.checkpoint,
        get(&v, "gated_checkpoint").as_str().unwrap()
    );
    assert_room_matches(
        &report::build_run_room(&all, None, 240),
        get(&v, "final_room"),
        &[],
    );
    // Stopped on budget (the vector has no timestamps, so the checkpoint differs).
    let budget = rebuild(items(get(&v, "budget_entries")), "?");
    let room = report::build_run_room(&budget, None, 240);
    assert_room_matches(&room, get(&v, "budget_room"), &["checkpoint"]);
    assert_ne!(
        Value::Str(report::room_brief_text(&room)),
        *get(&v, "budget_brief_text")
    );
    // The empty ledger.
    let empty = Snapshot::from_items(Vec::new());
    assert_room_matches(
        &report::build_run_room(&empty, None, 240),
        get(&v, "empty_room"),
        &[],
    );
}

#[test]
fn run2_rejected_gate_and_plan_only_ledgers_are_idle() {
    let Some(v) = vectors("run2_gates_budget_projections.json") else {
        return;
    };
    let rejected = items(get(&v, "rejected_entries"));
    let s = rebuild(rejected, "dispatch");
    let room = report::build_run_room(&s, None, 240);
    assert_actions_match(
        get(&room, "next_actions"),
        get(&v, "rejected_room_next_actions"),
    );
    // Forum's quirk: a plan dispatched without a request hides its pending gate.
    let plan_only = rebuild(&rejected[..4], "dispatch");
    let room = report::build_run_room(&plan_only, None, 240);
    assert_eq!(get(get(&room, "signals"), "pending_gates"), &Value::int(1));
    assert_actions_match(
        get(&room, "next_actions"),
        get(&v, "quirk_dispatch_plan_only_room_next_actions"),
    );
    assert_eq!(
        get(get(&room, "brief"), "state"),
        get(&v, "quirk_dispatch_plan_only_brief_state")
    );
}

#[test]
fn a_tampered_body_makes_the_room_unverified_and_urgent() {
    let Some((mut s, _)) = run1() else { return };
    s.items[10].1 = Some(canonical::parse(r#"{"id":"T1","ok":false}"#).unwrap());
    let s = Snapshot::from_items(s.items);
    assert!(s.verified && !s.deep_verified);
    let room = report::build_run_room(&s, None, 240);
    assert_eq!(get(&room, "verified"), &Value::Bool(false));
    assert_eq!(
        get(get(&room, "brief"), "state"),
        &Value::str("action_required")
    );
    // The capsule reports the chain alone, as Forum's does.
    let capsule = report::build_context_capsule(&s, 8, 240);
    assert_eq!(get(&capsule, "verified"), &Value::Bool(true));
}

// ----- receipt and grade -----

#[test]
fn run1_receipt_is_forums_given_the_runtime_facts() {
    let Some((s, v)) = run1() else { return };
    let forum = get(&v, "receipt");
    let inputs = ReceiptInputs {
        before_seq: 0,
        request: "ship a login API with docs".into(),
        answer: get(&v, "answer").as_str().unwrap().into(),
        model_id: Some("scripted-model".into()),
        budget: Value::Object(vec![]),
        context_limits: canonical::parse(r#"{"bytes_per_token": 4, "max_upstream_tokens": 4}"#)
            .unwrap(),
        delivery_profile: None,
    };
    assert_eq!(receipt(&s, &inputs), *forum);
    // From the ledger alone: everything but the context limits, which only the run knew.
    let derived = report::receipt::inputs_for_run(&s, 0).unwrap();
    assert_eq!(derived.model_id.as_deref(), Some("scripted-model"));
    let mut expected = forum.clone();
    let mut cb = get(forum, "context_budget").clone();
    set(&mut cb, "limits", Value::Object(vec![]));
    set(&mut expected, "context_budget", cb);
    assert_eq!(receipt(&s, &derived), expected);
    assert_eq!(report::receipt::receipt_for_run(&s, 0), Some(expected));
    assert!(report::receipt::inputs_for_run(&s, 3).is_none());
}

#[test]
fn run1_grade_is_forums() {
    let Some((s, v)) = run1() else { return };
    assert_eq!(report::grade(&s, 2), *get(&v, "grade"));
    let g = report::grade(&Snapshot::from_items(Vec::new()), 2);
    assert_eq!(get(&g, "label"), &Value::str("UNVERIFIABLE"));
    assert_eq!(get(&g, "reward"), &Value::Float(0.0));
}

#[test]
fn run1_gradable_row_is_forums() {
    let Some((s, v)) = run1() else { return };
    let forum = get(&v, "gradable_record");
    let ours = report::gradable_record(&s, None, 2);
    assert_eq!(keys(&ours), keys(forum));
    assert_eq!(
        Value::Str(report::gradable::row_hash(&ours)),
        *get(forum, "row_hash")
    );
    assert_eq!(ours, *forum);
}

// ----- the command line -----

fn json_out(repo: &Repo, args: &[&str]) -> Value {
    let out = repo.forum_ok(args);
    canonical::parse(out.trim_end()).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

fn fails(repo: &Repo, args: &[&str], code: i32, needle: &str) {
    let o = repo.forum().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: one line, got {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
    assert!(o.stdout.is_empty(), "{args:?}");
}

/// A repository with run1 imported as ledgers `main` and `a`.
fn repo_with_run1(dir: &Path) -> Repo {
    let repo = Repo::new("sha1");
    let run1 = run1_dir(dir);
    let run1 = run1.to_str().unwrap();
    repo.forum_ok(&["import", run1]);
    repo.forum_ok(&["--ledger", "a", "import", run1]);
    repo
}

#[test]
fn cli_summary_json_is_forums_and_text_is_a_table() {
    let Some(dir) = conformance() else { return };
    let Some(v) = vectors("run1_projections.json") else {
        return;
    };
    let repo = repo_with_run1(&dir);
    assert_eq!(json_out(&repo, &["summary", "--json"]), *get(&v, "summary"));
    assert_eq!(
        json_out(&repo, &["summary", "--json", "run:0"]),
        *get(&v, "summary")
    );
    let text = repo.forum_ok(&["summary"]);
    for needle in [
        "ledger main: 23 entries, chain verified",
        "payload bytes",
        "3,660",
        "scripted-model",
        "model calls (witnessed)",
    ] {
        assert!(text.contains(needle), "{needle} in\n{text}");
    }
    let dir_text = repo.forum_ok(&["summary", run1_dir(&dir).to_str().unwrap()]);
    assert!(dir_text.starts_with("Forum ledger "), "{dir_text}");
}

#[test]
fn cli_bench_between_ledgers_runs_a_directory_and_a_fetched_copy() {
    let Some(dir) = conformance() else { return };
    let repo = repo_with_run1(&dir);
    let run1 = run1_dir(&dir);
    let run1 = run1.to_str().unwrap();
    // Identical sides.
    for (a, b) in [("main", "a"), ("a", run1)] {
        let out = repo.forum_ok(&["bench", a, b]);
        assert!(out.contains("All 38 metrics are equal."), "{out}");
        assert!(out.contains("Final answers: identical."), "{out}");
    }
    // A fetched copy of `a` under refs/forum/remotes/origin/a.
    let tip = repo.git_ok(&["rev-parse", "refs/forum/ledgers/a"]);
    repo.git_ok(&["update-ref", "refs/forum/remotes/origin/a", &tip]);
    let out = repo.forum_ok(&["bench", "origin/a", "main"]);
    assert!(
        out.starts_with("A: remote ledger origin/a (23 entries)"),
        "{out}"
    );
    // Ledger b: run1 and then a revised answer.
    repo.forum_ok(&["--ledger", "b", "import", run1]);
    repo.forum_ok(&[
        "--ledger",
        "b",
        "append",
        "--actor",
        "synthesizer",
        "--kind",
        "result",
        "--parent",
        "0",
        "--payload",
        r#"{"answer":"Shipped the login API with docs.\nNext step: deploy to staging."}"#,
    ]);
    let out = repo.forum_ok(&["bench", "a", "b"]);
    assert!(out.contains("entries"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("answers") && l.trim_end().ends_with("+1")),
        "{out}"
    );
    assert!(
        !out.lines().any(|l| l.starts_with("tasks ")),
        "zero deltas are left out: {out}"
    );
    assert!(out.contains("(35 other metrics are equal)"), "{out}");
    assert!(
        out.contains("--- A: ledger a\n+++ B: ledger b\n@@"),
        "{out}"
    );
    assert!(
        out.contains(
            "-Shipped the login API with docs. Verified by the test output; next step: deploy.\n"
        ),
        "{out}"
    );
    assert!(out.contains("+Next step: deploy to staging."), "{out}");
    let j = json_out(&repo, &["bench", "--json", "a", "b"]);
    assert_eq!(keys(&j), vec!["a", "b", "delta", "answers"]);
    assert_eq!(get(get(&j, "delta"), "entries"), &Value::int(1));
    assert_eq!(get(get(&j, "delta"), "payload_bytes"), &Value::int(77));
    assert!(
        get(get(&j, "answers"), "diff")
            .as_str()
            .unwrap()
            .contains("+Next step")
    );
    // Two runs of one ledger: run1 at seq 0 and a bare request at seq 23.
    repo.forum_ok(&[
        "append",
        "--actor",
        "client",
        "--kind",
        "request",
        "--payload",
        r#"{"text":"write the changelog"}"#,
    ]);
    let j = json_out(&repo, &["bench", "--json", "run:0", "run:23"]);
    assert_eq!(get(get(&j, "b"), "entries"), &Value::int(1));
    assert_eq!(get(get(&j, "delta"), "entries"), &Value::int(-22));
    assert_eq!(get(get(&j, "answers"), "b"), &Value::Null);
    let out = repo.forum_ok(&["bench", "run:0", "run:23"]);
    assert!(out.contains("Final answers differ (B has none):"), "{out}");
}

#[test]
fn cli_bench_refuses_what_it_cannot_read_in_one_line() {
    let Some(dir) = conformance() else { return };
    let repo = repo_with_run1(&dir);
    let empty = tempfile::tempdir().unwrap();
    let empty = empty.path().to_str().unwrap().to_string();
    fails(
        &repo,
        &["bench", "nope", "a"],
        1,
        "\"nope\" is not a ledger here",
    );
    fails(
        &repo,
        &["bench", "a", "origin/nope"],
        1,
        "is not a ledger here",
    );
    fails(
        &repo,
        &["bench", "run:99", "a"],
        1,
        "no run starts at seq 99",
    );
    fails(&repo, &["bench", "run:5", "a"], 1, "no run starts at seq 5");
    fails(&repo, &["bench", "run:x", "a"], 2, "run:SEQ");
    fails(&repo, &["bench", "a", &empty], 2, "no entries.jsonl");
}

#[test]
fn cli_room_json_brief_text_and_since() {
    let Some(dir) = conformance() else { return };
    let Some(v) = vectors("run1_projections.json") else {
        return;
    };
    let repo = repo_with_run1(&dir);
    let mut room = json_out(&repo, &["room", "--json"]);
    let forum = get(&v, "room");
    // A git ledger keeps bodies in canonical form (keys sorted), so the route frame copied
    // from its body has the same members in another order.
    let frame = get(forum, "route_frame");
    assert_eq!(get(&room, "route_frame").to_serde(), frame.to_serde());
    set(&mut room, "route_frame", frame.clone());
    assert_room_matches(&room, forum, &[]);
    assert_eq!(
        repo.forum_ok(&["room"]),
        repo.forum_ok(&["room", "--text"]),
        "the room prints text unless --json"
    );
    let brief = repo.forum_ok(&["room", "--brief"]);
    assert!(
        brief.starts_with("Needs a decision: ship a login API with docs\n"),
        "{brief}"
    );
    let text = repo.forum_ok(&["room", "--text"]);
    assert!(
        text.starts_with("Run room (entries 0..=22; ledger verified;"),
        "{text}"
    );
    let since = json_out(
        &repo,
        &["room", "--json", "--since", "20", "--max-text-chars", "5"],
    );
    assert_eq!(
        get(&since, "entry_range"),
        &Value::Array(vec![Value::int(20), Value::int(22)])
    );
    fails(&repo, &["room", "--since", "-3"], 2, "--since");
    fails(
        &repo,
        &["room", "--max-text-chars", "many"],
        2,
        "--max-text-chars",
    );
    fails(&repo, &["room", "--json", "--brief"], 2, "choose one");
    fails(
        &repo,
        &["--ledger", "nope", "room"],
        1,
        "no ledger named \"nope\"",
    );
}

#[test]
fn cli_capsule_is_forums_and_refuses_bad_limits() {
    let Some(dir) = conformance() else { return };
    let Some(v) = vectors("run1_projections.json") else {
        return;
    };
    let repo = repo_with_run1(&dir);
    assert_eq!(json_out(&repo, &["capsule"]), *get(&v, "capsule"));
    let text = repo.forum_ok(&["capsule", "--text"]);
    assert_eq!(
        Value::Str(text.trim_end_matches('\n').to_string()),
        *get(&v, "capsule_text")
    );
    let small = json_out(
        &repo,
        &["capsule", "--max-items", "1", "--max-text-chars", "0"],
    );
    assert_eq!(items(get(&small, "tasks")).len(), 1);
    assert_eq!(get(&small, "latest_request"), &Value::str(""));
    fails(&repo, &["capsule", "--max-items", "-1"], 2, "--max-items");
    fails(
        &repo,
        &["capsule", "--max-text-chars", "-5"],
        2,
        "--max-text-chars",
    );
    fails(&repo, &["capsule", "--max-items", "1.5"], 2, "--max-items");
}

#[test]
fn cli_summary_of_a_redacted_ledger_says_so() {
    let Some(dir) = conformance() else { return };
    let repo = repo_with_run1(&dir);
    // Redact the answer's body (seq 19).
    let ph = {
        let j = repo.forum_json(&["show", "19"]);
        j["payload_hash"].as_str().unwrap().to_string()
    };
    repo.forum_ok(&["redact", &ph, "--reason", "test"]);
    let out = repo.forum_ok(&["summary"]);
    assert!(out.contains("1 entry without a body (redacted)"), "{out}");
    let o = repo.forum().args(["summary", "--json"]).output().unwrap();
    assert!(o.status.success());
    let j = canonical::parse(String::from_utf8_lossy(&o.stdout).trim_end()).unwrap();
    assert_eq!(get(&j, "answers"), &Value::int(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("without a body"));
    // The room and the capsule still build.
    for args in [["room", "--brief"], ["capsule", "--text"]] {
        let o = repo.forum().args(args).output().unwrap();
        assert!(o.status.success(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("1 entry without a body"),
            "{args:?}"
        );
    }
}

/// Every entry of `s` is one of Forum's 23, in order (a sanity check on the loader).
#[test]
fn snapshot_loader_reads_run1_whole() {
    let Some((s, v)) = run1() else { return };
    let forum: Vec<&Value> = items(get(&v, "entries")).iter().collect();
    assert_eq!(s.items.len(), forum.len());
    for ((e, b), f) in s.items.iter().zip(forum) {
        let e: &Entry = e;
        assert_eq!(Some(e.entry_hash.as_str()), get(f, "entry_hash").as_str());
        assert_eq!(b.as_ref(), Some(get(f, "payload")));
    }
    assert_eq!(s.checkpoint, get(&v, "checkpoint").as_str().unwrap());
    assert!(s.verified && s.deep_verified);
}

/// `git forum receipt` and `git forum grade` on Forum's run1 imported into a ledger: Forum's
/// receipt fields and grade; and both through the dispatcher's routes.
#[test]
fn receipt_and_grade_through_the_binary_and_the_dispatcher() {
    let Some(dir) = crate::common::conformance() else {
        return;
    };
    let proj: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run1_projections.json")).unwrap())
            .unwrap();
    let repo = crate::common::Repo::new("sha1");
    repo.forum_ok(&["import", dir.join("run1").to_str().unwrap()]);
    let r: serde_json::Value =
        serde_json::from_str(&repo.forum_ok(&["receipt", "--json"])).unwrap();
    let forum = &proj["receipt"];
    for k in [
        "schema",
        "tool",
        "action",
        "action_intent_id",
        "request",
        "answer",
        "ledger",
        "route_frame",
    ] {
        assert_eq!(r[k], forum[k], "{k}");
    }
    assert_eq!(r, repo.forum_json(&["receipt", "0"]));
    let g: serde_json::Value = serde_json::from_str(&repo.forum_ok(&["grade", "--json"])).unwrap();
    assert_eq!(g, proj["grade"]);
    let text = repo.forum_ok(&["grade"]);
    assert!(
        text.starts_with("FAIL: reward 0.5 over 4 independent checks, 2 refuted"),
        "{text}"
    );
    let o = repo.forum().args(["receipt", "5"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no run starts at seq 5"));
    let d = git_forum::serve::dispatch::Dispatcher::open(git_forum::serve::dispatch::Config::new(
        repo.path(),
        "main",
    ))
    .unwrap();
    let got = d.handle("GET", "/receipt", b"");
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(got.body, r);
    let got = d.handle("GET", "/grade", b"");
    assert_eq!((got.status, &got.body), (200, &proj["grade"]));
    assert_eq!(d.handle("GET", "/receipt/7", b"").status, 404);
    assert_eq!(d.handle("GET", "/receipt/x", b"").status, 400);
}
