//! One typed request per operation: a struct whose doc comments and field types are the only
//! statement of what the operation takes. The command line's flags (clap), the daemon's JSON
//! body (serde) and the MCP tool's input schema (schemars) all come from it, and so does the
//! generated API reference (`docs/api.md`).
//!
//! A body is decoded by [`decode`]: the fields are checked against the request's schema first,
//! so a refusal names the field in the same words whichever route or tool it came through, and
//! then serde builds the struct. Checks beyond types (ranges, choices, non-blank text) are the
//! request's [`Request::validate`], which every transport calls.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value as J, json};

use super::Error;

pub mod attest;
pub mod blame;
pub mod fleet;
pub mod lanes;
pub mod ledger;
pub mod prose;
pub mod replay;
pub mod reports;
pub mod runs;
pub mod tlog;
pub mod work;

/// An operation's typed request.
pub(crate) trait Request: DeserializeOwned + JsonSchema + clap::Args {
    /// Checks beyond the fields' types: the same bad value gets the same words from every
    /// transport.
    fn validate(&self) -> Result<(), Error> {
        Ok(())
    }
}

/// One field of a request, as its schema states it.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The JSON name (also the clap argument's id).
    pub name: String,
    /// The JSON type: `string`, `integer`, `number`, `boolean`, `array`, `object`, or `any`.
    pub ty: String,
    /// An array's item type.
    pub items: Option<String>,
    /// The least value a number may take, when there is one.
    pub minimum: Option<f64>,
    /// Whether a body must carry it.
    pub required: bool,
    /// Its value when a body leaves it out, when that is a constant.
    pub default: Option<J>,
    /// What it is, from its doc comment.
    pub description: String,
    /// Whether any JSON value is taken whatever `ty` shows (the operation reads it itself).
    pub any: bool,
    /// The refusal when the value is missing or of another type, when it has its own words.
    pub refusal: Option<String>,
    /// The command line's flag for it (`--name`), when it is one.
    pub flag: Option<String>,
    /// Whether the command line takes it as its words (an argument list joined with spaces)
    /// and fills it itself: the request's text, marked `x-words` in its schema.
    pub words: bool,
}

/// A request as a list of fields, in the order they are declared.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// What the operation does, from the request's doc comment.
    pub description: String,
    /// Its fields.
    pub fields: Vec<Field>,
}

/// The JSON type named by a schema's `type` (a nullable type counts as the type).
fn type_of(s: &J) -> String {
    match s.get("type") {
        Some(J::String(t)) => t.clone(),
        Some(J::Array(ts)) => ts
            .iter()
            .filter_map(J::as_str)
            .find(|t| *t != "null")
            .unwrap_or("any")
            .to_string(),
        _ => {
            if s.get("$ref").is_some() || s.get("properties").is_some() {
                "object".to_string()
            } else {
                "any".to_string()
            }
        }
    }
}

/// A doc comment as one text: lines of a paragraph joined by a space, as clap's help joins
/// them.
fn prose(text: &str) -> String {
    text.split("\n\n")
        .map(|p| p.split('\n').map(str::trim).collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The fields of `R`, in declaration order (the order clap keeps its arguments in).
pub(crate) fn spec<R: Request>() -> Spec {
    let schema = schemars::schema_for!(R).to_value();
    let props = schema
        .get("properties")
        .and_then(J::as_object)
        .cloned()
        .unwrap_or_default();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(J::as_array)
        .map(|r| r.iter().filter_map(J::as_str).collect())
        .unwrap_or_default();
    let cmd = R::augment_args(clap::Command::new("request"));
    let flags: Vec<(String, Option<String>)> = cmd
        .get_arguments()
        .map(|a| {
            // A hidden argument is a field only the daemon and MCP take.
            let flag = a.get_long().filter(|_| !a.is_hide_set());
            (a.get_id().to_string(), flag.map(|l| format!("--{l}")))
        })
        .collect();
    // The text the command line takes as its words is no argument of the request's own (the
    // command line fills it): it comes first, where each request that has one declares it.
    let mut names: Vec<String> = props
        .iter()
        .filter(|(_, s)| s.get("x-words").is_some())
        .map(|(k, _)| k.clone())
        .collect();
    for (id, _) in &flags {
        if props.contains_key(id) && !names.contains(id) {
            names.push(id.clone());
        }
    }
    for k in props.keys() {
        if !names.contains(k) {
            names.push(k.clone());
        }
    }
    let fields = names
        .into_iter()
        .map(|name| {
            let s = &props[&name];
            Field {
                ty: type_of(s),
                items: s.get("items").map(type_of),
                minimum: s.get("minimum").and_then(J::as_f64),
                required: required.contains(&name.as_str()),
                default: s.get("default").filter(|d| !d.is_null()).cloned(),
                description: s
                    .get("description")
                    .and_then(J::as_str)
                    .map(prose)
                    .unwrap_or_default(),
                any: s.get("x-any").is_some(),
                refusal: s.get("x-refusal").and_then(J::as_str).map(str::to_string),
                words: s.get("x-words").is_some(),
                flag: flags
                    .iter()
                    .find(|(id, _)| *id == name)
                    .and_then(|(_, long)| long.clone()),
                name,
            }
        })
        .collect();
    // The root's title is the type's name; the doc comment is the description.
    let description = schema
        .get("description")
        .and_then(J::as_str)
        .map(prose)
        .unwrap_or_default();
    Spec {
        description,
        fields,
    }
}

impl Spec {
    /// The MCP tool's input schema: each field's type, its items' type, its default and
    /// description; the required ones; no other fields.
    pub fn input_schema(&self) -> J {
        let mut props = Map::new();
        for f in &self.fields {
            let mut p = Map::new();
            if f.ty != "any" {
                p.insert("type".into(), json!(f.ty));
            }
            if let Some(items) = f.items.as_ref().filter(|i| *i != "any") {
                p.insert("items".into(), json!({ "type": items }));
            }
            if let Some(d) = &f.default {
                p.insert("default".into(), d.clone());
            }
            p.insert("description".into(), json!(f.description));
            props.insert(f.name.clone(), J::Object(p));
        }
        let required: Vec<&str> = self
            .fields
            .iter()
            .filter(|f| f.required)
            .map(|f| f.name.as_str())
            .collect();
        json!({
            "type": "object",
            "properties": props,
            "required": required,
            "additionalProperties": false,
        })
    }

    /// The field names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.fields.iter().map(|f| f.name.as_str()).collect()
    }
}

/// How a JSON value is named in an error.
pub(crate) fn type_name(v: &J) -> &'static str {
    match v {
        J::Null => "null",
        J::Bool(_) => "a boolean",
        J::Number(n) if n.is_f64() => "a float",
        J::Number(_) => "an integer",
        J::String(_) => "a string",
        J::Array(_) => "a list",
        J::Object(_) => "an object",
    }
}

fn usage(message: String) -> Error {
    Error::usage(message)
}

/// Checks one present field's value against its type, in the words every transport uses.
fn check_type(f: &Field, v: &J) -> Result<(), Error> {
    if f.any {
        return Ok(());
    }
    if let Some(words) = &f.refusal {
        let fits = match f.ty.as_str() {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            _ => true,
        };
        return if fits {
            Ok(())
        } else {
            Err(usage(words.clone()))
        };
    }
    let key = &f.name;
    let wrong = |what: &str| {
        usage(format!(
            "field {key:?} must be {what}, not {}",
            type_name(v)
        ))
    };
    match f.ty.as_str() {
        "string" if !v.is_string() => Err(wrong("a string")),
        "boolean" if !v.is_boolean() => Err(wrong("true or false")),
        "integer" => match v {
            J::Number(n) if n.is_u64() => Ok(()),
            J::Number(n) if f.minimum.is_none() && n.is_i64() => Ok(()),
            _ if f.minimum.is_some() => Err(wrong("a non-negative integer")),
            _ => Err(wrong("an integer")),
        },
        "number" => match v {
            J::Number(n) => match (n.as_f64(), f.minimum) {
                (Some(x), Some(min)) if !(x.is_finite() && x >= min) => Err(usage(format!(
                    "field {key:?} must be a number of seconds, {min} or more"
                ))),
                _ => Ok(()),
            },
            _ => Err(wrong("a number")),
        },
        "array" => {
            let items = f.items.as_deref().unwrap_or("any");
            let list_of = match items {
                "string" => "a list of shell commands (strings)",
                "integer" => "a list of non-negative integers",
                _ => "a list",
            };
            match v {
                J::Array(xs) => {
                    let ok = |x: &J| match items {
                        "string" => x.is_string(),
                        "integer" => x.is_u64(),
                        _ => true,
                    };
                    if xs.iter().all(ok) {
                        Ok(())
                    } else {
                        Err(usage(format!("field {key:?} must be {list_of}")))
                    }
                }
                _ if items == "string" => Err(usage(format!("field {key:?} must be {list_of}"))),
                _ => Err(wrong("a list")),
            }
        }
        "object" if !v.is_object() => Err(wrong("an object")),
        _ => Ok(()),
    }
}

/// Decodes a request body (or an MCP tool's arguments) into `R`: the body must be an object
/// whose fields `R` names, each of its type (`null` counts as absent), with the required ones
/// present; then `R`'s own checks run.
pub(crate) fn decode<R: Request>(body: &J) -> Result<R, Error> {
    let present = check_body(&spec::<R>(), body)?;
    let r: R = serde_json::from_value(J::Object(present))
        .map_err(|e| usage(format!("the request body does not fit: {e}")))?;
    r.validate()?;
    Ok(r)
}

/// The type checks of [`decode`] against `spec`, in its words: the body's present fields
/// (`null` dropped but for a field that takes any value).
pub(crate) fn check_body(spec: &Spec, body: &J) -> Result<Map<String, J>, Error> {
    let J::Object(map) = body else {
        return Err(usage(format!(
            "the request body must be a JSON object, not {}",
            type_name(body)
        )));
    };
    if let Some(k) = map
        .keys()
        .find(|k| !spec.fields.iter().any(|f| &f.name == *k))
    {
        let known = if spec.fields.is_empty() {
            "this route takes no fields".to_string()
        } else {
            format!("known fields: {}", spec.names().join(", "))
        };
        return Err(usage(format!("unknown field {k:?} ({known})")));
    }
    // `null` counts as absent, except for a field that takes any value (a payload).
    let absent = |f: &Field, v: &J| v.is_null() && !f.any;
    for f in &spec.fields {
        match map.get(&f.name).filter(|v| !absent(f, v)) {
            Some(v) => check_type(f, v)?,
            None if f.required => {
                return Err(usage(
                    f.refusal
                        .clone()
                        .unwrap_or_else(|| format!("field {:?} is required", f.name)),
                ));
            }
            None => {}
        }
    }
    Ok(map
        .iter()
        .filter(|(k, v)| !spec.fields.iter().any(|f| &f.name == *k && absent(f, v)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect())
}

/// Reads a value through [`serde_json::Value`]: a field of a flattened group needs it, since
/// serde buffers a flattened struct's fields and an exact number then arrives as a map.
pub(crate) fn via_value<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: DeserializeOwned,
{
    let v = <J as serde::Deserialize>::deserialize(d)?;
    serde_json::from_value(v).map_err(serde::de::Error::custom)
}

/// Reads a JSON value given as a (hidden) command-line argument: the fields only the daemon
/// and MCP take keep their place among the request's arguments that way.
pub(crate) fn json_arg<T: DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    serde_json::from_str(text)
}

/// A required text that must not be blank, in the words every transport uses.
pub(crate) fn non_blank(key: &str, text: &str) -> Result<(), Error> {
    if text.trim().is_empty() {
        return Err(usage(format!("field {key:?} is empty")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refusal<R: Request + std::fmt::Debug>(body: J) -> String {
        decode::<R>(&body).unwrap_err().message
    }

    #[test]
    fn fields_are_typed_and_unknown_ones_refused() {
        use runs::{Halt, Submit};
        let s: Submit = decode(
            &json!({"request": "x", "max_seconds": 1.5, "gate_waves": [1, 2],
            "context_token_budget": 3, "max_tokens": null, "checks": ["true"]}),
        )
        .unwrap();
        assert_eq!(s.max_seconds, Some(1.5));
        assert_eq!(s.gate_waves, vec![1, 2]);
        assert_eq!(s.budget.context_token_budget, Some(3));
        assert_eq!(s.ceilings.max_tokens, None);
        assert_eq!(
            refusal::<Halt>(json!({"x": 1})),
            "unknown field \"x\" (known fields: run, reason, by, wait_seconds)"
        );
        assert_eq!(
            refusal::<ledger::CheckpointRecord>(json!({"x": 1})),
            "unknown field \"x\" (this route takes no fields)"
        );
        assert_eq!(
            refusal::<Halt>(json!([1])),
            "the request body must be a JSON object, not a list"
        );
        assert_eq!(
            refusal::<Halt>(json!({"run": 1.5})),
            "field \"run\" must be a non-negative integer, not a float"
        );
        assert_eq!(
            refusal::<Halt>(json!({"run": -1})),
            "field \"run\" must be a non-negative integer, not an integer"
        );
        assert_eq!(
            refusal::<Halt>(json!({"by": 3})),
            "field \"by\" must be a string, not an integer"
        );
        assert_eq!(
            refusal::<Halt>(json!({"wait_seconds": -1})),
            "field \"wait_seconds\" must be a number of seconds, 0 or more"
        );
        assert_eq!(
            refusal::<Halt>(json!({"wait_seconds": "x"})),
            "field \"wait_seconds\" must be a number, not a string"
        );
        assert_eq!(
            refusal::<Submit>(json!({})),
            "field \"request\" is required"
        );
        assert_eq!(
            refusal::<Submit>(json!({"request": " "})),
            "field \"request\" is empty"
        );
        assert_eq!(
            refusal::<Submit>(json!({"request": "x", "work": 1})),
            "field \"work\" must be true or false, not an integer"
        );
        assert_eq!(
            refusal::<Submit>(json!({"request": "x", "checks": [1]})),
            "field \"checks\" must be a list of shell commands (strings)"
        );
        assert_eq!(
            refusal::<Submit>(json!({"request": "x", "gate_waves": 1})),
            "field \"gate_waves\" must be a list, not an integer"
        );
        assert_eq!(
            refusal::<Submit>(json!({"request": "x", "gate_waves": [-1]})),
            "field \"gate_waves\" must be a list of non-negative integers"
        );
        assert_eq!(
            refusal::<work::CampaignDeclare>(json!({"campaign": [1]})),
            "field \"campaign\" must be the campaign object {campaign_id, title, projects}"
        );
        assert_eq!(
            refusal::<work::CampaignDeclare>(json!({})),
            "field \"campaign\" must be the campaign object {campaign_id, title, projects}"
        );
        // A payload takes any value, null included.
        let a: work::Append = decode(&json!({"actor": "a", "kind": "k", "payload": null})).unwrap();
        assert_eq!(
            a.payload,
            Some(work::Payload(crate::ledger::canonical::Value::Null))
        );
        assert_eq!(
            refusal::<work::Append>(json!({"actor": "a", "kind": "k"})),
            "field \"payload\" is required"
        );
    }

    #[test]
    fn a_flattened_group_keeps_exact_numbers() {
        let s: runs::Submit = decode(&json!({"request": "x", "upstream_token_budget": 7,
            "max_cost_usd": 0.25, "max_model_calls": 3}))
        .unwrap();
        assert_eq!(s.budget.upstream_token_budget, Some(7));
        assert_eq!(s.ceilings.max_cost_usd, Some(0.25));
        assert_eq!(s.max_model_calls, Some(3));
    }

    #[test]
    fn the_known_fields_are_listed_in_the_daemons_order() {
        let b = [
            "context_token_budget",
            "request_context_token_budget",
            "task_context_token_budget",
            "upstream_token_budget",
        ];
        let submit = [
            &["request", "delivery_profile", "checkpoint_each_wave"][..],
            &b,
            &[
                "max_model_calls",
                "max_seconds",
                "gate_waves",
                "judge_intent",
                "revise",
            ],
            &[
                "use_capsule_context",
                "no_repo_context",
                "repo_context",
                "work",
                "solo",
                "checks",
                "dispatch",
            ],
            &[
                "allow_cmds",
                "max_tool_calls",
                "attempts",
                "max_tokens",
                "max_cost_usd",
                "sandbox",
            ],
            &["sandbox_net", "sandbox_allow_host"],
        ]
        .concat();
        assert_eq!(spec::<runs::Submit>().names(), submit);
        let preflight = [
            &[
                "request",
                "use_capsule_context",
                "max_items",
                "max_text_chars",
            ][..],
            &b,
            &["repo_context"],
        ]
        .concat();
        assert_eq!(spec::<reports::Preflight>().names(), preflight);
        let cases: Vec<(Spec, &[&str])> = vec![
            (
                spec::<runs::Halt>(),
                &["run", "reason", "by", "wait_seconds"],
            ),
            (
                spec::<work::GateEdit>(),
                &["run", "run_seq", "wave", "approver", "edits", "note"],
            ),
            (
                spec::<work::GateReject>(),
                &["run", "run_seq", "wave", "approver", "reason"],
            ),
            (
                spec::<reports::Mine>(),
                &["trace", "text", "format", "min_checks"],
            ),
            (
                spec::<work::Append>(),
                &[
                    "actor",
                    "kind",
                    "payload",
                    "causal_parent",
                    "idempotency_key",
                ],
            ),
            (
                spec::<work::CampaignIngest>(),
                &[
                    "campaign_id",
                    "project",
                    "feature",
                    "status",
                    "source",
                    "reason",
                ],
            ),
            (
                spec::<work::CampaignRun>(),
                &[
                    "campaign_id",
                    "max_parallel",
                    "max_model_calls",
                    "max_seconds",
                    "work",
                    "checks",
                    "dispatch",
                ],
            ),
            (spec::<reports::Grade>(), &["run", "all", "min_checks"]),
            (
                spec::<ledger::Prove>(),
                &["seq", "consistency_from", "size"],
            ),
            (spec::<ledger::Page>(), &["limit", "after"]),
            (spec::<prose::Plan>(), &["request", "plan"]),
            (spec::<prose::Humanize>(), &["text", "audience", "profile"]),
        ];
        for (have, want) in cases {
            assert_eq!(have.names(), want);
        }
    }

    #[test]
    fn fields_keep_their_declared_order() {
        let spec = spec::<runs::Resume>();
        assert_eq!(
            spec.names(),
            [
                "run",
                "max_model_calls",
                "max_seconds",
                "max_tokens",
                "max_cost_usd"
            ]
        );
        assert!(spec.description.starts_with("Continue an unfinished run"));
    }
}
