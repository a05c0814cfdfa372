//! `git forum context preflight REQUEST`: how much of the request context a run would admit
//! under a context budget (forum-spec §10, Forum's `forum.context-preflight/v1`), without
//! running a model and without writing anything to the ledger.
//!
//! The context is what a run would read before planning: the output of `--context-cmd`
//! (run as `CMD request REQUEST`) or the ledger's capsule text (`--use-capsule-context`, the
//! ledger as it stands now). It goes through the request source of the budget exactly as in
//! a run, on a fresh meter.

use std::time::Duration;

use serde_json::Value as J;

use super::submit::{BudgetFlags, ContextFlags, capsule_text_of, preload};
use super::{CliError, Ctx};
use crate::context::{self, ContextBudget, Meter, Source};
use crate::exec::config;
use crate::ledger::Value;
use crate::run::{CommandContext, ContextProvider};

/// The preflight payload's schema name.
pub const PREFLIGHT_SCHEMA: &str = "forum.context-preflight/v1";

/// The schema of a structured context envelope whose summary the preflight adds.
pub const ENVELOPE_SCHEMA: &str = "project-telos.context-envelope/v1";

/// Inspect context pressure.
#[derive(Debug, clap::Args)]
pub struct ContextArgs {
    /// The context command.
    #[command(subcommand)]
    pub command: ContextCommand,
}

/// What `git forum context` does.
#[derive(Debug, clap::Subcommand)]
pub enum ContextCommand {
    /// Estimate how much of the request context a run would admit under the context budget
    /// (retained, trimmed or omitted), without a model and without writing to the ledger.
    /// Prints a summary, or with --json the forum.context-preflight/v1 object.
    Preflight(PreflightArgs),
}

/// `git forum context preflight`'s arguments.
#[derive(Debug, clap::Args)]
pub struct PreflightArgs {
    /// The request (several words are joined with spaces).
    #[arg(required = true)]
    pub request: Vec<String>,
    /// Where the context comes from.
    #[command(flatten)]
    pub context: ContextFlags,
    /// Capsule: the most task results included (0: none).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 8,
        allow_negative_numbers = true
    )]
    pub max_items: i64,
    /// Capsule: the most code points copied from any text field.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 240,
        allow_negative_numbers = true
    )]
    pub max_text_chars: i64,
    /// The context budget to measure against.
    #[command(flatten)]
    pub budget: BudgetFlags,
}

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

/// The preflight in a few lines, for people.
fn text(p: &J) -> String {
    let c = &p["context"];
    let n = |v: &J| v.as_u64().unwrap_or(0);
    let mut out = vec![
        format!(
            "context preflight: {}",
            if p["ready"] == J::Bool(true) {
                "ready"
            } else {
                "not ready"
            }
        ),
        format!(
            "request: {} bytes, about {} tokens",
            n(&p["request"]["bytes"]),
            n(&p["request"]["tokens"])
        ),
        format!(
            "context: {} {} ({}), {} -> {} tokens",
            c["source"].as_str().unwrap_or(""),
            c["action"].as_str().unwrap_or(""),
            c["reason"].as_str().unwrap_or(""),
            n(&c["original_tokens"]),
            n(&c["admitted_tokens"]),
        ),
    ];
    if let Some(limits) = p["limits"].as_object().filter(|l| !l.is_empty()) {
        let parts: Vec<String> = limits.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.push(format!("limits: {}", parts.join(" ")));
    }
    if let Some(s) = c.get("structured") {
        out.push(format!(
            "structured context: {} verdict={} retained={} omitted={} tokens={}/{}",
            s["schema"].as_str().unwrap_or(""),
            s["verification_verdict"],
            s["retained"],
            s["omitted"],
            s["approx_tokens"],
            s["token_budget"]
        ));
    }
    for issue in p["issues"].as_array().into_iter().flatten() {
        out.push(format!("- {}", issue.as_str().unwrap_or("")));
    }
    out.join("\n")
}

/// `git forum context ...`.
pub fn run(ctx: &Ctx, args: ContextArgs) -> Result<(), CliError> {
    match args.command {
        ContextCommand::Preflight(a) => preflight(ctx, a),
    }
}

fn preflight(ctx: &Ctx, a: PreflightArgs) -> Result<(), CliError> {
    let request = a.request.join(" ");
    crate::route::check_request(&request).map_err(|e| CliError::usage(e.to_string()))?;
    let budget = a.budget.budget()?;
    let limit = |flag: &str, v: i64| -> Result<usize, CliError> {
        usize::try_from(v).map_err(|_| CliError::usage(format!("--{flag} {v} must be 0 or more")))
    };
    let max_items = limit("max-items", a.max_items)?;
    let max_text_chars = limit("max-text-chars", a.max_text_chars)?;
    let (got, source) = if let Some(line) = &a.context.context_cmd {
        let argv =
            config::split_cmd(line).map_err(|e| CliError::usage(format!("--context-cmd: {e}")))?;
        let timeout = a.context.context_timeout;
        if !(timeout.is_finite() && timeout > 0.0) {
            return Err(CliError::usage(format!(
                "--context-timeout {timeout} must be a number of seconds above 0"
            )));
        }
        let provider = CommandContext::new(argv, Duration::from_secs_f64(timeout));
        let empty = crate::ledger::MemoryStorage::default();
        let got = match provider.request_context(&request, &empty) {
            Ok(t) => Got::Text(t),
            Err(f) => Got::Failed {
                code: f.code,
                message: f.message,
            },
        };
        (got, "command")
    } else if a.context.use_capsule_context {
        let store = ctx.store()?;
        let pre = preload(&store)?;
        let text = capsule_text_of(&pre, &store, max_items, max_text_chars)
            .map_err(|e| CliError::fail(format!("cannot read the ledger: {e}")))?;
        (Got::Text(text), "capsule")
    } else {
        (Got::Text(String::new()), "none")
    };
    let payload = preflight_payload(&request, &got, source, budget.as_ref());
    if ctx.json {
        return ctx.out(&payload.python_pretty());
    }
    ctx.out(&text(&payload.to_serde()))
}
