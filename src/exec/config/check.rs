//! The checks that need facts from outside (environment variables, programs on `PATH`, what a
//! host name resolves to): every issue that would stop a run, without starting one.

use std::fmt;

use super::{ExecutorSpec, Runtime, Unresolved};
use crate::exec::endpoint::{self, Policy};
use crate::roster::{Roster, Tier};

// ---- checks that need facts from outside ----

/// What the caller knows about the machine. The CLI answers from the real environment and
/// `PATH`; tests answer from tables. Keeps this module free of I/O.
pub(crate) trait Facts {
    /// Whether the environment variable `name` is set (and not empty).
    fn var_is_set(&self, name: &str) -> bool;
    /// Whether `program` can be run (on `PATH`, or a path to an executable file).
    fn program_found(&self, program: &str) -> bool;
    /// Why every address the name `host` resolves to is refused under `policy` (the check a
    /// run makes when it connects), or `None` when one is admitted or the name cannot be
    /// resolved now. The default resolves nothing.
    fn refuses_host(&self, _host: &str, _policy: &Policy) -> Option<String> {
        None
    }
    /// Where `api = "anthropic"` executors are sent (the default: the public API; the
    /// environment may move it, see `exec::anthropic::messages_url`).
    fn anthropic_url(&self) -> String {
        super::ANTHROPIC_URL.to_string()
    }
}

/// The endpoint `spec` calls, as `facts` place it (chat: its URL; Anthropic: where the
/// environment sends it), or `None` for a command.
pub(crate) fn endpoint_of(spec: &ExecutorSpec, facts: &dyn Facts) -> Option<String> {
    match &spec.kind {
        super::ExecutorKind::Anthropic { .. } => Some(facts.anthropic_url()),
        _ => spec.url().map(str::to_string),
    }
}

/// Why [`check_endpoint`] refuses an endpoint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EndpointRefusal {
    /// The URL itself, against the policy.
    #[error(transparent)]
    Url(#[from] endpoint::UrlRefusal),
    /// Every address the host name resolves to is refused (`endpoint`: the URL as shown).
    #[error("{endpoint}: {why}")]
    Host { endpoint: String, why: String },
}

/// The endpoint check a run makes, without connecting: the URL against its policy, then a
/// name's addresses as the connection-time resolver would vet them (through `facts`).
pub(crate) fn check_endpoint(
    url: &str,
    policy: &Policy,
    facts: &dyn Facts,
) -> Result<(), EndpointRefusal> {
    let checked = endpoint::check_url(url, policy)?;
    if let endpoint::CheckedHost::Name { name, .. } = &checked.host
        && let Some(why) = facts.refuses_host(name, policy)
    {
        return Err(EndpointRefusal::Host {
            endpoint: checked.display,
            why,
        });
    }
    Ok(())
}

/// One reason a run would not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Issue {
    /// Where: `default`, `cheap`, `worker seat`, `control roles`...
    pub(crate) place: String,
    /// What is wrong and how to fix it (one line; never a key value).
    pub(crate) problem: String,
    /// Whether the problem is only that the executor's program cannot be found: a `--work`
    /// run whose worker seat has just this problem starts, records why, and stops.
    pub(crate) missing_program: bool,
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.place, self.problem)
    }
}

/// The problems of executor `spec` other than a missing program: its endpoint against its
/// policy, and its key variable.
fn other_problems(spec: &ExecutorSpec, facts: &dyn Facts) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(u) = endpoint_of(spec, facts)
        && let Err(r) = check_endpoint(&u, &spec.policy(), facts)
    {
        out.push(format!("endpoint refused: {r}"));
    }
    if let Some(why) = super::structured::refusal(spec) {
        out.push(why);
    }
    if let Some(k) = spec.key_env()
        && !facts.var_is_set(k)
    {
        out.push(format!(
                "the key variable {k} is not set: export {k}=<your key> in the shell that runs git forum (only its name is stored)"
            ));
    }
    out
}

/// Why `spec`'s program cannot be run, if it cannot.
fn missing_program(spec: &ExecutorSpec, facts: &dyn Facts) -> Option<String> {
    let p = spec.program()?;
    (!facts.program_found(p)).then(|| {
        if p.contains('/') {
            format!("program {p} does not exist or is not executable")
        } else {
            format!("program {p} is not on PATH")
        }
    })
}

/// Every issue that would stop a run with this runtime and roster; empty means ready. Every
/// configured executor is checked (a run refuses a broken config before calling any model),
/// and each role is resolved the way the run resolves it, capable → frontier → cheap
/// fallback included.
pub(crate) fn issues(rt: &Runtime, roster: &Roster, facts: &dyn Facts) -> Vec<Issue> {
    let mut out = Vec::new();
    if rt.is_empty() {
        out.push(Issue {
            place: "control roles".into(),
            problem: "no default executor for the control roles (planner, validator, synthesizer); "
                .to_string() + &Unresolved::NothingConfigured.to_string(),
            missing_program: false,
        });
        let mut demanded: Vec<Tier> = roster.agents().iter().map(|a| a.model_tier).collect();
        demanded.sort();
        demanded.dedup();
        for t in demanded {
            out.push(Issue {
                place: t.as_str().into(),
                problem: format!("no executor for roster tier {t}, and no default to fall back to"),
                missing_program: false,
            });
        }
        return out;
    }
    if let Err(u) = rt.for_control() {
        out.push(Issue {
            place: "control roles".into(),
            problem: u.to_string(),
            missing_program: false,
        });
    }
    if let Some(Err(u)) = rt.seat("worker", &rt.seats.worker) {
        out.push(Issue {
            place: "worker seat".into(),
            problem: u.to_string(),
            missing_program: false,
        });
    }
    for (place, spec) in rt.in_use() {
        for problem in other_problems(&spec, facts) {
            out.push(Issue {
                place: place.clone(),
                problem,
                missing_program: false,
            });
        }
        if let Some(problem) = missing_program(&spec, facts) {
            out.push(Issue {
                place: place.clone(),
                problem,
                missing_program: true,
            });
        }
    }
    out
}
