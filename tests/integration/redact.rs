//! Redaction: the body leaves every tree (and, after gc, the object store) while the entry
//! chain and every checkpoint stay the same.

use crate::common::{FORMATS, Repo};

#[test]
fn redaction_keeps_the_chain_and_removes_the_body() {
    for format in FORMATS {
        let repo = Repo::new(format);
        let secret = r#"{"token":"hunter2"}"#;
        for i in 0..5 {
            let payload = if i == 1 || i == 3 {
                secret.to_string()
            } else {
                format!(r#"{{"i":{i}}}"#)
            };
            repo.append("agent", "note", &payload);
        }
        let recorded = repo.forum_json(&["checkpoint"]);
        let hash = repo.forum_json(&["show", "1"])["payload_hash"]
            .as_str()
            .unwrap()
            .to_string();
        let blob = repo.git_ok(&["rev-parse", "refs/forum/ledgers/main~3:payload.json"]);
        let done = repo.forum_json(&["redact", &hash, "--reason", "a credential was pasted"]);
        assert_eq!(done["seq"], 5);
        assert_eq!(done["redacted_seqs"], serde_json::json!([1, 3]));
        // Same entry hashes: the checkpoint recorded before still matches its prefix, and deep
        // verify reports the bodies as redacted.
        let r = repo.forum_json(&["verify", "--deep"]);
        assert_eq!(r["ok"], true, "{format}: {r}");
        assert_eq!(r["witnesses"]["recorded_checkpoints"], 1);
        assert_eq!(r["redacted"].as_array().unwrap().len(), 2, "{r}");
        assert_eq!(r["redacted"][0]["seq"], 1);
        let shown = repo.forum_json(&["show", "3", "--payload"]);
        assert_eq!(shown["redacted"], true);
        assert_eq!(shown["entry"]["payload_hash"], hash.as_str());
        // The redaction entry says what and why.
        let red = repo.forum_json(&["show", "5", "--payload"]);
        assert_eq!(red["entry"]["kind"], "redaction");
        assert_eq!(red["payload"]["payload_hash"], hash.as_str());
        // Proofs made before still verify against the new commits' checkpoint of size 5.
        let proof = repo.forum_ok(&["prove", "2", "--size", "5"]);
        let v: serde_json::Value = serde_json::from_str(&proof).unwrap();
        assert_eq!(v["checkpoint"]["root"], recorded["checkpoint"]);
        // After gc the body is gone from the object store; appends go on.
        repo.git_ok(&["gc", "-q", "--prune=now"]);
        assert!(
            !repo.git(&["cat-file", "-e", &blob]).status.success(),
            "{format}: the body survived gc"
        );
        repo.append("agent", "note", "\"after\"");
        assert_eq!(repo.forum_json(&["verify", "--deep"])["ok"], true);
        repo.fsck();
        // Redacting again, or a hash nobody has, changes nothing.
        let before = repo.snapshot();
        for (args, needle) in [
            (
                vec!["redact", hash.as_str(), "--reason", "again"],
                "already redacted",
            ),
            (
                vec!["redact", &"ab".repeat(32), "--reason", "x"],
                "no entry",
            ),
            (
                vec!["redact", "nothex", "--reason", "x"],
                "not a payload hash",
            ),
        ] {
            let o = repo.forum().args(&args).output().unwrap();
            assert_eq!(o.status.code(), Some(2), "{args:?}");
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(err.trim_end().lines().count(), 1, "{err}");
            assert!(err.contains(needle), "{err}");
            assert_eq!(repo.snapshot(), before, "{args:?}");
        }
    }
}
