//! The `plan` entry's payload: written by a run, read back by a resume and by the readers of
//! runs.

use serde_json::{Value, json};

use crate::plan::{CompiledPlan, Plan, Task};

/// The plan entry payload: Forum's `waves` and `edges`, plus the tasks themselves (so order
/// edges and done criteria survive, and a resumed run continues the same plan).
pub(crate) fn plan_entry_payload(plan: &CompiledPlan) -> Value {
    let mut p = plan.payload().to_serde();
    p["tasks"] = Value::Array(
        plan.tasks
            .iter()
            .map(|t| {
                json!({
                    "id": t.id,
                    "agent": t.agent,
                    "instruction": t.instruction,
                    "depends_on": t.depends_on,
                    "order_deps": t.order_deps.iter().collect::<Vec<_>>(),
                    "done_when": t.done_when,
                })
            })
            .collect(),
    );
    p
}

/// Reads back the plan a `plan` entry carries.
pub(crate) fn plan_from_payload(p: &Value) -> Option<CompiledPlan> {
    let tasks = p.get("tasks")?.as_array()?;
    let strs = |v: &Value| -> Option<Vec<String>> {
        v.as_array()?
            .iter()
            .map(|x| x.as_str().map(str::to_string))
            .collect()
    };
    let mut out = Vec::new();
    for t in tasks {
        let mut task = Task::new(
            t.get("id")?.as_str()?,
            t.get("agent")?.as_str()?,
            t.get("instruction")?.as_str()?,
        );
        task.depends_on = strs(t.get("depends_on")?)?;
        task.order_deps = strs(t.get("order_deps")?)?.into_iter().collect();
        task.done_when = strs(t.get("done_when")?)?;
        out.push(task);
    }
    Plan { tasks: out }.compile().ok()
}
