//! The built-in editing worker through the binary: `submit --work` with a
//! chat endpoint as every seat, served by a loopback stub of this file's own (plain
//! `std::net`, one thread, stopped when dropped) that speaks the OpenAI tools protocol and is
//! scripted per worker turn (the turn's number is the count of assistant messages the request
//! carries, so the stub keeps no state). The control seats (planner, validator, pre-ship gate,
//! synthesizer) get fixed answers from the same stub. The Anthropic `tool_use` wire is checked
//! against a stub of the Messages API through the library.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value as J, json};

use crate::common::{Repo, on_each_kind};
use crate::work_run::{entries, no_worktrees, payloads, setup};

const CHECK: &str = "python3 -m unittest -q";

/// What the stub answers: a status and a JSON body, given the request body.
type Script = dyn Fn(&J) -> (u16, J) + Send + Sync;

/// A loopback HTTP server answering each request with `script`; dropping it stops it.
pub(crate) struct Stub {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<J>>>,
    thread: Option<JoinHandle<()>>,
}

impl Stub {
    pub(crate) fn start(script: impl Fn(&J) -> (u16, J) + Send + Sync + 'static) -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Script> = Arc::new(script);
        let thread = {
            let (stop, seen) = (stop.clone(), seen.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((s, _)) => serve(s, script.as_ref(), &seen),
                        // Kept: the pause of a non-blocking accept loop, which ends when
                        // the stub is stopped (on drop), not a wait for anything to happen.
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            })
        };
        Stub {
            addr,
            stop,
            seen,
            thread: Some(thread),
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// How many requests it has answered.
    pub(crate) fn requests(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// The worker turns seen (requests that offered tools).
    pub(crate) fn tool_requests(&self) -> Vec<J> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|b| b.get("tools").is_some())
            .cloned()
            .collect()
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

fn serve(mut s: TcpStream, script: &Script, seen: &Mutex<Vec<J>>) {
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; len];
    if r.read_exact(&mut body).is_err() {
        return;
    }
    let req: J = serde_json::from_slice(&body).unwrap_or(J::Null);
    seen.lock().unwrap().push(req.clone());
    let (status, answer) = script(&req);
    let text = match answer.get(RAW_BODY).and_then(J::as_str) {
        Some(raw) => raw.to_string(),
        None => answer.to_string(),
    };
    let _ = write!(
        s,
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    );
    let _ = s.flush();
}

/// A script's answer `{RAW_BODY: "..."}` is sent as that text, not as JSON (a body that is
/// not the JSON the API promises).
pub(crate) const RAW_BODY: &str = "__raw_body__";

/// The last user message's text of a chat request.
fn last_user(req: &J) -> String {
    req["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string()
}

pub(crate) fn chat_answer(content: J, calls: Option<J>) -> J {
    let mut message = json!({"role": "assistant", "content": content});
    if let Some(c) = calls {
        message["tool_calls"] = c;
    }
    json!({"model": "stub-coder", "choices": [{"message": message, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
}

/// A worker turn that makes one tool call and says nothing else.
pub(crate) fn tool_turn(id: &str, name: &str, args: J) -> J {
    chat_answer(J::Null, Some(json!([call(id, name, args)])))
}

/// One OpenAI tool call.
pub(crate) fn call(id: &str, name: &str, args: J) -> J {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}})
}

const PLAN: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"make the failing test in calc pass","depends_on":[],"done_when":["the tests pass"]}]}"#;

/// The control seats' fixed answers; `worker` scripts the tool turns (given the turn number).
pub(crate) fn fleet(
    worker: impl Fn(usize, &J) -> (u16, J) + Send + Sync + 'static,
) -> impl Fn(&J) -> (u16, J) + Send + Sync + 'static {
    move |req: &J| {
        if req.get("tools").is_some() {
            let turn = req["messages"]
                .as_array()
                .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count());
            return worker(turn, req);
        }
        let u = last_user(req);
        let text = if u.contains("Break this request") {
            PLAN.to_string()
        } else if u.contains("Choose the one lane") {
            // The classifier of a one-task run: the first lane the prompt lists.
            let lane = u
                .lines()
                .find_map(|l| l.strip_prefix("- "))
                .and_then(|l| l.split(':').next())
                .unwrap_or_default();
            json!({"agent": lane, "confidence": 0.5, "reason": "the first lane"}).to_string()
        } else if u.contains("Decide whether to ship") {
            r#"{"decision":"merge","reason":"the check passes"}"#.to_string()
        } else if u.contains("Judge one task") {
            r#"{"decision":"pass","score":0.9,"reason":"ok"}"#.to_string()
        } else if req.get("response_format").is_some() {
            // The structured fallback of a worker whose endpoint rejects tools.
            json!({"writes": [{"path": "calc.py", "content": FIXED}], "diff": "", "report": "fixed add"}).to_string()
        } else {
            "Fixed calc: add adds.".to_string()
        };
        (200, chat_answer(json!(text), None))
    }
}

pub(crate) const FIXED: &str =
    "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a + b\n";

pub(crate) fn submit(repo: &Repo, stub: &Stub, extra: &[&str]) -> std::process::Output {
    let url = stub.url("/v1/chat/completions");
    let mut args = vec![
        "submit",
        "--json",
        "--work",
        "--check",
        CHECK,
        "--chat-url",
        url.as_str(),
        "--model",
        "stub-coder",
    ];
    args.extend_from_slice(extra);
    args.push("make the failing test in calc pass");
    repo.forum().args(&args).output().unwrap()
}

fn kinds_of(repo: &Repo) -> Vec<String> {
    entries(repo)
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect()
}

fn verify_deep(repo: &Repo) {
    repo.forum_ok(&["verify", "--deep"]);
    repo.fsck();
    no_worktrees(repo);
}

/// The scripted coder: reads the failing test, writes the fix, runs the check, reports.
fn coder(turn: usize, _: &J) -> (u16, J) {
    let a = match turn {
        0 => tool_turn("c1", "read_file", json!({"path": "test_calc.py"})),
        1 => tool_turn(
            "c2",
            "write_file",
            json!({"path": "calc.py", "content": FIXED}),
        ),
        2 => tool_turn("c3", "run_command", json!({"command": CHECK})),
        _ => chat_answer(json!("Fixed add in calc.py; the tests pass."), None),
    };
    (200, a)
}

#[test]
fn a_scripted_coder_reads_writes_and_checks_through_the_tools_on_every_format() {
    on_each_kind(|repo| {
        setup(repo);
        let stub = Stub::start(fleet(coder));
        let out = submit(repo, &stub, &[]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let k = kinds_of(repo);
        let calls = payloads(repo, "tool_call");
        let results = payloads(repo, "tool_result");
        let tools: Vec<&str> = calls
            .iter()
            .map(|(_, p)| p["tool"].as_str().unwrap())
            .collect();
        assert_eq!(tools, ["read_file", "write_file", "run_command"], "{k:?}");
        assert!(results.iter().all(|(_, p)| p["ok"] == true), "{results:?}");
        // The check the model ran saw the fix; its result reached the model.
        assert!(
            results[2].1["output"]
                .as_str()
                .unwrap()
                .starts_with("exit 0"),
            "{results:?}"
        );
        let seen = stub.tool_requests();
        assert_eq!(seen.len(), 4);
        let told = seen[1]["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        assert_eq!(told["role"], "tool");
        assert!(
            told["content"]
                .as_str()
                .unwrap()
                .contains("calc.add(2, 3), 5"),
            "{told}"
        );
        // Each call hangs under the task entry, each result under its call.
        let task = payloads(repo, "task")[0].0;
        let all = entries(repo);
        let parent = |seq: u64| {
            all.iter().find(|e| e["seq"] == seq).unwrap()["causal_parent"]
                .as_u64()
                .unwrap()
        };
        for ((c, _), (r, _)) in calls.iter().zip(&results) {
            assert_eq!(parent(*c), task);
            assert_eq!(parent(*r), *c);
        }
        // The task's result witnesses what its four turns used, summed (10 in, 5 out each).
        let result = payloads(repo, "result")
            .into_iter()
            .map(|(_, p)| p)
            .find(|p| p["id"] == "T1")
            .expect("the task's result");
        assert_eq!(result["usage"]["prompt_tokens"], 40, "{result}");
        assert_eq!(result["usage"]["completion_tokens"], 20, "{result}");
        // The change commit holds the fix and the checks passed; it shipped onto the run branch.
        let change = &payloads(repo, "change")[0].1;
        assert!(change["commit"].is_string(), "{change}");
        assert_eq!(change["files"][0]["path"], "calc.py");
        let checks = payloads(repo, "check");
        assert!(
            !checks.is_empty() && checks.iter().all(|(_, p)| p["ok"] == true),
            "{checks:?}"
        );
        let result = &payloads(repo, "result")[0].1;
        assert_eq!(result["ok"], true);
        assert_eq!(result["model"], "stub-coder");
        let branch = repo.git_ok(&["show", "forum/run-0:calc.py"]);
        assert!(branch.contains("return a + b\n\n\ndef mul"), "{branch}");
        assert!(
            std::fs::read_to_string(repo.path().join("calc.py"))
                .unwrap()
                .contains("a - b")
        );
        verify_deep(repo);
    });
}

#[test]
fn paths_out_of_the_worktree_are_refused_and_witnessed() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("stolen.txt");
    std::fs::write(&target, "secret\n").unwrap();
    // A symlink committed into the repository, pointing out of it.
    std::os::unix::fs::symlink(outside.path(), repo.path().join("escape")).unwrap();
    repo.git_ok(&["add", "escape"]);
    repo.git_ok(&["commit", "-q", "-m", "a link out"]);
    let abs = target.to_str().unwrap().to_string();
    let stub = Stub::start(fleet(move |turn, _| {
        let a = match turn {
            0 => chat_answer(
                J::Null,
                Some(json!([
                    call(
                        "a",
                        "write_file",
                        json!({"path": "../../outside.txt", "content": "x"})
                    ),
                    call("b", "read_file", json!({"path": abs})),
                    call(
                        "c",
                        "write_file",
                        json!({"path": "escape/stolen.txt", "content": "pwned"})
                    ),
                    call("d", "read_file", json!({"path": "escape/stolen.txt"})),
                    call("e", "run_command", json!({"command": "rm -rf /"})),
                ])),
            ),
            _ => chat_answer(json!("I could not leave the worktree."), None),
        };
        (200, a)
    }));
    let out = submit(&repo, &stub, &[]);
    let _ = out;
    let results = payloads(&repo, "tool_result");
    assert_eq!(results.len(), 5, "{results:?}");
    for (_, p) in &results {
        assert_eq!(p["refused"], true, "{p}");
        assert_eq!(p["ok"], false, "{p}");
        assert!(p["output"].as_str().unwrap().starts_with("refused:"), "{p}");
    }
    assert!(
        results[2].1["output"].as_str().unwrap().contains("symlink"),
        "{results:?}"
    );
    // The model was told each refusal.
    let seen = stub.tool_requests();
    let msgs = seen[1]["messages"].as_array().unwrap();
    let told: Vec<&J> = msgs.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(told.len(), 5);
    assert!(
        told.iter()
            .all(|m| m["content"].as_str().unwrap().starts_with("refused:"))
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "secret\n");
    assert!(!repo.path().join("../../outside.txt").exists());
    verify_deep(&repo);
}

/// A worker that never finishes: each turn lists the files again.
fn lister(turn: usize, _: &J) -> (u16, J) {
    (200, tool_turn(&format!("l{turn}"), "list_files", json!({})))
}

#[test]
fn a_model_that_never_stops_calling_tools_stops_at_max_tool_calls() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let stub = Stub::start(fleet(lister));
    let out = submit(&repo, &stub, &["--max-tool-calls", "3"]);
    let _ = out;
    assert_eq!(payloads(&repo, "tool_call").len(), 3);
    let result = &payloads(&repo, "result")[0].1;
    assert_eq!(result["ok"], false);
    assert_eq!(result["error"], "max_tool_calls");
    assert!(
        result["output"]
            .as_str()
            .unwrap()
            .contains("--max-tool-calls 3"),
        "{result}"
    );
    // Four turns: three calls carried out, the fourth asked for one more.
    assert_eq!(stub.tool_requests().len(), 4);
    assert!(payloads(&repo, "change").is_empty());
    verify_deep(&repo);
}

#[test]
fn a_tool_conversation_stops_on_a_token_ceiling_without_passing_it() {
    // Each turn reserves its worst case (the conversation so far, plus its output cap) before
    // it starts, as every model call does, so a conversation that never ends stops on the
    // ceiling, and what its turns used never passes it.
    let repo = Repo::new("sha1");
    setup(&repo);
    let stub = Stub::start(fleet(lister));
    let ceiling = 40_000u64;
    let out = submit(
        &repo,
        &stub,
        &[
            "--max-tool-calls",
            "500",
            "--max-tokens",
            &ceiling.to_string(),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let budget = payloads(&repo, "budget");
    assert_eq!(budget.len(), 1, "{budget:?}");
    assert_eq!(budget[0].1["ceiling"], "max_tokens", "{budget:?}");
    let used: u64 = payloads(&repo, "result")
        .iter()
        .filter_map(|(_, p)| p.get("usage"))
        .chain(
            payloads(&repo, "plan")
                .iter()
                .filter_map(|(_, p)| p.get("usage")),
        )
        .map(|u| u["prompt_tokens"].as_u64().unwrap() + u["completion_tokens"].as_u64().unwrap())
        .sum();
    assert!(used > 0 && used <= ceiling, "used {used} of {ceiling}");
    // The conversation stopped on the ceiling, well before --max-tool-calls.
    assert!(payloads(&repo, "tool_call").len() < 500);
    verify_deep(&repo);
}

#[test]
fn a_model_that_answers_without_tools_gets_one_corrective_turn_then_fails() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let stub = Stub::start(fleet(|_, _| {
        (200, chat_answer(json!("I fixed it, trust me."), None))
    }));
    let out = submit(&repo, &stub, &[]);
    let _ = out;
    let seen = stub.tool_requests();
    assert_eq!(seen.len(), 2, "one corrective turn");
    assert!(
        last_user(&seen[1]).contains("without calling a tool"),
        "{}",
        seen[1]
    );
    let result = &payloads(&repo, "result")[0].1;
    assert_eq!(result["ok"], false);
    assert_eq!(result["error"], "no_tool_call");
    assert!(payloads(&repo, "tool_call").is_empty());
    verify_deep(&repo);
}

/// The story of a first run on the local model: `init` with nothing else on the machine
/// points the worker at the local model (here the stub, through `GIT_FORUM_MODEL_URL`), and
/// a model that never calls a tool ends its task after two replies, each capped well below
/// the model's context, with the reason recorded and nothing committed.
#[test]
fn on_the_local_model_init_writes_a_worker_that_never_calls_a_tool_ends_after_two_capped_replies() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let stub = Stub::start(fleet(|_, _| {
        (200, chat_answer(json!("I fixed it, trust me."), None))
    }));
    let base = stub.url("/v1");
    let o = repo
        .forum()
        .env("GIT_FORUM_MODEL_URL", &base)
        .env("GIT_FORUM_INIT_PORTS", "")
        .args(["init", "--agent", "local"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // No --check: the default check init found (test_calc.py) makes the tier-3 run legal.
    // How the run ends (its exit code) is the outcome table's to say; here, what the worker did.
    repo.forum()
        .env("GIT_FORUM_MODEL_URL", &base)
        .args([
            "submit",
            "--json",
            "--work",
            "make the failing test in calc pass",
        ])
        .output()
        .unwrap();
    let seen = stub.tool_requests();
    assert_eq!(seen.len(), 2, "two replies, then the task ends");
    for req in &seen {
        assert_eq!(req["max_tokens"], 1024, "the local seat's cap: {req}");
    }
    let result = &payloads(&repo, "result")[0].1;
    assert_eq!(result["ok"], false, "{result}");
    assert_eq!(result["error"], "no_tool_call", "{result}");
    assert!(payloads(&repo, "change").is_empty());
    assert!(
        repo.git(&["rev-parse", "--verify", "-q", "refs/heads/forum/run-0"])
            .stdout
            .is_empty()
            || repo.git_ok(&["rev-list", "main..forum/run-0"]).is_empty(),
        "no commit on the run branch"
    );
    verify_deep(&repo);
}

/// A hand-written runtime on a local seat that sets no `max_tokens`: its turns are capped at
/// half the bundled model's context all the same.
#[test]
fn a_local_seat_without_a_cap_of_its_own_gets_short_turns() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let stub = Stub::start(fleet(|_, _| (200, chat_answer(json!("Done."), None))));
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        format!(
            "[runtime.default]\nchat_url = \"{}\"\nmodel = \"stub-coder\"\nis_local = true\n",
            stub.url("/v1/chat/completions")
        ),
    )
    .unwrap();
    repo.forum()
        .args(["submit", "--json", "--work", "--check", CHECK, "fix calc"])
        .output()
        .unwrap();
    let seen = stub.tool_requests();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|r| r["max_tokens"] == 2048), "{seen:?}");
    assert_eq!(payloads(&repo, "result")[0].1["error"], "no_tool_call");
}

#[test]
fn malformed_calls_get_one_corrective_turn_then_fail() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let stub = Stub::start(fleet(|turn, _| {
        let c = json!([{"id": format!("m{turn}"), "type": "function",
                        "function": {"name": "write_file", "arguments": "{not json"}}]);
        (200, chat_answer(J::Null, Some(c)))
    }));
    let out = submit(&repo, &stub, &[]);
    let _ = out;
    assert_eq!(stub.tool_requests().len(), 2);
    let result = &payloads(&repo, "result")[0].1;
    assert_eq!(result["error"], "malformed_tool_call", "{result}");
    let first = &payloads(&repo, "tool_result")[0].1;
    assert!(
        first["output"].as_str().unwrap().contains("not valid JSON"),
        "{first}"
    );
    verify_deep(&repo);
}

#[test]
fn an_endpoint_that_rejects_tools_gets_the_structured_reply_applied() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let stub = Stub::start(fleet(|_, _| {
        (
            400,
            json!({"error": {"message": "tools param requires --jinja flag", "type": "invalid_request_error"}}),
        )
    }));
    let out = submit(&repo, &stub, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let calls = payloads(&repo, "tool_call");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].1["via"], "structured");
    assert_eq!(calls[0].1["tool"], "write_file");
    let result = &payloads(&repo, "result")[0].1;
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(result["output"], "fixed add");
    let checks = payloads(&repo, "check");
    assert!(checks.iter().all(|(_, p)| p["ok"] == true), "{checks:?}");
    let branch = repo.git_ok(&["show", "forum/run-0:calc.py"]);
    assert!(branch.contains("return a + b\n\n\ndef mul"), "{branch}");
    verify_deep(&repo);
}

#[test]
fn bad_tool_flags_are_one_line_usage_errors() {
    let repo = Repo::new("sha1");
    setup(&repo);
    for (args, needle) in [
        (
            vec!["--max-tool-calls", "0", "--work"],
            "--max-tool-calls 0",
        ),
        (vec!["--max-tool-calls", "3"], "add --work"),
        (vec!["--allow-cmd", " ", "--work"], "--allow-cmd"),
    ] {
        let mut all = vec!["submit", "--cmd", "true"];
        all.extend(args);
        all.push("x");
        let out = repo.forum().args(&all).output().unwrap();
        assert!(!out.status.success());
        crate::common::one_line_error(&out, needle);
    }
    // Nothing was written: the ledger was never created.
    let ledger = repo.git(&["rev-parse", "--verify", "-q", crate::common::LEDGER_REF]);
    assert!(!ledger.status.success());
}

/// The coder of [`coder`], speaking the Messages API (`tool_use` blocks).
fn anthropic_coder(turn: usize) -> J {
    let tool = |id: &str, name: &str, input: J| {
        json!({"model": "claude-stub", "stop_reason": "tool_use", "content": [
            {"type": "tool_use", "id": id, "name": name, "input": input}],
            "usage": {"input_tokens": 10, "output_tokens": 5}})
    };
    match turn {
        0 => tool("tu1", "read_file", json!({"path": "test_calc.py"})),
        1 => tool(
            "tu2",
            "write_file",
            json!({"path": "calc.py", "content": FIXED}),
        ),
        2 => tool("tu3", "run_command", json!({"command": CHECK})),
        _ => json!({"model": "claude-stub", "stop_reason": "end_turn", "content": [
            {"type": "text", "text": "Fixed add in calc.py; the tests pass."}],
            "usage": {"input_tokens": 10, "output_tokens": 5}}),
    }
}

#[test]
fn an_anthropic_worker_seat_fixes_the_test_through_tool_use() {
    // The worker seat is the Messages API (moved to the stub with ANTHROPIC_BASE_URL, as
    // Anthropic's SDKs do); the control seats are the stub's chat endpoint.
    on_each_kind(|repo| {
        setup(repo);
        let stub = Stub::start(|req: &J| {
            let anthropic = req["tools"][0].get("input_schema").is_some();
            if anthropic {
                let turn = req["messages"]
                    .as_array()
                    .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count());
                return (200, anthropic_coder(turn));
            }
            fleet(coder)(req)
        });
        // A runtime file of the user's own (`--runtime-config`), which may name loopback.
        let rt = repo.path().join(".git/anthropic-runtime.toml");
        std::fs::write(
            &rt,
            format!(
                "[runtime.default]\nchat_url = \"{}\"\nmodel = \"stub-coder\"\nis_local = true\n\n[seats]\nworker = {{ api = \"anthropic\", model = \"claude-stub\", is_local = true }}\n",
                stub.url("/v1/chat/completions")
            ),
        )
        .unwrap();
        let out = repo
            .forum()
            .env("ANTHROPIC_BASE_URL", stub.url(""))
            .args([
                "submit",
                "--json",
                "--work",
                "--check",
                CHECK,
                "--runtime-config",
            ])
            .arg(&rt)
            .arg("make the failing test in calc pass")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let tools: Vec<String> = payloads(repo, "tool_call")
            .iter()
            .map(|(_, p)| p["tool"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(tools, ["read_file", "write_file", "run_command"]);
        let results = payloads(repo, "tool_result");
        assert!(results.iter().all(|(_, p)| p["ok"] == true), "{results:?}");
        let seen = stub.seen.lock().unwrap().clone();
        let turns: Vec<&J> = seen
            .iter()
            .filter(|r| r["tools"][0].get("input_schema").is_some())
            .collect();
        assert_eq!(turns.len(), 4);
        // The second turn carried the first call back as tool_use and its answer as tool_result.
        assert_eq!(turns[1]["messages"][1]["content"][0]["type"], "tool_use");
        assert_eq!(turns[1]["messages"][2]["content"][0]["type"], "tool_result");
        assert_eq!(turns[1]["messages"][2]["content"][0]["tool_use_id"], "tu1");
        let result = payloads(repo, "result")
            .into_iter()
            .map(|(_, p)| p)
            .find(|p| p["id"] == "T1")
            .expect("the task's result");
        assert_eq!(result["model"], "claude-stub", "{result}");
        let change = &payloads(repo, "change")[0].1;
        assert_eq!(change["files"][0]["path"], "calc.py", "{change}");
        let fixed = repo.git_ok(&["show", "forum/run-0:calc.py"]);
        assert!(fixed.contains("return a + b"), "{fixed}");
        verify_deep(repo);
    });
}

#[test]
fn the_anthropic_wire_carries_tool_use_and_tool_result() {
    use git_forum::exec::Executor;
    use git_forum::exec::anthropic::AnthropicExecutor;
    use git_forum::exec::endpoint::{Origin, Policy};
    use git_forum::exec::tool_chat::{Msg, ToolOutput};
    let stub = Stub::start(|req: &J| {
        let n = req["messages"].as_array().map_or(0, Vec::len);
        let body = if n == 1 {
            json!({"model": "claude-stub", "content": [
                {"type": "text", "text": "reading"},
                {"type": "tool_use", "id": "tu1", "name": "read_file", "input": {"path": "test_calc.py"}}],
                "usage": {"input_tokens": 3, "output_tokens": 2}})
        } else {
            json!({"model": "claude-stub", "content": [{"type": "text", "text": "done"}]})
        };
        (200, body)
    });
    let mut policy = Policy::strict(Origin::CommandLine);
    policy.is_local = true;
    let e = AnthropicExecutor::with_url(
        &stub.url("/v1/messages"),
        "claude-stub",
        "PATH",
        policy,
        Duration::from_secs(10),
        1 << 20,
    )
    .unwrap();
    let chat = e
        .tool_chat()
        .expect("the Anthropic executor holds tool conversations");
    let specs = git_forum::run::tools::specs(&[CHECK.to_string()]);
    let mut msgs = vec![Msg::User("fix calc".into())];
    let t = chat.turn("sys", &msgs, &specs, 100).unwrap();
    assert_eq!(t.calls.len(), 1);
    assert_eq!(t.calls[0].name, "read_file");
    assert_eq!(t.calls[0].arguments().unwrap()["path"], "test_calc.py");
    msgs.push(Msg::Assistant {
        text: t.text.clone(),
        calls: t.calls.clone(),
    });
    msgs.push(Msg::Results(vec![ToolOutput {
        id: "tu1".into(),
        content: "refused: the path".into(),
        is_error: true,
    }]));
    let t2 = chat.turn("sys", &msgs, &specs, 100).unwrap();
    assert_eq!((t2.text.as_str(), t2.calls.len()), ("done", 0));
    let seen = stub.seen.lock().unwrap().clone();
    let second = &seen[1];
    assert_eq!(second["tools"].as_array().unwrap().len(), 6);
    assert_eq!(second["tools"][0]["input_schema"]["type"], "object");
    assert_eq!(second["messages"][1]["content"][1]["type"], "tool_use");
    let r = &second["messages"][2]["content"][0];
    assert_eq!(
        (r["type"].as_str(), r["tool_use_id"].as_str()),
        (Some("tool_result"), Some("tu1"))
    );
    assert_eq!(r["is_error"], true);
}

#[test]
fn the_local_model_runs_the_tool_loop_and_the_record_verifies() {
    let Some(llm) = crate::llm::LocalLlm::start() else {
        return;
    };
    let repo = Repo::new("sha256");
    setup(&repo);
    let policy = repo.path().join("policy.toml");
    std::fs::write(&policy, "max_tasks = 1\n").unwrap();
    let url = llm.chat_url();
    let out = repo
        .forum()
        .args([
            "submit",
            "--json",
            "--work",
            "--check",
            CHECK,
            "--chat-url",
            url.as_str(),
            "--model",
            llm.model(),
            "--policy",
            policy.to_str().unwrap(),
            "--max-output-tokens",
            "200",
            "--max-tool-calls",
            "4",
            "make the failing test in calc pass",
        ])
        .output()
        .unwrap();
    // Whatever the tiny model did, every tool call has its result, and the task's result says
    // how the loop ended; a loop that failed makes the run exit 10, never 0.
    let calls = payloads(&repo, "tool_call");
    let results = payloads(&repo, "tool_result");
    assert_eq!(calls.len(), results.len());
    assert!(calls.len() <= 4);
    let result = &payloads(&repo, "result")[0].1;
    assert!(
        result["ok"] == true || result["error"].is_string(),
        "{result}"
    );
    let code = out.status.code();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if result["ok"] == true {
        assert!(matches!(code, Some(0 | 6)), "{code:?} {stderr}");
    } else {
        assert_eq!(code, Some(10), "{stderr}");
    }
    verify_deep(&repo);
}

#[test]
fn the_daemon_and_mcp_take_the_tool_flags() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let stub = Stub::start(fleet(|turn, _| {
        (
            200,
            tool_turn(
                &format!("r{turn}"),
                "run_command",
                json!({"command": "echo hi"}),
            ),
        )
    }));
    let url = stub.url("/v1/chat/completions");
    let served = repo.serve(
        &["--chat-url", url.as_str(), "--model", "stub-coder"],
        std::process::Stdio::null(),
    );
    let (status, j) = crate::common::http_json(
        &served.addr,
        "POST",
        "/submit",
        &json!({"request": "fix calc", "work": true, "allow_cmds": ["echo hi"], "max_tool_calls": 2}),
    );
    assert_eq!(status, 200, "{j}");
    let results = payloads(&repo, "tool_result");
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results
            .iter()
            .all(|(_, p)| p["ok"] == true && p["output"].as_str().unwrap().contains("hi"))
    );
    assert_eq!(payloads(&repo, "result")[0].1["error"], "max_tool_calls");
    for body in [
        json!({"request": "x", "work": true, "allow_cmds": "echo"}),
        json!({"request": "x", "work": true, "max_tool_calls": 0}),
        json!({"request": "x", "max_tool_calls": 3}),
    ] {
        let (status, bad) = crate::common::http_json(&served.addr, "POST", "/submit", &body);
        assert_eq!(status, 400, "{body}: {bad}");
    }
    drop(served);
    let (ok, out) = repo.mcp_batch(
        &[],
        &[
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        ],
    );
    assert!(ok, "{out}");
    let list: J = serde_json::from_str(out.lines().nth(1).unwrap()).unwrap();
    let submit = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "submit")
        .unwrap()
        .clone();
    let props = &submit["inputSchema"]["properties"];
    assert_eq!(props["allow_cmds"]["type"], "array", "{submit}");
    assert_eq!(props["max_tool_calls"]["type"], "integer", "{submit}");
    verify_deep(&repo);
}
