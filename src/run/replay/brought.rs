//! Whether the writer of a dispatched run could bring a worker's commit in, decided again.
//! A worker's `result` names its commit (`commit`); before the writer puts the commit's tree in
//! the task's worktree it fetches the results ref, reads that the ref holds the commit, and
//! checks the commit: one commit on the task's base, carrying the trailer `Forum-Attempt` with
//! its attempt id (`crate::fleet::writer`'s `bring` calls [`checked`], as the replay does).
//! The fetch and the ref are the world's, and a refusal they led to is given back as the
//! record keeps it, but for a claim the repository contradicts ([`decide`]: a results ref said
//! to hold another commit, which could not have moved to the one it holds now); the checks of
//! the commit are the writer's decision, and the replay makes them again from the commit as
//! the repository holds it, so a refusal or an acceptance the record forged is a divergence at
//! the `change` entry that witnessed it.
//!
//! Where the commit is not in the repository (a fetched copy of the ledger whose results
//! refs were not fetched), the replay says so in one line and answers from the record for
//! that commit; so it does for a result recorded before results named their commit.

use super::Recorded;

/// What the writer reads of a worker's commit to check it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCommit {
    /// Its parents, in order.
    pub parents: Vec<String>,
    /// The value of its `Forum-Attempt` trailer (empty when it has none).
    pub attempt: String,
}

/// The writer's checks of `commit`, read as `facts`, for the task started on `base` and sent
/// as `attempt`: `Err` with the writer's line when it refuses the commit.
pub(crate) fn checked(
    commit: &str,
    facts: &WorkerCommit,
    base: &str,
    attempt: &str,
) -> Result<(), String> {
    if facts.parents != [base] {
        return Err(format!(
            "the worker's commit {commit} is not one commit on the task's base {base} (its parents: {})",
            facts.parents.join(" ")
        ));
    }
    if facts.attempt.trim() != attempt {
        return Err(format!(
            "the worker's commit {commit} does not carry the trailer Forum-Attempt: {attempt}"
        ));
    }
    Ok(())
}

/// Whether a recorded refusal came from the world before the commit was checked (the fetch
/// of the results ref, what the ref held, a git command that failed) or after it passed (its
/// tree put in the worktree): those are given back as recorded. Any other refusal is one of
/// the checks, which the replay makes again.
pub(super) fn of_the_world(why: &str) -> bool {
    why.starts_with("cannot fetch the worker's commit")
        || why.starts_with("cannot put the worker's change in the task's worktree")
        || why.starts_with("git ")
        || held_another(why)
}

/// Whether a recorded refusal says the results ref held another commit than the result
/// names (`REF holds X, not the commit C the result names`).
fn held_another(why: &str) -> bool {
    why.contains(" holds ") && why.ends_with(" the result names")
}

/// The commit a recorded refusal says the results ref held instead (`X` of
/// `REF holds X, not the commit C the result names`).
pub(super) fn held_instead(why: &str) -> Option<&str> {
    if !held_another(why) {
        return None;
    }
    let (_, rest) = why.split_once(" holds ")?;
    rest.split_once(", not the commit ").map(|(x, _)| x)
}

/// What the replay reads in this repository of a worker's commit and its results ref.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Read<'a> {
    /// The commit's parents and trailer (`None`: the commit is not here).
    pub(super) facts: Option<&'a WorkerCommit>,
    /// The commit the attempt's results ref holds now (`None`: no such ref here).
    pub(super) held: Option<&'a str>,
    /// Whether the commit descends from the one a recorded refusal says the ref held (so the
    /// ref could have moved on to it since); `None` when not asked or git cannot tell.
    pub(super) forward: Option<bool>,
}

/// What the writer decides of the worker's `commit` for the task on `base` sent as
/// `attempt`, where the record says `recorded` (its refusal, or `None`: brought in), and this
/// repository reads as `read`. Returns the answer and, when it had to come from the record,
/// the line saying why.
///
/// A refusal by the world is given back, with one exception: a recorded claim that the
/// results ref held another commit `X`, where the ref holds the very commit the result names
/// now and that commit does not descend from `X`. A worker pushes its results ref without
/// force (a ref that exists only moves forward), so the ref cannot have come from `X` to that
/// commit: the claim is the record's, not the world's, and the commit's checks decide. A
/// failed fetch is given back whatever the repository holds now: a fetch can fail for a
/// moment, and a later one (a retry's, `git forum fetch`) can bring the ref since.
pub(super) fn decide(
    (commit, base, attempt): (&str, &str, &str),
    recorded: Option<String>,
    read: Read<'_>,
) -> (Result<(), String>, Option<String>) {
    let facts = read.facts;
    let recorded = recorded.map_or(Ok(()), Err);
    let Some(facts) = facts else {
        let line = format!(
            "the worker's commit {commit} of attempt {attempt} is not in this repository: whether the writer could bring it in is answered from the record"
        );
        return (recorded, Some(line));
    };
    if let Err(why) = checked(commit, facts, base, attempt) {
        return (Err(why), None);
    }
    match recorded {
        // The ref holds the commit the record says it did not: not the world's answer.
        Err(why)
            if held_another(&why) && read.held == Some(commit) && read.forward == Some(false) =>
        {
            (Ok(()), None)
        }
        // Refused by what the world said, or after the checks passed.
        Err(why) if of_the_world(&why) => (Err(why), None),
        _ => (Ok(()), None),
    }
}

/// The line of a worker's `result` recorded before results named their commit, when the
/// writer then brought it in or refused it (only a result that was `ok` is brought in).
pub(super) fn older(e: &Recorded) -> Option<String> {
    let b = &e.payload;
    (b["ok"] == true && b.get("commit").is_none()).then(|| {
        format!(
            "the result at seq {} was recorded before results named the worker's commit: whether the writer could bring it in is answered from the record",
            e.seq
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(parents: &[&str], attempt: &str) -> WorkerCommit {
        WorkerCommit {
            parents: parents.iter().map(|p| p.to_string()).collect(),
            attempt: attempt.into(),
        }
    }

    /// What the repository reads: the commit's `facts`, and the results ref holding nothing.
    fn here(facts: &WorkerCommit) -> Read<'_> {
        Read {
            facts: Some(facts),
            held: None,
            forward: None,
        }
    }

    #[test]
    fn the_commit_is_checked_again_and_the_worlds_refusals_are_given_back() {
        let at = ("c1", "b0", "a-1");
        let good = facts(&["b0"], "a-1\n");
        // Brought in as recorded; a forged refusal of a good commit is not.
        assert_eq!(decide(at, None, here(&good)), (Ok(()), None));
        let forged = "the worker's commit c1 does not carry the trailer Forum-Attempt: a-1";
        assert_eq!(decide(at, Some(forged.into()), here(&good)), (Ok(()), None));
        // A commit on another base, or of another attempt, is refused whatever the record says.
        let other_base = facts(&["b9"], "a-1");
        let (r, _) = decide(at, None, here(&other_base));
        assert_eq!(
            r.unwrap_err(),
            "the worker's commit c1 is not one commit on the task's base b0 (its parents: b9)"
        );
        let other_attempt = facts(&["b0"], "a-2");
        let (r, _) = decide(at, None, here(&other_attempt));
        assert_eq!(r.unwrap_err(), forged);
        // The fetch and the ref are the world's, even where the ref holds the commit now.
        let fetch = "cannot fetch the worker's commit from refs/forum/results/x: gone";
        let holding = Read {
            facts: Some(&good),
            held: Some("c1"),
            forward: Some(false),
        };
        assert_eq!(
            decide(at, Some(fetch.into()), holding),
            (Err(fetch.into()), None)
        );
        let moved = "refs/forum/results/x holds b0, not the commit c1 the result names";
        assert_eq!(
            decide(at, Some(moved.into()), here(&good)).0,
            Err(moved.into())
        );
        let elsewhere = Read {
            facts: Some(&good),
            held: Some("b0"),
            forward: Some(false),
        };
        assert_eq!(
            decide(at, Some(moved.into()), elsewhere).0,
            Err(moved.into())
        );
        // Nor where the ref could have moved on from what the record says it held.
        let moved_on = Read {
            forward: Some(true),
            ..holding
        };
        assert_eq!(
            decide(at, Some(moved.into()), moved_on).0,
            Err(moved.into())
        );
        assert_eq!(held_instead(moved), Some("b0"));
        // But a ref said to hold another commit that holds the result's now: written once,
        // it never held another, so the claim is not the world's and the checks decide.
        assert_eq!(decide(at, Some(moved.into()), holding), (Ok(()), None));
        // Any other refusal of a commit that passes the checks is not the writer's.
        assert_eq!(decide(at, Some("no".into()), here(&good)).0, Ok(()));
        // Not here: the record answers, and the replay says so.
        let (r, line) = decide(at, Some(forged.into()), Read::default());
        assert_eq!(r, Err(forged.into()));
        assert!(
            line.unwrap()
                .contains("c1 of attempt a-1 is not in this repository")
        );
    }
}
