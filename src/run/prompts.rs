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
    let criteria = if task.done_when.is_empty() {
        "(none given: judge whether the output does what the instruction asks)".to_string()
    } else {
        task.done_when
            .iter()
            .map(|c| format!("- {c}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
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
