//! What a change adds, as text to scan for secrets: the lines of a file's new content that its
//! old content did not have. Content the base already had is not the worker's doing, so a key
//! that sat in the repository before the run does not block a change that leaves it alone
//! (the push gate and the hooks look at the repository's own history).
//!
//! Lines are compared as byte strings, as a set: a line that moved is not new. The added
//! lines are joined with `\n` (so a private key's block stays one text for the scanner), and
//! each keeps its line number in the new content. Bytes that are not UTF-8 are read lossily:
//! the scanner's rules are ASCII, so nothing a rule finds is lost.

use std::collections::HashSet;

/// The lines `new` adds to `old` (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Added {
    /// The added lines, joined by `\n`.
    pub(super) text: String,
    /// For each added line: where it starts in `text`, and its number (from 1) in `new`.
    starts: Vec<(usize, u64)>,
}

impl Added {
    /// The lines of `new` that `old` (none: the file is new) does not have.
    pub(super) fn of(old: Option<&[u8]>, new: &[u8]) -> Added {
        let before: HashSet<&[u8]> = old
            .map(|o| o.split(|b| *b == b'\n').collect())
            .unwrap_or_default();
        let mut text = String::new();
        let mut starts = Vec::new();
        for (i, line) in new.split(|b| *b == b'\n').enumerate() {
            if line.is_empty() || before.contains(line) {
                continue;
            }
            if !text.is_empty() {
                text.push('\n');
            }
            starts.push((text.len(), i as u64 + 1));
            text.push_str(&String::from_utf8_lossy(line));
        }
        Added { text, starts }
    }

    /// The line number (in the new content) of the byte at `at` of [`Added::text`].
    pub(super) fn line_at(&self, at: usize) -> u64 {
        let i = self.starts.partition_point(|(s, _)| *s <= at);
        self.starts
            .get(i.saturating_sub(1))
            .map(|(_, l)| *l)
            .unwrap_or(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_new_lines_are_kept_with_their_numbers() {
        let a = Added::of(Some(b"one\ntwo\nthree\n"), b"zero\none\ntwo\nNEW\nthree\n");
        assert_eq!(a.text, "zero\nNEW");
        assert_eq!(a.line_at(0), 1);
        assert_eq!(a.line_at(5), 4);
        assert_eq!(a.line_at(7), 4);
        let fresh = Added::of(None, b"a\n\nb");
        assert_eq!(fresh.text, "a\nb");
        assert_eq!(fresh.line_at(2), 3);
        let moved = Added::of(Some(b"x\ny\n"), b"y\nx\n");
        assert_eq!(moved.text, "");
        let binary = Added::of(None, b"\xff\xfeKEY=1\n");
        assert!(binary.text.ends_with("KEY=1"));
    }
}
