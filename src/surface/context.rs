//! Context preflight (forum-spec §10, Forum's `forum.context-preflight/v1`): how much of the
//! request context a run would admit under a context budget, given the context a provider
//! gave. One builder for `git forum context preflight`, `POST /context/preflight` and MCP.

use serde_json::Value as J;

use crate::context::{self, ContextBudget, Meter, Source};
use crate::ledger::Value;

/// The preflight payload's schema name.
pub const PREFLIGHT_SCHEMA: &str = "forum.context-preflight/v1";

/// The schema of a structured context envelope whose summary the preflight adds.
pub const ENVELOPE_SCHEMA: &str = "project-telos.context-envelope/v1";

/// What the context source gave: text, or why it failed.
pub enum Got {
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

/// Builds the `forum.context-preflight/v1` payload: `{schema, ready, request {bytes, tokens},
/// context, limits, issues}` with Forum's fields and rules. `source` names where the context
/// came from (`command`, `capsule`); a failed provider gives an empty context with reason
/// `provider_failed`, its `error` code, and an issue.
pub fn preflight_payload(
    request: &str,
    got: &Got,
    source: &str,
    budget: Option<&ContextBudget>,
) -> Value {
    let int = |v: u64| Value::Int(v.into());
    let bpt = budget.map_or(4, |b| b.bytes_per_token);
    let mut issues: Vec<Value> = Vec::new();
    let none = |reason: &str, source: &str| {
        vec![
            ("source".to_string(), Value::str(source)),
            ("action".to_string(), Value::str("none")),
            ("reason".to_string(), Value::str(reason)),
            ("original_tokens".to_string(), int(0)),
            ("admitted_tokens".to_string(), int(0)),
            ("tokens_saved".to_string(), int(0)),
        ]
    };
    let (fields, action) = match got {
        Got::Failed { code, message } => {
            issues.push(Value::str(format!(
                "{source} context failed ({code}): {message}; a run would go on without it"
            )));
            let mut f = none("provider_failed", source);
            f.push(("error".to_string(), Value::str(code)));
            (f, "none")
        }
        Got::Text(t) if t.is_empty() => (none("no_context", "none"), "none"),
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
                issues.push(Value::str(format!(
                    "{source} context would be {action} before planning"
                )));
            }
            let mut f = vec![
                ("source".to_string(), Value::str(source)),
                ("action".to_string(), Value::str(action)),
                ("reason".to_string(), Value::str(reason)),
                ("original_tokens".to_string(), int(original)),
                ("admitted_tokens".to_string(), int(admitted)),
                (
                    "tokens_saved".to_string(),
                    int(original.saturating_sub(admitted)),
                ),
            ];
            if let Some(s) = envelope_summary(t) {
                f.push(("structured".to_string(), s));
            }
            (f, action)
        }
    };
    Value::Object(vec![
        ("schema".to_string(), Value::str(PREFLIGHT_SCHEMA)),
        ("ready".to_string(), Value::Bool(action != "omitted")),
        (
            "request".to_string(),
            Value::Object(vec![
                ("bytes".to_string(), int(request.len() as u64)),
                (
                    "tokens".to_string(),
                    int(context::approx_tokens(request, bpt)),
                ),
            ]),
        ),
        ("context".to_string(), Value::Object(fields)),
        (
            "limits".to_string(),
            budget.map_or(Value::Object(Vec::new()), |b| b.configured_limits()),
        ),
        ("issues".to_string(), Value::Array(issues)),
    ])
}

/// The summary of a `project-telos.context-envelope/v1` JSON context: `{schema,
/// verification_verdict, retained, omitted, approx_tokens, token_budget}`.
fn envelope_summary(text: &str) -> Option<Value> {
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
    Some(Value::Object(vec![
        ("schema".to_string(), Value::str(ENVELOPE_SCHEMA)),
        (
            "verification_verdict".to_string(),
            obj.get("verification_verdict")
                .map_or(Value::Null, Value::from_serde),
        ),
        ("retained".to_string(), Value::Int(len("retained").into())),
        ("omitted".to_string(), Value::Int(len("omitted").into())),
        ("approx_tokens".to_string(), from_budget("approx_tokens")),
        ("token_budget".to_string(), from_budget("token_budget")),
    ]))
}
