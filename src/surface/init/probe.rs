//! What `init` looks at on this machine, for the pure choices of `choose.rs`: the coding-agent
//! CLIs on `PATH`, which provider key variables are set (never their values), the local
//! servers that answer `GET /v1/models` on loopback, and the project's top-level files.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::choose::{Found, KEYS, Program, ProjectFiles, SERVERS, SMALL_FILES, Server, models_of};
use crate::exec::config::Preset;

/// The variable that replaces the ports `init` probes for a local server: a comma-separated
/// list, taken in the order of the usual servers (the first stands for Ollama's port, the
/// second for llama.cpp's, the third for LM Studio's); empty, it probes none.
pub(crate) const PORTS_ENV: &str = "GIT_FORUM_INIT_PORTS";

/// How long a probe waits to connect, and then for the answer.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// The most of a `/v1/models` answer a probe reads.
const PROBE_CAP: u64 = 256 * 1024;

/// The most of each small project file test detection reads.
const FILE_CAP: u64 = 64 * 1024;

/// What is on this machine.
pub(crate) fn found() -> Found {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let programs = Preset::ALL
        .into_iter()
        .filter_map(|p| {
            on_path(p.program(), &path).map(|at| Program {
                name: p.name().to_string(),
                path: at.display().to_string(),
            })
        })
        .collect();
    let keys = KEYS
        .iter()
        .filter(|k| std::env::var_os(k).is_some_and(|v| !v.is_empty()))
        .map(|k| k.to_string())
        .collect();
    let servers = ports()
        .into_iter()
        .filter_map(|(name, port)| {
            let models = models_at(port)?;
            (!models.is_empty()).then_some(Server { name, port, models })
        })
        .collect();
    Found {
        programs,
        keys,
        servers,
    }
}

/// The ports to probe, each with the name of its server: the usual ones, or those
/// [`PORTS_ENV`] lists (named in the same order, as `--agent` takes them).
fn ports() -> Vec<(String, u16)> {
    let usual = || SERVERS.iter().map(|(n, p)| (n.to_string(), *p)).collect();
    let Ok(list) = std::env::var(PORTS_ENV) else {
        return usual();
    };
    list.split(',')
        .filter_map(|p| p.trim().parse::<u16>().ok())
        .zip(SERVERS.iter().map(|(n, _)| n.to_string()))
        .map(|(p, n)| (n, p))
        .collect()
}

/// `program` in a folder of `path`, executable.
fn on_path(program: &str, path: &std::ffi::OsStr) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The models a server on loopback `port` lists, or `None` when nothing there answers
/// `GET /v1/models` with a models list within [`PROBE_TIMEOUT`] per step.
fn models_at(port: u16) -> Option<Vec<String>> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut s = TcpStream::connect_timeout(&addr, PROBE_TIMEOUT).ok()?;
    s.set_read_timeout(Some(PROBE_TIMEOUT)).ok()?;
    s.set_write_timeout(Some(PROBE_TIMEOUT)).ok()?;
    // HTTP/1.0: the answer ends when the connection closes, with no chunked framing.
    let req = format!(
        "GET /v1/models HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).ok()?;
    let mut raw = Vec::new();
    s.take(PROBE_CAP).read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.lines().next()?;
    if !(status.starts_with("HTTP/1.") && status.get(9..12) == Some("200")) {
        return None;
    }
    models_of(body)
}

/// The start of `path`, at most [`FILE_CAP`] bytes, when it is a file.
fn read_start(path: &Path) -> Option<String> {
    let f = std::fs::File::open(path).ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut buf = Vec::new();
    f.take(FILE_CAP).read_to_end(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// Whether `dir` holds a `test_*.py` or `*_test.py` file (its own files only).
fn has_python_tests(dir: &Path) -> bool {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return false;
    };
    rd.flatten().take(10_000).any(|e| {
        let n = e.file_name();
        let n = n.to_string_lossy();
        n.ends_with(".py") && (n.starts_with("test_") || n.ends_with("_test.py"))
    })
}

/// What test detection reads of the work tree at `root`.
pub(crate) fn project_files(root: &Path) -> ProjectFiles {
    let mut names = BTreeSet::new();
    if let Ok(rd) = std::fs::read_dir(root) {
        for e in rd.flatten().take(10_000) {
            let n = e.file_name().to_string_lossy().into_owned();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                names.insert(format!("{n}/"));
            } else {
                names.insert(n);
            }
        }
    }
    let texts: BTreeMap<String, String> = SMALL_FILES
        .iter()
        .filter(|f| names.contains(**f))
        .filter_map(|f| Some((f.to_string(), read_start(&root.join(f))?)))
        .collect();
    let python_tests_dir = ["tests", "test"]
        .iter()
        .any(|d| names.contains(&format!("{d}/")) && has_python_tests(&root.join(d)));
    ProjectFiles {
        names,
        texts,
        python_tests_dir,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_that_lists_models_is_found_and_anything_else_is_not() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let t = std::thread::spawn(move || {
            for body in [
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"data\":[{\"id\":\"m1\"}]}",
                "HTTP/1.1 404 Not Found\r\n\r\n{\"data\":[{\"id\":\"m1\"}]}",
            ] {
                let (mut s, _) = l.accept().unwrap();
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf);
                s.write_all(body.as_bytes()).unwrap();
            }
        });
        assert_eq!(models_at(port), Some(vec!["m1".to_string()]));
        assert_eq!(models_at(port), None);
        t.join().unwrap();
        // Nothing listening.
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = free.local_addr().unwrap().port();
        drop(free);
        assert_eq!(models_at(port), None);
    }

    #[test]
    fn a_projects_files_are_listed_and_its_small_files_read() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("Makefile"), "test:\n\ttrue\n").unwrap();
        std::fs::create_dir(d.path().join("tests")).unwrap();
        std::fs::write(d.path().join("tests/test_a.py"), "").unwrap();
        let p = project_files(d.path());
        assert!(p.names.contains("Makefile") && p.names.contains("tests/"));
        assert_eq!(p.texts["Makefile"], "test:\n\ttrue\n");
        assert!(p.python_tests_dir);
    }
}
