//! `git forum lane check|gaps`, `POST /lane/check|gaps` and the MCP tools `lane_check` and
//! `lane_gaps`: route claims witnessed as `lane_route` or `lane_rejection`, and the
//! `vocabulary_gap` that three undecided routes in a row make. The entries are Forum's: with
//! `FORUM_PYTHON` naming a Python that imports forum, the same scenario written by Forum's own
//! `witness_route` and `witness_vocabulary_gap` must give the same bodies and hashes.

use std::path::Path;
use std::process::Output;

use serde_json::{Value as J, json};

use crate::common::{Repo, http_json, on_each_kind, one_line_error};

fn forum(repo: &Repo, args: &[&str]) -> Output {
    repo.forum().args(args).output().expect("run git-forum")
}

/// The entry at `seq` with its body, from `git forum log --json`.
fn entry(repo: &Repo, seq: u64) -> J {
    let log = repo.forum_json(&["log"]);
    let entries = log
        .as_array()
        .or_else(|| log["entries"].as_array())
        .unwrap_or_else(|| panic!("log: {log}"))
        .clone();
    entries
        .into_iter()
        .find(|e| e["seq"] == json!(seq))
        .unwrap_or_else(|| panic!("no seq {seq}"))
}

fn body(repo: &Repo, seq: u64) -> J {
    let p = repo.forum_json(&["show", &seq.to_string(), "--payload"]);
    p.get("payload").cloned().unwrap_or(p)
}

#[test]
fn lane_check_accepts_and_rejects_each_violation() {
    on_each_kind(|repo| {
        let out = repo.forum_ok(&[
            "lane",
            "check",
            "--lane",
            "observe",
            "--scopes",
            "read",
            "--domain",
            "formal-proof",
            "--confidence",
            "0.9",
            "summarize",
            "the",
            "proofs",
        ]);
        assert_eq!(
            out.trim(),
            "lane_route seq 0: lane observe grants read, domain formal-proof for \"summarize the proofs\""
        );
        assert_eq!(entry(repo, 0)["kind"], "lane_route");
        assert_eq!(entry(repo, 0)["actor"], "router");
        assert_eq!(
            body(repo, 0),
            json!({"task": "summarize the proofs", "lane": "observe", "domain": "formal-proof",
                   "scopes": ["read"], "confidence": 0.9})
        );

        let cases: [(&[&str], &str, J); 3] = [
            (
                &["--lane", "deploy", "--scope", "write", "--scope", "run"],
                "unknown_lane: lane \"deploy\" is not a proof lane",
                json!({"violation": "unknown_lane", "excess": ["run", "write"], "granted": []}),
            ),
            (
                &["--lane", "observe", "--scopes", "run,read"],
                "over_routed: lane \"observe\" does not grant run (it grants read)",
                json!({"violation": "over_routed", "excess": ["run"], "granted": ["read"]}),
            ),
            (
                &[
                    "--lane",
                    "execute",
                    "--scopes",
                    "run",
                    "--domain",
                    "astrology",
                ],
                "unknown_domain: domain \"astrology\" is not a domain lane",
                json!({"violation": "unknown_domain", "excess": [], "granted": ["read", "run"]}),
            ),
        ];
        for (i, (flags, needle, want)) in cases.iter().enumerate() {
            let seq = i as u64 + 1;
            let mut args = vec!["lane", "check"];
            args.extend_from_slice(flags);
            args.push("the task");
            let o = forum(repo, &args);
            let err = one_line_error(&o, needle);
            assert!(
                err.contains(&format!("witnessed as lane_rejection seq {seq}")),
                "{err}"
            );
            assert_eq!(o.status.code(), Some(1));
            assert_eq!(entry(repo, seq)["kind"], "lane_rejection");
            let b = body(repo, seq);
            for k in ["violation", "excess", "granted"] {
                assert_eq!(b[k], want[k], "{k}: {b}");
            }
        }
        // Bad input writes nothing.
        let o = forum(repo, &["lane", "check", "--lane", " ", "t"]);
        one_line_error(&o, "field \"lane\" is empty");
        let o = forum(
            repo,
            &["lane", "check", "--lane", "observe", "--parent", "99", "t"],
        );
        one_line_error(&o, "causal_parent 99 names no entry");
        assert_eq!(repo.forum_json(&["log"]).as_array().map(Vec::len), Some(4));
    });
}

/// Records a route of `text` with `git forum route --record`; returns stderr.
fn record_route(repo: &Repo, text: &str) -> String {
    let o = forum(repo, &["route", "--record", text]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stderr).to_string()
}

#[test]
fn three_undecided_routes_make_one_vocabulary_gap() {
    on_each_kind(|repo| {
        // Decided first, then undecided ones (no lane's keywords in them).
        record_route(repo, "database sql schema migration query");
        assert_eq!(body(repo, 0)["decided"], "database", "{}", body(repo, 0));
        for text in ["ponder the meaning", "ponder the purpose"] {
            let err = record_route(repo, text);
            assert!(!err.contains("vocabulary_gap"), "{err}");
        }
        let err = record_route(repo, "ponder the end");
        assert!(err.contains("recorded vocabulary_gap as seq 4"), "{err}");
        let gap = entry(repo, 4);
        assert_eq!(
            (gap["kind"].as_str(), gap["actor"].as_str()),
            (Some("vocabulary_gap"), Some("router"))
        );
        assert_eq!(gap["causal_parent"], 3);
        assert_eq!(
            body(repo, 4),
            json!({"domain_signal": "general", "consecutive_escalations": 3,
                   "confidence_ceiling": 0.0, "first_seq": 1, "last_seq": 3})
        );
        // A fourth escalation in the same run writes no second gap.
        let err = record_route(repo, "ponder again");
        assert!(!err.contains("vocabulary_gap"), "{err}");
        let g = repo.forum_json(&["lane", "gaps"]);
        assert_eq!(g["consecutive_escalations"], 4);
        assert_eq!(
            (g["first_seq"].as_u64(), g["last_seq"].as_u64()),
            (Some(1), Some(5))
        );
        assert_eq!(
            (
                g["gap"].as_bool(),
                g["witnessed"].as_u64(),
                g["recorded"].as_bool()
            ),
            (Some(true), Some(4), Some(false))
        );
        let text = repo.forum_ok(&["lane", "gaps"]);
        assert!(
            text.contains("4 undecided route(s) in a row, seq 1 to 5"),
            "{text}"
        );
        assert!(
            text.contains("witnessed before as vocabulary_gap seq 4"),
            "{text}"
        );
    });
}

#[test]
fn the_threshold_comes_from_the_policy() {
    let repo = Repo::new("sha1");
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(
        repo.path().join(".forum/policy.toml"),
        "[lanes]\nmin_escalations = 2\n",
    )
    .unwrap();
    record_route(&repo, "ponder the meaning");
    let err = record_route(&repo, "ponder the purpose");
    assert!(err.contains("recorded vocabulary_gap as seq 2"), "{err}");
    let g = repo.forum_json(&["lane", "gaps", "--min-escalations", "5"]);
    assert_eq!(
        (g["gap"].as_bool(), g["min_escalations"].as_u64()),
        (Some(false), Some(5))
    );
    let o = forum(&repo, &["lane", "gaps", "--min-escalations", "0"]);
    one_line_error(&o, "min_escalations must be at least 1, found 0");
    std::fs::write(
        repo.path().join(".forum/policy.toml"),
        "[lanes]\nmin_escalations = 0\n",
    )
    .unwrap();
    let o = forum(&repo, &["lane", "gaps"]);
    one_line_error(&o, "[lanes] min_escalations must be at least 1, found 0");
}

#[test]
fn lane_gaps_record_writes_once_with_the_signal_given() {
    let repo = Repo::new("sha1");
    for t in ["ponder a", "ponder b", "ponder c"] {
        repo.append(
            "router",
            "route",
            &json!({"task": t, "decided": null, "confidence": 0.25}).to_string(),
        );
    }
    let g = repo.forum_json(&["lane", "gaps", "--record", "--domain-signal", "philosophy"]);
    assert_eq!(
        (g["recorded"].as_bool(), g["witnessed"].as_u64()),
        (Some(true), Some(3))
    );
    assert_eq!(
        body(&repo, 3),
        json!({"domain_signal": "philosophy", "consecutive_escalations": 3,
               "confidence_ceiling": 0.25, "first_seq": 0, "last_seq": 2})
    );
    let again = repo.forum_json(&["lane", "gaps", "--record"]);
    assert_eq!(
        (again["recorded"].as_bool(), again["witnessed"].as_u64()),
        (Some(false), Some(3))
    );
}

/// The calls each transport makes, in order.
const CALLS: [(&str, &str); 4] = [
    (
        "/lane/check",
        r#"{"task": "summarize", "lane": "observe", "scopes": ["read"], "domain": "formal-proof", "confidence": 0.5}"#,
    ),
    (
        "/lane/check",
        r#"{"task": "ship", "lane": "observe", "scopes": ["read", "run"]}"#,
    ),
    ("/lane/check", r#"{"task": "x", "lane": "deploy"}"#),
    ("/lane/gaps", r#"{}"#),
];

fn cli_answers(repo: &Repo) -> Vec<J> {
    let args: [&[&str]; 4] = [
        &[
            "lane",
            "check",
            "--lane",
            "observe",
            "--scopes",
            "read",
            "--domain",
            "formal-proof",
            "--confidence",
            "0.5",
            "summarize",
        ],
        &[
            "lane", "check", "--lane", "observe", "--scopes", "read,run", "ship",
        ],
        &["lane", "check", "--lane", "deploy", "x"],
        &["lane", "gaps"],
    ];
    args.iter().map(|a| repo.forum_json(a)).collect()
}

#[test]
fn the_daemon_and_mcp_answer_as_the_cli() {
    let cli = cli_answers(&Repo::new("sha1"));
    assert_eq!(cli[0]["accepted"], true);
    assert_eq!(cli[1]["violation"], "over_routed");
    assert_eq!(cli[2]["violation"], "unknown_lane");

    let repo = Repo::new("sha1");
    let served = repo.serve(&[], std::process::Stdio::null());
    let mut daemon = Vec::new();
    for (i, (path, b)) in CALLS.iter().enumerate() {
        let (code, answer) = http_json(
            &served.addr,
            "POST",
            path,
            &serde_json::from_str(b).unwrap(),
        );
        let want = if i == 1 || i == 2 { 422 } else { 200 };
        assert_eq!(code, want, "{path} {b}: {answer}");
        daemon.push(answer);
    }
    drop(served);
    assert_eq!(daemon, cli);

    let repo = Repo::new("sha1");
    let lines: Vec<String> = CALLS
        .iter()
        .enumerate()
        .map(|(i, (path, b))| {
            let name = if path.ends_with("check") {
                "lane_check"
            } else {
                "lane_gaps"
            };
            let args: J = serde_json::from_str(b).unwrap();
            json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                   "params": {"name": name, "arguments": args}})
            .to_string()
        })
        .collect();
    // One call at a time, so the entries land in the same order.
    let mut mcp = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let (ok, out) = repo.mcp_batch(&[], std::slice::from_ref(line));
        assert!(ok, "{out}");
        let reply: J = serde_json::from_str(out.lines().next().unwrap()).unwrap();
        assert_eq!(reply["result"]["isError"], i == 1 || i == 2, "{reply}");
        mcp.push(reply["result"]["structuredContent"].clone());
    }
    assert_eq!(mcp, cli);
}

/// The scenario of `data/lanes/forum_lanes.py`, written by git forum: four claims, a decided
/// route, three undecided ones, then the gap.
fn write_scenario(repo: &Repo) {
    let claims: [&[&str]; 4] = [
        &[
            "--lane",
            "observe",
            "--scopes",
            "read",
            "--domain",
            "formal-proof",
            "--confidence",
            "0.9",
            "summarize the proofs",
        ],
        &["--lane", "deploy", "--scopes", "write,run", "ship it"],
        &[
            "--lane",
            "observe",
            "--scopes",
            "run,read",
            "--confidence",
            "0.5",
            "look and run",
        ],
        &[
            "--lane",
            "execute",
            "--scopes",
            "run",
            "--domain",
            "astrology",
            "--confidence",
            "0.25",
            "read the stars",
        ],
    ];
    for c in claims {
        let mut args = vec!["lane", "check", "--ts", "1700000000.0"];
        args.extend_from_slice(c);
        forum(repo, &args);
    }
    for (decided, c) in [
        (json!("coder"), 0.8),
        (J::Null, 0.1),
        (J::Null, 0.35),
        (J::Null, 0.2),
    ] {
        let payload = json!({"task": "t", "decided": decided, "confidence": c}).to_string();
        repo.forum_ok(&[
            "append",
            "--actor",
            "router",
            "--kind",
            "route",
            "--ts",
            "1700000000.0",
            "--payload",
            &payload,
        ]);
    }
    repo.forum_ok(&[
        "lane",
        "gaps",
        "--record",
        "--domain-signal",
        "general",
        "--ts",
        "1700000000.0",
    ]);
}

#[test]
fn entries_match_forums_own_functions() {
    // Forum itself is not in the shared folder, so CI (GIT_FORUM_REQUIRE_SHARED=1) runs this
    // only when FORUM_PYTHON names it; the same hashes are fixed in src/route/vocab_tests.rs.
    let Some(python) = std::env::var("FORUM_PYTHON").ok().filter(|p| !p.is_empty()) else {
        eprintln!(
            "skipped: set FORUM_PYTHON to a Python that imports forum to compare with Forum's own functions"
        );
        return;
    };
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration/data/lanes/forum_lanes.py");
    let o = std::process::Command::new(&python)
        .arg(&script)
        .arg("1700000000.0")
        .output()
        .expect("run FORUM_PYTHON");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let forum_rows: Vec<J> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(forum_rows.len(), 9);
    on_each_kind(|repo| {
        write_scenario(repo);
        for row in &forum_rows {
            let seq = row["seq"].as_u64().unwrap();
            let e = entry(repo, seq);
            for k in [
                "kind",
                "actor",
                "causal_parent",
                "payload_hash",
                "entry_hash",
            ] {
                assert_eq!(e[k], row[k], "seq {seq} {k}");
            }
            assert_eq!(body(repo, seq), row["payload"], "seq {seq}");
        }
    });
}

#[test]
fn three_escalated_fix_runs_make_one_vocabulary_gap_under_the_third_route() {
    use crate::route_ladder::{UNPLACED, fix, model};
    use crate::work_run::{clean, entries, setup};
    let repo = Repo::new("sha1");
    setup(&repo);
    let m = model(
        &repo,
        r#"{"agent": "tests", "confidence": 0.8, "reason": "a test"}"#,
    );
    for i in 0..3 {
        let o = fix(&repo, &m, UNPLACED, &[]);
        assert!(
            o.status.success(),
            "run {i}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let all = entries(&repo);
    let seqs = |kind: &str| -> Vec<u64> {
        let mut v: Vec<u64> = all
            .iter()
            .filter(|e| e["kind"] == kind)
            .map(|e| e["seq"].as_u64().unwrap())
            .collect();
        v.sort();
        v
    };
    let routes = seqs("route");
    assert_eq!(routes.len(), 3, "{all:?}");
    let gaps = seqs("vocabulary_gap");
    assert_eq!(gaps.len(), 1, "{all:?}");
    let gap = entry(&repo, gaps[0]);
    assert_eq!(gap["causal_parent"], routes[2]);
    assert_eq!(gaps[0], routes[2] + 1, "the gap follows the third route");
    let b = body(&repo, gaps[0]);
    assert_eq!(b["consecutive_escalations"], 3);
    assert_eq!(
        (b["first_seq"].as_u64(), b["last_seq"].as_u64()),
        (Some(routes[0]), Some(routes[2]))
    );
    let ceiling = routes
        .iter()
        .map(|s| body(&repo, *s)["confidence"].as_f64().unwrap())
        .fold(f64::NEG_INFINITY, f64::max);
    assert_eq!(b["confidence_ceiling"].as_f64(), Some(ceiling));
    // The classifier still answered the third run, under its route.
    let third = seqs("classification")[2];
    assert_eq!(entry(&repo, third)["causal_parent"], routes[2]);
    clean(&repo);
}
