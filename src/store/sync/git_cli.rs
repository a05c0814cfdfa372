//! Running the `git` program for network work: one [`Git`] per repository, every command's
//! output read up to a bound (a hostile remote can print without end), and one-line failures.

use std::path::PathBuf;
use std::process::{Command, Output};

use gix::ObjectId;
use gix::hash::Kind as HashKind;

use super::SEEN_PREFIX;
use crate::store::git::StoreError;

/// The most of git's standard output or error read from one command (a hostile remote can make
/// `git push` or `git fetch` print `remote:` lines without end).
pub(super) const GIT_OUTPUT_LIMIT: u64 = 256 << 20;

/// The bound on each of git's outputs: [`GIT_OUTPUT_LIMIT`], or less when
/// `GIT_FORUM_GIT_OUTPUT_LIMIT` (bytes) asks for less, for tests.
fn output_limit() -> u64 {
    std::env::var("GIT_FORUM_GIT_OUTPUT_LIMIT")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(GIT_OUTPUT_LIMIT)
        .min(GIT_OUTPUT_LIMIT)
}

/// Runs the `git` binary against one repository.
pub(crate) struct Git {
    git_dir: PathBuf,
}

impl Git {
    /// Runs git for `repo` (its own git dir, so worktrees and hooks resolve as git would).
    pub(crate) fn for_repo(repo: &gix::Repository) -> Git {
        Git {
            git_dir: repo.git_dir().to_path_buf(),
        }
    }

    /// A `git --git-dir DIR` command with stdin closed; git may still ask for a credential on
    /// the terminal, as the user's own `git push` and `git fetch` do.
    pub(crate) fn command(&self) -> Command {
        let mut c = crate::gitproc::at_git_dir(&self.git_dir);
        crate::gitproc::allow_terminal_prompt(&mut c);
        c
    }

    /// Runs `git ARGS` and returns its output, whatever its exit status.
    pub(crate) fn run(&self, args: &[&str]) -> Result<Output, StoreError> {
        let mut c = self.command();
        c.args(args);
        Ok(crate::gitproc::output(c, None, output_limit())?)
    }

    /// Runs `git ARGS` with `input` on stdin.
    pub(crate) fn run_with_input(&self, args: &[&str], input: &[u8]) -> Result<Output, StoreError> {
        let mut c = self.command();
        c.args(args);
        Ok(crate::gitproc::output(c, Some(input), output_limit())?)
    }

    /// Runs `git ARGS`; a non-zero exit becomes one line naming `what` and git's reason.
    pub(crate) fn run_ok(&self, args: &[&str], what: &str) -> Result<String, StoreError> {
        let o = self.run(args)?;
        if !o.status.success() {
            return Err(StoreError::Git(format!(
                "{what} failed: {}",
                failure_line(&o)
            )));
        }
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// Full names of the refs under `prefix` (which ends in `/`).
    pub(crate) fn refs_under(&self, prefix: &str) -> Result<Vec<(String, String)>, StoreError> {
        let out = self.run_ok(
            &[
                "for-each-ref",
                "--format=%(refname) %(objectname)",
                "--",
                prefix,
            ],
            "listing refs",
        )?;
        Ok(out
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(r, o)| (r.to_string(), o.to_string()))
            .collect())
    }

    /// One atomic ref transaction (`git update-ref --stdin`).
    pub(crate) fn update_refs(&self, message: &str, lines: &str) -> Result<(), StoreError> {
        let o = self.run_with_input(&["update-ref", "-m", message, "--stdin"], lines.as_bytes())?;
        if !o.status.success() {
            return Err(StoreError::Git(format!(
                "updating refs failed: {}; nothing was changed",
                failure_line(&o)
            )));
        }
        Ok(())
    }

    /// The URL configured for remote `name`, if any.
    pub(crate) fn remote_url(&self, name: &str) -> Result<Option<String>, StoreError> {
        let key = format!("remote.{name}.url");
        let o = self.run(&["config", "--get", &key])?;
        if o.status.success() {
            Ok(Some(String::from_utf8_lossy(&o.stdout).trim().to_string()))
        } else {
            Ok(None)
        }
    }

    /// Names of the configured remotes.
    pub(crate) fn remotes(&self) -> Result<Vec<String>, StoreError> {
        let out = self.run_ok(&["remote"], "listing remotes")?;
        Ok(out.lines().map(|l| l.trim().to_string()).collect())
    }
}

/// The one line of git's stderr that says what went wrong.
pub(crate) fn failure_line(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let pick = lines
        .iter()
        .find(|l| l.starts_with("fatal:"))
        .or_else(|| lines.iter().find(|l| l.starts_with("error:")))
        .or_else(|| lines.first());
    match pick {
        Some(l) => l
            .trim_start_matches("fatal:")
            .trim_start_matches("error:")
            .trim()
            .to_string(),
        None => format!("git exited with {}", o.status),
    }
}

/// Checks that `remote` names a configured remote that can serve as a ref-name component.
pub(crate) fn check_remote_name(git: &Git, remote: &str) -> Result<(), StoreError> {
    let bad = |why: &str| {
        Err(StoreError::Invalid(format!(
            "invalid remote name {remote:?}: {why}"
        )))
    };
    if remote.is_empty() {
        return bad("it is empty");
    }
    if remote.starts_with('-') {
        return bad("it starts with '-'");
    }
    if gix::refs::FullName::try_from(format!("{SEEN_PREFIX}{remote}/x")).is_err()
        || remote.contains(':')
        || remote.ends_with('/')
    {
        return bad("it cannot be part of a ref name; use the name of a configured remote");
    }
    if git.remote_url(remote)?.is_none() {
        return Err(StoreError::Invalid(format!(
            "no remote named {remote:?} is configured; add it with `git remote add {remote} URL` (see `git remote -v`)"
        )));
    }
    Ok(())
}

pub(super) fn zero_oid(hash: HashKind) -> String {
    ObjectId::null(hash).to_string()
}

pub(super) fn is_zero(oid: &str) -> bool {
    !oid.is_empty() && oid.bytes().all(|b| b == b'0')
}
