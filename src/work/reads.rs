//! The reads a dispatched or local task makes of the repository several times over: the run
//! branch's tip, a commit's id and tree, and the merge of a change onto the tip. Each was one
//! `git` process a call (the run branch's tip three times a task); here they are answered in
//! process wherever that gives git's own answer, and by `git` where it may not:
//!
//! * Refs are read through gix only in a repository that keeps them in files (loose and
//!   `packed-refs`, read afresh each time); gix cannot read reftable, so there `git rev-parse`
//!   answers as before.
//! * A full object id is resolved and its tree read from the object database (which every ref
//!   format shares); anything else (a name, an abbreviation, `X^1`) goes to `git rev-parse`.
//! * `git merge-tree --write-tree` is a function of its three inputs, so the last few merges
//!   are kept by their inputs: the screen that asks whether a change adds anything and the
//!   integration that follows it run one merge, not two. A kept tree is used only while the
//!   object database still holds it (an unreferenced tree is what `git gc --prune=now` takes).

use super::{GitWork, WorkError, git, lock, merge, resolve_commit};

/// How many merges are kept: enough for the tasks of a wave being screened and integrated
/// one after another.
const KEPT_MERGES: usize = 64;

/// The inputs of a merge: its merge base (when given), ours and theirs.
type MergeKey = (Option<String>, String, String);

/// Merged trees by their inputs, oldest first.
#[derive(Default)]
pub(super) struct Merged(std::collections::VecDeque<(MergeKey, String)>);

impl GitWork {
    /// The run branch's tip, or `None` before its first integration.
    pub(crate) fn branch_tip(&self) -> Option<String> {
        self.ref_commit(&self.branch_ref())
    }

    /// The commit the ref `name` names, or `None` when it names none.
    pub(super) fn ref_commit(&self, name: &str) -> Option<String> {
        if self.refs_in_files {
            let repo = self.objects.to_thread_local();
            match repo.try_find_reference(name) {
                Ok(None) => return None,
                Ok(Some(mut r)) => {
                    if let Ok(c) = r.peel_to_commit() {
                        return Some(c.id.to_string());
                    }
                }
                Err(_) => {}
            }
        }
        resolve_commit(&self.common, name)
    }

    /// `rev` as the full id of the commit it names, read in process when it is a full id.
    pub(super) fn commit_id(&self, rev: &str) -> Option<String> {
        if let Some(id) = self.full_id(rev) {
            let repo = self.objects.to_thread_local();
            if let Ok(h) = repo.find_header(id)
                && h.kind() == gix::object::Kind::Commit
            {
                return Some(rev.to_string());
            }
        }
        resolve_commit(&self.common, rev)
    }

    /// The full id of the change `commit`: as it is when this run made it, else as git
    /// resolves it.
    pub(super) fn resolve_change(&self, commit: &str) -> Result<String, WorkError> {
        if lock(&self.made).contains_key(commit) {
            return Ok(commit.to_string());
        }
        self.commit_id(commit)
            .ok_or_else(|| WorkError::Git(format!("the change {commit} is not a commit here")))
    }

    /// The first parent of the commit `commit`, or `None` when it has none.
    pub(super) fn first_parent(&self, commit: &str) -> Option<String> {
        let read = self.full_id(commit).and_then(|id| {
            let repo = self.objects.to_thread_local();
            let c = repo.find_commit(id).ok()?;
            Some(c.parent_ids().next().map(|p| p.to_string()))
        });
        match read {
            Some(parent) => parent,
            None => resolve_commit(&self.common, &format!("{commit}^1")),
        }
    }

    /// The tree of `commit`.
    pub(super) fn tree_of(&self, commit: &str) -> Result<String, WorkError> {
        if let Some(t) = lock(&self.trees).get(commit) {
            return Ok(t.clone());
        }
        let read = self.full_id(commit).and_then(|id| {
            let repo = self.objects.to_thread_local();
            let c = repo.find_commit(id).ok()?;
            c.tree_id().ok().map(|t| t.to_string())
        });
        let tree = match read {
            Some(t) => t,
            None => self.ok(&["rev-parse", "--verify", &format!("{commit}^{{tree}}")])?,
        };
        lock(&self.trees).insert(commit.to_string(), tree.clone());
        Ok(tree)
    }

    /// `merge-tree --write-tree` of `ours` and `theirs` (with `base` as the merge base when
    /// given): the merged tree, or the conflicting paths.
    pub(super) fn merge_tree(
        &self,
        base: Option<&str>,
        ours: &str,
        theirs: &str,
    ) -> Result<String, WorkError> {
        let key = (
            base.map(str::to_string),
            ours.to_string(),
            theirs.to_string(),
        );
        let kept = lock(&self.merged)
            .0
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, tree)| tree.clone());
        if let Some(tree) = kept.filter(|t| self.holds(t)) {
            return Ok(tree);
        }
        let merge_base = base.map(|b| format!("--merge-base={b}"));
        let args = merge::merge_args(merge_base.as_deref(), ours, theirs);
        let out = git::run(&self.common, &args)?;
        let tree = merge::read_merge(&out, &args)?;
        let mut kept = lock(&self.merged);
        kept.0.retain(|(k, _)| *k != key);
        if kept.0.len() == KEPT_MERGES {
            kept.0.pop_front();
        }
        kept.0.push_back((key, tree.clone()));
        Ok(tree)
    }

    /// `hex` as an object id of this repository's hash, when it is one in full.
    fn full_id(&self, hex: &str) -> Option<gix::ObjectId> {
        gix::ObjectId::from_hex(hex.as_bytes())
            .ok()
            .filter(|id| id.kind() == self.kind)
    }

    /// Whether the object database holds the object `hex`.
    fn holds(&self, hex: &str) -> bool {
        self.full_id(hex)
            .is_some_and(|id| self.objects.to_thread_local().has_object(id))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::git;
    use super::*;
    use crate::run::workbench::Workbench as _;
    use std::path::Path;

    /// A repository of `format` (`sha1`, `sha256` or `reftable`) with a base commit of `a`, and
    /// two commits on it, one adding `b` and one adding `c`; returns (base, with b, with c).
    fn three_commits(repo: &Path, format: &str) -> (String, String, String) {
        let flags: &[&str] = match format {
            "sha256" => &["--object-format", "sha256"],
            "reftable" => &["--ref-format", "reftable"],
            _ => &[],
        };
        let mut init = vec!["init", "-q", "-b", "main"];
        init.extend_from_slice(flags);
        init.push(".");
        git(repo, &init, &[]);
        std::fs::write(repo.join("a"), "a\n").unwrap();
        git(repo, &["add", "a"], &[]);
        git(repo, &["commit", "-q", "-m", "base"], &[]);
        let base = git(repo, &["rev-parse", "HEAD"], &[]);
        let on_base = |file: &str| {
            git(repo, &["checkout", "-q", "--detach", &base], &[]);
            std::fs::write(repo.join(file), "x\n").unwrap();
            git(repo, &["add", file], &[]);
            git(repo, &["commit", "-q", "-m", file], &[]);
            git(repo, &["rev-parse", "HEAD"], &[])
        };
        let (b, c) = (on_base("b"), on_base("c"));
        git(repo, &["checkout", "-q", "main"], &[]);
        (base, b, c)
    }

    #[test]
    fn reads_in_process_answer_as_git_does_on_every_kind_of_repository() {
        for format in ["sha1", "sha256", "reftable"] {
            let tmp = tempfile::tempdir().unwrap();
            let repo = tmp.path();
            let (base, b, _) = three_commits(repo, format);
            let work = GitWork::open(repo, "main", 7).unwrap();
            assert_eq!(work.branch_tip(), None, "{format}");
            git(repo, &["update-ref", "refs/heads/forum/run-7", &b], &[]);
            assert_eq!(work.branch_tip().as_deref(), Some(b.as_str()), "{format}");
            // Moved behind its back, as a user or another process may: read afresh.
            git(repo, &["update-ref", "refs/heads/forum/run-7", &base], &[]);
            assert_eq!(
                work.branch_tip().as_deref(),
                Some(base.as_str()),
                "{format}"
            );
            // A ref that names a tree names no commit, as `rev-parse REF^{commit}` says.
            let tree = git(repo, &["rev-parse", &format!("{b}^{{tree}}")], &[]);
            git(repo, &["update-ref", "refs/forum/tree", &tree], &[]);
            assert_eq!(work.ref_commit("refs/forum/tree"), None, "{format}");
            assert_eq!(work.ref_commit("refs/forum/none"), None, "{format}");
            git(repo, &["pack-refs", "--all"], &[]);
            assert_eq!(
                work.ref_commit("refs/heads/main").as_deref(),
                Some(base.as_str())
            );
            assert_eq!(work.tree_of(&b).unwrap(), tree, "{format}");
            assert_eq!(work.commit_id(&b).as_deref(), Some(b.as_str()));
            assert_eq!(work.commit_id(&tree), None, "a tree is not a commit");
            assert_eq!(work.commit_id(&b[..12]).as_deref(), Some(b.as_str()));
            assert_eq!(work.first_parent(&b).as_deref(), Some(base.as_str()));
            assert_eq!(work.first_parent(&base), None);
            work.finish().unwrap();
        }
    }

    #[test]
    fn a_merge_is_kept_by_its_inputs_and_made_again_once_its_tree_is_gone() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path();
        let (base, b, c) = three_commits(repo, "sha1");
        let work = GitWork::open(repo, "main", 3).unwrap();
        let trees: Vec<String> = [&base, &b, &c]
            .iter()
            .map(|x| work.tree_of(x).unwrap())
            .collect();
        let merged = work
            .merge_tree(Some(&trees[0]), &trees[1], &trees[2])
            .unwrap();
        let listed = git(repo, &["ls-tree", "--name-only", &merged], &[]);
        assert_eq!(listed, "a\nb\nc");
        assert_eq!(lock(&work.merged).0.len(), 1);
        assert_eq!(
            work.merge_tree(Some(&trees[0]), &trees[1], &trees[2])
                .unwrap(),
            merged
        );
        assert_eq!(lock(&work.merged).0.len(), 1, "kept once");
        // Nothing names the merged tree: `git gc --prune=now` would take it.
        let loose = repo
            .join(".git/objects")
            .join(&merged[..2])
            .join(&merged[2..]);
        std::fs::remove_file(&loose).unwrap();
        assert!(!work.holds(&merged));
        assert_eq!(
            work.merge_tree(Some(&trees[0]), &trees[1], &trees[2])
                .unwrap(),
            merged
        );
        assert!(
            work.holds(&merged),
            "made again, not taken from what was kept"
        );
        work.finish().unwrap();
    }
}
