//! Read verbs: `status`, `log`, `show`, `replay`, `why`. None of them writes to the ledger.

use super::{CliError, Ctx};
use crate::ledger::Entry;
use crate::surface::ledger as surface;
use crate::surface::read;
use crate::surface::request::{Request as _, ledger as rq};

/// What this repository's git forum holds: the ledger's entry count and checkpoint, every
/// ledger with its size and tip, the last run and how it stands, the hooks, and whether the
/// runtime can run models (each local model probed for at most half a second).
#[derive(Debug, clap::Args)]
pub(crate) struct StatusArgs {}

/// List entries, newest first.
#[derive(Debug, clap::Args)]
pub(crate) struct LogArgs {
    /// How many: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: rq::Log,
    /// Only the entries of one run (the seq of its request), oldest first, each with what it
    /// says at a glance. `git forum runs` lists the runs.
    #[arg(long, value_name = "SEQ", conflicts_with = "limit")]
    pub(crate) run: Option<u64>,
}

/// Show one entry.
#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// Which entry: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: rq::Entry,
    /// Also print the entry's body.
    #[arg(long)]
    pub(crate) payload: bool,
    /// Print the diff a `change` entry holds (a --work run's change), and nothing else.
    #[arg(long, conflicts_with = "payload")]
    pub(crate) diff: bool,
}

/// Print entries 0..=SEQ, oldest first.
#[derive(Debug, clap::Args)]
pub(crate) struct ReplayArgs {
    /// Up to which entry: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: rq::Replay,
    /// Take SEQ as a run (its request seq, as `git forum runs` lists it) and run its control
    /// loop again without a network, every reply and clock reading answered from the record:
    /// print the first decision that differs from the recorded one and exit 1, or say that
    /// none does.
    #[arg(long)]
    pub(crate) strict: bool,
}

/// The causal chain of an entry, root first.
#[derive(Debug, clap::Args)]
pub(crate) struct WhyArgs {
    /// Which entry: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: rq::Why,
}

fn line(e: &Entry) -> String {
    let parent = e
        .causal_parent
        .map(|p| p.to_string())
        .unwrap_or_else(|| "-".into());
    format!(
        "{:>5}  {:<12} {:<14} parent={:<5} {}",
        e.seq,
        e.actor,
        e.kind,
        parent,
        &e.entry_hash[..12]
    )
}

fn out_of_range(ctx: &Ctx, seq: u64, len: u64) -> CliError {
    CliError::not_found(format!(
        "ledger {:?} has no entry at seq {seq} (it holds seq 0..={})",
        ctx.ledger,
        len.saturating_sub(1)
    ))
}

pub(crate) fn status(ctx: &Ctx, _args: StatusArgs) -> Result<(), CliError> {
    let store = ctx.reader()?;
    let r = crate::surface::status::status(&store, super::doctor::readiness(ctx))?;
    if ctx.json {
        return ctx.out_report(&r);
    }
    ctx.out(&super::doctor::status_text(&r))
}

pub(crate) fn log(ctx: &Ctx, args: LogArgs) -> Result<(), CliError> {
    if let Some(run) = args.run {
        return super::submit::log_run(ctx, run);
    }
    let store = ctx.existing_store()?;
    let r = read::log(&store, args.req.limit.filter(|n| *n > 0))?;
    if ctx.json {
        return ctx.out_report(&r);
    }
    for e in &r.entries {
        ctx.out(&line(e))?;
    }
    Ok(())
}

/// `show SEQ --diff`: the diff of a `change` entry (a cut diff says where the whole one is).
fn show_diff(
    ctx: &Ctx,
    entry: &crate::ledger::Entry,
    body: Option<Vec<u8>>,
) -> Result<(), CliError> {
    if entry.kind != crate::ledger::kind::CHANGE {
        return Err(CliError::usage(format!(
            "seq {} is a {} entry; --diff reads change entries (`git forum log` lists them)",
            entry.seq, entry.kind
        )));
    }
    let Some(bytes) = body else {
        return Err(CliError::fail(format!(
            "the body of seq {} is redacted: its diff is gone (the commit it names may still hold it)",
            entry.seq
        )));
    };
    let p = crate::ledger::canonical::parse(&String::from_utf8_lossy(&bytes))
        .map_err(|e| CliError::fail(format!("the body of seq {} does not parse: {e}", entry.seq)))?
        .to_serde();
    let diff = p
        .get("diff")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("");
    if ctx.json {
        return ctx.out_json(&serde_json::json!({
            "seq": entry.seq,
            "task": p.get("task"),
            "commit": p.get("commit"),
            "diff": diff,
            "truncated": p.get("truncated"),
        }));
    }
    if diff.is_empty() {
        return ctx.out(&format!("seq {}: the task changed nothing", entry.seq));
    }
    ctx.out(diff.trim_end_matches('\n'))?;
    if p.get("truncated") == Some(&serde_json::Value::Bool(true))
        && let Some(c) = p.get("commit").and_then(serde_json::Value::as_str)
    {
        eprintln!("the diff was cut; `git show {c}` has the whole change");
    }
    Ok(())
}

pub(crate) fn show(ctx: &Ctx, args: ShowArgs) -> Result<(), CliError> {
    let store = ctx.existing_store()?;
    let tip = store.require_tip()?;
    if args.req.seq > tip.entry.seq {
        return Err(out_of_range(ctx, args.req.seq, tip.entry.seq + 1));
    }
    let Some((entry, commit)) = store.get_with_commit(args.req.seq)? else {
        return Err(out_of_range(ctx, args.req.seq, tip.entry.seq + 1));
    };
    if args.diff {
        return show_diff(ctx, &entry, store.body_of_commit(&commit)?);
    }
    if !args.payload {
        if ctx.json {
            // Forum's `GET /ledger/<seq>` shape: the entry's own fields.
            return ctx.out_report(&surface::EntryReport { entry });
        }
        return show_text(ctx, &entry, &commit.to_string(), None);
    }
    let r = read::payload_of(&store, entry, &commit)?;
    if ctx.json {
        // NaN and the infinities have no serde_json form: print the text Python would, so the
        // body read back hashes to its payload_hash.
        if let Some(exact) = r.exact() {
            return ctx.out(&exact.python_pretty());
        }
        return ctx.out_report(&r);
    }
    show_text(ctx, &r.entry, &r.commit, Some(r.payload.as_ref()))
}

/// `show`'s text: the entry's fields, then (with `--payload`) its body or that it was redacted.
fn show_text(
    ctx: &Ctx,
    entry: &Entry,
    commit: &str,
    body: Option<Option<&crate::ledger::Value>>,
) -> Result<(), CliError> {
    let parent = entry
        .causal_parent
        .map(|p| p.to_string())
        .unwrap_or_else(|| "none".into());
    ctx.out(&format!("seq           {}", entry.seq))?;
    ctx.out(&format!("kind          {}", entry.kind))?;
    ctx.out(&format!("actor         {}", entry.actor))?;
    ctx.out(&format!(
        "ts            {}",
        crate::ledger::canonical::python_float_repr(entry.ts)
    ))?;
    ctx.out(&format!("causal parent {parent}"))?;
    ctx.out(&format!("payload hash  {}", entry.payload_hash))?;
    ctx.out(&format!("prev hash     {}", entry.prev_hash))?;
    ctx.out(&format!("entry hash    {}", entry.entry_hash))?;
    ctx.out(&format!("commit        {commit}"))?;
    match body {
        Some(Some(body)) => ctx.out(&format!("\n{}", body.canonical())),
        Some(None) => ctx.out("\n(body redacted)"),
        None => Ok(()),
    }
}

pub(crate) fn replay(ctx: &Ctx, args: ReplayArgs) -> Result<(), CliError> {
    let rq::Replay { seq, page } = &args.req;
    args.req.validate()?;
    if args.strict {
        return super::replay::strict(ctx, *seq);
    }
    let store = ctx.existing_store()?;
    let tip = store.require_tip()?;
    if *seq > tip.entry.seq {
        return Err(out_of_range(ctx, *seq, tip.entry.seq + 1));
    }
    let entries = surface::read_all(&store)?;
    // The whole replay unless a page is asked for, as the daemon and MCP page it.
    let limit = match page.limit {
        Some(_) => page.size(),
        None => usize::MAX,
    };
    let r = read::replay(&entries, *seq, limit, page.after);
    if ctx.json {
        return ctx.out_report(&r);
    }
    for e in &r.entries {
        ctx.out(&line(e))?;
    }
    Ok(())
}

pub(crate) fn why(ctx: &Ctx, args: WhyArgs) -> Result<(), CliError> {
    let store = ctx.existing_store()?;
    let tip = store.require_tip()?;
    if args.req.seq > tip.entry.seq {
        return Err(out_of_range(ctx, args.req.seq, tip.entry.seq + 1));
    }
    let r = surface::why(&surface::read_all(&store)?, args.req.seq)?;
    if ctx.json {
        return ctx.out_report(&r);
    }
    for e in &r.chain {
        ctx.out(&line(e))?;
    }
    Ok(())
}
