//! The one integration-test binary (one link step on two cores).

mod common;
mod conformance;
mod ledger;
mod plan;
mod proofs;
mod redact;
mod route;
mod runtime;
mod sign;
mod sync;
