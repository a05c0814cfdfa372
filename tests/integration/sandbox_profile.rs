//! The sandbox's profile, through the binary: a worker installed under the user's `HOME` (not
//! on any system path) is found and runs confined, the project's venv, also under `HOME`, is
//! the one the checks use (its module imports), the record lists what was bound, and a check
//! that misses a program says what the sandbox showed and how to show more.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::Value as J;

use crate::common::{Repo, on_each_kind};
use crate::sandbox::bwrap_works;
use crate::work_run::{payloads, setup};

fn exe(p: &Path, body: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, body).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A home with the agent installed in `~/tools/bin/fixer` and the project's venv in
/// `~/.venvs/calc`, whose site-packages holds the module the project's test imports. Returns
/// the `PATH` of a shell with that venv activated.
fn home_with_agent_and_venv(home: &Path) -> String {
    let plan = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"make add in calc.py add","depends_on":[],"done_when":["the tests pass"]}]}"#;
    exe(
        &home.join("tools/bin/fixer"),
        &format!(
            "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{plan}' ;;\n  *\"Decide whether to ship\"*) echo '{{\"decision\":\"merge\",\"reason\":\"scripted\"}}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'Fixed calc.' ;;\n  *) sed -i 's/return a - b/return a + b/' calc.py; echo fixed ;;\nesac\n"
        ),
    );
    let venv = home.join(".venvs/calc");
    let ok = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(ok.success());
    let site = std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path()
        .join("site-packages");
    std::fs::write(site.join("calchelper.py"), "EXPECTED = 5\n").unwrap();
    format!(
        "{}:{}:{}",
        venv.join("bin").display(),
        home.join("tools/bin").display(),
        std::env::var("PATH").unwrap()
    )
}

/// The project's test imports the venv's module, so it passes only in that venv.
fn project_needs_the_venv(repo: &Repo) {
    setup(repo);
    std::fs::write(
        repo.path().join("test_calc.py"),
        "import unittest\n\nimport calc\nimport calchelper\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(2, 3), calchelper.EXPECTED)\n",
    )
    .unwrap();
    repo.git_ok(&["commit", "-qam", "the test needs the venv"]);
}

#[test]
fn an_agent_and_a_venv_under_home_are_found_and_the_record_lists_them() {
    assert!(bwrap_works(), "bubblewrap must work on this machine");
    on_each_kind(|repo| {
        project_needs_the_venv(repo);
        let home = tempfile::tempdir().unwrap();
        let path = home_with_agent_and_venv(home.path());
        let venv = home.path().join(".venvs/calc");
        let o = repo
            .forum()
            .env("HOME", home.path())
            .env("PATH", &path)
            .env("VIRTUAL_ENV", &venv)
            .args([
                "submit",
                "--json",
                "--work",
                "--sandbox",
                "--check",
                "python -m unittest -q",
                "--cmd",
                "fixer",
                "fix calc",
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{err}");
        let checks = payloads(repo, "check");
        assert!(checks.iter().all(|(_, c)| c["ok"] == true), "{checks:?}");
        let sandbox = &payloads(repo, "request")[0].1["work"]["sandbox"];
        assert_eq!(sandbox["confined"], true, "{sandbox}");
        let bound: Vec<&str> = sandbox["bound"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_str().unwrap())
            .collect();
        let tools = home.path().join("tools").canonicalize().unwrap();
        assert!(bound.contains(&venv.to_str().unwrap()), "{bound:?}");
        assert!(bound.contains(&tools.to_str().unwrap()), "{bound:?}");
        // The home itself was never bound.
        let h = home.path().canonicalize().unwrap();
        assert!(!bound.iter().any(|b| h.starts_with(b)), "{bound:?}");
        let change = &payloads(repo, "change")[0].1;
        assert!(change["commit"].is_string(), "{change}");
    });
}

#[test]
fn a_check_that_misses_a_program_says_what_the_sandbox_showed() {
    assert!(bwrap_works(), "bubblewrap must work on this machine");
    let repo = Repo::new("sha1");
    project_needs_the_venv(&repo);
    let home = tempfile::tempdir().unwrap();
    let path = home_with_agent_and_venv(home.path());
    let o = repo
        .forum()
        .env("HOME", home.path())
        .env("PATH", &path)
        .args([
            "submit",
            "--json",
            "--work",
            "--sandbox",
            "--check",
            "no-such-tool-xyz --run",
            "--cmd",
            "fixer",
            "fix calc",
        ])
        .output()
        .unwrap();
    assert_ne!(o.status.code(), Some(0));
    let checks = payloads(&repo, "check");
    let out = checks[0].1["output"].as_str().unwrap();
    assert!(
        out.contains("no-such-tool-xyz was not found inside the sandbox")
            && out.contains("--sandbox-read"),
        "{out}"
    );
    let _: J = serde_json::from_slice(&o.stdout).unwrap();
}
