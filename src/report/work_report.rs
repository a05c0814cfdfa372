//! What a `--work` run did in the repository, read from its `change`, `check`, `ship` and
//! `conflict` entries: the changes (files, lines added and removed), the checks that passed
//! and failed, and where each task's change stands at the pre-ship gate (merged, blocked, or
//! waiting for a person). The room, the summary, the receipt and `bench` show it. A task run
//! several times (`--attempts`) has its `attempt_choice`: its change is the chosen attempt's,
//! and its attempts are shown side by side ([`TaskWork::attempt_lines`]).
//!
//! Forum has no such entries, so a slice without a `change` entry has no work ([`work`]
//! returns `None`) and every projection of a Forum run stays exactly Forum's. The counting
//! rules are those of `git forum runs`: every `change` with a commit counts its files and
//! lines (a retried task's earlier attempt included: the record holds both), every `check`
//! counts once (the run branch's included), and a task's latest `ship` or `conflict` decides
//! where it stands (a conflict after a merge means not integrated, until a later merge).

use super::{field, obj, py_int, truthy, uint};
use crate::ledger::canonical::Value;
use crate::ledger::{Entry, kind};

/// One task's part of a run's work.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TaskWork {
    /// The task id (`run` for the checks on the run branch).
    pub(crate) id: String,
    /// The latest `change` entry's seq, commit (`None`: the worker changed nothing), files
    /// (`{path, status, added, removed}` as witnessed) and whether its diff was cut.
    pub(crate) change: Option<ChangeSeen>,
    /// Checks of this task that passed and failed.
    pub(crate) checks_passed: u64,
    pub(crate) checks_failed: u64,
    /// The latest gate decision (`merge`, `block`, `escalate`, `undetermined`) and its reason,
    /// or `conflict` when integration conflicted after it.
    pub(crate) decision: Option<(String, String)>,
    /// Its attempts, when it ran several: the `attempt_choice` entry's `{attempts, chosen,
    /// rule}`.
    pub(crate) attempts: Option<Value>,
}

/// A change as a task keeps it: its entry's seq, commit, files and whether its diff was cut.
type ChangeSeen = (u64, Option<String>, Vec<Value>, bool);

/// A run's work in the repository.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Work {
    /// `change` entries with a commit.
    pub(crate) changes: u64,
    /// Files those changes touched, and lines added and removed.
    pub(crate) files: u64,
    pub(crate) added: u64,
    pub(crate) removed: u64,
    /// Checks that passed and failed.
    pub(crate) checks_passed: u64,
    pub(crate) checks_failed: u64,
    /// Tasks whose latest decision is merge (of a change with a commit), block, or neither
    /// (escalate, undetermined).
    pub(crate) merged: u64,
    pub(crate) blocked: u64,
    pub(crate) waiting: u64,
    /// Conflicts witnessed.
    pub(crate) conflicts: u64,
    /// Files the merged changes touched (each merged task's kept change), and their lines
    /// added and removed: what the run branch holds, unlike `files`, which counts every change.
    pub(crate) merged_files: u64,
    pub(crate) merged_added: u64,
    pub(crate) merged_removed: u64,
    /// Per task, in the order each first appears.
    pub(crate) tasks: Vec<TaskWork>,
}

fn text(b: Option<&Value>, key: &str) -> String {
    match field(b, key) {
        Some(Value::Str(s)) => s.clone(),
        _ => String::new(),
    }
}

fn count(v: Option<&Value>) -> u64 {
    u64::try_from(py_int(v)).unwrap_or(0)
}

/// The work of the entries `items` (one run, or a whole ledger), or `None` when none of them
/// is a `change` entry: the [`WorkFold`] of each, in order.
pub(crate) fn work<'a>(
    items: impl IntoIterator<Item = &'a (Entry, Option<Value>)>,
) -> Option<Work> {
    let mut fold = WorkFold::default();
    for (e, body) in items {
        fold.push(e, body.as_ref());
    }
    fold.finish()
}

/// [`work`] one entry at a time, for a reader that keeps it as the ledger grows.
#[derive(Debug, Clone, Default)]
pub(crate) struct WorkFold {
    w: Work,
    /// Whether a `change` entry was seen.
    any: bool,
    /// Each attempt's change, by task and attempt (`--attempts`).
    attempts: Vec<((String, u64), ChangeSeen)>,
}

impl WorkFold {
    /// Counts the next entry `e` with its body (`None`: absent).
    pub(crate) fn push(&mut self, e: &Entry, b: Option<&Value>) {
        if !matches!(
            e.kind.as_str(),
            kind::CHANGE | kind::CHECK | kind::SHIP | kind::CONFLICT | kind::ATTEMPT_CHOICE
        ) {
            return;
        }
        self.any |= e.kind == kind::CHANGE;
        if b.is_none() {
            return;
        }
        let id = text(b, "task");
        let at = match self.w.tasks.iter().position(|t| t.id == id) {
            Some(i) => i,
            None => {
                self.w.tasks.push(TaskWork {
                    id: id.clone(),
                    ..TaskWork::default()
                });
                self.w.tasks.len() - 1
            }
        };
        let t = &mut self.w.tasks[at];
        match e.kind.as_str() {
            kind::CHANGE => {
                let commit = match field(b, "commit") {
                    Some(Value::Str(c)) => Some(c.clone()),
                    _ => None,
                };
                let files = match field(b, "files") {
                    Some(Value::Array(f)) => f.clone(),
                    _ => Vec::new(),
                };
                if commit.is_some() {
                    self.w.changes += 1;
                    for f in &files {
                        self.w.files += 1;
                        self.w.added += count(f.get("added"));
                        self.w.removed += count(f.get("removed"));
                    }
                }
                let seen = (e.seq, commit, files, truthy(field(b, "truncated")));
                keep_attempt(&mut self.attempts, &id, b, &seen);
                t.change = Some(seen);
            }
            kind::ATTEMPT_CHOICE => take_choice(&self.attempts, t, b),
            kind::CHECK if field(b, "ok") == Some(&Value::Bool(true)) => {
                self.w.checks_passed += 1;
                t.checks_passed += 1;
            }
            kind::CHECK => {
                self.w.checks_failed += 1;
                t.checks_failed += 1;
            }
            kind::SHIP => t.decision = Some((text(b, "decision"), text(b, "reason"))),
            _ => {
                self.w.conflicts += 1;
                t.decision = Some((
                    "conflict".into(),
                    "the change conflicted on integration".into(),
                ));
            }
        }
    }

    /// The work so far, `None` without a `change` entry.
    pub(crate) fn finish(&self) -> Option<Work> {
        if !self.any {
            return None;
        }
        let mut w = self.w.clone();
        for t in &w.tasks {
            match t.decision.as_ref().map(|d| d.0.as_str()) {
                Some("merge") => {
                    // A merge of nothing (no commit) put nothing on the run branch.
                    let Some((_, Some(_), files, _)) = &t.change else {
                        continue;
                    };
                    let (added, removed) = t.lines();
                    w.merged += 1;
                    w.merged_files += files.len() as u64;
                    w.merged_added += added;
                    w.merged_removed += removed;
                }
                Some("block") => w.blocked += 1,
                Some("conflict") | None => {}
                Some(_) => w.waiting += 1,
            }
        }
        Some(w)
    }
}

/// Keeps the change `seen` of task `id` by its attempt, when its body `b` names one.
fn keep_attempt(
    attempts: &mut Vec<((String, u64), ChangeSeen)>,
    id: &str,
    b: Option<&Value>,
    seen: &ChangeSeen,
) {
    if field(b, "attempt").is_some() {
        let n = count(field(b, "attempt"));
        attempts.push(((id.to_string(), n), seen.clone()));
    }
}

/// Makes the chosen attempt's change (among `attempts`) task `t`'s, and keeps the
/// `attempt_choice` body `b`'s attempts, choice and rule.
fn take_choice(attempts: &[((String, u64), ChangeSeen)], t: &mut TaskWork, b: Option<&Value>) {
    let chosen = count(field(b, "chosen"));
    let kept = attempts.iter().find(|(k, _)| k.0 == t.id && k.1 == chosen);
    if let Some((_, seen)) = kept {
        t.change = Some(seen.clone());
    }
    let at = |k: &str| field(b, k).cloned().unwrap_or(Value::Null);
    t.attempts = Some(obj([
        ("attempts", at("attempts")),
        ("chosen", at("chosen")),
        ("rule", at("rule")),
    ]));
}

impl TaskWork {
    /// Lines added and removed by the latest change.
    pub(crate) fn lines(&self) -> (u64, u64) {
        let files = self.change.as_ref().map(|c| c.2.as_slice()).unwrap_or(&[]);
        files.iter().fold((0, 0), |(a, r), f| {
            (a + count(f.get("added")), r + count(f.get("removed")))
        })
    }

    /// Where the task stands: `merged`, `blocked`, `waiting`, `conflict`, `not shipped` (checks
    /// failed or no gate yet) or `no change`.
    pub(crate) fn state(&self) -> &'static str {
        match self.decision.as_ref().map(|d| d.0.as_str()) {
            Some("merge") => "merged",
            Some("block") => "blocked",
            Some("conflict") => "conflict",
            Some(_) => "waiting",
            None if self.change.as_ref().is_some_and(|c| c.1.is_none()) => "no change",
            None => "not shipped",
        }
    }

    /// `{change: {seq, commit, files, added, removed, truncated} | null, checks: {passed,
    /// failed}, ship: {decision, reason} | null, state}`.
    pub(crate) fn to_value(&self) -> Value {
        let (added, removed) = self.lines();
        let change = match &self.change {
            Some((seq, commit, files, truncated)) => obj([
                ("seq", uint(*seq)),
                (
                    "commit",
                    commit.as_ref().map(Value::str).unwrap_or(Value::Null),
                ),
                ("files", Value::Array(files.clone())),
                ("added", uint(added)),
                ("removed", uint(removed)),
                ("truncated", Value::Bool(*truncated)),
            ]),
            None => Value::Null,
        };
        let out = obj([
            ("change", change),
            (
                "checks",
                obj([
                    ("passed", uint(self.checks_passed)),
                    ("failed", uint(self.checks_failed)),
                ]),
            ),
            (
                "ship",
                match &self.decision {
                    Some((d, r)) => obj([("decision", Value::str(d)), ("reason", Value::str(r))]),
                    None => Value::Null,
                },
            ),
            ("state", Value::str(self.state())),
        ]);
        match (out, &self.attempts) {
            (Value::Object(mut fields), Some(a)) => {
                fields.push(("attempts".into(), a.clone()));
                Value::Object(fields)
            }
            (out, _) => out,
        }
    }

    /// Its attempts side by side ([`attempt_table`]; none when it ran once).
    pub(crate) fn attempt_lines(&self) -> Vec<String> {
        match &self.attempts {
            Some(a) => attempt_table(&self.id, a),
            None => Vec::new(),
        }
    }
}

/// Task `id`'s attempts `a` (its `attempts` object: `{attempts, chosen, rule}`) side by side,
/// a heading, a header and one line each: the attempt, its checks, its diff's lines, its
/// tokens and cost, and which was chosen and by what rule.
pub(crate) fn attempt_table(id: &str, a: &Value) -> Vec<String> {
    let rows = match a.get("attempts") {
        Some(Value::Array(rows)) => rows.as_slice(),
        _ => &[],
    };
    let chosen = match a.get("chosen") {
        Some(Value::Null) | None => None,
        c => Some(count(c)),
    };
    let rule = text(Some(a), "rule");
    let mut lines = vec![
        format!(
            "attempts of {id}: {}",
            match chosen {
                Some(n) => format!("attempt {n} chosen ({rule})"),
                None => format!("none chosen ({rule})"),
            }
        ),
        format!(
            "  {:<8}{:<8}{:>6}{:>10}{:>12}  chosen",
            "attempt", "checks", "diff", "tokens", "cost"
        ),
    ];
    for r in rows {
        let n = count(r.get("attempt"));
        let cost = match r.get("cost_usd") {
            Some(Value::Float(c)) => format!("${c:.6}"),
            _ => "-".into(),
        };
        let checks = format!(
            "{}/{}",
            count(r.get("checks_passed")),
            count(r.get("checks"))
        );
        let mark = if chosen == Some(n) {
            format!("yes ({rule})")
        } else if r.get("passed") == Some(&Value::Bool(true)) {
            "no".to_string()
        } else {
            "no (did not pass)".to_string()
        };
        lines.push(format!(
            "  {n:<8}{checks:<8}{:>6}{:>10}{cost:>12}  {mark}",
            count(r.get("diff_lines")),
            count(r.get("tokens")),
        ));
    }
    lines
}

impl Work {
    /// The run branch this run made, as its record says: the request's work record
    /// (`work_record`, its `run_branch`; `forum/run-SEQ` of `request_seq` for a record without
    /// one) names it, and it exists once a change was integrated onto it (a merge) or checks
    /// ran on it. `None` for a run that merged nothing: it has no branch to show.
    pub(crate) fn run_branch(
        &self,
        work_record: Option<&Value>,
        request_seq: Option<u64>,
    ) -> Option<String> {
        let checked = self
            .tasks
            .iter()
            .any(|t| t.id == "run" && t.checks_passed + t.checks_failed > 0);
        if self.merged == 0 && !checked {
            return None;
        }
        match field(work_record, "run_branch") {
            Some(Value::Str(b)) if !b.is_empty() => Some(b.clone()),
            _ => request_seq.map(|s| format!("forum/run-{s}")),
        }
    }

    /// The counts as JSON: `{changes, files, added, removed, checks: {passed, failed}, ship:
    /// {merged, blocked, waiting}, conflicts}`.
    pub(crate) fn counts_value(&self) -> Value {
        obj([
            ("changes", uint(self.changes)),
            ("files", uint(self.files)),
            ("added", uint(self.added)),
            ("removed", uint(self.removed)),
            (
                "checks",
                obj([
                    ("passed", uint(self.checks_passed)),
                    ("failed", uint(self.checks_failed)),
                ]),
            ),
            (
                "ship",
                obj([
                    ("merged", uint(self.merged)),
                    ("blocked", uint(self.blocked)),
                    ("waiting", uint(self.waiting)),
                ]),
            ),
            ("conflicts", uint(self.conflicts)),
        ])
    }

    /// The counts, flat and named, in a fixed order (what the summary and `bench` compare).
    pub(crate) fn metrics(&self) -> [(&'static str, i64); 10] {
        let i = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        [
            ("changes", i(self.changes)),
            ("files_changed", i(self.files)),
            ("lines_added", i(self.added)),
            ("lines_removed", i(self.removed)),
            ("checks_passed", i(self.checks_passed)),
            ("checks_failed", i(self.checks_failed)),
            ("changes_merged", i(self.merged)),
            ("changes_blocked", i(self.blocked)),
            ("changes_waiting", i(self.waiting)),
            ("conflicts", i(self.conflicts)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::canonical::parse;

    fn item(seq: u64, kind: &str, body: &str) -> (Entry, Option<Value>) {
        let e = Entry {
            seq,
            ts: 0.0,
            actor: "a".into(),
            kind: kind.into(),
            causal_parent: None,
            payload_hash: String::new(),
            prev_hash: String::new(),
            entry_hash: String::new(),
        };
        (e, Some(parse(body).unwrap()))
    }

    #[test]
    fn a_conflict_after_a_merge_counts_until_the_next_merge_and_forum_runs_have_no_work() {
        let change = |seq, task: &str| {
            item(
                seq,
                kind::CHANGE,
                &format!(
                    r#"{{"task":"{task}","commit":"c{seq}","files":[{{"path":"a.py","status":"M","added":2,"removed":1}}]}}"#
                ),
            )
        };
        let ship = |seq, task: &str, d: &str| {
            item(
                seq,
                kind::SHIP,
                &format!(r#"{{"task":"{task}","decision":"{d}","reason":"r"}}"#),
            )
        };
        let mut items = vec![
            item(0, kind::REQUEST, r#"{"text":"x"}"#),
            change(1, "T1"),
            item(2, kind::CHECK, r#"{"task":"T1","ok":true}"#),
            ship(3, "T1", "merge"),
            change(4, "T2"),
            item(5, kind::CHECK, r#"{"task":"T2","ok":false}"#),
            change(6, "T3"),
            ship(7, "T3", "merge"),
            item(8, kind::CONFLICT, r#"{"task":"T3","paths":["a.py"]}"#),
            ship(9, "T4", "undetermined"),
        ];
        let w = work(&items).unwrap();
        assert_eq!((w.changes, w.files, w.added, w.removed), (3, 3, 6, 3));
        assert_eq!((w.checks_passed, w.checks_failed), (1, 1));
        assert_eq!((w.merged, w.blocked, w.waiting, w.conflicts), (1, 0, 1, 1));
        let states: Vec<&str> = w.tasks.iter().map(TaskWork::state).collect();
        assert_eq!(states, ["merged", "not shipped", "conflict", "waiting"]);
        items.push(ship(10, "T3", "merge"));
        assert_eq!(work(&items).unwrap().merged, 2);
        assert_eq!(work(&items[..1]), None);
        assert_eq!(work(&[ship(0, "T1", "merge")]), None);
    }
}
