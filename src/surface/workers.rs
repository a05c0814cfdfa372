//! The workers a server owns: `POST /worker` (MCP `worker_start`) starts one in the served
//! repository with the server's executors, `GET /workers` (MCP `workers`) shows each with its
//! state and the tasks it did, and `POST /worker/stop` (MCP `worker_stop`) stops one. A worker
//! is connected before it is listed, so an unreachable server or a stream of another ledger is
//! the start's one-line refusal; once started it runs on a thread of the server until it is
//! stopped, its `max_tasks` are done, or the server exits.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::worker::WorkerRequest;
use super::{Error, Report, Result};
use crate::exec::Seats;
use crate::fleet::worker::Control;
use crate::roster::Roster;

/// The most workers a server runs at once.
pub(crate) const MAX_RUNNING: usize = 16;

/// The most workers a server lists (the oldest ended ones are forgotten first).
const MAX_LISTED: usize = 64;

/// One worker a server started.
struct Owned {
    name: String,
    server: String,
    remote: String,
    concurrency: u64,
    max_tasks: Option<u64>,
    control: Arc<Control>,
    ended: Arc<AtomicBool>,
}

impl Owned {
    fn view(&self) -> WorkerView {
        let state = if self.ended.load(Ordering::SeqCst) {
            "stopped"
        } else if self.control.stop.load(Ordering::SeqCst) {
            "stopping"
        } else {
            "running"
        };
        WorkerView {
            name: self.name.clone(),
            server: self.server.clone(),
            remote: self.remote.clone(),
            state: state.into(),
            tasks_done: self.control.done.load(Ordering::SeqCst),
            concurrency: self.concurrency,
            max_tasks: self.max_tasks,
        }
    }

    fn running(&self) -> bool {
        !self.ended.load(Ordering::SeqCst)
    }
}

/// A worker as a server shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct WorkerView {
    /// Its name in results and the record.
    pub(crate) name: String,
    /// The NATS server it pulls from (never with a password).
    pub(crate) server: String,
    /// The git remote it fetches bases from and pushes results to.
    pub(crate) remote: String,
    /// `running`; `stopping` (asked to stop, finishing the tasks it holds); `stopped` (asked to
    /// stop, or its `max_tasks` done).
    pub(crate) state: String,
    /// Tasks it handled so far.
    pub(crate) tasks_done: u64,
    /// Tasks it does at a time.
    pub(crate) concurrency: u64,
    /// The tasks after which it stops, when it was given any.
    pub(crate) max_tasks: Option<u64>,
}

impl Report for WorkerView {
    const SCHEMA: &'static str = "git-forum.worker/1";
}

/// Every worker a server owns, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct WorkersReport {
    pub(crate) workers: Vec<WorkerView>,
}

impl Report for WorkersReport {
    const SCHEMA: &'static str = "git-forum.workers/1";
}

/// What a worker to start needs from the server: its repository and ledger, the `[work]` table
/// its sandbox follows, its executors and roster.
pub(crate) struct Home<'a> {
    pub(crate) dir: &'a std::path::Path,
    pub(crate) ledger: &'a str,
    pub(crate) work: &'a crate::exec::config::WorkConfig,
    pub(crate) seats: Arc<dyn Seats>,
    pub(crate) roster: Roster,
}

/// The workers one server owns.
#[derive(Default)]
pub(crate) struct Workers {
    owned: Mutex<Vec<Owned>>,
    started: std::sync::atomic::AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Workers {
    /// Starts the worker `req` asks for in `home`: checked and connected here (a refusal is one
    /// line and starts nothing), then serving on a thread of its own.
    pub(crate) fn start(&self, home: Home<'_>, req: &WorkerRequest) -> Result<WorkerView> {
        let n = self.started.fetch_add(1, Ordering::SeqCst) + 1;
        let name = req
            .name
            .clone()
            .unwrap_or_else(|| format!("{}-{n}", crate::fleet::worker::default_name()));
        {
            let owned = lock(&self.owned);
            if owned.iter().any(|o| o.running() && o.name == name) {
                return Err(Error::conflict(format!(
                    "a worker named {name:?} runs in this server already: give another name, or stop it first (POST /worker/stop)"
                )));
            }
            if owned.iter().filter(|o| o.running()).count() >= MAX_RUNNING {
                return Err(Error::conflict(format!(
                    "this server runs {MAX_RUNNING} workers already: stop one first (POST /worker/stop)"
                )));
            }
        }
        let req = WorkerRequest {
            name: Some(name.clone()),
            ..req.clone()
        };
        let control = Arc::new(Control::default());
        let o = super::worker::worker_options(
            home.dir,
            home.ledger,
            &req,
            home.work,
            home.seats,
            home.roster,
            control.clone(),
        )?;
        let ready = crate::fleet::worker::ready(o).map_err(Error::unavailable)?;
        let ended = Arc::new(AtomicBool::new(false));
        let flag = ended.clone();
        std::thread::Builder::new()
            .name(format!("worker {name}"))
            .spawn(move || {
                if let Err(e) = ready.run() {
                    eprintln!("git forum serve: a worker stopped: {e}");
                }
                flag.store(true, Ordering::SeqCst);
            })
            .map_err(|e| Error::internal(format!("cannot start the worker's thread: {e}")))?;
        let owned = Owned {
            name,
            server: crate::fleet::nats::redacted(&req.nats.url),
            remote: req.remote.clone(),
            concurrency: req.concurrency as u64,
            max_tasks: req.max_tasks,
            control,
            ended,
        };
        let view = owned.view();
        let mut list = lock(&self.owned);
        list.push(owned);
        while list.len() > MAX_LISTED {
            match list.iter().position(|o| !o.running()) {
                Some(i) => {
                    list.remove(i);
                }
                None => break,
            }
        }
        Ok(view)
    }

    /// Every worker this server owns, oldest first.
    pub(crate) fn list(&self) -> WorkersReport {
        WorkersReport {
            workers: lock(&self.owned).iter().map(Owned::view).collect(),
        }
    }

    /// Asks the running worker `name` to stop: it finishes the tasks it holds and pulls no
    /// more.
    pub(crate) fn stop(&self, name: &str) -> Result<WorkerView> {
        let owned = lock(&self.owned);
        let Some(o) = owned.iter().rev().find(|o| o.name == name) else {
            return Err(Error::not_found(format!(
                "no worker named {name:?} in this server (GET /workers lists them)"
            )));
        };
        o.control.stop.store(true, Ordering::SeqCst);
        Ok(o.view())
    }
}

impl Drop for Workers {
    /// A server going away stops its workers pulling (their threads end with the process).
    fn drop(&mut self) {
        for o in lock(&self.owned).iter() {
            o.control.stop.store(true, Ordering::SeqCst);
        }
    }
}
