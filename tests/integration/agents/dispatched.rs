//! A real agent CLI as a dispatched worker's seat: `git forum worker` in a clone of the
//! project's remote, its worker seat the `aider` preset in its own `.forum/runtime.toml`, its
//! sandbox on, does the task `git forum submit --work --dispatch` sent through a real
//! `nats-server`; the writer merges the change, and the run branch passes the project's check.

use std::path::Path;
use std::process::{Command, Stdio};

use super::fixture::Fixture;
use super::forum::{MODEL, orchestrator};
use super::install::{Cli, user_install};
use super::model::{ModelServer, Usage};
use crate::dispatch_nats::{Killed, NatsServer};

/// `git forum` in `dir` with the fixture's environment: its `HOME`, the project's venv and the
/// agent's folder (`program_dir`) on `PATH`, no user git configuration.
fn forum(f: &Fixture, dir: &Path, program_dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_git-forum"));
    let path = format!(
        "{}:{}:/usr/local/bin:/usr/bin:/bin",
        f.venv.join("bin").display(),
        program_dir.display()
    );
    cmd.current_dir(dir).env_clear();
    super::forum::fixture_env(&mut cmd, f, &path).stdin(Stdio::null());
    cmd
}

/// `git ARGS` in `dir`, which must succeed; its output, trimmed.
fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[test]
fn heavy_aider_as_a_dispatched_workers_seat_fixes_the_fixture_and_the_writer_merges_it() {
    let f = Fixture::new();
    let Some(aider) = user_install(Cli::Aider, &f.home) else {
        return;
    };
    let program_dir = aider.parent().unwrap().to_path_buf();
    let model = ModelServer::start(f.script(Usage {
        input: 800,
        output: 120,
    }));
    let nats = NatsServer::start();
    // The project's remote, and a worker's clone of it with its own runtime config: the
    // worker seat is the aider preset.
    let bare = f.dir().join("origin.git");
    git(f.dir(), &["init", "-q", "--bare", "origin.git"]);
    git(
        &f.project,
        &["remote", "add", "origin", &bare.display().to_string()],
    );
    git(&f.project, &["push", "-q", "origin", "main"]);
    let clone = f.dir().join("worker-clone");
    git(f.dir(), &["clone", "-q", "origin.git", "worker-clone"]);
    std::fs::create_dir_all(clone.join(".forum")).unwrap();
    std::fs::write(
        clone.join(".forum/runtime.toml"),
        format!("[seats]\nworker = {{ aider = true, model = \"openai/{MODEL}\" }}\n"),
    )
    .unwrap();
    std::fs::write(clone.join(".git/info/exclude"), ".forum/\n").unwrap();
    let log = std::fs::File::create(f.dir().join("worker.log")).unwrap();
    let _worker = Killed(
        forum(&f, &clone, &program_dir)
            .args(["worker", "--nats", &nats.url(), "--remote", "origin"])
            .args(["--name", "aider-worker", "--lease", "60"])
            .args(["--aider", "--model", &format!("openai/{MODEL}")])
            .env("OPENAI_API_BASE", model.v1())
            .env("OPENAI_API_KEY", "sk-loopback-aider")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    // The writer: the scripted orchestrator plans one task and passes it.
    std::fs::create_dir_all(f.project.join(".forum")).unwrap();
    std::fs::write(
        f.project.join(".forum/runtime.toml"),
        format!("[runtime.default]\ncmd = \"{}\"\n", orchestrator(f.dir())),
    )
    .unwrap();
    std::fs::write(f.project.join(".git/info/exclude"), ".forum/\n").unwrap();
    let mut submit = forum(&f, &f.project, &program_dir);
    submit
        .args(["submit", "--json", "--work", "--dispatch", &nats.url()])
        .args(["--check", "python -m unittest -q", "fix add in calc.py"]);
    // At most three minutes, then stopped with what it said.
    let (ok, j, err) = crate::dispatch_nats::finish(crate::dispatch_nats::spawned(submit));
    let worker_said = std::fs::read_to_string(f.dir().join("worker.log")).unwrap_or_default();
    let context = format!(
        "stderr: {err}\nworker: {worker_said}\nrequests:\n{}",
        model.summary()
    );
    assert!(ok, "{context}");
    assert!(
        j["answer"]
            .as_str()
            .unwrap_or_default()
            .contains("T1: merged"),
        "{j}\n{context}"
    );
    // aider called the model from the worker, under the worker's sandbox.
    assert!(
        !model.requests_to("/v1/chat/completions").is_empty(),
        "{context}"
    );
    let result = super::forum::payloads(&f, "result")
        .into_iter()
        .find(|p| p.get("worker").is_some())
        .unwrap_or_else(|| panic!("no task result\n{context}"));
    assert_eq!(result["worker"], "aider-worker", "{result}");
    assert_ne!(result["confinement"], "unconfined", "{result}");
    // The run branch holds the fix, and the project's check passes on it.
    git(
        &f.project,
        &["checkout", "-q", "forum/run-0", "--", "calc.py"],
    );
    assert!(
        f.fixed(),
        "calc.py on the run branch: {}\n{context}",
        f.calc()
    );
    assert!(f.passes(), "{context}");
    let v = forum(&f, &f.project, &program_dir)
        .args(["verify", "--deep"])
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));
}
