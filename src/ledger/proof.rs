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

fn check_hashes<'a>(
    what: &str,
    hashes: impl IntoIterator<Item = &'a String>,
) -> Result<(), String> {
    for h in hashes {
        if !is_hash(h) {
            return Err(format!(
                "{what} holds {h:?}, which is not 64 lowercase hex digits"
            ));
        }
    }
    Ok(())
}

impl InclusionProof {
    /// Checks the entry hash and the audit path against the checkpoint.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.schema != INCLUSION_SCHEMA {
            return Err(format!(
                "schema is {:?}, not {INCLUSION_SCHEMA:?}",
                self.schema
            ));
        }
        let e = &self.entry;
        check_hashes("the entry", [&e.payload_hash, &e.prev_hash, &e.entry_hash])?;
        check_hashes("the audit path", &self.audit_path)?;
        check_hashes("the checkpoint", [&self.checkpoint.root])?;
        if e.computed_hash() != e.entry_hash {
            return Err(format!(
                "the entry's fields do not hash to its entry_hash (seq {})",
                e.seq
            ));
        }
        if !verify_inclusion(
            &e.entry_hash,
            e.seq,
            self.checkpoint.size,
            &self.audit_path,
            &self.checkpoint.root,
        ) {
            return Err(format!(
                "the audit path does not lead from seq {} to root {} of size {}",
                e.seq, self.checkpoint.root, self.checkpoint.size
            ));
        }
        Ok(())
    }
}

impl ConsistencyProof {
    /// Checks that the new checkpoint extends the old one.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.schema != CONSISTENCY_SCHEMA {
            return Err(format!(
                "schema is {:?}, not {CONSISTENCY_SCHEMA:?}",
                self.schema
            ));
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
            return Err(format!(
                "the proof does not show that size {} (root {}) extends size {} (root {})",
                self.new.size, self.new.root, self.old.size, self.old.root
            ));
        }
        Ok(())
    }
}

/// Reads and checks a proof file of either kind. Signatures are not checked here.
pub(crate) fn verify_text(text: &str) -> Result<Verified, String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not a proof file: {e}"))?;
    match v.get("schema").and_then(|s| s.as_str()) {
        Some(INCLUSION_SCHEMA) => {
            let p: InclusionProof =
                serde_json::from_value(v).map_err(|e| format!("malformed inclusion proof: {e}"))?;
            p.check()?;
            Ok(Verified::Inclusion(p))
        }
        Some(CONSISTENCY_SCHEMA) => {
            let p: ConsistencyProof = serde_json::from_value(v)
                .map_err(|e| format!("malformed consistency proof: {e}"))?;
            p.check()?;
            Ok(Verified::Consistency(p))
        }
        Some(other) => Err(format!("unknown proof schema {other:?}")),
        None => Err("not a proof file: no \"schema\"".into()),
    }
}
