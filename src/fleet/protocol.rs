//! The messages a dispatched run and its workers exchange, and the names they meet under:
//! pure (no I/O), every field bounded and checked, so a message from the stream is untrusted
//! input until [`TaskMessage::parse`] or [`ResultMessage::parse`] accepted it.

use serde::{Deserialize, Serialize};

/// The schema a task message carries.
pub const TASK_SCHEMA: &str = "git-forum.dispatch.task/1";
/// The schema a result message carries.
pub const RESULT_SCHEMA: &str = "git-forum.dispatch.result/1";

/// The most bytes one message may hold (a task's instruction with its context, or a result
/// with its report): well under the server's default 1 MiB payload limit.
pub const MAX_MESSAGE_BYTES: usize = 768 * 1024;
/// The most bytes of a task's instruction (with its context) or a worker's report.
pub const MAX_TEXT_BYTES: usize = 256 * 1024;
/// The most bytes of a short field (a name, a command, a model, an error line).
pub const MAX_FIELD_BYTES: usize = 4096;
/// The most items of a list (checks, allowed commands, tool calls, model calls).
pub const MAX_ITEMS: usize = 512;

/// What a worker needs to do one task of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskMessage {
    /// [`TASK_SCHEMA`].
    pub schema: String,
    /// The ledger the run is recorded in.
    pub ledger: String,
    /// The run's request seq.
    pub run: u64,
    /// The task's id in the plan.
    pub task: String,
    /// The name the task goes by in refs (its id, or a hash when the id is not safe there).
    pub task_ref: String,
    /// The seq of the writer's `task_dispatched` entry for this attempt.
    pub task_seq: u64,
    /// The lane the plan routed the task to.
    pub agent: String,
    /// The attempt id the writer issued for this dispatch.
    pub attempt: String,
    /// The commit the task starts from.
    pub base: String,
    /// The ref on the remote that holds `base`.
    pub base_ref: String,
    /// The instruction, with the task's context and its upstreams' results.
    pub instruction: String,
    /// Check commands the change must pass.
    pub checks: Vec<String>,
    /// Commands the editing worker may run besides the checks.
    pub allowed_commands: Vec<String>,
    /// The seat the task asks for (`None`: the worker's own default).
    pub seat: Option<String>,
    /// The most tool calls the task may make.
    pub max_tool_calls: u32,
    /// Seconds each check may run.
    pub check_seconds: u64,
}

/// One tool call a worker reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    pub verb: String,
    pub target: String,
    pub ok: bool,
}

/// One model call a worker reports, with its usage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelCall {
    pub model: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// One check a worker says it ran on its change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckClaim {
    pub command: String,
    pub ok: bool,
    pub exit: Option<i32>,
    pub seconds: f64,
}

/// What a worker sends back for one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultMessage {
    /// [`RESULT_SCHEMA`].
    pub schema: String,
    pub ledger: String,
    pub run: u64,
    pub task: String,
    /// The attempt id of the task message this answers.
    pub attempt: String,
    /// The worker's name (host and process, or what `--name` gave).
    pub worker: String,
    /// Whether the worker's agent answered.
    pub ok: bool,
    /// The agent's report (or the error line when it failed).
    pub output: String,
    /// The model (or program) that did the work.
    pub model: String,
    /// The change commit pushed to the result ref (`None`: nothing changed or it failed).
    pub commit: Option<String>,
    /// The error code of a failure.
    pub error: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub model_calls: Vec<ModelCall>,
    pub checks: Vec<CheckClaim>,
    /// What confined the worker's agent, as the worker says (`bwrap`, `bwrap+net`, `unconfined: REASON`).
    pub confinement: String,
    /// `commit` is the one the attempt's results ref already held when this worker came to
    /// push (another delivery of the same attempt pushed first, after a lease ran out): the
    /// worker's own change was not pushed, and its report and checks are of that change.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub found_in_ref: bool,
}

/// The schema a halt message carries.
pub const HALT_SCHEMA: &str = "git-forum.dispatch.halt/1";

/// What a halted run tells its workers (outside the stream: only the workers listening then
/// hear it; the run's tasks not yet taken are removed from the stream with it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HaltMessage {
    /// [`HALT_SCHEMA`].
    pub schema: String,
    pub ledger: String,
    /// The run halted (its request seq).
    pub run: u64,
    /// Who halted it.
    pub by: String,
    /// Why.
    pub reason: String,
    /// The halt is over: the run was resumed, and the tasks it sends from now on are to be
    /// done (a worker that heard the halt forgets it). Left out when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lifted: bool,
}

impl HaltMessage {
    /// A halt message from the server, decoded and checked.
    pub fn parse(bytes: &[u8]) -> Result<HaltMessage, String> {
        const W: &str = "halt";
        if bytes.len() > 4 * MAX_FIELD_BYTES {
            return Err(format!(
                "{W} message: {} bytes, more than a halt holds",
                bytes.len()
            ));
        }
        let m: HaltMessage = decode(W, bytes)?;
        if m.schema != HALT_SCHEMA {
            return Err(bad(W, "schema", &format!("must be {HALT_SCHEMA:?}")));
        }
        nonempty(W, "ledger", &m.ledger)?;
        short(W, "by", &m.by)?;
        short(W, "reason", &m.reason)?;
        Ok(m)
    }

    /// The message's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// A field that is too long, empty where it may not be, or of a shape it may not have: the
/// one line names it.
fn bad(what: &str, field: &str, why: &str) -> String {
    format!("{what} message: field `{field}` {why}")
}

fn short(what: &str, field: &str, v: &str) -> Result<(), String> {
    bounded(what, field, v, MAX_FIELD_BYTES)
}

fn bounded(what: &str, field: &str, v: &str, max: usize) -> Result<(), String> {
    if v.len() > max {
        return Err(bad(what, field, &format!("is longer than {max} bytes")));
    }
    Ok(())
}

fn nonempty(what: &str, field: &str, v: &str) -> Result<(), String> {
    if v.trim().is_empty() {
        return Err(bad(what, field, "is empty"));
    }
    short(what, field, v)
}

/// A name that goes into a ref or a subject: 1 to 128 of `A-Za-z0-9._-`, not starting with
/// `.` or `-`, no `..`.
fn ref_safe(what: &str, field: &str, v: &str) -> Result<(), String> {
    let ok = !v.is_empty()
        && v.len() <= 128
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && !v.starts_with(['.', '-'])
        && !v.contains("..")
        && !v.ends_with(".lock");
    if ok {
        Ok(())
    } else {
        Err(bad(
            what,
            field,
            "must be 1 to 128 of A-Z a-z 0-9 . _ - (not starting with . or -)",
        ))
    }
}

/// A full commit id (SHA-1 or SHA-256, lower-case hex).
fn commit_id(what: &str, field: &str, v: &str) -> Result<(), String> {
    if (v.len() == 40 || v.len() == 64) && v.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        Ok(())
    } else {
        Err(bad(
            what,
            field,
            "must be a full commit id (40 or 64 lower-case hex digits)",
        ))
    }
}

/// An attempt id as the writer issues them: 32 lower-case hex digits.
fn attempt_id(what: &str, v: &str) -> Result<(), String> {
    if v.len() == 32 && v.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Ok(())
    } else {
        Err(bad(what, "attempt", "must be 32 lower-case hex digits"))
    }
}

fn items<T>(what: &str, field: &str, v: &[T]) -> Result<(), String> {
    if v.len() > MAX_ITEMS {
        return Err(bad(
            what,
            field,
            &format!("has more than {MAX_ITEMS} items"),
        ));
    }
    Ok(())
}

/// Decodes a message of `what` kind, refusing one too large or not JSON of its shape.
fn decode<T: for<'de> Deserialize<'de>>(what: &str, bytes: &[u8]) -> Result<T, String> {
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(format!(
            "{what} message: {} bytes, more than the {MAX_MESSAGE_BYTES} a message may hold",
            bytes.len()
        ));
    }
    serde_json::from_slice(bytes).map_err(|e| format!("{what} message: not of its shape: {e}"))
}

impl TaskMessage {
    /// Checks every field's bound and shape.
    pub fn validate(&self) -> Result<(), String> {
        const W: &str = "task";
        if self.schema != TASK_SCHEMA {
            return Err(bad(W, "schema", &format!("must be {TASK_SCHEMA:?}")));
        }
        nonempty(W, "ledger", &self.ledger)?;
        nonempty(W, "task", &self.task)?;
        ref_safe(W, "task_ref", &self.task_ref)?;
        nonempty(W, "agent", &self.agent)?;
        attempt_id(W, &self.attempt)?;
        commit_id(W, "base", &self.base)?;
        nonempty(W, "base_ref", &self.base_ref)?;
        if !self.base_ref.starts_with("refs/forum/bases/") {
            return Err(bad(W, "base_ref", "must be under refs/forum/bases/"));
        }
        bounded(W, "instruction", &self.instruction, MAX_TEXT_BYTES)?;
        items(W, "checks", &self.checks)?;
        for c in &self.checks {
            nonempty(W, "checks", c)?;
        }
        items(W, "allowed_commands", &self.allowed_commands)?;
        for c in &self.allowed_commands {
            short(W, "allowed_commands", c)?;
        }
        if let Some(s) = &self.seat {
            nonempty(W, "seat", s)?;
        }
        Ok(())
    }

    /// A task message from the stream, decoded and checked.
    pub fn parse(bytes: &[u8]) -> Result<TaskMessage, String> {
        let m: TaskMessage = decode("task", bytes)?;
        m.validate()?;
        Ok(m)
    }

    /// The message's bytes on the stream.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

impl ResultMessage {
    /// Checks every field's bound and shape.
    pub fn validate(&self) -> Result<(), String> {
        const W: &str = "result";
        if self.schema != RESULT_SCHEMA {
            return Err(bad(W, "schema", &format!("must be {RESULT_SCHEMA:?}")));
        }
        nonempty(W, "ledger", &self.ledger)?;
        nonempty(W, "task", &self.task)?;
        attempt_id(W, &self.attempt)?;
        nonempty(W, "worker", &self.worker)?;
        bounded(W, "output", &self.output, MAX_TEXT_BYTES)?;
        short(W, "model", &self.model)?;
        if let Some(c) = &self.commit {
            commit_id(W, "commit", c)?;
        }
        if let Some(e) = &self.error {
            nonempty(W, "error", e)?;
        }
        items(W, "tool_calls", &self.tool_calls)?;
        for t in &self.tool_calls {
            short(W, "tool_calls.verb", &t.verb)?;
            short(W, "tool_calls.target", &t.target)?;
        }
        items(W, "model_calls", &self.model_calls)?;
        for m in &self.model_calls {
            short(W, "model_calls.model", &m.model)?;
        }
        items(W, "checks", &self.checks)?;
        for c in &self.checks {
            nonempty(W, "checks.command", &c.command)?;
            if !(c.seconds.is_finite() && c.seconds >= 0.0) {
                return Err(bad(
                    W,
                    "checks.seconds",
                    "must be a number of seconds, 0 or more",
                ));
            }
        }
        short(W, "confinement", &self.confinement)?;
        if self.ok && self.error.is_some() {
            return Err(bad(W, "error", "is set on a result that says it is ok"));
        }
        Ok(())
    }

    /// A result message from the stream, decoded and checked.
    pub fn parse(bytes: &[u8]) -> Result<ResultMessage, String> {
        let m: ResultMessage = decode("result", bytes)?;
        m.validate()?;
        Ok(m)
    }

    /// The message's bytes on the stream.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// What the record keeps of the worker's own account: its name and what it says it ran,
    /// called and was confined by (claims: the writer checks the change itself).
    pub fn claims(&self) -> serde_json::Value {
        serde_json::json!({
            "worker": self.worker,
            "confinement": self.confinement,
            "found_in_ref": self.found_in_ref,
            "checks": self.checks,
            "tool_calls": self.tool_calls,
            "model_calls": self.model_calls,
        })
    }
}

/// A ledger name as one token of a stream name or a subject: letters, digits and `-` stay,
/// every other byte becomes `_` and two hex digits (so two ledgers never share a token).
pub fn token(ledger: &str) -> String {
    let mut out = String::with_capacity(ledger.len());
    for b in ledger.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' {
            out.push(b as char);
        } else {
            out.push_str(&format!("_{b:02X}"));
        }
    }
    out
}

/// The work-queue stream of a ledger's dispatched tasks and their results.
pub fn stream_name(ledger: &str) -> String {
    format!("FORUM_{}", token(ledger))
}

/// Every subject of a ledger's stream.
pub fn stream_subjects(ledger: &str) -> String {
    format!("forum.{}.>", token(ledger))
}

/// The subject a run's tasks are published on.
pub fn task_subject(ledger: &str, run: u64) -> String {
    format!("forum.{}.task.{run}", token(ledger))
}

/// The subjects workers pull tasks from (every run of the ledger).
pub fn task_filter(ledger: &str) -> String {
    format!("forum.{}.task.>", token(ledger))
}

/// The subject a run's results are published on.
pub fn result_subject(ledger: &str, run: u64) -> String {
    format!("forum.{}.result.{run}", token(ledger))
}

/// The subject a run's halt is sent on: outside the ledger's stream (a plain message to the
/// workers listening, never stored).
pub fn halt_subject(ledger: &str, run: u64) -> String {
    format!("forum-halt.{}.{run}", token(ledger))
}

/// The subjects workers listen on for halts (every run of the ledger).
pub fn halt_filter(ledger: &str) -> String {
    format!("forum-halt.{}.*", token(ledger))
}

/// The stream that keeps each worker's last progress.
pub fn progress_stream(ledger: &str) -> String {
    format!("FORUM_{}_WORKERS", token(ledger))
}

/// Every subject of a ledger's progress stream.
pub fn progress_filter(ledger: &str) -> String {
    format!("forum-workers.{}.*", token(ledger))
}

/// The subject worker `worker` reports its progress on.
pub fn progress_subject(ledger: &str, worker: &str) -> String {
    format!("forum-workers.{}.{}", token(ledger), token(worker))
}

/// The schema of a worker's progress message.
pub const PROGRESS_SCHEMA: &str = "git-forum.dispatch.progress/1";

/// What a worker says it is doing (kept per worker, its last only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgressMessage {
    /// [`PROGRESS_SCHEMA`].
    pub schema: String,
    pub worker: String,
    pub run: u64,
    pub task: String,
    pub attempt: String,
    /// `working`, `done` or `halted`.
    pub state: String,
}

impl ProgressMessage {
    /// A progress message from the server, decoded and checked.
    pub fn parse(bytes: &[u8]) -> Result<ProgressMessage, String> {
        const W: &str = "progress";
        if bytes.len() > 4 * MAX_FIELD_BYTES {
            return Err(format!(
                "{W} message: {} bytes, more than progress holds",
                bytes.len()
            ));
        }
        let m: ProgressMessage = decode(W, bytes)?;
        if m.schema != PROGRESS_SCHEMA {
            return Err(bad(W, "schema", &format!("must be {PROGRESS_SCHEMA:?}")));
        }
        nonempty(W, "worker", &m.worker)?;
        short(W, "task", &m.task)?;
        short(W, "attempt", &m.attempt)?;
        nonempty(W, "state", &m.state)?;
        Ok(m)
    }

    /// The message's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// The durable consumer workers share.
pub fn worker_consumer(ledger: &str) -> String {
    format!("workers-{}", token(ledger))
}

/// The durable consumer of a run's results (one writer; `resume` picks it up again).
pub fn writer_consumer(ledger: &str, run: u64) -> String {
    format!("writer-{}-{run}", token(ledger))
}

/// Where a worker pushes the change commit of one attempt.
pub fn result_ref(ledger: &str, run: u64, task_ref: &str, attempt: &str) -> String {
    format!("refs/forum/results/{ledger}/{run}/{task_ref}/{attempt}")
}

/// Where the writer pushes the commit a task starts from.
pub fn base_ref(ledger: &str, run: u64, task_ref: &str) -> String {
    format!("refs/forum/bases/{ledger}/{run}/{task_ref}")
}

/// An attempt id from 16 random bytes the caller drew.
pub fn attempt_from(bytes: [u8; 16]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> TaskMessage {
        TaskMessage {
            schema: TASK_SCHEMA.into(),
            ledger: "main".into(),
            run: 4,
            task: "T1".into(),
            task_ref: "T1".into(),
            task_seq: 9,
            agent: "backend".into(),
            attempt: attempt_from([0xab; 16]),
            base: "a".repeat(40),
            base_ref: base_ref("main", 4, "T1"),
            instruction: "fix add".into(),
            checks: vec!["make test".into()],
            allowed_commands: vec![],
            seat: None,
            max_tool_calls: 24,
            check_seconds: 300,
        }
    }

    fn result() -> ResultMessage {
        ResultMessage {
            schema: RESULT_SCHEMA.into(),
            ledger: "main".into(),
            run: 4,
            task: "T1".into(),
            attempt: attempt_from([0xab; 16]),
            worker: "host-1".into(),
            ok: true,
            output: "fixed add".into(),
            model: "model.sh".into(),
            commit: Some("b".repeat(40)),
            error: None,
            tool_calls: vec![],
            model_calls: vec![],
            checks: vec![CheckClaim {
                command: "make test".into(),
                ok: true,
                exit: Some(0),
                seconds: 0.5,
            }],
            confinement: "unconfined".into(),
            found_in_ref: false,
        }
    }

    #[test]
    fn names_per_ledger_are_exact_and_never_shared() {
        assert_eq!(stream_name("main"), "FORUM_main");
        assert_eq!(stream_name("team/a.b"), "FORUM_team_2Fa_2Eb");
        assert_ne!(token("a_b"), token("a.b"));
        assert_eq!(stream_subjects("main"), "forum.main.>");
        assert_eq!(task_subject("main", 4), "forum.main.task.4");
        assert_eq!(task_filter("main"), "forum.main.task.>");
        assert_eq!(result_subject("main", 4), "forum.main.result.4");
        assert_eq!(writer_consumer("main", 4), "writer-main-4");
        assert_eq!(worker_consumer("main"), "workers-main");
        assert_eq!(
            result_ref("main", 4, "T1", "00ff"),
            "refs/forum/results/main/4/T1/00ff"
        );
        assert_eq!(base_ref("main", 4, "T1"), "refs/forum/bases/main/4/T1");
        assert_eq!(attempt_from([0x0f; 16]), "0f".repeat(16));
    }

    #[test]
    fn messages_round_trip() {
        let t = task();
        assert_eq!(TaskMessage::parse(&t.to_bytes()).unwrap(), t);
        let r = result();
        assert_eq!(ResultMessage::parse(&r.to_bytes()).unwrap(), r);
        // `found_in_ref` is left out when false, so a result of an older worker parses.
        assert!(
            !String::from_utf8(r.to_bytes())
                .unwrap()
                .contains("found_in_ref")
        );
        let mut found = result();
        found.found_in_ref = true;
        assert_eq!(ResultMessage::parse(&found.to_bytes()).unwrap(), found);
    }

    #[test]
    fn a_bad_field_is_one_line_naming_it() {
        let mut r = result();
        r.commit = Some("HEAD".into());
        assert_eq!(
            ResultMessage::parse(&r.to_bytes()).unwrap_err(),
            "result message: field `commit` must be a full commit id (40 or 64 lower-case hex digits)"
        );
        let mut r = result();
        r.attempt = "1".into();
        assert_eq!(
            r.validate().unwrap_err(),
            "result message: field `attempt` must be 32 lower-case hex digits"
        );
        let mut r = result();
        r.output = "x".repeat(MAX_TEXT_BYTES + 1);
        assert_eq!(
            r.validate().unwrap_err(),
            format!("result message: field `output` is longer than {MAX_TEXT_BYTES} bytes")
        );
        let mut r = result();
        r.error = Some("work".into());
        assert_eq!(
            r.validate().unwrap_err(),
            "result message: field `error` is set on a result that says it is ok"
        );
        let mut t = task();
        t.task_ref = "../x".into();
        assert_eq!(
            t.validate().unwrap_err(),
            "task message: field `task_ref` must be 1 to 128 of A-Z a-z 0-9 . _ - (not starting with . or -)"
        );
        let mut t = task();
        t.base_ref = "refs/heads/main".into();
        assert_eq!(
            t.validate().unwrap_err(),
            "task message: field `base_ref` must be under refs/forum/bases/"
        );
    }

    #[test]
    fn a_message_of_the_wrong_shape_is_refused_in_one_line() {
        let e = ResultMessage::parse(br#"{"schema":"x"}"#).unwrap_err();
        assert!(
            e.starts_with("result message: not of its shape: missing field"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        let e = ResultMessage::parse(b"not json").unwrap_err();
        assert!(e.starts_with("result message: not of its shape: "), "{e}");
        let big = vec![b' '; MAX_MESSAGE_BYTES + 1];
        assert_eq!(
            ResultMessage::parse(&big).unwrap_err(),
            format!(
                "result message: {} bytes, more than the {MAX_MESSAGE_BYTES} a message may hold",
                MAX_MESSAGE_BYTES + 1
            )
        );
        let mut v = serde_json::to_value(result()).unwrap();
        v["extra"] = serde_json::json!(1);
        let e = ResultMessage::parse(v.to_string().as_bytes()).unwrap_err();
        assert!(e.contains("unknown field `extra`"), "{e}");
    }
}
