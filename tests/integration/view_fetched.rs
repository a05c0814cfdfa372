//! The auditor's case: a ledger with a `--work` run pushed to a bare remote over `file://`,
//! fetched into a second repository, and served there as the copy it is (`git forum view
//! --ledger origin:main`), read-only. Every page reads; every write route and tool is refused
//! in one line naming the copy, over HTTP and MCP; no ref moves and no ledger is made. On
//! every repository kind.

use std::io::{Read, Write};

use serde_json::{Value as J, json};

use crate::common::{FORMATS, Repo, bare_origin};
use crate::view::{Got, http};

/// What the refusals of a write say.
const REFUSED: &str =
    "a copy fetched from \"origin\" is read-only (only `git forum fetch origin` moves it)";

/// Stops the view daemon of the fetched copy when dropped, whatever the test did.
struct Stops<'r>(&'r Repo, u32);

impl Drop for Stops<'_> {
    fn drop(&mut self) {
        let _ = self
            .0
            .forum()
            .args(["--ledger", "origin:main", "view", "--stop"])
            .output();
        let _ = std::process::Command::new("kill")
            .arg(self.1.to_string())
            .output();
    }
}

/// A POST of `body` with the daemon's token.
fn post(addr: &str, token: &str, path: &str, body: &J) -> (u16, J) {
    let body = body.to_string();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, rest) = text.split_once("\r\n\r\n").expect("a response");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(rest).unwrap_or(J::Null))
}

/// A repository of `kind` that fetched, from a bare remote, the ledger of another that made
/// one `--work` run (request seq 0, task T1), and that run's branch.
fn auditor(kind: &str) -> (Repo, tempfile::TempDir) {
    let a = Repo::new(kind);
    crate::work_run::setup(&a);
    crate::strict_replay::fixed_add_run(&a);
    let (bare, url) = bare_origin(&a, kind);
    a.forum_ok(&["push"]);
    a.git_ok(&["push", "-q", "origin", "main", "forum/run-0"]);
    let b = Repo::new(kind);
    b.git_ok(&["remote", "add", "origin", &url]);
    b.forum_ok(&["fetch"]);
    b.git_ok(&["fetch", "-q", "origin"]);
    (b, bare)
}

#[test]
fn view_serves_a_fetched_copy_read_only_and_refuses_every_write() {
    for kind in FORMATS {
        let (b, _bare) = auditor(kind);
        // The auditor checks out what the run shipped, so blame has a file to read.
        b.git_ok(&["checkout", "-q", "-b", "main", "origin/forum/run-0"]);
        let refs = b.git_ok(&["for-each-ref"]);
        assert_eq!(b.git_ok(&["for-each-ref", "refs/forum/ledgers"]), "");
        let started = b.forum_json(&["--ledger", "origin:main", "view", "--no-open"]);
        let pid = started["pid"].as_u64().unwrap() as u32;
        let _stop = Stops(&b, pid);
        let url = started["url"].as_str().unwrap();
        let rest = url.strip_prefix("http://").unwrap();
        let (addr, login) = rest.split_at(rest.find('/').unwrap());
        let got = http(addr, "GET", login, "");
        assert_eq!(got.status, 303, "{kind}: {}", got.body);
        let cookie = got.header("set-cookie").unwrap();
        let cookie = cookie.split(';').next().unwrap().to_string();
        let page = |p: &str| -> Got { http(addr, "GET", p, &format!("Cookie: {cookie}\r\n")) };
        for p in [
            "/view/runs",
            "/view/run/0",
            "/view/run/0/task/T1",
            "/view/record",
            "/view/entry/1",
            "/view/proof/1",
            "/view/apply/0",
            "/view/bench?a=0&b=0",
            "/view/blame?path=calc.py",
        ] {
            let got = page(p);
            assert_eq!(got.status, 200, "{kind} {p}: {}", got.body);
        }
        let runs = page("/view/runs").body;
        assert!(runs.contains("origin:main"), "{kind}: {runs}");
        let run = page("/view/run/0").body;
        assert!(
            run.contains("make add in calc.py add") && run.contains("calc.py"),
            "{kind}: {run}"
        );
        assert!(run.contains("the ledger verifies"), "{kind}");
        // The apply page says apply is for this repository's own runs, and shows the change.
        let apply = page("/view/apply/0").body;
        assert!(apply.contains("a fetched copy"), "{kind}: {apply}");
        assert!(
            crate::view::untagged(&apply).contains("return a + b"),
            "{kind}: {apply}"
        );
        // Bench compares runs of the copy; blame finds the copy's run behind the fixed line.
        let bench = crate::view::untagged(&page("/view/bench?a=0&b=0").body);
        // The measures table: one request in A, one in B, no difference.
        assert!(bench.contains("requests110"), "{kind}: {bench}");
        let blame = crate::view::untagged(&page("/view/blame?path=calc.py").body);
        let fixed = blame
            .lines()
            .find(|l| l.contains("return a + b"))
            .unwrap_or_else(|| panic!("{kind}: {blame}"));
        assert!(fixed.contains("T1"), "{kind}: {fixed}\n{blame}");
        // The proof download is the one `prove` gives, under the name the copy is signed for.
        let proof: J = serde_json::from_str(&page("/view/proof/1").body).unwrap();
        assert_eq!(proof["ledger"], json!("main"), "{kind}: {proof}");
        assert_eq!(
            proof,
            b.forum_json(&["--ledger", "origin:main", "prove", "1"]),
            "{kind}"
        );

        // Every write is refused in one line naming the copy, and nothing moves.
        let token_file = b.forum_ok(&["serve", "--token-path"]);
        let token = std::fs::read_to_string(token_file.trim()).unwrap();
        let append = json!({"actor": "x", "kind": "note", "payload": {"text": "hi"}});
        for (path, body) in [
            ("/append", append.clone()),
            ("/submit", json!({"request": "do it"})),
            ("/halt", json!({})),
            (
                "/gate/approve",
                json!({"run_seq": 0, "wave": 1, "approver": "me"}),
            ),
            ("/checkpoint", json!({})),
            ("/apply", json!({"run": 0})),
            ("/discard", json!({"run": 0})),
        ] {
            let (status, r) = post(addr, token.trim(), path, &body);
            assert_eq!(status, 409, "{kind} {path}: {r}");
            let msg = r["error"].as_str().unwrap();
            assert!(
                msg.starts_with(&format!("POST {path} writes")) && msg.contains(REFUSED),
                "{kind} {path}: {msg}"
            );
            assert!(!msg.contains('\n'));
        }
        // A read that takes a POST still answers.
        let (status, r) = post(addr, token.trim(), "/prove", &json!({"seq": 1}));
        assert_eq!(status, 200, "{kind}: {r}");
        // MCP refuses the same tool with the same words.
        let reply = b.mcp_call(&["--ledger", "origin:main"], "ledger_append", append);
        assert_eq!(reply["result"]["isError"], json!(true), "{kind}: {reply}");
        let text = reply["result"]["content"][0]["text"].as_str().unwrap();
        let said: J = serde_json::from_str(text).unwrap();
        let msg = said["error"].as_str().unwrap();
        assert!(
            msg.starts_with("POST /append writes") && msg.contains(REFUSED),
            "{kind}: {msg}"
        );
        let log = b.forum_json(&["--ledger", "origin:main", "log"]);
        assert!(
            log.as_array()
                .unwrap()
                .iter()
                .all(|e| e["kind"] != "note" && e["kind"] != "applied"),
            "{kind}: {log}"
        );
        assert_eq!(b.git_ok(&["for-each-ref"]), refs, "{kind}: a ref moved");
        assert_eq!(b.git_ok(&["for-each-ref", "refs/forum/ledgers"]), "");
    }
}

#[test]
fn serve_refuses_a_copy_never_fetched_in_one_line() {
    let repo = Repo::new("sha1");
    let o = repo
        .forum()
        .args(["--ledger", "elsewhere:main", "serve", "--port", "0"])
        .output()
        .unwrap();
    crate::common::one_line_error(
        &o,
        "no copy of ledger \"main\" fetched from \"elsewhere\" (refs/forum/remotes/elsewhere/main does not exist); run `git forum fetch elsewhere` first",
    );
    assert_eq!(repo.git_ok(&["for-each-ref"]), "");
}
