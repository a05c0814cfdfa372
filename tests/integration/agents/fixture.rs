//! The project an agent fixes: a small Python project in a git repository with one commit,
//! whose `add` subtracts, and a stdlib `unittest` test that fails until it is fixed. The test
//! imports `calc_cases`, a module that lives only in the project's own venv under a temporary
//! `HOME` (`$HOME/.venvs/calc`), so the check passes only when that venv is the Python in use:
//! what shows that a sandbox binds the project's own environment.
//!
//! Everything lives in one temporary directory under the target's own temporary folder, not
//! under `/tmp`: Codex refuses a `CODEX_HOME` under `/tmp`, and its home is `$HOME/.codex`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::model::{Outcome, Script, Usage};

/// The file the fix changes.
pub const FILE: &str = "calc.py";
const BROKEN: &str = "def add(a, b):\n    return a - b\n";
const FIXED: &str = "def add(a, b):\n    return a + b\n";
const OLD_LINE: &str = "    return a - b";
const NEW_LINE: &str = "    return a + b";
const TEST: &str = "import unittest\n\nimport calc_cases\nfrom calc import add\n\n\n\
class AddTest(unittest.TestCase):\n    def test_cases(self):\n        \
for (a, b), want in calc_cases.CASES:\n            self.assertEqual(add(a, b), want)\n\n\n\
if __name__ == \"__main__\":\n    unittest.main()\n";
const CASES: &str = "CASES = [((2, 3), 5), ((-1, 1), 0), ((10, 0), 10)]\n";

/// The fixture: a temporary `HOME` holding the venv, and the project.
pub struct Fixture {
    dir: tempfile::TempDir,
    /// The temporary `HOME` (`.venvs/calc` is the project's venv).
    pub home: PathBuf,
    /// The project: a git repository with `calc.py` and `test_calc.py` in one commit.
    pub project: PathBuf,
    /// `$HOME/.venvs/calc`.
    pub venv: PathBuf,
}

impl Fixture {
    /// Builds the project, its commit and its venv.
    pub fn new() -> Fixture {
        let dir = tempfile::Builder::new()
            .prefix("agent-fixture-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .expect("fixture dir");
        let home = dir.path().join("home");
        let project = dir.path().join("calc");
        let venv = home.join(".venvs/calc");
        std::fs::create_dir_all(&home).expect("home");
        std::fs::create_dir_all(&project).expect("project");
        std::fs::write(project.join(FILE), BROKEN).expect("calc.py");
        std::fs::write(project.join("test_calc.py"), TEST).expect("test_calc.py");
        let f = Fixture {
            dir,
            home,
            project,
            venv,
        };
        f.git(&["init", "-q", "-b", "main"]);
        f.git(&["add", "."]);
        f.git(&["commit", "-q", "-m", "calc: add, and its failing test"]);
        f.make_venv();
        f
    }

    /// The fixture's own temporary directory (for anything else a test puts beside it).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn git(&self, args: &[&str]) -> Output {
        let o = Command::new("git")
            .args([
                "-c",
                "user.name=Fixture",
                "-c",
                "user.email=fixture@example.invalid",
            ])
            .args(args)
            .current_dir(&self.project)
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("run git");
        assert!(
            o.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        o
    }

    fn make_venv(&self) {
        let o = Command::new("python3")
            .args(["-m", "venv", "--without-pip"])
            .arg(&self.venv)
            .output()
            .expect("python3 -m venv (python3 is needed)");
        assert!(
            o.status.success(),
            "python3 -m venv: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let lib = std::fs::read_dir(self.venv.join("lib"))
            .expect("venv lib")
            .filter_map(Result::ok)
            .map(|e| e.path().join("site-packages"))
            .find(|p| p.is_dir())
            .expect("the venv's site-packages");
        std::fs::write(lib.join("calc_cases.py"), CASES).expect("calc_cases.py");
    }

    /// The project's check: the venv's Python runs the tests in the project.
    pub fn check(&self) -> Output {
        Command::new(self.venv.join("bin/python"))
            .args(["-m", "unittest", "-q"])
            .current_dir(&self.project)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", "/usr/bin:/bin")
            // No bytecode cache: a fix of the same size in the same second as the last run
            // would otherwise be read from a stale one.
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
            .expect("run the venv's python")
    }

    /// Whether [`Fixture::check`] passes.
    pub fn passes(&self) -> bool {
        self.check().status.success()
    }

    /// The project's `calc.py` as it is now.
    pub fn calc(&self) -> String {
        std::fs::read_to_string(self.project.join(FILE)).expect("read calc.py")
    }

    /// Whether `calc.py` holds the fix.
    pub fn fixed(&self) -> bool {
        self.calc() == FIXED
    }

    /// The scripted correct fix of this project, at `usage` tokens a reply.
    pub fn script(&self, usage: Usage) -> Script {
        Script {
            root: self.project.clone(),
            file: FILE.to_string(),
            after: FIXED.to_string(),
            old: OLD_LINE.to_string(),
            new: NEW_LINE.to_string(),
            answer: "Fixed add in calc.py: it subtracted.".to_string(),
            usage,
            busy_turns: 0,
            outcome: Outcome::Fix,
        }
    }
}

#[test]
fn the_fixture_fails_with_its_venv_and_cannot_import_its_cases_without_it() {
    let f = Fixture::new();
    let before = f.check();
    let err = String::from_utf8_lossy(&before.stderr);
    assert!(!before.status.success(), "fails before the fix: {err}");
    assert!(err.contains("AssertionError"), "fails on the sum: {err}");
    // The system Python has no calc_cases: the check needs the project's venv.
    // By its path: a bare name could be found on this process's PATH (a pyenv shim there
    // picks its Python by its own rules).
    let python = ["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
        .expect("a system python3");
    let system = Command::new(python)
        .args(["-m", "unittest", "-q"])
        .current_dir(&f.project)
        .env_clear()
        .env("HOME", &f.home)
        .env("PATH", "/usr/bin:/bin")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3");
    let serr = String::from_utf8_lossy(&system.stderr);
    assert!(serr.contains("No module named 'calc_cases'"), "{serr}");
    std::fs::write(f.project.join(FILE), FIXED).expect("write the fix");
    assert!(f.passes(), "{:?}", f.check());
    assert!(f.fixed());
}
