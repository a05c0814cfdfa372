//! A worker's wait for its ledger's stream. Only a writer makes the stream (see
//! `Connection::stream_made` for why), so a worker started before any run of its ledger was
//! dispatched looks for it until one is.

use std::sync::atomic::Ordering;
use std::time::Duration;

use async_nats::jetstream::consumer::PullConsumer;

use super::WorkerOptions;
use crate::fleet::nats::{Connection, Made};
use crate::fleet::protocol;

/// The workers' durable consumer of the ledger's tasks, made when missing.
pub(super) fn tasks_consumer(o: &WorkerOptions, conn: &Connection) -> Result<PullConsumer, String> {
    conn.consumer(
        &protocol::worker_consumer(&o.ledger),
        &protocol::task_filter(&o.ledger),
        o.lease,
    )
}

/// Waits until a writer has made the ledger's stream, then opens the tasks' consumer;
/// `None` when the control said stop first. A stream found to be another ledger's is one line.
pub(super) fn await_stream(
    o: &WorkerOptions,
    conn: &Connection,
) -> Result<Option<PullConsumer>, String> {
    let over = || {
        o.control.stop.load(Ordering::SeqCst)
            || o.max_tasks
                .is_some_and(|m| o.control.done.load(Ordering::SeqCst) >= m)
    };
    if over() {
        return Ok(None);
    }
    eprintln!(
        "git forum worker: waiting for the stream of ledger {} on {}: the first `git forum submit --dispatch` of the ledger makes it",
        o.ledger,
        conn.url()
    );
    let mut said = None;
    loop {
        if over() {
            return Ok(None);
        }
        match conn.stream_made()? {
            Made::Yes => return tasks_consumer(o, conn).map(Some),
            Made::No => {}
            // Said once for each new problem; the server may be on its way back.
            Made::Unknown(e) => {
                if said.as_ref() != Some(&e) {
                    eprintln!("git forum worker: {e}; trying again");
                    said = Some(e);
                }
            }
        }
        std::thread::sleep(STREAM_POLL);
    }
}

/// How often a worker started before its ledger's stream looks for it.
const STREAM_POLL: Duration = Duration::from_millis(250);
