//! The outcome table, through the real binary: one scripted run into each outcome (halted,
//! budget, ceiling, gated, rejected, refuted, blocked, failed, nothing delivered, partial,
//! timed out, degraded, delivered) in one ledger, then every surface asked how each ended: the
//! exit code and the `--json` report, `runs --json` and `runs`, the receipt's verdict and
//! outcome, the daemon's `GET /runs` and MCP's `runs` tool. They all agree with the table.

use std::io::Read;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value as J, json};

use crate::common::{Guarded, Repo, http_json, wait_until};
use crate::procs;
use crate::work_run::{payloads, plan, setup};

/// A scripted model: the plan, the validator's decision (`judge`), the pre-ship gate's
/// decision (`block` when the prompt names `blocked_task`, else `merge`), a summary that
/// claims a fix, and `work` for every task (`$p` is the prompt).
fn model(repo: &Repo, name: &str, plan: &str, judge: &str, work: &str) -> String {
    let path = repo.path().join(format!("{name}.sh"));
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{plan}' ;;\n  *\"Decide whether to ship\"*)\n    case \"$p\" in\n      *\"fix mul\"*) echo '{{\"decision\":\"block\",\"reason\":\"scripted\"}}' ;;\n      *) echo '{{\"decision\":\"merge\",\"reason\":\"scripted\"}}' ;;\n    esac ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"{judge}\",\"score\":0.9,\"reason\":\"scripted\"}}' ;;\n  *\"Write the answer\"*) echo 'Fixed calc.' ;;\n  *)\n{work}\n  ;;\nesac\n"
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

const FIX_ADD: &str = "    sed -i 's/return a - b/return a + b/' calc.py; echo 'fixed add'";

/// T1 fixes add, T2 fixes mul (the gate blocks what names "fix mul").
const FIX_BOTH: &str = "    case \"$p\" in\n      *\"fix mul\"*) sed -i 's/return a + b/return a * b/' calc.py; echo mul ;;\n      *) sed -i 's/return a - b/return a + b/' calc.py; echo add ;;\n    esac";

/// One scenario: its name in the table, exit code, the receipt's verdict, and how it runs.
struct Case {
    name: &'static str,
    code: i32,
    verdict: &'static str,
    work: bool,
}

/// Runs `git forum --json ARGS`; returns the exit code and the report it printed.
fn json_run(repo: &Repo, args: &[&str]) -> (i32, J) {
    let o = repo.forum().arg("--json").args(args).output().unwrap();
    let report: J = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: stdout is not JSON ({e}); stderr {}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o.status.code().unwrap_or(-1), report)
}

#[test]
fn every_outcome_reads_the_same_on_every_surface() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let one = plan(&[("T1", "fix add in calc.py")], false);
    let two = plan(
        &[("T1", "fix add in calc.py"), ("T2", "fix mul in calc.py")],
        false,
    );
    let check = "python3 -m unittest -q";
    let text_model = model(&repo, "text", &one, "pass", "    echo 'looked at it'");
    // A worker that says it started, then hangs until a halt kills it.
    let started = repo.path().join("started");
    let halting = model(
        &repo,
        "halting",
        &one,
        "pass",
        &format!("    touch '{}'; sleep 30; echo late", started.display()),
    );
    let fixing = model(&repo, "fixing", &one, "pass", FIX_ADD);
    let both = model(&repo, "both", &two, "pass", FIX_BOTH);
    let mul = plan(&[("T1", "fix mul in calc.py")], false);
    let blocking = model(
        &repo,
        "blocking",
        &mul,
        "pass",
        "    sed -i 's/return a + b/return a * b/' calc.py; echo 'fixed mul'",
    );
    let failing = model(
        &repo,
        "failing",
        &one,
        "pass",
        "    echo broken >&2; exit 1",
    );
    let idle = model(&repo, "idle", &one, "pass", "    echo 'nothing to do'");
    let slow = model(&repo, "slow", &one, "pass", "    sleep 20; echo late");
    let judged = model(&repo, "judged", &one, "fail", FIX_ADD);
    // The slow worker's deadline: a runtime whose default executor gives up after 2 seconds.
    let rt = repo.path().join("rt.toml");
    std::fs::write(
        &rt,
        format!("[runtime.default]\ncmd = \"{slow}\"\ntimeout_seconds = 2\n"),
    )
    .unwrap();
    let rt = rt.to_str().unwrap();

    let work = |m: &str| -> Vec<String> {
        ["submit", "--work", "--check", check, "--cmd", m, "fix calc"]
            .map(String::from)
            .to_vec()
    };
    // The gate sees only a change whose checks passed: mul's fix leaves add's test failing.
    let unchecked = |m: &str| -> Vec<String> {
        [
            "submit",
            "--work",
            "--check",
            "true",
            "--cmd",
            m,
            "fix mul in calc",
        ]
        .map(String::from)
        .to_vec()
    };
    let text = |extra: &[&str], m: &str| -> Vec<String> {
        let mut a = vec!["submit".to_string()];
        a.extend(extra.iter().map(|s| s.to_string()));
        a.extend(["--cmd", m, "explain calc"].map(String::from));
        a
    };
    let cases: Vec<(Case, Vec<String>)> = vec![
        (
            Case {
                name: "stopped_on_budget",
                code: 3,
                verdict: "MATCH",
                work: false,
            },
            text(&["--max-model-calls", "1"], &text_model),
        ),
        (
            Case {
                name: "stopped_on_ceiling",
                code: 4,
                verdict: "MATCH",
                work: false,
            },
            text(&["--max-tokens", "1"], &text_model),
        ),
        (
            Case {
                name: "gated",
                code: 8,
                verdict: "MATCH",
                work: false,
            },
            text(&["--gate-wave", "0"], &text_model),
        ),
        (
            Case {
                name: "refuted",
                code: 6,
                verdict: "DRIFT",
                work: false,
            },
            text(&["--verify-cmd", "false"], &text_model),
        ),
        (
            Case {
                name: "answered",
                code: 0,
                verdict: "MATCH",
                work: false,
            },
            text(&[], &text_model),
        ),
        (
            Case {
                name: "blocked",
                code: 7,
                verdict: "NOTHING_DELIVERED",
                work: true,
            },
            unchecked(&blocking),
        ),
        (
            Case {
                name: "failed",
                code: 10,
                verdict: "NOTHING_DELIVERED",
                work: true,
            },
            work(&failing),
        ),
        (
            Case {
                name: "nothing_delivered",
                code: 11,
                verdict: "NOTHING_DELIVERED",
                work: true,
            },
            work(&idle),
        ),
        (
            Case {
                name: "partial",
                code: 12,
                verdict: "PARTIAL",
                work: true,
            },
            work(&both),
        ),
        (
            Case {
                name: "timed_out",
                code: 13,
                verdict: "NOTHING_DELIVERED",
                work: true,
            },
            [
                "submit",
                "--work",
                "--check",
                check,
                "--runtime-config",
                rt,
                "fix calc",
            ]
            .map(String::from)
            .to_vec(),
        ),
        (
            Case {
                name: "degraded",
                code: 14,
                verdict: "PARTIAL",
                work: true,
            },
            work(&judged),
        ),
        (
            Case {
                name: "answered",
                code: 0,
                verdict: "MATCH",
                work: true,
            },
            work(&fixing),
        ),
    ];
    // name, code, verdict, work, request seq
    let mut seen: Vec<(&str, i32, &str, bool, u64)> = Vec::new();
    // A halt from a second process while the worker hangs.
    let mut run = Guarded(
        repo.forum()
            .args([
                "--json",
                "submit",
                "--quiet",
                "--cmd",
                &halting,
                "explain calc",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_until("the worker started", Duration::from_secs(120), || {
        started.exists()
    });
    repo.forum_ok(&["halt", "--reason", "test"]);
    let mut out = Vec::new();
    run.0.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    let code = run.0.wait().unwrap().code();
    let r: J = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        (code, &r["exit"]["name"]),
        (Some(5), &json!("halted")),
        "{r}"
    );
    assert_eq!(r["git_forum_receipt"]["status"], "halted", "{r}");
    let seq = r["git_forum_receipt"]["request_seq"].as_u64().unwrap();
    seen.push(("halted", 5, "MATCH", false, seq));
    for (c, args) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, r) = json_run(&repo, &args);
        assert_eq!(
            (code, &r["exit"]["name"]),
            (c.code, &json!(c.name)),
            "{args:?}: {r}"
        );
        assert_eq!(r["exit"]["code"], c.code, "{r}");
        assert_eq!(r["git_forum_receipt"]["status"], c.name, "{r}");
        assert_eq!(
            r["receipt"]["verification"]["verdict"], c.verdict,
            "{}: {r}",
            c.name
        );
        let seq = r["git_forum_receipt"]["request_seq"].as_u64().unwrap();
        seen.push((c.name, c.code, c.verdict, c.work, seq));
    }
    // The gated run, rejected and resumed, ends rejected.
    let gated = seen.iter().find(|s| s.0 == "gated").unwrap().4.to_string();
    repo.forum_ok(&["gate", "reject", "--run", &gated, "--reason", "no"]);
    let (code, r) = json_run(&repo, &["resume", &gated, "--cmd", &text_model]);
    assert_eq!((code, &r["exit"]["name"]), (9, &json!("rejected")), "{r}");
    let at = seen.iter().position(|s| s.0 == "gated").unwrap();
    seen[at] = ("rejected", 9, "MATCH", false, seen[at].4);
    // The answer of the run that delivered nothing says so from the record, and its claim of a
    // fix is flagged there and witnessed.
    let claims = payloads(&repo, "claim_check");
    let idle_seq = seen.iter().find(|s| s.0 == "nothing_delivered").unwrap().4;
    assert!(
        claims.iter().any(|(_, c)| c["delivered"] == false
            && c["claims"][0].as_str().unwrap().starts_with("\"fixed\"")),
        "{claims:?}"
    );
    let runs = repo.forum_json(&["runs"]);
    let row = |runs: &J, seq: u64| -> J {
        runs["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["request_seq"] == seq)
            .cloned()
            .unwrap_or_else(|| panic!("run {seq} not in {runs}"))
    };
    let answer = |seq: u64| {
        let r = row(&runs, seq);
        let a = r["answer_seq"].as_u64().unwrap().to_string();
        repo.forum_json(&["show", &a, "--payload"])["payload"]["answer"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let idle_answer = answer(idle_seq);
    assert!(
        idle_answer.contains("- nothing delivered: no change of this run is on its run branch")
            && idle_answer.contains("the summary above claims what this record does not hold"),
        "{idle_answer}"
    );
    // `runs` (JSON and text), each receipt, the daemon and MCP agree with the table.
    let text_runs = repo.forum_ok(&["runs"]);
    for (name, code, verdict, work, seq) in &seen {
        let r = row(&runs, *seq);
        assert_eq!(
            (&r["state"], &r["exit"]),
            (&json!(name), &json!(code)),
            "{r}"
        );
        assert!(
            text_runs
                .lines()
                .any(|l| l.starts_with(&format!("run {seq:>5}  {name} "))),
            "{name} not in {text_runs}"
        );
        let receipt = repo.forum_json(&["receipt", &seq.to_string()]);
        assert_eq!(
            receipt["verification"]["verdict"], *verdict,
            "{name}: {receipt}"
        );
        if *work {
            assert_eq!(
                receipt["work"]["outcome"],
                json!({"name": name, "code": code}),
                "{receipt}"
            );
        } else {
            assert!(receipt.get("work").is_none(), "{receipt}");
        }
    }
    let served = repo.serve(&["--cmd", &text_model], Stdio::null());
    let (status, daemon) = http_json(&served.addr, "GET", "/runs", &json!({}));
    assert_eq!(status, 200, "{daemon}");
    let mut child = served.child;
    procs::terminate(&child.0);
    assert!(child.0.wait().unwrap().success());
    let input = [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}).to_string(),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"runs","arguments":{}}}).to_string(),
    ];
    let (ok, out) = repo.mcp_batch(&["--cmd", &text_model], &input);
    assert!(ok, "{out}");
    let mcp: J = serde_json::from_str(out.lines().nth(1).unwrap()).unwrap();
    let mcp = &mcp["result"]["structuredContent"];
    for (name, code, _, _, seq) in &seen {
        for (surface, rows) in [("daemon", &daemon), ("mcp", mcp)] {
            let r = row(rows, *seq);
            assert_eq!(
                (&r["state"], &r["exit"]),
                (&json!(name), &json!(code)),
                "{surface}: {r}"
            );
        }
    }
    // Every name of the table was reached.
    // (`gated` was asserted at submit time; the run reads `rejected` since.)
    let mut names: Vec<&str> = seen.iter().map(|s| s.0).chain(["gated"]).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 13, "{names:?}");
    repo.forum_ok(&["verify", "--deep"]);
    repo.fsck();
}

/// The daemon's and MCP's answer to a `--work` submit that changed nothing carry the same
/// outcome as the command line: `nothing_delivered` (11), our receipt's status, Forum's
/// receipt's verdict `NOTHING_DELIVERED` and its `work.outcome`.
#[test]
fn a_work_run_that_delivers_nothing_says_so_over_http_and_mcp() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let one = plan(&[("T1", "fix add in calc.py")], false);
    let idle = model(&repo, "idle", &one, "pass", "    echo 'nothing to do'");
    let args = json!({"request": "fix calc", "work": true, "checks": ["true"]});
    let agrees = |surface: &str, r: &J| {
        assert_eq!(
            r["exit"],
            json!({"code": 11, "name": "nothing_delivered"}),
            "{surface}: {r}"
        );
        assert_eq!(r["git_forum_receipt"]["status"], "nothing_delivered", "{r}");
        let receipt = &r["receipt"];
        assert_eq!(
            receipt["verification"]["verdict"], "NOTHING_DELIVERED",
            "{r}"
        );
        assert_eq!(
            receipt["work"]["outcome"],
            json!({"name": "nothing_delivered", "code": 11}),
            "{r}"
        );
    };
    let served = repo.serve(&["--cmd", &idle], Stdio::null());
    let (status, r) = http_json(&served.addr, "POST", "/submit", &args);
    assert_eq!(status, 200, "{r}");
    agrees("daemon", &r);
    let mut child = served.child;
    procs::terminate(&child.0);
    assert!(child.0.wait().unwrap().success());
    let input = [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}).to_string(),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"submit","arguments": args}}).to_string(),
    ];
    let (ok, out) = repo.mcp_batch(&["--cmd", &idle], &input);
    assert!(ok, "{out}");
    let reply: J = serde_json::from_str(out.lines().nth(1).unwrap()).unwrap();
    agrees("mcp", &reply["result"]["structuredContent"]);
    repo.forum_ok(&["verify", "--deep"]);
}

/// The reviser tightens only the model's summary of a `--work` run: the Changes part the
/// record wrote comes back unchanged under the revised summary.
#[test]
fn the_reviser_never_rewrites_the_changes_part() {
    let repo = Repo::new("sha1");
    setup(&repo);
    // One sentence long enough that the delivery floor flags the whole answer.
    let clause = "the team also wrote a long explanation of how the endpoint handles sessions, tokens, rate limits, retries, errors and audit logging so that everyone on call can follow along easily";
    let long = format!(
        "We ship the login API with docs today and {clause} and {clause} and {clause} and {clause}."
    );
    let short = "We ship the login API with docs today.";
    let one = plan(&[("T1", "fix add in calc.py for the login API")], false);
    let path = repo.path().join("reviser.sh");
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{one}' ;;\n  *\"Decide whether to ship\"*) echo '{{\"decision\":\"merge\",\"reason\":\"scripted\"}}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Tighten this answer\"*) echo '{short}' ;;\n  *\"Write the answer\"*) echo '{long}' ;;\n  *)\n{FIX_ADD}\n  ;;\nesac\n"
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let m = path.to_str().unwrap();
    let (code, r) = json_run(
        &repo,
        &[
            "submit",
            "--work",
            "--revise",
            "--check",
            "true",
            "--cmd",
            m,
            "ship a login API with docs",
        ],
    );
    assert_eq!(code, 0, "{r}");
    let answer = r["answer"].as_str().unwrap();
    assert_eq!(
        answer,
        format!(
            "{short}\n\nChanges (branch forum/run-0):\n- T1: merged (1 file, +1 -1: calc.py); checks 1/1 passed\n- run branch: checks 1/1 passed"
        ),
        "{r}"
    );
    assert_eq!(payloads(&repo, "revision")[0].1["accepted"], true);
}

/// A run that went through but did not succeed is an MCP error result (`isError: true`) with
/// its report as the structured content, and the daemon answers it 200 with the outcome in
/// `exit`; a run that delivered is neither.
#[test]
fn mcp_marks_a_run_that_did_not_succeed_as_an_error_and_the_daemon_reports_its_outcome() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let one = plan(&[("T1", "fix add in calc.py")], false);
    let idle = model(&repo, "idle", &one, "pass", "    echo 'nothing to do'");
    let fixing = model(&repo, "fixing", &one, "pass", FIX_ADD);
    let submit = json!({"request": "fix calc", "work": true, "checks": ["python3 -m unittest -q"]});
    let mcp = |m: &str| -> J {
        let input = [
            json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}).to_string(),
            json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"submit","arguments":submit}}).to_string(),
        ];
        let (ok, out) = repo.mcp_batch(&["--cmd", m], &input);
        assert!(ok, "{out}");
        let r: J = serde_json::from_str(out.lines().nth(1).unwrap()).unwrap();
        r["result"].clone()
    };
    let r = mcp(&idle);
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(
        r["structuredContent"]["exit"],
        json!({"name": "nothing_delivered", "code": 11}),
        "{r}"
    );
    let r = mcp(&fixing);
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["exit"]["code"], 0, "{r}");
    // The daemon: the request went through, the outcome is in the report.
    repo.git_ok(&["reset", "--hard", "-q", "HEAD"]);
    let served = repo.serve(&["--cmd", &idle], Stdio::null());
    let (status, body) = http_json(&served.addr, "POST", "/submit", &submit);
    let mut child = served.child;
    procs::terminate(&child.0);
    assert!(child.0.wait().unwrap().success());
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["exit"],
        json!({"name": "nothing_delivered", "code": 11}),
        "{body}"
    );
}
