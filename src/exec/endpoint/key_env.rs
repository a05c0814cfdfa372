//! Key variable names: which environment variables may hold a model endpoint's key, and which
//! look like another kind of secret and are refused.

/// Known provider key variables: they pass without a warning.
pub(crate) const KNOWN_KEY_ENVS: [&str; 16] = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "OPENROUTER_API_KEY",
    "TOGETHER_API_KEY",
    "DEEPSEEK_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "XAI_API_KEY",
    "FIREWORKS_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "COHERE_API_KEY",
    "PERPLEXITY_API_KEY",
    "CEREBRAS_API_KEY",
    "HUGGINGFACE_API_KEY",
];

/// Words that mark a variable as some other secret (a session token, a password, a signing
/// key); such variables are never sent to a model endpoint.
pub(crate) const FORBIDDEN_KEY_WORDS: [&str; 10] = [
    "SECRET",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "PRIVATE",
    "ACCESS",
    "SESSION",
    "COOKIE",
    "SIGNING",
];

/// Longest accepted variable name.
pub(crate) const MAX_KEY_ENV_LEN: usize = 128;

/// How an `api_key_env` name was accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyEnv {
    /// A known provider variable.
    Known,
    /// Accepted, with a warning to show.
    Unusual(String),
}

/// Why an `api_key_env` name is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum KeyEnvRefusal {
    /// Not a variable name (`shown`: its first 60 characters).
    #[error(
        "api_key_env {shown:?} is not an environment variable name (letters, digits and _, not starting with a digit)"
    )]
    NotAName { shown: String },
    /// The name holds `word`, so it likely names another kind of credential.
    #[error(
        "api_key_env {name} is refused: a name containing {word} looks like a credential that is not a model API key"
    )]
    OtherCredential { name: String, word: &'static str },
}

/// Checks an `api_key_env` name: it must look like a variable name, must not name another
/// kind of secret, and should be a known provider variable.
pub(crate) fn check_key_env(name: &str) -> Result<KeyEnv, KeyEnvRefusal> {
    let looks_like_var = !name.is_empty()
        && name.len() <= MAX_KEY_ENV_LEN
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !looks_like_var {
        let shown: String = name.chars().take(60).collect();
        return Err(KeyEnvRefusal::NotAName { shown });
    }
    if KNOWN_KEY_ENVS.contains(&name) {
        return Ok(KeyEnv::Known);
    }
    let upper = name.to_ascii_uppercase();
    if let Some(w) = FORBIDDEN_KEY_WORDS.iter().find(|w| upper.contains(*w)) {
        return Err(KeyEnvRefusal::OtherCredential {
            name: name.to_string(),
            word: w,
        });
    }
    Ok(KeyEnv::Unusual(format!(
        "api_key_env {name} is not a known provider key variable; its value will be sent to the endpoint as a bearer key"
    )))
}
