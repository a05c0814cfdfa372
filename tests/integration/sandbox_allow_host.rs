//! `--sandbox-allow-host`, through the binary and the real sandbox: a confined coding agent (a
//! stand-in `claude` on PATH) asks git forum's egress proxy for a loopback service of the host
//! that is not its model. Without the flag the proxy refuses it and the task's result counts the
//! refusal under that host; with `--sandbox-allow-host 127.0.0.1:PORT` it passes, and the run's
//! record names the host. Conflicting flags and a bad host are refused in one line.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::{Repo, one_line_error};
use crate::presets::task_result;
use crate::sandbox::bwrap_works;
use crate::work_run::{payloads, setup};

/// A `claude` stand-in: every control prompt gets its scripted answer; a task asks the proxy
/// (whose address the egress puts in `HTTP_PROXY`) for `http://127.0.0.1:PORT/`, fixes
/// calc.py, and says what the other host answered.
fn stand_in(port: u16) -> String {
    format!(
        r#"#!/usr/bin/env python3
import http.client, json, os, sys
prompt = sys.argv[-1]
def say(text):
    print(json.dumps({{"type": "system", "subtype": "init", "model": "claude-stand-in"}}))
    print(json.dumps({{"type": "result", "subtype": "success", "is_error": False,
        "permission_denials": [], "result": text, "total_cost_usd": 0.0,
        "usage": {{"input_tokens": 10, "output_tokens": 5}}}}))
if "Break this request" in prompt:
    say(json.dumps({{"tasks": [{{"id": "T1", "agent": "backend",
        "instruction": "make add in calc.py add", "depends_on": [], "done_when": ["the tests pass"]}}]}}))
elif "Decide whether to ship" in prompt:
    say('{{"decision":"merge","reason":"scripted"}}')
elif "Judge one task" in prompt:
    say('{{"decision":"pass","score":0.9,"reason":"ok"}}')
elif "Write the answer" in prompt:
    say("Fixed calc.")
else:
    status = "no proxy"
    proxy = os.environ.get("HTTP_PROXY", "")
    if proxy:
        host, port = proxy.rstrip("/").rsplit("/", 1)[-1].split(":")
        try:
            c = http.client.HTTPConnection(host, int(port), timeout=20)
            c.request("GET", "http://127.0.0.1:{port}/")
            status = str(c.getresponse().status)
        except Exception as e:
            status = "error " + type(e).__name__
    src = open("calc.py").read()
    open("calc.py", "w").write(src.replace("return a - b", "return a + b"))
    say("fixed add; the other host answered " + status)
"#
    )
}

/// A loopback HTTP service of the host that answers `200` to whatever reaches it, counting the
/// connections; it stops when dropped.
struct Other {
    port: u16,
    hits: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Other {
    fn start() -> Other {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let port = l.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (h, s) = (Arc::clone(&hits), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok((mut c, _)) => {
                        h.fetch_add(1, Ordering::SeqCst);
                        c.set_nonblocking(false).unwrap();
                        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                        let mut buf = [0u8; 4096];
                        let _ = c.read(&mut buf);
                        let _ = c.write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                        );
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Other {
            port,
            hits,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Other {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A repository with calc.py's bug and the stand-in in `REPO/bin` (kept out of git); the PATH
/// that finds it first.
fn repo_with_agent(port: u16) -> (Repo, String) {
    use std::os::unix::fs::PermissionsExt;
    let repo = Repo::new("sha1");
    setup(&repo);
    let bin = repo.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let p = bin.join("claude");
    std::fs::write(&p, stand_in(port)).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(repo.git_dir().join("info").join("exclude"), "bin/\n").unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    (repo, path)
}

fn submit(repo: &Repo, path: &str, flags: &[&str]) -> std::process::Output {
    let mut args = vec![
        "submit",
        "--json",
        "--work",
        "--claude",
        "--sandbox",
        "--check",
        "python3 -m unittest -q",
    ];
    args.extend_from_slice(flags);
    args.push("make the failing test in calc pass");
    repo.forum().env("PATH", path).args(&args).output().unwrap()
}

#[test]
fn a_confined_agent_reaches_another_host_only_when_the_run_allows_it() {
    assert!(bwrap_works(), "bubblewrap cannot make namespaces here");
    let other = Other::start();
    let key = format!("127.0.0.1:{}", other.port);

    // Refused: the proxy admits only the model's endpoint.
    let (repo, path) = repo_with_agent(other.port);
    let o = submit(&repo, &path, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = task_result(&repo);
    assert_eq!(
        r["egress"]["refused_connections"][&key], 1,
        "the refusal is counted under the host: {r}"
    );
    assert_eq!(
        other.hits.load(Ordering::SeqCst),
        0,
        "a connection got through"
    );
    let sandbox = payloads(&repo, "request")[0].1["work"]["sandbox"].clone();
    assert_eq!(sandbox["net"], false, "{sandbox}");
    assert!(sandbox.get("allow_hosts").is_none(), "{sandbox}");

    // Admitted: the run names the host.
    let (repo, path) = repo_with_agent(other.port);
    let o = submit(&repo, &path, &["--sandbox-allow-host", &key]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = task_result(&repo);
    assert_eq!(
        r["egress"]["refused_connections"],
        serde_json::json!({}),
        "{r}"
    );
    assert_eq!(
        other.hits.load(Ordering::SeqCst),
        1,
        "the allowed host got the request"
    );
    let sandbox = payloads(&repo, "request")[0].1["work"]["sandbox"].clone();
    assert_eq!(
        sandbox["allow_hosts"],
        serde_json::json!([key]),
        "{sandbox}"
    );
    assert_eq!(sandbox["net"], false, "{sandbox}");
}

#[test]
fn allow_host_with_the_whole_network_no_sandbox_or_a_bad_host_is_refused_in_one_line() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let before = repo.git_ok(&["for-each-ref"]);
    for (flags, words) in [
        (
            &["--sandbox-net", "--sandbox-allow-host", "pypi.org"][..],
            "--sandbox-net already opens every host: give one or the other",
        ),
        (
            &["--no-sandbox", "--sandbox-allow-host", "pypi.org"][..],
            "which --no-sandbox turns off: give one or the other",
        ),
        (
            &["--sandbox-allow-host", "pypi.org:99999"][..],
            "the port must be a number from 1 to 65535",
        ),
        (
            &["--sandbox-allow-host", "a b:1:2"][..],
            "give HOST or HOST:PORT",
        ),
    ] {
        let mut args = vec!["submit", "--work", "--claude"];
        args.extend_from_slice(flags);
        args.push("fix calc");
        let o = repo.forum().args(&args).output().unwrap();
        one_line_error(&o, words);
    }
    assert_eq!(
        repo.git_ok(&["for-each-ref"]),
        before,
        "a refused run wrote nothing"
    );
}
