//! How a run takes in context: the request's before planning and each task's before it runs,
//! through the context provider and the context budget, witnessed as `context` and
//! `context_budget`.

use serde_json::json;

use crate::context::{self, Source};
use crate::ledger::{Storage, kind};
use crate::plan::Task;

use super::engine::Run;
use super::{ContextFailure, ContextTurns, Event, RunError, Take, lock, panic_message};

/// Per-task context longer than this many code points is cut (without a context budget), as
/// in Forum.
pub const MAX_TASK_CONTEXT_CHARS: usize = 8192;

/// The marker after per-task context cut to [`MAX_TASK_CONTEXT_CHARS`] (the full context is
/// not witnessed, so it does not say so).
pub const TASK_CONTEXT_CUT_MARKER: &str = "\n... [truncated for prompt efficiency]";

/// Per-task context without a budget: at most [`MAX_TASK_CONTEXT_CHARS`] code points, then
/// [`TASK_CONTEXT_CUT_MARKER`] (forum-spec §9).
pub fn cap_task_context(text: &str) -> String {
    match text.char_indices().nth(MAX_TASK_CONTEXT_CHARS) {
        Some((i, _)) => format!("{}{TASK_CONTEXT_CUT_MARKER}", &text[..i]),
        None => text.to_string(),
    }
}

/// What a `context` entry keeps beside the text the context budget admitted, when the budget
/// left some out, so a strict replay can apply the budget again: `seen_bytes`, the length of
/// the text it saw, and on a cut, `next`, the first character after the cut (the budget read
/// it to decide where the cut fell). Never more of what it left out.
pub(super) type Seen = serde_json::Map<String, serde_json::Value>;

fn seen(text: &str, bytes: u64, admitted: &str, p: &context::Pressure) -> Option<Seen> {
    if bytes <= admitted.len() as u64 {
        return None;
    }
    let mut kept = Seen::new();
    kept.insert("seen_bytes".into(), json!(bytes));
    let next = text.get(admitted.len()..).and_then(|r| r.chars().next());
    if p.action == context::Action::Trimmed
        && let Some(c) = next
    {
        kept.insert("next".into(), json!(c.to_string()));
    }
    Some(kept)
}

/// A task's stay in its wave, for the order its takes from the context budget follow (see
/// [`ContextTurns`]): it entered when this was made and leaves when it is dropped, however
/// the task ends.
pub(super) struct InWave<'a> {
    turns: Option<&'a dyn ContextTurns>,
    task: &'a str,
}

impl Drop for InWave<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.turns {
            t.task(self.task, false);
        }
    }
}

/// One thread of a wave, for [`ContextTurns`]: it says so when it ends, however it ends.
pub(super) struct WaveThread<'a>(Option<&'a dyn ContextTurns>);

impl Drop for WaveThread<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.0 {
            t.thread_ended();
        }
    }
}

impl Run<'_, '_> {
    /// A wave begins, taken by `threads` threads, each of which holds one of the returned
    /// guards while it runs.
    pub(super) fn wave_threads(&self, threads: usize) -> Vec<WaveThread<'_>> {
        let turns = self.opts.context_turns.as_deref();
        if let Some(t) = turns {
            t.wave(threads);
        }
        (0..threads).map(|_| WaveThread(turns)).collect()
    }

    /// `task` enters its wave until the returned guard is dropped.
    pub(super) fn in_wave<'a>(&'a self, task: &'a str) -> InWave<'a> {
        let turns = self.opts.context_turns.as_deref();
        if let Some(t) = turns {
            t.task(task, true);
        }
        InWave { turns, task }
    }

    /// Runs `f`, one take of `task`'s from the context budget and the witnessing of what it
    /// took, in its turn: at once in a live run, in the record's order in a strict replay.
    pub(super) fn in_turn<R>(&self, task: &str, take: Take, f: impl FnOnce() -> R) -> R {
        let turns = self.opts.context_turns.as_deref();
        if let Some(t) = turns {
            t.wait(task, take);
        }
        let r = f();
        if let Some(t) = turns {
            t.done(task, take);
        }
        r
    }

    /// Puts context text through the context budget (witnessing the pressure under `parent`
    /// when the text was not empty), or returns it as it is without a budget; with what the
    /// `context` entry keeps of a text the budget cut (see [`Seen`]).
    pub(super) fn budgeted(
        &self,
        source: Source,
        label: &str,
        text: String,
        parent: u64,
    ) -> Result<(String, Option<Seen>), RunError> {
        let Some(budget) = &self.opts.context_budget else {
            return Ok((text, None));
        };
        // A replay's provider hands the start of a longer text, and says how long it was.
        let bytes = self
            .opts
            .context
            .as_ref()
            .and_then(|c| c.seen_bytes((source == Source::Task).then_some(label)))
            .unwrap_or(text.len() as u64);
        // The take is witnessed before the meter is let go, so the record's order is the
        // order the slices took from the run-wide total in.
        let take = || {
            let mut meter = lock(&self.meter);
            let (admitted, p) =
                context::apply_seen(budget, &mut meter, source, label, &text, bytes);
            if p.original_tokens > 0 {
                self.put_value(
                    "context-budget",
                    kind::CONTEXT_BUDGET,
                    Some(parent),
                    p.payload(),
                )?;
            }
            Ok::<_, RunError>((admitted, p))
        };
        let (admitted, p) = match source {
            Source::Task => self.in_turn(label, Take::Task, take)?,
            _ => take()?,
        };
        let kept = seen(&text, bytes, &admitted, &p);
        Ok((admitted, kept))
    }

    /// Witnesses a provider's failure under `parent`: a `context` entry with no context, the
    /// failure's code and why. The run goes on without that context.
    pub(super) fn context_failed(
        &self,
        task: Option<&str>,
        parent: u64,
        f: &ContextFailure,
    ) -> Result<(), RunError> {
        let reason = format!(
            "the context provider failed: {}; the run goes on without this context",
            f.message
        );
        let mut payload = json!({"context": "", "error": f.code, "reason": reason});
        if let Some(t) = task {
            payload["task"] = json!(t);
        }
        self.put("context", kind::CONTEXT, Some(parent), payload)?;
        self.env.progress.event(&Event::ContextFailed {
            task: task.map(str::to_string),
            reason: f.message.clone(),
        });
        Ok(())
    }

    /// The request context (witnessed as `context` under the request, after its budget
    /// pressure), and what the plan chains to: that entry, else the request.
    pub(super) fn request_context(
        &self,
        request: &str,
        request_seq: u64,
    ) -> Result<(Option<String>, u64), RunError> {
        let Some(provider) = self.opts.context.clone() else {
            return Ok((None, request_seq));
        };
        self.env.progress.event(&Event::Context { task: None });
        let got = {
            let store = lock(&self.store);
            let ledger: &dyn Storage = &**store;
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                provider.request_context(request, ledger)
            }))
            .unwrap_or_else(|p| {
                Err(ContextFailure {
                    code: "panic".into(),
                    message: format!("it panicked: {}", panic_message(p.as_ref())),
                })
            })
        };
        let text = match got {
            Ok(t) => t,
            Err(f) => {
                self.context_failed(None, request_seq, &f)?;
                return Ok((None, request_seq));
            }
        };
        let (text, seen) = self.budgeted(Source::Request, "request", text, request_seq)?;
        self.witness_context(None, request_seq, text, seen)
    }

    /// Fresh context for one task (witnessed as `context {task, context}` under the plan,
    /// after its budget pressure), and what the task entry chains to: that entry, else the
    /// plan.
    pub(super) fn task_context(
        &self,
        task: &Task,
        plan_seq: u64,
    ) -> Result<(Option<String>, u64), RunError> {
        let Some(provider) = self.opts.context.clone() else {
            return Ok((None, plan_seq));
        };
        let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            provider.task_context(&task.id, &task.instruction)
        }))
        .unwrap_or_else(|p| {
            Some(Err(ContextFailure {
                code: "panic".into(),
                message: format!("it panicked: {}", panic_message(p.as_ref())),
            }))
        });
        let text = match got {
            None => return Ok((None, plan_seq)),
            Some(Ok(t)) => t,
            Some(Err(f)) => {
                self.context_failed(Some(&task.id), plan_seq, &f)?;
                return Ok((None, plan_seq));
            }
        };
        self.env.progress.event(&Event::Context {
            task: Some(task.id.clone()),
        });
        let (text, seen) = if self.opts.context_budget.is_some() {
            self.budgeted(Source::Task, &task.id, text, plan_seq)?
        } else {
            (cap_task_context(&text), None)
        };
        self.witness_context(Some(&task.id), plan_seq, text, seen)
    }

    /// Witnesses the context `text` the request (`task` `None`) or a task takes, with what the
    /// budget saw of it (`seen`), as a `context` entry under `parent`; returns the text and the
    /// seq a later entry chains to: that entry, else `parent` when there is no text. Nothing is
    /// witnessed for an empty text the budget did not cut; context the budget left none of is
    /// witnessed (for a replay) but chains nothing.
    fn witness_context(
        &self,
        task: Option<&str>,
        parent: u64,
        text: String,
        seen: Option<Seen>,
    ) -> Result<(Option<String>, u64), RunError> {
        if text.is_empty() && seen.is_none() {
            return Ok((None, parent));
        }
        let mut body = json!({"context": text});
        if let Some(b) = body.as_object_mut() {
            if let Some(t) = task {
                b.insert("task".into(), json!(t));
            }
            b.extend(seen.unwrap_or_default());
        }
        let e = self.put("context", kind::CONTEXT, Some(parent), body)?;
        if text.is_empty() {
            return Ok((None, parent));
        }
        Ok((Some(text), e.seq))
    }
}
