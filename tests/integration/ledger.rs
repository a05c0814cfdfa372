//! The git ledger end to end through the real binary and the real git: storage shape, tamper
//! classes, gc, bad input, concurrency and crashes.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value as J;

use crate::common::{
    FORMATS, Repo, commit_texts, move_ref_quietly, rechain, set_parent, write_commit,
};

const REF: &str = crate::common::LEDGER_REF;

/// The payload of the i-th entry of a seeded ledger.
fn seed_payload(i: usize) -> String {
    format!(r#"{{"i":{i},"text":"entry {i}","ok":true}}"#)
}

/// Appends `payloads` to `ledger` through the CLI, each entry caused by the one before.
fn append_chain(repo: &Repo, ledger: &str, payloads: impl IntoIterator<Item = String>) {
    for (i, payload) in payloads.into_iter().enumerate() {
        let parent = i.checked_sub(1).map(|p| p.to_string());
        let mut args = vec![
            "--ledger",
            ledger,
            "append",
            "--actor",
            "agent",
            "--kind",
            "note",
            "--payload",
            payload.as_str(),
        ];
        if let Some(p) = &parent {
            args.extend(["--parent", p.as_str()]);
        }
        repo.forum_ok(&args);
    }
}

fn seeded(format: &str, n: usize) -> Repo {
    let repo = Repo::new(format);
    append_chain(&repo, "main", (0..n).map(seed_payload));
    repo
}

fn verify(repo: &Repo, deep: bool) -> J {
    let mut args = vec!["verify"];
    if deep {
        args.push("--deep");
    }
    repo.forum_json(&args)
}

/// Commit ids root first.
fn chain(repo: &Repo) -> Vec<String> {
    let out = repo.git_ok(&["rev-list", "--first-parent", "--reverse", REF]);
    out.lines().map(str::to_string).collect()
}

fn cat(repo: &Repo, id: &str) -> String {
    repo.git_ok(&["cat-file", "commit", id]) + "\n"
}

fn assert_fails(r: &J, code: &str, seq: u64) {
    assert_eq!(r["ok"], false, "{r}");
    assert_eq!(r["code"], code, "{r}");
    assert_eq!(r["first_bad_seq"], seq, "{r}");
    assert!(r["problem"].as_str().is_some_and(|p| !p.is_empty()), "{r}");
}

#[test]
fn storage_shape_is_readable_and_fsck_clean_on_both_formats() {
    for format in FORMATS {
        let repo = seeded(format, 5);
        repo.fsck();
        let log = repo.git_ok(&["log", "--format=%s|%an|%cn|%at", REF]);
        let first = log.lines().next().unwrap();
        assert_eq!(first, "note #4 by agent|agent|git-forum|1000", "{format}");
        let tree = repo.git_ok(&["ls-tree", REF]);
        assert!(tree.ends_with("\tpayload.json"), "{tree}");
        let body = repo.git_ok(&["show", &format!("{REF}:payload.json")]);
        assert_eq!(body, r#"{"i":4,"ok":true,"text":"entry 4"}"#);
        let msg = repo.git_ok(&["log", "-1", "--format=%b", REF]);
        assert!(
            msg.contains("\"entry_hash\":") && msg.contains("\"seq\":4"),
            "{msg}"
        );
        let reflog = repo.git_ok(&["reflog", "show", REF]);
        assert_eq!(reflog.lines().count(), 5, "{reflog}");
        assert_eq!(verify(&repo, true)["ok"], true);
    }
}

#[test]
fn same_ledger_same_commit_ids_anywhere() {
    let a = seeded("sha1", 3);
    let b = seeded("sha1", 3);
    assert_eq!(chain(&a), chain(&b));
}

/// Deep verify reads a body that many entries share once; every entry is still held to its own
/// payload hash, whichever of them the check meets first.
#[test]
fn a_shared_body_is_checked_against_every_entry_that_names_it() {
    for format in FORMATS {
        // Bodies repeat: 0, 1, 0, 1, ... all verify.
        let repo = Repo::new(format);
        append_chain(&repo, "main", (0..8).map(|i| seed_payload(i % 2)));
        let r = verify(&repo, true);
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(r["entries"], 8);

        // Entry 1 made to point at entry 3's tree (a body already checked for entry 3, which the
        // walk from the tip meets first): deep verify still names entry 1.
        let repo = seeded(format, 6);
        let mut t = commit_texts(&repo, REF);
        let tree_of = |text: &str| text.lines().next().unwrap().to_string();
        let (old, new) = (tree_of(&t[1]), tree_of(&t[3]));
        t[1] = t[1].replacen(&old, &new, 1);
        rechain(&repo, &t);
        assert_eq!(verify(&repo, false)["ok"], true);
        assert_fails(&verify(&repo, true), "body-edited", 1);

        // And the other way round: entry 3 pointed at entry 1's tree.
        let repo = seeded(format, 6);
        let mut t = commit_texts(&repo, REF);
        let (old, new) = (tree_of(&t[3]), tree_of(&t[1]));
        t[3] = t[3].replacen(&old, &new, 1);
        rechain(&repo, &t);
        assert_fails(&verify(&repo, true), "body-edited", 3);
    }
}

#[test]
fn tamper_classes_each_have_their_own_message() {
    let mut problems = HashSet::new();
    let mut record = |r: &J| {
        problems.insert(r["problem"].as_str().unwrap().to_string());
    };
    for format in FORMATS {
        // An edited body: the chain verifies (as in Forum); deep verify names the body.
        let repo = seeded(format, 6);
        let mut t = commit_texts(&repo, REF);
        let blob = repo.git_in(
            &["hash-object", "-w", "--stdin"],
            br#"{"i":3,"ok":false,"text":"entry 3"}"#,
        );
        let tree = repo.git_in(
            &["mktree"],
            format!("100644 blob {blob}\tpayload.json\n").as_bytes(),
        );
        let old_tree = t[3].lines().next().unwrap().to_string();
        t[3] = t[3].replacen(&old_tree, &format!("tree {tree}"), 1);
        rechain(&repo, &t);
        assert_eq!(verify(&repo, false)["ok"], true);
        let r = verify(&repo, true);
        assert_fails(&r, "body-edited", 3);
        record(&r);

        // A body removed without a redaction entry naming it.
        let repo = seeded(format, 6);
        let mut t = commit_texts(&repo, REF);
        let empty = repo.git_in(&["mktree"], b"");
        let old_tree = t[3].lines().next().unwrap().to_string();
        t[3] = t[3].replacen(&old_tree, &format!("tree {empty}"), 1);
        rechain(&repo, &t);
        assert_eq!(verify(&repo, false)["ok"], true);
        let r = verify(&repo, true);
        assert_fails(&r, "body-missing", 3);
        record(&r);

        // An edited entry (actor changed, entry_hash not recomputed).
        let repo = seeded(format, 6);
        let mut t = commit_texts(&repo, REF);
        t[3] = t[3].replace("\"actor\":\"agent\"", "\"actor\":\"mallory\"");
        rechain(&repo, &t);
        let r = verify(&repo, false);
        assert_fails(&r, "entry-edited", 3);
        record(&r);

        // Two entries swapped.
        let repo = seeded(format, 6);
        let mut t = commit_texts(&repo, REF);
        t.swap(2, 3);
        rechain(&repo, &t);
        let r = verify(&repo, false);
        assert_fails(&r, "entries-swapped", 2);
        record(&r);

        // An entry deleted from the middle.
        let repo = seeded(format, 6);
        let mut t = commit_texts(&repo, REF);
        t.remove(4);
        rechain(&repo, &t);
        let r = verify(&repo, false);
        assert_fails(&r, "entries-deleted", 4);
        record(&r);

        // A commit whose parent was changed to another ledger's commit for the same seq.
        let repo = seeded(format, 6);
        append_chain(
            &repo,
            "other",
            [
                seed_payload(0),
                seed_payload(1),
                r#"{"forged":true}"#.to_string(),
            ],
        );
        let other_tip = repo.git_ok(&["rev-parse", "refs/forum/ledgers/other"]);
        let t = commit_texts(&repo, REF);
        let mut parent = Some(other_tip);
        let mut last = String::new();
        for text in &t[3..] {
            last = write_commit(&repo, &set_parent(text, parent.as_deref()));
            parent = Some(last.clone());
        }
        move_ref_quietly(&repo, &last);
        let r = verify(&repo, false);
        assert_fails(&r, "parent-changed", 3);
        record(&r);

        // A commit altered without touching the entry (its date changed).
        let repo = seeded(format, 6);
        let mut t = commit_texts(&repo, REF);
        t[2] = t[2].replace(" 1000 +0000", " 1001 +0000");
        rechain(&repo, &t);
        let r = verify(&repo, false);
        assert_fails(&r, "commit-altered", 2);
        record(&r);

        // A ref rewound to an ancestor: the reflog shows it.
        let repo = seeded(format, 6);
        let ids = chain(&repo);
        repo.git_ok(&["update-ref", REF, &ids[3]]);
        let r = verify(&repo, false);
        assert_fails(&r, "rewound", 4);
        record(&r);

        // A ref rewritten onto another chain while its reflog survived.
        let repo = seeded(format, 6);
        let mut t = commit_texts(&repo, REF);
        t[5] = t[5].replace(" 1000 +0000", " 1000 +0100");
        let ids = {
            let mut parent = Some(chain(&repo)[4].clone());
            let mut out = Vec::new();
            for text in &t[5..] {
                let id = write_commit(&repo, &set_parent(text, parent.as_deref()));
                parent = Some(id.clone());
                out.push(id);
            }
            out
        };
        repo.git_ok(&["update-ref", REF, ids.last().unwrap()]);
        let r = verify(&repo, false);
        assert_eq!(r["ok"], false, "{r}");
        record(&r);

        // A truncation that the reflog does not show, caught by a recorded checkpoint.
        let repo = seeded(format, 6);
        repo.forum_ok(&["checkpoint"]);
        let ids = chain(&repo);
        move_ref_quietly(&repo, &ids[2]);
        let r = verify(&repo, false);
        assert_fails(&r, "truncated", 3);
        record(&r);

        // A clean truncation with no witness at all verifies, and says so.
        let repo = seeded(format, 6);
        let ids = chain(&repo);
        move_ref_quietly(&repo, &ids[2]);
        let r = verify(&repo, false);
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(r["entries"], 3);
        assert!(
            r["notes"][0]
                .as_str()
                .unwrap()
                .contains("truncated tail cannot be detected"),
            "{r}"
        );

        // A missing object (once the write-ahead log, which would otherwise put it back, is
        // gone: see storage::appenders_beside_gc...).
        let repo = seeded(format, 6);
        crate::storage::drop_log(&repo);
        let ids = chain(&repo);
        let hex = &ids[2];
        std::fs::remove_file(
            repo.git_dir()
                .join("objects")
                .join(&hex[..2])
                .join(&hex[2..]),
        )
        .unwrap();
        let r = verify(&repo, false);
        assert_fails(&r, "missing-object", 2);
        record(&r);

        // An empty ref file and a garbage ref file (files ref storage only: reftable keeps no
        // ref file to damage, and git refuses to store such a value).
        let ref_files: &[(&str, &str)] = if format == "reftable" {
            &[]
        } else {
            &[("", "empty"), ("not a hash\n", "garbage")]
        };
        for &(content, label) in ref_files {
            let repo = seeded(format, 3);
            std::fs::write(repo.git_dir().join(REF), content).unwrap();
            let r = verify(&repo, false);
            assert_eq!(r["ok"], false, "{label}: {r}");
            assert_eq!(r["code"], "broken-ref", "{label}: {r}");
            record(&r);
            let o = repo
                .forum()
                .args(["append", "--actor", "a", "--kind", "k", "--payload", "1"])
                .output()
                .unwrap();
            assert!(!o.status.success(), "append on a broken ref must fail");
            assert_eq!(
                std::fs::read_to_string(repo.git_dir().join(REF)).unwrap(),
                content,
                "nothing was written"
            );
        }
    }
    // Distinct messages per class (the two broken-ref messages differ only in their wording
    // of empty vs garbage).
    assert!(problems.len() >= 12, "{problems:#?}");
}

/// Note `i`, its body `{"i": i, "text": words}`.
fn note(i: usize, words: &str) -> git_forum::ledger::NewEntry {
    git_forum::ledger::NewEntry {
        actor: "agent".into(),
        kind: "note".into(),
        causal_parent: None,
        payload: git_forum::ledger::canonical::parse(&format!(r#"{{"i":{i},"text":"{words}"}}"#))
            .unwrap(),
        ts: 1000.0 + i as f64,
    }
}

/// A packed batch ledger of 40 entries with bodies long enough to be compressed.
fn packed_batch(format: &str) -> Repo {
    let repo = Repo::new(format);
    let mut store =
        git_forum::store::git::GitStore::open(repo.path(), "main", Default::default()).unwrap();
    let words = "words of a body ".repeat(8);
    let batch: Vec<_> = (0..40).map(|i| note(i, &words)).collect();
    store.append_entries(&batch).unwrap();
    repo
}

/// Flips a byte in the middle of object `id`'s compressed stream in the repository's one pack.
fn damage_in_pack(repo: &Repo, id: &str) {
    let pack_dir = repo.git_dir().join("objects/pack");
    let idx = std::fs::read_dir(&pack_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "idx"))
        .unwrap();
    let listing = repo.git_ok(&["verify-pack", "-v", idx.to_str().unwrap()]);
    let line = listing
        .lines()
        .find(|l| l.starts_with(id))
        .unwrap_or_else(|| panic!("{id} not in {listing}"));
    // id type size size-in-pack offset
    let cols: Vec<&str> = line.split_whitespace().collect();
    let (in_pack, offset): (usize, usize) = (cols[3].parse().unwrap(), cols[4].parse().unwrap());
    let pack = idx.with_extension("pack");
    let mut bytes = std::fs::read(&pack).unwrap();
    bytes[offset + in_pack / 2] ^= 0x55;
    let mut perms = std::fs::metadata(&pack).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&pack, perms).unwrap();
    std::fs::write(&pack, &bytes).unwrap();
}

/// Verify reads whole objects straight from the pack a batch wrote; a damaged pack entry is
/// named, with the seq it breaks, rather than read as something else or ending verify with an
/// error.
#[test]
fn a_damaged_pack_entry_is_named_with_its_seq() {
    for format in FORMATS {
        let repo = packed_batch(format);
        let r = verify(&repo, true);
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(r["entries"], 40);

        // The body of entry 7: deep verify names it; the chain (commits only) still verifies.
        let blob = repo.git_ok(&["rev-parse", &format!("{REF}~32:payload.json")]);
        damage_in_pack(&repo, blob.trim());
        let r = verify(&repo, true);
        assert_fails(&r, "corrupt-object", 7);
        assert!(r["problem"].as_str().unwrap().contains(blob.trim()), "{r}");
        assert_eq!(verify(&repo, false)["ok"], true);

        // The commit of entry 20: even the shallow check stops there.
        let repo = packed_batch(format);
        let commit = repo.git_ok(&["rev-parse", &format!("{REF}~19")]);
        damage_in_pack(&repo, commit.trim());
        let r = verify(&repo, false);
        assert_fails(&r, "corrupt-object", 20);
        assert!(
            r["problem"].as_str().unwrap().contains(commit.trim()),
            "{r}"
        );
    }
}

#[test]
fn survives_gc_and_aggressive_gc() {
    for format in FORMATS {
        let repo = seeded(format, 8);
        repo.git_ok(&["gc", "-q"]);
        assert_eq!(verify(&repo, true)["ok"], true);
        repo.git_ok(&["gc", "-q", "--aggressive", "--prune=now"]);
        assert_eq!(verify(&repo, true)["ok"], true);
        repo.append("agent", "note", "{\"after\":\"gc\"}");
        let r = verify(&repo, true);
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(r["entries"], 9);
        repo.fsck();
        // show and replay through the index after gc moved everything into a pack.
        let shown = repo.forum_json(&["show", "2", "--payload"]);
        assert_eq!(shown["payload"]["i"], 2);
        let replayed = repo.forum_json(&["replay", "3"]);
        assert_eq!(replayed["entries"].as_array().unwrap().len(), 4);
    }
}

#[test]
fn reads_and_why() {
    let repo = seeded("sha1", 5);
    let log = repo.forum_json(&["log", "--limit", "2"]);
    assert_eq!(log.as_array().unwrap().len(), 2);
    assert_eq!(log[0]["seq"], 4);
    let why = repo.forum_json(&["why", "3"]);
    assert_eq!(why["seq"], 3);
    let seqs: Vec<u64> = why["chain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, vec![0, 1, 2, 3]);
    let shown = repo.forum_json(&["show", "4", "--payload"]);
    assert_eq!(shown["payload"]["text"], "entry 4");
    assert_eq!(shown["entry"]["seq"], 4);
    let cp = repo.forum_json(&["checkpoint"]);
    assert_eq!(cp["size"], 5);
    let text = repo.forum_ok(&["log"]);
    assert_eq!(text.lines().count(), 5);
    // Numbers keep their identity: 1 and 1.0 are different payloads.
    let a = repo.append("a", "k", "1");
    let b = repo.append("a", "k", "1.0");
    assert_ne!(
        repo.forum_json(&["show", &a["seq"].to_string()])["payload_hash"],
        repo.forum_json(&["show", &b["seq"].to_string()])["payload_hash"]
    );
    let big = repo.append("a", "k", "123456789012345678901234567890");
    let shown = repo.forum_ok(&["show", &big["seq"].to_string(), "--payload"]);
    assert!(shown.contains("123456789012345678901234567890"));
}

fn assert_one_line_error(o: &std::process::Output, needle: &str) {
    assert!(!o.status.success(), "expected failure");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "one line expected: {err}"
    );
    assert!(err.contains(needle), "{needle:?} not in {err}");
}

#[test]
fn bad_input_gets_one_clear_line_and_changes_nothing() {
    let repo = seeded("sha1", 2);
    let before = repo.snapshot();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--ledger", "nope", "log"], "no ledger named \"nope\""),
        (vec!["--ledger", "nope", "verify"], "no ledger named"),
        (vec!["--ledger", "nope", "show", "0"], "no ledger named"),
        (vec!["show", "9"], "no entry at seq 9"),
        (vec!["replay", "9"], "no entry at seq 9"),
        (vec!["why", "7"], "no entry at seq 7"),
        (
            vec![
                "append",
                "--actor",
                "a",
                "--kind",
                "k",
                "--payload",
                "{nope",
            ],
            "not valid JSON",
        ),
        (
            vec![
                "append",
                "--actor",
                "a\u{7}b",
                "--kind",
                "k",
                "--payload",
                "1",
            ],
            "control character",
        ),
        (
            vec!["append", "--actor", "a", "--kind", "k\nx", "--payload", "1"],
            "control character",
        ),
        (
            vec![
                "--ledger",
                "bad..name",
                "append",
                "--actor",
                "a",
                "--kind",
                "k",
                "--payload",
                "1",
            ],
            "invalid ledger name",
        ),
        (vec!["--ledger=-x", "log"], "invalid ledger name"),
        (vec!["--ledger", "a.lock", "log"], "invalid ledger name"),
        (
            vec![
                "append",
                "--actor",
                "a",
                "--kind",
                "k",
                "--payload-file",
                "/nonexistent/file",
            ],
            "cannot read payload file",
        ),
        (
            vec![
                "append",
                "--actor",
                "a",
                "--kind",
                "k",
                "--payload",
                "1",
                "--ts=-5",
            ],
            "timestamp",
        ),
    ];
    for (args, needle) in cases {
        let o = repo.forum().args(&args).output().unwrap();
        assert_one_line_error(&o, needle);
        assert_eq!(repo.snapshot(), before, "{args:?} changed the repository");
    }
    // Usage errors exit 2.
    let o = repo
        .forum()
        .args(["append", "--actor", "a", "--kind", "k", "--payload", "{"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    // A payload over the size cap.
    let big = repo.path().join("big.json");
    std::fs::write(&big, format!("\"{}\"", "x".repeat(17 * 1024 * 1024))).unwrap();
    let o = repo
        .forum()
        .args([
            "append",
            "--actor",
            "a",
            "--kind",
            "k",
            "--payload-file",
            big.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_one_line_error(&o, "byte limit");
    assert_eq!(repo.snapshot(), before);
    // Outside a repository.
    let outside = tempfile::tempdir().unwrap();
    let o = repo
        .forum()
        .current_dir(outside.path())
        .env("GIT_CEILING_DIRECTORIES", outside.path().parent().unwrap())
        .args(["log"])
        .output()
        .unwrap();
    assert_one_line_error(&o, "not inside a git repository");
    // Read-only commands on a fresh repository create nothing.
    let fresh = Repo::new("sha1");
    let snap = fresh.snapshot();
    for args in [
        vec!["log"],
        vec!["verify"],
        vec!["show", "0"],
        vec!["checkpoint"],
        vec!["replay", "0"],
    ] {
        let o = fresh.forum().args(&args).output().unwrap();
        assert!(!o.status.success());
        assert_eq!(fresh.snapshot(), snap, "{args:?}");
        assert!(
            !fresh.git_dir().join("forum").exists(),
            "{args:?} created .git/forum"
        );
    }
}

#[test]
fn forum_directory_with_bad_lines() {
    let repo = Repo::new("sha1");
    let dir = repo.path().join("forum-ledger");
    std::fs::create_dir(&dir).unwrap();
    let good = |seq: u64, prev: &str| -> (String, String) {
        let body = format!("{{\"n\": {seq}}}");
        let ph = git_forum::ledger::hash::sha256_hex(format!("{{\"n\":{seq}}}").as_bytes());
        let eh = git_forum::ledger::hash::entry_hash(seq, 1.0, "a", "k", None, &ph, prev);
        (
            format!(
                r#"{{"seq": {seq}, "ts": 1.0, "actor": "a", "kind": "k", "causal_parent": null, "payload_hash": "{ph}", "prev_hash": "{prev}", "entry_hash": "{eh}"}}"#
            ),
            format!(r#"{{"hash": "{ph}", "body": {body}}}"#) + &format!("\n{eh}"),
        )
    };
    let (e0, p0) = good(0, git_forum::ledger::GENESIS);
    let (p0, h0) = p0.split_once('\n').unwrap();
    let (e1, p1) = good(1, h0);
    let (p1, _) = p1.split_once('\n').unwrap();
    std::fs::write(dir.join("payloads.jsonl"), format!("{p0}\n{p1}\n")).unwrap();
    // A torn last line is dropped, as in Forum.
    std::fs::write(
        dir.join("entries.jsonl"),
        format!("{e0}\n{e1}\n{{\"seq\": 2, \"ts"),
    )
    .unwrap();
    let out = repo.forum_json(&["import", dir.to_str().unwrap()]);
    assert_eq!(out["entries"], 2);
    assert_eq!(out["torn_lines_dropped"], 1);
    // A corrupt interior line is an error naming the row, and nothing is imported.
    std::fs::write(dir.join("entries.jsonl"), format!("{e0}\nnot json\n{e1}\n")).unwrap();
    let before = repo.snapshot();
    let o = repo
        .forum()
        .args(["--ledger", "second", "import", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_one_line_error(&o, "corrupt line at row 1");
    assert_eq!(repo.snapshot(), before);
    // Importing over an existing ledger refuses.
    std::fs::write(dir.join("entries.jsonl"), format!("{e0}\n{e1}\n")).unwrap();
    let o = repo
        .forum()
        .args(["import", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_one_line_error(&o, "already exists");
}

#[test]
fn stale_ref_lock_is_recovered_but_a_live_writer_is_waited_for() {
    let repo = seeded("sha1", 2);
    let lock = repo.git_dir().join(format!("{REF}.lock"));
    // A git-forum writer killed while it held the ref lock leaves it behind.
    crate::storage::killed_append(&repo, "cas-locked");
    assert!(lock.exists());
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    repo.append("a", "k", "\"after a crash\"");
    assert!(!lock.exists());
    // A live git-forum writer holds the writer lock: a second writer waits for it, and never
    // touches the ref lock it may be holding.
    let wl = repo.git_dir().join("forum/locks/main.lock");
    let held = std::fs::File::options().write(true).open(&wl).unwrap();
    held.lock().unwrap();
    std::fs::write(&lock, "").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&lock)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let mut child = crate::storage::append_command(&repo, "2")
        .arg("--json")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Kept: the point is that the second writer is still waiting after a while, which only
    // time passing can show (there is no event to wait for when nothing happens).
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the second writer must wait for the first"
    );
    assert!(
        lock.exists(),
        "a lock owned by a live writer must not be broken"
    );
    std::fs::remove_file(&lock).unwrap();
    held.unlock().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(verify(&repo, true)["entries"], 4);
}

/// Checks that every acknowledged (seq, entry_hash) is in the ledger exactly once.
fn check_acks(repo: &Repo, acks: &[(u64, String)]) {
    let r = verify(repo, true);
    assert_eq!(r["ok"], true, "{r}");
    let log = repo.forum_json(&["log"]);
    let entries = log.as_array().unwrap();
    let n = entries.len() as u64;
    assert_eq!(r["entries"].as_u64().unwrap(), n);
    let by_seq: std::collections::HashMap<u64, String> = entries
        .iter()
        .map(|e| {
            (
                e["seq"].as_u64().unwrap(),
                e["entry_hash"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(by_seq.len() as u64, n);
    for s in 0..n {
        assert!(by_seq.contains_key(&s), "seq {s} missing");
    }
    let mut seen = HashSet::new();
    for (seq, hash) in acks {
        assert!(seen.insert(*seq), "seq {seq} acknowledged twice");
        assert_eq!(
            by_seq.get(seq),
            Some(hash),
            "acknowledged seq {seq} is not in the ledger"
        );
    }
}

#[test]
fn concurrent_processes_and_threads_never_lose_or_duplicate() {
    let repo = Repo::new("sha1");
    let path = repo.path().to_path_buf();
    let mut handles = Vec::new();
    for p in 0..4 {
        let bin = env!("CARGO_BIN_EXE_git-forum");
        let path = path.clone();
        handles.push(std::thread::spawn(move || {
            let mut acks = Vec::new();
            for i in 0..100 {
                let o = std::process::Command::new(bin)
                    .current_dir(&path)
                    .env("GIT_CONFIG_GLOBAL", "/dev/null")
                    .env("GIT_CONFIG_SYSTEM", "/dev/null")
                    .args([
                        "append",
                        "--actor",
                        &format!("proc{p}"),
                        "--kind",
                        "note",
                        "--payload",
                        &format!("{{\"p\":{p},\"i\":{i}}}"),
                        "--json",
                    ])
                    .output()
                    .unwrap();
                assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
                let v: J = serde_json::from_slice(&o.stdout).unwrap();
                acks.push((
                    v["seq"].as_u64().unwrap(),
                    v["entry_hash"].as_str().unwrap().to_string(),
                ));
            }
            acks
        }));
    }
    for t in 0..8 {
        let path = path.clone();
        handles.push(std::thread::spawn(move || {
            let mut store =
                git_forum::store::git::GitStore::open(&path, "main", Default::default()).unwrap();
            let mut acks = Vec::new();
            for i in 0..25 {
                let new = git_forum::ledger::NewEntry {
                    actor: format!("thread{t}"),
                    kind: "note".into(),
                    causal_parent: None,
                    payload: git_forum::ledger::Value::str(format!("t{t} i{i}")),
                    ts: 1000.0,
                };
                let a = store.append_entry(&new).unwrap();
                acks.push((a.entry.seq, a.entry.entry_hash));
            }
            acks
        }));
    }
    let acks: Vec<(u64, String)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert_eq!(acks.len(), 600);
    check_acks(&repo, &acks);
    repo.fsck();
}

#[test]
fn writers_killed_at_random_points_lose_nothing_acknowledged() {
    let repo = Repo::new("sha1");
    let mut acks = Vec::new();
    let mut kills = 0;
    let mut rng: u64 = 0x9e3779b97f4a7c15;
    let mut i = 0;
    while kills < 60 {
        i += 1;
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let delay = std::time::Duration::from_micros(rng % 15_000);
        let mut child = repo
            .forum()
            .args([
                "append",
                "--actor",
                "crashy",
                "--kind",
                "note",
                "--payload",
                &format!("{{\"i\":{i}}}"),
                "--json",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Kept: a random delay is the point, so the kill lands at a random moment of the append.
        std::thread::sleep(delay);
        match child.try_wait().unwrap() {
            Some(_) => {}
            None => {
                let _ = child.kill();
                kills += 1;
            }
        }
        let out = child.wait_with_output().unwrap();
        if out.status.success()
            && let Ok(v) = serde_json::from_slice::<J>(&out.stdout)
        {
            acks.push((
                v["seq"].as_u64().unwrap(),
                v["entry_hash"].as_str().unwrap().to_string(),
            ));
        }
        assert!(i < 2000, "could not land {kills} kills");
    }
    // The next append succeeds without manual cleanup, and nothing acknowledged was lost.
    let a = repo.append("after", "note", "\"after the crashes\"");
    acks.push((
        a["seq"].as_u64().unwrap(),
        a["entry_hash"].as_str().unwrap().to_string(),
    ));
    check_acks(&repo, &acks);
    repo.fsck();
    eprintln!(
        "crash test: {kills} kills, {} acknowledged appends",
        acks.len()
    );
}

#[test]
fn no_fsync_then_sync_and_batches_as_packs() {
    let repo = Repo::new("sha256");
    repo.forum_ok(&[
        "--no-fsync",
        "append",
        "--actor",
        "a",
        "--kind",
        "k",
        "--payload",
        "1",
    ]);
    repo.forum_ok(&["sync"]);
    let path = repo.path().to_path_buf();
    let mut store =
        git_forum::store::git::GitStore::open(&path, "main", Default::default()).unwrap();
    let batch: Vec<_> = (0..500)
        .map(|i| git_forum::ledger::NewEntry {
            actor: "batch".into(),
            kind: "note".into(),
            causal_parent: Some(0),
            payload: git_forum::ledger::Value::int(i),
            ts: 1000.0 + i as f64,
        })
        .collect();
    let done = store.append_entries(&batch).unwrap();
    assert_eq!(done.last().unwrap().entry.seq, 500);
    let packs = std::fs::read_dir(repo.git_dir().join("objects/pack"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "pack")
        })
        .count();
    assert_eq!(packs, 1, "a batch is one pack");
    assert!(
        !has_keep(&repo.git_dir().join("objects/pack")),
        "the .keep is removed after the ref moved"
    );
    let r = verify(&repo, true);
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["entries"], 501);
    repo.fsck();
}

fn has_keep(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .unwrap()
        .any(|e| e.unwrap().path().extension().is_some_and(|x| x == "keep"))
}

#[test]
fn help_and_man_page() {
    let repo = Repo::new("sha1");
    let help = repo.forum_ok(&["--help"]);
    assert!(help.contains("append") && help.contains("verify"));
    let out = repo.path().join("man");
    repo.forum_ok(&["man", "--out", out.to_str().unwrap()]);
    let page = std::fs::read_to_string(out.join("git-forum.1")).unwrap();
    assert!(
        page.contains(".TH git-forum"),
        "{}",
        &page[..200.min(page.len())]
    );
}

// A writer killed after writing its reflog line but before moving the ref leaves a reflog line
// for an update that never landed. Once its stale lock is recovered (and recorded), verify must
// not take that line for a rewritten ref; the same line without a recovery record is tampering.
#[test]
fn reflog_line_of_a_killed_writer_is_not_tampering() {
    let repo = seeded("sha1", 2);
    let tip = repo.git_ok(&["rev-parse", REF]);
    // A commit no writer built: a reflog line for it, with no lock and no record, is evidence
    // of a rewritten ref.
    let other = seeded("sha1", 3);
    let ids = chain(&other);
    let orphan = write_commit(&repo, &cat(&other, &ids[2]));
    let log = repo.git_dir().join("logs").join(REF);
    let clean = std::fs::read_to_string(&log).unwrap();
    std::fs::write(
        &log,
        format!(
            "{clean}{tip} {orphan} git-forum <ledger@git-forum.invalid> 1000 +0000\tforum: append note\n"
        ),
    )
    .unwrap();
    let r = verify(&repo, false);
    assert_eq!(r["ok"], false, "{r}");
    std::fs::write(&log, clean).unwrap();
    // A writer really killed after its reflog line: the next reader settles it, and it is no
    // alarm; the next append goes on from the old tip.
    crate::storage::killed_append(&repo, "cas-reflog");
    let r = verify(&repo, true);
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["entries"], 2);
    assert!(!repo.git_dir().join(format!("{REF}.lock")).exists());
    repo.append("a", "k", "\"after the crash\"");
    let r = verify(&repo, true);
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["entries"], 3);
}

#[test]
fn a_spare_still_linked_to_the_ref_is_never_written() {
    // A writer killed between keeping the ref's inode as the spare and renaming its lock over
    // the ref leaves the spare as a second name of the live ref. The next append must not
    // write into it (that would change the live ref before its lock is taken), so it drops it.
    // (Files repositories only: where git keeps the refs there is no spare.)
    for kind in ["sha1", "sha256"] {
        let repo = seeded(kind, 3);
        let git_dir = repo.git_dir();
        let ref_file = git_dir.join(REF);
        let spare = git_dir.join("forum/spare/main");
        let old_tip = repo.git_ok(&["rev-parse", REF]);
        let _ = std::fs::remove_file(&spare);
        std::fs::hard_link(&ref_file, &spare).unwrap();
        // Nor does it create the lock empty and write it after: killed between the two, such a
        // lock would name no value and block every writer after. A fresh spare is made
        // instead, so the append never reaches the step of a lock created empty.
        let o = crate::storage::append_command(&repo, "\"after the crash\"")
            .env("GIT_FORUM_FAILPOINT", "ref-lock-created")
            .output()
            .unwrap();
        assert!(o.status.success(), "{kind}: {o:?}");
        let new_tip = repo.git_ok(&["rev-parse", REF]);
        assert_ne!(new_tip, old_tip);
        assert_eq!(std::fs::read_to_string(&ref_file).unwrap().trim(), new_tip);
        // The spare is now the ref's previous inode, holding the previous value untouched.
        assert_eq!(std::fs::read_to_string(&spare).unwrap().trim(), old_tip);
        assert!(!git_dir.join(format!("{REF}.lock")).exists());
        // And the recycling goes on from there.
        repo.append("a", "k", "\"and one more\"");
        assert_eq!(
            std::fs::read_to_string(&spare).unwrap().trim(),
            new_tip,
            "{kind}: the spare holds the value the last rename replaced"
        );
        let r = verify(&repo, true);
        assert_eq!(r["ok"], true, "{kind}: {r}");
        assert_eq!(r["entries"], 5);
        repo.git_ok(&["fsck", "--strict"]);
    }
}

#[test]
fn every_fsync_method_appends_durably_and_a_bad_one_is_refused() {
    let repo = Repo::new("sha1");
    for method in ["fsync", "batch", "syncfs"] {
        repo.git_ok(&["config", "forum.fsyncMethod", method]);
        repo.append("a", "k", &format!("\"{method}\""));
    }
    assert_eq!(verify(&repo, true)["entries"], 3);
    repo.fsck();
    repo.git_ok(&["config", "forum.fsyncMethod", "sometimes"]);
    let before = repo.snapshot();
    let o = repo
        .forum()
        .args(["append", "--actor", "a", "--kind", "k", "--payload", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_one_line_error(&o, "forum.fsyncMethod");
    assert_eq!(repo.snapshot(), before);
}

#[test]
fn many_batches_do_not_pile_up_packs() {
    let repo = Repo::new("sha1");
    let mut store =
        git_forum::store::git::GitStore::open(repo.path(), "main", Default::default()).unwrap();
    for b in 0..30 {
        let batch: Vec<_> = (0..5)
            .map(|i| git_forum::ledger::NewEntry {
                actor: "batch".into(),
                kind: "note".into(),
                causal_parent: None,
                payload: git_forum::ledger::Value::int(b * 10 + i),
                ts: 1000.0,
            })
            .collect();
        store.append_entries(&batch).unwrap();
    }
    // Merges run beside the appends, on a thread of their own: dropping the handle waits for
    // them.
    drop(store);
    let packs = std::fs::read_dir(repo.git_dir().join("objects/pack"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "idx")
        })
        .count();
    assert!(
        packs <= git_forum::store::git::MAX_PACKS + 1,
        "{packs} packs after 30 batches"
    );
    let r = verify(&repo, true);
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["entries"], 150);
    repo.fsck();
}

// ----- the write-ahead log (the default flush method on Linux) -----

/// Makes the ledger's write-ahead log look as if it was written before a reboot: its header
/// names another boot (with a valid checksum), so the next command treats the files it
/// describes as possibly lost.
#[cfg(target_os = "linux")]
fn as_if_rebooted(repo: &Repo) {
    let path = repo.git_dir().join("forum/wal/main.wal");
    let mut bytes = std::fs::read(&path).expect("the ledger has a write-ahead log");
    bytes[24..60].copy_from_slice(b"00000000-0000-0000-0000-000000000000");
    let crc = crc32fast::hash(&bytes[..124]);
    bytes[124..128].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
}

#[cfg(target_os = "linux")]
fn loose_path(repo: &Repo, id: &str) -> PathBuf {
    repo.git_dir().join("objects").join(&id[..2]).join(&id[2..])
}

/// What a power loss can leave of appends whose files were never flushed: object files gone,
/// empty or garbled, the ref empty or left on an older tip, the reflog cut short with a torn
/// line. Each append was acknowledged only once its log record was on disk, so the next
/// command restores all of it: verify passes, fsck is clean, nothing acknowledged is missing,
/// and appends continue.
#[cfg(target_os = "linux")]
#[test]
fn a_power_loss_image_is_restored_from_the_write_ahead_log() {
    // The write-ahead log covers loose refs; in a reftable repository git's own ref storage
    // makes each append durable (`core.fsync=reference`) and there is no log.
    for format in ["sha1", "sha256"] {
        for ref_state in ["empty", "behind"] {
            let repo = seeded(format, 6);
            assert!(repo.git_dir().join("forum/wal/main.wal").exists());
            let commits = chain(&repo);
            let acked = repo.forum_json(&["log"]);

            // Entry 3's commit is gone, entry 4's body is empty, entry 5's tree is garbage.
            let body4 = repo.git_ok(&["rev-parse", &format!("{}:payload.json", commits[4])]);
            let tree5 = repo.git_ok(&["rev-parse", &format!("{}^{{tree}}", commits[5])]);
            std::fs::remove_file(loose_path(&repo, &commits[3])).unwrap();
            std::fs::write(loose_path(&repo, body4.trim()), b"").unwrap();
            std::fs::write(loose_path(&repo, tree5.trim()), b"\0\0garbage").unwrap();
            let ref_file = repo.git_dir().join("refs/forum/ledgers/main");
            match ref_state {
                "empty" => {
                    std::fs::write(&ref_file, b"").unwrap();
                    // The writer that died with the machine also left the ref's lock behind.
                    let lock = repo.git_dir().join("refs/forum/ledgers/main.lock");
                    std::fs::write(&lock, b"").unwrap();
                    // Written before the machine (re)booted: its holder is gone.
                    let touched = std::process::Command::new("touch")
                        .arg("-d")
                        .arg(format!("@{}", crate::storage::boot_time_secs() - 60))
                        .arg(&lock)
                        .status()
                        .unwrap();
                    assert!(touched.success());
                }
                _ => std::fs::write(&ref_file, format!("{}\n", commits[2])).unwrap(),
            }
            let reflog = repo.git_dir().join("logs/refs/forum/ledgers/main");
            let text = std::fs::read_to_string(&reflog).unwrap();
            let kept: Vec<&str> = text.lines().take(3).collect();
            std::fs::write(&reflog, format!("{}\n\0\0\0\0", kept.join("\n"))).unwrap();
            as_if_rebooted(&repo);

            let r = verify(&repo, true);
            assert_eq!(r["ok"], true, "{ref_state}: {r}");
            assert_eq!(r["entries"], 6);
            assert_eq!(
                chain(&repo),
                commits,
                "{ref_state}: the same commits, restored"
            );
            assert_eq!(repo.forum_json(&["log"]), acked);
            repo.fsck();
            let next = repo.append("agent", "note", "{\"after\":\"power loss\"}");
            assert_eq!(next["seq"], 6);
            assert_eq!(verify(&repo, true)["ok"], true);
        }
    }
}

/// Deletes the files of the last `n` of the ledger's `entries` commits and empties its ref, as a
/// power loss can leave them, then reboots: the log puts every entry back, in the same chain.
#[cfg(target_os = "linux")]
fn lose_the_last_and_restore(repo: &Repo, n: usize, entries: usize) {
    let commits = chain(repo);
    assert_eq!(commits.len(), entries);
    for c in &commits[entries - n..] {
        std::fs::remove_file(loose_path(repo, c)).unwrap();
    }
    std::fs::write(repo.git_dir().join("refs/forum/ledgers/main"), b"").unwrap();
    as_if_rebooted(repo);
    let r = verify(repo, true);
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["entries"], entries);
    assert_eq!(chain(repo), commits);
    repo.fsck();
}

/// An entry whose body barely compresses (the log stores records deflated): 1,600 letters drawn
/// from 64, different for every `i`, about 1.2 KB per record.
fn noisy_note(i: usize) -> git_forum::ledger::NewEntry {
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (i as u64 + 1);
    let abc = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
    let words: String = (0..1600)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            abc[(x % 64) as usize] as char
        })
        .collect();
    note(i, &words)
}

/// A new ledger's log is made at 64 KiB, and again at `forum.walSize` (1 MiB by default) the
/// first time it fills, in each kind of repository; what the grown log holds is restored after
/// a power loss like any other record (files refs). A setting below the log's size takes
/// effect at the next append.
#[cfg(target_os = "linux")]
#[test]
fn a_new_ledgers_log_starts_small_and_grows_when_it_first_fills() {
    use git_forum::store::git::{GitStore, Options};
    for kind in ["sha1", "sha256", "reftable"] {
        let repo = Repo::new(kind);
        let wal = repo.git_dir().join("forum/wal/main.wal");
        let size = || std::fs::metadata(&wal).unwrap().len();
        repo.append("agent", "note", r#"{"i": 0}"#);
        assert_eq!(
            size(),
            64 << 10,
            "{kind}: the first append makes a small log"
        );
        let r = gix::open(repo.path()).unwrap();
        let opts = Options::from_config(&r, false).unwrap();
        let mut store = GitStore::new(r, "main", opts).unwrap();
        for i in 1..80 {
            store.append_entry(&noisy_note(i)).unwrap();
            if size() > 64 << 10 {
                assert_eq!(size(), 1 << 20, "{kind}: grown to forum.walSize at once");
            }
        }
        drop(store);
        assert_eq!(size(), 1 << 20, "{kind}: 80 appends filled the first log");
        if kind == "reftable" {
            // git keeps the ref and makes it durable; there is no ref file to lose.
            assert_eq!(verify(&repo, true)["entries"], 80);
        } else {
            // The grown log still holds the last two appends.
            lose_the_last_and_restore(&repo, 2, 80);
        }
        // A smaller setting: the next append makes the log again at that size.
        repo.git_ok(&["config", "forum.walSize", "128k"]);
        repo.append("agent", "note", r#"{"i": 80}"#);
        assert_eq!(size(), 128 << 10, "{kind}");
        assert_eq!(verify(&repo, true)["entries"], 81);
    }
}

/// A log that fills up is flushed and started again; a batch (written as a pack) and `sync`
/// empty it first; entries written around them all survive a power-loss image of the last
/// logged appends.
#[cfg(target_os = "linux")]
#[test]
fn the_write_ahead_log_survives_filling_up_batches_and_sync() {
    use git_forum::store::git::{GitStore, Options};
    let repo = Repo::new("sha1");
    repo.git_ok(&["config", "forum.walSize", "65536"]);
    let open = || {
        let r = gix::open(repo.path()).unwrap();
        let opts = Options::from_config(&r, false).unwrap();
        GitStore::new(r, "main", opts).unwrap()
    };
    let note = noisy_note;
    let mut store = open();
    // 80 appends overflow a 64 KiB log at least once.
    for i in 0..80 {
        store.append_entry(&note(i)).unwrap();
    }
    let generation = || {
        let wal = std::fs::read(repo.git_dir().join("forum/wal/main.wal")).unwrap();
        u64::from_le_bytes(wal[16..24].try_into().unwrap())
    };
    let before = generation();
    assert!(before > 1, "80 appends filled the log at least once");
    let batch: Vec<_> = (80..90).map(note).collect();
    store.append_entries(&batch).unwrap();
    assert_eq!(generation(), before + 1, "a batch empties the log first");
    store.append_entry(&note(90)).unwrap();
    assert_eq!(
        generation(),
        before + 2,
        "the first append after the batch is not logged on top of unlogged writes"
    );
    for i in 91..93 {
        store.append_entry(&note(i)).unwrap();
    }
    assert_eq!(generation(), before + 2);
    drop(store);
    let r = verify(&repo, true);
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["entries"], 93);

    // The log still holds the last three appends.
    lose_the_last_and_restore(&repo, 3, 93);

    // `sync` flushes and leaves the log its records (the copy a racing prune cannot delete);
    // a reboot afterwards finds everything in place.
    repo.forum_ok(&["append", "--actor", "a", "--kind", "k", "--payload", "{}"]);
    repo.forum_ok(&["sync"]);
    let wal = std::fs::read(repo.git_dir().join("forum/wal/main.wal")).unwrap();
    assert!(
        wal[4096..].iter().any(|b| *b != 0),
        "sync keeps the records"
    );
    as_if_rebooted(&repo);
    assert_eq!(verify(&repo, true)["entries"], 94);
}

/// A wrong `forum.walSize` or `forum.fsyncMethod` is one line naming the key, and nothing is
/// written.
#[test]
fn a_bad_durability_setting_is_one_line() {
    let repo = seeded("sha1", 1);
    let before = repo.snapshot();
    for (key, value, words) in [
        ("forum.walSize", "12", "forum.walSize"),
        ("forum.fsyncMethod", "sometimes", "forum.fsyncMethod"),
    ] {
        repo.git_ok(&["config", key, value]);
        let o = repo
            .forum()
            .args(["append", "--actor", "a", "--kind", "k", "--payload", "{}"])
            .output()
            .unwrap();
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(words), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        repo.git_ok(&["config", "--unset", key]);
    }
    assert_eq!(repo.snapshot(), before);
}
