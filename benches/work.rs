//! The per-task cost of a `--work` run's git side: `cargo bench --bench work` (add
//! `-- --files N --tasks K`, default 10,000 files and 15 tasks). On a repository of N files,
//! each task is `open_task` (a worktree at the base) + a one-file edit + `commit` (add -A,
//! write-tree, commit-tree, numstat, name-status, the capped diff) + one `true` check + `close`,
//! timed against plain `git worktree add --detach` + `git worktree remove --force` measured in
//! the same run, the two interleaved so drift on a shared machine hits both alike. Prints the
//! medians, each step's median and the ratio. Nothing here asserts a time: read the ratio.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use git_forum::run::{Author, Tie, Workbench};
use git_forum::work::GitWork;

fn git(dir: &Path, args: &[&str]) {
    let o = Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.invalid",
        ])
        .args(args)
        .output()
        .expect("git");
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let files = arg(&args, "--files", 10_000);
    let tasks = arg(&args, "--tasks", 15).max(1);
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "."]);
    let t = Instant::now();
    for i in 0..files {
        let dir = repo.join(format!("d{:03}", i / 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&dir).unwrap();
        }
        std::fs::write(
            dir.join(format!("f{i}.txt")),
            format!("file {i}\nline two\n"),
        )
        .unwrap();
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "seed"]);
    eprintln!(
        "a repository of {files} files committed in {:.1}s",
        t.elapsed().as_secs_f64()
    );

    let t = Instant::now();
    let work = GitWork::open(&repo, "main", 1).unwrap();
    let open_ms = ms(t.elapsed());
    let author = Author {
        lane: "bench".into(),
        model: "none".into(),
    };
    let plain_dir = tmp.path().join("plain");
    let (mut plain, mut total) = (Vec::new(), Vec::new());
    let (mut open, mut commit, mut check, mut close) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..tasks {
        // The baseline: what git itself spends on a worktree.
        let t = Instant::now();
        git(
            &repo,
            &[
                "worktree",
                "add",
                "--detach",
                "-q",
                plain_dir.to_str().unwrap(),
                "HEAD",
            ],
        );
        git(
            &repo,
            &["worktree", "remove", "--force", plain_dir.to_str().unwrap()],
        );
        plain.push(ms(t.elapsed()));

        let task = format!("t{i}");
        let t0 = Instant::now();
        let tree = work.open_task(&task, &[]).unwrap();
        let t1 = Instant::now();
        std::fs::write(
            tree.path.join("d000/f0.txt"),
            format!("edited by task {i}\n"),
        )
        .unwrap();
        let tie = Tie {
            ledger: "main".into(),
            run_seq: 1,
            task_seq: i as u64 + 2,
            task_hash: "ab".repeat(32),
        };
        let change = work
            .commit(&tree, &author, &tie, "one edit", 64 * 1024)
            .unwrap();
        assert!(change.commit.is_some());
        let t2 = Instant::now();
        let ran = work
            .check(&tree, "true", Duration::from_secs(60), 4096)
            .unwrap();
        assert!(ran.ok);
        let t3 = Instant::now();
        work.close(&tree).unwrap();
        let t4 = Instant::now();
        open.push(ms(t1 - t0));
        commit.push(ms(t2 - t1));
        check.push(ms(t3 - t2));
        close.push(ms(t4 - t3));
        total.push(ms(t4 - t0));
    }
    work.finish().unwrap();
    let (p, w) = (median(&mut plain), median(&mut total));
    println!("files: {files}, tasks: {tasks}");
    println!("GitWork::open (cleanup_stale, base, status): {open_ms:.1} ms");
    println!("plain git worktree add + remove: median {p:.1} ms");
    println!(
        "per task: median {w:.1} ms (open_task {:.1}, commit {:.1}, check {:.1}, close {:.1})",
        median(&mut open),
        median(&mut commit),
        median(&mut check),
        median(&mut close)
    );
    println!("ratio (per task / plain): {:.2}", w / p);
}
