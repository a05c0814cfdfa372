//! Executors: what calls a model, and the policy around it. This part is pure: the endpoint
//! policy ([`endpoint`]) and the runtime config with its tier and seat resolution
//! ([`config`]). The HTTP client, the executors and the resolver that enforces the endpoint
//! policy at connection time build on these.

pub mod config;
pub mod endpoint;
