//! `git forum blame FILE [-L A,B] [REV] [--verify]`: each line with the commit that wrote it
//! and, for a run's change, the run, task, model, cost and tool call, printed like `git
//! blame` (the attribution cut to fit 80 columns before the line, never the line number).
//! Thin over `surface::blame`.

use super::submit::cli_err;
use super::{CliError, Ctx};
use crate::surface::blame::{BlameReport, LineReport, TaskReport, short};
use crate::surface::request::blame::Blame;

/// Show who wrote each line of a file by the record: the run, task, model, tool call and cost of every line an agent wrote, with proofs.
#[derive(Debug, clap::Args)]
pub(crate) struct BlameArgs {
    /// The file, the lines and the revision: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: Blame,
}

/// The columns before a line's text.
const PREFIX: usize = 48;

/// `git forum blame`.
pub(crate) fn blame(ctx: &Ctx, args: BlameArgs) -> Result<(), CliError> {
    let store = ctx.reader()?;
    let report =
        crate::surface::blame::blame(&ctx.dir, &ctx.ledger, &store, &args.req).map_err(cli_err)?;
    if ctx.json {
        return ctx.out_report(&report);
    }
    let text = render(&report);
    if !text.is_empty() {
        ctx.out(&text)?;
    }
    if report.verified == Some(true) {
        let tied = report.lines.iter().filter(|l| l.task.is_some()).count();
        eprintln!(
            "verified: {tied} of {} lines tied to {} tasks; every proof and tie holds",
            report.lines.len(),
            report.tasks.len()
        );
    }
    for n in &report.notes {
        eprintln!("note: {n}");
    }
    Ok(())
}

/// The report as `git blame` shows a file.
pub(crate) fn render(r: &BlameReport) -> String {
    let width = r
        .lines
        .iter()
        .map(|l| l.line.to_string().len())
        .max()
        .unwrap_or(1);
    // Short commit, " (", the attribution, " ", the number, ") ".
    let room = PREFIX.saturating_sub(8 + 2 + 1 + width + 2).max(8);
    let mut out = String::new();
    for l in &r.lines {
        let who = fit(&attribution(r, l), room);
        out.push_str(&format!(
            "{} ({who:<room$} {:>width$}) {}\n",
            short(&l.commit),
            l.line,
            l.text
        ));
    }
    out.trim_end_matches('\n').to_string()
}

/// Who wrote a line: `r3 T1 model $0.0012 write_file#2`, or why no run did.
fn attribution(r: &BlameReport, l: &LineReport) -> String {
    let Some(t) = l.task.and_then(|s| r.tasks.iter().find(|t| t.seq == s)) else {
        return match &l.note {
            Some(_) => "another ledger's change".into(),
            None => "not a run's change".into(),
        };
    };
    let mut s = format!(
        "r{} {} {}",
        t.run,
        t.id,
        t.model.as_deref().unwrap_or(&t.lane)
    );
    s.push(' ');
    s.push_str(&cost(t));
    if let Some(c) = &l.tool_call {
        s.push_str(&format!(" {}#{}", c.tool, c.n));
    }
    match l.via {
        Some("patch_id") => s.push_str(" (picked)"),
        Some("content") => s.push_str(" (squashed)"),
        _ => {}
    }
    s
}

/// A task's cost, or its tokens when it was not priced.
fn cost(t: &TaskReport) -> String {
    match t.cost_usd {
        Some(c) => format!("${c:.4}"),
        None => format!("{}tok", t.prompt_tokens + t.completion_tokens),
    }
}

/// `s` in at most `n` characters, a cut marked with `…`.
fn fit(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut cut: String = s.chars().take(n.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_attribution_is_cut_and_the_number_kept() {
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("abc", 4), "abc");
    }
}
