//! No host path in a `--work` run's record: a worker's prompt says it works in the worktree
//! made for its task (its working directory) without naming where that is, so neither the
//! editing worker's result nor any other entry keeps an absolute path of this machine, and a
//! strict replay sends the same prompt from wherever it runs. Runs under a spend ceiling
//! (whose stops depend on each prompt's length) replay with no divergence, the editing
//! worker's and a command worker's; a run recorded when prompts named the path still replays.

use serde_json::json;

use crate::common::{Repo, on_each_kind};
use crate::edit_worker::{Stub, fleet};
use crate::strict_replay::rehashed_export;
use crate::strict_replay_edit::import_as;
use crate::strict_replay_work::{no_divergence, strict};
use crate::work_run::{self, payloads};

/// Every entry and body of `repo`'s ledger as one text.
fn ledger_text(repo: &Repo) -> String {
    crate::spend::exported(repo)
        .into_iter()
        .map(|(e, b)| format!("{e}\n{b}\n"))
        .collect()
}

/// Fails naming the place when the ledger holds `path` (shown as it would be recorded).
fn holds_no(text: &str, path: &std::path::Path) {
    let p = path.display().to_string();
    assert!(!text.contains(&p), "the ledger names {p}:\n{text}");
}

#[test]
fn an_editing_worker_under_a_ceiling_records_no_host_path_and_replays_on_every_format() {
    on_each_kind(|repo| {
        crate::strict_replay_edit_spend::ceiling_run(repo);
        let (_, result) = payloads(repo, "result")
            .into_iter()
            .find(|(_, p)| p["id"] == "T1")
            .unwrap();
        assert_eq!(result["error"], "ceiling", "{result}");
        assert_eq!(result.get("worktree"), None, "{result}");
        let text = ledger_text(repo);
        assert!(!text.contains("/tmp/"), "{text}");
        holds_no(&text, repo.path());
        holds_no(&text, repo.user.path());
        let (code, r) = strict(repo, &[]);
        no_divergence(code, &r);
    });
}

#[test]
fn a_command_worker_under_a_ceiling_replays_with_no_divergence_on_every_format() {
    on_each_kind(|repo| {
        work_run::setup(repo);
        let fix = "    sed -i 's/return a - b/return a + b/' calc.py; echo 'fixed add'";
        let m = work_run::one_task_model(repo, "m", "merge", fix);
        repo.forum_ok(&[
            "submit",
            "--work",
            "--check",
            "python3 -m unittest -q",
            "--cmd",
            &m,
            "--max-tokens",
            "100000",
            "--quiet",
            "make add in calc.py add",
        ]);
        let (_, result) = payloads(repo, "result")
            .into_iter()
            .find(|(_, p)| p["id"] == "T1")
            .unwrap();
        assert_eq!(result["ok"], true, "{result}");
        assert_eq!(result["usage"]["estimated"], true, "{result}");
        // Worktrees live under git forum's cache: the record never names it.
        holds_no(&ledger_text(repo), repo.user.path());
        let (code, r) = strict(repo, &[]);
        no_divergence(code, &r);
        assert_eq!(r["rules"]["limits"], "recorded", "{r}");
    });
}

#[test]
fn a_command_worker_is_told_its_worktree_without_its_path() {
    let repo = Repo::new("sha1");
    work_run::setup(&repo);
    // The worker writes the prompt's note into the change, so the test can read it.
    let say = "    printf '%s' \"$p\" | tail -c 400 > prompt.txt; sed -i 's/return a - b/return a + b/' calc.py; echo 'fixed add'";
    let m = work_run::one_task_model(&repo, "m", "merge", say);
    repo.forum_ok(&[
        "submit",
        "--work",
        "--cmd",
        &m,
        "--quiet",
        "make add in calc.py add",
    ]);
    let told = repo.git_ok(&["show", "forum/run-0:prompt.txt"]);
    assert!(
        told.contains("You work in the git worktree made for this task (your working directory)"),
        "{told}"
    );
    assert!(
        !told.contains(&repo.user.path().display().to_string()),
        "{told}"
    );
}

#[test]
fn a_run_recorded_when_prompts_named_the_worktree_still_replays() {
    let repo = Repo::new("sha1");
    let stub = Stub::start(fleet(crate::strict_replay_edit::coder));
    crate::strict_replay_edit::record(&repo, &stub, &[]);
    let (at, _) = payloads(&repo, "result")
        .into_iter()
        .find(|(_, p)| p["id"] == "T1")
        .unwrap();
    // As an older version recorded it: the result names the path the prompt gave.
    let older = rehashed_export(&repo, |seq, b| {
        if seq == at {
            b["worktree"] = json!("/home/someone/.cache/git-forum/work/c1/main/0/T1");
        }
    });
    import_as(&repo, &older, "older");
    let (code, r) = strict(&repo, &["--ledger", "older"]);
    no_divergence(code, &r);
}
