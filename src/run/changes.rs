//! A run that changes the repository (`--work`), the task side: each task's worker runs in a
//! worktree of its own (the base plus its data-edge upstreams' changes); what it changed is
//! committed and witnessed as `change`, each check command runs on it and is witnessed as
//! `check`, and a task whose checks fail climbs the escalation ladder with the failing output
//! in its prompt. The pre-ship gate and the run branch are `ship.rs`.
//!
//! The repository is reached only through the [`Workbench`] seam; the engine opens it once the
//! run's request seq (which names the run's refs and branch) is known.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Value as JsonValue, json};

use crate::exec::sandbox::Record;
use crate::exec::sandbox::profile::Profile;
use crate::exec::{Executor, command};
use crate::ledger::canonical::Value;
use crate::ledger::{Entry, kind};
use crate::plan::Task;
use crate::run::work_state::Unkept;

use super::claimed::{Made, claimed_runs};
use super::commit_message;
use super::engine::{Done, Run};
use super::prompts::{failed_checks_note, work_note};
use super::work_state::{TaskWork, WorkRun, criteria_commands};
use super::workbench::{
    Author, Change, CheckRun, CommitRules, Keep, LinkOut, TaskTree, Tie, WorkError, Workbench,
};
use super::{Event, RunError, lock};

/// One line for a work error (a conflict names its paths).
fn work_error_line(e: &WorkError) -> String {
    e.to_string().replace('\n', " ")
}

impl Run<'_, '_> {
    /// The run's workbench, when it works in the repository.
    pub(super) fn work(&self) -> Option<&WorkRun> {
        self.work.get()
    }

    /// Opens the workbench of run `run_seq` with `checks` (from the options or the record), at
    /// `base` when the run recorded one, and makes it the run's; `legacy` for a run recorded
    /// before integrations and gate replies were witnessed (see [`super::WorkOptions::legacy`]),
    /// `unkept`: what a run recorded by an older version did not keep (see
    /// [`super::work_state::Unkept`]).
    pub(super) fn open_work(
        &self,
        run_seq: u64,
        base: Option<&str>,
        checks: Vec<String>,
        (legacy, unkept): (bool, Unkept),
    ) -> Result<(), RunError> {
        let w = self
            .make_work(run_seq, base, checks, (legacy, unkept))?
            .map_err(|e| RunError::Work(work_error_line(&e)))?;
        let _ = self.work.set(w);
        Ok(())
    }

    /// The workbench of run `run_seq`, opened but not yet the run's: the sandbox's refusal or a
    /// missing workbench as the outer error, the workbench's own failure (another run holding
    /// the area among them) as the inner one.
    fn make_work(
        &self,
        run_seq: u64,
        base: Option<&str>,
        checks: Vec<String>,
        (legacy, unkept): (bool, Unkept),
    ) -> Result<Result<WorkRun, WorkError>, RunError> {
        let Some(o) = &self.opts.work else {
            return Err(RunError::Work(
                "this run works in the repository, but no workbench was given".into(),
            ));
        };
        // A run recorded before integrations and gate replies were witnessed keeps none of
        // what came after them either.
        let old = o.legacy || legacy;
        let (mut sandbox, jail) = o
            .sandbox
            .resolve()
            .map_err(|e| RunError::Work(e.to_string()))?;
        let bench = match (o.open)(run_seq, base) {
            Ok(b) => b,
            Err(e) => return Ok(Err(e)),
        };
        // The project's own environment, found once in the user's checkout before any worker
        // runs, and listed in the record.
        let jail = match (jail, bench.checkout()) {
            (Some(j), Some(checkout)) => {
                let profile = Profile::resolve(&checkout, &|k| std::env::var(k).ok());
                if let Record::Confined { bound, .. } = &mut sandbox {
                    *bound = profile.listed();
                }
                Some(Arc::new(j.with_profile(profile)))
            }
            (j, _) => j,
        };
        Ok(Ok(WorkRun {
            bench,
            ledger: o.ledger.clone(),
            run_seq,
            checks,
            deadline: o.check_deadline,
            output_cap: o.output_cap,
            diff_cap: o.diff_cap,
            allow_cmds: o.allow_cmds.clone(),
            max_tool_calls: o.max_tool_calls,
            attempts: o.attempts,
            attempt_slots: o.attempt_slots.clone(),
            tasks: Mutex::new(BTreeMap::new()),
            plan: Mutex::new(Vec::new()),
            git_turn: std::sync::RwLock::new(()),
            jail,
            sandbox,
            verification: o.verification,
            limits: o.limits,
            legacy: old,
            keeps_attempt_reply: !(old || o.unkept.attempt_reply || unkept.attempt_reply),
            keeps_refused_tree: !(old || o.unkept.refused_tree || unkept.refused_tree),
            sending: Mutex::new(None),
        }))
    }

    /// Writes the entry that names a `--work` run (a run's request, a dispatch's plan) as the
    /// seq its workbench is opened for, so the run's area, refs and branch carry the seq the
    /// record gives it, whatever other writers do meanwhile. `entry` gives the entry's actor,
    /// kind and body for the workbench just opened. When another writer takes the seq first
    /// (or another run holds that seq's area), the workbench is closed and the next seq tried;
    /// nothing is written for a seq that was not kept.
    pub(super) fn put_naming_work(
        &self,
        base: Option<&str>,
        checks: &[String],
        entry: impl Fn(&WorkRun) -> (&'static str, &'static str, Value),
    ) -> Result<Entry, RunError> {
        const ATTEMPTS: u32 = 200;
        for attempt in 0..ATTEMPTS {
            let pause = std::time::Duration::from_millis(5 + 5 * u64::from(attempt.min(10)));
            let next = lock(&self.store).len()?;
            let w = match self.make_work(next, base, checks.to_vec(), (false, Unkept::default()))? {
                Ok(w) => w,
                Err(WorkError::Busy(_)) => {
                    std::thread::sleep(pause);
                    continue;
                }
                Err(e) => return Err(RunError::Work(work_error_line(&e))),
            };
            let (actor, kind, body) = entry(&w);
            match self.put_at(next, actor, kind, None, body)? {
                Some(e) => {
                    let _ = self.work.set(w);
                    return Ok(e);
                }
                None => {
                    let _ = w.bench.finish();
                    std::thread::sleep(pause);
                }
            }
        }
        Err(RunError::Work(format!(
            "the ledger kept moving while this run opened its work area ({ATTEMPTS} tries); submit again"
        )))
    }

    /// Removes every worktree of the run (however it ended).
    pub(super) fn finish_work(&self) {
        if let Some(w) = self.work() {
            let _ = w.bench.finish();
        }
    }

    /// Runs one task of a `--work` run: its worktree, the worker in it, the commit, `change`,
    /// the checks; a task whose worker failed or whose checks failed climbs the ladder, each
    /// rung in a fresh worktree with the failing output in its prompt.
    pub(super) fn work_task(
        &self,
        w: &WorkRun,
        task: &Task,
        plan: &[Task],
        instruction: &str,
        task_entry: &Entry,
    ) -> Result<Done, RunError> {
        let worker = self.env.seats.worker(self.env.roster, &task.agent);
        let mut tw = w.get(&task.id);
        tw.task_entry = Some(task_entry.clone());
        w.set(&task.id, tw);
        let upstream = w.upstream_commits(task, plan);
        let name = self.ref_name(&task.id);
        let mut done = if w.attempts > 1 {
            self.work_attempts(w, task, &worker, instruction, task_entry, &name, &upstream)?
        } else {
            let opened = w.in_turn(|| w.bench.open_task(&name, &upstream));
            self.work_attempt(w, task, &worker, instruction, task_entry, opened)?
        };
        if done.ok {
            return Ok(done);
        }
        for rung in super::ladder::rungs(self.env.seats, self.env.roster, &task.agent) {
            if self.over_budget() {
                break;
            }
            let failed = w.get(&task.id).failed;
            let from = w.get(&task.id).last_seq.max(done.seq);
            self.env.progress.event(&Event::Escalating {
                id: task.id.clone(),
                to: rung.exec.model(),
            });
            let reason = if failed.is_empty() {
                "the task failed"
            } else {
                "checks failed"
            };
            let esc = self.put(
                "orchestrator",
                kind::TIER_ESCALATION,
                Some(from),
                rung.body(&task.id, reason),
            )?;
            w.close_tree(&task.id);
            let mut tw = w.get(&task.id);
            tw.last_seq = esc.seq;
            w.set(&task.id, tw);
            let retry = format!("{instruction}{}", failed_checks_note(&failed));
            let opened = w.in_turn(|| w.bench.open_task(&name, &upstream));
            done = self.work_attempt(w, task, &rung.exec, &retry, task_entry, opened)?;
            if done.ok {
                break;
            }
        }
        Ok(done)
    }

    /// One attempt in an opened worktree: the worker, then [`Run::witness_change`]. The
    /// returned result is ok only when the worker answered and every check passed.
    pub(super) fn work_attempt(
        &self,
        w: &WorkRun,
        task: &Task,
        exec: &Arc<dyn Executor>,
        instruction: &str,
        task_entry: &Entry,
        opened: Result<TaskTree, WorkError>,
    ) -> Result<Done, RunError> {
        let parent = w.get(&task.id).last_seq.max(task_entry.seq);
        let tree = match opened {
            Ok(t) => t,
            Err(e) => {
                // No worktree: witnessed as a failed result, so the ladder (or a person)
                // sees why.
                let output = format!("error: no worktree for this task: {}", work_error_line(&e));
                let r = self.put(
                    &task.agent,
                    kind::RESULT,
                    Some(parent),
                    json!({"id": task.id, "output": output, "ok": false, "model": exec.model(), "error": "work"}),
                )?;
                let mut tw = w.get(&task.id);
                tw.last_seq = r.seq;
                w.set(&task.id, tw);
                return Ok(Done {
                    output,
                    ok: false,
                    seq: r.seq,
                });
            }
        };
        let mut tw = w.get(&task.id);
        tw.tree = Some(tree.clone());
        w.set(&task.id, tw);
        // The prompt names no host path, only a replay of a run recorded when it did.
        let named = tree.named.then_some(tree.path.as_path());
        let prompt = format!("{instruction}{}", work_note(named));
        let dir: PathBuf = tree.path.clone();
        let allowed = super::edit::allowed(w, task);
        let done = command::in_jail(w.jail_for(&tree), || {
            command::in_allowed(allowed, || match self.edit_hands(w, task, exec, &tree) {
                Some(hands) => command::in_workdir(&dir, || {
                    let at = (parent, named);
                    self.edit_attempt(w, task, exec, &prompt, at, hands.as_ref())
                }),
                None => command::in_workdir(&dir, || {
                    self.watching_agent(&task.id, || self.attempt(task, exec, &prompt, parent))
                }),
            })
        })?;
        if !done.ok {
            let mut tw = w.get(&task.id);
            tw.last_seq = done.seq;
            w.set(&task.id, tw);
            return Ok(done);
        }
        let passed = self.witness_change(
            w,
            task,
            exec.model(),
            &tree,
            task_entry,
            (done.seq, &done.output),
        )?;
        Ok(Done { ok: passed, ..done })
    }

    /// Runs `f` with the tool calls of the agent CLI it starts (a preset worker's) shown on
    /// the run's progress as `task`'s, as the agent makes them: a thread of this call's passes
    /// each on while the worker runs, and ends when `f` has returned.
    fn watching_agent<T>(&self, task: &str, f: impl FnOnce() -> T) -> T {
        let (sink, calls) = std::sync::mpsc::channel::<command::LiveCall>();
        let progress = self.env.progress;
        std::thread::scope(|s| {
            s.spawn(move || {
                for c in calls {
                    progress.event(&Event::ToolCall {
                        id: task.to_string(),
                        verb: c.verb,
                        target: c.target,
                        ok: c.ok,
                    });
                }
            });
            command::in_live(sink, f)
        })
    }

    /// Commits what the worker changed in `tree` (its subject from the worker's `report`),
    /// witnesses `change` (under `result_seq`), keeps the commit under refs/forum/work, then
    /// runs and witnesses each check. Returns whether the change is there and every check
    /// passed.
    pub(super) fn witness_change(
        &self,
        w: &WorkRun,
        task: &Task,
        model: String,
        tree: &TaskTree,
        task_entry: &Entry,
        result: (u64, &str),
    ) -> Result<bool, RunError> {
        self.witness_made(w, task, model, Made::Tree(tree), task_entry, result)
    }

    /// [`Run::witness_change`] of a change read from `made`: a worktree here, or a worker's
    /// commit elsewhere whose checks are the worker's claims.
    pub(super) fn witness_made(
        &self,
        w: &WorkRun,
        task: &Task,
        model: String,
        made: Made<'_>,
        task_entry: &Entry,
        (result_seq, report): (u64, &str),
    ) -> Result<bool, RunError> {
        let tree = made.tree();
        let author = Author {
            lane: task.agent.clone(),
            model,
        };
        let tie = Tie {
            ledger: w.ledger.clone(),
            run_seq: w.run_seq,
            task_seq: task_entry.seq,
            task_hash: task_entry.entry_hash.clone(),
        };
        let report = commit_message::report_subject(report);
        let subject = commit_message::subject(report.as_deref(), &task.instruction, &[]);
        let head = self.redact_text(&commit_message::head(&subject, &task.id, &task.agent, None));
        let screen = |text: &str| self.screen_change(text);
        let rules = CommitRules {
            diff_cap: w.diff_cap,
            limits: w.limits,
            screen: &screen,
        };
        let committed = w.in_shared_turn(|| match made {
            Made::Tree(tree) => w.bench.commit(tree, &author, &tie, &head, &rules),
            Made::Claimed { tree, commit, .. } | Made::Brought { tree, commit } => w
                .bench
                .commit_made(tree, commit, &author, &tie, &head, &rules),
        });
        let change = match committed {
            // The worktree went by a name safe for refs; the record names the task.
            Ok(c) => Change {
                task: task.id.clone(),
                ..c
            },
            Err(e) => {
                self.witness_no_change(w, task, tree, result_seq, &e)?;
                return Ok(false);
            }
        };
        // An attempt of several (`--attempts`) says which, and is kept as that attempt.
        let attempt = w.get(&task.id).attempt;
        let mut body = change.payload();
        if let Some(n) = attempt {
            body["attempt"] = json!(n);
        }
        let c = self.put("dispatch", kind::CHANGE, Some(result_seq), body)?;
        self.say_changed(&change);
        if let Some(commit) = &change.commit {
            let place = attempt.map_or(Keep::Work, Keep::Attempt);
            w.bench
                .keep(&self.ref_name(&task.id), commit, place)
                .map_err(|e| RunError::Work(work_error_line(&e)))?;
        }
        let mut tw = w.get(&task.id);
        tw.change = Some(change);
        tw.report = report;
        tw.change_seq = Some(c.seq);
        tw.last_seq = c.seq;
        tw.checks.clear();
        tw.failed.clear();
        tw.ship = None;
        tw.integrated = None;
        w.set(&task.id, tw);
        self.check_change(w, task, made, c.seq)
    }

    /// Runs and witnesses each check of `task`'s change (witnessed at `parent`) in its
    /// worktree, or witnesses what its worker claims of each; whether every one passed.
    fn check_change(
        &self,
        w: &WorkRun,
        task: &Task,
        made: Made<'_>,
        parent: u64,
    ) -> Result<bool, RunError> {
        let mut commands = w.checks.clone();
        commands.extend(criteria_commands(task));
        let claimed = match made {
            Made::Claimed { result, .. } => claimed_runs(&commands, &result.checks),
            Made::Tree(_) | Made::Brought { .. } => Vec::new(),
        };
        let mut all_ok = true;
        for (i, cmd) in commands.into_iter().enumerate() {
            let (ok, seq, tail) = match (made, claimed.get(i)) {
                (Made::Claimed { result, .. }, Some(run)) => {
                    self.witness_claimed_check(w, &task.id, run, &result.worker, parent)?
                }
                _ => self.run_check(w, made.tree(), &task.id, &cmd, parent)?,
            };
            all_ok &= ok;
            let mut tw = w.get(&task.id);
            if !ok {
                tw.failed.push((cmd.clone(), tail));
            }
            tw.checks.push((cmd, ok));
            tw.last_seq = seq;
            w.set(&task.id, tw);
        }
        Ok(all_ok)
    }

    /// Tells the person watching which files a task's change touched (none: it changed
    /// nothing).
    fn say_changed(&self, change: &Change) {
        self.env.progress.event(&Event::Changed {
            id: change.task.clone(),
            files: change
                .files
                .iter()
                .map(|f| (f.path.clone(), f.added, f.removed))
                .collect(),
        });
    }

    /// Witnesses a `change` with no commit (the workbench refused it, found secrets in it, or
    /// failed) and forgets the task's earlier change and checks.
    fn witness_no_change(
        &self,
        w: &WorkRun,
        task: &Task,
        tree: &TaskTree,
        result_seq: u64,
        e: &WorkError,
    ) -> Result<(), RunError> {
        let mut body = json!({"task": task.id, "base": tree.start, "commit": null, "error": work_error_line(e)});
        match e {
            WorkError::Refused(_) => body["refused"] = json!(true),
            WorkError::Secrets { found, tree } => {
                body["secrets"] = found.iter().map(|f| f.payload()).collect();
                // The tree it was staged as, for a strict replay to screen again.
                if let (Some(t), true) = (tree, w.keeps_refused_tree) {
                    body["tree"] = json!(t);
                }
            }
            _ => {}
        }
        if let Some(n) = w.get(&task.id).attempt {
            body["attempt"] = json!(n);
        }
        let c = self.put("dispatch", kind::CHANGE, Some(result_seq), body)?;
        let mut tw = w.get(&task.id);
        tw.change = None;
        tw.change_seq = Some(c.seq);
        tw.last_seq = c.seq;
        tw.checks.clear();
        w.set(&task.id, tw);
        Ok(())
    }

    /// Whether task `t`'s committed change adds nothing to the run branch (an earlier task's
    /// change made the same edit). When so, it is witnessed as a `change` with no commit
    /// (`adds_nothing` names the commit, `reason` says why), so the task is recorded as having
    /// changed nothing, nothing of it merges, and its kept ref is dropped.
    pub(super) fn adds_nothing(&self, w: &WorkRun, t: &Task) -> Result<bool, RunError> {
        let tw = w.get(&t.id);
        let (Some(c), Some(commit)) = (tw.change.clone(), tw.commit().map(str::to_string)) else {
            return Ok(false);
        };
        let none = w
            .in_shared_turn(|| w.bench.adds_nothing(&commit))
            .map_err(|e| RunError::Work(work_error_line(&e)))?;
        if !none {
            return Ok(false);
        }
        let body = json!({
            "task": t.id, "base": c.base, "commit": null, "tree": c.tree, "files": [],
            "diff": "", "truncated": false, "adds_nothing": commit,
            "reason": "what this change makes is on the run branch already",
        });
        let e = self.put("dispatch", kind::CHANGE, Some(tw.last_seq), body)?;
        let _ = w.bench.unkeep(&self.ref_name(&t.id), &commit, Keep::Work);
        let mut tw = w.get(&t.id);
        tw.change = Some(Change {
            commit: None,
            files: Vec::new(),
            diff: String::new(),
            truncated: false,
            ..c
        });
        tw.change_seq = Some(e.seq);
        tw.last_seq = e.seq;
        w.set(&t.id, tw);
        Ok(true)
    }

    /// Runs one check command in `tree` and witnesses it as `check` for `task` under
    /// `parent`. Returns whether it passed, the entry's seq and the output's tail.
    pub(super) fn run_check(
        &self,
        w: &WorkRun,
        tree: &TaskTree,
        task: &str,
        cmd: &str,
        parent: u64,
    ) -> Result<(bool, u64, String), RunError> {
        let checked = command::in_jail(w.jail_for(tree), || {
            w.bench.check(tree, cmd, w.deadline, w.output_cap)
        });
        let ran = match checked {
            Ok(r) => r,
            Err(e) => CheckRun {
                command: cmd.to_string(),
                exit: None,
                ok: false,
                seconds: 0.0,
                tail: work_error_line(&e),
            },
        };
        let mut body = ran.payload(task);
        if let Some(n) = w.get(task).attempt {
            body["attempt"] = json!(n);
        }
        let e = self.put("checker", kind::CHECK, Some(parent), body)?;
        self.env.progress.event(&Event::Checked {
            id: task.to_string(),
            command: cmd.to_string(),
            ok: ran.ok,
            seconds: ran.seconds,
        });
        Ok((ran.ok, e.seq, ran.tail))
    }
}

impl Run<'_, '_> {
    /// The finds in `text` a change may not add: every find of the run's scanner but those the
    /// policy's `allow` or `allow_fingerprints` accepts (a change is refused whatever the
    /// mode), each as its offset, rule and fingerprint.
    pub(super) fn screen_change(&self, text: &str) -> Vec<(usize, String, String)> {
        let guard = &self.opts.secrets;
        guard
            .scanner
            .scan_text(text)
            .into_iter()
            .filter(|f| guard.policy.counts(f))
            .map(|f| {
                (
                    f.span().start,
                    f.rule().to_string(),
                    f.fingerprint().to_string(),
                )
            })
            .collect()
    }

    /// `text` with every secret the run's scanner finds replaced by its marker, for what
    /// becomes a commit message.
    pub(super) fn redact_text(&self, text: &str) -> String {
        let found = self.opts.secrets.scanner.scan_text(text);
        crate::secrets::redact_text(text, &found).0
    }

    /// The name a task goes by in ref names and directory names: its id, or, when the scanner
    /// finds a secret in the id, `task-` and 16 hex digits of its SHA-256 (a ref name travels
    /// with `git push` and is never redacted).
    pub(super) fn ref_name(&self, task: &str) -> String {
        if self.opts.secrets.scanner.scan_text(task).is_empty() {
            task.to_string()
        } else {
            let hash = crate::ledger::hash::sha256_hex(task.as_bytes());
            format!("task-{}", &hash[..16])
        }
    }
}

/// What each task of a run has in the repository, read back from the run's entries (`seqs`,
/// in order): its latest change, that change's checks, the gate's decision and whether it was
/// integrated (a `merge` with no conflict after it). Of a task run several times, the change
/// is the attempt its `attempt_choice` chose.
pub(super) fn restore(entries: &[(Entry, JsonValue)]) -> BTreeMap<String, TaskWork> {
    let mut out: BTreeMap<String, TaskWork> = BTreeMap::new();
    // Each attempt's change and checks, by task and attempt.
    let mut attempts: BTreeMap<(String, u64), TaskWork> = BTreeMap::new();
    for (e, p) in entries {
        let Some(task) = p.get("task").and_then(JsonValue::as_str) else {
            continue;
        };
        let tw = out.entry(task.to_string()).or_default();
        if e.kind == kind::ATTEMPT_CHOICE {
            if let Some(chosen) = p["chosen"]
                .as_u64()
                .and_then(|n| attempts.get(&(task.to_string(), n)))
            {
                *tw = chosen.clone();
            }
            tw.last_seq = e.seq;
            continue;
        }
        let attempt = p.get("attempt").and_then(JsonValue::as_u64);
        match e.kind.as_str() {
            kind::CHANGE => {
                tw.change = Some(change_of(task, p));
                tw.change_seq = Some(e.seq);
                tw.unmade = p["commit"].is_null() && !p["error"].is_null();
                tw.checks.clear();
                tw.failed.clear();
                tw.ship = None;
                tw.integrated = None;
            }
            kind::CHECK => {
                let ok = p["ok"] == true;
                let command = p["command"].as_str().unwrap_or("").to_string();
                if !ok {
                    tw.failed
                        .push((command.clone(), p["output"].as_str().unwrap_or("").into()));
                }
                tw.checks.push((command, ok));
            }
            kind::SHIP => {
                let d = p["decision"].as_str().unwrap_or("undetermined").to_string();
                if d == "merge" {
                    tw.integrated = Some(String::new());
                }
                tw.ship = Some(d);
            }
            kind::CONFLICT => {
                tw.integrated = None;
                tw.reran = true;
            }
            _ => continue,
        }
        tw.last_seq = e.seq;
        if let (Some(n), kind::CHANGE | kind::CHECK) = (attempt, e.kind.as_str()) {
            attempts.insert((task.to_string(), n), tw.clone());
        }
    }
    out
}

/// A `change` entry's body read back.
pub(super) fn change_of(task: &str, p: &JsonValue) -> Change {
    let s = |k: &str| {
        p.get(k)
            .and_then(JsonValue::as_str)
            .unwrap_or("")
            .to_string()
    };
    let files = p
        .get("files")
        .and_then(JsonValue::as_array)
        .map(|a| {
            a.iter()
                .map(|f| {
                    let path: String = f["path"].as_str().unwrap_or("").into();
                    let blob = p["blobs"][&path].as_str().map(str::to_string);
                    super::workbench::FileChange {
                        status: f["status"].as_str().unwrap_or("").into(),
                        added: f["added"].as_u64().unwrap_or(0),
                        removed: f["removed"].as_u64().unwrap_or(0),
                        blob,
                        path,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    Change {
        task: task.to_string(),
        base: s("base"),
        commit: p
            .get("commit")
            .and_then(JsonValue::as_str)
            .map(str::to_string),
        tree: s("tree"),
        files,
        diff: s("diff"),
        truncated: p["truncated"] == true,
        links_out: p
            .get("links_out")
            .and_then(JsonValue::as_array)
            .map(|a| {
                a.iter()
                    .map(|l| LinkOut {
                        path: l["path"].as_str().unwrap_or("").into(),
                        target: l["target"].as_str().unwrap_or("").into(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Whether a resumed run keeps a task as it is: a change that passed its checks and its gate
/// and was integrated (its commit still there), a change the gate blocked (terminal: never run
/// again), or a worker that changed nothing and passed its checks.
pub(super) fn keeps(tw: &TaskWork, bench: &dyn Workbench) -> Option<bool> {
    let change = tw.change.as_ref()?;
    match (&change.commit, tw.ship.as_deref()) {
        (Some(_), Some("block")) => Some(false),
        (Some(c), Some("merge")) if tw.integrated.is_some() && tw.checks_ok() => {
            (bench.has_commit(c) && bench.on_branch(c)).then_some(true)
        }
        // No commit because the change was refused or failed: not a task that changed
        // nothing, so it runs again.
        (None, _) if tw.checks_ok() && !tw.unmade => Some(true),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::work_state::data_upstreams;
    use super::*;

    #[test]
    fn run_criteria_become_commands_and_data_edges_order_upstreams() {
        let mut t = Task::new("T3", "backend", "x");
        t.done_when = vec![
            "run: python3 -m unittest -q".into(),
            "the docs say so".into(),
            "run:   ".into(),
        ];
        assert_eq!(criteria_commands(&t), ["python3 -m unittest -q"]);
        t.depends_on = vec!["T2".into(), "T1".into()];
        t.order_deps.insert("T2".into());
        let plan = vec![
            Task::new("T1", "backend", "a"),
            Task::new("T2", "backend", "b"),
            t.clone(),
        ];
        assert_eq!(data_upstreams(&t, &plan), ["T1"]);
    }
}
