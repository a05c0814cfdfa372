//! Read verbs: `status`, `log`, `show`, `replay`, `why`. None of them writes to the ledger.

use super::{CliError, Ctx};
use crate::ledger::Entry;
use crate::surface::ledger as surface;

/// How many entries the ledger holds and its checkpoint.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {}

/// List entries, newest first.
#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// Show at most N entries (0 = all).
    #[arg(long, short = 'n', default_value_t = 0)]
    pub limit: u64,
    /// Only the entries of one run (the seq of its request), oldest first, each with what it
    /// says at a glance. `git forum runs` lists the runs.
    #[arg(long, value_name = "SEQ", conflicts_with = "limit")]
    pub run: Option<u64>,
}

/// Show one entry.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// The entry's seq.
    pub seq: u64,
    /// Also print the entry's body.
    #[arg(long)]
    pub payload: bool,
    /// Print the diff a `change` entry holds (a --work run's change), and nothing else.
    #[arg(long, conflicts_with = "payload")]
    pub diff: bool,
}

/// Print entries 0..=SEQ.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The last seq to include.
    pub seq: u64,
}

/// The causal chain of an entry, root first.
#[derive(Debug, clap::Args)]
pub struct WhyArgs {
    /// The entry whose causes to follow.
    pub seq: u64,
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

fn out_entries(ctx: &Ctx, entries: &[Entry]) -> Result<(), CliError> {
    if ctx.json {
        ctx.out_json(&serde_json::Value::Array(
            entries.iter().map(Entry::to_json).collect(),
        ))
    } else {
        for e in entries {
            ctx.out(&line(e))?;
        }
        Ok(())
    }
}

fn out_of_range(ctx: &Ctx, seq: u64, len: u64) -> CliError {
    CliError::fail(format!(
        "ledger {:?} has no entry at seq {seq} (it holds seq 0..={})",
        ctx.ledger,
        len.saturating_sub(1)
    ))
}

pub fn status(ctx: &Ctx, _args: StatusArgs) -> Result<(), CliError> {
    let store = ctx.store()?;
    let entries = surface::read_all(&store)?;
    let r = surface::status(
        &ctx.ledger,
        entries.len() as u64,
        &surface::root_of(&entries),
    );
    if ctx.json {
        return ctx.out_report(&r);
    }
    ctx.out(&format!(
        "ledger {}: {} entries, checkpoint {}",
        r.ledger, r.entries, r.checkpoint
    ))
}

pub fn log(ctx: &Ctx, args: LogArgs) -> Result<(), CliError> {
    if let Some(run) = args.run {
        return super::submit::log_run(ctx, run);
    }
    let store = ctx.existing_store()?;
    let limit = (args.limit > 0).then_some(args.limit);
    let entries: Vec<Entry> = store
        .walk_back(limit)?
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    out_entries(ctx, &entries)
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

pub fn show(ctx: &Ctx, args: ShowArgs) -> Result<(), CliError> {
    let store = ctx.existing_store()?;
    let tip = store.require_tip()?;
    let Some((entry, commit)) = store.get_with_commit(args.seq)? else {
        return Err(out_of_range(ctx, args.seq, tip.entry.seq + 1));
    };
    if args.diff {
        return show_diff(ctx, &entry, store.body_of_commit(&commit)?);
    }
    let body = if args.payload {
        Some(store.body_of_commit(&commit)?)
    } else {
        None
    };
    if ctx.json && body.is_none() {
        // Forum's `GET /ledger/<seq>` shape: the entry's own fields.
        return ctx.out_report(&surface::EntryReport { entry });
    }
    if ctx.json {
        let mut v = serde_json::json!({ "entry": entry.to_json(), "commit": commit.to_string() });
        let mut payload = None;
        if let Some(b) = &body {
            v["redacted"] = serde_json::Value::Bool(b.is_none());
            payload = b.as_ref().and_then(|bytes| {
                crate::ledger::canonical::parse(&String::from_utf8_lossy(bytes)).ok()
            });
            v["payload"] = payload
                .as_ref()
                .map_or(serde_json::Value::Null, |p| p.to_serde());
        }
        // NaN and the infinities have no serde_json form: print the text Python would, so the
        // body read back hashes to its payload_hash.
        if let Some(p) = payload.filter(|p| p.has_non_finite()) {
            let mut exact = crate::ledger::Value::from_serde(&v);
            exact.set("payload", p);
            return ctx.out(&exact.python_pretty());
        }
        return ctx.out_json(&v);
    }
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
        Some(Some(bytes)) => ctx.out(&format!("\n{}", String::from_utf8_lossy(&bytes))),
        Some(None) => ctx.out("\n(body redacted)"),
        None => Ok(()),
    }
}

pub fn replay(ctx: &Ctx, args: ReplayArgs) -> Result<(), CliError> {
    let store = ctx.existing_store()?;
    let tip = store.require_tip()?;
    if args.seq > tip.entry.seq {
        return Err(out_of_range(ctx, args.seq, tip.entry.seq + 1));
    }
    let skip = tip.entry.seq - args.seq;
    let mut entries: Vec<Entry> = store
        .walk_back(None)?
        .into_iter()
        .skip(skip as usize)
        .map(|(_, e)| e)
        .collect();
    entries.reverse();
    out_entries(ctx, &entries)
}

pub fn why(ctx: &Ctx, args: WhyArgs) -> Result<(), CliError> {
    let store = ctx.existing_store()?;
    let tip = store.require_tip()?;
    if args.seq > tip.entry.seq {
        return Err(out_of_range(ctx, args.seq, tip.entry.seq + 1));
    }
    let r = surface::why(&surface::read_all(&store)?, args.seq)?;
    if ctx.json {
        return ctx.out_report(&r);
    }
    for e in &r.chain {
        ctx.out(&line(e))?;
    }
    Ok(())
}
