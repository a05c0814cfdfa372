//! `/view/run/SEQ` and `/view/run/SEQ/task/ID`: one run, from the run room (`git forum room
//! --json`, built by the same surface function over the run's entries), the run's entries with
//! their bodies checked against their hashes, its spend, and `/diff` for a `--work` run.

use axum::response::Response;
use maud::{Markup, html};
use serde_json::{Value as J, json};

pub(super) use super::entries::{Body, Item, Run};
use super::parts;
use super::patch::Layout;
use super::util::{call, num, outcome_class, refusal, seq_of, text, when};
use super::{Ask, View, html as respond, layout};
use crate::ledger::Entry;
use crate::ledger::canonical::Value;
use crate::report::Snapshot;
use crate::serve::dispatch::Dispatcher;

/// The longest text of a room the run page shows whole (longer ones are clipped, and the
/// entry page shows the body).
const TEXT_CHARS: usize = 20_000;

/// The entries of the run whose request is at `seq`, each body checked against its hash.
fn entries_of(d: &Dispatcher, seq: u64) -> Result<Vec<(Entry, Option<Value>, Body)>, Response> {
    let view = d.snapshot().map_err(|r| refusal(&r))?;
    let start = (seq as usize).min(view.entries.len());
    let roots = crate::report::run_roots(&view.entries[start..]);
    if roots.get(&seq) != Some(&seq) {
        return Err(layout::problem(
            404,
            &format!(
                "No run starts at seq {seq} in ledger {}: the list of runs names them.",
                d.ledger()
            ),
        ));
    }
    let store = d.reader().map_err(|r| refusal(&r))?;
    let mut out = Vec::new();
    for e in view.entries[start..]
        .iter()
        .filter(|e| roots.get(&e.seq) == Some(&seq))
    {
        let body = Dispatcher::body_in(&store, &view, e.seq).map_err(|r| refusal(&r))?;
        let state = match &body {
            None => Body::Missing,
            Some(b) if crate::ledger::hash::payload_hash(b) != e.payload_hash => Body::Mismatch,
            Some(_) => Body::Shown,
        };
        let body = body.filter(|_| state == Body::Shown);
        out.push((e.clone(), body, state));
    }
    Ok(out)
}

/// Loads run `seq` for its pages.
pub(super) fn load(d: &Dispatcher, view: &View, seq: u64) -> Result<Run, Response> {
    let entries = entries_of(d, seq)?;
    let verified = d.verify_cached(false).map_err(|r| refusal(&r))?.ok;
    let root = d.snapshot().map_err(|r| refusal(&r))?.root.clone();
    let all_shown = entries.iter().all(|(_, _, s)| *s != Body::Mismatch);
    let snapshot = Snapshot {
        items: entries
            .iter()
            .map(|(e, b, _)| (e.clone(), b.clone()))
            .collect(),
        checkpoint: root,
        verified,
        deep_verified: verified && all_shown,
    };
    let room = crate::surface::reports::room(&snapshot, Some(seq), TEXT_CHARS);
    let room = serde_json::to_value(&room).unwrap_or(J::Null);
    let spend = crate::report::spend::per_model(&snapshot.items);
    let runs = view.runs.get(d)?;
    let row = runs
        .get("runs")
        .and_then(J::as_array)
        .and_then(|rs| rs.iter().find(|r| num(r, "request_seq") == seq))
        .cloned()
        .unwrap_or(J::Null);
    let items = entries
        .into_iter()
        .map(|(entry, body, state)| Item {
            entry,
            body: body.map(|b| b.to_serde()),
            state,
        })
        .collect();
    Ok(Run {
        seq,
        items,
        room,
        row,
        spend,
        verified,
    })
}

/// The run page.
pub(super) fn page(d: &Dispatcher, view: &View, ask: &Ask, seq: &str) -> Response {
    let run = match seq_of(seq).and_then(|s| load(d, view, s)) {
        Ok(r) => r,
        Err(r) => return r,
    };
    // Only a --work run has a diff; asking for one reads the whole ledger.
    let diff = run
        .row
        .get("work")
        .and_then(|_| call(d, "POST", "/diff", json!({"run": run.seq})).ok());
    let title = format!("Run {}", run.seq);
    let body = html! {
        (heading(&run))
        (parts::request_and_route(&run))
        (parts::plan(&run))
        (parts::tasks(&run))
        (parts::answer(&run))
        (parts::budget(&run))
        (parts::checks(&run, None))
        (parts::diff(diff.as_ref(), run.seq, Layout::of(ask.field("diff"))))
        (parts::history(&run))
    };
    respond(200, layout::page(&title, "/view/runs", body))
}

/// The run's heading: its seq, outcome, start, and links to its record.
fn heading(run: &Run) -> Markup {
    let state = text(&run.row, "state");
    let started = run.items.first().map_or(0.0, |i| i.entry.ts);
    html! {
        h1 { "Run " (run.seq) " " span class=(format!("badge {}", outcome_class(&state))) { (state) } }
        p.lead {
            "Started " time { (when(started)) } "; " (run.items.len()) " entries; the ledger "
            @if run.verified { "verifies." } @else { strong { "does not verify." } }
            " "
            a href=(format!("/view/record?after={}", run.seq.saturating_sub(1))) { "Its entries in the record" }
            @if run.row.get("work").is_some() {
                " · " a href=(format!("/view/apply/{}", run.seq)) { "What apply would change" }
            }
        }
    }
}

/// The task page: one task of a run.
pub(super) fn task_page(d: &Dispatcher, view: &View, ask: &Ask, seq: &str, id: &str) -> Response {
    let run = match seq_of(seq).and_then(|s| load(d, view, s)) {
        Ok(r) => r,
        Err(r) => return r,
    };
    let task = run
        .room
        .get("tasks")
        .and_then(J::as_array)
        .and_then(|ts| ts.iter().find(|t| text(t, "id") == id));
    let Some(task) = task else {
        return layout::problem(404, &format!("Run {} has no task {id:?}.", run.seq));
    };
    let title = format!("Task {id} of run {}", run.seq);
    let body = html! {
        h1 { (title) }
        p.lead { a href=(format!("/view/run/{}", run.seq)) { "Back to run " (run.seq) } }
        (parts::task_detail(&run, task))
        (parts::task_diff(&run, id, Layout::of(ask.field("diff"))))
        (parts::timeline(&run, id))
        (parts::checks(&run, Some(id)))
    };
    respond(200, layout::page(&title, "/view/runs", body))
}
