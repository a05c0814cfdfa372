//! The CPU time of a process and of everything it starts, to the nanosecond, from the
//! kernel's task clock (`perf_event_open`), where `/proc` counts in 10 ms ticks.
//!
//! [`gated`] wraps a command in `sh -c 'read _ _; exec PROGRAM ARGS </dev/null'`, so that the
//! process exists, waiting on its stdin, before the program runs. [`Counters::attach`] then
//! opens two task-clock counters on it, both enabled when it execs and both inherited: one by
//! its threads only (`inherit_thread`: the process itself), one by every thread and process
//! under it. [`go`] lets the shell exec the program, counted or not. When the program has exited,
//! the kernel has folded the counts of every task that ended into the counters: the first is
//! the process's own CPU, the second less the first its children's (and their children's).
//! What the shell spends before the exec is not counted.
//!
//! `perf_event_attr` is written by hand as 16 words (the layout of `PERF_ATTR_SIZE_VER7`):
//! neither `libc` nor `rustix` declares it, and a bench needs four of its fields.

use std::io::Write as _;
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::process::{Child, Command, Stdio};

const PERF_TYPE_SOFTWARE: u64 = 1;
const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
/// `perf_event_attr` flag bits (word 5).
const DISABLED: u64 = 1 << 0;
const INHERIT: u64 = 1 << 1;
const ENABLE_ON_EXEC: u64 = 1 << 12;
const INHERIT_THREAD: u64 = 1 << 35;

/// `c` as a child that waits on its stdin before it runs its program (see the module doc).
pub fn gated(c: &Command) -> Command {
    let mut g = Command::new("sh");
    g.arg("-c")
        .arg(r#"read _ _; exec "$0" "$@" </dev/null"#)
        .arg(c.get_program())
        .args(c.get_args());
    if let Some(dir) = c.get_current_dir() {
        g.current_dir(dir);
    }
    for (k, v) in c.get_envs() {
        match v {
            Some(v) => g.env(k, v),
            None => g.env_remove(k),
        };
    }
    g.stdin(Stdio::piped());
    g
}

/// The two counters on one gated child.
pub struct Counters {
    own: OwnedFd,
    all: OwnedFd,
}

fn open(pid: u32, flags: u64) -> std::io::Result<OwnedFd> {
    let mut attr = [0u64; 16];
    attr[0] = PERF_TYPE_SOFTWARE | ((attr.len() as u64 * 8) << 32);
    attr[1] = PERF_COUNT_SW_TASK_CLOCK;
    attr[5] = flags;
    // SAFETY: `attr` is a zeroed `perf_event_attr` of the size it declares, alive for the
    // call; the kernel only reads it. The descriptor returned is owned by nobody else.
    #[allow(unsafe_code)]
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_ptr(),
            pid as libc::pid_t,
            -1 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor the call just opened for us.
    #[allow(unsafe_code)]
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

fn read_ns(fd: &OwnedFd) -> f64 {
    let mut buf = [0u8; 8];
    match rustix::io::read(fd, &mut buf) {
        Ok(8) => u64::from_ne_bytes(buf) as f64,
        _ => f64::NAN,
    }
}

impl Counters {
    /// Opens both counters on `child` (started from [`gated`]); an error when the kernel
    /// refuses (`perf_event_paranoid`, a container without perf events).
    pub fn attach(child: &Child) -> std::io::Result<Counters> {
        let flags = DISABLED | INHERIT | ENABLE_ON_EXEC;
        Ok(Counters {
            own: open(child.id(), flags | INHERIT_THREAD)?,
            all: open(child.id(), flags)?,
        })
    }

    /// Own CPU and children's CPU in milliseconds, once the child has exited.
    pub fn read(&self) -> (f64, f64) {
        let own = read_ns(&self.own);
        let all = read_ns(&self.all);
        (own / 1e6, (all - own).max(0.0) / 1e6)
    }
}

/// Lets a child started from [`gated`] exec its program.
pub fn go(child: &mut Child) {
    if let Some(mut g) = child.stdin.take() {
        g.write_all(b"go\n").expect("open the gate");
    }
}
