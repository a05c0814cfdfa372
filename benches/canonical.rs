//! Canonical-JSON parsing benchmark: `cargo bench --bench canonical` (add `-- --quick` for
//! smaller objects).
//!
//! Parses objects of many keys, a long array and a deep-ish document with the ledger's parser
//! (`git_forum::ledger::canonical::parse`) and with `serde_json::from_str::<Value>` on the same
//! text, and prints the median of several runs of each and their ratio. Nothing here asserts a
//! time: the machine is shared and noisy, so read the medians and the ratio.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use git_forum::ledger::canonical;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(f());
                t.elapsed()
            })
            .collect(),
    )
}

fn object_of_keys(n: usize) -> String {
    let mut text = String::with_capacity(n * 20);
    text.push('{');
    for i in 0..n {
        if i > 0 {
            text.push(',');
        }
        let _ = write!(text, "\"key-{:07}\":{i}", (i * 7919) % n);
    }
    text.push('}');
    text
}

fn array_of_records(n: usize) -> String {
    let mut text = String::from("[");
    for i in 0..n {
        if i > 0 {
            text.push(',');
        }
        let _ = write!(
            text,
            "{{\"id\":{i},\"ok\":true,\"score\":{}.5,\"note\":\"record {i}\"}}",
            i % 100
        );
    }
    text.push(']');
    text
}

fn case(name: &str, text: &str, runs: usize) {
    // Both parsers must accept the text before anything is timed.
    canonical::parse(text).expect("canonical parse");
    serde_json::from_str::<serde_json::Value>(text).expect("serde_json parse");
    let ours = time(runs, || canonical::parse(text).unwrap());
    let theirs = time(runs, || {
        serde_json::from_str::<serde_json::Value>(text).unwrap()
    });
    println!(
        "{name:<28} {:>9.1} KiB  canonical::parse {:>9.2} ms  serde_json {:>9.2} ms  ratio {:.2}",
        text.len() as f64 / 1024.0,
        ours.as_secs_f64() * 1e3,
        theirs.as_secs_f64() * 1e3,
        ours.as_secs_f64() / theirs.as_secs_f64()
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runs = if quick { 3 } else { 5 };
    let sizes: &[usize] = if quick {
        &[10_000, 80_000]
    } else {
        &[80_000, 1_000_000]
    };
    println!("median of {runs} runs each; ratio = canonical::parse / serde_json::from_str");
    for &n in sizes {
        case(&format!("object of {n} keys"), &object_of_keys(n), runs);
    }
    let n = if quick { 20_000 } else { 200_000 };
    case(&format!("array of {n} records"), &array_of_records(n), runs);
}
