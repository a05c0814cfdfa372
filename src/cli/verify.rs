//! `verify`, `checkpoint` and `sync`.

use super::{CliError, Ctx};

/// Check the ledger. Exit 0 when it verifies, 1 when it does not.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Also check every tree and body against its payload hash.
    #[arg(long)]
    pub deep: bool,
}

/// Print the checkpoint (Merkle root over every entry hash).
#[derive(Debug, clap::Args)]
pub struct CheckpointArgs {
    /// Print only; do not record the checkpoint as a witness.
    #[arg(long, conflicts_with = "sign")]
    pub no_record: bool,
    /// Also sign the checkpoint with your git signing key (`user.signingKey`, `gpg.format`)
    /// and store the signature on refs/forum/checkpoints/NAME, where it travels with the ledger.
    #[arg(long)]
    pub sign: bool,
}

/// Flush the repository to disk and empty the ledger's write-ahead log.
#[derive(Debug, clap::Args)]
pub struct SyncArgs {}

pub fn verify(ctx: &Ctx, args: VerifyArgs) -> Result<(), CliError> {
    let store = ctx.store()?;
    let r = store.verify(args.deep)?;
    let ok = r.passed();
    if ctx.json {
        let redacted: Vec<_> = r
            .redacted
            .iter()
            .map(|(s, h)| serde_json::json!({"seq": s, "payload_hash": h}))
            .collect();
        ctx.out_json(&serde_json::json!({
            "schema": "git-forum.verify/v1",
            "ledger": ctx.ledger,
            "ok": ok,
            "chain": r.chain,
            "deep": if args.deep { serde_json::Value::Bool(r.deep_ok == Some(true)) } else { serde_json::Value::Null },
            "entries": r.entries,
            "checkpoint": r.checkpoint,
            "first_bad_seq": r.first_bad_seq,
            "problem": r.problem,
            "code": r.code,
            "redacted": redacted,
            "witnesses": {"reflog_lines": r.reflog_lines, "recorded_checkpoints": r.checkpoints_checked},
            "signatures": r.signatures.iter().map(|(size, root, signer)| serde_json::json!({"size": size, "root": root, "signer": signer})).collect::<Vec<_>>(),
            "notes": r.notes,
        }))?;
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
        for (seq, h) in &r.redacted {
            ctx.out(&format!("  seq {seq}: body redacted ({h})"))?;
        }
        ctx.out(&format!(
            "  tail witnesses: {} reflog line(s), {} recorded checkpoint(s)",
            r.reflog_lines, r.checkpoints_checked
        ))?;
        for (size, root, signer) in &r.signatures {
            ctx.out(&format!("  signed: size {size} (root {root}) by {signer}"))?;
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
            r.code.unwrap_or("")
        ))?;
    }
    if ok { Ok(()) } else { Err(CliError::silent(1)) }
}

pub fn checkpoint(ctx: &Ctx, args: CheckpointArgs) -> Result<(), CliError> {
    let store = ctx.existing_store()?;
    let r = store.verify(false)?;
    if !r.passed() {
        return Err(CliError::fail(format!(
            "ledger {} does not verify ({}); refusing to record a checkpoint of it",
            ctx.ledger,
            r.problem.unwrap_or_default()
        )));
    }
    let signature = if args.sign {
        let cp = crate::ledger::proof::Checkpoint {
            size: r.entries,
            root: r.checkpoint.clone(),
        };
        Some(store.sign_checkpoint(&cp)?.format)
    } else {
        None
    };
    // Recorded after signing, so a signing failure leaves nothing behind.
    if !args.no_record {
        store.record_checkpoint(r.entries, &r.checkpoint)?;
    }
    if ctx.json {
        ctx.out_json(
            &serde_json::json!({"ledger": ctx.ledger, "size": r.entries, "root": r.checkpoint,
            "recorded": !args.no_record, "signed": signature}),
        )
    } else {
        ctx.out(&format!("{} {}", r.entries, r.checkpoint))?;
        if let Some(f) = signature {
            eprintln!(
                "signed ({f}) and stored on refs/forum/checkpoints/{}",
                ctx.ledger
            );
        }
        Ok(())
    }
}

pub fn sync(ctx: &Ctx, _args: SyncArgs) -> Result<(), CliError> {
    let store = ctx.store()?;
    store.sync()?;
    if ctx.json {
        ctx.out_json(&serde_json::json!({"synced": true}))
    } else {
        ctx.out("synced")
    }
}
