//! What the record says about the task behind a line of code, for `git forum blame`: the
//! task's run, lane, model, tokens and cost, its change entries (with the commit and the blob
//! of each file they recorded), the checks that ran on its change, its pre-ship verdict, and
//! the tool call of the editing worker that wrote a given line. Pure: the entries are handed
//! in, the git side (which commit wrote which line, trailers, patch ids) is the caller's.
//!
//! A line is tied to a tool call by its text: the latest `write_file` of the same path whose
//! content holds the line, else the latest `apply_diff` whose diff adds it. A tool call's
//! recorded arguments are capped and redacted, so a line may match none; it is then the
//! task's (as every line of an agent CLI or a command worker is).

use std::collections::{BTreeMap, HashMap};

use super::{field, spend};
use crate::ledger::canonical::Value;
use crate::ledger::{Entry, kind};

/// A ledger read for blame: its entries with their bodies, the run of each entry, the tasks
/// by run and id, and each entry hash's seq; built once per call (one pass each).
pub(crate) struct Record<'a> {
    items: &'a [(Entry, Option<Value>)],
    roots: BTreeMap<u64, u64>,
    /// The entries of each run, by index into `items`.
    runs: HashMap<u64, Vec<usize>>,
    /// Each entry hash's seq.
    by_hash: HashMap<&'a str, u64>,
}

/// A change entry with a commit.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChangeFact {
    pub(crate) seq: u64,
    pub(crate) entry_hash: String,
    pub(crate) commit: String,
    /// The paths it touched.
    pub(crate) files: Vec<String>,
    /// The blob of each file after the change (`None`: deleted), when the entry recorded them
    /// (entries written before git forum recorded blobs did not).
    pub(crate) blobs: Option<Vec<(String, Option<String>)>>,
}

impl ChangeFact {
    /// The recorded blob of `path`: `None` when blobs were not recorded, `Some(None)` when
    /// recorded as deleted or not named.
    pub(crate) fn blob_of(&self, path: &str) -> Option<Option<&str>> {
        let blobs = self.blobs.as_ref()?;
        Some(
            blobs
                .iter()
                .find(|(p, _)| p == path)
                .and_then(|(_, b)| b.as_deref()),
        )
    }
}

/// A tool call of the editing worker that wrote to a file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CallFact {
    pub(crate) seq: u64,
    /// Its number in the task's loop.
    pub(crate) n: u64,
    pub(crate) tool: String,
    /// The path it wrote (a `write_file`), or `None` (an `apply_diff` names its files inside).
    pub(crate) path: Option<String>,
    /// The lines it wrote: a `write_file`'s content, an `apply_diff`'s added lines of `path`.
    lines: Vec<String>,
    /// An `apply_diff`'s added lines, by the file they were added to.
    diff_lines: Vec<(String, String)>,
}

/// A check that ran on a change.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CheckFact {
    pub(crate) seq: u64,
    pub(crate) command: String,
    pub(crate) ok: bool,
}

/// Everything the record says about one task of a run.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct TaskFacts {
    pub(crate) run: u64,
    pub(crate) seq: u64,
    pub(crate) entry_hash: String,
    pub(crate) id: String,
    /// The lane (the plan's agent) that did it.
    pub(crate) lane: String,
    /// The model its result names.
    pub(crate) model: Option<String>,
    /// Its change entries with a commit, oldest first.
    pub(crate) changes: Vec<ChangeFact>,
    /// Every check of the task, with the change it ran on (its causal parent).
    pub(crate) checks: Vec<(u64, CheckFact)>,
    /// The latest pre-ship decision and its reason.
    pub(crate) ship: Option<(String, String)>,
    pub(crate) prompt_tokens: u64,
    pub(crate) completion_tokens: u64,
    /// What its model calls cost, when they were priced.
    pub(crate) cost_usd: Option<f64>,
    /// Its tool calls that wrote files, oldest first.
    pub(crate) calls: Vec<CallFact>,
}

fn text<'a>(b: Option<&'a Value>, key: &str) -> &'a str {
    field(b, key).and_then(Value::as_str).unwrap_or("")
}

impl<'a> Record<'a> {
    /// The record of `items` (a whole ledger, oldest first).
    pub(crate) fn new(items: &'a [(Entry, Option<Value>)]) -> Record<'a> {
        let roots = super::run_roots(items.iter().map(|(e, _)| e));
        let mut runs: HashMap<u64, Vec<usize>> = HashMap::new();
        let mut by_hash = HashMap::with_capacity(items.len());
        for (i, (e, _)) in items.iter().enumerate() {
            by_hash.insert(e.entry_hash.as_str(), e.seq);
            if let Some(r) = roots.get(&e.seq) {
                runs.entry(*r).or_default().push(i);
            }
        }
        Record {
            items,
            roots,
            runs,
            by_hash,
        }
    }

    /// The seq of the entry whose hash is `hash`.
    pub(crate) fn seq_of(&self, hash: &str) -> Option<u64> {
        self.by_hash.get(hash).copied()
    }

    /// The entry at `seq` with its body.
    pub(crate) fn item(&self, seq: u64) -> Option<&'a (Entry, Option<Value>)> {
        self.items.get(usize::try_from(seq).ok()?)
    }

    /// The run an entry belongs to.
    pub(crate) fn run_of(&self, seq: u64) -> Option<u64> {
        self.roots.get(&seq).copied()
    }

    /// Every change entry with a commit that touched `path`, with the seq of its task entry
    /// (the latest task entry of its run with the change's task id), oldest first.
    pub(crate) fn changes_touching(&self, path: &str) -> Vec<(u64, ChangeFact)> {
        let mut out = Vec::new();
        let mut tasks: HashMap<(u64, &str), u64> = HashMap::new();
        for (e, b) in self.items {
            let b = b.as_ref();
            let Some(run) = self.roots.get(&e.seq) else {
                continue;
            };
            if e.kind == kind::TASK {
                tasks.insert((*run, text(b, "id")), e.seq);
                continue;
            }
            if e.kind != kind::CHANGE {
                continue;
            }
            let Some(c) = change_fact(e, b) else { continue };
            let task = tasks.get(&(*run, text(b, "task")));
            if let Some(task) = task
                && c.files.iter().any(|f| f == path)
            {
                out.push((*task, c));
            }
        }
        out
    }

    /// What the record says about the task entry at `seq`; `None` when it is not a task.
    pub(crate) fn task(&self, seq: u64) -> Option<TaskFacts> {
        let (e, b) = self.item(seq)?;
        if e.kind != kind::TASK || e.seq != seq {
            return None;
        }
        let run = self.run_of(seq)?;
        let b = b.as_ref();
        let mut f = TaskFacts {
            run,
            seq,
            entry_hash: e.entry_hash.clone(),
            id: text(b, "id").to_string(),
            lane: text(b, "agent").to_string(),
            ..TaskFacts::default()
        };
        let mut usage = Vec::new();
        for i in self.runs.get(&run).into_iter().flatten() {
            let (e, body) = &self.items[*i];
            let body = body.as_ref();
            let own = |k: &str| text(body, k) == f.id;
            match e.kind.as_str() {
                kind::RESULT if own("id") => {
                    if let Some(m) = field(body, "model").and_then(Value::as_str) {
                        f.model = Some(m.to_string());
                    }
                    spend::push_usage(&mut usage, body);
                }
                kind::CHANGE if own("task") => f.changes.extend(change_fact(e, body)),
                kind::CHECK if own("task") => f.checks.push((
                    u64::try_from(e.causal_parent.unwrap_or(-1)).unwrap_or(u64::MAX),
                    CheckFact {
                        seq: e.seq,
                        command: text(body, "command").to_string(),
                        ok: field(body, "ok") == Some(&Value::Bool(true)),
                    },
                )),
                kind::SHIP if own("task") => {
                    f.ship = Some((
                        text(body, "decision").to_string(),
                        text(body, "reason").to_string(),
                    ));
                }
                kind::TOOL_CALL if own("task") => f.calls.extend(call_fact(e, body)),
                _ => {}
            }
        }
        for m in &usage {
            f.prompt_tokens += m.prompt_tokens;
            f.completion_tokens += m.completion_tokens;
            if let Some(c) = m.cost_usd {
                f.cost_usd = Some(f.cost_usd.unwrap_or(0.0) + c);
            }
        }
        Some(f)
    }
}

/// A `change` entry's commit, files and blobs; `None` without a commit.
fn change_fact(e: &Entry, b: Option<&Value>) -> Option<ChangeFact> {
    let commit = field(b, "commit").and_then(Value::as_str)?.to_string();
    let files = match field(b, "files") {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|f| f.get("path").and_then(Value::as_str))
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    };
    let blobs = match field(b, "blobs") {
        Some(Value::Object(m)) => Some(
            m.iter()
                .map(|(p, v)| (p.clone(), v.as_str().map(str::to_string)))
                .collect(),
        ),
        _ => None,
    };
    Some(ChangeFact {
        seq: e.seq,
        entry_hash: e.entry_hash.clone(),
        commit,
        files,
        blobs,
    })
}

/// A path as a worker names it, as git does: no `./`.
fn plain_path(p: &str) -> String {
    p.trim_start_matches("./").to_string()
}

/// A `tool_call` entry of a tool that writes files (`write_file`, `apply_diff`) with what it
/// wrote; `None` for any other tool, or arguments that do not read as JSON (cut at the cap).
fn call_fact(e: &Entry, b: Option<&Value>) -> Option<CallFact> {
    let tool = text(b, "tool");
    if !matches!(tool, "write_file" | "apply_diff") {
        return None;
    }
    let args: serde_json::Value = serde_json::from_str(text(b, "arguments")).ok()?;
    let n = match field(b, "n") {
        Some(Value::Int(i)) => i.as_u64().unwrap_or(0),
        _ => 0,
    };
    let mut call = CallFact {
        seq: e.seq,
        n,
        tool: tool.to_string(),
        path: args["path"].as_str().map(plain_path),
        lines: Vec::new(),
        diff_lines: Vec::new(),
    };
    if tool == "write_file" {
        let content = args["content"].as_str().unwrap_or("");
        call.lines = content.lines().map(str::to_string).collect();
    } else {
        let mut file = call.path.clone().unwrap_or_default();
        for l in args["diff"].as_str().unwrap_or("").lines() {
            if let Some(p) = l.strip_prefix("+++ ") {
                file = plain_path(p.strip_prefix("b/").unwrap_or(p).trim());
            } else if let Some(added) = l.strip_prefix('+') {
                call.diff_lines.push((file.clone(), added.to_string()));
            }
        }
    }
    Some(call)
}

impl TaskFacts {
    /// The change entry for `commit`: the one that recorded it, else the latest.
    pub(crate) fn change_for(&self, commit: &str) -> Option<&ChangeFact> {
        self.changes
            .iter()
            .find(|c| c.commit == commit)
            .or(self.changes.last())
    }

    /// The checks that ran on the change entry `change`.
    pub(crate) fn checks_of(&self, change: u64) -> Vec<&CheckFact> {
        self.checks
            .iter()
            .filter(|(on, _)| *on == change)
            .map(|(_, c)| c)
            .collect()
    }

    /// The tool call that wrote `line` into `path`: the latest `write_file` of `path` whose
    /// content holds it, else the latest `apply_diff` that adds it to `path`.
    pub(crate) fn call_for(&self, path: &str, line: &str) -> Option<&CallFact> {
        let wrote = |c: &&CallFact| {
            c.tool == "write_file"
                && c.path.as_deref() == Some(path)
                && c.lines.iter().any(|l| l == line)
        };
        let diffed = |c: &&CallFact| {
            c.diff_lines
                .iter()
                .any(|(p, l)| (p == path || p.is_empty()) && l == line)
        };
        self.calls
            .iter()
            .rev()
            .find(wrote)
            .or_else(|| self.calls.iter().rev().find(diffed))
    }
}

/// Of the changes `candidates` (oldest first; each with the lines its commit's diff added),
/// the latest whose diff added `line`: how a line of a squash merge of several changes is
/// given to the change that wrote it.
pub(crate) fn adder<'c, K>(
    candidates: &'c [(u64, K, Vec<String>)],
    line: &str,
) -> Option<&'c (u64, K, Vec<String>)> {
    candidates
        .iter()
        .rev()
        .find(|(_, _, added)| added.iter().any(|l| l == line))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::canonical;

    fn entry(seq: u64, kind: &str, parent: Option<u64>) -> Entry {
        Entry {
            seq,
            ts: 0.0,
            actor: "a".into(),
            kind: kind.into(),
            causal_parent: parent.map(|p| p as i64),
            payload_hash: "0".repeat(64),
            prev_hash: "0".repeat(64),
            entry_hash: format!("{seq:064x}"),
        }
    }

    fn body(s: &str) -> Option<Value> {
        Some(canonical::parse(s).unwrap())
    }

    #[test]
    fn a_task_gathers_its_model_cost_change_checks_verdict_and_tool_calls() {
        let write = serde_json::json!({"path": "./a.py", "content": "x = 1\ny = 2\n"}).to_string();
        let items = vec![
            (entry(0, kind::REQUEST, None), body(r#"{"request":"r"}"#)),
            (
                entry(1, kind::TASK, Some(0)),
                body(r#"{"id":"T1","agent":"backend"}"#),
            ),
            (
                entry(2, kind::TOOL_CALL, Some(1)),
                body(&format!(
                    r#"{{"task":"T1","n":1,"tool":"write_file","arguments":{}}}"#,
                    serde_json::Value::from(write)
                )),
            ),
            (
                entry(3, kind::RESULT, Some(1)),
                body(
                    r#"{"id":"T1","model":"m","usage":{"model":"m","prompt_tokens":10,"completion_tokens":5,"cost_usd":0.5}}"#,
                ),
            ),
            (
                entry(4, kind::CHANGE, Some(3)),
                body(
                    r#"{"task":"T1","commit":"c1","files":[{"path":"a.py"}],"blobs":{"a.py":"b1"}}"#,
                ),
            ),
            (
                entry(5, kind::CHECK, Some(4)),
                body(r#"{"task":"T1","command":"t","ok":true}"#),
            ),
            (
                entry(6, kind::SHIP, Some(5)),
                body(r#"{"task":"T1","decision":"merge","reason":"ok"}"#),
            ),
        ];
        let r = Record::new(&items);
        assert_eq!(r.seq_of(&format!("{:064x}", 4)), Some(4));
        let f = r.task(1).unwrap();
        assert_eq!(
            (f.run, f.id.as_str(), f.lane.as_str()),
            (0, "T1", "backend")
        );
        assert_eq!(f.model.as_deref(), Some("m"));
        assert_eq!(
            (f.prompt_tokens, f.completion_tokens, f.cost_usd),
            (10, 5, Some(0.5))
        );
        let c = f.change_for("c1").unwrap();
        assert_eq!(c.blob_of("a.py"), Some(Some("b1")));
        assert_eq!(f.checks_of(4).len(), 1);
        assert_eq!(f.ship.as_ref().unwrap().0, "merge");
        assert_eq!(f.call_for("a.py", "y = 2").map(|c| c.seq), Some(2));
        assert_eq!(f.call_for("a.py", "z = 3"), None);
        assert_eq!(r.changes_touching("a.py").len(), 1);
        assert!(r.task(4).is_none());
        let cands = vec![(4, "c1".to_string(), vec!["y = 2".to_string()])];
        assert_eq!(adder(&cands, "y = 2").map(|c| c.0), Some(4));
    }
}
