//! Strict replay of the quality ladder after synthesis: the reviser, the intent judge and a
//! verifier command answered from the record (none of them asked again), and a gate with a
//! deadline decided again from the clock readings its entries keep.

use std::sync::Arc;
use std::time::Duration;

use git_forum::exec::{Call, Executor, Fleet, Scripted};
use git_forum::ledger::{MemoryStorage, Storage};
use git_forum::roster::Roster;
use git_forum::run::replay::{self, StrictReplay};
use git_forum::run::{self, CommandVerifier, Env, Options, Silent, Status, StepClock};
use serde_json::json;

const REQUEST: &str = "ship a login API with docs";
const PLAN_1: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":[]}]}"#;
/// An answer the delivery floor flags (one long sentence).
const LONG: &str = "We ship the login API with docs today and the team also wrote a long explanation of how the endpoint handles sessions, tokens, rate limits, retries, errors and audit logging so that everyone on call can follow along easily.";
/// The reviser's tighter answer, which covers the request as well.
const SHORT: &str = "We ship the login API with docs today.";
/// An answer the intent check flags (none of the request's terms).
const PARAPHRASE: &str = "The authentication endpoint is live and documented.";

/// An orchestrator that plans PLAN_1, passes every task, answers `answer`, tightens it to
/// SHORT and rules that a paraphrase is one.
fn orchestrator(answer: &'static str) -> Arc<dyn Executor> {
    Arc::new(Scripted::new("orch", move |call: &Call<'_>| {
        Ok(match call.schema.map(|s| s.name.as_str()) {
            Some("plan") => PLAN_1.to_string(),
            Some("verdict") => r#"{"decision":"pass","score":0.9,"reason":"fine"}"#.to_string(),
            Some("intent_judgment") => {
                r#"{"ok": true, "score": 0.8, "reason": "same meaning in other words"}"#.into()
            }
            _ if call.prompt.starts_with("Tighten this answer") => format!("  {SHORT}\n"),
            _ => answer.to_string(),
        })
    }))
}

/// Records a run answering `answer` under `opts` and returns its request seq.
fn record(store: &mut MemoryStorage, answer: &'static str, opts: &Options) -> u64 {
    let roster = Roster::default_roster();
    let worker: Arc<dyn Executor> = Arc::new(Scripted::new("work", |call| {
        Ok(format!(
            "done: {}",
            call.prompt.lines().next().unwrap_or("")
        ))
    }));
    let seats = Fleet::fixed(orchestrator(answer), worker, vec![]);
    let clock = StepClock::new(100.0, 0.5);
    let env = Env {
        roster: &roster,
        seats: &seats,
        clock: &clock,
        progress: &Silent,
    };
    let before = store.len().unwrap();
    let out = run::submit(store, &env, opts, REQUEST).expect("run");
    assert_eq!(out.status, Status::Answered);
    before
}

/// Replays with options that say nothing of the reviser, the judge or the verifier: the
/// record says which were asked.
fn replayed(store: &MemoryStorage, req: u64) -> StrictReplay {
    replay::strict(store, req, &Roster::default_roster(), &Options::default()).expect("replay")
}

fn kinds(store: &MemoryStorage) -> Vec<String> {
    store.entries.iter().map(|e| e.kind.clone()).collect()
}

fn sh(script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.into(), "sh".into()]
}

#[test]
fn a_revised_and_verified_run_replays_with_no_divergence() {
    let mut store = MemoryStorage::default();
    let mut opts = Options::default();
    opts.revise = true;
    opts.verifier = Some(Arc::new(CommandVerifier::new(
        sh(r#"printf '%s' "$2""#),
        Duration::from_secs(10),
    )));
    let req = record(&mut store, LONG, &opts);
    let k = kinds(&store);
    assert!(k.contains(&"revision".to_string()), "{k:?}");
    assert!(k.contains(&"verification".to_string()), "{k:?}");
    let r = replayed(&store, req);
    assert_eq!(r.divergence, None, "{r:?}");
    assert!(r.unanswered.is_empty(), "{r:?}");
    assert_eq!(r.recorded, r.recomputed);
    assert_eq!(r.answer_sha256, r.recomputed_answer_sha256);
}

#[test]
fn a_run_the_intent_judge_ruled_on_replays_with_no_divergence() {
    let mut store = MemoryStorage::default();
    let mut opts = Options::default();
    opts.judge_intent = true;
    let req = record(&mut store, PARAPHRASE, &opts);
    assert!(kinds(&store).contains(&"intent_judgment".to_string()));
    let r = replayed(&store, req);
    assert_eq!(r.divergence, None, "{r:?}");
    assert_eq!(r.recorded, r.recomputed);
}

#[test]
fn a_gate_with_a_deadline_replays_from_the_readings_it_kept_not_from_the_timestamps() {
    let mut store = MemoryStorage::default();
    let mut opts = Options::default();
    opts.gates.waves.insert(0);
    opts.gates.deadline_seconds = Some(5.0);
    let roster = Roster::default_roster();
    let seats = Fleet::fixed(
        orchestrator(SHORT),
        orchestrator(SHORT),
        Vec::<Arc<dyn Executor>>::new(),
    );
    // Every read of this clock steps it, so no reading equals an entry's timestamp.
    let clock = StepClock::new(100.0, 0.5);
    let env = Env {
        roster: &roster,
        seats: &seats,
        clock: &clock,
        progress: &Silent,
    };
    let out = run::submit(&mut store, &env, &opts, REQUEST).unwrap();
    assert_eq!(out.status, Status::Paused { wave: 0 });
    let r = replayed(&store, 0);
    assert_eq!(r.divergence, None, "{r:?}");
    // Resumed past the deadline: the gate expires into a rejection and the run stops.
    let late = StepClock::new(1000.0, 0.5);
    let env = Env {
        clock: &late,
        ..env
    };
    let _ = run::resume(&mut store, &env, &opts, None);
    let k = kinds(&store);
    assert!(k.contains(&"gate_expired".to_string()), "{k:?}");
    assert!(k.contains(&"gate_stopped".to_string()), "{k:?}");
    let r = replayed(&store, 0);
    assert_eq!(r.divergence, None, "{r:?}");
    assert_eq!(r.recorded, r.recomputed);
}

#[test]
fn a_halted_then_resumed_run_replays_across_the_resume_with_no_divergence() {
    for kind in crate::common::FORMATS {
        let repo = crate::common::Repo::new(kind);
        let (slow, pids) = (repo.path().join("slow"), repo.path().join("pids"));
        std::fs::write(&slow, "").unwrap();
        let model = crate::halt::model(&repo, &slow, &pids);
        let run = crate::halt::start(&repo, &model, &pids);
        repo.forum_ok(&["halt", "--reason", "stop", "--by", "ada"]);
        let (code, ..) = crate::halt::finish(run);
        assert_eq!(code, Some(5), "{kind}: the run was not halted");
        std::fs::remove_file(&slow).unwrap();
        repo.forum_ok(&["resume", "--quiet", "--cmd", &model]);
        let log = repo.forum_json(&["log", "--run", "0"]);
        let kinds: Vec<&str> = log["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["kind"].as_str())
            .collect();
        assert!(
            kinds.contains(&"halted") && kinds.contains(&"resume"),
            "{kinds:?}"
        );
        let (code, r) = crate::strict_replay::strict_cli(&repo, 0);
        assert_eq!(code, Some(0), "{kind}: {r}");
        assert_eq!(r["divergence"], serde_json::Value::Null, "{kind}: {r}");
        assert_eq!(r["recorded"], r["recomputed"], "{kind}: {r}");
        assert_eq!(r["unanswered"], json!([]), "{kind}: {r}");
    }
}
