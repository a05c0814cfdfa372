//! The flight recorder (forum-spec §21, Forum's `flight_recorder.py`): an agent trace written by
//! another tool is folded into a ledger, so the run it records gains a hash chain, a Merkle root
//! and causal parents that can be checked.
//!
//! A trace is read per [`Format`] into [`Event`]s (actor, kind, id, parent id, payload); the
//! events are then folded in order with a counter clock (1.0, 2.0, …). A parent id resolves to
//! the seq of an *earlier* event with that id; an id seen nowhere before is a dangling parent:
//! the entry becomes a root and the count goes up. [`record`] is Forum's
//! `forum.flight-recorder/1` record of the fold, [`mine`] its `forum.gradable-trajectory/1`
//! row.
//!
//! Forum's four formats (langsmith, otel, agentops, generic) map exactly as Forum maps them
//! ([`forum`]), so every hash agrees with Forum's. Two more are this project's own: OTLP/JSON
//! as the OpenTelemetry collector writes it ([`otlp`]) and Claude Code session transcripts
//! ([`claude`]).
//!
//! Pure: text in, values out. Reading the trace (with [`MAX_TRACE_BYTES`]) is the caller's.

pub(crate) mod claude;
pub(crate) mod forum;
pub(crate) mod otlp;

#[cfg(test)]
mod tests;

use crate::ledger::canonical::{self, Value};
use crate::ledger::{Entry, GENESIS, hash, merkle_root};

/// The largest trace read from a file or standard input, in bytes (64 MiB).
pub(crate) const MAX_TRACE_BYTES: u64 = 64 * 1024 * 1024;

/// The record's schema name (Forum's).
pub(crate) const SCHEMA: &str = "forum.flight-recorder/1";

/// Forum's note on how to check a record (kept exactly: it is part of Forum's output).
pub(crate) const RECHECK: &str = "re-run import_trace over the same trace and compare the merkle_root; tamper any entry and verify() fails";

/// The trace formats read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// LangChain / LangSmith runs (Forum's).
    Langsmith,
    /// OpenTelemetry spans as flat objects (Forum's).
    Otel,
    /// AgentOps events (Forum's).
    Agentops,
    /// Events already shaped as `{actor, kind, payload, id, parent}` (Forum's).
    Generic,
    /// OTLP/JSON: `resourceSpans[].scopeSpans[].spans[]` (ours).
    Otlp,
    /// Claude Code session transcripts, one JSON object per line (ours).
    ClaudeCode,
}

impl Format {
    /// Every format, Forum's first.
    pub(crate) const ALL: [Format; 6] = [
        Format::Langsmith,
        Format::Otel,
        Format::Agentops,
        Format::Generic,
        Format::Otlp,
        Format::ClaudeCode,
    ];

    /// The name used on the command line and in the record.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Format::Langsmith => "langsmith",
            Format::Otel => "otel",
            Format::Agentops => "agentops",
            Format::Generic => "generic",
            Format::Otlp => "otlp",
            Format::ClaudeCode => "claude-code",
        }
    }

    /// The format called `name`.
    pub(crate) fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// One step of a trace, ready to be folded.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    pub(crate) actor: String,
    pub(crate) kind: String,
    /// The id later events name as their parent (`None`: no id).
    pub(crate) id: Option<Value>,
    /// The id of the parent event (`None`: a root).
    pub(crate) parent_id: Option<Value>,
    /// The entry's body.
    pub(crate) payload: Value,
}

/// Why a trace cannot be folded: one line naming the problem (without the command's name).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct TraceError(pub(crate) String);

fn err(message: impl Into<String>) -> TraceError {
    TraceError(message.into())
}

/// A fold: the entries with their bodies, the number of dangling parents, and the format.
#[derive(Debug, Clone)]
pub(crate) struct Folded {
    pub(crate) format: Format,
    pub(crate) items: Vec<(Entry, Value)>,
    pub(crate) dangling: u64,
    /// Totals of the formats that carry them (models, tokens, tools); `None` for Forum's.
    pub(crate) totals: Option<Totals>,
}

/// What a trace says about model use, for the formats that say it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    /// Models named, sorted, each once.
    pub(crate) models: Vec<String>,
    pub(crate) input_tokens: u64,
    pub(crate) output_tokens: u64,
    /// Tool calls made.
    pub(crate) tool_calls: u64,
    /// Tools called, sorted, each once.
    pub(crate) tools: Vec<String>,
}

impl Totals {
    fn to_value(&self) -> Value {
        let strs = |v: &[String]| Value::Array(v.iter().map(Value::str).collect());
        Value::object([
            ("models".to_string(), strs(&self.models)),
            ("input_tokens".to_string(), uint(self.input_tokens)),
            ("output_tokens".to_string(), uint(self.output_tokens)),
            ("tool_calls".to_string(), uint(self.tool_calls)),
            ("tools".to_string(), strs(&self.tools)),
        ])
    }

    fn finish(mut self) -> Totals {
        for v in [&mut self.models, &mut self.tools] {
            v.sort();
            v.dedup();
        }
        self
    }
}

fn uint(n: u64) -> Value {
    Value::Int(canonical::Int::parse(&n.to_string()).expect("digits"))
}

/// Reads `text` as a trace of format `fmt`.
pub(crate) fn read(text: &str, fmt: Format) -> Result<(Vec<Event>, Option<Totals>), TraceError> {
    match fmt {
        Format::Otlp => otlp::events(text).map(|(e, t)| (e, Some(t.finish()))),
        Format::ClaudeCode => claude::events(text).map(|(e, t)| (e, Some(t.finish()))),
        _ => forum::events(&parse_json(text)?, fmt).map(|e| (e, None)),
    }
}

/// Reads and folds `text` as a trace of format `fmt`: [`read`], then [`fold`].
pub(crate) fn import(text: &str, fmt: Format) -> Result<Folded, TraceError> {
    let (events, totals) = read(text, fmt)?;
    let mut f = fold(fmt, &events)?;
    f.totals = totals;
    Ok(f)
}

/// Parses a whole trace as one JSON text, the way Python's `json.loads` reads it.
pub(crate) fn parse_json(text: &str) -> Result<Value, TraceError> {
    canonical::parse(text).map_err(|e| {
        let (line, col) = line_col(text, e.offset);
        err(format!(
            "cannot read the trace: it is not JSON ({} at line {line}, column {col}); give a JSON list of events",
            e.message
        ))
    })
}

/// 1-based line and column of byte `offset` in `text`.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text.as_bytes()[..offset.min(text.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let col = String::from_utf8_lossy(&before[start..]).chars().count() + 1;
    (line, col)
}

/// How an id compares with another, as a Python dict key compares: `1`, `1.0` and `true` are
/// one key; `"1"` is another.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum IdKey {
    Str(String),
    Num(String),
    /// Never equal to any other key (Python's NaN is not equal to itself).
    Unique(usize),
}

fn id_key(v: &Value, event: usize, what: &str) -> Result<IdKey, TraceError> {
    Ok(match v {
        Value::Str(s) => IdKey::Str(s.clone()),
        Value::Bool(b) => IdKey::Num(u8::from(*b).to_string()),
        Value::Int(i) => IdKey::Num(i.as_str().to_string()),
        Value::Float(f) if f.is_nan() => IdKey::Unique(event),
        Value::Float(f) if f.is_finite() && f.fract() == 0.0 => {
            let digits = format!("{f:.0}");
            IdKey::Num(
                canonical::Int::parse(&digits)
                    .map(|i| i.as_str().to_string())
                    .unwrap_or(digits),
            )
        }
        Value::Float(f) => IdKey::Num(canonical::python_float_repr(*f)),
        Value::Null => IdKey::Str(String::new()),
        Value::Array(_) | Value::Object(_) => {
            let shape = if matches!(v, Value::Array(_)) {
                "a list"
            } else {
                "an object"
            };
            return Err(err(format!(
                "event #{event} has {what} that is {shape}; ids must be strings or numbers"
            )));
        }
    })
}

/// Folds `events` into a fresh ledger with the counter clock (Forum's `import_trace`).
pub(crate) fn fold(format: Format, events: &[Event]) -> Result<Folded, TraceError> {
    let mut seen: std::collections::HashMap<IdKey, u64> = std::collections::HashMap::new();
    let mut items: Vec<(Entry, Value)> = Vec::with_capacity(events.len());
    let mut dangling = 0u64;
    for (i, ev) in events.iter().enumerate() {
        let mut parent = None;
        if let Some(pid) = &ev.parent_id {
            match seen.get(&id_key(pid, i, "a parent id")?) {
                Some(&seq) => parent = Some(seq as i64),
                None => dangling += 1,
            }
        }
        let seq = i as u64;
        let ts = (i + 1) as f64;
        let prev = items
            .last()
            .map_or(GENESIS.to_string(), |(e, _)| e.entry_hash.clone());
        let payload_hash = hash::payload_hash(&ev.payload);
        let entry_hash =
            hash::entry_hash(seq, ts, &ev.actor, &ev.kind, parent, &payload_hash, &prev);
        if let Some(id) = &ev.id {
            seen.insert(id_key(id, i, "an id")?, seq);
        }
        items.push((
            Entry {
                seq,
                ts,
                actor: ev.actor.clone(),
                kind: ev.kind.clone(),
                causal_parent: parent,
                payload_hash,
                prev_hash: prev,
                entry_hash,
            },
            ev.payload.clone(),
        ));
    }
    Ok(Folded {
        format,
        items,
        dangling,
        totals: None,
    })
}

impl Folded {
    /// The Merkle root over the entry hashes.
    pub(crate) fn merkle_root(&self) -> String {
        let hashes: Vec<&str> = self
            .items
            .iter()
            .map(|(e, _)| e.entry_hash.as_str())
            .collect();
        merkle_root(&hashes)
    }

    /// Forum's deep verification of the fold: the chain holds and every body hashes to its
    /// entry (always true for a fold; computed, not assumed).
    pub(crate) fn verified(&self) -> bool {
        let entries: Vec<Entry> = self.items.iter().map(|(e, _)| e.clone()).collect();
        crate::ledger::verify_chain(&entries).first_bad.is_none()
            && self
                .items
                .iter()
                .all(|(e, b)| hash::payload_hash(b) == e.payload_hash)
    }
}

/// The `forum.flight-recorder/1` record of a fold, keys in Forum's order. The formats that
/// carry model use add `totals` before `recheck`.
pub(crate) fn record(f: &Folded) -> Value {
    let ledger: Vec<Value> = f
        .items
        .iter()
        .map(|(e, _)| {
            Value::object([
                ("seq".to_string(), uint(e.seq)),
                ("actor".to_string(), Value::str(&e.actor)),
                ("kind".to_string(), Value::str(&e.kind)),
                (
                    "causal_parent".to_string(),
                    e.causal_parent.map_or(Value::Null, Value::int),
                ),
                ("entry_hash".to_string(), Value::str(&e.entry_hash)),
            ])
        })
        .collect();
    let mut members = vec![
        ("schema".to_string(), Value::str(SCHEMA)),
        ("format".to_string(), Value::str(f.format.name())),
        ("entries".to_string(), uint(f.items.len() as u64)),
        ("verified".to_string(), Value::Bool(f.verified())),
        ("merkle_root".to_string(), Value::Str(f.merkle_root())),
        ("dangling_parents".to_string(), uint(f.dangling)),
        ("ledger".to_string(), Value::Array(ledger)),
    ];
    if let Some(t) = &f.totals {
        members.push(("totals".to_string(), t.to_value()));
    }
    members.push(("recheck".to_string(), Value::str(RECHECK)));
    Value::object(members)
}

/// Forum's recipe in a gradable row. The row's seal covers it, so a row equal to Forum's must
/// carry these exact words.
pub(crate) const GRADABLE_RECHECK: &str = "recompute each entry_hash from its fields (sha256 of seq|ts(.6f)|actor|kind|causal_parent|payload_hash|prev_hash joined by \\x1f), fold the RFC6962 merkle (0x00 leaf / 0x01 node, promote-odd) and compare to merkle_root; for each check_payload confirm canonical_hash(body)==payload_hash of a witnessed entry, read ok from that bound body, and recompute reward from the bound checks. Tamper any entry OR any check body -> a hash mismatch; the grade cannot be forged apart from the merkle-witnessed record.";

/// `mine`: the fold as one `forum.gradable-trajectory/1` row, graded with `min_checks` (Forum's
/// `gradable_record` over the folded ledger).
///
/// The row comes from [`crate::report::gradable_record`]; two of its members are then set the
/// way Forum's `mine` sets them, and the row is sealed again: `oracle.recheck` carries
/// [`GRADABLE_RECHECK`], and `budget.model_calls` counts `result` entries whose body has a
/// `model` (Forum's `_model_calls`).
pub(crate) fn mine(f: &Folded, min_checks: u64) -> Value {
    let snapshot = crate::report::Snapshot::from_items(
        f.items
            .iter()
            .map(|(e, b)| (e.clone(), Some(b.clone())))
            .collect(),
    );
    let mut row = crate::report::gradable_record(&snapshot, None, min_checks);
    let model_calls = f
        .items
        .iter()
        .filter(|(e, b)| e.kind == crate::ledger::kind::RESULT && b.get("model").is_some())
        .count() as u64;
    if let Some(Value::Object(oracle)) = member_mut(&mut row, "oracle") {
        for (k, v) in oracle.iter_mut() {
            if k == "recheck" {
                *v = Value::str(GRADABLE_RECHECK);
            }
        }
    }
    if let Some(Value::Object(budget)) = member_mut(&mut row, "budget") {
        for (k, v) in budget.iter_mut() {
            if k == "model_calls" {
                *v = uint(model_calls);
            }
        }
    }
    let seal = crate::report::gradable::row_hash(&row);
    if let Some(v) = member_mut(&mut row, "row_hash") {
        *v = Value::Str(seal);
    }
    row
}

fn member_mut<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    match v {
        Value::Object(m) => m.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
        _ => None,
    }
}
