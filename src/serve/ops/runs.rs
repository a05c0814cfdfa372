//! The daemon's run routes: runs, gates, the server's runtime, submit, resume and plan, each a
//! thin call into the surface.

use super::*;
use crate::surface::request::{self, runs::Submit};
use crate::surface::run::prepare::{Prepared, RunSetup, Shape, prepare};

impl Dispatcher {
    // ----- runs and gates -----

    /// Reads bodies of `view` for the surface's [`Bodies`].
    fn read_bodies<'a>(
        store: &'a GitStore,
        view: &'a EntryCache,
    ) -> impl Fn(&Entry) -> Result<Option<J>, surface::Error> + 'a {
        move |e| {
            Self::body_in(store, view, e.seq)
                .map(|b| b.map(|v| v.to_serde()))
                .map_err(|r| surface::Error::internal(r.message()))
        }
    }

    pub(crate) fn runs(&self) -> Res {
        let view = self.snapshot()?;
        let store = self.reader()?;
        let read = Self::read_bodies(&store, &view);
        let mut runs = surface::run::runs(&view.entries, &Bodies::new(&read));
        if let Ok(r) = runs.as_mut() {
            surface::run::keep_existing_branches(r, &self.cfg.dir);
        }
        answer(runs)
    }

    pub(crate) fn gates(&self) -> Res {
        let view = self.snapshot()?;
        let store = self.reader()?;
        let read = Self::read_bodies(&store, &view);
        answer(surface::run::gates(&view.entries, &Bodies::new(&read)))
    }

    /// Approve, edit or reject the pending gate `(run_seq, wave)`, by the one rule of
    /// [`gate::decide`](crate::gate::decide): the gate must be pending, and the decision is
    /// parented on it.
    pub(crate) fn gate(&self, which: &str, req: &Request<'_>) -> Res {
        let (key, note, decision) = match which {
            kind::GATE_EDITED => {
                let a: request::work::GateEdit = request::decode(req.body)?;
                let edits = a.pairs();
                (a.key, a.note, Decision::Edit(edits))
            }
            kind::GATE_REJECTED => {
                let a: request::work::GateReject = request::decode(req.body)?;
                (a.key, None, Decision::Reject(a.reason))
            }
            _ => {
                let a: request::work::GateApprove = request::decode(req.body)?;
                (a.key, a.note, Decision::Approve)
            }
        };
        let ask = Decide::of(&key, note, decision, &self.cfg.dir);
        let view = self.snapshot()?;
        let pending = {
            let store = self.reader()?;
            let read = Self::read_bodies(&store, &view);
            surface::run::pending(&view.entries, &Bodies::new(&read)).map_err(reply_of)?
        };
        let mut store = Shared {
            d: self,
            reader: self.reader()?,
        };
        answer(surface::run::decide(&pending, &mut store, &ask, self.now()))
    }

    // ----- executors -----

    /// The server's runtime, the same report as `git forum runtime inspect --json`; ready
    /// only when the server can also run models with it. A server given its seats directly
    /// (tests, embedders) has no runtime config: the report is of the empty one, and ready when
    /// the seats are there.
    pub(crate) fn runtime(&self) -> Res {
        let facts = crate::config::RealFacts;
        let mut report = match &self.executors.loaded {
            Some(loaded) => crate::surface::runtime::inspect(loaded, &self.roster, &facts),
            None => {
                let empty = crate::config::Loaded {
                    runtime: config::merge(None, &config::Flags::default())
                        .map_err(|e| Reply::from(crate::surface::Error::internal(e.to_string())))?,
                    source: None,
                };
                let mut r = crate::surface::runtime::inspect(&empty, &self.roster, &facts);
                r.issues.clear();
                r
            }
        };
        if let Err(why) = &self.executors.seats
            && report.issues.is_empty()
        {
            report.issues.push(crate::surface::runtime::Issue {
                place: "default".into(),
                problem: why.to_string(),
            });
        }
        report.ready = report.issues.is_empty();
        serde_json::to_value(report).map_err(|e| {
            Reply::from(crate::surface::Error::internal(format!(
                "encoding the report: {e}"
            )))
        })
    }

    /// How the local model stands, the same report as `git forum model status --json` (the
    /// daemon only reports it; starting and stopping it are the command line's).
    pub(crate) fn model_status(&self) -> Res {
        answer(surface::model::home().and_then(|h| surface::model::status(&h)))
    }

    /// The run options of a daemon request, as the surface takes them: a submit never runs
    /// longer than the server's limit. `resumed`: the request seq and body of the run a resume
    /// continues, whose recorded options fill those the request does not give.
    fn run_options(&self, a: &Submit, resumed: Option<&(u64, J)>) -> Result<run::Options, Reply> {
        let [total, request, task, upstream] = a.budget.values(|key, n| {
            surface::Error::usage(format!(
                "field {key:?} must be a non-negative integer, not {n}"
            ))
        })?;
        let any = total.is_some() || request.is_some() || task.is_some() || upstream.is_some();
        let spec = RunOptions {
            max_model_calls: a.max_model_calls,
            max_seconds: a.max_seconds,
            context_budget: any.then_some(ContextBudget {
                max_total_tokens: total,
                max_request_tokens: request,
                max_task_tokens: task,
                max_upstream_tokens: upstream,
                bytes_per_token: 4,
            }),
            context: if a.use_capsule_context {
                ContextSource::Capsule
            } else {
                ContextSource::None
            },
            checkpoint_each_wave: a.checkpoint_each_wave,
            delivery_profile: a.delivery_profile.clone(),
            gate_waves: a.gate_waves.iter().map(|w| *w as usize).collect(),
            judge_intent: a.judge_intent,
            revise: a.revise,
            work: a.work,
            solo: a.solo,
            checks: a.checks.clone(),
            allow_cmds: a.allow_cmds.clone(),
            max_tool_calls: a
                .max_tool_calls
                .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            attempts: a.attempts.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            max_tokens: a.ceilings.max_tokens,
            max_cost_usd: a.ceilings.max_cost_usd,
            sandbox: a.sandbox,
            sandbox_net: a.sandbox_net,
            sandbox_allow_host: a.sandbox_allow_host.clone(),
            // The daemon's `[dispatch]` table gives the remote, credentials and TLS settings.
            dispatch: a
                .dispatch
                .as_ref()
                .map(|url| crate::surface::worker::DispatchSpec::at(url)),
            ..RunOptions::default()
        };
        let repo_choice = a.repo_choice()?;
        let setup = RunSetup {
            spec,
            resumed: resumed.map(|(seq, body)| (*seq, body)),
            roster: &self.roster,
            dir: &self.cfg.dir,
            ledger: &self.cfg.ledger,
            shape: Shape::Single,
            repo_choice,
            max_seconds_cap: Some(self.cfg.submit_seconds),
            recorded_executors: false,
            refuse_unready: false,
        };
        let runtime = || Ok(self.executors.loaded.as_ref().map(|l| l.runtime.clone()));
        let Prepared { spec, mut opts, .. } =
            prepare(setup, || Ok(self.policy.clone()), runtime, &|_| {}).map_err(reply_of)?;
        let reader = self.reader()?;
        opts.context = spec
            .context_provider(|| surface::run::options::preload(&reader))
            .map_err(reply_of)?;
        Ok(opts)
    }

    fn run_clock(&self) -> RunClock {
        RunClock::new(self.cfg.timestamp).draining_with(self.draining.clone())
    }

    /// Runs `go` (a submit or a resume, with `opts`) on the shared ledger and answers the
    /// surface's run report, telling `progress` (MCP's progress notifications) as it goes; a run
    /// that the drain stopped is witnessed as interrupted.
    fn drive(&self, opts: &run::Options, progress: Option<&dyn run::Progress>, go: Go<'_>) -> Res {
        let seats = self.seats()?;
        self.drive_on(seats, opts, progress, go)
    }

    /// [`Dispatcher::drive`] on `seats`.
    fn drive_on(
        &self,
        seats: Arc<dyn Seats>,
        opts: &run::Options,
        progress: Option<&dyn run::Progress>,
        go: Go<'_>,
    ) -> Res {
        let clock = self.run_clock();
        let env = Env {
            roster: &self.roster,
            seats: seats.as_ref(),
            clock: &clock,
            progress: progress.unwrap_or(&run::Silent),
        };
        let mut store = Shared {
            d: self,
            reader: self.reader()?,
        };
        // A halt (POST /halt, `git forum halt`) reaches the run through its interrupt.
        let mut opts = opts.clone();
        let interrupt = opts
            .interrupt
            .get_or_insert_with(|| Arc::new(run::Interrupt::new()))
            .clone();
        let on_list = self.running.add(interrupt.clone());
        let watch = surface::run::halt::watch(self.reader()?.halts(), interrupt);
        let done = surface::run::submit::go(&mut store, &env, &opts, go);
        drop(watch);
        drop(on_list);
        let opts = &opts;
        let outcome = match done {
            Ok(o) => o,
            Err(e) => return Err(Self::run_failed(e)),
        };
        let mut interrupted = None;
        if self.is_draining() && outcome.status == Status::StoppedOnBudget {
            let e = self.append_new(&NewEntry {
                actor: "daemon".into(),
                kind: kind::INTERRUPTED.into(),
                causal_parent: Some(outcome.request_seq as i64),
                payload: Value::from_serde(&json!({
                    "reason": "the server was stopped while the run was in flight; it stopped at its next budget check",
                    "resume": format!("git forum resume {}", outcome.request_seq),
                })),
                ts: self.now(),
            })?;
            interrupted = Some(e.entry.seq);
        }
        let view = self.snapshot()?;
        let mut r = surface::run::run_report(
            &self.reader()?,
            &self.cfg.ledger,
            outcome,
            opts,
            view.root.clone(),
            view.entries.len() as u64,
        )
        .map_err(reply_of)?;
        r.git_forum_receipt.interrupted_seq = interrupted;
        answer(Ok(r))
    }

    /// A run that could not go on, as the daemon answers it: the class's status and what to
    /// do next over HTTP.
    fn run_failed(e: RunError) -> Reply {
        let status = surface::run::class_of(&e).http_status();
        let message = match &e {
            RunError::Gated {
                request_seq,
                run_seq,
                wave,
            } => format!(
                "{e}: POST /gate/approve (or /gate/edit, /gate/reject) with run_seq {run_seq} and wave {wave}, then POST /resume with run {request_seq}"
            ),
            RunError::Ledger(l) => l.to_string(),
            RunError::Interrupted { .. } => format!("{e} (GET /runs shows the run)"),
            RunError::Plan(_) | RunError::Synthesis(_) | RunError::Work(_) | RunError::Start(_) => {
                format!("{e} (what was witnessed stays in the ledger: GET /runs)")
            }
            RunError::Request(m) | RunError::Resume(m) => m.clone(),
            RunError::SecretBlocked { .. } => format!("{e} (GET /runs shows the run)"),
        };
        Reply::error(status, message)
    }

    pub(crate) fn submit(&self, req: &Request<'_>) -> Res {
        let a: Submit = request::decode(req.body)?;
        let request = a.request.as_str();
        check_request(request).map_err(|e| bad(e.to_string()))?;
        let mut opts = self.run_options(&a, None)?;
        opts.interrupt = req.hooks.interrupt.clone();
        self.drive(&opts, req.hooks.progress, Go::Submit(request))
    }

    pub fn resume(&self, req: &Request<'_>) -> Res {
        let r: request::runs::Resume = request::decode(req.body)?;
        let target = r.run;
        let a = Submit {
            max_model_calls: r.max_model_calls,
            max_seconds: r.max_seconds,
            ceilings: r.ceilings,
            ..Submit::default()
        };
        let resumed = self.recorded_request(target)?;
        let mut opts = self.run_options(&a, resumed.as_ref())?;
        opts.interrupt = req.hooks.interrupt.clone();
        match self.recorded_seats(resumed.as_ref())? {
            Some(seats) => self.drive_on(seats, &opts, req.hooks.progress, Go::Resume(target)),
            None => self.drive(&opts, req.hooks.progress, Go::Resume(target)),
        }
    }

    /// The request seq and body of the run a resume of `target` continues, if any.
    fn recorded_request(&self, target: Option<u64>) -> Result<Option<(u64, J)>, Reply> {
        if self.is_draining() {
            return Err(Reply::from(crate::surface::Error::unavailable(
                "the server is shutting down and takes no new runs",
            )));
        }
        let view = self.snapshot()?;
        let store = self.reader()?;
        let read = Self::read_bodies(&store, &view);
        surface::run::recorded::recorded_request(&view.entries, &Bodies::new(&read), target)
            .map_err(reply_of)
    }

    /// The seats of the executors the run a resume continues (`resumed`: its request seq and
    /// body) recorded (over the server's `[work]` table), or `None` when it recorded none: the
    /// server's own then run it.
    fn recorded_seats(&self, resumed: Option<&(u64, J)>) -> Result<Option<Arc<dyn Seats>>, Reply> {
        let Some((seq, rt)) = (match resumed {
            Some((seq, body)) => {
                surface::run::recorded::runtime_of(*seq, body).map_err(reply_of)?
            }
            None => None,
        }) else {
            return Ok(None);
        };
        let current = self
            .executors
            .loaded
            .as_ref()
            .map(|l| l.runtime.clone())
            .unwrap_or_default();
        let rt = surface::run::recorded::with_recorded(current, rt);
        let issues = config::issues(&rt, &self.roster, &crate::config::RealFacts);
        if let Some(first) = issues.first() {
            return Err(Reply::from(crate::surface::Error::unavailable(format!(
                "run {seq} recorded executors that cannot run here: {first}"
            ))));
        }
        let fleet = crate::surface::run::Fleet::new(rt).map_err(|e| {
            Reply::from(crate::surface::Error::unavailable(format!(
                "run {seq} recorded executors that cannot run here: {e}"
            )))
        })?;
        Ok(Some(Arc::new(fleet) as Arc<dyn Seats>))
    }

    /// Halts a running run of the ledger (`run`: its request seq, default the latest running
    /// one), driven by this server or by any other process: the same operation as `git forum
    /// halt`. Waits up to `wait_seconds` (default 30) for it to stop.
    pub(crate) fn halt(&self, req: &Request<'_>) -> Res {
        let a: request::runs::Halt = request::decode(req.body)?;
        let wait = a.wait_seconds.unwrap_or(30.0);
        let ask = surface::run::halt::HaltAsk {
            run: a.run,
            by: a.by.unwrap_or_else(|| "http client".to_string()),
            reason: a.reason,
            wait: std::time::Duration::from_secs_f64(
                wait.clamp(0.0, surface::run::halt::MAX_WAIT.as_secs_f64()),
            ),
        };
        answer(surface::run::halt::halt(
            &self.reader()?,
            &self.cfg.ledger,
            &ask,
        ))
    }

    /// Plans a request with the orchestrator seat and writes nothing (a scratch ledger in
    /// memory, a model-call budget of zero), or, given `plan`, compiles that plan document.
    pub(crate) fn plan(&self, req: &Request<'_>) -> Res {
        let a: request::prose::Plan = request::decode(req.body)?;
        let ask = match (&a.plan, &a.request) {
            (Some(doc), _) => PlanAsk::Document(doc),
            (None, request) => PlanAsk::Request(request.as_deref().unwrap_or_default()),
        };
        let seats = match ask {
            PlanAsk::Request(_) => Some(self.seats()?),
            PlanAsk::Document(_) => None,
        };
        let clock = self.run_clock();
        surface::run::plan::plan(&self.roster, &self.policy, ask, || {
            let seats = seats
                .as_ref()
                .ok_or_else(|| surface::Error::internal("no seats to plan with"))?;
            Ok(Env {
                roster: &self.roster,
                seats: seats.as_ref(),
                clock: &clock,
                progress: &run::Silent,
            })
        })
        .map_err(reply_of)
    }
}
