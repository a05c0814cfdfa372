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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use serde_json::Value as J;

use crate::ledger::Value;
use crate::ledger::canonical::python_float_repr;
use crate::roster::Roster;

/// Upstream output longer than this many code points is cut before injection (Forum's
/// `DEFAULT_MAX_UPSTREAM_CHARS`).
pub const DEFAULT_MAX_UPSTREAM_CHARS: usize = 8192;

/// The keys a task object may carry in [`ParseMode::Strict`].
pub const TASK_KEYS: [&str; 5] = ["id", "agent", "instruction", "depends_on", "done_when"];

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
    pub fn edge_type(&self, dep: &str) -> EdgeType {
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
        let lines: Vec<String> = self.done_when.iter().map(|c| format!("- {c}")).collect();
        format!(
            "{}\n\nDone criteria:\n{}",
            self.instruction,
            lines.join("\n")
        )
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

/// Python's `repr(str)`: single quotes unless the text holds a single quote and no double
/// quote; backslash, quote and control characters escaped. (Non-printable characters beyond
/// the C0/C1 controls and the line/paragraph separators are printed as they are.)
pub fn py_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (0x7f..0xa0).contains(&(c as u32)) || c == '\u{ad}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Python's `repr(list_of_str)`: `['a', 'b']`.
pub fn py_list<S: AsRef<str>>(items: &[S]) -> String {
    let parts: Vec<String> = items.iter().map(|s| py_repr(s.as_ref())).collect();
    format!("[{}]", parts.join(", "))
}

/// Python's `str.strip()`: Unicode whitespace plus U+001C..U+001F.
fn py_strip(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

/// Python's `str(x)` for a JSON scalar; `None` for arrays and objects.
fn py_str(v: &J) -> Option<String> {
    match v {
        J::String(s) => Some(s.clone()),
        J::Bool(true) => Some("True".into()),
        J::Bool(false) => Some("False".into()),
        J::Null => Some("None".into()),
        J::Number(n) => Some(if n.is_f64() {
            python_float_repr(n.as_f64().unwrap_or(f64::NAN))
        } else {
            n.to_string()
        }),
        J::Array(_) | J::Object(_) => None,
    }
}

fn type_name(v: &J) -> &'static str {
    match v {
        J::Null => "null",
        J::Bool(_) => "a boolean",
        J::Number(_) => "a number",
        J::String(_) => "a string",
        J::Array(_) => "a list",
        J::Object(_) => "an object",
    }
}

/// Parsed `depends_on`: ids in listed order and the set reached by order edges.
pub type Deps = (Vec<String>, BTreeSet<String>);

/// Reads a task's `depends_on` (forum-spec §8.2): absent or null is empty; otherwise a list
/// whose items are an id string (data edge) or an object with `id` and an optional `type`.
/// In Forum mode only `type == "order"` makes an order edge and any other type is data; in
/// strict mode the type must be `data` or `order`.
pub fn parse_deps(value: Option<&J>, task_id: &str, mode: ParseMode) -> Result<Deps, PlanError> {
    let bad = |message: String| PlanError::BadTask {
        at: py_repr(task_id),
        message,
    };
    let items = match value {
        None | Some(J::Null) => return Ok((Vec::new(), BTreeSet::new())),
        Some(J::Array(items)) => items,
        Some(other) => {
            return Err(bad(format!(
                "\"depends_on\" must be a list, found {}",
                type_name(other)
            )));
        }
    };
    let mut ids = Vec::with_capacity(items.len());
    let mut order = BTreeSet::new();
    for (i, item) in items.iter().enumerate() {
        match item {
            J::String(s) => ids.push(s.clone()),
            J::Object(m) => {
                let id = match m.get("id") {
                    Some(v) => py_str(v).ok_or_else(|| {
                        bad(format!(
                            "\"depends_on\" item {} has an \"id\" that is {}",
                            i + 1,
                            type_name(v)
                        ))
                    })?,
                    None => {
                        return Err(bad(format!(
                            "\"depends_on\" item {} is an object without \"id\"",
                            i + 1
                        )));
                    }
                };
                let is_order = match m.get("type") {
                    Some(J::String(t)) if t == "order" => true,
                    None => false,
                    Some(J::String(t)) if t == "data" => false,
                    Some(t) => {
                        if mode == ParseMode::Strict {
                            return Err(PlanError::UnknownEdgeType {
                                task: task_id.to_string(),
                                dep: id,
                                kind: py_str(t).unwrap_or_else(|| t.to_string()),
                            });
                        }
                        false
                    }
                };
                if is_order {
                    order.insert(id.clone());
                }
                ids.push(id);
            }
            other => {
                return Err(bad(format!(
                    "\"depends_on\" item {} must be a task id or an object with \"id\", found {}",
                    i + 1,
                    type_name(other)
                )));
            }
        }
    }
    Ok((ids, order))
}

/// Reads `done_when` (forum-spec §8.2): absent, null or `""` is none; a string is one stripped
/// criterion (dropped when blank); a list gives each item stringified and stripped, blanks
/// dropped. Anything else is an error.
pub fn parse_done_when(value: Option<&J>, task_id: &str) -> Result<Vec<String>, PlanError> {
    let bad = |message: String| PlanError::BadTask {
        at: py_repr(task_id),
        message,
    };
    match value {
        None | Some(J::Null) => Ok(Vec::new()),
        Some(J::String(s)) => {
            let s = py_strip(s);
            Ok(if s.is_empty() {
                Vec::new()
            } else {
                vec![s.to_string()]
            })
        }
        Some(J::Array(items)) => {
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let text = py_str(item).ok_or_else(|| {
                    bad(format!(
                        "\"done_when\" item {} must be text, found {}",
                        i + 1,
                        type_name(item)
                    ))
                })?;
                let text = py_strip(&text);
                if !text.is_empty() {
                    out.push(text.to_string());
                }
            }
            Ok(out)
        }
        Some(other) => Err(bad(format!(
            "\"done_when\" must be text or a list of text, found {}",
            type_name(other)
        ))),
    }
}

/// Reads one task object. `index` is its 0-based position, for messages.
pub fn parse_task(index: usize, value: &J, mode: ParseMode) -> Result<Task, PlanError> {
    let pos = format!("#{}", index + 1);
    let J::Object(m) = value else {
        return Err(PlanError::BadTask {
            at: pos,
            message: format!("must be an object, found {}", type_name(value)),
        });
    };
    let id = match m.get("id") {
        None => {
            return Err(PlanError::BadTask {
                at: pos,
                message: "has no \"id\"".into(),
            });
        }
        Some(J::Null) if mode == ParseMode::Strict => {
            return Err(PlanError::BadTask {
                at: pos,
                message: "has a null \"id\"".into(),
            });
        }
        Some(v) => py_str(v).ok_or_else(|| PlanError::BadTask {
            at: pos.clone(),
            message: format!("\"id\" must be text, found {}", type_name(v)),
        })?,
    };
    if mode == ParseMode::Strict && py_strip(&id).is_empty() {
        return Err(PlanError::BadTask {
            at: pos,
            message: "has an empty \"id\"".into(),
        });
    }
    let at = py_repr(&id);
    if mode == ParseMode::Strict
        && let Some(k) = m.keys().find(|k| !TASK_KEYS.contains(&k.as_str()))
    {
        return Err(PlanError::BadTask {
            at,
            message: format!("unknown field {k:?} (expected: {})", TASK_KEYS.join(", ")),
        });
    }
    let text_field = |field: &str| -> Result<String, PlanError> {
        match m.get(field) {
            None => Err(PlanError::BadTask {
                at: at.clone(),
                message: format!("has no {field:?}"),
            }),
            Some(J::Null) if mode == ParseMode::Strict => Err(PlanError::BadTask {
                at: at.clone(),
                message: format!("{field:?} is null"),
            }),
            Some(v) => py_str(v).ok_or_else(|| PlanError::BadTask {
                at: at.clone(),
                message: format!("{field:?} must be text, found {}", type_name(v)),
            }),
        }
    };
    let agent = text_field("agent")?;
    let instruction = text_field("instruction")?;
    let (depends_on, order_deps) = parse_deps(m.get("depends_on"), &id, mode)?;
    let done_when = parse_done_when(m.get("done_when"), &id)?;
    Ok(Task {
        id,
        agent,
        instruction,
        depends_on,
        order_deps,
        done_when,
    })
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
    pub tasks: Vec<Task>,
    /// Waves of task ids, each sorted; every task's dependencies lie in earlier waves.
    pub waves: Vec<Vec<String>>,
    /// Typed edges in plan order.
    pub edges: Vec<Edge>,
}

impl CompiledPlan {
    /// The `plan` ledger entry payload: `{"waves": [[id…]…], "edges": [{"from","to","type"}…]}`.
    pub fn payload(&self) -> Value {
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

impl Plan {
    /// Reads a plan document (`{"tasks": [...]}`) that is already JSON. With a roster, every
    /// task's agent must be one of its lanes.
    pub fn from_json(doc: &J, roster: Option<&Roster>, mode: ParseMode) -> Result<Plan, PlanError> {
        let J::Object(m) = doc else {
            return Err(PlanError::Shape(format!(
                "a plan must be a JSON object with a \"tasks\" list, found {}",
                type_name(doc)
            )));
        };
        let tasks = match m.get("tasks") {
            Some(J::Array(items)) => items,
            Some(other) => {
                return Err(PlanError::Shape(format!(
                    "\"tasks\" must be a list, found {}",
                    type_name(other)
                )));
            }
            None => {
                return Err(PlanError::Shape(
                    "a plan must have a \"tasks\" list".to_string(),
                ));
            }
        };
        let tasks = tasks
            .iter()
            .enumerate()
            .map(|(i, t)| parse_task(i, t, mode))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(roster) = roster {
            for t in &tasks {
                if roster.get(&t.agent).is_none() {
                    let mut known: Vec<String> =
                        roster.names().into_iter().map(str::to_string).collect();
                    known.sort();
                    return Err(PlanError::UnknownAgent {
                        task: t.id.clone(),
                        agent: t.agent.clone(),
                        known,
                    });
                }
            }
        }
        Ok(Plan { tasks })
    }

    /// Reads a plan file: the whole text must be one JSON document. Strict mode.
    pub fn from_json_text(text: &str, roster: Option<&Roster>) -> Result<Plan, PlanError> {
        let doc: J = serde_json::from_str(text).map_err(|e| PlanError::NotJson {
            line: e.line(),
            column: e.column(),
            message: json_error_message(&e),
        })?;
        Plan::from_json(&doc, roster, ParseMode::Strict)
    }

    /// Reads a planner model's output the way Forum's `ask_json` does: the text from the first
    /// `{` to the last `}` is parsed as JSON.
    pub fn from_model_output(
        output: &str,
        roster: Option<&Roster>,
        mode: ParseMode,
    ) -> Result<Plan, PlanError> {
        let span = extract_json_object(output)?;
        let doc: J = serde_json::from_str(span).map_err(|e| PlanError::NotJson {
            line: e.line(),
            column: e.column(),
            message: json_error_message(&e),
        })?;
        Plan::from_json(&doc, roster, mode)
    }

    /// Typed edges: for each task in plan order, for each dependency in listed order
    /// (duplicates kept).
    pub fn edges(&self) -> Vec<Edge> {
        self.tasks
            .iter()
            .flat_map(|t| {
                t.depends_on.iter().map(|d| Edge {
                    from: d.clone(),
                    to: t.id.clone(),
                    kind: t.edge_type(d),
                })
            })
            .collect()
    }

    /// Ids used by more than one task, sorted.
    pub fn duplicate_ids(&self) -> Vec<String> {
        let mut seen = BTreeSet::new();
        let mut dups = BTreeSet::new();
        for t in &self.tasks {
            if !seen.insert(t.id.as_str()) {
                dups.insert(t.id.clone());
            }
        }
        dups.into_iter().collect()
    }

    /// Forum's Kahn layering (`Plan.schedule`, forum-spec §8.3), exactly: unknown
    /// dependencies are reported first (the first task in plan order that has any), then
    /// cycles. A repeated id keeps its first position and takes the later task's
    /// dependencies, as Forum does.
    pub fn schedule(&self) -> Result<Vec<Vec<String>>, PlanError> {
        // remaining: id → deps, first-insertion order, later duplicates overwrite.
        let mut order: Vec<&str> = Vec::new();
        let mut deps: HashMap<&str, BTreeSet<&str>> = HashMap::new();
        for t in &self.tasks {
            let set: BTreeSet<&str> = t.depends_on.iter().map(String::as_str).collect();
            if deps.insert(t.id.as_str(), set).is_none() {
                order.push(t.id.as_str());
            }
        }
        for id in &order {
            let unknown: Vec<String> = deps[id]
                .iter()
                .filter(|d| !deps.contains_key(*d))
                .map(|d| d.to_string())
                .collect();
            if !unknown.is_empty() {
                return Err(PlanError::UnknownDeps {
                    task: id.to_string(),
                    unknown,
                });
            }
        }
        let mut pending: HashMap<&str, usize> = HashMap::new();
        let mut dependents: HashMap<&str, Vec<&str>> = HashMap::new();
        for id in &order {
            pending.insert(id, deps[id].len());
            for d in &deps[id] {
                dependents.entry(d).or_default().push(id);
            }
        }
        let mut ready: Vec<&str> = order
            .iter()
            .copied()
            .filter(|id| pending[id] == 0)
            .collect();
        let mut waves = Vec::new();
        let mut scheduled = 0;
        while scheduled < order.len() {
            if ready.is_empty() {
                let mut left: Vec<String> = pending
                    .iter()
                    .filter(|(_, n)| **n > 0)
                    .map(|(id, _)| id.to_string())
                    .collect();
                left.sort();
                return Err(PlanError::Cycle(left));
            }
            ready.sort_unstable();
            let mut next = Vec::new();
            for id in &ready {
                for dep in dependents.get(id).map(Vec::as_slice).unwrap_or_default() {
                    let n = pending.get_mut(dep).expect("dependent is a task");
                    *n -= 1;
                    if *n == 0 {
                        next.push(*dep);
                    }
                }
            }
            scheduled += ready.len();
            waves.push(ready.iter().map(|s| s.to_string()).collect());
            ready = next;
        }
        Ok(waves)
    }

    /// Strict compilation: duplicate ids are refused up front, then [`Plan::schedule`] runs
    /// (unknown dependencies, then cycles).
    pub fn compile(&self) -> Result<CompiledPlan, PlanError> {
        let dups = self.duplicate_ids();
        if !dups.is_empty() {
            return Err(PlanError::DuplicateIds(dups));
        }
        let waves = self.schedule()?;
        Ok(CompiledPlan {
            tasks: self.tasks.clone(),
            waves,
            edges: self.edges(),
        })
    }
}

/// serde_json's message without its trailing " at line X column Y".
fn json_error_message(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(p) => s[..p].to_string(),
        None => s,
    }
}

/// Forum's `ask_json` cut: the text from the first `{` to the last `}` inclusive.
pub fn extract_json_object(output: &str) -> Result<&str, PlanError> {
    match (output.find('{'), output.rfind('}')) {
        (Some(a), Some(b)) if a < b => Ok(&output[a..=b]),
        _ => Err(PlanError::NoJsonObject),
    }
}

/// One upstream task's result, as dispatch sees it.
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task(id: &str, deps: &[&str]) -> Task {
        let mut t = Task::new(id, "a", id);
        t.depends_on = deps.iter().map(|s| s.to_string()).collect();
        t
    }

    fn plan(tasks: Vec<Task>) -> Plan {
        Plan { tasks }
    }

    fn waves(p: &Plan) -> Vec<Vec<String>> {
        p.schedule().unwrap()
    }

    #[test]
    fn kahn_layers_sort_each_wave_in_code_point_order() {
        let p = plan(vec![
            task("root", &[]),
            task("é", &["root"]),
            task("b", &["root"]),
            task("B", &["root"]),
            task("10", &["root"]),
            task("9", &["root"]),
            task("end", &["b", "é"]),
        ]);
        assert_eq!(
            waves(&p),
            vec![vec!["root"], vec!["10", "9", "B", "b", "é"], vec!["end"]]
        );
    }

    #[test]
    fn empty_plan_has_no_waves() {
        assert_eq!(waves(&Plan::default()), Vec::<Vec<String>>::new());
        let c = Plan::default().compile().unwrap();
        assert_eq!(c.payload().canonical(), r#"{"edges":[],"waves":[]}"#);
    }

    #[test]
    fn unknown_dependencies_are_reported_before_cycles() {
        let p = plan(vec![task("x", &["y"]), task("y", &["x", "zz", "a'b"])]);
        let e = p.schedule().unwrap_err();
        assert_eq!(e.kind(), "ValueError");
        assert_eq!(
            e.to_string(),
            "task 'y' depends on unknown task(s): [\"a'b\", 'zz']"
        );
    }

    #[test]
    fn cycles_name_every_blocked_task() {
        let p = plan(vec![
            task("a", &[]),
            task("b", &["a", "d"]),
            task("c", &["b"]),
            task("d", &["c"]),
            task("tail", &["d"]),
        ]);
        let e = p.schedule().unwrap_err();
        assert_eq!(e.kind(), "CycleError");
        assert_eq!(
            e.to_string(),
            "dependency cycle among: ['b', 'c', 'd', 'tail']"
        );
        let e = plan(vec![task("s", &["s"])]).schedule().unwrap_err();
        assert_eq!(e, PlanError::Cycle(vec!["s".into()]));
    }

    #[test]
    fn duplicate_ids_forum_overwrites_strict_refuses() {
        let p = plan(vec![task("a", &[]), task("b", &["a"]), task("b", &[])]);
        assert_eq!(waves(&p), vec![vec!["a", "b"]]);
        let e = p.compile().unwrap_err();
        assert_eq!(e.to_string(), "duplicate task id(s): ['b']");
    }

    #[test]
    fn edges_keep_duplicates_and_order_wins_for_a_dep_listed_both_ways() {
        let doc = json!({"id": "t", "agent": "a", "instruction": "i",
            "depends_on": ["u", "u", {"id": "v", "type": "order"}, {"id": "u", "type": "order"}]});
        let t = parse_task(0, &doc, ParseMode::Forum).unwrap();
        assert_eq!(t.depends_on, ["u", "u", "v", "u"]);
        assert_eq!(t.data_deps(), Vec::<&str>::new());
        let p = plan(vec![t, task("u", &[]), task("v", &[])]);
        let kinds: Vec<_> = p.edges().iter().map(|e| (e.from.clone(), e.kind)).collect();
        assert_eq!(kinds.len(), 4);
        assert!(kinds.iter().all(|(_, k)| *k == EdgeType::Order));
    }

    #[test]
    fn edge_types_forum_vs_strict() {
        let deps = json!([{"id": "a", "type": "weird"}, {"id": 7}, {"id": "b", "type": "data"}]);
        let (ids, order) = parse_deps(Some(&deps), "t", ParseMode::Forum).unwrap();
        assert_eq!(ids, ["a", "7", "b"]);
        assert!(order.is_empty());
        let e = parse_deps(Some(&deps), "t", ParseMode::Strict).unwrap_err();
        assert_eq!(
            e.to_string(),
            "task 't': dependency 'a' has unknown edge type 'weird'; use \"data\" or \"order\""
        );
        let e = parse_deps(Some(&json!([{"type": "order"}])), "t", ParseMode::Forum).unwrap_err();
        assert!(e.to_string().contains("without \"id\""), "{e}");
        let e = parse_deps(Some(&json!("a")), "t", ParseMode::Forum).unwrap_err();
        assert!(e.to_string().contains("must be a list"), "{e}");
        let e = parse_deps(Some(&json!([1])), "t", ParseMode::Forum).unwrap_err();
        assert!(e.to_string().contains("item 1"), "{e}");
    }

    #[test]
    fn done_when_rules() {
        let d = |v: J| parse_done_when(Some(&v), "t");
        assert_eq!(d(json!("")).unwrap(), Vec::<String>::new());
        assert_eq!(d(json!("  ok \u{1f}")).unwrap(), ["ok"]);
        assert_eq!(
            d(json!(["a", " ", 3, 1.5, true, null])).unwrap(),
            ["a", "3", "1.5", "True", "None"]
        );
        assert_eq!(parse_done_when(None, "t").unwrap(), Vec::<String>::new());
        assert!(d(json!(5)).is_err());
        assert!(d(json!({"a": 1})).is_err());
        assert!(d(json!([["nested"]])).is_err());
    }

    #[test]
    fn contract_instruction_appends_done_criteria() {
        let mut t = Task::new("t", "a", "do it");
        assert_eq!(t.contract_instruction(), "do it");
        t.done_when = vec!["one".into(), "two".into()];
        assert_eq!(
            t.contract_instruction(),
            "do it\n\nDone criteria:\n- one\n- two"
        );
    }

    #[test]
    fn strict_task_parsing() {
        let e = parse_task(2, &json!({"agent": "a"}), ParseMode::Strict).unwrap_err();
        assert_eq!(e.to_string(), "task #3: has no \"id\"");
        let e = parse_task(
            0,
            &json!({"id": "", "agent": "a", "instruction": "i"}),
            ParseMode::Strict,
        )
        .unwrap_err();
        assert!(e.to_string().contains("empty \"id\""));
        let e = parse_task(
            0,
            &json!({"id": "t", "agent": "a", "instruction": "i", "deps": []}),
            ParseMode::Strict,
        )
        .unwrap_err();
        assert!(e.to_string().contains("unknown field \"deps\""), "{e}");
        let e = parse_task(
            0,
            &json!({"id": "t", "instruction": "i"}),
            ParseMode::Strict,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "task 't': has no \"agent\"");
        let e = parse_task(0, &json!(["t"]), ParseMode::Strict).unwrap_err();
        assert_eq!(e.to_string(), "task #1: must be an object, found a list");
        // Forum stringifies ids and instructions.
        let t = parse_task(
            0,
            &json!({"id": 3, "agent": "a", "instruction": 2.0, "x": 1}),
            ParseMode::Forum,
        )
        .unwrap();
        assert_eq!((t.id.as_str(), t.instruction.as_str()), ("3", "2.0"));
    }

    #[test]
    fn plan_documents() {
        let roster = crate::roster::Roster::default_roster();
        let ok = r#"{"tasks": [
            {"id": "T1", "agent": "backend", "instruction": "add it"},
            {"id": "T2", "agent": "tests", "instruction": "test it", "depends_on": ["T1"]}]}"#;
        let p = Plan::from_json_text(ok, Some(&roster)).unwrap();
        assert_eq!(p.compile().unwrap().waves, vec![vec!["T1"], vec!["T2"]]);
        let e = Plan::from_json_text("{\"tasks\": [}", None).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("not valid JSON at line 1, column"),
            "{e}"
        );
        assert!(!e.to_string().contains(" at line 1 column"), "{e}");
        let e = Plan::from_json_text("[]", None).unwrap_err();
        assert!(e.to_string().contains("JSON object with a \"tasks\" list"));
        let e = Plan::from_json_text("{}", None).unwrap_err();
        assert_eq!(e.to_string(), "a plan must have a \"tasks\" list");
        let bad_agent = ok.replace("\"tests\"", "\"poet\"");
        let e = Plan::from_json_text(&bad_agent, Some(&roster)).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("task 'T2': agent 'poet' is not in the roster (known: "),
            "{e}"
        );
        // Model output: prose around the object is cut away.
        let out = format!("Here is the plan:\n{ok}\nThanks.");
        assert!(Plan::from_model_output(&out, Some(&roster), ParseMode::Forum).is_ok());
        assert_eq!(
            Plan::from_model_output("} nothing {", None, ParseMode::Forum).unwrap_err(),
            PlanError::NoJsonObject
        );
    }

    #[test]
    fn python_repr_quoting() {
        assert_eq!(py_repr("T1"), "'T1'");
        assert_eq!(py_repr("it's"), "\"it's\"");
        assert_eq!(py_repr("'\""), "'\\'\"'");
        assert_eq!(py_repr("a\\b\n\u{7}"), "'a\\\\b\\n\\x07'");
        assert_eq!(py_repr("日本"), "'日本'");
        assert_eq!(py_list(&["b", "a"]), "['b', 'a']");
        assert_eq!(py_list::<&str>(&[]), "[]");
    }

    #[test]
    fn upstream_injection_skips_failed_missing_order_and_repeats() {
        let mut t = Task::new("T9", "a", "go");
        t.depends_on = vec!["A".into(), "A".into(), "B".into(), "C".into(), "D".into()];
        t.order_deps.insert("D".into());
        let mut r = BTreeMap::new();
        r.insert(
            "A".into(),
            UpstreamResult {
                output: "ábcdé".into(),
                ok: true,
            },
        );
        r.insert(
            "B".into(),
            UpstreamResult {
                output: "bad".into(),
                ok: false,
            },
        );
        r.insert(
            "D".into(),
            UpstreamResult {
                output: "order only".into(),
                ok: true,
            },
        );
        let i = augment_with_upstream(&t, &r, 3);
        assert_eq!(i.data_from, ["A"]);
        assert_eq!(
            i.instruction,
            "go\n\nUpstream results you build on:\n- A: ábc\n... [truncated for prompt efficiency, 2 chars omitted; full output is witnessed]"
        );
        let none = augment_with_upstream(&Task::new("x", "a", "go"), &r, 3);
        assert_eq!(none.instruction, "go");
        assert!(none.data_from.is_empty());
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        /// A random DAG: task i may depend only on tasks with a smaller index, then the list is
        /// shuffled by `perm`.
        fn dag() -> impl Strategy<Value = Vec<Task>> {
            (1usize..24)
                .prop_flat_map(|n| {
                    (
                        Just(n),
                        proptest::collection::vec(
                            proptest::collection::vec(any::<prop::sample::Index>(), 0..4),
                            n,
                        ),
                        proptest::collection::vec(any::<bool>(), n),
                    )
                })
                .prop_map(|(n, picks, order)| {
                    (0..n)
                        .map(|i| {
                            let id = format!("t{i}");
                            let mut t = Task::new(id, "a", "x");
                            if i > 0 {
                                for p in &picks[i] {
                                    let d = format!("t{}", p.index(i));
                                    if order[i] {
                                        t.order_deps.insert(d.clone());
                                    }
                                    t.depends_on.push(d);
                                }
                            }
                            t
                        })
                        .collect()
                })
        }

        fn permute<T: Clone>(items: &[T], seed: u64) -> Vec<T> {
            let mut v = items.to_vec();
            let mut s = seed;
            for i in (1..v.len()).rev() {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                v.swap(i, (s >> 33) as usize % (i + 1));
            }
            v
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]
            #[test]
            fn waves_respect_edges_and_hold_each_task_once(tasks in dag(), seed in any::<u64>()) {
                let p = Plan { tasks: permute(&tasks, seed) };
                let c = p.compile().unwrap();
                let mut wave_of = HashMap::new();
                for (i, w) in c.waves.iter().enumerate() {
                    prop_assert!(!w.is_empty());
                    prop_assert!(w.windows(2).all(|x| x[0] < x[1]), "wave sorted");
                    for id in w {
                        prop_assert!(wave_of.insert(id.clone(), i).is_none(), "{} twice", id);
                    }
                }
                prop_assert_eq!(wave_of.len(), tasks.len());
                for e in &c.edges {
                    prop_assert!(wave_of[&e.from] < wave_of[&e.to], "{:?}", e);
                }
                // Each task sits in the earliest wave its dependencies allow.
                for t in &p.tasks {
                    let want = t.depends_on.iter().map(|d| wave_of[d] + 1).max().unwrap_or(0);
                    prop_assert_eq!(wave_of[&t.id], want);
                }
            }

            #[test]
            fn waves_do_not_depend_on_listing_order(tasks in dag(), s1 in any::<u64>(), s2 in any::<u64>()) {
                let a = Plan { tasks: permute(&tasks, s1) }.compile().unwrap();
                let b = Plan { tasks: permute(&tasks, s2) }.compile().unwrap();
                prop_assert_eq!(a.waves, b.waves);
            }

            #[test]
            fn closing_a_loop_is_always_a_cycle(tasks in dag(), seed in any::<u64>(), pick in any::<prop::sample::Index>()) {
                // Make some task depend on the last task, which (directly or not) may or may not
                // depend on it; either the plan still layers or the cycle names that task.
                let mut tasks = tasks;
                let n = tasks.len();
                let last = tasks[n - 1].id.clone();
                let i = pick.index(n);
                tasks[i].depends_on.push(last.clone());
                let victim = tasks[i].id.clone();
                let p = Plan { tasks: permute(&tasks, seed) };
                match p.compile() {
                    Ok(c) => prop_assert!(c.waves.iter().flatten().any(|id| *id == victim)),
                    Err(PlanError::Cycle(ids)) => {
                        prop_assert!(ids.contains(&victim));
                        prop_assert!(ids.contains(&last));
                    }
                    Err(other) => prop_assert!(false, "unexpected {other}"),
                }
            }

            #[test]
            fn roster_order_does_not_change_a_plan(tasks in dag(), seed in any::<u64>()) {
                let roster = crate::roster::Roster::default_roster();
                let names = roster.names();
                let doc = J::Object(serde_json::Map::from_iter([(
                    "tasks".to_string(),
                    J::Array(
                        tasks
                            .iter()
                            .enumerate()
                            .map(|(i, t)| {
                                serde_json::json!({
                                    "id": t.id,
                                    "agent": names[i % names.len()],
                                    "instruction": t.instruction,
                                    "depends_on": t.depends_on,
                                })
                            })
                            .collect(),
                    ),
                )]));
                let shuffled =
                    crate::roster::Roster::new(permute(roster.agents(), seed)).unwrap();
                let a = Plan::from_json(&doc, Some(&roster), ParseMode::Strict).unwrap();
                let b = Plan::from_json(&doc, Some(&shuffled), ParseMode::Strict).unwrap();
                prop_assert_eq!(a.compile().unwrap(), b.compile().unwrap());
            }

            #[test]
            fn plan_parser_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
                let text = String::from_utf8_lossy(&bytes);
                let _ = Plan::from_json_text(&text, None).map(|p| p.compile());
                let _ = Plan::from_model_output(&text, None, ParseMode::Forum).map(|p| p.compile());
            }

            #[test]
            fn plan_parser_never_panics_on_json_shapes(doc in json_strategy()) {
                let text = serde_json::to_string(&serde_json::json!({"tasks": doc})).unwrap();
                let roster = crate::roster::Roster::default_roster();
                for mode in [ParseMode::Forum, ParseMode::Strict] {
                    if let Ok(p) = Plan::from_model_output(&text, Some(&roster), mode) {
                        let _ = p.schedule();
                        let _ = p.compile().map(|c| c.payload().canonical());
                    }
                }
                if let Err(e) = Plan::from_json_text(&text, None) {
                    prop_assert!(!e.to_string().contains('\n'));
                }
            }
        }

        fn json_strategy() -> impl Strategy<Value = J> {
            let leaf = prop_oneof![
                Just(J::Null),
                any::<bool>().prop_map(J::Bool),
                any::<i64>().prop_map(J::from),
                prop_oneof![
                    Just("T1"),
                    Just("T2"),
                    Just("backend"),
                    Just("order"),
                    Just("data"),
                    Just(""),
                    Just("é")
                ]
                .prop_map(|s| J::String(s.to_string())),
            ];
            leaf.prop_recursive(4, 48, 6, |inner| {
                prop_oneof![
                    proptest::collection::vec(inner.clone(), 0..5).prop_map(J::Array),
                    proptest::collection::vec(
                        (
                            prop_oneof![
                                Just("id"),
                                Just("agent"),
                                Just("instruction"),
                                Just("depends_on"),
                                Just("done_when"),
                                Just("type"),
                                Just("x")
                            ],
                            inner
                        ),
                        0..6
                    )
                    .prop_map(|kv| J::Object(
                        kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
                    )),
                ]
            })
        }
    }
}
