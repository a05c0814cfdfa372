//! Standard-tree benchmark: `cargo bench --bench tlog` (add `-- --entries N`, default
//! 1,000,000). Builds a ledger of N entries through the library's batched append, then times
//! whole-process `git forum checkpoint --note` (first: tiles built from every entry; then with
//! tiles current, and after one append, extended) and `git forum prove SEQ --tlog-proof`, each
//! a median of three runs with the peak RSS of the child (`/usr/bin/time -v`). A baseline in the
//! same run: `git forum verify` (the full walk the first checkpoint does).
//! Nothing here asserts a time: the machine is shared and noisy, so read medians and ratios.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use git_forum::ledger::{NewEntry, Value};
use git_forum::store::git::{GitStore, Options};

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("git");
    assert!(o.status.success(), "git {args:?}");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Runs `git forum ARGS` in `dir`: (seconds, peak RSS in KiB).
fn forum(dir: &Path, args: &[&str]) -> (f64, u64) {
    let bin = env!("CARGO_BIN_EXE_git-forum");
    let t = Instant::now();
    let o = Command::new("/usr/bin/time")
        .arg("-v")
        .arg(bin)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run git-forum under /usr/bin/time");
    let secs = t.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "git forum {args:?}: {err}");
    let rss = err
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (secs, rss)
}

fn median3(dir: &Path, args: &[&str]) -> (f64, u64) {
    let mut runs: Vec<(f64, u64)> = (0..3).map(|_| forum(dir, args)).collect();
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    runs[1]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args
        .iter()
        .position(|a| a == "--entries")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "."]);
    let t = Instant::now();
    {
        let opts = Options {
            fsync: false,
            ..Options::default()
        };
        let mut store = GitStore::open(&repo, "main", opts).unwrap();
        let mut i = 0;
        while i < n {
            let batch: Vec<NewEntry> = (i..(i + 10_000).min(n))
                .map(|k| NewEntry {
                    actor: "bench".into(),
                    kind: "note".into(),
                    causal_parent: None,
                    payload: Value::object([("i".to_string(), Value::str(k.to_string()))]),
                    ts: 1000.0,
                })
                .collect();
            store.append_entries(&batch).unwrap();
            i += batch.len();
        }
    }
    println!("built {n} entries in {:.1}s", t.elapsed().as_secs_f64());
    let keys = tmp.path().join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    forum(&repo, &["keygen", "bench", "--dir", keys.to_str().unwrap()]);
    let key = keys.join("bench.key");
    let key = key.to_str().unwrap();
    let note = ["checkpoint", "--note", "--note-key", key, "--no-record"];
    let (v, vr) = forum(&repo, &["verify"]);
    println!(
        "baseline `git forum verify`: {v:.3}s, peak RSS {} MiB",
        vr / 1024
    );
    let (c0, r0) = forum(&repo, &note);
    println!(
        "`checkpoint --note`, tiles built from every entry: {c0:.3}s, peak RSS {} MiB",
        r0 / 1024
    );
    let (c1, r1) = median3(&repo, &note);
    println!(
        "`checkpoint --note`, tiles current: median {:.1} ms, peak RSS {} MiB (target < 50 ms); ratio to verify {:.4}",
        c1 * 1e3,
        r1 / 1024,
        c1 / v
    );
    let seq = (n / 2).to_string();
    let (p, pr) = median3(&repo, &["prove", &seq, "--tlog-proof"]);
    println!(
        "`prove {seq} --tlog-proof`: median {:.1} ms, peak RSS {} MiB (target < 50 ms)",
        p * 1e3,
        pr / 1024
    );
    forum(
        &repo,
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
    let (c2, r2) = forum(&repo, &note);
    println!(
        "`checkpoint --note` after one append (tiles extended): {:.1} ms, peak RSS {} MiB",
        c2 * 1e3,
        r2 / 1024
    );
}
