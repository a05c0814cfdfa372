//! Heartbeats and the stall rule, pure: no clock, no I/O, no randomness. Every time is a value
//! the caller gives, an offset from a start it chose (a run's start, a daemon's, a command's),
//! so the same inputs always give the same answers.
//!
//! * [`Coalescer`]: fed "something happened at t" ([`Coalescer::happened`]) and asked "is a
//!   heartbeat due at t" ([`Coalescer::due`]). A beat is due once per interval, whether or
//!   not anything happened (a silent run's heartbeat is what shows it is silent), and an event
//!   never makes one: however many events come and however late the caller asks, at most one
//!   beat is due per interval, so `d` seconds give at most `d / interval + 1` beats. What
//!   happened is kept only as the last activity, which a beat reports (the time since it).
//!   A remote worker's lease renewal is one more "something happened".
//! * [`Stall`]: whether a worker quiet since a given time is stalled now (the watchdog's rule,
//!   `crate::exec::command`'s).
//!
//! A heartbeat is witnessed as an entry of kind [`KIND`]. Forum has no heartbeat kind or
//! schema; the body's `schema` field ([`SCHEMA`]) names this project's, and `of` says whose
//! it is (`run` or `daemon`), so a reader tells it from any other tool's entry of that kind.

use std::time::Duration;

/// The kind of a heartbeat entry (this project's; Forum defines none).
pub(crate) const KIND: &str = "heartbeat";

/// The schema a heartbeat body names.
pub(crate) const SCHEMA: &str = "git-forum.heartbeat/1";

/// One heartbeat per interval at most, fed with what happened and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Coalescer {
    interval: Duration,
    /// When the last beat was written (`None`: none yet; the first is due one interval in).
    last_beat: Option<Duration>,
    /// When something last happened (`None`: nothing yet).
    last_activity: Option<Duration>,
}

impl Coalescer {
    /// A coalescer that gives a beat every `interval` (at least a millisecond).
    pub(crate) fn new(interval: Duration) -> Coalescer {
        Coalescer {
            interval: interval.max(Duration::from_millis(1)),
            last_beat: None,
            last_activity: None,
        }
    }

    /// The interval.
    pub(crate) fn interval(&self) -> Duration {
        self.interval
    }

    /// Something happened at `t` (an output, a tool call, a model call, a lease renewal).
    /// Never makes a beat due.
    pub(crate) fn happened(&mut self, t: Duration) {
        self.last_activity = Some(self.last_activity.map_or(t, |a| a.max(t)));
    }

    /// Whether a beat is due at `t`: a whole interval has passed since the last beat (or
    /// since the start, before the first).
    pub(crate) fn due(&self, t: Duration) -> bool {
        t >= self.last_beat.unwrap_or(Duration::ZERO) + self.interval
    }

    /// A beat was written at `t`: the next is due one interval later, however late this one
    /// came (missed intervals are not made up).
    pub(crate) fn beat(&mut self, t: Duration) {
        self.last_beat = Some(t);
    }

    /// When something last happened, if anything did.
    pub(crate) fn last_activity(&self) -> Option<Duration> {
        self.last_activity
    }

    /// How long it has been quiet at `t`: since the last activity, else since the start.
    pub(crate) fn quiet_for(&self, t: Duration) -> Duration {
        t.saturating_sub(self.last_activity.unwrap_or(Duration::ZERO))
    }

    /// How long from `t` until the next beat is due (zero when one is due now).
    pub(crate) fn until_due(&self, t: Duration) -> Duration {
        (self.last_beat.unwrap_or(Duration::ZERO) + self.interval).saturating_sub(t)
    }
}

/// The stall rule: a worker quiet (no output, no progress) for `after` or longer is stalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stall {
    /// How long a worker may be quiet.
    pub(crate) after: Duration,
}

impl Stall {
    /// Whether a worker last heard from at `last` (or started then) is stalled at `now`: how
    /// long it has been quiet when it is.
    pub(crate) fn stalled(&self, last: Duration, now: Duration) -> Option<Duration> {
        let quiet = now.saturating_sub(last);
        (quiet >= self.after).then_some(quiet)
    }

    /// The reason a stalled worker's failure records: `stalled: no output for 600 s`.
    pub(crate) fn reason(quiet: Duration) -> String {
        format!("stalled: no output for {} s", quiet.as_secs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Drives a coalescer over `events` (times at which something happened) while it is
    /// asked every `poll` until `end`, writing a beat whenever one is due: the beat times.
    fn beats(interval: u64, events: &[u64], poll: u64, end: u64) -> Vec<u64> {
        let mut c = Coalescer::new(ms(interval));
        let mut out = Vec::new();
        let mut ev = events.iter().peekable();
        let mut t = 0;
        while t <= end {
            while let Some(&&e) = ev.peek().filter(|e| ***e <= t) {
                c.happened(ms(e));
                ev.next();
            }
            if c.due(ms(t)) {
                c.beat(ms(t));
                out.push(t);
            }
            t += poll;
        }
        out
    }

    #[test]
    fn beats_come_once_per_interval_whatever_the_events() {
        // No events: one per interval, the first one interval in.
        assert_eq!(beats(100, &[], 10, 450), vec![100, 200, 300, 400]);
        // A flood of events changes nothing.
        let flood: Vec<u64> = (0..450).collect();
        assert_eq!(beats(100, &flood, 10, 450), vec![100, 200, 300, 400]);
        // Asked late (a busy machine): one beat per look, never a burst to catch up.
        assert_eq!(beats(100, &flood, 250, 1000), vec![250, 500, 750, 1000]);
        // The bound the integration test relies on: at most duration / interval + 1.
        for poll in [1, 7, 33, 99, 100, 101] {
            let n = beats(100, &flood, poll, 1000).len() as u64;
            assert!(n <= 1000 / 100 + 1, "poll {poll}: {n}");
        }
    }

    #[test]
    fn what_happened_is_the_last_activity_and_never_a_beat() {
        let mut c = Coalescer::new(ms(100));
        assert_eq!(c.quiet_for(ms(40)), ms(40));
        c.happened(ms(30));
        c.happened(ms(10)); // late news does not move it back
        assert_eq!(c.last_activity(), Some(ms(30)));
        assert!(!c.due(ms(99)));
        assert_eq!(c.until_due(ms(60)), ms(40));
        assert!(c.due(ms(100)));
        c.beat(ms(130));
        assert_eq!(c.until_due(ms(130)), ms(100));
        assert!(!c.due(ms(229)));
        assert!(c.due(ms(230)));
        assert_eq!(c.quiet_for(ms(230)), ms(200));
    }

    #[test]
    fn a_worker_is_stalled_once_quiet_for_the_configured_time() {
        let s = Stall { after: ms(1000) };
        assert_eq!(s.stalled(ms(500), ms(1499)), None);
        assert_eq!(s.stalled(ms(500), ms(1500)), Some(ms(1000)));
        assert_eq!(s.stalled(ms(500), ms(2600)), Some(ms(2100)));
        // A clock that reads before the last activity is never a stall.
        assert_eq!(s.stalled(ms(900), ms(100)), None);
        assert_eq!(
            Stall::reason(Duration::from_secs(600)),
            "stalled: no output for 600 s"
        );
    }
}
