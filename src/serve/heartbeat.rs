//! The daemon's heartbeat: while `git forum serve` serves and `[observe] heartbeat` is set,
//! a thread witnesses at most one `heartbeat` entry per interval in the daemon's ledger,
//! naming the daemon (its process id and ledger) and the runs it is driving
//! (`running.rs`). Each run also witnesses its own heartbeat under its request (the control
//! loop's).

use std::sync::Arc;
use std::sync::mpsc::{RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

use serde_json::json;

use super::dispatch::Dispatcher;
use crate::ledger::NewEntry;
use crate::ledger::canonical::Value;
use crate::surface::run::observe::{Coalescer, KIND, SCHEMA};

/// The actor of the daemon's heartbeat entries.
const ACTOR: &str = "daemon";

/// The shortest pause of the heartbeat thread between two looks.
const MIN_PAUSE: Duration = Duration::from_millis(5);

/// The heartbeat thread; dropping it stops the thread and waits for it.
pub(crate) struct Beat {
    stop: Option<Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Beat {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts the daemon's heartbeat when its runtime config sets one and the ledger is the
/// repository's own; `None` otherwise.
pub(crate) fn start(d: Arc<Dispatcher>) -> Option<Beat> {
    // A fetched copy is served read-only: nothing is witnessed in it.
    if d.is_read_only() {
        return None;
    }
    let interval = d.executors.loaded.as_ref()?.runtime.observe.heartbeat?;
    let (stop, stopped) = channel::<()>();
    let thread = std::thread::Builder::new()
        .name("git-forum-heartbeat".into())
        .spawn(move || {
            let start = Instant::now();
            let mut c = Coalescer::new(interval);
            let mut seen = d.running.changes();
            loop {
                let wait = c.until_due(start.elapsed()).max(MIN_PAUSE);
                if stopped.recv_timeout(wait) != Err(RecvTimeoutError::Timeout) {
                    return;
                }
                let t = start.elapsed();
                let now_seen = d.running.changes();
                if now_seen != seen {
                    seen = now_seen;
                    c.happened(t);
                }
                if !c.due(t) {
                    continue;
                }
                c.beat(t);
                // A heartbeat the ledger refuses is dropped; the next one tries again.
                let _ = d.append_new(&entry(&d, &c, t));
            }
        })
        .ok()?;
    Some(Beat {
        stop: Some(stop),
        thread: Some(thread),
    })
}

/// The daemon's heartbeat entry at `t` (from the daemon's start).
fn entry(d: &Dispatcher, c: &Coalescer, t: Duration) -> NewEntry {
    let (running, opening) = d.running.seqs();
    let secs = |d: Duration| (d.as_millis() as f64) / 1000.0;
    let body = json!({
        "schema": SCHEMA,
        "of": "daemon",
        "pid": std::process::id(),
        "ledger": d.cfg.ledger,
        "interval_seconds": secs(c.interval()),
        "seconds_up": secs(t),
        "seconds_since_activity": secs(t.saturating_sub(c.last_activity().unwrap_or_default())),
        "running": running,
        "opening": opening,
    });
    NewEntry {
        actor: ACTOR.into(),
        kind: KIND.into(),
        causal_parent: None,
        payload: Value::from_serde(&body),
        ts: d.now(),
    }
}
