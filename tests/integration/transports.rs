//! The three transports take one typed request per operation (`src/surface/request`): for
//! every MCP tool, the command line, the daemon over HTTP (with its token) and `git forum mcp`
//! over stdio accept the same fields under the same names, and refuse the same bad value with
//! the same words. The API reference in docs/api.md is what the requests generate.

use std::process::Stdio;

use git_forum::serve::mcp::{Input, TOOLS, Target, Tool};
use git_forum::surface::request::Field;
use serde_json::{Map, Value as J, json};

use crate::common::{Repo, http_json};

/// The command line's subcommand for each tool that has one.
fn cli_of(tool: &str) -> Option<&'static [&'static str]> {
    Some(match tool {
        "submit" => &["submit"],
        "resume" => &["resume"],
        "halt" => &["halt"],
        "route" => &["route"],
        "plan" => &["plan"],
        "forum.prose.humanize" => &["humanize"],
        "forum.context.preflight" => &["context", "preflight"],
        "bench" => &["bench"],
        "ledger_log" => &["log"],
        "ledger_replay" => &["replay"],
        "ledger_get" => &["show"],
        "ledger_why" => &["why"],
        "ledger_prove" => &["prove"],
        "ledger_append" => &["append"],
        "gate_approve" => &["gate", "approve"],
        "gate_edit" => &["gate", "edit"],
        "gate_reject" => &["gate", "reject"],
        "forum.import_trace" => &["import-trace"],
        "forum.mine" => &["mine"],
        "campaign_declare" => &["campaign", "declare"],
        "campaign_status" => &["campaign", "status"],
        "campaign_next" => &["campaign", "next"],
        "campaign_ingest_status" => &["campaign", "ingest-status"],
        "campaign_run" => &["campaign", "run"],
        "worker_start" => &["worker"],
        "forum.run.grade" => &["grade"],
        "forum.export_gradable" => &["export-gradable"],
        "witness" => &["witness"],
        "diff" => &["diff"],
        "blame" => &["blame"],
        "apply" => &["apply"],
        "discard" => &["discard"],
        "tlog_prove" => &["prove"],
        "tlog_checkpoint" => &["checkpoint"],
        "tlog_read" => &["tiles", "get"],
        "hooks_check" => &["hooks", "check"],
        _ => return None,
    })
}

/// A value of the field's type that passes its type check.
fn good(f: &Field) -> J {
    match f.ty.as_str() {
        "string" => json!("x"),
        "integer" => json!(1),
        "number" => json!(1),
        "boolean" => json!(true),
        "array" => json!([]),
        _ => json!({}),
    }
}

/// A value of another type, and the refusal the request's schema promises for it.
fn bad(f: &Field) -> Option<(J, String)> {
    if f.any {
        return None;
    }
    let key = &f.name;
    if let Some(words) = &f.refusal {
        return Some((json!(5), words.clone()));
    }
    Some(match f.ty.as_str() {
        "string" => (
            json!(5),
            format!("field {key:?} must be a string, not an integer"),
        ),
        "integer" => (
            json!("x"),
            format!(
                "field {key:?} must be {}, not a string",
                if f.minimum.is_some() {
                    "a non-negative integer"
                } else {
                    "an integer"
                }
            ),
        ),
        "number" => (
            json!("x"),
            format!("field {key:?} must be a number, not a string"),
        ),
        "boolean" => (
            json!("x"),
            format!("field {key:?} must be true or false, not a string"),
        ),
        "array" if f.items.as_deref() == Some("string") => (
            json!([5]),
            format!("field {key:?} must be a list of shell commands (strings)"),
        ),
        "array" => (
            json!("x"),
            format!("field {key:?} must be a list, not a string"),
        ),
        _ => (
            json!("x"),
            format!("field {key:?} must be an object, not a string"),
        ),
    })
}

/// The bodies that refuse one field each, with the refusal: the fields before it that a body
/// needs are given good values, so the field's own check is the one that speaks.
fn refusals(tool: &Tool) -> Vec<(J, String)> {
    let spec = tool.spec();
    let mut out = Vec::new();
    let unknown = format!(
        "unknown field \"zz_unknown\" ({})",
        if spec.fields.is_empty() {
            "this route takes no fields".to_string()
        } else {
            format!("known fields: {}", spec.names().join(", "))
        }
    );
    out.push((json!({"zz_unknown": 1}), unknown));
    let mut before = Map::new();
    for f in &spec.fields {
        if let Some((value, words)) = bad(f) {
            let mut body = before.clone();
            body.insert(f.name.clone(), value);
            out.push((J::Object(body), words));
        }
        if f.required {
            let body = before.clone();
            let words = f
                .refusal
                .clone()
                .unwrap_or_else(|| format!("field {:?} is required", f.name));
            out.push((J::Object(body), words));
            before.insert(f.name.clone(), good(f));
        }
    }
    out
}

/// The error text of an MCP `tools/call` reply.
fn mcp_error(reply: &J) -> String {
    let text = reply["result"]["content"][0]["text"].as_str().unwrap_or("");
    let body: J = serde_json::from_str(text).unwrap_or(J::Null);
    body["error"].as_str().unwrap_or("").to_string()
}

#[test]
fn every_tool_lists_the_schema_its_request_generates() {
    let repo = Repo::new("sha1");
    let (ok, out) = repo.mcp_batch(
        &[],
        &[
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        ],
    );
    assert!(ok, "{out}");
    let list: J = out
        .lines()
        .map(|l| serde_json::from_str::<J>(l).unwrap())
        .find(|r| r["id"] == 2)
        .unwrap();
    let tools = list["result"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), TOOLS.len());
    for (listed, tool) in tools.iter().zip(TOOLS) {
        let spec = tool.spec();
        assert_eq!(listed["name"], tool.name);
        assert_eq!(
            listed["description"],
            spec.description.as_str(),
            "{}",
            tool.name
        );
        assert_eq!(listed["inputSchema"], spec.input_schema(), "{}", tool.name);
        for f in &spec.fields {
            assert!(!f.description.is_empty(), "{}: {}", tool.name, f.name);
            assert!(
                !(f.required && f.default.is_some()),
                "{}: {} is required and has a default",
                tool.name,
                f.name
            );
        }
    }
}

/// The tools whose command-line arguments are still declared in `src/cli/` instead of coming
/// from their request (each flag is still the field's name, but its help is the command
/// line's own): none.
const DECLARED_TWICE: &[&str] = &[];

/// The clap command of a subcommand path, from the binary's own definition.
fn subcommand(path: &[&str]) -> clap::Command {
    let mut cmd = git_forum::cli::command();
    for name in path {
        cmd = cmd
            .find_subcommand(name)
            .unwrap_or_else(|| panic!("no subcommand {path:?}"))
            .clone();
    }
    cmd
}

/// Help text as a doc comment gives it, without the full stop clap drops from a one-line help.
fn plain(text: &str) -> String {
    text.trim().trim_end_matches('.').to_string()
}

#[test]
fn the_command_line_takes_each_field_under_the_flag_its_request_names() {
    let mut wrong = Vec::new();
    let mut covered = 0;
    for tool in TOOLS {
        let Some(sub) = cli_of(tool.name) else {
            continue;
        };
        covered += 1;
        let cmd = subcommand(sub);
        let shared = !DECLARED_TWICE.contains(&tool.name);
        for f in tool.spec().fields {
            let at = format!("{} ({}): {}", tool.name, sub.join(" "), f.name);
            // The request's text the command line takes as its words, joined with spaces.
            if f.words {
                let words = cmd.get_arguments().find(|a| {
                    a.get_id().as_str() == f.name
                        && a.is_positional()
                        && matches!(a.get_action(), clap::ArgAction::Append)
                });
                if words.is_none() {
                    wrong.push(format!("{at}: the command line takes no words {}", f.name));
                }
                continue;
            }
            // A field without a flag is a positional argument or one only the daemon and MCP
            // take (a hidden argument).
            let Some(flag) = &f.flag else { continue };
            let kebab = f.name.replace('_', "-");
            if *flag != format!("--{kebab}") {
                wrong.push(format!("{at}: the request's flag is {flag}, not --{kebab}"));
            }
            let Some(arg) = cmd.get_arguments().find(|a| a.get_long() == Some(&kebab)) else {
                wrong.push(format!("{at}: the command line has no --{kebab}"));
                continue;
            };
            if arg.get_id().as_str() != f.name {
                wrong.push(format!("{at}: --{kebab} is argument {}", arg.get_id()));
            }
            let help = arg
                .get_long_help()
                .or(arg.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default();
            if shared && plain(&help) != plain(&f.description) {
                wrong.push(format!(
                    "{at}: --{kebab}'s help is not the request's doc comment: {help:?} vs {:?}",
                    f.description
                ));
            }
        }
    }
    assert!(covered >= 25, "{covered}");
    assert!(
        wrong.is_empty(),
        "the command line drifted from the requests: {wrong:#?}"
    );
}

#[test]
fn http_and_mcp_refuse_the_same_bad_value_with_the_same_words() {
    let repo = Repo::new("sha1");
    repo.append("me", "note", r#"{"n": 1}"#);
    let served = repo.serve(&[], Stdio::null());
    let mut cases: Vec<(&Tool, J, String)> = Vec::new();
    for tool in TOOLS {
        let (Input::Typed(_), Target::Post(_)) = (tool.input, tool.target) else {
            continue;
        };
        for (body, words) in refusals(tool) {
            cases.push((tool, body, words));
        }
    }
    assert!(cases.len() > 100, "{}", cases.len());
    let mut lines = vec![
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#.to_string(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string(),
    ];
    for (i, (tool, body, _)) in cases.iter().enumerate() {
        lines.push(
            json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                "params": {"name": tool.name, "arguments": body}})
            .to_string(),
        );
    }
    let (_, out) = repo.mcp_batch(&[], &lines);
    let replies: Vec<J> = out
        .lines()
        .map(|l| serde_json::from_str::<J>(l).unwrap())
        .collect();
    for (i, (tool, body, words)) in cases.iter().enumerate() {
        let Target::Post(path) = tool.target else {
            unreachable!()
        };
        let (code, answer) = http_json(&served.addr, "POST", path, body);
        assert_eq!(code, 400, "{path} {body}: {answer}");
        assert_eq!(answer["error"], words.as_str(), "HTTP {path} {body}");
        let reply = replies
            .iter()
            .find(|r| r["id"] == i + 1)
            .unwrap_or_else(|| panic!("no MCP reply to {}", i + 1));
        assert_eq!(reply["result"]["isError"], true, "{reply}");
        assert_eq!(mcp_error(reply), *words, "MCP {} {body}", tool.name);
    }
}

#[test]
fn the_api_reference_is_what_the_requests_generate() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/api.md");
    let want = format!("{}\n", git_forum::serve::api_doc::markdown().trim_end());
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/api.md differs from what the typed requests generate: run `git forum __api-doc > docs/api.md`"
    );
}

/// Every spelling the command line took before its arguments came from the requests still
/// parses: the old flag names (now aliases), the words of a request, and the flags only the
/// command line has.
#[test]
fn the_spellings_the_command_line_took_still_parse() {
    let run_flags: &[&str] = &[
        "--max-model-calls",
        "3",
        "--max-seconds",
        "1.5",
        "--context-token-budget",
        "10",
        "--request-context-token-budget",
        "10",
        "--task-context-token-budget",
        "10",
        "--upstream-token-budget",
        "10",
        "--context-cmd",
        "cat",
        "--context-timeout",
        "5",
        "--no-repo-context",
        "--repo-context",
        "--judge-intent",
        "--revise",
        "--verify-cmd",
        "true",
        "--verify-timeout",
        "5",
        "--max-output-tokens",
        "100",
        "--max-tokens",
        "1000",
        "--max-cost-usd",
        "0.5",
        "--checkpoint-each-wave",
        "--delivery-profile",
        "engineer",
        "--gate-wave",
        "0",
        "--gate-waves",
        "1",
        "--gate-deadline",
        "60",
        "--gate-on-expiry",
        "approve",
        "--work",
        "--check",
        "true",
        "--checks",
        "true",
        "--check-timeout",
        "30",
        "--allow-cmd",
        "ls",
        "--allow-cmds",
        "ls",
        "--max-tool-calls",
        "5",
        "--sandbox",
        "--no-sandbox",
        "--sandbox-net",
        "--sandbox-read",
        "/tmp",
        "--roster",
        "r.toml",
        "--policy",
        "p.toml",
        "--secrets",
        "block",
        "-q",
        "--cmd",
        "echo",
    ];
    let mut cases: Vec<Vec<&str>> = vec![
        [&["submit", "fix", "the", "bug"][..], run_flags].concat(),
        [&["resume", "7"][..], run_flags].concat(),
        vec!["submit", "--resume", "--use-capsule-context", "--progress"],
        vec![
            "context",
            "preflight",
            "--use-capsule-context",
            "--max-items",
            "3",
            "--max-text-chars",
            "9",
            "--context-token-budget",
            "5",
            "--no-repo-context",
            "--repo-context",
            "two",
            "words",
        ],
        vec!["context", "preflight", "--context-cmd", "cat", "x"],
        vec!["route", "two", "words", "--roster", "r.toml", "--record"],
        vec!["prove", "3", "--size", "5", "--out", "p.json"],
        vec!["prove", "--consistency-from", "2", "--tlog"],
        vec!["prove", "3", "--tlog-proof"],
        vec![
            "import-trace",
            "--format",
            "otel",
            "--max-bytes",
            "9",
            "t.json",
        ],
        vec![
            "mine",
            "-",
            "--format",
            "otlp",
            "--min-checks",
            "3",
            "--out",
            "o",
        ],
        vec![
            "witness",
            "offer.txt",
            "--state",
            "d",
            "--note-verifier",
            "k",
        ],
        vec!["plan", "--file", "p.json", "--record", "--parent", "1"],
    ];
    cases.push(vec!["submit", "--no-sandbox", "--sandbox", "x"]);
    for args in cases {
        let argv = std::iter::once("git-forum").chain(args.iter().copied());
        if let Err(e) = git_forum::cli::command().try_get_matches_from(argv) {
            panic!("{args:?} no longer parses: {e}");
        }
    }
    // What the command line refused, it still refuses.
    for args in [
        &["submit", "--resume", "x"][..],
        &["prove", "3", "--consistency-from", "2"],
        &["prove"],
        &["submit", "--gate-on-expiry", "maybe", "x"],
        &["import-trace"],
        &["witness"],
        &["plan"],
    ] {
        let argv = std::iter::once("git-forum").chain(args.iter().copied());
        assert!(
            git_forum::cli::command()
                .try_get_matches_from(argv)
                .is_err(),
            "{args:?} parses"
        );
    }
}
