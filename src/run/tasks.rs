//! The work of a run: asking the planner for a plan, dispatching a wave's tasks (in parallel
//! up to the policy's width), and validating each result.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::json;

use crate::exec::{Call, Executor};
use crate::ledger::kind;
use crate::plan::{
    CompiledPlan, ParseMode, Plan, Task, augment_with_upstream, augment_with_upstream_budgeted,
};

use super::engine::{Done, Run, upstream_view, usage_of, with_usage};
use super::prompts::{planner_prompt, planner_retry_prompt, validator_prompt, worker_system};
use super::ship_early::WaveShip;
use super::work_state::WorkRun;
use super::{
    DEFAULT_PLAN_TASKS, Event, MAX_UPSTREAM_CHARS, RunError, Take, Verdict, lock, parse_verdict,
    plan_schema, verdict_schema,
};

/// What a worker's call gave: its output, whether it is one, the model, the error code of a
/// failure and the `failure` body kept of a failed call, and the usage.
struct Worked {
    output: String,
    ok: bool,
    model: String,
    error: Option<&'static str>,
    failure: Option<serde_json::Value>,
    usage: Option<serde_json::Value>,
}

impl Run<'_, '_> {
    // ---- planning ----

    /// Asks the orchestrator seat for a plan (a second time with the first answer's error).
    /// `None` when a spend ceiling refused the planner's call: the caller stops the run on
    /// that ceiling ([`Run::stop_on_ceiling`]), and `resume` plans again with a fresh
    /// allowance. Planning that fails twice is witnessed as `run_stopped`.
    pub(super) fn plan(
        &self,
        request: &str,
        context: Option<&str>,
        parent: u64,
    ) -> Result<Option<CompiledPlan>, RunError> {
        self.env.progress.event(&Event::Planning);
        let roster = self.env.roster;
        let max_tasks = self
            .opts
            .policy
            .max_tasks
            .unwrap_or(DEFAULT_PLAN_TASKS)
            .clamp(1, 32);
        let schema = plan_schema(roster, max_tasks);
        let first = planner_prompt(request, context, roster, max_tasks);
        let orchestrator = self.env.seats.orchestrator();
        let mut prompt = first.clone();
        let mut last_error = String::new();
        for attempt in 1..=2 {
            let call = Call {
                system: Some("You plan work for a team of lanes. Answer with JSON only."),
                prompt: &prompt,
                schema: Some(&schema),
                max_tokens: Some(1536),
            };
            let error = match self.ask(orchestrator.as_ref(), &call) {
                Err(e) if e.code() == "ceiling" => return Ok(None),
                Err(e) => format!("the orchestrator seat failed ({}): {e}", e.code()),
                Ok(reply) => {
                    self.note_plan_usage(usage_of(orchestrator.as_ref(), &reply));
                    match Plan::from_model_output(&reply.text, Some(roster), ParseMode::Strict)
                        .and_then(|p| {
                            let c = p.compile()?;
                            Ok((p, c))
                        }) {
                        Ok((p, compiled)) => match self.opts.policy.check_plan(&p, roster) {
                            // A plan of repeated or off-topic tasks for work in the repository
                            // is asked for again, as a broken one is.
                            Ok(()) => match self
                                .work()
                                .map_or(Ok(()), |_| crate::plan::check_sized(request, &p.tasks))
                            {
                                Ok(()) => return Ok(Some(compiled)),
                                Err(why) => why,
                            },
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
        // The attempts' usage, when the seat counted it, is witnessed with the stop.
        self.put(
            "orchestrator",
            kind::RUN_STOPPED,
            Some(parent),
            with_usage(
                json!({"stage": "plan", "attempts": 2, "reason": last_error}),
                self.take_plan_usage(),
            ),
        )?;
        self.env.progress.event(&Event::Stopped {
            reason: format!("planning failed: {last_error}"),
        });
        Err(RunError::Plan(last_error))
    }

    // ---- one task ----

    pub(super) fn run_task(
        &self,
        task: &Task,
        plan_seq: u64,
        results: &Mutex<BTreeMap<String, Done>>,
    ) -> Result<Done, RunError> {
        let _in_wave = self.in_wave(&task.id);
        let upstream = upstream_view(&lock(results));
        let injected = match &self.opts.context_budget {
            // Witnessed before the meter is let go, so the record keeps the order of takes.
            Some(budget) => self.in_turn(&task.id, Take::Upstream, || {
                let mut meter = lock(&self.meter);
                let b = augment_with_upstream_budgeted(task, &upstream, budget, &mut meter);
                for p in &b.pressures {
                    self.put_value(
                        "context-budget",
                        kind::CONTEXT_BUDGET,
                        Some(plan_seq),
                        p.payload(),
                    )?;
                }
                Ok::<_, RunError>(b.injected)
            })?,
            None => augment_with_upstream(task, &upstream, MAX_UPSTREAM_CHARS),
        };
        let (context, task_parent) = self.task_context(task, plan_seq)?;
        let instruction = match context {
            Some(c) => format!("{}\n\nContext for this task:\n{c}", injected.instruction),
            None => injected.instruction.clone(),
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
        let task_entry = self.put("dispatch", kind::TASK, Some(task_parent), payload)?;
        if let Some(w) = self.work() {
            let plan = lock(&w.plan).clone();
            if let Some(d) = self.dispatcher() {
                return self.remote_task(d.as_ref(), w, task, &plan, &instruction, &task_entry);
            }
            return self.work_task(w, task, &plan, &instruction, &task_entry);
        }
        let worker = self.env.seats.worker(self.env.roster, &task.agent);
        self.attempt(task, &worker, &instruction, task_entry.seq)
    }

    /// Calls `exec` on an instruction and witnesses the result under `parent`.
    pub(super) fn attempt(
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
        let Worked {
            output,
            ok,
            model,
            error,
            failure,
            mut usage,
        } = self.work_on(task, exec, instruction);
        // A confined agent's egress: what its metering forwarder counted and what its proxy
        // refused.
        let seen = crate::exec::command::take_egress_seen();
        let (output, error, failure) = match seen
            .as_ref()
            .and_then(|s| stopped_usage(exec.as_ref(), &model, s))
        {
            // Stopped mid-run at a ceiling: it did spend what the forwarder counted.
            Some((u, why)) => {
                usage = Some(u);
                (format!("error: {why}"), Some("ceiling"), None)
            }
            None => (output, error, failure),
        };
        let mut payload = json!({"id": task.id, "output": output, "ok": ok, "model": model});
        if let Some(code) = error {
            payload["error"] = json!(code);
        }
        if let Some(f) = failure {
            payload["failure"] = f;
        }
        if let Some(seen) = seen {
            payload["egress"] = seen;
        }
        // What the agent's CLI said it spent, beside what the forwarder counted.
        if let (Some(u), Some(a)) = (usage.as_mut(), crate::exec::command::take_agent_reported()) {
            u["agent_reported"] = a;
        }
        self.finish_task(task, parent, with_usage(payload, usage), output, ok, model)
    }

    /// The worker's call for `task`: its output, whether it is one, the model, the error code
    /// of a failure and what the failure kept, and the usage; skipped as on the budget when
    /// the run is over it or a ceiling refused the call before it started.
    fn work_on(&self, task: &Task, exec: &Arc<dyn Executor>, instruction: &str) -> Worked {
        let failed = |output: String, error: &'static str, usage| Worked {
            output,
            ok: false,
            model: exec.model(),
            error: Some(error),
            failure: None,
            usage,
        };
        let skipped = || failed("error: budget exceeded".to_string(), "budget", None);
        if self.over_budget() {
            return skipped();
        }
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
            Ok(r) if r.text.trim().is_empty() => {
                let usage = usage_of(exec.as_ref(), &r);
                Worked {
                    model: r.model,
                    ..failed(
                        "error: the model returned an empty answer".to_string(),
                        "empty",
                        usage,
                    )
                }
            }
            Ok(r) => Worked {
                usage: usage_of(exec.as_ref(), &r),
                output: r.text,
                ok: true,
                model: r.model,
                error: None,
                failure: None,
            },
            Err(e) if e.code() == "ceiling" => skipped(),
            Err(e) => Worked {
                failure: Some(super::failure::kept(&e)),
                ..failed(format!("error: {e}"), e.code(), None)
            },
        }
    }

    /// Witnesses a task's `result` under `parent` and says the task finished.
    pub(super) fn finish_task(
        &self,
        task: &Task,
        parent: u64,
        payload: serde_json::Value,
        output: String,
        ok: bool,
        model: String,
    ) -> Result<Done, RunError> {
        let stalled = payload.get("error").and_then(|v| v.as_str()) == Some("stalled");
        let e = self.put(&task.agent, kind::RESULT, Some(parent), payload)?;
        if stalled {
            self.env.progress.event(&Event::Stalled {
                id: task.id.clone(),
                reason: super::heartbeat::stall_reason(&output),
            });
        }
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

    pub(super) fn run_wave(
        &self,
        tasks: &[&Task],
        plan_seq: u64,
        results: &Mutex<BTreeMap<String, Done>>,
    ) -> Result<(), RunError> {
        self.run_wave_shipping(tasks, plan_seq, results, None)
    }

    /// [`Run::run_wave`], shipping the wave's changes (`ship`) while its tasks are out, each
    /// time one's result is in, when the run may ([`Run::ships_early`]).
    pub(super) fn run_wave_shipping(
        &self,
        tasks: &[&Task],
        plan_seq: u64,
        results: &Mutex<BTreeMap<String, Done>>,
        ship: Option<(&WorkRun, &WaveShip<'_>)>,
    ) -> Result<(), RunError> {
        // Dispatched tasks wait on workers elsewhere: every task of the wave is in flight.
        let width = match self.dispatcher() {
            Some(_) => tasks.len().max(1),
            None => self.opts.policy.max_parallel.max(1),
        };
        if width == 1 || tasks.len() <= 1 {
            let _thread = self.wave_threads(1);
            for t in tasks {
                let d = self.run_task(t, plan_seq, results)?;
                lock(results).insert(t.id.clone(), d);
            }
            return self.witness_duplicates();
        }
        // Results of this wave are not upstream of each other: take the snapshot first.
        let next = AtomicU64::new(0);
        let first_error: Mutex<Option<RunError>> = Mutex::new(None);
        let finished: Mutex<Vec<(String, Done)>> = Mutex::new(Vec::new());
        // A task's result is in once it is among the run's results or this wave's.
        let in_now = |id: &str| {
            lock(results).contains_key(id) || lock(&finished).iter().any(|(f, _)| f == id)
        };
        let worker = |thread: super::context::WaveThread<'_>| {
            let _thread = thread;
            // Each thread carries the run's kill scope.
            self.scoped(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst) as usize;
                    let Some(t) = tasks.get(i) else { break };
                    if lock(&first_error).is_some() {
                        break;
                    }
                    let shipped = self.run_task(t, plan_seq, results).and_then(|d| {
                        lock(&finished).push((t.id.clone(), d));
                        match ship.filter(|_| self.ships_early() && lock(&first_error).is_none()) {
                            Some((w, ship)) => self.ship_ready(w, ship, &in_now),
                            None => Ok(()),
                        }
                    });
                    if let Err(e) = shipped {
                        lock(&first_error).get_or_insert(e);
                        break;
                    }
                }
            })
        };
        // One worker is this thread: starting and ending a thread costs more than most
        // scripted tasks take.
        std::thread::scope(|s| {
            let mut threads = self.wave_threads(width.min(tasks.len()));
            let mine = threads.pop();
            for thread in threads {
                s.spawn(|| worker(thread));
            }
            if let Some(thread) = mine {
                worker(thread);
            }
        });
        if let Some(e) = lock(&first_error).take() {
            return Err(e);
        }
        let mut r = lock(results);
        for (id, d) in lock(&finished).drain(..) {
            r.insert(id, d);
        }
        drop(r);
        self.witness_duplicates()
    }

    // ---- validation ----

    pub(super) fn validate(&self, task: &Task, done: &Done) -> Result<Verdict, RunError> {
        let judged = self.judge(task, done);
        self.witness_verdict(task, done, judged)
    }

    /// Whether `n` results can be judged at once with the same record as one after another:
    /// more than one at a time is allowed (see [`Run::seat_width`]), and no limit (calls, seconds, spend) could stop
    /// one of them, nor a secret block stop the run between them.
    pub(super) fn can_judge_at_once(&self, n: usize) -> bool {
        let calls_left = match self.opts.max_model_calls {
            Some(max) => max.saturating_sub(self.calls.load(Ordering::SeqCst)) >= n as u64,
            None => true,
        };
        n > 1
            && self.seat_width() > 1
            && calls_left
            && self.opts.max_seconds.is_none()
            && !self.opts.ceilings.any()
            && self.opts.secrets.policy.mode != crate::secrets::Mode::Block
            && self.interrupted().is_none()
    }

    /// A result's verdict, asked of the validator but not yet witnessed, with its usage.
    pub(super) fn judge(&self, task: &Task, done: &Done) -> (Verdict, Option<serde_json::Value>) {
        let mut usage = None;
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
            let r = self.ask(orchestrator.as_ref(), &call);
            if let Ok(reply) = &r {
                usage = usage_of(orchestrator.as_ref(), reply);
            }
            match r {
                Err(e) if e.code() == "ceiling" => Verdict {
                    decision: "undetermined".into(),
                    score: 0.0,
                    reason: "budget exceeded".into(),
                    model: None,
                },
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
        (verdict, usage)
    }

    /// Witnesses a verdict [`Run::judge`] gave, under the result it judges.
    pub(super) fn witness_verdict(
        &self,
        task: &Task,
        done: &Done,
        (verdict, usage): (Verdict, Option<serde_json::Value>),
    ) -> Result<Verdict, RunError> {
        self.put(
            "validator",
            kind::VERDICT,
            Some(done.seq),
            with_usage(verdict.payload(&task.id), usage),
        )?;
        self.env.progress.event(&Event::Verdict {
            id: task.id.clone(),
            decision: format!("validator: {}", verdict.decision),
        });
        Ok(verdict)
    }
}

/// The usage of an agent its metering forwarder stopped at a ceiling (what the forwarder
/// counted, at the seat's prices) and the one line saying so, from its egress record `seen`;
/// `None` when the forwarder did not stop it.
fn stopped_usage(
    exec: &dyn Executor,
    model: &str,
    seen: &serde_json::Value,
) -> Option<(serde_json::Value, String)> {
    let m = &seen["metered"];
    let ceiling = m["ceiling"].as_str()?;
    let n = |k: &str| m[k].as_u64().unwrap_or(0);
    let (input, output) = (n("input_tokens"), n("output_tokens"));
    let mut u = json!({"model": model, "prompt_tokens": input, "completion_tokens": output});
    if let Some(p) = exec.metering().price {
        u["cost_usd"] = json!(crate::spend::pico_to_usd(p.cost_pico(input, output)));
    }
    let past = match m["overshoot_cost_usd"].as_f64() {
        Some(c) if ceiling == "cost_usd" => format!("${c:.6}"),
        _ => format!("{} tokens", n("overshoot_tokens")),
    };
    let why = format!(
        "the metering forwarder stopped the agent at its {ceiling} ceiling after {} tokens ({past} past what it was allowed: at most the model turn in flight)",
        input + output
    );
    Some((u, why))
}
