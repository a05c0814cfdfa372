//! `git forum bench-deep-verify`: how long verification takes as a ledger grows, Forum's
//! `forum.deep-verify-benchmark/v1` receipt over this program's own ledger kinds.
//!
//! Every case of the matrix (entries × body bytes × storage × redaction ratio) builds a
//! synthetic ledger as Forum's benchmark does (actor `bench`, kind `payload`, body
//! `{"body": "<seq, 16 digits>:xxx…"}`, a counter clock 1.0, 2.0, …, each entry caused by the
//! one before), then times the chain check, the body check and the deep check `repeats`
//! times after `warmups` untimed rounds. The storages are this program's, not Forum's:
//!
//! * `memory`: the entries and bodies in memory, checked by the pure ledger core;
//! * `packed`: a git ledger written as one pack (as `git forum import` writes one);
//! * `loose`: the same ledger with every object a loose file;
//! * `wal`: a git ledger written one durable append at a time through the write-ahead log
//!   (the default flush on Linux), so its build time is the cost of that many appends.
//!
//! Redaction removes the bodies of the lexicographically first fraction of the distinct payload
//! hashes, as Forum's does. In a git ledger a redacted body is an empty tree in its commit, and
//! deep verification accepts it only under a `redaction` entry naming it (what `git forum
//! redact` appends), so `packed` and `loose` write those commits so from the start and add one
//! redaction entry per redacted body after the case's entries (`entry_count` stays the case's
//! count; their build time covers the bodies kept). `wal`, built by ordinary appends, cannot
//! hold a redacted body, so its cases with a ratio above 0 are listed under `skipped` rather
//! than timed.
//!
//! Each case works in its own temporary bare repository, removed when the case ends; nothing
//! touches the caller's repository. The receipt names this program's version (`git_forum`)
//! where Forum's names its Python's (`python`). Not offered over HTTP or MCP: a benchmark
//! burns the CPU and disk of whoever runs it, which a network client should not get to do.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use super::{Error, Report, Result};
use crate::ledger::canonical::Value;
use crate::ledger::{Entry, NewEntry, hash, kind, verify_chain};
use crate::store::git::{GitStore, Options, StoreError};

/// The receipt's schema name (Forum's).
pub(crate) const SCHEMA: &str = "forum.deep-verify-benchmark/v1";

/// Every storage this program times.
pub(crate) const STORAGES: [&str; 4] = ["memory", "packed", "loose", "wal"];

/// The most entries one case may build.
pub(crate) const MAX_ENTRIES: u64 = 1_000_000;

/// What to measure: Forum's flags.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Parameters {
    pub(crate) entry_counts: Vec<u64>,
    pub(crate) payload_body_bytes: Vec<u64>,
    pub(crate) storage_modes: Vec<String>,
    pub(crate) redaction_ratios: Vec<f64>,
    pub(crate) repeats: u64,
    pub(crate) warmups: u64,
}

/// One timed operation: whether it passed, every sample and their mean, least and most.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Timing {
    pub(crate) ok: bool,
    pub(crate) samples_ms: Vec<f64>,
    pub(crate) mean_ms: f64,
    pub(crate) min_ms: f64,
    pub(crate) max_ms: f64,
}

/// How long building the case's ledger took.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Build {
    pub(crate) ms: f64,
}

/// One case of the matrix (Forum's fields, in Forum's order).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Case {
    pub(crate) entry_count: u64,
    pub(crate) payload_body_bytes: u64,
    pub(crate) storage_mode: String,
    /// Whether each append is flushed on its own (`wal`), or not (`packed`, `loose`: one
    /// flush for the batch); null in memory.
    pub(crate) fsync_each: Option<bool>,
    pub(crate) redaction_ratio: f64,
    pub(crate) unique_payloads: u64,
    pub(crate) payloads_present: u64,
    pub(crate) payloads_redacted: u64,
    pub(crate) build: Build,
    pub(crate) verify_chain: Timing,
    pub(crate) verify_payloads: Timing,
    pub(crate) verify_deep: Timing,
}

/// A case that was not timed, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Skipped {
    pub(crate) entry_count: u64,
    pub(crate) payload_body_bytes: u64,
    pub(crate) storage_mode: String,
    pub(crate) redaction_ratio: f64,
    pub(crate) reason: String,
}

/// The `forum.deep-verify-benchmark/v1` receipt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct DeepVerifyReport {
    pub(crate) schema: &'static str,
    /// When the run started, UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    pub(crate) generated_at: String,
    /// This program's version (Forum's receipt names its Python's instead).
    pub(crate) git_forum: &'static str,
    /// Operating system and architecture.
    pub(crate) platform: String,
    pub(crate) parameters: Parameters,
    pub(crate) cases: Vec<Case>,
    /// Cases of the matrix that were not timed (only present when there are some).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) skipped: Vec<Skipped>,
}

impl Report for DeepVerifyReport {
    const SCHEMA: &'static str = SCHEMA;
}

/// Forum's `parse_int_csv`: comma-separated whole numbers of 0 or more, blanks skipped, at
/// least one.
pub(crate) fn parse_counts(flag: &str, text: &str) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for raw in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        out.push(raw.parse::<u64>().map_err(|_| {
            Error::usage(format!(
                "{flag} takes comma-separated whole numbers of 0 or more (like 100,1000), not {raw:?}"
            ))
        })?);
    }
    if out.is_empty() {
        return Err(Error::usage(format!(
            "{flag} needs at least one number (like 100,1000)"
        )));
    }
    Ok(out)
}

/// Forum's `parse_float_csv`: comma-separated ratios from 0 to 1, blanks skipped, at least one.
pub(crate) fn parse_ratios(flag: &str, text: &str) -> Result<Vec<f64>> {
    let mut out = Vec::new();
    for raw in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match raw.parse::<f64>() {
            Ok(r) if (0.0..=1.0).contains(&r) => out.push(r),
            _ => {
                return Err(Error::usage(format!(
                    "{flag} takes comma-separated ratios from 0 to 1 (like 0,0.5,1), not {raw:?}"
                )));
            }
        }
    }
    if out.is_empty() {
        return Err(Error::usage(format!(
            "{flag} needs at least one ratio (like 0,0.5,1)"
        )));
    }
    Ok(out)
}

impl Parameters {
    /// Checks the parameters before anything is built.
    pub(crate) fn check(&self) -> Result<()> {
        if self.repeats < 1 {
            return Err(Error::usage("--repeats must be 1 or more"));
        }
        for s in &self.storage_modes {
            if !STORAGES.contains(&s.as_str()) {
                let forum = matches!(s.as_str(), "file-sync" | "file-batched");
                return Err(Error::usage(format!(
                    "--storage {s:?} is {}; use one of {}",
                    if forum {
                        "one of Forum's storages, which git forum does not have"
                    } else {
                        "not a storage"
                    },
                    STORAGES.join(", ")
                )));
            }
        }
        if let Some(n) = self.entry_counts.iter().find(|n| **n > MAX_ENTRIES) {
            return Err(Error::usage(format!(
                "--entries {n} is over the limit of {MAX_ENTRIES} per case"
            )));
        }
        let max_body = crate::ledger::MAX_PAYLOAD_BYTES as u64 - 16;
        if let Some(n) = self.payload_body_bytes.iter().find(|n| **n > max_body) {
            return Err(Error::usage(format!(
                "--payload-bytes {n} is over the largest body a ledger takes ({max_body} bytes)"
            )));
        }
        let git = self.storage_modes.iter().any(|s| s != "memory");
        if git && self.entry_counts.contains(&0) {
            return Err(Error::usage(
                "--entries 0 leaves a git ledger nothing to verify; use 1 or more, or --storage memory alone",
            ));
        }
        Ok(())
    }
}

/// The synthetic body of entry `seq` (Forum's `_payload`).
fn body(seq: u64, bytes: u64) -> Value {
    let prefix = format!("{seq:016}:");
    let fill = (bytes as usize).saturating_sub(prefix.len());
    let mut text = prefix;
    text.extend(std::iter::repeat_n('x', fill));
    Value::Object(vec![("body".into(), Value::Str(text))])
}

/// The entries of a case, hashed, each with its canonical body.
fn synthesize(count: u64, bytes: u64) -> Vec<(Entry, Value, String)> {
    let mut out: Vec<(Entry, Value, String)> = Vec::with_capacity(count as usize);
    for seq in 0..count {
        let payload = body(seq, bytes);
        let new = NewEntry {
            actor: "bench".into(),
            kind: kind::PAYLOAD.into(),
            causal_parent: seq.checked_sub(1).map(|p| p as i64),
            payload: payload.clone(),
            ts: (seq + 1) as f64,
        };
        let ph = hash::payload_hash(&payload);
        let entry = Entry::next(out.last().map(|(e, _, _)| e), &new, ph);
        let canonical = payload.canonical();
        out.push((entry, payload, canonical));
    }
    out
}

/// The payload hashes a ratio redacts: the lexicographically first fraction of the distinct
/// ones (Forum's `_redact_payloads`).
fn redacted_hashes(entries: &[(Entry, Value, String)], ratio: f64) -> Vec<String> {
    let mut hashes: Vec<String> = entries
        .iter()
        .map(|(e, _, _)| e.payload_hash.clone())
        .collect();
    hashes.sort();
    hashes.dedup();
    let n = (hashes.len() as f64 * ratio) as usize;
    hashes.truncate(n);
    hashes
}

fn elapsed_ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}

/// Runs `f` `repeats` times and summarizes the samples; `ok` is the last run's answer.
fn timed(repeats: u64, mut f: impl FnMut() -> Result<bool>) -> Result<Timing> {
    let mut samples = Vec::with_capacity(repeats as usize);
    let mut ok = false;
    for _ in 0..repeats {
        let start = Instant::now();
        ok = f()?;
        samples.push(elapsed_ms(start));
    }
    let mean = samples.iter().sum::<f64>() / samples.len() as f64;
    let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
    let max = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Ok(Timing {
        ok,
        samples_ms: samples,
        mean_ms: mean,
        min_ms: min,
        max_ms: max,
    })
}

fn store_err(e: StoreError) -> Error {
    Error::internal(format!("bench-deep-verify: {e}")).with_source(e)
}

fn io_err(what: &str, e: std::io::Error) -> Error {
    Error::internal(format!("bench-deep-verify: {what}: {e}"))
}

/// The three checks of one ledger, each as a closure the timer calls.
trait Checks {
    fn chain(&mut self) -> Result<bool>;
    fn payloads(&mut self) -> Result<bool>;
    fn deep(&mut self) -> Result<bool>;
}

/// Entries and bodies in memory, checked by the pure core.
struct Memory {
    entries: Vec<Entry>,
    bodies: HashMap<String, Value>,
}

impl Checks for Memory {
    fn chain(&mut self) -> Result<bool> {
        Ok(verify_chain(&self.entries).first_bad.is_none())
    }
    fn payloads(&mut self) -> Result<bool> {
        Ok(self.entries.iter().all(|e| {
            self.bodies
                .get(&e.payload_hash)
                .is_none_or(|b| hash::payload_hash(b) == e.payload_hash)
        }))
    }
    fn deep(&mut self) -> Result<bool> {
        Ok(self.chain()? && self.payloads()?)
    }
}

/// A git ledger in a temporary bare repository.
struct Git {
    store: GitStore,
    _dir: tempfile::TempDir,
}

impl Checks for Git {
    fn chain(&mut self) -> Result<bool> {
        Ok(self.store.verify(false).map_err(store_err)?.passed())
    }
    fn payloads(&mut self) -> Result<bool> {
        // Every present body read from its commit and hashed against its entry.
        let items = super::reports::load_git(&self.store).map_err(store_err)?;
        Ok(items.iter().all(|(e, b)| {
            b.as_ref()
                .is_none_or(|b| hash::payload_hash(b) == e.payload_hash)
        }))
    }
    fn deep(&mut self) -> Result<bool> {
        Ok(self.store.verify(true).map_err(store_err)?.passed())
    }
}

/// A new bare repository in a temporary directory, and a ledger store on it.
fn bare_store(opts: Options) -> Result<Git> {
    let dir = crate::scratch::dir("git-forum-deep-verify-")
        .map_err(|e| io_err("creating a temporary directory", e))?;
    let status = crate::gitproc::command()
        .args(["init", "-q", "--bare"])
        .arg(dir.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| io_err("running git init (is git installed?)", e))?;
    if !status.success() {
        return Err(Error::internal(
            "bench-deep-verify: git init --bare failed in a temporary directory",
        ));
    }
    let store = open_store(dir.path(), opts)?;
    Ok(Git { store, _dir: dir })
}

fn open_store(dir: &Path, opts: Options) -> Result<GitStore> {
    let repo = gix::open(dir).map_err(|e| {
        Error::internal(format!("bench-deep-verify: opening {}: {e}", dir.display()))
    })?;
    GitStore::new(repo, "bench", opts).map_err(store_err)
}

/// Moves every pack out of the repository and writes its objects back as loose files.
fn unpack_to_loose(git: &Git) -> Result<()> {
    let pack_dir = git._dir.path().join("objects").join("pack");
    let aside = git._dir.path().join("packs-aside");
    std::fs::create_dir_all(&aside).map_err(|e| io_err("moving packs aside", e))?;
    let names: Vec<std::path::PathBuf> = std::fs::read_dir(&pack_dir)
        .map_err(|e| io_err("listing packs", e))?
        .filter_map(|d| d.ok().map(|d| d.path()))
        .collect();
    for p in &names {
        if let Some(name) = p.file_name() {
            std::fs::rename(p, aside.join(name)).map_err(|e| io_err("moving packs aside", e))?;
        }
    }
    for p in names
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "pack"))
    {
        let file = p.file_name().map(|n| aside.join(n)).unwrap_or_default();
        let input = std::fs::File::open(&file).map_err(|e| io_err("reading a pack", e))?;
        let ok = crate::gitproc::at_git_dir(git._dir.path())
            .args(["unpack-objects", "-q"])
            .stdin(input)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .map_err(|e| io_err("running git unpack-objects", e))?
            .success();
        if !ok {
            return Err(Error::internal(
                "bench-deep-verify: git unpack-objects failed on the case's pack",
            ));
        }
    }
    std::fs::remove_dir_all(&aside).map_err(|e| io_err("removing the packs set aside", e))?;
    let objects = git._dir.path().join("objects");
    let loose_dirs = std::fs::read_dir(&objects)
        .map_err(|e| io_err("listing loose objects", e))?
        .filter_map(|d| d.ok())
        .filter(|d| d.file_name().len() == 2)
        .count();
    if crate::store::pack::pack_count(&objects) > 0 || loose_dirs == 0 {
        return Err(Error::internal(
            "bench-deep-verify: the loose case's objects did not end up loose",
        ));
    }
    Ok(())
}

/// Builds the ledger of one case; `None` when the storage cannot hold the case.
fn build(
    storage: &str,
    entries: &[(Entry, Value, String)],
    redacted: &[String],
) -> Result<Option<Box<dyn Checks>>> {
    let gone = |ph: &str| redacted.binary_search_by(|h| h.as_str().cmp(ph)).is_ok();
    match storage {
        "memory" => {
            let mut bodies = HashMap::new();
            for (e, b, _) in entries {
                if !gone(&e.payload_hash) {
                    bodies.insert(e.payload_hash.clone(), b.clone());
                }
            }
            Ok(Some(Box::new(Memory {
                entries: entries.iter().map(|(e, _, _)| e.clone()).collect(),
                bodies,
            })))
        }
        "packed" | "loose" => {
            let mut git = bare_store(Options {
                fsync: true,
                ..Options::default()
            })?;
            let mut items: Vec<(Entry, Option<String>)> = entries
                .iter()
                .map(|(e, _, c)| (e.clone(), (!gone(&e.payload_hash)).then(|| c.clone())))
                .collect();
            push_redactions(&mut items, entries, redacted);
            git.store.import_entries(&items).map_err(store_err)?;
            if storage == "loose" {
                unpack_to_loose(&git)?;
                // A fresh handle, so no pack the old one knew of is looked for.
                git.store = open_store(git._dir.path(), Options::default())?;
            }
            Ok(Some(Box::new(git)))
        }
        _ if !redacted.is_empty() => Ok(None),
        _ => {
            let mut git = bare_store(Options {
                fsync: true,
                method: crate::store::durable::FlushMethod::Wal,
                ..Options::default()
            })?;
            for (e, b, _) in entries {
                git.store
                    .append_entry(&NewEntry {
                        actor: e.actor.clone(),
                        kind: e.kind.clone(),
                        causal_parent: e.causal_parent,
                        payload: b.clone(),
                        ts: e.ts,
                    })
                    .map_err(store_err)?;
            }
            Ok(Some(Box::new(git)))
        }
    }
}

/// A git ledger holds an absent body only under a redaction entry naming it (what
/// `git forum redact` appends): one per redacted hash, after the entries.
fn push_redactions(
    items: &mut Vec<(Entry, Option<String>)>,
    entries: &[(Entry, Value, String)],
    redacted: &[String],
) {
    for ph in redacted {
        let holder = entries
            .iter()
            .rev()
            .find(|(e, _, _)| &e.payload_hash == ph)
            .map(|(e, _, _)| e.seq as i64);
        let payload = Value::Object(vec![
            (
                "schema".into(),
                Value::str(crate::store::redact::REDACTION_SCHEMA),
            ),
            ("payload_hash".into(), Value::str(ph)),
            ("reason".into(), Value::str("bench-deep-verify")),
        ]);
        let last = items.last().map(|(e, _)| e.clone());
        let new = NewEntry {
            actor: "bench".into(),
            kind: kind::REDACTION.into(),
            causal_parent: holder,
            payload: payload.clone(),
            ts: last.as_ref().map_or(1.0, |e| e.ts + 1.0),
        };
        let entry = Entry::next(last.as_ref(), &new, hash::payload_hash(&payload));
        items.push((entry, Some(payload.canonical())));
    }
}

/// Runs the whole matrix. `now` is the start time in seconds since the epoch.
pub(crate) fn run(params: Parameters, now: f64) -> Result<DeepVerifyReport> {
    params.check()?;
    let mut cases = Vec::new();
    let mut skipped = Vec::new();
    for &count in &params.entry_counts {
        for &bytes in &params.payload_body_bytes {
            let entries = synthesize(count, bytes);
            for storage in &params.storage_modes {
                for &ratio in &params.redaction_ratios {
                    let redacted = redacted_hashes(&entries, ratio);
                    let start = Instant::now();
                    let Some(mut ledger) = build(storage, &entries, &redacted)? else {
                        skipped.push(Skipped {
                            entry_count: count,
                            payload_body_bytes: bytes,
                            storage_mode: storage.clone(),
                            redaction_ratio: ratio,
                            reason: "a wal ledger is built by durable appends, which cannot write a redacted body; packed and loose time redaction".into(),
                        });
                        continue;
                    };
                    let build_ms = elapsed_ms(start);
                    for _ in 0..params.warmups {
                        ledger.chain()?;
                        ledger.payloads()?;
                        ledger.deep()?;
                    }
                    let verify_chain = timed(params.repeats, || ledger.chain())?;
                    let verify_payloads = timed(params.repeats, || ledger.payloads())?;
                    let verify_deep = timed(params.repeats, || ledger.deep())?;
                    let unique = {
                        let mut h: Vec<&str> = entries
                            .iter()
                            .map(|(e, _, _)| e.payload_hash.as_str())
                            .collect();
                        h.sort_unstable();
                        h.dedup();
                        h.len() as u64
                    };
                    cases.push(Case {
                        entry_count: count,
                        payload_body_bytes: bytes,
                        storage_mode: storage.clone(),
                        fsync_each: match storage.as_str() {
                            "memory" => None,
                            "wal" => Some(true),
                            _ => Some(false),
                        },
                        redaction_ratio: ratio,
                        unique_payloads: unique,
                        payloads_present: unique - redacted.len() as u64,
                        payloads_redacted: redacted.len() as u64,
                        build: Build { ms: build_ms },
                        verify_chain,
                        verify_payloads,
                        verify_deep,
                    });
                }
            }
        }
    }
    Ok(DeepVerifyReport {
        schema: SCHEMA,
        generated_at: utc_stamp(now),
        git_forum: env!("CARGO_PKG_VERSION"),
        platform: format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH),
        parameters: params,
        cases,
        skipped,
    })
}

/// `YYYY-MM-DDTHH:MM:SSZ` for seconds since the epoch (UTC).
pub(crate) fn utc_stamp(secs: f64) -> String {
    let secs = secs.max(0.0) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = crate::report::attest::civil(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_as_forums() {
        assert_eq!(
            parse_counts("--entries", "100, 1000,").unwrap(),
            [100, 1000]
        );
        assert!(parse_counts("--entries", "-1").is_err());
        assert!(parse_counts("--entries", " , ").is_err());
        assert_eq!(parse_ratios("--r", "0,0.5,1").unwrap(), [0.0, 0.5, 1.0]);
        assert!(parse_ratios("--r", "1.5").is_err());
        assert!(parse_ratios("--r", "nan").is_err());
    }

    #[test]
    fn stamps_and_bodies() {
        assert_eq!(utc_stamp(0.0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_stamp(1_796_114_671.6), "2026-12-01T08:44:31Z");
        assert_eq!(utc_stamp(951_782_400.0), "2000-02-29T00:00:00Z");
        let Value::Object(m) = body(7, 20) else {
            panic!("an object")
        };
        assert_eq!(m[0].1, Value::str("0000000000000007:xxx"));
        let e = synthesize(3, 32);
        assert_eq!(e[2].0.causal_parent, Some(1));
        assert_eq!(e[0].0.ts, 1.0);
        assert_eq!(redacted_hashes(&e, 0.5).len(), 1);
        assert_eq!(redacted_hashes(&e, 1.0).len(), 3);
    }
}
