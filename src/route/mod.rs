//! The keyword router, the route frame and the communication contract (forum-spec §6, §7).
//!
//! Routing is deterministic and model-free: a request is cut into lowercase `[a-z0-9]+`
//! tokens, every lane scores `hits / keywords`, and one of three rules decides (a confident,
//! separated leader; a raw-hit leader; a top-score hit floor). When none applies the route is
//! escalated: a model-backed [`Classifier`] may settle it later, and the settlement is a
//! separate, witnessed step.
//!
//! The [`RouteFrame`] (`forum.route-frame/v1`) then says how the answer should be shaped:
//! domain, intent, posture, delivery profile, the runtime tier and executor of the chosen lane,
//! the proof and domain lanes, and the request words (signals) that selected the frame. The
//! decisions and labels are Forum's; the sentences are this project's own.
//!
//! Everything here is pure.
//!
//! `router.rs` is the keyword router and the settlement of an escalated route, `classify.rs`
//! the ladder of a one-task run (when to ask the classifier, what to ask, how its answer is
//! read and witnessed), `rules.rs` the table of frame rules with the postures and delivery
//! profiles they name, `frame.rs` the route frame derived from a decision, and `contract.rs`
//! the communication contract.

mod classify;
mod contract;
mod frame;
pub mod gap;
pub mod lanes;
mod router;
mod rules;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod vocab_tests;

use crate::ledger::Value;

pub use classify::{
    CLASSIFIER_OPENING, CLASSIFIER_SYSTEM, MAX_KEPT_ANSWER, Rung, Unplaced, classification_payload,
    classifier_prompt, classifier_schema, first_rung, read_answer, route_payload, unplaced_payload,
};
pub(crate) use contract::{CommunicationContract, build_communication_contract};
pub use frame::{RouteFrame, derive_route_frame, route_request};
pub use router::{
    Candidate, Classification, Classifier, RequestError, RouteDecision, RouteRule, Router,
    SettleError, check_request, tokenize,
};
pub use rules::{AVOID, DeliveryProfile, FALLBACK_FRAME, FRAME_RULES, FrameRule, Posture};

/// Schema name of a route frame payload.
pub(crate) const ROUTE_FRAME_SCHEMA: &str = "forum.route-frame/v1";
/// Schema name of a communication contract.
pub(crate) const CONTRACT_SCHEMA: &str = "forum.communication-contract/v1";

/// An optional string as a payload value (`null` when absent); shared by the frame and the
/// contract.
fn opt_str(v: &Option<String>) -> Value {
    v.as_deref().map_or(Value::Null, Value::str)
}

/// A list of strings as a payload array.
fn str_list(items: &[String]) -> Value {
    Value::Array(items.iter().map(Value::str).collect())
}
