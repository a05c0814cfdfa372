//! `git forum blame FILE [-L A,B] [REV]`, once for every transport (`GET /blame`, MCP
//! `blame`): each line of a file with the commit `git blame` names and, when that commit is a
//! run's change, what the record says about the task that wrote it.
//!
//! How a commit is tied to a change entry:
//!
//! * **trailers**: a change commit carries `Forum-Ledger`, `Forum-Run`, `Forum-Task` and
//!   `Forum-Entry`. Its copy on the run branch and a fast-forward or merge by `git forum
//!   apply` keep them.
//! * **patch id**: a commit without them whose diff of the file has the `git patch-id
//!   --stable` of a change commit's diff of the same file (a cherry-pick or a rebase).
//! * **content**: a commit whose added lines of the file with text are, at least half of
//!   them, lines that change commits added (a squash merge of several changes): each line goes to the
//!   latest change commit whose own diff of the file added it (git's diff, not a tool call's
//!   recorded text, which is capped and redacted); its other lines are its own.
//!
//! The patch-id index is built once per call, only when some line needs it, of the change
//! entries that recorded the file (two git processes for all of them: cost linear in their
//! diffs of that one file, not in the ledger). Entry hash to seq and the run of each entry are
//! built once per call from the entries read ([`crate::report::blame::Record`]). Each task
//! entry's inclusion proof comes from the O(log n) cache of Forum's tree
//! (`refs/forum/merkle/NAME`), and its C2SP tlog-proof when the ledger has a signed note.
//! `verify` ([`check`]) checks every proof and tie.

mod check;

use std::collections::HashMap;
use std::path::Path;

use serde::Serialize;

use super::proof::{Ask, Cached, ProofReport, prove_from};
use super::request::Request as _;
use super::request::blame::Blame;
use super::{Error, Report, Result};
use crate::ledger::kind;
use crate::ledger::proof::{Checkpoint, InclusionProof};
use crate::report::blame::{ChangeFact, Record, TaskFacts, adder};
use crate::store::git::GitStore;
use crate::work::blame::{self as wb, BlamedLine, FileAt, FilePatch, NoFile, Trailers};

/// The tool call that wrote a line.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct ToolCall {
    pub(crate) seq: u64,
    pub(crate) n: u64,
    pub(crate) tool: String,
}

/// One line and who wrote it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct LineReport {
    /// Its number in the file at the revision.
    pub(crate) line: u64,
    pub(crate) text: String,
    /// The commit `git blame` names.
    pub(crate) commit: String,
    /// How that commit was tied to a change entry: `trailers`, `patch_id`, `content`; `null`
    /// for a commit that is no run's change.
    pub(crate) via: Option<&'static str>,
    /// The task entry's seq (its facts are in `tasks`).
    pub(crate) task: Option<u64>,
    /// The change entry's seq.
    pub(crate) change: Option<u64>,
    /// The editing worker's tool call that wrote the line; `null` for an agent CLI's or a
    /// command worker's change (the task's), or a line no call's recorded text holds.
    pub(crate) tool_call: Option<ToolCall>,
    /// Why a commit with trailers was not tied (it names another ledger or no task here).
    pub(crate) note: Option<String>,
}

/// A check that ran on a change.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct CheckReport {
    pub(crate) seq: u64,
    pub(crate) command: String,
    pub(crate) ok: bool,
}

/// A change entry a line was tied to.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct ChangeReport {
    pub(crate) seq: u64,
    pub(crate) entry_hash: String,
    pub(crate) commit: String,
    /// The blob of the file the change entry recorded; `null` when it recorded none (an
    /// entry older than the field) or the change deleted the file.
    pub(crate) blob: Option<String>,
    /// Whether the entry records its files' blobs.
    pub(crate) blobs_recorded: bool,
    /// The checks that ran on it.
    pub(crate) checks: Vec<CheckReport>,
}

/// A decision and its reason.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Ship {
    pub(crate) decision: String,
    pub(crate) reason: String,
}

/// A task some line was tied to.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct TaskReport {
    pub(crate) seq: u64,
    pub(crate) entry_hash: String,
    pub(crate) run: u64,
    /// The task's id in the plan.
    pub(crate) id: String,
    pub(crate) lane: String,
    pub(crate) model: Option<String>,
    /// `tools` when the editing worker's tool calls did it, else `task` (an agent CLI or a
    /// command worker: its lines are the task's).
    pub(crate) worker: &'static str,
    pub(crate) prompt_tokens: u64,
    pub(crate) completion_tokens: u64,
    /// What its model calls cost, when they were priced.
    pub(crate) cost_usd: Option<f64>,
    pub(crate) ship: Option<Ship>,
    /// Its changes that lines were tied to.
    pub(crate) changes: Vec<ChangeReport>,
    /// The task entry is in the ledger's latest checkpoint.
    pub(crate) proof: InclusionProof,
    /// The same as a C2SP tlog-proof against the latest signed note, when there is one.
    pub(crate) tlog_proof: Option<String>,
}

/// `git forum blame`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct BlameReport {
    pub(crate) schema: &'static str,
    pub(crate) ledger: String,
    /// The path from the repository's top.
    pub(crate) file: String,
    /// The commit blamed at, and the file's blob there.
    pub(crate) rev: String,
    pub(crate) blob: String,
    pub(crate) lines: Vec<LineReport>,
    pub(crate) tasks: Vec<TaskReport>,
    /// The checkpoint the proofs are against; `null` for a ledger with no entries.
    pub(crate) checkpoint: Option<Checkpoint>,
    /// `true` when `verify` checked every line; `null` when it was not asked.
    pub(crate) verified: Option<bool>,
    /// What `verify` could not check for lack of a record (a change entry written before
    /// git forum recorded the blob of each file).
    pub(crate) notes: Vec<String>,
}

impl Report for BlameReport {
    const SCHEMA: &'static str = "git-forum.blame/1";
}

fn work_err(e: crate::run::WorkError) -> Error {
    Error::internal(e.to_string())
}

/// Changes a squash merge may hold: (change seq, task seq, the lines its commit's diff of the
/// file added), oldest first.
type Cands = Vec<(u64, u64, Vec<String>)>;

/// How a commit is tied to a change entry.
#[derive(Debug, Clone, PartialEq)]
enum Tie {
    /// By its trailers, to this task entry (and the change entry for the commit).
    Trailers(Trailers),
    /// By its patch id, to a change entry of this task.
    PatchId { task: u64, change: u64 },
    /// By content, line by line (a squash merge), among these changes: (change seq, task
    /// seq, the lines its diff of the file added), oldest first.
    Content(Cands),
    /// A run's trailers that do not lead here.
    Foreign(String),
    /// No tie.
    None,
}

/// The change commits that recorded the file, and the per-file patches of those and of the
/// blamed commits that need one.
struct Patches {
    /// (task seq, change) of each change commit present here, oldest first.
    changes: Vec<(u64, ChangeFact)>,
    patches: HashMap<String, FilePatch>,
}

impl Patches {
    fn build(dir: &Path, record: &Record<'_>, path: &str, blamed: &[String]) -> Result<Patches> {
        let changes = record.changes_touching(path);
        let mut ids: Vec<String> = changes.iter().map(|(_, c)| c.commit.clone()).collect();
        ids.extend(blamed.iter().cloned());
        ids.sort();
        ids.dedup();
        let here = wb::present(dir, &ids).map_err(work_err)?;
        let patches = wb::file_patches(dir, &here, path).map_err(work_err)?;
        let changes = changes
            .into_iter()
            .filter(|(_, c)| patches.contains_key(&c.commit))
            .collect();
        Ok(Patches { changes, patches })
    }

    fn patch_id(&self, commit: &str) -> Option<&str> {
        self.patches.get(commit)?.patch_id.as_deref()
    }

    /// The latest change whose diff of the file is the same patch as `commit`'s.
    fn same_patch(&self, commit: &str) -> Option<&(u64, ChangeFact)> {
        let pid = self.patch_id(commit)?;
        self.changes
            .iter()
            .rev()
            .find(|(_, c)| self.patch_id(&c.commit) == Some(pid))
    }

    /// Whether `commit` reads as a squash of the changes `cands` (change seq, task seq,
    /// added lines): at least half of the lines with text its diff of the file adds (blank
    /// lines tell nothing) were added by them.
    fn squashes(&self, commit: &str, cands: &[(u64, u64, Vec<String>)]) -> bool {
        let Some(p) = self.patches.get(commit) else {
            return false;
        };
        let text: Vec<&String> = p.added.iter().filter(|l| !l.trim().is_empty()).collect();
        let known = text
            .iter()
            .filter(|l| cands.iter().any(|(_, _, added)| added.contains(l)))
            .count();
        known > 0 && known * 2 >= text.len()
    }

    /// The changes `commit` may be a squash of: each change commit it is not an ancestor of
    /// (a commit the change was built on holds none of it), when the lines it adds read as a
    /// squash of them; `None` otherwise.
    fn squashed(&self, dir: &Path, commit: &str) -> Result<Option<Cands>> {
        let all: Cands = self
            .changes
            .iter()
            .map(|(t, c)| (c.seq, *t, self.patches[&c.commit].added.clone()))
            .collect();
        if !self.squashes(commit, &all) {
            return Ok(None);
        }
        let mut after = Vec::new();
        for ((_, c), cand) in self.changes.iter().zip(all) {
            if !crate::work::run_diff::contains(dir, commit, &c.commit).map_err(work_err)? {
                after.push(cand);
            }
        }
        Ok(self.squashes(commit, &after).then_some(after))
    }
}

/// The ledger name a change commit's trailers carry for the ledger read as `ledger`
/// (`origin:main` is `main` to the commits).
fn trailer_name(ledger: &str) -> &str {
    ledger.rsplit(':').next().unwrap_or(ledger)
}

/// Each blamed commit's tie.
fn ties(
    dir: &Path,
    record: &Record<'_>,
    ledger: &str,
    commits: &[String],
    trailers: &HashMap<String, Trailers>,
    patches: &mut dyn FnMut() -> Result<std::rc::Rc<Patches>>,
) -> Result<HashMap<String, Tie>> {
    let mut out = HashMap::new();
    for c in commits {
        let tie = match trailers.get(c) {
            Some(t) if t.ledger != trailer_name(ledger) => Tie::Foreign(format!(
                "its trailers name ledger {:?}, not {:?}",
                t.ledger,
                trailer_name(ledger)
            )),
            Some(t) if record.task(t.task).is_none() => Tie::Foreign(format!(
                "its Forum-Task {} is no task entry of ledger {ledger:?}",
                t.task
            )),
            Some(t) => Tie::Trailers(t.clone()),
            None => {
                let p = patches()?;
                match p.same_patch(c) {
                    Some((task, change)) => Tie::PatchId {
                        task: *task,
                        change: change.seq,
                    },
                    None => match p.squashed(dir, c)? {
                        Some(cands) => Tie::Content(cands),
                        None => Tie::None,
                    },
                }
            }
        };
        out.insert(c.clone(), tie);
    }
    Ok(out)
}

type Items = Vec<(crate::ledger::Entry, Option<crate::ledger::Value>)>;

/// The kinds of entry whose bodies blame reads; the others are read without their bodies.
const READ: [&str; 6] = [
    kind::TASK,
    kind::RESULT,
    kind::CHANGE,
    kind::CHECK,
    kind::SHIP,
    kind::TOOL_CALL,
];

/// The ledger's entries (none for a ledger with no entries yet), with the bodies of the kinds
/// blame reads ([`READ`]: one walk of the chain, no body read for the rest). A body that does
/// not hash to its entry's `payload_hash` fails the call, as every reader does; with `verify`
/// it is left out instead and its seq kept with why, so the check can name the line whose
/// record it damages.
fn entries(store: &GitStore, verify: bool) -> Result<(Items, HashMap<u64, String>)> {
    let mut damaged = HashMap::new();
    if !store.exists()? {
        return Ok((Vec::new(), damaged));
    }
    let mut out = Vec::new();
    for (id, e) in store.walk_back(None)? {
        if !READ.contains(&e.kind.as_str()) {
            out.push((e, None));
            continue;
        }
        let body = match store.body_of_commit(&id) {
            Ok(Some(bytes)) => {
                let text = String::from_utf8_lossy(&bytes);
                crate::ledger::canonical::parse(&text).ok()
            }
            Ok(None) => None,
            Err(crate::store::git::StoreError::Corrupt(m)) if verify => {
                let prefix = format!("ledger {}: ", store.name());
                damaged.insert(e.seq, m.strip_prefix(&prefix).unwrap_or(&m).to_string());
                None
            }
            Err(e) => return Err(super::reports::store_error(e)),
        };
        out.push((e, body));
    }
    out.reverse();
    Ok((out, damaged))
}

/// The file at the revision, or the one-line refusal.
fn the_file(dir: &Path, req: &Blame) -> Result<FileAt> {
    let path = wb::top_path(dir, &req.file).map_err(work_err)?;
    let rev = req.rev.as_deref().unwrap_or("HEAD");
    match wb::file_at(dir, rev, &path).map_err(work_err)? {
        Ok(f) => Ok(f),
        Err(NoFile::NoRevision) => Err(Error::not_found(format!(
            "{rev:?} names no commit in this repository; give a revision git knows (a branch, a tag or a commit id)"
        ))),
        Err(NoFile::NotInRevision) => Err(Error::not_found(format!(
            "{path} is not a file in {rev}; name a file the revision holds (`git ls-tree -r --name-only {rev}` lists them)"
        ))),
        Err(NoFile::Binary) => Err(Error::usage(format!(
            "{path} is a binary file in {rev}; blame reads text files only"
        ))),
    }
}

/// `git forum blame`: the lines of `req.file` at `req.rev` (HEAD) in the repository
/// containing `dir`, tied to the ledger `ledger` read from `store`; with `req.verify`, every
/// tie and proof checked.
pub(crate) fn blame(
    dir: &Path,
    ledger: &str,
    store: &GitStore,
    req: &Blame,
) -> Result<BlameReport> {
    req.validate()?;
    let file = the_file(dir, req)?;
    let (from, to) = match req.range()? {
        None => (1, file.lines),
        Some((a, b)) if b <= file.lines => (a, b),
        Some((a, b)) => {
            return Err(Error::usage(format!(
                "lines {a},{b} are out of range: {} has {} lines at {}",
                file.path,
                file.lines,
                short(&file.commit)
            )));
        }
    };
    let blamed = if file.lines == 0 {
        Vec::new()
    } else {
        wb::blame(dir, &file.commit, &file.path, from, to).map_err(work_err)?
    };
    let (items, damaged) = entries(store, req.verify)?;
    let record = Record::new(&items);
    let mut commits: Vec<String> = blamed.iter().map(|l| l.commit.clone()).collect();
    commits.sort();
    commits.dedup();
    let trailers = wb::trailers(dir, &commits).map_err(work_err)?;
    let mut built: Option<std::rc::Rc<Patches>> = None;
    let mut patches = || -> Result<std::rc::Rc<Patches>> {
        if built.is_none() {
            built = Some(std::rc::Rc::new(Patches::build(
                dir, &record, &file.path, &commits,
            )?));
        }
        Ok(built.clone().expect("just built"))
    };
    let ties = ties(dir, &record, ledger, &commits, &trailers, &mut patches)?;
    let mut facts: HashMap<u64, TaskFacts> = HashMap::new();
    let lines = blamed
        .into_iter()
        .map(|l| line_report(&record, &file.path, l, &ties, &mut facts))
        .collect::<Vec<_>>();
    let proofs = Proofs::of(store, ledger, &facts)?;
    let tasks = task_reports(&file.path, &lines, &facts, &proofs)?;
    let mut report = BlameReport {
        schema: BlameReport::SCHEMA,
        ledger: ledger.to_string(),
        file: file.path.clone(),
        rev: file.commit.clone(),
        blob: file.blob.clone(),
        lines,
        tasks,
        checkpoint: proofs.checkpoint.clone(),
        verified: None,
        notes: Vec::new(),
    };
    if req.verify {
        let p = patches()?;
        let seen = check::Seen {
            record: &record,
            trailers: &trailers,
            patches: &p,
            proofs: &proofs,
            damaged: &damaged,
        };
        check::verify(dir, &report, &seen)?;
        report.verified = Some(true);
        report.notes = check::unrecorded(&report);
    }
    Ok(report)
}

pub(crate) fn short(id: &str) -> &str {
    &id[..id.len().min(8)]
}

/// One line's report, its task's facts gathered once into `facts`.
fn line_report(
    record: &Record<'_>,
    path: &str,
    l: BlamedLine,
    ties: &HashMap<String, Tie>,
    facts: &mut HashMap<u64, TaskFacts>,
) -> LineReport {
    let mut out = LineReport {
        line: l.line,
        text: l.text,
        commit: l.commit,
        via: None,
        task: None,
        change: None,
        tool_call: None,
        note: None,
    };
    let (via, task, change) = match ties.get(&out.commit) {
        Some(Tie::Trailers(t)) => ("trailers", t.task, None),
        Some(Tie::PatchId { task, change }) => ("patch_id", *task, Some(*change)),
        Some(Tie::Content(cands)) => {
            let Some((change, task, _)) = adder(cands, &out.text) else {
                return out;
            };
            ("content", *task, Some(*change))
        }
        Some(Tie::Foreign(why)) => {
            out.note = Some(why.clone());
            return out;
        }
        Some(Tie::None) | None => return out,
    };
    if let std::collections::hash_map::Entry::Vacant(slot) = facts.entry(task) {
        match record.task(task) {
            Some(f) => slot.insert(f),
            None => return out,
        };
    }
    let f = &facts[&task];
    let change = change.or_else(|| f.change_for(&out.commit).map(|c| c.seq));
    out.via = Some(via);
    out.task = Some(task);
    out.change = change;
    out.tool_call = f.call_for(path, &out.text).map(|c| ToolCall {
        seq: c.seq,
        n: c.n,
        tool: c.tool.clone(),
    });
    out
}

/// The task entries' proofs, and the checkpoint they are against.
pub(crate) struct Proofs {
    pub(crate) checkpoint: Option<Checkpoint>,
    pub(crate) inclusion: HashMap<u64, InclusionProof>,
    pub(crate) tlog: HashMap<u64, String>,
}

impl Proofs {
    fn of(store: &GitStore, ledger: &str, facts: &HashMap<u64, TaskFacts>) -> Result<Proofs> {
        let mut out = Proofs {
            checkpoint: None,
            inclusion: HashMap::new(),
            tlog: HashMap::new(),
        };
        let seqs: Vec<u64> = facts.keys().copied().collect();
        let Some(cached) = Cached::open(store)? else {
            return Ok(out);
        };
        out.checkpoint = Some(cached.checkpoint());
        if seqs.is_empty() {
            return Ok(out);
        }
        let signed = store.signed_checkpoints()?;
        let noted = !store.stored_notes()?.is_empty();
        for seq in seqs {
            if let ProofReport::Inclusion(p) =
                prove_from(Some(&cached), ledger, &signed, Ask::Inclusion(seq), None)?
            {
                out.inclusion.insert(seq, p);
            }
            if noted {
                let ask = super::tlog::TlogAsk::Inclusion(seq);
                // A note older than the task has no proof of it; the JSON proof stands alone.
                if let Ok(t) = super::tlog::prove(store, ledger, None, ask, false) {
                    out.tlog.insert(seq, t.text);
                }
            }
        }
        Ok(out)
    }
}

/// The facts of each task some line names, in the order first named.
fn task_reports(
    path: &str,
    lines: &[LineReport],
    facts: &HashMap<u64, TaskFacts>,
    proofs: &Proofs,
) -> Result<Vec<TaskReport>> {
    let mut out: Vec<TaskReport> = Vec::new();
    let mut changes: HashMap<u64, Vec<u64>> = HashMap::new();
    for l in lines {
        let (Some(t), Some(c)) = (l.task, l.change) else {
            continue;
        };
        let seen = changes.entry(t).or_default();
        if !seen.contains(&c) {
            seen.push(c);
        }
    }
    let mut order: Vec<u64> = Vec::new();
    for t in lines.iter().filter_map(|l| l.task) {
        if !order.contains(&t) {
            order.push(t);
        }
    }
    for seq in order {
        let f = &facts[&seq];
        let Some(proof) = proofs.inclusion.get(&seq).cloned() else {
            return Err(Error::conflict(format!(
                "task entry {seq} is past the ledger's checkpoint; run `git forum verify`"
            )));
        };
        out.push(TaskReport {
            seq,
            entry_hash: f.entry_hash.clone(),
            run: f.run,
            id: f.id.clone(),
            lane: f.lane.clone(),
            model: f.model.clone(),
            worker: if f.calls.is_empty() { "task" } else { "tools" },
            prompt_tokens: f.prompt_tokens,
            completion_tokens: f.completion_tokens,
            cost_usd: f.cost_usd,
            ship: f.ship.as_ref().map(|(d, r)| Ship {
                decision: d.clone(),
                reason: r.clone(),
            }),
            changes: changes
                .get(&seq)
                .into_iter()
                .flatten()
                .filter_map(|c| f.changes.iter().find(|x| x.seq == *c))
                .map(|c| change_report(path, f, c))
                .collect(),
            proof,
            tlog_proof: proofs.tlog.get(&seq).cloned(),
        });
    }
    Ok(out)
}

fn change_report(path: &str, f: &TaskFacts, c: &ChangeFact) -> ChangeReport {
    ChangeReport {
        seq: c.seq,
        entry_hash: c.entry_hash.clone(),
        commit: c.commit.clone(),
        blob: c.blob_of(path).flatten().map(str::to_string),
        blobs_recorded: c.blobs.is_some(),
        checks: f
            .checks_of(c.seq)
            .into_iter()
            .map(|k| CheckReport {
                seq: k.seq,
                command: k.command.clone(),
                ok: k.ok,
            })
            .collect(),
    }
}
