//! Read-side projections over the daemon: summary, bench, room, capsule and context preflight,
//! the same builders `git forum summary|bench|room|capsule|context preflight` print.
//!
//! Over the network a bench side is a ledger here (`NAME`), a fetched copy (`REMOTE/NAME`) or
//! one run of the served ledger (`run:SEQ`), never a directory path: a client does not get to
//! make the server read files it names. Likewise the preflight reads the capsule, never a
//! context command.

use serde_json::{Value as J, json};

use super::args::Args;
use super::dispatch::{Dispatcher, Reply, Request};
use crate::context::ContextBudget;
use crate::report::{self, Snapshot};
use crate::run::status;
use crate::store::git::{GitStore, Options, validate_ledger_name};
use crate::store::sync::REMOTES_PREFIX;
use crate::surface::context::{Got, preflight_payload};

type Res = Result<J, Reply>;

fn bad(message: impl Into<String>) -> Reply {
    Reply::error(400, message)
}

/// A git ledger as the projections read it, with what its own verify says (as the CLI does).
fn snapshot_of(store: &GitStore, deep: bool) -> Result<Snapshot, Reply> {
    if !store.exists()? {
        return Ok(Snapshot::from_items(Vec::new()));
    }
    let mut s = Snapshot::from_items(report::load_git(store)?);
    let passed = store.verify(deep)?.passed();
    if deep {
        s.deep_verified &= passed;
    } else {
        s.verified &= passed;
        s.deep_verified &= s.verified;
    }
    Ok(s)
}

impl Dispatcher {
    fn served(&self, deep: bool) -> Result<Snapshot, Reply> {
        let store = GitStore::new(
            self.repo.to_thread_local(),
            &self.cfg.ledger,
            Options::default(),
        )?;
        snapshot_of(&store, deep)
    }

    pub(crate) fn summary(&self) -> Res {
        Ok(report::summarize(&self.served(false)?)
            .to_value()
            .to_serde())
    }

    pub(crate) fn room(&self) -> Res {
        Ok(report::build_run_room(&self.served(true)?, None, 240).to_serde())
    }

    /// Forum's action receipt of one run (`None`: the latest run).
    pub(crate) fn receipt(&self, run: Option<u64>) -> Res {
        let s = self.served(true)?;
        crate::surface::run::receipt_of(&s, run)
            .map(|r| r.0.to_serde())
            .map_err(|e| Reply::error(e.class.http_status(), e.message))
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

    /// The ledger's grade (checks by actors other than the producers).
    pub(crate) fn grade(&self) -> Res {
        Ok(report::grade::grade(&self.served(false)?, 2).to_serde())
    }

    pub(crate) fn capsule(&self) -> Res {
        Ok(report::build_context_capsule(&self.served(false)?, 8, 240).to_serde())
    }

    /// One side of a bench.
    fn side(&self, spec: &str) -> Result<(Snapshot, String), Reply> {
        if let Some(seq) = spec.strip_prefix("run:") {
            let seq: u64 = seq.parse().map_err(|_| {
                bad(format!(
                    "{spec:?}: run:SEQ takes the seq of a run's request (GET /runs lists them)"
                ))
            })?;
            let whole = self.served(false)?;
            let roots = status::roots(&whole.entries());
            if roots.get(&seq) != Some(&seq) {
                return Err(Reply::error(
                    404,
                    format!("no run starts at seq {seq} (GET /runs lists them)"),
                ));
            }
            let s = whole.slice(|e| roots.get(&e.seq) == Some(&seq));
            return Ok((s, format!("run {seq} of ledger {}", self.cfg.ledger)));
        }
        if validate_ledger_name(spec).is_ok() {
            let local = GitStore::new(self.repo.to_thread_local(), spec, Options::default())?;
            if local.exists()? {
                return Ok((snapshot_of(&local, false)?, format!("ledger {spec}")));
            }
            if spec.contains('/') {
                let remote = GitStore::at_ref(
                    self.repo.to_thread_local(),
                    &format!("{REMOTES_PREFIX}{spec}"),
                    Options::default(),
                )?;
                if remote.exists()? {
                    return Ok((
                        snapshot_of(&remote, false)?,
                        format!("remote ledger {spec}"),
                    ));
                }
            }
        }
        Err(Reply::error(
            404,
            format!(
                "{spec:?} is not a ledger here (NAME), a fetched copy (REMOTE/NAME) or run:SEQ; Forum directories are not read over the network"
            ),
        ))
    }

    pub(crate) fn bench(&self, req: &Request<'_>) -> Res {
        let args = Args::new(req.body, &["a", "b"])?;
        let (a, la) = self.side(args.text("a")?)?;
        let (b, lb) = self.side(args.text("b")?)?;
        let (sa, sb) = (report::summarize(&a), report::summarize(&b));
        let (ans_a, ans_b) = (report::final_answer(&a), report::final_answer(&b));
        let diff = report::answer_diff(
            ans_a.as_deref().unwrap_or(""),
            ans_b.as_deref().unwrap_or(""),
            &format!("A: {la}"),
            &format!("B: {lb}"),
        );
        Ok(json!({
            "labels": {"a": la, "b": lb},
            "a": sa.to_value().to_serde(),
            "b": sb.to_value().to_serde(),
            "delta": report::summary::compare_value(&sa, &sb).to_serde(),
            "answers": {"a": ans_a, "b": ans_b, "diff": diff},
        }))
    }

    pub(crate) fn preflight(&self, req: &Request<'_>) -> Res {
        let a = Args::new(
            req.body,
            &[
                "request",
                "use_capsule_context",
                "max_items",
                "max_text_chars",
                "context_token_budget",
                "request_context_token_budget",
                "task_context_token_budget",
                "upstream_token_budget",
            ],
        )?;
        let request = a.text("request")?;
        crate::route::check_request(request).map_err(|e| bad(e.to_string()))?;
        let [total, request_tokens, task, upstream] = [
            "context_token_budget",
            "request_context_token_budget",
            "task_context_token_budget",
            "upstream_token_budget",
        ]
        .map(|k| a.int(k));
        let (total, request_tokens, task, upstream) = (total?, request_tokens?, task?, upstream?);
        let budget =
            (total.is_some() || request_tokens.is_some() || task.is_some() || upstream.is_some())
                .then_some(ContextBudget {
                    max_total_tokens: total,
                    max_request_tokens: request_tokens,
                    max_task_tokens: task,
                    max_upstream_tokens: upstream,
                    bytes_per_token: 4,
                });
        let items = a.int("max_items")?.unwrap_or(8);
        let chars = a.int("max_text_chars")?.unwrap_or(240);
        let (got, source) = if a.bool("use_capsule_context")?.unwrap_or(false) {
            let s = self.served(false)?;
            let capsule = report::build_context_capsule(
                &s,
                usize::try_from(items).unwrap_or(usize::MAX),
                usize::try_from(chars).unwrap_or(usize::MAX),
            );
            (Got::Text(report::capsule_text(&capsule)), "capsule")
        } else {
            (Got::Text(String::new()), "none")
        };
        Ok(preflight_payload(request, &got, source, budget.as_ref()).to_serde())
    }
}
