//! The lane vocabulary: the closed set of proof lanes (what a route may do, and the scopes each
//! grants) and the closed set of domain lanes (which body of work a route belongs to), and the
//! check of one route claim against both.
//!
//! Both tables are Forum's, name for name and scope for scope, so a `lane_route` or
//! `lane_rejection` body written here hashes as Forum's does. They are constants on purpose:
//! widening a vocabulary is a change to this file and its tests, never a setting, because a
//! route that could name its own lane would certify itself. When routing keeps escalating on
//! work no lane covers, the answer is a witnessed `vocabulary_gap` (`super::gap`), not a new
//! lane.
//!
//! Pure: [`check_route`] decides, [`LaneRoute::entry`] builds the entry to witness.

use std::collections::BTreeSet;

use crate::ledger::{NewEntry, Value, kind};

/// One proof lane: its name, what it may do, and the scopes it grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProofLane {
    /// The lane's name, as a route claims it.
    pub name: &'static str,
    /// What the lane is allowed to do.
    pub authority: &'static str,
    /// The scopes it grants, sorted.
    pub scopes: &'static [&'static str],
}

/// One domain lane: its name and what it is for. A domain grants no scope: scopes belong to the
/// proof lane, so a valid domain can never widen what a route may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DomainLane {
    /// The domain's name, as a route claims it.
    pub name: &'static str,
    /// What work belongs to it.
    pub charter: &'static str,
}

/// The proof lanes (Forum's `PROOF_LANES`), in Forum's order.
pub const PROOF_LANES: [ProofLane; 5] = [
    ProofLane {
        name: "observe",
        authority: "reads witnessed evidence; changes nothing",
        scopes: &["read"],
    },
    ProofLane {
        name: "execute",
        authority: "runs a task and produces a witnessed result",
        scopes: &["read", "run"],
    },
    ProofLane {
        name: "validate",
        authority: "judges an existing witnessed result",
        scopes: &["judge", "read"],
    },
    ProofLane {
        name: "synthesize",
        authority: "combines witnessed results into one answer",
        scopes: &["combine", "read"],
    },
    ProofLane {
        name: "verify",
        authority: "attests an answer against an external check",
        scopes: &["attest", "read"],
    },
];

/// The domain lanes (Forum's `DOMAIN_LANES`), in Forum's order.
pub const DOMAIN_LANES: [DomainLane; 10] = [
    DomainLane {
        name: "frontier-foundry",
        charter: "frontier capability work under gated evaluation",
    },
    DomainLane {
        name: "research-foundry",
        charter: "research intake and synthesis over recorded sources",
    },
    DomainLane {
        name: "model-foundry",
        charter: "model training, evaluation, and gated promotion",
    },
    DomainLane {
        name: "scientific-runtime",
        charter: "scientific computation with re-checkable results",
    },
    DomainLane {
        name: "formal-proof",
        charter: "machine-checkable proofs and verifier verdicts",
    },
    DomainLane {
        name: "bio-evidence",
        charter: "biological evidence handling under provenance controls",
    },
    DomainLane {
        name: "robotics-control",
        charter: "physical actuation under bounded authority",
    },
    DomainLane {
        name: "visual-truth",
        charter: "visual and rendered output checked against ground truth",
    },
    DomainLane {
        name: "learning-forge",
        charter: "learning material built and graded from recorded runs",
    },
    DomainLane {
        name: "source-federation",
        charter: "external sources federated with per-source receipts",
    },
];

/// The proof lane named `name`, if the vocabulary has one.
pub fn proof_lane(name: &str) -> Option<&'static ProofLane> {
    PROOF_LANES.iter().find(|l| l.name == name)
}

/// The domain lane named `name`, if the vocabulary has one.
pub fn domain_lane(name: &str) -> Option<&'static DomainLane> {
    DOMAIN_LANES.iter().find(|l| l.name == name)
}

/// Why a route was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Violation {
    /// The lane is not in the vocabulary (it grants nothing, so every scope is excess).
    UnknownLane,
    /// The route claims scopes its lane does not grant.
    OverRouted,
    /// The domain is not in the vocabulary.
    UnknownDomain,
}

impl Violation {
    /// The code written in a `lane_rejection` body (Forum's).
    pub fn as_str(self) -> &'static str {
        match self {
            Violation::UnknownLane => "unknown_lane",
            Violation::OverRouted => "over_routed",
            Violation::UnknownDomain => "unknown_domain",
        }
    }
}

/// A route claim: this task wants this proof lane with these scopes, optionally in a domain
/// and with the router's confidence.
#[derive(Debug, Clone, PartialEq)]
pub struct LaneRoute {
    /// The task the route is for.
    pub task: String,
    /// The proof lane claimed.
    pub lane: String,
    /// The scopes claimed (a set: order and repeats do not matter).
    pub scopes: BTreeSet<String>,
    /// The domain lane claimed, if any.
    pub domain: Option<String>,
    /// The router's confidence, if it has one.
    pub confidence: Option<f64>,
}

/// A refused route: the violation, the scopes at fault and the scopes the lane grants (none
/// for an unknown lane), so the refusal explains itself without a second lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneRejection {
    /// Why.
    pub violation: Violation,
    /// The lane claimed.
    pub lane: String,
    /// The claimed scopes the lane does not grant, sorted.
    pub excess: Vec<String>,
    /// The scopes the lane grants, sorted.
    pub granted: Vec<String>,
    /// The domain claimed (for an unknown domain, the offending name).
    pub domain: Option<String>,
}

impl LaneRejection {
    /// One line naming the violation and what to do about it.
    pub fn line(&self) -> String {
        let lanes: Vec<&str> = PROOF_LANES.iter().map(|l| l.name).collect();
        match self.violation {
            Violation::UnknownLane => format!(
                "unknown_lane: lane {:?} is not a proof lane (it grants nothing; claimed {}); use one of {}",
                self.lane,
                list(&self.excess),
                lanes.join(", ")
            ),
            Violation::OverRouted => format!(
                "over_routed: lane {:?} does not grant {} (it grants {}); claim only those, or route to a lane that grants them",
                self.lane,
                list(&self.excess),
                list(&self.granted)
            ),
            Violation::UnknownDomain => format!(
                "unknown_domain: domain {:?} is not a domain lane; use one of {}, or none",
                self.domain.as_deref().unwrap_or_default(),
                DOMAIN_LANES
                    .iter()
                    .map(|d| d.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// A list of scopes for a message: `read, run`, or `no scope`.
fn list(items: &[String]) -> String {
    if items.is_empty() {
        "no scope".into()
    } else {
        items.join(", ")
    }
}

fn sorted(scopes: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// Checks one route against both vocabularies; `None` means it is well formed. The lane is
/// checked first, then its scopes, then the domain: an unknown lane claims only excess, an
/// over-routed lane names the scopes it does not grant, and a domain is looked at only once
/// the lane and scopes hold.
pub fn check_route(route: &LaneRoute) -> Option<LaneRejection> {
    let reject = |violation, excess, granted| LaneRejection {
        violation,
        lane: route.lane.clone(),
        excess,
        granted,
        domain: route.domain.clone(),
    };
    let Some(spec) = proof_lane(&route.lane) else {
        return Some(reject(
            Violation::UnknownLane,
            route.scopes.iter().cloned().collect(),
            Vec::new(),
        ));
    };
    let excess: Vec<String> = route
        .scopes
        .iter()
        .filter(|s| !spec.scopes.contains(&s.as_str()))
        .cloned()
        .collect();
    if !excess.is_empty() {
        return Some(reject(Violation::OverRouted, excess, sorted(spec.scopes)));
    }
    if route
        .domain
        .as_deref()
        .is_some_and(|d| domain_lane(d).is_none())
    {
        return Some(reject(
            Violation::UnknownDomain,
            Vec::new(),
            sorted(spec.scopes),
        ));
    }
    None
}

fn str_array(items: &[String]) -> Value {
    Value::Array(items.iter().map(Value::str).collect())
}

impl LaneRoute {
    /// The body both entries share, in Forum's key order: task, lane, domain, scopes (sorted),
    /// confidence.
    fn body(&self) -> Vec<(String, Value)> {
        let scopes: Vec<String> = self.scopes.iter().cloned().collect();
        vec![
            ("task".into(), Value::str(&self.task)),
            ("lane".into(), Value::str(&self.lane)),
            (
                "domain".into(),
                self.domain.as_deref().map_or(Value::Null, Value::str),
            ),
            ("scopes".into(), str_array(&scopes)),
            (
                "confidence".into(),
                self.confidence.map_or(Value::Null, Value::Float),
            ),
        ]
    }

    /// The entry that witnesses this route (actor `router`): a `lane_route`, or, when
    /// `rejection` is given, a `lane_rejection` whose body adds the violation, the excess and
    /// the granted scopes.
    pub fn entry(
        &self,
        rejection: Option<&LaneRejection>,
        causal_parent: Option<i64>,
        ts: f64,
    ) -> NewEntry {
        let mut body = self.body();
        let kind = match rejection {
            None => kind::LANE_ROUTE,
            Some(r) => {
                body.push(("violation".into(), Value::str(r.violation.as_str())));
                body.push(("excess".into(), str_array(&r.excess)));
                body.push(("granted".into(), str_array(&r.granted)));
                kind::LANE_REJECTION
            }
        };
        NewEntry {
            actor: "router".into(),
            kind: kind.into(),
            causal_parent,
            payload: Value::Object(body),
            ts,
        }
    }
}
