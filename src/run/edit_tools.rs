//! The editing worker's tools, the pure part: the fixed tool set a chat
//! worker of a `--work` run is offered ([`specs`]), its arguments parsed into an [`Op`], the
//! path rules applied to a path string ([`confine`]), the paths a unified diff touches
//! ([`diff_paths`]), the loop's bookkeeping ([`Loop`]) and the structured reply a model
//! without tool support answers instead ([`fallback_schema`], [`parse_fallback`]).
//!
//! No I/O here. The [`Hands`] trait is what carries an [`Op`] out in a worktree; `crate::work`
//! implements it over the file system (where symlinks are resolved), and the engine drives
//! the loop in `edit.rs`.

use serde_json::{Map, Value, json};

use crate::exec::tool_chat::{ArgumentsError, ToolSpec};

/// Tool calls a task may make unless `--max-tool-calls` says otherwise.
pub(crate) const DEFAULT_MAX_TOOL_CALLS: u32 = 24;
/// The most `--max-tool-calls` accepts.
pub(crate) const MAX_TOOL_CALLS_LIMIT: u32 = 500;
/// The bytes of a tool call's arguments or result a `tool_call` / `tool_result` entry holds.
pub(crate) const ENTRY_BODY_CAP: usize = 4096;
/// The bytes of a tool's result the model sees.
pub(crate) const MODEL_OUTPUT_CAP: usize = 16 * 1024;
/// The bytes `write_file` accepts.
pub(crate) const MAX_WRITE_BYTES: usize = 1024 * 1024;
/// The lines `read_file` returns at most.
pub(crate) const MAX_READ_LINES: usize = 400;

/// One operation a tool call asks for, its arguments checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Files under a directory (relative, confined).
    List { path: String },
    /// Lines `start..=end` (1-based) of a file.
    Read {
        path: String,
        start: usize,
        end: usize,
    },
    /// Lines holding `pattern` (plain text), under `path`.
    Search { pattern: String, path: String },
    /// Replace a file's whole content (creating it and its directories).
    Write { path: String, content: String },
    /// Apply a unified diff whose paths are `paths`.
    Diff { diff: String, paths: Vec<String> },
    /// Run one of the run's allowed commands.
    Run { command: String },
}

/// What carrying out an [`Op`] gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Whether it did what was asked.
    pub(crate) ok: bool,
    /// Whether it was refused (a path leaving the worktree, a command not allowed).
    pub(crate) refused: bool,
    /// What the model is told.
    pub(crate) text: String,
}

impl Outcome {
    pub(crate) fn ok(text: impl Into<String>) -> Outcome {
        Outcome {
            ok: true,
            refused: false,
            text: text.into(),
        }
    }

    pub(crate) fn failed(text: impl Into<String>) -> Outcome {
        Outcome {
            ok: false,
            refused: false,
            text: text.into(),
        }
    }

    pub(crate) fn refused(text: impl Into<String>) -> Outcome {
        Outcome {
            ok: false,
            refused: true,
            text: text.into(),
        }
    }
}

/// What carries out an [`Op`] in one task's worktree.
pub trait Hands: Send + Sync {
    fn carry(&self, op: &Op) -> Outcome;
}

/// The tools offered. `commands` are the allowed commands (named in `run_command`'s
/// description and its `enum`).
pub fn specs(commands: &[String]) -> Vec<ToolSpec> {
    let path = |what: &str| json!({"type": "string", "description": what});
    let mut out = vec![
        spec(
            "list_files",
            "List the files under a directory of the worktree (relative path, default \".\").",
            json!({"type": "object", "properties": {"path": path("a directory, relative to the worktree")}}),
            &[],
        ),
        spec(
            "read_file",
            "Read a text file of the worktree, optionally only lines start_line..end_line (1-based).",
            json!({"type": "object", "properties": {
                "path": path("a file, relative to the worktree"),
                "start_line": {"type": "integer", "minimum": 1},
                "end_line": {"type": "integer", "minimum": 1}}}),
            &["path"],
        ),
        spec(
            "search",
            "Find the lines that contain a plain text (not a regex) in the files under a directory.",
            json!({"type": "object", "properties": {
                "pattern": {"type": "string"},
                "path": path("a directory or file, relative to the worktree (default \".\")")}}),
            &["pattern"],
        ),
        spec(
            "write_file",
            "Write a whole file of the worktree (created with its directories if missing).",
            json!({"type": "object", "properties": {
                "path": path("a file, relative to the worktree"),
                "content": {"type": "string"}}}),
            &["path", "content"],
        ),
        spec(
            "apply_diff",
            "Apply a unified diff (paths a/... and b/..., relative to the worktree).",
            json!({"type": "object", "properties": {"diff": {"type": "string"}}}),
            &["diff"],
        ),
    ];
    if !commands.is_empty() {
        out.push(spec(
            "run_command",
            &format!(
                "Run one of the allowed commands in the worktree and see its exit code and output: {}",
                commands.join(" | ")
            ),
            json!({"type": "object", "properties": {"command": {"type": "string", "enum": commands}}}),
            &["command"],
        ));
    }
    out
}

fn spec(name: &str, description: &str, mut parameters: Value, required: &[&str]) -> ToolSpec {
    parameters["required"] = json!(required);
    ToolSpec {
        name: name.into(),
        description: description.into(),
        parameters,
    }
}

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolRefusal(pub(crate) String);

/// A path string made relative to the worktree: `.` parts dropped, separators unified.
/// Refused: an empty path (unless `allow_root`), NUL, an absolute path (`/x`, `\x`, `C:`),
/// any `..` part, and `.git` as any part (the repository is not the worker's).
pub(crate) fn confine(path: &str, allow_root: bool) -> Result<String, ToolRefusal> {
    let refuse = |why: &str| {
        Err(ToolRefusal(format!(
            "refused: the path {path:?} {why}; give a path relative to the worktree, inside it"
        )))
    };
    if path.contains('\0') {
        return refuse("holds a NUL byte");
    }
    let p = path.trim();
    if p.starts_with('/') || p.starts_with('\\') || p.starts_with('~') {
        return refuse("is absolute");
    }
    let b = p.as_bytes();
    if b.len() >= 2 && b[1] == b':' && b[0].is_ascii_alphabetic() {
        return refuse("is absolute");
    }
    let mut parts = Vec::new();
    for part in p.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." => return refuse("climbs out with '..'"),
            _ if part.eq_ignore_ascii_case(".git") => return refuse("reaches into .git"),
            _ => parts.push(part),
        }
    }
    if parts.is_empty() && !allow_root {
        return refuse("names no file");
    }
    Ok(if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    })
}

/// The longest main argument progress shows of a tool call.
const SHOWN_CAP: usize = 120;

/// How progress shows a tool call: a verb and its main argument (`edit`, `src/add.py`; `run`,
/// `python -m pytest -q`), from the tool's name and its raw JSON arguments. The argument is
/// the model's text on a person's terminal: every control character (an escape sequence, a
/// line break) becomes a space, and it is cut to 120 characters.
pub(crate) fn shown_call(tool: &str, raw: &str) -> (String, String) {
    let args: Map<String, Value> = serde_json::from_str(raw).unwrap_or_default();
    let text = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (verb, target) = match tool {
        "list_files" => (
            "list",
            args.get("path")
                .and_then(Value::as_str)
                .unwrap_or(".")
                .to_string(),
        ),
        "read_file" => ("read", text("path")),
        "search" => ("search", text("pattern")),
        "write_file" => ("write", text("path")),
        "apply_diff" => ("edit", diff_paths(&text("diff")).join(", ")),
        "run_command" => ("run", text("command")),
        other => (other, String::new()),
    };
    let clean: String = target
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let clean = clean.trim();
    let shown = match clean.char_indices().nth(SHOWN_CAP) {
        Some((at, _)) => format!("{}…", &clean[..at]),
        None => clean.to_string(),
    };
    (verb.to_string(), shown)
}

/// The paths a unified diff names (`--- a/X`, `+++ b/X`, `diff --git a/X b/Y`), each once,
/// `/dev/null` left out, the `a/`/`b/` prefix removed.
pub(crate) fn diff_paths(diff: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |p: &str| {
        let p = p.split('\t').next().unwrap_or("").trim();
        if p.is_empty() || p == "/dev/null" {
            return;
        }
        let p = p
            .strip_prefix("a/")
            .or_else(|| p.strip_prefix("b/"))
            .unwrap_or(p);
        if !out.iter().any(|q| q == p) {
            out.push(p.to_string());
        }
    };
    for line in diff.lines() {
        if let Some(rest) = line
            .strip_prefix("--- ")
            .or_else(|| line.strip_prefix("+++ "))
        {
            add(rest);
        } else if let Some(rest) = line.strip_prefix("diff --git ") {
            for p in rest.split(' ') {
                add(p);
            }
        } else if let Some(rest) = line
            .strip_prefix("rename from ")
            .or_else(|| line.strip_prefix("rename to "))
            .or_else(|| line.strip_prefix("copy from "))
            .or_else(|| line.strip_prefix("copy to "))
        {
            add(rest);
        }
    }
    out
}

/// A tool call's arguments, read with errors that name the tool.
/// Why a tool call (or a structured reply) cannot be read as operations: told to the model,
/// which may try again. A path outside the worktree is a [`ToolRefusal`] instead.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Malformed {
    /// The call's arguments are not a JSON object.
    #[error(transparent)]
    Arguments(#[from] ArgumentsError),
    /// A string argument of another type.
    #[error("{tool}: the argument {arg:?} must be a string")]
    NotAString { tool: String, arg: String },
    /// A needed argument is absent.
    #[error("{tool}: the argument {arg:?} is missing")]
    Missing { tool: String, arg: String },
    /// A line number that is not a whole number from 1.
    #[error("{tool}: {arg:?} must be a whole number from 1")]
    NotALine { tool: String, arg: String },
    /// `end_line` before `start_line`.
    #[error("{tool}: end_line is before start_line")]
    EndBeforeStart { tool: String },
    /// An empty search pattern.
    #[error("{tool}: the pattern is empty")]
    EmptyPattern { tool: String },
    /// A write over [`MAX_WRITE_BYTES`].
    #[error("{tool}: the content is larger than {MAX_WRITE_BYTES} bytes")]
    TooLarge { tool: String },
    /// A diff without `---`/`+++` lines.
    #[error("{tool}: the diff names no file (---/+++ lines)")]
    DiffNamesNoFile { tool: String },
    /// A tool that is not offered (`commands`: whether `run_command` is).
    #[error(
        "there is no tool {name:?}; the tools are list_files, read_file, search, write_file, apply_diff{}",
        if *commands { ", run_command" } else { "" }
    )]
    NoSuchTool { name: String, commands: bool },
    /// A structured reply that is not JSON.
    #[error("the structured reply is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// A structured reply with nothing to do.
    #[error("the structured reply holds no write and no diff")]
    NoEdits,
}

struct ToolArgs<'a> {
    name: &'a str,
    args: &'a Map<String, Value>,
}

impl<'a> ToolArgs<'a> {
    /// An optional string argument.
    fn text(&self, k: &str) -> Result<Option<&'a str>, Malformed> {
        match self.args.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(Malformed::NotAString {
                tool: self.name.to_string(),
                arg: k.to_string(),
            }),
        }
    }

    /// A string argument that must be there.
    fn need(&self, k: &str) -> Result<&'a str, Malformed> {
        self.text(k)?.ok_or_else(|| Malformed::Missing {
            tool: self.name.to_string(),
            arg: k.to_string(),
        })
    }

    /// An optional line number (from 1).
    fn line(&self, k: &str) -> Result<Option<usize>, Malformed> {
        match self.args.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .filter(|n| *n >= 1)
                .map(|n| Some(n as usize))
                .ok_or_else(|| Malformed::NotALine {
                    tool: self.name.to_string(),
                    arg: k.to_string(),
                }),
        }
    }
}

/// `apply_diff`: the diff and the files it names, each confined to the worktree.
fn diff_op(name: &str, diff: &str) -> Result<Result<Op, ToolRefusal>, Malformed> {
    let paths = diff_paths(diff);
    if paths.is_empty() {
        return Err(Malformed::DiffNamesNoFile {
            tool: name.to_string(),
        });
    }
    let mut kept = Vec::new();
    for p in &paths {
        match confine(p, false) {
            Ok(p) => kept.push(p),
            Err(r) => return Ok(Err(r)),
        }
    }
    Ok(Ok(Op::Diff {
        diff: diff.to_string(),
        paths: kept,
    }))
}

/// `run_command`: one of the allowed commands, else a refusal naming them.
fn run_op(c: &str, commands: &[String]) -> Result<Op, ToolRefusal> {
    if commands.iter().any(|a| a == c) {
        Ok(Op::Run {
            command: c.to_string(),
        })
    } else {
        Err(ToolRefusal(format!(
            "refused: {c:?} is not an allowed command; the allowed ones are: {}",
            if commands.is_empty() {
                "none (the run gave no --check or --allow-cmd)".to_string()
            } else {
                commands.join(" | ")
            }
        )))
    }
}

/// A tool call's arguments checked into an [`Op`]; `Err` is what the model is told (a
/// malformed call), `Ok(Err)` a refusal (a path leaving the worktree, a command not allowed).
pub(crate) fn parse_op(
    name: &str,
    args: &Map<String, Value>,
    commands: &[String],
) -> Result<Result<Op, ToolRefusal>, Malformed> {
    let call = ToolArgs { name, args };
    let text = |k: &str| call.text(k);
    let need = |k: &str| call.need(k);
    let line = |k: &str| call.line(k);
    Ok(match name {
        "list_files" => confine(text("path")?.unwrap_or("."), true).map(|path| Op::List { path }),
        "read_file" => {
            let start = line("start_line")?.unwrap_or(1);
            let end = line("end_line")?.unwrap_or(start + MAX_READ_LINES - 1);
            if end < start {
                return Err(Malformed::EndBeforeStart {
                    tool: name.to_string(),
                });
            }
            let end = end.min(start + MAX_READ_LINES - 1);
            confine(need("path")?, false).map(|path| Op::Read { path, start, end })
        }
        "search" => {
            let pattern = need("pattern")?;
            if pattern.is_empty() {
                return Err(Malformed::EmptyPattern {
                    tool: name.to_string(),
                });
            }
            let pattern = pattern.to_string();
            confine(text("path")?.unwrap_or("."), true).map(|path| Op::Search { pattern, path })
        }
        "write_file" => {
            let content = need("content")?;
            if content.len() > MAX_WRITE_BYTES {
                return Err(Malformed::TooLarge {
                    tool: name.to_string(),
                });
            }
            let content = content.to_string();
            confine(need("path")?, false).map(|path| Op::Write { path, content })
        }
        "apply_diff" => return diff_op(name, need("diff")?),
        "run_command" => run_op(need("command")?.trim(), commands),
        other => {
            return Err(Malformed::NoSuchTool {
                name: other.to_string(),
                commands: !commands.is_empty(),
            });
        }
    })
}

/// `s` cut to at most `cap` bytes on a character boundary, and whether it was cut.
pub(crate) fn cap_text(s: &str, cap: usize) -> (String, bool) {
    if s.len() <= cap {
        return (s.to_string(), false);
    }
    let mut end = cap;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    (s[..end].to_string(), true)
}

/// What the loop does after a turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Next {
    /// Carry out the turn's calls.
    Carry,
    /// Ask once more, with this note (the one corrective turn).
    Correct(String),
    /// The model is done: its text is the task's report.
    Finish,
    /// Stop; the task fails for this reason (a stable code and a sentence).
    Fail(&'static str, String),
}

/// The loop's bookkeeping for one task: tool calls made against the cap, and whether the one
/// corrective turn was spent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Loop {
    pub(crate) max_calls: u32,
    pub(crate) calls: u32,
    pub(crate) corrected: bool,
}

impl Loop {
    pub(crate) fn new(max_calls: u32) -> Loop {
        Loop {
            max_calls,
            calls: 0,
            corrected: false,
        }
    }

    /// Whether another call is allowed.
    pub(crate) fn room(&self) -> bool {
        self.calls < self.max_calls
    }

    /// Counts one call made.
    pub(crate) fn count(&mut self) {
        self.calls += 1;
    }

    /// What follows a turn with `calls` tool calls of which `malformed` were malformed.
    pub(crate) fn after_turn(&mut self, calls: usize, malformed: usize) -> Next {
        if calls == 0 {
            if self.calls > 0 {
                return Next::Finish;
            }
            return self.correct(
                "no_tool_call",
                "You answered without calling a tool. Make the change with the tools (read_file, write_file, apply_diff, ...), then answer with a short report.",
            );
        }
        if malformed == calls {
            return self.correct(
                "malformed_tool_call",
                "Your tool calls were malformed (see each tool result). Call the tools with valid JSON arguments as their schemas say.",
            );
        }
        Next::Carry
    }

    fn correct(&mut self, code: &'static str, note: &str) -> Next {
        if self.corrected {
            Next::Fail(
                code,
                format!(
                    "the model {} after its corrective turn",
                    if code == "no_tool_call" {
                        "again answered without calling a tool"
                    } else {
                        "again made only malformed tool calls"
                    }
                ),
            )
        } else {
            self.corrected = true;
            Next::Correct(note.to_string())
        }
    }
}

/// The schema of the structured reply a model without tools answers: file writes, or a
/// unified diff, and a short report.
pub(crate) fn fallback_schema() -> crate::exec::OutputSchema {
    crate::exec::OutputSchema {
        name: "edits".into(),
        schema: json!({
            "type": "object",
            "properties": {
                "writes": {"type": "array", "items": {"type": "object", "properties": {
                    "path": {"type": "string"}, "content": {"type": "string"}},
                    "required": ["path", "content"], "additionalProperties": false}},
                "diff": {"type": "string"},
                "report": {"type": "string"}
            },
            "required": ["writes", "diff", "report"],
            "additionalProperties": false
        }),
    }
}

/// The edits of a structured reply: each tool's name, its arguments as the reply gave them,
/// and its op (or refusal).
pub(crate) type Edits = Vec<(String, Value, Result<Op, ToolRefusal>)>;

/// The operations of a structured reply (writes first, then the diff when not empty) and its
/// report; `Err` names what is wrong with it. Each op is still a refusal when a path leaves
/// the worktree.
pub(crate) fn parse_fallback(text: &str) -> Result<(Edits, String), Malformed> {
    let v: Value = serde_json::from_str(text.trim()).map_err(Malformed::NotJson)?;
    let mut ops = Vec::new();
    for w in v["writes"].as_array().into_iter().flatten() {
        let mut args = Map::new();
        args.insert("path".into(), w["path"].clone());
        args.insert("content".into(), w["content"].clone());
        let op = parse_op("write_file", &args, &[])?;
        ops.push(("write_file".to_string(), Value::Object(args), op));
    }
    if let Some(d) = v["diff"].as_str().filter(|d| !d.trim().is_empty()) {
        let mut args = Map::new();
        args.insert("diff".into(), json!(d));
        let op = parse_op("apply_diff", &args, &[])?;
        ops.push(("apply_diff".to_string(), Value::Object(args), op));
    }
    if ops.is_empty() {
        return Err(Malformed::NoEdits);
    }
    Ok((ops, v["report"].as_str().unwrap_or("").to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_call_is_shown_as_a_verb_and_its_main_argument_with_no_control_characters() {
        let shown = |tool: &str, args: Value| shown_call(tool, &args.to_string());
        assert_eq!(
            shown("write_file", json!({"path": "src/add.py", "content": "x"})),
            ("write".into(), "src/add.py".into())
        );
        assert_eq!(
            shown("run_command", json!({"command": "python -m pytest -q"})),
            ("run".into(), "python -m pytest -q".into())
        );
        assert_eq!(
            shown(
                "apply_diff",
                json!({"diff": "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n"})
            ),
            ("edit".into(), "a.py".into())
        );
        assert_eq!(shown("list_files", json!({})), ("list".into(), ".".into()));
        assert_eq!(
            shown("read_file", json!({"path": "a\u{1b}[2Jb\nc"})),
            ("read".into(), "a [2Jb c".into())
        );
        let long = "x".repeat(200);
        let (_, cut) = shown("search", json!({ "pattern": long }));
        assert_eq!(cut.chars().count(), SHOWN_CAP + 1);
        assert_eq!(
            shown_call("nope", "not json"),
            ("nope".into(), String::new())
        );
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn paths_stay_inside() {
        assert_eq!(confine("./src//a.py", false).unwrap(), "src/a.py");
        assert_eq!(confine(".", true).unwrap(), ".");
        for bad in [
            "../../outside",
            "a/../../b",
            "/etc/passwd",
            "\\x",
            "C:\\x",
            "~/x",
            ".git/config",
            "a/.GIT/x",
            "a\0b",
            "",
        ] {
            let e = confine(bad, false).unwrap_err();
            assert!(e.0.starts_with("refused: the path"), "{bad}: {e:?}");
        }
        assert!(confine("..", true).is_err());
    }

    #[test]
    fn diffs_name_their_paths() {
        let d = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n--- /dev/null\n+++ b/new.txt\n";
        assert_eq!(diff_paths(d), ["x.py", "new.txt"]);
        let bad = "--- a/../../etc/x\n+++ b/../../etc/x\n";
        assert!(matches!(
            parse_op("apply_diff", &args(json!({"diff": bad})), &[]),
            Ok(Err(_))
        ));
    }

    #[test]
    fn arguments_are_checked() {
        let cmds = vec!["make test".to_string()];
        assert_eq!(
            parse_op(
                "read_file",
                &args(json!({"path": "a", "start_line": 3})),
                &cmds
            )
            .unwrap(),
            Ok(Op::Read {
                path: "a".into(),
                start: 3,
                end: 3 + MAX_READ_LINES - 1
            })
        );
        assert!(parse_op("read_file", &args(json!({})), &cmds).is_err());
        assert!(parse_op("read_file", &args(json!({"path": 1})), &cmds).is_err());
        assert!(parse_op("nope", &args(json!({})), &cmds).is_err());
        assert_eq!(
            parse_op("run_command", &args(json!({"command": "make test"})), &cmds).unwrap(),
            Ok(Op::Run {
                command: "make test".into()
            })
        );
        assert!(matches!(
            parse_op("run_command", &args(json!({"command": "rm -rf /"})), &cmds),
            Ok(Err(_))
        ));
        assert!(matches!(
            parse_op(
                "write_file",
                &args(json!({"path": "/tmp/x", "content": ""})),
                &cmds
            ),
            Ok(Err(_))
        ));
        assert_eq!(specs(&cmds).len(), 6);
        assert_eq!(specs(&[]).len(), 5);
    }

    #[test]
    fn the_loop_corrects_once_then_fails() {
        let mut l = Loop::new(2);
        assert!(matches!(l.after_turn(0, 0), Next::Correct(_)));
        assert!(matches!(l.after_turn(0, 0), Next::Fail("no_tool_call", _)));
        let mut l = Loop::new(2);
        assert_eq!(l.after_turn(1, 0), Next::Carry);
        l.count();
        assert!(l.room());
        l.count();
        assert!(!l.room());
        assert_eq!(l.after_turn(0, 0), Next::Finish);
        let mut l = Loop::new(5);
        assert!(matches!(l.after_turn(2, 2), Next::Correct(_)));
        assert!(matches!(
            l.after_turn(1, 1),
            Next::Fail("malformed_tool_call", _)
        ));
    }

    #[test]
    fn the_fallback_reply_is_parsed() {
        let (ops, report) = parse_fallback(
            r#"{"writes":[{"path":"a.py","content":"x"}],"diff":"","report":"fixed"}"#,
        )
        .unwrap();
        assert_eq!(report, "fixed");
        assert_eq!(ops[0].1, json!({"path": "a.py", "content": "x"}));
        assert_eq!(
            ops[0].2,
            Ok(Op::Write {
                path: "a.py".into(),
                content: "x".into()
            })
        );
        assert!(parse_fallback(r#"{"writes":[],"diff":"","report":""}"#).is_err());
        assert!(parse_fallback("nope").is_err());
        let (ops, _) =
            parse_fallback(r#"{"writes":[{"path":"../x","content":""}],"diff":"","report":""}"#)
                .unwrap();
        // A refused edit keeps the arguments the reply gave.
        assert!(ops[0].2.is_err());
        assert_eq!(ops[0].1["path"], "../x");
        assert_eq!(cap_text("héllo", 2), ("h".to_string(), true));
    }
}
