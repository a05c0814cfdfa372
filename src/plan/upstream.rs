//! Upstream injection (forum-spec §9): the results of a task's data dependencies appended to
//! its instruction, cut to a size or passed through the run's context budget.

use std::collections::BTreeMap;

use super::Task;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamResult {
    /// The task's output.
    pub output: String,
    /// Whether the task succeeded.
    pub ok: bool,
}

/// An instruction with its upstream results injected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Injected {
    /// The instruction to send.
    pub instruction: String,
    /// The upstream ids whose output was injected, in order.
    pub data_from: Vec<String>,
}

/// Unbudgeted upstream injection (forum-spec §9): for each data dependency in order, skipping
/// ones with no result, a failed result, or already injected, append `- {id}: {output}`,
/// cutting outputs longer than `max_chars` code points with a marker that says how many were
/// omitted.
pub fn augment_with_upstream(
    task: &Task,
    results: &BTreeMap<String, UpstreamResult>,
    max_chars: usize,
) -> Injected {
    let mut parts = Vec::new();
    let mut data_from: Vec<String> = Vec::new();
    for dep in task.data_deps() {
        let Some(r) = results.get(dep) else { continue };
        if !r.ok || data_from.iter().any(|d| d == dep) {
            continue;
        }
        let len = r.output.chars().count();
        let output = if len > max_chars {
            let cut: String = r.output.chars().take(max_chars).collect();
            format!(
                "{cut}\n... [truncated for prompt efficiency, {} chars omitted; full output is witnessed]",
                len - max_chars
            )
        } else {
            r.output.clone()
        };
        parts.push(format!("- {dep}: {output}"));
        data_from.push(dep.to_string());
    }
    let mut instruction = task.contract_instruction();
    if !parts.is_empty() {
        instruction.push_str("\n\nUpstream results you build on:\n");
        instruction.push_str(&parts.join("\n"));
    }
    Injected {
        instruction,
        data_from,
    }
}

/// An instruction with its upstream results injected under a context budget, and the pressure
/// of every upstream output it considered (each is witnessed as a `context_budget` entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetedInjection {
    pub injected: Injected,
    pub pressures: Vec<crate::context::Pressure>,
}

/// Budgeted upstream injection (forum-spec §9): like [`augment_with_upstream`], but each
/// upstream output goes through the run's context budget as an `upstream` slice labelled
/// `{dep}->{task}`. An output admitted empty (omitted, or trimmed to nothing) is left out; a
/// trimmed one says how many bytes were cut.
pub fn augment_with_upstream_budgeted(
    task: &Task,
    results: &BTreeMap<String, UpstreamResult>,
    budget: &crate::context::ContextBudget,
    meter: &mut crate::context::Meter,
) -> BudgetedInjection {
    use crate::context::{Action, Source, apply};
    let mut parts = Vec::new();
    let mut data_from: Vec<String> = Vec::new();
    let mut pressures = Vec::new();
    for dep in task.data_deps() {
        let Some(r) = results.get(dep) else { continue };
        if !r.ok || data_from.iter().any(|d| d == dep) {
            continue;
        }
        let (admitted, pressure) = apply(
            budget,
            meter,
            Source::Upstream,
            &format!("{dep}->{}", task.id),
            &r.output,
        );
        let (action, cut) = (
            pressure.action,
            pressure.original_bytes - pressure.admitted_bytes,
        );
        pressures.push(pressure);
        if admitted.is_empty() {
            continue;
        }
        let output = if action == Action::Trimmed {
            format!(
                "{admitted}\n... [truncated for prompt efficiency, {cut} bytes omitted; full output is witnessed]"
            )
        } else {
            admitted
        };
        parts.push(format!("- {dep}: {output}"));
        data_from.push(dep.to_string());
    }
    let mut instruction = task.contract_instruction();
    if !parts.is_empty() {
        instruction.push_str("\n\nUpstream results you build on:\n");
        instruction.push_str(&parts.join("\n"));
    }
    BudgetedInjection {
        injected: Injected {
            instruction,
            data_from,
        },
        pressures,
    }
}
