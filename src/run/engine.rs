//! The run engine: one run's state (its ledger, budget counters, what it wrote) and the
//! plumbing every step shares: witnessing entries, counting model calls against the budget,
//! reading the ledger back, and witnessing an interruption.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use serde_json::{Value as JsonValue, json};

use crate::context::Meter;
use crate::exec::{Call, ExecError, Executor, Reply, command};
use crate::ledger::canonical::Value;
use crate::ledger::merkle::Accumulator;
use crate::ledger::{Entry, NewEntry, Storage, kind};
use crate::plan::UpstreamResult;
use crate::spend::{
    Amount, Ceiling, CeilingHit, Overrun, Reported, Settled, Spend, estimate_tokens, pico_to_usd,
};

use super::interrupt::Halt;
use super::work_state::WorkRun;
use super::{BUDGET_STOP_ANSWER, Env, Event, Options, Outcome, RunError, Status, lock};

/// A secrets block already witnessed: the `secret_blocked` seq, the run's request seq and the
/// rules.
pub(super) type WitnessedBlock = (u64, Option<u64>, Vec<String>);

pub(super) struct Run<'a, 's> {
    pub(super) store: Mutex<&'s mut (dyn Storage + Send)>,
    pub(super) env: &'a Env<'a>,
    pub(super) opts: &'a Options,
    pub(super) calls: AtomicU64,
    pub(super) per_model: Mutex<BTreeMap<String, u64>>,
    pub(super) written: Mutex<Vec<u64>>,
    pub(super) started: f64,
    pub(super) meter: Mutex<Meter>,
    /// The run's request seq, once known (what an interruption is witnessed under).
    pub(super) request_seq: Mutex<Option<u64>>,
    /// The run's workbench, once opened (a `--work` run).
    pub(super) work: OnceLock<WorkRun>,
    /// Set once the secrets policy blocked an entry: the `secret_blocked` seq, the request
    /// and the rules (src/run/secrets.rs).
    pub(super) secret_block: Mutex<Option<WitnessedBlock>>,
    /// What this invocation's model calls spent and hold, against its ceilings.
    pub(super) spend: Mutex<Spend>,
    /// The planner's usage, witnessed in the `plan` entry.
    pub(super) plan_usage: Mutex<Option<JsonValue>>,
    /// When any of the run's workers last printed (its heartbeat says how long since).
    pub(super) heard: std::sync::Arc<command::Heard>,
}

/// The output cap given to a call that has none while a spend ceiling is set, so its worst
/// case is bounded.
pub(super) const UNCAPPED_OUTPUT_TOKENS: u32 = 4096;

/// Codes of failures where no request reached a model, so nothing was spent.
pub(super) const NOTHING_SENT: [&str; 4] = ["refused", "missing_key", "connect", "spawn"];

/// The `usage` object witnessed with a call's result: the model, prompt and completion
/// tokens, `estimated` when no provider counted them, and `cost_usd` when the executor has a
/// price. `None` when the reply carries no usage (so a record without usage keeps Forum's
/// payloads).
pub(super) fn usage_of(exec: &dyn Executor, reply: &Reply) -> Option<JsonValue> {
    let u = reply.usage?;
    let mut o = json!({
        "model": reply.model,
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
    });
    if u.estimated {
        o["estimated"] = json!(true);
    }
    if u.truncated {
        o["truncated"] = json!(true);
    }
    let price = exec.metering().price;
    if let Some(p) = price {
        o["cost_usd"] = json!(pico_to_usd(p.cost_pico(u.input_tokens, u.output_tokens)));
    }
    if let Some(over) = u.over_reservation {
        // The counts above are what was charged; this says what was reserved and reported.
        let mut x = json!({
            "reserved_tokens": over.reserved_tokens,
            "reported_prompt_tokens": over.reported_input_tokens,
            "reported_completion_tokens": over.reported_output_tokens,
            "reported_tokens": over.reported_tokens(),
            "over_by_tokens": over.reported_tokens().saturating_sub(over.reserved_tokens),
        });
        if let Some(p) = price {
            let reported = p.cost_pico(over.reported_input_tokens, over.reported_output_tokens);
            x["reserved_cost_usd"] = json!(pico_to_usd(over.reserved_pico));
            x["reported_cost_usd"] = json!(pico_to_usd(reported));
            x["over_by_cost_usd"] = json!(pico_to_usd(reported.saturating_sub(over.reserved_pico)));
        }
        o["over_reservation"] = x;
    }
    Some(o)
}

/// Applies a call's settlement to its usage: when it reported more than it reserved, the
/// counts become what was charged and the overrun is kept beside them (see [`usage_of`]).
pub(super) fn note_overrun(usage: Option<&mut crate::exec::Usage>, settled: Settled) {
    let (Some(u), Some(o)) = (usage, settled.overrun) else {
        return;
    };
    u.input_tokens = o.charged_prompt;
    u.output_tokens = o.charged_completion;
    u.over_reservation = Some(crate::exec::OverReservation {
        reserved_tokens: o.reserved.tokens,
        reserved_pico: o.reserved.pico,
        reported_input_tokens: o.reported_prompt,
        reported_output_tokens: o.reported_completion,
    });
}

/// The `over_reservation` of a stop entry: the first call that reported more than it reserved.
fn overrun_value(o: &Overrun) -> JsonValue {
    json!({
        "reserved_tokens": o.reserved.tokens,
        "reported_tokens": o.reported.tokens,
        "over_by_tokens": o.over_tokens(),
        "charged_tokens": o.charged.tokens,
        "reserved_cost_usd": pico_to_usd(o.reserved.pico),
        "reported_cost_usd": pico_to_usd(o.reported.pico),
        "over_by_cost_usd": pico_to_usd(o.over_pico()),
        "charged_cost_usd": pico_to_usd(o.charged.pico),
    })
}

/// Adds `usage` to a payload object when there is one.
pub(super) fn with_usage(mut payload: JsonValue, usage: Option<JsonValue>) -> JsonValue {
    if let Some(u) = usage {
        payload["usage"] = u;
    }
    payload
}

/// [`with_usage`] for a payload built as a canonical value (the delivery projections).
pub(super) fn with_usage_value(payload: Value, usage: Option<JsonValue>) -> Value {
    match (payload, usage) {
        (Value::Object(mut fields), Some(u)) => {
            fields.push(("usage".to_string(), Value::from_serde(&u)));
            Value::Object(fields)
        }
        (payload, _) => payload,
    }
}

/// Holds a command worker's estimated usage to the output cap its call reserved: the estimate
/// is its printed bytes / 4, which no provider bounds, so past the cap the output is cut at the
/// cap's bytes (4 a token, on a character boundary) and the usage re-estimated from what is
/// kept and marked `truncated`. A provider's own counts are never touched. The prompt side
/// needs no cut: its estimate (bytes / 4 of the flattened prompt) is always under the
/// reservation's (bytes + [`crate::spend::PROMPT_FRAMING_TOKENS`]).
pub(super) fn cap_estimate(reply: &mut Reply, cap: u32) {
    let Some(u) = reply.usage.as_mut() else {
        return;
    };
    if !u.estimated || u.output_tokens <= u64::from(cap) {
        return;
    }
    let mut end = (cap as usize).saturating_mul(4).min(reply.text.len());
    while !reply.text.is_char_boundary(end) {
        end -= 1;
    }
    reply.text.truncate(end);
    let kept = reply.text.trim_end().len();
    reply.text.truncate(kept);
    u.output_tokens = estimate_tokens(reply.text.len());
    u.truncated = true;
}

/// Two usage objects of one role as one (the planner's retry): tokens and cost summed.
pub(super) fn sum_usage(a: Option<JsonValue>, b: Option<JsonValue>) -> Option<JsonValue> {
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some(mut a), Some(b)) => {
            for k in ["prompt_tokens", "completion_tokens"] {
                a[k] = json!(a[k].as_u64().unwrap_or(0) + b[k].as_u64().unwrap_or(0));
            }
            if let (Some(x), Some(y)) = (a["cost_usd"].as_f64(), b["cost_usd"].as_f64()) {
                a["cost_usd"] = json!(x + y);
            }
            a["model"] = b["model"].clone();
            // Overruns add up like the counts.
            match (
                a.get("over_reservation").cloned(),
                b.get("over_reservation"),
            ) {
                (Some(JsonValue::Object(mut x)), Some(JsonValue::Object(y))) => {
                    for (k, v) in y {
                        let sum = match (x.get(k), v) {
                            (Some(JsonValue::Number(m)), JsonValue::Number(n))
                                if m.is_u64() && n.is_u64() =>
                            {
                                json!(m.as_u64().unwrap_or(0) + n.as_u64().unwrap_or(0))
                            }
                            (Some(JsonValue::Number(m)), JsonValue::Number(n)) => {
                                json!(m.as_f64().unwrap_or(0.0) + n.as_f64().unwrap_or(0.0))
                            }
                            _ => v.clone(),
                        };
                        x.insert(k.clone(), sum);
                    }
                    a["over_reservation"] = JsonValue::Object(x);
                }
                (None, Some(y)) => a["over_reservation"] = y.clone(),
                _ => {}
            }
            Some(a)
        }
    }
}

/// The one-line reason a call did not start.
pub(super) fn ceiling_message(hit: CeilingHit) -> String {
    if hit.overrun {
        return format!(
            "a call reported more usage than it reserved under --{}, so the run takes no more calls (its usage's over_reservation says by how much)",
            hit.ceiling.as_str().replace('_', "-")
        );
    }
    match hit.ceiling {
        Ceiling::MaxTokens => format!(
            "the call needs up to {} tokens and {} are left of --max-tokens",
            hit.needed, hit.left
        ),
        Ceiling::MaxCostUsd => format!(
            "the call may cost up to ${:.6} and ${:.6} is left of --max-cost-usd",
            pico_to_usd(hit.needed),
            pico_to_usd(hit.left)
        ),
    }
}

/// What upstream injection needs of the results so far.
pub(super) fn upstream_view(results: &BTreeMap<String, Done>) -> BTreeMap<String, UpstreamResult> {
    results
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
        .collect()
}

/// A task's latest result.
#[derive(Debug, Clone)]
pub(super) struct Done {
    pub(super) output: String,
    pub(super) ok: bool,
    pub(super) seq: u64,
}

impl<'a, 's> Run<'a, 's> {
    pub(super) fn new(
        store: &'s mut (dyn Storage + Send),
        env: &'a Env<'a>,
        opts: &'a Options,
    ) -> Self {
        Run {
            store: Mutex::new(store),
            env,
            opts,
            calls: AtomicU64::new(0),
            per_model: Mutex::new(BTreeMap::new()),
            written: Mutex::new(Vec::new()),
            started: env.clock.elapsed(),
            meter: Mutex::new(Meter::default()),
            request_seq: Mutex::new(None),
            work: OnceLock::new(),
            secret_block: Mutex::new(None),
            spend: Mutex::new(Spend::new(opts.ceilings)),
            plan_usage: Mutex::new(None),
            heard: command::Heard::new(),
        }
    }

    /// Runs `f` with the commands this thread starts killed when the run is interrupted (under
    /// its interrupt's kill scope; without an interrupt, none) and ended by the watchdog once
    /// quiet for the run's stall time (`[observe] stall`; unset, never), noting on the run's
    /// [`command::Heard`] when they print.
    pub(super) fn scoped<T>(&self, f: impl FnOnce() -> T) -> T {
        let heard = std::sync::Arc::clone(&self.heard);
        command::in_stall(self.opts.observe.stall, || {
            command::in_heard(heard, || match &self.opts.interrupt {
                Some(i) => i.scoped(f),
                None => f(),
            })
        })
    }

    pub(super) fn interrupted(&self) -> Option<String> {
        self.opts.interrupt.as_ref().and_then(|i| i.signal())
    }

    /// Notes the run's request seq (the run's id), for the interruption and its watchers.
    pub(super) fn set_request(&self, seq: u64) {
        *lock(&self.request_seq) = Some(seq);
        if let Some(i) = &self.opts.interrupt {
            i.set_run(seq);
        }
    }

    /// Ends a run that `result` ended: a halt or a signal is witnessed as `halted` and the run
    /// ends [`Status::Halted`]; another interruption (a cancel) is witnessed as `interrupted`.
    /// Either is written under the run's request (when it had one) and synced.
    pub(super) fn finish(&self, result: Result<Outcome, RunError>) -> Result<Outcome, RunError> {
        let Err(RunError::Interrupted { signal, .. }) = result else {
            return result;
        };
        let request_seq = *lock(&self.request_seq);
        if let (Some(r), Some(h)) = (
            request_seq,
            self.opts.interrupt.as_ref().and_then(|i| i.halt()),
        ) {
            return self.witness_halt(r, &signal, h);
        }
        let mut witnessed = None;
        if let Some(r) = request_seq {
            let mut store = lock(&self.store);
            let e = store.append(NewEntry {
                actor: "dispatch".into(),
                kind: kind::INTERRUPTED.into(),
                causal_parent: Some(r as i64),
                payload: Value::from_serde(&json!({
                    "signal": signal,
                    "reason": interrupted_reason(&signal),
                    "resume": format!("git forum resume {r}"),
                })),
                ts: self.env.clock.now(),
            })?;
            store.sync()?;
            lock(&self.written).push(e.seq);
            witnessed = Some(e.seq);
        }
        self.env.progress.event(&Event::Stopped {
            reason: format!("interrupted by {signal}"),
        });
        Err(RunError::Interrupted {
            signal,
            witnessed,
            request_seq,
        })
    }

    /// Witnesses `halted {by, reason}` under the run's request (with the signal, when one
    /// halted it), syncs, and ends the run as [`Status::Halted`].
    fn witness_halt(&self, r: u64, signal: &str, h: Halt) -> Result<Outcome, RunError> {
        let mut payload = json!({
            "by": h.by,
            "reason": h.reason,
            "resume": format!("git forum resume {r}"),
        });
        if signal.starts_with("SIG") {
            payload["signal"] = json!(signal);
        }
        let (seq, frame) = {
            let mut store = lock(&self.store);
            let e = store.append(NewEntry {
                actor: "dispatch".into(),
                kind: kind::HALTED.into(),
                causal_parent: Some(r as i64),
                payload: Value::from_serde(&payload),
                ts: self.env.clock.now(),
            })?;
            store.sync()?;
            // The route frame is a pure function of the request: asked again, not stored.
            let text = store
                .payload_at(r)?
                .map(|b| b.to_serde())
                .and_then(|b| {
                    b.get("text")
                        .and_then(JsonValue::as_str)
                        .map(str::to_string)
                })
                .unwrap_or_default();
            let (_, frame) = crate::route::route_request(&text, self.env.roster);
            (e.seq, frame.payload())
        };
        lock(&self.written).push(seq);
        self.env.progress.event(&Event::Stopped {
            reason: format!("halted by {}: {}", h.by, h.reason),
        });
        let status = Status::Halted {
            by: h.by,
            reason: h.reason,
            seq,
        };
        Ok(self.outcome(status, r, None, BTreeMap::new(), frame))
    }

    pub(super) fn put(
        &self,
        actor: &str,
        kind: &str,
        parent: Option<u64>,
        payload: JsonValue,
    ) -> Result<Entry, RunError> {
        self.put_value(actor, kind, parent, Value::from_serde(&payload))
    }

    pub(super) fn put_value(
        &self,
        actor: &str,
        kind: &str,
        parent: Option<u64>,
        payload: Value,
    ) -> Result<Entry, RunError> {
        Ok(self
            .put_value_at(None, actor, kind, parent, payload)?
            .expect("an append without an expected seq always lands"))
    }

    /// [`Run::put`] as seq `seq` only: `Ok(None)`, with nothing written, when another writer
    /// took that seq first.
    pub(super) fn put_at(
        &self,
        seq: u64,
        actor: &str,
        kind: &str,
        parent: Option<u64>,
        payload: Value,
    ) -> Result<Option<Entry>, RunError> {
        self.put_value_at(Some(seq), actor, kind, parent, payload)
    }

    fn put_value_at(
        &self,
        seq: Option<u64>,
        actor: &str,
        kind: &str,
        parent: Option<u64>,
        payload: Value,
    ) -> Result<Option<Entry>, RunError> {
        let mut store = lock(&self.store);
        if let Some(signal) = self.interrupted() {
            return Err(RunError::Interrupted {
                signal,
                witnessed: None,
                request_seq: None,
            });
        }
        let mut new = NewEntry {
            actor: actor.to_string(),
            kind: kind.to_string(),
            causal_parent: parent.map(|p| p as i64),
            payload,
            ts: self.env.clock.now(),
        };
        // Every body a run writes is scanned here, before it is hashed.
        let redacted = self.screen(&mut **store, &mut new)?;
        let e = match seq {
            None => store.append(new)?,
            Some(seq) => match store.append_at(seq, new)? {
                Some(e) => e,
                None => return Ok(None),
            },
        };
        lock(&self.written).push(e.seq);
        if let Some(hits) = redacted {
            self.witness_redaction(&mut **store, &e, &hits)?;
        }
        Ok(Some(e))
    }

    pub(super) fn over_budget(&self) -> bool {
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
        lock(&self.spend).hit().is_some()
    }

    /// The ceiling that stopped the run, if one did.
    pub(super) fn ceiling_hit(&self) -> Option<Ceiling> {
        lock(&self.spend).hit().map(|h| h.ceiling)
    }

    /// Keeps the planner's usage for the `plan` entry (summed over its attempts).
    pub(super) fn note_plan_usage(&self, usage: Option<JsonValue>) {
        let mut u = lock(&self.plan_usage);
        *u = sum_usage(u.take(), usage);
    }

    /// The `plan` entry's payload, with the planner's usage when it had one.
    pub(super) fn plan_payload(&self, plan: &crate::plan::CompiledPlan) -> JsonValue {
        with_usage(
            super::plan_entry_payload(plan),
            lock(&self.plan_usage).take(),
        )
    }

    /// One counted model call.
    pub(super) fn ask(&self, exec: &dyn Executor, call: &Call<'_>) -> Result<Reply, ExecError> {
        let mut call = *call;
        if let Some(cap) = self.opts.max_output_tokens
            && call.schema.is_none()
        {
            call.max_tokens = Some(call.max_tokens.map_or(cap, |m| m.min(cap)));
        }
        let metering = exec.metering();
        if let Some(cap) = metering.max_tokens {
            call.max_tokens = Some(call.max_tokens.map_or(cap, |m| m.min(cap)));
        }
        // An agent metered while it runs reserves its prompt only: its forwarder holds it to
        // what is left of the ceilings, turn by turn.
        let live = exec.metered_live();
        if self.opts.ceilings.any() && call.max_tokens.is_none() && !live {
            call.max_tokens = Some(UNCAPPED_OUTPUT_TOKENS);
        }
        let call = &call;
        if self.interrupted().is_some() {
            return Err(ExecError::Command(command::CommandError::Interrupted {
                program: exec.model(),
            }));
        }
        // The worst case is reserved before the call starts; one that does not fit never starts.
        // The prompt as the executor can be charged for it, and the output cap (the seat's
        // `max_tokens` when it is lower than the call's own).
        let price = metering.price.unwrap_or_default();
        let worst = Amount::of(
            exec.prompt_tokens_bound(call),
            u64::from(call.max_tokens.unwrap_or(0)),
            price,
        );
        let reservation = lock(&self.spend)
            .reserve(worst)
            .map_err(|hit| ExecError::Ceiling(ceiling_message(hit)))?;
        let spent = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        self.env.progress.event(&Event::Calls {
            spent,
            max: self.opts.max_model_calls,
        });
        let allowance = if live {
            self.agent_allowance(worst)
        } else {
            crate::egress::Ceilings::default()
        };
        let mut r = command::in_allowance(allowance, || exec.call(call));
        // What the agent's forwarder counted is what it spent, whatever the CLI says.
        let metered = if live { command::take_metered() } else { None };
        self.close_on_metered_ceiling(live, metered.and_then(|m| m.ceiling), &r);
        // Under a ceiling, a command worker's estimate is held to what the call reserved.
        if self.opts.ceilings.any()
            && let (Ok(reply), Some(cap)) = (&mut r, call.max_tokens)
        {
            cap_estimate(reply, cap);
        }
        let actual = match &r {
            Ok(reply) => reply
                .usage
                .map(|u| Reported::of(u.input_tokens, u.output_tokens, price)),
            Err(e) if NOTHING_SENT.contains(&e.code()) => Some(Reported::default()),
            Err(_) => None,
        };
        if let Some(m) = metered.filter(|m| m.seen) {
            // Charged whole: the forwarder held the agent to what was left, turn by turn.
            let counted = Reported::of(m.input_tokens, m.output_tokens, price);
            lock(&self.spend).settle_metered(reservation, Some(counted));
        } else {
            let settled = lock(&self.spend).settle(reservation, actual);
            if let Ok(reply) = &mut r {
                note_overrun(reply.usage.as_mut(), settled);
            }
        }
        let model = match &r {
            Ok(reply) => reply.model.clone(),
            Err(_) => exec.model(),
        };
        *lock(&self.per_model).entry(model).or_default() += 1;
        r
    }

    /// What a live-metered agent may spend: what is left of the ceilings and its own
    /// reservation (`worst`), which what its forwarder counts replaces.
    fn agent_allowance(&self, worst: Amount) -> crate::egress::Ceilings {
        let s = lock(&self.spend);
        crate::egress::Ceilings {
            max_tokens: s.tokens_left().map(|t| t.saturating_add(worst.tokens)),
            max_cost_usd: s
                .cost_left_pico()
                .map(|p| pico_to_usd(p.saturating_add(worst.pico))),
        }
    }

    /// Closes the spend on the ceiling an agent's forwarder reached (`ceiling`), or on the
    /// token ceiling when a live-metered call failed on one without saying which.
    fn close_on_metered_ceiling(
        &self,
        live: bool,
        ceiling: Option<&'static str>,
        r: &Result<Reply, ExecError>,
    ) {
        if let Some(ceiling) = ceiling {
            lock(&self.spend).close_on(match ceiling {
                "cost_usd" => Ceiling::MaxCostUsd,
                _ => Ceiling::MaxTokens,
            });
        } else if live && matches!(r, Err(e) if e.code() == "ceiling") {
            lock(&self.spend).close_on(Ceiling::MaxTokens);
        }
    }

    /// Stops the run on its budget or a ceiling: the `budget` entry, then the stop answer.
    pub(super) fn stop_on_budget(&self, request_seq: u64) -> Result<(u64, String), RunError> {
        self.stop_at(request_seq, None)
    }

    /// Stops the run on the ceiling that refused the call of `stage` (`plan`, `synthesis`,
    /// `reviser`, `intent judge`): witnessed as a budget stop that names the stage and why
    /// the call could not start.
    pub(super) fn stop_on_ceiling(
        &self,
        request_seq: u64,
        stage: &str,
    ) -> Result<(u64, String), RunError> {
        self.stop_at(request_seq, Some(stage))
    }

    fn stop_at(&self, request_seq: u64, stage: Option<&str>) -> Result<(u64, String), RunError> {
        let calls = self.calls.load(Ordering::SeqCst);
        let mut payload = json!({"model_calls": calls, "reason": "run stopped on budget"});
        let (hit, spent, overrun) = {
            let s = lock(&self.spend);
            (s.hit(), s.spent(), s.overrun())
        };
        if let Some(hit) = hit {
            // A spend ceiling: named, with what was spent against it (Forum's two keys stay).
            let name = hit.ceiling.as_str();
            payload["reason"] = json!(match (&overrun, hit.overrun) {
                (Some(o), true) => format!(
                    "run stopped on its {name} ceiling: a call reported {} tokens against the {} it reserved",
                    o.reported.tokens, o.reserved.tokens
                ),
                _ => format!("run stopped on its {name} ceiling"),
            });
            if let Some(o) = &overrun {
                payload["over_reservation"] = overrun_value(o);
            }
            payload["ceiling"] = json!(name);
            payload["tokens"] = json!(spent.tokens);
            payload["cost_usd"] = json!(pico_to_usd(spent.pico));
            let c = self.opts.ceilings;
            if let Some(t) = c.max_tokens {
                payload["max_tokens"] = json!(t);
            }
            if let Some(p) = c.max_cost_pico {
                payload["max_cost_usd"] = json!(pico_to_usd(p));
            }
            if let Some(stage) = stage {
                payload["stage"] = json!(stage);
                if hit.needed > 0 || hit.overrun {
                    payload["detail"] = json!(ceiling_message(hit));
                }
            }
        }
        // A planner call that answered before the stop, with no plan entry to carry it.
        if let Some(u) = lock(&self.plan_usage).take() {
            payload["usage"] = u;
        }
        self.put("budget", kind::BUDGET, Some(request_seq), payload)?;
        let a = self.put(
            "synthesizer",
            kind::RESULT,
            Some(request_seq),
            json!({"answer": BUDGET_STOP_ANSWER}),
        )?;
        self.env.progress.event(&Event::Stopped {
            reason: "budget".into(),
        });
        Ok((a.seq, BUDGET_STOP_ANSWER.to_string()))
    }

    /// The planner's usage not yet witnessed (its attempts, when planning failed).
    pub(super) fn take_plan_usage(&self) -> Option<JsonValue> {
        lock(&self.plan_usage).take()
    }

    pub(super) fn outcome(
        &self,
        status: Status,
        request_seq: u64,
        answer: Option<(u64, String)>,
        verdicts: BTreeMap<String, u64>,
        frame: Value,
    ) -> Outcome {
        let ceiling = self.ceiling_hit().map(Ceiling::as_str);
        // A stop that a spend ceiling caused is a ceiling stop, whichever check saw it first.
        let status = match status {
            Status::StoppedOnBudget if ceiling.is_some() => Status::StoppedOnCeiling,
            s => s,
        };
        Outcome {
            status,
            request_seq,
            answer_seq: answer.as_ref().map(|a| a.0),
            answer: answer.map(|a| a.1),
            written: lock(&self.written).clone(),
            calls: lock(&self.per_model).clone(),
            verdicts,
            route_frame: frame,
            ceiling,
            spent: lock(&self.spend).spent(),
        }
    }

    pub(super) fn entries(&self) -> Result<Vec<Entry>, RunError> {
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

    pub(super) fn payload_of(&self, e: &Entry) -> Result<Option<JsonValue>, RunError> {
        Ok(lock(&self.store).payload_at(e.seq)?.map(|v| v.to_serde()))
    }

    pub(super) fn checkpoint_root(&self) -> Result<String, RunError> {
        let store = lock(&self.store);
        let mut acc = Accumulator::default();
        for seq in 0..store.len()? {
            if let Some(e) = store.get(seq)? {
                acc.push(&e.entry_hash);
            }
        }
        Ok(acc.root())
    }
}

/// The `reason` of an `interrupted` entry, true to its cause: an MCP client's cancel kills the
/// cancelled run's commands (its interrupt's kill scope), a signal kills every command of the
/// process; either way the run writes nothing more. (A daemon's drain stops a run at its next
/// budget check instead, and the daemon words that entry itself.)
pub(super) fn interrupted_reason(signal: &str) -> String {
    if signal == "notifications/cancelled" {
        "the MCP client cancelled the call (notifications/cancelled) while the run was in flight; the commands this run had running were killed with their process groups, and it wrote nothing more".to_string()
    } else {
        format!(
            "git forum was interrupted by {signal} while the run was in flight; every command it had running was killed with its process group, and the run wrote nothing more"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{cap_estimate, interrupted_reason};
    use crate::exec::{Reply, Usage};

    fn reply(text: &str, estimated: bool) -> Reply {
        Reply {
            text: text.to_string(),
            model: "m".into(),
            usage: Some(Usage {
                input_tokens: 3,
                output_tokens: text.len().div_ceil(4) as u64,
                estimated,
                truncated: false,
                over_reservation: None,
            }),
            elapsed: std::time::Duration::ZERO,
        }
    }

    #[test]
    fn an_estimate_past_the_cap_is_cut_to_the_cap_and_marked() {
        let mut r = reply(&"é".repeat(100), true);
        cap_estimate(&mut r, 10);
        let u = r.usage.unwrap();
        assert!(r.text.len() <= 40 && r.text.chars().all(|c| c == 'é'));
        assert_eq!(u.output_tokens, 10);
        assert!(u.truncated && u.estimated);
        assert_eq!(u.input_tokens, 3);
        // Within the cap, or counted by a provider: untouched.
        let mut r = reply("short", true);
        cap_estimate(&mut r, 10);
        assert!(!r.usage.unwrap().truncated);
        let mut r = reply(&"x".repeat(400), false);
        cap_estimate(&mut r, 10);
        assert_eq!(r.text.len(), 400);
    }

    #[test]
    fn the_interrupted_reason_names_its_cause_and_what_was_killed() {
        let cancel = interrupted_reason("notifications/cancelled");
        assert!(
            cancel.starts_with("the MCP client cancelled the call"),
            "{cancel}"
        );
        assert!(
            cancel.contains("the commands this run had running were killed"),
            "{cancel}"
        );
        let signal = interrupted_reason("SIGTERM");
        assert!(signal.contains("interrupted by SIGTERM"), "{signal}");
        assert!(
            signal.contains("every command it had running was killed"),
            "{signal}"
        );
    }
}
