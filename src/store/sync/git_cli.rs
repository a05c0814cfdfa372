//! Running the `git` program for network work: one [`Git`] per repository, every command's
//! output read up to a bound (a hostile remote can print without end), and one-line failures.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

use gix::ObjectId;
use gix::hash::Kind as HashKind;

use super::SEEN_PREFIX;
use crate::store::git::{StoreError, git_err};

/// The most of git's standard output or error read from one command (a hostile remote can make
/// `git push` or `git fetch` print `remote:` lines without end).
pub(super) const GIT_OUTPUT_LIMIT: u64 = 256 << 20;

/// Waits for `child`, reading its stdout and stderr up to [`GIT_OUTPUT_LIMIT`] each; past that
/// the child is killed and the command fails with one line.
fn bounded_output(mut child: Child, args: &[&str]) -> Result<Output, StoreError> {
    // `GIT_FORUM_GIT_OUTPUT_LIMIT` (bytes) lowers it, for tests.
    let limit = std::env::var("GIT_FORUM_GIT_OUTPUT_LIMIT")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(GIT_OUTPUT_LIMIT)
        .min(GIT_OUTPUT_LIMIT);
    let pid = rustix::process::Pid::from_child(&child);
    let read = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(r) = r {
                let _ = r.take(limit + 1).read_to_end(&mut buf);
            }
            if buf.len() as u64 > limit {
                // Stop it now: otherwise it blocks on this full pipe and never closes the other.
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
            buf
        })
    };
    let out = read(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err = read(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if stdout.len() as u64 > limit || stderr.len() as u64 > limit {
        let _ = child.kill();
        let _ = child.wait();
        return Err(StoreError::Git(format!(
            "git {} printed more than {} MiB; stopped it (a remote that talks without end?)",
            args.iter().find(|a| !a.starts_with('-')).unwrap_or(&""),
            (limit >> 20).max(1)
        )));
    }
    let status = child.wait().map_err(spawn_error)?;
    Ok(Output {
        status,
        stdout,
        stderr,
    })
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

    /// A `git --git-dir DIR` command with stdin closed.
    pub(crate) fn command(&self) -> Command {
        let mut c = Command::new("git");
        c.arg("--git-dir")
            .arg(&self.git_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// Runs `git ARGS` and returns its output, whatever its exit status.
    pub(crate) fn run(&self, args: &[&str]) -> Result<Output, StoreError> {
        let child = self
            .command()
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(spawn_error)?;
        bounded_output(child, args)
    }

    /// Runs `git ARGS` with `input` on stdin.
    pub(crate) fn run_with_input(&self, args: &[&str], input: &[u8]) -> Result<Output, StoreError> {
        let mut child = self
            .command()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(spawn_error)?;
        let stdin = child.stdin.take();
        let input = input.to_vec();
        // Written on its own thread, so that git's output is read while it reads its input.
        let writer = std::thread::spawn(move || {
            stdin
                .map(|mut s| s.write_all(&input))
                .transpose()
                .map(|_| ())
        });
        let out = bounded_output(child, args);
        writer
            .join()
            .unwrap_or(Ok(()))
            .map_err(|e| git_err("writing to git", e))?;
        out
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

pub(super) fn spawn_error(e: std::io::Error) -> StoreError {
    StoreError::Git(format!(
        "cannot run git ({e}); install git and make sure it is on PATH"
    ))
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
