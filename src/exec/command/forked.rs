//! The reaper without a second program: git forum forks itself, and the copy (which never
//! executes anything else) is the reaper of one command, doing what [`super::reaper`] does
//! (the same control channel, the same kills, the same exit status) without starting this
//! 19 MB binary again, its dynamic loading, its runtime and its two threads for every call.
//!
//! A fork of a process with threads may only make async-signal-safe calls until it executes
//! a program, and this one never does: everything the reaper needs (the program's path, its
//! arguments and environment as C strings, the pipes) is made before the fork, and the
//! reaper itself makes system calls only. It allocates nothing, takes no lock and prints
//! nothing; the few pages it needs to find a command's descendants come from `mmap`. It waits
//! on a pidfd of the program and on its control pipe at once (`poll`), one thread.
//!
//! Whether the program started is known before [`spawn`] returns: the program's process
//! writes its `execve` error to a pipe that closes on a successful one, as `std` does.

// A fork that never executes a program can only be written with raw system calls.
#![allow(unsafe_code)]

use std::ffi::{CString, OsStr, OsString};
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Running, register};

/// The process git forum started for a command and waits for: a `std` child, or a reaper
/// forked by [`spawn`].
pub(super) trait Leader {
    fn leader_id(&self) -> u32;
    fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>>;
    fn wait(&mut self) -> std::io::Result<ExitStatus>;
}

impl Leader for std::process::Child {
    fn leader_id(&self) -> u32 {
        self.id()
    }
    fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        std::process::Child::try_wait(self)
    }
    fn wait(&mut self) -> std::io::Result<ExitStatus> {
        std::process::Child::wait(self)
    }
}

impl Leader for Forked {
    fn leader_id(&self) -> u32 {
        self.id()
    }
    fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        Forked::try_wait(self)
    }
    fn wait(&mut self) -> std::io::Result<ExitStatus> {
        Forked::wait(self)
    }
}

/// Starts a command under the reaper ([`super::is_reaped`]) with a forked reaper instead
/// (this module): the same program, arguments, environment and directory, stdin from
/// `/dev/null`, stdout and stderr to pipes; registered as [`super::start`] registers.
pub(super) fn start_forked(
    cmd: Command,
    scope: Option<u64>,
) -> std::io::Result<(Started, u32, Running)> {
    let mut args = cmd.get_args().skip(1);
    let program = Path::new(args.next().unwrap_or_default());
    let rest: Vec<std::ffi::OsString> = args.map(|a| a.to_owned()).collect();
    // `prepared_with` cleared the environment: what is set is all the command gets.
    let env: Vec<(std::ffi::OsString, std::ffi::OsString)> = cmd
        .get_envs()
        .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned())))
        .collect();
    let mut started = spawn(program, &rest, &env, cmd.get_current_dir())?;
    let pgid = started.reaper.id();
    let control = Arc::new(Mutex::new(started.control.take()));
    Ok((started, pgid, register(pgid, scope, Some(control))))
}

/// A reaper started by [`spawn`]: its pid (its process group's too) and its status once read.
pub(crate) struct Forked {
    pid: i32,
    status: Option<ExitStatus>,
}

/// What [`spawn`] hands back: the reaper, the read ends of the program's stdout and stderr,
/// and the write end of the reaper's control pipe.
pub(crate) struct Started {
    pub(crate) reaper: Forked,
    pub(crate) stdout: std::io::PipeReader,
    pub(crate) stderr: std::io::PipeReader,
    pub(crate) control: Option<std::process::ChildStdin>,
}

impl Forked {
    pub(crate) fn id(&self) -> u32 {
        self.pid as u32
    }

    /// The reaper's status if it has ended (reaping it), as `Child::try_wait`.
    pub(crate) fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        self.reap(libc::WNOHANG)
    }

    /// Waits for the reaper to end, as `Child::wait`.
    pub(crate) fn wait(&mut self) -> std::io::Result<ExitStatus> {
        loop {
            if let Some(s) = self.reap(0)? {
                return Ok(s);
            }
        }
    }

    fn reap(&mut self, flags: i32) -> std::io::Result<Option<ExitStatus>> {
        if let Some(s) = self.status {
            return Ok(Some(s));
        }
        let mut raw = 0;
        // SAFETY: a plain system call on our own child.
        let r = unsafe { libc::waitpid(self.pid, &mut raw, flags) };
        match r {
            0 => Ok(None),
            r if r == self.pid => {
                self.status = Some(ExitStatus::from_raw(raw));
                Ok(self.status)
            }
            _ => {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    Ok(None)
                } else {
                    Err(e)
                }
            }
        }
    }
}

/// The path `execve` is given for `program`: itself when it holds a `/`, else the first
/// executable file of that name in the directories of `path` (the command's own `PATH`).
fn resolve(program: &Path, path: Option<&OsStr>) -> std::io::Result<PathBuf> {
    if program.as_os_str().as_bytes().contains(&b'/') {
        return Ok(program.to_path_buf());
    }
    let dirs = path.unwrap_or(OsStr::new("/bin:/usr/bin"));
    for dir in dirs.as_bytes().split(|b| *b == b':') {
        let dir = if dir.is_empty() { &b"."[..] } else { dir };
        let candidate = Path::new(OsStr::from_bytes(dir)).join(program);
        let executable = rustix::fs::access(&candidate, rustix::fs::Access::EXEC_OK).is_ok();
        if executable && candidate.is_file() {
            return Ok(candidate);
        }
    }
    Err(std::io::Error::from_raw_os_error(libc::ENOENT))
}

fn c_string(s: &OsStr) -> std::io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "an argument or variable holds a NUL byte",
        )
    })
}

/// What `execve` and `chdir` are given, as C strings: the program's path, its arguments
/// (`program` first), its environment and its directory.
#[allow(clippy::type_complexity)]
fn c_strings(
    program: &Path,
    args: &[OsString],
    env: &[(OsString, OsString)],
    dir: Option<&Path>,
) -> std::io::Result<(CString, Vec<CString>, Vec<CString>, Option<CString>)> {
    let path_var = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_os_str());
    let exe = c_string(resolve(program, path_var)?.as_os_str())?;
    let argv: Vec<CString> = std::iter::once(program.as_os_str())
        .chain(args.iter().map(OsString::as_os_str))
        .map(c_string)
        .collect::<Result<_, _>>()?;
    let envp: Vec<CString> = env
        .iter()
        .map(|(k, v)| {
            let mut kv = k.clone().into_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            c_string(OsStr::from_bytes(&kv))
        })
        .collect::<Result<_, _>>()?;
    let dir = dir.map(|d| c_string(d.as_os_str())).transpose()?;
    Ok((exe, argv, envp, dir))
}

/// Starts `program` with `args` and exactly the environment `env`, in `dir` (else here), stdin
/// from `/dev/null`, stdout and stderr to pipes, under a forked reaper that leads a process
/// group of its own. An error when the program cannot be started.
pub(crate) fn spawn(
    program: &Path,
    args: &[OsString],
    env: &[(OsString, OsString)],
    dir: Option<&Path>,
) -> std::io::Result<Started> {
    let (exe, argv, envp, dir) = c_strings(program, args, env, dir)?;
    let argv_p: Vec<*const libc::c_char> = argv
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp_p: Vec<*const libc::c_char> = envp
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let (out_r, out_w) = std::io::pipe()?;
    let (err_r, err_w) = std::io::pipe()?;
    let (ctl_r, ctl_w) = std::io::pipe()?;
    let (mut report_r, report_w) = std::io::pipe()?;
    let null = std::fs::File::open("/dev/null")?;
    let plan = Plan {
        exe: exe.as_ptr(),
        argv: argv_p.as_ptr(),
        envp: envp_p.as_ptr(),
        dir: dir.as_ref().map_or(std::ptr::null(), |d| d.as_ptr()),
        null: null.as_raw_fd(),
        out: out_w.as_raw_fd(),
        err: err_w.as_raw_fd(),
        control: ctl_r.as_raw_fd(),
        report: report_w.as_raw_fd(),
    };
    // SAFETY: the child runs `reaper_main` only, which makes async-signal-safe system calls on
    // memory made before the fork and never returns.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: see above; in the child.
        unsafe { reaper_main(&plan) }
    }
    // The reaper makes its group itself too; either call wins the race.
    // SAFETY: a plain system call on our own child.
    unsafe { libc::setpgid(pid, pid) };
    drop((out_w, err_w, ctl_r, report_w, null));
    let mut reaper = Forked { pid, status: None };
    if let Some(code) = read_report(&mut report_r) {
        let _ = reaper.wait();
        return Err(std::io::Error::from_raw_os_error(code));
    }
    Ok(Started {
        reaper,
        stdout: out_r,
        stderr: err_r,
        control: Some(std::process::ChildStdin::from(OwnedFd::from(ctl_w))),
    })
}

/// The error the reaper or the program reported before `execve` succeeded, if any (the pipe
/// closes without a word when it did).
fn read_report(r: &mut std::io::PipeReader) -> Option<i32> {
    let mut word = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut word[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    (got == 4).then(|| i32::from_le_bytes(word))
}

/// What the forked reaper works from: pointers into memory the parent made before the fork
/// (the child's copy of it stays as it was) and the file descriptors it hands on.
struct Plan {
    exe: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    dir: *const libc::c_char,
    null: i32,
    out: i32,
    err: i32,
    control: i32,
    report: i32,
}

/// Where the reaper keeps its control pipe and the program's pidfd once it has closed every
/// other descriptor.
const CONTROL_FD: i32 = 0;
const PIDFD_FD: i32 = 1;

/// The reaper, in the forked child: makes its group, becomes a subreaper, starts the program,
/// closes everything else, then waits for the program or its control pipe (see
/// [`super::reaper`] for what each means), kills what is left and exits as the program did.
///
/// # Safety
/// Only in the child of a fork, with `plan` made before it.
unsafe fn reaper_main(plan: &Plan) -> ! {
    // SAFETY (whole function): system calls only, on the child's copy of `plan`.
    unsafe {
        libc::setpgid(0, 0);
        default_signals();
        let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
        if !plan.dir.is_null() && libc::chdir(plan.dir) != 0 {
            report(plan.report, errno());
            libc::_exit(super::reaper::SPAWN_FAILED_CODE);
        }
        let program = libc::fork();
        if program == 0 {
            exec_program(plan);
        }
        if program < 0 {
            report(plan.report, errno());
            libc::_exit(super::reaper::SPAWN_FAILED_CODE);
        }
        let pidfd = libc::syscall(libc::SYS_pidfd_open, program, 0) as i32;
        // Above the standard three first, so that no move overwrites the other.
        let control = libc::fcntl(plan.control, libc::F_DUPFD_CLOEXEC, 3);
        let pidfd = if pidfd >= 0 {
            libc::fcntl(pidfd, libc::F_DUPFD_CLOEXEC, 3)
        } else {
            -1
        };
        libc::dup2(control, CONTROL_FD);
        if pidfd >= 0 {
            libc::dup2(pidfd, PIDFD_FD);
        }
        let first_closed = if pidfd >= 0 { PIDFD_FD + 1 } else { PIDFD_FD };
        libc::syscall(libc::SYS_close_range, first_closed as u32, u32::MAX, 0u32);
        let status = wait_program(program, pidfd >= 0);
        kill_tree();
        exit_as(status)
    }
}

/// The program's side of the fork: its stdio, SIGPIPE back to the default (git forum ignores
/// it), then `execve`; its error goes to the report pipe.
unsafe fn exec_program(plan: &Plan) -> ! {
    // SAFETY: system calls only, in the child of a fork.
    unsafe {
        // Above the standard three first, so that no move overwrites another.
        let high =
            [plan.null, plan.out, plan.err].map(|fd| libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3));
        for (to, from) in high.into_iter().enumerate() {
            libc::dup2(from, to as i32);
        }
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::execve(plan.exe, plan.argv, plan.envp);
        report(plan.report, errno());
        libc::_exit(super::reaper::SPAWN_FAILED_CODE)
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Writes `code` on the report pipe.
unsafe fn report(fd: i32, code: i32) {
    let bytes = code.to_le_bytes();
    // SAFETY: a write of a local buffer.
    unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
}

/// Every signal git forum handles back to its default action and none blocked: what a newly
/// executed reaper starts with.
unsafe fn default_signals() {
    // SAFETY: sigaction and sigprocmask on local structures.
    unsafe {
        for sig in 1..65 {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    }
}

/// Waits for the program to end, acting on the control pipe meanwhile: its raw wait status.
unsafe fn wait_program(program: i32, has_pidfd: bool) -> Option<i32> {
    let mut listening = true;
    loop {
        let mut fds = [
            libc::pollfd {
                fd: CONTROL_FD,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: PIDFD_FD,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: poll on a local array.
        match (has_pidfd, listening) {
            (true, true) => unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) },
            (true, false) => unsafe { libc::poll(fds[1..].as_mut_ptr(), 1, -1) },
            // Without a pidfd the program's end is looked for every 5 ms.
            (false, true) => unsafe { libc::poll(fds.as_mut_ptr(), 1, 5) },
            (false, false) => {
                sleep(Duration::from_millis(5));
                0
            }
        };
        if listening && fds[0].revents != 0 {
            listening = unsafe { control(CONTROL_FD) };
        }
        if (!has_pidfd || fds[1].revents != 0)
            && let Some(s) = unsafe { reap_program(program, !has_pidfd) }
        {
            return s;
        }
    }
}

/// Reads one byte of the control pipe and acts on it (`t`: SIGTERM to every descendant; `k`,
/// the pipe's end or an error: SIGKILL): whether to keep listening.
unsafe fn control(fd: i32) -> bool {
    let mut b = 0u8;
    // SAFETY: a read into a local byte.
    let r = unsafe { libc::read(fd, (&mut b as *mut u8).cast(), 1) };
    if r < 0 && errno() == libc::EINTR {
        return true;
    }
    if r == 1 && b == b't' {
        signal_all(libc::SIGTERM);
        return true;
    }
    if r == 1 && b != b'k' {
        return true;
    }
    signal_all(libc::SIGKILL);
    false
}

/// The program's wait status once it has ended (`Some(None)` when it cannot be waited for);
/// `None` while it runs (only asked with `nohang`).
unsafe fn reap_program(program: i32, nohang: bool) -> Option<Option<i32>> {
    let flags = if nohang { libc::WNOHANG } else { 0 };
    loop {
        let mut raw = 0;
        // SAFETY: waitpid on our own child.
        let r = unsafe { libc::waitpid(program, &mut raw, flags) };
        if r == program && (libc::WIFEXITED(raw) || libc::WIFSIGNALED(raw)) {
            return Some(Some(raw));
        }
        if r == 0 {
            return None;
        }
        if r < 0 && errno() != libc::EINTR {
            return Some(None);
        }
    }
}

/// Exits as the program did (see `super::reaper`).
unsafe fn exit_as(status: Option<i32>) -> ! {
    // SAFETY: system calls only.
    unsafe {
        let Some(raw) = status else { libc::_exit(1) };
        if libc::WIFEXITED(raw) {
            libc::_exit(libc::WEXITSTATUS(raw));
        }
        let sig = libc::WTERMSIG(raw);
        libc::signal(sig, libc::SIG_DFL);
        libc::kill(libc::getpid(), sig);
        sleep(Duration::from_millis(100));
        libc::_exit((128 + sig).clamp(0, 255))
    }
}

fn sleep(d: Duration) {
    let ts = libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    };
    // SAFETY: nanosleep on a local timespec.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
}

/// Seconds on the monotonic clock.
fn now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime into a local timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Kills every descendant and reaps them all, until no child is left (or the reaper's bound
/// passed), as `super::reaper` does.
fn kill_tree() {
    if !reap_all() {
        return;
    }
    let start = now();
    loop {
        signal_all(libc::SIGKILL);
        if !reap_all() || now().saturating_sub(start) > super::reaper::KILL_BOUND {
            return;
        }
        sleep(Duration::from_millis(1));
    }
}

/// Reaps every child that has ended: whether a child is left.
fn reap_all() -> bool {
    loop {
        let mut raw = 0;
        // SAFETY: waitpid on our own children.
        let r = unsafe { libc::waitpid(-1, &mut raw, libc::WNOHANG) };
        match r {
            r if r > 0 => continue,
            0 => return true,
            _ if errno() == libc::EINTR => continue,
            _ => return false,
        }
    }
}

/// Sends `sig` to every live descendant of this process.
fn signal_all(sig: i32) {
    super::proc_walk::each_descendant(|pid| {
        // SAFETY: kill of a pid.
        unsafe { libc::kill(pid, sig) };
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn env() -> Vec<(OsString, OsString)> {
        vec![("PATH".into(), std::env::var_os("PATH").unwrap_or_default())]
    }

    fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, r)| r.trim_start().starts_with('Z'))
            })
            .is_some_and(|zombie| !zombie)
    }

    #[test]
    fn a_program_runs_with_its_output_status_and_directory_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let script =
            "setsid sleep 30 </dev/null >/dev/null 2>&1 & echo $!; pwd; echo oops >&2; exit 3";
        let mut st = spawn(
            Path::new("sh"),
            &["-c".into(), script.into()],
            &env(),
            Some(dir.path()),
        )
        .unwrap();
        let (mut out, mut err) = (String::new(), String::new());
        st.stdout.read_to_string(&mut out).unwrap();
        st.stderr.read_to_string(&mut err).unwrap();
        let status = st.reaper.wait().unwrap();
        assert_eq!(status.code(), Some(3));
        assert_eq!(err, "oops\n");
        let mut lines = out.lines();
        let setsid: i32 = lines.next().unwrap().parse().unwrap();
        let pwd = Path::new(lines.next().unwrap()).canonicalize().unwrap();
        assert_eq!(pwd, dir.path().canonicalize().unwrap());
        assert!(!alive(setsid), "the setsid child outlived its command");
    }

    #[test]
    fn the_control_pipe_kills_the_tree_and_the_status_says_so() {
        let mut st = spawn(
            Path::new("sh"),
            &["-c".into(), "sleep 30 & sleep 30".into()],
            &env(),
            None,
        )
        .unwrap();
        let mut control = st.control.take().unwrap();
        control.write_all(b"k").unwrap();
        let status = st.reaper.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        // The end of the pipe does the same.
        let mut st = spawn(Path::new("sleep"), &["30".into()], &env(), None).unwrap();
        drop(st.control.take());
        assert_eq!(st.reaper.wait().unwrap().signal(), Some(libc::SIGKILL));
    }

    #[test]
    fn a_program_that_cannot_start_is_an_error_at_once() {
        let e = spawn(Path::new("/nonexistent/program"), &[], &env(), None)
            .err()
            .unwrap();
        assert_eq!(e.to_string(), "No such file or directory (os error 2)");
        let e = spawn(Path::new("no-such-program-here"), &[], &env(), None)
            .err()
            .unwrap();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
    }
}
