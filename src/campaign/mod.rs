//! Campaigns: several projects of features, some owned by git forum and some by outside
//! systems, declared once in the ledger and reduced from it ever after (forum-spec §22,
//! forum-features §8). This module is pure: it parses and validates a declaration, and
//! [`status`] reduces the entries it is handed into Forum's campaign room; reading the
//! ledger, appending and dispatching belong to `surface::campaign`.
//!
//! A declaration is Forum's campaign JSON:
//! `{campaign_id, title, projects: [{project_id, owner, priority, features: [{feature_id,
//! title, agent, instruction, priority, depends_on, done_when}]}]}`. `owner` is `"forum"`
//! (git forum runs the features) or anything else, by convention `"external:<name>"` (an
//! outside system runs them and reports their status with `ingest-status`). Validation refuses
//! duplicate feature ids, a dependency on a feature nobody declared and dependency cycles, the
//! last found by Kahn layering as Forum finds it, so the refusal names the same features.

pub(crate) mod status;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use crate::plan::py_repr;
use serde_json::{Value, json};

#[cfg(test)]
pub(crate) use status::FeatureState;
pub(crate) use status::{
    Action, FeatureView, Ingest, ROOM_SCHEMA, Room, Status, blocked_status, declared_ids,
    dispatch_body, next_actions, next_features, reduce, result_snapshot, room, room_text,
    round_status,
};

/// The owner of the features git forum itself runs.
pub(crate) const FORUM_OWNER: &str = "forum";

/// One feature: a unit of work for one roster lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Feature {
    pub(crate) feature_id: String,
    pub(crate) title: String,
    pub(crate) agent: String,
    pub(crate) instruction: String,
    pub(crate) priority: i64,
    /// Feature ids anywhere in the campaign that must be witnessed done first.
    pub(crate) depends_on: Vec<String>,
    /// Acceptance criteria handed on to the dispatched task.
    pub(crate) done_when: Vec<String>,
}

/// A group of features under one owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Project {
    pub(crate) project_id: String,
    pub(crate) owner: String,
    pub(crate) priority: i64,
    pub(crate) features: Vec<Feature>,
}

impl Project {
    /// Whether an outside system owns this project (git forum never runs its features).
    pub(crate) fn external(&self) -> bool {
        self.owner != FORUM_OWNER
    }
}

/// A declared campaign.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Campaign {
    pub(crate) campaign_id: String,
    pub(crate) title: String,
    pub(crate) projects: Vec<Project>,
}

/// Why a declaration was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DeclareError {
    /// The text is not a campaign declaration (not JSON, a field missing or of the wrong type).
    #[error("{0}")]
    Invalid(String),
    /// The campaign is well formed but does not hold together (Forum's `ValueError`).
    #[error("campaign rejected: {0}")]
    Rejected(String),
}

impl Campaign {
    /// Parses a declaration from JSON text and validates it.
    pub(crate) fn parse(text: &str) -> Result<Campaign, DeclareError> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| DeclareError::Invalid(format!("the campaign is not JSON: {e}")))?;
        let c = Campaign::from_json(&v)?;
        c.validate()?;
        Ok(c)
    }

    /// Reads a declaration from a JSON value (without validating it). Optional fields take
    /// Forum's defaults: an empty title, owner `forum`, priority 0, no dependencies, no
    /// criteria.
    pub(crate) fn from_json(v: &Value) -> Result<Campaign, DeclareError> {
        let o = obj(v, "the campaign")?;
        let campaign_id = req_str(o, "campaign_id", "the campaign")?;
        let title = opt_str(o, "title", "the campaign")?;
        let mut projects = Vec::new();
        for (i, p) in opt_list(o, "projects", "the campaign")?.iter().enumerate() {
            let at = format!("projects[{i}]");
            let po = obj(p, &at)?;
            let project_id = req_str(po, "project_id", &at)?;
            let owner = match po.get("owner") {
                None => FORUM_OWNER.to_string(),
                Some(_) => req_str(po, "owner", &at)?,
            };
            let priority = opt_int(po, "priority", &at)?;
            let mut features = Vec::new();
            for (j, f) in opt_list(po, "features", &at)?.iter().enumerate() {
                let at = format!("projects[{i}].features[{j}]");
                let fo = obj(f, &at)?;
                features.push(Feature {
                    feature_id: req_str(fo, "feature_id", &at)?,
                    title: opt_str(fo, "title", &at)?,
                    agent: opt_str(fo, "agent", &at)?,
                    instruction: opt_str(fo, "instruction", &at)?,
                    priority: opt_int(fo, "priority", &at)?,
                    depends_on: str_list(fo, "depends_on", &at)?,
                    done_when: str_list(fo, "done_when", &at)?,
                });
            }
            projects.push(Project {
                project_id,
                owner,
                priority,
                features,
            });
        }
        Ok(Campaign {
            campaign_id,
            title,
            projects,
        })
    }

    /// Reads back the campaign a `campaign_declared` body holds; `None` when the body is not
    /// one.
    pub(crate) fn from_payload(body: &Value) -> Option<Campaign> {
        Campaign::from_json(body).ok()
    }

    /// Every feature, in declaration order.
    pub(crate) fn features(&self) -> impl Iterator<Item = (&Project, &Feature)> {
        self.projects
            .iter()
            .flat_map(|p| p.features.iter().map(move |f| (p, f)))
    }

    /// The feature `id` and its project.
    pub(crate) fn feature(&self, id: &str) -> Option<(&Project, &Feature)> {
        self.features().find(|(_, f)| f.feature_id == id)
    }

    /// The project `id`.
    pub(crate) fn project(&self, id: &str) -> Option<&Project> {
        self.projects.iter().find(|p| p.project_id == id)
    }

    /// Forum's `Campaign.validate`: unique feature ids, every dependency declared, no cycle.
    pub(crate) fn validate(&self) -> Result<(), DeclareError> {
        let mut ids = BTreeSet::new();
        for (_, f) in self.features() {
            if !ids.insert(f.feature_id.as_str()) {
                return Err(DeclareError::Rejected(format!(
                    "duplicate feature id: {}",
                    py_repr(&f.feature_id)
                )));
            }
        }
        for (_, f) in self.features() {
            for d in &f.depends_on {
                if !ids.contains(d.as_str()) {
                    return Err(DeclareError::Rejected(format!(
                        "feature {} depends on unknown feature {}",
                        py_repr(&f.feature_id),
                        py_repr(d)
                    )));
                }
            }
        }
        // Kahn layering: take every feature whose dependencies are all taken, until none is
        // left or none can be taken (a cycle among what is left).
        let mut left: BTreeMap<&str, BTreeSet<&str>> = self
            .features()
            .map(|(_, f)| {
                (
                    f.feature_id.as_str(),
                    f.depends_on.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        let mut taken: BTreeSet<&str> = BTreeSet::new();
        while !left.is_empty() {
            let ready: Vec<&str> = left
                .iter()
                .filter(|(_, deps)| deps.is_subset(&taken))
                .map(|(id, _)| *id)
                .collect();
            if ready.is_empty() {
                let names: Vec<String> = left.keys().map(|k| py_repr(k)).collect();
                return Err(DeclareError::Rejected(format!(
                    "dependency cycle among features: [{}]",
                    names.join(", ")
                )));
            }
            for id in ready {
                left.remove(id);
                taken.insert(id);
            }
        }
        Ok(())
    }

    /// The `campaign_declared` body, with every field Forum writes (defaults filled in).
    pub(crate) fn payload(&self) -> Value {
        json!({
            "campaign_id": self.campaign_id,
            "title": self.title,
            "projects": self.projects.iter().map(|p| json!({
                "project_id": p.project_id,
                "owner": p.owner,
                "priority": p.priority,
                "features": p.features.iter().map(|f| json!({
                    "feature_id": f.feature_id,
                    "title": f.title,
                    "agent": f.agent,
                    "instruction": f.instruction,
                    "priority": f.priority,
                    "depends_on": f.depends_on,
                    "done_when": f.done_when,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })
    }
}

fn obj<'a>(v: &'a Value, at: &str) -> Result<&'a serde_json::Map<String, Value>, DeclareError> {
    v.as_object()
        .ok_or_else(|| DeclareError::Invalid(format!("{at} must be a JSON object")))
}

fn req_str(
    o: &serde_json::Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<String, DeclareError> {
    match o.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err(DeclareError::Invalid(format!(
            "{at}: {key} must not be empty"
        ))),
        Some(_) => Err(DeclareError::Invalid(format!(
            "{at}: {key} must be a string"
        ))),
        None => Err(DeclareError::Invalid(format!("{at} has no {key}"))),
    }
}

fn opt_str(
    o: &serde_json::Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<String, DeclareError> {
    match o.get(key) {
        None => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(DeclareError::Invalid(format!(
            "{at}: {key} must be a string"
        ))),
    }
}

fn opt_int(o: &serde_json::Map<String, Value>, key: &str, at: &str) -> Result<i64, DeclareError> {
    match o.get(key) {
        None => Ok(0),
        Some(Value::Number(n)) if n.as_i64().is_some() => Ok(n.as_i64().unwrap_or_default()),
        Some(_) => Err(DeclareError::Invalid(format!(
            "{at}: {key} must be an integer"
        ))),
    }
}

fn opt_list<'a>(
    o: &'a serde_json::Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<&'a [Value], DeclareError> {
    match o.get(key) {
        None => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(DeclareError::Invalid(format!("{at}: {key} must be a list"))),
    }
}

fn str_list(
    o: &serde_json::Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Vec<String>, DeclareError> {
    opt_list(o, key, at)?
        .iter()
        .map(|v| match v {
            Value::String(s) => Ok(s.clone()),
            _ => Err(DeclareError::Invalid(format!(
                "{at}: {key} must be a list of strings"
            ))),
        })
        .collect()
}
