//! A body served is the body that was hashed. The body of one entry is swapped for another valid
//! object, the way an attacker or a damaged disk would (a rebuilt tree and commit chain, or the
//! loose object file overwritten under its own name), and every reader (`show --payload`, the
//! daemon's `/payload/N`, MCP `ledger_payload`, the reports, `bench`, `export`) refuses it with
//! one line naming the seq, instead of serving it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::Value as J;

use crate::common::{FORMATS, Guarded, LEDGER_REF, Repo, commit_texts, rechain};

/// The seq whose body is forged.
const SEQ: usize = 4;

/// A ledger of six notes, `{"i":0}` .. `{"i":5}`.
fn six_notes(format: &str) -> Repo {
    let repo = Repo::new(format);
    for i in 0..6 {
        repo.forum_ok(&[
            "append",
            "--actor",
            "agent",
            "--kind",
            "note",
            "--payload",
            &format!(r#"{{"i":{i}}}"#),
        ]);
    }
    repo
}

/// The body blob of entry `seq`.
fn body_blob(repo: &Repo, seq: usize) -> String {
    repo.git_ok(&[
        "rev-parse",
        &format!("{LEDGER_REF}~{}:payload.json", 5 - seq),
    ])
}

/// The loose object file of `id`.
fn loose_path(repo: &Repo, id: &str) -> std::path::PathBuf {
    repo.git_dir().join("objects").join(&id[..2]).join(&id[2..])
}

/// Overwrites the loose object file of seq 4's body with seq 3's (a valid blob, under the
/// wrong name). Commits and trees are untouched.
fn forge_in_place(repo: &Repo) {
    let victim = loose_path(repo, &body_blob(repo, SEQ));
    let donor = loose_path(repo, &body_blob(repo, SEQ - 1));
    assert!(victim.is_file() && donor.is_file(), "bodies are loose");
    let bytes = std::fs::read(&donor).unwrap();
    std::fs::remove_file(&victim).unwrap();
    std::fs::write(&victim, bytes).unwrap();
}

/// Rebuilds seq 4's tree around another valid body and re-chains the commits from there (the
/// messages, and so the entries, unchanged).
fn forge_by_rechaining(repo: &Repo) {
    let blob = repo.git_in(&["hash-object", "-w", "--stdin"], br#"{"i":99}"#);
    let tree = repo.git_in(
        &["mktree"],
        format!("100644 blob {blob}\tpayload.json\n").as_bytes(),
    );
    let mut texts = commit_texts(repo, LEDGER_REF);
    let old = texts[SEQ].lines().next().unwrap().to_string();
    texts[SEQ] = texts[SEQ].replacen(&old, &format!("tree {tree}"), 1);
    rechain(repo, &texts);
}

fn run(repo: &Repo, args: &[&str]) -> Output {
    repo.forum().args(args).output().expect("run git-forum")
}

/// A refusal: non-zero exit, one line on stderr naming seq 4 and what to run, and no forged
/// body on stdout.
#[track_caller]
fn refused(o: &Output, label: &str) {
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{label}: {out}{err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{label}: one line: {err}"
    );
    assert_names_the_damage(&err, label);
    assert!(
        !out.contains(r#""i":3"#) && !out.contains(r#""i":99"#),
        "{label}: the forged body was printed: {out}"
    );
}

#[track_caller]
fn assert_names_the_damage(text: &str, label: &str) {
    assert!(
        text.contains("the body of seq 4 ")
            && text.contains("does not hash to its payload_hash")
            && text.contains("verify --deep"),
        "{label}: {text}"
    );
}

/// Starts `git forum serve` on a free port: the child and its address.
fn serve(repo: &Repo) -> (Guarded, String) {
    let served = repo.serve(&[], Stdio::null());
    (served.child, served.addr)
}

/// `GET path` from a running `git forum serve`: (status, body).
fn get(addr: &str, path: &str) -> (u16, J) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a response");
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    (code, serde_json::from_str(body).expect("JSON body"))
}

/// The daemon answers `/payload/4` with an error naming the damage, `/payload/3` as usual.
fn check_daemon(repo: &Repo, label: &str) {
    let (child, addr) = serve(repo);
    let (code, body) = get(&addr, "/payload/4");
    assert_eq!(code, 500, "{label}: {body}");
    assert_names_the_damage(body["error"].as_str().unwrap_or(""), label);
    assert!(body.get("payload").is_none(), "{label}: {body}");
    let (code, body) = get(&addr, "/payload/3");
    assert_eq!(code, 200, "{label}: {body}");
    assert_eq!(body["payload"], serde_json::json!({"i": 3}), "{label}");
    drop(child);
}

/// MCP `ledger_payload` for seq 4 is an error naming the damage; seq 3 is served.
fn check_mcp(repo: &Repo, label: &str) {
    let input = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ledger_payload","arguments":{"seq":4}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ledger_payload","arguments":{"seq":3}}}"#,
    ];
    let (ok, out) = repo.mcp_batch(&[], &input);
    assert!(ok, "{label}: {out}");
    let replies: Vec<J> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let forged = replies.iter().find(|r| r["id"] == 2).expect("reply 2");
    assert_eq!(forged["result"]["isError"], true, "{label}: {forged}");
    assert_names_the_damage(
        forged["result"]["structuredContent"]["error"]
            .as_str()
            .unwrap_or(""),
        label,
    );
    let fine = replies.iter().find(|r| r["id"] == 3).expect("reply 3");
    assert_eq!(fine["result"]["isError"], false, "{label}: {fine}");
    assert_eq!(
        fine["result"]["structuredContent"]["payload"],
        serde_json::json!({"i": 3}),
        "{label}"
    );
}

fn check_every_reader(repo: &Repo, label: &str) {
    // The entry itself is still readable; only its body is refused.
    run_ok(repo, &["show", "4"], label);
    let shown = repo.forum_ok(&["show", "3", "--payload"]);
    assert!(shown.contains(r#"{"i":3}"#), "{label}: {shown}");
    refused(&run(repo, &["show", "4", "--payload"]), label);
    refused(&run(repo, &["show", "4", "--payload", "--json"]), label);
    refused(&run(repo, &["summary"]), label);
    refused(&run(repo, &["room"]), label);
    refused(&run(repo, &["bench", "main", "main"]), label);
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("export");
    refused(
        &run(repo, &["export", export.to_str().unwrap()]),
        &format!("{label}: export"),
    );
    assert!(
        !export.join("entries.jsonl").exists() && !export.join("payloads.jsonl").exists(),
        "{label}: export wrote files"
    );
    check_daemon(repo, label);
    check_mcp(repo, label);
    // And verify --deep, which the messages point at, names the same seq.
    let v = repo.forum_json(&["verify", "--deep"]);
    assert_eq!(v["ok"], false, "{label}: {v}");
    assert_eq!(v["first_bad_seq"], 4, "{label}: {v}");
}

#[track_caller]
fn run_ok(repo: &Repo, args: &[&str], label: &str) {
    let o = run(repo, args);
    assert!(
        o.status.success(),
        "{label}: {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn every_reader_refuses_a_body_overwritten_in_place() {
    for format in FORMATS {
        let repo = six_notes(format);
        forge_in_place(&repo);
        check_every_reader(&repo, &format!("{format}, object file overwritten"));
    }
}

#[test]
fn every_reader_refuses_a_body_swapped_by_rechaining() {
    for format in FORMATS {
        let repo = six_notes(format);
        forge_by_rechaining(&repo);
        check_every_reader(&repo, &format!("{format}, tree rebuilt"));
        repo.fsck();
    }
}

/// A run: a request (seq 0) and entries caused by it, seq 4 a pending gate.
fn one_run(format: &str) -> Repo {
    let repo = Repo::new(format);
    let append = |kind: &str, payload: &str, parent: Option<&str>| {
        let mut args = vec![
            "append",
            "--actor",
            "operator",
            "--kind",
            kind,
            "--payload",
            payload,
        ];
        if let Some(p) = parent {
            args.extend(["--parent", p]);
        }
        repo.forum_ok(&args);
    };
    append("request", r#"{"text":"build the login page"}"#, None);
    for i in 1..4 {
        append("note", &format!(r#"{{"i":{i}}}"#), Some("0"));
    }
    append(
        "gate_pending",
        r#"{"question":"run wave 0?","run_seq":1,"tasks":["T1"],"wave":0}"#,
        Some("0"),
    );
    append("note", r#"{"i":5}"#, Some("0"));
    repo
}

#[test]
fn run_and_gate_views_refuse_a_forged_body_instead_of_reading_it_as_absent() {
    for format in FORMATS {
        let repo = one_run(format);
        let gates = repo.forum_ok(&["gate", "list"]);
        assert!(gates.contains("run wave 0?"), "{format}: {gates}");
        forge_in_place(&repo);
        for args in [
            &["runs"][..],
            &["runs", "--json"],
            &["log", "--run", "0"],
            &["log", "--run", "0", "--json"],
            &["gate", "list"],
            &["gate", "list", "--json"],
        ] {
            refused(&run(&repo, args), &format!("{format}: {args:?}"));
        }
        // A resume reads the run's bodies first, and stops at the forged one, writing nothing.
        let tip = repo.git_ok(&["rev-parse", LEDGER_REF]);
        refused(
            &run(&repo, &["resume", "0", "--cmd", "echo done"]),
            &format!("{format}: resume"),
        );
        assert_eq!(repo.git_ok(&["rev-parse", LEDGER_REF]), tip, "{format}");
        let (child, addr) = serve(&repo);
        for path in ["/runs", "/gates"] {
            let (code, body) = get(&addr, path);
            assert_eq!(code, 500, "{format}: {path}: {body}");
            assert_names_the_damage(
                body["error"].as_str().unwrap_or(""),
                &format!("{format}: {path}"),
            );
        }
        drop(child);
    }
}
