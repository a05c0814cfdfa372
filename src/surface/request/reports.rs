//! The requests that read reports: grades, gradable rows, bench, the context preflight and the
//! flight recorder.

use serde::Deserialize;

use super::runs::Budgets;
use super::{Request, non_blank, via_value};
use crate::surface::Error;

/// Which entries a grade or a gradable row covers, and the checks a PASS needs.
#[derive(Debug, Clone, Default, clap::Args, Deserialize, schemars::JsonSchema)]
pub struct Graded {
    /// The run (the seq of its request; `git forum runs` lists them); default: the latest (the whole ledger when it holds no run).
    #[arg(value_name = "RUN", value_parser = run_seq)]
    #[serde(default, deserialize_with = "via_value")]
    pub run: Option<u64>,
    /// Cover every entry of the ledger, runs together (Forum's reading of a ledger directory).
    #[arg(long)]
    #[serde(default)]
    pub all: bool,
    /// Checks needed for a PASS (default 2).
    #[arg(long, value_name = "N")]
    #[serde(default, deserialize_with = "via_value")]
    pub min_checks: Option<u64>,
}

/// A command line's RUN that is not a run's seq; `dir` when it names a directory (a Forum
/// ledger, most likely).
#[derive(Debug, thiserror::Error)]
#[error(
    "RUN takes the seq of a run's request (git forum runs lists them), not {text:?}{}",
    if *dir { "; to read a Forum ledger directory, import it first (git forum import DIR)" } else { "" }
)]
pub(crate) struct NotARun {
    text: String,
    dir: bool,
}

/// A run's seq as the command line's RUN gives it, refused in words that say what RUN is.
fn run_seq(text: &str) -> Result<u64, NotARun> {
    text.trim().parse::<u64>().map_err(|_| NotARun {
        text: text.to_string(),
        dir: std::path::Path::new(text).is_dir(),
    })
}

/// The grade of one run (default: the latest) or, with all, of the whole ledger: independent checks passed, and PASS, FAIL or UNVERIFIABLE.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
pub struct Grade {
    /// What is graded.
    #[command(flatten)]
    #[serde(flatten)]
    pub scope: Graded,
}

impl Request for Grade {}

/// Forum's gradable-trajectory row (forum.gradable-trajectory/1) of one run: prompt, trajectory, grade, what re-derives the grade, and its row_hash seal.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
pub struct Gradable {
    /// What is graded.
    #[command(flatten)]
    #[serde(flatten)]
    pub scope: Graded,
}

impl Request for Gradable {}

/// Compare two sides (a ledger NAME, a fetched REMOTE/NAME, or run:SEQ of this ledger): both summaries, each metric's delta (B - A) and a diff of the final answers.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Bench {
    /// Side A: a ledger name, REMOTE/NAME (a fetched copy), run:SEQ (one run of the current ledger) or, on the command line, a Forum ledger directory.
    #[arg(value_name = "A")]
    pub a: String,
    /// Side B, in the same forms.
    #[arg(value_name = "B")]
    pub b: String,
}

impl Request for Bench {
    fn validate(&self) -> Result<(), Error> {
        non_blank("a", &self.a)?;
        non_blank("b", &self.b)
    }
}

/// How much request context a run would admit under a context budget, without a model and without writing anything.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
pub struct Preflight {
    /// The request.
    // The command line takes it as its words.
    #[arg(skip)]
    #[schemars(extend("x-words" = true))]
    pub request: String,
    /// Use the ledger's context capsule (`git forum capsule --text`) as the request context.
    #[arg(long)]
    #[serde(default)]
    pub use_capsule_context: bool,
    /// Capsule: the most task results included (0: none; default 8).
    #[arg(long, value_name = "N")]
    #[serde(default, deserialize_with = "via_value")]
    pub max_items: Option<u64>,
    /// Capsule: the most code points copied from any text field (default 240).
    #[arg(long, value_name = "N")]
    #[serde(default, deserialize_with = "via_value")]
    pub max_text_chars: Option<u64>,
    /// The context budget.
    #[command(flatten)]
    #[serde(flatten)]
    pub budget: Budgets,
    /// Count the repository's map in, as a run would (true) or leave it out (false); unset: the runtime config's [context] repo, else true (on the command line, the last of --repo-context and --no-repo-context wins).
    #[arg(long, action = clap::ArgAction::SetTrue, overrides_with = "no_repo_context")]
    #[serde(default)]
    pub repo_context: Option<bool>,
}

impl Request for Preflight {
    fn validate(&self) -> Result<(), Error> {
        non_blank("request", &self.request)
    }
}

/// An agent trace: its events as JSON or its text, and its format.
#[derive(Debug, Clone, Default, clap::Args, Deserialize, schemars::JsonSchema)]
pub struct Trace {
    /// The trace's events as a JSON list (Forum's formats).
    // The command line reads the trace from a file; it takes these two too.
    #[arg(long, hide = true, value_parser = super::json_arg::<serde_json::Value>)]
    #[serde(default, deserialize_with = "via_value")]
    #[schemars(with = "Option<Vec<serde_json::Value>>", extend("x-any" = true))]
    pub trace: Option<serde_json::Value>,
    /// The trace's text instead, in any format (JSONL and OTLP/JSON included).
    #[arg(long, hide = true)]
    #[serde(default)]
    pub text: Option<String>,
    /// How the trace is written: Forum's langsmith, otel, agentops or generic (the default; a JSON list of events), otlp (OTLP/JSON as the collector's file exporter writes it) or claude-code (a Claude Code session transcript, JSONL).
    #[arg(long, value_name = "FORMAT")]
    #[serde(default)]
    pub format: Option<String>,
}

impl Trace {
    pub(crate) fn validate(&self) -> Result<(), Error> {
        match (&self.trace, &self.text) {
            (Some(_), Some(_)) => Err(Error::usage(
                "give the trace once: \"trace\" (the events as JSON) or \"text\" (its text), not both",
            )),
            (None, None) => Err(Error::usage(
                "field \"trace\" (the events as JSON) or \"text\" (the trace's text) is required",
            )),
            _ => Ok(()),
        }
    }
}

/// Fold an agent trace into Forum's forum.flight-recorder/1 record (entries, verified, merkle_root, dangling parents); writes nothing.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
pub struct ImportTrace {
    /// The trace.
    #[command(flatten)]
    #[serde(flatten)]
    pub trace: Trace,
}

impl Request for ImportTrace {
    fn validate(&self) -> Result<(), Error> {
        self.trace.validate()
    }
}

/// Fold an agent trace and export it as one graded, sealed forum.gradable-trajectory/1 row; writes nothing.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
pub struct Mine {
    /// The trace.
    #[command(flatten)]
    #[serde(flatten)]
    pub trace: Trace,
    /// Independent checks a PASS needs (default 2).
    #[arg(long, value_name = "N")]
    #[serde(default, deserialize_with = "via_value")]
    pub min_checks: Option<u64>,
}

impl Request for Mine {
    fn validate(&self) -> Result<(), Error> {
        self.trace.validate()
    }
}
