//! Inputs: reads of user input that stop at their limit whatever the source (a device, a FIFO,
//! a pipe), and causal parents that must name an existing entry.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value as J, json};

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

// ----- the daemon and MCP, as a client sees them -----

struct Daemon {
    child: Guarded,
    addr: String,
    _stdout: BufReader<ChildStdout>,
}

impl Daemon {
    fn start(repo: &Repo) -> Daemon {
        let mut child = Guarded(
            repo.forum()
                .args(["serve", "--port", "0"])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("start git forum serve"),
        );
        let mut out = BufReader::new(child.0.stdout.take().unwrap());
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        let addr = first
            .trim()
            .strip_prefix("listening http://")
            .unwrap_or_else(|| panic!("first line {first:?}"))
            .to_string();
        Daemon {
            child,
            addr,
            _stdout: out,
        }
    }

    /// One request on its own connection: (status, body text).
    fn call(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
            self.addr
        );
        if method == "POST" {
            req.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        req.push_str("\r\n");
        req.push_str(body);
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out).into_owned();
        let (head, body) = text
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("no response: {text:?}"));
        let code = head.split(' ').nth(1).unwrap().parse().unwrap();
        (code, body.to_string())
    }

    fn stop(mut self) {
        let pid = rustix::process::Pid::from_child(&self.child.0);
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        self.child.0.wait().unwrap();
    }
}

/// `git forum mcp`, one request line at a time.
struct McpClient {
    child: Guarded,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl McpClient {
    fn start(repo: &Repo) -> McpClient {
        let mut child = Guarded(
            repo.forum()
                .arg("mcp")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("start git forum mcp"),
        );
        let stdin = child.0.stdin.take();
        let stdout = BufReader::new(child.0.stdout.take().unwrap());
        McpClient {
            child,
            stdin,
            stdout,
            next_id: 1,
        }
    }

    /// Sends one raw line; returns the reply line.
    fn line(&mut self, line: &str) -> String {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        let mut reply = String::new();
        self.stdout.read_line(&mut reply).unwrap();
        reply
    }

    /// `tools/call` of `tool` with `arguments` written as JSON text (so it may hold what
    /// serde_json cannot build: NaN, wide integers). Returns (isError, text content, the reply).
    fn call(&mut self, tool: &str, arguments: &str) -> (bool, String, J) {
        let id = self.next_id;
        self.next_id += 1;
        let reply = self.line(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}}}}}"#
        ));
        let v: J = serde_json::from_str(&reply)
            .unwrap_or_else(|e| panic!("the reply line is not strict JSON ({e}): {reply}"));
        assert_eq!(v["id"], json!(id), "{reply}");
        let result = &v["result"];
        let text = result["content"][0]["text"].as_str().unwrap().to_string();
        (result["isError"] == json!(true), text, v)
    }

    fn stop(mut self) {
        drop(self.stdin.take());
        let status = self.child.0.wait().unwrap();
        assert!(status.success());
    }
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

// ----- causal parents -----

#[test]
fn a_causal_parent_must_name_an_existing_entry_on_every_surface() {
    let repo = Repo::new("sha1");
    let empty = repo.snapshot();
    let o = repo
        .forum()
        .args(append(&["--payload", "1", "--parent", "0"]))
        .output()
        .unwrap();
    one_line_error(&o, "causal parent 0 names no entry: the ledger is empty");
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(repo.snapshot(), empty);

    ok(&repo, &append(&["--payload", "1"]));
    ok(&repo, &append(&["--payload", "2", "--parent", "0"]));
    let before = repo.snapshot();
    for bad in ["2", "3", "999", "-1"] {
        let o = repo
            .forum()
            .args(append(&["--payload", "3", &format!("--parent={bad}")]))
            .output()
            .unwrap();
        one_line_error(
            &o,
            &format!("causal parent {bad} names no entry: give a seq from 0 to 1"),
        );
        assert_eq!(o.status.code(), Some(2));
        assert_eq!(repo.snapshot(), before, "--parent {bad} wrote something");
    }
    // The entry before the new one is a parent.
    ok(&repo, &append(&["--payload", "3", "--parent", "1"]));

    let daemon = Daemon::start(&repo);
    let (code, body) = daemon.call(
        "POST",
        "/append",
        r#"{"actor":"http","kind":"note","payload":1,"causal_parent":3}"#,
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains("causal parent 3 names no entry: give a seq from 0 to 2"),
        "{body}"
    );
    let (code, body) = daemon.call(
        "POST",
        "/append",
        r#"{"actor":"http","kind":"note","payload":1,"causal_parent":2}"#,
    );
    assert_eq!(code, 200, "{body}");
    daemon.stop();

    let mut mcp = McpClient::start(&repo);
    let (is_error, text, _) = mcp.call(
        "ledger_append",
        r#"{"actor":"mcp","kind":"note","payload":1,"causal_parent":40}"#,
    );
    assert!(is_error, "{text}");
    assert!(
        text.contains("causal parent 40 names no entry: give a seq from 0 to 3"),
        "{text}"
    );
    mcp.stop();
    let log = repo.forum_ok(&["log", "--json"]);
    assert_eq!(
        serde_json::from_str::<J>(&log)
            .unwrap()
            .as_array()
            .map(Vec::len),
        Some(4),
        "{log}"
    );
    repo.forum_ok(&["verify", "--deep"]);
}
