//! `git forum route`: route a request to a lane, print the decision and its frame, and with
//! `--record` witness it in the ledger.

use std::path::PathBuf;

use super::{CliError, Ctx};
use crate::ledger::canonical::python_float_json;
use crate::ledger::{NewEntry, Value};
use crate::route::{RouteDecision, RouteFrame, check_request, route_request};

/// Route a request to a roster lane. Prints the decision, its confidence, whether it needs
/// escalation, every lane's score and the route frame; `--json` prints Forum's JSON shape.
#[derive(Debug, clap::Args)]
pub(crate) struct RouteArgs {
    /// The request (several words are joined with spaces).
    #[arg(required = true, value_name = "TEXT")]
    pub(crate) text: Vec<String>,
    /// Roster file (default: .forum/roster.toml in the repository, else the built-in roster).
    #[arg(long, value_name = "FILE")]
    pub(crate) roster: Option<PathBuf>,
    /// Witness the decision in the ledger as one `route` entry (Forum's: task, decided,
    /// confidence, frame). It is not a run: `runs`, `receipt` and `room` do not list it.
    #[arg(long)]
    pub(crate) record: bool,
    /// With --record: the `route` entry's causal parent (an existing entry).
    #[arg(long, value_name = "SEQ", requires = "record")]
    pub(crate) parent: Option<i64>,
}

fn or_dash(v: Option<&str>) -> &str {
    v.unwrap_or("-")
}

pub(crate) fn run(ctx: &Ctx, args: RouteArgs) -> Result<(), CliError> {
    let text = args.text.join(" ");
    // Routing itself takes any text, as Forum's does: a request with no words escalates to no
    // lane. Only writing it down as a request needs words in it.
    if args.record && args.parent.is_none() {
        check_request(&text).map_err(|e| CliError::usage(e.to_string()))?;
    }
    let roster = crate::config::load_roster(&ctx.dir, args.roster.as_deref())?;
    let (decision, frame) = route_request(&text, &roster);

    if args.record {
        record_route(ctx, &text, args.parent, &decision, &frame)?;
    }

    if ctx.json {
        return ctx.out(&decision.to_value(&frame).python_pretty());
    }
    let lines = route_lines(&decision, &frame);
    ctx.out(&lines.join("\n"))
}

/// Appends Forum's `route` entry (what `assign` witnesses): the decision and its frame, no
/// `request`, so a recorded route is never mistaken for a run.
fn record_route(
    ctx: &Ctx,
    text: &str,
    parent_seq: Option<i64>,
    decision: &RouteDecision,
    frame: &RouteFrame,
) -> Result<(), CliError> {
    let min = crate::config::load_policy(&ctx.dir, None)?.min_escalations;
    let mut store = ctx.store()?;
    let entry = NewEntry {
        actor: "router".into(),
        kind: crate::ledger::kind::ROUTE.into(),
        causal_parent: parent_seq,
        payload: Value::object([
            ("task".to_string(), Value::str(text)),
            (
                "decided".to_string(),
                decision.decided.as_deref().map_or(Value::Null, Value::str),
            ),
            ("confidence".to_string(), Value::Float(decision.confidence)),
            ("frame".to_string(), frame.payload()),
        ]),
        ts: ctx.now(None)?,
    };
    let done = store.append_entry(&entry)?;
    let parent = parent_seq.map_or(String::new(), |p| format!(" (parent {p})"));
    eprintln!(
        "recorded route as seq {}{parent} in ledger {}",
        done.entry.seq, ctx.ledger
    );
    // Every witnessed route is followed by the vocabulary-gap check.
    if let Some(seq) = crate::surface::lanes::after_route(&mut store, min, entry.ts)? {
        eprintln!(
            "recorded vocabulary_gap as seq {seq}: {min} or more routes in a row escalated (git forum lane gaps)"
        );
    }
    Ok(())
}

/// The decision, its candidates and the frame, as text.
fn route_lines(decision: &RouteDecision, frame: &RouteFrame) -> Vec<String> {
    let mut lines = Vec::new();
    match &decision.decided {
        Some(agent) if !decision.needs_escalation => lines.push(format!(
            "decided: {agent} (confidence {})",
            python_float_json(decision.confidence)
        )),
        _ => lines.push(format!(
            "escalate: keywords do not separate the lanes (margin {}); a classifier must choose",
            python_float_json(decision.confidence)
        )),
    }
    let width = decision
        .candidates
        .iter()
        .map(|c| c.agent.chars().count())
        .max()
        .unwrap_or(0);
    lines.push("candidates:".into());
    for c in &decision.candidates {
        lines.push(format!(
            "  {:<width$}  {}",
            c.agent,
            python_float_json(c.score)
        ));
    }
    lines.push(format!(
        "frame: {} / {}, posture {}, profile {}",
        frame.domain,
        frame.intent,
        frame.posture.as_str(),
        frame.delivery_profile.as_str()
    ));
    lines.push(format!(
        "  agent {}, tier {}, executor {}, proof lane {}, domain lane {}",
        or_dash(frame.agent.as_deref()),
        or_dash(frame.model_tier.as_deref()),
        or_dash(frame.executor.as_deref()),
        or_dash(frame.proof_lane.as_deref()),
        or_dash(frame.domain_lane.as_deref()),
    ));
    lines.push(format!(
        "  signals: {}",
        if frame.signals.is_empty() {
            "-".to_string()
        } else {
            frame.signals.join(", ")
        }
    ));
    lines.push(format!("  contract: {}", frame.human_contract));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pretty_printing_matches_python_indent_2() {
        let v = Value::object([
            ("a".to_string(), Value::Float(0.19999999999999996)),
            ("b".to_string(), Value::Array(vec![])),
            ("c".to_string(), Value::object([])),
            (
                "d".to_string(),
                Value::Array(vec![Value::str("é"), Value::Null, Value::Float(1.0)]),
            ),
        ]);
        assert_eq!(
            v.python_pretty(),
            "{\n  \"a\": 0.19999999999999996,\n  \"b\": [],\n  \"c\": {},\n  \"d\": [\n    \"\\u00e9\",\n    null,\n    1.0\n  ]\n}"
        );
    }
}
