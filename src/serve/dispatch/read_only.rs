//! A daemon that serves a fetched copy (`git forum serve --ledger REMOTE:NAME`, the auditor's
//! case) serves it read-only: only `git forum fetch REMOTE` moves a copy.
//!
//! Two places hold that, both in the dispatcher, so neither transport nor any handler checks
//! it on its own:
//!
//! * **the route**: before any handler runs, a route that is not in [`reads_only`] is answered
//!   409 with one line naming the copy and what to do ([`Dispatcher::refusal_of`]); HTTP and
//!   MCP reach every route through [`Dispatcher::route_for`], so a write tool is refused the same
//!   way, and nothing has started when it is;
//! * **the ledger**: every append goes through [`Dispatcher::writer`], which refuses the same
//!   way on a copy, so a route listed as a read by mistake still writes nothing to it.

use std::sync::MutexGuard;

use super::{Dispatcher, Handler, Reply, lock, resolve};
use crate::surface::store::{GitStore, LedgerSpec};

/// The `POST` routes that only read: they answer from the record (or from their body alone)
/// and write nothing, not even with some body. Every `GET` reads. A route not named here is
/// refused on a fetched copy, so a new route is a write until someone lists it.
const READ_POSTS: &[&str] = &[
    "/prove",
    "/route",
    "/humanize",
    "/prose/contract",
    "/bench",
    "/context/preflight",
    "/import-trace",
    "/mine",
    "/campaign/status",
    "/campaign/next",
    "/grade",
    "/gradable",
    "/diff",
    "/apply/dry-run",
    "/tlog/prove",
    "/hooks/check",
];

/// Whether `method path` only reads (see [`READ_POSTS`]): the routes a daemon serving a
/// fetched copy answers.
pub fn reads_only(method: &str, path: &str) -> bool {
    method == "GET" || (method == "POST" && READ_POSTS.contains(&path))
}

impl Dispatcher {
    /// The handler of `method path`, or the reply that refuses it: 404 or 405 when no route
    /// matches, 409 when the route writes and the served ledger is a fetched copy. Both
    /// transports come through here.
    pub(super) fn route_for<'p>(&self, method: &str, path: &'p str) -> Result<Handler<'p>, Reply> {
        let Some(handler) = resolve(method, path) else {
            return Err(self.no_route(method, path));
        };
        if reads_only(method, path) {
            return Ok(handler);
        }
        match self.refusal_of(&format!("{method} {path}")) {
            Some(refused) => Err(refused),
            None => Ok(handler),
        }
    }

    /// Whether this daemon serves a fetched copy, read-only.
    pub(crate) fn is_read_only(&self) -> bool {
        matches!(
            LedgerSpec::parse(&self.cfg.ledger),
            LedgerSpec::Fetched { .. }
        )
    }

    /// The 409 that refuses `what` (a route, an append) on a fetched copy; `None` on a
    /// ledger of this repository.
    pub(crate) fn refusal_of(&self, what: &str) -> Option<Reply> {
        let LedgerSpec::Fetched { remote, name } = LedgerSpec::parse(&self.cfg.ledger) else {
            return None;
        };
        Some(Reply::from(crate::surface::Error::conflict(format!(
            "{what} writes, and this daemon serves ledger {spec}: a copy fetched from {remote:?} is read-only (only `git forum fetch {remote}` moves it); to write, serve a ledger of your own, e.g. `git forum serve --ledger {name}`",
            spec = self.cfg.ledger
        ))))
    }

    /// The ledger's one writer, through which every append of every route goes; refused on
    /// a fetched copy.
    pub(crate) fn writer(&self) -> Result<MutexGuard<'_, GitStore>, Reply> {
        match self.refusal_of("an append") {
            Some(refused) => Err(refused),
            None => Ok(lock(&self.writer)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::dispatch::ROUTES;

    #[test]
    fn every_read_post_is_a_route_and_the_writes_are_not_reads() {
        for p in READ_POSTS {
            assert!(ROUTES.iter().any(|(m, r, _)| *m == "POST" && r == p), "{p}");
        }
        for (m, p) in [
            ("POST", "/append"),
            ("POST", "/submit"),
            ("POST", "/resume"),
            ("POST", "/halt"),
            ("POST", "/gate/approve"),
            ("POST", "/gate/edit"),
            ("POST", "/gate/reject"),
            ("POST", "/checkpoint"),
            ("POST", "/apply"),
            ("POST", "/discard"),
            ("POST", "/witness"),
            ("POST", "/tlog/checkpoint"),
            ("POST", "/lane/check"),
            ("POST", "/campaign/declare"),
        ] {
            assert!(!reads_only(m, p), "{m} {p}");
        }
        assert!(reads_only("GET", "/runs"));
        assert!(reads_only("POST", "/prove"));
    }
}
