//! The bridge, inside the sandbox: loopback ports of the sandbox's own network namespace, each
//! forwarded to a Unix socket bound into the sandbox from outside, around the worker it runs.
//!
//! `git forum __egress-bridge --listen 127.0.0.1:3128=/AREA/proxy.sock [--listen ...] --
//! PROGRAM ARGS...` binds every listening port first (so the worker's first connection finds
//! them), then runs PROGRAM as its child with the same standard streams, environment and
//! working directory, and exits with the child's status (`128 + N` when a signal N ended it).
//! The accepting threads die with the bridge. Nothing here decides what is admitted: that is
//! the proxy's and the metering forwarder's job, outside.

use std::ffi::OsString;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Command;

use super::http1;

/// One `--listen ADDR=SOCKET`: a loopback address to listen on and the Unix socket it leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listen {
    /// The address inside the sandbox (loopback).
    pub addr: SocketAddr,
    /// The Unix socket each connection is forwarded to.
    pub socket: PathBuf,
}

/// Why a `--listen` argument was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListenError {
    /// Not `ADDR:PORT=SOCKET`.
    #[error("--listen {0:?}: give ADDR:PORT=SOCKET, such as 127.0.0.1:3128=/tmp/task/proxy.sock")]
    Shape(String),
    /// The address is not a loopback one.
    #[error("--listen {0:?}: the bridge listens on loopback only (127.0.0.1 or [::1])")]
    NotLoopback(String),
    /// The socket path is relative.
    #[error("--listen {0:?}: the socket path must be absolute")]
    RelativeSocket(String),
}

impl Listen {
    /// Parses `127.0.0.1:PORT=/path/to/socket`; the address must be loopback and the path
    /// absolute.
    pub fn parse(spec: &str) -> Result<Listen, ListenError> {
        let shape = || ListenError::Shape(spec.to_string());
        let (addr, socket) = spec.split_once('=').ok_or_else(shape)?;
        let addr: SocketAddr = addr.parse().map_err(|_| shape())?;
        if !addr.ip().is_loopback() {
            return Err(ListenError::NotLoopback(spec.to_string()));
        }
        let socket = PathBuf::from(socket);
        if !socket.is_absolute() {
            return Err(ListenError::RelativeSocket(spec.to_string()));
        }
        Ok(Listen { addr, socket })
    }
}

/// Why the bridge could not run its program.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// A listening address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// The program could not be started.
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
}

/// Listens on every `listens` address, runs `program` with `args`, and returns the exit code
/// the bridge should end with: the child's, or `128 + N` when signal N ended it.
pub fn run(listens: &[Listen], program: &OsString, args: &[OsString]) -> Result<u8, BridgeError> {
    let mut bound = Vec::new();
    for l in listens {
        let listener = TcpListener::bind(l.addr).map_err(|source| BridgeError::Listen {
            addr: l.addr,
            source,
        })?;
        bound.push((listener, l.socket.clone()));
    }
    for (listener, socket) in bound {
        // Detached: the threads end when the bridge exits with its child's status.
        let _ = std::thread::Builder::new()
            .name("egress-bridge".into())
            .spawn(move || forward_all(listener, socket));
    }
    let status = Command::new(program)
        .args(args)
        .status()
        .map_err(|source| BridgeError::Spawn {
            program: program.to_string_lossy().into_owned(),
            source,
        })?;
    Ok(match (status.code(), status.signal()) {
        (Some(c), _) => u8::try_from(c).unwrap_or(1),
        (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(255),
        (None, None) => 1,
    })
}

fn forward_all(listener: TcpListener, socket: PathBuf) {
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let socket = socket.clone();
        let _ = std::thread::Builder::new()
            .name("egress-bridge-conn".into())
            .spawn(move || forward(conn, &socket));
    }
}

/// Forwards one connection; when the socket cannot be reached the client's connection is
/// closed at once (it sees a reset or an empty reply).
fn forward(conn: TcpStream, socket: &PathBuf) {
    let _ = conn.set_nodelay(true);
    match UnixStream::connect(socket) {
        Ok(out) => {
            let _ = http1::pipe(conn, out);
        }
        Err(_) => {
            let _ = conn.shutdown(std::net::Shutdown::Both);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_specs_parse_and_bad_ones_say_why() {
        let l = Listen::parse("127.0.0.1:3128=/run/task/proxy.sock").unwrap();
        assert_eq!(l.addr.port(), 3128);
        assert_eq!(l.socket, PathBuf::from("/run/task/proxy.sock"));
        assert!(Listen::parse("[::1]:80=/s").is_ok());
        assert!(
            Listen::parse("0.0.0.0:80=/s")
                .unwrap_err()
                .to_string()
                .contains("loopback")
        );
        assert!(
            Listen::parse("127.0.0.1:80=rel.sock")
                .unwrap_err()
                .to_string()
                .contains("absolute")
        );
        assert!(
            Listen::parse("127.0.0.1:80")
                .unwrap_err()
                .to_string()
                .contains("ADDR:PORT=SOCKET")
        );
    }
}
