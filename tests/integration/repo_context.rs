//! The repository as context through the binary: in a repository with a
//! few tracked files, the planner's prompt holds the map and the README's start, the worker's
//! prompt the file its instruction names, both witnessed as `context` entries that verify
//! deep; `--no-repo-context` leaves them out; the context budget cuts them.

use serde_json::{Value as J, json};

use crate::common::{FORMATS, Repo};

const PLAN: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"Make divide in calc.py refuse a zero divisor","depends_on":[],"done_when":[]}]}"#;

/// A repository with three tracked files, and a scripted model (outside it) that writes each
/// planner and worker prompt it gets into `logs`.
pub(crate) fn setup(kind: &str) -> (Repo, tempfile::TempDir, String) {
    let repo = Repo::new(kind);
    std::fs::create_dir_all(repo.path().join("src")).unwrap();
    std::fs::create_dir_all(repo.path().join("docs")).unwrap();
    std::fs::write(
        repo.path().join("README.md"),
        "# Calc\nA tiny calculator for the command line.\n",
    )
    .unwrap();
    std::fs::write(
        repo.path().join("src/calc.py"),
        "def divide(a, b):\n    return a / b\n",
    )
    .unwrap();
    std::fs::write(repo.path().join("docs/notes.md"), "Release notes.\n").unwrap();
    repo.git_ok(&["add", "-A"]);
    repo.git_ok(&["commit", "-qm", "three files"]);
    let logs = tempfile::tempdir().unwrap();
    let script = logs.path().join("model.sh");
    let l = logs.path().display();
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) printf '%s' \"$p\" > {l}/planner.txt; echo '{PLAN}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'divide refuses zero now' ;;\n  *) printf '%s' \"$p\" > {l}/worker.txt; echo 'done' ;;\nesac\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = script.to_str().unwrap().to_string();
    (repo, logs, script)
}

fn read(logs: &tempfile::TempDir, name: &str) -> String {
    std::fs::read_to_string(logs.path().join(name)).unwrap_or_default()
}

/// Each entry's kind, and the payload of each `context` and `context_budget` entry.
pub(crate) fn entries(repo: &Repo) -> (Vec<String>, Vec<J>) {
    let log = repo.forum_json(&["log"]);
    let mut rows: Vec<&J> = log.as_array().unwrap().iter().collect();
    rows.reverse();
    let kinds = rows
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect();
    let payloads = rows
        .iter()
        .filter(|e| e["kind"] == "context" || e["kind"] == "context_budget")
        .map(|e| {
            let seq = e["seq"].as_u64().unwrap().to_string();
            repo.forum_json(&["show", &seq, "--payload"])["payload"].clone()
        })
        .collect();
    (kinds, payloads)
}

#[test]
fn the_planner_gets_the_map_and_the_task_its_file_on_every_format() {
    for kind in FORMATS {
        let (repo, logs, model) = setup(kind);
        repo.forum_ok(&["submit", "--cmd", &model, "--quiet", "make divide safe"]);
        let planner = read(&logs, "planner.txt");
        for needle in [
            "Repository map (3 tracked files):\nREADME.md\ndocs/notes.md\nsrc/calc.py",
            "README.md (its start):\n# Calc\nA tiny calculator",
        ] {
            assert!(planner.contains(needle), "{kind}: {needle} in\n{planner}");
        }
        let worker = read(&logs, "worker.txt");
        assert!(
            worker.contains("--- src/calc.py ---\ndef divide(a, b):\n    return a / b"),
            "{kind}: {worker}"
        );
        assert!(!worker.contains("docs/notes.md"), "{kind}: {worker}");
        let (kinds, payloads) = entries(&repo);
        assert_eq!(
            &kinds[..6],
            [
                "request",
                "route_frame",
                "context",
                "plan",
                "context",
                "task"
            ],
            "{kind}"
        );
        assert!(
            payloads[0]["context"]
                .as_str()
                .unwrap()
                .starts_with("Repository map (3 tracked files)")
        );
        assert_eq!(payloads[1]["task"], "T1", "{kind}");
        assert!(
            payloads[1]["context"]
                .as_str()
                .unwrap()
                .contains("--- src/calc.py ---")
        );
        repo.forum_ok(&["verify", "--deep"]);
    }
}

#[test]
fn no_repo_context_leaves_the_repository_out() {
    for kind in FORMATS {
        let (repo, logs, model) = setup(kind);
        repo.forum_ok(&[
            "submit",
            "--cmd",
            &model,
            "--quiet",
            "--no-repo-context",
            "make divide safe",
        ]);
        assert!(
            !read(&logs, "planner.txt").contains("Repository map"),
            "{kind}"
        );
        let worker = read(&logs, "worker.txt");
        assert!(
            !worker.is_empty() && !worker.contains("src/calc.py"),
            "{kind}: {worker}"
        );
        let (kinds, _) = entries(&repo);
        assert!(!kinds.iter().any(|k| k == "context"), "{kind}: {kinds:?}");
        repo.forum_ok(&["verify", "--deep"]);
    }
}

#[test]
fn the_context_budget_cuts_the_repository_context() {
    let (repo, logs, model) = setup("sha1");
    repo.forum_ok(&[
        "submit",
        "--cmd",
        &model,
        "--quiet",
        "--request-context-token-budget",
        "5",
        "--task-context-token-budget",
        "6",
        "make divide safe",
    ]);
    let (_, payloads) = entries(&repo);
    // The synthesis input is metered too (source upstream); the repository's two come first.
    let budget: Vec<&J> = payloads
        .iter()
        .filter(|p| p.get("schema").is_some() && p["source"] != "upstream")
        .collect();
    let context: Vec<&J> = payloads
        .iter()
        .filter(|p| p.get("schema").is_none())
        .collect();
    assert_eq!(budget.len(), 2, "{payloads:?}");
    for (b, source, limit) in [
        (budget[0], "request", "max_request_tokens"),
        (budget[1], "task", "max_task_tokens"),
    ] {
        assert_eq!(
            (&b["source"], &b["action"], &b["reason"]),
            (&json!(source), &json!("trimmed"), &json!(limit)),
            "{b}"
        );
    }
    assert_eq!(budget[0]["admitted_tokens"], 5);
    assert_eq!(context[0]["context"], "Repository map (3 tr");
    assert_eq!(context[1]["context"].as_str().unwrap().len(), 24);
    assert!(
        read(&logs, "planner.txt").contains("Context for this request:\nRepository map (3 tr\n")
    );
    repo.forum_ok(&["verify", "--deep"]);
}
