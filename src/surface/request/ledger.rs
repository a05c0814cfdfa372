//! The requests that read the ledger: log, replay, one entry, proofs.

use serde::Deserialize;

use super::Request;
use crate::surface::Error;
use crate::surface::read::MAX_PAGE;

/// The newest entries first (no bodies), as a JSON list in the text content; limit caps how many (at most 1000, the default).
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Log {
    /// The most entries to list: 1 to 1000 (the default) over HTTP and MCP; on the command line, all of them by default (0 also means all).
    #[arg(long, short = 'n', value_name = "LIMIT")]
    #[serde(default)]
    pub limit: Option<u64>,
}

impl Request for Log {
    fn validate(&self) -> Result<(), Error> {
        if self.limit == Some(0) {
            return Err(Error::usage(format!(
                "field \"limit\" must be at least 1 (at most {MAX_PAGE} entries)"
            )));
        }
        Ok(())
    }
}

/// One page of entries: at most `limit` with a seq above `after`.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Page {
    /// Entries per page (at most 1000, the default).
    // Pages are the daemon's and MCP's; the command line prints the whole replay.
    #[arg(long, hide = true)]
    #[serde(default, deserialize_with = "super::via_value")]
    pub limit: Option<u64>,
    /// Start after this seq (the previous page's next).
    #[arg(long, hide = true)]
    #[serde(default, deserialize_with = "super::via_value")]
    pub after: Option<u64>,
}

impl Page {
    /// The page's size: 1 or more, at most [`MAX_PAGE`] (the default).
    pub(crate) fn size(&self) -> usize {
        self.limit
            .map_or(MAX_PAGE, |n| usize::try_from(n).unwrap_or(MAX_PAGE))
            .min(MAX_PAGE)
    }
}

impl Request for Page {
    fn validate(&self) -> Result<(), Error> {
        if self.limit == Some(0) {
            return Err(Error::usage(format!(
                "field \"limit\" must be at least 1 (at most {MAX_PAGE} per page)"
            )));
        }
        Ok(())
    }
}

/// Entries with seq up to and including seq, a page at a time: pass the answer's next as after for the following page.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
pub struct Replay {
    /// The last entry to include (its seq).
    pub seq: u64,
    /// Which page.
    #[command(flatten)]
    #[serde(flatten)]
    pub page: Page,
}

impl Request for Replay {
    fn validate(&self) -> Result<(), Error> {
        self.page.validate()
    }
}

/// One entry's fields (no body).
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The entry's seq.
    pub seq: u64,
}

impl Request for Entry {}

/// One entry's body (null when it was redacted).
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Payload {
    /// The entry's seq.
    pub seq: u64,
}

impl Request for Payload {}

/// The causal chain of an entry, root first.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Why {
    /// The entry whose causes to follow (its seq).
    pub seq: u64,
}

impl Request for Why {}

/// A self-contained proof: that entry seq is in the checkpoint, or (consistency_from M) that the checkpoint extends its first M entries. `git forum verify-proof` checks it.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Prove {
    /// The entry to prove included.
    #[arg(
        required_unless_present = "consistency_from",
        conflicts_with = "consistency_from"
    )]
    #[serde(default)]
    pub seq: Option<u64>,
    /// Prove instead that the ledger extends its first M entries.
    #[arg(long, value_name = "M")]
    #[serde(default)]
    pub consistency_from: Option<u64>,
    /// Prove against the checkpoint of the first N entries (default: the whole ledger).
    #[arg(long, value_name = "N")]
    #[serde(default)]
    pub size: Option<u64>,
}

impl Request for Prove {
    fn validate(&self) -> Result<(), Error> {
        if self.seq.is_some() == self.consistency_from.is_some() {
            return Err(Error::usage(
                "give exactly one of seq (an inclusion proof) and consistency_from (a consistency proof)",
            ));
        }
        Ok(())
    }
}

/// Verify the ledger, then record its checkpoint as a witness later verifies compare against.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointRecord {}

impl Request for CheckpointRecord {}
