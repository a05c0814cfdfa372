//! Reading the thread's CPU clock (`libc::clock_gettime`) needs `unsafe`.
#![allow(unsafe_code)]
//! Secret-scanner throughput: `cargo bench --bench secrets` (add `-- --quick` for 4 MiB texts).
//!
//! Scans seven texts with `git_forum::secrets::Scanner` (the built-in rules plus two runtime key
//! values): clean prose and code; text dense with near-misses (a rule's prefix or keyword every
//! 13 bytes: `AKIA` and `ghp_` too short, `password=changeme`, `secret=${VAR}`, certificate
//! headers, lone `eyJ`, `api_key=xxxxxxxxxxxx`); source code full of assignments and `key:`
//! fields; JSON bodies as a run writes them; base64 blobs (a JWT's and a key's alphabet);
//! minified script (one long line of `a=b,c:d`); and near-misses of the newer rules
//! (`sk-ant-`, `sk-proj-`, `sk_live_`, `AIza`, `npm_`, `xapp-`, `hooks.slack.com`, `glcbt-`,
//! `ABSK`, `AccountKey=`, `…8Q~…`, a prefix every 11 bytes; the first six texts are the ones
//! measured before it, for comparison). Each line prints the median of several runs as
//! wall-clock MB/s and as MB/s of the thread's own CPU time, which the other processes on a
//! shared machine distort far less. Nothing asserts a time: read the medians.

use std::fmt::Write as _;
use std::time::Instant;

use git_forum::secrets::Scanner;

/// The calling thread's CPU time in seconds.
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Repeats `lines` (cycling, with `{i}` replaced by a counter) until `bytes` long.
fn fill(bytes: usize, lines: &[&str]) -> String {
    let mut out = String::with_capacity(bytes + 256);
    let mut i = 0usize;
    while out.len() < bytes {
        out.push_str(&lines[i % lines.len()].replace("{i}", &i.to_string()));
        i += 1;
    }
    out
}

fn clean(bytes: usize) -> String {
    fill(
        bytes,
        &[
            "The planner splits the request into tasks and the validator checks each result.\n",
            "fn main() { let total: u64 = items.iter().map(|i| i.size).sum(); println!(\"{total}\"); }\n",
            "Every entry is hashed with SHA-256 over its canonical JSON, and the chain links them.\n",
            "    if status != 200 { return Err(format!(\"request failed with {status}\")); }\n",
            "Numbers like 20260101 and words like Akimbo, ghost and password-less login are fine.\n",
        ],
    )
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

/// Near-misses of the newer rules: each prefix or keyword with too little after it.
fn new_misses(bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 512);
    let mut i = 0u64;
    while out.len() < bytes {
        let _ = writeln!(
            out,
            "sk-ant-api03-short{i} sk-proj-{i} task-force sk_live_{i} rk_test_x AIza{i} GOCSPX-{i} npm_{i} pypi-Ag{i} xapp-1 xox{i} hooks.slack.com/services/T0 glcbt-{i} GR1348941{i} ABSK{i} A3T{i} PuTTY-User-Key-File- _authToken=${{NPM_TOKEN}} AccountKey={i} abc8Q~short ~/path storage_key: none aws_session_token: {i}"
        );
        i += 1;
    }
    out
}

fn source(bytes: usize) -> String {
    fill(
        bytes,
        &[
            "    let token_count: usize = prompt.len() / 4 + {i};\n",
            "    let password = std::env::var(\"DB_PASSWORD\")?;\n",
            "    config.api_key = settings.get(\"api_key\").cloned();\n",
            "    pub secret_ref: Option<String>, // where the key lives, never the key\n",
            "    if self.access_key.is_none() { return Err(Error::usage(\"no key\")); }\n",
            "    map.insert(\"auth_key\".into(), json!({\"env\": \"FORUM_KEY\", \"n\": {i}}));\n",
            "    let url = format!(\"https://api.example.com/v1/items?page={i}&limit=50\");\n",
        ],
    )
}

fn json_bodies(bytes: usize) -> String {
    fill(
        bytes,
        &[
            "{\"id\":\"t{i}\",\"output\":\"The function returns the total; tests pass.\",\"ok\":true,\"model\":\"local-small\",\"usage\":{\"prompt_tokens\":812,\"completion_tokens\":64}}\n",
            "{\"kind\":\"task\",\"agent\":\"coder\",\"instruction\":\"Add a token_count field and update the parser\",\"done_when\":[\"cargo test passes\"],\"seq\":{i}}\n",
            "{\"request\":\"summarise the diff\",\"context\":{\"files\":[\"src/lib.rs\",\"README.md\"],\"max_tokens\":2048,\"secret_scan\":\"redact\"}}\n",
        ],
    )
}

/// Base64 lines from a fixed generator (no randomness: the same text every run).
fn base64_blob(bytes: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes + 80);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while out.len() < bytes {
        for _ in 0..76 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.push(ALPHABET[(x % 64) as usize] as char);
        }
        out.push('\n');
    }
    out
}

fn minified(bytes: usize) -> String {
    fill(
        bytes,
        &[
            "var a{i}=b.c,d=e?f:g,h={x:1,y:2,key:k,token:t};",
            "function q{i}(e){return e.ok?e.data:{error:e.msg,code:e.status}};",
            "o.headers={accept:\"application/json\",auth:n.auth_mode},o.retry=3;",
        ],
    )
}

fn case(name: &str, scanner: &Scanner, text: &str, runs: usize) {
    let mut found = 0;
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let (t, c) = (Instant::now(), thread_cpu());
        found = std::hint::black_box(scanner.scan_text(text)).len();
        cpu.push(thread_cpu() - c);
        wall.push(t.elapsed().as_secs_f64());
    }
    let mb = text.len() as f64 / 1e6;
    let (w, c) = (median(wall), median(cpu));
    println!(
        "{name:<12} {:>5.1} MiB  median of {runs}: wall {:>8.2} ms {:>7.1} MB/s  cpu {:>8.2} ms {:>7.1} MB/s  ({found} finds)",
        text.len() as f64 / (1024.0 * 1024.0),
        w * 1e3,
        mb / w,
        c * 1e3,
        mb / c
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let size = if quick { 4 << 20 } else { 32 << 20 };
    let runs = 7;
    let scanner = Scanner::with_literals(["sk-test-0123456789abcdef", "local-key-9876543210"]);
    // Build the searches once before timing.
    scanner.scan_text("warm up");
    type Make = fn(usize) -> String;
    let cases: [(&str, Make); 7] = [
        ("clean", clean),
        ("near-misses", near_misses),
        ("source", source),
        ("json", json_bodies),
        ("base64", base64_blob),
        ("minified", minified),
        ("new-misses", new_misses),
    ];
    for (name, make) in cases {
        case(name, &scanner, &make(size), runs);
    }
}
