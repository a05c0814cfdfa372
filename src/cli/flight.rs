//! `git forum import-trace` and `git forum mine`: the flight recorder on the command line.
//! The trace is read from a file or standard input with a byte limit; the fold and the reports
//! are [`crate::surface::flight`]'s; output is Forum's JSON, byte for byte.

use std::io::Write;
use std::path::PathBuf;

use clap::parser::ValueSource;

use super::{CliError, Ctx};
use crate::flight::{Format, MAX_TRACE_BYTES};
use crate::surface::flight as surface;
use crate::surface::request::reports::{ImportTrace, Trace};

/// The trace as a file, beside the request's fields (the trace as JSON or text, its format).
#[derive(Debug, clap::Args)]
pub(crate) struct TraceFile {
    /// The trace: a file, or - for standard input.
    #[arg(
        value_name = "TRACE",
        required_unless_present_any = ["trace", "text"],
        conflicts_with_all = ["trace", "text"]
    )]
    pub(crate) file: Option<PathBuf>,
    /// The largest trace read, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = MAX_TRACE_BYTES)]
    pub(crate) max_bytes: u64,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ImportTraceArgs {
    /// Where the trace is.
    #[command(flatten)]
    pub(crate) input: TraceFile,
    /// The trace and its format: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: ImportTrace,
}

#[derive(Debug, clap::Args)]
pub(crate) struct MineArgs {
    /// Where the trace is.
    #[command(flatten)]
    pub(crate) input: TraceFile,
    /// The trace, its format and the checks a PASS needs: the request the daemon and MCP
    /// take.
    #[command(flatten)]
    pub(crate) req: crate::surface::request::reports::Mine,
    /// Append the row to this JSONL file (one line, sorted keys, as Forum writes it) instead
    /// of printing it.
    #[arg(long, value_name = "FILE")]
    pub(crate) out: Option<PathBuf>,
}

/// The trace's text and format: the file's text (at most `--max-bytes`), else the text or
/// events the request's fields give; `command` prefixes a read error (exit 2).
fn trace_of(input: &TraceFile, t: &Trace, command: &str) -> Result<(String, Format), CliError> {
    let fmt = format(t.format.as_deref().unwrap_or("generic"))?;
    let text = match &input.file {
        Some(path) => read(path, input.max_bytes, command)?,
        None => {
            t.validate()?;
            match (&t.text, &t.trace) {
                (Some(text), _) => text.clone(),
                (None, Some(events)) => {
                    surface::trace_text(&crate::ledger::Value::from_serde(events))
                }
                (None, None) => String::new(),
            }
        }
    };
    Ok((text, fmt))
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
    let (text, fmt) = trace_of(&a.input, &a.req.trace, "import-trace")?;
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
    let (text, fmt) = trace_of(&a.input, &a.req.trace, "mine")?;
    let row = surface::mine(&text, fmt, a.req.min_checks.unwrap_or(2))?;
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
        a.input.file.as_deref().map_or(
            "the trace given".to_string(),
            crate::config::input::source_name
        ),
        out.display(),
        pick("label"),
        pick("reward"),
        &root[..root.len().min(12)],
        row.row_hash()
    ))
}
