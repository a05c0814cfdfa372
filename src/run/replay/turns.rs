//! The order in which the tasks of a replayed wave take from the context budget's run-wide
//! total: the order the record shows. A live run witnesses each take (its `context_budget`
//! entries) before the next begins, so the seq order of those entries is the order the tasks
//! reached the budget in; the replay makes each task wait for its turn in that order before
//! the engine takes, and so hands each the share it had.
//!
//! A take the record does not hold (the replay decided otherwise somewhere) goes at once, and
//! a take whose turn comes after one that can no longer be made (its task has ended) does not
//! wait for it. Should every thread of the wave wait (on takes of tasks no thread will start,
//! as when the replay took another way than the record), the one whose turn comes first goes,
//! so a replay never hangs on the order; what it took then differs, and is reported as the
//! divergence it is.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Condvar, Mutex};

use serde_json::Value as J;

use crate::ledger::kind;
use crate::run::{ContextTurns, Take, lock};

use super::Recorded;

/// One take of the record: the task it was for, and which.
type Turn = (String, Take);

#[derive(Default)]
struct State {
    /// The takes still to come, in the record's order.
    queue: Vec<Turn>,
    /// Tasks running now, with the take each waits for.
    running: BTreeMap<String, Option<Take>>,
    /// Tasks that ended: their takes are no longer waited for.
    ended: BTreeSet<String>,
    /// The threads of the wave that may still take a task.
    threads: usize,
}

impl State {
    fn position(&self, turn: &Turn) -> Option<usize> {
        self.queue.iter().position(|q| q == turn)
    }

    /// Whether `turn` may be taken now.
    fn may_take(&self, turn: &Turn) -> bool {
        let Some(at) = self.position(turn) else {
            return true;
        };
        if !self.queue[..at]
            .iter()
            .any(|(t, _)| !self.ended.contains(t))
        {
            return true;
        }
        // Every thread of the wave waits: the first waiting in the record's order goes.
        let waiting: Vec<Turn> = self
            .running
            .iter()
            .filter_map(|(t, w)| w.map(|w| (t.clone(), w)))
            .collect();
        if waiting.len() < self.threads {
            return false;
        }
        let first = waiting
            .iter()
            .min_by_key(|w| self.position(w).unwrap_or(usize::MAX));
        first == Some(turn)
    }
}

/// The record's order of takes from the run-wide total.
pub(super) struct ReplayTurns {
    state: Mutex<State>,
    changed: Condvar,
}

/// The task a `context_budget` body's slice was taken for, and which take it was part of.
fn turn_of(b: &J) -> Option<Turn> {
    let label = b["label"].as_str()?;
    match b["source"].as_str()? {
        "task" => Some((label.to_string(), Take::Task)),
        "upstream" => Some((label.rsplit_once("->")?.1.to_string(), Take::Upstream)),
        _ => None,
    }
}

impl ReplayTurns {
    /// The order of the takes `written` holds (a take of several slices counted once);
    /// `None` when the run had no run-wide total to share.
    pub(super) fn read(written: &[Recorded], total: bool) -> Option<ReplayTurns> {
        let mut queue: Vec<Turn> = Vec::new();
        let slices = written.iter().filter(|e| e.kind == kind::CONTEXT_BUDGET);
        for turn in slices.filter_map(|e| turn_of(&e.payload)) {
            if queue.last() != Some(&turn) {
                queue.push(turn);
            }
        }
        (total && !queue.is_empty()).then(|| ReplayTurns {
            state: Mutex::new(State {
                queue,
                ..State::default()
            }),
            changed: Condvar::new(),
        })
    }
}

impl ContextTurns for ReplayTurns {
    fn wave(&self, threads: usize) {
        lock(&self.state).threads = threads;
        self.changed.notify_all();
    }

    fn thread_ended(&self) {
        let mut s = lock(&self.state);
        s.threads = s.threads.saturating_sub(1);
        drop(s);
        self.changed.notify_all();
    }

    fn task(&self, task: &str, entered: bool) {
        let mut s = lock(&self.state);
        if entered {
            s.running.insert(task.to_string(), None);
            s.ended.remove(task);
        } else {
            s.running.remove(task);
            s.ended.insert(task.to_string());
            s.queue.retain(|(t, _)| t != task);
        }
        drop(s);
        self.changed.notify_all();
    }

    fn wait(&self, task: &str, take: Take) {
        let turn = (task.to_string(), take);
        let mut s = lock(&self.state);
        s.running.insert(task.to_string(), Some(take));
        self.changed.notify_all();
        while !s.may_take(&turn) {
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        s.running.insert(task.to_string(), None);
    }

    fn done(&self, task: &str, take: Take) {
        let mut s = lock(&self.state);
        let turn = (task.to_string(), take);
        if let Some(at) = s.position(&turn) {
            s.queue.remove(at);
        }
        drop(s);
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn budget(seq: u64, source: &str, label: &str) -> Recorded {
        Recorded {
            seq,
            ts: 0.0,
            actor: "context-budget".into(),
            kind: kind::CONTEXT_BUDGET.into(),
            parent: Some(1),
            payload: json!({"source": source, "label": label}),
        }
    }

    /// Three tasks started in the order T1, T2, T3 take in the record's order T3, T1, T2.
    #[test]
    fn tasks_take_in_the_records_order_whatever_order_they_ask_in() {
        let written = [
            budget(2, "request", "request"),
            budget(3, "upstream", "T0->T3"),
            budget(4, "task", "T3"),
            budget(5, "upstream", "T0->T1"),
            budget(6, "upstream", "T9->T1"),
            budget(7, "task", "T2"),
            budget(8, "upstream", "T1->synthesizer"),
        ];
        let turns = Arc::new(ReplayTurns::read(&written, true).unwrap());
        assert!(ReplayTurns::read(&written, false).is_none());
        let order = Arc::new(Mutex::new(Vec::new()));
        turns.wave(3);
        let tasks = ["T1", "T2", "T3"].map(|t| {
            let (turns, order) = (turns.clone(), order.clone());
            std::thread::spawn(move || {
                turns.task(t, true);
                for take in [Take::Upstream, Take::Task] {
                    turns.wait(t, take);
                    lock(&order).push(format!("{t} {take:?}"));
                    turns.done(t, take);
                }
                turns.task(t, false);
                turns.thread_ended();
            })
        });
        for t in tasks {
            t.join().unwrap();
        }
        let order = lock(&order).clone();
        let at = |s: &str| order.iter().position(|o| o == s).unwrap();
        assert!(at("T3 Upstream") < at("T3 Task"));
        assert!(at("T3 Task") < at("T1 Upstream"));
        assert!(at("T1 Upstream") < at("T2 Task"));
    }

    /// A take the record is waiting on that never comes does not hang the others.
    #[test]
    fn a_take_that_never_comes_does_not_hang_the_wave() {
        let written = [budget(3, "task", "T9"), budget(4, "task", "T1")];
        let turns = ReplayTurns::read(&written, true).unwrap();
        turns.wave(1);
        turns.task("T1", true);
        turns.wait("T1", Take::Task);
        turns.done("T1", Take::Task);
        turns.task("T1", false);
    }
}
