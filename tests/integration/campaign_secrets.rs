//! A campaign run hands the scanner the runtime's key values as `submit` does, through the binary on every repository format: a scripted worker that echoes the
//! value of an `api_key_env` variable leaves the marker in git, never the value, in each task's
//! `result` and in the `feature_status` of a failed feature (whose reason repeats the worker's
//! error), each followed by a `secret_redacted` entry; the same through the daemon's
//! `POST /campaign/run`.

use serde_json::{Value as J, json};

use crate::common::{self, Repo, on_each_kind};

const API_KEY: &str = "sk-ant-campaign-Vq93LmX2pT7wZc";
const MARKER: &str = "[REDACTED:api-key-env]";

/// A worker that answers every task by echoing the key value, and fails a task that says
/// FAILME with the key in its error.
fn echoing_worker(repo: &Repo) -> String {
    let path = repo.path().join("echo-key.sh");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n  *FAILME*) echo \"rejected key {API_KEY}\" >&2; exit 3 ;;\n  *) echo \"done; the key I used is {API_KEY}\" ;;\nesac\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

/// A runtime config whose workers are `worker` and whose frontier tier reads its key from
/// `ANTHROPIC_API_KEY`.
fn runtime(repo: &Repo, worker: &str) -> String {
    let rt = repo.path().join("rt.toml");
    std::fs::write(
        &rt,
        format!(
            "[runtime.default]\ncmd = \"{worker}\"\n\n[runtime.tiers.frontier]\napi = \"anthropic\"\nmodel = \"claude-test\"\napi_key_env = \"ANTHROPIC_API_KEY\"\n\n[seats]\nworker = {{ cmd = \"{worker}\" }}\norchestrator = {{ cmd = \"{worker}\" }}\n"
        ),
    )
    .unwrap();
    rt.to_str().unwrap().to_string()
}

fn declare(repo: &Repo) {
    let camp = repo.path().join("c.json");
    let c = json!({"campaign_id": "c", "title": "t", "projects": [
        {"project_id": "p", "owner": "forum", "priority": 1, "features": [
            {"feature_id": "creds", "agent": "backend", "instruction": "set up the deploy credentials", "priority": 3},
            {"feature_id": "leak", "agent": "backend", "instruction": "rotate them FAILME", "priority": 2},
            {"feature_id": "after", "agent": "backend", "instruction": "use them", "priority": 1, "depends_on": ["creds"]}
        ]}
    ]});
    std::fs::write(&camp, c.to_string()).unwrap();
    repo.forum_ok(&["campaign", "declare", "--file", camp.to_str().unwrap()]);
}

/// Every object in the repository.
fn all_objects(repo: &Repo) -> String {
    let o = repo.git(&["cat-file", "--batch-all-objects", "--batch", "--unordered"]);
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The ledger's entries, oldest first.
fn entries(repo: &Repo) -> Vec<J> {
    let mut log = repo.forum_json(&["log"]).as_array().unwrap().clone();
    log.reverse();
    log
}

/// The key never reached git; each `result` (three tasks) and the failed feature's
/// `feature_status` carry the marker and are followed by a `secret_redacted` entry naming it.
fn check_record(repo: &Repo, room: &J) {
    let objects = all_objects(repo);
    assert!(!objects.contains(API_KEY), "the key value reached git");
    assert!(objects.contains(MARKER));
    let log = entries(repo);
    let kind = |e: &J| e["kind"].as_str().unwrap().to_string();
    let redacted: Vec<(u64, String)> = log
        .iter()
        .filter(|e| kind(e) == "secret_redacted")
        .map(|e| {
            let seq = e["seq"].as_u64().unwrap();
            let body = repo.forum_json(&["show", &seq.to_string(), "--payload"])["payload"].clone();
            assert_eq!(body["rules"], json!(["api-key-env"]), "{body}");
            (
                body["seq"].as_u64().unwrap(),
                body["entry_kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (k, n) in [("result", 3), ("feature_status", 1)] {
        let witnessed = redacted.iter().filter(|(_, rk)| rk == k).count();
        assert_eq!(witnessed, n, "{k}: {redacted:?}");
    }
    let feature = |id: &str| {
        room["features"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["feature_id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(feature("creds")["status"], "done", "{room}");
    assert_eq!(feature("after")["status"], "done", "{room}");
    let leak = feature("leak");
    assert_eq!(leak["status"], "failed", "{room}");
    let reason = leak["reason"].as_str().unwrap();
    assert!(reason.contains(MARKER), "{reason}");
    repo.forum_ok(&["verify", "--deep"]);
    repo.fsck();
}

#[test]
fn a_campaign_run_redacts_the_api_key_env_value_its_worker_echoes() {
    on_each_kind(|repo| {
        let rt = runtime(repo, &echoing_worker(repo));
        declare(repo);
        let o = repo
            .forum()
            .env("ANTHROPIC_API_KEY", API_KEY)
            .args(["--json", "campaign", "run", "--runtime-config", &rt])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let room: J = serde_json::from_slice(&o.stdout).unwrap();
        check_record(repo, &room);
    });
}

#[test]
fn the_daemons_campaign_run_redacts_it_too() {
    let repo = Repo::new("sha256");
    let rt = runtime(&repo, &echoing_worker(&repo));
    declare(&repo);
    let served = repo.serve_with_env(
        &["--runtime-config", &rt],
        std::process::Stdio::null(),
        &[("ANTHROPIC_API_KEY", API_KEY)],
    );
    let (code, room) = common::http_json(
        &served.addr,
        "POST",
        "/campaign/run",
        &json!({"campaign_id": "c"}),
    );
    assert_eq!(code, 200, "{room}");
    drop(served);
    check_record(&repo, &room);
}
