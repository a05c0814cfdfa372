//! `git forum lane check|gaps`: the lane vocabulary and the vocabulary gap at the command line.
//! The operations are [`crate::surface::lanes`]; this module holds the words and the
//! timestamp flag, and prints each report as text or, with `--json`, as the same JSON the
//! daemon and MCP answer.

use super::{CliError, Ctx};
use crate::surface::lanes::{self, GapReport, LaneReport};
use crate::surface::request::lanes::{LaneCheck, LaneGaps};

/// Check route claims against the proof-lane and domain-lane vocabularies, and report the
/// vocabulary gap.
#[derive(Debug, clap::Args)]
pub(crate) struct LaneArgs {
    #[command(subcommand)]
    pub(crate) command: LaneCommand,
}

/// A lane command.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum LaneCommand {
    /// Check one route claim and witness it: a lane_route entry, or a lane_rejection entry
    /// and a non-zero exit naming the violation (unknown_lane, over_routed, unknown_domain).
    Check(CheckArgs),
    /// The trailing run of undecided routes and whether it makes a vocabulary gap; --record
    /// witnesses it once as a vocabulary_gap entry.
    Gaps(GapsArgs),
}

/// Check a route claim.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// The task the route is for (several words are joined with spaces).
    #[arg(required = true, value_name = "TASK")]
    pub(crate) task: Vec<String>,
    #[command(flatten)]
    pub(crate) req: LaneCheck,
    /// Timestamp in seconds since 1970 (default: GIT_FORUM_TIMESTAMP, else the clock).
    #[arg(long)]
    pub(crate) ts: Option<f64>,
}

/// Report the vocabulary gap.
#[derive(Debug, clap::Args)]
pub(crate) struct GapsArgs {
    #[command(flatten)]
    pub(crate) req: LaneGaps,
    /// Timestamp in seconds since 1970 for a recorded gap (default: GIT_FORUM_TIMESTAMP, else
    /// the clock).
    #[arg(long)]
    pub(crate) ts: Option<f64>,
}

pub(crate) fn run(ctx: &Ctx, args: LaneArgs) -> Result<(), CliError> {
    match args.command {
        LaneCommand::Check(a) => check(ctx, a),
        LaneCommand::Gaps(a) => gaps(ctx, a),
    }
}

fn check(ctx: &Ctx, args: CheckArgs) -> Result<(), CliError> {
    use crate::surface::request::Request;
    let mut req = args.req;
    req.task = args.task.join(" ");
    req.validate()?;
    let ts = ctx.now(args.ts)?;
    let r = lanes::check(&mut ctx.store()?, &req, ts)?;
    if ctx.json {
        ctx.out_report(&r)?;
    } else if r.accepted {
        ctx.out(&accepted_line(&r))?;
    }
    match r.refusal() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// An accepted claim as one line.
fn accepted_line(r: &LaneReport) -> String {
    format!(
        "lane_route seq {}: lane {} grants {}{} for {:?}",
        r.seq,
        r.lane,
        if r.scopes.is_empty() {
            "no scope claimed".to_string()
        } else {
            r.scopes.join(", ")
        },
        r.domain
            .as_deref()
            .map_or(String::new(), |d| format!(", domain {d}")),
        r.task
    )
}

fn gaps(ctx: &Ctx, args: GapsArgs) -> Result<(), CliError> {
    use crate::surface::request::Request;
    args.req.validate()?;
    let min = crate::config::load_policy(&ctx.dir, None)?.min_escalations;
    let ts = ctx.now(args.ts)?;
    let r = lanes::gaps(&mut ctx.store()?, &args.req, min, ts)?;
    if ctx.json {
        return ctx.out_report(&r);
    }
    ctx.out(&gap_lines(&r).join("\n"))
}

/// The gap report as text.
fn gap_lines(r: &GapReport) -> Vec<String> {
    let mut lines = Vec::new();
    match (r.first_seq, r.last_seq) {
        (Some(first), Some(last)) => lines.push(format!(
            "{} undecided route(s) in a row, seq {first} to {last}, confidence at most {}",
            r.consecutive_escalations,
            crate::surface::lanes::float_text(r.confidence_ceiling.unwrap_or(0.0))
        )),
        _ => lines.push("no undecided route at the tip: the last route decided, or none".into()),
    }
    if r.gap {
        lines.push(format!(
            "vocabulary gap: at least {} in a row, signal {:?}",
            r.min_escalations,
            r.domain_signal.as_deref().unwrap_or_default()
        ));
    } else {
        lines.push(format!("no gap: fewer than {} in a row", r.min_escalations));
    }
    match (r.witnessed, r.recorded) {
        (Some(seq), true) => lines.push(format!("recorded vocabulary_gap as seq {seq}")),
        (Some(seq), false) => lines.push(format!("witnessed before as vocabulary_gap seq {seq}")),
        (None, _) if r.gap => lines.push("not witnessed yet: add --record".into()),
        _ => {}
    }
    lines
}
