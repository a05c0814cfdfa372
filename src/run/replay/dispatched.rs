//! The dispatch side of a replayed `--dispatch` run: a [`Dispatch`] that answers the writer
//! from the record in place of the NATS server, the remote and the workers. What came from
//! outside the writer is given back as it was witnessed: the attempt ids it drew (per task, in
//! the order it drew them), each worker's result (its report, model, tool and model calls,
//! checks and confinement, as its `result` entry keeps them), whether its commit could be
//! brought in (the refused `change` that names the attempt keeps why not), the results that
//! came a second time (`duplicate_result`), and the commit each task was published on. No
//! message is sent and no ref is pushed or fetched. Whether the writer could bring a worker's
//! commit in is decided again from the commit where the result names it ([`super::brought`]).
//!
//! The writer decides the rest again: which tasks go out in which wave, the dispatch entries
//! (base refs, subject, the `retry` of a refused change and its bound), the acceptance of each
//! result, the refusals it witnesses and when it stops trying, the duplicates it witnesses
//! and never merges, and then, as for any `--work` run, the checks, the gate, the merges and
//! the answer.
//!
//! A run resumed after its writer stopped replays through the resume: the engine hands the
//! dispatcher what the record says was issued and answered (as it hands a live writer), and
//! the dispatcher takes up each attempt still in flight by the writer's rule (the latest of a
//! task, on the base the task starts on again), so the `task_dispatched` entries that say
//! `resumed_from` are decided again and compared; the results that came while no writer
//! listened are answered from the record as any other.
//!
//! Two readings of the writer's own side are answered from the record too, as a tool's result
//! is: the push of a task's base that the remote refused (the `result` with error
//! `unpublished` keeps the line it said, which [`Dispatch::push_base`] gives back), and the
//! task's worktree that failed to open (the refused `change` keeps why, which the replay's
//! workbench gives back for that opening); the engine decides again what follows each.
//!
//! A shape the record cannot answer is refused by [`check`], naming the seq: a result that
//! says its task was interrupted while a worker had it. This version writes none (an
//! interrupted run writes nothing of its own but `halted` or `interrupted`, so a run halted
//! while a worker held a task replays up to that entry); only a record made otherwise holds one.
//!
//! The worker's commit an accepted result names is screened again, as the writer screened it
//! before committing it, by the workbench ([`super::work`]) through [`super::Merges::screened`].

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value as J;

use crate::fleet::protocol::{self, ResultMessage, TaskMessage};
use crate::ledger::kind;
use crate::run::{Arrived, Dispatch, Duplicate, Prior, lock};

use super::Recorded;

/// Whether the run whose request is `request` was dispatched to workers elsewhere.
pub(super) fn is_dispatched(request: &Recorded) -> bool {
    request.payload["work"].get("dispatch").is_some()
}

/// Refuses a dispatched run whose record cannot answer the writer, naming the seq that shows
/// it; any other run passes.
pub(super) fn check(run: &[Recorded]) -> Result<(), String> {
    if !is_dispatched(&run[0]) {
        return Ok(());
    }
    let refuse = |seq: u64, why: &str| {
        Err(format!(
            "seq {seq} of dispatched run {}: {why}, which strict replay cannot answer from the record: it refuses rather than invent it",
            run[0].seq
        ))
    };
    for e in run {
        let b = &e.payload;
        if e.kind == kind::RESULT && b["error"] == "interrupted" && b["attempt"].is_string() {
            return refuse(
                e.seq,
                "the run stopped waiting for this task's worker, at a moment the record does not hold",
            );
        }
    }
    Ok(())
}

/// A duplicate result the record witnessed: its attempt, the seq of the `task_dispatched` it
/// answers, and what the worker sent.
struct Again {
    attempt: String,
    parent: u64,
    stream_seq: u64,
    result: ResultMessage,
}

/// What the record answers, taken as the writer asks.
#[derive(Default)]
struct Taken {
    /// Per task: the attempt ids the writer drew, oldest first.
    attempts: BTreeMap<String, VecDeque<String>>,
    /// Per attempt: the result its worker sent and the stream sequence it came at.
    results: BTreeMap<String, (ResultMessage, u64)>,
    /// Per attempt: why its commit could not be brought in, when the writer refused it.
    refused: BTreeMap<String, String>,
    /// The duplicates not yet handed over, in record order.
    again: VecDeque<Again>,
    /// The attempts whose result the writer has taken, with the seq of their dispatch in the
    /// replay (a duplicate's parent).
    answered: BTreeMap<String, u64>,
    /// The attempts the replay published, with the seq of their `task_dispatched` entry.
    published: BTreeMap<String, u64>,
    /// What the writer asked that the record had no answer for.
    unanswered: Vec<String>,
    /// What was answered from the record rather than decided again, one line each.
    from_record: Vec<String>,
    /// Per task: the attempt a stopped writer left in flight, which a resume takes up.
    in_flight: BTreeMap<String, Prior>,
    /// Every attempt the record sent out in the part being replayed.
    expected: BTreeSet<String>,
    /// Per task: what the remote said each time it refused the task's base, oldest first.
    unpublished: BTreeMap<String, VecDeque<String>>,
}

/// The prefix of the output of a task whose base could not be pushed (`run/remote.rs`).
const UNSENT: &str = "error: ";

/// Whether `base_ref` is task `task`'s, named in refs as the writer names it
/// (`Run::ref_name`): by its id, or by a digest of an id that reads as a secret.
fn names(base_ref: &str, task: &str) -> bool {
    let hash = crate::ledger::hash::sha256_hex(task.as_bytes());
    base_ref.ends_with(&format!("/{task}")) || base_ref.ends_with(&format!("/task-{}", &hash[..16]))
}

/// The longest a waiting task of a part the record shows stopped is held while the part's
/// other attempts go out: reached only when the replay already decided otherwise than the
/// record (it never sends one of them), so a divergence never hangs the replay.
const HELD_AT_MOST: Duration = Duration::from_secs(60);

/// The dispatcher of a replayed run.
pub(super) struct ReplayDispatch {
    /// What the request recorded of its dispatch.
    record: J,
    /// The server, as the dispatch entries name it.
    server: String,
    taken: Mutex<Taken>,
    /// Told each time an attempt goes out.
    went_out: Condvar,
    /// Whether the part being replayed was stopped from outside (its writer killed, halted
    /// or interrupted): a task it was waiting on then is held until the part's other attempts
    /// went out, as the live writer waited until it was stopped.
    stopped: bool,
    /// The repository the workers' commits are read from, to check them again.
    merges: Option<Arc<dyn super::Merges>>,
    /// The entries the part being replayed has written so far, and how many the record holds
    /// of it: a task held at a stop waits for the part to have written them all too.
    part: Option<(super::phases::Written, usize)>,
}

/// A worker's result as its `result` entry keeps it, for the run's ledger `ledger`. `Err`
/// names a report the entry does not hold in the shape a worker sends.
fn result_of(e: &Recorded, ledger: &str, run: u64) -> Result<ResultMessage, String> {
    let b = &e.payload;
    let c = &b["claims"];
    let text = |v: &J| v.as_str().unwrap_or_default().to_string();
    let list = |k: &str| c.get(k).cloned().unwrap_or_else(|| J::Array(Vec::new()));
    let bad = |what: &str, err: serde_json::Error| {
        format!(
            "the result at seq {} keeps the worker's {what} in a shape a worker does not send ({err})",
            e.seq
        )
    };
    Ok(ResultMessage {
        schema: protocol::RESULT_SCHEMA.into(),
        ledger: ledger.to_string(),
        run,
        // A task's result names it `id`, a duplicate `task`.
        task: text(b.get("id").unwrap_or(&b["task"])),
        attempt: text(&b["attempt"]),
        worker: text(&b["worker"]),
        ok: b["ok"] == true,
        output: text(&b["output"]),
        model: text(&b["model"]),
        // The worker's commit, which the writer checks again ([`ReplayDispatch::bring`]); a
        // result recorded before it was kept names none, and the record answers. The change
        // the writer then commits from it is answered from its `change` entry.
        commit: b["commit"].as_str().map(str::to_string),
        error: b["error"].as_str().map(str::to_string),
        tool_calls: serde_json::from_value(list("tool_calls")).map_err(|x| bad("tool calls", x))?,
        model_calls: serde_json::from_value(list("model_calls"))
            .map_err(|x| bad("model calls", x))?,
        checks: serde_json::from_value(list("checks")).map_err(|x| bad("checks", x))?,
        confinement: text(&c["confinement"]),
        found_in_ref: c["found_in_ref"] == true,
    })
}

/// The ledger a dispatched run's base refs name (`refs/forum/bases/LEDGER/RUN/TASK`).
fn ledger_of(run: &[Recorded]) -> Option<String> {
    let at = format!("/{}/", run[0].seq);
    run.iter()
        .filter(|e| e.kind == kind::TASK_DISPATCHED)
        .find_map(|e| {
            let r = e.payload["base_ref"].as_str()?;
            let rest = r.strip_prefix("refs/forum/bases/")?;
            rest.rfind(&at).map(|i| rest[..i].to_string())
        })
}

/// The commit each task was first published on, per task, oldest first (a refused change's
/// retry goes out on the same commit): where the writer's repository started it.
pub(super) fn starts(run: &[Recorded]) -> BTreeMap<String, VecDeque<String>> {
    let mut out: BTreeMap<String, VecDeque<String>> = BTreeMap::new();
    for e in run.iter().filter(|e| e.kind == kind::TASK_DISPATCHED) {
        let b = &e.payload;
        if let (Some(t), Some(base), None) =
            (b["task"].as_str(), b["base"].as_str(), b.get("retry"))
        {
            out.entry(t.to_string())
                .or_default()
                .push_back(base.to_string());
        }
    }
    out
}

/// The ledger a replayed run's work names and, for a dispatched run, its dispatcher answering
/// from `view` (the part of `run` being replayed). `Err` names an entry whose answer cannot be
/// read.
pub(super) fn of(
    run: &[Recorded],
    view: &[Recorded],
    merges: Option<Arc<dyn super::Merges>>,
    part: (super::phases::Written, usize),
) -> Result<(String, Option<Arc<ReplayDispatch>>), String> {
    // A dispatched run's base refs and subject name its ledger.
    let ledger = ledger_of(run).unwrap_or_else(|| "replay".into());
    // A part the record holds more after (a resume, a halt) was stopped from outside.
    let stopped = view.last().map(|e| e.seq) < run.last().map(|e| e.seq);
    let dispatch = ReplayDispatch::read(&run[0], view, &ledger)?.map(|mut d| {
        d.merges = merges;
        d.stopped = stopped;
        d.part = Some(part);
        Arc::new(d)
    });
    Ok((ledger, dispatch))
}

impl ReplayDispatch {
    /// The dispatcher of the dispatched run `run` (its entries in seq order), its ledger
    /// named `ledger`; `None` for a run that was not dispatched. `Err` names an entry whose
    /// answer cannot be read.
    pub(super) fn read(
        request: &Recorded,
        run: &[Recorded],
        ledger: &str,
    ) -> Result<Option<ReplayDispatch>, String> {
        if !is_dispatched(request) {
            return Ok(None);
        }
        let mut t = Taken::default();
        let mut server = None;
        for e in run {
            let b = &e.payload;
            let attempt = b["attempt"].as_str().map(str::to_string);
            match (e.kind.as_str(), attempt) {
                // An attempt a resume took up was drawn before it ([`Dispatch::adopt`]).
                (kind::TASK_DISPATCHED, Some(a)) if b.get("resumed_from").is_some() => {
                    t.expected.insert(a);
                }
                (kind::TASK_DISPATCHED, Some(a)) => {
                    t.expected.insert(a.clone());
                    server = server.or_else(|| b["server"].as_str().map(str::to_string));
                    let task = b["task"].as_str().unwrap_or_default().to_string();
                    t.attempts.entry(task).or_default().push_back(a);
                }
                (kind::RESULT, None) if b["error"] == "unpublished" => {
                    let output = b["output"].as_str().unwrap_or_default();
                    let why = output.strip_prefix(UNSENT).unwrap_or(output);
                    let id = b["id"].as_str().unwrap_or_default().to_string();
                    t.unpublished
                        .entry(id)
                        .or_default()
                        .push_back(why.to_string());
                }
                (kind::RESULT, Some(a)) => {
                    t.from_record.extend(super::brought::older(e));
                    let r = result_of(e, ledger, request.seq)?;
                    let stream = b["stream_seq"].as_u64().unwrap_or_default();
                    t.results.entry(a).or_insert((r, stream));
                }
                (kind::CHANGE, Some(a)) if b["refused"] == true => {
                    let why = b["error"].as_str().unwrap_or_default().to_string();
                    t.refused.insert(a, why);
                }
                (kind::DUPLICATE_RESULT, Some(a)) => {
                    let mut r = result_of(e, ledger, request.seq)?;
                    r.commit = b["commit"].as_str().map(str::to_string);
                    r.found_in_ref = b["found_in_ref"] == true;
                    t.again.push_back(Again {
                        attempt: a,
                        parent: e.parent.unwrap_or_default(),
                        stream_seq: b["stream_seq"].as_u64().unwrap_or_default(),
                        result: r,
                    });
                }
                _ => {}
            }
        }
        Ok(Some(ReplayDispatch {
            record: request.payload["work"]["dispatch"].clone(),
            server: server.unwrap_or_default(),
            taken: Mutex::new(t),
            went_out: Condvar::new(),
            stopped: false,
            merges: None,
            part: None,
        }))
    }

    /// What was answered from the record rather than decided again.
    pub(super) fn answered_from_record(&self) -> Vec<String> {
        lock(&self.taken).from_record.clone()
    }

    /// What the writer asked that the record had no answer for.
    pub(super) fn unanswered(&self) -> Vec<String> {
        lock(&self.taken).unanswered.clone()
    }
}

impl Dispatch for ReplayDispatch {
    fn describe(&self) -> String {
        self.server.clone()
    }

    fn record(&self) -> J {
        self.record.clone()
    }

    /// What the record says the run issued: each attempt not answered is in flight, the
    /// latest of a task when it has two (the earlier's result is then a duplicate, which the
    /// record witnessed). Listening again is the world's: the results that came are answered
    /// from the record ([`Dispatch::wait`]).
    fn resume(&self, _: u64, prior: &[Prior], _: &[u64]) -> Result<(), String> {
        let mut t = lock(&self.taken);
        for p in prior.iter().filter(|p| !p.answered) {
            t.in_flight.insert(p.task.clone(), p.clone());
        }
        Ok(())
    }

    /// The attempt in flight for `task`, taken up when it went out on `base` (the writer's
    /// rule): its id, the seq of its dispatch and which try it is.
    fn adopt(&self, task: &str, base: &str) -> Option<(String, u64, u32)> {
        let f = lock(&self.taken).in_flight.remove(task)?;
        (f.base == base).then_some((f.attempt, f.parent, f.tries))
    }

    fn settle(&self, _: u64) {}

    fn halt(&self, _: u64, _: &str, _: &str) {}

    fn attempt_id(&self, task: &str) -> String {
        let mut t = lock(&self.taken);
        match t.attempts.get_mut(task).and_then(VecDeque::pop_front) {
            Some(a) => a,
            None => {
                t.unanswered
                    .push(format!("the record holds no attempt id for task {task}"));
                format!("(no attempt of task {task} in the record)")
            }
        }
    }

    /// The remote took the base, unless the record says it refused the task's: then what it
    /// said. Each task's answer is its own (a live writer pushes a wave's bases at once, and
    /// each task of a refused push records the same line).
    fn push_base(&self, base_ref: &str, _: &str) -> Result<(), String> {
        let mut t = lock(&self.taken);
        let refused = t
            .unpublished
            .iter_mut()
            .find(|(task, _)| names(base_ref, task))
            .and_then(|(_, q)| q.pop_front());
        refused.map_or(Ok(()), Err)
    }

    fn publish(&self, task: &TaskMessage) -> Result<(), String> {
        lock(&self.taken)
            .published
            .insert(task.attempt.clone(), task.task_seq);
        self.went_out.notify_all();
        Ok(())
    }

    fn republish(&self, task: &TaskMessage) -> Result<bool, String> {
        self.publish(task).map(|()| true)
    }

    fn wait(&self, attempt: &str, _: &dyn Fn() -> bool) -> Result<Option<Arrived>, String> {
        let mut t = lock(&self.taken);
        let Some((result, stream_seq)) = t.results.remove(attempt) else {
            let line = format!("the record holds no result for attempt {attempt}");
            if self.stopped {
                // The writer was stopped while it waited here: the part ends once its other
                // attempts went out and it wrote what the record holds of it (the other tasks'
                // entries before the stop), and what follows has no answer by design.
                let until = Instant::now() + HELD_AT_MOST;
                let written = || {
                    self.part
                        .as_ref()
                        .is_none_or(|(n, of)| n.load(std::sync::atomic::Ordering::SeqCst) >= *of)
                };
                while !(t.expected.iter().all(|a| t.published.contains_key(a)) && written())
                    && Instant::now() < until
                {
                    let step = Duration::from_millis(100);
                    t = self
                        .went_out
                        .wait_timeout(t, step)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
                return Err(line);
            }
            t.unanswered.push(line.clone());
            return Err(line);
        };
        let sent = t.published.get(attempt).copied().unwrap_or_default();
        t.answered.insert(attempt.to_string(), sent);
        Ok(Some(Arrived { result, stream_seq }))
    }

    fn take_duplicates(&self) -> Vec<Duplicate> {
        // A duplicate is handed over once the replay has taken the first result of its
        // attempt, under that attempt's dispatch in the replay.
        let mut t = lock(&self.taken);
        let (now, later): (Vec<Again>, Vec<Again>) = std::mem::take(&mut t.again)
            .into_iter()
            .partition(|a| t.answered.contains_key(&a.attempt));
        t.again = later.into();
        now.into_iter()
            .map(|a| Duplicate {
                parent: t.answered.get(&a.attempt).copied().unwrap_or(a.parent),
                result: a.result,
                stream_seq: a.stream_seq,
            })
            .collect()
    }

    fn fetch_result(&self, _: &str, _: &ResultMessage) -> Result<(), String> {
        Ok(())
    }

    fn bring(
        &self,
        result_ref: &str,
        r: &ResultMessage,
        base: &str,
        _: Option<&Path>,
    ) -> Result<(), String> {
        let mut t = lock(&self.taken);
        let recorded = t.refused.remove(&r.attempt);
        let Some(commit) = &r.commit else {
            return recorded.map_or(Ok(()), Err);
        };
        let facts = self.merges.as_ref().and_then(|m| m.worker_commit(commit));
        let held = self.merges.as_ref().and_then(|m| m.ref_target(result_ref));
        // Whether the ref could have moved from what the record says it held to the commit.
        let claimed = recorded.as_deref().and_then(super::brought::held_instead);
        let forward = claimed.and_then(|g| self.merges.as_ref()?.descends(commit, g));
        let at = (commit.as_str(), base, r.attempt.as_str());
        let read = super::brought::Read {
            facts: facts.as_ref(),
            held: held.as_deref(),
            forward,
        };
        let (answer, line) = super::brought::decide(at, recorded, read);
        t.from_record.extend(line);
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn e(seq: u64, kind: &str, parent: Option<u64>, payload: J) -> Recorded {
        Recorded {
            seq,
            ts: seq as f64,
            actor: "dispatch".into(),
            kind: kind.into(),
            parent,
            payload,
        }
    }

    fn run() -> Vec<Recorded> {
        let claims = json!({"worker": "w", "confinement": "bwrap", "found_in_ref": false,
            "checks": [{"command": "true", "ok": true, "exit": 0, "seconds": 0.1}],
            "tool_calls": [], "model_calls": [{"model": "m", "prompt_tokens": 3, "completion_tokens": 4}]});
        vec![
            e(
                7,
                kind::REQUEST,
                None,
                json!({"work": {"dispatch": {"server": "nats://x", "remote": "origin"}}}),
            ),
            e(
                9,
                kind::TASK_DISPATCHED,
                Some(8),
                json!({"task": "T1", "attempt": "a1", "base": "c0",
                    "base_ref": "refs/forum/bases/team/main/7/T1", "server": "nats://x"}),
            ),
            e(
                10,
                kind::RESULT,
                Some(9),
                json!({"id": "T1", "attempt": "a1", "ok": true, "output": "done", "model": "m",
                    "worker": "w", "claims": claims, "stream_seq": 3}),
            ),
            e(
                11,
                kind::CHANGE,
                Some(10),
                json!({"task": "T1", "attempt": "a1", "refused": true, "commit": null,
                    "error": "cannot fetch the worker's commit"}),
            ),
            e(
                12,
                kind::TASK_DISPATCHED,
                Some(8),
                json!({"task": "T1", "attempt": "a2", "base": "c0", "retry": {"of": "a1"},
                    "base_ref": "refs/forum/bases/team/main/7/T1", "server": "nats://x"}),
            ),
            e(
                13,
                kind::RESULT,
                Some(12),
                json!({"id": "T1", "attempt": "a2", "ok": true, "output": "done", "model": "m",
                    "worker": "w", "claims": claims, "stream_seq": 4}),
            ),
            e(
                14,
                kind::DUPLICATE_RESULT,
                Some(9),
                json!({"task": "T1", "attempt": "a1", "worker": "w", "ok": true,
                    "commit": "c9", "stream_seq": 5, "found_in_ref": false}),
            ),
        ]
    }

    #[test]
    fn the_writer_is_answered_what_the_record_witnessed_and_nothing_else() {
        let run = run();
        assert_eq!(ledger_of(&run).as_deref(), Some("team/main"));
        assert_eq!(starts(&run)["T1"], VecDeque::from(["c0".to_string()]));
        let d = ReplayDispatch::read(&run[0], &run, "team/main")
            .unwrap()
            .unwrap();
        assert_eq!(d.describe(), "nats://x");
        assert_eq!(d.record()["remote"], "origin");
        assert_eq!(d.attempt_id("T1"), "a1");
        // No duplicate before its attempt is answered.
        assert!(d.take_duplicates().is_empty());
        let got = d.wait("a1", &|| false).unwrap().unwrap();
        assert_eq!((got.result.worker.as_str(), got.stream_seq), ("w", 3));
        assert_eq!(got.result.model_calls[0].completion_tokens, 4);
        let why = d.bring("r", &got.result, "c0", None).unwrap_err();
        assert_eq!(why, "cannot fetch the worker's commit");
        assert_eq!(d.attempt_id("T1"), "a2");
        let got = d.wait("a2", &|| false).unwrap().unwrap();
        assert!(d.bring("r", &got.result, "c0", None).is_ok());
        let dups = d.take_duplicates();
        assert_eq!(dups.len(), 1);
        assert_eq!(dups[0].result.commit.as_deref(), Some("c9"));
        assert_eq!(dups[0].result.task, "T1");
        // What the record does not hold is named, never made up.
        assert!(d.wait("a3", &|| false).is_err());
        d.attempt_id("T2");
        assert_eq!(d.unanswered().len(), 2, "{:?}", d.unanswered());
    }

    fn prior(task: &str, attempt: &str, base: &str, parent: u64, answered: bool) -> Prior {
        Prior {
            task: task.into(),
            attempt: attempt.into(),
            base: base.into(),
            parent,
            tries: 1,
            answered,
        }
    }

    #[test]
    fn a_resume_takes_up_the_latest_attempt_in_flight_on_the_same_base() {
        let mut run = run();
        // A resumed part's own dispatch of an attempt taken up draws no attempt id.
        run.push(e(
            20,
            kind::TASK_DISPATCHED,
            Some(8),
            json!({"task": "T2", "attempt": "b1", "base": "c0", "resumed_from": 9}),
        ));
        let d = ReplayDispatch::read(&run[0], &run, "team/main")
            .unwrap()
            .unwrap();
        d.resume(
            7,
            &[
                prior("T1", "a1", "c0", 8, true),
                prior("T2", "b0", "c0", 9, false),
                prior("T2", "b1", "c0", 10, false),
                prior("T3", "x1", "c0", 11, false),
            ],
            &[],
        )
        .unwrap();
        assert_eq!(d.adopt("T1", "c0"), None);
        assert_eq!(d.adopt("T2", "c0"), Some(("b1".to_string(), 10, 1)));
        assert_eq!(d.adopt("T2", "c0"), None);
        // Sent on another base than the one the task starts on now: sent afresh.
        assert_eq!(d.adopt("T3", "c1"), None);
        d.attempt_id("T2");
        assert_eq!(d.unanswered().len(), 1, "{:?}", d.unanswered());
    }

    #[test]
    fn a_refused_push_is_given_back_and_an_interrupted_wait_refused_naming_the_seq() {
        let mut run = run();
        run.push(e(20, kind::RESUME, Some(7), json!({})));
        run.push(e(
            21,
            kind::RESULT,
            Some(8),
            json!({"id": "T2", "error": "unpublished", "ok": false,
                "output": "error: cannot push: bases are closed here"}),
        ));
        assert!(check(&run).is_ok());
        let d = ReplayDispatch::read(&run[0], &run, "team/main")
            .unwrap()
            .unwrap();
        assert_eq!(d.push_base("refs/forum/bases/team/main/7/T1", "c0"), Ok(()));
        assert_eq!(
            d.push_base("refs/forum/bases/team/main/7/T2", "c0"),
            Err("cannot push: bases are closed here".to_string())
        );
        assert_eq!(d.push_base("refs/forum/bases/team/main/7/T2", "c0"), Ok(()));
        let mut interrupted = run.clone();
        interrupted.push(e(
            22,
            kind::RESULT,
            Some(9),
            json!({"id": "T1", "attempt": "a9", "error": "interrupted", "ok": false}),
        ));
        assert!(check(&interrupted).unwrap_err().starts_with("seq 22 "));
        // A run that was not dispatched is not this check's business.
        let local = vec![e(0, kind::REQUEST, None, json!({"work": {}}))];
        assert!(check(&local).is_ok());
    }
}
