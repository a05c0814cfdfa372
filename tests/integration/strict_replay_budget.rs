//! Strict replay of a run submitted with a context budget: the replay puts the context the
//! record holds through the budget the request recorded again, and compares each
//! `context_budget` entry it writes with the recorded one as a decision.

use serde_json::{Value as J, json};

use crate::common::{Repo, on_each_kind};
use crate::strict_replay::{export, forged_export, rehashed_export};
use crate::strict_replay_work::{no_divergence, strict};
use crate::work_run::payloads;

/// T2 builds on T1's output, so they run in two waves and meet the budget in one order.
const PLAN: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":[]},{"id":"T2","agent":"docs","instruction":"write the API docs","depends_on":["T1"],"done_when":[]}]}"#;

/// T1 and T2 in one wave: they take their context side by side.
const ONE_WAVE: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":[]},{"id":"T2","agent":"docs","instruction":"write the API docs","depends_on":[],"done_when":[]}]}"#;

/// A command model: the plan, passing verdicts, an answer, and workers whose output is long
/// enough for the upstream budget to cut.
fn model(repo: &Repo) -> String {
    model_of(repo, PLAN)
}

fn model_of(repo: &Repo, plan: &str) -> String {
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{plan}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'Designed the API and wrote its docs.' ;;\n  *) echo 'done: the endpoint takes a user name and a password and answers with a token' ;;\nesac\n"
    );
    crate::procs::executable(&repo.path().join("model.sh"), &body)
}

/// A context command: request context that starts with one byte and goes on in two-byte
/// characters (so a cut at an even byte falls inside one), and each task's own context.
fn context_cmd(repo: &Repo) -> String {
    let body = "#!/bin/sh\ncase \"$1\" in\n  request) printf 'a'; i=0; while [ $i -lt 20 ]; do printf '\\303\\251'; i=$((i+1)); done ;;\n  task) echo \"context for $2: the login service lives in auth/ and its tests in tests/auth\" ;;\nesac\n";
    crate::procs::executable(&repo.path().join("ctx.sh"), body)
}

/// Records a run whose budget cuts the request context inside a character, cuts T1's
/// context, T1's output on its way to T2, and leaves none of T2's context (the run-wide total
/// is spent by then).
fn record(repo: &Repo) {
    let (model, ctx) = (model(repo), context_cmd(repo));
    repo.forum_ok(&[
        "submit",
        "--quiet",
        "--cmd",
        &model,
        "--context-cmd",
        &ctx,
        "--context-token-budget",
        "7",
        "--request-context-token-budget",
        "3",
        "--task-context-token-budget",
        "2",
        "--upstream-token-budget",
        "2",
        "ship a login API with docs",
    ]);
}

/// The seq of the `context_budget` entry labelled `label`.
fn pressure(repo: &Repo, label: &str) -> (u64, J) {
    payloads(repo, "context_budget")
        .into_iter()
        .find(|(_, p)| p["label"] == label)
        .unwrap_or_else(|| panic!("no context_budget of {label}"))
}

/// A re-hashed copy of the ledger imported as ledger `name` (it verifies).
fn import(repo: &Repo, forged: &git_forum::ledger::MemoryStorage, name: &str) {
    let dir = repo.path().join(name);
    export(forged, &dir);
    repo.forum_ok(&["--ledger", name, "import", dir.to_str().unwrap()]);
    repo.forum_ok(&["--ledger", name, "verify"]);
}

#[test]
fn a_run_whose_context_budget_cut_its_context_replays_with_no_divergence() {
    on_each_kind(|repo| {
        record(repo);
        // The request context (41 bytes) is cut at 12 bytes, inside a character: 11 kept.
        let (_, p) = pressure(repo, "request");
        assert_eq!(
            (&p["action"], &p["admitted_bytes"]),
            (&json!("trimmed"), &json!(11))
        );
        assert_eq!(pressure(repo, "T1").1["action"], "trimmed");
        assert_eq!(pressure(repo, "T1->T2").1["action"], "trimmed");
        assert_eq!(pressure(repo, "T2").1["action"], "omitted");
        // The context entries keep what the budget read of what it cut, and no more.
        let contexts = payloads(repo, "context");
        let request = &contexts
            .iter()
            .find(|(_, c)| c.get("task").is_none())
            .unwrap()
            .1;
        assert_eq!(request["seen_bytes"], 41, "{request}");
        assert_eq!(request["next"], "é", "{request}");
        let t2 = &contexts.iter().find(|(_, c)| c["task"] == "T2").unwrap().1;
        assert_eq!(t2, &json!({"task": "T2", "context": "", "seen_bytes": 76}));
        let (code, r) = strict(repo, &[]);
        no_divergence(code, &r);
    });
}

#[test]
fn an_edited_context_budget_entry_is_a_divergence_at_its_seq() {
    on_each_kind(|repo| {
        record(repo);
        // The task's slice made to look kept whole.
        let (at, _) = pressure(repo, "T1");
        let forged = forged_export(repo, at, |b| {
            b["action"] = json!("retained");
            b["reason"] = json!("under_budget");
        });
        import(repo, &forged, "forged-task");
        let (code, r) = strict(repo, &["--ledger", "forged-task"]);
        assert_eq!(code, Some(1), "{r}");
        assert_eq!(r["divergence"]["seq"], json!(at), "{r}");
        let d = &r["divergence"];
        assert!(
            d["recorded"].as_str().unwrap().contains("action:retained"),
            "{r}"
        );
        assert!(
            d["recomputed"].as_str().unwrap().contains("action:trimmed"),
            "{r}"
        );
        // The request's slice said to have admitted a byte more than the cut allows.
        let (at, _) = pressure(repo, "request");
        let forged = forged_export(repo, at, |b| b["admitted_bytes"] = json!(12));
        import(repo, &forged, "forged-request");
        let (code, r) = strict(repo, &["--ledger", "forged-request"]);
        assert_eq!(code, Some(1), "{r}");
        assert_eq!(r["divergence"]["seq"], json!(at), "{r}");
    });
}

#[test]
fn the_tasks_of_a_wave_cut_side_by_side_replay_with_no_divergence() {
    on_each_kind(|repo| {
        let (model, ctx) = (model_of(repo, ONE_WAVE), context_cmd(repo));
        repo.forum_ok(&[
            "submit",
            "--quiet",
            "--cmd",
            &model,
            "--context-cmd",
            &ctx,
            "--task-context-token-budget",
            "2",
            "ship a login API with docs",
        ]);
        assert_eq!(pressure(repo, "T1").1["action"], "trimmed");
        assert_eq!(pressure(repo, "T2").1["action"], "trimmed");
        // Each task's slices are compared in its own line, whichever took its context first.
        let (code, r) = strict(repo, &[]);
        no_divergence(code, &r);
    });
}

/// `git forum --ledger LEDGER replay 0 --strict`: its exit code and standard error.
fn refused(repo: &Repo, ledger: &str) -> (Option<i32>, String) {
    let o = repo
        .forum()
        .args(["--ledger", ledger, "replay", "0", "--strict"])
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_run_recorded_before_context_entries_kept_what_the_budget_saw_is_refused_in_one_line() {
    on_each_kind(|repo| {
        record(repo);
        // As an older git forum recorded it: no length kept, no entry for a slice cut to nothing.
        let contexts = payloads(repo, "context");
        let forged = rehashed_export(repo, |seq, b| {
            if contexts.iter().any(|(s, _)| *s == seq)
                && let Some(o) = b.as_object_mut()
            {
                o.remove("seen_bytes");
                o.remove("next");
            }
        });
        import(repo, &forged, "older");
        let (at, _) = pressure(repo, "request");
        let (code, err) = refused(repo, "older");
        assert_eq!(code, Some(1), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(&format!("seq {at} of run 0")), "{err}");
        assert!(err.contains("an older record"), "{err}");
        // A request that does not record the budget's settings is refused too.
        let forged = forged_export(repo, 0, |b| {
            b["rules"]["limits"]
                .as_object_mut()
                .unwrap()
                .remove("context_budget");
        });
        import(repo, &forged, "no-settings");
        let (code, err) = refused(repo, "no-settings");
        assert_eq!(code, Some(1), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains("does not record the context budget's settings"),
            "{err}"
        );
    });
}

/// Four tasks in one wave.
const FOUR_WIDE: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":[]},{"id":"T2","agent":"docs","instruction":"write the API docs","depends_on":[],"done_when":[]},{"id":"T3","agent":"backend","instruction":"add the rate limit","depends_on":[],"done_when":[]},{"id":"T4","agent":"docs","instruction":"write the changelog","depends_on":[],"done_when":[]}]}"#;

/// A run of four tasks side by side under a run-wide total that two of their contexts fill:
/// T1's context command holds until T4's worker was called (a file the model makes), so T1
/// reaches the total last in the record, though a replay starts it first.
fn record_four_wide(repo: &Repo) {
    let flag = repo.path().join("t4-worked");
    let flag = flag.to_str().unwrap();
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{FOUR_WIDE}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'Designed the API, its docs, its limit and its changelog.' ;;\n  *\"write the changelog\"*) touch '{flag}'; echo 'done: the changelog lists the login API' ;;\n  *) echo 'done: the endpoint takes a user name and a password' ;;\nesac\n"
    );
    let model = crate::procs::executable(&repo.path().join("model.sh"), &body);
    let ctx = format!(
        "#!/bin/sh\n[ \"$1\" = task ] || exit 0\nif [ \"$2\" = T1 ]; then i=0; while [ ! -e '{flag}' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; fi\necho \"context for $2: the login service lives in auth/ and its tests live in tests/auth/\"\n"
    );
    let ctx = crate::procs::executable(&repo.path().join("ctx.sh"), &ctx);
    repo.forum_ok(&[
        "submit",
        "--quiet",
        "--cmd",
        &model,
        "--context-cmd",
        &ctx,
        "--context-token-budget",
        "50",
        "ship a login API with docs",
    ]);
}

#[test]
fn the_tasks_of_a_wave_share_a_run_wide_total_in_the_records_order_each_replay() {
    on_each_kind(|repo| {
        record_four_wide(repo);
        // Each context is 22 tokens: the first two reached the total whole, the third was cut,
        // and T1, which reached it last, was left none.
        let order: Vec<_> = payloads(repo, "context_budget")
            .into_iter()
            .filter(|(_, p)| p["source"] == "task")
            .collect();
        let actions: Vec<_> = order.iter().map(|(_, p)| p["action"].clone()).collect();
        assert_eq!(
            actions,
            [
                json!("retained"),
                json!("retained"),
                json!("trimmed"),
                json!("omitted")
            ]
        );
        assert_eq!(order[3].1["label"], "T1");
        for _ in 0..3 {
            let (code, r) = strict(repo, &[]);
            no_divergence(code, &r);
        }
        // The cut slice said to have been kept whole is still the divergence at its seq.
        let at = order[2].0;
        let forged = forged_export(repo, at, |b| {
            b["action"] = json!("retained");
            b["reason"] = json!("under_budget");
        });
        import(repo, &forged, "forged-order");
        let (code, r) = strict(repo, &["--ledger", "forged-order"]);
        assert_eq!(code, Some(1), "{r}");
        assert_eq!(r["divergence"]["seq"], json!(at), "{r}");
    });
}
