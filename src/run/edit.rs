//! The built-in editing worker: when a `--work` task's worker is a chat
//! executor (OpenAI-compatible or Anthropic), the task runs as a tool conversation in its
//! worktree instead of one prompt. Each turn is a model call counted against the run's budget;
//! each tool call is witnessed as `tool_call` under the task's entry (or the rung's
//! escalation) and its outcome as `tool_result` under the call, bodies capped. The loop stops
//! at `--max-tool-calls`; a model that answers without tools, or with only malformed calls,
//! gets one corrective turn, then the task fails with the reason in its `result`
//! (`no_tool_call`, `malformed_tool_call`). Each turn's output is capped, lower on a small or
//! local seat, so that a model that writes instead of calling a tool cannot fill its context
//! and is done in two short replies. An endpoint
//! that rejects `tools` is asked once more for a structured reply (file writes or a diff) that
//! is carried out the same way. The task's `result` closes the loop, and the commit, `change`
//! and checks follow as for any worker (`changes.rs`).
//!
//! The pure parts (tool specs, arguments, path rules, the loop's bookkeeping) are
//! `edit_tools.rs`; the file system is behind [`Hands`].

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use crate::exec::tool_chat::{Msg, ToolChat, ToolOutput, ToolUse, Turn, rejects_tools};
use crate::exec::{Call, ExecError, Executor, Reply, command};
use crate::ledger::kind;
use crate::plan::Task;
use crate::spend::{Amount, Reported, prompt_tokens_upper_bound};

use super::edit_tools::{
    ENTRY_BODY_CAP, Hands, Loop, MODEL_OUTPUT_CAP, Next, Op, Outcome, cap_text, fallback_schema,
    parse_fallback, parse_op, shown_call, specs,
};
use super::engine::{Done, Run, sum_usage, usage_of, with_usage};
use super::prompts::worker_system;
use super::work_state::{WorkRun, criteria_commands};
use super::workbench::TaskTree;
use super::{Event, RunError, lock};

/// Tokens each turn may generate (a `write_file` carries a whole file).
const TURN_TOKENS: u32 = 4096;

/// Tokens each turn of a run on a small or local seat (verification tier 3) may generate.
/// Such models have small contexts (git forum's own model gets 4,096 tokens a request), and
/// one that does not call a tool tends to write until its cap: a reply as long as the context
/// would fill it and take minutes. Half of it still carries a tool call that writes a file of
/// a few hundred lines, and two replies without a tool call end the task.
const SMALL_SEAT_TURN_TOKENS: u32 = 2048;

/// What one worker turn may generate: [`TURN_TOKENS`] ([`SMALL_SEAT_TURN_TOKENS`] on a small
/// or local seat), no more than `--max-output-tokens` or the seat's own `max_tokens`.
fn turn_tokens(small_seat: bool, max_output: Option<u32>, seat_cap: Option<u32>) -> u32 {
    let mut tokens = if small_seat {
        SMALL_SEAT_TURN_TOKENS
    } else {
        TURN_TOKENS
    };
    for cap in [max_output, seat_cap].into_iter().flatten() {
        tokens = tokens.min(cap);
    }
    tokens
}

/// Whether `w` runs on a small or local seat (verification tier 3).
fn small_seat(w: &WorkRun) -> bool {
    w.verification.as_ref().is_some_and(|v| v.tier >= 3)
}

/// How the editing worker is told to work.
const EDIT_SYSTEM: &str = "You change files in a git worktree with the tools you are given. \
Read before you write, keep the change small, run the allowed commands to check your work when \
there are any, and when the change is made answer with a short plain report (no tool call). \
Paths are relative to the worktree; paths that leave it are refused.";

/// What `result` says when the model finished without a report.
pub(crate) const NO_REPORT: &str = "the editing worker finished without a report";

/// The model a task's conversation last named, the usage its turns counted (summed, and each
/// turn's), how many model turns it asked for (the `result` records it, each `tool_call` its
/// turn, so a strict replay can tell which calls came in one reply), and the worktree listing
/// a structured reply was asked with. A strict replay answers each turn's usage from
/// `turn_usage`, since where a spend ceiling stops a conversation depends on each turn's.
struct Seen {
    model: String,
    usage: Option<Value>,
    turns: u32,
    per_turn: Vec<Value>,
    /// Each turn's text, cut to what an entry keeps: a strict replay sends it back in the
    /// conversation as the turn did, so each turn reserves as much as it did.
    texts: Vec<String>,
    texts_cut: bool,
    listing: Option<String>,
}

impl Seen {
    /// Notes a turn's model and adds its usage.
    fn note(&mut self, exec: &dyn Executor, turn: &Turn) {
        self.model = turn.model.clone();
        let at = (self.turns as usize).saturating_sub(1);
        if self.texts.len() <= at {
            self.texts.resize(at + 1, String::new());
        }
        let (text, cut) = cap_text(&turn.text, ENTRY_BODY_CAP);
        self.texts[at] = text;
        self.texts_cut |= cut;
        let reply = Reply {
            text: String::new(),
            model: turn.model.clone(),
            usage: turn.usage,
            elapsed: std::time::Duration::ZERO,
        };
        self.add(usage_of(exec, &reply));
    }

    /// Adds the usage of the turn being asked (the last counted) to the sum and keeps it as
    /// that turn's, without the model the `result` names.
    fn add(&mut self, usage: Option<Value>) {
        let at = (self.turns as usize).saturating_sub(1);
        if self.per_turn.len() <= at {
            self.per_turn.resize(at + 1, Value::Null);
        }
        let mut own = usage.clone().unwrap_or(Value::Null);
        if let Some(o) = own.as_object_mut() {
            o.remove("model");
        }
        self.per_turn[at] = own;
        self.usage = sum_usage(self.usage.take(), usage);
    }

    /// The `result` fields of the conversation beyond its usage: its turns, each turn's
    /// usage (`null` for a turn that reported none) and the listing, when it was asked for.
    fn fields(&mut self, payload: &mut Value) {
        self.per_turn.resize(self.turns as usize, Value::Null);
        payload["turns"] = json!(self.turns);
        payload["turn_usage"] = Value::Array(std::mem::take(&mut self.per_turn));
        if !self.texts.is_empty() {
            self.texts.resize(self.turns as usize, String::new());
            payload["turn_texts"] = json!(std::mem::take(&mut self.texts));
        }
        if self.texts_cut {
            payload["turn_texts_truncated"] = json!(true);
        }
        if let Some(l) = self.listing.take() {
            payload["listing"] = json!(l);
        }
    }
}

/// A tool call's arguments as [`parse_op`] read them.
type ParsedCall = Result<Result<Op, super::edit_tools::ToolRefusal>, super::edit_tools::Malformed>;

/// What a model without tools is asked for instead.
const FALLBACK_NOTE: &str = "\n\nThis endpoint takes no tools. Answer with one JSON object \
instead: \"writes\" (a list of {\"path\", \"content\"}: each file's whole new content, paths \
relative to the worktree), \"diff\" (a unified diff, or \"\") and \"report\" (what you changed). \
The files of the worktree:\n";

/// How a witnessed call came: a tool call of the model (with its id) or an edit of a
/// structured reply.
#[derive(Clone, Copy)]
enum Via<'a> {
    Tools(&'a str),
    Structured,
}

/// How a loop ended when it did not finish: its code and reason, and what the `result` keeps
/// for a strict replay to give the same end back (`failure` of a failed model turn or
/// structured reply, `reply` of a structured reply that was not the edits asked for).
struct Failed {
    code: &'static str,
    reason: String,
    kept: Option<(&'static str, Value)>,
}

impl Failed {
    fn new(code: &'static str, reason: String) -> Failed {
        Failed {
            code,
            reason,
            kept: None,
        }
    }

    /// A structured reply `text` that was not the edits asked for, kept so a strict replay
    /// reads it again.
    fn not_edits(text: &str, reason: String) -> Failed {
        let (text, cut) = cap_text(text, ENTRY_BODY_CAP);
        let mut kept = json!({"text": text});
        if cut {
            kept["cut"] = json!(true);
        }
        Failed {
            kept: Some(("reply", kept)),
            ..Failed::new("malformed_fallback", reason)
        }
    }

    /// A failed model call: its class and what it kept (no failure is kept of a call a spend
    /// ceiling refused, which never started).
    fn call(e: &ExecError, reason: String) -> Failed {
        let kept = (e.code() != "ceiling").then(|| ("failure", super::failure::kept(e)));
        Failed {
            code: e.code(),
            reason,
            kept,
        }
    }
}

impl Run<'_, '_> {
    /// The hands for `task` when its worker `exec` can hold a tool conversation.
    pub(super) fn edit_hands(
        &self,
        w: &WorkRun,
        task: &Task,
        exec: &Arc<dyn Executor>,
        tree: &TaskTree,
    ) -> Option<Arc<dyn Hands>> {
        exec.tool_chat()?;
        w.bench
            .hands(tree, &allowed(w, task), w.deadline, w.output_cap)
    }

    /// One model turn of a tool conversation, counted like [`Run::ask`].
    #[allow(clippy::too_many_arguments)]
    fn ask_turn(
        &self,
        exec: &dyn Executor,
        chat: &dyn ToolChat,
        system: &str,
        messages: &[Msg],
        tools: &[crate::exec::tool_chat::ToolSpec],
        small: bool,
    ) -> Result<Turn, ExecError> {
        if self.interrupted().is_some() {
            return Err(ExecError::Command(command::CommandError::Interrupted {
                program: exec.model(),
            }));
        }
        let metering = exec.metering();
        let tokens = turn_tokens(small, self.opts.max_output_tokens, metering.max_tokens);
        // A turn reserves its worst case against the spend ceilings like any model call
        // (`Run::ask`): the conversation so far, as its debug text (longer than what is sent,
        // so the bound holds), plus the output cap. One that does not fit never starts.
        let price = metering.price.unwrap_or_default();
        let prompt_bytes =
            system.len() + format!("{messages:?}").len() + format!("{tools:?}").len();
        let worst = Amount::of(
            prompt_tokens_upper_bound(prompt_bytes),
            u64::from(tokens),
            price,
        );
        let reservation = lock(&self.spend)
            .reserve(worst)
            .map_err(|hit| ExecError::Ceiling(super::engine::ceiling_message(hit)))?;
        let spent = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        self.env.progress.event(&Event::Calls {
            spent,
            max: self.opts.max_model_calls,
        });
        let mut r = chat.turn(system, messages, tools, tokens);
        let actual = match &r {
            Ok(t) => t
                .usage
                .map(|u| Reported::of(u.input_tokens, u.output_tokens, price)),
            Err(e) if super::engine::NOTHING_SENT.contains(&e.code()) => Some(Reported::default()),
            Err(_) => None,
        };
        let settled = lock(&self.spend).settle(reservation, actual);
        if let Ok(t) = &mut r {
            super::engine::note_overrun(t.usage.as_mut(), settled);
        }
        let model = match &r {
            Ok(t) => t.model.clone(),
            Err(_) => exec.model(),
        };
        *lock(&self.per_model).entry(model).or_default() += 1;
        r
    }

    /// Witnesses one tool call and what it gave; returns what the model is told.
    #[allow(clippy::too_many_arguments)]
    fn witness_tool(
        &self,
        task: &Task,
        parent: u64,
        (n, turn): (u32, u32),
        tool: &str,
        args: &str,
        via: Via<'_>,
        outcome: &Outcome,
    ) -> Result<String, RunError> {
        let (arguments, cut) = cap_text(args, ENTRY_BODY_CAP);
        let mut body = json!({"task": task.id, "n": n, "turn": turn, "tool": tool,
                              "arguments": arguments, "truncated": cut});
        match via {
            // The call's id goes back to the model with the conversation, so a strict replay
            // sends it back as well.
            Via::Tools(id) => {
                body["via"] = json!("tools");
                body["call_id"] = json!(cap_text(id, 256).0);
            }
            Via::Structured => body["via"] = json!("structured"),
        }
        let call = self.put(&task.agent, kind::TOOL_CALL, Some(parent), body)?;
        let (verb, target) = shown_call(tool, args);
        self.env.progress.event(&Event::ToolCall {
            id: task.id.clone(),
            verb,
            target,
            ok: outcome.ok,
        });
        let (output, cut) = cap_text(&outcome.text, ENTRY_BODY_CAP);
        self.put(
            "tools",
            kind::TOOL_RESULT,
            Some(call.seq),
            json!({"task": task.id, "n": n, "tool": tool, "ok": outcome.ok,
                   "refused": outcome.refused, "output": output, "truncated": cut}),
        )?;
        Ok(cap_text(&outcome.text, MODEL_OUTPUT_CAP).0)
    }

    /// Runs `task` as a tool conversation in its worktree (`tree`) and witnesses its `result`
    /// under `parent` (the tool entries hang there too). The prompt names no host path; when
    /// it names one (`named`: only a strict replay of a run recorded when prompts did), the
    /// result keeps it as that run's did.
    pub(super) fn edit_attempt(
        &self,
        w: &WorkRun,
        task: &Task,
        exec: &Arc<dyn Executor>,
        prompt: &str,
        (parent, named): (u64, Option<&std::path::Path>),
        hands: &dyn Hands,
    ) -> Result<Done, RunError> {
        self.env.progress.event(&Event::TaskStarted {
            id: task.id.clone(),
            agent: task.agent.clone(),
            model: exec.model(),
        });
        let mut seen = Seen {
            model: exec.model(),
            usage: None,
            turns: 0,
            per_turn: Vec::new(),
            texts: Vec::new(),
            texts_cut: false,
            listing: None,
        };
        let ended = match exec.tool_chat() {
            Some(chat) => self.tool_loop(w, task, exec, chat, prompt, parent, hands, &mut seen)?,
            None => Err(Failed::new(
                "other",
                "this worker holds no tool conversation".into(),
            )),
        };
        let (output, ok, error, kept) = match ended {
            Ok(report) if report.trim().is_empty() => (NO_REPORT.to_string(), true, None, None),
            Ok(report) => (report, true, None, None),
            Err(f) => (format!("error: {}", f.reason), false, Some(f.code), f.kept),
        };
        let mut payload = json!({"id": task.id, "output": output, "ok": ok, "model": seen.model});
        if let Some((field, body)) = kept {
            payload[field] = body;
        }
        if let Some(path) = named {
            payload["worktree"] = json!(path.display().to_string());
        }
        seen.fields(&mut payload);
        if let Some(code) = error {
            payload["error"] = json!(code);
        }
        let Seen { model, usage, .. } = seen;
        self.finish_task(task, parent, with_usage(payload, usage), output, ok, model)
    }

    #[allow(clippy::too_many_arguments)]
    fn tool_loop(
        &self,
        w: &WorkRun,
        task: &Task,
        exec: &Arc<dyn Executor>,
        chat: &dyn ToolChat,
        prompt: &str,
        parent: u64,
        hands: &dyn Hands,
        seen: &mut Seen,
    ) -> Result<Result<String, Failed>, RunError> {
        let commands = allowed(w, task);
        let category = self
            .env
            .roster
            .get(&task.agent)
            .map(|a| a.category.as_str());
        let system = format!("{}\n\n{EDIT_SYSTEM}", worker_system(&task.agent, category));
        let tools = specs(&commands);
        let mut messages = vec![Msg::User(prompt.to_string())];
        let mut lp = Loop::new(w.max_tool_calls);
        loop {
            if self.over_budget() {
                return Ok(Err(Failed::new(
                    "budget",
                    "the run's budget ran out during the tool loop".into(),
                )));
            }
            seen.turns += 1;
            let asked = self.ask_turn(
                exec.as_ref(),
                chat,
                &system,
                &messages,
                &tools,
                small_seat(w),
            );
            let turn = match asked {
                Ok(t) => t,
                Err(e) if rejects_tools(&e) && lp.calls == 0 => {
                    let tokens = turn_tokens(small_seat(w), None, None);
                    return self.fallback(
                        task, exec, &system, prompt, parent, hands, &mut lp, seen, tokens,
                    );
                }
                Err(e) => {
                    return Ok(Err(Failed::call(&e, e.to_string())));
                }
            };
            seen.note(exec.as_ref(), &turn);
            let parsed = parse_calls(&turn.calls, &commands);
            let malformed = parsed.iter().filter(|p| p.is_err()).count();
            let next = lp.after_turn(turn.calls.len(), malformed);
            match next {
                Next::Finish => return Ok(Ok(turn.text)),
                Next::Fail(code, reason) => return Ok(Err(Failed::new(code, reason))),
                Next::Correct(_) | Next::Carry => {}
            }
            let at = (parent, seen.turns);
            let carried = self.carry_calls(task, at, hands, &mut lp, &turn.calls, parsed)?;
            let outputs = match carried {
                Ok(outputs) => outputs,
                Err(failed) => return Ok(Err(failed)),
            };
            messages.push(Msg::Assistant {
                text: turn.text.clone(),
                calls: turn.calls.clone(),
            });
            if !outputs.is_empty() {
                messages.push(Msg::Results(outputs));
            }
            if let Next::Correct(note) = next {
                messages.push(Msg::User(note));
            }
        }
    }

    /// Carries out one turn's calls in order, each witnessed; fails when the loop runs out of
    /// tool calls first.
    fn carry_calls(
        &self,
        task: &Task,
        (parent, turn): (u64, u32),
        hands: &dyn Hands,
        lp: &mut Loop,
        calls: &[ToolUse],
        parsed: Vec<ParsedCall>,
    ) -> Result<Result<Vec<ToolOutput>, Failed>, RunError> {
        let mut outputs = Vec::new();
        for (call, p) in calls.iter().zip(parsed) {
            if !lp.room() {
                return Ok(Err(Failed::new(
                    "max_tool_calls",
                    format!(
                        "the model made {} tool calls without finishing (--max-tool-calls {})",
                        lp.calls, lp.max_calls
                    ),
                )));
            }
            lp.count();
            let outcome = match p {
                Err(m) => Outcome::failed(format!("malformed call: {m}")),
                Ok(Err(r)) => Outcome::refused(r.0),
                Ok(Ok(op)) => hands.carry(&op),
            };
            let told = self.witness_tool(
                task,
                parent,
                (lp.calls, turn),
                &call.name,
                &call.raw,
                Via::Tools(&call.id),
                &outcome,
            )?;
            outputs.push(ToolOutput {
                id: call.id.clone(),
                content: told,
                is_error: !outcome.ok,
            });
        }
        Ok(Ok(outputs))
    }

    /// The structured reply of an endpoint that rejects tools: one call with the edits schema,
    /// each write or diff carried out and witnessed like a tool call (`via: "structured"`,
    /// with the arguments the reply gave, refused or not, so a strict replay can rebuild it).
    #[allow(clippy::too_many_arguments)]
    fn fallback(
        &self,
        task: &Task,
        exec: &Arc<dyn Executor>,
        system: &str,
        prompt: &str,
        parent: u64,
        hands: &dyn Hands,
        lp: &mut Loop,
        seen: &mut Seen,
        tokens: u32,
    ) -> Result<Result<String, Failed>, RunError> {
        let listing = cap_text(&hands.carry(&Op::List { path: ".".into() }).text, 8 * 1024).0;
        let ask = format!("{prompt}{FALLBACK_NOTE}{listing}");
        seen.listing = Some(listing);
        let schema = fallback_schema();
        let call = Call {
            system: Some(system),
            prompt: &ask,
            schema: Some(&schema),
            // `Run::ask` caps it further by --max-output-tokens and the seat's max_tokens.
            max_tokens: Some(tokens),
        };
        if self.over_budget() {
            return Ok(Err(Failed::new(
                "budget",
                "the run's budget ran out before the structured reply".into(),
            )));
        }
        seen.turns += 1;
        let reply = match self.ask(exec.as_ref(), &call) {
            Ok(r) => r,
            Err(e) => {
                return Ok(Err(Failed::call(
                    &e,
                    format!("the endpoint rejects tools, and the structured reply failed: {e}"),
                )));
            }
        };
        seen.model = reply.model.clone();
        seen.add(usage_of(exec.as_ref(), &reply));
        let (ops, report) = match parse_fallback(&reply.text) {
            Ok(x) => x,
            Err(m) => {
                return Ok(Err(Failed::not_edits(&reply.text, m.to_string())));
            }
        };
        for (tool, args, op) in ops {
            if !lp.room() {
                return Ok(Err(Failed::new(
                    "max_tool_calls",
                    format!(
                        "the structured reply holds more than {} edits (--max-tool-calls)",
                        lp.max_calls
                    ),
                )));
            }
            lp.count();
            let outcome = match &op {
                Ok(o) => hands.carry(o),
                Err(r) => Outcome::refused(r.0.clone()),
            };
            self.witness_tool(
                task,
                parent,
                (lp.calls, seen.turns),
                &tool,
                &args.to_string(),
                Via::Structured,
                &outcome,
            )?;
        }
        Ok(Ok(report))
    }
}

/// A turn's tool calls as [`parse_op`] reads them, against the allowed `commands`.
fn parse_calls(calls: &[ToolUse], commands: &[String]) -> Vec<ParsedCall> {
    calls
        .iter()
        .map(|c| {
            c.arguments()
                .map_err(Into::into)
                .and_then(|a| parse_op(&c.name, &a, commands))
        })
        .collect()
}

/// The commands the editing worker of `task` may run: the run's checks, the task's `run:`
/// criteria and `--allow-cmd`, each once.
pub(super) fn allowed(w: &WorkRun, task: &Task) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in w
        .checks
        .iter()
        .cloned()
        .chain(criteria_commands(task))
        .chain(w.allow_cmds.iter().cloned())
    {
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_capped_lower_on_a_small_seat_and_by_every_cap_given() {
        assert_eq!(turn_tokens(false, None, None), TURN_TOKENS);
        assert_eq!(turn_tokens(true, None, None), SMALL_SEAT_TURN_TOKENS);
        assert_eq!(turn_tokens(true, Some(9000), None), SMALL_SEAT_TURN_TOKENS);
        assert_eq!(turn_tokens(false, Some(300), Some(1024)), 300);
        assert_eq!(turn_tokens(true, None, Some(1024)), 1024);
        assert_eq!(turn_tokens(false, Some(5000), Some(8000)), TURN_TOKENS);
    }
}
