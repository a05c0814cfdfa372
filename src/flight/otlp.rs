//! OTLP/JSON traces, as the OpenTelemetry collector's file exporter writes them: one
//! `ExportTraceServiceRequest` object (`{"resourceSpans": [...]}`) per line, or one such object
//! in the whole file. Each `resourceSpans[].scopeSpans[].spans[]` span becomes an event.
//!
//! * ids are the span's hex `spanId`, scoped by its `traceId`; `parentSpanId` (empty or absent
//!   for a root) names the parent;
//! * spans are folded in start order (`startTimeUnixNano`, stable), because an exporter writes
//!   a span when it *ends*, children before their parents; a file in which some span has no
//!   start time keeps its own order;
//! * attributes (`[{key, value: {stringValue | intValue | doubleValue | boolValue |
//!   arrayValue | kvlistValue | bytesValue}}]`) are flattened to a plain object; `intValue`,
//!   a string in proto3 JSON, becomes a number;
//! * the GenAI semantic conventions give the entry's kind (`gen_ai.operation.name`, else
//!   `span`) and the body's `model` (`gen_ai.response.model`, else `gen_ai.request.model`),
//!   `usage` (`gen_ai.usage.input_tokens` / `output_tokens`) and `tool` (`gen_ai.tool.name`);
//!   the actor is the span's name.

use super::{Event, Totals, TraceError, err, line_col};
use crate::ledger::canonical::{self, Int, Value};

/// The events of an OTLP/JSON text, and the model use it records.
pub(crate) fn events(text: &str) -> Result<(Vec<Event>, Totals), TraceError> {
    let requests = requests(text)?;
    let mut spans = Vec::new();
    for (line, req) in &requests {
        let Some(Value::Array(rs)) = req.get("resourceSpans") else {
            return Err(err(format!(
                "{} has no resourceSpans list; give OTLP/JSON as the collector's file exporter writes it",
                where_(*line)
            )));
        };
        for (r, res) in rs.iter().enumerate() {
            let resource = res
                .get("resource")
                .and_then(|x| x.get("attributes"))
                .map(|a| attributes(a, &format!("resourceSpans[{r}].resource")))
                .transpose()?;
            // `instrumentationLibrarySpans` / `instrumentationLibrary`: the same, as OTLP
            // before 0.15 (and older collectors) named them.
            let Some(Value::Array(scopes)) = res
                .get("scopeSpans")
                .or_else(|| res.get("instrumentationLibrarySpans"))
            else {
                continue;
            };
            for (s, scope) in scopes.iter().enumerate() {
                let scope_name = scope
                    .get("scope")
                    .or_else(|| scope.get("instrumentationLibrary"))
                    .and_then(|x| x.get("name"))
                    .and_then(Value::as_str);
                let Some(Value::Array(list)) = scope.get("spans") else {
                    continue;
                };
                for (k, span) in list.iter().enumerate() {
                    let at = format!("resourceSpans[{r}].scopeSpans[{s}].spans[{k}]");
                    let at = match line {
                        Some(l) => format!("{at} on line {l}"),
                        None => at,
                    };
                    spans.push((span, resource.clone(), scope_name, at));
                }
            }
        }
    }
    if spans.is_empty() {
        return Err(err(
            "the OTLP trace holds no spans; give a file with at least one span under resourceSpans[].scopeSpans[].spans[]",
        ));
    }
    let starts: Option<Vec<u128>> = spans
        .iter()
        .map(|(s, ..)| s.get("startTimeUnixNano").and_then(nanos))
        .collect();
    let mut order: Vec<usize> = (0..spans.len()).collect();
    if let Some(starts) = &starts {
        order.sort_by_key(|&i| starts[i]);
    }
    let mut totals = Totals::default();
    let mut out = Vec::with_capacity(spans.len());
    for i in order {
        let (span, resource, scope, at) = &spans[i];
        out.push(event(span, resource.as_ref(), *scope, at, &mut totals)?);
    }
    Ok((out, totals))
}

fn where_(line: Option<usize>) -> String {
    match line {
        Some(l) => format!("line {l} of the OTLP file"),
        None => "the OTLP file".to_string(),
    }
}

/// The request objects of the text: the whole text as one JSON value, else one per non-blank
/// line (`Some(line)` numbers it).
fn requests(text: &str) -> Result<Vec<(Option<usize>, Value)>, TraceError> {
    let whole = match canonical::parse(text) {
        Ok(v @ Value::Object(_)) => return Ok(vec![(None, v)]),
        Ok(_) => {
            return Err(err(
                "the OTLP trace is not an object; give {\"resourceSpans\": [...]} (one per line, or one in the file)",
            ));
        }
        Err(e) => e,
    };
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        // A first line that is no JSON of its own: the file is one object written over many
        // lines, and the error is where the whole text breaks.
        if out.is_empty()
            && !line.trim().is_empty()
            && canonical::parse(line.trim()).is_err()
            && text.trim().lines().count() > 1
            && !text.trim_start().starts_with("{\"resourceSpans\"")
        {
            let (l, col) = line_col(text, whole.offset);
            return Err(err(format!(
                "the OTLP file is not JSON ({} at line {l}, column {col}); give OTLP/JSON as the collector writes it",
                whole.message
            )));
        }
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match canonical::parse(line) {
            Ok(v @ Value::Object(_)) => out.push((Some(n + 1), v)),
            Ok(_) => {
                return Err(err(format!(
                    "line {} of the OTLP file is not an object; give one {{\"resourceSpans\": [...]}} per line",
                    n + 1
                )));
            }
            Err(e) => {
                let (_, col) = line_col(line, e.offset);
                return Err(err(format!(
                    "line {} of the OTLP file is not JSON ({} at column {col}); give one JSON object per line",
                    n + 1,
                    e.message
                )));
            }
        }
    }
    if out.is_empty() {
        return Err(err(
            "the OTLP file is empty; give at least one {\"resourceSpans\": [...]} object",
        ));
    }
    Ok(out)
}

/// A `*UnixNano` value: a decimal string (proto3 JSON) or a number.
fn nanos(v: &Value) -> Option<u128> {
    match v {
        Value::Str(s) => s.parse().ok(),
        Value::Int(i) => i.as_str().parse().ok(),
        _ => None,
    }
}

/// An OTLP `AnyValue` as a plain value.
fn any_value(v: &Value) -> Value {
    let Value::Object(m) = v else {
        return v.clone();
    };
    let Some((k, x)) = m.first() else {
        return Value::Null;
    };
    match (k.as_str(), x) {
        ("intValue", Value::Str(s)) => Int::parse(s).map_or_else(|| x.clone(), Value::Int),
        ("arrayValue", a) => match a.get("values") {
            Some(Value::Array(items)) => Value::Array(items.iter().map(any_value).collect()),
            _ => Value::Array(Vec::new()),
        },
        ("kvlistValue", l) => match l.get("values") {
            Some(Value::Array(items)) => Value::object(items.iter().filter_map(|kv| {
                let key = kv.get("key")?.as_str()?.to_string();
                Some((key, kv.get("value").map_or(Value::Null, any_value)))
            })),
            _ => Value::Object(Vec::new()),
        },
        (_, x) => x.clone(),
    }
}

/// An attribute list flattened to an object.
fn attributes(list: &Value, at: &str) -> Result<Value, TraceError> {
    let Value::Array(items) = list else {
        return Err(err(format!(
            "{at} has attributes that are not a list; give them as [{{\"key\": ..., \"value\": {{...}}}}]"
        )));
    };
    let mut pairs = Vec::with_capacity(items.len());
    for (n, kv) in items.iter().enumerate() {
        let Some(key) = kv.get("key").and_then(Value::as_str) else {
            return Err(err(format!(
                "attribute #{n} of {at} has no string 'key'; give every attribute a key"
            )));
        };
        pairs.push((
            key.to_string(),
            kv.get("value").map_or(Value::Null, any_value),
        ));
    }
    Ok(Value::object(pairs))
}

fn count(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Int(i) => i.as_u64(),
        Value::Str(s) => s.parse().ok(),
        Value::Float(f) if *f >= 0.0 && f.fract() == 0.0 => Some(*f as u64),
        _ => None,
    }
}

/// The string at `k` in `v`, unless it is empty.
fn non_empty_str<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// A span's `spanId`, refused when the span is no object or has none.
fn span_id<'a>(span: &'a Value, at: &str) -> Result<&'a str, TraceError> {
    if !matches!(span, Value::Object(_)) {
        return Err(err(format!(
            "{at} is not an object; every span must be a JSON object"
        )));
    }
    match span
        .get("spanId")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        Some(id) => Ok(id),
        None => Err(err(format!(
            "{at} has no spanId; every OTLP span needs its hex spanId"
        ))),
    }
}

/// The span's token usage from its `gen_ai.usage.*` attributes (either name of each count),
/// added to `totals`; `None` when it records neither count.
fn span_usage(attrs: &Value, totals: &mut Totals) -> Option<Value> {
    let input = count(attrs.get("gen_ai.usage.input_tokens"))
        .or_else(|| count(attrs.get("gen_ai.usage.prompt_tokens")));
    let output = count(attrs.get("gen_ai.usage.output_tokens"))
        .or_else(|| count(attrs.get("gen_ai.usage.completion_tokens")));
    if input.is_none() && output.is_none() {
        return None;
    }
    let n = |x: Option<u64>| {
        x.map_or(Value::Null, |x| {
            Value::Int(Int::parse(&x.to_string()).expect("digits"))
        })
    };
    totals.input_tokens += input.unwrap_or(0);
    totals.output_tokens += output.unwrap_or(0);
    Some(Value::object([
        ("input_tokens".to_string(), n(input)),
        ("output_tokens".to_string(), n(output)),
    ]))
}

fn event(
    span: &Value,
    resource: Option<&Value>,
    scope: Option<&str>,
    at: &str,
    totals: &mut Totals,
) -> Result<Event, TraceError> {
    let span_id = span_id(span, at)?;
    let text = |k: &str| non_empty_str(span, k);
    let trace_id = text("traceId").unwrap_or("");
    let attrs = match span.get("attributes") {
        Some(a) => attributes(a, at)?,
        None => Value::Object(Vec::new()),
    };
    let attr_str = |k: &str| non_empty_str(&attrs, k);
    let model = attr_str("gen_ai.response.model").or_else(|| attr_str("gen_ai.request.model"));
    let tool = attr_str("gen_ai.tool.name");
    let operation = attr_str("gen_ai.operation.name");

    let mut body: Vec<(String, Value)> = Vec::new();
    let mut put = |k: &str, v: Value| body.push((k.to_string(), v));
    put("name", Value::str(text("name").unwrap_or("")));
    put("trace_id", Value::str(trace_id));
    put("span_id", Value::str(span_id));
    if let Some(p) = text("parentSpanId") {
        put("parent_span_id", Value::str(p));
    }
    for (from, to) in [
        ("kind", "span_kind"),
        ("startTimeUnixNano", "start_time_unix_nano"),
        ("endTimeUnixNano", "end_time_unix_nano"),
        ("status", "status"),
    ] {
        if let Some(v) = span.get(from) {
            put(to, v.clone());
        }
    }
    if let Some(op) = operation {
        put("operation", Value::str(op));
    }
    if let Some(m) = model {
        put("model", Value::str(m));
        totals.models.push(m.to_string());
    }
    if let Some(usage) = span_usage(&attrs, totals) {
        put("usage", usage);
    }
    if let Some(t) = tool {
        put("tool", Value::str(t));
        totals.tool_calls += 1;
        totals.tools.push(t.to_string());
    }
    put("attributes", attrs.clone());
    if let Some(r) = resource {
        put("resource", r.clone());
    }
    if let Some(s) = scope {
        put("scope", Value::str(s));
    }
    for (from, to) in [("events", "events"), ("links", "links")] {
        if let Some(v) = span.get(from) {
            put(to, v.clone());
        }
    }
    let scoped = |id: &str| Value::Str(format!("{trace_id}/{id}"));
    Ok(Event {
        actor: text("name").unwrap_or(span_id).to_string(),
        kind: operation.unwrap_or("span").to_string(),
        id: Some(scoped(span_id)),
        parent_id: text("parentSpanId").map(scoped),
        payload: Value::object(body),
    })
}
