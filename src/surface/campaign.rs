//! The campaign operations once for every transport: `declare`, `status` (the campaign
//! room), `next`, `ingest` (an outside system's status, recorded and never executed) and
//! `run` (rounds of the campaign's runnable features through the run engine's dispatcher, to
//! a fixed point). The reduction itself is pure ([`crate::campaign`]); this module reads and
//! appends through a [`Storage`] and hands the entries in.
//!
//! Entries, actors and bodies are Forum's (forum-features §4): `campaign_declared` and
//! `campaign_dispatch`, `feature_status` and `campaign_result` by `campaign`; an ingest's
//! `feature_status` or `project_status` by `operator`; a round's `plan`, `task` and `result`
//! as Forum's `dispatch_plan` writes them.
//!
//! With `--work` (the run options' work enabled) each round is a `--work` dispatch: every
//! feature's task works in its own worktree and its change is committed (`change`), checked
//! (`check`), gated (`ship`) and integrated by the engine's own work path. Where changes
//! land: one run branch per round, `forum/run-PLANSEQ` (named by the round's `plan` entry),
//! and each round starts from the tip of the last round that integrated anything (the
//! first from HEAD), so a dependent feature works on its dependencies' merged changes and
//! the last such branch holds the whole campaign's. A feature is `done` only when its change
//! is on its round's branch (or it changed nothing and its checks passed); otherwise it is
//! `failed` with the reason (its checks failed, the gate blocked it or made no decision, it
//! conflicted), witnessed by its task's `result`, and its dependents are blocked.
//!
//! With `--dispatch` as well (the run options' work carrying a dispatcher), every round's
//! tasks go to workers elsewhere through that one dispatcher, each round a dispatched run of
//! its own; nothing here changes for it, since the engine's work path does the dispatching.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value as J;

use super::{Error, Report, Result};
use crate::campaign::{self, Campaign, DeclareError, Ingest, Room, Status};
use crate::ledger::canonical::Value;
use crate::ledger::merkle::Accumulator;
use crate::ledger::{Entry, NewEntry, Storage, kind};
use crate::plan::{Plan, Task};
use crate::run::{self, Env, RunError};

/// Every entry of a ledger with its body (as JSON), in seq order: what the reduction reads.
pub(crate) type Items = Vec<(Entry, Option<J>)>;

/// The loaded entries as the reduction reads them.
pub(crate) fn items_of(loaded: Vec<(Entry, Option<Value>)>) -> Items {
    loaded
        .into_iter()
        .map(|(e, b)| (e, b.map(|v| v.to_serde())))
        .collect()
}

/// The Merkle root over every entry hash of `items` (the room's checkpoint).
pub(crate) fn checkpoint_of(items: &[(Entry, Option<J>)]) -> String {
    let mut acc = Accumulator::default();
    for (e, _) in items {
        acc.push(&e.entry_hash);
    }
    acc.root()
}

/// `{"declared": ID, "seq": N}`, as Forum prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Declared {
    pub(crate) declared: String,
    pub(crate) seq: u64,
}

impl Report for Declared {
    const SCHEMA: &'static str = "git-forum.campaign-declared/1";
}

/// `{"ingested": KIND, "seq": N}`, as Forum prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Ingested {
    pub(crate) ingested: String,
    pub(crate) seq: u64,
}

impl Report for Ingested {
    const SCHEMA: &'static str = "git-forum.campaign-ingested/1";
}

/// `{"next_actions": [...]}`, as Forum prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct NextReport {
    pub(crate) next_actions: Vec<campaign::Action>,
}

impl Report for NextReport {
    const SCHEMA: &'static str = "git-forum.campaign-next/1";
}

impl Report for Room {
    const SCHEMA: &'static str = campaign::ROOM_SCHEMA;
}

fn append(
    store: &mut dyn Storage,
    items: &mut Items,
    actor: &str,
    kind: &str,
    body: J,
    ts: f64,
) -> Result<u64> {
    let e = store
        .append(NewEntry {
            actor: actor.into(),
            kind: kind.into(),
            causal_parent: None,
            payload: Value::from_serde(&body),
            ts,
        })
        .map_err(super::run::storage)?;
    let seq = e.seq;
    items.push((e, Some(body)));
    Ok(seq)
}

/// Appends a body a round derives from what its features did (a `feature_status` whose reason
/// is a worker's output, the `campaign_result` snapshot) after the run's secrets policy saw it,
/// as the engine does for its own entries: a redacted body is followed by its
/// `secret_redacted`, and a blocked one is refused with nothing of it written.
fn append_screened(
    store: &mut dyn Storage,
    items: &mut Items,
    guard: &crate::secrets::Guard,
    kind: &str,
    body: J,
    ts: f64,
) -> Result<u64> {
    use crate::secrets::Screened;
    match guard.check(&Value::from_serde(&body)) {
        Screened::Clean => append(store, items, "campaign", kind, body, ts),
        Screened::Redacted(clean, hits) => {
            let seq = append(store, items, "campaign", kind, clean.to_serde(), ts)?;
            let (e, _) = &items[items.len() - 1];
            let note = crate::secrets::redaction_entry(e, &hits);
            let body = note.payload.to_serde();
            let w = store.append(note).map_err(super::run::storage)?;
            items.push((w, Some(body)));
            Ok(seq)
        }
        Screened::Blocked(hits) => Err(Error::failed(format!(
            "the secrets policy blocks the {kind} entry of the round ({}); nothing of it was written (set [secrets] mode = \"redact\" to write it with markers)",
            crate::secrets::rules_of(&hits).join(", ")
        ))),
    }
}

/// Parses, validates and declares the campaign in `text`: one `campaign_declared`. A text
/// that is not a declaration is a usage error; a campaign that does not hold together
/// (duplicate ids, an unknown dependency, a cycle) is refused; either way nothing is written.
pub(crate) fn declare(store: &mut dyn Storage, text: &str, ts: f64) -> Result<Declared> {
    let c = Campaign::parse(text).map_err(|e| match e {
        DeclareError::Invalid(m) => Error::usage(format!(
            "{m}; a campaign is {{campaign_id, title, projects: [{{project_id, owner, priority, features: [...]}}]}}"
        )),
        DeclareError::Rejected(_) => Error::failed(format!(
            "{e} (nothing was written; fix the declaration and declare it again)"
        )),
    })?;
    let mut items = Items::new();
    let seq = append(
        store,
        &mut items,
        "campaign",
        kind::CAMPAIGN_DECLARED,
        c.payload(),
        ts,
    )?;
    Ok(Declared {
        declared: c.campaign_id,
        seq,
    })
}

/// The campaign `id` reduced from `items`; without an id, the only campaign declared there.
pub(crate) fn resolve(items: &[(Entry, Option<J>)], id: Option<&str>) -> Result<Status> {
    let declared = campaign::declared_ids(items);
    let id = match id {
        Some(id) => id.to_string(),
        None => match declared.as_slice() {
            [one] => one.clone(),
            [] => {
                return Err(Error::not_found(
                    "no campaign is declared in this ledger (git forum campaign declare --file F declares one)",
                ));
            }
            many => {
                return Err(Error::usage(format!(
                    "this ledger holds {} campaigns ({}): name one",
                    many.len(),
                    many.join(", ")
                )));
            }
        },
    };
    campaign::reduce(items, &id).ok_or_else(|| {
        let known = if declared.is_empty() {
            "none is declared here; git forum campaign declare --file F declares one".to_string()
        } else {
            format!("declared here: {}", declared.join(", "))
        };
        Error::not_found(format!(
            "no campaign {} in this ledger ({known})",
            crate::plan::py_repr(&id)
        ))
    })
}

/// The campaign room of `id` (or of the only campaign) on a ledger whose entries are
/// `items` and whose deep verification said `verified`.
pub(crate) fn status(
    items: &[(Entry, Option<J>)],
    id: Option<&str>,
    verified: bool,
) -> Result<Room> {
    let s = resolve(items, id)?;
    Ok(campaign::room(&s, &checkpoint_of(items), verified))
}

/// The next actions of `id` (or of the only campaign).
pub(crate) fn next(items: &[(Entry, Option<J>)], id: Option<&str>) -> Result<NextReport> {
    let s = resolve(items, id)?;
    Ok(NextReport {
        next_actions: campaign::next_actions(&s),
    })
}

/// What an outside system reports (`campaign_id` `None`: the only campaign).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IngestAsk {
    pub(crate) campaign_id: Option<String>,
    pub(crate) project_id: String,
    pub(crate) feature_id: Option<String>,
    pub(crate) status: String,
    pub(crate) reason: String,
    pub(crate) source: String,
}

/// Records an outside system's status of a feature (`feature_status`) or of a whole
/// project (`project_status`), by `operator`. Nothing runs. The campaign, project and
/// feature must be declared and the status one a feature may be in.
pub(crate) fn ingest(
    store: &mut dyn Storage,
    items: &mut Items,
    ask: &IngestAsk,
    ts: f64,
) -> Result<Ingested> {
    let s = resolve(items, ask.campaign_id.as_deref())?;
    let report = Ingest {
        campaign_id: s.campaign.campaign_id.clone(),
        project_id: ask.project_id.clone(),
        feature_id: ask.feature_id.clone(),
        status: ask.status.clone(),
        reason: ask.reason.clone(),
        source: ask.source.clone(),
    };
    report
        .check(&s.campaign)
        .map_err(|m| Error::usage(format!("{m}; nothing was recorded")))?;
    let (k, body) = report.entry();
    let seq = append(store, items, "operator", k, body, ts)?;
    Ok(Ingested {
        ingested: k.to_string(),
        seq,
    })
}

/// Refuses `--check` without `--work` (one line; nothing runs).
pub(crate) fn check_work_flags(work: bool, checks: &[String]) -> Result<()> {
    if !work && !checks.is_empty() {
        return Err(Error::usage(
            "--check runs on the changes of a --work campaign run: add --work",
        ));
    }
    Ok(())
}

/// The work options of a campaign run: only an explicit `--work` makes its features change
/// the repository (`[work] enabled` is for submitted runs; a campaign dispatches many
/// features at once, so it is asked for each time), with `[work] checks` then `--check`.
/// `None` without `--work`, so the rounds write exactly Forum's entries.
pub(crate) fn work_options(
    spec: &super::run::RunOptions,
    defaults: &crate::exec::config::WorkConfig,
    repo: std::path::PathBuf,
    ledger: &str,
) -> Result<Option<run::WorkOptions>> {
    check_work_flags(spec.work, &spec.checks)?;
    if !spec.work {
        return Ok(None);
    }
    let open = super::run::work::git_opener(repo, ledger.to_string());
    spec.work_options(defaults, ledger, open).map(Some)
}

/// One line naming each round's run branch and the one holding the campaign's changes.
pub(crate) fn branches_line(done: &RunDone) -> String {
    if done.branches.is_empty() {
        return "no round worked in the repository".into();
    }
    let rounds: Vec<String> = done
        .branches
        .iter()
        .map(|b| match &b.tip {
            Some(t) => format!("forum/run-{} at {}", b.run_seq, short(t)),
            None => format!("forum/run-{} (nothing integrated)", b.run_seq),
        })
        .collect();
    let holds = match done.campaign_branch() {
        Some(b) => format!(
            "; forum/run-{} holds every merged change (git merge forum/run-{} takes it)",
            b.run_seq, b.run_seq
        ),
        None => "; no change was integrated".into(),
    };
    format!("run branches: {}{holds}", rounds.join(", "))
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// What a campaign run did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct RunDone {
    /// Rounds dispatched.
    pub(crate) rounds: u64,
    /// What each feature it ran became (`done` or `failed`), by feature id.
    pub(crate) acted: BTreeMap<String, String>,
    /// With `--work`: each round's run branch, in order.
    pub(crate) branches: Vec<run::WorkBranch>,
}

impl RunDone {
    /// With `--work`: the run branch holding every change the campaign integrated so far
    /// (the last round's that integrated anything).
    pub(crate) fn campaign_branch(&self) -> Option<&run::WorkBranch> {
        self.branches.iter().rev().find(|b| b.tip.is_some())
    }
}

/// Runs campaign `id` (or the only one) on `store`, whose entries are `items` (kept up to
/// date): rounds until nothing is runnable or a round acts on nothing. Each round dispatches
/// every runnable forum-owned feature as one single-wave plan (`opts.policy.max_parallel`
/// at a time), records each feature done (witnessed by its result) or failed, marks newly
/// blocked dependents, snapshots `campaign_result` and syncs. A failed feature stops nothing
/// but its dependents.
pub(crate) fn run(
    store: &mut (dyn Storage + Send),
    items: &mut Items,
    env: &Env<'_>,
    opts: &run::Options,
    id: Option<&str>,
) -> Result<RunDone> {
    let cid = resolve(items, id)?.campaign.campaign_id;
    let mut done = RunDone::default();
    loop {
        let s = resolve(items, Some(&cid))?;
        let runnable = campaign::next_features(&s).runnable;
        if runnable.is_empty() {
            break;
        }
        let base = done.campaign_branch().and_then(|b| b.tip.clone());
        let (acted, branch) = round(store, items, env, opts, &s, &runnable, base.as_deref())?;
        done.branches.extend(branch);
        done.rounds += 1;
        if acted.is_empty() {
            break;
        }
        done.acted.extend(acted);
    }
    Ok(done)
}

fn round(
    store: &mut (dyn Storage + Send),
    items: &mut Items,
    env: &Env<'_>,
    opts: &run::Options,
    s: &Status,
    runnable: &[campaign::FeatureView],
    base: Option<&str>,
) -> Result<(BTreeMap<String, String>, Option<run::WorkBranch>)> {
    let cid = s.campaign.campaign_id.as_str();
    let wave: Vec<String> = runnable.iter().map(|f| f.feature_id.clone()).collect();
    let now = || env.clock.now();
    append(
        store,
        items,
        "campaign",
        kind::CAMPAIGN_DISPATCH,
        campaign::dispatch_body(cid, &wave),
        now(),
    )?;
    let plan = wave_plan(s, &wave)?;
    let from = store.len().map_err(super::run::storage)?;
    let out = run::dispatch(store, env, opts, &plan, base).map_err(run_error);
    reload(store, items, from)?;
    let out = out?;
    let mut acted = BTreeMap::new();
    for f in runnable {
        let Some(r) = out.results.get(&f.feature_id) else {
            continue;
        };
        // Under --work the change decides: done only once it landed on the run branch (the
        // status is still witnessed by the task's `result`, as the reduction asks).
        let (ok, reason) = match &r.work {
            None => (r.ok, r.output.as_str()),
            Some(w) => (r.ok && w.landed, w.reason.as_str()),
        };
        let reason = if reason.is_empty() {
            r.output.as_str()
        } else {
            reason
        };
        let body = campaign::round_status(cid, &f.project_id, &f.feature_id, ok, reason, r.seq);
        append_screened(
            store,
            items,
            &opts.secrets,
            kind::FEATURE_STATUS,
            body,
            now(),
        )?;
        acted.insert(
            f.feature_id.clone(),
            if ok { "done" } else { "failed" }.to_string(),
        );
    }
    close_round(store, items, env, opts, cid)?;
    Ok((acted, out.branch))
}

/// The round's plan: one task per feature of the wave, with its non-empty done-when checks.
fn wave_plan(s: &Status, wave: &[String]) -> Result<crate::plan::CompiledPlan> {
    let mut tasks = Vec::new();
    for fid in wave {
        let Some((_, f)) = s.campaign.feature(fid) else {
            continue;
        };
        let mut t = Task::new(&f.feature_id, &f.agent, &f.instruction);
        t.done_when = f
            .done_when
            .iter()
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty())
            .collect();
        tasks.push(t);
    }
    Plan { tasks }.compile().map_err(|e| {
        Error::internal(format!(
            "the round's features do not make a plan ({e}); the campaign_dispatch entry is witnessed"
        ))
    })
}

/// The end of a round: the features it left blocked, the campaign's result snapshot, a sync.
fn close_round(
    store: &mut (dyn Storage + Send),
    items: &mut Items,
    env: &Env<'_>,
    opts: &run::Options,
    cid: &str,
) -> Result<()> {
    let now = || env.clock.now();
    witness_blocked(store, items, cid, now())?;
    let after = resolve(items, Some(cid))?;
    append_screened(
        store,
        items,
        &opts.secrets,
        kind::CAMPAIGN_RESULT,
        campaign::result_snapshot(&after),
        now(),
    )?;
    store.sync().map_err(super::run::storage)?;
    Ok(())
}

/// Marks every pending feature whose dependency failed, is blocked or is unwitnessed as
/// `blocked`, so a stuck dependent shows instead of waiting silently.
fn witness_blocked(store: &mut dyn Storage, items: &mut Items, cid: &str, ts: f64) -> Result<()> {
    let s = resolve(items, Some(cid))?;
    for f in campaign::next_features(&s).blocked {
        append(
            store,
            items,
            "campaign",
            kind::FEATURE_STATUS,
            campaign::blocked_status(cid, &f),
            ts,
        )?;
    }
    Ok(())
}

/// Reads the entries from seq `from` on into `items` (what the dispatcher wrote).
fn reload(store: &dyn Storage, items: &mut Items, from: u64) -> Result<()> {
    let n = store.len().map_err(super::run::storage)?;
    for seq in from..n {
        let e = store
            .get(seq)
            .map_err(super::run::storage)?
            .ok_or_else(|| Error::internal(format!("the ledger has no entry at seq {seq}")))?;
        let body = store
            .payload_at(seq)
            .map_err(super::run::storage)?
            .map(|v| v.to_serde());
        items.push((e, body));
    }
    Ok(())
}

/// A round the engine could not finish, as the surface reports it (what was witnessed stays).
fn run_error(e: RunError) -> Error {
    let class = super::run::class_of(&e);
    Error::new(
        class,
        format!(
            "{e} (what the round witnessed stays in the ledger; run the campaign again to go on)"
        ),
    )
}
