//! MCP's stateless revision (2026-07-28) beside the handshake: a client that first sends
//! `server/discover` (as the current Python SDK does) gets the supported revisions, the
//! capabilities and the instructions instead of −32601, and its later requests, which name the
//! revision in `_meta`, get that revision's result shape; a revision the server does not speak
//! gets −32022 with the list; `initialize` still answers older clients as before. Through the
//! binary on stdio, and in process over the dispatcher the daemon serves.

use git_forum::serve::dispatch::{Config, Dispatcher};
use git_forum::serve::mcp::Mcp;
use serde_json::{Value as J, json};

use crate::common::Repo;

const MODERN: &str = "2026-07-28";

/// The `_meta` a stateless client stamps on every request.
fn meta(version: &str) -> J {
    json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

/// What a stateless client sends, in order, with no handshake: the probe, the tool list, a
/// call, a probe at a revision from the future, and an older client's `initialize`.
fn lines() -> Vec<String> {
    [
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta(MODERN)}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta(MODERN)}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "status", "arguments": {}, "_meta": meta(MODERN)}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "server/discover", "params": {"_meta": meta("2099-01-01")}}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 7, "method": "server/discover"}),
    ]
    .iter()
    .map(J::to_string)
    .collect()
}

/// Checks the replies to [`lines`], whichever transport carried them.
fn check(replies: &[J]) {
    let by_id = |id: u64| {
        replies
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("no reply to {id}: {replies:?}"))
    };
    let d = &by_id(1)["result"];
    assert_eq!(d["supportedVersions"][0], MODERN, "{d}");
    assert!(
        d["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2025-11-25")),
        "{d}"
    );
    assert_eq!(
        d["capabilities"]["tools"],
        json!({"listChanged": false}),
        "{d}"
    );
    assert!(
        d["instructions"].as_str().unwrap().contains("ledger"),
        "{d}"
    );
    assert_eq!(d["resultType"], "complete", "{d}");
    assert_eq!(
        (d["ttlMs"].as_u64(), d["cacheScope"].as_str()),
        (Some(0), Some("public"))
    );
    assert_eq!(
        d["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "git-forum"
    );
    let tools = &by_id(2)["result"];
    assert!(tools["tools"].as_array().unwrap().len() > 10, "{tools}");
    assert_eq!(tools["resultType"], "complete");
    assert_eq!(tools["cacheScope"], "public");
    assert!(tools["ttlMs"].is_u64());
    let called = &by_id(3)["result"];
    assert_eq!(called["isError"], false, "{called}");
    assert_eq!(called["resultType"], "complete", "{called}");
    assert!(
        called.get("ttlMs").is_none(),
        "a call is not cacheable: {called}"
    );
    let refused = &by_id(4)["error"];
    assert_eq!(refused["code"], -32022, "{refused}");
    assert_eq!(refused["data"]["supported"], json!([MODERN]), "{refused}");
    // The handshake era is answered as before: no stateless fields.
    let init = &by_id(5)["result"];
    assert_eq!(init["protocolVersion"], "2025-11-25", "{init}");
    assert_eq!(init["serverInfo"]["name"], "git-forum", "{init}");
    assert!(init.get("resultType").is_none(), "{init}");
    let old_list = &by_id(6)["result"];
    assert!(old_list.get("resultType").is_none() && old_list.get("ttlMs").is_none());
    assert_eq!(old_list["tools"], tools["tools"]);
    // A probe without `_meta` is still a probe.
    assert_eq!(by_id(7)["result"]["supportedVersions"][0], MODERN);
    assert!(
        replies.iter().all(|r| r["error"]["code"] != -32601),
        "{replies:?}"
    );
}

#[test]
fn server_discover_answers_over_stdio() {
    let repo = Repo::new("sha1");
    let (ok, out) = repo.mcp_batch(&[], &lines());
    assert!(ok, "{out}");
    let replies: Vec<J> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(replies.len(), lines().len(), "{out}");
    check(&replies);
}

#[test]
fn server_discover_answers_in_process_over_the_daemons_dispatcher() {
    let repo = Repo::new("reftable");
    let mut cfg = Config::new(repo.path(), "main");
    cfg.timestamp = Some(1000.0);
    let d = Dispatcher::open(cfg).expect("open the dispatcher");
    let mcp = Mcp::new(&d);
    let replies: Vec<J> = lines()
        .iter()
        .map(|l| mcp.handle_line(l.as_bytes()).expect("a reply"))
        .collect();
    check(&replies);
}

/// The official MCP Python SDK (`pip install mcp`, 2.3 or later) connects without falling back
/// to the handshake. It needs that package: `GIT_FORUM_TEST_MCP_PYTHON` names a Python that
/// has it; without it the test says it is skipped.
#[test]
fn heavy_the_python_sdk_connects_on_the_stateless_revision() {
    let Ok(python) = std::env::var("GIT_FORUM_TEST_MCP_PYTHON") else {
        assert!(
            !std::env::var("GIT_FORUM_REQUIRE_AGENTS").is_ok_and(|v| v == "1"),
            "GIT_FORUM_TEST_MCP_PYTHON is unset, and GIT_FORUM_REQUIRE_AGENTS=1: run scripts/agent-clis install, then eval \"$(scripts/agent-clis env)\""
        );
        eprintln!(
            "skipped: GIT_FORUM_TEST_MCP_PYTHON names no Python with the mcp package (pip install mcp)"
        );
        return;
    };
    let repo = Repo::new("sha1");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/integration/data/mcp/sdk_client.py"
    );
    let o = std::process::Command::new(python)
        .args([script, env!("CARGO_BIN_EXE_git-forum")])
        .arg(repo.path())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        format!("auto {MODERN}"),
        "no fallback to initialize: {out}"
    );
    assert_eq!(lines[1], "server git-forum", "{out}");
    assert_eq!(lines[3], "status_error False", "{out}");
    assert_eq!(lines[4], "legacy 2025-11-25", "{out}");
}
