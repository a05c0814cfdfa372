//! Delivery profiles (forum-spec §15): what an answer for an operator, an engineer, a
//! researcher or an executive must and must not do, checked without a model.
//!
//! [`assess_profile`] measures the text like the delivery floor but against the profile's
//! stricter limits (24 words a sentence, 4% filler, 120 words for an executive), on the
//! **rounded** values, and lists its findings in a fixed order: empty text, model preamble,
//! model disclaimer, banned opening, long sentences, filler, too many words, no action verb,
//! no technical term, no evidence language, an optimisation claim without a number, and
//! overconfident wording without evidence. The codes, their order, the flag and the measured
//! numbers are Forum's, so every profile flags the same answers for the same rules; each
//! finding's `detail` is our own wording, carrying the same data as Forum's (the opening
//! phrase, the measured value and its limit, the profile name) in Python's float spelling.

use std::fmt;

use super::{has_py_digit, py_round, py_strip, ratio, sentence_count, words};
use crate::ledger::Value;
use crate::ledger::canonical::python_float_repr;
use crate::plan::py_repr;
pub use crate::route::DeliveryProfile;

/// Schema name of a profile assessment payload.
pub(crate) const DELIVERY_PROFILE_SCHEMA: &str = "forum.delivery-profile/v1";

/// Openings that mark model boilerplate (lowercase, checked with `starts_with`).
pub(crate) const MODEL_PREAMBLES: [&str; 3] =
    ["as an ai language model", "as a language model", "as an ai"];

/// First-person model disclaimers (lowercase, checked as substrings; ASCII apostrophes).
pub(crate) const MODEL_DISCLAIMERS: [&str; 4] = [
    "i cannot",
    "i can't",
    "i do not have access",
    "i don't have access",
];

/// Openings no profile accepts; the first that matches is reported.
pub(crate) const BANNED_STARTS: [&str; 6] = [
    "it seems",
    "maybe",
    "perhaps",
    "i think",
    "as an ai",
    "as a language model",
];

/// Concrete action verbs (operator, engineer and executive answers of more than one sentence
/// need one).
pub(crate) const ACTION_VERBS: [&str; 16] = [
    "ship", "run", "fix", "build", "verify", "commit", "report", "review", "deploy", "write",
    "read", "test", "measure", "compare", "record", "keep",
];

/// Concrete technical terms (an engineer answer needs one), sorted.
pub(crate) const TECHNICAL_TERMS: [&str; 16] = [
    "api", "class", "cli", "command", "commit", "error", "file", "function", "http", "ledger",
    "mcp", "method", "module", "route", "schema", "test",
];

/// Evidence language: single words must occur as words, phrases with a space as substrings.
pub(crate) const EVIDENCE_TERMS: [&str; 11] = [
    "source",
    "citation",
    "observed",
    "measured",
    "reported",
    "unknown",
    "verified",
    "not verified",
    "from the test output",
    "test output",
    "from the ledger",
];

/// Words that claim certainty; without evidence language they are a finding.
pub(crate) const OVERCONFIDENT_WORDS: [&str; 4] =
    ["proves", "certainly", "obviously", "definitely"];

/// The word whose use asks for a measurable target (some digit in the text).
pub(crate) const OPTIMIZE_WORD: &str = "optimize";

/// A name that is not one of the four profiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownProfile {
    /// The name as given.
    pub(crate) name: String,
}

impl fmt::Display for UnknownProfile {
    /// Forum's `ValueError` message: the name in Python `repr` and the valid profiles.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let valid: Vec<&str> = DeliveryProfile::ALL.iter().map(|p| p.as_str()).collect();
        write!(
            f,
            "unknown delivery profile {}; valid profiles: {}",
            py_repr(&self.name),
            valid.join(", ")
        )
    }
}

impl std::error::Error for UnknownProfile {}

/// Forum's `get_profile`: `None` is the operator profile; otherwise the name, stripped of
/// Python whitespace and lowercased, must be one of operator, engineer, researcher,
/// executive.
pub(crate) fn get_profile(name: Option<&str>) -> Result<DeliveryProfile, UnknownProfile> {
    let Some(name) = name else {
        return Ok(DeliveryProfile::Operator);
    };
    let key = py_strip(name).to_lowercase();
    DeliveryProfile::ALL
        .into_iter()
        .find(|p| p.as_str() == key)
        .ok_or_else(|| UnknownProfile {
            name: name.to_string(),
        })
}

/// The limits and requirements of one profile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ProfileRules {
    /// Rounded mean sentence length above this is `long_sentence` (24.0 for every profile).
    pub(crate) max_mean_sentence_words: f64,
    /// Rounded filler ratio above this is `filler_ratio` (0.04 for every profile).
    pub(crate) max_filler_ratio: f64,
    /// More words than this is `too_many_words` (executive: 120).
    pub(crate) max_words: Option<usize>,
    /// Needs one of [`ACTION_VERBS`] when the text has more than one sentence.
    pub(crate) requires_action_verb: bool,
    /// Needs one of [`TECHNICAL_TERMS`].
    pub(crate) requires_technical_term: bool,
    /// Needs [`EVIDENCE_TERMS`] language.
    pub(crate) requires_evidence_language: bool,
}

impl ProfileRules {
    /// The rules of `profile`, as Forum defines them.
    pub(crate) fn of(profile: DeliveryProfile) -> ProfileRules {
        let base = ProfileRules {
            max_mean_sentence_words: 24.0,
            max_filler_ratio: 0.04,
            max_words: None,
            requires_action_verb: false,
            requires_technical_term: false,
            requires_evidence_language: false,
        };
        match profile {
            DeliveryProfile::Operator => ProfileRules {
                requires_action_verb: true,
                ..base
            },
            DeliveryProfile::Engineer => ProfileRules {
                requires_action_verb: true,
                requires_technical_term: true,
                requires_evidence_language: true,
                ..base
            },
            DeliveryProfile::Researcher => ProfileRules {
                requires_evidence_language: true,
                ..base
            },
            DeliveryProfile::Executive => ProfileRules {
                max_words: Some(120),
                requires_action_verb: true,
                ..base
            },
        }
    }
}

/// What a profile check can find, in the order findings are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum FindingCode {
    /// Nothing but whitespace.
    EmptyText,
    /// Opens with "as an AI (language model)" or "as a language model".
    ModelPreamble,
    /// Says "I cannot", "I can't" or that it has no access.
    ModelDisclaimer,
    /// Opens with a hedge from [`BANNED_STARTS`].
    BannedStart,
    /// Rounded mean sentence length over the limit.
    LongSentence,
    /// Rounded filler ratio over the limit.
    FillerRatio,
    /// More words than the profile allows.
    TooManyWords,
    /// Several sentences and no concrete action verb.
    MissingActionVerb,
    /// No concrete technical term (engineer).
    MissingRequiredTerm,
    /// No evidence language (engineer, researcher).
    MissingEvidenceLanguage,
    /// "optimize" without any digit.
    VagueOptimization,
    /// Certainty words without evidence language.
    OverconfidentWithoutEvidence,
}

impl FindingCode {
    /// The code as witnessed (`empty_text`, `model_preamble`, …).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FindingCode::EmptyText => "empty_text",
            FindingCode::ModelPreamble => "model_preamble",
            FindingCode::ModelDisclaimer => "model_disclaimer",
            FindingCode::BannedStart => "banned_start",
            FindingCode::LongSentence => "long_sentence",
            FindingCode::FillerRatio => "filler_ratio",
            FindingCode::TooManyWords => "too_many_words",
            FindingCode::MissingActionVerb => "missing_action_verb",
            FindingCode::MissingRequiredTerm => "missing_required_term",
            FindingCode::MissingEvidenceLanguage => "missing_evidence_language",
            FindingCode::VagueOptimization => "vague_optimization",
            FindingCode::OverconfidentWithoutEvidence => "overconfident_without_evidence",
        }
    }
}

/// One finding of a profile check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    /// What was found.
    pub(crate) code: FindingCode,
    /// A plain sentence saying what was found (our wording, with the numbers that matter).
    pub(crate) detail: String,
}

impl Finding {
    fn new(code: FindingCode, detail: impl Into<String>) -> Finding {
        Finding {
            code,
            detail: detail.into(),
        }
    }
}

/// The result of checking a text against a profile.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileAssessment {
    /// The profile checked against.
    pub(crate) profile: DeliveryProfile,
    /// `[^\W_]+` runs of the stripped, lowercased text.
    pub(crate) words: usize,
    /// Non-blank pieces between `.`, `!`, `?` runs of the raw text.
    pub(crate) sentences: usize,
    /// `round(words / sentences, 2)`, or `words` without sentences.
    pub(crate) mean_sentence_words: f64,
    /// `round(fillers / words, 4)`, or 0.0 without words.
    pub(crate) filler_ratio: f64,
    /// Whether there is any finding.
    pub(crate) flagged: bool,
    /// Findings in Forum's order.
    pub(crate) findings: Vec<Finding>,
}

impl ProfileAssessment {
    /// The `forum.delivery-profile/v1` payload: `schema, profile, words, sentences,
    /// mean_sentence_words, filler_ratio, flagged, findings[{code, detail}]`.
    pub fn payload(&self) -> Value {
        let findings = self
            .findings
            .iter()
            .map(|f| {
                Value::object([
                    ("code".to_string(), Value::str(f.code.as_str())),
                    ("detail".to_string(), Value::str(&f.detail)),
                ])
            })
            .collect();
        Value::object([
            ("schema".to_string(), Value::str(DELIVERY_PROFILE_SCHEMA)),
            ("profile".to_string(), Value::str(self.profile.as_str())),
            ("words".to_string(), Value::int(self.words as i64)),
            ("sentences".to_string(), Value::int(self.sentences as i64)),
            (
                "mean_sentence_words".to_string(),
                Value::Float(self.mean_sentence_words),
            ),
            ("filler_ratio".to_string(), Value::Float(self.filler_ratio)),
            ("flagged".to_string(), Value::Bool(self.flagged)),
            ("findings".to_string(), Value::Array(findings)),
        ])
    }
}

/// Whether `lowered` carries evidence language: a single-word term as one of its words, a
/// phrase as a substring.
fn has_evidence(lowered: &str, words: &[&str]) -> bool {
    EVIDENCE_TERMS.iter().any(|term| {
        if term.contains(' ') {
            lowered.contains(term)
        } else {
            words.contains(term)
        }
    })
}

/// What the opening of an answer says wrong: no text, a model's preamble or disclaimer, a
/// start no profile accepts.
fn opening_findings(lowered: &str, findings: &mut Vec<Finding>) {
    use FindingCode::*;
    if lowered.is_empty() {
        findings.push(Finding::new(EmptyText, "the answer has no text"));
    }
    if MODEL_PREAMBLES.iter().any(|p| lowered.starts_with(p)) {
        findings.push(Finding::new(
            ModelPreamble,
            "the answer opens by announcing it comes from a language model",
        ));
    }
    if MODEL_DISCLAIMERS.iter().any(|p| lowered.contains(p)) {
        findings.push(Finding::new(
            ModelDisclaimer,
            "the answer disclaims ability or access in the first person",
        ));
    }
    if let Some(start) = BANNED_STARTS.iter().find(|s| lowered.starts_with(*s)) {
        findings.push(Finding::new(
            BannedStart,
            format!(
                "the answer opens with {}, which no profile accepts",
                py_repr(start)
            ),
        ));
    }
}

/// Where the answer's measures pass the profile's limits: sentence length, filler, words.
fn measure_findings(
    profile: DeliveryProfile,
    rules: &ProfileRules,
    word_count: usize,
    mean: f64,
    filler_ratio: f64,
    findings: &mut Vec<Finding>,
) {
    use FindingCode::*;
    if word_count > 0 && mean > rules.max_mean_sentence_words {
        findings.push(Finding::new(
            LongSentence,
            format!(
                "sentences average {} words; the {} profile allows {}",
                python_float_repr(mean),
                profile.as_str(),
                python_float_repr(rules.max_mean_sentence_words)
            ),
        ));
    }
    if word_count > 0 && filler_ratio > rules.max_filler_ratio {
        findings.push(Finding::new(
            FillerRatio,
            format!(
                "{} of the words are filler; the {} profile allows {}",
                python_float_repr(filler_ratio),
                profile.as_str(),
                python_float_repr(rules.max_filler_ratio)
            ),
        ));
    }
    if let Some(max) = rules.max_words.filter(|max| word_count > *max) {
        findings.push(Finding::new(
            TooManyWords,
            format!(
                "{word_count} words; the {} profile allows {max}",
                profile.as_str()
            ),
        ));
    }
}

/// The share of `words` that are filler, rounded to four places (0 for no words).
fn filler_ratio(words: &[&str]) -> f64 {
    let fillers = words
        .iter()
        .filter(|w| super::delivery::is_filler(w))
        .count();
    if words.is_empty() {
        0.0
    } else {
        py_round(ratio(fillers, words.len()), 4)
    }
}

/// Checks `text` against `profile` (forum-spec §15).
pub fn assess_profile(text: &str, profile: DeliveryProfile) -> ProfileAssessment {
    use FindingCode::*;

    let rules = ProfileRules::of(profile);
    let lowered = py_strip(text).to_lowercase();
    let words: Vec<&str> = words(&lowered).collect();
    let word_count = words.len();
    let sentence_count = sentence_count(text);
    let mean = if sentence_count > 0 {
        py_round(ratio(word_count, sentence_count), 2)
    } else {
        word_count as f64
    };
    let filler_ratio = filler_ratio(&words);
    let evidence = has_evidence(&lowered, &words);
    let any_word = |list: &[&str]| words.iter().any(|w| list.contains(w));

    let mut findings = Vec::new();
    opening_findings(&lowered, &mut findings);
    measure_findings(
        profile,
        &rules,
        word_count,
        mean,
        filler_ratio,
        &mut findings,
    );
    if rules.requires_action_verb && sentence_count > 1 && !any_word(&ACTION_VERBS) {
        findings.push(Finding::new(
            MissingActionVerb,
            "the answer names no concrete action such as ship, run, fix or verify",
        ));
    }
    if rules.requires_technical_term && !any_word(&TECHNICAL_TERMS) {
        findings.push(Finding::new(
            MissingRequiredTerm,
            format!(
                "the {} profile expects a concrete technical term such as API, file, command or test",
                profile.as_str()
            ),
        ));
    }
    if rules.requires_evidence_language && !evidence {
        findings.push(Finding::new(
            MissingEvidenceLanguage,
            format!(
                "the {} profile expects the answer to say where its facts come from \
                 (measured, observed, a source)",
                profile.as_str()
            ),
        ));
    }
    if words.contains(&OPTIMIZE_WORD) && !has_py_digit(&lowered) {
        findings.push(Finding::new(
            VagueOptimization,
            "the answer claims to optimize without a number to check it against",
        ));
    }
    if any_word(&OVERCONFIDENT_WORDS) && !evidence {
        findings.push(Finding::new(
            OverconfidentWithoutEvidence,
            "the answer asserts certainty without saying what it rests on",
        ));
    }

    ProfileAssessment {
        profile,
        words: word_count,
        sentences: sentence_count,
        mean_sentence_words: mean,
        filler_ratio,
        flagged: !findings.is_empty(),
        findings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(text: &str, profile: DeliveryProfile) -> Vec<&'static str> {
        assess_profile(text, profile)
            .findings
            .iter()
            .map(|f| f.code.as_str())
            .collect()
    }

    #[test]
    fn get_profile_parses_like_forum() {
        assert_eq!(get_profile(None), Ok(DeliveryProfile::Operator));
        assert_eq!(
            get_profile(Some("  Engineer\u{1c}")),
            Ok(DeliveryProfile::Engineer)
        );
        assert_eq!(
            get_profile(Some("EXECUTIVE")),
            Ok(DeliveryProfile::Executive)
        );
        let e = get_profile(Some(" boss ")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown delivery profile ' boss '; valid profiles: operator, engineer, researcher, executive"
        );
        let e = get_profile(Some("it's")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("unknown delivery profile \"it's\";")
        );
        assert!(get_profile(Some("")).is_err());
    }

    #[test]
    fn empty_text() {
        let a = assess_profile("", DeliveryProfile::Engineer);
        assert_eq!(
            a.payload().python_dumps(),
            concat!(
                r#"{"schema": "forum.delivery-profile/v1", "profile": "engineer", "words": 0, "#,
                r#""sentences": 0, "mean_sentence_words": 0.0, "filler_ratio": 0.0, "#,
                r#""flagged": true, "findings": [{"code": "empty_text", "detail": "the answer has no text"}, "#,
                r#"{"code": "missing_required_term", "detail": "the engineer profile expects a concrete technical term such as API, file, command or test"}, "#,
                r#"{"code": "missing_evidence_language", "detail": "the engineer profile expects the answer to say where its facts come from (measured, observed, a source)"}]}"#
            )
        );
        assert_eq!(codes("  \n ", DeliveryProfile::Operator), ["empty_text"]);
    }

    #[test]
    fn model_disclaimer_and_banned_starts() {
        assert_eq!(
            codes(
                "Maybe. I can't say. I don't have access.",
                DeliveryProfile::Operator
            ),
            [
                "model_disclaimer",
                "banned_start",
                "filler_ratio",
                "missing_action_verb"
            ]
        );
        let a = assess_profile("As a language model I cannot", DeliveryProfile::Researcher);
        let details: Vec<&str> = a.findings.iter().map(|f| f.detail.as_str()).collect();
        assert_eq!(
            details,
            [
                "the answer opens by announcing it comes from a language model",
                "the answer disclaims ability or access in the first person",
                "the answer opens with 'as a language model', which no profile accepts",
                "the researcher profile expects the answer to say where its facts come from \
                 (measured, observed, a source)",
            ]
        );
        // A typographic apostrophe is not a disclaimer.
        assert!(codes("I can\u{2019}t.", DeliveryProfile::Operator).is_empty());
    }

    #[test]
    fn thresholds_compare_rounded_values() {
        // 97 words in 4 sentences: 24.25 > 24.0.
        let sentence = |n: usize| format!("{}.", vec!["word"; n].join(" "));
        let text = [sentence(25), sentence(24), sentence(24), sentence(24)].join(" ");
        let a = assess_profile(&text, DeliveryProfile::Researcher);
        assert_eq!(a.mean_sentence_words, 24.25);
        assert_eq!(
            a.findings[0].detail,
            "sentences average 24.25 words; the researcher profile allows 24.0"
        );
        // 6001 words in 250 sentences is 24.004, which rounds to 24.0: not long.
        let mut parts = vec![sentence(24); 249];
        parts.push(sentence(25));
        let a = assess_profile(&parts.join(" "), DeliveryProfile::Researcher);
        assert_eq!(
            (a.words, a.sentences, a.mean_sentence_words),
            (6001, 250, 24.0)
        );
        assert!(
            a.findings
                .iter()
                .all(|f| f.code != FindingCode::LongSentence)
        );
        // Filler: 1 in 25 = 0.04 is not over; 1 in 24 = 0.0417 is.
        let mut w = vec!["word"; 24];
        w.push("just");
        assert!(!codes(&w.join(" "), DeliveryProfile::Operator).contains(&"filler_ratio"));
        w.pop();
        w.pop();
        w.push("just");
        let a = assess_profile(&w.join(" "), DeliveryProfile::Operator);
        assert_eq!(
            a.findings[0].detail,
            "0.0417 of the words are filler; the operator profile allows 0.04"
        );
    }

    #[test]
    fn executive_word_limit() {
        let text = vec!["word"; 121].join(" ");
        let a = assess_profile(&text, DeliveryProfile::Executive);
        assert_eq!(
            a.findings.last().unwrap().detail,
            "121 words; the executive profile allows 120"
        );
        assert!(
            assess_profile(&vec!["word"; 120].join(" "), DeliveryProfile::Executive)
                .findings
                .iter()
                .all(|f| f.code != FindingCode::TooManyWords)
        );
        assert!(!codes(&text, DeliveryProfile::Operator).contains(&"too_many_words"));
    }

    #[test]
    fn action_verbs_only_matter_for_several_sentences() {
        assert!(codes("All good", DeliveryProfile::Operator).is_empty());
        assert_eq!(
            codes("All good. Done.", DeliveryProfile::Operator),
            ["missing_action_verb"]
        );
        assert!(codes("All good. Ship it.", DeliveryProfile::Operator).is_empty());
        // Researchers need no action verb.
        assert_eq!(
            codes("All good. Done.", DeliveryProfile::Researcher),
            ["missing_evidence_language"]
        );
    }

    #[test]
    fn evidence_words_must_be_whole_words_and_phrases_substrings() {
        // "sources" is not "source"; "unverified" is not "verified".
        assert_eq!(
            codes("See sources, unverified.", DeliveryProfile::Researcher),
            ["missing_evidence_language"]
        );
        assert!(codes("Per the source.", DeliveryProfile::Researcher).is_empty());
        // A phrase matches inside longer text, even across word edges.
        assert!(codes("xfrom the ledgerx", DeliveryProfile::Researcher).is_empty());
        assert!(codes("Seen in the test output", DeliveryProfile::Researcher).is_empty());
    }

    #[test]
    fn vague_optimization_counts_unicode_digits() {
        let op = DeliveryProfile::Operator;
        assert_eq!(codes("We optimize it", op), ["vague_optimization"]);
        assert!(codes("We optimize it to 5 ms", op).is_empty());
        // Superscripts, other scripts' digits and circled digits are digits to Python.
        assert!(codes("We optimize it by 10²", op).is_empty());
        assert!(codes("We optimize it to ٣ ms", op).is_empty());
        assert!(codes("We optimize step ①", op).is_empty());
        // Fractions and roman numerals are numbers but not digits.
        assert_eq!(codes("We optimize by ½", op), ["vague_optimization"]);
        assert_eq!(codes("We optimize to Ⅻ", op), ["vague_optimization"]);
        // "optimized" is not the word "optimize"; "optimize_all" holds it ("_" splits words).
        assert!(codes("We optimized it", op).is_empty());
        assert_eq!(codes("run optimize_all", op), ["vague_optimization"]);
    }

    #[test]
    fn overconfidence_needs_evidence() {
        let op = DeliveryProfile::Operator;
        assert_eq!(
            codes("This proves it", op),
            ["overconfident_without_evidence"]
        );
        assert!(codes("This proves it, verified", op).is_empty());
        // "certainly" is also a filler word.
        assert_eq!(
            codes("Certainly", op),
            ["filler_ratio", "overconfident_without_evidence"]
        );
    }

    #[test]
    fn details_are_plain_and_our_own() {
        let a = assess_profile(
            "We optimize the flow. It certainly holds.",
            DeliveryProfile::Operator,
        );
        let found: Vec<(&str, &str)> = a
            .findings
            .iter()
            .map(|f| (f.code.as_str(), f.detail.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                (
                    "filler_ratio",
                    "0.1429 of the words are filler; the operator profile allows 0.04"
                ),
                (
                    "missing_action_verb",
                    "the answer names no concrete action such as ship, run, fix or verify"
                ),
                (
                    "vague_optimization",
                    "the answer claims to optimize without a number to check it against"
                ),
                (
                    "overconfident_without_evidence",
                    "the answer asserts certainty without saying what it rests on"
                ),
            ]
        );
    }

    #[test]
    fn technical_terms_are_sorted_and_distinct() {
        let mut sorted = TECHNICAL_TERMS;
        sorted.sort_unstable();
        assert_eq!(sorted, TECHNICAL_TERMS);
        let mut a = ACTION_VERBS.to_vec();
        a.sort_unstable();
        a.dedup();
        assert_eq!(a.len(), 16);
    }
}
