//! The daemon (`git forum serve`, HTTP) and the MCP server (`git forum mcp`, JSON-RPC on stdio),
//! both thin transports over one [`dispatch::Dispatcher`].
//!
//! The dispatcher maps `(method, path, JSON body)` to `(status, JSON)` and is the only place
//! that touches the engine, so the two transports cannot drift: an MCP tool is a name for a
//! dispatcher route, and its result is the HTTP body of that route. Everything the dispatcher
//! does is synchronous (the git store and the control loop are); the HTTP server runs it on
//! tokio's blocking pool, the MCP server on its own thread, one message at a time. The short
//! reads the cached entries answer alone (`/status`, `/checkpoint`, `/ledger/SEQ`, a body read
//! before, a short `/log`) are answered on the server's own workers from bytes kept per tip
//! (`http/fast.rs`, `dispatch/fresh.rs`, which says how a read knows the tip is current).
//!
//! * [`dispatch`]: the routes, request bodies, status codes and error shape (`{"error": "..."}`).
//! * [`http`]: axum on top, with the Host/Origin checks, bearer token, body limit, timeouts,
//!   concurrency limit and graceful drain.
//! * [`token`]: the daemon's credential, in a private file outside the git dir.
//! * [`mcp`]: a hand-written line-delimited JSON-RPC 2.0 server with the tool table.

pub mod api_doc;
pub mod dispatch;
mod executors;
pub(crate) mod heartbeat;
pub(crate) mod http;
pub mod mcp;
pub(crate) mod running;
pub mod token;

mod idem;
mod ops;
mod page;
mod pages;
mod projections;
mod reports;
