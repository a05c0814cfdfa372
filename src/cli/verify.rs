//! `verify`, `checkpoint` and `sync`.

use super::{CliError, Ctx};

/// Check the ledger. Exit 0 when it verifies, 1 when it does not.
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyArgs {
    /// Also check every tree and body against its payload hash.
    #[arg(long)]
    pub(crate) deep: bool,
    /// A witness's cosignature verifier key (type 0x04, `keygen NAME --witness`) to check the
    /// recorded cosignatures with; repeatable (default: `forum.witnessVerifiers`).
    #[arg(long, value_name = "KEY")]
    pub(crate) witness_verifier: Vec<String>,
}

/// Print the checkpoint (Merkle root over every entry hash).
#[derive(Debug, clap::Args)]
pub(crate) struct CheckpointArgs {
    /// Print only; do not record the checkpoint as a witness.
    #[arg(long, conflicts_with = "sign")]
    pub(crate) no_record: bool,
    /// Also sign the checkpoint with your git signing key (`user.signingKey`, `gpg.format`)
    /// and store the signature on refs/forum/checkpoints/NAME, where it travels with the ledger.
    #[arg(long)]
    pub(crate) sign: bool,
}

/// Flush the repository to disk; the ledger's write-ahead log keeps its records.
#[derive(Debug, clap::Args)]
pub(crate) struct SyncArgs {}

pub(crate) fn verify(ctx: &Ctx, args: VerifyArgs) -> Result<(), CliError> {
    let store = ctx.reader()?;
    let keys = if args.witness_verifier.is_empty() {
        store.witness_verifier_keys_as_opened()
    } else {
        args.witness_verifier.clone()
    };
    let r = crate::surface::verify::verify_with(&store, &ctx.ledger, args.deep, &keys)?;
    let ok = r.ok;
    if ctx.json {
        ctx.out_json(&serde_json::to_value(&r).map_err(|e| CliError::internal(e.to_string()))?)?;
    } else if ok {
        let what = if args.deep {
            "chain, commits and bodies"
        } else {
            "chain and commits"
        };
        ctx.out(&format!(
            "ok: ledger {} verifies ({what}): {} entries, checkpoint {}",
            ctx.ledger, r.entries, r.checkpoint
        ))?;
        for red in &r.redacted {
            ctx.out(&format!(
                "  seq {}: body redacted ({})",
                red.seq, red.payload_hash
            ))?;
        }
        ctx.out(&format!(
            "  tail witnesses: {} reflog line(s), {} recorded checkpoint(s)",
            r.witnesses.reflog_lines, r.witnesses.recorded_checkpoints
        ))?;
        for s in &r.signatures {
            ctx.out(&format!(
                "  signed: size {} (root {}) by {}",
                s.size, s.root, s.signer
            ))?;
        }
        for n in &r.notes {
            ctx.out(&format!("  note: {n}"))?;
        }
    } else {
        let at = r
            .first_bad_seq
            .map(|s| format!(" at seq {s}"))
            .unwrap_or_default();
        ctx.out(&format!(
            "FAILED: ledger {} does not verify{at}: {} [{}]",
            ctx.ledger,
            r.problem.as_deref().unwrap_or("unknown problem"),
            r.code.map_or("", |c| c.as_str())
        ))?;
    }
    if ok { Ok(()) } else { Err(CliError::silent(1)) }
}

pub(crate) fn checkpoint(ctx: &Ctx, args: CheckpointArgs) -> Result<(), CliError> {
    // Recording or signing writes beside the ledger: a fetched copy is only read.
    let store = if args.no_record && !args.sign {
        ctx.existing_store()?
    } else {
        ctx.existing_writer()?
    };
    let what = crate::surface::ledger::Record {
        record: !args.no_record,
        sign: args.sign,
    };
    let r = crate::surface::ledger::record_checkpoint(&store, &ctx.ledger, what)?;
    if ctx.json {
        return ctx.out_report(&r);
    }
    ctx.out(&format!("{} {}", r.size, r.checkpoint))?;
    if let Some(f) = &r.signed {
        eprintln!(
            "signed ({f}) and stored on refs/forum/checkpoints/{}",
            ctx.ledger
        );
    }
    Ok(())
}

pub(crate) fn sync(ctx: &Ctx, _args: SyncArgs) -> Result<(), CliError> {
    let store = ctx.store()?;
    store.sync()?;
    if ctx.json {
        ctx.out_json(&serde_json::json!({"synced": true}))
    } else {
        ctx.out("synced")
    }
}
