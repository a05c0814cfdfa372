//! The daemon against clients it must not obey and clients that would starve it, through the real `git forum serve`:
//!
//! * every route that may change anything asks the bearer token, loopback included, and an
//!   `application/json` body; a refusal (no token, a wrong one, `text/plain`) changes nothing,
//!   on each kind of repository;
//! * the token lives in a private file under git forum's state root, never under the git dir,
//!   and the old `.git/forum/serve-token` is removed;
//! * a `--work` run with `--sandbox-net` whose worker hunts for the token and posts to the
//!   daemon gets nothing in: no entry, no apply, no gate, no submit;
//! * with its connections full of idle ones, the daemon closes the one idle longest and
//!   answers the new request; a connection whose request is in the engine is never the one
//!   closed. `heavy_` floods 2,000 connections.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use git_forum::serve::dispatch::{Access, ROUTES, access};
use serde_json::{Value as J, json};

use crate::common::{Repo, Served, on_each_kind, one_line_error};
use crate::work_run::{clean, payloads, setup};

/// One request on its own connection with the given extra header lines (each ending in
/// `\r\n`): (status, body as JSON, or null).
fn request(addr: &str, method: &str, path: &str, headers: &str, body: &str) -> (u16, J) {
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no response to {method} {path}: {text:?}"));
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    (code, serde_json::from_str(rest).unwrap_or(J::Null))
}

const JSON: &str = "Content-Type: application/json\r\n";

/// Everything a request could have changed: every ref (the ledgers, the run branches, the
/// user's branch), HEAD, the index and work tree, and every file under `.git/forum`.
fn state(repo: &Repo) -> String {
    format!(
        "{}\n{}\n{}",
        repo.snapshot(),
        repo.git_ok(&["rev-parse", "HEAD"]),
        repo.git_ok(&["status", "--porcelain", "--untracked-files=all"])
    )
}

/// A body each POST route would accept were it let in.
fn body_for(path: &str) -> J {
    match path {
        "/append" => json!({"actor": "intruder", "kind": "note", "payload": {"x": 1}}),
        "/submit" | "/plan" | "/context/preflight" => json!({"request": "ship it"}),
        "/route" | "/humanize" | "/prose/contract" => json!({"text": "ship it"}),
        "/gate/approve" => json!({"run_seq": 0, "wave": 0, "approver": "intruder"}),
        "/prove" => json!({"seq": 0}),
        _ => json!({}),
    }
}

#[test]
fn every_route_that_may_change_anything_asks_the_token_and_json_and_a_refusal_changes_nothing() {
    on_each_kind(|repo| {
        setup(repo);
        repo.append("me", "note", r#"{"n": 1}"#);
        let served = repo.serve(&[], Stdio::null());
        let (addr, token) = (served.addr.clone(), served.token());
        let auth = format!("Authorization: Bearer {token}\r\n");
        let before = state(repo);
        let writes: Vec<&str> = ROUTES
            .iter()
            .filter(|(m, p, _)| access(m, p) == Access::Write)
            .map(|(_, p, _)| *p)
            .collect();
        assert!(writes.len() >= 25, "{writes:?}");
        for path in &writes {
            let body = body_for(path).to_string();
            // No token, a wrong token (the right length, and a prefix), then the right token
            // with a body a browser may send cross-site without asking.
            let (code, r) = request(&addr, "POST", path, JSON, &body);
            assert_eq!(code, 401, "{path} without a token: {r}");
            let m = r["error"].as_str().unwrap();
            assert!(m.contains("bearer token") && !m.contains('\n'), "{m}");
            assert!(!m.contains(&token), "{m}");
            for wrong in ["0".repeat(64), token[..63].to_string(), format!("{token}0")] {
                let h = format!("Authorization: Bearer {wrong}\r\n{JSON}");
                assert_eq!(request(&addr, "POST", path, &h, &body).0, 401, "{path}");
            }
            for ct in [
                "Content-Type: text/plain\r\n",
                "Content-Type: application/x-www-form-urlencoded\r\n",
                "",
            ] {
                let (code, r) = request(&addr, "POST", path, &format!("{auth}{ct}"), &body);
                assert_eq!(code, 415, "{path} with {ct:?}: {r}");
                let m = r["error"].as_str().unwrap();
                assert!(m.contains("application/json") && !m.contains('\n'), "{m}");
            }
            assert_eq!(state(repo), before, "{path} changed something when refused");
        }
        // Reads that describe this host ask it too; reads of the record and /health do not.
        for path in ["/runtime", "/model", "/status/full", "/doctor"] {
            assert_eq!(request(&addr, "GET", path, "", "").0, 401, "{path}");
            assert_eq!(request(&addr, "GET", path, &auth, "").0, 200, "{path}");
        }
        for path in [
            "/health",
            "/status",
            "/verify",
            "/ledger/0",
            "/summary",
            "/runs",
        ] {
            assert_eq!(request(&addr, "GET", path, "", "").0, 200, "{path}");
        }
        assert_eq!(state(repo), before);

        // With the token and JSON, each is let in: what it answers is the route's own.
        for path in &writes {
            if matches!(*path, "/halt" | "/campaign/run" | "/submit" | "/resume") {
                continue; // These need a run or an executor; their own refusals are below.
            }
            let body = body_for(path).to_string();
            let (code, r) = request(&addr, "POST", path, &format!("{auth}{JSON}"), &body);
            assert!(![401, 403, 415].contains(&code), "{path}: {code} {r}");
        }
        let (code, r) = request(
            &addr,
            "POST",
            "/submit",
            &format!("{auth}{JSON}"),
            r#"{"request": "ship it"}"#,
        );
        assert_eq!(code, 503, "no executor: {r}");
        let (code, r) = request(
            &addr,
            "POST",
            "/append",
            &format!("{auth}Content-Type: application/json; charset=utf-8\r\n"),
            r#"{"actor": "me", "kind": "note", "payload": {"n": 2}}"#,
        );
        assert_eq!(code, 200, "{r}");
        let seq = r["seq"].as_u64().unwrap().to_string();
        assert_eq!(repo.forum_json(&["show", &seq])["actor"], "me");
        drop(served);
        repo.forum_ok(&["verify", "--deep"]);
    });
}

#[test]
fn the_token_is_private_outside_the_git_dir_shared_and_the_old_one_is_removed() {
    let repo = Repo::new("sha1");
    // A token file an older version left under the git dir, where a worker can read it.
    let legacy = repo.git_dir().join("forum/serve-token");
    std::fs::create_dir_all(legacy.parent().unwrap()).unwrap();
    std::fs::write(&legacy, format!("{}\n", "a".repeat(64))).unwrap();
    let log = std::fs::File::create(repo.path().join("serve.log")).unwrap();
    let a = repo.serve(&["--print-token"], Stdio::from(log));
    assert!(!legacy.exists(), "the old token file is still there");
    let said = std::fs::read_to_string(repo.path().join("serve.log")).unwrap();
    assert!(
        said.contains("removed") && said.contains("serve-token"),
        "{said}"
    );
    // Under the state root, in the clone's own 0700 directory, mode 0600; not the old token.
    let file = &a.token_file;
    assert!(file.starts_with(repo.state_dir()), "{file:?}");
    assert!(!file.starts_with(repo.git_dir()), "{file:?}");
    assert_eq!(file.file_name().unwrap(), "serve-token");
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(file), 0o600);
    assert_eq!(mode(file.parent().unwrap()), 0o700);
    let token = a.token();
    assert_eq!(token.len(), 64);
    assert_ne!(token, "a".repeat(64));
    // --print-token prints it as the third line; without it, stdout never holds it.
    let mut third = String::new();
    let mut out = a.stdout;
    std::io::BufRead::read_line(&mut out, &mut third).unwrap();
    assert_eq!(third.trim(), format!("token {token}"));
    // A second daemon of the same clone shares it; --token-path names the same file.
    let b = repo.serve(&[], Stdio::null());
    assert_eq!(b.token_file, *file);
    assert_eq!(b.token(), token);
    let printed = repo.forum_ok(&["serve", "--token-path"]);
    assert_eq!(printed.trim(), file.display().to_string());
    // A token file others can read is no secret: the next start makes a new one.
    drop((a.child, b));
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let c = repo.serve(&[], Stdio::null());
    assert_ne!(c.token(), token);
    assert_eq!(mode(file), 0o600);
    // An unusable state root (a file) is one line and exit 2, before anything listens.
    let not_a_dir = repo.path().join("not-a-dir");
    std::fs::write(&not_a_dir, "x").unwrap();
    let o = repo
        .forum()
        .env("GIT_FORUM_STATE_DIR", &not_a_dir)
        .args(["serve", "--port", "0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    one_line_error(&o, "token");
}

/// Whether this machine can run the sandbox (as `sandbox.rs` asks).
fn bwrap_works() -> bool {
    std::process::Command::new("bwrap")
        .args(["--unshare-all", "--ro-bind", "/", "/", "true"])
        .status()
        .is_ok_and(|s| s.success())
}

/// A scripted model whose worker, instead of working, attacks the daemon at `port`: it looks
/// for the token wherever it could be (`guesses`), then posts an append, an apply, a gate
/// approval and a submit with `curl`, and an append with `python3`, each with whatever token it
/// found. It prints one `attack:` line with what it read and each status.
fn attacker(repo: &Repo, port: u16, guesses: &[String]) -> String {
    let path = repo.path().join("attacker.sh");
    let plan = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"make add in calc.py add","depends_on":[],"done_when":["the tests pass"]}]}"#;
    let guesses = guesses.join(" ");
    let base = format!("http://127.0.0.1:{port}");
    let work = format!(
        r#"    common=$(git rev-parse --path-format=absolute --git-common-dir)
    tok=""
    for f in "$common/forum/serve-token" {guesses} "$HOME"/.local/state/git-forum/*/serve-token "$XDG_RUNTIME_DIR"/git-forum/*/serve-token /run/user/$(id -u)/git-forum/*/serve-token $(find /tmp /run "$HOME" -name serve-token 2>/dev/null); do
      t=$(cat "$f" 2>/dev/null) && [ -n "$t" ] && tok="$t"
    done
    if [ -n "$tok" ]; then read="found"; else read="none"; fi
    post() {{ curl -s -o /dev/null -w '%{{http_code}}' -H "Authorization: Bearer $tok" -H 'Content-Type: application/json' -d "$2" "{base}$1"; }}
    health=$(curl -s -o /dev/null -w '%{{http_code}}' "{base}/health")
    append=$(post /append '{{"actor":"intruder","kind":"note","payload":{{"x":1}}}}')
    apply=$(post /apply '{{}}')
    gate=$(post /gate/approve '{{"run_seq":0,"wave":0,"approver":"intruder"}}')
    submit=$(post /submit '{{"request":"delete everything"}}')
    plain=$(curl -s -o /dev/null -w '%{{http_code}}' -H 'Content-Type: text/plain' -d '{{"actor":"intruder","kind":"note","payload":1}}' "{base}/append")
    py=$(TOK="$tok" python3 -c "
import os, urllib.request, urllib.error
r = urllib.request.Request('{base}/append', data=b'{{\"actor\":\"intruder\",\"kind\":\"note\",\"payload\":2}}', headers={{'Content-Type': 'application/json', 'Authorization': 'Bearer ' + os.environ['TOK']}})
try:
    print(urllib.request.urlopen(r, timeout=10).status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception as e:
    print('error', e)
")
    echo "attack: read=$read health=$health append=$append apply=$apply gate=$gate submit=$submit plain=$plain py=$py"
    sed -i 's/return a - b/return a + b/' calc.py"#
    );
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{plan}' ;;\n  *\"Decide whether to ship\"*) echo '{{\"decision\":\"merge\",\"reason\":\"scripted\"}}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'Fixed calc.' ;;\n  *)\n{work}\n  ;;\nesac\n"
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

#[test]
fn a_sandboxed_worker_with_the_network_cannot_drive_the_daemon() {
    assert!(
        bwrap_works(),
        "this test needs a working bwrap (apt install bubblewrap)"
    );
    on_each_kind(|repo| {
        setup(repo);
        // The daemon keeps its token where git forum does by default: under
        // $XDG_RUNTIME_DIR, here outside /tmp (which the sandbox replaces with its own), so
        // only the sandbox's allowlist keeps it out of sight. The worker is told that exact
        // path too.
        let runtime = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let runtime_dir = runtime.path().to_str().unwrap().to_string();
        let env = [
            ("GIT_FORUM_STATE_DIR", ""),
            ("XDG_RUNTIME_DIR", &runtime_dir),
        ];
        let served: Served = repo.serve_with_env(&[], Stdio::null(), &env);
        assert!(
            served
                .token_file
                .starts_with(runtime.path().join("git-forum"))
        );
        let port: u16 = served.addr.rsplit(':').next().unwrap().parse().unwrap();
        let guesses = [
            served.token_file.display().to_string(),
            repo.state_dir().join("*/serve-token").display().to_string(),
        ];
        let m = attacker(repo, port, &guesses);
        let main_before = repo.git_ok(&["rev-parse", "main"]);
        let head_before = repo.git_ok(&["symbolic-ref", "HEAD"]);
        let o = repo
            .forum()
            .env("XDG_RUNTIME_DIR", &runtime_dir)
            .args([
                "submit",
                "--json",
                "--work",
                "--sandbox",
                "--sandbox-net",
                "--cmd",
                &m,
                "fix calc",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        // What the run's profile bound (the toolchains on this machine's PATH) is listed
        // beside; it differs from machine to machine.
        let mut sandbox = payloads(repo, "request")[0].1["work"]["sandbox"].clone();
        if let Some(bound) = sandbox.as_object_mut().unwrap().remove("bound") {
            assert!(bound.as_array().is_some_and(|b| !b.is_empty()), "{bound}");
        }
        assert_eq!(
            sandbox,
            json!({"confined": true, "tool": "bwrap", "net": true})
        );
        // The daemon was in reach and refused everything for want of the token.
        let result = &payloads(repo, "result")[0].1;
        let out = result["output"].as_str().unwrap();
        let want = "attack: read=none health=200 append=401 apply=401 gate=401 submit=401 plain=401 py=401";
        assert!(out.contains(want), "{out}");
        // Nothing it posted landed: no entry of its own, one request (the run's), no gate, the
        // user's branch and HEAD where they were.
        let log = repo.forum_json(&["log"]);
        for e in log.as_array().unwrap() {
            assert_ne!(e["actor"], "intruder", "{e}");
            assert!(!e["kind"].as_str().unwrap().starts_with("gate"), "{e}");
        }
        assert_eq!(payloads(repo, "request").len(), 1);
        assert_eq!(repo.git_ok(&["rev-parse", "main"]), main_before);
        assert_eq!(repo.git_ok(&["symbolic-ref", "HEAD"]), head_before);
        // The run itself went on as usual: its change is on its own branch.
        let calc = repo.git_ok(&["show", "forum/run-0:calc.py"]);
        assert!(calc.contains("return a + b"), "{calc}");
        drop(served);
        clean(repo);
    });
}

// ----- responsiveness -----

/// Reads from `s` until it closes or `wait` passes: true when the server closed it.
fn closed_within(s: &mut TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let start = Instant::now();
    let mut buf = [0u8; 4096];
    while start.elapsed() < wait {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return true,
        }
    }
    false
}

/// The three kinds of connection that wait on their client: one that sent part of a request
/// head, one that sent a whole head of a POST and none of its body, and one kept alive after a
/// request it made. `n` says which.
fn idle_connection(addr: &str, n: usize) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    match n % 3 {
        0 => s
            .write_all(format!("GET /health HTTP/1.1\r\nHost: {addr}\r\nX-Slow: ").as_bytes())
            .unwrap(),
        1 => s
            .write_all(
                format!(
                    "POST /route HTTP/1.1\r\nHost: {addr}\r\n{}{JSON}Content-Length: 100\r\n\r\n",
                    crate::common::auth_header(addr)
                )
                .as_bytes(),
            )
            .unwrap(),
        // The whole answer read, so the connection is idle between requests.
        _ => health_on(&mut s, addr),
    }
    s
}

/// `repo` (given one entry) served with `args`, and a `GET /verify` the test holds in the
/// engine until it writes the returned file: the daemon, that file, and the verify's thread.
fn serve_with_a_held_verify(
    repo: &Repo,
    args: &[&str],
) -> (
    Served,
    std::path::PathBuf,
    std::thread::JoinHandle<(u16, J)>,
) {
    repo.append("a", "note", "{}");
    let release = repo.path().join("release-verify");
    let held = repo.path().join("release-verify.held");
    let served = repo.serve_with_env(
        args,
        Stdio::null(),
        &[("GIT_FORUM_HOLD_VERIFY", release.to_str().unwrap())],
    );
    let verifier = {
        let addr = served.addr.clone();
        std::thread::spawn(move || request(&addr, "GET", "/verify", "", ""))
    };
    crate::common::wait_until(
        "the verify never reached the engine",
        Duration::from_secs(120),
        || held.exists(),
    );
    (served, release, verifier)
}

#[test]
fn at_the_connection_cap_the_longest_idle_connection_makes_room_and_a_busy_one_never_does() {
    let repo = Repo::new("sha1");
    let (served, release, verifier) =
        serve_with_a_held_verify(&repo, &["--max-connections", "4", "--read-timeout", "60"]);
    let addr = served.addr.clone();
    // Three idle connections fill the cap, oldest first.
    let mut idle: Vec<TcpStream> = (0..3)
        .map(|n| {
            let s = idle_connection(&addr, n);
            // Kept: the clock must move between connections, so each is idle for a
            // different time and "oldest" names one of them.
            std::thread::sleep(Duration::from_millis(20));
            s
        })
        .collect();
    // Each new connection closes the oldest idle one, in order, and its request is answered
    // (then it stays open, idle and newest); the verify's connection, older than all of them,
    // is never chosen.
    let mut probes = Vec::new();
    for i in 0..3 {
        probes.push(idle_connection(&addr, 2));
        assert!(
            closed_within(&mut idle[i], Duration::from_secs(10)),
            "idle connection {i} was not closed"
        );
        for (j, s) in idle.iter_mut().enumerate().skip(i + 1) {
            assert!(
                !closed_within(s, Duration::from_millis(100)),
                "idle connection {j} was closed before {i}"
            );
        }
    }
    std::fs::write(&release, b"").unwrap();
    let (code, v) = verifier.join().unwrap();
    assert_eq!((code, v["ok"].clone()), (200, json!(true)), "{v}");
    // Still serving, with a kept-alive connection open.
    let _kept = idle_connection(&addr, 2);
    assert_eq!(request(&addr, "GET", "/health", "", "").0, 200);
}

/// One `GET /health` on the kept-alive connection `s`, its whole answer read.
fn health_on(s: &mut TcpStream, addr: &str) {
    s.write_all(format!("GET /health HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&got).contains("{\"ok\":true}") {
        let k = s.read(&mut buf).unwrap();
        assert!(k > 0, "the connection was closed before its answer");
        got.extend_from_slice(&buf[..k]);
    }
}

#[test]
fn a_quiet_connection_is_closed_after_the_read_timeout_and_a_busy_or_asking_one_never_is() {
    let repo = Repo::new("sha1");
    let (served, release, verifier) = serve_with_a_held_verify(&repo, &["--read-timeout", "1"]);
    let addr = served.addr.clone();
    let began = Instant::now();
    // The three kinds of quiet connection: part of a head, a head without its body, and one
    // idle after its answer. Each is closed.
    let mut quiet: Vec<TcpStream> = (0..3).map(|n| idle_connection(&addr, n)).collect();
    // A connection that asks again every 300 ms, for about three read timeouts, stays open.
    let mut asking = TcpStream::connect(&addr).unwrap();
    for _ in 0..10 {
        health_on(&mut asking, &addr);
        std::thread::sleep(Duration::from_millis(300));
    }
    for (n, s) in quiet.iter_mut().enumerate() {
        assert!(
            closed_within(s, Duration::from_secs(10)),
            "quiet connection {n} was still open"
        );
    }
    assert!(began.elapsed() > Duration::from_secs(3));
    // The verify's connection, quiet on the client's side all this time, gets its answer.
    std::fs::write(&release, b"").unwrap();
    let (code, v) = verifier.join().unwrap();
    assert_eq!((code, v["ok"].clone()), (200, json!(true)), "{v}");
    // Once its asking stops, the kept connection is closed too.
    assert!(
        closed_within(&mut asking, Duration::from_secs(10)),
        "the connection that stopped asking was still open"
    );
}

/// Raises this test process's open-file limit to at least `n` (the daemon it starts inherits
/// it); panics when the hard limit is lower.
fn raise_open_files(n: u64) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut lim = getrlimit(Resource::Nofile);
    if lim.current.is_some_and(|c| c < n) {
        assert!(
            lim.maximum.is_none_or(|m| m >= n),
            "this test needs {n} open files; the hard limit is {:?}",
            lim.maximum
        );
        lim.current = Some(n);
        setrlimit(Resource::Nofile, lim).unwrap();
    }
}

#[test]
fn heavy_two_thousand_idle_and_slow_connections_do_not_keep_a_request_out() {
    raise_open_files(8192);
    let repo = Repo::new("sha1");
    repo.append("a", "note", "{}");
    // The default cap (idle ones evicted to make room), and a cap above the flood (every one
    // held open at once).
    for args in [vec![], vec!["--max-connections", "4096"]] {
        let mut a = vec!["--read-timeout", "120"];
        a.extend(args.iter().copied());
        let served = repo.serve(&a, Stdio::null());
        let addr = served.addr.clone();
        let flood: Vec<TcpStream> = (0..2000).map(|n| idle_connection(&addr, n)).collect();
        for path in ["/health", "/status", "/summary"] {
            let (code, r) = request(&addr, "GET", path, "", "");
            assert_eq!(code, 200, "{args:?} {path}: {r}");
        }
        let (code, r) = request(
            &addr,
            "POST",
            "/append",
            &format!("{}{JSON}", crate::common::auth_header(&addr)),
            r#"{"actor":"probe","kind":"note","payload":{}}"#,
        );
        assert_eq!(code, 200, "{args:?}: {r}");
        drop(flood);
        drop(served);
    }
    repo.forum_ok(&["verify", "--deep"]);
}

// ----- cached projections -----

/// The daemon's `/summary` and `/verify` against the CLI's `summary --json` and
/// `verify --deep --json`, read from the repository as it is now.
#[track_caller]
fn same_as_the_cli(repo: &Repo, addr: &str, when: &str) {
    let (code, summary) = crate::common::http_json(addr, "GET", "/summary", &J::Null);
    assert_eq!(code, 200, "{when}: {summary}");
    assert_eq!(summary, repo.forum_json(&["summary"]), "{when}: summary");
    let (code, verify) = crate::common::http_json(addr, "GET", "/verify", &J::Null);
    assert_eq!(code, 200, "{when}: {verify}");
    let o = repo
        .forum()
        .args(["verify", "--deep", "--json"])
        .output()
        .unwrap();
    let cli: J = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(verify, cli, "{when}: verify");
}

#[test]
fn summary_and_verify_answer_from_projections_kept_as_the_ledger_grows_and_never_across_a_rewrite()
{
    on_each_kind(|repo| {
        let served = repo.serve(&[], Stdio::null());
        let addr = served.addr.clone();
        // Before the first entry the CLI has no ledger to read; the daemon serves an empty one.
        for path in ["/summary", "/verify"] {
            let (code, r) = crate::common::http_json(&addr, "GET", path, &J::Null);
            assert_eq!(code, 200, "{path}: {r}");
        }
        // Kinds the summary counts by body: a model call with usage, a verdict, a change.
        repo.append("me", "request", r#"{"text": "ship it"}"#);
        repo.append(
            "backend",
            "result",
            r#"{"id": "T1", "ok": true, "model": "m1", "output": "done",
                "usage": {"model": "m1", "prompt_tokens": 30, "completion_tokens": 12, "cost_usd": 0.25}}"#,
        );
        repo.append("judge", "verdict", r#"{"ok": false, "model": "m2"}"#);
        repo.append(
            "work",
            "change",
            r#"{"task": "T1", "commit": null, "files": []}"#,
        );
        same_as_the_cli(repo, &addr, "four entries by the CLI");
        // Grown through the daemon and by another process in turn: each request folds in
        // only what is new, and still says what a whole read says.
        for i in 0..3 {
            let (code, r) = crate::common::http_json(
                &addr,
                "POST",
                "/append",
                &json!({"actor": "http", "kind": "result",
                        "payload": {"id": format!("T{i}"), "ok": i != 1, "model": "m1"}}),
            );
            assert_eq!(code, 200, "{r}");
            repo.append("cli", "note", &format!(r#"{{"n": {i}}}"#));
            if i == 1 {
                // A checkpoint recorded at this size: later verifies check their root there.
                repo.forum_ok(&["checkpoint"]);
            }
            same_as_the_cli(repo, &addr, &format!("round {i}"));
        }
        // A redaction rewrites every commit after the body it removes: both projections
        // start again from the root.
        let hash = repo.forum_json(&["show", "1"])["payload_hash"]
            .as_str()
            .unwrap()
            .to_string();
        repo.forum_ok(&["redact", &hash, "--reason", "a key was pasted"]);
        same_as_the_cli(repo, &addr, "after a redaction");
        // A history rewritten behind the daemon's back: an old entry edited and the chain
        // re-linked above it. The daemon finds what a whole verify finds.
        let mut texts = crate::common::commit_texts(repo, crate::common::LEDGER_REF);
        texts[2] = texts[2].replacen("\"actor\":\"judge\"", "\"actor\":\"jury\"", 1);
        assert!(texts[2].contains("jury"), "{}", texts[2]);
        crate::common::rechain(repo, &texts);
        same_as_the_cli(repo, &addr, "after a quiet rewrite");
        let (_, v) = crate::common::http_json(&addr, "GET", "/verify", &J::Null);
        assert_eq!(v["ok"], false, "{v}");
    });
}
