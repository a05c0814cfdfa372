//! The run engine: one run's state (its ledger, budget counters, what it wrote) and the
//! plumbing every step shares: witnessing entries, counting model calls against the budget,
//! reading the ledger back, and witnessing an interruption.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use serde_json::{Value as J, json};

use crate::context::Meter;
use crate::exec::{Call, ExecError, Executor, Reply, command};
use crate::ledger::canonical::Value;
use crate::ledger::merkle::Accumulator;
use crate::ledger::{Entry, NewEntry, Storage, kind};
use crate::plan::UpstreamResult;

use super::changes::WorkRun;
use super::interrupt::Halt;
use super::{BUDGET_STOP_ANSWER, Env, Event, Options, Outcome, RunError, Status, lock};

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
    pub(super) secret_block: Mutex<Option<super::secrets::Blocked>>,
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
        }
    }

    /// Runs `f` with the commands this thread starts killed when the run is interrupted (under
    /// its interrupt's kill scope); without an interrupt, just runs `f`.
    pub(super) fn scoped<T>(&self, f: impl FnOnce() -> T) -> T {
        match &self.opts.interrupt {
            Some(i) => i.scoped(f),
            None => f(),
        }
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
                .and_then(|b| b.get("text").and_then(J::as_str).map(str::to_string))
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
        payload: J,
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
        let e = store.append(new)?;
        lock(&self.written).push(e.seq);
        if let Some(hits) = redacted {
            self.witness_redaction(&mut **store, &e, &hits)?;
        }
        Ok(e)
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
        false
    }

    /// One counted model call.
    pub(super) fn ask(&self, exec: &dyn Executor, call: &Call<'_>) -> Result<Reply, ExecError> {
        let mut call = *call;
        if let Some(cap) = self.opts.max_output_tokens
            && call.schema.is_none()
        {
            call.max_tokens = Some(call.max_tokens.map_or(cap, |m| m.min(cap)));
        }
        let call = &call;
        if self.interrupted().is_some() {
            return Err(ExecError::Command(command::RunError::Interrupted {
                program: exec.model(),
            }));
        }
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

    pub(super) fn stop_on_budget(&self, request_seq: u64) -> Result<(u64, String), RunError> {
        let calls = self.calls.load(Ordering::SeqCst);
        self.put(
            "budget",
            kind::BUDGET,
            Some(request_seq),
            json!({"model_calls": calls, "reason": "run stopped on budget"}),
        )?;
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

    pub(super) fn outcome(
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

    pub(super) fn payload_of(&self, e: &Entry) -> Result<Option<J>, RunError> {
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
    use super::interrupted_reason;

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
