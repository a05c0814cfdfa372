//! Halting a run from outside it: the `halt` operation (`git forum halt`, `POST /halt`, the MCP
//! tool `halt`) and the watcher a running run keeps so the request reaches it.
//!
//! The request travels through files the ledger's lock does not guard
//! ([`crate::store::halt`]): the process driving a run marks it as running, a halt writes a
//! request for it, and the driving process's watcher, polling every [`POLL`], raises the run's
//! [`Interrupt`] with who asked and why. The run then starts nothing more, its commands are
//! killed with their process groups, and it witnesses `halted {by, reason}`; `resume` continues
//! it (the watcher of the resumed run clears any old request first).

use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::ledger::{Storage, kind};
use crate::run::Interrupt;
use crate::store::git::GitStore;
use crate::store::halt::Halts;
use crate::surface::{Error, Report, Result};

/// How often a running run looks for a halt request.
pub(crate) const POLL: Duration = Duration::from_millis(100);

/// The longest a halt waits for the run to stop (`--wait`, `wait_seconds`).
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(600);

/// The reason recorded when the caller gives none.
pub(crate) const DEFAULT_REASON: &str = "an operator halted the run";

/// Entries looked at, from the end of the ledger, for the run's `halted` entry.
const SCAN_BACK: u64 = 4096;

/// What to halt, by whom, and how long to wait for it to stop.
#[derive(Debug, Clone)]
pub(crate) struct HaltAsk {
    /// The run (its request seq); `None`: the latest running run of the ledger.
    pub(crate) run: Option<u64>,
    /// Who asks.
    pub(crate) by: String,
    /// Why (`None`: [`DEFAULT_REASON`]).
    pub(crate) reason: Option<String>,
    /// How long to wait for the run to stop (zero: do not wait).
    pub(crate) wait: Duration,
}

/// What a halt did.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub(crate) struct HaltReport {
    pub(crate) schema: &'static str,
    pub(crate) ledger: String,
    /// The run halted (its request seq).
    pub(crate) run: u64,
    /// The process that was driving it.
    pub(crate) pid: u32,
    pub(crate) by: String,
    pub(crate) reason: String,
    /// Whether the run stopped within the wait.
    pub(crate) stopped: bool,
    /// Its `halted` entry, once witnessed.
    pub(crate) halted_seq: Option<u64>,
    /// What continues the run.
    pub(crate) resume: String,
}

impl Report for HaltReport {
    const SCHEMA: &'static str = "git-forum.halt/1";
}

/// Asks the process driving a run of `store`'s ledger to halt it, then waits (up to
/// `ask.wait`) for the run to stop. Refused, with nothing written, when no live process drives
/// the run (or, without a run, any run of the ledger).
pub(crate) fn halt(store: &GitStore, ledger: &str, ask: &HaltAsk) -> Result<HaltReport> {
    let halts = store.halts();
    let running = halts.running()?;
    let target = match ask.run {
        Some(run) => running.iter().find(|r| r.run == run).ok_or_else(|| {
            Error::conflict(format!(
                "run {run} is not running on ledger {ledger:?}: nothing to halt (`git forum runs` shows how it stands)"
            ))
        })?,
        None => running.last().ok_or_else(|| {
            Error::conflict(format!(
                "no run is running on ledger {ledger:?}: nothing to halt (`git forum runs` shows the runs)"
            ))
        })?,
    };
    let reason = ask
        .reason
        .as_deref()
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .unwrap_or(DEFAULT_REASON)
        .to_string();
    let by = match ask.by.trim() {
        "" => "operator".to_string(),
        b => b.to_string(),
    };
    halts.request(target.run, &by, &reason)?;
    let deadline = Instant::now() + ask.wait.min(MAX_WAIT);
    let mut stopped = !halts.is_running(target.run)?;
    while !stopped && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
        stopped = !halts.is_running(target.run)?;
    }
    let halted_seq = if stopped {
        halted_entry(store, target.run)?
    } else {
        None
    };
    Ok(HaltReport {
        schema: HaltReport::SCHEMA,
        ledger: ledger.to_string(),
        run: target.run,
        pid: target.pid,
        by,
        reason,
        stopped,
        halted_seq,
        resume: format!("git forum resume {}", target.run),
    })
}

/// The latest `halted` entry of run `run` among the last [`SCAN_BACK`] entries.
fn halted_entry(store: &GitStore, run: u64) -> Result<Option<u64>> {
    let n = store.len()?;
    for seq in (n.saturating_sub(SCAN_BACK)..n).rev() {
        if let Some(e) = store.get(seq)?
            && e.kind == kind::HALTED
            && e.causal_parent == Some(run as i64)
        {
            return Ok(Some(seq));
        }
    }
    Ok(None)
}

/// A running run's halt watcher: marks the run as running as soon as the run knows its
/// request seq, raises `interrupt` when a halt request for it arrives, and on drop removes the
/// marker and any request left.
pub(crate) struct Watch {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
    interrupt: Arc<Interrupt>,
    halts: Halts,
    registered: Arc<std::sync::Mutex<Option<u64>>>,
}

/// Starts watching for halt requests to the run `interrupt` guards, in `halts`.
pub(crate) fn watch(halts: Halts, interrupt: Arc<Interrupt>) -> Watch {
    let registered = Arc::new(std::sync::Mutex::new(None::<u64>));
    {
        let (halts, registered) = (halts.clone(), registered.clone());
        interrupt.on_run(move |run| {
            // An old request (a halt that came as the run ended, or before a resume) is
            // cleared before the run is marked as running, so it never halts this one.
            halts.clear(run);
            if halts.register(run).is_ok() {
                *registered.lock().unwrap_or_else(|p| p.into_inner()) = Some(run);
            }
        });
    }
    let (tx, rx) = mpsc::channel::<()>();
    let thread = {
        let (halts, registered, interrupt) = (halts.clone(), registered.clone(), interrupt.clone());
        thread::spawn(move || {
            loop {
                let run = *registered.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(run) = run
                    && interrupt.signal().is_none()
                    && let Ok(Some(req)) = halts.requested(run)
                {
                    interrupt.raise_halt(&req.by, &req.reason);
                }
                match rx.recv_timeout(POLL) {
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    _ => break,
                }
            }
        })
    };
    Watch {
        stop: Some(tx),
        thread: Some(thread),
        interrupt,
        halts,
        registered,
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.interrupt.clear_on_run();
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(run) = *self.registered.lock().unwrap_or_else(|p| p.into_inner()) {
            self.halts.unregister(run);
            self.halts.clear(run);
        }
    }
}
