//! The MCP server's one writer of standard output, shared by the session loop and the progress
//! notifications of running calls.

use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value as J;

use crate::serve::dispatch::lock;

/// The one writer: each message is one line, written and flushed whole under its lock. After
/// a write error (the client went away) it writes nothing more.
pub(super) struct Out<'w> {
    w: Mutex<Box<dyn Write + Send + 'w>>,
    broken: AtomicBool,
}

impl<'w> Out<'w> {
    pub(super) fn new(w: impl Write + Send + 'w) -> Out<'w> {
        Out {
            w: Mutex::new(Box::new(w)),
            broken: AtomicBool::new(false),
        }
    }

    /// Writes `msg` as one line.
    pub(super) fn send(&self, msg: &J) {
        let mut text = msg.to_string();
        text.push('\n');
        let mut w = lock(&self.w);
        if self.broken.load(Ordering::SeqCst) {
            return;
        }
        if w.write_all(text.as_bytes())
            .and_then(|_| w.flush())
            .is_err()
        {
            self.broken.store(true, Ordering::SeqCst);
        }
    }

    pub(super) fn is_broken(&self) -> bool {
        self.broken.load(Ordering::SeqCst)
    }
}
