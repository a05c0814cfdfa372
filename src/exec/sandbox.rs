//! The sandbox of a `--work` run's command workers and checks, the pure part: which mode a run asked for ([`choose`]), the one argv that confines
//! a command with bubblewrap ([`bwrap_argv`]), and what the run's record says about it
//! ([`Record`]). Finding and probing `bwrap`, reading which system directories the host has,
//! and building the process are the adapter, [`probe`].
//!
//! What a confined command sees is an allowlist, mount by mount, in the order bubblewrap
//! applies them; everything else of the host is absent (not hidden: never mounted), so no home
//! directory, no unrelated tree, no `/run`, `/var` or `/etc/shadow`, and no host Unix socket:
//!
//! 1. the system's program and library directories, read-only (`/usr`, and `/bin`, `/sbin`,
//!    `/lib*` as the host has them: links into `/usr` stay links), and the `/etc` files programs
//!    need to start and to reach a network ([`ETC`]: certificates, `passwd` and `group`,
//!    `alternatives`, `resolv.conf`, `hosts`, the dynamic linker's cache...), read-only;
//! 2. a fresh `/dev` and `/proc`, a private, empty `/tmp`, and a scratch `HOME` in it
//!    (`/tmp/home`);
//! 3. what the workbench says a sandbox shows of the repository, read-only: the task's git
//!    admin directory, the objects and refs, and a configuration stripped to what reading the
//!    repository needs in place of the repository's own (`crate::work`), so `git status`,
//!    `git diff` and `git log` work in the worktree while hooks, credentials in the
//!    configuration and git forum's own state stay out of sight;
//! 4. the extra read-only paths: the worker's own program file when it is given by path, and
//!    each `--sandbox-read PATH` of the run (recorded);
//! 5. the task's worktree, writable, and the working directory; then the root itself is made
//!    read-only, so nothing new can be made beside the mounts.
//!
//! Anything that writes under the git dir (`git add`, `git commit`, `git update-ref`) fails
//! with "Read-only file system"; git forum itself commits the worktree afterwards, outside the
//! sandbox, on its own terms (`crate::work`).
//!
//! The namespaces are all unshared (`--unshare-all`: user, ipc, pid, uts, cgroup and network,
//! so no abstract Unix socket of the host is reachable either); `--share-net` gives the network
//! back when the run allows it (`--sandbox-net`), and with it the host's abstract sockets (a
//! daemon on loopback asks a credential, see `crate::serve`). The command gets a new session
//! (`--new-session`, so it cannot push keys into the terminal) and dies with git forum
//! (`--die-with-parent`). `bwrap` itself stays in the caller's process group, so the kill
//! scopes and deadlines of `crate::exec::command` still reach everything inside.

pub(crate) mod probe;
pub(crate) mod profile;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// What to tell a user whose machine has no usable bubblewrap.
pub(crate) const INSTALL_HINT: &str =
    "install bubblewrap (apt install bubblewrap, dnf install bubblewrap) or pass --no-sandbox";

/// The `HOME` a confined command gets: a scratch directory inside its private `/tmp`.
pub(crate) const SCRATCH_HOME: &str = "/tmp/home";

/// The system directories a confined command sees, when the host has them.
pub(crate) const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// The files and directories of `/etc` a confined command sees, when the host has them: what
/// programs read to start (the dynamic linker's configuration, `alternatives`, users and
/// groups by name, time zone, locale and MIME tables) and to reach a network (name service,
/// certificates).
pub(crate) const ETC: &[&str] = &[
    "/etc/alternatives",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/crypto-policies",
    "/etc/gai.conf",
    "/etc/group",
    "/etc/host.conf",
    "/etc/hosts",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/locale.alias",
    "/etc/localtime",
    "/etc/mime.types",
    "/etc/nsswitch.conf",
    "/etc/os-release",
    "/etc/passwd",
    "/etc/pki",
    "/etc/protocols",
    "/etc/resolv.conf",
    "/etc/services",
    "/etc/ssl",
    "/etc/timezone",
];

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
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Policy {
    /// Whether it keeps the network (`--sandbox-net`).
    pub(crate) net: bool,
    /// More paths it may read (`--sandbox-read PATH`, `[work] sandbox_read`), absolute.
    pub(crate) read: Vec<PathBuf>,
    /// Hosts a coding agent's egress proxy admits beside its model's endpoint
    /// (`--sandbox-allow-host HOST[:PORT]`, `[work] sandbox_allow_host`).
    pub(crate) allow_hosts: Vec<crate::egress::Allow>,
}

/// One system mount, as the host has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum System {
    /// A directory or file, bound read-only at the same path.
    Bind(PathBuf),
    /// A symbolic link (`/bin -> usr/bin`), made again inside.
    Link {
        /// Where the link points, as the host's link says.
        target: PathBuf,
        /// The link's path.
        at: PathBuf,
    },
}

/// The paths one confined command is set up with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mounts<'a> {
    /// The task's worktree: writable, and the working directory.
    pub(crate) worktree: &'a Path,
    /// The system directories and `/etc` files (see [`SYSTEM_DIRS`] and [`ETC`]).
    pub(crate) system: &'a [System],
    /// What the workbench shows of the repository: `(source, where it appears)`, read-only.
    pub(crate) git: &'a [(PathBuf, PathBuf)],
    /// More paths bound read-only at their own place (the worker's program and its runtime,
    /// the profile's trees, the policy's `read`), in order.
    pub(crate) read_only: &'a [PathBuf],
    /// Trees of the base checkout shown inside the worktree, read-only: `(source, where)`
    /// (the project's venv, its `node_modules`).
    pub(crate) in_tree: &'a [(PathBuf, PathBuf)],
    /// Folders bound writable at their own place (the task's caches).
    pub(crate) writable: &'a [PathBuf],
    /// Credential files inside the bound trees, shown empty (`/dev/null` over them).
    pub(crate) masked: &'a [PathBuf],
}

/// Files that hold credentials, by name, inside a tree the profile binds (cargo's registry
/// token, npm's and pip's upload tokens, netrc, git's stored credentials): each found is shown
/// empty.
pub(crate) const CREDENTIAL_FILES: &[&str] = &[
    "credentials.toml",
    "credentials",
    ".credentials.json",
    ".npmrc",
    ".pypirc",
    ".netrc",
    ".git-credentials",
    "auth.json",
];

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The bubblewrap arguments that confine a command under `policy` with `mounts`, up to and
/// including the `--` after which the command's own argv follows. See the module doc for what
/// each mount does.
pub(crate) fn bwrap_argv(policy: &Policy, mounts: &Mounts<'_>) -> Vec<String> {
    let mut a: Vec<String> = vec!["--unshare-all".into()];
    if policy.net {
        a.push("--share-net".into());
    }
    a.extend(["--die-with-parent".into(), "--new-session".into()]);
    for m in mounts.system {
        match m {
            System::Bind(p) => a.extend(["--ro-bind".into(), s(p), s(p)]),
            System::Link { target, at } => a.extend(["--symlink".into(), s(target), s(at)]),
        }
    }
    for arg in [
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--dir",
        SCRATCH_HOME,
    ] {
        a.push(arg.into());
    }
    for (from, to) in mounts.git {
        a.extend(["--ro-bind".into(), s(from), s(to)]);
    }
    for p in mounts.read_only {
        a.extend(["--ro-bind".into(), s(p), s(p)]);
    }
    a.extend(["--bind".into(), s(mounts.worktree), s(mounts.worktree)]);
    for (from, to) in mounts.in_tree {
        a.extend(["--ro-bind".into(), s(from), s(to)]);
    }
    for p in mounts.writable {
        a.extend(["--bind".into(), s(p), s(p)]);
    }
    for p in mounts.masked {
        a.extend(["--ro-bind".into(), "/dev/null".into(), s(p)]);
    }
    // The root holds only the mount points made above: nothing new may be made there.
    a.extend(["--remount-ro".into(), "/".into()]);
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
        /// The extra paths they could read (`--sandbox-read`).
        read: Vec<String>,
        /// The hosts an agent's egress admitted beside its model (`--sandbox-allow-host`).
        allow_hosts: Vec<String>,
        /// What the run's profile showed them (the project's environment and toolchains,
        /// see [`profile`]).
        bound: Vec<String>,
    },
    /// They ran unconfined, for this reason (`--no-sandbox`, or why bubblewrap was not used).
    Unconfined {
        /// One line.
        reason: String,
    },
}

impl Record {
    /// The record as JSON: `{"confined": true, "tool": "bwrap", "net": false}` (with
    /// `"read": [PATH...]` when the run added paths, `"allow_hosts": [HOST:PORT...]` when it
    /// widened an agent's egress, and `"bound": [PATH...]` when its profile showed more) or `{"confined": false, "reason": "..."}`.
    pub(crate) fn payload(&self) -> Value {
        match self {
            Record::Confined {
                net,
                read,
                allow_hosts,
                bound,
            } => {
                let mut v = json!({"confined": true, "tool": "bwrap", "net": net});
                if !read.is_empty() {
                    v["read"] = json!(read);
                }
                if !allow_hosts.is_empty() {
                    v["allow_hosts"] = json!(allow_hosts);
                }
                if !bound.is_empty() {
                    v["bound"] = json!(bound);
                }
                v
            }
            Record::Unconfined { reason } => json!({"confined": false, "reason": reason}),
        }
    }
}

/// The refusal of a `--sandbox` run where bubblewrap is not usable, with the probe's reason.
#[derive(Debug, Clone, thiserror::Error)]
#[error("--sandbox needs bubblewrap, which is not usable here ({why}): {INSTALL_HINT}")]
pub(crate) struct Unusable {
    /// Why not (shared: a run's resolved sandbox is handed to each caller).
    #[source]
    pub(crate) why: std::sync::Arc<probe::BwrapError>,
}

/// What a run's mode and the probe's answer (`Ok(())`: bubblewrap works; `Err(why)`) come
/// to: the record, or the one-line refusal of a `Required` run that cannot be confined.
pub(crate) fn decide(
    mode: Mode,
    policy: &Policy,
    probed: Result<(), &std::sync::Arc<probe::BwrapError>>,
) -> Result<Record, Unusable> {
    match (mode, probed) {
        (Mode::Off, _) => Ok(Record::Unconfined {
            reason: "--no-sandbox".into(),
        }),
        (_, Ok(())) => Ok(Record::Confined {
            net: policy.net,
            read: policy.read.iter().map(|p| s(p)).collect(),
            allow_hosts: policy.allow_hosts.iter().map(|a| a.to_string()).collect(),
            bound: Vec::new(),
        }),
        (Mode::Required, Err(why)) => Err(Unusable { why: why.clone() }),
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
    fn the_argv_shows_an_allowlist_the_git_view_read_only_and_the_worktree_writable() {
        let ro = [PathBuf::from("/home/u/bin/agent")];
        let system = [
            System::Bind("/usr".into()),
            System::Link {
                target: "usr/bin".into(),
                at: "/bin".into(),
            },
            System::Bind("/etc/passwd".into()),
        ];
        let git = [
            (
                PathBuf::from("/r/.git/objects"),
                PathBuf::from("/r/.git/objects"),
            ),
            (
                PathBuf::from("/c/work/r-1/main/3/.private/sandbox-config"),
                PathBuf::from("/r/.git/config"),
            ),
        ];
        let m = Mounts {
            worktree: Path::new("/c/work/r-1/main/3/T1"),
            system: &system,
            git: &git,
            read_only: &ro,
            in_tree: &[],
            writable: &[],
            masked: &[],
        };
        let want = v(&[
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--ro-bind",
            "/usr",
            "/usr",
            "--symlink",
            "usr/bin",
            "/bin",
            "--ro-bind",
            "/etc/passwd",
            "/etc/passwd",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            "--dir",
            "/tmp/home",
            "--ro-bind",
            "/r/.git/objects",
            "/r/.git/objects",
            "--ro-bind",
            "/c/work/r-1/main/3/.private/sandbox-config",
            "/r/.git/config",
            "--ro-bind",
            "/home/u/bin/agent",
            "/home/u/bin/agent",
            "--bind",
            "/c/work/r-1/main/3/T1",
            "/c/work/r-1/main/3/T1",
            "--remount-ro",
            "/",
            "--setenv",
            "HOME",
            "/tmp/home",
            "--setenv",
            "TMPDIR",
            "/tmp",
            "--chdir",
            "/c/work/r-1/main/3/T1",
            "--",
        ]);
        assert_eq!(bwrap_argv(&Policy::default(), &m), want);
        // Nothing of the host is bound wholesale.
        assert!(!want.windows(3).any(|w| w[0] == "--ro-bind" && w[1] == "/"));
    }

    #[test]
    fn the_network_is_shared_only_when_allowed() {
        let m = Mounts {
            worktree: Path::new("/w"),
            system: &[],
            git: &[],
            read_only: &[],
            in_tree: &[],
            writable: &[],
            masked: &[],
        };
        let net = Policy {
            net: true,
            ..Policy::default()
        };
        let a = bwrap_argv(&net, &m);
        assert_eq!(a[..2], v(&["--unshare-all", "--share-net"]));
        let b = bwrap_argv(&Policy::default(), &m);
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
            decide(Mode::Default, &p, Ok(())).unwrap(),
            Record::Confined {
                net: false,
                read: Vec::new(),
                allow_hosts: Vec::new(),
                bound: Vec::new(),
            }
        );
        let none = std::sync::Arc::new(probe::BwrapError::NotOnPath);
        let e = decide(Mode::Required, &p, Err(&none))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("apt install bubblewrap") && !e.contains('\n'),
            "{e}"
        );
        let r = decide(Mode::Default, &p, Err(&none)).unwrap();
        assert_eq!(r.payload()["confined"], json!(false));
        assert_eq!(
            decide(Mode::Off, &p, Ok(())).unwrap().payload(),
            json!({"confined": false, "reason": "--no-sandbox"})
        );
        let reads = Policy {
            net: false,
            read: vec!["/opt/tool".into()],
            allow_hosts: vec![crate::egress::Allow::parse("PyPI.org").unwrap()],
        };
        assert_eq!(
            decide(Mode::Required, &reads, Ok(())).unwrap().payload(),
            json!({"confined": true, "tool": "bwrap", "net": false, "read": ["/opt/tool"],
                   "allow_hosts": ["pypi.org:443"]})
        );
    }
}
