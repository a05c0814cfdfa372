//! `git forum import-trace` and `git forum mine`: the flight recorder on the command line.
//! The trace is read from a file or standard input with a byte limit; the fold and the reports
//! are [`crate::surface::flight`]'s; output is Forum's JSON, byte for byte.

use std::io::Write;
use std::path::PathBuf;

use clap::builder::PossibleValuesParser;
use clap::parser::ValueSource;

use super::{CliError, Ctx};
use crate::flight::{Format, MAX_TRACE_BYTES};
use crate::surface::flight as surface;

const FORMATS: [&str; 6] = [
    "langsmith",
    "otel",
    "agentops",
    "generic",
    "otlp",
    "claude-code",
];

#[derive(Debug, clap::Args)]
pub(crate) struct ImportTraceArgs {
    /// The trace: a file, or - for standard input.
    #[arg(value_name = "TRACE")]
    pub(crate) trace: PathBuf,
    /// How the trace is written: Forum's langsmith, otel, agentops or generic (a JSON list of
    /// events), otlp (OTLP/JSON as the collector's file exporter writes it) or claude-code (a
    /// Claude Code session transcript, JSONL).
    #[arg(long, default_value = "generic", value_parser = PossibleValuesParser::new(FORMATS))]
    pub(crate) format: String,
    /// The largest trace read, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = MAX_TRACE_BYTES)]
    pub(crate) max_bytes: u64,
}

#[derive(Debug, clap::Args)]
pub(crate) struct MineArgs {
    /// The trace: a file, or - for standard input.
    #[arg(value_name = "TRACE")]
    pub(crate) trace: PathBuf,
    /// How the trace is written (as for import-trace).
    #[arg(long, default_value = "generic", value_parser = PossibleValuesParser::new(FORMATS))]
    pub(crate) format: String,
    /// Append the row to this JSONL file (one line, sorted keys, as Forum writes it) instead
    /// of printing it.
    #[arg(long, value_name = "FILE")]
    pub(crate) out: Option<PathBuf>,
    /// Independent checks a PASS needs.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub(crate) min_checks: u64,
    /// The largest trace read, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = MAX_TRACE_BYTES)]
    pub(crate) max_bytes: u64,
}

/// The trace's text, at most `max` bytes; `command` prefixes the one-line error (exit 2).
fn read(path: &std::path::Path, max: u64, command: &str) -> Result<String, CliError> {
    super::input::read_limited_text(path, max, "trace", "raise the limit with --max-bytes N")
        .map_err(|e| CliError::usage(format!("{command}: {e}")))
}

/// Whether `--ledger` was given on this command line (not its default, nor the environment):
/// only then does `import-trace` write a ledger.
fn ledger_given() -> bool {
    super::command()
        .try_get_matches_from(std::env::args_os())
        .ok()
        .and_then(|m| {
            let sub = m.subcommand_matches("import-trace")?;
            Some(
                sub.value_source("ledger") == Some(ValueSource::CommandLine)
                    || m.value_source("ledger") == Some(ValueSource::CommandLine),
            )
        })
        .unwrap_or(false)
}

fn format(name: &str) -> Result<Format, CliError> {
    surface::format(name)
}

/// `git forum import-trace`.
pub(crate) fn import_trace(ctx: &Ctx, a: ImportTraceArgs) -> Result<(), CliError> {
    let fmt = format(&a.format)?;
    let text = read(&a.trace, a.max_bytes, "import-trace")?;
    let r = if ledger_given() {
        let mut store = ctx.store()?;
        surface::import_trace_into(&text, fmt, &mut store, &ctx.ledger)?
    } else {
        surface::import_trace(&text, fmt)?
    };
    ctx.out(&r.text())
}

/// `git forum mine`.
pub(crate) fn mine(ctx: &Ctx, a: MineArgs) -> Result<(), CliError> {
    let fmt = format(&a.format)?;
    let text = read(&a.trace, a.max_bytes, "mine")?;
    let row = surface::mine(&text, fmt, a.min_checks)?;
    let Some(out) = &a.out else {
        return ctx.out(&row.text());
    };
    let line = format!("{}\n", row.jsonl_line());
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(out)
        .and_then(|mut f| f.write_all(line.as_bytes()).and_then(|_| f.sync_all()))
        .map_err(|e| {
            CliError::fail(format!(
                "mine: cannot append to {}: {e}; give a writable file",
                out.display()
            ))
        })?;
    if ctx.json {
        return ctx.out(&row.text());
    }
    let pick = |k: &str| {
        row.row
            .get("grade")
            .and_then(|g| g.get(k))
            .map(crate::report::py_str)
            .unwrap_or_default()
    };
    let root = row
        .row
        .get("oracle")
        .and_then(|o| o.get("merkle_root"))
        .and_then(|v| v.as_str())
        .unwrap_or("");
    ctx.out(&format!(
        "mined {} into {}: grade {} (reward {}), merkle root {}…, row {}",
        crate::config::input::source_name(&a.trace),
        out.display(),
        pick("label"),
        pick("reward"),
        &root[..root.len().min(12)],
        row.row_hash()
    ))
}
