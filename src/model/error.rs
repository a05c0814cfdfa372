//! Why the local model could not be found, installed, started or stopped: one line each,
//! naming what to do, with the underlying error kept as the source where there is one.

use std::path::PathBuf;
use std::process::ExitStatus;

use super::{DIR_ENV, MODELS, PORT_ENV, START_TIMEOUT_SECS, URL_ENV, base_url};

/// The Debian package that brings `python3 -m venv`.
pub(super) const VENV_PACKAGE: &str = "python3-venv";

/// Errors of the local model.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ModelError {
    /// `GIT_FORUM_MODEL_PORT` holds this value, which is not a port.
    #[error("{PORT_ENV}={0:?} is not a TCP port; give a number from 1 to 65535")]
    BadPort(String),
    #[error("no model named {0:?}; the models that can be installed are: {names}", names = model_names())]
    UnknownModel(String),
    #[error("no directory for the local model: set {DIR_ENV} (or HOME, or XDG_CACHE_HOME)")]
    NoHome,
    #[error("reading the current directory: {0}")]
    CurrentDir(#[source] std::io::Error),
    /// `GIT_FORUM_MODEL_URL` holds this value, which is not a loopback http URL.
    #[error(
        "{URL_ENV}={0:?} is not a local server's base URL; give one like http://127.0.0.1:18080/v1"
    )]
    BadUrl(String),
    /// A file or process of the model directory (`action`: creating, writing, opening,
    /// starting).
    #[error("{action} {}: {source}", .path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A step of the install (`what`: the command as shown) could not be started.
    #[error("{what}: cannot start it ({source})")]
    CannotStart {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} failed ({status}); its output is above")]
    StepFailed { what: String, status: ExitStatus },
    #[error(
        "python3 is not installed: install Python 3.10 or newer (on Debian or Ubuntu: apt-get install python3 {VENV_PACKAGE}), then run git forum model install again"
    )]
    NoPython,
    #[error("cannot run python3: {0}")]
    RunPython(#[source] std::io::Error),
    /// The system Python is older than 3.10 (its version).
    #[error("python3 is {0}; the local model needs Python 3.10 or newer")]
    OldPython(String),
    #[error(
        "the python3 venv module is missing: on Debian or Ubuntu, apt-get install {VENV_PACKAGE}, then run git forum model install again"
    )]
    NoVenv,
    /// The venv's interpreter does not import the pinned wheels after the install.
    #[error("the install finished, but {} does not import the pinned versions", .0.display())]
    NotPinned(PathBuf),
    #[error(
        "port {0} already answers /v1/models, but not from a server git forum started; use it with GIT_FORUM_MODEL_URL={url} or start on another port with --port N",
        url = url_of_port(.0)
    )]
    PortTaken(u16),
    /// The server exited before it answered: its status, the last lines of its log, the log.
    #[error("the model server exited during start ({status}): {tail} (log: {})", .log.display())]
    ExitedDuringStart {
        status: ExitStatus,
        tail: String,
        log: PathBuf,
    },
    #[error(
        "the model server did not answer /v1/models within {START_TIMEOUT_SECS} s, so it was stopped (log: {})",
        .0.display()
    )]
    StartTimeout(PathBuf),
    #[error("the model server (pid {0}) does not exit")]
    DoesNotExit(u32),
}

/// The base URL of a server on `port`, for the message of a port taken by another server.
fn url_of_port(port: &u16) -> String {
    base_url(*port)
}

/// The names of the models that can be installed, for the message of an unknown one.
fn model_names() -> String {
    let names: Vec<&str> = MODELS.iter().map(|m| m.name).collect();
    names.join(", ")
}

impl ModelError {
    /// An I/O failure on `path` while `action` (creating, writing, opening, starting) it.
    pub(super) fn io(action: &'static str, path: &std::path::Path, source: std::io::Error) -> Self {
        ModelError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }
}
