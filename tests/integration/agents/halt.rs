//! Halt and deadlines stop every process an agent starts, with each real CLI through
//! `git forum submit --work` under the default sandbox. The scripted model makes the agent
//! start long-lived children: Claude Code and Codex run `sh linger.sh` (`sleep 600 & sleep
//! 600`) through their shell tools, allowed by `--allow-cmd`; aider's model turn stalls. Then
//! either `git forum halt` from another process or the worker's deadline (`timeout_seconds`
//! of the seat) ends the run, and afterwards no process carries the marker variable given to
//! the agent (every `/proc/*/environ` is read) and the test process has no descendant left.

use std::path::Path;
use std::process::{Child, Output};
use std::time::Duration;

use crate::common::wait_until;

use super::agent_cli;
use super::fixture::Fixture;
use super::forum::{forum_json, payloads, submit_command};
use super::model::{ModelServer, Outcome, Usage};

/// The variable that marks every process started for the agent.
const MARKER: &str = "AGENT_TREE_MARKER";

/// The script the agent's shell runs: a background child and a foreground one.
const LINGER: &str = "sleep 600 & sleep 600\n";

/// The command the agent runs (and the one `--allow-cmd` allows).
const LINGER_CMD: &str = "sh linger.sh";

/// The worker's deadline in the deadline tests: long enough for a CLI to start under load.
const DEADLINE_SECONDS: u64 = 45;

/// How long the children (or the stalled request) may take to appear.
const START_LIMIT: Duration = Duration::from_secs(120);

/// How long a halted or timed-out run may take to end.
const END_LIMIT: Duration = Duration::from_secs(120);

/// Processes whose environment holds `MARKER=marker`, as `(pid, command line)`.
fn marked(marker: &str) -> Vec<(u32, String)> {
    let want = format!("{MARKER}={marker}");
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        // A process that ended meanwhile, or a zombie, has no environment to read.
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        if env.split(|b| *b == 0).any(|v| v == want.as_bytes()) {
            found.push((pid, cmdline(pid)));
        }
    }
    found
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .replace('\0', " ")
                .trim()
                .to_string()
        })
        .unwrap_or_default()
}

/// Every live descendant of `root`, as `(pid, command line)` (zombies included: a child
/// left unreaped is a leak too).
fn descendants(root: u32) -> Vec<(u32, String)> {
    let mut parent = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                continue;
            };
            // `PID (COMM) STATE PPID ...`; the name may hold spaces and parentheses.
            let Some(ppid) = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            parent.push((pid, ppid));
        }
    }
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for (child, _) in parent.iter().filter(|(_, pp)| *pp == p) {
            out.push((*child, cmdline(*child)));
            frontier.push(*child);
        }
    }
    out
}

/// A fixture whose project holds `linger.sh` in its commit, and a server playing
/// [`Outcome::Linger`] with it.
fn lingering() -> (Fixture, ModelServer) {
    let f = Fixture::new();
    std::fs::write(f.project.join("linger.sh"), LINGER).unwrap();
    let git = |args: &[&str]| {
        let o = std::process::Command::new("git")
            .args(["-c", "user.name=T", "-c", "user.email=t@example.invalid"])
            .args(args)
            .current_dir(&f.project)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {o:?}");
    };
    git(&["add", "linger.sh"]);
    git(&["commit", "-q", "-m", "a helper that lingers"]);
    let mut script = f.script(Usage {
        input: 300,
        output: 60,
    });
    script.root = Default::default();
    script.outcome = Outcome::Linger(LINGER_CMD.into());
    let server = ModelServer::start(script);
    (f, server)
}

/// The worker seat's extra keys: the agent's variables by name (the marker among them), and
/// the deadline when given.
fn seat(preset: &str, deadline: Option<u64>) -> String {
    let names = match preset {
        "claude" => "\"ANTHROPIC_API_KEY\", \"ANTHROPIC_BASE_URL\", \"ANTHROPIC_MODEL\"",
        "codex" => "\"OPENAI_API_KEY\", \"OPENAI_BASE_URL\"",
        _ => "\"OPENAI_API_KEY\", \"OPENAI_API_BASE\"",
    };
    let mut s = format!(", env = [{names}, \"{MARKER}\"]");
    if let Some(d) = deadline {
        s.push_str(&format!(", timeout_seconds = {d}"));
    }
    s
}

/// Starts the run with the agent at `program`, marked with a marker of its own.
fn start(
    f: &Fixture,
    server: &ModelServer,
    preset: &str,
    program: &Path,
    deadline: Option<u64>,
) -> (Child, String) {
    let marker = format!(
        "{preset}-{}-{}",
        std::process::id(),
        f.dir().file_name().unwrap().to_string_lossy()
    );
    let mut env = super::failures::endpoint(preset, server);
    env.push((MARKER, marker.clone()));
    let child = submit_command(
        f,
        preset,
        program.parent(),
        &env,
        &seat(preset, deadline),
        &["--allow-cmd", LINGER_CMD],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    (child, marker)
}

/// Waits until the agent is busy: its two `sleep 600` children are running (Claude Code,
/// Codex), or its model request is out and stalled (aider).
fn wait_busy(preset: &str, server: &ModelServer, marker: &str, child: &mut Child) {
    let what = format!("{preset}'s lingering children or its stalled request");
    wait_until(&what, START_LIMIT, || {
        if let Ok(Some(s)) = child.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            panic!(
                "the run ended ({s}) before {preset} was busy: {err}\nthe model saw:\n{}",
                server.summary()
            );
        }
        if preset == "aider" {
            !server.requests_to("/v1/chat/completions").is_empty()
        } else {
            marked(marker)
                .iter()
                .filter(|(_, c)| c.starts_with("sleep 600"))
                .count()
                >= 2
        }
    });
}

/// Waits for the run to end and asserts that nothing it started is left: no process with the
/// marker, no descendant of the test. Returns the run's output.
fn ended_leaving_nothing(child: Child, marker: &str) -> Output {
    let me = std::process::id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let o = rx
        .recv_timeout(END_LIMIT)
        .unwrap_or_else(|_| {
            panic!(
                "the run did not end within {END_LIMIT:?}; left: {:?}",
                marked(marker)
            )
        })
        .unwrap();
    let left = marked(marker);
    let tree = descendants(me);
    eprintln!("after the run: marked {left:?}, the test's descendants {tree:?}");
    assert!(
        left.is_empty(),
        "processes carrying the agent's marker are left: {left:?}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        tree.is_empty(),
        "the test's process tree is not empty: {tree:?}"
    );
    o
}

/// `git forum halt` while the agent's children run: the run exits 5 (halted) and nothing is
/// left.
fn halted(preset: &str, program: &Path) {
    let (f, server) = lingering();
    let (mut child, marker) = start(&f, &server, preset, program, None);
    wait_busy(preset, &server, &marker, &mut child);
    let before = marked(&marker);
    eprintln!("{preset} busy: {before:?}");
    let report = forum_json(&f, &["halt", "--wait-seconds", "60", "--reason", "test"]);
    assert_eq!(report["stopped"], true, "{report}");
    let o = ended_leaving_nothing(child, &marker);
    assert_eq!(
        o.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        payloads(&f, "halted").iter().any(|h| h["reason"] == "test"),
        "{:?}",
        payloads(&f, "halted")
    );
}

/// The worker's deadline while its children run: the task fails on it, the run exits 13
/// (`timed_out`), and nothing is left.
fn timed_out(preset: &str, program: &Path) {
    let (f, server) = lingering();
    let (mut child, marker) = start(&f, &server, preset, program, Some(DEADLINE_SECONDS));
    wait_busy(preset, &server, &marker, &mut child);
    eprintln!("{preset} busy: {:?}", marked(&marker));
    let o = ended_leaving_nothing(child, &marker);
    let t1 = payloads(&f, "result")
        .into_iter()
        .find(|r| r["id"] == "T1")
        .expect("T1's result");
    eprintln!("{preset} deadline: {}", t1["output"]);
    assert_eq!(
        o.status.code(),
        Some(13),
        "{}\n{t1}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(t1["ok"], false, "{t1}");
    assert!(
        t1["output"].to_string().contains("did not finish within"),
        "{t1}"
    );
}

#[test]
fn heavy_claude_code_halted_leaves_no_process() {
    if let Some(p) = agent_cli("GIT_FORUM_TEST_CLAUDE") {
        halted("claude", &p);
    }
}

#[test]
fn heavy_codex_halted_leaves_no_process() {
    if let Some(p) = agent_cli("GIT_FORUM_TEST_CODEX") {
        halted("codex", &p);
    }
}

#[test]
fn heavy_aider_halted_leaves_no_process() {
    if let Some(p) = agent_cli("GIT_FORUM_TEST_AIDER") {
        halted("aider", &p);
    }
}

#[test]
fn heavy_claude_code_past_its_deadline_leaves_no_process() {
    if let Some(p) = agent_cli("GIT_FORUM_TEST_CLAUDE") {
        timed_out("claude", &p);
    }
}

#[test]
fn heavy_codex_past_its_deadline_leaves_no_process() {
    if let Some(p) = agent_cli("GIT_FORUM_TEST_CODEX") {
        timed_out("codex", &p);
    }
}

#[test]
fn heavy_aider_past_its_deadline_leaves_no_process() {
    if let Some(p) = agent_cli("GIT_FORUM_TEST_AIDER") {
        timed_out("aider", &p);
    }
}
