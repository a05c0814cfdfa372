//! The daemon's run routes: runs, gates, the server's runtime, submit, resume and plan, each a
//! thin call into the surface.

use super::*;
use crate::surface::run::prepare::{Prepared, RunSetup, Shape, prepare};

impl Dispatcher {
    // ----- runs and gates -----

    /// Reads bodies of `view` for the surface's [`Bodies`].
    fn read_bodies<'a>(
        store: &'a GitStore,
        view: &'a Snapshot,
    ) -> impl Fn(&Entry) -> Result<Option<J>, String> + 'a {
        move |e| {
            Self::body_in(store, view, e.seq)
                .map(|b| b.map(|v| v.to_serde()))
                .map_err(|r| r.message().to_string())
        }
    }

    pub(crate) fn runs(&self) -> Res {
        let view = self.snapshot()?;
        let store = self.reader()?;
        let read = Self::read_bodies(&store, &view);
        answer(surface::run::runs(&view.entries, &Bodies::new(&read)))
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
        let fields: &[&str] = match which {
            kind::GATE_EDITED => &["run_seq", "wave", "approver", "edits", "note"],
            kind::GATE_REJECTED => &["run_seq", "wave", "approver", "reason"],
            _ => &["run_seq", "wave", "approver", "note"],
        };
        let a = Args::new(req.body, fields)?;
        let run_seq = a.int_req("run_seq")?;
        let wave = a.int_req("wave")?;
        let approver = a.text("approver")?;
        let decision = match which {
            kind::GATE_EDITED => Decision::Edit(Self::edits_of(&a)?),
            kind::GATE_REJECTED => Decision::Reject(a.str("reason")?.map(str::to_string)),
            _ => Decision::Approve,
        };
        let ask = Decide {
            run: None,
            run_seq: Some(run_seq),
            wave: Some(wave),
            approver: approver.to_string(),
            note: a.str("note")?.map(str::to_string),
            decision,
        };
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

    /// The `edits` field: a non-empty object {task_id: instruction}.
    fn edits_of(a: &Args<'_>) -> Result<Vec<(String, String)>, Reply> {
        match a.get("edits") {
            Some(J::Object(m)) if !m.is_empty() => m
                .iter()
                .map(|(id, text)| match text {
                    J::String(s) if !s.trim().is_empty() => Ok((id.clone(), s.clone())),
                    _ => Err(bad(format!(
                        "edits[{id:?}] must be a non-empty instruction string"
                    ))),
                })
                .collect(),
            _ => Err(bad(
                "field \"edits\" must be a non-empty object {task_id: instruction}",
            )),
        }
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
                problem: why.clone(),
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
    fn run_options(&self, a: &Args<'_>, resumed: Option<&(u64, J)>) -> Result<run::Options, Reply> {
        let budgets = [
            "context_token_budget",
            "request_context_token_budget",
            "task_context_token_budget",
            "upstream_token_budget",
        ]
        .map(|k| a.int(k));
        let [total, request, task, upstream] = budgets;
        let (total, request, task, upstream) = (total?, request?, task?, upstream?);
        let any = total.is_some() || request.is_some() || task.is_some() || upstream.is_some();
        let max_seconds = a.seconds("max_seconds")?;
        let mut spec = RunOptions {
            max_model_calls: a.int("max_model_calls")?,
            max_seconds,
            context_budget: any.then_some(ContextBudget {
                max_total_tokens: total,
                max_request_tokens: request,
                max_task_tokens: task,
                max_upstream_tokens: upstream,
                bytes_per_token: 4,
            }),
            context: if a.bool("use_capsule_context")?.unwrap_or(false) {
                ContextSource::Capsule
            } else {
                ContextSource::None
            },
            checkpoint_each_wave: a.bool("checkpoint_each_wave")?.unwrap_or(false),
            delivery_profile: a.str("delivery_profile")?.map(str::to_string),
            gate_waves: a
                .ints("gate_waves")?
                .into_iter()
                .map(|w| w as usize)
                .collect(),
            judge_intent: a.bool("judge_intent")?.unwrap_or(false),
            revise: a.bool("revise")?.unwrap_or(false),
            work: a.bool("work")?.unwrap_or(false),
            checks: checks_of(a)?,
            allow_cmds: strings_of(a, "allow_cmds")?,
            max_tool_calls: a
                .int("max_tool_calls")?
                .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            ..RunOptions::default()
        };
        let repo_choice = a.repo_choice()?;
        spec.max_tokens = a.int("max_tokens")?;
        spec.max_cost_usd = a.number("max_cost_usd")?;
        spec.sandbox = a.bool("sandbox")?;
        spec.sandbox_net = a.bool("sandbox_net")?.unwrap_or(false);
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
        let watch = surface::run::halt::watch(self.reader()?.halts(), interrupt);
        let done = surface::run::submit::go(&mut store, &env, &opts, go);
        drop(watch);
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
            RunError::Plan(_) | RunError::Synthesis(_) | RunError::Work(_) => {
                format!("{e} (what was witnessed stays in the ledger: GET /runs)")
            }
            RunError::Request(m) | RunError::Resume(m) => m.clone(),
            RunError::SecretBlocked { .. } => format!("{e} (GET /runs shows the run)"),
        };
        Reply::error(status, message)
    }

    pub(crate) fn submit(&self, req: &Request<'_>) -> Res {
        let a = Args::new(
            req.body,
            &[
                "request",
                "delivery_profile",
                "checkpoint_each_wave",
                "context_token_budget",
                "request_context_token_budget",
                "task_context_token_budget",
                "upstream_token_budget",
                "max_model_calls",
                "max_seconds",
                "gate_waves",
                "judge_intent",
                "revise",
                "use_capsule_context",
                "no_repo_context",
                "repo_context",
                "work",
                "checks",
                "allow_cmds",
                "max_tool_calls",
                "max_tokens",
                "max_cost_usd",
                "sandbox",
                "sandbox_net",
            ],
        )?;
        let request = a.text("request")?;
        check_request(request).map_err(|e| bad(e.to_string()))?;
        let mut opts = self.run_options(&a, None)?;
        opts.interrupt = req.hooks.interrupt.clone();
        self.drive(&opts, req.hooks.progress, Go::Submit(request))
    }

    pub fn resume(&self, req: &Request<'_>) -> Res {
        let a = Args::new(
            req.body,
            &[
                "run",
                "max_model_calls",
                "max_seconds",
                "max_tokens",
                "max_cost_usd",
            ],
        )?;
        let target = a.int("run")?;
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
        let a = Args::new(req.body, &["run", "reason", "by", "wait_seconds"])?;
        let wait = a.seconds("wait_seconds")?.unwrap_or(30.0);
        let ask = surface::run::halt::HaltAsk {
            run: a.int("run")?,
            by: a.str("by")?.unwrap_or("http client").to_string(),
            reason: a.str("reason")?.map(str::to_string),
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
        let a = Args::new(req.body, &["request", "plan"])?;
        let ask = match (a.get("plan"), a.get("request")) {
            (Some(_), Some(_)) => {
                return Err(bad(
                    "give request (to plan with the model) or plan, not both",
                ));
            }
            (Some(doc), None) => PlanAsk::Document(doc),
            (None, _) => PlanAsk::Request(a.text("request")?),
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

/// The `checks` field of a submit: a list of shell commands (absent: none).
pub(super) fn checks_of(a: &Args<'_>) -> Result<Vec<String>, Reply> {
    match a.get("checks") {
        None | Some(serde_json::Value::Null) => Ok(Vec::new()),
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str().map(str::to_string).ok_or_else(|| {
                    bad("field \"checks\" must be a list of shell commands (strings)")
                })
            })
            .collect(),
        Some(_) => Err(bad(
            "field \"checks\" must be a list of shell commands (strings)",
        )),
    }
}

/// A field holding a list of shell commands (absent: none), e.g. `allow_cmds`.
pub(super) fn strings_of(a: &Args<'_>, key: &str) -> Result<Vec<String>, Reply> {
    let wrong = || {
        bad(format!(
            "field {key:?} must be a list of shell commands (strings)"
        ))
    };
    match a.get(key) {
        None | Some(serde_json::Value::Null) => Ok(Vec::new()),
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string).ok_or_else(wrong))
            .collect(),
        Some(_) => Err(wrong()),
    }
}
