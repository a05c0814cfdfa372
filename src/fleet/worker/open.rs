//! How a worker opens a task's worktree: the task's base fetched from the remote (unless the
//! clone has it already), then a detached worktree on it; when the worktree cannot be checked
//! out because objects of the base are missing here, the base is fetched again (see
//! [`open_with`]).

use std::io::Read as _;
use std::path::{Path, PathBuf};

use super::super::protocol::TaskMessage;
use super::super::writer::git_line;
use super::Worker;

/// How a task's base is fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fetch {
    /// An ordinary fetch: what the clone lacks of the commits its refs reach is sent.
    Plain,
    /// `--refetch`: every object, as for a fresh clone, for a base whose objects are gone
    /// although a ref here reaches it (an ordinary fetch then sends nothing).
    Again,
}

impl Worker<'_> {
    /// Fetches `from` of the remote into the local ref `local` (moved whatever it held).
    pub(super) fn fetch_to(&self, from: &str, local: &str) -> Result<String, String> {
        self.fetch_with(from, local, Fetch::Plain)
    }

    fn fetch_with(&self, from: &str, local: &str, how: Fetch) -> Result<String, String> {
        let spec = format!("+{from}:{local}");
        // No auto maintenance after each fetch: a worker's commits still trigger it.
        let mut args = vec![
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--no-auto-maintenance",
        ];
        if how == Fetch::Again {
            args.push("--refetch");
        }
        args.extend([self.o.remote.as_str(), spec.as_str()]);
        git_line(&self.o.repo, &args)
    }

    /// Opens a detached worktree at `tree` on the task's base, fetched first unless the clone
    /// has that commit already (the tasks of a wave share their base: one fetch serves them
    /// all). A base whose tree cannot be checked out here is fetched again ([`open_with`]).
    pub(super) fn open(&self, task: &TaskMessage, tree: &Path) -> Result<(), String> {
        let here = format!("{}^{{commit}}", task.base);
        let had = git_line(&self.o.repo, &["cat-file", "-e", &here]).is_ok();
        let add = || {
            let _guard = self.turn.lock();
            let path = tree.to_string_lossy();
            let args = ["worktree", "add", "--quiet", "--detach", &path, &task.base];
            git_line(&self.o.repo, &args).map(|_| ())
        };
        open_with(had, |how| self.fetch_base(task, how), add)
    }

    /// Fetches the task's base from the remote and makes sure the ref there held it.
    fn fetch_base(&self, task: &TaskMessage, how: Fetch) -> Result<(), String> {
        let local = format!("refs/forum/worker/{}", task.attempt);
        self.fetch_with(&task.base_ref, &local, how)
            .map_err(|e| format!("cannot fetch the task's base: {e}"))?;
        let got = git_line(
            &self.o.repo,
            &["rev-parse", "--verify", &format!("{local}^{{commit}}")],
        )?;
        let _ = git_line(&self.o.repo, &["update-ref", "-d", &local]);
        if got != task.base {
            return Err(format!(
                "{} on the remote holds {got}, not the task's base {}",
                task.base_ref, task.base
            ));
        }
        Ok(())
    }
}

/// The steps of opening a worktree, with the fetches (`fetch`) and the checkout (`add`) given:
/// the base is fetched first unless the clone `had` its commit; when the checkout then fails,
/// objects of the base may be missing here. A commit here that no ref reaches (written by a
/// fetch or a copy that was cut short, without all of its tree) is mended by an ordinary fetch,
/// so that comes first when the fetch was skipped; a base a ref here reaches, with objects
/// removed since, is not (git sees the commit reachable and sends nothing), so a refetch is the
/// last try. The error is the last step's.
fn open_with(
    had: bool,
    mut fetch: impl FnMut(Fetch) -> Result<(), String>,
    mut add: impl FnMut() -> Result<(), String>,
) -> Result<(), String> {
    if !had {
        fetch(Fetch::Plain)?;
    }
    if add().is_ok() {
        return Ok(());
    }
    if had {
        fetch(Fetch::Plain)?;
        if add().is_ok() {
            return Ok(());
        }
    }
    fetch(Fetch::Again)?;
    add()
}

/// The admin directory git made for the worktree `tree`, read (before the seat runs) from the
/// `.git` file `git worktree add` wrote there when it names an absolute directory, else asked
/// of `git rev-parse --absolute-git-dir` (a relative link, or anything unexpected).
pub(super) fn admin_dir(tree: &Path) -> Result<PathBuf, String> {
    let link = std::fs::File::open(tree.join(".git")).and_then(|f| {
        let mut text = String::new();
        f.take(4096).read_to_string(&mut text).map(|_| text)
    });
    if let Some(dir) = link.ok().as_deref().and_then(named_dir)
        && dir.is_dir()
    {
        return Ok(dir);
    }
    git_line(tree, &["rev-parse", "--absolute-git-dir"]).map(PathBuf::from)
}

/// The absolute directory a worktree's `.git` file (`gitdir: PATH` and a newline) names.
fn named_dir(text: &str) -> Option<PathBuf> {
    let line = text.strip_prefix("gitdir: ")?.strip_suffix('\n')?;
    let path = PathBuf::from(line);
    (!line.contains('\n') && path.is_absolute()).then_some(path)
}

/// The commit the worktree whose admin directory is `admin` is detached at, read from its
/// `HEAD` when that holds an object id, else asked of `git rev-parse HEAD`.
pub(super) fn detached_head(
    admin: &Path,
    rev_parse: impl FnOnce() -> Result<String, String>,
) -> Result<String, String> {
    let head = std::fs::File::open(admin.join("HEAD")).and_then(|f| {
        let mut text = String::new();
        f.take(128).read_to_string(&mut text).map(|_| text)
    });
    match head.ok().as_deref().map(str::trim) {
        Some(h)
            if matches!(h.len(), 40 | 64)
                && h.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) =>
        {
            Ok(h.to_string())
        }
        _ => rev_parse(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Runs [`open_with`] where the checkout succeeds from its `ok_from`-th try on (1-based;
    /// 0: never) and a fetch of the kinds in `failing` fails; returns the outcome and the steps
    /// taken, in order.
    fn steps(had: bool, ok_from: usize, failing: &[Fetch]) -> (Result<(), String>, Vec<String>) {
        let log = RefCell::new(Vec::new());
        let adds = RefCell::new(0);
        let out = open_with(
            had,
            |how| {
                log.borrow_mut().push(format!("fetch {how:?}"));
                if failing.contains(&how) {
                    Err(format!("{how:?} failed"))
                } else {
                    Ok(())
                }
            },
            || {
                *adds.borrow_mut() += 1;
                log.borrow_mut().push("add".into());
                if ok_from != 0 && *adds.borrow() >= ok_from {
                    Ok(())
                } else {
                    Err(format!("add {} failed", adds.borrow()))
                }
            },
        );
        (out, log.into_inner())
    }

    #[test]
    fn a_base_the_clone_lacks_is_fetched_then_checked_out() {
        let (out, log) = steps(false, 1, &[]);
        assert_eq!(out, Ok(()));
        assert_eq!(log, ["fetch Plain", "add"]);
    }

    #[test]
    fn a_base_the_clone_has_whole_is_checked_out_without_a_fetch() {
        let (out, log) = steps(true, 1, &[]);
        assert_eq!(out, Ok(()));
        assert_eq!(log, ["add"]);
    }

    #[test]
    fn a_base_the_clone_has_without_its_tree_is_fetched_after_the_checkout_failed() {
        let (out, log) = steps(true, 2, &[]);
        assert_eq!(out, Ok(()));
        assert_eq!(log, ["add", "fetch Plain", "add"]);
    }

    #[test]
    fn a_base_an_ordinary_fetch_does_not_mend_is_fetched_again_whole() {
        let (out, log) = steps(true, 3, &[]);
        assert_eq!(out, Ok(()));
        assert_eq!(log, ["add", "fetch Plain", "add", "fetch Again", "add"]);
        // Fetched, yet not checked out: the refetch is the one more try.
        let (out, log) = steps(false, 2, &[]);
        assert_eq!(out, Ok(()));
        assert_eq!(log, ["fetch Plain", "add", "fetch Again", "add"]);
    }

    #[test]
    fn a_checkout_that_never_works_or_a_fetch_that_fails_ends_in_its_error() {
        let (out, log) = steps(true, 0, &[]);
        assert_eq!(out, Err("add 3 failed".into()));
        assert_eq!(log, ["add", "fetch Plain", "add", "fetch Again", "add"]);
        let (out, log) = steps(true, 0, &[Fetch::Plain]);
        assert_eq!(out, Err("Plain failed".into()));
        assert_eq!(log, ["add", "fetch Plain"]);
        let (out, log) = steps(false, 1, &[Fetch::Plain]);
        assert_eq!(out, Err("Plain failed".into()));
        assert_eq!(log, ["fetch Plain"]);
        let (out, log) = steps(true, 0, &[Fetch::Again]);
        assert_eq!(out, Err("Again failed".into()));
        assert_eq!(log, ["add", "fetch Plain", "add", "fetch Again"]);
    }

    #[test]
    fn a_worktree_link_names_its_admin_directory_only_when_it_is_absolute_and_one_line() {
        assert_eq!(
            named_dir("gitdir: /r/.git/worktrees/tree\n"),
            Some(PathBuf::from("/r/.git/worktrees/tree"))
        );
        assert_eq!(named_dir("gitdir: ../.git/worktrees/tree\n"), None);
        assert_eq!(named_dir("gitdir: /r/.git/worktrees/tree"), None);
        assert_eq!(named_dir("gitdir: /a\n/b\n"), None);
        assert_eq!(named_dir("/r/.git/worktrees/tree\n"), None);
    }

    #[test]
    fn a_detached_head_is_read_from_its_file_and_anything_else_is_asked_of_git() {
        let dir = tempfile::tempdir().unwrap();
        let asked = || Ok::<_, String>("asked".to_string());
        let id = "0123456789abcdef0123456789abcdef01234567";
        std::fs::write(dir.path().join("HEAD"), format!("{id}\n")).unwrap();
        assert_eq!(detached_head(dir.path(), asked).unwrap(), id);
        for other in [
            "ref: refs/heads/main\n",
            "0123456789ABCDEF0123456789ABCDEF01234567\n",
            "abc\n",
            "",
        ] {
            std::fs::write(dir.path().join("HEAD"), other).unwrap();
            assert_eq!(
                detached_head(dir.path(), asked).unwrap(),
                "asked",
                "{other:?}"
            );
        }
        std::fs::remove_file(dir.path().join("HEAD")).unwrap();
        assert_eq!(detached_head(dir.path(), asked).unwrap(), "asked");
    }
}
