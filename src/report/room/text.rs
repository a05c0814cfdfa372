//! The run room and its brief as text.

use super::*;

pub(super) fn state_words(state: &str) -> String {
    state.replace('_', " ")
}

/// The brief as text for a person (`git forum room --brief`).
pub fn room_brief_text(room: &Value) -> String {
    let brief = room
        .get("brief")
        .cloned()
        .unwrap_or_else(|| build_brief(room));
    let get = |k: &str| brief.get(k).map(py_str).unwrap_or_default();
    let mut lines = vec![
        get("title"),
        format!(
            "[{}] posture {}, profile {}",
            state_words(&get("state")),
            get("posture"),
            get("delivery_profile")
        ),
        String::new(),
        get("summary"),
        format!("Risk:      {}", get("risk")),
        format!("Next step: {}", get("next_step")),
    ];
    if let Some(Value::Array(bullets)) = brief.get("bullets")
        && !bullets.is_empty()
    {
        lines.push(String::new());
        lines.extend(bullets.iter().map(|b| format!("  * {}", py_str(b))));
    }
    lines.join("\n")
}

/// The plan's line: each wave's task ids, in order.
fn plan_line(waves: &[Value]) -> String {
    let waves: Vec<String> = waves
        .iter()
        .map(|w| match w {
            Value::Array(ids) => {
                format!(
                    "[{}]",
                    ids.iter().map(py_str).collect::<Vec<_>>().join(", ")
                )
            }
            other => py_str(other),
        })
        .collect();
    format!("plan     {}", waves.join(" then "))
}

/// One task's line in the room text (and its work, when it has some).
fn push_task_lines(lines: &mut Vec<String>, t: &Value) {
    let id = t.get("id").map(py_str).unwrap_or_default();
    let agent = t.get("agent").map(py_str).unwrap_or_default();
    let result = match t.get("result").and_then(|r| r.get("ok")) {
        Some(Value::Bool(true)) => "ok",
        Some(Value::Bool(false)) => "failed",
        None => "no result",
        Some(_) => "unclear",
    };
    let verdict = match t.get("verdict").and_then(|v| v.get("ok")) {
        Some(Value::Bool(true)) => "accepted",
        Some(Value::Bool(false)) => "not accepted",
        None => "not judged",
        Some(_) => "unclear",
    };
    let output = t
        .get("result")
        .and_then(|r| r.get("output"))
        .map(py_str)
        .unwrap_or_default();
    lines.push(format!(
        "  {id:<6} {agent:<20} {result:<9} {verdict:<12} {}",
        output.replace('\n', " ")
    ));
    if let Some(w) = t.get("work") {
        lines.push(format!("         {}", task_work_text(w)));
        // A task run several times: its attempts side by side.
        if let Some(a) = w.get("attempts") {
            for l in crate::report::work_report::attempt_table(&id, a) {
                lines.push(format!("         {l}"));
            }
        }
    }
}

/// The room as text for a person (`git forum room --text`).
pub fn room_text(room: &Value) -> String {
    let mut lines = Vec::new();
    let verified = truthy(room.get("verified"));
    let range = match room.get("entry_range") {
        Some(Value::Array(r)) if r.len() == 2 && !matches!(r[0], Value::Null) => {
            format!("entries {}..={}", py_str(&r[0]), py_str(&r[1]))
        }
        _ => "no entries".to_string(),
    };
    let checkpoint = room.get("checkpoint").map(py_str).unwrap_or_default();
    lines.push(format!(
        "Run room ({range}; ledger {}; checkpoint {})",
        if verified { "verified" } else { "NOT VERIFIED" },
        &checkpoint[..checkpoint.len().min(16)]
    ));
    if let Some(t) = room
        .get("request")
        .and_then(|r| r.get("text"))
        .filter(|t| truthy(Some(t)))
    {
        lines.push(format!("request  {}", py_str(t)));
    }
    if let Some(f) = room.get("route_frame").filter(|f| truthy(Some(f))) {
        let part = |k: &str| f.get(k).map(py_str).unwrap_or_default();
        lines.push(format!(
            "route    {} / {} / {} (profile {})",
            part("domain"),
            part("intent"),
            part("posture"),
            part("delivery_profile")
        ));
    }
    if let Some(Value::Array(waves)) = room.get("plan").and_then(|p| p.get("waves")) {
        lines.push(plan_line(waves));
    }
    if let Some(Value::Array(tasks)) = room.get("tasks")
        && !tasks.is_empty()
    {
        lines.push("tasks".into());
        for t in tasks {
            push_task_lines(&mut lines, t);
        }
    }
    if let Some(w) = room.get("work") {
        lines.push(format!("work     {}", work_text(w)));
    }
    if let Some(t) = room
        .get("answer")
        .and_then(|a| a.get("text"))
        .filter(|t| truthy(Some(t)))
    {
        lines.push(format!("answer   {}", py_str(t)));
    }
    if let Some(Value::Array(actions)) = room.get("next_actions")
        && !actions.is_empty()
    {
        lines.push("next".into());
        for a in actions {
            let get = |k: &str| a.get(k).map(py_str).unwrap_or_default();
            lines.push(format!(
                "  [{}] {} ({})",
                get("priority"),
                get("label"),
                get("reason")
            ));
        }
    }
    lines.join("\n")
}

fn n(v: Option<&Value>) -> u64 {
    u64::try_from(py_int(v)).unwrap_or(0)
}

/// The run branch a room's `work` names, or `no run branch` when the run made none.
pub(super) fn branch_or_none(w: &Value) -> String {
    match w.get("branch") {
        Some(Value::Str(b)) => b.clone(),
        _ => "no run branch".into(),
    }
}

/// `forum/run-3: 2 changes (3 files, +10 -2); checks 3/4 passed (run branch 1/1); 1 merged,
/// 1 blocked, 0 waiting`.
fn work_text(w: &Value) -> String {
    let checks = |v: Option<&Value>| {
        let (p, f) = (
            n(v.and_then(|c| c.get("passed"))),
            n(v.and_then(|c| c.get("failed"))),
        );
        (p, p + f)
    };
    let (passed, all) = checks(w.get("checks"));
    let (run_passed, run_all) = checks(w.get("run_checks"));
    let ship = |k: &str| n(w.get("ship").and_then(|s| s.get(k)));
    let plural = |k: &str, one: &str| {
        let c = n(w.get(k));
        format!("{c} {one}{}", if c == 1 { "" } else { "s" })
    };
    let mut line = format!(
        "{}: {} ({}, +{} -{}); checks {passed}/{all} passed",
        branch_or_none(w),
        plural("changes", "change"),
        plural("files", "file"),
        n(w.get("added")),
        n(w.get("removed")),
    );
    if run_all > 0 {
        line.push_str(&format!(" (run branch {run_passed}/{run_all})"));
    }
    line.push_str(&format!(
        "; {} merged, {} blocked, {} waiting",
        ship("merged"),
        ship("blocked"),
        ship("waiting")
    ));
    if n(w.get("conflicts")) > 0 {
        line.push_str(&format!(", {}", plural("conflicts", "conflict")));
    }
    if let Some(o @ Value::Object(_)) = w.get("outcome") {
        line.push_str(&format!(
            "; outcome {} (exit {})",
            o.get("name").map(py_str).unwrap_or_default(),
            n(o.get("code"))
        ));
    }
    line
}

/// `change calc.py (+1 -1); checks 1/1 passed; merged: the fix is right`.
fn task_work_text(w: &Value) -> String {
    let change = match w.get("change") {
        Some(c @ Value::Object(_)) if !matches!(c.get("commit"), None | Some(Value::Null)) => {
            let files: Vec<String> = match c.get("files") {
                Some(Value::Array(f)) => f
                    .iter()
                    .map(|f| f.get("path").map(py_str).unwrap_or_default())
                    .collect(),
                _ => Vec::new(),
            };
            format!(
                "change {} (+{} -{})",
                files.join(", "),
                n(c.get("added")),
                n(c.get("removed"))
            )
        }
        Some(Value::Object(_)) => "no change".to_string(),
        _ => "checks only".to_string(),
    };
    let passed = n(w.get("checks").and_then(|c| c.get("passed")));
    let failed = n(w.get("checks").and_then(|c| c.get("failed")));
    let state = w.get("state").map(py_str).unwrap_or_default();
    let reason = w
        .get("ship")
        .and_then(|s| s.get("reason"))
        .map(py_str)
        .filter(|r| !r.is_empty());
    format!(
        "{change}; checks {passed}/{} passed; {state}{}",
        passed + failed,
        reason
            .map(|r| format!(": {}", r.replace('\n', " ")))
            .unwrap_or_default()
    )
}
