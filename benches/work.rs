//! The cost of a `--work` run's git side: `cargo bench --bench work` (add
//! `-- --files N --tasks K --runs R`; defaults 10,000 files, 15 tasks, 5 runs).
//!
//! 1. Per task, on a repository of N files: `open_task` (a worktree at the base), a one-file
//!    edit, `commit` (add -A, write-tree, commit-tree, update-ref, one diff for the statistics
//!    and the capped patch), one `true` check, and `close` (the worktree's removal), timed
//!    against plain `git worktree add --detach` + `git worktree remove --force` measured in the
//!    same run, the two interleaved (in ABBA order) so drift on a shared machine hits both
//!    alike and neither side always runs right after the other. Prints each part's median,
//!    the medians of the totals and their ratio, and the CPU time of the child
//!    processes (user + system, from `/proc/self/stat`), which a loaded machine distorts less
//!    than the wall clock.
//! 2. Whole `git forum submit` processes on a scripted worker (plan, one task that fixes a bug,
//!    gate `merge`, verdict `pass`): the same run without `--work` and with it, R of each,
//!    interleaved; prints the medians, their ratio and the CPU time of each side.
//!
//! 3. `git forum demo`, R times, against the scripted one-task `submit --work` of part 2.
//!
//! The load average is printed before and after. Nothing here asserts a time: read the ratios.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use git_forum::run::{Author, ChangeLimits, CommitRules, Tie, Workbench};
use git_forum::work::{GitWork, WorkRoot};

#[path = "support/git.rs"]
mod support_git;
use support_git::{git, hermetic};

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

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// The clock ticks per second of `/proc` times.
fn ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// CPU time (user + system, ms) of this process's children that have been waited for, or
/// (`own`) of this process itself.
fn proc_cpu(tick: f64, own: bool) -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<f64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    // Fields 14 and 15 (utime, stime) or 16 and 17 (cutime, cstime); `after` starts at
    // field 3.
    let at = if own { 11 } else { 13 };
    (f.get(at).copied().unwrap_or(0.0) + f.get(at + 1).copied().unwrap_or(0.0)) * 1000.0 / tick
}

fn children_cpu(tick: f64) -> f64 {
    proc_cpu(tick, false)
}

/// Per-part samples: wall ms and child CPU ms, each time.
#[derive(Default)]
struct Part {
    wall: Vec<f64>,
    cpus: Vec<f64>,
    cpu: f64,
}

impl Part {
    fn add(&mut self, wall: Duration, cpu: f64) {
        self.wall.push(ms(wall));
        self.cpus.push(cpu);
        self.cpu += cpu;
    }
    fn median(&mut self) -> f64 {
        median(&mut self.wall)
    }
    /// The median child CPU of one sample (ms; `/proc` counts in clock ticks).
    fn cpu_each(&mut self) -> f64 {
        median(&mut self.cpus)
    }
}

/// Times `f`: wall clock and the CPU of the children it waited for.
fn timed<T>(tick: f64, part: &mut Part, f: impl FnOnce() -> T) -> T {
    let c = children_cpu(tick);
    let t = Instant::now();
    let out = f();
    part.add(t.elapsed(), children_cpu(tick) - c);
    out
}

fn per_task(tmp: &Path, files: usize, tasks: usize, tick: f64) {
    let repo = tmp.join("repo");
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
    let work = GitWork::open_under(&WorkRoot::at(tmp.join("work")), &repo, "main", 1).unwrap();
    let scanner = git_forum::secrets::Scanner::new();
    let open_ms = ms(t.elapsed());
    let author = Author {
        lane: "bench".into(),
        model: "none".into(),
    };
    let plain_dir = tmp.join("plain");
    let plain_dir = plain_dir.to_str().unwrap();
    let (mut add, mut remove, mut plain) = (Part::default(), Part::default(), Part::default());
    let (mut open, mut commit, mut check, mut close, mut total) = (
        Part::default(),
        Part::default(),
        Part::default(),
        Part::default(),
        Part::default(),
    );
    let mut commit_own = Vec::new();
    for i in 0..tasks {
        // The baseline: what git itself spends on a worktree.
        let mut baseline = || {
            let (c0, t0) = (children_cpu(tick), Instant::now());
            timed(tick, &mut add, || {
                git(
                    &repo,
                    &["worktree", "add", "--detach", "-q", plain_dir, "HEAD"],
                )
            });
            timed(tick, &mut remove, || {
                git(&repo, &["worktree", "remove", "--force", plain_dir])
            });
            plain.add(t0.elapsed(), children_cpu(tick) - c0);
        };
        // Which side goes first alternates (ABBA), so neither always follows the other.
        if i % 2 == 0 {
            baseline();
        }

        let task = format!("t{i}");
        // A run screens what each change adds with the built-in rules, as here.
        let screen = |text: &str| -> Vec<(usize, String, String)> {
            scanner
                .scan_text(text)
                .into_iter()
                .map(|f| {
                    (
                        f.span().start,
                        f.rule().to_string(),
                        f.fingerprint().to_string(),
                    )
                })
                .collect()
        };
        let rules = CommitRules {
            diff_cap: 64 * 1024,
            limits: ChangeLimits::default(),
            screen: &screen,
        };
        let (c0, t0) = (children_cpu(tick), Instant::now());
        let tree = timed(tick, &mut open, || work.open_task(&task, &[]).unwrap());
        let tie = Tie {
            ledger: "main".into(),
            run_seq: 1,
            task_seq: i as u64 + 2,
            task_hash: "ab".repeat(32),
        };
        let own = proc_cpu(tick, true);
        let change = timed(tick, &mut commit, || {
            std::fs::write(
                tree.path.join("d000/f0.txt"),
                format!("edited by task {i}\n"),
            )
            .unwrap();
            work.commit(&tree, &author, &tie, "one edit", &rules)
                .unwrap()
        });
        assert!(change.commit.is_some());
        commit_own.push(proc_cpu(tick, true) - own);
        let ran = timed(tick, &mut check, || {
            work.check(&tree, "true", Duration::from_secs(60), 4096)
                .unwrap()
        });
        assert!(ran.ok);
        timed(tick, &mut close, || work.close(&tree).unwrap());
        total.add(t0.elapsed(), children_cpu(tick) - c0);
        if i % 2 == 1 {
            baseline();
        }
    }
    work.finish().unwrap();
    let (p, w) = (plain.median(), total.median());
    let own = median(&mut commit_own);
    println!("## per task: {files} files, {tasks} tasks");
    println!("GitWork::open (cleanup_stale, base, status): {open_ms:.1} ms");
    println!(
        "plain git worktree add + remove: median {p:.1} ms (add {:.1}, remove {:.1}); child CPU {:.1} ms",
        add.median(),
        remove.median(),
        plain.cpu_each()
    );
    println!(
        "per task: median {w:.1} ms (open_task {:.1}, commit {:.1}, check {:.1}, close {:.1}); child CPU {:.1} ms (open_task {:.1}, commit {:.1}, check {:.1}, close {:.1})",
        open.median(),
        commit.median(),
        check.median(),
        close.median(),
        total.cpu_each(),
        open.cpu_each(),
        commit.cpu_each(),
        check.cpu_each(),
        close.cpu_each()
    );
    println!("commit: CPU of this process (median): {own:.1} ms");
    println!(
        "ratio (per task / plain): wall {:.2}, child CPU {:.2}",
        w / p,
        total.cpu / plain.cpu.max(1e-9)
    );
}

/// A scripted model for `submit`: the plan (one task), a fixed edit for the task, `merge` at
/// the gate, `pass` for the verdict, a fixed answer.
const MODEL: &str = r#"#!/bin/sh
p="$1"
case "$p" in
  *"Break this request"*) echo '{"tasks":[{"id":"T1","agent":"backend","instruction":"make add in calc.py add","depends_on":[],"done_when":["the tests pass"]}]}' ;;
  *"Decide whether to ship"*) echo '{"decision":"merge","reason":"scripted"}' ;;
  *"Judge one task"*) echo '{"decision":"pass","score":0.9,"reason":"ok"}' ;;
  *"Write the answer"*) echo 'Fixed calc.' ;;
  *) sed -i 's/return a - b/return a + b/' calc.py; echo 'fixed add' ;;
esac
"#;

fn submit_overhead(tmp: &Path, runs: usize, tick: f64) {
    let repo = tmp.join("submit");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main", "."]);
    let w = |p: &str, s: &str| std::fs::write(repo.join(p), s).unwrap();
    w("calc.py", "def add(a, b):\n    return a - b\n");
    w(
        "test_calc.py",
        "import unittest\n\nimport calc\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n",
    );
    w(".gitignore", "*.sh\n");
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "calc with a bug"]);
    let model = repo.join("model.sh");
    std::fs::write(&model, MODEL).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&model, std::fs::Permissions::from_mode(0o755)).unwrap();
    let model = model.to_str().unwrap().to_string();
    let forum = |extra: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_git-forum"));
        hermetic(&mut c, &repo);
        let o = c
            .current_dir(&repo)
            .arg("submit")
            .args(extra)
            .args(["--cmd", &model, "make the failing test in calc pass"])
            .output()
            .expect("git-forum");
        assert!(
            o.status.success(),
            "submit {extra:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let (mut plain, mut work) = (Part::default(), Part::default());
    for _ in 0..runs {
        timed(tick, &mut plain, || forum(&[]));
        // Without --work the worker edited the user's tree: put it back (not timed).
        git(&repo, &["checkout", "-q", "--", "calc.py"]);
        timed(tick, &mut work, || forum(&["--work"]));
    }
    let (p, w) = (plain.median(), work.median());
    println!("## submit on a scripted worker, {runs} runs each");
    println!(
        "without --work: median {p:.1} ms, CPU {:.1} ms; with --work: median {w:.1} ms, CPU {:.1} ms",
        plain.cpu_each(),
        work.cpu_each()
    );
    println!(
        "ratio (--work / without): wall {:.2} (medians), CPU {:.2} (totals)",
        w / p,
        work.cpu / plain.cpu.max(1e-9)
    );
}

/// `git forum demo` R times, interleaved with the scripted one-task `submit --work` it is
/// measured against (the same job a user's first run does, without the demo's second change
/// and its quarantine): prints both medians and their ratio.
fn demo(tmp: &Path, runs: usize, tick: f64) {
    let (mut demo, mut work) = (Part::default(), Part::default());
    let repo = tmp.join("demo-baseline");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main", "."]);
    std::fs::write(repo.join("calc.py"), "def add(a, b):\n    return a - b\n").unwrap();
    std::fs::write(repo.join(".gitignore"), "*.sh\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "calc with a bug"]);
    let model = repo.join("model.sh");
    std::fs::write(&model, MODEL).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&model, std::fs::Permissions::from_mode(0o755)).unwrap();
    let forum = |dir: &Path, args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_git-forum"));
        hermetic(&mut c, dir);
        let o = c.current_dir(dir).args(args).output().expect("git-forum");
        // The demo ends `partial` (12): one change delivered, one quarantined.
        assert!(
            o.status.success() || o.status.code() == Some(12),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    for i in 0..runs {
        let dir = tmp.join(format!("demo-{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let d = dir.to_str().unwrap().to_string();
        timed(tick, &mut demo, || forum(tmp, &["demo", "--dir", &d]));
        let m = model.to_str().unwrap();
        timed(tick, &mut work, || {
            forum(
                &repo,
                &["submit", "--work", "--cmd", m, "make add in calc.py add"],
            )
        });
    }
    let (d, w) = (demo.median(), work.median());
    println!("## git forum demo, {runs} runs");
    println!(
        "demo: median {d:.1} ms, CPU {:.1} ms; a scripted one-task submit --work: median {w:.1} ms; ratio {:.2}",
        demo.cpu_each(),
        d / w
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let files = arg(&args, "--files", 10_000);
    let tasks = arg(&args, "--tasks", 15);
    let runs = arg(&args, "--runs", 5);
    let tick = ticks();
    let tmp = match args
        .iter()
        .position(|a| a == "--dir")
        .and_then(|i| args.get(i + 1))
    {
        Some(dir) => tempfile::tempdir_in(dir).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    println!("repositories under {}", tmp.path().display());
    println!("load average before: {}", load());
    if tasks > 0 && files > 0 {
        per_task(tmp.path(), files, tasks, tick);
    }
    if runs > 0 {
        submit_overhead(tmp.path(), runs, tick);
        demo(tmp.path(), runs, tick);
    }
    println!("load average after: {}", load());
}
