//! The control loop behind `git forum submit`: route, plan, parallel waves, validation,
//! escalation and synthesis, every step witnessed in the ledger.
//!
//! The loop talks to the world through four seams, so tests drive it exactly: a
//! [`Storage`] (the git ledger, or memory), the [`Seats`] (which executor plans, validates and
//! synthesizes, and which runs each task), a [`Clock`] (timestamps and the seconds budget) and
//! a [`Progress`] sink for a person watching.
//!
//! # What a run writes
//!
//! Entry kinds, actors, payload fields and causal parents follow Forum's (forum-features §4),
//! so Forum's readers and ours agree on a run. Where this loop knows more, it adds fields
//! Forum's readers ignore:
//!
//! * `plan` carries `tasks` (id, agent, instruction, depends_on, order_deps, done_when) so a
//!   resumed run continues the same plan instead of asking the planner again;
//! * `result` carries `error` (a stable code: `timeout`, `exit`, `not_utf8`, `http_status`, ...)
//!   when the executor failed;
//! * `verdict` carries `decision` (`pass`, `block`, `escalate`, `fail`, `undetermined`) and
//!   the `model` of the validator;
//! * kinds of our own: `run_stopped` (planning or synthesis failed; the reason is readable),
//!   `degraded` (no task of a wave passed validation).
//!
//! Gates are keyed by the run's own first plan entry, so a decision never leaks into another
//! run (Forum keys them by the first plan of the whole ledger, forum-spec §23.1).

pub mod status;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use serde_json::{Value as J, json};

use crate::context::{self, ContextBudget, Meter, Source};
use crate::exec::{Call, ExecError, Executor, OutputSchema, Reply, Seats};
use crate::ledger::canonical::Value;
use crate::ledger::merkle::Accumulator;
use crate::ledger::{Entry, NewEntry, Storage, StorageError};
use crate::plan::{
    self, CompiledPlan, ParseMode, Plan, Task, UpstreamResult, augment_with_upstream,
    augment_with_upstream_budgeted,
};
use crate::policy::Policy;
use crate::roster::Roster;
use crate::route::{self, RouteFrame};

/// Upstream output longer than this many code points is cut before it reaches a prompt
/// (without a context budget), as in Forum.
pub const MAX_UPSTREAM_CHARS: usize = 8192;

/// The most tasks a planner is asked for unless the policy's `max_tasks` says otherwise.
pub const DEFAULT_PLAN_TASKS: usize = 4;

/// The answer witnessed when the budget stops a run.
pub const BUDGET_STOP_ANSWER: &str =
    "The run stopped because its budget ran out before it finished.";

/// Timestamps and elapsed seconds.
pub trait Clock: Send + Sync {
    /// Seconds since 1970, for entry timestamps.
    fn now(&self) -> f64;
    /// Seconds since the run started, for `--max-seconds` (monotonic).
    fn elapsed(&self) -> f64;
}

/// The system clock.
pub struct SystemClock {
    start: Instant,
}

impl SystemClock {
    pub fn new() -> SystemClock {
        SystemClock {
            start: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> SystemClock {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> f64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    }

    fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }
}

/// A clock for reproducible runs: every timestamp read advances by `step` from `start`;
/// elapsed time is whatever the test sets.
pub struct StepClock {
    next: Mutex<f64>,
    step: f64,
    elapsed: Mutex<f64>,
}

impl StepClock {
    pub fn new(start: f64, step: f64) -> StepClock {
        StepClock {
            next: Mutex::new(start),
            step,
            elapsed: Mutex::new(0.0),
        }
    }

    /// Sets what [`Clock::elapsed`] answers.
    pub fn set_elapsed(&self, seconds: f64) {
        *lock(&self.elapsed) = seconds;
    }
}

impl Clock for StepClock {
    fn now(&self) -> f64 {
        let mut n = lock(&self.next);
        let t = *n;
        *n += self.step;
        t
    }

    fn elapsed(&self) -> f64 {
        *lock(&self.elapsed)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Human approval before waves.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GatePolicy {
    /// Waves (0-based) that wait for a decision before they run.
    pub waves: BTreeSet<usize>,
    /// The question shown to the approver.
    pub question: Option<String>,
    /// Seconds a pending gate waits before `on_expiry` applies (checked on resume).
    pub deadline_seconds: Option<f64>,
    /// What an expired gate becomes: `approve` or `reject` (default).
    pub on_expiry: Option<String>,
}

/// How one run behaves.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Stop once this many model calls have started.
    pub max_model_calls: Option<u64>,
    /// Stop once this many seconds have passed.
    pub max_seconds: Option<f64>,
    /// Token limits on what reaches prompts.
    pub context_budget: Option<ContextBudget>,
    /// What may run, and how many tasks at once.
    pub policy: Policy,
    /// Witness a checkpoint (and sync) after each wave.
    pub checkpoint_each_wave: bool,
    /// The delivery profile to check the answer against (default: the route frame's).
    pub delivery_profile: Option<String>,
    /// Human approval before waves.
    pub gates: GatePolicy,
    /// A cap on the tokens each model call may generate (where the executor has one); `None`
    /// keeps each role's default.
    pub max_output_tokens: Option<u32>,
}

/// What a person watching is told. Sent from several threads.
#[derive(Debug, Clone)]
pub enum Event {
    Planning,
    Planned {
        tasks: usize,
        waves: usize,
    },
    Wave {
        index: usize,
        of: usize,
        tasks: Vec<String>,
    },
    TaskStarted {
        id: String,
        agent: String,
        model: String,
    },
    TaskFinished {
        id: String,
        ok: bool,
        model: String,
    },
    Validating {
        id: String,
    },
    Verdict {
        id: String,
        decision: String,
    },
    Escalating {
        id: String,
        to: String,
    },
    Synthesizing,
    Calls {
        spent: u64,
        max: Option<u64>,
    },
    Paused {
        wave: usize,
    },
    Stopped {
        reason: String,
    },
}

/// Where [`Event`]s go.
pub trait Progress: Send + Sync {
    fn event(&self, event: &Event);
}

/// Says nothing.
pub struct Silent;

impl Progress for Silent {
    fn event(&self, _: &Event) {}
}

/// How a run ended (this time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// An answer was synthesized and checked.
    Answered,
    /// The budget ran out; `git forum resume` continues with a fresh budget.
    StoppedOnBudget,
    /// A gate waits for a decision (`git forum gate`), then `git forum resume`.
    Paused { wave: usize },
    /// A gate was rejected; the run is over.
    Rejected { wave: usize },
}

impl Status {
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Answered => "answered",
            Status::StoppedOnBudget => "stopped_on_budget",
            Status::Paused { .. } => "paused",
            Status::Rejected { .. } => "rejected",
        }
    }
}

/// The result of one `submit` or `resume`.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub status: Status,
    /// The seq of the run's `request` entry (the run's id).
    pub request_seq: u64,
    /// The answer, when there is one.
    pub answer: Option<String>,
    pub answer_seq: Option<u64>,
    /// Every entry this invocation wrote, in seq order.
    pub written: Vec<u64>,
    /// Model calls started, per model id.
    pub calls: BTreeMap<String, u64>,
    /// Final verdict decisions, counted.
    pub verdicts: BTreeMap<String, u64>,
    /// The route frame payload.
    pub route_frame: Value,
}

impl Outcome {
    /// Every model call started.
    pub fn total_calls(&self) -> u64 {
        self.calls.values().sum()
    }
}

/// Why a run could not go on. Whatever was witnessed before stays in the ledger and verifies.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The request is empty or unusable; nothing was written.
    #[error("{0}")]
    Request(String),
    /// The ledger refused a write or a read.
    #[error("ledger: {0}")]
    Ledger(#[from] StorageError),
    /// The planner gave no usable plan (witnessed as `run_stopped`).
    #[error("planning failed: {0}")]
    Plan(String),
    /// Synthesis failed (witnessed as `run_stopped`).
    #[error("synthesis failed: {0}")]
    Synthesis(String),
    /// Nothing to resume, or the run cannot be resumed.
    #[error("{0}")]
    Resume(String),
}

// ---- schemas ----

/// The schema a planner's answer must follow. Task `i` has the fixed id `T{i+1}` and may only
/// depend on earlier ids, so a model held to this schema (constrained decoding) cannot write
/// an unknown dependency, a duplicate id or a cycle; agents must be roster lanes.
pub fn plan_schema(roster: &Roster, max_tasks: usize) -> OutputSchema {
    let agents: Vec<&str> = roster.agents().iter().map(|a| a.name.as_str()).collect();
    let task = |i: usize| {
        let earlier: Vec<String> = (1..=i).map(|j| format!("T{j}")).collect();
        let depends_on = if earlier.is_empty() {
            json!({"type": "array", "maxItems": 0})
        } else {
            json!({"type": "array", "items": {"type": "string", "enum": earlier}, "maxItems": i})
        };
        json!({
            "type": "object",
            "properties": {
                "id": {"const": format!("T{}", i + 1)},
                "agent": {"enum": agents},
                "instruction": {"type": "string", "minLength": 1, "maxLength": 400},
                "depends_on": depends_on,
                "done_when": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1, "maxLength": 200},
                    "maxItems": 3
                }
            },
            "required": ["id", "agent", "instruction", "depends_on", "done_when"],
            "additionalProperties": false
        })
    };
    OutputSchema {
        name: "plan".into(),
        schema: json!({
            "type": "object",
            "properties": {
                "tasks": {
                    "type": "array",
                    "prefixItems": (0..max_tasks).map(task).collect::<Vec<_>>(),
                    "minItems": 1,
                    "maxItems": max_tasks
                }
            },
            "required": ["tasks"],
            "additionalProperties": false
        }),
    }
}

/// The schema a validator's answer must follow.
pub fn verdict_schema() -> OutputSchema {
    OutputSchema {
        name: "verdict".into(),
        schema: json!({
            "type": "object",
            "properties": {
                "decision": {"type": "string", "enum": ["pass", "block", "escalate"]},
                "score": {"type": "number"},
                "reason": {"type": "string"}
            },
            "required": ["decision", "score", "reason"],
            "additionalProperties": false
        }),
    }
}

/// A validator's ruling on one result.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// `pass`, `block`, `escalate`, `fail` (the task itself failed) or `undetermined` (the
    /// validator erred or answered nonsense).
    pub decision: String,
    pub score: f64,
    pub reason: String,
    /// The validator's model, when one was asked.
    pub model: Option<String>,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        self.decision == "pass"
    }

    /// Whether the escalation ladder should try a stronger executor.
    pub fn climbs(&self) -> bool {
        matches!(self.decision.as_str(), "escalate" | "fail")
    }

    fn payload(&self, id: &str) -> J {
        let mut p = json!({
            "id": id,
            "ok": self.passed(),
            "score": self.score,
            "reason": self.reason,
            "decision": self.decision,
        });
        if let Some(m) = &self.model {
            p["model"] = json!(m);
        }
        p
    }
}

/// Reads a validator's answer: `decision` (pass, block, escalate) or Forum's `ok`; `score`
/// (a number, default 0.0); `reason`. Anything else is `None` (undetermined).
pub fn parse_verdict(text: &str) -> Option<(String, f64, String)> {
    let span = plan::extract_json_object(text).ok()?;
    let doc: J = serde_json::from_str(span).ok()?;
    let obj = doc.as_object()?;
    let decision = match obj.get("decision").and_then(J::as_str) {
        Some(d) => {
            let d = d.trim().to_lowercase();
            match d.as_str() {
                "pass" | "block" | "escalate" => d,
                _ => return None,
            }
        }
        None => match obj.get("ok")? {
            J::Bool(true) => "pass".into(),
            J::Bool(false) => "escalate".into(),
            J::String(s) => {
                let s = s.trim().to_lowercase();
                if matches!(s.as_str(), "false" | "0" | "no" | "") {
                    "escalate".into()
                } else {
                    "pass".into()
                }
            }
            J::Number(n) => {
                if n.as_f64() == Some(0.0) {
                    "escalate".into()
                } else {
                    "pass".into()
                }
            }
            _ => return None,
        },
    };
    let score = match obj.get("score") {
        None | Some(J::Null) => 0.0,
        Some(J::Number(n)) => n.as_f64().filter(|f| f.is_finite())?,
        Some(_) => return None,
    };
    let reason = match obj.get("reason") {
        Some(J::String(s)) => s.clone(),
        None | Some(J::Null) => String::new(),
        Some(other) => other.to_string(),
    };
    Some((decision, score, reason))
}

// ---- prompts (our own words) ----

fn planner_prompt(request: &str, roster: &Roster, max_tasks: usize) -> String {
    let mut lanes = String::new();
    for a in roster.agents() {
        lanes.push_str(&format!("- {}: {}\n", a.name, a.category));
    }
    format!(
        "Break this request into at most {max_tasks} tasks for the lanes below.\n\n\
         Request: {request}\n\n\
         Lanes:\n{lanes}\n\
         Number the tasks T1, T2, ... in order. Give each one lane from the list, a concrete \
         instruction, the ids of earlier tasks whose output it needs (depends_on; [] when \
         none) and done_when: the checks that show it is finished."
    )
}

fn planner_retry_prompt(first: &str, error: &str) -> String {
    format!("{first}\n\nYour previous plan could not be used: {error}\nWrite a corrected plan.")
}

fn worker_system(agent: &str, category: Option<&str>) -> String {
    match category {
        Some(c) => {
            format!("You work the {agent} lane ({c}). Do the task and report the result plainly.")
        }
        None => format!("You work the {agent} lane. Do the task and report the result plainly."),
    }
}

fn validator_prompt(task: &Task, output: &str) -> String {
    let criteria = if task.done_when.is_empty() {
        "(none given: judge whether the output does what the instruction asks)".to_string()
    } else {
        task.done_when
            .iter()
            .map(|c| format!("- {c}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    format!(
        "Judge one task's output.\n\nTask {}: {}\nDone criteria:\n{criteria}\n\nOutput:\n{output}\n\n\
         decision is pass when the output meets the criteria, escalate when a stronger model \
         should redo it, block when it is harmful or must not be used at all. score is between \
         0 and 1. reason says why in one sentence.",
        task.id, task.instruction
    )
}

// ---- the run ----

/// The pieces a run needs.
pub struct Env<'a> {
    pub roster: &'a Roster,
    pub seats: &'a dyn Seats,
    pub clock: &'a dyn Clock,
    pub progress: &'a dyn Progress,
}

struct Run<'a, 's> {
    store: Mutex<&'s mut (dyn Storage + Send)>,
    env: &'a Env<'a>,
    opts: &'a Options,
    calls: AtomicU64,
    per_model: Mutex<BTreeMap<String, u64>>,
    written: Mutex<Vec<u64>>,
    started: f64,
    meter: Mutex<Meter>,
}

/// A task's latest result.
#[derive(Debug, Clone)]
struct Done {
    output: String,
    ok: bool,
    seq: u64,
}

impl<'a, 's> Run<'a, 's> {
    fn new(store: &'s mut (dyn Storage + Send), env: &'a Env<'a>, opts: &'a Options) -> Self {
        Run {
            store: Mutex::new(store),
            env,
            opts,
            calls: AtomicU64::new(0),
            per_model: Mutex::new(BTreeMap::new()),
            written: Mutex::new(Vec::new()),
            started: env.clock.elapsed(),
            meter: Mutex::new(Meter::default()),
        }
    }

    fn put(
        &self,
        actor: &str,
        kind: &str,
        parent: Option<u64>,
        payload: J,
    ) -> Result<Entry, RunError> {
        let mut store = lock(&self.store);
        let new = NewEntry {
            actor: actor.to_string(),
            kind: kind.to_string(),
            causal_parent: parent.map(|p| p as i64),
            payload: Value::from_serde(&payload),
            ts: self.env.clock.now(),
        };
        let e = store.append(new)?;
        lock(&self.written).push(e.seq);
        Ok(e)
    }

    fn put_value(
        &self,
        actor: &str,
        kind: &str,
        parent: Option<u64>,
        payload: Value,
    ) -> Result<Entry, RunError> {
        let mut store = lock(&self.store);
        let new = NewEntry {
            actor: actor.to_string(),
            kind: kind.to_string(),
            causal_parent: parent.map(|p| p as i64),
            payload,
            ts: self.env.clock.now(),
        };
        let e = store.append(new)?;
        lock(&self.written).push(e.seq);
        Ok(e)
    }

    fn over_budget(&self) -> bool {
        if let Some(max) = self.opts.max_model_calls
            && self.calls.load(Ordering::SeqCst) >= max
        {
            return true;
        }
        if let Some(max) = self.opts.max_seconds
            && self.env.clock.elapsed() - self.started >= max
        {
            return true;
        }
        false
    }

    /// One counted model call.
    fn ask(&self, exec: &dyn Executor, call: &Call<'_>) -> Result<Reply, ExecError> {
        let mut call = *call;
        if let Some(cap) = self.opts.max_output_tokens {
            call.max_tokens = Some(call.max_tokens.map_or(cap, |m| m.min(cap)));
        }
        let call = &call;
        let spent = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        self.env.progress.event(&Event::Calls {
            spent,
            max: self.opts.max_model_calls,
        });
        let r = exec.call(call);
        let model = match &r {
            Ok(reply) => reply.model.clone(),
            Err(_) => exec.model(),
        };
        *lock(&self.per_model).entry(model).or_default() += 1;
        r
    }

    fn stop_on_budget(&self, request_seq: u64) -> Result<(u64, String), RunError> {
        let calls = self.calls.load(Ordering::SeqCst);
        self.put(
            "budget",
            "budget",
            Some(request_seq),
            json!({"model_calls": calls, "reason": "run stopped on budget"}),
        )?;
        let a = self.put(
            "synthesizer",
            "result",
            Some(request_seq),
            json!({"answer": BUDGET_STOP_ANSWER}),
        )?;
        self.env.progress.event(&Event::Stopped {
            reason: "budget".into(),
        });
        Ok((a.seq, BUDGET_STOP_ANSWER.to_string()))
    }

    fn outcome(
        &self,
        status: Status,
        request_seq: u64,
        answer: Option<(u64, String)>,
        verdicts: BTreeMap<String, u64>,
        frame: Value,
    ) -> Outcome {
        Outcome {
            status,
            request_seq,
            answer_seq: answer.as_ref().map(|a| a.0),
            answer: answer.map(|a| a.1),
            written: lock(&self.written).clone(),
            calls: lock(&self.per_model).clone(),
            verdicts,
            route_frame: frame,
        }
    }

    fn entries(&self) -> Result<Vec<Entry>, RunError> {
        let store = lock(&self.store);
        let n = store.len()?;
        let mut out = Vec::with_capacity(n as usize);
        for seq in 0..n {
            if let Some(e) = store.get(seq)? {
                out.push(e);
            }
        }
        Ok(out)
    }

    fn payload_of(&self, e: &Entry) -> Result<Option<J>, RunError> {
        Ok(lock(&self.store)
            .payload(&e.payload_hash)?
            .map(|v| v.to_serde()))
    }

    fn checkpoint_root(&self) -> Result<String, RunError> {
        let store = lock(&self.store);
        let mut acc = Accumulator::default();
        for seq in 0..store.len()? {
            if let Some(e) = store.get(seq)? {
                acc.push(&e.entry_hash);
            }
        }
        Ok(acc.root())
    }

    // ---- planning ----

    fn plan(&self, request: &str, parent: u64) -> Result<CompiledPlan, RunError> {
        self.env.progress.event(&Event::Planning);
        let roster = self.env.roster;
        let max_tasks = self
            .opts
            .policy
            .max_tasks
            .unwrap_or(DEFAULT_PLAN_TASKS)
            .clamp(1, 32);
        let schema = plan_schema(roster, max_tasks);
        let first = planner_prompt(request, roster, max_tasks);
        let orchestrator = self.env.seats.orchestrator();
        let mut prompt = first.clone();
        let mut last_error = String::new();
        for attempt in 1..=2 {
            let call = Call {
                system: Some("You plan work for a team of lanes. Answer with JSON only."),
                prompt: &prompt,
                schema: Some(&schema),
                max_tokens: Some(1024),
            };
            let error = match self.ask(orchestrator.as_ref(), &call) {
                Err(e) => format!("the orchestrator seat failed ({}): {e}", e.code()),
                Ok(reply) => {
                    match Plan::from_model_output(&reply.text, Some(roster), ParseMode::Strict)
                        .and_then(|p| {
                            let c = p.compile()?;
                            Ok((p, c))
                        }) {
                        Ok((p, compiled)) => match self.opts.policy.check_plan(&p, roster) {
                            Ok(()) => return Ok(compiled),
                            Err(e) => e.to_string(),
                        },
                        Err(e) => e.to_string(),
                    }
                }
            };
            last_error = error;
            if attempt == 1 {
                prompt = planner_retry_prompt(&first, &last_error);
            }
        }
        self.put(
            "orchestrator",
            "run_stopped",
            Some(parent),
            json!({"stage": "plan", "attempts": 2, "reason": last_error}),
        )?;
        self.env.progress.event(&Event::Stopped {
            reason: format!("planning failed: {last_error}"),
        });
        Err(RunError::Plan(last_error))
    }

    // ---- one task ----

    fn run_task(
        &self,
        task: &Task,
        plan_seq: u64,
        results: &Mutex<BTreeMap<String, Done>>,
    ) -> Result<Done, RunError> {
        let upstream: BTreeMap<String, UpstreamResult> = lock(results)
            .iter()
            .map(|(k, d)| {
                (
                    k.clone(),
                    UpstreamResult {
                        output: d.output.clone(),
                        ok: d.ok,
                    },
                )
            })
            .collect();
        let injected = match &self.opts.context_budget {
            Some(budget) => {
                let b = {
                    let mut meter = lock(&self.meter);
                    augment_with_upstream_budgeted(task, &upstream, budget, &mut meter)
                };
                for p in &b.pressures {
                    self.put_value(
                        "context-budget",
                        "context_budget",
                        Some(plan_seq),
                        p.payload(),
                    )?;
                }
                b.injected
            }
            None => augment_with_upstream(task, &upstream, MAX_UPSTREAM_CHARS),
        };
        let mut payload = json!({
            "id": task.id,
            "agent": task.agent,
            "instruction": task.instruction,
            "data_from": injected.data_from,
        });
        if !task.done_when.is_empty() {
            payload["done_when"] = json!(task.done_when);
        }
        let task_entry = self.put("dispatch", "task", Some(plan_seq), payload)?;
        let worker = self.env.seats.worker(self.env.roster, &task.agent);
        self.attempt(task, &worker, &injected.instruction, task_entry.seq)
    }

    /// Calls `exec` on an instruction and witnesses the result under `parent`.
    fn attempt(
        &self,
        task: &Task,
        exec: &Arc<dyn Executor>,
        instruction: &str,
        parent: u64,
    ) -> Result<Done, RunError> {
        self.env.progress.event(&Event::TaskStarted {
            id: task.id.clone(),
            agent: task.agent.clone(),
            model: exec.model(),
        });
        let (output, ok, model, error) = if self.over_budget() {
            (
                "error: budget exceeded".to_string(),
                false,
                exec.model(),
                Some("budget"),
            )
        } else {
            let category = self
                .env
                .roster
                .get(&task.agent)
                .map(|a| a.category.as_str());
            let system = worker_system(&task.agent, category);
            let call = Call {
                system: Some(&system),
                prompt: instruction,
                schema: None,
                max_tokens: Some(512),
            };
            match self.ask(exec.as_ref(), &call) {
                Ok(r) if r.text.trim().is_empty() => (
                    "error: the model returned an empty answer".to_string(),
                    false,
                    r.model,
                    Some("empty"),
                ),
                Ok(r) => (r.text, true, r.model, None),
                Err(e) => (format!("error: {e}"), false, exec.model(), Some(e.code())),
            }
        };
        let mut payload = json!({"id": task.id, "output": output, "ok": ok, "model": model});
        if let Some(code) = error {
            payload["error"] = json!(code);
        }
        let e = self.put(&task.agent, "result", Some(parent), payload)?;
        self.env.progress.event(&Event::TaskFinished {
            id: task.id.clone(),
            ok,
            model,
        });
        Ok(Done {
            output,
            ok,
            seq: e.seq,
        })
    }

    fn run_wave(
        &self,
        tasks: &[&Task],
        plan_seq: u64,
        results: &Mutex<BTreeMap<String, Done>>,
    ) -> Result<(), RunError> {
        let width = self.opts.policy.max_parallel.max(1);
        if width == 1 || tasks.len() <= 1 {
            for t in tasks {
                let d = self.run_task(t, plan_seq, results)?;
                lock(results).insert(t.id.clone(), d);
            }
            return Ok(());
        }
        // Results of this wave are not upstream of each other: take the snapshot first.
        let next = AtomicU64::new(0);
        let first_error: Mutex<Option<RunError>> = Mutex::new(None);
        let finished: Mutex<Vec<(String, Done)>> = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for _ in 0..width.min(tasks.len()) {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst) as usize;
                        let Some(t) = tasks.get(i) else { break };
                        if lock(&first_error).is_some() {
                            break;
                        }
                        match self.run_task(t, plan_seq, results) {
                            Ok(d) => lock(&finished).push((t.id.clone(), d)),
                            Err(e) => {
                                lock(&first_error).get_or_insert(e);
                                break;
                            }
                        }
                    }
                });
            }
        });
        if let Some(e) = lock(&first_error).take() {
            return Err(e);
        }
        let mut r = lock(results);
        for (id, d) in lock(&finished).drain(..) {
            r.insert(id, d);
        }
        Ok(())
    }

    // ---- validation ----

    fn validate(&self, task: &Task, done: &Done) -> Result<Verdict, RunError> {
        let verdict = if !done.ok {
            Verdict {
                decision: "fail".into(),
                score: 0.0,
                reason: "task failed".into(),
                model: None,
            }
        } else if self.over_budget() {
            Verdict {
                decision: "undetermined".into(),
                score: 0.0,
                reason: "budget exceeded".into(),
                model: None,
            }
        } else {
            self.env.progress.event(&Event::Validating {
                id: task.id.clone(),
            });
            let orchestrator = self.env.seats.orchestrator();
            let prompt = validator_prompt(task, &done.output);
            let schema = verdict_schema();
            let call = Call {
                system: Some("You check work against its criteria. Answer with JSON only."),
                prompt: &prompt,
                schema: Some(&schema),
                max_tokens: Some(256),
            };
            match self.ask(orchestrator.as_ref(), &call) {
                Ok(reply) => match parse_verdict(&reply.text) {
                    Some((decision, score, reason)) => Verdict {
                        decision,
                        score,
                        reason,
                        model: Some(reply.model),
                    },
                    None => Verdict {
                        decision: "undetermined".into(),
                        score: 0.0,
                        reason: "validator answered without a usable verdict".into(),
                        model: Some(reply.model),
                    },
                },
                Err(e) => Verdict {
                    decision: "undetermined".into(),
                    score: 0.0,
                    reason: format!("validator failed ({}): {e}", e.code()),
                    model: Some(orchestrator.model()),
                },
            }
        };
        self.put(
            "validator",
            "verdict",
            Some(done.seq),
            verdict.payload(&task.id),
        )?;
        self.env.progress.event(&Event::Verdict {
            id: task.id.clone(),
            decision: verdict.decision.clone(),
        });
        Ok(verdict)
    }
}

/// The request entry and route frame of a run about to start.
fn open_run(run: &Run<'_, '_>, request: &str) -> Result<(u64, RouteFrame), RunError> {
    let (_, frame) = route::route_request(request, run.env.roster);
    let req = run.put("client", "request", None, json!({"text": request}))?;
    run.put_value("router", "route_frame", Some(req.seq), frame.payload())?;
    Ok((req.seq, frame))
}

/// The plan entry payload: Forum's `waves` and `edges`, plus the tasks themselves.
fn plan_entry_payload(plan: &CompiledPlan) -> J {
    let mut p = plan.payload().to_serde();
    p["tasks"] = J::Array(
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
pub fn plan_from_payload(p: &J) -> Option<CompiledPlan> {
    let tasks = p.get("tasks")?.as_array()?;
    let strs = |v: &J| -> Option<Vec<String>> {
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

/// Runs a new request end to end.
pub fn submit(
    store: &mut (dyn Storage + Send),
    env: &Env<'_>,
    opts: &Options,
    request: &str,
) -> Result<Outcome, RunError> {
    route::check_request(request).map_err(|e| RunError::Request(e.to_string()))?;
    let run = Run::new(store, env, opts);
    let (request_seq, frame) = open_run(&run, request)?;
    let plan = run.plan(request, request_seq)?;
    let plan_entry = run.put(
        "dispatch",
        "plan",
        Some(request_seq),
        plan_entry_payload(&plan),
    )?;
    env.progress.event(&Event::Planned {
        tasks: plan.tasks.len(),
        waves: plan.waves.len(),
    });
    drive(
        &run,
        request,
        request_seq,
        &frame,
        &plan,
        plan_entry.seq,
        plan_entry.seq,
        BTreeMap::new(),
        BTreeMap::new(),
    )
}

/// Continues an unfinished run (the latest one, or `request_seq`): reuses every task already
/// witnessed with a passing or blocking verdict, and every ok result not yet judged; runs the
/// rest.
pub fn resume(
    store: &mut (dyn Storage + Send),
    env: &Env<'_>,
    opts: &Options,
    request_seq: Option<u64>,
) -> Result<Outcome, RunError> {
    let run = Run::new(store, env, opts);
    let entries = run.entries()?;
    let runs = status::runs(&entries, |e| run.payload_of(e).ok().flatten());
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
            target.state.as_str()
        )));
    }
    let request = target.request.clone();
    let request_seq = target.request_seq;
    let (_, frame) = route::route_request(&request, env.roster);
    let (plan, plan_seq, run_seq) = match (&target.plan, target.plan_seq, target.run_seq) {
        (Some(p), Some(seq), Some(run_seq)) => (p.clone(), seq, run_seq),
        _ => {
            // Planning never finished: plan again.
            let plan = run.plan(&request, request_seq)?;
            let e = run.put(
                "dispatch",
                "plan",
                Some(request_seq),
                plan_entry_payload(&plan),
            )?;
            (plan, e.seq, e.seq)
        }
    };
    let mut reused: BTreeMap<String, Done> = BTreeMap::new();
    let mut verdicts: BTreeMap<String, Verdict> = BTreeMap::new();
    for (id, r) in &target.results {
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
    let mut ids: Vec<&String> = reused.keys().collect();
    ids.sort();
    run.put(
        "dispatch",
        "resume",
        Some(plan_seq),
        json!({"reused": ids, "run": request_seq}),
    )?;
    drive(
        &run,
        &request,
        request_seq,
        &frame,
        &plan,
        plan_seq,
        run_seq,
        reused,
        verdicts,
    )
}

#[allow(clippy::too_many_arguments)]
fn drive(
    run: &Run<'_, '_>,
    request: &str,
    request_seq: u64,
    frame: &RouteFrame,
    plan: &CompiledPlan,
    plan_seq: u64,
    run_seq: u64,
    reused: BTreeMap<String, Done>,
    mut verdicts: BTreeMap<String, Verdict>,
) -> Result<Outcome, RunError> {
    let env = run.env;
    let frame_payload = frame.payload();
    let by_id: BTreeMap<&str, &Task> = plan.tasks.iter().map(|t| (t.id.as_str(), t)).collect();
    let results: Mutex<BTreeMap<String, Done>> = Mutex::new(reused);
    let count = |v: &BTreeMap<String, Verdict>| {
        let mut c = BTreeMap::new();
        for x in v.values() {
            *c.entry(x.decision.clone()).or_insert(0u64) += 1;
        }
        c
    };

    // Waves.
    for (i, wave) in plan.waves.iter().enumerate() {
        if run.opts.gates.waves.contains(&i) {
            match gate(run, run_seq, i, wave)? {
                GateOutcome::Run(edits) => {
                    if !edits.is_empty() {
                        let edited: Vec<Task> = wave
                            .iter()
                            .filter_map(|id| by_id.get(id.as_str()).map(|t| (*t).clone()))
                            .map(|mut t| {
                                if let Some(new) = edits.get(&t.id) {
                                    t.instruction = new.clone();
                                }
                                t
                            })
                            .collect();
                        let todo: Vec<&Task> = edited
                            .iter()
                            .filter(|t| !lock(&results).contains_key(&t.id))
                            .collect();
                        env.progress.event(&Event::Wave {
                            index: i,
                            of: plan.waves.len(),
                            tasks: wave.clone(),
                        });
                        run.run_wave(&todo, plan_seq, &results)?;
                        after_wave(run, i, plan_seq)?;
                        continue;
                    }
                }
                GateOutcome::Pause => {
                    env.progress.event(&Event::Paused { wave: i });
                    return Ok(run.outcome(
                        Status::Paused { wave: i },
                        request_seq,
                        None,
                        count(&verdicts),
                        frame_payload,
                    ));
                }
                GateOutcome::Stop => {
                    return Ok(run.outcome(
                        Status::Rejected { wave: i },
                        request_seq,
                        None,
                        count(&verdicts),
                        frame_payload,
                    ));
                }
            }
        }
        let todo: Vec<&Task> = wave
            .iter()
            .filter(|id| !lock(&results).contains_key(id.as_str()))
            .filter_map(|id| by_id.get(id.as_str()).copied())
            .collect();
        env.progress.event(&Event::Wave {
            index: i,
            of: plan.waves.len(),
            tasks: wave.clone(),
        });
        run.run_wave(&todo, plan_seq, &results)?;
        after_wave(run, i, plan_seq)?;
    }

    // Validation, in plan order, after the last wave.
    let mut finals: BTreeMap<String, Done> = lock(&results).clone();
    for t in &plan.tasks {
        if verdicts.contains_key(&t.id) {
            continue;
        }
        let Some(done) = finals.get(&t.id) else {
            continue;
        };
        let v = run.validate(t, done)?;
        verdicts.insert(t.id.clone(), v);
    }

    // Escalation.
    for t in &plan.tasks {
        let Some(v) = verdicts.get(&t.id) else {
            continue;
        };
        if !v.climbs() {
            continue;
        }
        let ladder = env.seats.ladder(env.roster, &t.agent);
        let upstream: BTreeMap<String, UpstreamResult> = finals
            .iter()
            .map(|(k, d)| {
                (
                    k.clone(),
                    UpstreamResult {
                        output: d.output.clone(),
                        ok: d.ok,
                    },
                )
            })
            .collect();
        let instruction = augment_with_upstream(t, &upstream, MAX_UPSTREAM_CHARS).instruction;
        for rung in ladder {
            if run.over_budget() {
                break;
            }
            let Some(current) = finals.get(&t.id).cloned() else {
                break;
            };
            env.progress.event(&Event::Escalating {
                id: t.id.clone(),
                to: rung.model(),
            });
            let esc = run.put(
                "orchestrator",
                "tier_escalation",
                Some(current.seq),
                json!({"id": t.id, "to": rung.model(), "reason": "validation failed"}),
            )?;
            let done = run.attempt(t, &rung, &instruction, esc.seq)?;
            finals.insert(t.id.clone(), done.clone());
            let v = run.validate(t, &done)?;
            let passed = v.passed();
            verdicts.insert(t.id.clone(), v);
            if passed {
                break;
            }
        }
    }

    // A wave in which nothing passed is degraded, not approved.
    for (i, wave) in plan.waves.iter().enumerate() {
        let judged: Vec<&Verdict> = wave.iter().filter_map(|id| verdicts.get(id)).collect();
        if !judged.is_empty() && judged.iter().all(|v| !v.passed()) {
            run.put(
                "validator",
                "degraded",
                Some(plan_seq),
                json!({"wave": i, "tasks": wave, "reason": "no task of this wave passed validation"}),
            )?;
        }
    }

    if run.over_budget() {
        let a = run.stop_on_budget(request_seq)?;
        return Ok(run.outcome(
            Status::StoppedOnBudget,
            request_seq,
            Some(a),
            count(&verdicts),
            frame_payload,
        ));
    }

    // Synthesis.
    env.progress.event(&Event::Synthesizing);
    let mut parts = Vec::new();
    for t in &plan.tasks {
        let Some(d) = finals.get(&t.id) else { continue };
        let v = verdicts.get(&t.id);
        if v.is_some_and(|v| v.decision == "block") || !d.ok {
            continue;
        }
        let text = match &run.opts.context_budget {
            Some(budget) => {
                let (admitted, p) = {
                    let mut meter = lock(&run.meter);
                    context::apply(
                        budget,
                        &mut meter,
                        Source::Upstream,
                        &format!("{}->synthesizer", t.id),
                        &d.output,
                    )
                };
                run.put_value("context-budget", "context_budget", Some(d.seq), p.payload())?;
                admitted
            }
            None => d.output.clone(),
        };
        if text.is_empty() {
            continue;
        }
        let note = match v.map(|v| v.decision.as_str()) {
            Some("pass") => "accepted",
            Some("undetermined") => "not validated",
            _ => "did not pass validation",
        };
        parts.push(format!("- {} ({}, {note}): {text}", t.id, t.agent));
    }
    let prompt = format!(
        "Request: {request}\n\nResults of the tasks:\n{}\n\n{}\n\nWrite the answer to the request from these results.",
        if parts.is_empty() {
            "(none usable)".to_string()
        } else {
            parts.join("\n")
        },
        frame.communication_contract.prompt_text()
    );
    let call = Call {
        system: Some(
            "You write the final answer for the person who asked, from the team's results.",
        ),
        prompt: &prompt,
        schema: None,
        max_tokens: Some(768),
    };
    let orchestrator = env.seats.orchestrator();
    let answer = match run.ask(orchestrator.as_ref(), &call) {
        Ok(r) if !r.text.trim().is_empty() => r.text.trim().to_string(),
        Ok(_) => {
            return Err(synthesis_failed(
                run,
                request_seq,
                "the orchestrator seat returned an empty answer".into(),
            )?);
        }
        Err(e) => {
            return Err(synthesis_failed(
                run,
                request_seq,
                format!("the orchestrator seat failed ({}): {e}", e.code()),
            )?);
        }
    };
    let a = run.put(
        "synthesizer",
        "result",
        Some(request_seq),
        json!({"answer": answer}),
    )?;
    check_answer(run, request, frame, a.seq, &answer)?;
    Ok(run.outcome(
        Status::Answered,
        request_seq,
        Some((a.seq, answer)),
        count(&verdicts),
        frame_payload,
    ))
}

/// The deterministic floors on the delivered answer (forum-spec §13–15), each witnessed with
/// the answer as its parent: concision, the delivery profile (the caller's, else the route
/// frame's), and the lexical intent check. None of them blocks the run.
fn check_answer(
    run: &Run<'_, '_>,
    request: &str,
    frame: &RouteFrame,
    answer_seq: u64,
    answer: &str,
) -> Result<(), RunError> {
    use crate::quality;
    run.put_value(
        "delivery",
        "delivery_check",
        Some(answer_seq),
        quality::assess(answer).payload(),
    )?;
    let profile = match &run.opts.delivery_profile {
        Some(p) => quality::profile::get_profile(Some(p)).unwrap_or(frame.delivery_profile),
        None => frame.delivery_profile,
    };
    run.put_value(
        "delivery-profile",
        "delivery_profile_check",
        Some(answer_seq),
        quality::profile::assess_profile(answer, profile).payload(),
    )?;
    run.put_value(
        "intent",
        "intent_check",
        Some(answer_seq),
        quality::intent_check_payload(request, answer, quality::intent::DEFAULT_THRESHOLD),
    )?;
    Ok(())
}

fn synthesis_failed(
    run: &Run<'_, '_>,
    request_seq: u64,
    reason: String,
) -> Result<RunError, RunError> {
    run.put(
        "orchestrator",
        "run_stopped",
        Some(request_seq),
        json!({"stage": "synthesis", "reason": reason}),
    )?;
    run.env.progress.event(&Event::Stopped {
        reason: format!("synthesis failed: {reason}"),
    });
    Ok(RunError::Synthesis(reason))
}

fn after_wave(run: &Run<'_, '_>, wave: usize, plan_seq: u64) -> Result<(), RunError> {
    if run.opts.checkpoint_each_wave {
        let root = run.checkpoint_root()?;
        run.put(
            "dispatch",
            "checkpoint",
            Some(plan_seq),
            json!({"wave": wave, "root": root}),
        )?;
        lock(&run.store).sync()?;
    }
    Ok(())
}

enum GateOutcome {
    /// Run the wave, with edited instructions by task id.
    Run(BTreeMap<String, String>),
    Pause,
    Stop,
}

fn gate(
    run: &Run<'_, '_>,
    run_seq: u64,
    wave: usize,
    tasks: &[String],
) -> Result<GateOutcome, RunError> {
    let entries = run.entries()?;
    let mut gates = Vec::new();
    for e in &entries {
        if status::GATE_KINDS.contains(&e.kind.as_str())
            && let Some(p) = run.payload_of(e)?
            && status::gate_key(&p) == Some((run_seq, wave as u64))
        {
            gates.push((e.clone(), p));
        }
    }
    let mut resolution = status::gate_resolution(&gates);
    if resolution == status::GateState::Pending {
        // Expired?
        if let Some((pending, p)) = gates.iter().rev().find(|(e, _)| e.kind == "gate_pending")
            && let Some(deadline) = p.get("deadline").and_then(J::as_f64)
            && run.env.clock.now() >= deadline
        {
            let decision = match p.get("on_expiry").and_then(J::as_str) {
                Some("approve") => "approved",
                _ => "rejected",
            };
            let e = run.put(
                "dispatch",
                "gate_expired",
                Some(pending.seq),
                json!({"run_seq": run_seq, "wave": wave, "decision": decision, "on_expiry": p.get("on_expiry"), "deadline": deadline}),
            )?;
            let ep = json!({"decision": decision});
            gates.push((e, ep));
            resolution = if decision == "approved" {
                status::GateState::Approved
            } else {
                status::GateState::Rejected
            };
        }
    }
    match resolution {
        status::GateState::None => {
            let mut payload = json!({
                "run_seq": run_seq,
                "wave": wave,
                "tasks": tasks,
                "question": run.opts.gates.question.clone().unwrap_or_else(|| format!("Run wave {wave} ({})?", tasks.join(", "))),
                "requested_by": "dispatch",
            });
            if let Some(secs) = run.opts.gates.deadline_seconds {
                payload["on_expiry"] = json!(
                    run.opts
                        .gates
                        .on_expiry
                        .clone()
                        .unwrap_or_else(|| "reject".into())
                );
                payload["deadline"] = json!(run.env.clock.now() + secs);
            }
            run.put("dispatch", "gate_pending", Some(run_seq), payload)?;
            lock(&run.store).sync()?;
            Ok(GateOutcome::Pause)
        }
        status::GateState::Pending => Ok(GateOutcome::Pause),
        status::GateState::Rejected => {
            let parent = gates
                .iter()
                .find(|(e, _)| e.kind == "gate_rejected")
                .or_else(|| gates.iter().find(|(e, _)| e.kind == "gate_expired"))
                .map_or(run_seq, |(e, _)| e.seq);
            run.put(
                "dispatch",
                "gate_stopped",
                Some(parent),
                json!({"run_seq": run_seq, "wave": wave, "reason": "gate rejected"}),
            )?;
            lock(&run.store).sync()?;
            Ok(GateOutcome::Stop)
        }
        status::GateState::Edited => {
            let edits = gates
                .iter()
                .rev()
                .find(|(e, _)| e.kind == "gate_edited")
                .and_then(|(_, p)| p.get("edits").and_then(J::as_object).cloned())
                .unwrap_or_default();
            Ok(GateOutcome::Run(
                edits
                    .into_iter()
                    .filter(|(k, _)| tasks.contains(k))
                    .map(|(k, v)| (k, v.as_str().map_or_else(|| v.to_string(), str::to_string)))
                    .collect(),
            ))
        }
        status::GateState::Approved => Ok(GateOutcome::Run(BTreeMap::new())),
    }
}
