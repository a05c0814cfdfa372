//! The deterministic quality floors (forum-spec §13, §14, §15): checks on a delivered answer
//! that need no model and always give the same result for the same text.
//!
//! * [`intent`]: lexical coverage of the request's salient terms by the answer
//!   (`intent_check`).
//! * [`delivery`]: the concision floor (`delivery_check`) and the acceptance rule for a
//!   reviser's tightened answer (`revision`).
//! * [`profile`]: the delivery profiles (operator, engineer, researcher, executive) and their
//!   findings (`forum.delivery-profile/v1`).
//! * [`humanize`](mod@humanize): the prose clean-up (`forum.prose-humanization/v1`).
//!
//! Every payload is built as a [`Value`](crate::ledger::Value) with Forum's key order and
//! Python's float spelling. The intent and delivery payloads are byte-identical to Forum's,
//! so witnessing one in the ledger hashes exactly as Forum does. The profile and humanize
//! payloads keep Forum's keys, codes, order, flags, numbers and output text, but their
//! wording (finding details, edit labels, the `not_verified` note) is our own.
//! The text rules reproduce Python's: words are `[^\W_]+` runs (letters and numbers in any
//! script), `str.strip()` and `\s` use Python's whitespace set, and `round(x, n)` rounds the
//! exact binary value half to even. Character classes follow the Unicode tables of the
//! `regex` crate and of Rust's standard library; Forum's reference run used Unicode 14.0, so
//! code points assigned after 14.0 may classify differently.
//!
//! Everything here is pure: no I/O, no clock.

pub mod delivery;
pub mod humanize;
pub mod intent;
pub mod profile;

pub(crate) use delivery::{assess, revision_accepted};
pub(crate) use humanize::{HumanizeError, humanize};
pub(crate) use intent::intent_check;

use std::sync::LazyLock;

use regex_syntax::hir::{Class, HirKind};

/// The code points of the one-class pattern `class`, as the regex crate reads it: sorted,
/// disjoint ranges. A class is looked up by binary search instead of through a compiled
/// regex: compiling `\p{L}` into an automaton cost most of a millisecond at the end of every
/// run, where the ranges take microseconds.
fn class_ranges(class: &str) -> Vec<(char, char)> {
    let hir = regex_syntax::parse(class).expect("a valid class");
    match hir.kind() {
        HirKind::Class(Class::Unicode(c)) => {
            c.ranges().iter().map(|r| (r.start(), r.end())).collect()
        }
        other => panic!("{class} is not a Unicode class: {other:?}"),
    }
}

/// Whether `c` is in `ranges` (sorted, disjoint).
fn in_ranges(ranges: &[(char, char)], c: char) -> bool {
    ranges
        .binary_search_by(|&(lo, hi)| {
            if hi < c {
                std::cmp::Ordering::Less
            } else if lo > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// Letters (L*) and numbers (N*): what Python's `[^\W_]` matches in a `str`.
const WORD_CLASS: &str = r"[\p{L}\p{N}]";

/// The code points for which Python's `str.isdigit()` is true: decimal digits (Nd) plus the
/// Numeric_Type=Digit characters (superscripts, subscripts, circled and parenthesised digits
/// and the like; the list is Unicode 14.0's, as Forum's reference run used).
const DIGIT_CLASS: &str = concat!(
    r"[\p{Nd}\x{B2}\x{B3}\x{B9}\x{1369}-\x{1371}\x{19DA}\x{2070}\x{2074}-\x{2079}",
    r"\x{2080}-\x{2089}\x{2460}-\x{2468}\x{2474}-\x{247C}\x{2488}-\x{2490}\x{24EA}",
    r"\x{24F5}-\x{24FD}\x{24FF}\x{2776}-\x{277E}\x{2780}-\x{2788}\x{278A}-\x{2792}",
    r"\x{10A40}-\x{10A43}\x{10E60}-\x{10E68}\x{11052}-\x{1105A}\x{1F100}-\x{1F10A}]"
);

static WORD: LazyLock<Vec<(char, char)>> = LazyLock::new(|| class_ranges(WORD_CLASS));
static DIGIT: LazyLock<Vec<(char, char)>> = LazyLock::new(|| class_ranges(DIGIT_CLASS));

/// Whether `c` is a letter or a number (`[^\W_]`); ASCII is answered without the table (its
/// letters and digits are exactly the ASCII code points of L* and N*).
fn is_word_part(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_alphanumeric()
    } else {
        in_ranges(&WORD, c)
    }
}

/// Python's `str.isspace()` for one code point: Unicode White_Space plus U+001C..U+001F.
pub(crate) fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.strip()` with no argument.
pub(crate) fn py_strip(s: &str) -> &str {
    s.trim_matches(is_py_space)
}

/// Python's `\w` for one code point in a `str` pattern (`str.isalnum()` or `_`).
pub(crate) fn is_py_word(c: char) -> bool {
    c == '_' || is_word_part(c)
}

/// Whether any code point of `s` is a digit for Python's `str.isdigit()`.
pub(crate) fn has_py_digit(s: &str) -> bool {
    s.chars().any(|c| {
        if c.is_ascii() {
            c.is_ascii_digit()
        } else {
            in_ranges(&DIGIT, c)
        }
    })
}

/// The `[^\W_]+` runs of `s`, in order (callers lowercase first where Forum does).
pub(crate) fn words(s: &str) -> impl Iterator<Item = &str> {
    s.split(|c: char| !is_word_part(c))
        .filter(|w| !w.is_empty())
}

/// Python's `len([s for s in re.split(r"[.!?]+", text) if s.strip()])`: pieces between runs
/// of `.`, `!` and `?` that hold more than whitespace. A decimal point splits too (`3.14` is
/// two sentences), as it does in Forum.
pub(crate) fn sentence_count(text: &str) -> usize {
    text.split(['.', '!', '?'])
        .filter(|piece| !py_strip(piece).is_empty())
        .count()
}

/// Python's `round(x, digits)` for a finite `x`: the exact binary value rounded half to even
/// at `digits` decimals, read back as the nearest double.
pub(crate) fn py_round(x: f64, digits: usize) -> f64 {
    if !x.is_finite() {
        return x;
    }
    format!("{x:.digits$}")
        .parse()
        .expect("fixed notation of a finite double parses")
}

/// `a / b` as Python computes it for two ints (one correctly rounded division).
pub(crate) fn ratio(a: usize, b: usize) -> f64 {
    a as f64 / b as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_letter_and_number_runs_in_any_script() {
        let w: Vec<&str> = words("naïve café — 日本語 snake_case x²  e\u{301}t\u{e9} ٣").collect();
        // U+0301 (a combining mark) is not a letter: Python splits there too.
        assert_eq!(
            w,
            [
                "naïve",
                "café",
                "日本語",
                "snake",
                "case",
                "x²",
                "e",
                "té",
                "٣"
            ]
        );
        assert_eq!(words("").count(), 0);
        assert_eq!(words("__ -- ..").count(), 0);
    }

    #[test]
    fn python_word_chars() {
        for c in ['a', 'Z', '_', '7', '²', 'é', '日', 'ſ', 'İ', '\u{212a}'] {
            assert!(is_py_word(c), "{c:?}");
        }
        for c in [' ', '-', '\u{301}', '\u{93e}', '\u{203f}', '.', '\u{200d}'] {
            assert!(!is_py_word(c), "{c:?}");
        }
    }

    #[test]
    fn the_class_lookups_agree_with_the_regexes_they_replace_on_every_code_point() {
        let word = regex::Regex::new(r"^[\p{L}\p{N}_]$").unwrap();
        let runs = regex::Regex::new(&format!("{WORD_CLASS}+")).unwrap();
        let digit = regex::Regex::new(&format!("^{DIGIT_CLASS}$")).unwrap();
        let mut text = String::new();
        let mut buf = [0u8; 4];
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            let one = c.encode_utf8(&mut buf);
            assert_eq!(is_py_word(c), word.is_match(one), "{c:?}");
            assert_eq!(has_py_digit(one), digit.is_match(one), "{c:?}");
            if (c as u32) < 0x3000 || (c as u32).is_multiple_of(7) {
                text.push(c);
            }
        }
        let expected: Vec<&str> = runs.find_iter(&text).map(|m| m.as_str()).collect();
        assert_eq!(words(&text).collect::<Vec<_>>(), expected);
        assert!(expected.len() > 500, "{} runs", expected.len());
    }

    #[test]
    fn sentences_split_on_runs_of_terminators() {
        assert_eq!(sentence_count(""), 0);
        assert_eq!(sentence_count("   "), 0);
        assert_eq!(sentence_count("..."), 0);
        assert_eq!(sentence_count("no terminator"), 1);
        assert_eq!(sentence_count("Pi is 3.14"), 2);
        assert_eq!(sentence_count("Done... Really?! Yes."), 3);
        // Pieces of Python whitespace only (U+001C is whitespace for Python) do not count.
        assert_eq!(sentence_count("a. \u{1c}\u{a0} .b"), 2);
    }

    #[test]
    fn python_strip_and_space() {
        assert_eq!(py_strip("\u{1c}\u{1f} x \u{3000}\u{85}"), "x");
        assert!(is_py_space('\u{1d}'));
        assert!(!is_py_space('\u{200b}'));
        assert!(!is_py_space('\u{180e}'));
    }

    #[test]
    fn python_digits() {
        for s in ["1", "٣", "²", "①", "\u{1f100}", "\u{1369}"] {
            assert!(has_py_digit(s), "{s:?}");
        }
        // Numbers that are not digits for str.isdigit(): fractions, roman numerals, CJK.
        for s in ["", "½", "Ⅻ", "一", "x", "⑩"] {
            assert!(!has_py_digit(s), "{s:?}");
        }
    }

    #[test]
    fn python_round() {
        assert_eq!(py_round(2.0 / 3.0, 4), 0.6667);
        assert_eq!(py_round(1.0 / 6.0, 4), 0.1667);
        assert_eq!(py_round(17.0 / 3.0, 2), 5.67);
        assert_eq!(py_round(0.125, 2), 0.12);
        assert_eq!(py_round(0.375, 2), 0.38);
        // 2.675 is stored as 2.67499999...: Python's round gives 2.67.
        assert_eq!(py_round(2.675, 2), 2.67);
        assert_eq!(py_round(12.5, 2), 12.5);
    }
}
