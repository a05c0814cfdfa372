//! Inputs: reads of user input that stop at their limit whatever the source (a device, a FIFO,
//! a pipe).

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, Output, Stdio};

use crate::common::Repo;

/// A child process killed on drop if it is still running.
struct Guarded(Child);

impl Drop for Guarded {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// The error of a failed command: exactly one line on stderr holding `needle`, a non-zero
/// exit, nothing on stdout.
fn one_line_error(o: &Output, needle: &str) -> String {
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(!o.status.success(), "should fail: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err:?}");
    assert!(err.contains(needle), "{needle:?} not in {err:?}");
    assert!(o.stdout.is_empty(), "stdout: {:?}", o.stdout);
    err
}

// ----- bounded reads -----

/// `git forum` with `args`, its standard input fed by `feed` from a thread; the output once it
/// exits. The feeder stops at the first write error (the reader closed the pipe).
fn with_stdin<S: AsRef<std::ffi::OsStr>>(
    repo: &Repo,
    args: &[S],
    feed: impl FnOnce(ChildStdin) + Send + 'static,
) -> Output {
    let mut child = Guarded(
        repo.forum()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stdin = child.0.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || feed(stdin));
    let out = child.0.stdout.take().unwrap();
    let err = child.0.stderr.take().unwrap();
    let read_all = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let (out, err) = (read_all(Box::new(out)), read_all(Box::new(err)));
    let status = child.0.wait().unwrap();
    feeder.join().unwrap();
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// Writes zeros until the reader goes away.
fn endless(mut w: impl Write) {
    let chunk = vec![b'0'; 64 * 1024];
    while w.write_all(&chunk).is_ok() {}
}

/// [`Repo::forum_ok`] with owned arguments.
fn ok(repo: &Repo, args: &[String]) -> String {
    repo.forum_ok(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// `append --actor a --kind k` followed by `extra`.
fn append(extra: &[&str]) -> Vec<String> {
    ["append", "--actor", "a", "--kind", "k"]
        .iter()
        .chain(extra)
        .map(|s| s.to_string())
        .collect()
}

#[test]
fn payload_and_proof_reads_stop_at_their_limit_on_devices_pipes_and_fifos() {
    let repo = Repo::new("sha1");
    ok(&repo, &append(&["--payload", "1"]));
    let before = repo.snapshot();

    // A device that never ends.
    let o = repo
        .forum()
        .args(append(&["--payload-file", "/dev/zero"]))
        .output()
        .unwrap();
    one_line_error(
        &o,
        "payload file /dev/zero is longer than the 33554432 byte limit",
    );
    assert_eq!(o.status.code(), Some(2));
    let o = repo
        .forum()
        .args(["verify-proof", "/dev/zero"])
        .output()
        .unwrap();
    one_line_error(
        &o,
        "proof file /dev/zero is longer than the 1048576 byte limit",
    );
    // The other files commands read (plans, rosters, policies, runtime configs, texts).
    let o = repo
        .forum()
        .args(["plan", "--file", "/dev/zero"])
        .output()
        .unwrap();
    one_line_error(
        &o,
        "plan file /dev/zero is longer than the 8388608 byte limit",
    );
    let o = repo
        .forum()
        .args(["route", "--roster", "/dev/zero", "ship it"])
        .output()
        .unwrap();
    one_line_error(&o, "roster /dev/zero is longer than the 8388608 byte limit");

    // Standard input, piped without end, by `-` and by /dev/stdin.
    for name in ["-", "/dev/stdin"] {
        let o = with_stdin(&repo, &append(&["--payload-file", name]), endless);
        one_line_error(&o, "longer than the 33554432 byte limit");
        let o = with_stdin(&repo, &["verify-proof", name], endless);
        one_line_error(&o, "longer than the 1048576 byte limit");
    }

    // A FIFO: an endless writer is cut off, a short one is read whole.
    let fifo = repo.path().join("payload.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    for (feed, ok) in [(None, false), (Some(r#"{"from":"fifo"}"#), true)] {
        let path = fifo.clone();
        let writer = std::thread::spawn(move || {
            let w = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            match feed {
                None => endless(w),
                Some(text) => {
                    let mut w = w;
                    w.write_all(text.as_bytes()).unwrap();
                }
            }
        });
        let o = repo
            .forum()
            .args(append(&["--payload-file", fifo.to_str().unwrap()]))
            .output()
            .unwrap();
        writer.join().unwrap();
        if ok {
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        } else {
            one_line_error(&o, "is longer than the 33554432 byte limit");
            assert_eq!(repo.snapshot(), before, "a refused read wrote something");
        }
    }
    let shown = repo.forum_ok(&["show", "1", "--payload", "--json"]);
    assert!(shown.contains(r#""from": "fifo""#), "{shown}");

    // Under the limit, standard input still works.
    let o = with_stdin(&repo, &append(&["--payload-file", "-"]), |mut w| {
        w.write_all(b"[1, 2]\n").unwrap();
    });
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    repo.forum_ok(&["verify", "--deep"]);
}
