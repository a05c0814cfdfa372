//! The verified quality ladder and context management inside `submit`: the intent judge, the
//! verifier seam, the reviser, request and per-task context with its budget, and `git forum
//! context preflight`. Exact ledger shapes with scripted executors, then the same flags
//! through the real binary, then one run on the real local model.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use git_forum::context::ContextBudget;
use git_forum::exec::{Call, Executor, Fleet, Scripted};
use git_forum::ledger::{Entry, MemoryStorage, Storage, verify_chain};
use git_forum::roster::Roster;
use git_forum::run::{
    self, CommandContext, CommandVerifier, ContextFailure, ContextProvider, Env, Options, Silent,
    Status, StepClock, Verification, Verifier, VerifierConclusion,
};
use serde_json::{Value as J, json};

use crate::common::{Repo, on_each_kind};

const REQUEST: &str = "ship a login API with docs";

const PLAN_1: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":[]}]}"#;

/// Covers every salient term of REQUEST (ship, login, api, docs): the intent floor is clean.
const COVERING: &str = "We ship the login API with docs today. Tests pass.";

/// Says the same in other words: the intent floor flags it (coverage 0).
const PARAPHRASE: &str = "The authentication endpoint is live and documented.";

/// One 39-word sentence that covers the request: the delivery floor flags it (mean > 30).
const LONG: &str = "We ship the login API with docs today and the team also wrote a long explanation of how the endpoint handles sessions, tokens, rate limits, retries, errors and audit logging so that everyone on call can follow along easily.";

/// A strictly shorter revision of LONG that keeps every request term.
const SHORT: &str = "We ship the login API with docs today.";

/// Shorter, but drops `docs`: coverage falls from 1.0 to 0.75.
const DROPPED: &str = "We ship the login API today.";

/// What the orchestrator seat is asked, by call.
fn role(call: &Call<'_>) -> &'static str {
    match call.schema.map(|s| s.name.as_str()) {
        Some("plan") => "plan",
        Some("verdict") => "verdict",
        Some("intent_judgment") => "judge",
        _ if call.prompt.starts_with("Tighten this answer") => "reviser",
        _ => "synthesis",
    }
}

/// An orchestrator that plans PLAN_1, passes every result, answers `answer`, and leaves the
/// judge and the reviser to `other(role, call)`.
fn orchestrator(
    answer: &'static str,
    other: impl Fn(&str, &Call<'_>) -> Result<String, String> + Send + Sync + 'static,
) -> Arc<Scripted> {
    Arc::new(Scripted::new("orch", move |call| match role(call) {
        "plan" => Ok(PLAN_1.to_string()),
        "verdict" => Ok(r#"{"decision":"pass","score":0.9,"reason":"fine"}"#.to_string()),
        "synthesis" => Ok(answer.to_string()),
        r => other(r, call),
    }))
}

fn unexpected(role: &str, _: &Call<'_>) -> Result<String, String> {
    panic!("the {role} was not expected to be called")
}

fn worker() -> Arc<Scripted> {
    Arc::new(Scripted::new("work", |call| {
        Ok(format!(
            "done: {}",
            call.prompt.lines().next().unwrap_or_default()
        ))
    }))
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
    opts: &Options,
) -> run::Outcome {
    let roster = Roster::default_roster();
    let seats = Fleet::fixed(control, work, vec![]);
    let clock = StepClock::new(100.0, 0.5);
    let env = Env {
        roster: &roster,
        seats: &seats,
        clock: &clock,
        progress: &Silent,
    };
    run::submit(store, &env, opts, REQUEST).expect("run")
}

struct Ledger {
    entries: Vec<Entry>,
    bodies: Vec<J>,
}

fn read(store: &MemoryStorage) -> Ledger {
    assert!(verify_chain(&store.entries).first_bad.is_none());
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

    fn of(&self, kind: &str) -> Vec<(u64, &J)> {
        self.entries
            .iter()
            .zip(&self.bodies)
            .filter(|(e, _)| e.kind == kind)
            .map(|(e, b)| (e.seq, b))
            .collect()
    }
}

fn shape(rows: &[(&str, &str, Option<i64>)]) -> Vec<(String, String, Option<i64>)> {
    rows.iter()
        .map(|(a, k, p)| (a.to_string(), k.to_string(), *p))
        .collect()
}

/// The run up to the synthesized answer (seq 6) with PLAN_1 and no context.
const BASE: [(&str, &str, Option<i64>); 7] = [
    ("client", "request", None),
    ("router", "route_frame", Some(0)),
    ("dispatch", "plan", Some(0)),
    ("dispatch", "task", Some(2)),
    ("backend", "result", Some(3)),
    ("validator", "verdict", Some(4)),
    ("synthesizer", "result", Some(0)),
];

fn base_then(
    rest: &[(&'static str, &'static str, Option<i64>)],
) -> Vec<(String, String, Option<i64>)> {
    let mut rows = BASE.to_vec();
    rows.extend_from_slice(rest);
    shape(&rows)
}

const FLOORS: [(&str, &str, Option<i64>); 3] = [
    ("delivery", "delivery_check", Some(6)),
    ("delivery-profile", "delivery_profile_check", Some(6)),
    ("intent", "intent_check", Some(6)),
];

fn sh(script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.into(), "sh".into()]
}

// ---- the intent judge ----

#[test]
fn a_clean_floor_calls_no_judge_and_no_reviser() {
    let mut store = MemoryStorage::default();
    let o = orchestrator(COVERING, unexpected);
    let mut opts = sequential();
    opts.judge_intent = true;
    opts.revise = true;
    let out = go(&mut store, o.clone(), worker(), &opts);
    assert_eq!(out.status, Status::Answered);
    assert_eq!(out.answer.as_deref(), Some(COVERING));
    let l = read(&store);
    assert_eq!(l.shape(), base_then(&FLOORS));
    assert_eq!(l.bodies[7]["flagged"], false);
    assert_eq!(l.bodies[9]["flagged"], false);
    // plan, verdict, synthesis: nothing else.
    assert_eq!(o.calls(), 3);
    assert_eq!(out.total_calls(), 4);
}

#[test]
fn the_judge_clears_a_paraphrase() {
    let mut store = MemoryStorage::default();
    let o = orchestrator(PARAPHRASE, |role, _| {
        assert_eq!(role, "judge");
        Ok(r#"{"ok": true, "score": 0.8, "reason": "same meaning in other words"}"#.into())
    });
    let mut opts = sequential();
    opts.judge_intent = true;
    let out = go(&mut store, o.clone(), worker(), &opts);
    assert_eq!(out.status, Status::Answered);
    let l = read(&store);
    let mut rest = FLOORS.to_vec();
    rest.push(("intent-judge", "intent_judgment", Some(9)));
    assert_eq!(l.shape(), base_then(&rest));
    assert_eq!(
        l.bodies[9],
        json!({"method": "lexical_coverage", "coverage": 0.0, "flagged": true, "missing": ["api", "docs", "login", "ship"]})
    );
    assert_eq!(
        l.bodies[10],
        json!({"ok": true, "score": 0.8, "reason": "same meaning in other words"})
    );
    // The judge read the request, the answer and the missing terms; its call was counted.
    let prompt = o.prompts().last().unwrap().clone();
    for needle in [REQUEST, PARAPHRASE, "api, docs, login, ship"] {
        assert!(prompt.contains(needle), "{needle}: {prompt}");
    }
    assert_eq!(out.calls["orch"], 4);
}

#[test]
fn the_judge_confirms_drift() {
    let mut store = MemoryStorage::default();
    let o = orchestrator(PARAPHRASE, |_, _| {
        Ok(r#"{"ok": false, "score": 0.1, "reason": "talks about something else"}"#.into())
    });
    let mut opts = sequential();
    opts.judge_intent = true;
    go(&mut store, o, worker(), &opts);
    let l = read(&store);
    let (seq, j) = l.of("intent_judgment")[0];
    assert_eq!(seq, 10);
    assert_eq!(l.entries[10].causal_parent, Some(9));
    assert_eq!(
        *j,
        json!({"ok": false, "score": 0.1, "reason": "talks about something else"})
    );
}

#[test]
fn a_judge_that_errs_or_answers_nonsense_is_witnessed_as_undecided() {
    for (reply, needle) in [
        (
            Err("boom".to_string()),
            "judge failed: the orchestrator seat failed (other): boom",
        ),
        (
            Ok("I think it is fine".to_string()),
            "judge failed: the judge's answer is not a usable ruling",
        ),
        (
            Ok(r#"{"score": 1}"#.to_string()),
            "judge failed: the judge's answer is not a usable ruling: the answer has no \"ok\"",
        ),
    ] {
        let mut store = MemoryStorage::default();
        let o = orchestrator(PARAPHRASE, move |_, _| reply.clone());
        let mut opts = sequential();
        opts.judge_intent = true;
        let out = go(&mut store, o, worker(), &opts);
        assert_eq!(out.status, Status::Answered);
        assert_eq!(out.answer.as_deref(), Some(PARAPHRASE));
        let l = read(&store);
        let (seq, j) = l.of("intent_judgment")[0];
        assert_eq!(l.entries[seq as usize].causal_parent, Some(9));
        assert_eq!(j["ok"], J::Null);
        assert_eq!(j["score"], 0.0);
        assert!(j["reason"].as_str().unwrap().starts_with(needle), "{j}");
    }
}

#[test]
fn every_model_call_counts_and_the_judge_is_skipped_once_the_budget_is_spent() {
    // plan, task, verdict, synthesis = 4 calls: with a budget of 4 the judge is skipped.
    let judged = |max: u64| {
        let mut store = MemoryStorage::default();
        let o = orchestrator(PARAPHRASE, |_, _| {
            Ok(r#"{"ok": true, "score": 0.7, "reason": "paraphrase"}"#.into())
        });
        let mut opts = sequential();
        opts.judge_intent = true;
        opts.max_model_calls = Some(max);
        let out = go(&mut store, o, worker(), &opts);
        assert_eq!(out.status, Status::Answered);
        let l = read(&store);
        (
            out.total_calls(),
            l.of("intent_judgment").len(),
            l.entries.len(),
        )
    };
    assert_eq!(judged(4), (4, 0, 10));
    assert_eq!(judged(5), (5, 1, 11));
    // The reviser is a counted call too, skipped the same way.
    let revised = |max: u64| {
        let mut store = MemoryStorage::default();
        let o = orchestrator(LONG, |_, _| Ok(SHORT.into()));
        let mut opts = sequential();
        opts.revise = true;
        opts.max_model_calls = Some(max);
        let out = go(&mut store, o, worker(), &opts);
        (out.total_calls(), read(&store).of("revision").len())
    };
    assert_eq!(revised(4), (4, 0));
    assert_eq!(revised(5), (5, 1));
}

// ---- the verifier seam ----

fn verified_by(argv: Vec<String>, timeout: Duration) -> (run::Outcome, Ledger) {
    let mut store = MemoryStorage::default();
    let mut opts = sequential();
    opts.verifier = Some(Arc::new(CommandVerifier::new(argv, timeout)));
    let out = go(
        &mut store,
        orchestrator(COVERING, unexpected),
        worker(),
        &opts,
    );
    assert_eq!(
        out.status,
        Status::Answered,
        "a verifier never sinks the run"
    );
    assert_eq!(out.answer.as_deref(), Some(COVERING));
    let l = read(&store);
    let mut rest = FLOORS.to_vec();
    rest.push(("verifier", "verification", Some(6)));
    assert_eq!(l.shape(), base_then(&rest));
    (out, l)
}

#[test]
fn a_verifier_command_gets_the_request_and_the_answer_and_verifies() {
    let argv =
        sh(r#"[ "$1" = "ship a login API with docs" ] || exit 2; printf 'checked: %s' "$2""#);
    let (_, l) = verified_by(argv.clone(), Duration::from_secs(10));
    let source = format!("command: sh -c {} sh", shlex::try_quote(&argv[2]).unwrap());
    assert_eq!(
        l.bodies[10],
        json!({"ok": true, "detail": format!("checked: {COVERING}"), "source": source})
    );
}

#[test]
fn a_verifier_refutes() {
    let (_, l) = verified_by(
        sh("echo 'the answer names no endpoint' >&2; exit 1"),
        Duration::from_secs(10),
    );
    assert_eq!(l.bodies[10]["ok"], false);
    assert_eq!(l.bodies[10]["detail"], "the answer names no endpoint");
    // A bare exit 1 still says what happened.
    let (_, l) = verified_by(sh("exit 1"), Duration::from_secs(10));
    assert_eq!(l.bodies[10]["ok"], false);
    assert_eq!(l.bodies[10]["detail"], "the verifier exited 1");
}

#[test]
fn a_verifier_that_crashes_or_hangs_could_not_decide() {
    for (script, needle) in [
        ("exit 3", "exited with exit status: 3"),
        ("kill -9 $$", "signal: 9"),
    ] {
        let (_, l) = verified_by(sh(script), Duration::from_secs(10));
        let v = &l.bodies[10];
        assert_eq!(v["ok"], J::Null, "{script}");
        let detail = v["detail"].as_str().unwrap();
        assert!(detail.starts_with("could not decide: "), "{detail}");
        assert!(detail.contains(needle), "{script}: {detail}");
    }
    // A hang is killed at its deadline, with whatever it started.
    let t = Instant::now();
    let (_, l) = verified_by(sh("sleep 30 & sleep 30"), Duration::from_millis(300));
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(l.bodies[10]["ok"], J::Null);
    assert!(
        l.bodies[10]["detail"]
            .as_str()
            .unwrap()
            .contains("did not finish within 0.3s"),
        "{}",
        l.bodies[10]
    );
    // A program that does not exist.
    let (_, l) = verified_by(vec!["/nonexistent/verifier".into()], Duration::from_secs(5));
    assert_eq!(l.bodies[10]["ok"], J::Null);
    // A library verifier that panics is caught.
    struct Panics;
    impl Verifier for Panics {
        fn verify(&self, _: &str, _: &str) -> Verification {
            panic!("verifier bug")
        }
        fn source(&self) -> String {
            "panics".into()
        }
    }
    let mut store = MemoryStorage::default();
    let mut opts = sequential();
    opts.verifier = Some(Arc::new(Panics));
    let out = go(
        &mut store,
        orchestrator(COVERING, unexpected),
        worker(),
        &opts,
    );
    assert_eq!(out.status, Status::Answered);
    let l = read(&store);
    assert_eq!(
        l.bodies[10],
        json!({"ok": null, "detail": "could not decide: the verifier panicked: verifier bug", "source": "panics"})
    );
}

#[test]
fn a_verifier_that_prints_garbage_could_not_decide() {
    let (_, l) = verified_by(sh(r"printf '\377\376ok'"), Duration::from_secs(10));
    assert_eq!(l.bodies[10]["ok"], J::Null);
    assert!(
        l.bodies[10]["detail"]
            .as_str()
            .unwrap()
            .contains("not UTF-8"),
        "{}",
        l.bodies[10]
    );
    // Text is not garbage: the exit status decides, and a flood is cut.
    let (_, l) = verified_by(
        sh("head -c 200000 /dev/zero | tr '\\0' x"),
        Duration::from_secs(10),
    );
    assert_eq!(l.bodies[10]["ok"], true);
    assert_eq!(
        l.bodies[10]["detail"].as_str().unwrap().chars().count(),
        1001
    );
}

#[test]
fn a_library_verifier_is_witnessed_as_it_answers() {
    struct Fixed(VerifierConclusion);
    impl Verifier for Fixed {
        fn verify(&self, request: &str, answer: &str) -> Verification {
            assert_eq!((request, answer), (REQUEST, COVERING));
            Verification {
                outcome: self.0,
                detail: "checked against the spec".into(),
                source: "spec-checker".into(),
            }
        }
        fn source(&self) -> String {
            "spec-checker".into()
        }
    }
    for (outcome, ok) in [
        (VerifierConclusion::Verified, json!(true)),
        (VerifierConclusion::Refuted, json!(false)),
        (VerifierConclusion::Undecided, J::Null),
    ] {
        let mut store = MemoryStorage::default();
        let mut opts = sequential();
        opts.verifier = Some(Arc::new(Fixed(outcome)));
        go(
            &mut store,
            orchestrator(COVERING, unexpected),
            worker(),
            &opts,
        );
        let l = read(&store);
        assert_eq!(
            l.bodies[10],
            json!({"ok": ok, "detail": "checked against the spec", "source": "spec-checker"})
        );
    }
}

// ---- the reviser ----

#[test]
fn an_accepted_revision_is_delivered_and_checked_in_place_of_the_answer() {
    let mut store = MemoryStorage::default();
    let o = orchestrator(LONG, |role, call| {
        assert_eq!(role, "reviser");
        assert!(call.prompt.contains(LONG) && call.prompt.contains(REQUEST));
        Ok(format!("  {SHORT}\n"))
    });
    let mut opts = sequential();
    opts.revise = true;
    opts.judge_intent = true;
    opts.verifier = Some(Arc::new(CommandVerifier::new(
        sh(r#"printf '%s' "$2""#),
        Duration::from_secs(10),
    )));
    let out = go(&mut store, o.clone(), worker(), &opts);
    assert_eq!(out.status, Status::Answered);
    assert_eq!(out.answer.as_deref(), Some(SHORT));
    assert_eq!(out.answer_seq, Some(9));
    let l = read(&store);
    assert_eq!(
        l.shape(),
        base_then(&[
            ("delivery", "delivery_check", Some(6)),
            ("reviser", "revision", Some(7)),
            ("synthesizer", "result", Some(8)),
            ("delivery-profile", "delivery_profile_check", Some(9)),
            ("intent", "intent_check", Some(9)),
            ("verifier", "verification", Some(9)),
        ])
    );
    assert_eq!(l.bodies[7]["flagged"], true);
    assert_eq!(
        l.bodies[8],
        json!({"accepted": true, "words_before": 39, "words_after": 8, "coverage_before": 1.0, "coverage_after": 1.0})
    );
    assert_eq!(l.bodies[9], json!({"answer": SHORT, "revised_from": 6}));
    assert_eq!(l.bodies[11]["flagged"], false);
    // The verifier saw the delivered answer.
    assert_eq!(l.bodies[12]["detail"], SHORT);
    // The ledger reads back with the revised answer as the run's answer.
    let entries = l.entries.clone();
    let runs = run::status::runs(&entries, |e| {
        store.payloads.get(&e.payload_hash).map(|v| v.to_serde())
    });
    assert_eq!(runs[0].answer, Some((9, SHORT.to_string())));
    assert_eq!(runs[0].state, run::status::RunState::Answered);
    assert_eq!(o.calls(), 4);
}

#[test]
fn a_revision_that_drops_a_request_term_is_recorded_and_discarded() {
    let mut store = MemoryStorage::default();
    let o = orchestrator(LONG, |_, _| Ok(DROPPED.into()));
    let mut opts = sequential();
    opts.revise = true;
    let out = go(&mut store, o, worker(), &opts);
    assert_eq!(out.answer.as_deref(), Some(LONG));
    assert_eq!(out.answer_seq, Some(6));
    let l = read(&store);
    assert_eq!(
        l.shape(),
        base_then(&[
            ("delivery", "delivery_check", Some(6)),
            ("reviser", "revision", Some(7)),
            ("delivery-profile", "delivery_profile_check", Some(6)),
            ("intent", "intent_check", Some(6)),
        ])
    );
    assert_eq!(
        l.bodies[8],
        json!({"accepted": false, "words_before": 39, "words_after": 6, "coverage_before": 1.0, "coverage_after": 0.75, "text": DROPPED})
    );
    // Longer is refused too, even when it covers everything.
    let mut store = MemoryStorage::default();
    let o = orchestrator(LONG, |_, _| Ok(format!("{LONG} Also more.")));
    go(&mut store, o, worker(), &opts);
    let l = read(&store);
    assert_eq!(l.bodies[8]["accepted"], false);
    assert_eq!(l.of("result").len(), 2);
}

#[test]
fn a_reviser_that_fails_is_witnessed_and_the_answer_stands() {
    for (reply, reason) in [
        (
            Err("boom".to_string()),
            "reviser failed: the orchestrator seat failed (other): boom",
        ),
        (
            Ok("  \n".to_string()),
            "reviser failed: the orchestrator seat returned an empty answer",
        ),
    ] {
        let mut store = MemoryStorage::default();
        let o = orchestrator(LONG, move |_, _| reply.clone());
        let mut opts = sequential();
        opts.revise = true;
        let out = go(&mut store, o, worker(), &opts);
        assert_eq!(out.status, Status::Answered);
        assert_eq!(out.answer.as_deref(), Some(LONG));
        let l = read(&store);
        assert_eq!(l.entries[8].kind, "revision");
        assert_eq!(l.entries[8].causal_parent, Some(7));
        assert_eq!(l.bodies[8], json!({"accepted": false, "reason": reason}));
        assert_eq!(l.entries[9].causal_parent, Some(6));
    }
}

// ---- context ----

/// A provider with fixed request and per-task context that counts its calls.
struct Fixed {
    request: String,
    task: Option<String>,
    calls: AtomicUsize,
}

impl Fixed {
    fn new(request: &str, task: Option<&str>) -> Arc<Fixed> {
        Arc::new(Fixed {
            request: request.to_string(),
            task: task.map(str::to_string),
            calls: AtomicUsize::new(0),
        })
    }
}

impl ContextProvider for Fixed {
    fn request_context(
        &self,
        request: &str,
        ledger: &dyn Storage,
    ) -> Result<String, ContextFailure> {
        assert_eq!(request, REQUEST);
        // The request and its route frame are witnessed before context is read.
        assert_eq!(ledger.len().unwrap(), 2);
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(self.request.clone())
    }

    fn task_context(
        &self,
        task_id: &str,
        instruction: &str,
    ) -> Option<Result<String, ContextFailure>> {
        assert_eq!((task_id, instruction), ("T1", "design the login API"));
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.task.clone().map(Ok)
    }

    fn describe(&self) -> String {
        "fixed".into()
    }
}

#[test]
fn context_chains_the_plan_and_the_task_and_reaches_their_prompts() {
    let mut store = MemoryStorage::default();
    let o = orchestrator(COVERING, unexpected);
    let w = worker();
    let mut opts = sequential();
    opts.context = Some(Fixed::new(
        "the login service lives in svc/auth",
        Some("use JWT"),
    ));
    go(&mut store, o.clone(), w.clone(), &opts);
    let l = read(&store);
    assert_eq!(
        l.shape(),
        shape(&[
            ("client", "request", None),
            ("router", "route_frame", Some(0)),
            ("context", "context", Some(0)),
            ("dispatch", "plan", Some(2)),
            ("context", "context", Some(3)),
            ("dispatch", "task", Some(4)),
            ("backend", "result", Some(5)),
            ("validator", "verdict", Some(6)),
            ("synthesizer", "result", Some(0)),
            ("delivery", "delivery_check", Some(8)),
            ("delivery-profile", "delivery_profile_check", Some(8)),
            ("intent", "intent_check", Some(8)),
        ])
    );
    assert_eq!(
        l.bodies[2],
        json!({"context": "the login service lives in svc/auth"})
    );
    assert_eq!(l.bodies[4], json!({"task": "T1", "context": "use JWT"}));
    assert!(o.prompts()[0].contains("the login service lives in svc/auth"));
    assert_eq!(
        w.prompts()[0],
        "design the login API\n\nContext for this task:\nuse JWT"
    );
    // The task entry keeps the plan's instruction.
    assert_eq!(l.bodies[5]["instruction"], "design the login API");
}

#[test]
fn per_task_context_is_cut_without_a_budget() {
    let mut store = MemoryStorage::default();
    let long = "é".repeat(9000);
    let mut opts = sequential();
    opts.context = Some(Fixed::new("", Some(&long)));
    go(
        &mut store,
        orchestrator(COVERING, unexpected),
        worker(),
        &opts,
    );
    let l = read(&store);
    // An empty request context writes nothing: the plan chains to the request.
    assert_eq!(l.entries[2].kind, "plan");
    assert_eq!(l.entries[2].causal_parent, Some(0));
    let (seq, c) = l.of("context")[0];
    let expected = format!(
        "{}\n... [truncated for prompt efficiency]",
        "é".repeat(8192)
    );
    assert_eq!(c["context"], expected.as_str());
    assert_eq!(l.entries[seq as usize + 1].causal_parent, Some(seq as i64));
}

#[test]
fn context_is_trimmed_and_omitted_under_a_budget_without_copying_omitted_text() {
    let mut store = MemoryStorage::default();
    let o = orchestrator(COVERING, unexpected);
    let w = worker();
    let request_ctx = "0123456789".repeat(4); // 40 bytes: 10 tokens
    let task_ctx = "SECRET-TASK-CONTEXT";
    let mut opts = sequential();
    opts.context = Some(Fixed::new(&request_ctx, Some(task_ctx)));
    opts.context_budget = Some(ContextBudget {
        max_request_tokens: Some(5),
        max_task_tokens: Some(0),
        ..ContextBudget::default()
    });
    go(&mut store, o.clone(), w.clone(), &opts);
    let l = read(&store);
    assert_eq!(
        l.shape(),
        shape(&[
            ("client", "request", None),
            ("router", "route_frame", Some(0)),
            ("context-budget", "context_budget", Some(0)),
            ("context", "context", Some(0)),
            ("dispatch", "plan", Some(3)),
            ("context-budget", "context_budget", Some(4)),
            // The omitted task context keeps only its length (for a strict replay) and
            // chains nothing: the task hangs under the plan.
            ("context", "context", Some(4)),
            ("dispatch", "task", Some(4)),
            ("backend", "result", Some(7)),
            ("validator", "verdict", Some(8)),
            ("context-budget", "context_budget", Some(8)),
            ("synthesizer", "result", Some(0)),
            ("delivery", "delivery_check", Some(11)),
            ("delivery-profile", "delivery_profile_check", Some(11)),
            ("intent", "intent_check", Some(11)),
        ])
    );
    assert_eq!(
        l.bodies[2],
        json!({"schema": "forum.context-pressure/v1", "source": "request", "label": "request",
               "action": "trimmed", "reason": "max_request_tokens", "original_bytes": 40,
               "admitted_bytes": 20, "original_tokens": 10, "admitted_tokens": 5,
               "remaining_total_tokens": null})
    );
    // What the budget read of the text it cut: the text's length and the first character
    // after the cut.
    assert_eq!(
        l.bodies[3],
        json!({"context": "01234567890123456789", "seen_bytes": 40, "next": "0"})
    );
    assert_eq!(
        l.bodies[6],
        json!({"task": "T1", "context": "", "seen_bytes": 19})
    );
    assert_eq!(
        l.bodies[5],
        json!({"schema": "forum.context-pressure/v1", "source": "task", "label": "T1",
               "action": "omitted", "reason": "max_task_tokens", "original_bytes": 19,
               "admitted_bytes": 0, "original_tokens": 5, "admitted_tokens": 0,
               "remaining_total_tokens": null})
    );
    // The omitted text is nowhere in the ledger, nor in the worker's prompt.
    for b in &l.bodies {
        assert!(!b.to_string().contains(task_ctx), "{b}");
    }
    assert_eq!(w.prompts()[0], "design the login API");
    assert!(o.prompts()[0].contains("Context for this request:\n01234567890123456789\n"));
    // With a run-wide total the meter drains: the request slice takes 8 of 10, the task
    // slice is cut to the 2 left.
    let mut store = MemoryStorage::default();
    opts.context_budget = Some(ContextBudget {
        max_total_tokens: Some(10),
        max_request_tokens: Some(8),
        ..ContextBudget::default()
    });
    go(
        &mut store,
        orchestrator(COVERING, unexpected),
        worker(),
        &opts,
    );
    let l = read(&store);
    let pressures = l.of("context_budget");
    let summary: Vec<(&str, &str, u64, Option<u64>)> = pressures
        .iter()
        .map(|(_, p)| {
            (
                p["source"].as_str().unwrap(),
                p["action"].as_str().unwrap(),
                p["admitted_tokens"].as_u64().unwrap(),
                p["remaining_total_tokens"].as_u64(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("request", "trimmed", 8, Some(2)),
            ("task", "trimmed", 2, Some(0)),
            ("upstream", "omitted", 0, Some(0)),
        ]
    );
    let (seq, c) = l.of("context")[1];
    assert_eq!(
        c,
        &json!({"task": "T1", "context": "SECRET-T", "seen_bytes": 19, "next": "A"})
    );
    assert_eq!(l.entries[seq as usize + 1].kind, "task");
    assert_eq!(l.entries[seq as usize + 1].causal_parent, Some(seq as i64));
}

#[test]
fn a_context_command_gets_the_request_then_each_task() {
    let mut store = MemoryStorage::default();
    let w = worker();
    let mut opts = sequential();
    opts.context = Some(Arc::new(CommandContext::new(
        sh(
            r#"case "$1" in request) printf 'about: %s\n' "$2" ;; task) printf '%s needs: %s\n\n' "$2" "$3" ;; esac"#,
        ),
        Duration::from_secs(10),
    )));
    go(
        &mut store,
        orchestrator(COVERING, unexpected),
        w.clone(),
        &opts,
    );
    let l = read(&store);
    let contexts: Vec<&J> = l.of("context").into_iter().map(|(_, b)| b).collect();
    assert_eq!(
        contexts,
        [
            &json!({"context": format!("about: {REQUEST}")}),
            &json!({"task": "T1", "context": "T1 needs: design the login API"}),
        ]
    );
}

#[test]
fn a_failing_context_command_is_witnessed_and_the_run_goes_on_without_context() {
    for (script, code, timeout) in [
        (
            "echo 'index unavailable' >&2; exit 3",
            "exit",
            Duration::from_secs(10),
        ),
        (r"printf '\377\376'", "not_utf8", Duration::from_secs(10)),
        ("sleep 30", "timeout", Duration::from_millis(300)),
    ] {
        let mut store = MemoryStorage::default();
        let w = worker();
        let mut opts = sequential();
        opts.context = Some(Arc::new(CommandContext::new(sh(script), timeout)));
        opts.context_budget = Some(ContextBudget {
            max_total_tokens: Some(100),
            ..ContextBudget::default()
        });
        let out = go(
            &mut store,
            orchestrator(COVERING, unexpected),
            w.clone(),
            &opts,
        );
        assert_eq!(out.status, Status::Answered, "{script}");
        let l = read(&store);
        assert_eq!(
            l.shape()[..7],
            shape(&[
                ("client", "request", None),
                ("router", "route_frame", Some(0)),
                ("context", "context", Some(0)),
                ("dispatch", "plan", Some(0)),
                ("context", "context", Some(3)),
                ("dispatch", "task", Some(3)),
                ("backend", "result", Some(5)),
            ])[..],
            "{script}"
        );
        for (i, task) in [(2, None), (4, Some("T1"))] {
            let b = &l.bodies[i];
            assert_eq!(b["context"], "", "{b}");
            assert_eq!(b["error"], code, "{b}");
            assert_eq!(b.get("task").and_then(J::as_str), task);
            let reason = b["reason"].as_str().unwrap();
            assert!(
                reason.starts_with("the context provider failed: "),
                "{reason}"
            );
            assert!(
                reason.ends_with("the run goes on without this context"),
                "{reason}"
            );
        }
        if code == "exit" {
            assert!(
                l.bodies[2]["reason"]
                    .as_str()
                    .unwrap()
                    .contains("index unavailable")
            );
        }
        // No pressure is recorded for context that never came.
        assert!(
            l.of("context_budget")
                .iter()
                .all(|(_, p)| p["source"] == "upstream")
        );
        assert_eq!(w.prompts()[0], "design the login API");
    }
}

#[test]
fn a_resumed_run_that_plans_again_chains_the_plan_to_its_witnessed_context() {
    // The first attempt witnessed its request context, then planning failed twice.
    let roster = Roster::default_roster();
    let clock = StepClock::new(100.0, 0.5);
    let failing = Arc::new(Scripted::new("o", |_| Ok("no plan here".to_string())));
    let provider = Fixed::new("svc/auth owns login", None);
    let mut opts = sequential();
    opts.context = Some(provider.clone());
    let mut store = MemoryStorage::default();
    let seats = Fleet::fixed(failing, worker(), vec![]);
    let env = Env {
        roster: &roster,
        seats: &seats,
        clock: &clock,
        progress: &Silent,
    };
    assert!(run::submit(&mut store, &env, &opts, REQUEST).is_err());
    let o = orchestrator(COVERING, unexpected);
    let seats = Fleet::fixed(o.clone(), worker(), vec![]);
    let env = Env {
        roster: &roster,
        seats: &seats,
        clock: &clock,
        progress: &Silent,
    };
    let out = run::resume(&mut store, &env, &opts, None).expect("resume");
    assert_eq!(out.status, Status::Answered);
    let l = read(&store);
    let (plan_seq, _) = l.of("plan")[0];
    assert_eq!(l.entries[plan_seq as usize].causal_parent, Some(2));
    assert!(o.prompts()[0].contains("svc/auth owns login"));
    // The request context was read once, by the first attempt; the resumed run asked only
    // for T1's.
    assert_eq!(provider.calls.load(Ordering::SeqCst), 2);
}

// ---- through the binary ----

/// A command model: plans PLAN_1, passes every result, answers LONG (flagged by the delivery
/// floor), revises to SHORT and rules paraphrased.
fn model_script(repo: &Repo) -> String {
    let path = repo.path().join("model.sh");
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{PLAN_1}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"A lexical check found\"*) echo '{{\"ok\":true,\"score\":0.9,\"reason\":\"paraphrase\"}}' ;;\n  *\"Tighten this answer\"*) echo 'We ship it.' ;;\n  *\"Write the answer\"*) echo '{LONG}' ;;\n  *) echo \"done: $(printf '%s' \"$p\" | sed -n 3p)\" ;;\nesac\n"
    );
    executable(&path, &body)
}

fn executable(path: &std::path::Path, body: &str) -> String {
    std::fs::write(path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

fn kinds(repo: &Repo) -> Vec<(String, String, J)> {
    let log = repo.forum_json(&["log"]);
    let mut rows: Vec<(String, String, J)> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap().to_string(),
                e["actor"].as_str().unwrap().to_string(),
                e["causal_parent"].clone(),
            )
        })
        .collect();
    rows.reverse();
    rows
}

fn payload(repo: &Repo, seq: usize) -> J {
    repo.forum_json(&["show", &seq.to_string(), "--payload"])["payload"].clone()
}

#[test]
fn the_whole_ladder_through_the_binary() {
    on_each_kind(|repo| {
        let model = model_script(repo);
        let ctx = executable(
            &repo.path().join("ctx.sh"),
            "#!/bin/sh\n[ \"$1\" = request ] && echo \"notes for: $2\"\n[ \"$1\" = task ] && echo \"hint for $2\"\nexit 0\n",
        );
        let verify = executable(
            &repo.path().join("verify.sh"),
            "#!/bin/sh\ncase \"$2\" in *ship*) echo \"mentions shipping\"; exit 0 ;; esac\necho 'no shipping' >&2; exit 1\n",
        );
        // SHORT here drops request terms ("We ship it."), so the revision is refused.
        let j = repo.forum_json(&[
            "submit",
            "--cmd",
            &model,
            "--judge-intent",
            "--revise",
            "--verify-cmd",
            &verify,
            "--context-cmd",
            &ctx,
            REQUEST,
        ]);
        assert_eq!(j["answer"], LONG, "{j}");
        assert_eq!(j["git_forum_receipt"]["model_calls"], 5, "{j}");
        let rows = kinds(repo);
        let k: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
        assert_eq!(
            k,
            [
                "request",
                "route_frame",
                "context",
                "plan",
                "context",
                "task",
                "result",
                "verdict",
                "result",
                "delivery_check",
                "revision",
                "delivery_profile_check",
                "intent_check",
                "verification",
            ]
        );
        assert_eq!(
            payload(repo, 2),
            json!({"context": format!("notes for: {REQUEST}")})
        );
        assert_eq!(
            payload(repo, 4),
            json!({"task": "T1", "context": "hint for T1"})
        );
        assert_eq!(payload(repo, 10)["accepted"], false);
        assert_eq!(payload(repo, 12)["flagged"], false);
        assert_eq!(
            payload(repo, 13),
            json!({"ok": true, "detail": "mentions shipping", "source": format!("command: {verify}")})
        );
        repo.forum_ok(&["verify", "--deep"]);
        let glance = repo.forum_ok(&["log", "--run", "0"]);
        for needle in [
            "request: notes for: ship a login API",
            "task T1: hint for T1",
            "rejected: 39 -> 3 words",
            "verified: mentions shipping",
        ] {
            assert!(glance.contains(needle), "{needle}: {glance}");
        }
    });
}

#[test]
fn capsule_context_through_the_binary() {
    on_each_kind(|repo| {
        let model = model_script(repo);
        repo.forum_ok(&["submit", "--cmd", &model, "--quiet", REQUEST]);
        let before = kinds(repo).len();
        repo.forum_ok(&[
            "submit",
            "--cmd",
            &model,
            "--quiet",
            "--use-capsule-context",
            "--request-context-token-budget",
            "4000",
            "review the login API docs",
        ]);
        let rows = kinds(repo);
        let k: Vec<&str> = rows[before..].iter().map(|r| r.0.as_str()).collect();
        assert_eq!(
            k[..5],
            [
                "request",
                "route_frame",
                "context_budget",
                "context",
                "plan"
            ]
        );
        let ctx = payload(repo, before + 3)["context"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(ctx.starts_with("Forum context capsule\n"), "{ctx}");
        // The capsule is read once the new request is witnessed, so it is the latest request.
        assert!(
            ctx.contains("latest request: review the login API docs"),
            "{ctx}"
        );
        assert!(
            ctx.contains(&format!("latest answer: {}", &LONG[..40])),
            "{ctx}"
        );
        assert_eq!(rows[before + 4].2, json!(before + 3));
        let p = payload(repo, before + 2);
        assert_eq!(
            (p["source"].clone(), p["action"].clone()),
            (json!("request"), json!("retained"))
        );
        repo.forum_ok(&["verify", "--deep"]);
        // The same capsule the command prints.
        let text = repo.forum_ok(&["capsule", "--text"]);
        assert!(text.starts_with("Forum context capsule"), "{text}");
    });
}

#[test]
fn context_preflight_estimates_without_writing() {
    let repo = Repo::new("sha1");
    // No ledger yet, no context: only the request is measured.
    let j = repo.forum_json(&["context", "preflight", REQUEST]);
    assert_eq!(
        j,
        json!({"schema": "forum.context-preflight/v1", "ready": true,
               "request": {"bytes": 26, "tokens": 7},
               "context": {"source": "none", "action": "none", "reason": "no_context",
                           "original_tokens": 0, "admitted_tokens": 0, "tokens_saved": 0},
               "limits": {}, "issues": []})
    );
    let ctx = executable(
        &repo.path().join("ctx.sh"),
        "#!/bin/sh\nprintf '%s' '0123456789012345678901234567890123456789'\n",
    );
    let j = repo.forum_json(&[
        "context",
        "preflight",
        "--context-cmd",
        &ctx,
        "--request-context-token-budget",
        "4",
        "--context-token-budget",
        "100",
        REQUEST,
    ]);
    assert_eq!(
        j["context"],
        json!({"source": "command", "action": "trimmed", "reason": "max_request_tokens",
               "original_tokens": 10, "admitted_tokens": 4, "tokens_saved": 6})
    );
    assert_eq!(
        j["limits"],
        json!({"bytes_per_token": 4, "max_total_tokens": 100, "max_request_tokens": 4})
    );
    assert_eq!(
        j["issues"],
        json!(["command context would be trimmed before planning"])
    );
    assert_eq!(j["ready"], true);
    let j = repo.forum_json(&[
        "context",
        "preflight",
        "--context-cmd",
        &ctx,
        "--request-context-token-budget",
        "0",
        REQUEST,
    ]);
    assert_eq!(
        (j["ready"].clone(), j["context"]["action"].clone()),
        (json!(false), json!("omitted"))
    );
    // Without a budget the context is retained as it is.
    let j = repo.forum_json(&["context", "preflight", "--context-cmd", &ctx, REQUEST]);
    assert_eq!(j["context"]["reason"], "no_budget");
    assert_eq!(j["context"]["admitted_tokens"], 10);
    // A failing command is an issue, not a crash.
    let bad = executable(&repo.path().join("bad.sh"), "#!/bin/sh\nexit 4\n");
    let j = repo.forum_json(&["context", "preflight", "--context-cmd", &bad, REQUEST]);
    assert_eq!(j["context"]["reason"], "provider_failed");
    assert_eq!(j["context"]["error"], "exit");
    assert_eq!(j["issues"].as_array().unwrap().len(), 1);
    // The capsule of an existing ledger: measured, and nothing is written.
    let model = model_script(&repo);
    repo.forum_ok(&["submit", "--cmd", &model, "--quiet", REQUEST]);
    let tip = repo.git_ok(&["rev-parse", "refs/forum/ledgers/main"]);
    let j = repo.forum_json(&[
        "context",
        "preflight",
        "--use-capsule-context",
        "--request-context-token-budget",
        "10",
        REQUEST,
    ]);
    assert_eq!(j["context"]["source"], "capsule");
    assert_eq!(j["context"]["action"], "trimmed");
    assert_eq!(
        j["issues"],
        json!(["capsule context would be trimmed before planning"])
    );
    assert_eq!(repo.git_ok(&["rev-parse", "refs/forum/ledgers/main"]), tip);
    let text = repo.forum_ok(&["context", "preflight", "--use-capsule-context", REQUEST]);
    assert!(text.starts_with("context preflight: ready\n"), "{text}");
    assert!(
        text.contains("context: capsule retained (no_budget)"),
        "{text}"
    );
    assert_eq!(repo.git_ok(&["rev-parse", "refs/forum/ledgers/main"]), tip);
}

#[test]
fn bad_quality_flags_are_one_line_usage_errors_and_write_nothing() {
    let repo = Repo::new("sha1");
    let model = model_script(&repo);
    let cases: [&[&str]; 8] = [
        &[
            "submit",
            "--cmd",
            &model,
            "--context-token-budget",
            "-1",
            REQUEST,
        ],
        &[
            "submit",
            "--cmd",
            &model,
            "--upstream-token-budget",
            "-5",
            REQUEST,
        ],
        &[
            "submit",
            "--cmd",
            &model,
            "--delivery-profile",
            "poet",
            REQUEST,
        ],
        &[
            "submit",
            "--cmd",
            &model,
            "--verify-cmd",
            "'unclosed",
            REQUEST,
        ],
        &[
            "submit",
            "--cmd",
            &model,
            "--verify-cmd",
            "x",
            "--verify-timeout",
            "0",
            REQUEST,
        ],
        &["submit", "--cmd", &model, "--context-cmd", "", REQUEST],
        &[
            "context",
            "preflight",
            "--task-context-token-budget",
            "-2",
            REQUEST,
        ],
        &[
            "context",
            "preflight",
            "--use-capsule-context",
            "--max-items",
            "-1",
            REQUEST,
        ],
    ];
    for args in cases {
        let o = repo.forum().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
    }
    let o = repo
        .forum()
        .args([
            "submit",
            "--cmd",
            &model,
            "--delivery-profile",
            "poet",
            REQUEST,
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("operator, engineer, researcher, executive"),
        "{err}"
    );
    let o = repo
        .forum()
        .args([
            "submit",
            "--cmd",
            &model,
            "--context-token-budget",
            "-1",
            REQUEST,
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim(),
        "error: --context-token-budget -1: a token budget must be 0 or more"
    );
    // Nothing was written.
    assert!(
        !repo
            .git(&["rev-parse", "--verify", "-q", "refs/forum/ledgers/main"])
            .status
            .success()
    );
}

// ---- the real local model ----

#[test]
fn the_ladder_against_the_real_local_model() {
    let Some(llm) = crate::llm::LocalLlm::start() else {
        return;
    };
    let repo = Repo::new("sha256");
    let policy = repo.path().join("policy.toml");
    std::fs::write(&policy, "max_tasks = 2\n").unwrap();
    let verify = executable(
        &repo.path().join("verify.sh"),
        "#!/bin/sh\n[ -n \"$2\" ] || { echo 'empty answer' >&2; exit 1; }\necho \"answer of $(printf '%s' \"$2\" | wc -w) words\"\n",
    );
    let url = llm.chat_url();
    let common = [
        "--chat-url",
        url.as_str(),
        "--model",
        llm.model(),
        "--policy",
        policy.to_str().unwrap(),
        "--max-output-tokens",
        "200",
    ];
    // The capsule is read once the request and its route frame are witnessed, so even on a
    // new ledger it has something in it.
    let before = 0;
    let mut second = vec![
        "submit",
        "--judge-intent",
        "--use-capsule-context",
        "--verify-cmd",
        verify.as_str(),
    ];
    second.extend_from_slice(&common);
    second.push("write a haiku about git");
    let j = repo.forum_json(&second);
    assert_eq!(j["git_forum_receipt"]["status"], "answered", "{j}");
    assert!(!j["answer"].as_str().unwrap().trim().is_empty(), "{j}");
    repo.forum_ok(&["verify", "--deep"]);
    repo.fsck();
    let rows = kinds(&repo);
    let run: Vec<&str> = rows[before..].iter().map(|r| r.0.as_str()).collect();
    assert_eq!(
        run[..4],
        ["request", "route_frame", "context", "plan"],
        "{run:?}"
    );
    assert_eq!(rows[before + 3].2, json!(before + 2));
    let ctx = payload(&repo, before + 2)["context"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        ctx.contains("latest request: write a haiku about git"),
        "{ctx}"
    );
    // The floors, then the judge only if the intent check flagged, then the verifier.
    eprintln!("the run on the local model: {run:?}");
    let at = |kind: &str| run.iter().position(|k| *k == kind);
    let intent = at("intent_check").expect("intent_check");
    let flagged = payload(&repo, before + intent)["flagged"] == true;
    let verification = at("verification").expect("verification");
    if flagged {
        let judged = at("intent_judgment").expect("a flagged answer is judged");
        assert_eq!(rows[before + judged].2, json!(before + intent));
        assert_eq!(verification, judged + 1);
    } else {
        assert_eq!(at("intent_judgment"), None);
        assert_eq!(verification, intent + 1);
    }
    let v = payload(&repo, before + verification);
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["source"], format!("command: {verify}"));
    // Every call, the judge's included, went to the one model and was counted.
    let r = &j["git_forum_receipt"];
    let calls = r["calls_per_model"].as_object().unwrap();
    assert_eq!(calls.len(), 1, "{calls:?}");
    let tasks = run.iter().filter(|k| **k == "task").count();
    let minimum = 2 + 2 * tasks + usize::from(flagged);
    assert!(
        r["model_calls"].as_u64().unwrap() as usize >= minimum,
        "{r}"
    );
}

#[test]
fn a_judges_ruling_is_read_as_forum_reads_it() {
    let ok = |t: &str| {
        run::parse_judgment(t)
            .map(|(ok, score, _)| (ok, score))
            .map_err(|e| e.to_string())
    };
    assert_eq!(
        ok(r#"{"ok": true, "score": 0.5, "reason": "x"}"#),
        Ok((true, 0.5))
    );
    assert_eq!(
        ok(r#"sure: {"ok": "No", "score": "0.25"} done"#),
        Ok((false, 0.25))
    );
    assert_eq!(ok(r#"{"ok": 0}"#), Ok((false, 0.0)));
    assert_eq!(ok(r#"{"ok": "yes"}"#), Ok((true, 0.0)));
    for bad in [
        r#"{"score": 1}"#,
        r#"{"ok": null}"#,
        r#"{"ok": true, "score": "high"}"#,
        "no JSON at all",
        "[1, 2]",
    ] {
        assert!(run::parse_judgment(bad).is_err(), "{bad}");
    }
    assert_eq!(
        run::parse_judgment(r#"{"ok": true, "reason": {"why": 1}}"#)
            .unwrap()
            .2,
        r#"{"why":1}"#
    );
}

#[test]
fn per_task_context_caps_count_code_points() {
    assert_eq!(run::cap_task_context("short"), "short");
    let exact = "日".repeat(run::MAX_TASK_CONTEXT_CHARS);
    assert_eq!(run::cap_task_context(&exact), exact);
    let over = format!("{exact}本");
    assert_eq!(
        run::cap_task_context(&over),
        format!("{exact}{}", run::TASK_CONTEXT_CUT_MARKER)
    );
}
