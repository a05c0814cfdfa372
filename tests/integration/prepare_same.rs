//! Every way of starting a run assembles it the same way (`surface::run::prepare`): the same
//! request submitted through the command line, the daemon over HTTP and the MCP server, each
//! on its own repository with the same scripted model, records the same `request` body (the
//! run's recorded runtime and options among it), the same `route` and `plan` bodies where
//! there are any, and the same kinds of entries in the same order.

use std::process::Stdio;

use serde_json::{Value as J, json};

use crate::common::Repo;

const PLAN: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":[]}]}"#;

const REQUEST: &str = "ship a login API";

/// A model as a shell script in `dir`: plans PLAN, passes every verdict, answers, and does a
/// task as "done". Its path is its model id, so the three repositories share one script.
fn model(dir: &std::path::Path) -> String {
    let path = dir.join("model.sh");
    let body = format!(
        "#!/bin/sh\ncase \"$1\" in\n  *\"Break this request\"*) echo '{PLAN}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'Shipped.' ;;\n  *) echo done ;;\nesac\n"
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

/// The kind of every entry, and the bodies of the request, route and plan entries.
fn recorded(repo: &Repo) -> (Vec<String>, Vec<J>) {
    let log = repo.forum_json(&["log"]);
    let entries = log
        .as_array()
        .or_else(|| log["entries"].as_array())
        .unwrap_or_else(|| panic!("a log: {log}"))
        .clone();
    let mut kinds = Vec::new();
    let mut bodies = Vec::new();
    for e in entries {
        let kind = e["kind"].as_str().unwrap().to_string();
        if ["request", "route", "plan"].contains(&kind.as_str()) {
            let seq = e["seq"].as_u64().unwrap().to_string();
            let shown = repo.forum_json(&["show", &seq, "--payload"]);
            bodies.push(json!({"kind": kind, "payload": shown["payload"].clone()}));
        }
        kinds.push(kind);
    }
    (kinds, bodies)
}

#[test]
fn a_submit_records_the_same_request_route_and_plan_on_every_surface() {
    let shared = tempfile::tempdir().unwrap();
    let m = model(shared.path());

    let cli = Repo::new("sha1");
    cli.forum_ok(&["submit", "--quiet", "--cmd", &m, REQUEST]);

    let http = Repo::new("sha1");
    {
        let served = http.serve(&["--cmd", &m], Stdio::null());
        let (code, body) = crate::common::http_json(
            &served.addr,
            "POST",
            "/submit",
            &json!({"request": REQUEST}),
        );
        assert_eq!(code, 200, "{body}");
    }

    let mcp = Repo::new("sha1");
    let lines = [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "submit", "arguments": {"request": REQUEST}}})
        .to_string(),
    ];
    let (ok, out) = mcp.mcp_batch(&["--cmd", &m], &lines);
    assert!(ok, "{out}");

    let (cli_kinds, cli_bodies) = recorded(&cli);
    for kind in ["request", "plan"] {
        assert!(
            cli_bodies.iter().any(|b| b["kind"] == kind),
            "no {kind} recorded: {cli_bodies:?}"
        );
    }
    for (name, repo) in [("the daemon", &http), ("the MCP server", &mcp)] {
        let (kinds, bodies) = recorded(repo);
        assert_eq!(kinds, cli_kinds, "the command line and {name}");
        assert_eq!(
            without_time_cap(bodies),
            cli_bodies,
            "the command line and {name}"
        );
    }
}

/// `bodies` without the time limit the request records among its rules: the daemon and the
/// MCP server hold every run to their submit limit, which the command line has not, and the
/// request records the limit its run ran under.
fn without_time_cap(mut bodies: Vec<J>) -> Vec<J> {
    for b in &mut bodies {
        if let Some(limits) = b
            .pointer_mut("/payload/rules/limits")
            .and_then(J::as_object_mut)
        {
            assert!(limits.remove("max_seconds").is_some(), "{limits:?}");
        }
    }
    bodies
}
