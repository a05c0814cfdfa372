//! The one integration-test binary (one link step on two cores).

mod bodies;
mod bounds;
mod common;
mod conformance;
mod daemon;
mod edges;
mod http_exec;
mod inputs;
mod ledger;
mod llm;
mod plan;
mod proofs;
mod purity;
mod quality;
mod quality_loop;
mod redact;
mod reliability;
mod report;
mod route;
mod runs;
mod runtime;
mod sign;
mod snapshots;
mod storage;
mod submit;
mod sync;
