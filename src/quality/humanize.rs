//! Prose humanization (forum-spec §15, `forum.prose-humanization/v1`): plain, mechanical clean-up
//! of model prose that adds no facts.
//!
//! The text is stripped; a leading "As an AI language model," (or "As a language model,",
//! "As an AI,") is dropped; eight stock phrases are replaced, case-insensitively and on word
//! boundaries, in order ("it is important to note that " → "", "in order to" → "to",
//! "utilize" → "use", "utilizing" → "using", "methodology" → "method", "provide assistance"
//! → "help", "assist" → "help", "prior to" → "before"; the replacement is lowercase whatever
//! the original case); whitespace runs become one space; the first character is uppercased;
//! a final `.` is added unless the text ends with `.`, `!` or `?`. The result is then checked
//! against a delivery profile.
//!
//! Matching follows Python's `re` with `IGNORECASE` exactly: a word boundary is between a
//! `\w` code point (letter, number or `_`) and one that is not, `\s` is Python's whitespace,
//! and besides ASCII case `İ` and `ı` match `i`, `ſ` matches `s`, and the Kelvin sign matches
//! `k`. The output text and every payload field are Forum's except the wording: the edit
//! labels, the `not_verified` note and the profile check's finding details are our own (one
//! label per edit, in Forum's order).

use std::fmt;

use super::profile::{DeliveryProfile, ProfileAssessment, UnknownProfile, assess_profile};
use super::{is_py_space, is_py_word, py_strip};
use crate::ledger::Value;

/// Schema name of a humanization payload.
pub(crate) const HUMANIZE_SCHEMA: &str = "forum.prose-humanization/v1";

/// Edit label: a model preamble was dropped.
pub const EDIT_PREAMBLE: &str = "dropped the model preamble";
/// Edit label: at least one stock phrase was replaced.
pub const EDIT_SIMPLIFIED: &str = "replaced stock phrases with plain words";
/// Edit label when neither of the above happened.
pub const EDIT_KEPT: &str = "no wording changes";
/// What the output does not claim.
pub const NOT_VERIFIED: &str = "the facts in the text were not checked";

/// The audience recorded when none is given.
pub(crate) const DEFAULT_AUDIENCE: &str = "operator";

/// Preambles dropped from the start (lowercase, with their comma; the first match wins).
pub(crate) const PREAMBLES: [&str; 3] = [
    "as an ai language model,",
    "as a language model,",
    "as an ai,",
];

/// One replacement: `phrase` on a word boundary (then either a word boundary or, for the
/// first rule, one or more whitespace characters), replaced by `replacement`.
struct Rule {
    phrase: &'static str,
    then_whitespace: bool,
    replacement: &'static str,
}

const RULES: [Rule; 8] = [
    Rule {
        phrase: "it is important to note that",
        then_whitespace: true,
        replacement: "",
    },
    Rule {
        phrase: "in order to",
        then_whitespace: false,
        replacement: "to",
    },
    Rule {
        phrase: "utilize",
        then_whitespace: false,
        replacement: "use",
    },
    Rule {
        phrase: "utilizing",
        then_whitespace: false,
        replacement: "using",
    },
    Rule {
        phrase: "methodology",
        then_whitespace: false,
        replacement: "method",
    },
    Rule {
        phrase: "provide assistance",
        then_whitespace: false,
        replacement: "help",
    },
    Rule {
        phrase: "assist",
        then_whitespace: false,
        replacement: "help",
    },
    Rule {
        phrase: "prior to",
        then_whitespace: false,
        replacement: "before",
    },
];

/// Whether text code point `c` matches pattern character `p` (a lowercase ASCII letter or a
/// space) under Python's `re.IGNORECASE`.
fn folds_to(c: char, p: char) -> bool {
    if c.is_ascii() {
        return c.to_ascii_lowercase() == p;
    }
    matches!(
        (p, c),
        ('i', '\u{130}') | ('i', '\u{131}') | ('k', '\u{212a}') | ('s', '\u{17f}')
    )
}

/// The end of a match of `rule` starting at `chars[at]`, if there is one.
fn match_at(chars: &[char], at: usize, pattern: &[char], rule: &Rule) -> Option<usize> {
    let mut end = at;
    for &p in pattern {
        if !folds_to(*chars.get(end)?, p) {
            return None;
        }
        end += 1;
    }
    // `\b` before a pattern that starts with a word character: the previous one is not.
    if at > 0 && is_py_word(chars[at - 1]) {
        return None;
    }
    if rule.then_whitespace {
        let start = end;
        while end < chars.len() && is_py_space(chars[end]) {
            end += 1;
        }
        (end > start).then_some(end)
    } else {
        // `\b` after a pattern that ends with a word character: the next one is not.
        (end == chars.len() || !is_py_word(chars[end])).then_some(end)
    }
}

/// Python's `re.sub(rule, replacement, text, flags=re.IGNORECASE)`.
fn replace_all(text: &str, rule: &Rule) -> String {
    let chars: Vec<char> = text.chars().collect();
    let pattern: Vec<char> = rule.phrase.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while at < chars.len() {
        match match_at(&chars, at, &pattern, rule) {
            Some(end) => {
                out.push_str(rule.replacement);
                at = end;
            }
            None => {
                out.push(chars[at]);
                at += 1;
            }
        }
    }
    out
}

/// Why a text cannot be humanized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HumanizeError {
    /// The text is empty or only whitespace.
    Blank,
    /// The profile name is not one of the four.
    Profile(UnknownProfile),
}

impl fmt::Display for HumanizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HumanizeError::Blank => f.write_str("the text to humanize is empty or blank"),
            HumanizeError::Profile(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for HumanizeError {}

impl From<UnknownProfile> for HumanizeError {
    fn from(e: UnknownProfile) -> HumanizeError {
        HumanizeError::Profile(e)
    }
}

/// A humanized text and its profile check.
#[derive(Debug, Clone, PartialEq)]
pub struct Humanized {
    /// Who the text is for (recorded as given; `operator` by default).
    pub(crate) audience: String,
    /// The output checked against the profile.
    pub(crate) profile_check: ProfileAssessment,
    /// Code points of the input as given (before stripping).
    pub(crate) input_chars: usize,
    /// The humanized text.
    pub(crate) output: String,
    /// What was done, as labels; [`EDIT_KEPT`] alone when nothing was.
    pub(crate) edits: Vec<&'static str>,
}

impl Humanized {
    /// The `forum.prose-humanization/v1` payload: `schema, audience, profile, profile_check,
    /// input_chars, output_chars, output, edits, not_verified`.
    pub fn payload(&self) -> Value {
        Value::object([
            ("schema".to_string(), Value::str(HUMANIZE_SCHEMA)),
            ("audience".to_string(), Value::str(&self.audience)),
            (
                "profile".to_string(),
                Value::str(self.profile_check.profile.as_str()),
            ),
            ("profile_check".to_string(), self.profile_check.payload()),
            (
                "input_chars".to_string(),
                Value::int(self.input_chars as i64),
            ),
            (
                "output_chars".to_string(),
                Value::int(self.output.chars().count() as i64),
            ),
            ("output".to_string(), Value::str(&self.output)),
            (
                "edits".to_string(),
                Value::Array(self.edits.iter().map(|e| Value::str(*e)).collect()),
            ),
            (
                "not_verified".to_string(),
                Value::Array(vec![Value::str(NOT_VERIFIED)]),
            ),
        ])
    }
}

/// Humanizes `text` for `audience` (an empty audience counts as `operator`) and checks the
/// output against `profile`. Refuses empty or blank text.
pub(crate) fn humanize(
    text: &str,
    audience: &str,
    profile: DeliveryProfile,
) -> Result<Humanized, HumanizeError> {
    let original = py_strip(text);
    if original.is_empty() {
        return Err(HumanizeError::Blank);
    }
    let mut edits = Vec::new();

    let mut output = original;
    let lowered = original.to_lowercase();
    if let Some(preamble) = PREAMBLES.iter().find(|p| lowered.starts_with(*p)) {
        // Forum slices the original by the preamble's length in code points.
        let cut = original
            .char_indices()
            .nth(preamble.chars().count())
            .map_or(original.len(), |(i, _)| i);
        output = original[cut..].trim_start_matches(is_py_space);
        edits.push(EDIT_PREAMBLE);
    }

    let mut simplified = output.to_string();
    for rule in &RULES {
        simplified = replace_all(&simplified, rule);
    }
    if simplified != output {
        edits.push(EDIT_SIMPLIFIED);
    }

    let collapsed = simplified
        .split(is_py_space)
        .filter(|piece| !piece.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let mut chars = collapsed.chars();
    let mut output: String = match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    };
    if output
        .chars()
        .next_back()
        .is_some_and(|c| !matches!(c, '.' | '!' | '?'))
    {
        output.push('.');
    }

    if edits.is_empty() {
        edits.push(EDIT_KEPT);
    }
    Ok(Humanized {
        audience: if audience.is_empty() {
            DEFAULT_AUDIENCE.to_string()
        } else {
            audience.to_string()
        },
        profile_check: assess_profile(&output, profile),
        input_chars: text.chars().count(),
        output,
        edits,
    })
}

/// Forum's `humanize_text(text, audience, profile)`: `audience` defaults to `operator`,
/// `profile` goes through [`get_profile`](super::profile::get_profile).
pub fn humanize_text(
    text: &str,
    audience: Option<&str>,
    profile: Option<&str>,
) -> Result<Humanized, HumanizeError> {
    if py_strip(text).is_empty() {
        return Err(HumanizeError::Blank);
    }
    let profile = super::profile::get_profile(profile)?;
    humanize(text, audience.unwrap_or(DEFAULT_AUDIENCE), profile)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(text: &str) -> String {
        humanize(text, "operator", DeliveryProfile::Operator)
            .unwrap()
            .output
    }

    fn edits(text: &str) -> Vec<&'static str> {
        humanize(text, "operator", DeliveryProfile::Operator)
            .unwrap()
            .edits
    }

    #[test]
    fn blank_text_is_refused() {
        for t in ["", "  ", "\n\t\u{1c}"] {
            assert_eq!(
                humanize(t, "operator", DeliveryProfile::Operator),
                Err(HumanizeError::Blank)
            );
            assert_eq!(humanize_text(t, None, None), Err(HumanizeError::Blank));
        }
        assert!(matches!(
            humanize_text("fine", None, Some("boss")),
            Err(HumanizeError::Profile(_))
        ));
    }

    #[test]
    fn preamble_needs_its_comma_and_only_the_first_is_removed() {
        assert_eq!(out("As an AI, ship it"), "Ship it.");
        assert_eq!(out("AS A LANGUAGE MODEL,   fine"), "Fine.");
        assert_eq!(out("As an AI language model, as an AI, x"), "As an AI, x.");
        // Without the comma it stays (the profile check will flag it instead).
        assert_eq!(out("As an AI I think so"), "As an AI I think so.");
        // Only the preamble: nothing is left, and no period is added to nothing.
        let h = humanize("As an AI,", "", DeliveryProfile::Operator).unwrap();
        assert_eq!(h.output, "");
        assert_eq!(h.audience, "operator");
        assert_eq!(h.edits, [EDIT_PREAMBLE]);
        assert_eq!(h.profile_check.findings[0].code.as_str(), "empty_text");
    }

    #[test]
    fn replacements_respect_word_boundaries_and_order() {
        assert_eq!(out("We UTILIZE it"), "We use it.");
        assert_eq!(out("Utilizing tools"), "Using tools.");
        assert_eq!(
            out("reutilize utilizes utilize_x"),
            "Reutilize utilizes utilize_x."
        );
        assert_eq!(
            out("assistant assists. assist!"),
            "Assistant assists. help!"
        );
        assert_eq!(out("In Order To win"), "To win.");
        assert_eq!(
            out("Prior to it, prior  to that"),
            "Before it, prior to that."
        );
        assert_eq!(
            out("It is important to note that\n\tthe fix works"),
            "The fix works."
        );
        // The first rule needs whitespace after "that".
        assert_eq!(
            out("it is important to note that."),
            "It is important to note that."
        );
        assert_eq!(edits("fine as is"), [EDIT_KEPT]);
        assert_eq!(edits("utilize"), [EDIT_SIMPLIFIED]);
    }

    #[test]
    fn python_case_folding_and_boundaries() {
        // İ, ı match i; ſ matches s; the Kelvin sign matches k.
        assert_eq!(out("utİlıze it"), "Use it.");
        assert_eq!(out("aſſiſt"), "Help.");
        // A combining mark after the word is not a word character for Python's \b.
        assert_eq!(out("utilize\u{301} it"), "Use\u{301} it.");
        // A letter of another script right after the word is.
        assert_eq!(out("utilizeé it"), "Utilizeé it.");
    }

    #[test]
    fn whitespace_capitalisation_and_final_period() {
        assert_eq!(out("  a\u{a0}\u{1c}b \u{3000} c  "), "A b c.");
        assert_eq!(out("done!"), "Done!");
        assert_eq!(out("why?"), "Why?");
        assert_eq!(out("ßtraße"), "SStraße.");
        assert_eq!(out("ǆ"), "Ǆ.");
        assert_eq!(out("日本"), "日本.");
        let h = humanize(" \tx ", "", DeliveryProfile::Operator).unwrap();
        assert_eq!((h.input_chars, h.output.as_str()), (4, "X."));
    }

    #[test]
    fn payload_shape() {
        let h = humanize_text("already fine.", Some("team"), Some("researcher")).unwrap();
        let p = h.payload();
        assert_eq!(
            p.python_dumps(),
            concat!(
                r#"{"schema": "forum.prose-humanization/v1", "audience": "team", "profile": "researcher", "#,
                r#""profile_check": {"schema": "forum.delivery-profile/v1", "profile": "researcher", "#,
                r#""words": 2, "sentences": 1, "mean_sentence_words": 2.0, "filler_ratio": 0.0, "flagged": true, "#,
                r#""findings": [{"code": "missing_evidence_language", "detail": "the researcher profile expects the answer to say where its facts come from (measured, observed, a source)"}]}, "#,
                r#""input_chars": 13, "output_chars": 13, "output": "Already fine.", "edits": ["no wording changes"], "#,
                r#""not_verified": ["the facts in the text were not checked"]}"#
            )
        );
    }
}
