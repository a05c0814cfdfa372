//! `scripts/quickstart`, piece by piece (it defines them when sourced): the model's port is a
//! free one when 18080 is taken, and git forum is installed under the root README's Install
//! names, with `cargo` replaced by a stub on `PATH` that records its arguments and puts the
//! built binary where a real install would.

use std::path::{Path, PathBuf};
use std::process::Command;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/quickstart")
}

/// `bash -c` with the script sourced, then `body`.
fn sourced(body: &str) -> Command {
    let mut c = Command::new("bash");
    c.arg("-c")
        .arg(format!(". \"$1\" && {body}"))
        .arg("quickstart-test")
        .arg(script());
    c
}

fn stdout_of(mut c: Command) -> String {
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[test]
fn the_quickstart_picks_a_free_port_when_the_usual_one_is_taken() {
    // Held here for the whole test (or already held by another program: taken either way).
    let _held = std::net::TcpListener::bind("127.0.0.1:18080");
    let port: u16 = stdout_of(sourced("free_port 18080")).parse().unwrap();
    assert_ne!(port, 18080);
    // The port it gave can be bound.
    drop(std::net::TcpListener::bind(("127.0.0.1", port)).expect("a free port"));
    // A port nothing holds is kept as it is.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let p = free.local_addr().unwrap().port();
    drop(free);
    let got: u16 = stdout_of(sourced(&format!("free_port {p}")))
        .parse()
        .unwrap();
    assert_eq!(got, p);
}

#[test]
fn the_quickstart_installs_where_the_readme_install_says() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    assert!(
        readme.contains("cargo install --locked --path . --root ~/.local")
            && readme.contains("git forum man --out ~/.local/share/man/man1"),
        "README's Install names ~/.local"
    );
    let home = tempfile::tempdir().unwrap();
    let stub = tempfile::tempdir().unwrap();
    let log = stub.path().join("cargo-args");
    // The stub installs by copying the built binary to ROOT/bin, as cargo install would.
    std::fs::write(
        stub.path().join("cargo"),
        format!(
            "#!/bin/sh\necho \"$@\" > '{}'\nwhile [ $# -gt 0 ]; do [ \"$1\" = --root ] && root=$2; shift; done\nmkdir -p \"$root/bin\" && cp '{}' \"$root/bin/git-forum\"\n",
            log.display(),
            env!("CARGO_BIN_EXE_git-forum")
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        stub.path().join("cargo"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let mut c = sourced("install_git_forum \"$(install_root)\" && command -v git-forum");
    c.current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("HOME", home.path())
        .env_remove("CARGO_INSTALL_ROOT")
        .env(
            "PATH",
            format!(
                "{}:{}",
                stub.path().display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        );
    let found = stdout_of(c);
    let root = home.path().join(".local");
    assert_eq!(
        std::fs::read_to_string(&log).unwrap().trim(),
        format!("install --locked --path . --root {}", root.display())
    );
    assert_eq!(found, root.join("bin/git-forum").display().to_string());
    assert!(root.join("share/man/man1/git-forum.1").is_file());
}
