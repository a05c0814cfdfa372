//! Edits an agent tried and did not make, read from its event stream. Claude Code reports a
//! failed Edit (its old text not in the file) only as a tool error sent back to its model, and
//! Codex a patch that did not apply, or a write the sandbox refused, only as a failed command;
//! each then ends its session as a success, so its result alone would call a task done that
//! changed nothing.

use std::path::Path;
use std::time::SystemTime;

use serde_json::Value;

use super::failure::AgentFailure;

/// The error of a call whose Claude Code `stream-json` output shows an edit left failed.
pub(super) fn claude_check(stdout: &str) -> Result<(), AgentFailure> {
    let turns: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(|v| v["type"] == "assistant" || v["type"] == "user")
        .collect();
    match claude_failed_edit(&turns) {
        Some(f) => Err(edit_failed("claude", "edit", &f)),
        None => Ok(()),
    }
}

/// The error of a call whose Codex `exec --json` events show a failed patch or a refused
/// write.
pub(super) fn codex_check(events: &[Value]) -> Result<(), AgentFailure> {
    match codex_failed_edit(events) {
        Some(f) => Err(edit_failed("codex", "edit", &f)),
        None => Ok(()),
    }
}

/// The error of a Codex call (its variables `vars`, `CODEX_HOME` among them, started at
/// `since`) whose session log shows a patch refused.
pub(super) fn codex_session_check(
    vars: &[(String, String)],
    since: SystemTime,
) -> Result<(), AgentFailure> {
    let Some((_, home)) = vars.iter().find(|(k, _)| k == "CODEX_HOME") else {
        return Ok(());
    };
    match codex_session_failed_patch(Path::new(home), since) {
        Some(f) => Err(edit_failed("codex", "patch", &f)),
        None => Ok(()),
    }
}

/// The failure of `agent`'s `what` (an edit or a patch), with its words cut to one line.
fn edit_failed(agent: &'static str, what: &'static str, detail: &str) -> AgentFailure {
    AgentFailure::EditFailed {
        agent,
        what,
        detail: cut(detail),
    }
}

/// One line of at most 200 characters.
fn cut(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(200)
        .collect()
}

/// Claude Code's tools that change a file.
const CLAUDE_EDIT_TOOLS: [&str; 4] = ["Edit", "MultiEdit", "Write", "NotebookEdit"];

/// The first edit of Claude Code's `stream-json` events (`events`: one JSON object a line)
/// whose file was left unchanged: a file whose last edit came back as a tool error, as
/// `FILE: FIRST ERROR LINE`. An edit that failed and was then made by a later one is not
/// reported.
pub(super) fn claude_failed_edit(events: &[Value]) -> Option<String> {
    // Each edit tool use by id, with the file it edits.
    let mut uses: Vec<(String, String)> = Vec::new();
    // Each file's last edit result: `None` when it was made, else the error's first line.
    let mut last: Vec<(String, Option<String>)> = Vec::new();
    for e in events {
        let blocks = e["message"]["content"].as_array().into_iter().flatten();
        match e["type"].as_str() {
            Some("assistant") => {
                for b in blocks.filter(|b| b["type"] == "tool_use") {
                    let name = b["name"].as_str().unwrap_or("");
                    if CLAUDE_EDIT_TOOLS.contains(&name) {
                        let file = b["input"]["file_path"]
                            .as_str()
                            .or_else(|| b["input"]["notebook_path"].as_str())
                            .unwrap_or("a file");
                        uses.push((b["id"].as_str().unwrap_or("").into(), file.into()));
                    }
                }
            }
            Some("user") => {
                for b in blocks.filter(|b| b["type"] == "tool_result") {
                    let id = b["tool_use_id"].as_str().unwrap_or("");
                    let Some((_, file)) = uses.iter().find(|(u, _)| u == id) else {
                        continue;
                    };
                    let outcome = (b["is_error"] == true).then(|| first_line(&b["content"]));
                    last.retain(|(f, _)| f != file);
                    last.push((file.clone(), outcome));
                }
            }
            _ => {}
        }
    }
    last.into_iter()
        .find_map(|(file, err)| err.map(|e| format!("{file}: {e}")))
}

/// What the sandbox says to a write outside the worktree: its root is read-only.
const REFUSED_WRITE: &str = "Read-only file system";

/// The first of Codex's failed commands (`exec --json`'s `command_execution` items) that was a
/// patch (`apply_patch`) or a write the sandbox refused, as ``ERROR LINE (from `COMMAND`)``.
/// Other failed commands (a test run that fails) are the agent's own business.
pub(super) fn codex_failed_edit(events: &[Value]) -> Option<String> {
    events
        .iter()
        .filter(|e| e["type"] == "item.completed")
        .map(|e| &e["item"])
        .filter(|i| i["type"] == "command_execution" && i["status"] == "failed")
        .find_map(|i| {
            let command = i["command"].as_str().unwrap_or("");
            let output = i["aggregated_output"].as_str().unwrap_or("");
            let refused = output.lines().find(|l| l.contains(REFUSED_WRITE));
            let line = match refused {
                Some(l) => l.trim().to_string(),
                None if command.contains("apply_patch") => first_line(&i["aggregated_output"]),
                None => return None,
            };
            let shown: String = command
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(60)
                .collect();
            Some(format!("{line} (from `{shown}`)"))
        })
}

/// How Codex answers its model when a patch does not apply to the file (the patch is checked
/// before anything is written); its `exec --json` events do not show it.
const CODEX_PATCH_REFUSED: &str = "apply_patch verification failed";

/// The most session files read, and the largest read, in a Codex home: one task's sessions.
const MAX_SESSION_FILES: usize = 64;
const MAX_SESSION_BYTES: u64 = 32 << 20;

/// The first patch Codex's session logs (`CODEX_HOME/sessions/**/*.jsonl`, one task's,
/// written since `since`: an earlier call of the same task is not this one) show refused, as
/// its first line, when no later patch of the session applied. Codex checks a patch against
/// the file before it writes and tells only its model, as the output of the call
/// (`function_call_output`), so that is where a refused patch is seen.
pub(super) fn codex_session_failed_patch(codex_home: &Path, since: SystemTime) -> Option<String> {
    let mut files = Vec::new();
    let mut dirs = vec![codex_home.join("sessions")];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => dirs.push(p),
                Ok(t) if t.is_file() && p.extension().is_some_and(|x| x == "jsonl") => {
                    files.push(p)
                }
                _ => {}
            }
            if files.len() >= MAX_SESSION_FILES {
                break;
            }
        }
    }
    files.sort();
    let mut refused: Option<String> = None;
    for f in files {
        let fresh = std::fs::metadata(&f)
            .is_ok_and(|m| m.len() <= MAX_SESSION_BYTES && m.modified().is_ok_and(|t| t >= since));
        if !fresh {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for v in text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        {
            let payload = &v["payload"];
            if payload["type"] != "function_call_output"
                && payload["type"] != "custom_tool_call_output"
            {
                continue;
            }
            let output = match &payload["output"] {
                Value::String(s) => s.clone(),
                o => o["content"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| o.to_string()),
            };
            if output.contains(CODEX_PATCH_REFUSED) {
                refused = Some(first_line(&Value::String(output)));
            } else if output.contains("Success. Updated the following files") {
                refused = None;
            }
        }
    }
    refused
}

/// The first non-empty line of a tool result's content (a string, or text blocks), without
/// Claude Code's `<tool_use_error>` wrapping.
fn first_line(content: &Value) -> String {
    let text = match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    };
    let text = text
        .replace("<tool_use_error>", "")
        .replace("</tool_use_error>", "");
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("the tool reported an error");
    line.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn edit(id: &str, file: &str) -> Value {
        json!({"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": id, "name": "Edit", "input": {"file_path": file}}]}})
    }

    fn result(id: &str, error: Option<&str>) -> Value {
        let content = error.unwrap_or("The file has been updated.");
        json!({"type": "user", "message": {"content": [{"type": "tool_result",
            "tool_use_id": id, "is_error": error.is_some(), "content": content}]}})
    }

    #[test]
    fn an_edit_left_failed_is_reported_and_one_made_later_is_not() {
        let failed =
            "<tool_use_error>String to replace not found in file.\nString: x</tool_use_error>";
        let e = claude_failed_edit(&[edit("t1", "/w/calc.py"), result("t1", Some(failed))]);
        assert_eq!(
            e.as_deref(),
            Some("/w/calc.py: String to replace not found in file.")
        );
        let retried = [
            edit("t1", "/w/calc.py"),
            result("t1", Some(failed)),
            edit("t2", "/w/calc.py"),
            result("t2", None),
        ];
        assert_eq!(claude_failed_edit(&retried), None);
        // A failed read is not an edit.
        let read = json!({"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": "r1", "name": "Read", "input": {"file_path": "/w/x"}}]}});
        assert_eq!(
            claude_failed_edit(&[read, result("r1", Some("no such file"))]),
            None
        );
    }

    fn command(cmd: &str, output: &str) -> Value {
        json!({"type": "item.completed", "item": {"id": "i1", "type": "command_execution",
            "command": cmd, "aggregated_output": output, "exit_code": 1, "status": "failed"}})
    }

    #[test]
    fn a_failed_patch_and_a_refused_write_are_codex_edits_that_failed_and_a_failed_test_is_not() {
        let e = codex_failed_edit(&[command(
            "apply_patch <<'EOF'",
            "Failed to find expected lines in calc.py:\n    return a - b  # x\n",
        )]);
        assert_eq!(
            e.as_deref(),
            Some("Failed to find expected lines in calc.py: (from `apply_patch <<'EOF'`)")
        );
        let e = codex_failed_edit(&[command(
            "printf x > /h/v/out.txt",
            "bash: line 1: /h/v/out.txt: Read-only file system\n",
        )]);
        assert_eq!(
            e.as_deref(),
            Some(
                "bash: line 1: /h/v/out.txt: Read-only file system (from `printf x > /h/v/out.txt`)"
            )
        );
        assert_eq!(
            codex_failed_edit(&[command("python -m unittest", "FAILED (failures=1)\n")]),
            None
        );
    }

    #[test]
    fn a_patch_codex_refused_is_read_from_its_session_log_unless_a_later_one_applied() {
        let home = tempfile::tempdir().unwrap();
        let start = SystemTime::now() - std::time::Duration::from_secs(1);
        let day = home.path().join("sessions/2026/12/05");
        std::fs::create_dir_all(&day).unwrap();
        let out = |o: &str| {
            json!({"timestamp": "t", "type": "response_item", "payload": {
                "type": "function_call_output", "call_id": "c1", "output": o}})
            .to_string()
        };
        let refused = out(
            "apply_patch verification failed: Failed to find expected lines in /w/calc.py:\n    x",
        );
        std::fs::write(day.join("rollout-1.jsonl"), format!("{refused}\n")).unwrap();
        assert_eq!(
            codex_session_failed_patch(home.path(), start).as_deref(),
            Some("apply_patch verification failed: Failed to find expected lines in /w/calc.py:")
        );
        let applied = out("Success. Updated the following files:\nM calc.py\n");
        std::fs::write(
            day.join("rollout-1.jsonl"),
            format!("{refused}\n{applied}\n"),
        )
        .unwrap();
        assert_eq!(codex_session_failed_patch(home.path(), start), None);
        // A log older than the call is an earlier call's.
        std::fs::write(day.join("rollout-1.jsonl"), format!("{refused}\n")).unwrap();
        let later = SystemTime::now() + std::time::Duration::from_secs(60);
        assert_eq!(codex_session_failed_patch(home.path(), later), None);
        assert_eq!(
            codex_session_failed_patch(&home.path().join("none"), start),
            None
        );
    }
}
