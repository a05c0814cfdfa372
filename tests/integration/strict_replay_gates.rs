//! Strict replay of gated runs and of `--attempts` runs, through the binary on every
//! repository format. A person's decision on a gate is an input, taken from the record, and
//! the engine decides again everything after it (which waves run, the stop of a rejected run);
//! the attempts' changes and checks and the gate's reply over them are answered from the
//! record, and the engine chooses the attempt again. An edited decision is a divergence at its
//! seq, with exit 1; the replay moves no ref.

use git_forum::ledger::{MemoryStorage, NewEntry, Storage};
use serde_json::{Value as J, json};

use crate::common::{Repo, on_each_kind};
use crate::strict_replay::{export, rehashed_export};
use crate::strict_replay_work::strict;
use crate::work_run::{self, payloads};

/// Three tasks in two waves: T1, then T2 and T3 side by side.
const PLAN: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":["endpoint documented"]},{"id":"T2","agent":"docs","instruction":"write the API docs","depends_on":["T1"],"done_when":[]},{"id":"T3","agent":"review","instruction":"review the API","depends_on":[{"id":"T1","type":"order"}],"done_when":[]}]}"#;

const REQUEST: &str = "ship a login API with docs";

/// A command model: plans PLAN, passes every verdict, answers with a fixed text, and does a
/// task as "done: " and its prompt's first line.
fn model(repo: &Repo) -> String {
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{PLAN}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'Shipped the login API with its docs.' ;;\n  *) echo \"done: $(printf '%s' \"$p\" | head -n 1)\" ;;\nesac\n"
    );
    crate::procs::executable(&repo.path().join("model.sh"), &body)
}

/// Submits REQUEST gated before wave 1; it pauses there (exit 8).
fn submit_gated(repo: &Repo, model: &str) {
    let o = repo
        .forum()
        .args([
            "submit",
            "--cmd",
            model,
            "--gate-wave",
            "1",
            "--quiet",
            REQUEST,
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(8),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Every ref with its object: a replay must leave them as they are.
fn refs(repo: &Repo) -> String {
    repo.git_ok(&["for-each-ref", "--format=%(refname) %(objectname)"])
}

/// A replay of run 0 that agrees with the record entry for entry, and moves no ref.
fn replays_clean(repo: &Repo) {
    let before = refs(repo);
    let (code, r) = strict(repo, &[]);
    crate::strict_replay_work::no_divergence(code, &r);
    assert_eq!(r["answer_sha256"], r["recomputed_answer_sha256"], "{r}");
    assert_eq!(refs(repo), before);
}

/// Imports `store` as ledger `forged` and checks that it verifies.
fn import_forged(repo: &Repo, store: &MemoryStorage, name: &str) {
    import_as(repo, store, name, "forged");
}

/// Imports `store` (exported to directory `name`) as ledger `ledger`, and checks that it
/// verifies.
fn import_as(repo: &Repo, store: &MemoryStorage, name: &str, ledger: &str) {
    let dir = repo.path().join(name);
    export(store, &dir);
    repo.forum_ok(&["--ledger", ledger, "import", dir.to_str().unwrap()]);
    repo.forum_ok(&["--ledger", ledger, "verify"]);
}

/// The ledger of `repo` with entry `seq`'s kind replaced by `kind`, re-hashed so it verifies.
fn rekinded_export(repo: &Repo, seq: u64, kind: &str) -> MemoryStorage {
    let mut store = MemoryStorage::default();
    for (e, b) in crate::spend::exported(repo) {
        let at = e["seq"].as_u64().unwrap();
        store
            .append(NewEntry {
                actor: e["actor"].as_str().unwrap().to_string(),
                kind: if at == seq {
                    kind.to_string()
                } else {
                    e["kind"].as_str().unwrap().to_string()
                },
                causal_parent: e["causal_parent"].as_i64(),
                payload: git_forum::ledger::canonical::Value::from_serde(&b),
                ts: e["ts"].as_f64().unwrap(),
            })
            .unwrap();
    }
    store
}

/// The seq of the first entry of `kind`.
fn first(repo: &Repo, kind: &str) -> u64 {
    work_run::entries(repo)
        .iter()
        .find(|e| e["kind"] == kind)
        .and_then(|e| e["seq"].as_u64())
        .unwrap_or_else(|| panic!("no {kind} entry"))
}

#[test]
fn a_gate_pending_then_approved_and_resumed_replays_and_a_forged_rejection_diverges() {
    on_each_kind(|repo| {
        let m = model(repo);
        submit_gated(repo, &m);
        // Paused at the gate: the replay raises it again and pauses there too.
        replays_clean(repo);
        repo.forum_ok(&["gate", "approve", "--approver", "ana"]);
        // Decided, not resumed yet: the decision is the world's, copied in.
        replays_clean(repo);
        repo.forum_ok(&["resume", "--cmd", &m, "--quiet"]);
        assert_eq!(repo.forum_json(&["runs"])["runs"][0]["state"], "answered");
        // Resumed across the gate: the wave after it runs again in the replay.
        replays_clean(repo);
        // The person's approval made to say rejected, the chain re-hashed: the wave the record
        // ran after it is what the replay does not run.
        let approved = first(repo, "gate_approved");
        let resumed = first(repo, "resume");
        let wave = work_run::entries(repo)
            .iter()
            .filter(|e| e["kind"] == "task" && e["seq"].as_u64().unwrap() > resumed)
            .filter_map(|e| e["seq"].as_u64())
            .min()
            .expect("a task of the gated wave");
        import_forged(
            repo,
            &rekinded_export(repo, approved, "gate_rejected"),
            "rejected",
        );
        let (code, r) = strict(repo, &["--ledger", "forged"]);
        assert_eq!(code, Some(1), "{r}");
        let d = &r["divergence"];
        assert_eq!(d["seq"], json!(wave), "{r}");
        assert!(
            d["recorded"].as_str().unwrap().starts_with("task by"),
            "{r}"
        );
        assert_eq!(
            d["recomputed"], "nothing: the replay wrote no such entry",
            "{r}"
        );
    });
}

#[test]
fn a_rejected_gate_replays_its_stop_and_an_edited_stop_is_a_divergence_at_its_seq() {
    on_each_kind(|repo| {
        let m = model(repo);
        submit_gated(repo, &m);
        repo.forum_ok(&["gate", "reject", "--approver", "ana", "--reason", "not now"]);
        let o = repo.forum().args(["resume", "--cmd", &m]).output().unwrap();
        assert_eq!(o.status.code(), Some(9));
        replays_clean(repo);
        // The run's stop made to say it stopped before another wave.
        let stopped = first(repo, "gate_stopped");
        let forged = rehashed_export(repo, |at, b| {
            if at == stopped {
                b["wave"] = json!(2);
            }
        });
        import_forged(repo, &forged, "stopped");
        let (code, r) = strict(repo, &["--ledger", "forged"]);
        assert_eq!(code, Some(1), "{r}");
        let d = &r["divergence"];
        assert_eq!(d["seq"], json!(stopped), "{r}");
        assert!(d["recorded"].as_str().unwrap().contains("wave:2"), "{r}");
        assert!(d["recomputed"].as_str().unwrap().contains("wave:1"), "{r}");
    });
}

/// Submits REQUEST gated before wave 1 with a deadline of `deadline` seconds and what the gate
/// becomes then (the clock pinned at 1000); it pauses there (exit 8).
fn submit_with_deadline(repo: &Repo, model: &str, deadline: &str, on_expiry: &str) {
    let o = repo
        .forum()
        .args(["submit", "--cmd", model, "--gate-wave", "1"])
        .args(["--gate-deadline", deadline, "--gate-on-expiry", on_expiry])
        .args(["--quiet", REQUEST])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(8),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Resumes run 0 with the clock pinned at `at`; its exit code and its stderr.
fn resume_at(repo: &Repo, model: &str, at: &str) -> (Option<i32>, String) {
    let o = repo
        .forum()
        .env("GIT_FORUM_TIMESTAMP", at)
        .args(["resume", "--cmd", model, "--quiet"])
        .output()
        .unwrap();
    (o.status.code(), String::from_utf8_lossy(&o.stderr).into())
}

#[test]
fn an_expired_gate_replays_from_its_recorded_readings_and_an_edited_expiry_diverges_at_its_seq() {
    on_each_kind(|repo| {
        let m = model(repo);
        // Raised at 1000 with 5 seconds: it expires at 1005, and then approves.
        submit_with_deadline(repo, &m, "5", "approve");
        let pending = payloads(repo, "gate_pending").remove(0).1;
        assert_eq!(
            (pending["read_at"].clone(), pending["deadline"].clone()),
            (json!(1000.0), json!(1005.0))
        );
        replays_clean(repo);
        // Before the deadline the resume is refused and writes nothing.
        let (code, err) = resume_at(repo, &m, "1004");
        assert!(
            code != Some(0) && err.contains("waits for a decision"),
            "{err}"
        );
        assert_eq!(resume_at(repo, &m, "1007").0, Some(0));
        let expired = first(repo, "gate_expired");
        let body = payloads(repo, "gate_expired").remove(0).1;
        assert_eq!(
            (body["decision"].clone(), body["read_at"].clone()),
            (json!("approved"), json!(1007.0))
        );
        assert_eq!(
            payloads(repo, "resume").remove(0).1["read_at"],
            json!(1007.0)
        );
        // The replay's clock is the record's: a replay run at another time decides the same.
        replays_clean(repo);
        // The expiry made to say the gate was rejected, the chain re-hashed: the replay
        // decides again from the readings that it expired into an approval.
        let forged = rehashed_export(repo, |at, b| {
            if at == expired {
                b["decision"] = json!("rejected");
            }
        });
        import_forged(repo, &forged, "expiry");
        let (code, r) = strict(repo, &["--ledger", "forged"]);
        assert_eq!(code, Some(1), "{r}");
        let d = &r["divergence"];
        assert_eq!(d["seq"], json!(expired), "{r}");
        assert!(
            d["recorded"]
                .as_str()
                .unwrap()
                .contains("decision:rejected"),
            "{r}"
        );
        assert!(
            d["recomputed"]
                .as_str()
                .unwrap()
                .contains("decision:approved"),
            "{r}"
        );
    });
}

#[test]
fn a_gate_rejected_by_its_deadline_and_one_approved_before_it_both_replay() {
    on_each_kind(|repo| {
        let m = model(repo);
        submit_with_deadline(repo, &m, "5", "reject");
        assert_eq!(resume_at(repo, &m, "1005").0, Some(9));
        assert_eq!(payloads(repo, "gate_stopped").len(), 1);
        replays_clean(repo);
        // A second run in the same ledger, approved by a person before its deadline: its
        // resume reads a clock before the deadline, which the record keeps.
        let again = Repo::new(repo.kind());
        let m = model(&again);
        submit_with_deadline(&again, &m, "3600", "reject");
        again.forum_ok(&["gate", "approve", "--approver", "ana"]);
        assert_eq!(resume_at(&again, &m, "1010").0, Some(0));
        assert_eq!(again.forum_json(&["runs"])["runs"][0]["state"], "answered");
        assert!(payloads(&again, "gate_expired").is_empty());
        replays_clean(&again);
    });
}

#[test]
fn a_deadline_gate_recorded_without_its_clock_readings_is_refused_in_one_line() {
    on_each_kind(|repo| {
        let m = model(repo);
        submit_with_deadline(repo, &m, "5", "reject");
        assert_eq!(resume_at(repo, &m, "1005").0, Some(9));
        // As a run recorded before gates kept their readings: no `read_at` anywhere.
        let pending = first(repo, "gate_pending");
        let forged = rehashed_export(repo, |_, b| {
            if let Some(o) = b.as_object_mut() {
                o.remove("read_at");
            }
        });
        import_forged(repo, &forged, "unread");
        let o = repo
            .forum()
            .args(["--ledger", "forged", "replay", "0", "--strict"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("gate_pending entry at seq {pending}"))
                && err.contains("read_at"),
            "{err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    });
}

const CHECK: &str = "python3 -m unittest -q";

/// A `--attempts 3` run of one task in three ways, its pre-ship gate answering `gate`.
fn attempts_run(repo: &Repo, gate: &str) {
    work_run::setup(repo);
    let m = work_run::one_task_model(repo, "model", gate, crate::work_attempts::THREE_WAYS);
    repo.forum_ok(&[
        "submit",
        "--work",
        "--attempts",
        "3",
        "--check",
        CHECK,
        "--cmd",
        &m,
        "--quiet",
        "make the failing test in calc pass",
    ]);
}

#[test]
fn an_attempts_run_replays_with_no_divergence_and_an_edited_attempt_choice_diverges_at_its_seq() {
    on_each_kind(|repo| {
        attempts_run(repo, "undetermined");
        let (choice, body) = payloads(repo, "attempt_choice").remove(0);
        assert_eq!(
            (body["chosen"].clone(), body["rule"].clone()),
            (json!(3), json!("smallest_diff"))
        );
        replays_clean(repo);
        work_run::no_worktrees(repo);
        // The choice made to say attempt 2 (a 40-line diff) was the smallest.
        let forged = rehashed_export(repo, |at, b| {
            if at == choice {
                b["chosen"] = json!(2);
            }
        });
        import_forged(repo, &forged, "chosen");
        let (code, r) = strict(repo, &["--ledger", "forged"]);
        assert_eq!(code, Some(1), "{r}");
        let d = &r["divergence"];
        assert_eq!(d["seq"], json!(choice), "{r}");
        // Both sides are the choice (shown cut short: the attempts' rows come first, and
        // `chosen` after them).
        for side in ["recorded", "recomputed"] {
            let shown = d[side].as_str().unwrap();
            assert!(shown.starts_with("attempt_choice by orchestrator"), "{r}");
        }
    });
}

#[test]
fn a_gated_work_run_approved_and_resumed_replays_with_no_divergence() {
    on_each_kind(|repo| {
        work_run::setup(repo);
        let work = "    case \"$p\" in\n      *\"fix mul\"*) sed -i '$ s/return a + b/return a * b/' calc.py; echo mul ;;\n      *) sed -i 's/return a - b/return a + b/' calc.py; echo add ;;\n    esac";
        let plan = work_run::plan(&[("T1", "fix add"), ("T2", "fix mul")], true);
        let m = work_run::model(repo, "model", &plan, "merge", work);
        let o = repo
            .forum()
            .args(["submit", "--work", "--check", CHECK, "--cmd", &m])
            .args(["--gate-wave", "1", "--quiet", "fix calc"])
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(8),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        // The approver is shown what wave 0 changed: the replay must show the same.
        let pending = payloads(repo, "gate_pending").remove(0).1;
        assert!(pending["changes"].to_string().contains("T1"), "{pending}");
        replays_clean(repo);
        repo.forum_ok(&["gate", "approve", "--approver", "ana"]);
        repo.forum_ok(&["resume", "--cmd", &m, "--quiet"]);
        assert_eq!(payloads(repo, "ship").len(), 2);
        replays_clean(repo);
        work_run::no_worktrees(repo);
    });
}

#[test]
fn an_attempt_choice_is_made_again_from_the_gates_raw_reply_so_an_edited_choice_diverges() {
    on_each_kind(|repo| {
        // The gate picks attempt 2 (the 40-line diff) over the smaller attempt 3.
        attempts_run(repo, "merge\",\"attempt\":2,\"note\":\"");
        let (choice, body) = payloads(repo, "attempt_choice").remove(0);
        assert_eq!(
            (body["chosen"].clone(), body["rule"].clone()),
            (json!(2), json!("gate"))
        );
        // The gate's raw reply is kept, and the request says so.
        let reply = body["gate"]["reply"].as_str().unwrap();
        assert!(reply.contains("\"attempt\":2"), "{body}");
        let witnesses = &payloads(repo, "request")[0].1["work"]["witnesses"];
        assert!(
            witnesses
                .as_array()
                .unwrap()
                .contains(&json!("attempt_reply")),
            "{witnesses}"
        );
        replays_clean(repo);
        // The choice made to name attempt 3, and its ship with it, every parsed field edited
        // to agree: the raw reply still names 2, and the replay chooses 2 again.
        let (ship, shipped) = payloads(repo, "ship").remove(0);
        let third = payloads(repo, "change")
            .into_iter()
            .find(|(_, c)| c["attempt"] == 3)
            .map(|(s, _)| s)
            .unwrap();
        assert_eq!(shipped["attempt"], json!(2));
        let forged = rehashed_export(repo, |at, b| {
            if at == choice {
                b["chosen"] = json!(3);
            } else if at == ship {
                b["attempt"] = json!(3);
                b["change"] = json!(third);
            }
        });
        import_forged(repo, &forged, "chosen");
        let (code, r) = strict(repo, &["--ledger", "forged"]);
        assert_eq!(code, Some(1), "{r}");
        assert_eq!(r["divergence"]["seq"], json!(choice), "{r}");
        // The same edit with the reply cut short is refused, naming the choice.
        let cut = rehashed_export(repo, |at, b| {
            if at == choice {
                b["gate"]["reply_cut"] = json!(true);
            }
        });
        import_as(repo, &cut, "cut", "cut");
        let o = repo
            .forum()
            .args(["--ledger", "cut", "replay", "0", "--strict"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("attempt choice at seq {choice}")) && err.contains("cut short"),
            "{err}"
        );
        // As a run recorded before the reply was kept: no reply, no `attempt_reply` witness.
        // It replays as it was recorded, with no reply written.
        let older = rehashed_export(repo, |at, b| {
            if at == choice {
                b["gate"].as_object_mut().unwrap().remove("reply");
            } else if let Some(w) = b.pointer_mut("/work/witnesses").and_then(J::as_array_mut) {
                w.retain(|x| x != "attempt_reply");
            }
        });
        import_as(repo, &older, "older", "older");
        let (code, r) = strict(repo, &["--ledger", "older"]);
        assert_eq!(code, Some(0), "{r}");
        assert_eq!(r["divergence"], J::Null, "{r}");
    });
}
