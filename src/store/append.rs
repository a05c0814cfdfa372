//! The append path: build an entry's objects on the current tip, write them, and move the ref
//! by compare-and-swap, retrying on contention until [`APPEND_DEADLINE`]; also batches (one
//! pack, one flush) and imports.

use std::collections::HashSet;
use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use gix::ObjectId;
use gix::hash::Kind as HashKind;
use gix::objs::Kind;

use super::codec::{commit_bytes, object, one_line, tree_bytes};
use super::error::{RefConflict, StoreError, io};
pub(crate) use super::failpoint::failpoint;
use super::forum_dir;
use super::handle::{Appended, GitStore, Tip};
use super::lock::CasOutcome;
use super::objects::unique;
use super::pack::{self, Obj};
use super::wal::{Mark, Wal, WalRecord, note_written};
use crate::ledger::hash::sha256_hex;
use crate::ledger::{Entry, NewEntry};

/// A tip that cannot be read, as an append's refusal: the problem, that nothing was appended,
/// and where to look.
fn refused(e: StoreError) -> StoreError {
    match e {
        StoreError::Corrupt(m) => StoreError::Corrupt(format!(
            "{m}; nothing was appended; run `git forum doctor` to see the damage and repair it"
        )),
        other => other,
    }
}

pub(super) struct Built {
    pub(super) objects: Vec<Obj>,
    pub(super) commits: Vec<ObjectId>,
    pub(super) entries: Vec<Entry>,
    pub(super) as_pack: bool,
    /// A pack already written for these entries (an import streams its own).
    pub(super) prewritten: Option<pack::PackGuard>,
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
        prewritten: None,
    })
}

/// What the attempts of one append keep of the write-ahead log between them.
#[derive(Default)]
struct AppendLog {
    /// The log a single append writes its record to, once opened.
    wal: Option<Wal>,
    /// Whether the log was emptied for this append.
    checkpointed: bool,
    /// The log and its records, whose objects go into a batch's own pack.
    batch: Option<(Wal, Vec<WalRecord>)>,
}

impl GitStore {
    /// Appends entries built by `build` on the current tip, retrying on conflict. `build`
    /// receives the tip and returns the objects to write (commits first) and the new commit ids.
    pub(super) fn append_with<F>(
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
        let mut log = AppendLog::default();
        let mut restored = false;
        // The lock that blocked the last attempt, and when it was last looked into.
        let mut blocked: Option<std::path::PathBuf> = None;
        let mut looked: Option<Instant> = None;
        // Set once git refused to name objects a racing prune had deleted (see below).
        let mut into_a_pack = false;
        loop {
            let Some(tip) = self.tip_to_build_on(&mut restored)? else {
                continue;
            };
            let mut built = build(tip.as_ref())?;
            let logged = self.ready_log(&lock, &built, &mut log)?;
            let new_tip = *built
                .commits
                .last()
                .expect("a batch holds at least one entry");
            let guard = self.write_objects(&mut built, &mut log, into_a_pack)?;
            failpoint("objects-written");
            let outcome = match self.cas(&lock, tip.as_ref().map(|t| t.commit), new_tip, reflog) {
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
                    let wal = log.wal.as_mut().filter(|_| logged);
                    self.acknowledge_and_flush(lock, wal, tip.as_ref(), &built, guard)?;
                    failpoint("appended");
                    return Ok((built.commits, built.entries));
                }
                CasOutcome::Conflict | CasOutcome::Busy => {}
                CasOutcome::ObjectsMissing => {
                    if built.as_pack || into_a_pack {
                        return Err(StoreError::Corrupt(format!(
                            "the pack written for {} lost objects before the ref moved; run the command again",
                            self.refname
                        )));
                    }
                    // A prune deleted the loose objects before git would name them. Written
                    // loose again, they could go the same way every time (a prune run in a
                    // loop did that for the whole deadline); no prune deletes a packed object.
                    into_a_pack = true;
                }
                CasOutcome::Locked(held, noted) => {
                    let at = (tip.as_ref().map(|t| t.commit), start);
                    if let Some(held) = self.still_locked(held, noted, &lock, &mut looked, at)? {
                        blocked = Some(held);
                    }
                }
            }
            if let Some(g) = guard {
                g.release();
            }
            if start.elapsed() > self.append_deadline {
                return Err(self.gave_up(blocked.take(), tip.as_ref().map(|t| t.commit)));
            }
            std::thread::sleep(backoff + Duration::from_micros((unique() % 1000) as u64));
            backoff = (backoff * 2).min(Duration::from_millis(200));
        }
    }

    /// Readies the write-ahead log for `built` and says whether it is logged. Single appends
    /// are logged (on Linux, where the log knows its boot). With the `wal` flush method in a
    /// files repository the log is what makes an append durable. Elsewhere (git keeps the refs,
    /// as in reftable, and makes them durable itself; another flush method flushes the objects
    /// and the ref) it is kept unflushed, as the copy of the append's objects a racing prune
    /// cannot delete (see `wal/recover.rs`). Anything else first empties the log, once per
    /// append.
    fn ready_log(
        &self,
        lock: &File,
        built: &Built,
        log: &mut AppendLog,
    ) -> Result<bool, StoreError> {
        let logged = cfg!(target_os = "linux") && !built.as_pack;
        if logged && log.wal.is_none() {
            log.wal = Some(self.wal_for_append(lock)?);
        } else if !logged && !log.checkpointed {
            log.checkpointed = true;
            if built.as_pack && built.prewritten.is_none() {
                // The log's objects go into this batch's own pack (one pack, and no prune can
                // delete them there); the log is emptied once the pack is written.
                log.batch = self.log_for_batch()?;
            } else {
                self.checkpoint_wal()?;
            }
        }
        Ok(logged)
    }

    /// The conflict an append gives up with at its deadline, naming the lock that last blocked
    /// it (else the ref's own lock).
    fn gave_up(
        &self,
        blocked: Option<std::path::PathBuf>,
        expected: Option<ObjectId>,
    ) -> StoreError {
        let held = blocked.unwrap_or_else(|| self.ref_lock_path());
        let stale = self
            .inspect_lock(&held)
            .filter(|l| l.stale())
            .map(|l| l.age);
        self.conflict(expected, self.append_deadline, held, stale)
    }

    /// Whether an append's write-ahead log record is what makes it durable: the `wal` flush
    /// method, durable appends, and refs kept as files.
    fn log_durably(&self) -> bool {
        self.opts.fsync && !self.refs_via_git && self.opts.method.wal()
    }

    /// The tip an append builds on. A tip gone from the object store or damaged (deleted
    /// outside git forum, or lost in a crash) is first put back from what the write-ahead log
    /// holds, once per append (`restored`): `Ok(None)` then asks the caller to look again.
    /// Never builds on an entry that cannot be read whole.
    fn tip_to_build_on(&self, restored: &mut bool) -> Result<Option<Option<Tip>>, StoreError> {
        let tip = match self.tip() {
            Err(StoreError::Corrupt(_)) if !*restored => {
                *restored = true;
                if self.restore_from_wal()? > 0 {
                    return Ok(None);
                }
                self.tip().map_err(refused)?
            }
            other => other.map_err(refused)?,
        };
        match &tip {
            None => self.refuse_if_deleted()?,
            Some(t) => {
                if let Some(damage) = self.parent_damage(t) {
                    if !*restored {
                        *restored = true;
                        self.restore_from_wal()?;
                        return Ok(None);
                    }
                    return Err(StoreError::Corrupt(format!(
                        "ledger {}: seq {} (commit {}), the entry this append would follow, is damaged: {damage}, and the write-ahead log holds no copy; nothing was appended; run `git forum doctor` to see the damage and repair it from a clone, a pack or an export",
                        self.name, t.entry.seq, t.commit
                    )));
                }
            }
        }
        Ok(Some(tip))
    }

    /// Writes a batch's objects as one pack, with the objects the write-ahead log still holds
    /// (`batch_log`, emptied once they are in the pack).
    fn write_batch_pack(
        &self,
        built: &mut Built,
        batch_log: &mut Option<(Wal, Vec<WalRecord>)>,
    ) -> Result<Option<pack::PackGuard>, StoreError> {
        let mut seen = HashSet::new();
        let mut logged_objs = Vec::new();
        if let Some((_, records)) = batch_log.as_ref() {
            for rec in records {
                for (kind, data) in &rec.objects {
                    logged_objs.push(object(self.hash, *kind, data.clone())?);
                }
            }
        }
        let objs: Vec<Obj> = std::mem::take(&mut built.objects)
            .into_iter()
            .chain(logged_objs)
            // Objects the repository already holds may be written again: a duplicate across
            // packs is harmless, while asking the object store about every miss makes it
            // rescan the pack directory each time.
            .filter(|o| seen.insert(o.id))
            .collect();
        let mut guard = None;
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
        if let Some((mut log, _)) = batch_log.take() {
            self.empty_packed_log(&mut log)?;
        }
        Ok(guard)
    }

    /// Writes an attempt's objects: a batch's as its pack (unless written already), else loose,
    /// or as a pack of their own once a prune deleted them (`into_a_pack`). Returns the guard of
    /// the pack that holds them, if one does.
    fn write_objects(
        &self,
        built: &mut Built,
        log: &mut AppendLog,
        into_a_pack: bool,
    ) -> Result<Option<pack::PackGuard>, StoreError> {
        let guard = built.prewritten.take();
        if built.as_pack && guard.is_none() {
            return self.write_batch_pack(built, &mut log.batch);
        }
        if into_a_pack {
            return self.write_append_pack(&built.objects).map(Some);
        }
        let flush = self.opts.fsync && !self.log_durably();
        self.write_loose_objects(&built.objects, flush, false)?;
        Ok(guard)
    }

    /// A single append's objects as a pack of their own, kept (`.keep`) until the ref names
    /// them; merged with the others once the writer lock is released (see `merge.rs`).
    fn write_append_pack(&self, objects: &[Obj]) -> Result<pack::PackGuard, StoreError> {
        // Commits first, as in every pack git forum writes (an append builds its body first).
        let objs: Vec<Obj> = objects.iter().rev().cloned().collect();
        let guard = pack::write_pack(
            &self.objects_dir(),
            self.hash,
            &objs,
            gix::zlib::Compression::new(1).expect("level 1 is valid"),
            self.opts.fsync,
        )
        .map_err(io("writing a pack"))?;
        self.want_pack_merge();
        Ok(guard)
    }

    /// [`acknowledge`](Self::acknowledge), then, when the record is in the log but not yet on
    /// disk, releases the writer lock `lock` so that other appenders go on while this one waits
    /// for a flush that covers it (see `wal/group.rs`). Consumes the lock: once it is released,
    /// a pack merge this append asked for starts (see `merge.rs`).
    fn acknowledge_and_flush(
        &self,
        lock: super::lock::Held,
        log: Option<&mut Wal>,
        tip: Option<&Tip>,
        built: &Built,
        guard: Option<pack::PackGuard>,
    ) -> Result<(), StoreError> {
        if let Some(ticket) = self.acknowledge(&lock, log, tip, built, guard)? {
            lock.unlock();
            failpoint("wal-logged");
            self.flush_covering(&lock, ticket)?;
        }
        // Packs are merged once the writer lock is released (see `merge.rs`).
        drop(lock);
        self.merge_packs_if_wanted();
        Ok(())
    }

    /// After the ref moved: logs the append (`log`, for a single append), makes it durable,
    /// writes again whatever a racing prune deleted, and updates the index and the remembered
    /// tip, so that the append can be acknowledged. With the `wal` flush method the log is not
    /// flushed here: the ticket returned is what [`GitStore::flush_covering`] waits on once the
    /// writer lock is released, so that one flush covers every appender waiting on it.
    fn acknowledge(
        &self,
        lock: &File,
        log: Option<&mut Wal>,
        tip: Option<&Tip>,
        built: &Built,
        guard: Option<pack::PackGuard>,
    ) -> Result<Option<Mark>, StoreError> {
        let new_tip = *built
            .commits
            .last()
            .expect("a batch holds at least one entry");
        let log_durably = self.log_durably();
        // A prune that began before the ref moved may still have deleted what it took for
        // garbage (a body or tree the repository already had, say): whatever is missing now is
        // written again before the append is acknowledged. The objects are a pure function of
        // the entries.
        let mut ticket = None;
        let logged_now = match log {
            Some(w) => self
                .wal_log(w, tip.map(|t| t.commit), new_tip, &built.objects)
                .and_then(|pending| {
                    // For the next append: where the records now end (no flush; without it the
                    // next one scans the log).
                    #[cfg(unix)]
                    let _ = std::os::unix::fs::FileExt::write_all_at(lock, &w.hint(), 0);
                    if pending && log_durably {
                        ticket = Some(note_written(lock).map_err(io(format!(
                            "noting a write-ahead log record in {}",
                            self.writer_lock_path().display()
                        )))?);
                    }
                    Ok(())
                }),
            None => Ok(()),
        };
        let flushed = logged_now.and_then(|()| {
            if log_durably || self.refs_via_git {
                // The log's flush covers the append, or git made its own ref storage durable
                // (core.fsync=reference).
                Ok(())
            } else {
                self.flush(&[self.reflog_path(), self.ref_path()], false)
            }
        });
        if let Some(g) = guard {
            g.release();
        }
        flushed?;
        // Logged first, so that even if this fails the log can restore them.
        if !built.as_pack {
            self.rewrite_missing(&built.objects)?;
        }
        self.index_after_append(tip.map(|t| (t.commit, t.entry.seq)), &built.commits);
        if let Some(entry) = built.entries.last() {
            // A single append's objects are its blob, tree and commit.
            let parts = match built.objects.as_slice() {
                [blob, tree, _] if !built.as_pack => Some((tree.id, Some(blob.id))),
                _ => None,
            };
            *self.last_tip.lock().unwrap_or_else(|e| e.into_inner()) = Some(Tip {
                commit: new_tip,
                entry: entry.clone(),
                parts,
            });
        }
        if built.as_pack {
            // Merged once the writer lock is released (see `merge.rs`).
            self.want_pack_merge();
        }
        Ok(ticket)
    }

    /// A ref lock held at the compare-and-swap: one a git-forum writer left when it died is
    /// removed (files only: git's reftable lock is git's) and `None` returned; one nothing
    /// alive holds is a conflict now rather than after the deadline; otherwise the lock, to
    /// name if the deadline passes. `at` is the tip the append expected and when it started.
    fn still_locked(
        &self,
        held: std::path::PathBuf,
        noted: Option<ObjectId>,
        lock: &File,
        looked: &mut Option<Instant>,
        at: (Option<ObjectId>, Instant),
    ) -> Result<Option<std::path::PathBuf>, StoreError> {
        if !self.refs_via_git && self.recover_stale_lock(&held, lock, noted) {
            return Ok(None);
        }
        // A look through /proc, at most once a second.
        if looked.is_none_or(|t: Instant| t.elapsed() >= Duration::from_secs(1)) {
            *looked = Some(Instant::now());
            if let Some(l) = self.inspect_lock(&held)
                && l.stale()
            {
                return Err(self.conflict(at.0, at.1.elapsed(), held, Some(l.age)));
            }
        }
        Ok(Some(held))
    }

    /// The typed conflict an append gives up with: where the ref stands now, what the append
    /// expected, and the lock that blocked it (with its age when no live process holds it).
    pub(crate) fn conflict(
        &self,
        expected: Option<ObjectId>,
        waited: Duration,
        lock: std::path::PathBuf,
        stale: Option<Duration>,
    ) -> StoreError {
        let now = self.tip().ok().flatten();
        StoreError::Conflict(Box::new(RefConflict {
            refname: self.refname.clone(),
            lock: std::path::absolute(&lock).unwrap_or(lock),
            stale,
            waited,
            expected,
            tip: now.as_ref().map(|t| t.commit),
            tip_seq: now.map(|t| t.entry.seq),
        }))
    }

    /// The lock that guards the ledger ref: git's reftable stack lock where git keeps the
    /// refs, else the loose ref's `.lock`.
    pub(crate) fn ref_lock_path(&self) -> std::path::PathBuf {
        if self.refs_via_git {
            self.stack_lock_path()
        } else {
            std::path::PathBuf::from(format!("{}.lock", self.ref_path().display()))
        }
    }

    /// The lock file `path` of this repository and what is known of its holder.
    pub(crate) fn inspect_lock(&self, path: &Path) -> Option<super::stale::LockFile> {
        let mut dirs: Vec<&Path> = vec![self.common_dir.as_path()];
        if let Some(w) = self.repo.workdir() {
            dirs.push(w);
        }
        super::stale::LockFile::inspect(path, &dirs)
    }

    /// What is missing from the object store of the entry at `tip` (its commit, tree or body),
    /// which an append is about to follow; `None` when it is whole. A redacted body (an empty
    /// tree) is whole. The write-ahead log is not asked: what only it holds is missing here.
    fn parent_damage(&self, tip: &Tip) -> Option<String> {
        if let Some((tree, blob)) = tip.parts {
            // Known ids (the last append of this handle wrote them): present is enough.
            if !self.present(&tip.commit) {
                return Some(format!("its commit {} is missing", tip.commit));
            }
            if !self.present(&tree) {
                return Some(format!("its tree {tree} is missing"));
            }
            return blob
                .filter(|b| !self.present(b))
                .map(|b| format!("its body (blob {b}) is missing"));
        }
        let mut buf = Vec::new();
        // The object store, asked again through a new handle before anything is called missing.
        let stored = |id: &ObjectId, buf: &mut Vec<u8>| match self.read_stored(id, buf) {
            Ok(Some(k)) => Some(k),
            _ => self.read_fresh(id, buf, 3),
        };
        if stored(&tip.commit, &mut buf) != Some(Kind::Commit) {
            return Some(format!("its commit {} is missing", tip.commit));
        }
        let Some(tree) = super::codec::parse_commit(&buf, self.hash).map(|c| c.tree) else {
            return Some(format!("its commit {} cannot be parsed", tip.commit));
        };
        if stored(&tree, &mut buf) != Some(Kind::Tree) {
            return Some(format!("its tree {tree} is missing"));
        }
        let blob = match self.blob_in_tree(&tree, &mut buf) {
            Ok(None) => return None,
            Ok(Some(blob)) => blob,
            Err(_) => return Some(format!("its tree {tree} is damaged")),
        };
        (!self.present(&blob)).then(|| format!("its body (blob {blob}) is missing"))
    }

    /// True when object `id` is in the object store: its loose file is there (one `access`),
    /// or the object store has it, or a new handle on it does (see `GitStore::read_fresh`).
    fn present(&self, id: &ObjectId) -> bool {
        let hex = id.to_hex().to_string();
        let loose = self.objects_dir().join(&hex[..2]).join(&hex[2..]);
        rustix::fs::access(&loose, rustix::fs::Access::EXISTS).is_ok()
            || super::odb::exists(&self.repo, id)
            || self.read_fresh(id, &mut Vec::new(), 3).is_some()
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

    /// Appends one entry (loose objects).
    pub fn append_entry(&mut self, new: &NewEntry) -> Result<Appended, StoreError> {
        Ok(self
            .append_entry_at(new, None)?
            .expect("an append without an expected seq always lands"))
    }

    /// Appends one entry as seq `expect` only (`None`: at whatever seq is next): `Ok(None)`,
    /// with nothing written, when the ledger has moved past or short of it. The check is made
    /// against the tip each compare-and-swap attempt builds on, so no other writer can slip in
    /// between.
    pub fn append_entry_at(
        &mut self,
        new: &NewEntry,
        expect: Option<u64>,
    ) -> Result<Option<Appended>, StoreError> {
        let moved = std::cell::Cell::new(false);
        let body = new
            .validate()
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        // A parent is checked before the lock is taken, so a refused append leaves nothing
        // behind, and again under it against the tip the entry is built on.
        let next_seq = |tip: Option<&Tip>| tip.map_or(0, |t| t.entry.seq + 1);
        if new.causal_parent.is_some() {
            new.check_parent(next_seq(self.tip()?.as_ref()))
                .map_err(|e| StoreError::Invalid(e.to_string()))?;
        }
        let payload_hash = sha256_hex(body.as_bytes());
        let hash = self.hash;
        // The body and its tree do not depend on the tip. With the write-ahead log they are
        // written before the writer lock is taken: creating files is the slowest step of an
        // append on some file systems (ext4's inode allocator scans past recently freed
        // inodes), and other appenders need not wait on it. Only the commit, which names the
        // tip, is created under the lock (the two are found present there and skipped). Nothing
        // is flushed: the log's record holds all three, and what a racing prune deletes before
        // the ref moves is written again as for any append.
        let blob = object(hash, Kind::Blob, body.as_bytes().to_vec())?;
        let tree = object(hash, Kind::Tree, tree_bytes(&blob.id))?;
        // (Not for an append at an expected seq, which may find the ledger moved and must
        // then leave nothing behind.)
        if cfg!(target_os = "linux") && self.log_durably() && expect.is_none() {
            self.write_loose_objects(&[blob.clone(), tree.clone()], false, false)?;
        }
        // The commit's file is made here too, and written and named under the lock.
        self.ready_object_file();
        let appended = self.append_with(
            |tip| {
                if expect.is_some_and(|seq| seq != next_seq(tip)) {
                    moved.set(true);
                    return Err(StoreError::Contended(
                        "the ledger moved past the expected seq".into(),
                    ));
                }
                new.check_parent(next_seq(tip))
                    .map_err(|e| StoreError::Invalid(e.to_string()))?;
                let entry = Entry::next(tip.map(|t| &t.entry), new, payload_hash.clone());
                let mut objects = Vec::with_capacity(3);
                let (blob, tree) = (blob.clone(), tree.clone());
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
                    prewritten: None,
                })
            },
            &format!("forum: append {}", one_line(&new.kind, "")),
        );
        let (commits, entries) = match appended {
            Err(_) if moved.get() => return Ok(None),
            other => other?,
        };
        Ok(Some(Appended {
            entry: entries.into_iter().next().expect("one entry"),
            commit: commits[0],
        }))
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
}

/// What [`GitStore::import_forum_dir`] did.
#[derive(Debug)]
pub(crate) struct Imported {
    pub(crate) entries: u64,
    /// Forum's checkpoint of the imported entries.
    pub(crate) checkpoint: String,
    /// The new ledger's tip.
    pub(crate) commit: ObjectId,
    /// Entries without a body in the directory (Forum reads that as redacted).
    pub(crate) absent_bodies: usize,
    /// The files whose torn last line was dropped.
    pub(crate) torn: Vec<std::path::PathBuf>,
}

/// Why an import did not happen.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ImportError {
    /// The directory cannot be read as a Forum ledger.
    #[error(transparent)]
    Dir(#[from] forum_dir::ForumDirError),
    /// The directory reads, but its entries or bodies do not verify.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[cfg(test)]
mod tests;
