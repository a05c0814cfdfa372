//! Strict replay: a recorded run's control loop run again through the same engine path as a
//! live run (`submit`), into a scratch ledger in memory that starts as a copy of what came
//! before the run, with every executor's reply and every clock reading answered from the
//! record ([`answers`]), and every decision the engine makes compared with the recorded one
//! ([`compare`]). The record's decisions themselves are never handed to the engine.
//!
//! What the record cannot answer is refused, naming the seq: a body that was redacted or
//! removed, a failure kept only as text, and the kinds of run whose outside calls this
//! replay does not answer yet (work in the repository, verifier commands, the reviser and
//! the intent judge, gates, resumed runs). Context comes from the record's `context` entries.

mod answers;
mod compare;
mod context;
pub mod rules;

use serde::Serialize;
use serde_json::Value as J;

use crate::ledger::{MemoryStorage, Storage, StorageError, kind};
use crate::roster::Roster;

use super::{Env, Options, Silent};
use answers::{Answers, ReplayClock, ReplaySeats};
pub use compare::{Divergence, first_divergence};

/// One entry as the comparison reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// Its seq.
    pub seq: u64,
    /// Its timestamp.
    pub ts: f64,
    /// Who wrote it.
    pub actor: String,
    /// Its kind.
    pub kind: String,
    /// Its causal parent's seq.
    pub parent: Option<u64>,
    /// Its body.
    pub payload: J,
}

/// What a strict replay found.
#[derive(Debug, Clone, Serialize)]
pub struct StrictReplay {
    /// The run (its request seq).
    pub run: u64,
    /// How many recorded entries the run has.
    pub recorded: usize,
    /// How many the replay wrote.
    pub recomputed: usize,
    /// SHA-256 of the recorded final answer, when there is one.
    pub answer_sha256: Option<String>,
    /// SHA-256 of the replay's final answer, when it gave one.
    pub recomputed_answer_sha256: Option<String>,
    /// The first divergence, or `None` when every decision agrees.
    pub divergence: Option<Divergence>,
    /// Calls the replay made that the record has no reply for (each a divergence's cause).
    pub unanswered: Vec<String>,
    /// The git forum version that recorded the run, or `None` for a run recorded before
    /// versions were recorded (or by a library caller that records no runtime).
    pub recorded_by: Option<String>,
    /// This git forum's version, which replayed it.
    pub replayed_by: String,
}

/// Why a run cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The record lacks what a reply needs, or the run is of a kind this replay refuses.
    #[error("{0}")]
    Refused(String),
    /// The ledger could not be read.
    #[error("ledger: {0}")]
    Ledger(#[from] StorageError),
}

/// Kinds a strictly replayable run may hold: those the engine writes from the replies this
/// replay answers, or decides without a call.
const REPLAYABLE: [&str; 13] = [
    kind::REQUEST,
    kind::CONTEXT,
    kind::ROUTE_FRAME,
    kind::PLAN,
    kind::TASK,
    kind::RESULT,
    kind::VERDICT,
    kind::TIER_ESCALATION,
    kind::DEGRADED,
    kind::BUDGET,
    kind::INTENT_CHECK,
    kind::DELIVERY_CHECK,
    kind::DELIVERY_PROFILE_CHECK,
];

/// Every entry of a ledger, with its body (`None` where it was removed).
pub fn read_all(
    ledger: &dyn Storage,
) -> Result<Vec<(crate::ledger::Entry, Option<J>)>, StorageError> {
    let mut out = Vec::new();
    for seq in 0..ledger.len()? {
        if let Some(e) = ledger.get(seq)? {
            let body = ledger.payload_at(seq)?.map(|v| v.to_serde());
            out.push((e, body));
        }
    }
    Ok(out)
}

/// The entries of the run whose request is at `request_seq`: the request and every entry
/// whose causal chain leads to it, in seq order. `Err` names a removed body.
pub(crate) fn run_entries(
    all: &[(crate::ledger::Entry, Option<J>)],
    request_seq: u64,
) -> Result<Vec<Recorded>, String> {
    let mut ours = std::collections::BTreeSet::from([request_seq]);
    let mut out = Vec::new();
    for (e, body) in all.iter().filter(|(e, _)| e.seq >= request_seq) {
        let parent = e.causal_parent.map(|p| p as u64);
        if e.seq != request_seq && !parent.is_some_and(|p| ours.contains(&p)) {
            continue;
        }
        ours.insert(e.seq);
        let Some(payload) = body.clone() else {
            return Err(format!(
                "the body of seq {} ({}) was removed from the ledger: the record cannot answer the call it came from, so this run cannot be replayed",
                e.seq, e.kind
            ));
        };
        out.push(Recorded {
            seq: e.seq,
            ts: e.ts,
            actor: e.actor.clone(),
            kind: e.kind.clone(),
            parent,
            payload,
        });
    }
    Ok(out)
}

/// Refuses a run this replay cannot answer, naming the seq that shows it.
fn check_replayable(run: &[Recorded]) -> Result<(), String> {
    let request = &run[0];
    for key in ["work", "solo", "gates"] {
        if request.payload.get(key).is_some() {
            return Err(format!(
                "run {} was submitted with {key} (seq {}): strict replay answers model replies only, not a workbench or a gate, so it refuses this run",
                request.seq, request.seq
            ));
        }
    }
    if let Some(e) = run.iter().find(|e| !REPLAYABLE.contains(&e.kind.as_str())) {
        return Err(format!(
            "seq {} of run {} is a {} entry, whose inputs the record does not hold for a strict replay: it refuses rather than invent them",
            e.seq, request.seq, e.kind
        ));
    }
    Ok(())
}

fn sha256(text: &str) -> String {
    crate::ledger::hash::sha256_hex(text.as_bytes())
}

/// The final answer of a run's entries: its last synthesizer result.
fn final_answer(run: &[Recorded]) -> Option<String> {
    run.iter()
        .rev()
        .find(|e| e.kind == kind::RESULT && e.actor == "synthesizer")
        .and_then(|e| e.payload["answer"].as_str())
        .map(sha256)
}

/// Replays the run whose request is at `request_seq` in `ledger` and compares every decision
/// with the record. `roster` and `opts` are the run's (a resumed-from-record run's options:
/// the request's recorded runtime and options are put back into them here).
pub fn strict(
    ledger: &dyn Storage,
    request_seq: u64,
    roster: &Roster,
    opts: &Options,
) -> Result<StrictReplay, ReplayError> {
    strict_metered(ledger, request_seq, roster, opts, None)
}

/// [`strict`], with each call reserved as the executor of `metering` (the seats built from
/// the run's recorded runtime, never called) would reserve it: see [`rules::Metered`].
pub fn strict_metered(
    ledger: &dyn Storage,
    request_seq: u64,
    roster: &Roster,
    opts: &Options,
    metering: Option<&dyn crate::exec::Seats>,
) -> Result<StrictReplay, ReplayError> {
    let all = read_all(ledger)?;
    let refused = ReplayError::Refused;
    match all.iter().find(|(e, _)| e.seq == request_seq) {
        Some((e, _)) if e.kind == kind::REQUEST => {}
        _ => {
            return Err(refused(format!(
                "seq {request_seq} is not a run's request: name a run as `git forum runs` lists it"
            )));
        }
    }
    let run = run_entries(&all, request_seq).map_err(refused)?;
    check_replayable(&run).map_err(refused)?;
    let answers = Answers::read(&run).map_err(refused)?;
    let seats = ReplaySeats::new(&run, answers);
    let clock = ReplayClock::new(&run);
    // The scratch ledger: what came before the run, entry for entry.
    let mut scratch = MemoryStorage::default();
    for (e, body) in all.iter().filter(|(e, _)| e.seq < request_seq) {
        if let Some(b) = body {
            scratch.payloads.insert(
                e.payload_hash.clone(),
                crate::ledger::canonical::Value::from_serde(b),
            );
        }
        scratch.entries.push(e.clone());
    }
    let start = scratch.entries.len() as u64;
    let mut opts = opts.clone();
    opts.runtime_record = run[0].payload.get("runtime").cloned();
    opts.options_record = run[0].payload.get("options").cloned();
    opts.context = context::ReplayContext::read(&run).map(|c| {
        let c: std::sync::Arc<dyn super::ContextProvider> = std::sync::Arc::new(c);
        c
    });
    let text = run[0].payload["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let metered = metering.map(|real| rules::Metered {
        replay: &seats,
        real,
    });
    let env = Env {
        roster,
        seats: match &metered {
            Some(m) => m,
            None => &seats,
        },
        clock: &clock,
        progress: &Silent,
    };
    // A run that stopped on a failed stage is compared by what it wrote before it stopped.
    let _ = super::submit(&mut scratch, &env, &opts, &text);
    let replayed: Vec<_> = read_all(&scratch)?;
    let new = run_entries(&replayed, start).map_err(refused)?;
    Ok(StrictReplay {
        run: request_seq,
        recorded: run.len(),
        recomputed: new.len(),
        answer_sha256: final_answer(&run),
        recomputed_answer_sha256: final_answer(&new),
        divergence: first_divergence(&run, &new),
        unanswered: seats.unanswered(),
        recorded_by: run[0].payload["git_forum"].as_str().map(str::to_string),
        replayed_by: super::VERSION.to_string(),
    })
}
