//! The reaper without a second program: git forum clones itself, and the clone (which never
//! executes anything else) is the reaper of one command, doing what [`super::reaper`] does
//! (the same control channel, the same kills, the same exit status) without starting this
//! 19 MB binary again, its dynamic loading, its runtime and its two threads for every call.
//!
//! The clone shares git forum's memory (`CLONE_VM`, as a thread would, but it is a process of
//! its own with its own descriptors, signal dispositions and process group), and it starts the
//! program the same way (`CLONE_VM | CLONE_VFORK`, as `posix_spawn` does): no page table of
//! git forum is copied, and none of git forum's pages is write-protected to fault afterwards,
//! which a `fork` of a process this size did for every call. What that sharing demands of the
//! reaper's code is in [`child`]; each reaper runs on a stack of its own mapped here and
//! unmapped once the reaper has been reaped.
//!
//! Whether the program started is known before [`spawn`] returns: the program's process
//! writes its `execve` error to a pipe that closes on a successful one, as `std` does, and
//! until then git forum keeps every string the reaper reads.

// A clone that shares this memory can only be written with raw system calls.
#![allow(unsafe_code)]

mod child;

use std::ffi::{CString, OsStr, OsString};
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};

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

/// Starts a command under the reaper ([`super::is_reaped`]) with a cloned reaper instead
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

/// A reaper started by [`spawn`]: its pid (its process group's too), its status once read, and
/// the stack it runs on, unmapped once it has been reaped (never while it may run).
pub(crate) struct Forked {
    pid: i32,
    status: Option<ExitStatus>,
    stack: Option<Stack>,
}

impl Drop for Forked {
    fn drop(&mut self) {
        if self.status.is_none() {
            // Not reaped: the reaper may still run on it, so the mapping is left in place.
            std::mem::forget(self.stack.take());
        }
    }
}

/// The memory a reaper runs on: a guard page at the bottom, then the program's stack until it
/// executes, then the reaper's own.
struct Stack {
    at: *mut std::ffi::c_void,
    len: usize,
}

// SAFETY: the mapping is only unmapped, by whichever thread holds the reaper.
unsafe impl Send for Stack {}

/// The reaper's stack (its deepest frames walk `/proc` with 8 KiB of buffers) and, below it,
/// the program's (a few frames before `execve`).
const REAPER_STACK: usize = 192 * 1024;
const PROGRAM_STACK: usize = 32 * 1024;
const GUARD: usize = 64 * 1024;

impl Stack {
    fn new() -> std::io::Result<Stack> {
        use rustix::mm::{MapFlags, MprotectFlags, ProtFlags};
        let len = GUARD + PROGRAM_STACK + REAPER_STACK;
        // SAFETY: a fresh private anonymous mapping, nothing else refers to it.
        let at = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE | MapFlags::NORESERVE | MapFlags::STACK,
            )
        }?;
        let stack = Stack { at, len };
        // SAFETY: the first pages of the mapping just made.
        unsafe { rustix::mm::mprotect(at, GUARD, MprotectFlags::empty()) }?;
        Ok(stack)
    }

    /// The top of the program's stack (stacks grow down).
    fn program_top(&self) -> *mut std::ffi::c_void {
        self.at.wrapping_byte_add(GUARD + PROGRAM_STACK)
    }

    /// The top of the reaper's stack.
    fn reaper_top(&self) -> *mut std::ffi::c_void {
        self.at.wrapping_byte_add(self.len)
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, no longer run on (see `Forked`).
        let _ = unsafe { rustix::mm::munmap(self.at, self.len) };
    }
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
                // The reaper has exited: nothing runs on its stack any more.
                self.stack = None;
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
/// from `/dev/null`, stdout and stderr to pipes, under a cloned reaper that leads a process
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
    let stack = Stack::new()?;
    let plan = child::Plan {
        exe: exe.as_ptr(),
        argv: argv_p.as_ptr(),
        envp: envp_p.as_ptr(),
        dir: dir.as_ref().map_or(std::ptr::null(), |d| d.as_ptr()),
        null: null.as_raw_fd(),
        out: out_w.as_raw_fd(),
        err: err_w.as_raw_fd(),
        control: ctl_r.as_raw_fd(),
        report: report_w.as_raw_fd(),
        program_stack: stack.program_top(),
    };
    let blocked = Blocked::new();
    let pid = clone_reaper(&plan, &stack)?;
    // The reaper makes its group itself too; either call wins the race.
    // SAFETY: a plain system call on our own child.
    unsafe { libc::setpgid(pid, pid) };
    drop((out_w, err_w, ctl_r, report_w, null));
    let mut reaper = Forked {
        pid,
        status: None,
        stack: Some(stack),
    };
    let reported = read_report(&mut report_r);
    // The reaper has read `plan` and the strings it points to by now, and from here on it
    // writes no `errno`: they may go, and signals may come.
    std::hint::black_box(&plan);
    drop(blocked);
    if let Some(code) = reported {
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

/// Every signal blocked in this thread until dropped (then its mask as it was): while the
/// reaper may write this thread's `errno` (see [`child`]), and so that no handler of git
/// forum's runs in the clone before it has reset them.
struct Blocked(libc::sigset_t);

impl Blocked {
    fn new() -> Blocked {
        // SAFETY: this thread's signal mask, into and from local structures.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            Blocked(old)
        }
    }
}

impl Drop for Blocked {
    fn drop(&mut self) {
        // SAFETY: restores this thread's mask saved in `new`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

/// Clones the reaper onto `stack`: its pid.
fn clone_reaper(plan: &child::Plan, stack: &Stack) -> std::io::Result<i32> {
    // SAFETY: the clone runs `reaper_entry` on its own stack, reads `plan` (alive until
    // `read_report` returns) and never returns.
    let pid = unsafe {
        libc::clone(
            child::reaper_entry,
            stack.reaper_top(),
            libc::CLONE_VM | libc::SIGCHLD,
            (plan as *const child::Plan).cast_mut().cast(),
        )
    };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(pid)
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

    #[test]
    fn commands_started_at_once_from_many_threads_each_get_their_own_output_and_status() {
        // Every reaper shares this process's memory: eight at once, each with a background
        // child that must be stopped, none may see another's plan or stack.
        let handles: Vec<_> = (0..8)
            .map(|i| {
                std::thread::spawn(move || {
                    let script = format!("sleep 30 & echo $!; echo out-{i}; exit {i}");
                    let mut st =
                        spawn(Path::new("sh"), &["-c".into(), script.into()], &env(), None)
                            .unwrap();
                    let mut out = String::new();
                    st.stdout.read_to_string(&mut out).unwrap();
                    let status = st.reaper.wait().unwrap();
                    (i, out, status)
                })
            })
            .collect();
        for h in handles {
            let (i, out, status) = h.join().unwrap();
            let mut lines = out.lines();
            let background: i32 = lines.next().unwrap().parse().unwrap();
            assert_eq!(lines.next(), Some(format!("out-{i}").as_str()));
            assert_eq!(status.code(), Some(i));
            assert!(
                !alive(background),
                "command {i}'s background child outlived it"
            );
        }
    }

    #[test]
    fn a_program_ended_by_a_signal_git_forum_ignores_reports_that_signal() {
        // Rust's runtime ignores SIGPIPE in this process; the program gets the default action
        // and the reaper passes its end on as it was.
        let mut st = spawn(
            Path::new("sh"),
            &["-c".into(), "kill -PIPE $$".into()],
            &env(),
            None,
        )
        .unwrap();
        assert_eq!(st.reaper.wait().unwrap().signal(), Some(libc::SIGPIPE));
    }
}
