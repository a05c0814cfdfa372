//! Proofs as surface operations: `prove` (an inclusion or a consistency proof of the ledger's
//! checkpoint; `git forum prove`, `POST /prove`, MCP `ledger_prove`) and `verify-proof` (a
//! proof file checked without a repository), each answering one typed report.

use std::path::Path;

use serde::Serialize;

use super::{Error, Report, Result};
use crate::ledger::Entry;
use crate::ledger::merkle::{consistency_proof, inclusion_path, merkle_root};
use crate::ledger::proof::{
    CONSISTENCY_SCHEMA, Checkpoint, ConsistencyProof, INCLUSION_SCHEMA, InclusionProof, ProofError,
    Verified, signed_text, verify_text,
};
use crate::store::sign::{self, SignatureCheck, StoredSignature};

/// What to prove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    /// That the entry at this seq is in the checkpoint.
    Inclusion(u64),
    /// That the checkpoint extends the ledger's checkpoint of this size.
    Consistency(u64),
}

/// A proof, written as the proof file itself (`verify-proof` reads it back).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub(crate) enum ProofReport {
    Inclusion(InclusionProof),
    Consistency(ConsistencyProof),
}

impl Report for ProofReport {
    /// The family name; each proof carries its own exact schema (`git-forum.inclusion-proof/v1`,
    /// `git-forum.consistency-proof/v1`) in its `schema` field.
    const SCHEMA: &'static str = "git-forum.proof/v1";
}

/// A proof of `ask` against the checkpoint of the first `size` entries (all by default) of
/// `entries`, the ledger `ledger`; a checkpoint found among `signed` carries its signature.
pub(crate) fn prove(
    entries: &[Entry],
    ledger: &str,
    signed: &[StoredSignature],
    ask: Ask,
    size: Option<u64>,
) -> Result<ProofReport> {
    let len = entries.len() as u64;
    if len == 0 {
        return Err(Error::not_found(format!(
            "ledger {ledger:?} has no entries yet: append one before asking for a proof"
        )));
    }
    let size = size.unwrap_or(len);
    if size == 0 || size > len {
        return Err(Error::usage(format!(
            "size {size} is out of range: ledger {ledger:?} has {len} entries; give a size from 1 to {len}"
        )));
    }
    let hashes: Vec<&str> = entries[..size as usize]
        .iter()
        .map(|e| e.entry_hash.as_str())
        .collect();
    let checkpoint = Checkpoint {
        size,
        root: merkle_root(&hashes),
    };
    let signature_of = |cp: &Checkpoint| {
        signed
            .iter()
            .find(|s| s.ledger == ledger && s.checkpoint == *cp)
            .map(|s| s.signature.clone())
    };
    Ok(match ask {
        Ask::Inclusion(seq) => {
            if seq >= size {
                return Err(Error::not_found(format!(
                    "ledger {ledger:?} has no entry at seq {seq} within its first {size} entries"
                )));
            }
            ProofReport::Inclusion(InclusionProof {
                schema: INCLUSION_SCHEMA.into(),
                ledger: ledger.to_string(),
                entry: entries[seq as usize].clone(),
                audit_path: inclusion_path(&hashes, seq as usize),
                signature: signature_of(&checkpoint),
                checkpoint,
            })
        }
        Ask::Consistency(m) => {
            if m > size {
                return Err(Error::usage(format!(
                    "the consistency proof's old size {m} is larger than the size {size} proved; give an old size of at most {size}"
                )));
            }
            let old = Checkpoint {
                size: m,
                root: merkle_root(&hashes[..m as usize]),
            };
            ProofReport::Consistency(ConsistencyProof {
                schema: CONSISTENCY_SCHEMA.into(),
                ledger: ledger.to_string(),
                old_signature: signature_of(&old),
                new_signature: signature_of(&checkpoint),
                old,
                new: checkpoint,
                proof: consistency_proof(&hashes, m as usize),
            })
        }
    })
}

/// What a proof must show besides holding.
#[derive(Debug, Clone, Default)]
pub(crate) struct Require<'a> {
    /// This checkpoint root.
    pub(crate) root: Option<&'a str>,
    /// This checkpoint size.
    pub(crate) size: Option<u64>,
    /// The allowed-signers file ssh signatures are checked against.
    pub(crate) allowed_signers: Option<&'a Path>,
    /// A signature by a trusted key.
    pub(crate) signature: bool,
}

/// A proof that holds: what it shows, and who signed its checkpoint when that was checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub(crate) enum ProofCheck {
    Inclusion {
        ok: bool,
        kind: &'static str,
        ledger: String,
        seq: u64,
        entry_hash: String,
        size: u64,
        root: String,
        signed: bool,
        signer: Option<String>,
    },
    Consistency {
        ok: bool,
        kind: &'static str,
        ledger: String,
        old: Checkpoint,
        new: Checkpoint,
        signer: Option<String>,
    },
}

impl Report for ProofCheck {
    const SCHEMA: &'static str = "git-forum.proof-check/1";
}

/// A proof that was read but does not hold, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ProofFailure {
    pub(crate) ok: bool,
    pub(crate) problem: String,
}

impl Report for ProofFailure {
    const SCHEMA: &'static str = "git-forum.proof-check/1";
}

impl ProofFailure {
    pub(crate) fn new(problem: impl Into<String>) -> ProofFailure {
        ProofFailure {
            ok: false,
            problem: problem.into(),
        }
    }
}

impl ProofCheck {
    /// The one line `verify-proof` prints when the proof holds.
    pub(crate) fn summary(&self, v: &Verified) -> String {
        match v {
            Verified::Inclusion(p) => format!(
                "ok: seq {} ({} by {}) is in ledger {} at size {}, root {}",
                p.entry.seq,
                p.entry.kind,
                p.entry.actor,
                p.ledger,
                p.checkpoint.size,
                p.checkpoint.root
            ),
            Verified::Consistency(p) => format!(
                "ok: ledger {} at size {} (root {}) extends size {} (root {})",
                p.ledger, p.new.size, p.new.root, p.old.size, p.old.root
            ),
        }
    }

    /// Who signed the checkpoint, when the signature was checked and good.
    pub(crate) fn signer(&self) -> Option<&str> {
        match self {
            ProofCheck::Inclusion { signer, .. } | ProofCheck::Consistency { signer, .. } => {
                signer.as_deref()
            }
        }
    }
}

/// Why a proof does not hold (the line after `proof FILE does not hold: `).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProofRefusal {
    /// The proof itself is malformed or does not verify.
    #[error(transparent)]
    Proof(#[from] ProofError),
    /// `--root` names another root.
    #[error("the proof's checkpoint root is {have}, not the required {want}")]
    Root { have: String, want: String },
    /// `--size` names another size.
    #[error("the proof's checkpoint size is {have}, not the required {want}")]
    Size { have: u64, want: u64 },
    /// `--require-signature` and no signature.
    #[error("the checkpoint is not signed")]
    Unsigned,
    /// The signature does not verify (git's tools say why).
    #[error("the checkpoint signature is not trustworthy: {0}")]
    BadSignature(String),
    /// `--require-signature` and the signature could not be checked (why, in git's words).
    #[error("the checkpoint signature could not be checked: {0}")]
    Unchecked(String),
}

/// Checks the proof `text` (git forum's own JSON proof) and what `need` requires of it; `Err`
/// says why it does not hold. Signatures are checked with git's tools in the current
/// directory (`gpg.ssh.allowedSignersFile`, gpg's keyring) unless `need` names a file.
pub(crate) fn verify_proof(
    text: &str,
    need: &Require<'_>,
) -> std::result::Result<(Verified, ProofCheck), ProofRefusal> {
    let v = verify_text(text)?;
    let cp = match &v {
        Verified::Inclusion(p) => &p.checkpoint,
        Verified::Consistency(p) => &p.new,
    };
    if let Some(r) = need.root
        && r != cp.root
    {
        return Err(ProofRefusal::Root {
            have: cp.root.clone(),
            want: r.to_string(),
        });
    }
    if let Some(s) = need.size
        && s != cp.size
    {
        return Err(ProofRefusal::Size {
            have: cp.size,
            want: s,
        });
    }
    let (ledger, sig) = match &v {
        Verified::Inclusion(p) => (&p.ledger, p.signature.as_ref()),
        Verified::Consistency(p) => (&p.ledger, p.new_signature.as_ref()),
    };
    let signer = match sig {
        None if need.signature => return Err(ProofRefusal::Unsigned),
        None => None,
        Some(sig) => {
            let signed = signed_text(ledger, cp);
            match sign::check(Path::new("."), &signed, sig, need.allowed_signers) {
                SignatureCheck::Good(who) => Some(who),
                SignatureCheck::Bad(why) => return Err(ProofRefusal::BadSignature(why)),
                SignatureCheck::Unchecked(why) if need.signature => {
                    return Err(ProofRefusal::Unchecked(why));
                }
                SignatureCheck::Unchecked(_) => None,
            }
        }
    };
    let check = match &v {
        Verified::Inclusion(p) => ProofCheck::Inclusion {
            ok: true,
            kind: "inclusion",
            ledger: p.ledger.clone(),
            seq: p.entry.seq,
            entry_hash: p.entry.entry_hash.clone(),
            size: p.checkpoint.size,
            root: p.checkpoint.root.clone(),
            signed: p.signature.is_some(),
            signer,
        },
        Verified::Consistency(p) => ProofCheck::Consistency {
            ok: true,
            kind: "consistency",
            ledger: p.ledger.clone(),
            old: p.old.clone(),
            new: p.new.clone(),
            signer,
        },
    };
    Ok((v, check))
}
