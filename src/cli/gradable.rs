//! `git forum export-gradable` and `git forum grade`: flags, the text a grade renders as, and
//! the atomic JSONL append of `--out`. The row and the grade are
//! [`crate::surface::reports::gradable`] and [`crate::surface::reports::grade_scoped`].

use std::io::{Read as _, Write as _};
use std::path::Path;

use super::{CliError, Ctx};
use crate::report::gradable::jsonl_line;
use crate::surface::reports;
use crate::surface::request::reports as rq;

/// The largest `--out` file appended to (it is rewritten whole on each append).
pub(crate) const MAX_OUT_BYTES: u64 = 256 << 20;

/// Export a run as one Forum `forum.gradable-trajectory/1` row: prompt, trajectory, grade,
/// what a consumer needs to re-derive the grade, and a seal (`row_hash`).
#[derive(Debug, clap::Args)]
pub(crate) struct ExportGradableArgs {
    /// What is graded: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: rq::Gradable,
    /// Append the row as one JSON line to FILE (created if missing) instead of printing it.
    #[arg(long, value_name = "FILE")]
    pub(crate) out: Option<std::path::PathBuf>,
}

/// A run's grade: the share of independent checks (verdicts, verifications, intent judgments
/// by actors that produced no result) that passed.
#[derive(Debug, clap::Args)]
pub(crate) struct GradeArgs {
    /// What is graded: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: rq::Grade,
}

/// The checks a PASS needs when the request does not say.
const MIN_CHECKS: u64 = 2;

/// The current ledger, which must exist, with what its own verify says (deep: the row's
/// `verified` is deep verification, as Forum's).
fn current(ctx: &Ctx, deep: bool) -> Result<crate::report::Snapshot, CliError> {
    let store = ctx.existing_store()?;
    let s = reports::snapshot(&store, deep)?;
    let absent = reports::absent_bodies(&s);
    if absent > 0 {
        eprintln!(
            "note: ledger {}: {absent} entr{} without a body (redacted); checks without a body are not counted",
            ctx.ledger,
            if absent == 1 { "y" } else { "ies" }
        );
    }
    Ok(s)
}

/// `git forum export-gradable`.
pub(crate) fn export(ctx: &Ctx, args: ExportGradableArgs) -> Result<(), CliError> {
    let g = &args.req.scope;
    let scope = reports::Scope::of(g.run, g.all)?;
    let s = current(ctx, true)?;
    let row = reports::gradable(&s, scope, g.min_checks.unwrap_or(MIN_CHECKS))?.value;
    match &args.out {
        None => ctx.out(&row.python_pretty()),
        Some(path) => {
            append_line(path, &jsonl_line(&row))?;
            let seal = row.get("row_hash").and_then(|v| v.as_str()).unwrap_or("");
            ctx.out(&format!("appended row {seal} to {}", path.display()))
        }
    }
}

/// `git forum grade`.
pub(crate) fn grade(ctx: &Ctx, args: GradeArgs) -> Result<(), CliError> {
    let graded = &args.req.scope;
    let min_checks = graded.min_checks.unwrap_or(MIN_CHECKS);
    let scope = reports::Scope::of(graded.run, graded.all)?;
    let s = current(ctx, false)?;
    let g = reports::grade_scoped(&s, scope, min_checks)?.value;
    if ctx.json {
        return ctx.out(&g.python_pretty());
    }
    let j = g.to_serde();
    ctx.out(&format!(
        "{}: reward {} over {} independent checks, {} refuted (PASS needs every check passed and at least {})",
        j["label"].as_str().unwrap_or("?"),
        j["reward"],
        j["checks"],
        j["refuted"],
        min_checks
    ))
}

/// Appends `line` and a newline to `path` atomically: the file is rewritten beside itself and
/// renamed over the old one, so a reader (or a crash) sees the file before or after the
/// append, never a torn row. The old content must end with a newline (a file that does not
/// would glue two rows together).
pub(crate) fn append_line(path: &Path, line: &str) -> Result<(), CliError> {
    let shown = path.display();
    let mut old = Vec::new();
    match std::fs::File::open(path) {
        Ok(f) => {
            let meta = f
                .metadata()
                .map_err(|e| CliError::fail(format!("--out {shown}: {e}")))?;
            if !meta.is_file() {
                return Err(CliError::usage(format!(
                    "--out {shown} is not a regular file; name a .jsonl file"
                )));
            }
            f.take(MAX_OUT_BYTES + 1)
                .read_to_end(&mut old)
                .map_err(|e| CliError::fail(format!("--out {shown}: reading it: {e}")))?;
            if old.len() as u64 > MAX_OUT_BYTES {
                return Err(CliError::usage(format!(
                    "--out {shown} is over {} MiB; start a new file",
                    MAX_OUT_BYTES >> 20
                )));
            }
            if !old.is_empty() && !old.ends_with(b"\n") {
                return Err(CliError::usage(format!(
                    "--out {shown} does not end with a newline (a torn last row?); repair or move it, nothing was written"
                )));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(CliError::fail(format!("--out {shown}: {e}"))),
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let tmp = dir.join(format!(".{name}.git-forum-{}", std::process::id()));
    let written = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        if let Ok(meta) = std::fs::metadata(path) {
            f.set_permissions(meta.permissions())?;
        }
        f.write_all(&old)?;
        f.write_all(line.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        // The rename is durable once the directory is.
        std::fs::File::open(dir)?.sync_all()
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        CliError::fail(format!(
            "--out {shown}: {e}; the file is as it was (check the directory exists and is writable)"
        ))
    })
}
