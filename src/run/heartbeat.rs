//! A run's heartbeat, pure: what each task in flight did last ([`InFlight`], from the run's
//! progress events) and the body a heartbeat entry carries ([`run_body`]). The coalescer that
//! says when one is due and the stall rule are `crate::observe`'s; the thread that asks it and
//! writes the entries is `observe.rs` beside this file.
//!

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value as JsonValue, json};

use super::Event;
pub(crate) use crate::observe::{Coalescer, KIND, SCHEMA};

/// What one task in flight did last, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Doing {
    last: String,
    at: Duration,
}

/// The tasks of a run in flight, each with what it did last (from the run's progress
/// events), and when the run last made any progress.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct InFlight {
    tasks: BTreeMap<String, Doing>,
}

impl InFlight {
    /// Takes in one progress event seen at `t`.
    pub(crate) fn observe(&mut self, e: &Event, t: Duration) {
        let last = match e {
            Event::TaskStarted { id, model, .. } => Some((id, format!("started on {model}"))),
            Event::TaskFinished { id, .. } | Event::Stalled { id, .. } => {
                self.tasks.remove(id);
                None
            }
            Event::ToolCall { id, .. } | Event::Changed { id, .. } => {
                let line = super::seams::work_line(e).unwrap_or_default();
                Some((
                    id,
                    line.strip_prefix(id.as_str())
                        .unwrap_or(&line)
                        .trim()
                        .into(),
                ))
            }
            Event::Checked {
                id, command, ok, ..
            } if self.tasks.contains_key(id) => {
                let how = if *ok { "passed" } else { "failed" };
                Some((id, format!("check {how}: {command}")))
            }
            Event::Validating { id } => Some((id, "validating".to_string())),
            _ => None,
        };
        if let Some((id, last)) = last {
            self.tasks.insert(id.clone(), Doing { last, at: t });
        }
    }

    /// The tasks in flight as a heartbeat lists them: id, what it did last, seconds since.
    pub(crate) fn rows(&self, now: Duration) -> Vec<JsonValue> {
        self.tasks
            .iter()
            .map(|(id, d)| {
                json!({
                    "id": id,
                    "last": d.last,
                    "seconds_since": seconds(now.saturating_sub(d.at)),
                })
            })
            .collect()
    }
}

/// The watchdog's reason in a stalled task's output (`stalled: no output for 600 s`), or the
/// output's first line when it has none.
pub(crate) fn stall_reason(output: &str) -> String {
    let from = output.find("stalled: ").map_or(output, |i| &output[i..]);
    from.split([';', '\n'])
        .next()
        .unwrap_or("")
        .trim()
        .to_string()
}

/// Seconds with millisecond precision, as a heartbeat body carries them.
pub(crate) fn seconds(d: Duration) -> f64 {
    (d.as_millis() as f64) / 1000.0
}

/// A run's heartbeat body: the run (its request seq), the tasks in flight, the time since its
/// last progress, since any of its workers last printed (`output`, `None`: none has yet; then
/// `null`) and the interval.
pub(crate) fn run_body(
    run: u64,
    c: &Coalescer,
    tasks: &InFlight,
    now: Duration,
    output: Option<Duration>,
) -> JsonValue {
    json!({
        "schema": SCHEMA,
        "of": "run",
        "run": run,
        "interval_seconds": seconds(c.interval()),
        "seconds_since_progress": seconds(c.quiet_for(now)),
        "seconds_since_output": output.map(seconds),
        "tasks": tasks.rows(now),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_tasks_in_flight_say_what_each_did_last() {
        let mut f = InFlight::default();
        let started = Event::TaskStarted {
            id: "T1".into(),
            agent: "backend".into(),
            model: "m".into(),
        };
        f.observe(&started, ms(0));
        f.observe(
            &Event::TaskStarted {
                id: "T2".into(),
                agent: "backend".into(),
                model: "m".into(),
            },
            ms(0),
        );
        f.observe(
            &Event::ToolCall {
                id: "T1".into(),
                verb: "edit".into(),
                target: "src/a.rs".into(),
                ok: true,
            },
            ms(1500),
        );
        f.observe(
            &Event::TaskFinished {
                id: "T2".into(),
                ok: true,
                model: "m".into(),
            },
            ms(1600),
        );
        let rows = f.rows(ms(2000));
        assert_eq!(
            rows,
            vec![json!({"id": "T1", "last": "edit src/a.rs", "seconds_since": 0.5})]
        );
        let mut c = Coalescer::new(ms(1000));
        c.happened(ms(1600));
        let body = run_body(7, &c, &f, ms(2000), Some(ms(250)));
        assert_eq!(body["run"], 7);
        assert_eq!(body["schema"], SCHEMA);
        assert_eq!(body["seconds_since_progress"], 0.4);
        assert_eq!(body["interval_seconds"], 1.0);
        assert_eq!(body["seconds_since_output"], 0.25);
        assert!(run_body(7, &c, &f, ms(2000), None)["seconds_since_output"].is_null());
    }
}
