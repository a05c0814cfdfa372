//! Witnesses: the C2SP tlog-cosignature/v1 a witness writes, `POST /witness`
//! sharing its state with `git forum witness`, `fetch` asking the `forum.witness` entries and
//! recording their cosignatures, and split views caught through one witness, reported by
//! `fetch` and `verify`. Remotes are bare repositories over file://; every ledger on all three
//! formats.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use serde_json::json;

use crate::common::{FORMATS, Repo, http_json, init_flags, one_line_error};
use crate::tlog::{keygen, note};
use git_forum::store::{cosign, note as gnote};

const ORIGIN: &str = "example.com/forum/main";
const COSIGS: &str = "refs/forum/cosignatures/main";

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// A bare repository of `kind` at `<tmp>/NAME.git`, reached over file://.
fn bare(tmp: &Path, name: &str, kind: &str) -> String {
    let path = tmp.join(format!("{name}.git"));
    let mut c = std::process::Command::new("git");
    c.args(["init", "-q", "--bare"])
        .args(init_flags(kind))
        .arg(&path)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1");
    assert!(c.status().unwrap().success());
    format!("file://{}", path.display())
}

/// The keys of one test: the log's note key and a witness's key, with the witness's
/// cosignature verifier key (type 0x04).
struct Keys {
    _dir: tempfile::TempDir,
    log_key: PathBuf,
    log_vkey: String,
    witness_key: PathBuf,
    witness_vkey: String,
}

fn keys(repo: &Repo) -> Keys {
    let dir = tempfile::tempdir().unwrap();
    let (log_key, log_vkey) = keygen(repo, dir.path(), "example.com/forum");
    let (witness_key, note_vkey) = keygen(repo, dir.path(), "witness.example/w1");
    let witness_vkey = cosign::vkey_of_note_vkey(&note_vkey).unwrap();
    // `keygen --witness` writes exactly that key.
    let w2 = repo.forum_ok(&[
        "keygen",
        "witness.example/w2",
        "--witness",
        "--dir",
        dir.path().to_str().unwrap(),
    ]);
    assert!(cosign::CosignVerifier::new(w2.trim()).is_ok(), "{w2}");
    Keys {
        _dir: dir,
        log_key,
        log_vkey,
        witness_key,
        witness_vkey,
    }
}

/// A log repository of `kind` with the fixed origin and `n` entries.
fn log(kind: &str, actor: &str, n: usize) -> Repo {
    let r = Repo::new(kind);
    r.git_ok(&["config", "forum.origin", ORIGIN]);
    for i in 0..n {
        r.append(actor, "note", &format!(r#"{{"{actor}":{i}}}"#));
    }
    r
}

/// The `cmd:` entry that runs this binary as a witness on `state`.
fn cmd_witness(state: &Path, k: &Keys) -> String {
    format!(
        "cmd:'{}' witness - --json --state '{}' --witness-key '{}' --note-verifier '{}'",
        env!("CARGO_BIN_EXE_git-forum"),
        state.display(),
        k.witness_key.display(),
        k.log_vkey
    )
}

/// A consumer repository with remotes and the trust setup.
fn consumer(kind: &str, remotes: &[(&str, &str)], witnesses: &[String], k: &Keys) -> Repo {
    let c = Repo::new(kind);
    for (name, url) in remotes {
        c.git_ok(&["remote", "add", name, url]);
    }
    c.git_ok(&["config", "forum.noteVerifiers", &k.log_vkey]);
    c.git_ok(&["config", "forum.witnessVerifiers", &k.witness_vkey]);
    for w in witnesses {
        c.git_ok(&["config", "--add", "forum.witness", w]);
    }
    c
}

fn fetch(c: &Repo, remote: &str, extra: &[&str]) -> Output {
    c.forum()
        .args(["fetch", remote])
        .args(extra)
        .output()
        .unwrap()
}

fn records(c: &Repo) -> Vec<String> {
    let o = c.git(&["log", "--format=%s", COSIGS]);
    stdout(&o).lines().map(String::from).collect()
}

/// The C2SP tlog-cosignature/v1 through the binary: `witness` cosigns a first note with a
/// type-0x04 line that verifies with the witness's cosignature key (and not as a plain note
/// signature), `verify --witness-verifier` checks the recorded line, and a byte changed in it
/// fails verify with a one-line reason.
#[test]
fn witness_lines_are_tlog_cosignatures_that_verify_checks_on_every_format() {
    for kind in FORMATS {
        let tmp = tempfile::tempdir().unwrap();
        let l = log(kind, "alice", 3);
        let k = keys(&l);
        note(&l, &k.log_key);
        let a = bare(tmp.path(), "a", kind);
        l.git_ok(&["remote", "add", "a", &a]);
        l.forum_ok(&["push", "a"]);
        let state = tmp.path().join("w");
        let c = consumer(kind, &[("a", &a)], &[cmd_witness(&state, &k)], &k);
        c.git_ok(&["config", "--unset", "forum.witnessVerifiers"]);
        let o = fetch(&c, "a", &[]);
        assert!(o.status.success(), "{kind}: {}", stderr(&o));
        assert!(
            stdout(&o).contains("witness cmd:")
                && stdout(&o).contains("cosigned example.com/forum/main at size 3"),
            "{kind}: {}",
            stdout(&o)
        );
        let cosigned = c.git_ok(&["show", &format!("{COSIGS}:note")]);
        let cosigned = format!("{}\n", cosigned.trim_end());
        let v = cosign::verifiers(std::slice::from_ref(&k.witness_vkey)).unwrap();
        let got = cosign::verify(&cosigned, &v).unwrap();
        assert_eq!(got.len(), 1, "{kind}");
        assert_eq!(got[0].witness, "witness.example/w1");
        // The line is not a plain note signature of the witness's key.
        let plain = gnote::open(
            &cosigned,
            &gnote::verifiers(std::slice::from_ref(&k.log_vkey)).unwrap(),
        )
        .unwrap();
        assert_eq!(plain.signers, ["example.com/forum"], "{kind}");
        // verify reads the records: unchecked without keys, verified with the flag.
        c.git_ok(&[
            "update-ref",
            "refs/forum/ledgers/main",
            "refs/forum/remotes/a/main",
        ]);
        let o = c.forum_ok(&["verify"]);
        assert!(
            o.contains("1 cosigned note(s) recorded, unchecked"),
            "{kind}: {o}"
        );
        let o = c.forum_ok(&["verify", "--witness-verifier", &k.witness_vkey]);
        assert!(
            o.contains("1 cosigned note(s) recorded, 1 verified"),
            "{kind}: {o}"
        );
        // A note key is not a cosignature key: one line naming it.
        let o = c
            .forum()
            .args(["verify", "--witness-verifier", &k.log_vkey])
            .output()
            .unwrap();
        one_line_error(&o, "not a cosignature key");
        // One byte of the recorded cosignature changed: verify fails, naming the witness.
        let line = cosigned.lines().last().unwrap().to_string();
        let b64 = line.rsplit(' ').next().unwrap();
        let mut raw = base64_decode(b64);
        raw[20] ^= 1;
        let forged = cosigned.replace(b64, &base64_encode(&raw));
        let blob = c.git_in(&["hash-object", "-w", "--stdin"], forged.as_bytes());
        let tree = c.git_in(
            &["mktree"],
            format!("100644 blob {blob}\tnote\n").as_bytes(),
        );
        let commit = c.git_ok(&[
            "commit-tree",
            &tree,
            "-p",
            COSIGS,
            "-m",
            "cosigned 3 by forged",
        ]);
        c.git_ok(&["update-ref", COSIGS, &commit]);
        let o = c
            .forum()
            .args(["verify", "--witness-verifier", &k.witness_vkey])
            .output()
            .unwrap();
        assert!(!o.status.success(), "{kind}");
        assert!(
            stdout(&o).contains("does not verify over this checkpoint")
                && stdout(&o).contains("[bad-signature]"),
            "{kind}: {}",
            stdout(&o)
        );
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

fn base64_encode(b: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// `POST /witness` and `git forum witness` are one witness over one state directory: the route
/// cosigns a first note and an extension, the CLI then refuses a rewritten tree against what
/// the route accepted, and the route answers that rewrite 409 with the reason, the note it
/// holds and where both notes were kept. A body without an offer is 400; a server started
/// without a witness state is 503.
#[test]
fn the_witness_route_and_command_share_one_state_on_every_format() {
    for kind in FORMATS {
        let tmp = tempfile::tempdir().unwrap();
        let l = log(kind, "alice", 3);
        let k = keys(&l);
        let first = note(&l, &k.log_key);
        let state = tmp.path().join("w");
        let w = Repo::new(kind);
        w.git_ok(&["config", "forum.noteVerifiers", &k.log_vkey]);
        let served = w.serve(
            &[
                "--witness-state",
                state.to_str().unwrap(),
                "--witness-key",
                k.witness_key.to_str().unwrap(),
            ],
            Stdio::null(),
        );
        let (code, body) = http_json(&served.addr, "POST", "/witness", &json!({"note": first}));
        assert_eq!(code, 200, "{kind}: {body}");
        assert_eq!(body["schema"], "git-forum.witness/1");
        let v = cosign::verifiers(std::slice::from_ref(&k.witness_vkey)).unwrap();
        let cosigned = body["cosigned"].as_str().unwrap();
        assert_eq!(cosign::verify(cosigned, &v).unwrap().len(), 1, "{kind}");
        assert_eq!(body["witness_key"], k.witness_vkey.as_str());

        l.append("alice", "note", r#"{"more":1}"#);
        note(&l, &k.log_key);
        let proof = l.forum_ok(&["prove", "--consistency-from", "3", "--tlog"]);
        let (code, body) = http_json(&served.addr, "POST", "/witness", &json!({"proof": proof}));
        assert_eq!(code, 200, "{kind}: {body}");
        assert_eq!(body["size"], 4);

        // Another tree of the same log, 6 entries: the CLI on the same state refuses it.
        let m = log(kind, "mallory", 6);
        note(&m, &k.log_key);
        m.append("mallory", "note", r#"{"m":7}"#);
        note(&m, &k.log_key);
        let forged = m.forum_ok(&["prove", "--consistency-from", "6", "--tlog"]);
        let f = tmp.path().join("forged.txt");
        std::fs::write(&f, &forged).unwrap();
        let o = l
            .forum()
            .arg("witness")
            .arg(&f)
            .arg("--state")
            .arg(&state)
            .arg("--witness-key")
            .arg(&k.witness_key)
            .args(["--note-verifier", &k.log_vkey])
            .output()
            .unwrap();
        one_line_error(&o, "the last accepted checkpoint has size 4");
        // Without a state or a key (flags or config): one line saying what to pass.
        let o = l.forum().arg("witness").arg(&f).output().unwrap();
        one_line_error(
            &o,
            "no witness state: pass --state DIR or set forum.witnessState",
        );
        let o = l
            .forum()
            .arg("witness")
            .arg(&f)
            .arg("--state")
            .arg(&state)
            .output()
            .unwrap();
        one_line_error(&o, "no witness key: pass --witness-key FILE");
        // The route, given a bare note of size 4 from the other tree: a conflict, with both
        // notes kept.
        let m4 = note(&log(kind, "mallory", 4), &k.log_key);
        let (code, body) = http_json(&served.addr, "POST", "/witness", &json!({"note": m4}));
        assert_eq!(code, 409, "{kind}: {body}");
        assert_eq!(body["conflict"], true);
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("shows another view"),
            "{body}"
        );
        assert!(
            body["accepted"].as_str().unwrap().contains("\n4\n"),
            "{body}"
        );
        let evidence = body["evidence"].as_str().unwrap();
        let text = std::fs::read_to_string(evidence).unwrap();
        assert!(text.contains(&m4), "{kind}");
        let (code, body) = http_json(&served.addr, "POST", "/witness", &json!({}));
        assert_eq!(code, 400, "{kind}: {body}");
        drop(served);

        // The MCP tool is the same route, the state and key from the repository's config.
        w.git_ok(&["config", "forum.witnessState", state.to_str().unwrap()]);
        w.git_ok(&[
            "config",
            "forum.witnessKey",
            k.witness_key.to_str().unwrap(),
        ]);
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "witness", "arguments": {"note": m4}}});
        let (ok, out) = w.mcp_batch(
            &[],
            &[
                r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#.to_string(),
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string(),
                call.to_string(),
            ],
        );
        assert!(ok, "{kind}: {out}");
        let reply: serde_json::Value = out
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|r| r["id"] == 2)
            .unwrap();
        assert_eq!(reply["result"]["isError"], true, "{kind}: {reply}");
        assert_eq!(
            reply["result"]["structuredContent"]["conflict"], true,
            "{reply}"
        );
        w.git_ok(&["config", "--unset", "forum.witnessState"]);
        let plain = w.serve(&[], Stdio::null());
        let (code, body) = http_json(&plain.addr, "POST", "/witness", &json!({"note": first}));
        assert_eq!(code, 503, "{kind}: {body}");
        assert!(
            body["error"].as_str().unwrap().contains("not a witness"),
            "{body}"
        );
    }
}

/// `fetch` asks each `forum.witness` (a `cmd:` and an http:// `git forum serve`) about the
/// remote's latest note, records the cosignatures on refs/forum/cosignatures/main, and next
/// time offers a consistency proof from the size each witness cosigned. A witness that fails
/// (exits non-zero, cannot be reached, misses its deadline) is one line on stderr and does not
/// fail the fetch unless `--require-witness`; a remote without notes is said to carry none.
#[test]
fn fetch_asks_the_witnesses_and_records_their_cosignatures_on_every_format() {
    for kind in FORMATS {
        let tmp = tempfile::tempdir().unwrap();
        let l = log(kind, "alice", 3);
        let k = keys(&l);
        let a = bare(tmp.path(), "a", kind);
        l.git_ok(&["remote", "add", "a", &a]);
        l.forum_ok(&["push", "a"]);
        let w = Repo::new(kind);
        w.git_ok(&["config", "forum.noteVerifiers", &k.log_vkey]);
        let hstate = tmp.path().join("hw");
        let served = w.serve(
            &[
                "--witness-state",
                hstate.to_str().unwrap(),
                "--witness-key",
                k.witness_key.to_str().unwrap(),
            ],
            Stdio::null(),
        );
        let http = format!("http://{}", served.addr);
        let cmd = cmd_witness(&tmp.path().join("cw"), &k);
        let c = consumer(kind, &[("a", &a)], &[cmd.clone(), http.clone()], &k);

        // No note on the remote yet.
        let o = fetch(&c, "a", &[]);
        assert!(o.status.success(), "{kind}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("a carries no signed note of ledger main"),
            "{kind}: {}",
            stderr(&o)
        );
        let o = fetch(&c, "a", &["--require-witness"]);
        assert!(!o.status.success(), "{kind}");

        note(&l, &k.log_key);
        l.forum_ok(&["push", "a"]);
        let o = fetch(&c, "a", &["--require-witness"]);
        assert!(o.status.success(), "{kind}: {}", stderr(&o));
        assert_eq!(
            stdout(&o)
                .matches("cosigned example.com/forum/main at size 3")
                .count(),
            2,
            "{kind}: {}",
            stdout(&o)
        );
        assert_eq!(records(&c).len(), 2, "{kind}");

        // Grown: each witness gets a consistency proof from 3 (a bare note would be refused).
        for i in 3..6 {
            l.append("alice", "note", &format!(r#"{{"alice":{i}}}"#));
        }
        note(&l, &k.log_key);
        l.forum_ok(&["push", "a"]);
        let o = fetch(&c, "a", &["--require-witness"]);
        assert!(o.status.success(), "{kind}: {}", stderr(&o));
        assert_eq!(
            stdout(&o).matches("at size 6").count(),
            2,
            "{kind}: {}",
            stdout(&o)
        );
        let recs = records(&c);
        assert_eq!(recs.len(), 4, "{kind}: {recs:?}");
        assert!(recs[0].starts_with("cosigned 6 by "), "{recs:?}");

        // Failing witnesses: a command that fails, a port nobody answers, a deadline missed.
        c.git_ok(&[
            "config",
            "--add",
            "forum.witness",
            "cmd:echo no >&2; exit 3",
        ]);
        c.git_ok(&["config", "--add", "forum.witness", "http://127.0.0.1:1"]);
        c.git_ok(&["config", "--add", "forum.witness", "cmd:sleep 20"]);
        c.git_ok(&[
            "config",
            "--add",
            "forum.witness",
            "cmd:head -c 2000000 /dev/zero",
        ]);
        c.git_ok(&["config", "--add", "forum.witness", "ftp://witness.example"]);
        c.git_ok(&["config", "forum.witnessTimeout", "1"]);
        let o = fetch(&c, "a", &[]);
        assert!(o.status.success(), "{kind}: {}", stderr(&o));
        let err = stderr(&o);
        let lines: Vec<&str> = err
            .lines()
            .filter(|l| l.starts_with("main: witness"))
            .collect();
        assert_eq!(lines.len(), 5, "{kind}: {err}");
        assert!(
            lines[0].contains("exited with") && lines[0].ends_with(": no"),
            "{err}"
        );
        assert!(
            lines[1].contains("POST http://127.0.0.1:1/witness"),
            "{err}"
        );
        assert!(lines[2].contains("did not answer within 1 s"), "{err}");
        assert!(lines[3].contains("larger than 1048576 bytes"), "{err}");
        assert!(
            lines[4].contains("neither cmd:COMMAND nor an http:// URL"),
            "{err}"
        );
        let o = fetch(&c, "a", &["--require-witness"]);
        assert!(!o.status.success(), "{kind}");
        // Nothing new was cosigned: no new records.
        assert_eq!(records(&c).len(), 4, "{kind}");
        drop(served);
    }
}

/// A split view through one witness: remote `a` serves the honest ledger, remote `b` another
/// tree of the same log (same origin and key). A consumer fetching `a` has the witness cosign
/// size 3; another consumer fetching `b` is told by the witness that it holds size 3, finds
/// that `b`'s tree has another root there, and reports the split view with both notes (exit
/// 1); `verify` then reports it from the record. Fetching both remotes in one repository is
/// refused as a split view too, and an honest extension of `a` is cosigned.
#[test]
fn a_witness_catches_a_split_view_between_two_remotes_on_every_format() {
    for kind in FORMATS {
        let tmp = tempfile::tempdir().unwrap();
        let l = log(kind, "alice", 3);
        let k = keys(&l);
        let honest3 = note(&l, &k.log_key);
        let a = bare(tmp.path(), "a", kind);
        l.git_ok(&["remote", "add", "a", &a]);
        l.forum_ok(&["push", "a"]);
        let m = log(kind, "mallory", 5);
        let forged5 = note(&m, &k.log_key);
        let b = bare(tmp.path(), "b", kind);
        m.git_ok(&["remote", "add", "b", &b]);
        m.forum_ok(&["push", "b"]);
        let witness = cmd_witness(&tmp.path().join("w"), &k);

        let c1 = consumer(kind, &[("a", &a)], std::slice::from_ref(&witness), &k);
        let o = fetch(&c1, "a", &[]);
        assert!(o.status.success(), "{kind}: {}", stderr(&o));
        assert!(stdout(&o).contains("at size 3"), "{kind}: {}", stdout(&o));

        let c2 = consumer(kind, &[("b", &b)], std::slice::from_ref(&witness), &k);
        let o = fetch(&c2, "b", &[]);
        assert_eq!(o.status.code(), Some(1), "{kind}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains("main: SPLIT VIEW through witness cmd:"),
            "{kind}: {err}"
        );
        assert!(
            err.contains("holds example.com/forum/main at size 3"),
            "{err}"
        );
        let out = stdout(&o);
        assert!(out.contains("the note the witness holds:"), "{out}");
        assert!(out.contains(&indent(&honest3)), "{kind}: {out}");
        assert!(out.contains(&indent(&forged5)), "{kind}: {out}");
        let recs = records(&c2);
        assert_eq!(recs, ["split-view 3 by ".to_string() + &witness], "{kind}");
        let held = c2.git_ok(&["show", &format!("{COSIGS}:held")]);
        assert_eq!(format!("{held}\n"), honest3, "{kind}");
        c2.git_ok(&[
            "update-ref",
            "refs/forum/ledgers/main",
            "refs/forum/remotes/b/main",
        ]);
        let o = c2.forum().arg("verify").output().unwrap();
        assert!(!o.status.success(), "{kind}");
        assert!(
            stdout(&o).contains("split view recorded by fetch")
                && stdout(&o).contains("[split-view]"),
            "{kind}: {}",
            stdout(&o)
        );

        // Both remotes in one repository: the second is refused as a split view.
        c1.git_ok(&["remote", "add", "b", &b]);
        let o = fetch(&c1, "b", &[]);
        assert!(!o.status.success(), "{kind}");
        assert!(
            stdout(&o).contains("main: REFUSED (split-view)"),
            "{kind}: {}",
            stdout(&o)
        );

        // The honest log grows: cosigned through a proof from 3.
        l.append("alice", "note", r#"{"alice":3}"#);
        note(&l, &k.log_key);
        l.forum_ok(&["push", "a"]);
        let o = fetch(&c1, "a", &["--require-witness"]);
        assert!(o.status.success(), "{kind}: {}", stderr(&o));
        assert!(
            stdout(&o).contains("cosigned example.com/forum/main at size 4"),
            "{kind}: {}",
            stdout(&o)
        );
        c1.git_ok(&[
            "update-ref",
            "refs/forum/ledgers/main",
            "refs/forum/remotes/a/main",
        ]);
        let o = c1.forum_ok(&["verify"]);
        assert!(
            o.contains("2 cosigned note(s) recorded, 2 verified"),
            "{kind}: {o}"
        );
    }
}

fn indent(note: &str) -> String {
    note.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// An independent check: a Go program written from the C2SP text on Go's standard library and
/// golang.org/x/mod/sumdb/note (tests/integration/data/cosigcheck; x/mod has no cosignature
/// verifier of its own) opens the note `witness` cosigned with the log's key and the
/// witness's type-0x04 key, and refuses every single-byte change of the cosignature line.
#[test]
fn go_verifier_accepts_the_cosignature_and_refuses_any_changed_byte() {
    let Some(go) = crate::tlog::go_tool("cosigcheck") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let l = log("sha1", "alice", 3);
    let k = keys(&l);
    let n = note(&l, &k.log_key);
    let f = tmp.path().join("note.txt");
    std::fs::write(&f, &n).unwrap();
    let o = l
        .forum()
        .arg("witness")
        .arg(&f)
        .arg("--state")
        .arg(tmp.path().join("w"))
        .arg("--witness-key")
        .arg(&k.witness_key)
        .args(["--note-verifier", &k.log_vkey])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let run = |text: &[u8], mutate: bool| {
        use std::io::Write;
        let mut c = std::process::Command::new(&go)
            .args([&k.log_vkey, &k.witness_vkey])
            .args(mutate.then_some("-mutate"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(text).unwrap();
        let o = c.wait_with_output().unwrap();
        (o.status.success(), stdout(&o))
    };
    let (ok, out) = run(&o.stdout, true);
    assert!(ok, "{out}");
    assert!(out.starts_with("ok: cosigned at "), "{out}");
    // Under another witness key it does not open.
    let other = cosign::vkey_of_note_vkey(&keygen(&l, tmp.path(), "witness.example/w9").1).unwrap();
    let mut c = std::process::Command::new(&go)
        .args([&k.log_vkey, &other])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    c.stdin.take().unwrap().write_all(&o.stdout).unwrap();
    assert!(!c.wait_with_output().unwrap().status.success());
}

/// A remote and the local ledger: the consumer's own ledger carries a note of the same log
/// (origin and key) whose tree the remote's copy does not have. `fetch` reports the split view
/// with both notes (exit 1) and records it; `verify` then fails on it.
#[test]
fn fetch_reports_a_split_view_between_a_remote_and_the_local_ledger_on_every_format() {
    for kind in FORMATS {
        let tmp = tempfile::tempdir().unwrap();
        let l = log(kind, "alice", 4);
        let k = keys(&l);
        let remote4 = note(&l, &k.log_key);
        let a = bare(tmp.path(), "a", kind);
        l.git_ok(&["remote", "add", "a", &a]);
        l.forum_ok(&["push", "a"]);
        // The consumer's own copy: the same log, another tree of 2 entries, signed.
        let c = consumer(kind, &[("a", &a)], &[], &k);
        c.git_ok(&["config", "forum.origin", ORIGIN]);
        c.append("mallory", "note", r#"{"m":0}"#);
        c.append("mallory", "note", r#"{"m":1}"#);
        let local2 = note(&c, &k.log_key);
        let o = fetch(&c, "a", &[]);
        assert_eq!(o.status.code(), Some(1), "{kind}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains("main: SPLIT VIEW between the local ledger and the remote"),
            "{kind}: {err}"
        );
        assert!(err.contains("at size 2 the remote tree has root"), "{err}");
        let out = stdout(&o);
        assert!(out.contains("the note the local ledger carries:"), "{out}");
        assert!(
            out.contains(&indent(&local2)) && out.contains(&indent(&remote4)),
            "{kind}: {out}"
        );
        assert_eq!(records(&c), ["split-view 2 by local ledger"], "{kind}");
        let o = c.forum().arg("verify").output().unwrap();
        assert!(!o.status.success(), "{kind}");
        assert!(
            stdout(&o).contains("[split-view]"),
            "{kind}: {}",
            stdout(&o)
        );
        // An honest consumer whose local ledger is a prefix of the remote's: no split view.
        let h = consumer(kind, &[("a", &a)], &[], &k);
        h.git_ok(&["config", "forum.origin", ORIGIN]);
        let o = fetch(&h, "a", &[]);
        assert!(o.status.success(), "{kind}: {}", stderr(&o));
        assert!(records(&h).is_empty(), "{kind}");
    }
}
