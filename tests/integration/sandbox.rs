//! The sandbox of `--work` workers and checks, through
//! the binary: a command worker and a check that each try to write beside the task's worktree,
//! into `.git/refs/forum` (a file and `git update-ref`) and `.git/hooks`, to read the user's
//! tree, a secret in `$HOME`, `/etc/shadow` and a credential in the repository's
//! configuration, to connect to a host Unix socket and to a TCP listener the test holds, fail
//! at each under bubblewrap while `git status` still works; the run's record says it was
//! confined (with the one path `--sandbox-read` added), and the ledger verifies. `--no-sandbox` is witnessed as unconfined (and really is), and a
//! `--sandbox` run where bubblewrap is missing is refused in one line with nothing written.

use std::net::TcpListener;
use std::path::Path;

use serde_json::Value as J;

use crate::common::{Repo, on_each_kind, one_line_error};
use crate::work_run::{clean, payloads, setup};

/// Whether this machine can run the sandbox at all (bubblewrap installed and allowed to make
/// namespaces); the tests that need it say so and fail when it cannot.
pub(crate) fn bwrap_works() -> bool {
    std::process::Command::new("bwrap")
        .args(["--unshare-all", "--ro-bind", "/", "/", "true"])
        .status()
        .is_ok_and(|s| s.success())
}

/// The probe every worker and check runs: one `NAME=denied|written|hidden|...` word per
/// attempt. It lives in `tools` (a directory the run shows with `--sandbox-read`), tries to
/// write beside its worktree, into the refs (a file and `git update-ref`) and the hooks, to
/// read the user's tree, a secret in `$HOME`, `/etc/shadow` and the credential in the
/// repository's configuration, to connect to a host Unix socket and to a TCP listener on
/// loopback, and runs `git status`.
fn probe(repo: &Repo, tools: &Path, home: &Path, port: u16, socket: &Path) -> String {
    let path = tools.join("probe.sh");
    let user_tree = repo.path().display();
    let home = home.display();
    let socket = socket.display();
    let body = format!(
        r#"#!/bin/sh
common=$(git rev-parse --path-format=absolute --git-common-dir)
r=""
(echo x > ../outside.txt) 2>/dev/null
if (mkdir -p "$common/refs/forum" && echo x > "$common/refs/forum/evil") 2>/dev/null; then r="$r refs=written"; else r="$r refs=denied"; fi
if git update-ref refs/forum/evil2 HEAD 2>/dev/null; then r="$r gitref=written"; else r="$r gitref=denied"; fi
(mkdir -p "$common/hooks" && printf '#!/bin/sh\ntouch /tmp/hooked\n' > "$common/hooks/post-checkout") 2>/dev/null
if cat '{user_tree}/calc.py' >/dev/null 2>&1; then r="$r tree=read"; else r="$r tree=hidden"; fi
if cat '{home}/.secret' >/dev/null 2>&1; then r="$r home=read"; else r="$r home=hidden"; fi
(echo x > '{home}/dropped') 2>/dev/null
if cat /etc/shadow >/dev/null 2>&1; then r="$r shadow=read"; else r="$r shadow=hidden"; fi
if grep -qi extraheader "$common/config" 2>/dev/null; then r="$r config=credential"; else r="$r config=clean"; fi
if python3 -c "import socket; s=socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect('{socket}')" 2>/dev/null; then r="$r socket=connected"; else r="$r socket=denied"; fi
if python3 -c "import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)" 2>/dev/null; then r="$r net=connected"; else r="$r net=denied"; fi
if git status --porcelain >/dev/null 2>&1; then r="$r status=ok"; else r="$r status=failed"; fi
echo "probe:$r"
"#
    );
    std::fs::write(&path, body).unwrap();
    path.display().to_string()
}

/// What the probe says when every attempt failed (and `git status` worked).
const CONFINED: &str = "probe: refs=denied gitref=denied tree=hidden home=hidden shadow=hidden config=clean socket=denied net=denied status=ok";

/// A scripted model whose worker fixes `add` and then runs the probe.
fn model(repo: &Repo, probe: &str) -> String {
    let path = repo.path().join("model.sh");
    let plan = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"make add in calc.py add","depends_on":[],"done_when":["the tests pass"]}]}"#;
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{plan}' ;;\n  *\"Decide whether to ship\"*) echo '{{\"decision\":\"merge\",\"reason\":\"scripted\"}}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'Fixed calc.' ;;\n  *)\n    sed -i 's/return a - b/return a + b/' calc.py; sh '{probe}'\n  ;;\nesac\n"
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// A home directory with a secret in it.
fn secret_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join(".secret"), "s3cr3t\n").unwrap();
    home
}

fn submit(repo: &Repo, home: &Path, extra: &[&str], m: &str) -> std::process::Output {
    let check = format!("sh {} && python3 -m unittest -q", probe_path(m));
    let mut args = vec!["submit", "--json", "--work", "--check", &check];
    args.extend_from_slice(extra);
    args.extend(["--cmd", m, "fix calc"]);
    repo.forum().env("HOME", home).args(&args).output().unwrap()
}

/// The probe a model script runs (the path after `sh '`).
fn probe_path(model: &str) -> String {
    let text = std::fs::read_to_string(model).unwrap();
    text.split("sh '")
        .nth(1)
        .and_then(|t| t.split('\'').next())
        .unwrap_or("")
        .to_string()
}

/// A Unix socket the test listens on, in a directory of the host's `/tmp`.
fn host_socket() -> (
    tempfile::TempDir,
    std::os::unix::net::UnixListener,
    std::path::PathBuf,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.sock");
    let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
    l.set_nonblocking(true).unwrap();
    (dir, l, path)
}

/// The request's sandbox record, without the list of what the run's profile bound (the
/// toolchains on this machine's `PATH`, which differ from machine to machine); that list,
/// when there, is a non-empty list of absolute paths.
fn request_sandbox(repo: &Repo) -> J {
    let mut s = payloads(repo, "request")[0].1["work"]["sandbox"].clone();
    if let Some(bound) = s.as_object_mut().and_then(|o| o.remove("bound")) {
        let all_absolute = bound.as_array().is_some_and(|b| {
            !b.is_empty()
                && b.iter()
                    .all(|p| p.as_str().is_some_and(|p| p.starts_with('/')))
        });
        assert!(all_absolute, "{bound}");
    }
    s
}

#[test]
fn a_sandboxed_worker_and_check_fail_at_every_escape_and_the_ledger_verifies() {
    assert!(
        bwrap_works(),
        "this test needs a working bwrap (apt install bubblewrap)"
    );
    on_each_kind(|repo| {
        setup(repo);
        // A credential in the repository's configuration, as a private remote needs.
        repo.git_ok(&[
            "config",
            "http.https://example.invalid/.extraheader",
            "Authorization: Bearer not-for-workers",
        ]);
        let home = secret_home();
        let tools = tempfile::tempdir().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (_sockdir, unix, socket) = host_socket();
        let p = probe(repo, tools.path(), home.path(), port, &socket);
        let m = model(repo, &p);
        let refs_before = repo.git_ok(&["for-each-ref", "refs/forum/ledgers"]);
        let hooks_before = std::fs::read_dir(repo.git_dir().join("hooks"))
            .map(|d| d.count())
            .unwrap_or(0);
        let o = submit(repo, home.path(), &["--sandbox-read", &p], &m);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        // The worker's answer and each check's output show every attempt failed.
        let result = &payloads(repo, "result")[0].1;
        assert!(
            result["output"].as_str().unwrap().contains(CONFINED),
            "{result}"
        );
        let checks = payloads(repo, "check");
        assert_eq!(checks.len(), 2, "{checks:?}");
        for (_, c) in &checks {
            assert!(c["output"].as_str().unwrap().contains(CONFINED), "{c}");
            assert_eq!(c["ok"], true, "{c}");
        }
        // The record says the run was confined, without network, with the one path added.
        let shown = std::path::Path::new(&p).canonicalize().unwrap();
        assert_eq!(
            request_sandbox(repo),
            serde_json::json!({"confined": true, "tool": "bwrap", "net": false, "read": [shown]})
        );
        // Nothing landed anywhere: no stray refs, no hook, no file beside the worktree or in
        // the home, no connection; the change itself was committed and merged.
        for r in ["refs/forum/evil", "refs/forum/evil2"] {
            assert_eq!(repo.git_ok(&["for-each-ref", r]), "", "{r}");
        }
        assert!(!repo.git_dir().join("refs/forum/evil").exists());
        assert!(!repo.git_dir().join("hooks/post-checkout").exists());
        assert_eq!(
            std::fs::read_dir(repo.git_dir().join("hooks"))
                .map(|d| d.count())
                .unwrap_or(0),
            hooks_before
        );
        assert!(!repo.work_area("main", 0).join("outside.txt").exists());
        assert!(!home.path().join("dropped").exists());
        listener.set_nonblocking(true).unwrap();
        assert_eq!(
            listener.accept().unwrap_err().kind(),
            std::io::ErrorKind::WouldBlock
        );
        assert_eq!(
            unix.accept().unwrap_err().kind(),
            std::io::ErrorKind::WouldBlock
        );
        assert_eq!(payloads(repo, "ship")[0].1["decision"], "merge");
        let calc = repo.git_ok(&["show", "forum/run-0:calc.py"]);
        assert!(calc.contains("return a + b"), "{calc}");
        let after = repo.git_ok(&["for-each-ref", "refs/forum/ledgers"]);
        assert_ne!(
            after, refs_before,
            "the ledger grew, written by git forum itself"
        );
        clean(repo);
    });
}

#[test]
fn sandbox_net_keeps_the_network_and_is_witnessed() {
    assert!(
        bwrap_works(),
        "this test needs a working bwrap (apt install bubblewrap)"
    );
    let repo = Repo::new("sha1");
    setup(&repo);
    let home = secret_home();
    let tools = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (_sockdir, unix, socket) = host_socket();
    let p = probe(&repo, tools.path(), home.path(), port, &socket);
    let m = model(&repo, &p);
    let o = submit(
        &repo,
        home.path(),
        &["--sandbox", "--sandbox-net", "--sandbox-read", &p],
        &m,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let result = &payloads(&repo, "result")[0].1;
    let out = result["output"].as_str().unwrap();
    // The network is back; the filesystem (and so the host's socket files) is not.
    assert!(
        out.contains("net=connected")
            && out.contains("refs=denied")
            && out.contains("socket=denied"),
        "{out}"
    );
    assert_eq!(
        unix.accept().unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock
    );
    assert_eq!(request_sandbox(&repo)["net"], true);
    clean(&repo);
}

#[test]
fn no_sandbox_is_witnessed_as_unconfined() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let home = secret_home();
    // The unconfined worker only writes into the user's tree (nothing that would break the
    // repository), which shows it really ran unconfined.
    let p = repo.path().join("probe.sh");
    let outside = repo.path().join("outside.txt");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\nif (echo x > '{}') 2>/dev/null; then echo probe: tree=written; else echo probe: tree=denied; fi\n",
            outside.display()
        ),
    )
    .unwrap();
    let m = model(&repo, &p.display().to_string());
    let o = submit(&repo, home.path(), &["--no-sandbox"], &m);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        request_sandbox(&repo),
        serde_json::json!({"confined": false, "reason": "--no-sandbox"})
    );
    let result = &payloads(&repo, "result")[0].1;
    assert!(
        result["output"]
            .as_str()
            .unwrap()
            .contains("probe: tree=written"),
        "{result}"
    );
    assert!(outside.exists());
    clean(&repo);
}

#[test]
fn sandbox_without_bubblewrap_is_refused_in_one_line_and_writes_nothing() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let home = secret_home();
    let tools = tempfile::tempdir().unwrap();
    let p = probe(
        &repo,
        tools.path(),
        home.path(),
        9,
        &tools.path().join("none.sock"),
    );
    let m = model(&repo, &p);
    let o = repo
        .forum()
        .env("GIT_FORUM_BWRAP", "/nonexistent/bwrap")
        .args(["submit", "--work", "--sandbox", "--cmd", &m, "fix calc"])
        .output()
        .unwrap();
    one_line_error(&o, "apt install bubblewrap");
    assert_eq!(repo.git_ok(&["for-each-ref", "refs/forum"]), "");
    assert!(!repo.git_dir().join("forum").exists());
    // The same in .forum/runtime.toml.
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        "[work]\nenabled = true\nsandbox = true\n",
    )
    .unwrap();
    let o = repo
        .forum()
        .env("GIT_FORUM_BWRAP", "/nonexistent/bwrap")
        .args(["submit", "--cmd", &m, "fix calc"])
        .output()
        .unwrap();
    one_line_error(&o, "--sandbox needs bubblewrap");
    assert_eq!(repo.git_ok(&["for-each-ref", "refs/forum"]), "");
}

#[test]
fn a_default_sandbox_without_bubblewrap_runs_unconfined_and_says_so() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let home = secret_home();
    let p = repo.path().join("probe.sh");
    std::fs::write(&p, "#!/bin/sh\necho probe: ran\n").unwrap();
    let m = model(&repo, &p.display().to_string());
    let o = repo
        .forum()
        .env("HOME", home.path())
        .env("GIT_FORUM_BWRAP", "/nonexistent/bwrap")
        .args(["submit", "--json", "--work", "--cmd", &m, "fix calc"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("note: workers and checks run unconfined"),
        "{err}"
    );
    let s = request_sandbox(&repo);
    assert_eq!(s["confined"], false);
    assert!(
        s["reason"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/bwrap is not a file"),
        "{s}"
    );
    clean(&repo);
}
