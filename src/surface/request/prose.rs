//! The model-free requests about texts: route, plan, humanize, the prose contract.

use serde::Deserialize;

use super::{Request, non_blank};
use crate::surface::Error;

/// Route a request to a roster lane: the decision, every lane's score and the route frame. No model.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// The request.
    // The command line takes it as its words.
    #[arg(skip)]
    #[schemars(extend("x-words" = true))]
    pub text: String,
}

impl Request for Route {
    fn validate(&self) -> Result<(), Error> {
        // Forum routes any non-empty string; one without words escalates to no lane.
        if self.text.is_empty() {
            return Err(Error::usage(
                "field \"text\" is empty: give the request to route",
            ));
        }
        Ok(())
    }
}

/// Plan a request with the model (nothing is written), or compile a plan document {tasks: [...]} into waves without a model.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// The request to plan.
    // The command line compiles a plan file, or the document itself: it refuses this one.
    #[arg(long, hide = true)]
    #[serde(default)]
    pub request: Option<String>,
    /// A plan document to compile instead.
    #[arg(long, hide = true, value_parser = super::json_arg::<serde_json::Value>)]
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub plan: Option<serde_json::Value>,
}

impl Request for Plan {
    fn validate(&self) -> Result<(), Error> {
        match (&self.plan, &self.request) {
            (Some(_), Some(_)) => Err(Error::usage(
                "give request (to plan with the model) or plan, not both",
            )),
            (Some(_), None) => Ok(()),
            (None, Some(r)) => non_blank("request", r),
            (None, None) => Err(Error::usage("field \"request\" is required")),
        }
    }
}

/// Clean up model prose without adding facts, and check it against a delivery profile.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
pub struct Humanize {
    /// The text.
    pub text: String,
    /// Who it is for and the profile it is checked against.
    #[command(flatten)]
    #[serde(flatten)]
    pub how: HumanizeHow,
}

/// How a text is humanized: the command line takes its text as words or a file, and these
/// flags as they are.
#[derive(Debug, Clone, Default, clap::Args, Deserialize, schemars::JsonSchema)]
pub struct HumanizeHow {
    /// Who it is for, recorded in the output (default operator).
    #[arg(long, value_name = "NAME")]
    #[serde(default)]
    pub audience: Option<String>,
    /// The delivery profile the output is checked against: operator (default), engineer, researcher or executive.
    #[arg(long, value_name = "PROFILE")]
    #[serde(default)]
    pub profile: Option<String>,
}

impl Request for Humanize {}

/// The communication contract of a text's route frame (profile may override).
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProseContract {
    /// The request text.
    pub text: String,
    /// operator, engineer, researcher or executive.
    #[arg(long)]
    #[serde(default)]
    pub profile: Option<String>,
}

impl Request for ProseContract {
    fn validate(&self) -> Result<(), Error> {
        non_blank("text", &self.text)
    }
}
