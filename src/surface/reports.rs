//! The read-side reports once for every transport: loading a ledger (git, a fetched copy, a
//! Forum directory, one run of a ledger) into a [`Snapshot`], then handing it to the pure
//! projections in [`crate::report`], which never read anything themselves.
//!
//! `git forum summary|bench|room|capsule|grade|export-gradable` and the daemon's and MCP's report
//! operations call these functions; each returns a typed report (`Serialize`, with its schema
//! name as [`Report::SCHEMA`]). The daemon serializes the report; the CLI prints its value in
//! Forum's key order or renders it as text.

use std::collections::HashMap;
use std::path::Path;

use serde::Serialize;

use super::{Error, Report, Result};
use crate::ledger::canonical::{self, Value};
use crate::ledger::{Entry, Storage, StorageError};
use crate::report::{self, Snapshot, Summary};
use crate::store::forum_dir::{self, ForumDirError};
use crate::store::git::{GitStore, Options, StoreError, validate_ledger_name};
use crate::store::sync::REMOTES_PREFIX;

/// A store failure as the surface reports it (the classes the CLI and the daemon gave it).
pub(crate) fn store_error(e: StoreError) -> Error {
    let message = e.to_string();
    let class = match &e {
        StoreError::NoLedger(_) => super::Class::NotFound,
        StoreError::Invalid(_) | StoreError::InvalidName { .. } => super::Class::Usage,
        StoreError::Contended(_) => super::Class::Unavailable,
        _ => super::Class::Internal,
    };
    Error::new(class, message).with_source(e)
}

/// A Forum directory that cannot be read (I/O) or is not a Forum ledger (bad input).
pub(crate) fn forum_dir_error(e: ForumDirError) -> Error {
    let message = e.to_string();
    match e {
        ForumDirError::Io { .. } => Error::internal(message).with_source(e),
        _ => Error::usage(message).with_source(e),
    }
}

/// Every entry of a ledger with its body, through the [`Storage`] trait (bodies are read once
/// per distinct payload hash).
pub fn load(store: &dyn Storage) -> std::result::Result<Vec<(Entry, Option<Value>)>, StorageError> {
    let n = store.len()?;
    let mut bodies: HashMap<String, Option<Value>> = HashMap::new();
    let mut out = Vec::with_capacity(n as usize);
    for seq in 0..n {
        let e = store.get(seq)?.ok_or_else(|| {
            StorageError::Corrupt(format!("the ledger has no entry at seq {seq}"))
        })?;
        let body = match bodies.get(&e.payload_hash) {
            Some(b) => b.clone(),
            None => {
                let b = store.payload(&e.payload_hash)?;
                bodies.insert(e.payload_hash.clone(), b.clone());
                b
            }
        };
        out.push((e, body));
    }
    Ok(out)
}

/// Every entry of a git ledger with its body in one walk from the tip (the generic
/// [`load`] looks each body up by hash, which on a git store walks the chain once per body).
pub(crate) fn load_git(
    store: &GitStore,
) -> std::result::Result<Vec<(Entry, Option<Value>)>, StoreError> {
    with_bodies(store, store.walk_back(None)?)
}

/// [`load_git`] from seq `first` on: the entries a run from that request on wrote, and the
/// others appended since, without reading the older ones.
pub(crate) fn load_git_from(
    store: &GitStore,
    first: u64,
) -> std::result::Result<Vec<(Entry, Option<Value>)>, StoreError> {
    with_bodies(store, store.walk_back_to(first)?)
}

/// The `walked` entries (newest first) with their bodies, oldest first.
fn with_bodies(
    store: &GitStore,
    walked: Vec<(gix::ObjectId, Entry)>,
) -> std::result::Result<Vec<(Entry, Option<Value>)>, StoreError> {
    let mut out = Vec::new();
    for (id, e) in walked {
        let body = match store.body_of_commit(&id)? {
            None => None,
            Some(bytes) => {
                let text = String::from_utf8(bytes).map_err(|_| {
                    StoreError::Corrupt(format!(
                        "ledger {}: the body of seq {} is not UTF-8",
                        store.name(),
                        e.seq
                    ))
                })?;
                Some(canonical::parse(&text).map_err(|err| {
                    StoreError::Corrupt(format!(
                        "ledger {}: the body of seq {} is not JSON: {err}",
                        store.name(),
                        e.seq
                    ))
                })?)
            }
        };
        out.push((e, body));
    }
    out.reverse();
    Ok(out)
}

/// Reads a Forum ledger directory (`entries.jsonl`, `payloads.jsonl`).
pub fn snapshot_from_forum_dir(dir: &Path) -> std::result::Result<Snapshot, ForumDirError> {
    let forum = forum_dir::read(dir)?;
    let items = forum
        .entries
        .into_iter()
        .map(|e| {
            let body = forum.payloads.get(&e.payload_hash).cloned();
            (e, body)
        })
        .collect();
    Ok(Snapshot::from_items(items))
}

/// A git ledger as the projections read it, with what its own verify says (every commit, not
/// just the entries; `deep` also checks every body). A ledger that does not exist yet reads
/// as empty.
pub(crate) fn snapshot(store: &GitStore, deep: bool) -> Result<Snapshot> {
    if !store.exists().map_err(store_error)? {
        return Ok(Snapshot::from_items(Vec::new()));
    }
    let mut s = Snapshot::from_items(load_git(store).map_err(store_error)?);
    let passed = store.verify(deep).map_err(store_error)?.passed();
    if deep {
        s.deep_verified &= passed;
    } else {
        s.verified &= passed;
        s.deep_verified &= s.verified;
    }
    Ok(s)
}

/// One loaded side of a report: the snapshot and what to call it.
#[derive(Debug, Clone)]
pub(crate) struct Side {
    pub(crate) snapshot: Snapshot,
    pub(crate) label: String,
}

/// Where report sources are looked up: the repository, the current (served) ledger, whether
/// a path may name a Forum directory (never over the network: a client does not get to make
/// the server read files it names), and how to tell the caller to list runs.
pub(crate) struct Sources<'a> {
    pub(crate) repo: &'a gix::Repository,
    pub(crate) ledger: &'a str,
    /// A SOURCE that is a directory reads as a Forum ledger directory.
    pub(crate) dirs: bool,
    /// How the caller lists runs (`git forum runs`, `GET /runs`), for error messages.
    pub(crate) runs_hint: &'a str,
}

impl Sources<'_> {
    /// The ledger `name`, or the fetched copy `REMOTE:NAME` a daemon serving one reads.
    fn store(&self, name: &str) -> Result<GitStore> {
        crate::surface::store::open_spec(self.repo.clone(), name, Options::default())
            .map_err(store_error)
    }

    /// The current ledger, which must exist.
    pub(crate) fn current(&self, deep: bool) -> Result<Side> {
        let store = self.store(self.ledger)?;
        if !store.exists().map_err(store_error)? {
            return Err(store_error(StoreError::NoLedger(self.ledger.to_string())));
        }
        Ok(Side {
            snapshot: snapshot(&store, deep)?,
            label: format!("ledger {}", self.ledger),
        })
    }

    /// The current ledger, or SOURCE when given.
    pub(crate) fn current_or(&self, source: Option<&str>, deep: bool) -> Result<Side> {
        match source {
            Some(s) => self.side(s, deep),
            None => self.current(deep),
        }
    }

    /// Resolves a SOURCE: `run:SEQ` (one run of the current ledger), a ledger name, a fetched
    /// copy (`REMOTE/NAME`), or (when [`Sources::dirs`]) a Forum ledger directory.
    pub(crate) fn side(&self, spec: &str, deep: bool) -> Result<Side> {
        if let Some(seq) = spec.strip_prefix("run:") {
            let seq: u64 = seq.parse().map_err(|_| {
                Error::usage(format!(
                    "{spec:?}: run:SEQ takes the seq of a run's request ({} lists them)",
                    self.runs_hint
                ))
            })?;
            let whole = self.current(deep)?;
            let snapshot = run_slice(&whole.snapshot, seq).ok_or_else(|| {
                Error::not_found(format!(
                    "no run starts at seq {seq} in ledger {:?} ({} lists them)",
                    self.ledger, self.runs_hint
                ))
            })?;
            return Ok(Side {
                snapshot,
                label: format!("run {seq} of ledger {}", self.ledger),
            });
        }
        if validate_ledger_name(spec).is_ok() {
            let local = self.store(spec)?;
            if local.exists().map_err(store_error)? {
                return Ok(Side {
                    snapshot: snapshot(&local, deep)?,
                    label: format!("ledger {spec}"),
                });
            }
            if spec.contains('/') {
                let refname = format!("{REMOTES_PREFIX}{spec}");
                let remote = GitStore::at_ref(self.repo.clone(), &refname, Options::default())
                    .map_err(store_error)?;
                if remote.exists().map_err(store_error)? {
                    return Ok(Side {
                        snapshot: snapshot(&remote, deep)?,
                        label: format!("remote ledger {spec}"),
                    });
                }
            }
        }
        let path = Path::new(spec);
        if self.dirs && path.is_dir() {
            let snapshot = snapshot_from_forum_dir(path).map_err(forum_dir_error)?;
            return Ok(Side {
                snapshot,
                label: format!("Forum ledger {}", path.display()),
            });
        }
        Err(Error::not_found(if self.dirs {
            format!(
                "{spec:?} is not a ledger here (refs/forum/ledgers/{spec}), a fetched copy \
                 (refs/forum/remotes/REMOTE/NAME), a Forum ledger directory, or run:SEQ"
            )
        } else {
            format!(
                "{spec:?} is not a ledger here (NAME), a fetched copy (REMOTE/NAME) or run:SEQ; Forum directories are not read over the network"
            )
        }))
    }
}

/// The entries of the run whose request is at `seq`, or `None` when no run starts there.
pub(crate) fn run_slice(whole: &Snapshot, seq: u64) -> Option<Snapshot> {
    let roots = report::run_roots(&whole.entries());
    (roots.get(&seq) == Some(&seq)).then(|| whole.slice(|e| roots.get(&e.seq) == Some(&seq)))
}

/// How many entries of a snapshot have no body (redacted).
pub(crate) fn absent_bodies(s: &Snapshot) -> u64 {
    s.items.iter().filter(|(_, b)| b.is_none()).count() as u64
}

/// A projection's JSON value with its schema name; serializes as the value.
#[derive(Debug, Clone)]
pub(crate) struct Projected<const K: u8> {
    pub(crate) value: Value,
}

impl<const K: u8> Serialize for Projected<K> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.value.to_serde().serialize(s)
    }
}

/// The run room (forum-spec §19).
pub(crate) type RoomReport = Projected<0>;
/// The context capsule (forum-spec §20).
pub(crate) type CapsuleReport = Projected<1>;
/// The outcome grade.
pub(crate) type GradeReport = Projected<3>;

impl Report for RoomReport {
    const SCHEMA: &'static str = report::room::RUN_ROOM_SCHEMA;
}
impl Report for CapsuleReport {
    const SCHEMA: &'static str = report::capsule::CONTEXT_CAPSULE_SCHEMA;
}
impl Report for GradeReport {
    const SCHEMA: &'static str = "git-forum.grade/1";
}

/// The run summary of one side (forum-spec §18), with its label and how many bodies it
/// could not read.
#[derive(Debug, Clone)]
pub(crate) struct SummaryReport {
    pub(crate) label: String,
    pub(crate) summary: Summary,
}

impl Serialize for SummaryReport {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.summary.to_value().to_serde().serialize(s)
    }
}

impl Report for SummaryReport {
    const SCHEMA: &'static str = "git-forum.summary/1";
}

/// An A/B comparison: both summaries, every metric's delta (B − A), and the final answers
/// with a unified diff of them.
#[derive(Debug, Clone)]
pub(crate) struct BenchReport {
    pub(crate) a: SummaryReport,
    pub(crate) b: SummaryReport,
    pub(crate) answer_a: Option<String>,
    pub(crate) answer_b: Option<String>,
    pub(crate) diff: Option<String>,
}

impl BenchReport {
    /// `{a, b, delta, answers: {a, b, diff}}` in that order (what `git forum bench --json`
    /// prints).
    pub(crate) fn to_value(&self) -> Value {
        let opt = |v: &Option<String>| v.as_ref().map(Value::str).unwrap_or(Value::Null);
        let pairs = |v: Vec<(&str, Value)>| {
            Value::Object(v.into_iter().map(|(k, x)| (k.to_string(), x)).collect())
        };
        pairs(vec![
            ("a", self.a.summary.to_value()),
            ("b", self.b.summary.to_value()),
            (
                "delta",
                report::summary::compare_value(&self.a.summary, &self.b.summary),
            ),
            (
                "answers",
                pairs(vec![
                    ("a", opt(&self.answer_a)),
                    ("b", opt(&self.answer_b)),
                    ("diff", opt(&self.diff)),
                ]),
            ),
        ])
    }
}

impl Serialize for BenchReport {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut v = self.to_value().to_serde();
        v["labels"] = serde_json::json!({"a": self.a.label, "b": self.b.label});
        v.serialize(s)
    }
}

impl Report for BenchReport {
    const SCHEMA: &'static str = "git-forum.bench/1";
}

/// The summary of a side.
pub(crate) fn summary(side: &Side) -> SummaryReport {
    SummaryReport {
        label: side.label.clone(),
        summary: report::summarize(&side.snapshot),
    }
}

/// Compares two sides.
pub(crate) fn bench(a: &Side, b: &Side) -> BenchReport {
    let (answer_a, answer_b) = (
        report::final_answer(&a.snapshot),
        report::final_answer(&b.snapshot),
    );
    let diff = report::answer_diff(
        answer_a.as_deref().unwrap_or(""),
        answer_b.as_deref().unwrap_or(""),
        &format!("A: {}", a.label),
        &format!("B: {}", b.label),
    );
    BenchReport {
        a: summary(a),
        b: summary(b),
        answer_a,
        answer_b,
        diff,
    }
}

/// The run room from `since` (default: the last request), texts clipped to `max_text_chars`.
pub(crate) fn room(s: &Snapshot, since: Option<u64>, max_text_chars: usize) -> RoomReport {
    Projected {
        value: report::build_run_room(s, since, max_text_chars),
    }
}

/// The context capsule: the last `max_items` task results, texts clipped to `max_text_chars`.
pub(crate) fn capsule(s: &Snapshot, max_items: usize, max_text_chars: usize) -> CapsuleReport {
    Projected {
        value: report::build_context_capsule(s, max_items, max_text_chars),
    }
}

/// The grade: PASS needs every independent check passed and at least `min_checks` of them.
pub(crate) fn grade(s: &Snapshot, min_checks: u64) -> GradeReport {
    Projected {
        value: report::grade::grade(s, min_checks),
    }
}

/// The gradable-trajectory row (forum-spec §21).
pub(crate) type GradableReport = Projected<20>;

impl Report for GradableReport {
    const SCHEMA: &'static str = report::gradable::GRADABLE_SCHEMA;
}

/// Which entries of a ledger a grade or a gradable row covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The latest run; the whole ledger when it holds no run (a folded trace, appended notes).
    Latest,
    /// The run whose request is at this seq.
    Run(u64),
    /// Every entry of the ledger, runs together (what Forum's `grade LEDGER_DIR` reads).
    All,
}

impl Scope {
    /// `--all`, else RUN, else the latest run.
    pub(crate) fn of(run: Option<u64>, all: bool) -> Result<Scope> {
        match (run, all) {
            (Some(_), true) => Err(Error::usage(
                "give a RUN or --all, not both (--all covers every run of the ledger)",
            )),
            (Some(seq), false) => Ok(Scope::Run(seq)),
            (None, true) => Ok(Scope::All),
            (None, false) => Ok(Scope::Latest),
        }
    }
}

/// The entries of `whole` that `scope` covers.
pub(crate) fn scoped(whole: &Snapshot, scope: Scope) -> Result<Snapshot> {
    let roots = report::run_roots(&whole.entries());
    let latest = roots.iter().rev().find(|(s, r)| s == r).map(|(s, _)| *s);
    let run = match (scope, latest) {
        (Scope::All, _) | (Scope::Latest, None) => return Ok(whole.clone()),
        (Scope::Latest, Some(seq)) | (Scope::Run(seq), _) => seq,
    };
    run_slice(whole, run).ok_or_else(|| {
        Error::not_found(format!(
            "no run starts at seq {run} (the runs list shows them; --all grades every entry)"
        ))
    })
}

/// The grade of the entries `scope` covers.
pub(crate) fn grade_scoped(whole: &Snapshot, scope: Scope, min_checks: u64) -> Result<GradeReport> {
    Ok(grade(&scoped(whole, scope)?, min_checks))
}

/// The gradable row of the entries `scope` covers.
pub(crate) fn gradable(whole: &Snapshot, scope: Scope, min_checks: u64) -> Result<GradableReport> {
    Ok(Projected {
        value: report::gradable_record(&scoped(whole, scope)?, None, min_checks),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{NewEntry, kind};

    /// Reading from a seq on gives the same entries and bodies as reading the whole ledger
    /// and dropping what is older, in each kind of repository.
    #[test]
    fn a_ledger_read_from_a_seq_on_is_the_tail_of_the_whole_read() {
        for init in [
            &["--object-format=sha1"][..],
            &["--object-format=sha256"],
            &["--ref-format=reftable"],
        ] {
            let dir = tempfile::tempdir().unwrap();
            let out = crate::gitproc::in_dir(dir.path())
                .args([&["init", "-q"][..], init].concat())
                .output()
                .unwrap();
            assert!(out.status.success(), "{init:?}");
            let mut store = GitStore::open(dir.path(), "main", Options::default()).unwrap();
            for i in 0..5i64 {
                let text = format!("{{\"n\":{i}}}");
                store
                    .append_entry(&NewEntry {
                        actor: "tester".into(),
                        kind: kind::NOTE.into(),
                        causal_parent: (i > 0).then_some(i - 1),
                        payload: canonical::parse(&text).unwrap(),
                        ts: 1_700_000_000.0,
                    })
                    .unwrap();
            }
            let whole = load_git(&store).unwrap();
            assert_eq!(whole.len(), 5);
            let shown = |items: &[(Entry, Option<Value>)]| format!("{items:?}");
            for first in 0..=6u64 {
                let from = load_git_from(&store, first).unwrap();
                let tail = &whole[whole.len().min(first as usize)..];
                assert_eq!(shown(&from), shown(tail), "{init:?} from {first}");
            }
        }
    }
}
