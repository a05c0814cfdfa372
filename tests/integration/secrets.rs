//! Secrets never enter the record (issue 19, point 1), through the binary on every repository
//! format: a scripted worker that prints an AWS-style key and a private key block leaves
//! markers in git and `secret_redacted` entries that say where; `--secrets block` stops the run
//! with a witnessed reason and no secret in any object; an `api_key_env` value echoed by the
//! model is redacted.

use serde_json::Value as J;

use crate::common::{Repo, on_each_kind};

const AWS_ID: &str = "AKIAQX7RTY2ZW4NB9K3M";
const KEY_LINE: &str = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw";
const API_KEY: &str = "sk-ant-test-Zq81bLmN4xTc92Pw";
const PLAN: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"look up the deploy credentials","depends_on":[],"done_when":[]}]}"#;
const ANSWER: &str =
    "Looked up the deploy credentials and reported where they live; next step: rotate them.";

/// A model as a shell script: plans one task, passes its verdict, answers ANSWER, and does the
/// task by printing an AWS-style key id, a private key block and `extra`.
fn leaky_model(repo: &Repo, extra: &str) -> String {
    let path = repo.path().join("leaky.sh");
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{PLAN}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo '{ANSWER}' ;;\n  *) printf 'found key {AWS_ID} and\\n-----BEGIN RSA PRIVATE KEY-----\\n{KEY_LINE}\\n-----END RSA PRIVATE KEY-----\\n{extra}\\n' ;;\nesac\n"
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

/// Every object in the repository, as `git cat-file --batch-all-objects --batch` prints them.
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

fn payload(repo: &Repo, seq: u64) -> J {
    repo.forum_json(&["show", &seq.to_string(), "--payload"])["payload"].clone()
}

/// The raw body blob of the entry at `seq`, read with `git cat-file`.
fn raw_body(repo: &Repo, seq: u64) -> String {
    let commits = repo.git_ok(&["rev-list", "--reverse", "refs/forum/ledgers/main"]);
    let commit = commits.lines().nth(seq as usize).unwrap();
    repo.git_ok(&["cat-file", "-p", &format!("{commit}:payload.json")])
}

#[test]
fn a_worker_that_prints_keys_leaves_markers_and_secret_redacted_entries() {
    on_each_kind(|repo| {
        let model = leaky_model(repo, "");
        let out = repo.forum_ok(&["submit", "--cmd", &model, "look up the deploy credentials"]);
        assert_eq!(out.trim(), ANSWER);
        let objects = all_objects(repo);
        assert!(!objects.contains(AWS_ID), "the key id reached git");
        assert!(!objects.contains(KEY_LINE), "the private key reached git");
        let log = entries(repo);
        let result = log
            .iter()
            .find(|e| e["kind"] == "result" && e["actor"] != "synthesizer")
            .expect("the task's result");
        let seq = result["seq"].as_u64().unwrap();
        let raw = raw_body(repo, seq);
        assert!(raw.contains("[REDACTED:aws-access-key]"), "{raw}");
        assert!(raw.contains("[REDACTED:private-key]"), "{raw}");
        let witness = log
            .iter()
            .find(|e| e["kind"] == "secret_redacted" && e["causal_parent"] == seq)
            .expect("a secret_redacted entry for the result");
        let w = payload(repo, witness["seq"].as_u64().unwrap());
        assert_eq!(w["seq"], seq);
        assert_eq!(w["entry_hash"], result["entry_hash"]);
        assert_eq!(
            w["rules"],
            serde_json::json!(["aws-access-key", "private-key"])
        );
        let body = payload(repo, seq);
        for f in w["findings"].as_array().unwrap() {
            let text = body
                .pointer(f["path"].as_str().unwrap())
                .and_then(J::as_str)
                .expect("the finding's path names a string");
            let (s, e) = (f["start"].as_u64().unwrap(), f["end"].as_u64().unwrap());
            assert_eq!(
                &text[s as usize..e as usize],
                format!("[REDACTED:{}]", f["rule"].as_str().unwrap())
            );
        }
        repo.forum_ok(&["verify", "--deep"]);
        repo.fsck();
    });
}

#[test]
fn block_mode_stops_the_run_with_a_witnessed_reason_and_no_secret_anywhere() {
    on_each_kind(|repo| {
        let model = leaky_model(repo, "");
        let o = repo
            .forum()
            .args([
                "submit",
                "--cmd",
                &model,
                "--secrets",
                "block",
                "look up the deploy credentials",
            ])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("the secrets policy blocked a body"), "{err}");
        assert!(!err.contains(AWS_ID));
        let log = entries(repo);
        let blocked = log
            .iter()
            .find(|e| e["kind"] == "secret_blocked")
            .expect("a secret_blocked entry");
        assert_eq!(
            log.last().unwrap()["seq"],
            blocked["seq"],
            "nothing is written after the block"
        );
        let p = payload(repo, blocked["seq"].as_u64().unwrap());
        assert_eq!(p["refused_kind"], "result");
        assert_eq!(
            p["rules"],
            serde_json::json!(["aws-access-key", "private-key"])
        );
        assert!(p["reason"].as_str().unwrap().contains("run stopped"));
        assert!(!log.iter().any(|e| e["kind"] == "result"));
        let objects = all_objects(repo);
        assert!(!objects.contains(AWS_ID), "the key id reached git");
        assert!(!objects.contains(KEY_LINE), "the private key reached git");
        repo.forum_ok(&["verify", "--deep"]);
    });
}

#[test]
fn the_policy_file_sets_the_mode_and_allows_rules() {
    let repo = Repo::new("sha1");
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(
        repo.path().join(".forum/policy.toml"),
        "[secrets]\nmode = \"redact\"\nallow = [\"private-key\"]\n",
    )
    .unwrap();
    let model = leaky_model(&repo, "");
    repo.forum_ok(&["submit", "--cmd", &model, "look up the deploy credentials"]);
    let objects = all_objects(&repo);
    assert!(!objects.contains(AWS_ID));
    assert!(objects.contains(KEY_LINE), "private-key is allowed");
    std::fs::write(
        repo.path().join(".forum/policy.toml"),
        "[secrets]\nmode = \"loud\"\n",
    )
    .unwrap();
    let o = repo
        .forum()
        .args(["submit", "--cmd", &model, "look up the deploy credentials"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("unknown secrets mode \"loud\""), "{err}");
}

#[test]
fn an_api_key_env_value_echoed_by_the_model_is_redacted_even_when_allowed() {
    on_each_kind(|repo| {
        let model = leaky_model(repo, &format!("my key is {API_KEY}"));
        let rt = repo.path().join("rt.toml");
        std::fs::write(
            &rt,
            format!(
                "[runtime.default]\ncmd = \"{model}\"\n\n[runtime.tiers.frontier]\napi = \"anthropic\"\nmodel = \"claude-test\"\napi_key_env = \"ANTHROPIC_API_KEY\"\n\n[seats]\nworker = {{ cmd = \"{model}\" }}\norchestrator = {{ cmd = \"{model}\" }}\n"
            ),
        )
        .unwrap();
        let o = repo
            .forum()
            .env("ANTHROPIC_API_KEY", API_KEY)
            .args([
                "submit",
                "--runtime-config",
                rt.to_str().unwrap(),
                "--secrets",
                "allow",
                "look up the deploy credentials",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let objects = all_objects(repo);
        assert!(!objects.contains(API_KEY), "the key value reached git");
        assert!(objects.contains("[REDACTED:api-key-env]"));
        assert!(
            objects.contains(AWS_ID),
            "allow writes the other finds as they are"
        );
        repo.forum_ok(&["verify", "--deep"]);
    });
}

#[test]
fn append_redacts_by_default_blocks_on_request_and_allows_on_request() {
    let repo = Repo::new("sha256");
    let body = format!("{{\"note\":\"key {AWS_ID}\"}}");
    let j = repo.append("me", "note", &body);
    assert_eq!(j["seq"], 0);
    assert_eq!(j["secret_redacted"], 1);
    assert!(raw_body(&repo, 0).contains("[REDACTED:aws-access-key]"));
    let o = repo
        .forum()
        .args([
            "append",
            "--actor",
            "me",
            "--kind",
            "note",
            "--payload",
            &body,
        ])
        .args(["--secrets", "block"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("aws-access-key at /note"), "{err}");
    assert!(!err.contains(AWS_ID));
    assert_eq!(entries(&repo).len(), 2, "nothing written");
    repo.forum_ok(&[
        "append",
        "--actor",
        "me",
        "--kind",
        "note",
        "--payload",
        &body,
        "--secrets",
        "allow",
    ]);
    assert!(raw_body(&repo, 2).contains(AWS_ID));
    repo.forum_ok(&["verify", "--deep"]);
}
