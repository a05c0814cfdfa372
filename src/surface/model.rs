//! `model install | start | stop | status | url`: the local model as typed reports, over the
//! [`crate::model`] adapter. The CLI prints them (`--json`: as they are).

use serde::Serialize;

use super::{Error, Report, Result};
use crate::model::{self, Home, Model, ModelError};

/// Where the local model lives and how it stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ModelStatus {
    pub(crate) schema: &'static str,
    /// The model directory (the venv).
    pub(crate) dir: String,
    /// The model served.
    pub(crate) model: &'static str,
    /// Whether the pinned wheels are installed in `dir`.
    pub(crate) installed: bool,
    /// Whether a server answers `/v1/models` at `url`.
    pub(crate) running: bool,
    /// The server's PID, when git forum started it.
    pub(crate) pid: Option<u32>,
    /// Its port.
    pub(crate) port: Option<u16>,
    /// The base URL runs use (`GIT_FORUM_MODEL_URL` when set).
    pub(crate) url: String,
    /// `managed` (git forum starts and stops it) or `external` (`GIT_FORUM_MODEL_URL`).
    pub(crate) managed_by: &'static str,
    /// The server's log.
    pub(crate) log: String,
    /// The one command that gets it running, when it is not.
    pub(crate) next: Option<String>,
}

impl Report for ModelStatus {
    const SCHEMA: &'static str = "git-forum.model-status/1";
}

/// What `install`, `start` and `stop` did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ModelAction {
    pub(crate) schema: &'static str,
    /// `install`, `start` or `stop`.
    pub(crate) action: &'static str,
    /// False when there was nothing to do (installed already, running already, not running).
    pub(crate) changed: bool,
    /// The state afterwards.
    pub(crate) status: ModelStatus,
}

impl Report for ModelAction {
    const SCHEMA: &'static str = "git-forum.model-action/1";
}

/// The base URL alone.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ModelUrl {
    pub(crate) schema: &'static str,
    pub(crate) url: String,
}

impl Report for ModelUrl {
    const SCHEMA: &'static str = "git-forum.model-url/1";
}

/// The one command that installs and starts the local model.
pub(crate) const GET_IT_RUNNING: &str = "git forum model install && git forum model start";

/// The local model could not be installed or started: the service is unavailable.
fn unavailable(e: ModelError) -> Error {
    Error::unavailable(e.to_string()).with_source(e)
}

/// A value the user set (an environment variable, a model name) is wrong.
fn usage(e: ModelError) -> Error {
    Error::usage(e.to_string()).with_source(e)
}

/// The model directory the environment names.
pub(crate) fn home() -> Result<Home> {
    Home::from_env().map_err(usage)
}

/// A port from `--port`: 1 to 65535.
pub(crate) fn check_port(port: u32) -> Result<u16> {
    match u16::try_from(port) {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(Error::usage(format!(
            "--port {port}: give a TCP port from 1 to 65535"
        ))),
    }
}

/// How the local model stands.
pub(crate) fn status(home: &Home) -> Result<ModelStatus> {
    let m = model::DEFAULT_MODEL;
    let external = model::external_url().map_err(usage)?;
    let installed = model::installed(home, m);
    let run = if external.is_some() {
        None
    } else {
        model::running(home)
    };
    let url = model::current_url(home, None).map_err(usage)?;
    let (host, port) = model::host_port(&url)
        .ok_or_else(|| Error::internal(format!("{url} has no host and port")))?;
    let running = (external.is_some() || run.is_some()) && model::health(&host, port);
    let next = match (running, &external, installed) {
        (true, _, _) => None,
        (false, Some(u), _) => Some(format!(
            "start the server {u} names (it is set by {}), or unset it",
            model::URL_ENV
        )),
        (false, None, true) => Some("git forum model start".to_string()),
        (false, None, false) => Some(GET_IT_RUNNING.to_string()),
    };
    Ok(ModelStatus {
        schema: ModelStatus::SCHEMA,
        dir: home.dir.display().to_string(),
        model: m.name,
        installed,
        running,
        pid: run.map(|r| r.pid),
        port: Some(port),
        url,
        managed_by: if external.is_some() {
            "external"
        } else {
            "managed"
        },
        log: home.log_file().display().to_string(),
        next,
    })
}

/// Installs `name` (default: the tiny model).
pub(crate) fn install(home: &Home, name: Option<&str>) -> Result<ModelAction> {
    let m: &Model = match name {
        Some(n) => model::model_named(n).map_err(usage)?,
        None => model::DEFAULT_MODEL,
    };
    let changed = model::install(home, m).map_err(unavailable)?;
    Ok(ModelAction {
        schema: ModelAction::SCHEMA,
        action: "install",
        changed,
        status: status(home)?,
    })
}

/// Starts the server (on `port`, default [`model::default_port`]) and waits until it answers.
pub(crate) fn start(home: &Home, port: Option<u16>) -> Result<ModelAction> {
    if let Some(u) = model::external_url().map_err(usage)? {
        return Err(Error::usage(format!(
            "{} is set ({u}): that server is not git forum's to start; unset it to use the managed model",
            model::URL_ENV
        )));
    }
    if !model::installed(home, model::DEFAULT_MODEL) {
        return Err(Error::unavailable(format!(
            "the local model is not installed in {}: run git forum model install first",
            home.dir.display()
        )));
    }
    let port = match port {
        Some(p) => p,
        None => model::default_port().map_err(usage)?,
    };
    let (_, already) = model::start(home, port).map_err(unavailable)?;
    Ok(ModelAction {
        schema: ModelAction::SCHEMA,
        action: "start",
        changed: !already,
        status: status(home)?,
    })
}

/// Stops the server and waits until it has exited.
pub(crate) fn stop(home: &Home) -> Result<ModelAction> {
    let stopped = model::stop(home).map_err(|e| Error::internal(e.to_string()).with_source(e))?;
    Ok(ModelAction {
        schema: ModelAction::SCHEMA,
        action: "stop",
        changed: stopped.is_some(),
        status: status(home)?,
    })
}

/// The base URL runs use.
pub(crate) fn url(home: &Home, port: Option<u16>) -> Result<ModelUrl> {
    Ok(ModelUrl {
        schema: ModelUrl::SCHEMA,
        url: model::current_url(home, port).map_err(usage)?,
    })
}

/// The chat URLs of `rt` that point at the local model (the managed server's port, or
/// `GIT_FORUM_MODEL_URL`'s), with that base URL.
fn local_endpoints(rt: &crate::exec::config::Runtime, base: &str) -> Vec<String> {
    use crate::exec::config::{ExecutorKind, SeatChoice};
    let Some((_, port)) = model::host_port(base) else {
        return Vec::new();
    };
    let mut specs: Vec<&crate::exec::config::ExecutorSpec> =
        rt.default.iter().chain(rt.tiers.values()).collect();
    for seat in [&rt.seats.worker, &rt.seats.orchestrator] {
        if let SeatChoice::Inline(s) = seat {
            specs.push(s);
        }
    }
    let mut out = Vec::new();
    for s in specs {
        if let ExecutorKind::Chat { url, .. } = &s.kind
            && let Ok(u) = url::Url::parse(url)
            && u.port_or_known_default() == Some(port)
            && matches!(u.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"))
            && !out.contains(url)
        {
            out.push(url.clone());
        }
    }
    out
}

/// Before a run on `rt`: when an executor points at the local model and nothing answers
/// there, starts it (when it is installed and git forum manages it) or says the one command
/// that does. Returns what it did, for stderr.
pub(crate) fn ensure_running(rt: &crate::exec::config::Runtime) -> Result<Option<String>> {
    let Ok(home) = Home::from_env() else {
        return Ok(None);
    };
    let external = model::external_url().map_err(usage)?;
    let base = model::current_url(&home, None).map_err(usage)?;
    let urls = local_endpoints(rt, &base);
    let Some(first) = urls.first() else {
        return Ok(None);
    };
    let Some((host, port)) = model::host_port(&base) else {
        return Ok(None);
    };
    if model::health(&host, port) {
        return Ok(None);
    }
    if let Some(u) = external {
        return Err(Error::unavailable(format!(
            "the runtime uses the local model at {first}, and the server {} names ({u}) does not answer: start it, or unset {}",
            model::URL_ENV,
            model::URL_ENV
        )));
    }
    if !model::installed(&home, model::DEFAULT_MODEL) {
        return Err(Error::unavailable(format!(
            "the runtime uses the local model at {first}, which is not running and not installed: run `{GET_IT_RUNNING}`"
        )));
    }
    model::start(&home, port).map_err(|e| {
        Error::unavailable(format!(
            "the runtime uses the local model at {first}, which was not running, and starting it failed: {e}"
        ))
    })?;
    Ok(Some(format!(
        "started the local model at {} (git forum model stop stops it)",
        model::base_url(port)
    )))
}

/// The base URL of the local model a new runtime config points at: the managed model's (or
/// `GIT_FORUM_MODEL_URL`), else the default port's when no model home can be found.
pub(crate) fn local_url() -> Result<String> {
    match Home::from_env() {
        Ok(home) => model::current_url(&home, None).map_err(usage),
        Err(_) => Ok(model::base_url(model::default_port().map_err(usage)?)),
    }
}
