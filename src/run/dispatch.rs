//! Dispatching a plan someone else made (Forum's `dispatch_plan`, as campaign rounds use it):
//! the `plan` entry, then each wave's tasks through the same dispatcher as a submitted run
//! (upstream injection, context budget, per-task context, parallel width, budget and
//! interruption), each witnessed as `task` and `result`. No request, no planner, no
//! validation and no synthesis: the caller judges the results.
//!
//! With work options enabled (a campaign's `--work`), the dispatch is a `--work` run named
//! by its `plan` entry's seq: the engine's own work path gives each task a worktree, commits
//! and checks its change, asks the pre-ship gate after each wave, integrates merged changes
//! onto `forum/run-PLANSEQ` (which starts at the given base) and checks that branch once at
//! the end. Each task's result then says what became of its change ([`WorkState`]).

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::ledger::canonical::Value;
use crate::ledger::{Storage, kind};
use crate::plan::{CompiledPlan, Task};

use super::engine::{Done, Run};
use super::work_state::{TaskWork, WorkRun};
use super::{Env, Options, RunError, lock};

/// One dispatched task's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TaskResult {
    /// The seq of its `result` entry.
    pub(crate) seq: u64,
    /// Whether the executor answered.
    pub(crate) ok: bool,
    /// The output (or the error) witnessed.
    pub(crate) output: String,
    /// What became of its change, in a dispatch that works in the repository.
    pub(crate) work: Option<WorkState>,
}

/// One task's change in a dispatch that works in the repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WorkState {
    /// Whether its change is on the run branch (or it changed nothing and its checks passed).
    pub(crate) landed: bool,
    /// Why it did not land (empty when it did).
    pub(crate) reason: String,
}

/// The run branch of a dispatch that works in the repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WorkBranch {
    /// The run's seq (its `plan` entry): the branch is `forum/run-SEQ`.
    pub(crate) run_seq: u64,
    /// The commit the branch started at.
    pub(crate) base: String,
    /// The branch's tip once anything was integrated.
    pub(crate) tip: Option<String>,
}

/// What a dispatch wrote and what each task gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dispatched {
    /// The seq of the `plan` entry.
    pub(crate) plan_seq: u64,
    /// Each task's result, by task id.
    pub(crate) results: BTreeMap<String, TaskResult>,
    /// Every entry this dispatch wrote, in seq order.
    pub(crate) written: Vec<u64>,
    /// Model calls started, per model id.
    pub(crate) calls: BTreeMap<String, u64>,
    /// The run branch, when the dispatch worked in the repository.
    pub(crate) branch: Option<WorkBranch>,
}

/// Dispatches `plan` on `store`: a `plan` entry with no parent (Forum's `{waves, edges}`),
/// then every wave in order, tasks parented on the plan and results on their tasks. When
/// `opts.work` is enabled the tasks work in the repository from `base` (HEAD when `None`);
/// every worktree is removed however the dispatch ends.
pub(crate) fn dispatch(
    store: &mut (dyn Storage + Send),
    env: &Env<'_>,
    opts: &Options,
    plan: &CompiledPlan,
    base: Option<&str>,
) -> Result<Dispatched, RunError> {
    let run = Run::new(store, env, opts);
    let out = run.scoped(|| dispatch_run(&run, plan, base));
    run.finish_work();
    out
}

fn dispatch_run(
    run: &Run<'_, '_>,
    plan: &CompiledPlan,
    base: Option<&str>,
) -> Result<Dispatched, RunError> {
    {
        // A dispatch that works in the repository is named by its plan entry's seq.
        let entry = match run.opts.work.as_ref().filter(|o| o.enabled) {
            Some(o) => {
                let body = plan_body(plan);
                let e = run
                    .put_naming_work(base, &o.checks, |_| ("dispatch", kind::PLAN, body.clone()))?;
                if let Some(w) = run.work() {
                    *lock(&w.plan) = plan.tasks.clone();
                }
                e
            }
            None => run.put_value("dispatch", kind::PLAN, None, plan_body(plan))?,
        };
        let by_id: BTreeMap<&str, &Task> = plan.tasks.iter().map(|t| (t.id.as_str(), t)).collect();
        let results: Mutex<BTreeMap<String, Done>> = Mutex::new(BTreeMap::new());
        for (i, wave) in plan.waves.iter().enumerate() {
            let tasks: Vec<&Task> = wave
                .iter()
                .filter_map(|id| by_id.get(id.as_str()).copied())
                .collect();
            run.run_and_ship_wave(&tasks, &results, plan, (i, wave), entry.seq)?;
        }
        if let Some(w) = run.work() {
            run.check_run_branch(w, entry.seq)?;
        }
        let work = run.work();
        let results = lock(&results)
            .iter()
            .map(|(id, d)| {
                (
                    id.clone(),
                    TaskResult {
                        seq: d.seq,
                        ok: d.ok,
                        output: d.output.clone(),
                        work: work.map(|w| work_state(&w.get(id), d)),
                    },
                )
            })
            .collect();
        let branch = work.map(|w| WorkBranch {
            run_seq: w.run_seq,
            base: w.bench.base().commit.clone(),
            tip: last_tip(w, plan),
        });
        Ok(Dispatched {
            plan_seq: entry.seq,
            results,
            written: lock(&run.written).clone(),
            calls: lock(&run.per_model).clone(),
            branch,
        })
    }
}

/// The run branch's tip: changes are integrated wave after wave, each wave in plan order, so
/// the branch's tip is the integration of the last task in that order that integrated.
fn last_tip(w: &WorkRun, plan: &CompiledPlan) -> Option<String> {
    let order: Vec<&str> = plan
        .waves
        .iter()
        .flat_map(|wave| {
            plan.tasks
                .iter()
                .filter(|t| wave.contains(&t.id))
                .map(|t| t.id.as_str())
        })
        .collect();
    order
        .into_iter()
        .rev()
        .filter_map(|id| w.get(id).integrated)
        .find(|t| !t.is_empty())
}

/// What became of a task's change: landed when it is integrated, or when the worker changed
/// nothing and every check passed; otherwise the reason, in one line.
fn work_state(tw: &TaskWork, done: &Done) -> WorkState {
    let failed_checks = || {
        tw.failed
            .iter()
            .map(|(c, _)| c.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let reason = match (&tw.change, tw.ship.as_deref()) {
        _ if !done.ok && tw.change.is_none() => first_line(&done.output, "the task failed"),
        (None, _) => "its change could not be committed".to_string(),
        (Some(c), _) if c.commit.is_none() && tw.checks_ok() => String::new(),
        (Some(_), _) if !tw.checks_ok() => format!("its checks failed: {}", failed_checks()),
        (Some(c), _) if c.commit.is_none() => "its change could not be committed".to_string(),
        (Some(_), Some("merge")) if tw.integrated.is_some() => String::new(),
        (Some(_), Some("merge")) => {
            "its change conflicted with the run branch and was not integrated".to_string()
        }
        (Some(_), Some("block")) => "the pre-ship gate blocked its change (quarantined)".into(),
        (Some(_), Some(_)) => "the pre-ship gate made no decision on its change".to_string(),
        (Some(_), None) => "its change was not shipped".to_string(),
    };
    WorkState {
        landed: reason.is_empty(),
        reason,
    }
}

fn first_line(s: &str, fallback: &str) -> String {
    let line = s.lines().next().unwrap_or("").trim();
    if line.is_empty() {
        fallback.to_string()
    } else {
        line.to_string()
    }
}

fn plan_body(plan: &CompiledPlan) -> Value {
    plan.payload()
}
