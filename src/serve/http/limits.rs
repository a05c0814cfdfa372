//! The limits of the HTTP server and their defaults.

use std::time::Duration;

use super::{DEFAULT_MAX_BODY, DEFAULT_MAX_CONNECTIONS};

/// Limits of the HTTP server.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// Largest request body, in bytes.
    pub(crate) max_body: usize,
    /// How long a connection may go without starting a request while none of its requests
    /// is in the engine (it is closed then: see `conns`), and how long a body may take (408).
    pub(crate) read_timeout: Duration,
    /// How long an ordinary request may take.
    pub timeout: Duration,
    /// How long submit, resume and plan may take (their runs stop on their own seconds budget
    /// before this).
    pub(crate) submit_timeout: Duration,
    /// Requests the engine works on at once.
    pub(crate) concurrency: usize,
    /// Connections open at once; at the cap the one idle longest is closed for a new one
    /// (new ones wait in the listen queue only while every open one has a request in the
    /// engine).
    pub(crate) max_connections: usize,
    /// How long a SIGTERM waits for in-flight requests before the server exits anyway.
    pub(crate) drain: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_body: DEFAULT_MAX_BODY,
            read_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(30),
            submit_timeout: Duration::from_secs(630),
            concurrency: 32,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            drain: Duration::from_secs(30),
        }
    }
}
