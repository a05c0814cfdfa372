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

use super::claimed::Made;
use super::engine::{Done, Run};
use super::work_state::{WorkRun, criteria_commands};
use super::workbench::{CheckRun, TaskTree, WorkError};
use super::{Event, RunError, lock};

/// How many attempts a dispatched task gets, when the run does not give `--attempts`, before
/// a change the writer keeps refusing ends it as failed: the first and two more.
pub(crate) const REFUSED_TRIES: u32 = 3;

/// A result that came for an attempt, with its place in the stream (the same on every
/// delivery, so a redelivery of a result already witnessed is known for what it is).
pub(crate) struct Arrived {
    pub(crate) result: ResultMessage,
    pub(crate) stream_seq: u64,
}

/// A result for an attempt that already has one, with the seq of the attempt's
/// `task_dispatched` entry.
pub(crate) struct Duplicate {
    pub(crate) result: ResultMessage,
    pub(crate) parent: u64,
    pub(crate) stream_seq: u64,
}

/// An attempt a resumed run's record says it issued: its task, id, base, the seq of its
/// `task_dispatched` entry, which try of its task it is (1, or the `try` of the retry it was
/// sent as), and whether it is answered (a result witnessed, or the run halted or interrupted
/// after it: nothing of it is awaited).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Prior {
    pub(crate) task: String,
    pub(crate) attempt: String,
    pub(crate) base: String,
    pub(crate) parent: u64,
    pub(crate) tries: u32,
    pub(crate) answered: bool,
}

/// Where a run's tasks go when they are not run in this process.
pub(crate) trait Dispatch: Send + Sync {
    /// The server, for the record and the person watching (never with a password).
    fn describe(&self) -> String;
    /// What the run's request records of its dispatch (the server and the remote), so that
    /// `resume` dispatches the rest the same way.
    fn record(&self) -> serde_json::Value;
    /// Takes up run `run` again after its writer stopped: the attempts it issued (`prior`,
    /// from the record) and the stream sequences of the results it witnessed, then listens
    /// on the run's durable results consumer.
    fn resume(&self, run: u64, prior: &[Prior], witnessed: &[u64]) -> Result<(), String>;
    /// The attempt in flight for `task` that a resumed run takes up (its id, the seq of its
    /// `task_dispatched` entry and which try of the task it is), when it was dispatched on
    /// `base`. One on another base is let go: its result, when it comes, is a duplicate.
    fn adopt(&self, task: &str, base: &str) -> Option<(String, u64, u32)>;
    /// Acknowledges the message at `stream_seq` once what it said is witnessed.
    fn settle(&self, stream_seq: u64);
    /// Tells the workers that run `run` is halted (once; later calls do nothing): a worker
    /// stops the run's task it is doing and answers nothing, and tasks no worker took yet are
    /// taken off the stream.
    fn halt(&self, run: u64, by: &str, reason: &str);
    /// A fresh attempt id for a try of `task` (random; the writer remembers every one it
    /// issued; a strict replay gives back the one the record says this task drew).
    fn attempt_id(&self, task: &str) -> String;
    /// Makes `commit` (and its history) fetchable by workers at `base_ref` on the remote.
    fn push_base(&self, base_ref: &str, commit: &str) -> Result<(), String>;
    /// Publishes `task` for a worker, remembering its attempt id as issued. Its attempt id is
    /// its message id: the server keeps one copy of it.
    fn publish(&self, task: &TaskMessage) -> Result<(), String>;
    /// Publishes again a task a resumed run takes up (its attempt already remembered by
    /// [`Dispatch::resume`]), under the same message id; `true` when the server still had
    /// the first copy and dropped this one.
    fn republish(&self, task: &TaskMessage) -> Result<bool, String>;
    /// The first accepted result of `attempt`; `None` when `stop` said to stop waiting.
    fn wait(&self, attempt: &str, stop: &dyn Fn() -> bool) -> Result<Option<Arrived>, String>;
    /// Results that came for attempts already answered since the last call.
    fn take_duplicates(&self) -> Vec<Duplicate>;
    /// Fetches `result_ref` (a worker's change) from the remote into the repository, its
    /// objects and the ref of the same name here, when `result` names a commit.
    fn fetch_result(&self, result_ref: &str, result: &ResultMessage) -> Result<(), String>;
    /// Checks that `result_ref` (fetched) holds the commit `result` names, one commit on
    /// `base` tied to its attempt, and puts its tree in `worktree` (not committed) when the
    /// task has one here (the writer runs its checks itself).
    fn bring(
        &self,
        result_ref: &str,
        result: &ResultMessage,
        base: &str,
        worktree: Option<&Path>,
    ) -> Result<(), String>;
}

impl Run<'_, '_> {
    /// The run's dispatcher, when its tasks go to workers elsewhere.
    pub(super) fn dispatcher(&self) -> Option<std::sync::Arc<dyn Dispatch>> {
        self.opts.work.as_ref()?.dispatch.clone()
    }

    /// Runs one task of a `--work` run through `d`: the task published on the commit it
    /// starts on, the worker's result witnessed, its commit checked, then the same commit,
    /// screens and record as a local task's. When the writer runs the checks itself
    /// ([`own_checks`], or a result whose checks are not of its commit), the task gets a
    /// worktree here (opened while the worker works, after the task went out, so a wave's
    /// tasks are published without waiting on each other's worktrees) and the commit's tree
    /// is put in it for the checks; otherwise no worktree, and the checks are the worker's
    /// claims. Either way the change is screened and committed from the worker's commit.
    pub(super) fn remote_task(
        &self,
        d: &dyn Dispatch,
        w: &WorkRun,
        task: &Task,
        plan: &[Task],
        instruction: &str,
        task_entry: &Entry,
    ) -> Result<Done, RunError> {
        let _gone = w.dispatching(&task.id, task_entry);
        let upstream = w.upstream_commits(task, plan);
        let name = self.ref_name(&task.id);
        let start = match w.in_shared_turn(|| w.bench.task_start(&name, &upstream)) {
            Ok(s) => s,
            Err(e) => {
                let exec = self.env.seats.worker(self.env.roster, &task.agent);
                return self.work_attempt(w, task, &exec, instruction, task_entry, Err(e));
            }
        };
        // A retry a resumed run takes up counts the tries before it.
        let (mut attempt, mut sent, mut tries) =
            match self.first_send(d, w, task, (&name, &start), instruction, task_entry)? {
                Ok(sent) => sent,
                Err(unsent) => return Ok(unsent),
            };
        // The worktree only when the writer runs the task's checks itself; else the worker's
        // commit is checked and committed here with no worktree.
        let mut opened = own_checks(w).then(|| open_tree(w, task, &name, &start));
        let bound = self.refusal_bound(w);
        loop {
            let (done, r) = match self.answered(d, w, task, sent, &attempt)? {
                Ok(answered) => answered,
                Err(ended) => return Ok(ended),
            };
            // Claims of another change than the one found in the ref: the checks run here.
            if opened.is_none() && r.found_in_ref {
                opened = Some(open_tree(w, task, &name, &start));
            }
            let result_ref = protocol::result_ref(&w.ledger, w.run_seq, &name, &attempt);
            let tree = match &opened {
                None => None,
                Some(Ok(tree)) => Some(tree),
                // Not the worker's change but this side: not tried again.
                Some(Err(e)) => {
                    let e = WorkError::Git(format!("cannot open the task's worktree: {e}"));
                    return self.refuse_result(w, task, &start, &attempt, done, e);
                }
            };
            // The fetch in the repository's git turn, shared with other fetches: git's check
            // after it reads every worktree's HEAD, and another task's worktree being added or
            // removed meanwhile made it fail. The checks of the commit and its tree put in this
            // task's own worktree need no turn.
            let brought = w
                .in_shared_turn(|| d.fetch_result(&result_ref, &r))
                .and_then(|()| d.bring(&result_ref, &r, &start, tree.map(|t| t.path.as_path())));
            if let Err(e) = brought {
                let refused =
                    self.refuse_result(w, task, &start, &attempt, done, WorkError::Git(e))?;
                if tries >= bound || self.interrupted().is_some() || self.over_budget() {
                    return Ok(refused);
                }
                tries += 1;
                let retry = json!({"of": attempt, "refused": w.get(&task.id).change_seq,
                    "try": tries, "at_most": bound});
                (attempt, sent) = self.send_task(
                    d,
                    w,
                    task,
                    (&name, &start),
                    instruction,
                    task_entry,
                    Some(retry),
                )?;
                continue;
            }
            return self.witness_result(w, task, (&name, &start), tree, &r, task_entry, done);
        }
    }

    /// Witnesses the change of the worker's result `r` (its commit checked already) for the
    /// task `task` (`name`: its name in refs; `start`: the commit it went out on), read from
    /// the worker's commit: its checks run in `tree` when it has a worktree here, else they are
    /// the worker's claims.
    #[allow(clippy::too_many_arguments)]
    fn witness_result(
        &self,
        w: &WorkRun,
        task: &Task,
        (name, start): (&str, &str),
        tree: Option<&TaskTree>,
        r: &ResultMessage,
        task_entry: &Entry,
        done: Done,
    ) -> Result<Done, RunError> {
        let named = TaskTree {
            task: name.to_string(),
            path: std::path::PathBuf::new(),
            start: start.to_string(),
            shows: Vec::new(),
            named: false,
        };
        let made = match tree {
            Some(tree) => Made::Brought {
                tree,
                commit: r.commit.as_deref().unwrap_or(start),
            },
            None => Made::Claimed {
                tree: &named,
                commit: r.commit.as_deref().unwrap_or(start),
                result: r,
            },
        };
        let model = r.model.clone();
        let passed =
            self.witness_made(w, task, model, made, task_entry, (done.seq, &done.output))?;
        Ok(Done { ok: passed, ..done })
    }

    /// Sends `task` out the first time (on the commit `start`; `name`: its name in refs): an
    /// attempt a resumed run finds in flight on that commit is taken up again, else the base
    /// is pushed and a fresh attempt published. `Ok` with the attempt, its `task_dispatched`
    /// seq and which try it is, `Err` with the task's end when its base could not be pushed.
    fn first_send(
        &self,
        d: &dyn Dispatch,
        w: &WorkRun,
        task: &Task,
        (name, start): (&str, &str),
        instruction: &str,
        task_entry: &Entry,
    ) -> Result<Result<(String, u64, u32), Done>, RunError> {
        // Out in the wave's order (see `send_order`); a task that does not go out, or goes
        // out again under its old attempt, lets the next go at once.
        let order = lock(&w.sending).clone();
        let _gone = w.send_turn(&task.id);
        if let Some((attempt, was, tries)) = d.adopt(&task.id, start) {
            let msg = task_message(w, task, name, start, instruction, &attempt);
            let sent = self.readopt(d, w, task, msg, (task_entry, was))?;
            return Ok(Ok((attempt, sent, tries)));
        }
        // The bases of the tasks that wait together go in one push: when it fails, each of
        // those tasks ends with its line, and none of them is published.
        let base_ref = protocol::base_ref(&w.ledger, w.run_seq, name);
        if let Err(e) = d.push_base(&base_ref, start) {
            return self.unsent(task, task_entry.seq, e).map(Err);
        }
        // Its base was pushed with the others'; the task itself goes out in its turn.
        if let Some(o) = &order {
            o.wait(&task.id);
        }
        self.send_task(d, w, task, (name, start), instruction, task_entry, None)
            .map(|(attempt, sent)| Ok((attempt, sent, 1)))
    }

    /// How many attempts a dispatched task gets when the writer refuses the change its worker
    /// sent (its commit cannot be fetched, or fails a check): the run's `--attempts` when it
    /// gives more than one, else [`REFUSED_TRIES`].
    fn refusal_bound(&self, w: &WorkRun) -> u32 {
        if w.attempts > 1 {
            w.attempts
        } else {
            REFUSED_TRIES
        }
    }

    /// Waits for the first result of `attempt` (dispatched at `sent`) and witnesses it; `Ok`
    /// with it when it says the worker made a change to bring in, `Err` with the task's end
    /// when the task is over (the worker failed, or the run stopped waiting).
    fn answered(
        &self,
        d: &dyn Dispatch,
        w: &WorkRun,
        task: &Task,
        sent: u64,
        attempt: &str,
    ) -> Result<Result<(Done, ResultMessage), Done>, RunError> {
        let stop = || self.interrupted().is_some();
        let Some(Arrived {
            result: r,
            stream_seq,
        }) = d.wait(attempt, &stop).map_err(RunError::Work)?
        else {
            return self
                .stopped_waiting(d, w.run_seq, task, sent, attempt)
                .map(Err);
        };
        // The commit it names, so a strict replay checks it again (null: none).
        let mut body = json!({
            "id": task.id, "output": r.output, "ok": r.ok, "model": r.model,
            "worker": r.worker, "attempt": attempt, "claims": r.claims(),
            "stream_seq": stream_seq, "commit": r.commit,
        });
        if let Some(e) = &r.error {
            body["error"] = json!(e);
        }
        let done = self.finish_task(task, sent, body, r.output.clone(), r.ok, r.model.clone())?;
        d.settle(stream_seq);
        let mut tw = w.get(&task.id);
        tw.last_seq = done.seq;
        w.set(&task.id, tw);
        if !done.ok {
            return Ok(Err(done));
        }
        Ok(Ok((done, r)))
    }

    /// Witnesses a worker's result that could not be brought in (its commit failed a check,
    /// or the task's worktree could not be opened) as a refused `change` with no commit.
    fn refuse_result(
        &self,
        w: &WorkRun,
        task: &Task,
        start: &str,
        attempt: &str,
        done: Done,
        e: WorkError,
    ) -> Result<Done, RunError> {
        let why = match e {
            WorkError::Git(why) => why,
            other => other.to_string(),
        };
        let body = json!({"task": task.id, "base": start, "commit": null, "error": why, "refused": true, "attempt": attempt});
        let c = self.put("dispatch", kind::CHANGE, Some(done.seq), body)?;
        let mut tw = w.get(&task.id);
        tw.change = None;
        tw.change_seq = Some(c.seq);
        tw.last_seq = c.seq;
        w.set(&task.id, tw);
        Ok(Done { ok: false, ..done })
    }

    /// Witnesses the end of a task that was never published (its base could not be pushed,
    /// `why`): a failed `result` under its `task` entry (seq `parent`), naming no attempt.
    fn unsent(&self, task: &Task, parent: u64, why: String) -> Result<Done, RunError> {
        let output = format!("error: {why}");
        let body = json!({"id": task.id, "output": output, "ok": false, "model": "", "error": "unpublished"});
        self.finish_task(task, parent, body, output, false, String::new())
    }

    /// The run was halted or interrupted while a worker had `task`: the halt goes to the
    /// workers (so the worker stops it and answers nothing), and the task's end is witnessed
    /// if the run still writes (an interrupted run does not).
    fn stopped_waiting(
        &self,
        d: &dyn Dispatch,
        run: u64,
        task: &Task,
        sent: u64,
        attempt: &str,
    ) -> Result<Done, RunError> {
        let (by, reason) = match self.opts.interrupt.as_ref().and_then(|i| i.halt()) {
            Some(h) => (h.by, h.reason),
            None => ("signal".to_string(), self.interrupted().unwrap_or_default()),
        };
        d.halt(run, &by, &reason);
        let output = "error: interrupted while a worker had the task".to_string();
        let body = json!({"id": task.id, "output": output, "ok": false, "model": "", "error": "interrupted", "attempt": attempt});
        self.finish_task(task, sent, body, output, false, String::new())
    }

    /// Witnesses `task_dispatched` with a fresh attempt id and publishes the task (its base
    /// is pushed already); returns the attempt id and the entry's seq. `retry`, when the
    /// task goes out again after the writer refused a change, says which attempt's change
    /// (`of`), the seq of its refused `change` (`refused`), and which try this is of how many
    /// (`try`, `at_most`); it is recorded in the entry.
    #[allow(clippy::too_many_arguments)]
    fn send_task(
        &self,
        d: &dyn Dispatch,
        w: &WorkRun,
        task: &Task,
        (name, start): (&str, &str),
        instruction: &str,
        task_entry: &Entry,
        retry: Option<serde_json::Value>,
    ) -> Result<(String, u64), RunError> {
        let base_ref = protocol::base_ref(&w.ledger, w.run_seq, name);
        let attempt = d.attempt_id(&task.id);
        let mut msg = task_message(w, task, name, start, instruction, &attempt);
        msg.validate().map_err(RunError::Work)?;
        let mut body = json!({
            "task": task.id, "attempt": attempt, "base": start, "base_ref": base_ref,
            "subject": protocol::task_subject(&w.ledger, w.run_seq), "server": d.describe(),
        });
        if let Some(retry) = retry {
            body["retry"] = retry;
        }
        let sent = self.put(
            "dispatch",
            kind::TASK_DISPATCHED,
            Some(task_entry.seq),
            body,
        )?;
        self.env.progress.event(&Event::TaskStarted {
            id: task.id.clone(),
            agent: task.agent.clone(),
            model: format!("a worker through {}", d.describe()),
        });
        msg.task_seq = sent.seq;
        // A test may kill the writer here: the attempt is on record and not yet published
        // (its resume publishes it).
        crate::store::append::failpoint("task-dispatched");
        d.publish(&msg).map_err(RunError::Work)?;
        Ok((attempt, sent.seq))
    }

    /// Witnesses again, under the resumed task's `task` entry, an attempt the run dispatched
    /// before its writer stopped and that has no result on record (`was`: its first
    /// `task_dispatched` seq), and publishes its task again under the same attempt id: the
    /// server drops the copy when it still has the first (within its duplicate window), and
    /// a writer that died between witnessing the dispatch and publishing it leaves no attempt
    /// that no worker answers.
    fn readopt(
        &self,
        d: &dyn Dispatch,
        w: &WorkRun,
        task: &Task,
        mut msg: TaskMessage,
        (task_entry, was): (&Entry, u64),
    ) -> Result<u64, RunError> {
        msg.validate().map_err(RunError::Work)?;
        let sent = self.put(
            "dispatch",
            kind::TASK_DISPATCHED,
            Some(task_entry.seq),
            json!({
                "task": task.id, "attempt": msg.attempt, "base": msg.base,
                "base_ref": msg.base_ref,
                "subject": protocol::task_subject(&w.ledger, w.run_seq), "server": d.describe(),
                "resumed_from": was,
            }),
        )?;
        msg.task_seq = sent.seq;
        // The base is pushed again too: the dead writer pushed it before witnessing the
        // dispatch, but the remote may have been restored since.
        d.push_base(&msg.base_ref, &msg.base)
            .map_err(RunError::Work)?;
        let dropped = d.republish(&msg).map_err(RunError::Work)?;
        self.env.progress.event(&Event::TaskStarted {
            id: task.id.clone(),
            agent: task.agent.clone(),
            model: format!(
                "a worker through {} (dispatched before the resume{})",
                d.describe(),
                if dropped { "" } else { ", published again" }
            ),
        });
        Ok(sent.seq)
    }

    /// Witnesses every result that came for a task already answered: a `duplicate_result`
    /// under the task's dispatch, never merged. Called after each wave, and once more before
    /// the run delivers its answer, for one that came after the last wave.
    pub(super) fn witness_duplicates(&self) -> Result<(), RunError> {
        let Some(d) = self.dispatcher() else {
            return Ok(());
        };
        for dup in d.take_duplicates() {
            let r = &dup.result;
            self.put(
                "dispatch",
                kind::DUPLICATE_RESULT,
                Some(dup.parent),
                json!({
                    "task": r.task, "attempt": r.attempt, "worker": r.worker, "ok": r.ok,
                    "commit": r.commit, "stream_seq": dup.stream_seq,
                    "found_in_ref": r.found_in_ref,
                    "reason": "the task already has a result: this one is witnessed and never merged",
                }),
            )?;
            d.settle(dup.stream_seq);
        }
        Ok(())
    }
}

/// Whether the writer runs a dispatched task's checks itself, in a worktree of its own, rather
/// than witnessing what the worker claims of them: when the run is checked in full (a seat at
/// verification tier 3, or one whose table says `verify = "full"`).
fn own_checks(w: &WorkRun) -> bool {
    w.verification
        .as_ref()
        .is_some_and(|v| v.tier >= 3 || v.verify == crate::exec::config::Verify::Full)
}

impl Run<'_, '_> {
    /// Witnesses, under `parent`, what the worker `worker` claims of one check of `task`'s
    /// change, as `check` with `claimed_by` naming the worker (the writer did not run it).
    /// Returns whether it passed, the entry's seq and its output's tail.
    pub(super) fn witness_claimed_check(
        &self,
        w: &WorkRun,
        task: &str,
        run: &CheckRun,
        worker: &str,
        parent: u64,
    ) -> Result<(bool, u64, String), RunError> {
        let mut body = run.payload(task);
        body["claimed_by"] = json!(worker);
        if let Some(n) = w.get(task).attempt {
            body["attempt"] = json!(n);
        }
        let e = self.put("dispatch", kind::CHECK, Some(parent), body)?;
        self.env.progress.event(&Event::Checked {
            id: task.to_string(),
            command: run.command.clone(),
            ok: run.ok,
            seconds: run.seconds,
        });
        Ok((run.ok, e.seq, run.tail.clone()))
    }
}

/// Opens the worktree of the dispatched `task` (`name`: its name in refs) on `start`, in the
/// repository's git turn as every worktree is added, while its worker works. A test may make
/// it fail here, after the task was published (the failpoint `task-worktree`).
fn open_tree(w: &WorkRun, task: &Task, name: &str, start: &str) -> Result<TaskTree, WorkError> {
    let opened = w.in_turn(|| match crate::store::failpoint::fails("task-worktree") {
        Some(e) => Err(WorkError::Io(e)),
        None => w.bench.open_task(name, &[start.to_string()]),
    });
    if let Ok(tree) = &opened {
        let mut tw = w.get(&task.id);
        tw.tree = Some(tree.clone());
        w.set(&task.id, tw);
    }
    opened
}

/// The task message of `attempt` for `task` of the run `w`, on the commit `start` (`name`:
/// the task's name in refs); its `task_seq` is set once the dispatch is witnessed.
fn task_message(
    w: &WorkRun,
    task: &Task,
    name: &str,
    start: &str,
    instruction: &str,
    attempt: &str,
) -> TaskMessage {
    let mut checks = w.checks.clone();
    checks.extend(criteria_commands(task));
    TaskMessage {
        schema: protocol::TASK_SCHEMA.into(),
        ledger: w.ledger.clone(),
        run: w.run_seq,
        task: task.id.clone(),
        task_ref: name.to_string(),
        task_seq: 0,
        agent: task.agent.clone(),
        attempt: attempt.to_string(),
        base: start.to_string(),
        base_ref: protocol::base_ref(&w.ledger, w.run_seq, name),
        instruction: instruction.to_string(),
        checks,
        allowed_commands: w.allow_cmds.clone(),
        seat: None,
        max_tool_calls: w.max_tool_calls,
        check_seconds: w.deadline.as_secs().max(1),
    }
}

/// What a dispatched run's record says of its attempts, from its `task_dispatched`, `result`
/// and `duplicate_result` entries (kind, seq, body): each attempt issued, whether a result of
/// it is witnessed, and the stream sequences of every result witnessed.
pub(super) fn priors(items: &[(String, u64, serde_json::Value)]) -> (Vec<Prior>, Vec<u64>) {
    let text =
        |p: &serde_json::Value, k: &str| p.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let mut prior: Vec<Prior> = Vec::new();
    let mut answered = std::collections::BTreeSet::new();
    let mut witnessed = Vec::new();
    for (k, seq, p) in items {
        if let Some(s) = p.get("stream_seq").and_then(|v| v.as_u64()) {
            witnessed.push(s);
        }
        match k.as_str() {
            kind::TASK_DISPATCHED => {
                let (Some(task), Some(attempt), Some(base)) =
                    (text(p, "task"), text(p, "attempt"), text(p, "base"))
                else {
                    continue;
                };
                // A resume that took the attempt up again witnessed it once more: the latest
                // entry is its parent, and the first says which try it is.
                let first = prior.iter().find(|x| x.attempt == attempt).map(|x| x.tries);
                let retried = p["retry"]["try"]
                    .as_u64()
                    .map(|n| n.min(u32::MAX as u64) as u32);
                prior.retain(|x| x.attempt != attempt);
                prior.push(Prior {
                    task,
                    attempt,
                    base,
                    parent: *seq,
                    tries: first.or(retried).unwrap_or(1),
                    answered: false,
                });
            }
            kind::RESULT => {
                if let Some(a) = text(p, "attempt") {
                    answered.insert(a);
                }
            }
            // A halt or an interruption told the workers to stop: what was in flight then
            // answers nothing, and anything it does answer is a duplicate.
            kind::HALTED | kind::INTERRUPTED => {
                answered.extend(prior.iter().map(|x| x.attempt.clone()));
            }
            _ => {}
        }
    }
    for x in &mut prior {
        x.answered = answered.contains(&x.attempt);
    }
    (prior, witnessed)
}

/// What a worker elsewhere asks its worker seat for a dispatched task: the system line and
/// the prompt a local `--work` task of lane `agent` gets (it names no host path).
pub(crate) fn remote_prompt(
    agent: &str,
    category: Option<&str>,
    instruction: &str,
) -> (String, String) {
    (
        super::prompts::worker_system(agent, category),
        format!("{instruction}{}", super::prompts::work_note(None)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_gives_each_attempt_once_with_whether_it_was_answered() {
        let a = "a".repeat(32);
        let b = "b".repeat(32);
        let items = vec![
            (
                kind::TASK_DISPATCHED.to_string(),
                5,
                json!({"task": "T1", "attempt": a, "base": "c1"}),
            ),
            (
                kind::TASK_DISPATCHED.to_string(),
                6,
                json!({"task": "T2", "attempt": b, "base": "c1"}),
            ),
            (
                kind::RESULT.to_string(),
                7,
                json!({"id": "T1", "attempt": a, "stream_seq": 3}),
            ),
            (
                kind::DUPLICATE_RESULT.to_string(),
                8,
                json!({"task": "T1", "attempt": a, "stream_seq": 4}),
            ),
            // A resume took T2's attempt up again under a new entry.
            (
                kind::TASK_DISPATCHED.to_string(),
                12,
                json!({"task": "T2", "attempt": b, "base": "c1", "resumed_from": 6}),
            ),
        ];
        let c = "c".repeat(32);
        // T3's second try (a retry after a refused change), taken up by a resume: still the
        // second try.
        let mut retried = items.clone();
        retried.push((
            kind::TASK_DISPATCHED.to_string(),
            14,
            json!({"task": "T3", "attempt": c, "base": "c1", "retry": {"of": a, "try": 2}}),
        ));
        retried.push((
            kind::TASK_DISPATCHED.to_string(),
            15,
            json!({"task": "T3", "attempt": c, "base": "c1", "resumed_from": 14}),
        ));
        let (prior, _) = priors(&retried);
        let t3: Vec<(u32, u64, bool)> = prior
            .iter()
            .filter(|p| p.task == "T3")
            .map(|p| (p.tries, p.parent, p.answered))
            .collect();
        assert_eq!(t3, [(2, 15, false)]);
        let (prior, witnessed) = priors(&items);
        assert_eq!(witnessed, vec![3, 4]);
        assert_eq!(prior.len(), 2);
        assert_eq!(
            (prior[0].task.as_str(), prior[0].answered, prior[0].parent),
            ("T1", true, 5)
        );
        assert!(prior.iter().all(|p| p.tries == 1), "{prior:?}");
        assert_eq!(
            (prior[1].task.as_str(), prior[1].answered, prior[1].parent),
            ("T2", false, 12)
        );
        // After a halt, nothing of what was in flight is awaited.
        let mut halted = items.clone();
        halted.push((kind::HALTED.to_string(), 13, json!({"by": "ada"})));
        let (prior, _) = priors(&halted);
        assert!(prior.iter().all(|p| p.answered));
    }
}
