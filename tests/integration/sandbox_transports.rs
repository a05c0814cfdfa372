//! The daemon's `/submit` and the MCP tool `submit` take the sandbox options of the command
//! line (`sandbox`, `sandbox_net`; `allow_cmds` and `max_tool_calls` too), through the binary:
//! `sandbox: false` records the same choice as `--no-sandbox` over all three, and a bad value
//! is refused in one line in the words the CLI uses, with nothing written.

use serde_json::{Value as J, json};

use crate::common::{Repo, http_json, on_each_kind};
use crate::procs;
use crate::work_run::{payloads, setup};

/// A command model of one task that passes, ships and answers; its worker changes nothing.
fn model(repo: &Repo) -> String {
    let plan = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"look at calc.py","depends_on":[],"done_when":["the tests pass"]}]}"#;
    procs::executable(
        &repo.path().join("model.sh"),
        &format!(
            "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{plan}' ;;\n  *\"Decide whether to ship\"*) echo '{{\"decision\":\"merge\",\"reason\":\"scripted\"}}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'Looked at calc.' ;;\n  *) echo 'calc.py looks fine' ;;\nesac\n"
        ),
    )
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// Calls the MCP tool `submit` with `arguments`; returns its result (`isError`, `content`).
fn mcp_submit(repo: &Repo, model: &str, arguments: J) -> J {
    let call = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"submit","arguments":arguments}});
    let (ok, out) = repo.mcp_batch(&["--cmd", model], &[INIT.to_string(), call.to_string()]);
    assert!(ok, "{out}");
    out.lines()
        .map(|l| serde_json::from_str::<J>(l).unwrap())
        .find(|m| m["id"] == 2)
        .unwrap_or_else(|| panic!("no reply to the call: {out}"))["result"]
        .clone()
}

#[test]
fn sandbox_false_records_the_same_choice_as_no_sandbox_over_cli_http_and_mcp() {
    on_each_kind(|repo| {
        setup(repo);
        let m = model(repo);
        // The worker changes nothing: the run ends `nothing_delivered` (exit 11).
        let o = repo
            .forum()
            .args([
                "submit",
                "--quiet",
                "--work",
                "--check",
                "true",
                "--no-sandbox",
                "--cmd",
                &m,
                "look at calc",
            ])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(11), "{o:?}");
        let args =
            json!({"request": "look at calc", "work": true, "checks": ["true"], "sandbox": false});
        let served = repo.serve(&["--cmd", &m], std::process::Stdio::null());
        let (code, body) = http_json(&served.addr, "POST", "/submit", &args);
        assert_eq!(code, 200, "{body}");
        drop(served);
        let done = mcp_submit(repo, &m, args);
        // The run went through and delivered nothing, as on the command line (exit 11).
        assert_eq!(done["isError"], true, "{done}");
        assert_eq!(done["structuredContent"]["exit"]["code"], 11, "{done}");
        let requests = payloads(repo, "request");
        assert_eq!(requests.len(), 3, "{requests:?}");
        for (_, r) in &requests {
            assert_eq!(
                r["work"]["sandbox"],
                json!({"confined": false, "reason": "--no-sandbox"}),
                "{r}"
            );
            assert_eq!(r["options"], json!({"sandbox": false}), "{r}");
        }
        repo.forum_ok(&["verify", "--deep"]);
    });
}

#[test]
fn bad_sandbox_and_tool_values_are_refused_in_one_line_in_the_clis_words() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let m = model(&repo);
    let before = repo.snapshot();
    let served = repo.serve(&["--cmd", &m], std::process::Stdio::null());
    // (CLI flags, the same over HTTP and MCP, the words all three use)
    let cases: [(&[&str], J, &str); 3] = [
        (
            &["--no-sandbox", "--sandbox-net"],
            json!({"sandbox": false, "sandbox_net": true}),
            "--sandbox-net keeps the network inside the sandbox",
        ),
        (
            &["--max-tool-calls", "0"],
            json!({"max_tool_calls": 0}),
            "--max-tool-calls 0: give a number from 1 to",
        ),
        (
            &["--allow-cmd", " "],
            json!({"allow_cmds": [" "]}),
            "--allow-cmd \" \": give a non-empty shell command",
        ),
    ];
    for (flags, fields, words) in cases {
        let mut argv = vec!["submit", "--work", "--check", "true", "--cmd", &m];
        argv.extend_from_slice(flags);
        argv.push("look at calc");
        let o = repo.forum().args(&argv).output().unwrap();
        let line = crate::common::one_line_error(&o, words);
        assert_eq!(o.status.code(), Some(2), "{line}");
        let cli = line.trim_end().trim_start_matches("error: ").to_string();
        let mut args = json!({"request": "look at calc", "work": true, "checks": ["true"]});
        for (k, v) in fields.as_object().unwrap() {
            args[k] = v.clone();
        }
        let (code, body) = http_json(&served.addr, "POST", "/submit", &args);
        assert_eq!(code, 400, "{args}: {body}");
        assert_eq!(body["error"], cli, "{args}");
        let done = mcp_submit(&repo, &m, args.clone());
        assert_eq!(done["isError"], true, "{done}");
        let text = done["content"][0]["text"].as_str().unwrap();
        let said: J = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert_eq!(said["error"], cli, "{text}");
    }
    // A value of the wrong type is refused over HTTP in one line naming the field.
    let (code, body) = http_json(
        &served.addr,
        "POST",
        "/submit",
        &json!({"request": "look at calc", "work": true, "checks": ["true"], "sandbox": "yes"}),
    );
    assert_eq!(code, 400, "{body}");
    let e = body["error"].as_str().unwrap();
    assert!(e.contains("\"sandbox\" must be true or false"), "{e}");
    assert_eq!(e.lines().count(), 1);
    drop(served);
    assert_eq!(repo.snapshot(), before, "a refused submit wrote something");
    // The MCP tool says it takes them.
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let (ok, out) = repo.mcp_batch(&[], &[INIT, list]);
    assert!(ok, "{out}");
    let tools: J = serde_json::from_str(out.lines().nth(1).unwrap()).unwrap();
    let submit = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "submit")
        .unwrap()
        .clone();
    let props = &submit["inputSchema"]["properties"];
    for key in ["sandbox", "sandbox_net"] {
        assert_eq!(props[key]["type"], "boolean", "{submit}");
    }
}
