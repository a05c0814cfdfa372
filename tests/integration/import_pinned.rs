//! The import's output pinned: a generated Forum directory, its rows
//! written in every shape Forum's reader accepts (Forum's own spacing, compact, keys out of
//! order, escaped and raw non-ASCII, integer timestamps, repeated and missing bodies, floats,
//! NaN), imports into exactly the tip commit the import produced before it was made faster, on
//! every repository format; and a bad row in the middle of a long directory stops the import
//! with one line naming the row, leaving the ledger ref unmoved and no file behind.

use std::fmt::Write as _;
use std::path::Path;

use git_forum::ledger::canonical::{self, Value};
use git_forum::ledger::{Entry, NewEntry};

use crate::common::{self, LEDGER_REF, Repo, one_line_error};

/// Entries in the pinned directory: enough for many of the import's batches.
const N: usize = 3000;

/// The body of entry `i`: a rotation of shapes, every ninth a repeat of an earlier body.
fn body_text(i: usize) -> String {
    let j = if i % 9 == 8 { i - 8 } else { i };
    match j % 8 {
        0 => format!("{{\"text\": \"entry {j}\", \"i\": {j}}}"),
        1 => format!("{{\"z\": [1, 2.5, {{\"b\": null, \"a\": true}}], \"n\": {j}}}"),
        2 => format!(
            "{{\"caf\u{e9}\": \"\u{65e5}\u{672c} {j}\", \"q\": \"\\\"quoted\\\" \\\\ \\n\"}}"
        ),
        3 => format!("{{\"f\": 1e20, \"g\": 1.5e-7, \"h\": -0.0, \"k\": {j}.25}}"),
        4 => format!("{{\"big\": 123456789012345678901234567890, \"j\": {j}, \"nan\": NaN}}"),
        5 => format!("{{\"e\": \"\\u00e9\\ud83d\\ude00\\u0001 {j}\", \"emoji\": \"\u{1f600}\"}}"),
        6 => format!("{{\"nested\": {{\"deep\": {{\"deeper\": [[], {{}}, \"{j}\"]}}}}}}"),
        _ => format!("{{\"dup\": 1, \"dup\": {j}, \"inf\": -Infinity}}"),
    }
}

/// The entry row of `e` in one of the shapes Forum's reader takes.
fn entry_row(i: usize, e: &Entry) -> String {
    let v = e.to_value();
    match i % 10 {
        // Compact, sorted, ASCII-escaped.
        3 => v.canonical(),
        // Keys in another order, extra spaces.
        5 => {
            let Value::Object(mut members) = v else {
                unreachable!()
            };
            members.reverse();
            let mut out = String::from("{ ");
            for (n, (k, v)) in members.iter().enumerate() {
                if n > 0 {
                    out.push_str(" ,  ");
                }
                let _ = write!(out, "\"{k}\" :\t{}", v.python_dumps());
            }
            out.push_str(" }");
            out
        }
        // A whole-second timestamp written as an integer.
        7 if e.ts.fract() == 0.0 => v.python_dumps().replace(
            &format!("\"ts\": {:.1}", e.ts),
            &format!("\"ts\": {}", e.ts as i64),
        ),
        _ => v.python_dumps(),
    }
}

/// Writes the pinned directory; `missing` bodies (by entry index) get no payload row.
fn write_pinned(dir: &Path, missing: &[usize]) {
    std::fs::create_dir_all(dir).unwrap();
    let mut entries = String::new();
    let mut payloads = String::new();
    let mut head: Option<Entry> = None;
    let mut seen = std::collections::HashSet::new();
    for i in 0..N {
        let payload = canonical::parse(&body_text(i)).unwrap();
        let (actor, kind) = match i % 5 {
            0 => ("bench", "note"),
            1 => ("zo\u{eb} <z@x>", "request"),
            2 => ("router", "route_frame"),
            3 => ("  spaced  ", "note"),
            _ => ("agent-\u{65e5}", "result"),
        };
        let new = NewEntry {
            actor: actor.into(),
            kind: kind.into(),
            causal_parent: (i % 4 == 2).then_some((i / 2) as i64),
            payload: payload.clone(),
            ts: match i % 3 {
                0 => 1_700_000_000.0 + i as f64,
                1 => 1_700_000_000.125 + i as f64,
                _ => 0.5 + i as f64 / 7.0,
            },
        };
        let body = new.validate().unwrap();
        let ph = git_forum::ledger::hash::sha256_hex(body.as_bytes());
        let e = Entry::next(head.as_ref(), &new, ph.clone());
        if !missing.contains(&i) && seen.insert(ph.clone()) {
            let row = match i % 6 {
                // The body before the hash, compact.
                4 => Value::Object(vec![
                    ("body".into(), payload),
                    ("hash".into(), Value::str(&ph)),
                ])
                .canonical(),
                _ => Value::Object(vec![
                    ("hash".into(), Value::str(&ph)),
                    ("body".into(), payload),
                ])
                .python_dumps(),
            };
            payloads.push_str(&row);
            payloads.push('\n');
            // Now and then the same row again (the first one wins).
            if i % 50 == 0 {
                payloads.push_str(&row);
                payloads.push('\n');
            }
        }
        entries.push_str(&entry_row(i, &e));
        entries.push('\n');
        head = Some(e);
    }
    std::fs::write(dir.join("payloads.jsonl"), payloads).unwrap();
    std::fs::write(dir.join("entries.jsonl"), entries).unwrap();
}

/// The tip the import wrote before it was made faster, by object format: (every body
/// present, bodies of entries 16 and 2999 missing).
fn pinned_tip(kind: &str) -> (&'static str, &'static str) {
    match kind {
        "sha256" => (
            "e8ce4e15f1144cd283d40ecfe667e04b7055a46ef3db95bb08638ca8d23f580f",
            "e38a92304d5649d9da19fd8c5cb82d97fec3551f778f826587eb53021631c35f",
        ),
        _ => (
            "13ccdef4d5bcb18d83e6c971073cd3788a2e3830",
            "a8ff1d7cb2f913376f8c897961022c028994b685",
        ),
    }
}

#[test]
fn an_import_writes_the_pinned_commits_on_every_format() {
    let work = tempfile::tempdir().unwrap();
    let full = work.path().join("full");
    write_pinned(&full, &[]);
    let missing = work.path().join("missing");
    write_pinned(&missing, &[16, 2999]);
    for kind in common::FORMATS {
        let (want_full, want_missing) = pinned_tip(kind);
        let repo = Repo::new(kind);
        let out = repo.forum_json(&["import", full.to_str().unwrap()]);
        assert_eq!(out["entries"], N, "{kind}: {out}");
        assert_eq!(out["commit"].as_str(), Some(want_full), "{kind}: {out}");
        assert_eq!(repo.git_ok(&["rev-parse", LEDGER_REF]), want_full, "{kind}");
        let v = repo.forum_json(&["verify", "--deep"]);
        assert_eq!(v["ok"], true, "{kind}: {v}");
        assert_eq!(v["checkpoint"], out["checkpoint"], "{kind}");
        repo.fsck();
        // Bodies missing: the entries keep their hashes, and their commits hold the empty tree.
        let repo = Repo::new(kind);
        let out = repo.forum_json(&["import", missing.to_str().unwrap()]);
        assert_eq!(out["absent_bodies"], 2, "{kind}: {out}");
        assert_eq!(out["commit"].as_str(), Some(want_missing), "{kind}: {out}");
        repo.fsck();
    }
}

/// Replaces line `row` (0-based) of `file` with what `f` makes of it.
fn edit_row(file: &Path, row: usize, f: impl Fn(&str) -> String) {
    let text = std::fs::read_to_string(file).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[row] = f(&lines[row]);
    std::fs::write(file, lines.join("\n") + "\n").unwrap();
}

#[test]
fn a_bad_row_in_the_middle_stops_the_import_and_moves_no_ref() {
    let work = tempfile::tempdir().unwrap();
    let good = work.path().join("good");
    write_pinned(&good, &[]);
    let copy = |name: &str| {
        let d = work.path().join(name);
        std::fs::create_dir(&d).unwrap();
        for f in ["entries.jsonl", "payloads.jsonl"] {
            std::fs::copy(good.join(f), d.join(f)).unwrap();
        }
        d
    };
    // Each case: the directory's damage, and what the one-line error names.
    type Damage = fn(&Path);
    let cases: [(&str, Damage, &str); 4] = [
        (
            "field",
            |d| {
                edit_row(&d.join("entries.jsonl"), 1500, |l| {
                    l.replace("\"seq\"", "\"Seq\"")
                })
            },
            "entries.jsonl: row 1500: missing field \"seq\"",
        ),
        (
            "edited",
            |d| {
                edit_row(&d.join("entries.jsonl"), 1501, |l| {
                    l.replace("\"actor\": \"", "\"actor\": \"x")
                })
            },
            "does not verify at row 1501: entry edited",
        ),
        (
            "json",
            |d| edit_row(&d.join("entries.jsonl"), 1502, |l| l.replace('}', "")),
            "entries.jsonl: corrupt line at row 1502",
        ),
        (
            "body",
            |d| {
                // The one body holding this text (entry 1608's) changed by a digit.
                let f = d.join("payloads.jsonl");
                let text = std::fs::read_to_string(&f).unwrap();
                assert_eq!(text.matches("\"entry 1608\"").count(), 1);
                std::fs::write(&f, text.replace("\"entry 1608\"", "\"entry 1609\"")).unwrap();
            },
            "does not hash to its payload_hash; nothing was imported",
        ),
    ];
    for kind in common::FORMATS {
        let repo = Repo::new(kind);
        // A ledger next to the one imported, whose ref must not move either.
        repo.append("a", "note", "{}");
        let before = repo.snapshot();
        for (name, damage, needle) in cases {
            let d = copy(&format!("{kind}-{name}"));
            damage(&d);
            let o = repo
                .forum()
                .args(["--ledger", "imported", "import", d.to_str().unwrap()])
                .output()
                .unwrap();
            one_line_error(&o, needle);
            assert_eq!(repo.snapshot(), before, "{kind} {name}: something moved");
            let left: Vec<String> = std::fs::read_dir(repo.git_dir().join("objects/pack"))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
                .filter(|n| n.contains("tmp_") || n.ends_with(".keep"))
                .collect();
            assert!(left.is_empty(), "{kind} {name}: left behind {left:?}");
            assert!(
                repo.git(&["rev-parse", "--verify", "-q", "refs/forum/ledgers/imported"])
                    .stdout
                    .is_empty(),
                "{kind} {name}: the imported ledger's ref exists"
            );
        }
        repo.fsck();
    }
}
