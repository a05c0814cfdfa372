//! Dispatch over TLS: a server that speaks only TLS, with a certificate signed by a CA of the
//! test's own (made with the `openssl` command), reached by the writer through `[dispatch] url`
//! and `tls_ca` in `.forum/runtime.toml` and by a worker through `--nats-ca`; a client that does
//! not trust the CA is refused in one line and writes nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{Repo, on_each_kind};
use crate::dispatch_nats::{
    NatsServer, TWO, clone, finish, logs, model, shared, spawned, task_results, worker_at,
};

/// `openssl ARGS` in `dir`, which must succeed.
fn openssl(dir: &Path, args: &[&str]) {
    let o = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl is installed (.ci/run installs Debian's)");
    assert!(
        o.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A CA and a certificate it signed for 127.0.0.1, in `dir`: (the CA's, the server's, its key).
fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let rsa = ["-newkey", "rsa:2048", "-nodes"];
    let mut ca = vec!["req", "-x509"];
    ca.extend(rsa);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=forum test CA",
    ]);
    openssl(dir, &ca);
    let mut req = vec!["req"];
    req.extend(rsa);
    req.extend([
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    openssl(dir, &req);
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    );
    (
        dir.join("ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
    )
}

/// `submit --work` with no `--dispatch`: where to send the tasks comes from the runtime config.
fn submit_by_config(repo: &Repo, cmd: &str) -> crate::dispatch_nats::Submitted {
    let mut c = repo.forum();
    c.args(["submit", "--work", "--no-sandbox", "--check", "true"])
        .args(["--cmd", cmd, "--json", "write the files"]);
    spawned(c)
}

#[test]
fn a_run_dispatched_over_tls_merges_and_a_client_that_does_not_trust_the_server_is_one_line() {
    let certs = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificates(certs.path());
    on_each_kind(|repo| {
        let server = NatsServer::with_tls(&cert, &key);
        let url = server.url().replace("nats://", "tls://");
        let (_bare, remote) = shared(repo);
        let m = model(repo, TWO);
        let runtime = repo.path().join(".forum/runtime.toml");
        std::fs::create_dir_all(runtime.parent().unwrap()).unwrap();
        // Not trusted: the server's certificate is refused, in one line, before anything is
        // written.
        std::fs::write(&runtime, format!("[dispatch]\nurl = \"{url}\"\n")).unwrap();
        let (ok, _, err) = finish(submit_by_config(repo, &m));
        assert!(!ok);
        let line = err.trim();
        assert_eq!(line.lines().count(), 1, "{err}");
        assert!(
            line.contains(&url) || line.contains("TLS") || line.contains("certificate"),
            "{err}"
        );
        let refs = repo.git_ok(&["for-each-ref", "refs/forum/ledgers/"]);
        assert_eq!(refs, "", "nothing written: {refs}");
        // Trusted through tls_ca, and by the worker through --nats-ca.
        std::fs::write(
            &runtime,
            format!(
                "[dispatch]\nurl = \"{url}\"\ntls_ca = \"{}\"\n",
                ca.display()
            ),
        )
        .unwrap();
        let c = clone(&remote);
        let _w = worker_at(
            repo,
            c.path(),
            &url,
            &m,
            &["--no-sandbox", "--nats-ca", &ca.display().to_string()],
        );
        let (ok, _, err) = finish(submit_by_config(repo, &m));
        assert!(ok, "{err}\n{}", logs(&[&c]));
        assert_eq!(task_results(repo).len(), 2, "{err}");
        assert_eq!(
            repo.git_ok(&["rev-list", "--count", "main..forum/run-0"]),
            "2"
        );
        repo.forum_ok(&["verify", "--deep"]);
    });
}
