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

use super::profile::{Profile, find_program, runtime_of};
use super::{ETC, Mode, Policy, Record, SYSTEM_DIRS, System, Unusable, bwrap_argv, decide};

/// The variable that names the `bwrap` to use (a path); tests point it at a missing file.
pub(crate) const BWRAP_ENV: &str = "GIT_FORUM_BWRAP";

/// Why no usable `bwrap` was found here (the reason a record or refusal names).
#[derive(Debug, thiserror::Error)]
pub(crate) enum BwrapError {
    /// `GIT_FORUM_BWRAP` names something that is not a file.
    #[error("{BWRAP_ENV}={} is not a file", .0.display())]
    NotAFile(PathBuf),
    /// Neither the variable nor `PATH` names one.
    #[error("no bwrap on PATH")]
    NotOnPath,
    /// The program could not be started.
    #[error("cannot run {}: {source}", path.display())]
    CannotRun {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// It ran but could not make the namespaces; `last` is its last stderr line.
    #[error("{} failed: {last}", path.display())]
    Failed { path: PathBuf, last: String },
}

/// The `bwrap` this process would use, or why there is none.
pub(crate) fn find_bwrap() -> Result<PathBuf, BwrapError> {
    if let Some(p) = std::env::var_os(BWRAP_ENV).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(BwrapError::NotAFile(p))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("bwrap"))
        .find(|p| p.is_file())
        .ok_or(BwrapError::NotOnPath)
}

/// Whether `bwrap` can confine a command here: it runs `true` with the namespaces the sandbox
/// unshares; its last stderr line says why not.
pub(crate) fn probe(bwrap: &Path) -> Result<(), BwrapError> {
    let out = Command::new(bwrap)
        .args(["--unshare-all", "--die-with-parent", "--ro-bind", "/", "/"])
        .args(["--dev", "/dev", "--proc", "/proc", "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|source| BwrapError::CannotRun {
            path: bwrap.to_path_buf(),
            source,
        })?;
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
    Err(BwrapError::Failed {
        path: bwrap.to_path_buf(),
        last,
    })
}

/// The system mounts of this host (see [`SYSTEM_DIRS`] and [`ETC`]): each that exists, a link
/// made again as a link (merged `/usr` keeps `/bin -> usr/bin`), anything else bound read-only.
pub(crate) fn system_mounts() -> Vec<System> {
    let mut out = Vec::new();
    for p in SYSTEM_DIRS.iter().chain(ETC) {
        let path = Path::new(p);
        let Ok(meta) = path.symlink_metadata() else {
            continue;
        };
        if meta.file_type().is_symlink() {
            // A link under /etc (resolv.conf into /run, localtime into /usr/share) is bound
            // through: its target's content appears at its path. A top-level directory link
            // is made again as a link.
            if SYSTEM_DIRS.contains(p) {
                if let Ok(target) = std::fs::read_link(path) {
                    out.push(System::Link {
                        target,
                        at: path.to_path_buf(),
                    });
                }
            } else if path.exists() {
                out.push(System::Bind(path.to_path_buf()));
            }
        } else {
            out.push(System::Bind(path.to_path_buf()));
        }
    }
    out
}

/// What one jail shows of a task's worktree and repository.
#[derive(Debug, Clone)]
struct View {
    /// The worktree (canonical).
    worktree: PathBuf,
    /// `(source, where it appears)`, read-only.
    shows: Vec<(PathBuf, PathBuf)>,
    /// The task's writable caches, beside its worktree (`None` when they could not be made).
    caches: Option<PathBuf>,
}

/// The cache variables a confined process gets, each a folder under the task's caches.
const CACHE_VARS: &[(&str, &str)] = &[
    ("GOCACHE", "go-build"),
    ("CARGO_TARGET_DIR", "cargo-target"),
    ("npm_config_cache", "npm"),
    ("PIP_CACHE_DIR", "pip"),
    ("XDG_CACHE_HOME", "xdg"),
];

/// A working bubblewrap and the policy it confines commands under.
#[derive(Debug, Clone)]
pub(crate) struct Jail {
    bwrap: PathBuf,
    policy: Policy,
    /// The host's system mounts, read once.
    system: Arc<Vec<System>>,
    /// The worktree it confines to (`None`: the run's jail, from which each task's is made).
    view: Option<View>,
    /// What the run's profile shows beyond the system allowlist.
    profile: Arc<Profile>,
}

impl Jail {
    /// A jail over the `bwrap` at `bwrap` (found and probed by the caller).
    pub(crate) fn new(bwrap: PathBuf, policy: Policy) -> Jail {
        Jail {
            bwrap,
            policy,
            system: Arc::new(system_mounts()),
            view: None,
            profile: Arc::new(Profile::default()),
        }
    }

    /// This jail showing what `profile` shows (the run's, resolved once).
    pub(crate) fn with_profile(&self, profile: Profile) -> Jail {
        Jail {
            profile: Arc::new(profile),
            ..self.clone()
        }
    }

    /// Whether its commands keep the host's network (`--sandbox-net`).
    pub(crate) fn shares_net(&self) -> bool {
        self.policy.net
    }

    /// The hosts an agent's egress proxy admits beside its model (`--sandbox-allow-host`).
    pub(crate) fn allowed_hosts(&self) -> &[crate::egress::Allow] {
        &self.policy.allow_hosts
    }

    /// The run's profile.
    pub(crate) fn profile(&self) -> &Profile {
        &self.profile
    }

    /// This jail confined to the worktree `worktree`, showing `shows` (what the workbench
    /// says a sandbox shows of the repository there: `(source, where it appears)`, read-only).
    pub(crate) fn for_tree(&self, worktree: &Path, shows: &[(PathBuf, PathBuf)]) -> Jail {
        let worktree = worktree
            .canonicalize()
            .unwrap_or_else(|_| worktree.to_path_buf());
        // Beside the worktree, under the run's area: `AREA/.caches/TASK`.
        let caches = worktree
            .parent()
            .zip(worktree.file_name())
            .and_then(|(area, task)| {
                let dir = area.join(".caches").join(task);
                CACHE_VARS
                    .iter()
                    .all(|(_, sub)| std::fs::create_dir_all(dir.join(sub)).is_ok())
                    .then_some(dir)
            });
        Jail {
            view: Some(View {
                worktree,
                shows: shows.to_vec(),
                caches,
            }),
            ..self.clone()
        }
    }

    /// The process that runs `program` confined to its worktree, started in `dir` (which must
    /// be that worktree or below it); its arguments are the caller's to add:
    /// `bwrap ARGV -- PROGRAM`. A `program` given by an absolute path is bound read-only, so it
    /// can start wherever it lives; so is every path of the policy's `read`.
    pub(crate) fn command(
        &self,
        dir: &Path,
        program: &Path,
        listens: &[String],
    ) -> std::io::Result<Command> {
        let Some(view) = &self.view else {
            return Err(std::io::Error::other(format!(
                "{} is not a worktree git forum prepared, so nothing is run confined there",
                dir.display()
            )));
        };
        let dir = dir.canonicalize()?;
        if !dir.starts_with(&view.worktree) {
            return Err(std::io::Error::other(format!(
                "{} is outside the task's worktree {}",
                dir.display(),
                view.worktree.display()
            )));
        }
        let host_path = std::env::var("PATH").unwrap_or_default();
        let path = self.profile.path_in(&view.worktree, &host_path);
        let program = host_program(program, &path, &view.worktree)?;
        // A command that reaches the network only through the egress bridge starts under it:
        // this binary, bound read-only, runs the program as its child.
        let bridge = if listens.is_empty() {
            None
        } else {
            Some(std::env::current_exe()?)
        };
        let read_only = self.read_only(&program, &path, bridge.as_deref(), view);
        let in_tree = self.in_tree(view);
        let writable = writable(view, listens);
        let masked = masked(&read_only);
        let mut argv = bwrap_argv(
            &self.policy,
            &super::Mounts {
                worktree: &view.worktree,
                system: &self.system,
                git: &view.shows,
                read_only: &read_only,
                in_tree: &in_tree,
                writable: &writable,
                masked: &masked,
            },
        );
        if dir != view.worktree {
            // A start below the worktree: a second `--chdir` before the `--` (the last wins).
            let at = argv.len() - 1;
            argv.splice(
                at..at,
                ["--chdir".to_string(), dir.to_string_lossy().into_owned()],
            );
        }
        let mut cmd = Command::new(&self.bwrap);
        cmd.args(argv.iter().map(OsString::from));
        if let Some(exe) = &bridge {
            cmd.arg(exe).arg(crate::egress::BRIDGE_ARG);
            for l in listens {
                cmd.arg("--listen").arg(l);
            }
            cmd.arg("--");
        }
        cmd.arg(&program);
        self.set_env(&mut cmd, view, &path);
        Ok(cmd)
    }

    /// The environment a confined command in `view` gets: no git location of the host's, the
    /// profile's `PATH` (`path`) and variables, `PYTHONPATH` for an editable install, and the
    /// task's caches.
    fn set_env(&self, cmd: &mut Command, view: &View, path: &str) {
        cmd.env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .env("PATH", path);
        for (k, v) in &self.profile.env {
            cmd.env(k, v);
        }
        if let Some(p) = self.profile.python_path_in(&view.worktree) {
            cmd.env("PYTHONPATH", p);
        }
        if let Some(c) = &view.caches {
            for (var, sub) in CACHE_VARS {
                cmd.env(var, c.join(sub));
            }
        }
    }

    /// The profile's trees of the base checkout, where they appear in `view`'s worktree (a
    /// worker's symlink there is never mounted over).
    fn in_tree(&self, view: &View) -> Vec<(PathBuf, PathBuf)> {
        self.profile
            .in_tree
            .iter()
            .filter(|(src, rel)| src.exists() && !view.worktree.join(rel).is_symlink())
            .map(|(src, rel)| (src.clone(), view.worktree.join(rel)))
            .collect()
    }

    /// What a command of `program` sees read-only besides the system: the bridge, the
    /// program and its runtime, the profile's trees and the policy's `read`.
    fn read_only(
        &self,
        program: &Path,
        path: &str,
        bridge: Option<&Path>,
        view: &View,
    ) -> Vec<PathBuf> {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let mut read_only: Vec<PathBuf> = bridge.iter().map(|b| b.to_path_buf()).collect();
        if program.is_absolute() && program.is_file() && !program.starts_with(&view.worktree) {
            read_only.extend(runtime_of(program, path, home.as_deref()));
            if !read_only.iter().any(|r| program.starts_with(r)) {
                read_only.push(program.to_path_buf());
            }
        }
        read_only.extend(self.profile.read.iter().filter(|p| p.exists()).cloned());
        read_only.extend(self.policy.read.iter().filter(|p| p.exists()).cloned());
        read_only
    }
}

/// The program as the host finds it on `path`, links followed: inside, `$HOME` and `/tmp`
/// are not the host's, so a name looked up there would miss an agent installed under either.
fn host_program(program: &Path, path: &str, worktree: &Path) -> std::io::Result<PathBuf> {
    Ok(match find_program(&program.to_string_lossy(), path) {
        Some(found) if !program.starts_with(worktree) => found.canonicalize().unwrap_or(found),
        Some(_) => program.to_path_buf(),
        None if program.is_absolute() => program.to_path_buf(),
        None => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "{} is not on PATH ({path}): install it, or name it by its full path",
                    program.display()
                ),
            ));
        }
    })
}

/// The credential files inside `read_only`'s trees (see [`super::CREDENTIAL_FILES`]), shown
/// empty.
fn masked(read_only: &[PathBuf]) -> Vec<PathBuf> {
    read_only
        .iter()
        .flat_map(|r| super::CREDENTIAL_FILES.iter().map(move |f| r.join(f)))
        .filter(|f| f.is_file())
        .collect()
}

/// The task's caches, and the folders of the bridge's sockets (so the bridge inside can
/// connect to them): bound writable.
fn writable(view: &View, listens: &[String]) -> Vec<PathBuf> {
    let mut writable: Vec<PathBuf> = view.caches.iter().cloned().collect();
    for l in listens {
        if let Some(dir) = l.split_once('=').and_then(|(_, s)| Path::new(s).parent())
            && !writable.iter().any(|w| w == dir)
        {
            writable.push(dir.to_path_buf());
        }
    }
    writable
}

/// A resolved sandbox: what the record says and the jail (`None`: unconfined), or the refusal.
pub(crate) type Resolved = Result<(Record, Option<Arc<Jail>>), Unusable>;

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

    /// A sandbox already resolved to what a run's record says, with no jail: a strict replay
    /// runs no worker or check, so it never probes bubblewrap, and records what the run did.
    pub(crate) fn recorded(record: Record) -> Sandboxing {
        let resolved = OnceLock::new();
        let _ = resolved.set(Ok((record, None)));
        Sandboxing {
            mode: Mode::Off,
            policy: Policy::default(),
            resolved,
        }
    }

    /// The mode asked for.
    pub(crate) fn mode(&self) -> Mode {
        self.mode
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
                // An `Off` run never looks for bubblewrap (`decide` answers it first).
                let found = (self.mode != Mode::Off).then(|| {
                    find_bwrap()
                        .and_then(|b| probe(&b).map(|()| b))
                        .map_err(Arc::new)
                });
                let probed = found.as_ref().map_or(Ok(()), |f| f.as_ref().map(|_| ()));
                let record = decide(self.mode, &self.policy, probed)?;
                let jail = match (&record, found) {
                    (Record::Confined { .. }, Some(Ok(b))) => {
                        Some(Arc::new(Jail::new(b, self.policy.clone())))
                    }
                    _ => None,
                };
                Ok((record, jail))
            })
            .clone()
    }
}
