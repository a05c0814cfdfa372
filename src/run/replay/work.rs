//! The repository side of a replayed `--work` run: a workbench that answers from the record
//! what the engine asks the repository (each task's change commit as its `change` entry
//! names it, each check's exit code and output) and makes no worktree and moves no ref or
//! branch. A run that recorded its integrations (`work.witnesses` in its request) is merged
//! again: each change the engine integrates is merged onto the tree the replay's run branch
//! has so far, in the repository but writing only to a scratch object directory ([`Merges`]),
//! so a conflict, a change that adds nothing and each merged tree come from the merge, not
//! the record. An older run's integrations (conflicted, added nothing) are answered from its
//! record. The engine decides again, from these answers, which checks failed, which task
//! climbs the ladder, what the pre-ship gate's reply comes to, what merges and in what order,
//! and what the answer says changed.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value as J;

use crate::exec::config::{ChangeLimits, Verification, Verify};
use crate::exec::sandbox::Record;
use crate::exec::sandbox::probe::Sandboxing;
use crate::ledger::kind;
use crate::run::changes::change_of;
use crate::run::lock;
use crate::run::work_state::{
    DEFAULT_CHECK_DEADLINE, DEFAULT_CHECK_OUTPUT_CAP, DEFAULT_DIFF_CAP, WorkOptions,
};
use crate::run::workbench::{
    Author, Base, Change, CheckRun, CommitRules, Keep, LinkOut, SecretFound, TaskTree, Tie,
    WorkError, Workbench,
};

use super::Recorded;

/// What the record says one commit of a worktree gave, and the commit its `change` entry says
/// it was made on.
type Given = (Result<Change, WorkError>, Option<String>);

/// The record's answers to a `--work` run's repository calls, queued per task.
#[derive(Default)]
struct Answers {
    /// Per task: what each commit of its worktree gave, and the commit its `change` entry says
    /// it was made on, oldest first.
    commits: BTreeMap<String, VecDeque<Given>>,
    /// Per task (`run` for the run branch): each check's outcome, oldest first.
    checks: BTreeMap<String, VecDeque<CheckRun>>,
    /// Per task: what each integration of a merged change gave, oldest first.
    integrations: BTreeMap<String, VecDeque<Result<String, WorkError>>>,
    /// Per change commit: what each "does it add nothing" question was answered, oldest
    /// first (false once they run out: the question is asked of every change).
    nothing: BTreeMap<String, VecDeque<bool>>,
    /// Per task: what each opening of its worktree gave, oldest first (a `result` with error
    /// `work` says the opening failed and why; any other result, that it opened).
    opened: BTreeMap<String, VecDeque<Result<(), WorkError>>>,
    /// Calls the record had no answer for.
    unanswered: Vec<String>,
}

/// The prefix of a result whose task no worktree could be opened for (see `run/changes.rs`).
const NO_WORKTREE: &str = "error: no worktree for this task: ";

/// The prefix of a dispatched task's refused change whose worktree failed to open on the
/// writer's side (see `run/remote.rs`).
const WRITER_TREE: &str = "cannot open the task's worktree: ";

/// What the opening of the worktree a `result` came from gave: the failure it records
/// (its message, as the engine wrote it) or that it opened.
fn opening_of(b: &J) -> Result<(), WorkError> {
    if b["error"] != "work" {
        return Ok(());
    }
    let output = b["output"].as_str().unwrap_or_default();
    let message = output.strip_prefix(NO_WORKTREE).unwrap_or(output);
    Err(WorkError::Io(message.to_string()))
}

/// Where a strict replay merges a recorded run's changes again: it reads commits and trees
/// of the repository and writes the trees it merges somewhere of its own, moving no ref
/// (`crate::work::ScratchMerges`).
pub trait Merges: Send + Sync {
    /// The tree of the change commit `commit` and of its first parent: `(parent, tree)`. `Err`
    /// says which is not in the repository.
    fn trees(&self, commit: &str) -> Result<(String, String), String>;
    /// The tree of `commit`. `Err` says it is not in the repository.
    fn tree(&self, commit: &str) -> Result<String, String>;
    /// The tree `theirs` merged onto `ours` with `base` as their merge base (all three trees):
    /// the merged tree, or [`WorkError::Conflict`] with the paths.
    fn merge(&self, base: &str, ours: &str, theirs: &str) -> Result<String, WorkError>;

    /// The parents of the worker's commit `commit` and its `Forum-Attempt` trailer, as the
    /// writer of a dispatched run reads them to check it; `None` when it is not in the
    /// repository.
    fn worker_commit(&self, commit: &str) -> Option<super::brought::WorkerCommit>;

    /// The commit the ref `name` holds in the repository now; `None` when there is no such
    /// ref (a worker's results ref the writer fetched, read to check a recorded claim of what
    /// it held).
    fn ref_target(&self, name: &str) -> Option<String>;

    /// Whether `commit` descends from `from` (or is it); `None` when git cannot tell (either
    /// is not here).
    fn descends(&self, commit: &str, from: &str) -> Option<bool>;

    /// The worker's commit `made` screened as the writer of a dispatched run screens it before
    /// committing it as the task's change (`crate::work::made::screen_made`, the one rule:
    /// sizes, nested repositories, secrets by `rules.screen`, links that leave), on the
    /// difference from the tree of the task's start `start`: the commit's tree, and `Ok` with
    /// the links it adds that leave or `Err` with the refusal. `None` when either commit is
    /// not in the repository.
    fn screened(
        &self,
        start: &str,
        made: &str,
        rules: &CommitRules<'_>,
    ) -> Option<(String, Result<Vec<LinkOut>, WorkError>)>;

    /// The tree the run branch has once the change `commit` is integrated onto a tip whose
    /// tree is `tip`: the change's own tree when it was made on that tree, else the change
    /// merged onto the tip with its first parent as the merge base ([`WorkError::Conflict`]
    /// with the paths). The one rule of an integration: the engine's (`crate::work::GitWork`),
    /// a strict replay's and `git forum reproduce`'s.
    fn integrated_tree(&self, tip: &str, commit: &str) -> Result<String, WorkError> {
        let (parent, theirs) = self.trees(commit).map_err(WorkError::Git)?;
        if parent == tip {
            Ok(theirs)
        } else {
            self.merge(&parent, tip, &theirs)
        }
    }
}

/// The run branch as a replay builds it again, by its trees.
struct Remerged {
    merges: Arc<dyn Merges>,
    /// The tree the next change is merged onto: the base's until a change is integrated.
    tip: String,
    /// Whether a change was integrated (the run branch exists).
    started: bool,
    /// The tree the replay made for each run branch commit it handed back.
    trees: BTreeMap<String, String>,
    /// Per task: the run branch commits its `integrated` entries name, oldest first (the
    /// commit's id holds its date, the world's; its tree is merged again).
    tips: BTreeMap<String, VecDeque<String>>,
}

impl Remerged {
    fn integrate(&mut self, task: &str, commit: &str) -> Result<String, WorkError> {
        let tree = self.merges.integrated_tree(&self.tip, commit)?;
        if tree == self.tip {
            return Err(WorkError::Refused(format!(
                "the change of task {task} adds nothing to the run branch"
            )));
        }
        let tip = self
            .tips
            .get_mut(task)
            .and_then(VecDeque::pop_front)
            .unwrap_or_else(|| format!("(no integration of task {task} in the record)"));
        self.trees.insert(tip.clone(), tree.clone());
        self.tip = tree;
        self.started = true;
        Ok(tip)
    }

    fn adds_nothing(&self, commit: &str) -> Result<bool, WorkError> {
        if !self.started {
            return Ok(false);
        }
        match self.merges.integrated_tree(&self.tip, commit) {
            Ok(tree) => Ok(tree == self.tip),
            Err(WorkError::Conflict { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// The workbench of a replayed run.
pub(super) struct ReplayBench {
    base: Base,
    answers: Mutex<Answers>,
    /// The change commits the whole record integrated (a resume asks which are on the run
    /// branch): its `integrated` entries' in a run that witnessed them.
    branch: BTreeSet<String>,
    /// The editing worker's tool outcomes.
    carried: Arc<Mutex<super::edit::Carried>>,
    /// The run branch merged again, for a run that recorded its integrations.
    remerged: Option<Mutex<Remerged>>,
    /// The tasks whose integration a resume took up from the run branch: in the part being
    /// replayed, the first entry of the task is its `integrated` entry.
    taken_up: BTreeSet<String>,
    /// A dispatched run's dispatcher, answering from the record.
    dispatch: Option<Arc<super::dispatched::ReplayDispatch>>,
    /// The repository a dispatched worker's commit is screened again in.
    merges: Option<Arc<dyn Merges>>,
    /// A dispatched run's tasks: the commit each was published on, oldest first.
    starts: Mutex<BTreeMap<String, VecDeque<String>>>,
    /// What a local task's change gave that the replay answered from the record, one line each.
    from_record: Mutex<Vec<String>>,
    /// Whether the run kept the tree of each change refused for its secrets.
    keeps_refused_tree: bool,
}

/// A check's outcome as its `check` entry keeps it: passed is decided again from the exit.
fn check_of(b: &J) -> CheckRun {
    let exit = b["exit"].as_i64().and_then(|x| i32::try_from(x).ok());
    CheckRun {
        command: b["command"].as_str().unwrap_or_default().to_string(),
        exit,
        ok: exit == Some(0),
        seconds: b["seconds"].as_f64().unwrap_or(0.0),
        tail: b["output"].as_str().unwrap_or_default().to_string(),
    }
}

/// What a commit gave, from its `change` entry. `Err` names a failure the record keeps only as
/// text.
fn commit_of(e: &Recorded, task: &str) -> Result<Result<Change, WorkError>, String> {
    let b = &e.payload;
    match b.get("error").and_then(J::as_str) {
        None => Ok(Ok(change_of(task, b))),
        Some(m) if b["refused"] == true => Ok(Err(WorkError::Refused(m.to_string()))),
        // A change its secrets refused keeps each find (never the secret).
        Some(_) if b["secrets"].as_array().is_some_and(|s| !s.is_empty()) => {
            Ok(Err(WorkError::Secrets {
                found: secrets_of(&b["secrets"]),
                tree: b["tree"].as_str().map(str::to_string),
            }))
        }
        Some(_) => Err(format!(
            "the change at seq {} keeps only the text of a failed commit, not the failure itself",
            e.seq
        )),
    }
}

/// The secrets a refused change's entry keeps (`secrets`: path, line, rule, fingerprint).
fn secrets_of(v: &J) -> Vec<SecretFound> {
    let s = |f: &J, k: &str| f[k].as_str().unwrap_or_default().to_string();
    v.as_array()
        .into_iter()
        .flatten()
        .map(|f| SecretFound {
            path: s(f, "path"),
            line: f["line"].as_u64().unwrap_or(0),
            rule: s(f, "rule"),
            fingerprint: s(f, "fingerprint"),
        })
        .collect()
}

impl Answers {
    fn read(run: &[Recorded]) -> Result<Answers, String> {
        let mut a = Answers::default();
        // Per task: its latest change commit, and whether its last entry was a merge.
        let mut commit: BTreeMap<String, Option<String>> = BTreeMap::new();
        let mut merged: BTreeMap<String, usize> = BTreeMap::new();
        for e in run {
            let b = &e.payload;
            if e.kind == kind::RESULT
                && let Some(id) = b.get("id").and_then(J::as_str)
            {
                let q = a.opened.entry(id.to_string()).or_default();
                q.push_back(opening_of(b));
            }
            let Some(task) = b.get("task").and_then(J::as_str).map(str::to_string) else {
                continue;
            };
            // A dispatched task's worktree that failed to open on the writer's side: its one
            // opening (before its worker's result came) gave what the refused change keeps.
            if let (kind::CHANGE, true, Some(why)) = (
                e.kind.as_str(),
                b["attempt"].is_string() && b["refused"] == true,
                b["error"]
                    .as_str()
                    .and_then(|m| m.strip_prefix(WRITER_TREE)),
            ) && let Some(first) = a.opened.get_mut(&task).and_then(|q| q.front_mut())
            {
                *first = Err(WorkError::Io(why.to_string()));
            }
            // What the integration after a merge gave: the entry right after it says.
            if let Some(i) = merged.remove(&task) {
                let failed = match e.kind.as_str() {
                    kind::CONFLICT => Some(WorkError::Conflict {
                        paths: string_list(&b["paths"]),
                    }),
                    kind::CHANGE if b.get("adds_nothing").is_some() => {
                        Some(WorkError::Refused("it adds nothing".into()))
                    }
                    _ => None,
                };
                if let (Some(f), Some(q)) = (failed, a.integrations.get_mut(&task)) {
                    q[i] = Err(f);
                }
                if let (kind::CHANGE, Some(c)) = (e.kind.as_str(), b["adds_nothing"].as_str()) {
                    // Asked once before the gate (it added something then), once after.
                    a.nothing
                        .entry(c.to_string())
                        .or_default()
                        .extend([false, true]);
                    continue;
                }
            }
            match e.kind.as_str() {
                // A worker's change the dispatcher refused (named by its attempt id) never
                // reached a commit here: the replay's dispatcher answers it (`dispatched`).
                kind::CHANGE if b["attempt"].is_string() => {}
                kind::CHANGE => {
                    if let Some(c) = b["adds_nothing"].as_str() {
                        a.nothing.entry(c.to_string()).or_default().push_back(true);
                        continue;
                    }
                    let given = commit_of(e, &task)?;
                    let c = given.as_ref().ok().and_then(|c| c.commit.clone());
                    commit.insert(task.clone(), c);
                    let base = b["base"].as_str().map(str::to_string);
                    a.commits.entry(task).or_default().push_back((given, base));
                }
                kind::CHECK => a.checks.entry(task).or_default().push_back(check_of(b)),
                kind::SHIP if b["decision"] == "merge" => {
                    if let Some(Some(c)) = commit.get(&task) {
                        let q = a.integrations.entry(task.clone()).or_default();
                        q.push_back(Ok(c.clone()));
                        merged.insert(task, q.len() - 1);
                    }
                }
                _ => {}
            }
        }
        Ok(a)
    }

    fn missing<T>(&mut self, what: String) -> Result<T, WorkError> {
        let line = format!("the record holds no answer for {what}");
        self.unanswered.push(line.clone());
        Err(WorkError::Io(line))
    }
}

fn string_list(v: &J) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().filter_map(J::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

impl ReplayBench {
    fn tree(&self, task: &str) -> TaskTree {
        TaskTree {
            task: task.to_string(),
            path: PathBuf::from(format!("/replay/{task}")),
            start: self.base.commit.clone(),
            shows: Vec::new(),
            named: false,
        }
    }

    /// What the record says the next commit of `tree`'s task gave, and the commit its
    /// `change` entry says it was made on.
    fn recorded_commit(&self, tree: &TaskTree) -> Result<Given, WorkError> {
        let mut a = lock(&self.answers);
        match a.commits.get_mut(&tree.task).and_then(VecDeque::pop_front) {
            Some(given) => Ok(given),
            None => a.missing(format!("a commit of task {}", tree.task)),
        }
    }

    /// The calls the record had no answer for.
    pub(super) fn unanswered(&self) -> Vec<String> {
        let mut out = lock(&self.answers).unanswered.clone();
        out.extend_from_slice(lock(&self.carried).unanswered());
        out.extend(self.dispatch.iter().flat_map(|d| d.unanswered()));
        out
    }

    /// What the replay answered from the record because this repository lacks it, or the
    /// record was made before it kept what the replay would decide it from.
    pub(super) fn answered_from_record(&self) -> Vec<String> {
        let mut out: Vec<String> = lock(&self.from_record).clone();
        out.extend(self.dispatch.iter().flat_map(|d| d.answered_from_record()));
        out
    }
}

impl Workbench for ReplayBench {
    fn base(&self) -> &Base {
        &self.base
    }

    fn open_task(&self, task: &str, _: &[String]) -> Result<TaskTree, WorkError> {
        let opened = lock(&self.answers)
            .opened
            .get_mut(task)
            .and_then(VecDeque::pop_front);
        if let Some(Err(e)) = opened {
            return Err(e);
        }
        let mut tree = self.tree(task);
        // A run recorded when prompts named the worktree: its editing worker's prompt names
        // the path its result records, as that run's did.
        if let Some(path) = lock(&self.carried).worktree(task) {
            tree.path = PathBuf::from(path);
            tree.named = true;
        }
        Ok(tree)
    }

    fn open_branch(&self, task: &str) -> Result<TaskTree, WorkError> {
        Ok(self.tree(task))
    }

    fn task_start(&self, task: &str, _: &[String]) -> Result<String, WorkError> {
        // A dispatched task's start is the commit the record says it went out on (the
        // base with its upstream changes merged in, made at the time of the run).
        let given = lock(&self.starts)
            .get_mut(task)
            .and_then(VecDeque::pop_front);
        Ok(given.unwrap_or_else(|| self.base.commit.clone()))
    }

    /// A local task's change: the record's answer, screened again where the repository holds
    /// what the screens read ([`super::screened`]).
    fn commit(
        &self,
        tree: &TaskTree,
        _: &Author,
        _: &Tie,
        _: &str,
        rules: &CommitRules<'_>,
    ) -> Result<Change, WorkError> {
        let (recorded, base) = self.recorded_commit(tree)?;
        let Some(m) = &self.merges else {
            return recorded;
        };
        let screen = |start: &str, made: &str| m.screened(start, made, rules);
        let kept = (base.as_deref(), self.keeps_refused_tree);
        let (answer, line) = super::screened::local(&screen, &tree.task, recorded, kept);
        lock(&self.from_record).extend(line);
        answer
    }

    /// A dispatched worker's commit: screened again from the commit as the repository holds
    /// it, by the writer's own rule ([`Merges::screened`]); only the commit the writer made of
    /// it (whose id holds its date, the world's) and its diff come from the `change` entry.
    /// Where the commit is not here, the whole answer is the record's.
    fn commit_made(
        &self,
        tree: &TaskTree,
        made: &str,
        _: &Author,
        _: &Tie,
        _: &str,
        rules: &CommitRules<'_>,
    ) -> Result<Change, WorkError> {
        // A result that names no commit goes out as its start: the record answers.
        let screened = match &self.merges {
            Some(m) if made != tree.start => m.screened(&tree.start, made, rules),
            _ => None,
        };
        let recorded = self.recorded_commit(tree).and_then(|(given, _)| given);
        let Some((made_tree, screens)) = screened else {
            return recorded;
        };
        let links_out = screens?;
        Ok(match recorded {
            Ok(c) => Change {
                tree: made_tree,
                links_out,
                ..c
            },
            // Refused in the record, where the screens pass: the change the writer would have
            // committed, named by the worker's commit (the writer's own is not made again).
            Err(_) => Change {
                task: tree.task.clone(),
                base: tree.start.clone(),
                commit: Some(made.to_string()),
                tree: made_tree,
                files: Vec::new(),
                diff: String::new(),
                truncated: false,
                links_out,
            },
        })
    }

    fn check(
        &self,
        tree: &TaskTree,
        command: &str,
        _: Duration,
        _: usize,
    ) -> Result<CheckRun, WorkError> {
        let mut a = lock(&self.answers);
        let next = a
            .checks
            .get_mut(&tree.task)
            .filter(|q| q.front().is_some_and(|c| c.command == command))
            .and_then(VecDeque::pop_front);
        match next {
            Some(c) => Ok(c),
            None => a.missing(format!("the check `{command}` of {}", tree.task)),
        }
    }

    fn keep(&self, _: &str, _: &str, _: Keep) -> Result<(), WorkError> {
        Ok(())
    }

    fn integrate(&self, task: &str, commit: &str) -> Result<String, WorkError> {
        if let Some(r) = &self.remerged {
            return lock(r).integrate(task, commit);
        }
        let mut a = lock(&self.answers);
        match a.integrations.get_mut(task).and_then(VecDeque::pop_front) {
            Some(given) => given,
            None => a.missing(format!("the integration of {commit} ({task})")),
        }
    }

    fn tip_tree(&self, tip: &str) -> Result<String, WorkError> {
        let made = self
            .remerged
            .as_ref()
            .and_then(|r| lock(r).trees.get(tip).cloned());
        made.ok_or_else(|| WorkError::Git(format!("the replay made no run branch commit {tip}")))
    }

    fn adds_nothing(&self, commit: &str) -> Result<bool, WorkError> {
        if let Some(r) = &self.remerged {
            return lock(r).adds_nothing(commit);
        }
        let mut a = lock(&self.answers);
        Ok(a.nothing
            .get_mut(commit)
            .and_then(VecDeque::pop_front)
            .unwrap_or(false))
    }

    fn close(&self, _: &TaskTree) -> Result<(), WorkError> {
        Ok(())
    }

    fn finish(&self) -> Result<(), WorkError> {
        Ok(())
    }

    fn has_commit(&self, _: &str) -> bool {
        true
    }

    fn on_branch(&self, commit: &str) -> bool {
        self.branch.contains(commit)
    }

    fn take_up_integration(
        &self,
        task: &str,
        commit: &str,
        _: Option<&str>,
    ) -> Result<Option<String>, WorkError> {
        match &self.remerged {
            Some(r) if self.taken_up.contains(task) => lock(r).integrate(task, commit).map(Some),
            _ => Ok(None),
        }
    }

    fn hands(
        &self,
        tree: &TaskTree,
        _: &[String],
        _: Duration,
        _: usize,
    ) -> Option<Arc<dyn crate::run::edit_tools::Hands>> {
        Some(Arc::new(super::edit::ReplayHands {
            task: tree.task.clone(),
            carried: self.carried.clone(),
        }))
    }
}

/// The sandbox record a request's work record holds.
fn sandbox_of(v: &J) -> Record {
    if v["confined"] == true {
        Record::Confined {
            net: v["net"] == true,
            read: string_list(&v["read"]),
            allow_hosts: string_list(&v["allow_hosts"]),
            bound: string_list(&v["bound"]),
        }
    } else {
        Record::Unconfined {
            reason: v["reason"].as_str().unwrap_or_default().to_string(),
        }
    }
}

fn limits_of(v: &J) -> ChangeLimits {
    let d = ChangeLimits::default();
    let n = |k: &str, or: u64| v[k].as_u64().unwrap_or(or);
    ChangeLimits {
        max_file_bytes: n("max_file_bytes", d.max_file_bytes),
        max_change_bytes: n("max_change_bytes", d.max_change_bytes),
        max_files: n("max_files", d.max_files),
        max_disk_bytes: n("max_disk_bytes", d.max_disk_bytes),
    }
}

fn verification_of(v: &J) -> Option<Verification> {
    let tier = u8::try_from(v["tier"].as_u64()?).ok()?;
    Some(Verification::of(
        tier,
        Verify::parse(v["verify"].as_str()?)?,
    ))
}

/// The run branch of the part of a run starting at seq `from`, to be merged again in
/// `merges`: at the tree the record's last integration before that part made (the base's when
/// there was none), each change commit of `view` checked to be in the repository. `Err` names
/// what is missing.
fn remerged(
    run: &[Recorded],
    view: &[Recorded],
    from: u64,
    merges: &Arc<dyn Merges>,
) -> Result<Remerged, String> {
    let fetch = "strict replay merges the run's changes again in this repository: fetch them (`git forum fetch`) and the run's base";
    for e in view.iter().filter(|e| e.kind == kind::CHANGE) {
        if let Some(c) = e.payload["commit"].as_str() {
            merges
                .trees(c)
                .map_err(|why| format!("{why} (seq {}): {fetch}", e.seq))?;
        }
    }
    let before = run
        .iter()
        .rev()
        .find(|e| e.seq < from && e.kind == kind::INTEGRATED);
    let tip = match before.and_then(|e| e.payload["tree"].as_str()) {
        Some(tree) => tree.to_string(),
        None => {
            let base = run[0].payload["work"]["base"].as_str().unwrap_or_default();
            merges
                .tree(base)
                .map_err(|why| format!("{why} (the base of run {}): {fetch}", run[0].seq))?
        }
    };
    let mut tips: BTreeMap<String, VecDeque<String>> = BTreeMap::new();
    for e in view.iter().filter(|e| e.kind == kind::INTEGRATED) {
        let task = e.payload["task"].as_str().unwrap_or_default().to_string();
        let tip = e.payload["tip"].as_str().unwrap_or_default().to_string();
        tips.entry(task).or_default().push_back(tip);
    }
    Ok(Remerged {
        merges: merges.clone(),
        tip,
        started: before.is_some(),
        trees: BTreeMap::new(),
        tips,
    })
}

/// The tasks of `view` whose first entry about their change is `integrated`: a resume took
/// their integration up from the run branch a killed writer had moved.
fn taken_up(view: &[Recorded]) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut out = BTreeSet::new();
    for e in view {
        let about = matches!(
            e.kind.as_str(),
            kind::CHANGE | kind::CHECK | kind::SHIP | kind::CONFLICT | kind::INTEGRATED
        );
        let Some(task) = e.payload["task"].as_str().filter(|_| about) else {
            continue;
        };
        if seen.insert(task.to_string()) && e.kind == kind::INTEGRATED {
            out.insert(task.to_string());
        }
    }
    out
}

/// The change commits the run branch held, as the whole record `run` says: its merges' in a
/// `legacy` run, else its `integrated` entries'.
fn recorded_branch(run: &[Recorded], legacy: bool) -> Result<BTreeSet<String>, String> {
    if legacy {
        return Ok(Answers::read(run)?
            .integrations
            .into_values()
            .flatten()
            .filter_map(Result::ok)
            .collect());
    }
    // What the run branch held is what the record witnessed integrated: a change a killed
    // writer never integrated (or whose integration a resume undid) is not.
    Ok(run
        .iter()
        .filter(|e| e.kind == kind::INTEGRATED)
        .filter_map(|e| e.payload["commit"].as_str().map(str::to_string))
        .collect())
}

/// The work options of a replayed run whose request (`run[0]`) recorded `work`, answering
/// from the entries of `view` (the part of the run being replayed, which starts at seq
/// `from`), and its workbench (for the calls it could not answer); `None` for a run that did
/// not work in the repository. A run that recorded its integrations is merged again in
/// `merges`, and refused without one. `part`: the count of entries the part writes, and how
/// many the record holds of it.
pub(super) fn options(
    run: &[Recorded],
    view: &[Recorded],
    from: u64,
    merges: Option<&Arc<dyn Merges>>,
    part: (super::phases::Written, usize),
) -> Result<Option<(WorkOptions, Arc<ReplayBench>)>, String> {
    let Some(w) = run[0].payload.get("work") else {
        return Ok(None);
    };
    let legacy = !crate::run::work_state::witnessed(w);
    let (ledger, dispatch) = super::dispatched::of(run, view, merges.cloned(), part)?;
    let remerged = match (legacy, merges) {
        (true, _) => None,
        (false, Some(m)) => Some(Mutex::new(remerged(run, view, from, m)?)),
        (false, None) => {
            return Err(format!(
                "run {} recorded the trees of its merges, and strict replay merges its changes again: it needs the repository they were made in",
                run[0].seq
            ));
        }
    };
    let bench = Arc::new(ReplayBench {
        base: Base {
            commit: w["base"].as_str().unwrap_or_default().to_string(),
            branch: w["branch"].as_str().map(str::to_string),
            dirty: string_list(&w["dirty"]),
        },
        answers: Mutex::new(Answers::read(view)?),
        branch: recorded_branch(run, legacy)?,
        carried: Arc::new(Mutex::new(super::edit::Carried::read(view)?)),
        remerged,
        taken_up: taken_up(view),
        dispatch: dispatch.clone(),
        merges: merges.cloned(),
        starts: Mutex::new(super::dispatched::starts(view)),
        from_record: Mutex::default(),
        keeps_refused_tree: !legacy && !crate::run::work_state::Unkept::of(w).refused_tree,
    });
    // The editing worker's bounds, as the request's options record them when given.
    let given = &run[0].payload["options"];
    let opened: Arc<dyn Workbench> = bench.clone();
    let opts = WorkOptions {
        enabled: true,
        open: Arc::new(move |_, _| Ok(opened.clone())),
        ledger,
        checks: string_list(&w["checks"]),
        check_deadline: DEFAULT_CHECK_DEADLINE,
        output_cap: DEFAULT_CHECK_OUTPUT_CAP,
        diff_cap: DEFAULT_DIFF_CAP,
        allow_cmds: string_list(&given["allow_cmds"])
            .iter()
            .map(|c| c.trim().to_string())
            .collect(),
        max_tool_calls: given["max_tool_calls"]
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(crate::run::edit_tools::DEFAULT_MAX_TOOL_CALLS),
        attempts: super::attempts::count(run),
        attempt_slots: Vec::new(),
        sandbox: Arc::new(Sandboxing::recorded(sandbox_of(&w["sandbox"]))),
        verification: w.get("verification").and_then(verification_of),
        limits: limits_of(&w["limits"]),
        dispatch: dispatch.map(|d| d as Arc<dyn crate::run::Dispatch>),
        legacy,
        unkept: crate::run::work_state::Unkept::of(w),
    };
    Ok(Some((opts, bench)))
}
