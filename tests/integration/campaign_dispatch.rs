//! `campaign run --work --dispatch`: each round's features go through a real NATS JetStream
//! server (see `dispatch_nats.rs`) to `git forum worker` processes in clones of a shared bare
//! remote, and the campaign's process stays the only ledger writer. The rounds record what a
//! local round records plus what a dispatched run records, every feature is merged once, and
//! the campaign ends where the same campaign run in process ends. Every process a test starts
//! is stopped by it.

use std::collections::BTreeMap;
use std::net::TcpListener;

use serde_json::{Value as J, json};

use crate::common::{self, Repo, on_each_kind};
use crate::dispatch_nats::{
    NatsServer, PLAN, clone, finish, logs, model, shared, spawned, task_results, worker,
};
use crate::work_run::{entries, kinds, payloads, setup};

/// Two features in the first round, and a third that waits for both (the second round,
/// which starts from the first round's merged changes). Each writes the file it names.
fn campaign() -> J {
    json!({"campaign_id": "d", "title": "dispatched", "projects": [
        {"project_id": "p", "owner": "forum", "priority": 1, "features": [
            {"feature_id": "a", "agent": "backend", "instruction": "write f1.txt", "priority": 9},
            {"feature_id": "b", "agent": "backend", "instruction": "write f2.txt", "priority": 8},
            {"feature_id": "c", "agent": "backend", "instruction": "write f3.txt",
             "depends_on": ["a", "b"]}
        ]}
    ]})
}

fn declare(repo: &Repo) {
    let file = repo.path().join("camp.json");
    std::fs::write(&file, campaign().to_string()).unwrap();
    repo.forum_ok(&["campaign", "declare", "--file", file.to_str().unwrap()]);
}

/// Each feature's status in a campaign room.
fn statuses(room: &J) -> BTreeMap<String, String> {
    room["features"]
        .as_array()
        .unwrap_or_else(|| panic!("not a room: {room}"))
        .iter()
        .map(|f| {
            (
                f["feature_id"].as_str().unwrap().to_string(),
                f["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The tree of the last round's run branch (the one holding every merged change).
fn last_tree(repo: &Repo) -> String {
    let plans = payloads(repo, "plan");
    let (seq, _) = plans.last().expect("a round ran");
    repo.git_ok(&["rev-parse", &format!("forum/run-{seq}^{{tree}}")])
}

/// The entry kinds, sorted: rounds run their features at once, so their entries interleave.
fn sorted_kinds(repo: &Repo) -> Vec<String> {
    let mut k = kinds(repo);
    k.sort();
    k
}

/// The same campaign run in process in a fresh repository of `kind`: its room, the last
/// round's tree and its entry kinds.
fn in_process(kind: &str) -> (J, String, Vec<String>) {
    let other = Repo::new(kind);
    setup(&other);
    let m = model(&other, PLAN);
    declare(&other);
    let room = other.forum_json(&["campaign", "run", "--work", "--check", "true", "--cmd", &m]);
    (room, last_tree(&other), sorted_kinds(&other))
}

#[test]
fn a_dispatched_campaign_merges_each_feature_once_and_ends_as_in_process() {
    on_each_kind(|repo| {
        let server = NatsServer::start();
        let (_bare, url) = shared(repo);
        let m = model(repo, PLAN);
        declare(repo);
        let clones: Vec<_> = (0..2).map(|_| clone(&url)).collect();
        let _w1 = worker(repo, clones[0].path(), &server, &m, &["--name", "w1"]);
        let _w2 = worker(repo, clones[1].path(), &server, &m, &["--name", "w2"]);
        let mut c = repo.forum();
        c.args([
            "--json",
            "campaign",
            "run",
            "--work",
            "--check",
            "true",
            "--dispatch",
            &server.url(),
            "--cmd",
            &m,
        ]);
        let (ok, room, err) = finish(spawned(c));
        let said = logs(&clones.iter().collect::<Vec<_>>());
        assert!(ok, "{err}\n{said}");
        let want: BTreeMap<String, String> = ["a", "b", "c"]
            .iter()
            .map(|f| (f.to_string(), "done".to_string()))
            .collect();
        assert_eq!(statuses(&room), want, "{room}\n{err}");
        assert_eq!(room["complete"], true, "{room}");
        // Two rounds: a and b at once, then c.
        let dispatches = payloads(repo, "campaign_dispatch");
        assert_eq!(dispatches.len(), 2, "{dispatches:?}");
        assert_eq!(dispatches[0].1["wave"], json!(["a", "b"]), "{dispatches:?}");
        assert_eq!(dispatches[1].1["wave"], json!(["c"]), "{dispatches:?}");
        // Each feature dispatched once, answered once by a worker, merged once.
        let sent = payloads(repo, "task_dispatched");
        let mut tasks: Vec<&str> = sent
            .iter()
            .map(|(_, p)| p["task"].as_str().unwrap())
            .collect();
        tasks.sort();
        assert_eq!(tasks, ["a", "b", "c"], "{sent:?}");
        let results = task_results(repo);
        assert_eq!(results.len(), 3, "{results:?}");
        for (_, r) in &results {
            assert!(["w1", "w2"].contains(&r["worker"].as_str().unwrap()), "{r}");
            assert_eq!(r["claims"]["checks"][0]["ok"], true, "{r}");
        }
        let merged: Vec<String> = payloads(repo, "ship")
            .iter()
            .filter(|(_, s)| s["decision"] == "merge")
            .map(|(_, s)| s["task"].as_str().unwrap_or_default().to_string())
            .collect();
        assert_eq!(merged.len(), 3, "{merged:?}");
        assert_eq!(payloads(repo, "integrated").len(), 3);
        assert!(payloads(repo, "duplicate_result").is_empty());
        // Each feature's status is witnessed by its task's result.
        for (_, st) in payloads(repo, "feature_status") {
            let w = st["witnessed_seq"].as_u64().unwrap();
            assert!(results.iter().any(|(s, _)| *s == w), "{st}");
        }
        // The second round's branch starts where the first ended: it holds the three changes.
        let plans = payloads(repo, "plan");
        let last = format!("forum/run-{}", plans[1].0);
        assert_eq!(
            repo.git_ok(&["rev-list", "--count", &format!("main..{last}")]),
            "3"
        );
        repo.forum_ok(&["verify", "--deep"]);
        // The same campaign in process: the same statuses, the same tree, and the same entries
        // but for each feature's task_dispatched.
        let (room_here, tree_here, kinds_here) = in_process(repo.kind());
        assert_eq!(statuses(&room), statuses(&room_here));
        assert_eq!(last_tree(repo), tree_here);
        let mut without: Vec<String> = sorted_kinds(repo);
        without.retain(|k| k != "task_dispatched");
        assert_eq!(without, kinds_here);
    });
}

#[test]
fn a_campaign_dispatch_without_work_or_to_an_unreachable_server_is_one_line_and_writes_nothing() {
    let repo = Repo::new(common::FORMATS[0]);
    let (_bare, _url) = shared(&repo);
    let m = model(&repo, PLAN);
    declare(&repo);
    let n = entries(&repo).len();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let nowhere = format!("nats://127.0.0.1:{port}");
    let o = repo
        .forum()
        .args(["campaign", "run", "--dispatch", &nowhere, "--cmd", &m])
        .output()
        .unwrap();
    common::one_line_error(&o, "add --work");
    let o = repo
        .forum()
        .args([
            "campaign",
            "run",
            "--work",
            "--dispatch",
            &nowhere,
            "--cmd",
            &m,
        ])
        .output()
        .unwrap();
    let line = common::one_line_error(&o, "cannot reach the NATS server");
    assert!(line.contains(&format!("127.0.0.1:{port}")), "{line}");
    assert_eq!(entries(&repo).len(), n);
    assert_eq!(repo.git_ok(&["branch", "--list", "forum/*"]).trim(), "");
}

#[test]
fn the_daemon_and_the_mcp_tool_dispatch_a_campaign_to_a_worker() {
    // The daemon: POST /campaign/run with dispatch.
    let repo = Repo::new(common::FORMATS[0]);
    let server = NatsServer::start();
    let (_bare, url) = shared(&repo);
    let m = model(&repo, PLAN);
    declare(&repo);
    let c = clone(&url);
    let _w = worker(&repo, c.path(), &server, &m, &["--name", "w"]);
    {
        let served = repo.serve(&["--cmd", &m], std::process::Stdio::null());
        let (code, room) = common::http_json(
            &served.addr,
            "POST",
            "/campaign/run",
            &json!({"work": true, "checks": ["true"], "dispatch": server.url()}),
        );
        assert_eq!(code, 200, "{room}\n{}", logs(&[&c]));
        assert_eq!(room["complete"], true, "{room}");
    }
    let results = task_results(&repo);
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(
        results.iter().all(|(_, r)| r["worker"] == "w"),
        "{results:?}"
    );
    repo.forum_ok(&["verify", "--deep"]);
    // MCP's campaign_run, in a repository (and on a server) of its own.
    let repo = Repo::new(common::FORMATS[0]);
    let server = NatsServer::start();
    let (_bare, url) = shared(&repo);
    let m = model(&repo, PLAN);
    declare(&repo);
    let c = clone(&url);
    let _w = worker(&repo, c.path(), &server, &m, &["--name", "w"]);
    let reply = repo.mcp_call(
        &["--cmd", &m],
        "campaign_run",
        json!({"work": true, "checks": ["true"], "dispatch": server.url()}),
    );
    let room = &reply["result"]["structuredContent"];
    assert_eq!(room["complete"], true, "{reply}\n{}", logs(&[&c]));
    assert_eq!(task_results(&repo).len(), 3);
    repo.forum_ok(&["verify", "--deep"]);
}
