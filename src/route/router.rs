//! The keyword router (forum-spec §6): tokens, lane scores, the three rules that decide a
//! route or escalate it, and the witnessed settlement of an escalated route by a classifier.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use super::RouteFrame;
use crate::ledger::Value;
use crate::roster::{AgentSpec, Roster};

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
    pub(crate) agent: String,
    /// `hits / len(keywords)`.
    pub(crate) score: f64,
    /// Number of the lane's keywords found among the request tokens.
    pub(crate) hits: usize,
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
    pub(crate) candidates: Vec<Candidate>,
    /// The chosen lane, or `None` when the route escalates.
    pub(crate) decided: Option<String>,
    /// The winning score (at least 0.5 for hit rules), or the top-minus-second margin when
    /// escalated.
    pub confidence: f64,
    /// True when keywords could not separate the lanes.
    pub(crate) needs_escalation: bool,
    /// The rule that decided.
    pub rule: RouteRule,
}

/// The lexical router and its parameters (forum-spec §6).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Router {
    /// Minimum normalised score for a confident decision (0.5).
    pub(crate) threshold: f64,
    /// Minimum lead of the top score over the second (0.15).
    pub(crate) margin: f64,
    /// Minimum raw hits for a hit-based decision (3).
    pub(crate) decisive_hits: usize,
    /// Minimum lead in raw hits for a hit-based decision (2).
    pub(crate) hit_margin: usize,
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

/// Each agent scored against `text` (the share of its keywords among the text's tokens), best
/// first, ties by name.
fn scored(text: &str, agents: &[AgentSpec]) -> Vec<Candidate> {
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
    candidates
}

impl Router {
    /// Routes `text` against `agents`. The result never depends on the order the agents are
    /// listed in, provided names are unique.
    pub fn route(&self, text: &str, agents: &[AgentSpec]) -> RouteDecision {
        let mut candidates = scored(text, agents);

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
    pub(crate) agent: String,
    /// The model's confidence in `[0, 1]`.
    pub(crate) confidence: f64,
    /// Why, in the model's words.
    pub(crate) reason: String,
}

impl Classification {
    /// The payload of a `classification` ledger entry: `{task, agent, confidence, reason}`.
    pub(crate) fn payload(&self, task: &str) -> Value {
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
    /// Why a classification failed: the implementation's own error (what its model or
    /// executor said), which this pure module cannot name.
    type Error: std::error::Error;

    /// Chooses a lane for `text`, given the escalated decision and the roster.
    fn classify(
        &self,
        text: &str,
        roster: &Roster,
        decision: &RouteDecision,
    ) -> Result<Classification, Self::Error>;
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
    /// lane with the classifier's confidence; candidates keep their keyword scores. Only the
    /// tests settle a route this way; nothing else calls it.
    #[cfg(test)]
    pub(crate) fn settle(
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
