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
use std::path::{Path, PathBuf};

use gix::ObjectId;
use gix::hash::Kind as HashKind;
use gix::objs::{Find as _, Kind};

use super::error::io;
use super::lock::read_without_stat;
use super::refs::RefStorage;
use crate::ledger::canonical::{self, Value};
use crate::ledger::hash::sha256_hex;
use crate::ledger::{Entry, NewEntry, Storage, StorageError};

// The old paths, for callers across the crate.
pub(crate) use super::append::failpoint;
pub use super::append::{APPEND_DEADLINE, MAX_PACKS};
pub use super::codec::{COMMITTER, PAYLOAD_FILE, commit_bytes, commit_message, tree_bytes};
pub(crate) use super::codec::{
    entry_from_message, entry_from_message_checked, hex_to_bytes, is_commit_of, object,
    parse_commit,
};
pub use super::durable::FlushMethod;
pub(crate) use super::error::StoreError;
pub(crate) use super::error::git_err;
pub(crate) use super::lock::CasOutcome;

/// Where every ledger ref lives.
pub(crate) const LEDGER_PREFIX: &str = "refs/forum/ledgers/";

/// Checks a ledger name against git's ref-name rules (`git check-ref-format`) plus our own:
/// no leading `-` (it would read as an option) and nothing but printable ASCII.
pub(crate) fn validate_ledger_name(name: &str) -> Result<(), StoreError> {
    let bad = |why: &str| {
        Err(StoreError::InvalidName {
            name: name.to_string(),
            why: why.to_string(),
        })
    };
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.starts_with('-') {
        return bad("it starts with '-'");
    }
    if let Some(c) = name.chars().find(|c| !c.is_ascii_graphic()) {
        return bad(&format!(
            "it contains {c:?}; use printable ASCII without spaces"
        ));
    }
    if let Some(c) = name.chars().find(|c| "~^:?*[\\".contains(*c)) {
        return bad(&format!(
            "it contains {c:?}, which git does not allow in ref names"
        ));
    }
    if name.contains("..") || name.contains("@{") || name == "@" || name.contains("//") {
        return bad(
            "it contains '..', '@{', '//' or is '@', which git does not allow in ref names",
        );
    }
    if name.ends_with('/') || name.ends_with('.') {
        return bad("it ends with '/' or '.'");
    }
    for part in name.split('/') {
        if part.starts_with('.') || part.ends_with(".lock") {
            return bad("a component starts with '.' or ends with '.lock'");
        }
    }
    gix::refs::FullName::try_from(format!("{LEDGER_PREFIX}{name}")).map_err(|e| {
        StoreError::InvalidName {
            name: name.into(),
            why: e.to_string(),
        }
    })?;
    Ok(())
}

/// The commit a ledger ref points to and the entry it holds.
#[derive(Debug, Clone)]
pub struct Tip {
    pub(crate) commit: ObjectId,
    pub(crate) entry: Entry,
    /// The entry's tree and body (none when redacted), when known: an append that just wrote
    /// them knows them, so the next one checks they are still there without reading anything.
    pub(crate) parts: Option<(ObjectId, Option<ObjectId>)>,
}

/// What an append returns.
#[derive(Debug, Clone)]
pub struct Appended {
    pub entry: Entry,
    pub commit: ObjectId,
}

/// Options for opening a store.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// fsync objects and the ref before an append returns (the default).
    pub fsync: bool,
    /// How an append makes itself durable.
    pub method: FlushMethod,
    /// The size of a ledger's write-ahead log in bytes (`forum.walSize`).
    pub wal_size: u64,
}

impl Options {
    /// The durability the repository's git config asks for (`forum.fsync`, default true;
    /// `forum.fsyncMethod`), with `no_fsync` (the `--no-fsync` flag) deferring every flush.
    pub fn from_config(repo: &gix::Repository, no_fsync: bool) -> Result<Options, StoreError> {
        let config = repo.config_snapshot();
        let fsync = config.boolean("forum.fsync").unwrap_or(true);
        let method = match config.string("forum.fsyncMethod") {
            None => FlushMethod::default(),
            Some(v) => FlushMethod::parse(&v.to_string()).ok_or_else(|| {
                StoreError::Invalid(format!(
                    "git config forum.fsyncMethod is {:?}; use \"wal\", \"fsync\", \"batch\" or \"syncfs\"",
                    v.to_string()
                ))
            })?,
        };
        let wal_size = match config.integer("forum.walSize") {
            None => super::wal::DEFAULT_CAPACITY,
            Some(n) if n >= super::wal::MIN_CAPACITY as i64 && n <= (1 << 30) => n as u64,
            Some(n) => {
                return Err(StoreError::Invalid(format!(
                    "git config forum.walSize is {n}; use a size from 64k to 1g (default 1m)"
                )));
            }
        };
        Ok(Options {
            fsync: !no_fsync && fsync,
            method,
            wal_size,
        })
    }
}

impl Default for Options {
    fn default() -> Options {
        Options {
            fsync: true,
            method: FlushMethod::default(),
            wal_size: super::wal::DEFAULT_CAPACITY,
        }
    }
}

/// Opens the repository that contains `dir` (honouring `GIT_DIR`).
pub(crate) fn open_repo(dir: &Path) -> Result<gix::Repository, StoreError> {
    let repo = gix::ThreadSafeRepository::discover_with_environment_overrides(dir)
        .map_err(|e| StoreError::NotARepo(format!("{e}")))?;
    Ok(repo.to_thread_local())
}

/// A ledger in a git repository.
pub struct GitStore {
    pub(super) repo: gix::Repository,
    pub(super) name: String,
    pub(super) refname: String,
    pub(super) hash: HashKind,
    pub(super) opts: Options,
    /// Where refs, reflogs and `forum/` live (the common dir of a worktree).
    pub(super) common_dir: PathBuf,
    /// For a copy held under another ref (a fetched one): the ledger name its checkpoint
    /// signatures sign, and the ref holding them.
    pub(super) signatures_at: Option<(String, String)>,
    /// The last tip this handle read or wrote. A commit id names its content, so when the ref
    /// still names this commit its entry need not be read and parsed again.
    pub(super) last_tip: std::sync::Mutex<Option<Tip>>,
    /// The repository keeps refs somewhere other than files (reftable): the ledger ref is read
    /// and moved through `git` (see `refs.rs`), never as a loose file.
    pub(super) refs_via_git: bool,
    /// How long an append keeps retrying a contended ref ([`APPEND_DEADLINE`]; tests shorten
    /// it to provoke a lost compare-and-swap).
    pub(super) append_deadline: std::time::Duration,
    /// Where refs are read through git: the last value read, with the reftable manifest it was
    /// read under (see `refs.rs`).
    pub(crate) tip_via_git: std::sync::Mutex<Option<super::refs::SeenTip>>,
}

impl GitStore {
    /// Opens ledger `name` in `repo`. Reads nothing but the repository configuration: the ledger
    /// may not exist yet (the first append creates it).
    pub fn new(repo: gix::Repository, name: &str, opts: Options) -> Result<GitStore, StoreError> {
        validate_ledger_name(name)?;
        let hash = repo.object_hash();
        let common_dir = repo.common_dir().to_path_buf();
        let refs_via_git = RefStorage::of(&repo) != RefStorage::Files;
        let store = GitStore {
            repo,
            name: name.to_string(),
            refname: format!("{LEDGER_PREFIX}{name}"),
            hash,
            opts,
            common_dir,
            signatures_at: None,
            last_tip: std::sync::Mutex::new(None),
            refs_via_git,
            append_deadline: APPEND_DEADLINE,
            tip_via_git: std::sync::Mutex::new(None),
        };
        // After a reboot, restore what the write-ahead log holds and the disk lost. A failure
        // leaves the repository as it is: reads then see (and verify reports) the real state,
        // and the next append retries.
        let _ = store.recover_wal_if_needed();
        Ok(store)
    }

    /// Opens ledger `name` in the repository containing `dir`.
    pub fn open(dir: &Path, name: &str, opts: Options) -> Result<GitStore, StoreError> {
        GitStore::new(open_repo(dir)?, name, opts)
    }

    /// Opens the ledger held at any full ref name, such as a fetched copy at
    /// `refs/forum/incoming/origin/main` that must verify before it is adopted. Its name (used in
    /// messages and for the files under `.git/forum/`) is the ref name without
    /// `refs/forum/ledgers/`, `refs/forum/` or `refs/`, so a copy elsewhere never picks up the
    /// local ledger's recorded checkpoints or index; `at_ref(repo, "refs/forum/ledgers/x", o)`
    /// is the same as `new(repo, "x", o)`.
    pub(crate) fn at_ref(
        repo: gix::Repository,
        refname: &str,
        opts: Options,
    ) -> Result<GitStore, StoreError> {
        let name = refname
            .strip_prefix(LEDGER_PREFIX)
            .or_else(|| refname.strip_prefix("refs/forum/"))
            .or_else(|| refname.strip_prefix("refs/"))
            .ok_or_else(|| StoreError::InvalidName {
                name: refname.to_string(),
                why: "a ledger ref must be a full ref name starting with refs/".into(),
            })?;
        validate_ledger_name(name)?;
        gix::refs::FullName::try_from(refname).map_err(|e| StoreError::InvalidName {
            name: refname.to_string(),
            why: e.to_string(),
        })?;
        let hash = repo.object_hash();
        let common_dir = repo.common_dir().to_path_buf();
        let refs_via_git = RefStorage::of(&repo) != RefStorage::Files;
        Ok(GitStore {
            repo,
            name: name.to_string(),
            refname: refname.to_string(),
            hash,
            opts,
            common_dir,
            signatures_at: None,
            last_tip: std::sync::Mutex::new(None),
            refs_via_git,
            append_deadline: APPEND_DEADLINE,
            tip_via_git: std::sync::Mutex::new(None),
        })
    }

    /// Reads checkpoint signatures for `ledger` from `refname` (a fetched copy's signatures sit
    /// beside it, not on the local ledger's ref).
    pub(crate) fn with_signatures(mut self, ledger: &str, refname: &str) -> GitStore {
        self.signatures_at = Some((ledger.to_string(), refname.to_string()));
        self
    }

    /// The ledger name checkpoint signatures sign.
    pub(crate) fn signature_ledger(&self) -> &str {
        self.signatures_at
            .as_ref()
            .map(|(l, _)| l.as_str())
            .unwrap_or(&self.name)
    }

    /// The ref holding this ledger's signed checkpoints.
    pub(crate) fn signatures_ref(&self) -> String {
        match &self.signatures_at {
            Some((_, r)) => r.clone(),
            None => super::sign::checkpoints_ref(&self.name),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn refname(&self) -> &str {
        &self.refname
    }

    pub(crate) fn repo(&self) -> &gix::Repository {
        &self.repo
    }

    pub(crate) fn object_hash(&self) -> HashKind {
        self.hash
    }

    pub(crate) fn options(&self) -> &Options {
        &self.opts
    }

    /// Where refs, reflogs and `forum/` live (the common dir of a worktree).
    pub(crate) fn common_dir(&self) -> &Path {
        &self.common_dir
    }

    /// True when refs are kept by git's own non-files storage (reftable) and so are read and
    /// moved through `git`.
    pub(crate) fn refs_via_git(&self) -> bool {
        self.refs_via_git
    }

    pub(crate) fn forum_dir(&self) -> PathBuf {
        self.common_dir.join("forum")
    }

    pub(crate) fn objects_dir(&self) -> PathBuf {
        self.repo.objects.store_ref().path().to_path_buf()
    }

    pub(crate) fn ref_path(&self) -> PathBuf {
        self.common_dir.join(&self.refname)
    }

    pub(crate) fn reflog_path(&self) -> PathBuf {
        self.common_dir.join("logs").join(&self.refname)
    }

    /// The ref's current target, `None` when the ledger does not exist. A ref file that exists
    /// but cannot be read as an object id is corruption, never an empty ledger.
    pub(crate) fn tip_id(&self) -> Result<Option<ObjectId>, StoreError> {
        if self.refs_via_git {
            return self.tip_id_via_git();
        }
        let path = self.ref_path();
        match read_without_stat(&path) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                let text = text.trim();
                return ObjectId::from_hex(text.as_bytes())
                    .ok()
                    .filter(|id| id.kind() == self.hash)
                    .map(Some)
                    .ok_or_else(|| {
                        StoreError::Corrupt(format!(
                            "ledger ref {} is {} ({}); restore it from its reflog (`git reflog show {}`)",
                            self.refname,
                            if bytes.is_empty() { "an empty file" } else { "not an object id" },
                            path.display(),
                            self.refname
                        ))
                    });
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    || e.kind() == std::io::ErrorKind::NotADirectory => {}
            Err(e) => return Err(io(format!("reading {}", path.display()))(e)),
        }
        // Not a loose ref: it may be packed.
        match self.repo.try_find_reference(self.refname.as_str()) {
            Ok(Some(r)) => Ok(r.try_id().map(|id| id.detach())),
            Ok(None) => Ok(None),
            Err(e) => Err(StoreError::Corrupt(format!(
                "cannot read ledger ref {}: {e}",
                self.refname
            ))),
        }
    }

    /// True when the ledger exists.
    pub(crate) fn exists(&self) -> Result<bool, StoreError> {
        Ok(self.tip_id()?.is_some())
    }

    /// Reads object `id` into `buf`. An object missing from the object store but held by the
    /// write-ahead log (a prune that listed the refs before an append moved its ref deletes
    /// that append's objects afterwards; see `wal/recover.rs`) is read from the log: its id is
    /// the hash of its content, so the copy is exact. [`read_stored`](Self::read_stored) reads
    /// the object store alone.
    pub(crate) fn read_raw(
        &self,
        id: &ObjectId,
        buf: &mut Vec<u8>,
    ) -> Result<Option<Kind>, StoreError> {
        match self.read_stored(id, buf) {
            Ok(Some(kind)) => return Ok(Some(kind)),
            Ok(None) => {}
            Err(e) => {
                return self
                    .read_fresh(id, buf, 1)
                    .map(Some)
                    .or_else(|| self.logged_object(id, buf).map(Some))
                    .ok_or(e);
            }
        }
        Ok(self
            .read_fresh(id, buf, 1)
            .or_else(|| self.logged_object(id, buf)))
    }

    /// Object `id` looked up through a new handle on the object store, up to `tries` times a
    /// moment apart. A handle that has been open a while can miss an object a concurrent
    /// `git repack` just moved: it knows the old pack's index, whose pack is gone, and the new
    /// pack only once it looks again.
    pub(crate) fn read_fresh(&self, id: &ObjectId, buf: &mut Vec<u8>, tries: u32) -> Option<Kind> {
        for attempt in 0..tries {
            if attempt > 0 {
                std::thread::sleep(std::time::Duration::from_millis(20 << attempt));
            }
            let Ok(repo) = gix::open(&self.common_dir) else {
                continue;
            };
            if let Ok(Some(d)) = repo.objects.try_find(id, buf) {
                return Some(d.kind);
            }
        }
        None
    }

    /// Reads object `id` from the object store alone (no write-ahead log).
    pub(crate) fn read_stored(
        &self,
        id: &ObjectId,
        buf: &mut Vec<u8>,
    ) -> Result<Option<Kind>, StoreError> {
        match self.repo.objects.try_find(id, buf) {
            Ok(Some(d)) => Ok(Some(d.kind)),
            Ok(None) => Ok(None),
            Err(e) => Err(super::error::gix_err(format!("reading object {id}"), e)),
        }
    }

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

/// One line of a ledger ref's reflog, as verify needs it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReflogLine {
    pub(crate) old: Option<ObjectId>,
    pub(crate) new: Option<ObjectId>,
    /// The line records a sanctioned rewrite (a redaction), after which older lines describe a
    /// chain that no longer exists.
    pub(crate) rewrite: bool,
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
