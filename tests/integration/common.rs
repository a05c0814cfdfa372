//! Shared helpers: hermetic temporary repositories, the real `git`, the real binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The variable that turns a missing conformance folder from a skip into a failure (CI sets it).
pub const REQUIRE_SHARED: &str = "GIT_FORUM_REQUIRE_SHARED";

/// The conformance folder (`GIT_FORUM_CONFORMANCE_DIR`, else `../shared/conformance` beside
/// the repository), or `None` (with a printed reason) when absent. Panics instead when
/// `GIT_FORUM_REQUIRE_SHARED=1`, so CI never passes a skipped vector.
pub fn conformance() -> Option<PathBuf> {
    let require = std::env::var(REQUIRE_SHARED).is_ok_and(|v| v == "1");
    let dir = match std::env::var_os("GIT_FORUM_CONFORMANCE_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance"),
    };
    conformance_in(&dir, require)
}

/// [`conformance`] for the folder `p`: `Some(p)` when it is a directory; else a panic when
/// `require`, `None` with a notice otherwise.
pub fn conformance_in(p: &Path, require: bool) -> Option<PathBuf> {
    if p.is_dir() {
        Some(p.to_path_buf())
    } else if require {
        panic!(
            "{} is absent and {REQUIRE_SHARED}=1: put Forum's shared folder beside the repository",
            p.display()
        );
    } else {
        eprintln!(
            "skipped: {} is absent (a user's clone; set {REQUIRE_SHARED}=1 to fail instead)",
            p.display()
        );
        None
    }
}

/// The error of a failed command: exactly one line on stderr holding `needle`, a non-zero
/// exit, nothing on stdout.
pub fn one_line_error(o: &Output, needle: &str) -> String {
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(!o.status.success(), "should fail: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err:?}");
    assert!(err.contains(needle), "{needle:?} not in {err:?}");
    assert!(o.stdout.is_empty(), "stdout: {:?}", o.stdout);
    err
}

/// A child process, killed and reaped on drop if it still runs.
pub struct Guarded(pub std::process::Child);

impl Drop for Guarded {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// A running `git forum serve`: the process, its `HOST:PORT`, its token file, and its stdout
/// (kept open, past the `listening` and `token-file` lines it has read).
pub struct Served {
    pub child: Guarded,
    pub addr: String,
    /// The file the daemon keeps its bearer token in (its second line, `token-file PATH`).
    pub token_file: PathBuf,
    pub stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl Served {
    /// The daemon's bearer token, read from its file as a client of the user's would.
    pub fn token(&self) -> String {
        read_token(&self.token_file)
    }
}

/// The token in a daemon's token file.
pub fn read_token(file: &Path) -> String {
    std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("reading the token file {}: {e}", file.display()))
        .trim()
        .to_string()
}

/// The token file of each daemon a test started, by its address, so a client given only the
/// address ([`http_json`], [`auth_header`]) sends the token as the CLI's own clients do.
fn token_files() -> &'static std::sync::Mutex<std::collections::HashMap<String, PathBuf>> {
    static FILES: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<String, PathBuf>>,
    > = std::sync::OnceLock::new();
    FILES.get_or_init(Default::default)
}

/// `Authorization: Bearer TOKEN\r\n` for the daemon at `addr` (started by [`Repo::serve`]),
/// or nothing for an address no daemon of this test has.
pub fn auth_header(addr: &str) -> String {
    let file = token_files()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(addr)
        .cloned();
    match file {
        Some(f) => format!("Authorization: Bearer {}\r\n", read_token(&f)),
        None => String::new(),
    }
}

/// The SHA-256 of `bytes`, in hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A temporary git repository, removed on drop: `sha1` or `sha256` (files ref storage), or
/// `reftable` (SHA-1 objects, refs in git's reftable storage).
pub struct Repo {
    pub dir: tempfile::TempDir,
    /// git forum's cache and state roots for this repository's commands
    /// (`GIT_FORUM_CACHE_DIR`, `GIT_FORUM_STATE_DIR`): outside the work tree, removed on drop.
    pub user: tempfile::TempDir,
}

fn hermetic(cmd: &mut Command, home: &Path) {
    cmd.env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_FORUM_LEDGER")
        .env_remove("GIT_FORUM_TIMESTAMP")
        .env("HOME", home)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_SYSTEM", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        // `init` probes no local server: an Ollama or llama.cpp of the machine's own would
        // change the seat it writes. A test that wants one names its port.
        .env("GIT_FORUM_INIT_PORTS", "");
}

impl Repo {
    pub fn new(kind: &str) -> Repo {
        let dir = tempfile::tempdir().expect("tempdir");
        let user = tempfile::tempdir().expect("tempdir");
        let r = Repo { dir, user };
        let mut args = vec!["init".to_string(), "-q".to_string()];
        args.extend(init_flags(kind));
        args.push(".".into());
        r.git_ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
        r
    }

    /// True when this repository keeps its refs in reftable (no loose ref files to tamper with).
    pub fn is_reftable(&self) -> bool {
        self.git_ok(&["rev-parse", "--show-ref-format"]) == "reftable"
    }

    /// The kind `Repo::new` takes that makes a repository like this one: `reftable`, `sha256`
    /// or `sha1`.
    pub fn kind(&self) -> &'static str {
        if self.is_reftable() {
            "reftable"
        } else if self.git_ok(&["rev-parse", "--show-object-format"]) == "sha256" {
            "sha256"
        } else {
            "sha1"
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn git_dir(&self) -> PathBuf {
        self.path().join(".git")
    }

    pub fn git(&self, args: &[&str]) -> Output {
        let mut c = Command::new("git");
        hermetic(&mut c, self.path());
        c.current_dir(self.path())
            .args(args)
            .output()
            .expect("run git")
    }

    pub fn git_ok(&self, args: &[&str]) -> String {
        let o = self.git(args);
        assert!(
            o.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim_end().to_string()
    }

    /// `git` with stdin.
    pub fn git_in(&self, args: &[&str], input: &[u8]) -> String {
        use std::io::Write;
        let mut c = Command::new("git");
        hermetic(&mut c, self.path());
        let mut child = c
            .current_dir(self.path())
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn git");
        child.stdin.take().unwrap().write_all(input).unwrap();
        let o = child.wait_with_output().unwrap();
        assert!(
            o.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim_end().to_string()
    }

    /// A `git-forum` command in this repository with a pinned clock.
    pub fn forum(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_git-forum"));
        hermetic(&mut c, self.path());
        c.current_dir(self.path())
            .env("GIT_FORUM_TIMESTAMP", "1000")
            .env("GIT_FORUM_CACHE_DIR", self.cache_dir())
            .env("GIT_FORUM_STATE_DIR", self.state_dir());
        c
    }

    /// `git forum` as a user types it: git finds `git-forum` on `PATH` (the built binary's
    /// folder first) and runs it as its child, with the environment of [`Repo::forum`].
    pub fn git_forum(&self) -> Command {
        let bin = std::path::Path::new(env!("CARGO_BIN_EXE_git-forum"))
            .parent()
            .unwrap()
            .to_path_buf();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut c = Command::new("git");
        hermetic(&mut c, self.path());
        c.current_dir(self.path())
            .arg("forum")
            .env("PATH", path)
            .env("GIT_FORUM_TIMESTAMP", "1000")
            .env("GIT_FORUM_CACHE_DIR", self.cache_dir())
            .env("GIT_FORUM_STATE_DIR", self.state_dir());
        c
    }

    /// git forum's cache root for this repository's commands (task worktrees live under it).
    pub fn cache_dir(&self) -> PathBuf {
        self.user.path().join("cache")
    }

    /// The work root `--work` runs of this repository's commands use (under its cache root).
    pub fn work_root(&self) -> git_forum::work::WorkRoot {
        git_forum::work::WorkRoot::at(self.cache_dir().join("work"))
    }

    /// Opens run `run`'s workbench of ledger `ledger` through the library, from `dir` (this
    /// repository or a directory in it), under [`Repo::work_root`].
    pub fn open_work(
        &self,
        dir: &Path,
        ledger: &str,
        run: u64,
    ) -> Result<git_forum::work::GitWork, git_forum::run::WorkError> {
        git_forum::work::GitWork::open_under(&self.work_root(), dir, ledger, run)
    }

    /// The work area of run `run` of ledger `ledger` (`WORK/CLONE/LEDGER/RUN`; the one clone
    /// directory under [`Repo::work_root`]), existing or not.
    pub fn work_area(&self, ledger: &str, run: u64) -> PathBuf {
        let root = self.cache_dir().join("work");
        let clones: Vec<PathBuf> = std::fs::read_dir(&root)
            .map(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(
            clones.len(),
            1,
            "one clone directory under {root:?}: {clones:?}"
        );
        clones[0]
            .canonicalize()
            .unwrap()
            .join(ledger)
            .join(run.to_string())
    }

    /// git forum's state root for this repository's commands (the daemon's token lives there).
    pub fn state_dir(&self) -> PathBuf {
        self.user.path().join("state")
    }

    /// Starts `git forum serve --port 0 ARGS...` (stderr to `stderr`) and reads the address
    /// from its first line, `listening http://HOST:PORT`, and its token file from the second,
    /// `token-file PATH`.
    pub fn serve(&self, args: &[&str], stderr: std::process::Stdio) -> Served {
        self.serve_with_env(args, stderr, &[])
    }

    /// [`Repo::serve`] with extra environment variables for the server.
    pub fn serve_with_env(
        &self,
        args: &[&str],
        stderr: std::process::Stdio,
        env: &[(&str, &str)],
    ) -> Served {
        use std::io::BufRead;
        let child = self
            .forum()
            .envs(env.iter().copied())
            .args(["serve", "--port", "0"])
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start git forum serve");
        let mut child = Guarded(child);
        let mut stdout = std::io::BufReader::new(child.0.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        let addr = first
            .trim()
            .strip_prefix("listening http://")
            .unwrap_or_else(|| panic!("first line {first:?}"))
            .to_string();
        let mut second = String::new();
        stdout.read_line(&mut second).unwrap();
        let token_file = PathBuf::from(
            second
                .trim_end_matches('\n')
                .strip_prefix("token-file ")
                .unwrap_or_else(|| panic!("second line {second:?}")),
        );
        token_files()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(addr.clone(), token_file.clone());
        Served {
            child,
            addr,
            token_file,
            stdout,
        }
    }

    /// Runs `git forum mcp ARGS...` with `lines` on its stdin, one message a line, and returns
    /// whether it exited 0 once stdin closed, and what it printed (its replies, one a line).
    /// Tool calls run concurrently and JSON-RPC orders nothing between requests in flight, so
    /// this client does what an honest one does: it waits for the reply to each request (a
    /// line with a method and a string or integer id) before it sends the next line. The
    /// replies therefore come in the order of the requests.
    pub fn mcp_batch<L: AsRef<str>>(&self, args: &[&str], lines: &[L]) -> (bool, String) {
        let (ok, out, _) = self.mcp_exchange(args, lines);
        (ok, out)
    }

    /// The reply to one `tools/call` of `tool` with `arguments`, made after `initialize` in a
    /// `git forum mcp ARGS...` session that must exit 0.
    pub fn mcp_call(
        &self,
        args: &[&str],
        tool: &str,
        arguments: serde_json::Value,
    ) -> serde_json::Value {
        let lines = [
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}})
            .to_string(),
            serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
                .to_string(),
            serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments}})
            .to_string(),
        ];
        let (ok, out) = self.mcp_batch(args, &lines);
        assert!(ok, "{out}");
        out.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|r| r["id"] == 2)
            .unwrap_or_else(|| panic!("no reply to the {tool} call: {out}"))
    }

    /// [`Repo::mcp_batch`], with what the server wrote to stderr too.
    pub fn mcp_exchange<L: AsRef<str>>(
        &self,
        args: &[&str],
        lines: &[L],
    ) -> (bool, String, String) {
        use std::io::{BufRead, Read, Write};
        let mut child = self
            .forum()
            .arg("mcp")
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start git forum mcp");
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let errors = std::thread::spawn(move || {
            let mut err = String::new();
            let _ = stderr.read_to_string(&mut err);
            err
        });
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut out = String::new();
        let take = |line: String, out: &mut String| {
            out.push_str(&line);
            out.push('\n');
            serde_json::from_str::<serde_json::Value>(&line)
                .ok()
                .and_then(|v| v.get("id").cloned())
        };
        {
            let mut stdin = child.stdin.take().unwrap();
            for line in lines {
                let line = line.as_ref();
                if writeln!(stdin, "{line}")
                    .and_then(|_| stdin.flush())
                    .is_err()
                {
                    break;
                }
                let Some(id) = awaited_id(line) else { continue };
                loop {
                    // A guard against a hung server, not a measurement.
                    let got = rx
                        .recv_timeout(std::time::Duration::from_secs(300))
                        .unwrap_or_else(|_| panic!("no reply to {id}; so far: {out}"));
                    if take(got, &mut out).as_ref() == Some(&id) {
                        break;
                    }
                }
            }
        }
        let status = child.wait().expect("wait for git forum mcp");
        reader.join().unwrap();
        while let Ok(line) = rx.try_recv() {
            take(line, &mut out);
        }
        (status.success(), out, errors.join().unwrap())
    }

    pub fn forum_ok(&self, args: &[&str]) -> String {
        let o = self.forum().args(args).output().expect("run git-forum");
        assert!(
            o.status.success(),
            "git-forum {args:?} failed ({}): {}{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).to_string()
    }

    pub fn forum_json(&self, args: &[&str]) -> serde_json::Value {
        let mut a = args.to_vec();
        a.push("--json");
        let o = self.forum().args(&a).output().expect("run git-forum");
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
            panic!(
                "git-forum {a:?}: not JSON ({e}): {}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        })
    }

    pub fn append(&self, actor: &str, kind: &str, payload: &str) -> serde_json::Value {
        self.forum_json(&[
            "append",
            "--actor",
            actor,
            "--kind",
            kind,
            "--payload",
            payload,
        ])
    }

    /// `git fsck --strict` must be clean.
    pub fn fsck(&self) {
        let o = self.git(&["fsck", "--strict", "--no-progress"]);
        assert!(
            o.status.success(),
            "fsck failed: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !err.contains("error") && !err.contains("warning"),
            "fsck complained: {err}"
        );
    }

    /// A snapshot of every ref and file under .git/forum and refs/forum, to prove nothing changed.
    pub fn snapshot(&self) -> String {
        let refs = self.git_ok(&["for-each-ref", "--format=%(refname) %(objectname)"]);
        let mut files: Vec<String> = walk(&self.git_dir().join("forum"));
        files.sort();
        format!("{refs}\n{}", files.join("\n"))
    }
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
                out.push(format!("{} {len}", p.display()));
            }
        }
    }
    out
}

/// The `git init` flags for a kind of repository (see [`Repo::new`]).
pub fn init_flags(kind: &str) -> Vec<String> {
    match kind {
        "reftable" => vec![
            "--object-format=sha1".into(),
            "--ref-format=reftable".into(),
        ],
        format => vec![format!("--object-format={format}")],
    }
}

/// The three kinds of repository every ledger, sync and run test covers: files/SHA-1,
/// files/SHA-256 and reftable (see [`Repo::new`]).
pub const FORMATS: [&str; 3] = ["sha1", "sha256", "reftable"];

/// A bare repository of `kind` (see [`init_flags`]) in a new temporary folder, added to `repo`
/// as `origin` over `file://`; returns the folder (kept alive by the caller) and the URL.
pub fn bare_origin(repo: &Repo, kind: &str) -> (tempfile::TempDir, String) {
    let bare = tempfile::tempdir().unwrap();
    let mut args = vec!["init".to_string(), "-q".into(), "--bare".into()];
    args.extend(init_flags(kind));
    args.push(bare.path().display().to_string());
    let ok = std::process::Command::new("git")
        .args(&args)
        .status()
        .unwrap();
    assert!(ok.success());
    let url = format!("file://{}", bare.path().display());
    repo.git_ok(&["remote", "add", "origin", &url]);
    (bare, url)
}

/// Runs `body` once on a fresh repository of each of the [`FORMATS`]; a failure names the kind
/// it failed on before it propagates.
pub fn on_each_kind(body: impl Fn(&Repo)) {
    for kind in FORMATS {
        let repo = Repo::new(kind);
        let run = std::panic::AssertUnwindSafe(|| body(&repo));
        if let Err(panic) = std::panic::catch_unwind(run) {
            eprintln!("(the failure above is on a {kind} repository)");
            std::panic::resume_unwind(panic);
        }
    }
}

// ----- tampering with a ledger through git's plumbing, as an attacker would -----

/// The ref of the default ledger.
pub const LEDGER_REF: &str = "refs/forum/ledgers/main";

/// The raw commit texts of the chain at `refname`, root first.
pub fn commit_texts(repo: &Repo, refname: &str) -> Vec<String> {
    repo.git_ok(&["rev-list", "--first-parent", "--reverse", refname])
        .lines()
        .map(|id| repo.git_ok(&["cat-file", "commit", id]) + "\n")
        .collect()
}

/// `text` with its parent line replaced by `parent` (or removed).
pub fn set_parent(text: &str, parent: Option<&str>) -> String {
    let mut out = String::new();
    let mut done = false;
    for line in text.split_inclusive('\n') {
        if line.starts_with("parent ") {
            continue;
        }
        out.push_str(line);
        if !done && line.starts_with("tree ") {
            if let Some(p) = parent {
                out.push_str(&format!("parent {p}\n"));
            }
            done = true;
        }
    }
    out
}

/// Writes a raw commit text as an object; returns its id.
pub fn write_commit(repo: &Repo, text: &str) -> String {
    repo.git_in(
        &[
            "hash-object",
            "-t",
            "commit",
            "-w",
            "--stdin",
            "--literally",
        ],
        text.as_bytes(),
    )
}

/// Points the default ledger's ref at `id` and deletes its reflog, leaving no witness.
pub fn move_ref_quietly(repo: &Repo, id: &str) {
    if repo.is_reftable() {
        // Deleting the ref drops its reflog; refs outside refs/heads are recreated without one.
        let _ = repo.git(&["update-ref", "-d", LEDGER_REF]);
        repo.git_ok(&["update-ref", LEDGER_REF, id]);
        return;
    }
    let _ = std::fs::remove_file(repo.git_dir().join("logs").join(LEDGER_REF));
    std::fs::write(repo.git_dir().join(LEDGER_REF), format!("{id}\n")).unwrap();
}

/// Writes `texts` as a chain (each re-parented onto the one before), moves the default ledger's
/// ref there quietly, and returns the new tip.
pub fn rechain(repo: &Repo, texts: &[String]) -> String {
    let mut parent: Option<String> = None;
    for t in texts {
        parent = Some(write_commit(repo, &set_parent(t, parent.as_deref())));
    }
    let tip = parent.expect("at least one commit");
    move_ref_quietly(repo, &tip);
    tip
}

/// The id whose reply a client waits for after sending `line`: a request's (a JSON object
/// with a method and a string or integer id, within the server's line limit); none for a
/// notification or a line the server refuses without an id.
fn awaited_id(line: &str) -> Option<serde_json::Value> {
    if line.len() > git_forum::serve::mcp::MAX_LINE {
        return None;
    }
    // Read as the server reads it (NaN and Infinity are accepted).
    let v = git_forum::ledger::canonical::parse(line).ok()?.to_serde();
    v.get("method")?;
    let id = v.get("id")?;
    (id.is_string() || id.is_i64() || id.is_u64()).then(|| id.clone())
}

/// One HTTP/1.1 request with a JSON body on its own connection to `addr`, with the daemon's
/// token when a daemon of this test listens there: (status, body as JSON, or null when it is
/// not JSON).
pub fn http_json(
    addr: &str,
    method: &str,
    path: &str,
    body: &serde_json::Value,
) -> (u16, serde_json::Value) {
    use std::io::{Read, Write};
    let body = body.to_string();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        auth_header(addr),
        body.len()
    );
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    let (head, rest) = text.split_once("\r\n\r\n").expect("a response");
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    (
        code,
        serde_json::from_str(rest).unwrap_or(serde_json::Value::Null),
    )
}

/// Polls `cond` until it holds or `limit` has passed, and says whether it held. The pauses
/// between tries start at 1 ms and double up to 50 ms: a condition that holds at once is seen
/// at once, and one that costs a process per try (`git forum log`) is not run in a tight
/// loop. `limit` is a guard against a hang, never a measurement: pick it far above the time
/// the condition takes on a loaded machine.
pub fn poll_until(limit: std::time::Duration, mut cond: impl FnMut() -> bool) -> bool {
    use std::time::{Duration, Instant};
    let deadline = Instant::now() + limit;
    let mut pause = Duration::from_millis(1);
    loop {
        if cond() {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// [`poll_until`], failing the test with `what` (what never happened, e.g. "the worker never
/// started") when `cond` does not hold within `limit`.
#[track_caller]
pub fn wait_until(what: &str, limit: std::time::Duration, cond: impl FnMut() -> bool) {
    assert!(poll_until(limit, cond), "{what} (waited {limit:?})");
}

/// Polls `get` until it gives a value, which it returns, failing the test with `what` when it
/// gives none within `limit` (see [`poll_until`]).
#[track_caller]
pub fn wait_for<T>(
    what: &str,
    limit: std::time::Duration,
    mut get: impl FnMut() -> Option<T>,
) -> T {
    let mut got = None;
    wait_until(what, limit, || {
        got = get();
        got.is_some()
    });
    got.expect("the condition held")
}
