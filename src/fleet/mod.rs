//! Dispatch of a `--work` run's tasks to workers on other machines through NATS JetStream: the
//! messages and names (`protocol`, pure), the connection (`nats`), the writer's side that the
//! run engine hands tasks to (`writer`), and the worker loop (`worker`).
//!
//! The submitting process stays the only ledger writer: workers send results and push commits
//! under their own results prefix on the git remote; the writer checks both before anything of
//! them is witnessed or merged.

pub mod nats;
pub mod protocol;
pub(crate) mod worker;
pub(crate) mod writer;
