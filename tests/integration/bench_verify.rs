//! `git forum bench-deep-verify` at a tiny size: Forum's `forum.deep-verify-benchmark/v1`
//! receipt with Forum's fields in Forum's order, every case of the matrix (the wal storage's
//! redacted ones listed as skipped), every check passing, `--out` holding the same receipt,
//! the caller's repository untouched, and bad lists as one line with exit 2. Times are read
//! only for their shape (samples, min <= mean <= max), never compared with a bound.

use serde_json::Value as J;

use crate::common::{Repo, one_line_error};

const CASE_KEYS: [&str; 12] = [
    "entry_count",
    "payload_body_bytes",
    "storage_mode",
    "fsync_each",
    "redaction_ratio",
    "unique_payloads",
    "payloads_present",
    "payloads_redacted",
    "build",
    "verify_chain",
    "verify_payloads",
    "verify_deep",
];

/// The keys of a JSON object in the order the text has them.
fn ordered_keys(text: &str, depth: usize) -> Vec<String> {
    let pad = " ".repeat(depth * 2);
    text.lines()
        .filter_map(|l| l.strip_prefix(&pad))
        .filter(|l| l.starts_with('"'))
        .filter_map(|l| l.split_once("\": ").map(|(k, _)| k[1..].to_string()))
        .collect()
}

#[test]
fn a_tiny_matrix_gives_forums_receipt() {
    let repo = Repo::new("sha1");
    let args = [
        "bench-deep-verify",
        "--entries",
        "1,3",
        "--payload-bytes",
        "40",
        "--storage",
        "memory",
        "--storage",
        "packed",
        "--storage",
        "loose",
        "--storage",
        "wal",
        "--redaction-ratio",
        "0,1",
        "--warmups",
        "0",
        "--repeats",
        "2",
        "--json",
        "--out",
        "receipt.json",
    ];
    let text = repo.forum_ok(&args);
    let r: J = serde_json::from_str(&text).unwrap();
    assert_eq!(
        ordered_keys(&text, 1),
        [
            "schema",
            "generated_at",
            "git_forum",
            "platform",
            "parameters",
            "cases",
            "skipped"
        ]
    );
    assert_eq!(r["schema"], "forum.deep-verify-benchmark/v1");
    let stamp = r["generated_at"].as_str().unwrap();
    assert!(
        stamp.len() == 20 && stamp.ends_with('Z') && &stamp[10..11] == "T",
        "{stamp}"
    );
    let p = &r["parameters"];
    assert_eq!(p["entry_counts"], serde_json::json!([1, 3]));
    assert_eq!(p["payload_body_bytes"], serde_json::json!([40]));
    assert_eq!(
        p["storage_modes"],
        serde_json::json!(["memory", "packed", "loose", "wal"])
    );
    assert_eq!(p["redaction_ratios"], serde_json::json!([0.0, 1.0]));
    assert_eq!((&p["repeats"], &p["warmups"]), (&J::from(2), &J::from(0)));
    let cases = r["cases"].as_array().unwrap();
    // 2 counts x 4 storages x 2 ratios, but wal cannot hold a redacted body.
    assert_eq!(cases.len(), 14);
    let skipped = r["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 2);
    assert!(
        skipped
            .iter()
            .all(|s| s["storage_mode"] == "wal" && s["redaction_ratio"] == 1.0)
    );
    for c in cases {
        let keys: Vec<&str> = c.as_object().unwrap().keys().map(String::as_str).collect();
        let mut want = CASE_KEYS.to_vec();
        want.sort();
        assert_eq!(keys, want, "{c}");
        let n = c["entry_count"].as_u64().unwrap();
        assert_eq!(c["unique_payloads"], n, "{c}");
        let redacted = if c["redaction_ratio"] == 1.0 { n } else { 0 };
        assert_eq!(c["payloads_redacted"], redacted, "{c}");
        assert_eq!(c["payloads_present"], n - redacted, "{c}");
        let fsync = match c["storage_mode"].as_str().unwrap() {
            "memory" => J::Null,
            "wal" => J::Bool(true),
            _ => J::Bool(false),
        };
        assert_eq!(c["fsync_each"], fsync, "{c}");
        assert!(c["build"]["ms"].as_f64().unwrap() >= 0.0);
        for check in ["verify_chain", "verify_payloads", "verify_deep"] {
            let t = &c[check];
            assert_eq!(t["ok"], true, "{check}: {c}");
            assert_eq!(t["samples_ms"].as_array().unwrap().len(), 2);
            let (min, mean, max) = (
                t["min_ms"].as_f64().unwrap(),
                t["mean_ms"].as_f64().unwrap(),
                t["max_ms"].as_f64().unwrap(),
            );
            assert!(min <= mean && mean <= max, "{t}");
        }
    }
    // The first case's own key order is Forum's.
    let first_case: Vec<String> = ordered_keys(&text, 3).into_iter().take(12).collect();
    assert_eq!(first_case, CASE_KEYS);
    let saved = std::fs::read_to_string(repo.path().join("receipt.json")).unwrap();
    assert_eq!(saved, text);
    // The caller's repository holds no ledger: each case had its own temporary one.
    assert_eq!(repo.git_ok(&["for-each-ref", "refs/forum"]), "");
    // The table: one row per timed case, one line per skipped one.
    let table = repo.forum_ok(&[
        "bench-deep-verify",
        "--entries",
        "2",
        "--payload-bytes",
        "30",
        "--redaction-ratio",
        "0.5",
        "--repeats",
        "1",
    ]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines[1], "schema: forum.deep-verify-benchmark/v1");
    assert!(
        lines[4].contains("build_ms") && lines[4].contains("deep_ms"),
        "{table}"
    );
    assert_eq!(lines.len(), 6, "{table}");
    assert!(
        lines[5].contains("memory") && lines[5].contains("0.50"),
        "{table}"
    );
}

#[test]
fn bad_lists_and_flags_are_one_line_with_exit_2() {
    let repo = Repo::new("sha1");
    for (args, needle) in [
        (&["--entries", "x"][..], "--entries takes"),
        (&["--entries", ","][..], "at least one number"),
        (&["--payload-bytes", "-5"][..], "--payload-bytes takes"),
        (&["--redaction-ratio", "2"][..], "from 0 to 1"),
        (&["--storage", "file-sync"][..], "Forum's storages"),
        (&["--storage", "disk"][..], "not a storage"),
        (&["--repeats", "0"][..], "--repeats must be 1 or more"),
        (&["--warmups", "-1"][..], "--warmups takes"),
        (
            &["--entries", "0", "--storage", "packed"][..],
            "--entries 0",
        ),
        (&["--entries", "2000000"][..], "over the limit"),
        (&["--out", "."][..], "is a directory"),
    ] {
        let o = repo
            .forum()
            .arg("bench-deep-verify")
            .args(args)
            .output()
            .unwrap();
        one_line_error(&o, needle);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
    }
}
