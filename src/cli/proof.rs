//! `prove` and `verify-proof`: inclusion and consistency proofs as self-contained files.

use std::path::PathBuf;

use super::{CliError, Ctx};
use crate::ledger::merkle::{consistency_proof, inclusion_path, merkle_root};
use crate::ledger::proof::{
    CONSISTENCY_SCHEMA, Checkpoint, ConsistencyProof, INCLUSION_SCHEMA, InclusionProof, Verified,
    verify_text,
};
use crate::store::sign::{self, SignatureCheck};

/// Write a proof: that entry SEQ is in the ledger's checkpoint, or (with --consistency-from M)
/// that the ledger's checkpoint extends its checkpoint of size M.
#[derive(Debug, clap::Args)]
pub struct ProveArgs {
    /// The entry to prove included.
    #[arg(
        required_unless_present = "consistency_from",
        conflicts_with = "consistency_from"
    )]
    pub seq: Option<u64>,
    /// Prove instead that the ledger extends its first M entries.
    #[arg(long, value_name = "M")]
    pub consistency_from: Option<u64>,
    /// Prove against the checkpoint of the first N entries (default: the whole ledger).
    #[arg(long, value_name = "N")]
    pub size: Option<u64>,
    /// Write the proof to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print a standard C2SP tlog-proof (index, audit path, the signed checkpoint note of
    /// `checkpoint --note`) instead of git forum's own proof.
    #[arg(long, conflicts_with_all = ["consistency_from", "tlog"])]
    pub tlog_proof: bool,
    /// With --consistency-from: print the standard consistency path between two signed notes.
    #[arg(long, requires = "consistency_from")]
    pub tlog: bool,
}

/// The largest proof file `verify-proof` reads. A proof holds one entry's fields, at most 64
/// hashes per path and its signatures: a few KiB.
pub const MAX_PROOF_BYTES: u64 = 1024 * 1024;

/// Check a proof file without a repository. Exit 0 when it holds, 1 when it does not.
#[derive(Debug, clap::Args)]
pub struct VerifyProofArgs {
    /// The proof file (`-` for standard input).
    pub file: PathBuf,
    /// Also require this checkpoint root (a root you trust, e.g. one you recorded or signed).
    #[arg(long, value_name = "HEX")]
    pub root: Option<String>,
    /// Also require this checkpoint size.
    #[arg(long, value_name = "N")]
    pub size: Option<u64>,
    /// Check the checkpoint's ssh signature against this allowed-signers file (git's
    /// `gpg.ssh.allowedSignersFile` format); openpgp signatures are checked with gpg's keyring.
    #[arg(long, value_name = "FILE")]
    pub allowed_signers: Option<PathBuf>,
    /// Refuse a proof whose checkpoint is not signed by a trusted key.
    #[arg(long)]
    pub require_signature: bool,
    /// A trusted signed-note verifier key (`name+hash+base64`) for standard proofs; repeatable
    /// (default: `forum.noteVerifiers`).
    #[arg(long, value_name = "KEY")]
    pub note_verifier: Vec<String>,
    /// The entry hash a tlog-proof is about (a tlog-proof names only its index).
    #[arg(long, value_name = "HEX")]
    pub entry_hash: Option<String>,
}

/// A proof that was read but does not hold: `{ok: false, problem}` with `--json` (exit 1),
/// else one line naming the file and why.
pub(crate) fn does_not_hold(ctx: &Ctx, file: &std::path::Path, why: &str) -> Result<(), CliError> {
    if ctx.json {
        ctx.out_json(&serde_json::json!({"ok": false, "problem": why}))?;
        Err(CliError::silent(1))
    } else {
        Err(CliError::fail(format!(
            "proof {} does not hold: {why}",
            file.display()
        )))
    }
}

fn write_out(ctx: &Ctx, out: Option<&PathBuf>, text: &str) -> Result<(), CliError> {
    match out {
        None => ctx.out(text),
        Some(p) => {
            let tmp = p.with_extension("tmp-git-forum");
            std::fs::write(&tmp, format!("{text}\n"))
                .and_then(|_| std::fs::rename(&tmp, p))
                .map_err(|e| CliError::fail(format!("writing {}: {e}", p.display())))?;
            eprintln!("wrote {}", p.display());
            Ok(())
        }
    }
}

pub fn prove(ctx: &Ctx, args: ProveArgs) -> Result<(), CliError> {
    if args.tlog_proof || args.tlog {
        let text = super::tlog::prove(ctx, &args)?;
        return write_out(ctx, args.out.as_ref(), text.trim_end_matches('\n'));
    }
    let store = ctx.existing_store()?;
    let entries = store.entries()?;
    let len = entries.len() as u64;
    let size = args.size.unwrap_or(len);
    if size == 0 || size > len {
        return Err(CliError::usage(format!(
            "--size {size} is out of range: ledger {:?} has {len} entries",
            ctx.ledger
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
    let signed = store.signed_checkpoints()?;
    let signature_of = |cp: &Checkpoint| {
        signed
            .iter()
            .find(|s| s.ledger == ctx.ledger && s.checkpoint == *cp)
            .map(|s| s.signature.clone())
    };
    let text = if let Some(m) = args.consistency_from {
        if m > size {
            return Err(CliError::usage(format!(
                "--consistency-from {m} is larger than the size {size} proved"
            )));
        }
        let old = Checkpoint {
            size: m,
            root: merkle_root(&hashes[..m as usize]),
        };
        let proof = ConsistencyProof {
            schema: CONSISTENCY_SCHEMA.into(),
            ledger: ctx.ledger.clone(),
            old_signature: signature_of(&old),
            new_signature: signature_of(&checkpoint),
            old,
            new: checkpoint,
            proof: consistency_proof(&hashes, m as usize),
        };
        serde_json::to_string_pretty(&proof)
    } else {
        let seq = args
            .seq
            .expect("clap requires SEQ without --consistency-from");
        if seq >= size {
            return Err(CliError::fail(format!(
                "ledger {:?} has no entry at seq {seq} within its first {size} entries",
                ctx.ledger
            )));
        }
        let proof = InclusionProof {
            schema: INCLUSION_SCHEMA.into(),
            ledger: ctx.ledger.clone(),
            entry: entries[seq as usize].clone(),
            audit_path: inclusion_path(&hashes, seq as usize),
            signature: signature_of(&checkpoint),
            checkpoint,
        };
        serde_json::to_string_pretty(&proof)
    }
    .map_err(|e| CliError::fail(format!("encoding the proof: {e}")))?;
    write_out(ctx, args.out.as_ref(), &text)
}

pub fn verify_proof(ctx: &Ctx, args: VerifyProofArgs) -> Result<(), CliError> {
    let text = super::input::read_limited_text(&args.file, MAX_PROOF_BYTES, "proof file", "")
        .map_err(CliError::usage)?;
    if text.starts_with(crate::store::note::TLOG_PROOF_HEADER)
        || text.starts_with(crate::store::note::CONSISTENCY_HEADER)
    {
        return super::tlog::verify_proof(ctx, &args, &text);
    }
    let result = verify_text(&text).and_then(|v| {
        let cp = match &v {
            Verified::Inclusion(p) => &p.checkpoint,
            Verified::Consistency(p) => &p.new,
        };
        if let Some(r) = &args.root
            && *r != cp.root
        {
            return Err(format!(
                "the proof's checkpoint root is {}, not the required {r}",
                cp.root
            ));
        }
        if let Some(s) = args.size
            && s != cp.size
        {
            return Err(format!(
                "the proof's checkpoint size is {}, not the required {s}",
                cp.size
            ));
        }
        let (ledger, sig) = match &v {
            Verified::Inclusion(p) => (&p.ledger, p.signature.as_ref()),
            Verified::Consistency(p) => (&p.ledger, p.new_signature.as_ref()),
        };
        let signer = match sig {
            None if args.require_signature => return Err("the checkpoint is not signed".into()),
            None => None,
            Some(sig) => {
                let text = crate::ledger::proof::signed_text(ledger, cp);
                let here = std::path::Path::new(".");
                match sign::check(here, &text, sig, args.allowed_signers.as_deref()) {
                    SignatureCheck::Good(who) => Some(who),
                    SignatureCheck::Bad(why) => {
                        return Err(format!(
                            "the checkpoint signature is not trustworthy: {why}"
                        ));
                    }
                    SignatureCheck::Unchecked(why) if args.require_signature => {
                        return Err(format!(
                            "the checkpoint signature could not be checked: {why}"
                        ));
                    }
                    SignatureCheck::Unchecked(_) => None,
                }
            }
        };
        Ok((v, signer))
    });
    match result {
        Ok((v, signer)) => {
            let (summary, json) = match &v {
                Verified::Inclusion(p) => (
                    format!(
                        "ok: seq {} ({} by {}) is in ledger {} at size {}, root {}",
                        p.entry.seq,
                        p.entry.kind,
                        p.entry.actor,
                        p.ledger,
                        p.checkpoint.size,
                        p.checkpoint.root
                    ),
                    serde_json::json!({"ok": true, "kind": "inclusion", "ledger": p.ledger, "seq": p.entry.seq,
                        "entry_hash": p.entry.entry_hash, "size": p.checkpoint.size, "root": p.checkpoint.root,
                        "signed": p.signature.is_some(), "signer": signer}),
                ),
                Verified::Consistency(p) => (
                    format!(
                        "ok: ledger {} at size {} (root {}) extends size {} (root {})",
                        p.ledger, p.new.size, p.new.root, p.old.size, p.old.root
                    ),
                    serde_json::json!({"ok": true, "kind": "consistency", "ledger": p.ledger,
                        "old": {"size": p.old.size, "root": p.old.root}, "new": {"size": p.new.size, "root": p.new.root},
                        "signer": signer}),
                ),
            };
            if ctx.json {
                ctx.out_json(&json)
            } else {
                ctx.out(&summary)?;
                match signer {
                    Some(who) => ctx.out(&format!("  checkpoint signed by {who}")),
                    None => Ok(()),
                }
            }
        }
        Err(why) => does_not_hold(ctx, &args.file, &why),
    }
}
