//! Reading runs back, and what a run takes in, through the binary with command models: the
//! room lists each task once after a resume and holds one run (`--since` and after a resume of
//! an older run); `runs`, the room and the receipt name a run branch only when there is one,
//! and count only merged changes as merged; `resume` with nothing to continue says so in one
//! line, whatever executors are configured; a pre-ship gate's garbage answer is named as the
//! gate's; the repository context leaves out the seats' own programs and `.forum/`; and the
//! planner reserves its prompt's estimate and its seat's `max_tokens`, no more.

use serde_json::Value as J;

use crate::common::{Repo, on_each_kind};

const PLAN_3: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":[]},{"id":"T2","agent":"docs","instruction":"write the API docs","depends_on":["T1"],"done_when":[]},{"id":"T3","agent":"review","instruction":"review the API","depends_on":[{"id":"T1","type":"order"}],"done_when":[]}]}"#;

const REQUEST: &str = "ship a login API with docs";

/// A model as a shell script: plans PLAN_3, passes every verdict, answers, and does a task as
/// "done: task".
fn model(repo: &Repo) -> String {
    let path = repo.path().join("model.sh");
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{PLAN_3}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'Shipped it.' ;;\n  *) echo 'done: task' ;;\nesac\n"
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

/// Submits REQUEST with a model-call budget that runs out after the wave of T2 and T3 was
/// dispatched (exit 3, resumable); returns the run's request seq.
fn stopped_on_budget(repo: &Repo, model: &str) -> u64 {
    let o = repo
        .forum()
        .args([
            "submit",
            "--cmd",
            model,
            "--max-model-calls",
            "6",
            "--quiet",
            REQUEST,
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let runs = repo.forum_json(&["runs"]);
    let last = runs["runs"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["state"], "stopped_on_budget", "{runs}");
    last["request_seq"].as_u64().unwrap()
}

/// The ids of the room's tasks, in its order, and its request's seq.
fn room(repo: &Repo, args: &[&str]) -> (Vec<String>, J) {
    let mut a = vec!["room"];
    a.extend_from_slice(args);
    let r = repo.forum_json(&a);
    let ids = r["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect();
    (ids, r["request"]["seq"].clone())
}

fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

fn one_line_failure(o: &std::process::Output) -> String {
    assert!(
        !o.status.success(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    err
}

#[test]
fn the_room_after_a_resume_lists_each_task_once_and_holds_one_run() {
    on_each_kind(|repo| {
        let model = model(repo);
        let first = stopped_on_budget(repo, &model);
        let second = stopped_on_budget(repo, &model);
        // Both runs dispatched T2 and T3 again on resume; the first is resumed after the second
        // started, so its new entries come after the second run's.
        repo.forum_ok(&["resume", &first.to_string(), "--cmd", &model, "--quiet"]);
        let log = repo.forum_json(&["log", "--run", &first.to_string()]);
        let dispatched = log["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "task")
            .count();
        assert!(dispatched > 3, "a task was dispatched again: {log}");
        // The default room is the run just resumed, each task once, no task of the other run.
        let (ids, seq) = room(repo, &[]);
        assert_eq!(seq, first, "the resumed run's room");
        assert_eq!(sorted(ids), ["T1", "T2", "T3"], "each task once");
        // `--since` one run's request holds that run only, whichever came after it.
        for (run, other) in [(first, second), (second, first)] {
            let (ids, seq) = room(repo, &["--since", &run.to_string()]);
            assert_eq!(seq, run);
            assert_eq!(sorted(ids), ["T1", "T2", "T3"], "run {run}");
            let text = repo.forum_ok(&["room", "--since", &run.to_string()]);
            assert!(
                !text.contains(&format!("resume {other}")),
                "run {run}'s room names run {other}: {text}"
            );
            assert_eq!(
                text.lines()
                    .filter(|l| l.trim_start().starts_with("T2 "))
                    .count(),
                1,
                "{text}"
            );
        }
    });
}

#[test]
fn resume_with_nothing_to_continue_says_so_in_one_line_without_executors() {
    on_each_kind(|repo| {
        // No executor anywhere: before, this said "no default executor".
        let o = repo.forum().arg("resume").output().unwrap();
        let err = one_line_failure(&o);
        assert!(err.contains("this ledger has no run yet"), "{err}");
        assert!(!err.contains("executor"), "{err}");
        let model = model(repo);
        repo.forum_ok(&["submit", "--cmd", &model, "--quiet", REQUEST]);
        let before = repo.snapshot();
        for (args, needle) in [
            (
                &["resume"][..],
                "no unfinished run to resume: every run in this ledger has finished, the latest (run 0) is already answered",
            ),
            (
                &["resume", "0"][..],
                "run 0 cannot be resumed: it is already answered",
            ),
            (
                &["submit", "--resume"][..],
                "the latest (run 0) is already answered",
            ),
            (&["resume", "7"][..], "no run starts at seq 7"),
        ] {
            let err = one_line_failure(&repo.forum().args(args).output().unwrap());
            assert!(err.contains(needle), "{args:?}: {err}");
            assert!(!err.contains("no default executor"), "{args:?}: {err}");
            assert!(
                err.contains("git forum submit") || err.contains("git forum runs"),
                "{args:?} says what to do: {err}"
            );
        }
        assert_eq!(repo.snapshot(), before, "a refused resume writes nothing");
    });
}

/// The `runs --json` row of run `seq`.
fn row(repo: &Repo, seq: u64) -> J {
    let runs = repo.forum_json(&["runs"]);
    runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["request_seq"] == seq)
        .unwrap_or_else(|| panic!("run {seq}: {runs}"))
        .clone()
}

/// The `runs` text line of run `seq`'s work.
fn work_line(repo: &Repo, seq: u64) -> String {
    let text = repo.forum_ok(&["runs"]);
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with(&format!("run {seq:>5} ")))
        .unwrap_or_else(|| panic!("run {seq}: {text}"));
    lines[at + 1].trim().to_string()
}

#[test]
fn runs_names_only_branches_that_exist_and_counts_only_merged_changes() {
    use crate::work_read::{COMPILES, model, task, two_runs};
    on_each_kind(|repo| {
        // T1's one-line fix of calc.py is merged; T2's mul.py is blocked; T3 fails its check.
        let (run, _) = two_runs(repo);
        let changes = repo.forum_json(&["runs"])["runs"][1]["work"]["changes"].clone();
        let w = &row(repo, run)["work"];
        assert_eq!(w["branch"], format!("forum/run-{run}"), "{w}");
        assert_eq!(w["merged"], 1, "{w}");
        assert_eq!(
            (&w["merged_files"], &w["merged_added"], &w["merged_removed"]),
            (&J::from(1), &J::from(1), &J::from(1)),
            "only T1's change is on the branch: {w}"
        );
        assert!(
            w["files"].as_u64().unwrap() > 1,
            "every change's files: {w}"
        );
        assert_eq!(w["changes"], changes);
        let line = work_line(repo, run);
        assert!(
            line.starts_with(&format!(
                "forum/run-{run}: 1 merged (1 files, +1 -1), 1 blocked"
            )),
            "{line}"
        );
        // The branch removed: no longer named, by the CLI or the daemon's runs.
        repo.git_ok(&["branch", "-D", &format!("forum/run-{run}")]);
        assert_eq!(row(repo, run)["work"]["branch"], J::Null);
        let line = work_line(repo, run);
        assert!(line.starts_with("no run branch: 1 merged"), "{line}");

        // A work run whose only change is blocked made no branch: no report names one.
        let blocked = repo.forum_json(&["runs"])["runs"].as_array().unwrap().len();
        let seq = crate::work_run::entries(repo).len() as u64;
        let m = model(
            repo,
            "blocker",
            &format!(r#"{{"tasks":[{}]}}"#, task("B1", "write mul.py", "[]")),
            "write mul.py",
            crate::work_read::WORK,
        );
        repo.forum()
            .args([
                "submit",
                "--work",
                "--check",
                COMPILES,
                "--cmd",
                &m,
                "--quiet",
                "write mul",
            ])
            .output()
            .unwrap();
        assert_eq!(
            repo.forum_json(&["runs"])["runs"].as_array().unwrap().len(),
            blocked + 1
        );
        let w = &row(repo, seq)["work"];
        assert_eq!(
            (&w["branch"], &w["merged"], &w["blocked"]),
            (&J::Null, &J::from(0), &J::from(1)),
            "{w}"
        );
        assert!(
            repo.git_ok(&["branch", "--list", &format!("forum/run-{seq}")])
                .trim()
                .is_empty()
        );
        assert!(
            work_line(repo, seq).starts_with("no run branch: 0 merged (0 files, +0 -0), 1 blocked")
        );
        let room = repo.forum_json(&["room"]);
        assert_eq!(room["work"]["branch"], J::Null, "{}", room["work"]);
        let text = repo.forum_ok(&["room"]);
        assert!(text.contains("no run branch"), "{text}");
        let work = text.lines().find(|l| l.starts_with("work ")).unwrap();
        assert!(!work.contains("forum/run-"), "{work}");
        let brief = repo.forum_ok(&["room", "--brief"]);
        assert!(brief.contains("with no run branch"), "{brief}");
        let receipt = repo.forum_json(&["receipt", &seq.to_string()]);
        assert_eq!(receipt["work"]["branch"], J::Null, "{}", receipt["work"]);
    });
}

#[test]
fn a_gate_that_answers_garbage_gets_a_reason_naming_the_gates_output() {
    on_each_kind(|repo| {
        crate::work_run::setup(repo);
        let plan = format!(
            r#"{{"tasks":[{}]}}"#,
            crate::work_read::task("T1", "fix add in calc.py", "[]")
        );
        let path = repo.path().join("garbage.sh");
        let body = format!(
            "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{plan}' ;;\n  *\"Decide whether to ship\"*) echo 'sure, ship it' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'Done.' ;;\n  *) sed -i 's/return a - b/return a + b/' calc.py; echo add ;;\nesac\n"
        );
        std::fs::write(&path, body).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let m = path.to_str().unwrap();
        repo.forum()
            .args([
                "submit", "--work", "--check", "true", "--cmd", m, "--quiet", "fix calc",
            ])
            .output()
            .unwrap();
        let ships = crate::work_run::payloads(repo, "ship");
        let (_, ship) = ships.first().unwrap_or_else(|| panic!("no ship entry"));
        assert_eq!(ship["decision"], "undetermined", "{ship}");
        let reason = ship["reason"].as_str().unwrap();
        assert!(
            reason.contains("no JSON object found in the pre-ship gate's output"),
            "{reason}"
        );
        assert!(!reason.contains("planner"), "{reason}");
    });
}

#[test]
fn repository_context_leaves_out_the_seats_own_programs_and_the_forum_directory() {
    on_each_kind(|repo| {
        // The worker is a script tracked in the repository (as a project's own scripted
        // worker is), run as `sh tools/worker.sh`; its config is under .forum/.
        let logs = tempfile::tempdir().unwrap();
        let l = logs.path().display();
        let plan = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"Make divide in calc.py refuse a zero divisor","depends_on":[],"done_when":[]}]}"#;
        std::fs::create_dir_all(repo.path().join("tools")).unwrap();
        std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
        std::fs::write(
            repo.path().join("tools/worker.sh"),
            format!(
                "p=\"$1\"\n# divide calc.py zero: words the task's terms would find\ncase \"$p\" in\n  *\"Break this request\"*) printf '%s' \"$p\" > {l}/planner.txt; echo '{plan}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'divide refuses zero now' ;;\n  *) printf '%s' \"$p\" > {l}/worker.txt; echo 'done' ;;\nesac\n"
            ),
        )
        .unwrap();
        std::fs::write(
            repo.path().join(".forum/runtime.toml"),
            "# divide calc.py zero\n[runtime.default]\ncmd = \"sh tools/worker.sh\"\n",
        )
        .unwrap();
        std::fs::write(
            repo.path().join("calc.py"),
            "def divide(a, b):\n    return a / b\n",
        )
        .unwrap();
        repo.git_ok(&["add", "-A"]);
        repo.git_ok(&["commit", "-qm", "calc, its worker and its config"]);
        repo.forum_ok(&["submit", "--quiet", "make divide refuse zero"]);
        let read = |n: &str| std::fs::read_to_string(logs.path().join(n)).unwrap();
        let planner = read("planner.txt");
        assert!(
            planner.contains("Repository map (1 tracked file):\ncalc.py"),
            "{planner}"
        );
        let worker = read("worker.txt");
        assert!(
            worker.contains("def divide(a, b)"),
            "the task's file: {worker}"
        );
        for prompt in [&planner, &worker] {
            assert!(!prompt.contains("worker.sh"), "{prompt}");
            assert!(!prompt.contains(".forum/"), "{prompt}");
            assert!(!prompt.contains("Break this request\"*)"), "{prompt}");
        }
    });
}

#[test]
fn the_planners_reservation_is_its_prompt_estimate_and_the_seats_max_tokens() {
    on_each_kind(|repo| {
        // A command seat with `max_tokens = 200`, charged (as every program is) the estimate
        // of the prompt it is given: a quarter of its bytes, rounded up.
        let logs = tempfile::tempdir().unwrap();
        let prompt = logs.path().join("planner.txt");
        let script = logs.path().join("planner.sh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\n[ -e '{p}' ] || printf '%s' \"$1\" > '{p}'\necho 'not a plan'\n",
                p = prompt.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
        std::fs::write(
            repo.path().join(".forum/runtime.toml"),
            format!(
                "[runtime.default]\ncmd = \"{}\"\nmax_tokens = 200\n",
                script.display()
            ),
        )
        .unwrap();
        let submit = |ceiling: u64| {
            repo.forum()
                .args(["submit", "--quiet", "--no-repo-context", "--max-tokens"])
                .arg(ceiling.to_string())
                .arg(REQUEST)
                .output()
                .unwrap()
        };
        // Unbounded enough to run: the planner's first prompt as the seat got it (its answer
        // is no plan, so the run ends after the planner's retry).
        submit(1_000_000);
        let bytes = std::fs::read(&prompt).unwrap().len() as u64;
        assert!(bytes > 1000, "{bytes}");
        let needed = bytes.div_ceil(4) + 200;
        // Before, the call reserved one token per byte plus the framing: about 3,400 here.
        assert!(needed < bytes, "{needed} < {bytes}");
        std::fs::remove_file(&prompt).unwrap();
        let o = submit(needed - 1);
        assert_eq!(
            o.status.code(),
            Some(4),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!prompt.exists(), "the planner was not called");
        let budget = crate::work_run::payloads(repo, "budget").pop().unwrap().1;
        assert_eq!(
            budget["detail"],
            format!(
                "the call needs up to {needed} tokens and {} are left of --max-tokens",
                needed - 1
            ),
            "{budget}"
        );
        // Exactly enough: the planner is called.
        submit(needed);
        assert!(
            prompt.exists(),
            "the planner was called under a ceiling of {needed}"
        );
    });
}

/// With the local model's server counting the prompt (`count_tokens = "llama.cpp"`, which
/// `init` writes for it), the planner reserves the prompt tokens the server counts plus the
/// seat's `max_tokens`: a ceiling one token short refuses the call, that many admits it, and
/// the byte bound it replaces asked for several times more.
#[test]
fn the_planner_reserves_what_the_local_models_server_counts_and_its_max_tokens() {
    let Some(llm) = crate::llm::LocalLlm::start() else {
        return;
    };
    let request = "Explain why add in calc.py subtracts instead of adding, and how to fix it.";
    // The admitted call is made on the first kind only: it costs the model's time.
    let first = std::cell::Cell::new(true);
    on_each_kind(|repo| {
        std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
        let runtime = |count: bool| {
            let text = format!(
                "[runtime.default]\nchat_url = \"{}\"\nmodel = \"{}\"\nis_local = true\nmax_tokens = 200\n{}",
                llm.chat_url(),
                llm.model(),
                if count {
                    "count_tokens = \"llama.cpp\"\n"
                } else {
                    ""
                }
            );
            std::fs::write(repo.path().join(".forum/runtime.toml"), text).unwrap();
        };
        let submit = |ceiling: u64| {
            let o = repo
                .forum()
                .args([
                    "submit",
                    "--quiet",
                    "--no-repo-context",
                    "--max-model-calls",
                    "1",
                ])
                .args(["--max-tokens", &ceiling.to_string(), request])
                .output()
                .unwrap();
            let budget = crate::work_run::payloads(repo, "budget").pop().unwrap().1;
            (o.status.code(), budget)
        };
        let needs = |detail: &J| -> u64 {
            let d = detail.as_str().unwrap();
            d.strip_prefix("the call needs up to ")
                .and_then(|r| r.split(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{d}"))
        };
        runtime(false);
        let (code, b) = submit(1);
        assert_eq!(code, Some(4), "{b}");
        let by_bytes = needs(&b["detail"]);
        runtime(true);
        let (code, b) = submit(1);
        assert_eq!(code, Some(4), "{b}");
        let counted = needs(&b["detail"]);
        assert_eq!(
            (b["stage"].as_str(), b["model_calls"].as_u64()),
            (Some("plan"), Some(0)),
            "{b}"
        );
        // The prompt counted by the server, not one token a byte: several times less.
        assert!(
            counted > 200 && (counted - 200) * 3 < by_bytes - 200,
            "{counted} against {by_bytes}"
        );
        let (code, b) = submit(counted - 1);
        assert_eq!(code, Some(4), "{b}");
        assert_eq!(
            b["detail"],
            format!(
                "the call needs up to {counted} tokens and {} are left of --max-tokens",
                counted - 1
            )
        );
        // Exactly enough: the planner is called (the one model call the run may make).
        if first.replace(false) {
            let before = crate::work_run::payloads(repo, "budget").len();
            let (_, _) = submit(counted);
            let after = crate::work_run::payloads(repo, "budget");
            let b = &after[after.len() - 1].1;
            assert!(
                after.len() == before || b["model_calls"].as_u64() == Some(1),
                "the planner was not called under a ceiling of {counted}: {b}"
            );
        }
    });
}
