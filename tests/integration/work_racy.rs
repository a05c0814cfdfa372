//! A task's commit right after its worktree's checkout: git forum
//! lets `git add -A` trust the stat data the checkout recorded only when nanosecond stat data
//! proves the racily clean files untouched (`src/work/racy.rs`). These edits land within the
//! checkout's second, where whole-second stat data cannot see them; each must still be in the
//! change, on every repository format, and the worktree must read clean after the commit.

use std::path::Path;

use git_forum::run::{Author, CommitRules, Tie, Workbench};

use crate::common::{Repo, on_each_kind};

/// 2,000 files: an index past the size below which git forum lets git re-hash.
fn seeded(repo: &Repo) {
    for i in 0..2000 {
        std::fs::write(
            repo.path().join(format!("f{i}.txt")),
            format!("file {i:04}\n"),
        )
        .unwrap();
    }
    std::fs::write(repo.path().join("run.sh"), "echo hi\n").unwrap();
    std::fs::write(repo.path().join(".gitignore"), "*.log\n").unwrap();
    repo.git_ok(&["add", "-A"]);
    repo.git_ok(&["commit", "-q", "-m", "seed"]);
}

fn author() -> Author {
    Author {
        lane: "coder".into(),
        model: "tiny-1".into(),
    }
}

fn tie(task_seq: u64) -> Tie {
    Tie {
        ledger: "main".into(),
        run_seq: 3,
        task_seq,
        task_hash: format!("{task_seq:064x}"),
    }
}

/// The files of a change as `(path, status)`.
fn listed(change: &git_forum::run::Change) -> Vec<(String, String)> {
    change
        .files
        .iter()
        .map(|f| (f.path.clone(), f.status.clone()))
        .collect()
}

fn blob(repo: &Repo, commit: &str, path: &str) -> String {
    repo.git_ok(&["show", &format!("{commit}:{path}")])
}

fn status(dir: &Path) -> String {
    let o = std::process::Command::new("git")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_SYSTEM", "/dev/null")
        .args(["status", "--porcelain"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn same_size_edits_in_the_checkout_second_are_committed() {
    on_each_kind(|repo| {
        seeded(repo);
        let work = repo.open_work(repo.path(), "main", 3).unwrap();
        let tree = work.open_task("t1", &[]).unwrap();
        // Rewritten in place (same inode), same size, at once: only nanoseconds tell.
        std::fs::write(tree.path.join("f7.txt"), "FILE 0007\n").unwrap();
        let change = work
            .commit(
                &tree,
                &author(),
                &tie(2),
                "same size",
                &CommitRules::unscreened(1 << 20),
            )
            .unwrap();
        let commit = change.commit.clone().expect("the edit is a change");
        assert_eq!(listed(&change), [("f7.txt".to_string(), "M".to_string())]);
        assert_eq!(blob(repo, &commit, "f7.txt"), "FILE 0007");
        assert_eq!(status(&tree.path), "");
        work.close(&tree).unwrap();

        // The exec bit alone (same content, same size).
        let tree = work.open_task("t2", &[]).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            tree.path.join("run.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let change = work
            .commit(
                &tree,
                &author(),
                &tie(3),
                "mode",
                &CommitRules::unscreened(1 << 20),
            )
            .unwrap();
        let commit = change.commit.clone().expect("the mode is a change");
        assert_eq!(listed(&change), [("run.sh".to_string(), "M".to_string())]);
        assert!(
            repo.git_ok(&["ls-tree", &commit, "run.sh"])
                .starts_with("100755 "),
        );
        work.close(&tree).unwrap();
        work.finish().unwrap();
    });
}

#[test]
fn edits_git_sees_by_size_and_new_files_are_committed_and_the_rest_kept() {
    on_each_kind(|repo| {
        seeded(repo);
        let work = repo.open_work(repo.path(), "main", 3).unwrap();
        let tree = work.open_task("t1", &[]).unwrap();
        std::fs::write(tree.path.join("f1.txt"), "a longer file one\n").unwrap();
        std::fs::remove_file(tree.path.join("f2.txt")).unwrap();
        std::fs::write(tree.path.join("new.txt"), "new\n").unwrap();
        std::fs::write(tree.path.join("debug.log"), "ignored\n").unwrap();
        let change = work
            .commit(
                &tree,
                &author(),
                &tie(2),
                "edits",
                &CommitRules::unscreened(1 << 20),
            )
            .unwrap();
        let commit = change.commit.clone().expect("a change");
        assert_eq!(
            listed(&change),
            [
                ("f1.txt".to_string(), "M".to_string()),
                ("f2.txt".to_string(), "D".to_string()),
                ("new.txt".to_string(), "A".to_string()),
            ]
        );
        assert_eq!(blob(repo, &commit, "f1.txt"), "a longer file one");
        let names = repo.git_ok(&["ls-tree", "-r", "--name-only", &commit]);
        assert_eq!(names.lines().count(), 2002);
        assert!(!names.contains("debug.log"));
        assert_eq!(status(&tree.path), "");
        work.close(&tree).unwrap();

        // A task that changes nothing gives no commit.
        let tree = work.open_task("t2", &[]).unwrap();
        let change = work
            .commit(
                &tree,
                &author(),
                &tie(3),
                "nothing",
                &CommitRules::unscreened(1 << 20),
            )
            .unwrap();
        assert_eq!(change.commit, None);
        assert!(change.files.is_empty());
        work.close(&tree).unwrap();
        work.finish().unwrap();
    });
}
