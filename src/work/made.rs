//! A change made elsewhere, committed with no worktree ([`Workbench::commit_made`]): a
//! dispatched task's worker pushed a commit, the writer has checked that it is one commit on
//! the task's start carrying the attempt's trailer, and what remains is what a worktree's
//! change goes through before it is committed, done on the two trees: the limits on files and
//! bytes, the nested repositories, the links that leave, the secrets. Nothing is checked out
//! for it: a run checked in full has put the commit's tree in a worktree of its own for the
//! checks, and only that worktree's HEAD is moved to the change.

use super::hostile::Measured;
use super::*;
use crate::run::ChangeLimits;

impl GitWork {
    /// Commits the tree of `made` on `tree.start` as the change of `tree.task`: what
    /// [`Workbench::commit`] does with a worktree's staged tree, screened on the trees'
    /// difference by [`screen_made`].
    pub(super) fn commit_made_tree(
        &self,
        tree: &TaskTree,
        made: &str,
        author: &Author,
        tie: &Tie,
        subject: &str,
        rules: &CommitRules<'_>,
    ) -> Result<Change, WorkError> {
        let written = self.tree_of(made)?;
        let start_tree = self.tree_of(&tree.start)?;
        let repo = self.objects.to_thread_local();
        let links_out = screen_made(&self.common, &repo, &start_tree, &written, rules)?;
        let from = super::git_bench::Written::Made(links_out);
        let change = self.commit_written(tree, &written, author, tie, subject, rules, from)?;
        // A worktree of the writer's own holds the worker's tree (put there for its checks):
        // its HEAD goes to the change, so `git status` there is clean for them.
        let own = lock(&self.opened).get(&tree.path).cloned();
        if let (Some(opened), Some(commit)) = (own, &change.commit) {
            self.tree_ok(tree, &opened, &["update-ref", "--no-deref", "HEAD", commit])?;
        }
        Ok(change)
    }
}

/// The screens a change made elsewhere goes through before the writer commits it, on the
/// difference from `start_tree` to `new_tree` (trees in the repository at `common`, read
/// through `repo`; one list of the change, [`diff_trees`], for both): the limits on files and
/// bytes ([`measure_diff`]), then the nested repositories, the secrets and the links that
/// leave ([`inspect_diff`]). `Ok` with the links
/// that leave (which the pre-ship gate refuses), `Err` with the refusal: [`WorkError::Refused`]
/// or [`WorkError::Secrets`]. The one rule for the live writer ([`GitWork::commit_made_tree`])
/// and for a strict replay, which screens the worker's commit again
/// (`crate::run::replay::Merges::screened`).
pub(crate) fn screen_made(
    common: &Path,
    repo: &gix::Repository,
    start_tree: &str,
    new_tree: &str,
    rules: &CommitRules<'_>,
) -> Result<Vec<LinkOut>, WorkError> {
    if start_tree == new_tree {
        return Ok(Vec::new());
    }
    // One list of the change for both screens.
    let diff = diff_trees(common, start_tree, new_tree)?;
    measure_diff(repo, &diff, &rules.limits)?;
    let (secrets, links_out) = inspect_diff(repo, &diff, rules)?;
    if !secrets.is_empty() {
        return Err(WorkError::Secrets {
            found: secrets,
            tree: Some(new_tree.to_string()),
        });
    }
    Ok(links_out)
}

/// Measures the change whose list is `diff` ([`diff_trees`]) against `limits`, as a
/// worktree's change is measured before it is staged: each file added, modified or deleted
/// counts (a deleted one as no bytes), each added or modified file by its size in the object
/// store. Refuses a file over `max_file_bytes`, a change over `max_files` or
/// `max_change_bytes`.
fn measure_diff(
    repo: &gix::Repository,
    diff: &[u8],
    limits: &ChangeLimits,
) -> Result<Measured, WorkError> {
    let mut m = Measured::default();
    let mut fields = diff.split(|b| *b == 0);
    while let (Some(meta), Some(path)) = (fields.next(), fields.next()) {
        let meta = String::from_utf8_lossy(meta);
        let parts: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
        let [_, new_mode, _, new_id, status] = parts[..] else {
            continue;
        };
        // A nested repository's commit is not here: the screen refuses it after.
        let size = if status.starts_with('D') || new_mode == "160000" {
            0
        } else {
            object_size(repo, new_id)?
        };
        m.add(path, size, limits)?;
    }
    Ok(m)
}

/// The size of the object `hex` in the repository, from its header.
fn object_size(repo: &gix::Repository, hex: &str) -> Result<u64, WorkError> {
    let failed = |e: &dyn std::fmt::Display| WorkError::Git(format!("cannot read {hex}: {e}"));
    let id = gix::ObjectId::from_hex(hex.as_bytes()).map_err(|e| failed(&e))?;
    Ok(repo.find_header(id).map_err(|e| failed(&e))?.size())
}
