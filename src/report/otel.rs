//! One run as OTLP/JSON traces: an `ExportTraceServiceRequest` in the
//! protobuf JSON mapping (the field names [`crate::flight::otlp`] reads back), so the run opens
//! in any OTLP backend. Pure: the run's entries and bodies in, a JSON value out.
//!
//! * one trace per run: the trace id is the first 16 bytes of the run's request entry hash;
//! * one span per entry: its id is the first 8 bytes of the entry hash, its parent the span of
//!   the entry's causal parent; it starts when its parent was witnessed and ends when it was;
//! * the OpenTelemetry GenAI semantic conventions where the body says so: an entry naming a
//!   model is a `chat` span (`gen_ai.request.model`, `gen_ai.response.model`, and
//!   `gen_ai.usage.input_tokens` / `output_tokens` when the body records usage); an entry
//!   naming a tool is an `execute_tool` span (`gen_ai.tool.name`); an entry whose body says
//!   `ok: false` or holds an `error` has status ERROR with its message;
//! * every span carries `forum.seq`, `forum.checkpoint`, `forum.entry_hash`, `forum.kind` and
//!   `forum.actor`, so a span leads back to the ledger entry it shows.

use std::collections::BTreeMap;

use serde_json::{Value as JsonValue, json};

use crate::ledger::Entry;
use crate::ledger::canonical::Value;

/// The instrumentation scope the spans are under.
pub(crate) const SCOPE: &str = "git-forum";

/// `SPAN_KIND_INTERNAL` and `SPAN_KIND_CLIENT` (a model or tool call leaves the process).
const KIND_INTERNAL: i64 = 1;
const KIND_CLIENT: i64 = 3;
/// `STATUS_CODE_ERROR`.
const STATUS_ERROR: i64 = 2;

fn hex_prefix(hash: &str, bytes: usize) -> String {
    hash.chars()
        .take(bytes * 2)
        .collect::<String>()
        .to_lowercase()
}

fn nanos(ts: f64) -> String {
    let n = if ts.is_finite() && ts > 0.0 {
        (ts * 1e9).round() as u128
    } else {
        0
    };
    n.to_string()
}

fn text_attr(key: &str, v: &str) -> JsonValue {
    json!({"key": key, "value": {"stringValue": v}})
}

fn int_attr(key: &str, v: i64) -> JsonValue {
    // proto3 JSON writes a 64-bit integer as a string.
    json!({"key": key, "value": {"intValue": v.to_string()}})
}

fn str_of<'a>(body: Option<&'a Value>, key: &str) -> Option<&'a str> {
    body.and_then(|b| b.get(key))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn int_of(v: Option<&Value>, keys: &[&str]) -> Option<i64> {
    keys.iter().find_map(|k| match v.and_then(|u| u.get(k)) {
        Some(x @ Value::Int(_)) => Some(super::py_int(Some(x))),
        _ => None,
    })
}

/// The OTLP/JSON export of one run: `items` are the run's entries with their bodies (in seq
/// order, the request first), `checkpoint` the ledger's Merkle root.
pub(crate) fn export(items: &[(Entry, Option<Value>)], checkpoint: &str) -> JsonValue {
    let Some((root, _)) = items.first() else {
        return json!({"resourceSpans": []});
    };
    let trace_id = hex_prefix(&root.entry_hash, 16);
    let by_seq: BTreeMap<u64, &Entry> = items.iter().map(|(e, _)| (e.seq, e)).collect();
    let mut spans = Vec::with_capacity(items.len());
    for (e, body) in items {
        let body = body.as_ref();
        let parent = e
            .causal_parent
            .and_then(|p| u64::try_from(p).ok())
            .and_then(|p| by_seq.get(&p).copied());
        let mut attrs = vec![
            int_attr("forum.seq", e.seq as i64),
            text_attr("forum.checkpoint", checkpoint),
            text_attr("forum.entry_hash", &e.entry_hash),
            text_attr("forum.kind", &e.kind),
            text_attr("forum.actor", &e.actor),
        ];
        let model = str_of(body, "model");
        let tool = str_of(body, "tool").or_else(|| str_of(body, "tool_name"));
        let (name, kind) = if let Some(t) = tool {
            attrs.push(text_attr("gen_ai.operation.name", "execute_tool"));
            attrs.push(text_attr("gen_ai.tool.name", t));
            (format!("execute_tool {t}"), KIND_CLIENT)
        } else if let Some(m) = model {
            attrs.push(text_attr("gen_ai.operation.name", "chat"));
            attrs.push(text_attr("gen_ai.request.model", m));
            attrs.push(text_attr("gen_ai.response.model", m));
            let usage = body.and_then(|b| b.get("usage"));
            if let Some(n) = int_of(usage, &["input_tokens", "prompt_tokens"]) {
                attrs.push(int_attr("gen_ai.usage.input_tokens", n));
            }
            if let Some(n) = int_of(usage, &["output_tokens", "completion_tokens"]) {
                attrs.push(int_attr("gen_ai.usage.output_tokens", n));
            }
            (format!("chat {m}"), KIND_CLIENT)
        } else {
            (e.kind.clone(), KIND_INTERNAL)
        };
        let failed = matches!(body.and_then(|b| b.get("ok")), Some(Value::Bool(false)));
        let error = str_of(body, "error");
        let mut span = json!({
            "traceId": trace_id,
            "spanId": hex_prefix(&e.entry_hash, 8),
            "parentSpanId": parent.map(|p| hex_prefix(&p.entry_hash, 8)).unwrap_or_default(),
            "name": name,
            "kind": kind,
            "startTimeUnixNano": nanos(parent.map_or(e.ts, |p| p.ts)),
            "endTimeUnixNano": nanos(e.ts),
            "attributes": attrs,
        });
        if failed || error.is_some() {
            let message = error
                .or_else(|| str_of(body, "output"))
                .unwrap_or("the entry records a failure");
            span["status"] = json!({"code": STATUS_ERROR, "message": message});
        }
        spans.push(span);
    }
    json!({
        "resourceSpans": [{
            "resource": {"attributes": [
                text_attr("service.name", "git-forum"),
                text_attr("forum.checkpoint", checkpoint),
            ]},
            "scopeSpans": [{
                "scope": {"name": SCOPE, "version": env!("CARGO_PKG_VERSION")},
                "spans": spans,
            }],
        }]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: u64, kind: &str, parent: Option<i64>, hash: &str) -> Entry {
        Entry {
            seq,
            ts: 1000.0 + seq as f64,
            actor: "a".into(),
            kind: kind.into(),
            causal_parent: parent,
            payload_hash: String::new(),
            prev_hash: String::new(),
            entry_hash: hash.into(),
        }
    }

    #[test]
    fn spans_follow_entries_parents_models_and_failures() {
        let body = |s: &str| Some(crate::ledger::canonical::parse(s).unwrap());
        let items = vec![
            (
                entry(0, "request", None, &"a".repeat(64)),
                body(r#"{"text":"x"}"#),
            ),
            (
                entry(1, "result", Some(0), &"b".repeat(64)),
                body(
                    r#"{"model":"m1","ok":false,"output":"boom","usage":{"input_tokens":3,"output_tokens":4}}"#,
                ),
            ),
        ];
        let v = export(&items, "cafe");
        let spans = &v["resourceSpans"][0]["scopeSpans"][0]["spans"];
        assert_eq!(spans[0]["traceId"], "a".repeat(32));
        assert_eq!(spans[0]["parentSpanId"], "");
        assert_eq!(spans[1]["spanId"], "b".repeat(16));
        assert_eq!(spans[1]["parentSpanId"], "a".repeat(16));
        assert_eq!(spans[1]["name"], "chat m1");
        assert_eq!(spans[1]["startTimeUnixNano"], "1000000000000");
        assert_eq!(spans[1]["endTimeUnixNano"], "1001000000000");
        assert_eq!(spans[1]["status"], json!({"code": 2, "message": "boom"}));
        let attrs = spans[1]["attributes"].as_array().unwrap();
        assert!(attrs.contains(&int_attr("gen_ai.usage.input_tokens", 3)));
        assert!(attrs.contains(&int_attr("gen_ai.usage.output_tokens", 4)));
        assert!(attrs.contains(&text_attr("forum.checkpoint", "cafe")));
        assert!(attrs.contains(&int_attr("forum.seq", 1)));
    }
}
