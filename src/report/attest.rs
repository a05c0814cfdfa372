//! What a `--work` run shipped, as an in-toto Statement v1 whose predicate is SLSA Provenance
//! v1: the statement's types ([`Statement`] and its parts, which refuse unknown fields as the
//! in-toto protos do), the facts a run's record gives ([`RunRecord::from_items`]), and the
//! statement built from them ([`statement`]). The same builder serves `attest` and `attest
//! --verify`, which rebuilds the statement from the ledger and compares.
//!
//! The shape (see docs/attest.md for the whole of it):
//!
//! * `subject`: the run branch's tip (`forum/run-SEQ`) and each merged change commit
//!   (`change/TASK`), by git object id under `gitCommit` (the in-toto digest set names both the
//!   40-digit SHA-1 and the 64-digit SHA-256 object ids so);
//! * `buildDefinition`: [`BUILD_TYPE`]; `externalParameters` the request as recorded (less its
//!   runtime); `internalParameters` the ledger, the run and its request entry;
//!   `resolvedDependencies` the base commit, the runtime, roster and policy digests, and each
//!   seat's model;
//! * `runDetails`: the builder ([`BUILDER_ID`] and its version), the request's and the last
//!   entry's times, and as byproducts the ledger (its first entry's hash), the checkpoint, the
//!   signed note when there is one, and each `ship` and gate entry with the rules that decided
//!   it.
//!
//! Pure: the caller reads the ledger, the repository and the clock-free facts.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};
use serde_json::{Value as J, json};

use crate::ledger::canonical::Value;
use crate::ledger::{Entry, hash, kind};

/// The statement type of in-toto v1.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// SLSA Provenance v1.
pub const PREDICATE_TYPE: &str = "https://slsa.dev/provenance/v1";
/// The build type of a git forum `--work` run: a URN of ours, documented in docs/attest.md.
pub const BUILD_TYPE: &str = "urn:git-forum:buildtype:work-run:v1";
/// The builder: git forum itself.
pub const BUILDER_ID: &str = "urn:git-forum:builder";
/// The prefix of a seat's model as a resource URI (the model's name percent-encoded after it).
pub const MODEL_URN: &str = "urn:git-forum:model:";

/// An in-toto ResourceDescriptor: at least one of `uri`, `digest`, `content` is set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Resource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<BTreeMap<String, String>>,
    /// Base64 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub download_location: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<J>,
}

/// The in-toto Statement v1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Statement {
    #[serde(rename = "_type")]
    pub statement_type: String,
    pub subject: Vec<Resource>,
    pub predicate_type: String,
    pub predicate: Provenance,
}

/// SLSA Provenance v1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Provenance {
    pub build_definition: BuildDefinition,
    pub run_details: RunDetails,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BuildDefinition {
    pub build_type: String,
    pub external_parameters: J,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internal_parameters: Option<J>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resolved_dependencies: Vec<Resource>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RunDetails {
    pub builder: Builder,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub byproducts: Vec<Resource>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Builder {
    pub id: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub version: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub builder_dependencies: Vec<Resource>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Metadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invocation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_on: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_on: Option<String>,
}

/// A `ship` or gate entry of the run: what decided a change (or a wave), and by which rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided {
    pub seq: u64,
    /// `ship/TASK` or `gate/wave-N`.
    pub name: String,
    pub entry_hash: String,
    pub decision: Option<String>,
    pub change: Option<u64>,
    /// The body's `rules` (`{policy, roster, runtime}` digests), absent from older runs.
    pub rules: Option<J>,
}

/// What a run's record says, as the statement needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    pub run: u64,
    pub request_hash: String,
    /// The request body without its `runtime`.
    pub request: J,
    /// The recorded runtime's digest (its payload hash: SHA-256 of its canonical JSON).
    pub runtime_digest: Option<String>,
    pub base: String,
    pub branch: Option<String>,
    pub run_branch: String,
    /// `(task, commit, change seq)` of each change merged, in plan order.
    pub merged: Vec<(String, String, u64)>,
    pub decided: Vec<Decided>,
    /// `(seat, model)`, sorted, each once.
    pub seats: Vec<(String, String)>,
    pub started: f64,
    pub finished: f64,
    /// The run's last entry.
    pub last: u64,
}

/// What the repository and the ledger add to the run's record.
#[derive(Debug, Clone, PartialEq)]
pub struct Context {
    /// The ledger's name and the hash of its first entry (the ledger's identity).
    pub ledger: String,
    pub ledger_id: String,
    /// The run branch's tip, when the repository has it.
    pub tip: Option<String>,
    /// The checkpoint attested: the number of entries and Forum's root over them.
    pub size: u64,
    pub root: String,
    /// The signed C2SP note of that checkpoint, when there is one.
    pub note: Option<String>,
    /// git forum's version.
    pub version: String,
}

fn text(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// The model a body names (`model`, else its usage's).
fn model_of(b: &Value) -> Option<String> {
    text(b.get("model")).or_else(|| text(b.get("usage").and_then(|u| u.get("model"))))
}

/// The seat an entry's model sat in, by its kind: the planner, a worker (a task's result),
/// the validator, the pre-ship gate (the orchestrator seat), the synthesizer.
fn seat_of(e: &Entry, b: &Value) -> Option<&'static str> {
    match e.kind.as_str() {
        kind::PLAN => Some("planner"),
        kind::RESULT if b.get("id").is_some() => Some("worker"),
        kind::RESULT => Some("synthesizer"),
        kind::VERDICT => Some("validator"),
        kind::SHIP => Some("orchestrator"),
        _ => None,
    }
}

/// The `ship` or gate entry `e` as a decision, when it is one.
fn decided(e: &Entry, b: &Value) -> Option<Decided> {
    let name = match e.kind.as_str() {
        kind::SHIP => format!("ship/{}", text(b.get("task"))?),
        kind::GATE_PENDING => format!("gate/wave-{}", b.get("wave")?.to_serde()),
        _ => return None,
    };
    Some(Decided {
        seq: e.seq,
        name,
        entry_hash: e.entry_hash.clone(),
        decision: text(b.get("decision")),
        change: b
            .get("change")
            .and_then(|c| c.to_serde().as_u64())
            .filter(|_| e.kind == kind::SHIP),
        rules: b.get("rules").map(Value::to_serde),
    })
}

impl RunRecord {
    /// The record of run `run` from its entries (the run's slice, request first). `Err` says
    /// in one line why the run cannot be attested.
    pub fn from_items(items: &[(Entry, Option<Value>)], run: u64) -> Result<RunRecord, String> {
        let Some((req, Some(body))) = items.iter().find(|(e, _)| e.seq == run) else {
            return Err(format!("run {run}'s request has no body (redacted)"));
        };
        let work = body
            .get("work")
            .filter(|w| matches!(w, Value::Object(_)))
            .ok_or_else(|| {
                format!("run {run} did not work in the repository (not a --work run): it shipped nothing to attest")
            })?;
        let base =
            text(work.get("base")).ok_or_else(|| format!("run {run} recorded no base commit"))?;
        let mut request = body.to_serde();
        let runtime = request.as_object_mut().and_then(|o| o.remove("runtime"));
        let runtime_digest = runtime
            .filter(|r| !r.is_null())
            .map(|r| hash::payload_hash(&Value::from_serde(&r)));
        let work_seen = super::work_report::work(items).unwrap_or_default();
        let mut merged: Vec<(String, String, u64)> = work_seen
            .tasks
            .iter()
            .filter(|t| t.state() == "merged")
            .filter_map(|t| {
                let (seq, commit, _, _) = t.change.as_ref()?;
                Some((t.id.clone(), commit.clone()?, *seq))
            })
            .collect();
        // Tasks of a wave finish in any order; the run branch takes their changes in plan
        // order, and so do the subjects, so two attestations of one record list them alike.
        let order = plan_order(items, run);
        merged.sort_by_key(|(task, _, seq)| (order.get(task).copied().unwrap_or(usize::MAX), *seq));
        let mut seats = std::collections::BTreeSet::new();
        let mut decided_all = Vec::new();
        for (e, b) in items {
            let Some(b) = b else { continue };
            if let (Some(seat), Some(m)) = (seat_of(e, b), model_of(b)) {
                seats.insert((seat.to_string(), m));
            }
            decided_all.extend(decided(e, b));
        }
        Ok(RunRecord {
            run,
            request_hash: req.entry_hash.clone(),
            request,
            runtime_digest,
            base,
            branch: text(work.get("branch")),
            run_branch: text(work.get("run_branch")).unwrap_or_else(|| format!("forum/run-{run}")),
            merged,
            decided: decided_all,
            seats: seats.into_iter().collect(),
            started: req.ts,
            finished: items.iter().map(|(e, _)| e.ts).fold(req.ts, f64::max),
            last: items.iter().map(|(e, _)| e.seq).max().unwrap_or(run),
        })
    }
}

/// `{key: value}` as a digest set.
fn digest(key: &str, value: &str) -> Option<BTreeMap<String, String>> {
    Some(BTreeMap::from([(key.to_string(), value.to_string())]))
}

/// A seat's model as a resource URI: [`MODEL_URN`] then the name, every byte but the URI's
/// unreserved characters percent-encoded.
pub fn model_uri(model: &str) -> String {
    let mut out = MODEL_URN.to_string();
    for b in model.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Days since 1970-01-01 to a civil date (the proleptic Gregorian calendar): Howard Hinnant's
/// civil-from-days, a dozen lines, so no date crate is needed for it.
pub(crate) fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// A ledger time (seconds since the epoch) as RFC 3339 in UTC, with microseconds when it has
/// a fraction: the form protobuf's Timestamp reads.
pub fn rfc3339(ts: f64) -> String {
    let micros = (ts * 1e6).round() as i64;
    let (secs, frac) = (micros.div_euclid(1_000_000), micros.rem_euclid(1_000_000));
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil(days);
    let (hh, mm, ss) = (rest / 3600, rest % 3600 / 60, rest % 60);
    let frac = if frac == 0 {
        String::new()
    } else {
        format!(".{frac:06}")
    };
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}{frac}Z")
}

/// Each distinct value of `rules.KEY` among the decisions, in the order first seen.
fn rule_digests(decided: &[Decided], key: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for d in decided {
        if let Some(v) = d
            .rules
            .as_ref()
            .and_then(|r| r.get(key))
            .and_then(J::as_str)
            && !out.iter().any(|o| o == v)
        {
            out.push(v.to_string());
        }
    }
    out
}

/// The resolved dependencies: the base commit, the runtime, roster and policy digests, the
/// seats' models.
fn dependencies(r: &RunRecord) -> Vec<Resource> {
    let mut deps = vec![Resource {
        name: Some("base".into()),
        digest: digest("gitCommit", &r.base),
        annotations: r.branch.as_ref().map(|b| json!({ "branch": b })),
        ..Resource::default()
    }];
    if let Some(d) = &r.runtime_digest {
        deps.push(Resource {
            name: Some("runtime".into()),
            digest: digest("sha256", d),
            ..Resource::default()
        });
    }
    for key in ["roster", "policy"] {
        for d in rule_digests(&r.decided, key) {
            deps.push(Resource {
                name: Some(key.into()),
                digest: digest("sha256", &d),
                ..Resource::default()
            });
        }
    }
    for (seat, model) in &r.seats {
        deps.push(Resource {
            name: Some(format!("seat/{seat}")),
            uri: Some(model_uri(model)),
            annotations: Some(json!({ "seat": seat, "model": model })),
            ..Resource::default()
        });
    }
    deps
}

/// The byproducts: the ledger, the checkpoint, its signed note, each decision.
fn byproducts(r: &RunRecord, c: &Context) -> Vec<Resource> {
    let mut out = vec![
        Resource {
            name: Some("ledger".into()),
            digest: digest("sha256", &c.ledger_id),
            annotations: Some(json!({ "name": c.ledger })),
            ..Resource::default()
        },
        Resource {
            name: Some("checkpoint".into()),
            digest: digest("sha256", &c.root),
            annotations: Some(json!({ "size": c.size })),
            ..Resource::default()
        },
    ];
    if let Some(note) = &c.note {
        out.push(Resource {
            name: Some("checkpoint-note".into()),
            content: Some(B64.encode(note.as_bytes())),
            media_type: Some("text/plain; charset=utf-8".into()),
            ..Resource::default()
        });
    }
    for d in &r.decided {
        let mut a = json!({ "seq": d.seq });
        if let Some(x) = &d.decision {
            a["decision"] = json!(x);
        }
        if let Some(x) = d.change {
            a["change"] = json!(x);
        }
        if let Some(x) = &d.rules {
            a["rules"] = x.clone();
        }
        out.push(Resource {
            name: Some(d.name.clone()),
            digest: digest("sha256", &d.entry_hash),
            annotations: Some(a),
            ..Resource::default()
        });
    }
    out
}

/// Each task's place in the run's first plan (its `plan` entry after the request): wave by
/// wave, each wave in plan order.
fn plan_order(
    items: &[(Entry, Option<Value>)],
    run: u64,
) -> std::collections::HashMap<String, usize> {
    let plan = items
        .iter()
        .find(|(e, b)| e.seq > run && e.kind == crate::ledger::kind::PLAN && b.is_some());
    let Some((_, Some(body))) = plan else {
        return Default::default();
    };
    let plan = body.to_serde();
    plan["waves"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_array())
        .flatten()
        .enumerate()
        .filter_map(|(i, t)| Some((t.as_str()?.to_string(), i)))
        .collect()
}

/// The subjects: the run branch's tip, then each merged change commit.
fn subjects(r: &RunRecord, c: &Context) -> Vec<Resource> {
    let tip = c.tip.iter().map(|t| Resource {
        name: Some(r.run_branch.clone()),
        digest: digest("gitCommit", t),
        ..Resource::default()
    });
    let changes = r.merged.iter().map(|(task, commit, _)| Resource {
        name: Some(format!("change/{task}")),
        digest: digest("gitCommit", commit),
        ..Resource::default()
    });
    tip.chain(changes).collect()
}

/// The statement of run `r` in context `c`.
pub fn statement(r: &RunRecord, c: &Context) -> Statement {
    Statement {
        statement_type: STATEMENT_TYPE.into(),
        subject: subjects(r, c),
        predicate_type: PREDICATE_TYPE.into(),
        predicate: Provenance {
            build_definition: BuildDefinition {
                build_type: BUILD_TYPE.into(),
                external_parameters: r.request.clone(),
                internal_parameters: Some(json!({
                    "ledger": c.ledger,
                    "run": r.run,
                    "requestEntry": r.request_hash,
                })),
                resolved_dependencies: dependencies(r),
            },
            run_details: RunDetails {
                builder: Builder {
                    id: BUILDER_ID.into(),
                    version: BTreeMap::from([("git-forum".to_string(), c.version.clone())]),
                    builder_dependencies: Vec::new(),
                },
                metadata: Some(Metadata {
                    invocation_id: Some(format!("{}/{}", c.ledger, r.run)),
                    started_on: Some(rfc3339(r.started)),
                    finished_on: Some(rfc3339(r.finished)),
                }),
                byproducts: byproducts(r, c),
            },
        },
    }
}

/// The first place two JSON values differ, as a path (`predicate.runDetails.byproducts[2]`),
/// or `None` when they are equal.
pub fn first_difference(a: &J, b: &J, path: &str) -> Option<String> {
    match (a, b) {
        (J::Object(x), J::Object(y)) => {
            for k in x.keys().chain(y.keys()) {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => {
                        if let Some(d) = first_difference(u, v, &p) {
                            return Some(d);
                        }
                    }
                    _ => return Some(p),
                }
            }
            None
        }
        (J::Array(x), J::Array(y)) => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                if let Some(d) = first_difference(u, v, &format!("{path}[{i}]")) {
                    return Some(d);
                }
            }
            (x.len() != y.len()).then(|| format!("{path} (length {} vs {})", x.len(), y.len()))
        }
        _ => (a != b).then(|| path.to_string()),
    }
}

#[cfg(test)]
#[path = "attest_tests.rs"]
mod tests;
