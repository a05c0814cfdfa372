//! [`GitWork`]'s side of the [`Workbench`] contract: opening a task's worktree, committing,
//! checking, keeping and integrating its change, closing and finishing the run.

use super::*;
use crate::run::replay::Merges;

impl Workbench for GitWork {
    fn base(&self) -> &Base {
        &self.base
    }

    fn checkout(&self) -> Option<std::path::PathBuf> {
        self.objects
            .to_thread_local()
            .workdir()
            .map(|d| d.canonicalize().unwrap_or_else(|_| d.to_path_buf()))
    }

    fn open_task(&self, task: &str, upstream: &[String]) -> Result<TaskTree, WorkError> {
        let start = self.start_for(task, upstream)?;
        self.add_tree(task, &start)
    }

    fn task_start(&self, task: &str, upstream: &[String]) -> Result<String, WorkError> {
        self.start_for(task, upstream)
    }

    fn open_branch(&self, task: &str) -> Result<TaskTree, WorkError> {
        let tip = self
            .branch_tip()
            .unwrap_or_else(|| self.base.commit.clone());
        self.add_tree(task, &tip)
    }

    fn commit(
        &self,
        tree: &TaskTree,
        author: &Author,
        tie: &Tie,
        subject: &str,
        rules: &CommitRules<'_>,
    ) -> Result<Change, WorkError> {
        let opened = self.opened(tree)?;
        let written = self.stage(tree, &opened, rules)?;
        let from = Written::Staged(&opened);
        self.commit_written(tree, &written, author, tie, subject, rules, from)
    }

    fn commit_made(
        &self,
        tree: &TaskTree,
        made: &str,
        author: &Author,
        tie: &Tie,
        subject: &str,
        rules: &CommitRules<'_>,
    ) -> Result<Change, WorkError> {
        self.commit_made_tree(tree, made, author, tie, subject, rules)
    }

    fn check(
        &self,
        tree: &TaskTree,
        command: &str,
        deadline: Duration,
        cap: usize,
    ) -> Result<CheckRun, WorkError> {
        check::run_check(&tree.path, command, deadline, cap)
    }

    fn keep(&self, task: &str, commit: &str, place: Keep) -> Result<(), WorkError> {
        let commit = self.resolve_change(commit)?;
        let refname = kept_ref(place, &self.ledger, self.run_seq, task);
        let why = format!("git forum: keep task {task} of run {}", self.run_seq);
        self.ok(&["update-ref", "-m", &why, &refname, &commit])?;
        if place == Keep::Quarantine {
            let work = kept_ref(Keep::Work, &self.ledger, self.run_seq, task);
            if self.ref_commit(&work).as_deref() == Some(commit.as_str()) {
                self.ok(&["update-ref", "-d", &work, &commit])?;
            }
        }
        Ok(())
    }

    fn unkeep(&self, task: &str, commit: &str, place: Keep) -> Result<(), WorkError> {
        let commit = self.resolve_change(commit)?;
        let refname = kept_ref(place, &self.ledger, self.run_seq, task);
        if self.ref_commit(&refname).as_deref() == Some(commit.as_str()) {
            self.ok(&["update-ref", "-d", &refname, &commit])?;
        }
        Ok(())
    }

    fn integrate(&self, task: &str, commit: &str) -> Result<String, WorkError> {
        self.integrate_with(task, commit, None)
    }

    fn integrate_noting(&self, task: &str, commit: &str, head: &str) -> Result<String, WorkError> {
        self.integrate_with(task, commit, Some(head))
    }

    fn tip_tree(&self, tip: &str) -> Result<String, WorkError> {
        self.tree_of(tip)
    }

    fn adds_nothing(&self, commit: &str) -> Result<bool, WorkError> {
        let Some(tip) = self.branch_tip() else {
            return Ok(false);
        };
        let commit = self.resolve_change(commit)?;
        let tip_tree = self.tree_of(&tip)?;
        match Merges::integrated_tree(self, &tip_tree, &commit) {
            Ok(tree) => Ok(tree == tip_tree),
            Err(WorkError::Conflict { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn close(&self, tree: &TaskTree) -> Result<(), WorkError> {
        if let Some(o) = lock(&self.opened).remove(&tree.path) {
            let _ = std::fs::remove_file(&o.index);
        }
        let _turn = self.place.turn()?;
        stale::remove_tree(&self.common, &tree.path)
    }

    fn close_all(&self, trees: &[TaskTree]) -> Result<(), WorkError> {
        for t in trees {
            if let Some(o) = lock(&self.opened).remove(&t.path) {
                let _ = std::fs::remove_file(&o.index);
            }
        }
        let paths: Vec<&std::path::Path> = trees.iter().map(|t| t.path.as_path()).collect();
        let _turn = self.place.turn()?;
        stale::remove_trees(&self.common, &paths)
    }

    fn finish(&self) -> Result<(), WorkError> {
        lock(&self.opened).clear();
        let done = self
            .place
            .turn()
            .and_then(|_turn| stale::remove_area(&self.common, &self.area));
        lock(&self.owner).take();
        done
    }

    fn on_branch(&self, commit: &str) -> bool {
        let Some(tip) = self.branch_tip() else {
            return false;
        };
        let entry = |rev: &str| {
            self.ok(&[
                "log",
                "-1",
                "--format=%(trailers:key=Forum-Entry,valueonly)",
                rev,
            ])
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
        };
        let Some(want) = entry(commit) else {
            return false;
        };
        let range = format!("{}..{tip}", self.base.commit);
        self.ok(&[
            "log",
            "--format=%(trailers:key=Forum-Entry,valueonly)",
            &range,
        ])
        .is_ok_and(|out| out.lines().any(|l| l.trim() == want))
    }

    fn take_up_integration(
        &self,
        task: &str,
        commit: &str,
        recorded: Option<&str>,
    ) -> Result<Option<String>, WorkError> {
        let _one = lock(&self.integrating);
        let Some(tip) = self.branch_tip() else {
            return Ok(None);
        };
        let before = recorded.unwrap_or(&self.base.commit).to_string();
        if tip == before {
            return Ok(None);
        }
        if self.integrates(&tip, &before, commit)? {
            return Ok(Some(tip));
        }
        let branch = self.branch_ref();
        let why = format!(
            "git forum: run {} resumes at the tip its record holds (task {task})",
            self.run_seq
        );
        match recorded {
            Some(r) => self.ok(&["update-ref", "-m", &why, &branch, r, &tip])?,
            None => self.ok(&["update-ref", "-m", &why, "-d", &branch, &tip])?,
        };
        Ok(None)
    }

    fn has_commit(&self, commit: &str) -> bool {
        self.commit_id(commit).is_some()
    }

    fn hands(
        &self,
        tree: &TaskTree,
        commands: &[String],
        deadline: Duration,
        cap: usize,
    ) -> Option<std::sync::Arc<dyn crate::run::edit_tools::Hands>> {
        let admin = self.opened(tree).ok()?.made.admin;
        Some(std::sync::Arc::new(edit_hands::TreeHands::new(
            &tree.path,
            &admin,
            commands.to_vec(),
            deadline,
            cap,
        )))
    }
}

impl GitWork {
    /// Whether `tip` is the integration of the change `commit` onto `before`: its only
    /// parent is `before`, its `Forum-Entry` trailer is the change's, and its tree is the
    /// change integrated onto `before`'s tree by the engine's rule.
    fn integrates(&self, tip: &str, before: &str, commit: &str) -> Result<bool, WorkError> {
        let Some(commit) = self.commit_id(commit) else {
            return Ok(false);
        };
        let parents = self.ok(&["rev-list", "--parents", "-n", "1", tip])?;
        if parents.split_whitespace().skip(1).collect::<Vec<_>>() != [before] {
            return Ok(false);
        }
        let entry = |rev: &str| {
            self.ok(&[
                "log",
                "-1",
                "--format=%(trailers:key=Forum-Entry,valueonly)",
                rev,
            ])
            .map(|s| s.trim().to_string())
        };
        let want = entry(&commit)?;
        if want.is_empty() || entry(tip)? != want {
            return Ok(false);
        }
        let before_tree = self.tree_of(before)?;
        match Merges::integrated_tree(self, &before_tree, &commit) {
            Ok(tree) => Ok(tree == self.tree_of(tip)?),
            Err(WorkError::Conflict { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The commit change `commit` (of `task`) was made on.
    pub(super) fn parent_of(&self, task: &str, commit: &str) -> Result<String, WorkError> {
        let made = lock(&self.made).get(commit).cloned();
        match made {
            Some(p) => Ok(p),
            None => self.first_parent(commit).ok_or_else(|| {
                WorkError::Git(format!("the change {commit} of task {task} has no parent"))
            }),
        }
    }

    /// Integrates `commit` onto the run branch: taken as it is when it sits on the tip and no
    /// `head` is given, otherwise as a copy (merged onto the tip, with `head` in place of its
    /// message's head when given), authored as the change was and committed by git forum. A
    /// copy that would change nothing is refused: the run branch never gets an empty commit.
    fn integrate_with(
        &self,
        task: &str,
        commit: &str,
        head: Option<&str>,
    ) -> Result<String, WorkError> {
        let _one = lock(&self.integrating);
        crate::store::append::failpoint("integrate-start");
        let commit = self.resolve_change(commit)?;
        let branch = self.branch_ref();
        let old = self.branch_tip();
        let tip = old.clone().unwrap_or_else(|| self.base.commit.clone());
        let parent = self.parent_of(task, &commit)?;
        let new = if parent == tip && head.is_none() {
            commit.clone()
        } else {
            let tip_tree = self.tree_of(&tip)?;
            let tree = Merges::integrated_tree(self, &tip_tree, &commit)?;
            if tree == tip_tree {
                return Err(WorkError::Refused(format!(
                    "the change of task {task} adds nothing to the run branch (what it changes is there already); nothing was committed"
                )));
            }
            let (name, email, date, message) = self.commit_meta(&commit)?;
            let message = match head {
                Some(h) => with_head(&message, h),
                None => message,
            };
            let copy = self.commit_tree_as(
                &tree,
                &[&tip],
                &message,
                (&name, &email),
                (FORUM_NAME, FORUM_EMAIL),
                date,
            )?;
            lock(&self.trees).insert(copy.clone(), tree);
            copy
        };
        let expected = old.unwrap_or_else(|| self.zero.clone());
        let why = format!("git forum: integrate task {task} of run {}", self.run_seq);
        self.ok(&["update-ref", "-m", &why, &branch, &new, &expected])?;
        crate::store::append::failpoint("integrate-moved");
        Ok(new)
    }
}

/// Where a tree to commit as a change comes from.
pub(super) enum Written<'a> {
    /// A task's worktree, staged: what it adds is inspected before the commit is written.
    Staged(&'a Opened),
    /// A worker's commit made elsewhere, screened already by [`super::made::screen_made`]:
    /// the links it adds that leave the worktree.
    Made(Vec<LinkOut>),
}

impl GitWork {
    /// Commits `written` (a tree in the repository, the change of `tree.task`) on
    /// `tree.start` after screening what it adds: `commit: None` when it is the start's tree.
    /// `from`: the task's worktree (moved onto the commit once it is written), or a tree made
    /// elsewhere and screened already.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn commit_written(
        &self,
        tree: &TaskTree,
        written: &str,
        author: &Author,
        tie: &Tie,
        subject: &str,
        rules: &CommitRules<'_>,
        from: Written<'_>,
    ) -> Result<Change, WorkError> {
        let start_tree = self.tree_of(&tree.start)?;
        let unchanged = Change {
            task: tree.task.clone(),
            base: tree.start.clone(),
            commit: None,
            tree: start_tree.clone(),
            files: Vec::new(),
            diff: String::new(),
            truncated: false,
            links_out: Vec::new(),
        };
        if *written == start_tree {
            return Ok(unchanged);
        }
        let (opened, links_out) = match from {
            Written::Staged(opened) => (Some(opened), self.inspect(&start_tree, written, rules)?),
            Written::Made(links_out) => (None, links_out),
        };
        let name = clean_ident(&format!("{} ({})", author.lane, author.model));
        let local = task_component(&author.lane);
        let email = clean_ident(&format!("{local}@git-forum.invalid"));
        let message = format!(
            "{}\n\n{}",
            message_head(subject, &format!("git forum: task {}", tree.task)),
            tie.trailers()
        );
        let commit = self.commit_tree_as(
            written,
            &[&tree.start],
            &message,
            (&name, &email),
            (FORUM_NAME, FORUM_EMAIL),
            None,
        )?;
        lock(&self.trees).insert(commit.clone(), written.to_string());
        lock(&self.made).insert(commit.clone(), tree.start.clone());
        // A worktree now sits on its change, so `git status` there is clean (moved while
        // the diff below runs).
        let moved = std::thread::scope(|s| {
            let head = s.spawn(|| match opened {
                Some(opened) => self.settle_tree(tree, opened, &commit),
                None => Ok(()),
            });
            let diff = change_diff(&self.common, &tree.start, &commit, rules.diff_cap);
            let moved = head.join().unwrap_or_else(|_| {
                Err(WorkError::Io(
                    "the thread moving the worktree's HEAD panicked".into(),
                ))
            });
            diff.and_then(|d| moved.map(|_| d))
        });
        let (stats, patch) = moved?;
        let (diff, truncated) = git::cut_text(&patch.stdout, rules.diff_cap);
        Ok(Change {
            commit: Some(commit),
            tree: written.to_string(),
            files: diff::files(&stats),
            diff,
            truncated: truncated || patch.cut,
            links_out,
            ..unchanged
        })
    }
}
