//! What a strict replay hands the engine in place of the world: executors whose replies are
//! the raw replies the record keeps (a task's output, a validator's ruling, the planner's
//! tasks, the synthesizer's text) and a clock that reads the record's timestamps. They never
//! hand back a decision the run made from those replies: the engine makes each one again.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value as J, json};

use crate::exec::tool_chat::{Msg, ToolChat, ToolSpec, Turn};
use crate::exec::{Call, ExecError, Executor, Reply, Seats};
use crate::ledger::kind;
use crate::roster::{Roster, Tier};
use crate::run::{Clock, Reading, lock};

use super::{Recorded, usage};

/// A reply the record holds: the reply, or the failure the call met.
type Answer = Result<Reply, ExecError>;

/// A worker's reply the record holds, with what its egress gave the engine beside it (a
/// confined agent's metering forwarder: see [`super::forwarder`]).
type Worked = (Answer, Option<super::forwarder::Egress>);

/// The failure a recorded reason names after `prefix` (`validator failed (`, `the gate
/// failed (`, `the orchestrator seat failed (`): its class and message, as they happened.
/// `None` when the reason does not name one, or names a class a replay cannot give back.
fn failure_in(reason: &str, prefix: &str) -> Option<ExecError> {
    let (code, msg) = reason.strip_prefix(prefix)?.split_once("): ")?;
    ExecError::recorded(code, msg, None)
}

/// The replies the record holds, queued per caller, and the calls it could not answer.
#[derive(Default)]
pub(super) struct Answers {
    /// The planner's tasks, as the plan entry keeps them (the reply to every planner call),
    /// and the plan entry's body (its usage).
    plan: Option<(String, J)>,
    /// Per task id: the recorded instruction and the worker replies, oldest first.
    tasks: BTreeMap<String, (String, VecDeque<Worked>)>,
    /// Per task id: the validator's replies, oldest first.
    verdicts: BTreeMap<String, VecDeque<Answer>>,
    /// The reviser's replies, oldest first.
    reviser: VecDeque<Answer>,
    /// The intent judge's replies, oldest first.
    judge: VecDeque<Answer>,
    /// The classifier's replies (a solo run's routing ladder), oldest first.
    classifier: VecDeque<Answer>,
    /// Per task: the pre-ship gate's replies, oldest first.
    ships: BTreeMap<String, VecDeque<Answer>>,
    /// Per task: the pre-ship gate's replies over its attempts (`--attempts`), oldest first.
    attempt_gates: BTreeMap<String, VecDeque<Answer>>,
    /// The synthesizer's replies, oldest first.
    synthesis: VecDeque<Reply>,
    /// The editing worker's turns.
    edit: super::edit::Turns,
    /// The calls the record had no reply for, in the order they came.
    unanswered: Vec<String>,
}

fn reply(text: &str, model: &str, body: &J) -> Reply {
    Reply {
        text: text.to_string(),
        model: model.to_string(),
        usage: usage(body),
        elapsed: Duration::ZERO,
    }
}

/// The plan entry's tasks as a planner's reply: order edges in the planner's own spelling.
fn plan_reply(plan: &J) -> Option<String> {
    let tasks = plan.get("tasks")?.as_array()?;
    let mut out = Vec::new();
    for t in tasks {
        let order: Vec<&str> = t["order_deps"]
            .as_array()?
            .iter()
            .filter_map(J::as_str)
            .collect();
        let deps: Vec<J> = t["depends_on"]
            .as_array()?
            .iter()
            .filter_map(J::as_str)
            .map(|d| {
                if order.contains(&d) {
                    json!({"id": d, "type": "order"})
                } else {
                    json!(d)
                }
            })
            .collect();
        out.push(json!({
            "id": t["id"], "agent": t["agent"], "instruction": t["instruction"],
            "depends_on": deps, "done_when": t["done_when"],
        }));
    }
    Some(json!({ "tasks": out }).to_string())
}

/// A worker's reply from its `result`: the output, or the failure it recorded (its class from
/// `failure`, its message from the output), with what its egress gave the engine. `Err` names
/// a failure the record cannot give back as it happened: one recorded before results kept
/// their class.
fn worker_reply(e: &Recorded) -> Result<Worked, String> {
    let b = &e.payload;
    // Stopped by its metering forwarder at a spend ceiling: the forwarder's count and stop.
    if b["error"] == "ceiling" {
        let (failure, egress) = super::forwarder::stopped(e)?;
        return Ok((Err(failure), Some(egress)));
    }
    let egress = super::forwarder::of(b);
    worker_answer(e).map(|a| (a, egress))
}

/// [`worker_reply`]'s reply or failure.
fn worker_answer(e: &Recorded) -> Result<Answer, String> {
    let b = &e.payload;
    let model = b["model"].as_str().unwrap_or_default();
    let output = b["output"].as_str().unwrap_or_default();
    let message = output.strip_prefix("error: ").unwrap_or(output);
    if let Some(given) = super::failed::given_back(&b["failure"], message) {
        return given.map(Err).map_err(|class| match class.as_str() {
            "interrupted" => interrupted(e.seq),
            _ => format!(
                "the result at seq {} keeps a failure of class {class}, which a replay cannot give back",
                e.seq
            ),
        });
    }
    match b.get("error").and_then(J::as_str) {
        None => Ok(Ok(reply(output, model, b))),
        Some("empty") => Ok(Ok(reply("", model, b))),
        // A result recorded before failures kept their class: its text is the message of a
        // failure that had no class of its own.
        Some("other") => Ok(Err(ExecError::Other(message.to_string()))),
        // Skipped before any call: the engine decides that again without asking.
        Some("budget") => Ok(Err(ExecError::Other("budget".into()))),
        Some("interrupted") => Err(interrupted(e.seq)),
        Some(code) => Err(format!(
            "the result at seq {} keeps only the text of a failed call ({code}): it is an older record, made before a result kept its failure's class",
            e.seq
        )),
    }
}

/// The refusal of a worker's result at `seq` whose call was interrupted.
fn interrupted(seq: u64) -> String {
    format!(
        "the result at seq {seq} is a worker interrupted mid-call: it gave no reply, and what stopped it came from outside the run, which the record keeps only as the result's text, so strict replay refuses"
    )
}

/// A validator's reply from its `verdict`; `None` when no validator was asked (the engine
/// rules without one: a failed task, the budget).
fn verdict_reply(e: &Recorded) -> Option<Answer> {
    let b = &e.payload;
    let model = b.get("model")?.as_str()?;
    let reason = b["reason"].as_str().unwrap_or_default();
    if let Some(why) = reason.strip_prefix("validator failed (") {
        let msg = why.split_once("): ").map_or(why, |(_, m)| m);
        let e = failure_in(reason, "validator failed (")
            .unwrap_or_else(|| ExecError::Other(msg.to_string()));
        return Some(Err(e));
    }
    let text = if b["decision"] == "undetermined" {
        "the validator answered without a usable verdict".to_string()
    } else {
        json!({"decision": b["decision"], "score": b["score"], "reason": reason}).to_string()
    };
    Some(Ok(reply(&text, model, b)))
}

/// What the model wrote of an answer: a --work run's answer ends with what changed, written
/// from the record, and the model wrote only what comes before it.
fn summary_of(answer: &str) -> &str {
    answer
        .find(crate::run::ship::CHANGES_PART)
        .map_or(answer, |i| &answer[..i])
}

/// The reviser's reply from a `revision` entry, when the entry says the reviser failed or was
/// rejected (an accepted revision's reply is the revised answer, read from its `result`);
/// `None` for an accepted one. A rejected revision's reply is the text its entry keeps; `Err`
/// names one whose text the record does not keep (recorded before it did) or keeps cut short.
fn reviser_failure(e: &Recorded) -> Result<Option<Answer>, String> {
    let b = &e.payload;
    if b["accepted"] == true {
        return Ok(None);
    }
    if let Some(text) = b["text"].as_str() {
        if b["text_truncated"] == true {
            return Err(format!(
                "the revision at seq {} was not accepted, and the record keeps the reviser's text cut short",
                e.seq
            ));
        }
        return Ok(Some(Ok(reply(text, "", b))));
    }
    let reason = b["reason"].as_str().unwrap_or_default();
    let why = reason.strip_prefix("reviser failed: ");
    if why == Some("the orchestrator seat returned an empty answer") {
        return Ok(Some(Ok(reply("", "", b))));
    }
    if let Some(e) = why.and_then(|w| failure_in(w, "the orchestrator seat failed (")) {
        return Ok(Some(Err(e)));
    }
    Err(format!(
        "the revision at seq {} was not accepted, and the record does not keep the reviser's text",
        e.seq
    ))
}

/// The intent judge's reply from its `intent_judgment` entry. `Err` names a ruling the record
/// keeps only as a failure's text.
fn judge_reply(e: &Recorded) -> Result<Answer, String> {
    let b = &e.payload;
    if b["ok"].is_boolean() {
        let text = json!({"ok": b["ok"], "score": b["score"], "reason": b["reason"]});
        return Ok(Ok(reply(&text.to_string(), "", b)));
    }
    // An answer that was not a usable ruling, kept whole: the engine reads it again.
    if let Some(text) = b["reply"].as_str() {
        if b["reply_cut"] == true {
            return Err(format!(
                "the intent judgment at seq {} keeps the judge's answer cut short, so the ruling cannot be read again from it",
                e.seq
            ));
        }
        return Ok(Ok(reply(text, "", b)));
    }
    let reason = b["reason"].as_str().unwrap_or_default();
    match failure_in(reason, "judge failed: the orchestrator seat failed (") {
        Some(e) => Ok(Err(e)),
        None => Err(format!(
            "the intent judgment at seq {} keeps only the text of a failed ruling, not the reply",
            e.seq
        )),
    }
}

/// The classifier's reply from its `classification` entry: the lane it named, or what came
/// back when it named none. `Err` names an answer the record keeps cut short or only as a
/// failure's text.
fn classifier_reply(e: &Recorded) -> Result<Answer, String> {
    let b = &e.payload;
    let model = b["model"].as_str().unwrap_or_default();
    if b["agent"].is_string() {
        let text =
            json!({"agent": b["agent"], "confidence": b["confidence"], "reason": b["reason"]});
        return Ok(Ok(reply(&text.to_string(), model, b)));
    }
    let reason = b["reason"].as_str().unwrap_or_default();
    let answer = b["answer"].as_str().unwrap_or_default();
    if let Some(e) = failure_in(reason, "the orchestrator seat failed (") {
        return Ok(Err(e));
    }
    if reason.starts_with("no lane was chosen: ")
        && answer.chars().count() < crate::route::MAX_KEPT_ANSWER
    {
        return Ok(Ok(reply(answer, model, b)));
    }
    Err(format!(
        "the classification at seq {} keeps the classifier's answer cut short or only the text of its failure",
        e.seq
    ))
}

/// The pre-ship gate's reply from its `ship` entry: the raw reply it keeps (`reply`), or, in a
/// run recorded before the reply was kept, one made from its decision and reason; `None` when
/// no gate was asked (a guardrail, a light seat, the budget). `Err` names a reply the record
/// keeps cut short or a failure it keeps only as text.
fn ship_reply(e: &Recorded) -> Result<Option<Answer>, String> {
    let b = &e.payload;
    if b.get("gate").is_some() || b["error"] == "budget" {
        return Ok(None);
    }
    let model = b["model"].as_str().unwrap_or_default();
    if let Some(raw) = b.get("reply").and_then(J::as_str) {
        if b["reply_cut"] == true {
            return Err(format!(
                "the ship decision at seq {} keeps the gate's reply cut short, so the decision cannot be made again from it",
                e.seq
            ));
        }
        return Ok(Some(Ok(reply(raw, model, b))));
    }
    let reason = b["reason"].as_str().unwrap_or_default();
    match b.get("error").and_then(J::as_str) {
        None => {
            let text = json!({"decision": b["decision"], "reason": reason}).to_string();
            Ok(Some(Ok(reply(&text, model, b))))
        }
        Some(code) => match failure_in(reason, "the gate failed (") {
            Some(e) if e.code() == code => Ok(Some(Err(e))),
            _ if code == "other" => Ok(Some(Err(ExecError::Other(reason.to_string())))),
            _ => Err(format!(
                "the ship decision at seq {} keeps only the text of a failed gate call ({code}), not the reply itself",
                e.seq
            )),
        },
    }
}

impl Answers {
    /// Reads the replies out of a run's entries (seq order). `Err` names the seq whose reply
    /// the record cannot give.
    pub(super) fn read(run: &[Recorded]) -> Result<Answers, String> {
        let mut a = Answers {
            edit: super::edit::Turns::read(run)?,
            ..Answers::default()
        };
        for e in run {
            let b = &e.payload;
            let id = b.get("id").and_then(J::as_str).map(str::to_string);
            match (e.kind.as_str(), id) {
                (kind::PLAN, _) if a.plan.is_none() => {
                    a.plan = plan_reply(b).map(|t| (t, b.clone()));
                }
                (kind::TASK, Some(id)) => {
                    let instr = b["instruction"].as_str().unwrap_or_default().to_string();
                    a.tasks.entry(id).or_insert((instr, VecDeque::new()));
                }
                // A dispatched task's result is the worker's, handed over by the replay's
                // dispatcher (`dispatched`).
                (kind::RESULT, Some(_)) if b["attempt"].is_string() => {}
                // An editing worker's result is answered turn by turn (`edit`).
                (kind::RESULT, Some(_)) if super::edit::is_edit_result(b) => {}
                // No worktree could be opened, so no worker was asked: the workbench answers
                // the opening from the record (`work`).
                (kind::RESULT, Some(_)) if b["error"] == "work" => {}
                // A dispatched task whose base the remote refused asked no worker: the
                // dispatcher answers the push from the record (`dispatched`).
                (kind::RESULT, Some(_)) if b["error"] == "unpublished" => {}
                (kind::RESULT, Some(id)) => {
                    let r = worker_reply(e)?;
                    if let Some(t) = a.tasks.get_mut(&id) {
                        t.1.push_back(r);
                    }
                }
                (kind::VERDICT, Some(id)) => {
                    if let Some(r) = verdict_reply(e) {
                        a.verdicts.entry(id).or_default().push_back(r);
                    }
                }
                (kind::CLASSIFICATION, _) => a.classifier.push_back(classifier_reply(e)?),
                (kind::REVISION, _) => {
                    if let Some(r) = reviser_failure(e)? {
                        a.reviser.push_back(r);
                    }
                }
                (kind::RESULT, None) if b.get("revised_from").is_some() => {
                    let text = b["answer"].as_str().unwrap_or_default();
                    a.reviser.push_back(Ok(reply(summary_of(text), "", b)));
                }
                (kind::INTENT_JUDGMENT, _) => a.judge.push_back(judge_reply(e)?),
                (kind::SHIP, _) => {
                    let task = b["task"].as_str().unwrap_or_default().to_string();
                    if let Some(r) = ship_reply(e)? {
                        a.ships.entry(task).or_default().push_back(r);
                    }
                }
                (kind::ATTEMPT_CHOICE, _) => {
                    let task = b["task"].as_str().unwrap_or_default().to_string();
                    let model = b["gate"]["model"].as_str().unwrap_or_default();
                    if let Some(r) = super::attempts::gate_reply(e)? {
                        let r = r
                            .map(|text| reply(&text, model, b))
                            .map_err(ExecError::Other);
                        a.attempt_gates.entry(task).or_default().push_back(r);
                    }
                }
                (kind::RESULT, None) if e.actor == "synthesizer" => {
                    let text = b["answer"].as_str().unwrap_or_default();
                    // A --work run's answer ends with what changed, written from the record:
                    // the model wrote only what comes before it.
                    let text = summary_of(text);
                    a.synthesis.push_back(reply(text, "", b));
                }
                _ => {}
            }
        }
        Ok(a)
    }

    /// The calls that had no reply in the record.
    pub(super) fn unanswered(&self) -> Vec<String> {
        let mut out = self.unanswered.clone();
        out.extend_from_slice(self.edit.unanswered());
        out
    }

    fn answer(&mut self, call: &Call<'_>, model: &str) -> Result<Reply, ExecError> {
        let schema = call.schema.map(|s| s.name.as_str());
        let system = call.system.unwrap_or_default();
        let got = match schema {
            Some("plan") => self
                .plan
                .clone()
                .map(|(t, body)| Ok(reply(&t, model, &body)))
                .ok_or_else(|| "a planner call".to_string()),
            Some("verdict") => {
                let id = judged(call.prompt);
                self.verdicts
                    .get_mut(&id)
                    .and_then(VecDeque::pop_front)
                    .ok_or_else(|| format!("a validator call on task {id}"))
            }
            Some("intent_judgment") => self
                .judge
                .pop_front()
                .ok_or_else(|| "an intent judge call".to_string()),
            Some("classification") => self
                .classifier
                .pop_front()
                .ok_or_else(|| "a classifier call".to_string()),
            Some("ship") => {
                let id = judged(call.prompt);
                self.ships
                    .get_mut(&id)
                    .and_then(VecDeque::pop_front)
                    .ok_or_else(|| format!("a pre-ship gate call on task {id}"))
            }
            Some("ship_attempt") => {
                let id = judged(call.prompt);
                self.attempt_gates
                    .get_mut(&id)
                    .and_then(VecDeque::pop_front)
                    .ok_or_else(|| format!("a pre-ship gate call on the attempts of task {id}"))
            }
            Some("edits") => self.edit.structured(call.prompt),
            Some(other) => Err(format!("a call for {other}")),
            None if system.starts_with("You tighten answers") => self
                .reviser
                .pop_front()
                .ok_or_else(|| "a reviser call".to_string()),
            None if system.starts_with("You write the final answer") => self
                .synthesis
                .pop_front()
                .map(|mut r| {
                    r.model = model.to_string();
                    Ok(r)
                })
                .ok_or_else(|| "a synthesis call".to_string()),
            None => self.worker(call.prompt).map(|(answer, egress)| {
                // Handed to the engine as the agent's egress hands it, as the call ends.
                super::forwarder::note(egress.as_ref());
                answer
            }),
        };
        match got {
            // A reply whose entry names no model came from the executor asked.
            Ok(Ok(mut r)) => {
                if r.model.is_empty() {
                    r.model = model.to_string();
                }
                Ok(r)
            }
            Ok(Err(e)) => Err(e),
            Err(what) => {
                let line = format!("the record holds no reply for {what}");
                self.unanswered.push(line.clone());
                Err(ExecError::Other(line))
            }
        }
    }

    /// The next reply of the task whose recorded instruction the prompt starts with (the
    /// longest, so one task's instruction that begins another's is not taken for it).
    fn worker(&mut self, prompt: &str) -> Result<Worked, String> {
        let id = self
            .tasks
            .iter()
            .filter(|(_, (instr, _))| prompt.starts_with(instr.as_str()))
            .max_by_key(|(_, (instr, _))| instr.len())
            .map(|(id, _)| id.clone());
        let Some(id) = id else {
            return Err("a worker call on no recorded task".into());
        };
        self.tasks
            .get_mut(&id)
            .and_then(|t| t.1.pop_front())
            .ok_or_else(|| format!("another worker call on task {id}"))
    }
}

/// Which task a validator prompt is about (`Task T1: ...`).
fn judged(prompt: &str) -> String {
    prompt
        .lines()
        .find_map(|l| l.strip_prefix("Task "))
        .and_then(|l| l.split(':').next())
        .unwrap_or_default()
        .to_string()
}

/// An executor that answers from the record: it reports the model the record names and
/// never reaches a model, a program or the network.
pub(super) struct ReplayExecutor {
    model: String,
    answers: Arc<Mutex<Answers>>,
    /// Whether the record shows this model's worker holding a tool conversation.
    chat: bool,
    /// Whether the record shows this worker's calls going through a metering forwarder.
    live: bool,
}

impl ToolChat for ReplayExecutor {
    fn turn(&self, _: &str, messages: &[Msg], _: &[ToolSpec], _: u32) -> Result<Turn, ExecError> {
        lock(&self.answers).edit.turn(messages)
    }
}

impl Executor for ReplayExecutor {
    fn call(&self, call: &Call<'_>) -> Result<Reply, ExecError> {
        lock(&self.answers).answer(call, &self.model)
    }

    fn model(&self) -> String {
        self.model.clone()
    }

    fn describe(&self) -> String {
        format!("replay: {}", self.model)
    }

    fn tool_chat(&self) -> Option<&dyn ToolChat> {
        self.chat.then_some(self as &dyn ToolChat)
    }

    fn metered_live(&self) -> bool {
        self.live
    }
}

/// A ladder's rungs, each with the tier it serves when the run's fleet had tiers.
type Rungs = Vec<(Option<Tier>, Arc<dyn Executor>)>;

/// The seats of a replayed run: each executor the models the record names, each seat's
/// ladder the models its tasks climbed to, every reply from one shared [`Answers`].
pub(super) struct ReplaySeats {
    orchestrator: Arc<dyn Executor>,
    workers: BTreeMap<String, Arc<dyn Executor>>,
    ladders: BTreeMap<String, Rungs>,
    answers: Arc<Mutex<Answers>>,
}

impl ReplaySeats {
    pub(super) fn new(run: &[Recorded], answers: Answers) -> ReplaySeats {
        let chats: Vec<String> = run
            .iter()
            .filter_map(|e| e.payload["model"].as_str())
            .filter(|m| answers.edit.chats(m))
            .map(str::to_string)
            .collect();
        let answers = Arc::new(Mutex::new(answers));
        let seat = |model: &str, live: bool| -> Arc<dyn Executor> {
            Arc::new(ReplayExecutor {
                model: model.to_string(),
                answers: answers.clone(),
                chat: chats.iter().any(|m| m == model),
                live,
            })
        };
        let exec = |model: &str| seat(model, false);
        // A worker metered while it ran is metered again (its forwarder's count, from the record).
        let worker = |model: &str| seat(model, super::forwarder::metered_live(run, model));
        let mut agent_of: BTreeMap<String, String> = BTreeMap::new();
        let mut workers = BTreeMap::new();
        let mut ladders: BTreeMap<String, Rungs> = BTreeMap::new();
        let mut climbed: Vec<(String, String)> = Vec::new();
        let mut orchestrator = None;
        // The planner's model, for a run whose other orchestrator calls name none (a run whose
        // only task failed before a validator or the gate was asked, or one paused at a gate).
        let mut planner = None;
        for e in run {
            let b = &e.payload;
            let id = b["id"].as_str().unwrap_or_default();
            match e.kind.as_str() {
                kind::TASK => {
                    let agent = b["agent"].as_str().unwrap_or_default();
                    agent_of.insert(id.to_string(), agent.to_string());
                }
                kind::RESULT if !id.is_empty() => {
                    let agent = agent_of.get(id).cloned().unwrap_or_default();
                    if let Some(m) = b["model"].as_str() {
                        workers.entry(agent).or_insert_with(|| worker(m));
                    }
                }
                // The orchestrator seat's model, from the first of its calls that names it.
                kind::VERDICT | kind::SHIP if orchestrator.is_none() => {
                    orchestrator = b["model"].as_str().map(exec);
                }
                kind::PLAN if planner.is_none() => {
                    planner = b["usage"]["model"].as_str().map(exec);
                }
                kind::CLASSIFICATION if orchestrator.is_none() => {
                    orchestrator = b["usage"]["model"].as_str().map(exec);
                }
                kind::TIER_ESCALATION => {
                    let agent = agent_of.get(id).cloned().unwrap_or_default();
                    let to = b["to"].as_str().unwrap_or_default().to_string();
                    if !climbed.contains(&(agent.clone(), to.clone())) {
                        climbed.push((agent.clone(), to.clone()));
                        // The tier the rung serves, when the run's fleet had tiers.
                        let tier = b["to_tier"].as_str().and_then(Tier::parse);
                        ladders.entry(agent).or_default().push((tier, worker(&to)));
                    }
                }
                _ => {}
            }
        }
        ReplaySeats {
            orchestrator: orchestrator.or(planner).unwrap_or_else(|| exec("replay")),
            workers,
            ladders,
            answers,
        }
    }

    pub(super) fn unanswered(&self) -> Vec<String> {
        lock(&self.answers).unanswered()
    }
}

impl Seats for ReplaySeats {
    fn orchestrator(&self) -> Arc<dyn Executor> {
        self.orchestrator.clone()
    }

    fn worker(&self, _: &Roster, agent: &str) -> Arc<dyn Executor> {
        self.workers
            .get(agent)
            .cloned()
            .unwrap_or_else(|| self.orchestrator.clone())
    }

    fn ladder(&self, roster: &Roster, agent: &str) -> Vec<Arc<dyn Executor>> {
        crate::exec::untiered(self.tiered_ladder(roster, agent))
    }

    fn tiered_ladder(&self, _: &Roster, agent: &str) -> Vec<(Option<Tier>, Arc<dyn Executor>)> {
        self.ladders.get(agent).cloned().unwrap_or_default()
    }
}

/// The record's clock: each timestamp read is the next one the run's entries carry (the
/// last again once they run out); elapsed time is measured between them. A reading the run
/// decided from ([`Reading`]) is the one the entry it decided keeps (`read_at`): a gate's
/// raising from its `gate_pending`, its expiry from its `gate_expired` (else, for a gate the
/// record shows no expiry of, the part's `resume` reading), a resume's from its `resume`.
pub(super) struct ReplayClock {
    stamps: Vec<f64>,
    next: Mutex<usize>,
    raised: BTreeMap<u64, f64>,
    expired: BTreeMap<u64, f64>,
    resumed: Option<f64>,
}

impl ReplayClock {
    pub(super) fn new(run: &[Recorded]) -> ReplayClock {
        let read_at = |kind: &str| -> BTreeMap<u64, f64> {
            run.iter()
                .filter(|e| e.kind == kind)
                .filter_map(|e| Some((e.payload["wave"].as_u64()?, e.payload["read_at"].as_f64()?)))
                .collect()
        };
        ReplayClock {
            stamps: run.iter().map(|e| e.ts).collect(),
            next: Mutex::new(0),
            raised: read_at(kind::GATE_PENDING),
            expired: read_at(kind::GATE_EXPIRED),
            resumed: run
                .iter()
                .find(|e| e.kind == kind::RESUME)
                .and_then(|e| e.payload["read_at"].as_f64()),
        }
    }

    fn at(&self, i: usize) -> f64 {
        self.stamps
            .get(i)
            .or(self.stamps.last())
            .copied()
            .unwrap_or(0.0)
    }
}

impl Clock for ReplayClock {
    fn now(&self) -> f64 {
        let mut n = lock(&self.next);
        let t = self.at(*n);
        *n += 1;
        t
    }

    fn elapsed(&self) -> f64 {
        let n = *lock(&self.next);
        self.at(n.saturating_sub(1)) - self.at(0)
    }

    fn reading(&self, what: Reading) -> f64 {
        // Read as a live clock is, so the timestamps after it stay where they were.
        let stamp = self.now();
        let recorded = match what {
            Reading::GateRaised(wave) => self.raised.get(&(wave as u64)).copied(),
            Reading::GateChecked(wave) => {
                self.expired.get(&(wave as u64)).copied().or(self.resumed)
            }
            Reading::Resume => self.resumed,
        };
        // A reading no entry keeps decided nothing the record shows (a gate without a
        // deadline, one a person decided); a run whose gates have a deadline and whose
        // entries lack one is refused before it is replayed (`gates::check`).
        recorded.unwrap_or(stamp)
    }
}
