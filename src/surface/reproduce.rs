//! `git forum reproduce RUN`: a `--work` run's checks run again on its recorded change commits
//! (in the sandbox, as the run ran them, through the same check runner) with their exit codes
//! compared with the record, and its run branch rebuilt from the changes the record merged, in
//! order, on a scratch ref (never the user's branches), its tree compared with the run
//! branch's. Every mismatch is one line.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value as J;

use super::{Error, Report, Result};
use crate::exec::sandbox::probe::{Jail, Sandboxing};
use crate::exec::sandbox::{Mode, Policy, profile::Profile};
use crate::ledger::kind;
use crate::run::WorkError;
use crate::run::replay::{Merges, Recorded, read_all, run_entries};
use crate::store::git::GitStore;
use crate::work::ScratchMerges;

/// How long one check may run again.
const DEADLINE: Duration = Duration::from_secs(600);

/// How much of a check's output is kept (only its exit code is compared).
const OUTPUT_CAP: usize = 4096;

/// What `reproduce` found: `git forum reproduce RUN --json`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ReproduceReport {
    /// The run (its request seq).
    pub(crate) run: u64,
    /// Each recorded check run again.
    pub(crate) checks: Vec<CheckAgain>,
    /// The changes the record merged, in order (their commits).
    pub(crate) merged: Vec<String>,
    /// The tree of the run branch rebuilt from them.
    pub(crate) rebuilt_tree: Option<String>,
    /// The run branch and its tree in this repository (`None`: it is not here).
    pub(crate) branch: String,
    /// The run branch's tree.
    pub(crate) branch_tree: Option<String>,
    /// How the checks ran: `bwrap` (confined) or `unconfined` (and why).
    pub(crate) sandbox: String,
    /// One line per mismatch; empty when everything reproduced.
    pub(crate) mismatches: Vec<String>,
}

/// One recorded check, run again.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CheckAgain {
    /// The `check` entry.
    pub(crate) seq: u64,
    /// Its task (`run`: the run branch).
    pub(crate) task: String,
    /// The command.
    pub(crate) command: String,
    /// The commit it ran on.
    pub(crate) commit: String,
    /// The exit code the record holds (`None`: killed or never started).
    pub(crate) recorded_exit: Option<i64>,
    /// The exit code now.
    pub(crate) exit: Option<i64>,
}

impl Report for ReproduceReport {
    const SCHEMA: &'static str = "git-forum.reproduce/1";
}

/// `git` in `dir`: its trimmed standard output, or the one line saying what failed.
fn git(dir: &Path, args: &[&str]) -> Result<String> {
    git_with(dir, args, &[])
}

/// [`git`] with `env` set for the one command.
fn git_with(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<String> {
    let mut c = crate::gitproc::in_dir(dir);
    c.args(args);
    c.envs(env.iter().copied());
    let out = crate::gitproc::output(c, None, 1 << 20)
        .map_err(|e| Error::internal(format!("git {}: {e}", args.join(" "))))?;
    if !out.status.success() {
        return Err(Error::failed(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The sandbox the checks run in, as a `--work` run's default: confined where bubblewrap
/// works, without network.
fn jail(dir: &Path) -> (String, Option<Arc<Jail>>) {
    let policy = Policy {
        net: false,
        read: Vec::new(),
        allow_hosts: Vec::new(),
    };
    match Sandboxing::new(Mode::Default, policy).resolve() {
        Ok((_, Some(j))) => {
            let profile = Profile::resolve(dir, &|k| std::env::var(k).ok());
            ("bwrap".into(), Some(Arc::new(j.with_profile(profile))))
        }
        Ok((record, None)) => (format!("unconfined ({record:?})"), None),
        Err(e) => (format!("unconfined ({e})"), None),
    }
}

/// Runs `command` on `commit` in a scratch worktree under `area`: its exit code.
fn check_on(
    dir: &Path,
    area: &Path,
    name: &str,
    commit: &str,
    command: &str,
    jail: Option<&Arc<Jail>>,
) -> Result<Option<i64>> {
    let tree = area.join(name);
    let path = tree.to_string_lossy().to_string();
    git(
        dir,
        &["worktree", "add", "--detach", "--quiet", &path, commit],
    )?;
    let j = jail.map(|j| Arc::new(j.for_tree(&tree, &[])));
    let ran = crate::exec::command::in_jail(j, || {
        crate::work::run_check(&tree, command, DEADLINE, OUTPUT_CAP)
    });
    let _ = git(dir, &["worktree", "remove", "--force", &path]);
    Ok(ran.ok().and_then(|r| r.exit).map(i64::from))
}

fn text(b: &J, key: &str) -> String {
    b[key].as_str().unwrap_or_default().to_string()
}

/// Who wrote the rebuilt branch's commits, and when: fixed, so the rebuilt tip (and the check
/// of the run branch that names it) is the same commit on every side and every time.
const SCRATCH_IDENTITY: &[(&str, &str)] = &[
    ("GIT_AUTHOR_NAME", "git forum reproduce"),
    ("GIT_AUTHOR_EMAIL", "reproduce@git-forum.invalid"),
    ("GIT_AUTHOR_DATE", "@0 +0000"),
    ("GIT_COMMITTER_NAME", "git forum reproduce"),
    ("GIT_COMMITTER_EMAIL", "reproduce@git-forum.invalid"),
    ("GIT_COMMITTER_DATE", "@0 +0000"),
];

/// One change the record merged onto the run branch.
struct Merged {
    /// Its task.
    task: String,
    /// Its change commit.
    commit: String,
    /// The tree the run branch had once it was merged, as its `integrated` entry (at `seq`)
    /// witnessed it; `None` in a run recorded before integrations were witnessed.
    witnessed: Option<(u64, String)>,
}

/// Rebuilds the run branch from `base` and the `merged` changes, each integrated by the
/// engine's own rule ([`Merges::integrated_tree`]) on the scratch ref: its tip and tree, or
/// the one line saying which change could not be merged; each tree that differs from the one
/// its `integrated` entry witnessed is a line of `mismatches`.
fn rebuild(
    dir: &Path,
    run: u64,
    base: &str,
    merged: &[Merged],
    mismatches: &mut Vec<String>,
) -> Result<(String, String)> {
    let merges = ScratchMerges::in_repository(dir);
    let mut tip = base.to_string();
    let mut tip_tree = merges.tree(base).map_err(Error::failed)?;
    for m in merged {
        let tree = match merges.integrated_tree(&tip_tree, &m.commit) {
            Ok(tree) => tree,
            Err(WorkError::Conflict { paths }) => {
                return Err(Error::failed(format!(
                    "the change {} of task {} conflicts with the run branch rebuilt before it (in {}), though the record merged it",
                    m.commit,
                    m.task,
                    paths.join(", ")
                )));
            }
            Err(e) => {
                return Err(Error::failed(format!(
                    "the change {} of task {} cannot be merged again: {e}",
                    m.commit, m.task
                )));
            }
        };
        if let Some((seq, recorded)) = &m.witnessed
            && *recorded != tree
        {
            mismatches.push(format!(
                "the change {} of task {} merged again gives tree {tree}; its integrated entry at seq {seq} says {recorded}",
                m.commit, m.task
            ));
        }
        tip = git_with(
            dir,
            &[
                "commit-tree",
                &tree,
                "-p",
                &tip,
                "-p",
                &m.commit,
                "-m",
                "reproduce",
            ],
            SCRATCH_IDENTITY,
        )?;
        tip_tree = tree;
    }
    let scratch = format!("refs/forum/reproduce/run-{run}");
    git(dir, &["update-ref", &scratch, &tip])?;
    let _ = git(dir, &["update-ref", "-d", &scratch]);
    Ok((tip, tip_tree))
}

/// Reproduces run `run` of the ledger in `store`, in the repository at `dir`.
pub(crate) fn reproduce(store: &GitStore, dir: &Path, run: u64) -> Result<ReproduceReport> {
    let all = read_all(store).map_err(|e| Error::internal(format!("ledger: {e}")))?;
    match all.iter().find(|(e, _)| e.seq == run) {
        Some((e, _)) if e.kind == kind::REQUEST => {}
        _ => {
            return Err(Error::not_found(format!(
                "seq {run} is not a run's request: name a run as `git forum runs` lists it"
            )));
        }
    }
    if store.halts().is_running(run)? {
        return Err(Error::conflict(format!(
            "run {run} is still running: reproduce it once it has ended (`git forum runs` shows when)"
        )));
    }
    let entries = run_entries(&all, run).map_err(Error::conflict)?;
    let work = entries[0].payload.get("work").cloned().unwrap_or(J::Null);
    if !work.is_object() {
        return Err(Error::conflict(format!(
            "run {run} did not work in the repository (no --work): it has no checks or run branch to reproduce"
        )));
    }
    let (sandbox, jail) = jail(dir);
    let merged = merged_changes(&entries);
    let base = text(&work, "base");
    let branch = text(&work, "run_branch");
    let mut step_mismatches = Vec::new();
    let rebuilt = rebuild(dir, run, &base, &merged, &mut step_mismatches);
    let branch_tree = branch_ref(dir, &branch).and_then(|r| {
        git(
            dir,
            &["rev-parse", "--verify", "--quiet", &format!("{r}^{{tree}}")],
        )
        .ok()
    });
    let tip = rebuilt.as_ref().ok().map(|(tip, _)| tip.as_str());
    let area = scratch_area()?;
    let again = checks_again(dir, &area, &entries, tip, jail.as_ref());
    let _ = std::fs::remove_dir_all(&area);
    let (checks, mut mismatches) = again?;
    mismatches.append(&mut step_mismatches);
    let rebuilt_tree = match rebuilt {
        Ok((_, t)) => Some(t),
        Err(e) => {
            mismatches.push(format!(
                "the run branch could not be rebuilt from the record: {e}"
            ));
            None
        }
    };
    match (&rebuilt_tree, &branch_tree) {
        (Some(a), Some(b)) if a != b => mismatches.push(format!(
            "{branch} rebuilt from the {} merged change(s) the record names has tree {a}; the branch has {b}",
            merged.len()
        )),
        (Some(_), None) => mismatches.push(format!(
            "{branch} is not in this repository: its tree cannot be compared (fetch or push it)"
        )),
        _ => {}
    }
    let _ = git(dir, &["worktree", "prune"]);
    Ok(ReproduceReport {
        run,
        checks,
        merged: merged.into_iter().map(|m| m.commit).collect(),
        rebuilt_tree,
        branch,
        branch_tree,
        sandbox,
        mismatches,
    })
}

/// Each recorded check of `entries` run again on the commit it ran on (a check of the run
/// branch on the rebuilt `tip`, skipped when there is none): the checks and one line per exit
/// that differs.
fn checks_again(
    dir: &Path,
    area: &Path,
    entries: &[Recorded],
    tip: Option<&str>,
    jail: Option<&Arc<Jail>>,
) -> Result<(Vec<CheckAgain>, Vec<String>)> {
    let by_seq = |s: u64| entries.iter().find(|e| e.seq == s);
    let (mut checks, mut mismatches) = (Vec::new(), Vec::new());
    for e in entries.iter().filter(|e| e.kind == kind::CHECK) {
        let task = text(&e.payload, "task");
        let commit = match (e.parent.and_then(by_seq), tip) {
            (Some(c), _) if c.kind == kind::CHANGE => text(&c.payload, "commit"),
            // A check of the run branch ran on the branch the changes built.
            (_, Some(tip)) => tip.to_string(),
            (_, None) => continue,
        };
        let command = text(&e.payload, "command");
        let name = format!("check-{}", e.seq);
        let exit = check_on(dir, area, &name, &commit, &command, jail)?;
        let recorded_exit = e.payload["exit"].as_i64();
        if exit != recorded_exit {
            let code = |c: Option<i64>| c.map_or("without a code".into(), |c| c.to_string());
            mismatches.push(format!(
                "check at seq {} ({task}: {command}) on {commit} exits {} now; the record says {}",
                e.seq,
                code(exit),
                code(recorded_exit),
            ));
        }
        checks.push(CheckAgain {
            seq: e.seq,
            task,
            command,
            commit,
            recorded_exit,
            exit,
        });
    }
    Ok((checks, mismatches))
}

/// The run branch: the local one, else one fetched from a remote (in a clone).
fn branch_ref(dir: &Path, branch: &str) -> Option<String> {
    let local = format!("refs/heads/{branch}");
    if git(dir, &["rev-parse", "--verify", "--quiet", &local]).is_ok() {
        return Some(local);
    }
    let pattern = format!("refs/remotes/*/{branch}");
    git(dir, &["for-each-ref", "--format=%(refname)", &pattern])
        .ok()?
        .lines()
        .next()
        .map(str::to_string)
}

/// The changes the record merged, in the order it merged them: its `integrated` entries, or,
/// in a run recorded before integrations were witnessed, each `merge` decision whose change
/// neither conflicted nor turned out to add nothing.
fn merged_changes(entries: &[Recorded]) -> Vec<Merged> {
    let commit_of = |seq: Option<u64>| {
        let c = entries.iter().find(|c| Some(c.seq) == seq)?;
        Some(text(&c.payload, "commit"))
    };
    let witnessed: Vec<Merged> = entries
        .iter()
        .filter(|e| e.kind == kind::INTEGRATED)
        .map(|e| Merged {
            task: text(&e.payload, "task"),
            commit: text(&e.payload, "commit"),
            witnessed: Some((e.seq, text(&e.payload, "tree"))),
        })
        .collect();
    if crate::run::witnessed(&entries[0].payload["work"]) {
        return witnessed;
    }
    let mut out = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if e.kind != kind::SHIP || e.payload["decision"] != "merge" {
            continue;
        }
        let task = text(&e.payload, "task");
        // The entry of the task right after the decision says what its integration gave.
        let next = entries[i + 1..]
            .iter()
            .find(|n| n.payload["task"] == task.as_str());
        let failed = next.is_some_and(|n| {
            n.kind == kind::CONFLICT
                || (n.kind == kind::CHANGE && n.payload.get("adds_nothing").is_some())
        });
        if let (false, Some(commit)) = (failed, commit_of(e.payload["change"].as_u64())) {
            out.push(Merged {
                task,
                commit,
                witnessed: None,
            });
        }
    }
    out
}

/// A fresh directory for the scratch worktrees.
fn scratch_area() -> Result<PathBuf> {
    let dir = crate::scratch::dir("git-forum-reproduce-")
        .map_err(|e| Error::internal(format!("cannot make a scratch directory: {e}")))?;
    Ok(dir.keep())
}
