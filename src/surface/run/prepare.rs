//! One way to assemble a run, for every way of starting or resuming one: the command line's
//! `submit` and `resume`, the daemon's and MCP's `submit` and `resume`, and a campaign's rounds
//! from either. Each transport decodes its request into a [`RunSetup`] and calls [`prepare`];
//! where the transports differ, the difference is a field of the setup, never a code path of
//! their own.

use std::path::Path;

use serde_json::Value as J;

use super::options::{self, RunOptions};
use crate::exec::config::{self, Runtime};
use crate::policy::Policy;
use crate::roster::Roster;
use crate::run;
use crate::surface::{Error, Result};

/// What kind of run is assembled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// One request run (submit or resume): `[work] enabled` may turn work on, the repository
    /// may be context, and the seats' verification tier and the agent presets' network apply.
    Single,
    /// A campaign's rounds: only an explicit `work` works in the repository, and a round
    /// writes exactly Forum's entries (no repository context, no verification tier).
    CampaignRound,
}

/// A run as a transport asks for it, decoded; every field is a decision the transport made.
#[derive(Debug, Clone)]
pub(crate) struct RunSetup<'a> {
    /// The typed options of the request.
    pub(crate) spec: RunOptions,
    /// The run a resume continues: its request seq and body, whose recorded options fill those
    /// the request does not give.
    pub(crate) resumed: Option<(u64, &'a J)>,
    /// The roster the run routes with.
    pub(crate) roster: &'a Roster,
    /// The repository the run works in.
    pub(crate) dir: &'a Path,
    /// The ledger the run writes.
    pub(crate) ledger: &'a str,
    /// A run or a campaign's rounds.
    pub(crate) shape: Shape,
    /// Whether the repository is context, when the caller chose (see
    /// [`options::repo_context_on`]); campaign rounds never take it.
    pub(crate) repo_choice: Option<bool>,
    /// The longest any run may take here (the daemon's submit limit): the request's
    /// `max_seconds` is capped at it, and it is the run's limit when the request gives none.
    pub(crate) max_seconds_cap: Option<f64>,
    /// The executors a resumed run recorded replace the runtime's (the command line without
    /// executor flags). The daemon keeps its own runtime and runs a resume on the recorded
    /// executors' seats itself.
    pub(crate) recorded_executors: bool,
    /// Refuse a runtime whose executors cannot run (`cannot run: ...`, a usage error) before
    /// the seats' tier is applied. The daemon checked its executors when it started.
    pub(crate) refuse_unready: bool,
}

/// A run assembled: its options checked, and the engine's options built from them.
pub(crate) struct Prepared {
    /// The typed options after a resume filled them and the repository context was decided.
    pub(crate) spec: RunOptions,
    /// The engine's options: policy, budgets, gates, secrets, work settings, records.
    pub(crate) opts: run::Options,
    /// The runtime config the run's executors come from, when there is one.
    pub(crate) runtime: Option<Runtime>,
}

/// Assembles the run `setup` asks for. `policy` and `runtime` give the policy and the runtime
/// config its executors come from (`None`: none configured); each is called once, in that
/// order, after what can be checked without it, so a bad option is refused before any
/// configuration is read. `say` hears the lines a person may want (which executors a resume
/// runs on, the sandbox's note), in order, before any later refusal.
pub(crate) fn prepare(
    setup: RunSetup<'_>,
    policy: impl FnOnce() -> Result<Policy>,
    runtime: impl FnOnce() -> Result<Option<Runtime>>,
    say: &dyn Fn(&str),
) -> Result<Prepared> {
    let RunSetup {
        mut spec,
        resumed,
        roster,
        dir,
        ledger,
        shape,
        repo_choice,
        max_seconds_cap,
        recorded_executors,
        refuse_unready,
    } = setup;
    if let Some(cap) = max_seconds_cap {
        spec.max_seconds = Some(spec.max_seconds.map_or(cap, |s| s.min(cap)));
    }
    let mut recorded = None;
    if let Some((seq, body)) = resumed {
        spec.restore(seq, body)?;
        if recorded_executors {
            recorded = super::recorded::runtime_of(seq, body)?;
        }
    }
    let mut opts = spec.build(policy()?)?;
    let mut runtime = runtime()?;
    if let Some((seq, rt)) = recorded
        && let Some(current) = runtime.take()
    {
        say(&format!(
            "resuming run {seq} on the executors it recorded: {} (executor flags given to resume replace them)",
            config::record::describe(&rt)
        ));
        runtime = Some(super::recorded::with_recorded(current, rt));
    }
    if shape == Shape::Single {
        let context = runtime.as_ref().map(|r| r.context).unwrap_or_default();
        spec.repo_context =
            options::repo_context_on(repo_choice, &context).then(|| dir.to_path_buf());
    }
    if shape == Shape::Single {
        // A campaign's rounds record what Forum's do: no runtime.
        opts.runtime_record = runtime.as_ref().and_then(config::record::record);
    }
    if let Some(rt) = &runtime {
        // The values of the runtime's key variables are redacted wherever a body holds them.
        opts.secrets.scanner = crate::secrets::Scanner::with_literals(options::key_values(rt));
    }
    let defaults = runtime.as_ref().map(|r| r.work.clone()).unwrap_or_default();
    opts.work = match shape {
        Shape::Single => {
            let open = super::work::git_opener(dir.to_path_buf(), ledger.to_string());
            Some(spec.work_options(&defaults, ledger, open)?)
        }
        Shape::CampaignRound => {
            crate::surface::campaign::work_options(&spec, &defaults, dir.to_path_buf(), ledger)?
        }
    };
    if let Some(note) = opts.work.as_ref().and_then(|w| w.sandbox.note()) {
        say(&format!("note: {note}"));
    }
    if refuse_unready && let Some(rt) = &runtime {
        refuse_if_unready(rt, roster)?;
    }
    if shape == Shape::Single
        && let Some(rt) = &runtime
    {
        options::apply_verification(config::verify::for_run(rt, roster), &mut opts)?;
        options::apply_preset_net(rt, roster, &mut opts);
    }
    Ok(Prepared {
        spec,
        opts,
        runtime,
    })
}

/// Refuses a runtime with an issue that would stop the run, naming the first.
fn refuse_if_unready(rt: &Runtime, roster: &Roster) -> Result<()> {
    let issues = config::issues(rt, roster, &crate::config::RealFacts);
    let Some(first) = issues.first() else {
        return Ok(());
    };
    let more = if issues.len() > 1 {
        format!(
            " (and {} more: git forum runtime inspect)",
            issues.len() - 1
        )
    } else {
        String::new()
    };
    Err(Error::usage(format!("cannot run: {first}{more}")))
}
