//! `git forum append`: witness one entry.

use std::path::PathBuf;

use super::{CliError, Ctx};
use crate::ledger::{NewEntry, canonical};

/// Append one entry. The payload is any JSON value; numbers keep their identity (`1` is not
/// `1.0`) and integers of any width are kept exactly, so hashes match Forum's.
#[derive(Debug, clap::Args)]
pub(crate) struct AppendArgs {
    #[command(flatten)]
    pub(crate) req: crate::surface::request::work::Append,
    /// Timestamp in seconds since 1970 (default: GIT_FORUM_TIMESTAMP, else the clock).
    #[arg(long)]
    pub(crate) ts: Option<f64>,
    /// Read the payload JSON from PATH (`-` for standard input).
    #[arg(long, value_name = "PATH")]
    pub(crate) payload_file: Option<PathBuf>,
    /// What a secret in the payload does: redact it (a marker naming the rule, and a
    /// secret_redacted entry after this one), block it (nothing is written) or allow it.
    /// Default: [secrets] mode in .forum/policy.toml, else redact.
    #[arg(long, value_name = "MODE", value_parser = ["redact", "block", "allow"])]
    pub(crate) secrets: Option<String>,
}

/// The most payload text `--payload-file` reads: twice the canonical body limit, room for
/// whitespace and for escapes that the canonical form writes shorter.
pub(crate) const MAX_PAYLOAD_INPUT_BYTES: u64 = 2 * crate::ledger::MAX_PAYLOAD_BYTES as u64;

/// Reads the payload named by `--payload` or `--payload-file`.
pub(crate) fn read_payload(
    inline: Option<&str>,
    file: Option<&PathBuf>,
) -> Result<canonical::Value, CliError> {
    let (text, from) = match (inline, file) {
        (Some(t), _) => (t.to_string(), "--payload".to_string()),
        (None, Some(p)) => {
            let text =
                super::input::read_limited_text(p, MAX_PAYLOAD_INPUT_BYTES, "payload file", "")
                    .map_err(CliError::usage)?;
            (text, super::input::source_name(p))
        }
        (None, None) => {
            return Err(CliError::usage(
                "give the payload with --payload JSON or --payload-file PATH",
            ));
        }
    };
    canonical::parse(text.trim_end_matches(['\n', '\r']))
        .map_err(|e| CliError::usage(format!("the payload from {from} is not valid JSON: {e}")))
}

pub(crate) fn run(ctx: &Ctx, args: AppendArgs) -> Result<(), CliError> {
    let req = args.req;
    let payload = match (req.payload, args.payload_file.as_ref()) {
        (Some(p), _) => p.0,
        (None, file) => read_payload(None, file)?,
    };
    let causal_parent = req.causal_parent;
    let new = NewEntry {
        actor: req.actor,
        kind: req.kind,
        causal_parent,
        payload,
        ts: ctx.now(args.ts)?,
    };
    let policy = match &args.secrets {
        Some(m) => crate::secrets::SecretsPolicy {
            mode: crate::secrets::Mode::parse(m).map_err(CliError::usage)?,
            ..Default::default()
        },
        None => crate::config::load_policy(&ctx.dir, None)?.secrets,
    };
    let guard = crate::secrets::Guard::new(crate::secrets::Scanner::new(), policy);
    let r = crate::surface::append::append_guarded(&mut ctx.store()?, &new, &guard)?;
    if ctx.json {
        ctx.out_report(&r)
    } else {
        ctx.out(&format!(
            "appended seq {} ({}) as {}",
            r.seq, r.entry_hash, r.commit
        ))?;
        if let Some(w) = r.secret_redacted {
            ctx.out(&format!(
                "secrets in the payload were replaced by markers before hashing; seq {w} (secret_redacted) says where"
            ))?;
        }
        Ok(())
    }
}
