//! The review pages' costs, diffs and tool-call timeline: each run's tokens and dollars on the
//! runs page are `runs --json`'s; a task's diff is syntax-coloured with classes, unified or
//! side by side by a plain link, and hostile text in it stays text; a task's tool calls are
//! drawn as bars on one time axis.

use serde_json::{Value as J, json};

use super::view::{CSP, IMG, SCRIPT, login, page};
use crate::common::{Repo, on_each_kind};

/// Appends one entry by the actor `test`; its seq.
fn put(repo: &Repo, kind: &str, parent: Option<u64>, ts: Option<f64>, body: J) -> u64 {
    crate::view::put_at(repo, "test", kind, parent, ts, body)
}

/// A run of one task T1: request, plan, task; its seqs (request, task).
fn one_task_run(repo: &Repo, request: &str) -> (u64, u64) {
    let r = put(repo, "request", None, None, json!({"text": request}));
    let plan = put(
        repo,
        "plan",
        Some(r),
        None,
        json!({
            "tasks": [{"id": "T1", "agent": "backend", "instruction": "fix add", "depends_on": [], "order_deps": [], "done_when": []}],
            "waves": [["T1"]],
            "edges": []
        }),
    );
    let t = put(
        repo,
        "task",
        Some(plan),
        None,
        json!({"id": "T1", "agent": "backend", "instruction": "fix add", "data_from": [], "done_when": []}),
    );
    (r, t)
}

/// The cells of the runs page's row for run `seq`.
fn row_of(body: &str, seq: u64) -> &str {
    let start = body
        .find(&format!(r#"href="/view/run/{seq}""#))
        .unwrap_or_else(|| panic!("run {seq} is not listed: {body}"));
    let end = body[start..].find("</tr>").unwrap() + start;
    &body[start..end]
}

#[test]
fn view_the_runs_page_shows_each_runs_tokens_and_usd_as_runs_json_gives_them() {
    on_each_kind(|repo| {
        // Run 0 reports usage on its task's result and on its answer; run 1 reports none.
        let (r, t) = one_task_run(repo, "add two numbers");
        put(
            repo,
            "result",
            Some(t),
            None,
            json!({"id": "T1", "ok": true, "model": "worker-a", "output": "done",
                   "usage": {"model": "worker-a", "prompt_tokens": 1200, "completion_tokens": 345, "cost_usd": 0.0123}}),
        );
        put(
            repo,
            "result",
            Some(r),
            None,
            json!({"answer": "added",
                   "usage": {"model": "writer-b", "prompt_tokens": 100, "completion_tokens": 20, "cost_usd": 0.0007}}),
        );
        let (quiet, qt) = one_task_run(repo, "say nothing");
        put(
            repo,
            "result",
            Some(qt),
            None,
            json!({"id": "T1", "ok": true, "model": "worker-a", "output": "ok"}),
        );
        let runs = repo.forum_json(&["runs"]);
        let rows = runs["runs"].as_array().unwrap();
        let costly = rows.iter().find(|x| x["request_seq"] == json!(r)).unwrap();
        assert_eq!(costly["tokens"], json!(1665), "{costly}");
        let usd = costly["cost_usd"].as_f64().unwrap();
        assert!((usd - 0.013).abs() < 1e-12, "{costly}");
        let plain = rows
            .iter()
            .find(|x| x["request_seq"] == json!(quiet))
            .unwrap();
        assert_eq!(
            (&plain["tokens"], &plain["cost_usd"]),
            (&json!(0), &J::Null)
        );

        let d = repo.serve(&[], std::process::Stdio::null());
        let cookie = login(&d);
        // The daemon's route gives the same numbers as the command line.
        let page_body = page(&d, &cookie, "/view/runs").body;
        assert!(
            page_body.contains(r#"<th scope="col">Tokens</th>"#),
            "{page_body}"
        );
        let row = row_of(&page_body, r);
        assert!(row.contains(r#"<td class="num">1665</td>"#), "{row}");
        assert!(row.contains(&format!("${usd:.4}")), "{row}");
        let row = row_of(&page_body, quiet);
        assert!(row.contains(r#"<td class="num">0</td>"#), "{row}");
        assert!(row.contains(r#"<td class="num">—</td>"#), "{row}");
        // The run page's budget sums the same usage to the same figures.
        let run = page(&d, &cookie, &format!("/view/run/{r}")).body;
        assert!(
            run.contains(&format!("Spent 1665 tokens, ${usd:.4}")),
            "{run}"
        );
    });
}

/// A Rust diff whose added line carries hostile text inside a string and a comment.
const RUST_DIFF: &str = "diff --git a/src/lib.rs b/src/lib.rs\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,3 +1,3 @@\n // adds\n-fn add(a: u32) -> u32 { a }\n+pub fn add(a: u32) -> u32 { a + 1 }\n+let s = \"<script>alert(1)</script>\"; // <img src=x onerror=alert(1)>\n";

/// A run whose task T1 recorded [`RUST_DIFF`] as its change.
fn diff_run(repo: &Repo) {
    let (_, t) = one_task_run(repo, "fix add");
    let res = put(
        repo,
        "result",
        Some(t),
        None,
        json!({"id": "T1", "ok": true, "model": "worker-a", "output": "fixed"}),
    );
    put(
        repo,
        "change",
        Some(res),
        None,
        json!({"task": "T1", "files": [{"path": "src/lib.rs", "status": "M", "added": 2, "removed": 1}],
               "diff": RUST_DIFF, "truncated": false}),
    );
}

/// Every page must hold to the policy: no inline style or script, the hostile text escaped.
fn assert_clean(p: &str, body: &str) {
    let lower = body.to_ascii_lowercase();
    assert!(!lower.contains(" style="), "{p}: a style attribute");
    assert!(!lower.contains("<script"), "{p}: a script element");
    assert!(
        !body.contains(SCRIPT) && !body.contains(IMG),
        "{p}: hostile text came through"
    );
}

#[test]
fn view_a_rust_diff_is_coloured_with_classes_in_both_layouts() {
    let repo = Repo::new("sha1");
    diff_run(&repo);
    let d = repo.serve(&[], std::process::Stdio::null());
    let cookie = login(&d);
    for p in [
        "/view/run/0/task/T1",
        "/view/run/0/task/T1?diff=unified",
        "/view/run/0/task/T1?diff=split",
    ] {
        let got = page(&d, &cookie, p);
        assert_eq!(got.status, 200, "{p}: {}", got.body);
        assert_eq!(got.header("content-security-policy"), Some(CSP), "{p}");
        let body = got.body;
        for keyword in ["pub", "fn", "let"] {
            assert!(
                body.contains(&format!(r#"<span class="sx-k">{keyword}</span>"#)),
                "{p}: {keyword} is not a keyword span: {body}"
            );
        }
        assert!(body.contains(r#"<span class="sx-c">// adds</span>"#), "{p}");
        assert!(body.contains(r#"<span class="sx-n">1</span>"#), "{p}");
        // The hostile text is a string and a comment, shown escaped.
        assert_clean(p, &body);
        assert!(
            body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{p}: {body}"
        );
        assert!(
            body.contains("&lt;img src=x onerror=alert(1)&gt;"),
            "{p}: {body}"
        );
    }
}

#[test]
fn view_the_split_diff_puts_old_and_new_lines_in_two_columns() {
    let repo = Repo::new("sha1");
    diff_run(&repo);
    let d = repo.serve(&[], std::process::Stdio::null());
    let cookie = login(&d);
    let unified = page(&d, &cookie, "/view/run/0/task/T1").body;
    assert!(!unified.contains(r#"<table class="split""#));
    assert!(unified.contains(r#"<pre class="diff" tabindex="0">"#));
    // Plain links switch the layout, the current one marked.
    assert!(
        unified.contains(
            r#"<a href="/view/run/0/task/T1?diff=unified#diff" aria-current="true">unified</a>"#
        ),
        "{unified}"
    );
    assert!(unified.contains(r#"<a href="/view/run/0/task/T1?diff=split#diff">side by side</a>"#));
    let split = page(&d, &cookie, "/view/run/0/task/T1?diff=split").body;
    assert!(split.contains(
        r#"<a href="/view/run/0/task/T1?diff=split#diff" aria-current="true">side by side</a>"#
    ));
    assert!(split.contains(r#"<table class="split">"#), "{split}");
    let rows: Vec<&str> = split
        .split("<tr>")
        .skip(1)
        .map(|r| &r[..r.find("</tr>").unwrap()])
        .collect();
    // The removed line sits beside the line that replaced it: old number and text left, new
    // number and text right, in one row.
    let replaced = rows
        .iter()
        .find(|r| r.contains(r#"class="old del""#))
        .unwrap_or_else(|| panic!("no removed line: {split}"));
    let second = replaced[1..].find(r#"<td class="ln">"#).unwrap() + 1;
    let (left, right) = replaced.split_at(second);
    assert!(
        left.starts_with(r#"<td class="ln">2</td><td class="old del">"#),
        "{replaced}"
    );
    assert!(
        right.starts_with(r#"<td class="ln">2</td><td class="new add">"#),
        "{replaced}"
    );
    assert!(
        left.contains(r#"<span class="sx-k">fn</span>"#) && !left.contains("pub"),
        "{left}"
    );
    assert!(
        right.contains(r#"<span class="sx-k">pub</span>"#),
        "{right}"
    );
    // The second added line has no old line beside it; the context line is on both sides.
    assert!(
        rows.iter()
            .any(|r| r.contains(r#"<td class="old none"></td>"#) && r.contains("onerror"))
    );
    let context = rows.iter().find(|r| r.contains("// adds")).unwrap();
    assert_eq!(
        context
            .matches(r#"<span class="sx-c">// adds</span>"#)
            .count(),
        2,
        "{context}"
    );
    assert_clean("split", &split);
}

/// The x and width of each bar of the tool-call timeline, in the order drawn.
fn bars(body: &str) -> Vec<(f64, f64, f64)> {
    body.split("<rect class=\"bar ")
        .skip(1)
        .map(|r| {
            let attr = |name: &str| -> f64 {
                let at = r.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
                r[at..at + r[at..].find('"').unwrap()].parse().unwrap()
            };
            (attr("x"), attr("y"), attr("width"))
        })
        .collect()
}

/// A run whose task T1 made three tool calls lasting 1 s, 2 s (it failed) and 4 s, with gaps
/// of 1 s between them; the run's seq.
pub(crate) fn tool_calls_run(repo: &Repo) -> u64 {
    let (r, t) = one_task_run(repo, "read and fix");
    let base = 1_800_000_000.0;
    let calls = [
        (0.0, 1.0, "read_file"),
        (2.0, 4.0, "apply_diff"),
        (5.0, 9.0, "run_tests"),
    ];
    for (n, (start, end, tool)) in calls.into_iter().enumerate() {
        let call = put(
            repo,
            "tool_call",
            Some(t),
            Some(base + start),
            json!({"task": "T1", "n": n + 1, "tool": tool, "arguments": "{}", "truncated": false, "via": "test"}),
        );
        put(
            repo,
            "tool_result",
            Some(call),
            Some(base + end),
            json!({"task": "T1", "n": n + 1, "tool": tool, "ok": n != 1, "refused": false, "output": "out", "truncated": false}),
        );
    }
    r
}

#[test]
fn view_a_tasks_three_tool_calls_are_drawn_as_bars_in_time_order() {
    let repo = Repo::new("sha1");
    assert_eq!(tool_calls_run(&repo), 0);
    let d = repo.serve(&[], std::process::Stdio::null());
    let cookie = login(&d);
    let body = page(&d, &cookie, "/view/run/0/task/T1").body;
    assert_clean("task", &body);
    assert!(
        body.contains("The tool calls of task T1: 3 calls over 9.0 s"),
        "{body}"
    );
    let b = bars(&body);
    assert_eq!(b.len(), 3, "{body}");
    // In time order: each bar starts right of the one before and sits a row lower.
    assert!(b[0].0 < b[1].0 && b[1].0 < b[2].0, "{b:?}");
    assert!(b[0].1 < b[1].1 && b[1].1 < b[2].1, "{b:?}");
    // Widths in proportion to the durations (1 : 2 : 4), starts to the gaps (0, 2, 5 of 9 s).
    let unit = b[0].2;
    assert!(
        (b[1].2 / unit - 2.0).abs() < 0.01 && (b[2].2 / unit - 4.0).abs() < 0.01,
        "{b:?}"
    );
    assert!(((b[1].0 - b[0].0) / unit - 2.0).abs() < 0.01, "{b:?}");
    assert!(((b[2].0 - b[0].0) / unit - 5.0).abs() < 0.01, "{b:?}");
    // Each bar says what it was, the failed call is marked, and the list is still there.
    assert!(body.contains("Call 2, apply_diff: 2.0 s, failed"), "{body}");
    assert!(body.contains(r#"<rect class="bar bad""#));
    assert_eq!(body.matches(r#"<li class="call">"#).count(), 3);
}
