//! The intent check (forum-spec §13): how much of the request's vocabulary the answer carries.
//!
//! A lexical floor, not a semantic verdict: the salient terms of the request are compared with
//! the answer's words, exactly, with no stemming (`deploy` is not `deployed`). A low score
//! flags the answer for a closer look; it never blocks a run.

use std::collections::BTreeSet;

use super::{py_round, ratio, words};
use crate::ledger::Value;

/// Coverage below this is flagged (Forum's default intent threshold).
pub const DEFAULT_THRESHOLD: f64 = 0.5;

/// The value of the `method` field of an `intent_check` payload.
pub(crate) const METHOD: &str = "lexical_coverage";

/// Function words that never count as salient (Forum's frozen list of 87).
pub(crate) const STOPWORDS: [&str; 87] = [
    "a", "an", "the", "and", "or", "nor", "but", "so", "yet", "for", "if", "then", "than", "as",
    "of", "to", "in", "on", "at", "by", "with", "from", "into", "onto", "off", "out", "up", "down",
    "over", "per", "via", "is", "are", "was", "were", "be", "been", "being", "am", "it", "its",
    "this", "that", "these", "those", "i", "you", "we", "they", "he", "she", "him", "her", "them",
    "me", "us", "my", "your", "our", "their", "his", "hers", "ours", "yours", "do", "does", "did",
    "can", "could", "should", "would", "will", "shall", "may", "might", "must", "have", "has",
    "had", "not", "no", "yes", "all", "any", "some", "more", "most",
];

/// The salient terms of `text`: the `[^\W_]+` runs of its lowercase form that are at least two
/// code points long and not stopwords. Sorted in code-point order.
pub fn salient_terms(text: &str) -> BTreeSet<String> {
    let lower = text.to_lowercase();
    let distinct: BTreeSet<&str> = words(&lower).collect();
    distinct
        .into_iter()
        .filter(|w| w.chars().nth(1).is_some() && !STOPWORDS.contains(w))
        .map(str::to_string)
        .collect()
}

/// The share of the request's salient terms that occur in the answer, and the ones that do
/// not. A request without salient terms is fully covered: `(1.0, {})`.
pub fn coverage(request: &str, answer: &str) -> (f64, BTreeSet<String>) {
    let wanted = salient_terms(request);
    if wanted.is_empty() {
        return (1.0, BTreeSet::new());
    }
    let present = salient_terms(answer);
    let missing: BTreeSet<String> = wanted.difference(&present).cloned().collect();
    (ratio(wanted.len() - missing.len(), wanted.len()), missing)
}

/// The result of the intent check on one answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IntentCheck {
    /// Unrounded coverage in `[0, 1]`.
    pub(crate) coverage: f64,
    /// `coverage < threshold`, on the unrounded value.
    pub(crate) flagged: bool,
    /// Request terms absent from the answer, sorted.
    pub(crate) missing: Vec<String>,
}

impl IntentCheck {
    /// The witnessed `intent_check` payload:
    /// `{"method": "lexical_coverage", "coverage": round(c, 4), "flagged", "missing"}`.
    pub(crate) fn payload(&self) -> Value {
        Value::object([
            ("method".to_string(), Value::str(METHOD)),
            (
                "coverage".to_string(),
                Value::Float(py_round(self.coverage, 4)),
            ),
            ("flagged".to_string(), Value::Bool(self.flagged)),
            (
                "missing".to_string(),
                Value::Array(self.missing.iter().map(Value::str).collect()),
            ),
        ])
    }
}

/// Runs the intent check with `threshold` (Forum's default is [`DEFAULT_THRESHOLD`]).
pub(crate) fn intent_check(request: &str, answer: &str, threshold: f64) -> IntentCheck {
    let (score, missing) = coverage(request, answer);
    IntentCheck {
        coverage: score,
        flagged: score < threshold,
        missing: missing.into_iter().collect(),
    }
}

/// The `intent_check` payload for a request and its answer (see [`IntentCheck::payload`]).
pub fn intent_check_payload(request: &str, answer: &str, threshold: f64) -> Value {
    intent_check(request, answer, threshold).payload()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(text: &str) -> Vec<String> {
        salient_terms(text).into_iter().collect()
    }

    #[test]
    fn stopwords_are_distinct() {
        let set: BTreeSet<&str> = STOPWORDS.into_iter().collect();
        assert_eq!(set.len(), 87);
    }

    #[test]
    fn salient_terms_drop_stopwords_and_single_characters() {
        assert_eq!(
            terms("Build THE auth endpoint, and x/y the DB"),
            ["auth", "build", "db", "endpoint"]
        );
        assert_eq!(terms("snake_case_module"), ["case", "module", "snake"]);
        assert_eq!(terms("naïve café 日本語 é"), ["café", "naïve", "日本語"]);
        assert!(terms("").is_empty());
        assert!(terms("do it, if you can!").is_empty());
        // Lowercasing can add code points: İ becomes i + U+0307, which splits the word.
        assert_eq!(terms("İstanbul"), ["stanbul"]);
    }

    #[test]
    fn coverage_is_exact_and_empty_requests_are_covered() {
        assert_eq!(coverage("", "anything"), (1.0, BTreeSet::new()));
        assert_eq!(coverage("do it", ""), (1.0, BTreeSet::new()));
        let (score, missing) = coverage("deploy the service", "Deployed the service.");
        assert_eq!(score, 0.5);
        assert_eq!(missing.into_iter().collect::<Vec<_>>(), ["deploy"]);
        let (score, _) = coverage("one two three", "two");
        assert_eq!(score, 1.0 / 3.0);
    }

    #[test]
    fn payload_rounds_but_flags_on_the_unrounded_score() {
        let check = intent_check("alpha beta gamma", "alpha beta", 0.6667);
        // 2/3 = 0.66666… < 0.6667, although it prints as 0.6667.
        assert!(check.flagged);
        assert_eq!(
            check.payload().canonical(),
            r#"{"coverage":0.6667,"flagged":true,"method":"lexical_coverage","missing":["gamma"]}"#
        );
        assert_eq!(
            intent_check_payload("", "", DEFAULT_THRESHOLD).python_dumps(),
            r#"{"method": "lexical_coverage", "coverage": 1.0, "flagged": false, "missing": []}"#
        );
        assert_eq!(
            intent_check_payload("verify it", "", DEFAULT_THRESHOLD).python_dumps(),
            r#"{"method": "lexical_coverage", "coverage": 0.0, "flagged": true, "missing": ["verify"]}"#
        );
    }
}
