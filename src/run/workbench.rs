//! The seam between a run and the repository it changes: the types a `--work` run
//! passes around (its base, a task's worktree, the commit a task's change became, a check's
//! outcome) and the [`Workbench`] trait the engine drives. This file is pure: no I/O. The git
//! implementation, `GitWork`, lives in `crate::work` (an adapter, like `store`).
//!
//! # Entries
//!
//! A run that changes the repository witnesses five kinds of its own (constants in
//! `crate::ledger::kind`): `change` (what a task changed: [`Change::payload`]), `check` (one
//! check command: [`CheckRun::payload`]), `ship` (the pre-ship gate's decision), `conflict` (a
//! change that did not integrate) and `applied` (`git forum apply` brought the run branch into
//! a branch).
//!
//! # Where things live
//!
//! * worktrees: under git forum's cache, `work/CLONE/LEDGER/RUN/TASK` (never inside the user's
//!   tree or the git dir; see `crate::work`);
//! * kept change commits: `refs/forum/work/LEDGER/RUN/TASK` ([`Keep::Work`]) and
//!   `refs/forum/quarantine/LEDGER/RUN/TASK` ([`Keep::Quarantine`]);
//! * the integrated run: `refs/heads/forum/run-RUN`.
//!
//! A change commit carries the trailers [`Tie::trailers`] writes, so the code names the record
//! (`Forum-Ledger`, `Forum-Run`, `Forum-Task`, `Forum-Entry`) as the record names the code.
//!
//! Beyond the interface agreed for the seam, this file adds helpers only: the trailer keys,
//! [`Tie::trailers`], [`CheckRun::payload`], [`Keep::namespace`], [`kept_ref`], and [`task_component`].

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

/// The trailer that names the ledger.
pub(crate) const TRAILER_LEDGER: &str = "Forum-Ledger";
/// The trailer that names the run (its request seq).
pub(crate) const TRAILER_RUN: &str = "Forum-Run";
/// The trailer that names the task entry's seq.
pub(crate) const TRAILER_TASK: &str = "Forum-Task";
/// The trailer that names the task entry's hash.
pub(crate) const TRAILER_ENTRY: &str = "Forum-Entry";

/// What a run started from: HEAD when it was opened, and what of the user's tree was not part
/// of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Base {
    /// The commit every task starts from (HEAD at submit).
    pub commit: String,
    /// The branch HEAD named then (`main`), or `None` when HEAD was detached.
    pub branch: Option<String>,
    /// Paths with uncommitted changes in the user's tree (`git status --porcelain`); they are
    /// reported, and are not part of the base.
    pub dirty: Vec<String>,
}

/// One task's worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskTree {
    /// The task's id in the plan.
    pub(crate) task: String,
    /// The worktree's directory.
    pub path: PathBuf,
    /// The commit the worktree started at (the base, or the merge of its upstreams).
    pub start: String,
    /// What a sandbox shows a command in this worktree besides the worktree itself, read-only:
    /// `(source, where it appears)` pairs of the git metadata `git status` and `git diff` need
    /// there (the worktree's admin dir, the objects and refs, a configuration stripped to what
    /// reading the repository needs). Empty for a workbench that needs none.
    pub(crate) shows: Vec<(PathBuf, PathBuf)>,
    /// Whether the worker's prompt names `path`. A live run's never does (no host path goes
    /// to a model or into the ledger); a strict replay's does for a run recorded when prompts
    /// named their worktree, so it sends what that run sent.
    pub(crate) named: bool,
}

pub use crate::exec::config::ChangeLimits;

/// A secret found in what a change adds: where, which rule, and a fingerprint that names it
/// without revealing it (never the secret itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretFound {
    /// The file's path in the change.
    pub path: String,
    /// The line (from 1) of the file where the secret starts.
    pub line: u64,
    /// The rule that found it.
    pub rule: String,
    /// Its fingerprint (see `crate::secrets`).
    pub fingerprint: String,
}

impl SecretFound {
    /// `{path, line, rule, fingerprint}`.
    pub(crate) fn payload(&self) -> Value {
        json!({
            "path": self.path,
            "line": self.line,
            "rule": self.rule,
            "fingerprint": self.fingerprint,
        })
    }
}

/// A secret scanner as the workbench calls it on the text a change adds: each find's byte
/// offset in the text, rule and fingerprint (the policy's allowlist already applied).
pub type Screen<'a> = &'a (dyn Fn(&str) -> Vec<(usize, String, String)> + Sync);

/// How a change is committed: the diff's cap, the limits, and the scanner for what it adds.
pub struct CommitRules<'a> {
    /// The bytes of diff the `change` entry holds.
    pub diff_cap: usize,
    /// What the change may hold.
    pub limits: ChangeLimits,
    /// Finds secrets in the text the change adds.
    pub screen: Screen<'a>,
}

/// A [`Screen`] that finds nothing.
fn no_secrets(_: &str) -> Vec<(usize, String, String)> {
    Vec::new()
}

impl CommitRules<'static> {
    /// The default limits and no secret scan, with a diff cap of `diff_cap` bytes (for callers
    /// of the library that scan nothing; a run always scans).
    pub fn unscreened(diff_cap: usize) -> CommitRules<'static> {
        CommitRules {
            diff_cap,
            limits: ChangeLimits::default(),
            screen: &no_secrets,
        }
    }
}

/// A symbolic link a change adds or modifies whose target lies outside the worktree (an
/// absolute path, or one that climbs above the worktree's top); the pre-ship gate refuses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkOut {
    /// The link's path in the change.
    pub path: String,
    /// Where it points.
    pub target: String,
}

/// Who made a change: the lane and the model behind it. Written as the commit's author
/// `LANE (MODEL) <LANE@git-forum.invalid>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Author {
    /// The roster lane that ran the task.
    pub lane: String,
    /// The model that answered.
    pub model: String,
}

/// What ties a change commit to the record: written as trailers
/// `Forum-Ledger: NAME`, `Forum-Run: SEQ`, `Forum-Task: SEQ`, `Forum-Entry: HASH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tie {
    /// The ledger's name.
    pub ledger: String,
    /// The run's request seq.
    pub run_seq: u64,
    /// The seq of the task's entry.
    pub task_seq: u64,
    /// The hash of the task's entry.
    pub task_hash: String,
}

impl Tie {
    /// The trailer block (one `Key: value` line each, in a fixed order, newline-terminated).
    pub(crate) fn trailers(&self) -> String {
        format!(
            "{TRAILER_LEDGER}: {}\n{TRAILER_RUN}: {}\n{TRAILER_TASK}: {}\n{TRAILER_ENTRY}: {}\n",
            self.ledger, self.run_seq, self.task_seq, self.task_hash
        )
    }
}

/// One file a change touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// The path (for a rename, the new path).
    pub path: String,
    /// `A` added, `M` modified, `D` deleted, `R` renamed.
    pub status: String,
    /// Lines added (0 for a binary file).
    pub added: u64,
    /// Lines removed (0 for a binary file).
    pub removed: u64,
    /// The git blob id of the file after the change; `None` when the change deleted it (or
    /// when a record older than this field was read back).
    pub blob: Option<String>,
}

/// What a task changed, as committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The task's id in the plan.
    pub(crate) task: String,
    /// The commit the task's worktree started at.
    pub base: String,
    /// The change commit, or `None` when the task changed nothing.
    pub commit: Option<String>,
    /// The tree of the change commit (the start's tree when nothing changed).
    pub tree: String,
    /// The files touched, sorted by path.
    pub files: Vec<FileChange>,
    /// The unified diff from `base`, cut at the cap.
    pub diff: String,
    /// Whether `diff` was cut (the commit stays the full record).
    pub truncated: bool,
    /// The symbolic links it adds or modifies that point outside the worktree.
    pub links_out: Vec<LinkOut>,
}

impl Change {
    /// The `change` entry's body: `{task, base, commit, tree, files: [{path, status, added,
    /// removed}], blobs: {path: blob id | null}, diff, truncated}`, `commit` null when nothing
    /// changed. `blobs` names each file's git blob after the change (null: deleted), so a
    /// reader can check that a commit holds what the record says was written; it is left out
    /// when no file was read with its blob.
    pub fn payload(&self) -> Value {
        let files: Vec<Value> = self
            .files
            .iter()
            .map(|f| {
                json!({
                    "path": f.path,
                    "status": f.status,
                    "added": f.added,
                    "removed": f.removed,
                })
            })
            .collect();
        let mut p = json!({
            "task": self.task,
            "base": self.base,
            "commit": self.commit,
            "tree": self.tree,
            "files": files,
            "diff": self.diff,
            "truncated": self.truncated,
        });
        let blobs: serde_json::Map<String, Value> = self
            .files
            .iter()
            .filter(|f| f.blob.is_some() || f.status == "D")
            .map(|f| (f.path.clone(), json!(f.blob)))
            .collect();
        if !blobs.is_empty() {
            p["blobs"] = Value::Object(blobs);
        }
        if !self.links_out.is_empty() {
            p["links_out"] = self
                .links_out
                .iter()
                .map(|l| json!({"path": l.path, "target": l.target}))
                .collect();
        }
        p
    }
}

/// One check command's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckRun {
    /// The shell command as given.
    pub(crate) command: String,
    /// Its exit code; `None` when it was killed (deadline or signal) or could not start.
    pub exit: Option<i32>,
    /// Whether it passed (exit 0).
    pub ok: bool,
    /// How long it ran.
    pub(crate) seconds: f64,
    /// The last bytes of its stdout and stderr (cut on a character boundary).
    pub tail: String,
}

impl CheckRun {
    /// The `check` entry's body for `task`: `{task, command, exit, ok, seconds, output}`,
    /// `exit` null when the command was killed or did not start.
    pub(crate) fn payload(&self, task: &str) -> Value {
        json!({
            "task": task,
            "command": self.command,
            "exit": self.exit,
            "ok": self.ok,
            "seconds": self.seconds,
            "output": self.tail,
        })
    }
}

/// Where a change commit is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// `refs/forum/work/...`: a change that may be integrated.
    Work,
    /// `refs/forum/quarantine/...`: a change the pre-ship gate blocked, kept for review.
    Quarantine,
    /// `refs/forum/attempts/.../N`: attempt N of a task run several times (`--attempts`);
    /// the attempts not chosen stay there.
    Attempt(u32),
}

impl Keep {
    /// The ref namespace: `refs/forum/work` or `refs/forum/quarantine`.
    pub(crate) fn namespace(self) -> &'static str {
        match self {
            Keep::Work => "refs/forum/work",
            Keep::Quarantine => "refs/forum/quarantine",
            Keep::Attempt(_) => "refs/forum/attempts",
        }
    }
}

/// The ref a kept change lives on: `NAMESPACE/LEDGER/RUN/TASK` (and `/N` for attempt N), the
/// task id made safe as one ref component and one directory name by [`task_component`].
pub(crate) fn kept_ref(place: Keep, ledger: &str, run_seq: u64, task: &str) -> String {
    let at = format!(
        "{}/{ledger}/{run_seq}/{}",
        place.namespace(),
        task_component(task)
    );
    match place {
        Keep::Attempt(n) => format!("{at}/{n}"),
        _ => at,
    }
}

/// A task id as one ref component and one directory name: every character but ASCII letters,
/// digits, `-` and `_` becomes `-` (so no `.`, `/`, `..` or `.lock`), at most 64 of them;
/// an empty id becomes `task`.
pub(crate) fn task_component(task: &str) -> String {
    let s: String = task
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if s.is_empty() { "task".into() } else { s }
}

/// What went wrong in the repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkError {
    /// Changes did not merge; these paths conflict.
    Conflict {
        /// The conflicting paths, sorted.
        paths: Vec<String>,
    },
    /// A git command failed (its message, one line).
    Git(String),
    /// A file or process operation failed (its message, one line).
    Io(String),
    /// Another live git forum holds the run's work area (its message, one line).
    Busy(String),
    /// What the worker left is refused before git forum reads it: its worktree's `.git` link or
    /// admin directory changed, a nested repository, a FIFO or device, or a change over the
    /// limits (the reason, one line).
    Refused(String),
    /// The change adds secrets (where and which rule; never the secret); nothing of it was
    /// committed. `tree`: the tree it was staged as, where one was written (its objects are in
    /// the repository but nothing names them, so `git gc` prunes them in time), which a strict
    /// replay screens again while it is there.
    Secrets {
        found: Vec<SecretFound>,
        tree: Option<String>,
    },
}

impl std::fmt::Display for WorkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkError::Conflict { paths } => {
                write!(f, "the changes conflict in {}", paths.join(", "))
            }
            WorkError::Git(m) => write!(f, "git failed: {m}"),
            WorkError::Io(m) | WorkError::Busy(m) | WorkError::Refused(m) => write!(f, "{m}"),
            WorkError::Secrets { found, .. } => {
                let at: Vec<String> = found
                    .iter()
                    .take(5)
                    .map(|s| format!("{}:{} ({})", s.path, s.line, s.rule))
                    .collect();
                let more = found.len().saturating_sub(at.len());
                write!(
                    f,
                    "the change adds {} secret{} ({}{}); nothing of it was committed",
                    found.len(),
                    if found.len() == 1 { "" } else { "s" },
                    at.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                )
            }
        }
    }
}

impl std::error::Error for WorkError {}

/// One run's work area. `GitWork` (`crate::work`) implements it over the repository.
pub trait Workbench: Send + Sync {
    /// What the run started from.
    fn base(&self) -> &Base;
    /// The user's checkout the run started in (where the project's own environment, its venv
    /// and `node_modules`, is found), when there is one.
    fn checkout(&self) -> Option<PathBuf> {
        None
    }
    /// A fresh worktree for `task`, outside the user's work tree and the git dir,
    /// at the base commit with these upstream change commits merged in, in the order given.
    /// Upstream changes that conflict give `WorkError::Conflict`.
    fn open_task(&self, task: &str, upstream: &[String]) -> Result<TaskTree, WorkError>;
    /// The commit `open_task` would start `task`'s worktree on (the base with these upstream
    /// changes merged in), without the worktree: a dispatched task is published on it, and
    /// its worktree here is opened after (`open_task` with this commit as its one upstream
    /// gives a worktree on it, since it descends from the base).
    fn task_start(&self, task: &str, upstream: &[String]) -> Result<String, WorkError> {
        let tree = self.open_task(task, upstream)?;
        let start = tree.start.clone();
        self.close(&tree)?;
        Ok(start)
    }
    /// A worktree at the run branch's tip (for run-level checks, and for re-running a task
    /// on top of the integrated result after a conflict).
    fn open_branch(&self, task: &str) -> Result<TaskTree, WorkError>;
    /// Commits everything changed in the tree (respecting .gitignore) as one commit with the
    /// author, the message head `subject` (a subject line, then any body) and the trailers
    /// of `tie`, committed by git forum; `commit: None` when nothing changed. What the worker
    /// left is hostile input: it is checked against `rules.limits` and for tampering before it
    /// is read ([`WorkError::Refused`]), and what the change adds is scanned with
    /// `rules.screen` before the commit is written ([`WorkError::Secrets`]). The diff is
    /// capped at `rules.diff_cap` bytes (`truncated` says so).
    fn commit(
        &self,
        tree: &TaskTree,
        author: &Author,
        tie: &Tie,
        subject: &str,
        rules: &CommitRules<'_>,
    ) -> Result<Change, WorkError>;
    /// [`Workbench::commit`] of a change made elsewhere, with no worktree: `tree` names the
    /// task and the commit it starts at (its directory is not read), and `made` is a commit
    /// in the repository whose tree is the change (a dispatched task's worker's commit,
    /// checked already to be one commit on `tree.start`). The change is measured against
    /// `rules.limits` and screened on the trees' difference, as a worktree's would be, and
    /// committed with the same author, message head and trailers. By default, the tree's own
    /// [`Workbench::commit`] (a workbench that reads no worktree, as a replay's).
    fn commit_made(
        &self,
        tree: &TaskTree,
        made: &str,
        author: &Author,
        tie: &Tie,
        subject: &str,
        rules: &CommitRules<'_>,
    ) -> Result<Change, WorkError> {
        let _ = made;
        self.commit(tree, author, tie, subject, rules)
    }
    /// Runs one shell command in the tree, in its own process group, killed at the deadline;
    /// keeps the last `cap` bytes of stdout+stderr.
    fn check(
        &self,
        tree: &TaskTree,
        command: &str,
        deadline: Duration,
        cap: usize,
    ) -> Result<CheckRun, WorkError>;
    /// Keeps a change commit reachable: refs/forum/work/LEDGER/RUN/TASK,
    /// refs/forum/quarantine/LEDGER/RUN/TASK or refs/forum/attempts/LEDGER/RUN/TASK/N.
    fn keep(&self, task: &str, commit: &str, place: Keep) -> Result<(), WorkError>;
    /// Removes the ref `keep` made for `commit` at `place`, when it still names that commit
    /// (the chosen attempt of several moves to refs/forum/work; the others stay).
    fn unkeep(&self, task: &str, commit: &str, place: Keep) -> Result<(), WorkError> {
        let _ = (task, commit, place);
        Ok(())
    }
    /// Integrates a kept change onto refs/heads/forum/run-RUN (created at the base on first use),
    /// as one commit (same author, message and trailers); returns the branch's new tip, or
    /// `WorkError::Conflict { paths }` leaving the branch unchanged.
    fn integrate(&self, task: &str, commit: &str) -> Result<String, WorkError>;
    /// [`Workbench::integrate`], the copy's message head (subject and body) replaced by
    /// `head` and its trailers kept, so the run branch says what the change did and how it
    /// was checked; a change on the tip is copied too. A change that would add nothing to
    /// the tip is refused ([`WorkError::Refused`]): the run branch never gets an empty commit.
    fn integrate_noting(&self, task: &str, commit: &str, head: &str) -> Result<String, WorkError> {
        let _ = head;
        self.integrate(task, commit)
    }
    /// The tree of `tip`, a run branch commit [`Workbench::integrate`] returned, which the
    /// run's `integrated` entry records (a strict replay merges the change again and compares
    /// its tree with this one).
    fn tip_tree(&self, tip: &str) -> Result<String, WorkError> {
        Err(WorkError::Git(format!(
            "this workbench cannot read the tree of {tip}"
        )))
    }
    /// Whether the change `commit` adds nothing to the run branch's tip (an earlier change
    /// made the same edit); false before anything is integrated or when the two conflict.
    fn adds_nothing(&self, commit: &str) -> Result<bool, WorkError> {
        let _ = commit;
        Ok(false)
    }
    /// Removes one worktree (its directory and git's record of it).
    fn close(&self, tree: &TaskTree) -> Result<(), WorkError>;
    /// Removes several worktrees (a wave's, once it is shipped); by default one at a time,
    /// each tried whatever the others gave, the first error returned.
    fn close_all(&self, trees: &[TaskTree]) -> Result<(), WorkError> {
        let mut first = Ok(());
        for t in trees {
            if let Err(e) = self.close(t) {
                first = first.and(Err(e));
            }
        }
        first
    }
    /// Removes every worktree of this run (called when the run ends, however it ends).
    fn finish(&self) -> Result<(), WorkError>;
    /// Whether a kept change commit still exists (for resume).
    fn has_commit(&self, commit: &str) -> bool;
    /// Whether the run branch holds the change `commit` (itself, or the copy `integrate` made
    /// of it, known by the same `Forum-Entry` trailer). Resume asks, so a run killed between
    /// its `ship` entry and the integration does not take a merged change for an integrated one.
    fn on_branch(&self, commit: &str) -> bool;
    /// For a resume: the run branch's tip when a writer killed after moving the branch and
    /// before witnessing `integrated` left it one commit ahead of its record with the
    /// integration of task `task`'s change `commit`, checked (its first parent is `recorded`,
    /// the tip the record holds, or the base when `None`; its `Forum-Entry` trailer is the
    /// change's; its tree is the change integrated onto `recorded` by the engine's rule). A
    /// branch ahead of its record with anything else is reset to `recorded` and `None`
    /// returned, so the change is integrated again; `None` too when the branch is where the
    /// record says.
    fn take_up_integration(
        &self,
        task: &str,
        commit: &str,
        recorded: Option<&str>,
    ) -> Result<Option<String>, WorkError> {
        let _ = (task, commit, recorded);
        Ok(None)
    }
    /// The hands of the built-in editing worker in `tree`: its tools carried out
    /// inside the worktree, running only `commands`, each with the deadline and output cap.
    /// `None` (the default) keeps chat workers answering in text.
    fn hands(
        &self,
        tree: &TaskTree,
        commands: &[String],
        deadline: Duration,
        cap: usize,
    ) -> Option<std::sync::Arc<dyn super::edit_tools::Hands>> {
        let _ = (tree, commands, deadline, cap);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_change_payload_names_every_field() {
        let c = Change {
            task: "t1".into(),
            base: "b".into(),
            commit: None,
            tree: "t".into(),
            files: vec![FileChange {
                path: "a.txt".into(),
                status: "M".into(),
                added: 2,
                removed: 1,
                blob: Some("ab".into()),
            }],
            diff: String::new(),
            truncated: false,
            links_out: Vec::new(),
        };
        let p = c.payload();
        assert!(p.get("links_out").is_none());
        assert_eq!(p["blobs"], json!({"a.txt": "ab"}));
        assert_eq!(p["commit"], Value::Null);
        assert_eq!(p["files"][0]["added"], json!(2));
        assert_eq!(p["truncated"], json!(false));
    }

    #[test]
    fn trailers_and_refs_have_a_fixed_shape() {
        let tie = Tie {
            ledger: "main".into(),
            run_seq: 3,
            task_seq: 7,
            task_hash: "ab".into(),
        };
        assert_eq!(
            tie.trailers(),
            "Forum-Ledger: main\nForum-Run: 3\nForum-Task: 7\nForum-Entry: ab\n"
        );
        assert_eq!(
            kept_ref(Keep::Quarantine, "main", 3, "t1"),
            "refs/forum/quarantine/main/3/t1"
        );
        assert_eq!(
            kept_ref(Keep::Attempt(2), "main", 3, "t1"),
            "refs/forum/attempts/main/3/t1/2"
        );
        assert_eq!(task_component("a/b..c.lock"), "a-b--c-lock");
        assert_eq!(task_component(""), "task");
    }
}
