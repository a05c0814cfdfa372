//! One check command in a task's worktree: `sh -c COMMAND` with the worktree as its directory,
//! in its own process group under the caller's kill scope (`crate::exec::command::run_grouped`,
//! the same registry workers use, so interrupting a run kills its checks too), killed with its
//! children at the deadline, its stdout and stderr read through one pipe of which only the last
//! `cap` bytes are kept. Under a sandbox (`crate::exec::command::in_jail`) it runs confined
//! to the worktree, like the workers.

use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use crate::exec::command::{prepared, run_grouped};
use crate::run::{CheckRun, WorkError};

/// How long the output is waited for once the command's group is gone.
const DRAIN_WAIT: Duration = Duration::from_secs(2);

/// Appends what `r` gives to `kept` until its end, keeping only the last `cap` bytes.
fn collect_tail(mut r: impl Read, cap: usize, kept: &Mutex<Vec<u8>>) {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match r.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let mut k = kept.lock().unwrap_or_else(|p| p.into_inner());
                k.extend_from_slice(&chunk[..n]);
                if k.len() > cap.saturating_mul(2).max(64 * 1024) {
                    let excess = k.len() - cap;
                    k.drain(..excess);
                }
            }
        }
    }
}

/// The last `cap` bytes of `kept`.
fn last_bytes(kept: &Mutex<Vec<u8>>, cap: usize) -> Vec<u8> {
    let k = kept.lock().unwrap_or_else(|p| p.into_inner());
    k[k.len().saturating_sub(cap)..].to_vec()
}

/// The tail as text: a character the cut split at the front is dropped.
fn tail_text(bytes: &[u8]) -> String {
    let mut start = 0;
    while start < bytes.len().min(4) && (bytes[start] & 0xC0) == 0x80 {
        start += 1;
    }
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}

/// Runs `command` in `dir`; see the module doc.
pub(super) fn run_check(
    dir: &Path,
    command: &str,
    deadline: Duration,
    cap: usize,
) -> Result<CheckRun, WorkError> {
    let io = |what: &str, e: std::io::Error| WorkError::Io(format!("cannot {what}: {e}"));
    let (reader, writer) = std::io::pipe().map_err(|e| io("open a pipe for a check", e))?;
    let writer2 = writer
        .try_clone()
        .map_err(|e| io("open a pipe for a check", e))?;
    let mut cmd = prepared(Path::new("sh"), Some(dir)).map_err(|e| io("sandbox a check", e))?;
    cmd.arg("-c")
        .arg(command)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(Stdio::null())
        .stdout(Stdio::from(writer))
        .stderr(Stdio::from(writer2));
    let kept = Arc::new(Mutex::new(Vec::new()));
    let (done_tx, done_rx) = mpsc::channel();
    {
        let kept = Arc::clone(&kept);
        std::thread::spawn(move || {
            collect_tail(reader, cap, &kept);
            let _ = done_tx.send(());
        });
    }
    // `run_grouped` drops `cmd` once the command started, so the pipe closes when the
    // command's group is gone. A process that left the group (`setsid`) may hold it open: the
    // output is then taken as it stands after a short wait, and the reader is left behind.
    let ran = run_grouped(cmd, deadline);
    let _ = done_rx.recv_timeout(DRAIN_WAIT);
    let tail = tail_text(&last_bytes(&kept, cap));
    let ran = ran.map_err(|e| io(&format!("run the check {command:?}"), e))?;
    let exit = if ran.timed_out || ran.interrupted {
        None
    } else {
        ran.status.and_then(|s| s.code())
    };
    Ok(CheckRun {
        command: command.to_string(),
        exit,
        ok: exit == Some(0),
        seconds: ran.elapsed.as_secs_f64(),
        tail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_bytes() {
        let mut data = vec![b'x'; 200_000];
        data.extend_from_slice(b"END");
        let kept = Mutex::new(Vec::new());
        collect_tail(&data[..], 10, &kept);
        assert_eq!(last_bytes(&kept, 10), b"xxxxxxxEND");
        assert_eq!(tail_text("é!".as_bytes().get(1..).unwrap()), "!");
    }
}
