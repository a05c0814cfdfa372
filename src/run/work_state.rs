//! What a run that changes the repository (`--work`) holds: its options, the workbench it
//! opened, and each task's change, checks and place on the run branch. The tasks' side (commit,
//! check, escalate) is `changes.rs`; the pre-ship gate and the run branch are `ship.rs`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde_json::{Value, json};

use crate::exec::config::Verification;
use crate::exec::sandbox::Record;
use crate::exec::sandbox::probe::{Jail, Sandboxing};
use crate::ledger::Entry;
use crate::plan::Task;

use super::lock;
use super::send_order::SendOrder;
use super::workbench::{Change, ChangeLimits, TaskTree, WorkError, Workbench};

/// Opens the workbench of the run whose request is at the given seq: at HEAD for a new run,
/// at its recorded base commit (the second argument) for a resumed one.
pub(crate) type OpenWork =
    Arc<dyn Fn(u64, Option<&str>) -> Result<Arc<dyn Workbench>, WorkError> + Send + Sync>;

/// The most bytes of a change's diff a `change` entry holds (the commit stays the full record).
pub(crate) const DEFAULT_DIFF_CAP: usize = 64 * 1024;
/// The most bytes of a check's output a `check` entry holds (its tail).
pub(crate) const DEFAULT_CHECK_OUTPUT_CAP: usize = 8 * 1024;
/// How long one check command may run before it is killed.
pub(crate) const DEFAULT_CHECK_DEADLINE: Duration = Duration::from_secs(300);

/// How a run changes the repository.
#[derive(Clone)]
pub(crate) struct WorkOptions {
    /// Whether a new run works in the repository (`--work`); a resumed run follows its record.
    pub(crate) enabled: bool,
    /// Opens the run's workbench (in the surface: the git one over the repository).
    pub(crate) open: OpenWork,
    /// The ledger's name (the `Forum-Ledger` trailer).
    pub(crate) ledger: String,
    /// Check commands every change must pass (`[work] checks`, then `--check`).
    pub(crate) checks: Vec<String>,
    /// How long each check may run.
    pub(crate) check_deadline: Duration,
    /// The bytes of check output kept.
    pub(crate) output_cap: usize,
    /// The bytes of diff a `change` entry holds.
    pub(crate) diff_cap: usize,
    /// Commands the built-in editing worker may run besides the checks (`--allow-cmd`).
    pub(crate) allow_cmds: Vec<String>,
    /// Tool calls each task of the built-in editing worker may make (`--max-tool-calls`).
    pub(crate) max_tool_calls: u32,
    /// Independent attempts at each task (`--attempts`; 1: the task runs once).
    pub(crate) attempts: u32,
    /// The slot each attempt runs on (`[work] attempts = ["SLOT", ...]`); empty: every attempt
    /// on the task's own worker.
    pub(crate) attempt_slots: Vec<crate::exec::config::Slot>,
    /// Whether workers and checks run confined (`--sandbox`, `--no-sandbox`, `[work] sandbox`).
    pub(crate) sandbox: Arc<Sandboxing>,
    /// The run's verification tier (its heaviest seat's; `None`: standard, every change gated).
    pub(crate) verification: Option<Verification>,
    /// What a change may hold (`[work]` limits).
    pub(crate) limits: ChangeLimits,
    /// Where tasks go instead of running in this process (`--dispatch`; `None`: here).
    pub(crate) dispatch: Option<Arc<dyn super::Dispatch>>,
    /// A strict replay of a run recorded before integrations and the pre-ship gate's raw
    /// replies were witnessed ([`WITNESSES`] missing from its request): neither is written,
    /// as that run wrote neither. Always false for a live run.
    pub(crate) legacy: bool,
    /// A strict replay (or a resume) of a run recorded before some of what a run witnesses now
    /// was kept ([`Unkept`]): it keeps none of it either, as that run kept none. Nothing for a
    /// live run.
    pub(crate) unkept: Unkept,
}

/// What a run recorded by an older version did not keep, which a strict replay or a resume of
/// it keeps none of either, as its request's `work.witnesses` says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Unkept {
    /// The pre-ship gate's raw reply over attempts ([`ATTEMPT_REPLY`] missing): no
    /// `attempt_choice` keeps it.
    pub(crate) attempt_reply: bool,
    /// The tree a change refused for its secrets was staged as ([`REFUSED_TREE`] missing): no
    /// refused `change` names it.
    pub(crate) refused_tree: bool,
}

impl Unkept {
    /// What the request's `work` record `work` says its run did not keep.
    pub(crate) fn of(work: &Value) -> Unkept {
        Unkept {
            attempt_reply: !keeps_attempt_reply(work),
            refused_tree: !lists(work, REFUSED_TREE),
        }
    }
}

/// What a `--work` run witnesses beyond its decisions, as its request's `work.witnesses`
/// lists it: each integration's tree (`integrated` entries) and the pre-ship gate's raw reply
/// (a `ship` entry's `reply`). A strict replay merges again and parses again from them.
pub(crate) const WITNESSES: [&str; 2] = ["integration", "gate_reply"];

/// What a `--work` run witnesses since the pre-ship gate's raw reply over a task's attempts
/// was kept (an `attempt_choice` entry's `gate.reply`), listed after [`WITNESSES`]: a strict
/// replay parses the choice again from it.
pub(crate) const ATTEMPT_REPLY: &str = "attempt_reply";

/// What a `--work` run witnesses since a change refused for its secrets keeps the tree it was
/// staged as (a refused `change` entry's `tree`), listed after [`ATTEMPT_REPLY`]: a strict
/// replay screens that tree again.
pub(crate) const REFUSED_TREE: &str = "refused_tree";

/// Whether a request's `work` record lists [`ATTEMPT_REPLY`].
pub(crate) fn keeps_attempt_reply(work: &Value) -> bool {
    lists(work, ATTEMPT_REPLY)
}

/// Whether a request's `work` record lists the witness `what`.
fn lists(work: &Value, what: &str) -> bool {
    work["witnesses"]
        .as_array()
        .is_some_and(|l| l.iter().any(|x| x == what))
}

/// Whether a request's `work` record lists every one of [`WITNESSES`]: a run recorded before
/// them lists none, and is resumed and replayed writing neither.
pub(crate) fn witnessed(work: &Value) -> bool {
    WITNESSES.iter().all(|w| lists(work, w))
}

impl std::fmt::Debug for WorkOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkOptions")
            .field("enabled", &self.enabled)
            .field("ledger", &self.ledger)
            .field("checks", &self.checks)
            .field("check_deadline", &self.check_deadline)
            .field("sandbox", &self.sandbox.mode())
            .finish()
    }
}

/// The open workbench of a run and what each task has done in it.
pub(super) struct WorkRun {
    pub(super) bench: Arc<dyn Workbench>,
    pub(super) ledger: String,
    pub(super) run_seq: u64,
    pub(super) checks: Vec<String>,
    pub(super) deadline: Duration,
    pub(super) output_cap: usize,
    pub(super) diff_cap: usize,
    pub(super) allow_cmds: Vec<String>,
    pub(super) max_tool_calls: u32,
    pub(super) attempts: u32,
    pub(super) attempt_slots: Vec<crate::exec::config::Slot>,
    pub(super) tasks: Mutex<BTreeMap<String, TaskWork>>,
    /// The plan's tasks in order (for data-edge upstreams), set when the run is driven.
    pub(super) plan: Mutex<Vec<Task>>,
    /// Held around the workbench's worktree steps: git itself races when two `git worktree
    /// add` run at once in one repository ("failed to read worktrees/T1/commondir"), so tasks
    /// of a wave take turns for these quick steps while their workers and checks still run in
    /// parallel. A step that only writes objects, its own task's worktree and index, or refs
    /// of its own (the fetch of a dispatched task's result, a task's start, the commit of its
    /// change, the look at whether it adds anything) takes it shared
    /// ([`WorkRun::in_shared_turn`]): several go at once, none while a worktree is added or
    /// removed.
    pub(super) git_turn: RwLock<()>,
    /// The jail workers and checks run in (`None`: unconfined).
    pub(super) jail: Option<Arc<Jail>>,
    /// What the record says about it.
    pub(super) sandbox: Record,
    /// The run's verification tier, when one was resolved.
    pub(super) verification: Option<Verification>,
    /// What a change may hold.
    pub(super) limits: ChangeLimits,
    /// See [`WorkOptions::legacy`].
    pub(super) legacy: bool,
    /// Whether an `attempt_choice` keeps the gate's raw reply (see [`Unkept`]).
    pub(super) keeps_attempt_reply: bool,
    /// Whether a change refused for its secrets keeps the tree it was staged as (see
    /// [`Unkept`]).
    pub(super) keeps_refused_tree: bool,
    /// The order the tasks of the wave being shipped early go out in (`None`: any order).
    pub(super) sending: Mutex<Option<Arc<SendOrder>>>,
}

/// What one task has in the repository so far.
#[derive(Debug, Clone, Default)]
pub(super) struct TaskWork {
    /// Its open worktree, until it is shipped (or blocked).
    pub(super) tree: Option<TaskTree>,
    /// Its latest change.
    pub(super) change: Option<Change>,
    /// The seq of that change's `change` entry.
    pub(super) change_seq: Option<u64>,
    /// Its checks, in order: (command, passed).
    pub(super) checks: Vec<(String, bool)>,
    /// The failing ones: (command, output tail), for the next rung's prompt.
    pub(super) failed: Vec<(String, String)>,
    /// The last entry of the task's chain (what the next step hangs under).
    pub(super) last_seq: u64,
    /// The pre-ship gate's decision on the latest change.
    pub(super) ship: Option<String>,
    /// The first line of the worker's report on that change, made safe for a commit message
    /// (`commit_message.rs`).
    pub(super) report: Option<String>,
    /// The run branch's tip once the change is integrated.
    pub(super) integrated: Option<String>,
    /// Whether it already ran once more after a conflict.
    pub(super) reran: bool,
    /// Whether its latest change, as the record reads, made no commit because it was refused
    /// or failed (a `change` with no commit that names an error): a resume runs the task
    /// again rather than keep it as having changed nothing.
    pub(super) unmade: bool,
    /// The task's `task` entry (what its commits are tied to).
    pub(super) task_entry: Option<Entry>,
    /// The attempt running now, when the task runs several (`--attempts`).
    pub(super) attempt: Option<u32>,
    /// Each attempt's outcome, in order, once they ran.
    pub(super) attempts: Vec<AttemptWork>,
}

/// What one attempt left: its result, change and checks, and what it cost.
#[derive(Debug, Clone, Default)]
pub(crate) struct AttemptWork {
    /// Its number, from 1.
    pub(super) n: u32,
    /// The seq of its `result` entry.
    pub(super) result_seq: u64,
    /// The worker's answer.
    pub(super) output: String,
    /// Its change, when the worker answered and the change was committed.
    pub(super) change: Option<Change>,
    /// The seq of its `change` entry.
    pub(super) change_seq: Option<u64>,
    /// Its checks: (command, passed).
    pub(super) checks: Vec<(String, bool)>,
    /// The failing ones: (command, output tail).
    pub(super) failed: Vec<(String, String)>,
    /// The last entry it wrote.
    pub(super) last_seq: u64,
    /// Tokens its worker's calls counted.
    pub(super) tokens: u64,
    /// Their cost in dollars, when priced.
    pub(super) cost_usd: Option<f64>,
}

impl AttemptWork {
    /// Lines added plus lines removed.
    pub(super) fn diff_lines(&self) -> u64 {
        self.change
            .as_ref()
            .map_or(0, |c| c.files.iter().map(|f| f.added + f.removed).sum())
    }

    /// Whether it may be chosen: a committed change, every check passed, no link that leads
    /// out of the worktree.
    pub(super) fn passed(&self) -> bool {
        self.change
            .as_ref()
            .is_some_and(|c| c.commit.is_some() && c.links_out.is_empty())
            && self.checks.iter().all(|(_, ok)| *ok)
    }
}

impl TaskWork {
    /// A change with a commit whose every check passed.
    pub(super) fn shippable(&self) -> bool {
        self.change.as_ref().is_some_and(|c| c.commit.is_some()) && self.checks_ok()
    }

    pub(super) fn checks_ok(&self) -> bool {
        self.checks.iter().all(|(_, ok)| *ok)
    }

    pub(super) fn commit(&self) -> Option<&str> {
        self.change.as_ref().and_then(|c| c.commit.as_deref())
    }
}

/// The task's `done_when` criteria written `run: CMD`, as commands.
pub(super) fn criteria_commands(task: &Task) -> Vec<String> {
    task.done_when
        .iter()
        .filter_map(|c| c.trim().strip_prefix("run:"))
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .collect()
}

/// The data-edge upstreams of `task`, each once, in plan order.
pub(super) fn data_upstreams<'p>(task: &Task, plan: &'p [Task]) -> Vec<&'p str> {
    plan.iter()
        .filter(|t| task.depends_on.contains(&t.id) && !task.order_deps.contains(&t.id))
        .map(|t| t.id.as_str())
        .collect()
}

impl WorkRun {
    /// The guard of `task`'s turn to go out when the wave has an order (see `send_order`).
    pub(super) fn send_turn(&self, task: &str) -> Option<super::send_order::Sent> {
        lock(&self.sending).as_ref().map(|o| o.guard(task))
    }

    /// Keeps `entry` as the `task` entry of the dispatched task `task` and returns the guard
    /// of its turn to go out: a task that ends before it is sent lets the ones after it go.
    pub(super) fn dispatching(&self, task: &str, entry: &Entry) -> Option<super::send_order::Sent> {
        let mut tw = self.get(task);
        tw.task_entry = Some(entry.clone());
        self.set(task, tw);
        self.send_turn(task)
    }

    /// The change commits a task builds on: its data-edge upstreams' integrated changes.
    pub(super) fn upstream_commits(&self, task: &Task, plan: &[Task]) -> Vec<String> {
        let tasks = lock(&self.tasks);
        data_upstreams(task, plan)
            .into_iter()
            .filter_map(|id| tasks.get(id))
            .filter(|w| w.integrated.is_some())
            .filter_map(|w| w.commit().map(str::to_string))
            .collect()
    }

    /// Every change made so far, in plan order: `[{task, commit, files, diff, shipped}]`, for a
    /// gate's approver.
    pub(super) fn changes_so_far(&self) -> Value {
        let plan = lock(&self.plan).clone();
        let tasks = lock(&self.tasks);
        let items: Vec<Value> = plan
            .iter()
            .filter_map(|t| tasks.get(&t.id).map(|w| (t, w)))
            .filter_map(|(t, w)| {
                let c = w.change.as_ref()?;
                let p = c.payload();
                Some(json!({
                    "task": t.id,
                    "commit": c.commit,
                    "files": p["files"],
                    "diff": c.diff,
                    "ship": w.ship,
                    "integrated": w.integrated.is_some(),
                }))
            })
            .collect();
        Value::Array(items)
    }

    /// The jail a command in `tree` runs in: the run's, showing that worktree and what the
    /// workbench says a sandbox shows of the repository there (`None`: unconfined).
    pub(super) fn jail_for(&self, tree: &TaskTree) -> Option<Arc<Jail>> {
        self.jail
            .as_ref()
            .map(|j| Arc::new(j.for_tree(&tree.path, &tree.shows)))
    }

    /// Runs one quick workbench step in this run's turn (see [`WorkRun::git_turn`]).
    pub(super) fn in_turn<T>(&self, f: impl FnOnce() -> T) -> T {
        let _turn = self.git_turn.write().unwrap_or_else(|p| p.into_inner());
        f()
    }

    /// Runs a step that only brings objects and a ref of its own into the repository (a
    /// fetch) in this run's turn, shared: several such steps go at once, but none while a
    /// step of [`WorkRun::in_turn`] runs (git's check after a fetch reads every worktree's
    /// HEAD, and a worktree half added or removed made it fail).
    pub(super) fn in_shared_turn<T>(&self, f: impl FnOnce() -> T) -> T {
        let _turn = self.git_turn.read().unwrap_or_else(|p| p.into_inner());
        f()
    }

    pub(super) fn get(&self, task: &str) -> TaskWork {
        lock(&self.tasks).get(task).cloned().unwrap_or_default()
    }

    pub(super) fn set(&self, task: &str, w: TaskWork) {
        lock(&self.tasks).insert(task.to_string(), w);
    }

    /// Closes the worktrees of `tasks` that are open, together (see
    /// [`Workbench::close_all`](super::Workbench::close_all)).
    pub(super) fn close_trees(&self, tasks: &[String]) {
        let trees: Vec<TaskTree> = {
            let mut all = lock(&self.tasks);
            tasks
                .iter()
                .filter_map(|t| all.get_mut(t).and_then(|w| w.tree.take()))
                .collect()
        };
        if !trees.is_empty() {
            let _turn = self.git_turn.write().unwrap_or_else(|p| p.into_inner());
            let _ = self.bench.close_all(&trees);
        }
    }

    /// Closes a task's worktree, if it has one open.
    pub(super) fn close_tree(&self, task: &str) {
        let tree = lock(&self.tasks).get_mut(task).and_then(|w| w.tree.take());
        if let Some(t) = tree {
            let _turn = self.git_turn.write().unwrap_or_else(|p| p.into_inner());
            let _ = self.bench.close(&t);
        }
    }
}

/// The request entry's `work` record: base commit and branch, the dirty paths (reported, not
/// part of the base) and the checks.
pub(super) fn work_record(w: &WorkRun) -> Value {
    let base = w.bench.base();
    let mut rec = json!({
        "base": base.commit,
        "branch": base.branch,
        "dirty": base.dirty,
        "checks": w.checks,
        "run_branch": format!("forum/run-{}", w.run_seq),
        "sandbox": w.sandbox.payload(),
        "limits": w.limits.payload(),
    });
    if let Some(v) = &w.verification {
        rec["verification"] = json!(v);
    }
    if !w.legacy {
        let mut witnesses = WITNESSES.to_vec();
        if w.keeps_attempt_reply {
            witnesses.push(ATTEMPT_REPLY);
        }
        if w.keeps_refused_tree {
            witnesses.push(REFUSED_TREE);
        }
        rec["witnesses"] = json!(witnesses);
    }
    rec
}
