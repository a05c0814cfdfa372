//! The escalation ladder: a task whose verdict says escalate (or whose executor failed) is
//! tried again on each stronger rung of its lane's ladder, witnessed as `tier_escalation`,
//! until one passes validation or the budget runs out.

use std::collections::BTreeMap;

use serde_json::json;

use crate::ledger::kind;
use crate::plan::{Task, augment_with_upstream};

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
        let ladder = env.seats.ladder(env.roster, &t.agent);
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
                to: rung.model(),
            });
            let esc = run.put(
                "orchestrator",
                kind::TIER_ESCALATION,
                Some(current.seq),
                json!({"id": t.id, "to": rung.model(), "reason": "validation failed"}),
            )?;
            let done = run.attempt(t, &rung, &instruction, esc.seq)?;
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
