//! `forum.route-frame/v1`: the shape of the answer a route calls for, derived from the
//! decision, the roster and the request words.

use super::{
    CommunicationContract, DeliveryProfile, FALLBACK_FRAME, FRAME_RULES, Posture,
    ROUTE_FRAME_SCHEMA, RouteDecision, Router, build_communication_contract, opt_str, str_list,
    tokenize,
};
use crate::ledger::Value;
use crate::roster::Roster;

/// `forum.route-frame/v1`: the shape of the answer a route calls for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteFrame {
    /// The decided lane, or `None` when the route escalated.
    pub(crate) agent: Option<String>,
    /// Domain label.
    pub(crate) domain: String,
    /// Intent label.
    pub(crate) intent: String,
    /// Posture.
    pub(crate) posture: Posture,
    /// Delivery profile.
    pub(crate) delivery_profile: DeliveryProfile,
    /// The decided lane's model tier (from the roster), if any.
    pub(crate) model_tier: Option<String>,
    /// The decided lane's executor (from the roster), if any.
    pub(crate) executor: Option<String>,
    /// Proof lane label, if any.
    pub(crate) proof_lane: Option<String>,
    /// Domain lane label, if any.
    pub(crate) domain_lane: Option<String>,
    /// Our one-sentence contract for the frame's domain.
    pub(crate) human_contract: String,
    /// The derived communication contract.
    pub(crate) communication_contract: CommunicationContract,
    /// The request tokens that matched the chosen rule's keywords, sorted.
    pub(crate) signals: Vec<String>,
}

/// Derives the route frame for `text` from a decision and the roster (forum-spec §7).
/// Runtime fields (tier, executor) are joined from the roster only when the route decides.
pub fn derive_route_frame(text: &str, decision: &RouteDecision, roster: &Roster) -> RouteFrame {
    let agent = if decision.needs_escalation {
        None
    } else {
        decision.decided.clone()
    };
    let spec = agent.as_deref().and_then(|a| roster.get(a));
    let tokens = tokenize(text);
    let mut chosen = (&FALLBACK_FRAME, Vec::new());
    for rule in &FRAME_RULES {
        let signals: Vec<String> = tokens
            .iter()
            .filter(|t| rule.keywords.contains(&t.as_str()))
            .cloned()
            .collect();
        let agent_match = agent.as_deref().is_some_and(|a| rule.agents.contains(&a));
        if !signals.is_empty() || agent_match {
            chosen = (rule, signals);
            break;
        }
    }
    let (rule, signals) = chosen;
    let communication_contract = build_communication_contract(
        rule.domain,
        rule.intent,
        rule.posture.as_str(),
        rule.delivery_profile.as_str(),
        rule.proof_lane,
        rule.domain_lane,
        rule.human_contract,
    )
    .expect("frame rules use known profiles");
    RouteFrame {
        agent,
        domain: rule.domain.to_string(),
        intent: rule.intent.to_string(),
        posture: rule.posture,
        delivery_profile: rule.delivery_profile,
        model_tier: spec.map(|s| s.model_tier.as_str().to_string()),
        executor: spec.map(|s| s.executor.clone()),
        proof_lane: rule.proof_lane.map(str::to_string),
        domain_lane: rule.domain_lane.map(str::to_string),
        human_contract: rule.human_contract.to_string(),
        communication_contract,
        signals,
    }
}

impl RouteFrame {
    /// The frame as a `route_frame` entry payload, keys in Forum's order.
    pub fn payload(&self) -> Value {
        Value::object([
            ("schema".to_string(), Value::str(ROUTE_FRAME_SCHEMA)),
            ("agent".to_string(), opt_str(&self.agent)),
            ("domain".to_string(), Value::str(&self.domain)),
            ("intent".to_string(), Value::str(&self.intent)),
            ("posture".to_string(), Value::str(self.posture.as_str())),
            (
                "delivery_profile".to_string(),
                Value::str(self.delivery_profile.as_str()),
            ),
            ("model_tier".to_string(), opt_str(&self.model_tier)),
            ("executor".to_string(), opt_str(&self.executor)),
            ("proof_lane".to_string(), opt_str(&self.proof_lane)),
            ("domain_lane".to_string(), opt_str(&self.domain_lane)),
            (
                "human_contract".to_string(),
                Value::str(&self.human_contract),
            ),
            (
                "communication_contract".to_string(),
                self.communication_contract.payload(),
            ),
            ("signals".to_string(), str_list(&self.signals)),
        ])
    }
}

/// Routes `text` with the default [`Router`] and derives its frame.
pub fn route_request(text: &str, roster: &Roster) -> (RouteDecision, RouteFrame) {
    let decision = Router::default().route(text, roster.agents());
    let frame = derive_route_frame(text, &decision, roster);
    (decision, frame)
}
