//! Reading what each agent CLI printed: the answer, the model and the tokens (and cost) it
//! reported, and the errors it reported in its own output (a refused tool use, a failed turn, a
//! refused edit), each of which fails the task with the CLI's own words.

use super::failure::AgentFailure;
use super::{Parsed, edits};
use crate::exec::Usage;

/// Claude Code's result: with `--output-format stream-json --verbose`, one event per line and
/// a last `{"type": "result", ...}`; with `--output-format json`, that object alone. It holds
/// `is_error`, `subtype`, `result`, `usage`, `modelUsage`, `total_cost_usd` and
/// `permission_denials` (each a tool use the CLI refused).
pub(super) fn read_claude(stdout: &str) -> Result<Parsed, AgentFailure> {
    let mut result: Option<serde_json::Value> = None;
    let mut init_model: Option<String> = None;
    for line in stdout.lines().map(str::trim).filter(|l| l.starts_with('{')) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        match v["type"].as_str() {
            Some("result") => result = Some(v),
            Some("system") if v["subtype"] == "init" => {
                init_model = v["model"].as_str().map(str::to_string);
            }
            _ => {}
        }
    }
    let v = match result {
        Some(v) => v,
        None => match serde_json::from_str::<serde_json::Value>(stdout.trim()) {
            Ok(v) if v["type"] == "result" => v,
            Ok(_) => {
                return Err(AgentFailure::NotAResult);
            }
            Err(e) => {
                return Err(AgentFailure::NoResult(e.to_string()));
            }
        },
    };
    let text = v["result"].as_str().unwrap_or("").to_string();
    if v["is_error"] == true {
        let sub = v["subtype"].as_str().unwrap_or("error");
        return Err(AgentFailure::Reported {
            agent: "claude",
            kind: Some(sub.to_string()),
            message: one_line(&text),
        });
    }
    claude_denials(&v)?;
    edits::claude_check(stdout)?;
    // The model that wrote the most; the first one named when none counts.
    let model = v["modelUsage"]
        .as_object()
        .and_then(|m| {
            m.iter()
                .max_by_key(|(_, u)| u["outputTokens"].as_u64().unwrap_or(0))
                .map(|(k, _)| k.clone())
        })
        .or(init_model);
    let usage = v["usage"].as_object().map(|u| Usage {
        estimated: false,
        truncated: false,
        over_reservation: None,
        input_tokens: u.get("input_tokens").and_then(|x| x.as_u64()).unwrap_or(0),
        output_tokens: u.get("output_tokens").and_then(|x| x.as_u64()).unwrap_or(0),
    });
    let cost_usd = v["total_cost_usd"].as_f64();
    Ok(Parsed {
        text,
        model,
        usage,
        cost_usd,
    })
}

/// Claude Code's `permission_denials` (each a tool use it refused): any is an error naming the
/// first three.
fn claude_denials(v: &serde_json::Value) -> Result<(), AgentFailure> {
    let Some(denied) = v["permission_denials"].as_array().filter(|d| !d.is_empty()) else {
        return Ok(());
    };
    let what: Vec<String> = denied
        .iter()
        .take(3)
        .map(|d| {
            let tool = d["tool_name"].as_str().unwrap_or("a tool");
            let input = &d["tool_input"];
            let target = input["file_path"]
                .as_str()
                .or_else(|| input["command"].as_str())
                .or_else(|| input["path"].as_str())
                .unwrap_or("");
            one_line(&format!("{tool} {target}")).trim().to_string()
        })
        .collect();
    Err(AgentFailure::Refused {
        count: denied.len(),
        what,
    })
}

/// Codex's `exec --json` events, one per line: `thread.started`, `turn.started`,
/// `item.started` / `item.completed` (an `agent_message` with the answer's `text`, a
/// `command_execution`, a `file_change` with its `status`), `turn.completed` with `usage`,
/// and `turn.failed` / `error` when it gave up. A file change that failed, or an error, fails
/// the call even when Codex exits 0. Without JSON lines (an older Codex), its stdout is the
/// answer and the model is read from the header it prints on stderr.
pub(super) fn read_codex(stdout: &str, stderr: &str) -> Result<Parsed, AgentFailure> {
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    if events.is_empty() {
        return Ok(Parsed {
            text: stdout.trim().to_string(),
            model: header_value(stderr, "model:"),
            usage: None,
            cost_usd: None,
        });
    }
    let mut text = String::new();
    let mut usage: Option<Usage> = None;
    let mut model: Option<String> = None;
    let mut first_error: Option<String> = None;
    for e in &events {
        let item = &e["item"];
        match e["type"].as_str().unwrap_or("") {
            "turn.failed" => {
                let msg = e["error"]["message"]
                    .as_str()
                    .or_else(|| e["message"].as_str())
                    .unwrap_or("no message");
                return Err(codex_reported(msg));
            }
            // An `error` event is also how Codex warns (an unknown model's metadata): fatal
            // only when no turn completed.
            "error" if first_error.is_none() => {
                first_error = e["message"].as_str().map(str::to_string);
            }
            "item.completed" if item["type"] == "agent_message" => {
                text = item["text"].as_str().unwrap_or("").to_string();
            }
            "item.completed" if item["type"] == "file_change" && item["status"] == "failed" => {
                return Err(AgentFailure::EditFailed {
                    agent: "codex",
                    what: "patch",
                    detail: one_line(&item["changes"].to_string()),
                });
            }
            "item.completed" if item["type"] == "error" && first_error.is_none() => {
                first_error = item["message"].as_str().map(str::to_string);
            }
            "turn.completed" => usage = Some(add_turn(usage.take(), &e["usage"])),
            _ => {}
        }
        if model.is_none() {
            model = e["model"].as_str().map(str::to_string);
        }
    }
    if usage.is_none()
        && let Some(msg) = first_error
    {
        return Err(codex_reported(&msg));
    }
    edits::codex_check(&events)?;
    Ok(Parsed {
        text: text.trim().to_string(),
        model: model.or_else(|| header_value(stderr, "model:")),
        usage,
        // Codex reports tokens, never a cost.
        cost_usd: None,
    })
}

/// Codex's own error message, as a failure.
fn codex_reported(message: &str) -> AgentFailure {
    AgentFailure::Reported {
        agent: "codex",
        kind: None,
        message: one_line(message),
    }
}

/// `so_far` plus one `turn.completed` event's `usage` (Codex reports each turn's own counts).
fn add_turn(so_far: Option<Usage>, u: &serde_json::Value) -> Usage {
    let add = |k: &str| u[k].as_u64().unwrap_or(0);
    let prev = so_far.unwrap_or(Usage {
        estimated: false,
        truncated: false,
        over_reservation: None,
        input_tokens: 0,
        output_tokens: 0,
    });
    Usage {
        input_tokens: prev.input_tokens + add("input_tokens"),
        output_tokens: prev.output_tokens + add("output_tokens"),
        ..prev
    }
}

/// aider's output: its banner, the answer, `Applied edit to FILE` for each edit made, and a
/// `Tokens: N sent, M received` line. In a worktree, an edit it could not apply (the model's
/// reply did not match the file or its edit format) fails the call.
pub(super) fn read_aider(
    stdout: &str,
    stderr: &str,
    editing: bool,
) -> Result<Parsed, AgentFailure> {
    const REFUSED: [&str; 4] = [
        "did not conform to the edit format",
        "Unable to apply",
        "Did not apply edit",
        "failed to apply",
    ];
    if editing
        && let Some(l) = stdout
            .lines()
            .chain(stderr.lines())
            .find(|l| REFUSED.iter().any(|r| l.contains(r)))
    {
        return Err(AgentFailure::AiderEdit(one_line(l)));
    }
    let usage = stdout.lines().rev().find_map(aider_tokens);
    let cost_usd = stdout.lines().rev().find_map(aider_cost);
    Ok(Parsed {
        text: aider_answer(stdout),
        model: aider_model(stdout).or_else(|| aider_model(stderr)),
        usage,
        cost_usd,
    })
}

/// The session cost of aider's `Tokens: ... Cost: $0.01 message, $0.02 session.` (printed
/// only when it knows a price for the model).
fn aider_cost(line: &str) -> Option<f64> {
    let rest = line.trim().strip_prefix("Tokens:")?;
    let cost = &rest[rest.find("Cost:")? + "Cost:".len()..];
    let session = cost
        .split(',')
        .find(|p| p.trim().trim_end_matches('.').ends_with("session"))?;
    session
        .trim()
        .trim_end_matches('.')
        .trim_end_matches("session")
        .trim()
        .trim_start_matches('$')
        .replace(',', "")
        .parse::<f64>()
        .ok()
}

/// aider's `Tokens: 2.1k sent, 36 received.` (with a cost after it when it knows one).
fn aider_tokens(line: &str) -> Option<Usage> {
    let rest = line.trim().strip_prefix("Tokens:")?;
    let mut parts = rest.split(',');
    let count = |s: &str, word: &str| -> Option<u64> {
        let n = s.trim().strip_suffix(word)?.trim().trim_end_matches('.');
        let (num, mult) = match n.strip_suffix('k') {
            Some(k) => (k, 1000.0),
            None => (n, 1.0),
        };
        num.replace(',', "")
            .parse::<f64>()
            .ok()
            .map(|f| (f * mult).round() as u64)
    };
    let sent = count(parts.next()?, "sent")?;
    let received = count(parts.next()?.split('.').next()?, "received")?;
    Some(Usage {
        estimated: false,
        truncated: false,
        over_reservation: None,
        input_tokens: sent,
        output_tokens: received,
    })
}

fn one_line(s: &str) -> String {
    let s: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    s.chars().take(200).collect()
}

/// The value of the first `KEY VALUE` line (Codex's header: `model: gpt-5-codex`).
fn header_value(text: &str, key: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix(key))
        .map(|v| v.trim().to_string())
        .find(|v| !v.is_empty())
}

/// aider's output without the banner it prints first (version, models, repository, repo map).
fn aider_answer(stdout: &str) -> String {
    const BANNER: [&str; 6] = [
        "Aider v",
        "Main model:",
        "Model:",
        "Weak model:",
        "Git repo:",
        "Repo-map:",
    ];
    let mut lines = stdout.lines().peekable();
    while let Some(l) = lines.peek() {
        let t = l.trim();
        if t.is_empty() || BANNER.iter().any(|b| t.starts_with(b)) {
            lines.next();
        } else {
            break;
        }
    }
    lines.collect::<Vec<_>>().join("\n").trim().to_string()
}

/// aider's `Model: NAME with FORMAT edit format` (`Main model:` in newer versions).
fn aider_model(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let l = l.trim();
        let rest = l
            .strip_prefix("Main model:")
            .or_else(|| l.strip_prefix("Model:"))?;
        rest.split_whitespace().next().map(str::to_string)
    })
}
