//! Syntax colouring of the lines of a diff: syntect's default grammars (chosen by a file's
//! extension) split each line into pieces, and each piece gets one of a few CSS classes
//! (`sx-k` keywords, `sx-s` strings, `sx-c` comments, `sx-n` numbers and constants, `sx-t`
//! types, `sx-f` functions) whose colours the stylesheet gives for light and dark. No style
//! is written inline (the pages' policy forbids it), and the text of each piece is escaped by
//! the template like every other value.
//!
//! The old and new sides of a file are parsed apart (context lines feed both), starting afresh
//! at each hunk, so a removed line does not colour the added lines after it. A line longer than
//! [`MAX_LINE`], or any line after the grammar failed, is shown plain.

use std::ops::Range;
use std::sync::OnceLock;

use syntect::easy::ScopeRangeIterator;
use syntect::parsing::{ParseState, Scope, ScopeStack, SyntaxReference, SyntaxSet};

/// The longest line that is coloured (longer ones, such as minified files, show plain).
const MAX_LINE: usize = 2000;

/// One piece of a line: its CSS class (none for plain text) and its bytes in the line.
pub(super) type Piece = (Option<&'static str>, Range<usize>);

/// The grammars, loaded once (the first coloured diff pays for it).
fn grammars() -> &'static SyntaxSet {
    static SET: OnceLock<SyntaxSet> = OnceLock::new();
    SET.get_or_init(SyntaxSet::load_defaults_newlines)
}

/// Which class a scope gets: the first prefix that matches, tried from the innermost scope
/// out. Operators stay plain.
fn classes() -> &'static [(Scope, Option<&'static str>)] {
    static TABLE: OnceLock<Vec<(Scope, Option<&'static str>)>> = OnceLock::new();
    TABLE.get_or_init(|| {
        [
            ("comment", Some("sx-c")),
            ("string", Some("sx-s")),
            ("constant.character", Some("sx-s")),
            ("constant.numeric", Some("sx-n")),
            ("constant.language", Some("sx-n")),
            ("keyword.operator", None),
            ("keyword", Some("sx-k")),
            ("storage.type", Some("sx-k")),
            ("storage.modifier", Some("sx-k")),
            ("entity.name.function", Some("sx-f")),
            ("support.function", Some("sx-f")),
            ("entity.name", Some("sx-t")),
            ("support.type", Some("sx-t")),
            ("support.class", Some("sx-t")),
        ]
        .into_iter()
        .filter_map(|(s, c)| Scope::new(s).ok().map(|s| (s, c)))
        .collect()
    })
}

/// The class of text under `stack`.
fn class_of(stack: &ScopeStack) -> Option<&'static str> {
    for scope in stack.as_slice().iter().rev() {
        if let Some((_, class)) = classes().iter().find(|(p, _)| p.is_prefix_of(*scope)) {
            return *class;
        }
    }
    None
}

/// Which side of a diff a line is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    Old,
    New,
    Both,
}

/// One side's parser: its state and scope stack, or nothing once the grammar failed.
struct Parser {
    state: ParseState,
    stack: ScopeStack,
}

impl Parser {
    fn new(syntax: &SyntaxReference) -> Parser {
        Parser {
            state: ParseState::new(syntax),
            stack: ScopeStack::new(),
        }
    }

    /// The pieces of `line`, or `None` when the grammar cannot go on.
    fn pieces(&mut self, line: &str) -> Option<Vec<Piece>> {
        let fed = format!("{line}\n");
        let ops = self.state.parse_line(&fed, grammars()).ok()?;
        let mut out: Vec<Piece> = Vec::new();
        for (range, op) in ScopeRangeIterator::new(&ops, &fed) {
            self.stack.apply(op).ok()?;
            let range = range.start.min(line.len())..range.end.min(line.len());
            if range.is_empty() {
                continue;
            }
            let class = class_of(&self.stack);
            match out.last_mut() {
                Some((c, r)) if *c == class && r.end == range.start => r.end = range.end,
                _ => out.push((class, range)),
            }
        }
        Some(out)
    }
}

/// Colours the lines of one diff, file by file and hunk by hunk.
#[derive(Default)]
pub(super) struct Colourer {
    syntax: Option<&'static SyntaxReference>,
    old: Option<Parser>,
    new: Option<Parser>,
}

impl Colourer {
    /// A new file, by its path: its grammar, when one is known for its extension or name.
    pub(super) fn file(&mut self, path: &str) {
        let name = path.rsplit('/').next().unwrap_or(path);
        let set = grammars();
        self.syntax = name
            .rsplit_once('.')
            .and_then(|(_, ext)| set.find_syntax_by_extension(ext))
            .or_else(|| set.find_syntax_by_extension(name))
            .filter(|s| s.name != "Plain Text");
        self.hunk();
    }

    /// A new hunk: both sides start afresh.
    pub(super) fn hunk(&mut self) {
        self.old = self.syntax.map(Parser::new);
        self.new = self.syntax.map(Parser::new);
    }

    /// The pieces of `line` on `side`: one plain piece when it is not coloured.
    pub(super) fn line(&mut self, side: Side, line: &str) -> Vec<Piece> {
        let plain = || vec![(None, 0..line.len())];
        if line.len() > MAX_LINE || line.is_empty() {
            return if line.is_empty() { Vec::new() } else { plain() };
        }
        let old = matches!(side, Side::Old | Side::Both)
            .then(|| Self::feed(&mut self.old, line))
            .flatten();
        let new = matches!(side, Side::New | Side::Both)
            .then(|| Self::feed(&mut self.new, line))
            .flatten();
        new.or(old).unwrap_or_else(plain)
    }

    /// Feeds `line` to one side's parser; a failure turns that side plain from here on.
    fn feed(parser: &mut Option<Parser>, line: &str) -> Option<Vec<Piece>> {
        let got = parser.as_mut()?.pieces(line);
        if got.is_none() {
            *parser = None;
        }
        got
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text of each piece with its class.
    fn shown(line: &str, pieces: &[Piece]) -> Vec<(Option<&'static str>, String)> {
        pieces
            .iter()
            .map(|(c, r)| (*c, line[r.clone()].to_string()))
            .collect()
    }

    #[test]
    fn rust_keywords_strings_and_comments_get_their_classes() {
        let mut c = Colourer::default();
        c.file("src/lib.rs");
        let line = r#"pub fn add(a: u32) -> u32 { let s = "x"; a + 1 } // sum"#;
        let got = shown(line, &c.line(Side::New, line));
        for (class, text) in [
            ("sx-k", "pub"),
            ("sx-k", "fn"),
            ("sx-k", "let"),
            ("sx-s", "\"x\""),
            ("sx-n", "1"),
            ("sx-c", "// sum"),
        ] {
            assert!(
                got.iter()
                    .any(|(c, t)| *c == Some(class) && t.trim() == text),
                "{text} is not {class}: {got:?}"
            );
        }
        // The pieces cover the line exactly.
        let joined: String = got.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(joined, line);
    }

    #[test]
    fn an_unknown_file_and_a_long_line_stay_plain() {
        let mut c = Colourer::default();
        c.file("notes.unknown-ext");
        assert_eq!(c.line(Side::Both, "fn x"), vec![(None, 0..4)]);
        c.file("a.rs");
        let long = "x".repeat(MAX_LINE + 1);
        assert_eq!(c.line(Side::New, &long), vec![(None, 0..long.len())]);
        assert!(c.line(Side::New, "").is_empty());
    }

    #[test]
    fn the_old_side_does_not_colour_the_new_one() {
        let mut c = Colourer::default();
        c.file("a.rs");
        // An unclosed comment on the removed side leaves the added line as code.
        c.line(Side::Old, "/* open");
        let line = "let x = 1;";
        let got = shown(line, &c.line(Side::New, line));
        assert!(got.iter().any(|(c, t)| *c == Some("sx-k") && t == "let"));
    }
}
