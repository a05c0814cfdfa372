//! `resume`: finds the run to continue, refuses while its gate is undecided, reuses every
//! result already judged, and hands the rest to the wave driver.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::gate;
use crate::ledger::{Storage, kind};
use crate::plan::CompiledPlan;
use crate::route;

use super::changes;
use super::course::Course;
use super::drive::{drive, stopped_on_ceiling};
use super::engine::{Done, Run};
use super::{Env, Options, Outcome, RunError, Verdict, lock, status};

/// Continues an unfinished run (the latest one, or `request_seq`): reuses every task already
/// witnessed with a passing or blocking verdict, and every ok result not yet judged; runs the
/// rest.
pub fn resume(
    store: &mut (dyn Storage + Send),
    env: &Env<'_>,
    opts: &Options,
    request_seq: Option<u64>,
) -> Result<Outcome, RunError> {
    super::pulse::observed(env, opts, |env, pulse| {
        let run = Run::new(store, env, opts);
        let beating = || super::pulse::beating(&run, pulse, || resume_run(&run, request_seq));
        let result = run.scoped(beating);
        run.finish_work();
        run.finish(result)
    })
}

/// The run to resume: the one starting at `request_seq`, else the latest unfinished one;
/// refused when it cannot be resumed.
fn resume_target(
    runs: &[status::RunInfo],
    request_seq: Option<u64>,
) -> Result<&status::RunInfo, RunError> {
    let target = match request_seq {
        Some(seq) => runs.iter().find(|r| r.request_seq == seq).ok_or_else(|| {
            RunError::Resume(format!(
                "no run starts at seq {seq}: `git forum runs` lists them"
            ))
        })?,
        None => runs
            .iter()
            .rev()
            .find(|r| r.state.resumable())
            .ok_or_else(|| {
                RunError::Resume(
                    "no unfinished run to resume: every run in this ledger has finished".into(),
                )
            })?,
    };
    if !target.state.resumable() {
        return Err(RunError::Resume(format!(
            "run {} cannot be resumed: it is {}",
            target.request_seq,
            target.label()
        )));
    }
    Ok(target)
}

/// The plan of a run whose planning never finished, witnessed, and its entry's seq: a solo
/// run's one task again, else the planner's plan, asked with the request context the run
/// already witnessed (if any) so the plan chains to it as the first attempt would have.
/// `None` when a spend ceiling refused the planner's call.
fn plan_again(
    run: &Run<'_, '_>,
    entries: &[crate::ledger::Entry],
    target: &status::RunInfo,
    solo: bool,
) -> Result<Option<(CompiledPlan, u64)>, RunError> {
    let (request, request_seq) = (&target.request, target.request_seq);
    if solo {
        return super::solo::put_solo_plan(run, request, request_seq);
    }
    let context = witnessed_request_context(run, entries, target)?;
    let Some(plan) = run.plan(request, context.as_ref().map(|c| c.1.as_str()), request_seq)? else {
        return Ok(None);
    };
    let e = run.put(
        "dispatch",
        kind::PLAN,
        Some(context.as_ref().map_or(request_seq, |c| c.0)),
        run.plan_payload(&plan),
    )?;
    Ok(Some((plan, e.seq)))
}

/// The request context a run whose planning never finished already witnessed (its seq and
/// text), so a new plan chains to it as the first attempt would have.
fn witnessed_request_context(
    run: &Run<'_, '_>,
    entries: &[crate::ledger::Entry],
    target: &status::RunInfo,
) -> Result<Option<(u64, String)>, RunError> {
    let mut context: Option<(u64, String)> = None;
    for seq in &target.entries {
        if let Some(e) = entries.get(*seq as usize)
            && e.kind == kind::CONTEXT
            && let Some(p) = run.payload_of(e)?
            && p.get("task").is_none()
            && let Some(text) = p.get("context").and_then(Value::as_str)
            && !text.is_empty()
        {
            context = Some((e.seq, text.to_string()));
        }
    }
    Ok(context)
}

/// The results a resume reuses (with their verdicts): each task that succeeded and whose
/// verdict (if any) passed or blocked, and, in a run that works in the repository, only what
/// `worked` says was kept (a change blocked at the pre-ship gate is terminal).
fn reusable(
    target: &status::RunInfo,
    worked: Option<&BTreeMap<String, bool>>,
) -> (BTreeMap<String, Done>, BTreeMap<String, Verdict>) {
    let mut reused: BTreeMap<String, Done> = BTreeMap::new();
    let mut verdicts: BTreeMap<String, Verdict> = BTreeMap::new();
    for (id, r) in &target.results {
        if let Some(kept) = worked {
            match kept.get(id) {
                Some(true) => {}
                Some(false) => {
                    // Blocked at the pre-ship gate: terminal, never run again.
                    reused.insert(
                        id.clone(),
                        Done {
                            output: r.output.clone(),
                            ok: false,
                            seq: r.seq,
                        },
                    );
                    continue;
                }
                None => continue,
            }
        }
        if !r.ok {
            continue;
        }
        match target.verdicts.get(id) {
            Some(v) if v.decision == "pass" || v.decision == "block" => {
                verdicts.insert(id.clone(), v.clone());
            }
            Some(_) => continue,
            None => {}
        }
        reused.insert(
            id.clone(),
            Done {
                output: r.output.clone(),
                ok: true,
                seq: r.seq,
            },
        );
    }
    (reused, verdicts)
}

/// The ledger's runs. A body that cannot be read (or does not hash to its entry) stops the
/// resume; it is never read as absent.
fn readable_runs(
    run: &Run<'_, '_>,
    entries: &[crate::ledger::Entry],
) -> Result<Vec<status::RunInfo>, RunError> {
    let mut unreadable = None;
    let runs = status::runs(entries, |e| {
        run.payload_of(e).unwrap_or_else(|err| {
            unreadable.get_or_insert(err);
            None
        })
    });
    match unreadable {
        Some(err) => Err(err),
        None => Ok(runs),
    }
}

/// The body of the `resume` entry of run `request_seq`: the tasks it reuses, the clock reading
/// a gate's deadline is decided from (`read_at`, when the run's gates have one), and the limits
/// it runs under (none in a strict replay of a resume that named none).
fn resume_body(
    run: &Run<'_, '_>,
    request_seq: u64,
    reused: &BTreeMap<String, Done>,
    read_at: Option<f64>,
) -> Value {
    let mut ids: Vec<&String> = reused.keys().collect();
    ids.sort();
    let mut resumed = json!({"reused": ids, "run": request_seq});
    if let Some(now) = read_at {
        resumed["read_at"] = json!(now);
    }
    if !run.opts.resume_limits_unkept {
        resumed["limits"] = super::replay::rules::limits(run.opts);
    }
    resumed
}

/// Keeps in the workbench only what the run branch holds already: the reused changes, in
/// plan order.
fn forget_unreused(run: &Run<'_, '_>, plan: &CompiledPlan, reused: &BTreeMap<String, Done>) {
    if let Some(w) = run.work() {
        for t in &plan.tasks {
            if !reused.contains_key(&t.id) {
                lock(&w.tasks).remove(&t.id);
            }
        }
    }
}

fn resume_run(run: &Run<'_, '_>, request_seq: Option<u64>) -> Result<Outcome, RunError> {
    let env = run.env;
    let entries = run.entries()?;
    let runs = readable_runs(run, &entries)?;
    let target = resume_target(&runs, request_seq)?;
    let request = target.request.clone();
    let request_seq = target.request_seq;
    run.set_request(request_seq);
    // The gates the run was submitted with (its record), not the caller's: a resume can
    // neither skip nor add one. A wave whose gate is raised and undecided refuses here,
    // before anything is run or written.
    let gate_entries = match target.run_seq {
        Some(run_seq) => gate::gate_entries(&entries, |e| run.payload_of(e).ok().flatten())
            .remove(&run_seq)
            .unwrap_or_default(),
        None => BTreeMap::new(),
    };
    let gates = status::held_gates(target, &gate_entries);
    // Whether a gate still waits is decided from this reading; a run whose gates have a
    // deadline keeps it in its `resume` entry (`read_at`) for a strict replay.
    let now = env.clock.reading(super::Reading::Resume);
    if let (Some(plan), Some(run_seq)) = (&target.plan, target.run_seq)
        && let Some((wave, gate::Admission::Wait { .. })) =
            status::first_held(plan, &gates, &gate_entries, now)
    {
        return Err(RunError::Gated {
            request_seq,
            run_seq,
            wave,
        });
    }
    super::drive::refuse_start(run, request_seq)?;
    let (_, frame) = route::route_request(&request, env.roster);
    let solo = super::solo::recorded_solo(run, &entries, request_seq);
    let (plan, plan_seq, run_seq) = match (&target.plan, target.plan_seq, target.run_seq) {
        (Some(p), Some(seq), Some(run_seq)) => (p.clone(), seq, run_seq),
        _ => match plan_again(run, &entries, target, solo)? {
            Some((plan, seq)) => (plan, seq, seq),
            None => {
                // A solo run's ceiling refused its classifier, any other run's its planner.
                let stage = if solo {
                    super::classify::CLASSIFIER_STAGE
                } else {
                    "plan"
                };
                return stopped_on_ceiling(run, request_seq, stage, &frame, &BTreeMap::new());
            }
        },
    };
    // A run that works in the repository keeps what its record says it shipped (or blocked);
    // everything else runs again.
    let (worked, taken_up) = reopen_work(run, &entries, target.request_seq, &target.entries)?
        .map_or((None, Vec::new()), |(kept, taken_up)| {
            (Some(kept), taken_up)
        });
    let (reused, verdicts) = reusable(target, worked.as_ref());
    if worked.is_some() {
        forget_unreused(run, &plan, &reused);
    }
    take_up_dispatch(run, &entries, &target.entries)?;
    let read_at = gates.deadline_seconds.map(|_| now);
    let resumed = resume_body(run, request_seq, &reused, read_at);
    run.put("dispatch", kind::RESUME, Some(plan_seq), resumed)?;
    witness_taken_up(run, &taken_up)?;
    let course = Course {
        request: &request,
        request_seq,
        frame: &frame,
        plan: &plan,
        plan_seq,
        run_seq,
        gates: &gates,
        solo,
    };
    drive(run, &course, reused, verdicts)
}

/// What a resume takes over of a run that works in the repository: for each task the run
/// keeps, whether it is kept as shipped (`true`) or as blocked (`false`), and each
/// integration the run branch holds but the record never witnessed (task, tip).
type Reopened = (BTreeMap<String, bool>, Vec<(String, String)>);

/// Reopens the workbench of a run whose request records `work`, and restores what each task
/// has in the repository ([`Reopened`]); `None` when the run does not work in the repository.
/// In a run that witnesses its integrations, a `merge` whose integration was never witnessed
/// (the writer was killed in between) is taken up from the run branch when the branch holds
/// it, checked ([`Workbench::take_up_integration`](super::Workbench::take_up_integration)),
/// to be witnessed once the resume is.
fn reopen_work(
    run: &Run<'_, '_>,
    entries: &[crate::ledger::Entry],
    request_seq: u64,
    seqs: &[u64],
) -> Result<Option<Reopened>, RunError> {
    let Some(request) = entries.get(request_seq as usize) else {
        return Ok(None);
    };
    let Some(record) = run
        .payload_of(request)?
        .and_then(|b| b.get("work").cloned())
    else {
        return Ok(None);
    };
    let checks: Vec<String> = record
        .get("checks")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    // A run recorded before its integrations (or its gate's replies over attempts) were
    // witnessed goes on as it was recorded.
    let legacy = !super::work_state::witnessed(&record);
    let unkept = super::work_state::Unkept::of(&record);
    run.open_work(
        request_seq,
        record.get("base").and_then(Value::as_str),
        checks,
        (legacy, unkept),
    )?;
    let Some(w) = run.work() else {
        return Ok(None);
    };
    let mut items = Vec::new();
    for seq in seqs {
        if let Some(e) = entries.get(*seq as usize)
            && matches!(
                e.kind.as_str(),
                kind::CHANGE
                    | kind::CHECK
                    | kind::SHIP
                    | kind::CONFLICT
                    | kind::ATTEMPT_CHOICE
                    | kind::INTEGRATED
            )
            && let Some(p) = run.payload_of(e)?
        {
            items.push((e.clone(), p));
        }
    }
    let (pending, recorded) = unwitnessed(&items);
    let mut kept = BTreeMap::new();
    let mut taken_up = Vec::new();
    for (task, tw) in changes::restore(&items) {
        if let (false, true, Some(commit)) = (legacy, pending.contains(&task), tw.commit()) {
            let name = run.ref_name(&task);
            let tip = w
                .bench
                .take_up_integration(&name, commit, recorded.as_deref())
                .map_err(|e| RunError::Work(e.to_string()))?;
            taken_up.extend(tip.map(|tip| (task.clone(), tip)));
        }
        if let Some(k) = changes::keeps(&tw, w.bench.as_ref()) {
            kept.insert(task.clone(), k);
            w.set(&task, tw);
        }
    }
    Ok(Some((kept, taken_up)))
}

/// Of a run's `items`: the tasks whose last `merge` has nothing after it (no `integrated`,
/// `conflict` or later `change` entry: the writer was killed before it witnessed what the
/// integration gave), and the run branch tip the last `integrated` entry names.
fn unwitnessed(
    items: &[(crate::ledger::Entry, Value)],
) -> (std::collections::BTreeSet<String>, Option<String>) {
    let mut pending = std::collections::BTreeSet::new();
    let mut tip = None;
    for (e, p) in items {
        let Some(task) = p.get("task").and_then(Value::as_str) else {
            continue;
        };
        match e.kind.as_str() {
            kind::SHIP if p["decision"] == "merge" => {
                pending.insert(task.to_string());
            }
            kind::INTEGRATED => {
                pending.remove(task);
                tip = p["tip"].as_str().map(str::to_string);
            }
            kind::SHIP | kind::CONFLICT | kind::CHANGE => {
                pending.remove(task);
            }
            _ => {}
        }
    }
    (pending, tip)
}

/// Witnesses, once the resume is witnessed, each integration ([`Reopened`]) the run branch
/// held that its record did not, as the live run would have: an `integrated` entry after the
/// task's `ship` entry, with the tip and its tree.
fn witness_taken_up(run: &Run<'_, '_>, taken_up: &[(String, String)]) -> Result<(), RunError> {
    let Some(w) = run.work() else {
        return Ok(());
    };
    for (task, tip) in taken_up {
        let mut tw = w.get(task);
        let Some(commit) = tw.commit().map(str::to_string) else {
            continue;
        };
        let tree = w
            .bench
            .tip_tree(tip)
            .map_err(|e| RunError::Work(e.to_string()))?;
        let e = run.put(
            "dispatch",
            kind::INTEGRATED,
            Some(tw.last_seq),
            json!({"task": task, "change": tw.change_seq, "commit": commit,
                   "tip": tip, "tree": tree}),
        )?;
        tw.last_seq = e.seq;
        tw.integrated = Some(tip.clone());
        w.set(task, tw);
    }
    Ok(())
}

/// Hands a dispatched run's dispatcher what its record says it issued and witnessed, so the
/// results that came while no writer listened are taken from the run's durable consumer:
/// each attempt still in flight is awaited again, a result already witnessed is not witnessed
/// twice, and one for an attempt already answered is a duplicate.
fn take_up_dispatch(
    run: &Run<'_, '_>,
    entries: &[crate::ledger::Entry],
    seqs: &[u64],
) -> Result<(), RunError> {
    let (Some(d), Some(w)) = (run.dispatcher(), run.work()) else {
        return Ok(());
    };
    let mut items = Vec::new();
    for seq in seqs {
        if let Some(e) = entries.get(*seq as usize)
            // A halt or an interruption answers what was in flight then (`priors`).
            && matches!(
                e.kind.as_str(),
                kind::TASK_DISPATCHED
                    | kind::RESULT
                    | kind::DUPLICATE_RESULT
                    | kind::HALTED
                    | kind::INTERRUPTED
            )
            && let Some(p) = run.payload_of(e)?
        {
            items.push((e.kind.clone(), e.seq, p));
        }
    }
    let (prior, witnessed) = super::remote::priors(&items);
    d.resume(w.run_seq, &prior, &witnessed)
        .map_err(RunError::Work)
}
