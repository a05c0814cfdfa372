//! A shortcut `verify --deep` takes on its hot path still catches what it skips work on: an
//! entry line whose `ts` is spelled otherwise than Python's `repr` is not taken for canonical
//! by the quick test on the text (src/ledger/canonical/float.rs), so the commit is rebuilt
//! and compared, and found altered; and a commit is hashed to its name by the workers rather
//! than by the walk that follows its parent, so a commit whose stored content was replaced is
//! still named at its seq, even when the parent it now names leads back to the tip.

use serde_json::Value as J;

use crate::common::{FORMATS, Repo, commit_texts, rechain, set_parent};

const REF: &str = crate::common::LEDGER_REF;

fn verify_deep(repo: &Repo) -> J {
    repo.forum_json(&["verify", "--deep"])
}

/// `text` (a commit) with the number after `"ts":` in its entry line replaced by `spelled`.
fn respell_ts(text: &str, spelled: &str) -> String {
    let at = text.rfind("\"ts\":").expect("an entry line") + 5;
    let end = at + text[at..].find('}').expect("the entry ends");
    format!("{}{spelled}{}", &text[..at], &text[end..])
}

#[test]
fn a_ts_spelled_other_than_repr_is_an_altered_commit_on_every_format() {
    for format in FORMATS {
        let repo = Repo::new(format);
        for i in 0..5 {
            repo.forum_ok(&[
                "append",
                "--actor",
                "agent",
                "--kind",
                "note",
                "--ts",
                &format!("{}.5", 1000 + i),
                "--payload",
                &format!(r#"{{"i":{i}}}"#),
            ]);
        }
        assert_eq!(verify_deep(&repo)["ok"], true);
        let texts = commit_texts(&repo, REF);
        assert!(texts[2].contains("\"ts\":1002.5}"), "{}", texts[2]);
        // The same number, spelled four other ways: each reads as the same entry (its hash
        // holds), so only the rebuilt commit can tell.
        for spelled in ["1002.50", "1002.5000000", "1.0025e3", "01002.5"] {
            let mut t = texts.clone();
            t[2] = respell_ts(&t[2], spelled);
            rechain(&repo, &t);
            let r = verify_deep(&repo);
            assert_eq!(r["ok"], false, "{format} {spelled}: {r}");
            assert_eq!(r["first_bad_seq"], 2, "{format} {spelled}: {r}");
            let code = r["code"].as_str().unwrap_or_default();
            assert!(
                code == "commit-altered" || code == "not-a-ledger-commit",
                "{format} {spelled}: {r}"
            );
        }
        // Spelled as repr spells it again, the ledger verifies.
        rechain(&repo, &texts);
        assert_eq!(verify_deep(&repo)["ok"], true, "{format}");
    }
}

/// Stores `content` as a loose object of `kind` under `id`, whatever `id` names.
fn replace_loose(repo: &Repo, id: &str, kind: &str, content: &[u8]) {
    let mut raw = format!("{kind} {}\0", content.len()).into_bytes();
    raw.extend_from_slice(content);
    let mut zlib = libdeflater::Compressor::new(libdeflater::CompressionLvl::default());
    let mut out = vec![0; zlib.zlib_compress_bound(raw.len())];
    let n = zlib.zlib_compress(&raw, &mut out).unwrap();
    let path = repo.git_dir().join("objects").join(&id[..2]).join(&id[2..]);
    assert!(path.exists(), "{id} is stored loose");
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&path, perms).unwrap();
    std::fs::write(&path, &out[..n]).unwrap();
}

#[test]
fn a_commit_whose_content_was_replaced_is_named_wherever_its_parent_leads() {
    for format in FORMATS {
        let repo = Repo::new(format);
        for i in 0..6 {
            repo.append("agent", "note", &format!(r#"{{"i":{i}}}"#));
        }
        let ids = repo.git_ok(&["rev-list", "--first-parent", "--reverse", REF]);
        let ids: Vec<&str> = ids.lines().collect();
        let text = repo.git_ok(&["cat-file", "commit", ids[3]]) + "\n";
        let missing = "1".repeat(ids[0].len());
        // Entry 3's commit now names the tip as its parent (a walk that trusted it would go
        // round for ever), then an object that does not exist, then it is not a commit at all.
        let cases = [
            ("commit", set_parent(&text, Some(ids[5]))),
            ("commit", set_parent(&text, Some(&missing))),
            ("blob", "not a commit".to_string()),
        ];
        for (kind, content) in cases {
            replace_loose(&repo, ids[3], kind, content.as_bytes());
            for deep in [false, true] {
                let args: &[&str] = if deep {
                    &["verify", "--deep"]
                } else {
                    &["verify"]
                };
                let r = repo.forum_json(args);
                assert_eq!(r["ok"], false, "{format} {kind}: {r}");
                assert_eq!(r["code"], "corrupt-object", "{format} {kind}: {r}");
                assert_eq!(r["first_bad_seq"], 3, "{format} {kind}: {r}");
                let problem = r["problem"].as_str().unwrap_or_default();
                assert_eq!(
                    problem,
                    format!(
                        "object {} does not hash to its name (its content was replaced)",
                        ids[3]
                    ),
                    "{format} {kind}: {r}"
                );
            }
        }
    }
}
