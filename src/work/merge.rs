//! Merging with `git merge-tree --write-tree`: the one reading of its output (the merged tree,
//! or the conflicting paths) and the one rule of an integration ([`Merges::integrated_tree`])
//! for a run's integrations ([`super::GitWork`]), for a strict replay that merges a recorded
//! run's changes again ([`ScratchMerges::open`], which writes the trees it makes into a
//! scratch object directory of its own: no ref moves, and nothing it makes is left in the
//! repository) and for `git forum reproduce`, which rebuilds a run branch
//! ([`ScratchMerges::in_repository`], whose trees stay in the repository for the rebuilt
//! branch's commits).

use std::path::{Path, PathBuf};

use super::git::{self, Out};
use crate::run::replay::{Merges, WorkerCommit};
use crate::run::{CommitRules, LinkOut, WorkError};

/// The parents and `Forum-Attempt` trailer of the commit `commit` in the repository at `dir`
/// (what a dispatched run's writer checks of a worker's commit); `None` when it is not there.
pub(crate) fn worker_commit(dir: &Path, commit: &str) -> Option<WorkerCommit> {
    // One git process: `^{commit}` refuses anything else, and the parents come first on
    // their own line, before the trailer's values (git's own trailer parsing decides them).
    let spec = format!("{commit}^{{commit}}");
    let out = git::ok(
        dir,
        &[
            "log",
            "-1",
            "--no-walk",
            "--format=%P%n%(trailers:key=Forum-Attempt,valueonly)",
            &spec,
            "--",
        ],
    )
    .ok()?;
    let (parents, attempt) = out.split_once('\n').unwrap_or((out.as_str(), ""));
    Some(WorkerCommit {
        parents: parents.split_whitespace().map(str::to_string).collect(),
        attempt: attempt.trim().to_string(),
    })
}

/// What `git merge-tree --write-tree -z --name-only` printed (`args`): the merged tree, or the
/// conflicting paths, sorted.
pub(super) fn read_merge(out: &Out, args: &[&str]) -> Result<String, WorkError> {
    let mut fields = out.stdout.split(|b| *b == 0);
    let tree = fields
        .next()
        .map(|t| String::from_utf8_lossy(t).trim().to_string());
    match out.code {
        Some(0) if !out.cut => {
            tree.ok_or_else(|| WorkError::Git("git merge-tree printed no tree".into()))
        }
        Some(1) if !out.cut => {
            let mut paths: Vec<String> = fields
                .take_while(|f| !f.is_empty())
                .map(|f| String::from_utf8_lossy(f).into_owned())
                .collect();
            paths.sort();
            paths.dedup();
            Err(WorkError::Conflict { paths })
        }
        _ => {
            git::ensure(out, args)?;
            Err(WorkError::Git("git merge-tree failed".into()))
        }
    }
}

/// The arguments of `git merge-tree` merging `theirs` onto `ours` (with `base` as the merge
/// base when given).
pub(super) fn merge_args<'a>(
    merge_base: Option<&'a str>,
    ours: &'a str,
    theirs: &'a str,
) -> Vec<&'a str> {
    let mut args = vec!["merge-tree", "--write-tree", "-z", "--name-only"];
    if let Some(b) = merge_base {
        args.push(b);
    }
    args.extend([ours, theirs]);
    args
}

/// The repository a strict replay merges in: objects are read from it, and every tree a merge
/// writes goes to a scratch object directory, removed when this is dropped.
pub struct ScratchMerges {
    /// The repository.
    dir: PathBuf,
    /// Its object directory (read as an alternate).
    objects: PathBuf,
    /// Where the merges write (`None`: the repository itself).
    scratch: Option<tempfile::TempDir>,
}

impl ScratchMerges {
    /// Merges in the repository at `dir`; `Err` says why it cannot be read.
    pub fn open(dir: &Path) -> Result<ScratchMerges, String> {
        let objects = git::ok(
            dir,
            &[
                "rev-parse",
                "--path-format=absolute",
                "--git-path",
                "objects",
            ],
        )
        .map_err(|e| format!("cannot find the repository's objects: {e}"))?;
        let scratch = crate::scratch::dir("git-forum-replay-objects-")
            .map_err(|e| format!("cannot make a scratch object directory: {e}"))?;
        Ok(ScratchMerges {
            dir: dir.to_path_buf(),
            objects: PathBuf::from(objects),
            scratch: Some(scratch),
        })
    }

    /// Merges in the repository at `dir`, writing the merged trees into it (unreachable until
    /// a commit names them), so a caller can commit them.
    pub fn in_repository(dir: &Path) -> ScratchMerges {
        ScratchMerges {
            dir: dir.to_path_buf(),
            objects: PathBuf::new(),
            scratch: None,
        }
    }

    /// The tree `rev` names, or `None` when it is not in the repository.
    fn tree_of(&self, rev: &str) -> Option<String> {
        let spec = format!("{rev}^{{tree}}");
        git::ok(&self.dir, &["rev-parse", "--verify", "--quiet", &spec]).ok()
    }
}

impl Merges for ScratchMerges {
    fn trees(&self, commit: &str) -> Result<(String, String), String> {
        let tree = self
            .tree_of(commit)
            .ok_or_else(|| format!("the change commit {commit} is not in this repository"))?;
        let parent = self.tree_of(&format!("{commit}^1")).ok_or_else(|| {
            format!("the parent of the change commit {commit} is not in this repository")
        })?;
        Ok((parent, tree))
    }

    fn tree(&self, commit: &str) -> Result<String, String> {
        self.tree_of(commit)
            .ok_or_else(|| format!("the commit {commit} is not in this repository"))
    }

    fn worker_commit(&self, commit: &str) -> Option<WorkerCommit> {
        worker_commit(&self.dir, commit)
    }

    fn ref_target(&self, name: &str) -> Option<String> {
        let spec = format!("{name}^{{commit}}");
        git::ok(&self.dir, &["rev-parse", "--verify", "--quiet", &spec]).ok()
    }

    fn descends(&self, commit: &str, from: &str) -> Option<bool> {
        let out = git::run(&self.dir, &["merge-base", "--is-ancestor", from, commit]).ok()?;
        match out.code {
            Some(0) => Some(true),
            Some(1) => Some(false),
            _ => None,
        }
    }

    fn screened(
        &self,
        start: &str,
        made: &str,
        rules: &CommitRules<'_>,
    ) -> Option<(String, Result<Vec<LinkOut>, WorkError>)> {
        let (start_tree, made_tree) = (self.tree_of(start)?, self.tree_of(made)?);
        let repo = gix::open_opts(&self.dir, gix::open::Options::isolated()).ok()?;
        let screens = super::made::screen_made(&self.dir, &repo, &start_tree, &made_tree, rules);
        Some((made_tree, screens))
    }

    fn merge(&self, base: &str, ours: &str, theirs: &str) -> Result<String, WorkError> {
        let merge_base = format!("--merge-base={base}");
        let args = merge_args(Some(&merge_base), ours, theirs);
        let mut c = git::git(&self.dir);
        c.args(&args);
        if let Some(scratch) = &self.scratch {
            c.env("GIT_OBJECT_DIRECTORY", scratch.path())
                .env("GIT_ALTERNATE_OBJECT_DIRECTORIES", &self.objects);
        }
        let out = git::run_limited(c, git::OUTPUT_LIMIT)?;
        read_merge(&out, &args)
    }
}

/// The engine's integrations merge through the same rule: the trees of a change and its
/// parent as this run knows them, merged in the repository.
impl Merges for super::GitWork {
    fn trees(&self, commit: &str) -> Result<(String, String), String> {
        let parent = self.parent_of("", commit).map_err(|e| e.to_string())?;
        let parent = self.tree_of(&parent).map_err(|e| e.to_string())?;
        Ok((parent, self.tree_of(commit).map_err(|e| e.to_string())?))
    }

    fn tree(&self, commit: &str) -> Result<String, String> {
        self.tree_of(commit).map_err(|e| e.to_string())
    }

    fn worker_commit(&self, commit: &str) -> Option<WorkerCommit> {
        worker_commit(&self.common, commit)
    }

    fn ref_target(&self, name: &str) -> Option<String> {
        super::resolve_commit(&self.common, name)
    }

    fn descends(&self, commit: &str, from: &str) -> Option<bool> {
        super::is_ancestor(&self.common, from, commit).ok()
    }

    fn screened(
        &self,
        start: &str,
        made: &str,
        rules: &CommitRules<'_>,
    ) -> Option<(String, Result<Vec<LinkOut>, WorkError>)> {
        let (start_tree, made_tree) = (self.tree_of(start).ok()?, self.tree_of(made).ok()?);
        let repo = self.objects.to_thread_local();
        let screens = super::made::screen_made(&self.common, &repo, &start_tree, &made_tree, rules);
        Some((made_tree, screens))
    }

    fn merge(&self, base: &str, ours: &str, theirs: &str) -> Result<String, WorkError> {
        self.merge_tree(Some(base), ours, theirs)
    }
}
