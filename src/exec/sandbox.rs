//! The sandbox of a `--work` run's command workers and checks (issue 18, point 3), the pure
//! part: which mode a run asked for ([`choose`]), the one argv that confines a command with
//! bubblewrap ([`bwrap_argv`]), and what the run's record says about it ([`Record`]). Finding
//! and probing `bwrap` and building the process are the adapter, [`probe`].
//!
//! What a confined command sees, mount by mount, in the order bubblewrap applies them (a later
//! mount covers an earlier one at the same or a deeper path):
//!
//! 1. the whole filesystem, read-only (`--ro-bind / /`), with a fresh `/dev` and `/proc`;
//! 2. a private, empty `/tmp`, and an empty tmpfs over the user's `$HOME` (so keys, shell
//!    history and `~/.gitconfig` are out of sight); `HOME` is set to `/tmp/home`, a scratch
//!    directory in the private `/tmp`;
//! 3. the repository's git common dir (objects, refs, `refs/forum`, the write-ahead log, the
//!    per-worktree admin dirs) bound again read-only, so it stays visible where `$HOME` or
//!    `/tmp` would hide it, and the extra read-only paths (the worker's own program file);
//! 4. the task's worktree, writable, and the working directory.
//!
//! Read-only git in the worktree works: `git status`, `git diff`, `git log` read the index and
//! the objects and skip the index refresh they cannot write; anything that writes under the
//! common dir (`git add`, `git commit`, `git update-ref`) fails with "Read-only file system".
//! git forum itself commits the worktree afterwards, outside the sandbox.
//!
//! The namespaces are all unshared (`--unshare-all`: user, ipc, pid, uts, cgroup and network);
//! `--share-net` gives the network back when the run allows it (`--sandbox-net`). The command
//! gets a new session (`--new-session`, so it cannot push keys into the terminal) and dies with
//! git forum (`--die-with-parent`). `bwrap` itself stays in the caller's process group, so
//! the kill scopes and deadlines of `crate::exec::command` still reach everything inside.

pub(crate) mod probe;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// What to tell a user whose machine has no usable bubblewrap.
pub(crate) const INSTALL_HINT: &str =
    "install bubblewrap (apt install bubblewrap, dnf install bubblewrap) or pass --no-sandbox";

/// The `HOME` a confined command gets: a scratch directory inside its private `/tmp`.
pub(crate) const SCRATCH_HOME: &str = "/tmp/home";

/// How a run asked to be confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `--sandbox` (or `[work] sandbox = true`): confined, or the run is refused.
    Required,
    /// Neither said: confined when bubblewrap works here, else unconfined and said so.
    Default,
    /// `--no-sandbox` (or `[work] sandbox = false`): unconfined, witnessed as such.
    Off,
}

/// The mode from the command line's flag (`Some(true)` `--sandbox`, `Some(false)`
/// `--no-sandbox`) and the runtime file's `[work] sandbox`; the flag wins.
pub(crate) fn choose(flag: Option<bool>, config: Option<bool>) -> Mode {
    match flag.or(config) {
        Some(true) => Mode::Required,
        Some(false) => Mode::Off,
        None => Mode::Default,
    }
}

/// What a confined command may do beyond its worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Policy {
    /// Whether it keeps the network (`--sandbox-net`).
    pub(crate) net: bool,
}

/// The paths one confined command is set up with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mounts<'a> {
    /// The task's worktree: writable, and the working directory.
    pub(crate) worktree: &'a Path,
    /// The repository's git common dir: read-only.
    pub(crate) git_common_dir: &'a Path,
    /// The user's home directory, hidden under an empty tmpfs (`None`: not set, or `/`).
    pub(crate) home: Option<&'a Path>,
    /// More paths bound read-only (the worker's program file when it lives under `$HOME` or
    /// `/tmp`), in order.
    pub(crate) read_only: &'a [PathBuf],
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The bubblewrap arguments that confine a command under `policy` with `mounts`, up to and
/// including the `--` after which the command's own argv follows. See the module doc for what
/// each mount does. A home of `/` or `/tmp` gets no tmpfs of its own (`/` would hide
/// everything; `/tmp` is private already); the worktree and the common dir are bound after
/// it, so they stay visible when they live under it.
pub(crate) fn bwrap_argv(policy: Policy, mounts: &Mounts<'_>) -> Vec<String> {
    let mut a: Vec<String> = ["--unshare-all"].map(String::from).to_vec();
    if policy.net {
        a.push("--share-net".into());
    }
    for arg in [
        "--die-with-parent",
        "--new-session",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
    ] {
        a.push(arg.into());
    }
    if let Some(home) = mounts
        .home
        .filter(|h| h.parent().is_some() && *h != Path::new("/tmp"))
    {
        a.extend(["--tmpfs".into(), s(home)]);
    }
    a.extend(["--dir".into(), SCRATCH_HOME.into()]);
    a.extend([
        "--ro-bind".into(),
        s(mounts.git_common_dir),
        s(mounts.git_common_dir),
    ]);
    for p in mounts.read_only {
        a.extend(["--ro-bind".into(), s(p), s(p)]);
    }
    a.extend(["--bind".into(), s(mounts.worktree), s(mounts.worktree)]);
    a.extend([
        "--setenv".into(),
        "HOME".into(),
        SCRATCH_HOME.into(),
        "--setenv".into(),
        "TMPDIR".into(),
        "/tmp".into(),
        "--chdir".into(),
        s(mounts.worktree),
        "--".into(),
    ]);
    a
}

/// What a run's record says about its sandbox: the `sandbox` field of the request entry's
/// `work` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Record {
    /// Workers and checks ran under bubblewrap.
    Confined {
        /// Whether they kept the network.
        net: bool,
    },
    /// They ran unconfined, for this reason (`--no-sandbox`, or why bubblewrap was not used).
    Unconfined {
        /// One line.
        reason: String,
    },
}

impl Record {
    /// The record as JSON: `{"confined": true, "tool": "bwrap", "net": false}` or
    /// `{"confined": false, "reason": "..."}`.
    pub(crate) fn payload(&self) -> Value {
        match self {
            Record::Confined { net } => json!({"confined": true, "tool": "bwrap", "net": net}),
            Record::Unconfined { reason } => json!({"confined": false, "reason": reason}),
        }
    }
}

/// What a run's mode and the probe's answer (`Ok(())`: bubblewrap works; `Err(why)`) come
/// to: the record, or the one-line refusal of a `Required` run that cannot be confined.
pub(crate) fn decide(
    mode: Mode,
    policy: Policy,
    probed: Result<(), &str>,
) -> Result<Record, String> {
    match (mode, probed) {
        (Mode::Off, _) => Ok(Record::Unconfined {
            reason: "--no-sandbox".into(),
        }),
        (_, Ok(())) => Ok(Record::Confined { net: policy.net }),
        (Mode::Required, Err(why)) => Err(format!(
            "--sandbox needs bubblewrap, which is not usable here ({why}): {INSTALL_HINT}"
        )),
        (Mode::Default, Err(why)) => Ok(Record::Unconfined {
            reason: format!("bubblewrap is not usable here ({why})"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn the_argv_confines_to_the_worktree_with_the_git_dir_read_only_and_no_network() {
        let ro = [PathBuf::from("/home/u/bin/agent")];
        let m = Mounts {
            worktree: Path::new("/r/.git/forum/work/main/3/T1"),
            git_common_dir: Path::new("/r/.git"),
            home: Some(Path::new("/home/u")),
            read_only: &ro,
        };
        let want = v(&[
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            "--tmpfs",
            "/home/u",
            "--dir",
            "/tmp/home",
            "--ro-bind",
            "/r/.git",
            "/r/.git",
            "--ro-bind",
            "/home/u/bin/agent",
            "/home/u/bin/agent",
            "--bind",
            "/r/.git/forum/work/main/3/T1",
            "/r/.git/forum/work/main/3/T1",
            "--setenv",
            "HOME",
            "/tmp/home",
            "--setenv",
            "TMPDIR",
            "/tmp",
            "--chdir",
            "/r/.git/forum/work/main/3/T1",
            "--",
        ]);
        assert_eq!(bwrap_argv(Policy::default(), &m), want);
    }

    #[test]
    fn the_network_is_shared_only_when_allowed_and_a_root_home_is_not_hidden() {
        let m = Mounts {
            worktree: Path::new("/w"),
            git_common_dir: Path::new("/g"),
            home: Some(Path::new("/")),
            read_only: &[],
        };
        let a = bwrap_argv(Policy { net: true }, &m);
        assert_eq!(a[..2], v(&["--unshare-all", "--share-net"]));
        assert_eq!(a.iter().filter(|x| *x == "--tmpfs").count(), 1, "{a:?}");
        let none = Mounts { home: None, ..m };
        let b = bwrap_argv(Policy::default(), &none);
        assert!(!b.contains(&"--share-net".to_string()));
        assert_eq!(b.last().unwrap(), "--");
    }

    #[test]
    fn the_flag_beats_the_file_and_a_required_sandbox_without_bubblewrap_is_refused() {
        assert_eq!(choose(None, None), Mode::Default);
        assert_eq!(choose(Some(false), Some(true)), Mode::Off);
        assert_eq!(choose(None, Some(true)), Mode::Required);
        let p = Policy::default();
        assert_eq!(
            decide(Mode::Default, p, Ok(())).unwrap(),
            Record::Confined { net: false }
        );
        let e = decide(Mode::Required, p, Err("no bwrap on PATH")).unwrap_err();
        assert!(
            e.contains("apt install bubblewrap") && !e.contains('\n'),
            "{e}"
        );
        let r = decide(Mode::Default, p, Err("no bwrap on PATH")).unwrap();
        assert_eq!(r.payload()["confined"], json!(false));
        assert_eq!(
            decide(Mode::Off, p, Ok(())).unwrap().payload(),
            json!({"confined": false, "reason": "--no-sandbox"})
        );
    }
}
