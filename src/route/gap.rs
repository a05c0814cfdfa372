//! The vocabulary gap: when routing escalates again and again and no lane decides, the record
//! says so once, as a typed `vocabulary_gap` entry an operator can act on, instead of piling up
//! identical escalations. The entry is derived from the witnessed `route` entries only; it
//! creates no lane (the vocabularies in `super::lanes` stay fixed).
//!
//! The rule is Forum's: only the trailing run of undecided routes counts (a decided route ends
//! a run, since a gap is a present condition, not a memory), and below the threshold (3 unless
//! the policy's `[lanes] min_escalations` says otherwise) nothing fires. The entry carries the
//! run's length, the highest confidence in it, its first and last seq, and the operator's name
//! for the pattern (`domain_signal`); its causal parent is the last escalated route.
//!
//! Checked after every witnessed `route`, a gap is witnessed once per run: [`due_gap`] answers
//! nothing when a `vocabulary_gap` for the same run is already in the ledger. The check reads
//! the ledger back from its tip to the run's start (or to that gap), so it costs one entry read
//! per entry since the last decided route.
//!
//! Pure: the ledger is read through the [`Storage`] trait.

use crate::ledger::{NewEntry, Storage, StorageError, Value, kind};

/// How many undecided routes in a row make a gap, unless configured otherwise (Forum's).
pub const DEFAULT_MIN_ESCALATIONS: u64 = 3;

/// The domain signal of an automatic gap whose routes carry no frame domain.
const NO_DOMAIN: &str = "general";

/// One witnessed routing decision, read back from its `route` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteOutcome {
    /// The `route` entry's seq.
    pub seq: u64,
    /// The lane decided, `None` when the route escalated.
    pub decided: Option<String>,
    /// The router's confidence (0.0 when the body has none).
    pub confidence: f64,
    /// The route frame's domain, when the body has a frame.
    pub domain: Option<String>,
}

/// A gap: routing escalated `consecutive_escalations` times in a row and no lane decided.
#[derive(Debug, Clone, PartialEq)]
pub struct VocabularyGap {
    /// The name given to the pattern (what the escalated work shares).
    pub domain_signal: String,
    /// How many undecided routes the trailing run holds.
    pub consecutive_escalations: u64,
    /// The highest confidence among them.
    pub confidence_ceiling: f64,
    /// The first route of the run.
    pub first_seq: u64,
    /// The last route of the run (the entry's causal parent).
    pub last_seq: u64,
}

impl VocabularyGap {
    /// The `vocabulary_gap` entry (actor `router`, under the last escalated route), with
    /// Forum's key order.
    pub fn entry(&self, ts: f64) -> NewEntry {
        NewEntry {
            actor: "router".into(),
            kind: kind::VOCABULARY_GAP.into(),
            causal_parent: Some(self.last_seq as i64),
            payload: Value::object([
                ("domain_signal".to_string(), Value::str(&self.domain_signal)),
                (
                    "consecutive_escalations".to_string(),
                    Value::Int(self.consecutive_escalations.into()),
                ),
                (
                    "confidence_ceiling".to_string(),
                    Value::Float(self.confidence_ceiling),
                ),
                ("first_seq".to_string(), Value::Int(self.first_seq.into())),
                ("last_seq".to_string(), Value::Int(self.last_seq.into())),
            ]),
            ts,
        }
    }
}

/// A threshold below 1, refused as Forum refuses it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("min_escalations must be at least 1, found {0}")]
pub struct ThresholdError(pub i64);

/// Checks a threshold.
pub fn check_threshold(min: i64) -> Result<u64, ThresholdError> {
    if min < 1 {
        Err(ThresholdError(min))
    } else {
        Ok(min as u64)
    }
}

/// A number as Python's `float()` reads it; anything else counts as 0.0.
fn as_float(v: &Value) -> f64 {
    match v {
        Value::Float(f) => *f,
        Value::Int(i) => i.as_str().parse().unwrap_or(0.0),
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Str(s) => s.trim().parse().unwrap_or(0.0),
        _ => 0.0,
    }
}

/// The outcome a `route` entry at `seq` with body `body` records. A route is undecided when
/// its body has no `decided` or a `null` one, as Forum reads it.
pub fn route_outcome(seq: u64, body: &Value) -> RouteOutcome {
    let decided = match body.get("decided") {
        None | Some(Value::Null) => None,
        Some(Value::Str(s)) => Some(s.clone()),
        Some(other) => Some(other.canonical()),
    };
    let confidence = body.get("confidence").map_or(0.0, as_float);
    let domain = body
        .get("frame")
        .and_then(|f| f.get("domain"))
        .and_then(Value::as_str)
        .map(str::to_string);
    RouteOutcome {
        seq,
        decided,
        confidence,
        domain,
    }
}

/// The gap the trailing run of undecided routes in `outcomes` (seq order) makes, named
/// `domain_signal`, or `None` when the run is shorter than `min` (at least 1).
pub fn derive_gap(
    outcomes: &[RouteOutcome],
    domain_signal: &str,
    min: u64,
) -> Option<VocabularyGap> {
    let start = outcomes
        .iter()
        .rposition(|o| o.decided.is_some())
        .map_or(0, |i| i + 1);
    let run = &outcomes[start..];
    if (run.len() as u64) < min.max(1) {
        return None;
    }
    let ceiling = run
        .iter()
        .map(|o| o.confidence)
        .fold(f64::NEG_INFINITY, f64::max);
    Some(VocabularyGap {
        domain_signal: domain_signal.to_string(),
        consecutive_escalations: run.len() as u64,
        confidence_ceiling: ceiling,
        first_seq: run[0].seq,
        last_seq: run[run.len() - 1].seq,
    })
}

/// The name an automatic gap gives its pattern: the route-frame domain most of the run's routes
/// share (the earliest of equals), else `general`.
pub fn domain_signal(run: &[RouteOutcome]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for d in run.iter().filter_map(|o| o.domain.as_deref()) {
        match counts.iter_mut().find(|(n, _)| *n == d) {
            Some((_, c)) => *c += 1,
            None => counts.push((d, 1)),
        }
    }
    let mut best: Option<(&str, usize)> = None;
    for (d, c) in counts {
        if best.is_none_or(|(_, b)| c > b) {
            best = Some((d, c));
        }
    }
    best.map_or(NO_DOMAIN, |(d, _)| d).to_string()
}

/// The ledger's trailing run of undecided routes, read back from its tip.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trailing {
    /// The run's routes, in seq order (empty when the last route decided, or there is none).
    pub run: Vec<RouteOutcome>,
    /// The seq of a `vocabulary_gap` already witnessed for this run (same `first_seq`).
    pub witnessed: Option<u64>,
}

/// Reads the trailing run back from the tip of `store`, stopping at the first decided route.
/// A route whose body was redacted is left out (it says nothing about its decision).
pub fn trailing_run(store: &dyn Storage) -> Result<Trailing, StorageError> {
    walk_back(store, false)
}

/// [`trailing_run`]; with `stop_at_gap`, the walk ends at the first `vocabulary_gap` entry it
/// meets before a decided route (that gap is this run's: no route between it and the tip
/// decided), with `witnessed` set, so a check after each route reads back only to the gap.
fn walk_back(store: &dyn Storage, stop_at_gap: bool) -> Result<Trailing, StorageError> {
    let mut run = Vec::new();
    let mut gaps: Vec<(u64, Option<u64>)> = Vec::new();
    let mut seq = store.len()?;
    while seq > 0 {
        seq -= 1;
        let Some(e) = store.get(seq)? else { break };
        if e.kind == kind::ROUTE {
            let Some(body) = store.payload_at(seq)? else {
                continue;
            };
            let o = route_outcome(seq, &body);
            if o.decided.is_some() {
                break;
            }
            run.push(o);
        } else if e.kind == kind::VOCABULARY_GAP && stop_at_gap {
            run.reverse();
            return Ok(Trailing {
                run,
                witnessed: Some(seq),
            });
        } else if e.kind == kind::VOCABULARY_GAP {
            let first = store
                .payload_at(seq)?
                .and_then(|b| match b.get("first_seq") {
                    Some(Value::Int(i)) => i.as_u64(),
                    _ => None,
                });
            gaps.push((seq, first));
        }
    }
    run.reverse();
    let first = run.first().map(|o| o.seq);
    let witnessed = gaps
        .iter()
        .find(|(_, f)| first.is_some() && *f == first)
        .map(|(s, _)| *s);
    Ok(Trailing { run, witnessed })
}

/// The gap to witness now, after a `route` entry: the trailing run is at least `min` long
/// and no gap has been witnessed for it yet. Named by [`domain_signal`].
pub fn due_gap(store: &dyn Storage, min: u64) -> Result<Option<VocabularyGap>, StorageError> {
    let t = walk_back(store, true)?;
    if t.witnessed.is_some() {
        return Ok(None);
    }
    Ok(derive_gap(&t.run, &domain_signal(&t.run), min))
}

/// The `[lanes]` table of a policy file: `min_escalations` (an integer, at least 1).
pub fn min_escalations_from_toml(t: &toml::Table) -> Result<u64, String> {
    let mut min = DEFAULT_MIN_ESCALATIONS;
    for (key, value) in t {
        match (key.as_str(), value) {
            ("min_escalations", toml::Value::Integer(n)) => {
                min = check_threshold(*n).map_err(|e| format!("[lanes] {e}"))?;
            }
            ("min_escalations", other) => {
                return Err(format!(
                    "[lanes] min_escalations must be an integer, found {}",
                    other.type_str()
                ));
            }
            (other, _) => {
                return Err(format!(
                    "[lanes] unknown key {other:?} (expected min_escalations)"
                ));
            }
        }
    }
    Ok(min)
}
