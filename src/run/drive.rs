//! The wave driver: `submit` opens a run and plans it, then `drive` (shared with `resume`)
//! holds each gated wave to its gate, runs the waves, validates, climbs the escalation
//! ladder, marks degraded waves, and synthesizes and delivers the answer.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::json;

use crate::ledger::{Storage, kind};
use crate::plan::{CompiledPlan, Task};
use crate::route::{self, RouteFrame};

use super::course::Course;
use super::deliver::{Delivered, deliver};
use super::engine::{Done, Run};
use super::gates::{GateOutcome, gate};
use super::ladder::escalate;
use super::synthesis::synthesize;
use super::work_state::work_record;
use super::{Env, Event, Options, Outcome, RunError, Status, Verdict, lock};

/// The request entry and route frame of a run about to start.
pub(super) fn open_run(run: &Run<'_, '_>, request: &str) -> Result<(u64, RouteFrame), RunError> {
    let (_, frame) = route::route_request(request, run.env.roster);
    let mut payload = json!({ "text": request });
    if let Some(g) = run.opts.gates.record() {
        payload["gates"] = g;
    }
    if let Some(r) = &run.opts.runtime_record {
        payload["runtime"] = r.clone();
        // Which git forum recorded the run, so that a strict replay by another version can
        // say which one made it.
        payload["git_forum"] = json!(super::VERSION);
    }
    if let Some(o) = &run.opts.options_record {
        payload["options"] = o.clone();
    }
    if let Some(r) = &run.opts.rules_record {
        payload["rules"] = r.clone();
    }
    if run.opts.solo {
        payload["solo"] = json!(true);
    }
    // A run that works in the repository is named by its request seq: the workbench opens
    // at the seq the request is about to take, and the request records its base.
    let req = match run.opts.work.as_ref().filter(|o| o.enabled) {
        Some(o) => run.put_naming_work(None, &o.checks, |w| {
            let mut p = payload.clone();
            p["work"] = work_record(w);
            if let Some(d) = run.dispatcher() {
                p["work"]["dispatch"] = d.record();
            }
            (
                "client",
                kind::REQUEST,
                crate::ledger::canonical::Value::from_serde(&p),
            )
        })?,
        None => run.put("client", kind::REQUEST, None, payload)?,
    };
    run.set_request(req.seq);
    run.put_value("router", kind::ROUTE_FRAME, Some(req.seq), frame.payload())?;
    Ok((req.seq, frame))
}

/// Stops the run `request_seq` before any model call when its worker cannot start
/// ([`Options::cannot_start`](super::Options)): witnessed as `run_stopped` at stage `start`
/// with the reason, so the record says why the run did nothing.
pub(super) fn refuse_start(run: &Run<'_, '_>, request_seq: u64) -> Result<(), RunError> {
    let Some(why) = &run.opts.cannot_start else {
        return Ok(());
    };
    run.put(
        "dispatch",
        kind::RUN_STOPPED,
        Some(request_seq),
        json!({"stage": "start", "reason": why}),
    )?;
    run.env.progress.event(&Event::Stopped {
        reason: format!("the worker cannot start: {why}"),
    });
    Err(RunError::Start(why.clone()))
}

/// Runs a new request end to end.
pub fn submit(
    store: &mut (dyn Storage + Send),
    env: &Env<'_>,
    opts: &Options,
    request: &str,
) -> Result<Outcome, RunError> {
    route::check_request(request).map_err(|e| RunError::Request(e.to_string()))?;
    super::pulse::observed(env, opts, |env, pulse| {
        let run = Run::new(store, env, opts);
        let result =
            run.scoped(|| super::pulse::beating(&run, pulse, || submit_run(&run, request)));
        run.finish_work();
        run.finish(result)
    })
}

fn submit_run(run: &Run<'_, '_>, request: &str) -> Result<Outcome, RunError> {
    if run.opts.solo {
        return submit_solo(run, request);
    }
    let (env, opts) = (run.env, run.opts);
    let (request_seq, frame) = open_run(run, request)?;
    refuse_start(run, request_seq)?;
    let (context, plan_parent) = run.request_context(request, request_seq)?;
    let Some(plan) = run.plan(request, context.as_deref(), request_seq)? else {
        return stopped_on_ceiling(run, request_seq, "plan", &frame, &BTreeMap::new());
    };
    let plan_entry = run.put(
        "dispatch",
        kind::PLAN,
        Some(plan_parent),
        run.plan_payload(&plan),
    )?;
    env.progress.event(&Event::Planned {
        tasks: plan.tasks.len(),
        waves: plan.waves.len(),
    });
    let course = Course {
        request,
        request_seq,
        frame: &frame,
        plan: &plan,
        plan_seq: plan_entry.seq,
        run_seq: plan_entry.seq,
        gates: &opts.gates,
        solo: false,
    };
    drive(run, &course, BTreeMap::new(), BTreeMap::new())
}

/// A new solo run of `request` (`solo.rs`): routed through the ladder (`classify.rs`), its
/// one-task plan built without a planner, then driven as any plan. Refused before anything is written when the run does not work in the
/// repository.
fn submit_solo(run: &Run<'_, '_>, request: &str) -> Result<Outcome, RunError> {
    super::solo::check_work(run)?;
    let (request_seq, frame) = open_run(run, request)?;
    let Some((plan, plan_seq)) = super::solo::put_solo_plan(run, request, request_seq)? else {
        let stage = super::classify::CLASSIFIER_STAGE;
        return stopped_on_ceiling(run, request_seq, stage, &frame, &BTreeMap::new());
    };
    let course = Course {
        request,
        request_seq,
        frame: &frame,
        plan: &plan,
        plan_seq,
        run_seq: plan_seq,
        gates: &run.opts.gates,
        solo: true,
    };
    drive(run, &course, BTreeMap::new(), BTreeMap::new())
}

/// Drives a planned run to its end (this time): the waves, each behind its gate; validation;
/// the escalation ladder; degraded waves; then the budget stop, or synthesis and delivery.
/// `reused` and `verdicts` are what a resumed run already has.
pub(super) fn drive(
    run: &Run<'_, '_>,
    course: &Course<'_>,
    reused: BTreeMap<String, Done>,
    mut verdicts: BTreeMap<String, Verdict>,
) -> Result<Outcome, RunError> {
    let plan = course.plan;
    let end = |status: Status, answer: Option<(u64, String)>, verdicts: &BTreeMap<_, _>| {
        run.outcome(
            status,
            course.request_seq,
            answer,
            count(verdicts),
            course.frame.payload(),
        )
    };
    // The plan's tasks as they run: a gate edit rewrites an instruction here, and the
    // rewritten task is what is dispatched, validated and escalated.
    let mut current: BTreeMap<String, Task> = plan
        .tasks
        .iter()
        .map(|t| (t.id.clone(), t.clone()))
        .collect();
    if let Some(w) = run.work() {
        *lock(&w.plan) = plan.tasks.clone();
    }
    let results: Mutex<BTreeMap<String, Done>> = Mutex::new(reused);
    if let Some(held) = run_waves(run, course, &mut current, &results)? {
        return Ok(end(held, None, &verdicts));
    }
    let tasks: Vec<&Task> = plan
        .tasks
        .iter()
        .filter_map(|t| current.get(&t.id))
        .collect();
    let mut finals: BTreeMap<String, Done> = lock(&results).clone();
    if let Some(w) = run.work() {
        run.check_run_branch(w, course.plan_seq)?;
    }
    // A solo run's checks and pre-ship gate are its judges: no validator is asked.
    if !course.solo {
        validate_all(run, &tasks, &finals, &mut verdicts)?;
    }
    // A --work task climbed the ladder on its checks already, in its worktree.
    if run.work().is_none() {
        escalate(run, &tasks, &mut finals, &mut verdicts)?;
    }
    mark_degraded(run, plan, course.plan_seq, &verdicts)?;
    if run.over_budget() {
        let a = run.stop_on_budget(course.request_seq)?;
        return Ok(end(Status::StoppedOnBudget, Some(a), &verdicts));
    }
    let synthesized = if course.solo {
        Some(super::solo::answer_from_record(run, course, &finals)?)
    } else {
        synthesize(run, course, &tasks, &finals, &verdicts)?
    };
    let Some((answer_seq, answer)) = synthesized else {
        return stopped_on_ceiling(
            run,
            course.request_seq,
            "synthesis",
            course.frame,
            &verdicts,
        );
    };
    run.witness_duplicates()?;
    match deliver(
        run,
        course.request,
        course.frame,
        (answer_seq, answer),
        !course.solo,
    )? {
        Delivered::Answer(seq, text) => Ok(end(Status::Answered, Some((seq, text)), &verdicts)),
        Delivered::Ceiling(stage) => {
            stopped_on_ceiling(run, course.request_seq, stage, course.frame, &verdicts)
        }
    }
}

/// Ends a run whose `stage` call a spend ceiling refused: witnessed as a budget stop naming
/// the ceiling and the stage (exit 4); `resume` with a fresh allowance goes on from there.
pub(super) fn stopped_on_ceiling(
    run: &Run<'_, '_>,
    request_seq: u64,
    stage: &str,
    frame: &RouteFrame,
    verdicts: &BTreeMap<String, Verdict>,
) -> Result<Outcome, RunError> {
    let a = run.stop_on_ceiling(request_seq, stage)?;
    Ok(run.outcome(
        Status::StoppedOnCeiling,
        request_seq,
        Some(a),
        count(verdicts),
        frame.payload(),
    ))
}

/// Final verdict decisions, counted.
fn count(verdicts: &BTreeMap<String, Verdict>) -> BTreeMap<String, u64> {
    let mut c = BTreeMap::new();
    for x in verdicts.values() {
        *c.entry(x.decision.clone()).or_insert(0u64) += 1;
    }
    c
}

/// Runs the waves in order, each gated one only once its gate lets it (applying a gate's
/// edits to `current`), skipping tasks already in `results`. Returns how the run is held when
/// a gate pauses or stops it.
fn run_waves(
    run: &Run<'_, '_>,
    course: &Course<'_>,
    current: &mut BTreeMap<String, Task>,
    results: &Mutex<BTreeMap<String, Done>>,
) -> Result<Option<Status>, RunError> {
    let plan = course.plan;
    for (i, wave) in plan.waves.iter().enumerate() {
        if course.gates.waves.contains(&i) {
            match gate(run, course.gates, course.run_seq, i, wave)? {
                GateOutcome::Run(edits) => {
                    for (id, text) in edits {
                        if let Some(t) = current.get_mut(&id) {
                            t.instruction = text;
                        }
                    }
                }
                GateOutcome::Pause => {
                    run.env.progress.event(&Event::Paused { wave: i });
                    return Ok(Some(Status::Paused { wave: i }));
                }
                GateOutcome::Stop => return Ok(Some(Status::Rejected { wave: i })),
            }
        }
        let todo: Vec<&Task> = wave
            .iter()
            .filter(|id| !lock(results).contains_key(id.as_str()))
            .filter_map(|id| current.get(id.as_str()))
            .collect();
        run.env.progress.event(&Event::Wave {
            index: i,
            of: plan.waves.len(),
            tasks: wave.clone(),
        });
        run.run_and_ship_wave(&todo, results, plan, (i, wave), course.plan_seq)?;
        after_wave(run, i, course.plan_seq)?;
    }
    Ok(None)
}

/// Validates, in plan order after the last wave, every result not judged yet.
fn validate_all(
    run: &Run<'_, '_>,
    tasks: &[&Task],
    finals: &BTreeMap<String, Done>,
    verdicts: &mut BTreeMap<String, Verdict>,
) -> Result<(), RunError> {
    let todo: Vec<(&Task, &Done)> = tasks
        .iter()
        .filter(|t| !verdicts.contains_key(&t.id))
        .filter_map(|t| finals.get(&t.id).map(|d| (*t, d)))
        .collect();
    if !run.can_judge_at_once(todo.len()) {
        for (t, done) in todo {
            let v = run.validate(t, done)?;
            verdicts.insert(t.id.clone(), v);
        }
        return Ok(());
    }
    // The validator's calls at once (as many at a time as the run's seat calls may go), each
    // verdict then witnessed in plan order, as one after another would have.
    let width = run.seat_width();
    for group in todo.chunks(width) {
        // The first of the group is judged on this thread, the others each on their own.
        let judged: Vec<_> = std::thread::scope(|s| {
            let each: Vec<_> = group[1..]
                .iter()
                .map(|(t, done)| s.spawn(|| run.scoped(|| run.judge(t, done))))
                .collect();
            let (t, done) = group[0];
            let first = run.scoped(|| run.judge(t, done));
            std::iter::once(Ok(first))
                .chain(each.into_iter().map(|h| h.join()))
                .collect()
        });
        for ((t, done), j) in group.iter().zip(judged) {
            let j = j.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            let v = run.witness_verdict(t, done, j)?;
            verdicts.insert(t.id.clone(), v);
        }
    }
    Ok(())
}

/// A wave in which nothing passed is degraded, not approved: witnessed as `degraded`.
fn mark_degraded(
    run: &Run<'_, '_>,
    plan: &CompiledPlan,
    plan_seq: u64,
    verdicts: &BTreeMap<String, Verdict>,
) -> Result<(), RunError> {
    for (i, wave) in plan.waves.iter().enumerate() {
        let judged: Vec<&Verdict> = wave.iter().filter_map(|id| verdicts.get(id)).collect();
        if !judged.is_empty() && judged.iter().all(|v| !v.passed()) {
            run.put(
                "validator",
                kind::DEGRADED,
                Some(plan_seq),
                json!({"wave": i, "tasks": wave, "reason": "no task of this wave passed validation"}),
            )?;
        }
    }
    Ok(())
}

fn after_wave(run: &Run<'_, '_>, wave: usize, plan_seq: u64) -> Result<(), RunError> {
    if run.opts.checkpoint_each_wave {
        let root = run.checkpoint_root()?;
        run.put(
            "dispatch",
            kind::CHECKPOINT,
            Some(plan_seq),
            json!({"wave": wave, "root": root}),
        )?;
        lock(&run.store).sync()?;
    }
    Ok(())
}
