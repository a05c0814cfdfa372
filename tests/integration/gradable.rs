//! `git forum export-gradable` and `git forum grade [RUN]`: Forum's gradable rows and grades
//! of its two persisted runs (gradable_vectors.json, gradable_ledger0/1) once imported, on
//! every repository format; run1's row; one run of a ledger of several; the atomic `--out`
//! append; the daemon's routes; and every bad input as one line.

use serde_json::{Value as J, json};

use crate::common::{FORMATS, Repo, conformance, one_line_error};

fn vectors() -> Option<(std::path::PathBuf, Vec<J>)> {
    let dir = conformance()?;
    let text = std::fs::read_to_string(dir.join("gradable_vectors.json")).unwrap();
    let v: J = serde_json::from_str(&text).unwrap();
    Some((dir, v.as_array().unwrap().clone()))
}

fn stdout_of(rec: &J) -> &str {
    assert_eq!(rec["rc"], 0, "{rec}");
    rec["stdout"].as_str().unwrap()
}

/// Our printed row is Forum's: the same value field for field, and the same text but for the
/// order of keys inside a check payload's body, which the git store keeps canonical (sorted;
/// Forum prints them as written). The seal is over sorted keys, so it is the same either way.
fn same_row(ours: &str, forum: &str, what: &str) {
    let (a, b): (J, J) = (
        serde_json::from_str(ours).unwrap(),
        serde_json::from_str(forum).unwrap(),
    );
    assert_eq!(a, b, "{what}");
    assert_eq!(a["row_hash"], b["row_hash"], "{what}");
    let lines = |t: &str| {
        let mut v: Vec<String> = t
            .lines()
            .map(|l| l.trim_end_matches(',').to_string())
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        lines(ours),
        lines(forum),
        "{what}: the text, lines in any order"
    );
    let first_keys = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.starts_with("  \"") || l.starts_with("    \""))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(
        first_keys(ours),
        first_keys(forum),
        "{what}: the row's own key order"
    );
}

#[test]
fn forums_gradable_rows_and_grades_once_imported() {
    let Some((dir, cases)) = vectors() else {
        return;
    };
    assert_eq!(cases.len(), 2);
    for kind in FORMATS {
        for case in &cases {
            let repo = Repo::new(kind);
            let ledger_dir = dir.join(case["ledger_dir"].as_str().unwrap());
            repo.forum_ok(&["import", ledger_dir.to_str().unwrap()]);
            let row = repo.forum_ok(&["export-gradable"]);
            same_row(&row, stdout_of(&case["export_gradable"]), kind);
            let min3 = repo.forum_ok(&["export-gradable", "--min-checks", "3"]);
            same_row(&min3, stdout_of(&case["export_gradable_min3"]), kind);
            // The row names its run's request: the same row by its seq and over the ledger.
            assert_eq!(repo.forum_ok(&["export-gradable", "0"]), row);
            assert_eq!(repo.forum_ok(&["export-gradable", "--all"]), row);
            let grade = stdout_of(&case["grade"]);
            assert_eq!(repo.forum_ok(&["grade", "--json"]), grade, "{kind}");
            assert_eq!(repo.forum_ok(&["grade", "--json", "0"]), grade);
            assert_eq!(repo.forum_ok(&["grade", "--json", "--all"]), grade);
            let row: J = serde_json::from_str(&row).unwrap();
            let text = repo.forum_ok(&["grade"]);
            assert!(
                text.starts_with(&format!(
                    "{}: reward 0.5 over 2 independent checks, 1 refuted",
                    row["grade"]["label"].as_str().unwrap()
                )),
                "{text}"
            );
        }
    }
}

#[test]
fn run1_row_through_the_binary_the_daemon_and_mcp() {
    let Some(dir) = conformance() else { return };
    let proj: J =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run1_projections.json")).unwrap())
            .unwrap();
    let repo = Repo::new("sha1");
    repo.forum_ok(&["import", dir.join("run1").to_str().unwrap()]);
    let row: J = serde_json::from_str(&repo.forum_ok(&["export-gradable"])).unwrap();
    assert_eq!(row, proj["gradable_record"]);
    assert_eq!(row["row_hash"], "500e44e2d9ddcd1a");
    let d = git_forum::serve::dispatch::Dispatcher::open(git_forum::serve::dispatch::Config::new(
        repo.path(),
        "main",
    ))
    .unwrap();
    let got = d.handle("POST", "/gradable", b"");
    assert_eq!((got.status, &got.body), (200, &row));
    let got = d.handle("POST", "/gradable", br#"{"run": 0, "min_checks": 3}"#);
    assert_eq!((got.status, &got.body["row_hash"]), (200, &row["row_hash"]));
    let got = d.handle("POST", "/grade", br#"{"run": 0}"#);
    assert_eq!((got.status, &got.body), (200, &proj["grade"]));
    assert_eq!(d.handle("POST", "/grade", br#"{"run": 3}"#).status, 404);
    assert_eq!(d.handle("POST", "/gradable", br#"{"run": -1}"#).status, 400);
    assert_eq!(d.handle("POST", "/gradable", br#"{"seq": 0}"#).status, 400);
    let both = d.handle("POST", "/grade", br#"{"run": 0, "all": true}"#);
    assert_eq!(both.status, 400, "{}", both.body);
    let (ok, out) = repo.mcp_batch(
        &[],
        &[
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"forum.export_gradable","arguments":{"run":0}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"forum.run.grade","arguments":{"all":true}}}"#,
        ],
    );
    assert!(ok, "{out}");
    let replies: Vec<J> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let text = |r: &J| -> J {
        assert_eq!(r["result"]["isError"], false, "{r}");
        serde_json::from_str(r["result"]["content"][0]["text"].as_str().unwrap()).unwrap()
    };
    assert_eq!(text(&replies[1]), row);
    assert_eq!(text(&replies[2]), proj["grade"]);
}

/// Two runs in one ledger, written with `git forum append`: the first passes two
/// independent checks, the second is refuted once.
fn two_runs(repo: &Repo) {
    let add = |actor: &str, kind: &str, parent: Option<u64>, body: J| {
        let mut args = vec!["append", "--actor", actor, "--kind", kind];
        let p = parent.map(|p| p.to_string());
        if let Some(p) = &p {
            args.extend(["--parent", p.as_str()]);
        }
        let body = body.to_string();
        args.extend(["--payload", body.as_str()]);
        repo.forum_ok(&args);
    };
    add("client", "request", None, json!({"text": "First  Run"}));
    add(
        "backend",
        "result",
        Some(0),
        json!({"id": "T1", "answer": "one"}),
    );
    add(
        "validator",
        "verdict",
        Some(1),
        json!({"id": "T1", "ok": true}),
    );
    add("verifier", "verification", Some(1), json!({"ok": true}));
    add("client", "request", None, json!({"text": "second run"}));
    add(
        "backend",
        "result",
        Some(4),
        json!({"id": "T1", "answer": "two"}),
    );
    add(
        "validator",
        "verdict",
        Some(5),
        json!({"id": "T1", "ok": false}),
    );
}

#[test]
fn one_run_of_a_ledger_of_several_on_every_format() {
    for kind in FORMATS {
        let repo = Repo::new(kind);
        two_runs(&repo);
        let grade = |args: &[&str]| -> J {
            let mut a = vec!["grade", "--json"];
            a.extend(args);
            serde_json::from_str(&repo.forum_ok(&a)).unwrap()
        };
        let latest = grade(&[]);
        assert_eq!(latest, grade(&["4"]), "{kind}");
        assert_eq!(
            (&latest["label"], &latest["checks"]),
            (&json!("FAIL"), &json!(1))
        );
        let first = grade(&["0"]);
        assert_eq!(
            (&first["label"], &first["reward"]),
            (&json!("PASS"), &json!(1.0))
        );
        let all = grade(&["--all"]);
        assert_eq!((&all["checks"], &all["refuted"]), (&json!(3), &json!(1)));
        let row: J = serde_json::from_str(&repo.forum_ok(&["export-gradable", "0"])).unwrap();
        assert_eq!(row["prompt"], "First  Run");
        assert_eq!(row["task_id"], row_task_id("first run"));
        assert_eq!(row["trajectory"]["answer"], "one");
        let seqs: Vec<u64> = row["trajectory"]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, [0, 1, 2, 3], "{kind}");
        // The root a consumer folds from the row's own entries, not the whole ledger's.
        let whole = repo.forum_json(&["status"]);
        assert_ne!(row["oracle"]["merkle_root"], whole["checkpoint"]);
        let all_row: J =
            serde_json::from_str(&repo.forum_ok(&["export-gradable", "--all"])).unwrap();
        assert_eq!(all_row["oracle"]["merkle_root"], whole["checkpoint"]);
        assert_eq!(all_row["budget"]["entries"], 7);
    }
}

/// Forum's task id: the first 16 hex digits of SHA-256 over the normalized request.
fn row_task_id(normalized: &str) -> String {
    use sha2::Digest;
    let h = sha2::Sha256::digest(normalized.as_bytes());
    h.iter().map(|b| format!("{b:02x}")).collect::<String>()[..16].to_string()
}

#[test]
fn out_appends_one_sorted_json_line_at_a_time() {
    let repo = Repo::new("sha1");
    two_runs(&repo);
    let out = repo.path().join("rows.jsonl");
    let said = repo.forum_ok(&["export-gradable", "0", "--out", "rows.jsonl"]);
    assert!(said.starts_with("appended row "), "{said}");
    repo.forum_ok(&["export-gradable", "--out", out.to_str().unwrap()]);
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(text.ends_with('\n'));
    let printed: J = serde_json::from_str(&repo.forum_ok(&["export-gradable", "0"])).unwrap();
    let first: J = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(first, printed);
    // Forum's JSONL form: sorted keys, ", " and ": " separators.
    assert!(
        lines[0].starts_with("{\"budget\": {\"clock\": \"injected\", "),
        "{}",
        lines[0]
    );
    assert!(said.contains(printed["row_hash"].as_str().unwrap()));
    let second: J = serde_json::from_str(lines[1]).unwrap();
    assert_eq!(second["prompt"], "second run");
    // A torn last row: refused, and the file is left as it was.
    std::fs::write(&out, "{\"a\": 1}\n{\"half").unwrap();
    let o = repo
        .forum()
        .args(["export-gradable", "--out", "rows.jsonl"])
        .output()
        .unwrap();
    one_line_error(&o, "does not end with a newline");
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "{\"a\": 1}\n{\"half"
    );
    let o = repo
        .forum()
        .args(["export-gradable", "--out", "no/such/dir/rows.jsonl"])
        .output()
        .unwrap();
    one_line_error(&o, "the file is as it was");
    let o = repo
        .forum()
        .args(["export-gradable", "--out", "."])
        .output()
        .unwrap();
    one_line_error(&o, "not a regular file");
    let leftovers: Vec<String> = std::fs::read_dir(repo.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("git-forum-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn bad_runs_and_flags_are_one_line() {
    let repo = Repo::new("sha1");
    let o = repo.forum().args(["grade"]).output().unwrap();
    one_line_error(&o, "main");
    two_runs(&repo);
    for (args, code, needle) in [
        (&["grade", "2"][..], 1, "no run starts at seq 2"),
        (&["export-gradable", "9"][..], 1, "no run starts at seq 9"),
        (
            &["grade", "x"][..],
            2,
            "RUN takes the seq of a run's request",
        ),
        (&["export-gradable", "."][..], 2, "import it first"),
        (&["grade", "0", "--all"][..], 2, "not both"),
        (
            &["export-gradable", "--min-checks", "-1"][..],
            2,
            "negative number",
        ),
    ] {
        let o = repo.forum().args(args).output().unwrap();
        one_line_error(&o, needle);
        assert_eq!(o.status.code(), Some(code), "{args:?}");
    }
}
