//! The daemon's workers (`POST /worker`, `GET /workers`, `POST /worker/stop`), each a thin
//! call into [`crate::surface::workers`]: a worker the server starts works in the served
//! repository with the server's executors and roster, and reaches its NATS server with the
//! credentials and TLS settings of the server's `[dispatch]` table.

use super::*;
use crate::surface::request::fleet as rq;
use crate::surface::worker::{DispatchSpec, WorkerRequest};
use crate::surface::workers::Home;

impl Dispatcher {
    /// Starts a worker this server owns and answers how it stands.
    pub(crate) fn worker_start(&self, req: &Request<'_>) -> Res {
        let a: rq::WorkerStart = request::decode(req.body)?;
        let seats = self.seats()?;
        let runtime = self.executors.loaded.as_ref().map(|l| &l.runtime);
        let spec = DispatchSpec::at(&a.nats);
        let nats = match runtime {
            Some(r) => spec.filled(&r.dispatch).nats,
            None => spec.nats,
        };
        let work = runtime.map(|r| r.work.clone()).unwrap_or_default();
        let home = Home {
            dir: &self.cfg.dir,
            ledger: &self.cfg.ledger,
            work: &work,
            seats,
            roster: self.roster.clone(),
        };
        answer(self.workers.start(home, &WorkerRequest::of(&a, nats)))
    }

    /// Every worker this server owns.
    pub(crate) fn workers_list(&self) -> Res {
        answer(Ok(self.workers.list()))
    }

    /// Asks a worker this server owns to stop.
    pub(crate) fn worker_stop(&self, req: &Request<'_>) -> Res {
        let a: rq::WorkerStop = request::decode(req.body)?;
        answer(self.workers.stop(&a.name))
    }
}
