//! `git forum runs` and `git forum gate`: the runs a ledger holds, and the gates they wait at
//! (listed, approved, edited or rejected).

use super::{
    Bodies, CliError, Ctx, Decide, Decision, GateArgs, GateCommand, RunsArgs, all_entries, cli_err,
    read_bodies, run, surface, to_json,
};
use crate::surface::request::Request;

/// `git forum runs`.
pub(crate) fn runs(ctx: &Ctx, _: RunsArgs) -> Result<(), CliError> {
    let store = ctx.reader()?;
    let entries = all_entries(&store)?;
    let read = read_bodies(&store);
    let mut runs = surface::run::runs(&entries, &Bodies::new(&read)).map_err(cli_err)?;
    surface::run::keep_existing_branches(&mut runs, &ctx.dir);
    if ctx.json {
        return ctx.out_json(&to_json(&runs)?);
    }
    if runs.runs.is_empty() {
        return ctx.out("no runs in this ledger (git forum submit \"...\" starts one)");
    }
    for row in &runs.runs {
        let r = &row.info;
        let tasks = r.plan.as_ref().map_or(0, |p| p.tasks.len());
        let mut req: String = r.request.chars().take(60).collect();
        if r.request.chars().count() > 60 {
            req.push('…');
        }
        let detail = match &r.state {
            run::loop_status::RunState::Failed { stage, reason } => format!(" ({stage}: {reason})"),
            run::loop_status::RunState::Paused { wave }
            | run::loop_status::RunState::Rejected { wave } => {
                format!(" (wave {wave})")
            }
            _ => String::new(),
        };
        ctx.out(&format!(
            "run {:>5}  {:<17} {tasks} tasks, {} entries  {req}{detail}",
            r.request_seq,
            r.label(),
            r.entries.len()
        ))?;
        if let Some(w) = &row.work {
            ctx.out(&format!("           {}", w.line()))?;
        }
    }
    Ok(())
}

/// `git forum gate`.
pub(crate) fn gate(ctx: &Ctx, args: GateArgs) -> Result<(), CliError> {
    let mut store = ctx.store()?;
    let entries = all_entries(&store)?;
    let (key, note, decision) = match args.command {
        GateCommand::List => {
            let read = read_bodies(&store);
            let list = surface::run::gates(&entries, &Bodies::new(&read)).map_err(cli_err)?;
            if ctx.json {
                return ctx.out_json(&to_json(&list)?);
            }
            if list.pending.is_empty() {
                return ctx.out("no pending gates");
            }
            for g in &list.pending {
                let bound = match (g.deadline, &g.on_expiry) {
                    (Some(d), Some(o)) => format!(" [deadline {d:.0}, then {o}]"),
                    _ => String::new(),
                };
                ctx.out(&format!(
                    "run {} wave {} ({}): {}{bound}",
                    g.run.map_or("-".into(), |s| s.to_string()),
                    g.wave,
                    g.tasks.join(", "),
                    g.question
                ))?;
            }
            return Ok(());
        }
        GateCommand::Approve(a) => {
            a.validate().map_err(cli_err)?;
            (a.key, a.note, Decision::Approve)
        }
        GateCommand::Edit(e) => {
            let req = e.req.with_flags(&e.edit).map_err(cli_err)?;
            req.validate().map_err(cli_err)?;
            let edits = req.pairs();
            (req.key, req.note, Decision::Edit(edits))
        }
        GateCommand::Reject(r) => {
            r.validate().map_err(cli_err)?;
            (r.key, None, Decision::Reject(r.reason))
        }
    };
    let pending = {
        let read = read_bodies(&store);
        surface::run::pending(&entries, &Bodies::new(&read)).map_err(cli_err)?
    };
    let ask = Decide::of(&key, note, decision, &ctx.dir);
    let done = surface::run::decide(&pending, &mut store, &ask, ctx.now(None)?).map_err(cli_err)?;
    if ctx.json {
        return ctx.out_json(&to_json(&done)?);
    }
    ctx.out(&format!(
        "gate before wave {} of run {} {} (seq {}); `git forum resume {}` continues the run",
        done.wave,
        done.run.map_or("-".into(), |s| s.to_string()),
        done.resolved,
        done.seq,
        done.run.map_or(String::new(), |s| s.to_string())
    ))
}
