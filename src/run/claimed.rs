//! A dispatched task's change that the writer does not check itself (a run not checked in
//! full): where its change is read from ([`Made`]) and what its worker claims of each check
//! ([`claimed_runs`]), witnessed as `check` entries that name the worker (`claimed_by`).

use crate::fleet::protocol::{CheckClaim, ResultMessage};

use super::workbench::{CheckRun, TaskTree};

/// Where a task's change is read from.
#[derive(Clone, Copy)]
pub(super) enum Made<'a> {
    /// The task's worktree here: its change is staged from it and its checks run in it.
    Tree(&'a TaskTree),
    /// A dispatched task's worker's commit (checked to be one commit on the task's start),
    /// when the writer does not run the checks itself: `tree` names the task and its start
    /// (no worktree is read), and the checks are what the worker's `result` claims.
    Claimed {
        tree: &'a TaskTree,
        commit: &'a str,
        result: &'a ResultMessage,
    },
    /// A dispatched task's worker's commit (checked as for [`Made::Claimed`]) when the writer
    /// runs the checks itself: the change is screened and committed from the commit, by the
    /// one rule a worker's commit goes through, and its checks run in `tree`, the writer's own
    /// worktree of the task, which holds the commit's tree.
    Brought { tree: &'a TaskTree, commit: &'a str },
}

impl<'a> Made<'a> {
    pub(super) fn tree(self) -> &'a TaskTree {
        match self {
            Made::Tree(tree) | Made::Claimed { tree, .. } | Made::Brought { tree, .. } => tree,
        }
    }
}

/// What a worker claims of each of `commands` (in order; a command given twice takes the
/// worker's claims of it in turn): its exit, outcome and time, with no output (a worker
/// sends none). A command the worker claims nothing of failed.
pub(super) fn claimed_runs(commands: &[String], claims: &[CheckClaim]) -> Vec<CheckRun> {
    let mut used = vec![false; claims.len()];
    commands
        .iter()
        .map(|cmd| {
            let found = (0..claims.len()).find(|&i| !used[i] && claims[i].command == *cmd);
            match found {
                Some(i) => {
                    used[i] = true;
                    let c = &claims[i];
                    CheckRun {
                        command: cmd.clone(),
                        exit: c.exit,
                        ok: c.ok && c.exit == Some(0),
                        seconds: c.seconds,
                        tail: String::new(),
                    }
                }
                None => CheckRun {
                    command: cmd.clone(),
                    exit: None,
                    ok: false,
                    seconds: 0.0,
                    tail: "the worker's result claims nothing of this check".into(),
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_check_takes_the_workers_claim_of_it_in_turn_and_one_claimed_nowhere_fails() {
        let claim = |command: &str, ok: bool, exit: Option<i32>| CheckClaim {
            command: command.into(),
            ok,
            exit,
            seconds: 0.5,
        };
        let claims = [
            claim("make lint", true, Some(0)),
            claim("make test", true, Some(0)),
            claim("make test", false, Some(2)),
            // Said to pass with no exit code: not taken as a pass.
            claim("odd", true, None),
        ];
        let commands: Vec<String> = ["make test", "make test", "make test", "make lint", "odd"]
            .iter()
            .map(|c| c.to_string())
            .collect();
        let runs = claimed_runs(&commands, &claims);
        let got: Vec<(&str, Option<i32>, bool)> = runs
            .iter()
            .map(|r| (r.command.as_str(), r.exit, r.ok))
            .collect();
        assert_eq!(
            got,
            [
                ("make test", Some(0), true),
                ("make test", Some(2), false),
                ("make test", None, false),
                ("make lint", Some(0), true),
                ("odd", None, false),
            ]
        );
        assert!(runs[2].tail.contains("claims nothing"), "{}", runs[2].tail);
        assert!(runs[0].tail.is_empty());
        assert!(claimed_runs(&commands, &[]).iter().all(|r| !r.ok));
    }
}
