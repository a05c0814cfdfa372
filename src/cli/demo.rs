//! `git forum demo`: see [`crate::surface::demo`].

use std::path::PathBuf;

use super::{CliError, Ctx};

/// Show the main job in a few seconds, with no model and no network: a throwaway repository
/// whose failing test a scripted agent fixes under git forum, a second change the orchestrator
/// blocks and quarantines, the run branch's diff, and the commands to read the record.
#[derive(Debug, clap::Args)]
pub(crate) struct DemoArgs {
    /// Make the throwaway repository under DIR (default: the system's temporary folder).
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
}

pub(crate) fn run(ctx: &Ctx, args: DemoArgs) -> Result<(), CliError> {
    let root = crate::surface::demo::make_root(args.dir.as_deref())?;
    if !ctx.json {
        eprintln!(
            "git forum demo: a scripted agent (no model, no network) works in {}",
            root.display()
        );
    }
    let d = crate::surface::demo::run(&root, !ctx.json)?;
    if ctx.json {
        return ctx
            .out_json(&serde_json::to_value(&d).map_err(|e| CliError::internal(e.to_string()))?);
    }
    let repo = d.repository.display();
    ctx.out(&format!("\nThe repository: {repo}"))?;
    ctx.out(&format!(
        "The run exited {} ({}); its branch {} against main:\n",
        d.run_exit,
        if d.run_exit == 12 {
            "partial: one change is on the branch and the gate blocked the other, as scripted"
        } else {
            "see git forum runs"
        },
        d.branch
    ))?;
    ctx.out(d.diff.trim_end())?;
    ctx.out(&format!("\n{}", d.diffstat.trim_end()))?;
    for q in &d.quarantined {
        ctx.out(&format!("Blocked and kept out of the branch: {q}"))?;
    }
    ctx.out(&format!("\nLook at the record (cd {repo} first):"))?;
    for c in &d.look {
        ctx.out(&format!("  {c}"))?;
    }
    ctx.out(&format!(
        "Then, in your own repository: git forum init, and git forum submit --work \"...\". Remove this one with: rm -rf {}",
        d.repository.parent().unwrap_or(&d.repository).display()
    ))
}
