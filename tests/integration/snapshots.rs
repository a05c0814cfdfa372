//! Snapshot tests of text output: every `--help` screen and the text of
//! `summary`, `bench`, `room`, `capsule`, `receipt` and `grade` on a fixed ledger, so help and
//! report text cannot change by accident. The snapshots live in tests/integration/snapshots/.
//!
//! A deliberate change is accepted by rewriting them:
//! `INSTA_UPDATE=always INSTA_FORCE_PASS=1 cargo nextest run -E 'test(/snapshot/)'`
//! (or `cargo insta review`, when cargo-insta is installed), then reviewing the diff.

use clap::CommandFactory;

use crate::common::Repo;

/// Runs the binary with a fixed width for help text, and returns stdout; stderr must be
/// empty and the exit code 0.
fn text(repo: &Repo, args: &[&str]) -> String {
    let o = repo
        .forum()
        .env("COLUMNS", "100")
        .args(args)
        .output()
        .expect("run git-forum");
    assert!(
        o.status.success(),
        "git-forum {args:?} failed ({}): {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "",
        "git-forum {args:?} wrote to stderr"
    );
    String::from_utf8(o.stdout).expect("UTF-8 output")
}

/// Every visible command path under `git forum`, parents first (`[]`, `["gate"]`,
/// `["gate", "list"]`, ...), from clap's own command tree.
fn command_paths() -> Vec<Vec<String>> {
    fn walk(cmd: &clap::Command, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        out.push(path.clone());
        for sub in cmd.get_subcommands() {
            if sub.is_hide_set() || sub.get_name() == "help" {
                continue;
            }
            path.push(sub.get_name().to_string());
            walk(sub, path, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(&git_forum::cli::Cli::command(), &mut Vec::new(), &mut out);
    out
}

#[test]
fn snapshot_help_of_every_command() {
    let repo = Repo::new("sha1");
    let paths = command_paths();
    assert!(paths.len() > 20, "only {} commands found", paths.len());
    let top = text(&repo, &["--help"]);
    for path in &paths {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let out = text(&repo, &args);
        if let Some(name) = path.last() {
            assert!(
                top.contains(&format!("  {}", path[0])),
                "{name} is not listed in git forum --help"
            );
        }
        let name = if path.is_empty() {
            "help".to_string()
        } else {
            format!("help_{}", path.join("_").replace('-', "_"))
        };
        insta::assert_snapshot!(name, out);
    }
}

/// Appends `(actor, kind, parent, payload)` rows to `ledger`.
fn append_all(repo: &Repo, ledger: &str, rows: &[(&str, &str, Option<u64>, &str)]) {
    for (actor, kind, parent, payload) in rows {
        let parent = parent.map(|p| p.to_string());
        let mut args = vec![
            "--ledger",
            ledger,
            "append",
            "--actor",
            actor,
            "--kind",
            kind,
            "--payload",
            payload,
        ];
        if let Some(p) = &parent {
            args.extend(["--parent", p.as_str()]);
        }
        repo.forum_ok(&args);
    }
}

/// One run, written with a pinned clock: a request, its route frame, a two-task plan, both
/// tasks with results and verdicts (T2's fails), a context-budget trim, and an answer.
fn fixed_run(
    answer: &str,
    t2_passes: bool,
) -> Vec<(&'static str, &'static str, Option<u64>, String)> {
    let verdict_t2 = if t2_passes {
        r#"{"id":"T2","ok":true,"decision":"pass","score":0.8,"reason":"the docs cover the endpoint","model":"judge-1"}"#
    } else {
        r#"{"id":"T2","ok":false,"decision":"fail","score":0.3,"reason":"the docs miss the error codes","model":"judge-1"}"#
    };
    vec![
        ("client", "request", None, r#"{"text":"ship a login API with docs"}"#.to_string()),
        (
            "router",
            "route_frame",
            Some(0),
            r#"{"domain":"software","intent":"build","posture":"careful","delivery_profile":"engineer"}"#.to_string(),
        ),
        (
            "planner",
            "plan",
            Some(0),
            r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":["endpoint documented"]},{"id":"T2","agent":"docs","instruction":"write the API docs","depends_on":["T1"],"done_when":[]}],"waves":[["T1"],["T2"]],"edges":[{"from":"T1","to":"T2","type":"data"}]}"#.to_string(),
        ),
        ("dispatcher", "task", Some(2), r#"{"id":"T1","agent":"backend","instruction":"design the login API"}"#.to_string()),
        ("backend", "result", Some(3), r#"{"id":"T1","output":"POST /login takes a user and a password and returns a token.","ok":true,"model":"model-a"}"#.to_string()),
        ("validator", "verdict", Some(4), r#"{"id":"T1","ok":true,"decision":"pass","score":0.9,"reason":"the endpoint is specified","model":"judge-1"}"#.to_string()),
        ("dispatcher", "task", Some(2), r#"{"id":"T2","agent":"docs","instruction":"write the API docs"}"#.to_string()),
        ("docs", "result", Some(6), r#"{"id":"T2","output":"docs/login.md describes POST /login.","ok":true,"model":"model-b"}"#.to_string()),
        ("validator", "verdict", Some(7), verdict_t2.to_string()),
        ("context", "context_budget", Some(0), r#"{"action":"trimmed","original_tokens":1200,"admitted_tokens":800,"source":"task"}"#.to_string()),
        ("synthesizer", "result", Some(2), format!(r#"{{"answer":{}}}"#, serde_json::json!(answer))),
    ]
}

fn fixed_repo() -> Repo {
    let repo = Repo::new("sha1");
    for (ledger, answer, pass) in [
        (
            "main",
            "Shipped the login API with docs.\nNext step: deploy.",
            true,
        ),
        (
            "b",
            "Shipped the login API.\nThe docs miss the error codes.",
            false,
        ),
    ] {
        let rows = fixed_run(answer, pass);
        let rows: Vec<(&str, &str, Option<u64>, &str)> = rows
            .iter()
            .map(|(a, k, p, b)| (*a, *k, *p, b.as_str()))
            .collect();
        append_all(&repo, ledger, &rows);
    }
    repo
}

#[test]
fn snapshot_report_text_on_a_fixed_ledger() {
    let repo = fixed_repo();
    let cases: &[(&str, &[&str])] = &[
        ("summary", &["summary"]),
        ("summary_json", &["summary", "--json"]),
        ("bench", &["bench", "main", "b"]),
        ("bench_same", &["bench", "main", "run:0"]),
        ("room_text", &["room", "--text"]),
        ("room_brief", &["room", "--brief"]),
        ("room_json", &["room", "--json"]),
        ("capsule_text", &["capsule", "--text"]),
        ("capsule_json", &["capsule"]),
        ("receipt", &["receipt", "--json"]),
        ("receipt_text", &["receipt"]),
        ("grade", &["grade"]),
    ];
    for (name, args) in cases {
        let out = text(&repo, args);
        insta::assert_snapshot!(format!("report_{name}"), out);
    }
}
