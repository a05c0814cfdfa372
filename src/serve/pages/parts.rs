//! The sections of the run and task pages, each from the run room or the run's own entries.

use maud::{Markup, html};
use serde_json::Value as J;

use super::entries::{Body, Item, Run};
use super::patch::Layout;
use super::util::{clip, num, outcome_class, text, when};

/// The task an entry of a run belongs to, by its body's `task` (checks, ships, tool calls) or
/// `id` (tasks, results).
pub(super) fn task_of(item: &Item) -> Option<&str> {
    let b = item.body.as_ref()?;
    b.get("task")
        .or_else(|| match item.entry.kind.as_str() {
            "task" | "result" => b.get("id"),
            _ => None,
        })
        .and_then(J::as_str)
}

/// The request text and the route frame.
pub(super) fn request_and_route(run: &Run) -> Markup {
    let request = run.room.get("request").cloned().unwrap_or(J::Null);
    let frame = run.room.get("route_frame").cloned().unwrap_or(J::Null);
    let rows = [
        ("Intent", "intent"),
        ("Domain", "domain"),
        ("Lane", "domain_lane"),
        ("Posture", "posture"),
        ("Proof lane", "proof_lane"),
        ("Delivery profile", "delivery_profile"),
        ("Model tier", "model_tier"),
        ("Executor", "executor"),
    ];
    html! {
        section aria-labelledby="request" {
            h2 id="request" { "Request" }
            @if request.is_null() {
                p.note { "The request's body is missing from the record." }
            } @else {
                blockquote.text { (text(&request, "text")) }
            }
            h3 { "Route" }
            @if frame.is_null() {
                p.note { "No route frame was recorded." }
            } @else {
                dl.facts {
                    @for (label, key) in rows {
                        @let v = text(&frame, key);
                        @if !v.is_empty() { dt { (label) } dd { (v) } }
                    }
                    @if let Some(signals) = frame.get("signals").and_then(J::as_array) {
                        dt { "Signals" }
                        dd { @for s in signals { span.seat { (s.as_str().unwrap_or("")) } " " } }
                    }
                }
            }
        }
    }
}

/// The plan: the waves as a graph, and as a list for readers that do not see it.
pub(super) fn plan(run: &Run) -> Markup {
    let plan = run.room.get("plan").cloned().unwrap_or(J::Null);
    let waves: Vec<Vec<String>> = plan
        .get("waves")
        .and_then(J::as_array)
        .map(|ws| {
            ws.iter()
                .map(|w| {
                    w.as_array()
                        .map(|ids| {
                            ids.iter()
                                .filter_map(|i| i.as_str().map(str::to_string))
                                .collect()
                        })
                        .unwrap_or_default()
                })
                .collect()
        })
        .unwrap_or_default();
    let edges: Vec<(String, String, String)> = plan
        .get("edges")
        .and_then(J::as_array)
        .map(|es| {
            es.iter()
                .map(|e| (text(e, "from"), text(e, "to"), text(e, "type")))
                .collect()
        })
        .unwrap_or_default();
    let status = |id: &str| task_status(task_json(run, id).unwrap_or(&J::Null));
    html! {
        section aria-labelledby="plan" {
            h2 id="plan" { "Plan" }
            @if waves.is_empty() {
                p.note { "This run recorded no plan." }
            } @else {
                (super::plan_svg::graph(run.seq, &waves, &edges, &status))
                p.legend { "Waves run left to right. Solid arrows: data passed on; dashed arrows: order only." }
                ol.waves {
                    @for (n, w) in waves.iter().enumerate() {
                        li { "Wave " (n + 1) ": "
                            @for id in w {
                                a href=(format!("/view/run/{}/task/{}", run.seq, id)) { (id) } " "
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The room's record of task `id`.
pub(super) fn task_json<'a>(run: &'a Run, id: &str) -> Option<&'a J> {
    run.room
        .get("tasks")?
        .as_array()?
        .iter()
        .find(|t| text(t, "id") == id)
}

/// A task's status: its change's state (merged, blocked, ...), else its verdict, else its
/// result.
pub(super) fn task_status(t: &J) -> String {
    if let Some(s) = t
        .get("work")
        .map(|w| text(w, "state"))
        .filter(|s| !s.is_empty())
    {
        return s;
    }
    if let Some(v) = t.get("verdict").filter(|v| !v.is_null()) {
        return if v.get("ok").and_then(J::as_bool) == Some(true) {
            "accepted"
        } else {
            "rejected"
        }
        .into();
    }
    match t
        .get("result")
        .and_then(|r| r.get("ok"))
        .and_then(J::as_bool)
    {
        Some(true) => "done".into(),
        Some(false) => "failed".into(),
        None => "dispatched".into(),
    }
}

/// Tokens and dollars the entries of task `id` witnessed.
fn task_cost(run: &Run, id: &str) -> (u64, Option<f64>) {
    let mut tokens = 0;
    let mut usd: Option<f64> = None;
    for i in run.items.iter().filter(|i| task_of(i) == Some(id)) {
        if let Some(u) = i.body.as_ref().and_then(|b| b.get("usage")) {
            tokens += num(u, "prompt_tokens") + num(u, "completion_tokens");
            if let Some(c) = u.get("cost_usd").and_then(J::as_f64) {
                usd = Some(usd.unwrap_or(0.0) + c);
            }
        }
    }
    (tokens, usd)
}

fn cost_text(tokens: u64, usd: Option<f64>) -> String {
    match usd {
        Some(c) => format!("{tokens} tokens, ${c:.4}"),
        None => format!("{tokens} tokens"),
    }
}

/// Every task: status, worker, attempts, files, checks, the gate's decision, cost.
pub(super) fn tasks(run: &Run) -> Markup {
    let tasks = run
        .room
        .get("tasks")
        .and_then(J::as_array)
        .cloned()
        .unwrap_or_default();
    html! {
        section aria-labelledby="tasks" {
            h2 id="tasks" { "Tasks" }
            @if tasks.is_empty() { p.note { "No task was dispatched." } } @else {
                div.scroll tabindex="0" { table {
                    caption { "Each task of the run" }
                    thead { tr {
                        th scope="col" { "Task" } th scope="col" { "Status" } th scope="col" { "Worker" }
                        th scope="col" { "Attempts" } th scope="col" { "Files" } th scope="col" { "Checks" }
                        th scope="col" { "Gate" } th scope="col" { "Cost" }
                    } }
                    tbody { @for t in &tasks { (task_row(run, t)) } }
                } }
            }
        }
    }
}

fn task_row(run: &Run, t: &J) -> Markup {
    let id = text(t, "id");
    let status = task_status(t);
    let attempts = run
        .of_kind("result")
        .filter(|i| task_of(i) == Some(id.as_str()))
        .count();
    let work = t.get("work").cloned().unwrap_or(J::Null);
    let files: Vec<String> = work
        .get("change")
        .and_then(|c| c.get("files"))
        .and_then(J::as_array)
        .map(|fs| fs.iter().map(|f| text(f, "path")).collect())
        .unwrap_or_default();
    let (tokens, usd) = task_cost(run, &id);
    let ship = work.get("ship").cloned().unwrap_or(J::Null);
    html! {
        tr {
            th scope="row" { a href=(format!("/view/run/{}/task/{}", run.seq, id)) { (id) } }
            td { span class=(format!("badge {}", outcome_class(&status))) { (status) } }
            td { (text(t.get("result").unwrap_or(&J::Null), "model")) " " span.muted { (text(t, "agent")) } }
            td.num { (attempts) }
            td { @for f in &files { code { (f) } " " } }
            td.num { @if let Some(c) = work.get("checks") { (num(c, "passed")) " passed, " (num(c, "failed")) " failed" } }
            td { @if !ship.is_null() { strong { (text(&ship, "decision")) } ": " (text(&ship, "reason")) } }
            td.num { (cost_text(tokens, usd)) }
        }
    }
}

/// One task in full: instruction, result, verdict, change and gate.
pub(super) fn task_detail(run: &Run, t: &J) -> Markup {
    let id = text(t, "id");
    let result = t.get("result").cloned().unwrap_or(J::Null);
    let verdict = t.get("verdict").cloned().unwrap_or(J::Null);
    let work = t.get("work").cloned().unwrap_or(J::Null);
    let (tokens, usd) = task_cost(run, &id);
    html! {
        dl.facts {
            dt { "Status" } dd { span class=(format!("badge {}", outcome_class(&task_status(t)))) { (task_status(t)) } }
            dt { "Agent" } dd { (text(t, "agent")) }
            dt { "Worker" } dd { (text(&result, "model")) }
            dt { "Instruction" } dd { (text(t, "instruction")) }
            @if let Some(dw) = t.get("done_when").and_then(J::as_array).filter(|d| !d.is_empty()) {
                dt { "Done when" } dd { ul { @for d in dw { li { (d.as_str().unwrap_or("")) } } } }
            }
            dt { "Cost" } dd { (cost_text(tokens, usd)) }
            @if !verdict.is_null() {
                dt { "Verdict" } dd { (text(&verdict, "reason")) " (score " (text(&verdict, "score")) ")" }
            }
            @if let Some(ship) = work.get("ship").filter(|s| !s.is_null()) {
                dt { "Gate" } dd { strong { (text(ship, "decision")) } ": " (text(ship, "reason")) }
            }
        }
        h2 { "Output" }
        @if result.is_null() { p.note { "No result was recorded." } } @else {
            pre.output { (text(&result, "output")) }
        }
        @if let Some(files) = work.get("change").and_then(|c| c.get("files")).and_then(J::as_array) {
            h2 { "Files" }
            ul { @for f in files { li { code { (text(f, "path")) } " " (text(f, "status")) " +" (num(f, "added")) " −" (num(f, "removed")) } } }
        }
    }
}

/// The diff of task `id`'s latest change, as its change entry recorded it, in `layout`.
pub(super) fn task_diff(run: &Run, id: &str, layout: Layout) -> Markup {
    let change = run
        .of_kind("change")
        .filter(|i| task_of(i) == Some(id))
        .last();
    html! {
        h2 id="diff" { "Change" }
        @match change {
            None => p.note { "This task recorded no change." },
            Some(i) => {
                @let b = i.body.as_ref().unwrap_or(&J::Null);
                p { "Commit " code { (clip(&text(b, "commit"), 12)) } " (" a href=(format!("/view/entry/{}", i.entry.seq)) { "entry " (i.entry.seq) } ")." }
                (super::patch::switch(&format!("/view/run/{}/task/{id}", run.seq), layout))
                (super::patch::patch(&text(b, "diff"), layout))
            }
        }
    }
}

/// The tool calls of task `id`: a timeline drawn, then the list of calls and results in
/// order, each with what it gave.
pub(super) fn timeline(run: &Run, id: &str) -> Markup {
    let calls: Vec<&Item> = run
        .items
        .iter()
        .filter(|i| {
            matches!(i.entry.kind.as_str(), "tool_call" | "tool_result") && task_of(i) == Some(id)
        })
        .collect();
    html! {
        h2 { "Tool calls" }
        @if calls.is_empty() { p.note { "This task witnessed no tool call." } } @else {
            (super::timeline_svg::graph(id, &timed_calls(&calls)))
            ol.timeline {
                @for i in calls {
                    @let b = i.body.as_ref().unwrap_or(&J::Null);
                    li class=(if i.entry.kind == "tool_call" { "call" } else { "result" }) {
                        a href=(format!("/view/entry/{}", i.entry.seq)) { "#" (i.entry.seq) }
                        " " time { (when(i.entry.ts)) } " "
                        strong { (text(b, "tool")) }
                        @if i.entry.kind == "tool_call" {
                            pre.output { (clip(&text(b, "arguments"), 2000)) }
                        } @else {
                            " " span class=(format!("badge {}", if b.get("ok").and_then(J::as_bool) == Some(true) { "ok" } else { "bad" })) {
                                @if b.get("ok").and_then(J::as_bool) == Some(true) { "ok" } @else { "failed" }
                            }
                            pre.output { (clip(&text(b, "output"), 2000)) }
                        }
                    }
                }
            }
        }
    }
}

/// Each `tool_call` of `items` (a task's calls and results, in order) with its result: the
/// `tool_result` whose causal parent it is, else the next one of the same call number `n`.
fn timed_calls(items: &[&Item]) -> Vec<super::timeline_svg::Call> {
    let results: Vec<&Item> = items
        .iter()
        .copied()
        .filter(|i| i.entry.kind == "tool_result")
        .collect();
    let n_of = |i: &Item| i.body.as_ref().and_then(|b| b.get("n")).and_then(J::as_u64);
    items
        .iter()
        .filter(|i| i.entry.kind == "tool_call")
        .map(|c| {
            let parent = i64::try_from(c.entry.seq).ok();
            let result = results
                .iter()
                .find(|r| r.entry.causal_parent == parent)
                .or_else(|| {
                    results.iter().find(|r| {
                        r.entry.seq > c.entry.seq && n_of(r).is_some() && n_of(r) == n_of(c)
                    })
                });
            let b = c.body.as_ref().unwrap_or(&J::Null);
            super::timeline_svg::Call {
                seq: c.entry.seq,
                tool: text(b, "tool"),
                start: c.entry.ts,
                end: result.map_or(c.entry.ts, |r| r.entry.ts.max(c.entry.ts)),
                ok: result.map(|r| {
                    r.body
                        .as_ref()
                        .and_then(|b| b.get("ok"))
                        .and_then(J::as_bool)
                        == Some(true)
                }),
            }
        })
        .collect()
}

/// The checks (of the whole run, or of task `id`), each with its output.
pub(super) fn checks(run: &Run, id: Option<&str>) -> Markup {
    let checks: Vec<&Item> = run
        .of_kind("check")
        .filter(|i| id.is_none_or(|id| task_of(i) == Some(id)))
        .collect();
    html! {
        section aria-labelledby="checks" {
            h2 id="checks" { "Checks" }
            @if checks.is_empty() { p.note { "No check ran." } }
            @for i in checks {
                @let b = i.body.as_ref().unwrap_or(&J::Null);
                @let ok = b.get("ok").and_then(J::as_bool) == Some(true);
                details.check open[!ok] {
                    summary {
                        span class=(format!("badge {}", if ok { "ok" } else { "bad" })) { @if ok { "passed" } @else { "failed" } }
                        " " code { (text(b, "command")) } " for " (text(b, "task"))
                        @if i.state != Body::Shown { " (" (i.state.note()) ")" }
                    }
                    p { "Exit " (text(b, "exit")) ", " (text(b, "seconds")) " s. " a href=(format!("/view/entry/{}", i.entry.seq)) { "Entry " (i.entry.seq) } }
                    pre.output { (text(b, "output")) }
                }
            }
        }
    }
}

/// The answer.
pub(super) fn answer(run: &Run) -> Markup {
    let answer = run.room.get("answer").cloned().unwrap_or(J::Null);
    html! {
        section aria-labelledby="answer" {
            h2 id="answer" { "Answer" }
            @if answer.is_null() { p.note { "No answer was recorded." } } @else {
                div.text { (text(&answer, "text")) }
                p { a href=(format!("/view/entry/{}", num(&answer, "seq"))) { "Entry " (num(&answer, "seq")) } }
            }
        }
    }
}

/// What the run spent, per model, against the ceiling that stopped it (if one did).
pub(super) fn budget(run: &Run) -> Markup {
    let tokens: u64 = run.spend.iter().map(|s| s.tokens()).sum();
    let usd: Option<f64> = run
        .spend
        .iter()
        .filter_map(|s| s.cost_usd)
        .reduce(|a, b| a + b);
    let stop = run.of_kind("budget").next().and_then(|i| i.body.clone());
    let max_tokens = stop
        .as_ref()
        .and_then(|b| b.get("max_tokens"))
        .and_then(J::as_u64);
    html! {
        section aria-labelledby="budget" {
            h2 id="budget" { "Budget" }
            p { "Spent " (cost_text(tokens, usd)) " over " (run.spend.iter().map(|s| s.calls).sum::<u64>()) " witnessed model calls." }
            @if let Some(max) = max_tokens {
                label for="tokens-used" { "Tokens against the ceiling of " (max) }
                meter id="tokens-used" min="0" max=(max) value=(tokens) { (tokens) " of " (max) }
            }
            @if let Some(b) = &stop { p.note { (text(b, "reason")) } }
            @if !run.spend.is_empty() {
                div.scroll tabindex="0" { table {
                    caption { "Spend per model" }
                    thead { tr { th scope="col" { "Model" } th scope="col" { "Calls" } th scope="col" { "Tokens" } th scope="col" { "Share" } th scope="col" { "USD" } } }
                    tbody { @for s in &run.spend {
                        tr {
                            th scope="row" { (s.model) }
                            td.num { (s.calls) } td.num { (s.tokens()) }
                            td { meter min="0" max=(tokens.max(1)) value=(s.tokens()) { (s.tokens()) } }
                            td.num { @if let Some(c) = s.cost_usd { "$" (format!("{c:.4}")) } @else { "—" } @if s.estimated { " (estimated)" } }
                        }
                    } }
                } }
            }
        }
    }
}

/// The run's change against its base, in `layout`.
pub(super) fn diff(d: Option<&J>, seq: u64, layout: Layout) -> Markup {
    html! {
        section aria-labelledby="diff" {
            h2 id="diff" { "Diff" }
            @match d {
                None => p.note { "No diff: this run did not work in the repository, or its commits are not here." },
                Some(d) => {
                    p { (d.get("files").and_then(J::as_array).map_or(0, Vec::len)) " files, +" (num(d, "added")) " −" (num(d, "removed"))
                        " against " code { (clip(&text(d, "base"), 12)) } " (" (text(d, "source")) "). "
                        a href=(format!("/view/apply/{seq}")) { "What apply would change" } }
                    (super::patch::switch(&format!("/view/run/{seq}"), layout))
                    (super::patch::patch(&text(d, "patch"), layout))
                    @if d.get("truncated").and_then(J::as_bool) == Some(true) { p.note { "The patch was cut; `git forum diff " (seq) "` shows it all." } }
                }
            }
        }
    }
}

/// A unified diff with each line classed (file header, hunk, added, removed) and its code
/// coloured.
pub(super) fn patch(p: &str) -> Markup {
    super::patch::patch(p, Layout::Unified)
}

/// The halt, gate, resume and stop history of the run.
pub(super) fn history(run: &Run) -> Markup {
    const KINDS: &[&str] = &[
        "gate_pending",
        "gate_approved",
        "gate_edited",
        "gate_rejected",
        "gate_expired",
        "gate_stopped",
        "halted",
        "resume",
        "interrupted",
        "run_stopped",
        "budget",
        "conflict",
        "tier_escalation",
    ];
    let events: Vec<&Item> = run
        .items
        .iter()
        .filter(|i| KINDS.contains(&i.entry.kind.as_str()))
        .collect();
    html! {
        section aria-labelledby="history" {
            h2 id="history" { "Halts, gates and resumes" }
            @if events.is_empty() { p.note { "None: the run went through without a halt, gate or resume." } } @else {
                ol.timeline { @for i in events {
                    @let b = i.body.as_ref().unwrap_or(&J::Null);
                    li {
                        a href=(format!("/view/entry/{}", i.entry.seq)) { "#" (i.entry.seq) } " "
                        time { (when(i.entry.ts)) } " " strong { (i.entry.kind) } " by " (i.entry.actor)
                        @let why = [text(b, "reason"), text(b, "note"), text(b, "wave")].into_iter().find(|s| !s.is_empty());
                        @if let Some(w) = why { ": " (w) }
                        @if i.state != Body::Shown { " (" (i.state.note()) ")" }
                    }
                } }
            }
        }
    }
}
