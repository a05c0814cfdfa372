//! The one run clock: entry timestamps (pinned for reproducible runs, else the system time
//! in microseconds, as Forum keeps) and the run's elapsed time for its seconds budget.
//!
//! A daemon hands it its drain flag: once the server drains, elapsed time jumps far ahead, so
//! the run stops on its budget at the next check and is witnessed as stopped (and
//! resumable), instead of being cut off mid-write.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::run::Clock;

/// How far elapsed time jumps once the drain flag is raised.
const DRAIN_JUMP: f64 = 1e12;

/// The clock a submit or a resume runs on.
#[derive(Debug)]
pub struct RunClock {
    pinned: Option<f64>,
    start: Instant,
    draining: Option<Arc<AtomicBool>>,
}

impl RunClock {
    /// A clock started now; every entry gets `pinned` when it is set.
    pub fn new(pinned: Option<f64>) -> RunClock {
        RunClock {
            pinned,
            start: Instant::now(),
            draining: None,
        }
    }

    /// The same, whose elapsed time jumps past any budget once `draining` is raised.
    pub fn draining_with(mut self, draining: Arc<AtomicBool>) -> RunClock {
        self.draining = Some(draining);
        self
    }
}

/// The system time in seconds since 1970, to the microsecond.
pub fn system_now() -> f64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_micros() as f64) / 1e6
}

impl Clock for RunClock {
    fn now(&self) -> f64 {
        self.pinned.unwrap_or_else(system_now)
    }

    fn elapsed(&self) -> f64 {
        let drained = self
            .draining
            .as_ref()
            .is_some_and(|d| d.load(Ordering::SeqCst));
        self.start.elapsed().as_secs_f64() + if drained { DRAIN_JUMP } else { 0.0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_clock_is_pinned_and_jumps_when_draining() {
        let flag = Arc::new(AtomicBool::new(false));
        let c = RunClock::new(Some(5.0)).draining_with(flag.clone());
        assert_eq!(c.now(), 5.0);
        assert!(c.elapsed() < 1e6);
        flag.store(true, Ordering::SeqCst);
        assert!(c.elapsed() >= DRAIN_JUMP);
        assert!(RunClock::new(None).elapsed() < 1e6);
    }
}
