//! The reliability suite at length: `cargo bench --bench reliability [-- OPTIONS]`.
//!
//! Runs, on files/SHA-1, files/SHA-256 and reftable repositories: appenders through the CLI,
//! the daemon and MCP killed with SIGKILL at random moments; a writer killed at every step of
//! one append; two appenders beside loops of git gc, repack, prune and maintenance; and the
//! CLI, the daemon and MCP appending for `--loop-seconds` beside loops of `git prune
//! --expire=now`, `git gc --prune=now` and `git repack -ad` all at once. Prints the figures of
//! each and a closing `N passed, N failed`; exits 1 when anything failed.
//!
//! Options: `--appends N` (per client in the kill scenario, default 500), `--kill-one-in K`
//! (default 3), `--maintenance N` (appends per appender beside each loop, default 100),
//! `--loop-seconds S` (default 25), `--seed S`. The same scenarios run small in `cargo nextest
//! run`, and the loops at full length in `cargo nextest run --profile heavy`.

#[allow(dead_code, unused_imports)]
#[path = "../tests/integration/common.rs"]
mod common;
#[allow(dead_code, unused_imports)]
#[path = "../tests/integration/maintenance.rs"]
mod maintenance;
#[allow(dead_code, unused_imports)]
#[path = "../tests/integration/reliability.rs"]
mod reliability;
#[allow(dead_code, unused_imports)]
#[path = "../tests/integration/storage.rs"]
mod storage;

use std::time::Instant;

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let appends = arg("--appends", 500) as usize;
    let kill_one_in = arg("--kill-one-in", 3);
    let maintenance = arg("--maintenance", 100) as usize;
    let loop_seconds = arg("--loop-seconds", 25) as f64;
    let seed = arg("--seed", reliability::seed());
    let mut passed = 0;
    let mut failed = 0;
    let mut record = |name: String, r: Result<String, String>| match r {
        Ok(figures) => {
            passed += 1;
            println!("ok   {name}: {figures}");
        }
        Err(e) => {
            failed += 1;
            println!("FAIL {name}: {e}");
        }
    };
    println!("seed {seed}");
    for kind in common::FORMATS {
        let start = Instant::now();
        let repo = common::Repo::new(kind);
        let r = reliability::concurrent_kills(&repo, appends, kill_one_in, seed).map(|f| {
            format!(
                "{} acknowledged (all present once), {} unknown ({} landed, none twice), {} SIGKILLs, {} entries, verify clean, {:.1}s",
                f.acknowledged,
                f.unknown,
                f.unknown_landed,
                f.kills,
                f.entries,
                start.elapsed().as_secs_f64()
            )
        });
        record(format!("{kind} cli+daemon+mcp under SIGKILL"), r);

        for point in storage::failpoints(kind) {
            let repo = storage::seeded(kind, 3);
            storage::killed_append(&repo, point);
            let v = storage::verify(&repo, true);
            let after = repo
                .forum()
                .args(["append", "--actor", "a", "--kind", "k", "--payload", "1"])
                .output()
                .unwrap();
            let r = if v["ok"] == true && after.status.success() {
                Ok(format!(
                    "no false alarm, {} entries, next append ok",
                    v["entries"]
                ))
            } else {
                Err(format!("verify {v}; next append {after:?}"))
            };
            record(format!("{kind} killed at {point}"), r);
        }

        for args in storage::MAINTENANCE {
            let r = storage::beside_maintenance(kind, args, maintenance);
            record(format!("{kind} beside maintenance"), r);
        }

        let r = maintenance::beside_loops(kind, loop_seconds).map(|f| f.line());
        record(
            format!("{kind} cli+daemon+mcp beside prune, gc and repack loops"),
            r,
        );
    }
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
}
