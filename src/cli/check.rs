//! `git forum check` and `git forum humanize`: the model-free quality floors on the command
//! line. `check` runs the intent check, the delivery floor and a delivery profile on an answer
//! (findings are output, not errors, unless `--fail-on-flag`); `humanize` cleans up prose.

use std::path::PathBuf;

use super::{CliError, Ctx};
use crate::ledger::Value;
use crate::ledger::canonical::python_float_json;
use crate::quality::delivery::{
    DEFAULT_MAX_FILLER_RATIO, DEFAULT_MAX_SENTENCE_WORDS, Delivery, assess,
};
use crate::quality::intent::{DEFAULT_THRESHOLD, IntentCheck, intent_check};
use crate::quality::profile::{DeliveryProfile, ProfileAssessment, assess_profile, get_profile};
use crate::quality::{HumanizeError, humanize};
use crate::route::route_request;

/// Check an answer without a model: how much of the request it covers (intent check), how it
/// reads (delivery floor: sentence length, filler) and what a delivery profile finds in it.
/// Prints a summary, or with --json `{"intent_check", "delivery_check",
/// "delivery_profile_check"}` as Forum witnesses them. Exits 0 whatever is flagged, unless
/// --fail-on-flag.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// The request the answer is for.
    #[arg(long, value_name = "TEXT")]
    pub(crate) request: Option<String>,
    /// Read the request from FILE (`-` for standard input).
    #[arg(long, value_name = "FILE")]
    pub(crate) request_file: Option<PathBuf>,
    /// The answer to check.
    #[arg(long, value_name = "TEXT")]
    pub(crate) answer: Option<String>,
    /// Read the answer from FILE (`-` for standard input).
    #[arg(long, value_name = "FILE")]
    pub(crate) answer_file: Option<PathBuf>,
    /// Delivery profile: operator, engineer, researcher or executive (default: the profile of
    /// the request's route frame, as a run would choose).
    #[arg(long, value_name = "PROFILE")]
    pub(crate) profile: Option<String>,
    /// Roster that routes the request when --profile is not given (default:
    /// .forum/roster.toml in the repository, else the built-in roster).
    #[arg(long, value_name = "FILE")]
    pub(crate) roster: Option<PathBuf>,
    /// Flag the intent check when coverage is below this share (0 to 1).
    #[arg(long, value_name = "SHARE", default_value_t = DEFAULT_THRESHOLD)]
    pub(crate) intent_threshold: f64,
    /// Exit 1 when any check is flagged (to gate answers in CI).
    #[arg(long)]
    pub(crate) fail_on_flag: bool,
}

/// Clean up model prose without adding facts: drop a model preamble, replace stock phrases,
/// collapse whitespace, capitalise, end with a period. Prints the text, or with --json the
/// `forum.prose-humanization/v1` object with its delivery profile check.
#[derive(Debug, clap::Args)]
pub(crate) struct HumanizeArgs {
    /// The text (several words are joined with spaces).
    #[arg(value_name = "TEXT")]
    pub(crate) text: Vec<String>,
    /// Read the text from FILE (`-` for standard input) instead.
    #[arg(long, value_name = "FILE")]
    pub(crate) file: Option<PathBuf>,
    /// Who it is for and the profile: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) how: crate::surface::request::prose::HumanizeHow,
}

/// One text from `--NAME TEXT` or `--NAME-file FILE`: exactly one of them.
fn text_or_file(
    text: Option<String>,
    file: Option<&PathBuf>,
    name: &str,
) -> Result<String, CliError> {
    match (text, file) {
        (Some(t), None) => Ok(t),
        (None, Some(path)) => Ok(crate::config::read_text(path, name)?),
        (Some(_), Some(_)) => Err(CliError::usage(format!(
            "give the {name} once: --{name} TEXT or --{name}-file FILE, not both"
        ))),
        (None, None) => Err(CliError::usage(format!(
            "no {name}: give it with --{name} TEXT or --{name}-file FILE (- for standard input)"
        ))),
    }
}

fn is_stdin(p: Option<&PathBuf>) -> bool {
    p.is_some_and(|p| p.as_os_str() == "-")
}

fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn flag_word(flagged: bool) -> &'static str {
    if flagged { "flagged" } else { "ok" }
}

fn summary(
    intent: &IntentCheck,
    threshold: f64,
    delivery: &Delivery,
    profile: &ProfileAssessment,
    profile_source: &str,
) -> String {
    let f = python_float_json;
    let missing = if intent.missing.is_empty() {
        "-".to_string()
    } else {
        intent.missing.join(", ")
    };
    let coverage = crate::quality::py_round(intent.coverage, 4);
    let mut lines = vec![
        format!(
            "intent check: {}, coverage {} (flagged below {}); missing: {missing}",
            flag_word(intent.flagged),
            f(coverage),
            f(threshold)
        ),
        format!(
            "delivery check: {}, {} in {}, mean {} words a sentence (limit {}), filler ratio {} (limit {})",
            flag_word(delivery.flagged),
            count(delivery.words, "word"),
            count(delivery.sentences, "sentence"),
            f(delivery.mean_sentence_words),
            f(DEFAULT_MAX_SENTENCE_WORDS),
            f(delivery.filler_ratio),
            f(DEFAULT_MAX_FILLER_RATIO)
        ),
        format!(
            "delivery profile {} ({profile_source}): {}",
            profile.profile.as_str(),
            flag_word(profile.flagged)
        ),
    ];
    for finding in &profile.findings {
        lines.push(format!("  {}: {}", finding.code.as_str(), finding.detail));
    }
    lines.join("\n")
}

/// `git forum check`.
pub(crate) fn check(ctx: &Ctx, args: CheckArgs) -> Result<(), CliError> {
    if is_stdin(args.request_file.as_ref()) && is_stdin(args.answer_file.as_ref()) {
        return Err(CliError::usage(
            "only one of --request-file and --answer-file can read standard input",
        ));
    }
    let threshold = args.intent_threshold;
    if !(0.0..=1.0).contains(&threshold) {
        return Err(CliError::usage(format!(
            "--intent-threshold {threshold} is not a share between 0 and 1"
        )));
    }
    let profile = args
        .profile
        .as_deref()
        .map(|p| get_profile(Some(p)).map_err(|e| CliError::usage(e.to_string())))
        .transpose()?;
    let request = text_or_file(args.request, args.request_file.as_ref(), "request")?;
    let answer = text_or_file(args.answer, args.answer_file.as_ref(), "answer")?;

    let (profile, source): (DeliveryProfile, &str) = match profile {
        Some(p) => (p, "--profile"),
        None => {
            let roster = crate::config::load_roster(&ctx.dir, args.roster.as_deref())?;
            (
                route_request(&request, &roster).1.delivery_profile,
                "from the route frame",
            )
        }
    };

    let intent = intent_check(&request, &answer, threshold);
    let delivery = assess(&answer);
    let assessment = assess_profile(&answer, profile);
    let flagged = intent.flagged || delivery.flagged || assessment.flagged;

    if ctx.json {
        let v = Value::object([
            ("intent_check".to_string(), intent.payload()),
            ("delivery_check".to_string(), delivery.payload()),
            ("delivery_profile_check".to_string(), assessment.payload()),
        ]);
        ctx.out(&v.python_pretty())?;
    } else {
        ctx.out(&summary(&intent, threshold, &delivery, &assessment, source))?;
    }
    if flagged && args.fail_on_flag {
        return Err(CliError::silent(1));
    }
    Ok(())
}

/// `git forum humanize`.
pub(crate) fn humanize_cmd(ctx: &Ctx, args: HumanizeArgs) -> Result<(), CliError> {
    let text = match (args.text.is_empty(), &args.file) {
        (false, Some(_)) => {
            return Err(CliError::usage(
                "give the text as arguments or with --file, not both",
            ));
        }
        (true, Some(path)) => crate::config::read_text(path, "text")?,
        (_, None) => args.text.join(" "),
    };
    let profile =
        get_profile(args.how.profile.as_deref()).map_err(|e| CliError::usage(e.to_string()))?;
    let audience = args.how.audience.as_deref().unwrap_or("operator");
    let h = humanize(&text, audience, profile).map_err(|e| match e {
        HumanizeError::Blank => CliError::usage(
            "nothing to humanize: the text is empty or blank (give TEXT or --file FILE)",
        ),
        other => CliError::usage(other.to_string()),
    })?;
    if ctx.json {
        ctx.out(&h.payload().python_pretty())
    } else {
        ctx.out(&h.output)
    }
}
