//! The command executor's process handling: run a program with the prompt as its last argument
//! (no shell), in its own process group, with a deadline that kills the whole group
//! (grandchildren too) and stdout/stderr captured up to a cap while the rest is drained and
//! dropped, so a flood neither blocks the child nor grows memory.
//!
//! A non-zero exit, a timeout, a spawn failure and output that is not UTF-8 are distinct errors.
//!
//! Kill scopes: a command started while its thread is [`in_scope`] belongs to that scope, and
//! [`stop_scope`] kills the process groups of that scope's commands (and refuses new ones in
//! it) without touching any other scope; [`stop_all`] stops every command of the process. A
//! run's [`crate::run::Interrupt`] owns one scope, so cancelling one run kills its commands
//! at once while the other runs of a daemon go on.
//!
//! Working directory: a command started while its thread is [`in_workdir`] runs in that
//! directory (a `--work` run's task worktree); otherwise in the process's. A thread-local, like
//! the kill scope, so neither the [`crate::exec::Call`] nor the chat executors change.
//!
//! Sandbox: a command started while its thread is [`in_jail`] and [`in_workdir`] runs under
//! that jail (`crate::exec::sandbox`), confined to the working directory; [`prepared`] builds
//! the process, for [`run`] and for the checks of `crate::work`.
//!
//! Environment: every process built here gets an environment made from an allowlist
//! ([`env`]), plus the variables its executor names ([`run_with`], [`prepared_with`]), never
//! git forum's whole environment.
//!
//! The whole tree: in the `git-forum` binary ([`use_reaper`]), an unconfined command runs under
//! a [`reaper`] of git forum's own, so stopping it (its deadline, its end, a halt, a signal)
//! stops every process it started, `setsid` and double-forked ones included; the reaper is told
//! through a pipe, not a signal, so a kill of the group never takes it before it has done its
//! job. A confined command is stopped whole by its sandbox's pid namespace.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ChildStdin;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use super::sandbox::probe::Jail;

pub(crate) mod call_ctx;
pub(crate) mod env;
mod forked;
mod output;
mod proc_walk;
pub(crate) mod watchdog;

pub(crate) use call_ctx::{
    LiveCall, Metered, allowance, allowed_commands, bridge_listens, in_allowance, in_allowed,
    in_bridge, in_live, in_stopper, live_sink, note_agent_reported, note_egress_seen, note_metered,
    take_agent_reported, take_egress_seen, take_metered,
};
pub mod reaper;

use forked::{Leader, start_forked};
pub(crate) use output::OnLine;
use output::{Stream, stdout_text, tail};
use watchdog::Watch;
pub(crate) use watchdog::{Heard, in_heard, in_stall};

/// The reaper is this binary again: the path works even when the file was replaced on disk.
const SELF_EXE: &str = "/proc/self/exe";

/// Whether unconfined commands run under the [`reaper`] (turned on by the binary).
static REAPER: AtomicBool = AtomicBool::new(false);

/// Runs every unconfined command of this process under the [`reaper`] from now on. For the
/// `git-forum` binary, whose `main` answers [`reaper::REAP_ARG`] first; a library user (the
/// unit tests) that does not call it runs each command in a process group of its own.
pub fn use_reaper() {
    if Path::new(SELF_EXE).exists() {
        REAPER.store(true, Ordering::Relaxed);
    }
}

/// Whether `cmd` is a command under the reaper (built by [`prepared_with`]).
fn is_reaped(cmd: &Command) -> bool {
    cmd.get_program() == SELF_EXE
        && cmd
            .get_args()
            .next()
            .is_some_and(|a| a.as_bytes() == reaper::REAP_ARG.as_bytes())
}

/// The reaper's control channel: its stdin (see [`reaper`]).
type Control = Arc<Mutex<Option<ChildStdin>>>;

/// Tells a reaper `what` (`t`: terminate, `k`: kill); a reaper already gone is not an error.
fn tell(control: &Control, what: u8) {
    use std::io::Write;
    let mut c = control.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(pipe) = c.as_mut()
        && pipe.write_all(&[what]).and_then(|()| pipe.flush()).is_err()
    {
        *c = None;
    }
}

/// A command running now: its process group (the reaper's, under one), the kill scope it was
/// started in, and the reaper's control channel when it has one.
#[derive(Clone)]
struct Running {
    scope: Option<u64>,
    control: Option<Control>,
}

impl Running {
    /// Asks it to end: SIGTERM to its group, or to every process of its tree (the reaper's).
    fn terminate(&self, pgid: u32) {
        match &self.control {
            Some(c) => tell(c, b't'),
            None => signal_group(pgid, rustix::process::Signal::TERM),
        }
    }

    /// Kills it: its group, or every process of its tree (the reaper's).
    fn kill(&self, pgid: u32) {
        match &self.control {
            Some(c) => tell(c, b'k'),
            None => kill_group(pgid),
        }
    }
}

/// The process groups of the commands running now (each with the scope it was started in and
/// its reaper's control channel), whether new ones are refused (after [`stop_all`]), and the
/// scopes stopped. Process groups are the process's, so this is too.
struct Live {
    groups: BTreeMap<u32, Running>,
    stopped: bool,
    stopped_scopes: BTreeSet<u64>,
}

static LIVE: Mutex<Live> = Mutex::new(Live {
    groups: BTreeMap::new(),
    stopped: false,
    stopped_scopes: BTreeSet::new(),
});

impl Live {
    /// Whether a command in `scope` is refused (or, once running, was stopped).
    fn refuses(&self, scope: Option<u64>) -> bool {
        self.stopped || scope.is_some_and(|s| self.stopped_scopes.contains(&s))
    }
}

static NEXT_SCOPE: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The scope this thread's commands start in.
    static SCOPE: Cell<Option<u64>> = const { Cell::new(None) };
    /// The directory this thread's commands start in (`None`: the process's).
    static WORKDIR: RefCell<Option<PathBuf>> = const { RefCell::new(None) };
    /// The sandbox this thread's commands in a working directory start in.
    static JAIL: RefCell<Option<Arc<Jail>>> = const { RefCell::new(None) };
}

/// Whether this thread's confined commands keep the host's network (`--sandbox-net`).
pub(crate) fn jail_shares_net() -> bool {
    JAIL.with(|c| c.borrow().as_ref().is_some_and(|j| j.shares_net()))
}

/// The hosts the egress of this thread's confined agent admits beside its model
/// (`--sandbox-allow-host`); empty when it runs unconfined.
pub(crate) fn jail_allowed_hosts() -> Vec<crate::egress::Allow> {
    JAIL.with(|c| {
        c.borrow()
            .as_ref()
            .map(|j| j.allowed_hosts().to_vec())
            .unwrap_or_default()
    })
}

/// Runs `f` with the commands this thread starts in a working directory confined by `jail`
/// (`None`: unconfined); the thread's previous jail comes back afterwards.
pub(crate) fn in_jail<T>(jail: Option<Arc<Jail>>, f: impl FnOnce() -> T) -> T {
    call_ctx::scoped(&JAIL, jail, f)
}

/// What the sandbox of this thread's commands shows beyond the system folders and the
/// worktree (its profile, listed), or `None` when they run unconfined.
pub(crate) fn jail_shows() -> Option<Vec<String>> {
    JAIL.with(|c| c.borrow().as_ref().map(|j| j.profile().listed()))
}

/// The process that runs `program` in `dir` (`None`: the process's directory), confined when
/// this thread is [`in_jail`] and `dir` is given, with the allowlisted environment
/// ([`env`]) and nothing more; the caller adds the arguments.
pub(crate) fn prepared(program: &Path, dir: Option<&Path>) -> std::io::Result<Command> {
    prepared_with(program, dir, &[])
}

/// [`prepared`], with the variables of `passed` (the names its executor gives) added to the
/// environment where they are set.
pub(crate) fn prepared_with(
    program: &Path,
    dir: Option<&Path>,
    passed: &[String],
) -> std::io::Result<Command> {
    let jail = JAIL.with(|c| c.borrow().clone());
    let (mut cmd, confined) = match (jail, dir) {
        (Some(j), Some(d)) => (j.command(d, program, &bridge_listens())?, true),
        (_, dir) => {
            let mut cmd = Command::new(program);
            if let Some(d) = dir {
                cmd.current_dir(d);
            }
            (cmd, false)
        }
    };
    let vars = env::of(passed, confined);
    if !confined && REAPER.load(Ordering::Relaxed) {
        let mut reaped = Command::new(SELF_EXE);
        reaped
            .arg0("git-forum")
            .arg(reaper::REAP_ARG)
            .arg(cmd.get_program())
            .args(cmd.get_args());
        if let Some(d) = cmd.get_current_dir() {
            reaped.current_dir(d);
        }
        cmd = reaped;
    }
    // What the jail set on its process itself stays (its HOME and TMPDIR are bwrap arguments,
    // which the clearing does not touch either); everything else is the allowlist's.
    let own: Vec<(std::ffi::OsString, std::ffi::OsString)> = cmd
        .get_envs()
        .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned())))
        .collect();
    cmd.env_clear().envs(vars).envs(own);
    Ok(cmd)
}

/// Starts `cmd` in its own process group and registers it under `scope` (or kills it at once
/// when that scope was stopped while it started). A command under the reaper gets a pipe as
/// stdin, its control channel (the reaper gives the program `/dev/null`).
fn start(
    mut cmd: Command,
    scope: Option<u64>,
) -> std::io::Result<(std::process::Child, u32, Running)> {
    let reaped = is_reaped(&cmd);
    if reaped {
        cmd.stdin(Stdio::piped());
    }
    let mut child = cmd.process_group(0).spawn()?;
    drop(cmd);
    let pgid = child.id();
    let control = reaped.then(|| Arc::new(Mutex::new(child.stdin.take())));
    Ok((child, pgid, register(pgid, scope, control)))
}

/// Registers the command whose process group is `pgid` under `scope`, or kills it at once
/// when that scope was stopped while it started.
fn register(pgid: u32, scope: Option<u64>, control: Option<Control>) -> Running {
    let running = Running { scope, control };
    let mut l = live();
    if l.refuses(scope) {
        running.kill(pgid);
    } else {
        l.groups.insert(pgid, running.clone());
    }
    running
}

/// The read end of a command's stdout or stderr pipe.
type Pipe = std::os::fd::OwnedFd;

/// Starts a command whose stdout and stderr are pipes (under a cloned reaper when it is to run
/// under the reaper), registered as [`start`] registers it: its leader, its two pipes, its
/// process group and how it runs.
#[allow(clippy::type_complexity)]
fn start_piped(
    cmd: Command,
    scope: Option<u64>,
) -> std::io::Result<(Box<dyn Leader + Send>, Pipe, Pipe, u32, Running)> {
    if is_reaped(&cmd) {
        let (st, pgid, running) = start_forked(cmd, scope)?;
        return Ok((
            Box::new(st.reaper),
            st.stdout.into(),
            st.stderr.into(),
            pgid,
            running,
        ));
    }
    let (mut child, pgid, running) = self::start(cmd, scope)?;
    let out = child.stdout.take().expect("piped").into();
    let err = child.stderr.take().expect("piped").into();
    Ok((Box::new(child), out, err, pgid, running))
}

/// How long a reaper told to kill has to report its command's end before its group is killed
/// outright (it kills, then reaps, so this is far more than it needs).
const REAPER_BOUND: Duration = Duration::from_secs(15);

/// Kills a command at its deadline and waits for it: the group, or the tree through its
/// reaper (then the group too, should the reaper not end within [`REAPER_BOUND`]).
fn kill_and_wait(child: &mut dyn Leader, pgid: u32, running: &Running) -> Option<ExitStatus> {
    running.kill(pgid);
    if running.control.is_some() {
        let until = Instant::now() + REAPER_BOUND;
        while Instant::now() < until {
            match child.try_wait() {
                Ok(Some(s)) => return Some(s),
                Ok(None) => thread::sleep(Duration::from_millis(5)),
                Err(_) => break,
            }
        }
        kill_group(pgid);
    }
    child.wait().ok()
}

/// Runs `f` with the commands this thread starts in it running in `dir`; the thread's previous
/// working directory comes back afterwards.
pub(crate) fn in_workdir<T>(dir: &Path, f: impl FnOnce() -> T) -> T {
    call_ctx::scoped(&WORKDIR, Some(dir.to_path_buf()), f)
}

/// The directory this thread's commands start in, when it is [`in_workdir`].
pub(crate) fn workdir() -> Option<PathBuf> {
    WORKDIR.with(|c| c.borrow().clone())
}

/// Whether this thread's scope was stopped (its run is being interrupted) or every command of
/// the process was: what a call that is not a process (a model call over HTTP) checks while it
/// waits, so that it can give up at once.
pub(crate) fn scope_stopped() -> bool {
    let scope = SCOPE.with(Cell::get);
    live().refuses(scope)
}

/// A fresh kill scope, distinct from every other of this process.
pub(crate) fn new_scope() -> u64 {
    NEXT_SCOPE.fetch_add(1, Ordering::Relaxed)
}

/// Runs `f` with the commands this thread starts in it registered under `scope`; the thread's
/// previous scope comes back afterwards.
pub(crate) fn in_scope<T>(scope: u64, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<u64>);
    impl Drop for Restore {
        fn drop(&mut self) {
            SCOPE.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(SCOPE.with(|c| c.replace(Some(scope))));
    f()
}

/// How long a stopped command's process group has between SIGTERM and SIGKILL.
pub(crate) const STOP_GRACE: Duration = Duration::from_millis(500);

/// Kills the process groups of the commands running in `scope` and refuses to start any more
/// in it; other scopes and later scopes are untouched. Returns how many groups were stopped.
pub(crate) fn stop_scope(scope: u64) -> usize {
    let mut l = live();
    l.stopped_scopes.insert(scope);
    let groups: Vec<(u32, Running)> = l
        .groups
        .iter()
        .filter(|(_, r)| r.scope == Some(scope))
        .map(|(p, r)| (*p, r.clone()))
        .collect();
    drop(l);
    stop_groups(groups)
}

/// Asks each command to terminate (SIGTERM to its group, or to its whole tree through its
/// reaper), then kills it after [`STOP_GRACE`] if it is still registered under the same scope
/// (its leader not reaped yet, so its id cannot have been reused). A command whose leader exits
/// on SIGTERM has the rest of its group killed at once by its own runner ([`run`],
/// [`run_grouped`]).
fn stop_groups(groups: Vec<(u32, Running)>) -> usize {
    for (pgid, r) in &groups {
        r.terminate(*pgid);
    }
    let n = groups.len();
    if n > 0 {
        thread::spawn(move || {
            thread::sleep(STOP_GRACE);
            let l = live();
            for (pgid, r) in groups {
                if l.groups.get(&pgid).is_some_and(|now| now.scope == r.scope) {
                    r.kill(pgid);
                }
            }
        });
    }
    n
}

/// Forgets a scope that will start no more commands (its owner is gone).
pub(crate) fn forget_scope(scope: u64) {
    live().stopped_scopes.remove(&scope);
}

fn live() -> MutexGuard<'static, Live> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Kills the process group of every command running now (workers, context commands,
/// verifiers, grandchildren included; SIGTERM, then SIGKILL after [`STOP_GRACE`]) and refuses
/// to start any more in this process; for an interrupted `git forum`. Returns how many groups
/// were stopped.
pub(crate) fn stop_all() -> usize {
    let mut l = live();
    l.stopped = true;
    let groups: Vec<(u32, Running)> = l.groups.iter().map(|(p, r)| (*p, r.clone())).collect();
    drop(l);
    stop_groups(groups)
}

/// Limits for one run.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub timeout: Duration,
    /// Bytes of stdout kept; the rest is read and dropped.
    pub max_stdout: usize,
    /// Bytes of stderr kept (its tail explains a failure).
    pub max_stderr: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            timeout: Duration::from_secs(60),
            max_stdout: 8 * 1024 * 1024,
            max_stderr: 64 * 1024,
        }
    }
}

/// What a successful run printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ran {
    pub(crate) stdout: String,
    /// True when stdout was longer than the cap and was cut.
    pub(crate) truncated: bool,
    pub(crate) stderr: String,
    pub(crate) elapsed: Duration,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("cannot run {program:?}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{program:?} did not finish within {}s; it was killed with its process group", timeout.as_secs_f64())]
    Timeout { program: String, timeout: Duration },
    #[error("{program:?} {}; the watchdog ended it with its whole process tree", crate::observe::Stall::reason(*quiet))]
    Stalled { program: String, quiet: Duration },
    #[error("{program:?} exited with {status}{}", tail(stderr))]
    Failed {
        program: String,
        status: ExitStatus,
        stderr: String,
    },
    #[error("{program:?} printed output that is not UTF-8 (first bad byte at offset {offset})")]
    NotUtf8 { program: String, offset: usize },
    #[error("{0}")]
    Empty(String),
    #[error("{program:?} was stopped or not started: its run is being interrupted")]
    Interrupted { program: String },
}

/// Kills every process of the group `pgid`; a group already gone is not an error.
fn kill_group(pgid: u32) {
    signal_group(pgid, rustix::process::Signal::KILL);
}

/// Sends `signal` to every process of the group `pgid`; a group already gone is not an error.
fn signal_group(pgid: u32, signal: rustix::process::Signal) {
    if let Some(pid) = rustix::process::Pid::from_raw(pgid as i32) {
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}

/// Runs `argv` (program first) with `prompt` appended as the last argument, with the
/// allowlisted environment only.
pub(crate) fn run(argv: &[String], prompt: &str, limits: Limits) -> Result<Ran, CommandError> {
    run_with(argv, prompt, limits, &[])
}

/// [`run`], with the variables of `passed` (the names its executor gives) added to the
/// environment where they are set.
pub(crate) fn run_with(
    argv: &[String],
    prompt: &str,
    limits: Limits,
    passed: &[String],
) -> Result<Ran, CommandError> {
    run_setting(argv, prompt, limits, passed, &[])
}

/// [`run_with`], with the variables of `set` set to their values as well (a preset's quiet
/// settings and its private state folders: places and switches, never credentials).
pub(crate) fn run_setting(
    argv: &[String],
    prompt: &str,
    limits: Limits,
    passed: &[String],
    set: &[(String, String)],
) -> Result<Ran, CommandError> {
    run_watching(argv, prompt, limits, passed, set, None)
}

/// [`run_setting`], handing each line of stdout to `on_line` while the command runs (an
/// agent's progress), from the thread that reads it; the whole output is still returned at
/// the end, as [`run_setting`] returns it.
pub(crate) fn run_watching(
    argv: &[String],
    prompt: &str,
    limits: Limits,
    passed: &[String],
    set: &[(String, String)],
    on_line: Option<OnLine<'_>>,
) -> Result<Ran, CommandError> {
    let Some((program, args)) = argv.split_first() else {
        return Err(CommandError::Empty("the command is empty".into()));
    };
    let interrupted = || CommandError::Interrupted {
        program: program.clone(),
    };
    let scope = SCOPE.with(Cell::get);
    if live().refuses(scope) {
        return Err(interrupted());
    }
    let start = Instant::now();
    let workdir = WORKDIR.with(|c| c.borrow().clone());
    let resolved = resolve_program(program, workdir.as_deref());
    let spawn_failed = |source| CommandError::Spawn {
        program: program.clone(),
        source,
    };
    let mut cmd = prepared_with(&resolved, workdir.as_deref(), passed).map_err(spawn_failed)?;
    cmd.envs(set.iter().map(|(k, v)| (k, v)));
    cmd.args(args)
        .arg(prompt)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Registered, or killed at once when an interruption came while it started.
    let (mut child, out, err, pgid, running) = start_piped(cmd, scope).map_err(spawn_failed)?;
    let streams = [
        Stream::new(out, limits.max_stdout, on_line),
        Stream::new(err, limits.max_stderr, None),
    ];
    let deadline = start + limits.timeout;
    let (status, ended, (stdout, truncated), (stderr, _)) =
        wait_reading(&mut *child, deadline, pgid, &running, streams);
    let stopped = call_ctx::stop_requested();
    if (stopped || live().refuses(scope)) && !status.is_some_and(|s| s.success()) {
        return Err(interrupted());
    }
    let stderr = String::from_utf8_lossy(&stderr).into_owned();
    if running.control.is_some()
        && let Some(why) = spawn_failure(status, &stderr)
    {
        return Err(CommandError::Spawn {
            program: program.clone(),
            source: std::io::Error::other(why),
        });
    }
    ended.failure(program, limits.timeout)?;
    finished(
        program,
        status,
        (stdout, truncated),
        stderr,
        start.elapsed(),
    )
}

/// Waits for the child as [`wait_until`] does while this thread reads both its pipes (no
/// reader threads), then kills its group (a grandchild holding the pipes goes with it) and
/// reads both pipes to their ends: its status, how the wait ended, and what each pipe kept.
#[allow(clippy::type_complexity)]
fn wait_reading(
    child: &mut dyn Leader,
    deadline: Instant,
    pgid: u32,
    running: &Running,
    mut streams: [Stream<'_>; 2],
) -> (Option<ExitStatus>, Ended, (Vec<u8>, bool), (Vec<u8>, bool)) {
    let watch = &Watch::new();
    let buf = &mut vec![0u8; 64 * 1024];
    let waiting = (&mut streams[..], &mut buf[..]);
    let (status, ended) = wait_until(child, deadline, pgid, running, watch, waiting);
    kill_group(pgid);
    live().groups.remove(&pgid);
    while streams.iter().any(Stream::is_open) {
        output::pump(&mut streams, None, None, watch, buf);
    }
    let [out, err] = streams;
    (status, ended, out.finish(), err.finish())
}

/// How a command that ended by itself went: its output, or why it failed.
fn finished(
    program: &str,
    status: Option<ExitStatus>,
    (stdout, truncated): (Vec<u8>, bool),
    stderr: String,
    elapsed: Duration,
) -> Result<Ran, CommandError> {
    let status = status.ok_or_else(|| CommandError::Empty(format!("lost track of {program:?}")))?;
    if !status.success() {
        return Err(CommandError::Failed {
            program: program.to_string(),
            status,
            stderr,
        });
    }
    Ok(Ran {
        stdout: stdout_text(stdout, truncated, program)?,
        truncated,
        stderr,
        elapsed,
    })
}

/// The program to start: a relative program path (`./model.sh`) names a file where git forum
/// was started, not in the task's worktree.
fn resolve_program(program: &str, workdir: Option<&Path>) -> PathBuf {
    match workdir {
        Some(_) if program.contains('/') && Path::new(program).is_relative() => {
            std::env::current_dir().map_or_else(|_| PathBuf::from(program), |d| d.join(program))
        }
        _ => PathBuf::from(program),
    }
}

/// How a wait for a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// It exited (or was stopped by a request, or lost).
    Exited,
    /// Its deadline passed: it was killed.
    Deadline,
    /// It was quiet this long: the watchdog killed it.
    Stalled(Duration),
}

impl Ended {
    /// The failure of a command `program` that ended this way, if it was cut short.
    fn failure(self, program: &str, timeout: Duration) -> Result<(), CommandError> {
        let program = program.to_string();
        match self {
            Ended::Deadline => Err(CommandError::Timeout { program, timeout }),
            Ended::Stalled(quiet) => Err(CommandError::Stalled { program, quiet }),
            Ended::Exited => Ok(()),
        }
    }
}

/// Waits for the child until `deadline` (or until `watch` finds it stalled), then kills its
/// group: its status (if one could be read) and how the wait ended.
fn wait_until(
    child: &mut dyn Leader,
    deadline: Instant,
    pgid: u32,
    running: &Running,
    watch: &Watch,
    (streams, buf): (&mut [Stream<'_>], &mut [u8]),
) -> (Option<ExitStatus>, Ended) {
    let exited = output::exit_notice(child.leader_id());
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return (Some(status), Ended::Exited),
            Ok(None) if Instant::now() >= deadline => {
                return (kill_and_wait(child, pgid, running), Ended::Deadline);
            }
            Ok(None) if call_ctx::stop_requested() => {
                return (kill_and_wait(child, pgid, running), Ended::Exited);
            }
            Ok(None) if let Some(quiet) = watch.stalled() => {
                return (kill_and_wait(child, pgid, running), Ended::Stalled(quiet));
            }
            // Woken at once when the child ends or writes, else after the pause to look
            // again at the deadline and the stop request.
            Ok(None) => output::pump(streams, exited.as_ref(), Some(STOP_POLL), watch, buf),
            Err(_) => return (None, Ended::Exited),
        }
    }
}

/// How often a wait looks at its deadline and its stop request.
const STOP_POLL: Duration = Duration::from_millis(5);

/// The reaper's word that it could not start the program (its exit code and the line it
/// wrote last on stderr), if that is how the command ended.
fn spawn_failure(status: Option<ExitStatus>, stderr: &str) -> Option<String> {
    if status?.code()? != reaper::SPAWN_FAILED_CODE {
        return None;
    }
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty())?;
    last.strip_prefix(reaper::SPAWN_FAILED).map(str::to_string)
}

/// How a command run by [`run_grouped`] ended.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Grouped {
    /// Its exit status; `None` when it was killed at the deadline or lost.
    pub(crate) status: Option<ExitStatus>,
    /// Whether the deadline killed it.
    pub(crate) timed_out: bool,
    /// Whether its kill scope was stopped (or refused it) before it finished.
    pub(crate) interrupted: bool,
    /// How long it ran.
    pub(crate) elapsed: Duration,
}

/// Runs a command the caller prepared (directory, environment and output already set) in its
/// own process group, registered under this thread's kill scope like [`run`]'s commands, and
/// kills the whole group (the whole tree, under the reaper) at the deadline and again once the
/// command exits (so nothing it left behind keeps its pipes open). Under the reaper the
/// command's stdin is `/dev/null`, whatever the caller set. `cmd` is dropped once spawned, closing this process's copies
/// of the pipe ends the caller gave it. For the checks of a `--work` run (`crate::work`).
pub(crate) fn run_grouped(cmd: Command, timeout: Duration) -> std::io::Result<Grouped> {
    let scope = SCOPE.with(Cell::get);
    let start = Instant::now();
    let refused = |elapsed| Grouped {
        status: None,
        timed_out: false,
        interrupted: true,
        elapsed,
    };
    if live().refuses(scope) {
        return Ok(refused(start.elapsed()));
    }
    let (mut child, pgid, running) = self::start(cmd, scope)?;
    let deadline = start + timeout;
    let mut timed_out = false;
    // Polled: a command that ends at once (a `true` check) is seen within a fraction of a
    // millisecond, a long one every 5 ms at most.
    let mut pause = Duration::from_micros(100);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => {
                timed_out = true;
                let _ = kill_and_wait(&mut child, pgid, &running);
                break None;
            }
            Ok(None) => {
                thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(5));
            }
            Err(_) => break None,
        }
    };
    kill_group(pgid);
    live().groups.remove(&pgid);
    let interrupted = live().refuses(scope) && !status.is_some_and(|s| s.success());
    Ok(Grouped {
        status,
        timed_out,
        interrupted,
        elapsed: start.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into(), "sh".into()]
    }

    #[test]
    fn the_prompt_is_the_last_argument_and_no_shell_is_involved() {
        let r = run(
            &["printf".into(), "%s".into()],
            "a b; $(echo x) `id`",
            Limits::default(),
        )
        .unwrap();
        assert_eq!(r.stdout, "a b; $(echo x) `id`");
    }

    #[test]
    fn a_command_runs_in_the_threads_working_directory() {
        let dir = tempfile::tempdir().unwrap();
        let r = in_workdir(dir.path(), || run(&sh("pwd"), "", Limits::default())).unwrap();
        let want = dir.path().canonicalize().unwrap();
        assert_eq!(Path::new(r.stdout.trim()).canonicalize().unwrap(), want);
        let after = run(&sh("pwd"), "", Limits::default()).unwrap();
        assert_ne!(Path::new(after.stdout.trim()).canonicalize().unwrap(), want);
        // A relative program still names a file beside this process, not in the directory.
        let here = std::env::current_dir().unwrap();
        let rel = tempfile::Builder::new()
            .prefix("gf-rel-")
            .suffix(".sh")
            .tempfile_in(&here)
            .unwrap()
            .into_temp_path();
        std::fs::write(&rel, "#!/bin/sh\npwd\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&rel, std::fs::Permissions::from_mode(0o755)).unwrap();
        let name = format!("./{}", rel.file_name().unwrap().to_str().unwrap());
        let r = in_workdir(dir.path(), || {
            run(std::slice::from_ref(&name), "", Limits::default())
        });
        let r = r.unwrap();
        assert_eq!(Path::new(r.stdout.trim()).canonicalize().unwrap(), want);
    }

    #[test]
    fn a_hang_is_killed_with_its_grandchildren_within_the_deadline() {
        let limits = Limits {
            timeout: Duration::from_millis(300),
            ..Limits::default()
        };
        let t = Instant::now();
        // The grandchild keeps the pipes open: without killing the group, reading would hang.
        let e = run(&sh("sleep 30 & sleep 30"), "", limits).unwrap_err();
        assert!(matches!(e, CommandError::Timeout { .. }), "{e}");
        assert!(
            t.elapsed() < Duration::from_millis(1300),
            "took {:?}",
            t.elapsed()
        );
    }

    #[test]
    fn an_endless_flood_still_ends_at_the_deadline() {
        // The pipe never empties: the reading must still hand back to the wait's looks at the
        // deadline (a read loop that runs until the pipe is empty would never return).
        let limits = Limits {
            timeout: Duration::from_millis(300),
            max_stdout: 1000,
            ..Limits::default()
        };
        let e = run(
            &sh("cat /dev/zero & cat /dev/zero >&2 & cat /dev/zero"),
            "",
            limits,
        )
        .unwrap_err();
        assert!(matches!(e, CommandError::Timeout { .. }), "{e}");
    }

    #[test]
    fn a_flood_is_capped_and_drained() {
        let limits = Limits {
            max_stdout: 1000,
            ..Limits::default()
        };
        let r = run(&sh("head -c 50000000 /dev/zero | tr '\\\\0' x"), "", limits).unwrap();
        assert_eq!(r.stdout.len(), 1000);
        assert!(r.truncated);
    }

    #[test]
    fn stdout_lines_are_handed_on_while_the_command_runs_and_kept_whole() {
        use super::output::LINE_CAP;
        let dir = tempfile::tempdir().unwrap();
        let go = dir.path().join("go");
        // The second line comes only once the watcher has seen the first (five minutes at
        // most, so nothing outlives a failure); the last has no newline; one is too long.
        let script = format!(
            "echo first; i=0; while [ ! -e '{}' ] && [ $i -lt 6000 ]; do sleep 0.05; i=$((i+1)); done; \
             printf 'second\\r\\n'; head -c {} /dev/zero | tr '\\0' y; printf '\\nlast'",
            go.display(),
            LINE_CAP + 10
        );
        let mut seen: Vec<String> = Vec::new();
        let mut on_line = |l: &str| {
            if l == "first" {
                std::fs::write(&go, "").unwrap();
            }
            seen.push(l.to_string());
        };
        let limits = Limits {
            max_stdout: 2 * LINE_CAP,
            ..Limits::default()
        };
        let r = run_watching(&sh(&script), "", limits, &[], &[], Some(&mut on_line)).unwrap();
        assert_eq!(
            seen.len(),
            4,
            "{:?}",
            seen.iter().map(String::len).collect::<Vec<_>>()
        );
        assert_eq!((seen[0].as_str(), seen[1].as_str()), ("first", "second"));
        assert_eq!(seen[2].len(), LINE_CAP);
        assert_eq!(seen[3], "last");
        // The output handed back is the whole of it, as without a watcher.
        assert!(r.stdout.starts_with("first\nsecond\r\nyyy") && r.stdout.ends_with("y\nlast"));
        assert_eq!(
            r.stdout.len(),
            "first\nsecond\r\n\nlast".len() + LINE_CAP + 10
        );
        // Past the cap on what is kept, nothing more is read as lines.
        let mut n = 0;
        let limits = Limits {
            max_stdout: 100,
            ..Limits::default()
        };
        let r = run_watching(
            &sh("yes abcdefghi | head -n 100000"),
            "",
            limits,
            &[],
            &[],
            Some(&mut |_: &str| n += 1),
        )
        .unwrap();
        assert!(r.truncated);
        assert_eq!(n, 10);
    }

    #[test]
    fn failures_are_distinct() {
        let e = run(&sh("echo oops >&2; exit 3"), "", Limits::default()).unwrap_err();
        assert!(matches!(e, CommandError::Failed { .. }), "{e}");
        assert!(e.to_string().contains("oops"), "{e}");
        // The first lines name the problem and the last ends a backtrace: both are kept.
        let script = "printf 'Error: no home\\na\\nb\\nc\\nd\\npanicked at main.rs\\n' >&2; exit 1";
        let e = run(&sh(script), "", Limits::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with(": Error: no home | a | b | ... | panicked at main.rs"),
            "{e}"
        );
        let e = run(&sh("printf '\\377\\376'"), "", Limits::default()).unwrap_err();
        assert!(matches!(e, CommandError::NotUtf8 { offset: 0, .. }), "{e}");
        let e = run(&["/nonexistent/program".into()], "", Limits::default()).unwrap_err();
        assert!(matches!(e, CommandError::Spawn { .. }), "{e}");
        assert!(matches!(
            run(&[], "", Limits::default()),
            Err(CommandError::Empty(_))
        ));
    }

    #[test]
    fn stopping_a_scope_kills_its_commands_and_no_other() {
        let (a, b) = (new_scope(), new_scope());
        let dir = std::env::temp_dir().join(format!("gf-scope-{}-{a}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let go = dir.join("go");
        // Each command waits for `go` (five minutes at most, so nothing outlives a failure).
        let wait = format!(
            "i=0; while [ ! -e '{}' ] && [ $i -lt 6000 ]; do sleep 0.05; i=$((i+1)); done; echo ok",
            go.display()
        );
        std::thread::scope(|s| {
            let in_a = s.spawn(|| in_scope(a, || run(&sh(&wait), "", Limits::default())));
            let in_b = s.spawn(|| in_scope(b, || run(&sh(&wait), "", Limits::default())));
            // Waits until both are registered (not a measurement).
            while live()
                .groups
                .values()
                .filter(|g| g.scope == Some(a) || g.scope == Some(b))
                .count()
                < 2
            {
                thread::sleep(Duration::from_millis(10));
            }
            assert_eq!(stop_scope(a), 1);
            let e = in_a.join().unwrap().unwrap_err();
            assert!(matches!(e, CommandError::Interrupted { .. }), "{e}");
            // The other scope's command still runs, and finishes once released.
            assert!(live().groups.values().any(|g| g.scope == Some(b)));
            std::fs::write(&go, "").unwrap();
            assert_eq!(in_b.join().unwrap().unwrap().stdout, "ok\n");
        });
        // A stopped scope refuses new commands; another scope and no scope still run.
        let e = in_scope(a, || run(&sh("echo x"), "", Limits::default())).unwrap_err();
        assert!(matches!(e, CommandError::Interrupted { .. }), "{e}");
        assert!(in_scope(b, || run(&sh("echo x"), "", Limits::default())).is_ok());
        assert!(run(&sh("echo x"), "", Limits::default()).is_ok());
        forget_scope(a);
        assert!(in_scope(a, || run(&sh("echo x"), "", Limits::default())).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
