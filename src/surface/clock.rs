//! The one clock of the surface: the timestamp of a new entry (pinned, from
//! `GIT_FORUM_TIMESTAMP`, or the system clock in microseconds) and a run's clock, whose elapsed
//! time jumps ahead once the daemon drains so a run stops at its next budget check.
//!
//! The pure core never reads the clock: it is handed these values through [`crate::run::Clock`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::{Error, Result};
use crate::run::Clock;

/// The environment variable that pins every new entry's timestamp (reproducible records).
pub(crate) const TIMESTAMP_ENV: &str = "GIT_FORUM_TIMESTAMP";

/// Seconds since 1970 from the system clock, in microseconds: what Forum's `.6f` entry-hash
/// formatting keeps. A clock before 1970 reads as 0.
pub(crate) fn system_now() -> f64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_micros() as f64) / 1e6
}

/// The timestamp pinned by [`TIMESTAMP_ENV`], if set; a value that is not a number of seconds
/// is a usage error.
pub(crate) fn pinned_from_env() -> Result<Option<f64>> {
    match std::env::var(TIMESTAMP_ENV) {
        Err(_) => Ok(None),
        Ok(v) => parse_timestamp(&v).map(Some).ok_or_else(|| {
            Error::usage(format!(
                "{TIMESTAMP_ENV}={v:?} is not a number of seconds since 1970"
            ))
        }),
    }
}

/// A timestamp as written in [`TIMESTAMP_ENV`]: finite and not negative.
pub(crate) fn parse_timestamp(text: &str) -> Option<f64> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|t| t.is_finite() && *t >= 0.0)
}

/// The timestamp for a new entry: `flag` (`--ts`), else [`TIMESTAMP_ENV`], else the clock.
pub(crate) fn entry_timestamp(flag: Option<f64>) -> Result<f64> {
    if let Some(ts) = flag {
        return Ok(ts);
    }
    Ok(pinned_from_env()?.unwrap_or_else(system_now))
}

/// How far elapsed time jumps once the drain flag is raised.
const DRAIN_JUMP: f64 = 1e12;

/// Timestamps for a run's entries, and its elapsed time for the seconds budget. Once a drain
/// flag is raised (see [`RunClock::draining_with`]), elapsed time jumps far ahead, so the run
/// stops on its budget at the next check and is witnessed as stopped (and resumable), instead
/// of being cut off mid-write.
#[derive(Debug)]
pub(crate) struct RunClock {
    pinned: Option<f64>,
    start: Instant,
    draining: Option<Arc<AtomicBool>>,
}

impl RunClock {
    /// A clock started now; every entry gets `pinned` when it is set.
    pub(crate) fn new(pinned: Option<f64>) -> RunClock {
        RunClock {
            pinned,
            start: Instant::now(),
            draining: None,
        }
    }

    /// The same, whose elapsed time jumps past any budget once `draining` is raised.
    pub(crate) fn draining_with(mut self, draining: Arc<AtomicBool>) -> RunClock {
        self.draining = Some(draining);
        self
    }
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
    fn the_run_clock_jumps_when_draining() {
        let flag = Arc::new(AtomicBool::new(false));
        let c = RunClock::new(Some(5.0)).draining_with(flag.clone());
        assert_eq!(c.now(), 5.0);
        assert!(c.elapsed() < 1e6);
        flag.store(true, Ordering::SeqCst);
        assert!(c.elapsed() >= DRAIN_JUMP);
        assert!(RunClock::new(None).elapsed() < 1e6);
    }

    #[test]
    fn timestamps_are_finite_and_not_negative() {
        assert_eq!(parse_timestamp(" 12.5 "), Some(12.5));
        assert_eq!(parse_timestamp("0"), Some(0.0));
        for bad in ["-1", "nan", "inf", "x", ""] {
            assert_eq!(parse_timestamp(bad), None, "{bad:?}");
        }
        assert_eq!(entry_timestamp(Some(3.0)).unwrap(), 3.0);
    }
}
