//! Spend ceilings stop the real agents in the middle of their work. Each agent fixes the
//! fixture as git forum's worker against a script worth 10,000 tokens (four model turns of
//! 2,500, a busy turn or two before the fix), so a ceiling can only hold if something stops the
//! agent between its turns: git forum's metering forwarder, which counts each answer's usage as
//! it passes, refuses the next request once the allowance is used, and stops the agent's whole
//! process tree when the answer that used it ends. The run exits 4, `stopped_on_ceiling`; the
//! task's result says what the forwarder counted and the overshoot past what the agent was
//! allowed, which is at most the one turn in flight.
//!
//! The plan is made first, with no ceiling (`--gate-waves 0`, then `gate approve`): a planner's
//! reservation (its prompt's bytes as tokens plus its output cap) does not fit in 2,000 tokens.
//! The work runs under the ceiling in `git forum resume`, which takes a fresh allowance.
//!
//! No process is left: the agent is given a marker variable (through the seat's `env`), the
//! loopback model lists the processes that carry it each time a request arrives (the agent is
//! certainly running then), and after the run no process carries it and none of the process
//! groups seen has a member.
//!
//! The turns: Claude Code reads the file twice before its edit (`CEILING_USAGE` and one busy
//! read), Codex runs `cat` twice, and aider is sent three files that do not compile, each of
//! which its lint check answers with another request
//! (`aider::heavy_aider_asked_again_by_its_lint_check_spends_four_turns_on_the_ceiling_script`
//! shows the four turns unstopped).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::claude::CEILING_USAGE;
use super::fixture::Fixture;
use super::forum::{MODEL, forum_json, orchestrator, payloads};
use super::model::{ModelServer, Script};
use super::{agent_cli, timed};

/// The variable whose value marks every process of one test's agent.
const MARKER: &str = "FORUM_CEILING_MARKER";

/// The seat's prices for the dollar ceiling (per million tokens): a 2,500-token turn of 2,000
/// in and 500 out costs $0.0135.
const PRICE_IN: f64 = 3.0;
const PRICE_OUT: f64 = 15.0;

/// A process seen carrying the marker: its pid, process group and name.
type Seen = (u32, u32, String);

/// The processes whose environment holds `entry` (`NAME=VALUE`).
fn marked(entry: &str) -> Vec<Seen> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        // A process may end between the listing and the read: it is then not there.
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if !env.split(|b| *b == 0).any(|v| v == entry.as_bytes()) {
            continue;
        }
        if let Some((pgid, name)) = stat(pid) {
            out.push((pid, pgid, name));
        }
    }
    out
}

/// The process group and name of `pid` (from `/proc/PID/stat`: `pid (name) state ppid pgrp`).
fn stat(pid: u32) -> Option<(u32, String)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = s.find('(')?;
    let close = s.rfind(')')?;
    let name = s[open + 1..close].to_string();
    let pgid = s[close + 1..].split_whitespace().nth(2)?.parse().ok()?;
    Some((pgid, name))
}

/// Whether `pid` has exited and waits only to be reaped (a zombie holds no memory and runs
/// nothing; one whose parent died is reaped by init in its own time).
fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rfind(')')
            .and_then(|i| s[i + 1..].split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X")
    })
}

/// The live processes in process group `pgid`.
fn members(pgid: u32) -> Vec<Seen> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter_map(|pid| stat(pid).map(|(g, name)| (pid, g, name)))
        .filter(|(pid, g, _)| *g == pgid && !zombie(*pid))
        .collect()
}

/// One agent as git forum's worker seat.
struct Agent {
    /// The preset's key (`claude`, `codex`, `aider`).
    preset: &'static str,
    /// The variables its seat passes on (the preset's own, then the marker).
    env: &'static [&'static str],
    /// Busy turns before the fix: four turns in all.
    busy_turns: u32,
}

const CLAUDE: Agent = Agent {
    preset: "claude",
    // Not ANTHROPIC_MODEL: the value of a variable a seat passes is redacted as a secret,
    // and the model is named by the seat.
    env: &["ANTHROPIC_API_KEY", MARKER],
    busy_turns: 1,
};

const CODEX: Agent = Agent {
    preset: "codex",
    env: &["OPENAI_API_KEY", MARKER],
    busy_turns: 2,
};

const AIDER: Agent = Agent {
    preset: "aider",
    env: &["OPENAI_API_KEY", MARKER],
    busy_turns: 3,
};

impl Agent {
    /// The variables that point it at `server`.
    fn vars(&self, server: &ModelServer) -> Vec<(&'static str, String)> {
        match self.preset {
            "claude" => vec![
                ("ANTHROPIC_BASE_URL", server.url()),
                ("ANTHROPIC_API_KEY", "sk-ant-loopback".into()),
                ("ANTHROPIC_MODEL", MODEL.into()),
            ],
            "codex" => vec![
                ("OPENAI_BASE_URL", server.v1()),
                ("OPENAI_API_KEY", "sk-loopback-codex".into()),
            ],
            _ => vec![
                ("OPENAI_API_BASE", server.v1()),
                ("OPENAI_API_KEY", "sk-loopback-aider".into()),
            ],
        }
    }

    /// The fixture's script for it: four turns of 2,500 tokens.
    fn script(&self, f: &Fixture) -> Script {
        let mut script = f.script(CEILING_USAGE);
        script.busy_turns = self.busy_turns;
        if self.preset == "claude" {
            // Claude Code edits in the worktree git forum makes, which it names itself.
            script.root = Default::default();
        }
        script
    }
}

/// What one run under a ceiling left behind.
struct Ceilinged {
    f: Fixture,
    server: ModelServer,
    out: Output,
    /// Every process seen carrying the marker while the model answered, by pid.
    seen: BTreeMap<u32, (u32, String)>,
    /// The marker, `NAME=VALUE`.
    entry: String,
    /// `git forum` as the run was driven: its `PATH` and the agent's variables.
    path: String,
    vars: Vec<(&'static str, String)>,
}

impl Ceilinged {
    fn context(&self) -> String {
        format!(
            "exit {:?}\nstdout: {}\nstderr: {}\nthe model saw:\n{}\nresults: {:?}",
            self.out.status.code(),
            String::from_utf8_lossy(&self.out.stdout),
            String::from_utf8_lossy(&self.out.stderr),
            self.server.summary(),
            payloads(&self.f, "result")
        )
    }

    /// `git forum ARGS` in the project, with the environment the run had.
    fn forum(&self, args: &[&str]) -> Output {
        let f = &self.f;
        let mut cmd = timed(600, Path::new(env!("CARGO_BIN_EXE_git-forum")));
        cmd.current_dir(&f.project);
        super::forum::fixture_env(&mut cmd, f, &self.path).args(args);
        let (name, value) = self.entry.split_once('=').unwrap();
        cmd.env(name, value);
        for (k, v) in &self.vars {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    /// The seq of the run's request.
    fn run_seq(&self) -> u64 {
        let log = forum_json(&self.f, &["log"]);
        log.as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["kind"] == "request")
            .filter_map(|e| e["seq"].as_u64())
            .min()
            .unwrap_or_else(|| panic!("no request in the ledger: {log}"))
    }

    /// `git forum [--ledger LEDGER] replay RUN --strict --json`: its exit code and report.
    /// The command unshares the network itself, as it does for every replay.
    fn replay(&self, ledger: Option<&str>) -> (Option<i32>, Value) {
        let run = self.run_seq().to_string();
        let mut args = ledger.map_or(vec![], |l| vec!["--ledger", l]);
        args.extend(["replay", &run, "--strict", "--json"]);
        let o = self.forum(&args);
        let r = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
            panic!(
                "replay --json: {e}\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        });
        (o.status.code(), r)
    }

    /// The seq and body of each entry of `kind` in the ledger, oldest first.
    fn entries(&self, kind: &str) -> Vec<(u64, Value)> {
        let out = self.f.dir().join("export");
        let _ = std::fs::remove_dir_all(&out);
        let o = self.forum(&["export", out.to_str().unwrap()]);
        assert!(o.status.success(), "export: {o:?}");
        crate::spend::read_export(&out)
            .into_iter()
            .filter(|(e, _)| e["kind"] == kind)
            .map(|(e, b)| (e["seq"].as_u64().unwrap(), b))
            .collect()
    }

    /// The ledger with `edit` applied to the body of entry `seq`, re-hashed so it verifies,
    /// imported as the ledger `forged`.
    fn import_forged(&self, seq: u64, edit: impl Fn(&mut Value)) {
        let out = self.f.dir().join("export");
        let _ = std::fs::remove_dir_all(&out);
        let o = self.forum(&["export", out.to_str().unwrap()]);
        assert!(o.status.success(), "export: {o:?}");
        let forged = crate::strict_replay::rehashed(crate::spend::read_export(&out), |at, b| {
            if at == seq {
                edit(b);
            }
        });
        let dir = self.f.dir().join(format!("forged-{seq}"));
        crate::strict_replay::export(&forged, &dir);
        let dir = dir.to_str().unwrap();
        for args in [
            &["--ledger", "forged", "import", dir][..],
            &["--ledger", "forged", "verify"],
        ] {
            let o = self.forum(args);
            assert!(o.status.success(), "{args:?}: {o:?}");
        }
    }

    /// The stopped run replays strictly, without a network, with no divergence.
    fn replays(&self) {
        let (code, r) = self.replay(None);
        crate::strict_replay_work::no_divergence(code, &r);
        let net = r["network"].as_str().unwrap_or("");
        assert!(
            ["bwrap", "unshare -rn", "unshare -n"].contains(&net),
            "replayed with no network namespace: {r}"
        );
    }

    /// The budget stop after the forwarder's, edited to name the other ceiling in a copy of
    /// the ledger, is the divergence at its seq.
    fn edited_stop_diverges(&self, other: &str) {
        let (at, stop) = self
            .entries("budget")
            .pop()
            .unwrap_or_else(|| panic!("no budget stop\n{}", self.context()));
        assert_ne!(stop["ceiling"], other, "{stop}");
        self.import_forged(at, |b| b["ceiling"] = other.into());
        let (code, r) = self.replay(Some("forged"));
        assert_eq!(code, Some(1), "{r}");
        assert_eq!(r["divergence"]["seq"], at, "{r}");
    }

    /// T1's result.
    fn result(&self) -> Value {
        payloads(&self.f, "result")
            .into_iter()
            .find(|r| r["id"] == "T1")
            .unwrap_or_else(|| panic!("no result of T1\n{}", self.context()))
    }
}

/// Runs `agent` as the worker of `git forum submit --work --sandbox` in a fresh fixture, with
/// `flags` (the ceiling) and `seat` added to the worker seat's table, the model listing the
/// marked processes at each request.
fn under_ceiling(agent: &Agent, program: &Path, flags: &[&str], seat: &str) -> Ceilinged {
    let f = Fixture::new();
    let entry = format!(
        "{MARKER}=ceiling-{}-{}-{}",
        agent.preset,
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let seen: Arc<Mutex<BTreeMap<u32, (u32, String)>>> = Arc::default();
    let observer = {
        let (entry, seen) = (entry.clone(), Arc::clone(&seen));
        Arc::new(move |_: &str| {
            let mut s = seen.lock().unwrap();
            for (pid, pgid, name) in marked(&entry) {
                s.insert(pid, (pgid, name));
            }
        })
    };
    let server = ModelServer::start_observed(agent.script(&f), observer);
    let forum = f.project.join(".forum");
    std::fs::create_dir_all(&forum).unwrap();
    let model = if agent.preset == "aider" {
        format!("openai/{MODEL}")
    } else {
        MODEL.to_string()
    };
    let env = agent
        .env
        .iter()
        .map(|v| format!("\"{v}\""))
        .collect::<Vec<_>>()
        .join(", ");
    // The orchestrator's calls are capped small, so that its plan fits in a 2,000-token
    // ceiling and what is left goes to the agent.
    std::fs::write(
        forum.join("runtime.toml"),
        format!(
            "[runtime.default]\ncmd = \"{}\"\nmax_tokens = 100\n\n[seats]\nworker = {{ {} = true, model = \"{model}\", env = [{env}]{seat} }}\n",
            orchestrator(f.dir()),
            agent.preset
        ),
    )
    .unwrap();
    std::fs::write(f.project.join(".git/info/exclude"), ".forum/\n").unwrap();
    let path = format!(
        "{}:{}:/usr/local/bin:/usr/bin:/bin",
        f.venv.join("bin").display(),
        program.parent().unwrap().display()
    );
    let vars = agent.vars(&server);
    let mut r = Ceilinged {
        f,
        server,
        out: Output {
            status: Default::default(),
            stdout: Vec::new(),
            stderr: Vec::new(),
        },
        seen: BTreeMap::new(),
        entry,
        path,
        vars,
    };
    let forum = |args: &[&str]| r.forum(args);
    // The plan, with no ceiling; the run pauses before its first wave.
    let planned = forum(&[
        "submit",
        "--json",
        "--work",
        "--sandbox",
        "--no-repo-context",
        "--check",
        "python -m unittest -q",
        "--gate-waves",
        "0",
        "fix add in calc.py",
    ]);
    assert_eq!(
        planned.status.code(),
        Some(8),
        "paused at its gate: {}",
        String::from_utf8_lossy(&planned.stderr)
    );
    let approved = forum(&["gate", "approve"]);
    assert!(approved.status.success(), "{approved:?}");
    // The work, under the ceiling.
    let mut args = vec!["resume", "--json"];
    args.extend(flags);
    r.out = forum(&args);
    r.seen = seen.lock().unwrap().clone();
    r
}

/// What every agent's stopped run must show: exit 4 and `stopped_on_ceiling`, the task failed
/// on the ceiling with the forwarder's count and one turn or less past its allowance, the
/// model asked fewer turns than the script has, and no process left.
fn assert_stopped_mid_run(r: &Ceilinged, ceiling: &str) -> Value {
    let context = r.context();
    assert_eq!(r.out.status.code(), Some(4), "{context}");
    let j: Value = serde_json::from_slice(&r.out.stdout)
        .unwrap_or_else(|e| panic!("the --json answer: {e}\n{context}"));
    assert_eq!(j["exit"]["name"], "stopped_on_ceiling", "{j}\n{context}");
    let result = r.result();
    assert_eq!(result["ok"], false, "{result}");
    assert_eq!(result["error"], "ceiling", "{result}");
    let metered = &result["egress"]["metered"];
    assert_eq!(metered["ceiling"], ceiling, "{result}");
    let turn = CEILING_USAGE.total();
    let spent =
        metered["input_tokens"].as_u64().unwrap() + metered["output_tokens"].as_u64().unwrap();
    // The model was asked fewer turns than the script has: the agent did not run to its end.
    let served = r.server.requests().len() as u64;
    assert!((1..4).contains(&served), "{context}");
    assert_eq!(spent, served * turn, "{result}\n{context}");
    // Its usage is what the forwarder counted, charged to the run.
    assert_eq!(
        result["usage"]["prompt_tokens"], metered["input_tokens"],
        "{result}"
    );
    let output = result["output"].as_str().unwrap_or("");
    assert!(
        output.contains("metering forwarder stopped the agent"),
        "{result}"
    );
    // No process is left of the agent, nor of any process group it ran in. (`timeout` and
    // git forum carry the marker too; the agent is what else does: its CLI, bwrap, node.)
    let agent: Vec<_> = r
        .seen
        .iter()
        .filter(|(_, (_, name))| name != "timeout" && name != "git-forum")
        .collect();
    assert!(
        !agent.is_empty(),
        "the model saw requests, so the agent's processes carried the marker: {:?}\n{context}",
        r.seen
    );
    let left = marked(&r.entry);
    assert!(left.is_empty(), "left running: {left:?}\n{context}");
    let own = stat(std::process::id()).map(|(g, _)| g);
    for (pid, (pgid, name)) in &agent {
        if Some(*pgid) == own {
            continue;
        }
        let m = members(*pgid);
        assert!(
            m.is_empty(),
            "the group {pgid} of {name} ({pid}) still has {m:?}\n{context}"
        );
    }
    eprintln!(
        "{}: {served} of 4 turns served, {spent} tokens metered, overshoot {} tokens (cost overshoot {}), processes seen {:?}",
        result["model"], metered["overshoot_tokens"], metered["overshoot_cost_usd"], r.seen
    );
    result
}

/// The token ceiling: the overshoot is past what the agent was allowed, and at most one turn.
fn assert_token_overshoot(result: &Value) {
    let metered = &result["egress"]["metered"];
    let over = metered["overshoot_tokens"].as_u64().unwrap();
    let allowed = metered["max_tokens"].as_u64().unwrap();
    assert!(allowed <= 2000, "{result}");
    assert!(
        over > 0 && over <= CEILING_USAGE.total(),
        "at most one turn past: {result}"
    );
}

fn token_ceiling(agent: &Agent, var: &str) {
    let Some(program) = agent_cli(var) else {
        return;
    };
    let r = under_ceiling(agent, &program, &["--max-tokens", "2000"], "");
    let result = assert_stopped_mid_run(&r, "tokens");
    assert_token_overshoot(&result);
    r.replays();
    if agent.preset == "claude" {
        r.edited_stop_diverges("max_cost_usd");
    }
}

#[test]
fn heavy_claude_code_is_stopped_mid_run_at_a_2000_token_ceiling() {
    token_ceiling(&CLAUDE, "GIT_FORUM_TEST_CLAUDE");
}

#[test]
fn heavy_codex_is_stopped_mid_run_at_a_2000_token_ceiling() {
    token_ceiling(&CODEX, "GIT_FORUM_TEST_CODEX");
}

#[test]
fn heavy_aider_is_stopped_mid_run_at_a_2000_token_ceiling() {
    token_ceiling(&AIDER, "GIT_FORUM_TEST_AIDER");
}

#[test]
fn heavy_claude_code_is_stopped_mid_run_at_a_dollar_ceiling_priced_at_the_seat() {
    let Some(claude) = agent_cli("GIT_FORUM_TEST_CLAUDE") else {
        return;
    };
    let seat = format!(", price_in_per_mtok = {PRICE_IN}, price_out_per_mtok = {PRICE_OUT}");
    // One turn costs $0.0135: under a $0.02 ceiling the first leaves the agent under it, the
    // second passes it, and the agent is stopped before a third.
    let r = under_ceiling(&CLAUDE, &claude, &["--max-cost-usd", "0.02"], &seat);
    let result = assert_stopped_mid_run(&r, "cost_usd");
    let metered = &result["egress"]["metered"];
    let turn_cost = (2000.0 * PRICE_IN + 500.0 * PRICE_OUT) / 1e6;
    let cost = metered["cost_usd"].as_f64().unwrap();
    let served = r.server.requests().len() as f64;
    assert!((cost - served * turn_cost).abs() < 1e-9, "{result}");
    let over = metered["overshoot_cost_usd"].as_f64().unwrap();
    assert!(over > 0.0 && over <= turn_cost + 1e-9, "{result}");
    assert!(
        metered["max_cost_usd"].as_f64().unwrap() <= 0.02,
        "{result}"
    );
    // Ours is the forwarder's count at the seat's prices.
    let ours = result["usage"]["cost_usd"].as_f64().unwrap();
    assert!((ours - cost).abs() < 1e-9, "{result}");
    r.replays();
    r.edited_stop_diverges("max_tokens");
}

#[test]
fn heavy_claude_code_reports_its_own_cost_beside_ours_and_the_receipt_shows_the_difference() {
    let Some(claude) = agent_cli("GIT_FORUM_TEST_CLAUDE") else {
        return;
    };
    let seat = format!(", price_in_per_mtok = {PRICE_IN}, price_out_per_mtok = {PRICE_OUT}");
    let r = under_ceiling(&CLAUDE, &claude, &[], &seat);
    let context = r.context();
    assert_eq!(r.out.status.code(), Some(0), "{context}");
    let result = r.result();
    let usage = &result["usage"];
    let metered = &result["egress"]["metered"];
    // Ours: the forwarder's count (four turns of 2,500) at the seat's prices.
    assert_eq!(usage["prompt_tokens"], metered["input_tokens"], "{result}");
    assert_eq!(usage["prompt_tokens"], 8000, "{result}");
    assert_eq!(usage["completion_tokens"], 2000, "{result}");
    let ours = usage["cost_usd"].as_f64().unwrap();
    assert!((ours - 4.0 * 0.0135).abs() < 1e-9, "{result}");
    // Claude Code's own: the same tokens, priced at its default rate for a model it does not
    // know.
    let theirs = &usage["agent_reported"];
    assert_eq!(theirs["prompt_tokens"], 8000, "{result}");
    let their_cost = theirs["cost_usd"].as_f64().expect("total_cost_usd");
    assert!(their_cost > 0.0, "{result}");
    let receipt = &serde_json::from_slice::<Value>(&r.out.stdout).unwrap()["receipt"];
    let spend = &receipt["spend"][MODEL];
    assert_eq!(spend["agent_reported"]["tokens"], 10_000, "{receipt}");
    if (their_cost - ours).abs() >= 1e-8 {
        let d = spend["agent_reported"]["cost_difference_usd"]
            .as_f64()
            .unwrap();
        assert!((d - (their_cost - ours)).abs() < 1e-9, "{receipt}");
    }
    eprintln!("ours ${ours:.6}, Claude Code's ${their_cost:.6}");
}
