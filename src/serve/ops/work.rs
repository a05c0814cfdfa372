//! The daemon's routes for what `--work` runs leave in the repository: `POST /diff`,
//! `POST /attest`, `POST /apply` and `POST /discard`, each a thin call into the surface.

use super::*;
use crate::surface::request;

impl Dispatcher {
    /// A run's change against its base {run?, stat?, name_only?, paths?}.
    pub(crate) fn diff(&self, req: &Request<'_>) -> Res {
        let a: request::work::Diff = request::decode(req.body)?;
        let store = self.reader()?;
        answer(surface::diff::diff(
            &self.cfg.dir,
            &self.cfg.ledger,
            &store,
            &a,
        ))
    }

    /// A signed attestation of what a run shipped {run?}, or the check of one {envelope,
    /// keys?}; the signer key is the repository's forum.noteKey.
    pub(crate) fn attest(&self, req: &Request<'_>) -> Res {
        let a: request::attest::Attest = request::decode(req.body)?;
        let store = self.reader()?;
        answer(surface::attest::run_request(
            &self.cfg.dir,
            &self.cfg.ledger,
            &store,
            &a,
            None,
        ))
    }

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
