//! The operations on what `--work` runs leave in the repository, once for every transport:
//! [`apply()`] brings a run branch into the current branch and witnesses `applied`
//! ([`apply_preview`] first says what it would bring in, for a person to confirm, and
//! [`apply_dry_run`] what it would do against the branch checked out now); [`discard`]
//! removes a run's worktrees and branch and witnesses a `note` (the record and the kept change
//! commits under `refs/forum/work` stay); [`cleanup`] removes the work areas of runs that died
//! (for `doctor`).

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::json;

use super::{Error, Report, Result};
use crate::ledger::{NewEntry, Storage, Value, kind};
use crate::work::apply::{self, ApplyRefusal};

/// Who writes `applied` and the discard note: a person acting on the repository, as for gates.
const ACTOR: &str = "operator";

/// A run branch brought into the current branch.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct ApplyReport {
    pub(crate) schema: &'static str,
    /// The run (its request seq).
    pub(crate) run: u64,
    /// The branch brought into (`main`).
    pub(crate) branch: String,
    /// The run branch (`forum/run-12`).
    pub(crate) run_branch: String,
    /// The branch's tip before and after.
    pub(crate) from: String,
    pub(crate) to: String,
    /// `fast-forward` or `merge`.
    pub(crate) mode: &'static str,
    /// The `applied` entry.
    pub(crate) seq: u64,
}

impl Report for ApplyReport {
    const SCHEMA: &'static str = "git-forum.apply/1";
}

/// A run's branch and worktrees removed.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct DiscardReport {
    pub(crate) schema: &'static str,
    /// The run (its request seq).
    pub(crate) run: u64,
    /// The run branch (`forum/run-12`).
    pub(crate) run_branch: String,
    /// Its tip when deleted, `null` when the run had no branch.
    pub(crate) branch_tip: Option<String>,
    /// How many worktrees were removed.
    pub(crate) worktrees: usize,
    /// The kept change refs that stay.
    pub(crate) kept: Vec<String>,
    /// The `note` entry that witnesses it.
    pub(crate) seq: u64,
}

impl Report for DiscardReport {
    const SCHEMA: &'static str = "git-forum.discard/1";
}

fn refusal(e: ApplyRefusal) -> Error {
    match e {
        ApplyRefusal::Refused(m) => Error::conflict(m),
        ApplyRefusal::Failed(e) => Error::internal(e.to_string()).with_source(e),
    }
}

fn storage(e: crate::ledger::StorageError) -> Error {
    e.into()
}

/// The runs of the ledger in `store`: the seqs of its `request` entries.
fn request_seqs(store: &dyn Storage) -> Result<Vec<u64>> {
    let n = store.len().map_err(storage)?;
    let mut out = Vec::new();
    for seq in 0..n {
        if let Some(e) = store.get(seq).map_err(storage)?
            && e.kind == kind::REQUEST
        {
            out.push(seq);
        }
    }
    Ok(out)
}

/// The run `run` names (it must be a run of this ledger), or by default the latest run of the
/// ledger that has a run branch.
fn pick_run(dir: &Path, ledger: &str, store: &dyn Storage, run: Option<u64>) -> Result<u64> {
    let runs = request_seqs(store)?;
    match run {
        Some(r) if runs.contains(&r) => Ok(r),
        Some(r) => Err(Error::not_found(format!(
            "ledger {ledger} has no run {r}; list its runs with `git forum runs`"
        ))),
        None => {
            let with =
                apply::runs_with_branches(dir).map_err(|e| Error::internal(e.to_string()))?;
            with.into_iter().find(|r| runs.contains(r)).ok_or_else(|| {
                Error::conflict(format!(
                    "no run of ledger {ledger} has a branch with merged changes; name one (see `git forum runs`)"
                ))
            })
        }
    }
}

fn witness(
    store: &mut dyn Storage,
    kind: &str,
    run: u64,
    body: serde_json::Value,
    ts: f64,
) -> Result<u64> {
    let new = NewEntry {
        actor: ACTOR.into(),
        kind: kind.into(),
        causal_parent: Some(run as i64),
        payload: Value::from_serde(&body),
        ts,
    };
    new.validate().map_err(Error::usage)?;
    let done = store.append(new).map_err(storage)?;
    store.sync().map_err(storage)?;
    Ok(done.seq)
}

/// What `apply` would bring in, shown before it asks (the command line on a terminal).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApplyPreview {
    /// The run (its request seq).
    pub(crate) run: u64,
    /// The branch it would go into, the run branch, and how (`fast-forward` or `merge`).
    pub(crate) branch: String,
    pub(crate) run_branch: String,
    pub(crate) mode: &'static str,
    /// The run branch's changes since it parted from the branch.
    pub(crate) files: Vec<super::diff::DiffFile>,
    /// What was decided, so that only this is applied.
    planned: apply::Planned,
}

/// What `git forum apply [RUN]` would do (see [`apply()`]), with the files it would bring in;
/// refused, as apply would be, when it cannot. Writes nothing.
pub(crate) fn apply_preview(
    dir: &Path,
    ledger: &str,
    store: &dyn Storage,
    run: Option<u64>,
) -> Result<ApplyPreview> {
    let run = pick_run(dir, ledger, store, run)?;
    let planned = apply::plan(dir, run).map_err(refusal)?;
    let files = apply::incoming(dir, &planned)
        .map_err(|e| Error::internal(e.to_string()))?
        .into_iter()
        .map(|f| super::diff::DiffFile {
            path: f.path,
            status: f.status,
            added: f.added,
            removed: f.removed,
        })
        .collect();
    Ok(ApplyPreview {
        run,
        branch: planned.branch.clone(),
        run_branch: planned.run_branch.clone(),
        mode: planned.mode,
        files,
        planned,
    })
}

/// What `git forum apply RUN` would do against the branch checked out now, found without
/// touching the work tree, the index or any ref (`git forum apply --dry-run`, `POST
/// /apply/dry-run`, the apply page).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct ApplyDryRun {
    pub(crate) schema: &'static str,
    /// The run (its request seq).
    pub(crate) run: u64,
    /// The branch checked out, which apply would bring the run into (`main`).
    pub(crate) branch: String,
    /// The run branch (`forum/run-12`).
    pub(crate) run_branch: String,
    /// The tips of the branch and of the run branch.
    pub(crate) ours: String,
    pub(crate) theirs: String,
    /// `fast-forward`, `merge` (a clean merge commit) or `conflict`.
    pub(crate) outcome: &'static str,
    /// The files the merge would conflict in (empty unless `conflict`).
    pub(crate) conflicts: Vec<String>,
    /// Tracked files with uncommitted changes: apply refuses until they are committed or
    /// stashed.
    pub(crate) dirty: Vec<String>,
    /// Whether `git forum apply` would go ahead now (no conflict, nothing uncommitted).
    pub(crate) would_apply: bool,
    /// The files the branch would receive: from its tip to the run branch's (fast-forward)
    /// or to the merge's tree (merge); for a conflict, the run branch's changes since it
    /// parted from the branch.
    pub(crate) files: Vec<super::diff::DiffFile>,
    /// Lines added and removed over all files.
    pub(crate) added: u64,
    pub(crate) removed: u64,
    /// The unified diff of those files.
    pub(crate) patch: String,
    /// Whether the patch was cut (it is read up to 8 MiB).
    pub(crate) truncated: bool,
}

impl Report for ApplyDryRun {
    const SCHEMA: &'static str = "git-forum.apply-dry-run/1";
}

/// `git forum apply [RUN] --dry-run`: what apply would do with run `run` (default: the latest
/// run with a branch) against the branch checked out in `dir`, decided by the same function
/// apply decides with, and the diff that branch would receive. Writes nothing (the merged
/// tree's objects aside, which no ref names). Refused as apply is when there is nothing to
/// decide (no such run, no run branch, a detached HEAD, a run already in the branch), and on
/// a fetched copy, whose runs apply does not bring in.
pub(crate) fn apply_dry_run(
    dir: &Path,
    ledger: &str,
    store: &dyn Storage,
    run: Option<u64>,
) -> Result<ApplyDryRun> {
    if let super::store::LedgerSpec::Fetched { .. } = super::store::LedgerSpec::parse(ledger) {
        return Err(Error::conflict(format!(
            "ledger {ledger} is a fetched copy, and apply brings in only the runs of this repository's own ledgers; `git forum --ledger {ledger} diff RUN` shows a run's change"
        )));
    }
    let run = pick_run(dir, ledger, store, run)?;
    let d = apply::decide(dir, run).map_err(refusal)?;
    let got = apply::received(dir, &d).map_err(|e| Error::internal(e.to_string()))?;
    let (outcome, conflicts) = match &d.outcome {
        apply::Outcome::FastForward => ("fast-forward", Vec::new()),
        apply::Outcome::Merge { .. } => ("merge", Vec::new()),
        apply::Outcome::Conflict { paths } => ("conflict", paths.clone()),
    };
    let files: Vec<super::diff::DiffFile> = got
        .files
        .into_iter()
        .map(|f| super::diff::DiffFile {
            path: f.path,
            status: f.status,
            added: f.added,
            removed: f.removed,
        })
        .collect();
    Ok(ApplyDryRun {
        schema: ApplyDryRun::SCHEMA,
        run,
        would_apply: conflicts.is_empty() && d.dirty.is_empty(),
        branch: d.branch,
        run_branch: d.run_branch,
        ours: d.ours,
        theirs: d.theirs,
        outcome,
        conflicts,
        dirty: d.dirty,
        added: files.iter().map(|f| f.added).sum(),
        removed: files.iter().map(|f| f.removed).sum(),
        files,
        patch: got.patch,
        truncated: got.truncated,
    })
}

/// `git forum apply [RUN]`: brings run `run`'s branch (default: the latest run with one) into
/// the branch checked out in `dir` (fast-forward when possible, else a merge commit) and
/// witnesses `applied` {run, branch, run_branch, from, to, mode}, parented on the run's request.
/// Refused (nothing changed) when the run is unknown, has no branch or nothing new, the work
/// tree is dirty, HEAD is detached, or the merge would conflict.
pub(crate) fn apply(
    dir: &Path,
    ledger: &str,
    store: &mut dyn Storage,
    run: Option<u64>,
    ts: f64,
) -> Result<ApplyReport> {
    let run = pick_run(dir, ledger, store, run)?;
    applied(dir, store, run, None, ts)
}

/// [`apply()`] of exactly what `shown` showed: refused when the branch or the run branch
/// moved since.
pub(crate) fn apply_shown(
    dir: &Path,
    store: &mut dyn Storage,
    shown: &ApplyPreview,
    ts: f64,
) -> Result<ApplyReport> {
    applied(dir, store, shown.run, Some(&shown.planned), ts)
}

fn applied(
    dir: &Path,
    store: &mut dyn Storage,
    run: u64,
    expect: Option<&apply::Planned>,
    ts: f64,
) -> Result<ApplyReport> {
    let done = apply::apply(dir, run, expect).map_err(refusal)?;
    let body = json!({
        "run": run,
        "branch": done.branch,
        "run_branch": done.run_branch,
        "from": done.from,
        "to": done.to,
        "mode": done.mode,
    });
    let seq = witness(store, kind::APPLIED, run, body, ts)?;
    Ok(ApplyReport {
        schema: ApplyReport::SCHEMA,
        run,
        branch: done.branch,
        run_branch: done.run_branch,
        from: done.from,
        to: done.to,
        mode: done.mode,
        seq,
    })
}

/// `git forum discard [RUN]`: removes run `run`'s worktrees and its branch (default: the
/// latest run with a branch) and witnesses a `note` {text, run, run_branch, branch_tip,
/// worktrees, kept}; the record and the commits under `refs/forum/work` and
/// `refs/forum/quarantine` stay. Refused when the run is unknown, still running, its branch is
/// checked out, or it has nothing to discard.
pub(crate) fn discard(
    dir: &Path,
    ledger: &str,
    store: &mut dyn Storage,
    run: Option<u64>,
    ts: f64,
) -> Result<DiscardReport> {
    let run = pick_run(dir, ledger, store, run)?;
    let done = apply::discard(dir, ledger, run).map_err(refusal)?;
    let run_branch = format!("forum/run-{run}");
    let body = json!({
        "text": format!("discarded run {run}: its branch {run_branch} and worktrees were removed; its change commits stay"),
        "run": run,
        "run_branch": run_branch,
        "branch_tip": done.branch_tip,
        "worktrees": done.worktrees,
        "kept": done.kept,
    });
    let seq = witness(store, kind::NOTE, run, body, ts)?;
    Ok(DiscardReport {
        schema: DiscardReport::SCHEMA,
        run,
        run_branch,
        branch_tip: done.branch_tip,
        worktrees: done.worktrees,
        kept: done.kept,
        seq,
    })
}

/// Removes the work areas of `--work` runs that died in the repository containing `dir`;
/// returns the directories removed.
pub(crate) fn cleanup(dir: &Path) -> Result<Vec<PathBuf>> {
    crate::work::cleanup_stale(dir).map_err(|e| Error::internal(e.to_string()).with_source(e))
}
