//! Best-of-N (`--attempts N`): each task of a `--work` run is tried N times, one attempt after
//! another, each in a fresh worktree at the same start with its own commit, `change` entry and
//! checks (their bodies carry `attempt`), each commit kept at
//! `refs/forum/attempts/LEDGER/RUN/TASK/N`. Attempts run in turn rather than side by side: a
//! wave's tasks already run in parallel, and N workers at once on a small machine would only
//! fight for it.
//!
//! After the wave, the pre-ship gate sees every passing attempt (its checks, diff and cost) and
//! picks one or none; when it is skipped (light verification), out of budget or undetermined,
//! [`choose`] picks: the smallest diff, then the cheapest, then the first. The choice is
//! witnessed as `attempt_choice` (every attempt side by side, the chosen one and the rule that
//! chose it), then the chosen change's `ship` entry, and it is integrated like any change.
//!
//! Under a spend ceiling, the worst case of every attempt's first call is reserved before the
//! first attempt starts, so a ceiling that cannot hold them all stops the task before any.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::exec::{Call, Executor};
use crate::ledger::{Entry, kind};
use crate::plan::Task;
use crate::spend::{Amount, Reported, Reservation, prompt_tokens_upper_bound, usd_to_pico};

use super::engine::{Done, Run, usage_of, with_usage};
use super::schemas::{SHIP_DECISIONS, parse_ship};
use super::ship::Decision;
use super::work_state::{AttemptWork, TaskWork, WorkRun};
use super::workbench::{Keep, WorkError};
use super::{Event, RunError, lock};

pub(crate) use crate::exec::config::MAX_ATTEMPTS;

/// The bytes of each attempt's diff the pre-ship gate is shown.
const GATE_DIFF_CAP: usize = 16 * 1024;

/// Why the attempts of a task did not start: the worst case of each one's first call, all
/// reserved before any starts, does not fit a spend ceiling.
#[derive(Debug, thiserror::Error)]
#[error(
    "{of} attempts do not fit the spend ceiling, reserved before any starts: {}",
    super::engine::ceiling_message(*hit)
)]
pub(super) struct AttemptsDoNotFit {
    of: u32,
    hit: crate::spend::CeilingHit,
}

/// How the choice and the `attempt_choice` entry see an attempt (the attempt itself is
/// [`AttemptWork`], in `work_state.rs`).
impl AttemptWork {
    fn candidate(&self) -> Candidate {
        Candidate {
            attempt: self.n,
            passed: self.passed(),
            diff_lines: self.diff_lines(),
            cost_pico: self.cost_usd.map_or(0, usd_to_pico),
            tokens: self.tokens,
        }
    }

    /// Its row in the `attempt_choice` entry.
    fn row(&self) -> Value {
        let passed = self.checks.iter().filter(|(_, ok)| *ok).count();
        json!({
            "attempt": self.n,
            "result": self.result_seq,
            "change": self.change_seq,
            "commit": self.change.as_ref().and_then(|c| c.commit.clone()),
            "checks_passed": passed,
            "checks": self.checks.len(),
            "diff_lines": self.diff_lines(),
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "passed": self.passed(),
        })
    }
}

/// One attempt as the choice sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate {
    /// Its number, from 1.
    pub(crate) attempt: u32,
    /// A committed change whose every check passed.
    pub(crate) passed: bool,
    /// Lines added plus lines removed.
    pub(crate) diff_lines: u64,
    /// What it cost, in pico-dollars (0 when unpriced).
    pub(crate) cost_pico: u64,
    /// The tokens it counted.
    pub(crate) tokens: u64,
}

/// What chose an attempt, as the `attempt_choice` entry names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// The pre-ship gate picked it.
    Gate,
    /// It had the fewest changed lines of the passing attempts.
    SmallestDiff,
    /// Of those with the fewest changed lines, it cost least (dollars, then tokens).
    Cheapest,
    /// Of those alike in diff and cost, it came first.
    First,
}

impl Rule {
    /// The rule's name in the record.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Rule::Gate => "gate",
            Rule::SmallestDiff => "smallest_diff",
            Rule::Cheapest => "cheapest",
            Rule::First => "first",
        }
    }
}

/// The attempt that wins without the gate, and the rule that decided: among the passing ones,
/// the smallest diff; among those alike, the cheapest (dollars, then tokens); among those
/// alike, the first. `None` when none passed. Pure.
pub(crate) fn choose(candidates: &[Candidate]) -> Option<(u32, Rule)> {
    let passing: Vec<&Candidate> = candidates.iter().filter(|c| c.passed).collect();
    let least = passing.iter().map(|c| c.diff_lines).min()?;
    let smallest: Vec<&&Candidate> = passing.iter().filter(|c| c.diff_lines == least).collect();
    if let [only] = smallest.as_slice() {
        return Some((only.attempt, Rule::SmallestDiff));
    }
    let cost = |c: &Candidate| (c.cost_pico, c.tokens);
    let cheapest = smallest.iter().map(|c| cost(c)).min()?;
    let cheap: Vec<&&&Candidate> = smallest.iter().filter(|c| cost(c) == cheapest).collect();
    let first = cheap.iter().map(|c| c.attempt).min()?;
    let rule = if cheap.len() == 1 {
        Rule::Cheapest
    } else {
        Rule::First
    };
    Some((first, rule))
}

/// What attempt `n` of `of` is told besides the task.
fn attempt_note(n: u32, of: u32) -> String {
    format!(
        "\n\nThis is attempt {n} of {of} at this task; each attempt starts from the same files \
         in a worktree of its own, and one passing attempt is kept."
    )
}

/// The pre-ship gate's prompt over the passing attempts.
fn gate_prompt(task: &Task, attempts: &[&AttemptWork]) -> String {
    let criteria = task.criteria_or("(none given)");
    let mut shown = String::new();
    for a in attempts {
        let checks: Vec<String> = a
            .checks
            .iter()
            .map(|(c, ok)| format!("- {c}: {}", if *ok { "passed" } else { "failed" }))
            .collect();
        let diff = a.change.as_ref().map_or("", |c| c.diff.as_str());
        let (diff, cut) = super::edit_tools::cap_text(diff, GATE_DIFF_CAP);
        let cost = a.cost_usd.map_or(String::new(), |c| format!(", ${c:.4}"));
        shown.push_str(&format!(
            "\n\nAttempt {}: {} changed lines, {} tokens{cost}\nChecks:\n{}\nDiff{}:\n{diff}",
            a.n,
            a.diff_lines(),
            a.tokens,
            if checks.is_empty() {
                "(no checks were configured)".to_string()
            } else {
                checks.join("\n")
            },
            if cut { " (cut)" } else { "" },
        ));
    }
    format!(
        "Decide whether to ship one of {} attempts at one change into the run branch, and \
         which.\n\nTask {}: {}\nDone criteria:\n{criteria}{shown}\n\n\
         decision is merge when an attempt does what the task asks and nothing harmful (attempt \
         names the one to ship), block when none must ever be integrated, escalate when a \
         person should look at them, undetermined when you cannot tell. reason says why in one \
         sentence.",
        attempts.len(),
        task.id,
        task.instruction
    )
}

/// The gate's answer schema over attempts: the ship answer with the attempt it picks.
fn gate_schema(max: u32) -> crate::exec::OutputSchema {
    crate::exec::OutputSchema {
        name: "ship_attempt".into(),
        schema: json!({
            "type": "object",
            "properties": {
                "decision": {"type": "string", "enum": SHIP_DECISIONS},
                "attempt": {"type": "integer", "minimum": 1, "maximum": max},
                "reason": {"type": "string", "minLength": 1, "maxLength": 400}
            },
            "required": ["decision", "reason"],
            "additionalProperties": false
        }),
    }
}

/// Why the gate's answer over attempts could not be used.
#[derive(Debug, thiserror::Error)]
enum GateAnswerError {
    /// Not a ship answer at all.
    #[error(transparent)]
    Answer(#[from] super::AnswerError),
    /// A merge of an attempt that did not pass (or does not exist).
    #[error("attempt {0} is not one of the passing attempts")]
    NotPassing(u64),
    /// A merge that names no attempt.
    #[error("a merge names no \"attempt\"")]
    NoAttempt,
}

/// The gate's answer over attempts: its decision, the attempt a `merge` names (one of
/// `passing`) and its reason. A `merge` that names no passing attempt is an error.
fn parse_gate(
    text: &str,
    passing: &[u32],
) -> Result<(String, Option<u32>, String), GateAnswerError> {
    let (decision, reason) = parse_ship(text)?;
    if decision != "merge" {
        return Ok((decision, None, reason));
    }
    // parse_ship read the same object, so it is there and is JSON.
    let doc: Option<Value> = crate::plan::extract_json_object(text)
        .ok()
        .and_then(|span| serde_json::from_str(span).ok());
    match doc
        .as_ref()
        .and_then(|d| d.get("attempt"))
        .and_then(Value::as_u64)
    {
        Some(n) if passing.iter().any(|p| u64::from(*p) == n) => {
            Ok((decision, Some(n as u32), reason))
        }
        Some(n) => Err(GateAnswerError::NotPassing(n)),
        None => Err(GateAnswerError::NoAttempt),
    }
}

impl Run<'_, '_> {
    /// Runs `task` `w.attempts` times, one attempt after another, each in a fresh worktree
    /// named `name` at the start `upstream` gives, and keeps each commit under
    /// `refs/forum/attempts`. The task's state is then the best passing attempt by [`choose`]
    /// (the gate may pick another when the wave ships), or the last attempt when none passed.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn work_attempts(
        &self,
        w: &WorkRun,
        task: &Task,
        exec: &Arc<dyn Executor>,
        instruction: &str,
        task_entry: &Entry,
        name: &str,
        upstream: &[String],
    ) -> Result<Done, RunError> {
        let of = w.attempts;
        let mut held = match self.reserve_attempts(exec.as_ref(), instruction, of) {
            Ok(held) => held,
            Err(refused) => {
                let reason = refused.to_string();
                return self.attempts_refused(w, task, exec.as_ref(), task_entry, &reason);
            }
        };
        let mut rows: Vec<AttemptWork> = Vec::new();
        let mut last: Option<Done> = None;
        for n in 1..=of {
            // This attempt's share of the reservation is given back as it starts; its calls
            // reserve for themselves.
            if let Some(r) = held.pop() {
                lock(&self.spend).settle(r, Some(Reported::default()));
            }
            if n > 1 && self.over_budget() {
                break;
            }
            let (row, done) = self.one_attempt(
                w,
                task,
                exec,
                instruction,
                task_entry,
                (name, upstream),
                (n, of),
            )?;
            rows.push(row);
            last = Some(done);
        }
        for r in held {
            lock(&self.spend).settle(r, Some(Reported::default()));
        }
        let candidates: Vec<Candidate> = rows.iter().map(AttemptWork::candidate).collect();
        let latest = rows
            .iter()
            .map(|a| a.last_seq)
            .max()
            .unwrap_or(task_entry.seq);
        let mut tw = w.get(&task.id);
        tw.attempt = None;
        tw.attempts = rows.clone();
        tw.last_seq = latest;
        let done = match choose(&candidates).and_then(|(n, _)| rows.iter().find(|a| a.n == n)) {
            Some(best) => {
                take_attempt(&mut tw, best);
                tw.last_seq = latest;
                Done {
                    output: best.output.clone(),
                    ok: true,
                    seq: best.result_seq,
                }
            }
            None => last.unwrap_or(Done {
                output: "error: no attempt ran".into(),
                ok: false,
                seq: task_entry.seq,
            }),
        };
        w.set(&task.id, tw);
        Ok(done)
    }

    /// Runs attempt `n` of `of` of `task` in a fresh worktree (named and started as `tree`
    /// says), on the slot `[work] attempts` names for it or else on `exec`, and returns what
    /// it left with its result. An attempt whose slot has no executor is witnessed as failed.
    #[allow(clippy::too_many_arguments)]
    fn one_attempt(
        &self,
        w: &WorkRun,
        task: &Task,
        exec: &Arc<dyn Executor>,
        instruction: &str,
        task_entry: &Entry,
        (name, upstream): (&str, &[String]),
        (n, of): (u32, u32),
    ) -> Result<(AttemptWork, Done), RunError> {
        let mut tw = w.get(&task.id);
        tw.attempt = Some(n);
        tw.change = None;
        tw.change_seq = None;
        tw.checks.clear();
        tw.failed.clear();
        tw.last_seq = task_entry.seq;
        w.set(&task.id, tw);
        // `[work] attempts = ["SLOT", ...]`: this attempt runs on that slot's executor.
        let on = match w.attempt_slots.get(n as usize - 1) {
            Some(slot) => match self.env.seats.slot(slot.as_str()) {
                Some(e) => e,
                None => {
                    let why = format!(
                        "[work] attempts names the slot {slot} for attempt {n}, which has no executor: configure it or name another slot"
                    );
                    let done =
                        self.attempt_without_worker(w, task, exec.as_ref(), task_entry, &why)?;
                    let row = AttemptWork {
                        n,
                        result_seq: done.seq,
                        output: done.output.clone(),
                        last_seq: done.seq,
                        ..AttemptWork::default()
                    };
                    return Ok((row, done));
                }
            },
            None => exec.clone(),
        };
        let opened = w.in_turn(|| w.bench.open_task(name, upstream));
        let prompt = format!("{instruction}{}", attempt_note(n, of));
        let done = self.work_attempt(w, task, &on, &prompt, task_entry, opened)?;
        w.close_tree(&task.id);
        let tw = w.get(&task.id);
        let (tokens, cost_usd) = self.usage_at(done.seq);
        let row = AttemptWork {
            n,
            result_seq: done.seq,
            output: done.output.clone(),
            change: tw.change.clone(),
            change_seq: tw.change_seq,
            checks: tw.checks.clone(),
            failed: tw.failed.clone(),
            last_seq: tw.last_seq.max(done.seq),
            tokens,
            cost_usd,
        };
        Ok((row, done))
    }

    /// Under a spend ceiling, reserves the worst case of each attempt's first call before any
    /// starts; the reason in one line when they do not all fit (the run's ledger then closes
    /// on that ceiling, as for any call that did not fit).
    fn reserve_attempts(
        &self,
        exec: &dyn Executor,
        instruction: &str,
        of: u32,
    ) -> Result<Vec<Reservation>, AttemptsDoNotFit> {
        if !self.opts.ceilings.any() {
            return Ok(Vec::new());
        }
        let metering = exec.metering();
        let mut tokens: u32 = if exec.tool_chat().is_some() {
            4096
        } else {
            512
        };
        if let Some(cap) = self.opts.max_output_tokens {
            tokens = tokens.min(cap);
        }
        if let Some(cap) = metering.max_tokens {
            tokens = tokens.min(cap);
        }
        // The instruction plus the notes and the worker's system prompt around it.
        let prompt = prompt_tokens_upper_bound(instruction.len() + 2048);
        let worst = Amount::of(
            prompt,
            u64::from(tokens),
            metering.price.unwrap_or_default(),
        );
        let mut held = Vec::new();
        for _ in 0..of {
            let r = lock(&self.spend).reserve(worst);
            match r {
                Ok(r) => held.push(r),
                Err(hit) => {
                    for r in held {
                        lock(&self.spend).settle(r, Some(Reported::default()));
                    }
                    return Err(AttemptsDoNotFit { of, hit });
                }
            }
        }
        Ok(held)
    }

    /// Witnesses an attempt that has no worker to run it as a failed result.
    fn attempt_without_worker(
        &self,
        w: &WorkRun,
        task: &Task,
        exec: &dyn Executor,
        task_entry: &Entry,
        why: &str,
    ) -> Result<Done, RunError> {
        let output = format!("error: {why}");
        let r = self.put(
            &task.agent,
            kind::RESULT,
            Some(task_entry.seq),
            json!({"id": task.id, "output": output, "ok": false, "model": exec.model(),
                   "error": "other", "attempt": w.get(&task.id).attempt}),
        )?;
        Ok(Done {
            output,
            ok: false,
            seq: r.seq,
        })
    }

    /// Witnesses the task as failed because its attempts could not all be reserved.
    fn attempts_refused(
        &self,
        w: &WorkRun,
        task: &Task,
        exec: &dyn Executor,
        task_entry: &Entry,
        reason: &str,
    ) -> Result<Done, RunError> {
        let output = format!("error: budget exceeded: {reason}");
        let r = self.put(
            &task.agent,
            kind::RESULT,
            Some(task_entry.seq),
            json!({"id": task.id, "output": output, "ok": false, "model": exec.model(),
                   "error": "budget", "attempts": w.attempts}),
        )?;
        let mut tw = w.get(&task.id);
        tw.last_seq = r.seq;
        w.set(&task.id, tw);
        Ok(Done {
            output,
            ok: false,
            seq: r.seq,
        })
    }

    /// The tokens and dollars the `result` entry at `seq` witnessed.
    fn usage_at(&self, seq: u64) -> (u64, Option<f64>) {
        let body = lock(&self.store).payload_at(seq).ok().flatten();
        let Some(u) = body.map(|b| b.to_serde()["usage"].clone()) else {
            return (0, None);
        };
        let tokens =
            u["prompt_tokens"].as_u64().unwrap_or(0) + u["completion_tokens"].as_u64().unwrap_or(0);
        (tokens, u["cost_usd"].as_f64())
    }

    /// Whether `task` ran several attempts and one of them passed: its ship decision is then a
    /// choice among them ([`Run::ship_attempts`]).
    pub(super) fn chooses_attempt(&self, w: &WorkRun, task: &str) -> bool {
        w.get(task).attempts.iter().any(AttemptWork::passed)
    }

    /// Chooses among the passing attempts of `t` (the gate, else [`choose`]), witnesses
    /// `attempt_choice` and the chosen change's `ship`, and makes the chosen attempt the
    /// task's change (kept under refs/forum/work, to be integrated).
    pub(super) fn ship_attempts(&self, w: &WorkRun, t: &Task) -> Result<Decision, RunError> {
        let tw = w.get(&t.id);
        let (gate, picked, reply) = self.attempts_gate_or_rule(w, t, &tw.attempts);
        let chosen = picked.and_then(|(n, _)| tw.attempts.iter().find(|a| a.n == n));
        let (rule, reason) = choice_reason(picked.filter(|_| chosen.is_some()), &gate);
        let gate_record = gate_record(&gate, w.keeps_attempt_reply.then_some(reply).flatten());
        let rows: Vec<Value> = tw.attempts.iter().map(AttemptWork::row).collect();
        let body = with_usage(
            json!({
                "task": t.id,
                "attempts": rows,
                "chosen": chosen.map(|a| a.n),
                "rule": rule.as_str(),
                "reason": reason,
                "gate": gate_record,
            }),
            gate.usage.clone(),
        );
        let choice = self.put(
            "orchestrator",
            kind::ATTEMPT_CHOICE,
            Some(tw.last_seq),
            body,
        )?;
        let decision = match chosen {
            Some(_) => "merge".to_string(),
            None => gate.decision.clone(),
        };
        let mut tw = w.get(&t.id);
        if let Some(a) = chosen {
            take_attempt(&mut tw, a);
            if let Some(commit) = a.change.as_ref().and_then(|c| c.commit.as_deref()) {
                let name = self.ref_name(&t.id);
                w.bench
                    .keep(&name, commit, Keep::Work)
                    .and_then(|()| w.bench.unkeep(&name, commit, Keep::Attempt(a.n)))
                    .map_err(|e: WorkError| RunError::Work(e.to_string()))?;
            }
        }
        let mut payload = json!({
            "task": t.id,
            "change": chosen.and_then(|a| a.change_seq),
            "decision": decision,
            "reason": reason,
            "model": gate.model,
            "attempt": chosen.map(|a| a.n),
        });
        if chosen.is_none() {
            payload["gate"] = json!("attempts");
        }
        payload["rules"] = self.rules();
        let e = self.put("orchestrator", kind::SHIP, Some(choice.seq), payload)?;
        tw.ship = Some(decision.clone());
        tw.last_seq = e.seq;
        w.set(&t.id, tw);
        self.env.progress.event(&Event::Verdict {
            id: t.id.clone(),
            decision: format!("pre-ship gate: {decision}"),
        });
        Ok(Decision {
            decision,
            reason,
            model: gate.model,
            // The rule decided when the gate could not: the wave is not degraded by it.
            error: if chosen.is_some() { None } else { gate.error },
            usage: None,
        })
    }

    /// Who picks among `attempts` of `t`, and which: the pre-ship gate when it is asked and
    /// answers merge with an attempt (block or escalate pick none), else [`choose`]'s rule
    /// (light verification, out of budget, or an undetermined gate); and the gate's raw reply,
    /// when it answered.
    fn attempts_gate_or_rule(
        &self,
        w: &WorkRun,
        t: &Task,
        attempts: &[AttemptWork],
    ) -> (Decision, Option<(u32, Rule)>, Option<String>) {
        let passing: Vec<&AttemptWork> = attempts.iter().filter(|a| a.passed()).collect();
        let numbers: Vec<u32> = passing.iter().map(|a| a.n).collect();
        let light = w.verification.is_some_and(|v| !v.gate_every_change);
        let candidates: Vec<Candidate> = attempts.iter().map(AttemptWork::candidate).collect();
        let by_rule = choose(&candidates);
        if light {
            let d = Decision {
                decision: "skipped".into(),
                reason: "light verification: the pre-ship gate was not asked".into(),
                model: None,
                error: None,
                usage: None,
            };
            (d, by_rule, None)
        } else if self.over_budget() {
            let d = Decision {
                decision: "undetermined".into(),
                reason: "budget exceeded before the attempts could be reviewed".into(),
                model: None,
                error: Some("budget".into()),
                usage: None,
            };
            (d, by_rule, None)
        } else {
            let (d, n, reply) = self.ask_attempts_gate(t, &passing, &numbers);
            match (d.decision.as_str(), n) {
                ("merge", Some(n)) => (d, Some((n, Rule::Gate)), reply),
                ("block" | "escalate", _) => (d, None, reply),
                _ => (d, by_rule, reply),
            }
        }
    }

    /// Asks the orchestrator seat which passing attempt ships, and what it answered (its raw
    /// reply, when it answered at all); a failed call or an unusable answer is undetermined.
    fn ask_attempts_gate(
        &self,
        t: &Task,
        passing: &[&AttemptWork],
        numbers: &[u32],
    ) -> (Decision, Option<u32>, Option<String>) {
        self.env
            .progress
            .event(&Event::Validating { id: t.id.clone() });
        let orchestrator = self.env.seats.orchestrator();
        let prompt = gate_prompt(t, passing);
        let schema = gate_schema(MAX_ATTEMPTS);
        let call = Call {
            system: Some("You decide whether a change ships. Answer with JSON only."),
            prompt: &prompt,
            schema: Some(&schema),
            max_tokens: Some(256),
        };
        match self.ask(orchestrator.as_ref(), &call) {
            Ok(r) => {
                let usage = usage_of(orchestrator.as_ref(), &r);
                let (d, n) = match parse_gate(&r.text, numbers) {
                    Ok((decision, n, reason)) => (
                        Decision {
                            decision,
                            reason,
                            model: Some(r.model),
                            error: None,
                            usage,
                        },
                        n,
                    ),
                    Err(e) => (
                        Decision {
                            decision: "undetermined".into(),
                            reason: format!("the gate answered without a usable decision: {e}"),
                            model: Some(r.model),
                            error: Some(e.to_string()),
                            usage,
                        },
                        None,
                    ),
                };
                (d, n, Some(r.text))
            }
            Err(e) => (
                Decision {
                    decision: "undetermined".into(),
                    reason: format!("the gate failed ({}): {e}", e.code()),
                    model: Some(orchestrator.model()),
                    error: Some(e.code().to_string()),
                    usage: None,
                },
                None,
                None,
            ),
        }
    }
}

/// What an `attempt_choice` entry keeps of the gate's answer (its `gate`): the decision, the
/// reason, the model, the error, and the raw reply (`reply`, capped like a `ship` entry's;
/// `reply_cut` when it was longer) when the gate answered and the run keeps it, so a strict
/// replay parses the choice again from it.
fn gate_record(gate: &Decision, reply: Option<String>) -> Value {
    let mut record = json!({
        "decision": gate.decision,
        "reason": gate.reason,
        "model": gate.model,
    });
    if let Some(e) = &gate.error {
        record["error"] = json!(e);
    }
    super::ship::keep_reply(&mut record, reply.as_deref());
    record
}

/// The rule that chose and why, for the `attempt_choice` and `ship` entries: `picked` is the
/// attempt chosen (and by what), `None` when none was.
fn choice_reason(picked: Option<(u32, Rule)>, gate: &Decision) -> (Rule, String) {
    match picked {
        Some((_, Rule::Gate)) => (Rule::Gate, gate.reason.clone()),
        Some((n, rule)) => {
            let why = match rule {
                Rule::SmallestDiff => "the smallest diff of the passing attempts",
                Rule::Cheapest => "the cheapest of the passing attempts with the smallest diff",
                _ => "the first of the passing attempts alike in diff and cost",
            };
            (
                rule,
                format!("attempt {n}: {why} (the gate: {})", gate.decision),
            )
        }
        None => (
            Rule::Gate,
            format!(
                "the gate chose no attempt ({}): {}",
                gate.decision, gate.reason
            ),
        ),
    }
}

/// Makes attempt `a` the task's change, checks and failures.
fn take_attempt(tw: &mut TaskWork, a: &AttemptWork) {
    tw.report = super::commit_message::report_subject(&a.output);
    tw.change = a.change.clone();
    tw.change_seq = a.change_seq;
    tw.checks = a.checks.clone();
    tw.failed = a.failed.clone();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(attempt: u32, passed: bool, diff_lines: u64, cost_pico: u64, tokens: u64) -> Candidate {
        Candidate {
            attempt,
            passed,
            diff_lines,
            cost_pico,
            tokens,
        }
    }

    #[test]
    fn the_smallest_passing_diff_wins_then_the_cheapest_then_the_first() {
        // The proof's case: a failing attempt, a 40-line and a 4-line passing one.
        assert_eq!(
            choose(&[
                c(1, false, 2, 0, 10),
                c(2, true, 40, 0, 10),
                c(3, true, 4, 0, 10)
            ]),
            Some((3, Rule::SmallestDiff))
        );
        // A failing attempt never wins, however small.
        assert_eq!(
            choose(&[c(1, false, 0, 0, 0), c(2, true, 9, 0, 0)]),
            Some((2, Rule::SmallestDiff))
        );
        // Equal diffs: the cheaper in dollars, then in tokens.
        assert_eq!(
            choose(&[
                c(1, true, 4, 30, 1),
                c(2, true, 4, 20, 900),
                c(3, true, 5, 1, 1)
            ]),
            Some((2, Rule::Cheapest))
        );
        assert_eq!(
            choose(&[c(1, true, 4, 0, 80), c(2, true, 4, 0, 70)]),
            Some((2, Rule::Cheapest))
        );
        // Alike in diff and cost: the first.
        assert_eq!(
            choose(&[
                c(2, true, 4, 5, 5),
                c(1, false, 1, 0, 0),
                c(3, true, 4, 5, 5)
            ]),
            Some((2, Rule::First))
        );
        assert_eq!(choose(&[c(1, false, 4, 0, 0)]), None);
        assert_eq!(choose(&[]), None);
        let names: Vec<&str> = [Rule::Gate, Rule::SmallestDiff, Rule::Cheapest, Rule::First]
            .iter()
            .map(|r| r.as_str())
            .collect();
        assert_eq!(names, ["gate", "smallest_diff", "cheapest", "first"]);
    }

    #[test]
    fn the_gate_must_name_a_passing_attempt_to_merge() {
        assert_eq!(
            parse_gate(
                r#"{"decision":"merge","attempt":3,"reason":"small"}"#,
                &[2, 3]
            )
            .unwrap(),
            ("merge".to_string(), Some(3), "small".to_string())
        );
        assert_eq!(
            parse_gate(r#"{"decision":"merge","attempt":1,"reason":"x"}"#, &[2, 3])
                .unwrap_err()
                .to_string(),
            "attempt 1 is not one of the passing attempts"
        );
        assert_eq!(
            parse_gate(r#"{"decision":"merge","reason":"x"}"#, &[2])
                .unwrap_err()
                .to_string(),
            "a merge names no \"attempt\""
        );
        assert_eq!(
            parse_gate(r#"{"decision":"block","reason":"both unsafe"}"#, &[2]).unwrap(),
            ("block".to_string(), None, "both unsafe".to_string())
        );
    }
}
