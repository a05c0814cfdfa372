//! The requests of the standard tree (C2SP): proofs against a signed note, signing a note, and
//! reading a file of the tlog-tiles layout; and the hooks' checks as a question.

use serde::Deserialize;

use super::{Request, non_blank};
use crate::surface::Error;

/// A standard C2SP proof against the ledger's stored signed note (`checkpoint --note`): that entry seq is in its tree (a c2sp.org/tlog-proof@v1, with the entry's hash beside it), or (consistency_from M) that its tree extends the tree of the signed note of size M. `git forum verify-proof` and any tlog verifier check it.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TlogProve {
    /// The entry to prove included.
    #[serde(default)]
    pub seq: Option<u64>,
    /// Prove instead that the ledger extends its first M entries
    #[arg(long, value_name = "M")]
    #[serde(default)]
    pub consistency_from: Option<u64>,
    /// Prove against the checkpoint of the first N entries (default: the whole ledger)
    #[arg(long, value_name = "N")]
    #[serde(default)]
    pub size: Option<u64>,
}

impl Request for TlogProve {
    fn validate(&self) -> Result<(), Error> {
        if self.seq.is_some() == self.consistency_from.is_some() {
            return Err(Error::usage(
                "give exactly one of seq (an inclusion proof) and consistency_from (a consistency proof)",
            ));
        }
        Ok(())
    }
}

/// Verify the ledger, sign its C2SP checkpoint with the repository's note key (forum.noteKey) and store the note; a checkpoint entry is recorded too unless no_record. Answers the note, as `git forum checkpoint --note --json`.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TlogSign {
    /// Print only; do not record the checkpoint as a witness
    #[arg(long)]
    #[serde(default)]
    pub no_record: bool,
}

impl Request for TlogSign {}

/// One file of the ledger's C2SP tlog-tiles layout at its latest signed note, as `git forum tiles export` writes it: `checkpoint` (the note) or a tile, `tile/L/N[.p/W]` (hashes) or `tile/entries/N[.p/W]` (entry hashes); its bytes, base64 in JSON.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TlogRead {
    /// The file's path in the layout: checkpoint, tile/L/N[.p/W] or tile/entries/N[.p/W] (N in groups of three digits, the leading ones x-prefixed: tile/0/x001/234).
    pub path: String,
}

impl Request for TlogRead {
    fn validate(&self) -> Result<(), Error> {
        non_blank("path", &self.path)?;
        crate::surface::tlog_layout::LayoutPath::parse(&self.path).map(|_| ())
    }
}

/// The answer a git forum hook would give to these ref updates, without running a hook: pre-push (every ledger ref pushed verified and its bodies scanned; with scan_code, the code pushed scanned too) or pre-receive (ledger refs are append-only). Lists the refused updates and why; none refused means the hook lets the push through.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HooksCheck {
    /// The hook: pre-push or pre-receive.
    pub hook: String,
    /// The standard input git hands the hook: one line per ref update (pre-push: `LOCAL-REF LOCAL-ID REMOTE-REF REMOTE-ID`; pre-receive: `OLD-ID NEW-ID REF`).
    // The command line reads it from its own standard input, as the hook does.
    #[arg(skip)]
    pub stdin: String,
    /// pre-push: also scan the lines the pushed code commits add for secrets.
    #[arg(long)]
    #[serde(default)]
    pub scan_code: bool,
    /// pre-push: the remote's name (its remote-tracking refs tell which commits are new).
    #[arg(long, value_name = "NAME")]
    #[serde(default)]
    pub remote: Option<String>,
}

/// The hooks whose checks [`HooksCheck`] asks.
pub(crate) const CHECKED_HOOKS: [&str; 2] = ["pre-push", "pre-receive"];

impl Request for HooksCheck {
    fn validate(&self) -> Result<(), Error> {
        if !CHECKED_HOOKS.contains(&self.hook.as_str()) {
            return Err(Error::usage(format!(
                "field \"hook\" must be pre-push or pre-receive, not {:?}",
                self.hook
            )));
        }
        if self.hook != "pre-push" && (self.scan_code || self.remote.is_some()) {
            return Err(Error::usage(
                "scan_code and remote are pre-push's: the pre-receive check takes neither",
            ));
        }
        Ok(())
    }
}
