//! A `--work` task done by a worker elsewhere (`submit --dispatch`): the engine opens the
//! task's worktree as for a local task, hands the task to a [`Dispatch`] (the NATS one is
//! `crate::fleet::writer`), and waits for the worker's result. This process stays the only
//! ledger writer: it witnesses the dispatch and the result, brings the worker's commit into the
//! task's worktree only after checking it, and then treats it exactly as a local worker's edit
//! (the commit with its trailers and pre-ship screens, the checks, the gate, the run branch).

use std::path::Path;

use serde_json::json;

use crate::fleet::protocol::{self, ResultMessage, TaskMessage};
use crate::ledger::{Entry, kind};
use crate::plan::Task;

use super::engine::{Done, Run};
use super::work_state::{WorkRun, criteria_commands};
use super::workbench::TaskTree;
use super::{Event, RunError};

/// Where a run's tasks go when they are not run in this process.
pub(crate) trait Dispatch: Send + Sync {
    /// The server, for the record and the person watching.
    fn describe(&self) -> String;
    /// A fresh attempt id (random; the writer remembers every one it issued).
    fn attempt_id(&self) -> String;
    /// Makes `commit` (and its history) fetchable by workers at `base_ref` on the remote.
    fn push_base(&self, base_ref: &str, commit: &str) -> Result<(), String>;
    /// Publishes `task` for a worker, remembering its attempt id as issued.
    fn publish(&self, task: &TaskMessage) -> Result<(), String>;
    /// The first accepted result of `attempt`; `None` when `stop` said to stop waiting.
    fn wait(&self, attempt: &str, stop: &dyn Fn() -> bool)
    -> Result<Option<ResultMessage>, String>;
    /// Results that came for attempts already answered, each with the seq of its
    /// `task_dispatched` entry, since the last call.
    fn take_duplicates(&self) -> Vec<(ResultMessage, u64)>;
    /// Fetches the commit `result` names from `result_ref`, checks that it is one commit on
    /// `base` tied to its attempt, and puts its tree in `worktree` (not committed).
    fn bring(
        &self,
        result_ref: &str,
        result: &ResultMessage,
        base: &str,
        worktree: &Path,
    ) -> Result<(), String>;
}

impl Run<'_, '_> {
    /// The run's dispatcher, when its tasks go to workers elsewhere.
    pub(super) fn dispatcher(&self) -> Option<std::sync::Arc<dyn Dispatch>> {
        self.opts.work.as_ref()?.dispatch.clone()
    }

    /// Runs one task of a `--work` run through `d`: its worktree here, the task published,
    /// the worker's result witnessed, its commit checked and brought in, then the same
    /// commit, checks and record as a local task's.
    pub(super) fn remote_task(
        &self,
        d: &dyn Dispatch,
        w: &WorkRun,
        task: &Task,
        plan: &[Task],
        instruction: &str,
        task_entry: &Entry,
    ) -> Result<Done, RunError> {
        let mut tw = w.get(&task.id);
        tw.task_entry = Some(task_entry.clone());
        w.set(&task.id, tw);
        let upstream = w.upstream_commits(task, plan);
        let name = self.ref_name(&task.id);
        let tree = match w.in_turn(|| w.bench.open_task(&name, &upstream)) {
            Ok(t) => t,
            Err(e) => {
                let exec = self.env.seats.worker(self.env.roster, &task.agent);
                return self.work_attempt(w, task, &exec, instruction, task_entry, Err(e));
            }
        };
        let mut tw = w.get(&task.id);
        tw.tree = Some(tree.clone());
        w.set(&task.id, tw);
        let (attempt, sent) = self.send_task(d, w, task, &name, &tree, instruction, task_entry)?;
        let stop = || self.interrupted().is_some();
        let Some(r) = d.wait(&attempt, &stop).map_err(RunError::Work)? else {
            let output = "error: interrupted while a worker had the task".to_string();
            let body = json!({"id": task.id, "output": output, "ok": false, "model": "", "error": "interrupted", "attempt": attempt});
            return self.finish_task(task, sent, body, output, false, String::new());
        };
        let mut body = json!({
            "id": task.id, "output": r.output, "ok": r.ok, "model": r.model,
            "worker": r.worker, "attempt": attempt, "claims": r.claims(),
        });
        if let Some(e) = &r.error {
            body["error"] = json!(e);
        }
        let done = self.finish_task(task, sent, body, r.output.clone(), r.ok, r.model.clone())?;
        let mut tw = w.get(&task.id);
        tw.last_seq = done.seq;
        w.set(&task.id, tw);
        if !done.ok {
            return Ok(done);
        }
        let result_ref = protocol::result_ref(&w.ledger, w.run_seq, &name, &attempt);
        if let Err(why) = d.bring(&result_ref, &r, &tree.start, &tree.path) {
            let body = json!({"task": task.id, "base": tree.start, "commit": null, "error": why, "refused": true, "attempt": attempt});
            let c = self.put("dispatch", kind::CHANGE, Some(done.seq), body)?;
            let mut tw = w.get(&task.id);
            tw.change = None;
            tw.change_seq = Some(c.seq);
            tw.last_seq = c.seq;
            w.set(&task.id, tw);
            return Ok(Done { ok: false, ..done });
        }
        let model = r.model.clone();
        let passed =
            self.witness_change(w, task, model, &tree, task_entry, (done.seq, &done.output))?;
        Ok(Done { ok: passed, ..done })
    }

    /// Pushes the task's base, witnesses `task_dispatched` with a fresh attempt id and
    /// publishes the task; returns the attempt id and the entry's seq.
    #[allow(clippy::too_many_arguments)]
    fn send_task(
        &self,
        d: &dyn Dispatch,
        w: &WorkRun,
        task: &Task,
        name: &str,
        tree: &TaskTree,
        instruction: &str,
        task_entry: &Entry,
    ) -> Result<(String, u64), RunError> {
        let base_ref = protocol::base_ref(&w.ledger, w.run_seq, name);
        d.push_base(&base_ref, &tree.start)
            .map_err(RunError::Work)?;
        let attempt = d.attempt_id();
        let mut checks = w.checks.clone();
        checks.extend(criteria_commands(task));
        let mut msg = TaskMessage {
            schema: protocol::TASK_SCHEMA.into(),
            ledger: w.ledger.clone(),
            run: w.run_seq,
            task: task.id.clone(),
            task_ref: name.to_string(),
            task_seq: task_entry.seq,
            agent: task.agent.clone(),
            attempt: attempt.clone(),
            base: tree.start.clone(),
            base_ref: base_ref.clone(),
            instruction: instruction.to_string(),
            checks,
            allowed_commands: w.allow_cmds.clone(),
            seat: None,
            max_tool_calls: w.max_tool_calls,
            check_seconds: w.deadline.as_secs().max(1),
        };
        msg.validate().map_err(RunError::Work)?;
        let sent = self.put(
            "dispatch",
            kind::TASK_DISPATCHED,
            Some(task_entry.seq),
            json!({
                "task": task.id, "attempt": attempt, "base": tree.start, "base_ref": base_ref,
                "subject": protocol::task_subject(&w.ledger, w.run_seq), "server": d.describe(),
            }),
        )?;
        self.env.progress.event(&Event::TaskStarted {
            id: task.id.clone(),
            agent: task.agent.clone(),
            model: format!("a worker through {}", d.describe()),
        });
        msg.task_seq = sent.seq;
        d.publish(&msg).map_err(RunError::Work)?;
        Ok((attempt, sent.seq))
    }

    /// Witnesses every result that came for a task already answered: a `duplicate_result`
    /// under the task's dispatch, never merged.
    pub(super) fn witness_duplicates(&self) -> Result<(), RunError> {
        let Some(d) = self.dispatcher() else {
            return Ok(());
        };
        for (r, parent) in d.take_duplicates() {
            self.put(
                "dispatch",
                kind::DUPLICATE_RESULT,
                Some(parent),
                json!({
                    "task": r.task, "attempt": r.attempt, "worker": r.worker, "ok": r.ok,
                    "commit": r.commit, "reason": "the task already has a result: this one is witnessed and never merged",
                }),
            )?;
        }
        Ok(())
    }
}

/// What a worker elsewhere asks its worker seat for a dispatched task: the system line and
/// the prompt a local `--work` task of lane `agent` gets, in the worktree `tree`.
pub(crate) fn remote_prompt(
    agent: &str,
    category: Option<&str>,
    instruction: &str,
    tree: &Path,
) -> (String, String) {
    (
        super::prompts::worker_system(agent, category),
        format!("{instruction}{}", super::prompts::work_note(tree)),
    )
}
