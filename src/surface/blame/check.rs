//! `git forum blame --verify`: for each line tied to a task, in order, that its proofs hold
//! and that its commit is tied to its entry: the task entry's inclusion proof against the
//! latest checkpoint (its hash recomputed from its fields) and its C2SP tlog-proof when there
//! is one and a trusted note key; the trailers' entry hash and run are the task entry's; the
//! task and change entries' bodies hash to their `payload_hash` and their hashes to their
//! fields; the change entry's commit is the line's commit, or the same patch of the file, or
//! (a squash merge) added the line; and the blob of the file in the change commit is the one
//! the change entry recorded. The first that does not hold fails the call with one line
//! naming the line number and what does not hold.

use std::collections::HashMap;
use std::path::Path;

use super::{BlameReport, LineReport, Patches, Proofs, short, work_err};
use crate::ledger::hash::payload_hash;
use crate::report::blame::Record;
use crate::surface::{Error, Result};
use crate::work::blame::{self as wb, Trailers};

/// What the check reads besides the report.
pub(super) struct Seen<'a> {
    pub(super) record: &'a Record<'a>,
    pub(super) trailers: &'a HashMap<String, Trailers>,
    pub(super) patches: &'a Patches,
    pub(super) proofs: &'a Proofs,
    /// Entries whose body does not hash to their `payload_hash`, with why.
    pub(super) damaged: &'a HashMap<u64, String>,
}

/// Checks every tied line of `report`; the first failure names its line.
pub(super) fn verify(dir: &Path, report: &BlameReport, seen: &Seen<'_>) -> Result<()> {
    let Seen {
        record,
        trailers,
        patches,
        proofs,
        damaged,
    } = *seen;
    let commits: Vec<String> = report
        .tasks
        .iter()
        .flat_map(|t| t.changes.iter().map(|c| c.commit.clone()))
        .collect();
    let here = wb::present(dir, &commits).map_err(work_err)?;
    let blobs = wb::blobs_at(dir, &here, &report.file).map_err(work_err)?;
    let keys = crate::surface::tlog::trusted_keys(&[]);
    for l in &report.lines {
        let Some(task) = l.task else { continue };
        let fail = |what: String| Err(Error::failed(format!("line {}: {what}", l.line)));
        // A damaged body anywhere in the task's run: its record cannot be trusted.
        let run = record.run_of(task);
        let mut hurt: Vec<(&u64, &String)> = damaged
            .iter()
            .filter(|(s, _)| run.is_some() && record.run_of(**s) == run)
            .collect();
        hurt.sort();
        if let Some((_, why)) = hurt.first() {
            return fail(format!(
                "the record of task entry {task}'s run is damaged: {why}"
            ));
        }
        if let Err(what) = entry_holds(record, task, "task") {
            return fail(what);
        }
        if let Err(what) = proofs_hold(report, proofs, task, &keys) {
            return fail(what);
        }
        if let (Some("trailers"), Some(t)) = (l.via, trailers.get(&l.commit))
            && let Err(what) = trailers_hold(record, l, t)
        {
            return fail(what);
        }
        let Some(change) = l.change else {
            return fail(format!(
                "task entry {task} has no change entry with a commit for commit {}",
                short(&l.commit)
            ));
        };
        if let Err(what) = entry_holds(record, change, "change") {
            return fail(what);
        }
        if let Err(what) = commit_holds(report, l, change, patches, &blobs) {
            return fail(what);
        }
    }
    Ok(())
}

/// The entry at `seq` hashes to its fields and its body to its `payload_hash`.
fn entry_holds(record: &Record<'_>, seq: u64, what: &str) -> std::result::Result<(), String> {
    let Some((e, body)) = record.item(seq) else {
        return Err(format!("{what} entry {seq} is not in the ledger"));
    };
    if e.computed_hash() != e.entry_hash {
        return Err(format!(
            "{what} entry {seq} was altered: its entry_hash is not the hash of its fields"
        ));
    }
    match body {
        Some(b) if payload_hash(b) == e.payload_hash => Ok(()),
        Some(_) => Err(format!(
            "the body of {what} entry {seq} does not hash to its payload_hash (altered); run `git forum verify --deep`"
        )),
        None => Err(format!(
            "{what} entry {seq} has no body (redacted); its tie cannot be checked"
        )),
    }
}

/// The task entry's inclusion proof (and C2SP proof, when there is one and a key to open
/// its note) holds, for the entry the ledger holds at that seq.
fn proofs_hold(
    report: &BlameReport,
    proofs: &Proofs,
    task: u64,
    keys: &[String],
) -> std::result::Result<(), String> {
    let Some(p) = proofs.inclusion.get(&task) else {
        return Err(format!("task entry {task} has no inclusion proof"));
    };
    if let Err(e) = p.check() {
        return Err(format!(
            "the inclusion proof of task entry {task} does not hold: {e}"
        ));
    }
    let Some(t) = report.tasks.iter().find(|t| t.seq == task) else {
        return Err(format!("task entry {task} is not in the report"));
    };
    if p.entry.entry_hash != t.entry_hash {
        return Err(format!(
            "the inclusion proof of task entry {task} is of another entry ({})",
            short(&p.entry.entry_hash)
        ));
    }
    if let (Some(text), false) = (proofs.tlog.get(&task), keys.is_empty())
        && let Err(e) = crate::surface::tlog::check_text(text, keys, Some(&t.entry_hash))
    {
        return Err(format!(
            "the tlog-proof of task entry {task} does not hold: {e}"
        ));
    }
    Ok(())
}

/// The commit's trailers name the task entry's hash and run.
fn trailers_hold(
    record: &Record<'_>,
    l: &LineReport,
    t: &Trailers,
) -> std::result::Result<(), String> {
    let Some((e, _)) = record.item(t.task) else {
        return Err(format!(
            "commit {}'s Forum-Task {} is not in the ledger",
            short(&l.commit),
            t.task
        ));
    };
    if t.entry != e.entry_hash {
        // The index from entry hash to seq says whose hash it is, if any entry's.
        let whose = match record.seq_of(&t.entry) {
            Some(s) => format!("it is entry {s}'s"),
            None => "no entry of the ledger has it".to_string(),
        };
        return Err(format!(
            "commit {}'s Forum-Entry {} is not the hash of task entry {} ({}; {whose})",
            short(&l.commit),
            short(&t.entry),
            t.task,
            short(&e.entry_hash)
        ));
    }
    if record.run_of(t.task) != Some(t.run) {
        return Err(format!(
            "commit {}'s Forum-Run {} is not the run of task entry {}",
            short(&l.commit),
            t.run,
            t.task
        ));
    }
    Ok(())
}

/// The change entry's commit is the line's (or the same patch of the file, or for a squash
/// merge added the line), and the file's blob in it is the one the entry recorded.
fn commit_holds(
    report: &BlameReport,
    l: &LineReport,
    change: u64,
    patches: &Patches,
    blobs: &HashMap<String, String>,
) -> std::result::Result<(), String> {
    let Some(c) = report
        .tasks
        .iter()
        .flat_map(|t| &t.changes)
        .find(|c| c.seq == change)
    else {
        return Err(format!("change entry {change} is not in the report"));
    };
    let same = c.commit == l.commit
        || patches
            .patch_id(&l.commit)
            .is_some_and(|p| patches.patch_id(&c.commit) == Some(p))
        || (l.via == Some("content")
            && patches
                .patches
                .get(&c.commit)
                .is_some_and(|p| p.added.contains(&l.text)));
    if !same {
        return Err(format!(
            "commit {} is not change entry {change}'s commit {}, nor the same patch of {}",
            short(&l.commit),
            short(&c.commit),
            report.file
        ));
    }
    if !c.blobs_recorded {
        return Ok(());
    }
    let Some(have) = blobs.get(&c.commit) else {
        return Err(format!(
            "change entry {change}'s commit {} does not hold {} here; fetch it (`git forum fetch`)",
            short(&c.commit),
            report.file
        ));
    };
    match &c.blob {
        Some(want) if want == have => Ok(()),
        want => Err(format!(
            "{} in change commit {} is blob {}, not the blob {} change entry {change} recorded",
            report.file,
            short(&c.commit),
            short(have),
            want.as_deref().map_or("(none)", short)
        )),
    }
}

/// What `--verify` could not check for lack of a record: the change entries that recorded no
/// per-file hash (written before git forum recorded them).
pub(super) fn unrecorded(report: &BlameReport) -> Vec<String> {
    report
        .tasks
        .iter()
        .flat_map(|t| &t.changes)
        .filter(|c| !c.blobs_recorded)
        .map(|c| {
            format!(
                "change entry {} did not record the hash of each file it wrote (an older run); its commit is checked by id or patch id only",
                c.seq
            )
        })
        .collect()
}
