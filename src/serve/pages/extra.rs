//! `/view/bench?a=SEQ&b=SEQ` (two runs side by side, from `/bench`), `/view/apply/SEQ` (what
//! `apply` would do against the current branch, from `/apply/dry-run`) and `/view/blame?path=FILE`
//! (each line's run, task, model and cost, from `/blame`).

use axum::response::Response;
use maud::{Markup, html};
use serde_json::{Value as J, json};

use super::util::{call, clip, num, seq_of, text};
use super::{Ask, html as respond, layout, parts};
use crate::serve::dispatch::Dispatcher;

/// The bench page: a form for two runs, and their comparison when both are given.
pub(super) fn bench_page(d: &Dispatcher, ask: &Ask) -> Response {
    let (a, b) = (ask.field("a"), ask.field("b"));
    let report = match (a, b) {
        (Some(a), Some(b)) => {
            if let Err(r) = seq_of(a).and(seq_of(b)) {
                return r;
            }
            match call(
                d,
                "POST",
                "/bench",
                json!({"a": format!("run:{a}"), "b": format!("run:{b}")}),
            ) {
                Ok(r) => Some(r),
                Err(r) => return r,
            }
        }
        _ => None,
    };
    let body = html! {
        h1 { "Bench: two runs side by side" }
        form.filters method="get" action="/view/bench" {
            label for="a" { "Run A (seq)" }
            input id="a" name="a" inputmode="numeric" value=(a.unwrap_or(""));
            label for="b" { "Run B (seq)" }
            input id="b" name="b" inputmode="numeric" value=(b.unwrap_or(""));
            button type="submit" { "Compare" }
        }
        @if let Some(r) = &report { (comparison(r)) } @else { p { "Give the seqs of two runs (the list of runs names them)." } }
    };
    respond(200, layout::page("Bench", "/view/bench", body))
}

/// The numbers of both sides and their deltas, then the answers' diff.
fn comparison(r: &J) -> Markup {
    let side = |k: &str| r.get(k).cloned().unwrap_or(J::Null);
    let (a, b, delta) = (side("a"), side("b"), side("delta"));
    let keys: Vec<String> = delta
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    let find = |s: &J, k: &str| -> String {
        s.get("summary")
            .and_then(|x| x.get(k))
            .or_else(|| s.get(k))
            .map_or(String::new(), |v| match v {
                J::String(t) => t.clone(),
                other => other.to_string(),
            })
    };
    let answers = side("answers");
    html! {
        div.scroll tabindex="0" { table {
            caption { (text(&a, "label")) " against " (text(&b, "label")) }
            thead { tr { th scope="col" { "Measure" } th scope="col" { "A" } th scope="col" { "B" } th scope="col" { "B − A" } } }
            tbody { @for k in &keys {
                tr { th scope="row" { (k) } td.num { (find(&a, k)) } td.num { (find(&b, k)) } td.num { (text(&delta, k)) } }
            } }
        } }
        h2 { "Answers" }
        div.sides {
            div { h3 { "A" } div.text { (text(&answers, "a")) } }
            div { h3 { "B" } div.text { (text(&answers, "b")) } }
        }
        h3 { "Diff of the answers" }
        (parts::patch(&text(&answers, "diff")))
    }
}

/// What `git forum apply SEQ` would do against the branch checked out now, from the dry run
/// apply decides with (`/apply/dry-run`): fast-forward, merge or conflict, and the diff the
/// branch would receive. Nothing is applied, and nothing is written to find it out.
pub(super) fn apply_page(d: &Dispatcher, seq: &str) -> Response {
    let seq = match seq_of(seq) {
        Ok(s) => s,
        Err(r) => return r,
    };
    if d.is_read_only() {
        return copy_change(d, seq);
    }
    let dry = match call(d, "POST", "/apply/dry-run", json!({"run": seq})) {
        Ok(v) => v,
        Err(r) => return r,
    };
    let title = format!("What apply would do: run {seq}");
    let outcome = text(&dry, "outcome");
    let list = |key: &str| -> Vec<String> {
        dry.get(key)
            .and_then(J::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    let (conflicts, dirty) = (list("conflicts"), list("dirty"));
    let (badge, said) = match outcome.as_str() {
        "fast-forward" => ("ok", "a fast-forward"),
        "merge" => ("ok", "a merge commit, without conflicts"),
        _ => ("bad", "a merge that conflicts; apply refuses it"),
    };
    let files_caption = if outcome == "conflict" {
        "The run's changes since it parted from your branch"
    } else {
        "Files your branch would receive"
    };
    let body = html! {
        h1 { (title) }
        p.lead {
            code { "git forum apply " (seq) } " would bring " code { (text(&dry, "run_branch")) }
            " (tip " code { (clip(&text(&dry, "theirs"), 12)) } ") into your current branch "
            code { (text(&dry, "branch")) } " (tip " code { (clip(&text(&dry, "ours"), 12)) } ") as "
            span class=(format!("badge {badge}")) { (outcome) } ": " (said) ". Nothing is applied from this page, and nothing was written to find this out."
        }
        @if !conflicts.is_empty() {
            h2 { "Conflicts" }
            p { "The merge would conflict in these files; merge it yourself with " code { "git merge " (text(&dry, "run_branch")) } "." }
            ul { @for f in &conflicts { li { code { (f) } } } }
        }
        @if !dirty.is_empty() {
            p { span.badge.warn { "uncommitted changes" } " Apply refuses until these are committed or stashed: "
                @for (i, f) in dirty.iter().enumerate() { @if i > 0 { ", " } code { (f) } } }
        }
        (files_table(files_caption, &dry))
        (parts::patch(&text(&dry, "patch")))
        @if dry.get("truncated").and_then(J::as_bool) == Some(true) { p.muted { "The diff was cut at 8 MiB." } }
        p { a href=(format!("/view/run/{seq}")) { "Back to run " (seq) } }
    };
    respond(200, layout::page(&title, "/view/runs", body))
}

/// The apply page on a fetched copy: apply brings in only the runs of this repository's own
/// ledgers, so the page shows the run's change against its base (`/diff`, which reads the
/// remote's run branch) and says so.
fn copy_change(d: &Dispatcher, seq: u64) -> Response {
    let diff = match call(d, "POST", "/diff", json!({"run": seq})) {
        Ok(v) => v,
        Err(r) => return r,
    };
    let title = format!("The change of run {seq}");
    let body = html! {
        h1 { (title) }
        p.lead {
            "This daemon serves " code { (d.ledger()) } ", a fetched copy, read-only: "
            code { "git forum apply" } " brings in only the runs of this repository's own ledgers. "
            "Against the commit the run started from (" code { (clip(&text(&diff, "base"), 12)) } "), "
            code { (text(&diff, "source")) } " (tip " code { (clip(&text(&diff, "tip"), 12)) } ") changes these files."
        }
        (files_table("Files the run changed", &diff))
        (parts::patch(&text(&diff, "patch")))
        p { a href=(format!("/view/run/{seq}")) { "Back to run " (seq) } }
    };
    respond(200, layout::page(&title, "/view/runs", body))
}

/// The `files` of a diff report as a table: path, status, lines added and removed.
fn files_table(caption: &str, report: &J) -> Markup {
    html! {
        div.scroll tabindex="0" { table {
            caption { (caption) }
            thead { tr { th scope="col" { "File" } th scope="col" { "Status" } th scope="col" { "Added" } th scope="col" { "Removed" } } }
            tbody { @for f in report.get("files").and_then(J::as_array).into_iter().flatten() {
                tr { th scope="row" { code { (text(f, "path")) } } td { (text(f, "status")) } td.num { (num(f, "added")) } td.num { (num(f, "removed")) } }
            } }
        } }
    }
}

/// The blame page: a form for a path, and its lines with who wrote each.
pub(super) fn blame_page(d: &Dispatcher, ask: &Ask) -> Response {
    let path = ask.field("path");
    let report = match path {
        Some(p) => match call(d, "GET", "/blame", json!({"file": p})) {
            Ok(r) => Some(r),
            Err(r) => return r,
        },
        None => None,
    };
    let body = html! {
        h1 { "Blame" }
        form.filters method="get" action="/view/blame" {
            label for="path" { "File (from the repository's top)" }
            input id="path" name="path" value=(path.unwrap_or(""));
            button type="submit" { "Blame" }
        }
        @if let Some(r) = &report { (blame_table(r)) } @else { p { "Give a file to see which run, task and model wrote each line." } }
    };
    respond(200, layout::page("Blame", "/view/blame", body))
}

/// Each line with its task's run, id, model and cost.
fn blame_table(r: &J) -> Markup {
    let tasks: Vec<J> = r
        .get("tasks")
        .and_then(J::as_array)
        .cloned()
        .unwrap_or_default();
    let task = |seq: u64| tasks.iter().find(|t| num(t, "seq") == seq);
    let lines: Vec<J> = r
        .get("lines")
        .and_then(J::as_array)
        .cloned()
        .unwrap_or_default();
    html! {
        p { code { (text(r, "file")) } " at " code { (clip(&text(r, "rev"), 12)) } ", " (lines.len()) " lines." }
        div.scroll tabindex="0" { table.blame {
            caption { "Who wrote each line" }
            thead { tr { th scope="col" { "Line" } th scope="col" { "Run" } th scope="col" { "Task" } th scope="col" { "Model" } th scope="col" { "Cost" } th scope="col" { "Text" } } }
            tbody { @for l in &lines {
                @let t = l.get("task").and_then(J::as_u64).and_then(task);
                tr {
                    th scope="row" { (num(l, "line")) }
                    @if let Some(t) = t {
                        td { a href=(format!("/view/run/{}", num(t, "run"))) { "#" (num(t, "run")) } }
                        td { a href=(format!("/view/run/{}/task/{}", num(t, "run"), text(t, "id"))) { (text(t, "id")) } }
                        td { (text(t, "model")) }
                        td.num { (num(t, "prompt_tokens") + num(t, "completion_tokens")) " tokens"
                            @if let Some(c) = t.get("cost_usd").and_then(J::as_f64) { ", $" (format!("{c:.4}")) } }
                    } @else {
                        td colspan="4" { span.muted { "not written by a run" } }
                    }
                    td { code { (text(l, "text")) } }
                }
            } }
        } }
    }
}
