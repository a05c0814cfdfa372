//! Secrets never enter or leave the record, through the binary on
//! every repository format: a scripted worker that prints an AWS-style key and a private key
//! block leaves markers in git and `secret_redacted` entries that say where; `--secrets block`
//! stops the run with a witnessed reason and no secret in any object; an `api_key_env` value
//! echoed by the model is redacted; `git forum push` and the installed pre-push hook refuse a
//! ledger or (with `--scan-code`) a commit that carries a key, and accept after `redact`; a
//! scan that cannot read a body fails closed. Each find names its fingerprint, and
//! `[secrets] allow_fingerprints` accepts exactly that secret.

use serde_json::Value as J;

use git_forum::secrets::Fingerprint;

use crate::common::{FORMATS, Repo, on_each_kind};

const AWS_ID: &str = "AKIAQX7RTY2ZW4NB9K3M";
/// Another key of the same rule.
const OTHER_ID: &str = "ASIAW7P2KD9QXM4TZ6RB";
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
        // Each finding names the secret it replaced by its fingerprint, never by its text.
        let fps: Vec<&str> = w["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["fingerprint"].as_str().expect("a fingerprint"))
            .collect();
        assert!(
            fps.contains(&fingerprint("aws-access-key", AWS_ID).as_str()),
            "{fps:?}"
        );
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
        let reason = p["reason"].as_str().unwrap();
        assert!(reason.contains("run stopped"), "{reason}");
        assert!(
            reason.contains(&format!(
                "aws-access-key {}",
                fingerprint("aws-access-key", AWS_ID)
            )),
            "{reason}"
        );
        assert!(!reason.contains(AWS_ID), "{reason}");
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

// ---- the pre-push gate ----

/// A bare remote beside `repo`, added as `origin`.
fn bare_remote(repo: &Repo, format: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut init = vec!["init", "-q", "--bare"];
    let flags = crate::common::init_flags(format);
    init.extend(flags.iter().map(String::as_str));
    let path = dir.path().to_str().unwrap().to_string();
    init.push(&path);
    repo.git_ok(&init);
    repo.git_ok(&["remote", "add", "origin", &format!("file://{path}")]);
    dir
}

/// PATH with the directory of the built `git-forum` first, so the hooks find `git forum`.
fn path_env() -> std::ffi::OsString {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_git-forum"))
        .parent()
        .expect("bin dir")
        .to_path_buf();
    let mut paths = vec![bin];
    if let Some(p) = std::env::var_os("PATH") {
        paths.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(paths).expect("PATH")
}

/// `git ARGS` in `repo`, hermetic, with the hooks able to run `git forum`.
fn git_hooked(repo: &Repo, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .current_dir(repo.path())
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_FORUM_LEDGER")
        .env("HOME", repo.path())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_SYSTEM", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .env("PATH", path_env())
        .args(args)
        .output()
        .expect("run git")
}

fn git_hooked_ok(repo: &Repo, args: &[&str]) {
    let o = git_hooked(repo, args);
    assert!(
        o.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn push(repo: &Repo) -> std::process::Output {
    repo.forum()
        .env("PATH", path_env())
        .args(["push", "origin"])
        .output()
        .unwrap()
}

#[test]
fn push_and_the_hook_refuse_a_ledger_with_a_key_and_accept_after_redact() {
    for format in FORMATS {
        let repo = Repo::new(format);
        let _remote = bare_remote(&repo, format);
        repo.append("me", "note", "{\"n\":1}");
        repo.forum_ok(&[
            "append",
            "--actor",
            "me",
            "--kind",
            "note",
            "--secrets",
            "allow",
            "--payload",
            &format!("{{\"env\":\"AWS_ACCESS_KEY_ID={AWS_ID}\"}}"),
        ]);
        let o = push(&repo);
        assert_eq!(o.status.code(), Some(1), "{format}");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains("refs/forum/ledgers/main seq 1 (note) /env: aws-access-key found"),
            "{format}: {out}"
        );
        assert!(
            out.contains("fix: git forum --ledger main redact 1 --reason"),
            "{format}: {out}"
        );
        assert!(!out.contains(AWS_ID));
        // The installed hook refuses `git push` itself.
        repo.forum_ok(&["hooks", "install"]);
        let o = git_hooked(
            &repo,
            &[
                "push",
                "origin",
                "refs/forum/ledgers/main:refs/forum/ledgers/main",
            ],
        );
        assert!(!o.status.success(), "{format}: the hook let it through");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("seq 1 (note) /env: aws-access-key found"),
            "{format}: {err}"
        );
        let remote_refs = repo.git_ok(&["ls-remote", "origin"]);
        assert!(!remote_refs.contains("refs/forum/ledgers/main"), "{format}");
        // After the redaction both let it through.
        repo.forum_ok(&["redact", "1", "--reason", "secret (aws-access-key)"]);
        let o = push(&repo);
        assert!(
            o.status.success(),
            "{format}: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        repo.append("me", "note", "{\"n\":3}");
        git_hooked_ok(
            &repo,
            &[
                "push",
                "origin",
                "refs/forum/ledgers/main:refs/forum/ledgers/main",
            ],
        );
        repo.forum_ok(&["verify", "--deep"]);
    }
}

/// A code commit on the current branch adding `text` to `file`.
fn commit_file(repo: &Repo, file: &str, text: &str) {
    std::fs::write(repo.path().join(file), text).unwrap();
    repo.git_ok(&["add", file]);
    repo.git_ok(&["commit", "-q", "-m", &format!("add {file}")]);
}

#[test]
fn scan_code_refuses_a_commit_adding_a_key_and_accepts_without() {
    on_each_kind(|repo| {
        let format = if repo.is_reftable() {
            "reftable"
        } else {
            "sha1"
        };
        let hash = repo.git_ok(&["rev-parse", "--show-object-format"]);
        let _remote = bare_remote(repo, if hash == "sha256" { "sha256" } else { format });
        commit_file(repo, "README", "hello\n");
        repo.forum_ok(&["hooks", "install", "--scan-code"]);
        git_hooked_ok(repo, &["push", "-q", "origin", "HEAD:refs/heads/first"]);
        commit_file(repo, "deploy.env", &format!("AWS_ACCESS_KEY_ID={AWS_ID}\n"));
        let o = git_hooked(repo, &["push", "origin", "HEAD:refs/heads/main"]);
        assert!(!o.status.success(), "the key went out");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("refs/heads/main commit ")
                && err.contains(&format!(
                    "deploy.env:1: aws-access-key found in an added line (fingerprint {})",
                    fingerprint("aws-access-key", AWS_ID)
                )),
            "{err}"
        );
        assert!(err.contains("git commit --amend"), "{err}");
        assert!(!err.contains(AWS_ID));
        // Rewritten without the key, it goes.
        std::fs::write(
            repo.path().join("deploy.env"),
            "AWS_ACCESS_KEY_ID=from-the-vault\n",
        )
        .unwrap();
        repo.git_ok(&["commit", "-q", "-a", "--amend", "-m", "add deploy.env"]);
        git_hooked_ok(repo, &["push", "-q", "origin", "HEAD:refs/heads/main"]);
        // Without --scan-code, code is not looked at.
        repo.forum_ok(&["hooks", "install"]);
        commit_file(repo, "other.env", &format!("AWS_ACCESS_KEY_ID={AWS_ID}\n"));
        git_hooked_ok(repo, &["push", "-q", "origin", "HEAD:refs/heads/plain"]);
    });
}

#[test]
fn a_missing_body_fails_the_gate_closed() {
    let repo = Repo::new("sha1");
    let _remote = bare_remote(&repo, "sha1");
    repo.append("me", "note", "{\"n\":1}");
    repo.append("me", "note", "{\"text\":\"a body that will go missing\"}");
    let commit = repo.git_ok(&["rev-parse", "refs/forum/ledgers/main"]);
    let blob = repo.git_ok(&["rev-parse", &format!("{commit}:payload.json")]);
    let loose = repo
        .git_dir()
        .join("objects")
        .join(&blob[..2])
        .join(&blob[2..]);
    // Single appends write loose objects and keep a copy in the write-ahead log, from which
    // the store heals a lost one; both go, so the body is really gone.
    std::fs::remove_file(&loose).expect("the body is a loose object");
    std::fs::remove_dir_all(repo.git_dir().join("forum/wal")).unwrap();
    let o = repo
        .forum()
        .env("PATH", path_env())
        .args(["hook", "pre-push", "origin", "file:///nowhere"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            let zero = "0".repeat(40);
            writeln!(
                c.stdin.take().unwrap(),
                "refs/forum/ledgers/main {commit} refs/forum/ledgers/main {zero}"
            )?;
            c.wait_with_output()
        })
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("refusing the push") && err.contains("missing"),
        "{err}"
    );
    let o = push(&repo);
    assert_eq!(o.status.code(), Some(1));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(said.contains("missing"), "{said}");
    let remote_refs = repo.git_ok(&["ls-remote", "origin"]);
    assert!(remote_refs.is_empty(), "{remote_refs}");
}

// ---- the fingerprint allowlist ----

/// The fingerprint git forum shows for `secret` found by `rule`.
fn fingerprint(rule: &str, secret: &str) -> String {
    Fingerprint::of(rule, secret.as_bytes()).to_string()
}

fn write_policy(repo: &Repo, text: &str) {
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(repo.path().join(".forum/policy.toml"), text).unwrap();
}

fn append_note(repo: &Repo, note: &str) -> std::process::Output {
    repo.forum()
        .args(["append", "--actor", "me", "--kind", "note", "--payload"])
        .arg(format!("{{\"note\":\"{note}\"}}"))
        .output()
        .unwrap()
}

#[test]
fn append_under_block_names_the_fingerprint_and_accepts_exactly_the_allowed_secret() {
    let repo = Repo::new("sha1");
    write_policy(&repo, "[secrets]\nmode = \"block\"\n");
    let fp = fingerprint("aws-access-key", AWS_ID);
    let o = append_note(&repo, &format!("key {AWS_ID}"));
    assert_eq!(o.status.code(), Some(2));
    let err = crate::common::one_line_error(&o, "carries a secret");
    assert!(err.contains(&format!("fingerprint {fp}")), "{err}");
    assert!(
        err.contains(&format!("allow_fingerprints = [\"{fp}\"]")),
        "{err}"
    );
    assert!(!err.contains(AWS_ID), "{err}");
    let tip = repo.git(&["rev-parse", "-q", "--verify", "refs/forum/ledgers/main"]);
    assert!(!tip.status.success(), "nothing written");
    // Allowed by its fingerprint, that key is written as it is.
    write_policy(
        &repo,
        &format!("[secrets]\nmode = \"block\"\nallow_fingerprints = [\"{fp}\"]\n"),
    );
    let o = append_note(&repo, &format!("key {AWS_ID}"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(raw_body(&repo, 0).contains(AWS_ID));
    // Another key of the same rule, alone or beside the allowed one, is still refused.
    for note in [
        format!("key {OTHER_ID}"),
        format!("{AWS_ID} and {OTHER_ID}"),
    ] {
        let o = append_note(&repo, &note);
        assert_eq!(o.status.code(), Some(2), "{note}");
        let err = crate::common::one_line_error(&o, "carries a secret");
        assert!(
            err.contains(&format!(
                "fingerprint {}",
                fingerprint("aws-access-key", OTHER_ID)
            )),
            "{err}"
        );
    }
    assert_eq!(entries(&repo).len(), 1);
    // A fingerprint that is not 16 hex digits is one line naming the problem.
    write_policy(&repo, "[secrets]\nallow_fingerprints = [\"AKIA\"]\n");
    let o = append_note(&repo, "clean");
    assert_ne!(o.status.code(), Some(0));
    let err = crate::common::one_line_error(&o, "allow_fingerprints");
    assert!(err.contains("16 hex digits"), "{err}");
    repo.forum_ok(&["verify", "--deep"]);
}

#[test]
fn push_and_the_hooks_accept_an_allowed_fingerprint_and_refuse_another_secret_of_its_rule() {
    for format in FORMATS {
        let repo = Repo::new(format);
        let _remote = bare_remote(&repo, format);
        let fp = fingerprint("aws-access-key", AWS_ID);
        repo.forum_ok(&[
            "append",
            "--actor",
            "me",
            "--kind",
            "note",
            "--secrets",
            "allow",
            "--payload",
            &format!("{{\"env\":\"AWS_ACCESS_KEY_ID={AWS_ID}\"}}"),
        ]);
        let o = push(&repo);
        assert_eq!(o.status.code(), Some(1), "{format}");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains(&format!(
                "seq 0 (note) /env: aws-access-key found (fingerprint {fp})"
            )) && out.contains(&format!("allow_fingerprints = [\"{fp}\"]")),
            "{format}: {out}"
        );
        // Allowed, it leaves, by `git forum push` and through the hook alike.
        write_policy(
            &repo,
            &format!("[secrets]\nallow_fingerprints = [\"{fp}\"]\n"),
        );
        let o = push(&repo);
        assert!(
            o.status.success(),
            "{format}: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        repo.forum_ok(&["hooks", "install"]);
        repo.append("me", "note", "{\"n\":1}");
        git_hooked_ok(
            &repo,
            &[
                "push",
                "origin",
                "refs/forum/ledgers/main:refs/forum/ledgers/main",
            ],
        );
        // A different key of the same rule does not.
        repo.forum_ok(&[
            "append",
            "--actor",
            "me",
            "--kind",
            "note",
            "--secrets",
            "allow",
            "--payload",
            &format!("{{\"env\":\"AWS_ACCESS_KEY_ID={OTHER_ID}\"}}"),
        ]);
        let o = git_hooked(
            &repo,
            &[
                "push",
                "origin",
                "refs/forum/ledgers/main:refs/forum/ledgers/main",
            ],
        );
        assert!(!o.status.success(), "{format}: the other key went out");
        let err = String::from_utf8_lossy(&o.stderr);
        let other = fingerprint("aws-access-key", OTHER_ID);
        assert!(
            err.contains(&format!(
                "seq 2 (note) /env: aws-access-key found (fingerprint {other})"
            )),
            "{format}: {err}"
        );
        assert!(
            !err.contains(&fp),
            "{format}: the allowed one is not named: {err}"
        );
        let o = push(&repo);
        assert_eq!(o.status.code(), Some(1), "{format}");
        repo.forum_ok(&["verify", "--deep"]);
    }
}

#[test]
fn scan_code_accepts_an_allowed_fingerprint_and_refuses_another_key() {
    let repo = Repo::new("sha1");
    let _remote = bare_remote(&repo, "sha1");
    commit_file(&repo, "README", "hello\n");
    repo.forum_ok(&["hooks", "install", "--scan-code"]);
    git_hooked_ok(&repo, &["push", "-q", "origin", "HEAD:refs/heads/main"]);
    // The key on line 3 of the file; an added line that starts with `++ ` is scanned too.
    commit_file(
        &repo,
        "deploy.env",
        &format!("REGION=eu\nDEBUG=0\nAWS_ACCESS_KEY_ID={AWS_ID}\n"),
    );
    let fp = fingerprint("aws-access-key", AWS_ID);
    let o = git_hooked(&repo, &["push", "origin", "HEAD:refs/heads/main"]);
    assert!(!o.status.success(), "the key went out");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "deploy.env:3: aws-access-key found in an added line (fingerprint {fp})"
        )),
        "{err}"
    );
    write_policy(
        &repo,
        &format!("[secrets]\nallow_fingerprints = [\"{fp}\"]\n"),
    );
    git_hooked_ok(&repo, &["push", "-q", "origin", "HEAD:refs/heads/main"]);
    commit_file(&repo, "more.txt", &format!("++ {OTHER_ID}\n"));
    let o = git_hooked(&repo, &["push", "origin", "HEAD:refs/heads/main"]);
    assert!(!o.status.success(), "the other key went out");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "more.txt:1: aws-access-key found in an added line (fingerprint {})",
            fingerprint("aws-access-key", OTHER_ID)
        )),
        "{err}"
    );
}
