//! The interruption flag: raised by a signal handler, a draining daemon or an MCP cancel, read
//! by a run before every model call and every entry it writes. Each flag owns a kill scope of
//! [`crate::exec::command`]: the commands its run starts are registered under it, and raising
//! the flag kills them at once, without touching any other run.

use std::sync::Mutex;

use super::lock;
use crate::exec::command;

/// Tells a run that it is being interrupted (a signal, a cancel): from then on it starts no
/// command or model call and writes no entry of its own, the commands it has running are
/// killed with their process groups, and it ends by witnessing `interrupted`.
#[derive(Debug)]
pub struct Interrupt {
    signal: Mutex<Option<String>>,
    scope: u64,
}

impl Default for Interrupt {
    fn default() -> Interrupt {
        Interrupt {
            signal: Mutex::new(None),
            scope: command::new_scope(),
        }
    }
}

impl Interrupt {
    /// A flag not raised yet.
    pub fn new() -> Interrupt {
        Interrupt::default()
    }

    /// Raises the flag with the cause's name (`SIGINT`, `SIGTERM`, `notifications/cancelled`);
    /// the first one is kept. The commands started under this flag are killed.
    pub(crate) fn raise(&self, signal: &str) {
        lock(&self.signal).get_or_insert_with(|| signal.to_string());
        command::stop_scope(self.scope);
    }

    /// The signal, once raised.
    pub(crate) fn signal(&self) -> Option<String> {
        lock(&self.signal).clone()
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
