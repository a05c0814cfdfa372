//! The daemon's routes for what `--work` runs leave in the repository: `POST /apply` and
//! `POST /discard`, each a thin call into `surface::work`.

use super::*;
use crate::surface::request;

impl Dispatcher {
    /// Brings a run's branch into the branch checked out where the server runs {run?}.
    pub(crate) fn apply(&self, req: &Request<'_>) -> Res {
        let a: request::work::Apply = request::decode(req.body)?;
        let run = a.run;
        let mut store = Shared {
            d: self,
            reader: self.reader()?,
        };
        answer(surface::work::apply(
            &self.cfg.dir,
            &self.cfg.ledger,
            &mut store,
            run,
            self.now(),
        ))
    }

    /// Removes a run's worktrees and branch {run?}; the record and its commits stay.
    pub(crate) fn discard(&self, req: &Request<'_>) -> Res {
        let a: request::work::Discard = request::decode(req.body)?;
        let run = a.run;
        let mut store = Shared {
            d: self,
            reader: self.reader()?,
        };
        answer(surface::work::discard(
            &self.cfg.dir,
            &self.cfg.ledger,
            &mut store,
            run,
            self.now(),
        ))
    }
}
