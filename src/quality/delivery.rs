//! The delivery floor (forum-spec §14): how an answer reads, measured without a model, and the
//! rule that decides whether a reviser's tighter answer replaces it.
//!
//! [`assess`] counts words and sentences and the share of filler words; an answer reads as
//! dense when its mean sentence is over 30 words or as padded when over 6% of its words are
//! filler. Empty or word-free text is never flagged. [`revision_accepted`] accepts a revision
//! only when it has strictly fewer words and covers at least as much of the request
//! ([`coverage`]): a floor on dropped request terms, not a proof that
//! the meaning survived.

use super::intent::coverage;
use super::{py_round, ratio, sentence_count, words};
use crate::ledger::Value;

/// Mean words per sentence above which an answer reads as dense.
pub(crate) const DEFAULT_MAX_SENTENCE_WORDS: f64 = 30.0;
/// Share of filler words above which an answer reads as padded.
pub(crate) const DEFAULT_MAX_FILLER_RATIO: f64 = 0.06;

/// Hedges and intensifiers that add length without weight (Forum's frozen list of 24).
pub(crate) const FILLER_WORDS: [&str; 24] = [
    "just",
    "really",
    "very",
    "quite",
    "basically",
    "actually",
    "literally",
    "simply",
    "essentially",
    "definitely",
    "certainly",
    "probably",
    "perhaps",
    "maybe",
    "somewhat",
    "rather",
    "fairly",
    "arguably",
    "clearly",
    "obviously",
    "honestly",
    "truly",
    "indeed",
    "generally",
];

/// Whether `word` (already lowercase) is a filler word.
pub(crate) fn is_filler(word: &str) -> bool {
    FILLER_WORDS.contains(&word)
}

/// The delivery floor's measurements of one text.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// `[^\W_]+` runs of the lowercased text.
    pub(crate) words: usize,
    /// Pieces between runs of `.`, `!`, `?` that are not blank.
    pub(crate) sentences: usize,
    /// `words / sentences` (or `words` when there is no sentence), rounded to 2 places.
    pub(crate) mean_sentence_words: f64,
    /// `fillers / words` (0.0 without words), rounded to 4 places.
    pub(crate) filler_ratio: f64,
    /// Dense or padded, judged on the unrounded values; never for text without words.
    pub(crate) flagged: bool,
}

impl Delivery {
    /// The witnessed `delivery_check` payload:
    /// `{"words", "sentences", "mean_sentence_words", "filler_ratio", "flagged"}`.
    pub fn payload(&self) -> Value {
        Value::object([
            ("words".to_string(), Value::int(self.words as i64)),
            ("sentences".to_string(), Value::int(self.sentences as i64)),
            (
                "mean_sentence_words".to_string(),
                Value::Float(self.mean_sentence_words),
            ),
            ("filler_ratio".to_string(), Value::Float(self.filler_ratio)),
            ("flagged".to_string(), Value::Bool(self.flagged)),
        ])
    }
}

/// Measures `text` with Forum's default limits (see [`assess_with`]).
pub fn assess(text: &str) -> Delivery {
    assess_with(text, DEFAULT_MAX_SENTENCE_WORDS, DEFAULT_MAX_FILLER_RATIO)
}

/// Measures `text`: flagged when it has words and its mean sentence length is over
/// `max_sentence_words` or its filler ratio over `max_filler_ratio` (unrounded values).
pub(crate) fn assess_with(text: &str, max_sentence_words: f64, max_filler_ratio: f64) -> Delivery {
    let lower = text.to_lowercase();
    let (n_words, fillers) =
        words(&lower).fold((0, 0), |(n, f), w| (n + 1, f + usize::from(is_filler(w))));
    let n_sentences = sentence_count(text);
    let mean = if n_sentences > 0 {
        ratio(n_words, n_sentences)
    } else {
        n_words as f64
    };
    let filler_ratio = if n_words > 0 {
        ratio(fillers, n_words)
    } else {
        0.0
    };
    Delivery {
        words: n_words,
        sentences: n_sentences,
        mean_sentence_words: py_round(mean, 2),
        filler_ratio: py_round(filler_ratio, 4),
        flagged: n_words > 0 && (mean > max_sentence_words || filler_ratio > max_filler_ratio),
    }
}

/// The verdict on a reviser's revision of a flagged answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Revision {
    /// `words_after < words_before` and `coverage_after >= coverage_before` (unrounded).
    pub(crate) accepted: bool,
    /// Words of the original answer.
    pub(crate) words_before: usize,
    /// Words of the revision.
    pub(crate) words_after: usize,
    /// Unrounded coverage of the request by the original answer.
    pub(crate) coverage_before: f64,
    /// Unrounded coverage of the request by the revision.
    pub(crate) coverage_after: f64,
}

impl Revision {
    /// The witnessed `revision` payload: `{"accepted", "words_before", "words_after",
    /// "coverage_before", "coverage_after"}`, coverages rounded to 4 places.
    pub(crate) fn payload(&self) -> Value {
        Value::object([
            ("accepted".to_string(), Value::Bool(self.accepted)),
            (
                "words_before".to_string(),
                Value::int(self.words_before as i64),
            ),
            (
                "words_after".to_string(),
                Value::int(self.words_after as i64),
            ),
            (
                "coverage_before".to_string(),
                Value::Float(py_round(self.coverage_before, 4)),
            ),
            (
                "coverage_after".to_string(),
                Value::Float(py_round(self.coverage_after, 4)),
            ),
        ])
    }
}

/// Decides whether `revised` replaces `original` as the answer to `request`: only if it has
/// strictly fewer words and covers the request at least as well.
pub(crate) fn revision_accepted(request: &str, original: &str, revised: &str) -> Revision {
    let words_before = assess(original).words;
    let words_after = assess(revised).words;
    let (coverage_before, _) = coverage(request, original);
    let (coverage_after, _) = coverage(request, revised);
    Revision {
        accepted: words_after < words_before && coverage_after >= coverage_before,
        words_before,
        words_after,
        coverage_before,
        coverage_after,
    }
}

/// The `revision` payload witnessed when the reviser itself failed: `{"accepted": false,
/// "reason": "reviser failed: <detail>"}`.
pub(crate) fn revision_failed_payload(detail: &str) -> Value {
    Value::object([
        ("accepted".to_string(), Value::Bool(false)),
        (
            "reason".to_string(),
            Value::str(format!("reviser failed: {detail}")),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_wordless_text_is_never_flagged() {
        for text in ["", "   ", "...", "— !? —"] {
            let d = assess(text);
            assert_eq!(d.words, 0, "{text:?}");
            assert!(!d.flagged, "{text:?}");
            assert_eq!(d.filler_ratio, 0.0);
        }
        assert_eq!(
            assess("").payload().python_dumps(),
            r#"{"words": 0, "sentences": 0, "mean_sentence_words": 0.0, "filler_ratio": 0.0, "flagged": false}"#
        );
    }

    #[test]
    fn decimal_points_split_sentences() {
        let d = assess("Pi is 3.14");
        assert_eq!((d.words, d.sentences), (4, 2));
        assert_eq!(d.mean_sentence_words, 2.0);
    }

    #[test]
    fn no_terminator_is_one_sentence_and_mean_is_a_float() {
        let d = assess("twenty five words");
        assert_eq!((d.words, d.sentences), (3, 1));
        let d = assess("a b c d e f g h i j k l m n o p q r s t u v w x y. one");
        assert_eq!(d.mean_sentence_words, 13.0);
        let d = assess(&format!("{}. {}", ["w"; 12].join(" "), ["w"; 13].join(" ")));
        assert_eq!(
            d.payload().get("mean_sentence_words"),
            Some(&Value::Float(12.5))
        );
        assert_eq!(
            d.payload().canonical(),
            r#"{"filler_ratio":0.0,"flagged":false,"mean_sentence_words":12.5,"sentences":2,"words":25}"#
        );
    }

    #[test]
    fn flags_use_unrounded_values() {
        // 31 words in one sentence: dense.
        let long = vec!["word"; 31].join(" ");
        assert!(assess(&long).flagged);
        assert!(!assess(&vec!["word"; 30].join(" ")).flagged);
        // 1 filler in 16 words = 0.0625 > 0.06; 1 in 17 = 0.0588 is not.
        let mut w = vec!["word"; 15];
        w.push("really");
        assert!(assess(&w.join(" ")).flagged);
        w.push("word");
        let d = assess(&w.join(" "));
        assert!(!d.flagged);
        assert_eq!(d.filler_ratio, 0.0588);
    }

    #[test]
    fn filler_words_are_matched_after_lowercasing() {
        let d = assess("REALLY Basically fine");
        assert_eq!(d.filler_ratio, 0.6667);
        assert!(d.flagged);
        assert_eq!(FILLER_WORDS.len(), 24);
    }

    #[test]
    fn revision_rule() {
        let req = "summarize the incident report";
        let original = "The incident report says that basically the database really failed over.";
        // Shorter and keeps both covered terms: accepted.
        let r = revision_accepted(
            req,
            original,
            "The incident report: the database failed over.",
        );
        assert!(r.accepted);
        assert_eq!(
            r.payload().python_dumps(),
            r#"{"accepted": true, "words_before": 11, "words_after": 7, "coverage_before": 0.6667, "coverage_after": 0.6667}"#
        );
        // Shorter but drops a request term: refused.
        let r = revision_accepted(req, original, "The database failed over.");
        assert!(!r.accepted);
        assert_eq!(r.coverage_after, 0.0);
        // Same length: refused, even with better coverage.
        let r = revision_accepted("alpha beta", "gamma delta", "alpha beta");
        assert!(!r.accepted);
        // Better coverage and shorter: accepted; an empty revision covers nothing.
        let r = revision_accepted("", "one two", "");
        assert!(r.accepted, "an empty request is covered by anything");
        let r = revision_accepted("deploy it", "deploy the thing now", "");
        assert!(!r.accepted);
    }

    #[test]
    fn reviser_failure_payload() {
        assert_eq!(
            revision_failed_payload("RuntimeError: boom").python_dumps(),
            r#"{"accepted": false, "reason": "reviser failed: RuntimeError: boom"}"#
        );
    }
}
