//! What the benches that start several writer processes share: medians and percentiles, the
//! file system a figure was taken on, and the harness that starts the writers, lets them all
//! open their files, says "go" to all at once and collects each append's latency.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use git_forum::ledger::{NewEntry, Value};

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

pub fn pct(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// The type and mount options of the file system holding `path`, from /proc/mounts (Linux), so
/// durable figures can be read against it: file creation and fsync costs differ widely between
/// file systems and between ext4 with and without a journal.
pub fn filesystem_of(path: &Path) -> String {
    let Ok(mounts) = std::fs::read_to_string("/proc/mounts") else {
        return "an unknown file system".into();
    };
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && path.starts_with(f[1]))
                .then(|| (f[1].len(), format!("{} ({}, {})", f[1], f[2], f[3])))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, s)| s)
        .unwrap_or_else(|| "an unknown file system".into())
}

/// The CPU time, user and system in seconds, of the children of this process that have been
/// waited for, from `/proc/self/stat` (10 ms ticks): the difference across a round is what its
/// writer processes spent, which tells the kernel's share (creating files, flushing) from
/// git forum's own code. `(0, 0)` where `/proc` is missing.
pub fn children_cpu() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces): state is the first; cutime and
    // cstime, fields 16 and 17 of the whole line, are the 14th and 15th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let secs = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / 100.0;
    (secs(13), secs(14))
}

/// Runs `procs` copies of this bench as `BENCH FLAG MODE TARGET W PER` on `target`, `per` entries each: the wall time from "go" until
/// the last is done, and every append's latency (seconds).
pub fn run_writers(
    flag: &str,
    mode: &str,
    target: &Path,
    procs: usize,
    per: usize,
) -> (f64, Vec<f64>) {
    let exe = std::env::current_exe().unwrap();
    let mut children: Vec<_> = (0..procs)
        .map(|w| {
            Command::new(&exe)
                .args([flag, mode, target.to_str().unwrap()])
                .args([w.to_string(), per.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut outs: Vec<_> = children
        .iter_mut()
        .map(|c| BufReader::new(c.stdout.take().unwrap()))
        .collect();
    for o in &mut outs {
        let mut line = String::new();
        o.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "a writer did not start: {line}");
    }
    let t = Instant::now();
    for c in &mut children {
        c.stdin.take().unwrap().write_all(b"go\n").unwrap();
    }
    let mut lat = Vec::with_capacity(procs * per);
    for o in &mut outs {
        let mut line = String::new();
        o.read_line(&mut line).unwrap();
        let mut words = line.split_whitespace();
        assert_eq!(words.next(), Some("ok"), "a writer failed: {line}");
        lat.extend(words.map(|w| w.parse::<f64>().unwrap() / 1e9));
    }
    let wall = t.elapsed().as_secs_f64();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    assert_eq!(lat.len(), procs * per, "every append was acknowledged");
    (wall, lat)
}

/// Deterministic entries shaped like a real run: ~400-byte payloads, some larger, a third with a
/// causal parent.
pub fn entries(n: usize) -> Vec<NewEntry> {
    (0..n)
        .map(|i| {
            let text = if i % 20 == 0 {
                "detail ".repeat(500)
            } else {
                format!("result of task T{} with some words of output", i % 97)
            };
            let payload = Value::object([
                ("task_id".to_string(), Value::str(format!("T{}", i % 97))),
                ("ok".to_string(), Value::Bool(i % 7 != 0)),
                ("output".to_string(), Value::str(text)),
                ("model".to_string(), Value::str("bench-model")),
                ("score".to_string(), Value::Float((i % 100) as f64 / 100.0)),
                ("note".to_string(), Value::str("x".repeat(200 + i % 50))),
            ]);
            NewEntry {
                actor: ["orchestrator", "backend", "validator", "synthesizer"][i % 4].to_string(),
                kind: ["task", "result", "verdict", "note"][i % 4].to_string(),
                causal_parent: if i % 3 == 0 && i > 0 {
                    Some((i - 1) as i64)
                } else {
                    None
                },
                payload,
                ts: 1_700_000_000.0 + i as f64 * 0.25,
            }
        })
        .collect()
}

/// The entries writer `w` appends: the bench's entries without causal parents (writers
/// interleave, and a parent must come before its child).
pub fn writer_entries(w: usize, per: usize) -> Vec<NewEntry> {
    let mut news = entries((w + 1) * per).split_off(w * per);
    for n in &mut news {
        n.causal_parent = None;
    }
    news
}

/// One writer process of [`run_writers`], from its arguments `MODE TARGET W N`: opens the
/// ledger at TARGET when MODE is `git` (fsync on, flushed through the write-ahead log), else
/// the baseline `open_baseline(MODE, TARGET)` gives; says `ready`; waits for a line on stdin;
/// appends writer W's N entries (the checked append `git forum append` makes, or the
/// baseline's `append`); and prints `ok` with the nanoseconds of each append.
pub fn serve_child<B>(
    args: &[String],
    open_baseline: impl FnOnce(&str, &Path) -> B,
    append: impl Fn(&B, &NewEntry),
) {
    use git_forum::store::git::{FlushMethod, GitStore, Options};
    let (mode, target) = (args[0].as_str(), std::path::PathBuf::from(&args[1]));
    let w: usize = args[2].parse().unwrap();
    let per: usize = args[3].parse().unwrap();
    let news = writer_entries(w, per);
    let mut store = (mode == "git").then(|| {
        let opts = Options {
            fsync: true,
            method: FlushMethod::Wal,
            ..Options::default()
        };
        GitStore::open(&target, "main", opts).unwrap()
    });
    let baseline = (mode != "git").then(|| open_baseline(mode, &target));
    println!("ready");
    let mut go = String::new();
    std::io::stdin().lock().read_line(&mut go).unwrap();
    let mut out = String::from("ok");
    for e in &news {
        let t = Instant::now();
        match (&mut store, &baseline) {
            (Some(store), _) => {
                git_forum::surface::append_checked(store, e).unwrap();
            }
            (None, Some(b)) => append(b, e),
            _ => unreachable!("a writer is git or its baseline"),
        }
        out.push_str(&format!(" {}", t.elapsed().as_nanos()));
    }
    println!("{out}");
}
