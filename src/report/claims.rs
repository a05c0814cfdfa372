//! Whether the model-written part of a `--work` run's answer claims a change the record does
//! not hold. The rule is simple and exact, so a person can predict it:
//!
//! * the summary is cut into sentences (at line ends and at `.`, `!`, `?`, `;` followed by a
//!   space); a sentence with a negation (`no`, `not`, `nothing`, `none`, `never`, or a word
//!   ending in `n't`) claims nothing;
//! * a sentence claims a change when it has a change verb ([`VERBS`], whole words, any case);
//! * when no change is on the run branch, every such sentence is a claim the record does not
//!   hold;
//! * when some are, a file name in such a sentence (a word with a `/`, or a `stem.ext` whose
//!   extension is letters and digits and holds a letter) that no delivered change touched is
//!   one (a delivered path matches it whole or by its last components).
//!
//! Pure: the caller hands in the text and what the record says was delivered.

/// The words that claim a change.
pub(crate) const VERBS: &[&str] = &[
    "fixed",
    "changed",
    "updated",
    "modified",
    "edited",
    "implemented",
    "added",
    "removed",
    "deleted",
    "created",
    "wrote",
    "rewrote",
    "refactored",
    "renamed",
    "corrected",
    "resolved",
    "patched",
    "replaced",
];

const NEGATIONS: &[&str] = &["no", "not", "nothing", "none", "never"];

fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut start = 0;
        let b = line.as_bytes();
        for i in 0..b.len() {
            let end = matches!(b[i], b'.' | b'!' | b'?' | b';')
                && b.get(i + 1).is_none_or(|c| c.is_ascii_whitespace());
            if end {
                out.push(&line[start..=i]);
                start = i + 1;
            }
        }
        if start < line.len() {
            out.push(&line[start..]);
        }
    }
    out
}

/// The words of a sentence, trimmed of the punctuation around them (quotes, brackets,
/// backticks, commas, a final stop).
fn words(sentence: &str) -> Vec<&str> {
    sentence
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| {
                matches!(
                    c,
                    '`' | '\''
                        | '"'
                        | '('
                        | ')'
                        | '['
                        | ']'
                        | '{'
                        | '}'
                        | ','
                        | ':'
                        | ';'
                        | '!'
                        | '?'
                        | '*'
                )
            })
            .trim_end_matches('.')
        })
        .filter(|w| !w.is_empty())
        .collect()
}

fn negated(words: &[&str]) -> bool {
    words.iter().any(|w| {
        let l = w.to_ascii_lowercase();
        NEGATIONS.contains(&l.as_str()) || l.ends_with("n't")
    })
}

fn verb(words: &[&str]) -> Option<String> {
    words
        .iter()
        .map(|w| w.to_ascii_lowercase())
        .find(|w| VERBS.contains(&w.as_str()))
}

/// Whether `w` reads as a file name.
fn file_name(w: &str) -> bool {
    if w.contains("://") {
        return false;
    }
    if w.contains('/') {
        return w.chars().any(|c| c.is_ascii_alphabetic());
    }
    match w.rsplit_once('.') {
        Some((stem, ext)) => {
            !stem.is_empty()
                && !ext.is_empty()
                && ext.len() <= 8
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
                && ext.chars().any(|c| c.is_ascii_alphabetic())
        }
        None => false,
    }
}

/// Whether a delivered change touched the file the summary names `w`.
fn touched(w: &str, files: &[String]) -> bool {
    let w = w.trim_start_matches("./");
    files
        .iter()
        .any(|f| f == w || f.ends_with(&format!("/{w}")))
}

/// The claims of `summary` the record does not hold, each as one line, given whether a
/// change is on the run branch (`delivered`) and the files the delivered changes touched.
pub(crate) fn unsupported(summary: &str, delivered: bool, files: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in sentences(summary) {
        let w = words(s);
        if negated(&w) {
            continue;
        }
        let Some(v) = verb(&w) else { continue };
        let found = if !delivered {
            vec![format!("{v:?}: no change of this run is on its run branch")]
        } else {
            w.iter()
                .filter(|x| file_name(x) && !touched(x, files))
                .map(|x| format!("{x:?}: no delivered change touched it"))
                .collect()
        };
        for f in found {
            if !out.contains(&f) {
                out.push(f);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_claimed_with_nothing_delivered_is_flagged_and_a_plain_no_is_not() {
        assert_eq!(
            unsupported(
                "Fixed add in calc.py. The team has successfully completed the validation.",
                false,
                &[]
            ),
            ["\"fixed\": no change of this run is on its run branch"]
        );
        assert!(
            unsupported(
                "No file was changed; the worker wasn't able to edit.",
                false,
                &[]
            )
            .is_empty()
        );
        assert!(unsupported("The tests fail because add subtracts.", false, &[]).is_empty());
    }

    #[test]
    fn a_file_no_delivered_change_touched_is_flagged() {
        let files = vec!["src/calc.py".to_string()];
        assert!(unsupported("Fixed `calc.py` (add now adds).", true, &files).is_empty());
        assert_eq!(
            unsupported(
                "Fixed calc.py and updated README.md.\nSee https://x.io/a.html",
                true,
                &files
            ),
            ["\"README.md\": no delivered change touched it"]
        );
        // A file named without a change verb is only mentioned, and numbers are not files.
        assert!(
            unsupported(
                "The failure was in test_calc.py, version 1.5.",
                true,
                &files
            )
            .is_empty()
        );
    }
}
