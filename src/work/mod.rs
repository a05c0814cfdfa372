//! `GitWork`: the [`Workbench`] of a `--work` run over a real git repository (an adapter, like
//! `store`), through the `git` CLI.
//!
//! * Base: HEAD when the run opens (or the base a resumed run recorded), the branch it named,
//!   and the paths `git status --porcelain` lists (reported, not part of the base). The user's
//!   work tree, index and branch are only read, never written.
//! * Worktrees: under git forum's cache, `work/CLONE/LEDGER/RUN/TASK` ([`stale`]: outside the
//!   git dir and the user's tree), detached, made with `git worktree add` in the clone's turn.
//!   A task with data-edge upstreams starts at their merge (`git merge-tree --write-tree`, then
//!   one merge commit per upstream that is not already contained); a conflict there is
//!   [`WorkError::Conflict`].
//! * A worker is hostile input ([`hostile`]). What git forum made for each worktree (its `.git`
//!   link, its admin directory) is recorded when it is made and compared after the worker; the
//!   whole worktree is surveyed by `lstat` (no FIFO, device or nested `.git`; disk bounded), and
//!   the change measured by file sizes against its limits, before git reads a file. git is then
//!   never run on the worktree's own terms: every command that reads it gets the admin
//!   directory, the work tree and a private copy of the index the checkout wrote explicitly
//!   (`GIT_DIR`, `GIT_WORK_TREE`, `GIT_INDEX_FILE`), attributes from the task's start commit
//!   (`GIT_ATTR_SOURCE`, so a `.gitattributes` the worker wrote selects no filter), and no hooks
//!   or fsmonitor. Filters the user configured before the run (git-lfs) still apply to the
//!   files the start commit's attributes name.
//! * A change: `git add -A` on the private index (the user's `.gitignore` rules hold; [`racy`]
//!   spares it re-hashing the files the checkout just wrote), `write-tree` on a scratch copy of
//!   it; the lines it adds are scanned for secrets ([`content`]) and its symbolic links that
//!   point outside the worktree noted, before the commit object (what `git commit-tree` would
//!   write, written here through gix) is made with the author `LANE (MODEL)
//!   <LANE@git-forum.invalid>` and the trailers of [`Tie::trailers`]; statistics and the
//!   unified diff from one `diff --raw --numstat --patch`, the patch read up to its cap.
//! * Kept changes: `refs/forum/work/LEDGER/RUN/TASK`; quarantining moves a change from there
//!   to `refs/forum/quarantine/...`; each attempt of a task run several times (`--attempts`)
//!   is kept at `refs/forum/attempts/LEDGER/RUN/TASK/N`.
//! * The run branch `refs/heads/forum/run-RUN`: each change is applied as one commit (a change
//!   whose parent is the tip is taken as it is; otherwise `merge-tree --merge-base=PARENT` and a
//!   copy with the same author, date and message), moved with a compare-and-swap
//!   `update-ref`, so a conflict or a concurrent writer leaves it unchanged.
//! * Sandboxes: each task's worktree says what a sandbox shows of the repository ([`view`]).
//! * Ownership: the run's directory is locked while the run lives ([`stale`]); worktrees of
//!   runs that died are removed by [`cleanup_stale`], which [`GitWork::open`] calls first.

pub(crate) mod apply;
pub(crate) mod blame;
mod check;
pub(crate) use check::run_check;
mod content;
mod diff;
mod edit_hands;
pub(crate) mod git;
mod git_bench;
mod hostile;
mod made;
pub(crate) mod merge;
pub use merge::ScratchMerges;
mod racy;
mod reads;
pub(crate) mod run_diff;
mod stale;
pub(crate) mod view;

use crate::store::refs::RefStorage;
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

pub use stale::{LEGACY_WORK_DIR, WorkRoot, cleanup_stale, cleanup_stale_under};

use crate::run::workbench::{kept_ref, task_component};
use crate::run::{
    Author, Base, Change, CheckRun, CommitRules, Keep, LinkOut, SecretFound, TaskTree, Tie,
    WorkError, Workbench,
};

/// `git diff` as every change is read: no external diff or text conversion, no colour, renames
/// found, NUL-separated, with the status letters (`--raw`, whose object ids are whole, so a
/// change entry can name each file's blob) and the line counts (`--numstat`).
pub(crate) const STAT_DIFF: [&str; 9] = [
    "diff",
    "--no-ext-diff",
    "--no-textconv",
    "--no-color",
    "-M",
    "-z",
    "--raw",
    "--no-abbrev",
    "--numstat",
];

/// Who writes the merge commits that start a task on its upstreams.
const FORUM_NAME: &str = "git forum";
const FORUM_EMAIL: &str = "git-forum@git-forum.invalid";

/// The oldest git whose `GIT_ATTR_SOURCE` keeps a worktree's own `.gitattributes` out of the
/// staging of its change.
const MIN_GIT: (u32, u32) = (2, 40);

/// The run branch of run `run_seq`: `refs/heads/forum/run-RUN`.
pub fn run_branch(run_seq: u64) -> String {
    format!("refs/heads/forum/run-{run_seq}")
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A name or email as git itself writes it: no `<`, `>` or line breaks, and none of what git
/// trims from either end (spaces and controls, `.,:;"'\\`).
fn clean_ident(s: &str) -> String {
    let crud = |c: char| c <= ' ' || ".,:;<>\"\\'".contains(c);
    s.chars()
        .filter(|c| !matches!(c, '<' | '>' | '\n' | '\r' | '\0'))
        .collect::<String>()
        .trim_matches(crud)
        .to_string()
}

/// A commit message's head: the first line of `head` as the subject (`fallback` when it is
/// blank), then its body when a blank line follows that line.
fn message_head(head: &str, fallback: &str) -> String {
    let head = head.trim();
    let (first, rest) = head.split_once('\n').unwrap_or((head, ""));
    let subject = match first.trim() {
        "" => fallback,
        s => s,
    };
    match rest.strip_prefix('\n').map(str::trim) {
        Some(body) if !body.is_empty() => format!("{subject}\n\n{body}"),
        _ => subject.to_string(),
    }
}

/// `message` with its head replaced by `head`; its last paragraph (the trailers) stays.
fn with_head(message: &str, head: &str) -> String {
    let trailers = message
        .trim_end()
        .rsplit_once("\n\n")
        .map_or("", |(_, t)| t);
    format!("{}\n\n{trailers}", head.trim_end())
}

/// What git forum keeps of one open worktree, out of the worker's sight.
#[derive(Debug, Clone)]
struct Opened {
    /// The link and admin directory it made.
    made: hostile::Made,
    /// The private copy of the index the checkout wrote (`AREA/.private/TASK.index`).
    index: PathBuf,
    /// That copy as the checkout left it ([`racy`]).
    stamp: Option<racy::Stamp>,
}

/// One run's work area over the repository at `repo`. See the module doc.
pub struct GitWork {
    /// The git common dir (absolute).
    common: PathBuf,
    /// The clone's place under the work root.
    place: stale::Place,
    /// This run's directory: `CLONE/LEDGER/RUN`.
    area: PathBuf,
    /// The run's private directory (`AREA/.private`): never shown to a worker.
    private: PathBuf,
    /// The configuration a sandbox shows in place of the repository's ([`view`]).
    sandbox_config: PathBuf,
    ledger: String,
    run_seq: u64,
    base: Base,
    /// The all-zero object id of the repository's hash (`update-ref`'s "must not exist").
    zero: String,
    /// The repository's object hash (for reading a worktree's index).
    kind: gix::hash::Kind,
    /// The repository, for writing and reading commits in process.
    objects: gix::ThreadSafeRepository,
    /// The lock on `area/.owner`, held while the run lives.
    owner: Mutex<Option<File>>,
    /// One integration at a time within this process (the ref move is compare-and-swap too).
    integrating: Mutex<()>,
    /// The tree of each commit a task started at, once looked up (every task of a plain run
    /// starts at the base: one `rev-parse` per run instead of one per task).
    trees: Mutex<HashMap<String, String>>,
    /// Each open worktree, by path.
    opened: Mutex<HashMap<PathBuf, Opened>>,
    /// The change commits this run made, with their parents (so keeping and integrating
    /// one asks git for neither again).
    made: Mutex<HashMap<String, String>>,
    /// Whether the repository keeps its refs in files, which gix reads ([`reads`]).
    refs_in_files: bool,
    /// Merged trees by their inputs, the last few ([`reads`]).
    merged: Mutex<reads::Merged>,
}

/// `(major, minor)` of the `git` on `PATH`.
fn git_version() -> Result<(u32, u32), WorkError> {
    let out = git::run(Path::new("."), &["version"])?;
    git::ensure(&out, &["version"])?;
    let text = out.text();
    let mut nums = text
        .trim_start_matches("git version ")
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse::<u32>().ok());
    match (nums.next(), nums.next()) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(WorkError::Git(format!(
            "cannot read git's version from {text:?}"
        ))),
    }
}

impl GitWork {
    /// Opens run `run_seq`'s work area in the repository at `repo`, with HEAD as the base,
    /// under the cache's work root ([`WorkRoot::from_env`]): first removes the areas of runs
    /// that died ([`cleanup_stale`]), then claims this one. Fails with one line when HEAD has no
    /// commit yet, git is older than 2.40, or another live process holds the area.
    pub fn open(repo: &Path, ledger: &str, run_seq: u64) -> Result<GitWork, WorkError> {
        GitWork::open_under(&WorkRoot::from_env()?, repo, ledger, run_seq)
    }

    /// [`GitWork::open`] under `root`.
    pub fn open_under(
        root: &WorkRoot,
        repo: &Path,
        ledger: &str,
        run_seq: u64,
    ) -> Result<GitWork, WorkError> {
        let head = git::run(repo, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])?;
        if !head.ok {
            return Err(WorkError::Git(
                "HEAD has no commit yet, so a --work run has no base; commit once first".into(),
            ));
        }
        let common = stale::common_dir(repo)?;
        GitWork::open_in(root, repo, common, ledger, run_seq, head.text())
    }

    /// Like [`GitWork::open`], but at a base recorded earlier (a resumed run keeps its base,
    /// wherever HEAD has moved since).
    pub(crate) fn open_at(
        repo: &Path,
        ledger: &str,
        run_seq: u64,
        base_commit: &str,
    ) -> Result<GitWork, WorkError> {
        let common = stale::common_dir(repo)?;
        let commit = resolve_commit(&common, base_commit).ok_or_else(|| {
            WorkError::Git(format!("the base {base_commit} is not a commit here"))
        })?;
        GitWork::open_in(
            &WorkRoot::from_env()?,
            repo,
            common,
            ledger,
            run_seq,
            commit,
        )
    }

    /// Opens the run's area in the repository whose common dir is `common`, at the full commit
    /// id `commit`: cleans up after dead runs, reads the branch and the dirty paths, claims the
    /// area and writes what its sandboxes show of the configuration.
    fn open_in(
        root: &WorkRoot,
        repo: &Path,
        common: PathBuf,
        ledger: &str,
        run_seq: u64,
        commit: String,
    ) -> Result<GitWork, WorkError> {
        let version = git_version()?;
        if version < MIN_GIT {
            return Err(WorkError::Git(format!(
                "--work needs git {}.{} or later (found {}.{}): it stages a worker's change with attributes from its start commit",
                MIN_GIT.0, MIN_GIT.1, version.0, version.1
            )));
        }
        let place = stale::Place::of(root, &common, stale::work_tree(repo).as_deref())?;
        stale::cleanup_stale_in(&place)?;
        let branch = git::run(repo, &["symbolic-ref", "--quiet", "--short", "HEAD"])?;
        let branch = branch.ok.then(|| branch.text());
        let status = git::run(repo, &["status", "--porcelain=v1", "-z"])?;
        git::ensure(&status, &["status"])?;
        let base = Base {
            commit,
            branch,
            dirty: diff::dirty_paths(&status.stdout),
        };
        let area = place.area(ledger, run_seq);
        let objects = gix::open_opts(&common, gix::open::Options::isolated())
            .map_err(|e| WorkError::Git(format!("cannot open the repository: {e}")))?;
        // Claimed under the clone's turn: a cleanup in another process holds the turn while it
        // locks and removes areas, so it cannot take this area between its creation and its lock.
        let owner = {
            let _turn = place.turn()?;
            stale::claim(&area, run_seq)?
        };
        let area = area.canonicalize().unwrap_or(area);
        let private = area.join(stale::PRIVATE);
        let sandbox_config = view::write_config(&common, &private)?;
        let refs_in_files = RefStorage::of(&objects) == RefStorage::Files;
        Ok(GitWork {
            refs_in_files,
            merged: Mutex::new(reads::Merged::default()),
            objects: objects.into(),
            zero: "0".repeat(base.commit.len()),
            kind: if base.commit.len() == 64 {
                gix::hash::Kind::Sha256
            } else {
                gix::hash::Kind::Sha1
            },
            common,
            place,
            area,
            private,
            sandbox_config,
            ledger: ledger.to_string(),
            run_seq,
            base,
            owner: Mutex::new(Some(owner)),
            integrating: Mutex::new(()),
            trees: Mutex::new(HashMap::new()),
            opened: Mutex::new(HashMap::new()),
            made: Mutex::new(HashMap::new()),
        })
    }

    /// This run's directory (`CLONE/LEDGER/RUN` under the work root).
    pub fn area(&self) -> &Path {
        &self.area
    }

    /// The run branch's ref (`refs/heads/forum/run-RUN`).
    pub(crate) fn branch_ref(&self) -> String {
        run_branch(self.run_seq)
    }

    fn ok(&self, args: &[&str]) -> Result<String, WorkError> {
        git::ok(&self.common, args)
    }

    /// A worktree for `task` at `commit`, replacing one left at the same place: made in the
    /// clone's turn, its link and admin directory recorded, its index copied aside.
    fn add_tree(&self, task: &str, commit: &str) -> Result<TaskTree, WorkError> {
        let name = task_component(task);
        let path = self.area.join(&name);
        let index = self.private.join(format!("{name}.index"));
        let made = {
            let _turn = self.place.turn()?;
            if path.symlink_metadata().is_ok() {
                stale::remove_tree(&self.common, &path)?;
            }
            let shown = path.to_string_lossy().into_owned();
            self.ok(&["worktree", "add", "--detach", "--quiet", &shown, commit])?;
            hostile::Made::record(&path, &self.common)?
        };
        std::fs::copy(made.admin.join("index"), &index).map_err(|e| {
            WorkError::Io(format!("cannot copy the index of {}: {e}", path.display()))
        })?;
        let shows = view::binds(&self.common, &made.admin, &self.sandbox_config);
        let opened = Opened {
            stamp: racy::stamp(&index),
            made,
            index,
        };
        lock(&self.opened).insert(path.clone(), opened);
        Ok(TaskTree {
            task: task.to_string(),
            path,
            start: commit.to_string(),
            shows,
            named: false,
        })
    }

    /// What this run keeps of the open worktree `tree`.
    fn opened(&self, tree: &TaskTree) -> Result<Opened, WorkError> {
        lock(&self.opened).get(&tree.path).cloned().ok_or_else(|| {
            WorkError::Io(format!(
                "{} is not a worktree this run opened",
                tree.path.display()
            ))
        })
    }

    /// `git ARGS` on the worktree `tree` on git forum's terms (see the module doc): its admin
    /// directory, work tree and private index given explicitly, attributes from its start
    /// commit.
    fn tree_git(&self, tree: &TaskTree, opened: &Opened, index: &Path) -> std::process::Command {
        let mut c = git::git(&tree.path);
        c.env("GIT_DIR", &opened.made.admin)
            .env("GIT_WORK_TREE", &tree.path)
            .env("GIT_INDEX_FILE", index)
            .env("GIT_ATTR_SOURCE", &tree.start)
            .args([
                "-c",
                "core.untrackedCache=false",
                "-c",
                "index.skipHash=true",
            ]);
        c
    }

    /// Runs [`GitWork::tree_git`] with `args`; its output, or its failure as one line.
    fn tree_ok(
        &self,
        tree: &TaskTree,
        opened: &Opened,
        args: &[&str],
    ) -> Result<Vec<u8>, WorkError> {
        let mut c = self.tree_git(tree, opened, &opened.index);
        c.args(args);
        let out = git::run_limited(c, git::OUTPUT_LIMIT)?;
        git::ensure(&out, args)?;
        Ok(out.stdout)
    }

    /// Stages what the worker left in `tree` on its private index, after the checks of the
    /// module doc; returns the tree it writes.
    fn stage(
        &self,
        tree: &TaskTree,
        opened: &Opened,
        rules: &CommitRules<'_>,
    ) -> Result<String, WorkError> {
        opened.made.unchanged(&tree.path)?;
        hostile::survey(&tree.path, &rules.limits)?;
        let untracked = self.tree_ok(
            tree,
            opened,
            &["ls-files", "-z", "--others", "--exclude-standard"],
        )?;
        let untracked: Vec<Vec<u8>> = untracked
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(<[u8]>::to_vec)
            .collect();
        let tracked = hostile::tracked(&opened.index, self.kind).ok_or_else(|| {
            WorkError::Io(format!(
                "cannot read the index git forum kept of {}",
                tree.path.display()
            ))
        })?;
        hostile::measure(&tree.path, &tracked, &untracked, &rules.limits)?;
        // The index's stat data is trusted once settled; otherwise git re-hashes what it must.
        if let Some(s) = opened.stamp {
            racy::settle(&tree.path, &opened.index, s, self.kind);
        }
        self.tree_ok(tree, opened, &["add", "-A"])?;
        write_tree(|i| self.tree_git(tree, opened, i), &opened.index)
    }

    /// The links that leave of the change from `start_tree` to `new_tree`, or its refusal for
    /// what it adds that may not leave ([`inspect_trees`]): the secrets it adds refuse it,
    /// naming the tree it was staged as.
    fn inspect(
        &self,
        start_tree: &str,
        new_tree: &str,
        rules: &CommitRules<'_>,
    ) -> Result<Vec<LinkOut>, WorkError> {
        let repo = self.objects.to_thread_local();
        let (found, links_out) = inspect_trees(&self.common, &repo, start_tree, new_tree, rules)?;
        if !found.is_empty() {
            let tree = Some(new_tree.to_string());
            return Err(WorkError::Secrets { found, tree });
        }
        Ok(links_out)
    }

    /// Moves the worktree `tree` onto its change `commit` (its HEAD, and its index to the one
    /// the change was staged on), so `git status` there is clean for the checks.
    fn settle_tree(&self, tree: &TaskTree, opened: &Opened, commit: &str) -> Result<(), WorkError> {
        self.tree_ok(tree, opened, &["update-ref", "--no-deref", "HEAD", commit])?;
        let admin_index = opened.made.admin.join("index");
        let tmp = opened.made.admin.join("index.forum-new");
        std::fs::copy(&opened.index, &tmp)
            .and_then(|_| std::fs::rename(&tmp, &admin_index))
            .map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                WorkError::Io(format!("cannot update {}: {e}", admin_index.display()))
            })
    }

    /// What `git commit-tree TREE -p PARENT... -m MESSAGE` writes, as `name <email>` (author
    /// and committer, dated now), the author dated `date` when given: written here through
    /// gix (one process fewer per change), with git's own layout (the message ends in one
    /// newline; no signature, no encoding header).
    fn commit_tree(
        &self,
        tree: &str,
        parents: &[&str],
        message: &str,
        ident: (&str, &str),
        date: Option<gix::date::Time>,
    ) -> Result<String, WorkError> {
        self.commit_tree_as(tree, parents, message, ident, ident, date)
    }

    /// [`GitWork::commit_tree`] with author `author` and committer `committer` (git forum
    /// commits the changes its agents author).
    fn commit_tree_as(
        &self,
        tree: &str,
        parents: &[&str],
        message: &str,
        author: (&str, &str),
        committer: (&str, &str),
        date: Option<gix::date::Time>,
    ) -> Result<String, WorkError> {
        let id = |hex: &str| {
            gix::ObjectId::from_hex(hex.as_bytes())
                .map_err(|e| WorkError::Git(format!("{hex:?} is not an object id: {e}")))
        };
        let now = gix::date::Time::now_local_or_utc();
        let sign = |ident: (&str, &str), time| gix::actor::Signature {
            name: ident.0.into(),
            email: ident.1.into(),
            time,
        };
        let commit = gix::objs::Commit {
            tree: id(tree)?,
            parents: parents.iter().map(|p| id(p)).collect::<Result<_, _>>()?,
            author: sign(author, date.unwrap_or(now)),
            committer: sign(committer, now),
            encoding: None,
            message: format!("{}\n", message.trim_end()).into(),
            extra_headers: Vec::new(),
        };
        let repo = self.objects.to_thread_local();
        let written = repo
            .write_object(&commit)
            .map_err(|e| WorkError::Git(format!("cannot write a commit: {e}")))?;
        Ok(written.to_string())
    }

    /// The author (name, email, date) and message of `commit`.
    fn commit_meta(
        &self,
        commit: &str,
    ) -> Result<(String, String, Option<gix::date::Time>, String), WorkError> {
        let failed = |e: &dyn std::fmt::Display| {
            WorkError::Git(format!("cannot read the change {commit}: {e}"))
        };
        let repo = self.objects.to_thread_local();
        let oid = gix::ObjectId::from_hex(commit.as_bytes()).map_err(|e| failed(&e))?;
        let found = repo.find_commit(oid).map_err(|e| failed(&e))?;
        let author = found.author().map_err(|e| failed(&e))?.trim();
        let message = found.message_raw().map_err(|e| failed(&e))?;
        Ok((
            author.name.to_string(),
            author.email.to_string(),
            author.time().ok(),
            message.to_string(),
        ))
    }

    /// The commit a task starts at: the base, with each upstream change merged in order.
    fn start_for(&self, task: &str, upstream: &[String]) -> Result<String, WorkError> {
        let mut cur = self.base.commit.clone();
        for u in upstream {
            let u = resolve_commit(&self.common, u).ok_or_else(|| {
                WorkError::Git(format!("the upstream change {u} is not a commit here"))
            })?;
            if is_ancestor(&self.common, &u, &cur)? {
                continue;
            }
            if is_ancestor(&self.common, &cur, &u)? {
                cur = u;
                continue;
            }
            let tree = self.merge_tree(None, &cur, &u)?;
            let message = format!("git forum: task {task} starts on {u}");
            cur = self.commit_tree(
                &tree,
                &[&cur, &u],
                &message,
                (FORUM_NAME, FORUM_EMAIL),
                None,
            )?;
            lock(&self.trees).insert(cur.clone(), tree);
        }
        Ok(cur)
    }
}
/// What the change from `start_tree` to `new_tree` (trees in the repository at `common`, read
/// through `repo`) adds that may not leave: the secrets in its added lines (through
/// `rules.screen`) and its links that point outside the worktree; a nested repository is
/// refused, and so is a file over `max_file_bytes`.
pub(super) fn inspect_trees(
    common: &Path,
    repo: &gix::Repository,
    start_tree: &str,
    new_tree: &str,
    rules: &CommitRules<'_>,
) -> Result<(Vec<SecretFound>, Vec<LinkOut>), WorkError> {
    let diff = diff_trees(common, start_tree, new_tree)?;
    inspect_diff(repo, &diff, rules)
}

/// `git diff-tree -r -z --no-renames` of `start_tree` and `new_tree` (raw, full ids): the
/// list both screens read. Refused when it is longer than git forum reads, so no screen ever
/// passes a change on part of its list.
pub(super) fn diff_trees(
    common: &Path,
    start_tree: &str,
    new_tree: &str,
) -> Result<Vec<u8>, WorkError> {
    let args = [
        "diff-tree",
        "-r",
        "-z",
        "--no-renames",
        "--no-abbrev",
        start_tree,
        new_tree,
    ];
    let out = git::run(common, &args)?;
    git::ensure(&out, &args)?;
    if out.cut {
        return Err(WorkError::Refused(
            "the change's list of files is longer than git forum reads".into(),
        ));
    }
    Ok(out.stdout)
}

/// [`inspect_trees`] of the list `diff` ([`diff_trees`]).
pub(super) fn inspect_diff(
    repo: &gix::Repository,
    diff: &[u8],
    rules: &CommitRules<'_>,
) -> Result<(Vec<SecretFound>, Vec<LinkOut>), WorkError> {
    let blob = |hex: &str, cap: u64| read_blob(repo, hex, cap);
    let mut secrets = Vec::new();
    let mut links = Vec::new();
    let mut fields = diff.split(|b| *b == 0);
    while let (Some(meta), Some(path)) = (fields.next(), fields.next()) {
        let meta = String::from_utf8_lossy(meta);
        let parts: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
        let [_, new_mode, old_id, new_id, status] = parts[..] else {
            continue;
        };
        if status.starts_with('D') {
            continue;
        }
        let path = String::from_utf8_lossy(path).into_owned();
        match new_mode {
            "120000" => {
                let target = blob(new_id, 4096)?.unwrap_or_default();
                if !hostile::link_stays_inside(&path, &target) {
                    links.push(LinkOut {
                        path,
                        target: String::from_utf8_lossy(&target).into_owned(),
                    });
                }
            }
            "160000" => {
                return Err(WorkError::Refused(format!(
                    "the change adds a nested repository at {path}"
                )));
            }
            _ => {
                let Some(new) = blob(new_id, rules.limits.max_file_bytes)? else {
                    return Err(WorkError::Refused(format!(
                        "{path} is larger than the {} bytes a change may add (max_file_bytes in [work])",
                        rules.limits.max_file_bytes
                    )));
                };
                let old = blob(old_id, rules.limits.max_file_bytes)?;
                let added = content::Added::of(old.as_deref(), &new);
                if added.text.is_empty() {
                    continue;
                }
                for (at, rule, fingerprint) in (rules.screen)(&added.text) {
                    secrets.push(SecretFound {
                        path: path.clone(),
                        line: added.line_at(at),
                        rule,
                        fingerprint,
                    });
                }
            }
        }
    }
    Ok((secrets, links))
}

/// The full id of the commit `rev` names, or `None`.
/// The blob `hex` read in process: `None` for the null id (no file) or a blob over `cap` bytes.
fn read_blob(repo: &gix::Repository, hex: &str, cap: u64) -> Result<Option<Vec<u8>>, WorkError> {
    let failed = |e: &dyn std::fmt::Display| WorkError::Git(format!("cannot read {hex}: {e}"));
    let id = gix::ObjectId::from_hex(hex.as_bytes()).map_err(|e| failed(&e))?;
    if id.is_null() {
        return Ok(None);
    }
    let size = repo.find_header(id).map_err(|e| failed(&e))?.size();
    if size > cap {
        return Ok(None);
    }
    Ok(Some(
        repo.find_object(id).map_err(|e| failed(&e))?.data.clone(),
    ))
}

fn resolve_commit(common: &Path, rev: &str) -> Option<String> {
    let spec = format!("{rev}^{{commit}}");
    let out = git::run(
        common,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &spec,
        ],
    )
    .ok()?;
    (out.ok && !out.stdout.is_empty()).then(|| out.text())
}

/// `git write-tree` of the index file `index`, through `git_on` (the command on the worktree
/// with a given index file), on a scratch copy of it ([`racy::scratch_index`]) when one can
/// be made: the tree comes from the object ids `add -A` recorded, and the copy, written back by
/// `write-tree` and then dropped, spares git re-hashing every file the index still shows as
/// racily clean.
fn write_tree(
    git_on: impl Fn(&Path) -> std::process::Command,
    index: &Path,
) -> Result<String, WorkError> {
    let copy = racy::scratch_index(index);
    let mut cmd = git_on(copy.as_deref().unwrap_or(index));
    cmd.arg("write-tree");
    let out = git::run_limited(cmd, 1 << 10);
    if let Some(c) = &copy {
        let _ = std::fs::remove_file(c);
    }
    let out = out?;
    git::ensure(&out, &["write-tree"])?;
    Ok(out.text())
}

/// The statistics and the patch (read up to `cap`) of the change from `start` to `commit`.
fn change_diff(
    common: &Path,
    start: &str,
    commit: &str,
    cap: usize,
) -> Result<(Vec<u8>, git::Out), WorkError> {
    // One diff for the statistics (`--raw` for the status letters, `--numstat` for the
    // lines) and the patch after them, read up to its cap.
    let mut cmd = git::git(common);
    cmd.args(STAT_DIFF).args(["--patch", start, commit]);
    let (stats, patch) = git::run_split(cmd, cap)?;
    if !patch.cut {
        git::ensure(&patch, &["diff"])?;
    }
    Ok((stats, patch))
}

/// Whether `a` is an ancestor of (or equal to) `b`.
fn is_ancestor(common: &Path, a: &str, b: &str) -> Result<bool, WorkError> {
    let out = git::run(common, &["merge-base", "--is-ancestor", a, b])?;
    match out.code {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => git::ensure(&out, &["merge-base"]).map(|_| false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `git ARGS` in `dir` with no user configuration and `env`; its output, trimmed.
    pub(super) fn git(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
        let o = crate::gitproc::command()
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_SYSTEM", "/dev/null")
            .envs(env.iter().copied())
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).trim_end().to_string()
    }

    #[test]
    fn a_head_keeps_its_body_and_a_copy_keeps_its_trailers() {
        assert_eq!(message_head("  \n", "fallback"), "fallback");
        assert_eq!(message_head("make it count\nmore", "f"), "make it count");
        assert_eq!(message_head("s\n\nbody line\n", "f"), "s\n\nbody line");
        assert_eq!(
            with_head("old\n\nForum-Run: 1\nForum-Task: 2\n", "new\n\nChecks"),
            "new\n\nChecks\n\nForum-Run: 1\nForum-Task: 2"
        );
    }

    #[test]
    fn idents_lose_what_git_would_drop() {
        assert_eq!(clean_ident(" .lane (m<o>del)\n;"), "lane (model)");
        assert_eq!(clean_ident("backend (gpt-4.1)"), "backend (gpt-4.1)");
    }

    #[test]
    fn a_commit_written_in_process_is_the_one_git_commit_tree_writes() {
        for format in ["sha1", "sha256"] {
            let tmp = tempfile::tempdir().unwrap();
            let repo = tmp.path();
            git(repo, &["init", "-q", "--object-format", format, "."], &[]);
            std::fs::write(repo.join("a"), "a\n").unwrap();
            git(repo, &["add", "a"], &[]);
            git(repo, &["commit", "-q", "-m", "base"], &[]);
            let base = git(repo, &["rev-parse", "HEAD"], &[]);
            let tree = git(repo, &["rev-parse", "HEAD^{tree}"], &[]);
            let work = GitWork::open(repo, "main", 1).unwrap();
            let date = gix::date::parse("1700000000 +0130", None).unwrap();
            let message = "subject\n\nForum-Run: 1\n\n";
            let ours = work
                .commit_tree(
                    &tree,
                    &[&base],
                    message,
                    ("lane (m)", "lane@x.invalid"),
                    Some(date),
                )
                .unwrap();
            // git, given the same inputs and our committer date, writes the same bytes.
            let raw = git(repo, &["cat-file", "commit", &ours], &[]);
            let committer = raw
                .lines()
                .find_map(|l| l.strip_prefix("committer lane (m) <lane@x.invalid> "))
                .unwrap()
                .to_string();
            let env = [
                ("GIT_AUTHOR_NAME", "lane (m)"),
                ("GIT_AUTHOR_EMAIL", "lane@x.invalid"),
                ("GIT_AUTHOR_DATE", "1700000000 +0130"),
                ("GIT_COMMITTER_NAME", "lane (m)"),
                ("GIT_COMMITTER_EMAIL", "lane@x.invalid"),
                ("GIT_COMMITTER_DATE", committer.as_str()),
            ];
            let theirs = git(
                repo,
                &["commit-tree", &tree, "-p", &base, "-m", message.trim_end()],
                &env,
            );
            assert_eq!(ours, theirs, "{format}");
            assert_eq!(
                work.commit_meta(&ours).unwrap(),
                (
                    "lane (m)".to_string(),
                    "lane@x.invalid".to_string(),
                    Some(date),
                    "subject\n\nForum-Run: 1\n".to_string()
                )
            );
            git(repo, &["fsck", "--strict", "--no-progress"], &[]);
            work.finish().unwrap();
        }
    }
}
