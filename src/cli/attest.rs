//! `git forum attest [RUN] [--out FILE]` and `git forum attest --verify FILE [--key PUB]`: a
//! signed in-toto attestation of what a `--work` run shipped, and its check against the
//! ledger. Thin over `surface::attest`; the command line's own flags name files.

use std::path::PathBuf;

use super::{CliError, Ctx};
use crate::surface::attest::AttestReport;
use crate::surface::request::attest::Attest;

/// Attest what a --work run shipped (in-toto, signed), or check an attestation.
#[derive(Debug, clap::Args)]
pub(crate) struct AttestArgs {
    /// Which run: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: Attest,
    /// Write the envelope to FILE instead of standard output
    #[arg(long, value_name = "FILE", conflicts_with = "verify")]
    pub(crate) out: Option<PathBuf>,
    /// The signer key (a keygen NAME.key file); default: forum.noteKey
    #[arg(long, value_name = "FILE", conflicts_with = "verify")]
    pub(crate) note_key: Option<PathBuf>,
    /// Check the attestation in FILE (a DSSE envelope) against the ledger instead
    #[arg(long, value_name = "FILE")]
    pub(crate) verify: Option<PathBuf>,
    /// With --verify: a verifier key file (a keygen NAME.pub), repeatable; default: forum.noteVerifiers
    #[arg(long, value_name = "PUB", requires = "verify")]
    pub(crate) key: Vec<PathBuf>,
}

/// `git forum attest`.
pub(crate) fn attest(ctx: &Ctx, args: AttestArgs) -> Result<(), CliError> {
    let mut req = args.req;
    if let Some(file) = &args.verify {
        req.envelope = Some(crate::config::read_text(file, "attestation")?);
        for k in &args.key {
            req.keys.push(
                crate::config::read_text(k, "verifier key")?
                    .trim()
                    .to_string(),
            );
        }
    }
    let store = ctx.existing_store()?;
    let report =
        crate::surface::attest::run_request(&ctx.dir, &ctx.ledger, &store, &req, args.note_key)?;
    if let (Some(out), Some(env)) = (&args.out, &report.envelope) {
        let text =
            serde_json::to_string_pretty(env).map_err(|e| CliError::internal(e.to_string()))?;
        std::fs::write(out, format!("{text}\n")).map_err(|e| {
            CliError::fail(format!(
                "--out {}: {e}; name a file in a directory you can write",
                out.display()
            ))
        })?;
    }
    if ctx.json {
        return ctx.out_report(&report);
    }
    match (&report.envelope, &args.out) {
        (Some(env), None) => {
            let text =
                serde_json::to_string_pretty(env).map_err(|e| CliError::internal(e.to_string()))?;
            ctx.out(&text)
        }
        _ => ctx.out(&summary(&report, args.out.as_ref())),
    }
}

/// What was attested or checked, in a few lines.
fn summary(r: &AttestReport, out: Option<&PathBuf>) -> String {
    let head = match (r.mode, out) {
        ("verify", _) => format!(
            "attestation verified: run {} of ledger {}, signed by {}",
            r.run, r.ledger, r.keyid
        ),
        (_, Some(f)) => format!(
            "attested run {} of ledger {} in {}, signed by {}",
            r.run,
            r.ledger,
            f.display(),
            r.keyid
        ),
        _ => format!("attested run {} of ledger {}", r.run, r.ledger),
    };
    let mut lines = vec![head];
    for s in &r.subjects {
        lines.push(format!("  {}  {}", s.commit, s.name));
    }
    let note = if r.signed_note {
        "with its signed note"
    } else {
        "unsigned: run `git forum checkpoint --note` before attesting to include a signed note"
    };
    lines.push(format!(
        "  checkpoint {} entries, root {} ({note})",
        r.checkpoint_size, r.checkpoint_root
    ));
    lines.join("\n")
}
