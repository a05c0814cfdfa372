//! The repository as context, the git half: a context provider that gives
//! the planner a map of the repository (`git ls-files`, the README's head) and each task the
//! tracked files most relevant to its instruction (`git grep -l` on its terms, then the files,
//! trimmed). What to look for, how to rank and how to render is [`crate::context::repo`];
//! every git output and every file is read up to a bound. What configures the run is not part
//! of the work and is left out: `.forum/`, and every file a seat's executor names (its
//! program, and the files its arguments name, such as a scripted worker's own script). A run's context budget then meters
//! the text like any provider's, and the run witnesses it as `context`. On a small repository
//! whose answers git would give the same way, the paths and the greps are answered in this
//! process instead of by a `git` each ([`super::repo_scan`]).

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use super::repo_scan::{GitDirs, Scan};
use crate::context::repo::{self, Limits};
use crate::exec::config::{ExecutorKind, Runtime};
use crate::ledger::Storage;
use crate::run::{ContextFailure, ContextProvider};
use crate::work::git;

/// The most bytes of `git ls-files` read (about 40,000 paths of 100 bytes).
const LS_FILES_LIMIT: usize = 4 << 20;
/// The most bytes of one `git grep -l` read.
const GREP_LIMIT: usize = 1 << 20;
/// How many of a task's `git grep`s run at once.
const GREPS_AT_ONCE: usize = 4;
/// Up to this many searched files, a task's greps answered in this process run one after
/// another on its own thread.
const GREP_INLINE_FILES: usize = 64;

/// The repository provider of a work tree.
pub(crate) struct RepoContext {
    top: PathBuf,
    /// Where its git files are, when `git rev-parse` said (an older git may not).
    dirs: Option<GitDirs>,
    /// The index as read once per run, when this process answers for `git ls-files` and
    /// `git grep` ([`super::repo_scan`]); `None` inside: git answers.
    scan: OnceLock<Option<Scan>>,
    limits: Limits,
    paths: OnceLock<Result<Vec<String>, ContextFailure>>,
    /// What each term's `git grep` found, read once per run like the paths: tasks share most
    /// of their terms, and one asking for a term another is looking for waits for its answer.
    greps: Mutex<HashMap<String, Found>>,
    /// Paths (relative to `top`, as git prints them) left out of the context, besides
    /// everything under `.forum/`.
    leave_out: Vec<String>,
}

/// The files one term's `git grep` found, once it has run.
type Found = Arc<OnceLock<Result<Vec<String>, ContextFailure>>>;

/// The directory of the run's own configuration, never context.
const CONFIG_DIR: &str = ".forum/";

/// The paths the executors of `rt` name: each command's program and every argument (or the
/// value of an `--option=VALUE` argument) that could be a path. Which of them are files in the
/// repository is decided against the work tree ([`RepoContext::leaving_out`]).
pub(crate) fn seat_paths(rt: &Runtime) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (_, spec) in rt.in_use() {
        if let ExecutorKind::Command { argv, .. } = &spec.kind {
            for a in argv {
                let value = a.split_once('=').map_or(a.as_str(), |(_, v)| v);
                for p in [a.as_str(), value] {
                    if !p.is_empty() && !p.starts_with('-') {
                        out.push(PathBuf::from(p));
                    }
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

fn failure(message: String) -> ContextFailure {
    ContextFailure {
        code: "repo".into(),
        message,
    }
}

/// NUL-separated paths, as `-z` prints them.
fn nul_list(out: &[u8]) -> Vec<String> {
    out.split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect()
}

/// The start of a file: at most `max` bytes, as text up to the last whole character; `None`
/// when it cannot be read or is not text (holds a NUL byte).
fn read_head(path: &Path, max: usize) -> Option<String> {
    let f = std::fs::File::open(path).ok()?;
    let mut buf = Vec::new();
    f.take(max as u64).read_to_end(&mut buf).ok()?;
    if buf.contains(&0) {
        return None;
    }
    match std::str::from_utf8(&buf) {
        Ok(s) => Some(s.to_string()),
        // Cut inside a character (or not UTF-8 past some point): keep what is whole.
        Err(e) if e.valid_up_to() > 0 => {
            Some(String::from_utf8_lossy(&buf[..e.valid_up_to()]).into_owned())
        }
        Err(_) => None,
    }
}

/// Where the work tree `dir` is in has its top and its git files, as `git rev-parse` says:
/// `None` in no work tree.
fn locate(dir: &Path) -> Option<(String, Option<GitDirs>)> {
    let rev_parse = |args: &[&str]| {
        let mut c = git::git(dir);
        c.arg("rev-parse").args(args);
        git::run_limited(c, 64 << 10).ok().filter(|o| o.ok)
    };
    // The work tree, and in the same git where its index is: a git too old for the
    // last two is asked for the work tree alone.
    match rev_parse(&[
        "--show-toplevel",
        "--absolute-git-dir",
        "--show-object-format",
    ]) {
        Some(out) => {
            let text = out.text();
            let mut lines = text.lines();
            let top = lines.next().unwrap_or_default().to_string();
            let git_dir = lines.next().map(PathBuf::from);
            let kind = lines.next().and_then(|f| match f {
                "sha1" => Some(gix::hash::Kind::Sha1),
                "sha256" => Some(gix::hash::Kind::Sha256),
                _ => None,
            });
            let dirs = git_dir
                .zip(kind)
                .map(|(git_dir, kind)| GitDirs { git_dir, kind });
            Some((top, dirs))
        }
        None => Some((rev_parse(&["--show-toplevel"])?.text(), None)),
    }
}

/// A `git rev-parse` for the repository context under way on a thread of its own, begun
/// before the run's configuration is loaded so that its process runs beside that work (see
/// [`RepoContext::open_located`]). Dropped unfinished (the run was refused first), it waits
/// for its thread, so no `git` outlives the caller's interest.
pub(crate) struct Locating(Option<std::thread::JoinHandle<Located>>);

/// The directory located, and what `git rev-parse` said of it.
type Located = (PathBuf, Option<(String, Option<GitDirs>)>);

impl Locating {
    /// Begins locating the work tree of `dir`.
    pub(crate) fn start(dir: &Path) -> Locating {
        let dir = dir.to_path_buf();
        Locating(Some(std::thread::spawn(move || {
            let found = locate(&dir);
            (dir, found)
        })))
    }

    /// Waits for the answer (`None` if its thread panicked).
    pub(crate) fn finish(mut self) -> Option<Located> {
        self.0.take()?.join().ok()
    }
}

impl Drop for Locating {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            let _ = t.join();
        }
    }
}

impl RepoContext {
    /// The provider of the work tree `dir` is in, or `None` when `dir` is in no work tree (a
    /// bare repository, or no repository).
    pub(crate) fn open(dir: &Path, limits: Limits) -> Option<RepoContext> {
        RepoContext::of(locate(dir), limits)
    }

    /// [`open`](Self::open) with the `git rev-parse` that `start_locating(dir)` began (a
    /// locating begun for another directory is waited for and set aside).
    pub(crate) fn open_located(
        located: Locating,
        dir: &Path,
        limits: Limits,
    ) -> Option<RepoContext> {
        match located.finish() {
            Some((for_dir, found)) if for_dir == dir => RepoContext::of(found, limits),
            _ => RepoContext::open(dir, limits),
        }
    }

    fn of(found: Option<(String, Option<GitDirs>)>, limits: Limits) -> Option<RepoContext> {
        let (top, dirs) = found?;
        (!top.is_empty()).then(|| RepoContext {
            top: PathBuf::from(top),
            dirs,
            scan: OnceLock::new(),
            limits,
            paths: OnceLock::new(),
            greps: Mutex::new(HashMap::new()),
            leave_out: Vec::new(),
        })
    }

    /// Leaves out of the context every file of `paths` (relative ones taken from `dir`, where
    /// the run was started) that is in this work tree.
    pub(crate) fn leaving_out(mut self, dir: &Path, paths: &[PathBuf]) -> RepoContext {
        let top = self.top.canonicalize().unwrap_or_else(|_| self.top.clone());
        for p in paths {
            let Ok(full) = dir.join(p).canonicalize() else {
                continue;
            };
            if full.is_file()
                && let Ok(rel) = full.strip_prefix(&top)
                && let Some(rel) = rel.to_str()
            {
                self.leave_out.push(rel.to_string());
            }
        }
        self
    }

    /// Whether the tracked path `p` may be context.
    fn kept(&self, p: &str) -> bool {
        !p.starts_with(CONFIG_DIR) && !self.leave_out.iter().any(|l| l == p)
    }

    fn git(&self, args: &[&str], limit: usize) -> Result<git::Out, ContextFailure> {
        let mut c = git::git(&self.top);
        c.args(args);
        git::run_limited(c, limit).map_err(|e| failure(e.to_string()))
    }

    /// The index read in this process, once per run, when it can answer for git.
    fn scan(&self) -> Option<&Scan> {
        self.scan
            .get_or_init(|| self.dirs.as_ref().and_then(|d| Scan::read(&self.top, d)))
            .as_ref()
    }

    /// The tracked paths, read once per run.
    fn paths(&self) -> Result<&[String], ContextFailure> {
        let got = self.paths.get_or_init(|| {
            let out = match self.scan() {
                Some(scan) => scan.ls_files(LS_FILES_LIMIT),
                None => self.git(&["ls-files", "-z"], LS_FILES_LIMIT)?,
            };
            if !out.ok && !out.cut {
                return Err(failure(format!("git ls-files failed: {}", out.message)));
            }
            // Cut: the paths read so far, less the one the cut fell inside.
            let mut paths = nul_list(&out.stdout);
            if out.cut {
                paths.pop();
            }
            paths.retain(|p| self.kept(p));
            Ok(paths)
        });
        match got {
            Ok(p) => Ok(p),
            Err(f) => Err(f.clone()),
        }
    }

    /// [`RepoContext::grep`], run once per term and run.
    fn grep_once(&self, term: &str) -> Result<Vec<String>, ContextFailure> {
        let found = {
            let mut greps = self.greps.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(greps.entry(term.to_string()).or_default())
        };
        found.get_or_init(|| self.grep(term)).clone()
    }

    /// The files whose text holds `term` (case-insensitively, text files only).
    fn grep(&self, term: &str) -> Result<Vec<String>, ContextFailure> {
        let out = match self.scan().and_then(|s| s.grep(term, GREP_LIMIT)) {
            Some(out) => out,
            None => self.git(
                &["grep", "-l", "-z", "-I", "-i", "-F", "-e", term, "--"],
                GREP_LIMIT,
            )?,
        };
        // Exit 1 is "no match".
        if !out.ok && out.code != Some(1) && !out.cut {
            return Err(failure(format!("git grep failed: {}", out.message)));
        }
        let mut files = nul_list(&out.stdout);
        files.retain(|p| self.kept(p));
        Ok(files)
    }
}

impl ContextProvider for RepoContext {
    fn request_context(&self, _: &str, _: &dyn Storage) -> Result<String, ContextFailure> {
        let paths = self.paths()?;
        let readme = repo::readme(paths).and_then(|name| {
            read_head(&self.top.join(name), self.limits.readme_bytes + 4).map(|t| (name, t))
        });
        Ok(repo::map(
            paths,
            readme.as_ref().map(|(n, t)| (*n, t.as_str())),
            &self.limits,
        ))
    }

    fn task_context(&self, _: &str, instruction: &str) -> Option<Result<String, ContextFailure>> {
        let run = || -> Result<String, ContextFailure> {
            let paths = self.paths()?;
            if paths.is_empty() {
                return Ok(String::new());
            }
            // One `git grep` per term not looked for yet in this run, [`GREPS_AT_ONCE`] at a
            // time: a task waits for the slowest of each group, not for the sum.
            let terms = repo::terms(instruction, self.limits.terms);
            let mut found: Vec<Result<Vec<String>, ContextFailure>> = Vec::new();
            // Answered in this process from a few files, the greps run on this thread: each
            // takes microseconds, less than starting a thread.
            let inline = self.scan().is_some_and(|s| {
                s.searched_files() <= GREP_INLINE_FILES && terms.iter().all(|t| s.greps(t))
            });
            if inline {
                found.extend(terms.iter().map(|t| self.grep_once(t)));
            }
            for group in terms.chunks(GREPS_AT_ONCE).filter(|_| !inline) {
                std::thread::scope(|s| {
                    let each: Vec<_> = group
                        .iter()
                        .map(|t| s.spawn(|| self.grep_once(t)))
                        .collect();
                    found.extend(each.into_iter().map(|h| {
                        h.join()
                            .unwrap_or_else(|_| Err(failure("git grep: its thread failed".into())))
                    }));
                });
            }
            let mut hits = Vec::new();
            for (t, files) in terms.into_iter().zip(found) {
                hits.push((t, files?));
            }
            let files: Vec<(String, String)> = repo::rank(&hits, paths, self.limits.task_files)
                .into_iter()
                .filter_map(|p| {
                    read_head(&self.top.join(&p), self.limits.file_bytes + 4).map(|t| (p, t))
                })
                .collect();
            Ok(repo::task_files(&files, &self.limits))
        };
        match run() {
            Ok(t) if t.is_empty() => None,
            other => Some(other),
        }
    }

    fn describe(&self) -> String {
        format!("the repository at {}", self.top.display())
    }
}

/// Two providers as one: the first's context, then the second's, each part only when it is
/// not empty. A failure of either is the failure of both (and witnessed as such).
pub(crate) struct Chained(
    pub(crate) Arc<dyn ContextProvider>,
    pub(crate) Arc<dyn ContextProvider>,
);

/// Two parts of a context as one, as a run joins them.
pub(crate) fn join(a: String, b: String) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b,
        (_, true) => a,
        _ => format!("{a}\n\n{b}"),
    }
}

impl ContextProvider for Chained {
    fn request_context(
        &self,
        request: &str,
        ledger: &dyn Storage,
    ) -> Result<String, ContextFailure> {
        let a = self.0.request_context(request, ledger)?;
        let b = self.1.request_context(request, ledger)?;
        Ok(join(a, b))
    }

    fn task_context(
        &self,
        task_id: &str,
        instruction: &str,
    ) -> Option<Result<String, ContextFailure>> {
        match (
            self.0.task_context(task_id, instruction),
            self.1.task_context(task_id, instruction),
        ) {
            (None, None) => None,
            (Some(Err(e)), _) | (_, Some(Err(e))) => Some(Err(e)),
            (a, b) => Some(Ok(join(
                a.and_then(Result::ok).unwrap_or_default(),
                b.and_then(Result::ok).unwrap_or_default(),
            ))),
        }
    }

    fn describe(&self) -> String {
        format!("{}, then {}", self.0.describe(), self.1.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::repo::DEFAULT_LIMITS;

    fn init(dir: &Path) {
        let out = crate::gitproc::in_dir(dir)
            .args(["init", "-q"])
            .output()
            .unwrap();
        assert!(out.status.success());
    }

    fn top_of(r: &RepoContext) -> PathBuf {
        r.top.canonicalize().unwrap()
    }

    #[test]
    fn a_work_tree_located_early_is_the_one_opened_and_another_directory_is_asked_again() {
        let (a, b, outside) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        init(a.path());
        init(b.path());
        let at_a = RepoContext::open_located(Locating::start(a.path()), a.path(), DEFAULT_LIMITS);
        assert_eq!(top_of(&at_a.unwrap()), a.path().canonicalize().unwrap());
        // Located for a, opened for b: b's own answer.
        let at_b = RepoContext::open_located(Locating::start(a.path()), b.path(), DEFAULT_LIMITS);
        assert_eq!(top_of(&at_b.unwrap()), b.path().canonicalize().unwrap());
        // No work tree: no provider, as `open` says.
        let none = RepoContext::open_located(
            Locating::start(outside.path()),
            outside.path(),
            DEFAULT_LIMITS,
        );
        assert!(none.is_none());
        assert!(RepoContext::open(outside.path(), DEFAULT_LIMITS).is_none());
        // Dropped unfinished, a locating waits for its git (nothing is left running).
        drop(Locating::start(a.path()));
    }
}
