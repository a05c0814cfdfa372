//! The sandbox of `--work` workers and checks (issue 18, point 3), through the binary: a
//! command worker and a check that each try to write outside the task's worktree (beside it
//! and in the user's tree), into `.git/refs/forum` (a file and `git update-ref`), to read a
//! secret in `$HOME`, and to open a TCP connection to a listener the test holds, fail at each
//! under bubblewrap while `git status` still works; the run's record says it was confined, and
//! the ledger verifies. `--no-sandbox` is witnessed as unconfined (and really is), and a
//! `--sandbox` run where bubblewrap is missing is refused in one line with nothing written.

use std::net::TcpListener;
use std::path::Path;

use serde_json::Value as J;

use crate::common::{Repo, on_each_kind, one_line_error};
use crate::work_run::{clean, payloads, setup};

/// Whether this machine can run the sandbox at all (bubblewrap installed and allowed to make
/// namespaces); the tests that need it say so and fail when it cannot.
fn bwrap_works() -> bool {
    std::process::Command::new("bwrap")
        .args(["--unshare-all", "--ro-bind", "/", "/", "true"])
        .status()
        .is_ok_and(|s| s.success())
}

/// The probe every worker and check runs: one `NAME=denied|written|...` word per attempt.
fn probe(repo: &Repo, home: &Path, port: u16) -> String {
    let path = repo.path().join("probe.sh");
    let user_tree = repo.path().display();
    let home = home.display();
    let body = format!(
        r#"#!/bin/sh
common=$(git rev-parse --path-format=absolute --git-common-dir)
r=""
if (echo x > ../outside.txt) 2>/dev/null; then r="$r beside=written"; else r="$r beside=denied"; fi
if (echo x > '{user_tree}/outside.txt') 2>/dev/null; then r="$r tree=written"; else r="$r tree=denied"; fi
if (mkdir -p "$common/refs/forum" && echo x > "$common/refs/forum/evil") 2>/dev/null; then r="$r refs=written"; else r="$r refs=denied"; fi
if git update-ref refs/forum/evil2 HEAD 2>/dev/null; then r="$r gitref=written"; else r="$r gitref=denied"; fi
if cat '{home}/.secret' >/dev/null 2>&1; then r="$r home=read"; else r="$r home=hidden"; fi
(echo x > '{home}/dropped') 2>/dev/null
if python3 -c "import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)" 2>/dev/null; then r="$r net=connected"; else r="$r net=denied"; fi
if git status --porcelain >/dev/null 2>&1; then r="$r status=ok"; else r="$r status=failed"; fi
echo "probe:$r"
"#
    );
    std::fs::write(&path, body).unwrap();
    path.display().to_string()
}

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
    let check = format!(
        "sh {}/probe.sh && python3 -m unittest -q",
        repo.path().display()
    );
    let mut args = vec!["submit", "--json", "--work", "--check", &check];
    args.extend_from_slice(extra);
    args.extend(["--cmd", m, "fix calc"]);
    repo.forum().env("HOME", home).args(&args).output().unwrap()
}

fn request_sandbox(repo: &Repo) -> J {
    payloads(repo, "request")[0].1["work"]["sandbox"].clone()
}

#[test]
fn a_sandboxed_worker_and_check_fail_at_every_escape_and_the_ledger_verifies() {
    assert!(
        bwrap_works(),
        "this test needs a working bwrap (apt install bubblewrap)"
    );
    on_each_kind(|repo| {
        setup(repo);
        let home = secret_home();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let p = probe(repo, home.path(), port);
        let m = model(repo, &p);
        let refs_before = repo.git_ok(&["for-each-ref", "refs/forum/ledgers"]);
        let o = submit(repo, home.path(), &[], &m);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let want = "probe: beside=denied tree=denied refs=denied gitref=denied home=hidden net=denied status=ok";
        // The worker's answer and each check's output show every attempt failed.
        let result = &payloads(repo, "result")[0].1;
        assert!(
            result["output"].as_str().unwrap().contains(want),
            "{result}"
        );
        let checks = payloads(repo, "check");
        assert_eq!(checks.len(), 2, "{checks:?}");
        for (_, c) in &checks {
            assert!(c["output"].as_str().unwrap().contains(want), "{c}");
            assert_eq!(c["ok"], true, "{c}");
        }
        // The record says the run was confined, without network.
        assert_eq!(
            request_sandbox(repo),
            serde_json::json!({"confined": true, "tool": "bwrap", "net": false})
        );
        // Nothing landed anywhere: no stray refs, no file in the user's tree or home, no
        // connection; the change itself was committed and merged.
        for r in ["refs/forum/evil", "refs/forum/evil2"] {
            assert_eq!(repo.git_ok(&["for-each-ref", r]), "", "{r}");
        }
        assert!(!repo.git_dir().join("refs/forum/evil").exists());
        assert!(!repo.path().join("outside.txt").exists());
        assert!(!home.path().join("dropped").exists());
        listener.set_nonblocking(true).unwrap();
        assert_eq!(
            listener.accept().unwrap_err().kind(),
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
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let p = probe(&repo, home.path(), port);
    let m = model(&repo, &p);
    let o = submit(&repo, home.path(), &["--sandbox", "--sandbox-net"], &m);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let result = &payloads(&repo, "result")[0].1;
    let out = result["output"].as_str().unwrap();
    assert!(
        out.contains("net=connected") && out.contains("refs=denied"),
        "{out}"
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
    let p = probe(&repo, home.path(), 9);
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
