//! Self-contained proof files: an inclusion proof (this entry is in the checkpoint of that size
//! and root) and a consistency proof (the checkpoint of size n extends the one of size m). Both
//! are checked without a repository; a signature on the checkpoint, when present, ties the root
//! to a signer (checked by the caller, who has the keys).

use serde::{Deserialize, Serialize};

use super::Entry;
use super::hash::is_hash;
use super::merkle::{verify_consistency, verify_inclusion};

/// Schema of an inclusion proof file.
pub(crate) const INCLUSION_SCHEMA: &str = "git-forum.inclusion-proof/v1";
/// Schema of a consistency proof file.
pub(crate) const CONSISTENCY_SCHEMA: &str = "git-forum.consistency-proof/v1";
/// The namespace a checkpoint signature is made in, so it cannot pass for a commit or tag
/// signature (ssh-keygen `-n`).
pub(crate) const SIGNATURE_NAMESPACE: &str = "git-forum-checkpoint";

/// A ledger's checkpoint: its size and Merkle root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Checkpoint {
    pub(crate) size: u64,
    pub(crate) root: String,
}

/// The exact text a checkpoint signature signs.
pub(crate) fn signed_text(ledger: &str, checkpoint: &Checkpoint) -> String {
    format!(
        "git-forum checkpoint v1\nledger {ledger}\nsize {}\nroot {}\n",
        checkpoint.size, checkpoint.root
    )
}

/// A signature over [`signed_text`], made with the signer's own git signing setup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CheckpointSignature {
    /// `ssh` or `openpgp` (git's `gpg.format`).
    pub(crate) format: String,
    /// The armored signature.
    pub(crate) signature: String,
}

/// Entry `entry.seq` is in the ledger whose checkpoint is `checkpoint`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct InclusionProof {
    pub(crate) schema: String,
    pub(crate) ledger: String,
    pub(crate) entry: Entry,
    pub(crate) checkpoint: Checkpoint,
    /// Sibling hashes from the leaf up (RFC 9162 audit path, Forum's leaf and node hashes).
    pub(crate) audit_path: Vec<String>,
    pub(crate) signature: Option<CheckpointSignature>,
}

/// The ledger's checkpoint `new` extends its checkpoint `old`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConsistencyProof {
    pub(crate) schema: String,
    pub(crate) ledger: String,
    pub(crate) old: Checkpoint,
    pub(crate) new: Checkpoint,
    pub(crate) proof: Vec<String>,
    /// Signatures of the two checkpoints, when they were signed.
    pub(crate) old_signature: Option<CheckpointSignature>,
    pub(crate) new_signature: Option<CheckpointSignature>,
}

/// A proof file that checked out.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Verified {
    Inclusion(InclusionProof),
    Consistency(ConsistencyProof),
}

/// Why a proof file does not hold.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProofError {
    #[error("not a proof file: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("not a proof file: no \"schema\"")]
    NoSchema,
    #[error("unknown proof schema {0:?}")]
    UnknownSchema(String),
    /// The file's schema is known but its fields do not read (`what`: "inclusion" or
    /// "consistency").
    #[error("malformed {what} proof: {source}")]
    Malformed {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("schema is {found:?}, not {want:?}")]
    WrongSchema { found: String, want: &'static str },
    #[error("{what} holds {hash:?}, which is not 64 lowercase hex digits")]
    NotHash { what: &'static str, hash: String },
    #[error("the entry's fields do not hash to its entry_hash (seq {0})")]
    EntryHash(u64),
    #[error("the audit path does not lead from seq {seq} to root {root} of size {size}")]
    PathDoesNotLead { seq: u64, root: String, size: u64 },
    #[error(
        "the proof does not show that size {new_size} (root {new_root}) extends size {old_size} (root {old_root})"
    )]
    DoesNotExtend {
        old_size: u64,
        old_root: String,
        new_size: u64,
        new_root: String,
    },
}

/// The message as text, for the proof check whose other refusals are still text.
impl From<ProofError> for String {
    fn from(e: ProofError) -> String {
        e.to_string()
    }
}

fn check_hashes<'a>(
    what: &'static str,
    hashes: impl IntoIterator<Item = &'a String>,
) -> Result<(), ProofError> {
    for h in hashes {
        if !is_hash(h) {
            return Err(ProofError::NotHash {
                what,
                hash: h.clone(),
            });
        }
    }
    Ok(())
}

impl InclusionProof {
    /// Checks the entry hash and the audit path against the checkpoint.
    pub(crate) fn check(&self) -> Result<(), ProofError> {
        if self.schema != INCLUSION_SCHEMA {
            return Err(ProofError::WrongSchema {
                found: self.schema.clone(),
                want: INCLUSION_SCHEMA,
            });
        }
        let e = &self.entry;
        check_hashes("the entry", [&e.payload_hash, &e.prev_hash, &e.entry_hash])?;
        check_hashes("the audit path", &self.audit_path)?;
        check_hashes("the checkpoint", [&self.checkpoint.root])?;
        if e.computed_hash() != e.entry_hash {
            return Err(ProofError::EntryHash(e.seq));
        }
        if !verify_inclusion(
            &e.entry_hash,
            e.seq,
            self.checkpoint.size,
            &self.audit_path,
            &self.checkpoint.root,
        ) {
            return Err(ProofError::PathDoesNotLead {
                seq: e.seq,
                root: self.checkpoint.root.clone(),
                size: self.checkpoint.size,
            });
        }
        Ok(())
    }
}

impl ConsistencyProof {
    /// Checks that the new checkpoint extends the old one.
    pub(crate) fn check(&self) -> Result<(), ProofError> {
        if self.schema != CONSISTENCY_SCHEMA {
            return Err(ProofError::WrongSchema {
                found: self.schema.clone(),
                want: CONSISTENCY_SCHEMA,
            });
        }
        check_hashes("the checkpoints", [&self.old.root, &self.new.root])?;
        check_hashes("the proof", &self.proof)?;
        if !verify_consistency(
            self.old.size,
            self.new.size,
            &self.old.root,
            &self.new.root,
            &self.proof,
        ) {
            return Err(ProofError::DoesNotExtend {
                old_size: self.old.size,
                old_root: self.old.root.clone(),
                new_size: self.new.size,
                new_root: self.new.root.clone(),
            });
        }
        Ok(())
    }
}

/// Reads and checks a proof file of either kind. Signatures are not checked here.
pub(crate) fn verify_text(text: &str) -> Result<Verified, ProofError> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(ProofError::NotJson)?;
    match v.get("schema").and_then(|s| s.as_str()) {
        Some(INCLUSION_SCHEMA) => {
            let p: InclusionProof =
                serde_json::from_value(v).map_err(|source| ProofError::Malformed {
                    what: "inclusion",
                    source,
                })?;
            p.check()?;
            Ok(Verified::Inclusion(p))
        }
        Some(CONSISTENCY_SCHEMA) => {
            let p: ConsistencyProof =
                serde_json::from_value(v).map_err(|source| ProofError::Malformed {
                    what: "consistency",
                    source,
                })?;
            p.check()?;
            Ok(Verified::Consistency(p))
        }
        Some(other) => Err(ProofError::UnknownSchema(other.to_string())),
        None => Err(ProofError::NoSchema),
    }
}
