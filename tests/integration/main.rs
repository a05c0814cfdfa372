//! The one integration-test binary (one link step on two cores).

mod common;
mod conformance;
mod daemon;
mod edges;
mod http_exec;
mod ledger;
mod llm;
mod plan;
mod proofs;
mod quality;
mod quality_loop;
mod redact;
mod report;
mod route;
mod runtime;
mod sign;
mod submit;
mod sync;
