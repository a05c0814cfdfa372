//! The review pages (`/view/...`) over plain HTTP: the one-time login and its cookie, the
//! headers every page carries, hostile record text shown as text, a fixture run's waves,
//! blocked change and failed check, a fetched ledger, a missing body, and `git forum view`
//! itself. The browser tests (scripts, screenshots, axe) are elsewhere.

use std::io::{Read, Write};

use serde_json::{Value as J, json};

use crate::common::{Repo, Served, bare_origin, on_each_kind};

/// The text a hostile request and model output carry.
pub(crate) const SCRIPT: &str = "<script>alert(1)</script>";
pub(crate) const IMG: &str = "<img src=x onerror=alert(1)>";

/// The policy every page answers with.
pub(crate) const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; script-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The text of an HTML page with its tags left out, so a test can find code that syntax
/// colouring split into spans.
pub(crate) fn untagged(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

/// One answer: status, headers (names lower-cased), body.
pub(crate) struct Got {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Got {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request on its own connection, with these extra header lines.
pub(crate) fn http(addr: &str, method: &str, path: &str, extra: &str) -> Got {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{extra}Content-Length: 0\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").expect("a response");
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Got {
        status,
        headers,
        body: body.to_string(),
    }
}

/// A one-time login path minted with the daemon's bearer token.
pub(crate) fn mint(d: &Served, query: &str) -> String {
    let got = http(
        &d.addr,
        "POST",
        &format!("/view/mint{query}"),
        &format!("Authorization: Bearer {}\r\n", d.token()),
    );
    assert_eq!(got.status, 200, "{}", got.body);
    let v: J = serde_json::from_str(&got.body).unwrap();
    v["path"].as_str().unwrap().to_string()
}

/// Logs in: the session cookie's `name=value`.
pub(crate) fn login(d: &Served) -> String {
    let got = http(&d.addr, "GET", &mint(d, ""), "");
    assert_eq!(got.status, 303, "{}", got.body);
    let set = got.header("set-cookie").unwrap();
    set.split(';').next().unwrap().to_string()
}

/// A page with the session cookie.
pub(crate) fn page(d: &Served, cookie: &str, path: &str) -> Got {
    http(&d.addr, "GET", path, &format!("Cookie: {cookie}\r\n"))
}

/// Appends one entry with a causal parent; its seq.
fn put(repo: &Repo, actor: &str, kind: &str, parent: Option<u64>, body: J) -> u64 {
    put_at(repo, actor, kind, parent, None, body)
}

/// Appends one entry with a causal parent and, when given, its timestamp; its seq.
pub(crate) fn put_at(
    repo: &Repo,
    actor: &str,
    kind: &str,
    parent: Option<u64>,
    ts: Option<f64>,
    body: J,
) -> u64 {
    let mut args = vec![
        "append".to_string(),
        "--actor".into(),
        actor.into(),
        "--kind".into(),
        kind.into(),
        "--payload".into(),
        body.to_string(),
    ];
    if let Some(p) = parent {
        args.extend(["--causal-parent".to_string(), p.to_string()]);
    }
    if let Some(t) = ts {
        args.extend(["--ts".to_string(), format!("{t:.6}")]);
    }
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    repo.forum_json(&a)["seq"].as_u64().unwrap()
}

/// A run recorded entry by entry: a hostile request, a plan of two waves (T1 then T2, a data
/// edge), T1's change merged after its check passed, T2's change blocked after its check
/// failed, and an answer. Its request is at seq 0.
fn fixture(repo: &Repo) {
    // The changes name no commit: the pages render what the entries say, and a commit would
    // have to carry the trailers that tie it to its task for the ledger to verify.
    repo.git_ok(&["commit", "--allow-empty", "-qm", "base"]);
    let request = format!("make the test pass {SCRIPT} {IMG}");
    let r = put(repo, "client", "request", None, json!({"text": request}));
    assert_eq!(r, 0);
    let plan = put(
        repo,
        "dispatch",
        "plan",
        Some(r),
        json!({
            "tasks": [
                {"id": "T1", "agent": "backend", "instruction": "fix add", "depends_on": [], "order_deps": [], "done_when": []},
                {"id": "T2", "agent": "backend", "instruction": "write notes", "depends_on": ["T1"], "order_deps": [], "done_when": []}
            ],
            "waves": [["T1"], ["T2"]],
            "edges": [{"from": "T1", "to": "T2", "type": "data"}]
        }),
    );
    for (id, ok, decision) in [("T1", true, "merge"), ("T2", false, "block")] {
        let t = put(
            repo,
            "dispatch",
            "task",
            Some(plan),
            json!({"id": id, "agent": "backend", "instruction": format!("do {id}"), "data_from": [], "done_when": []}),
        );
        let res = put(
            repo,
            "backend",
            "result",
            Some(t),
            json!({"id": id, "ok": true, "model": "scripted-worker", "output": format!("did {id} {IMG}")}),
        );
        let change = put(
            repo,
            "dispatch",
            "change",
            Some(res),
            json!({"task": id,  "files": [{"path": format!("{id}.txt"), "status": "A", "added": 1, "removed": 0}], "diff": format!("+++ b/{id}.txt\n+line of {id}\n"), "truncated": false}),
        );
        let output = if ok {
            "ok\n".to_string()
        } else {
            format!("FAIL: {id} broke the test\n")
        };
        let check = put(
            repo,
            "checker",
            "check",
            Some(change),
            json!({"task": id, "command": "sh test.sh", "ok": ok, "exit": if ok { 0 } else { 1 }, "output": output, "seconds": 0.01}),
        );
        put(
            repo,
            "orchestrator",
            "ship",
            Some(check),
            json!({"task": id, "change": change, "decision": decision, "reason": format!("{decision} because of the check")}),
        );
    }
    put(
        repo,
        "synthesizer",
        "result",
        Some(r),
        json!({"answer": format!("done {SCRIPT}")}),
    );
}

/// Every page of the fixture, with the status it answers.
const PAGES: &[(&str, u16)] = &[
    ("/view/runs", 200),
    ("/view/runs?outcome=&q=test&page=1", 200),
    ("/view/run/0", 200),
    ("/view/run/0/task/T2", 200),
    ("/view/record", 200),
    ("/view/record?after=3&limit=5", 200),
    ("/view/entry/3", 200),
    ("/view/bench?a=0&b=0", 200),
    ("/view/blame", 200),
    ("/view/nothing", 404),
    ("/view/run/99", 404),
];

#[test]
fn view_a_login_url_works_once_and_every_page_needs_its_cookie() {
    let repo = Repo::new("sha1");
    fixture(&repo);
    let d = repo.serve(&[], std::process::Stdio::null());
    // Minting needs the daemon's token.
    assert_eq!(http(&d.addr, "POST", "/view/mint", "").status, 401);
    let path = mint(&d, "?run=0");
    let first = http(&d.addr, "GET", &path, "");
    assert_eq!(first.status, 303, "{}", first.body);
    assert_eq!(first.header("location"), Some("/view/run/0"));
    let cookie = first.header("set-cookie").unwrap();
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/view"] {
        assert!(cookie.contains(attr), "{cookie}");
    }
    // The same URL again is refused.
    let again = http(&d.addr, "GET", &path, "");
    assert_eq!(again.status, 401);
    assert!(again.body.contains("git forum view"), "{}", again.body);
    // Without the cookie, or with a made-up one, every page is a 401 saying what to run.
    for (p, _) in PAGES {
        for extra in ["", "Cookie: forum_view=0123abcd\r\n"] {
            let got = http(&d.addr, "GET", p, extra);
            assert_eq!(got.status, 401, "{p} {extra}");
            assert!(got.body.contains("git forum view"), "{p}: {}", got.body);
        }
    }
    let session = cookie.split(';').next().unwrap();
    assert_eq!(page(&d, session, "/view/runs").status, 200);
    // The pages are read-only.
    let post = http(
        &d.addr,
        "POST",
        "/view/runs",
        &format!("Cookie: {session}\r\n"),
    );
    assert_eq!(post.status, 405);
}

#[test]
fn view_every_page_carries_the_policy_and_no_inline_script_or_style() {
    let repo = Repo::new("sha1");
    fixture(&repo);
    let d = repo.serve(&[], std::process::Stdio::null());
    let cookie = login(&d);
    let mut all: Vec<(&str, u16)> = PAGES.to_vec();
    all.extend([("/view/proof/3", 200), ("/view/assets/view.css", 200)]);
    for (p, status) in all {
        let got = page(&d, &cookie, p);
        assert_eq!(got.status, status, "{p}: {}", got.body);
        assert_eq!(got.header("content-security-policy"), Some(CSP), "{p}");
        assert_eq!(got.header("x-content-type-options"), Some("nosniff"), "{p}");
        if got.header("content-type").unwrap().starts_with("text/html") {
            let lower = got.body.to_ascii_lowercase();
            assert!(!lower.contains("<script"), "{p}: a script element");
            assert!(!lower.contains(" style="), "{p}: a style attribute");
            assert!(!lower.contains("<img"), "{p}: an image element");
            assert!(
                !lower.contains("http://") || p == "/view/run/0",
                "{p}: an outside reference"
            );
        }
    }
    // The refusals carry it too.
    let refused = http(&d.addr, "GET", "/view/runs", "");
    assert_eq!(refused.header("content-security-policy"), Some(CSP));
    assert_eq!(refused.header("x-content-type-options"), Some("nosniff"));
}

#[test]
fn view_hostile_record_text_shows_as_text_on_the_runs_and_run_pages() {
    on_each_kind(|repo| {
        fixture(repo);
        let d = repo.serve(&[], std::process::Stdio::null());
        let cookie = login(&d);
        for p in ["/view/runs", "/view/run/0", "/view/run/0/task/T1"] {
            let got = page(&d, &cookie, p);
            assert_eq!(got.status, 200, "{p}");
            assert!(!got.body.contains(SCRIPT), "{p}: the script came through");
            assert!(!got.body.contains(IMG), "{p}: the image came through");
            assert!(
                got.body.contains("&lt;img src=x onerror=alert(1)&gt;"),
                "{p}: the hostile text is not shown escaped"
            );
        }
        let run = page(&d, &cookie, "/view/run/0").body;
        assert!(run.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    });
}

#[test]
fn view_the_run_page_shows_two_waves_a_blocked_change_and_a_failed_check() {
    let repo = Repo::new("sha1");
    fixture(&repo);
    let d = repo.serve(&[], std::process::Stdio::null());
    let cookie = login(&d);
    let run = page(&d, &cookie, "/view/run/0").body;
    // The plan: two waves, T1 then T2, a data edge drawn solid.
    assert!(run.contains("2 tasks in 2 waves, 1 edges"), "{run}");
    assert!(run.contains("Wave 1:") && run.contains("Wave 2:"));
    assert!(run.contains(r#"class="edge data""#));
    assert!(run.contains(r#"href="/view/run/0/task/T2""#));
    // T2's change was blocked, with the gate's reason; its check failed, with its output.
    assert!(run.contains(">blocked<"), "the blocked change is not shown");
    assert!(run.contains("block because of the check"));
    assert!(run.contains(">failed<"), "the failed check is not shown");
    assert!(run.contains("FAIL: T2 broke the test"));
    assert!(run.contains(">merged<"));
    // The task page has T2's own check and its change's files.
    let task = page(&d, &cookie, "/view/run/0/task/T2").body;
    assert!(task.contains("FAIL: T2 broke the test") && task.contains("T2.txt"));
    assert!(!task.contains("T1.txt"));
    // The runs page lists the run with its merged and blocked counts.
    let runs = page(&d, &cookie, "/view/runs").body;
    assert!(runs.contains(r#"href="/view/run/0""#));
}

#[test]
fn view_serves_the_pages_of_a_ledger_pushed_and_fetched_into_another_clone() {
    let repo = Repo::new("sha1");
    fixture(&repo);
    let (_bare, url) = bare_origin(&repo, "sha1");
    repo.git_ok(&["push", "-q", "origin", "HEAD:refs/heads/main"]);
    repo.forum_ok(&["push", "origin"]);
    // The auditor fetches the ledger (verified against what it saw before) and serves the
    // copy fetch adopted, as it is: read-only, no ledger of its own made for it.
    let auditor = Repo::new("sha1");
    auditor.git_ok(&["remote", "add", "origin", &url]);
    auditor.git_ok(&["fetch", "-q", "origin"]);
    auditor.forum_ok(&["fetch", "origin"]);
    let d = auditor.serve(&["--ledger", "origin:main"], std::process::Stdio::null());
    let cookie = login(&d);
    for p in [
        "/view/runs",
        "/view/run/0",
        "/view/record",
        "/view/entry/5",
        "/view/proof/5",
    ] {
        let got = page(&d, &cookie, p);
        assert_eq!(got.status, 200, "{p}: {}", got.body);
    }
    let run = page(&d, &cookie, "/view/run/0").body;
    assert!(run.contains("FAIL: T2 broke the test") && run.contains("the ledger verifies"));
    assert_eq!(
        auditor.git_ok(&["for-each-ref", "refs/forum/ledgers"]),
        "",
        "serving the copy made a ledger"
    );
}

#[test]
fn view_an_entry_whose_body_is_missing_says_so() {
    on_each_kind(|repo| {
        fixture(repo);
        let d = repo.serve(&[], std::process::Stdio::null());
        let cookie = login(&d);
        let hash = repo.forum_json(&["show", "10"])["payload_hash"]
            .as_str()
            .unwrap()
            .to_string();
        repo.forum_ok(&["redact", &hash, "--reason", "test"]);
        let entry = page(&d, &cookie, "/view/entry/10").body;
        assert!(
            entry.contains("the body is missing from the record"),
            "{entry}"
        );
        assert!(!entry.contains("FAIL: T2 broke the test"));
        let run = page(&d, &cookie, "/view/run/0").body;
        assert!(run.contains("the body is missing from the record"), "{run}");
        assert!(!run.contains("FAIL: T2 broke the test"));
        // A body present and checked says so.
        assert!(
            page(&d, &cookie, "/view/entry/3")
                .body
                .contains("hash checked")
        );
    });
}

/// Stops the daemon `git forum view` started when dropped, whatever the test did.
struct Stops<'r>(&'r Repo, u32);

impl Drop for Stops<'_> {
    fn drop(&mut self) {
        let _ = self.0.forum().args(["view", "--stop"]).output();
        let _ = std::process::Command::new("kill")
            .arg(self.1.to_string())
            .output();
    }
}

#[test]
fn view_the_command_prints_a_login_url_reuses_its_daemon_and_stops_it() {
    let repo = Repo::new("sha1");
    fixture(&repo);
    let first = repo.forum_json(&["view", "--no-open"]);
    let pid = first["pid"].as_u64().unwrap() as u32;
    let _stop = Stops(&repo, pid);
    let url = first["url"].as_str().unwrap();
    let rest = url.strip_prefix("http://127.0.0.1:").unwrap();
    let (port, path) = rest.split_at(rest.find('/').unwrap());
    assert!(path.starts_with("/view/login?t="), "{url}");
    let addr = format!("127.0.0.1:{port}");
    let got = http(&addr, "GET", path, "");
    assert_eq!(
        (got.status, got.header("location")),
        (303, Some("/view/runs"))
    );
    // A second view reuses the daemon and leads to the run asked for.
    let second = repo.forum_json(&["view", "0", "--no-open"]);
    assert_eq!(second["pid"].as_u64(), Some(u64::from(pid)));
    let path2 = second["url"]
        .as_str()
        .unwrap()
        .split_once(port)
        .unwrap()
        .1
        .to_string();
    let got = http(&addr, "GET", &path2, "");
    assert_eq!(got.header("location"), Some("/view/run/0"));
    let stopped = repo.forum_json(&["view", "--stop"]);
    assert_eq!(stopped["stopped"], json!(true));
    assert!(
        std::net::TcpStream::connect(&addr).is_err(),
        "the daemon still listens"
    );
    let again = repo.forum().args(["view", "--stop"]).output().unwrap();
    assert!(!again.status.success());
}
