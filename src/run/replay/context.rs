//! The context a replayed run is handed: what the record's `context` entries hold, the
//! request's and each task's, in the order they were taken (a failure as the failure it
//! recorded), so no context command or repository read runs again. Of a text the context
//! budget cut, the entry holds what the budget read: the text it admitted, the first
//! character after the cut, and the text's length (`seen_bytes`), which the replay hands the
//! budget again (see [`ContextProvider::seen_bytes`]).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use serde_json::Value as J;

use crate::ledger::{Storage, kind};
use crate::run::{ContextFailure, ContextProvider, lock};

use super::Recorded;

type Taken = Result<String, ContextFailure>;

/// One recorded context: what the provider gave (as far as the budget read it), and the
/// length of the text the budget saw when it was longer.
type Given = (Taken, Option<u64>);

/// Context answered from the record.
pub(super) struct ReplayContext {
    request: Mutex<VecDeque<Given>>,
    tasks: Mutex<BTreeMap<String, VecDeque<Given>>>,
    /// The length each last handed text had, by task (`None`: the request).
    last: Mutex<BTreeMap<Option<String>, Option<u64>>>,
}

/// A recorded context entry as the provider gave it.
fn taken(b: &J) -> Given {
    match b.get("error").and_then(J::as_str) {
        None => {
            let mut text = b["context"].as_str().unwrap_or_default().to_string();
            text.push_str(b["next"].as_str().unwrap_or_default());
            (Ok(text), b["seen_bytes"].as_u64())
        }
        Some(code) => {
            let reason = b["reason"].as_str().unwrap_or_default();
            let message = reason
                .strip_prefix("the context provider failed: ")
                .and_then(|m| m.strip_suffix("; the run goes on without this context"))
                .unwrap_or(reason);
            let failure = ContextFailure {
                code: code.to_string(),
                message: message.to_string(),
            };
            (Err(failure), None)
        }
    }
}

impl ReplayContext {
    /// The context the run's entries hold; `None` when the run took none.
    pub(super) fn read(run: &[Recorded]) -> Option<ReplayContext> {
        let mut request = VecDeque::new();
        let mut tasks: BTreeMap<String, VecDeque<Given>> = BTreeMap::new();
        for e in run.iter().filter(|e| e.kind == kind::CONTEXT) {
            match e.payload.get("task").and_then(J::as_str) {
                Some(t) => tasks
                    .entry(t.to_string())
                    .or_default()
                    .push_back(taken(&e.payload)),
                None => request.push_back(taken(&e.payload)),
            }
        }
        (!request.is_empty() || !tasks.is_empty()).then(|| ReplayContext {
            request: Mutex::new(request),
            tasks: Mutex::new(tasks),
            last: Mutex::new(BTreeMap::new()),
        })
    }

    fn handed(&self, task: Option<&str>, given: Option<Given>) -> Option<Taken> {
        let (taken, bytes) = given?;
        lock(&self.last).insert(task.map(str::to_string), bytes);
        Some(taken)
    }
}

impl ContextProvider for ReplayContext {
    fn request_context(&self, _: &str, _: &dyn Storage) -> Taken {
        let given = lock(&self.request).pop_front();
        self.handed(None, given).unwrap_or(Ok(String::new()))
    }

    fn task_context(&self, task_id: &str, _: &str) -> Option<Taken> {
        let given = lock(&self.tasks).get_mut(task_id)?.pop_front();
        self.handed(Some(task_id), given)
    }

    fn describe(&self) -> String {
        "the context the record holds".into()
    }

    fn seen_bytes(&self, task: Option<&str>) -> Option<u64> {
        lock(&self.last)
            .get(&task.map(str::to_string))
            .copied()
            .flatten()
    }
}

/// Refuses a run whose context budget the record cannot apply again: one that does not
/// record the budget's settings, and one recorded before `context` entries kept the length
/// of a text the budget cut (the first such `context_budget` entry is named).
pub(super) fn check(run: &[Recorded], budget: bool) -> Result<(), String> {
    let request = run[0].seq;
    let pressures = run
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == kind::CONTEXT_BUDGET);
    for (i, e) in pressures {
        if !budget {
            return Err(format!(
                "seq {} of run {request} is a context_budget entry, but the run's request does not record the context budget's settings: an older record, which strict replay cannot apply the budget of again without inventing them",
                e.seq
            ));
        }
        let task = match e.payload["source"].as_str() {
            Some("request") => None,
            Some("task") => e.payload["label"].as_str(),
            _ => continue,
        };
        if e.payload["action"] == "retained" {
            continue;
        }
        let kept = run[i + 1..]
            .iter()
            .find(|c| c.kind == kind::CONTEXT && c.payload["task"].as_str() == task)
            .is_some_and(|c| c.payload.get("seen_bytes").is_some());
        if !kept {
            return Err(format!(
                "seq {} of run {request} is a context_budget entry that cut the {} context, recorded before context entries kept the length of the text the budget saw: an older record, which strict replay cannot apply the budget to again without inventing that text",
                e.seq,
                task.map_or("request's".to_string(), |t| format!("task {t}'s"))
            ));
        }
    }
    Ok(())
}
