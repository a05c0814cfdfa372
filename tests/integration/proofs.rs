//! Inclusion and consistency proof files through the real binary: written in a repository,
//! checked outside any repository, and refused after any change.

use crate::common::Repo;

fn ledger(n: usize) -> Repo {
    let repo = Repo::new("sha1");
    for i in 0..n {
        repo.append("agent", "note", &format!(r#"{{"i":{i}}}"#));
    }
    repo
}

/// Runs `verify-proof` on `text` from a directory that is not a repository.
fn check(repo: &Repo, outside: &std::path::Path, text: &[u8]) -> std::process::Output {
    let f = outside.join("proof.json");
    std::fs::write(&f, text).unwrap();
    repo.forum()
        .current_dir(outside)
        .env("GIT_CEILING_DIRECTORIES", outside.parent().unwrap())
        .args(["verify-proof", f.to_str().unwrap()])
        .output()
        .unwrap()
}

#[test]
fn inclusion_proofs_hold_for_every_seq_and_any_changed_byte_breaks_them() {
    let repo = ledger(13);
    let outside = tempfile::tempdir().unwrap();
    let root = repo.forum_json(&["checkpoint", "--no-record"])["checkpoint"]
        .as_str()
        .unwrap()
        .to_string();
    for seq in 0..13 {
        let proof = repo.forum_ok(&["prove", &seq.to_string()]);
        let o = check(&repo, outside.path(), proof.as_bytes());
        assert!(
            o.status.success(),
            "seq {seq}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: serde_json::Value = serde_json::from_str(&proof).unwrap();
        assert_eq!(v["checkpoint"]["root"], root.as_str());
    }
    // Every single-byte change is refused, except inside the ledger's name, which the proof
    // does not cover (a signed checkpoint does).
    let proof = repo.forum_ok(&["prove", "5"]);
    let name_at = proof.find("\"ledger\": \"main\"").unwrap() + "\"ledger\": \"".len();
    let mut refused = 0;
    for i in 0..proof.len() {
        if (name_at..name_at + 4).contains(&i) {
            continue;
        }
        let mut bad = proof.clone().into_bytes();
        bad[i] = if bad[i] == b'#' { b'%' } else { b'#' };
        let o = check(&repo, outside.path(), &bad);
        assert!(
            !o.status.success(),
            "byte {i} ({:?}) changed and the proof still held",
            proof.as_bytes()[i] as char
        );
        refused += 1;
    }
    assert!(refused > 500);
    // A required root that differs is refused; the right one passes.
    let f = outside.path().join("p5.json");
    std::fs::write(&f, &proof).unwrap();
    let o = repo
        .forum()
        .current_dir(outside.path())
        .args([
            "verify-proof",
            f.to_str().unwrap(),
            "--root",
            &"0".repeat(64),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let o = repo
        .forum()
        .current_dir(outside.path())
        .args([
            "verify-proof",
            f.to_str().unwrap(),
            "--root",
            &root,
            "--size",
            "13",
        ])
        .output()
        .unwrap();
    assert!(o.status.success());
}

#[test]
fn consistency_proofs_between_checkpoints() {
    let repo = ledger(9);
    let outside = tempfile::tempdir().unwrap();
    for m in 0..=9 {
        for n in m.max(1)..=9 {
            let proof = repo.forum_ok(&[
                "prove",
                "--consistency-from",
                &m.to_string(),
                "--size",
                &n.to_string(),
            ]);
            let o = check(&repo, outside.path(), proof.as_bytes());
            assert!(
                o.status.success(),
                "{m} -> {n}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
    }
    // An old root from a different history is not extended.
    let proof = repo.forum_ok(&["prove", "--consistency-from", "4"]);
    let mut v: serde_json::Value = serde_json::from_str(&proof).unwrap();
    v["old"]["root"] = serde_json::Value::String("ab".repeat(32));
    let o = check(&repo, outside.path(), v.to_string().as_bytes());
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("does not show"));
}

#[test]
fn bad_proof_input_gets_one_line() {
    let repo = ledger(3);
    let outside = tempfile::tempdir().unwrap();
    let proof = repo.forum_ok(&["prove", "1"]);
    for (bytes, needle) in [
        (
            proof.as_bytes()[..proof.len() / 2].to_vec(),
            "not a proof file",
        ),
        (b"hello".to_vec(), "not a proof file"),
        (
            br#"{"schema": "other/v1"}"#.to_vec(),
            "unknown proof schema",
        ),
    ] {
        let o = check(&repo, outside.path(), &bytes);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{err}");
    }
    let o = repo
        .forum()
        .args(["verify-proof", "/nonexistent/proof.json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    for args in [
        vec!["prove", "7"],
        vec!["prove", "--consistency-from", "5"],
        vec!["prove", "0", "--size", "9"],
    ] {
        let o = repo.forum().args(&args).output().unwrap();
        assert!(!o.status.success(), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&o.stderr)
                .trim_end()
                .lines()
                .count(),
            1
        );
    }
}
