//! Strict replay of what the record now answers beyond one reply per call: the built-in
//! editing worker's tool conversations (each model turn and each tool's outcome from the
//! record, every decision around them made again), a rejected revision (its text is kept),
//! and the refusal of a run an older git forum recorded, which names that version.

use std::sync::Arc;

use serde_json::{Value as J, json};

use git_forum::exec::{Call, Executor, Fleet, Scripted};
use git_forum::ledger::{MemoryStorage, Storage};
use git_forum::roster::Roster;
use git_forum::run::replay;
use git_forum::run::{self, Env, Options, Silent, StepClock};

use crate::common::{Repo, on_each_kind};
use crate::edit_worker::{FIXED, Stub, call, chat_answer, fleet, submit, tool_turn};
use crate::strict_replay::{edited, export, rehashed_export, strict_cli};
use crate::strict_replay_work::strict;
use crate::work_run::{self, payloads};

const CHECK: &str = "python3 -m unittest -q";

/// A scripted coder: one turn with two calls (the failing test, and a file outside the
/// worktree, which the engine refuses), then the fix, the check, and its report.
pub(crate) fn coder(turn: usize, _: &J) -> (u16, J) {
    let a = match turn {
        0 => chat_answer(
            J::Null,
            Some(json!([
                call("c1", "read_file", json!({"path": "test_calc.py"})),
                call("c2", "read_file", json!({"path": "../outside.txt"})),
            ])),
        ),
        1 => tool_turn(
            "c3",
            "write_file",
            json!({"path": "calc.py", "content": FIXED}),
        ),
        2 => tool_turn("c4", "run_command", json!({"command": CHECK})),
        _ => chat_answer(json!("Fixed add in calc.py; the tests pass."), None),
    };
    (200, a)
}

/// Records the editing worker's run 0 in `repo` against `stub`.
pub(crate) fn record(repo: &Repo, stub: &Stub, extra: &[&str]) {
    work_run::setup(repo);
    let out = submit(repo, stub, extra);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `store` imported into `repo` as ledger `name`, which verifies.
pub(crate) fn import_as(repo: &Repo, store: &MemoryStorage, name: &str) {
    let dir = repo.path().join(name);
    export(store, &dir);
    repo.forum_ok(&["--ledger", name, "import", dir.to_str().unwrap()]);
    repo.forum_ok(&["--ledger", name, "verify"]);
}

/// The one-line refusal of `git forum --ledger LEDGER replay 0 --strict`.
pub(crate) fn refusal(repo: &Repo, ledger: &str) -> String {
    let o = repo
        .forum()
        .args(["--ledger", ledger, "replay", "0", "--strict"])
        .output()
        .unwrap();
    assert!(
        !o.status.success(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let err = String::from_utf8_lossy(&o.stderr).trim().to_string();
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

#[test]
fn an_editing_worker_run_replays_with_no_divergence_on_every_format() {
    on_each_kind(|repo| {
        let stub = Stub::start(fleet(coder));
        record(repo, &stub, &[]);
        let calls = payloads(repo, "tool_call");
        let turns: Vec<&J> = calls.iter().map(|(_, p)| &p["turn"]).collect();
        assert_eq!(
            turns,
            [&json!(1), &json!(1), &json!(2), &json!(3)],
            "{calls:?}"
        );
        let results = payloads(repo, "tool_result");
        assert_eq!(results[1].1["refused"], true, "{results:?}");
        let result = payloads(repo, "result")
            .into_iter()
            .find(|(_, p)| p["id"] == "T1")
            .unwrap()
            .1;
        assert_eq!(result["turns"], 4, "{result}");
        let asked = stub.requests();
        let (code, r) = strict_cli(repo, 0);
        crate::strict_replay_work::no_divergence(code, &r);
        assert_eq!(r["answer_sha256"], r["recomputed_answer_sha256"], "{r}");
        // Every turn came from the record: the model was not asked again.
        assert_eq!(stub.requests(), asked);
        work_run::no_worktrees(repo);
    });
}

#[test]
fn an_edited_tool_call_decision_is_a_divergence_at_its_seq() {
    on_each_kind(|repo| {
        let stub = Stub::start(fleet(coder));
        record(repo, &stub, &[]);
        let calls = payloads(repo, "tool_call");
        let results = payloads(repo, "tool_result");
        // The engine refused the path outside the worktree; the forged record says the tool
        // read it.
        let refused = results[1].0;
        let forged = rehashed_export(repo, |seq, b| {
            if seq == refused {
                b["ok"] = json!(true);
                b["refused"] = json!(false);
                b["output"] = json!("secret");
            }
        });
        import_as(repo, &forged, "forged-result");
        let (code, r) = strict(repo, &["--ledger", "forged-result"]);
        assert_eq!(code, Some(1), "{r}");
        assert_eq!(r["divergence"]["seq"], json!(refused), "{r}");
        assert!(
            r["divergence"]["recomputed"]
                .as_str()
                .unwrap()
                .contains("refused:true"),
            "{r}"
        );
        // A tool call renumbered: the engine numbers its calls itself.
        let third = calls[2].0;
        let forged = rehashed_export(repo, |seq, b| {
            if seq == third {
                b["n"] = json!(7);
            }
        });
        import_as(repo, &forged, "forged-call");
        let (code, r) = strict(repo, &["--ledger", "forged-call"]);
        assert_eq!(code, Some(1), "{r}");
        assert_eq!(r["divergence"]["seq"], json!(third), "{r}");
        assert!(
            r["divergence"]["recorded"]
                .as_str()
                .unwrap()
                .contains("n:7"),
            "{r}"
        );
        assert!(
            r["divergence"]["recomputed"]
                .as_str()
                .unwrap()
                .contains("n:3"),
            "{r}"
        );
    });
}

/// A model that lists files every turn.
fn lister(_: usize, _: &J) -> (u16, J) {
    (200, tool_turn("l", "list_files", json!({})))
}

/// A model that never calls a tool.
fn talker(_: usize, _: &J) -> (u16, J) {
    (200, chat_answer(json!("I would change calc.py."), None))
}

type Worker = fn(usize, &J) -> (u16, J);

#[test]
fn conversations_ended_by_the_tool_call_cap_or_by_no_tool_call_replay_too() {
    let cases: [(Worker, &[&str], &str); 2] = [
        (lister, &["--max-tool-calls", "3"], "max_tool_calls"),
        (talker, &[], "no_tool_call"),
    ];
    for (worker, extra, code) in cases {
        let repo = Repo::new("sha1");
        let stub = Stub::start(fleet(worker));
        work_run::setup(&repo);
        // The task fails, and the run with it: the record is what is replayed.
        let out = submit(&repo, &stub, extra);
        assert!(!out.status.success(), "{code}");
        let result = payloads(&repo, "result")
            .into_iter()
            .find(|(_, p)| p["id"] == "T1")
            .unwrap()
            .1;
        assert_eq!(result["error"], code, "{result}");
        let (exit, r) = strict_cli(&repo, 0);
        assert_eq!(exit, Some(0), "{code}: {r}");
        assert_eq!(r["divergence"], J::Null, "{code}: {r}");
        assert_eq!(r["unanswered"], json!([]), "{code}: {r}");
        assert_eq!(r["recorded"], r["recomputed"], "{code}: {r}");
    }
}

#[test]
fn an_older_run_is_refused_naming_the_version_that_recorded_it() {
    let repo = Repo::new("sha1");
    let stub = Stub::start(fleet(coder));
    record(&repo, &stub, &[]);
    let request = payloads(&repo, "request")[0].1.clone();
    assert_eq!(request["git_forum"], env!("CARGO_PKG_VERSION"), "{request}");
    // Shaped as an older git forum wrote it: no turn on its tool calls, no count of turns on
    // its result.
    let older = rehashed_export(&repo, |seq, b| {
        let o = b.as_object_mut().unwrap();
        if seq == 0 {
            o.insert("git_forum".into(), json!("0.0.7"));
        }
        o.remove("turn");
        o.remove("turns");
    });
    import_as(&repo, &older, "older");
    let err = refusal(&repo, "older");
    assert!(err.contains("recorded by git forum 0.0.7"), "{err}");
    let first_call = payloads(&repo, "tool_call")[0].0;
    assert!(
        err.contains(&format!("seq {first_call}")) && err.contains("turn"),
        "{err}"
    );
    // A run without rules and without an entry that proves today's files the same is
    // refused by its rules, and names the version too.
    let repo = Repo::new("sha1");
    let model = crate::work_run::one_task_model(&repo, "m", "merge", "echo done");
    repo.forum_ok(&["submit", "--cmd", &model, "--quiet", "say hello"]);
    let older = rehashed_export(&repo, |seq, b| {
        if seq == 0 {
            let o = b.as_object_mut().unwrap();
            o.remove("rules");
            o.insert("git_forum".into(), json!("0.0.7"));
        }
    });
    import_as(&repo, &older, "older");
    let err = refusal(&repo, "older");
    assert!(err.contains("before runs recorded their rules"), "{err}");
    assert!(err.contains("recorded by git forum 0.0.7"), "{err}");
}

const REQUEST: &str = "ship a login API with docs";
const PLAN: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":[]}]}"#;
/// An answer the delivery floor flags (one long sentence).
const LONG: &str = "We ship the login API with docs today and the team also wrote a long explanation of how the endpoint handles sessions, tokens, rate limits, retries, errors and audit logging so that everyone on call can follow along easily.";

/// A run whose reviser answers longer than the answer, so its revision is rejected.
fn rejected_revision_run() -> MemoryStorage {
    let mut store = MemoryStorage::default();
    let mut opts = Options::default();
    opts.revise = true;
    let orch: Arc<dyn Executor> = Arc::new(Scripted::new("orch", |call: &Call<'_>| {
        Ok(match call.schema.map(|s| s.name.as_str()) {
            Some("plan") => PLAN.to_string(),
            Some("verdict") => r#"{"decision":"pass","score":0.9,"reason":"ok"}"#.into(),
            _ if call.prompt.starts_with("Tighten this answer") => format!("  {LONG} {LONG}\n"),
            _ => LONG.to_string(),
        })
    }));
    let worker: Arc<dyn Executor> = Arc::new(Scripted::new("work", |_| Ok("done".into())));
    let roster = Roster::default_roster();
    let seats = Fleet::fixed(orch, worker, vec![]);
    let clock = StepClock::new(100.0, 0.5);
    let env = Env {
        roster: &roster,
        seats: &seats,
        clock: &clock,
        progress: &Silent,
    };
    run::submit(&mut store, &env, &opts, REQUEST).expect("run");
    store
}

#[test]
fn a_rejected_revision_keeps_its_text_and_replays_and_an_older_one_is_refused_at_its_seq() {
    let store = rejected_revision_run();
    let at = store
        .entries
        .iter()
        .find(|e| e.kind == "revision")
        .map(|e| e.seq)
        .expect("a revision");
    let body = store.payload_at(at).unwrap().unwrap().to_serde();
    assert_eq!(body["accepted"], json!(false), "{body}");
    // The reviser's reply, trimmed as the engine read it.
    assert_eq!(body["text"], json!(format!("{LONG} {LONG}")), "{body}");
    let roster = Roster::default_roster();
    let r = replay::strict(&store, 0, &roster, &Options::default()).expect("replay");
    assert_eq!(r.divergence, None, "{r:?}");
    assert!(r.unanswered.is_empty(), "{r:?}");
    assert_eq!(r.recorded, r.recomputed);
    // A reviser's text edited to one the rules accept: the replay accepts it where the
    // record says it was rejected.
    let forged = edited(&store, at, |b| {
        b["text"] = json!("We ship the login API with docs.")
    });
    let r = replay::strict(&forged, 0, &roster, &Options::default()).expect("replay");
    assert_eq!(r.divergence.map(|d| d.seq), Some(at));
    // Recorded before the text was kept: refused at its seq.
    let older = edited(&store, at, |b| {
        b.as_object_mut().unwrap().remove("text");
    });
    let msg = replay::strict(&older, 0, &roster, &Options::default())
        .unwrap_err()
        .to_string();
    assert!(msg.contains(&format!("seq {at}")), "{msg}");
    assert!(msg.contains("not accepted"), "{msg}");
    assert!(!msg.contains('\n'), "{msg}");
    // Kept cut short: refused too.
    let cut = edited(&store, at, |b| b["text_truncated"] = json!(true));
    let msg = replay::strict(&cut, 0, &roster, &Options::default())
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains(&format!("seq {at}")) && msg.contains("cut short"),
        "{msg}"
    );
}
