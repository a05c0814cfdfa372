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
pub(crate) fn run_check(
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
    let ok = exit == Some(0);
    let mut tail = tail;
    if !ok
        && let Some(shown) = crate::exec::command::jail_shows()
        && let Some(hint) = missing_hint(&tail, &shown)
    {
        tail.push_str(&hint);
    }
    Ok(CheckRun {
        command: command.to_string(),
        exit,
        ok,
        seconds: ran.elapsed.as_secs_f64(),
        tail,
    })
}

/// What to tell the user when a confined check failed for want of a program or a module: the
/// folders the sandbox showed beyond the system's, where the missing program is on this
/// machine when it is on `PATH` here, and how to show more. `None` when the output does not
/// say something was not found.
fn missing_hint(output: &str, shown: &[String]) -> Option<String> {
    let program = output.lines().find_map(|l| {
        // `sh: 1: NAME: not found`, `bash: NAME: command not found`, `env: 'NAME': No such file`.
        let l = l.trim();
        let before = l
            .strip_suffix(": not found")
            .or_else(|| l.strip_suffix(": command not found"))
            .or_else(|| l.strip_suffix(": No such file or directory"))?;
        let name = before
            .rsplit(": ")
            .next()?
            .trim_matches(|c| c == '\'' || c == '"');
        (!name.is_empty() && !name.contains(' ')).then(|| name.to_string())
    });
    let module = output.lines().find_map(|l| {
        let rest = l.split("No module named ").nth(1)?;
        Some(
            rest.trim()
                .trim_matches(|c| c == '\'' || c == '"')
                .to_string(),
        )
    });
    if program.is_none() && module.is_none() {
        return None;
    }
    let what = match (&program, &module) {
        (Some(p), _) => {
            let host = std::env::var("PATH").unwrap_or_default();
            match crate::exec::sandbox::profile::find_program(p, &host) {
                Some(at) if !p.contains('/') => format!(
                    "{p} is at {} on this machine, which the sandbox does not show: add --sandbox-read {}",
                    at.display(),
                    at.parent()
                        .map_or_else(|| at.display().to_string(), |d| d.display().to_string())
                ),
                _ => format!(
                    "{p} was not found inside the sandbox; if it is installed, add its folder with --sandbox-read PATH"
                ),
            }
        }
        (None, Some(m)) => format!(
            "the Python module {m} was not found inside the sandbox: the project's venv (.venv, VIRTUAL_ENV, Poetry) is shown when git forum finds it; otherwise add the folder that holds {m} with --sandbox-read PATH"
        ),
        (None, None) => return None,
    };
    let shown = if shown.is_empty() {
        "nothing beyond the system folders and the worktree".to_string()
    } else {
        shown.join(", ")
    };
    Some(format!(
        "\ngit forum: {what} (the sandbox showed: {shown})\n"
    ))
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

    #[test]
    fn a_missing_program_or_module_gets_a_hint_naming_what_was_shown() {
        let shown = vec!["/home/u/.venvs/calc".to_string()];
        let h = missing_hint("sh: 1: no-such-tool-xyz: not found\n", &shown).unwrap();
        assert!(
            h.contains("no-such-tool-xyz was not found inside the sandbox"),
            "{h}"
        );
        assert!(
            h.contains("--sandbox-read") && h.contains("/home/u/.venvs/calc"),
            "{h}"
        );
        let h = missing_hint("sh: 1: sh: not found\n", &[]).unwrap();
        assert!(
            h.contains("sh is at /") && h.contains("--sandbox-read /"),
            "{h}"
        );
        let h = missing_hint("/usr/bin/python3: No module named pytest\n", &[]).unwrap();
        assert!(
            h.contains("module pytest") && h.contains("nothing beyond"),
            "{h}"
        );
        assert_eq!(missing_hint("AssertionError: 5 != -1\n", &shown), None);
    }
}
