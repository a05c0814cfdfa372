//! The comparison of a replayed run with its record: every entry the run wrote, matched by
//! where it stands (the run's own line of entries, or one task's line, so that the tasks of a
//! wave may finish in any order) and compared on what the run decided: its actor, kind,
//! causal parent (by what the parent is, not by its seq) and body. Timestamps and prices are
//! the world's, not the run's decisions, and are left out. Pure: it reads what it is handed.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value as J, json};

use super::Recorded;

/// The first place a replay decided otherwise than its record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Divergence {
    /// The recorded entry that differs, or the run's last recorded entry when the replay
    /// wrote an entry past the record's end.
    pub seq: u64,
    /// What the record holds there, on one line.
    pub recorded: String,
    /// What the replay decided there, on one line.
    pub recomputed: String,
}

/// The longest a side of a divergence is shown, in characters.
const SHOWN: usize = 600;

/// Where an entry stands: the task line it belongs to (`""` for the run's own line) and its
/// place in that line.
type Place = (String, usize);

/// The task an entry belongs to: the task, result, verdict and escalation entries carry it as
/// `id`; the editing worker's tool entries, a task's context and a `--work` run's entries of
/// one task (its changes, checks, ship decision, conflict, integration) as `task`, and a
/// context budget's slice of a task's context or of what flows into it in its `label`
/// (`T1`, `T1->T2`), so that the tasks of a wave may take context, commit and check in any
/// order.
fn line_of(e: &Recorded) -> String {
    let key = match e.kind.as_str() {
        "task" | "result" | "verdict" | "tier_escalation" => "id",
        "tool_call" | "tool_result" | "change" | "check" | "ship" | "conflict" | "integrated"
        | "context" | "task_dispatched" => "task",
        // A result that came again is the world's timing: compared among the task's others.
        "duplicate_result" => {
            return e.payload["task"]
                .as_str()
                .map(|id| format!("duplicates of task {id}"))
                .unwrap_or_default();
        }
        "context_budget" => return budget_line(&e.payload),
        _ => return String::new(),
    };
    e.payload
        .get(key)
        .and_then(J::as_str)
        .map(|id| format!("task {id}"))
        .unwrap_or_default()
}

/// The task line of a `context_budget` entry: a task's own context by its label, an upstream
/// output by the task it flows into (the synthesizer's inputs share one line).
fn budget_line(b: &J) -> String {
    let label = b["label"].as_str().unwrap_or_default();
    let task = match b["source"].as_str() {
        Some("task") => Some(label),
        Some("upstream") => label.rsplit_once("->").map(|(_, t)| t),
        _ => None,
    };
    task.map(|t| format!("task {t}")).unwrap_or_default()
}

/// Each entry's place, by seq.
fn places(run: &[Recorded]) -> BTreeMap<u64, Place> {
    let mut next: BTreeMap<String, usize> = BTreeMap::new();
    run.iter()
        .map(|e| {
            let line = line_of(e);
            let n = next.entry(line.clone()).or_default();
            *n += 1;
            (e.seq, (line, *n - 1))
        })
        .collect()
}

/// The entry at seq `p` named by its place (`kind of task T1 #2`), so the same entry is named
/// alike on both sides whatever seq it got.
fn named(p: u64, at: &BTreeMap<u64, Place>, by_seq: &BTreeMap<u64, &Recorded>) -> String {
    match (at.get(&p), by_seq.get(&p)) {
        (Some((line, i)), Some(pe)) if line.is_empty() => format!("{} #{i}", pe.kind),
        (Some((line, i)), Some(pe)) => format!("{} of {line} #{i}", pe.kind),
        // Outside the run: the same seq on both sides, since the replay starts from a copy.
        _ => format!("seq {p}"),
    }
}

/// What is compared of one entry: its decisions, with its parent, and the change entry a
/// `--work` entry names (`change`, a seq; a dispatch's `retry.refused`), named by their
/// places.
fn decided(e: &Recorded, at: &BTreeMap<u64, Place>, by_seq: &BTreeMap<u64, &Recorded>) -> J {
    let parent = e.parent.map(|p| named(p, at, by_seq));
    let mut body = e.payload.clone();
    if matches!(e.kind.as_str(), "ship" | "conflict" | "integrated")
        && let Some(c) = body.get("change").and_then(J::as_u64)
    {
        body["change"] = json!(named(c, at, by_seq));
    }
    // A retry names the refused change it follows by seq, which the order of a wave's tasks
    // moves: it is compared by what that change is.
    if e.kind == "task_dispatched"
        && let Some(c) = body["retry"].get("refused").and_then(J::as_u64)
    {
        body["retry"]["refused"] = json!(named(c, at, by_seq));
    }
    // So does the first dispatch of an attempt a resume took up.
    if e.kind == "task_dispatched"
        && let Some(c) = body.get("resumed_from").and_then(J::as_u64)
    {
        body["resumed_from"] = json!(named(c, at, by_seq));
    }
    // Which version recorded the run is not a decision of the run.
    if e.kind == "request"
        && let Some(o) = body.as_object_mut()
    {
        o.remove("git_forum");
    }
    if let Some(u) = body.get_mut("usage").and_then(J::as_object_mut) {
        u.remove("cost_usd");
    }
    // So is each turn's price in an editing worker's result.
    for u in body
        .get_mut("turn_usage")
        .and_then(J::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(J::as_object_mut)
    {
        u.remove("cost_usd");
    }
    json!({"actor": e.actor, "kind": e.kind, "parent": parent, "body": body})
}

/// What the editing worker's entries record of the world since results kept each turn's
/// usage and text, the worktree and a structured reply's listing (and tool calls their id).
const LATER_FIELDS: [&str; 6] = [
    "turn_usage",
    "turn_texts",
    "turn_texts_truncated",
    "worktree",
    "listing",
    "call_id",
];

/// A replayed entry shaped as its record: the world it kept since ([`LATER_FIELDS`]) left out
/// where a run recorded before it does not have it.
fn as_recorded(was: &J, now: &mut J) {
    let Some(body) = now["body"].as_object_mut() else {
        return;
    };
    for k in LATER_FIELDS {
        if was["body"].get(k).is_none() {
            body.remove(k);
        }
    }
    // A dispatched worker's result names its commit since results kept it.
    if was["kind"] == "result" && was["body"].get("commit").is_none() {
        body.remove("commit");
    }
}

fn shown(v: &J) -> String {
    let s = format!(
        "{} by {} under {}: {}",
        v["kind"], v["actor"], v["parent"], v["body"]
    );
    let s = s.replace('"', "");
    match s.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{}...", &s[..cut]),
        None => s,
    }
}

/// The first entry (by recorded seq) where the replay decided otherwise, or the first entry
/// the replay wrote that the record lacks; `None` when they agree throughout.
///
/// A task the replay never started (it wrote nothing of the task's line) gives way to an entry
/// after it that the replay wrote otherwise: a wave's task is not started once another of its
/// tasks failed, and whether its thread had started by then is the machine's timing, not a
/// decision, so the divergence that stopped the run is the one to name. When the replay wrote
/// nothing of the entries after it either (it did not run that part), the unstarted task is
/// named.
pub fn first_divergence(recorded: &[Recorded], recomputed: &[Recorded]) -> Option<Divergence> {
    let (rec_at, new_at) = (places(recorded), places(recomputed));
    let rec_seq: BTreeMap<u64, &Recorded> = recorded.iter().map(|e| (e.seq, e)).collect();
    let new_seq: BTreeMap<u64, &Recorded> = recomputed.iter().map(|e| (e.seq, e)).collect();
    let new_by_place: BTreeMap<&Place, &Recorded> =
        recomputed.iter().map(|e| (&new_at[&e.seq], e)).collect();
    let started: std::collections::BTreeSet<&str> =
        new_at.values().map(|(line, _)| line.as_str()).collect();
    let mut unstarted = None;
    for e in recorded {
        let place = &rec_at[&e.seq];
        let was = decided(e, &rec_at, &rec_seq);
        let now = new_by_place.get(place).map(|n| {
            let mut now = decided(n, &new_at, &new_seq);
            as_recorded(&was, &mut now);
            now
        });
        if now.as_ref() == Some(&was) {
            continue;
        }
        let d = Divergence {
            seq: e.seq,
            recorded: shown(&was),
            recomputed: now
                .as_ref()
                .map_or_else(|| "nothing: the replay wrote no such entry".into(), shown),
        };
        let task_line = place.0.starts_with("task ");
        if now.is_none() && task_line && !started.contains(place.0.as_str()) {
            unstarted.get_or_insert(d);
            continue;
        }
        // Another entry missing: the replay ran otherwise from the task it did not start.
        return match (&now, unstarted) {
            (None, Some(first)) => Some(first),
            _ => Some(d),
        };
    }
    if unstarted.is_some() {
        return unstarted;
    }
    let rec_places: Vec<&Place> = rec_at.values().collect();
    let extra = recomputed
        .iter()
        .find(|e| !rec_places.contains(&&new_at[&e.seq]))?;
    Some(Divergence {
        seq: recorded.last().map_or(0, |e| e.seq),
        recorded: "nothing: the record ends here".into(),
        recomputed: shown(&decided(extra, &new_at, &new_seq)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(seq: u64, kind: &str, parent: Option<u64>, payload: J) -> Recorded {
        Recorded {
            seq,
            ts: seq as f64,
            actor: "a".into(),
            kind: kind.into(),
            parent,
            payload,
        }
    }

    #[test]
    fn a_result_recorded_before_turns_kept_their_usage_is_compared_without_it() {
        let older = json!({"id": "A", "turns": 2, "ok": true});
        let mut newer = older.clone();
        newer["turn_usage"] = json!([null, null]);
        newer["worktree"] = json!("/w");
        let rec = vec![
            e(5, "request", None, json!({"text": "x"})),
            e(6, "result", Some(5), older.clone()),
        ];
        let new = vec![
            e(5, "request", None, json!({"text": "x"})),
            e(6, "result", Some(5), newer.clone()),
        ];
        assert_eq!(first_divergence(&rec, &new), None);
        // A record that keeps them compares them.
        let mut edited = newer.clone();
        edited["worktree"] = json!("/elsewhere");
        let rec = vec![
            e(5, "request", None, json!({"text": "x"})),
            e(6, "result", Some(5), edited),
        ];
        assert_eq!(first_divergence(&rec, &new).map(|d| d.seq), Some(6));
    }

    #[test]
    fn a_task_the_replay_never_started_is_named_only_when_nothing_else_diverged() {
        let task = |seq, id: &str| e(seq, "task", Some(1), json!({"id": id}));
        let result =
            |seq, id: &str, ok| e(seq, "result", Some(seq - 2), json!({"id": id, "ok": ok}));
        let rec = vec![
            e(1, "plan", None, json!({"tasks": 2})),
            task(2, "T1"),
            task(3, "T2"),
            result(4, "T1", true),
            result(5, "T2", true),
        ];
        // T1's result decided otherwise and the run stopped before T2's thread started.
        let new = vec![rec[0].clone(), rec[1].clone(), result(4, "T1", false)];
        assert_eq!(first_divergence(&rec, &new).map(|d| d.seq), Some(4));
        // T2 never started and nothing else differs: T2's first entry is named.
        let new = vec![rec[0].clone(), rec[1].clone(), rec[3].clone()];
        let d = first_divergence(&rec, &new).unwrap();
        assert_eq!(d.seq, 3);
        assert_eq!(d.recomputed, "nothing: the replay wrote no such entry");
        // A task that started and then wrote less is named where it stopped.
        let new = vec![
            rec[0].clone(),
            rec[1].clone(),
            rec[2].clone(),
            result(4, "T1", false),
        ];
        assert_eq!(first_divergence(&rec, &new).map(|d| d.seq), Some(4));
        let new = vec![
            rec[0].clone(),
            rec[1].clone(),
            rec[2].clone(),
            rec[3].clone(),
        ];
        assert_eq!(first_divergence(&rec, &new).map(|d| d.seq), Some(5));
        // Neither task's later entries written (the replay did not run that part): the
        // unstarted task comes first.
        let new = vec![rec[0].clone(), rec[1].clone()];
        assert_eq!(first_divergence(&rec, &new).map(|d| d.seq), Some(3));
    }

    #[test]
    fn tasks_of_a_wave_may_finish_in_any_order_but_a_changed_verdict_is_named() {
        let rec = vec![
            e(5, "request", None, json!({"text": "x"})),
            e(6, "task", Some(5), json!({"id": "A"})),
            e(7, "task", Some(5), json!({"id": "B"})),
            e(8, "result", Some(7), json!({"id": "B", "output": "b"})),
            e(9, "result", Some(6), json!({"id": "A", "output": "a"})),
            e(10, "verdict", Some(9), json!({"id": "A", "ok": true})),
        ];
        // Written at other seqs and in another order: the same decisions.
        let mut new = vec![
            e(20, "request", None, json!({"text": "x"})),
            e(21, "task", Some(20), json!({"id": "A"})),
            e(22, "result", Some(21), json!({"id": "A", "output": "a"})),
            e(23, "task", Some(20), json!({"id": "B"})),
            e(24, "result", Some(23), json!({"id": "B", "output": "b"})),
            e(25, "verdict", Some(22), json!({"id": "A", "ok": true})),
        ];
        assert_eq!(first_divergence(&rec, &new), None);
        new[5].payload = json!({"id": "A", "ok": false});
        let d = first_divergence(&rec, &new).unwrap();
        assert_eq!(d.seq, 10);
        assert!(d.recorded.contains("ok:true"), "{d:?}");
        assert!(d.recomputed.contains("ok:false"), "{d:?}");
        // An entry the record lacks is named after the record's last entry.
        new[5].payload = json!({"id": "A", "ok": true});
        new.push(e(26, "degraded", Some(20), json!({})));
        let d = first_divergence(&rec, &new).unwrap();
        assert_eq!(
            (d.seq, d.recorded.as_str()),
            (10, "nothing: the record ends here")
        );
    }

    #[test]
    fn a_retry_names_its_refused_change_by_what_it_is_and_a_duplicate_may_come_at_any_time() {
        let rec = vec![
            e(5, "request", None, json!({"text": "x"})),
            e(6, "task", Some(5), json!({"id": "A"})),
            e(
                7,
                "task_dispatched",
                Some(6),
                json!({"task": "A", "attempt": "a1"}),
            ),
            e(8, "change", Some(7), json!({"task": "A", "refused": true})),
            e(
                9,
                "duplicate_result",
                Some(7),
                json!({"task": "A", "attempt": "a1"}),
            ),
            e(
                10,
                "task_dispatched",
                Some(6),
                json!({"task": "A", "attempt": "a2", "retry": {"of": "a1", "refused": 8}}),
            ),
        ];
        // Other seqs, and the duplicate witnessed later: the same decisions.
        let mut new = vec![
            e(20, "request", None, json!({"text": "x"})),
            e(21, "task", Some(20), json!({"id": "A"})),
            e(
                23,
                "task_dispatched",
                Some(21),
                json!({"task": "A", "attempt": "a1"}),
            ),
            e(
                24,
                "change",
                Some(23),
                json!({"task": "A", "refused": true}),
            ),
            e(
                25,
                "task_dispatched",
                Some(21),
                json!({"task": "A", "attempt": "a2", "retry": {"of": "a1", "refused": 24}}),
            ),
            e(
                26,
                "duplicate_result",
                Some(23),
                json!({"task": "A", "attempt": "a1"}),
            ),
        ];
        assert_eq!(first_divergence(&rec, &new), None);
        // A retry that names another entry than the refused change diverges at its seq.
        new[4].payload["retry"]["refused"] = json!(23);
        assert_eq!(first_divergence(&rec, &new).map(|d| d.seq), Some(10));
    }
}
