//! Secret-scanner throughput: `cargo bench --bench secrets` (add `-- --quick` for 4 MiB texts).
//!
//! Scans two texts with `git_forum::secrets::Scanner` (the built-in rules plus two runtime key
//! values): clean prose and code, and text dense with near-misses (`AKIA` and `ghp_` too
//! short, `password=changeme`, certificate headers, lone `eyJ`), and prints the median MB/s of
//! several runs of each. Nothing asserts a time: the machine is shared, so read the medians.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use git_forum::secrets::Scanner;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn clean(bytes: usize) -> String {
    let lines = [
        "The planner splits the request into tasks and the validator checks each result.\n",
        "fn main() { let total: u64 = items.iter().map(|i| i.size).sum(); println!(\"{total}\"); }\n",
        "Every entry is hashed with SHA-256 over its canonical JSON, and the chain links them.\n",
        "    if status != 200 { return Err(format!(\"request failed with {status}\")); }\n",
        "Numbers like 20260101 and words like Akimbo, ghost and password-less login are fine.\n",
    ];
    let mut out = String::with_capacity(bytes + 128);
    let mut i = 0;
    while out.len() < bytes {
        out.push_str(lines[i % lines.len()]);
        i += 1;
    }
    out
}

fn near_misses(bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 128);
    let mut i = 0u64;
    while out.len() < bytes {
        let _ = writeln!(
            out,
            "AKIA{i} ghp_short{i} password=changeme secret=${{VAR}} token: 42 -----BEGIN CERTIFICATE----- eyJ{i} xoxb-1 glpat-x api_key=xxxxxxxxxxxx"
        );
        i += 1;
    }
    out
}

fn case(name: &str, scanner: &Scanner, text: &str, runs: usize) {
    let mut found = 0;
    let t = median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                found = std::hint::black_box(scanner.scan(text)).len();
                t.elapsed()
            })
            .collect(),
    );
    let mbs = text.len() as f64 / 1e6 / t.as_secs_f64();
    println!(
        "{name:<12} {:>6.1} MiB  median of {runs}: {:>8.2} ms  {mbs:>8.1} MB/s  ({found} finds)",
        text.len() as f64 / (1024.0 * 1024.0),
        t.as_secs_f64() * 1e3
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let size = if quick { 4 << 20 } else { 32 << 20 };
    let runs = if quick { 5 } else { 7 };
    let scanner = Scanner::with_literals(["sk-test-0123456789abcdef", "local-key-9876543210"]);
    // Compile the rules once before timing.
    scanner.scan("warm up");
    case("clean", &scanner, &clean(size), runs);
    case("near-misses", &scanner, &near_misses(size), runs);
}
