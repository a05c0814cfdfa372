//! The request of `attest`: a signed in-toto attestation of what a `--work` run shipped, or
//! the check of one against the ledger.

use serde::Deserialize;

use super::Request;
use crate::surface::Error;

/// A signed in-toto Statement v1 (SLSA Provenance v1 predicate) of what a --work run shipped, in a DSSE envelope signed with the ledger's note key (forum.noteKey): subjects the run branch's tip and each merged change commit; the base, runtime, roster, policy and each seat's model as resolved dependencies; the ledger, its checkpoint and signed note, and each ship and gate decision with the rules that decided it as byproducts. With envelope, checks one instead: its signature with the verifier keys (keys, else forum.noteVerifiers), its shape, and every claim against the ledger. Returns {mode, ledger, run, keyid, subjects, checkpoint_size, checkpoint_root, signed_note, envelope}.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Attest {
    /// The run's request seq (default: the latest --work run).
    #[arg(value_name = "RUN")]
    #[serde(default)]
    pub run: Option<u64>,
    /// An attestation to check instead of making one: the DSSE envelope's JSON text.
    // The command line reads it from the file `--verify FILE` names.
    #[arg(skip)]
    #[serde(default)]
    pub envelope: Option<String>,
    /// The verifier keys to check an envelope with (NAME+HASH+BASE64, as `git forum keygen` writes NAME.pub); default: forum.noteVerifiers.
    // The command line reads them from the files `--key FILE` names.
    #[arg(skip)]
    #[serde(default)]
    pub keys: Vec<String>,
}

impl Request for Attest {
    fn validate(&self) -> Result<(), Error> {
        if self.envelope.is_none() && !self.keys.is_empty() {
            return Err(Error::usage(
                "keys check an envelope: give envelope with them, or leave them out to make an attestation",
            ));
        }
        if self.envelope.is_some() && self.run.is_some() {
            return Err(Error::usage(
                "an envelope names its own run: give run to make an attestation, or envelope to check one",
            ));
        }
        Ok(())
    }
}
