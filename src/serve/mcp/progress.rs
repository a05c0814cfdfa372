//! `notifications/progress` for a tool call that asked for it with `_meta.progressToken`: each
//! event of its run becomes one notification with a short message and a count that only grows.

use std::sync::{Arc, Mutex};

use serde_json::{Value as J, json};

use super::out::Out;
use crate::serve::dispatch::lock;
use crate::surface::run::{Event, Interrupt, Progress};

/// Sends a run's events as progress under one token, until the call is cancelled.
pub(super) struct Notifier<'o, 'w> {
    token: J,
    out: &'o Out<'w>,
    interrupt: Arc<Interrupt>,
    /// Notifications sent so far; held while one is sent, so the counts go out in order.
    sent: Mutex<u64>,
}

impl<'o, 'w> Notifier<'o, 'w> {
    pub(super) fn new(token: J, out: &'o Out<'w>, interrupt: Arc<Interrupt>) -> Notifier<'o, 'w> {
        Notifier {
            token,
            out,
            interrupt,
            sent: Mutex::new(0),
        }
    }
}

impl Progress for Notifier<'_, '_> {
    fn event(&self, event: &Event) {
        let Some(text) = message(event) else {
            return;
        };
        // A cancelled call is over for the client: nothing more is said about it.
        if self.interrupt.signal().is_some() {
            return;
        }
        let mut sent = lock(&self.sent);
        *sent += 1;
        self.out.send(&json!({
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": self.token, "progress": *sent, "message": text},
        }));
    }
}

/// What a client is told of `event`; `None` for one not worth a notification.
fn message(event: &Event) -> Option<String> {
    Some(match event {
        Event::Planning => "planning".to_string(),
        Event::Planned { tasks, waves } => format!("planned {tasks} tasks in {waves} waves"),
        Event::Wave { index, of, tasks } => {
            format!("wave {} of {of}: {}", index + 1, tasks.join(", "))
        }
        Event::TaskStarted { id, agent, model } => format!("{id} started ({agent}, {model})"),
        Event::TaskFinished { id, ok, .. } => {
            format!("{id} {}", if *ok { "finished" } else { "failed" })
        }
        Event::Validating { id } => format!("validating {id}"),
        Event::Verdict { id, decision } => format!("{id}: {decision}"),
        Event::ToolCall { .. }
        | Event::Changed { .. }
        | Event::Checked { .. }
        | Event::Stalled { .. } => crate::surface::run::work_line(event)?,
        Event::Escalating { id, to } => format!("{id}: escalating to {to}"),
        Event::Synthesizing => "writing the answer".to_string(),
        Event::Calls { spent, max } => match max {
            Some(m) => format!("model calls: {spent} of {m}"),
            None => format!("model calls: {spent}"),
        },
        Event::Paused { wave } => format!("paused before wave {wave} for a gate decision"),
        Event::Stopped { reason } => format!("stopped: {reason}"),
        Event::Context { task: None } => "reading the request's context".to_string(),
        Event::Context { task: Some(id) } => format!("{id}: context read"),
        Event::ContextFailed { task, reason } => match task {
            Some(t) => format!("{t}: no context ({reason})"),
            None => format!("no request context ({reason})"),
        },
        Event::Revising => "revising the answer".to_string(),
        Event::Judging => "judging the answer's intent".to_string(),
        Event::Verifying => "verifying the answer".to_string(),
        Event::Skipped { step, reason } => format!("skipped the {step}: {reason}"),
    })
}
