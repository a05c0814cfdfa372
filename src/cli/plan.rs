//! `git forum plan`: compile a task graph into waves and typed edges, check it against the
//! policy, and with `--record` witness it in the ledger as a `plan` entry.

use std::path::PathBuf;

use super::{CliError, Ctx};
use crate::ledger::NewEntry;
use crate::plan::Plan;

/// Compile a plan file (`{"tasks": [{"id", "agent", "instruction", "depends_on",
/// "done_when"}]}`) into waves and typed edges. Cycles, unknown or duplicate ids, unknown
/// edge types, unknown agents and policy violations are refused with the ids named.
#[derive(Debug, clap::Args)]
pub(crate) struct PlanArgs {
    /// The plan file (`-` for standard input).
    #[arg(
        long,
        value_name = "PLAN.json",
        required_unless_present_any = ["plan", "request"],
        conflicts_with_all = ["plan", "request"]
    )]
    pub(crate) file: Option<PathBuf>,
    /// The plan document as JSON instead: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: crate::surface::request::prose::Plan,
    /// Roster file (default: .forum/roster.toml in the repository, else the built-in roster).
    #[arg(long, value_name = "FILE")]
    pub(crate) roster: Option<PathBuf>,
    /// Policy file (default: .forum/policy.toml in the repository, else no restrictions and
    /// six tasks at a time).
    #[arg(long, value_name = "FILE")]
    pub(crate) policy: Option<PathBuf>,
    /// Witness the compiled plan in the ledger as a `plan` entry.
    #[arg(long)]
    pub(crate) record: bool,
    /// With --record: the entry the plan follows from (its causal parent).
    #[arg(long, value_name = "SEQ", requires = "record")]
    pub(crate) parent: Option<i64>,
}

pub(crate) fn run(ctx: &Ctx, args: PlanArgs) -> Result<(), CliError> {
    let roster = crate::config::load_roster(&ctx.dir, args.roster.as_deref())?;
    let policy = crate::config::load_policy(&ctx.dir, args.policy.as_deref())?;
    let (text, name) = match (&args.file, &args.req.plan) {
        (Some(file), _) => {
            let name = if file.as_os_str() == "-" {
                "standard input".to_string()
            } else {
                file.display().to_string()
            };
            (crate::config::read_text(file, "plan file")?, name)
        }
        (None, Some(doc)) => {
            crate::surface::request::Request::validate(&args.req)?;
            (doc.to_string(), "--plan".to_string())
        }
        // Planning with the model needs the executors a run has; the daemon and MCP have them.
        (None, None) => {
            return Err(CliError::usage(
                "the command line compiles a plan document (--file PLAN.json); to plan a request with the model, ask the daemon or MCP (plan with request)",
            ));
        }
    };
    let plan = Plan::from_json_text(&text, Some(&roster))
        .map_err(|e| CliError::fail(format!("{name}: {e}")))?;
    let compiled = plan
        .compile()
        .map_err(|e| CliError::fail(format!("{name}: {e}")))?;
    policy
        .check_plan(&plan, &roster)
        .map_err(|e| CliError::fail(format!("{name}: {e}")))?;
    let payload = compiled.payload();

    if args.record {
        let mut store = ctx.store()?;
        let entry = NewEntry {
            actor: "dispatch".into(),
            kind: crate::ledger::kind::PLAN.into(),
            causal_parent: args.parent,
            payload: payload.clone(),
            ts: ctx.now(None)?,
        };
        let done = store.append_entry(&entry)?;
        eprintln!(
            "recorded plan as seq {} in ledger {}",
            done.entry.seq, ctx.ledger
        );
    }

    if ctx.json {
        return ctx.out(&payload.python_pretty());
    }
    let mut lines = Vec::new();
    if compiled.waves.is_empty() {
        lines.push("no tasks".to_string());
    }
    for (i, wave) in compiled.waves.iter().enumerate() {
        let batches = policy.cap_wave(wave);
        let note = if batches.len() > 1 {
            format!(
                "  ({} batches of at most {})",
                batches.len(),
                policy.max_parallel
            )
        } else {
            String::new()
        };
        lines.push(format!("wave {}: {}{note}", i + 1, wave.join(", ")));
    }
    if !compiled.edges.is_empty() {
        lines.push("edges:".to_string());
        for e in &compiled.edges {
            lines.push(format!("  {} -> {} ({})", e.from, e.to, e.kind));
        }
    }
    ctx.out(&lines.join("\n"))
}
