//! Whether a planner's plan is about the request it was asked to break down: a plan whose tasks
//! repeat each other, or whose instructions (with their done criteria) share no content word
//! with the request, is refused with a one-line reason (the run asks the planner once more,
//! then stops on that reason).
//!
//! Content words are the request's and instructions' words with the topic taken out of the
//! grammar, kept deliberately small so a reader can predict the outcome:
//!
//! 1. the text is lowercased and split on every character that is not a letter or a digit (so
//!    `test_add.py` gives `test`, `add` and `py`);
//! 2. one-character words, numbers and the words of [`STOP_WORDS`] (articles, pronouns,
//!    prepositions, auxiliaries, and verbs such as "make" or "please" that name no topic) are
//!    dropped;
//! 3. each word is stemmed by [`stem`]: one plural or verb ending (`-ies`, `-es` after a
//!    sibilant, `-s`, `-ing`, `-ed`) comes off when a stem of three letters or more is left, so
//!    "failing", "failed" and "fails" all become "fail".
//!
//! A request with no content word written in ASCII (only stop-words, or a language whose words
//! a planner may well translate, such as Chinese) is not compared: only the duplicate rule
//! applies to it. Pure.

use std::collections::BTreeSet;

use super::Task;

/// Words that carry grammar, not topic: dropped before plans and requests are compared.
pub const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been",
    "before", "but", "by", "can", "could", "do", "does", "done", "each", "every", "for", "from",
    "get", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "just", "let", "make",
    "me", "my", "need", "needs", "no", "not", "now", "of", "on", "one", "or", "our", "out",
    "please", "should", "so", "some", "that", "the", "their", "them", "then", "there", "these",
    "this", "those", "to", "up", "us", "was", "we", "what", "when", "where", "which", "while",
    "who", "will", "with", "would", "you", "your",
];

/// One word's stem: at most one ending taken off (see the module doc), and only when three
/// letters or more are left.
pub fn stem(word: &str) -> String {
    let keep = |stem: &str| stem.chars().count() >= 3;
    if let Some(s) = word.strip_suffix("ies")
        && keep(s)
    {
        return format!("{s}y");
    }
    if let Some(s) = word.strip_suffix("es")
        && keep(s)
        && ["s", "x", "z", "ch", "sh"].iter().any(|e| s.ends_with(e))
    {
        return s.to_string();
    }
    if let Some(s) = word.strip_suffix("ing")
        && keep(s)
    {
        return s.to_string();
    }
    if let Some(s) = word.strip_suffix("ed")
        && keep(s)
    {
        return s.to_string();
    }
    if let Some(s) = word.strip_suffix('s')
        && keep(s)
        && !["s", "u", "i"].iter().any(|e| s.ends_with(e))
    {
        return s.to_string();
    }
    word.to_string()
}

/// The content words of `text`, stemmed (see the module doc).
pub fn content_words(text: &str) -> BTreeSet<String> {
    words(text, false)
}

/// The words of `text` but its stop-words, stemmed; with `short`, its one-character words and
/// numbers too (what tells "part 1" from "part 2" apart when tasks are compared).
fn words(text: &str, short: bool) -> BTreeSet<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty() && !STOP_WORDS.contains(w))
        .filter(|w| short || w.chars().count() > 1)
        .filter(|w| short || !w.chars().all(|c| c.is_ascii_digit()))
        .map(stem)
        .collect()
}

/// An instruction as compared for duplicates: its words, lowercased, in order.
fn normal_form(instruction: &str) -> String {
    instruction
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Checks that `tasks` are sized to `request`: no two tasks with the same instruction (the same
/// words, or the same words but stop-words, numbers included), and at least one content word of the request in the
/// instructions or their done criteria. The error is the one-line reason, written for the planner and the record.
pub fn check_sized(request: &str, tasks: &[Task]) -> Result<(), String> {
    for (i, a) in tasks.iter().enumerate() {
        for b in &tasks[i + 1..] {
            let (wa, wb) = (words(&a.instruction, true), words(&b.instruction, true));
            let same_words = normal_form(&a.instruction) == normal_form(&b.instruction);
            if same_words || (!wa.is_empty() && wa == wb) {
                return Err(format!(
                    "tasks {} and {} repeat the same instruction ({:?}); give each task a distinct part of the request, or plan one task when the request is one change",
                    a.id, b.id, a.instruction
                ));
            }
        }
    }
    let asked = content_words(request);
    if !asked.iter().any(|w| w.is_ascii()) {
        return Ok(());
    }
    // A task's done criteria are part of what it is told (its contract), so they count.
    let planned: BTreeSet<String> = tasks
        .iter()
        .flat_map(|t| content_words(&t.contract_instruction()))
        .collect();
    if asked.is_disjoint(&planned) {
        let words: Vec<&str> = asked.iter().map(String::as_str).collect();
        return Err(format!(
            "no task's instruction shares a content word with the request (its words: {}); write instructions about what was asked",
            words.join(", ")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tasks(instructions: &[&str]) -> Vec<Task> {
        instructions
            .iter()
            .enumerate()
            .map(|(i, s)| Task::new(format!("T{}", i + 1), "backend", *s))
            .collect()
    }

    #[test]
    fn the_dependencias_plan_is_refused_as_duplicates() {
        let plan = tasks(&["dependencias"; 4]);
        assert_eq!(
            check_sized("fix the failing test", &plan),
            Err("tasks T1 and T2 repeat the same instruction (\"dependencias\"); give each task a distinct part of the request, or plan one task when the request is one change".to_string())
        );
    }

    #[test]
    fn one_off_topic_task_is_refused_naming_the_requests_words() {
        assert_eq!(
            check_sized("fix the failing test", &tasks(&["dependencias"])),
            Err("no task's instruction shares a content word with the request (its words: fail, fix, test); write instructions about what was asked".to_string())
        );
    }

    #[test]
    fn plans_that_paraphrase_the_request_pass() {
        let request = "fix the failing test";
        for plan in [
            vec!["repair the broken unit test in test_add.py"],
            vec!["Fix the failing test in tests/test_calc.py"],
            vec!["Find why test_add fails and correct add() in calc.py"],
            vec!["make the tests pass again"],
            vec!["Fixing: the assertion in the test is failing"],
        ] {
            assert_eq!(check_sized(request, &tasks(&plan)), Ok(()), "{plan:?}");
        }
        let two = tasks(&[
            "add the /health endpoint to the server",
            "write tests for the health endpoint",
        ]);
        assert_eq!(
            check_sized("add a health endpoint with tests", &two),
            Ok(())
        );
    }

    #[test]
    fn numbered_parts_are_not_duplicates() {
        let plan = tasks(&["write part 0", "write part 1", "write part 2"]);
        assert_eq!(check_sized("write the report in parts", &plan), Ok(()));
    }

    #[test]
    fn done_criteria_count_as_what_a_task_is_about() {
        let mut plan = tasks(&["make add in calc.sh add its arguments"]);
        assert!(check_sized("make the failing test pass", &plan).is_err());
        plan[0].done_when = vec!["sh test.sh passes".into()];
        assert_eq!(check_sized("make the failing test pass", &plan), Ok(()));
    }

    #[test]
    fn the_same_content_words_in_another_order_are_duplicates() {
        let plan = tasks(&["update the docs for the parser", "Parser docs: update"]);
        assert_eq!(
            check_sized("update the parser docs", &plan).unwrap_err(),
            "tasks T1 and T2 repeat the same instruction (\"update the docs for the parser\"); give each task a distinct part of the request, or plan one task when the request is one change"
        );
    }

    #[test]
    fn a_request_without_content_words_is_not_compared() {
        assert_eq!(check_sized("do it", &tasks(&["rewrite main.rs"])), Ok(()));
        assert_eq!(check_sized("修复测试", &tasks(&["fix the test"])), Ok(()));
    }

    #[test]
    fn content_words_are_lowercased_stemmed_and_without_stop_words() {
        let words: Vec<String> =
            content_words("Please make the failing Tests in test_add.py pass; 2 fixes, 10 files")
                .into_iter()
                .collect();
        assert_eq!(words, ["add", "fail", "file", "fix", "pass", "py", "test"]);
        assert_eq!(stem("status"), "status");
        assert_eq!(stem("analysis"), "analysis");
        assert_eq!(stem("libraries"), "library");
        assert_eq!(stem("passes"), "pass");
        assert_eq!(stem("ring"), "ring");
        assert_eq!(stem("red"), "red");
        assert_eq!(stem("added"), "add");
    }
}
