//! Strict replay: a recorded run's control loop run again through the engine with every reply
//! and clock reading answered from the record, its decisions compared with the recorded ones.

use std::sync::Arc;

use git_forum::exec::{Call, Executor, Fleet, Scripted};
use git_forum::ledger::{MemoryStorage, NewEntry, Storage, verify_chain};
use git_forum::roster::Roster;
use git_forum::run::replay::{self, StrictReplay};
use git_forum::run::{self, Env, Options, Silent, Status, StepClock};
use serde_json::{Value as J, json};

use crate::common::{Repo, on_each_kind};

/// Three tasks in two waves: T2 takes T1's output, T3 only waits for T1.
const PLAN_3: &str = r#"{"tasks":[
 {"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":["endpoint documented"]},
 {"id":"T2","agent":"docs","instruction":"write the API docs","depends_on":["T1"],"done_when":[]},
 {"id":"T3","agent":"review","instruction":"review the API","depends_on":[{"id":"T1","type":"order"}],"done_when":[]}]}"#;

const ANSWER: &str =
    "Shipped the login API with docs. Verified by the test output; next step: deploy.";

const REQUEST: &str = "ship a login API with docs";

fn first_line(call: &Call<'_>) -> String {
    call.prompt.lines().next().unwrap_or("").to_string()
}

/// The orchestrator of a run with a blocked task (T2) and an escalated one (T3, which the
/// stronger rung's answer passes).
fn orchestrator() -> Arc<dyn Executor> {
    Arc::new(Scripted::new("orch-model", |call| {
        let task = call
            .prompt
            .lines()
            .find_map(|l| l.strip_prefix("Task "))
            .and_then(|l| l.split(':').next())
            .unwrap_or("")
            .to_string();
        Ok(match call.schema.map(|s| s.name.as_str()) {
            Some("plan") => PLAN_3.to_string(),
            Some("verdict") if task == "T2" => {
                json!({"decision": "block", "score": 0.1, "reason": "leaks a secret"}).to_string()
            }
            Some("verdict") if task == "T3" && !call.prompt.contains("thorough") => {
                json!({"decision": "escalate", "score": 0.3, "reason": "too shallow"}).to_string()
            }
            Some("verdict") => {
                json!({"decision": "pass", "score": 0.9, "reason": "meets the criteria"})
                    .to_string()
            }
            _ => ANSWER.to_string(),
        })
    }))
}

/// The options of a run the command line makes in a repository with no policy: a wave's
/// tasks run in parallel, and the request records the default roster and policy.
pub(crate) fn opts() -> Options {
    // The rules the command line records with every run, so the command line's replay of an
    // imported copy runs it under them.
    let mut o = Options::default();
    o.rules_record = Some(replay::rules::record(&o, &Roster::default_roster()));
    o
}

/// Records the run in `store` and returns its request seq.
fn record(store: &mut MemoryStorage) -> u64 {
    let roster = Roster::default_roster();
    let worker: Arc<dyn Executor> = Arc::new(Scripted::new("cheap-model", |call| {
        Ok(format!("done: {}", first_line(call)))
    }));
    let strong: Arc<dyn Executor> = Arc::new(Scripted::new("frontier-model", |call| {
        Ok(format!("thorough: {}", first_line(call)))
    }));
    let seats = Fleet::fixed(orchestrator(), worker, vec![strong]);
    let clock = StepClock::new(100.0, 0.5);
    let env = Env {
        roster: &roster,
        seats: &seats,
        clock: &clock,
        progress: &Silent,
    };
    let before = store.len().unwrap();
    let out = run::submit(store, &env, &opts(), REQUEST).expect("run");
    assert_eq!(out.status, Status::Answered);
    before
}

fn body(store: &MemoryStorage, seq: u64) -> J {
    store.payload_at(seq).unwrap().unwrap().to_serde()
}

fn replayed(store: &MemoryStorage, request_seq: u64) -> StrictReplay {
    replay::strict(store, request_seq, &Roster::default_roster(), &opts()).expect("replay")
}

/// A copy of `store` whose entry `seq` has `edit` applied to its body, re-hashed from there
/// on so the chain verifies.
pub(crate) fn edited(store: &MemoryStorage, seq: u64, edit: impl Fn(&mut J)) -> MemoryStorage {
    let mut copy = MemoryStorage::default();
    for e in &store.entries {
        let mut b = body(store, e.seq);
        if e.seq == seq {
            edit(&mut b);
        }
        copy.append(NewEntry {
            actor: e.actor.clone(),
            kind: e.kind.clone(),
            causal_parent: e.causal_parent,
            payload: git_forum::ledger::canonical::Value::from_serde(&b),
            ts: e.ts,
        })
        .unwrap();
    }
    assert_eq!(verify_chain(&copy.entries).first_bad, None);
    copy
}

fn seq_of(store: &MemoryStorage, kind: &str, id: &str) -> u64 {
    store
        .entries
        .iter()
        .find(|e| e.kind == kind && body(store, e.seq)["id"] == id)
        .map(|e| e.seq)
        .unwrap_or_else(|| panic!("no {kind} of {id}"))
}

#[test]
fn a_multi_wave_run_with_escalation_and_a_block_replays_with_no_divergence() {
    let mut store = MemoryStorage::default();
    // Something before the run, so the replay starts from a copy of it.
    store
        .append(NewEntry {
            actor: "someone".into(),
            kind: "note".into(),
            causal_parent: None,
            payload: git_forum::ledger::canonical::Value::from_serde(&json!({"text": "hi"})),
            ts: 1.0,
        })
        .unwrap();
    let req = record(&mut store);
    let kinds: Vec<&str> = store.entries.iter().map(|e| e.kind.as_str()).collect();
    assert!(kinds.contains(&"tier_escalation"), "{kinds:?}");
    assert_eq!(
        body(&store, seq_of(&store, "verdict", "T2"))["decision"],
        "block"
    );
    let r = replayed(&store, req);
    assert_eq!(r.divergence, None, "{r:?}");
    assert!(r.unanswered.is_empty(), "{r:?}");
    assert_eq!(r.recorded, r.recomputed);
    assert_eq!(r.recorded as u64, store.len().unwrap() - req);
    assert!(r.answer_sha256.is_some());
    assert_eq!(r.answer_sha256, r.recomputed_answer_sha256);
}

#[test]
fn an_edited_verdict_is_a_divergence_at_its_seq() {
    let mut store = MemoryStorage::default();
    let req = record(&mut store);
    // The recorded ruling says block; the entry is made to say the task passed.
    let at = seq_of(&store, "verdict", "T2");
    let forged = edited(&store, at, |b| b["ok"] = json!(true));
    let r = replayed(&forged, req);
    let d = r.divergence.expect("a divergence");
    assert_eq!(d.seq, at, "{d:?}");
    assert!(d.recorded.contains("ok:true"), "{d:?}");
    assert!(d.recomputed.contains("ok:false"), "{d:?}");
}

#[test]
fn an_edited_escalation_is_a_divergence_at_its_seq() {
    let mut store = MemoryStorage::default();
    let req = record(&mut store);
    let at = seq_of(&store, "tier_escalation", "T3");
    let forged = edited(&store, at, |b| {
        b["reason"] = json!("the validator liked it")
    });
    let d = replayed(&forged, req).divergence.expect("a divergence");
    assert_eq!(d.seq, at, "{d:?}");
    assert!(d.recorded.contains("the validator liked it"), "{d:?}");
    assert!(d.recomputed.contains("validation failed"), "{d:?}");
}

#[test]
fn a_run_whose_reply_body_was_removed_is_refused_naming_the_seq() {
    let mut store = MemoryStorage::default();
    let req = record(&mut store);
    let at = seq_of(&store, "result", "T1");
    let hash = store.entries[at as usize].payload_hash.clone();
    store.payloads.remove(&hash);
    let err = replay::strict(&store, req, &Roster::default_roster(), &opts()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains(&format!("seq {at}")), "{msg}");
    assert!(!msg.contains('\n'), "{msg}");
}

/// Writes `store` as a Forum-format directory (`entries.jsonl`, `payloads.jsonl`) that
/// `git forum import` reads.
pub(crate) fn export(store: &MemoryStorage, dir: &std::path::Path) {
    std::fs::create_dir_all(dir).unwrap();
    let mut entries = String::new();
    let mut payloads = String::new();
    for e in &store.entries {
        let line = json!({
            "seq": e.seq, "ts": e.ts, "actor": e.actor, "kind": e.kind,
            "causal_parent": e.causal_parent, "payload_hash": e.payload_hash,
            "prev_hash": e.prev_hash, "entry_hash": e.entry_hash,
        });
        entries.push_str(&format!("{line}\n"));
        let b = json!({"hash": e.payload_hash, "body": body(store, e.seq)});
        payloads.push_str(&format!("{b}\n"));
    }
    std::fs::write(dir.join("entries.jsonl"), entries).unwrap();
    std::fs::write(dir.join("payloads.jsonl"), payloads).unwrap();
}

/// `git forum replay REQ --strict --json` in `repo`: its exit code and report.
pub(crate) fn strict_cli(repo: &Repo, req: u64) -> (Option<i32>, J) {
    let o = repo
        .forum()
        .args(["replay", &req.to_string(), "--strict", "--json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let report = serde_json::from_str(&text)
        .unwrap_or_else(|_| panic!("{text}\n{}", String::from_utf8_lossy(&o.stderr)));
    (o.status.code(), report)
}

#[test]
fn the_command_line_replays_a_run_inside_a_network_namespace_and_names_a_forged_verdict() {
    let mut store = MemoryStorage::default();
    let req = record(&mut store);
    let at = seq_of(&store, "verdict", "T2");
    let forged = edited(&store, at, |b| b["ok"] = json!(true));
    on_each_kind(|repo| {
        let dir = repo.path().join("honest");
        export(&store, &dir);
        repo.forum_ok(&["import", dir.to_str().unwrap()]);
        let (code, r) = strict_cli(repo, req);
        assert_eq!(code, Some(0), "{r}");
        assert_eq!(r["divergence"], J::Null, "{r}");
        // It ran with no network: unshared by bubblewrap or unshare, or had none at all.
        let net = r["network"].as_str().unwrap();
        assert!(
            ["bwrap", "unshare -rn", "unshare -n", "none"].contains(&net),
            "{r}"
        );
        assert_eq!(r["recorded"], r["recomputed"], "{r}");
        let text = repo.forum_ok(&["replay", &req.to_string(), "--strict"]);
        assert!(text.contains("replays with no divergence"), "{text}");
    });
    on_each_kind(|repo| {
        let dir = repo.path().join("forged");
        export(&forged, &dir);
        repo.forum_ok(&["import", dir.to_str().unwrap()]);
        repo.forum_ok(&["verify"]);
        let (code, r) = strict_cli(repo, req);
        assert_eq!(code, Some(1), "{r}");
        assert_eq!(r["divergence"]["seq"], json!(at), "{r}");
        let o = repo
            .forum()
            .args(["replay", &req.to_string(), "--strict"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            format!("run {req} diverges at seq {at}"),
            "{text}"
        );
        assert!(lines[1].starts_with("recorded:   "), "{text}");
        assert!(lines[2].starts_with("recomputed: "), "{text}");
    });
}

#[test]
fn a_seq_that_is_not_a_run_is_refused_in_one_line() {
    on_each_kind(|repo| {
        repo.append("me", "note", "{}");
        let o = repo
            .forum()
            .args(["replay", "0", "--strict"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("seq 0 is not a run's request"), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    });
}

/// A command model whose workers fetch `url` and put what it gave into their answer.
fn network_model(repo: &Repo, url: &str) -> String {
    let plan = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":[]},{"id":"T2","agent":"docs","instruction":"write the API docs","depends_on":["T1"],"done_when":[]}]}"#;
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{plan}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo '{ANSWER}' ;;\n  *) echo \"done: $(curl -s --max-time 5 {url})\" ;;\nesac\n"
    );
    crate::procs::executable(&repo.path().join("model.sh"), &body)
}

#[test]
fn a_run_whose_workers_used_the_network_replays_without_it() {
    let server = crate::edit_worker::Stub::start(|_| (200, json!("from-the-net")));
    let url = server.url("/");
    on_each_kind(|repo| {
        let model = network_model(repo, &url);
        let before = server.requests();
        repo.forum_ok(&["submit", "--cmd", &model, "--quiet", REQUEST]);
        let live = server.requests();
        assert!(live >= before + 2, "the workers did not reach the server");
        let answers = repo.forum_json(&["log", "--run", "0"]);
        assert!(answers.to_string().contains("from-the-net"), "{answers}");
        let (code, r) = strict_cli(repo, 0);
        assert_eq!(code, Some(0), "{r}");
        assert_eq!(r["divergence"], J::Null, "{r}");
        assert_eq!(r["recorded_by"], r["replayed_by"], "{r}");
        // The replay answered the workers from the record: nothing dialled the server.
        assert_eq!(server.requests(), live);
    });
}

/// The check of [`fixed_add_run`].
const FIXED_ADD_CHECK: &str = "python3 -m unittest -q";

/// A one-task `--work` run on `work_run::setup`'s repository whose worker fixes `add` and
/// whose check (the unit tests) passes.
pub(crate) fn fixed_add_run(repo: &Repo) {
    let fix = "    sed -i 's/return a - b/return a + b/' calc.py; echo 'fixed add'";
    let m = crate::work_run::one_task_model(repo, "m", "merge", fix);
    let work = [
        "submit",
        "--work",
        "--check",
        FIXED_ADD_CHECK,
        "--cmd",
        &m,
        "--quiet",
    ];
    repo.forum_ok(&[&work[..], &["make add in calc.py add"]].concat());
}

/// The ledger of `repo` (exported as Forum's directory) with `edit` applied to the body of
/// entry `seq`, re-hashed from there on so it verifies.
pub(crate) fn forged_export(repo: &Repo, seq: u64, edit: impl Fn(&mut J)) -> MemoryStorage {
    rehashed_export(repo, |at, b| {
        if at == seq {
            edit(b);
        }
    })
}

/// The ledger of `repo` (exported as Forum's directory) with `edit` given each entry's seq
/// and body, re-hashed so it verifies.
pub(crate) fn rehashed_export(repo: &Repo, edit: impl Fn(u64, &mut J)) -> MemoryStorage {
    rehashed(crate::spend::exported(repo), edit)
}

/// The entries `exported` (rows of `entries.jsonl` with their bodies) with `edit` given each
/// entry's seq and body, re-hashed so they verify.
pub(crate) fn rehashed(exported: Vec<(J, J)>, edit: impl Fn(u64, &mut J)) -> MemoryStorage {
    let mut store = MemoryStorage::default();
    for (e, mut b) in exported {
        edit(e["seq"].as_u64().unwrap(), &mut b);
        store
            .append(NewEntry {
                actor: e["actor"].as_str().unwrap().to_string(),
                kind: e["kind"].as_str().unwrap().to_string(),
                causal_parent: e["causal_parent"].as_i64(),
                payload: git_forum::ledger::canonical::Value::from_serde(&b),
                ts: e["ts"].as_f64().unwrap(),
            })
            .unwrap();
    }
    store
}

#[test]
fn reproduce_passes_on_an_honest_run_and_names_a_check_whose_recorded_exit_differs() {
    on_each_kind(|repo| {
        crate::work_run::setup(repo);
        fixed_add_run(repo);
        let branches = repo.git_ok(&["for-each-ref", "--format=%(refname)"]);
        let text = repo.forum_ok(&["reproduce", "0"]);
        assert!(text.starts_with("run 0 reproduces: 2 check(s)"), "{text}");
        let r = repo.forum_json(&["reproduce", "0"]);
        assert_eq!(r["mismatches"], json!([]), "{r}");
        assert_eq!(r["rebuilt_tree"], r["branch_tree"], "{r}");
        // The scratch ref is gone and no branch of the user's moved.
        assert_eq!(
            repo.git_ok(&["for-each-ref", "--format=%(refname)"]),
            branches
        );
        // The record made to say the task's check failed: named on one line, exit 1.
        let run = repo.forum_json(&["log", "--run", "0"]);
        let at = run["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["kind"] == "check" && e["payload"]["task"] == "T1")
            .and_then(|e| e["seq"].as_u64())
            .unwrap_or_else(|| panic!("no check of T1: {run}"));
        let forged = forged_export(repo, at, |b| b["exit"] = json!(1));
        let dir = repo.path().join("forged");
        export(&forged, &dir);
        repo.forum_ok(&["--ledger", "forged", "import", dir.to_str().unwrap()]);
        let o = repo
            .forum()
            .args(["--ledger", "forged", "reproduce", "0"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1));
        let out = String::from_utf8_lossy(&o.stdout);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 1, "{out}");
        let want = format!("check at seq {at} (T1: {FIXED_ADD_CHECK})");
        assert!(lines[0].starts_with(&want), "{out}");
        assert!(
            lines[0].ends_with("exits 0 now; the record says 1"),
            "{out}"
        );
        // A seq that is not a run's request is refused.
        let err = repo.forum().args(["reproduce", "1"]).output().unwrap();
        assert_eq!(err.status.code(), Some(1));
    });
}

#[test]
fn both_read_a_fetched_copy_of_a_pushed_ledger() {
    for kind in crate::common::FORMATS {
        let a = Repo::new(kind);
        crate::work_run::setup(&a);
        fixed_add_run(&a);
        // A second run that does not work in the repository, for the strict replay.
        let plain = network_model(&a, "http://127.0.0.1:9/");
        a.forum_ok(&["submit", "--cmd", &plain, "--quiet", REQUEST]);
        let log = a.forum_json(&["log"]);
        let req = log
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["kind"] == "request")
            .and_then(|e| e["seq"].as_u64())
            .unwrap();
        let (_bare, url) = crate::common::bare_origin(&a, kind);
        a.forum_ok(&["push"]);
        a.git_ok(&["push", "-q", "origin", "forum/run-0"]);
        let b = Repo::new(kind);
        b.git_ok(&["remote", "add", "origin", &url]);
        b.forum_ok(&["fetch"]);
        b.git_ok(&["fetch", "-q", "origin"]);
        let o = b
            .forum()
            .args(["--ledger", "origin:main", "replay", &req.to_string()])
            .args(["--strict", "--json"])
            .output()
            .unwrap();
        let r: J = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&o.stderr)));
        assert_eq!(o.status.code(), Some(0), "{kind}: {r}");
        assert_eq!(r["divergence"], J::Null, "{kind}: {r}");
        let text = b.forum_ok(&["--ledger", "origin:main", "reproduce", "0"]);
        assert!(
            text.starts_with("run 0 reproduces: 2 check(s)"),
            "{kind}: {text}"
        );
    }
}
