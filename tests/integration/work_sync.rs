//! The record of a `--work` run travels and is checked: `verify --deep`
//! holds every `change` entry to its commit (it exists, its tree is the entry's, its trailers
//! name an earlier entry by seq and hash), and `git forum push`/`fetch` carry the change refs
//! (`refs/forum/work/*`, `refs/forum/quarantine/*`) beside the ledgers, on every format.

use serde_json::{Value as J, json};

use git_forum::run::{Author, CommitRules, Keep, Tie, Workbench};

use crate::common::{Repo, init_flags, on_each_kind};

fn append(repo: &Repo, ledger: &str, kind: &str, payload: &J) -> J {
    repo.forum_json(&[
        "--ledger",
        ledger,
        "append",
        "--actor",
        "test",
        "--kind",
        kind,
        "--payload",
        &payload.to_string(),
    ])
}

/// In ledger `ledger`: a request, a task entry, a change made by GitWork tied to that task
/// entry (kept under refs/forum/work, or quarantine when `quarantine`), and its `change`
/// entry. Returns the change payload.
fn recorded_change(repo: &Repo, ledger: &str, quarantine: bool) -> J {
    let run = append(repo, ledger, "request", &json!({"text": "edit a"}))["seq"]
        .as_u64()
        .unwrap();
    let task = append(repo, ledger, "task", &json!({"task_id": "t1"}));
    let work = repo.open_work(repo.path(), ledger, run).unwrap();
    let t = work.open_task("t1", &[]).unwrap();
    std::fs::write(t.path.join("a.txt"), format!("edited in {ledger}\n")).unwrap();
    let tie = Tie {
        ledger: ledger.into(),
        run_seq: run,
        task_seq: task["seq"].as_u64().unwrap(),
        task_hash: task["entry_hash"].as_str().unwrap().into(),
    };
    let author = Author {
        lane: "coder".into(),
        model: "m".into(),
    };
    let change = work
        .commit(&t, &author, &tie, "edit", &CommitRules::unscreened(4096))
        .unwrap();
    let place = if quarantine {
        Keep::Quarantine
    } else {
        Keep::Work
    };
    work.keep("t1", change.commit.as_ref().unwrap(), place)
        .unwrap();
    work.finish().unwrap();
    let payload = change.payload();
    append(repo, ledger, "change", &payload);
    payload
}

fn seed(repo: &Repo) {
    std::fs::write(repo.path().join("a.txt"), "a\n").unwrap();
    repo.git_ok(&["add", "-A"]);
    repo.git_ok(&["commit", "-q", "-m", "seed"]);
}

fn verify(repo: &Repo, ledger: &str) -> J {
    repo.forum_json(&["--ledger", ledger, "verify", "--deep"])
}

#[test]
fn verify_deep_holds_each_change_entry_to_its_commit() {
    on_each_kind(|repo| {
        seed(repo);
        let good = recorded_change(repo, "main", false);
        let v = verify(repo, "main");
        assert_eq!(v["ok"], true, "{v}");
        // A change entry naming a commit the repository does not have.
        let commit = good["commit"].as_str().unwrap();
        let absent = "1".repeat(commit.len());
        let mut bad = good.clone();
        bad["commit"] = json!(absent);
        append(repo, "missing", "request", &json!({"text": "x"}));
        let at = append(repo, "missing", "change", &bad)["seq"].clone();
        let v = verify(repo, "missing");
        assert_eq!(
            (
                v["ok"].clone(),
                v["code"].clone(),
                v["first_bad_seq"].clone()
            ),
            (json!(false), json!("change-commit-missing"), at),
            "{v}"
        );
        // A change entry whose tree is not its commit's.
        let mut bad = good.clone();
        bad["tree"] = json!(repo.git_ok(&["rev-parse", "HEAD^{tree}"]));
        append(repo, "tree", "request", &json!({"text": "x"}));
        let at = append(repo, "tree", "change", &bad)["seq"].clone();
        let v = verify(repo, "tree");
        assert_eq!(
            (v["code"].clone(), v["first_bad_seq"].clone()),
            (json!("change-tree-mismatch"), at),
            "{v}"
        );
        // The right commit and tree in another ledger, where its trailers name no entry.
        append(repo, "untied", "request", &json!({"text": "x"}));
        append(repo, "untied", "task", &json!({"task_id": "other"}));
        let at = append(repo, "untied", "change", &good)["seq"].clone();
        let v = verify(repo, "untied");
        assert_eq!(
            (v["code"].clone(), v["first_bad_seq"].clone()),
            (json!("change-untied"), at),
            "{v}"
        );
        // A change that changed nothing names no commit and passes.
        append(repo, "empty", "request", &json!({"text": "x"}));
        let mut none = good.clone();
        none["commit"] = J::Null;
        append(repo, "empty", "change", &none);
        assert_eq!(verify(repo, "empty")["ok"], true);
        // Without --deep the commits are not looked at.
        let shallow = repo.forum_json(&["--ledger", "missing", "verify"]);
        assert_eq!(shallow["ok"], true, "{shallow}");
        repo.fsck();
    });
}

#[test]
fn push_and_fetch_carry_the_change_refs_with_the_ledger() {
    on_each_kind(|repo| {
        let kind = repo.kind();
        seed(repo);
        let kept = recorded_change(repo, "main", false);
        let blocked = recorded_change(repo, "main", true);
        let bare = tempfile::tempdir().unwrap();
        let remote = bare.path().join("remote.git");
        let mut args = vec!["init", "-q", "--bare"];
        let flags = init_flags(kind);
        args.extend(flags.iter().map(String::as_str));
        args.push(remote.to_str().unwrap());
        repo.git_ok(&args);
        let url = format!("file://{}", remote.display());
        repo.git_ok(&["remote", "add", "origin", &url]);
        repo.forum_ok(&["push", "origin"]);
        let there = repo.git_ok(&[
            &format!("--git-dir={}", remote.display()),
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            "refs/forum/work/",
            "refs/forum/quarantine/",
        ]);
        let work_ref = format!(
            "refs/forum/work/main/0/t1 {}",
            kept["commit"].as_str().unwrap()
        );
        let q_ref = format!(
            "refs/forum/quarantine/main/3/t1 {}",
            blocked["commit"].as_str().unwrap()
        );
        assert_eq!(there, format!("{q_ref}\n{work_ref}"));

        // A clone fetches the ledger and the change commits; its copy verifies deep.
        let clone = Repo::new(kind);
        clone.git_ok(&["remote", "add", "origin", &url]);
        let fetched = clone.forum_json(&["fetch", "origin"]);
        assert_eq!(fetched["ledgers"][0]["status"], "new", "{fetched}");
        let here = clone.git_ok(&[
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            "refs/forum/remote-work/",
            "refs/forum/remote-quarantine/",
        ]);
        assert_eq!(
            here,
            format!(
                "refs/forum/remote-quarantine/origin/main/3/t1 {}\nrefs/forum/remote-work/origin/main/0/t1 {}",
                blocked["commit"].as_str().unwrap(),
                kept["commit"].as_str().unwrap()
            )
        );
        clone.fsck();
    });
}
