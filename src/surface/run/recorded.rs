//! What a run recorded when it started, found for the run a resume would continue, so `git
//! forum resume` and the daemon's `/resume` need no flags again:
//!
//! - its executors (the request's `runtime` field): a run that recorded none (older runs, runs
//!   given seats directly) continues on the current configuration;
//! - the options that bound it (the request's `options` field, written only when one of them
//!   was given): `--allow-cmd`, `--max-tool-calls`, `--check-timeout`, `--sandbox` /
//!   `--no-sandbox`, `--sandbox-net`, `--secrets`, `--max-tokens` and `--max-cost-usd`. The
//!   checks and the work itself come back from the `work` record.
//!
//! Flags given to the resume win over both.

use serde_json::{Map, Value as J, json};

use super::Bodies;
use super::options::RunOptions;
use crate::exec::config::{self, Runtime};
use crate::ledger::Entry;
use crate::run::status;
use crate::surface::{Error, Result};

/// The run a resume of `target` continues (the latest resumable one when `None`): its request
/// seq and body. A run that cannot be found or resumed is refused here, in one line that says
/// why and what to do, before any executor is looked for: a resume of an answered run has
/// nothing to run, so a missing executor is not what the person needs to hear.
pub(crate) fn recorded_request(
    entries: &[Entry],
    bodies: &Bodies<'_>,
    target: Option<u64>,
) -> Result<Option<(u64, J)>> {
    let runs = status::runs(entries, |e| bodies.get(e));
    bodies.done()?;
    let run = match target {
        Some(seq) => runs.iter().find(|r| r.request_seq == seq).ok_or_else(|| {
            Error::conflict(format!(
                "no run starts at seq {seq}: `git forum runs` lists them"
            ))
        })?,
        None => runs
            .iter()
            .rev()
            .find(|r| r.state.resumable())
            .ok_or_else(|| Error::conflict(nothing_to_resume(runs.last())))?,
    };
    if !run.state.resumable() {
        return Err(Error::conflict(format!(
            "run {} cannot be resumed: it is {}{}",
            run.request_seq,
            ended(run),
            ended_what_next(run.request_seq)
        )));
    }
    let Some(request) = entries.iter().find(|e| e.seq == run.request_seq) else {
        return Ok(None);
    };
    let body = bodies.get(request);
    bodies.done()?;
    Ok(body.map(|b| (run.request_seq, b)))
}

/// Why a resume with no run named has nothing to continue; `latest` is the ledger's last run.
fn nothing_to_resume(latest: Option<&status::RunInfo>) -> String {
    match latest {
        None => "no unfinished run to resume: this ledger has no run yet (`git forum submit` starts one)".into(),
        Some(r) => format!(
            "no unfinished run to resume: every run in this ledger has finished, the latest (run {}) is {}{}",
            r.request_seq,
            ended(r),
            ended_what_next(r.request_seq)
        ),
    }
}

/// How a run that cannot be resumed ended, in words.
fn ended(r: &status::RunInfo) -> &'static str {
    match r.state {
        status::RunState::Answered => "already answered",
        _ => r.state.as_str(),
    }
}

/// What to do with a run that has ended (`seq`): look at it, or start a new one.
fn ended_what_next(seq: u64) -> String {
    format!(" (`git forum receipt {seq}` shows it; `git forum submit` starts a new run)")
}

/// The executors the request `body` of run `request_seq` recorded, if any.
pub(crate) fn runtime_of(request_seq: u64, body: &J) -> Result<Option<(u64, Runtime)>> {
    let Some(record) = body.get("runtime").filter(|r| !r.is_null()) else {
        return Ok(None);
    };
    let rt = from_record(record, request_seq)?;
    Ok(Some((request_seq, rt)))
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

impl RunOptions {
    /// The options a resume keeps, as the request records them (`options`): only those given,
    /// and `None` when none was, so a run without them records what it always did.
    pub(crate) fn record(&self) -> Option<J> {
        let mut m = Map::new();
        if !self.allow_cmds.is_empty() {
            m.insert("allow_cmds".into(), json!(self.allow_cmds));
        }
        if let Some(n) = self.max_tool_calls {
            m.insert("max_tool_calls".into(), json!(n));
        }
        // One attempt is what a run always did: recorded only when there are more.
        if let Some(n) = self.attempts.filter(|n| *n > 1) {
            m.insert("attempts".into(), json!(n));
        }
        if let Some(s) = self.check_timeout {
            m.insert("check_timeout".into(), json!(s));
        }
        if let Some(b) = self.sandbox {
            m.insert("sandbox".into(), json!(b));
        }
        if self.sandbox_net {
            m.insert("sandbox_net".into(), json!(true));
        }
        if !self.sandbox_read.is_empty() {
            m.insert("sandbox_read".into(), json!(self.sandbox_read));
        }
        if !self.sandbox_allow_host.is_empty() {
            m.insert("sandbox_allow_host".into(), json!(self.sandbox_allow_host));
        }
        if let Some(mode) = self.secrets {
            m.insert("secrets".into(), json!(mode.as_str()));
        }
        if let Some(n) = self.max_tokens {
            m.insert("max_tokens".into(), json!(n));
        }
        if let Some(x) = self.max_cost_usd {
            m.insert("max_cost_usd".into(), json!(x));
        }
        (!m.is_empty()).then_some(J::Object(m))
    }

    /// Fills what this resume was not given from the request `body` of run `request_seq`: the
    /// options it recorded ([`RunOptions::record`]), each only where no flag says otherwise
    /// (`--allow-cmd` replaces the recorded list; `--sandbox-net` can only be added, and
    /// `--no-sandbox` drops it). A run that works in the repository sets
    /// [`RunOptions::resumes_work`]. A recorded value of the wrong type is refused in one line.
    pub(crate) fn restore(&mut self, request_seq: u64, body: &J) -> Result<()> {
        self.resumes_work = body.get("work").is_some_and(|w| w.is_object());
        self.restore_dispatch(request_seq, body)?;
        if !self.resumes_work && (!self.allow_cmds.is_empty() || self.max_tool_calls.is_some()) {
            return Err(Error::usage(format!(
                "run {request_seq} does not work in the repository, so it has no editing worker for --allow-cmd or --max-tool-calls to bound: resume it without them"
            )));
        }
        let Some(o) = body.get("options").filter(|o| !o.is_null()) else {
            return Ok(());
        };
        let wrong = |key: &str, what: &str| {
            Error::usage(format!(
                "run {request_seq} recorded options this resume cannot use ({key} is not {what}); give the flags to resume it with"
            ))
        };
        let field = |key: &str| o.get(key).filter(|v| !v.is_null());
        self.restore_worker_options(o, &wrong)?;
        if self.secrets.is_none()
            && let Some(v) = field("secrets")
        {
            let mode = v.as_str().and_then(|s| crate::secrets::Mode::parse(s).ok());
            self.secrets = Some(mode.ok_or_else(|| wrong("secrets", "redact, block or allow"))?);
        }
        if self.max_tokens.is_none()
            && let Some(v) = field("max_tokens")
        {
            self.max_tokens = Some(v.as_u64().ok_or_else(|| wrong("max_tokens", "a count"))?);
        }
        if self.max_cost_usd.is_none()
            && let Some(v) = field("max_cost_usd")
        {
            self.max_cost_usd = Some(v.as_f64().ok_or_else(|| wrong("max_cost_usd", "dollars"))?);
        }
        Ok(())
    }

    /// A dispatched run goes on dispatching to the server and remote its request records,
    /// unless `--dispatch` names another server; the credentials and TLS settings come from
    /// `[dispatch]` as for a new run.
    fn restore_dispatch(&mut self, request_seq: u64, body: &J) -> Result<()> {
        let Some(d) = body.pointer("/work/dispatch").filter(|d| !d.is_null()) else {
            return Ok(());
        };
        let Some(server) = d.get("server").and_then(J::as_str) else {
            return Err(Error::usage(format!(
                "run {request_seq} records a dispatch without a server; resume it with --dispatch URL"
            )));
        };
        let remote = d.get("remote").and_then(J::as_str).map(str::to_string);
        match self.dispatch.as_mut() {
            Some(given) => {
                given.remote = given.remote.take().or(remote);
            }
            None => {
                let mut spec = crate::surface::worker::DispatchSpec::at(server);
                spec.remote = remote;
                self.dispatch = Some(spec);
            }
        }
        Ok(())
    }

    /// The recorded options that bound the workers (their commands, tool calls, check time
    /// and sandbox), each where no flag was given.
    fn restore_worker_options(&mut self, o: &J, wrong: &dyn Fn(&str, &str) -> Error) -> Result<()> {
        let field = |key: &str| o.get(key).filter(|v| !v.is_null());
        if self.allow_cmds.is_empty()
            && let Some(v) = field("allow_cmds")
        {
            self.allow_cmds =
                strings(v).ok_or_else(|| wrong("allow_cmds", "a list of commands"))?;
        }
        if self.max_tool_calls.is_none()
            && let Some(v) = field("max_tool_calls")
        {
            let n = v
                .as_u64()
                .ok_or_else(|| wrong("max_tool_calls", "a count"))?;
            self.max_tool_calls = Some(u32::try_from(n).unwrap_or(u32::MAX));
        }
        if self.attempts.is_none()
            && let Some(v) = field("attempts")
        {
            let n = v.as_u64().ok_or_else(|| wrong("attempts", "a count"))?;
            self.attempts = Some(u32::try_from(n).unwrap_or(u32::MAX));
        }
        if self.check_timeout.is_none()
            && let Some(v) = field("check_timeout")
        {
            self.check_timeout = Some(
                v.as_f64()
                    .ok_or_else(|| wrong("check_timeout", "seconds"))?,
            );
        }
        if self.sandbox.is_none()
            && let Some(v) = field("sandbox")
        {
            self.sandbox = Some(
                v.as_bool()
                    .ok_or_else(|| wrong("sandbox", "true or false"))?,
            );
        }
        if !self.sandbox_net
            && self.sandbox != Some(false)
            && let Some(v) = field("sandbox_net")
        {
            self.sandbox_net = v
                .as_bool()
                .ok_or_else(|| wrong("sandbox_net", "true or false"))?;
        }
        if self.sandbox_read.is_empty()
            && let Some(v) = field("sandbox_read")
        {
            self.sandbox_read = strings(v)
                .ok_or_else(|| wrong("sandbox_read", "a list of paths"))?
                .into_iter()
                .map(std::path::PathBuf::from)
                .collect();
        }
        if self.sandbox_allow_host.is_empty()
            && let Some(v) = field("sandbox_allow_host")
        {
            self.sandbox_allow_host =
                strings(v).ok_or_else(|| wrong("sandbox_allow_host", "a list of HOST[:PORT]"))?;
        }
        Ok(())
    }
}

/// A recorded list of strings, or `None` when it is anything else.
fn strings(v: &J) -> Option<Vec<String>> {
    v.as_array()?
        .iter()
        .map(|s| s.as_str().map(str::to_string))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_options_come_back_and_flags_win() {
        let given = RunOptions {
            allow_cmds: vec!["make lint".into()],
            max_tool_calls: Some(3),
            check_timeout: Some(9.5),
            sandbox: Some(false),
            secrets: Some(crate::secrets::Mode::Block),
            max_tokens: Some(900),
            max_cost_usd: Some(0.25),
            ..RunOptions::default()
        };
        let record = given.record().unwrap();
        assert!(RunOptions::default().record().is_none());
        let body = json!({"text": "x", "work": {"checks": []}, "options": record});
        let mut plain = RunOptions::default();
        plain.restore(4, &body).unwrap();
        assert_eq!(
            plain,
            RunOptions {
                resumes_work: true,
                ..given.clone()
            }
        );
        // A flag given to the resume wins over the record.
        let mut flagged = RunOptions {
            allow_cmds: vec!["make test".into()],
            max_tool_calls: Some(7),
            sandbox: Some(true),
            sandbox_net: true,
            ..RunOptions::default()
        };
        flagged.restore(4, &body).unwrap();
        assert_eq!(flagged.allow_cmds, ["make test"]);
        assert_eq!(flagged.max_tool_calls, Some(7));
        assert_eq!((flagged.sandbox, flagged.sandbox_net), (Some(true), true));
        assert_eq!(flagged.max_tokens, Some(900));
        // --no-sandbox drops a recorded --sandbox-net.
        let netted = json!({"text": "x", "options": {"sandbox": true, "sandbox_net": true}});
        let mut off = RunOptions {
            sandbox: Some(false),
            ..RunOptions::default()
        };
        off.restore(4, &netted).unwrap();
        assert_eq!(
            (off.sandbox, off.sandbox_net, off.resumes_work),
            (Some(false), false, false)
        );
        // Worker bounds on the resume of a run that does not work in the repository.
        let plain = json!({"text": "x"});
        let e = RunOptions {
            max_tool_calls: Some(2),
            ..RunOptions::default()
        }
        .restore(4, &plain)
        .unwrap_err();
        assert!(
            e.message.contains("run 4 does not work in the repository"),
            "{e}"
        );
        // A record of the wrong type is refused in one line naming the field.
        let bad = json!({"text": "x", "options": {"max_tool_calls": "many"}});
        let e = RunOptions::default().restore(4, &bad).unwrap_err();
        assert_eq!(e.class, crate::surface::Class::Usage);
        assert!(e.message.contains("max_tool_calls"), "{e}");
        assert!(!e.message.contains('\n'));
    }
}
