//! The interruption flag: raised by a signal handler or a draining daemon, read by a run
//! before every model call and every entry it writes.

use std::sync::Mutex;

use super::lock;

/// Tells a run that its process is being interrupted (a signal): from then on it starts no
/// model call and writes no entry of its own, and it ends by witnessing `interrupted`.
#[derive(Debug, Default)]
pub struct Interrupt {
    signal: Mutex<Option<String>>,
}

impl Interrupt {
    /// A flag not raised yet.
    pub fn new() -> Interrupt {
        Interrupt::default()
    }

    /// Raises the flag with the signal's name (`SIGINT`, `SIGTERM`); the first one is kept.
    pub fn raise(&self, signal: &str) {
        lock(&self.signal).get_or_insert_with(|| signal.to_string());
    }

    /// The signal, once raised.
    pub fn signal(&self) -> Option<String> {
        lock(&self.signal).clone()
    }
}
