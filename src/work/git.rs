//! Running the `git` program for a `--work` run: the clean environment of `crate::gitproc` (no
//! inherited `GIT_DIR`, `GIT_WORK_TREE` or `GIT_INDEX_FILE`, no optional index locks, so the
//! user's index is never refreshed behind their back), no hooks, no fsmonitor, no signing
//! prompts, every output read up to a bound, and failures as one line.
//!
//! The `git` CLI rather than gix: worktrees, `merge-tree --write-tree` and `add -A` with the
//! user's `.gitignore` rules are what git itself does best, and the CLI keeps the exact
//! semantics a user sees. (Commit objects and a worktree's index are read or written in process
//! where that spares a process per change: see `GitWork::commit_tree` and `racy`.)

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::run::WorkError;

/// The most of one git command's standard output read (numstat, name-status, worktree lists).
pub(crate) const OUTPUT_LIMIT: usize = 64 << 20;
/// The most of one git command's standard error kept.
const ERROR_LIMIT: usize = 64 << 10;

/// What one git command did.
pub(crate) struct Out {
    /// Whether it exited 0.
    pub(crate) ok: bool,
    /// Its exit code, when it exited.
    pub(crate) code: Option<i32>,
    /// Its standard output (up to the limit it was read with).
    pub(crate) stdout: Vec<u8>,
    /// Whether standard output went past the limit (the command was then stopped).
    pub(crate) cut: bool,
    /// Its standard error's last line, trimmed.
    pub(crate) message: String,
}

impl Out {
    /// Standard output as text, trailing newlines trimmed.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout)
            .trim_end_matches('\n')
            .to_string()
    }
}

/// A `git -C DIR` command with the clean environment and stdin closed.
pub(crate) fn git(dir: &Path) -> Command {
    let mut c = user_git(dir);
    c.args([
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "core.fsmonitor=false",
        "-c",
        "commit.gpgSign=false",
    ]);
    c
}

/// A `git -C DIR` command with the clean environment but the user's own configuration and
/// hooks, for what git forum does in the user's branch on their behalf (`apply`).
pub(crate) fn user_git(dir: &Path) -> Command {
    // git forum's one environment policy: see `crate::gitproc`.
    let mut c = crate::gitproc::in_dir(dir);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

fn spawn_error(e: std::io::Error) -> WorkError {
    WorkError::Io(format!("cannot run git: {e}"))
}

/// Runs `cmd`, reading at most `limit` bytes of its standard output; past that the command is
/// stopped and `cut` says so.
pub(crate) fn run_limited(cmd: Command, limit: usize) -> Result<Out, WorkError> {
    run_reading(cmd, |out| {
        let mut stdout = Vec::new();
        let _ = out.take(limit as u64 + 1).read_to_end(&mut stdout);
        let cut = stdout.len() > limit;
        stdout.truncate(limit);
        Ok(((stdout, cut), ()))
    })
    .map(|(out, ())| out)
}

/// Runs `cmd`, a `diff -z --raw --numstat --patch`, whose output is its statistics (records
/// ended by NUL), one more NUL, then the patch. Returns the statistics (all of them, up to
/// [`OUTPUT_LIMIT`], else an error) and the patch read up to `cap` bytes (past that the command
/// is stopped and `cut` says so).
pub(crate) fn run_split(cmd: Command, cap: usize) -> Result<(Vec<u8>, Out), WorkError> {
    let (patch, stats) = run_reading(cmd, |mut out| {
        let mut buf = Vec::new();
        let mut chunk = vec![0u8; 64 << 10];
        // Where the patch starts, once the NUL after the statistics is seen.
        let mut start: Option<usize> = None;
        let mut cut = false;
        loop {
            let n = match out.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            let from = buf.len().saturating_sub(1);
            buf.extend_from_slice(&chunk[..n]);
            if start.is_none() {
                start = buf[from..]
                    .windows(2)
                    .position(|w| w == [0, 0])
                    .map(|i| from + i + 2);
                if start.is_none() && buf.len() > OUTPUT_LIMIT {
                    return Err(WorkError::Git(format!(
                        "git diff printed more than {} MiB of statistics",
                        OUTPUT_LIMIT >> 20
                    )));
                }
            }
            if start.is_some_and(|s| buf.len() - s > cap) {
                cut = true;
                break;
            }
        }
        let at = start.unwrap_or(buf.len());
        let mut patch = buf.split_off(at);
        // The statistics keep the NUL that ends their last record, not the separator.
        if start.is_some() {
            buf.pop();
        }
        patch.truncate(cap);
        Ok(((patch, cut), buf))
    })?;
    Ok((stats, patch))
}

/// Runs `cmd` with `read` taking its standard output (returning what it kept, whether it cut
/// the output short, and anything more); a cut stops the command.
fn run_reading<T>(
    mut cmd: Command,
    read: impl FnOnce(std::process::ChildStdout) -> Result<((Vec<u8>, bool), T), WorkError>,
) -> Result<(Out, T), WorkError> {
    let mut child: Child = cmd.spawn().map_err(spawn_error)?;
    let err = child.stderr.take();
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut e) = err {
            let mut chunk = [0u8; 8192];
            // Keep the tail: a failure explains itself last.
            while let Ok(n) = e.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() > 2 * ERROR_LIMIT {
                    buf.drain(..buf.len() - ERROR_LIMIT);
                }
            }
        }
        buf
    });
    let read = match child.stdout.take() {
        Some(out) => read(out),
        None => Err(WorkError::Io("git's output was not piped".into())),
    };
    let ((stdout, cut), more) = match read {
        Ok(r) => r,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            let _ = err_reader.join();
            return Err(e);
        }
    };
    if cut {
        let _ = child.kill();
    }
    let status = child.wait().map_err(spawn_error)?;
    let err = err_reader.join().unwrap_or_default();
    let message = String::from_utf8_lossy(&err)
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_string();
    Ok((
        Out {
            ok: status.success() && !cut,
            code: status.code(),
            stdout,
            cut,
            message,
        },
        more,
    ))
}

/// Runs `git -C DIR ARGS` (output up to [`OUTPUT_LIMIT`]), whatever its exit status.
pub(crate) fn run(dir: &Path, args: &[&str]) -> Result<Out, WorkError> {
    let mut c = git(dir);
    c.args(args);
    run_limited(c, OUTPUT_LIMIT)
}

/// Runs `git -C DIR ARGS` and returns its output as text, or its failure as one line.
pub(crate) fn ok(dir: &Path, args: &[&str]) -> Result<String, WorkError> {
    let out = run(dir, args)?;
    ensure(&out, args)?;
    Ok(out.text())
}

/// The failure of `out` (from `git ARGS`) as a [`WorkError::Git`], or nothing when it passed.
pub(crate) fn ensure(out: &Out, args: &[&str]) -> Result<(), WorkError> {
    if out.ok {
        return Ok(());
    }
    let verb = args
        .iter()
        .find(|a| !a.starts_with('-') && !a.contains('='))
        .unwrap_or(&"");
    Err(WorkError::Git(if out.cut {
        format!("git {verb} printed more than {} MiB", OUTPUT_LIMIT >> 20)
    } else if out.message.is_empty() {
        format!("git {verb} exited with {:?}", out.code)
    } else {
        format!("git {verb}: {}", out.message)
    }))
}

/// Text cut to at most `cap` bytes on a character boundary; whether it was cut.
pub(crate) fn cut_text(bytes: &[u8], cap: usize) -> (String, bool) {
    let cut = bytes.len() > cap;
    let kept = &bytes[..bytes.len().min(cap)];
    let text = match std::str::from_utf8(kept) {
        Ok(s) => s.to_string(),
        // The cut split a character: drop its first bytes.
        Err(e) if cut && e.error_len().is_none() => {
            String::from_utf8_lossy(&kept[..e.valid_up_to()]).into_owned()
        }
        Err(_) => String::from_utf8_lossy(kept).into_owned(),
    };
    (text, cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_never_splits_a_character() {
        assert_eq!(cut_text("aé".as_bytes(), 2), ("a".to_string(), true));
        assert_eq!(cut_text(b"abc", 3), ("abc".to_string(), false));
    }
}
