//! What an agent CLI is doing, read from its output one line at a time while it runs: each
//! tool call it makes becomes a progress item (a verb, a target, whether it went well), shown
//! live like the built-in editing worker's (`T1 edit calc.py`, `T1 run make test (failed)`).
//!
//! * Claude Code (`--output-format stream-json --verbose`): an `assistant` event's `tool_use`
//!   blocks are calls (`Edit`, `MultiEdit`, `Write`, `NotebookEdit`: `edit PATH`; `Read`:
//!   `read PATH`; `Bash`: `run COMMAND`; `Grep`, `Glob`: `search PATTERN`; `LS`: `list PATH`;
//!   any other: its name); a `user` event's `tool_result` with `is_error` repeats its call,
//!   marked failed.
//! * Codex (`exec --json`): a `command_execution` item is `run COMMAND` when it starts, and
//!   again, marked failed, when it completes with a non-zero exit code; a `file_change` item is
//!   `edit PATH` for each change (marked failed when the item failed).
//! * aider (plain text): `Applied edit to PATH` is `edit PATH`, `Failed to apply edit to PATH`
//!   the same marked failed, `Running COMMAND` (a shell command it runs) is `run COMMAND`, and
//!   `## Running: COMMAND` (the header of its linter's complaints) is that lint command,
//!   failed.
//!
//! Everything shown comes from the agent, which may be hostile: control characters and
//! terminal escape sequences are removed (a file name cannot move the cursor or retitle the
//! user's terminal), a command is shown by its first line, and every target is cut to one
//! short line. Paths inside the worktree are shown relative to it.

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::Value;

use super::Preset;
use crate::exec::command::LiveCall;

/// Characters of a target shown before it is cut (a command's first line, a path).
const TARGET_CAP: usize = 80;

/// Characters of a verb (a tool's own name) shown.
const VERB_CAP: usize = 40;

/// Calls remembered by id, to name a failure reported later; an agent that makes more in one
/// call has its oldest forgotten (their failures are then not shown).
const REMEMBERED: usize = 4096;

/// Reads one agent CLI's output, line by line, into tool calls.
#[derive(Debug)]
pub(crate) struct Watch {
    preset: Preset,
    /// The worktree the agent edits, whose prefix is taken off the paths it names.
    base: Option<PathBuf>,
    /// Each call shown so far by its id, with its verb and target.
    calls: HashMap<String, (String, String)>,
}

impl Watch {
    /// A watch over `preset`'s output, for an agent working in `base` (if any).
    pub(crate) fn new(preset: Preset, base: Option<PathBuf>) -> Watch {
        Watch {
            preset,
            base,
            calls: HashMap::new(),
        }
    }

    /// The tool calls one line of output tells of (none for most lines).
    pub(crate) fn line(&mut self, line: &str) -> Vec<LiveCall> {
        match self.preset {
            Preset::Claude => self.claude(line),
            Preset::Codex => self.codex(line),
            Preset::Aider => self.aider(line),
        }
    }

    fn claude(&mut self, line: &str) -> Vec<LiveCall> {
        let Some(v) = json_line(line) else {
            return Vec::new();
        };
        let blocks = v["message"]["content"].as_array().into_iter().flatten();
        let mut out = Vec::new();
        match v["type"].as_str() {
            Some("assistant") => {
                for b in blocks.filter(|b| b["type"] == "tool_use") {
                    let name = b["name"].as_str().unwrap_or("");
                    let input = &b["input"];
                    let text = |k: &str| input[k].as_str().unwrap_or("");
                    let (verb, target) = match name {
                        "Edit" | "MultiEdit" | "Write" => ("edit", self.path(text("file_path"))),
                        "NotebookEdit" => ("edit", self.path(text("notebook_path"))),
                        "Read" => ("read", self.path(text("file_path"))),
                        "Bash" => ("run", command(text("command"))),
                        "Grep" | "Glob" => ("search", shown(text("pattern"))),
                        "LS" => ("list", self.path(text("path"))),
                        other => (other, String::new()),
                    };
                    let call = self.remember(b["id"].as_str(), verb, target);
                    out.push(call);
                }
            }
            Some("user") => {
                for b in blocks.filter(|b| b["type"] == "tool_result" && b["is_error"] == true) {
                    if let Some(call) = self.failed(b["tool_use_id"].as_str()) {
                        out.push(call);
                    }
                }
            }
            _ => {}
        }
        out
    }

    fn codex(&mut self, line: &str) -> Vec<LiveCall> {
        let Some(v) = json_line(line) else {
            return Vec::new();
        };
        let item = &v["item"];
        let id = item["id"].as_str();
        let started = match v["type"].as_str() {
            Some("item.started") => true,
            Some("item.completed") => false,
            _ => return Vec::new(),
        };
        let seen = id.is_some_and(|i| self.calls.contains_key(i));
        match item["type"].as_str() {
            Some("command_execution") => {
                let exit = item["exit_code"].as_i64();
                let failed = item["status"] == "failed" || exit.is_some_and(|c| c != 0);
                if started || !seen {
                    let call = self.remember(id, "run", command(str_of(&item["command"])));
                    if started || !failed {
                        return vec![call];
                    }
                }
                if failed {
                    return self.failed(id).into_iter().collect();
                }
                Vec::new()
            }
            Some("file_change") => {
                let failed = item["status"] == "failed";
                if seen && !failed {
                    return Vec::new();
                }
                if let Some(i) = id {
                    self.keep(i, ("edit".into(), String::new()));
                }
                item["changes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| LiveCall {
                        verb: "edit".into(),
                        target: self.path(str_of(&c["path"])),
                        ok: !failed,
                    })
                    .collect()
            }
            _ => Vec::new(),
        }
    }

    fn aider(&mut self, line: &str) -> Vec<LiveCall> {
        let line = line.trim_end_matches(['\r', '\n']);
        let call = |verb: &str, target: String, ok: bool| {
            vec![LiveCall {
                verb: verb.into(),
                target,
                ok,
            }]
        };
        if let Some(p) = line.strip_prefix("Applied edit to ") {
            call("edit", self.path(p), true)
        } else if let Some(p) = line.strip_prefix("Failed to apply edit to ") {
            call("edit", self.path(p), false)
        } else if let Some(c) = line.strip_prefix("## Running: ") {
            call("run", command(c), false)
        } else if let Some(c) = line.strip_prefix("Running ") {
            call("run", command(c), true)
        } else {
            Vec::new()
        }
    }

    /// A call shown now (as carried out), kept under `id` to name its failure later.
    fn remember(&mut self, id: Option<&str>, verb: &str, target: String) -> LiveCall {
        let verb = clean(verb, VERB_CAP);
        if let Some(id) = id {
            self.keep(id, (verb.clone(), target.clone()));
        }
        LiveCall {
            verb,
            target,
            ok: true,
        }
    }

    fn keep(&mut self, id: &str, call: (String, String)) {
        if self.calls.len() >= REMEMBERED {
            self.calls.clear();
        }
        self.calls.insert(id.to_string(), call);
    }

    /// The call `id` again, marked failed (`None` when it was never shown).
    fn failed(&self, id: Option<&str>) -> Option<LiveCall> {
        let (verb, target) = self.calls.get(id?)?.clone();
        Some(LiveCall {
            verb,
            target,
            ok: false,
        })
    }

    /// A path as shown: relative to the worktree when inside it, cleaned and cut.
    fn path(&self, p: &str) -> String {
        let p = p.trim();
        let rel = self
            .base
            .as_ref()
            .and_then(|b| b.to_str())
            .and_then(|b| p.strip_prefix(b.trim_end_matches('/')))
            .and_then(|r| r.strip_prefix('/'))
            .filter(|r| !r.is_empty());
        shown(rel.unwrap_or(p))
    }
}

/// One line of output as a JSON object, or `None`.
fn json_line(line: &str) -> Option<Value> {
    let line = line.trim();
    if !line.starts_with('{') {
        return None;
    }
    serde_json::from_str(line).ok()
}

/// A JSON value's text, or empty.
fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

/// A command as shown: its first line (with `…` when it has more), without the shell wrapper
/// Codex puts around it (`bash -lc '...'`), cleaned and cut.
fn command(c: &str) -> String {
    let c = unwrap_shell(c.trim());
    let mut lines = c.lines();
    let first = lines.next().unwrap_or("");
    let more = lines.any(|l| !l.trim().is_empty());
    let mut s = clean(first, TARGET_CAP);
    if more && !s.ends_with('…') {
        s.push_str(" …");
    }
    s
}

/// `bash -lc 'CMD'` (and `sh -c`, with or without a path) as `CMD`.
fn unwrap_shell(c: &str) -> &str {
    let rest = ["bash -lc ", "bash -c ", "sh -lc ", "sh -c "]
        .iter()
        .find_map(|w| {
            let at = c.find(w)?;
            let program = &c[..at];
            (program.is_empty() || (program.starts_with('/') && program.ends_with('/')))
                .then(|| &c[at + w.len()..])
        });
    match rest {
        Some(r) if r.len() >= 2 && r.starts_with('\'') && r.ends_with('\'') => &r[1..r.len() - 1],
        Some(r) if r.len() >= 2 && r.starts_with('"') && r.ends_with('"') => &r[1..r.len() - 1],
        Some(r) => r,
        None => c,
    }
}

/// A target as shown: cleaned and cut to [`TARGET_CAP`].
fn shown(s: &str) -> String {
    clean(s, TARGET_CAP)
}

/// `s` safe to print on a terminal, on one line of at most `cap` characters (`…` marks a cut):
/// escape sequences (CSI, OSC and the like) removed whole, every other control character
/// (carriage return, newline, tab, C1) a space, and the invisible characters that reorder or
/// hide text (bidirectional overrides, zero-width ones) dropped; runs of spaces are one.
pub(crate) fn clean(s: &str, cap: usize) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => skip_escape(&mut chars),
            // The one-character CSI and OSC of C1.
            '\u{9b}' => skip_until_final(&mut chars),
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            c if c.is_control() => out.push(' '),
            '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
            | '\u{feff}' => {}
            c => out.push(c),
        }
    }
    let one: String = out.split_whitespace().collect::<Vec<_>>().join(" ");
    match one.char_indices().nth(cap) {
        Some((at, _)) => format!("{}…", &one[..at]),
        None => one,
    }
}

/// Skips what follows an ESC: a CSI (`ESC [ ... final`), a string (`ESC ]`, `ESC P`, `ESC _`,
/// `ESC ^`, `ESC X`: up to BEL or `ESC \`), or one character.
fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.next() {
        Some('[') => skip_until_final(chars),
        Some(']' | 'P' | '_' | '^' | 'X') => skip_string(chars),
        _ => {}
    }
}

/// Skips a CSI's parameters and its final byte (`@` to `~`).
fn skip_until_final(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    for c in chars.by_ref() {
        if ('@'..='~').contains(&c) {
            break;
        }
    }
}

/// Skips an escape string up to its end: BEL, `ESC \` or ST (U+009C).
fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = chars.next() {
        match c {
            '\u{7}' | '\u{9c}' => break,
            '\u{1b}' => {
                if chars.peek() == Some(&'\\') {
                    chars.next();
                }
                break;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(calls: &[LiveCall]) -> Vec<String> {
        calls
            .iter()
            .map(|c| {
                let mut s = format!("{} {}", c.verb, c.target);
                if !c.ok {
                    s.push_str(" (failed)");
                }
                s
            })
            .collect()
    }

    fn all(w: &mut Watch, lines: &[&str]) -> Vec<String> {
        lines.iter().flat_map(|l| shown(&w.line(l))).collect()
    }

    #[test]
    fn claude_code_tool_uses_and_failed_results() {
        let mut w = Watch::new(Preset::Claude, Some(PathBuf::from("/w/t1")));
        // Lines as Claude Code 2.1 prints them (cut to the fields read).
        let lines = [
            r#"{"type":"system","subtype":"init","cwd":"/w/t1","model":"loopback-model","tools":["Read","Edit"]}"#,
            r#"{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"loopback-model","content":[{"type":"text","text":"Reading it."},{"type":"tool_use","id":"toolu_01","name":"Read","input":{"file_path":"/w/t1/calc.py"}}],"usage":{"input_tokens":10,"output_tokens":5}},"session_id":"s"}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_01","type":"tool_result","content":"     1\tdef add(a, b):"}]},"session_id":"s"}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"toolu_02","name":"Edit","input":{"file_path":"/w/t1/calc.py","old_string":"a - b","new_string":"a + b"}}]}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"<tool_use_error>String to replace not found in file.</tool_use_error>","is_error":true,"tool_use_id":"toolu_02"}]}}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"toolu_03","name":"Bash","input":{"command":"python3 -m unittest -q\necho done","description":"Run tests"}},{"type":"tool_use","id":"toolu_04","name":"Grep","input":{"pattern":"def add","path":"/w/t1"}},{"type":"tool_use","id":"toolu_05","name":"TodoWrite","input":{"todos":[]}},{"type":"tool_use","id":"toolu_06","name":"Write","input":{"file_path":"/elsewhere/x.py","content":"x"}}]}}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"result":"done"}"#,
            "not json at all",
        ];
        assert_eq!(
            all(&mut w, &lines),
            [
                "read calc.py",
                "edit calc.py",
                "edit calc.py (failed)",
                "run python3 -m unittest -q …",
                "search def add",
                "TodoWrite ",
                "edit /elsewhere/x.py",
            ]
        );
    }

    #[test]
    fn codex_commands_and_file_changes() {
        let mut w = Watch::new(Preset::Codex, Some(PathBuf::from("/w/t1/")));
        // Lines as Codex 0.171 prints them with `exec --json`.
        let lines = [
            r#"{"type":"thread.started","thread_id":"0199"}"#,
            r#"{"type":"turn.started"}"#,
            r#"{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"/bin/bash -lc 'cat calc.py'","aggregated_output":"","exit_code":null,"status":"in_progress"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"/bin/bash -lc 'cat calc.py'","aggregated_output":"def add(a, b):\n","exit_code":0,"status":"completed"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_1","type":"file_change","changes":[{"path":"/w/t1/calc.py","kind":"update"},{"path":"/w/t1/new.py","kind":"add"}],"status":"completed"}}"#,
            r#"{"type":"item.started","item":{"id":"item_2","type":"command_execution","command":"bash -lc 'python3 -m unittest -q'","aggregated_output":"","exit_code":null,"status":"in_progress"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"bash -lc 'python3 -m unittest -q'","aggregated_output":"FAILED","exit_code":1,"status":"failed"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_3","type":"command_execution","command":"false","aggregated_output":"","exit_code":1,"status":"failed"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_4","type":"file_change","changes":[{"path":"/w/t1/calc.py","kind":"update"}],"status":"failed"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_5","type":"agent_message","text":"done"}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":3}}"#,
        ];
        assert_eq!(
            all(&mut w, &lines),
            [
                "run cat calc.py",
                "edit calc.py",
                "edit new.py",
                "run python3 -m unittest -q",
                "run python3 -m unittest -q (failed)",
                "run false (failed)",
                "edit calc.py (failed)",
            ]
        );
    }

    #[test]
    fn aider_edits_commands_and_lint_complaints() {
        let mut w = Watch::new(Preset::Aider, Some(PathBuf::from("/w/t1")));
        let out = "Aider v0.86.2\nMain model: openai/m with whole edit format\n\ncalc.py\n```\ndef add(a, b):\n    return a + b\n```\n\nApplied edit to calc.py\nFailed to apply edit to other.py\n\nRunning python3 -m unittest -q\n## Running: flake8 --select=E9 calc.py\n\nTokens: 2.1k sent, 36 received.\n";
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            all(&mut w, &lines),
            [
                "edit calc.py",
                "edit other.py (failed)",
                "run python3 -m unittest -q",
                "run flake8 --select=E9 calc.py (failed)",
            ]
        );
    }

    #[test]
    fn hostile_names_cannot_write_to_the_terminal() {
        let mut w = Watch::new(Preset::Claude, Some(PathBuf::from("/w/t1")));
        // A file name with a colour, a title change, a carriage return (which would hide what
        // came before it), a newline and a right-to-left override.
        let name = "/w/t1/a\u{1b}[31mred\u{1b}]0;pwned\u{7}\rb\nc\u{202e}d\u{9b}2Je.py";
        let line = serde_json::json!({"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": "t", "name": "Edit", "input": {"file_path": name}},
            {"type": "tool_use", "id": "u", "name": "Bash\u{1b}[2J", "input": {}},
            {"type": "tool_use", "id": "v", "name": "Bash", "input": {"command": format!("\u{1b}[1A{}", "x".repeat(200))}}]}})
        .to_string();
        let got = w.line(&line);
        assert_eq!(got[0].target, "ared b cde.py");
        assert_eq!(got[1].verb, "Bash");
        assert_eq!(got[2].target, format!("{}…", "x".repeat(TARGET_CAP)));
        for c in &got {
            for s in [&c.verb, &c.target] {
                assert!(!s.chars().any(|ch| ch.is_control()), "{s:?}");
            }
        }
        // The same through Codex's and aider's lines.
        let mut x = Watch::new(Preset::Codex, None);
        let line =
            serde_json::json!({"type": "item.completed", "item": {"id": "i", "type": "file_change",
            "status": "completed", "changes": [{"path": "x\u{1b}[8m\r\n.py", "kind": "add"}]}})
            .to_string();
        assert_eq!(x.line(&line)[0].target, "x .py");
        let mut a = Watch::new(Preset::Aider, None);
        assert_eq!(
            a.line("Applied edit to \u{1b}]52;c;Zm9v\u{1b}\\calc\u{7}.py\r")[0].target,
            "calc .py"
        );
    }
}
