//! The frame rules (forum-spec §7): which request words select a domain, an intent, a posture
//! and a delivery profile, as a table, with the fallback when no rule matches.

use std::fmt;

/// How an answer should be held: the stance of the writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Posture {
    /// Designs and builds.
    Architect,
    /// Finds out and reports provenance.
    Investigator,
    /// Judges pass or fail.
    Reviewer,
    /// Explains.
    Teacher,
    /// Coordinates.
    Operator,
}

impl Posture {
    /// The posture's label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Posture::Architect => "architect",
            Posture::Investigator => "investigator",
            Posture::Reviewer => "reviewer",
            Posture::Teacher => "teacher",
            Posture::Operator => "operator",
        }
    }

    /// Parses a label; unknown labels give `None` (the contract then uses the operator's).
    pub fn parse(s: &str) -> Option<Posture> {
        [
            Posture::Architect,
            Posture::Investigator,
            Posture::Reviewer,
            Posture::Teacher,
            Posture::Operator,
        ]
        .into_iter()
        .find(|p| p.as_str() == s)
    }

    /// Our one-sentence opening instruction for this posture.
    pub(crate) fn lead(self) -> &'static str {
        match self {
            Posture::Architect => "Open with the change or the decision itself.",
            Posture::Investigator => "Open with what was found and how sure you are of it.",
            Posture::Reviewer => "Open with the verdict, then the check that produced it.",
            Posture::Teacher => "Open with the idea in one plain sentence the reader can hold.",
            Posture::Operator => "Open with where things stand and what comes next.",
        }
    }

    /// The moves an answer in this posture must make (labels, as Forum lists them).
    pub(crate) fn required_moves(self) -> [&'static str; 2] {
        match self {
            Posture::Architect => [
                "name the mechanism",
                "separate verified output from next work",
            ],
            Posture::Investigator => [
                "preserve provenance",
                "separate observations from inference",
            ],
            Posture::Reviewer => ["state pass or fail", "name remaining risk"],
            Posture::Teacher => [
                "give one clear example",
                "make the check for understanding explicit",
            ],
            Posture::Operator => ["name the owner", "state the next coordinated action"],
        }
    }
}

/// The delivery profile an answer is written (and later checked) against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryProfile {
    /// Status and next steps for whoever runs the work.
    Operator,
    /// Changes, interfaces and verification.
    Engineer,
    /// Observations, sources and inference.
    Researcher,
    /// Decisions, trade-offs and owners.
    Executive,
}

impl DeliveryProfile {
    /// Every profile.
    pub(crate) const ALL: [DeliveryProfile; 4] = [
        DeliveryProfile::Operator,
        DeliveryProfile::Engineer,
        DeliveryProfile::Researcher,
        DeliveryProfile::Executive,
    ];

    /// The profile's label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DeliveryProfile::Operator => "operator",
            DeliveryProfile::Engineer => "engineer",
            DeliveryProfile::Researcher => "researcher",
            DeliveryProfile::Executive => "executive",
        }
    }

    /// Parses a profile name, ignoring case and surrounding whitespace.
    pub fn parse(s: &str) -> Option<DeliveryProfile> {
        let s = s.trim().to_lowercase();
        DeliveryProfile::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// The sections an answer in this profile is organised into (labels, as Forum lists them).
    pub(crate) fn structure(self) -> &'static [&'static str] {
        match self {
            DeliveryProfile::Engineer => {
                &["change", "interface", "verification", "risk", "next step"]
            }
            DeliveryProfile::Researcher => &[
                "observation",
                "source",
                "inference",
                "unknowns",
                "next check",
            ],
            DeliveryProfile::Executive => &["decision", "tradeoff", "owner", "risk", "next action"],
            DeliveryProfile::Operator => &["status", "route", "uncertainty", "next step"],
        }
    }

    /// Our instructions on what evidence an answer in this profile must carry.
    pub(crate) fn evidence(self) -> &'static [&'static str] {
        match self {
            DeliveryProfile::Engineer => {
                &["back each claim with the file, command, test or ledger entry that shows it"]
            }
            DeliveryProfile::Researcher => &[
                "say where each observation comes from",
                "mark which statements are your own inference",
            ],
            DeliveryProfile::Executive => {
                &["tie the recommendation to a measured result or a named risk"]
            }
            DeliveryProfile::Operator => {
                &["point to the run state or ledger entry behind each status claim"]
            }
        }
    }
}

impl fmt::Display for DeliveryProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What every answer avoids (labels, as Forum lists them).
pub const AVOID: [&str; 4] = [
    "model preambles",
    "unsupported superlatives",
    "vague optimism",
    "performative hedging",
];

/// One row of the frame table (forum-spec §7.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRule {
    /// Domain label.
    pub(crate) domain: &'static str,
    /// Intent label.
    pub(crate) intent: &'static str,
    /// Posture.
    pub(crate) posture: Posture,
    /// Delivery profile.
    pub(crate) delivery_profile: DeliveryProfile,
    /// Proof lane label, if any.
    pub(crate) proof_lane: Option<&'static str>,
    /// Domain lane label, if any.
    pub(crate) domain_lane: Option<&'static str>,
    /// Request words that select this frame.
    pub(crate) keywords: &'static [&'static str],
    /// Lanes whose decisions select this frame.
    pub(crate) agents: &'static [&'static str],
    /// Our one-sentence contract for answers in this domain.
    pub(crate) human_contract: &'static str,
}

/// The six frame rules in the order they are tried (forum-spec §7.3).
pub const FRAME_RULES: [FrameRule; 6] = [
    FrameRule {
        domain: "model-foundry",
        intent: "validate",
        posture: Posture::Architect,
        delivery_profile: DeliveryProfile::Engineer,
        proof_lane: Some("validate"),
        domain_lane: Some("model-foundry"),
        keywords: &[
            "model",
            "models",
            "daemon",
            "eval",
            "evals",
            "promotion",
            "foundry",
            "gated",
            "gate",
            "self",
            "improving",
        ],
        agents: &["model-foundry"],
        human_contract: "Treat this as model and evaluation work: say what is measured, which gate a \
             change has to pass, and what evidence would justify promoting it.",
    },
    FrameRule {
        domain: "evidence",
        intent: "investigate",
        posture: Posture::Investigator,
        delivery_profile: DeliveryProfile::Researcher,
        proof_lane: Some("observe"),
        domain_lane: Some("source-federation"),
        keywords: &[
            "browser",
            "capture",
            "evidence",
            "source",
            "sources",
            "provenance",
            "screenshot",
            "screenshots",
            "dom",
            "crawl",
            "scrape",
            "page",
        ],
        agents: &["web-intel", "deep-research"],
        human_contract: "Treat this as an inquiry: report what was seen and where it came from, keep \
             inference apart from observation, and list what is still unknown.",
    },
    FrameRule {
        domain: "validation",
        intent: "validate",
        posture: Posture::Reviewer,
        delivery_profile: DeliveryProfile::Engineer,
        proof_lane: Some("verify"),
        domain_lane: Some("formal-proof"),
        keywords: &[
            "review",
            "audit",
            "verify",
            "verification",
            "validate",
            "test",
            "tests",
            "quality",
            "regression",
            "proof",
        ],
        agents: &["code-review", "ci-cd"],
        human_contract: "Treat this as a check: give a plain pass or fail, the evidence behind it, \
             and the risk that is still open.",
    },
    FrameRule {
        domain: "teaching",
        intent: "synthesize",
        posture: Posture::Teacher,
        delivery_profile: DeliveryProfile::Researcher,
        proof_lane: Some("synthesize"),
        domain_lane: Some("learning-forge"),
        keywords: &[
            "teach", "explain", "learn", "learning", "lesson", "example", "course", "tutorial",
        ],
        agents: &["teaching"],
        human_contract: "Treat this as teaching: explain the idea plainly, work one concrete example, \
             and end with a way for the reader to confirm they have it.",
    },
    FrameRule {
        domain: "operator-platform",
        intent: "coordinate",
        posture: Posture::Operator,
        delivery_profile: DeliveryProfile::Executive,
        proof_lane: Some("synthesize"),
        domain_lane: Some("frontier-foundry"),
        keywords: &[
            "telos",
            "platform",
            "orchestration",
            "flagship",
            "operator",
            "workflow",
            "forum",
            "index",
            "harness",
            "agents",
        ],
        agents: &["project-telos", "function-routing"],
        human_contract: "Treat this as coordination: say where the work stands, who owns each next \
             step, and the one action that should happen next.",
    },
    FrameRule {
        domain: "implementation",
        intent: "execute",
        posture: Posture::Architect,
        delivery_profile: DeliveryProfile::Engineer,
        proof_lane: Some("execute"),
        domain_lane: None,
        keywords: &[
            "build",
            "implement",
            "ship",
            "api",
            "database",
            "server",
            "endpoint",
            "code",
            "fix",
            "service",
        ],
        agents: &[
            "backend",
            "frontend",
            "python-apps",
            "sdk-platform",
            "data-pipeline",
        ],
        human_contract: "Treat this as engineering work: name the change and the interfaces it \
             touches, how it was or will be verified, and the next concrete step.",
    },
];

/// The frame used when no rule matches (forum-spec §7.3, last row).
pub const FALLBACK_FRAME: FrameRule = FrameRule {
    domain: "general",
    intent: "coordinate",
    posture: Posture::Operator,
    delivery_profile: DeliveryProfile::Operator,
    proof_lane: None,
    domain_lane: None,
    keywords: &[],
    agents: &[],
    human_contract: "Answer directly: say what was decided, what is still uncertain, and what \
         happens next.",
};
