//! How a worker delivers a task it has done: the change pushed to the attempt's results ref,
//! the result published, the message acknowledged, the worktree removed. A slot hands this to
//! a thread of its own and pulls its next task at once, so the push and the publish of one
//! task overlap the next task's work; the lease of the task delivered is extended until its
//! result is out (the renewing thread ends when [`Delivery::renewing`] drops).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::super::nats::Pulled;
use super::super::protocol::{self, ResultMessage, TaskMessage};
use super::super::writer::git_line;
use super::{Worker, failed};

/// A task done, waiting to be delivered.
pub(super) struct Delivery {
    pub(super) task: TaskMessage,
    pub(super) pulled: Arc<Pulled>,
    pub(super) result: ResultMessage,
    pub(super) left: Left,
    /// Dropped once the result is out: the task's lease is no longer extended.
    pub(super) renewing: std::sync::mpsc::Sender<()>,
}

/// What a task leaves to its delivery: the change to push (its commit and the results ref),
/// and the worktree to remove (its temporary directory with it).
#[derive(Default)]
pub(super) struct Left {
    pub(super) push: Option<(String, String)>,
    pub(super) tree: Option<(crate::scratch::Tracked, PathBuf)>,
}

impl Worker<'_> {
    /// Delivers `d`: pushes its change (unless its run was halted meanwhile: then nothing is
    /// pushed or answered, and the task is not given out again), removes its worktree,
    /// publishes its result and acknowledges its message.
    pub(super) fn deliver_result(&self, d: Delivery) {
        let Delivery {
            task,
            pulled,
            result: mut r,
            mut left,
            renewing,
        } = d;
        if let Some((commit, to)) = left.push.take() {
            if self.is_halted(task.run) {
                self.clear(left);
                drop(renewing);
                let _ = self.conn.term(&pulled);
                self.report(&task, "halted");
                return;
            }
            match self.deliver(&task, &commit, &to) {
                Ok(Some(found)) => {
                    r.commit = Some(found);
                    r.found_in_ref = true;
                }
                Ok(None) => {}
                Err(e) => r = failed(r, "work", e),
            }
        }
        self.clear(left);
        drop(renewing);
        let subject = protocol::result_subject(&task.ledger, task.run);
        let times = if self.o.answer_twice { 2 } else { 1 };
        for i in 0..times {
            let id = format!("{}.{}.{i}", task.attempt, self.o.name);
            if let Err(e) = self.conn.publish_once(&subject, r.to_bytes(), &id) {
                // Not acknowledged: the task is delivered again after the lease.
                eprintln!("git forum worker: {e}");
                return;
            }
        }
        if let Err(e) = self.conn.ack(&pulled) {
            eprintln!("git forum worker: {e}");
        }
        self.report(&task, "done");
    }

    /// Removes the worktree `left` holds (its temporary directory goes with it).
    pub(super) fn clear(&self, left: Left) {
        let Some((dir, tree)) = left.tree else {
            return;
        };
        let _guard = self.turn.lock();
        let _ = git_line(
            &self.o.repo,
            &["worktree", "remove", "--force", &tree.to_string_lossy()],
        );
        drop(dir);
    }

    /// Pushes `commit` to the attempt's results ref `to`, never over what is there. When the
    /// push is refused because the ref exists (another delivery of this attempt pushed
    /// first, after this worker's lease ran out), the commit it holds is the attempt's
    /// change: it is returned (`Some`) when it is one commit on the task's base carrying the
    /// attempt's trailer, so that every answer of the attempt names the same change.
    fn deliver(
        &self,
        task: &TaskMessage,
        commit: &str,
        to: &str,
    ) -> Result<Option<String>, String> {
        let Err(refused) = self.push(commit, to) else {
            return Ok(None);
        };
        let local = format!("refs/forum/worker/found/{}", task.attempt);
        let fetched = self.fetch_to(to, &local);
        let found = fetched.and_then(|_| {
            git_line(
                &self.o.repo,
                &["rev-parse", "--verify", &format!("{local}^{{commit}}")],
            )
        });
        let _ = git_line(&self.o.repo, &["update-ref", "-d", &local]);
        // Not there: the push failed for another reason.
        let Ok(found) = found else {
            return Err(format!("cannot push the change to {to}: {refused}"));
        };
        if found == commit {
            return Ok(None);
        }
        let parents = git_line(&self.o.repo, &["rev-list", "--parents", "-n", "1", &found])?;
        let trailer = git_line(
            &self.o.repo,
            &[
                "log",
                "-1",
                "--format=%(trailers:key=Forum-Attempt,valueonly)",
                &found,
            ],
        )?;
        let on_base = parents.split_whitespace().skip(1).eq([task.base.as_str()]);
        if !on_base || trailer.trim() != task.attempt {
            return Err(format!(
                "cannot push the change to {to}: the remote holds {found} there, which is not a change of attempt {} on the task's base",
                task.attempt
            ));
        }
        eprintln!(
            "git forum worker: {to} already held {found} (another delivery of attempt {} pushed first); the result names it",
            task.attempt
        );
        Ok(Some(found))
    }

    /// Pushes `commit` to `to` on the remote, saying it is this worker's push (`-o
    /// forum-worker=NAME`); to a remote that takes no push options (one without git forum's
    /// server hook), the same push without it. Never forced: when the server gave the attempt
    /// to another worker too (a lease that ran out) and that one pushed first, this push is
    /// refused and the first result stays, whether or not the remote has git forum's hook.
    fn push(&self, commit: &str, to: &str) -> Result<String, String> {
        let option = format!("{}={}", crate::policy::worker_push::OPTION, self.o.name);
        // Not forced: a results ref that exists is never moved.
        let spec = format!("{commit}:{to}");
        let remote = self.o.remote.as_str();
        let plain = ["push", "--quiet", "--no-verify", remote, &spec];
        if self.plain_push.load(Ordering::Relaxed) {
            return git_line(&self.o.repo, &plain);
        }
        let with = [
            "push",
            "--quiet",
            "--no-verify",
            "-o",
            &option,
            remote,
            &spec,
        ];
        match git_line(&self.o.repo, &with) {
            Err(e) if e.contains("does not support push options") => {
                self.plain_push.store(true, Ordering::Relaxed);
                git_line(&self.o.repo, &plain)
            }
            done => done,
        }
    }
}
