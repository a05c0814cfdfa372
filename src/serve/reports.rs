//! Read-side reports over the daemon: summary, bench, room, capsule, receipt, grade, the
//! gradable row, context preflight, the repository's status and doctor's diagnosis. Loading and the reports themselves are [`crate::surface::reports`], the same
//! functions `git forum summary|bench|room|capsule|receipt|grade` call; this file parses the
//! request and maps a surface error's class to its HTTP status.
//!
//! Over the network a bench side is a ledger here (`NAME`), a fetched copy (`REMOTE/NAME`) or
//! one run of the served ledger (`run:SEQ`), never a directory path: a client does not get to
//! make the server read files it names. Likewise the preflight reads the capsule, never a
//! context command.

use serde::Serialize;
use serde_json::Value as J;

use super::dispatch::{Dispatcher, Reply, Request};
use crate::context::ContextBudget;
use crate::report::{self, Snapshot};
use crate::surface::context::{Got, preflight, with_repo};
use crate::surface::request::{self, reports as rq};
use crate::surface::store::GitStore;
use crate::surface::{self, reports, reports::Sources};

type Res = Result<J, Reply>;

fn bad(message: impl Into<String>) -> Reply {
    Reply::error(400, message)
}

/// A surface error as the daemon answers it: its class decides the HTTP status.
fn reply(e: surface::Error) -> Reply {
    Reply::error(e.class.http_status(), e.message)
}

/// A report as the body of a reply.
fn body(r: &impl Serialize) -> Res {
    serde_json::to_value(r).map_err(|e| Reply::error(500, e.to_string()))
}

/// A server started without a runtime: what its readiness reports.
#[derive(Debug, thiserror::Error)]
#[error(
    "no runtime is configured for this server (start it with executor flags or add .forum/runtime.toml)"
)]
struct NoRuntime;

impl Dispatcher {
    fn served(&self, deep: bool) -> Result<Snapshot, Reply> {
        let store = self.reader()?;
        reports::snapshot(&store, deep).map_err(reply)
    }

    /// The summary, from the fold the daemon keeps ([`super::projections`]).
    pub(crate) fn summary(&self) -> Res {
        body(&self.summary_cached()?)
    }

    pub(crate) fn room(&self) -> Res {
        body(&reports::room(&self.served(true)?, None, 240))
    }

    /// Forum's action receipt of one run (`None`: the latest run).
    pub(crate) fn receipt(&self, run: Option<u64>) -> Res {
        let s = self.served(true)?;
        crate::surface::run::receipt_of(&s, run)
            .map(|r| r.0.to_serde())
            .map_err(reply)
    }

    /// Forum's action receipt of the run whose request is at `seq` (path text).
    pub(crate) fn receipt_of(&self, seq: &str) -> Res {
        let ok = !seq.is_empty() && seq.bytes().all(|b| b.is_ascii_digit());
        let seq = ok
            .then(|| seq.parse::<u64>().ok())
            .flatten()
            .ok_or_else(|| {
                Reply::error(400, format!("seq {seq:?} is not a non-negative integer"))
            })?;
        self.receipt(Some(seq))
    }

    /// The latest run's grade (checks by actors other than the producers).
    pub(crate) fn grade(&self) -> Res {
        let s = self.served(false)?;
        body(&reports::grade_scoped(&s, reports::Scope::Latest, 2).map_err(reply)?)
    }

    /// `{run?, all?, min_checks?}`: which entries a grade or a gradable row covers, and the
    /// checks a PASS needs.
    fn graded(&self, a: rq::Graded, deep: bool) -> Result<(Snapshot, reports::Scope, u64), Reply> {
        let scope = reports::Scope::of(a.run, a.all).map_err(reply)?;
        let min_checks = a.min_checks.unwrap_or(2);
        Ok((self.served(deep)?, scope, min_checks))
    }

    /// The grade of one run (`run`, default the latest) or of the whole ledger (`all`).
    pub(crate) fn grade_of(&self, req: &Request<'_>) -> Res {
        let a: rq::Grade = request::decode(req.body)?;
        let (s, scope, min_checks) = self.graded(a.scope, false)?;
        body(&reports::grade_scoped(&s, scope, min_checks).map_err(reply)?)
    }

    /// Forum's gradable-trajectory row of one run (`run`, default the latest) or of the whole
    /// ledger (`all`).
    pub(crate) fn gradable(&self, req: &Request<'_>) -> Res {
        let a: rq::Gradable = request::decode(req.body)?;
        let (s, scope, min_checks) = self.graded(a.scope, true)?;
        body(&reports::gradable(&s, scope, min_checks).map_err(reply)?)
    }

    pub(crate) fn capsule(&self) -> Res {
        body(&reports::capsule(&self.served(false)?, 8, 240))
    }

    pub(crate) fn bench(&self, req: &Request<'_>) -> Res {
        let args: rq::Bench = request::decode(req.body)?;
        let repo = self.repo.to_thread_local();
        let sources = Sources {
            repo: &repo,
            ledger: &self.cfg.ledger,
            dirs: false,
            runs_hint: "GET /runs",
        };
        let a = sources.side(&args.a, false).map_err(reply)?;
        let b = sources.side(&args.b, false).map_err(reply)?;
        body(&reports::bench(&a, &b))
    }

    pub(crate) fn preflight(&self, req: &Request<'_>) -> Res {
        let a: rq::Preflight = request::decode(req.body)?;
        let request = a.request.as_str();
        crate::route::check_request(request).map_err(|e| bad(e.to_string()))?;
        let [total, request_tokens, task, upstream] = a.budget.values(|key, n| {
            surface::Error::usage(format!(
                "field {key:?} must be a non-negative integer, not {n}"
            ))
        })?;
        let budget =
            (total.is_some() || request_tokens.is_some() || task.is_some() || upstream.is_some())
                .then_some(ContextBudget {
                    max_total_tokens: total,
                    max_request_tokens: request_tokens,
                    max_task_tokens: task,
                    max_upstream_tokens: upstream,
                    bytes_per_token: 4,
                });
        let items = a.max_items.unwrap_or(8);
        let chars = a.max_text_chars.unwrap_or(240);
        let (got, source) = if a.use_capsule_context {
            let s = self.served(false)?;
            let capsule = reports::capsule(
                &s,
                usize::try_from(items).unwrap_or(usize::MAX),
                usize::try_from(chars).unwrap_or(usize::MAX),
            )
            .value;
            (Got::Text(report::capsule_text(&capsule)), "capsule")
        } else {
            (Got::Text(String::new()), "none")
        };
        let defaults = self
            .executors
            .loaded
            .as_ref()
            .map(|l| l.runtime.context)
            .unwrap_or_default();
        let repo = surface::run::options::repo_context_on(a.repo_context, &defaults)
            .then_some(self.cfg.dir.as_path());
        let (got, source, part) = with_repo(got, source, repo);
        let report = preflight(request, &got, &source, budget.as_ref(), &part);
        serde_json::to_value(report).map_err(|e| {
            Reply::from(surface::Error::internal(format!(
                "encoding the report: {e}"
            )))
        })
    }

    /// The runtime's readiness on this server: the runtime it was started with.
    fn readiness(&self) -> surface::status::Readiness {
        let loaded = self
            .executors
            .loaded
            .as_ref()
            .ok_or(&NoRuntime as &dyn std::fmt::Display);
        surface::status::readiness(loaded, &self.roster, &crate::config::RealFacts)
    }

    fn served_store(&self) -> Result<GitStore, Reply> {
        self.reader()
    }

    /// What the repository's git forum holds (`git forum status`).
    pub(crate) fn full_status(&self) -> Res {
        let store = self.served_store()?;
        body(&surface::status::status(&store, self.readiness()).map_err(reply)?)
    }

    /// The diagnosis `git forum doctor` makes, without repairs (a client reads, never writes).
    pub(crate) fn doctor(&self) -> Res {
        let store = self.served_store()?;
        let sources = crate::surface::store::Sources::default();
        body(&surface::doctor::doctor(&store, &sources, false, self.readiness()).map_err(reply)?)
    }
}
