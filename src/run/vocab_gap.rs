//! The vocabulary-gap check a run makes right after it witnesses a `route` entry: once the
//! ledger's trailing run of undecided routes reaches the policy's `[lanes] min_escalations`, a
//! `vocabulary_gap` entry (actor `router`, under the last escalated route) says so, once per
//! run of routes ([`crate::route::gap`]). The command line's `route --record` makes the same
//! check through [`crate::surface::lanes::after_route`]. The one-task path's ladder
//! (`classify.rs`) makes it after the run's `route` entry, and again when a resumed run finds
//! that entry already written (the check writes a run's gap only once).

use crate::ledger::Entry;
use crate::route::gap;

use super::engine::Run;
use super::{RunError, lock};

impl Run<'_, '_> {
    /// Witnesses the gap the trailing undecided routes make, if one is due; call it right
    /// after witnessing a `route` entry. The gap's body holds no text a secret could be in
    /// but its domain signal (a route frame's domain), and it is screened as every entry is.
    pub(super) fn check_vocabulary_gap(&self) -> Result<Option<Entry>, RunError> {
        let due = {
            let store = lock(&self.store);
            gap::due_gap(&**store, self.opts.policy.min_escalations)?
        };
        let Some(g) = due else { return Ok(None) };
        let new = g.entry(self.env.clock.now());
        self.put_value("router", &new.kind, Some(g.last_seq), new.payload)
            .map(Some)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::exec::{Fleet, Scripted};
    use crate::ledger::{MemoryStorage, NewEntry, Storage, Value, kind};
    use crate::roster::Roster;

    use super::super::engine::Run;
    use super::super::{Env, Options, Silent, StepClock};

    fn route(store: &mut MemoryStorage, decided: Option<&str>, confidence: f64) {
        store
            .append(NewEntry {
                actor: "router".into(),
                kind: kind::ROUTE.into(),
                causal_parent: None,
                payload: Value::object([
                    ("task".to_string(), Value::str("t")),
                    (
                        "decided".to_string(),
                        decided.map_or(Value::Null, Value::str),
                    ),
                    ("confidence".to_string(), Value::Float(confidence)),
                ]),
                ts: 1.0,
            })
            .unwrap();
    }

    #[test]
    fn a_run_witnesses_the_gap_once_under_the_last_escalated_route() {
        let roster = Roster::default_roster();
        let never = Arc::new(Scripted::new("none", |_| Err("not called".into())));
        let seats = Fleet::fixed(never.clone(), never, Vec::new());
        let clock = StepClock::new(1000.0, 1.0);
        let env = Env {
            roster: &roster,
            seats: &seats,
            clock: &clock,
            progress: &Silent,
        };
        let mut opts = Options::default();
        opts.policy.min_escalations = 2;
        let mut store = MemoryStorage::default();
        route(&mut store, Some("backend"), 0.9);
        route(&mut store, None, 0.2);
        {
            let run = Run::new(&mut store, &env, &opts);
            assert_eq!(run.check_vocabulary_gap().unwrap(), None);
        }
        route(&mut store, None, 0.4);
        let run = Run::new(&mut store, &env, &opts);
        let gap = run.check_vocabulary_gap().unwrap().unwrap();
        assert_eq!(
            (
                gap.seq,
                gap.kind.as_str(),
                gap.actor.as_str(),
                gap.causal_parent
            ),
            (3, "vocabulary_gap", "router", Some(2))
        );
        assert_eq!(run.check_vocabulary_gap().unwrap(), None);
        drop(run);
        assert_eq!(
            store.payload_at(3).unwrap().unwrap().canonical(),
            r#"{"confidence_ceiling":0.4,"consecutive_escalations":2,"domain_signal":"general","first_seq":1,"last_seq":2}"#
        );
    }
}
