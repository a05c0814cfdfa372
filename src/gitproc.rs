//! The one place a `git` process is built. Every git command git forum starts gets the same
//! environment: no inherited variable that would point it at another repository, work tree,
//! index, object store or namespace than the one its own command line names (a hook, a worker
//! or a caller's shell may have set any of them), no terminal prompt, no optional index locks
//! (so the user's index is never refreshed behind their back) and git's untranslated messages
//! (errors quote them). Output is read up to a bound, and a failure names the git command.
//!
//! A leaf: it uses nothing else of git forum, so every module may use it.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// Variables removed from every git command's environment: each would make git read or write
/// somewhere other than what its `--git-dir` or `-C` names. Callers that mean one of them set it
/// again explicitly after building the command.
pub(crate) const SCRUBBED: [&str; 8] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_PREFIX",
    "GIT_NAMESPACE",
];

/// The most of one git command's standard output or error read by [`output`] unless the caller
/// asks for less (a hostile remote can make `git push` print `remote:` lines without end).
pub(crate) const OUTPUT_LIMIT: u64 = 256 << 20;

/// Why a git process could not be run to completion.
#[derive(Debug, thiserror::Error)]
pub enum GitProcessError {
    /// The program could not be started or waited for.
    #[error("cannot run git ({0}); install git and make sure it is on PATH")]
    Spawn(#[source] std::io::Error),
    /// It printed more than the bound; it was stopped.
    #[error(
        "git {verb} printed more than {mib} MiB; stopped it (a remote that talks without end?)"
    )]
    TooLong { verb: String, mib: u64 },
    /// Its standard input could not be written.
    #[error("writing to git: {0}")]
    Input(#[source] std::io::Error),
}

/// A `git` command with the policy above, standard input closed.
pub(crate) fn command() -> Command {
    let mut c = Command::new("git");
    for var in SCRUBBED {
        c.env_remove(var);
    }
    c.env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("LC_ALL", "C")
        .stdin(Stdio::null());
    c
}

/// `git --git-dir DIR` with the policy above.
pub(crate) fn at_git_dir(git_dir: &Path) -> Command {
    let mut c = command();
    c.arg("--git-dir").arg(git_dir);
    c
}

/// `git -C DIR` with the policy above.
pub(crate) fn in_dir(dir: &Path) -> Command {
    let mut c = command();
    c.arg("-C").arg(dir);
    c
}

/// Lets git ask the user for a credential on the terminal, as a plain `git push` or `git fetch`
/// would: for the network commands a user runs (`git forum push`, `fetch`), never for a worker's.
/// The user's own `GIT_TERMINAL_PROMPT` still decides when set.
pub(crate) fn allow_terminal_prompt(cmd: &mut Command) {
    match std::env::var_os("GIT_TERMINAL_PROMPT") {
        Some(v) => cmd.env("GIT_TERMINAL_PROMPT", v),
        None => cmd.env_remove("GIT_TERMINAL_PROMPT"),
    };
}

/// Lets `cmd` see the objects of a push that git still holds in quarantine, when this process
/// is a server hook checking that push (git sets `GIT_QUARANTINE_PATH` there, and shows the
/// pushed objects only through the object directories it names in the environment). Elsewhere
/// it changes nothing, so the scrubbed policy above holds.
pub(crate) fn see_quarantined_objects(cmd: &mut Command) {
    if std::env::var_os("GIT_QUARANTINE_PATH").is_none() {
        return;
    }
    for var in ["GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES"] {
        if let Some(v) = std::env::var_os(var) {
            cmd.env(var, v);
        }
    }
}

/// The git subcommand `cmd` runs (its first argument that is neither an option nor an option's
/// value), for error messages.
pub(crate) fn verb(cmd: &Command) -> String {
    let mut args = cmd.get_args();
    while let Some(a) = args.next() {
        if [OsStr::new("--git-dir"), OsStr::new("-C"), OsStr::new("-c")].contains(&a) {
            args.next();
        } else if !a.to_string_lossy().starts_with('-') {
            return a.to_string_lossy().into_owned();
        }
    }
    String::new()
}

/// Runs `cmd` with `input` on its standard input (closed when `None`) and returns its output
/// whatever its exit status, reading standard output and error up to `limit` bytes each; past
/// that the command is killed and this fails.
pub(crate) fn output(
    cmd: Command,
    input: Option<&[u8]>,
    limit: u64,
) -> Result<Output, GitProcessError> {
    let stdin = if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    };
    output_from(cmd, stdin, input, limit)
}

/// [`output`] for a command whose standard input is `stdin`, a file it is given to hold (never
/// read or written from here).
pub(crate) fn output_with_stdin(
    cmd: Command,
    stdin: Stdio,
    limit: u64,
) -> Result<Output, GitProcessError> {
    output_from(cmd, stdin, None, limit)
}

fn output_from(
    mut cmd: Command,
    stdin: Stdio,
    input: Option<&[u8]>,
    limit: u64,
) -> Result<Output, GitProcessError> {
    let verb = verb(&cmd);
    let mut child = cmd
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(GitProcessError::Spawn)?;
    let writer = input.map(|input| {
        let stdin = child.stdin.take();
        let input = input.to_vec();
        // Written on its own thread, so that git's output is read while it reads its input.
        std::thread::spawn(move || stdin.map(|mut s| s.write_all(&input)).transpose())
    });
    let out = bounded(child, &verb, limit);
    if let Some(writer) = writer {
        writer
            .join()
            .unwrap_or(Ok(None))
            .map_err(GitProcessError::Input)?;
    }
    out
}

/// Waits for `child`, reading its stdout and stderr up to `limit` bytes each; past that the
/// child is killed and the command fails with one line.
fn bounded(mut child: Child, verb: &str, limit: u64) -> Result<Output, GitProcessError> {
    let pid = rustix::process::Pid::from_child(&child);
    let read = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(r) = r {
                let _ = r.take(limit + 1).read_to_end(&mut buf);
            }
            if buf.len() as u64 > limit {
                // Stop it now: otherwise it blocks on this full pipe and never closes the other.
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
            buf
        })
    };
    let out = read(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err = read(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if stdout.len() as u64 > limit || stderr.len() as u64 > limit {
        let _ = child.kill();
        let _ = child.wait();
        return Err(GitProcessError::TooLong {
            verb: verb.to_string(),
            mib: (limit >> 20).max(1),
        });
    }
    let status = child.wait().map_err(GitProcessError::Spawn)?;
    Ok(Output {
        status,
        stdout,
        stderr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_git_command_drops_the_variables_that_redirect_it() {
        let c = at_git_dir(Path::new("/x"));
        let envs: Vec<_> = c.get_envs().collect();
        for var in SCRUBBED {
            assert!(envs.contains(&(OsStr::new(var), None)), "{var} is kept");
        }
        assert!(envs.contains(&(OsStr::new("GIT_TERMINAL_PROMPT"), Some(OsStr::new("0")))));
        assert_eq!(verb(&c), "");
        let mut c = in_dir(Path::new("/x"));
        c.args(["-c", "a.b=c", "--no-pager", "log", "-1"]);
        assert_eq!(verb(&c), "log");
    }

    #[test]
    fn output_past_the_bound_stops_git_and_names_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let mut init = in_dir(dir.path());
        init.args(["init", "-q"]);
        assert!(output(init, None, OUTPUT_LIMIT).unwrap().status.success());
        let mut c = in_dir(dir.path());
        c.args(["hash-object", "--stdin"]);
        let o = output(c, Some(b"hello"), OUTPUT_LIMIT).unwrap();
        assert_eq!(o.stdout.len(), 41);
        let mut c = in_dir(dir.path());
        c.args(["help", "-a"]);
        let e = output(c, None, 10).unwrap_err();
        assert_eq!(
            e.to_string(),
            "git help printed more than 1 MiB; stopped it (a remote that talks without end?)"
        );
    }
}
