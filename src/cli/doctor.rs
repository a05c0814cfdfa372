//! `git forum doctor`: flags and the text the diagnosis renders as. The diagnosis (the
//! ledger's health, exact repairs, the install) is [`crate::surface::doctor`].

use std::path::PathBuf;

use super::exec_flags::ExecutorArgs;
use super::{CliError, Ctx};
use crate::config::RealFacts;
use crate::surface::doctor;
use crate::surface::status::{self, Readiness};
use crate::surface::store::Sources;

/// Say what is wrong with the ledger (by seq), the repository's lock files and the install;
/// `--repair` puts back every missing commit, tree or body that an exact copy exists of, a
/// deleted or broken ref, and removes lock files no live process can hold.
#[derive(Debug, clap::Args)]
pub(crate) struct DoctorArgs {
    /// Write back what can be restored exactly (never an object whose bytes do not hash to
    /// the id the chain names), put a deleted ref back on its reflog's last tip, and remove
    /// lock files a killed git left (never one a live process can hold).
    #[arg(long)]
    pub(crate) repair: bool,
    /// Another repository (a clone, a mirror) whose objects may hold what was lost. Repeatable.
    #[arg(long = "from-repo", value_name = "PATH")]
    pub(crate) from_repo: Vec<PathBuf>,
    /// A pack file that may hold what was lost (from a bundle or a backup). Repeatable.
    #[arg(long = "from-pack", value_name = "FILE")]
    pub(crate) from_pack: Vec<PathBuf>,
    /// A Forum export of this ledger (`git forum export DIR`): lost commits are recomputed
    /// from its entries and bodies. Repeatable.
    #[arg(long = "from-export", value_name = "DIR")]
    pub(crate) from_export: Vec<PathBuf>,
}

/// The runtime's readiness as this command line sees it: `.forum/runtime.toml` and the roster
/// of the repository at `ctx.dir`.
pub(crate) fn readiness(ctx: &Ctx) -> Readiness {
    let roster = crate::config::load_roster(&ctx.dir, None);
    let loaded = crate::config::load_runtime(&ctx.dir, None, &ExecutorArgs::default().to_flags());
    match (loaded, roster) {
        (Ok(l), Ok(r)) => status::readiness(Ok(&l), &r, &RealFacts),
        (Err(e), _) | (_, Err(e)) => status::readiness(
            Err(&e),
            &crate::roster::Roster::default_roster(),
            &RealFacts,
        ),
    }
}

pub(crate) fn run(ctx: &Ctx, args: DoctorArgs) -> Result<(), CliError> {
    let store = ctx.store()?;
    let sources = Sources {
        repos: args.from_repo.clone(),
        exports: args.from_export.clone(),
        packs: args.from_pack.clone(),
    };
    let mut r = doctor::doctor(&store, &sources, args.repair, readiness(ctx))?;
    // Worktrees left by --work runs that died are removed here (live runs' are untouched);
    // the daemon's doctor never writes, so only the command line cleans up.
    r.work = Some(doctor::WorkCleanup::from(crate::surface::work::cleanup(
        &ctx.dir,
    )));
    if ctx.json {
        ctx.out_report(&r)?;
        return if r.ok {
            Ok(())
        } else {
            Err(CliError::silent(1))
        };
    }
    let mut out = Vec::new();
    ledger_lines(ctx, &r, &mut out);
    lock_lines(&r, &mut out);
    install_lines(&r, &mut out);
    work_lines(&r, &mut out);
    ctx.out(&out.join("\n"))?;
    if r.ok {
        Ok(())
    } else {
        Err(CliError::silent(1))
    }
}

/// The ledger's findings, repairs and verification, one line each.
fn ledger_lines(ctx: &Ctx, r: &doctor::DoctorReport, out: &mut Vec<String>) {
    match &r.ledger {
        None => out.push(format!(
            "ledger {}: does not exist yet (the first append creates it)",
            ctx.ledger
        )),
        Some(h) => {
            for f in &h.findings {
                let at = f.seq.map(|s| format!("seq {s}: ")).unwrap_or_default();
                let state = if f.repaired {
                    "repaired".to_string()
                } else if f.repairable {
                    "repairable with --repair".to_string()
                } else {
                    "not repairable here".to_string()
                };
                out.push(format!(
                    "ledger {}: {at}{} {} ({state}): {}",
                    h.name, f.code, f.object, f.remedy
                ));
            }
            if h.restored_objects > 0 {
                out.push(format!(
                    "ledger {}: restored {} object(s)",
                    h.name, h.restored_objects
                ));
            }
            match &h.verify {
                Some(v) if v.ok => out.push(format!(
                    "ledger {}: verifies (chain, commits and bodies), {} entries",
                    h.name, v.entries
                )),
                Some(v) => out.push(format!(
                    "ledger {}: does not verify at seq {}: {} [{}]",
                    h.name,
                    v.first_bad_seq.map_or("-".into(), |s| s.to_string()),
                    v.problem.as_deref().unwrap_or(""),
                    v.code.map_or("", |c| c.as_str())
                )),
                None => out.push(format!(
                    "ledger {}: cannot be verified until the problems above are repaired",
                    h.name
                )),
            }
        }
    }
}

/// The repository's lock files: removed, stale or held.
fn lock_lines(r: &doctor::DoctorReport, out: &mut Vec<String>) {
    for l in &r.locks {
        let age = crate::surface::store::age_text(std::time::Duration::from_secs(l.age_secs));
        out.push(if l.removed {
            format!("lock {}: {age} old, no process held it: removed", l.path)
        } else if l.stale {
            format!(
                "lock {}: {age} old and no process holds it: it blocks every update until removed (git forum doctor --repair)",
                l.path
            )
        } else {
            format!(
                "lock {}: {age} old, held by {} (left alone)",
                l.path,
                if l.holders.is_empty() {
                    "a process at work".to_string()
                } else {
                    l.holders.join(", ")
                }
            )
        });
    }
}

/// The install: git, the repository's formats, hooks, the runtime and the local models.
fn install_lines(r: &doctor::DoctorReport, out: &mut Vec<String>) {
    let i = &r.install;
    out.push(format!("git: {}", i.git));
    out.push(format!(
        "repository: {} refs, {} objects",
        i.ref_storage, i.object_format
    ));
    out.push(hooks_line(&i.hooks));
    if i.runtime.ready {
        out.push("runtime: ready".into());
    } else {
        out.push(format!(
            "runtime: not ready: {}",
            i.runtime.problems.join("; ")
        ));
    }
    for m in &i.local_models {
        out.push(format!(
            "local model: {} {}",
            m.url,
            if m.answers {
                "accepts connections"
            } else {
                "does not answer (start it: git forum model start)"
            }
        ));
    }
    if i.local_models.is_empty() {
        out.push("local model: none configured (is_local = true in .forum/runtime.toml)".into());
    }
}

/// The stale worktrees of --work runs, when any were removed or could not be.
fn work_lines(r: &doctor::DoctorReport, out: &mut Vec<String>) {
    if let Some(w) = &r.work {
        match &w.problem {
            Some(e) => out.push(format!("work: could not clean up stale worktrees: {e}")),
            None if w.removed_stale.is_empty() => {}
            None => out.push(format!(
                "work: removed {} work area(s) left by --work runs that died",
                w.removed_stale.len()
            )),
        }
    }
}

/// `git forum status` as text: the line it always printed, then the rest of the report.
pub(crate) fn status_text(r: &status::StatusReport) -> String {
    let mut out = vec![format!(
        "ledger {}: {} entries, checkpoint {}",
        r.ledger, r.entries, r.checkpoint
    )];
    match &r.last_run {
        Some(run) => out.push(format!(
            "last run: seq {} ({}), {} entries: {}",
            run.request_seq, run.state, run.entries, run.request
        )),
        None => out.push("last run: none yet (git forum submit starts one)".into()),
    }
    if let Some(d) = r.last_run.as_ref().and_then(|r| r.dispatch.as_ref()) {
        out.extend(dispatch_lines(d));
    }
    if r.ledgers.is_empty() {
        out.push("ledgers: none yet (the first append creates one)".into());
    }
    for l in &r.ledgers {
        let tip = &l.tip[..l.tip.len().min(12)];
        out.push(format!(
            "ledger {}: {} entries, tip {tip}",
            l.name, l.entries
        ));
    }
    out.push(hooks_line(&r.hooks));
    let rt = &r.runtime;
    for e in &rt.executors {
        out.push(format!("executor {}: {}", e.slot, e.describe));
    }
    if rt.ready {
        out.push("runtime: ready".into());
    } else {
        out.push(format!("runtime: not ready: {}", rt.problems.join("; ")));
    }
    for m in &rt.local_models {
        out.push(format!(
            "local model: {} {}",
            m.url,
            if m.answers {
                "accepts connections"
            } else {
                "does not answer"
            }
        ));
    }
    out.join("\n")
}

/// The `hooks:` line of doctor's and status's text: which installed hooks run git forum.
fn hooks_line(hooks: &[String]) -> String {
    if hooks.is_empty() {
        "hooks: none run git forum (install with `git forum hooks install`)".to_string()
    } else {
        format!("hooks: {}", hooks.join(", "))
    }
}

/// The lines of a dispatched run's figures on its server.
fn dispatch_lines(d: &crate::surface::worker::DispatchStatus) -> Vec<String> {
    if let Some(e) = &d.error {
        return vec![format!("dispatch: {} ({e})", d.server)];
    }
    let mut out = vec![format!(
        "dispatch: {}, stream {}: {} of the run's tasks on the stream, {} results to witness; workers' consumer: {} pending, {} in flight, {} redelivered",
        d.server, d.stream, d.run_tasks, d.results_waiting, d.pending, d.in_flight, d.redelivered
    )];
    for w in &d.workers {
        out.push(format!(
            "worker {}: {} task {} of run {}, {} s ago",
            w.worker, w.state, w.task, w.run, w.age_seconds
        ));
    }
    out
}
