//! Dispatching a plan someone else made (Forum's `dispatch_plan`, as campaign rounds use it):
//! the `plan` entry, then each wave's tasks through the same dispatcher as a submitted run
//! (upstream injection, context budget, per-task context, parallel width, budget and
//! interruption), each witnessed as `task` and `result`. No request, no planner, no
//! validation and no synthesis: the caller judges the results.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::ledger::canonical::Value;
use crate::ledger::{Storage, kind};
use crate::plan::{CompiledPlan, Task};

use super::engine::{Done, Run};
use super::{Env, Options, RunError, lock};

/// One dispatched task's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskResult {
    /// The seq of its `result` entry.
    pub seq: u64,
    /// Whether the executor answered.
    pub ok: bool,
    /// The output (or the error) witnessed.
    pub output: String,
}

/// What a dispatch wrote and what each task gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dispatched {
    /// The seq of the `plan` entry.
    pub plan_seq: u64,
    /// Each task's result, by task id.
    pub results: BTreeMap<String, TaskResult>,
    /// Every entry this dispatch wrote, in seq order.
    pub written: Vec<u64>,
    /// Model calls started, per model id.
    pub calls: BTreeMap<String, u64>,
}

/// Dispatches `plan` on `store`: a `plan` entry with no parent (Forum's `{waves, edges}`),
/// then every wave in order, tasks parented on the plan and results on their tasks.
pub fn dispatch(
    store: &mut (dyn Storage + Send),
    env: &Env<'_>,
    opts: &Options,
    plan: &CompiledPlan,
) -> Result<Dispatched, RunError> {
    let run = Run::new(store, env, opts);
    run.scoped(|| {
        let entry = run.put_value("dispatch", kind::PLAN, None, plan_body(plan))?;
        let by_id: BTreeMap<&str, &Task> = plan.tasks.iter().map(|t| (t.id.as_str(), t)).collect();
        let results: Mutex<BTreeMap<String, Done>> = Mutex::new(BTreeMap::new());
        for wave in &plan.waves {
            let tasks: Vec<&Task> = wave
                .iter()
                .filter_map(|id| by_id.get(id.as_str()).copied())
                .collect();
            run.run_wave(&tasks, entry.seq, &results)?;
        }
        let results = lock(&results)
            .iter()
            .map(|(id, d)| {
                (
                    id.clone(),
                    TaskResult {
                        seq: d.seq,
                        ok: d.ok,
                        output: d.output.clone(),
                    },
                )
            })
            .collect();
        Ok(Dispatched {
            plan_seq: entry.seq,
            results,
            written: lock(&run.written).clone(),
            calls: lock(&run.per_model).clone(),
        })
    })
}

fn plan_body(plan: &CompiledPlan) -> Value {
    plan.payload()
}
