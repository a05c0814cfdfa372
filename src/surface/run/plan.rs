//! Planning without a run: a request planned by the orchestrator seat on a scratch ledger in
//! memory (nothing is written), or a plan document compiled and checked against the policy.

use serde_json::Value as J;

use crate::ledger::{MemoryStorage, kind};
use crate::plan::{ParseMode, Plan};
use crate::policy::Policy;
use crate::roster::Roster;
use crate::route::check_request;
use crate::run::{self, Env, RunError};
use crate::surface::{Error, Result};

/// What to plan.
#[derive(Debug, Clone, Copy)]
pub(crate) enum PlanAsk<'a> {
    /// A request, planned with the model.
    Request(&'a str),
    /// A plan document, compiled without one.
    Document(&'a J),
}

/// The compiled plan of `ask` under `roster` and `policy`: the `plan` entry's payload with its
/// tasks, so order edges and done_when survive. `env` is needed only to plan a request; it
/// is made by `env` when called.
pub(crate) fn plan<'e>(
    roster: &Roster,
    policy: &Policy,
    ask: PlanAsk<'_>,
    env: impl FnOnce() -> Result<Env<'e>>,
) -> Result<J> {
    let request = match ask {
        PlanAsk::Document(doc) => {
            let usage = |e: &dyn std::fmt::Display| Error::usage(e.to_string());
            let plan =
                Plan::from_json(doc, Some(roster), ParseMode::Strict).map_err(|e| usage(&e))?;
            let compiled = plan.compile().map_err(|e| usage(&e))?;
            policy.check_plan(&plan, roster).map_err(|e| usage(&e))?;
            return Ok(run::plan_entry_payload(&compiled));
        }
        PlanAsk::Request(r) => r,
    };
    check_request(request).map_err(|e| Error::usage(e.to_string()))?;
    let env = env()?;
    let opts = run::Options {
        max_model_calls: Some(0),
        policy: policy.clone(),
        ..run::Options::default()
    };
    let mut scratch = MemoryStorage::default();
    match run::submit(&mut scratch, &env, &opts, request) {
        Ok(_) => {}
        Err(RunError::Request(m)) => return Err(Error::usage(m)),
        Err(RunError::Plan(m)) => {
            return Err(Error::upstream(format!(
                "the planner gave no usable plan: {m}"
            )));
        }
        Err(e) => return Err(Error::upstream(e.to_string())),
    }
    scratch
        .entries
        .iter()
        .find(|e| e.kind == kind::PLAN)
        .and_then(|e| scratch.payloads.get(&e.payload_hash))
        .map(|v| v.to_serde())
        .ok_or_else(|| Error::upstream("the planner gave no plan"))
}
