//! `git forum apply` and `git forum discard` on the repository: bringing a run branch into the
//! user's current branch (fast-forward when possible, else a merge commit), and removing a
//! run's worktrees and branch while its kept change commits stay.
//!
//! Every refusal is decided before anything is written: a dirty work tree, a detached HEAD, no
//! run branch, a branch already contained, a merge that would conflict (found with
//! `git merge-tree`, which writes no ref and touches no tree). Only then does `git merge` run
//! in the user's tree, with the user's own configuration and hooks (it is their branch).

use std::path::Path;

use super::git;
use super::run_diff;
use super::stale;
use super::{LEGACY_WORK_DIR, WorkRoot, run_branch};
use crate::run::{FileChange, Keep, WorkError};

/// Why apply or discard did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ApplyRefusal {
    /// The state of the repository forbids it now (one line saying why and what to do).
    Refused(String),
    /// git or the file system failed.
    Failed(WorkError),
}

impl From<WorkError> for ApplyRefusal {
    fn from(e: WorkError) -> ApplyRefusal {
        ApplyRefusal::Failed(e)
    }
}

impl std::fmt::Display for ApplyRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApplyRefusal::Refused(m) => f.write_str(m),
            ApplyRefusal::Failed(e) => write!(f, "{e}"),
        }
    }
}

/// A run branch brought into the current branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Applied {
    /// The branch brought into (short name, `main`).
    pub(crate) branch: String,
    /// The run branch (short name, `forum/run-12`).
    pub(crate) run_branch: String,
    /// The branch's tip before, and after.
    pub(crate) from: String,
    pub(crate) to: String,
    /// `fast-forward` or `merge`.
    pub(crate) mode: &'static str,
}

/// What discard removed and kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Discarded {
    /// The run branch's tip when it was deleted, `None` when there was no branch.
    pub(crate) branch_tip: Option<String>,
    /// How many worktrees were removed.
    pub(crate) worktrees: usize,
    /// The kept change refs that stay (`refs/forum/work/...`, `refs/forum/quarantine/...`,
    /// `refs/forum/attempts/...`).
    pub(crate) kept: Vec<String>,
}

fn refused(m: impl Into<String>) -> ApplyRefusal {
    ApplyRefusal::Refused(m.into())
}

fn short(refname: &str) -> String {
    refname
        .strip_prefix("refs/heads/")
        .unwrap_or(refname)
        .to_string()
}

/// The tip of `refname`, or `None` when it does not exist.
fn tip(repo: &Path, refname: &str) -> Result<Option<String>, WorkError> {
    let out = git::run(repo, &["rev-parse", "--verify", "--quiet", refname])?;
    Ok((out.ok && !out.stdout.is_empty()).then(|| out.text()))
}

/// The runs (request seqs) that have a run branch, highest first.
pub(crate) fn runs_with_branches(repo: &Path) -> Result<Vec<u64>, WorkError> {
    let out = git::ok(
        repo,
        &["for-each-ref", "--format=%(refname)", "refs/heads/forum/"],
    )?;
    let mut runs: Vec<u64> = out
        .lines()
        .filter_map(|r| r.strip_prefix("refs/heads/forum/run-")?.parse().ok())
        .collect();
    runs.sort_unstable_by(|a, b| b.cmp(a));
    Ok(runs)
}

/// What apply would do, decided (every refusal included) before anything is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Planned {
    /// The branch to bring into (short name, `main`).
    pub(crate) branch: String,
    /// The run branch (short name, `forum/run-12`).
    pub(crate) run_branch: String,
    /// The two tips: the branch's and the run branch's.
    pub(crate) ours: String,
    pub(crate) theirs: String,
    /// `fast-forward` or `merge`.
    pub(crate) mode: &'static str,
}

/// How a run branch would come into the branch HEAD names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The branch is behind the run branch: it would move to the run branch's tip.
    FastForward,
    /// A merge commit whose tree `git merge-tree` wrote as `tree`, without a conflict.
    Merge { tree: String },
    /// A merge that conflicts in these files; apply refuses it.
    Conflict { paths: Vec<String> },
}

/// What apply would meet: the two branches, how one would come into the other, and the
/// uncommitted changes that would stop it. Found without touching the work tree, the index
/// or any ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decided {
    /// The branch to bring into (short name, `main`).
    pub(crate) branch: String,
    /// The run branch (short name, `forum/run-12`).
    pub(crate) run_branch: String,
    /// The two tips: the branch's and the run branch's.
    pub(crate) ours: String,
    pub(crate) theirs: String,
    pub(crate) outcome: Outcome,
    /// Tracked files with uncommitted changes (apply refuses while there are any).
    pub(crate) dirty: Vec<String>,
}

/// Decides how run `run`'s branch would come into the branch HEAD names, in the repository
/// at `repo`: the one decision both [`plan`] (apply) and a dry run read. Refused when there is
/// nothing to decide: no run branch, a detached HEAD or the run branch checked out, an unborn
/// branch, a run branch already contained. Writes nothing but the objects of `git merge-tree`'s
/// tree, which no ref names.
pub(crate) fn decide(repo: &Path, run: u64) -> Result<Decided, ApplyRefusal> {
    let branch_ref = run_branch(run);
    let run_short = short(&branch_ref);
    let Some(theirs) = tip(repo, &branch_ref)? else {
        return Err(refused(format!(
            "run {run} has no branch {run_short} (nothing was merged, or it was discarded); see `git forum runs`"
        )));
    };
    let current = branch_to_apply_into(repo, &branch_ref, &run_short)?;
    let dirty = dirty(repo)?;
    let Some(ours) = tip(repo, "HEAD")? else {
        // An unborn branch: the run branch becomes it.
        return Err(refused(format!(
            "{current} has no commit yet; run `git switch -C {current} {run_short}` instead"
        )));
    };
    if is_ancestor(repo, &theirs, &ours)? {
        return Err(refused(format!(
            "{run_short} is already in {current}; nothing to apply"
        )));
    }
    let outcome = if is_ancestor(repo, &ours, &theirs)? {
        Outcome::FastForward
    } else {
        merge_probe(repo, &ours, &theirs)?
    };
    Ok(Decided {
        branch: current,
        run_branch: run_short,
        ours,
        theirs,
        outcome,
        dirty,
    })
}

/// Decides how run `run`'s branch would come into the branch HEAD names, in the repository
/// at `repo`, or why it cannot (uncommitted changes, a conflict, or a refusal of
/// [`decide`]); writes nothing.
pub(crate) fn plan(repo: &Path, run: u64) -> Result<Planned, ApplyRefusal> {
    let d = decide(repo, run)?;
    if !d.dirty.is_empty() {
        return Err(refused(format!(
            "the work tree has uncommitted changes ({}); commit or stash them, then run apply again",
            list(&d.dirty)
        )));
    }
    let mode = match &d.outcome {
        Outcome::FastForward => "fast-forward",
        Outcome::Merge { .. } => "merge",
        Outcome::Conflict { paths } => {
            return Err(refused(format!(
                "{} conflicts with {} in {}; merge it yourself with `git merge {}`",
                d.run_branch,
                d.branch,
                list(paths),
                d.run_branch
            )));
        }
    };
    Ok(Planned {
        branch: d.branch,
        run_branch: d.run_branch,
        ours: d.ours,
        theirs: d.theirs,
        mode,
    })
}

/// What the branch would receive from `d`, as `git diff` shows it: from its tip to the run
/// branch's (a fast-forward) or to the merge's tree (a merge); for a conflict, which receives
/// nothing, the run branch's changes since it parted from the branch.
pub(crate) fn received(repo: &Path, d: &Decided) -> Result<run_diff::RunDiff, WorkError> {
    match &d.outcome {
        Outcome::FastForward => run_diff::diff(repo, &d.ours, &d.theirs, &[], true),
        Outcome::Merge { tree } => run_diff::diff(repo, &d.ours, tree, &[], true),
        Outcome::Conflict { .. } => {
            let fork = git::ok(repo, &["merge-base", &d.ours, &d.theirs])?;
            run_diff::diff(repo, &fork, &d.theirs, &[], true)
        }
    }
}

/// The files `planned` would bring in: the run branch's changes since it parted from the
/// branch (`git diff OURS...THEIRS`), with their lines.
pub(crate) fn incoming(repo: &Path, planned: &Planned) -> Result<Vec<FileChange>, WorkError> {
    let fork = git::ok(repo, &["merge-base", &planned.ours, &planned.theirs])?;
    Ok(super::run_diff::diff(repo, &fork, &planned.theirs, &[], false)?.files)
}

/// Brings run `run`'s branch into the branch HEAD names, in the repository at `repo`. With
/// `expect`, only the plan that was shown: refused when either tip moved since.
pub(crate) fn apply(
    repo: &Path,
    run: u64,
    expect: Option<&Planned>,
) -> Result<Applied, ApplyRefusal> {
    let p = plan(repo, run)?;
    if let Some(e) = expect
        && (e.ours != p.ours || e.theirs != p.theirs)
    {
        return Err(refused(format!(
            "{} or {} moved since its changes were shown; nothing was applied, run apply again",
            p.branch, p.run_branch
        )));
    }
    merge(repo, p.mode, &p.theirs, &p.run_branch, run)?;
    let to = tip(repo, "HEAD")?.unwrap_or_default();
    Ok(Applied {
        branch: p.branch,
        run_branch: p.run_branch,
        from: p.ours,
        to,
        mode: p.mode,
    })
}

/// The short name of the branch HEAD names, refused when HEAD is detached or names the run
/// branch `branch_ref` itself.
fn branch_to_apply_into(
    repo: &Path,
    branch_ref: &str,
    run_short: &str,
) -> Result<String, ApplyRefusal> {
    let head_ref = git::run(repo, &["symbolic-ref", "--quiet", "HEAD"])?;
    if !head_ref.ok {
        return Err(refused(format!(
            "HEAD is detached; check out the branch to bring {run_short} into, then run apply again"
        )));
    }
    let head_ref = head_ref.text();
    let current = short(&head_ref);
    if head_ref == branch_ref {
        return Err(refused(format!(
            "{run_short} is the branch checked out; check out the branch to bring it into"
        )));
    }
    Ok(current)
}

/// The tracked files with uncommitted changes (`git status`, which takes no lock and
/// rewrites no index: every git process runs with `GIT_OPTIONAL_LOCKS=0`).
fn dirty(repo: &Path) -> Result<Vec<String>, WorkError> {
    let status = git::run(
        repo,
        &["status", "--porcelain=v1", "-z", "--untracked-files=no"],
    )?;
    git::ensure(&status, &["status"])?;
    Ok(super::diff::dirty_paths(&status.stdout))
}

/// Whether commit `a` is an ancestor of commit `b` (or is `b`).
fn is_ancestor(repo: &Path, a: &str, b: &str) -> Result<bool, WorkError> {
    let out = git::run(repo, &["merge-base", "--is-ancestor", a, b])?;
    match out.code {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => git::ensure(&out, &["merge-base"]).map(|_| false),
    }
}

/// The merge of `theirs` into `ours` as `git merge-tree --write-tree` finds it, which writes
/// the merged tree's objects and touches no ref, index or work tree: clean with its tree, or
/// conflicting in the files it names.
fn merge_probe(repo: &Path, ours: &str, theirs: &str) -> Result<Outcome, WorkError> {
    let probe = git::run(
        repo,
        &[
            "merge-tree",
            "--write-tree",
            "-z",
            "--name-only",
            ours,
            theirs,
        ],
    )?;
    let mut fields = probe.stdout.split(|b| *b == 0);
    let tree = fields
        .next()
        .map(|f| String::from_utf8_lossy(f).trim().to_string())
        .unwrap_or_default();
    if probe.code == Some(1) {
        let paths = fields
            .take_while(|f| !f.is_empty())
            .map(|f| String::from_utf8_lossy(f).into_owned())
            .collect();
        return Ok(Outcome::Conflict { paths });
    }
    git::ensure(&probe, &["merge-tree"])?;
    Ok(Outcome::Merge { tree })
}

/// Runs `git merge` of `theirs` in the user's tree, in `mode`, with the user's configuration
/// and hooks.
fn merge(
    repo: &Path,
    mode: &str,
    theirs: &str,
    run_short: &str,
    run: u64,
) -> Result<(), ApplyRefusal> {
    let message = format!("Merge {run_short}: the changes of git forum run {run}");
    let mut cmd = git::user_git(repo);
    match mode {
        "fast-forward" => cmd.args(["merge", "--ff-only", "--quiet", theirs]),
        _ => cmd.args([
            "merge",
            "--no-ff",
            "--no-edit",
            "--quiet",
            "-m",
            &message,
            theirs,
        ]),
    };
    let out = git::run_limited(cmd, git::OUTPUT_LIMIT)?;
    git::ensure(&out, &["merge"])?;
    Ok(())
}

/// A few paths for a message.
fn list(paths: &[String]) -> String {
    let mut shown: Vec<&str> = paths.iter().take(5).map(String::as_str).collect();
    let more = paths.len().saturating_sub(shown.len());
    let tail = format!("and {more} more");
    if more > 0 {
        shown.push(&tail);
    }
    shown.join(", ")
}

/// Removes run `run`'s worktrees (of ledger `ledger`) and its branch in the repository at
/// `repo`; the kept change refs stay.
pub(crate) fn discard(repo: &Path, ledger: &str, run: u64) -> Result<Discarded, ApplyRefusal> {
    let common = stale::common_dir(repo)?;
    let place = stale::Place::of(
        &WorkRoot::from_env()?,
        &common,
        stale::work_tree(repo).as_deref(),
    )?;
    // A run of an earlier version kept its worktrees under the git dir.
    let legacy = common
        .join(LEGACY_WORK_DIR)
        .join(ledger)
        .join(run.to_string());
    let area = if legacy.exists() {
        legacy
    } else {
        place.area(ledger, run)
    };
    let branch_ref = run_branch(run);
    let run_short = short(&branch_ref);
    let head_ref = git::run(repo, &["symbolic-ref", "--quiet", "HEAD"])?;
    if head_ref.ok && head_ref.text() == branch_ref {
        return Err(refused(format!(
            "{run_short} is the branch checked out; check out another branch first"
        )));
    }
    let mut worktrees = 0;
    let had_area = area.exists();
    if had_area {
        let Some(_lock) = stale::try_lock(&area)? else {
            return Err(refused(format!(
                "run {run} is still running (its work area is in use); stop it first"
            )));
        };
        let _turn = place.turn()?;
        worktrees = stale::worktrees(&common)?
            .iter()
            .filter(|t| t.starts_with(&area))
            .count();
        stale::remove_area(&common, &area)?;
    }
    let branch_tip = tip(&common, &branch_ref)?;
    if branch_tip.is_none() && !had_area {
        return Err(refused(format!(
            "run {run} has no branch {run_short} and no worktrees; nothing to discard"
        )));
    }
    if let Some(t) = &branch_tip {
        git::ok(&common, &["update-ref", "-d", &branch_ref, t])?;
    }
    Ok(Discarded {
        branch_tip,
        worktrees,
        kept: kept_refs(&common, ledger, run)?,
    })
}

/// The kept change refs of run `run` of `ledger`.
fn kept_refs(common: &Path, ledger: &str, run: u64) -> Result<Vec<String>, WorkError> {
    let mut out = Vec::new();
    for place in [Keep::Work, Keep::Quarantine, Keep::Attempt(0)] {
        let prefix = format!("{}/{ledger}/{run}/", place.namespace());
        let listed = git::ok(common, &["for-each-ref", "--format=%(refname)", &prefix])?;
        out.extend(listed.lines().map(str::to_string));
    }
    Ok(out)
}
