//! The reaper's side of [`super::spawn`]: what runs in the process git forum cloned, and in the
//! program's process before it executes.
//!
//! Both share git forum's memory (`CLONE_VM`), so that starting a command copies none of git
//! forum's page tables and none of its pages fault afterwards. That sharing sets the rules
//! here: these functions run on stacks of their own (mapped by [`super::spawn`]), touch only
//! those stacks, the [`Plan`] and pages they map themselves, allocate nothing and take no
//! lock. libc keeps `errno` in the storage of the thread that called `clone`, which is git
//! forum's: until the report pipe closes that thread waits in `spawn` with every signal
//! blocked and reads no `errno` (its one read of the pipe cannot be interrupted), so the libc
//! calls of the start (`sigaction`, `clone`, `execve`), which write `errno` only when they
//! fail, are made then only. After it, while git forum runs on, the reaper makes its system
//! calls through rustix, which never writes `errno`, and leaves through `_exit`, which never
//! returns to write it.

// Code that runs in a clone sharing git forum's memory can only be written with raw calls.
#![allow(unsafe_code)]

use std::ffi::CStr;
use std::mem::ManuallyDrop;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;
use rustix::process::{Pid, Signal, WaitOptions};

/// What the reaper works from: pointers into memory git forum made before the clone and keeps
/// until the program has executed (or failed to), the descriptors it hands on, and where the
/// program's process runs until it executes.
#[derive(Clone, Copy)]
pub(super) struct Plan {
    pub(super) exe: *const libc::c_char,
    pub(super) argv: *const *const libc::c_char,
    pub(super) envp: *const *const libc::c_char,
    pub(super) dir: *const libc::c_char,
    pub(super) null: i32,
    pub(super) out: i32,
    pub(super) err: i32,
    pub(super) control: i32,
    pub(super) report: i32,
    pub(super) program_stack: *mut libc::c_void,
}

/// Where the reaper keeps its control pipe and the program's pidfd once it has closed every
/// other descriptor.
const CONTROL_FD: i32 = 0;
const PIDFD_FD: i32 = 1;

/// The entry of the cloned reaper: `plan` points to a [`Plan`].
pub(super) extern "C" fn reaper_entry(plan: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `spawn` passes a live `Plan` and keeps it until the report pipe closes, which
    // happens below only after the copy.
    let plan = unsafe { *plan.cast::<Plan>() };
    // SAFETY: in the cloned reaper, with its own stack.
    unsafe { reaper_main(&plan) }
}

fn fd(raw: i32) -> BorrowedFd<'static> {
    // SAFETY: the descriptors named here are open for as long as they are used.
    unsafe { BorrowedFd::borrow_raw(raw) }
}

/// `dup2(from, to)` without closing anything on drop.
fn dup2(from: i32, to: i32) {
    // SAFETY: `to` is a descriptor number this process may reuse; it is never closed here.
    let mut target = ManuallyDrop::new(unsafe { OwnedFd::from_raw_fd(to) });
    let _ = rustix::io::dup2(fd(from), &mut target);
}

/// A copy of `from` at 3 or above, close-on-exec: its number.
fn dup_high(from: i32) -> i32 {
    use std::os::fd::IntoRawFd;
    rustix::io::fcntl_dupfd_cloexec(fd(from), 3).map_or(-1, IntoRawFd::into_raw_fd)
}

fn exit(code: i32) -> ! {
    // SAFETY: `_exit` makes the `exit_group` system call and never returns.
    unsafe { libc::_exit(code) }
}

/// The reaper: makes its group, becomes a subreaper, starts the program, closes everything
/// else, then waits for the program or its control pipe (see [`super::super::reaper`] for what
/// each means), kills what is left and exits as the program did.
///
/// # Safety
/// Only in the process `spawn` cloned, with `plan` copied onto its own stack.
unsafe fn reaper_main(plan: &Plan) -> ! {
    let _ = rustix::process::setpgid(None, None);
    // SAFETY: signal dispositions of this process only (its table is its own copy).
    unsafe { default_signals() };
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    if !plan.dir.is_null() {
        // SAFETY: `dir` is a C string git forum keeps until the report pipe closes.
        let dir = unsafe { CStr::from_ptr(plan.dir) };
        if let Err(e) = rustix::process::chdir(dir) {
            report(plan.report, e.raw_os_error());
            exit(super::super::reaper::SPAWN_FAILED_CODE);
        }
    }
    // The program's process shares this memory too and runs on its own stack until it
    // executes; this process waits meanwhile (`CLONE_VFORK`), as `posix_spawn` does.
    // SAFETY: `program_entry` runs on the stack `spawn` set aside for it and never returns.
    let program = unsafe {
        libc::clone(
            program_entry,
            plan.program_stack,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (plan as *const Plan).cast_mut().cast(),
        )
    };
    let Some(program) = Pid::from_raw(program) else {
        // `errno` is not read back: see the module's comment.
        report(plan.report, libc::EAGAIN);
        exit(super::super::reaper::SPAWN_FAILED_CODE)
    };
    let pidfd = rustix::process::pidfd_open(program, rustix::process::PidfdFlags::empty())
        .map(std::os::fd::IntoRawFd::into_raw_fd)
        .ok();
    // Above the standard three first, so that no move overwrites the other.
    let control = dup_high(plan.control);
    let pidfd = pidfd.map(dup_high).filter(|p| *p >= 0);
    dup2(control, CONTROL_FD);
    if let Some(p) = pidfd {
        dup2(p, PIDFD_FD);
    }
    close_from(if pidfd.is_some() {
        PIDFD_FD + 1
    } else {
        PIDFD_FD
    });
    let status = wait_program(program, pidfd.is_some());
    kill_tree();
    exit_as(status)
}

/// The program's process, cloned by the reaper: its stdio, SIGPIPE back to the default (git
/// forum ignores it), then `execve`; its error goes to the report pipe.
extern "C" fn program_entry(plan: *mut libc::c_void) -> libc::c_int {
    // SAFETY: the reaper passes its own `Plan` and waits (`CLONE_VFORK`) while this runs.
    let plan = unsafe { &*plan.cast::<Plan>() };
    // Above the standard three first, so that no move overwrites another.
    let high = [plan.null, plan.out, plan.err].map(dup_high);
    for (to, from) in high.into_iter().enumerate() {
        dup2(from, to as i32);
    }
    // SAFETY: this process's own disposition of SIGPIPE, then `execve` of C strings and
    // NULL-terminated arrays of them that git forum keeps alive until the report pipe closes,
    // which this process's `execve` or exit is part of; `errno` is read before the report.
    let code = unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::execve(plan.exe, plan.argv, plan.envp);
        *libc::__errno_location()
    };
    report(plan.report, code);
    exit(super::super::reaper::SPAWN_FAILED_CODE)
}

/// Writes `code` on the report pipe.
fn report(report: i32, code: i32) {
    let _ = rustix::io::write(fd(report), &code.to_le_bytes());
}

/// Every signal git forum handles back to its default action and none blocked: what a newly
/// executed reaper starts with. Signals 32 and 33 are the C library's own, which it does not
/// let be changed.
///
/// # Safety
/// Only in the reaper, whose signal table is its own, before the report pipe closes.
unsafe fn default_signals() {
    // SAFETY (whole function): sigaction and sigprocmask on local structures.
    unsafe {
        for sig in (1..65).filter(|s| !(32..=33).contains(s)) {
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

/// Closes every descriptor numbered `first` or above, as listed in `/proc/self/fd`.
fn close_from(first: i32) {
    use rustix::fs::{Mode, OFlags};
    loop {
        let Ok(dir) = rustix::fs::openat(
            rustix::fs::CWD,
            c"/proc/self/fd",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            return;
        };
        let own = {
            use std::os::fd::AsRawFd;
            dir.as_raw_fd()
        };
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
        let mut entries = rustix::fs::RawDir::new(&dir, &mut buf);
        let mut found = [0i32; 256];
        let mut n = 0;
        while let Some(Ok(e)) = entries.next() {
            let Some(d) = super::super::proc_walk::number(e.file_name().to_bytes()) else {
                continue;
            };
            if d >= first && d != own && n < found.len() {
                found[n] = d;
                n += 1;
            }
        }
        drop(dir);
        for &d in &found[..n] {
            // SAFETY: a descriptor of this process that nothing here uses any more.
            drop(unsafe { OwnedFd::from_raw_fd(d) });
        }
        if n < found.len() {
            return;
        }
    }
}

/// Waits for the program to end, acting on the control pipe meanwhile: its raw wait status.
fn wait_program(program: Pid, has_pidfd: bool) -> Option<i32> {
    let mut listening = true;
    let tick = rustix::time::Timespec {
        tv_sec: 0,
        tv_nsec: 5_000_000,
    };
    loop {
        let mut fds = [
            PollFd::from_borrowed_fd(fd(CONTROL_FD), PollFlags::IN),
            PollFd::from_borrowed_fd(fd(PIDFD_FD), PollFlags::IN),
        ];
        // Without a pidfd the program's end is looked for every 5 ms.
        let _ = match (has_pidfd, listening) {
            (true, true) => rustix::event::poll(&mut fds, None),
            (true, false) => rustix::event::poll(&mut fds[1..], None),
            (false, true) => rustix::event::poll(&mut fds[..1], Some(&tick)),
            (false, false) => {
                sleep(Duration::from_millis(5));
                Ok(0)
            }
        };
        let control_ready = !fds[0].revents().is_empty();
        let program_ready = !fds[1].revents().is_empty();
        if listening && control_ready {
            listening = control(CONTROL_FD);
        }
        if (!has_pidfd || program_ready)
            && let Some(s) = reap_program(program, !has_pidfd)
        {
            return s;
        }
    }
}

/// Reads one byte of the control pipe and acts on it (`t`: SIGTERM to every descendant; `k`,
/// the pipe's end or an error: SIGKILL): whether to keep listening.
fn control(control: i32) -> bool {
    let mut b = [0u8; 1];
    match rustix::io::read(fd(control), &mut b) {
        Err(Errno::INTR) => true,
        Ok(1) if b[0] == b't' => {
            signal_all(Signal::TERM);
            true
        }
        Ok(1) if b[0] != b'k' => true,
        _ => {
            signal_all(Signal::KILL);
            false
        }
    }
}

/// The program's wait status once it has ended (`Some(None)` when it cannot be waited for);
/// `None` while it runs (only asked with `nohang`).
fn reap_program(program: Pid, nohang: bool) -> Option<Option<i32>> {
    let flags = if nohang {
        WaitOptions::NOHANG
    } else {
        WaitOptions::empty()
    };
    loop {
        match rustix::process::waitpid(Some(program), flags) {
            Ok(Some((_, s))) if s.exited() || s.signaled() => return Some(Some(s.as_raw())),
            Ok(Some(_)) => {}
            Ok(None) => return None,
            Err(Errno::INTR) => {}
            Err(_) => return Some(None),
        }
    }
}

/// Exits as the program did (see `super::super::reaper`).
fn exit_as(status: Option<i32>) -> ! {
    let Some(raw) = status else { exit(1) };
    if libc::WIFEXITED(raw) {
        exit(libc::WEXITSTATUS(raw));
    }
    let sig = libc::WTERMSIG(raw);
    // SAFETY: the number of the signal that ended the program, as the kernel gave it.
    let signal = unsafe { Signal::from_raw_unchecked(sig) };
    // The C library's own two keep its handlers here, which must not run in this clone: the
    // exit code says which signal it was instead.
    if (32..=33).contains(&sig) {
        exit(128 + sig);
    }
    // Handlers are at their defaults since the start, but an ignored signal (SIGPIPE) is set
    // back. SIGKILL and SIGSTOP cannot be changed, and asking would write `errno`.
    if sig != libc::SIGKILL && sig != libc::SIGSTOP {
        // SAFETY: this process's own disposition of a signal that may be changed, so the call
        // cannot fail and write `errno`.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
    let _ = rustix::process::kill_process(rustix::process::getpid(), signal);
    sleep(Duration::from_millis(100));
    exit((128 + sig).clamp(0, 255))
}

fn sleep(d: Duration) {
    let ts = rustix::time::Timespec {
        tv_sec: d.as_secs() as _,
        tv_nsec: d.subsec_nanos() as _,
    };
    let _ = rustix::thread::nanosleep(&ts);
}

/// The monotonic clock.
fn now() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Kills every descendant and reaps them all, until no child is left (or the reaper's bound
/// passed), as `super::super::reaper` does.
fn kill_tree() {
    if !reap_all() {
        return;
    }
    let start = now();
    loop {
        signal_all(Signal::KILL);
        if !reap_all() || now().saturating_sub(start) > super::super::reaper::KILL_BOUND {
            return;
        }
        sleep(Duration::from_millis(1));
    }
}

/// Reaps every child that has ended: whether a child is left.
fn reap_all() -> bool {
    loop {
        // Any child: `waitpid(None, ..)` would wait only for those in this process group,
        // and a `setsid` child has left it.
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(Some(_)) | Err(Errno::INTR) => {}
            Ok(None) => return true,
            Err(_) => return false,
        }
    }
}

/// Sends `sig` to every live descendant of this process.
fn signal_all(sig: Signal) {
    super::super::proc_walk::each_descendant(|pid| {
        if let Some(pid) = Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(pid, sig);
        }
    });
}
