//! The handle on one ledger in a git repository, [`GitStore`], and what opening it needs: its
//! settings, its name's rules, where its refs and files live. Everything else the store does is
//! a method on this handle, written in the module for its job (see `src/store/mod.rs`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use gix::ObjectId;
use gix::hash::Kind as HashKind;

use super::error::StoreError;
use crate::ledger::Entry;

/// How a durable append flushes (`git config forum.fsyncMethod wal|fsync|batch|syncfs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushMethod {
    /// The default on Linux: the append writes its objects and moves the ref without flushing
    /// them, then logs a record holding them to the ledger's write-ahead log
    /// (`.git/forum/wal/NAME.wal`, created zero-filled) and flushes that one file,
    /// which rewrites data blocks in place. After a power loss, the next command restores from
    /// the log whatever the disk lost (see `src/store/wal.rs`). Elsewhere it is `PerFile`.
    Wal,
    /// git's `core.fsyncMethod=batch` recipe (Linux): start writeback of each new object file,
    /// make them durable with one fsync, rename them into place, move the ref, then one fsync
    /// of the ref file commits the renames and the ref together. Two flushes per append; relies
    /// on a journaling filesystem committing metadata in order (ext4, xfs, btrfs), as git's
    /// batch mode does. Elsewhere it is the same as `PerFile`.
    Batch,
    /// fsync each new object file before its rename, then the ref, the reflog and every
    /// directory that gained a name: the objects themselves are durable, on any POSIX
    /// filesystem, journaled or not. The default where `Wal` is not available.
    PerFile,
    /// One `syncfs` after the objects and one after the ref (Linux; elsewhere the same as
    /// `PerFile`): two flushes however many files, but each also waits for every other
    /// process's unwritten data on the same filesystem.
    Syncfs,
}

impl Default for FlushMethod {
    fn default() -> FlushMethod {
        if cfg!(target_os = "linux") {
            FlushMethod::Wal
        } else {
            FlushMethod::PerFile
        }
    }
}

impl FlushMethod {
    /// Parses the `forum.fsyncMethod` value.
    pub fn parse(s: &str) -> Option<FlushMethod> {
        match s {
            "wal" => Some(FlushMethod::Wal),
            "batch" => Some(FlushMethod::Batch),
            "fsync" => Some(FlushMethod::PerFile),
            "syncfs" => Some(FlushMethod::Syncfs),
            _ => None,
        }
    }

    pub(super) fn syncfs(self) -> bool {
        cfg!(target_os = "linux") && self == FlushMethod::Syncfs
    }

    pub(super) fn batch(self) -> bool {
        cfg!(target_os = "linux") && self == FlushMethod::Batch
    }

    pub(crate) fn wal(self) -> bool {
        cfg!(target_os = "linux") && self == FlushMethod::Wal
    }
}

/// How long an append keeps retrying a contended ref before giving up.
pub const APPEND_DEADLINE: Duration = Duration::from_secs(30);

/// The default size of a log (`git config forum.walSize` changes it).
pub(crate) const DEFAULT_CAPACITY: u64 = 1 << 20;
/// The smallest log accepted.
pub(crate) const MIN_CAPACITY: u64 = 64 << 10;
/// The size a ledger's log is created at: the first appends of a ledger (a run in a fresh
/// repository) do not wait for a whole `forum.walSize` of zeros to be written and flushed; the
/// log is made again at full size the first time it fills.
pub(crate) const FIRST_CAPACITY: u64 = MIN_CAPACITY;

/// Where a ledger's signed checkpoints live.
pub(crate) fn checkpoints_ref(ledger: &str) -> String {
    format!("refs/forum/checkpoints/{ledger}")
}

/// Where every ledger ref lives.
pub(crate) const LEDGER_PREFIX: &str = "refs/forum/ledgers/";

/// Where adopted remote copies live.
pub(crate) const REMOTES_PREFIX: &str = "refs/forum/remotes/";

/// Where the signed checkpoints of adopted remote ledgers are kept.
pub(crate) const REMOTE_SIGNATURES_PREFIX: &str = "refs/forum/remote-checkpoints/";

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
            None => DEFAULT_CAPACITY,
            Some(n) if n >= MIN_CAPACITY as i64 && n <= (1 << 30) => n as u64,
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
            wal_size: DEFAULT_CAPACITY,
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
    pub(crate) tip_via_git: std::sync::Mutex<Option<SeenTip>>,
    /// An anonymous file made in the object directory before an append takes the writer lock,
    /// which the append's commit is written to and linked in under the lock (see
    /// `GitStore::ready_object_file`).
    pub(super) object_file: std::sync::Mutex<Option<std::fs::File>>,
    /// This handle wrote a pack under a lock: packs are merged once the lock is released (see
    /// `merge.rs`).
    pub(super) merge_wanted: std::sync::atomic::AtomicBool,
    /// The thread of this handle's last pack merge (see `merge.rs`).
    pub(super) merge_thread: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The objects this handle wrote, when its caller asked to read them back from memory
    /// (see `own_writes.rs`).
    pub(super) own: super::own_writes::OwnWrites,
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
            object_file: std::sync::Mutex::new(None),
            merge_wanted: std::sync::atomic::AtomicBool::new(false),
            merge_thread: std::sync::Mutex::new(None),
            own: Default::default(),
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
            object_file: std::sync::Mutex::new(None),
            merge_wanted: std::sync::atomic::AtomicBool::new(false),
            merge_thread: std::sync::Mutex::new(None),
            own: Default::default(),
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
            None => checkpoints_ref(&self.name),
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

/// How a repository stores its refs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RefStorage {
    /// Loose files under `refs/` plus `packed-refs`: git forum's fast path is git's own protocol.
    Files,
    /// Anything else (`reftable` today): refs are read and moved through `git`.
    Other(String),
}

impl RefStorage {
    /// The repository's ref storage, from `extensions.refStorage` (absent means files).
    pub(crate) fn of(repo: &gix::Repository) -> RefStorage {
        let config = repo.config_snapshot();
        match config.string("extensions.refStorage") {
            Some(v) if !v.to_string().eq_ignore_ascii_case("files") => {
                RefStorage::Other(v.to_string().to_ascii_lowercase())
            }
            _ => RefStorage::Files,
        }
    }

    /// The name git uses for it (`files`, `reftable`).
    pub(crate) fn name(&self) -> &str {
        match self {
            RefStorage::Files => "files",
            RefStorage::Other(s) => s,
        }
    }
}

/// A ledger ref's value as git reported it, and the reftable manifest it was read under.
#[derive(Debug, Clone)]
pub(crate) struct SeenTip {
    pub(super) manifest: Vec<u8>,
    pub(super) tip: Option<ObjectId>,
}
