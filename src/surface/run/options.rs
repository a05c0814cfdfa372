//! The options of a run, once: one typed struct that the CLI's flags and the daemon's JSON
//! arguments both convert into, checked and turned into the engine's [`run::Options`] here.

use std::sync::Arc;
use std::time::Duration;

use crate::context::ContextBudget;
use crate::exec::config;
use crate::exec::sandbox::{self, probe::Sandboxing};
use crate::ledger::{Entry, Storage, Value};
use crate::policy::Policy;
use crate::report;
use crate::run::{
    self, CommandContext, CommandVerifier, ContextProvider, GatePolicy, LedgerContext, Verifier,
};
use crate::store::git::GitStore;
use crate::surface::run::repo_context::{Chained, Locating, RepoContext};
use crate::surface::{Error, Result};

/// The delivery profiles a run may be checked against.
pub(crate) const PROFILES: [&str; 4] = ["operator", "engineer", "researcher", "executive"];

/// Capsules fed to a run are Forum's defaults: the last 8 task results, texts clipped to 240
/// code points.
pub(crate) const CAPSULE_MAX_ITEMS: usize = 8;
/// See [`CAPSULE_MAX_ITEMS`].
pub(crate) const CAPSULE_MAX_TEXT_CHARS: usize = 240;

/// A command line (split like a shell, run without one) and the seconds it may take.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CommandSpec {
    pub(crate) line: String,
    pub(crate) timeout: f64,
}

/// Where request and per-task context come from.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum ContextSource {
    /// No context.
    #[default]
    None,
    /// `CMD request REQUEST` before planning, `CMD task TASK_ID INSTRUCTION` before each task.
    Command(CommandSpec),
    /// The ledger's context capsule as the request context.
    Capsule,
}

/// What a submit or a resume is asked to do, whichever transport asked.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RunOptions {
    /// Stop once this many model calls have started.
    pub(crate) max_model_calls: Option<u64>,
    /// Stop once this many seconds have passed.
    pub(crate) max_seconds: Option<f64>,
    /// Token limits on what reaches prompts.
    pub(crate) context_budget: Option<ContextBudget>,
    /// Where context comes from.
    pub(crate) context: ContextSource,
    /// Ask the orchestrator seat whether a flagged answer drifted.
    pub(crate) judge_intent: bool,
    /// Ask the orchestrator seat for a tighter answer when the delivery floor flags it.
    pub(crate) revise: bool,
    /// Check the delivered answer with a command.
    pub(crate) verify: Option<CommandSpec>,
    /// Cap on the tokens each free-text call may generate.
    pub(crate) max_output_tokens: Option<u32>,
    /// Witness a checkpoint and sync after each wave.
    pub(crate) checkpoint_each_wave: bool,
    /// The delivery profile to check the answer against.
    pub(crate) delivery_profile: Option<String>,
    /// Waves (0-based) that wait for a decision.
    pub(crate) gate_waves: Vec<usize>,
    /// Seconds a pending gate waits before it expires.
    pub(crate) gate_deadline: Option<f64>,
    /// What an expired gate becomes (`approve` or `reject`).
    pub(crate) gate_on_expiry: Option<String>,
    /// Work in the repository (`--work`; `[work] enabled` sets it by default).
    pub(crate) work: bool,
    /// One task by the worker seat, with no planner, validator, judge or synthesizer call
    /// (`--solo`, `git forum fix`).
    pub(crate) solo: bool,
    /// Check commands every change must pass (`--check`, after `[work] checks`).
    pub(crate) checks: Vec<String>,
    /// Seconds each check may run before it is killed.
    pub(crate) check_timeout: Option<f64>,
    /// What a secret found in a body does (`--secrets`; default: the policy's `[secrets]`).
    pub(crate) secrets: Option<crate::secrets::Mode>,
    /// Commands the editing worker may run besides the checks (`--allow-cmd`).
    pub(crate) allow_cmds: Vec<String>,
    /// Tool calls each task of the editing worker may make (`--max-tool-calls`).
    pub(crate) max_tool_calls: Option<u32>,
    /// Independent attempts at each task (`--attempts`, 1 to 8; `None`: the runtime's `[work]
    /// attempts`, else one).
    pub(crate) attempts: Option<u32>,
    /// `--sandbox` (`Some(true)`) or `--no-sandbox` (`Some(false)`); `None`: `[work] sandbox`,
    /// else confined when bubblewrap is usable.
    pub(crate) sandbox: Option<bool>,
    /// `--sandbox-net`: confined workers and checks keep the network.
    pub(crate) sandbox_net: bool,
    /// `--sandbox-read PATH`: more paths confined workers and checks may read (after
    /// `[work] sandbox_read`).
    pub(crate) sandbox_read: Vec<std::path::PathBuf>,
    /// `--sandbox-allow-host HOST[:PORT]`: more hosts a confined coding agent's egress admits
    /// beside its model (after `[work] sandbox_allow_host`).
    pub(crate) sandbox_allow_host: Vec<String>,
    /// The work tree whose map and relevant files are context (on by default in a repository;
    /// `--no-repo-context` leaves it `None`), after the context of [`RunOptions::context`].
    pub(crate) repo_context: Option<std::path::PathBuf>,
    /// Paths the seats' executors name (their programs and the files their arguments name),
    /// which the repository context leaves out: a scripted worker's own program is not part
    /// of the work ([`super::repo_context::seat_paths`]).
    pub(crate) repo_context_leave_out: Vec<std::path::PathBuf>,
    /// `--max-tokens`: the run's ceiling on prompt plus completion tokens.
    pub(crate) max_tokens: Option<u64>,
    /// `--max-cost-usd`: the run's ceiling on what its model calls cost, in dollars.
    pub max_cost_usd: Option<f64>,
    /// Set by [`RunOptions::restore`] on the resume of a run that works in the repository:
    /// its work options (`--allow-cmd`, `--max-tool-calls`, the sandbox) apply without
    /// `--work`, which only a new run takes.
    pub resumes_work: bool,
    /// `--dispatch`: send the tasks of this `--work` run to workers through NATS JetStream
    /// (`None`: run them in this process). Not recorded: where tasks ran is witnessed per task.
    pub(crate) dispatch: Option<crate::surface::worker::DispatchSpec>,
}

/// A positive, finite number of seconds for `flag`.
fn seconds(flag: &str, s: f64) -> Result<Duration> {
    if !(s.is_finite() && s > 0.0) {
        return Err(Error::usage(format!(
            "--{flag} {s} must be a number of seconds above 0"
        )));
    }
    Ok(Duration::from_secs_f64(s))
}

/// Splits a `--*-cmd` value; an unsplittable or empty line is a usage error.
fn argv_of(flag: &str, line: &str) -> Result<Vec<String>> {
    config::split_cmd(line).map_err(|e| Error::usage(format!("--{flag}: {e}")))
}

/// A delivery profile name, refused unless it is one of [`PROFILES`].
pub(crate) fn check_profile(p: &str) -> Result<()> {
    if !PROFILES.contains(&p.trim().to_lowercase().as_str()) {
        return Err(Error::usage(format!(
            "unknown delivery profile {p:?}; valid profiles: {}",
            PROFILES.join(", ")
        )));
    }
    Ok(())
}

impl RunOptions {
    /// Checks every option and builds the engine's options under `policy`, without the
    /// context provider ([`RunOptions::context_provider`] makes it once the ledger is open):
    /// a bad option is refused before the ledger is read.
    pub(crate) fn build(&self, policy: Policy) -> Result<run::Options> {
        for (flag, v) in [
            ("max-seconds", self.max_seconds),
            ("gate-deadline", self.gate_deadline),
        ] {
            if let Some(s) = v
                && !(s.is_finite() && s >= 0.0)
            {
                return Err(Error::usage(format!(
                    "--{flag} {s} must be a number of seconds, 0 or more"
                )));
            }
        }
        let verifier: Option<Arc<dyn Verifier>> = match &self.verify {
            Some(c) => Some(Arc::new(CommandVerifier::new(
                argv_of("verify-cmd", &c.line)?,
                seconds("verify-timeout", c.timeout)?,
            ))),
            None => None,
        };
        if let ContextSource::Command(_) = &self.context {
            self.context_provider(|| Ok(Vec::new()))?;
        }
        if let Some(p) = &self.delivery_profile {
            check_profile(p)?;
        }
        let mut secrets = policy.secrets.clone();
        if let Some(mode) = self.secrets {
            secrets.mode = mode;
        }
        let ceilings = self.ceilings()?;
        Ok(run::Options {
            ceilings,
            max_model_calls: self.max_model_calls,
            max_seconds: self.max_seconds,
            context_budget: self.context_budget,
            policy,
            checkpoint_each_wave: self.checkpoint_each_wave,
            delivery_profile: self.delivery_profile.clone(),
            gates: GatePolicy {
                waves: self.gate_waves.iter().copied().collect(),
                question: None,
                deadline_seconds: self.gate_deadline,
                on_expiry: self.gate_on_expiry.clone(),
            },
            max_output_tokens: self.max_output_tokens,
            judge_intent: self.judge_intent,
            revise: self.revise,
            solo: self.solo,
            verifier,
            context: None,
            context_turns: None,
            interrupt: None,
            work: None,
            secrets: crate::secrets::Guard::new(crate::secrets::Scanner::new(), secrets),
            runtime_record: None,
            options_record: self.record(),
            rules_record: None,
            cannot_start: None,
            // From the runtime config, once it is read (`prepare`).
            observe: Default::default(),
            resume_limits_unkept: false,
        })
    }

    /// The spend ceilings, refused when not a positive number (a ceiling of 0 would stop
    /// every run before its first call: leave the flag out for no ceiling).
    pub(crate) fn ceilings(&self) -> Result<crate::spend::Ceilings> {
        if self.max_tokens == Some(0) {
            return Err(Error::usage(
                "--max-tokens 0 leaves nothing to spend: give a number of tokens above 0 (or leave the flag out for no ceiling)",
            ));
        }
        let max_cost_pico = match self.max_cost_usd {
            None => None,
            Some(x) if x.is_finite() && x > 0.0 && crate::spend::usd_to_pico(x) > 0 => {
                Some(crate::spend::usd_to_pico(x))
            }
            Some(x) => {
                return Err(Error::usage(format!(
                    "--max-cost-usd {x} must be a number of dollars above 0 (or leave the flag out for no ceiling)"
                )));
            }
        };
        Ok(crate::spend::Ceilings {
            max_tokens: self.max_tokens,
            max_cost_pico,
        })
    }

    /// The work options of a run under the runtime's `[work]` table, opening its workbench
    /// with `open`: `--work` (or `[work] enabled`) makes a new run work in the repository;
    /// `[work] checks` run before `--check`, and `[work] default_checks` when no `--check` is
    /// given. A check given without work, an empty check or a
    /// bad timeout is a usage error.
    pub(crate) fn work_options(
        &self,
        defaults: &config::WorkConfig,
        ledger: &str,
        open: run::OpenWork,
    ) -> Result<run::WorkOptions> {
        let enabled = self.work || defaults.enabled;
        // What bounds the workers: a new --work run's, or a resumed one's.
        let working = enabled || self.resumes_work;
        let deadline = self.check_deadline(enabled)?;
        let max_tool_calls = self.tool_call_budget(working)?;
        let attempts = self.attempt_count(working)?;
        // `[work] attempts = ["SLOT", ...]` holds unless --attempts says otherwise.
        let attempt_slots = match self.attempts {
            None if working => defaults.attempt_slots.clone(),
            _ => Vec::new(),
        };
        let sandbox = self.sandboxing(defaults, working)?;
        let mut checks = defaults.checks.clone();
        // `[work] default_checks` stand in for a `--check` the command did not give.
        if self.checks.is_empty() {
            checks.extend(defaults.default_checks.iter().cloned());
        } else {
            checks.extend(self.checks.iter().cloned());
        }
        Ok(run::WorkOptions {
            enabled,
            open,
            ledger: ledger.to_string(),
            checks,
            check_deadline: deadline,
            output_cap: run::DEFAULT_CHECK_OUTPUT_CAP,
            diff_cap: run::DEFAULT_DIFF_CAP,
            allow_cmds: self
                .allow_cmds
                .iter()
                .map(|c| c.trim().to_string())
                .collect(),
            max_tool_calls,
            attempts: if self.attempts.is_none() && working {
                defaults.attempts.unwrap_or(attempts)
            } else {
                attempts
            },
            attempt_slots,
            sandbox: Arc::new(sandbox),
            verification: None,
            limits: defaults.limits,
            dispatch: None,
            legacy: false,
            unkept: Default::default(),
        })
    }

    /// Takes the `[spend]` ceilings of `runtime` for those the request did not give, into
    /// these options and the engine's `opts`, so that they are recorded with the run's options
    /// (and a resume keeps them) like the flags.
    pub(crate) fn take_default_ceilings(
        &mut self,
        runtime: Option<&config::Runtime>,
        opts: &mut run::Options,
    ) -> Result<()> {
        if let Some(rt) = runtime
            && self.took_ceilings(&rt.spend)
        {
            opts.ceilings = self.ceilings()?;
            opts.options_record = self.record();
        }
        Ok(())
    }

    /// Fills the ceilings not given from `spend`; returns whether one was taken.
    fn took_ceilings(&mut self, spend: &config::SpendConfig) -> bool {
        let mut took = false;
        if self.max_cost_usd.is_none()
            && let Some(p) = spend.max_cost_pico
        {
            self.max_cost_usd = Some(crate::spend::pico_to_usd(p));
            took = true;
        }
        if self.max_tokens.is_none()
            && let Some(n) = spend.max_tokens
        {
            self.max_tokens = Some(n);
            took = true;
        }
        took
    }

    /// The `--check` commands' deadline, once the commands are known good and a --work run is
    /// there to check.
    fn check_deadline(&self, enabled: bool) -> Result<Duration> {
        if !enabled && !self.checks.is_empty() {
            return Err(Error::usage(
                "--check runs on the changes of a --work run: add --work (or set [work] enabled = true in .forum/runtime.toml)",
            ));
        }
        check_commands("--check", &self.checks)?;
        match self.check_timeout {
            Some(s) => seconds("check-timeout", s),
            None => Ok(run::DEFAULT_CHECK_DEADLINE),
        }
    }

    /// The editing worker's tool call budget, once its `--allow-cmd` commands are known good.
    fn tool_call_budget(&self, working: bool) -> Result<u32> {
        if !working && (!self.allow_cmds.is_empty() || self.max_tool_calls.is_some()) {
            return Err(Error::usage(
                "--allow-cmd and --max-tool-calls bound the editing worker of a --work run: add --work",
            ));
        }
        check_commands("--allow-cmd", &self.allow_cmds)?;
        match self.max_tool_calls {
            None => Ok(run::edit_tools::DEFAULT_MAX_TOOL_CALLS),
            Some(n) if (1..=run::edit_tools::MAX_TOOL_CALLS_LIMIT).contains(&n) => Ok(n),
            Some(n) => Err(Error::usage(format!(
                "--max-tool-calls {n}: give a number from 1 to {}",
                run::edit_tools::MAX_TOOL_CALLS_LIMIT
            ))),
        }
    }

    /// How many independent attempts each task gets by `--attempts` (1 to 8; `[work] attempts`
    /// applies when it is not given).
    fn attempt_count(&self, working: bool) -> Result<u32> {
        match self.attempts {
            None => Ok(1),
            Some(_) if !working => Err(Error::usage(
                "--attempts runs each task of a --work run several times: add --work",
            )),
            Some(n) if (1..=run::MAX_ATTEMPTS).contains(&n) => Ok(n),
            Some(n) => Err(Error::usage(format!(
                "--attempts {n}: give a number from 1 to {}",
                run::MAX_ATTEMPTS
            ))),
        }
    }

    /// The sandbox the workers run in, probed when there is work to run (a dispatch worker's
    /// too, `crate::surface::worker`).
    pub(crate) fn sandboxing(
        &self,
        defaults: &config::WorkConfig,
        working: bool,
    ) -> Result<Sandboxing> {
        if self.sandbox == Some(false) && self.sandbox_net {
            return Err(Error::usage(
                "--sandbox-net keeps the network inside the sandbox, which --no-sandbox turns off: give one or the other",
            ));
        }
        let net = self.sandbox_net || defaults.sandbox_net;
        if !self.sandbox_allow_host.is_empty() && (net || self.sandbox == Some(false)) {
            return Err(Error::usage(if net {
                "--sandbox-allow-host admits one more host through the egress proxy, and --sandbox-net already opens every host: give one or the other"
            } else {
                "--sandbox-allow-host admits one more host through a sandboxed agent's egress, which --no-sandbox turns off: give one or the other"
            }));
        }
        let read = self.sandbox_read_paths(defaults)?;
        let mut allow_hosts: Vec<crate::egress::Allow> = Vec::new();
        for spec in defaults
            .sandbox_allow_host
            .iter()
            .chain(&self.sandbox_allow_host)
        {
            let a = crate::egress::Allow::parse(spec).map_err(|e| Error::usage(e.to_string()))?;
            if !allow_hosts.contains(&a) {
                allow_hosts.push(a);
            }
        }
        let sandbox = Sandboxing::new(
            sandbox::choose(self.sandbox, defaults.sandbox),
            sandbox::Policy {
                net,
                read,
                allow_hosts,
            },
        );
        if working {
            // Probed before anything is written, so `--sandbox` without bubblewrap is refused
            // with nothing done.
            sandbox
                .resolve()
                .map_err(|e| Error::usage(e.to_string()).with_source(e))?;
        }
        Ok(sandbox)
    }

    /// The configured and the given `--sandbox-read` paths, made absolute and canonical, each
    /// once; `/` is refused.
    fn sandbox_read_paths(&self, defaults: &config::WorkConfig) -> Result<Vec<std::path::PathBuf>> {
        let mut read = Vec::new();
        for p in defaults.sandbox_read.iter().chain(&self.sandbox_read) {
            let full = if p.is_absolute() {
                p.clone()
            } else {
                std::env::current_dir()
                    .map_err(|e| Error::internal(format!("reading the current directory: {e}")))?
                    .join(p)
            };
            let full = full.canonicalize().map_err(|e| {
                Error::usage(format!(
                    "--sandbox-read {}: {e}; give a path that exists",
                    p.display()
                ))
            })?;
            if full == std::path::Path::new("/") {
                return Err(Error::usage(
                    "--sandbox-read / would show the whole filesystem: name the directory the worker needs",
                ));
            }
            if !read.contains(&full) {
                read.push(full);
            }
        }
        Ok(read)
    }

    /// The context provider of [`RunOptions::context`], if any. `pre` is the ledger as read
    /// before the run (for the capsule); it is called only when the capsule is asked for.
    pub(crate) fn context_provider(
        &self,
        pre: impl FnOnce() -> Result<Vec<(Entry, Option<Value>)>>,
    ) -> Result<Option<Arc<dyn ContextProvider>>> {
        self.context_provider_located(pre, None)
    }

    /// [`context_provider`](Self::context_provider), the repository located by `located` when
    /// a caller began that early ([`Locating::start`]; waited for even when the repository is
    /// not context after all).
    pub(crate) fn context_provider_located(
        &self,
        pre: impl FnOnce() -> Result<Vec<(Entry, Option<Value>)>>,
        located: Option<Locating>,
    ) -> Result<Option<Arc<dyn ContextProvider>>> {
        // An unused `located` waits for its git as it is dropped.
        let own = context_provider(&self.context, pre)?;
        let limits = crate::context::repo::DEFAULT_LIMITS;
        let repo = self
            .repo_context
            .as_deref()
            .and_then(|d| {
                match located {
                    Some(l) => RepoContext::open_located(l, d, limits),
                    None => RepoContext::open(d, limits),
                }
                .map(|r| r.leaving_out(d, &self.repo_context_leave_out))
            })
            .map(|r| Arc::new(r) as Arc<dyn ContextProvider>);
        Ok(match (own, repo) {
            (Some(a), Some(b)) => Some(Arc::new(Chained(a, b))),
            (a, b) => a.or(b),
        })
    }
}

/// Decides `spec`'s repository context from the caller's choice and the runtime config `rt`
/// ([`repo_context_on`]): the work tree `dir` is in, less the files the seats' executors name.
pub(crate) fn decide_repo_context(
    spec: &mut RunOptions,
    choice: Option<bool>,
    rt: Option<&config::Runtime>,
    dir: &std::path::Path,
) {
    let context = rt.map(|r| r.context).unwrap_or_default();
    spec.repo_context = repo_context_on(choice, &context).then(|| dir.to_path_buf());
    spec.repo_context_leave_out = rt.map(super::repo_context::seat_paths).unwrap_or_default();
}

/// Whether a run takes the repository as context: the caller's choice when it made one
/// (`--repo-context` / `--no-repo-context`, the daemon's and MCP's `repo_context`), else the
/// runtime config's `[context] repo`, else yes. Every transport and the preflight decide here.
pub(crate) fn repo_context_on(choice: Option<bool>, defaults: &config::ContextConfig) -> bool {
    choice.or(defaults.repo).unwrap_or(true)
}

/// Applies the run's verification tier `v` (the heaviest of its seats',
/// `crate::exec::config::verify`) to `opts`: a tier-3 (small or local) run turns the intent
/// judge on, and a new `--work` run on it without a check command is refused in one line (the
/// choice made for "checks required": `done_when` criteria are only known after planning, so
/// at least one `--check` or `[work] checks` command must be given). The tier is recorded on
/// the run's work record and tells the pre-ship gate whether to see every change.
pub(crate) fn apply_verification(v: config::Verification, opts: &mut run::Options) -> Result<()> {
    if v.judge_intent {
        opts.judge_intent = true;
    }
    if let Some(w) = opts.work.as_mut() {
        if w.enabled && v.checks_required && w.checks.is_empty() {
            return Err(Error::usage(format!(
                "this run's seats are tier {} (small or local), whose changes need a check: add --check CMD (or [work] checks in .forum/runtime.toml)",
                v.tier
            )));
        }
        w.verification = Some(v);
    }
    Ok(())
}

/// The context provider `source` names, if any (see [`RunOptions::context_provider`]).
pub(crate) fn context_provider(
    source: &ContextSource,
    pre: impl FnOnce() -> Result<Vec<(Entry, Option<Value>)>>,
) -> Result<Option<Arc<dyn ContextProvider>>> {
    match source {
        ContextSource::None => Ok(None),
        ContextSource::Command(c) => {
            let argv = argv_of("context-cmd", &c.line)?;
            let timeout = seconds("context-timeout", c.timeout)?;
            Ok(Some(Arc::new(CommandContext::new(argv, timeout))))
        }
        ContextSource::Capsule => {
            let pre = pre()?;
            Ok(Some(Arc::new(LedgerContext::new(
                "the ledger capsule",
                move |ledger| {
                    capsule_text_of(&pre, ledger, CAPSULE_MAX_ITEMS, CAPSULE_MAX_TEXT_CHARS)
                        .map_err(Into::into)
                },
            ))))
        }
    }
}

/// Why the capsule text of a ledger could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CapsuleError {
    /// Reading the ledger failed.
    #[error(transparent)]
    Read(#[from] crate::ledger::StorageError),
    /// An entry below the ledger's length is absent.
    #[error("the ledger has no entry at seq {0}")]
    Missing(u64),
}

/// The capsule text of a ledger whose entries up to some seq were read already (`pre`, read
/// in one walk) and whose newer entries are read through `ledger`.
pub(crate) fn capsule_text_of(
    pre: &[(Entry, Option<Value>)],
    ledger: &dyn Storage,
    max_items: usize,
    max_text_chars: usize,
) -> std::result::Result<String, CapsuleError> {
    let mut items = pre.to_vec();
    let n = ledger.len()?;
    for seq in items.len() as u64..n {
        let e = ledger.get(seq)?.ok_or(CapsuleError::Missing(seq))?;
        let body = ledger.payload_at(seq)?;
        items.push((e, body));
    }
    let snap = report::Snapshot::from_items(items);
    Ok(report::capsule_text(&report::build_context_capsule(
        &snap,
        max_items,
        max_text_chars,
    )))
}

/// The values of every variable a runtime config names (`api_key_env`, the `env` a program is
/// handed, a preset's key variables; see `config::Runtime::secret_env`), read from the
/// environment here, at the edge: the scanner redacts them wherever a body holds them,
/// whatever the policy allows.
pub(crate) fn key_values(runtime: &config::Runtime) -> Vec<String> {
    runtime
        .secret_env()
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .collect()
}

/// Every entry of a git ledger with its body, in one walk (none when it does not exist yet).
pub(crate) fn preload(store: &GitStore) -> Result<Vec<(Entry, Option<Value>)>> {
    let read = |e: crate::store::git::StoreError| Error::internal(e.to_string()).with_source(e);
    if !store.exists().map_err(read)? {
        return Ok(Vec::new());
    }
    crate::surface::reports::load_git(store).map_err(read)
}

/// Refuses an empty, NUL-holding or over-long shell command given to `flag`.
fn check_commands(flag: &str, commands: &[String]) -> Result<()> {
    for c in commands {
        if c.trim().is_empty() || c.contains('\0') || c.len() > config::MAX_CHECK_BYTES {
            return Err(Error::usage(format!(
                "{flag} {c:?}: give a non-empty shell command of at most {} bytes",
                config::MAX_CHECK_BYTES
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::surface::Class;

    fn refused(o: RunOptions, needle: &str) {
        let e = o.build(Policy::default()).unwrap_err();
        assert_eq!(e.class, Class::Usage, "{e}");
        assert!(e.message.contains(needle), "{needle}: {e}");
    }

    #[test]
    fn bad_options_are_usage_errors_before_anything_runs() {
        refused(
            RunOptions {
                max_seconds: Some(f64::NAN),
                ..RunOptions::default()
            },
            "--max-seconds",
        );
        refused(
            RunOptions {
                gate_deadline: Some(-1.0),
                ..RunOptions::default()
            },
            "--gate-deadline",
        );
        refused(
            RunOptions {
                delivery_profile: Some("poet".into()),
                ..RunOptions::default()
            },
            "valid profiles: operator, engineer, researcher, executive",
        );
        refused(
            RunOptions {
                verify: Some(CommandSpec {
                    line: "check".into(),
                    timeout: 0.0,
                }),
                ..RunOptions::default()
            },
            "--verify-timeout",
        );
        refused(
            RunOptions {
                context: ContextSource::Command(CommandSpec {
                    line: String::new(),
                    timeout: 5.0,
                }),
                ..RunOptions::default()
            },
            "--context-cmd",
        );
    }

    #[test]
    fn good_options_become_the_engines_options() {
        let o = RunOptions {
            max_model_calls: Some(3),
            max_seconds: Some(9.0),
            delivery_profile: Some("Engineer".into()),
            gate_waves: vec![2, 1, 2],
            gate_deadline: Some(60.0),
            gate_on_expiry: Some("approve".into()),
            verify: Some(CommandSpec {
                line: "check --strict".into(),
                timeout: 5.0,
            }),
            ..RunOptions::default()
        };
        let built = o.build(Policy::default()).unwrap();
        assert_eq!(built.max_model_calls, Some(3));
        assert_eq!(built.max_seconds, Some(9.0));
        assert_eq!(
            built.gates.waves.iter().copied().collect::<Vec<_>>(),
            [1, 2]
        );
        assert_eq!(built.gates.deadline_seconds, Some(60.0));
        assert_eq!(built.gates.on_expiry.as_deref(), Some("approve"));
        assert!(built.verifier.is_some());
        assert!(
            built.context.is_none(),
            "the context is made once the ledger is open"
        );
        let capsule = RunOptions {
            context: ContextSource::Capsule,
            ..RunOptions::default()
        };
        assert!(
            capsule
                .context_provider(|| Ok(Vec::new()))
                .unwrap()
                .is_some()
        );
        assert!(
            RunOptions::default()
                .context_provider(|| panic!("no capsule asked for"))
                .unwrap()
                .is_none()
        );
    }
}
