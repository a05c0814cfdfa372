//! Executors: what calls a model, and the policy around it. Pure so far: the endpoint policy
//! ([`endpoint`]) and the runtime config with its tier and seat resolution ([`config`]). At the
//! edge: [`command`], the process handling of the command executor (process group, deadline,
//! capped output). The HTTP client, the model executors and the resolver that enforces the
//! endpoint policy at connection time build on these.

pub mod command;
pub mod config;
pub mod endpoint;
