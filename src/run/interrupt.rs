//! The interruption flag: raised by a signal handler, an operator's halt, a draining daemon or
//! an MCP cancel, read by a run before every model call and every entry it writes. Each flag
//! owns a kill scope of [`crate::exec::command`]: the commands its run starts are registered
//! under it, and raising the flag kills them at once, without touching any other run.
//!
//! The flag also tells whoever watches it which run it guards (its request seq, once the run
//! has one), so a halt watcher can look for a halt request addressed to that run.

use std::sync::Mutex;

use super::lock;
use crate::exec::command;

/// The cause named when an operator's halt raised the flag.
pub(crate) const HALT: &str = "halt";

/// Who halted a run, and why (what its `halted` entry records).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Halt {
    /// Who asked: a person's name, a client, or `signal`.
    pub(crate) by: String,
    /// Why, in their words.
    pub(crate) reason: String,
}

/// Tells a run that it is being interrupted (a signal, a halt, a cancel): from then on it
/// starts no command or model call and writes no entry of its own, the commands it has running
/// are killed with their process groups, and it ends by witnessing `halted` (a halt or a
/// signal) or `interrupted` (a cancel).
pub(crate) struct Interrupt {
    signal: Mutex<Option<String>>,
    halt: Mutex<Option<Halt>>,
    run: Mutex<Option<u64>>,
    /// Called (once per run) when the run learns its request seq, before it writes more.
    on_run: Mutex<Option<RunHook>>,
    scope: u64,
}

/// What a watcher does when the run it watches learns its request seq.
type RunHook = Box<dyn Fn(u64) + Send>;

impl std::fmt::Debug for Interrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interrupt")
            .field("signal", &self.signal)
            .field("halt", &self.halt)
            .field("run", &self.run)
            .field("scope", &self.scope)
            .finish()
    }
}

impl Default for Interrupt {
    fn default() -> Interrupt {
        Interrupt {
            signal: Mutex::new(None),
            halt: Mutex::new(None),
            run: Mutex::new(None),
            on_run: Mutex::new(None),
            scope: command::new_scope(),
        }
    }
}

impl Interrupt {
    /// A flag not raised yet.
    pub(crate) fn new() -> Interrupt {
        Interrupt::default()
    }

    /// Raises the flag with the cause's name (`SIGINT`, `SIGTERM`, `notifications/cancelled`);
    /// the first one is kept. The commands started under this flag are killed.
    pub(crate) fn raise(&self, signal: &str) {
        lock(&self.signal).get_or_insert_with(|| signal.to_string());
        command::stop_scope(self.scope);
    }

    /// Raises the flag for an operator's halt (`git forum halt`, `POST /halt`): the run ends by
    /// witnessing `halted {by, reason}`. A flag already raised keeps its first cause.
    pub(crate) fn raise_halt(&self, by: &str, reason: &str) {
        {
            let mut signal = lock(&self.signal);
            if signal.is_none() {
                *signal = Some(HALT.to_string());
                *lock(&self.halt) = Some(Halt {
                    by: by.to_string(),
                    reason: reason.to_string(),
                });
            }
        }
        command::stop_scope(self.scope);
    }

    /// The signal, once raised.
    pub(crate) fn signal(&self) -> Option<String> {
        lock(&self.signal).clone()
    }

    /// What the run witnesses as `halted`, once the flag is raised by a halt or a signal; `None`
    /// for a cancel (witnessed as `interrupted`) or a flag not raised.
    pub(crate) fn halt(&self) -> Option<Halt> {
        if let Some(h) = lock(&self.halt).clone() {
            return Some(h);
        }
        let signal = self.signal()?;
        signal.starts_with("SIG").then(|| Halt {
            by: "signal".into(),
            reason: format!(
                "git forum received {signal}; every command the run had running was killed with its process group"
            ),
        })
    }

    /// The run this flag guards (its request seq), once the run has one.
    pub(crate) fn run(&self) -> Option<u64> {
        *lock(&self.run)
    }

    /// Notes the run this flag guards, and tells the watcher (before the run writes more, so
    /// a halt can find the run from its first entries on).
    pub(crate) fn set_run(&self, request_seq: u64) {
        *lock(&self.run) = Some(request_seq);
        if let Some(hook) = lock(&self.on_run).as_ref() {
            hook(request_seq);
        }
    }

    /// Calls `hook` with the run's request seq when the run learns it (at once when it knows
    /// it already).
    pub(crate) fn on_run(&self, hook: impl Fn(u64) + Send + 'static) {
        let mut slot = lock(&self.on_run);
        if let Some(seq) = self.run() {
            hook(seq);
        }
        *slot = Some(Box::new(hook));
    }

    /// Drops the hook of [`Interrupt::on_run`].
    pub(crate) fn clear_on_run(&self) {
        *lock(&self.on_run) = None;
    }

    /// Runs `f` with the commands this thread starts registered under this flag.
    pub(crate) fn scoped<T>(&self, f: impl FnOnce() -> T) -> T {
        command::in_scope(self.scope, f)
    }
}

impl Drop for Interrupt {
    fn drop(&mut self) {
        command::forget_scope(self.scope);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_halt_and_a_signal_are_witnessed_as_halted_and_a_cancel_is_not() {
        let i = Interrupt::new();
        assert_eq!(i.halt(), None);
        i.raise_halt("ada", "stop");
        i.raise("SIGTERM");
        let h = i.halt().unwrap();
        assert_eq!((h.by.as_str(), h.reason.as_str()), ("ada", "stop"));
        assert_eq!(i.signal().as_deref(), Some(HALT));
        let s = Interrupt::new();
        s.raise("SIGINT");
        s.raise_halt("ada", "too late");
        let h = s.halt().unwrap();
        assert_eq!(h.by, "signal");
        assert!(h.reason.contains("SIGINT"), "{}", h.reason);
        let c = Interrupt::new();
        c.raise("notifications/cancelled");
        assert_eq!(c.halt(), None);
        assert_eq!(c.run(), None);
        c.set_run(7);
        assert_eq!(c.run(), Some(7));
    }
}
