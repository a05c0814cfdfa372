//! Best-of-N (`submit --work --attempts N`) through the binary, on every repository format: a
//! scripted worker that does something different in each attempt (it reads `attempt N of M`
//! in its prompt), priced so that every attempt costs something, and the pre-ship gate
//! answering `undetermined`, so the rule (the smallest passing diff, then the cheapest, then
//! the first) chooses.

use serde_json::Value as J;

use crate::common::{Repo, on_each_kind};
use crate::work_run::{branch_commits, clean, entries, one_task_model, payloads, setup};

const CHECK: &str = "python3 -m unittest -q";

/// Attempt 1 leaves `add` broken (its check fails); attempt 2 fixes it and appends 38 comment
/// lines (a 40-line diff); attempt 3 fixes it and appends two (a 4-line diff).
pub(crate) const THREE_WAYS: &str = "    case \"$p\" in
      *\"attempt 1 of 3\"*) echo '# looked at it' >> calc.py; echo 'tried' ;;
      *\"attempt 2 of 3\"*) sed -i 's/return a - b/return a + b/' calc.py; i=0; while [ $i -lt 38 ]; do echo \"# note $i\" >> calc.py; i=$((i+1)); done; echo 'fixed add at length' ;;
      *) sed -i 's/return a - b/return a + b/' calc.py; printf '# add adds\\n# fixed\\n' >> calc.py; echo 'fixed add' ;;
    esac";

/// The runtime: the scripted model as the default executor, priced.
fn priced_runtime(repo: &Repo, cmd: &str) {
    let forum = repo.path().join(".forum");
    std::fs::create_dir_all(&forum).unwrap();
    std::fs::write(
        forum.join("runtime.toml"),
        format!(
            "[runtime.default]\ncmd = \"{cmd}\"\nprice_in_per_mtok = 2.0\nprice_out_per_mtok = 8.0\n"
        ),
    )
    .unwrap();
}

fn cost(body: &J) -> f64 {
    body["usage"]["cost_usd"].as_f64().unwrap_or(0.0)
}

#[test]
fn best_of_three_merges_the_smallest_passing_diff_keeps_the_others_and_counts_every_cost() {
    on_each_kind(|repo| {
        setup(repo);
        let m = one_task_model(repo, "model", "undetermined", THREE_WAYS);
        priced_runtime(repo, &m);
        let j = repo.forum_json(&[
            "submit",
            "--work",
            "--attempts",
            "3",
            "--check",
            CHECK,
            "make the failing test in calc pass",
        ]);
        let run = payloads(repo, "request")[0].0;
        let answer = j["answer"].as_str().unwrap();
        assert!(
            answer.contains("- T1: merged (1 file, +3 -1: calc.py); checks 1/1 passed"),
            "{answer}"
        );

        // Every attempt is in the record: its change (with its number) and its check.
        let changes = payloads(repo, "change");
        let numbered: Vec<u64> = changes
            .iter()
            .map(|(_, c)| c["attempt"].as_u64().unwrap())
            .collect();
        assert_eq!(numbered, [1, 2, 3]);
        let checks: Vec<(u64, bool)> = payloads(repo, "check")
            .iter()
            .filter(|(_, c)| c["task"] == "T1")
            .map(|(_, c)| (c["attempt"].as_u64().unwrap(), c["ok"] == true))
            .collect();
        assert_eq!(checks, [(1, false), (2, true), (3, true)]);

        // The choice: every attempt side by side, the 4-line one chosen by the rule.
        let choices = payloads(repo, "attempt_choice");
        assert_eq!(choices.len(), 1);
        let (choice_seq, choice) = &choices[0];
        assert_eq!(choice["chosen"], 3);
        assert_eq!(choice["rule"], "smallest_diff");
        assert_eq!(choice["gate"]["decision"], "undetermined");
        let rows = choice["attempts"].as_array().unwrap();
        let side_by_side: Vec<(u64, u64, bool)> = rows
            .iter()
            .map(|r| {
                (
                    r["attempt"].as_u64().unwrap(),
                    r["diff_lines"].as_u64().unwrap(),
                    r["passed"] == true,
                )
            })
            .collect();
        assert_eq!(side_by_side, [(1, 1, false), (2, 40, true), (3, 4, true)]);

        // The ship entry merges attempt 3's change, under the choice.
        let ships = payloads(repo, "ship");
        assert_eq!(ships.len(), 1);
        let third = &changes[2];
        assert_eq!(ships[0].1["decision"], "merge");
        assert_eq!(ships[0].1["attempt"], 3);
        assert_eq!(ships[0].1["change"], third.0);
        let all = entries(repo);
        let ship_entry = all.iter().find(|e| e["seq"] == ships[0].0).unwrap();
        assert_eq!(ship_entry["causal_parent"], *choice_seq);

        // The run branch holds attempt 3's change; 1 and 2 stay under refs/forum/attempts.
        let commits = branch_commits(repo, run);
        assert_eq!(commits.len(), 1);
        let tree = |rev: &str| repo.git_ok(&["rev-parse", &format!("{rev}^{{tree}}")]);
        assert_eq!(tree(&commits[0]).trim(), third.1["tree"].as_str().unwrap());
        let on_branch = repo.git_ok(&["show", &format!("forum/run-{run}:calc.py")]);
        assert!(on_branch.contains("return a + b\n") && on_branch.contains("# add adds\n# fixed"));
        let refs = repo.git_ok(&[
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            "refs/forum/attempts/",
            "refs/forum/work/",
        ]);
        let expected = format!(
            "refs/forum/attempts/main/{run}/T1/1 {}\nrefs/forum/attempts/main/{run}/T1/2 {}\nrefs/forum/work/main/{run}/T1 {}\n",
            changes[0].1["commit"].as_str().unwrap(),
            changes[1].1["commit"].as_str().unwrap(),
            third.1["commit"].as_str().unwrap(),
        );
        assert_eq!(refs.trim_end(), expected.trim_end());

        // Every attempt's cost counts: each row is its result's usage, and the run's total is
        // the sum over every call, the three attempts included.
        let results: Vec<J> = payloads(repo, "result")
            .into_iter()
            .filter(|(_, r)| r["id"] == "T1")
            .map(|(_, r)| r)
            .collect();
        assert_eq!(results.len(), 3);
        for (row, result) in rows.iter().zip(&results) {
            assert!(cost(result) > 0.0, "{result}");
            assert_eq!(row["cost_usd"].as_f64().unwrap(), cost(result));
        }
        let every: f64 = all
            .iter()
            .map(|e| {
                let seq = e["seq"].as_u64().unwrap().to_string();
                cost(&repo.forum_json(&["show", &seq, "--payload"])["payload"])
            })
            .sum();
        let receipt = repo.forum_json(&["receipt", &run.to_string()]);
        let total = receipt["spend"]["total"]["cost_usd"].as_f64().unwrap();
        assert!((total - every).abs() < 1e-12, "{total} != {every}");
        // The receipt, the room and the summary show the attempts side by side.
        let shown = &receipt["work"]["tasks"][0]["attempts"];
        assert_eq!(
            (shown["chosen"].clone(), shown["rule"].clone()),
            (J::from(3), J::from("smallest_diff"))
        );
        assert_eq!(shown["attempts"].as_array().unwrap().len(), 3);
        let text = repo.forum_ok(&["receipt", &run.to_string()]);
        assert!(
            text.contains("attempts of T1: attempt 3 chosen (smallest_diff)"),
            "{text}"
        );
        let room = repo.forum_ok(&["room", "--text"]);
        assert!(
            room.contains("attempts of T1: attempt 3 chosen (smallest_diff)"),
            "{room}"
        );
        assert!(
            room.contains("yes (smallest_diff)") && room.contains("no (did not pass)"),
            "{room}"
        );
        let summary = repo.forum_json(&["summary"]);
        assert_eq!(summary["attempts"][0]["task"], "T1", "{summary}");
        // bench shows each side's attempts (here the run against itself).
        let side = format!("run:{run}");
        let bench = repo.forum_ok(&["bench", &side, &side]);
        for s in ["A", "B"] {
            assert!(
                bench.contains(&format!(
                    "{s}: attempts of T1: attempt 3 chosen (smallest_diff)"
                )),
                "{bench}"
            );
        }
        let bench = repo.forum_json(&["bench", &side, &side]);
        assert_eq!(
            bench["a"]["attempts"][0]["attempts"]["chosen"], 3,
            "{bench}"
        );
        let attempts: f64 = results.iter().map(cost).sum();
        assert!(total > attempts, "{total} <= {attempts}");
        clean(repo);
    });
}

#[test]
fn attempts_are_counted_from_one_to_eight_and_need_work() {
    let repo = Repo::new("sha1");
    for (args, needle) in [
        (
            vec!["submit", "--attempts", "2", "x"],
            "--attempts runs each task of a --work run several times: add --work",
        ),
        (
            vec!["submit", "--work", "--attempts", "9", "x"],
            "--attempts 9: give a number from 1 to 8",
        ),
        (
            vec!["submit", "--work", "--attempts", "0", "x"],
            "--attempts 0: give a number from 1 to 8",
        ),
    ] {
        let o = repo.forum().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{err}");
    }
}

/// `[work] attempts = ["default", "cheap"]`: one attempt on each slot's executor, the second
/// (a different program) making the smaller change, which the rule then picks.
#[test]
fn one_attempt_on_each_slot_named_in_the_runtime() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let long = one_task_model(
        &repo,
        "long",
        "undetermined",
        "    sed -i 's/return a - b/return a + b/' calc.py; i=0; while [ $i -lt 38 ]; do echo \"# note $i\" >> calc.py; i=$((i+1)); done; echo 'fixed add at length'",
    );
    let short = one_task_model(
        &repo,
        "short",
        "undetermined",
        "    sed -i 's/return a - b/return a + b/' calc.py; echo 'fixed add'",
    );
    let forum = repo.path().join(".forum");
    std::fs::create_dir_all(&forum).unwrap();
    std::fs::write(
        forum.join("runtime.toml"),
        format!(
            "[runtime.default]\ncmd = \"{long}\"\n\n[runtime.tiers.cheap]\ncmd = \"{short}\"\n\n[work]\nattempts = [\"default\", \"cheap\"]\n"
        ),
    )
    .unwrap();
    let j = repo.forum_json(&[
        "submit",
        "--work",
        "--check",
        CHECK,
        "make the failing test in calc pass",
    ]);
    assert!(
        j["answer"].as_str().unwrap().contains("- T1: merged"),
        "{j}"
    );
    let choices = payloads(&repo, "attempt_choice");
    assert_eq!(choices.len(), 1);
    let c = &choices[0].1;
    assert_eq!(
        (c["chosen"].clone(), c["rule"].clone()),
        (J::from(2), J::from("smallest_diff"))
    );
    let lines: Vec<u64> = c["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["diff_lines"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, [40, 2]);
    clean(&repo);
}

/// Under a token ceiling, every attempt's first call is reserved before any attempt starts:
/// a ceiling that holds one attempt's worst case (about 2,600 tokens for a command worker: the
/// instruction and its framing, 2,103 tokens at most, and its 512-token output cap) but not
/// three stops the task before its worker runs even once, and the run ends on the ceiling.
#[test]
fn a_ceiling_that_cannot_hold_every_attempt_stops_the_task_before_any_starts() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let m = one_task_model(
        &repo,
        "model",
        "undetermined",
        "    echo ran >> worked.txt; sed -i 's/return a - b/return a + b/' calc.py; echo 'fixed add'",
    );
    priced_runtime(&repo, &m);
    // Planned without a ceiling, paused before its wave; the work runs under one.
    let o = repo
        .forum()
        .args([
            "submit",
            "--work",
            "--attempts",
            "3",
            "--check",
            CHECK,
            "--gate-waves",
            "0",
            "make the failing test in calc pass",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(8), "{o:?}");
    repo.forum_ok(&["gate", "approve"]);
    let o = repo
        .forum()
        .args(["resume", "--json", "--max-tokens", "4000"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{stderr}");
    let j: J = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["exit"]["name"], "stopped_on_ceiling", "{j}");
    assert!(
        !repo.path().join("worked.txt").exists(),
        "an attempt ran before all three were reserved"
    );
    let t1 = payloads(&repo, "result")
        .into_iter()
        .map(|(_, b)| b)
        .find(|b| b["id"] == "T1")
        .unwrap();
    assert_eq!(t1["ok"], false, "{t1}");
    assert_eq!(t1["error"], "budget", "{t1}");
    assert_eq!(t1["attempts"], 3, "{t1}");
    let output = t1["output"].as_str().unwrap();
    assert!(
        output.contains("3 attempts do not fit the spend ceiling, reserved before any starts"),
        "{output}"
    );
    assert!(payloads(&repo, "change").is_empty());
    clean(&repo);
}
