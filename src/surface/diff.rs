//! `git forum diff [RUN]`, once for every transport: a `--work` run's change against the commit
//! it started from, as `git diff` shows it.
//!
//! The base is the one the run's request recorded (`work.base`). The other side is the run
//! branch the request names (`work.run_branch`, `forum/run-SEQ`): in this repository for a
//! ledger of its own, or as the remote's branch (`refs/remotes/REMOTE/forum/run-SEQ`, which
//! `git fetch REMOTE` brings) for a fetched copy (`--ledger REMOTE:NAME`). Without that branch
//! (discarded, or never pushed), the change commits the record says were merged stand in when
//! one of them holds the others. When the commits are not in the repository, the refusal says
//! what to fetch. A run that merged nothing has an empty diff and no tip.

use std::path::Path;

use serde::Serialize;

use super::store::LedgerSpec;
use super::{Error, Report, Result};
use crate::ledger::canonical::Value;
use crate::ledger::{Entry, Storage, kind};
use crate::report::Snapshot;
use crate::surface::request::work::Diff;
use crate::work::run_diff;

/// One file of a run's change.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub(crate) struct DiffFile {
    /// The path (for a rename, the new path).
    pub(crate) path: String,
    /// `A` added, `M` modified, `D` deleted, `R` renamed, `C` copied, `T` type changed.
    pub(crate) status: String,
    /// Lines added and removed (0 for a binary file).
    pub(crate) added: u64,
    pub(crate) removed: u64,
}

/// A run's change against its base.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct DiffReport {
    pub(crate) schema: &'static str,
    /// The run (its request seq).
    pub(crate) run: u64,
    /// The commit the run started from.
    pub(crate) base: String,
    /// The commit compared with it; `null` when the run merged nothing.
    pub(crate) tip: Option<String>,
    /// Where the tip was read: the branch (`forum/run-12`, `origin/forum/run-12`) or the
    /// merged change commit (`change of T1`); `null` with no tip.
    pub(crate) source: Option<String>,
    /// The files changed, sorted by path (only those under the paths asked for).
    pub(crate) files: Vec<DiffFile>,
    /// Lines added and removed over all files.
    pub(crate) added: u64,
    pub(crate) removed: u64,
    /// The unified diff; `null` when only the files were asked for (`stat`, `name_only`).
    pub(crate) patch: Option<String>,
    /// Whether the patch was cut (it is read up to 8 MiB; `git diff BASE TIP` shows it all).
    pub(crate) truncated: bool,
}

impl Report for DiffReport {
    const SCHEMA: &'static str = "git-forum.diff/1";
}

fn storage(e: crate::ledger::StorageError) -> Error {
    e.into()
}

fn work_err(e: crate::run::WorkError) -> Error {
    Error::internal(e.to_string())
}

/// Every entry of `store` with its body (`None`: absent).
fn items(store: &dyn Storage) -> Result<Vec<(Entry, Option<Value>)>> {
    let n = store.len().map_err(storage)?;
    let mut out = Vec::with_capacity(n as usize);
    for seq in 0..n {
        let Some(e) = store.get(seq).map_err(storage)? else {
            continue;
        };
        let body = store.payload_at(seq).map_err(storage)?;
        out.push((e, body));
    }
    Ok(out)
}

/// The `work` record of a `request` entry's body, when the run worked in the repository.
fn work_record(body: Option<&Value>) -> Option<&Value> {
    body?.get("work").filter(|w| matches!(w, Value::Object(_)))
}

/// The run `run` names, or by default the latest run of the ledger that worked in the
/// repository, with its `work` record.
pub(crate) fn pick_run<'a>(
    ledger: &str,
    items: &'a [(Entry, Option<Value>)],
    run: Option<u64>,
) -> Result<(u64, &'a Value)> {
    let requests = items
        .iter()
        .filter(|(e, _)| e.kind == kind::REQUEST && e.causal_parent.is_none());
    match run {
        Some(r) => {
            let Some((_, body)) = requests.clone().find(|(e, _)| e.seq == r) else {
                return Err(Error::not_found(format!(
                    "ledger {ledger} has no run {r}; list its runs with `git forum runs`"
                )));
            };
            work_record(body.as_ref()).map(|w| (r, w)).ok_or_else(|| {
                Error::conflict(format!(
                    "run {r} did not work in the repository (it was not a --work run); it has no diff"
                ))
            })
        }
        None => requests
            .rev()
            .find_map(|(e, b)| work_record(b.as_ref()).map(|w| (e.seq, w)))
            .ok_or_else(|| {
                Error::conflict(format!(
                    "ledger {ledger} has no --work run; run one with `git forum submit --work ...`"
                ))
            }),
    }
}

/// The text of `key` in `v`.
fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// The change commits of run `run` whose latest gate decision was to merge, by task.
fn merged_commits(items: Vec<(Entry, Option<Value>)>, run: u64) -> Vec<(String, String)> {
    let whole = Snapshot::from_items(items);
    let Some(slice) = super::reports::run_slice(&whole, run) else {
        return Vec::new();
    };
    let Some(work) = crate::report::work_report::work(&slice.items) else {
        return Vec::new();
    };
    work.tasks
        .iter()
        .filter(|t| t.state() == "merged")
        .filter_map(|t| {
            let commit = t.change.as_ref()?.1.clone()?;
            Some((t.id.clone(), commit))
        })
        .collect()
}

/// Where a run's branch and commits come from: this repository, or a remote it was fetched from.
fn fetch_hint(remote: Option<&str>, branch: &str) -> String {
    match remote {
        Some(r) => format!(
            "`git forum fetch {r}` brings the change commits pushed with the ledger, or fetch its branch with `git fetch {r} {branch}` (pushed from the clone that ran it with `git push {r} {branch}`)"
        ),
        None => {
            format!("if another clone has it, fetch it with `git fetch REMOTE {branch}:{branch}`")
        }
    }
}

/// The tip to compare with `base`, and where it was read: the run branch, else the one merged
/// change commit that holds the others; `None` when the run merged nothing.
fn find_tip(
    dir: &Path,
    remote: Option<&str>,
    run: u64,
    branch: &str,
    base: &str,
    merged: &[(String, String)],
) -> Result<Option<(String, String)>> {
    let (refname, shown) = match remote {
        Some(r) => (
            format!("refs/remotes/{r}/{branch}"),
            format!("{r}/{branch}"),
        ),
        None => (format!("refs/heads/{branch}"), branch.to_string()),
    };
    if let Some(tip) = run_diff::commit_of(dir, &refname).map_err(work_err)? {
        if !run_diff::contains(dir, base, &tip).map_err(work_err)? {
            return Err(Error::conflict(format!(
                "{shown} does not start from run {run}'s base {}; it is not this run's branch",
                short(base)
            )));
        }
        return Ok(Some((tip, shown)));
    }
    if merged.is_empty() {
        return Ok(None);
    }
    let mut present = Vec::new();
    for (task, commit) in merged {
        if run_diff::commit_of(dir, commit)
            .map_err(work_err)?
            .is_some()
        {
            present.push((task, commit));
        }
    }
    if present.len() < merged.len() {
        return Err(Error::not_found(format!(
            "run {run}'s branch {shown} and its change commits are not in this repository; {}",
            fetch_hint(remote, branch)
        )));
    }
    for (task, commit) in &present {
        let mut holds_all = true;
        for (_, other) in &present {
            holds_all &= run_diff::contains(dir, other, commit).map_err(work_err)?;
        }
        if holds_all {
            return Ok(Some(((*commit).clone(), format!("change of {task}"))));
        }
    }
    Err(Error::not_found(format!(
        "run {run}'s branch {shown} is not in this repository, and its {} merged changes are separate commits; {}",
        present.len(),
        fetch_hint(remote, branch)
    )))
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

/// `git forum diff [RUN]`: run `req.run`'s change (default: the latest `--work` run of the
/// ledger `ledger` read from `store`) against its base, in the repository containing `dir`;
/// only the files with `stat` or `name_only`, else the patch too; limited to `req.paths`.
pub(crate) fn diff(
    dir: &Path,
    ledger: &str,
    store: &dyn Storage,
    req: &Diff,
) -> Result<DiffReport> {
    use super::request::Request as _;
    req.validate()?;
    let items = items(store)?;
    let (run, work) = pick_run(ledger, &items, req.run)?;
    let Some(base) = text(work, "base").map(str::to_string) else {
        return Err(Error::conflict(format!(
            "run {run} recorded no base commit; it has no diff"
        )));
    };
    let branch = text(work, "run_branch")
        .map(str::to_string)
        .unwrap_or_else(|| format!("forum/run-{run}"));
    let remote = match LedgerSpec::parse(ledger) {
        LedgerSpec::Fetched { remote, .. } => Some(remote.to_string()),
        LedgerSpec::Local(_) => None,
    };
    if run_diff::commit_of(dir, &base).map_err(work_err)?.is_none() {
        return Err(Error::not_found(format!(
            "run {run}'s base commit {} is not in this repository; fetch the branch it started from{}",
            short(&base),
            remote
                .as_deref()
                .map(|r| format!(" (`git fetch {r}`)"))
                .unwrap_or_default()
        )));
    }
    let merged = merged_commits(items, run);
    let want_patch = !req.stat && !req.name_only;
    let Some((tip, source)) = find_tip(dir, remote.as_deref(), run, &branch, &base, &merged)?
    else {
        return Ok(DiffReport {
            schema: DiffReport::SCHEMA,
            run,
            base,
            tip: None,
            source: None,
            files: Vec::new(),
            added: 0,
            removed: 0,
            patch: want_patch.then(String::new),
            truncated: false,
        });
    };
    let d = run_diff::diff(dir, &base, &tip, &req.paths, want_patch).map_err(work_err)?;
    let files: Vec<DiffFile> = d
        .files
        .into_iter()
        .map(|f| DiffFile {
            path: f.path,
            status: f.status,
            added: f.added,
            removed: f.removed,
        })
        .collect();
    Ok(DiffReport {
        schema: DiffReport::SCHEMA,
        run,
        base,
        tip: Some(tip),
        source: Some(source),
        added: files.iter().map(|f| f.added).sum(),
        removed: files.iter().map(|f| f.removed).sum(),
        files,
        patch: want_patch.then_some(d.patch),
        truncated: d.truncated,
    })
}
