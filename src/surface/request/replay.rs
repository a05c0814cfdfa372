//! The requests of strict replay and `reproduce`: a recorded run checked against its record.

use serde::Deserialize;

use super::Request;
use crate::surface::Error;

/// Replay a recorded run strictly: its control loop run again in a fresh network namespace, every executor reply, context and clock reading answered from the record, under the roster, policy, executors and limits the run recorded; every decision is compared with the recorded one. Returns {run, recorded, recomputed, answer_sha256, recomputed_answer_sha256, divergence {seq, recorded, recomputed} or null, unanswered, from_record, recorded_by, replayed_by, network, rules {roster, policy, runtime, limits}}.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StrictReplay {
    /// The run: its request seq, as `git forum runs` lists it.
    #[arg(value_name = "RUN")]
    pub run: u64,
    /// Must be true: this route replays a run strictly (GET /replay/SEQ lists the entries up to a seq).
    #[arg(long)]
    pub strict: bool,
}

impl Request for StrictReplay {
    fn validate(&self) -> Result<(), Error> {
        if !self.strict {
            return Err(Error::usage(
                "field \"strict\" must be true: POST /replay replays a run strictly (GET /replay/SEQ lists the entries up to a seq)",
            ));
        }
        Ok(())
    }
}

/// Run a --work run's recorded checks again on its recorded change commits (in the sandbox, as the run ran them) and compare their exit codes with the record, and rebuild its run branch from the changes the record merged and compare its tree with the branch's. Returns {run, checks [{seq, task, command, commit, recorded_exit, exit}], merged, rebuilt_tree, branch, branch_tree, sandbox, mismatches}; mismatches is empty when everything reproduced.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Reproduce {
    /// The run: its request seq, as `git forum runs` lists it.
    #[arg(value_name = "RUN")]
    pub run: u64,
}

impl Request for Reproduce {}
