//! `git forum runtime inspect`: explains which executor would run each role, tier and seat,
//! and what would stop a run, without running anything. The only network use is resolving
//! endpoint names, to vet their addresses as a run does when it connects.
//!
//! This is the CLI layer: it reads the runtime config and the roster, asks the environment
//! whether key variables are set (never their values) and `PATH` whether programs exist, and
//! hands those facts to the pure checks in [`crate::exec::config`].

use std::path::PathBuf;

use super::exec_flags::ExecutorArgs;
use super::{CliError, Ctx};
use crate::exec::config::{self, SeatChoice, Via};
use crate::exec::endpoint::Origin;
use crate::roster::Tier;

/// Inspect the executors a run would use.
#[derive(Debug, clap::Args)]
pub(crate) struct RuntimeArgs {
    #[command(subcommand)]
    pub(crate) command: RuntimeCommand,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum RuntimeCommand {
    /// Explain the merged executor policy: the default, each tier (configured, falling back,
    /// missing), the seats, which roster lanes demand which tier, and every issue that would
    /// stop a run. Runs nothing; resolves endpoint names to vet their addresses as a run does.
    /// Exits 1 when not ready.
    Inspect(Box<InspectArgs>),
}

#[derive(Debug, clap::Args)]
pub(crate) struct InspectArgs {
    #[command(flatten)]
    pub(crate) exec: ExecutorArgs,
    /// Roster file (default: .forum/roster.toml in the repository, else the built-in roster).
    #[arg(long, value_name = "FILE")]
    pub(crate) roster: Option<PathBuf>,
}

use crate::config::RealFacts;

pub(crate) fn run(ctx: &Ctx, args: RuntimeArgs) -> Result<(), CliError> {
    match args.command {
        RuntimeCommand::Inspect(a) => inspect(ctx, *a),
    }
}

fn inspect(ctx: &Ctx, args: InspectArgs) -> Result<(), CliError> {
    let loaded = crate::config::load_runtime(
        &ctx.dir,
        args.exec.runtime_config.as_deref(),
        &args.exec.to_flags(),
    )?;
    let roster = crate::config::load_roster(&ctx.dir, args.roster.as_deref())?;
    let rt = &loaded.runtime;
    let facts = RealFacts;
    let issues = config::issues(rt, &roster, &facts);
    let ready = issues.is_empty();

    let worker_pinned = !matches!(rt.seats.worker, SeatChoice::Unset);

    if ctx.json {
        let report = crate::surface::runtime::inspect(&loaded, &roster, &facts);
        ctx.out_json(&serde_json::to_value(&report).map_err(|e| CliError::fail(e.to_string()))?)?;
    } else {
        let mut lines = Vec::new();
        lines.push(match &loaded.source {
            Some((p, Origin::RepoConfig)) => format!(
                "config: {} (the repository's: it gets nothing beyond what it states)",
                p.display()
            ),
            Some((p, _)) => format!("config: {}", p.display()),
            None => "config: none (flags only)".into(),
        });
        match rt.effective_default() {
            Some((Via::Slot(_), s)) => lines.push(format!("default: {}", s.describe())),
            Some((via, s)) => lines.push(format!("default: {} ({})", s.describe(), via.explain())),
            None => lines.push("default: missing".into()),
        }
        lines.extend(tier_and_seat_lines(rt, &roster, worker_pinned));
        lines.extend(verification_lines(rt, &roster, worker_pinned));
        if ready {
            lines.push("ready: yes".into());
        } else {
            let n = issues.len();
            lines.push(format!(
                "ready: no ({n} issue{})",
                if n == 1 { "" } else { "s" }
            ));
            for i in &issues {
                lines.push(format!("  {i}"));
            }
        }
        ctx.out(&lines.join("\n"))?;
    }
    if ready {
        Ok(())
    } else {
        for i in &issues {
            eprintln!("error: {i}");
        }
        Err(CliError::silent(1))
    }
}

/// The `tiers:` section (each tier's executor and the lanes that use it) and the `seats:`
/// section (the worker and orchestrator seats).
fn tier_and_seat_lines(
    rt: &config::Runtime,
    roster: &crate::roster::Roster,
    worker_pinned: bool,
) -> Vec<String> {
    let lanes = |t: Tier| -> Vec<&str> {
        roster
            .agents()
            .iter()
            .filter(|a| a.model_tier == t)
            .map(|a| a.name.as_str())
            .collect()
    };
    let mut lines = vec![if worker_pinned {
        "tiers (the worker seat is pinned, so tasks do not use them):".to_string()
    } else {
        "tiers:".to_string()
    }];
    for t in Tier::ALL {
        let what = match rt.for_tier(t) {
            Some((Via::Slot(_), s)) => format!("configured  {}", s.describe()),
            Some((via, _)) => format!("fallback    {}", via.explain()),
            None => "missing".into(),
        };
        let l = lanes(t);
        let demand = if l.is_empty() {
            "no lanes".to_string()
        } else {
            format!("{} lanes: {}", l.len(), l.join(", "))
        };
        lines.push(format!("  {:<9} {what}; {demand}", t.as_str()));
    }
    lines.push("seats:".into());
    let worker = match &rt.seats.worker {
        SeatChoice::Unset => "each lane's tier".to_string(),
        _ => match rt.for_task(roster, "") {
            Ok((via, s)) => format!("{} ({})", s.describe(), via.explain()),
            Err(u) => format!("unresolved: {u}"),
        },
    };
    lines.push(format!("  worker        {worker}"));
    let orch = match rt.for_control() {
        Ok((via, s)) => format!("{} ({})", s.describe(), via.explain()),
        Err(u) => format!("unresolved: {u}"),
    };
    lines.push(format!("  orchestrator  {orch}"));
    lines
}

/// The `verification:` section: each executor tasks may use (the pinned worker seat, else
/// each tier), the orchestrator seat, and the run's (the heaviest of the first).
fn verification_lines(
    rt: &config::Runtime,
    roster: &crate::roster::Roster,
    worker_pinned: bool,
) -> Vec<String> {
    let mut lines = vec!["verification:".to_string()];
    if worker_pinned {
        if let Ok((_, s)) = rt.for_task(roster, "") {
            let v = config::verify::of_spec(&s);
            lines.push(format!("  worker        {}", v.describe()));
        }
    } else {
        for t in Tier::ALL {
            if let Some((_, s)) = rt.for_tier(t) {
                let v = config::verify::of_spec(s);
                lines.push(format!("  {:<13} {}", t.as_str(), v.describe()));
            }
        }
    }
    if let Ok((_, s)) = rt.for_control() {
        let v = config::verify::of_spec(&s);
        lines.push(format!("  orchestrator  {}", v.describe()));
    }
    let run = config::verify::for_run(rt, roster);
    lines.push(format!(
        "  a --work run  {} (the heaviest of the executors its tasks may land on)",
        run.describe()
    ));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roster::Roster;

    #[test]
    fn roster_and_slot_types_line_up() {
        let r = Roster::default_roster();
        assert!(!r.is_empty());
        assert_eq!(
            config::Slot::parse("capable"),
            Some(config::Slot::Tier(Tier::Capable))
        );
    }
}
