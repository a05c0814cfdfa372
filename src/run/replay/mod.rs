//! Strict replay: a recorded run's control loop run again through the same engine path as a
//! live run (`submit`), into a scratch ledger in memory that starts as a copy of what came
//! before the run, with every executor's reply and every clock reading answered from the
//! record ([`answers`]), and every decision the engine makes compared with the recorded one
//! ([`compare`]). The record's decisions themselves are never handed to the engine.
//!
//! A run that worked in the repository (`--work`, and a solo run) is answered from the record
//! by a workbench that moves no ref ([`work`]): each task's change commit, each check's exit
//! code, each opening of a worktree that failed (from its task's `result`); its integrations are merged again in the repository, writing only to a scratch object
//! directory ([`Merges`]), and compared by their trees (a run recorded before integrations
//! were witnessed is answered whether each conflicted); the pre-ship gate's (its raw reply), the classifier's,
//! the reviser's and the intent judge's replies come from their entries, a verifier's verdicts
//! from `verification` ([`verifier`]). The engine decides again which checks failed, who
//! climbs the ladder, what the gate's reply comes to, what merges, and what the answer says.
//!
//! The built-in editing worker's tool conversations are answered turn by turn, each tool's
//! outcome from its `tool_result` ([`edit`]); a rejected revision's reply is the text its
//! `revision` entry keeps. A worker's failed call, the editing worker's failed turn among them,
//! is given back from the `failure` its `result` keeps, a reply that was not JSON parsed again
//! from its kept bytes ([`failed`]).
//!
//! What the record cannot answer is refused, naming the seq: a body that was redacted or
//! removed, a failure kept only as text, a rejected revision recorded before its text was
//! kept, and a run whose gates have a deadline recorded before its entries kept the clock
//! readings they were decided at. Context comes from the record's `context` entries, and a
//! run's context budget is applied to it again ([`context`]): of a text the budget cut they
//! hold what it read (the admitted text, the character after the cut, the length); a run
//! recorded before they held the length is refused. Under a run-wide total, the tasks of a
//! wave take from it in the order the record shows ([`turns`]). A
//! resumed run is replayed across its resumes ([`phases`]); a person's decision on a gate is
//! the world's input between them ([`gates`]), and each attempt of an `--attempts` run is
//! answered as one change ([`attempts`]). A run dispatched to workers elsewhere has its
//! dispatcher answered from the record ([`dispatched`]): the workers' results and what the
//! writer read from outside, never the writer's decisions over them. A refusal of a run
//! another git forum recorded names that version ([`with_version`]).

mod answers;
mod attempts;
mod brought;
mod compare;
mod context;
mod dispatched;
mod edit;
mod failed;
mod forwarder;
mod gates;
mod phases;
pub mod rules;
mod screened;
mod turns;
mod verifier;
mod work;

use serde::Serialize;
use serde_json::Value as J;

use crate::ledger::{MemoryStorage, Storage, StorageError, kind};
use crate::roster::Roster;

use super::{Env, Options, Silent};
use answers::{Answers, ReplayClock, ReplaySeats};
pub use brought::WorkerCommit;
pub(crate) use brought::checked as check_worker_commit;
pub use compare::{Divergence, first_divergence};
pub use work::Merges;

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
    /// What the replay answered from the record rather than decide again, one line each:
    /// a worker's commit this repository lacks, a result recorded before it named its commit.
    pub from_record: Vec<String>,
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
const REPLAYABLE: [&str; 39] = [
    kind::REQUEST,
    kind::CONTEXT,
    kind::CONTEXT_BUDGET,
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
    kind::CHANGE,
    kind::CHECK,
    kind::SHIP,
    kind::CONFLICT,
    kind::INTEGRATED,
    kind::CLAIM_CHECK,
    kind::ROUTE,
    kind::CLASSIFICATION,
    kind::VERIFICATION,
    kind::REVISION,
    kind::INTENT_JUDGMENT,
    kind::RESUME,
    kind::HALTED,
    kind::INTERRUPTED,
    kind::GATE_PENDING,
    kind::GATE_APPROVED,
    kind::GATE_EDITED,
    kind::GATE_REJECTED,
    kind::GATE_STOPPED,
    kind::GATE_EXPIRED,
    kind::ATTEMPT_CHOICE,
    kind::TOOL_CALL,
    kind::TOOL_RESULT,
    kind::TASK_DISPATCHED,
    kind::DUPLICATE_RESULT,
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
    gates::check(run)?;
    dispatched::check(run)?;
    if let Some(e) = run.iter().find(|e| !REPLAYABLE.contains(&e.kind.as_str())) {
        return Err(format!(
            "seq {} of run {} is a {} entry, whose inputs the record does not hold for a strict replay: it refuses rather than invent them",
            e.seq, request.seq, e.kind
        ));
    }
    Ok(())
}

/// `msg`, a refusal of the run whose request body is `request` (at `seq`), with the git forum
/// version that recorded the run when it is not this one: what made the run is what a reader
/// needs to replay it (or to know why it cannot be).
pub fn with_version(seq: u64, request: &J, msg: String) -> String {
    match request["git_forum"].as_str() {
        Some(v) if v == super::VERSION => msg,
        Some(v) => format!(
            "{msg} (run {seq} was recorded by git forum {v}; this is git forum {})",
            super::VERSION
        ),
        None => format!(
            "{msg} (run {seq} does not record which git forum made it: it was recorded before runs did, or started without a recorded runtime; this is git forum {})",
            super::VERSION
        ),
    }
}

/// The usage a recorded body carries, as the executor reported it.
fn usage(body: &J) -> Option<crate::exec::Usage> {
    let u = body.get("usage")?;
    Some(crate::exec::Usage {
        input_tokens: u["prompt_tokens"].as_u64()?,
        output_tokens: u["completion_tokens"].as_u64()?,
        estimated: u["estimated"].as_bool().unwrap_or(false),
        truncated: u["truncated"].as_bool().unwrap_or(false),
        over_reservation: None,
    })
}

fn sha256(text: &str) -> String {
    crate::ledger::hash::sha256_hex(text.as_bytes())
}

/// The final answer of a run's entries: its last synthesizer result.
fn final_answer(run: &[Recorded]) -> Option<String> {
    run.iter()
        .rev()
        .find(|e| {
            e.kind == kind::RESULT
                && (e.actor == "synthesizer" || e.payload["written_from"] == "record")
        })
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
    strict_metered(ledger, request_seq, roster, opts, None, None)
}

/// [`strict`], with each call reserved as the executor of `metering` (the seats built from
/// the run's recorded runtime, never called) would reserve it: see [`rules::Metered`]; and a
/// `--work` run's changes merged again in `merges` (a run that recorded its integrations is
/// refused without it).
pub fn strict_metered(
    ledger: &dyn Storage,
    request_seq: u64,
    roster: &Roster,
    opts: &Options,
    metering: Option<&dyn crate::exec::Seats>,
    merges: Option<std::sync::Arc<dyn Merges>>,
) -> Result<StrictReplay, ReplayError> {
    let all = read_all(ledger)?;
    let request = match all.iter().find(|(e, _)| e.seq == request_seq) {
        Some((e, body)) if e.kind == kind::REQUEST => body.clone().unwrap_or_default(),
        _ => {
            return Err(ReplayError::Refused(format!(
                "seq {request_seq} is not a run's request: name a run as `git forum runs` lists it"
            )));
        }
    };
    replay_run(&all, request_seq, roster, opts, metering, merges).map_err(|e| match e {
        ReplayError::Refused(m) => ReplayError::Refused(with_version(request_seq, &request, m)),
        other => other,
    })
}

/// [`strict_metered`] of a run whose request is at `request_seq` in `all`.
fn replay_run(
    all: &[(crate::ledger::Entry, Option<J>)],
    request_seq: u64,
    roster: &Roster,
    opts: &Options,
    metering: Option<&dyn crate::exec::Seats>,
    merges: Option<std::sync::Arc<dyn Merges>>,
) -> Result<StrictReplay, ReplayError> {
    let refused = ReplayError::Refused;
    let run = run_entries(all, request_seq).map_err(refused)?;
    check_replayable(&run).map_err(refused)?;
    edit::check_ceilings(&run, opts).map_err(refused)?;
    context::check(&run, opts.context_budget.is_some()).map_err(refused)?;
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
    opts.solo = run[0].payload["solo"] == true;
    opts.gates = gates::policy(&run[0]);
    // A run that recorded its rules says whether it asked the reviser and the intent judge
    // (`opts` carries that); an older run asked them when its record holds what they said
    // (a flagged answer is otherwise left as it is).
    opts.revise |= run.iter().any(|e| e.kind == kind::REVISION);
    opts.judge_intent |= run.iter().any(|e| e.kind == kind::INTENT_JUDGMENT);
    let mut unanswered = Vec::new();
    let mut from_record = Vec::new();
    for phase in phases::phases(&run) {
        let world = World {
            start,
            roster,
            metering,
            merges: merges.as_ref(),
        };
        let (asked, answered) = replay_phase(&mut scratch, &run, &phase, world, &opts)?;
        unanswered.extend(asked);
        for line in answered {
            if !from_record.contains(&line) {
                from_record.push(line);
            }
        }
        if !phase.stopped.is_empty() {
            let so_far = run_entries(&read_all(&scratch)?, start).map_err(refused)?;
            phases::copy_stop(&mut scratch, &run, &so_far, phase.stopped)?;
        }
    }
    let replayed: Vec<_> = read_all(&scratch)?;
    let new = run_entries(&replayed, start).map_err(refused)?;
    Ok(StrictReplay {
        run: request_seq,
        recorded: run.len(),
        recomputed: new.len(),
        answer_sha256: final_answer(&run),
        recomputed_answer_sha256: final_answer(&new),
        divergence: first_divergence(&run, &new),
        unanswered,
        from_record,
        recorded_by: run[0].payload["git_forum"].as_str().map(str::to_string),
        replayed_by: super::VERSION.to_string(),
    })
}

/// What a part of a run is replayed in: the run's request seq in the scratch ledger, its
/// roster, the executors that meter its calls, and the repository its changes merge in.
struct World<'a> {
    start: u64,
    roster: &'a Roster,
    metering: Option<&'a dyn crate::exec::Seats>,
    merges: Option<&'a std::sync::Arc<dyn Merges>>,
}

/// Replays one part of the run into `scratch` (the run's request at `start`): the first
/// through `submit`, a resume through `resume`, each with the replies, clock readings,
/// context and repository answers of that part alone, and, where the record says the part
/// was stopped from outside, no more entries than the record holds for it. Returns the calls
/// the part made that the record had no answer for (before where it was stopped), and what it
/// answered from the record rather than decide again.
fn replay_phase(
    scratch: &mut MemoryStorage,
    run: &[Recorded],
    phase: &phases::Phase<'_>,
    world: World<'_>,
    opts: &Options,
) -> Result<(Vec<String>, Vec<String>), ReplayError> {
    let refused = ReplayError::Refused;
    let view = phases::view(run, phase);
    let seats = ReplaySeats::new(run, Answers::read(&view).map_err(refused)?);
    let clock = ReplayClock::new(phase.written);
    let mut opts = opts.clone();
    let unkept = phase.written.first().filter(|_| phase.resumed);
    let unkept = unkept.and_then(|resume| rules::resumed_under(&mut opts, resume));
    opts.context = context::ReplayContext::read(phase.written).map(|c| {
        let c: std::sync::Arc<dyn super::ContextProvider> = std::sync::Arc::new(c);
        c
    });
    let total = opts
        .context_budget
        .is_some_and(|b| b.max_total_tokens.is_some());
    opts.context_turns = turns::ReplayTurns::read(phase.written, total).map(|t| {
        let t: std::sync::Arc<dyn super::ContextTurns> = std::sync::Arc::new(t);
        t
    });
    let World {
        start,
        roster,
        metering,
        merges,
    } = world;
    let from = phase.written.first().map_or(0, |e| e.seq);
    let written = phases::Written::default();
    let part = (written.clone(), phase.written.len());
    let work = work::options(run, &view, from, merges, part).map_err(refused)?;
    opts.work = work.as_ref().map(|(o, _)| o.clone());
    opts.verifier = verifier::ReplayVerifier::read(phase.written).map(|v| {
        let v: std::sync::Arc<dyn super::Verifier> = std::sync::Arc::new(v);
        v
    });
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
    let stopped = !phase.stopped.is_empty() || !phase.last;
    let mut ledger = phases::Bounded {
        inner: scratch,
        left: stopped.then_some(phase.written.len()),
        written,
    };
    // A run that stopped on a failed stage is compared by what it wrote before it stopped.
    if phase.resumed {
        let _ = super::resume(&mut ledger, &env, &opts, Some(start));
    } else {
        let text = run[0].payload["text"].as_str().unwrap_or_default();
        let _ = super::submit(&mut ledger, &env, &opts, text);
    }
    let answered = unkept
        .into_iter()
        .chain(work.iter().flat_map(|(_, b)| b.answered_from_record()))
        .collect();
    // Calls made after the record's stop have no answer by design.
    if stopped {
        return Ok((Vec::new(), answered));
    }
    let mut asked = seats.unanswered();
    asked.extend(work.iter().flat_map(|(_, b)| b.unanswered()));
    Ok((asked, answered))
}
