//! Why a secrets setting does not read: a fingerprint, a mode, or the `[secrets]` table of
//! `.forum/policy.toml`. Each message names the key and what it takes.

use super::{API_KEY_ENV, RULES};

/// A text that is not a secret fingerprint (the text given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a secret fingerprint (16 hex digits, as a finding names it)")]
pub struct FingerprintError(pub(crate) String);

/// A `[secrets]` table, or a secrets mode given elsewhere, that does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SecretsConfigError {
    #[error("unknown secrets mode {0:?}; use redact, block or allow")]
    UnknownMode(String),
    /// An item of `allow` is not a string (its TOML type).
    #[error("[secrets] allow must list rule ids as strings, found {0}")]
    AllowNotString(&'static str),
    /// An item of `allow_fingerprints` is not a string (its TOML type).
    #[error("[secrets] allow_fingerprints must list fingerprints as strings, found {0}")]
    FingerprintNotString(&'static str),
    #[error("[secrets] allow_fingerprints: {0}")]
    Fingerprint(#[source] FingerprintError),
    #[error(
        "[secrets] {key} has the wrong type ({found}): mode is \"redact\", \"block\" or \"allow\", allow a list of rule ids, allow_fingerprints a list of fingerprints"
    )]
    WrongType { key: String, found: &'static str },
    #[error("[secrets] has no key {0:?} (expected mode, allow, allow_fingerprints)")]
    UnknownKey(String),
    #[error(
        "[secrets] allow cannot hold {API_KEY_ENV:?}: the values of api_key_env variables are always redacted"
    )]
    RuntimeKeyAllowed,
    #[error("[secrets] allow names no rule {0:?} (rules: {ids})", ids = rule_ids())]
    UnknownRule(String),
}

/// The ids of the built-in rules, for the message of an unknown one.
fn rule_ids() -> String {
    let ids: Vec<&str> = RULES.iter().map(|r| r.id).collect();
    ids.join(", ")
}

/// The message as text, for the callers whose errors are still text.
impl From<SecretsConfigError> for String {
    fn from(e: SecretsConfigError) -> String {
        e.to_string()
    }
}

impl From<FingerprintError> for String {
    fn from(e: FingerprintError) -> String {
        e.to_string()
    }
}
