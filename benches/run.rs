//! A scripted run's own overhead, against Forum's: `cargo bench --bench run` (add `-- --runs R
//! --busy --dir DIR --forum PATH`; default 9 runs each).
//!
//! One `sh` script is the model of both sides (`--cmd SCRIPT`, the prompt as its last
//! argument). It answers the planner with the same four tasks in two waves (T1 and T2, then T3
//! and T4, which both build on T1 and T2), each task with a line of text, each judgment with a
//! pass, and the synthesis with a fixed answer: ten model calls. `git forum submit --cmd SCRIPT`
//! (no `--work`) and Forum's `forum submit --cmd SCRIPT` run it R times each, each run in a
//! fresh directory, interleaved (the side that goes first alternates). After each run the
//! script's call log is checked: one plan, four tasks (the second wave's with both results of
//! the first), four judgments, one synthesis, on either side.
//!
//! Printed per side: medians (and means) of the wall time, of the process's own CPU (the
//! `submit` process and its threads) and of its children's CPU (every process under it: the
//! reapers it clones, the model script and anything that started, any `git`), then Forum's
//! wall time over ours and our own CPU over our children's. Both CPU figures come from two
//! task-clock counters the kernel keeps on the process (`support/cpu_clock.rs`: each side runs
//! behind a shell that waits until they are attached); where the kernel refuses them they come
//! from `/proc/PID/stat` read while the process is a zombie, in 10 ms clock ticks, and the line
//! says so. `uptime` is printed before and after; `--busy` runs the same
//! comparison while a second process spins on every core.
//!
//! `--bin PATH` runs that `git-forum` binary as ours instead of this build's. `--before PATH`
//! adds a third side, another `git-forum` binary (an earlier build) run the same way, with the
//! ratio of its wall time to ours: a before-and-after in one run.
//!
//! `--setup DIR` writes the script and a repository under DIR and prints the command that runs
//! our side once, for `perf`, `strace` or callgrind by hand; nothing is timed.
//!
//! Forum is `--forum PATH`, else the `forum` beside `$FORUM_PYTHON`; without either only our
//! side runs. Nothing here asserts a time: read the ratios.

#[path = "support/busy.rs"]
mod busy;
#[path = "support/cpu_clock.rs"]
mod cpu_clock;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The model of both sides. Each call appends one line to `calls.log` in the run's directory
/// (its working directory on both sides): what was asked, so that the bench can check both
/// sides ran the same plan.
const MODEL: &str = r#"#!/bin/sh
for p; do :; done
case "$p" in
  *"Break this request"*|*"You are a planner"*)
    echo plan >> calls.log
    echo '{"tasks":[{"id":"T1","agent":"backend","instruction":"write part one","depends_on":[],"done_when":["part one is written"]},{"id":"T2","agent":"backend","instruction":"write part two","depends_on":[],"done_when":["part two is written"]},{"id":"T3","agent":"backend","instruction":"join the two parts","depends_on":["T1","T2"],"done_when":["the parts are joined"]},{"id":"T4","agent":"backend","instruction":"review the two parts","depends_on":["T1","T2"],"done_when":["the parts are reviewed"]}]}' ;;
  *"Judge one task"*)
    echo judge >> calls.log
    echo '{"decision":"pass","score":0.9,"reason":"scripted"}' ;;
  *"Judge whether the output"*)
    echo judge >> calls.log
    echo '{"ok": true, "score": 0.9, "reason": "scripted"}' ;;
  *"Write the answer"*|*"Combine the task results"*)
    echo answer >> calls.log
    echo 'The two parts, joined and reviewed.' ;;
  *"join the two parts"*|*"review the two parts"*)
    case "$p" in
      *"result of part one"*"result of part two"*|*"result of part two"*"result of part one"*) echo "task built-on-both" >> calls.log ;;
      *) echo "task missing-upstream" >> calls.log ;;
    esac
    echo 'done with both parts' ;;
  *"write part one"*) echo task >> calls.log; echo 'result of part one' ;;
  *"write part two"*) echo task >> calls.log; echo 'result of part two' ;;
  *) echo "unknown" >> calls.log; echo 'unknown prompt' ;;
esac
"#;

/// The calls the plan makes, sorted, as the script logs them.
const EXPECTED: [&str; 10] = [
    "answer",
    "judge",
    "judge",
    "judge",
    "judge",
    "plan",
    "task",
    "task",
    "task built-on-both",
    "task built-on-both",
];

const REQUEST: &str = "write a text in two parts, then join and review them";

#[path = "support/git.rs"]
mod support_git;
use support_git::{git, hermetic};

fn arg<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn uptime() -> String {
    Command::new("uptime")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "?".into())
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

/// One run's figures (ms).
struct Sample {
    wall: f64,
    own: f64,
    children: f64,
    /// Whether `own` and `children` come from the task clock (else from `/proc`'s ticks).
    precise: bool,
}

/// Runs `c` to its end: wall time, and the CPU of the process itself and of everything under
/// it. `counted`: from the task clock ([`cpu_clock`]; the counters cost the run some wall
/// time, so the timed runs are not counted). Otherwise, or where the kernel refuses the
/// counters, from its `/proc` entry while it is a zombie (exited, not yet reaped), in clock
/// ticks.
fn measure(c: &mut Command, tick: f64, counted: bool) -> (Sample, std::process::Output) {
    use std::io::Read;
    let mut counters = None;
    let t;
    let mut child = if counted {
        let mut g = cpu_clock::gated(c);
        g.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = g.spawn().expect("start the run");
        counters = cpu_clock::Counters::attach(&child).ok();
        t = Instant::now();
        cpu_clock::go(&mut child);
        child
    } else {
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        t = Instant::now();
        c.spawn().expect("start the run")
    };
    // Both outputs are small; read them to their ends (the child has exited when they close,
    // unless it handed them on), then wait without reaping.
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut e = Vec::new();
        se.read_to_end(&mut e).ok();
        e
    });
    so.read_to_end(&mut out).ok();
    err.extend(reader.join().unwrap_or_default());
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::waitid(
        rustix::process::WaitId::Pid(pid),
        rustix::process::WaitIdOptions::EXITED | rustix::process::WaitIdOptions::NOWAIT,
    )
    .expect("waitid");
    let wall = t.elapsed().as_secs_f64() * 1000.0;
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap_or_default();
    let fields: Vec<f64> = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .unwrap_or("")
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    // `fields` starts at field 3 (state): utime, stime, cutime, cstime are fields 14 to 17.
    let at = |i: usize| fields.get(i - 3).copied().unwrap_or(0.0) * 1000.0 / tick;
    let (own, children, precise) = match counters.as_ref().map(cpu_clock::Counters::read) {
        Some((own, children)) if own.is_finite() => (own, children, true),
        _ => (at(14) + at(15), at(16) + at(17), false),
    };
    let status = child.wait().expect("reap the run");
    (
        Sample {
            wall,
            own,
            children,
            precise,
        },
        std::process::Output {
            status,
            stdout: out,
            stderr: err,
        },
    )
}

/// Checks the call log a run left in `dir`: the same ten calls on either side.
fn check_calls(side: &str, dir: &Path) {
    let log = std::fs::read_to_string(dir.join("calls.log")).unwrap_or_default();
    let mut calls: Vec<&str> = log.lines().collect();
    calls.sort_unstable();
    assert_eq!(
        calls,
        EXPECTED,
        "{side} in {}: the model was not called as the plan says",
        dir.display()
    );
}

fn write_model(at: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let model = at.join("model.sh");
    std::fs::write(&model, MODEL).unwrap();
    std::fs::set_permissions(&model, std::fs::Permissions::from_mode(0o755)).unwrap();
    model
}

/// A fresh repository for one of our runs: one commit, the call log ignored.
fn our_repo(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main", "."]);
    std::fs::write(dir.join("README"), "a repository to run in\n").unwrap();
    std::fs::write(dir.join(".gitignore"), "calls.log\n").unwrap();
    git(dir, &["add", "."]);
    git(dir, &["commit", "-q", "-m", "start"]);
}

fn ours(bin: &Path, dir: &Path, model: &Path) -> Command {
    let mut c = Command::new(bin);
    hermetic(&mut c, dir);
    c.current_dir(dir)
        .args(["submit", "--cmd"])
        .arg(model)
        .arg(REQUEST);
    c
}

fn theirs(forum: &Path, dir: &Path, model: &Path) -> Command {
    let mut c = Command::new(forum);
    hermetic(&mut c, dir);
    c.current_dir(dir)
        .args(["submit", "--cmd"])
        .arg(model)
        .arg(REQUEST);
    c
}

/// Forum's command line: `--forum PATH`, else `forum` beside `$FORUM_PYTHON`.
fn forum_cli(args: &[String]) -> Option<PathBuf> {
    if let Some(p) = arg(args, "--forum") {
        return Some(PathBuf::from(p));
    }
    let python = PathBuf::from(std::env::var_os("FORUM_PYTHON")?);
    let cli = python.parent()?.join("forum");
    cli.exists().then_some(cli)
}

fn one(side: &str, c: &mut Command, dir: &Path, tick: f64, counted: bool) -> Sample {
    let (s, out) = measure(c, tick, counted);
    assert!(
        out.status.success(),
        "{side} in {}: {}\n{}",
        dir.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("The two parts, joined and reviewed."),
        "{side} in {}: the answer is not the synthesis: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout)
    );
    check_calls(side, dir);
    s
}

/// A side's line: wall times from its timed runs, CPU from its counted runs.
fn print_side(name: &str, timed: &[Sample], counted: &[Sample]) {
    let wall: Vec<f64> = timed.iter().map(|x| x.wall).collect();
    let own: Vec<f64> = counted.iter().map(|x| x.own).collect();
    let kids: Vec<f64> = counted.iter().map(|x| x.children).collect();
    println!(
        "{name:<34} wall median {:7.1} ms (mean {:7.1}); own CPU median {:6.1} ms (mean {:6.1}); children's CPU median {:6.1} ms (mean {:6.1})",
        median(&wall),
        mean(&wall),
        median(&own),
        mean(&own),
        median(&kids),
        mean(&kids)
    );
}

/// What each pass runs: our binary, the build before, Forum.
struct Sides<'a> {
    bin: &'a Path,
    before: Option<&'a Path>,
    forum: Option<&'a Path>,
    model: &'a Path,
    dir: &'a Path,
    tick: f64,
}

impl Sides<'_> {
    /// `runs` runs of each side, each in a fresh directory, interleaved (which side goes first
    /// alternates, so neither always runs right after the other): ours, Forum's, the build
    /// before's samples.
    fn pass(&self, runs: usize, counted: bool) -> (Vec<Sample>, Vec<Sample>, Vec<Sample>) {
        let tag = if counted { "counted" } else { "timed" };
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..runs {
            let mine = self.dir.join(format!("{tag}-ours-{i}"));
            our_repo(&mine);
            let mut run_ours = || {
                let mut cmd = ours(self.bin, &mine, self.model);
                a.push(one("git forum", &mut cmd, &mine, self.tick, counted))
            };
            if i % 2 == 0 {
                run_ours();
            }
            if let Some(f) = self.forum {
                let other = self.dir.join(format!("{tag}-forum-{i}"));
                std::fs::create_dir_all(&other).unwrap();
                let mut cmd = theirs(f, &other, self.model);
                b.push(one("Forum", &mut cmd, &other, self.tick, counted));
            }
            if let Some(e) = self.before {
                let earlier = self.dir.join(format!("{tag}-before-{i}"));
                our_repo(&earlier);
                let mut cmd = ours(e, &earlier, self.model);
                c.push(one("before", &mut cmd, &earlier, self.tick, counted));
            }
            if i % 2 == 1 {
                run_ours();
            }
        }
        (a, b, c)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let tmp = match arg(&args, "--dir") {
        Some(dir) => tempfile::tempdir_in(dir).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    if let Some(dir) = arg(&args, "--setup") {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        let model = write_model(&dir);
        let repo = dir.join("repo");
        our_repo(&repo);
        println!(
            "cd {} && rm -f calls.log && {} submit --cmd {} '{REQUEST}'",
            repo.display(),
            env!("CARGO_BIN_EXE_git-forum"),
            model.display()
        );
        println!("(a second run in the same repository appends to the same ledger)");
        return;
    }
    let runs: usize = arg(&args, "--runs")
        .and_then(|v| v.parse().ok())
        .unwrap_or(9)
        .max(1);
    let forum = forum_cli(&args);
    let before = arg(&args, "--before").map(PathBuf::from);
    let bin = PathBuf::from(arg(&args, "--bin").unwrap_or(env!("CARGO_BIN_EXE_git-forum")));
    let busy = busy::Busy::from_args(&args);
    let tick = ticks();
    let model = write_model(tmp.path());
    println!("# a scripted 4-task run (2 waves, 10 model calls), {runs} runs each");
    println!("mode: {}", busy::Busy::label(&busy));
    println!("runs under {}", tmp.path().display());
    println!("git forum: {}", bin.display());
    if let Some(b) = &before {
        println!("before: {}", b.display());
    }
    match &forum {
        Some(f) => println!("Forum: {}", f.display()),
        None => println!("Forum: not found (--forum PATH or FORUM_PYTHON): only our side runs"),
    }
    println!("uptime before: {}", uptime());

    // One untimed run of each side first: the binaries and Python's modules in the page cache.
    let warm = tmp.path().join("warm-ours");
    our_repo(&warm);
    one(
        "git forum",
        &mut ours(&bin, &warm, &model),
        &warm,
        tick,
        false,
    );
    if let Some(b) = &before {
        let warm = tmp.path().join("warm-before");
        our_repo(&warm);
        one("before", &mut ours(b, &warm, &model), &warm, tick, false);
    }
    if let Some(f) = &forum {
        let warm = tmp.path().join("warm-forum");
        std::fs::create_dir_all(&warm).unwrap();
        one("Forum", &mut theirs(f, &warm, &model), &warm, tick, false);
    }

    let sides = Sides {
        bin: &bin,
        before: before.as_deref(),
        forum: forum.as_deref(),
        model: &model,
        dir: tmp.path(),
        tick,
    };
    let (a, b, c) = sides.pass(runs, false);
    // The CPU figures from runs of their own: the counters cost wall time.
    let (ca, cb, cc) = sides.pass(runs, true);
    println!("uptime after:  {}", uptime());
    print_side("git forum submit --cmd", &a, &ca);
    let wall = |s: &[Sample]| median(&s.iter().map(|x| x.wall).collect::<Vec<_>>());
    if !b.is_empty() {
        print_side("forum submit --cmd", &b, &cb);
        println!(
            "Forum / git forum, wall (medians): {:.2} (target at least 8)",
            wall(&b) / wall(&a)
        );
    }
    if !c.is_empty() {
        print_side("before: git forum submit --cmd", &c, &cc);
        println!(
            "before / git forum, wall (medians): {:.2}",
            wall(&c) / wall(&a)
        );
    }
    let own: f64 = ca.iter().map(|x| x.own).sum();
    let kids: f64 = ca.iter().map(|x| x.children).sum();
    let how = if ca.iter().all(|x| x.precise) {
        "the task clock"
    } else {
        "/proc, in clock ticks: too coarse for a run this short"
    };
    println!(
        "git forum's own CPU / its children's (totals, {how}): {:.2} (target at most 1)",
        own / kids.max(1e-9)
    );
    drop(busy);
}
