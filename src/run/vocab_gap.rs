//! The vocabulary-gap check a run makes right after it witnesses a `route` entry: once the
//! ledger's trailing run of undecided routes reaches the policy's `[lanes] min_escalations`, a
//! `vocabulary_gap` entry (actor `router`, under the last escalated route) says so, once per
//! run of routes ([`crate::route::gap`]). The command line's `route --record` makes the same
//! check through [`crate::surface::lanes::after_route`].

use crate::ledger::Entry;
use crate::route::gap;

use super::engine::Run;
use super::{RunError, lock};

impl Run<'_, '_> {
    /// Witnesses the gap the trailing undecided routes make, if one is due; call it right
    /// after witnessing a `route` entry. The gap's body holds no text a secret could be in
    /// but its domain signal (a route frame's domain), and it is screened as every entry is.
    // The one-task path's ladder witnesses the run's `route` entry and calls this after it.
    #[allow(dead_code)]
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
