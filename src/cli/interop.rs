//! `import` and `export`: Forum's on-disk ledger format.

use std::path::PathBuf;

use super::{CliError, Ctx};
use crate::ledger::{canonical, verify_chain};
use crate::store::forum_dir::{self, ForumDirError};

/// Import a Forum ledger directory into a new git ledger (same hashes, same checkpoint).
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The Forum ledger directory (holding entries.jsonl and payloads.jsonl).
    pub dir: PathBuf,
    /// The most bytes to read from the directory (both files together); a line is at most
    /// 64 MiB whatever this says.
    #[arg(long, value_name = "BYTES", default_value_t = forum_dir::DEFAULT_MAX_BYTES)]
    pub max_bytes: u64,
}

/// Export the ledger as a Forum ledger directory that Forum opens and verifies.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// A new or empty directory to write entries.jsonl and payloads.jsonl into.
    pub dir: PathBuf,
}

impl From<ForumDirError> for CliError {
    fn from(e: ForumDirError) -> CliError {
        match e {
            ForumDirError::Io { .. } => CliError::internal(e.to_string()),
            _ => CliError::usage(e.to_string()),
        }
    }
}

pub fn import(ctx: &Ctx, args: ImportArgs) -> Result<(), CliError> {
    let forum = forum_dir::read_with(
        &args.dir,
        &forum_dir::Limits {
            total: args.max_bytes,
            raise: "pass --max-bytes BYTES to import a larger one",
            ..forum_dir::Limits::default()
        },
    )?;
    let report = verify_chain(&forum.entries);
    if let Some((i, p)) = report.first_bad {
        return Err(CliError::usage(format!(
            "{} does not verify at row {i}: {p}; nothing was imported",
            args.dir.display()
        )));
    }
    let mut items = Vec::with_capacity(forum.entries.len());
    let mut absent = 0usize;
    for e in &forum.entries {
        let body = match forum.payloads.get(&e.payload_hash) {
            Some(b) => Some(forum_dir::checked_body(e, b).map_err(|why| {
                CliError::usage(format!(
                    "{}: {why}; nothing was imported",
                    args.dir.display()
                ))
            })?),
            None => {
                absent += 1;
                None
            }
        };
        items.push((e.clone(), body));
    }
    let mut store = ctx.store()?;
    let tip = store.import_entries(&items)?;
    for t in &forum.torn {
        eprintln!(
            "warning: dropped a torn last line of {} (an interrupted append), as Forum does",
            t.display()
        );
    }
    if absent > 0 {
        eprintln!(
            "warning: {absent} entr{} had no body in {} (Forum reads that as redacted); `verify --deep` flags them unless a redaction entry names them",
            if absent == 1 { "y" } else { "ies" },
            args.dir.display()
        );
    }
    if ctx.json {
        ctx.out_json(&serde_json::json!({
            "ledger": ctx.ledger, "entries": report.entries, "checkpoint": report.checkpoint,
            "commit": tip.to_string(), "absent_bodies": absent,
            "torn_lines_dropped": forum.torn.len(),
        }))
    } else {
        ctx.out(&format!(
            "imported {} entries into ledger {}, checkpoint {}",
            report.entries, ctx.ledger, report.checkpoint
        ))
    }
}

pub fn export(ctx: &Ctx, args: ExportArgs) -> Result<(), CliError> {
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
