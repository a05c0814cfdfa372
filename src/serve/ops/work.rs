//! The daemon's routes for what `--work` runs leave in the repository: `POST /diff`,
//! `POST /attest`, `POST /apply`, `POST /apply/dry-run` and `POST /discard`, each a thin call into the surface.

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

    /// Who wrote each line of a file {file, lines?, rev?, verify?}, from a query string or an
    /// MCP call's arguments.
    pub(crate) fn blame(&self, req: &Request<'_>) -> Res {
        let a: request::blame::Blame = request::decode(&query_types(req.body))?;
        let store = self.reader()?;
        answer(surface::blame::blame(
            &self.cfg.dir,
            &self.cfg.ledger,
            &store,
            &a,
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

    /// What apply would do against the branch checked out where the server runs {run?};
    /// nothing is written.
    pub(crate) fn apply_dry_run(&self, req: &Request<'_>) -> Res {
        let a: request::work::ApplyDryRun = request::decode(req.body)?;
        let store = self.reader()?;
        answer(surface::work::apply_dry_run(
            &self.cfg.dir,
            &self.cfg.ledger,
            &store,
            a.run,
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

/// A query string's fields as the blame request's types: a revision of digits is still a
/// revision (text), and `verify=true` or `verify=1` is `true`.
fn query_types(body: &J) -> J {
    let mut b = body.clone();
    if let Some(m) = b.as_object_mut() {
        if let Some(r @ J::Number(_)) = m.get("rev") {
            let text = r.to_string();
            m.insert("rev".into(), J::String(text));
        }
        if let Some(v) = m.get("verify") {
            let on = match v {
                J::String(s) => Some(matches!(s.as_str(), "true" | "1" | "yes")),
                J::Number(n) => Some(n.as_u64() == Some(1)),
                _ => None,
            };
            if let Some(on) = on {
                m.insert("verify".into(), J::Bool(on));
            }
        }
    }
    b
}
