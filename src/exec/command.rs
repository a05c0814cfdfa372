//! The command executor's process handling: run a program with the prompt as its last argument
//! (no shell), in its own process group, with a deadline that kills the whole group
//! (grandchildren too) and stdout/stderr captured up to a cap while the rest is drained and
//! dropped, so a flood neither blocks the child nor grows memory.
//!
//! A non-zero exit, a timeout, a spawn failure and output that is not UTF-8 are distinct errors.

use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// The process groups of the commands running now, and whether new ones are refused (after
/// [`stop_all`]). Process groups are the process's, so this is too.
struct Live {
    groups: BTreeSet<u32>,
    stopped: bool,
}

static LIVE: Mutex<Live> = Mutex::new(Live {
    groups: BTreeSet::new(),
    stopped: false,
});

fn live() -> MutexGuard<'static, Live> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Kills the process group of every command running now (workers, context commands,
/// verifiers, grandchildren included) and refuses to start any more in this process; for an
/// interrupted `git forum`. Returns how many groups were killed.
pub fn stop_all() -> usize {
    let mut l = live();
    l.stopped = true;
    for pgid in &l.groups {
        kill_group(*pgid);
    }
    l.groups.len()
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
pub struct Ran {
    pub stdout: String,
    /// True when stdout was longer than the cap and was cut.
    pub truncated: bool,
    pub stderr: String,
    pub elapsed: Duration,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot run {program:?}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{program:?} did not finish within {}s; it was killed with its process group", timeout.as_secs_f64())]
    Timeout { program: String, timeout: Duration },
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
    #[error("{program:?} was not started: git forum is being interrupted")]
    Interrupted { program: String },
}

fn tail(stderr: &str) -> String {
    let last = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    if last.is_empty() {
        String::new()
    } else {
        format!(": {}", last.trim())
    }
}

/// Reads `r` to the end, keeping at most `cap` bytes. Returns the bytes and whether more came.
fn drain<R: Read>(mut r: R, cap: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::with_capacity(cap.min(64 * 1024));
    let mut buf = [0u8; 64 * 1024];
    let mut over = false;
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                over |= n > room;
            }
        }
    }
    (kept, over)
}

/// Kills every process of the group `pgid`; a group already gone is not an error.
fn kill_group(pgid: u32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pgid as i32) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// Runs `argv` (program first) with `prompt` appended as the last argument.
pub fn run(argv: &[String], prompt: &str, limits: Limits) -> Result<Ran, RunError> {
    let Some((program, args)) = argv.split_first() else {
        return Err(RunError::Empty("the command is empty".into()));
    };
    let interrupted = || RunError::Interrupted {
        program: program.clone(),
    };
    if live().stopped {
        return Err(interrupted());
    }
    let start = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .arg(prompt)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|source| RunError::Spawn {
            program: program.clone(),
            source,
        })?;
    let pgid = child.id();
    {
        // Registered, or killed at once when an interruption came while it started.
        let mut l = live();
        if l.stopped {
            kill_group(pgid);
        } else {
            l.groups.insert(pgid);
        }
    }
    let out = child.stdout.take().expect("piped");
    let err = child.stderr.take().expect("piped");
    let (max_out, max_err) = (limits.max_stdout, limits.max_stderr);
    let out_reader = thread::spawn(move || drain(out, max_out));
    let err_reader = thread::spawn(move || drain(err, max_err));
    let deadline = start + limits.timeout;
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => {
                timed_out = true;
                kill_group(pgid);
                break child.wait().ok();
            }
            Ok(None) => thread::sleep(Duration::from_millis(5)),
            Err(_) => break None,
        }
    };
    // Whatever the child left running (a grandchild holding the pipes) goes with its group, so
    // the readers reach the end of their pipes.
    kill_group(pgid);
    live().groups.remove(&pgid);
    let (stdout, truncated) = out_reader.join().unwrap_or_default();
    let (stderr, _) = err_reader.join().unwrap_or_default();
    if live().stopped && !status.is_some_and(|s| s.success()) {
        return Err(interrupted());
    }
    let stderr = String::from_utf8_lossy(&stderr).into_owned();
    if timed_out {
        return Err(RunError::Timeout {
            program: program.clone(),
            timeout: limits.timeout,
        });
    }
    let status = status.ok_or_else(|| RunError::Empty(format!("lost track of {program:?}")))?;
    if !status.success() {
        return Err(RunError::Failed {
            program: program.clone(),
            status,
            stderr,
        });
    }
    let stdout = match String::from_utf8(stdout) {
        Ok(s) => s,
        // A cut can split a character; only a bad byte before the last few counts.
        Err(e) if truncated && e.utf8_error().error_len().is_none() => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).expect("prefix is valid")
        }
        Err(e) => {
            return Err(RunError::NotUtf8 {
                program: program.clone(),
                offset: e.utf8_error().valid_up_to(),
            });
        }
    };
    Ok(Ran {
        stdout,
        truncated,
        stderr,
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
    fn a_hang_is_killed_with_its_grandchildren_within_the_deadline() {
        let limits = Limits {
            timeout: Duration::from_millis(300),
            ..Limits::default()
        };
        let t = Instant::now();
        // The grandchild keeps the pipes open: without killing the group, reading would hang.
        let e = run(&sh("sleep 30 & sleep 30"), "", limits).unwrap_err();
        assert!(matches!(e, RunError::Timeout { .. }), "{e}");
        assert!(
            t.elapsed() < Duration::from_millis(1300),
            "took {:?}",
            t.elapsed()
        );
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
    fn failures_are_distinct() {
        let e = run(&sh("echo oops >&2; exit 3"), "", Limits::default()).unwrap_err();
        assert!(matches!(e, RunError::Failed { .. }), "{e}");
        assert!(e.to_string().contains("oops"), "{e}");
        let e = run(&sh("printf '\\377\\376'"), "", Limits::default()).unwrap_err();
        assert!(matches!(e, RunError::NotUtf8 { offset: 0, .. }), "{e}");
        let e = run(&["/nonexistent/program".into()], "", Limits::default()).unwrap_err();
        assert!(matches!(e, RunError::Spawn { .. }), "{e}");
        assert!(matches!(
            run(&[], "", Limits::default()),
            Err(RunError::Empty(_))
        ));
    }
}
