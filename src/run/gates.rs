//! Human approval before waves: the gate policy a run is submitted with (and records in its
//! request), and the step that holds a gated wave to what its gate says.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::engine::Run;
use super::{Reading, RunError, lock};
use crate::gate;
use crate::ledger::kind;

/// Human approval before waves.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GatePolicy {
    /// Waves (0-based) that wait for a decision before they run.
    pub waves: BTreeSet<usize>,
    /// The question shown to the approver.
    pub(crate) question: Option<String>,
    /// Seconds a pending gate waits before `on_expiry` applies (checked on resume).
    pub deadline_seconds: Option<f64>,
    /// What an expired gate becomes: `approve` or `reject` (default).
    pub on_expiry: Option<String>,
}

impl GatePolicy {
    /// What the run's `request` entry records of this policy (its `gates` field), so every
    /// later resume holds the same gates: `{waves, question?, deadline_seconds?, on_expiry?}`.
    /// `None` when no wave is gated (the request is then exactly Forum's `{text}`).
    pub(crate) fn record(&self) -> Option<Value> {
        if self.waves.is_empty() {
            return None;
        }
        let mut g = json!({ "waves": self.waves.iter().collect::<Vec<_>>() });
        if let Some(q) = &self.question {
            g["question"] = json!(q);
        }
        if let Some(secs) = self.deadline_seconds {
            g["deadline_seconds"] = json!(secs);
            g["on_expiry"] = json!(self.on_expiry.clone().unwrap_or_else(|| "reject".into()));
        }
        Some(g)
    }

    /// Reads back what [`GatePolicy::record`] wrote (an absent or unreadable record gates no
    /// wave).
    pub(crate) fn from_record(g: Option<&Value>) -> GatePolicy {
        let Some(g) = g else {
            return GatePolicy::default();
        };
        GatePolicy {
            waves: g
                .get("waves")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_u64)
                        .map(|w| w as usize)
                        .collect()
                })
                .unwrap_or_default(),
            question: g
                .get("question")
                .and_then(Value::as_str)
                .map(str::to_string),
            deadline_seconds: g.get("deadline_seconds").and_then(Value::as_f64),
            on_expiry: g
                .get("on_expiry")
                .and_then(Value::as_str)
                .map(str::to_string),
        }
    }
}

pub(super) enum GateOutcome {
    /// Run the wave, with edited instructions by task id.
    Run(BTreeMap<String, String>),
    Pause,
    Stop,
}

/// Holds a gated wave to what its gate says ([`gate::admission`], the rule every resume
/// shares): raises the gate and pauses when none was raised, pauses while it is undecided,
/// applies the expiry decision once its deadline has passed (witnessed as `gate_expired`),
/// stops the run when it was rejected (`gate_stopped`), and runs the wave, with the latest
/// edits, when it was approved or edited.
pub(super) fn gate(
    run: &Run<'_, '_>,
    gates: &GatePolicy,
    run_seq: u64,
    wave: usize,
    tasks: &[String],
) -> Result<GateOutcome, RunError> {
    let entries = run.entries()?;
    let mut mine = gate::gate_entries(&entries, |e| run.payload_of(e).ok().flatten())
        .remove(&run_seq)
        .and_then(|mut by_wave| by_wave.remove(&(wave as u64)))
        .unwrap_or_default();
    // One reading of the clock decides this gate: the deadline of a gate raised now is
    // counted from it, and an expiry is decided at it; each entry that follows from it keeps
    // it (`read_at`), so a strict replay decides from the same reading.
    let now = run.env.clock.reading(if mine.is_empty() {
        Reading::GateRaised(wave)
    } else {
        Reading::GateChecked(wave)
    });
    let mut admission = gate::admission(&mine, tasks, now);
    if let gate::Admission::Expire {
        pending_seq,
        decision,
        deadline,
        on_expiry,
    } = &admission
    {
        let e = run.put(
            "dispatch",
            kind::GATE_EXPIRED,
            Some(*pending_seq),
            json!({"run_seq": run_seq, "wave": wave, "decision": decision, "on_expiry": on_expiry, "deadline": deadline, "read_at": now}),
        )?;
        let p = run.payload_of(&e)?.unwrap_or(Value::Null);
        mine.push((e, p));
        admission = gate::admission(&mine, tasks, now);
    }
    match admission {
        gate::Admission::Raise => {
            let mut payload = json!({
                "run_seq": run_seq,
                "wave": wave,
                "tasks": tasks,
                "question": gates.question.clone().unwrap_or_else(|| format!("Run wave {wave} ({})?", tasks.join(", "))),
                "requested_by": "dispatch",
            });
            if let Some(secs) = gates.deadline_seconds {
                payload["on_expiry"] =
                    json!(gates.on_expiry.clone().unwrap_or_else(|| "reject".into()));
                payload["deadline"] = json!(now + secs);
                payload["read_at"] = json!(now);
            }
            if let Some(w) = run.work() {
                // A --work run's approver sees what the earlier waves changed.
                payload["changes"] = w.changes_so_far();
                payload["rules"] = run.rules();
            }
            run.put("dispatch", kind::GATE_PENDING, Some(run_seq), payload)?;
            lock(&run.store).sync()?;
            Ok(GateOutcome::Pause)
        }
        // An expiry that still resolves to pending cannot happen; pausing is the safe side.
        gate::Admission::Wait { .. } | gate::Admission::Expire { .. } => Ok(GateOutcome::Pause),
        gate::Admission::Stop { parent } => {
            run.put(
                "dispatch",
                kind::GATE_STOPPED,
                Some(parent.unwrap_or(run_seq)),
                json!({"run_seq": run_seq, "wave": wave, "reason": "gate rejected"}),
            )?;
            lock(&run.store).sync()?;
            Ok(GateOutcome::Stop)
        }
        gate::Admission::Run { edits } => Ok(GateOutcome::Run(edits)),
    }
}
