//! `git forum bench-deep-verify`: Forum's flags, the text table, and `--out`. The benchmark
//! itself is [`crate::surface::bench_verify`].

use std::path::{Path, PathBuf};

use super::{CliError, Ctx};
use crate::surface::bench_verify::{self, DeepVerifyReport, Parameters};

/// Time the chain check, the body check and the deep check of synthetic ledgers of every size,
/// body size, storage and redaction ratio given, and print Forum's
/// forum.deep-verify-benchmark/v1 receipt (a table unless --json).
#[derive(Debug, clap::Args)]
pub(crate) struct BenchDeepVerifyArgs {
    /// Entry counts, comma-separated.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "100,1000",
        allow_hyphen_values = true
    )]
    pub(crate) entries: String,
    /// Body sizes in bytes, comma-separated.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "256,4096",
        allow_hyphen_values = true
    )]
    pub(crate) payload_bytes: String,
    /// A storage to time: memory, packed (one pack), loose (loose objects) or wal (durable
    /// appends through the write-ahead log). Repeatable; default memory.
    #[arg(long = "storage", value_name = "KIND")]
    pub(crate) storage: Vec<String>,
    /// Shares of the distinct bodies to redact, from 0 to 1, comma-separated.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "0,0.5,1",
        allow_hyphen_values = true
    )]
    pub(crate) redaction_ratio: String,
    /// Untimed rounds before the timed ones.
    #[arg(
        long,
        value_name = "N",
        default_value = "1",
        allow_hyphen_values = true
    )]
    pub(crate) warmups: String,
    /// Timed rounds of each check.
    #[arg(
        long,
        value_name = "N",
        default_value = "5",
        allow_hyphen_values = true
    )]
    pub(crate) repeats: String,
    /// Also write the receipt (JSON) to PATH.
    #[arg(long, value_name = "PATH")]
    pub(crate) out: Option<PathBuf>,
}

fn count(flag: &str, text: &str) -> Result<u64, CliError> {
    text.trim().parse::<u64>().map_err(|_| {
        CliError::usage(format!(
            "{flag} takes a whole number of 0 or more, not {text:?}"
        ))
    })
}

/// The receipt as a table, one row per case (Forum's columns).
pub(crate) fn text(r: &DeepVerifyReport) -> String {
    let mut lines = vec![
        "git forum deep-verify benchmark".to_string(),
        format!("schema: {}", r.schema),
        format!("git forum: {} | platform: {}", r.git_forum, r.platform),
        String::new(),
        format!(
            "{:>8} {:>8} {:<12} {:>7} {:>10} {:>10} {:>11} {:>10}",
            "entries", "body", "storage", "redact", "build_ms", "chain_ms", "payload_ms", "deep_ms"
        ),
    ];
    for c in &r.cases {
        lines.push(format!(
            "{:>8} {:>8} {:<12} {:>7.2} {:>10.3} {:>10.3} {:>11.3} {:>10.3}",
            c.entry_count,
            c.payload_body_bytes,
            c.storage_mode,
            c.redaction_ratio,
            c.build.ms,
            c.verify_chain.mean_ms,
            c.verify_payloads.mean_ms,
            c.verify_deep.mean_ms
        ));
    }
    for s in &r.skipped {
        lines.push(format!(
            "{:>8} {:>8} {:<12} {:>7.2} skipped: {}",
            s.entry_count, s.payload_body_bytes, s.storage_mode, s.redaction_ratio, s.reason
        ));
    }
    lines.join("\n")
}

/// Writes `bytes` to `path` through a file beside it and a rename, so PATH holds the old
/// receipt or the new one, never half of one.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "receipt".into());
    let tmp = path.with_file_name(format!(".{name}.git-forum-{}", std::process::id()));
    std::fs::write(&tmp, bytes)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            CliError::fail(format!(
                "--out {}: {e}; check the directory exists and is writable",
                path.display()
            ))
        })
}

/// `git forum bench-deep-verify`.
pub(crate) fn run(ctx: &Ctx, args: BenchDeepVerifyArgs) -> Result<(), CliError> {
    let params = Parameters {
        entry_counts: bench_verify::parse_counts("--entries", &args.entries)?,
        payload_body_bytes: bench_verify::parse_counts("--payload-bytes", &args.payload_bytes)?,
        storage_modes: if args.storage.is_empty() {
            vec!["memory".to_string()]
        } else {
            args.storage.clone()
        },
        redaction_ratios: bench_verify::parse_ratios("--redaction-ratio", &args.redaction_ratio)?,
        warmups: count("--warmups", &args.warmups)?,
        repeats: count("--repeats", &args.repeats)?,
    };
    params.check()?;
    if let Some(out) = &args.out
        && out.is_dir()
    {
        return Err(CliError::usage(format!(
            "--out {} is a directory; name a file",
            out.display()
        )));
    }
    let report = bench_verify::run(params, crate::surface::clock::system_now())?;
    // Serialized from the struct, so the keys keep Forum's order.
    let json = serde_json::to_string_pretty(&report).map_err(|e| CliError::fail(e.to_string()))?;
    if let Some(out) = &args.out {
        write_atomic(out, format!("{json}\n").as_bytes())?;
    }
    if ctx.json {
        ctx.out(&json)
    } else {
        ctx.out(&text(&report))
    }
}
