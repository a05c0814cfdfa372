//! Shipping a wave's changes (the pre-ship gate, then integration onto the run branch or
//! quarantine), in plan order. A dispatched run ships while later tasks of the wave are still
//! out: each time a task's result is in, the longest run of the plan order whose results are
//! all in is shipped, so the merges of a wide wave are not all left to its end.
//!
//! The record is the one shipping after the wave gives: the `ship`, `conflict` and
//! `integrated` entries come in the same order with the same bodies, and only their place
//! among the wave's other tasks' entries moves (a strict replay compares each task's line of
//! entries apart). Each step depends only on the run branch (which only shipping moves, in
//! plan order) and on results already in, and the gate's group asked at once
//! (`ship_ahead.rs`) is chosen only once every task it is chosen from is in. Whatever could
//! decide otherwise at another moment — a limit on calls or seconds, a spending ceiling, a
//! secret that blocks the run, an interruption — ships the wave at its end, as before.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::json;

use crate::ledger::kind;
use crate::plan::{CompiledPlan, Task};

use super::engine::{Done, Run};
use super::send_order::SendOrder;
use super::ship_ahead::Asked;
use super::work_state::WorkRun;
use super::{RunError, lock};

/// One wave being shipped: its tasks in plan order and how far shipping went.
pub(super) struct WaveShip<'p> {
    wave_index: usize,
    wave: &'p [String],
    plan_seq: u64,
    order: Vec<&'p Task>,
    at: Mutex<Shipped>,
}

/// How far a wave's shipping went.
#[derive(Default)]
struct Shipped {
    /// The place in plan order of the next task to ship.
    next: usize,
    /// Gate answers asked ahead, by task, not used yet.
    ahead: BTreeMap<String, Asked>,
    /// Whether a change of the wave conflicted with the run branch.
    conflicted: bool,
    /// Changes the gate was asked about (or decided on), and of those how many failed.
    asked: usize,
    failed: usize,
    /// The tasks shipped (their worktrees close together at the wave's end).
    shipped: Vec<String>,
}

impl<'p> WaveShip<'p> {
    pub(super) fn new(
        plan: &'p CompiledPlan,
        wave_index: usize,
        wave: &'p [String],
        plan_seq: u64,
    ) -> Self {
        let order = plan.tasks.iter().filter(|t| wave.contains(&t.id)).collect();
        WaveShip {
            wave_index,
            wave,
            plan_seq,
            order,
            at: Mutex::new(Shipped::default()),
        }
    }
}

/// `tasks` in the order of `order` (the wave's tasks in plan order); a task `order` does not
/// name keeps its place after those it does.
fn in_plan_order<'t>(tasks: &[&'t Task], order: &[&Task]) -> Vec<&'t Task> {
    let mut sorted = tasks.to_vec();
    sorted.sort_by_key(|t| {
        order
            .iter()
            .position(|o| o.id == t.id)
            .unwrap_or(usize::MAX)
    });
    sorted
}

impl Run<'_, '_> {
    /// Runs one wave's tasks and ships their changes when the run works in the repository:
    /// while the tasks are out when the run may ship early ([`Run::ships_early`]), and what
    /// is left once they are all in.
    pub(super) fn run_and_ship_wave(
        &self,
        tasks: &[&Task],
        results: &Mutex<BTreeMap<String, Done>>,
        plan: &CompiledPlan,
        (wave_index, wave): (usize, &[String]),
        plan_seq: u64,
    ) -> Result<(), RunError> {
        let Some(w) = self.work() else {
            return self.run_wave(tasks, plan_seq, results);
        };
        let ship = WaveShip::new(plan, wave_index, wave, plan_seq);
        // Shipping as results come in gains most when they come in plan order: the order
        // shipping follows. A wave lists its tasks sorted by id (T1, T10, T100, T11, ...), not
        // in that order, so the tasks are taken and sent in plan order here.
        let in_plan;
        let tasks = if self.ships_early() {
            in_plan = in_plan_order(tasks, &ship.order);
            let ids = in_plan.iter().map(|t| t.id.clone()).collect();
            *lock(&w.sending) = Some(std::sync::Arc::new(SendOrder::new(ids)));
            &in_plan[..]
        } else {
            tasks
        };
        let ran = self.run_wave_shipping(tasks, plan_seq, results, Some((w, &ship)));
        *lock(&w.sending) = None;
        ran?;
        self.finish_wave_ship(w, &ship)
    }

    /// Whether a wave's changes may be shipped while some of its tasks are still out: the
    /// tasks go to workers elsewhere, and nothing that shipping consults could read otherwise
    /// later in the wave (no limit on model calls or seconds, no spending ceiling, no secret
    /// that blocks the run, no interruption). A strict replay (which hands out the context
    /// budget's takes in the record's order) ships each wave at its end: it compares each
    /// task's entries apart, so where the live run shipped among other tasks' entries does
    /// not matter to it, and a task re-run after a conflict takes its context outside a wave
    /// as it always has.
    pub(super) fn ships_early(&self) -> bool {
        self.dispatcher().is_some()
            && self.opts.context_turns.is_none()
            && self.opts.max_model_calls.is_none()
            && self.opts.max_seconds.is_none()
            && !self.opts.ceilings.any()
            && self.opts.secrets.policy.mode != crate::secrets::Mode::Block
            && self.interrupted().is_none()
    }

    /// Ships the wave's changes, in plan order, as far as the tasks whose result is in
    /// (`ready`) allow: each shipped task's own result must be in, and so must every task the
    /// gate's group asked at once is chosen from.
    pub(super) fn ship_ready(
        &self,
        w: &WorkRun,
        ship: &WaveShip<'_>,
        ready: &dyn Fn(&str) -> bool,
    ) -> Result<(), RunError> {
        let mut at = lock(&ship.at);
        while let Some(t) = ship.order.get(at.next).copied() {
            let i = at.next;
            if !ready(&t.id) {
                break;
            }
            // Gate answers asked ahead, several at once (`ship_ahead.rs`), each used at its
            // turn. A change asked about ahead was found to add something then, and no change
            // merged before its turn touches a file of it, so it still does and is not looked
            // at twice; after a conflict earlier in the wave it is looked at again all the same.
            if at.ahead.is_empty() {
                match self.ask_gates_ahead(w, &ship.order[..i], &ship.order[i..], ready) {
                    Some(ahead) => at.ahead = ahead,
                    None => break,
                }
            }
            at.next += 1;
            let tw = w.get(&t.id);
            let known = !at.conflicted && at.ahead.contains_key(&t.id);
            at.shipped.push(t.id.clone());
            // A change an earlier one already made merges nothing: no gate, no commit.
            if tw.ship.is_some() || !tw.shippable() || (!known && self.adds_nothing(w, t)?) {
                continue;
            }
            at.asked += 1;
            let d = if self.chooses_attempt(w, &t.id) {
                self.ship_attempts(w, t)?
            } else {
                let asked = at.ahead.remove(&t.id);
                self.ship_one(w, t, asked)?
            };
            if d.error.is_some() {
                at.failed += 1;
            }
            if d.decision == "merge"
                && let Err(paths) = self.integrate(w, t)?
            {
                at.conflicted = true;
                self.rerun_after_conflict(w, t, &paths)?;
            }
        }
        Ok(())
    }

    /// Ships what is left of the wave once all its results are in, closes its worktrees, and
    /// witnesses `degraded` when every decision of the wave failed.
    pub(super) fn finish_wave_ship(
        &self,
        w: &WorkRun,
        ship: &WaveShip<'_>,
    ) -> Result<(), RunError> {
        self.ship_ready(w, ship, &|_| true)?;
        let at = lock(&ship.at);
        // The wave's worktrees go together once it is shipped, not one between each merge.
        w.close_trees(&at.shipped);
        if at.asked > 0 && at.failed == at.asked {
            self.put(
                "orchestrator",
                kind::DEGRADED,
                Some(ship.plan_seq),
                json!({"wave": ship.wave_index, "tasks": ship.wave, "reason": "no ship decision of this wave could be made"}),
            )?;
        }
        Ok(())
    }
}
