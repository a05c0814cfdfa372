//! What one worker's call carries on its thread, for the agents that need more than a
//! prompt: the shell commands it may run, the egress bridge its sandbox starts under, what it
//! may still spend, the stop switch its metering forwarder pulls, and what that egress saw.
//! Thread-locals, like the working directory and the jail of [`super`], so neither the
//! [`crate::exec::Call`] nor the other executors change.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::thread::LocalKey;

thread_local! {
    /// The shell commands a worker started on this thread may run itself (a `--work` task's
    /// checks, its `run:` criteria and `--allow-cmd`), for the agents that take such a list.
    static ALLOWED: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    /// The bridge a confined command on this thread starts under (`--listen` arguments of
    /// `git forum __egress-bridge`); empty: none.
    static BRIDGE: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    /// What the model calls of a worker started on this thread may still spend (the run's
    /// ceilings, less what is spent and reserved), for the agents metered while they run.
    static ALLOWANCE: RefCell<crate::egress::Ceilings> = RefCell::new(crate::egress::Ceilings::default());
    /// What the egress of this thread's last agent call saw (its meter and proxy), for the
    /// task's record; taken once.
    static EGRESS_SEEN: RefCell<Option<serde_json::Value>> = const { RefCell::new(None) };
    /// What the metering forwarder of this thread's last agent call counted, for the run's
    /// spend; taken once.
    static METERED: RefCell<Option<Metered>> = const { RefCell::new(None) };
    /// What this thread's last agent call reported of its own spend (its CLI's tokens and
    /// cost), for the task's record beside the forwarder's count; taken once.
    static AGENT_REPORTED: RefCell<Option<serde_json::Value>> = const { RefCell::new(None) };
    /// A flag that, once set, stops the command this thread waits for (its whole group).
    static STOPPER: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
    /// Where the tool calls an agent started on this thread makes are sent as it makes them
    /// (the run's progress for its task); `None`: nobody watches.
    static LIVE: RefCell<Option<Sender<LiveCall>>> = const { RefCell::new(None) };
}

/// One tool call of an agent CLI, read from its output while it runs: what it did (`edit`,
/// `read`, `run`, `search`, else the tool's name), on what (a path, a command's first line, a
/// pattern; cleaned for a terminal and cut), and whether it went well.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LiveCall {
    pub(crate) verb: String,
    pub(crate) target: String,
    pub(crate) ok: bool,
}

/// Runs `f` with the tool calls of the agents this thread starts sent to `sink` as they
/// happen; the previous sink comes back afterwards (and this one is dropped, which ends its
/// receiver's loop once the agent's readers are done with their copies).
pub(crate) fn in_live<T>(sink: Sender<LiveCall>, f: impl FnOnce() -> T) -> T {
    scoped(&LIVE, Some(sink), f)
}

/// Where this thread's agents send their tool calls (see [`in_live`]), if anywhere.
pub(crate) fn live_sink() -> Option<Sender<LiveCall>> {
    LIVE.with(|c| c.borrow().clone())
}

/// Runs `f` with `value` in this thread's `key`; the previous value comes back afterwards,
/// also when `f` panics (the runner's `in_*` switches are this).
pub(crate) fn scoped<V: 'static, T>(
    key: &'static LocalKey<RefCell<V>>,
    value: V,
    f: impl FnOnce() -> T,
) -> T {
    struct Restore<V: 'static>(&'static LocalKey<RefCell<V>>, Option<V>);
    impl<V: 'static> Drop for Restore<V> {
        fn drop(&mut self) {
            if let Some(v) = self.1.take() {
                self.0.with(|c| *c.borrow_mut() = v);
            }
        }
    }
    let _restore = Restore(key, Some(key.with(|c| c.replace(value))));
    f()
}

/// Runs `f` with `commands` as the shell commands this thread's workers may run; the
/// previous list comes back afterwards.
pub(crate) fn in_allowed<T>(commands: Vec<String>, f: impl FnOnce() -> T) -> T {
    scoped(&ALLOWED, commands, f)
}

/// The shell commands this thread's workers may run (see [`in_allowed`]).
pub(crate) fn allowed_commands() -> Vec<String> {
    ALLOWED.with(|c| c.borrow().clone())
}

/// Runs `f` with the confined commands this thread starts wrapped in the egress bridge,
/// listening as `listens` says (see `crate::egress::bridge`).
pub(crate) fn in_bridge<T>(listens: Vec<String>, f: impl FnOnce() -> T) -> T {
    scoped(&BRIDGE, listens, f)
}

/// The bridge's `--listen` arguments for this thread's confined commands (see [`in_bridge`]).
pub(crate) fn bridge_listens() -> Vec<String> {
    BRIDGE.with(|c| c.borrow().clone())
}

/// Keeps what the egress of this thread's agent call saw, for [`take_egress_seen`].
pub(crate) fn note_egress_seen(seen: serde_json::Value) {
    EGRESS_SEEN.with(|c| *c.borrow_mut() = Some(seen));
}

/// What the egress of this thread's last agent call saw, once.
pub(crate) fn take_egress_seen() -> Option<serde_json::Value> {
    EGRESS_SEEN.with(|c| c.borrow_mut().take())
}

/// What an agent's metering forwarder counted over one call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Metered {
    /// Input tokens of every answer it passed.
    pub(crate) input_tokens: u64,
    /// Output tokens of every answer it passed.
    pub(crate) output_tokens: u64,
    /// Whether any answer reported usage at all.
    pub(crate) seen: bool,
    /// The ceiling it stopped the agent at (`tokens` or `cost_usd`), if it did.
    pub(crate) ceiling: Option<&'static str>,
}

/// Keeps what this thread's agent call's forwarder counted, for [`take_metered`].
pub(crate) fn note_metered(m: Metered) {
    METERED.with(|c| *c.borrow_mut() = Some(m));
}

/// What the forwarder of this thread's last agent call counted, once.
pub(crate) fn take_metered() -> Option<Metered> {
    METERED.with(|c| c.borrow_mut().take())
}

/// Keeps what this thread's agent call reported of its own spend, for
/// [`take_agent_reported`].
pub(crate) fn note_agent_reported(v: serde_json::Value) {
    AGENT_REPORTED.with(|c| *c.borrow_mut() = Some(v));
}

/// What this thread's last agent call reported of its own spend, once.
pub(crate) fn take_agent_reported() -> Option<serde_json::Value> {
    AGENT_REPORTED.with(|c| c.borrow_mut().take())
}

/// Runs `f` with `allowance` as what this thread's workers may still spend.
pub(crate) fn in_allowance<T>(allowance: crate::egress::Ceilings, f: impl FnOnce() -> T) -> T {
    scoped(&ALLOWANCE, allowance, f)
}

/// What this thread's workers may still spend (see [`in_allowance`]).
pub(crate) fn allowance() -> crate::egress::Ceilings {
    ALLOWANCE.with(|c| *c.borrow())
}

/// Runs `f` with `flag` as the stop switch of the commands this thread waits for: once it is
/// set, the running command is killed with its whole group (as at its deadline) and reported
/// as interrupted.
pub(crate) fn in_stopper<T>(flag: Arc<AtomicBool>, f: impl FnOnce() -> T) -> T {
    scoped(&STOPPER, Some(flag), f)
}

/// Whether this thread's stop switch is set (see [`in_stopper`]).
pub(crate) fn stop_requested() -> bool {
    STOPPER.with(|c| {
        c.borrow()
            .as_ref()
            .is_some_and(|s| s.load(Ordering::SeqCst))
    })
}
