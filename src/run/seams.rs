//! The seams a run talks to the world through: the clock, the progress sink and its events,
//! the context provider and the verifier (traits and the values they hand back). The
//! process-spawning implementations live in `adapters`.

use std::sync::Mutex;
use std::time::Instant;

use crate::ledger::Storage;
use crate::ledger::canonical::Value;

use super::lock;

/// Timestamps and elapsed seconds.
pub trait Clock: Send + Sync {
    /// Seconds since 1970, for entry timestamps.
    fn now(&self) -> f64;
    /// Seconds since the run started, for `--max-seconds` (monotonic).
    fn elapsed(&self) -> f64;
    /// Seconds since 1970, read for a decision the run makes from the time (`what` it is
    /// for), as opposed to an entry's timestamp. The run records each such reading in the
    /// entry it decides, so a strict replay answers it from there; a live clock reads `now`.
    fn reading(&self, what: Reading) -> f64 {
        let _ = what;
        self.now()
    }
}

/// What a clock reading the run decides from is for ([`Clock::reading`]); each is kept as
/// `read_at` in the entry named here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// Raising the gate of a wave (0-based) with a deadline: its `deadline` is counted from
    /// this reading (`gate_pending`).
    GateRaised(usize),
    /// Asking whether the pending gate of a wave (0-based) has passed its deadline
    /// (`gate_expired`, when it had).
    GateChecked(usize),
    /// A resume asking whether the run's first held gate still waits (`resume`, in a run whose
    /// gates have a deadline).
    Resume,
}

/// The system clock.
pub struct SystemClock {
    start: Instant,
}

impl SystemClock {
    /// A clock started now.
    pub(crate) fn new() -> SystemClock {
        SystemClock {
            start: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> SystemClock {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> f64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    }

    fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }
}

/// A clock for reproducible runs: every timestamp read advances by `step` from `start`;
/// elapsed time is whatever the test sets.
pub struct StepClock {
    next: Mutex<f64>,
    step: f64,
    elapsed: Mutex<f64>,
}

impl StepClock {
    /// A clock whose first timestamp is `start` and each next one `step` later.
    pub fn new(start: f64, step: f64) -> StepClock {
        StepClock {
            next: Mutex::new(start),
            step,
            elapsed: Mutex::new(0.0),
        }
    }
}

impl Clock for StepClock {
    fn now(&self) -> f64 {
        let mut n = lock(&self.next);
        let t = *n;
        *n += self.step;
        t
    }

    fn elapsed(&self) -> f64 {
        *lock(&self.elapsed)
    }
}

/// What a person watching is told. Sent from several threads.
#[derive(Debug, Clone)]
pub enum Event {
    /// The planner is being asked.
    Planning,
    /// A plan was compiled.
    Planned {
        /// How many tasks.
        tasks: usize,
        /// How many waves.
        waves: usize,
    },
    /// A wave starts.
    Wave {
        /// 0-based.
        index: usize,
        /// How many waves there are.
        of: usize,
        /// Its task ids.
        tasks: Vec<String>,
    },
    /// A task was handed to an executor.
    TaskStarted {
        /// The task id.
        id: String,
        /// Its roster lane.
        agent: String,
        /// The executor's model.
        model: String,
    },
    /// A task's result is in.
    TaskFinished {
        /// The task id.
        id: String,
        /// Whether the executor answered.
        ok: bool,
        /// The model that answered (or was asked).
        model: String,
    },
    /// A result is being validated.
    Validating {
        /// The task id.
        id: String,
    },
    /// A validator ruled.
    Verdict {
        /// The task id.
        id: String,
        /// Which gate decided and how: `validator: pass` (the task validator: `pass`,
        /// `block`, `escalate`, `fail` or `undetermined`) or `pre-ship gate: merge` (the
        /// pre-ship gate of a `--work` change: `merge`, `block`, `escalate`, `undetermined`).
        decision: String,
    },
    /// A worker's tool call was carried out (or refused): what it did and on what.
    ToolCall {
        /// The task id.
        id: String,
        /// What it did: `edit`, `write`, `read`, `list`, `search`, `run` (else the tool's name).
        verb: String,
        /// Its main argument: the path or paths, the command, the pattern.
        target: String,
        /// Whether it was carried out (`false`: it failed or was refused).
        ok: bool,
    },
    /// A task's change was committed (each file with its lines added and removed), or the
    /// worker changed nothing (`files` empty).
    Changed {
        /// The task id.
        id: String,
        /// The files: path, lines added, lines removed.
        files: Vec<(String, u64, u64)>,
    },
    /// A check ran on a task's change (`run`: on the run branch) and how it ended.
    Checked {
        /// The task id, or `run`.
        id: String,
        /// The command.
        command: String,
        /// Whether it passed.
        ok: bool,
        /// How long it took.
        seconds: f64,
    },
    /// A worker quiet for too long was ended by the watchdog, with its whole process tree;
    /// its task fails with the reason (and retries or escalates as any failure).
    Stalled {
        /// The task id.
        id: String,
        /// Why: `stalled: no output for 600 s`.
        reason: String,
    },
    /// A failed task climbs to a stronger executor.
    Escalating {
        /// The task id.
        id: String,
        /// The stronger executor's model.
        to: String,
    },
    /// The answer is being synthesized.
    Synthesizing,
    /// A model call started.
    Calls {
        /// Calls started so far.
        spent: u64,
        /// The budget, if any.
        max: Option<u64>,
    },
    /// The run waits for a gate decision.
    Paused {
        /// The gated wave (0-based).
        wave: usize,
    },
    /// The run stopped (budget, or a failed stage).
    Stopped {
        /// Why.
        reason: String,
    },
    /// Context is being read: the request's (`task: None`) or one task's.
    Context {
        /// The task, or `None` for the request.
        task: Option<String>,
    },
    /// A context provider failed; the run goes on without that context.
    ContextFailed {
        /// The task, or `None` for the request.
        task: Option<String>,
        /// What failed.
        reason: String,
    },
    /// The reviser is tightening a flagged answer.
    Revising,
    /// The intent judge is ruling on a flagged answer.
    Judging,
    /// The verifier is checking the delivered answer.
    Verifying,
    /// An opted-in step did not run (`step`: `reviser`, `intent judge`).
    Skipped {
        /// Which step.
        step: String,
        /// Why.
        reason: String,
    },
}

/// The files of a change a progress line names before it says how many more.
const LINE_FILES: usize = 5;

/// The line a person watching is shown for the work events (a worker's tool call, its
/// change's files, a check's result), the same on every transport; `None` for other events.
/// `T1 edit src/add.py`, `T1 run python -m pytest -q (failed)`, `T1 changed calc.py (+1 -1)`,
/// `T1 check passed: python -m pytest -q (0.4s)`, `run branch check failed: make test (2.0s)`,
/// `T1 ended by the watchdog: stalled: no output for 600 s`.
pub fn work_line(e: &Event) -> Option<String> {
    Some(match e {
        Event::ToolCall {
            id,
            verb,
            target,
            ok,
        } => {
            let mut line = format!("{id} {verb}");
            if !target.is_empty() {
                line.push(' ');
                line.push_str(target);
            }
            if !ok {
                line.push_str(" (failed)");
            }
            line
        }
        Event::Changed { id, files } if files.is_empty() => format!("{id} changed nothing"),
        Event::Changed { id, files } => {
            let mut shown: Vec<String> = files
                .iter()
                .take(LINE_FILES)
                .map(|(p, a, r)| format!("{p} (+{a} -{r})"))
                .collect();
            if files.len() > LINE_FILES {
                shown.push(format!("and {} more", files.len() - LINE_FILES));
            }
            format!("{id} changed {}", shown.join(", "))
        }
        Event::Checked {
            id,
            command,
            ok,
            seconds,
        } => {
            let who = if id == "run" { "run branch" } else { id };
            let how = if *ok { "passed" } else { "failed" };
            format!("{who} check {how}: {command} ({seconds:.1}s)")
        }
        Event::Stalled { id, reason } => format!("{id} ended by the watchdog: {reason}"),
        _ => return None,
    })
}

/// Where [`Event`]s go.
pub trait Progress: Send + Sync {
    /// Receives one event (from any thread).
    fn event(&self, event: &Event);
}

/// Says nothing.
pub struct Silent;

impl Progress for Silent {
    fn event(&self, _: &Event) {}
}

/// Why a context provider gave no context. The run witnesses it and goes on without.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextFailure {
    /// A stable code: `spawn`, `timeout`, `exit`, `not_utf8`, `panic`, or a provider's own.
    pub(crate) code: String,
    /// What happened, for people.
    pub(crate) message: String,
}

/// Where context comes from: once for the request, before planning, and (optionally) fresh
/// for each task before it runs. A panic in a provider is caught and witnessed as a failure.
pub trait ContextProvider: Send + Sync {
    /// Context for the whole request. `ledger` is the run's ledger as it stands: the request
    /// and its route frame are already witnessed. An empty text means no context.
    fn request_context(
        &self,
        request: &str,
        ledger: &dyn Storage,
    ) -> Result<String, ContextFailure>;
    /// Context for one task (by id and its plan instruction), or `None` when this provider
    /// has nothing per task.
    fn task_context(
        &self,
        task_id: &str,
        instruction: &str,
    ) -> Option<Result<String, ContextFailure>>;
    /// One line for people.
    fn describe(&self) -> String;
    /// How many bytes the text this provider last handed for `task` (`None`: the request) had,
    /// when what it handed is only the start of that text: a strict replay's provider holds
    /// no more of a text the context budget cut than the budget read. `None` (every live
    /// provider): what it handed is the whole text.
    fn seen_bytes(&self, _task: Option<&str>) -> Option<u64> {
        None
    }
}

/// Which of a task's takes from the context budget's run-wide total: the upstream outputs
/// flowing into it (one take for all of them), or its own context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    /// The outputs of the tasks it builds on.
    Upstream,
    /// The context fetched for it.
    Task,
}

/// The order in which the tasks of a wave take from the context budget's run-wide total.
/// A live run has none: its tasks take in whatever order they reach the budget, and each
/// take is witnessed (its `context_budget` entries) before the next begins, so the record's
/// seq order is the order they took in. A strict replay hands the total out in that order.
pub(crate) trait ContextTurns: Send + Sync {
    /// A wave begins, its tasks taken by `threads` threads at once.
    fn wave(&self, threads: usize);
    /// One of the wave's threads has no task left to take.
    fn thread_ended(&self);
    /// Task `task` enters (before any take) or leaves (however it ends) the wave.
    fn task(&self, task: &str, entered: bool);
    /// Blocks until `task` may make its `take`.
    fn wait(&self, task: &str, take: Take);
    /// `task` made its `take` and witnessed what it took.
    fn done(&self, task: &str, take: Take);
}

/// What a verifier concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifierConclusion {
    /// The answer holds (`ok: true`).
    Verified,
    /// The answer is wrong (`ok: false`).
    Refuted,
    /// The verifier could not decide (`ok: null`): it erred, hung, crashed or answered
    /// something unreadable.
    Undecided,
}

/// A verifier's verdict on the delivered answer, witnessed as `verification {ok, detail,
/// source}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// Verified, refuted or undecided.
    pub outcome: VerifierConclusion,
    /// Why, for people.
    pub detail: String,
    /// Which verifier.
    pub source: String,
}

impl Verification {
    /// The `verification` payload: `{"ok": true|false|null, "detail", "source"}`.
    pub(crate) fn payload(&self) -> Value {
        let ok = match self.outcome {
            VerifierConclusion::Verified => Value::Bool(true),
            VerifierConclusion::Refuted => Value::Bool(false),
            VerifierConclusion::Undecided => Value::Null,
        };
        Value::object([
            ("ok".to_string(), ok),
            ("detail".to_string(), Value::str(&self.detail)),
            ("source".to_string(), Value::str(&self.source)),
        ])
    }
}

/// Checks a delivered answer after the deterministic floors. A verifier never sinks a run:
/// whatever it returns is witnessed, and a panic is caught and witnessed as
/// [`VerifierConclusion::Undecided`].
pub trait Verifier: Send + Sync {
    /// Checks `answer` to `request`.
    fn verify(&self, request: &str, answer: &str) -> Verification;
    /// Names the verifier (the `source` of a verdict it could not give).
    fn source(&self) -> String;
}
