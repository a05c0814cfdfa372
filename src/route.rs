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

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::fmt;

use crate::ledger::Value;
use crate::roster::{AgentSpec, Roster};

/// Schema name of a route frame payload.
pub const ROUTE_FRAME_SCHEMA: &str = "forum.route-frame/v1";
/// Schema name of a communication contract.
pub const CONTRACT_SCHEMA: &str = "forum.communication-contract/v1";

/// The set of lowercase `[a-z0-9]+` runs in `text` after full Unicode lowercasing
/// (forum-spec §6.1). Every other code point separates words: `café` gives `caf`,
/// `api_server` gives `api` and `server`, `ci-cd` gives `ci` and `cd`.
pub fn tokenize(text: &str) -> BTreeSet<String> {
    let lower = text.to_lowercase();
    let mut out = BTreeSet::new();
    let mut cur = String::new();
    for c in lower.chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            cur.push(c);
        } else if !cur.is_empty() {
            out.insert(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.insert(cur);
    }
    out
}

/// Why a request cannot be routed by the command line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// Nothing but whitespace.
    #[error("the request is empty: describe the work to route")]
    Empty,
    /// No letter or digit at all.
    #[error("the request has no words, only punctuation or symbols: describe the work to route")]
    NoWords,
}

/// Refuses a request that is empty or holds no letter or digit in any script. (The router
/// itself accepts such text and escalates it, as Forum does, and so do `route` and
/// `POST /route`; this check is for callers that write a request down or run it.)
pub fn check_request(text: &str) -> Result<(), RequestError> {
    if text.trim().is_empty() {
        Err(RequestError::Empty)
    } else if !text.chars().any(char::is_alphanumeric) {
        Err(RequestError::NoWords)
    } else {
        Ok(())
    }
}

/// One lane's score for a request.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Lane name.
    pub agent: String,
    /// `hits / len(keywords)`.
    pub score: f64,
    /// Number of the lane's keywords found among the request tokens.
    pub hits: usize,
}

/// Which rule produced a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteRule {
    /// Score at least the threshold and ahead of the runner-up by the margin.
    Confident,
    /// Enough raw keyword hits, far enough ahead in hits.
    HitLeader,
    /// The best-scoring lane has enough hits and leads the second-best by enough hits.
    TopScoreHits,
    /// Nothing separated the lanes.
    Escalated,
    /// An escalated route settled by a [`Classifier`].
    Classified,
}

/// The router's answer for one request.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteDecision {
    /// Every lane with its score, best first (score descending, then name ascending; after
    /// a raw-hit decision the leader comes first).
    pub candidates: Vec<Candidate>,
    /// The chosen lane, or `None` when the route escalates.
    pub decided: Option<String>,
    /// The winning score (at least 0.5 for hit rules), or the top-minus-second margin when
    /// escalated.
    pub confidence: f64,
    /// True when keywords could not separate the lanes.
    pub needs_escalation: bool,
    /// The rule that decided.
    pub rule: RouteRule,
}

/// The lexical router and its parameters (forum-spec §6).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Router {
    /// Minimum normalised score for a confident decision (0.5).
    pub threshold: f64,
    /// Minimum lead of the top score over the second (0.15).
    pub margin: f64,
    /// Minimum raw hits for a hit-based decision (3).
    pub decisive_hits: usize,
    /// Minimum lead in raw hits for a hit-based decision (2).
    pub hit_margin: usize,
}

impl Default for Router {
    fn default() -> Router {
        Router {
            threshold: 0.5,
            margin: 0.15,
            decisive_hits: 3,
            hit_margin: 2,
        }
    }
}

fn by_score_then_name(a: &Candidate, b: &Candidate) -> Ordering {
    b.score
        .total_cmp(&a.score)
        .then_with(|| a.agent.cmp(&b.agent))
}

impl Router {
    /// Routes `text` against `agents`. The result never depends on the order the agents are
    /// listed in, provided names are unique.
    pub fn route(&self, text: &str, agents: &[AgentSpec]) -> RouteDecision {
        let tokens = tokenize(text);
        let mut candidates: Vec<Candidate> = agents
            .iter()
            .map(|spec| {
                let hits = spec
                    .keywords
                    .iter()
                    .filter(|kw| tokens.contains(&kw.to_lowercase()))
                    .count();
                let score = if spec.keywords.is_empty() {
                    0.0
                } else {
                    hits as f64 / spec.keywords.len() as f64
                };
                Candidate {
                    agent: spec.name.clone(),
                    score,
                    hits,
                }
            })
            .collect();
        candidates.sort_by(by_score_then_name);

        let top = candidates.first().map_or(0.0, |c| c.score);
        let second = candidates.get(1).map_or(0.0, |c| c.score);
        let top_hits = candidates.first().map_or(0, |c| c.hits);
        let second_hits = candidates.get(1).map_or(0, |c| c.hits);

        // Rule 1: confident and separated.
        if !candidates.is_empty() && top >= self.threshold && top - second >= self.margin {
            return RouteDecision {
                decided: Some(candidates[0].agent.clone()),
                confidence: top,
                needs_escalation: false,
                rule: RouteRule::Confident,
                candidates,
            };
        }

        // Rule 2: raw-hit leader, ordered by (hits desc, name asc).
        let mut by_hits: Vec<&Candidate> = candidates.iter().collect();
        by_hits.sort_by(|a, b| b.hits.cmp(&a.hits).then_with(|| a.agent.cmp(&b.agent)));
        if let Some(leader) = by_hits.first() {
            let runner_up = by_hits.get(1).map_or(0, |c| c.hits);
            if leader.hits >= self.decisive_hits && leader.hits - runner_up >= self.hit_margin {
                let leader_name = leader.agent.clone();
                let confidence = leader.score.max(self.threshold);
                let pos = candidates
                    .iter()
                    .position(|c| c.agent == leader_name)
                    .expect("the leader is a candidate");
                let lead = candidates.remove(pos);
                candidates.insert(0, lead);
                return RouteDecision {
                    decided: Some(leader_name),
                    confidence,
                    needs_escalation: false,
                    rule: RouteRule::HitLeader,
                    candidates,
                };
            }
        }

        // Rule 3: the best-scoring lane has a hit floor and a hit lead.
        if top_hits >= self.decisive_hits && top_hits - second_hits.min(top_hits) >= self.hit_margin
        {
            return RouteDecision {
                decided: Some(candidates[0].agent.clone()),
                confidence: top.max(self.threshold),
                needs_escalation: false,
                rule: RouteRule::TopScoreHits,
                candidates,
            };
        }

        RouteDecision {
            decided: None,
            confidence: top - second,
            needs_escalation: true,
            rule: RouteRule::Escalated,
            candidates,
        }
    }
}

/// A model's answer for an escalated route.
#[derive(Debug, Clone, PartialEq)]
pub struct Classification {
    /// The lane the model chose.
    pub agent: String,
    /// The model's confidence in `[0, 1]`.
    pub confidence: f64,
    /// Why, in the model's words.
    pub reason: String,
}

impl Classification {
    /// The payload of a `classification` ledger entry: `{task, agent, confidence, reason}`.
    pub fn payload(&self, task: &str) -> Value {
        Value::object([
            ("task".to_string(), Value::str(task)),
            ("agent".to_string(), Value::str(&self.agent)),
            ("confidence".to_string(), Value::Float(self.confidence)),
            ("reason".to_string(), Value::str(&self.reason)),
        ])
    }
}

/// The seam for settling escalated routes with a model. The control loop supplies an
/// implementation backed by an executor; the router never calls one itself.
pub trait Classifier {
    /// Chooses a lane for `text`, given the escalated decision and the roster.
    fn classify(
        &self,
        text: &str,
        roster: &Roster,
        decision: &RouteDecision,
    ) -> Result<Classification, String>;
}

/// Why a classification cannot settle a route.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettleError {
    /// The route was already decided by keywords.
    #[error("the route is already decided ({0}); only escalated routes are settled")]
    AlreadyDecided(String),
    /// The model named a lane the roster does not have.
    #[error("the classifier chose {0:?}, which is not a lane in the roster")]
    UnknownAgent(String),
    /// The confidence is not a number in `[0, 1]`.
    #[error("the classifier's confidence {0} is not a number between 0 and 1")]
    BadConfidence(f64),
}

impl RouteDecision {
    /// Settles an escalated route with a classifier's answer: the decision names the chosen
    /// lane with the classifier's confidence; candidates keep their keyword scores.
    pub fn settle(
        &self,
        classification: &Classification,
        roster: &Roster,
    ) -> Result<RouteDecision, SettleError> {
        if let (false, Some(d)) = (self.needs_escalation, &self.decided) {
            return Err(SettleError::AlreadyDecided(d.clone()));
        }
        if roster.get(&classification.agent).is_none() {
            return Err(SettleError::UnknownAgent(classification.agent.clone()));
        }
        let c = classification.confidence;
        if !(0.0..=1.0).contains(&c) {
            return Err(SettleError::BadConfidence(c));
        }
        Ok(RouteDecision {
            candidates: self.candidates.clone(),
            decided: Some(classification.agent.clone()),
            confidence: c,
            needs_escalation: false,
            rule: RouteRule::Classified,
        })
    }

    /// The JSON shape `git forum route` prints: `{"decided", "confidence",
    /// "needs_escalation", "candidates": [{"agent", "score"}], "frame"}`.
    pub fn to_value(&self, frame: &RouteFrame) -> Value {
        Value::object([
            (
                "decided".to_string(),
                self.decided.as_deref().map_or(Value::Null, Value::str),
            ),
            ("confidence".to_string(), Value::Float(self.confidence)),
            (
                "needs_escalation".to_string(),
                Value::Bool(self.needs_escalation),
            ),
            (
                "candidates".to_string(),
                Value::Array(
                    self.candidates
                        .iter()
                        .map(|c| {
                            Value::object([
                                ("agent".to_string(), Value::str(&c.agent)),
                                ("score".to_string(), Value::Float(c.score)),
                            ])
                        })
                        .collect(),
                ),
            ),
            ("frame".to_string(), frame.payload()),
        ])
    }
}

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
    pub fn as_str(self) -> &'static str {
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
    pub fn lead(self) -> &'static str {
        match self {
            Posture::Architect => "Open with the change or the decision itself.",
            Posture::Investigator => "Open with what was found and how sure you are of it.",
            Posture::Reviewer => "Open with the verdict, then the check that produced it.",
            Posture::Teacher => "Open with the idea in one plain sentence the reader can hold.",
            Posture::Operator => "Open with where things stand and what comes next.",
        }
    }

    /// The moves an answer in this posture must make (labels, as Forum lists them).
    pub fn required_moves(self) -> [&'static str; 2] {
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
    pub const ALL: [DeliveryProfile; 4] = [
        DeliveryProfile::Operator,
        DeliveryProfile::Engineer,
        DeliveryProfile::Researcher,
        DeliveryProfile::Executive,
    ];

    /// The profile's label.
    pub fn as_str(self) -> &'static str {
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
    pub fn structure(self) -> &'static [&'static str] {
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
    pub fn evidence(self) -> &'static [&'static str] {
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
    pub domain: &'static str,
    /// Intent label.
    pub intent: &'static str,
    /// Posture.
    pub posture: Posture,
    /// Delivery profile.
    pub delivery_profile: DeliveryProfile,
    /// Proof lane label, if any.
    pub proof_lane: Option<&'static str>,
    /// Domain lane label, if any.
    pub domain_lane: Option<&'static str>,
    /// Request words that select this frame.
    pub keywords: &'static [&'static str],
    /// Lanes whose decisions select this frame.
    pub agents: &'static [&'static str],
    /// Our one-sentence contract for answers in this domain.
    pub human_contract: &'static str,
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

/// `forum.communication-contract/v1`: how the final answer is to be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommunicationContract {
    /// Domain label (`general` when empty).
    pub domain: String,
    /// Intent label (`coordinate` when empty).
    pub intent: String,
    /// Posture label (`operator` when empty).
    pub posture: String,
    /// Delivery profile.
    pub profile: DeliveryProfile,
    /// Proof lane label, if any.
    pub proof_lane: Option<String>,
    /// Domain lane label, if any.
    pub domain_lane: Option<String>,
    /// Opening instruction, by posture.
    pub lead: String,
    /// Section labels, by profile.
    pub structure: Vec<String>,
    /// Evidence instructions, by profile.
    pub evidence: Vec<String>,
    /// What to avoid.
    pub avoid: Vec<String>,
    /// Moves the answer must make, by posture.
    pub required_moves: Vec<String>,
    /// The frame's one-sentence contract.
    pub human_contract: String,
}

/// Why a contract cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown delivery profile {0:?}; expected one of: operator, engineer, researcher, executive"
)]
pub struct UnknownProfile(pub String);

/// Builds the communication contract from a frame's labels (forum-spec §7.5). `profile` is a
/// profile name (normalised; unknown names are an error); an unknown posture takes the
/// operator's lead and moves.
#[allow(clippy::too_many_arguments)]
pub fn build_communication_contract(
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

fn opt_str(v: &Option<String>) -> Value {
    v.as_deref().map_or(Value::Null, Value::str)
}

fn str_list(items: &[String]) -> Value {
    Value::Array(items.iter().map(Value::str).collect())
}

impl CommunicationContract {
    /// The contract as a payload, keys in Forum's order.
    pub fn payload(&self) -> Value {
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
    pub fn prompt_text(&self) -> String {
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

/// `forum.route-frame/v1`: the shape of the answer a route calls for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteFrame {
    /// The decided lane, or `None` when the route escalated.
    pub agent: Option<String>,
    /// Domain label.
    pub domain: String,
    /// Intent label.
    pub intent: String,
    /// Posture.
    pub posture: Posture,
    /// Delivery profile.
    pub delivery_profile: DeliveryProfile,
    /// The decided lane's model tier (from the roster), if any.
    pub model_tier: Option<String>,
    /// The decided lane's executor (from the roster), if any.
    pub executor: Option<String>,
    /// Proof lane label, if any.
    pub proof_lane: Option<String>,
    /// Domain lane label, if any.
    pub domain_lane: Option<String>,
    /// Our one-sentence contract for the frame's domain.
    pub human_contract: String,
    /// The derived communication contract.
    pub communication_contract: CommunicationContract,
    /// The request tokens that matched the chosen rule's keywords, sorted.
    pub signals: Vec<String>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roster::Tier;

    fn lane(name: &str, kws: &[&str]) -> AgentSpec {
        AgentSpec {
            name: name.into(),
            category: "engineering".into(),
            domain: String::new(),
            keywords: kws.iter().map(|s| s.to_string()).collect(),
            model_tier: Tier::Capable,
            executor: "cli".into(),
            max_turns: 10,
        }
    }

    fn route(text: &str, agents: &[AgentSpec]) -> RouteDecision {
        Router::default().route(text, agents)
    }

    fn scores(d: &RouteDecision) -> Vec<(&str, f64)> {
        d.candidates
            .iter()
            .map(|c| (c.agent.as_str(), c.score))
            .collect()
    }

    #[test]
    fn tokenizer_rules() {
        let t = |s: &str| tokenize(s).into_iter().collect::<Vec<_>>();
        assert_eq!(t("café au lait"), ["au", "caf", "lait"]);
        assert_eq!(t("api_server"), ["api", "server"]);
        assert_eq!(t("ci-cd"), ["cd", "ci"]);
        assert_eq!(t("BUILD the Server"), ["build", "server", "the"]);
        assert_eq!(t("x2 x2 x2"), ["x2"]);
        assert_eq!(t("日本語 naïve"), ["na", "ve"]);
        assert!(t("!!! ... ???").is_empty());
        // The Kelvin sign lowercases to an ASCII k; a dotted capital I to i + combining dot.
        assert_eq!(t("\u{212A}ernel"), ["kernel"]);
        assert_eq!(t("\u{130}ndex"), ["i", "ndex"]);
    }

    #[test]
    fn score_is_hits_over_keywords_with_repeats() {
        let lanes = [lane("a", &["x", "x", "y", "z"]), lane("b", &["q"])];
        let d = route("x x x", &lanes);
        // A keyword listed twice counts twice; a word repeated in the request counts once.
        assert_eq!(scores(&d), [("a", 0.5), ("b", 0.0)]);
        assert_eq!(d.decided.as_deref(), Some("a"));
        assert_eq!(d.rule, RouteRule::Confident);
        assert_eq!(d.confidence, 0.5);
    }

    #[test]
    fn keywords_are_lowercased_before_matching() {
        let lanes = [lane("a", &["API"]), lane("b", &["q", "r"])];
        let d = route("the api", &lanes);
        assert_eq!(d.decided.as_deref(), Some("a"));
        assert_eq!(d.confidence, 1.0);
    }

    #[test]
    fn snake_case_and_unicode_requests() {
        let lanes = [
            lane("net", &["api", "server", "endpoint"]),
            lane("ui", &["css", "caf"]),
        ];
        let d = route("api_server — endpoint", &lanes);
        assert_eq!(d.decided.as_deref(), Some("net"));
        assert_eq!(d.confidence, 1.0);
        // "café" yields the token "caf", which the second lane lists.
        let d = route("café ☕ css", &lanes);
        assert_eq!(d.decided.as_deref(), Some("ui"));
    }

    #[test]
    fn ties_break_by_name_not_roster_order() {
        let a = [lane("zeta", &["x"]), lane("alpha", &["x"])];
        let b = [lane("alpha", &["x"]), lane("zeta", &["x"])];
        for lanes in [&a[..], &b[..]] {
            let d = route("x", lanes);
            assert_eq!(scores(&d), [("alpha", 1.0), ("zeta", 1.0)]);
            assert!(d.needs_escalation);
            assert_eq!(d.confidence, 0.0);
        }
    }

    fn numbered(prefix: &str, n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("{prefix}{i}")).collect()
    }

    fn lane_n(name: &str, prefix: &str, n: usize) -> AgentSpec {
        let kws = numbered(prefix, n);
        lane(name, &kws.iter().map(String::as_str).collect::<Vec<_>>())
    }

    #[test]
    fn escalation_margin_uses_double_arithmetic() {
        // 0.5 - 0.35 is 0.15000000000000002 in doubles: at least the margin, so it decides.
        let lanes = [lane_n("a", "a", 2), lane_n("b", "b", 20)];
        let text = format!("a1 {}", numbered("b", 7).join(" "));
        let d = route(&text, &lanes);
        assert_eq!(scores(&d), [("a", 0.5), ("b", 0.35)]);
        assert_eq!(d.rule, RouteRule::Confident);
        assert_eq!(d.decided.as_deref(), Some("a"));
        // 0.6 - 0.45 is 0.14999999999999997: short of the margin. Both lanes have 9 hits, so
        // neither hit rule applies and the route escalates with the margin as confidence.
        let lanes = [lane_n("a", "a", 15), lane_n("b", "b", 20)];
        let text = format!(
            "{} {}",
            numbered("a", 9).join(" "),
            numbered("b", 9).join(" ")
        );
        let d = route(&text, &lanes);
        assert_eq!(scores(&d), [("a", 0.6), ("b", 0.45)]);
        assert!(d.needs_escalation);
        assert_eq!(d.decided, None);
        assert_eq!(d.confidence, 0.14999999999999997);
        // Just below the threshold with a wide lead: 2 of 5 against nothing escalates.
        let lanes = [lane_n("a", "a", 5), lane_n("b", "b", 3)];
        let d = route("a1 a2", &lanes);
        assert!(d.needs_escalation);
        assert_eq!(d.confidence, 0.4);
    }

    #[test]
    fn threshold_is_inclusive() {
        let lanes = [
            lane("a", &["x", "y"]),
            lane("b", &["z", "w", "v", "u", "t", "s", "r"]),
        ];
        let d = route("x z", &lanes);
        // 0.5 vs 1/7: decides at exactly the threshold.
        assert_eq!(d.decided.as_deref(), Some("a"));
        assert_eq!(d.confidence, 0.5);
    }

    #[test]
    fn raw_hit_leader_wins_with_a_low_score() {
        let many: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
        let many_refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let lanes = [
            lane("big", &many_refs),
            lane("small", &["k0", "s1"]), // shares k0 with big
            lane("other", &["o1", "o2", "o3"]),
        ];
        let d = route("k0 k1 k2 k3", &lanes);
        // small scores 0.5 against big's 0.2: the normalised rule decides first.
        assert_eq!(d.decided.as_deref(), Some("small"));
        assert_eq!(d.rule, RouteRule::Confident);
        let d = route("k1 k2 k3 o1", &lanes);
        // "other" scores 1/3 (below the threshold) and "big" 3/20, but "big" has 3 raw hits
        // against 1.
        assert_eq!(d.rule, RouteRule::HitLeader);
        assert_eq!(d.decided.as_deref(), Some("big"));
        assert_eq!(d.confidence, 0.5); // max(0.15, 0.5)
        assert_eq!(
            scores(&d),
            [("big", 0.15), ("other", 1.0 / 3.0), ("small", 0.0)],
            "the leader goes first, the rest stay by score then name"
        );
    }

    #[test]
    fn raw_hit_leader_needs_a_two_hit_lead() {
        let many: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
        let m: Vec<&str> = many.iter().map(String::as_str).collect();
        let lanes = [
            lane("big", &m),
            lane(
                "mid",
                &["m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9", "m10"],
            ),
        ];
        // 3 hits vs 2 hits: lead of 1 → no rule 2; top score is mid (0.2 vs 0.15), its hits 2
        // < 3 → no rule 3 → escalate.
        let d = route("k1 k2 k3 m1 m2", &lanes);
        assert!(d.needs_escalation);
        assert_eq!(d.confidence, 0.2 - 0.15);
        // 4 vs 2 → rule 2.
        let d = route("k1 k2 k3 k4 m1 m2", &lanes);
        assert_eq!(d.rule, RouteRule::HitLeader);
        assert_eq!(d.decided.as_deref(), Some("big"));
    }

    #[test]
    fn top_score_hit_floor_applies_when_raw_hits_tie() {
        // Two lanes tie on 3 raw hits (so rule 2 fails), but the best-scoring lane has 3 hits
        // and the second-best by score has 1 hit: rule 3 decides.
        let lanes = [
            lane("aa", &["a1", "a2", "a3", "a4", "a5", "a6"]), // 3/6 = 0.5
            lane(
                "bb",
                &["b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9", "b10"],
            ), // 3/10
            lane("cc", &["c1", "c2"]),                         // 1/2 = 0.5
        ];
        let d = route("a1 a2 a3 b1 b2 b3 c1", &lanes);
        // sorted: aa 0.5, cc 0.5, bb 0.3 → rule 1 fails (margin 0).
        assert_eq!(scores(&d), [("aa", 0.5), ("cc", 0.5), ("bb", 0.3)]);
        assert_eq!(d.rule, RouteRule::TopScoreHits);
        assert_eq!(d.decided.as_deref(), Some("aa"));
        assert_eq!(d.confidence, 0.5);
    }

    #[test]
    fn empty_roster_and_empty_request_escalate() {
        let d = route("anything", &[]);
        assert!(d.candidates.is_empty());
        assert!(d.needs_escalation);
        assert_eq!(d.confidence, 0.0);
        let d = route("", &[lane("a", &["x"])]);
        assert!(d.needs_escalation);
        assert_eq!(d.confidence, 0.0);
    }

    #[test]
    fn request_checks() {
        assert_eq!(check_request(""), Err(RequestError::Empty));
        assert_eq!(check_request(" \t\n"), Err(RequestError::Empty));
        assert_eq!(check_request("!!! ... ???"), Err(RequestError::NoWords));
        assert_eq!(check_request("— … ☕"), Err(RequestError::NoWords));
        assert_eq!(check_request("日本語"), Ok(()));
        assert_eq!(check_request("fix it"), Ok(()));
    }

    fn roster(lanes: Vec<AgentSpec>) -> Roster {
        Roster::new(lanes).unwrap()
    }

    #[test]
    fn frame_rules_in_order_and_agent_membership() {
        let r = roster(vec![
            lane("backend", &["api", "server"]),
            lane("ci-cd", &["deploy"]),
            lane("zzz", &["qqq"]),
        ]);
        // "model" belongs to rule 1, which is tried first, even though "api" is rule 6's.
        let (_, f) = route_request("model api", &r);
        assert_eq!(f.domain, "model-foundry");
        assert_eq!(f.signals, ["model"]);
        // ci-cd decided with no frame words: rule 3 by membership, empty signals.
        let (d, f) = route_request("deploy", &r);
        assert_eq!(d.decided.as_deref(), Some("ci-cd"));
        assert_eq!(f.domain, "validation");
        assert!(f.signals.is_empty());
        assert_eq!(f.model_tier.as_deref(), Some("capable"));
        assert_eq!(f.executor.as_deref(), Some("cli"));
        // Nothing matches → the general fallback, no runtime fields when escalated.
        let (d, f) = route_request("hello there", &r);
        assert!(d.needs_escalation);
        assert_eq!(f.domain, "general");
        assert_eq!(f.agent, None);
        assert_eq!(f.model_tier, None);
        assert_eq!(f.proof_lane, None);
        assert_eq!(f.delivery_profile, DeliveryProfile::Operator);
        // Signals are sorted and deduplicated.
        let (_, f) = route_request("Tests, REVIEW and tests", &r);
        assert_eq!(f.domain, "validation");
        assert_eq!(f.signals, ["review", "tests"]);
    }

    #[test]
    fn escalated_route_gets_no_agent_even_with_a_leader() {
        let r = roster(vec![lane("backend", &["api", "x", "y", "z", "w"])]);
        let (d, f) = route_request("api", &r);
        assert!(d.needs_escalation);
        assert_eq!(f.agent, None);
        assert_eq!(f.domain, "implementation");
    }

    #[test]
    fn contract_labels_and_text() {
        let c = build_communication_contract("", "", "", " Engineer ", None, None, "hc").unwrap();
        assert_eq!(c.domain, "general");
        assert_eq!(c.intent, "coordinate");
        assert_eq!(c.posture, "operator");
        assert_eq!(c.profile, DeliveryProfile::Engineer);
        assert_eq!(
            c.structure,
            ["change", "interface", "verification", "risk", "next step"]
        );
        assert_eq!(c.avoid, AVOID);
        assert_eq!(
            c.required_moves,
            ["name the owner", "state the next coordinated action"]
        );
        let text = c.prompt_text();
        assert_eq!(text.lines().count(), 9);
        assert!(text.starts_with("Communication contract:\nPosture: operator / engineer\n"));
        assert!(text.ends_with("\nRoute contract: hc"));
        assert!(build_communication_contract("d", "i", "p", "poet", None, None, "").is_err());
        // Unknown posture keeps its label but takes the operator's moves.
        let c =
            build_communication_contract("d", "i", "wizard", "operator", None, None, "").unwrap();
        assert_eq!(c.posture, "wizard");
        assert_eq!(c.lead, Posture::Operator.lead());
    }

    #[test]
    fn payload_key_order() {
        let r = roster(vec![lane("backend", &["api"])]);
        let (d, f) = route_request("api", &r);
        let v = d.to_value(&f);
        let Value::Object(top) = &v else { panic!() };
        let keys: Vec<&str> = top.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "decided",
                "confidence",
                "needs_escalation",
                "candidates",
                "frame"
            ]
        );
        let Some(Value::Object(frame)) = v.get("frame") else {
            panic!()
        };
        let keys: Vec<&str> = frame.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "schema",
                "agent",
                "domain",
                "intent",
                "posture",
                "delivery_profile",
                "model_tier",
                "executor",
                "proof_lane",
                "domain_lane",
                "human_contract",
                "communication_contract",
                "signals"
            ]
        );
    }

    struct Fixed(&'static str);
    impl Classifier for Fixed {
        fn classify(
            &self,
            _: &str,
            _: &Roster,
            _: &RouteDecision,
        ) -> Result<Classification, String> {
            Ok(Classification {
                agent: self.0.into(),
                confidence: 0.7,
                reason: "because".into(),
            })
        }
    }

    #[test]
    fn classifier_settles_escalated_routes_only() {
        let r = roster(vec![lane("a", &["x"]), lane("b", &["x"])]);
        let (d, _) = route_request("x", &r);
        assert!(d.needs_escalation);
        let c = Fixed("b").classify("x", &r, &d).unwrap();
        let s = d.settle(&c, &r).unwrap();
        assert_eq!(s.decided.as_deref(), Some("b"));
        assert_eq!(s.rule, RouteRule::Classified);
        assert!(!s.needs_escalation);
        let f = derive_route_frame("x", &s, &r);
        assert_eq!(f.agent.as_deref(), Some("b"));
        assert!(matches!(
            d.settle(&Fixed("nope").classify("x", &r, &d).unwrap(), &r),
            Err(SettleError::UnknownAgent(_))
        ));
        assert!(matches!(
            s.settle(&c, &r),
            Err(SettleError::AlreadyDecided(_))
        ));
        let p = c.payload("x");
        assert_eq!(p.get("agent").and_then(Value::as_str), Some("b"));
    }

    #[test]
    fn default_roster_routes_typical_requests() {
        let r = Roster::default_roster();
        let decide = |t: &str| route_request(t, &r).0.decided;
        assert_eq!(
            decide("add a REST api endpoint to the server").as_deref(),
            Some("backend")
        );
        assert_eq!(
            decide("fix the flaky integration tests and coverage").as_deref(),
            Some("tests")
        );
        assert_eq!(
            decide("write a sql migration for the schema").as_deref(),
            Some("database")
        );
        assert_eq!(
            decide("update the readme and docs guide").as_deref(),
            Some("docs")
        );
        assert_eq!(
            decide("bump the version, tag and publish the release").as_deref(),
            Some("release")
        );
        assert_eq!(
            decide("rebase the branch and resolve the merge conflict").as_deref(),
            Some("git")
        );
        assert_eq!(decide("hello there"), None);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn lanes_strategy() -> impl Strategy<Value = Vec<AgentSpec>> {
            proptest::collection::btree_map(
                "[a-e]{1,3}",
                proptest::collection::vec("[a-h]{1,2}", 1..6),
                0..7,
            )
            .prop_map(|m| {
                m.into_iter()
                    .map(|(name, kws)| {
                        let refs: Vec<&str> = kws.iter().map(String::as_str).collect();
                        lane(&name, &refs)
                    })
                    .collect()
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]
            #[test]
            fn roster_order_never_matters(
                lanes in lanes_strategy(),
                words in proptest::collection::vec("[a-h]{1,2}", 0..8),
                seed in any::<u64>(),
            ) {
                let text = words.join(" ");
                let d1 = Router::default().route(&text, &lanes);
                let mut shuffled = lanes.clone();
                // Deterministic permutation from the seed.
                let n = shuffled.len();
                let mut s = seed;
                for i in (1..n).rev() {
                    s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    shuffled.swap(i, (s >> 33) as usize % (i + 1));
                }
                let d2 = Router::default().route(&text, &shuffled);
                prop_assert_eq!(d1, d2);
            }

            #[test]
            fn decisions_are_consistent(
                lanes in lanes_strategy(),
                words in proptest::collection::vec("[a-h]{1,2}", 0..8),
            ) {
                let d = Router::default().route(&words.join(" "), &lanes);
                prop_assert_eq!(d.candidates.len(), lanes.len());
                prop_assert_eq!(d.decided.is_none(), d.needs_escalation);
                if let Some(a) = &d.decided {
                    prop_assert_eq!(&d.candidates[0].agent, a);
                    prop_assert!(d.confidence >= 0.5);
                } else {
                    prop_assert!(d.confidence >= 0.0);
                }
            }

            #[test]
            fn any_text_routes_without_panic(text in any::<String>()) {
                let r = Roster::default_roster();
                let (d, f) = route_request(&text, &r);
                let _ = d.to_value(&f).canonical();
            }
        }
    }
}
