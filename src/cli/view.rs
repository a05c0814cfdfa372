//! `git forum view [RUN]`: the review pages in a browser. Starts `git forum serve` on a free
//! loopback port for this repository and ledger (or reuses the one an earlier `view` started),
//! mints a one-time login URL with the daemon's bearer token, and opens it with the desktop's
//! opener (or prints it). `--stop` stops that daemon.
//!
//! The daemon runs detached, in its own process group, with its output in files beside its
//! token; what `view` started is remembered in `view-LEDGER.json` there (`{"url", "pid"}`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value as J, json};

use super::{CliError, Ctx};

/// Open the review pages of this repository's record in the browser: runs, a run's plan,
/// tasks, diffs, checks and costs, the entry log with proofs, bench, apply and blame.
/// Starts the daemon on a free loopback port (or reuses the one an earlier `view` started)
/// and opens a one-time login URL; the daemon keeps running until `git forum view --stop`.
#[derive(Debug, clap::Args)]
pub(crate) struct ViewArgs {
    /// Open this run's page (the seq of its request) instead of the list of runs.
    #[arg(value_name = "RUN")]
    pub(crate) run: Option<u64>,
    /// Print the login URL instead of opening it (with --json: `{"url": ..., "pid": ...}`).
    #[arg(long)]
    pub(crate) no_open: bool,
    /// Stop the daemon an earlier `git forum view` started for this repository and ledger.
    #[arg(long, conflicts_with_all = ["run", "no_open"])]
    pub(crate) stop: bool,
}

/// How long a starting daemon may take to say where it listens.
const START_WAIT: Duration = Duration::from_secs(20);

/// What `view` remembers of the daemon it started.
struct Started {
    /// `http://127.0.0.1:PORT`.
    base: String,
    pid: u32,
}

/// The files of ledger `ledger`'s view daemon, beside the token file: the record, its stdout,
/// its stderr.
fn files(token_path: &Path, ledger: &str) -> (PathBuf, PathBuf, PathBuf) {
    let name: String = ledger
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let dir = token_path.parent().unwrap_or(Path::new("."));
    (
        dir.join(format!("view-{name}.json")),
        dir.join(format!("view-{name}.out")),
        dir.join(format!("view-{name}.log")),
    )
}

fn read_started(path: &Path) -> Option<Started> {
    let v: J = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    Some(Started {
        base: v.get("url")?.as_str()?.to_string(),
        pid: u32::try_from(v.get("pid")?.as_u64()?).ok()?,
    })
}

/// `git forum view`.
pub(crate) fn view(ctx: &Ctx, args: ViewArgs) -> Result<(), CliError> {
    let (token_path, token) = super::serve::token(ctx)?;
    let (record, out, log) = files(&token_path, &ctx.ledger);
    if args.stop {
        return stop(ctx, &record);
    }
    let started = match read_started(&record) {
        Some(s) if mint(&s.base, &token, args.run).is_ok() => s,
        _ => start(ctx, &record, &out, &log)?,
    };
    let path = mint(&started.base, &token, args.run)?;
    let url = format!("{}{path}", started.base);
    let opened = !args.no_open && open(&url);
    if ctx.json {
        return ctx.out(&json!({"url": url, "pid": started.pid}).to_string());
    }
    if opened {
        eprintln!(
            "git forum view: opened the review pages in the browser; `git forum view --stop` stops the daemon (pid {})",
            started.pid
        );
        Ok(())
    } else {
        if !args.no_open {
            eprintln!("git forum view: no browser could be opened; open this URL (it works once):");
        }
        ctx.out(&url)
    }
}

/// Starts `git forum serve --port 0` detached and waits for the address it prints.
fn start(ctx: &Ctx, record: &Path, out: &Path, log: &Path) -> Result<Started, CliError> {
    use std::os::unix::process::CommandExt as _;
    let exe = std::env::current_exe().map_err(|e| {
        CliError::internal(format!("cannot find this program to start the daemon: {e}"))
    })?;
    let file = |p: &Path| {
        std::fs::File::create(p)
            .map_err(|e| CliError::internal(format!("cannot write {}: {e}", p.display())))
    };
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("-C")
        .arg(&ctx.dir)
        .args([
            "--ledger",
            &ctx.ledger,
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(file(out)?)
        .stderr(file(log)?)
        .process_group(0);
    if ctx.no_fsync {
        cmd.arg("--no-fsync");
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| CliError::unavailable(format!("cannot start `git forum serve`: {e}")))?;
    let began = Instant::now();
    loop {
        let text = std::fs::read_to_string(out).unwrap_or_default();
        if let Some(base) = text
            .lines()
            .find_map(|l| l.strip_prefix("listening "))
            .map(|b| b.trim().to_string())
        {
            let started = Started {
                base,
                pid: child.id(),
            };
            let body = json!({"url": started.base, "pid": started.pid}).to_string();
            std::fs::write(record, body + "\n").map_err(|e| {
                CliError::internal(format!("cannot write {}: {e}", record.display()))
            })?;
            return Ok(started);
        }
        if let Ok(Some(status)) = child.try_wait() {
            let why = std::fs::read_to_string(log).unwrap_or_default();
            let last = why
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no message");
            return Err(CliError::unavailable(format!(
                "the daemon exited ({status}) before it listened: {last}"
            )));
        }
        if began.elapsed() > START_WAIT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(CliError::unavailable(format!(
                "the daemon did not start listening within {} s; see {}",
                START_WAIT.as_secs(),
                log.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// One HTTP/1.1 request to the daemon at `base`: its status and body.
fn request(base: &str, method: &str, path: &str, token: &str) -> std::io::Result<(u16, String)> {
    let host = base.strip_prefix("http://").unwrap_or(base);
    let mut s = TcpStream::connect(host)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let status = raw
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = raw
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    Ok((status, body))
}

/// Mints a one-time login path on the daemon at `base`.
fn mint(base: &str, token: &str, run: Option<u64>) -> Result<String, CliError> {
    let path = match run {
        Some(r) => format!("/view/mint?run={r}"),
        None => "/view/mint".to_string(),
    };
    let (status, body) = request(base, "POST", &path, token)
        .map_err(|e| CliError::unavailable(format!("cannot reach the daemon at {base}: {e}")))?;
    let v: J = serde_json::from_str(&body).unwrap_or(J::Null);
    match (status, v.get("path").and_then(J::as_str)) {
        (200, Some(p)) => Ok(p.to_string()),
        _ => Err(CliError::unavailable(format!(
            "the daemon at {base} did not mint a login URL ({status}): {}",
            v.get("error")
                .and_then(J::as_str)
                .unwrap_or("no reason given")
        ))),
    }
}

/// Opens `url` with the desktop's opener; whether one started.
fn open(url: &str) -> bool {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether process `pid` is still there.
fn alive(pid: u32) -> bool {
    rustix::process::Pid::from_raw(pid as i32)
        .is_some_and(|p| rustix::process::test_kill_process(p).is_ok())
}

/// `git forum view --stop`: SIGTERM to the daemon `view` started, then wait for it to go.
fn stop(ctx: &Ctx, record: &Path) -> Result<(), CliError> {
    let Some(started) = read_started(record) else {
        return Err(CliError::not_found(format!(
            "no daemon started by `git forum view` for ledger {} is known here",
            ctx.ledger
        )));
    };
    let pid = rustix::process::Pid::from_raw(started.pid as i32);
    // Only a daemon that still answers at its address is signalled: a pid reused by another
    // program since is left alone.
    let answers = request(&started.base, "GET", "/health", "").is_ok_and(|(s, _)| s == 200);
    if let Some(pid) = pid.filter(|_| answers) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let began = Instant::now();
        while alive(started.pid) && began.elapsed() < Duration::from_secs(40) {
            std::thread::sleep(Duration::from_millis(25));
        }
    }
    let _ = std::fs::remove_file(record);
    if ctx.json {
        ctx.out(&json!({"stopped": answers, "pid": started.pid}).to_string())
    } else if answers {
        ctx.out(&format!("stopped the view daemon (pid {})", started.pid))
    } else {
        ctx.out("the view daemon had already stopped")
    }
}
