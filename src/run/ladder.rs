//! The escalation ladder: a task whose verdict says escalate (or whose executor failed) is
//! tried again on each stronger rung of its lane's ladder, witnessed as `tier_escalation`,
//! until one passes validation or the budget runs out.
//!
//! The escalation body is Forum's `{id, to, reason}`, `to` naming the model (or, for a command
//! executor without one, the program) the retry runs on, as Forum writes it, so that Forum's
//! readers and its recorded runs read it unchanged. When the fleet is built from tiers, the body
//! also names the tiers, as the roster's ladder names them (`cheap`, `capable`, `frontier`):
//! `from_tier`, the tier the task last ran at (its lane's roster tier, then the previous rung's),
//! and `to_tier`, the rung's. Fixed fleets (Forum's library shape) have no tiers and write
//! Forum's three fields alone.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value as J, json};

use crate::exec::{Executor, Seats};
use crate::ledger::kind;
use crate::plan::{Task, augment_with_upstream};
use crate::roster::{Roster, Tier};

use super::engine::{Done, Run, upstream_view};
use super::{Event, MAX_UPSTREAM_CHARS, RunError, Verdict};

/// Climbs the ladder for every task whose verdict [`Verdict::climbs`], in plan order,
/// replacing its result in `finals` and its verdict in `verdicts` with each rung's.
pub(super) fn escalate(
    run: &Run<'_, '_>,
    tasks: &[&Task],
    finals: &mut BTreeMap<String, Done>,
    verdicts: &mut BTreeMap<String, Verdict>,
) -> Result<(), RunError> {
    let env = run.env;
    for t in tasks {
        let Some(v) = verdicts.get(&t.id) else {
            continue;
        };
        if !v.climbs() {
            continue;
        }
        let ladder = rungs(env.seats, env.roster, &t.agent);
        let upstream = upstream_view(finals);
        let instruction = augment_with_upstream(t, &upstream, MAX_UPSTREAM_CHARS).instruction;
        for rung in ladder {
            if run.over_budget() {
                break;
            }
            let Some(current) = finals.get(&t.id).cloned() else {
                break;
            };
            env.progress.event(&Event::Escalating {
                id: t.id.clone(),
                to: rung.exec.model(),
            });
            let esc = run.put(
                "orchestrator",
                kind::TIER_ESCALATION,
                Some(current.seq),
                rung.body(&t.id, "validation failed"),
            )?;
            let done = run.attempt(t, &rung.exec, &instruction, esc.seq)?;
            finals.insert(t.id.clone(), done.clone());
            let v = run.validate(t, &done)?;
            let passed = v.passed();
            verdicts.insert(t.id.clone(), v);
            if passed {
                break;
            }
        }
    }
    Ok(())
}

/// One rung of a task's ladder: the executor and the tiers the climb moves between.
pub(super) struct Rung {
    pub(super) exec: Arc<dyn Executor>,
    from: Option<Tier>,
    to: Option<Tier>,
}

impl Rung {
    /// This rung's `tier_escalation` body.
    pub(super) fn body(&self, id: &str, reason: &str) -> J {
        escalation_body(id, &self.exec.model(), reason, self.from, self.to)
    }
}

/// The rungs `agent`'s task climbs, each with the tier it leaves (the lane's roster tier for
/// the first, the previous rung's after) and the tier it reaches.
pub(super) fn rungs(seats: &dyn Seats, roster: &Roster, agent: &str) -> Vec<Rung> {
    let mut from = roster.get(agent).map(|a| a.model_tier);
    seats
        .tiered_ladder(roster, agent)
        .into_iter()
        .map(|(to, exec)| {
            let rung = Rung { exec, from, to };
            from = to.or(from);
            rung
        })
        .collect()
}

/// The `tier_escalation` body: Forum's `{id, to, reason}` with `to` the model or program the
/// retry runs on, then `from_tier` and `to_tier` when the rung serves a tier (each only when
/// known; a rung without a tier writes Forum's body exactly).
pub(crate) fn escalation_body(
    id: &str,
    to: &str,
    reason: &str,
    from_tier: Option<Tier>,
    to_tier: Option<Tier>,
) -> J {
    let mut body = json!({"id": id, "to": to, "reason": reason});
    if let Some(to_tier) = to_tier {
        if let Some(from_tier) = from_tier {
            body["from_tier"] = J::from(from_tier.as_str());
        }
        body["to_tier"] = J::from(to_tier.as_str());
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rung_without_a_tier_writes_forums_body_exactly() {
        assert_eq!(
            escalation_body(
                "T3",
                "scripted-model",
                "validation failed",
                Some(Tier::Cheap),
                None
            ),
            json!({"id": "T3", "to": "scripted-model", "reason": "validation failed"})
        );
    }

    #[test]
    fn a_tiered_rung_names_both_tiers_and_keeps_the_model_in_to() {
        assert_eq!(
            escalation_body(
                "T1",
                "gpt-5",
                "checks failed",
                Some(Tier::Cheap),
                Some(Tier::Frontier)
            ),
            json!({"id": "T1", "to": "gpt-5", "reason": "checks failed",
                   "from_tier": "cheap", "to_tier": "frontier"})
        );
    }

    #[test]
    fn an_agent_outside_the_roster_names_only_the_tier_reached() {
        assert_eq!(
            escalation_body("T2", "m", "validation failed", None, Some(Tier::Capable)),
            json!({"id": "T2", "to": "m", "reason": "validation failed", "to_tier": "capable"})
        );
    }
}
