//! The model server's process: started detached in its own session (stdin closed, stdout and
//! stderr to `server.log`), found again through `server.pid` (checked against
//! `/proc/PID/cmdline`, so a reused PID is not taken for it), probed with `GET /v1/models`, and
//! stopped with SIGTERM, then SIGKILL, waiting until it is gone.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Home, ModelError, START_TIMEOUT_SECS};

/// A server this tool started, alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Running {
    pub(crate) pid: u32,
    /// From `server.port`; `None` when that file is missing or unreadable.
    pub(crate) port: Option<u16>,
}

/// Reads a small file holding one number.
fn read_number<T: std::str::FromStr>(path: &Path) -> Option<T> {
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(64)
        .read_to_string(&mut text)
        .ok()?;
    text.trim().parse().ok()
}

/// Whether process `pid` is alive and runs the server script (a zombie has no command line).
fn is_server(pid: u32) -> bool {
    let Some(p) = rustix::process::Pid::from_raw(pid as i32) else {
        return false;
    };
    if rustix::process::test_kill_process(p).is_err() {
        return false;
    }
    if !Path::new("/proc/self").exists() {
        return true;
    }
    let mut buf = Vec::new();
    let ok = std::fs::File::open(format!("/proc/{pid}/cmdline"))
        .and_then(|f| f.take(64 * 1024).read_to_end(&mut buf))
        .is_ok();
    ok && buf.split(|b| *b == 0).any(|a| a.ends_with(b"llm_serve.py"))
}

/// The server of `home`, when one is alive. A stale PID file is removed.
pub(crate) fn running(home: &Home) -> Option<Running> {
    let pid: u32 = read_number(&home.pid_file())?;
    if is_server(pid) {
        Some(Running {
            pid,
            port: read_number(&home.port_file()),
        })
    } else {
        let _ = std::fs::remove_file(home.pid_file());
        let _ = std::fs::remove_file(home.port_file());
        None
    }
}

/// Whether `GET /v1/models` on `host:port` answers 200 within a couple of seconds. The
/// response read is capped.
pub(crate) fn health(host: &str, port: u16) -> bool {
    let Ok(mut addrs) = (host, port).to_socket_addrs() else {
        return false;
    };
    let Some(addr) = addrs.next() else {
        return false;
    };
    let t = Duration::from_secs(2);
    let Ok(mut s) = TcpStream::connect_timeout(&addr, t) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(t));
    let _ = s.set_write_timeout(Some(t));
    let req =
        format!("GET /v1/models HTTP/1.0\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 16];
    let mut n = 0;
    while n < head.len() {
        match s.read(&mut head[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    let line = String::from_utf8_lossy(&head[..n]);
    line.starts_with("HTTP/1.") && line.get(9..12) == Some("200")
}

/// The last lines of the log, for an error message (one line: joined with ` | `).
fn log_tail(home: &Home) -> String {
    let mut text = String::new();
    if let Ok(f) = std::fs::File::open(home.log_file()) {
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let mut f = f;
        use std::io::Seek;
        let _ = f.seek(std::io::SeekFrom::Start(len.saturating_sub(4096)));
        let _ = f.take(4096).read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = &lines[lines.len().saturating_sub(3)..];
    tail.join(" | ")
}

/// Writes `text` to `path` through a temporary file and a rename.
fn write_atomic(path: &Path, text: &str) -> Result<(), ModelError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let writing = |e| ModelError::io("writing", path, e);
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(writing)?;
    tmp.write_all(text.as_bytes()).map_err(writing)?;
    tmp.persist(path).map_err(|e| writing(e.error))?;
    Ok(())
}

/// Writes the serve script and starts the server on `port`, its output to the log file.
fn spawn_server(home: &Home, port: u16) -> Result<std::process::Child, ModelError> {
    write_atomic(&home.serve_script(), super::SERVE_SCRIPT)?;
    let log = std::fs::File::create(home.log_file())
        .map_err(|e| ModelError::io("creating", &home.log_file(), e))?;
    let err = log
        .try_clone()
        .map_err(|e| ModelError::io("opening", &home.log_file(), e))?;
    // Its own session, so a terminal's hangup or a Ctrl-C meant for the caller never reaches
    // it: through setsid(1) where it is installed (it execs in place, so the PID stays the
    // server's; the crate has no unsafe code for a pre_exec hook), else its own process group.
    let setsid = which("setsid");
    let mut cmd = match &setsid {
        Some(s) => {
            let mut c = Command::new(s);
            c.arg(home.python());
            c
        }
        None => {
            let mut c = Command::new(home.python());
            c.process_group(0);
            c
        }
    };
    cmd.arg(home.serve_script())
        .args(["--port", &port.to_string()])
        .args(["--threads", "1", "--ctx", "8192", "--parallel", "2"])
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err);
    cmd.spawn()
        .map_err(|e| ModelError::io("starting", &home.python(), e))
}

/// Starts the server of `home` on `port` and waits (at most [`START_TIMEOUT_SECS`]) until it
/// answers. Returns the server and whether it was already running.
pub(crate) fn start(home: &Home, port: u16) -> Result<(Running, bool), ModelError> {
    if let Some(r) = running(home) {
        let p = r.port.unwrap_or(port);
        if health("127.0.0.1", p) {
            return Ok((
                Running {
                    pid: r.pid,
                    port: Some(p),
                },
                true,
            ));
        }
        stop(home)?;
    }
    if health("127.0.0.1", port) {
        return Err(ModelError::PortTaken(port));
    }
    let mut child = spawn_server(home, port)?;
    let pid = child.id();
    write_atomic(&home.pid_file(), &format!("{pid}\n"))?;
    write_atomic(&home.port_file(), &format!("{port}\n"))?;
    let deadline = Instant::now() + Duration::from_secs(START_TIMEOUT_SECS);
    loop {
        if health("127.0.0.1", port) {
            return Ok((
                Running {
                    pid,
                    port: Some(port),
                },
                false,
            ));
        }
        if let Ok(Some(status)) = child.try_wait() {
            let _ = std::fs::remove_file(home.pid_file());
            let _ = std::fs::remove_file(home.port_file());
            return Err(ModelError::ExitedDuringStart {
                status,
                tail: log_tail(home),
                log: home.log_file(),
            });
        }
        if Instant::now() >= deadline {
            let _ = kill_and_wait(pid);
            let _ = child.try_wait();
            let _ = std::fs::remove_file(home.pid_file());
            let _ = std::fs::remove_file(home.port_file());
            return Err(ModelError::StartTimeout(home.log_file()));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The program `name` on `PATH`, if there is one.
fn which(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// SIGTERM, up to 15 s, then SIGKILL, up to 5 s more.
fn kill_and_wait(pid: u32) -> Result<(), ModelError> {
    let Some(p) = rustix::process::Pid::from_raw(pid as i32) else {
        return Ok(());
    };
    use rustix::process::{Signal, kill_process};
    let _ = kill_process(p, Signal::TERM);
    for (signal, wait) in [(None, 150), (Some(Signal::KILL), 50)] {
        if let Some(s) = signal {
            let _ = kill_process(p, s);
        }
        for _ in 0..wait {
            if !is_server(pid) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Err(ModelError::DoesNotExit(pid))
}

/// Stops the server of `home` and waits until it is gone. Returns its PID, `None` when none
/// was running.
pub(crate) fn stop(home: &Home) -> Result<Option<u32>, ModelError> {
    let Some(r) = running(home) else {
        return Ok(None);
    };
    kill_and_wait(r.pid)?;
    let _ = std::fs::remove_file(home.pid_file());
    let _ = std::fs::remove_file(home.port_file());
    Ok(Some(r.pid))
}
