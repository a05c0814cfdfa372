//! Which models OpenAI's chat endpoint answers with structured output. Pure.
//!
//! A chat executor asks for plans and verdicts with `response_format` of type `json_schema`
//! (strict). OpenAI's own endpoint rejects that request for models without Structured Outputs,
//! and a run would learn it only at its first plan, after the request is witnessed. So an
//! executor whose chat URL is OpenAI's API (`api.openai.com`) must name a model known to support
//! it, or say that it does: `json_schema = true` in its runtime table, or `--json-schema` on the
//! command line. Any other OpenAI-compatible server (llama.cpp, vLLM, Ollama, a gateway) decides
//! for itself and is never refused here.
//!
//! The known set is the models OpenAI's Structured Outputs guide
//! (<https://platform.openai.com/docs/guides/structured-outputs>, "Supported models") and its
//! model pages list as supporting `response_format: json_schema` on Chat Completions: `gpt-4o`
//! from the 2024-08-06 snapshot on, `gpt-4o-mini`, the `gpt-4.1` family, `gpt-4.5-preview`, the
//! reasoning models `o1`, `o3`, `o3-mini` and `o4-mini`, and the `gpt-5` family. Each is
//! matched as its name alone or with a dated snapshot suffix (`gpt-4o-mini-2024-07-18`); the
//! `gpt-5` family also as `gpt-5.N` and `gpt-5-*` (`gpt-5.1`, `gpt-5-mini`). Older models
//! (`gpt-4o-2024-05-13`, `gpt-4-turbo`, `gpt-3.5-turbo`, `o1-mini`, `o1-preview`) only take
//! `json_object`, and are refused unless the override says otherwise.
//!
//! Aesop's Codex driver keeps its own set (`gpt-4o`, `gpt-4o-mini`, `gpt-4-turbo`, `gpt-4.1`,
//! `gpt-4.1-preview`). Every name in it is known here too except `gpt-4-turbo`: OpenAI's guide
//! gives that model JSON mode only, so a plan asked of it with `json_schema` would fail at the
//! run's first call; it passes with the override like any other model.

use super::{ExecutorKind, ExecutorSpec};

/// The host of OpenAI's API, the one endpoint the allowlist applies to.
pub(crate) const OPENAI_HOST: &str = "api.openai.com";

/// Model names (without a snapshot date) with Structured Outputs on Chat Completions.
const KNOWN: [&str; 12] = [
    "gpt-4o",
    "gpt-4o-mini",
    "gpt-4.1",
    "gpt-4.1-preview",
    "gpt-4.1-mini",
    "gpt-4.1-nano",
    "gpt-4.5-preview",
    "o1",
    "o3",
    "o3-mini",
    "o4-mini",
    "gpt-5",
];

/// The first `gpt-4o` snapshot with Structured Outputs; earlier ones take only `json_object`.
const GPT_4O_FIRST: &str = "2024-08-06";

/// Whether `s` is a snapshot date, `YYYY-MM-DD`.
fn is_date(s: &str) -> bool {
    s.len() == 10
        && s.bytes().enumerate().all(|(i, b)| match i {
            4 | 7 => b == b'-',
            _ => b.is_ascii_digit(),
        })
}

/// Whether OpenAI documents `model` as supporting `json_schema` structured output on Chat
/// Completions (see the module doc for the set and where it comes from).
pub(crate) fn known_capable(model: &str) -> bool {
    if model == "gpt-5" || model.starts_with("gpt-5.") || model.starts_with("gpt-5-") {
        return true;
    }
    KNOWN.iter().any(|base| {
        if model == *base {
            return true;
        }
        match model
            .strip_prefix(base)
            .and_then(|rest| rest.strip_prefix('-'))
        {
            Some(date) if is_date(date) => *base != "gpt-4o" || date >= GPT_4O_FIRST,
            _ => false,
        }
    })
}

/// Whether `url` is OpenAI's API (its host, in any case, on any port or path).
pub(crate) fn is_openai(url: &str) -> bool {
    url::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(|h| h.eq_ignore_ascii_case(OPENAI_HOST)))
        .unwrap_or(false)
}

/// Why `spec` is refused: a chat executor on OpenAI's API whose model is not known to answer
/// with `json_schema` structured output and that does not say it does. One line naming the
/// model, the rule and the override.
pub(crate) fn refusal(spec: &ExecutorSpec) -> Option<String> {
    let ExecutorKind::Chat { url, model, .. } = &spec.kind else {
        return None;
    };
    if spec.json_schema || !is_openai(url) || known_capable(model) {
        return None;
    }
    Some(format!(
        "model {model:?} is not known to support json_schema structured output, which git forum asks of OpenAI's chat endpoint for plans and verdicts: name a model that does (gpt-4o-mini, gpt-4.1, o4-mini, gpt-5, ...) or, if this one does, set json_schema = true in its runtime table or pass --json-schema"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_models_and_their_snapshots_are_known() {
        for m in [
            "gpt-4o",
            "gpt-4o-2024-08-06",
            "gpt-4o-2024-11-20",
            "gpt-4o-mini",
            "gpt-4o-mini-2024-07-18",
            "gpt-4.1",
            "gpt-4.1-preview",
            "gpt-4.1-nano-2025-04-14",
            "o1",
            "o3-mini",
            "o4-mini-2025-04-16",
            "gpt-5",
            "gpt-5-mini",
            "gpt-5.1",
            "gpt-5.2-2025-12-11",
        ] {
            assert!(known_capable(m), "{m}");
        }
    }

    #[test]
    fn aesops_set_is_known_but_for_the_one_openai_gives_json_mode_only() {
        for m in ["gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-preview"] {
            assert!(known_capable(m), "{m}");
        }
        assert!(!known_capable("gpt-4-turbo"));
    }

    #[test]
    fn older_and_unknown_models_are_not() {
        for m in [
            "gpt-4o-2024-05-13",
            "gpt-4-turbo",
            "gpt-3.5-turbo",
            "o1-mini",
            "o1-preview",
            "gpt-4o-latest",
            "gpt-4o-mini-2024",
            "gpt-50",
            "llama3",
            "",
        ] {
            assert!(!known_capable(m), "{m}");
        }
    }

    #[test]
    fn only_openais_host_is_openai() {
        assert!(is_openai("https://api.openai.com/v1/chat/completions"));
        assert!(is_openai("https://API.OpenAI.com:443/v1/chat/completions"));
        for u in [
            "http://127.0.0.1:8080/v1/chat/completions",
            "https://api.groq.com/openai/v1/chat/completions",
            "https://api.openai.com.example.net/v1/chat/completions",
            "not a url",
        ] {
            assert!(!is_openai(u), "{u}");
        }
    }
}
