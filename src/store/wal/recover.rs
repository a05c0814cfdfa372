//! The ledger side of the write-ahead log: opening a ledger's log for an append, logging an
//! append, checkpoints that flush the repository and empty the log, and the recovery after a
//! reboot that restores what the disk lost (objects, the ref, its reflog lines).
//!
//! The log is also the copy of each append's objects that `git prune` cannot delete. A prune
//! lists what the refs reach and then deletes every other loose object; with `--expire=now`
//! (and `git gc --prune=now`) it spares none however new, so one that listed the refs just
//! before an append moved its ref deletes that append's objects just after, acknowledged or
//! not. Nothing on a loose object file can stop that (git reads "now" as "everything"), and
//! nothing tells when such a prune is done. What a prune never deletes is an object in a pack,
//! and a pack written after the objects became reachable is safe from repacks too (a repack
//! deletes only the packs it listed when it began, and one that began after the ref moved
//! keeps what the ref reaches). So the log is never emptied by dropping its records: every
//! object it holds is first written, from the log's own bytes, into one pack
//! ([`GitStore::pack_logged_objects`]). Until then, whatever a late prune deleted is put back from the log by
//! the next append (before it builds on it) and by any reader that meets it missing.

use super::*;

impl GitStore {
    /// Where ledger `NAME` keeps its log: `.git/forum/wal/NAME.wal`.
    pub(crate) fn wal_path(&self) -> PathBuf {
        self.forum_dir()
            .join("wal")
            .join(format!("{}.wal", self.name()))
    }

    /// The log for an append, created on first use and recovered if an earlier boot left it
    /// with records. The caller holds the writer lock, whose file holds the last append's hint
    /// (see [`Wal::open`]).
    pub(crate) fn wal_for_append(&self, lock: &File) -> Result<Wal, StoreError> {
        let path = self.wal_path();
        let capacity = self.options().wal_size;
        let mut hint = [0u8; HEADER_LEN];
        let hint = lock.read_exact_at(&mut hint, 0).ok().map(|()| &hint[..]);
        let wal = match Wal::open(&path, self.object_hash(), hint).map_err(wal_io(&path))? {
            Some(mut wal) if wal.capacity() > capacity => {
                // Made smaller by `git config forum.walSize`: empty the old one, then make the
                // new. A smaller log than the setting grows when it first fills ([`grown`]).
                self.checkpoint_wal_with(&mut wal, false, None)?;
                let next = wal.header.generation.wrapping_add(1);
                drop(wal);
                Wal::create(&path, self.object_hash(), capacity, self.tip_id()?, next)
                    .map_err(wal_io(&path))?
            }
            Some(mut wal) => {
                if wal.needs_recovery() {
                    self.recover_with(&mut wal)?;
                } else if wal.header.version < 2 || wal.header.boot != boot_id() {
                    // An earlier version's format, or an empty log last reset in an earlier
                    // boot (its header must name this boot before it holds this boot's
                    // records): flush and start over.
                    self.checkpoint_wal_with(&mut wal, true, None)?;
                }
                wal
            }
            None => {
                // A new log starts from a repository flushed with the ref where it is (nothing
                // to flush for a ledger that does not exist yet).
                let tip = self.tip_id()?;
                if tip.is_some() {
                    self.flush_repository()?;
                }
                let first = capacity.min(FIRST_CAPACITY);
                // After the generation of any log this one replaces (its hint may be left).
                let generation = hint
                    .and_then(Header::decode)
                    .map_or(1, |h| h.generation.wrapping_add(1).max(1));
                Wal::create(&path, self.object_hash(), first, tip, generation)
                    .map_err(wal_io(&path))?
            }
        };
        Ok(wal)
    }

    /// Logs an append that moved the ref from `old` to `new` writing `objects`, without
    /// flushing the log: returns true when the record is in the log (a flush must still cover
    /// it before the append is durable; see `group.rs`), false when the append is on disk
    /// already. When the log's last tip is not `old`, the parent chain is not all in the log:
    /// the repository is flushed and the log emptied first. A full log is emptied the same way
    /// after this append (which the flush then covers). Emptying packs what the log held first
    /// (see [`GitStore::empty_log`]).
    pub(crate) fn wal_log(
        &self,
        wal: &mut Wal,
        old: Option<ObjectId>,
        new: ObjectId,
        objects: &[Obj],
    ) -> Result<bool, StoreError> {
        let path = wal.path().to_path_buf();
        if wal.header.last_new != old {
            // The parent chain is not all in the log: flush it, then log from here.
            self.empty_log(wal, old, &[], None)?;
        }
        let rec = WalRecord::new(old, new, objects);
        if !wal.append(&rec, false).map_err(wal_io(&path))? {
            // Full: flush everything, this append included, and start a new generation.
            self.empty_log(wal, Some(new), std::slice::from_ref(&rec), None)?;
            return Ok(false);
        }
        Ok(true)
    }

    /// Flushes the repository and empties the ledger's log, if it has one. Batches, redactions
    /// and `sync` call it (holding the writer lock) before they change the ref themselves.
    pub(crate) fn checkpoint_wal(&self) -> Result<(), StoreError> {
        self.checkpoint_wal_if(None)
    }

    /// [`checkpoint_wal`](Self::checkpoint_wal) for a redaction: the body whose SHA-256 is
    /// `forget` goes into no pack (what reaches it is about to be rewritten).
    pub(crate) fn checkpoint_wal_forgetting(&self, forget: &[u8; 32]) -> Result<(), StoreError> {
        self.checkpoint_wal_if(Some(forget))
    }

    fn checkpoint_wal_if(&self, forget: Option<&[u8; 32]>) -> Result<(), StoreError> {
        let path = self.wal_path();
        match Wal::open(&path, self.object_hash(), None).map_err(wal_io(&path))? {
            Some(mut wal) => self.checkpoint_wal_with(&mut wal, false, forget),
            None => Ok(()),
        }
    }

    fn checkpoint_wal_with(
        &self,
        wal: &mut Wal,
        force: bool,
        forget: Option<&[u8; 32]>,
    ) -> Result<(), StoreError> {
        if wal.needs_recovery() {
            return self.recover_with(wal);
        }
        let tip = self.tip_id().ok().flatten();
        if force || !wal.is_empty() || wal.header.last_new != tip {
            self.empty_log(wal, tip, &[], forget)?;
        }
        Ok(())
    }

    /// The log, and its records, for a batch to put into its own pack before it empties the
    /// log with [`empty_packed_log`](Self::empty_packed_log): `None` when there is no log or
    /// nothing to empty (a log an earlier boot left is recovered, and so emptied, first).
    pub(crate) fn log_for_batch(&self) -> Result<Option<(Wal, Vec<WalRecord>)>, StoreError> {
        let path = self.wal_path();
        let Some(mut wal) = Wal::open(&path, self.object_hash(), None).map_err(wal_io(&path))?
        else {
            return Ok(None);
        };
        if wal.needs_recovery() {
            self.recover_with(&mut wal)?;
            return Ok(None);
        }
        let tip = self.tip_id().ok().flatten();
        if wal.is_empty() && wal.header.last_new == tip {
            return Ok(None);
        }
        let records = wal.records();
        Ok(Some((wal, records)))
    }

    /// Empties a log whose objects a batch's pack now holds, with the ref where it is.
    pub(crate) fn empty_packed_log(&self, wal: &mut Wal) -> Result<(), StoreError> {
        self.flush_repository()?;
        let tip = self.tip_id().ok().flatten();
        let path = wal.path().to_path_buf();
        wal.reset(tip).map_err(wal_io(&path))
    }

    /// Empties the log, with the ref at `tip`: every object its records (and `extra`, an
    /// append that did not fit) hold goes into one pack first, so that no prune can delete
    /// what the log stops holding (see the module doc); then the repository is flushed and a
    /// new generation started. No body hashing to `forget` is packed.
    pub(crate) fn empty_log(
        &self,
        wal: &mut Wal,
        tip: Option<ObjectId>,
        extra: &[WalRecord],
        forget: Option<&[u8; 32]>,
    ) -> Result<(), StoreError> {
        let mut records = wal.records();
        records.extend_from_slice(extra);
        self.pack_logged_objects(&records, forget)?;
        self.flush_repository()?;
        let path = wal.path().to_path_buf();
        wal.reset(tip).map_err(wal_io(&path))?;
        self.grown(wal, tip)
    }

    /// A log smaller than `forum.walSize` (every log starts at [`FIRST_CAPACITY`]) made again
    /// at full size, once it has just been emptied; any other log as it is.
    fn grown(&self, wal: &mut Wal, tip: Option<ObjectId>) -> Result<(), StoreError> {
        let capacity = self.options().wal_size;
        if wal.capacity() < capacity {
            let next = wal.header.generation.wrapping_add(1);
            let path = wal.path().to_path_buf();
            *wal = Wal::create(&path, self.object_hash(), capacity, tip, next)
                .map_err(wal_io(&path))?;
        }
        Ok(())
    }

    /// Writes every object of `records` into one pack, from the records' own bytes (so an
    /// object a prune already deleted is there again), leaving out a blob whose SHA-256 is
    /// `forget`, the trees that name it and the commits of those trees. The pack is written
    /// after the records' ref moves, so no prune and no repack removes what the ref reaches
    /// (see the module doc); the caller flushes.
    pub(crate) fn pack_logged_objects(
        &self,
        records: &[WalRecord],
        forget: Option<&[u8; 32]>,
    ) -> Result<(), StoreError> {
        let hash = self.object_hash();
        let mut seen = HashSet::new();
        let mut objs = Vec::new();
        let mut dropped: HashSet<ObjectId> = HashSet::new();
        // Blobs, then trees, then commits, so what a skipped object names is known first.
        for want in [Kind::Blob, Kind::Tree, Kind::Commit, Kind::Tag] {
            for rec in records {
                for (kind, data) in rec.objects.iter().filter(|(k, _)| *k == want) {
                    let o = object(hash, *kind, data.clone())?;
                    let skip = match (forget, kind) {
                        (Some(h), Kind::Blob) => {
                            <sha2::Sha256 as sha2::Digest>::digest(data).as_slice() == h.as_slice()
                        }
                        (Some(_), Kind::Tree) => dropped
                            .iter()
                            .any(|b| data.windows(b.as_bytes().len()).any(|w| w == b.as_bytes())),
                        (Some(_), Kind::Commit) => crate::store::codec::parse_commit(data, hash)
                            .is_some_and(|c| dropped.contains(&c.tree)),
                        _ => false,
                    };
                    if skip {
                        dropped.insert(o.id);
                    } else if seen.insert(o.id) {
                        objs.push(o);
                    }
                }
            }
        }
        if objs.is_empty() {
            return Ok(());
        }
        // Commits first, as every pack git forum writes has them.
        objs.reverse();
        let guard = crate::store::pack::write_pack(
            &self.objects_dir(),
            hash,
            &objs,
            gix::zlib::Compression::new(1).expect("level 1 is valid"),
            false,
        )
        .map_err(|e| StoreError::Io {
            context: "packing the objects of the write-ahead log".into(),
            source: e,
        })?;
        // Its objects are reachable already: nothing needs the `.keep`.
        guard.release();
        // Merged once the writer lock is released (see `merge.rs`).
        self.want_pack_merge();
        Ok(())
    }

    /// Called when a ledger is opened: restores what an earlier boot's log holds but the disk
    /// lost (a no-op, one small read, when the log was written in this boot or is empty).
    pub(crate) fn recover_wal_if_needed(&self) -> Result<(), StoreError> {
        let path = self.wal_path();
        // The common case, one small read: the header names this boot, so nothing was lost.
        let mut head = [0u8; HEADER_LEN];
        if let Ok(f) = File::open(&path)
            && f.read_exact_at(&mut head, 0).is_ok()
            && Header::decode(&head).is_some_and(|h| h.boot == boot_id())
        {
            return Ok(());
        }
        match Wal::open(&path, self.object_hash(), None) {
            Ok(Some(wal)) if wal.needs_recovery() => {}
            _ => return Ok(()),
        }
        let _lock = self.writer_lock()?;
        if let Some(mut wal) = Wal::open(&path, self.object_hash(), None).map_err(wal_io(&path))?
            && wal.needs_recovery()
        {
            self.recover_with(&mut wal)?;
        }
        drop(_lock);
        self.merge_packs_if_wanted();
        Ok(())
    }

    /// Replays the log: every logged object that is missing or damaged is written again, the
    /// ref is put back on the last logged tip when it was left on an earlier logged tip (or is
    /// missing or unreadable), missing reflog lines are restored, and after a flush the log is
    /// emptied. The caller holds the writer lock.
    fn recover_with(&self, wal: &mut Wal) -> Result<(), StoreError> {
        let records = wal.records();
        self.restore_logged_objects(&records)?;
        self.pack_logged_objects(&records, None)?;
        let mut tip = self.tip_id().ok().flatten();
        if let Some(last) = records.last()
            && !self.refs_via_git()
        {
            // (Where git keeps the refs, it made each move durable before it was logged: only
            // the objects needed restoring.)
            let left_behind = match self.tip_id() {
                Ok(Some(id)) => id != last.new && self.behind_log(id, last.new, records.len()),
                Ok(None) | Err(_) => true,
            };
            if left_behind {
                self.write_ref_file(last.new)?;
                tip = Some(last.new);
            }
            self.restore_reflog(&records)?;
        }
        self.flush_repository()?;
        let path = wal.path().to_path_buf();
        wal.reset(tip).map_err(wal_io(&path))
    }

    /// Writes again every object of `records` that is missing or damaged (lost in a crash, or
    /// deleted by a `git prune` that began before the ref named it). Returns how many. The
    /// caller flushes.
    fn restore_logged_objects(&self, records: &[WalRecord]) -> Result<usize, StoreError> {
        let hash = self.object_hash();
        let mut restored = 0;
        for rec in records {
            for (kind, data) in &rec.objects {
                let o = object(hash, *kind, data.clone())?;
                if !self.object_intact(&o) {
                    self.write_loose_objects(std::slice::from_ref(&o), false, true)?;
                    restored += 1;
                }
            }
        }
        Ok(restored)
    }

    /// Restores from the log whatever of its appends' objects the object store lost (a prune
    /// racing an append deletes objects it took for garbage). The caller holds the writer
    /// lock. Returns how many objects were written again.
    pub(crate) fn restore_from_wal(&self) -> Result<usize, StoreError> {
        let path = self.wal_path();
        let Some(mut wal) = Wal::open(&path, self.object_hash(), None).map_err(wal_io(&path))?
        else {
            return Ok(0);
        };
        if wal.needs_recovery() {
            self.recover_with(&mut wal)?;
            return Ok(1);
        }
        let n = self.restore_logged_objects(&wal.records())?;
        if n > 0 {
            self.flush_repository()?;
        }
        Ok(n)
    }

    /// Object `id` as the write-ahead log holds it, read into `buf` (checked against its id),
    /// or `None`.
    pub(crate) fn logged_object(&self, id: &ObjectId, buf: &mut Vec<u8>) -> Option<Kind> {
        let path = self.wal_path();
        let wal = Wal::open(&path, self.object_hash(), None).ok()??;
        for rec in wal.records() {
            for (kind, data) in rec.objects {
                let candidate = gix::objs::compute_hash(self.object_hash(), kind, &data).ok()?;
                if candidate == *id {
                    *buf = data;
                    return Some(kind);
                }
            }
        }
        None
    }

    /// The records the write-ahead log holds (none when there is no log).
    pub(crate) fn wal_records(&self) -> Result<Vec<WalRecord>, StoreError> {
        let path = self.wal_path();
        Ok(Wal::open(&path, self.object_hash(), None)
            .map_err(wal_io(&path))?
            .map(|w| w.records())
            .unwrap_or_default())
    }

    /// Puts the ledger's ref back on `id` (doctor, after a deletion or damage outside git
    /// forum), with the reflog line `message`. The caller holds the writer lock.
    pub(crate) fn restore_ref(&self, id: ObjectId, message: &str) -> Result<(), StoreError> {
        if self.refs_via_git() {
            let id = id.to_string();
            return crate::store::refs::git_ok(
                self.common_dir(),
                &[
                    "update-ref",
                    "--create-reflog",
                    "-m",
                    message,
                    self.refname(),
                    &id,
                ],
            );
        }
        let old = self.tip_id().ok().flatten();
        self.write_ref_file(id)?;
        let line = format!(
            "{} {id} {} {} +0000\t{message}\n",
            old.unwrap_or_else(|| ObjectId::null(self.object_hash())),
            crate::store::codec::COMMITTER,
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0)
        );
        let path = self.reflog_path();
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(|e| io_err(d, e))?;
        }
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(line.as_bytes()))
            .map_err(|e| io_err(&path, e))
    }

    /// True when the ref value `id` trails the log's last tip `last`: it is one of the `logged`
    /// tips before it, or the one or two just before the log began (the ref's recycled inodes
    /// may surface the value either held when the log was last emptied), or it names a commit
    /// the crash lost. Any other value was set by something the log does not cover and is kept.
    fn behind_log(&self, id: ObjectId, last: ObjectId, logged: usize) -> bool {
        let mut buf = Vec::new();
        if self.read_entry_commit(&id, &mut buf).is_err() {
            return true;
        }
        let mut cur = Some(last);
        for _ in 0..logged + 2 {
            let Some(c) = cur else { break };
            cur = match self.read_entry_commit(&c, &mut buf) {
                Ok((_, _, parent)) => parent,
                Err(_) => None,
            };
            if cur == Some(id) {
                return true;
            }
        }
        false
    }

    /// True when `o` is in the object store with exactly its content.
    fn object_intact(&self, o: &Obj) -> bool {
        let mut buf = Vec::new();
        matches!(super::super::odb::try_find(self.repo(), &o.id, &mut buf),
            Ok(Some(kind)) if kind == o.kind && buf == o.data)
    }

    /// Points the ref at `id` by writing its file directly (it may be empty or garbage, which
    /// a ref transaction would refuse to read), under git's lock-file protocol.
    fn write_ref_file(&self, id: ObjectId) -> Result<(), StoreError> {
        let path = self.ref_path();
        let lock = PathBuf::from(format!("{}.lock", path.display()));
        // The caller holds the writer lock; its file says whose ref lock this may be.
        let held = OpenOptions::new()
            .read(true)
            .write(true)
            .open(self.writer_lock_path())
            .map_err(|e| io_err(&lock, e))?;
        let contended = || {
            StoreError::Contended(format!(
                "{} is being updated by another process; run the command again",
                path.display()
            ))
        };
        let noted = crate::store::lock::read_intent(&held, self.object_hash());
        if lock.exists() && !self.recover_stale_lock(&lock, &held, noted) {
            return Err(contended());
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
        }
        // Noted before the lock is taken, as an append notes it: were this process killed
        // holding the lock, the next writer knows the lock for a dead writer's and removes it
        // (without the note every later append waited on it and gave up).
        crate::store::lock::note_intent(&held, Some(&id));
        let value = format!("{id}\n");
        if !crate::store::lock::take_ref_lock(&self.spare_path(), &lock, value.as_bytes())? {
            crate::store::lock::note_intent(&held, None);
            return Err(contended());
        }
        crate::store::failpoint::failpoint("recover-ref-locked");
        std::fs::rename(&lock, &path).map_err(|e| io_err(&path, e))?;
        crate::store::lock::note_intent(&held, None);
        Ok(())
    }

    /// Appends a reflog line for every logged move the reflog lacks, after dropping a last line
    /// that a crash left incomplete.
    fn restore_reflog(&self, records: &[WalRecord]) -> Result<(), StoreError> {
        let path = self.reflog_path();
        let text = std::fs::read(&path).unwrap_or_default();
        // Keep whole, readable lines only.
        let mut keep = 0;
        for line in text.split_inclusive(|b| *b == b'\n') {
            if !line.ends_with(b"\n") || line.contains(&0) {
                break;
            }
            keep += line.len();
        }
        let present: HashSet<ObjectId> = self.reflog().iter().filter_map(|l| l.new).collect();
        let missing: Vec<&WalRecord> = records
            .iter()
            .filter(|r| !present.contains(&r.new))
            .collect();
        if keep == text.len() && missing.is_empty() {
            return Ok(());
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
        }
        let mut out = text[..keep].to_vec();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let null = ObjectId::null(self.object_hash());
        for r in missing {
            out.extend_from_slice(
                format!(
                    "{} {} git-forum <{AUTHOR_EMAIL}> {now} +0000\tforum: append (restored from the write-ahead log)\n",
                    r.old.unwrap_or(null),
                    r.new
                )
                .as_bytes(),
            );
        }
        let mut tmp =
            tempfile::NamedTempFile::new_in(path.parent().expect("a reflog has a directory"))
                .map_err(|e| io_err(&path, e))?;
        tmp.write_all(&out).map_err(|e| io_err(&path, e))?;
        tmp.persist(&path).map_err(|e| io_err(&path, e.error))?;
        Ok(())
    }
}

fn wal_io(path: &Path) -> impl Fn(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        context: format!("write-ahead log {}", path.display()),
        source,
    }
}

fn io_err(path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Io {
        context: path.display().to_string(),
        source,
    }
}
