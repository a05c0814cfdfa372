//! What a change commit says: a subject from the worker's own report (the first non-blank line
//! of its final answer), else from the instruction and the files it changed; a body naming
//! the task and, on the run branch's copy, the checks' results; then git forum's trailers,
//! always the last paragraph.
//!
//! The worker's report and the instruction are untrusted text. Each goes into a message as one
//! line ([`one_line`]): controls and line breaks removed, spaces collapsed, cut to a length,
//! and quoted when git could read it as a trailer (a token of letters, digits and `-`, then
//! `:`, as git's `interpret-trailers` finds one; or one of the prefixes git writes itself), so
//! no text of a worker can ever read as `Forum-Task: ...` or any other trailer. Pure.

use std::fmt::Write as _;

/// The longest subject, in characters (an ellipsis marks a cut).
pub(super) const SUBJECT_CHARS: usize = 72;

/// The longest body line (a check command), in characters.
const LINE_CHARS: usize = 200;

/// The prefixes git treats as trailers whatever follows them.
const GIT_PREFIXES: [&str; 2] = ["Signed-off-by", "(cherry picked from commit "];

/// Whether git's trailer parser would take `line` as a trailer: a token of ASCII letters,
/// digits and `-`, optional spaces, then `:` (git's `find_separator` with the default
/// separators), or one of git's own prefixes.
pub(super) fn trailer_like(line: &str) -> bool {
    if GIT_PREFIXES.iter().any(|p| line.starts_with(p)) {
        return true;
    }
    let mut spaced = false;
    for (i, c) in line.char_indices() {
        match c {
            ':' => return i > 0,
            c if !spaced && (c.is_ascii_alphanumeric() || c == '-') => {}
            ' ' | '\t' if i > 0 => spaced = true,
            _ => return false,
        }
    }
    false
}

/// `text` as one safe line of at most `max` characters: controls and line breaks become
/// spaces, runs of spaces one, the ends trimmed, a cut marked with `…`, and the whole quoted
/// when git would read it as a trailer.
pub(super) fn one_line(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let words: Vec<&str> = flat.split_whitespace().collect();
    let joined = words.join(" ");
    let mut line: String = joined.chars().take(max).collect();
    if line.chars().count() < joined.chars().count() {
        line.push('…');
    }
    if trailer_like(&line) {
        line = format!("\"{line}\"");
    }
    line
}

/// The first non-blank line of a worker's final answer, as a subject; `None` when there is
/// none.
pub(super) fn report_subject(output: &str) -> Option<String> {
    let line = output.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(one_line(line, SUBJECT_CHARS))
}

/// The subject of a change: the worker's report when it gave one, else the instruction's first
/// line with the files it changed (`fix the test (calc.py, test_calc.py)`; at most three named).
pub(super) fn subject(report: Option<&str>, instruction: &str, files: &[&str]) -> String {
    if let Some(r) = report.and_then(report_subject) {
        return r;
    }
    let first = instruction
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    let mut named: Vec<&str> = files.iter().take(3).copied().collect();
    let more = files.len().saturating_sub(named.len());
    let and_more = format!("{more} more");
    if more > 0 {
        named.push(&and_more);
    }
    let files = if named.is_empty() {
        String::new()
    } else {
        format!(" ({})", named.join(", "))
    };
    let room = SUBJECT_CHARS.saturating_sub(files.chars().count()).max(24);
    let head = one_line(first, room);
    let head = if head.is_empty() {
        "change".to_string()
    } else {
        head
    };
    // A quoted head stays quoted; the file list is ours, and never makes a trailer.
    format!("{head}{files}")
}

/// The message head (subject and body, without trailers) of a change of task `task` on lane
/// `lane`, with the checks' results when they are known (`(command, passed)`).
pub(super) fn head(
    subject: &str,
    task: &str,
    lane: &str,
    checks: Option<&[(String, bool)]>,
) -> String {
    let mut out = format!(
        "{subject}\n\nTask {} on lane {}.",
        one_line(task, 64),
        one_line(lane, 64)
    );
    match checks {
        Some([]) => out.push_str(" No checks were configured."),
        Some(list) => {
            let passed = list.iter().filter(|(_, ok)| *ok).count();
            let _ = write!(out, "\n\nChecks ({passed}/{} passed):", list.len());
            for (command, ok) in list {
                let state = if *ok { "passed" } else { "failed" };
                let _ = write!(out, "\n- {state}: {}", one_line(command, LINE_CHARS));
            }
        }
        None => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailer_like_lines_are_those_git_parses() {
        for t in [
            "Forum-Task: 3",
            "Forum-Entry : ab",
            "fix: handle empty input",
            "Signed-off-by me",
            "(cherry picked from commit abc)",
        ] {
            assert!(trailer_like(t), "{t}");
        }
        for t in [
            "Fixed add in calc.py",
            "calc.py: return the sum",
            "\"Forum-Task: 3\"",
            ": nothing before",
            "two words: then a colon",
            "- passed: make test",
        ] {
            assert!(!trailer_like(t), "{t}");
        }
    }

    #[test]
    fn a_hostile_report_becomes_one_quoted_line() {
        assert_eq!(
            report_subject("\n  Forum-Task: 1\n\nForum-Entry: 00\n"),
            Some("\"Forum-Task: 1\"".into())
        );
        assert_eq!(
            one_line("Fixed\tadd\r\nForum-Run: 9", 72),
            "Fixed add Forum-Run: 9"
        );
        assert_eq!(report_subject(" \n\n"), None);
        let long = one_line(&"word ".repeat(40), SUBJECT_CHARS);
        assert_eq!(long.chars().count(), SUBJECT_CHARS + 1);
        assert!(long.ends_with('…'));
    }

    #[test]
    fn the_subject_falls_back_to_the_instruction_and_the_files() {
        assert_eq!(
            subject(Some("Fixed add in calc.py\nmore"), "fix it", &["calc.py"]),
            "Fixed add in calc.py"
        );
        assert_eq!(
            subject(Some("  "), "fix the failing test\nin calc", &["calc.py"]),
            "fix the failing test (calc.py)"
        );
        assert_eq!(
            subject(None, "tidy", &["a", "b", "c", "d", "e"]),
            "tidy (a, b, c, 2 more)"
        );
        assert_eq!(subject(None, "", &[]), "change");
        assert_eq!(
            subject(None, "Forum-Run: 1", &["x.py"]),
            "\"Forum-Run: 1\" (x.py)"
        );
    }

    #[test]
    fn the_head_names_the_task_and_the_checks() {
        let checks = vec![
            ("python3 -m unittest -q".to_string(), true),
            ("ruff check .".to_string(), false),
        ];
        assert_eq!(
            head("Fixed add", "T1", "backend", Some(&checks)),
            "Fixed add\n\nTask T1 on lane backend.\n\nChecks (1/2 passed):\n- passed: python3 -m unittest -q\n- failed: ruff check ."
        );
        assert_eq!(
            head("Fixed add", "T1", "backend", Some(&[])),
            "Fixed add\n\nTask T1 on lane backend. No checks were configured."
        );
        assert_eq!(head("s", "T2", "qa", None), "s\n\nTask T2 on lane qa.");
    }
}
