//! The append path: build an entry's objects on the current tip, write them, and move the ref
//! by compare-and-swap, retrying on contention until [`APPEND_DEADLINE`]; also batches (one
//! pack, one flush) and imports.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use gix::ObjectId;
use gix::hash::Kind as HashKind;
use gix::objs::Kind;

use super::codec::{commit_bytes, object, one_line, tree_bytes};
use super::error::{StoreError, io};
use super::git::{Appended, GitStore, Tip};
use super::lock::CasOutcome;
use super::objects::unique;
use super::pack::{self, Obj};
use crate::ledger::hash::sha256_hex;
use crate::ledger::{Entry, NewEntry};

/// How long an append keeps retrying a contended ref before giving up.
pub const APPEND_DEADLINE: Duration = Duration::from_secs(30);

/// Consolidate packs (`git repack -d --geometric=2`) once a repository holds more than this
/// many; gix handles also size their index slots from the count at open.
pub const MAX_PACKS: usize = 24;

struct Built {
    objects: Vec<Obj>,
    commits: Vec<ObjectId>,
    entries: Vec<Entry>,
    as_pack: bool,
}

/// Builds the objects of a batch on `tip`: commits first, then trees, then blobs, deduplicated.
fn build_batch<'a, I>(hash: HashKind, tip: Option<&Tip>, items: I) -> Result<Built, StoreError>
where
    I: Iterator<Item = (&'a NewEntry, &'a [u8], &'a str, bool)>,
{
    let mut commits_objs = Vec::new();
    let mut trees = Vec::new();
    let mut blobs = Vec::new();
    let mut seen = HashSet::new();
    let mut commits = Vec::new();
    let mut entries = Vec::new();
    let mut head = tip.map(|t| t.entry.clone());
    let mut parent = tip.map(|t| t.commit);
    for (new, body, ph, _) in items {
        let entry = Entry::next(head.as_ref(), new, ph.to_string());
        let blob = object(hash, Kind::Blob, body.to_vec())?;
        let tree = object(hash, Kind::Tree, tree_bytes(&blob.id))?;
        let commit = object(
            hash,
            Kind::Commit,
            commit_bytes(&entry, &tree.id, parent.as_ref()),
        )?;
        parent = Some(commit.id);
        commits.push(commit.id);
        commits_objs.push(commit);
        if seen.insert(tree.id) {
            trees.push(tree);
        }
        if seen.insert(blob.id) {
            blobs.push(blob);
        }
        head = Some(entry.clone());
        entries.push(entry);
    }
    let mut objects = commits_objs;
    objects.extend(trees);
    objects.extend(blobs);
    Ok(Built {
        objects,
        commits,
        entries,
        as_pack: true,
    })
}

/// A crash-testing hook: with `GIT_FORUM_FAILPOINT=NAME` in the environment, the process kills
/// itself (SIGKILL, so nothing is cleaned up) when it reaches the step `NAME` of an append:
/// `objects-written`, `cas-start`, `cas-locked`, `cas-reflog`, `cas-moved`, `appended`. The
/// reliability tests use it to kill a writer at every step.
pub(crate) fn failpoint(name: &str) {
    static POINT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let point = POINT.get_or_init(|| std::env::var("GIT_FORUM_FAILPOINT").ok());
    if point.as_deref() == Some(name) {
        #[cfg(unix)]
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
        std::process::abort();
    }
}

impl GitStore {
    /// Appends entries built by `build` on the current tip, retrying on conflict. `build`
    /// receives the tip and returns the objects to write (commits first) and the new commit ids.
    fn append_with<F>(
        &self,
        mut build: F,
        reflog: &str,
    ) -> Result<(Vec<ObjectId>, Vec<Entry>), StoreError>
    where
        F: FnMut(Option<&Tip>) -> Result<Built, StoreError>,
    {
        let lock = self.writer_lock()?;
        let start = Instant::now();
        let mut backoff = Duration::from_millis(2);
        // Single appends go through the write-ahead log when it is the flush method; anything
        // else first empties the log, so the ref never moves past what the log describes.
        let mut wal = None;
        let mut checkpointed = false;
        let mut restored = false;
        loop {
            let tip = match self.tip() {
                // The tip (or what it names) was deleted by a prune that raced an earlier
                // append: the write-ahead log still holds those objects.
                Err(StoreError::Corrupt(_)) if !restored => {
                    restored = true;
                    if self.restore_from_wal()? > 0 {
                        continue;
                    }
                    self.tip()?
                }
                other => other?,
            };
            if tip.is_none() {
                self.refuse_if_deleted()?;
            }
            let mut built = build(tip.as_ref())?;
            // Single appends are logged. Where git keeps the refs (reftable) the log is not what
            // makes an append durable (its objects are flushed before git moves the ref, which
            // git makes durable itself); it is kept, unflushed, as the copy a racing prune
            // cannot delete.
            let logged = self.opts.method.wal() && !built.as_pack;
            let log_durably = self.opts.fsync && !self.refs_via_git;
            if logged && wal.is_none() {
                wal = Some(self.wal_for_append(&lock)?);
            } else if !logged && !checkpointed {
                self.checkpoint_wal()?;
                checkpointed = true;
            }
            let new_tip = *built
                .commits
                .last()
                .expect("a batch holds at least one entry");
            let mut guard = None;
            if built.as_pack {
                let mut seen = HashSet::new();
                let objs: Vec<Obj> = std::mem::take(&mut built.objects)
                    .into_iter()
                    // Objects the repository already holds may be written again: a duplicate across
                    // packs is harmless, while asking the object store about every miss makes it
                    // rescan the pack directory each time.
                    .filter(|o| seen.insert(o.id))
                    .collect();
                if !objs.is_empty() {
                    guard = Some(
                        pack::write_pack(
                            &self.objects_dir(),
                            self.hash,
                            &objs,
                            gix::zlib::Compression::new(6).expect("level 6 is valid"),
                            self.opts.fsync,
                        )
                        .map_err(io("writing a pack"))?,
                    );
                }
            } else {
                self.write_loose_objects(&built.objects, self.opts.fsync && !log_durably, false)?;
            }
            failpoint("objects-written");
            let outcome = self.cas(&lock, tip.as_ref().map(|t| t.commit), new_tip, reflog);
            let outcome = match outcome {
                Ok(o) => o,
                Err(e) => {
                    if let Some(g) = guard {
                        g.release();
                    }
                    return Err(e);
                }
            };
            match outcome {
                CasOutcome::Moved => {
                    // A prune that began before the ref moved may still have deleted what it
                    // took for garbage (a body or tree the repository already had, say):
                    // whatever is missing now is written again before the append is
                    // acknowledged. The objects are a pure function of the entries.
                    let flushed = match wal.as_mut() {
                        Some(w) if logged => self
                            .wal_log(
                                w,
                                tip.as_ref().map(|t| t.commit),
                                new_tip,
                                &built.objects,
                                log_durably,
                            )
                            .map(|()| {
                                // For the next append: where the records now end (no flush;
                                // without it the next one scans the log).
                                #[cfg(unix)]
                                let _ =
                                    std::os::unix::fs::FileExt::write_all_at(&lock, &w.hint(), 0);
                            }),
                        // git made its own ref storage durable (core.fsync=reference).
                        _ if self.refs_via_git => Ok(()),
                        _ => self.flush(&[self.reflog_path(), self.ref_path()], false),
                    };
                    if let Some(g) = guard {
                        g.release();
                    }
                    flushed?;
                    // Logged first, so that even if this fails the log can restore them.
                    if !built.as_pack {
                        self.rewrite_missing(&built.objects)?;
                    }
                    self.index_after_append(
                        tip.as_ref().map(|t| (t.commit, t.entry.seq)),
                        &built.commits,
                    );
                    if let Some(entry) = built.entries.last() {
                        *self.last_tip.lock().unwrap_or_else(|e| e.into_inner()) = Some(Tip {
                            commit: new_tip,
                            entry: entry.clone(),
                        });
                    }
                    if built.as_pack {
                        self.consolidate_packs();
                    }
                    return Ok((built.commits, built.entries));
                }
                CasOutcome::Conflict | CasOutcome::Busy => {}
                CasOutcome::ObjectsMissing => {
                    if built.as_pack {
                        return Err(StoreError::Corrupt(format!(
                            "the pack written for {} lost objects before the ref moved; run the command again",
                            self.refname
                        )));
                    }
                    self.rewrite_missing(&built.objects)?;
                }
                CasOutcome::Locked(ref_lock, noted) => {
                    self.recover_stale_lock(&ref_lock, &lock, noted);
                }
            }
            if let Some(g) = guard {
                g.release();
            }
            if start.elapsed() > APPEND_DEADLINE {
                return Err(StoreError::Contended(format!(
                    "could not move {} for {}s: another process keeps changing it, or holds {}.lock; try again, and if no git command is running remove that file",
                    self.refname,
                    APPEND_DEADLINE.as_secs(),
                    self.ref_path().display()
                )));
            }
            std::thread::sleep(backoff + Duration::from_micros((unique() % 1000) as u64));
            backoff = (backoff * 2).min(Duration::from_millis(200));
        }
    }

    /// A ledger whose ref is gone but whose reflog still records a tip was deleted behind
    /// git forum's back (git deletes a ref's reflog with the ref): starting a new ledger at
    /// seq 0 there would bury the old chain, so the append is refused with the way back.
    fn refuse_if_deleted(&self) -> Result<(), StoreError> {
        let Some(last) = self
            .reflog()
            .iter()
            .rev()
            .find_map(|l| l.new.filter(|id| !id.is_null()))
        else {
            return Ok(());
        };
        let seq = self
            .read_entry_commit(&last, &mut Vec::new())
            .map(|(e, _, _)| format!("seq {}", e.seq))
            .unwrap_or_else(|_| "a commit no longer in the object store".into());
        Err(StoreError::Corrupt(format!(
            "ledger {} has no ref, but its reflog shows it at {seq} (commit {last}): the ref was deleted outside git forum; restore it with `git forum doctor --repair` (or `git update-ref {} {last}`), or remove the reflog ({}) to start a new ledger",
            self.name,
            self.refname,
            self.reflog_path().display()
        )))
    }

    /// Merges small packs once there are many (git's geometric repack keeps old big packs).
    fn consolidate_packs(&self) {
        if pack::pack_count(&self.objects_dir()) <= MAX_PACKS {
            return;
        }
        let _ = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(&self.common_dir)
            .args(["repack", "-d", "-q", "--geometric=2"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }

    /// Appends one entry (loose objects).
    pub fn append_entry(&mut self, new: &NewEntry) -> Result<Appended, StoreError> {
        let body = new.validate().map_err(StoreError::Invalid)?;
        // A parent is checked before the lock is taken, so a refused append leaves nothing
        // behind, and again under it against the tip the entry is built on.
        let next_seq = |tip: Option<&Tip>| tip.map_or(0, |t| t.entry.seq + 1);
        if new.causal_parent.is_some() {
            new.check_parent(next_seq(self.tip()?.as_ref()))
                .map_err(StoreError::Invalid)?;
        }
        let payload_hash = sha256_hex(body.as_bytes());
        let hash = self.hash;
        let (commits, entries) = self.append_with(
            |tip| {
                new.check_parent(next_seq(tip))
                    .map_err(StoreError::Invalid)?;
                let entry = Entry::next(tip.map(|t| &t.entry), new, payload_hash.clone());
                let mut objects = Vec::with_capacity(3);
                let blob = object(hash, Kind::Blob, body.as_bytes().to_vec())?;
                let tree = object(hash, Kind::Tree, tree_bytes(&blob.id))?;
                let commit = object(
                    hash,
                    Kind::Commit,
                    commit_bytes(&entry, &tree.id, tip.map(|t| &t.commit)),
                )?;
                let commits = vec![commit.id];
                objects.extend([blob, tree, commit]);
                Ok(Built {
                    objects,
                    commits,
                    entries: vec![entry],
                    as_pack: false,
                })
            },
            &format!("forum: append {}", one_line(&new.kind, "")),
        )?;
        Ok(Appended {
            entry: entries.into_iter().next().expect("one entry"),
            commit: commits[0],
        })
    }

    /// Appends many entries as one pack with one flush and one ref update.
    pub fn append_entries(&mut self, batch: &[NewEntry]) -> Result<Vec<Appended>, StoreError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let mut bodies = Vec::with_capacity(batch.len());
        for (i, n) in batch.iter().enumerate() {
            let body = n
                .validate()
                .map_err(|e| StoreError::Invalid(format!("entry {i} of the batch: {e}")))?;
            let ph = sha256_hex(body.as_bytes());
            bodies.push((body, ph));
        }
        let hash = self.hash;
        let (commits, entries) = self.append_with(
            |tip| {
                build_batch(
                    hash,
                    tip,
                    batch
                        .iter()
                        .zip(bodies.iter())
                        .map(|(n, (b, ph))| (n, b.as_bytes(), ph.as_str(), true)),
                )
            },
            &format!("forum: append {} entries", batch.len()),
        )?;
        Ok(entries
            .into_iter()
            .zip(commits)
            .map(|(entry, commit)| Appended { entry, commit })
            .collect())
    }

    /// Writes already-hashed entries (an import) as one pack on an empty ledger. Each item is the
    /// entry and its canonical body, if present.
    pub fn import_entries(
        &mut self,
        items: &[(Entry, Option<String>)],
    ) -> Result<ObjectId, StoreError> {
        if self.tip_id()?.is_some() {
            return Err(StoreError::Invalid(format!(
                "ledger {:?} already exists; import into a new ledger with --ledger NAME",
                self.name
            )));
        }
        if items.is_empty() {
            return Err(StoreError::Invalid(
                "nothing to import: the Forum ledger has no entries".into(),
            ));
        }
        let hash = self.hash;
        let name = self.name.clone();
        let (commits, _) = self.append_with(
            |tip| {
                if tip.is_some() {
                    return Err(StoreError::Invalid(format!(
                        "ledger {name:?} was created while importing"
                    )));
                }
                let mut objects = Vec::with_capacity(items.len() * 3);
                let mut blobs = Vec::new();
                let mut trees = Vec::new();
                let mut commits = Vec::with_capacity(items.len());
                let mut entries = Vec::with_capacity(items.len());
                let empty_tree = object(hash, Kind::Tree, Vec::new())?;
                let mut parent: Option<ObjectId> = None;
                for (entry, body) in items {
                    let tree_id = match body {
                        Some(b) => {
                            let blob = object(hash, Kind::Blob, b.as_bytes().to_vec())?;
                            let tree = object(hash, Kind::Tree, tree_bytes(&blob.id))?;
                            let id = tree.id;
                            blobs.push(blob);
                            trees.push(tree);
                            id
                        }
                        None => empty_tree.id,
                    };
                    let c = object(
                        hash,
                        Kind::Commit,
                        commit_bytes(entry, &tree_id, parent.as_ref()),
                    )?;
                    parent = Some(c.id);
                    commits.push(c.id);
                    objects.push(c);
                    entries.push(entry.clone());
                }
                trees.push(empty_tree);
                objects.extend(trees);
                objects.extend(blobs);
                Ok(Built {
                    objects,
                    commits,
                    entries,
                    as_pack: true,
                })
            },
            &format!("forum: import {} entries", items.len()),
        )?;
        Ok(*commits.last().expect("non-empty import"))
    }
}
