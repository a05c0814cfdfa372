//! `push` and `fetch`: ledgers through ordinary git remotes.

use serde_json::{Value, json};

use super::{CliError, Ctx};
use crate::surface::store::{LEDGER_PREFIX, open_repo};
use crate::surface::sync::{self, FetchResult, Git, PushStatus};

/// Verify ledgers, then push them to a remote without force.
#[derive(Debug, clap::Args)]
pub(crate) struct PushArgs {
    /// The remote to push to: a configured remote name or a URL.
    #[arg(default_value = "origin")]
    pub(crate) remote: String,
    /// Push every ledger (refs/forum/ledgers/*) instead of only --ledger.
    #[arg(long)]
    pub(crate) all: bool,
}

/// Fetch a remote's ledgers, verify them and check them against the last checkpoint seen.
#[derive(Debug, clap::Args)]
pub(crate) struct FetchArgs {
    /// The configured remote to fetch from.
    #[arg(default_value = "origin")]
    pub(crate) remote: String,
    /// Fail the fetch when a configured witness (`forum.witness`) does not cosign.
    #[arg(long)]
    pub(crate) require_witness: bool,
}

pub(crate) fn push(ctx: &Ctx, args: PushArgs) -> Result<(), CliError> {
    let repo = open_repo(&ctx.dir)?;
    let ledgers = if args.all {
        sync::local_ledgers(&Git::for_repo(&repo))?
    } else {
        crate::surface::store::validate_ledger_name(&ctx.ledger)?;
        vec![ctx.ledger.clone()]
    };
    if ledgers.is_empty() {
        return Err(CliError::not_found(
            "there are no ledgers to push (refs/forum/ledgers/ is empty); append an entry first",
        ));
    }
    let gate = sync::gate_guard(&crate::config::load_policy(&ctx.dir, None)?.secrets);
    let results = sync::push(&repo, &args.remote, &ledgers, &gate)?;
    let ok = results.iter().all(|r| r.status.ok());
    if ctx.json {
        let items: Vec<Value> = results
            .iter()
            .map(|r| {
                let reason = match &r.status {
                    PushStatus::Rejected(m) | PushStatus::Refused(m) => Some(m.clone()),
                    PushStatus::Held => {
                        Some("not pushed: another ledger of this push does not verify".into())
                    }
                    _ => None,
                };
                json!({
                    "ledger": r.ledger,
                    "status": r.status.label(),
                    "reason": reason,
                    "entries": r.entries,
                    "checkpoint": r.checkpoint,
                })
            })
            .collect();
        ctx.out_json(&json!({
            "schema": "git-forum.push/v1",
            "remote": args.remote,
            "ok": ok,
            "ledgers": items,
        }))?;
    } else {
        for r in &results {
            let line = match &r.status {
                PushStatus::Created => format!(
                    "{}: created on {} ({} entries, checkpoint {})",
                    r.ledger, args.remote, r.entries, r.checkpoint
                ),
                PushStatus::Pushed => format!(
                    "{}: pushed to {} ({} entries, checkpoint {})",
                    r.ledger, args.remote, r.entries, r.checkpoint
                ),
                PushStatus::UpToDate => format!(
                    "{}: up to date on {} ({} entries)",
                    r.ledger, args.remote, r.entries
                ),
                PushStatus::Rejected(why) => {
                    let mut line = format!("{}: REJECTED by {}: {why}", r.ledger, args.remote);
                    if why.contains("non-fast-forward") || why.contains("fetch first") {
                        line.push_str(&format!(
                            " (git forum push never forces; if the remote has entries you lack, `git forum fetch {remote}` shows them; if you redacted, publish the rewrite with `git push {remote} +{LEDGER_PREFIX}{name}:{LEDGER_PREFIX}{name}`, which the hooks allow only for a redaction-only rewrite)",
                            remote = args.remote,
                            name = r.ledger
                        ));
                    }
                    line
                }
                PushStatus::Refused(why) => format!("{}: NOT PUSHED: {why}", r.ledger),
                PushStatus::Held => format!(
                    "{}: not pushed, because another ledger of this push does not verify",
                    r.ledger
                ),
            };
            ctx.out(&line)?;
        }
    }
    if ok { Ok(()) } else { Err(CliError::silent(1)) }
}

fn fetch_json(r: &FetchResult) -> Value {
    json!({
        "ledger": r.ledger,
        "status": r.status.label(),
        "adopted": r.status.adopted(),
        "remote": r.remote.as_ref().map(|c| c.to_json()),
        "seen": r.seen.as_ref().map(|c| c.to_json()),
        "remote_prefix_root": r.remote_prefix_root,
        "conflict": r.conflict.as_ref().map(|(other, c)| json!({
            "remote": other,
            "seen": c.to_json(),
        })),
        "problem": r.problem,
        "code": r.code,
        "witnesses": r.witnesses,
    })
}

pub(crate) fn fetch(ctx: &Ctx, args: FetchArgs) -> Result<(), CliError> {
    let results = sync::fetch(&ctx.dir, &args.remote)?;
    warn_old_refspec(ctx, &args.remote)?;
    let witnessed = crate::surface::tlog::witness_outcome(&results, args.require_witness);
    if args.require_witness {
        for r in results
            .iter()
            .filter(|r| r.status.adopted() && r.witnesses.is_empty())
        {
            eprintln!(
                "{}: --require-witness, but no witness was asked: add one with `git config --add forum.witness cmd:COMMAND` or an http:// URL",
                r.ledger
            );
        }
    }
    let ok = results.iter().all(|r| r.status.adopted()) && witnessed;
    if ctx.json {
        let items: Vec<Value> = results.iter().map(fetch_json).collect();
        ctx.out_json(&json!({
            "schema": "git-forum.fetch/v1",
            "remote": args.remote,
            "ok": ok,
            "ledgers": items,
        }))?;
    } else {
        if results.is_empty() {
            ctx.out(&format!("{} has no ledgers", args.remote))?;
        }
        let remote = &args.remote;
        for r in &results {
            print_fetched(ctx, remote, r)?;
            super::tlog::print_witnesses(ctx, r)?;
        }
    }
    if ok { Ok(()) } else { Err(CliError::silent(1)) }
}

/// Warns when `remote` still has the fetch refspec older versions of `init` added.
fn warn_old_refspec(ctx: &Ctx, remote: &str) -> Result<(), CliError> {
    // The refspec older versions of `init` added lets plain `git fetch` replace the adopted
    // copies with unchecked ones; say so until `init` replaces it.
    let git = Git::for_repo(&open_repo(&ctx.dir)?);
    let specs = super::init::config_values(&git, &format!("remote.{}.fetch", remote))?;
    if let Some(old) = super::init::old_fetch_refspecs(remote)
        .iter()
        .find(|o| specs.contains(o))
    {
        eprintln!(
            "warning: remote.{}.fetch has {old}, which lets plain `git fetch` move {}{}/ to copies nobody checked; run `git forum init` to replace it",
            remote,
            sync::REMOTES_PREFIX,
            remote
        );
    }
    Ok(())
}

/// One fetched ledger: new, updated, up to date, rewritten for redaction, or refused.
fn print_fetched(ctx: &Ctx, remote: &str, r: &FetchResult) -> Result<(), CliError> {
    let size = r.remote.as_ref().map(|c| c.size).unwrap_or(0);
    let root = r.remote.as_ref().map(|c| c.root.as_str()).unwrap_or("");
    use sync::FetchStatus as S;
    match r.status {
        S::New => ctx.out(&format!(
            "{}: new from {remote}: {size} entries, checkpoint {root}; verified and adopted",
            r.ledger
        ))?,
        S::Updated => ctx.out(&format!(
            "{}: updated from {remote}: {} -> {size} entries, checkpoint {root}; verified and adopted",
            r.ledger,
            r.seen.as_ref().map(|c| c.size).unwrap_or(0)
        ))?,
        S::UpToDate => ctx.out(&format!(
            "{}: up to date with {remote}: {size} entries, checkpoint {root}",
            r.ledger
        ))?,
        S::RedactionRewrite => ctx.out(&format!(
            "{}: redaction-only rewrite on {remote} accepted: the same entries in new commits ({size} entries, checkpoint {root}); adopted",
            r.ledger
        ))?,
        S::DoesNotVerify | S::Truncated | S::Rewritten | S::SplitView | S::Deleted => {
            print_refused(ctx, remote, r)?
        }
    }
    Ok(())
}

/// A refused ledger: why, the checkpoints that disagree, and that nothing moved.
fn print_refused(ctx: &Ctx, remote: &str, r: &FetchResult) -> Result<(), CliError> {
    ctx.out(&format!(
        "{}: REFUSED ({}): {}",
        r.ledger,
        r.code.unwrap_or(r.status.label()),
        r.problem.as_deref().unwrap_or("")
    ))?;
    if let Some(seen) = &r.seen {
        ctx.out(&format!(
            "  seen checkpoint:   {seen} (commit {})",
            seen.commit.map(|c| c.to_string()).unwrap_or_default()
        ))?;
    }
    if let Some(now) = &r.remote {
        ctx.out(&format!(
            "  remote checkpoint: {now} (commit {})",
            now.commit.map(|c| c.to_string()).unwrap_or_default()
        ))?;
    }
    if let Some((other, c)) = &r.conflict {
        ctx.out(&format!(
            "  {other}'s seen checkpoint: {c} (commit {})",
            c.commit.map(|c| c.to_string()).unwrap_or_default()
        ))?;
    }
    if let (Some(seen), Some(p)) = (&r.seen, &r.remote_prefix_root) {
        ctx.out(&format!(
            "  remote's first {} entries now give root {p}",
            seen.size
        ))?;
    }
    ctx.out(&format!(
        "  not adopted; {}{remote}/{} and {}{remote}/{} are unchanged",
        sync::REMOTES_PREFIX,
        r.ledger,
        sync::SEEN_PREFIX,
        r.ledger
    ))?;
    Ok(())
}
