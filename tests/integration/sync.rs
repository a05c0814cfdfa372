//! Ledgers travelling between repositories through real remotes: a bare repository over
//! `file://` and one served by `git daemon` on 127.0.0.1. Push, fetch with consistency checks,
//! the pre-push and server hooks, hook installation, `init`, and bad remotes.

use std::ffi::OsString;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value as J;

use crate::common::{FORMATS, Repo, commit_texts, rechain};

const REF: &str = crate::common::LEDGER_REF;

/// PATH with the directory of the built `git-forum` first, so hooks can run `git forum`.
fn path_env() -> OsString {
    let bin = Path::new(env!("CARGO_BIN_EXE_git-forum"))
        .parent()
        .expect("bin dir")
        .to_path_buf();
    let mut paths = vec![bin];
    if let Some(p) = std::env::var_os("PATH") {
        paths.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(paths).expect("PATH")
}

/// The hermetic environment of `common`, plus PATH.
fn hermetic(cmd: &mut Command, home: &Path) {
    cmd.env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_FORUM_LEDGER")
        .env("GIT_FORUM_TIMESTAMP", "1000")
        .env("HOME", home)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_SYSTEM", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .env("NO_PROXY", "*")
        .env("no_proxy", "*")
        .env("PATH", path_env());
}

/// `git ARGS` in `dir` with PATH set (so hooks find git-forum).
fn git_at(dir: &Path, args: &[&str]) -> Output {
    let mut c = Command::new("git");
    hermetic(&mut c, dir);
    c.current_dir(dir).args(args).output().expect("run git")
}

fn git_ok(dir: &Path, args: &[&str]) -> String {
    let o = git_at(dir, args);
    assert!(
        o.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim_end().to_string()
}

/// `git-forum ARGS` in `dir` with PATH set.
fn forum_at(dir: &Path, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_git-forum"));
    hermetic(&mut c, dir);
    c.current_dir(dir)
        .args(args)
        .output()
        .expect("run git-forum")
}

fn forum(repo: &Repo, args: &[&str]) -> Output {
    forum_at(repo.path(), args)
}

fn forum_ok(repo: &Repo, args: &[&str]) -> String {
    let o = forum(repo, args);
    assert!(
        o.status.success(),
        "git-forum {args:?} failed ({}): {}{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn json_of(o: &Output) -> J {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// A bare repository standing in for a server.
struct Bare {
    dir: tempfile::TempDir,
}

impl Bare {
    fn new(format: &str) -> Bare {
        let dir = tempfile::tempdir().expect("tempdir");
        let b = Bare { dir };
        std::fs::create_dir(b.path()).unwrap();
        let mut args = vec!["init".to_string(), "-q".into(), "--bare".into()];
        args.extend(crate::common::init_flags(format));
        git_ok(
            &b.path(),
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        b
    }

    /// The repository itself: `<tempdir>/remote.git`.
    fn path(&self) -> PathBuf {
        self.dir.path().join("remote.git")
    }

    fn url(&self) -> String {
        format!("file://{}", self.path().display())
    }

    fn tip(&self) -> Option<String> {
        let o = git_at(&self.path(), &["rev-parse", "--verify", "-q", REF]);
        o.status
            .success()
            .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
    }

    fn refs(&self) -> String {
        git_ok(&self.path(), &["for-each-ref"])
    }

    fn fsck(&self) {
        let o = git_at(&self.path(), &["fsck", "--strict", "--no-progress"]);
        assert!(o.status.success(), "fsck of the remote: {}", stderr(&o));
        assert!(!stderr(&o).contains("error"), "fsck: {}", stderr(&o));
    }

    fn install_server_hook(&self) {
        let out = forum_at(&self.path(), &["hooks", "install", "--server"]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(self.path().join("hooks/pre-receive").is_file());
    }
}

/// `git-daemon` in git's exec path.
fn daemon_binary() -> PathBuf {
    let exec = Command::new("git")
        .arg("--exec-path")
        .output()
        .expect("git --exec-path");
    PathBuf::from(String::from_utf8_lossy(&exec.stdout).trim()).join("git-daemon")
}

/// `git daemon` serving a directory on a free loopback port; killed on drop.
struct Daemon {
    child: Child,
    port: u16,
}

impl Daemon {
    fn start(base: &Path, receive_pack: bool) -> Daemon {
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .expect("bind")
                .local_addr()
                .unwrap()
                .port();
            // The daemon binary itself, not `git daemon`: `git` would run it as a child of its
            // own, and killing `git` would leave the daemon running.
            let mut c = Command::new(daemon_binary());
            hermetic(&mut c, base);
            c.current_dir(base).args([
                "--reuseaddr",
                "--listen=127.0.0.1",
                &format!("--port={port}"),
                &format!("--base-path={}", base.display()),
                "--export-all",
                "--informative-errors",
            ]);
            if receive_pack {
                c.arg("--enable=receive-pack");
            }
            c.arg(base)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let child = c.spawn().expect("start git daemon");
            let mut d = Daemon { child, port };
            let mut listening = false;
            crate::common::poll_until(Duration::from_secs(10), || {
                listening = TcpStream::connect(("127.0.0.1", port)).is_ok();
                // An exit means it lost the port to someone else: try another.
                listening || matches!(d.child.try_wait(), Ok(Some(_)))
            });
            if listening {
                return d;
            }
            drop(d);
        }
        panic!("git daemon did not start");
    }

    fn url(&self, name: &str) -> String {
        format!("git://127.0.0.1:{}/{name}", self.port)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Smart HTTP: a loopback HTTP/1.1 server of our own that hands each request to
/// `git http-backend` as CGI, one request per connection. Stopped (thread joined, every
/// backend waited for) on drop.
struct SmartHttp {
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SmartHttp {
    fn start(base: &Path) -> SmartHttp {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().unwrap().port();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (base, flag) = (base.to_path_buf(), stop.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                if let Ok(conn) = conn {
                    let _ = serve_cgi(conn, &base);
                }
            }
        });
        SmartHttp {
            port,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }
}

impl Drop for SmartHttp {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one HTTP request from `conn`, runs `git http-backend` on it, writes the response.
fn serve_cgi(mut conn: TcpStream, base: &Path) -> std::io::Result<()> {
    use std::io::{BufRead, BufReader, Read, Write};
    conn.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("").to_string();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim_end().is_empty() {
            break;
        }
        if let Some((k, v)) = line.trim_end().split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                .unwrap_or(0);
            let mut chunk = vec![0u8; n + 2];
            reader.read_exact(&mut chunk)?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body.resize(n, 0);
        reader.read_exact(&mut body)?;
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let backend = daemon_binary().with_file_name("git-http-backend");
    let mut c = Command::new(backend);
    hermetic(&mut c, base);
    c.env("GIT_PROJECT_ROOT", base)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REMOTE_USER", "tester")
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("REQUEST_METHOD", &method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("CONTENT_TYPE", header("content-type").unwrap_or_default());
    if let Some(p) = header("git-protocol") {
        c.env("GIT_PROTOCOL", p);
    }
    if let Some(e) = header("content-encoding") {
        c.env("HTTP_CONTENT_ENCODING", e);
    }
    let mut child = c
        .current_dir(base)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdin = child.stdin.take().expect("piped");
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    let mut out = Vec::new();
    child.stdout.take().expect("piped").read_to_end(&mut out)?;
    let _ = feeder.join();
    child.wait()?;
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| out.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)));
    let (head, rest) = match split {
        Some((i, n)) => (
            String::from_utf8_lossy(&out[..i]).to_string(),
            &out[i + n..],
        ),
        None => (String::new(), &out[..]),
    };
    let mut status = "200 OK".to_string();
    let mut response_headers = String::new();
    for line in head.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
        match line.strip_prefix("Status:") {
            Some(st) => status = st.trim().to_string(),
            None => response_headers.push_str(&format!("{line}\r\n")),
        }
    }
    write!(
        conn,
        "HTTP/1.1 {status}\r\n{response_headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        rest.len()
    )?;
    conn.write_all(rest)?;
    conn.flush()
}

/// How a test reaches its bare remote.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Transport {
    File,
    GitDaemon,
    Http,
}

const TRANSPORTS: [Transport; 3] = [Transport::File, Transport::Http, Transport::GitDaemon];

/// A remote to test against: a bare repository, reached over file://, through git daemon, or
/// over smart HTTP.
struct Remote {
    bare: Bare,
    daemon: Option<Daemon>,
    http: Option<SmartHttp>,
}

impl Remote {
    fn new(format: &str, over_daemon: bool) -> Remote {
        Remote::over(
            format,
            if over_daemon {
                Transport::GitDaemon
            } else {
                Transport::File
            },
        )
    }

    fn over(format: &str, transport: Transport) -> Remote {
        let bare = Bare::new(format);
        let daemon =
            (transport == Transport::GitDaemon).then(|| Daemon::start(bare.dir.path(), true));
        let http = (transport == Transport::Http).then(|| SmartHttp::start(bare.dir.path()));
        Remote { bare, daemon, http }
    }

    fn url(&self) -> String {
        match (&self.daemon, &self.http) {
            (Some(d), _) => d.url("remote.git"),
            (_, Some(h)) => h.url("remote.git"),
            _ => self.bare.url(),
        }
    }

    fn label(&self) -> &'static str {
        if self.daemon.is_some() {
            "git daemon"
        } else if self.http.is_some() {
            "smart HTTP"
        } else {
            "file://"
        }
    }
}

/// A clone-like working repository with `origin` pointing at `url`.
fn clone_of(format: &str, url: &str) -> Repo {
    let repo = Repo::new(format);
    repo.git_ok(&["remote", "add", "origin", url]);
    repo
}

fn append(repo: &Repo, payload: &str) {
    forum_ok(
        repo,
        &[
            "append",
            "--actor",
            "agent",
            "--kind",
            "note",
            "--payload",
            payload,
        ],
    );
}

fn append_n(repo: &Repo, from: usize, to: usize, tag: &str) {
    for i in from..to {
        append(repo, &format!(r#"{{"i":{i},"tag":"{tag}"}}"#));
    }
}

fn tip(repo: &Repo, refname: &str) -> Option<String> {
    let o = repo.git(&["rev-parse", "--verify", "-q", refname]);
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn no_staging_left(repo: &Repo) {
    assert_eq!(
        repo.git_ok(&["for-each-ref", "refs/forum/incoming/"]),
        "",
        "staging refs left behind"
    );
}

fn push_json(repo: &Repo, extra: &[&str]) -> (Output, J) {
    let mut args = vec!["push", "--json"];
    args.extend(extra);
    let o = forum(repo, &args);
    let j = json_of(&o);
    (o, j)
}

fn fetch_json(repo: &Repo) -> (Output, J) {
    let o = forum(repo, &["fetch", "--json"]);
    let j = json_of(&o);
    (o, j)
}

/// Removes the body of entry `seq` (its tree becomes the empty tree) and re-chains: the entries
/// and their hashes stay the same, the commit ids from `seq` on change.
fn strip_body(repo: &Repo, seq: usize) -> String {
    let mut t = commit_texts(repo, REF);
    let empty = repo.git_in(&["mktree"], b"");
    let old_tree = t[seq].lines().next().unwrap().to_string();
    t[seq] = t[seq].replacen(&old_tree, &format!("tree {empty}"), 1);
    rechain(repo, &t)
}

/// Appends a redaction entry naming the body of `seq`, then strips that body. Returns the
/// new tip.
fn redact(repo: &Repo, seq: usize) -> String {
    let shown = json_of(&forum(repo, &["show", &seq.to_string(), "--json"]));
    let ph = shown["payload_hash"].as_str().unwrap().to_string();
    forum_ok(
        repo,
        &[
            "append",
            "--actor",
            "admin",
            "--kind",
            "redaction",
            "--payload",
            &format!(r#"{{"payload_hash":"{ph}","reason":"personal data"}}"#),
        ],
    );
    let tip = strip_body(repo, seq);
    let v = json_of(&forum(repo, &["verify", "--deep", "--json"]));
    assert_eq!(v["ok"], true, "a redacted ledger verifies: {v}");
    tip
}

fn force_push(repo: &Repo, src: &str) -> Output {
    git_at(
        repo.path(),
        &["push", "--no-verify", "origin", &format!("+{src}:{REF}")],
    )
}

// ----- clean push and fetch -----

#[test]
fn push_and_fetch_between_two_clones_over_file_and_git_daemon() {
    for format in FORMATS {
        for over_daemon in [false, true] {
            let remote = Remote::new(format, over_daemon);
            let label = format!("{format} over {}", remote.label());
            let a = clone_of(format, &remote.url());
            let b = clone_of(format, &remote.url());
            append_n(&a, 0, 3, "a");
            append(&a, r#"{"other":true}"#);
            forum_ok(
                &a,
                &[
                    "--ledger",
                    "side",
                    "append",
                    "--actor",
                    "x",
                    "--kind",
                    "note",
                    "--payload",
                    "{}",
                ],
            );

            let (o, j) = push_json(&a, &[]);
            assert!(o.status.success(), "{label}: {}", stderr(&o));
            assert_eq!(j["ledgers"][0]["status"], "created", "{label}: {j}");
            assert_eq!(j["ledgers"][0]["entries"], 4);
            assert_eq!(remote.bare.tip(), tip(&a, REF), "{label}");
            let (_, j) = push_json(&a, &[]);
            assert_eq!(j["ledgers"][0]["status"], "up-to-date", "{label}: {j}");
            let (_, j) = push_json(&a, &["--all"]);
            let statuses: Vec<_> = j["ledgers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| (l["ledger"].as_str().unwrap(), l["status"].as_str().unwrap()))
                .collect();
            assert_eq!(
                statuses,
                [("main", "up-to-date"), ("side", "created")],
                "{label}"
            );

            let (o, j) = fetch_json(&b);
            assert!(o.status.success(), "{label}: {j} {}", stderr(&o));
            let main = j["ledgers"]
                .as_array()
                .unwrap()
                .iter()
                .find(|l| l["ledger"] == "main")
                .unwrap()
                .clone();
            assert_eq!(main["status"], "new", "{label}: {j}");
            assert_eq!(main["adopted"], true);
            assert_eq!(main["remote"]["size"], 4);
            assert_eq!(tip(&b, "refs/forum/remotes/origin/main"), tip(&a, REF));
            assert_eq!(tip(&b, "refs/forum/seen/origin/main"), tip(&a, REF));
            assert!(tip(&b, "refs/forum/seen/origin/side").is_some());
            assert_eq!(tip(&b, REF), None, "fetch never touches local ledgers");
            no_staging_left(&b);

            append_n(&a, 4, 6, "a");
            let out = forum_ok(&a, &["push"]);
            assert!(
                out.contains("main: pushed to origin (6 entries"),
                "{label}: {out}"
            );
            let out = forum_ok(&b, &["fetch"]);
            assert!(
                out.contains("main: updated from origin: 4 -> 6 entries"),
                "{label}: {out}"
            );
            assert!(out.contains("side: up to date"), "{label}: {out}");
            assert_eq!(tip(&b, "refs/forum/seen/origin/main"), tip(&a, REF));
            let (o, j) = fetch_json(&b);
            assert!(o.status.success());
            assert!(
                j["ledgers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|l| l["status"] == "up-to-date"),
                "{label}: {j}"
            );
            let checkpoint = json_of(&forum(&a, &["checkpoint", "--no-record", "--json"]));
            assert_eq!(
                j["ledgers"][0]["remote"]["root"], checkpoint["checkpoint"],
                "{label}"
            );
            no_staging_left(&b);
            a.fsck();
            b.fsck();
            remote.bare.fsck();
        }
    }
}

// ----- a remote that rewrites or truncates -----

#[test]
fn fetch_catches_a_force_pushed_rewrite_a_truncation_and_a_broken_copy() {
    for format in FORMATS {
        let remote = Remote::new(format, false);
        let a = clone_of(format, &remote.url());
        let b = clone_of(format, &remote.url());
        append_n(&a, 0, 4, "honest");
        forum_ok(&a, &["push"]);
        forum_ok(&b, &["fetch"]);
        let seen = tip(&b, "refs/forum/seen/origin/main").unwrap();
        let seen_root = json_of(&forum(&a, &["checkpoint", "--no-record", "--json"]))["checkpoint"]
            .as_str()
            .unwrap()
            .to_string();

        let assert_refused = |code: &str| {
            let before = b.snapshot();
            let o = forum(&b, &["fetch"]);
            assert_eq!(o.status.code(), Some(1), "{format} {code}: {}", stdout(&o));
            let out = stdout(&o);
            assert!(out.contains(&format!("main: REFUSED ({code})")), "{out}");
            assert!(
                out.contains(&format!("seen checkpoint:   size 4 root {seen_root}")),
                "{out}"
            );
            assert!(out.contains("remote checkpoint: size"), "{out}");
            assert!(out.contains("not adopted"), "{out}");
            assert_eq!(
                tip(&b, "refs/forum/seen/origin/main").as_deref(),
                Some(seen.as_str())
            );
            assert_eq!(
                tip(&b, "refs/forum/remotes/origin/main").as_deref(),
                Some(seen.as_str())
            );
            assert_eq!(b.snapshot(), before, "a refused fetch changes no ref");
            no_staging_left(&b);
            let (_, j) = fetch_json(&b);
            assert_eq!(j["ok"], false);
            assert_eq!(j["ledgers"][0]["adopted"], false);
            assert_eq!(j["ledgers"][0]["seen"]["size"], 4);
            assert_eq!(j["ledgers"][0]["seen"]["root"], seen_root.as_str());
            assert!(j["ledgers"][0]["remote"]["root"].is_string());
            j
        };

        // A rewrite: someone force-pushes a different history of the same length and more.
        let evil = clone_of(format, &remote.url());
        append_n(&evil, 0, 5, "forged");
        let o = force_push(&evil, REF);
        assert!(o.status.success(), "{}", stderr(&o));
        let j = assert_refused("rewritten");
        assert_eq!(j["ledgers"][0]["status"], "rewritten");
        assert_eq!(j["ledgers"][0]["remote"]["size"], 5);
        assert!(j["ledgers"][0]["remote_prefix_root"].is_string());
        assert_ne!(j["ledgers"][0]["remote_prefix_root"], seen_root.as_str());

        // A truncation: the honest ledger cut back to 2 entries.
        let second = a.git_ok(&["rev-parse", &format!("{REF}~2")]);
        let o = force_push(&a, &second);
        assert!(o.status.success(), "{}", stderr(&o));
        let j = assert_refused("truncated");
        assert_eq!(j["ledgers"][0]["remote"]["size"], 2);

        // A copy that does not verify (an entry edited in place) is not adopted either.
        let mut t = commit_texts(&a, REF);
        t[1] = t[1].replace("\"actor\":\"agent\"", "\"actor\":\"mallory\"");
        let tampered = Repo::new(format);
        tampered.git_ok(&["remote", "add", "origin", &remote.url()]);
        tampered.git_ok(&[
            "fetch",
            "-q",
            &a.path().display().to_string(),
            &format!("{REF}:{REF}"),
        ]);
        rechain(&tampered, &t);
        let o = force_push(&tampered, REF);
        assert!(o.status.success(), "{}", stderr(&o));
        let j = assert_refused("entry-edited");
        assert_eq!(j["ledgers"][0]["status"], "does-not-verify");

        // A deletion on the remote.
        let o = git_at(
            evil.path(),
            &["push", "--no-verify", "origin", &format!(":{REF}")],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let j = assert_refused("deleted");
        assert_eq!(j["ledgers"][0]["remote"]["size"], 0);

        // The honest ledger back, and more: adopted again.
        append_n(&a, 4, 5, "honest");
        let o = force_push(&a, REF);
        assert!(o.status.success());
        let out = forum_ok(&b, &["fetch"]);
        assert!(
            out.contains("main: updated from origin: 4 -> 5 entries"),
            "{out}"
        );
        b.fsck();
        a.fsck();
        remote.bare.fsck();
    }
}

#[test]
fn fetch_accepts_a_redaction_only_rewrite() {
    for format in FORMATS {
        let remote = Remote::new(format, true);
        let a = clone_of(format, &remote.url());
        let b = clone_of(format, &remote.url());
        append_n(&a, 0, 3, "a");
        forum_ok(&a, &["push"]);
        forum_ok(&b, &["fetch"]);
        let before = json_of(&forum(&a, &["checkpoint", "--no-record", "--json"]));
        // The redaction entry travels first, then the rewrite that removes the body.
        let new_tip = redact(&a, 1);
        let o = force_push(&a, REF);
        assert!(o.status.success(), "{}", stderr(&o));
        let (o, j) = fetch_json(&b);
        assert!(o.status.success(), "{format}: {j}");
        assert_eq!(j["ledgers"][0]["status"], "redaction-rewrite", "{j}");
        assert_eq!(j["ledgers"][0]["adopted"], true);
        assert_eq!(j["ledgers"][0]["remote"]["size"], 4);
        assert_eq!(
            tip(&b, "refs/forum/seen/origin/main").as_deref(),
            Some(new_tip.as_str())
        );
        assert_eq!(
            tip(&b, "refs/forum/remotes/origin/main").as_deref(),
            Some(new_tip.as_str())
        );
        // The first three entries still give the checkpoint seen before the redaction.
        let after = json_of(&forum(&a, &["checkpoint", "--no-record", "--json"]));
        assert_eq!(after["size"], 4);
        assert_ne!(before["checkpoint"], after["checkpoint"]);

        // The same entries with a body removed that no redaction names is refused by verify.
        append_n(&a, 4, 5, "a");
        forum_ok(&a, &["push"]);
        forum_ok(&b, &["fetch"]);
        strip_body(&a, 2);
        let o = force_push(&a, REF);
        assert!(o.status.success());
        let o = forum(&b, &["fetch"]);
        assert_eq!(o.status.code(), Some(1));
        assert!(
            stdout(&o).contains("REFUSED (body-missing)"),
            "{}",
            stdout(&o)
        );
        b.fsck();
        remote.bare.fsck();
    }
}

// ----- split views -----

/// The checkpoint root of `repo`'s default ledger.
fn root_of(repo: &Repo) -> String {
    let cp = json_of(&forum(repo, &["checkpoint", "--no-record", "--json"]));
    cp["checkpoint"].as_str().expect("checkpoint").to_string()
}

#[test]
fn fetch_refuses_a_split_view_between_two_remotes_and_accepts_consistent_ones() {
    for format in FORMATS {
        let one = Remote::new(format, false);
        let two = Remote::new(format, false);
        let three = Remote::new(format, false);
        // x publishes to one (and a prefix of the same history to three); y publishes another
        // history of `main` to two.
        let x = clone_of(format, &one.url());
        append_n(&x, 0, 2, "x");
        x.git_ok(&["remote", "add", "three", &three.url()]);
        forum_ok(&x, &["push", "three"]);
        let x_root_2 = root_of(&x);
        append_n(&x, 2, 3, "x");
        forum_ok(&x, &["push"]);
        let x_root = root_of(&x);
        let y = clone_of(format, &two.url());
        append_n(&y, 0, 3, "y");
        forum_ok(&y, &["push"]);
        let y_root = root_of(&y);
        assert_ne!(x_root, y_root);

        let c = Repo::new(format);
        for (name, r) in [("one", &one), ("two", &two), ("three", &three)] {
            c.git_ok(&["remote", "add", name, &r.url()]);
        }
        let out = forum_ok(&c, &["fetch", "one"]);
        assert!(
            out.contains("main: new from one: 3 entries"),
            "{format}: {out}"
        );

        // two serves another history of main: refused, with both checkpoints.
        let before = c.snapshot();
        let o = forum(&c, &["fetch", "two"]);
        assert_eq!(o.status.code(), Some(1), "{format}: {}", stdout(&o));
        let out = stdout(&o);
        assert!(
            out.contains("main: REFUSED (split-view)"),
            "{format}: {out}"
        );
        assert!(
            out.contains("one and two serve different histories")
                || out.contains("two and one serve different histories"),
            "{format}: {out}"
        );
        assert!(
            out.contains(&format!("two now: size 3 root {y_root}")),
            "{format}: {out}"
        );
        assert!(
            out.contains(&format!("one last seen: size 3 root {x_root}")),
            "{format}: {out}"
        );
        assert!(
            out.contains(&format!("one's seen checkpoint: size 3 root {x_root}")),
            "{format}: {out}"
        );
        assert!(
            out.contains(&format!("remote checkpoint: size 3 root {y_root}")),
            "{format}: {out}"
        );
        assert_eq!(
            c.snapshot(),
            before,
            "{format}: a refused fetch changed refs"
        );
        assert_eq!(tip(&c, "refs/forum/remotes/two/main"), None);
        assert_eq!(tip(&c, "refs/forum/seen/two/main"), None);
        let (o, j) = {
            let o = forum(&c, &["fetch", "two", "--json"]);
            let j = json_of(&o);
            (o, j)
        };
        assert_eq!(o.status.code(), Some(1));
        let l = &j["ledgers"][0];
        assert_eq!(l["status"], "split-view", "{format}: {j}");
        assert_eq!(l["adopted"], false);
        assert_eq!(l["remote"]["root"], y_root.as_str());
        assert_eq!(l["conflict"]["remote"], "one");
        assert_eq!(l["conflict"]["seen"]["size"], 3);
        assert_eq!(l["conflict"]["seen"]["root"], x_root.as_str());
        no_staging_left(&c);

        // three serves a prefix of one's history: consistent, adopted.
        let out = forum_ok(&c, &["fetch", "three"]);
        assert!(
            out.contains(&format!(
                "main: new from three: 2 entries, checkpoint {x_root_2}"
            )),
            "{format}: {out}"
        );
        // one grows past what three was seen with: still consistent with three.
        append_n(&x, 3, 5, "x");
        forum_ok(&x, &["push"]);
        let out = forum_ok(&c, &["fetch", "one"]);
        assert!(
            out.contains("main: updated from one: 3 -> 5 entries"),
            "{format}: {out}"
        );
        // three catches up, and still agrees with one.
        forum_ok(&x, &["push", "three"]);
        let out = forum_ok(&c, &["fetch", "three"]);
        assert!(
            out.contains("main: updated from three: 2 -> 5 entries"),
            "{format}: {out}"
        );
        c.fsck();
    }
}

// ----- the server hook -----

#[test]
fn server_hook_refuses_rewrites_and_deletions_but_accepts_appends_and_redactions() {
    for format in FORMATS {
        for over_daemon in [false, true] {
            let remote = Remote::new(format, over_daemon);
            remote.bare.install_server_hook();
            let label = format!("{format} over {}", remote.label());
            let a = clone_of(format, &remote.url());
            append_n(&a, 0, 3, "a");
            let o = forum(&a, &["push"]);
            assert!(o.status.success(), "{label}: {}{}", stdout(&o), stderr(&o));
            append_n(&a, 3, 4, "a");
            let o = forum(&a, &["push"]);
            assert!(
                o.status.success(),
                "{label}: append accepted: {}",
                stderr(&o)
            );
            let published = remote.bare.tip().unwrap();

            // A rewrite of the same length.
            let evil = clone_of(format, &remote.url());
            append_n(&evil, 0, 5, "forged");
            let o = force_push(&evil, REF);
            assert!(!o.status.success(), "{label}: rewrite accepted");
            assert!(
                stderr(&o).contains("rewrites published entries (first difference at seq 0)"),
                "{label}: {}",
                stderr(&o)
            );
            assert_eq!(remote.bare.tip().as_deref(), Some(published.as_str()));
            // Through `git forum push` the refusal is reported per ledger.
            let o = forum(&evil, &["push"]);
            assert_eq!(o.status.code(), Some(1), "{label}");
            assert!(
                stdout(&o).contains("main: REJECTED by origin"),
                "{label}: {}",
                stdout(&o)
            );

            // A truncation and a deletion.
            let first = a.git_ok(&["rev-parse", &format!("{REF}~2")]);
            let o = force_push(&a, &first);
            assert!(!o.status.success(), "{label}: truncation accepted");
            assert!(
                stderr(&o).contains("shorten the ledger from 4 to 2"),
                "{}",
                stderr(&o)
            );
            let o = git_at(
                a.path(),
                &["push", "--no-verify", "origin", &format!(":{REF}")],
            );
            assert!(!o.status.success(), "{label}: deletion accepted");
            assert!(
                stderr(&o).contains("deleting one is not allowed"),
                "{}",
                stderr(&o)
            );
            assert_eq!(remote.bare.tip().as_deref(), Some(published.as_str()));

            // A body removed without a redaction entry naming it.
            let stripped = Repo::new(format);
            stripped.git_ok(&["remote", "add", "origin", &remote.url()]);
            stripped.git_ok(&[
                "fetch",
                "-q",
                &a.path().display().to_string(),
                &format!("{REF}:{REF}"),
            ]);
            strip_body(&stripped, 1);
            let o = force_push(&stripped, REF);
            assert!(
                !o.status.success(),
                "{label}: unnamed body removal accepted"
            );
            assert!(
                stderr(&o).contains("no redaction entry names"),
                "{}",
                stderr(&o)
            );

            // A redaction-only rewrite.
            let new_tip = redact(&a, 1);
            let o = force_push(&a, REF);
            assert!(
                o.status.success(),
                "{label}: redaction refused: {}",
                stderr(&o)
            );
            assert_eq!(remote.bare.tip().as_deref(), Some(new_tip.as_str()));

            // Code refs pass, deletions of branches included.
            a.git_ok(&["commit", "-q", "--allow-empty", "-m", "code"]);
            let o = git_at(a.path(), &["push", "origin", "HEAD:refs/heads/topic"]);
            assert!(o.status.success(), "{label}: {}", stderr(&o));
            let o = git_at(a.path(), &["push", "origin", ":refs/heads/topic"]);
            assert!(o.status.success(), "{label}: {}", stderr(&o));
            remote.bare.fsck();
            a.fsck();
        }
    }
}

/// Rebuilds the tip commit of the default ledger around another (valid) body blob, keeping its
/// message, so its entry is unchanged; returns the forged tip.
fn forge_tip_body(repo: &Repo) -> String {
    let blob = repo.git_in(&["hash-object", "-w", "--stdin"], br#"{"forged":true}"#);
    let tree = repo.git_in(
        &["mktree"],
        format!("100644 blob {blob}\tpayload.json\n").as_bytes(),
    );
    let mut t = commit_texts(repo, REF);
    let last = t.len() - 1;
    let old = t[last].lines().next().unwrap().to_string();
    t[last] = t[last].replacen(&old, &format!("tree {tree}"), 1);
    rechain(repo, &t)
}

#[test]
fn server_hook_refuses_a_forged_body_over_file_smart_http_and_git_daemon() {
    for format in FORMATS {
        for transport in TRANSPORTS {
            let remote = Remote::over(format, transport);
            remote.bare.install_server_hook();
            let label = format!("{format} over {}", remote.label());
            let a = clone_of(format, &remote.url());
            append_n(&a, 0, 3, "a");
            let o = forum(&a, &["push"]);
            assert!(o.status.success(), "{label}: {}{}", stdout(&o), stderr(&o));
            let published = remote.bare.tip().unwrap();

            // A new entry whose commit was rebuilt around another body: a fast-forward whose
            // entry chain is perfect.
            append_n(&a, 3, 4, "a");
            let honest = tip(&a, REF).unwrap();
            let forged = forge_tip_body(&a);
            let o = git_at(a.path(), &["push", "--no-verify", "origin", REF]);
            assert!(!o.status.success(), "{label}: forged body accepted");
            assert!(
                stderr(&o).contains("the body of seq 3")
                    && stderr(&o).contains("does not hash to its payload_hash"),
                "{label}: {}",
                stderr(&o)
            );
            assert_eq!(remote.bare.tip().as_deref(), Some(published.as_str()));

            // The same forgery as a ledger the server has never seen.
            let o = git_at(
                a.path(),
                &[
                    "push",
                    "--no-verify",
                    "origin",
                    &format!("{forged}:refs/forum/ledgers/fresh"),
                ],
            );
            assert!(!o.status.success(), "{label}: forged new ledger accepted");
            assert!(
                stderr(&o).contains("does not hash to its payload_hash"),
                "{label}: {}",
                stderr(&o)
            );
            assert!(
                !remote.bare.refs().contains("refs/forum/ledgers/fresh"),
                "{label}: {}",
                remote.bare.refs()
            );

            // The honest entry goes through, under both names.
            crate::common::move_ref_quietly(&a, &honest);
            let o = git_at(
                a.path(),
                &[
                    "push",
                    "--no-verify",
                    "origin",
                    REF,
                    &format!("{REF}:refs/forum/ledgers/fresh"),
                ],
            );
            assert!(o.status.success(), "{label}: {}", stderr(&o));
            assert_eq!(remote.bare.tip().as_deref(), Some(honest.as_str()));
            remote.bare.fsck();
        }
    }
}

#[test]
fn update_hook_refuses_a_forged_body_too() {
    use std::os::unix::fs::PermissionsExt;
    for format in FORMATS {
        let remote = Remote::new(format, false);
        let hook = remote.bare.path().join("hooks/update");
        std::fs::write(&hook, "#!/bin/sh\nexec git forum hook update \"$@\"\n").unwrap();
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        let a = clone_of(format, &remote.url());
        append_n(&a, 0, 2, "a");
        forum_ok(&a, &["push"]);
        let published = remote.bare.tip().unwrap();
        append_n(&a, 2, 3, "a");
        forge_tip_body(&a);
        let o = git_at(a.path(), &["push", "--no-verify", "origin", REF]);
        assert!(!o.status.success(), "{format}: forged body accepted");
        assert!(
            stderr(&o).contains("the body of seq 2")
                && stderr(&o).contains("does not hash to its payload_hash"),
            "{format}: {}",
            stderr(&o)
        );
        assert_eq!(remote.bare.tip().as_deref(), Some(published.as_str()));
        remote.bare.fsck();
    }
}

// ----- the pre-push hook -----

#[test]
fn pre_push_hook_refuses_a_tampered_or_rewinding_ledger_and_passes_code_refs() {
    for format in FORMATS {
        let remote = Remote::new(format, false);
        let a = clone_of(format, &remote.url());
        forum_ok(&a, &["hooks", "install"]);
        append_n(&a, 0, 4, "a");
        let o = git_at(a.path(), &["push", "origin", REF]);
        assert!(o.status.success(), "{}", stderr(&o));
        let published = remote.bare.tip().unwrap();

        // Code refs pass untouched.
        a.git_ok(&["commit", "-q", "--allow-empty", "-m", "code"]);
        let o = git_at(a.path(), &["push", "origin", "HEAD:refs/heads/main"]);
        assert!(o.status.success(), "{}", stderr(&o));

        // A rewind: the local ledger cut back (quietly) and force-pushed.
        let keep = commit_texts(&a, REF);
        rechain(&a, &keep[..2]);
        let o = git_at(a.path(), &["push", "origin", &format!("+{REF}:{REF}")]);
        assert!(!o.status.success(), "a rewind was pushed");
        assert!(
            stderr(&o).contains("rewind the remote's ledger from 4 to 2"),
            "{}",
            stderr(&o)
        );
        assert_eq!(remote.bare.tip().as_deref(), Some(published.as_str()));
        rechain(&a, &keep);

        // A tampered entry: the hook refuses, and `git forum push` refuses before pushing.
        let mut t = keep.clone();
        t[2] = t[2].replace("\"actor\":\"agent\"", "\"actor\":\"mallory\"");
        append_n(&a, 4, 5, "a");
        let mut t5 = commit_texts(&a, REF);
        t5[2] = t[2].clone();
        rechain(&a, &t5);
        let o = git_at(a.path(), &["push", "origin", &format!("+{REF}:{REF}")]);
        assert!(!o.status.success(), "a tampered ledger was pushed");
        let err = stderr(&o);
        assert!(
            err.contains(
                "git forum pre-push: refusing the push: ledger main does not verify at seq 2"
            ),
            "{err}"
        );
        assert!(err.contains("[entry-edited]"), "{err}");
        assert_eq!(remote.bare.tip().as_deref(), Some(published.as_str()));
        let o = forum(&a, &["push"]);
        assert_eq!(o.status.code(), Some(1));
        assert!(
            stdout(&o).contains("main: NOT PUSHED: it does not verify at seq 2"),
            "{}",
            stdout(&o)
        );
        assert_eq!(remote.bare.tip().as_deref(), Some(published.as_str()));

        // The pushed oid is checked even when it is not the local ledger's tip.
        rechain(&a, &keep);
        let bad = rechain(&a, &t5);
        rechain(&a, &keep);
        let o = git_at(a.path(), &["push", "origin", &format!("+{bad}:{REF}")]);
        assert!(!o.status.success());
        assert!(stderr(&o).contains("does not verify"), "{}", stderr(&o));
        assert_eq!(a.git_ok(&["for-each-ref", "refs/forum/pre-push/"]), "");

        // A code ref and a clean ledger in one push.
        append_n(&a, 4, 5, "a");
        let o = git_at(a.path(), &["push", "origin", "HEAD:refs/heads/main", REF]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(remote.bare.tip(), tip(&a, REF));
        a.fsck();
        remote.bare.fsck();
    }
}

// ----- installing hooks -----

#[test]
fn hooks_install_keeps_an_existing_hook_and_honours_core_hooks_path() {
    let remote = Remote::new("sha1", false);
    let a = clone_of("sha1", &remote.url());
    let hook = a.git_dir().join("hooks/pre-push");
    let user = "#!/bin/sh\n# the user's own hook\ncat > \"$(git rev-parse --git-dir)/user-hook-stdin\"\nexit 0\n";
    std::fs::write(&hook, user).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = forum_ok(&a, &["hooks", "install"]);
    assert!(
        out.contains("added a block to the existing pre-push hook"),
        "{out}"
    );
    let text = std::fs::read_to_string(&hook).unwrap();
    assert!(text.starts_with("#!/bin/sh\n# BEGIN git-forum\n"), "{text}");
    assert!(text.ends_with("# END git-forum\n# the user's own hook\ncat > \"$(git rev-parse --git-dir)/user-hook-stdin\"\nexit 0\n"), "{text}");
    let out = forum_ok(&a, &["hooks", "install"]);
    assert!(out.contains("already installed"), "{out}");
    assert_eq!(std::fs::read_to_string(&hook).unwrap(), text, "idempotent");

    // Both the block and the user's hook see the refs being pushed.
    append_n(&a, 0, 2, "a");
    let o = git_at(a.path(), &["push", "origin", REF]);
    assert!(o.status.success(), "{}", stderr(&o));
    let seen_by_user = std::fs::read_to_string(a.git_dir().join("user-hook-stdin")).unwrap();
    assert!(
        seen_by_user.starts_with(&format!("{REF} ")),
        "{seen_by_user}"
    );

    let out = forum_ok(&a, &["hooks", "uninstall"]);
    assert!(out.contains("removed the block from"), "{out}");
    assert_eq!(std::fs::read_to_string(&hook).unwrap(), user);
    let out = forum_ok(&a, &["hooks", "uninstall"]);
    assert!(out.contains("nothing to remove"), "{out}");

    // core.hooksPath: the hook goes where git looks, and a new file goes away entirely.
    a.git_ok(&["config", "core.hooksPath", "my-hooks"]);
    let out = forum_ok(&a, &["hooks", "install"]);
    assert!(out.contains("core.hooksPath is set"), "{out}");
    let redirected = a.path().join("my-hooks/pre-push");
    assert_eq!(
        std::fs::read_to_string(&redirected).unwrap(),
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("hooks/pre-push"))
            .unwrap()
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&redirected).unwrap().permissions().mode();
        assert_eq!(mode & 0o111, 0o111, "executable");
    }
    assert_eq!(
        std::fs::read_to_string(&hook).unwrap(),
        user,
        "the old place is untouched"
    );
    // It runs from there: a tampered ledger is refused.
    let mut t = commit_texts(&a, REF);
    t[1] = t[1].replace("\"actor\":\"agent\"", "\"actor\":\"mallory\"");
    append_n(&a, 2, 3, "a");
    let mut t3 = commit_texts(&a, REF);
    t3[1] = t[1].clone();
    rechain(&a, &t3);
    let o = git_at(a.path(), &["push", "origin", &format!("+{REF}:{REF}")]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("does not verify"), "{}", stderr(&o));
    forum_ok(&a, &["hooks", "uninstall"]);
    assert!(!redirected.exists());

    // Server side, in a bare repository.
    remote.bare.install_server_hook();
    let out = forum_at(&remote.bare.path(), &["hooks", "uninstall", "--server"]);
    assert!(out.status.success());
    assert!(!remote.bare.path().join("hooks/pre-receive").exists());
    a.fsck();
}

// ----- init -----

#[test]
fn init_adds_refspecs_and_writes_forum_dir_once() {
    let remote = Remote::new("sha1", false);
    let a = clone_of("sha1", &remote.url());
    let b = clone_of("sha1", &remote.url());
    std::fs::create_dir(a.path().join(".forum")).unwrap();
    std::fs::write(a.path().join(".forum/roster.toml"), "# mine\n").unwrap();
    let out = forum_ok(&a, &["init"]);
    assert!(
        out.contains(
            "remote origin: fetch refspec +refs/forum/ledgers/*:refs/forum/unverified/origin/* added"
        ),
        "{out}"
    );
    assert!(out.contains("wrote .forum/README"), "{out}");
    assert!(out.contains("kept .forum/roster.toml"), "{out}");
    assert_eq!(
        std::fs::read_to_string(a.path().join(".forum/roster.toml")).unwrap(),
        "# mine\n"
    );
    let config = a.git_ok(&["config", "--get-all", "remote.origin.fetch"]);
    let out = forum_ok(&a, &["init"]);
    assert!(out.contains("already present"), "{out}");
    assert_eq!(
        a.git_ok(&["config", "--get-all", "remote.origin.fetch"]),
        config,
        "idempotent"
    );
    assert_eq!(
        a.git(&["config", "--get-all", "remote.origin.push"])
            .status
            .code(),
        Some(1)
    );

    let out = forum_ok(&b, &["init", "--push"]);
    assert!(out.contains("push refspec HEAD added"), "{out}");
    assert!(
        std::fs::read_to_string(b.path().join(".forum/roster.toml"))
            .unwrap()
            .contains("[[agent]]")
    );
    forum_ok(&b, &["init", "--push"]);
    assert_eq!(
        b.git_ok(&["config", "--get-all", "remote.origin.push"]),
        "HEAD\nrefs/forum/ledgers/*:refs/forum/ledgers/*"
    );
    // Plain git push carries the ledger (and the current branch); plain git fetch brings it.
    append_n(&b, 0, 2, "b");
    b.git_ok(&["commit", "-q", "--allow-empty", "-m", "code"]);
    b.git_ok(&["push", "-q"]);
    assert_eq!(remote.bare.tip(), tip(&b, REF));
    assert!(
        remote.bare.refs().contains("refs/heads/"),
        "{}",
        remote.bare.refs()
    );
    // Plain git fetch only stages it; nothing reads the staged copy.
    a.git_ok(&["fetch", "-q"]);
    assert_eq!(tip(&a, "refs/forum/unverified/origin/main"), tip(&b, REF));
    assert_eq!(tip(&a, "refs/forum/remotes/origin/main"), None);
    // Then git forum fetch verifies it and adopts it.
    let out = forum_ok(&a, &["fetch"]);
    assert!(out.contains("main: new from origin: 2 entries"), "{out}");
    assert_eq!(tip(&a, "refs/forum/remotes/origin/main"), tip(&b, REF));

    let o = forum(&a, &["init", "--remote", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stderr(&o).trim_end().lines().count(), 1);
    a.fsck();
    b.fsck();
}

#[test]
fn plain_git_fetch_after_init_never_moves_the_adopted_copy() {
    for format in FORMATS {
        let remote = Remote::new(format, false);
        let a = clone_of(format, &remote.url());
        let b = clone_of(format, &remote.url());
        // An older init's refspec, which plain git fetch used to move the adopted copy with,
        // is replaced.
        let old = "refs/forum/ledgers/*:refs/forum/remotes/origin/*";
        b.git_ok(&["config", "--add", "remote.origin.fetch", old]);
        let o = forum(&b, &["fetch"]);
        assert!(
            stderr(&o).contains(&format!(
                "warning: remote.origin.fetch has {old}, which lets plain `git fetch` move"
            )),
            "{format}: {}",
            stderr(&o)
        );
        let out = forum_ok(&b, &["init"]);
        assert!(
            out.contains(&format!("fetch refspec {old} removed")),
            "{format}: {out}"
        );
        let fetch_specs = b.git_ok(&["config", "--get-all", "remote.origin.fetch"]);
        assert!(!fetch_specs.contains(old), "{format}: {fetch_specs}");
        assert!(
            fetch_specs.contains("+refs/forum/ledgers/*:refs/forum/unverified/origin/*"),
            "{format}: {fetch_specs}"
        );

        append_n(&a, 0, 3, "a");
        forum_ok(&a, &["push"]);
        let o = forum(&b, &["fetch"]);
        assert!(o.status.success(), "{format}: {}", stderr(&o));
        assert!(!stderr(&o).contains("warning"), "{format}: {}", stderr(&o));
        let adopted = tip(&b, "refs/forum/remotes/origin/main").expect("adopted");
        let seen = tip(&b, "refs/forum/seen/origin/main").expect("seen");

        // The remote is rewritten (no server hook here) and then grows.
        let evil = clone_of(format, &remote.url());
        append_n(&evil, 0, 5, "forged");
        let o = force_push(&evil, REF);
        assert!(o.status.success(), "{format}: {}", stderr(&o));
        let o = git_at(b.path(), &["fetch", "-q"]);
        assert!(o.status.success(), "{format}: {}", stderr(&o));
        assert_eq!(
            tip(&b, "refs/forum/unverified/origin/main"),
            remote.bare.tip(),
            "{format}: staged"
        );
        assert_eq!(
            tip(&b, "refs/forum/remotes/origin/main").as_deref(),
            Some(adopted.as_str()),
            "{format}: plain git fetch moved the adopted copy"
        );
        assert_eq!(
            tip(&b, "refs/forum/seen/origin/main").as_deref(),
            Some(seen.as_str())
        );
        // git forum fetch judges the staged rewrite and refuses it.
        let o = forum(&b, &["fetch"]);
        assert_eq!(o.status.code(), Some(1), "{format}: {}", stdout(&o));
        assert!(stdout(&o).contains("REFUSED (rewritten)"), "{}", stdout(&o));
        assert_eq!(
            tip(&b, "refs/forum/remotes/origin/main").as_deref(),
            Some(adopted.as_str())
        );
        no_staging_left(&b);
        b.fsck();
    }
}

// ----- bad remotes -----

fn assert_one_line(o: &Output, needle: &str) {
    assert!(!o.status.success(), "expected failure: {}", stdout(o));
    let err = stderr(o);
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "one line expected: {err}"
    );
    assert!(err.contains(needle), "{needle:?} not in {err}");
}

#[test]
fn bad_remotes_get_one_clear_line_and_change_nothing() {
    let remote = Remote::new("sha1", false);
    let a = clone_of("sha1", &remote.url());
    append_n(&a, 0, 2, "a");
    a.git_ok(&["remote", "add", "gone", "file:///nonexistent/remote.git"]);
    let refusing = Bare::new("sha1");
    let daemon = Daemon::start(refusing.dir.path(), false);
    a.git_ok(&["remote", "add", "readonly", &daemon.url("remote.git")]);
    let before = a.snapshot();

    assert_one_line(&forum(&a, &["push", "nope"]), "no remote named \"nope\"");
    assert_one_line(&forum(&a, &["fetch", "nope"]), "no remote named \"nope\"");
    assert_one_line(&forum(&a, &["push", "gone"]), "git push to gone failed");
    assert_one_line(&forum(&a, &["fetch", "gone"]), "git fetch from gone failed");
    assert_one_line(
        &forum(&a, &["push", "readonly"]),
        "git push to readonly failed",
    );
    assert_one_line(&forum(&a, &["push", "--", "-x"]), "invalid remote");
    assert_one_line(&forum(&a, &["fetch", "bad..name"]), "invalid remote name");
    assert_one_line(
        &forum(&a, &["--ledger", "missing", "push"]),
        "no ledger named \"missing\"",
    );
    assert_eq!(a.snapshot(), before, "nothing changed");
    assert_eq!(refusing.refs(), "");
    assert_eq!(remote.bare.refs(), "");
    drop(daemon);
    a.fsck();
}

#[test]
fn a_real_redaction_travels_through_both_hooks_and_fetch() {
    for format in FORMATS {
        let remote = Remote::new(format, true);
        remote.bare.install_server_hook();
        let a = clone_of(format, &remote.url());
        let b = clone_of(format, &remote.url());
        forum_ok(&a, &["hooks", "install"]);
        append_n(&a, 0, 3, "a");
        forum_ok(&a, &["push"]);
        forum_ok(&b, &["fetch"]);
        let shown = json_of(&forum(&a, &["show", "1", "--json"]));
        let ph = shown["payload_hash"].as_str().unwrap().to_string();
        forum_ok(&a, &["redact", &ph, "--reason", "personal data"]);
        // `git forum push` never forces, and says how to publish a redaction.
        let o = forum(&a, &["push"]);
        assert_eq!(o.status.code(), Some(1));
        assert!(
            stdout(&o).contains("main: REJECTED by origin"),
            "{}",
            stdout(&o)
        );
        assert!(
            stdout(&o).contains("+refs/forum/ledgers/main:refs/forum/ledgers/main"),
            "{}",
            stdout(&o)
        );
        // Both hooks let the redaction-only rewrite through.
        let o = git_at(a.path(), &["push", "origin", &format!("+{REF}:{REF}")]);
        assert!(o.status.success(), "{format}: {}", stderr(&o));
        assert_eq!(remote.bare.tip(), tip(&a, REF));
        let (o, j) = fetch_json(&b);
        assert!(o.status.success(), "{j}");
        assert_eq!(j["ledgers"][0]["status"], "redaction-rewrite", "{j}");
        assert_eq!(tip(&b, "refs/forum/seen/origin/main"), tip(&a, REF));
        a.fsck();
        b.fsck();
        remote.bare.fsck();
    }
}

/// The pre-push hook's branch rules against a real bare remote over `file://`: the remote's
/// default branch is protected unless the policy says otherwise, a force push is refused
/// unless allowed, each refusal is one line naming the rule and the way past it, and nothing
/// reaches the remote; a server that opts in refuses the same with its own hook.
#[test]
fn pre_push_hook_refuses_the_default_branch_and_force_pushes_until_allowed() {
    for format in FORMATS {
        let remote = Remote::new(format, false);
        let a = clone_of(format, &remote.url());
        a.git_ok(&["commit", "-q", "--allow-empty", "-m", "one"]);
        // Before the hooks: main is pushed and made the remote's default branch, as a hosting
        // service's setting does.
        let o = git_at(a.path(), &["push", "-q", "origin", "HEAD:refs/heads/main"]);
        assert!(o.status.success(), "{}", stderr(&o));
        git_ok(
            &remote.bare.path(),
            &["symbolic-ref", "HEAD", "refs/heads/main"],
        );
        forum_ok(&a, &["hooks", "install"]);
        let remote_tip = |r: &str| {
            git_ok(&remote.bare.path(), &["rev-parse", r])
                .trim()
                .to_string()
        };
        let refused = |o: &Output, says: &str| {
            assert!(!o.status.success(), "the push went through");
            let err = stderr(o);
            let lines: Vec<&str> = err
                .lines()
                .filter(|l| l.starts_with("git forum pre-push"))
                .collect();
            assert_eq!(lines.len(), 1, "{}", stderr(o));
            assert!(lines[0].contains(says), "{}", lines[0]);
        };

        // The default branch is protected.
        a.git_ok(&["commit", "-q", "--allow-empty", "-m", "two"]);
        let before = remote_tip("refs/heads/main");
        let o = git_at(a.path(), &["push", "origin", "HEAD:refs/heads/main"]);
        refused(
            &o,
            "refs/heads/main on origin is protected ([push] protected in .forum/policy.toml, by default the remote's default branch): this push would update it; to push it once, run the push again with GIT_FORUM_ALLOW_PROTECTED=1",
        );
        assert_eq!(remote_tip("refs/heads/main"), before);
        let o = git_with(
            a.path(),
            ("GIT_FORUM_ALLOW_PROTECTED", "1"),
            &["push", "-q", "origin", "HEAD:refs/heads/main"],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        assert_ne!(remote_tip("refs/heads/main"), before);

        // A branch of one's own: pushed, then rewritten and force-pushed.
        a.git_ok(&["checkout", "-q", "-b", "topic"]);
        a.git_ok(&["commit", "-q", "--allow-empty", "-m", "topic one"]);
        let o = git_at(a.path(), &["push", "-q", "origin", "topic"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let published = remote_tip("refs/heads/topic");
        a.git_ok(&[
            "commit",
            "-q",
            "--amend",
            "--allow-empty",
            "-m",
            "topic again",
        ]);
        let o = git_at(a.path(), &["push", "--force", "origin", "topic"]);
        refused(
            &o,
            "refs/heads/topic on origin: this push rewrites it (not a fast forward), and force pushes are refused ([push] allow_force = true in .forum/policy.toml allows it); to push it once, run the push again with GIT_FORUM_ALLOW_FORCE=1",
        );
        assert_eq!(remote_tip("refs/heads/topic"), published);
        let o = git_with(
            a.path(),
            ("GIT_FORUM_ALLOW_FORCE", "1"),
            &["push", "-q", "--force", "origin", "topic"],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        assert_ne!(remote_tip("refs/heads/topic"), published);

        // The policy names the protected branches and allows force pushes.
        std::fs::create_dir_all(a.path().join(".forum")).unwrap();
        std::fs::write(
            a.path().join(".forum/policy.toml"),
            "[push]\nprotected = [\"release/*\"]\nallow_force = true\n",
        )
        .unwrap();
        a.git_ok(&[
            "commit",
            "-q",
            "--amend",
            "--allow-empty",
            "-m",
            "topic thrice",
        ]);
        let o = git_at(a.path(), &["push", "-q", "--force", "origin", "topic"]);
        assert!(o.status.success(), "{}", stderr(&o));
        // main is no longer protected: the policy names only release/*.
        let o = git_at(a.path(), &["push", "-q", "origin", "topic:refs/heads/main"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let o = git_at(
            a.path(),
            &["push", "origin", "topic:refs/heads/release/1.0"],
        );
        refused(&o, "refs/heads/release/1.0 on origin is protected");

        // The server opts in: its own hook refuses what a client without the hook sends.
        forum_ok_at(&remote.bare.path(), &["hooks", "install", "--server"]);
        git_ok(
            &remote.bare.path(),
            &["config", "forum.denyForcePush", "true"],
        );
        git_ok(
            &remote.bare.path(),
            &["config", "--add", "forum.protectedBranch", "main"],
        );
        forum_ok(&a, &["hooks", "uninstall"]);
        let published = remote_tip("refs/heads/topic");
        a.git_ok(&[
            "commit",
            "-q",
            "--amend",
            "--allow-empty",
            "-m",
            "topic four",
        ]);
        let o = git_at(a.path(), &["push", "--force", "origin", "topic"]);
        assert!(!o.status.success(), "the server let a force push through");
        assert!(
            stderr(&o).contains("git forum: refusing refs/heads/topic: refs/heads/topic: this push rewrites it (not a fast forward), and force pushes are refused (the server's forum.denyForcePush)"),
            "{}",
            stderr(&o)
        );
        assert_eq!(remote_tip("refs/heads/topic"), published);
        let o = git_at(
            a.path(),
            &["push", "--force", "origin", "topic:refs/heads/main"],
        );
        assert!(!o.status.success(), "the server let main be updated");
        assert!(
            stderr(&o).contains("refs/heads/main is protected (the server's forum.protectedBranch): this push would update it"),
            "{}",
            stderr(&o)
        );
        // A new branch is neither.
        let o = git_at(
            a.path(),
            &["push", "-q", "origin", "topic:refs/heads/other"],
        );
        assert!(o.status.success(), "{}", stderr(&o));
    }
}

/// [`git_at`] with one more variable in git's environment (and so its hooks').
fn git_with(dir: &Path, var: (&str, &str), args: &[&str]) -> Output {
    let mut c = Command::new("git");
    hermetic(&mut c, dir);
    c.current_dir(dir)
        .env(var.0, var.1)
        .args(args)
        .output()
        .expect("run git")
}

fn forum_ok_at(dir: &Path, args: &[&str]) -> String {
    let o = forum_at(dir, args);
    assert!(o.status.success(), "git-forum {args:?}: {}", stderr(&o));
    String::from_utf8_lossy(&o.stdout).to_string()
}
