//! Secrets in what a run writes: every body the run witnesses passes [`Run::screen`] before it
//! is hashed. Under `redact` the body is written with markers and a `secret_redacted` entry
//! follows it, naming the rules, the entry and the markers' spans; under `block` nothing of the
//! body is written: a `secret_blocked` entry witnesses the refusal (rules, spans and the
//! secrets' fingerprints, never the secrets) and the run stops with [`RunError::SecretBlocked`].

use serde_json::json;

use crate::ledger::canonical::Value;
use crate::ledger::{Entry, NewEntry, Storage, kind};
use crate::secrets::{Hit, Screened};

use super::engine::Run;
use super::{Event, RunError, lock};

/// The hits as the entries record them.
fn hits_value(hits: &[Hit]) -> Value {
    Value::Array(hits.iter().map(Hit::to_value).collect())
}

/// The distinct rules of `hits`, in order.
fn rules_of(hits: &[Hit]) -> Vec<String> {
    crate::secrets::rules_of(hits)
        .into_iter()
        .map(str::to_string)
        .collect()
}

impl Run<'_, '_> {
    /// Scans `new` before it is hashed: `Ok(None)` when it is clean (or is one of the entries
    /// this module writes), `Ok(Some(hits))` when its body was replaced by the redacted one,
    /// and `Err(SecretBlocked)` (after witnessing `secret_blocked`) when the policy blocks it.
    /// A run that was blocked once refuses everything after.
    pub(super) fn screen(
        &self,
        store: &mut (dyn Storage + Send),
        new: &mut NewEntry,
    ) -> Result<Option<Vec<Hit>>, RunError> {
        if let Some((witnessed, request_seq, rules)) = lock(&self.secret_block).clone() {
            return Err(RunError::SecretBlocked {
                witnessed,
                request_seq,
                rules,
            });
        }
        if new.kind == kind::SECRET_REDACTED || new.kind == kind::SECRET_BLOCKED {
            return Ok(None);
        }
        match self.opts.secrets.check(&new.payload) {
            Screened::Clean => Ok(None),
            Screened::Redacted(body, hits) => {
                new.payload = body;
                Ok(Some(hits))
            }
            Screened::Blocked(hits) => {
                let rules = rules_of(&hits);
                let request_seq = *lock(&self.request_seq);
                let named: Vec<String> = hits
                    .iter()
                    .map(|h| format!("{} {}", h.rule, h.fingerprint))
                    .collect();
                let reason = format!(
                    "a {} entry by {} carried {} ({}); the secrets policy blocks it, so the run stopped and nothing of that body was written (allow_fingerprints under [secrets] accepts one that is no secret)",
                    new.kind,
                    new.actor,
                    if hits.len() == 1 {
                        "a secret".to_string()
                    } else {
                        format!("{} secrets", hits.len())
                    },
                    named.join(", ")
                );
                let e = store.append(NewEntry {
                    actor: "secrets".into(),
                    kind: kind::SECRET_BLOCKED.into(),
                    causal_parent: request_seq.map(|r| r as i64).or(new.causal_parent),
                    payload: Value::object([
                        ("refused_kind".to_string(), Value::str(&new.kind)),
                        ("refused_actor".to_string(), Value::str(&new.actor)),
                        ("rules".to_string(), Value::from_serde(&json!(rules))),
                        ("findings".to_string(), hits_value(&hits)),
                        ("reason".to_string(), Value::str(&reason)),
                    ]),
                    ts: new.ts,
                })?;
                store.sync()?;
                lock(&self.written).push(e.seq);
                self.env.progress.event(&Event::Stopped {
                    reason: format!("secret blocked ({})", rules.join(", ")),
                });
                *lock(&self.secret_block) = Some((e.seq, request_seq, rules.clone()));
                Err(RunError::SecretBlocked {
                    witnessed: e.seq,
                    request_seq,
                    rules,
                })
            }
        }
    }

    /// Witnesses where the secrets of `entry` were redacted (its seq and hash, the rules and
    /// the markers' spans).
    pub(super) fn witness_redaction(
        &self,
        store: &mut (dyn Storage + Send),
        entry: &Entry,
        hits: &[Hit],
    ) -> Result<(), RunError> {
        let e = store.append(crate::secrets::redaction_entry(entry, hits))?;
        lock(&self.written).push(e.seq);
        Ok(())
    }
}
