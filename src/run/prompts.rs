//! The prompts a run sends to its seats, in our own words: planner, worker, validator,
//! synthesizer, reviser and intent judge.

use crate::plan::Task;
use crate::roster::Roster;

pub(super) fn judge_prompt(request: &str, answer: &str, missing: &[String]) -> String {
    let missing = if missing.is_empty() {
        "(none)".to_string()
    } else {
        missing.join(", ")
    };
    format!(
        "A lexical check found that the answer below leaves out these words of the request: \
         {missing}.\n\nDecide whether the answer drifted away from what was asked (ok false) \
         or answers it in other words (ok true). score is how well the answer serves the \
         request, between 0 and 1. reason says why in one sentence.\n\n\
         Request: {request}\n\nAnswer:\n{answer}"
    )
}

pub(super) fn reviser_prompt(request: &str, answer: &str) -> String {
    format!(
        "Tighten this answer: shorter sentences, no filler words, nothing added. Keep every \
         fact, and keep using the request's own words. Reply with the revised answer only.\n\n\
         Request: {request}\n\nAnswer:\n{answer}"
    )
}

pub(super) fn planner_prompt(
    request: &str,
    context: Option<&str>,
    roster: &Roster,
    max_tasks: usize,
) -> String {
    let mut lanes = String::new();
    for a in roster.agents() {
        lanes.push_str(&format!("- {}: {}\n", a.name, a.category));
    }
    let context = match context {
        Some(c) => format!("Context for this request:\n{c}\n\n"),
        None => String::new(),
    };
    format!(
        "Break this request into at most {max_tasks} tasks for the lanes below.\n\n\
         Request: {request}\n\n\
         {context}\
         Lanes:\n{lanes}\n\
         Size the plan to the request: a small fix or a one-line change is one task; split \
         only work that has distinct parts, and never give two tasks the same instruction. \
         Each instruction says, in the request's own terms, which part of the request it does.\n\n\
         Number the tasks T1, T2, ... in order. Give each one lane from the list, a concrete \
         instruction, the ids of earlier tasks whose output it needs (depends_on; [] when \
         none) and done_when: the checks that show it is finished."
    )
}

pub(super) fn planner_retry_prompt(first: &str, error: &str) -> String {
    format!("{first}\n\nYour previous plan could not be used: {error}\nWrite a corrected plan.")
}

pub(super) fn worker_system(agent: &str, category: Option<&str>) -> String {
    match category {
        Some(c) => {
            format!("You work the {agent} lane ({c}). Do the task and report the result plainly.")
        }
        None => format!("You work the {agent} lane. Do the task and report the result plainly."),
    }
}

pub(super) fn validator_prompt(task: &Task, output: &str) -> String {
    let criteria =
        task.criteria_or("(none given: judge whether the output does what the instruction asks)");
    format!(
        "Judge one task's output.\n\nTask {}: {}\nDone criteria:\n{criteria}\n\nOutput:\n{output}\n\n\
         decision is pass when the output meets the criteria, escalate when a stronger model \
         should redo it, block when it is harmful or must not be used at all. score is between \
         0 and 1. reason says why in one sentence.",
        task.id, task.instruction
    )
}

pub(super) fn synthesis_prompt(request: &str, parts: &[String], contract: &str) -> String {
    format!(
        "Request: {request}\n\nResults of the tasks:\n{}\n\n{contract}\n\nWrite the answer to the request from these results.",
        if parts.is_empty() {
            "(none usable)".to_string()
        } else {
            parts.join("\n")
        },
    )
}

/// What a `--work` task's worker is told about its worktree.
pub(super) fn work_note(path: Option<&std::path::Path>) -> String {
    let place = match path {
        Some(p) => format!(" {}", p.display()),
        None => " made for this task".to_string(),
    };
    format!(
        "\n\nYou work in the git worktree{place} (your working directory). Make the change by \
         editing files there; when you answer, everything you changed is committed for you and \
         checked. Your answer is a short report of what you changed."
    )
}

/// The retry note after a task's checks failed: the failing commands and their output.
pub(super) fn failed_checks_note(failed: &[(String, String)]) -> String {
    let mut out = String::from(
        "\n\nA previous attempt at this task was committed, but these checks failed on it. \
         Start again from a fresh worktree and make them pass:",
    );
    for (command, tail) in failed {
        out.push_str(&format!("\n$ {command}\n{tail}"));
    }
    out
}

/// The note for a task run again on top of the integrated run branch after its change
/// conflicted with an earlier one.
pub(super) fn conflict_note(paths: &[String]) -> String {
    format!(
        "\n\nYour earlier change conflicted with changes already integrated into the run \
         branch (in {}). This worktree holds the integrated result: make your change again on \
         top of it.",
        paths.join(", ")
    )
}

/// The pre-ship gate's prompt: the task contract, the checks and the diff.
pub(super) fn ship_prompt(task: &Task, checks: &[(String, bool)], diff: &str) -> String {
    let criteria = task.criteria_or("(none given)");
    let checks = if checks.is_empty() {
        "(no checks were configured)".to_string()
    } else {
        checks
            .iter()
            .map(|(c, ok)| format!("- {c}: {}", if *ok { "passed" } else { "failed" }))
            .collect::<Vec<_>>()
            .join("\n")
    };
    format!(
        "Decide whether to ship one change into the run branch.\n\nTask {}: {}\nDone \
         criteria:\n{criteria}\n\nChecks:\n{checks}\n\nDiff:\n{diff}\n\n\
         decision is merge when the change does what the task asks and nothing harmful, block \
         when it must never be integrated, escalate when a person should look at it, \
         undetermined when you cannot tell. reason says why in one sentence.",
        task.id, task.instruction
    )
}
