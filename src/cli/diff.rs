//! `git forum diff [RUN] [--stat | --name-only] [-- PATH...]`: a `--work` run's change against
//! the commit it started from, printed as `git diff` prints it (coloured on a terminal unless
//! `NO_COLOR` is set). Thin over `surface::diff`.

use std::io::IsTerminal;

use super::submit::cli_err;
use super::{CliError, Ctx};
use crate::surface::diff::{DiffFile, DiffReport};
use crate::surface::request::work::Diff;

/// Show a --work run's change against the commit it started from, as git diff does.
#[derive(Debug, clap::Args)]
pub(crate) struct DiffArgs {
    /// Which run and what to show: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: Diff,
}

const BOLD: &str = "\x1b[1m";
const CYAN: &str = "\x1b[36m";
const GREEN: &str = "\x1b[32m";
const RED: &str = "\x1b[31m";
const RESET: &str = "\x1b[m";

/// Whether to colour what goes to stdout: a terminal, and no `NO_COLOR`.
pub(super) fn colour() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// `git forum diff`.
pub(crate) fn diff(ctx: &Ctx, args: DiffArgs) -> Result<(), CliError> {
    let store = ctx.existing_store()?;
    let report =
        crate::surface::diff::diff(&ctx.dir, &ctx.ledger, &store, &args.req).map_err(cli_err)?;
    if ctx.json {
        return ctx.out_report(&report);
    }
    if report.tip.is_none() {
        eprintln!(
            "run {} merged no change: there is nothing against its base {}",
            report.run,
            short(&report.base)
        );
        return Ok(());
    }
    let paint = colour();
    let text = if args.req.name_only {
        report
            .files
            .iter()
            .map(|f| f.path.clone())
            .collect::<Vec<_>>()
            .join("\n")
    } else if args.req.stat {
        stat(&report.files, paint)
    } else {
        patch(report.patch.as_deref().unwrap_or_default(), paint)
    };
    if !text.is_empty() {
        ctx.out(text.trim_end_matches('\n'))?;
    }
    if report.truncated {
        eprintln!("{}", cut_note(&report));
    }
    Ok(())
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

/// The line that says the patch was cut and how to see it whole.
fn cut_note(r: &DiffReport) -> String {
    format!(
        "the patch was cut at 8 MiB; see it whole with `git diff {} {}`",
        short(&r.base),
        r.tip.as_deref().map(short).unwrap_or_default()
    )
}

/// A unified diff, coloured as git colours it when `paint`.
pub(super) fn patch(text: &str, paint: bool) -> String {
    if !paint {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    let mut in_header = false;
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        if body.starts_with("diff --git ") {
            in_header = true;
        } else if body.starts_with("@@") {
            in_header = false;
        }
        let colour = if in_header {
            BOLD
        } else if body.starts_with("@@") {
            CYAN
        } else if body.starts_with('+') {
            GREEN
        } else if body.starts_with('-') {
            RED
        } else {
            ""
        };
        if colour.is_empty() {
            out.push_str(line);
        } else {
            out.push_str(&format!("{colour}{body}{RESET}{nl}"));
        }
    }
    out
}

/// The widest bar of `--stat`, as git's default on an 80-column terminal.
const BAR: u64 = 50;

/// `git diff --stat`: one line per file (its path, lines changed, a bar of `+` and `-`), then
/// the totals.
pub(super) fn stat(files: &[DiffFile], paint: bool) -> String {
    let width = files
        .iter()
        .map(|f| f.path.chars().count())
        .max()
        .unwrap_or(0);
    let most = files.iter().map(|f| f.added + f.removed).max().unwrap_or(0);
    let digits = most.to_string().len();
    let mut lines = Vec::with_capacity(files.len() + 1);
    for f in files {
        let n = f.added + f.removed;
        // Scaled like git: the largest change fills the bar, a non-zero side keeps one mark.
        let scale = |x: u64| match (x, most > BAR) {
            (0, _) => 0,
            (x, true) => (x * BAR / most).max(1),
            (x, false) => x,
        };
        let (plus, minus) = (
            "+".repeat(scale(f.added) as usize),
            "-".repeat(scale(f.removed) as usize),
        );
        let bar = if paint {
            format!("{GREEN}{plus}{RESET}{RED}{minus}{RESET}")
        } else {
            format!("{plus}{minus}")
        };
        let count = if n == 0 && f.status != "D" && f.status != "A" {
            "Bin".to_string()
        } else {
            n.to_string()
        };
        lines.push(format!(
            " {:<width$} | {count:>digits$} {bar}",
            f.path,
            digits = digits.max(3)
        ));
    }
    let (added, removed): (u64, u64) = files
        .iter()
        .fold((0, 0), |(a, r), f| (a + f.added, r + f.removed));
    let plural = |n: u64, one: &str, many: &str| {
        if n == 1 {
            format!("{n} {one}")
        } else {
            format!("{n} {many}")
        }
    };
    let mut total = format!(
        " {}",
        plural(files.len() as u64, "file changed", "files changed")
    );
    if added > 0 || removed == 0 {
        total.push_str(&format!(
            ", {}",
            plural(added, "insertion(+)", "insertions(+)")
        ));
    }
    if removed > 0 {
        total.push_str(&format!(
            ", {}",
            plural(removed, "deletion(-)", "deletions(-)")
        ));
    }
    lines.push(total);
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, status: &str, added: u64, removed: u64) -> DiffFile {
        DiffFile {
            path: path.into(),
            status: status.into(),
            added,
            removed,
        }
    }

    #[test]
    fn a_stat_reads_like_gits() {
        let files = [file("src/add.py", "M", 1, 1), file("tests/t.py", "A", 3, 0)];
        assert_eq!(
            stat(&files, false),
            " src/add.py |   2 +-\n tests/t.py |   3 +++\n 2 files changed, 4 insertions(+), 1 deletion(-)"
        );
    }

    #[test]
    fn a_patch_is_coloured_only_when_asked() {
        let p = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n";
        assert_eq!(patch(p, false), p);
        let c = patch(p, true);
        assert!(c.contains("\x1b[1m--- a/x\x1b[m\n"), "{c:?}");
        assert!(c.contains("\x1b[31m-a\x1b[m\n\x1b[32m+b\x1b[m\n"), "{c:?}");
    }
}
