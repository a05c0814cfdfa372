//! `git forum blame --verify` at scale: `cargo bench --bench blame` (add `-- --entries N
//! --lines L --commits C --runs R [--busy]`; defaults 100,000 entries, 2,000 lines, 50
//! commits, 5 runs).
//!
//! The bench writes a repository whose one file of L lines was changed by C change commits
//! (each rewrites its own L/C lines and carries git forum's trailers), and a ledger of N
//! entries (imported from a Forum directory it writes itself): C runs of six entries each
//! (`request`, `task`, `result` with its model and usage, `change` naming the commit and the
//! file's blob, `check`, `ship`) spread evenly among notes. It then times R whole processes
//! of `git forum blame FILE --verify` (every line tied, every task's inclusion proof and tie
//! checked) beside R of plain `git blame FILE`, interleaved, and prints the medians of wall
//! and CPU time, their ratio and the load average. Nothing here asserts a time.

use std::io::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use git_forum::ledger::{Entry, NewEntry, Value};

#[path = "support/busy.rs"]
mod busy;
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

fn out(dir: &Path, args: &[&str]) -> String {
    let mut c = Command::new("git");
    hermetic(&mut c, dir);
    let o = c.current_dir(dir).args(args).output().expect("git");
    assert!(o.status.success(), "git {args:?}");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// A whole process: wall and CPU seconds (user + system, from `/usr/bin/time`).
fn timed(dir: &Path, program: &str, args: &[&str]) -> (f64, f64) {
    let mut c = Command::new("/usr/bin/time");
    c.arg("-f")
        .arg("%U %S")
        .arg(program)
        .args(args)
        .current_dir(dir);
    if program == "git" {
        hermetic(&mut c, dir);
    }
    let t = Instant::now();
    let o = c.output().expect("run under /usr/bin/time");
    let wall = t.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{program} {args:?}: {err}");
    let cpu = err
        .lines()
        .last()
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|x| x.parse::<f64>().ok())
        .sum();
    (wall, cpu)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn obj(pairs: Vec<(&str, Value)>) -> Value {
    Value::object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)))
}

/// Appends entries to a Forum directory's two files, chaining them.
struct Writer {
    entries: std::io::BufWriter<std::fs::File>,
    payloads: std::io::BufWriter<std::fs::File>,
    head: Option<Entry>,
}

impl Writer {
    fn put(&mut self, kind: &str, parent: Option<u64>, body: Value) -> Entry {
        let seq = self.head.as_ref().map_or(0, |h| h.seq + 1);
        let new = NewEntry {
            actor: "bench".into(),
            kind: kind.into(),
            causal_parent: parent.map(|p| p as i64),
            payload: body,
            ts: 1001.0 + seq as f64,
        };
        let canon = new.validate().unwrap();
        let ph = git_forum::ledger::hash::sha256_hex(canon.as_bytes());
        let e = Entry::next(self.head.as_ref(), &new, ph.clone());
        let row = obj(vec![
            ("hash", Value::str(ph)),
            ("body", new.payload.clone()),
        ]);
        writeln!(self.payloads, "{}", row.python_dumps()).unwrap();
        writeln!(self.entries, "{}", e.to_value().python_dumps()).unwrap();
        self.head = Some(e.clone());
        e
    }
}

/// One agent run: its entries, and its change commit (rewriting lines `from..to`) on `repo`.
fn agent_run(w: &mut Writer, repo: &Path, k: usize, from: usize, to: usize, lines: usize) {
    let req = w.put(
        "request",
        None,
        obj(vec![("text", Value::str(format!("change {k}")))]),
    );
    let id = "T1";
    let task = w.put(
        "task",
        Some(req.seq),
        obj(vec![
            ("id", Value::str(id)),
            ("agent", Value::str("backend")),
        ]),
    );
    let text: String = (1..=lines)
        .map(|i| {
            if (from..to).contains(&i) {
                format!("line {i} as task {k} wrote it\n")
            } else {
                format!("line {i}\n")
            }
        })
        .collect();
    // The file holds every earlier run's lines too.
    let before = std::fs::read_to_string(repo.join("big.txt")).unwrap();
    let merged: String = before
        .lines()
        .zip(text.lines())
        .enumerate()
        .map(|(i, (b, t))| if (from..to).contains(&(i + 1)) { t } else { b })
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(repo.join("big.txt"), merged).unwrap();
    let msg = format!(
        "change {k}\n\nForum-Ledger: main\nForum-Run: {}\nForum-Task: {}\nForum-Entry: {}\n",
        req.seq, task.seq, task.entry_hash
    );
    git(repo, &["commit", "-q", "-am", &msg]);
    let commit = out(repo, &["rev-parse", "HEAD"]);
    let blob = out(repo, &["rev-parse", "HEAD:big.txt"]);
    let usage = obj(vec![
        ("model", Value::str("bench-model")),
        ("prompt_tokens", Value::int(1000)),
        ("completion_tokens", Value::int(200)),
    ]);
    let res = w.put(
        "result",
        Some(task.seq),
        obj(vec![
            ("id", Value::str(id)),
            ("model", Value::str("bench-model")),
            ("usage", usage),
        ]),
    );
    let file = obj(vec![
        ("path", Value::str("big.txt")),
        ("status", Value::str("M")),
        ("added", Value::int((to - from) as i64)),
        ("removed", Value::int((to - from) as i64)),
    ]);
    let change = w.put(
        "change",
        Some(res.seq),
        obj(vec![
            ("task", Value::str(id)),
            ("commit", Value::str(&commit)),
            ("files", Value::Array(vec![file])),
            ("blobs", obj(vec![("big.txt", Value::str(&blob))])),
        ]),
    );
    let check = w.put(
        "check",
        Some(change.seq),
        obj(vec![
            ("task", Value::str(id)),
            ("command", Value::str("true")),
            ("ok", Value::Bool(true)),
        ]),
    );
    w.put(
        "ship",
        Some(check.seq),
        obj(vec![
            ("task", Value::str(id)),
            ("decision", Value::str("merge")),
            ("reason", Value::str("bench")),
        ]),
    );
}

/// The repository and its ledger; returns the repository's path.
fn build(root: &Path, n: usize, lines: usize, commits: usize) -> std::path::PathBuf {
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main", "."]);
    let base: String = (1..=lines).map(|i| format!("line {i}\n")).collect();
    std::fs::write(repo.join("big.txt"), base).unwrap();
    git(&repo, &["add", "big.txt"]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    let dir = root.join("forum");
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str| {
        std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(dir.join(name)).unwrap())
    };
    let mut w = Writer {
        entries: file("entries.jsonl"),
        payloads: file("payloads.jsonl"),
        head: None,
    };
    let stride = n / commits;
    let per = lines / commits;
    let mut k = 0;
    while w.head.as_ref().map_or(0, |h| h.seq + 1) < n as u64 {
        let seq = w.head.as_ref().map_or(0, |h| h.seq + 1) as usize;
        if k < commits && seq >= k * stride {
            agent_run(&mut w, &repo, k, k * per + 1, (k + 1) * per + 1, lines);
            k += 1;
        } else {
            let body = obj(vec![("i", Value::str(seq.to_string()))]);
            w.put("note", None, body);
        }
    }
    w.entries.flush().unwrap();
    w.payloads.flush().unwrap();
    let bin = env!("CARGO_BIN_EXE_git-forum");
    let d = dir.to_str().unwrap();
    timed(
        &repo,
        bin,
        &["--no-fsync", "import", d, "--max-bytes", "1000000000000"],
    );
    repo
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n = arg(&args, "--entries", 100_000);
    let lines = arg(&args, "--lines", 2_000);
    let commits = arg(&args, "--commits", 50);
    let runs = arg(&args, "--runs", 5).max(1);
    let busy = busy::Busy::from_args(&args);
    println!(
        "blame bench: {lines}-line file, {commits} agent commits, {n}-entry ledger, {runs} runs; {}",
        busy::Busy::label(&busy)
    );
    println!("load before: {}", load());
    let root = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let repo = build(root.path(), n, lines, commits);
    println!("built in {:.1}s", t.elapsed().as_secs_f64());
    let bin = env!("CARGO_BIN_EXE_git-forum");
    // One run first, to check it ties every line (and to warm the proof cache, as any second
    // call finds it).
    let o = Command::new(bin)
        .args(["blame", "big.txt", "--verify", "--json"])
        .current_dir(&repo)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let tied = r["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["task"].is_u64())
        .count();
    assert_eq!(tied, lines, "every line is an agent's");
    let (mut fw, mut fc, mut gw, mut gc) = (vec![], vec![], vec![], vec![]);
    for _ in 0..runs {
        let (w, c) = timed(&repo, bin, &["blame", "big.txt", "--verify"]);
        fw.push(w);
        fc.push(c);
        let (w, c) = timed(&repo, "git", &["blame", "big.txt"]);
        gw.push(w);
        gc.push(c);
    }
    let (fw, fc, gw, gc) = (median(fw), median(fc), median(gw), median(gc));
    println!(
        "`git forum blame --verify` (median of {runs}): {fw:.3} s wall, {fc:.3} s CPU (target < 1 s)"
    );
    println!("`git blame`                 (median of {runs}): {gw:.3} s wall, {gc:.3} s CPU");
    println!(
        "ratio: {:.1}x wall, {:.1}x CPU; load after: {}",
        fw / gw.max(1e-9),
        fc / gc.max(1e-9),
        load()
    );
}
