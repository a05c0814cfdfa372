//! The watchdog: a worker (a command or agent-CLI process, an HTTP model call) that has been
//! quiet (no byte on its stdout or stderr, no answer) for the stall time set on its thread
//! ([`in_stall`]) is ended, its whole process tree with it (the same kill as at a deadline),
//! and fails as [`super::CommandError::Stalled`], which a run records as its task's failure
//! (`error: "stalled"`) and retries or escalates as any other.
//!
//! The rule is `crate::observe::Stall`'s (pure); here are the clock and the readers: each
//! read of a command's pipes that brings bytes notes the time ([`Watch::touch`]), and the wait
//! loop asks [`Watch::stalled`] at each look. Each such read also notes the time on the
//! thread's [`Heard`], if it has one: a run shares one among all its workers, so its heartbeat
//! can say how long since any of them last printed.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::observe::Stall;

thread_local! {
    /// How long a worker started on this thread may stay quiet; `None`: forever (only its
    /// deadline ends it).
    static STALL: RefCell<Option<Duration>> = const { RefCell::new(None) };
    /// Where the workers started on this thread note that they printed, if anywhere.
    static HEARD: RefCell<Option<Arc<Heard>>> = const { RefCell::new(None) };
}

/// When any of a set of workers (a run's) last printed.
#[derive(Debug)]
pub(crate) struct Heard {
    start: Instant,
    /// Milliseconds from `start` to the last read that brought bytes.
    last_ms: AtomicU64,
    any: AtomicBool,
}

impl Heard {
    /// Nothing heard yet.
    pub(crate) fn new() -> Arc<Heard> {
        Arc::new(Heard {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
            any: AtomicBool::new(false),
        })
    }

    fn touch(&self) {
        let now = self.start.elapsed().as_millis() as u64;
        self.last_ms.fetch_max(now, Ordering::Relaxed);
        self.any.store(true, Ordering::Relaxed);
    }

    /// How long since a worker last printed; `None` when none has yet.
    pub(crate) fn since(&self) -> Option<Duration> {
        if !self.any.load(Ordering::Relaxed) {
            return None;
        }
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        Some(self.start.elapsed().saturating_sub(last))
    }
}

/// Runs `f` with the workers this thread starts noting on `heard` when they print (see
/// [`Heard`]); the previous one comes back afterwards.
pub(crate) fn in_heard<T>(heard: Arc<Heard>, f: impl FnOnce() -> T) -> T {
    super::call_ctx::scoped(&HEARD, Some(heard), f)
}

/// Runs `f` with the workers this thread starts ended once quiet for `after` (`None`: never
/// for being quiet); the previous setting comes back afterwards.
pub(crate) fn in_stall<T>(after: Option<Duration>, f: impl FnOnce() -> T) -> T {
    super::call_ctx::scoped(&STALL, after, f)
}

/// The stall time of this thread's workers (see [`in_stall`]).
pub(crate) fn stall() -> Option<Duration> {
    STALL.with(|c| *c.borrow())
}

/// When one worker was last heard from, shared by its readers and its waiter.
pub(super) struct Watch {
    start: Instant,
    /// Milliseconds from `start` to the last read that brought bytes.
    last_ms: AtomicU64,
    rule: Option<Stall>,
    heard: Option<Arc<Heard>>,
}

impl Watch {
    /// A watch started now, under this thread's stall time.
    pub(super) fn new() -> Watch {
        Watch {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
            rule: stall().map(|after| Stall { after }),
            heard: HEARD.with(|c| c.borrow().clone()),
        }
    }

    /// The worker was heard from now.
    pub(super) fn touch(&self) {
        let now = self.start.elapsed().as_millis() as u64;
        self.last_ms.fetch_max(now, Ordering::Relaxed);
        if let Some(h) = &self.heard {
            h.touch();
        }
    }

    /// How long it has been quiet when it is stalled now; `None` when it is not (or no stall
    /// time is set).
    pub(super) fn stalled(&self) -> Option<Duration> {
        let rule = self.rule?;
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        rule.stalled(last, self.start.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_without_a_stall_time_never_stalls_and_reads_keep_it_awake() {
        let w = Watch::new();
        assert_eq!(w.stalled(), None);
        in_stall(Some(Duration::from_secs(60)), || {
            assert_eq!(stall(), Some(Duration::from_secs(60)));
            let w = Watch::new();
            w.touch();
            assert_eq!(w.stalled(), None, "just heard from");
        });
        let heard = Heard::new();
        assert_eq!(heard.since(), None);
        in_heard(Arc::clone(&heard), || Watch::new().touch());
        assert!(heard.since().is_some());
        in_stall(Some(Duration::from_millis(1)), || {
            let w = Watch::new();
            std::thread::sleep(Duration::from_millis(5));
            assert!(w.stalled().is_some_and(|q| q >= Duration::from_millis(1)));
        });
        assert_eq!(stall(), None);
    }

    fn sh(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into(), "sh".into()]
    }

    #[test]
    fn a_quiet_command_is_ended_as_stalled_and_a_steady_one_is_not() {
        let limits = super::super::Limits {
            timeout: Duration::from_secs(60),
            ..Default::default()
        };
        let quiet = Duration::from_millis(300);
        let e = in_stall(Some(quiet), || {
            super::super::run(&sh("sleep 1000"), "p", limits)
        })
        .unwrap_err();
        match &e {
            super::super::CommandError::Stalled { quiet: q, .. } => assert!(*q >= quiet),
            other => panic!("{other}"),
        }
        assert!(e.to_string().contains("stalled: no output for"), "{e}");
        // A line every 50 ms for half a second: never quiet for three seconds, even on a
        // loaded machine (a 300 ms window was seen to pass between two lines under load).
        let steady = "for i in 1 2 3 4 5 6 7 8 9 10; do echo $i; sleep 0.05; done";
        let patient = Some(Duration::from_secs(3));
        let ran = in_stall(patient, || super::super::run(&sh(steady), "p", limits)).unwrap();
        assert_eq!(ran.stdout.lines().count(), 10);
    }
}
