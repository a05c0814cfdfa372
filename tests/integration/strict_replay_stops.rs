//! Strict replay of the worker results that are not a reply: a task whose worktree could not
//! be opened (answered from the record, so the engine climbs the ladder again), and a worker
//! stopped by its metering forwarder's spend ceiling or interrupted (refused in one line).

use serde_json::json;

use crate::common::{Repo, on_each_kind};
use crate::strict_replay::forged_export;
use crate::strict_replay_edit::{import_as, refusal};
use crate::strict_replay_work::{no_divergence, strict};
use crate::work_run::{self, payloads};

/// T1 and T2 side by side: one fixes `add`, one writes a note; the validators pass and the
/// gate merges (in this file's runs no worker is ever asked: no worktree opens).
fn model(repo: &Repo, name: &str) -> String {
    let plan = work_run::plan(&[("T1", "fix add in calc"), ("T2", "note the fix")], false);
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{plan}' ;;\n  *\"Decide whether to ship\"*) echo '{{\"decision\":\"merge\",\"reason\":\"fixes add\"}}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'Fixed calc.' ;;\n  *\"note the fix\"*) printf 'add adds\\n' > NOTES.md; echo 'noted' ;;\n  *) sed -i 's/return a - b/return a + b/' calc.py; echo 'fixed add' ;;\nesac\n"
    );
    crate::procs::executable(&repo.path().join(format!("{name}.sh")), &body)
}

/// Records a `--work` run none of whose tasks gets a worktree: a file stands where git keeps
/// its worktrees' admin directories, so every rung of every task (the cheap worker's, then the
/// frontier worker's) fails before a worker is asked.
fn record_without_worktree(repo: &Repo) {
    work_run::setup(repo);
    std::fs::write(
        repo.path().join(".git").join("worktrees"),
        "not a directory\n",
    )
    .unwrap();
    let (weak, strong) = (model(repo, "weak"), model(repo, "strong"));
    let o = repo
        .forum()
        .args([
            "submit",
            "--quiet",
            "--work",
            "--check",
            "python3 -m unittest -q",
            "--cmd",
            &weak,
            "--frontier-cmd",
            &strong,
            "fix calc and note it",
        ])
        .output()
        .unwrap();
    // No task could change anything: the run answers, with every task failed.
    assert!(
        !payloads(repo, "result").is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn a_task_whose_worktree_could_not_be_opened_replays_and_climbs_the_ladder_again() {
    on_each_kind(|repo| {
        record_without_worktree(repo);
        let failed: Vec<_> = payloads(repo, "result")
            .into_iter()
            .filter(|(_, p)| p["id"] == "T1")
            .collect();
        assert_eq!(failed.len(), 2, "{failed:?}");
        for (_, r) in &failed {
            assert_eq!(r["error"], "work", "{r}");
            let output = r["output"].as_str().unwrap();
            assert!(
                output.starts_with("error: no worktree for this task: "),
                "{r}"
            );
        }
        // Each task climbed once, from the failed opening to the frontier worker's.
        let escalations = payloads(repo, "tier_escalation");
        assert_eq!(escalations.len(), 2, "{escalations:?}");
        let (code, r) = strict(repo, &[]);
        no_divergence(code, &r);
        // The climb edited to say the task's checks failed: the engine decides it again from
        // the failed opening, at the escalation's seq.
        let (at, _) = escalations.iter().find(|(_, p)| p["id"] == "T1").unwrap();
        let at = *at;
        let forged = forged_export(repo, at, |b| b["reason"] = json!("checks failed"));
        import_as(repo, &forged, "forged-climb");
        let (code, r) = strict(repo, &["--ledger", "forged-climb"]);
        assert_eq!(code, Some(1), "{r}");
        assert_eq!(r["divergence"]["seq"], json!(at), "{r}");
    });
}

#[test]
fn a_worker_stopped_at_a_forwarders_ceiling_or_interrupted_is_refused_in_one_line() {
    on_each_kind(|repo| {
        record_without_worktree(repo);
        let (at, _) = payloads(repo, "result")
            .into_iter()
            .find(|(_, p)| p["id"] == "T2")
            .unwrap();
        // Recorded as a failed opening; edited as the other stops are recorded.
        // As the metering forwarder's stop is recorded: the message and the counted usage.
        let ceiling = forged_export(repo, at, |b| {
            b["ok"] = json!(false);
            b["error"] = json!("ceiling");
            b["output"] = json!(
                "error: the metering forwarder stopped the agent at its tokens ceiling after 900 tokens (100 tokens past what it was allowed: at most the model turn in flight)"
            );
        });
        import_as(repo, &ceiling, "ceiling");
        let err = refusal(repo, "ceiling");
        assert!(err.contains(&format!("seq {at}")), "{err}");
        assert!(err.contains("metering forwarder"), "{err}");
        // As an interrupted call is recorded: its class kept in `failure`.
        let interrupted = forged_export(repo, at, |b| {
            b["ok"] = json!(false);
            b["error"] = json!("interrupted");
            b["output"] = json!("error: weak.sh was interrupted");
            b["failure"] = json!({"class": "interrupted"});
        });
        import_as(repo, &interrupted, "interrupted");
        let err = refusal(repo, "interrupted");
        assert!(err.contains(&format!("seq {at}")), "{err}");
        assert!(err.contains("interrupted mid-call"), "{err}");
        // As a halted dispatch records it: no failure kept, only the text.
        let halted = forged_export(repo, at, |b| {
            b["ok"] = json!(false);
            b["error"] = json!("interrupted");
            b["output"] = json!("error: interrupted while a worker had the task");
        });
        import_as(repo, &halted, "halted");
        let err = refusal(repo, "halted");
        assert!(err.contains(&format!("seq {at}")), "{err}");
        assert!(err.contains("interrupted mid-call"), "{err}");
    });
}
