//! How a worker opens a task's worktree: the task's base fetched from the remote (unless the
//! clone has it already), then a detached worktree on it.

use std::path::Path;

use super::super::protocol::TaskMessage;
use super::super::writer::git_line;
use super::Worker;

impl Worker<'_> {
    /// Fetches `from` of the remote into the local ref `local` (moved whatever it held).
    pub(super) fn fetch_to(&self, from: &str, local: &str) -> Result<String, String> {
        let spec = format!("+{from}:{local}");
        // No auto maintenance after each fetch: a worker's commits still trigger it.
        let args = [
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--no-auto-maintenance",
        ];
        let remote = self.o.remote.as_str();
        git_line(
            &self.o.repo,
            &[&args[..], &[remote, spec.as_str()]].concat(),
        )
    }

    /// Opens a detached worktree at `tree` on the task's base, fetched first unless the clone
    /// has that commit already (the tasks of a wave share their base: one fetch serves them
    /// all). A commit here whose tree cannot be checked out (objects of a fetch that was cut
    /// short) is fetched again all the same.
    pub(super) fn open(&self, task: &TaskMessage, tree: &Path) -> Result<(), String> {
        let here = format!("{}^{{commit}}", task.base);
        let had = git_line(&self.o.repo, &["cat-file", "-e", &here]).is_ok();
        if !had {
            self.fetch_base(task)?;
        }
        let add = || {
            let _guard = self.turn.lock();
            let path = tree.to_string_lossy();
            let args = ["worktree", "add", "--quiet", "--detach", &path, &task.base];
            git_line(&self.o.repo, &args).map(|_| ())
        };
        match add() {
            Err(_) if had => {
                self.fetch_base(task)?;
                add()
            }
            done => done,
        }
    }

    /// Fetches the task's base from the remote and makes sure the ref there held it.
    fn fetch_base(&self, task: &TaskMessage) -> Result<(), String> {
        let local = format!("refs/forum/worker/{}", task.attempt);
        self.fetch_to(&task.base_ref, &local)
            .map_err(|e| format!("cannot fetch the task's base: {e}"))?;
        let got = git_line(
            &self.o.repo,
            &["rev-parse", "--verify", &format!("{local}^{{commit}}")],
        )?;
        let _ = git_line(&self.o.repo, &["update-ref", "-d", &local]);
        if got != task.base {
            return Err(format!(
                "{} on the remote holds {got}, not the task's base {}",
                task.base_ref, task.base
            ));
        }
        Ok(())
    }
}
