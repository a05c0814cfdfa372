//! The standard tree and the hooks' checks through every transport: a signed note, a C2SP
//! proof, a file of the tlog-tiles layout and a hook's answer are the same from the command
//! line, the daemon over HTTP and `git forum mcp`, and a bad value is refused in the same words
//! by each. What the daemon serves is checked by the independent Go verifier (tlogcheck) when
//! Go is installed, and by `verify-proof` always.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value as J, json};

use crate::common::{Repo, http_json, on_each_kind};
use crate::tlog::{go_tool, imported, keygen, verify_proof};

/// One GET on its own connection, without the token (the layout is open on loopback): status,
/// content type and the body's bytes.
fn http_get(addr: &str, path: &str) -> (u16, String, Vec<u8>) {
    use std::io::{Read, Write};
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let at = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response");
    let head = String::from_utf8_lossy(&out[..at]).to_string();
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    let ty = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    (code, ty, out[at + 4..].to_vec())
}

/// The status of a POST of `{}` without the token.
fn post_without_token(addr: &str, path: &str) -> u16 {
    use std::io::{Read, Write};
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}"
    );
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.split(' ').nth(1).unwrap().parse().unwrap()
}

/// Calls each `(tool, arguments)` through `git forum mcp`: each tool's answer (or error) body.
fn mcp_calls(repo: &Repo, calls: &[(&str, J)]) -> Vec<(bool, J)> {
    let mut lines = vec![
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#.to_string(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string(),
    ];
    for (i, (name, args)) in calls.iter().enumerate() {
        lines.push(
            json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                "params": {"name": name, "arguments": args}})
            .to_string(),
        );
    }
    let (_, out) = repo.mcp_batch(&[], &lines);
    let replies: Vec<J> = out
        .lines()
        .map(|l| serde_json::from_str::<J>(l).unwrap())
        .collect();
    (1..=calls.len())
        .map(|id| {
            let r = replies
                .iter()
                .find(|r| r["id"] == id)
                .unwrap_or_else(|| panic!("no MCP reply to {id}: {out}"));
            let text = r["result"]["content"][0]["text"].as_str().unwrap_or("");
            (
                r["result"]["isError"] == true,
                serde_json::from_str(text).unwrap_or(J::Null),
            )
        })
        .collect()
}

/// A command's output with `stdin` on its standard input.
fn forum_in(repo: &Repo, args: &[&str], stdin: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = repo
        .forum()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child.wait_with_output().unwrap()
}

/// Every file under `dir`, as its path relative to `dir` (with `/`).
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().to_string();
                out.push(rel.replace('\\', "/"));
            }
        }
    }
    out.sort();
    out
}

/// The command line's one line of error, without its `git forum: ` lead.
fn cli_error(o: &std::process::Output) -> String {
    assert!(!o.status.success(), "should fail: {o:?}");
    let err = String::from_utf8_lossy(&o.stderr).trim_end().to_string();
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    err
}

/// Proofs and notes over HTTP and MCP are what the command line writes, and they verify: the
/// Go verifier (when present) and `verify-proof` accept the proofs the daemon answers.
#[test]
fn notes_and_proofs_are_the_same_on_every_transport_on_every_kind() {
    on_each_kind(|repo| {
        let keys = tempfile::tempdir().unwrap();
        let (skey, vkey) = keygen(repo, keys.path(), "example.com/forum");
        repo.git_ok(&["config", "forum.noteKey", skey.to_str().unwrap()]);
        let hashes = imported(repo, 300);
        let served = repo.serve(&[], Stdio::null());
        let addr = served.addr.as_str();
        // Signing a note is a write: the token, always.
        assert_eq!(post_without_token(addr, "/tlog/checkpoint"), 401);
        assert_eq!(post_without_token(addr, "/hooks/check"), 401);
        let (code, http_note) = http_json(
            addr,
            "POST",
            "/tlog/checkpoint",
            &json!({"no_record": true}),
        );
        assert_eq!(code, 200, "{http_note}");
        assert_eq!(http_note["size"], 300);
        let cli_note = repo.forum_json(&["checkpoint", "--note", "--no-record"]);
        let mcp = mcp_calls(repo, &[("tlog_checkpoint", json!({"no_record": true}))]);
        // Ed25519 signs deterministically: one tree, one note, whoever asked.
        assert_eq!(cli_note, http_note);
        assert_eq!(mcp[0], (false, http_note.clone()));
        repo.append("agent", "note", r#"{"i":300}"#);
        repo.append("agent", "note", r#"{"i":301}"#);
        let (code, newer) = http_json(addr, "POST", "/tlog/checkpoint", &json!({}));
        assert_eq!((code, &newer["size"]), (200, &json!(302)), "{newer}");
        // The recorded checkpoint is entry 302; the note covers the 302 before it.
        let mut hashes = hashes;
        for seq in ["300", "301"] {
            let e = repo.forum_json(&["show", seq]);
            hashes.push(e["entry_hash"].as_str().unwrap().to_string());
        }

        let asks = [
            (json!({"seq": 7}), vec!["prove", "7", "--tlog-proof"]),
            (
                json!({"seq": 299, "size": 300}),
                vec!["prove", "299", "--tlog-proof", "--size", "300"],
            ),
            (
                json!({"consistency_from": 300}),
                vec!["prove", "--consistency-from", "300", "--tlog"],
            ),
        ];
        let calls: Vec<(&str, J)> = asks
            .iter()
            .map(|(b, _)| ("tlog_prove", b.clone()))
            .collect();
        let mcp = mcp_calls(repo, &calls);
        let outside = tempfile::tempdir().unwrap();
        let mut manifest = String::new();
        for (i, (body, cli)) in asks.iter().enumerate() {
            let (code, answer) = http_json(addr, "POST", "/tlog/prove", body);
            assert_eq!(code, 200, "{body}: {answer}");
            assert_eq!(mcp[i], (false, answer.clone()), "{body}");
            let text = answer["proof"].as_str().unwrap();
            assert_eq!(repo.forum_ok(cli).trim_end(), text.trim_end(), "{body}");
            let file = outside.path().join(format!("proof-{i}"));
            std::fs::write(&file, text).unwrap();
            let mut args = vec!["--note-verifier", vkey.as_str()];
            match answer["seq"].as_u64() {
                Some(seq) => {
                    let eh = answer["entry_hash"].as_str().unwrap();
                    assert_eq!(eh, hashes[seq as usize]);
                    assert_eq!(answer["kind"], "tlog-inclusion");
                    manifest.push_str(&format!("inclusion {} {eh}\n", file.display()));
                    args.extend(["--entry-hash", eh]);
                }
                None => {
                    assert_eq!(answer["kind"], "tlog-consistency");
                    manifest.push_str(&format!("consistency {}\n", file.display()));
                }
            }
            let ok = verify_proof(repo, outside.path(), text, &args);
            assert!(ok.status.success(), "{body}: {ok:?}");
        }
        if let Some(checker) = go_tool("tlogcheck") {
            use std::io::Write;
            let mut child = Command::new(&checker)
                .args(["proofs", &vkey])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let _ = child.stdin.take().unwrap().write_all(manifest.as_bytes());
            let o = child.wait_with_output().unwrap();
            let said = String::from_utf8_lossy(&o.stdout).to_string();
            assert!(o.status.success(), "the Go checker refused: {said}");
            assert!(said.starts_with("ok: 3 proofs accepted"), "{said}");
        }

        // The same bad values, the same words.
        let bad = [
            (
                json!({"seq": 999}),
                vec!["prove", "999", "--tlog-proof"],
                "ledger \"main\" has no entry at seq 999 within its signed note of size 302",
            ),
            (
                json!({"seq": 1, "size": 7}),
                vec!["prove", "1", "--tlog-proof", "--size", "7"],
                "ledger \"main\" has no signed note of size 7",
            ),
            (
                json!({"consistency_from": 0}),
                vec!["prove", "--consistency-from", "0", "--tlog"],
                "--consistency-from 0 is out of range",
            ),
        ];
        let calls: Vec<(&str, J)> = bad
            .iter()
            .map(|(b, _, _)| ("tlog_prove", b.clone()))
            .collect();
        let mcp = mcp_calls(repo, &calls);
        for (i, (body, cli, words)) in bad.iter().enumerate() {
            let (code, answer) = http_json(addr, "POST", "/tlog/prove", body);
            let said = answer["error"].as_str().unwrap_or("").to_string();
            assert!(
                code >= 400 && said.contains(words),
                "{body}: {code} {answer}"
            );
            assert_eq!(mcp[i], (true, answer.clone()), "{body}");
            let o = repo.forum().args(cli).output().unwrap();
            assert!(cli_error(&o).ends_with(&said), "{body}: {o:?}");
        }
        let (code, answer) = http_json(
            addr,
            "POST",
            "/tlog/prove",
            &json!({"seq": 1, "consistency_from": 1}),
        );
        assert_eq!(code, 400);
        assert_eq!(
            answer["error"],
            "give exactly one of seq (an inclusion proof) and consistency_from (a consistency proof)"
        );
    });
}

/// Every file `tiles export` writes is served byte for byte at GET /tlog/PATH (with no token
/// on loopback), by the `tlog_read` tool (base64) and by `tiles get PATH`; the files fetched
/// over HTTP alone let the Go verifier prove every entry and every size.
#[test]
fn the_tiles_layout_is_served_the_same_on_every_transport_on_every_kind() {
    on_each_kind(|repo| {
        let keys = tempfile::tempdir().unwrap();
        let (skey, vkey) = keygen(repo, keys.path(), "example.com/forum");
        let hashes = imported(repo, 300);
        repo.forum_ok(&[
            "checkpoint",
            "--note",
            "--note-key",
            skey.to_str().unwrap(),
            "--no-record",
        ]);
        let out = tempfile::tempdir().unwrap();
        let exported = out.path().join("exported");
        repo.forum_ok(&["tiles", "export", exported.to_str().unwrap()]);
        let files = files_under(&exported);
        assert_eq!(
            files,
            [
                "checkpoint",
                "tile/0/000",
                "tile/0/001.p/44",
                "tile/1/000.p/1",
                "tile/entries/000",
                "tile/entries/001.p/44"
            ]
        );
        let served = repo.serve(&[], Stdio::null());
        let fetched = out.path().join("fetched");
        let calls: Vec<(&str, J)> = files
            .iter()
            .map(|f| ("tlog_read", json!({"path": f})))
            .collect();
        let mcp = mcp_calls(repo, &calls);
        for (i, f) in files.iter().enumerate() {
            let want = std::fs::read(exported.join(f)).unwrap();
            let (code, ty, bytes) = http_get(&served.addr, &format!("/tlog/{f}"));
            assert_eq!(code, 200, "{f}: {}", String::from_utf8_lossy(&bytes));
            assert_eq!(bytes, want, "GET /tlog/{f}");
            let want_type = if f == "checkpoint" {
                "text/plain; charset=utf-8"
            } else {
                "application/octet-stream"
            };
            assert_eq!(ty, want_type, "{f}");
            let (failed, answer) = &mcp[i];
            assert!(!failed, "{f}: {answer}");
            assert_eq!(answer["path"], f.as_str());
            assert_eq!(answer["size"], 300);
            assert_eq!(answer["content_type"], want_type);
            use base64::Engine as _;
            let b = base64::engine::general_purpose::STANDARD
                .decode(answer["base64"].as_str().unwrap())
                .unwrap();
            assert_eq!(b, want, "MCP {f}");
            let o = repo.forum().args(["tiles", "get", f]).output().unwrap();
            assert!(o.status.success(), "{f}: {o:?}");
            assert_eq!(o.stdout, want, "tiles get {f}");
            let cli = repo.forum_json(&["tiles", "get", f]);
            assert_eq!(&cli, answer, "tiles get {f} --json");
            let p: PathBuf = fetched.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, bytes).unwrap();
        }
        // A narrower partial tile (what a client of an older, smaller note asks) is the prefix.
        let (code, _, narrow) = http_get(&served.addr, "/tlog/tile/0/001.p/10");
        assert_eq!(code, 200);
        let whole = std::fs::read(exported.join("tile/0/001.p/44")).unwrap();
        assert_eq!(narrow, whole[..10 * 32]);
        if let Some(checker) = go_tool("tlogcheck") {
            let entries = out.path().join("entries");
            std::fs::write(&entries, hashes.join("\n")).unwrap();
            let o = Command::new(&checker)
                .args(["tiles", &vkey])
                .arg(&fetched)
                .arg(&entries)
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&o.stdout).to_string();
            assert!(o.status.success(), "{said}");
            assert!(said.starts_with("ok: 300 records"), "{said}");
        }
        // The same bad paths, the same words (a tile beyond the note is not found).
        let bad = [
            ("tile/0/002", 404, "tile/0/002 is beyond the tree"),
            ("tile/1/000", 404, "tile/1/000 is beyond the tree"),
            ("tile/0/001.p/45", 404, "beyond the tree"),
            ("tile/0/1", 400, "is not a file of the tlog-tiles layout"),
            ("tile/64/000", 400, "is not a file of the tlog-tiles layout"),
            (
                "tile/0/000.p/0",
                400,
                "is not a file of the tlog-tiles layout",
            ),
            (
                "tile/data/000",
                400,
                "is not a file of the tlog-tiles layout",
            ),
        ];
        let calls: Vec<(&str, J)> = bad
            .iter()
            .map(|(p, _, _)| ("tlog_read", json!({"path": p})))
            .collect();
        let mcp = mcp_calls(repo, &calls);
        for (i, (p, status, words)) in bad.iter().enumerate() {
            let (code, ty, bytes) = http_get(&served.addr, &format!("/tlog/{p}"));
            assert_eq!((code, ty.as_str()), (*status, "application/json"), "{p}");
            let answer: J = serde_json::from_slice(&bytes).unwrap();
            let said = answer["error"].as_str().unwrap().to_string();
            assert!(said.contains(words), "{p}: {said}");
            assert_eq!(mcp[i], (true, answer.clone()), "{p}");
            let o = repo.forum().args(["tiles", "get", p]).output().unwrap();
            assert!(cli_error(&o).ends_with(&said), "{p}: {o:?}");
        }
    });
}

/// The hooks' answer to ref updates, asked rather than run: the same refusals from `hooks
/// check`, POST /hooks/check and the `hooks_check` tool, and nothing is changed by asking.
#[test]
fn a_hooks_answer_is_the_same_on_every_transport_on_every_kind() {
    on_each_kind(|repo| {
        repo.append("agent", "note", r#"{"i":0}"#);
        let tip = repo.git_ok(&["rev-parse", "refs/forum/ledgers/main"]);
        let zero = "0".repeat(tip.len());
        let served = repo.serve(&[], Stdio::null());
        let cases = [
            (
                "pre-receive",
                format!("{tip} {zero} refs/forum/ledgers/main\n{zero} {tip} refs/heads/x\n"),
                json!({"hook": "pre-receive", "ok": false, "refused": [{"refname": "refs/forum/ledgers/main",
                    "why": "ledgers are append-only; deleting one is not allowed"}]}),
            ),
            (
                "pre-receive",
                format!("{zero} {tip} refs/forum/ledgers/copy\n"),
                json!({"hook": "pre-receive", "ok": true, "refused": []}),
            ),
            (
                "pre-push",
                format!("refs/forum/ledgers/main {tip} refs/forum/ledgers/main {zero}\n"),
                json!({"hook": "pre-push", "ok": true, "refused": []}),
            ),
            (
                "pre-push",
                format!("(delete) {zero} refs/forum/ledgers/main {tip}\n"),
                json!({"hook": "pre-push", "ok": false, "refused": [{
                    "why": "ledger main: deleting a published ledger is not allowed; ledgers are append-only"}]}),
            ),
        ];
        let refs = || repo.git_ok(&["for-each-ref", "--format=%(refname) %(objectname)"]);
        let before = refs();
        let calls: Vec<(&str, J)> = cases
            .iter()
            .map(|(hook, stdin, _)| ("hooks_check", json!({"hook": hook, "stdin": stdin})))
            .collect();
        let mcp = mcp_calls(repo, &calls);
        for (i, (hook, stdin, want)) in cases.iter().enumerate() {
            let body = json!({"hook": hook, "stdin": stdin});
            let (code, answer) = http_json(&served.addr, "POST", "/hooks/check", &body);
            assert_eq!((code, &answer), (200, want), "{stdin}");
            assert_eq!(mcp[i], (false, want.clone()), "{stdin}");
            let o = forum_in(repo, &["hooks", "check", hook, "--json"], stdin);
            let cli: J = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(&cli, want, "{stdin}");
            assert_eq!(o.status.success(), want["ok"] == true, "{stdin}");
        }
        assert_eq!(refs(), before, "asking a hook moved a ref");
        // The same bad values, the same words.
        let bad = [
            (
                json!({"hook": "post-commit", "stdin": ""}),
                vec!["post-commit"],
                "field \"hook\" must be pre-push or pre-receive, not \"post-commit\"",
            ),
            (
                json!({"hook": "pre-receive", "stdin": "", "scan_code": true}),
                vec!["pre-receive", "--scan-code"],
                "scan_code and remote are pre-push's: the pre-receive check takes neither",
            ),
        ];
        let calls: Vec<(&str, J)> = bad
            .iter()
            .map(|(b, _, _)| ("hooks_check", b.clone()))
            .collect();
        let mcp = mcp_calls(repo, &calls);
        for (i, (body, args, words)) in bad.iter().enumerate() {
            let (code, answer) = http_json(&served.addr, "POST", "/hooks/check", body);
            assert_eq!(
                (code, answer["error"].as_str()),
                (400, Some(*words)),
                "{body}"
            );
            assert_eq!(mcp[i], (true, answer.clone()), "{body}");
            let mut cli = vec!["hooks", "check"];
            cli.extend(args);
            let o = forum_in(repo, &cli, "");
            assert!(cli_error(&o).ends_with(words), "{body}: {o:?}");
        }
    });
}
