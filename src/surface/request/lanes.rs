//! The requests of the lane vocabulary: check (and witness) one route claim, and the
//! vocabulary gap.

use serde::Deserialize;

use super::{Request, non_blank};
use crate::surface::Error;

/// Check a route claim against the lane vocabularies and witness it: a lane_route entry when the proof lane, its scopes and the domain all hold; else a lane_rejection entry (unknown_lane, over_routed or unknown_domain, with the excess and granted scopes) and a refusal.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LaneCheck {
    /// The task the route is for.
    // The command line takes it as its words.
    #[arg(skip)]
    #[schemars(extend("x-words" = true))]
    pub task: String,
    /// The proof lane claimed: observe, execute, validate, synthesize or verify.
    #[arg(long)]
    pub lane: String,
    /// The domain lane claimed (for example formal-proof); none when left out.
    #[arg(long)]
    #[serde(default)]
    pub domain: Option<String>,
    /// The scopes claimed (read, run, judge, combine, attest); repeat the flag or separate with commas.
    #[arg(
        long,
        visible_alias = "scope",
        value_delimiter = ',',
        value_name = "SCOPE"
    )]
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The router's confidence in the route, when it has one.
    #[arg(long, value_name = "X")]
    #[serde(default)]
    pub confidence: Option<f64>,
    /// The seq this entry follows from (its causal parent).
    #[arg(long, visible_alias = "parent", value_name = "SEQ")]
    #[serde(default)]
    pub causal_parent: Option<u64>,
}

impl Request for LaneCheck {
    fn validate(&self) -> Result<(), Error> {
        non_blank("task", &self.task)?;
        non_blank("lane", &self.lane)?;
        if let Some(c) = self.confidence
            && !c.is_finite()
        {
            return Err(Error::usage(format!(
                "field \"confidence\" must be a finite number, found {c}"
            )));
        }
        Ok(())
    }
}

/// The vocabulary gap: the ledger's trailing run of undecided routes (how many, the highest confidence, the first and last seq) and whether it reaches the threshold; with record, witness it once as a vocabulary_gap entry.
#[derive(Debug, Clone, Default, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LaneGaps {
    /// How many undecided routes in a row make a gap (default: lanes.min_escalations in .forum/policy.toml, else 3).
    #[arg(long, value_name = "N")]
    #[serde(default)]
    pub min_escalations: Option<i64>,
    /// The name of what the escalated work shares (default: the route-frame domain most of the run's routes carry).
    #[arg(long, value_name = "NAME")]
    #[serde(default)]
    pub domain_signal: Option<String>,
    /// Witness the gap as a vocabulary_gap entry under the last escalated route (nothing is written below the threshold, or when this run already has one).
    #[arg(long)]
    #[serde(default)]
    pub record: bool,
}

impl Request for LaneGaps {
    fn validate(&self) -> Result<(), Error> {
        if let Some(n) = self.min_escalations {
            crate::route::gap::check_threshold(n)
                .map_err(|e| Error::usage(format!("field \"min_escalations\": {e}")))?;
        }
        if let Some(s) = &self.domain_signal {
            non_blank("domain_signal", s)?;
        }
        Ok(())
    }
}
