//! The executors a run recorded when it started (its request's `runtime` field), found for the
//! run a resume would continue, so `git forum resume` and the daemon's `/resume` need no
//! executor flags. Flags given to the resume win; a run that recorded none (older runs, runs
//! given seats directly) continues on the current configuration.

use serde_json::Value as J;

use super::Bodies;
use crate::exec::config::{self, Runtime};
use crate::ledger::Entry;
use crate::run::status;
use crate::surface::{Error, Result};

/// The run a resume of `target` continues (the latest resumable one when `None`), and the
/// executors its request recorded, if any. A run that cannot be found or resumed gives
/// `None` here: the resume itself then says why, in its own words.
pub(crate) fn recorded_runtime(
    entries: &[Entry],
    bodies: &Bodies<'_>,
    target: Option<u64>,
) -> Result<Option<(u64, Runtime)>> {
    let runs = status::runs(entries, |e| bodies.get(e));
    bodies.done()?;
    let run = match target {
        Some(seq) => runs.iter().find(|r| r.request_seq == seq),
        None => runs.iter().rev().find(|r| r.state.resumable()),
    };
    let Some(run) = run.filter(|r| r.state.resumable()) else {
        return Ok(None);
    };
    let Some(request) = entries.iter().find(|e| e.seq == run.request_seq) else {
        return Ok(None);
    };
    let record = bodies.get(request).and_then(|b| b.get("runtime").cloned());
    bodies.done()?;
    let Some(record) = record.filter(|r| !r.is_null()) else {
        return Ok(None);
    };
    let rt = from_record(&record, run.request_seq)?;
    Ok(Some((run.request_seq, rt)))
}

/// A record as a runtime; one that does not hold together is refused with what to do.
pub(crate) fn from_record(record: &J, request_seq: u64) -> Result<Runtime> {
    config::record::from_record(record).map_err(|e| {
        Error::usage(format!(
            "run {request_seq} recorded executors this resume cannot use ({e}); give the executor flags (--cmd, --chat-url, --runtime-config ...) to resume it on them"
        ))
    })
}

/// `current` with its executors replaced by the recorded ones (its `[work]` table and
/// warnings stay).
pub(crate) fn with_recorded(current: Runtime, recorded: Runtime) -> Runtime {
    Runtime {
        default: recorded.default,
        tiers: recorded.tiers,
        seats: recorded.seats,
        ..current
    }
}
