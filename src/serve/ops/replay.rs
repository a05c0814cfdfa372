//! The daemon's routes that check a run against its record: `POST /replay` (strict replay,
//! in a fresh network namespace the surface makes for it) and `POST /reproduce`, each a thin
//! call into the surface.

use super::*;
use crate::surface::request;

impl Dispatcher {
    /// A run replayed strictly from its record, without a network {run, strict}.
    pub(crate) fn replay_strict(&self, req: &Request<'_>) -> Res {
        let a: request::replay::StrictReplay = request::decode(req.body)?;
        let store = self.reader()?;
        answer(surface::replay::strict_confined(
            &store,
            &self.cfg.dir,
            &self.cfg.ledger,
            a.run,
        ))
    }

    /// A --work run's checks run again and its branch rebuilt from the record {run}.
    pub(crate) fn reproduce(&self, req: &Request<'_>) -> Res {
        let a: request::replay::Reproduce = request::decode(req.body)?;
        let store = self.reader()?;
        answer(surface::reproduce::reproduce(&store, &self.cfg.dir, a.run))
    }
}
