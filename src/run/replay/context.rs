//! The context a replayed run is handed: what the record's `context` entries hold, the
//! request's and each task's, in the order they were taken (a failure as the failure it
//! recorded), so no context command or repository read runs again.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use serde_json::Value as J;

use crate::ledger::{Storage, kind};
use crate::run::{ContextFailure, ContextProvider, lock};

use super::Recorded;

type Taken = Result<String, ContextFailure>;

/// Context answered from the record.
pub(super) struct ReplayContext {
    request: Mutex<VecDeque<Taken>>,
    tasks: Mutex<BTreeMap<String, VecDeque<Taken>>>,
}

/// A recorded context entry as the provider gave it.
fn taken(b: &J) -> Taken {
    match b.get("error").and_then(J::as_str) {
        None => Ok(b["context"].as_str().unwrap_or_default().to_string()),
        Some(code) => {
            let reason = b["reason"].as_str().unwrap_or_default();
            let message = reason
                .strip_prefix("the context provider failed: ")
                .and_then(|m| m.strip_suffix("; the run goes on without this context"))
                .unwrap_or(reason);
            Err(ContextFailure {
                code: code.to_string(),
                message: message.to_string(),
            })
        }
    }
}

impl ReplayContext {
    /// The context the run's entries hold; `None` when the run took none.
    pub(super) fn read(run: &[Recorded]) -> Option<ReplayContext> {
        let mut request = VecDeque::new();
        let mut tasks: BTreeMap<String, VecDeque<Taken>> = BTreeMap::new();
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
        })
    }
}

impl ContextProvider for ReplayContext {
    fn request_context(&self, _: &str, _: &dyn Storage) -> Taken {
        lock(&self.request).pop_front().unwrap_or(Ok(String::new()))
    }

    fn task_context(&self, task_id: &str, _: &str) -> Option<Taken> {
        lock(&self.tasks).get_mut(task_id)?.pop_front()
    }

    fn describe(&self) -> String {
        "the context the record holds".into()
    }
}
