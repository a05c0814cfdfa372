//! `git forum attest` through the real binary, on every repository kind: a scripted `--work`
//! run of two tasks whose changes both merge, its attestation signed with the note key, and
//! `attest --verify`: it passes, also in a clone after push and fetch; a changed payload byte,
//! a wrong key, and a subject the run did not ship (re-signed with the right key) each fail in
//! one line. The Python check (`data/attest_check.py`: securesystemslib's DSSE verifier and
//! the in-toto-attestation protos) reads the same envelope when it is installed.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value as J, json};

use crate::common::{Repo, bare_origin, on_each_kind, one_line_error};
use crate::work_run::{setup, two_files_model};

const CHECK: &str = "python3 -m compileall -q .";

/// Two parallel tasks on different files, both merged.
fn two_changes(repo: &Repo) {
    setup(repo);
    let m = two_files_model(repo);
    repo.forum_ok(&[
        "submit", "--quiet", "--work", "--check", CHECK, "--cmd", &m, "fix calc",
    ]);
}

/// A key pair in `dir`: the signer key file and the verifier key file.
fn keys(repo: &Repo, dir: &Path) -> (PathBuf, PathBuf) {
    repo.forum_ok(&["keygen", "attest-test", "--dir", dir.to_str().unwrap()]);
    (dir.join("attest-test.key"), dir.join("attest-test.pub"))
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `attest --verify FILE --key PUB` in `repo` (with `ledger` when given).
fn verify(repo: &Repo, ledger: Option<&str>, file: &Path, key: &Path) -> std::process::Output {
    let mut c = repo.forum();
    if let Some(l) = ledger {
        c.args(["--ledger", l]);
    }
    c.args(["attest", "--verify", path(file), "--key", path(key)])
        .output()
        .unwrap()
}

/// The statement inside an envelope file.
fn statement(file: &Path) -> J {
    let env: J = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let payload = B64.decode(env["payload"].as_str().unwrap()).unwrap();
    serde_json::from_slice(&payload).unwrap()
}

/// `statement` signed with the key in `key` into a new envelope file beside `file`.
fn resigned(file: &Path, statement: &J, key: &Path) -> PathBuf {
    let k = std::fs::read_to_string(key).unwrap();
    let k = git_forum::ledger::dsse::SignerKey::from_note_key(&k).unwrap();
    let env = git_forum::ledger::dsse::sign(&serde_json::to_vec(statement).unwrap(), &k);
    let out = file.with_extension("forged.json");
    std::fs::write(&out, serde_json::to_string(&env).unwrap()).unwrap();
    out
}

/// The envelope with one byte of its payload changed.
fn one_byte_changed(file: &Path) -> PathBuf {
    let mut env: J = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let mut payload = B64.decode(env["payload"].as_str().unwrap()).unwrap();
    payload[40] ^= 0x01;
    env["payload"] = json!(B64.encode(payload));
    let out = file.with_extension("changed.json");
    std::fs::write(&out, serde_json::to_string(&env).unwrap()).unwrap();
    out
}

/// A run attested with its signed note, checked, and each forgery refused.
fn attest_and_refuse_forgeries(repo: &Repo, dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let (skey, vkey) = keys(repo, dir);
    repo.forum_ok(&["checkpoint", "--note", "--note-key", path(&skey)]);
    let file = dir.join("run-0.intoto.json");
    let j = repo.forum_json(&[
        "attest",
        "0",
        "--note-key",
        path(&skey),
        "--out",
        path(&file),
    ]);
    assert_eq!(j["schema"], "git-forum.attest/1");
    let tip = repo.git_ok(&["rev-parse", "forum/run-0"]);
    let names: Vec<&str> = j["subjects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["forum/run-0", "change/T1", "change/T2"]);
    assert_eq!(j["subjects"][0]["commit"], json!(tip));
    assert_eq!(j["signed_note"], true);
    // The file holds the envelope the report carries.
    let on_disk: J = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(on_disk, j["envelope"]);
    let s = statement(&file);
    assert_eq!(s["predicateType"], "https://slsa.dev/provenance/v1");
    // Each ship decision names the rules that let it through, and the statement lists them.
    let ships: Vec<&J> = s["predicate"]["runDetails"]["byproducts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["name"].as_str().unwrap().starts_with("ship/"))
        .collect();
    assert_eq!(ships.len(), 2);
    let deps = s["predicate"]["buildDefinition"]["resolvedDependencies"]
        .as_array()
        .unwrap();
    let dep = |name: &str| {
        deps.iter()
            .find(|d| d["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {deps:?}"))["digest"]["sha256"]
            .clone()
    };
    for b in &ships {
        let rules = &b["annotations"]["rules"];
        assert_eq!(rules["policy"], dep("policy"), "{b}");
        assert_eq!(rules["roster"], dep("roster"), "{b}");
        // The runtime the decision was made under is the one the request records.
        assert_eq!(rules["runtime"], dep("runtime"), "{b}");
    }
    let o = verify(repo, None, &file, &vkey);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let shown = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(shown.starts_with("attestation verified: run 0"), "{shown}");
    // One byte of the payload changed.
    let o = verify(repo, None, &one_byte_changed(&file), &vkey);
    one_line_error(&o, "does not verify over its payload");
    // Another key.
    let other = dir.join("other");
    std::fs::create_dir(&other).unwrap();
    let (_, wrong) = keys(repo, &other);
    let o = verify(repo, None, &file, &wrong);
    one_line_error(&o, "no signature of the envelope is by a trusted key");
    // A subject the run did not ship, signed with the right key: the base commit.
    let base = repo.git_ok(&["rev-parse", "main"]);
    let mut forged = s.clone();
    forged["subject"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "change/T3", "digest": {"gitCommit": base}}));
    let o = verify(repo, None, &resigned(&file, &forged, &skey), &vkey);
    one_line_error(&o, "subject change/T3");
    // A tip that is not the run's.
    let mut forged = s.clone();
    forged["subject"][0]["digest"]["gitCommit"] = json!(base);
    let o = verify(repo, None, &resigned(&file, &forged, &skey), &vkey);
    one_line_error(&o, "is not a commit run 0 shipped");
    // A claim changed that only the ledger can refute: a decision.
    let mut forged = s;
    forged["predicate"]["runDetails"]["byproducts"][3]["annotations"]["decision"] = json!("block");
    let o = verify(repo, None, &resigned(&file, &forged, &skey), &vkey);
    one_line_error(&o, "does not match what ledger main records of run 0");
    (file, skey, vkey)
}

/// A clone that fetched the pushed ledger, branch and notes checks the attestation with the
/// verifier key alone.
fn verifies_in_a_clone(a: &Repo, kind: &str, file: &Path, vkey: &Path) {
    let (_bare, url) = bare_origin(a, kind);
    a.git_ok(&["push", "-q", "origin", "main", "forum/run-0"]);
    a.forum_ok(&["push"]);
    let b = Repo::new(kind);
    b.git_ok(&["remote", "add", "origin", &url]);
    b.git_ok(&["fetch", "-q", "origin"]);
    b.forum_ok(&["fetch"]);
    let o = verify(&b, Some("origin:main"), file, vkey);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Against the clone's own (empty) ledger name it says which ledger it attests.
    let o = verify(&b, None, file, vkey);
    assert!(!o.status.success());
}

#[test]
fn an_attestation_verifies_here_and_in_a_clone_and_forgeries_fail() {
    on_each_kind(|repo| {
        let kind = repo.kind();
        two_changes(repo);
        let dir = tempfile::tempdir().unwrap();
        let (file, _, vkey) = attest_and_refuse_forgeries(repo, dir.path());
        verifies_in_a_clone(repo, kind, &file, &vkey);
        repo.forum_ok(&["verify", "--deep"]);
    });
}

#[test]
fn attest_refuses_in_one_line_what_it_cannot_attest() {
    let repo = Repo::new("sha1");
    let dir = tempfile::tempdir().unwrap();
    let (skey, vkey) = keys(&repo, dir.path());
    repo.append("user", "request", r#"{"text":"not a work run"}"#);
    let o = repo
        .forum()
        .args(["attest", "--note-key", path(&skey)])
        .output()
        .unwrap();
    one_line_error(&o, "ledger main has no --work run");
    let o = repo.forum().args(["attest", "0"]).output().unwrap();
    one_line_error(&o, "no signing key");
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "{}").unwrap();
    let o = verify(&repo, None, &junk, &vkey);
    one_line_error(&o, "not a DSSE envelope");
    let o = repo
        .forum()
        .args(["attest", "--key", path(&vkey)])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// The Python interpreter with securesystemslib and in-toto-attestation
/// (`GIT_FORUM_INTOTO_PYTHON`), or `None` after a skip notice unless
/// `GIT_FORUM_REQUIRE_INTOTO=1`.
fn intoto_python() -> Option<String> {
    let require = std::env::var("GIT_FORUM_REQUIRE_INTOTO").is_ok_and(|v| v == "1");
    match std::env::var("GIT_FORUM_INTOTO_PYTHON") {
        Ok(p) if !p.is_empty() => Some(p),
        _ if require => panic!(
            "GIT_FORUM_REQUIRE_INTOTO=1 but GIT_FORUM_INTOTO_PYTHON is not set (.ci/run installs it)"
        ),
        _ => {
            eprintln!(
                "skipped: GIT_FORUM_INTOTO_PYTHON is not set (a python with securesystemslib[crypto] and in-toto-attestation; .ci/run installs one)"
            );
            None
        }
    }
}

#[test]
fn the_reference_python_libraries_verify_and_parse_the_envelope() {
    let Some(python) = intoto_python() else {
        return;
    };
    let repo = Repo::new("sha1");
    two_changes(&repo);
    let dir = tempfile::tempdir().unwrap();
    let (skey, vkey) = keys(&repo, dir.path());
    repo.forum_ok(&["checkpoint", "--note", "--note-key", path(&skey)]);
    let file = dir.path().join("run-0.intoto.json");
    repo.forum_ok(&[
        "attest",
        "0",
        "--note-key",
        path(&skey),
        "--out",
        path(&file),
    ]);
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration/data/attest_check.py");
    let check = |envelope: &Path| {
        std::process::Command::new(&python)
            .arg(&script)
            .arg(envelope)
            .arg(&vkey)
            .output()
            .unwrap()
    };
    let o = check(&file);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "ok",
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success());
    let o = check(&one_byte_changed(&file));
    assert_eq!(o.status.code(), Some(1));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.starts_with("refused: VerificationError"), "{said}");
}

#[test]
fn attest_answers_the_same_over_http_and_mcp() {
    let repo = Repo::new("sha1");
    two_changes(&repo);
    let dir = tempfile::tempdir().unwrap();
    let (skey, vkey) = keys(&repo, dir.path());
    // The daemon signs with the repository's configured note key.
    repo.git_ok(&["config", "forum.noteKey", path(&skey)]);
    let made = repo.forum_json(&["attest", "0"]);
    // No note was signed: the checkpoint is the whole ledger's, unsigned.
    assert_eq!(made["signed_note"], false, "{made}");
    assert_eq!(
        made["checkpoint_size"],
        repo.forum_json(&["log"]).as_array().unwrap().len()
    );
    let file = dir.path().join("run-0.intoto.json");
    std::fs::write(&file, made["envelope"].to_string()).unwrap();
    let checked = repo.forum_json(&["attest", "--verify", path(&file), "--key", path(&vkey)]);
    assert_eq!(checked["mode"], "verify");
    let envelope = made["envelope"].to_string();
    let pubkey = std::fs::read_to_string(&vkey).unwrap().trim().to_string();
    let served = repo.serve(&[], std::process::Stdio::null());
    let post = |body: &J| crate::common::http_json(&served.addr, "POST", "/attest", body);
    let (code, body) = post(&json!({"run": 0}));
    assert_eq!((code, &body), (200, &made));
    let (code, body) = post(&json!({"envelope": envelope, "keys": [pubkey]}));
    assert_eq!((code, &body), (200, &checked));
    let (code, body) = post(&json!({"run": 0, "keys": [pubkey]}));
    assert_eq!(code, 400, "{body}");
    drop(served);
    let answer = repo.mcp_call(
        &[],
        "forum.attest",
        json!({"envelope": envelope, "keys": [pubkey]}),
    );
    assert_eq!(answer["result"]["structuredContent"], checked, "{answer}");
}
