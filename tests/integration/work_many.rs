//! Concurrent `--work` runs in one repository: two `submit --work` started
//! at once, each with tasks whose worktrees are made and removed while the other's are, both
//! finish answered, neither leaves an interrupted run or a worktree, on every repository kind.

use crate::common::{Guarded, on_each_kind};
use crate::work_run::{clean, model, payloads, plan, setup};

#[test]
fn two_work_runs_at_once_in_one_repository_both_succeed() {
    on_each_kind(|repo| {
        setup(repo);
        // Three tasks a run, each a short pause and an edit of its own file, so the runs'
        // worktrees come and go at the same time.
        let tasks = [
            ("T1", "add one file"),
            ("T2", "add another"),
            ("T3", "and a third"),
        ];
        // A file name of its own per task (in a sandbox every worker's `$$` is the same).
        let work = "    sleep 0.2; f=$(mktemp out-XXXXXXXX); echo \"$f\" > \"$f\"; echo done";
        for trial in 0..2 {
            let a = model(
                repo,
                &format!("a{trial}"),
                &plan(&tasks, false),
                "merge",
                work,
            );
            let b = model(
                repo,
                &format!("b{trial}"),
                &plan(&tasks, false),
                "merge",
                work,
            );
            let start = |m: &str| {
                Guarded(
                    repo.forum()
                        .args(["submit", "--json", "--work", "--cmd", m, "add files"])
                        .stdout(std::process::Stdio::null())
                        .stderr(std::process::Stdio::piped())
                        .spawn()
                        .unwrap(),
                )
            };
            let (one, two) = (start(&a), start(&b));
            for mut run in [one, two] {
                let mut err = String::new();
                std::io::Read::read_to_string(&mut run.0.stderr.take().unwrap(), &mut err).unwrap();
                let status = run.0.wait().unwrap();
                assert!(status.success(), "trial {trial}: {err}");
            }
            let runs = repo.forum_json(&["runs"]);
            let states: Vec<String> = runs["runs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["state"].as_str().unwrap_or("").to_string())
                .collect();
            assert_eq!(states.len(), 2 * (trial + 1), "{runs}");
            assert!(states.iter().all(|s| s == "answered"), "{states:?}");
            clean(repo);
        }
        // Every task of every run committed its change.
        let changes = payloads(repo, "change");
        assert_eq!(changes.len(), 12, "{changes:?}");
        assert!(changes.iter().all(|(_, c)| c["commit"].is_string()));
    });
}
