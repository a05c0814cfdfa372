//! What a server runs models with: the executors it was started with, or why it has none.

use std::sync::Arc;

use crate::config::Loaded;
use crate::surface::run::Seats;

/// Why a server started with no executor runs nothing, and what to do.
const NO_EXECUTOR: &str = "no executor is configured for this server: start it with executor flags (--cmd, --chat-url, --api, --runtime-config) or add .forum/runtime.toml to the repository";

/// The executors the server was started with: the merged runtime (for `/runtime`) and the fleet
/// built from it, or why none could be built.
pub(crate) struct Executors {
    pub(crate) loaded: Option<Loaded>,
    pub(crate) seats: Result<Arc<dyn Seats>, NoSeats>,
}

/// Why the server has no executors to run models with (`/submit` answers 503 with it).
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum NoSeats {
    /// It was started with no executor.
    #[error("{NO_EXECUTOR}")]
    NotConfigured,
    /// Its runtime has an issue that would stop every run (the first one).
    #[error("this server cannot run models: {0} (GET /runtime lists every issue)")]
    Issue(crate::exec::config::Issue),
    /// Its executors could not be built.
    #[error("this server cannot run models: {0}")]
    Fleet(#[source] Arc<crate::surface::run::FleetError>),
}
