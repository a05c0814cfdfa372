//! Strict replay of a run whose worker's call failed: the result keeps the failure's class
//! (`failure.class`, the code the engine branches on) and its raw body, the replay gives the
//! same failure back, and the engine's escalation is decided again and compared. A run
//! recorded before results kept the class is refused in one line.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use git_forum::exec::{Call, ExecError, Executor, Fleet, Reply, Scripted};
use git_forum::ledger::{MemoryStorage, Storage};
use git_forum::roster::Roster;
use git_forum::run::replay::{self, StrictReplay};
use git_forum::run::{self, Env, Silent, StepClock};
use serde_json::{Value as J, json};

use crate::common::{Repo, on_each_kind};
use crate::strict_replay::{edited, forged_export, opts};
use crate::strict_replay_edit::{import_as, refusal};
use crate::strict_replay_work::{no_divergence, strict};
use crate::work_run::payloads;

const PLAN: &str = r#"{"tasks":[
 {"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":[]},
 {"id":"T2","agent":"docs","instruction":"write the API docs","depends_on":["T1"],"done_when":[]}]}"#;

const ANSWER: &str =
    "Shipped the login API with docs. Verified by the test output; next step: deploy.";

/// An executor whose first call that `when` picks fails with what `fail` makes; every other
/// call is answered as `inner` answers it.
struct FailsOnce {
    inner: Scripted,
    failed: AtomicBool,
    fail: fn() -> ExecError,
    when: fn(&Call<'_>) -> bool,
}

impl Executor for FailsOnce {
    fn call(&self, call: &Call<'_>) -> Result<Reply, ExecError> {
        if (self.when)(call) && !self.failed.swap(true, Ordering::SeqCst) {
            return Err((self.fail)());
        }
        self.inner.call(call)
    }

    fn model(&self) -> String {
        self.inner.model()
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}

fn orchestrator() -> Arc<dyn Executor> {
    Arc::new(orchestrator_script())
}

fn orchestrator_script() -> Scripted {
    Scripted::new("orch-model", |call| {
        Ok(match call.schema.map(|s| s.name.as_str()) {
            Some("plan") => PLAN.to_string(),
            Some("verdict") => {
                json!({"decision": "pass", "score": 0.9, "reason": "meets the criteria"})
                    .to_string()
            }
            _ => ANSWER.to_string(),
        })
    })
}

/// Records a run whose cheap worker fails its first call (T1) with `fail`, so T1 climbs to
/// the frontier rung, which answers; returns the request seq.
fn record(store: &mut MemoryStorage, fail: fn() -> ExecError) -> u64 {
    let roster = Roster::default_roster();
    let answer = |call: &Call<'_>| Ok(format!("done: {}", call.prompt.lines().next().unwrap()));
    let worker: Arc<dyn Executor> = Arc::new(FailsOnce {
        inner: Scripted::new("cheap-model", answer),
        failed: AtomicBool::new(false),
        fail,
        when: |_| true,
    });
    let strong: Arc<dyn Executor> = Arc::new(Scripted::new("frontier-model", answer));
    let seats = Fleet::fixed(orchestrator(), worker, vec![strong]);
    let clock = StepClock::new(100.0, 0.5);
    let env = Env {
        roster: &roster,
        seats: &seats,
        clock: &clock,
        progress: &Silent,
    };
    let before = store.len().unwrap();
    run::submit(store, &env, &opts(), "ship a login API with docs").expect("run");
    before
}

fn body(store: &MemoryStorage, seq: u64) -> J {
    store.payload_at(seq).unwrap().unwrap().to_serde()
}

/// The seq of T1's failed result.
fn failed_result(store: &MemoryStorage) -> u64 {
    store
        .entries
        .iter()
        .find(|e| e.kind == "result" && body(store, e.seq)["ok"] == false)
        .map(|e| e.seq)
        .expect("a failed result")
}

fn replayed(store: &MemoryStorage, req: u64) -> StrictReplay {
    replay::strict(store, req, &Roster::default_roster(), &opts()).expect("replay")
}

fn http_500() -> ExecError {
    ExecError::Status {
        url: "http://127.0.0.1:9/v1/chat/completions".into(),
        status: 500,
        excerpt: "{\"error\":\"overloaded\"}".into(),
    }
}

/// What a chat executor makes of a body that is not JSON (it keeps the body).
fn malformed() -> ExecError {
    git_forum::exec::json_reply("http://127.0.0.1:9/v1/chat/completions", b"<html>not json")
        .unwrap_err()
}

fn refused() -> ExecError {
    ExecError::Refused("127.0.0.1:9 is not an allowed address".into())
}

#[test]
fn a_worker_that_failed_once_and_escalated_replays_with_no_divergence_for_each_class() {
    for (fail, class, raw) in [
        (
            http_500 as fn() -> ExecError,
            "http_status",
            Some("{\"error\":\"overloaded\"}"),
        ),
        // The reply itself, which the replay parses again.
        (malformed, "invalid_json", Some("<html>not json")),
        // Nothing reached a model: under a ceiling it is charged nothing.
        (refused, "refused", None),
    ] {
        let mut store = MemoryStorage::default();
        let req = record(&mut store, fail);
        let at = failed_result(&store);
        let b = body(&store, at);
        assert_eq!(b["error"], class, "{b}");
        assert_eq!(b["failure"]["class"], class, "{b}");
        assert_eq!(b["failure"]["body"].as_str(), raw, "{b}");
        let kinds: Vec<&str> = store.entries.iter().map(|e| e.kind.as_str()).collect();
        assert!(kinds.contains(&"tier_escalation"), "{kinds:?}");
        let r = replayed(&store, req);
        assert_eq!(r.divergence, None, "{class}: {r:?}");
        assert!(r.unanswered.is_empty(), "{r:?}");
        assert_eq!(r.recorded, r.recomputed);
        // The class edited in a copy is the divergence at the result's seq.
        let forged = edited(&store, at, |b| b["failure"]["class"] = json!("timeout"));
        let d = replayed(&forged, req).divergence.expect("a divergence");
        assert_eq!(d.seq, at, "{d:?}");
        assert!(d.recorded.contains(&format!("error:{class}")), "{d:?}");
        assert!(d.recomputed.contains("error:timeout"), "{d:?}");
    }
}

#[test]
fn a_worker_reply_that_was_not_json_is_parsed_again_from_the_bytes_the_result_keeps() {
    let mut store = MemoryStorage::default();
    let req = record(&mut store, malformed);
    let at = failed_result(&store);
    let b = body(&store, at);
    assert_eq!(b["failure"]["raw_reply"], true, "{b}");
    assert!(
        b["output"]
            .as_str()
            .unwrap()
            .ends_with("invalid JSON: expected value at line 1 column 1"),
        "{b}"
    );
    // Bytes edited to fail otherwise: the parse error recomputed from them differs.
    let forged = edited(&store, at, |b| b["failure"]["body"] = json!("[1,"));
    let d = replayed(&forged, req).divergence.expect("a divergence");
    assert_eq!(d.seq, at, "{d:?}");
    assert!(d.recomputed.contains("EOF"), "{d:?}");
    // Kept cut short, the bytes are not the reply: the recorded failure is given back as it is.
    let cut = edited(&store, at, |b| {
        b["failure"]["body"] = json!("<html>no");
        b["failure"]["body_cut"] = json!(true);
    });
    let r = replayed(&cut, req);
    assert_eq!(r.divergence, None, "{r:?}");
}

#[test]
fn a_failed_and_escalated_run_replays_from_the_command_line_on_every_format() {
    let mut store = MemoryStorage::default();
    let req = record(&mut store, http_500);
    let at = failed_result(&store);
    let forged = edited(&store, at, |b| b["failure"]["class"] = json!("connect"));
    on_each_kind(|repo| {
        assert_eq!(req, 0);
        import_as(repo, &store, "honest");
        let (code, r) = strict(repo, &["--ledger", "honest"]);
        no_divergence(code, &r);
        import_as(repo, &forged, "forged");
        let (code, r) = strict(repo, &["--ledger", "forged"]);
        assert_eq!(code, Some(1), "{r}");
        assert_eq!(r["divergence"]["seq"], json!(at), "{r}");
    });
}

/// A command model whose worker exits 1 the first time it is asked (it leaves `marker`
/// behind), then answers.
fn exits_once_model(repo: &Repo) -> String {
    let plan = PLAN.replace('\n', "");
    let marker = repo.path().join("worker-failed-once");
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{plan}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo '{ANSWER}' ;;\n  *) if [ ! -e '{m}' ]; then : > '{m}'; echo 'the worker fell over' >&2; exit 1; fi; echo done ;;\nesac\n",
        m = marker.display()
    );
    crate::procs::executable(&repo.path().join("model.sh"), &body)
}

/// The seq and body of the result that failed.
fn failed_of(repo: &Repo) -> (u64, J) {
    payloads(repo, "result")
        .into_iter()
        .find(|(_, p)| p["ok"] == false)
        .expect("a failed result")
}

#[test]
fn a_command_seat_that_exits_1_once_replays_and_its_edited_class_diverges_on_every_format() {
    on_each_kind(|repo| {
        let model = exits_once_model(repo);
        let o = repo
            .forum()
            .args([
                "submit",
                "--cmd",
                &model,
                "--quiet",
                "ship a login API with docs",
            ])
            .output()
            .unwrap();
        assert!(o.status.code().is_some(), "{o:?}");
        let (at, b) = failed_of(repo);
        assert_eq!(b["error"], "exit", "{b}");
        assert_eq!(b["failure"]["class"], "exit", "{b}");
        let raw = b["failure"]["body"].as_str().unwrap_or_default();
        assert!(raw.contains("the worker fell over"), "{b}");
        let (code, r) = strict(repo, &[]);
        no_divergence(code, &r);
        let forged = forged_export(repo, at, |b| b["failure"]["class"] = json!("timeout"));
        import_as(repo, &forged, "forged");
        let (code, r) = strict(repo, &["--ledger", "forged"]);
        assert_eq!(code, Some(1), "{r}");
        assert_eq!(r["divergence"]["seq"], json!(at), "{r}");
        // The same run as an older version recorded it (no class): refused in one line.
        let older = forged_export(repo, at, |b| {
            b.as_object_mut().unwrap().remove("failure");
        });
        import_as(repo, &older, "older");
        let err = refusal(repo, "older");
        assert!(err.contains(&format!("seq {at}")), "{err}");
        assert!(err.contains("(exit)"), "{err}");
        assert!(err.contains("older record"), "{err}");
    });
}

#[test]
fn a_validator_call_that_failed_with_a_class_is_given_back_with_that_class() {
    let roster = Roster::default_roster();
    let orchestrator: Arc<dyn Executor> = Arc::new(FailsOnce {
        inner: orchestrator_script(),
        failed: AtomicBool::new(false),
        fail: http_500,
        when: |call| call.schema.is_some_and(|s| s.name == "verdict"),
    });
    let worker: Arc<dyn Executor> = Arc::new(Scripted::new("cheap-model", |_| Ok("done".into())));
    let seats = Fleet::fixed(orchestrator, worker, vec![]);
    let clock = StepClock::new(100.0, 0.5);
    let env = Env {
        roster: &roster,
        seats: &seats,
        clock: &clock,
        progress: &Silent,
    };
    let mut store = MemoryStorage::default();
    run::submit(&mut store, &env, &opts(), "ship a login API with docs").expect("run");
    let at = store
        .entries
        .iter()
        .find(|e| e.kind == "verdict" && body(&store, e.seq)["decision"] == "undetermined")
        .map(|e| e.seq)
        .expect("an undetermined verdict");
    let reason = body(&store, at)["reason"].clone();
    assert!(
        reason
            .as_str()
            .unwrap()
            .starts_with("validator failed (http_status): "),
        "{reason}"
    );
    let r = replayed(&store, 0);
    assert_eq!(r.divergence, None, "{r:?}");
    assert!(r.unanswered.is_empty(), "{r:?}");
}

/// A chat stub whose weak model's worker call answers a body that is not JSON; the strong
/// model answers it, and every control call is answered as the editing worker's stub does.
fn not_json_stub() -> crate::edit_worker::Stub {
    use crate::edit_worker::{RAW_BODY, Stub, chat_answer, fleet};
    let control = fleet(|_, _| (200, J::Null));
    Stub::start(move |req: &J| {
        let system = req["messages"][0]["content"].as_str().unwrap_or_default();
        let worker = system.contains("Do the task and report the result plainly");
        if worker && req["model"] == "stub-weak" {
            return (
                200,
                json!({ RAW_BODY: "<html>502 upstream went away</html>" }),
            );
        }
        let asked = req["messages"].to_string();
        let (status, mut answer) = if worker {
            (200, chat_answer(json!("Fixed add in calc.py."), None))
        } else if asked.contains("Decide whether the answer drifted") {
            let ruling = json!({"ok": true, "score": 0.9, "reason": "it answers the request"});
            (200, chat_answer(json!(ruling.to_string()), None))
        } else {
            control(req)
        };
        answer["model"] = req["model"].clone();
        (status, answer)
    })
}

#[test]
fn a_chat_worker_that_answered_a_body_that_is_not_json_keeps_it_and_replays_on_every_format() {
    on_each_kind(|repo| {
        let stub = not_json_stub();
        let url = stub.url("/v1/chat/completions");
        std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
        std::fs::write(
            repo.path().join(".forum/runtime.toml"),
            format!(
                "[runtime.default]\nchat_url = \"{url}\"\nmodel = \"stub-weak\"\nis_local = true\n\n[runtime.tiers.frontier]\nchat_url = \"{url}\"\nmodel = \"stub-strong\"\nis_local = true\n"
            ),
        )
        .unwrap();
        let o = repo
            .forum()
            .args(["submit", "--json", "make the failing test in calc pass"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let (at, b) = failed_of(repo);
        assert_eq!(b["error"], "invalid_json", "{b}");
        // The ledger holds the bytes the endpoint sent.
        assert_eq!(
            b["failure"]["body"], "<html>502 upstream went away</html>",
            "{b}"
        );
        assert_eq!(b["failure"]["raw_reply"], true, "{b}");
        assert_eq!(payloads(repo, "tier_escalation").len(), 1);
        let (code, r) = strict(repo, &[]);
        no_divergence(code, &r);
        let forged = forged_export(repo, at, |b| b["failure"]["body"] = json!("{\"a\":"));
        import_as(repo, &forged, "forged");
        let (code, r) = strict(repo, &["--ledger", "forged"]);
        assert_eq!(code, Some(1), "{r}");
        assert_eq!(r["divergence"]["seq"], json!(at), "{r}");
    });
}

#[test]
fn an_intent_judge_answer_that_is_not_a_ruling_is_kept_and_read_again() {
    let roster = Roster::default_roster();
    // The answer leaves out the request's words, so the judge is asked; it does not rule.
    let orchestrator: Arc<dyn Executor> = Arc::new(Scripted::new("orch-model", |call| {
        Ok(match call.schema.map(|s| s.name.as_str()) {
            Some("plan") => PLAN.to_string(),
            Some("verdict") => r#"{"decision":"pass","score":0.9,"reason":"ok"}"#.to_string(),
            Some("intent_judgment") => "It looks fine to me.".to_string(),
            _ => "Done.".to_string(),
        })
    }));
    let worker: Arc<dyn Executor> = Arc::new(Scripted::new("cheap-model", |_| Ok("done".into())));
    let seats = Fleet::fixed(orchestrator, worker, vec![]);
    let clock = StepClock::new(100.0, 0.5);
    let env = Env {
        roster: &roster,
        seats: &seats,
        clock: &clock,
        progress: &Silent,
    };
    let mut o = opts();
    o.judge_intent = true;
    let mut store = MemoryStorage::default();
    run::submit(&mut store, &env, &o, "ship a login API with docs").expect("run");
    let at = store
        .entries
        .iter()
        .find(|e| e.kind == "intent_judgment")
        .map(|e| e.seq)
        .expect("an intent judgment");
    let b = body(&store, at);
    assert_eq!(b["reply"], "It looks fine to me.", "{b}");
    assert_eq!(b["ok"], J::Null, "{b}");
    let replayed = |s: &MemoryStorage| replay::strict(s, 0, &roster, &o).expect("replay");
    let r = replayed(&store);
    assert_eq!(r.divergence, None, "{r:?}");
    assert!(r.unanswered.is_empty(), "{r:?}");
    // The answer edited to a ruling: the replay rules where the record says it could not.
    let forged = edited(&store, at, |b| {
        b["reply"] = json!(r#"{"ok":true,"score":0.8,"reason":"it answers"}"#)
    });
    assert_eq!(replayed(&forged).divergence.map(|d| d.seq), Some(at));
    // Kept cut short: refused at its seq, in one line.
    let cut = edited(&store, at, |b| b["reply_cut"] = json!(true));
    let msg = replay::strict(&cut, 0, &roster, &o)
        .expect_err("a refusal")
        .to_string();
    assert!(
        msg.contains(&format!("seq {at}")) && msg.contains("cut short"),
        "{msg}"
    );
    assert!(!msg.contains('\n'), "{msg}");
}
