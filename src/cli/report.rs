//! `summary`, `bench`, `room`, `capsule` and `receipt`: flags, and the text each
//! report renders as. Loading is [`crate::surface::reports`], the projections are
//! [`crate::report`]. None of them writes anything.

use super::{CliError, Ctx};
use crate::report::{self, Snapshot, Summary, summary::NUMERIC};
use crate::surface::store::open_repo;
use crate::surface::{self, reports, reports::Sources};

/// Summarize a ledger: entries, tasks, verdicts, quality checks, context budget, witnessed
/// model calls and payload weight.
#[derive(Debug, clap::Args)]
pub(crate) struct SummaryArgs {
    /// What to summarize (default: the current ledger): a ledger name, REMOTE/NAME for a
    /// fetched copy, a Forum ledger directory, or run:SEQ for one run of the current ledger.
    #[arg(value_name = "SOURCE")]
    pub(crate) source: Option<String>,
}

/// Compare two runs or ledgers: every metric's delta (B − A) and a diff of the final answers.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    /// The two sides: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: crate::surface::request::reports::Bench,
}

/// The latest run at a glance: request, route, plan, tasks with results and verdicts, the
/// answer, quality signals and next actions, each with the command that does it (text; the
/// whole room as JSON with --json, a short brief with --brief).
#[derive(Debug, clap::Args)]
pub(crate) struct RoomArgs {
    /// Print the brief for a person.
    #[arg(long, conflicts_with = "text")]
    pub(crate) brief: bool,
    /// Print the room as text (the default; kept for scripts that ask for it).
    #[arg(long)]
    pub(crate) text: bool,
    /// Start the room at this seq instead of the last request.
    #[arg(long, value_name = "SEQ", allow_hyphen_values = true)]
    pub(crate) since: Option<String>,
    /// Clip texts to this many characters (default 240).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub(crate) max_text_chars: Option<String>,
}

/// A short brief of the whole ledger, bounded in size, to hand a model as context (JSON
/// unless --text).
#[derive(Debug, clap::Args)]
pub(crate) struct CapsuleArgs {
    /// Print the capsule's prompt text.
    #[arg(long)]
    pub(crate) text: bool,
    /// Keep only the last N task results (0: none; default 8).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub(crate) max_items: Option<String>,
    /// Clip texts to this many characters (default 240).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub(crate) max_text_chars: Option<String>,
}

/// Forum's action receipt of one run: what was asked, what was answered, the checkpoint and
/// whether the ledger verifies deep (text, with the commands that check it again; Forum's
/// JSON with --json).
#[derive(Debug, clap::Args)]
pub(crate) struct ReceiptArgs {
    /// The run (the seq of its request; `git forum runs` lists them); default: the latest.
    #[arg(value_name = "RUN")]
    pub(crate) run: Option<u64>,
}

/// Parses a count flag given as text, so a negative or malformed value gets one clear line.
fn count_flag(flag: &str, value: Option<&str>, default: u64) -> Result<u64, CliError> {
    match value {
        None => Ok(default),
        Some(v) => v.trim().parse::<u64>().map_err(|_| {
            CliError::usage(format!(
                "{flag} takes a whole number of 0 or more, not {v:?}"
            ))
        }),
    }
}

/// A surface error as the CLI reports it: its class decides the exit code.
fn cli_error(e: surface::Error) -> CliError {
    e
}

/// Where the CLI looks SOURCE operands up: this repository, the current ledger, and Forum
/// ledger directories by path.
fn with_sources<T>(
    ctx: &Ctx,
    f: impl FnOnce(&Sources<'_>) -> surface::Result<T>,
) -> Result<T, CliError> {
    let repo = open_repo(&ctx.dir)?;
    f(&Sources {
        repo: &repo,
        ledger: &ctx.ledger,
        dirs: true,
        runs_hint: "git forum runs",
    })
    .map_err(cli_error)
}

/// The current ledger, which must exist, with what its own verify says.
fn current(ctx: &Ctx, deep: bool) -> Result<Snapshot, CliError> {
    let store = ctx.existing_store()?;
    reports::snapshot(&store, deep).map_err(cli_error)
}

fn absent_note(label: &str, n: u64) -> Option<String> {
    (n > 0).then(|| {
        format!(
            "note: {label}: {n} entr{} without a body (redacted); the counts that need a body cover only the bodies present",
            if n == 1 { "y" } else { "ies" }
        )
    })
}

/// Says on stderr when bodies are absent, so a report read from a redacted ledger is not
/// mistaken for a complete one.
fn note_absent(ctx: &Ctx, s: &Snapshot) {
    let n = reports::absent_bodies(s);
    if let Some(note) = absent_note(&format!("ledger {}", ctx.ledger), n) {
        eprintln!("{note}");
    }
}

/// Thousands separators for a count.
fn grouped(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

/// The sections of the text summary.
const SECTIONS: [(&str, &[&str]); 4] = [
    (
        "Run",
        &[
            "requests",
            "plans",
            "tasks",
            "task_results",
            "failed_results",
            "verdicts_pass",
            "verdicts_fail",
            "escalations",
            "resumes",
            "checkpoints",
            "budget_stops",
            "contexts",
            "answers",
        ],
    ),
    (
        "Checks on the answer",
        &[
            "intent_checks",
            "intent_flagged",
            "intent_judgments",
            "intent_drift_judged",
            "verifications",
            "verifications_refuted",
            "delivery_checks",
            "delivery_flagged",
            "revisions",
            "revisions_accepted",
            "delivery_profile_checks",
            "delivery_profile_flagged",
            "delivery_profile_operator",
            "delivery_profile_engineer",
            "delivery_profile_researcher",
            "delivery_profile_executive",
        ],
    ),
    (
        "Context budget",
        &[
            "context_budget_checks",
            "context_budget_trimmed",
            "context_budget_omitted",
            "context_tokens_original",
            "context_tokens_admitted",
            "context_tokens_saved",
        ],
    ),
    ("Cost", &["model_calls_total", "payload_bytes"]),
];

fn metric_name(key: &str) -> String {
    match key {
        "model_calls_total" => "model calls (witnessed)".into(),
        "verdicts_pass" => "verdicts passed".into(),
        "verdicts_fail" => "verdicts not passed".into(),
        other => other.replace('_', " "),
    }
}

fn summary_text(label: &str, s: &Summary) -> Vec<String> {
    let mut lines = vec![format!(
        "{label}: {} entries, chain {}, checkpoint {}",
        grouped(s.get("entries")),
        if s.verified {
            "verified"
        } else {
            "NOT VERIFIED"
        },
        &s.checkpoint[..s.checkpoint.len().min(16)]
    )];
    for (title, keys) in SECTIONS {
        lines.push(String::new());
        lines.push(title.to_string());
        for k in keys {
            lines.push(format!("  {:<30}{:>10}", metric_name(k), grouped(s.get(k))));
            if *k == "model_calls_total" {
                for (m, n) in &s.model_calls {
                    lines.push(format!("    {:<28}{:>10}", m, grouped(*n)));
                }
            }
        }
    }
    if let Some(w) = &s.work {
        lines.push(String::new());
        lines.push("Work in the repository".into());
        for (k, v) in w.metrics() {
            lines.push(format!("  {:<30}{:>10}", metric_name(k), grouped(v)));
        }
    }
    let spend = crate::report::spend::text_lines(&s.spend);
    if !spend.is_empty() {
        lines.push(String::new());
        lines.extend(spend);
    }
    lines.push(String::new());
    lines.push("Model calls are the calls the ledger names a model for: task attempts, and".into());
    lines.push("verdicts where the validator's model is recorded (planner and synthesizer".into());
    lines.push("calls carry no model in the ledger and are not counted).".into());
    lines
}

/// `git forum summary`.
pub(crate) fn summary(ctx: &Ctx, args: SummaryArgs) -> Result<(), CliError> {
    let side = with_sources(ctx, |src| src.current_or(args.source.as_deref(), false))?;
    let report = reports::summary(&side);
    let s = &report.summary;
    let note = absent_note(&report.label, s.absent_bodies);
    if ctx.json {
        if let Some(n) = &note {
            eprintln!("{n}");
        }
        return ctx.out(&s.to_value().python_pretty());
    }
    for line in summary_text(&report.label, s) {
        ctx.out(&line)?;
    }
    if let Some(n) = note {
        ctx.out(&n)?;
    }
    Ok(())
}

/// `git forum bench A B`.
pub(crate) fn bench(ctx: &Ctx, args: BenchArgs) -> Result<(), CliError> {
    let (a, b) = with_sources(ctx, |src| {
        Ok((src.side(&args.req.a, false)?, src.side(&args.req.b, false)?))
    })?;
    let report = reports::bench(&a, &b);
    let (sa, sb) = (&report.a.summary, &report.b.summary);
    let delta = report::compare(sa, sb);
    let (ans_a, ans_b, diff) = (&report.answer_a, &report.answer_b, &report.diff);
    let notes: Vec<String> = [
        absent_note(&a.label, sa.absent_bodies),
        absent_note(&b.label, sb.absent_bodies),
    ]
    .into_iter()
    .flatten()
    .collect();
    if ctx.json {
        for n in &notes {
            eprintln!("{n}");
        }
        return ctx.out(&report.to_value().python_pretty());
    }
    ctx.out(&format!(
        "A: {} ({} entries)",
        a.label,
        grouped(sa.get("entries"))
    ))?;
    ctx.out(&format!(
        "B: {} ({} entries)",
        b.label,
        grouped(sb.get("entries"))
    ))?;
    ctx.out("")?;
    print_metric_deltas(ctx, sa, sb, &delta)?;
    print_work(ctx, sa, sb)?;
    print_model_calls(ctx, sa, sb)?;
    print_spend(ctx, sa, sb)?;
    print_answers(ctx, ans_a, ans_b, diff)?;
    for n in notes {
        ctx.out(&n)?;
    }
    Ok(())
}

/// The metrics that differ between A and B, with their delta, or that all are equal.
fn print_metric_deltas(
    ctx: &Ctx,
    sa: &Summary,
    sb: &Summary,
    delta: &[(&str, i64)],
) -> Result<(), CliError> {
    let changed: Vec<&(&str, i64)> = delta.iter().filter(|(_, d)| *d != 0).collect();
    if changed.is_empty() {
        ctx.out(&format!("All {} metrics are equal.", NUMERIC.len()))?;
    } else {
        ctx.out(&format!(
            "{:<30}{:>10}{:>10}{:>10}",
            "metric", "A", "B", "B - A"
        ))?;
        for (k, d) in &changed {
            ctx.out(&format!(
                "{:<30}{:>10}{:>10}{:>10}",
                metric_name(k),
                grouped(sa.get(k)),
                grouped(sb.get(k)),
                format!("{}{}", if *d > 0 { "+" } else { "" }, grouped(*d))
            ))?;
        }
        let same = NUMERIC.len() - changed.len();
        if same > 0 {
            ctx.out(&format!(
                "({same} other metric{} equal)",
                if same == 1 { " is" } else { "s are" }
            ))?;
        }
    }
    Ok(())
}

/// The work in the repository on each side, metric by metric, when either side did any.
fn print_work(ctx: &Ctx, sa: &Summary, sb: &Summary) -> Result<(), CliError> {
    if let Some(d) = report::summary::compare_work(sa, sb) {
        let zero = report::work_report::Work::default();
        let (wa, wb) = (
            sa.work.as_ref().unwrap_or(&zero).metrics(),
            sb.work.as_ref().unwrap_or(&zero).metrics(),
        );
        ctx.out("")?;
        ctx.out("Work in the repository")?;
        for ((k, x), ((_, y), (_, dd))) in wa.iter().zip(wb.iter().zip(d)) {
            ctx.out(&format!(
                "{:<30}{:>10}{:>10}{:>10}",
                metric_name(k),
                grouped(*x),
                grouped(*y),
                format!("{}{}", if dd > 0 { "+" } else { "" }, grouped(dd))
            ))?;
        }
    }
    // Tasks run several times (`--attempts`): each side's attempts side by side.
    for (side, s) in [("A", sa), ("B", sb)] {
        for t in s.work.iter().flat_map(|w| &w.tasks) {
            for l in t.attempt_lines() {
                ctx.out(&format!("{side}: {l}"))?;
            }
        }
    }
    Ok(())
}

/// The witnessed model calls per model, for the models whose counts differ.
fn print_model_calls(ctx: &Ctx, sa: &Summary, sb: &Summary) -> Result<(), CliError> {
    let mut models: Vec<&String> = sa.model_calls.iter().map(|(m, _)| m).collect();
    for (m, _) in &sb.model_calls {
        if !models.contains(&m) {
            models.push(m);
        }
    }
    let calls = |s: &Summary, m: &str| {
        s.model_calls
            .iter()
            .find(|(k, _)| k == m)
            .map(|(_, n)| *n)
            .unwrap_or(0)
    };
    let per_model: Vec<String> = models
        .iter()
        .filter(|m| calls(sa, m) != calls(sb, m))
        .map(|m| format!("  {:<28}{:>10}{:>10}", m, calls(sa, m), calls(sb, m)))
        .collect();
    if !per_model.is_empty() {
        ctx.out("")?;
        ctx.out("Model calls per model (witnessed)")?;
        for line in per_model {
            ctx.out(&line)?;
        }
    }
    Ok(())
}

/// Each side's spend, when it has any.
fn print_spend(ctx: &Ctx, sa: &Summary, sb: &Summary) -> Result<(), CliError> {
    for (side, s) in [("A", sa), ("B", sb)] {
        let spend = crate::report::spend::text_lines(&s.spend);
        if !spend.is_empty() {
            ctx.out("")?;
            ctx.out(&format!("{side}: {}", spend[0]))?;
            for line in &spend[1..] {
                ctx.out(line)?;
            }
        }
    }
    Ok(())
}

/// Whether the final answers are missing, identical or differ (with the diff).
fn print_answers(
    ctx: &Ctx,
    ans_a: &Option<String>,
    ans_b: &Option<String>,
    diff: &Option<String>,
) -> Result<(), CliError> {
    ctx.out("")?;
    match (ans_a, ans_b, diff) {
        (None, None, _) => ctx.out("Final answers: neither side has one.")?,
        (_, _, None) => ctx.out("Final answers: identical.")?,
        (_, _, Some(d)) => {
            let missing = match (ans_a, ans_b) {
                (None, _) => " (A has none)",
                (_, None) => " (B has none)",
                _ => "",
            };
            ctx.out(&format!("Final answers differ{missing}:"))?;
            ctx.out(d.trim_end_matches('\n'))?;
        }
    }
    Ok(())
}

/// `git forum room`.
pub(crate) fn room(ctx: &Ctx, args: RoomArgs) -> Result<(), CliError> {
    if ctx.json && (args.brief || args.text) {
        return Err(CliError::usage("choose one of --json, --brief and --text"));
    }
    let max = count_flag("--max-text-chars", args.max_text_chars.as_deref(), 240)?;
    let since = match args.since.as_deref() {
        None => None,
        Some(v) => Some(count_flag("--since", Some(v), 0)?),
    };
    let s = current(ctx, true)?;
    note_absent(ctx, &s);
    let room = reports::room(&s, since, usize::try_from(max).unwrap_or(usize::MAX)).value;
    if args.brief {
        ctx.out(&report::room_brief_text(&room))
    } else if ctx.json {
        ctx.out(&room.python_pretty())
    } else {
        ctx.out(&report::room_text(&room))
    }
}

/// `git forum receipt`.
pub(crate) fn receipt(ctx: &Ctx, args: ReceiptArgs) -> Result<(), CliError> {
    let s = current(ctx, true)?;
    note_absent(ctx, &s);
    let receipt = crate::surface::run::receipt_of(&s, args.run).map_err(cli_error)?;
    if ctx.json {
        ctx.out(&receipt.0.python_pretty())
    } else {
        ctx.out(&report::receipt_text(&receipt.0))
    }
}

/// Write one run as OTLP/JSON: one trace, a span per ledger entry (ids from entry hashes,
/// parents from causal parents, the seq and checkpoint on each), model calls as GenAI `chat`
/// spans and tool calls as `execute_tool` spans.
#[derive(Debug, clap::Args)]
pub(crate) struct ExportOtelArgs {
    /// The run (the seq of its request; `git forum runs` lists them); default: the latest.
    #[arg(value_name = "RUN")]
    pub(crate) run: Option<u64>,
    /// Write to FILE instead of standard output (refused if FILE exists).
    #[arg(long, value_name = "FILE")]
    pub(crate) out: Option<std::path::PathBuf>,
}

/// `git forum export-otel`.
pub(crate) fn export_otel(ctx: &Ctx, args: ExportOtelArgs) -> Result<(), CliError> {
    let s = current(ctx, false)?;
    note_absent(ctx, &s);
    let roots = report::run_roots(&s.entries());
    let run = match args.run {
        Some(r) => r,
        None => s
            .entries()
            .iter()
            .rev()
            .find(|e| roots.get(&e.seq) == Some(&e.seq))
            .map(|e| e.seq)
            .ok_or_else(|| {
                CliError::new(
                    surface::Class::NotFound,
                    "no run in this ledger yet (submit starts one)",
                )
            })?,
    };
    let items: Vec<_> = s
        .items
        .iter()
        .filter(|(e, _)| roots.get(&e.seq) == Some(&run))
        .cloned()
        .collect();
    if items.first().is_none_or(|(e, _)| e.seq != run) {
        return Err(CliError::new(
            surface::Class::NotFound,
            format!("no run starts at seq {run}; `git forum runs` lists them"),
        ));
    }
    let text = serde_json::to_string(&report::otel::export(&items, &s.checkpoint))
        .map_err(|e| CliError::internal(e.to_string()))?;
    match args.out {
        None => ctx.out(&text),
        Some(path) => {
            use std::io::Write as _;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
                .map_err(|e| {
                    CliError::usage(format!(
                        "cannot create {}: {e}; give --out a new file",
                        path.display()
                    ))
                })?;
            f.write_all(text.as_bytes())
                .and_then(|_| f.write_all(b"\n"))
                .map_err(|e| {
                    // Nothing half-written is left behind.
                    let _ = std::fs::remove_file(&path);
                    CliError::internal(format!("cannot write {}: {e}", path.display()))
                })
        }
    }
}

/// `git forum capsule`.
pub(crate) fn capsule(ctx: &Ctx, args: CapsuleArgs) -> Result<(), CliError> {
    if ctx.json && args.text {
        return Err(CliError::usage("choose one of --json and --text"));
    }
    let items = count_flag("--max-items", args.max_items.as_deref(), 8)?;
    let chars = count_flag("--max-text-chars", args.max_text_chars.as_deref(), 240)?;
    let s = current(ctx, false)?;
    note_absent(ctx, &s);
    let capsule = reports::capsule(
        &s,
        usize::try_from(items).unwrap_or(usize::MAX),
        usize::try_from(chars).unwrap_or(usize::MAX),
    )
    .value;
    if args.text {
        ctx.out(&report::capsule_text(&capsule))
    } else {
        ctx.out(&capsule.python_pretty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_grouping() {
        assert_eq!(count_flag("--n", None, 8).unwrap(), 8);
        assert_eq!(count_flag("--n", Some("0"), 8).unwrap(), 0);
        let e = count_flag("--n", Some("-1"), 8).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(!e.message.contains('\n'));
        assert!(count_flag("--n", Some("x"), 8).is_err());
        assert_eq!(grouped(3660), "3,660");
        assert_eq!(grouped(-1234567), "-1,234,567");
        assert_eq!(grouped(12), "12");
    }
}
