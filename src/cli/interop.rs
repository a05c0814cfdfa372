//! `import` and `export`: Forum's on-disk ledger format.

use std::path::PathBuf;

use super::{CliError, Ctx};
use crate::ledger::{canonical, verify_chain};
use crate::surface::store::ImportError;
use crate::surface::store::forum_dir::{self, ForumDirError};

/// Import a Forum ledger directory into a new git ledger (same hashes, same checkpoint).
#[derive(Debug, clap::Args)]
pub(crate) struct ImportArgs {
    /// The Forum ledger directory (holding entries.jsonl and payloads.jsonl).
    pub(crate) dir: PathBuf,
    /// The most bytes to read from the directory (both files together); a line is at most
    /// 64 MiB whatever this says.
    #[arg(long, value_name = "BYTES", default_value_t = forum_dir::DEFAULT_MAX_BYTES)]
    pub(crate) max_bytes: u64,
}

/// Export the ledger as a Forum ledger directory that Forum opens and verifies.
#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    /// A new or empty directory to write entries.jsonl and payloads.jsonl into.
    pub(crate) dir: PathBuf,
}

impl From<ForumDirError> for CliError {
    fn from(e: ForumDirError) -> CliError {
        match e {
            ForumDirError::Io { .. } => CliError::internal(e.to_string()),
            _ => CliError::usage(e.to_string()),
        }
    }
}

impl From<ImportError> for CliError {
    fn from(e: ImportError) -> CliError {
        match e {
            ImportError::Dir(e) => e.into(),
            ImportError::Refused(why) => CliError::usage(why),
            ImportError::Store(e) => e.into(),
        }
    }
}

pub(crate) fn import(ctx: &Ctx, args: ImportArgs) -> Result<(), CliError> {
    let limits = forum_dir::Limits {
        total: args.max_bytes,
        raise: "pass --max-bytes BYTES to import a larger one",
        ..forum_dir::Limits::default()
    };
    let mut store = ctx.store()?;
    let done = store.import_forum_dir(&args.dir, &limits)?;
    for t in &done.torn {
        eprintln!(
            "warning: dropped a torn last line of {} (an interrupted append), as Forum does",
            t.display()
        );
    }
    let absent = done.absent_bodies;
    if absent > 0 {
        eprintln!(
            "warning: {absent} entr{} had no body in {} (Forum reads that as redacted); `verify --deep` flags them unless a redaction entry names them",
            if absent == 1 { "y" } else { "ies" },
            args.dir.display()
        );
    }
    if ctx.json {
        ctx.out_json(&serde_json::json!({
            "ledger": ctx.ledger, "entries": done.entries, "checkpoint": done.checkpoint,
            "commit": done.commit.to_string(), "absent_bodies": absent,
            "torn_lines_dropped": done.torn.len(),
        }))
    } else {
        ctx.out(&format!(
            "imported {} entries into ledger {}, checkpoint {}",
            done.entries, ctx.ledger, done.checkpoint
        ))
    }
}

pub(crate) fn export(ctx: &Ctx, args: ExportArgs) -> Result<(), CliError> {
    let store = ctx.existing_store()?;
    let walked = store.walk_back(None)?;
    let mut entries = Vec::with_capacity(walked.len());
    let mut commits = std::collections::HashMap::new();
    for (id, e) in walked.into_iter().rev() {
        commits.entry(e.payload_hash.clone()).or_insert(id);
        entries.push(e);
    }
    let report = verify_chain(&entries);
    if let Some((i, p)) = report.first_bad {
        return Err(CliError::conflict(format!(
            "ledger {} does not verify at seq {i} ({p}); run `git forum verify`",
            ctx.ledger
        )));
    }
    // A body that cannot be read (or does not hash to its entry) is the ledger's fault, not the
    // caller's: it is kept to be reported as such.
    let mut unreadable = None;
    // An imported ledger's bodies in the key order Forum wrote them, written in place of the
    // stored (sorted) body that is canonically the same, so payloads.jsonl comes back as it was.
    let kept = store.kept_forum_bodies()?;
    let written = forum_dir::write(
        &args.dir,
        &entries,
        |e| {
            let Some(id) = commits.get(&e.payload_hash) else {
                return Ok(None);
            };
            let read = store.body_of_commit(id).map_err(|err| {
                let message = err.to_string();
                unreadable = Some(err);
                ForumDirError::Corrupt(message)
            });
            match read? {
                None => Ok(None),
                Some(bytes) => {
                    let text = String::from_utf8(bytes).map_err(|_| {
                        ForumDirError::Corrupt(format!("body of seq {} is not UTF-8", e.seq))
                    })?;
                    if let Some(body) = kept.get(&e.payload_hash)
                        && body.canonical() == text
                    {
                        return Ok(Some(body.clone()));
                    }
                    canonical::parse(&text).map(Some).map_err(|err| {
                        ForumDirError::Corrupt(format!("body of seq {}: {err}", e.seq))
                    })
                }
            }
        },
        !ctx.no_fsync,
    );
    if let Some(err) = unreadable {
        return Err(err.into());
    }
    written?;
    if ctx.json {
        ctx.out_json(&serde_json::json!({"ledger": ctx.ledger, "dir": args.dir, "entries": entries.len(), "checkpoint": report.checkpoint}))
    } else {
        ctx.out(&format!(
            "exported {} entries to {}, checkpoint {}",
            entries.len(),
            args.dir.display(),
            report.checkpoint
        ))
    }
}
