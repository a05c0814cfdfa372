//! Strict replay screens a local task's change again, as far as the repository still holds
//! what the writer screened: an accepted change from its commit, a change refused for its
//! secrets from the tree it was staged as (which its `change` entry names and nothing else
//! does). A refusal forged over a change that passes, an acceptance forged over a change that
//! adds a secret, and a link that leaves taken out of the record each diverge at the `change`
//! entry; a change refused for its size in a worktree that is gone, and a refused tree `git gc`
//! pruned, are answered from the record, each with one line saying so.
//!
//! One wave of a local `--work` run: T1's worker writes an AWS key, T2's a symbolic link to
//! `/etc/passwd`, T3's a file over the run's `max_file_bytes`.

use serde_json::{Value as J, json};

use crate::common::{Repo, on_each_kind};
use crate::strict_replay_screens::{MAX_FILE_BYTES, THREE, aws_key, change, diverges_at};
use crate::strict_replay_work::{import_forged_as, no_divergence, strict};

/// Records the local run: T1's change refused for its secret, T2's accepted with a link that
/// leaves (which the pre-ship gate refuses), T3's refused for its size.
fn record(repo: &Repo) {
    crate::work_run::setup(repo);
    let key = aws_key();
    let work = format!(
        "    case \"$p\" in\n    *'write f1.txt'*) printf 'aws_access_key_id = %s\\n' '{key}' > f1.txt ;;\n    *'write f2.txt'*) ln -s /etc/passwd f2.txt ;;\n    *) head -c {} /dev/zero | tr '\\000' x > f3.txt ;;\n    esac; echo 'wrote it'",
        MAX_FILE_BYTES + 1000
    );
    let plan = THREE.replace('\n', "");
    let m = crate::work_run::model(repo, "screens", &plan, "merge", &work);
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        format!("[work]\nmax_file_bytes = {MAX_FILE_BYTES}\n"),
    )
    .unwrap();
    let j = repo.forum_json(&[
        "submit",
        "--work",
        "--check",
        "true",
        "--cmd",
        &m,
        "write the files",
    ]);
    assert!(j["answer"].is_string(), "{j}");
}

/// The lines a report says were answered from the record.
fn from_record(r: &J) -> Vec<String> {
    r["from_record"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .map(|l| l.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_local_change_is_screened_again_from_its_commit_or_refused_tree_and_a_forged_screen_diverges() {
    on_each_kind(|repo| {
        record(repo);
        let (t1, c1) = change(repo, "T1");
        assert_eq!(c1["commit"], J::Null, "{c1}");
        assert_eq!(c1["secrets"][0]["path"], "f1.txt", "{c1}");
        let refused_tree = c1["tree"].as_str().expect("the refused tree").to_string();
        let (t2, c2) = change(repo, "T2");
        assert_eq!(c2["links_out"][0]["target"], "/etc/passwd", "{c2}");
        let (_, c3) = change(repo, "T3");
        assert_eq!(c3["refused"], true, "{c3}");

        // Replayed as it was; only T3's size refusal, measured in a worktree that is gone,
        // comes from the record.
        let (code, r) = strict(repo, &[]);
        no_divergence(code, &r);
        let lines = from_record(&r);
        assert_eq!(lines.len(), 1, "{r}");
        assert!(
            lines[0].contains("task T3") && lines[0].contains("max_file_bytes"),
            "{r}"
        );

        // T1's refusal made an acceptance of a commit of the tree it was refused with.
        let base = c1["base"].as_str().unwrap();
        let forged = repo.git_ok(&["commit-tree", &refused_tree, "-p", base, "-m", "T1"]);
        let forged = forged.trim().to_string();
        import_forged_as(repo, "passed", t1, |b| {
            *b = json!({"task": "T1", "base": b["base"], "commit": forged,
                "tree": refused_tree, "files": [], "diff": "", "truncated": false});
        });
        let r = diverges_at(repo, "passed", t1);
        assert!(
            r["divergence"]["recomputed"]
                .as_str()
                .unwrap()
                .contains("secret"),
            "{r}"
        );

        // A secrets refusal forged over T2's change, which adds none: with its tree, and
        // without one (this run keeps the tree of every such refusal).
        let t2_tree = c2["tree"].as_str().unwrap().to_string();
        for (name, tree) in [("secret", Some(t2_tree)), ("treeless", None)] {
            import_forged_as(repo, name, t2, |b| {
                let mut f = json!({"task": "T2", "base": b["base"], "commit": null,
                    "error": "the change adds 1 secret (f2.txt:1 (aws-access-token)); nothing of it was committed",
                    "secrets": [{"path": "f2.txt", "line": 1, "rule": "aws-access-token",
                        "fingerprint": "0000000000000000"}]});
                if let Some(t) = &tree {
                    f["tree"] = json!(t);
                }
                *b = f;
            });
            diverges_at(repo, name, t2);
        }

        // T2's link that leaves taken out of the record.
        import_forged_as(repo, "inside", t2, |b| {
            b.as_object_mut().unwrap().remove("links_out");
        });
        let r = diverges_at(repo, "inside", t2);
        assert!(
            r["divergence"]["recomputed"]
                .as_str()
                .unwrap()
                .contains("/etc/passwd"),
            "{r}"
        );

        // Once `git gc` prunes the refused tree (nothing names it), T1's refusal is the
        // record's, and the replay says so.
        repo.git_ok(&["-c", "gc.reflogExpire=now", "gc", "--prune=now", "-q"]);
        let gone = repo.git(&["cat-file", "-e", &format!("{refused_tree}:f1.txt")]);
        assert!(!gone.status.success(), "the refused blob is still here");
        let (code, r) = strict(repo, &[]);
        no_divergence(code, &r);
        let lines = from_record(&r);
        assert_eq!(lines.len(), 2, "{r}");
        assert!(
            lines
                .iter()
                .any(|l| l.contains("task T1") && l.contains("git gc")),
            "{r}"
        );
    });
}
