//! Scale benchmark of import, verify and proofs: `cargo bench --bench tlog` (add `-- --entries N`, default
//! 1,000,000; `-- --only verify` runs step 2 alone, at 10,000 and 100,000 entries up to N;
//! `--runs K` times each side of step 2 K times, at least 3). Everything is timed as whole
//! processes of the built binary, medians of three where it says so, with the child's peak RSS
//! and CPU time from `/usr/bin/time -v`.
//!
//! 1. `import` of an N-entry Forum directory that the bench writes itself (Forum's exact row
//!    format), into a new repository: wall, CPU per entry, peak RSS.
//! 2. `verify --deep` at 10,000, 100,000 and N entries (each an imported ledger). Where Forum
//!    runs too, its open plus deep verify of the same rows and ours alternate, and the two are
//!    printed side by side: median wall and median CPU (user + system) of each, peak RSS, the
//!    ratios, and `uptime` at that moment. Each of our runs at 10,000 and 100,000 is cold: it
//!    verifies a fresh copy of the repository's git data, made before the clock starts, with
//!    nothing of ours under `.git/forum/` (no seq index, nothing a verify left).
//! 3. On the N-entry ledger: `git forum verify` (baseline), `checkpoint --note` with the tiles
//!    built from every entry, with tiles current, after one append (tiles extended), and
//!    `prove SEQ --tlog-proof`; then Forum's format from the cache of Forum's tree: its first
//!    build (the one O(n) step, time and peak RSS), `checkpoint --no-record`, `prove SEQ` and
//!    `prove --consistency-from M` with it current, beside Forum's open plus checkpoint (Forum
//!    has no proof function), and `prove SEQ` after one append (the cache extended).
//!    `-- --proofs-only` imports N entries and runs only these Forum-format lines.
//!
//! `-- --import-only` runs step 1 alone: `import` at 10,000 and 100,000 entries (those up to
//! N) and at N, each alternating with Forum's non-fsync append of the same entries, three times
//! each side (`--runs K` for another count), and prints the medians by CPU time and their
//! ratio of CPU per entry at each size, and the ratio of the two sides' median wall times
//! (whole processes, as issue 37 compares them; ours uses a second thread to write its pack,
//! Forum's append runs on one) (above 100,000 entries Forum's side runs only with
//! `--forum-entries M`, its append holding the whole ledger in memory), then peak RSS by size,
//! then one import of N entries whose payload rows are scrambled, so every body is found
//! through import's index.
//!
//! `--write-forum-dir DIR` writes the N-entry Forum directory the steps import (entries and
//! payload rows, Forum's exact format) into DIR and stops, for profiling `import` or a cold
//! `verify --deep` by hand on the same rows.
//!
//! `--busy` runs the same comparisons while a second process spins on every core (the header
//! says which mode ran).
//!
//! Forum's own figures come from the same run when `FORUM_PYTHON` names a Python that can
//! `import forum` (Forum's package): its non-fsync append (CPU per entry, at up to 100,000
//! entries) and its open plus deep verify at 10,000 and 100,000 entries, as whole processes.
//! Without it those lines say they were skipped. Nothing here asserts a time: the machine is
//! shared and noisy, so read medians and ratios, and quote `uptime` with them.

use std::io::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use git_forum::ledger::{Entry, NewEntry, Value};

#[path = "support/busy.rs"]
mod busy;

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("git");
    assert!(o.status.success(), "git {args:?}");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// One whole-process run: wall seconds, CPU seconds (user + system), peak RSS in KiB.
#[derive(Clone, Copy)]
struct Run {
    wall: f64,
    cpu: f64,
    rss: u64,
}

impl Run {
    fn mib(&self) -> u64 {
        self.rss / 1024
    }
}

/// Runs `program ARGS` in `dir` under `/usr/bin/time -v`.
fn timed(dir: &Path, program: &str, args: &[&str]) -> (Run, String) {
    let t = Instant::now();
    let o = Command::new("/usr/bin/time")
        .arg("-v")
        .arg(program)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run under /usr/bin/time");
    let wall = t.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{program} {args:?}: {err}");
    let field = |name: &str| -> Option<f64> {
        err.lines()
            .find_map(|l| l.trim().strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    let cpu = field("User time (seconds):").unwrap_or(0.0)
        + field("System time (seconds):").unwrap_or(0.0);
    let rss = field("Maximum resident set size (kbytes):").unwrap_or(0.0) as u64;
    (
        Run { wall, cpu, rss },
        String::from_utf8_lossy(&o.stdout).to_string(),
    )
}

fn forum(dir: &Path, args: &[&str]) -> Run {
    timed(dir, env!("CARGO_BIN_EXE_git-forum"), args).0
}

/// The median of `xs` (not empty).
fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Medians of several runs, wall and CPU each on its own, with the largest peak RSS.
struct Medians {
    wall: f64,
    cpu: f64,
    rss_mib: u64,
}

impl Medians {
    fn of(runs: &[Run]) -> Medians {
        Medians {
            wall: median(runs.iter().map(|r| r.wall).collect()),
            cpu: median(runs.iter().map(|r| r.cpu).collect()),
            rss_mib: runs.iter().map(Run::mib).max().unwrap_or(0),
        }
    }
}

fn median3(mut f: impl FnMut() -> Run) -> Run {
    let mut runs: Vec<Run> = (0..3).map(|_| f()).collect();
    runs.sort_by(|a, b| a.wall.total_cmp(&b.wall));
    runs[1]
}

/// The run of median CPU time.
fn median_by_cpu(mut runs: Vec<Run>) -> Run {
    runs.sort_by(|a, b| a.cpu.total_cmp(&b.cpu));
    runs[runs.len() / 2]
}

/// The median wall time of `runs`, in seconds.
fn median_wall(runs: &[Run]) -> f64 {
    let mut w: Vec<f64> = runs.iter().map(|r| r.wall).collect();
    w.sort_by(f64::total_cmp);
    w[w.len() / 2]
}

/// The bench's entry `k`: a small distinct body, every third entry naming the one before.
fn new_entry(k: usize) -> NewEntry {
    NewEntry {
        actor: "bench".into(),
        kind: "note".into(),
        causal_parent: (k.is_multiple_of(3) && k > 0).then(|| k as i64 - 1),
        payload: Value::object([
            ("i".to_string(), Value::str(k.to_string())),
            (
                "text".to_string(),
                Value::str(format!("entry {k} of the bench ledger")),
            ),
        ]),
        ts: 1001.0 + k as f64,
    }
}

/// Writes an `n`-entry Forum directory, row by row, in Forum's format (payload row first).
fn write_forum_dir(dir: &Path, n: usize) {
    write_forum_dir_ordered(dir, n, false);
}

/// [`write_forum_dir`], with the payload rows in a scrambled order when `scrambled` (a fixed
/// permutation: row `k` goes to place `k * step mod n`), so that nearly every entry's body is
/// out of order and found through import's index rather than under its cursor.
fn write_forum_dir_ordered(dir: &Path, n: usize, scrambled: bool) {
    std::fs::create_dir_all(dir).unwrap();
    let file = |name: &str| {
        std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(dir.join(name)).unwrap())
    };
    let (mut entries, mut payloads) = (file("entries.jsonl"), file("payloads.jsonl"));
    let mut head: Option<Entry> = None;
    let mut rows = Vec::new();
    for k in 0..n {
        let new = new_entry(k);
        let body = new.validate().unwrap();
        let ph = git_forum::ledger::hash::sha256_hex(body.as_bytes());
        let e = Entry::next(head.as_ref(), &new, ph.clone());
        let row = Value::object([
            ("hash".to_string(), Value::str(ph)),
            ("body".to_string(), new.payload.clone()),
        ]);
        if scrambled {
            rows.push(row.python_dumps());
        } else {
            writeln!(payloads, "{}", row.python_dumps()).unwrap();
        }
        writeln!(entries, "{}", e.to_value().python_dumps()).unwrap();
        head = Some(e);
    }
    if scrambled {
        let step = (n / 2..n).rev().find(|s| gcd(*s, n) == 1).unwrap_or(1);
        for k in 0..n {
            writeln!(payloads, "{}", rows[(k * step) % n]).unwrap();
        }
    }
    payloads.flush().unwrap();
    entries.flush().unwrap();
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// A new repository holding the `n`-entry ledger, imported from `forum_dir`.
fn imported(root: &Path, name: &str, forum_dir: &Path) -> (std::path::PathBuf, Run) {
    let repo = root.join(name);
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "."]);
    let run = forum(
        &repo,
        &[
            "--no-fsync",
            "import",
            forum_dir.to_str().unwrap(),
            "--max-bytes",
            "1000000000000",
        ],
    );
    (repo, run)
}

const FORUM_SCRIPT: &str = r#"
import sys, time
from forum.ledger import Ledger
from forum.storage import FileStorage
mode, d = sys.argv[1], sys.argv[2]
if mode == "append":
    n = int(sys.argv[3])
    c = [1000.0]
    def clock():
        c[0] += 1.0
        return c[0]
    led = Ledger(FileStorage(d, fsync_each=False), clock=clock)
    for i in range(n):
        led.append(actor="bench", kind="note",
                   payload={"i": str(i), "text": "entry %d of the bench ledger" % i},
                   causal_parent=(i - 1 if i % 3 == 0 and i > 0 else None))
    led.sync()
else:
    led = Ledger(FileStorage(d, fsync_each=False))
    assert led.verify(deep=True)
"#;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args
        .iter()
        .position(|a| a == "--entries")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    if let Some(dir) = flag("--write-forum-dir") {
        write_forum_dir(Path::new(&dir), n);
        println!("wrote a {n}-entry Forum directory to {dir}");
        return;
    }
    let only = flag("--only");
    if let Some(o) = &only
        && o != "verify"
    {
        panic!("--only takes `verify` (step 2 alone), not {o:?}");
    }
    let only_verify = only.is_some();
    let runs: usize = flag("--runs")
        .map(|v| v.parse().expect("--runs takes a whole number"))
        .unwrap_or(3)
        .max(3);
    let uptime = || {
        Command::new("uptime")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    let busy = busy::Busy::from_args(&args);
    println!("mode: {}", busy::Busy::label(&busy));
    println!("machine: {}", uptime());
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let python = std::env::var("FORUM_PYTHON").ok().filter(|p| {
        Command::new(p)
            .args(["-c", "import forum.ledger, forum.storage"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let script = root.join("forum_bench.py");
    std::fs::write(&script, FORUM_SCRIPT).unwrap();
    let script = script.to_str().unwrap().to_string();

    if only_verify {
        verify_step(root, n, None, python.as_deref(), &script, runs, &uptime);
        println!("machine at the end: {}", uptime());
        return;
    }
    if args.iter().any(|a| a == "--proofs-only") {
        let d = root.join(format!("forum-{n}"));
        write_forum_dir(&d, n);
        let (repo, imp) = imported(root, "proofs", &d);
        println!("imported {n} entries in {:.1}s", imp.wall);
        forum_format_proofs(&repo, n, python.as_deref(), &d, &uptime);
        println!("machine at the end: {}", uptime());
        return;
    }

    // 1. import of N entries.
    let import_only = args.iter().any(|a| a == "--import-only");
    let runs: usize = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(if import_only { 3 } else { 1 })
        .max(1);
    if import_only {
        let forum_entries = flag("--forum-entries")
            .map(|v| v.parse().expect("--forum-entries takes a whole number"));
        import_step(
            root,
            n,
            python.as_deref(),
            &script,
            runs,
            forum_entries,
            &uptime,
        );
        println!("machine at the end: {}", uptime());
        return;
    }
    let t = Instant::now();
    let big_dir = root.join(format!("forum-{n}"));
    write_forum_dir(&big_dir, n);
    println!(
        "wrote an {n}-entry Forum directory in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    let mut imports = Vec::with_capacity(runs);
    let mut big = None;
    for k in 0..runs {
        let (repo, imp) = imported(root, &format!("big{k}"), &big_dir);
        println!(
            "  `import` run {}: {:.2}s wall, {:.2}s CPU, peak RSS {} MiB",
            k + 1,
            imp.wall,
            imp.cpu,
            imp.mib()
        );
        imports.push(imp);
        match big {
            None => big = Some(repo),
            Some(_) => std::fs::remove_dir_all(&repo).unwrap(),
        }
    }
    let big = big.expect("at least one run");
    let imp = median_by_cpu(imports);
    let import_us = imp.cpu / n as f64 * 1e6;
    println!(
        "`import` of {n} entries (median of {runs} by CPU): {:.2}s wall, {:.2}s CPU ({import_us:.2} µs CPU per entry), peak RSS {} MiB (target ≤ 128 MiB)",
        imp.wall,
        imp.cpu,
        imp.mib()
    );
    std::fs::remove_dir_all(&big_dir).unwrap();
    if let Some(py) = &python {
        // Forum's append holds its whole ledger in memory; 100,000 entries unless
        // `--forum-entries M` asks for another count (N itself, for a like-for-like ratio).
        let m = flag("--forum-entries")
            .map(|v| v.parse().expect("--forum-entries takes a whole number"))
            .unwrap_or(n.min(100_000));
        let d = root.join("forum-append");
        let mut appends = Vec::with_capacity(runs);
        for k in 0..runs {
            let (r, _) = timed(
                root,
                py,
                &[&script, "append", d.to_str().unwrap(), &m.to_string()],
            );
            println!(
                "  Forum append run {}: {:.2}s wall, {:.2}s CPU",
                k + 1,
                r.wall,
                r.cpu
            );
            appends.push(r);
            std::fs::remove_dir_all(&d).unwrap();
        }
        let r = median_by_cpu(appends);
        let forum_us = r.cpu / m as f64 * 1e6;
        println!(
            "Forum non-fsync append of {m} entries (median of {runs} by CPU): {:.2}s wall, {forum_us:.2} µs CPU per entry; Forum / import CPU per entry = {:.1}× (target ≥ 10×)",
            r.wall,
            forum_us / import_us
        );
    } else {
        println!(
            "Forum non-fsync append: skipped (set FORUM_PYTHON to a Python that imports forum)"
        );
    }
    // 2. verify --deep at 10k, 100k and N, against Forum's open plus deep verify.
    verify_step(
        root,
        n,
        Some(&big),
        python.as_deref(),
        &script,
        runs,
        &uptime,
    );

    // 3. checkpoints and proofs on the N-entry ledger.
    let repo = &big;
    let keys = root.join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    forum(repo, &["keygen", "bench", "--dir", keys.to_str().unwrap()]);
    let key = keys.join("bench.key");
    let key = key.to_str().unwrap();
    let note = ["checkpoint", "--note", "--note-key", key, "--no-record"];
    let v = forum(repo, &["verify"]);
    println!(
        "baseline `git forum verify`: {:.3}s, peak RSS {} MiB",
        v.wall,
        v.mib()
    );
    let c0 = forum(repo, &note);
    println!(
        "`checkpoint --note`, tiles built from every entry: {:.3}s, peak RSS {} MiB; ratio to verify {:.2}",
        c0.wall,
        c0.mib(),
        c0.wall / v.wall
    );
    let c1 = median3(|| forum(repo, &note));
    println!(
        "`checkpoint --note`, tiles current: median {:.1} ms, peak RSS {} MiB (target < 50 ms); ratio to verify {:.4}",
        c1.wall * 1e3,
        c1.mib(),
        c1.wall / v.wall
    );
    let seq = (n / 2).to_string();
    let p = median3(|| forum(repo, &["prove", &seq, "--tlog-proof"]));
    println!(
        "`prove {seq} --tlog-proof`: median {:.1} ms, peak RSS {} MiB (target < 50 ms)",
        p.wall * 1e3,
        p.mib()
    );
    forum_format_proofs(repo, n, python.as_deref(), &big_dir, &uptime);
    forum(
        repo,
        &[
            "append",
            "--actor",
            "bench",
            "--kind",
            "note",
            "--payload",
            "{}",
        ],
    );
    let c2 = forum(repo, &note);
    println!(
        "`checkpoint --note` after one append (tiles extended): {:.1} ms, peak RSS {} MiB",
        c2.wall * 1e3,
        c2.mib()
    );
    let p2 = forum(repo, &["prove", &seq]);
    println!(
        "`prove {seq}` (Forum's format) after one append (cache extended): {:.1} ms, peak RSS {} MiB",
        p2.wall * 1e3,
        p2.mib()
    );
    println!("machine at the end: {}", uptime());
}

/// Forum opening its directory and computing its checkpoint: the nearest Forum has to a proof
/// (its package has no inclusion or consistency proof function).
const FORUM_CHECKPOINT_SCRIPT: &str = r#"
import sys
from forum.ledger import Ledger
from forum.storage import FileStorage
led = Ledger(FileStorage(sys.argv[1], fsync_each=False))
print(led.checkpoint())
"#;

/// Step 3b: Forum-format proofs and the printed checkpoint from the cache of Forum's tree
/// (`refs/forum/merkle/NAME`) on the `n`-entry ledger in `repo`: the first build of the cache
/// (the one O(n) step), then the medians of `checkpoint --no-record`, `prove SEQ` and `prove
/// --consistency-from M` with it current, beside Forum's open plus checkpoint of `forum_dir`.
fn forum_format_proofs(
    repo: &Path,
    n: usize,
    python: Option<&str>,
    forum_dir: &Path,
    uptime: &dyn Fn() -> String,
) {
    let git_dir = git(repo, &["rev-parse", "--git-dir"]);
    let _ = Command::new("git")
        .current_dir(repo)
        .args([
            "--git-dir",
            &git_dir,
            "update-ref",
            "-d",
            "refs/forum/merkle/main",
        ])
        .status();
    let cp = ["checkpoint", "--no-record"];
    let first = forum(repo, &cp);
    println!(
        "`checkpoint --no-record` (Forum's root), cache built from every entry: {:.3}s, {:.3}s CPU, peak RSS {} MiB (machine: {})",
        first.wall,
        first.cpu,
        first.mib(),
        uptime()
    );
    let (seq, m) = ((n / 2).to_string(), (n / 3).to_string());
    let c = median3(|| forum(repo, &cp));
    let p = median3(|| forum(repo, &["prove", &seq]));
    let k = median3(|| forum(repo, &["prove", "--consistency-from", &m]));
    let load = uptime();
    for (what, r) in [
        ("`checkpoint --no-record`".to_string(), c),
        (format!("`prove {seq}`"), p),
        (format!("`prove --consistency-from {m}`"), k),
    ] {
        println!(
            "{what} (Forum's format, cache current): median {:.1} ms, {:.1} ms CPU, peak RSS {} MiB (target < 50 ms)",
            r.wall * 1e3,
            r.cpu * 1e3,
            r.mib()
        );
    }
    println!("  (machine: {load})");
    let Some(py) = python else {
        println!(
            "Forum open + checkpoint: skipped (set FORUM_PYTHON to a Python that imports forum)"
        );
        return;
    };
    let script = forum_dir.with_extension("checkpoint.py");
    std::fs::write(&script, FORUM_CHECKPOINT_SCRIPT).unwrap();
    let args = [script.to_str().unwrap(), forum_dir.to_str().unwrap()];
    let f = median3(|| timed(repo, py, &args).0);
    println!(
        "Forum open + checkpoint of {n} entries (it has no proof function): median {:.3}s, peak RSS {} MiB; Forum / ours: {:.0}× (checkpoint), {:.0}× (prove)",
        f.wall,
        f.mib(),
        f.wall / c.wall,
        f.wall / p.wall
    );
}

/// Step 2: `verify --deep` at 10,000, 100,000 and (given `big`, the N-entry ledger) N entries;
/// beside Forum's open plus deep verify of the same rows where `python` runs Forum.
fn verify_step(
    root: &Path,
    n: usize,
    big: Option<&Path>,
    python: Option<&str>,
    script: &str,
    runs: usize,
    uptime: &dyn Fn() -> String,
) {
    let mut sizes = vec![10_000, 100_000];
    if big.is_some() {
        sizes.push(n);
    }
    sizes.retain(|&s| s <= n);
    sizes.dedup();
    for s in sizes {
        // N beyond the two compared sizes reads the imported N-entry ledger, without Forum.
        if let Some(big) = big.filter(|_| s == n && s != 10_000 && s != 100_000) {
            let ours = median3(|| forum(big, &["verify", "--deep"]));
            println!(
                "{s} entries: `verify --deep` median {:.3}s ({:.2} µs per entry), {:.3}s CPU, peak RSS {} MiB",
                ours.wall,
                ours.wall / s as f64 * 1e6,
                ours.cpu,
                ours.mib()
            );
            continue;
        }
        let d = root.join(format!("forum-{s}"));
        write_forum_dir(&d, s);
        let (repo, _) = imported(root, &format!("r{s}"), &d);
        // The two sides alternate, so both meet the machine's load in the same states. Each of
        // our runs is cold: it reads a fresh copy of the repository's git data (objects, refs,
        // reflogs), without anything of ours under `.git/forum/`, made before the clock starts.
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for k in 0..runs {
            if let Some(py) = python {
                theirs.push(timed(root, py, &[script, "verify", d.to_str().unwrap()]).0);
            }
            let fresh = root.join(format!("r{s}-cold{k}"));
            cold_copy(&repo, &fresh);
            ours.push(forum(&fresh, &["verify", "--deep"]));
            std::fs::remove_dir_all(&fresh).unwrap();
        }
        let load = uptime();
        let ours = Medians::of(&ours);
        println!(
            "{s} entries, `verify --deep`, medians of {runs} (machine: {load}):\n  git forum: {:.3}s wall, {:.3}s CPU (user+sys), peak RSS {} MiB (target ≤ 64 MiB)",
            ours.wall, ours.cpu, ours.rss_mib
        );
        if theirs.is_empty() {
            println!(
                "  Forum open + deep verify: skipped (set FORUM_PYTHON to a Python that imports forum)"
            );
        } else {
            let f = Medians::of(&theirs);
            println!(
                "  Forum open + deep verify: {:.3}s wall, {:.3}s CPU (user+sys), peak RSS {} MiB\n  Forum / ours: {:.1}× wall (target ≥ 10×), {:.1}× CPU",
                f.wall,
                f.cpu,
                f.rss_mib,
                f.wall / ours.wall,
                f.cpu / ours.cpu
            );
        }
        std::fs::remove_dir_all(&d).unwrap();
        std::fs::remove_dir_all(&repo).unwrap();
    }
}

/// Copies repository `from` to `to` as a clone would have it: its git data (objects, refs,
/// reflogs, config), but nothing git forum keeps for itself under `.git/forum/` (the seq index,
/// locks, logs), so a verify of the copy starts from nothing of ours.
fn cold_copy(from: &Path, to: &Path) {
    fn copy(from: &Path, to: &Path, skip: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let (src, dst) = (e.path(), to.join(e.file_name()));
            if src == skip {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                copy(&src, &dst, skip);
            } else {
                std::fs::copy(&src, &dst).unwrap();
            }
        }
    }
    copy(from, to, &from.join(".git").join("forum"));
}

/// `--import-only`: `import` at 10,000 and 100,000 entries (those up to N) and at N, each
/// against Forum's non-fsync append of the same entries where `python` runs Forum (at N above
/// 100,000 only with `--forum-entries M`, Forum's append holding its whole ledger in memory),
/// the two sides alternating `runs` times each; medians by CPU, ratios of CPU per entry, peak
/// RSS by size. Then one import of N entries with the payload rows scrambled.
fn import_step(
    root: &Path,
    n: usize,
    python: Option<&str>,
    script: &str,
    runs: usize,
    forum_entries: Option<usize>,
    uptime: &dyn Fn() -> String,
) {
    let mut sizes: Vec<usize> = [10_000, 100_000, n]
        .into_iter()
        .filter(|s| *s <= n)
        .collect();
    sizes.dedup();
    let mut memory = Vec::new();
    for s in sizes {
        let t = Instant::now();
        let d = root.join(format!("forum-{s}"));
        write_forum_dir(&d, s);
        println!(
            "wrote a {s}-entry Forum directory in {:.1}s",
            t.elapsed().as_secs_f64()
        );
        let m = if s <= 100_000 { Some(s) } else { forum_entries };
        let forum_dir = root.join("forum-append");
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for k in 0..runs {
            let (repo, imp) = imported(root, &format!("import{s}-{k}"), &d);
            println!(
                "  `import` of {s}, run {}: {:.2}s wall, {:.2}s CPU, peak RSS {} MiB",
                k + 1,
                imp.wall,
                imp.cpu,
                imp.mib()
            );
            ours.push(imp);
            std::fs::remove_dir_all(&repo).unwrap();
            if let (Some(py), Some(m)) = (python, m) {
                let (r, _) = timed(
                    root,
                    py,
                    &[
                        script,
                        "append",
                        forum_dir.to_str().unwrap(),
                        &m.to_string(),
                    ],
                );
                println!(
                    "  Forum append of {m}, run {}: {:.2}s wall, {:.2}s CPU",
                    k + 1,
                    r.wall,
                    r.cpu
                );
                theirs.push(r);
                std::fs::remove_dir_all(&forum_dir).unwrap();
            }
        }
        std::fs::remove_dir_all(&d).unwrap();
        let rss = ours.iter().map(Run::mib).max().unwrap_or(0);
        let our_wall = median_wall(&ours);
        let their_wall = (!theirs.is_empty()).then(|| median_wall(&theirs));
        let imp = median_by_cpu(ours);
        let us = imp.cpu / s as f64 * 1e6;
        println!(
            "{s} entries, `import`, median of {runs} by CPU (machine: {}):\n  git forum: {:.3}s wall, {:.3}s CPU ({us:.2} µs CPU per entry), peak RSS {rss} MiB",
            uptime(),
            imp.wall,
            imp.cpu,
        );
        memory.push(format!("{s}: {rss} MiB"));
        match (theirs.is_empty(), m) {
            (false, Some(m)) => {
                let f = median_by_cpu(theirs);
                let forum_us = f.cpu / m as f64 * 1e6;
                println!(
                    "  Forum non-fsync append of {m}: {:.3}s wall, {:.3}s CPU ({forum_us:.2} µs CPU per entry)\n  Forum / ours, CPU per entry: {:.1}×; whole processes' median wall, {:.3}s / {our_wall:.3}s: {:.1}× (target ≥ 10×)",
                    f.wall,
                    f.cpu,
                    forum_us / us,
                    their_wall.unwrap_or(f.wall),
                    their_wall.unwrap_or(f.wall) * s as f64 / m as f64 / our_wall,
                );
            }
            _ => println!(
                "  Forum non-fsync append: skipped ({})",
                if python.is_none() {
                    "set FORUM_PYTHON to a Python that imports forum"
                } else {
                    "above 100,000 entries only with --forum-entries M"
                }
            ),
        }
    }
    println!(
        "`import` peak RSS by size: {} (flat in N is the target)",
        memory.join("; ")
    );
    let d = root.join("forum-scrambled");
    write_forum_dir_ordered(&d, n, true);
    let (repo, r) = imported(root, "scrambled", &d);
    println!(
        "`import` of {n} entries with the payload rows scrambled: {:.2}s wall, {:.2}s CPU ({:.2} µs CPU per entry), peak RSS {} MiB",
        r.wall,
        r.cpu,
        r.cpu / n as f64 * 1e6,
        r.mib()
    );
    std::fs::remove_dir_all(&repo).unwrap();
    std::fs::remove_dir_all(&d).unwrap();
}
