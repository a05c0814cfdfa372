//! The cache of Forum's tree on `refs/forum/merkle/NAME`, through the real binary: Forum-format
//! proofs and the printed checkpoint answer from it, equal to what the full ledger gives (the
//! pure functions over every entry hash), it is rebuilt after the real `git` deletes it, points
//! it at garbage or changes a chunk, on every kind of repository, and a fetched copy answers
//! without writing one.

use git_forum::ledger::merkle::{consistency_proof, inclusion_path, merkle_root};

use crate::common::{FORMATS, Repo, on_each_kind};
use crate::tlog::imported;

const CACHE: &str = "refs/forum/merkle/main";

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap()
}

/// `prove SEQ --size SIZE` from the cache is the inclusion proof the full list gives.
fn check_inclusion(repo: &Repo, hashes: &[String], size: usize, seq: usize) {
    let p = json(&repo.forum_ok(&["prove", &seq.to_string(), "--size", &size.to_string()]));
    let what = format!("size {size} seq {seq}");
    assert_eq!(p["entry"]["seq"], seq as u64, "{what}");
    assert_eq!(p["entry"]["entry_hash"], hashes[seq].as_str(), "{what}");
    assert_eq!(p["checkpoint"]["size"], size as u64, "{what}");
    assert_eq!(
        p["checkpoint"]["root"],
        merkle_root(&hashes[..size]).as_str(),
        "{what}"
    );
    let want = inclusion_path(&hashes[..size], seq);
    assert_eq!(p["audit_path"], serde_json::json!(want), "{what}");
}

/// `prove --consistency-from M --size SIZE` from the cache is the proof the full list gives.
fn check_consistency(repo: &Repo, hashes: &[String], size: usize, m: usize) {
    let p = json(&repo.forum_ok(&[
        "prove",
        "--consistency-from",
        &m.to_string(),
        "--size",
        &size.to_string(),
    ]));
    let what = format!("size {size} m {m}");
    assert_eq!(
        p["old"]["root"],
        merkle_root(&hashes[..m]).as_str(),
        "{what}"
    );
    assert_eq!(
        p["new"]["root"],
        merkle_root(&hashes[..size]).as_str(),
        "{what}"
    );
    let want = consistency_proof(&hashes[..size], m);
    assert_eq!(p["proof"], serde_json::json!(want), "{what}");
}

fn cache_tree(repo: &Repo) -> String {
    repo.git_ok(&["rev-parse", &format!("{CACHE}^{{tree}}")])
}

/// Points the cache ref at a copy of its commit whose `path` blob holds `bytes` (or whose
/// message is `message`), as someone with write access to the repository could.
fn tamper(repo: &Repo, path: &str, bytes: &[u8], message: Option<&str>) {
    let index = repo.path().join("tamper.index");
    let run = |args: &[&str]| {
        let o = std::process::Command::new("git")
            .current_dir(repo.path())
            .env("GIT_INDEX_FILE", &index)
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {o:?}");
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let blob = repo.git_in(&["hash-object", "-w", "--stdin"], bytes);
    run(&["read-tree", CACHE]);
    run(&[
        "update-index",
        "--cacheinfo",
        &format!("100644,{blob},{path}"),
    ]);
    let tree = run(&["write-tree"]);
    std::fs::remove_file(&index).unwrap();
    let old = repo.git_ok(&["log", "-1", "--format=%B", CACHE]);
    let commit = repo.git_in(&["commit-tree", &tree], message.unwrap_or(&old).as_bytes());
    repo.git_ok(&["update-ref", CACHE, &commit]);
}

/// Proofs and the checkpoint from the cache equal those of the full ledger; the cache is
/// written on the first answer, extended by later entries (to the very tree a rebuild gives),
/// and rebuilt after it is deleted, pointed at a blob, given a changed, short or missing chunk
/// or a message naming another hash, on files/SHA-1, files/SHA-256 and reftable repositories.
#[test]
fn the_proof_cache_is_rebuilt_after_it_is_deleted_or_corrupted_on_each_kind() {
    on_each_kind(|repo| {
        let mut hashes = imported(repo, 300);
        let root = merkle_root(&hashes);
        let cp = repo.forum_json(&["checkpoint", "--no-record"]);
        assert_eq!(cp["checkpoint"], root.as_str());
        assert_eq!(cp["size"], 300);
        let listing = repo.git_ok(&["ls-tree", "-r", "--name-only", CACHE]);
        assert_eq!(listing, "0/000\n0/001\n8/000");
        let subject = repo.git_ok(&["log", "-1", "--format=%s", CACHE]);
        assert_eq!(subject, format!("forum-tree 300 {root}"));
        check_inclusion(repo, &hashes, 300, 7);
        check_consistency(repo, &hashes, 300, 100);
        let seven = repo.forum_ok(&["prove", "7"]);
        let honest = cache_tree(repo);

        repo.git_ok(&["update-ref", "-d", CACHE]);
        assert_eq!(
            repo.forum_ok(&["prove", "7"]),
            seven,
            "after the ref was deleted"
        );
        assert_eq!(cache_tree(repo), honest);

        let garbage = repo.git_in(&["hash-object", "-w", "--stdin"], b"not a cache\n");
        repo.git_ok(&["update-ref", CACHE, &garbage]);
        assert_eq!(
            repo.forum_ok(&["prove", "7"]),
            seven,
            "after the ref named a blob"
        );
        assert_eq!(cache_tree(repo), honest);

        let bad_chunks: [(&str, Vec<u8>); 4] = [
            ("0/000", vec![0u8; 256 * 32]),
            ("0/001", vec![1u8; 44 * 32]),
            ("0/001", vec![1u8; 43 * 32]),
            ("8/000", vec![7u8; 33]),
        ];
        for (path, bytes) in bad_chunks {
            tamper(repo, path, &bytes, None);
            assert_ne!(cache_tree(repo), honest);
            assert_eq!(repo.forum_ok(&["prove", "7"]), seven, "{path} changed");
            assert_eq!(
                cache_tree(repo),
                honest,
                "{path}: the changed cache was replaced"
            );
        }
        let message = format!("forum-tree 300 {root}\n\nhash sha1\ntip 0\n");
        tamper(repo, "0/000", &[0u8; 256 * 32], Some(&message));
        let cp = repo.forum_json(&["checkpoint", "--no-record"]);
        assert_eq!(
            cp["checkpoint"],
            root.as_str(),
            "a message naming another hash"
        );
        assert_eq!(cache_tree(repo), honest);

        // Two more entries, one a checkpoint recording the root of the 301 before it: the cache
        // is extended to the tree a rebuild gives, and records the checkpoint it checks against.
        hashes.push(
            repo.append("agent", "note", r#"{"i":300}"#)["entry_hash"]
                .as_str()
                .unwrap()
                .to_string(),
        );
        let r301 = merkle_root(&hashes);
        let payload = format!(r#"{{"wave":0,"root":"{r301}"}}"#);
        hashes.push(
            repo.append("dispatch", "checkpoint", &payload)["entry_hash"]
                .as_str()
                .unwrap()
                .to_string(),
        );
        check_inclusion(repo, &hashes, 302, 301);
        check_consistency(repo, &hashes, 302, 301);
        let body = repo.git_ok(&["log", "-1", "--format=%b", CACHE]);
        assert!(body.contains("checkpoint 301"), "{body}");
        let extended = cache_tree(repo);
        repo.git_ok(&["update-ref", "-d", CACHE]);
        check_inclusion(repo, &hashes, 302, 0);
        assert_eq!(
            cache_tree(repo),
            extended,
            "a rebuild gives the extended tree"
        );
        repo.fsck();
    });
}

/// Every seq and every old size at a few sizes, through the binary, against the full list.
#[test]
fn proofs_from_the_cache_equal_those_of_the_full_ledger_at_a_few_sizes() {
    let repo = Repo::new("sha1");
    let hashes = imported(&repo, 20);
    for size in [1usize, 2, 3, 7, 8, 20] {
        for seq in 0..size {
            check_inclusion(&repo, &hashes, size, seq);
        }
        for m in 0..=size {
            check_consistency(&repo, &hashes, size, m);
        }
    }
}

/// A sample of seqs and old sizes at 1,000 entries (four full leaf chunks and a partial one).
#[test]
fn proofs_from_the_cache_equal_those_of_the_full_ledger_at_1000_entries() {
    let repo = Repo::new("sha256");
    let hashes = imported(&repo, 1000);
    for (size, seq) in [
        (1000, 0),
        (1000, 255),
        (1000, 256),
        (1000, 999),
        (777, 500),
        (512, 511),
    ] {
        check_inclusion(&repo, &hashes, size, seq);
    }
    for (size, m) in [
        (1000, 1),
        (1000, 256),
        (1000, 257),
        (1000, 999),
        (999, 512),
        (600, 300),
    ] {
        check_consistency(&repo, &hashes, size, m);
    }
}

/// The same at 100,000 entries (three stored levels); heavy: the import and the full-list
/// functions over 100,000 hashes take a while in a debug build.
#[test]
fn heavy_proofs_from_the_cache_equal_those_of_the_full_ledger_at_100000_entries() {
    let repo = Repo::new("sha1");
    let hashes = imported(&repo, 100_000);
    for (size, seq) in [
        (100_000, 0),
        (100_000, 65_535),
        (100_000, 65_536),
        (100_000, 99_999),
        (70_001, 4_242),
    ] {
        check_inclusion(&repo, &hashes, size, seq);
    }
    for (size, m) in [
        (100_000, 1),
        (100_000, 65_536),
        (100_000, 77_777),
        (65_537, 65_536),
    ] {
        check_consistency(&repo, &hashes, size, m);
    }
    let cp = repo.forum_json(&["checkpoint", "--no-record"]);
    assert_eq!(cp["checkpoint"], merkle_root(&hashes).as_str());
}

/// A copy fetched from a remote (`--ledger origin:main`) answers proofs and its checkpoint from
/// a tree built in memory, equal to the remote's own, and writes no cache ref.
#[test]
fn a_fetched_copy_answers_from_memory_and_writes_nothing_on_each_kind() {
    for kind in FORMATS {
        let a = Repo::new(kind);
        imported(&a, 40);
        let (_bare, url) = crate::common::bare_origin(&a, kind);
        a.forum_ok(&["push"]);
        let b = Repo::new(kind);
        b.git_ok(&["remote", "add", "origin", &url]);
        b.forum_ok(&["fetch"]);
        let refs_before = b.git_ok(&["for-each-ref"]);
        let theirs = b.forum_ok(&["--ledger", "origin:main", "prove", "13"]);
        let mine = a.forum_ok(&["prove", "13"]);
        assert_eq!(
            json(&theirs)["audit_path"],
            json(&mine)["audit_path"],
            "{kind}"
        );
        assert_eq!(
            json(&theirs)["checkpoint"],
            json(&mine)["checkpoint"],
            "{kind}"
        );
        let cons = ["prove", "--consistency-from", "17"];
        let theirs = b.forum_ok(&[&["--ledger", "origin:main"][..], &cons[..]].concat());
        assert_eq!(
            json(&theirs)["proof"],
            json(&a.forum_ok(&cons))["proof"],
            "{kind}"
        );
        let cp = b.forum_json(&["--ledger", "origin:main", "checkpoint", "--no-record"]);
        let own = a.forum_json(&["checkpoint", "--no-record"]);
        assert_eq!(cp["checkpoint"], own["checkpoint"], "{kind}");
        assert_eq!(
            b.git_ok(&["for-each-ref"]),
            refs_before,
            "{kind}: nothing written"
        );
        assert_eq!(
            b.git_ok(&["for-each-ref", "refs/forum/merkle"]),
            "",
            "{kind}"
        );
    }
}

/// A run at the end of a ledger long enough to read its closing checkpoint from the cache ends
/// with the root of every entry, its own included, as `verify` computes it from the entries: the
/// cache is extended by the run's entries (and rebuilt first here, its first leaf chunk having
/// been changed), on files/SHA-1, files/SHA-256 and reftable repositories.
#[test]
fn a_run_at_the_end_of_a_long_ledger_ends_with_the_root_of_every_entry_on_each_kind() {
    on_each_kind(|repo| {
        let kind = repo.kind();
        imported(repo, 1030);
        repo.forum_json(&["checkpoint", "--no-record"]);
        let before = cache_tree(repo);
        tamper(repo, "0/000", &[7u8; 32 * 256], None);
        let model = crate::submit::script(repo, "model", "");
        let j = repo.forum_json(&["submit", "--cmd", &model, "ship a login API with docs"]);
        let v = repo.forum_json(&["verify"]);
        assert_eq!(v["ok"], true, "{kind}");
        assert_eq!(j["checkpoint"], v["checkpoint"], "{kind}");
        let r = &j["git_forum_receipt"];
        assert_eq!(r["ledger_size"], v["entries"], "{kind}");
        assert!(v["entries"].as_u64().unwrap() > 1030, "{kind}");
        // The run left the cache rebuilt and extended to its last entry: its commit names the
        // ledger's size and root, and its tree is neither the tampered one nor the one before.
        let head = repo.git_ok(&["log", "-1", "--format=%s", CACHE]);
        let want = format!(
            "forum-tree {} {}",
            v["entries"],
            v["checkpoint"].as_str().unwrap()
        );
        assert_eq!(head, want, "{kind}");
        assert_ne!(cache_tree(repo), before, "{kind}");
        let cp = repo.forum_json(&["checkpoint", "--no-record"]);
        assert_eq!(cp["checkpoint"], v["checkpoint"], "{kind}");
        assert_eq!(cp["size"], v["entries"], "{kind}");
    });
}
