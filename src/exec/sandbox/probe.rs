//! The sandbox's adapter: finding `bwrap` (`GIT_FORUM_BWRAP` names it, else the first `bwrap`
//! on `PATH`), probing that it can make the namespaces here (a container without user
//! namespaces has the binary but cannot use it), and [`Jail::command`], the one place a
//! confined command's process is built: `bwrap ARGV -- PROGRAM`, with the mounts of
//! [`super::bwrap_argv`] for the worktree it runs in.
//!
//! A run holds one [`Sandboxing`]: its mode and policy, resolved (probed) once, the first
//! time the run opens its work area.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};

use super::{Mode, Policy, Record, bwrap_argv, decide};

/// The variable that names the `bwrap` to use (a path); tests point it at a missing file.
pub(crate) const BWRAP_ENV: &str = "GIT_FORUM_BWRAP";

/// The `bwrap` this process would use, or why there is none.
pub(crate) fn find_bwrap() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(BWRAP_ENV).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("{BWRAP_ENV}={} is not a file", p.display()))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("bwrap"))
        .find(|p| p.is_file())
        .ok_or_else(|| "no bwrap on PATH".to_string())
}

/// Whether `bwrap` can confine a command here: it runs `true` with the namespaces the sandbox
/// unshares; its last stderr line says why not.
pub(crate) fn probe(bwrap: &Path) -> Result<(), String> {
    let out = Command::new(bwrap)
        .args(["--unshare-all", "--die-with-parent", "--ro-bind", "/", "/"])
        .args(["--dev", "/dev", "--proc", "/proc", "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bwrap.display()))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    let last: String = last.trim().chars().take(200).collect();
    Err(format!("{} failed: {last}", bwrap.display()))
}

/// A working bubblewrap and the policy it confines commands under.
#[derive(Debug, Clone)]
pub(crate) struct Jail {
    bwrap: PathBuf,
    policy: Policy,
    /// The user's home (hidden), as this process saw `HOME`.
    home: Option<PathBuf>,
}

/// The absolute git common dir of the worktree at `dir`.
fn common_dir(dir: &Path) -> std::io::Result<PathBuf> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "--path-format=absolute", "--git-common-dir"])
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_COMMON_DIR")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || text.is_empty() {
        return Err(std::io::Error::other(format!(
            "{} is not a git worktree, so it cannot be sandboxed",
            dir.display()
        )));
    }
    Ok(PathBuf::from(text))
}

impl Jail {
    /// A jail over the `bwrap` at `bwrap` (found and probed by the caller).
    pub(crate) fn new(bwrap: PathBuf, policy: Policy) -> Jail {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        Jail {
            bwrap,
            policy,
            home,
        }
    }

    /// The process that runs `program` confined to the worktree `dir` (its arguments are the
    /// caller's to add): `bwrap ARGV -- PROGRAM`. The user's work tree (the parent of a common
    /// dir named `.git`) and an absolute `program` file are bound read-only, so they stay
    /// reachable (and unwritable) under a hidden `$HOME` or the private `/tmp`.
    pub(crate) fn command(&self, dir: &Path, program: &Path) -> std::io::Result<Command> {
        let worktree = dir.canonicalize()?;
        let common = common_dir(&worktree)?;
        let common = common.canonicalize().unwrap_or(common);
        let mut read_only = Vec::new();
        // The user's own work tree (the common dir's parent when it is a `.git`), read-only
        // rather than hidden, like the rest of the filesystem.
        if common.file_name().is_some_and(|n| n == ".git")
            && let Some(main) = common.parent()
        {
            read_only.push(main.to_path_buf());
        }
        if program.is_absolute() && program.is_file() {
            read_only.push(program.to_path_buf());
        }
        let argv = bwrap_argv(
            self.policy,
            &super::Mounts {
                worktree: &worktree,
                git_common_dir: &common,
                home: self.home.as_deref(),
                read_only: &read_only,
            },
        );
        let mut cmd = Command::new(&self.bwrap);
        cmd.args(argv.iter().map(OsString::from))
            .arg(program)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE");
        Ok(cmd)
    }
}

/// A resolved sandbox: what the record says and the jail (`None`: unconfined), or the refusal.
pub(crate) type Resolved = Result<(Record, Option<Arc<Jail>>), String>;

/// A run's sandbox: its mode and policy, and (once resolved) its record and jail.
#[derive(Debug)]
pub(crate) struct Sandboxing {
    mode: Mode,
    policy: Policy,
    resolved: OnceLock<Resolved>,
}

impl Sandboxing {
    /// A sandbox in `mode` under `policy`, not probed yet.
    pub(crate) fn new(mode: Mode, policy: Policy) -> Sandboxing {
        Sandboxing {
            mode,
            policy,
            resolved: OnceLock::new(),
        }
    }

    /// The mode asked for.
    pub(crate) fn mode(&self) -> Mode {
        self.mode
    }

    /// The policy it confines under.
    pub(crate) fn policy(&self) -> Policy {
        self.policy
    }

    /// What to tell the user when a run that would have been confined is not (the default
    /// mode where bubblewrap is not usable), once resolved; `None` otherwise.
    pub(crate) fn note(&self) -> Option<String> {
        match (self.mode, self.resolved.get()) {
            (Mode::Default, Some(Ok((Record::Unconfined { reason }, _)))) => Some(format!(
                "workers and checks run unconfined: {reason}; install bubblewrap (apt install bubblewrap) to confine them, or pass --no-sandbox to say so"
            )),
            _ => None,
        }
    }

    /// What the run's record says and the jail its commands run in (`None`: unconfined), or
    /// the one-line refusal of a `--sandbox` run where bubblewrap is not usable. Probed once.
    pub(crate) fn resolve(&self) -> Resolved {
        self.resolved
            .get_or_init(|| {
                let found = if self.mode == Mode::Off {
                    Err(String::new())
                } else {
                    find_bwrap().and_then(|b| probe(&b).map(|()| b))
                };
                let record = decide(
                    self.mode,
                    self.policy,
                    found.as_ref().map(|_| ()).map_err(String::as_str),
                )?;
                let jail = match (&record, found) {
                    (Record::Confined { .. }, Ok(b)) => Some(Arc::new(Jail::new(b, self.policy))),
                    _ => None,
                };
                Ok((record, jail))
            })
            .clone()
    }
}
