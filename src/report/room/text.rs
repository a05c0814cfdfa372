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
        lines.push(format!("plan     {}", waves.join(" then ")));
    }
    if let Some(Value::Array(tasks)) = room.get("tasks")
        && !tasks.is_empty()
    {
        lines.push("tasks".into());
        for t in tasks {
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
        }
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
