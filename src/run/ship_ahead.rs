//! The pre-ship gate asked ahead: before a wave's changes are shipped one by one in plan
//! order, the gate (a call to the orchestrator seat) is asked about several of them at once,
//! and each answer is then witnessed as `ship` at the task's turn, as the one asked then would
//! have been. Only the calls overlap: the `ship` entries, the merges onto the run branch and
//! every other entry keep their order, so the record does not depend on which call came back
//! first. A dispatched run's results otherwise all wait on one writer asking its seat once per
//! change (a model call of seconds each on a real seat).

use std::collections::{BTreeMap, BTreeSet};

use crate::plan::Task;

use super::engine::Run;
use super::ship::Decision;
use super::work_state::{TaskWork, WorkRun};

/// How many of its own seat's calls (judgments, pre-ship gates) a dispatched run's writer makes
/// at once, however many workers there are: those calls run here, on the writer's machine.
pub(super) const WRITER_POOL: usize = 4;

/// A gate's answer asked ahead: the decision and the seat's raw reply.
pub(super) type Asked = (Decision, Option<String>);

impl Run<'_, '_> {
    /// How many of the run's own seat calls may go at once: the policy's `max_parallel`, and
    /// at least [`WRITER_POOL`] when the tasks run on workers elsewhere.
    pub(super) fn seat_width(&self) -> usize {
        let width = self.opts.policy.max_parallel.max(1);
        match self.dispatcher() {
            Some(_) => width.max(WRITER_POOL),
            None => width,
        }
    }

    /// Whether the gate would be asked about `tw`'s change at its turn: it is shippable, not
    /// shipped yet, not one of several attempts to choose from, not blocked by the guardrail,
    /// not merged on light verification.
    fn gate_would_ask(&self, w: &WorkRun, task: &str, tw: &TaskWork) -> bool {
        let light = w
            .verification
            .is_some_and(|v| !v.gate_every_change && !tw.checks.is_empty() && tw.checks_ok());
        let guarded = tw.change.as_ref().is_some_and(|c| !c.links_out.is_empty());
        tw.ship.is_none() && tw.shippable() && !light && !guarded && !self.chooses_attempt(w, task)
    }

    /// Asks the gate at once about the next changes of `pending` (the wave's tasks not shipped
    /// yet, in plan order) that it would be asked about at their turn, as many as
    /// [`Run::seat_width`] allows, and returns the answers by task. Nothing is asked (an empty
    /// map) unless the run is dispatched, at least two qualify and no limit could stop one of
    /// the calls
    /// ([`Run::can_judge_at_once`]). The group is the changes at the head of `pending` that
    /// qualify, ending at the first change that does not (tasks with no change are passed
    /// over). A change joins only when it adds something to the run branch now and touches no
    /// file that another change of the wave touches before its turn (`done`, the wave's tasks
    /// already shipped, and the group ahead of it): nothing merged before its turn can then
    /// conflict with it or make it add nothing, no conflict re-runs a task meanwhile, and every
    /// answer asked is used and witnessed.
    ///
    /// `ready` says which tasks have their result in (a wave shipped while some of its tasks
    /// are still out, `ship_early.rs`): `None`, and nothing asked, when a task the group is
    /// chosen from is not, so the group is always the one the whole wave's results give.
    pub(super) fn ask_gates_ahead(
        &self,
        w: &WorkRun,
        done: &[&Task],
        pending: &[&Task],
        ready: &dyn Fn(&str) -> bool,
    ) -> Option<BTreeMap<String, Asked>> {
        // An in-process run asks about one change at a time, as before.
        if self.dispatcher().is_none() {
            return Some(BTreeMap::new());
        }
        let width = self.seat_width();
        let mut group: Vec<(&Task, TaskWork)> = Vec::new();
        let files_of = |tw: &TaskWork| -> Vec<String> {
            tw.change
                .as_ref()
                .map(|c| c.files.iter().map(|f| f.path.clone()).collect())
                .unwrap_or_default()
        };
        let mut touched: BTreeSet<String> =
            done.iter().flat_map(|t| files_of(&w.get(&t.id))).collect();
        for t in pending {
            if group.len() >= width {
                break;
            }
            if !ready(&t.id) {
                return None;
            }
            let tw = w.get(&t.id);
            let files = files_of(&tw);
            let joins = self.gate_would_ask(w, &t.id, &tw)
                && tw.change.is_some()
                && tw.commit().is_some_and(|commit| {
                    !files.iter().any(|f| touched.contains(f))
                        && matches!(w.in_shared_turn(|| w.bench.adds_nothing(commit)), Ok(false))
                });
            if !joins && !files.is_empty() {
                // A change that merges between two of the group could conflict and run again,
                // and its new change make a later one of the group add nothing: the group ends
                // here, so no answer asked goes unused.
                break;
            }
            touched.extend(files);
            if joins {
                group.push((t, tw));
            }
        }
        if !self.can_judge_at_once(group.len()) || self.over_budget() {
            return Some(BTreeMap::new());
        }
        let answers: Vec<_> = std::thread::scope(|s| {
            let each: Vec<_> = group
                .iter()
                .map(|(t, tw)| {
                    let diff = tw.change.as_ref().map(|c| c.diff.as_str()).unwrap_or("");
                    s.spawn(move || self.scoped(|| self.ask_ship_gate(t, &tw.checks, diff)))
                })
                .collect();
            each.into_iter().map(|h| h.join()).collect()
        });
        let answers = group
            .iter()
            .zip(answers)
            .map(|((t, _), a)| {
                let a = a.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                (t.id.clone(), a)
            })
            .collect();
        Some(answers)
    }
}
