//! The campaign status reduction (forum-spec §22): a campaign's state is never stored, only
//! reduced from the entries handed in. The latest `campaign_declared` of the campaign gives
//! its structure; the latest `feature_status` of each feature its state, with Forum's honesty
//! gate on `done`; then dependencies, counts, `complete`, the runnable and blocked features,
//! the next actions, and the room (`forum.campaign-room/v1`) with its text form.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use super::{Campaign, Feature, Project};
use crate::ledger::{Entry, kind};

/// The schema name of the campaign room.
pub(crate) const ROOM_SCHEMA: &str = "forum.campaign-room/v1";

/// What the honesty gate calls a `done` it could not witness.
const DONE_VIOLATION: &str = "claimed done without witnessing result";

/// A feature's reduced state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FeatureState {
    Pending,
    InProgress,
    Blocked,
    Failed,
    Done,
    /// Claimed done, but nothing witnesses it (a violation).
    Unwitnessed,
}

impl FeatureState {
    /// Forum's name of the state.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FeatureState::Pending => "pending",
            FeatureState::InProgress => "in_progress",
            FeatureState::Blocked => "blocked",
            FeatureState::Failed => "failed",
            FeatureState::Done => "done",
            FeatureState::Unwitnessed => "unwitnessed",
        }
    }

    /// The state a `feature_status` may carry, by name (`unwitnessed` is never recorded).
    pub(crate) fn recorded(name: &str) -> Option<FeatureState> {
        match name {
            "pending" => Some(FeatureState::Pending),
            "in_progress" => Some(FeatureState::InProgress),
            "blocked" => Some(FeatureState::Blocked),
            "failed" => Some(FeatureState::Failed),
            "done" => Some(FeatureState::Done),
            _ => None,
        }
    }

    /// States whose dependents cannot run until someone acts.
    fn stalls(self) -> bool {
        matches!(
            self,
            FeatureState::Failed | FeatureState::Blocked | FeatureState::Unwitnessed
        )
    }
}

/// One feature as the room shows it (Forum's keys, in Forum's order).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct FeatureView {
    pub(crate) feature_id: String,
    pub(crate) project_id: String,
    pub(crate) owner: String,
    pub(crate) priority: i64,
    pub(crate) depends_on: Vec<String>,
    pub(crate) status: FeatureState,
    pub(crate) reason: String,
    /// The recorded `witnessed_seq`, as recorded (null when none).
    pub(crate) witnessed_seq: Value,
    pub(crate) external: bool,
    /// The recorded `source`, as recorded (null when none).
    pub(crate) external_source: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) violation: Option<String>,
    pub(crate) deps_met: bool,
    pub(crate) blocking_deps: Vec<String>,
}

/// One project as the room shows it, with the latest status an outside system reported.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ProjectView {
    pub(crate) project_id: String,
    pub(crate) owner: String,
    pub(crate) priority: i64,
    pub(crate) feature_ids: Vec<String>,
    pub(crate) reported_status: Value,
    pub(crate) reported_source: Value,
    pub(crate) reported_reason: Value,
}

/// Features per state (Forum's key order).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Counts {
    pub(crate) done: u64,
    pub(crate) in_progress: u64,
    pub(crate) blocked: u64,
    pub(crate) failed: u64,
    pub(crate) pending: u64,
    pub(crate) unwitnessed: u64,
}

/// The room's progress signal (Forum's key order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct Progress {
    pub(crate) done: u64,
    pub(crate) total: u64,
    pub(crate) failed: u64,
    pub(crate) blocked: u64,
    pub(crate) unwitnessed: u64,
    pub(crate) pending: u64,
    pub(crate) in_progress: u64,
}

/// A campaign reduced from the ledger.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Status {
    /// The campaign as last declared.
    pub(crate) campaign: Campaign,
    pub(crate) complete: bool,
    pub(crate) counts: Counts,
    pub(crate) features: Vec<FeatureView>,
    pub(crate) projects: Vec<ProjectView>,
}

impl Status {
    /// The progress signal over the counts.
    pub(crate) fn progress(&self) -> Progress {
        let c = self.counts;
        Progress {
            done: c.done,
            total: c.done + c.in_progress + c.blocked + c.failed + c.pending + c.unwitnessed,
            failed: c.failed,
            blocked: c.blocked,
            unwitnessed: c.unwitnessed,
            pending: c.pending,
            in_progress: c.in_progress,
        }
    }
}

fn body_of<'a>(
    items: &'a [(Entry, Option<Value>)],
    e_kind: &str,
) -> impl Iterator<Item = &'a Value> {
    items
        .iter()
        .filter(move |(e, _)| e.kind == e_kind)
        .filter_map(|(_, b)| b.as_ref())
}

fn is_campaign(body: &Value, campaign_id: &str) -> bool {
    body.get("campaign_id").and_then(Value::as_str) == Some(campaign_id)
}

/// Every campaign id declared in `items`, in order of first declaration.
pub(crate) fn declared_ids(items: &[(Entry, Option<Value>)]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for b in body_of(items, kind::CAMPAIGN_DECLARED) {
        if let Some(id) = b.get("campaign_id").and_then(Value::as_str)
            && !out.iter().any(|x| x == id)
        {
            out.push(id.to_string());
        }
    }
    out
}

/// Whether `seq` (a recorded `witnessed_seq`) is a `result` entry for `feature_id` whose body
/// says `ok: true`. Only an integer counts (not a float, not a boolean).
fn witnessed(items: &[(Entry, Option<Value>)], seq: &Value, feature_id: &str) -> bool {
    let Some(seq) = seq.as_u64().filter(|_| seq.is_u64()) else {
        return false;
    };
    let Some((e, body)) = items.iter().find(|(e, _)| e.seq == seq) else {
        return false;
    };
    if e.kind != kind::RESULT {
        return false;
    }
    let Some(body) = body else { return false };
    body.get("id").and_then(Value::as_str) == Some(feature_id)
        && body.get("ok").and_then(Value::as_bool) == Some(true)
}

/// Python's `str()` of a recorded reason, for the few shapes a reason takes.
fn reason_text(v: Option<&Value>) -> String {
    match v {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) => "None".into(),
        Some(Value::Bool(true)) => "True".into(),
        Some(Value::Bool(false)) => "False".into(),
        Some(other) => other.to_string(),
    }
}

/// The latest body of `kind` for the campaign, by the id at `key` (later bodies win).
fn latest_by<'a>(
    items: &'a [(Entry, Option<Value>)],
    kind: &str,
    campaign_id: &str,
    key: &str,
) -> BTreeMap<&'a str, &'a Value> {
    let mut latest: BTreeMap<&str, &Value> = BTreeMap::new();
    for b in body_of(items, kind).filter(|b| is_campaign(b, campaign_id)) {
        if let Some(id) = b.get(key).and_then(Value::as_str) {
            latest.insert(id, b);
        }
    }
    latest
}

/// One feature as its latest status body says (pending when there is none); a `done` that is
/// neither external with a source nor witnessed is a violation.
fn feature_view(
    items: &[(Entry, Option<Value>)],
    p: &Project,
    f: &Feature,
    body: Option<&Value>,
) -> FeatureView {
    let external = p.external();
    let mut view = FeatureView {
        feature_id: f.feature_id.clone(),
        project_id: p.project_id.clone(),
        owner: p.owner.clone(),
        priority: f.priority,
        depends_on: f.depends_on.clone(),
        status: FeatureState::Pending,
        reason: String::new(),
        witnessed_seq: Value::Null,
        external,
        external_source: Value::Null,
        violation: None,
        deps_met: false,
        blocking_deps: Vec::new(),
    };
    if let Some(b) = body {
        view.reason = reason_text(b.get("reason"));
        view.witnessed_seq = b.get("witnessed_seq").cloned().unwrap_or(Value::Null);
        view.external_source = b.get("source").cloned().unwrap_or(Value::Null);
        let source_given = truthy(&view.external_source);
        view.status = match b.get("status").and_then(Value::as_str) {
            Some("done") if external && source_given => FeatureState::Done,
            Some("done") if witnessed(items, &view.witnessed_seq, &f.feature_id) => {
                FeatureState::Done
            }
            Some("done") => {
                view.violation = Some(DONE_VIOLATION.to_string());
                FeatureState::Unwitnessed
            }
            Some(s) => FeatureState::recorded(s).unwrap_or(FeatureState::Pending),
            None => FeatureState::Pending,
        };
    }
    view
}

/// How many features are in each state.
fn count_states(features: &[FeatureView]) -> Counts {
    let mut counts = Counts::default();
    for f in features {
        let slot = match f.status {
            FeatureState::Done => &mut counts.done,
            FeatureState::InProgress => &mut counts.in_progress,
            FeatureState::Blocked => &mut counts.blocked,
            FeatureState::Failed => &mut counts.failed,
            FeatureState::Pending => &mut counts.pending,
            FeatureState::Unwitnessed => &mut counts.unwitnessed,
        };
        *slot += 1;
    }
    counts
}

/// Reduces campaign `campaign_id` from `items` (every entry with its body, in seq order);
/// `None` when the campaign was never declared there.
pub(crate) fn reduce(items: &[(Entry, Option<Value>)], campaign_id: &str) -> Option<Status> {
    let campaign = body_of(items, kind::CAMPAIGN_DECLARED)
        .filter(|b| is_campaign(b, campaign_id))
        .filter_map(Campaign::from_payload)
        .last()?;
    let latest = latest_by(items, kind::FEATURE_STATUS, campaign_id, "feature_id");
    let reported = latest_by(items, kind::PROJECT_STATUS, campaign_id, "project_id");

    let mut features: Vec<FeatureView> = Vec::new();
    for (p, f) in campaign.features() {
        let body = latest.get(f.feature_id.as_str()).copied();
        let view = feature_view(items, p, f, body);
        features.push(view);
    }
    let state: BTreeMap<String, FeatureState> = features
        .iter()
        .map(|f| (f.feature_id.clone(), f.status))
        .collect();
    for f in &mut features {
        f.blocking_deps = f
            .depends_on
            .iter()
            .filter(|d| state.get(d.as_str()) != Some(&FeatureState::Done))
            .cloned()
            .collect();
        f.deps_met = f.blocking_deps.is_empty();
    }
    let counts = count_states(&features);
    let ours: Vec<&FeatureView> = features.iter().filter(|f| !f.external).collect();
    let complete = !ours.is_empty()
        && ours.iter().all(|f| f.status == FeatureState::Done)
        && features.iter().all(|f| f.violation.is_none());
    let projects = campaign
        .projects
        .iter()
        .map(|p| {
            let r = reported.get(p.project_id.as_str());
            let field = |k: &str| r.and_then(|b| b.get(k)).cloned().unwrap_or(Value::Null);
            ProjectView {
                project_id: p.project_id.clone(),
                owner: p.owner.clone(),
                priority: p.priority,
                feature_ids: p.features.iter().map(|f| f.feature_id.clone()).collect(),
                reported_status: field("status"),
                reported_source: field("source"),
                reported_reason: field("reason"),
            }
        })
        .collect();
    Some(Status {
        campaign,
        complete,
        counts,
        features,
        projects,
    })
}

/// Python's truthiness of a JSON value.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
    }
}

/// The pending features split as the next round sees them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Next {
    /// Pending, ours, every dependency done: by priority (highest first), then id.
    pub(crate) runnable: Vec<FeatureView>,
    /// Pending, ours, a dependency failed, blocked or unwitnessed: by id, with the reason.
    pub(crate) blocked: Vec<FeatureView>,
}

/// Forum's `derive_next_features`: which pending features can run and which are stuck.
/// A feature waiting on a dependency still pending or in progress is in neither list.
pub(crate) fn next_features(status: &Status) -> Next {
    let by_id: BTreeMap<&str, &FeatureView> = status
        .features
        .iter()
        .map(|f| (f.feature_id.as_str(), f))
        .collect();
    let dep_state = |d: &str| by_id.get(d).map(|f| f.status);
    let mut runnable = Vec::new();
    let mut blocked = Vec::new();
    for f in &status.features {
        if f.status != FeatureState::Pending || f.external {
            continue;
        }
        let bad: Vec<String> = f
            .blocking_deps
            .iter()
            .filter_map(|d| {
                dep_state(d)
                    .filter(|s| s.stalls())
                    .map(|s| format!("{d} is {}", s.as_str()))
            })
            .collect();
        if !bad.is_empty() {
            let mut b = f.clone();
            b.reason = format!("blocked: {}", bad.join(", "));
            blocked.push(b);
        } else if f.deps_met {
            runnable.push(f.clone());
        }
    }
    runnable.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then_with(|| a.feature_id.cmp(&b.feature_id))
    });
    blocked.sort_by(|a, b| a.feature_id.cmp(&b.feature_id));
    Next { runnable, blocked }
}

/// One next action for an operator (the run room's action shape).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Action {
    pub(crate) id: String,
    pub(crate) kind: String,
    pub(crate) priority: String,
    pub(crate) label: String,
    pub(crate) reason: String,
    pub(crate) target: Value,
}

fn action(
    id: String,
    kind: &str,
    priority: &str,
    label: String,
    reason: &str,
    target: Value,
) -> Action {
    Action {
        id,
        kind: kind.into(),
        priority: priority.into(),
        label,
        reason: reason.into(),
        target,
    }
}

/// The next actions: investigate each violation, dispatch the top runnable feature, unblock
/// each blocked one, close a complete campaign.
pub(crate) fn next_actions(status: &Status) -> Vec<Action> {
    let mut out = Vec::new();
    for f in &status.features {
        if let Some(v) = &f.violation {
            out.push(action(
                format!("investigate:{}", f.feature_id),
                "investigate",
                "high",
                format!("Investigate {}", f.feature_id),
                v,
                json!({"feature_id": f.feature_id, "project_id": f.project_id}),
            ));
        }
    }
    let next = next_features(status);
    if let Some(top) = next.runnable.first() {
        out.push(action(
            format!("dispatch-feature:{}", top.feature_id),
            "dispatch_feature",
            "high",
            format!("Dispatch {}", top.feature_id),
            "highest-priority runnable feature",
            json!({"feature_id": top.feature_id, "project_id": top.project_id}),
        ));
    }
    for f in &next.blocked {
        out.push(action(
            format!("unblock:{}", f.feature_id),
            "unblock",
            "high",
            format!("Unblock {}", f.feature_id),
            &f.reason,
            json!({"feature_id": f.feature_id, "project_id": f.project_id}),
        ));
    }
    if status.complete {
        let id = &status.campaign.campaign_id;
        out.push(action(
            format!("close-campaign:{id}"),
            "close_campaign",
            "normal",
            "Close the campaign".into(),
            "every forum-owned feature is witnessed done",
            json!({"campaign_id": id}),
        ));
    }
    out
}

/// The campaign room, `forum.campaign-room/v1` (Forum's keys, in Forum's order).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Room {
    pub(crate) schema: &'static str,
    pub(crate) campaign_id: String,
    pub(crate) title: String,
    /// The Merkle root over every entry hash of the ledger.
    pub(crate) checkpoint: String,
    /// Whether the ledger verified deeply (every body) when the room was built.
    pub(crate) verified: bool,
    pub(crate) complete: bool,
    pub(crate) counts: Counts,
    pub(crate) progress: Progress,
    pub(crate) features: Vec<FeatureView>,
    pub(crate) projects: Vec<ProjectView>,
    pub(crate) next_actions: Vec<Action>,
}

/// The room of `status`, on a ledger whose checkpoint is `checkpoint` and whose deep
/// verification said `verified`.
pub(crate) fn room(status: &Status, checkpoint: &str, verified: bool) -> Room {
    Room {
        schema: ROOM_SCHEMA,
        campaign_id: status.campaign.campaign_id.clone(),
        title: status.campaign.title.clone(),
        checkpoint: checkpoint.to_string(),
        verified,
        complete: status.complete,
        counts: status.counts,
        progress: status.progress(),
        features: status.features.clone(),
        projects: status.projects.clone(),
        next_actions: next_actions(status),
    }
}

fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// The room as text, line for line as Forum prints it.
pub(crate) fn room_text(r: &Room) -> String {
    let p = r.progress;
    let mut lines = vec![
        format!("Forum campaign room: {}", r.campaign_id),
        format!("title: {}", r.title),
        format!("checkpoint: {}", r.checkpoint),
        format!("verified: {}", py_bool(r.verified)),
        format!("complete: {}", py_bool(r.complete)),
        format!(
            "progress: {}/{} done (failed {}, blocked {}, unwitnessed {})",
            p.done, p.total, p.failed, p.blocked, p.unwitnessed
        ),
    ];
    if !r.next_actions.is_empty() {
        lines.push("next actions:".into());
        for a in &r.next_actions {
            lines.push(format!(
                "- {}/{}: {} ({})",
                a.priority, a.kind, a.label, a.reason
            ));
        }
    }
    lines.join("\n")
}

// ---- the bodies a campaign writes ----

/// The `feature_status` a round writes for a feature it ran: `done` (the result witnesses it)
/// or `failed` (the result's output is the reason).
pub(crate) fn round_status(
    campaign_id: &str,
    project_id: &str,
    feature_id: &str,
    ok: bool,
    output: &str,
    result_seq: u64,
) -> Value {
    json!({
        "campaign_id": campaign_id,
        "project_id": project_id,
        "feature_id": feature_id,
        "status": if ok { "done" } else { "failed" },
        "reason": if ok { "" } else { output },
        "witnessed_seq": result_seq,
    })
}

/// The `feature_status` that marks a stuck feature blocked, with its reason.
pub(crate) fn blocked_status(campaign_id: &str, f: &FeatureView) -> Value {
    json!({
        "campaign_id": campaign_id,
        "project_id": f.project_id,
        "feature_id": f.feature_id,
        "status": "blocked",
        "reason": f.reason,
    })
}

/// The `campaign_result` snapshot of a round's end (never trusted by the reduction).
pub(crate) fn result_snapshot(status: &Status) -> Value {
    let c = status.counts;
    json!({
        "campaign_id": status.campaign.campaign_id,
        "done": c.done,
        "in_progress": c.in_progress,
        "blocked": c.blocked,
        "failed": c.failed,
        "complete": status.complete,
    })
}

/// The `campaign_dispatch` body of a round: the features it runs.
pub(crate) fn dispatch_body(campaign_id: &str, wave: &[String]) -> Value {
    json!({"campaign_id": campaign_id, "wave": wave, "budget": null})
}

/// Why an operator's status report does not fit the campaign it is for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StatusReportError {
    /// `known` lists the campaign's projects.
    #[error("campaign {campaign} has no project {project:?} (its projects: {known})")]
    NoProject {
        campaign: String,
        project: String,
        known: String,
    },
    /// `known` lists the project's features.
    #[error("project {project} has no feature {feature:?} (its features: {known})")]
    NoFeature {
        project: String,
        feature: String,
        known: String,
    },
    #[error("status {0:?} is not one of pending, in_progress, blocked, failed, done")]
    UnknownStatus(String),
    #[error("the source must name the system reporting the status")]
    NoSource,
}

/// What an outside system reports, as `ingest-status` records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ingest {
    pub(crate) campaign_id: String,
    pub(crate) project_id: String,
    /// `None`: the report is about the whole project (`project_status`).
    pub(crate) feature_id: Option<String>,
    pub(crate) status: String,
    pub(crate) reason: String,
    pub(crate) source: String,
}

impl Ingest {
    /// The entry kind and body the report is recorded as.
    pub(crate) fn entry(&self) -> (&'static str, Value) {
        match &self.feature_id {
            Some(fid) => (
                kind::FEATURE_STATUS,
                json!({
                    "campaign_id": self.campaign_id,
                    "project_id": self.project_id,
                    "feature_id": fid,
                    "status": self.status,
                    "reason": self.reason,
                    "source": self.source,
                }),
            ),
            None => (
                kind::PROJECT_STATUS,
                json!({
                    "campaign_id": self.campaign_id,
                    "project_id": self.project_id,
                    "status": self.status,
                    "reason": self.reason,
                    "source": self.source,
                }),
            ),
        }
    }

    /// Checks the report against the campaign: the project exists, the feature is one of
    /// its features, and the status is one a feature or project may be in.
    pub(crate) fn check(&self, campaign: &Campaign) -> Result<(), StatusReportError> {
        let Some(p) = campaign.project(&self.project_id) else {
            let known: Vec<&str> = campaign
                .projects
                .iter()
                .map(|p| p.project_id.as_str())
                .collect();
            return Err(StatusReportError::NoProject {
                campaign: campaign.campaign_id.clone(),
                project: self.project_id.clone(),
                known: known.join(", "),
            });
        };
        if let Some(fid) = &self.feature_id
            && !p.features.iter().any(|f| &f.feature_id == fid)
        {
            let known: Vec<&str> = p.features.iter().map(|f| f.feature_id.as_str()).collect();
            return Err(StatusReportError::NoFeature {
                project: p.project_id.clone(),
                feature: fid.clone(),
                known: known.join(", "),
            });
        }
        if FeatureState::recorded(&self.status).is_none() {
            return Err(StatusReportError::UnknownStatus(self.status.clone()));
        }
        if self.source.trim().is_empty() {
            return Err(StatusReportError::NoSource);
        }
        Ok(())
    }
}
