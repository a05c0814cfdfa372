//! The git side of a `--work` run: `GitWork` driven through the library API on real
//! temporary repositories of every format: worktrees per task, change commits with trailers and
//! statistics, upstream merges, the run branch, checks with deadlines, kept refs, and cleaning
//! up after a run killed with SIGKILL. The user's HEAD, index and work tree never change.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::Duration;

use git_forum::run::{Author, CommitRules, Keep, Tie, WorkError, Workbench};
use git_forum::work::{cleanup_stale_under, run_branch};

use crate::common::{Guarded, Repo, on_each_kind};

/// A repository with two committed files, a `.gitignore` for `*.log`, and an uncommitted edit
/// in the user's tree (which must stay exactly as it is).
fn seeded(repo: &Repo) {
    std::fs::write(repo.path().join("a.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(repo.path().join("b.txt"), "bee\n").unwrap();
    std::fs::write(repo.path().join(".gitignore"), "*.log\n").unwrap();
    std::fs::create_dir(repo.path().join("sub")).unwrap();
    std::fs::write(repo.path().join("sub/c.txt"), "sea\n").unwrap();
    repo.git_ok(&["add", "-A"]);
    repo.git_ok(&["commit", "-q", "-m", "seed"]);
    std::fs::write(repo.path().join("b.txt"), "bee, edited by the user\n").unwrap();
}

/// What the user has: HEAD, the branch, `git status`, the index's tree.
fn user_state(repo: &Repo) -> String {
    format!(
        "{}\n{}\n{}\n{}",
        repo.git_ok(&["rev-parse", "HEAD"]),
        repo.git_ok(&["symbolic-ref", "HEAD"]),
        repo.git_ok(&["status", "--porcelain"]),
        repo.git_ok(&["write-tree"]),
    )
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
        run_seq: 7,
        task_seq,
        task_hash: format!("{task_seq:064x}"),
    }
}

fn edit(dir: &Path, file: &str, text: &str) {
    std::fs::write(dir.join(file), text).unwrap();
}

fn worktrees(repo: &Repo) -> usize {
    repo.git_ok(&["worktree", "list", "--porcelain"])
        .lines()
        .filter(|l| l.starts_with("worktree "))
        .count()
}

#[test]
fn a_change_is_one_commit_with_trailers_statistics_and_no_ignored_file() {
    on_each_kind(|repo| {
        seeded(repo);
        let before = user_state(repo);
        // Opened from a subdirectory, as `git -C repo/sub forum ...` would.
        let work = repo.open_work(&repo.path().join("sub"), "main", 7).unwrap();
        let base = work.base().clone();
        assert_eq!(base.commit, repo.git_ok(&["rev-parse", "HEAD"]));
        assert_eq!(base.dirty, ["b.txt"]);
        assert!(base.branch.is_some());
        let tree = work.open_task("t1", &[]).unwrap();
        // Outside the git dir and the user's tree, under the cache's work root.
        assert!(
            tree.path.starts_with(repo.work_area("main", 7)),
            "{}",
            tree.path.display()
        );
        let common = repo.git_dir().canonicalize().unwrap();
        assert!(!tree.path.starts_with(&common) && !tree.path.starts_with(repo.path()));
        edit(&tree.path, "a.txt", "one\n2\nthree\nfour\n");
        edit(&tree.path, "new.txt", "new\n");
        edit(&tree.path, "debug.log", "ignored\n");
        std::fs::remove_file(tree.path.join("sub/c.txt")).unwrap();
        let change = work
            .commit(
                &tree,
                &author(),
                &tie(3),
                "make it count\nmore",
                &CommitRules::unscreened(1 << 20),
            )
            .unwrap();
        let commit = change.commit.clone().expect("a commit");
        assert_eq!(change.base, base.commit);
        assert_eq!(
            change.tree,
            repo.git_ok(&["rev-parse", &format!("{commit}^{{tree}}")])
        );
        let files: Vec<(String, String, u64, u64)> = change
            .files
            .iter()
            .map(|f| (f.path.clone(), f.status.clone(), f.added, f.removed))
            .collect();
        assert_eq!(
            files,
            [
                ("a.txt".to_string(), "M".to_string(), 2, 1),
                ("new.txt".to_string(), "A".to_string(), 1, 0),
                ("sub/c.txt".to_string(), "D".to_string(), 0, 1),
            ]
        );
        assert!(change.diff.contains("+four"), "{}", change.diff);
        assert!(!change.truncated);
        let listed = repo.git_ok(&["ls-tree", "-r", "--name-only", &commit]);
        assert!(!listed.contains("debug.log"), "{listed}");
        let message = repo.git_ok(&["log", "-1", "--format=%B", &commit]);
        let trailers = repo.git_in(&["interpret-trailers", "--parse"], message.as_bytes());
        assert_eq!(
            trailers,
            format!(
                "Forum-Ledger: main\nForum-Run: 7\nForum-Task: 3\nForum-Entry: {:064x}",
                3
            )
        );
        assert_eq!(
            repo.git_ok(&["log", "-1", "--format=%s|%an|%ae", &commit]),
            "make it count|coder (tiny-1)|coder@git-forum.invalid"
        );
        assert_eq!(
            repo.git_ok(&["rev-parse", &format!("{commit}^")]),
            base.commit
        );
        // The payload is what the `change` entry carries.
        let p = change.payload();
        assert_eq!(p["commit"], serde_json::json!(commit));
        assert_eq!(p["files"].as_array().unwrap().len(), 3);

        // The diff is cut at its cap, the commit stays whole.
        let t2 = work.open_task("t2", &[]).unwrap();
        edit(&t2.path, "a.txt", &"long line\n".repeat(100));
        let cut = work
            .commit(
                &t2,
                &author(),
                &tie(4),
                "long",
                &CommitRules::unscreened(64),
            )
            .unwrap();
        assert!(cut.truncated);
        assert!(cut.diff.len() <= 64);
        // Nothing changed (an ignored file only): no commit.
        let t3 = work.open_task("t3", &[]).unwrap();
        edit(&t3.path, "only.log", "x\n");
        let none = work
            .commit(
                &t3,
                &author(),
                &tie(5),
                "nothing",
                &CommitRules::unscreened(1024),
            )
            .unwrap();
        assert_eq!(none.commit, None);
        assert!(none.files.is_empty());
        assert_eq!(none.tree, repo.git_ok(&["rev-parse", "HEAD^{tree}"]));
        assert_eq!(none.payload()["commit"], serde_json::Value::Null);

        work.close(&t3).unwrap();
        assert!(!t3.path.exists());
        assert_eq!(worktrees(repo), 3);
        work.finish().unwrap();
        assert_eq!(worktrees(repo), 1);
        assert!(!work.area().exists());
        assert_eq!(user_state(repo), before);
        repo.fsck();
    });
}

#[test]
fn upstreams_merge_into_a_task_and_the_run_branch_holds_one_commit_per_task_in_order() {
    on_each_kind(|repo| {
        seeded(repo);
        let before = user_state(repo);
        let work = repo.open_work(repo.path(), "main", 7).unwrap();
        let base = work.base().commit.clone();
        let change = |task: &str, file: &str, text: &str, seq: u64| {
            let t = work.open_task(task, &[]).unwrap();
            edit(&t.path, file, text);
            let c = work.commit(
                &t,
                &author(),
                &tie(seq),
                &format!("task {task}"),
                &CommitRules::unscreened(4096),
            );
            work.close(&t).unwrap();
            c.unwrap().commit.unwrap()
        };
        let c1 = change("t1", "a.txt", "one\nTWO\nthree\n", 1);
        let c2 = change("t2", "sub/c.txt", "SEA\n", 2);
        let c3 = change("t3", "a.txt", "one\ndeux\nthree\n", 3);

        // A task on two upstreams sees both changes.
        let t4 = work.open_task("t4", &[c1.clone(), c2.clone()]).unwrap();
        assert_eq!(
            std::fs::read_to_string(t4.path.join("a.txt")).unwrap(),
            "one\nTWO\nthree\n"
        );
        assert_eq!(
            std::fs::read_to_string(t4.path.join("sub/c.txt")).unwrap(),
            "SEA\n"
        );
        work.close(&t4).unwrap();
        // Upstreams that conflict: no worktree, the paths named.
        match work.open_task("t5", &[c1.clone(), c3.clone()]) {
            Err(WorkError::Conflict { paths }) => assert_eq!(paths, ["a.txt"]),
            other => panic!("expected a conflict, got {other:?}"),
        }

        for (task, c) in [("t1", &c1), ("t2", &c2), ("t3", &c3)] {
            work.keep(task, c, Keep::Work).unwrap();
        }
        let tip1 = work.integrate("t1", &c1).unwrap();
        assert_eq!(tip1, c1, "a change on the tip is taken as it is");
        let tip2 = work.integrate("t2", &c2).unwrap();
        let branch = run_branch(7);
        let log = repo.git_ok(&["log", "--format=%s", &format!("{base}..{branch}")]);
        assert_eq!(log, "task t2\ntask t1");
        // The copy keeps author, message and trailers.
        assert_eq!(
            repo.git_ok(&["log", "-1", "--format=%an|%B", &tip2]),
            repo.git_ok(&["log", "-1", "--format=%an|%B", &c2])
        );
        assert_eq!(repo.git_ok(&["rev-parse", &format!("{tip2}^")]), tip1);
        // A conflicting change leaves the branch where it was.
        match work.integrate("t3", &c3) {
            Err(WorkError::Conflict { paths }) => assert_eq!(paths, ["a.txt"]),
            other => panic!("expected a conflict, got {other:?}"),
        }
        assert_eq!(repo.git_ok(&["rev-parse", &branch]), tip2);
        // A re-run on top of the integrated result starts at the tip.
        let again = work.open_branch("t3").unwrap();
        assert_eq!(again.start, tip2);
        work.close(&again).unwrap();

        // Quarantine moves the kept change out of refs/forum/work.
        work.keep("t3", &c3, Keep::Quarantine).unwrap();
        let refs = repo.git_ok(&["for-each-ref", "--format=%(refname)", "refs/forum/"]);
        assert_eq!(
            refs,
            "refs/forum/quarantine/main/7/t3\nrefs/forum/work/main/7/t1\nrefs/forum/work/main/7/t2"
        );
        assert!(work.has_commit(&c3));
        assert!(!work.has_commit(&"0".repeat(c3.len())));
        work.finish().unwrap();
        assert_eq!(worktrees(repo), 1);
        assert_eq!(user_state(repo), before);
        repo.fsck();
    });
}

/// Whether process `pid` is gone (or a zombie waiting for its reaper).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

#[test]
fn checks_give_exit_codes_and_tails_and_a_hang_is_killed_with_its_children() {
    let repo = Repo::new("sha1");
    seeded(&repo);
    let work = repo.open_work(repo.path(), "main", 7).unwrap();
    let t = work.open_task("t1", &[]).unwrap();
    let big = Duration::from_secs(60);
    let pass = work.check(&t, "test -f a.txt", big, 1024).unwrap();
    assert_eq!((pass.exit, pass.ok), (Some(0), true));
    let fail = work
        .check(&t, "echo out; echo err >&2; exit 3", big, 1024)
        .unwrap();
    assert_eq!((fail.exit, fail.ok), (Some(3), false));
    assert_eq!(fail.tail, "out\nerr\n");
    let long = work
        .check(&t, "yes line | head -n 100000; echo END", big, 16)
        .unwrap();
    assert!(
        long.tail.len() <= 16 && long.tail.ends_with("END\n"),
        "{:?}",
        long.tail
    );
    // The check sleeps past its deadline and leaves a child behind: both are killed.
    let hang = work
        .check(
            &t,
            "sleep 300 & echo $! > child.pid; sleep 300",
            Duration::from_millis(300),
            1024,
        )
        .unwrap();
    assert_eq!((hang.exit, hang.ok), (None, false));
    let child: u32 = std::fs::read_to_string(t.path.join("child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SIGKILL was sent; wait (bounded) for the kernel to finish delivering it.
    crate::common::poll_until(Duration::from_secs(5), || gone(child));
    assert!(gone(child), "the check's child {child} survived");
    work.finish().unwrap();
}

#[test]
fn a_work_area_left_by_a_killed_run_is_removed_by_cleanup_stale() {
    on_each_kind(|repo| {
        seeded(repo);
        let before = user_state(repo);
        let common = repo.git_dir().canonicalize().unwrap();
        // A live run of this process keeps its area.
        let live = repo.open_work(repo.path(), "main", 1).unwrap();
        let live_tree = live.open_task("t1", &[]).unwrap();
        // Another process's run: its worktree and its `.owner` locked by that process.
        let dead = repo.work_area("main", 1).with_file_name("2");
        std::fs::create_dir_all(&dead).unwrap();
        let dead_tree = dead.join("t1");
        repo.git_ok(&[
            "worktree",
            "add",
            "--detach",
            "-q",
            dead_tree.to_str().unwrap(),
            "HEAD",
        ]);
        let ready = dead.join("ready");
        let holder = std::process::Command::new("flock")
            .arg(dead.join(".owner"))
            .arg("-c")
            .arg(format!("touch '{}'; exec sleep 300", ready.display()))
            .process_group(0)
            .spawn()
            .unwrap();
        let mut holder = Guarded(holder);
        // `ready` appears once flock holds the lock; wait (bounded) for it.
        crate::common::poll_until(Duration::from_secs(10), || ready.exists());
        assert!(ready.exists(), "flock never took the lock");
        assert_eq!(
            cleanup_stale_under(&repo.work_root(), repo.path()).unwrap(),
            Vec::<std::path::PathBuf>::new()
        );
        assert!(dead_tree.exists());
        // Killed with SIGKILL: the kernel drops its lock, the next cleanup takes the area.
        let group = format!("-{}", holder.0.id());
        let killed = std::process::Command::new("kill")
            .args(["-KILL", "--", &group])
            .status()
            .unwrap();
        assert!(killed.success());
        holder.0.wait().unwrap();
        // A run of a version that kept its worktrees under the git dir left one there too.
        let legacy = common.join("forum/work/main/3");
        std::fs::create_dir_all(&legacy).unwrap();
        std::fs::write(legacy.join(".owner"), "").unwrap();
        let legacy_tree = legacy.join("t1");
        repo.git_ok(&[
            "worktree",
            "add",
            "--detach",
            "-q",
            legacy_tree.to_str().unwrap(),
            "HEAD",
        ]);
        let removed = cleanup_stale_under(&repo.work_root(), repo.path()).unwrap();
        assert_eq!(removed, [dead.clone(), legacy.clone()]);
        assert!(!dead.exists() && !legacy.exists());
        assert!(live_tree.path.exists(), "a live run's worktree stays");
        assert_eq!(worktrees(repo), 2);
        // A second open of a live area is refused in one line.
        match repo.open_work(repo.path(), "main", 1) {
            Err(e) => assert!(e.to_string().contains("in use by another git forum"), "{e}"),
            Ok(_) => panic!("a live area was opened twice"),
        }
        live.finish().unwrap();
        assert_eq!(worktrees(repo), 1);
        assert_eq!(user_state(repo), before);
        repo.fsck();
    });
}

#[test]
fn a_repository_without_a_commit_has_no_base() {
    let repo = Repo::new("sha1");
    match repo.open_work(repo.path(), "main", 1) {
        Err(e) => assert_eq!(
            e.to_string(),
            "git failed: HEAD has no commit yet, so a --work run has no base; commit once first"
        ),
        Ok(_) => panic!("opened without a base"),
    }
}

#[test]
fn the_worktrees_of_a_clone_that_is_gone_are_removed_when_a_run_opens() {
    let repo = Repo::new("sha1");
    seeded(&repo);
    // Another clone ran a task, then was deleted with its worktree still in the cache.
    let other = Repo::new("sha1");
    seeded(&other);
    let root = repo.work_root();
    let left = git_forum::work::GitWork::open_under(&root, other.path(), "main", 4).unwrap();
    let t = left.open_task("t1", &[]).unwrap();
    let clone_dir = t
        .path
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    assert!(clone_dir.join("clone").is_file());
    drop(left);
    drop(other);
    assert!(t.path.exists());
    // The next run that opens, in any clone, removes what the gone clone left.
    let work = repo.open_work(repo.path(), "main", 1).unwrap();
    assert!(!clone_dir.exists(), "{clone_dir:?} was kept");
    work.finish().unwrap();
}

#[test]
fn a_waves_worktrees_closed_together_leave_no_folder_and_no_record_and_others_stay_open() {
    on_each_kind(|repo| {
        seeded(repo);
        let before = user_state(repo);
        let work = repo.open_work(repo.path(), "main", 7).unwrap();
        let trees: Vec<_> = ["t1", "t2", "t3"]
            .iter()
            .map(|t| work.open_task(t, &[]).unwrap())
            .collect();
        // One of them holds an untracked file and an edit: closing drops them all the same.
        edit(&trees[0].path, "a.txt", "changed\n");
        edit(&trees[0].path, "new.txt", "new\n");
        let other = work.open_task("t4", &[]).unwrap();
        assert_eq!(worktrees(repo), 5);
        work.close_all(&trees).unwrap();
        for t in &trees {
            assert!(t.path.symlink_metadata().is_err(), "{}", t.path.display());
        }
        // git forgot the three; the one left open is still a worktree that works.
        assert_eq!(worktrees(repo), 2);
        let listed = repo.git_ok(&["worktree", "list", "--porcelain"]);
        assert!(
            listed.contains(&other.path.display().to_string()),
            "{listed}"
        );
        edit(&other.path, "b.txt", "bee, by t4\n");
        let c = work
            .commit(
                &other,
                &author(),
                &tie(4),
                "task t4",
                &CommitRules::unscreened(4096),
            )
            .unwrap();
        assert!(c.commit.is_some());
        // A task closed together may open again under its name.
        let again = work.open_task("t1", &[]).unwrap();
        assert_eq!(
            std::fs::read_to_string(again.path.join("a.txt")).unwrap(),
            "one\ntwo\nthree\n"
        );
        work.close_all(&[again, other]).unwrap();
        work.finish().unwrap();
        assert_eq!(worktrees(repo), 1);
        assert_eq!(user_state(repo), before);
        repo.fsck();
    });
}
