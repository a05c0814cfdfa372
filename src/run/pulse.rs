//! A run's heartbeat on the wall clock: the progress sink that keeps what each task in flight
//! did last ([`Pulse`]), and the thread that witnesses a `heartbeat` entry whenever the
//! coalescer says one is due ([`beating`]). The decisions are `heartbeat.rs`'s and
//! `crate::observe`'s, given the time as a value; this file holds the clock and the thread.
//!
//! Off unless `[observe] heartbeat` is set: a run without it runs exactly as before.

use std::sync::Mutex;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use super::engine::Run;
use super::heartbeat::{self, Coalescer, InFlight};
use super::{Env, Event, Options, Progress, lock};

/// The actor of a heartbeat entry.
const ACTOR: &str = "observer";

/// The shortest pause of the heartbeat thread between two looks.
const MIN_PAUSE: Duration = Duration::from_millis(5);

/// A progress sink that passes every event on and keeps, for the heartbeat, when the run last
/// made progress and what each task in flight did last.
pub(super) struct Pulse<'p> {
    inner: &'p dyn Progress,
    start: Instant,
    state: Mutex<(Coalescer, InFlight)>,
}

impl Progress for Pulse<'_> {
    fn event(&self, e: &Event) {
        let t = self.start.elapsed();
        {
            let mut s = lock(&self.state);
            s.0.happened(t);
            s.1.observe(e, t);
        }
        self.inner.event(e);
    }
}

/// Runs `f` with `env`, or, when the run witnesses heartbeats, with `env` whose progress also
/// feeds a [`Pulse`] (handed to `f` too, for [`beating`]).
pub(super) fn observed<T>(
    env: &Env<'_>,
    opts: &Options,
    f: impl FnOnce(&Env<'_>, Option<&Pulse<'_>>) -> T,
) -> T {
    let Some(interval) = opts.observe.heartbeat else {
        return f(env, None);
    };
    let pulse = Pulse {
        inner: env.progress,
        start: Instant::now(),
        state: Mutex::new((Coalescer::new(interval), InFlight::default())),
    };
    let teed = Env {
        roster: env.roster,
        seats: env.seats,
        clock: env.clock,
        progress: &pulse,
    };
    f(&teed, Some(&pulse))
}

/// Runs `f` while a thread witnesses `run`'s heartbeats as `pulse` makes them due (none when
/// there is no pulse); the thread is gone when this returns, so no heartbeat follows the run.
pub(super) fn beating<T>(run: &Run<'_, '_>, pulse: Option<&Pulse<'_>>, f: impl FnOnce() -> T) -> T {
    let Some(pulse) = pulse else {
        return f();
    };
    let (stop, stopped) = channel::<()>();
    std::thread::scope(|s| {
        s.spawn(move || beat_until(run, pulse, &stopped));
        let out = f();
        drop(stop);
        out
    })
}

/// Witnesses each heartbeat as it comes due until `stopped` closes. A heartbeat the ledger
/// refuses is dropped (the run's own entries matter more than its pulse).
fn beat_until(run: &Run<'_, '_>, pulse: &Pulse<'_>, stopped: &Receiver<()>) {
    loop {
        let wait = lock(&pulse.state).0.until_due(pulse.start.elapsed());
        match stopped.recv_timeout(wait.max(MIN_PAUSE)) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => return,
        }
        let Some(seq) = *lock(&run.request_seq) else {
            continue;
        };
        let t = pulse.start.elapsed();
        let body = {
            let mut s = lock(&pulse.state);
            if !s.0.due(t) {
                continue;
            }
            s.0.beat(t);
            heartbeat::run_body(seq, &s.0, &s.1, t, run.heard.since())
        };
        let _ = run.put(ACTOR, heartbeat::KIND, Some(seq), body);
    }
}
