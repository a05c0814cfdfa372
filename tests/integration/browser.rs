//! The daemon's pages in a real headless browser: Debian's Chromium driven by Playwright for
//! Python (`data/browser/drive.py`), which loads each page with the pages' Content-Security-Policy
//! in force and records console errors, uncaught errors, dialogs and every request to another
//! origin, takes a screenshot at desktop and phone widths, and runs axe-core on each page in a
//! second context where the policy is lifted. Every test is `heavy_` (a browser start costs
//! seconds); `.ci/run` installs the browser, Playwright and axe-core (`scripts/browser-tools`).
//!
//! The tools come from the environment: `GIT_FORUM_PLAYWRIGHT_PYTHON` (a Python with
//! Playwright), `GIT_FORUM_AXE` (axe-core's `axe.min.js`) and `GIT_FORUM_CHROMIUM` (else
//! `chromium` on the PATH). Without them a test says so and skips, unless
//! `GIT_FORUM_REQUIRE_BROWSER=1`, when it fails.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value as J, json};

use crate::common::{Guarded, Repo, poll_until};

/// How long one run of the driver may take before its process group is killed: a cold
/// browser start on a loaded two-core machine takes seconds, each page a few more.
const DRIVER_LIMIT: Duration = Duration::from_secs(240);

/// The global a hostile text would set if any of it ran as script.
const FLAG: &str = "gfPwned";

/// The programs the driver needs.
pub(crate) struct Browser {
    python: String,
    chromium: String,
    axe: Option<String>,
}

/// The browser tools from the environment, or `None` after a skip notice (a failure with
/// `GIT_FORUM_REQUIRE_BROWSER=1`).
pub(crate) fn browser() -> Option<Browser> {
    let require = std::env::var("GIT_FORUM_REQUIRE_BROWSER").is_ok_and(|v| v == "1");
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let chromium = var("GIT_FORUM_CHROMIUM").or_else(|| on_path("chromium"));
    let missing = match (&var("GIT_FORUM_PLAYWRIGHT_PYTHON"), &chromium) {
        (None, _) => Some("GIT_FORUM_PLAYWRIGHT_PYTHON is not set (a Python with Playwright)"),
        (_, None) => Some("no chromium on the PATH and GIT_FORUM_CHROMIUM is not set"),
        _ => None,
    };
    let missing = missing.or_else(|| {
        (require && var("GIT_FORUM_AXE").is_none())
            .then_some("GIT_FORUM_AXE is not set (axe-core's axe.min.js)")
    });
    if let Some(why) = missing {
        assert!(
            !require,
            "GIT_FORUM_REQUIRE_BROWSER=1 but {why}; scripts/browser-tools install, then eval \"$(scripts/browser-tools env)\""
        );
        eprintln!(
            "skipped: {why}; scripts/browser-tools install, then eval \"$(scripts/browser-tools env)\""
        );
        return None;
    }
    Some(Browser {
        python: var("GIT_FORUM_PLAYWRIGHT_PYTHON").unwrap(),
        chromium: chromium.unwrap(),
        axe: var("GIT_FORUM_AXE"),
    })
}

fn on_path(program: &str) -> Option<String> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
            .map(|p| p.to_string_lossy().into_owned())
    })
}

/// The folder a test's screenshots go to, emptied first and kept after the test so a person
/// can look at them: `target/tmp/browser/TEST`.
pub(crate) fn shots_dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("browser")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One page for the driver: its name (the screenshots' file names), its path on the daemon,
/// the texts its rendered text should hold and the selectors to count.
pub(crate) fn page(name: &str, path: &str, texts: &[&str], selectors: &[&str]) -> J {
    json!({"name": name, "path": path, "texts": texts, "selectors": selectors})
}

impl Browser {
    /// Runs the driver on `pages` of the daemon at `origin`, loading `start` first, and returns
    /// its result. The driver runs in a process group of its own (Playwright's node driver and
    /// the browser under it), killed whole if it outlives [`DRIVER_LIMIT`].
    pub(crate) fn drive(&self, start: &str, origin: &str, pages: &[J], out: &Path) -> J {
        let spec = json!({
            "chromium": self.chromium, "start": start, "origin": origin, "pages": pages,
            "out": out, "axe": self.axe, "flag": FLAG, "timeout_ms": 60_000,
        });
        let tmp = tempfile::tempdir().unwrap();
        let spec_file = tmp.path().join("spec.json");
        std::fs::write(&spec_file, spec.to_string()).unwrap();
        let (stdout, stderr) = (tmp.path().join("stdout"), tmp.path().join("stderr"));
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration/data/browser/drive.py");
        use std::os::unix::process::CommandExt;
        let child = Command::new(&self.python)
            .arg(script)
            .arg(&spec_file)
            .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .process_group(0)
            .spawn()
            .expect("start the browser driver");
        let mut child = Guarded(child);
        let pid = rustix::process::Pid::from_raw(child.0.id() as i32).unwrap();
        let done = poll_until(DRIVER_LIMIT, || !matches!(child.0.try_wait(), Ok(None)));
        // The group goes whatever happened, so no browser outlives the test.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        let status = child.0.wait().unwrap();
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        assert!(
            done,
            "the browser driver ran past {DRIVER_LIMIT:?}; stderr:\n{}",
            read(&stderr)
        );
        assert!(
            status.success(),
            "the browser driver failed ({status}):\n{}",
            read(&stderr)
        );
        let text = read(&stdout);
        let result: J = serde_json::from_str(text.lines().last().unwrap_or(""))
            .unwrap_or_else(|e| panic!("the driver's result is not JSON ({e}): {text}"));
        // Beside the screenshots, for a person reading a failure.
        let pretty = serde_json::to_string_pretty(&result).unwrap();
        std::fs::write(out.join("result.json"), pretty).unwrap();
        result
    }
}

/// What every page must show in the browser: it answered 200, logged no console error and no
/// uncaught error, opened no dialog, asked no other origin for anything, set no flag, found each
/// text (with JavaScript on and off), fits a phone's width, and has non-trivial screenshots at
/// both widths.
#[track_caller]
pub(crate) fn assert_clean(result: &J, name: &str) {
    let p = &result["pages"][name];
    assert_eq!(p["status"], 200, "{name}: {p}");
    for key in [
        "console_errors",
        "page_errors",
        "dialogs",
        "outside_requests",
    ] {
        assert_eq!(p[key], json!([]), "{name}: {key}: {}", p[key]);
    }
    assert_eq!(p["flag"], J::Null, "{name}: a script of the record ran");
    assert_eq!(
        p["phone"]["flag"],
        J::Null,
        "{name}: a script of the record ran"
    );
    for texts in [&p["texts"], &p["phone"]["texts"], &p["texts_without_js"]] {
        for (text, found) in texts.as_object().unwrap() {
            assert_eq!(found, true, "{name}: {text:?} is not on the page");
        }
    }
    // At phone width the page fits: wide tables and diffs scroll in their own boxes.
    let phone_width = p["phone"]["scroll_width"].as_u64().unwrap();
    assert!(
        phone_width <= 390,
        "{name}: {phone_width} px wide on a 390 px phone"
    );
    let shots = p["screenshots"].as_array().unwrap();
    assert_eq!(shots.len(), 2, "{name}: {shots:?}");
    for s in shots {
        let bytes = std::fs::metadata(s["path"].as_str().unwrap())
            .unwrap()
            .len();
        // An empty page at the same size, screenshot in the same run, is the floor; one line
        // of text adds about 2.5 KB to it.
        let blank = result["blank"][s["label"].as_str().unwrap()]
            .as_u64()
            .unwrap();
        assert!(
            bytes > blank + 2_000,
            "{name}: a near-empty screenshot ({bytes} bytes, an empty page's is {blank}): {s}"
        );
    }
}

/// No serious or critical axe-core violation on any of `pages`, in either colour scheme and at
/// phone width (every finding is listed at once).
#[track_caller]
pub(crate) fn assert_accessible(result: &J, pages: &[J]) {
    let mut found = Vec::new();
    for p in pages {
        let name = p["name"].as_str().unwrap();
        for scheme in ["light", "dark", "phone"] {
            let axe = &result["pages"][name]["axe"][scheme];
            assert!(
                axe.is_array(),
                "{name} ({scheme}): axe-core did not run: {axe}"
            );
            if axe != &json!([]) {
                found.push(format!("{name} ({scheme}): {axe}"));
            }
        }
    }
    assert!(found.is_empty(), "axe-core found:\n{}", found.join("\n"));
}

/// A loopback HTTP server answering every request with `html`, until dropped: a page the
/// driver's own checks must catch.
struct Fixed {
    addr: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Fixed {
    fn start(html: &'static str) -> Fixed {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::spawn(move || {
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok((mut s, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    html.len()
                );
                let _ = s.write_all(head.as_bytes());
                let _ = s.write_all(html.as_bytes());
            }
        });
        Fixed { addr, stop }
    }
}

impl Drop for Fixed {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A page that does everything the review pages must never do: an inline script sets the flag
/// and opens a dialog, an image comes from another origin, a script throws.
const HOSTILE: &str = "<!doctype html><html><head><title>hostile</title></head><body><p>hostile</p>\
<script>window.gfPwned='1'; alert('pwned');</script>\
<img src=\"http://192.0.2.1/beacon.png\">\
<script>console.error('logged'); throw new Error('thrown');</script></body></html>";

/// The driver is not blind: on a page that runs script, opens a dialog, logs an error, throws
/// and loads an image from another origin, it reports each, and refuses the outside request.
#[test]
fn heavy_the_browser_driver_reports_script_dialogs_errors_and_outside_requests() {
    let Some(b) = browser() else {
        return;
    };
    let server = Fixed::start(HOSTILE);
    let origin = format!("http://{}", server.addr);
    let out = shots_dir("driver_self_check");
    let pages = [page("hostile", "/", &["hostile"], &["script:not([src])"])];
    let r = b.drive(&format!("{origin}/"), &origin, &pages, &out);
    let p = &r["pages"]["hostile"];
    assert_eq!(p["flag"], "1", "{p}");
    assert_eq!(p["selectors"]["script:not([src])"], 2, "{p}");
    let texts = |key: &str| -> Vec<String> {
        let rows = p[key].as_array().unwrap();
        rows.iter()
            .map(|r| {
                r["text"]
                    .as_str()
                    .or(r["url"].as_str())
                    .or(r["message"].as_str())
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    assert!(texts("dialogs").contains(&"pwned".to_string()), "{p}");
    assert!(texts("console_errors").iter().any(|t| t == "logged"), "{p}");
    assert!(
        texts("page_errors").iter().any(|t| t.contains("thrown")),
        "{p}"
    );
    assert!(
        texts("outside_requests")
            .iter()
            .any(|u| u.contains("192.0.2.1")),
        "{p}"
    );
    assert!(out.join("hostile-desktop.png").is_file() && out.join("hostile-phone.png").is_file());
    let lifted = &p["without_policy"]["light"];
    assert_eq!(lifted["flag"], "1", "{p}");
    assert_eq!(lifted["dialogs"].as_array().map(Vec::len), Some(1), "{p}");
    // axe-core ran: the page names no language, a serious violation.
    if b.axe.is_some() {
        for scheme in ["light", "dark"] {
            let found = p["axe"][scheme].as_array().unwrap();
            assert!(
                found.iter().any(|v| v["id"] == "html-has-lang"),
                "{scheme}: {found:?}"
            );
        }
    }
}

// ----- the review pages -----

/// The daemon `git forum view --no-open --json` started, and the one-time login URL it
/// printed. Dropping it stops the daemon with `git forum view --stop`, then kills its process
/// group if it is somehow still there.
pub(crate) struct Viewing<'a> {
    repo: &'a Repo,
    pub(crate) url: String,
    pid: u32,
}

impl<'a> Viewing<'a> {
    /// `git forum view [RUN] --no-open --json`.
    pub(crate) fn start(repo: &'a Repo, run: Option<u64>) -> Viewing<'a> {
        let run = run.map(|r| r.to_string());
        let mut args = vec!["view", "--no-open"];
        args.extend(run.as_deref());
        let j = repo.forum_json(&args);
        let url = j["url"]
            .as_str()
            .unwrap_or_else(|| panic!("{j}"))
            .to_string();
        let pid = j["pid"].as_u64().unwrap_or_else(|| panic!("{j}")) as u32;
        assert!(url.contains("/view/login?t="), "{url}");
        Viewing { repo, url, pid }
    }

    /// `http://127.0.0.1:PORT`.
    pub(crate) fn origin(&self) -> String {
        let rest = self.url.strip_prefix("http://").unwrap();
        format!("http://{}", rest.split('/').next().unwrap())
    }
}

impl Drop for Viewing<'_> {
    fn drop(&mut self) {
        let _ = self.repo.forum().args(["view", "--stop"]).output();
        if let Some(pid) = rustix::process::Pid::from_raw(self.pid as i32)
            && rustix::process::test_kill_process(pid).is_ok()
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

/// A request that would run script twice over if a page put it in as HTML: an inline script
/// and an image whose `onerror` handler each set [`FLAG`] and open a dialog.
pub(crate) const HOSTILE_REQUEST: &str = "tidy <script>gfPwned='script';alert('script')</script> and <img src=x onerror=gfPwned='img';alert('img')>";

/// The review fixture: a `--work` run in two waves (T1 fixes `add` and is merged, T2 writes
/// mul.py and the gate blocks it, T3 writes a file that does not compile so its check fails;
/// T4, after T1, writes NOTES.md and is merged), then a plain run whose request is
/// [`HOSTILE_REQUEST`]. Returns both runs' seqs.
pub(crate) fn review_fixture(repo: &Repo) -> (u64, u64) {
    use crate::work_read::{COMPILES, model, task};
    crate::work_run::setup(repo);
    let plan = format!(
        r#"{{"tasks":[{},{},{},{}]}}"#,
        task("T1", "fix add in calc.py", "[]"),
        task("T2", "write mul.py", "[]"),
        task("T3", "write bad.py", "[]"),
        task("T4", "write NOTES.md", r#"["T1"]"#)
    );
    let work = "    case \"$p\" in\n      *\"write mul.py\"*) printf 'def mul(a, b):\\n    return a * b\\n' > mul.py; echo mul ;;\n      *\"write bad.py\"*) printf 'def broken(:\\n' > bad.py; echo bad ;;\n      *\"write NOTES.md\"*) printf 'add is fixed\\n' > NOTES.md; echo notes ;;\n      *) sed -i 's/return a - b/return a + b/' calc.py; echo add ;;\n    esac";
    let m = model(repo, "model", &plan, "write mul.py", work);
    let j = repo.forum_json(&[
        "submit",
        "--work",
        "--check",
        COMPILES,
        "--cmd",
        &m,
        "fix calc and note it",
    ]);
    let work_seq = j["git_forum_receipt"]["request_seq"].as_u64().unwrap();
    (work_seq, hostile_run(repo))
}

/// A plain run of one task whose request is [`HOSTILE_REQUEST`]; its seq.
pub(crate) fn hostile_run(repo: &Repo) -> u64 {
    use crate::work_read::{model, task};
    let plain = model(
        repo,
        "plain",
        &format!(r#"{{"tasks":[{}]}}"#, task("P1", "say hello", "[]")),
        "never",
        "    echo hello",
    );
    let j = repo.forum_json(&["submit", "--cmd", &plain, HOSTILE_REQUEST]);
    j["git_forum_receipt"]["request_seq"].as_u64().unwrap()
}

/// Every review page of the fixture in the browser: each answers 200 with no console error, no
/// uncaught error, no dialog and no request leaving the daemon, with JavaScript on and off; each
/// has screenshots at desktop and phone widths; axe-core finds no serious or critical violation
/// in the light or the dark scheme; and the run page shows the two waves, the blocked change,
/// the failed check and the gate's reason.
#[test]
fn heavy_every_review_page_loads_cleanly_and_accessibly_in_the_browser() {
    let Some(b) = browser() else {
        return;
    };
    let repo = Repo::new("sha1");
    let (w, h) = review_fixture(&repo);
    let c = crate::view_parts::tool_calls_run(&repo);
    let viewing = Viewing::start(&repo, None);
    let out = shots_dir("review_pages");
    let mut pages = [
        page("runs", "/view/runs", &["fix calc and note it"], &[]),
        page(
            "run",
            &format!("/view/run/{w}"),
            &[
                "Wave 1",
                "Wave 2",
                "T4",
                "blocked",
                "failed",
                "not asked for",
                "merged",
            ],
            &["svg", "table"],
        ),
        page(
            "task",
            &format!("/view/run/{w}/task/T2"),
            &["T2", "not asked for"],
            &[],
        ),
        page(
            "task-failed",
            &format!("/view/run/{w}/task/T3"),
            &["T3", "failed"],
            &[],
        ),
        page("record", "/view/record", &["request"], &[]),
        page(
            "entry",
            &format!("/view/entry/{w}"),
            &["fix calc and note it"],
            &[],
        ),
        page("bench", &format!("/view/bench?a={h}&b={w}"), &[], &[]),
        page("apply", &format!("/view/apply/{w}"), &["calc.py"], &[]),
        page("blame", "/view/blame?path=calc.py", &["calc.py"], &[]),
        page(
            "runs-filtered",
            "/view/runs?outcome=&q=calc&page=1",
            &["fix calc"],
            &[],
        ),
        page(
            "run-split",
            &format!("/view/run/{w}?diff=split"),
            &["side by side", "calc.py"],
            &["table.split", ".sx-k"],
        ),
        page(
            "task-calls",
            &format!("/view/run/{c}/task/T1"),
            &["apply_diff", "run_tests"],
            &["figure.calls rect.bar"],
        ),
    ];
    // The top of the run page is README's picture (docs/img/view-run.png).
    pages[1]["top"] = json!(1230);
    let r = b.drive(&viewing.url, &viewing.origin(), &pages, &out);
    assert_eq!(r["start"]["status"], 200, "{}", r["start"]);
    assert!(
        r["start"]["url"].as_str().unwrap().ends_with("/view/runs"),
        "{}",
        r["start"]
    );
    for p in &pages {
        assert_clean(&r, p["name"].as_str().unwrap());
    }
    assert_accessible(&r, &pages);
    let run = &r["pages"]["run"];
    assert!(run["top"]["bytes"].as_u64().unwrap() > 10_000, "{run}");
    assert_eq!(
        run["selectors"]["svg"].as_u64().map(|n| n >= 1),
        Some(true),
        "{run}"
    );
    // The side-by-side diff is drawn with its code coloured, and the three tool calls as bars.
    let split = &r["pages"]["run-split"]["selectors"];
    assert!(
        split["table.split"].as_u64() == Some(1) && split[".sx-k"].as_u64() > Some(0),
        "{split}"
    );
    let calls = &r["pages"]["task-calls"]["selectors"];
    assert_eq!(calls["figure.calls rect.bar"].as_u64(), Some(3), "{calls}");
    drop(viewing);
}

/// With the pages' Content-Security-Policy in force, a request carrying an inline script and an
/// `onerror` image shows as text on every page that names it, and none of it ran: no such
/// element is on the page, the flag it would set stays unset and no dialog opened, and the same
/// holds with the policy lifted (the escaping alone keeps it inert).
#[test]
fn heavy_a_hostile_request_renders_as_text_and_runs_no_script() {
    let Some(b) = browser() else {
        return;
    };
    let repo = Repo::new("sha1");
    crate::work_run::setup(&repo);
    let h = hostile_run(&repo);
    let viewing = Viewing::start(&repo, Some(h));
    let out = shots_dir("hostile_request");
    let texts = [
        "<script>gfPwned='script';alert('script')</script>",
        "<img src=x onerror=gfPwned='img';alert('img')>",
    ];
    let selectors = ["script", "img[src='x']", "[onerror]"];
    let pages = [
        page("runs", "/view/runs", &texts, &selectors),
        page("run", &format!("/view/run/{h}"), &texts, &selectors),
        page("entry", &format!("/view/entry/{h}"), &texts, &selectors),
    ];
    let r = b.drive(&viewing.url, &viewing.origin(), &pages, &out);
    assert!(
        r["start"]["url"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/view/run/{h}")),
        "{}",
        r["start"]
    );
    assert_eq!(r["start"]["dialogs"], json!([]), "{}", r["start"]);
    for p in &pages {
        let name = p["name"].as_str().unwrap();
        assert_clean(&r, name);
        let row = &r["pages"][name];
        let csp = row["csp"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: no CSP: {row}"));
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
            "{name}: {csp}"
        );
        for sel in selectors {
            assert_eq!(row["selectors"][sel], 0, "{name}: {sel} is on the page");
        }
        for scheme in ["light", "dark", "phone"] {
            let lifted = &row["without_policy"][scheme];
            assert_eq!(
                lifted["flag"],
                J::Null,
                "{name}: the text ran without the policy"
            );
            assert_eq!(
                lifted["dialogs"],
                json!([]),
                "{name}: the text ran without the policy"
            );
        }
    }
    drop(viewing);
}
