//! Context preflight (forum-spec §10, Forum's `forum.context-preflight/v1`): how much of the
//! request context a run would admit under a context budget, given the context a provider
//! gave. One builder for `git forum context preflight`, `POST /context/preflight` and MCP.
//! In a work tree the repository's map is part of the context, built by the run's own
//! provider ([`with_repo`]), so the figures are the ones the run then witnesses.

use std::path::Path;

use serde_json::Value as J;

use crate::context::{self, ContextBudget, Meter, Source};
use crate::ledger::{MemoryStorage, Value};
use crate::run::ContextProvider;
use crate::surface::run::repo_context::{self, RepoContext};

/// The preflight payload's schema name.
pub(crate) const PREFLIGHT_SCHEMA: &str = "forum.context-preflight/v1";

/// The schema of a structured context envelope whose summary the preflight adds.
pub(crate) const ENVELOPE_SCHEMA: &str = "project-telos.context-envelope/v1";

/// What the context source gave: text, or why it failed.
pub(crate) enum Got {
    /// The context text (empty: none).
    Text(String),
    /// The provider failed.
    Failed {
        /// A stable code (`exit`, `timeout`, `not_utf8`, ...).
        code: String,
        /// What happened.
        message: String,
    },
}

/// How big the request is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RequestSize {
    pub(crate) bytes: u64,
    /// Approximate tokens (ceil(bytes / bytes_per_token)).
    pub(crate) tokens: u64,
}

/// What the context would become before planning.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ContextFigures {
    /// Where it came from (`command`, `capsule`, `none`).
    pub(crate) source: String,
    /// `retained`, `trimmed`, `omitted` or `none`.
    pub(crate) action: String,
    /// Why (`no_budget`, `within_budget`, `no_context`, `provider_failed`, ...).
    pub(crate) reason: String,
    pub(crate) original_tokens: u64,
    pub(crate) admitted_tokens: u64,
    /// The provider's failure code, when it failed.
    pub(crate) error: Option<String>,
    /// The summary of a structured context envelope, when the context was one.
    pub structured: Option<EnvelopeSummary>,
    /// The tokens the repository's part (its map) holds before the budget, when the
    /// repository is part of the context (not in Forum's payload, which has no such part).
    pub repo_tokens: Option<u64>,
}

/// The summary of a `project-telos.context-envelope/v1` context. The figures it copies from the
/// envelope are kept as the envelope wrote them (any JSON value, or null when absent).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EnvelopeSummary {
    pub(crate) verification_verdict: Value,
    pub(crate) retained: u64,
    pub(crate) omitted: u64,
    pub(crate) approx_tokens: Value,
    pub(crate) token_budget: Value,
}

/// Forum's `forum.context-preflight/v1` payload: `{schema, ready, request {bytes, tokens},
/// context, limits, issues}`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PreflightReport {
    /// False when the context would be omitted.
    pub(crate) ready: bool,
    pub(crate) request: RequestSize,
    pub(crate) context: ContextFigures,
    /// The budget's configured limits (`bytes_per_token` and the caps that are set), in
    /// Forum's order; empty without a budget.
    pub(crate) limits: Value,
    /// What a run would lose, one sentence each.
    pub(crate) issues: Vec<String>,
}

impl super::Report for PreflightReport {
    const SCHEMA: &'static str = PREFLIGHT_SCHEMA;
}

impl serde::Serialize for PreflightReport {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value().to_serde().serialize(s)
    }
}

impl PreflightReport {
    /// The payload as the ledger's value, its members in Forum's order (how the CLI prints it,
    /// byte for byte as Forum does).
    pub(crate) fn to_value(&self) -> Value {
        let int = |v: u64| Value::Int(v.into());
        let c = &self.context;
        let mut fields = vec![
            ("source".to_string(), Value::str(&c.source)),
            ("action".to_string(), Value::str(&c.action)),
            ("reason".to_string(), Value::str(&c.reason)),
            ("original_tokens".to_string(), int(c.original_tokens)),
            ("admitted_tokens".to_string(), int(c.admitted_tokens)),
            (
                "tokens_saved".to_string(),
                int(c.original_tokens.saturating_sub(c.admitted_tokens)),
            ),
        ];
        if let Some(code) = &c.error {
            fields.push(("error".to_string(), Value::str(code)));
        }
        if let Some(n) = c.repo_tokens {
            fields.push(("repo_tokens".to_string(), int(n)));
        }
        if let Some(e) = &c.structured {
            fields.push((
                "structured".to_string(),
                Value::Object(vec![
                    ("schema".to_string(), Value::str(ENVELOPE_SCHEMA)),
                    (
                        "verification_verdict".to_string(),
                        e.verification_verdict.clone(),
                    ),
                    ("retained".to_string(), int(e.retained)),
                    ("omitted".to_string(), int(e.omitted)),
                    ("approx_tokens".to_string(), e.approx_tokens.clone()),
                    ("token_budget".to_string(), e.token_budget.clone()),
                ]),
            ));
        }
        Value::Object(vec![
            ("schema".to_string(), Value::str(PREFLIGHT_SCHEMA)),
            ("ready".to_string(), Value::Bool(self.ready)),
            (
                "request".to_string(),
                Value::Object(vec![
                    ("bytes".to_string(), int(self.request.bytes)),
                    ("tokens".to_string(), int(self.request.tokens)),
                ]),
            ),
            ("context".to_string(), Value::Object(fields)),
            ("limits".to_string(), self.limits.clone()),
            (
                "issues".to_string(),
                Value::Array(self.issues.iter().map(Value::str).collect()),
            ),
        ])
    }
}

/// The request context as a run builds it: `own` (from `source`: `command`, `capsule`,
/// `none`), then the map of the work tree `repo` is in, when it is given and in one, by the
/// same provider and limits a run uses and joined as the run joins them
/// ([`crate::surface::run::repo_context::Chained`]). Returns the context, its source
/// (`repo` alone, `command+repo`, ...) and the repository's part (empty: none). A failure of
/// either part is the failure of both, as in a run.
pub(crate) fn with_repo(own: Got, source: &str, repo: Option<&Path>) -> (Got, String, String) {
    let provider = repo.and_then(|d| RepoContext::open(d, crate::context::repo::DEFAULT_LIMITS));
    let Some(provider) = provider else {
        return (own, source.to_string(), String::new());
    };
    let part = match provider.request_context("", &MemoryStorage::default()) {
        Ok(t) => t,
        Err(f) => {
            let failed = Got::Failed {
                code: f.code,
                message: f.message,
            };
            return match own {
                Got::Failed { .. } => (own, source.to_string(), String::new()),
                _ => (failed, "repo".to_string(), String::new()),
            };
        }
    };
    if part.is_empty() {
        return (own, source.to_string(), String::new());
    }
    match own {
        Got::Failed { .. } => (own, source.to_string(), String::new()),
        Got::Text(t) if t.is_empty() => (Got::Text(part.clone()), "repo".to_string(), part),
        Got::Text(t) => (
            Got::Text(repo_context::join(t, part.clone())),
            format!("{source}+repo"),
            part,
        ),
    }
}

/// The preflight of `request` with the context `got` from `source` (`command`, `capsule`,
/// `repo`, `command+repo`, ...) under `budget`, with Forum's rules: a failed provider gives an
/// empty context with reason `provider_failed`, its `error` code, and an issue. `repo_part`
/// is the repository's part of the context (as [`with_repo`] built it; empty: none), whose
/// tokens the report adds as `repo_tokens`.
pub(crate) fn preflight(
    request: &str,
    got: &Got,
    source: &str,
    budget: Option<&ContextBudget>,
    repo_part: &str,
) -> PreflightReport {
    let bpt = budget.map_or(4, |b| b.bytes_per_token);
    let mut issues: Vec<String> = Vec::new();
    let none = |reason: &str, source: &str| ContextFigures {
        source: source.to_string(),
        action: "none".to_string(),
        reason: reason.to_string(),
        original_tokens: 0,
        admitted_tokens: 0,
        error: None,
        structured: None,
        repo_tokens: None,
    };
    let context = match got {
        Got::Failed { code, message } => {
            issues.push(format!(
                "{source} context failed ({code}): {message}; a run would go on without it"
            ));
            ContextFigures {
                error: Some(code.clone()),
                ..none("provider_failed", source)
            }
        }
        Got::Text(t) if t.is_empty() => none("no_context", "none"),
        Got::Text(t) => {
            let (action, reason, original, admitted) = match budget {
                None => {
                    let n = context::approx_tokens(t, 4);
                    ("retained", "no_budget", n, n)
                }
                Some(b) => {
                    let (_, p) =
                        context::apply(b, &mut Meter::default(), Source::Request, source, t);
                    (
                        p.action.as_str(),
                        p.reason,
                        p.original_tokens,
                        p.admitted_tokens,
                    )
                }
            };
            if matches!(action, "trimmed" | "omitted") {
                issues.push(format!(
                    "{source} context would be {action} before planning"
                ));
            }
            ContextFigures {
                source: source.to_string(),
                action: action.to_string(),
                reason: reason.to_string(),
                original_tokens: original,
                admitted_tokens: admitted,
                error: None,
                structured: envelope_summary(t),
                repo_tokens: (!repo_part.is_empty())
                    .then(|| context::approx_tokens(repo_part, bpt)),
            }
        }
    };
    PreflightReport {
        ready: context.action != "omitted",
        request: RequestSize {
            bytes: request.len() as u64,
            tokens: context::approx_tokens(request, bpt),
        },
        context,
        limits: budget.map_or(Value::Object(Vec::new()), |b| b.configured_limits()),
        issues,
    }
}

/// The summary of a `project-telos.context-envelope/v1` JSON context.
fn envelope_summary(text: &str) -> Option<EnvelopeSummary> {
    let doc: J = serde_json::from_str(text).ok()?;
    let obj = doc.as_object()?;
    if obj.get("schema").and_then(J::as_str) != Some(ENVELOPE_SCHEMA) {
        return None;
    }
    let len = |k: &str| obj.get(k).and_then(J::as_array).map_or(0, Vec::len) as u64;
    let budget = obj.get("budget").and_then(J::as_object);
    let from_budget = |k: &str| {
        budget
            .and_then(|b| b.get(k))
            .map_or(Value::Null, Value::from_serde)
    };
    Some(EnvelopeSummary {
        verification_verdict: obj
            .get("verification_verdict")
            .map_or(Value::Null, Value::from_serde),
        retained: len("retained"),
        omitted: len("omitted"),
        approx_tokens: from_budget("approx_tokens"),
        token_budget: from_budget("token_budget"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_provider_keeps_forums_members_in_order() {
        let got = Got::Failed {
            code: "exit".into(),
            message: "it exited 3".into(),
        };
        let r = preflight("ship it", &got, "command", None, "");
        assert!(r.ready);
        assert_eq!(r.context.error.as_deref(), Some("exit"));
        assert_eq!(
            r.to_value().canonical(),
            r#"{"context":{"action":"none","admitted_tokens":0,"error":"exit","original_tokens":0,"reason":"provider_failed","source":"command","tokens_saved":0},"issues":["command context failed (exit): it exited 3; a run would go on without it"],"limits":{},"ready":true,"request":{"bytes":7,"tokens":2},"schema":"forum.context-preflight/v1"}"#
        );
        let keys: Vec<String> = match r.to_value() {
            Value::Object(m) => m.into_iter().map(|(k, _)| k).collect(),
            _ => unreachable!(),
        };
        assert_eq!(
            keys,
            ["schema", "ready", "request", "context", "limits", "issues"]
        );
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            preflight("ship it", &got, "command", None, "")
                .to_value()
                .to_serde()
        );
    }

    #[test]
    fn an_envelope_is_summarized_and_an_omitted_context_is_not_ready() {
        let env = r#"{"schema":"project-telos.context-envelope/v1","verification_verdict":"pass","retained":[1,2],"omitted":[],"budget":{"approx_tokens":12,"token_budget":100}}"#;
        let r = preflight("x", &Got::Text(env.into()), "command", None, "");
        let s = r.context.structured.as_ref().expect("an envelope");
        assert_eq!((s.retained, s.omitted), (2, 0));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["context"]["structured"]["schema"], ENVELOPE_SCHEMA);
        assert_eq!(v["context"]["structured"]["approx_tokens"], 12);
        let budget = ContextBudget {
            max_request_tokens: Some(0),
            ..ContextBudget::default()
        };
        let tight = preflight(
            "x",
            &Got::Text("y".repeat(400)),
            "command",
            Some(&budget),
            "",
        );
        assert!(
            matches!(tight.context.action.as_str(), "trimmed" | "omitted"),
            "{tight:?}"
        );
        assert_eq!(tight.ready, tight.context.action != "omitted");
        assert_eq!(tight.issues.len(), 1, "{tight:?}");
    }
}
