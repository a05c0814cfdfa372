//! Durable appends from many processes: `cargo bench --bench appends`.
//!
//! `--procs P` writer processes (8) each append `--per M` entries (250) to one ledger, durably:
//! an append returns only once its entry is on disk. A git forum writer does per entry what
//! `git forum append` does once its store is open (`surface::append_checked`: the entry's checks
//! of labels, timestamp and size, the secret scan of its body, then the append with
//! `forum.fsyncMethod=wal`). Against it, in the same run, the same number of processes append
//! the same entries as lines of one JSONL file (the entry and its body on one line, chained on
//! the head kept in the lock file), under an exclusive `flock`, with group commit: a writer
//! writes its line under the lock, takes a ticket, releases the lock and waits under a second
//! lock, where whoever holds it flushes the file (`fdatasync`) once for every line written so
//! far. The JSONL writers make no checks.
//!
//! The writers are this bench run again (`--child MODE TARGET W M`). Each opens its ledger or
//! file, says it is ready and waits; the clock starts when every writer is told to go, so process
//! start and open are not counted. `--rounds R` (5) rounds alternate which side goes first, each
//! on fresh files after a `sync`; the figures are medians over rounds of entries/s, the ratio of
//! the medians, p50 / p99 of one append's latency over all rounds, and each side's CPU per append
//! (user and system apart: on ext4 without a journal the system part is mostly the search for
//! a free inode, see docs/benchmarks.md). `--busy` runs the same while
//! a second process spins on every core; `--dir PATH` puts the files on that file system.
//!
//! Afterwards every ledger must hold every acknowledged entry (the count) and pass `verify --deep`,
//! and every JSONL file must hold every acknowledged line. Nothing here asserts a time.

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;

use git_forum::ledger::{Entry, NewEntry};
use git_forum::store::git::{GitStore, Options};

#[path = "support/busy.rs"]
mod busy;
#[path = "support/writers.rs"]
mod writers;
use writers::{children_cpu, filesystem_of, median, pct, run_writers, serve_child};
#[path = "support/git.rs"]
mod git;

/// `--child MODE TARGET W M`: one writer, of git forum or of [`GroupJsonl`].
fn child(args: &[String]) {
    serve_child(
        args,
        |_, target| GroupJsonl::open(target),
        GroupJsonl::append,
    );
}

/// The baseline: writers sharing `ledger.jsonl` in one directory, with `lock` (an exclusive
/// `flock`; it holds the head and the count of lines written) and `flush` (the flush lock and
/// the count of lines on disk).
struct GroupJsonl {
    file: std::fs::File,
    lock: std::fs::File,
    flush: std::fs::File,
}

impl GroupJsonl {
    fn open(dir: &Path) -> GroupJsonl {
        let open = |name: &str, append: bool| {
            let mut o = std::fs::OpenOptions::new();
            o.create(true).read(true);
            if append {
                o.append(true);
            } else {
                o.write(true).truncate(false);
            }
            o.open(dir.join(name)).unwrap()
        };
        GroupJsonl {
            file: open("ledger.jsonl", true),
            lock: open("lock", false),
            flush: open("flush", false),
        }
    }

    fn read_u64(f: &std::fs::File, at: u64) -> u64 {
        let mut b = [0u8; 8];
        match f.read_exact_at(&mut b, at) {
            Ok(()) => u64::from_le_bytes(b),
            Err(_) => 0,
        }
    }

    /// One append: under the lock, the entry chained on the head, written with its body as one
    /// line; then a flush that began after the line was written, shared with every writer
    /// waiting.
    fn append(&self, n: &NewEntry) {
        let body = n.payload.canonical();
        let ph = git_forum::ledger::hash::sha256_hex(body.as_bytes());
        self.lock.lock().unwrap();
        let mut h = [0u8; 73];
        let head = match self.lock.read_exact_at(&mut h, 0) {
            Ok(()) if h[0] == 1 => Some(Entry {
                seq: u64::from_le_bytes(h[1..9].try_into().unwrap()),
                ts: 0.0,
                actor: String::new(),
                kind: String::new(),
                causal_parent: None,
                payload_hash: String::new(),
                prev_hash: String::new(),
                entry_hash: String::from_utf8(h[9..73].to_vec()).unwrap(),
            }),
            _ => None,
        };
        let e = Entry::next(head.as_ref(), n, ph);
        let line = format!(
            "{{\"entry\": {}, \"body\": {body}}}\n",
            e.to_value().python_dumps()
        );
        (&self.file).write_all(line.as_bytes()).unwrap();
        h[0] = 1;
        h[1..9].copy_from_slice(&e.seq.to_le_bytes());
        h[9..73].copy_from_slice(e.entry_hash.as_bytes());
        self.lock.write_all_at(&h, 0).unwrap();
        let ticket = Self::read_u64(&self.lock, 128) + 1;
        self.lock.write_all_at(&ticket.to_le_bytes(), 128).unwrap();
        self.lock.unlock().unwrap();
        self.flush.lock().unwrap();
        if Self::read_u64(&self.flush, 0) < ticket {
            let written = Self::read_u64(&self.lock, 128).max(ticket);
            self.file.sync_data().unwrap();
            self.flush.write_all_at(&written.to_le_bytes(), 0).unwrap();
        }
        self.flush.unlock().unwrap();
    }
}

/// Every acknowledged entry is where it should be: the ledger holds them all and passes
/// `verify --deep`; the JSONL file holds a line for each, its seqs 0..n in order.
fn check(ledger: &Path, jsonl: &Path, n: usize) {
    let store = GitStore::open(ledger, "main", Options::default()).unwrap();
    let r = store.verify(true).unwrap();
    assert!(r.passed(), "verify --deep of {} failed", ledger.display());
    assert_eq!(
        r.entries as usize, n,
        "every acknowledged append is in the ledger"
    );
    let text = std::fs::read_to_string(jsonl.join("ledger.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len(),
        n,
        "every acknowledged line is in the JSONL file"
    );
    for (i, l) in lines.iter().enumerate() {
        assert!(
            l.contains(&format!("\"seq\": {i},")),
            "line {i} of the JSONL file is out of order"
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        child(&args[i + 1..]);
        return;
    }
    let num = |flag: &str, default: usize| {
        args.iter()
            .position(|a| a == flag)
            .map_or(default, |i| args[i + 1].parse().expect("a number"))
    };
    let (procs, per, rounds) = (num("--procs", 8), num("--per", 250), num("--rounds", 5));
    let root = match args.iter().position(|a| a == "--dir") {
        Some(i) => tempfile::tempdir_in(&args[i + 1]).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    println!(
        "durable appends: {procs} processes, {per} entries each, {rounds} rounds (load {}; in {} on {})",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim(),
        root.path().display(),
        filesystem_of(root.path())
    );
    let busy = busy::Busy::from_args(&args);
    println!("mode: {}", busy::Busy::label(&busy));
    let labels = [
        "git forum append path (checks, secret scan, wal)",
        "JSONL + fdatasync, group commit",
    ];
    let mut rates: [Vec<f64>; 2] = Default::default();
    let mut lat: [Vec<f64>; 2] = Default::default();
    // Per side: the writers' user and system CPU over all rounds (seconds).
    let mut cpu = [(0.0f64, 0.0f64); 2];
    let n = procs * per;
    for round in 0..rounds {
        let ledger = root.path().join(format!("ledger-{round}"));
        let jsonl = root.path().join(format!("jsonl-{round}"));
        std::fs::create_dir_all(&ledger).unwrap();
        std::fs::create_dir_all(&jsonl).unwrap();
        git::git(&ledger, &["init", "-q", "."]);
        for k in 0..2 {
            let side = (k + round) % 2;
            let _ = Command::new("sync").status();
            let (mode, target) = [("git", &ledger), ("jsonl", &jsonl)][side];
            let before = children_cpu();
            let (wall, mut l) = run_writers("--child", mode, target, procs, per);
            let after = children_cpu();
            cpu[side].0 += after.0 - before.0;
            cpu[side].1 += after.1 - before.1;
            rates[side].push(n as f64 / wall);
            lat[side].append(&mut l);
        }
        println!(
            "round {}: git forum {:.0}/s, JSONL {:.0}/s",
            round + 1,
            rates[0][round],
            rates[1][round]
        );
        check(&ledger, &jsonl, n);
    }
    let med = [median(rates[0].clone()), median(rates[1].clone())];
    for (side, label) in labels.iter().enumerate() {
        println!(
            "{:<50} {:>7.0} entries/s (median of {rounds}), p50 {:.2} ms, p99 {:.2} ms",
            label,
            med[side],
            pct(&lat[side], 0.5) * 1e3,
            pct(&lat[side], 0.99) * 1e3
        );
    }
    let all = (n * rounds) as f64;
    for (side, label) in ["git forum", "JSONL"].iter().enumerate() {
        println!(
            "{label} writers' CPU per append: {:.0} µs user, {:.0} µs system",
            cpu[side].0 / all * 1e6,
            cpu[side].1 / all * 1e6
        );
    }
    println!(
        "ratio: {:.2}x the JSONL group-commit baseline (target 4x)",
        med[0] / med[1]
    );
    println!(
        "every acknowledged entry is on disk: {rounds} ledgers of {n} entries passed verify --deep, {rounds} JSONL files of {n} lines"
    );
}
