//! Progress of a run on stderr, one line per engine event: plain lines, the same on a terminal
//! and in a log, so a line can be read (and grepped) as it comes. A `--work` worker's tool
//! calls, the files its change touched and each check's result are shown as they happen.

use crate::surface::run::{Event, Progress};

/// Progress on stderr, one line per event.
pub(super) struct Stderr {
    pub(super) max: Option<u64>,
}

impl Progress for Stderr {
    fn event(&self, e: &Event) {
        let line = match e {
            Event::Planning => "planning…".to_string(),
            Event::Planned { tasks, waves } => format!("plan: {tasks} tasks in {waves} waves"),
            Event::Wave { index, of, tasks } => {
                format!("wave {}/{of}: {}", index + 1, tasks.join(", "))
            }
            Event::TaskStarted { id, agent, model } => {
                format!("  {id} ({agent}) running on {model}")
            }
            Event::TaskFinished { id, ok, model } => {
                format!("  {id} {} ({model})", if *ok { "done" } else { "failed" })
            }
            Event::Validating { id } => format!("  validating {id}"),
            Event::Verdict { id, decision } => format!("  {id}: {decision}"),
            Event::ToolCall { .. }
            | Event::Changed { .. }
            | Event::Checked { .. }
            | Event::Stalled { .. } => match crate::surface::run::work_line(e) {
                Some(line) => format!("  {line}"),
                None => return,
            },
            Event::Escalating { id, to } => format!("  {id}: escalating to {to}"),
            Event::Synthesizing => "synthesizing the answer…".to_string(),
            Event::Calls { spent, .. } => {
                if let Some(m) = self.max {
                    format!("  model calls: {spent}/{m}")
                } else {
                    return;
                }
            }
            Event::Paused { wave } => {
                format!("paused before wave {wave}: waiting for a gate decision")
            }
            Event::Stopped { reason } => format!("stopped: {reason}"),
            Event::Context { task: None } => "reading the request context…".to_string(),
            Event::Context { task: Some(id) } => format!("  {id}: context read"),
            Event::ContextFailed { task, reason } => format!(
                "{}context unavailable, going on without it: {reason}",
                task.as_ref().map_or(String::new(), |t| format!("  {t}: "))
            ),
            Event::Revising => "revising the answer (the delivery floor flagged it)…".to_string(),
            Event::Judging => "judging intent (the intent check flagged the answer)…".to_string(),
            Event::Verifying => "verifying the answer…".to_string(),
            Event::Skipped { step, reason } => format!("skipped the {step}: {reason}"),
        };
        eprintln!("{line}");
    }
}
