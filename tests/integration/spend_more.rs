//! Spend through the binary, what the metering promises beyond the ceilings: every model call's usage is
//! witnessed (the reviser's and the pre-ship gate's included, so `summary` adds up to exactly
//! what the endpoint reported), a ceiling that refuses the planner, the synthesis, the reviser
//! or the intent judge stops the run as a ceiling stop (exit 4) that `resume` finishes, `bench`
//! shows tokens and cost per model, and a command worker that prints far past its output cap
//! cannot carry a run past `--max-tokens`.
//!
//! The endpoint is a loopback stub of an OpenAI-compatible chat API that logs the usage it
//! reports for every call, by the role the call plays (read from its schema or prompt).

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value as J, json};

use crate::common::{FORMATS, Repo};
use crate::spend::{entries, read_body};

/// Prompt tokens the stub reports for a call (unless it fills, see [`Stub::fill`]).
const PROMPT_TOKENS: u64 = 100;
/// Completion tokens the stub reports (or the call's cap when lower).
const COMPLETION_TOKENS: u64 = 7;
/// A flagged answer: over 6% filler words, so the delivery floor asks the reviser.
const PADDED: &str = "It is really very basically just simply done, honestly.";

/// What the stub answers and logs.
#[derive(Default)]
struct Script {
    /// The plan's task ids (one task `T1` when empty).
    tasks: Vec<String>,
    /// The synthesis answer ("done" when empty).
    answer: String,
    /// Every task's answer ("done" when empty).
    output: String,
    /// Once: the call of this role reports prompt tokens that bring the stub's reported total
    /// to this many tokens.
    fill: Option<(&'static str, u64)>,
    /// Every call answered: (role, prompt tokens, completion tokens).
    log: Vec<(String, u64, u64)>,
}

/// A loopback chat endpoint (see the module doc). Stopped when dropped.
struct Stub {
    port: u16,
    stop: Arc<AtomicBool>,
    script: Arc<Mutex<Script>>,
    thread: Option<JoinHandle<()>>,
}

impl Stub {
    fn start() -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let script = Arc::new(Mutex::new(Script::default()));
        let thread = {
            let (stop, script) = (stop.clone(), script.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((s, _)) => answer(s, &script),
                        // Kept: the pause of a non-blocking accept loop, which ends when
                        // the stub is stopped (on drop), not a wait for anything to happen.
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        Stub {
            port,
            stop,
            script,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1/chat/completions", self.port)
    }

    fn set(&self, f: impl FnOnce(&mut Script)) {
        f(&mut self.script.lock().unwrap());
    }

    /// The calls answered so far.
    fn log(&self) -> Vec<(String, u64, u64)> {
        self.script.lock().unwrap().log.clone()
    }
}

impl Drop for Stub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one HTTP request's JSON body (bounded by its content-length).
fn read_request(s: &mut TcpStream) -> Option<J> {
    serde_json::from_slice(&read_body(s)?).ok()
}

/// The role a call plays: its schema's name, else what its prompt asks.
fn role(req: &J) -> String {
    if let Some(name) = req["response_format"]["json_schema"]["name"].as_str() {
        return name.to_string();
    }
    let text = req["messages"].to_string();
    if text.contains("Tighten this answer") {
        "reviser".into()
    } else if text.contains("Write the answer to the request from these results") {
        "synthesis".into()
    } else {
        "task".into()
    }
}

fn answer(mut s: TcpStream, script: &Mutex<Script>) {
    let Some(req) = read_request(&mut s) else {
        return;
    };
    let role = role(&req);
    let (content, prompt, completion) = {
        let mut sc = script.lock().unwrap();
        let content = match role.as_str() {
            "plan" => {
                let ids = if sc.tasks.is_empty() {
                    vec!["T1".to_string()]
                } else {
                    sc.tasks.clone()
                };
                let tasks: Vec<J> = ids
                    .iter()
                    .map(|id| json!({"id": id, "agent": "backend", "instruction": format!("write part {id} of calc"), "depends_on": [], "done_when": []}))
                    .collect();
                json!({ "tasks": tasks }).to_string()
            }
            "verdict" => r#"{"decision":"pass","score":0.9,"reason":"ok"}"#.into(),
            "ship" => r#"{"decision":"merge","reason":"the checks pass"}"#.into(),
            "intent_judgment" => r#"{"ok":true,"score":0.9,"reason":"ok"}"#.into(),
            "reviser" => "Done.".into(),
            "synthesis" if !sc.answer.is_empty() => sc.answer.clone(),
            "task" if !sc.output.is_empty() => sc.output.clone(),
            _ => "done".into(),
        };
        let completion = req["max_tokens"]
            .as_u64()
            .map_or(COMPLETION_TOKENS, |m| m.min(COMPLETION_TOKENS));
        let so_far: u64 = sc.log.iter().map(|(_, p, c)| p + c).sum();
        let prompt = match sc.fill {
            Some((r, total)) if r == role => {
                sc.fill = None;
                total - so_far - completion
            }
            _ => PROMPT_TOKENS,
        };
        sc.log.push((role.clone(), prompt, completion));
        (content, prompt, completion)
    };
    let body = json!({
        "model": "stub-model",
        "choices": [{"message": {"content": content}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
    })
    .to_string();
    let _ = write!(
        s,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// A repository whose default runtime is the stub at $1/$2 per million tokens; `extra` is
/// appended to runtime.toml.
fn repo(format: &str, stub: &Stub, extra: &str) -> Repo {
    let repo = Repo::new(format);
    let forum = repo.path().join(".forum");
    std::fs::create_dir_all(&forum).unwrap();
    std::fs::write(
        forum.join("runtime.toml"),
        format!(
            "[runtime.default]\nchat_url = \"{}\"\nmodel = \"stub-model\"\nis_local = true\nprice_in_per_mtok = 1.0\nprice_out_per_mtok = 2.0\n{extra}",
            stub.url()
        ),
    )
    .unwrap();
    repo
}

/// `git forum ARGS --json`: the exit code, stdout as JSON, stderr.
fn run(repo: &Repo, args: &[&str]) -> (Option<i32>, J, String) {
    let mut a = args.to_vec();
    a.push("--json");
    let o = repo.forum().args(&a).output().unwrap();
    (
        o.status.code(),
        serde_json::from_slice(&o.stdout).unwrap_or(J::Null),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

/// The stub's totals: (calls, prompt tokens, completion tokens).
fn totals(log: &[(String, u64, u64)]) -> (u64, u64, u64) {
    log.iter()
        .fold((0, 0, 0), |(n, p, c), (_, x, y)| (n + 1, p + x, c + y))
}

/// `summary --json`'s spend of the stub's model equals what the stub reported, call for call.
fn summary_matches_the_stub(repo: &Repo, stub: &Stub, what: &str) {
    let (calls, prompt, completion) = totals(&stub.log());
    let s = repo.forum_json(&["summary"]);
    let m = &s["spend"]["stub-model"];
    assert_eq!(m["calls"], calls, "{what}: {s}");
    assert_eq!(m["prompt_tokens"], prompt, "{what}: {s}");
    assert_eq!(m["completion_tokens"], completion, "{what}: {s}");
    let cost = m["cost_usd"].as_f64().unwrap();
    let exact = (prompt + 2 * completion) as f64 / 1e6;
    assert!((cost - exact).abs() < 1e-12, "{what}: {cost} vs {exact}");
}

#[test]
fn the_revision_and_judge_calls_witness_their_usage_and_the_summary_adds_up_exactly() {
    for format in FORMATS {
        let stub = Stub::start();
        stub.set(|s| s.answer = PADDED.into());
        let repo = repo(format, &stub, "");
        let (code, _, err) = run(
            &repo,
            &["submit", "--revise", "write the parts of the catalog"],
        );
        assert_eq!(code, Some(0), "{format}: {err}");
        let roles: Vec<String> = stub.log().into_iter().map(|(r, _, _)| r).collect();
        assert!(roles.contains(&"reviser".to_string()), "{roles:?}");
        assert!(roles.contains(&"intent_judgment".to_string()), "{roles:?}");
        let e = entries(&repo);
        let revision = &e.iter().find(|(k, _)| k == "revision").unwrap().1;
        assert_eq!(revision["usage"]["model"], "stub-model", "{revision}");
        assert_eq!(revision["usage"]["completion_tokens"], COMPLETION_TOKENS);
        // Every call the stub answered is one witnessed usage.
        let witnessed = e.iter().filter(|(_, b)| b.get("usage").is_some()).count();
        assert_eq!(witnessed, roles.len(), "{format}: {roles:?}");
        summary_matches_the_stub(&repo, &stub, format);
        repo.forum_ok(&["verify", "--deep"]);
    }
}

/// The scripted worker of a `--work` run: fixes `add` in its worktree.
fn fixer(repo: &Repo) -> String {
    let path = repo.path().join("fixer.sh");
    std::fs::write(
        &path,
        "#!/bin/sh\nsed -i 's/return a - b/return a + b/' calc.py; echo 'fixed add'\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn a_work_run_witnesses_the_pre_ship_gates_usage_and_the_summary_adds_up_exactly() {
    for format in FORMATS {
        let stub = Stub::start();
        let repo = Repo::new(format);
        crate::work_run::setup(&repo);
        let worker = fixer(&repo);
        let forum = repo.path().join(".forum");
        std::fs::create_dir_all(&forum).unwrap();
        std::fs::write(
            forum.join("runtime.toml"),
            format!(
                "[runtime.default]\nchat_url = \"{}\"\nmodel = \"stub-model\"\nis_local = true\nprice_in_per_mtok = 1.0\nprice_out_per_mtok = 2.0\n\n[seats]\nworker = {{ cmd = \"{worker}\" }}\n",
                stub.url()
            ),
        )
        .unwrap();
        let (code, j, err) = run(
            &repo,
            &[
                "submit",
                "--work",
                "--check",
                "python3 -m unittest -q",
                "make the failing test in calc pass",
            ],
        );
        assert_eq!(code, Some(0), "{format}: {err} {j}");
        let roles: Vec<String> = stub.log().into_iter().map(|(r, _, _)| r).collect();
        assert!(roles.contains(&"ship".to_string()), "{roles:?}");
        let e = entries(&repo);
        let ship = &e.iter().find(|(k, _)| k == "ship").unwrap().1;
        assert_eq!(ship["decision"], "merge", "{ship}");
        assert_eq!(ship["usage"]["model"], "stub-model", "{ship}");
        assert_eq!(ship["usage"]["prompt_tokens"], PROMPT_TOKENS, "{ship}");
        // The stub's calls are witnessed one for one; the command worker's are estimates.
        let from_stub = e
            .iter()
            .filter(|(_, b)| b["usage"]["model"] == "stub-model")
            .count();
        assert_eq!(from_stub, roles.len(), "{format}: {roles:?}");
        summary_matches_the_stub(&repo, &stub, format);
        let s = repo.forum_json(&["summary"]);
        let spend = s["spend"].as_object().unwrap();
        let other: Vec<&J> = spend
            .iter()
            .filter(|(k, _)| *k != "stub-model" && *k != "total")
            .map(|(_, v)| v)
            .collect();
        assert_eq!(other.len(), 1, "{s}");
        assert_eq!(other[0]["estimated"], true, "{s}");
        repo.forum_ok(&["verify", "--deep"]);
    }
}

/// The last `budget` entry.
fn budget(repo: &Repo) -> J {
    entries(repo)
        .into_iter()
        .rev()
        .find(|(k, _)| k == "budget")
        .map(|(_, b)| b)
        .expect("a budget entry")
}

/// A run stopped on its `--max-tokens` ceiling at `stage`: exit 4 with the report on stdout,
/// a `budget` entry naming the ceiling and stage, spend within the ceiling; then `resume`
/// with a larger allowance answers.
fn stops_at(repo: &Repo, stub: &Stub, submit: &[&str], ceiling: u64, stage: &str) {
    let max = ceiling.to_string();
    let mut args = vec!["submit", "--max-tokens", &max];
    args.extend_from_slice(submit);
    let (code, j, err) = run(repo, &args);
    assert_eq!(code, Some(4), "{stage}: {err} {j}");
    assert_eq!(j["exit"]["name"], "stopped_on_ceiling", "{j}");
    let b = budget(repo);
    assert_eq!(b["ceiling"], "max_tokens", "{b}");
    assert_eq!(b["stage"], stage, "{b}");
    assert_eq!(b["max_tokens"], ceiling, "{b}");
    // Either the call did not fit, or an earlier call reported more than it reserved (the
    // stub's fill, far above any prompt's bound) and closed the ledger.
    let detail = b["detail"].as_str().unwrap();
    assert!(
        detail.contains("left of --max-tokens")
            || detail.contains("reported more usage than it reserved under --max-tokens"),
        "{b}"
    );
    let (_, prompt, completion) = totals(&stub.log());
    assert_eq!(b["tokens"], prompt + completion, "{b}");
    assert!(prompt + completion <= ceiling, "{b}");
    assert!(!entries(repo).iter().any(|(k, _)| k == "run_stopped"));
    repo.forum_ok(&["verify", "--deep"]);
    let (code, r, err) = run(repo, &["resume", "--max-tokens", "10000000"]);
    assert_eq!(code, Some(0), "{stage}: resume: {err} {r}");
    assert_eq!(r["git_forum_receipt"]["status"], "answered", "{r}");
    summary_matches_the_stub(repo, stub, stage);
    repo.forum_ok(&["verify", "--deep"]);
}

#[test]
fn a_ceiling_that_refuses_the_planner_stops_with_exit_4_and_resume_plans_again() {
    for format in FORMATS {
        let stub = Stub::start();
        let repo = repo(format, &stub, "");
        stops_at(&repo, &stub, &["write the parts"], 100, "plan");
        let roles: Vec<String> = stub.log().into_iter().map(|(r, _, _)| r).collect();
        assert_eq!(roles[0], "plan", "{roles:?}");
        repo.fsck();
    }
}

#[test]
fn a_ceiling_that_refuses_the_synthesis_stops_with_exit_4_and_resume_answers() {
    for format in FORMATS {
        let stub = Stub::start();
        // Four tasks of one wave answer 6,000 bytes each: every call before the synthesis
        // reserves under 11,000 tokens (the tasks about 19,000 together), and the synthesis,
        // whose prompt holds all four answers, over 28,000; so under 25,000 only the
        // synthesis cannot fit, and no call reports more than it reserved.
        stub.set(|s| {
            s.tasks = ["T1", "T2", "T3", "T4"].map(String::from).to_vec();
            s.output = "x".repeat(6_000);
        });
        let repo = repo(format, &stub, "");
        stops_at(&repo, &stub, &["write the parts"], 25_000, "synthesis");
        assert!(
            !entries(&repo)
                .iter()
                .any(|(_, b)| b["usage"].get("over_reservation").is_some()),
            "{format}"
        );
        repo.fsck();
    }
}

#[test]
fn a_ceiling_that_refuses_the_reviser_stops_with_exit_4_and_resume_answers() {
    for format in FORMATS {
        let stub = Stub::start();
        stub.set(|s| {
            s.answer = PADDED.into();
            // More than the synthesis reserved: an overrun, so the ledger closes.
            s.fill = Some(("synthesis", 49_990));
        });
        let repo = repo(format, &stub, "");
        stops_at(
            &repo,
            &stub,
            &["--revise", "write the parts"],
            50_000,
            "reviser",
        );
        assert!(
            !entries(&repo).iter().any(|(k, b)| k == "revision"
                && b["reason"].as_str().is_some_and(|r| r.contains("ceiling")))
        );
    }
}

#[test]
fn a_ceiling_that_refuses_the_intent_judge_stops_with_exit_4_and_resume_answers() {
    for format in FORMATS {
        let stub = Stub::start();
        // The local seat turns the judge on; "done" leaves the request's words out. The
        // synthesis reports more than it reserved: an overrun, so the ledger closes.
        stub.set(|s| s.fill = Some(("synthesis", 49_990)));
        let repo = repo(format, &stub, "");
        stops_at(
            &repo,
            &stub,
            &["write the parts of the catalog"],
            50_000,
            "intent judge",
        );
    }
}

#[test]
fn bench_of_two_runs_shows_exact_tokens_and_cost_per_model() {
    let stub = Stub::start();
    let repo = repo("sha1", &stub, "");
    let mut seqs = Vec::new();
    let mut calls = Vec::new();
    for tasks in [1, 3] {
        stub.set(|s| s.tasks = (1..=tasks).map(|i| format!("T{i}")).collect());
        let before = stub.log().len();
        let (code, j, err) = run(&repo, &["submit", "write the parts"]);
        assert_eq!(code, Some(0), "{err}");
        seqs.push(
            j["git_forum_receipt"]["request_seq"]
                .as_u64()
                .expect("request_seq"),
        );
        calls.push((stub.log().len() - before) as u64);
    }
    let (a, b) = (format!("run:{}", seqs[0]), format!("run:{}", seqs[1]));
    let j = repo.forum_json(&["bench", &a, &b]);
    for (side, n) in [("a", calls[0]), ("b", calls[1])] {
        let m = &j[side]["spend"]["stub-model"];
        assert_eq!(m["calls"], n, "{side}: {j}");
        assert_eq!(m["prompt_tokens"], n * PROMPT_TOKENS, "{side}: {j}");
        assert_eq!(m["completion_tokens"], n * COMPLETION_TOKENS, "{side}");
        assert_eq!(m["tokens"], n * (PROMPT_TOKENS + COMPLETION_TOKENS));
        let cost = m["cost_usd"].as_f64().unwrap();
        let exact = (n * (PROMPT_TOKENS + 2 * COMPLETION_TOKENS)) as f64 / 1e6;
        assert!((cost - exact).abs() < 1e-12, "{side}: {cost} vs {exact}");
        assert_eq!(j[side]["spend"]["total"]["tokens"], m["tokens"]);
    }
    // One plan, verdict and answer per run, one task call per task, and the judge.
    assert_eq!(calls[1] - calls[0], 4, "{calls:?}");
    let text = repo.forum_ok(&["bench", &a, &b]);
    let from = text.find("A: Spend per model").expect(&text);
    insta::assert_snapshot!("bench_spend_text", &text[from..]);
}

/// A scripted command model: plans one task, passes verdicts, answers "done", and as the
/// task's worker prints 100,000 bytes (25,000 estimated tokens, far past the 512 a task may
/// generate).
fn loud(repo: &Repo) -> String {
    let path = repo.path().join("loud.sh");
    let plan = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"write it","depends_on":[],"done_when":[]}]}"#;
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n  *\"Break this request\"*) echo '{plan}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'done' ;;\n  *) head -c 100000 /dev/zero | tr '\\0' x; echo ;;\nesac\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn a_command_worker_printing_past_its_cap_cannot_pass_max_tokens() {
    for format in FORMATS {
        let repo = Repo::new(format);
        let model = loud(&repo);
        let ceiling = 20_000u64;
        let (code, j, err) = run(
            &repo,
            &[
                "submit",
                "--cmd",
                &model,
                "--max-tokens",
                "20000",
                "write it",
            ],
        );
        assert!(matches!(code, Some(0 | 4)), "{format}: {err} {j}");
        let e = entries(&repo);
        let tokens: u64 = e
            .iter()
            .filter_map(|(_, b)| b.get("usage"))
            .map(|u| {
                u["prompt_tokens"].as_u64().unwrap() + u["completion_tokens"].as_u64().unwrap()
            })
            .sum();
        assert!(tokens <= ceiling, "{format}: {tokens} > {ceiling}");
        let result = &e
            .iter()
            .find(|(k, b)| k == "result" && b["id"] == "T1")
            .unwrap()
            .1;
        // Cut at the task's output cap (512 tokens, 4 bytes each), marked, and estimated.
        assert_eq!(
            result["output"].as_str().unwrap().len(),
            512 * 4,
            "{format}"
        );
        assert_eq!(result["usage"]["truncated"], true, "{result}");
        assert_eq!(result["usage"]["estimated"], true, "{result}");
        assert_eq!(result["usage"]["completion_tokens"], 512, "{result}");
        repo.forum_ok(&["verify", "--deep"]);
    }
    // Without a ceiling the output is kept whole.
    let repo = Repo::new("sha1");
    let model = loud(&repo);
    let (code, _, err) = run(&repo, &["submit", "--cmd", &model, "write it"]);
    assert_eq!(code, Some(0), "{err}");
    let e = entries(&repo);
    let result = &e
        .iter()
        .find(|(k, b)| k == "result" && b["id"] == "T1")
        .unwrap()
        .1;
    assert_eq!(result["output"].as_str().unwrap().len(), 100_000);
    assert!(result["usage"].get("truncated").is_none(), "{result}");
}
