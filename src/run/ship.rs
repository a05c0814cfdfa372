//! A run that changes the repository (`--work`), the shipping side: after each wave, the
//! pre-ship gate (the orchestrator seat, held to a JSON schema) decides on each change whose
//! checks passed, witnessed as `ship`; merged changes are integrated onto the run branch in
//! plan order, a conflict is witnessed and the later task runs once more on top of the
//! integrated result; blocked changes are quarantined. After the last wave the run's checks run
//! once on the run branch. A gate that fails never fabricates a verdict: it records
//! `undetermined` with the error, and the change waits for a person.

use std::collections::BTreeMap;

use serde_json::json;

use crate::exec::Call;
use crate::ledger::kind;
use crate::plan::{CompiledPlan, Task};

use super::commit_message;
use super::engine::{Run, usage_of, with_usage};
use super::prompts::{conflict_note, ship_prompt};
use super::schemas::{parse_ship, ship_schema};
use super::work_state::{TaskWork, WorkRun};
use super::workbench::{Keep, LinkOut, WorkError};
use super::{Event, RunError};

/// The pre-ship gate's answer on one change.
pub(super) struct Decision {
    pub(super) decision: String,
    pub(super) reason: String,
    pub(super) model: Option<String>,
    /// Why no decision could be made (the seat failed or answered garbage).
    pub(super) error: Option<String>,
    /// The gate call's usage, when the seat counted it.
    pub(super) usage: Option<serde_json::Value>,
}

/// The most bytes of the pre-ship gate's raw reply a `ship` entry keeps (`reply`; a longer
/// one is cut on a character boundary and `reply_cut` says so).
pub(super) const GATE_REPLY_CAP: usize = 4096;

/// `text` cut to [`GATE_REPLY_CAP`] bytes on a character boundary, and whether it was cut.
fn capped_reply(text: &str) -> (&str, bool) {
    if text.len() <= GATE_REPLY_CAP {
        return (text, false);
    }
    let mut end = GATE_REPLY_CAP;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

/// Keeps the gate's raw reply (when it answered) in a `ship` entry's body (or an
/// `attempt_choice`'s `gate`), as `reply` (capped; `reply_cut` when it was longer), so a
/// strict replay parses the decision again from it.
pub(super) fn keep_reply(payload: &mut serde_json::Value, reply: Option<&str>) {
    if let Some(r) = reply {
        let (kept, cut) = capped_reply(r);
        payload["reply"] = json!(kept);
        if cut {
            payload["reply_cut"] = json!(true);
        }
    }
}

/// The guardrail's block of a change whose symbolic links point outside the worktree (the
/// first five named).
fn links_out_block(links_out: &[LinkOut]) -> Decision {
    let shown: Vec<String> = links_out
        .iter()
        .take(5)
        .map(|l| format!("{} -> {}", l.path, l.target))
        .collect();
    Decision {
        decision: "block".into(),
        reason: format!(
            "the change adds symbolic links that point outside the worktree: {}",
            shown.join(", ")
        ),
        model: None,
        error: None,
        usage: None,
    }
}

/// A light seat's decision (tier 1, `verify = "light"`): a change whose every check passed
/// merges without asking the gate; witnessed as such.
fn light_merge() -> Decision {
    Decision {
        decision: "merge".into(),
        reason: "light verification: every check passed, so the pre-ship gate was not asked".into(),
        model: None,
        error: None,
        usage: None,
    }
}

impl Run<'_, '_> {
    /// The rules a decision of this run is made under, as its `ship` (and a `--work` run's
    /// gate) entry records them: `{policy, roster?, runtime?}`, each the SHA-256 (hex) of the
    /// policy's and the roster's TOML text and of the recorded runtime's canonical JSON (its
    /// payload hash). An attestation lists them beside each decision.
    pub(super) fn rules(&self) -> serde_json::Value {
        let mut r = json!({ "policy": self.opts.policy.digest });
        if let Some(d) = self.env.roster.digest() {
            r["roster"] = json!(d);
        }
        if let Some(rt) = &self.opts.runtime_record {
            let v = crate::ledger::canonical::Value::from_serde(rt);
            r["runtime"] = json!(crate::ledger::hash::payload_hash(&v));
        }
        r
    }

    /// Asks the orchestrator seat whether the change ships, and what it answered (its raw
    /// reply, when it answered at all); a failed call or an unusable answer is an
    /// undetermined decision.
    pub(super) fn ask_ship_gate(
        &self,
        t: &Task,
        checks: &[(String, bool)],
        diff: &str,
    ) -> (Decision, Option<String>) {
        self.env
            .progress
            .event(&Event::Validating { id: t.id.clone() });
        let orchestrator = self.env.seats.orchestrator();
        let prompt = ship_prompt(t, checks, diff);
        let schema = ship_schema();
        let call = Call {
            system: Some("You decide whether a change ships. Answer with JSON only."),
            prompt: &prompt,
            schema: Some(&schema),
            max_tokens: Some(256),
        };
        match self.ask(orchestrator.as_ref(), &call) {
            Ok(r) => {
                let usage = usage_of(orchestrator.as_ref(), &r);
                let d = match parse_ship(&r.text) {
                    Ok((decision, reason)) => Decision {
                        decision,
                        reason,
                        model: Some(r.model),
                        error: None,
                        usage,
                    },
                    Err(e) => Decision {
                        decision: "undetermined".into(),
                        reason: format!("the gate answered without a usable decision: {e}"),
                        model: Some(r.model),
                        error: Some(e.to_string()),
                        usage,
                    },
                };
                (d, Some(r.text))
            }
            Err(e) => (
                Decision {
                    decision: "undetermined".into(),
                    reason: format!("the gate failed ({}): {e}", e.code()),
                    model: Some(orchestrator.model()),
                    error: Some(e.code().to_string()),
                    usage: None,
                },
                None,
            ),
        }
    }

    /// Asks the gate about a task's latest change (or takes its answer `ahead`, asked before
    /// with others at once) and witnesses `ship`; a block quarantines it.
    pub(super) fn ship_one(
        &self,
        w: &WorkRun,
        t: &Task,
        ahead: Option<(Decision, Option<String>)>,
    ) -> Result<Decision, RunError> {
        let tw = w.get(&t.id);
        let diff = tw.change.as_ref().map(|c| c.diff.as_str()).unwrap_or("");
        let light = w
            .verification
            .is_some_and(|v| !v.gate_every_change && !tw.checks.is_empty() && tw.checks_ok());
        let links_out = tw
            .change
            .as_ref()
            .map(|c| c.links_out.as_slice())
            .unwrap_or_default();
        let guarded = !links_out.is_empty();
        let mut reply = None;
        let d = if guarded {
            // A guardrail in code, before any seat is asked: a change whose links lead out of
            // the worktree would hand whoever checks it out a path to the user's files.
            links_out_block(links_out)
        } else if light {
            light_merge()
        } else if self.over_budget() {
            Decision {
                decision: "undetermined".into(),
                reason: "budget exceeded before the change could be reviewed".into(),
                model: None,
                error: Some("budget".into()),
                usage: None,
            }
        } else {
            let (d, r) = ahead.unwrap_or_else(|| self.ask_ship_gate(t, &tw.checks, diff));
            reply = r;
            d
        };
        let mut payload = json!({
            "task": t.id,
            "change": tw.change_seq,
            "decision": d.decision,
            "reason": d.reason,
            "model": d.model,
        });
        if let Some(e) = &d.error {
            payload["error"] = json!(e);
        }
        if !w.legacy {
            keep_reply(&mut payload, reply.as_deref());
        }
        if guarded {
            payload["gate"] = json!("guardrail");
        } else if light {
            payload["gate"] = json!("skipped");
        }
        payload["rules"] = self.rules();
        let payload = with_usage(payload, d.usage.clone());
        let e = self.put("orchestrator", kind::SHIP, Some(tw.last_seq), payload)?;
        let mut tw = w.get(&t.id);
        tw.ship = Some(d.decision.clone());
        tw.last_seq = e.seq;
        w.set(&t.id, tw.clone());
        self.env.progress.event(&Event::Verdict {
            id: t.id.clone(),
            decision: format!("pre-ship gate: {}", d.decision),
        });
        if d.decision == "block"
            && let Some(commit) = tw.commit()
        {
            w.bench
                .keep(&self.ref_name(&t.id), commit, Keep::Quarantine)
                .map_err(|e| RunError::Work(e.to_string()))?;
        }
        Ok(d)
    }

    /// Integrates a merged change onto the run branch. A conflict is witnessed and returned.
    pub(super) fn integrate(
        &self,
        w: &WorkRun,
        t: &Task,
    ) -> Result<Result<(), Vec<String>>, RunError> {
        let tw = w.get(&t.id);
        let Some(commit) = tw.commit() else {
            return Ok(Ok(()));
        };
        let files: Vec<&str> = tw
            .change
            .iter()
            .flat_map(|c| c.files.iter().map(|f| f.path.as_str()))
            .collect();
        let subject = commit_message::subject(tw.report.as_deref(), &t.instruction, &files);
        let head = commit_message::head(&subject, &t.id, &t.agent, Some(&tw.checks));
        let head = self.redact_text(&head);
        match w
            .bench
            .integrate_noting(&self.ref_name(&t.id), commit, &head)
        {
            Ok(tip) => {
                let mut tw = w.get(&t.id);
                if !w.legacy {
                    let tree = w
                        .bench
                        .tip_tree(&tip)
                        .map_err(|e| RunError::Work(e.to_string()))?;
                    let e = self.put(
                        "dispatch",
                        kind::INTEGRATED,
                        Some(tw.last_seq),
                        json!({"task": t.id, "change": tw.change_seq, "commit": commit,
                               "tip": tip, "tree": tree}),
                    )?;
                    tw.last_seq = e.seq;
                }
                tw.integrated = Some(tip);
                w.set(&t.id, tw);
                Ok(Ok(()))
            }
            Err(WorkError::Conflict { paths }) => {
                let e = self.put(
                    "dispatch",
                    kind::CONFLICT,
                    Some(tw.last_seq),
                    json!({"task": t.id, "change": tw.change_seq, "paths": paths}),
                )?;
                let mut tw = w.get(&t.id);
                tw.last_seq = e.seq;
                w.set(&t.id, tw);
                Ok(Err(paths))
            }
            // Another change made the same edit since the gate was asked.
            Err(WorkError::Refused(_)) => {
                self.adds_nothing(w, t)?;
                Ok(Ok(()))
            }
            Err(e) => Err(RunError::Work(e.to_string())),
        }
    }

    /// After a conflict, the task runs once more in a worktree at the run branch's tip; its new
    /// change is checked, gated and integrated like the first. A second conflict leaves it
    /// failed (not integrated).
    pub(super) fn rerun_after_conflict(
        &self,
        w: &WorkRun,
        t: &Task,
        paths: &[String],
    ) -> Result<(), RunError> {
        let tw = w.get(&t.id);
        if tw.reran || self.over_budget() {
            return Ok(());
        }
        let Some(task_entry) = tw.task_entry.clone() else {
            return Ok(());
        };
        let mut tw = tw;
        tw.reran = true;
        w.set(&t.id, tw);
        w.close_tree(&t.id);
        let worker = self.env.seats.worker(self.env.roster, &t.agent);
        let name = self.ref_name(&t.id);
        let opened = w.in_turn(|| w.bench.open_branch(&name));
        let instruction = format!("{}{}", t.instruction, conflict_note(paths));
        let done = self.work_attempt(w, t, &worker, &instruction, &task_entry, opened)?;
        if !done.ok {
            return Ok(());
        }
        let d = self.ship_one(w, t, None)?;
        if d.decision == "merge" {
            // A second conflict is witnessed and ends it.
            let _ = self.integrate(w, t)?;
        }
        Ok(())
    }

    /// The run's checks, once, on the run branch (task `run`), when anything was integrated.
    pub(super) fn check_run_branch(&self, w: &WorkRun, plan_seq: u64) -> Result<(), RunError> {
        let any = crate::run::lock(&w.tasks)
            .values()
            .any(|t| t.integrated.is_some());
        if !any || w.checks.is_empty() {
            return Ok(());
        }
        let tree = match w.in_turn(|| w.bench.open_branch("run")) {
            Ok(t) => t,
            Err(e) => {
                self.put(
                    "checker",
                    kind::CHECK,
                    Some(plan_seq),
                    json!({"task": "run", "command": w.checks.join(" && "), "exit": null, "ok": false, "seconds": 0.0, "output": e.to_string()}),
                )?;
                return Ok(());
            }
        };
        let mut results = Vec::new();
        for cmd in &w.checks {
            let (ok, _, _) = self.run_check(w, &tree, "run", cmd, plan_seq)?;
            results.push((cmd.clone(), ok));
        }
        let _ = w.in_turn(|| w.bench.close(&tree));
        let mut tw = w.get("run");
        tw.checks = results;
        w.set("run", tw);
        Ok(())
    }
}

/// What a `--work` run's record says its tasks did: each task's latest change, its checks and
/// the gate's decision ([`super::changes::restore`]), and each task's latest result (ok, and
/// its error code).
pub(super) struct Record {
    tasks: BTreeMap<String, TaskWork>,
    results: BTreeMap<String, (bool, String)>,
}

impl Record {
    /// Reads the record of run `request_seq` back from the ledger.
    pub(super) fn read(run: &Run<'_, '_>, request_seq: u64) -> Result<Record, RunError> {
        let entries = run.entries()?;
        let roots = crate::report::run_roots(&entries);
        let mut items = Vec::new();
        let mut results = BTreeMap::new();
        for e in &entries {
            if roots.get(&e.seq) != Some(&request_seq) {
                continue;
            }
            match e.kind.as_str() {
                kind::CHANGE | kind::CHECK | kind::SHIP | kind::CONFLICT | kind::ATTEMPT_CHOICE => {
                    if let Some(p) = run.payload_of(e)? {
                        items.push((e.clone(), p));
                    }
                }
                kind::RESULT => {
                    if let Some(p) = run.payload_of(e)?
                        && let Some(id) = p.get("id").and_then(|v| v.as_str())
                    {
                        let error = p.get("error").and_then(|v| v.as_str()).unwrap_or("");
                        results.insert(id.to_string(), (p["ok"] == true, error.to_string()));
                    }
                }
                _ => {}
            }
        }
        Ok(Record {
            tasks: super::changes::restore(&items),
            results,
        })
    }

    /// Whether the task's change is on the run branch: merged, and no conflict after.
    fn delivered(tw: &TaskWork) -> bool {
        tw.ship.as_deref() == Some("merge") && tw.integrated.is_some() && tw.commit().is_some()
    }

    /// The files the delivered changes touched; none when nothing was delivered.
    pub(super) fn delivered_files(&self) -> Option<Vec<String>> {
        let delivered: Vec<&TaskWork> = self
            .tasks
            .values()
            .filter(|tw| Record::delivered(tw))
            .collect();
        if delivered.is_empty() {
            return None;
        }
        Some(
            delivered
                .iter()
                .filter_map(|tw| tw.change.as_ref())
                .flat_map(|c| c.files.iter().map(|f| f.path.clone()))
                .collect(),
        )
    }
}

/// Where the record's part of a --work run's answer starts: after the model's summary and a
/// blank line.
pub(super) const CHANGES_PART: &str = "\n\nChanges (branch forum/run-";

/// What changed and how it was checked, for the answer, written from the record (never by a
/// model): one line per task of the plan that did something (its change's files and lines,
/// its checks, where the gate left it, or why it failed), the run branch's checks, and a line
/// saying so when nothing was delivered.
pub(super) fn work_summary(record: &Record, plan: &CompiledPlan, run_seq: u64) -> String {
    let mut lines = vec![format!("Changes (branch forum/run-{run_seq}):")];
    let mut delivered = 0;
    for t in &plan.tasks {
        let result = record.results.get(&t.id);
        let failed = result.filter(|(ok, _)| !ok).map(|(_, code)| code.as_str());
        let Some(tw) = record.tasks.get(&t.id).filter(|tw| tw.change.is_some()) else {
            if let Some(code) = failed {
                lines.push(format!("- {}: failed ({})", t.id, or_error(code)));
            }
            continue;
        };
        let Some(c) = tw.change.as_ref().filter(|c| c.commit.is_some()) else {
            lines.push(match failed {
                Some(code) => format!("- {}: failed ({})", t.id, or_error(code)),
                None => format!("- {}: no change", t.id),
            });
            continue;
        };
        let (added, removed) = c
            .files
            .iter()
            .fold((0, 0), |(a, r), f| (a + f.added, r + f.removed));
        let files: Vec<&str> = c.files.iter().map(|f| f.path.as_str()).collect();
        let passed = tw.checks.iter().filter(|(_, ok)| *ok).count();
        let state = match (tw.ship.as_deref(), &tw.integrated) {
            (Some("merge"), Some(_)) => {
                delivered += 1;
                "merged".to_string()
            }
            (Some("merge"), None) => "not integrated (conflict)".to_string(),
            (Some("block"), _) => "blocked (quarantined)".to_string(),
            (Some(_), _) => "waiting for a person".to_string(),
            (None, _) if !tw.checks_ok() => "not shipped (checks failed)".to_string(),
            (None, _) => "not shipped".to_string(),
        };
        lines.push(format!(
            "- {}: {} ({} file{}, +{added} -{removed}: {}); checks {passed}/{} passed",
            t.id,
            state,
            files.len(),
            if files.len() == 1 { "" } else { "s" },
            files.join(", "),
            tw.checks.len()
        ));
    }
    if lines.len() == 1 {
        lines.push("- no task changed the repository".into());
    }
    if delivered == 0 {
        lines.push("- nothing delivered: no change of this run is on its run branch".into());
    }
    if let Some(run) = record.tasks.get("run")
        && !run.checks.is_empty()
    {
        let passed = run.checks.iter().filter(|(_, ok)| *ok).count();
        lines.push(format!(
            "- run branch: checks {passed}/{} passed",
            run.checks.len()
        ));
    }
    lines.join("\n")
}

fn or_error(code: &str) -> &str {
    if code.is_empty() {
        "its worker failed"
    } else {
        code
    }
}

#[cfg(test)]
mod tests {
    use super::{GATE_REPLY_CAP, capped_reply};

    #[test]
    fn a_gate_reply_is_kept_whole_up_to_the_cap_and_cut_on_a_character_boundary_past_it() {
        let short = r#"{"decision":"merge","reason":"ok"}"#;
        assert_eq!(capped_reply(short), (short, false));
        // A two-byte character straddles the cap: the cut falls before it.
        let long = format!("{}é{}", "a".repeat(GATE_REPLY_CAP - 1), "b".repeat(10));
        let (kept, cut) = capped_reply(&long);
        assert!(cut);
        assert_eq!(kept.len(), GATE_REPLY_CAP - 1);
        assert!(kept.chars().all(|c| c == 'a'));
    }
}
