//! Ledgers stored as git objects on `refs/forum/ledgers/NAME`.
//!
//! One commit per entry. The commit is a pure function of the entry and of whether its body is
//! present: its tree holds one blob, `payload.json`, the canonical payload bytes (an empty tree
//! once the body is redacted); its message is a human subject line, a blank line and the entry's
//! eight fields as canonical JSON; author and committer carry the entry's `ts` in whole seconds,
//! UTC. The same ledger therefore has the same commit ids on every machine, and `verify` rebuilds
//! every commit byte for byte.
//!
//! Appends are compare-and-swap on the ref. Writers of one ledger also serialise on an advisory
//! lock under `.git/forum/locks/` (released by the kernel when a writer dies), which keeps the
//! CAS retries rare and lets a writer recognise a ref `.lock` file left by a killed writer.
//!
//! The store is split by job: [`codec`](super::codec) (the pure commit encoder and parser),
//! [`lock`](super::lock) (writer lock, ref locks, the compare-and-swap),
//! [`append`](super::append) (the append loop), [`index`](super::index) (the seq index),
//! [`objects`](super::objects) and [`durable`](super::durable) (writing objects and flushing
//! them), [`wal`](super::wal) (the write-ahead log). This file holds the handle that ties them
//! together and the reads.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;

use gix::ObjectId;
use gix::objs::Kind;

use super::error::io;
use crate::ledger::canonical::{self, Value};
use crate::ledger::hash::sha256_hex;
use crate::ledger::{Entry, NewEntry, Storage, StorageError};

// The old paths, for callers across the crate.
pub use super::codec::{COMMITTER, PAYLOAD_FILE, commit_bytes, commit_message, tree_bytes};
pub(crate) use super::codec::{
    entry_from_message, entry_from_message_checked, hex_to_bytes, is_commit_of, object,
    parse_commit,
};
pub use super::durable::FlushMethod;
pub(crate) use super::error::StoreError;
pub(crate) use super::error::git_err;
pub use super::handle::APPEND_DEADLINE;
pub use super::handle::{Appended, GitStore, Options, Tip};
pub(crate) use super::handle::{LEDGER_PREFIX, ReflogLine, open_repo, validate_ledger_name};
pub use super::merge::MAX_PACKS;
pub(crate) use super::refs::CasOutcome;

impl GitStore {
    /// Reads the commit `id` and the entry it holds.
    pub(crate) fn read_entry_commit(
        &self,
        id: &ObjectId,
        buf: &mut Vec<u8>,
    ) -> Result<(Entry, ObjectId, Option<ObjectId>), StoreError> {
        let kind = self.read_raw(id, buf)?.ok_or_else(|| {
            StoreError::Corrupt(format!(
                "ledger {}: commit {id} is missing from the object store",
                self.name
            ))
        })?;
        if kind != Kind::Commit {
            return Err(StoreError::Corrupt(format!(
                "ledger {}: object {id} is a {kind}, not a commit",
                self.name
            )));
        }
        let raw = parse_commit(buf, self.hash).ok_or_else(|| {
            StoreError::Corrupt(format!(
                "ledger {}: commit {id} cannot be parsed",
                self.name
            ))
        })?;
        let entry = entry_from_message(raw.message)
            .map_err(|e| StoreError::Corrupt(format!("ledger {}: commit {id}: {e}", self.name)))?;
        Ok((entry, raw.tree, raw.parents.first().copied()))
    }

    /// The tip commit and its entry; `None` for a ledger that does not exist yet.
    pub fn tip(&self) -> Result<Option<Tip>, StoreError> {
        let Some(commit) = self.tip_id()? else {
            return Ok(None);
        };
        let mut last = self.last_tip.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tip) = last.as_ref().filter(|t| t.commit == commit) {
            return Ok(Some(tip.clone()));
        }
        let (entry, _, _) = self.read_entry_commit(&commit, &mut Vec::new())?;
        let tip = Tip {
            commit,
            entry,
            parts: None,
        };
        *last = Some(tip.clone());
        Ok(Some(tip))
    }

    /// The tip, or [`StoreError::NoLedger`].
    pub(crate) fn require_tip(&self) -> Result<Tip, StoreError> {
        self.tip()?
            .ok_or_else(|| StoreError::NoLedger(self.name.clone()))
    }

    /// Commit ids from the tip back to `stop_seq` (inclusive), newest first, with their entries.
    pub(crate) fn walk_back(
        &self,
        limit: Option<u64>,
    ) -> Result<Vec<(ObjectId, Entry)>, StoreError> {
        let mut out = Vec::new();
        let mut cur = self.tip_id()?;
        let mut buf = Vec::new();
        while let Some(id) = cur {
            if limit.is_some_and(|l| out.len() as u64 >= l) {
                break;
            }
            let (entry, _, parent) = self.read_entry_commit(&id, &mut buf)?;
            out.push((id, entry));
            cur = parent;
        }
        Ok(out)
    }

    /// The entries from the tip back to seq `first`, newest first, with their commit ids: a
    /// run's own entries are all at or after its request's seq, so reading them needs none
    /// of the older runs' (an append landing meanwhile is read too, never one missed).
    pub(crate) fn walk_back_to(&self, first: u64) -> Result<Vec<(ObjectId, Entry)>, StoreError> {
        let mut out = Vec::new();
        let mut cur = self.tip_id()?;
        let mut buf = Vec::new();
        while let Some(id) = cur {
            let (entry, _, parent) = self.read_entry_commit(&id, &mut buf)?;
            if entry.seq < first {
                break;
            }
            out.push((id, entry));
            cur = parent;
        }
        Ok(out)
    }

    /// The commit ids from `start` back to the root, oldest first. Callers that already read
    /// the tip pass it, so an append landing meanwhile cannot make the walk disagree with it.
    pub(super) fn chain_ids_from(
        &self,
        start: Option<ObjectId>,
    ) -> Result<Vec<ObjectId>, StoreError> {
        let mut ids = Vec::new();
        let mut cur = start;
        let mut buf = Vec::new();
        while let Some(id) = cur {
            let kind = self.read_raw(&id, &mut buf)?.ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "ledger {}: commit {id} is missing from the object store",
                    self.name
                ))
            })?;
            if kind != Kind::Commit {
                return Err(StoreError::Corrupt(format!(
                    "ledger {}: object {id} is not a commit",
                    self.name
                )));
            }
            let raw = parse_commit(&buf, self.hash).ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "ledger {}: commit {id} cannot be parsed",
                    self.name
                ))
            })?;
            ids.push(id);
            cur = raw.parents.first().copied();
        }
        ids.reverse();
        Ok(ids)
    }

    /// Every entry in seq order.
    pub fn entries(&self) -> Result<Vec<Entry>, StoreError> {
        let mut v: Vec<Entry> = self.walk_back(None)?.into_iter().map(|(_, e)| e).collect();
        v.reverse();
        Ok(v)
    }

    /// The commit holding entry `seq`, through the index under `.git/forum/index/` when it agrees
    /// with the ref, otherwise by walking back from the tip (and repairing the index).
    pub(crate) fn commit_at(&self, seq: u64) -> Result<Option<ObjectId>, StoreError> {
        let tip = self.require_tip()?;
        if seq > tip.entry.seq {
            return Ok(None);
        }
        if seq == tip.entry.seq {
            return Ok(Some(tip.commit));
        }
        let ids = self.index_for(&tip)?;
        Ok(ids.get(seq))
    }

    /// The entry at `seq` and its commit.
    pub(crate) fn get_with_commit(
        &self,
        seq: u64,
    ) -> Result<Option<(Entry, ObjectId)>, StoreError> {
        let Some(id) = self.commit_at(seq)? else {
            return Ok(None);
        };
        let (entry, _, _) = self.read_entry_commit(&id, &mut Vec::new())?;
        if entry.seq != seq {
            return Err(StoreError::Corrupt(format!(
                "ledger {}: commit {id} holds seq {} where seq {seq} belongs; run `git forum verify`",
                self.name, entry.seq
            )));
        }
        Ok(Some((entry, id)))
    }

    /// The body of the entry in commit `id`: `Ok(None)` when the body is absent (redacted).
    ///
    /// A body is handed out only after it was checked: its SHA-256 must be the entry's
    /// `payload_hash`. A blob replaced by another valid object (a rebuilt tree, an overwritten
    /// object file) is an error naming the seq, never a body served as if it were the record.
    pub(crate) fn body_of_commit(&self, id: &ObjectId) -> Result<Option<Vec<u8>>, StoreError> {
        let mut buf = Vec::new();
        let (entry, tree, _) = self.read_entry_commit(id, &mut buf)?;
        let damaged = |what: String| {
            StoreError::Corrupt(format!(
                "ledger {}: {what}, so it is not used; run `git forum --ledger {} verify --deep` to see the damage and `git forum doctor` for a repair",
                self.name, self.name
            ))
        };
        let blob = match self.blob_in_tree(&tree, &mut buf) {
            Ok(Some(blob)) => blob,
            Ok(None) => return Ok(None),
            Err(StoreError::Corrupt(m)) => {
                let m = m
                    .strip_prefix(&format!("ledger {}: ", self.name))
                    .unwrap_or(&m);
                return Err(damaged(format!("the body of seq {}: {m}", entry.seq)));
            }
            Err(e) => return Err(e),
        };
        match self.read_raw(&blob, &mut buf)? {
            Some(Kind::Blob) => {}
            Some(k) => {
                return Err(damaged(format!(
                    "the body of seq {} ({blob}) is a {k}, not a blob",
                    entry.seq
                )));
            }
            None => {
                return Err(damaged(format!(
                    "the body of seq {} (blob {blob}) is missing from the object store",
                    entry.seq
                )));
            }
        }
        if sha256_hex(&buf) != entry.payload_hash {
            return Err(damaged(format!(
                "the body of seq {} (blob {blob}) does not hash to its payload_hash: it was replaced or damaged",
                entry.seq
            )));
        }
        Ok(Some(buf))
    }

    /// The body of entry `seq`, parsed.
    pub fn payload_at(&self, seq: u64) -> Result<Option<Value>, StoreError> {
        let Some(id) = self.commit_at(seq)? else {
            return Ok(None);
        };
        match self.body_of_commit(&id)? {
            None => Ok(None),
            Some(bytes) => {
                let text = String::from_utf8(bytes).map_err(|_| {
                    StoreError::Corrupt(format!(
                        "ledger {}: body of seq {seq} is not UTF-8",
                        self.name
                    ))
                })?;
                canonical::parse(&text).map(Some).map_err(|e| {
                    StoreError::Corrupt(format!(
                        "ledger {}: body of seq {seq} is not JSON: {e}",
                        self.name
                    ))
                })
            }
        }
    }

    /// The blob named in an entry tree; `None` for the empty (redacted) tree.
    pub(crate) fn blob_in_tree(
        &self,
        tree: &ObjectId,
        buf: &mut Vec<u8>,
    ) -> Result<Option<ObjectId>, StoreError> {
        match self.read_raw(tree, buf)? {
            Some(Kind::Tree) => {}
            Some(k) => {
                return Err(StoreError::Corrupt(format!(
                    "ledger {}: {tree} is a {k}, not a tree",
                    self.name
                )));
            }
            None => {
                return Err(StoreError::Corrupt(format!(
                    "ledger {}: tree {tree} is missing",
                    self.name
                )));
            }
        }
        if buf.is_empty() {
            return Ok(None);
        }
        let prefix = format!("100644 {PAYLOAD_FILE}\0");
        let rest = buf
            .strip_prefix(prefix.as_bytes())
            .filter(|r| r.len() == self.hash.len_in_bytes())
            .ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "ledger {}: tree {tree} is not a ledger entry tree",
                    self.name
                ))
            })?;
        Ok(Some(ObjectId::from_bytes_or_panic(rest)))
    }

    // ----- checkpoints recorded locally -----

    fn checkpoints_path(&self) -> PathBuf {
        self.forum_dir()
            .join("checkpoints")
            .join(format!("{}.jsonl", self.name))
    }

    /// Records `(size, root)` as a witness that later verifies compare against.
    pub(crate) fn record_checkpoint(&self, size: u64, root: &str) -> Result<(), StoreError> {
        let path = self.checkpoints_path();
        if let Some(d) = path.parent() {
            fs::create_dir_all(d).map_err(io(format!("creating {}", d.display())))?;
        }
        let line = serde_json::json!({ "size": size, "root": root }).to_string();
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io(format!("opening {}", path.display())))?;
        f.write_all(format!("{line}\n").as_bytes())
            .map_err(io(format!("writing {}", path.display())))?;
        if self.opts.fsync {
            f.sync_all()
                .map_err(io(format!("fsync {}", path.display())))?;
        }
        Ok(())
    }

    /// Checkpoints recorded for this ledger, oldest first.
    pub(crate) fn recorded_checkpoints(&self) -> Vec<(u64, String)> {
        let Ok(text) = fs::read_to_string(self.checkpoints_path()) else {
            return Vec::new();
        };
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| {
                Some((
                    v.get("size")?.as_u64()?,
                    v.get("root")?.as_str()?.to_string(),
                ))
            })
            .collect()
    }

    /// The ref's reflog, oldest first, read line by line: each line's new value (`None` when it
    /// is not an object id) and whether the line records a sanctioned rewrite (a redaction).
    pub(crate) fn reflog(&self) -> Vec<ReflogLine> {
        use std::io::BufRead;
        if self.refs_via_git {
            return self.reflog_via_git();
        }
        let Ok(f) = File::open(self.reflog_path()) else {
            return Vec::new();
        };
        std::io::BufReader::new(f)
            .lines()
            .map_while(Result::ok)
            .map(|l| {
                let (head, msg) = l.split_once('\t').unwrap_or((&l, ""));
                let mut ids = head
                    .split(' ')
                    .map(|h| ObjectId::from_hex(h.as_bytes()).ok());
                let old = ids.next().flatten();
                let new = ids.next().flatten();
                ReflogLine {
                    old,
                    new,
                    rewrite: msg.starts_with("forum: rewrite"),
                }
            })
            .collect()
    }
}

impl Storage for GitStore {
    fn len(&self) -> Result<u64, StorageError> {
        Ok(self.tip()?.map(|t| t.entry.seq + 1).unwrap_or(0))
    }

    fn head(&self) -> Result<Option<Entry>, StorageError> {
        Ok(self.tip()?.map(|t| t.entry))
    }

    fn get(&self, seq: u64) -> Result<Option<Entry>, StorageError> {
        if self.tip_id()?.is_none() {
            return Ok(None);
        }
        Ok(self.get_with_commit(seq)?.map(|(e, _)| e))
    }

    fn payload(&self, payload_hash: &str) -> Result<Option<Value>, StorageError> {
        for (id, e) in self.walk_back(None)? {
            if e.payload_hash == payload_hash {
                return match self.body_of_commit(&id)? {
                    Some(bytes) => {
                        let text = String::from_utf8(bytes)
                            .map_err(|_| StorageError::Corrupt("body is not UTF-8".into()))?;
                        Ok(Some(
                            canonical::parse(&text)
                                .map_err(|e| StorageError::Corrupt(e.to_string()))?,
                        ))
                    }
                    None => Ok(None),
                };
            }
        }
        Ok(None)
    }

    /// The body through the entry's own commit: no walk of the chain.
    fn payload_at(&self, seq: u64) -> Result<Option<Value>, StorageError> {
        if self.tip_id()?.is_none() {
            return Ok(None);
        }
        Ok(GitStore::payload_at(self, seq)?)
    }

    fn append(&mut self, new: NewEntry) -> Result<Entry, StorageError> {
        Ok(self.append_entry(&new)?.entry)
    }

    fn append_at(&mut self, seq: u64, new: NewEntry) -> Result<Option<Entry>, StorageError> {
        Ok(self.append_entry_at(&new, Some(seq))?.map(|a| a.entry))
    }

    fn append_batch(&mut self, batch: Vec<NewEntry>) -> Result<Vec<Entry>, StorageError> {
        Ok(self
            .append_entries(&batch)?
            .into_iter()
            .map(|a| a.entry)
            .collect())
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        Ok(GitStore::sync(self)?)
    }
}
