//! The flight recorder as surface operations: `import-trace` (a trace folded into Forum's
//! `forum.flight-recorder/1` record, and optionally written as a new ledger of the repository)
//! and `mine` (the same fold as one `forum.gradable-trajectory/1` row). The CLI, the daemon and
//! the MCP server serialize the same reports.
//!
//! The fold itself is [`crate::flight`] (pure); this module turns its errors into
//! [`Error`]s (bad input: [`super::Class::Usage`], exit 2 as Forum's) and writes ledgers
//! through the git store.

use serde::{Serialize, Serializer};

use super::{Error, Report, Result};
use crate::flight::{self, Folded, Format};
use crate::ledger::canonical::Value;
use crate::ledger::{NewEntry, Storage};
use crate::store::git::GitStore;

/// Where `import-trace --ledger` wrote the trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Written {
    /// The new ledger's name.
    pub(crate) ledger: String,
    /// Entries written (the trace's events).
    pub(crate) entries: u64,
    /// The ledger's checkpoint after the write: the record's `merkle_root`.
    pub(crate) checkpoint: String,
    /// The ledger's tip commit.
    pub(crate) commit: String,
}

/// Forum's `forum.flight-recorder/1` record, plus, beyond Forum, where it was written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FlightRecord {
    /// The record, keys in Forum's order.
    pub(crate) record: Value,
    /// The ledger written, when one was asked for.
    pub(crate) written: Option<Written>,
}

impl FlightRecord {
    /// The record as Forum prints it (`json.dumps(record, indent=2)`), with `written` last when
    /// a ledger was written.
    pub(crate) fn text(&self) -> String {
        let mut v = self.record.clone();
        if let (Some(w), Value::Object(m)) = (&self.written, &mut v) {
            let count = crate::ledger::canonical::Int::parse(&w.entries.to_string())
                .map_or(Value::Null, Value::Int);
            let w = Value::object([
                ("ledger".to_string(), Value::str(&w.ledger)),
                ("entries".to_string(), count),
                ("checkpoint".to_string(), Value::str(&w.checkpoint)),
                ("commit".to_string(), Value::str(&w.commit)),
            ]);
            m.push(("written".to_string(), w));
        }
        v.python_pretty()
    }
}

impl Serialize for FlightRecord {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut v = self.record.to_serde();
        if let (Some(w), serde_json::Value::Object(m)) = (&self.written, &mut v) {
            m.insert(
                "written".to_string(),
                serde_json::to_value(w).map_err(serde::ser::Error::custom)?,
            );
        }
        v.serialize(s)
    }
}

impl Report for FlightRecord {
    const SCHEMA: &'static str = flight::SCHEMA;
}

/// Forum's `forum.gradable-trajectory/1` row of a folded trace.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MinedRow {
    pub(crate) row: Value,
}

impl MinedRow {
    /// The row as Forum prints it (`json.dumps(row, indent=2)`).
    pub(crate) fn text(&self) -> String {
        self.row.python_pretty()
    }

    /// The row as one JSONL line (`json.dumps(row, sort_keys=True)`, as Forum appends it).
    pub(crate) fn jsonl_line(&self) -> String {
        crate::report::dumps_sorted(&self.row, true)
    }

    /// The seal.
    pub(crate) fn row_hash(&self) -> &str {
        self.row
            .get("row_hash")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

impl Serialize for MinedRow {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.row.to_serde().serialize(s)
    }
}

impl Report for MinedRow {
    const SCHEMA: &'static str = crate::report::gradable::GRADABLE_SCHEMA;
}

/// The format called `name`, or a usage error listing the known ones.
pub(crate) fn format(name: &str) -> Result<Format> {
    Format::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
        Error::usage(format!(
            "unknown trace format {name:?}; use one of {}",
            known.join(", ")
        ))
    })
}

/// Folds `text` as a trace of `format`; `command` prefixes the error (`import-trace`, `mine`).
pub(crate) fn fold(text: &str, format: Format, command: &str) -> Result<Folded> {
    flight::import(text, format).map_err(|e| Error::usage(format!("{command}: {e}")))
}

/// `import-trace`: the record of the trace in `text`.
pub(crate) fn import_trace(text: &str, format: Format) -> Result<FlightRecord> {
    let f = fold(text, format, "import-trace")?;
    Ok(FlightRecord {
        record: flight::record(&f),
        written: None,
    })
}

/// `import-trace --ledger NAME`: the record, with the trace written as the new ledger of
/// `store` (named `ledger`). The ledger then holds exactly the record's entries (same hashes,
/// its checkpoint the record's `merkle_root`), as commits that push, prove and verify like any
/// other. A ledger that already exists is refused and left as it was; so is a trace with an
/// event no ledger entry may hold (an empty or over-long actor or kind, a control character):
/// nothing is written unless everything can be.
pub(crate) fn import_trace_into(
    text: &str,
    format: Format,
    store: &mut GitStore,
    ledger: &str,
) -> Result<FlightRecord> {
    let f = fold(text, format, "import-trace")?;
    if store.exists()? {
        return Err(Error::usage(format!(
            "import-trace: ledger {ledger:?} already exists; write the trace into a new ledger with --ledger NEWNAME"
        )));
    }
    let mut items = Vec::with_capacity(f.items.len());
    for (e, body) in &f.items {
        let new = NewEntry {
            actor: e.actor.clone(),
            kind: e.kind.clone(),
            causal_parent: e.causal_parent,
            payload: body.clone(),
            ts: e.ts,
        };
        let canonical = new.validate().map_err(|m| {
            Error::usage(format!(
                "import-trace: event #{} cannot be a ledger entry ({m}); fix the trace, or leave out --ledger to only print its record",
                e.seq
            ))
        })?;
        items.push((e.clone(), Some(canonical)));
    }
    let commit = store.import_entries(&items)?;
    store.sync()?;
    let record = flight::record(&f);
    let checkpoint = f.merkle_root();
    Ok(FlightRecord {
        record,
        written: Some(Written {
            ledger: ledger.to_string(),
            entries: f.items.len() as u64,
            checkpoint,
            commit: commit.to_string(),
        }),
    })
}

/// `mine`: the gradable row of the trace in `text`, graded with `min_checks`.
pub(crate) fn mine(text: &str, format: Format, min_checks: u64) -> Result<MinedRow> {
    let f = fold(text, format, "mine")?;
    Ok(MinedRow {
        row: flight::mine(&f, min_checks),
    })
}

/// The trace of a daemon or MCP call: `trace` as a string is the trace's text (any format,
/// JSONL included); any other JSON value is the trace itself, written back as JSON text with
/// its numbers as they came.
pub(crate) fn trace_text(trace: &Value) -> String {
    match trace {
        Value::Str(s) => s.clone(),
        other => other.canonical(),
    }
}
