//! A shortcut `verify --deep` takes on its hot path still catches what it skips work on: an
//! entry line whose `ts` is spelled otherwise than Python's `repr` is not taken for canonical
//! by the quick test on the text (src/ledger/canonical/float.rs), so the commit is rebuilt
//! and compared, and found altered.

use serde_json::Value as J;

use crate::common::{FORMATS, Repo, commit_texts, rechain};

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
