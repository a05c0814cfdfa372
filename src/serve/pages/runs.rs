//! `/view/runs?outcome=&q=&page=`: every run of the ledger, newest first, from the `/runs`
//! route (`git forum runs --json`), filtered by outcome and text, a page at a time.

use axum::response::Response;
use maud::{Markup, html};
use serde_json::{Value as J, json};

use std::sync::{Arc, Mutex};

use super::util::{call, clip, num, outcome_class, refusal, text, when};
use super::{Ask, View, html as respond, layout};
use crate::serve::dispatch::Dispatcher;

/// Runs on one page.
pub(super) const PER_PAGE: usize = 50;

/// The answer of `/runs` as of one tip of the ledger: the runs page and the run pages read it
/// again only when the ledger moved, so paging through 10,000 runs does not fold the whole
/// ledger on every page.
#[derive(Default)]
pub(crate) struct Cached(Mutex<Option<(Option<gix::ObjectId>, Arc<J>)>>);

impl Cached {
    /// `/runs` as of the ledger's tip now.
    pub(super) fn get(&self, d: &Dispatcher) -> Result<Arc<J>, Response> {
        let tip = d.snapshot().map_err(|r| refusal(&r))?.tip;
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((t, runs)) = kept.as_ref()
            && *t == tip
        {
            return Ok(runs.clone());
        }
        let runs = Arc::new(call(d, "GET", "/runs", json!({}))?);
        *kept = Some((tip, runs.clone()));
        Ok(runs)
    }
}

/// The runs page.
pub(super) fn page(d: &Dispatcher, view: &View, ask: &Ask) -> Response {
    let all = match view.runs.get(d) {
        Ok(v) => v,
        Err(r) => return r,
    };
    let runs: Vec<J> = all
        .get("runs")
        .and_then(J::as_array)
        .cloned()
        .unwrap_or_default();
    let outcome = ask.field("outcome");
    let q = ask.field("q").map(str::to_lowercase);
    let mut states: Vec<String> = runs.iter().map(|r| text(r, "state")).collect();
    states.sort();
    states.dedup();
    let kept: Vec<&J> = runs
        .iter()
        .rev()
        .filter(|r| outcome.is_none_or(|o| text(r, "state") == o))
        .filter(|r| {
            q.as_deref()
                .is_none_or(|q| text(r, "request").to_lowercase().contains(q))
        })
        .collect();
    let pages = kept.len().div_ceil(PER_PAGE).max(1);
    let page = ask
        .field("page")
        .and_then(|p| p.parse::<usize>().ok())
        .unwrap_or(1)
        .clamp(1, pages);
    let shown = &kept[(page - 1) * PER_PAGE..(page * PER_PAGE).min(kept.len())];
    let times = d
        .with_view(|v| {
            shown
                .iter()
                .map(|r| {
                    v.entries
                        .get(num(r, "request_seq") as usize)
                        .map_or(0.0, |e| e.ts)
                })
                .collect::<Vec<f64>>()
        })
        .unwrap_or_default();
    let link = |p: usize| {
        let mut pairs = url::form_urlencoded::Serializer::new(String::new());
        if let Some(o) = outcome {
            pairs.append_pair("outcome", o);
        }
        if let Some(q) = ask.field("q") {
            pairs.append_pair("q", q);
        }
        pairs.append_pair("page", &p.to_string());
        format!("/view/runs?{}", pairs.finish())
    };
    let body = html! {
        h1 { "Runs" }
        p.lead { (runs.len()) " runs in ledger " code { (d.ledger()) } "; " (kept.len()) " shown by this filter." }
        (filters(&states, outcome, ask.field("q")))
        (table(shown, &times, page, pages))
        nav.pager aria-label="Pages" {
            @if page > 1 { a href=(link(page - 1)) rel="prev" { "Newer" } }
            span { "Page " (page) " of " (pages) }
            @if page < pages { a href=(link(page + 1)) rel="next" { "Older" } }
        }
    };
    respond(200, layout::page("Runs", "/view/runs", body))
}

/// The table of the runs on this page.
fn table(shown: &[&J], times: &[f64], page: usize, pages: usize) -> Markup {
    html! {
        @if shown.is_empty() {
            p { "No run matches." }
        } @else {
            div.scroll tabindex="0" {
                table.runs {
                    caption { "Runs, newest first (page " (page) " of " (pages) ")" }
                    thead { tr {
                        th scope="col" { "Run" } th scope="col" { "Outcome" } th scope="col" { "Request" }
                        th scope="col" { "Tasks" } th scope="col" { "Changes merged / blocked" }
                        th scope="col" { "Checks passed" } th scope="col" { "Tokens" } th scope="col" { "USD" }
                        th scope="col" { "Worker seats" } th scope="col" { "Started" }
                    } }
                    tbody {
                        @for (r, ts) in shown.iter().zip(times.iter().chain(std::iter::repeat(&0.0))) {
                            (row(r, *ts))
                        }
                    }
                }
            }
        }
    }
}

/// The filter form: outcome and text.
fn filters(states: &[String], outcome: Option<&str>, q: Option<&str>) -> Markup {
    html! {
        form.filters method="get" action="/view/runs" {
            label for="outcome" { "Outcome" }
            select id="outcome" name="outcome" {
                option value="" { "any" }
                @for s in states {
                    option value=(s) selected[outcome == Some(s.as_str())] { (s) }
                }
            }
            label for="q" { "Request contains" }
            input id="q" name="q" type="search" value=(q.unwrap_or(""));
            button type="submit" { "Filter" }
        }
    }
}

/// A run's cost in dollars as the run page writes it, or a dash when no call was priced.
fn usd(r: &J) -> String {
    match r.get("cost_usd").and_then(J::as_f64) {
        Some(c) => format!("${c:.4}"),
        None => "—".to_string(),
    }
}

/// One run's row.
fn row(r: &J, ts: f64) -> Markup {
    let seq = num(r, "request_seq");
    let state = text(r, "state");
    let work = r.get("work");
    let seats: Vec<String> = r
        .get("results_per_model")
        .and_then(J::as_object)
        .map(|m| m.iter().map(|(k, v)| format!("{k} ×{v}")).collect())
        .unwrap_or_default();
    html! {
        tr {
            th scope="row" { a href=(format!("/view/run/{seq}")) { "#" (seq) } }
            td { span class=(format!("badge {}", outcome_class(&state))) { (state) } }
            td.request { (clip(&text(r, "request"), 160)) }
            td.num { (text(r, "tasks")) }
            td.num {
                @if let Some(w) = work { (num(w, "merged")) " / " (num(w, "blocked")) } @else { "—" }
            }
            td.num {
                @if let Some(w) = work {
                    (num(w, "checks_passed")) " of " (num(w, "checks_passed") + num(w, "checks_failed"))
                } @else { "—" }
            }
            td.num { (num(r, "tokens")) }
            td.num { (usd(r)) }
            td { @for s in &seats { span.seat { (s) } " " } }
            td { time { (when(ts)) } }
        }
    }
}
