//! `forum.communication-contract/v1`: how the final answer of a run is to be written, built
//! from a route frame's labels and its delivery profile.

use super::{AVOID, CONTRACT_SCHEMA, DeliveryProfile, Posture, opt_str, str_list};
use crate::ledger::Value;

/// `forum.communication-contract/v1`: how the final answer is to be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CommunicationContract {
    /// Domain label (`general` when empty).
    pub(crate) domain: String,
    /// Intent label (`coordinate` when empty).
    pub(crate) intent: String,
    /// Posture label (`operator` when empty).
    pub(crate) posture: String,
    /// Delivery profile.
    pub(crate) profile: DeliveryProfile,
    /// Proof lane label, if any.
    pub(crate) proof_lane: Option<String>,
    /// Domain lane label, if any.
    pub(crate) domain_lane: Option<String>,
    /// Opening instruction, by posture.
    pub(crate) lead: String,
    /// Section labels, by profile.
    pub(crate) structure: Vec<String>,
    /// Evidence instructions, by profile.
    pub(crate) evidence: Vec<String>,
    /// What to avoid.
    pub(crate) avoid: Vec<String>,
    /// Moves the answer must make, by posture.
    pub(crate) required_moves: Vec<String>,
    /// The frame's one-sentence contract.
    pub(crate) human_contract: String,
}

/// Why a contract cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown delivery profile {0:?}; expected one of: operator, engineer, researcher, executive"
)]
pub(crate) struct UnknownProfile(pub(crate) String);

/// Builds the communication contract from a frame's labels (forum-spec §7.5). `profile` is a
/// profile name (normalised; unknown names are an error); an unknown posture takes the
/// operator's lead and moves.
#[allow(clippy::too_many_arguments)]
pub(crate) fn build_communication_contract(
    domain: &str,
    intent: &str,
    posture: &str,
    profile: &str,
    proof_lane: Option<&str>,
    domain_lane: Option<&str>,
    human_contract: &str,
) -> Result<CommunicationContract, UnknownProfile> {
    let profile =
        DeliveryProfile::parse(profile).ok_or_else(|| UnknownProfile(profile.to_string()))?;
    let or = |s: &str, d: &str| {
        if s.is_empty() {
            d.to_string()
        } else {
            s.to_string()
        }
    };
    let posture = or(posture, "operator");
    let p = Posture::parse(&posture).unwrap_or(Posture::Operator);
    let strings = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    Ok(CommunicationContract {
        domain: or(domain, "general"),
        intent: or(intent, "coordinate"),
        posture,
        profile,
        proof_lane: proof_lane.map(str::to_string),
        domain_lane: domain_lane.map(str::to_string),
        lead: p.lead().to_string(),
        structure: strings(profile.structure()),
        evidence: strings(profile.evidence()),
        avoid: strings(&AVOID),
        required_moves: strings(&p.required_moves()),
        human_contract: human_contract.to_string(),
    })
}

impl CommunicationContract {
    /// The contract as a payload, keys in Forum's order.
    pub(crate) fn payload(&self) -> Value {
        Value::object([
            ("schema".to_string(), Value::str(CONTRACT_SCHEMA)),
            ("domain".to_string(), Value::str(&self.domain)),
            ("intent".to_string(), Value::str(&self.intent)),
            ("posture".to_string(), Value::str(&self.posture)),
            ("profile".to_string(), Value::str(self.profile.as_str())),
            ("proof_lane".to_string(), opt_str(&self.proof_lane)),
            ("domain_lane".to_string(), opt_str(&self.domain_lane)),
            ("lead".to_string(), Value::str(&self.lead)),
            ("structure".to_string(), str_list(&self.structure)),
            ("evidence".to_string(), str_list(&self.evidence)),
            ("avoid".to_string(), str_list(&self.avoid)),
            ("required_moves".to_string(), str_list(&self.required_moves)),
            (
                "human_contract".to_string(),
                Value::str(&self.human_contract),
            ),
        ])
    }

    /// The contract as prompt text: nine lines (forum-spec §7.6).
    pub(crate) fn prompt_text(&self) -> String {
        [
            "Communication contract:".to_string(),
            format!("Posture: {} / {}", self.posture, self.profile),
            format!("Domain: {} / {}", self.domain, self.intent),
            format!("Lead: {}", self.lead),
            format!("Structure: {}", self.structure.join(", ")),
            format!("Evidence: {}", self.evidence.join("; ")),
            format!("Avoid: {}", self.avoid.join(", ")),
            format!("Required moves: {}", self.required_moves.join(", ")),
            format!("Route contract: {}", self.human_contract),
        ]
        .join("\n")
    }
}
