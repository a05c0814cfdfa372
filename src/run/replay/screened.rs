//! A local task's change screened again. The writer screened it in the task's worktree (the
//! files and bytes it adds, a nested repository, the secrets in the lines it adds, the links
//! that leave) before committing it; the worktree is gone once the run ends, but what the
//! screens read of it is in the repository while git keeps it:
//!
//! - an accepted change is its commit: its tree is screened again on the difference from its
//!   parent (the task's start), by the rule a worker's commit goes through
//!   (`crate::work::made::screen_made`), so a change the screens refuse cannot be recorded as
//!   accepted, and its tree and links that leave are the replay's own;
//! - a change refused for its secrets keeps the tree it was staged as (`tree`), whose objects
//!   nothing names, so `git gc` prunes them in time: while they are here the refusal (each
//!   find) is made again, and a refusal forged over a tree that adds no secret diverges.
//!
//! What cannot be screened again is given back as the record keeps it, with one line saying
//! so: a change refused for its size or for what was in its worktree (measured on the files
//! before git read them), a secrets refusal recorded before refusals kept their tree or whose
//! tree was pruned, and an accepted change whose commit is not in this repository.

use crate::run::workbench::{Change, LinkOut, SecretFound, WorkError};

/// The writer's screens of a change on the repository's trees (the replay's
/// `Merges::screened` under the run's rules): the tree `made` names, and `Ok` with the links it
/// adds that leave or `Err` with the refusal, on the difference from the tree `start` names;
/// `None` when either is not in the repository.
pub(super) type Screen<'a> =
    &'a dyn Fn(&str, &str) -> Option<(String, Result<Vec<LinkOut>, WorkError>)>;

/// What the record says a local task's commit gave (`recorded`; `base`: the commit its
/// worktree was opened on, as its `change` entry names it; `kept`: whether the run kept the
/// tree of each change refused for its secrets), screened again through `screen` where the
/// repository holds what the screens read: the answer, and a line when it is the record's
/// alone.
pub(super) fn local(
    screen: Screen<'_>,
    task: &str,
    recorded: Result<Change, WorkError>,
    (base, kept): (Option<&str>, bool),
) -> (Result<Change, WorkError>, Option<String>) {
    match recorded {
        Ok(c) => match c.commit.clone() {
            None => (Ok(c), None),
            Some(commit) => accepted(screen, task, c, &commit),
        },
        Err(WorkError::Secrets {
            found,
            tree: Some(tree),
        }) => match base {
            Some(base) => refused(screen, task, (found, tree), base),
            None => (
                Err(WorkError::Secrets {
                    found,
                    tree: Some(tree),
                }),
                Some(format!(
                    "the change of task {task} refused for its secrets names no commit it was made on: the refusal is answered from the record"
                )),
            ),
        },
        // A run that kept every refused tree kept this one: a refusal without it is not the
        // writer's.
        Err(WorkError::Secrets { tree: None, .. }) if kept => (
            Err(WorkError::Io(format!(
                "the change of task {task} is refused for its secrets without the tree they were found in, which this run keeps for every such refusal"
            ))),
            None,
        ),
        Err(e @ WorkError::Secrets { tree: None, .. }) => (
            Err(e),
            Some(format!(
                "the change of task {task} was refused for its secrets before refusals kept the tree they screened: the refusal is answered from the record"
            )),
        ),
        Err(WorkError::Refused(why)) => {
            let line = format!(
                "the change of task {task} was refused in its worktree, which is gone ({why}): the refusal is answered from the record"
            );
            (Err(WorkError::Refused(why)), Some(line))
        }
        Err(e) => (Err(e), None),
    }
}

/// An accepted change screened again from its commit, on the difference from its parent.
fn accepted(
    screen: Screen<'_>,
    task: &str,
    c: Change,
    commit: &str,
) -> (Result<Change, WorkError>, Option<String>) {
    let parent = format!("{commit}^1");
    match screen(&parent, commit) {
        Some((tree, Ok(links_out))) => (
            Ok(Change {
                tree,
                links_out,
                ..c
            }),
            None,
        ),
        // The screens refuse what the record says was accepted.
        Some((_, Err(e @ (WorkError::Refused(_) | WorkError::Secrets { .. })))) => (Err(e), None),
        Some((_, Err(e))) => (
            Ok(c),
            Some(format!(
                "the change commit {commit} of task {task} cannot be screened again ({e}): it is answered from the record"
            )),
        ),
        None => (
            Ok(c),
            Some(format!(
                "the change commit {commit} of task {task} is not in this repository: its screens are answered from the record"
            )),
        ),
    }
}

/// A change refused for its secrets, screened again from the tree it was staged as.
fn refused(
    screen: Screen<'_>,
    task: &str,
    (found, tree): (Vec<SecretFound>, String),
    base: &str,
) -> (Result<Change, WorkError>, Option<String>) {
    match screen(base, &tree) {
        // The screens pass: what the writer would have had is a change of that tree (the
        // commit it would have made is not made again).
        Some((made, Ok(links_out))) => (
            Ok(Change {
                task: task.to_string(),
                base: base.to_string(),
                commit: None,
                tree: made,
                files: Vec::new(),
                diff: String::new(),
                truncated: false,
                links_out,
            }),
            None,
        ),
        Some((_, Err(e @ (WorkError::Refused(_) | WorkError::Secrets { .. })))) => (Err(e), None),
        _ => (
            Err(WorkError::Secrets {
                found,
                tree: Some(tree.clone()),
            }),
            Some(format!(
                "the tree {tree} the change of task {task} was refused with is no longer whole in this repository (git gc prunes what nothing names): the refusal is answered from the record"
            )),
        ),
    }
}
