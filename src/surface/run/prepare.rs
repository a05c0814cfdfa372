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
    spec.take_default_ceilings(runtime.as_ref(), &mut opts)?;
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
        options::decide_repo_context(&mut spec, repo_choice, runtime.as_ref(), dir);
    }
    if shape == Shape::Single {
        // A campaign's rounds record what Forum's do: no runtime.
        opts.runtime_record = runtime.as_ref().and_then(config::record::record);
    }
    opts.observe = runtime.as_ref().map(|r| r.observe).unwrap_or_default();
    if let Some(rt) = &runtime {
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
    take_dispatch(&spec, &mut opts, runtime.as_ref(), dir, ledger, shape)?;
    if let Some(note) = opts.work.as_ref().and_then(|w| w.sandbox.note()) {
        say(&format!("note: {note}"));
    }
    if refuse_unready && let Some(rt) = &runtime {
        let works = opts.work.as_ref().is_some_and(|w| w.enabled);
        opts.cannot_start = refuse_if_unready(rt, roster, works)?;
    }
    if shape == Shape::Single {
        finish_single(&mut opts, runtime.as_ref(), roster)?;
    }
    Ok(Prepared {
        spec,
        opts,
        runtime,
    })
}

/// The last steps of a single run: the seats' verification tier, then the rules it runs under
/// recorded (the roster, the policy and the limits as it will use them), so that a strict
/// replay runs it under these rather than under the files of its day.
fn finish_single(
    opts: &mut run::Options,
    runtime: Option<&Runtime>,
    roster: &Roster,
) -> Result<()> {
    if let Some(rt) = runtime {
        options::apply_verification(config::verify::for_run(rt, roster), opts)?;
    }
    opts.rules_record = Some(run::replay::rules::record(opts, roster));
    Ok(())
}

/// Hands the run's tasks to workers through NATS when `--dispatch` (its settings filled from
/// `[dispatch]`) or `[dispatch] url` says so; `--dispatch` on a run that does not work in the
/// repository is refused. A campaign's rounds dispatch only when asked (as they work in the
/// repository only when asked): `[dispatch] url` alone does not send them; one dispatcher
/// serves every round.
fn take_dispatch(
    spec: &RunOptions,
    opts: &mut run::Options,
    runtime: Option<&Runtime>,
    dir: &Path,
    ledger: &str,
    shape: Shape,
) -> Result<()> {
    // `--dispatch`, else `[dispatch] url` for a run that works in the repository.
    let configured = runtime
        .filter(|_| opts.work.as_ref().is_some_and(|w| w.enabled) && shape == Shape::Single)
        .and_then(|r| super::super::worker::configured(&r.dispatch));
    let given = spec.dispatch.as_ref().map(|d| match runtime {
        Some(r) => d.filled(&r.dispatch),
        None => d.clone(),
    });
    if let Some(d) = given.as_ref().or(configured.as_ref()) {
        match opts.work.as_mut() {
            Some(w) if w.enabled || (spec.resumes_work && shape == Shape::Single) => {
                w.dispatch = Some(crate::surface::worker::dispatcher(
                    dir,
                    ledger,
                    &d.nats,
                    d.remote.as_deref(),
                )?);
            }
            _ => {
                return Err(Error::usage(
                    "--dispatch sends the tasks of a --work run to workers: add --work",
                ));
            }
        }
    }
    Ok(())
}

/// Refuses a runtime with an issue that would stop the run, naming the first. When the only
/// issue of a run that works in the repository (`works`) is that its worker seat's program is
/// missing, the run is not refused: it starts, records that reason and stops before any model
/// call (the reason is returned), so the record shows why the run did nothing.
fn refuse_if_unready(rt: &Runtime, roster: &Roster, works: bool) -> Result<Option<String>> {
    let issues = config::issues(rt, roster, &crate::config::RealFacts);
    let Some(first) = issues.first() else {
        return Ok(None);
    };
    if works
        && issues
            .iter()
            .all(|i| i.missing_program && i.place == "worker seat")
    {
        return Ok(Some(first.to_string()));
    }
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

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::exec::config::Flags;
    use crate::surface::Class;

    fn runtime() -> Runtime {
        let flags = Flags {
            cmd: Some("/bin/true".into()),
            ..Flags::default()
        };
        config::merge(None, &flags).unwrap()
    }

    /// One request's options, as every transport decodes them.
    fn request() -> RunOptions {
        RunOptions {
            max_model_calls: Some(7),
            max_seconds: Some(900.0),
            gate_waves: vec![1],
            delivery_profile: Some("engineer".into()),
            max_tokens: Some(5000),
            secrets: Some(crate::secrets::Mode::Block),
            ..RunOptions::default()
        }
    }

    fn setup<'a>(spec: RunOptions, roster: &'a Roster, dir: &'a Path) -> RunSetup<'a> {
        RunSetup {
            spec,
            resumed: None,
            roster,
            dir,
            ledger: "main",
            shape: Shape::Single,
            repo_choice: None,
            max_seconds_cap: None,
            recorded_executors: true,
            refuse_unready: true,
        }
    }

    /// What the engine is told, as far as it can be compared.
    fn seen(p: &Prepared) -> J {
        let w = p.opts.work.as_ref();
        serde_json::json!({
            "max_model_calls": p.opts.max_model_calls,
            "max_seconds": p.opts.max_seconds,
            "gate_waves": p.opts.gates.waves.iter().collect::<Vec<_>>(),
            "delivery_profile": p.opts.delivery_profile,
            "judge_intent": p.opts.judge_intent,
            "options_record": p.opts.options_record,
            "runtime_record": p.opts.runtime_record,
            "ceilings": p.opts.ceilings.max_tokens,
            "work": w.map(|w| serde_json::json!({"enabled": w.enabled, "checks": w.checks,
                "allow_cmds": w.allow_cmds, "max_tool_calls": w.max_tool_calls})),
            "repo_context": p.spec.repo_context,
        })
    }

    #[test]
    fn the_command_line_and_the_daemon_prepare_one_request_alike() {
        let roster = Roster::default_roster();
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime();
        let quiet = |_: &str| {};
        // The command line: its own files, read after the options are checked.
        let cli = prepare(
            setup(request(), &roster, dir.path()),
            || Ok(Policy::default()),
            || Ok(Some(rt.clone())),
            &quiet,
        )
        .unwrap();
        // The daemon and MCP: the server's runtime, its limit on a run's seconds, no check of
        // executors it checked when it started.
        let daemon = prepare(
            RunSetup {
                max_seconds_cap: Some(600.0),
                recorded_executors: false,
                refuse_unready: false,
                ..setup(request(), &roster, dir.path())
            },
            || Ok(Policy::default()),
            || Ok(Some(rt.clone())),
            &quiet,
        )
        .unwrap();
        let (c, d) = (seen(&cli), seen(&daemon));
        assert_eq!(c["max_seconds"], 900.0);
        assert_eq!(d["max_seconds"], 600.0, "the daemon's limit caps a run");
        let same = |mut v: J| {
            v["max_seconds"] = J::Null;
            v
        };
        assert_eq!(same(c.clone()), same(d));
        assert_eq!(c["gate_waves"], serde_json::json!([1]));
        assert_eq!(c["options_record"]["secrets"], "block");
        assert!(c["runtime_record"].is_object(), "{c}");
        assert_eq!(c["work"]["enabled"], false);
        assert_eq!(c["repo_context"], dir.path().to_str().unwrap());
    }

    #[test]
    fn the_runtimes_default_checks_and_ceilings_stand_in_for_flags_not_given() {
        let roster = Roster::default_roster();
        let dir = tempfile::tempdir().unwrap();
        let mut rt = runtime();
        rt.work.default_checks = vec!["cargo test".into()];
        rt.spend = config::SpendConfig {
            max_cost_pico: Some(crate::spend::usd_to_pico(5.0)),
            max_tokens: Some(9000),
        };
        let run = |spec: RunOptions| {
            let p = prepare(
                setup(spec, &roster, dir.path()),
                || Ok(Policy::default()),
                || Ok(Some(rt.clone())),
                &|_| {},
            )
            .unwrap();
            (seen(&p), p.opts.ceilings.max_cost_pico)
        };
        let (s, cost) = run(RunOptions {
            work: true,
            ..RunOptions::default()
        });
        assert_eq!(s["work"]["checks"], serde_json::json!(["cargo test"]));
        assert_eq!(s["ceilings"], 9000);
        assert_eq!(cost, Some(crate::spend::usd_to_pico(5.0)));
        // Recorded with the run's options, as the flags would be.
        assert_eq!(
            s["options_record"],
            serde_json::json!({"max_tokens": 9000, "max_cost_usd": 5.0})
        );
        // The command's own --check and ceilings win.
        let (s, cost) = run(RunOptions {
            work: true,
            checks: vec!["make test".into()],
            max_tokens: Some(10),
            max_cost_usd: Some(0.5),
            ..RunOptions::default()
        });
        assert_eq!(s["work"]["checks"], serde_json::json!(["make test"]));
        assert_eq!(s["ceilings"], 10);
        assert_eq!(cost, Some(crate::spend::usd_to_pico(0.5)));
    }

    #[test]
    fn a_campaign_round_records_what_forum_does_and_takes_no_repository_context() {
        let roster = Roster::default_roster();
        let dir = tempfile::tempdir().unwrap();
        let round = prepare(
            RunSetup {
                shape: Shape::CampaignRound,
                refuse_unready: false,
                ..setup(request(), &roster, dir.path())
            },
            || Ok(Policy::default()),
            || Ok(Some(runtime())),
            &|_| {},
        )
        .unwrap();
        let s = seen(&round);
        assert_eq!(s["runtime_record"], J::Null);
        assert_eq!(s["work"], J::Null, "no work without an explicit --work");
        assert_eq!(s["repo_context"], J::Null);
        assert_eq!(s["max_model_calls"], 7);
    }

    #[test]
    fn a_bad_option_is_refused_before_any_configuration_is_read() {
        let roster = Roster::default_roster();
        let dir = tempfile::tempdir().unwrap();
        let bad = RunOptions {
            delivery_profile: Some("poet".into()),
            ..request()
        };
        let Err(e) = prepare(
            setup(bad, &roster, dir.path()),
            || Ok(Policy::default()),
            || panic!("the runtime was read for a refused option"),
            &|_| {},
        ) else {
            panic!("a bad profile was prepared");
        };
        assert_eq!(e.class, Class::Usage);
        let e = prepare(
            setup(request(), &roster, dir.path()),
            || Err(Error::unavailable("policy.toml: bad")),
            || panic!("the runtime was read after the policy failed"),
            &|_| {},
        )
        .err()
        .expect("the policy's failure");
        assert_eq!(e.message, "policy.toml: bad");
    }

    #[test]
    fn a_runtime_that_cannot_run_is_refused_only_when_asked() {
        let roster = Roster::default_roster();
        let dir = tempfile::tempdir().unwrap();
        let said = RefCell::new(Vec::<String>::new());
        let say = |l: &str| said.borrow_mut().push(l.to_string());
        let e = prepare(
            setup(request(), &roster, dir.path()),
            || Ok(Policy::default()),
            || Ok(Some(Runtime::default())),
            &say,
        )
        .err()
        .expect("no executor configured");
        assert_eq!(e.class, Class::Usage);
        assert!(e.message.starts_with("cannot run: "), "{}", e.message);
        let daemon = RunSetup {
            refuse_unready: false,
            ..setup(request(), &roster, dir.path())
        };
        assert!(prepare(daemon, || Ok(Policy::default()), || Ok(None), &say).is_ok());
        // A run that does not work in the repository has no sandbox to note.
        assert!(said.borrow().is_empty(), "{:?}", said.borrow());
    }
}
