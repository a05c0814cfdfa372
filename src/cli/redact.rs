//! `git forum redact`: remove a body for good while every hash and checkpoint stays the same.

use super::{CliError, Ctx};

/// Remove the body with PAYLOAD_HASH from every entry that holds it. A `redaction` entry records
/// the hash and the reason; entry hashes, the chain and every checkpoint and proof stay valid
/// (`verify --deep` reports the body as redacted). Commit ids from the first such entry on
/// change, so a ledger already pushed needs a push the server's hook accepts as redaction-only.
#[derive(Debug, clap::Args)]
pub(crate) struct RedactArgs {
    /// The payload hash of the body to remove (see `git forum show SEQ`), or the SEQ of an
    /// entry whose body it is (what `git forum push` names when a body carries a secret).
    pub(crate) payload_hash: String,
    /// Why the body is removed (recorded in the ledger).
    #[arg(long)]
    pub(crate) reason: String,
    /// Who redacts.
    #[arg(long, default_value = "git-forum")]
    pub(crate) actor: String,
}

pub(crate) fn run(ctx: &Ctx, args: RedactArgs) -> Result<(), CliError> {
    let mut store = ctx.existing_writer()?;
    let ts = ctx.now(None)?;
    let payload_hash = match args.payload_hash.parse::<u64>() {
        Ok(seq) if args.payload_hash.len() < 64 => {
            let entry = crate::ledger::Storage::get(&store, seq)
                .map_err(|e| CliError::internal(e.to_string()))?
                .ok_or_else(|| {
                    CliError::not_found(format!(
                        "ledger {} has no entry at seq {seq}; see `git forum log`",
                        ctx.ledger
                    ))
                })?;
            entry.payload_hash
        }
        _ => args.payload_hash.clone(),
    };
    let args = RedactArgs {
        payload_hash,
        ..args
    };
    let done = store.redact(&args.payload_hash, &args.reason, &args.actor, ts)?;
    if ctx.json {
        ctx.out_json(&serde_json::json!({
            "seq": done.seq,
            "payload_hash": args.payload_hash,
            "redacted_seqs": done.entries,
            "old_tip": done.old_tip.to_string(),
            "new_tip": done.new_tip.to_string(),
        }))
    } else {
        ctx.out(&format!(
            "redacted {} from seq {:?} (redaction entry seq {}); the old commits are unreachable and `git gc` removes the body",
            args.payload_hash, done.entries, done.seq
        ))
    }
}
