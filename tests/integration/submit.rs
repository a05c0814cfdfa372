//! The control loop: exact ledger shapes with scripted executors (in memory and on git), Forum's
//! run1 reproduced entry by entry, and `git forum submit` / `resume` / `gate` / `runs` through
//! the real binary with command executors.

use std::collections::BTreeMap;
use std::sync::Arc;

use git_forum::exec::{Call, Executor, Fleet, Scripted};
use git_forum::ledger::{Entry, MemoryStorage, Storage, verify_chain};
use git_forum::roster::Roster;
use git_forum::run::{self, Env, Options, Silent, Status, StepClock};
use serde_json::{Value as J, json};

use crate::common::{FORMATS, Repo, conformance, on_each_kind};

const PLAN_3: &str = r#"{"tasks":[
 {"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":["endpoint documented"]},
 {"id":"T2","agent":"docs","instruction":"write the API docs","depends_on":["T1"],"done_when":[]},
 {"id":"T3","agent":"review","instruction":"review the API","depends_on":[{"id":"T1","type":"order"}],"done_when":[]}]}"#;

const ANSWER: &str =
    "Shipped the login API with docs. Verified by the test output; next step: deploy.";

/// The instruction a worker prompt starts with.
fn instruction(call: &Call<'_>) -> String {
    call.prompt.lines().next().unwrap_or("").to_string()
}

/// Which task a validator prompt is about.
fn judged(call: &Call<'_>) -> String {
    call.prompt
        .lines()
        .find_map(|l| l.strip_prefix("Task "))
        .and_then(|l| l.split(':').next())
        .unwrap_or("")
        .to_string()
}

/// An orchestrator: plans `plan`, rules with `verdict(task)`, answers ANSWER.
fn orchestrator(
    model: &str,
    plan: &'static str,
    verdict: impl Fn(&str) -> J + Send + Sync + 'static,
) -> Arc<Scripted> {
    Arc::new(Scripted::new(model, move |call| {
        let name = call.schema.map(|s| s.name.as_str());
        Ok(match name {
            Some("plan") => plan.to_string(),
            Some("verdict") => verdict(&judged(call)).to_string(),
            _ => ANSWER.to_string(),
        })
    }))
}

fn worker(model: &str) -> Arc<Scripted> {
    Arc::new(Scripted::new(model, |call| {
        Ok(format!("done: {}", instruction(call)))
    }))
}

fn pass(_: &str) -> J {
    json!({"decision": "pass", "score": 0.9, "reason": "meets the criteria"})
}

fn roster() -> Roster {
    Roster::default_roster()
}

struct Ledger {
    entries: Vec<Entry>,
    bodies: Vec<J>,
}

fn read(store: &MemoryStorage) -> Ledger {
    let entries = store.entries.clone();
    let bodies = entries
        .iter()
        .map(|e| store.payloads[&e.payload_hash].to_serde())
        .collect();
    Ledger { entries, bodies }
}

impl Ledger {
    fn shape(&self) -> Vec<(String, String, Option<i64>)> {
        self.entries
            .iter()
            .map(|e| (e.actor.clone(), e.kind.clone(), e.causal_parent))
            .collect()
    }

    fn kinds(&self) -> Vec<&str> {
        self.entries.iter().map(|e| e.kind.as_str()).collect()
    }
}

fn shape(rows: &[(&str, &str, Option<i64>)]) -> Vec<(String, String, Option<i64>)> {
    rows.iter()
        .map(|(a, k, p)| (a.to_string(), k.to_string(), *p))
        .collect()
}

fn sequential() -> Options {
    let mut o = Options::default();
    o.policy.max_parallel = 1;
    o
}

fn go(
    store: &mut MemoryStorage,
    control: Arc<dyn Executor>,
    work: Arc<dyn Executor>,
    ladder: Vec<Arc<dyn Executor>>,
    opts: &Options,
    request: &str,
) -> run::Outcome {
    let roster = roster();
    let seats = Fleet::fixed(control, work, ladder);
    let clock = StepClock::new(100.0, 0.5);
    let env = Env {
        roster: &roster,
        seats: &seats,
        clock: &clock,
        progress: &Silent,
    };
    run::submit(store, &env, opts, request).expect("run")
}

#[test]
fn a_three_task_plan_with_a_data_edge_and_an_order_edge() {
    let mut store = MemoryStorage::default();
    let o = orchestrator("orch-model", PLAN_3, pass);
    let w = worker("worker-model");
    let out = go(
        &mut store,
        o.clone(),
        w.clone(),
        vec![],
        &sequential(),
        "ship a login API with docs",
    );
    assert_eq!(out.status, Status::Answered);
    assert_eq!(out.answer.as_deref(), Some(ANSWER));
    let l = read(&store);
    assert_eq!(
        l.shape(),
        shape(&[
            ("client", "request", None),
            ("router", "route_frame", Some(0)),
            ("dispatch", "plan", Some(0)),
            ("dispatch", "task", Some(2)),
            ("backend", "result", Some(3)),
            ("dispatch", "task", Some(2)),
            ("docs", "result", Some(5)),
            ("dispatch", "task", Some(2)),
            ("review", "result", Some(7)),
            ("validator", "verdict", Some(4)),
            ("validator", "verdict", Some(6)),
            ("validator", "verdict", Some(8)),
            ("synthesizer", "result", Some(0)),
            ("delivery", "delivery_check", Some(12)),
            ("delivery-profile", "delivery_profile_check", Some(12)),
            ("intent", "intent_check", Some(12)),
        ])
    );
    assert_eq!(
        l.bodies[2]["waves"],
        json!([["T1"], ["T2", "T3"]]),
        "{}",
        l.bodies[2]
    );
    assert_eq!(
        l.bodies[2]["edges"],
        json!([{"from":"T1","to":"T2","type":"data"},{"from":"T1","to":"T3","type":"order"}])
    );
    // The data edge carries T1's output into T2's prompt; the order edge does not.
    assert_eq!(l.bodies[5]["data_from"], json!(["T1"]));
    assert_eq!(l.bodies[7]["data_from"], json!([]));
    assert_eq!(l.bodies[3]["done_when"], json!(["endpoint documented"]));
    let prompts = w.prompts();
    let t2 = prompts
        .iter()
        .find(|p| p.starts_with("write the API docs"))
        .unwrap();
    assert!(t2.contains("- T1: done: design the login API"), "{t2}");
    let t3 = prompts
        .iter()
        .find(|p| p.starts_with("review the API"))
        .unwrap();
    assert!(!t3.contains("T1:"), "{t3}");
    // Every result names its model; verdicts name the validator's.
    for i in [4, 6, 8] {
        assert_eq!(l.bodies[i]["model"], "worker-model");
        assert_eq!(l.bodies[i]["ok"], true);
    }
    for i in [9, 10, 11] {
        assert_eq!(l.bodies[i]["decision"], "pass");
        assert_eq!(l.bodies[i]["ok"], true);
        assert_eq!(l.bodies[i]["model"], "orch-model");
    }
    assert_eq!(l.bodies[12], json!({"answer": ANSWER}));
    // 1 plan + 3 tasks + 3 verdicts + 1 synthesis.
    assert_eq!(o.calls(), 5);
    assert_eq!(w.calls(), 3);
    assert_eq!(out.total_calls(), 8);
    assert_eq!(out.calls["orch-model"], 5);
    assert_eq!(out.calls["worker-model"], 3);
    assert_eq!(out.verdicts["pass"], 3);
    assert_eq!(out.written, (0..16).collect::<Vec<u64>>());
    assert_eq!(l.bodies[15]["method"], "lexical_coverage");
    assert_eq!(l.bodies[14]["schema"], "forum.delivery-profile/v1");
    assert_eq!(verify_chain(&store.entries).first_bad, None);
}

#[test]
fn a_wave_runs_its_tasks_in_parallel() {
    // Two tasks that each wait for the other to start: only a parallel wave finishes.
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let b = barrier.clone();
    let w: Arc<dyn Executor> = Arc::new(Scripted::new("w", move |call| {
        if call.prompt.starts_with("write") || call.prompt.starts_with("review") {
            b.wait();
        }
        Ok(format!("done: {}", instruction(call)))
    }));
    let mut store = MemoryStorage::default();
    let out = go(
        &mut store,
        orchestrator("o", PLAN_3, pass),
        w,
        vec![],
        &Options::default(),
        "ship a login API with docs",
    );
    assert_eq!(out.status, Status::Answered);
    assert_eq!(verify_chain(&store.entries).first_bad, None);
}

#[test]
fn a_blocked_task_is_excluded_from_synthesis_and_never_rerun() {
    let mut store = MemoryStorage::default();
    let o = orchestrator("o", PLAN_3, |t| {
        if t == "T2" {
            json!({"decision": "block", "score": 0.0, "reason": "leaks a secret"})
        } else {
            pass(t)
        }
    });
    let out = go(
        &mut store,
        o.clone(),
        worker("w"),
        vec![worker("strong")],
        &sequential(),
        "ship a login API with docs",
    );
    let l = read(&store);
    // No escalation for a block.
    assert!(!l.kinds().contains(&"tier_escalation"), "{:?}", l.kinds());
    assert_eq!(out.verdicts["block"], 1);
    let v = &l.bodies[10];
    assert_eq!(
        (v["id"].as_str(), v["decision"].as_str(), v["ok"].as_bool()),
        (Some("T2"), Some("block"), Some(false))
    );
    let synth = o.prompts().last().unwrap().clone();
    assert!(!synth.contains("write the API docs"), "{synth}");
    assert!(synth.contains("design the login API"), "{synth}");
}

#[test]
fn an_escalation_passes_on_the_second_rung() {
    let mut store = MemoryStorage::default();
    // T3 fails validation unless the strongest model did it.
    let o = orchestrator("o", PLAN_3, |t| {
        if t == "T3" {
            json!({"decision": "escalate", "score": 0.2, "reason": "too shallow"})
        } else {
            pass(t)
        }
    });
    // The validator cannot see the model, so the frontier rung answers differently and the
    // script passes anything that says "thorough".
    let o2 = Arc::new(Scripted::new("o", {
        let o = o.clone();
        move |call| {
            if call.schema.map(|s| s.name.as_str()) == Some("verdict")
                && call.prompt.contains("thorough")
            {
                return Ok(
                    json!({"decision": "pass", "score": 0.95, "reason": "ok now"}).to_string(),
                );
            }
            o.call(call).map(|r| r.text).map_err(|e| e.to_string())
        }
    }));
    let mid = Arc::new(Scripted::new("capable-model", |call| {
        Ok(format!("done: {}", instruction(call)))
    }));
    let top = Arc::new(Scripted::new("frontier-model", |call| {
        Ok(format!("thorough: {}", instruction(call)))
    }));
    let out = go(
        &mut store,
        o2,
        worker("cheap-model"),
        vec![mid.clone(), top.clone()],
        &sequential(),
        "ship a login API with docs",
    );
    assert_eq!(out.status, Status::Answered);
    let l = read(&store);
    let tail: Vec<(&str, &str)> = l.entries[12..19]
        .iter()
        .map(|e| (e.actor.as_str(), e.kind.as_str()))
        .collect();
    assert_eq!(
        tail,
        vec![
            ("orchestrator", "tier_escalation"),
            ("review", "result"),
            ("validator", "verdict"),
            ("orchestrator", "tier_escalation"),
            ("review", "result"),
            ("validator", "verdict"),
            ("synthesizer", "result"),
        ]
    );
    assert_eq!(
        l.bodies[12],
        json!({"id": "T3", "to": "capable-model", "reason": "validation failed"})
    );
    assert_eq!(
        l.entries[12].causal_parent,
        Some(8),
        "parent: the current result"
    );
    assert_eq!(l.entries[13].causal_parent, Some(12));
    assert_eq!(l.bodies[15]["to"], "frontier-model");
    assert_eq!(l.entries[15].causal_parent, Some(13));
    assert_eq!(l.bodies[16]["model"], "frontier-model");
    assert_eq!(l.bodies[17]["decision"], "pass");
    assert_eq!((mid.calls(), top.calls()), (1, 1));
}

#[test]
fn a_validator_that_errs_or_talks_nonsense_is_undetermined_and_a_wave_with_no_pass_is_degraded() {
    let mut store = MemoryStorage::default();
    let o = Arc::new(Scripted::new("o", |call| {
        match call.schema.map(|s| s.name.as_str()) {
        Some("plan") => Ok(r#"{"tasks":[{"id":"A","agent":"backend","instruction":"do a","depends_on":[],"done_when":[]},{"id":"B","agent":"backend","instruction":"do b","depends_on":[],"done_when":[]}]}"#.into()),
        Some("verdict") if judged(call) == "A" => Err("seat crashed".into()),
        Some("verdict") => Ok("I think it is fine".into()),
        _ => Ok(ANSWER.into()),
    }
    }));
    let out = go(
        &mut store,
        o,
        worker("w"),
        vec![worker("w2")],
        &sequential(),
        "do a and b",
    );
    assert_eq!(out.status, Status::Answered);
    let l = read(&store);
    let verdicts: Vec<&J> = l
        .entries
        .iter()
        .zip(&l.bodies)
        .filter(|(e, _)| e.kind == "verdict")
        .map(|(_, b)| b)
        .collect();
    assert_eq!(verdicts.len(), 2);
    for v in &verdicts {
        assert_eq!(v["decision"], "undetermined", "{v}");
        assert_eq!(v["ok"], false);
    }
    assert!(
        verdicts[0]["reason"]
            .as_str()
            .unwrap()
            .contains("seat crashed")
    );
    // Undetermined is not a reason to redo the task on another model.
    assert!(!l.kinds().contains(&"tier_escalation"));
    let (e, b) = l
        .entries
        .iter()
        .zip(&l.bodies)
        .find(|(e, _)| e.kind == "degraded")
        .expect("degraded");
    assert_eq!(e.causal_parent, Some(2));
    assert_eq!(b["wave"], 0);
    assert_eq!(b["tasks"], json!(["A", "B"]));
}

#[test]
fn a_budget_stop_is_witnessed_and_the_ledger_still_verifies() {
    let mut store = MemoryStorage::default();
    let mut opts = sequential();
    opts.max_model_calls = Some(2);
    let o = orchestrator("o", PLAN_3, pass);
    let out = go(
        &mut store,
        o,
        worker("w"),
        vec![],
        &opts,
        "ship a login API with docs",
    );
    assert_eq!(out.status, Status::StoppedOnBudget);
    let l = read(&store);
    // plan (1) + T1 (2); T2 and T3 start over budget: no call, a failed result.
    assert_eq!(out.total_calls(), 2);
    let kinds = l.kinds();
    assert_eq!(&kinds[kinds.len() - 2..], &["budget", "result"]);
    let budget = &l.bodies[l.bodies.len() - 2];
    assert_eq!(budget["model_calls"], 2);
    assert_eq!(l.entries[l.entries.len() - 2].causal_parent, Some(0));
    let t2 = l
        .bodies
        .iter()
        .find(|b| b["id"] == "T2" && b.get("output").is_some())
        .unwrap();
    assert_eq!(t2["ok"], false);
    assert_eq!(t2["error"], "budget");
    assert_eq!(t2["model"], "w", "the model is named even without a call");
    assert_eq!(verify_chain(&store.entries).first_bad, None);
}

#[test]
fn the_planner_gets_one_retry_with_the_error_then_the_run_stops_witnessed() {
    let mut store = MemoryStorage::default();
    let o = Arc::new(Scripted::new("o", |call| {
        Ok(if call.prompt.contains("could not be used") {
            r#"{"tasks":[{"id":"A","agent":"backend","instruction":"x","depends_on":["A"],"done_when":[]}]}"#.into()
        } else {
            r#"{"tasks":[{"id":"A","agent":"no-such-lane","instruction":"x","depends_on":[],"done_when":[]}]}"#.into()
        })
    }));
    let roster = roster();
    let seats = Fleet::fixed(o.clone(), worker("w"), vec![]);
    let clock = StepClock::new(1.0, 1.0);
    let env = Env {
        roster: &roster,
        seats: &seats,
        clock: &clock,
        progress: &Silent,
    };
    let err = run::submit(&mut store, &env, &Options::default(), "do it").unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("cycle"), "{msg}");
    let prompts = o.prompts();
    assert_eq!(prompts.len(), 2);
    assert!(
        prompts[1].contains("no-such-lane"),
        "the retry shows the first error: {}",
        prompts[1]
    );
    let l = read(&store);
    assert_eq!(l.kinds(), vec!["request", "route_frame", "run_stopped"]);
    assert_eq!(l.bodies[2]["stage"], "plan");
    assert_eq!(l.bodies[2]["attempts"], 2);
    assert_eq!(verify_chain(&store.entries).first_bad, None);
}

#[test]
fn an_empty_request_writes_nothing() {
    let mut store = MemoryStorage::default();
    let roster = roster();
    let seats = Fleet::fixed(worker("a"), worker("b"), vec![]);
    let clock = StepClock::new(1.0, 1.0);
    let env = Env {
        roster: &roster,
        seats: &seats,
        clock: &clock,
        progress: &Silent,
    };
    let err = run::submit(&mut store, &env, &Options::default(), "   ").unwrap_err();
    assert!(matches!(err, run::RunError::Request(_)), "{err}");
    assert!(store.entries.is_empty());
}

fn resume(
    store: &mut MemoryStorage,
    control: Arc<dyn Executor>,
    work: Arc<dyn Executor>,
    opts: &Options,
) -> run::Outcome {
    let roster = roster();
    let seats = Fleet::fixed(control, work, vec![]);
    let clock = StepClock::new(500.0, 0.5);
    let env = Env {
        roster: &roster,
        seats: &seats,
        clock: &clock,
        progress: &Silent,
    };
    run::resume(store, &env, opts, None).expect("resume")
}

#[test]
fn gates_pause_then_approve_edit_and_reject_apply_to_their_own_run_only() {
    let roster = roster();
    let clock = StepClock::new(100.0, 1.0);
    let mut opts = sequential();
    opts.gates.waves.insert(1);

    let decide = |store: &mut MemoryStorage, kind: &str, extra: J| {
        let entries = store.entries.clone();
        let pending = run::status::pending_gates(&entries, |e| {
            store.payloads.get(&e.payload_hash).map(|v| v.to_serde())
        });
        assert_eq!(pending.len(), 1, "{pending:?}");
        let g = &pending[0];
        let mut payload = json!({"run_seq": g.run_seq, "wave": g.wave, "approver": "alice"});
        for (k, v) in extra.as_object().unwrap() {
            payload[k] = v.clone();
        }
        store
            .append(git_forum::ledger::NewEntry {
                actor: "operator".into(),
                kind: kind.into(),
                causal_parent: Some(g.seq as i64),
                payload: git_forum::ledger::canonical::Value::from_serde(&payload),
                ts: 300.0,
            })
            .unwrap();
    };

    // Approved.
    let mut store = MemoryStorage::default();
    let o = orchestrator("o", PLAN_3, pass);
    let w = worker("w");
    let seats = Fleet::fixed(o.clone(), w.clone(), vec![]);
    let env = Env {
        roster: &roster,
        seats: &seats,
        clock: &clock,
        progress: &Silent,
    };
    let out = run::submit(&mut store, &env, &opts, "ship a login API with docs").unwrap();
    assert_eq!(out.status, Status::Paused { wave: 1 });
    let l = read(&store);
    assert_eq!(*l.kinds().last().unwrap(), "gate_pending");
    let gp = l.bodies.last().unwrap();
    assert_eq!(gp["run_seq"], 2, "keyed by this run's plan entry");
    assert_eq!(gp["tasks"], json!(["T2", "T3"]));
    assert_eq!(w.calls(), 1, "wave 0 ran, wave 1 waits");
    // Resuming before a decision is refused: nothing runs, nothing is written.
    let before = store.entries.len();
    let err = run::resume(&mut store, &env, &opts, None).unwrap_err();
    assert!(matches!(err, run::RunError::Gated { wave: 1, .. }), "{err}");
    assert_eq!(store.entries.len(), before);
    assert_eq!(w.calls(), 1);
    decide(&mut store, "gate_approved", json!({"note": "go"}));
    let done = resume(&mut store, o.clone(), w.clone(), &opts);
    assert_eq!(done.status, Status::Answered);
    assert_eq!(w.calls(), 3, "T1 reused, T2 and T3 ran");
    let l = read(&store);
    let reuse = l
        .entries
        .iter()
        .zip(&l.bodies)
        .rfind(|(e, _)| e.kind == "resume")
        .unwrap();
    assert_eq!(reuse.1["reused"], json!(["T1"]));

    // A second run in the same ledger is gated again: the first approval does not leak.
    let out2 = run::submit(&mut store, &env, &opts, "ship a login API with docs").unwrap();
    assert_eq!(out2.status, Status::Paused { wave: 1 });

    // Edited.
    let mut store = MemoryStorage::default();
    run::submit(&mut store, &env, &opts, "ship a login API with docs").unwrap();
    decide(
        &mut store,
        "gate_edited",
        json!({"edits": {"T2": "write the API docs in French"}, "note": null}),
    );
    let w2 = worker("w2");
    resume(&mut store, o.clone(), w2.clone(), &opts);
    assert!(
        w2.prompts()
            .iter()
            .any(|p| p.starts_with("write the API docs in French")),
        "{:?}",
        w2.prompts()
    );
    let l = read(&store);
    assert!(
        l.bodies
            .iter()
            .any(|b| b["instruction"] == "write the API docs in French")
    );

    // Rejected.
    let mut store = MemoryStorage::default();
    run::submit(&mut store, &env, &opts, "ship a login API with docs").unwrap();
    decide(&mut store, "gate_rejected", json!({"reason": "not now"}));
    let w3 = worker("w3");
    let out = resume(&mut store, o.clone(), w3.clone(), &opts);
    assert_eq!(out.status, Status::Rejected { wave: 1 });
    assert_eq!(w3.calls(), 0);
    let l = read(&store);
    assert_eq!(*l.kinds().last().unwrap(), "gate_stopped");
    assert_eq!(l.bodies.last().unwrap()["reason"], "gate rejected");
    // A rejected run is over.
    let roster = roster.clone();
    let seats = Fleet::fixed(o.clone(), w3.clone(), vec![]);
    let env = Env {
        roster: &roster,
        seats: &seats,
        clock: &clock,
        progress: &Silent,
    };
    let err = run::resume(&mut store, &env, &opts, None).unwrap_err();
    assert!(err.to_string().contains("no unfinished run"), "{err}");
}

#[test]
fn a_gate_past_its_deadline_takes_its_expiry_decision_on_resume() {
    let roster = roster();
    let clock = StepClock::new(100.0, 1.0);
    let mut opts = sequential();
    opts.gates.waves.insert(1);
    opts.gates.deadline_seconds = Some(5.0);
    opts.gates.on_expiry = Some("approve".into());
    let mut store = MemoryStorage::default();
    let o = orchestrator("o", PLAN_3, pass);
    let seats = Fleet::fixed(o.clone(), worker("w"), vec![]);
    let env = Env {
        roster: &roster,
        seats: &seats,
        clock: &clock,
        progress: &Silent,
    };
    let out = run::submit(&mut store, &env, &opts, "ship a login API with docs").unwrap();
    assert_eq!(out.status, Status::Paused { wave: 1 });
    let gp = read(&store).bodies.last().unwrap().clone();
    assert_eq!(gp["on_expiry"], "approve");
    let deadline = gp["deadline"].as_f64().unwrap();
    // A clock past the deadline.
    let late = StepClock::new(deadline + 1.0, 1.0);
    let env = Env {
        roster: &roster,
        seats: &seats,
        clock: &late,
        progress: &Silent,
    };
    let out = run::resume(&mut store, &env, &opts, None).unwrap();
    assert_eq!(out.status, Status::Answered);
    let l = read(&store);
    let (e, b) = l
        .entries
        .iter()
        .zip(&l.bodies)
        .find(|(e, _)| e.kind == "gate_expired")
        .unwrap();
    assert_eq!(b["decision"], "approved");
    assert_eq!(
        e.causal_parent.unwrap() as u64,
        l.entries
            .iter()
            .find(|e| e.kind == "gate_pending")
            .unwrap()
            .seq
    );
}

#[test]
fn resume_after_an_interruption_reuses_passed_tasks() {
    // A run whose worker dies on T2: the run stops with an error result; resume re-runs only
    // what did not pass.
    let mut store = MemoryStorage::default();
    let o = orchestrator("o", PLAN_3, pass);
    let flaky = Arc::new(Scripted::new("w", |call| {
        if call.prompt.starts_with("write") {
            Err("connection reset".into())
        } else {
            Ok(format!("done: {}", instruction(call)))
        }
    }));
    let first = go(
        &mut store,
        o.clone(),
        flaky,
        vec![],
        &sequential(),
        "ship a login API with docs",
    );
    assert_eq!(first.status, Status::Answered);
    // Cut the ledger back to before validation, as a kill mid-run would leave it.
    store.entries.truncate(9);
    let w = worker("w");
    let out = resume(&mut store, o.clone(), w.clone(), &sequential());
    assert_eq!(out.status, Status::Answered);
    assert_eq!(w.calls(), 1, "only T2 runs again: {:?}", w.prompts());
    let l = read(&store);
    assert_eq!(l.bodies[9]["reused"], json!(["T1", "T3"]));
    assert_eq!(l.entries[9].causal_parent, Some(2));
    assert_eq!(verify_chain(&store.entries).first_bad, None);
}

/// Forum's run1 (`Orchestrator.submit` with a scripted executor, clock 100.0 step 0.5,
/// `ContextBudget(max_upstream_tokens=4)`, a ladder of the same executor) reproduced entry by
/// entry: seq, ts, actor, kind, causal parent, and every payload (our added fields aside; the
/// route frame's prose is ours, its decisions Forum's).
#[test]
fn forum_run1_is_reproduced_entry_by_entry() {
    let Some(dir) = conformance() else { return };
    let roster_text = std::fs::read_to_string(dir.join("forum-default-roster.toml")).unwrap();
    let roster = Roster::from_toml_str(&roster_text, "forum-default-roster.toml").unwrap();
    let entries: Vec<J> = std::fs::read_to_string(dir.join("run1/entries.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let bodies: BTreeMap<String, J> = std::fs::read_to_string(dir.join("run1/payloads.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let r: J = serde_json::from_str(l).unwrap();
            (r["hash"].as_str().unwrap().to_string(), r["body"].clone())
        })
        .collect();

    let plan = r#"{"tasks":[
      {"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":["endpoint documented"]},
      {"id":"T2","agent":"technical-writing","instruction":"write the API docs","depends_on":["T1"]},
      {"id":"T3","agent":"code-review","instruction":"review the API","depends_on":[{"id":"T1","type":"order"}]}]}"#;
    let exec: Arc<dyn Executor> = Arc::new(Scripted::new("scripted-model", move |call| {
        Ok(match call.schema.map(|s| s.name.as_str()) {
            Some("plan") => plan.to_string(),
            Some("verdict") if judged(call) == "T3" => {
                r#"{"ok": false, "score": 0.2, "reason": "scripted"}"#.into()
            }
            Some("verdict") => r#"{"ok": true, "score": 0.8, "reason": "scripted"}"#.into(),
            _ if call.prompt.starts_with("Request:") => ANSWER.into(),
            _ => format!("done: {}", instruction(call)),
        })
    }));
    let seats = Fleet::fixed(exec.clone(), exec.clone(), vec![exec.clone()]);
    let clock = StepClock::new(100.0, 0.5);
    let env = Env {
        roster: &roster,
        seats: &seats,
        clock: &clock,
        progress: &Silent,
    };
    let mut opts = sequential();
    opts.context_budget = Some(git_forum::context::ContextBudget {
        max_upstream_tokens: Some(4),
        ..Default::default()
    });
    let mut store = MemoryStorage::default();
    run::submit(&mut store, &env, &opts, "ship a login API with docs").unwrap();
    let ours = read(&store);

    // The answer checks (delivery, profile, intent) come after the answer; compare up to it.
    let upto = entries
        .iter()
        .position(|e| e["kind"] == "result" && e["actor"] == "synthesizer")
        .unwrap()
        + 1;
    assert!(ours.entries.len() >= upto, "{:?}", ours.kinds());
    let prose = ["human_contract", "communication_contract", "signals"];
    for (i, f) in entries.iter().take(upto).enumerate() {
        let e = &ours.entries[i];
        let at = format!("seq {i} ({})", f["kind"]);
        assert_eq!(e.seq, f["seq"].as_u64().unwrap(), "{at}");
        assert_eq!(e.ts, f["ts"].as_f64().unwrap(), "{at}");
        assert_eq!(e.actor, f["actor"].as_str().unwrap(), "{at}");
        assert_eq!(e.kind, f["kind"].as_str().unwrap(), "{at}");
        assert_eq!(e.causal_parent, f["causal_parent"].as_i64(), "{at}");
        let mut theirs = bodies[f["payload_hash"].as_str().unwrap()].clone();
        let mut mine = ours.bodies[i].clone();
        match e.kind.as_str() {
            "plan" => {
                mine.as_object_mut().unwrap().remove("tasks");
            }
            "verdict" => {
                let m = mine.as_object_mut().unwrap();
                m.remove("decision");
                m.remove("model");
            }
            "route_frame" => {
                for k in prose {
                    mine.as_object_mut().unwrap().remove(k);
                    theirs.as_object_mut().unwrap().remove(k);
                }
            }
            _ => {}
        }
        let same_hash = e.payload_hash == f["payload_hash"].as_str().unwrap();
        assert_eq!(
            git_forum::ledger::canonical::Value::from_serde(&mine).canonical(),
            git_forum::ledger::canonical::Value::from_serde(&theirs).canonical(),
            "{at}"
        );
        if !matches!(e.kind.as_str(), "plan" | "verdict" | "route_frame") {
            assert!(same_hash, "{at}: payload hash differs from Forum's");
        }
    }
}

// ---- through the binary ----

/// A model as a shell script: plans PLAN_3, passes every verdict, answers ANSWER, and does
/// tasks as "done: <instruction>" (reporting `name` in every answer is not possible for a
/// command; the model id is the program).
pub(crate) fn script(repo: &Repo, name: &str, extra: &str) -> String {
    let path = repo.path().join(format!("{name}.sh"));
    let plan = PLAN_3.replace('\n', "");
    let body = format!(
        "#!/bin/sh\np=\"$1\"\n{extra}\ncase \"$p\" in\n  *\"Break this request\"*) echo '{plan}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo '{ANSWER}' ;;\n  *) echo \"done: $(printf '%s' \"$p\" | sed -n 3p)\" ;;\nesac\n"
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn submit_through_the_binary_prints_the_answer_and_a_receipt() {
    for format in FORMATS {
        let repo = Repo::new(format);
        let model = script(&repo, "model", "");
        let out = repo.forum_ok(&["submit", "--cmd", &model, "ship a login API with docs"]);
        assert_eq!(out.trim(), ANSWER, "{format}");
        let j = repo.forum_json(&["submit", "--cmd", &model, "ship a login API with docs"]);
        assert_eq!(j["answer"], ANSWER);
        let r = &j["git_forum_receipt"];
        assert_eq!(r["status"], "answered");
        assert_eq!(r["request_seq"], 16);
        assert_eq!(r["model_calls"], 8);
        assert_eq!(r["calls_per_model"][&model], 8);
        assert_eq!(r["verdicts"]["pass"], 3);
        assert_eq!(r["entries"].as_array().unwrap().len(), 16);
        assert_eq!(r["route_frame"]["schema"], "forum.route-frame/v1");
        assert_eq!(j["checkpoint"].as_str().unwrap().len(), 64);
        repo.forum_ok(&["verify", "--deep"]);
        repo.fsck();
        let log = repo.git_ok(&["log", "--format=%s", "refs/forum/ledgers/main"]);
        assert!(log.contains("request"), "{log}");
        let runs = &repo.forum_json(&["runs"])["runs"];
        assert_eq!(runs.as_array().unwrap().len(), 2);
        assert_eq!(runs[0]["state"], "answered");
        // One run at a glance.
        let glance = repo.forum_ok(&["log", "--run", "0"]);
        assert!(
            glance.starts_with("run 0 (answered): ship a login API with docs"),
            "{glance}"
        );
        for needle in [
            "T1 on backend: design the login API",
            "T2 pass",
            "answer: Shipped the login API",
            "intent_check",
        ] {
            assert!(glance.contains(needle), "{needle}: {glance}");
        }
        assert_eq!(glance.lines().count(), 17);
        let o = repo.forum().args(["log", "--run", "5"]).output().unwrap();
        assert_eq!(o.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&o.stderr).contains("no run starts at seq 5"));
    }
}

#[test]
fn worker_and_orchestrator_seats_swap_without_changing_the_record_shape() {
    on_each_kind(|repo| {
        let a = script(repo, "model-a", "");
        let b = script(repo, "model-b", "");
        let config = |worker: &str, orch: &str| {
            format!(
                "[runtime.default]\ncmd = \"{a}\"\n\n[seats]\nworker = {{ cmd = \"{worker}\" }}\norchestrator = {{ cmd = \"{orch}\" }}\n"
            )
        };
        let path = repo.path().join("rt.toml");
        std::fs::write(&path, config(&a, &b)).unwrap();
        let one = repo.forum_json(&[
            "submit",
            "--runtime-config",
            path.to_str().unwrap(),
            "ship a login API with docs",
        ]);
        std::fs::write(&path, config(&b, &a)).unwrap();
        let two = repo.forum_json(&[
            "submit",
            "--runtime-config",
            path.to_str().unwrap(),
            "ship a login API with docs",
        ]);
        let keys = |j: &J| j.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&one), keys(&two));
        assert_eq!(
            keys(&one["git_forum_receipt"]),
            keys(&two["git_forum_receipt"])
        );
        assert_eq!(one["git_forum_receipt"]["calls_per_model"][&b], 5);
        assert_eq!(one["git_forum_receipt"]["calls_per_model"][&a], 3);
        assert_eq!(two["git_forum_receipt"]["calls_per_model"][&a], 5);
        assert_eq!(two["git_forum_receipt"]["calls_per_model"][&b], 3);
        // The results of each run name the worker seat's model.
        let store_kinds = |from: u64, to: u64| -> Vec<(String, Option<String>)> {
            (from..to)
                .map(|s| {
                    let j = repo.forum_json(&["show", &s.to_string(), "--payload"]);
                    (
                        j["entry"]["kind"].as_str().unwrap().to_string(),
                        j["payload"]["model"].as_str().map(str::to_string),
                    )
                })
                .collect()
        };
        let first = store_kinds(0, 16);
        let second = store_kinds(16, 32);
        // The same entries; T2 and T3 run in parallel, so their entries may interleave
        // differently from one run to the next.
        let sorted = |rows: &[(String, Option<String>)]| {
            let mut k: Vec<String> = rows.iter().map(|(k, _)| k.clone()).collect();
            k.sort();
            k
        };
        assert_eq!(sorted(&first), sorted(&second));
        assert!(
            first
                .iter()
                .any(|(k, m)| k == "result" && m.as_deref() == Some(a.as_str()))
        );
        assert!(
            second
                .iter()
                .any(|(k, m)| k == "result" && m.as_deref() == Some(b.as_str()))
        );
    });
}

#[test]
fn a_run_killed_mid_wave_resumes_to_a_complete_answer() {
    on_each_kind(|repo| {
        // T2 hangs while a marker file exists; T1 and T3 finish.
        let marker = repo.path().join("hang");
        std::fs::write(&marker, "").unwrap();
        let hang = format!(
            "case \"$p\" in *\"write the API docs\"*) case \"$p\" in *\"Judge one task\"*|*\"Write the answer\"*) ;; *) while [ -e '{}' ]; do sleep 0.1; done ;; esac ;; esac",
            marker.display()
        );
        let model = script(repo, "model", &hang);
        let mut child = repo
            .forum()
            .args([
                "submit",
                "--cmd",
                &model,
                "--quiet",
                "ship a login API with docs",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Wait until T3 (or T1 and T2's task entry) is witnessed, then kill -9.
        // Gives up quietly at the deadline, as before: the checks below say what went wrong.
        crate::common::poll_until(std::time::Duration::from_secs(60), || {
            let n = repo
                .forum()
                .args(["log", "--json"])
                .output()
                .ok()
                .and_then(|o| serde_json::from_slice::<J>(&o.stdout).ok())
                .and_then(|j| j.as_array().map(|a| a.len()))
                .unwrap_or(0);
            n >= 8
        });
        child.kill().unwrap();
        child.wait().unwrap();
        // The orphaned executor waits on the marker; removing it lets it exit.
        std::fs::remove_file(&marker).unwrap();
        repo.forum_ok(&["verify", "--deep"]);
        let runs = &repo.forum_json(&["runs"])["runs"];
        assert_eq!(runs[0]["state"], "interrupted", "{runs}");
        let j = repo.forum_json(&["resume", "--cmd", &model]);
        assert_eq!(j["answer"], ANSWER, "{j}");
        let r = &j["git_forum_receipt"];
        assert_eq!(r["status"], "answered");
        // T1 and T3 were reused: T2 (1) + 3 verdicts + synthesis.
        assert_eq!(r["model_calls"], 5, "{r}");
        repo.forum_ok(&["verify", "--deep"]);
    });
}

#[test]
fn gates_through_the_binary() {
    on_each_kind(|repo| {
        let model = script(repo, "model", "");
        let out = repo
            .forum()
            .args([
                "submit",
                "--cmd",
                &model,
                "--gate-wave",
                "1",
                "ship a login API with docs",
            ])
            .output()
            .unwrap();
        // Paused at the gate: exit 8.
        assert_eq!(
            out.status.code(),
            Some(8),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("paused before wave 1"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let list = &repo.forum_json(&["gate", "list"])["pending"];
        assert_eq!(list.as_array().unwrap().len(), 1);
        assert_eq!(list[0]["run"], 0);
        assert_eq!(list[0]["wave"], 1);
        // Bad decisions: one line, non-zero, nothing written.
        for (args, needle) in [
            (
                vec!["gate", "approve", "--run", "7"],
                "run 7 has no pending gate",
            ),
            (
                vec!["gate", "approve", "--wave", "3"],
                "no run has a pending gate before wave 3",
            ),
            (vec!["gate", "edit"], "--edit"),
            (vec!["gate", "edit", "--edit", "T9=x"], "no task T9"),
            (
                vec!["gate", "edit", "--edit", "nonsense"],
                "TASK_ID=INSTRUCTION",
            ),
        ] {
            let o = repo.forum().args(&args).output().unwrap();
            assert!(!o.status.success(), "{args:?}");
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.contains(needle), "{args:?}: {err}");
            assert_eq!(err.trim().lines().count(), 1, "{err}");
        }
        let approved = repo.forum_json(&["gate", "approve", "--approver", "alice"]);
        assert_eq!(approved["resolved"], "approved");
        let j = repo.forum_json(&["resume", "--cmd", &model]);
        assert_eq!(j["answer"], ANSWER);
        assert_eq!(repo.forum_ok(&["gate", "list"]).trim(), "no pending gates");
        repo.forum_ok(&["verify", "--deep"]);
    });
}

#[test]
fn bad_input_to_submit_is_one_line_and_writes_nothing() {
    on_each_kind(|repo| {
        let model = script(repo, "model", "");
        let cases: Vec<(Vec<&str>, &str)> = vec![
            (vec!["submit", "   ", "--cmd", &model], "empty"),
            (vec!["submit", "do it"], "no executor is configured"),
            (
                vec!["submit", "do it", "--cmd", "/nonexistent/model"],
                "does not exist",
            ),
            (
                vec!["submit", "do it", "--cmd", "no-such-program-xyz"],
                "not on PATH",
            ),
            (
                vec![
                    "submit",
                    "do it",
                    "--chat-url",
                    "https://api.example.com/v1/chat/completions",
                    "--api-key-env",
                    "OPENAI_API_KEY",
                ],
                "OPENAI_API_KEY",
            ),
            (
                vec![
                    "submit",
                    "do it",
                    "--cmd",
                    &model,
                    "--delivery-profile",
                    "poet",
                ],
                "unknown delivery profile",
            ),
            (
                vec!["submit", "do it", "--cmd", &model, "--max-seconds=-1"],
                "--max-seconds",
            ),
            (vec!["resume", "--cmd", &model], "no unfinished run"),
        ];
        for (args, needle) in cases {
            let o = repo
                .forum()
                .env_remove("OPENAI_API_KEY")
                .args(&args)
                .output()
                .unwrap();
            assert!(!o.status.success(), "{args:?}");
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                err.to_lowercase().contains(&needle.to_lowercase()),
                "{args:?}: {err}"
            );
            assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        }
        assert!(
            repo.git(&["rev-parse", "--verify", "-q", "refs/forum/ledgers/main"])
                .stdout
                .is_empty()
        );
    });
}

#[test]
fn an_unreachable_endpoint_fails_the_run_readably_and_what_was_witnessed_verifies() {
    on_each_kind(|repo| {
        // A port nothing listens on: the planner call fails twice, the run stops witnessed.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
        let o = repo
            .forum()
            .args(["submit", "do it", "--chat-url", &url])
            .output()
            .unwrap();
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("planning failed") && err.contains("reach"),
            "{err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        repo.forum_ok(&["verify", "--deep"]);
        let runs = &repo.forum_json(&["runs"])["runs"];
        // Exit 1, an error: `failed` is the outcome table's exit 10 (a task failed).
        assert_eq!(runs[0]["state"], "error");
        assert!(err.contains("git forum resume"), "{err}");
        // The failed run resumes (planning again) once a working executor is there.
        let model = script(repo, "model", "");
        let j = repo.forum_json(&["resume", "--cmd", &model]);
        assert_eq!(j["answer"], ANSWER, "{j}");
        assert_eq!(j["git_forum_receipt"]["request_seq"], 0);
        assert_eq!(repo.forum_json(&["runs"])["runs"][0]["state"], "answered");
        repo.forum_ok(&["verify", "--deep"]);
    });
}

/// The whole loop against the real local model (SmolLM2-135M behind llama.cpp): the answers
/// are poor, so this checks structure and the record, not wit.
#[test]
fn submit_against_the_real_local_model() {
    let Some(llm) = crate::llm::LocalLlm::start() else {
        return;
    };
    let repo = Repo::new("sha256");
    let policy = repo.path().join("policy.toml");
    std::fs::write(&policy, "max_tasks = 2\n").unwrap();
    let url = llm.chat_url();
    let o = repo
        .forum()
        .args([
            "submit",
            "--json",
            "--chat-url",
            &url,
            "--model",
            llm.model(),
            "--policy",
            policy.to_str().unwrap(),
            "--max-output-tokens",
            "200",
            "write a haiku about git",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: J = serde_json::from_slice(&o.stdout).unwrap();
    assert!(!j["answer"].as_str().unwrap().trim().is_empty(), "{j}");
    let r = &j["git_forum_receipt"];
    assert_eq!(r["status"], "answered");
    repo.forum_ok(&["verify", "--deep"]);
    repo.fsck();
    // The receipt's counts match the entries.
    let log = repo.forum_json(&["log"]);
    let entries = log.as_array().unwrap();
    assert_eq!(r["entries"].as_array().unwrap().len(), entries.len());
    assert_eq!(r["ledger_size"].as_u64().unwrap() as usize, entries.len());
    let count = |kind: &str| entries.iter().filter(|e| e["kind"] == kind).count();
    let tasks = count("task");
    assert!((1..=2).contains(&tasks), "{tasks} tasks");
    let verdicts: u64 = r["verdicts"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(verdicts as usize, tasks);
    assert_eq!(count("verdict"), tasks + count("tier_escalation"));
    // Every call went to the one local model, and it is named in every task result.
    let calls = r["calls_per_model"].as_object().unwrap();
    assert_eq!(calls.len(), 1, "{calls:?}");
    let model = calls.keys().next().unwrap().clone();
    let total: u64 = calls.values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(total, r["model_calls"].as_u64().unwrap());
    // plan + tasks + verdicts + synthesis, at least.
    assert!(total as usize >= 2 + 2 * tasks, "{total}");
    for e in entries
        .iter()
        .filter(|e| e["kind"] == "result" && e["actor"] != "synthesizer")
    {
        let seq = e["seq"].as_u64().unwrap().to_string();
        let p = repo.forum_json(&["show", &seq, "--payload"]);
        assert_eq!(p["payload"]["model"], model.as_str());
    }
    let log = repo.git_ok(&["log", "--format=%s", "refs/forum/ledgers/main"]);
    assert!(log.lines().count() == entries.len(), "{log}");
}

#[test]
fn a_seconds_budget_stops_the_run_at_the_next_check() {
    // The clock says 10 s have passed once the plan is witnessed: every task starts over budget.
    let roster = roster();
    let clock = StepClock::new(100.0, 0.5);
    let o = Arc::new(Scripted::new("o", {
        move |call| {
            Ok(match call.schema.map(|s| s.name.as_str()) {
                Some("plan") => PLAN_3.to_string(),
                _ => ANSWER.to_string(),
            })
        }
    }));
    struct Late<'a>(&'a StepClock);
    impl run::Clock for Late<'_> {
        fn now(&self) -> f64 {
            self.0.now()
        }
        fn elapsed(&self) -> f64 {
            // Past the budget once three timestamps (request, frame, plan) were read.
            if self.0.now() > 101.5 { 10.0 } else { 0.0 }
        }
    }
    let late = Late(&clock);
    let w = worker("w");
    let seats = Fleet::fixed(o, w.clone(), vec![]);
    let env = Env {
        roster: &roster,
        seats: &seats,
        clock: &late,
        progress: &Silent,
    };
    let mut opts = sequential();
    opts.max_seconds = Some(5.0);
    let mut store = MemoryStorage::default();
    let out = run::submit(&mut store, &env, &opts, "ship a login API with docs").unwrap();
    assert_eq!(out.status, Status::StoppedOnBudget);
    assert_eq!(w.calls(), 0);
    let l = read(&store);
    assert!(l.kinds().contains(&"budget"), "{:?}", l.kinds());
    assert_eq!(verify_chain(&store.entries).first_bad, None);
}

#[test]
fn checkpoint_each_wave_witnesses_the_root_after_every_wave() {
    let mut store = MemoryStorage::default();
    let mut opts = sequential();
    opts.checkpoint_each_wave = true;
    go(
        &mut store,
        orchestrator("o", PLAN_3, pass),
        worker("w"),
        vec![],
        &opts,
        "ship a login API with docs",
    );
    let l = read(&store);
    let cps: Vec<(usize, &J)> = l
        .entries
        .iter()
        .zip(&l.bodies)
        .enumerate()
        .filter(|(_, (e, _))| e.kind == "checkpoint")
        .map(|(i, (_, b))| (i, b))
        .collect();
    assert_eq!(cps.len(), 2);
    for (wave, (i, b)) in cps.iter().enumerate() {
        assert_eq!(b["wave"], wave);
        assert_eq!(l.entries[*i].causal_parent, Some(2));
        // The root of every entry before it.
        assert_eq!(
            b["root"],
            verify_chain(&store.entries[..*i]).checkpoint,
            "wave {wave}"
        );
    }
}

#[test]
fn progress_goes_to_stderr_only_when_asked_or_on_a_terminal() {
    let repo = Repo::new("sha1");
    let model = script(&repo, "model", "");
    let run = |extra: &[&str]| {
        let mut args = vec!["submit", "--cmd", &model];
        args.extend_from_slice(extra);
        args.push("ship a login API with docs");
        let o = repo.forum().args(&args).output().unwrap();
        assert!(o.status.success());
        (
            String::from_utf8_lossy(&o.stdout).to_string(),
            String::from_utf8_lossy(&o.stderr).to_string(),
        )
    };
    // Not a terminal: no progress, only the closing summary.
    let (out, err) = run(&[]);
    assert_eq!(out.trim(), ANSWER);
    assert!(!err.contains("wave"), "{err}");
    assert!(err.contains("answered in 8 model calls"), "{err}");
    // --progress forces it, with the calls spent of the budget.
    let (out, err) = run(&["--progress", "--max-model-calls", "50"]);
    assert_eq!(out.trim(), ANSWER, "stdout carries only the answer");
    for needle in [
        "plan: 3 tasks in 2 waves",
        "wave 1/2: T1",
        "wave 2/2: T2, T3",
        "T1 (backend) running on",
        "model calls: 8/50",
        "synthesizing",
    ] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
    // --quiet: nothing at all.
    let (_, err) = run(&["--quiet"]);
    assert_eq!(err, "");
}
