//! Inputs: every JSON number kept exactly on every surface (CLI, daemon, MCP), one rule for
//! `NaN` and the infinities, reads of user input that stop at their limit whatever the source
//! (a device, a FIFO, a pipe), and causal parents that must name an existing entry.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{ChildStdin, ChildStdout, Command, Output, Stdio};
use std::time::Duration;

use git_forum::ledger::canonical::{self, Value};
use serde_json::{Value as J, json};
use sha2::{Digest, Sha256};

use crate::common::{Guarded, Repo, one_line_error};

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

// ----- the daemon and MCP, as a client sees them -----

struct Daemon {
    child: Guarded,
    addr: String,
    _stdout: BufReader<ChildStdout>,
}

impl Daemon {
    fn start(repo: &Repo) -> Daemon {
        let served = repo.serve(&[], Stdio::null());
        Daemon {
            child: served.child,
            addr: served.addr,
            _stdout: served.stdout,
        }
    }

    /// One request on its own connection: (status, body text).
    fn call(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{}",
            self.addr,
            crate::common::auth_header(&self.addr)
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

// ----- exact numbers -----

/// JSON number literals and their canonical form in Forum's hash (Python's `json.loads`, then
/// `json.dumps(sort_keys=True)`): wide integers stay exact, `1e400` overflows to Infinity.
const NUMBERS: [(&str, &str); 7] = [
    ("18446744073709551616", "18446744073709551616"),
    ("-18446744073709551617", "-18446744073709551617"),
    (
        "123456789012345678901234567890123",
        "123456789012345678901234567890123",
    ),
    ("1e400", "Infinity"),
    ("1.5e300", "1.5e+300"),
    ("0.1", "0.1"),
    ("-0.0", "-0.0"),
];

/// `NaN` and the infinities: accepted as Python's `json.loads` accepts them, hashed as
/// Python's `json.dumps` writes them.
const NON_FINITE: [(&str, &str); 4] = [
    ("NaN", "NaN"),
    ("Infinity", "Infinity"),
    ("-Infinity", "-Infinity"),
    ("-1e999", "-Infinity"),
];

/// Checks a payload read back from a surface: the `payload` member of `text` (JSON as Python
/// reads it) is the number itself, not a string, and re-hashes to `want_hash`, as does the
/// answer's own `payload_hash`.
fn check_read_back(surface: &str, text: &str, literal: &str, want_hash: &str) {
    let v = canonical::parse(text)
        .unwrap_or_else(|e| panic!("{surface} {literal}: unreadable answer ({e}): {text}"));
    let body = v
        .get("payload")
        .unwrap_or_else(|| panic!("{surface} {literal}: no payload in {text}"));
    let n = body.get("v").unwrap();
    assert!(
        matches!(n, Value::Int(_) | Value::Float(_)),
        "{surface} {literal}: the number came back as {n:?}: {text}"
    );
    assert_eq!(
        sha256_hex(&body.canonical()),
        want_hash,
        "{surface} {literal}: the body read back hashes differently: {text}"
    );
    let stated = v
        .get("payload_hash")
        .or_else(|| v.get("entry").and_then(|e| e.get("payload_hash")))
        .and_then(Value::as_str)
        .unwrap();
    assert_eq!(stated, want_hash, "{surface} {literal}: payload_hash");
}

/// Appends `{"v": literal}` through the CLI, the daemon and MCP, reads each back through the
/// same surface, and checks every hash is Forum's.
fn round_trip_everywhere(cases: &[(&str, &str)]) {
    let repo = Repo::new("sha1");
    let daemon = Daemon::start(&repo);
    let mut mcp = McpClient::start(&repo);
    for (literal, canonical_form) in cases {
        let payload = format!(r#"{{"v":{literal}}}"#);
        let want = sha256_hex(&format!(r#"{{"v":{canonical_form}}}"#));

        let out = repo.forum_ok(&[
            "append",
            "--actor",
            "cli",
            "--kind",
            "note",
            "--payload",
            &payload,
            "--json",
        ]);
        let seq = serde_json::from_str::<J>(&out).unwrap()["seq"]
            .as_u64()
            .unwrap();
        let shown = repo.forum_ok(&["show", &seq.to_string(), "--payload", "--json"]);
        check_read_back("CLI", &shown, literal, &want);

        let (code, body) = daemon.call(
            "POST",
            "/append",
            &format!(r#"{{"actor":"http","kind":"note","payload":{payload}}}"#),
        );
        assert_eq!(code, 200, "HTTP append {literal}: {body}");
        let seq = serde_json::from_str::<J>(&body).unwrap()["seq"]
            .as_u64()
            .unwrap();
        let (code, body) = daemon.call("GET", &format!("/payload/{seq}"), "");
        assert_eq!(code, 200, "{body}");
        check_read_back("HTTP", &body, literal, &want);

        let (is_error, text, _) = mcp.call(
            "ledger_append",
            &format!(r#"{{"actor":"mcp","kind":"note","payload":{payload}}}"#),
        );
        assert!(!is_error, "MCP append {literal}: {text}");
        let seq = serde_json::from_str::<J>(&text).unwrap()["seq"]
            .as_u64()
            .unwrap();
        let (is_error, text, reply) = mcp.call("ledger_payload", &format!(r#"{{"seq":{seq}}}"#));
        assert!(!is_error, "{text}");
        check_read_back("MCP", &text, literal, &want);
        // The structured copy, when there is one, holds the same number exactly.
        if let Some(s) = reply["result"].get("structuredContent") {
            let n = &s["payload"]["v"];
            assert!(n.is_number(), "MCP {literal}: structured {n}");
            assert_eq!(
                Value::from_serde(n).canonical(),
                *canonical_form,
                "MCP structured {literal}"
            );
        } else {
            assert!(
                canonical_form.contains("NaN") || canonical_form.contains("Infinity"),
                "MCP {literal}: only a non-finite number leaves out structuredContent"
            );
        }
    }
    mcp.stop();
    daemon.stop();
    // Every entry of the three surfaces verifies, bodies included.
    repo.forum_ok(&["verify", "--deep"]);
}

#[test]
fn exact_numbers_round_trip_through_cli_http_and_mcp() {
    round_trip_everywhere(&NUMBERS);
}

#[test]
fn nan_and_infinity_are_accepted_and_returned_alike_on_every_surface() {
    round_trip_everywhere(&NON_FINITE);
}

#[test]
fn a_forum_ledger_holding_nan_and_infinity_imports_and_verifies() {
    // A Forum ledger directory as Forum writes it: bare NaN/Infinity in payloads.jsonl, the
    // hashes of their canonical text.
    let dir = tempfile::tempdir().unwrap();
    let bodies = [
        r#"{"score": NaN}"#,
        r#"{"high": Infinity, "low": -Infinity}"#,
    ];
    let mut entries = String::new();
    let mut payloads = String::new();
    let mut prev = git_forum::ledger::GENESIS.to_string();
    let mut hashes = Vec::new();
    for (seq, body) in bodies.iter().enumerate() {
        let v = canonical::parse(body).unwrap();
        let ph = sha256_hex(&v.canonical());
        hashes.push(ph.clone());
        let ts = 1.0 + seq as f64;
        let eh = git_forum::ledger::entry_hash(seq as u64, ts, "forum", "note", None, &ph, &prev);
        entries.push_str(&format!(
            r#"{{"seq": {seq}, "ts": {ts:.1}, "actor": "forum", "kind": "note", "causal_parent": null, "payload_hash": "{ph}", "prev_hash": "{prev}", "entry_hash": "{eh}"}}"#
        ));
        entries.push('\n');
        payloads.push_str(&format!(r#"{{"hash": "{ph}", "body": {body}}}"#));
        payloads.push('\n');
        prev = eh;
    }
    assert_eq!(hashes[0], sha256_hex(r#"{"score":NaN}"#));
    std::fs::write(dir.path().join("entries.jsonl"), entries).unwrap();
    std::fs::write(dir.path().join("payloads.jsonl"), payloads).unwrap();

    let repo = Repo::new("sha256");
    repo.forum_ok(&["import", dir.path().to_str().unwrap()]);
    repo.forum_ok(&["verify", "--deep"]);
    let shown = repo.forum_ok(&["show", "1", "--payload", "--json"]);
    let v = canonical::parse(&shown).unwrap();
    assert_eq!(
        sha256_hex(&v.get("payload").unwrap().canonical()),
        hashes[1],
        "{shown}"
    );
    // And it goes out again as Forum wrote it.
    let out = tempfile::tempdir().unwrap();
    let out_dir = out.path().join("export");
    repo.forum_ok(&["export", out_dir.to_str().unwrap()]);
    let exported = std::fs::read_to_string(out_dir.join("payloads.jsonl")).unwrap();
    assert!(
        exported.contains("NaN") && exported.contains("-Infinity"),
        "{exported}"
    );
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
