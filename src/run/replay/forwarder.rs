//! What a confined agent's metering forwarder told the run, answered from the record. A live
//! agent CLI behind the forwarder hands the engine, on the calling thread, what its egress saw
//! (`egress` of the task's `result`), what the forwarder counted (the spend the run is charged)
//! and, when it reached a ceiling, which one: the engine then closes the spend on that ceiling
//! and witnesses the task as stopped (`error: "ceiling"`, the counted usage). The replay hands
//! the engine the same readings through the same seam (`crate::exec::command::note_*`), taken
//! from the `result` the call made, so what the engine decides after them (the verdict, the
//! climb, the budget stop, the answer) is its own again and compared.

use serde_json::Value as J;

use crate::exec::ExecError;
use crate::exec::command::{self, Metered};

use super::Recorded;

/// What a worker call's egress gave the engine besides its reply, as its `result` keeps it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Egress {
    /// What the egress saw (`egress` of the result), handed back whole.
    seen: J,
    /// What the forwarder counted, and the ceiling it stopped the agent at.
    metered: Option<Metered>,
    /// What the agent's CLI reported of its own spend (`usage.agent_reported`).
    reported: Option<J>,
}

/// The ceiling a forwarder names, as the live forwarder spells it.
fn ceiling(name: &str) -> Option<&'static str> {
    match name {
        "tokens" => Some("tokens"),
        "cost_usd" => Some("cost_usd"),
        _ => None,
    }
}

/// What the forwarder counted, from `egress.metered`; `None` when the call had no forwarder.
/// A record made before `usage_seen` was kept reads it from the counts: an answer that
/// reported usage counted some tokens (one that reported zero of each is the exception).
fn metered(m: &J) -> Option<Metered> {
    let input_tokens = m.get("input_tokens")?.as_u64()?;
    let output_tokens = m.get("output_tokens")?.as_u64()?;
    let seen = m["usage_seen"]
        .as_bool()
        .unwrap_or(input_tokens + output_tokens > 0);
    Some(Metered {
        input_tokens,
        output_tokens,
        seen,
        ceiling: m["ceiling"].as_str().and_then(ceiling),
    })
}

/// What the egress of the call whose `result` is `b` gave the engine; `None` when the worker
/// ran without one (not confined, or not an agent CLI).
pub(super) fn of(b: &J) -> Option<Egress> {
    let seen = b.get("egress").filter(|e| e.is_object())?.clone();
    Some(Egress {
        metered: metered(&seen["metered"]),
        reported: b["usage"].get("agent_reported").cloned(),
        seen,
    })
}

/// The failure a worker call met when its forwarder stopped it at a ceiling, with what the
/// forwarder told the engine; `Err` names a `result` that says so but keeps no count of the
/// forwarder (forged, or cut), which the replay cannot hand the engine.
pub(super) fn stopped(e: &Recorded) -> Result<(ExecError, Egress), String> {
    let b = &e.payload;
    match of(b) {
        Some(egress) if egress.metered.is_some_and(|m| m.ceiling.is_some()) => {
            let output = b["output"].as_str().unwrap_or_default();
            let why = output.strip_prefix("error: ").unwrap_or(output);
            Ok((ExecError::Ceiling(why.to_string()), egress))
        }
        _ => Err(format!(
            "the result at seq {} says its metering forwarder stopped the worker at a spend ceiling, but keeps no count of the forwarder naming the ceiling (`egress.metered`): strict replay cannot hand the engine that stop, so it refuses",
            e.seq
        )),
    }
}

/// Whether the calls of `model` went through a metering forwarder, as its results show.
pub(super) fn metered_live(run: &[Recorded], model: &str) -> bool {
    run.iter().any(|e| {
        e.kind == crate::ledger::kind::RESULT
            && e.payload["model"] == model
            && e.payload["egress"]["metered"].is_object()
    })
}

/// Hands the engine, on this thread, what a call's egress gave it (as the live agent
/// executor does as its call ends); with `None`, clears what an earlier call left.
pub(super) fn note(egress: Option<&Egress>) {
    command::take_egress_seen();
    command::take_metered();
    command::take_agent_reported();
    let Some(e) = egress else {
        return;
    };
    command::note_egress_seen(e.seen.clone());
    if let Some(m) = e.metered {
        command::note_metered(m);
    }
    if let Some(r) = &e.reported {
        command::note_agent_reported(r.clone());
    }
}

#[cfg(test)]
#[path = "forwarder_tests.rs"]
mod tests;
