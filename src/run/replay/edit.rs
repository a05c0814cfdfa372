//! The built-in editing worker of a replayed `--work` run, answered from the record: each
//! model turn of a task's tool conversation ([`Turns`]) and each tool's outcome in its
//! worktree ([`Carried`]), so no model is asked and no file is touched. A turn's tool calls
//! are the model's reply, which the record keeps only in its `tool_call` entries (each names
//! the turn that asked for it); a tool's outcome is the world's, kept in its `tool_result`.
//! The engine decides the rest again: which calls are malformed or refused, what each is
//! numbered, when the loop ends and why (the corrective turn, `--max-tool-calls`, the budget),
//! the task's `result`, and then its change, checks and ship decision as for any worker.
//!
//! Each turn's usage comes from the `result`'s `turn_usage`, so a spend ceiling stops the
//! replayed conversation at the turn where it stopped the run. An endpoint that took no tools
//! answered one structured reply instead: the replay rebuilds it from its `tool_call` entries
//! (`via: "structured"`, arguments as the reply gave them) and the report, and answers the
//! worktree listing it was asked with from the `result`'s `listing`.
//!
//! A model turn or structured reply that failed is given back from the `result`'s `failure`
//! at the turn it failed at ([`super::failed`]); a structured reply that was not the edits is
//! handed back from the `result`'s `reply` for the engine to read again.
//!
//! What the record cannot answer is refused, naming the seq: a call whose arguments or a result
//! whose output was cut to the entry's cap, a structured reply recorded before the listing was
//! kept, a conversation recorded before entries said which turn asked for each call, a failed
//! turn or structured reply recorded before its `result` kept the failure (or the reply), and
//! a conversation under a spend ceiling recorded before results kept each turn's usage (the
//! sum over its turns does not say where a ceiling stops it).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::{Value as J, json};

use crate::exec::tool_chat::{Msg, ToolUse, Turn};
use crate::exec::{ExecError, Reply, Usage};
use crate::ledger::kind;
use crate::run::Options;
use crate::run::edit::NO_REPORT;
use crate::run::edit_tools::{Hands, Op, Outcome, parse_op};
use crate::run::lock;

use super::Recorded;

/// The `result` error codes only the editing worker writes.
const EDIT_CODES: [&str; 4] = [
    "no_tool_call",
    "malformed_tool_call",
    "max_tool_calls",
    "malformed_fallback",
];

/// Whether a task's `result` closes an editing worker's conversation: it counts turns, or it
/// failed the way only that loop fails.
pub(super) fn is_edit_result(b: &J) -> bool {
    b.get("turns").is_some() || b["error"].as_str().is_some_and(|c| EDIT_CODES.contains(&c))
}

/// One recorded tool call: what the model asked for and what the tool gave.
struct Asked {
    seq: u64,
    turn: u64,
    tool: String,
    args: String,
    outcome: Option<Outcome>,
    /// The id the model gave the call (recorded since turns kept their usage).
    id: Option<String>,
    /// Carried out from a structured reply, not a tool call.
    structured: bool,
}

/// The tool the worktree listing of a structured reply's prompt stands as in [`Carried`].
const LISTING: &str = "the listing a structured reply was asked with";

/// One conversation's turns, oldest first.
type Conversation = VecDeque<Result<Turn, ExecError>>;

/// A structured reply, or the failure it met.
type Answer = Result<Reply, ExecError>;

/// What the message of a failed structured reply starts with (`run/edit.rs`).
const STRUCTURED_FAILED: &str = "the endpoint rejects tools, and the structured reply failed: ";

/// The model turns of every editing conversation the record holds.
#[derive(Default)]
pub(super) struct Turns {
    /// Per task id: its recorded instruction (a conversation's first message starts with it).
    instructions: BTreeMap<String, String>,
    /// Per task: its conversations, oldest first (one per attempt or rung).
    convs: BTreeMap<String, VecDeque<Conversation>>,
    /// Per task: the conversation being answered.
    current: BTreeMap<String, Conversation>,
    /// Per task: the structured replies of its conversations through the fallback, oldest
    /// first.
    structured: BTreeMap<String, VecDeque<Answer>>,
    /// The models whose workers held a tool conversation.
    chat_models: BTreeSet<String>,
    /// Turns the record had no answer for.
    unanswered: Vec<String>,
}

/// The tool entries of a run, per task, in the order they were written, each conversation
/// ended by its `result`. `Err` names the seq the record cannot answer.
fn asked_per_result(run: &[Recorded]) -> Result<Vec<(&Recorded, Vec<Asked>)>, String> {
    let mut pending: BTreeMap<String, Vec<Asked>> = BTreeMap::new();
    let mut out = Vec::new();
    for e in run {
        let b = &e.payload;
        let task = b["task"].as_str().unwrap_or_default().to_string();
        match e.kind.as_str() {
            kind::TOOL_CALL => {
                let what = format!("the tool call at seq {} (task {task})", e.seq);
                if b["truncated"] == true {
                    return Err(format!(
                        "{what} keeps the model's arguments cut to the entry's cap, so the record cannot give back the call it made"
                    ));
                }
                let Some(turn) = b["turn"].as_u64() else {
                    return Err(format!(
                        "{what} does not say which model turn asked for it (it was recorded before tool calls named their turn), so the record cannot give back the model's replies"
                    ));
                };
                pending.entry(task).or_default().push(Asked {
                    seq: e.seq,
                    turn,
                    tool: b["tool"].as_str().unwrap_or_default().to_string(),
                    args: b["arguments"].as_str().unwrap_or_default().to_string(),
                    outcome: None,
                    id: b["call_id"].as_str().map(str::to_string),
                    structured: b["via"] == "structured",
                });
            }
            kind::TOOL_RESULT => {
                let Some(a) = pending
                    .get_mut(&task)
                    .and_then(|calls| calls.iter_mut().find(|a| Some(a.seq) == e.parent))
                else {
                    continue;
                };
                if b["truncated"] == true {
                    return Err(format!(
                        "the tool result at seq {} (task {task}) keeps the tool's output cut to the entry's cap, so the record cannot give back what the model was told",
                        e.seq
                    ));
                }
                a.outcome = Some(Outcome {
                    ok: b["ok"] == true,
                    refused: b["refused"] == true,
                    text: b["output"].as_str().unwrap_or_default().to_string(),
                });
            }
            kind::RESULT => {
                let id = b["id"].as_str().unwrap_or_default().to_string();
                let calls = pending.remove(&id).unwrap_or_default();
                if !calls.is_empty() || is_edit_result(b) {
                    out.push((e, calls));
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The turns of one conversation, from its `result` and its tool calls. The calls of each
/// turn are the recorded ones; the last turn is rebuilt from how the loop ended: the report
/// (no calls), a malformed call, one call past `--max-tool-calls`, or the failure.
fn conversation(result: &Recorded, asked: &[Asked]) -> Result<Conversation, String> {
    let b = &result.payload;
    let seq = result.seq;
    // The endpoint took no tools: the rest is its structured reply, edits or not.
    if b["listing"].is_string() {
        return Ok(VecDeque::from([Err(rejected_tools())]));
    }
    if let Some(a) = asked.iter().find(|a| a.structured) {
        return Err(format!(
            "the tool call at seq {} was carried out from the structured reply of an endpoint that takes no tools, and its result (seq {seq}) does not keep the worktree listing that reply was asked with (it was recorded before results kept it)",
            a.seq
        ));
    }
    let Some(turns) = b["turns"].as_u64() else {
        return Err(format!(
            "the result at seq {seq} closes an editing worker's conversation and does not say how many model turns it took (it was recorded before results counted them)"
        ));
    };
    if let Some(a) = asked.iter().find(|a| a.turn == 0 || a.turn > turns) {
        return Err(format!(
            "the tool call at seq {} names turn {} of a conversation of {turns} turns (seq {seq})",
            a.seq, a.turn
        ));
    }
    let model = b["model"].as_str().unwrap_or_default().to_string();
    let turn = |k: u64| Turn {
        text: String::new(),
        calls: asked
            .iter()
            .filter(|a| a.turn == k)
            .map(|a| {
                let id = a.id.clone().unwrap_or_else(|| format!("call_{}", a.seq));
                use_of(&id, &a.tool, &a.args)
            })
            .collect(),
        model: model.clone(),
        usage: None,
    };
    let mut out: Vec<Result<Turn, ExecError>> = (1..=turns).map(|k| Ok(turn(k))).collect();
    with_texts_and_usage(&mut out, b);
    let output = b["output"].as_str().unwrap_or_default();
    let message = output.strip_prefix("error: ").unwrap_or(output);
    if failed_turn(&mut out, &b["failure"], message, seq)? {
        return Ok(out.into());
    }
    let last = out.last_mut();
    match (b["ok"] == true, b["error"].as_str(), last) {
        (_, Some("budget" | "no_tool_call"), _) | (_, _, None) => {}
        (true, None, Some(Ok(t))) if t.calls.is_empty() => {
            t.text = if output == NO_REPORT { "" } else { output }.to_string();
        }
        (false, Some("malformed_tool_call"), Some(Ok(t))) if t.calls.is_empty() => {
            t.calls.push(use_of("malformed", "", ""));
        }
        (false, Some("max_tool_calls"), Some(Ok(t))) => {
            t.calls.push(use_of("past_the_cap", "list_files", "{}"));
        }
        // Recorded before failures kept their class: one with no class of its own.
        (false, Some("other"), Some(last)) => {
            *last = Err(ExecError::Other(message.to_string()));
        }
        // The turn a spend ceiling stopped never started: the engine refuses it again itself.
        (false, Some("ceiling"), Some(Ok(t))) if t.calls.is_empty() => {
            out.pop();
        }
        (_, Some(code), _) if ExecError::REPLAYABLE.contains(&code) => {
            return Err(format!(
                "the result at seq {seq} keeps only the text of its editing worker's failed model turn ({code}): it is an older record, made before a result kept its failure's class"
            ));
        }
        (_, code, _) => {
            return Err(format!(
                "the result at seq {seq} keeps only the text of how its editing worker's conversation ended ({}), not the reply that ended it",
                code.unwrap_or("a report after a tool call")
            ));
        }
    }
    Ok(out.into())
}

/// A model turn that failed, from the `failure` body `f` of the result at `seq`: given back as
/// it failed, at the turn it failed at (the last). `Ok(false)` when the result keeps none.
fn failed_turn(
    out: &mut [Result<Turn, ExecError>],
    f: &J,
    message: &str,
    seq: u64,
) -> Result<bool, String> {
    match (super::failed::given_back(f, message), out.last_mut()) {
        (None, _) => Ok(false),
        (Some(Ok(e)), Some(last)) => {
            *last = Err(e);
            Ok(true)
        }
        (Some(Err(class)), _) => Err(format!(
            "the result at seq {seq} keeps a failure of class {class}, which a replay cannot give back"
        )),
        (Some(Ok(_)), None) => Err(format!(
            "the result at seq {seq} keeps a failed model turn and counts no turns"
        )),
    }
}

/// Each turn's text as the conversation sent it back (the last, the report, is set from the
/// result's output after this) and each turn's usage, from the `result` body `b`.
fn with_texts_and_usage(out: &mut [Result<Turn, ExecError>], b: &J) {
    for (t, text) in out
        .iter_mut()
        .zip(b["turn_texts"].as_array().into_iter().flatten())
    {
        if let (Ok(t), Some(text)) = (t, text.as_str()) {
            t.text = text.to_string();
        }
    }
    match b["turn_usage"].as_array() {
        // Each turn's usage, as the turn reported it.
        Some(each) => {
            for (t, u) in out.iter_mut().zip(each) {
                if let Ok(t) = t {
                    t.usage = turn_usage(u);
                }
            }
        }
        // Recorded before each turn's was kept: the task's usage, summed over its turns, comes
        // back with the first turn that answered (no ceiling depends on it; see
        // [`check_ceilings`]).
        None => {
            if let Some(Ok(t)) = out.iter_mut().find(|t| t.is_ok()) {
                t.usage = super::usage(b);
            }
        }
    }
}

/// One turn's usage as the turn reported it: a turn that reported more than it reserved
/// under a ceiling keeps what it reported under `over_reservation` (its counts are what was
/// charged), so the replay charges it again the same way.
fn turn_usage(u: &J) -> Option<Usage> {
    let over = &u["over_reservation"];
    let count = |reported: &str, charged: &str| over[reported].as_u64().or(u[charged].as_u64());
    Some(Usage {
        input_tokens: count("reported_prompt_tokens", "prompt_tokens")?,
        output_tokens: count("reported_completion_tokens", "completion_tokens")?,
        estimated: u["estimated"].as_bool().unwrap_or(false),
        truncated: u["truncated"].as_bool().unwrap_or(false),
        over_reservation: None,
    })
}

/// What an endpoint that takes no tools answered the first turn with (the engine then asks
/// for a structured reply).
fn rejected_tools() -> ExecError {
    ExecError::Status {
        url: "the record".into(),
        status: 400,
        excerpt: "the endpoint takes no tools".into(),
    }
}

/// The structured reply of a conversation through the fallback, rebuilt from what its edits
/// were given (writes first, then the diff) and its report; the failure it met, as its
/// `failure` keeps it; the reply the `result` keeps when it was not the edits asked for;
/// `None` when the loop stopped before it was asked (its budget or a spend ceiling). `Err`
/// names what the record keeps only as text.
fn structured_reply(result: &Recorded, asked: &[Asked]) -> Result<Option<Answer>, String> {
    let b = &result.payload;
    let seq = result.seq;
    let model = b["model"].as_str().unwrap_or_default().to_string();
    let usage = b["turn_usage"].as_array().and_then(|u| u.get(1));
    let usage = usage.and_then(turn_usage);
    let output = b["output"].as_str().unwrap_or_default();
    let message = output.strip_prefix("error: ").unwrap_or(output);
    let message = message.strip_prefix(STRUCTURED_FAILED).unwrap_or(message);
    match super::failed::given_back(&b["failure"], message) {
        Some(Ok(e)) => return Ok(Some(Err(e))),
        Some(Err(class)) => {
            return Err(format!(
                "the result at seq {seq} keeps a failure of class {class}, which a replay cannot give back"
            ));
        }
        None => {}
    }
    if b["error"] == "malformed_fallback" {
        let kept = &b["reply"];
        return match (kept["text"].as_str(), kept["cut"] == true) {
            (Some(text), false) => Ok(Some(Ok(Reply {
                text: text.to_string(),
                model,
                usage,
                elapsed: std::time::Duration::ZERO,
            }))),
            (Some(_), true) => Err(format!(
                "the result at seq {seq} keeps the structured reply that was not the edits asked for cut short, so it cannot be parsed again"
            )),
            (None, _) => Err(format!(
                "the result at seq {seq} keeps only the text of why its structured reply was not the edits asked for, not the reply itself (it was recorded before results kept it)"
            )),
        };
    }
    let mut writes = Vec::new();
    let mut diff = String::new();
    for a in asked.iter().filter(|a| a.structured) {
        let args: J = serde_json::from_str(&a.args).unwrap_or(J::Null);
        match a.tool.as_str() {
            "write_file" => writes.push(args),
            _ => diff = args["diff"].as_str().unwrap_or_default().to_string(),
        }
    }
    let report = match (b["ok"] == true, b["error"].as_str()) {
        (_, Some("budget" | "ceiling")) => return Ok(None),
        (true, None) if output == NO_REPORT => "",
        (true, None) => output,
        // One edit past the cap, which the engine refuses before carrying it out.
        (false, Some("max_tool_calls")) => {
            writes.push(json!({"path": "past_the_cap", "content": ""}));
            ""
        }
        (_, code) => {
            return Err(format!(
                "the result at seq {} keeps only the text of how its structured reply ended ({}), not the reply itself",
                result.seq,
                code.unwrap_or("unknown")
            ));
        }
    };
    let text = json!({"writes": writes, "diff": diff, "report": report}).to_string();
    Ok(Some(Ok(Reply {
        text,
        model,
        usage,
        elapsed: std::time::Duration::ZERO,
    })))
}

fn use_of(id: &str, name: &str, raw: &str) -> ToolUse {
    ToolUse {
        id: id.to_string(),
        name: name.to_string(),
        raw: raw.to_string(),
    }
}

impl Turns {
    /// The conversations of a run's entries (seq order). `Err` names the seq the record
    /// cannot answer.
    pub(super) fn read(run: &[Recorded]) -> Result<Turns, String> {
        let mut t = Turns::default();
        for e in run.iter().filter(|e| e.kind == kind::TASK) {
            let b = &e.payload;
            if let (Some(id), Some(i)) = (b["id"].as_str(), b["instruction"].as_str()) {
                t.instructions.insert(id.to_string(), i.to_string());
            }
        }
        for (result, asked) in asked_per_result(run)? {
            let b = &result.payload;
            let conv = conversation(result, &asked)?;
            if let Some(m) = b["model"].as_str() {
                t.chat_models.insert(m.to_string());
            }
            let id = b["id"].as_str().unwrap_or_default().to_string();
            if b["listing"].is_string()
                && let Some(r) = structured_reply(result, &asked)?
            {
                t.structured.entry(id.clone()).or_default().push_back(r);
            }
            t.convs.entry(id).or_default().push_back(conv);
        }
        Ok(t)
    }

    /// The task whose recorded instruction `prompt` starts with (the longest, so one task's
    /// instruction that begins another's is not taken for it).
    fn task_of(&self, prompt: &str) -> String {
        self.instructions
            .iter()
            .filter(|(_, i)| prompt.starts_with(i.as_str()))
            .max_by_key(|(_, i)| i.len())
            .map(|(id, _)| id.clone())
            .unwrap_or_default()
    }

    /// The next structured reply of the task `prompt` asks about; `Err` says what had none.
    pub(super) fn structured(&mut self, prompt: &str) -> Result<Answer, String> {
        let task = self.task_of(prompt);
        self.structured
            .get_mut(&task)
            .and_then(VecDeque::pop_front)
            .ok_or_else(|| format!("a structured reply of the editing worker on task {task}"))
    }

    /// Whether the worker of `model` held a tool conversation in the run.
    pub(super) fn chats(&self, model: &str) -> bool {
        self.chat_models.contains(model)
    }

    /// The calls the record had no answer for.
    pub(super) fn unanswered(&self) -> &[String] {
        &self.unanswered
    }

    /// The next turn of the conversation `messages` holds: its first message (the task's
    /// prompt) names the task, and a conversation of one message is a new one.
    pub(super) fn turn(&mut self, messages: &[Msg]) -> Result<Turn, ExecError> {
        let prompt = match messages.first() {
            Some(Msg::User(p)) => p.as_str(),
            _ => "",
        };
        let task = self.task_of(prompt);
        if messages.len() == 1 {
            // A conversation that asked nothing (stopped before its first turn) is passed by.
            let next = self
                .convs
                .get_mut(&task)
                .and_then(|q| std::iter::from_fn(|| q.pop_front()).find(|c| !c.is_empty()));
            self.current.insert(task.clone(), next.unwrap_or_default());
        }
        match self.current.get_mut(&task).and_then(VecDeque::pop_front) {
            Some(t) => t,
            None => {
                let line = format!(
                    "the record holds no reply for a turn of the editing worker on task {task}"
                );
                self.unanswered.push(line.clone());
                Err(ExecError::Other(line))
            }
        }
    }
}

/// Refuses an editing worker's run that ran under a spend ceiling when a conversation's
/// `result` does not keep each turn's usage (it was recorded before results did), or keeps
/// another count of it than of turns.
pub(super) fn check_ceilings(run: &[Recorded], opts: &Options) -> Result<(), String> {
    if !super::rules::under_a_ceiling(run, opts) {
        return Ok(());
    }
    for e in run
        .iter()
        .filter(|e| e.kind == kind::RESULT && is_edit_result(&e.payload))
    {
        let b = &e.payload;
        let kept = b["turn_usage"].as_array().map(Vec::len);
        let turns = b["turns"].as_u64().and_then(|n| usize::try_from(n).ok());
        if b["turn_texts_truncated"] == true {
            return Err(format!(
                "the result at seq {} of run {} keeps its model turns' text cut to the entry's cap, and the run ran under a spend ceiling, which each turn's text counts toward, so strict replay refuses",
                e.seq, run[0].seq
            ));
        }
        if kept.is_none() {
            return Err(format!(
                "the result at seq {} of run {} closes an editing worker's conversation and keeps its usage summed over its model turns, not each turn's (it was recorded before results kept them), and the run ran under a spend ceiling, which stops a conversation by each turn's usage, so strict replay refuses",
                e.seq, run[0].seq
            ));
        }
        if kept != turns {
            return Err(format!(
                "the result at seq {} of run {} keeps the usage of {} model turns and counts {} turns",
                e.seq,
                run[0].seq,
                kept.unwrap_or(0),
                b["turns"]
            ));
        }
    }
    Ok(())
}

/// The tools' outcomes the record holds, per task, in the order they were carried out.
#[derive(Default)]
pub(super) struct Carried {
    calls: BTreeMap<String, VecDeque<(String, String, Outcome)>>,
    /// Per task: the worktree each conversation was told it works in, oldest first.
    worktrees: BTreeMap<String, VecDeque<String>>,
    unanswered: Vec<String>,
}

impl Carried {
    /// The outcomes of a run's entries (seq order).
    pub(super) fn read(run: &[Recorded]) -> Result<Carried, String> {
        let mut c = Carried::default();
        for (result, asked) in asked_per_result(run)? {
            let id = result.payload["id"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if let Some(w) = result.payload["worktree"].as_str() {
                let q = c.worktrees.entry(id.clone()).or_default();
                q.push_back(w.to_string());
            }
            let q = c.calls.entry(id).or_default();
            if let Some(listing) = result.payload["listing"].as_str() {
                let o = Outcome {
                    ok: true,
                    refused: false,
                    text: listing.to_string(),
                };
                q.push_back((LISTING.to_string(), String::new(), o));
            }
            for a in asked {
                if let Some(o) = a.outcome {
                    q.push_back((a.tool, a.args, o));
                }
            }
        }
        Ok(c)
    }

    /// The calls the record had no answer for.
    pub(super) fn unanswered(&self) -> &[String] {
        &self.unanswered
    }

    /// The worktree the next conversation of `task` was told it works in, when its result
    /// names it.
    pub(super) fn worktree(&mut self, task: &str) -> Option<String> {
        self.worktrees.get_mut(task).and_then(VecDeque::pop_front)
    }

    /// The outcome of `op` in `task`'s worktree: that of the next recorded call that asked
    /// for the same operation. Calls the engine refused or found malformed never reached the
    /// worktree, so the ones before it that ask for something else are passed by.
    fn carry(&mut self, task: &str, op: &Op) -> Outcome {
        let allowed: Vec<String> = match op {
            Op::Run { command } => vec![command.clone()],
            _ => Vec::new(),
        };
        let q = self.calls.entry(task.to_string()).or_default();
        while let Some((tool, args, outcome)) = q.pop_front() {
            if tool == LISTING {
                if *op == (Op::List { path: ".".into() }) {
                    return outcome;
                }
                continue;
            }
            let Ok(args) = use_of("", &tool, &args).arguments() else {
                continue;
            };
            if matches!(parse_op(&tool, &args, &allowed), Ok(Ok(o)) if o == *op) {
                return outcome;
            }
        }
        let line = format!("the record holds no outcome for the tool call {op:?} of task {task}");
        self.unanswered.push(line.clone());
        Outcome::failed(line)
    }
}

/// The hands of one task's replayed worktree: each outcome from the record.
pub(super) struct ReplayHands {
    pub(super) task: String,
    pub(super) carried: std::sync::Arc<std::sync::Mutex<Carried>>,
}

impl Hands for ReplayHands {
    fn carry(&self, op: &Op) -> Outcome {
        lock(&self.carried).carry(&self.task, op)
    }
}
