//! `summary`, `bench`, `room` and `capsule`: read-side projections of a ledger (see
//! [`crate::report`]). None of them writes anything.

use std::path::Path;

use super::{CliError, Ctx};
use crate::ledger::canonical::Value;
use crate::report::{self, Snapshot, Summary, summary::NUMERIC};
use crate::run::status;
use crate::store::git::{GitStore, Options, open_repo, validate_ledger_name};
use crate::store::sync::REMOTES_PREFIX;

/// Summarize a ledger: entries, tasks, verdicts, quality checks, context budget, witnessed
/// model calls and payload weight.
#[derive(Debug, clap::Args)]
pub struct SummaryArgs {
    /// What to summarize (default: the current ledger): a ledger name, REMOTE/NAME for a
    /// fetched copy, a Forum ledger directory, or run:SEQ for one run of the current ledger.
    #[arg(value_name = "SOURCE")]
    pub source: Option<String>,
}

/// Compare two runs or ledgers: every metric's delta (B − A) and a diff of the final answers.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Side A: a ledger name, REMOTE/NAME (a fetched copy), a Forum ledger directory, or
    /// run:SEQ (one run of the current ledger).
    #[arg(value_name = "A")]
    pub a: String,
    /// Side B, in the same forms.
    #[arg(value_name = "B")]
    pub b: String,
}

/// The latest run at a glance: request, route, plan, tasks with results and verdicts, the
/// answer, quality signals, next actions and a brief (JSON unless --brief or --text).
#[derive(Debug, clap::Args)]
pub struct RoomArgs {
    /// Print the brief for a person.
    #[arg(long, conflicts_with = "text")]
    pub brief: bool,
    /// Print the room as text.
    #[arg(long)]
    pub text: bool,
    /// Start the room at this seq instead of the last request.
    #[arg(long, value_name = "SEQ", allow_hyphen_values = true)]
    pub since: Option<String>,
    /// Clip texts to this many characters (default 240).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub max_text_chars: Option<String>,
}

/// A short brief of the whole ledger, bounded in size, to hand a model as context (JSON
/// unless --text).
#[derive(Debug, clap::Args)]
pub struct CapsuleArgs {
    /// Print the capsule's prompt text.
    #[arg(long)]
    pub text: bool,
    /// Keep only the last N task results (0: none; default 8).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub max_items: Option<String>,
    /// Clip texts to this many characters (default 240).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub max_text_chars: Option<String>,
}

/// Forum's action receipt of one run (JSON): what was asked, what was answered, the
/// checkpoint and whether the ledger verifies deep.
#[derive(Debug, clap::Args)]
pub struct ReceiptArgs {
    /// The run (the seq of its request; `git forum runs` lists them); default: the latest.
    #[arg(value_name = "RUN")]
    pub run: Option<u64>,
}

/// The ledger's grade: the share of independent checks (verdicts, verifications, intent
/// judgments by actors that produced no result) that passed.
#[derive(Debug, clap::Args)]
pub struct GradeArgs {
    /// Checks needed for a PASS (default 2).
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub min_checks: u64,
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

/// One side of a comparison, loaded.
struct Loaded {
    snapshot: Snapshot,
    label: String,
}

/// Loads a git ledger with what its own verify says (every commit, not just the entries;
/// `deep` also checks every body, which only the room reports).
fn load_store(store: &GitStore, deep: bool) -> Result<Snapshot, CliError> {
    let items = report::load_git(store)?;
    let mut s = Snapshot::from_items(items);
    let passed = store.verify(deep)?.passed();
    if deep {
        s.deep_verified &= passed;
    } else {
        s.verified &= passed;
        s.deep_verified &= s.verified;
    }
    Ok(s)
}

/// Resolves a SOURCE operand (see [`BenchArgs`]).
fn load_source(ctx: &Ctx, spec: &str, deep: bool) -> Result<Loaded, CliError> {
    if let Some(seq) = spec.strip_prefix("run:") {
        let seq: u64 = seq.parse().map_err(|_| {
            CliError::usage(format!(
                "{spec:?}: run:SEQ takes the seq of a run's request (git forum runs lists them)"
            ))
        })?;
        let store = ctx.existing_store()?;
        let whole = load_store(&store, deep)?;
        let roots = status::roots(&whole.entries());
        if roots.get(&seq) != Some(&seq) {
            return Err(CliError::fail(format!(
                "no run starts at seq {seq} in ledger {:?} (git forum runs lists them)",
                ctx.ledger
            )));
        }
        let snapshot = whole.slice(|e| roots.get(&e.seq) == Some(&seq));
        return Ok(Loaded {
            snapshot,
            label: format!("run {seq} of ledger {}", ctx.ledger),
        });
    }
    if validate_ledger_name(spec).is_ok() {
        let local = Ctx {
            dir: ctx.dir.clone(),
            ledger: spec.to_string(),
            json: ctx.json,
            no_fsync: true,
        };
        let store = local.store()?;
        if store.exists()? {
            return Ok(Loaded {
                snapshot: load_store(&store, deep)?,
                label: format!("ledger {spec}"),
            });
        }
        if spec.contains('/') {
            let refname = format!("{REMOTES_PREFIX}{spec}");
            let remote = GitStore::at_ref(open_repo(&ctx.dir)?, &refname, Options::default())?;
            if remote.exists()? {
                return Ok(Loaded {
                    snapshot: load_store(&remote, deep)?,
                    label: format!("remote ledger {spec}"),
                });
            }
        }
    }
    let path = Path::new(spec);
    if path.is_dir() {
        let snapshot = Snapshot::from_forum_dir(path)?;
        return Ok(Loaded {
            snapshot,
            label: format!("Forum ledger {}", path.display()),
        });
    }
    Err(CliError::fail(format!(
        "{spec:?} is not a ledger here (refs/forum/ledgers/{spec}), a fetched copy \
         (refs/forum/remotes/REMOTE/NAME), a Forum ledger directory, or run:SEQ"
    )))
}

/// The current ledger, or SOURCE when given.
fn load_default(ctx: &Ctx, source: Option<&str>, deep: bool) -> Result<Loaded, CliError> {
    match source {
        Some(s) => load_source(ctx, s, deep),
        None => {
            let store = ctx.existing_store()?;
            Ok(Loaded {
                snapshot: load_store(&store, deep)?,
                label: format!("ledger {}", ctx.ledger),
            })
        }
    }
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
    let n = s.items.iter().filter(|(_, b)| b.is_none()).count() as u64;
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
    lines.push(String::new());
    lines.push("Model calls are the calls the ledger names a model for: task attempts, and".into());
    lines.push("verdicts where the validator's model is recorded (planner and synthesizer".into());
    lines.push("calls carry no model in the ledger and are not counted).".into());
    lines
}

/// `git forum summary`.
pub fn summary(ctx: &Ctx, args: SummaryArgs) -> Result<(), CliError> {
    let loaded = load_default(ctx, args.source.as_deref(), false)?;
    let s = report::summarize(&loaded.snapshot);
    let note = absent_note(&loaded.label, s.absent_bodies);
    if ctx.json {
        if let Some(n) = &note {
            eprintln!("{n}");
        }
        return ctx.out(&s.to_value().python_pretty());
    }
    for line in summary_text(&loaded.label, &s) {
        ctx.out(&line)?;
    }
    if let Some(n) = note {
        ctx.out(&n)?;
    }
    Ok(())
}

/// `git forum bench A B`.
pub fn bench(ctx: &Ctx, args: BenchArgs) -> Result<(), CliError> {
    let a = load_source(ctx, &args.a, false)?;
    let b = load_source(ctx, &args.b, false)?;
    let sa = report::summarize(&a.snapshot);
    let sb = report::summarize(&b.snapshot);
    let delta = report::compare(&sa, &sb);
    let (ans_a, ans_b) = (
        report::final_answer(&a.snapshot),
        report::final_answer(&b.snapshot),
    );
    let diff = report::answer_diff(
        ans_a.as_deref().unwrap_or(""),
        ans_b.as_deref().unwrap_or(""),
        &format!("A: {}", a.label),
        &format!("B: {}", b.label),
    );
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
        let opt = |v: &Option<String>| v.as_ref().map(Value::str).unwrap_or(Value::Null);
        let pairs = |v: Vec<(&str, Value)>| {
            Value::Object(v.into_iter().map(|(k, x)| (k.to_string(), x)).collect())
        };
        let out = pairs(vec![
            ("a", sa.to_value()),
            ("b", sb.to_value()),
            ("delta", report::summary::compare_value(&sa, &sb)),
            (
                "answers",
                pairs(vec![
                    ("a", opt(&ans_a)),
                    ("b", opt(&ans_b)),
                    ("diff", opt(&diff)),
                ]),
            ),
        ]);
        return ctx.out(&out.python_pretty());
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
        .filter(|m| calls(&sa, m) != calls(&sb, m))
        .map(|m| format!("  {:<28}{:>10}{:>10}", m, calls(&sa, m), calls(&sb, m)))
        .collect();
    if !per_model.is_empty() {
        ctx.out("")?;
        ctx.out("Model calls per model (witnessed)")?;
        for line in per_model {
            ctx.out(&line)?;
        }
    }
    ctx.out("")?;
    match (&ans_a, &ans_b, &diff) {
        (None, None, _) => ctx.out("Final answers: neither side has one.")?,
        (_, _, None) => ctx.out("Final answers: identical.")?,
        (_, _, Some(d)) => {
            let missing = match (&ans_a, &ans_b) {
                (None, _) => " (A has none)",
                (_, None) => " (B has none)",
                _ => "",
            };
            ctx.out(&format!("Final answers differ{missing}:"))?;
            ctx.out(d.trim_end_matches('\n'))?;
        }
    }
    for n in notes {
        ctx.out(&n)?;
    }
    Ok(())
}

/// `git forum room`.
pub fn room(ctx: &Ctx, args: RoomArgs) -> Result<(), CliError> {
    if ctx.json && (args.brief || args.text) {
        return Err(CliError::usage("choose one of --json, --brief and --text"));
    }
    let max = count_flag("--max-text-chars", args.max_text_chars.as_deref(), 240)?;
    let since = match args.since.as_deref() {
        None => None,
        Some(v) => Some(count_flag("--since", Some(v), 0)?),
    };
    let store = ctx.existing_store()?;
    let s = load_store(&store, true)?;
    note_absent(ctx, &s);
    let room = report::build_run_room(&s, since, usize::try_from(max).unwrap_or(usize::MAX));
    if args.brief {
        ctx.out(&report::room_brief_text(&room))
    } else if args.text {
        ctx.out(&report::room_text(&room))
    } else {
        ctx.out(&room.python_pretty())
    }
}

/// `git forum capsule`.
pub fn receipt(ctx: &Ctx, args: ReceiptArgs) -> Result<(), CliError> {
    let store = ctx.existing_store()?;
    let s = load_store(&store, true)?;
    note_absent(ctx, &s);
    let receipt = crate::surface::run::receipt_of(&s, args.run).map_err(|e| CliError {
        code: e.class.exit_code(),
        message: Some(e.message),
    })?;
    ctx.out(&receipt.0.python_pretty())
}

pub fn grade(ctx: &Ctx, args: GradeArgs) -> Result<(), CliError> {
    let store = ctx.existing_store()?;
    let s = load_store(&store, false)?;
    note_absent(ctx, &s);
    let g = report::grade::grade(&s, args.min_checks);
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
        args.min_checks
    ))
}

pub fn capsule(ctx: &Ctx, args: CapsuleArgs) -> Result<(), CliError> {
    if ctx.json && args.text {
        return Err(CliError::usage("choose one of --json and --text"));
    }
    let items = count_flag("--max-items", args.max_items.as_deref(), 8)?;
    let chars = count_flag("--max-text-chars", args.max_text_chars.as_deref(), 240)?;
    let store = ctx.existing_store()?;
    let s = load_store(&store, false)?;
    note_absent(ctx, &s);
    let capsule = report::build_context_capsule(
        &s,
        usize::try_from(items).unwrap_or(usize::MAX),
        usize::try_from(chars).unwrap_or(usize::MAX),
    );
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
        assert_eq!(e.code, 2);
        assert!(!e.message.unwrap().contains('\n'));
        assert!(count_flag("--n", Some("x"), 8).is_err());
        assert_eq!(grouped(3660), "3,660");
        assert_eq!(grouped(-1234567), "-1,234,567");
        assert_eq!(grouped(12), "12");
    }

    #[test]
    fn answer_diff_is_unified() {
        assert_eq!(report::answer_diff("same", "same", "A", "B"), None);
        let d = report::answer_diff("one\ntwo", "one\nthree", "A", "B").unwrap();
        assert!(d.starts_with("--- A\n+++ B\n@@"), "{d}");
        assert!(d.contains("-two\n") && d.contains("+three\n"), "{d}");
    }
}
