//! The reaper: a small process of git forum's own between git forum and an unconfined worker
//! or check, so that stopping a command stops everything it started.
//!
//! A process group is not enough: a worker's `setsid` child (or a double-forked daemon) leaves
//! the group and outlives a kill of it. A cgroup would hold them, but making one needs a
//! delegated cgroup tree (a systemd user slice), which containers and CI machines rarely give;
//! the reaper works wherever Linux does. git forum re-executes itself (`/proc/self/exe`, so a
//! binary replaced on disk during a run still works) as `git-forum __reap PROGRAM ARGS...`;
//! the reaper makes itself a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`), so every
//! descendant that loses its parent, `setsid` or not, is reparented to it and stays in its
//! tree, then starts the program with stdin from `/dev/null` and stdout and stderr as given.
//! Its own stdin is a pipe from git forum, the control channel:
//!
//! * `t`: SIGTERM to every descendant (the grace before a kill);
//! * `k`, or the end of the pipe (git forum asked, or died): SIGKILL to every descendant.
//!
//! When the program ends, by itself or killed, the reaper kills every descendant left, reaps
//! them all, and exits as the program did (its exit code, or the same signal), so git forum
//! reads the program's status from the reaper's. A program that cannot be started is one line
//! on stderr starting with [`SPAWN_FAILED`] and exit 127. git forum never waits on a process
//! it did not start (no `waitpid(-1)` in git forum's own process, which would steal the exit
//! statuses of its other children); the reaper does, since every process it could reap is the
//! command's.
//!
//! A command whose output git forum reads itself (a model's or an agent's, [`super::run`])
//! gets the same reaper without this second start of the binary: a clone of git forum that
//! shares its memory ([`super::forked`]). A check of a `--work` run, whose output goes where its caller set,
//! keeps this one.
//!
//! Descendants are found by walking `/proc` (each process's parent, from `/proc/PID/stat`)
//! down from the reaper ([`super::proc_walk`]). A sandboxed command needs no reaper: bubblewrap's pid namespace dies
//! with the process that leads it, taking every process inside.

use std::ffi::OsString;
use std::io::Read;
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions};

/// The argument that makes `git-forum` a reaper (argv\[1\]); not a command anyone types.
pub(crate) const REAP_ARG: &str = "__reap";

/// How the reaper's line on stderr starts when the program could not be started.
pub(crate) const SPAWN_FAILED: &str = "git forum reaper: cannot start the program: ";

/// The exit code of a program that could not be started (as a shell's).
pub(crate) const SPAWN_FAILED_CODE: i32 = 127;

/// How long the reaper keeps killing descendants that do not die (a process stuck in the
/// kernel) before it gives up and exits; git forum then kills its process group.
pub(crate) const KILL_BOUND: Duration = Duration::from_secs(10);

/// Runs the reaper when this process was started as one (`argv[1]` is [`REAP_ARG`]); `None`
/// otherwise, for `main` to go on as git forum. Never returns `Some` for a user's command line.
pub fn run_if_asked() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(std::ffi::OsStr::new(REAP_ARG)) {
        return None;
    }
    let Some(program) = args.next() else {
        eprintln!("{SPAWN_FAILED}no program was given");
        return Some(ExitCode::from(SPAWN_FAILED_CODE as u8));
    };
    Some(reap(program, args.collect()))
}

/// What the reaper's main loop waits for.
enum Event {
    /// The control channel said `t`.
    Term,
    /// The control channel said `k`, or closed.
    Kill,
    /// The program ended with this status.
    Exited(rustix::process::WaitStatus),
}

fn reap(program: OsString, args: Vec<OsString>) -> ExitCode {
    let me = rustix::process::getpid();
    // Without it (not Linux) orphans go to init; the tree still dies as far as it is found.
    let _ = rustix::process::set_child_subreaper(Some(me));
    let child = match Command::new(&program)
        .args(&args)
        .stdin(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{SPAWN_FAILED}{e}");
            return ExitCode::from(SPAWN_FAILED_CODE as u8);
        }
    };
    let worker = Pid::from_child(&child);
    // The program's status is read here, by pid; `child` is never waited on.
    drop(child);
    let (tx, rx) = mpsc::channel();
    {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let status = loop {
                match rustix::process::waitpid(Some(worker), WaitOptions::empty()) {
                    Ok(Some((_, s))) if s.exited() || s.signaled() => break Some(s),
                    Ok(_) => continue,
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(_) => break None,
                }
            };
            if let Some(s) = status {
                let _ = tx.send(Event::Exited(s));
            }
        });
    }
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut b = [0u8; 1];
        loop {
            match stdin.read(&mut b) {
                Ok(0) | Err(_) => {
                    let _ = tx.send(Event::Kill);
                    return;
                }
                Ok(_) if b[0] == b't' => {
                    let _ = tx.send(Event::Term);
                }
                Ok(_) if b[0] == b'k' => {
                    let _ = tx.send(Event::Kill);
                    return;
                }
                Ok(_) => {}
            }
        }
    });
    let status = loop {
        match rx.recv() {
            Ok(Event::Exited(s)) => break Some(s),
            Ok(Event::Term) => signal_all(me, Signal::TERM),
            // The program dies with the rest; its status comes through the waiting thread.
            Ok(Event::Kill) => signal_all(me, Signal::KILL),
            Err(_) => break None,
        }
    };
    kill_tree(me);
    exit_as(status)
}

/// Exits as the program did: its code, or its signal (raised on this process with the default
/// action; a signal that does not end it here comes out as 128 + its number).
fn exit_as(status: Option<rustix::process::WaitStatus>) -> ExitCode {
    let Some(s) = status else {
        return ExitCode::from(1);
    };
    if let Some(code) = s.exit_status() {
        return ExitCode::from(code as u8);
    }
    let sig = s.terminating_signal().unwrap_or(0);
    if let Some(signal) = Signal::from_named_raw(sig) {
        let _ = rustix::process::kill_process(rustix::process::getpid(), signal);
        std::thread::sleep(Duration::from_millis(100));
    }
    ExitCode::from((128 + sig).clamp(0, 255) as u8)
}

/// Sends `signal` to every live descendant of `root` (this process).
fn signal_all(_root: Pid, signal: Signal) {
    super::proc_walk::each_descendant(|p| {
        if let Some(p) = Pid::from_raw(p) {
            let _ = rustix::process::kill_process(p, signal);
        }
    });
}

/// Kills every descendant of `root` (this process) and reaps them all, until it has no child
/// left (or [`KILL_BOUND`] passed).
fn kill_tree(root: Pid) {
    // Usually the program left nothing behind. A live descendant always has a live ancestor
    // that is this process's child (an orphan is reparented to this subreaper at once), so
    // when there is no child left, not even a zombie, there is nothing to find in `/proc`.
    if !reap_all() {
        return;
    }
    let start = Instant::now();
    loop {
        signal_all(root, Signal::KILL);
        // No child left: every descendant was a child by then or is gone.
        if !reap_all() {
            return;
        }
        if start.elapsed() > KILL_BOUND {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Reaps every child that has ended: whether a child is left (one still running).
fn reap_all() -> bool {
    loop {
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(Some(_)) => continue,
            Ok(None) => return true,
            Err(rustix::io::Errno::INTR) => continue,
            // ECHILD: no child at all.
            Err(_) => return false,
        }
    }
}
