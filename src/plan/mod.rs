//! The plan compiler: a task graph with typed edges becomes ordered waves (forum-spec §8), and
//! upstream results are injected into downstream instructions (forum-spec §9).
//!
//! A plan is what the planner model returns:
//!
//! ```json
//! {"tasks": [
//!   {"id": "T1", "agent": "backend", "instruction": "add the endpoint"},
//!   {"id": "T2", "agent": "tests", "instruction": "test it",
//!    "depends_on": ["T1", {"id": "T0", "type": "order"}],
//!    "done_when": ["the new tests pass"]}
//! ]}
//! ```
//!
//! A `depends_on` item that is a string, or an object whose `type` is `data`, is a *data* edge:
//! the upstream's output is handed to the task. An `order` edge only sequences the two tasks.
//! Waves are Kahn layers: every task whose dependencies are all in earlier waves, sorted by id
//! in code-point order. Edge types never change the layering.
//!
//! Two parsing modes exist. [`ParseMode::Forum`] reproduces Forum exactly (an unknown edge type
//! is a data edge, unknown task keys are ignored, a repeated id overwrites the earlier one when
//! scheduling). [`ParseMode::Strict`], used for plan files, refuses unknown edge types, unknown
//! task keys and duplicate ids up front, naming the offending ids.
//!
//! Everything here is pure.
//!
//! This file holds the types; `parse.rs` reads plan documents and tasks, `python.rs` renders
//! text the way Python's `repr` and `str` do (Forum's messages and instructions use them),
//! `compile.rs` layers a plan into waves, `upstream.rs` injects upstream results into a
//! task's instruction, and `sizing.rs` refuses a plan whose tasks repeat each other or are not
//! about the request.

mod compile;
mod parse;
mod python;
mod sizing;
#[cfg(test)]
mod tests;
mod upstream;

use std::collections::BTreeSet;
use std::fmt;

use crate::ledger::Value;

pub use parse::{Deps, extract_json_object, parse_deps, parse_done_when, parse_task};
pub(crate) use python::{py_list, py_repr};
pub use sizing::{STOP_WORDS, check_sized, content_words, stem};
pub use upstream::{
    BudgetedInjection, Injected, UpstreamResult, augment_with_upstream,
    augment_with_upstream_budgeted,
};

/// The keys a task object may carry in [`ParseMode::Strict`].
pub(crate) const TASK_KEYS: [&str; 5] = ["id", "agent", "instruction", "depends_on", "done_when"];

/// The kind of a dependency edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EdgeType {
    /// The upstream's output is injected into the downstream task.
    Data,
    /// The upstream only has to finish first.
    Order,
}

impl EdgeType {
    /// `"data"` or `"order"`.
    pub fn as_str(self) -> &'static str {
        match self {
            EdgeType::Data => "data",
            EdgeType::Order => "order",
        }
    }
}

impl fmt::Display for EdgeType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How strictly a plan is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseMode {
    /// Exactly Forum's reading (`control._parse_deps`, `_parse_done_when`).
    Forum,
    /// Forum's reading plus up-front refusal of unknown edge types, unknown task keys and
    /// duplicate ids.
    Strict,
}

/// One task of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// Task id, unique in a well-formed plan.
    pub id: String,
    /// The roster lane that runs the task.
    pub agent: String,
    /// What to do.
    pub instruction: String,
    /// Upstream task ids in listed order (duplicates kept, as Forum keeps them).
    pub depends_on: Vec<String>,
    /// The upstream ids reached by an order edge; every other dependency is a data edge.
    pub order_deps: BTreeSet<String>,
    /// Done criteria, stripped, empties dropped.
    pub done_when: Vec<String>,
}

impl Task {
    /// A task with no dependencies and no done criteria.
    pub fn new(
        id: impl Into<String>,
        agent: impl Into<String>,
        instruction: impl Into<String>,
    ) -> Task {
        Task {
            id: id.into(),
            agent: agent.into(),
            instruction: instruction.into(),
            depends_on: Vec::new(),
            order_deps: BTreeSet::new(),
            done_when: Vec::new(),
        }
    }

    /// The type of the edge from `dep` to this task.
    pub(crate) fn edge_type(&self, dep: &str) -> EdgeType {
        if self.order_deps.contains(dep) {
            EdgeType::Order
        } else {
            EdgeType::Data
        }
    }

    /// Dependencies reached by data edges, in listed order (duplicates kept).
    pub fn data_deps(&self) -> Vec<&str> {
        self.depends_on
            .iter()
            .filter(|d| !self.order_deps.contains(d.as_str()))
            .map(String::as_str)
            .collect()
    }

    /// The instruction handed to the agent: the instruction, followed by the done criteria
    /// when there are any.
    pub fn contract_instruction(&self) -> String {
        if self.done_when.is_empty() {
            return self.instruction.clone();
        }
        format!(
            "{}\n\nDone criteria:\n{}",
            self.instruction,
            self.criteria_or("")
        )
    }

    /// The done criteria as `- ` lines, or `none` when there are none.
    pub(crate) fn criteria_or(&self, none: &str) -> String {
        if self.done_when.is_empty() {
            return none.to_string();
        }
        let lines: Vec<String> = self.done_when.iter().map(|c| format!("- {c}")).collect();
        lines.join("\n")
    }
}

/// A typed edge of the task graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// Upstream task id.
    pub from: String,
    /// Downstream task id.
    pub to: String,
    /// Edge type.
    pub kind: EdgeType,
}

/// Why a plan was refused. Display is one line; [`PlanError::kind`] gives Forum's exception
/// name for the errors Forum raises.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The text is not JSON.
    #[error("not valid JSON at line {line}, column {column}: {message}")]
    NotJson {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// Model output with no `{…}` span in it.
    #[error("no JSON object found in the planner's output")]
    NoJsonObject,
    /// The document is not `{"tasks": [...]}`.
    #[error("{0}")]
    Shape(String),
    /// A task object is malformed.
    #[error("task {at}: {message}")]
    BadTask {
        /// `#N` (1-based position) or the task's quoted id.
        at: String,
        /// What is wrong.
        message: String,
    },
    /// A task names an edge type other than `data` or `order` (strict mode).
    #[error(
        "task {}: dependency {} has unknown edge type {}; use \"data\" or \"order\"",
        py_repr(.task), py_repr(.dep), py_repr(.kind)
    )]
    UnknownEdgeType {
        /// The task.
        task: String,
        /// The dependency.
        dep: String,
        /// The type as written.
        kind: String,
    },
    /// A task names a lane the roster does not have.
    #[error("task {}: agent {} is not in the roster (known: {})", py_repr(.task), py_repr(.agent), .known.join(", "))]
    UnknownAgent {
        /// The task.
        task: String,
        /// The agent as written.
        agent: String,
        /// The roster's lane names.
        known: Vec<String>,
    },
    /// The same id is used by more than one task (strict mode).
    #[error("duplicate task id(s): {}", py_list(.0))]
    DuplicateIds(Vec<String>),
    /// A task depends on ids no task has (Forum: `ValueError`).
    #[error("task {} depends on unknown task(s): {}", py_repr(.task), py_list(.unknown))]
    UnknownDeps {
        /// The first task (in plan order) with unknown dependencies.
        task: String,
        /// Its unknown dependencies, sorted.
        unknown: Vec<String>,
    },
    /// No order satisfies the dependencies (Forum: `CycleError`). Lists every task that could
    /// not be scheduled, including tasks that only depend on a cycle.
    #[error("dependency cycle among: {}", py_list(.0))]
    Cycle(Vec<String>),
}

impl PlanError {
    /// Forum's exception type for this error: `CycleError` for cycles, `ValueError` otherwise.
    pub fn kind(&self) -> &'static str {
        match self {
            PlanError::Cycle(_) => "CycleError",
            _ => "ValueError",
        }
    }
}

/// A task graph in plan order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// The tasks as listed.
    pub tasks: Vec<Task>,
}

/// A plan that has been checked and layered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledPlan {
    /// The tasks as listed.
    pub(crate) tasks: Vec<Task>,
    /// Waves of task ids, each sorted; every task's dependencies lie in earlier waves.
    pub waves: Vec<Vec<String>>,
    /// Typed edges in plan order.
    pub(crate) edges: Vec<Edge>,
}

impl CompiledPlan {
    /// The `plan` ledger entry payload: `{"waves": [[id…]…], "edges": [{"from","to","type"}…]}`.
    pub(crate) fn payload(&self) -> Value {
        plan_payload(&self.waves, &self.edges)
    }
}

/// The `plan` ledger entry payload for waves and edges.
pub fn plan_payload(waves: &[Vec<String>], edges: &[Edge]) -> Value {
    Value::object([
        (
            "waves".to_string(),
            Value::Array(
                waves
                    .iter()
                    .map(|w| Value::Array(w.iter().map(Value::str).collect()))
                    .collect(),
            ),
        ),
        (
            "edges".to_string(),
            Value::Array(
                edges
                    .iter()
                    .map(|e| {
                        Value::object([
                            ("from".to_string(), Value::str(&e.from)),
                            ("to".to_string(), Value::str(&e.to)),
                            ("type".to_string(), Value::str(e.kind.as_str())),
                        ])
                    })
                    .collect(),
            ),
        ),
    ])
}
