//! `prove` and `verify-proof`: inclusion and consistency proofs as self-contained files.

use std::path::PathBuf;

use super::{CliError, Ctx};
use crate::surface::proof::{self as surface, Ask};
use crate::surface::tlog::{self as st, Checked, b64};

/// Write a proof: that entry SEQ is in the ledger's checkpoint, or (with --consistency-from M)
/// that the ledger's checkpoint extends its checkpoint of size M.
#[derive(Debug, clap::Args)]
pub(crate) struct ProveArgs {
    /// Which proof: the request the daemon and MCP take (Forum's and the C2SP one alike).
    #[command(flatten)]
    pub(crate) req: crate::surface::request::ledger::Prove,
    /// Write the proof to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub(crate) out: Option<PathBuf>,
    /// Print a standard C2SP tlog-proof (index, audit path, the signed checkpoint note of
    /// `checkpoint --note`) instead of git forum's own proof.
    #[arg(long, conflicts_with_all = ["consistency_from", "tlog"])]
    pub(crate) tlog_proof: bool,
    /// With --consistency-from: print the standard consistency path between two signed notes.
    #[arg(long, requires = "consistency_from")]
    pub(crate) tlog: bool,
}

/// The largest proof file `verify-proof` reads. A proof holds one entry's fields, at most 64
/// hashes per path and its signatures: a few KiB.
pub(crate) const MAX_PROOF_BYTES: u64 = 1024 * 1024;

/// Check a proof file without a repository. Exit 0 when it holds, 1 when it does not.
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyProofArgs {
    /// The proof file (`-` for standard input).
    pub(crate) file: PathBuf,
    /// Also require this checkpoint root (a root you trust, e.g. one you recorded or signed).
    #[arg(long, value_name = "HEX")]
    pub(crate) root: Option<String>,
    /// Also require this checkpoint size.
    #[arg(long, value_name = "N")]
    pub(crate) size: Option<u64>,
    /// Check the checkpoint's ssh signature against this allowed-signers file (git's
    /// `gpg.ssh.allowedSignersFile` format); openpgp signatures are checked with gpg's keyring.
    #[arg(long, value_name = "FILE")]
    pub(crate) allowed_signers: Option<PathBuf>,
    /// Refuse a proof whose checkpoint is not signed by a trusted key.
    #[arg(long)]
    pub(crate) require_signature: bool,
    /// A trusted signed-note verifier key (`name+hash+base64`) for standard proofs; repeatable
    /// (default: `forum.noteVerifiers`).
    #[arg(long, value_name = "KEY")]
    pub(crate) note_verifier: Vec<String>,
    /// The entry hash a tlog-proof is about (a tlog-proof names only its index).
    #[arg(long, value_name = "HEX")]
    pub(crate) entry_hash: Option<String>,
}

/// A proof that was read but does not hold: `{ok: false, problem}` with `--json` (exit 1),
/// else one line naming the file and why.
pub(crate) fn does_not_hold(ctx: &Ctx, file: &std::path::Path, why: &str) -> Result<(), CliError> {
    if ctx.json {
        ctx.out_report(&surface::ProofFailure::new(why))?;
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
                .map_err(|e| CliError::internal(format!("writing {}: {e}", p.display())))?;
            eprintln!("wrote {}", p.display());
            Ok(())
        }
    }
}

pub(crate) fn prove(ctx: &Ctx, args: ProveArgs) -> Result<(), CliError> {
    if args.tlog_proof || args.tlog {
        let text = prove_tlog(ctx, &args)?;
        return write_out(ctx, args.out.as_ref(), text.trim_end_matches('\n'));
    }
    let store = ctx.existing_store()?;
    let ask = match (args.req.seq, args.req.consistency_from) {
        (_, Some(m)) => Ask::Consistency(m),
        (Some(seq), None) => Ask::Inclusion(seq),
        (None, None) => unreachable!("clap requires SEQ without --consistency-from"),
    };
    // A fetched copy (REMOTE:NAME) is proved under the name its checkpoints are signed for.
    // Answered from the cache of Forum's tree: the entry through the seq index, the hashes
    // from O(log n) chunks.
    let r = surface::prove_stored(
        &store,
        store.signature_ledger(),
        &store.signed_checkpoints()?,
        ask,
        args.req.size,
    )?;
    // The proof file keeps its fields in the order a reader expects (the struct's order).
    let text = serde_json::to_string_pretty(&r)
        .map_err(|e| crate::surface::Error::internal(format!("encoding the proof: {e}")))?;
    write_out(ctx, args.out.as_ref(), &text)
}

pub(crate) fn verify_proof(ctx: &Ctx, args: VerifyProofArgs) -> Result<(), CliError> {
    let text = super::input::read_limited_text(&args.file, MAX_PROOF_BYTES, "proof file", "")
        .map_err(CliError::usage)?;
    if text.starts_with(crate::surface::tlog::TLOG_PROOF_HEADER)
        || text.starts_with(crate::surface::tlog::CONSISTENCY_HEADER)
    {
        return verify_tlog_proof(ctx, &args, &text);
    }
    let need = surface::Require {
        root: args.root.as_deref(),
        size: args.size,
        allowed_signers: args.allowed_signers.as_deref(),
        signature: args.require_signature,
    };
    match surface::verify_proof(&text, &need) {
        Ok((v, check)) => {
            if ctx.json {
                return ctx.out_report(&check);
            }
            ctx.out(&check.summary(&v))?;
            match check.signer() {
                Some(who) => ctx.out(&format!("  checkpoint signed by {who}")),
                None => Ok(()),
            }
        }
        Err(why) => does_not_hold(ctx, &args.file, &why.to_string()),
    }
}

/// `prove --tlog-proof` / `--consistency-from M --tlog`: the C2SP proof text, with the entry
/// hash it is about on standard error.
fn prove_tlog(ctx: &Ctx, args: &ProveArgs) -> Result<String, CliError> {
    let store = ctx.existing_store()?;
    let ask = match args.req.consistency_from {
        Some(m) => st::TlogAsk::Consistency(m),
        None => st::TlogAsk::Inclusion(
            args.req
                .seq
                .expect("clap requires SEQ without --consistency-from"),
        ),
    };
    let proof = st::prove(
        &store,
        store.signature_ledger(),
        args.req.size,
        ask,
        !ctx.json,
    )?;
    if let Some((seq, entry_hash)) = &proof.entry {
        eprintln!("entry {seq}: entry_hash {entry_hash} (pass it to verify-proof --entry-hash)");
    }
    Ok(proof.text)
}

/// `verify-proof` of a C2SP proof: checks it against the trusted note keys and prints what holds.
fn verify_tlog_proof(ctx: &Ctx, args: &VerifyProofArgs, text: &str) -> Result<(), CliError> {
    let keys = st::trusted_keys(&args.note_verifier);
    match st::check_text(text, &keys, args.entry_hash.as_deref()) {
        Ok(Checked::Inclusion { seq, cp, signers }) => {
            if ctx.json {
                ctx.out_json(&serde_json::json!({"ok": true, "kind": "tlog-inclusion",
                    "origin": cp.origin, "seq": seq, "size": cp.size, "root": b64(&cp.root),
                    "forum_root": cp.forum_root, "signers": signers}))
            } else {
                ctx.out(&format!(
                    "ok: seq {seq} is in {} at size {}, root {}, signed by {}",
                    cp.origin,
                    cp.size,
                    b64(&cp.root),
                    signers.join(", ")
                ))
            }
        }
        Ok(Checked::Consistency { old, new, signers }) => {
            if ctx.json {
                ctx.out_json(&serde_json::json!({"ok": true, "kind": "tlog-consistency",
                    "origin": new.origin, "old": {"size": old.size, "root": b64(&old.root)},
                    "new": {"size": new.size, "root": b64(&new.root)}, "signers": signers}))
            } else {
                ctx.out(&format!(
                    "ok: {} at size {} extends size {}, signed by {}",
                    new.origin,
                    new.size,
                    old.size,
                    signers.join(", ")
                ))
            }
        }
        Err(why) => does_not_hold(ctx, &args.file, &why.to_string()),
    }
}
