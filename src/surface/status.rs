//! What this repository's git forum holds, at a glance, for every transport: `git forum
//! status`, `GET /status/full` and the MCP tool `forum.status`.
//!
//! The report keeps the fields `git forum status --json` always had (the current ledger, its
//! entry count and checkpoint) and adds every ledger with its size and tip, the current
//! ledger's last run and how it stands, the hooks that run git forum, and whether the runtime
//! can run models: the executors configured and whether each local model answers at its URL
//! (a TCP connect to a loopback address, bounded at [`PROBE_MS`]). The readiness part is
//! shared with `git forum doctor` ([`readiness`]).

use std::path::PathBuf;

use serde::Serialize;

use super::{Report, Result};
use crate::config::Loaded;
use crate::exec::config::{self, ExecutorKind, Facts};
use crate::ledger::canonical;
use crate::ledger::kind;
use crate::roster::{Roster, Tier};
use crate::store::git::{GitStore, Options, StoreError};

/// The longest a local model's URL is waited on.
pub(crate) const PROBE_MS: u64 = 500;

/// One ledger of the repository.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct LedgerRow {
    pub(crate) name: String,
    /// Its entry count (the tip's seq + 1).
    pub(crate) entries: u64,
    /// The tip commit.
    pub(crate) tip: String,
    /// The tip entry's hash.
    pub(crate) tip_entry_hash: String,
}

/// The current ledger's last run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct LastRun {
    /// The seq of its request (the run's id).
    pub(crate) request_seq: u64,
    pub(crate) request: String,
    /// How it stands (`answered`, `paused`, `failed`, …; as `git forum runs` says).
    pub(crate) state: &'static str,
    /// How many entries belong to it.
    pub(crate) entries: usize,
    /// The seq of its answer, if it has one.
    pub(crate) answer_seq: Option<u64>,
    /// A dispatched run's tasks and workers as its NATS server holds them (absent when the
    /// run does not dispatch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) dispatch: Option<super::worker::DispatchStatus>,
}

/// One configured executor.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ExecutorRow {
    /// `default` or a tier (`cheap`, `capable`, `frontier`).
    pub(crate) slot: String,
    pub(crate) kind: &'static str,
    pub(crate) model: String,
    pub(crate) describe: String,
}

/// A local model endpoint and whether it accepts a connection.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct LocalModel {
    pub(crate) url: String,
    pub(crate) answers: bool,
}

/// Whether runs can start here.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Readiness {
    pub(crate) ready: bool,
    /// What keeps the runtime from being ready, one line each.
    pub(crate) problems: Vec<String>,
    pub(crate) executors: Vec<ExecutorRow>,
    pub(crate) local_models: Vec<LocalModel>,
    /// `[dispatch]` of the runtime: how `status` reaches a dispatched run's server.
    #[serde(skip)]
    pub(crate) dispatch: config::DispatchConfig,
}

/// The repository's git forum.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct StatusReport {
    /// The current ledger, its entry count and its checkpoint (the fields `status` always had).
    pub(crate) ledger: String,
    pub(crate) entries: u64,
    pub(crate) checkpoint: String,
    /// Every ledger, by name.
    pub(crate) ledgers: Vec<LedgerRow>,
    /// The current ledger's last run, if it has one.
    pub(crate) last_run: Option<LastRun>,
    /// The hooks of this repository that run git forum (`pre-push`, `pre-receive`, `update`).
    pub(crate) hooks: Vec<String>,
    pub(crate) runtime: Readiness,
}

impl Report for StatusReport {
    const SCHEMA: &'static str = "git-forum.repo-status/1";
}

fn store_err(e: StoreError) -> super::Error {
    super::reports::store_error(e)
}

/// Every ledger of the repository with its size and tip.
pub(crate) fn ledgers(repo: &gix::Repository) -> Result<Vec<LedgerRow>> {
    let git = crate::store::sync::Git::for_repo(repo);
    let mut names = crate::store::sync::local_ledgers(&git).map_err(store_err)?;
    names.sort();
    let mut rows = Vec::with_capacity(names.len());
    for name in names {
        let store = GitStore::new(repo.clone(), &name, Options::default()).map_err(store_err)?;
        if let Some(tip) = store.tip().map_err(store_err)? {
            rows.push(LedgerRow {
                name,
                entries: tip.entry.seq + 1,
                tip: tip.commit.to_string(),
                tip_entry_hash: tip.entry.entry_hash,
            });
        }
    }
    Ok(rows)
}

/// The last run of `store`'s ledger, whose commits and entries (oldest first) are `walked`:
/// its request is the last parentless `request`; only that run's bodies are read.
pub(crate) fn last_run(
    store: &GitStore,
    walked: Vec<(gix::ObjectId, crate::ledger::Entry)>,
    dispatch: &config::DispatchConfig,
) -> Result<Option<LastRun>> {
    let Some(start) = walked
        .iter()
        .rev()
        .find(|(_, e)| e.kind == kind::REQUEST && e.causal_parent.is_none())
        .map(|(_, e)| e.seq)
    else {
        return Ok(None);
    };
    let mut bodies = std::collections::HashMap::new();
    for (id, e) in walked.iter().filter(|(_, e)| e.seq >= start) {
        let body = store
            .body_of_commit(id)
            .map_err(store_err)?
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|t| canonical::parse(&t).ok())
            .map(|v| v.to_serde());
        if let Some(b) = body {
            bodies.insert(e.seq, b);
        }
    }
    let entries: Vec<crate::ledger::Entry> = walked.into_iter().map(|(_, e)| e).collect();
    let runs = crate::run::status::runs(&entries, |e| bodies.get(&e.seq).cloned());
    // A dispatched run's request names its server.
    let server = bodies
        .get(&start)
        .and_then(|b| b.pointer("/work/dispatch/server"))
        .and_then(|v| v.as_str())
        .map(str::to_string);
    Ok(runs
        .into_iter()
        .find(|r| r.request_seq == start)
        .map(|r| LastRun {
            request_seq: r.request_seq,
            request: r.request.clone(),
            state: r.label(),
            entries: r.entries.len(),
            answer_seq: r.answer.as_ref().map(|a| a.0),
            dispatch: server
                .map(|url| super::worker::dispatch_status(store.name(), start, &url, dispatch)),
        }))
}

/// The hooks of `repo` that run git forum (read at most 64 KiB of each).
pub(crate) fn hooks_installed(repo: &gix::Repository) -> Vec<String> {
    let mut cmd = crate::gitproc::at_git_dir(repo.git_dir());
    cmd.args(["rev-parse", "--path-format=absolute", "--git-path", "hooks"]);
    let out = crate::gitproc::output(cmd, None, 1 << 20);
    let dir = match out {
        Ok(o) if o.status.success() => {
            PathBuf::from(String::from_utf8_lossy(&o.stdout).trim().to_string())
        }
        _ => repo.common_dir().join("hooks"),
    };
    ["pre-push", "pre-receive", "update"]
        .iter()
        .filter(|h| {
            std::fs::File::open(dir.join(h))
                .ok()
                .and_then(|f| {
                    let mut s = String::new();
                    std::io::Read::read_to_string(&mut std::io::Read::take(f, 64 * 1024), &mut s)
                        .ok()
                        .map(|_| s)
                })
                .is_some_and(|s| s.contains("forum"))
        })
        .map(|h| h.to_string())
        .collect()
}

/// Whether a local model answers at `url`: a TCP connect to its loopback address, bounded.
fn answers(url: &str) -> bool {
    url::Url::parse(url)
        .ok()
        .and_then(|u| u.socket_addrs(|| Some(80)).ok())
        .and_then(|addrs| addrs.into_iter().find(|a| a.ip().is_loopback()))
        .is_some_and(|a| {
            std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_millis(PROBE_MS))
                .is_ok()
        })
}

/// The runtime's readiness: `loaded` (or why it could not be loaded: any error, a config
/// file's or the caller's own, shown as the one problem) against `roster`.
pub(crate) fn readiness(
    loaded: std::result::Result<&Loaded, &dyn std::fmt::Display>,
    roster: &Roster,
    facts: &dyn Facts,
) -> Readiness {
    let loaded = match loaded {
        Ok(l) => l,
        Err(why) => {
            return Readiness {
                ready: false,
                problems: vec![why.to_string()],
                executors: Vec::new(),
                local_models: Vec::new(),
                dispatch: config::DispatchConfig::default(),
            };
        }
    };
    let rt = &loaded.runtime;
    let problems: Vec<String> = config::issues(rt, roster, facts)
        .into_iter()
        .map(|i| format!("{}: {}", i.place, i.problem))
        .collect();
    let mut slots: Vec<(String, &config::ExecutorSpec)> = rt
        .effective_default()
        .map(|(_, s)| ("default".to_string(), s))
        .into_iter()
        .collect();
    slots.extend(
        Tier::ALL
            .iter()
            .filter_map(|t| rt.for_tier(*t).map(|(_, s)| (t.as_str().to_string(), s))),
    );
    let mut local_models: Vec<LocalModel> = Vec::new();
    let mut executors = Vec::with_capacity(slots.len());
    for (slot, spec) in slots {
        executors.push(ExecutorRow {
            slot,
            kind: spec.kind.name(),
            model: spec.model().to_string(),
            describe: spec.describe(),
        });
        if let (true, ExecutorKind::Chat { url, .. }) = (spec.is_local, &spec.kind)
            && !local_models.iter().any(|m| &m.url == url)
        {
            local_models.push(LocalModel {
                url: url.clone(),
                answers: answers(url),
            });
        }
    }
    Readiness {
        ready: problems.is_empty(),
        problems,
        executors,
        local_models,
        dispatch: rt.dispatch.clone(),
    }
}

/// The status of the repository around `store` (the current ledger), with `runtime` as
/// [`readiness`] gave it.
pub(crate) fn status(store: &GitStore, runtime: Readiness) -> Result<StatusReport> {
    // One walk of the chain serves the count, the checkpoint and the last run.
    let mut walked = store.walk_back(None).map_err(store_err)?;
    walked.reverse();
    let chain: Vec<crate::ledger::Entry> = walked.iter().map(|(_, e)| e.clone()).collect();
    let checkpoint = super::ledger::root_of(&chain);
    let entries = walked.len() as u64;
    Ok(StatusReport {
        ledger: store.name().to_string(),
        entries,
        checkpoint,
        ledgers: ledgers(store.repo())?,
        last_run: last_run(store, walked, &runtime.dispatch)?,
        hooks: hooks_installed(store.repo()),
        runtime,
    })
}
