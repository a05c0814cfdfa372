//! The ruleset: which text counts as a secret, one rule per kind of credential, written for
//! git forum (not copied from any scanner's list).
//!
//! Each rule is a regular expression; when it has a group named `v`, only that group is the
//! secret (the `password=` before it stays readable), otherwise the whole match is. Rules whose
//! shape alone is not enough (an assignment's value, a 40-character string after `aws_secret`)
//! are confirmed by the value's Shannon entropy, so `password=changeme` or a placeholder of
//! `x`s passes.
//!
//! The patterns are the specification; the scanner does not run them. `scan.rs` checks each
//! rule by hand (faster on text dense with near-misses), and its unit tests compare it with
//! these patterns compiled by `regex`, so a change here needs the same change there.

/// How a match is confirmed before it counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Confirm {
    /// The shape is enough.
    Shape,
    /// The value needs at least `bits` of Shannon entropy per byte, `classes` kinds of
    /// character (lower, upper, digit, other) with a digit among them unless there are three,
    /// and does not look like a placeholder.
    Entropy { bits: f64, classes: usize },
}

/// One rule of the ruleset.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rule {
    /// The rule's id: what the redaction marker, the `secret_redacted` entry and policy's
    /// `allow` name.
    pub(crate) id: &'static str,
    /// What it finds, for people.
    // Unused once `pub` was narrowed to what outside code needs (issue 16 point 8).
    #[allow(dead_code)]
    pub(crate) what: &'static str,
    /// The pattern (see the module doc for the group `v`): the specification that the
    /// hand-written matcher in `scan.rs` follows; only the test oracle runs it.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) pattern: &'static str,
    /// How a match is confirmed.
    pub(crate) confirm: Confirm,
}

/// The rule id of literal values handed in at runtime (the values of the variables a runtime
/// config names as `api_key_env`). A policy cannot allow it.
pub(crate) const API_KEY_ENV: &str = "api-key-env";

/// Every built-in rule, the most specific first (at one position the first rule wins).
pub(crate) const RULES: &[Rule] = &[
    Rule {
        id: "private-key",
        what: "a private key block (-----BEGIN ... PRIVATE KEY-----)",
        // The whole block, to its END line or, cut short, to the end of the text.
        pattern: r"-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----|\z)",
        confirm: Confirm::Shape,
    },
    Rule {
        id: "aws-access-key",
        what: "an AWS access key id (AKIA..., ASIA...)",
        pattern: r"(?-u:\b)(?:AKIA|ASIA)[A-Z0-9]{16}(?-u:\b)",
        confirm: Confirm::Shape,
    },
    Rule {
        id: "aws-secret-key",
        what: "an AWS secret access key in an assignment",
        pattern: r#"(?i:aws_?secret_?access_?key|aws_?secret_?key|aws_?secret)["']?\s{0,4}[:=]{1,2}\s{0,4}["']?(?P<v>[A-Za-z0-9/+]{40})(?-u:\b)"#,
        confirm: Confirm::Entropy {
            bits: 3.5,
            classes: 2,
        },
    },
    Rule {
        id: "github-token",
        what: "a GitHub token (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_)",
        pattern: r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})(?-u:\b)",
        confirm: Confirm::Shape,
    },
    Rule {
        id: "gitlab-token",
        what: "a GitLab personal access token (glpat-)",
        pattern: r"(?-u:\b)glpat-[A-Za-z0-9_-]{20,64}",
        confirm: Confirm::Shape,
    },
    Rule {
        id: "slack-token",
        what: "a Slack token (xoxb-, xoxa-, xoxp-, xoxr-, xoxs-)",
        pattern: r"(?-u:\b)xox[baprs]-[A-Za-z0-9-]{10,255}",
        confirm: Confirm::Shape,
    },
    Rule {
        id: "jwt",
        what: "a JSON Web Token (eyJ....eyJ....)",
        pattern: r"(?-u:\b)eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
        confirm: Confirm::Shape,
    },
    Rule {
        id: "generic-secret",
        what: "a password=, secret=, token= or api_key= assignment with a high-entropy value",
        pattern: r#"(?i:password|passwd|secret|token|api_?key|access_?key|auth_?key)[A-Za-z0-9_-]{0,20}["']?\s{0,4}[:=]{1,2}\s{0,4}["']?(?P<v>[^\s"'`,;<>(){}\[\]\\]{12,256})"#,
        confirm: Confirm::Entropy {
            bits: 3.0,
            classes: 2,
        },
    },
];
